/* SPDX-License-Identifier: MIT */
/*
 * Plugin stages: a pipeline stage of kind "plugin", whose code lives in a
 * shared object implementing <gpuframe/plugin.h> (kernels/gpuframe_plugin.h).
 *
 * A stage is made from what the configuration (or a LIST reply) says of it,
 * the shared object's path, the directory of the configuration and the
 * "params" object as text, and starts unloaded.  gf_plugin_stage_open()
 * (protocol/stages_json.c, which reads the parameters with the plugin's table)
 * loads it: dlopen, the entry point, the ABI version, then create() on the
 * values and describe() (its frames as tensors, checked).  The daemon opens every stage when it
 * loads its configuration; a client opens one only to verify results (gpuframe stream --verify), so
 * `gpuframe list` never loads a plugin.
 *
 * A stage is shared by every copy of the pipeline that names it (the
 * configuration, the slots whose frames run it) through a reference count;
 * the last release calls device_close and destroy (on a worker thread, in
 * the daemon: gf_plugin_set_reaper), so a stage removed by a reload lives
 * until its last frame has completed.  The shared object itself
 * stays mapped (RTLD_NODELETE: plugin.c says why).
 * References are atomic: frames on several shards' loops hold the stage.
 *
 * Part of gfpipelines: no CUDA and no cJSON here.
 */
#ifndef GF_PLUGIN_H
#define GF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "gpuframe_plugin.h"
#include "pipeline.h"

/* The kind a configuration or LIST gives a plugin stage. */
#define GF_PLUGIN_KIND_NAME "plugin"

/* Most parameters a plugin may declare. */
#define GF_PLUGIN_PARAMS_MAX 32

/*
 * A new unloaded stage with one reference: the shared object at `path` (made
 * absolute against `config_dir` if relative), the configuration's directory
 * and the text of its "params" object (NULL: none).  NULL when out of memory.
 */
gf_plugin_stage *gf_plugin_stage_new(const char *path, const char *config_dir,
                                     const char *params_json);

/*
 * A built-in plugin stage: what a stage of a kind with device_api (image,
 * spectrogram) holds in params.plugin, so that the CUDA engine opens its
 * device state, launches its batches and closes it through exactly the
 * machinery of a plugin's (reference count, one device side per device,
 * the reaper).  No shared object: its state is a copy of `params` (the
 * stage's, its own plugin pointer cleared), and its plugin description is
 * the kind's device API, which only the daemon links (gfkernels): given at
 * gf_plugin_stage_open_device_api.  The stage's kind stays the built-in
 * one.  NULL when out of memory.
 */
gf_plugin_stage *gf_plugin_stage_new_builtin(const gf_params *params);

/* Nonzero for a stage made by gf_plugin_stage_new_builtin. */
int gf_plugin_stage_is_builtin(const gf_plugin_stage *st);

/* Nonzero when the stage knows its frames' lengths: created, or unloaded
 * with fixed lengths from a LIST reply (gf_plugin_stage_set_listed_desc),
 * which its kind's output_bytes then answers by. */
int gf_plugin_stage_lengths_known(const gf_plugin_stage *st);

/* Names an unloaded stage's kind after what a LIST reply says the plugin is
 * called ("mlp"), so that a client that never loads it still shows it.
 * Returns 0 or -1 when out of memory. */
int gf_plugin_stage_set_listed_name(gf_plugin_stage *st, const char *name);

/* Gives an unloaded stage the frames a LIST reply describes ("inputs" and
 * "outputs", read and checked by protocol/frame_desc_json.c), so that a
 * client that never loads it still knows them.  A created stage keeps its
 * own describe()'s. */
void gf_plugin_stage_set_listed_desc(gf_plugin_stage *st, const gf_frame_desc *in,
                                     const gf_frame_desc *out);

/* What the stage was made from: the absolute path, the directory, the params
 * text ("" for none). */
const char *gf_plugin_stage_path(const gf_plugin_stage *st);
const char *gf_plugin_stage_config_dir(const gf_plugin_stage *st);
const char *gf_plugin_stage_params_json(const gf_plugin_stage *st);

/*
 * Loads the shared object and checks its entry point and ABI version and its
 * parameter table.  Returns its description, or NULL with one line in
 * why[why_len] ("cannot load ...: <dlerror>", "no symbol gf_plugin_entry",
 * "ABI version 3; this gpuframed speaks 1 to 2", ...).  Idempotent.
 */
const gf_plugin *gf_plugin_stage_dlopen(gf_plugin_stage *st, char *why, size_t why_len);

/* Calls the plugin's create() on `values` (param_count of them, strings
 * copied) for inputs of at most max_input_bytes, then its describe() (or the
 * fallback of gpuframe_plugin.h for one without), checked with
 * gf_frame_desc_check and against output_bytes().  Returns 0, or -1 with the
 * plugin's reason in why[why_len]. */
int gf_plugin_stage_create(gf_plugin_stage *st, const gf_plugin_value *values,
                           uint64_t max_input_bytes, char *why, size_t why_len);

/* The loaded plugin (NULL until gf_plugin_stage_dlopen succeeds) and its
 * state (NULL until created). */
const gf_plugin *gf_plugin_stage_api(const gf_plugin_stage *st);

/* A number no other stage of this process had or will have, unlike its
 * address: what a cache of launches keyed on the stage may compare. */
uint64_t gf_plugin_stage_serial(const gf_plugin_stage *st);
void *gf_plugin_stage_state(const gf_plugin_stage *st);

/* The frames one launch_batch call of `api` takes: 0 when it has none (a
 * version-1 plugin, or one without it), else its max_batch_frames. */
static inline uint32_t gf_plugin_batch_frames(const gf_plugin *api) {
    return api->abi_version >= 2 && api->launch_batch ? api->max_batch_frames : 0;
}

/* Whether gpuframed may capture `api`'s launches into its CUDA graphs
 * (GF_PLUGIN_NO_GRAPHS unset, or a plugin older than version 3). */
static inline int gf_plugin_graphs_ok(const gf_plugin *api) {
    return api->abi_version < 3 || !(api->flags & GF_PLUGIN_NO_GRAPHS);
}

/* Nonzero when `s` is a plugin's kind or parameter name as the config and
 * LIST spell them: [a-z0-9_]+, shorter than a pipeline name. */
int gf_plugin_name_ok(const char *s);

/* The kind to put in a gf_stage: named after the plugin once loaded
 * ("plugin" before), its functions call the plugin's with its state. */
const gf_pipeline_kind *gf_plugin_stage_kind(gf_plugin_stage *st);

/* Nonzero when `kind` is a plugin stage's (gf_plugin_stage_kind). */
int gf_kind_is_plugin(const gf_pipeline_kind *kind);

/*
 * The device side (the CUDA engine): device_open on CUDA device `device`
 * (current on the calling thread) for `streams` streams, once per device,
 * whichever thread comes first (a mutex); then the handle launches on that
 * device go to.  Every shard on a device launches with its own stream
 * indices (stream_base + slot), so `streams` counts the device's shards'
 * slots.  Returns 0, or -1 with why[] (the plugin has no device side, or
 * its device_open failed), or GF_PLUGIN_OPEN_FAILED_BEFORE with the same
 * why[] when device_open already failed on this device for this stage: it
 * is not tried again (loading a model takes seconds, and fails the same
 * way), and the caller that got -1 has said why.
 */
#define GF_PLUGIN_OPEN_FAILED_BEFORE (-2)
/* The longest reason a plugin's create or device_open gives
 * (gpuframe_plugin.h): the torch plugin's names two paths, the package and what it unpacked, before
 * PyTorch's own words (an undefined symbol's name, last). */
#define GF_PLUGIN_WHY_BYTES 1024
int gf_plugin_stage_open_device(gf_plugin_stage *st, int device, uint32_t streams, char *why,
                                size_t why_len);
void *gf_plugin_stage_device(const gf_plugin_stage *st, int device);

/* gf_plugin_stage_open_device for a built-in plugin stage, whose device API
 * (gf_kernel_device_api) the caller gives: bound to the stage on the first
 * call (under the same lock), then opened as a plugin's.  For a stage that
 * has its API already (a plugin's, or a built-in one opened before), `api`
 * must be that one. */
int gf_plugin_stage_open_device_api(gf_plugin_stage *st, const gf_plugin *api, int device,
                                    uint32_t streams, char *why, size_t why_len);

void gf_plugin_stage_retain(gf_plugin_stage *st);
/* Drops a reference; the last one hands the stage to the reaper, if one is
 * set, or else destroys it at once (gf_plugin_stage_destroy). */
void gf_plugin_stage_release(gf_plugin_stage *st);

/* Closes the device side (device_close may synchronise the device), destroys
 * the state and frees the stage.  Any thread; nothing else may use `st`. */
void gf_plugin_stage_destroy(gf_plugin_stage *st);

/* Where stages whose last reference is dropped go instead of being destroyed
 * on the releasing thread: the daemon sets one that destroys them on a
 * worker thread, so that its loop never waits for device_close's
 * synchronisation; NULL (the default, and at shutdown) destroys at once.
 * The reaper is called on the thread that drops the last reference, and
 * must call gf_plugin_stage_destroy exactly once.  Any thread may set it. */
typedef void (*gf_plugin_reaper)(gf_plugin_stage *st);
void gf_plugin_set_reaper(gf_plugin_reaper reaper);

#endif

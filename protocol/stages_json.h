/* SPDX-License-Identifier: MIT */
/*
 * A pipeline's stages from JSON, made ready to run: each stage read (a
 * built-in kind and its parameters, or a plugin's path and its "params"),
 * plugin stages loaded with their parameters read by the plugin's own table,
 * and the chain checked so that the stages' lengths fit together.  The
 * daemon's configuration (daemon/config_pipelines.c) and the LIST reply
 * (listing.c) read pipelines through these.
 */
#ifndef GF_STAGES_JSON_H
#define GF_STAGES_JSON_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "json_read.h"
#include "pipeline.h"

/* The members of a pipeline (or stage) object that say what it runs. */
typedef struct gf_stage_json {
    const cJSON *kind, *params, *path; /* one stage                              */
    const cJSON *config_dir, *plugin;  /* a LIST reply's plugin stage             */
    const cJSON *inputs, *outputs;     /* a LIST reply's: its frames as tensors   */
    const cJSON *stages;               /* or an array of stage objects            */
    int listed;                        /* from a LIST reply: extra keys allowed   */
} gf_stage_json;

/*
 * Reads what a pipeline runs, either one stage (kind, params and, for kind
 * "plugin", path) or "stages" (1..GF_STAGES_MAX objects of those keys), into
 * p->stages and p->stage_count.  Relative plugin paths are resolved against
 * `config_dir`.  Plugin stages are made unloaded, holding one reference.
 * Returns 0, or -1 with every problem reported as "<prefix>...".
 */
int gf_json_read_stages(const gf_stage_json *j, const char *config_dir, const char *prefix,
                        gf_pipeline *p, gf_problems *pr);

/*
 * Loads every plugin stage of `p` (dlopen, ABI check, parameters read with the
 * plugin's own table, create()), telling each the longest input it can get:
 * max_frame_bytes through the stages before it.  Returns 0, or -1 with one
 * problem naming the stage ("<prefix>.path: cannot load: ...",
 * "<prefix>.params.weights: missing (required: ...)").  A stage of a
 * built-in kind with a device API (image, spectrogram) gets its built-in
 * plugin stage (kernels/plugin.h, gf_plugin_stage_new_builtin) here.
 */
int gf_pipeline_open_plugins(gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr);

/*
 * Loads and creates the one plugin stage `st` in this process, whose inputs
 * are at most max_in_bytes: what gf_pipeline_open_plugins does for each
 * plugin stage once the prober (below) let it.  Returns 0, or -1 with the
 * problem reported as "<prefix>...".
 */
int gf_plugin_stage_open(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                         gf_problems *pr);

/*
 * What gf_pipeline_open_plugins asks before it loads a plugin stage into
 * this process: 0 to load it, or -1 with the problem reported as
 * "<prefix>...".  The daemon's (daemon/plugin_probe.h) loads and creates
 * the stage first in a short-lived process of its own, so that a plugin
 * that crashes there is refused rather than fatal.  Set once, before any
 * thread loads a configuration; NULL (the default, clients) loads at once.
 */
typedef int (*gf_plugin_prober)(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                                gf_problems *pr);
void gf_set_plugin_prober(gf_plugin_prober prober);

/*
 * Checks each stage's parameters against the longest input it can get, that
 * every stage but the last can produce an output, and that stage 0's smallest
 * input goes through every stage's length rule.  Returns 0 or -1 with a
 * problem.
 */
int gf_pipeline_check_stages(const gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr);

#endif

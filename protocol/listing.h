/* SPDX-License-Identifier: MIT */
/*
 * The LIST reply's codec, shared by daemon and client: configured pipelines to
 * JSON and back.  The gflisting library holds it with the readers it is built
 * on, which the daemon's configuration (daemon/config.c) reads with too; this
 * header includes theirs, so that including it gives the whole library:
 *
 *   json_read.h    reading JSON with problems named by key path
 *   params_json.h  a stage's parameters as JSON, both ways
 *   stages_json.h  a pipeline's stages from JSON: read, plugins loaded, checked
 *   frame_desc_json.h  a frame's tensors as JSON ("inputs", "outputs")
 *
 * gflisting links gfprotocol, the pipeline registry and cJSON; no libuv and no
 * daemon code, so the client links it alone.
 */
#ifndef GF_LISTING_H
#define GF_LISTING_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "frame_desc_json.h"
#include "json_read.h"
#include "params_json.h"
#include "pipeline.h"
#include "stages_json.h"

#define GF_MAX_PIPELINES 256

/*
 * The LIST reply: {"pipelines":[{"id":0,"name":"echo","kind":"echo",
 * "params":{...},"inputs":[...],"outputs":[...],"doc":"..."}, ...]}; a
 * plugin stage adds "plugin" (its name), "path" and "config_dir"; a
 * pipeline of several stages has "stages": [{"kind":...,"params":...,
 * "inputs":...,"outputs":...}, ...] in place of kind and params
 * (protocol/PROTOCOL.md, "LIST").  "inputs" and "outputs" are
 * gf_pipeline_describe's and gf_stage_describe's.  Returns a new cJSON tree the caller
 * frees with cJSON_Delete, or NULL when out of memory.
 */
cJSON *gf_pipelines_to_json(const gf_pipeline *pipelines, size_t count);

/*
 * Parses a LIST reply back into a malloc'd array the caller frees with
 * gf_pipelines_free().  Plugin stages are left unloaded (see
 * gf_pipeline_open_plugins), described as the reply lists them.  Returns 0, or -1 with the reason
 * in err[err_len].
 */
int gf_pipelines_from_json(const char *json, gf_pipeline **out, size_t *count, char *err,
                           size_t err_len);

#endif

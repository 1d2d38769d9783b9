/* SPDX-License-Identifier: MIT */
/*
 * A pipeline stage's parameters as JSON, both ways: a built-in kind's read
 * and checked against its parameter table (defaults, types, ranges, unknown
 * and duplicate keys), and written in the shortest text that reads back bit
 * for bit; a plugin stage's as configured.
 */
#ifndef GF_PARAMS_JSON_H
#define GF_PARAMS_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "json_read.h"
#include "pipeline.h"

/*
 * Reads `kind`'s parameters from the JSON object `obj` (NULL: all defaults)
 * into `*out`.  Absent keys take their defaults; unknown keys, wrong types and
 * out-of-range values are errors named as "<prefix>.<key>: ...".  Returns 0
 * or -1 with the reason in err[err_len].
 */
int gf_params_from_json(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                        gf_params *out, char *err, size_t err_len);

/*
 * {"<key>": value, ...} with every parameter of `kind`, floats in the
 * shortest text that reads back bit for bit.  Returns a new cJSON tree the
 * caller frees with cJSON_Delete, or NULL when out of memory.
 */
cJSON *gf_params_to_json(const gf_pipeline_kind *kind, const gf_params *p);

/* A stage's parameters as JSON: a built-in kind's (gf_params_to_json), or
 * a plugin stage's "params" object as configured.  NULL when out of memory. */
cJSON *gf_stage_params_to_json(const gf_stage *s);

/* gf_params_from_json, reporting every bad parameter of `obj` to `pr`. */
int gf_params_read(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                   gf_params *out, gf_problems *pr);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Values looked up in the daemon's STATS, TRACE and LIST documents, for the
 * report renderers (client/report_*.c).  The documents come from a socket:
 * every lookup tolerates a missing key or a value of the wrong type and says
 * so by its return value.  Nothing here allocates or keeps a pointer; what a
 * lookup returns points into the document the caller owns.
 */
#ifndef GF_REPORT_DOC_H
#define GF_REPORT_DOC_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* The item at dotted path `path` ("frames.answered") below `o`, or NULL. */
const cJSON *gf_doc_get(const cJSON *o, const char *path);

/* The number at `path`, or NAN when it is missing or not a number. */
double gf_doc_num(const cJSON *o, const char *path);

/* The string at `path`, or NULL. */
const char *gf_doc_str(const cJSON *o, const char *path);

/* Nonzero when `v` is a number holding a whole value in [0, 2^63). */
int gf_doc_is_uint(const cJSON *v);

/* Nonzero when STATS document `stats` is a daemon's on the CPU engine,
 * whose "gpu" object describes no GPU and which makes no host-device copies. */
int gf_doc_engine_is_cpu(const cJSON *stats);

/* The name of pipeline `id` in LIST document `list` (NULL is fine), or NULL. */
const char *gf_doc_pipeline_name(const cJSON *list, uint64_t id);

#endif

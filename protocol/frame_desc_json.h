/* SPDX-License-Identifier: MIT */
/*
 * A frame's tensors as JSON, both ways: LIST's "inputs" and "outputs"
 * (protocol/PROTOCOL.md, "LIST"), [{"dtype": "uint8", "shape": [224, 224,
 * 3]}, ...], a variable dimension written -1.
 */
#ifndef GF_FRAME_DESC_JSON_H
#define GF_FRAME_DESC_JSON_H

#include <cjson/cJSON.h>

#include "json_read.h"
#include "pipeline.h"

/* `d` as a new JSON array the caller frees with cJSON_Delete; NULL when out
 * of memory. */
cJSON *gf_frame_desc_to_json(const gf_frame_desc *d);

/* Reads such an array into *d and checks it (gf_frame_desc_check; a
 * resolved length may make a variable dimension 0, which is allowed here).
 * Returns 0, or -1 with a problem named "<path>...". */
int gf_frame_desc_from_json(const cJSON *v, const char *path, gf_frame_desc *d, gf_problems *pr);

#endif

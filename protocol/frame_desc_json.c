/* SPDX-License-Identifier: MIT */
/*
 * A frame's tensors as JSON, both ways; frame_desc_json.h is the contract.
 */
#include "frame_desc_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* The largest dimension JSON carries exactly: 2^53. */
#define JSON_EXACT_MAX 9007199254740992.0

cJSON *gf_frame_desc_to_json(const gf_frame_desc *d) {
    cJSON *arr = cJSON_CreateArray();
    for (uint32_t k = 0; arr && k < d->count; k++) {
        const gf_tensor_desc *t = &d->tensors[k];
        cJSON *obj = cJSON_CreateObject(), *shape;
        if (obj == NULL || !cJSON_AddItemToArray(arr, obj)) {
            cJSON_Delete(obj);
            goto fail;
        }
        const char *name = gf_dtype_name(t->dtype);
        if (!cJSON_AddStringToObject(obj, "dtype", name ? name : "?") ||
            (shape = cJSON_AddArrayToObject(obj, "shape")) == NULL)
            goto fail;
        for (uint32_t i = 0; i < t->rank; i++) {
            cJSON *n = cJSON_CreateNumber((double)t->dims[i]);
            if (n == NULL || !cJSON_AddItemToArray(shape, n)) {
                cJSON_Delete(n);
                goto fail;
            }
        }
    }
    return arr;
fail:
    cJSON_Delete(arr);
    return NULL;
}

/* Reads one {"dtype", "shape"} object into *t. */
static int tensor_from_json(const cJSON *v, const char *prefix, gf_tensor_desc *t,
                            gf_problems *pr) {
    static const char *const keys[] = {"dtype", "shape"};
    const cJSON *items[2] = {0}, *dim;
    char path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a tensor {\"dtype\": ..., \"shape\": [...]}, got %s", prefix,
                   got);
        return -1;
    }
    if (gf_json_collect_keys(v, prefix, keys, 2, 1, items, pr) < 0)
        return -1;
    t->dtype = cJSON_IsString(items[0]) ? gf_dtype_from_name(items[0]->valuestring) : 0;
    if (t->dtype == 0) {
        gf_json_describe(items[0], got, sizeof got);
        gf_problem(
            pr,
            "%s.dtype: expected uint8, int16, int32, int64, float16, bfloat16 or float32, got %s",
            prefix, got);
        return -1;
    }
    if (!cJSON_IsArray(items[1]) || cJSON_GetArraySize(items[1]) > GF_TENSOR_RANK_MAX) {
        gf_json_describe(items[1], got, sizeof got);
        gf_problem(pr, "%s.shape: expected an array of at most %d dimensions, got %s", prefix,
                   GF_TENSOR_RANK_MAX, got);
        return -1;
    }
    t->rank = 0;
    cJSON_ArrayForEach(dim, items[1]) {
        double n;
        gf_errorf(path, sizeof path, "%s.shape[%" PRIu32 "]", prefix, t->rank);
        if (gf_json_read_integer(dim, path, GF_DIM_VARIABLE, JSON_EXACT_MAX, &n, pr) < 0)
            return -1;
        t->dims[t->rank++] = (int64_t)n;
    }
    return 0;
}

int gf_frame_desc_from_json(const cJSON *v, const char *path, gf_frame_desc *d, gf_problems *pr) {
    char prefix[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES], why[200];
    const cJSON *m;
    memset(d, 0, sizeof *d);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 ||
        cJSON_GetArraySize(v) > GF_FRAME_TENSORS_MAX) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected an array of 1 to %d tensors, got %s", path,
                   GF_FRAME_TENSORS_MAX, got);
        return -1;
    }
    cJSON_ArrayForEach(m, v) {
        gf_errorf(prefix, sizeof prefix, "%s[%" PRIu32 "]", path, d->count);
        if (tensor_from_json(m, prefix, &d->tensors[d->count], pr) < 0)
            return -1;
        d->count++;
    }
    /* A LIST gives a variable dimension resolved from a fixed input: a
     * frame of 0 bytes (echo's) resolves to 0, which a description never
     * holds. */
    gf_frame_desc check = *d;
    for (uint32_t k = 0; k < check.count; k++)
        for (uint32_t i = 0; i < check.tensors[k].rank; i++)
            if (check.tensors[k].dims[i] == 0)
                check.tensors[k].dims[i] = 1;
    if (gf_frame_desc_check(&check, why, sizeof why) < 0) {
        gf_problem(pr, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

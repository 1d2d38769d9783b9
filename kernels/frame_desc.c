/* SPDX-License-Identifier: MIT */
/*
 * Frames as tensors: the dtypes' names and sizes, checking a description
 * (gpuframe_plugin.h, gf_frame_desc) and resolving its variable dimension
 * from a frame's length.  Below plugin.c and registry.c, which describe
 * stages and pipelines with these (calls go from there here, never back).
 * Contract in pipeline.h; pure, any thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pipeline.h"
#include "util.h"

/* The number of entries of a static array. */
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

static const struct {
    uint32_t dtype;
    const char *name;
    uint32_t bytes;
} dtypes[] = {
    {GF_DTYPE_UINT8, "uint8", 1},       {GF_DTYPE_INT32, "int32", 4},
    {GF_DTYPE_INT64, "int64", 8},       {GF_DTYPE_FLOAT16, "float16", 2},
    {GF_DTYPE_BFLOAT16, "bfloat16", 2}, {GF_DTYPE_FLOAT32, "float32", 4},
    {GF_DTYPE_INT16, "int16", 2},
};

const char *gf_dtype_name(uint32_t dtype) {
    for (size_t i = 0; i < COUNT_OF(dtypes); i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].name;
    return NULL;
}

uint32_t gf_dtype_from_name(const char *name) {
    for (size_t i = 0; name && i < COUNT_OF(dtypes); i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].dtype;
    return 0;
}

uint32_t gf_dtype_bytes(uint32_t dtype) {
    for (size_t i = 0; i < COUNT_OF(dtypes); i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].bytes;
    return 0;
}

/* The bytes of tensor `t` without its variable dimension (that counted as
 * 1), or UINT64_MAX past INT64_MAX; dims are >= 1, or a variable one, or 0
 * where resolved from an empty frame. */
static uint64_t fixed_bytes(const gf_tensor_desc *t) {
    uint64_t n = gf_dtype_bytes(t->dtype);
    for (uint32_t i = 0; i < t->rank; i++) {
        uint64_t d = t->dims[i] == GF_DIM_VARIABLE ? 1 : (uint64_t)t->dims[i];
        if (d == 0) /* resolved from an empty frame */
            return 0;
        if (n > (uint64_t)INT64_MAX / d)
            return UINT64_MAX;
        n *= d;
    }
    return n;
}

/* The index of t's variable dimension, or -1. */
static int variable_dim(const gf_tensor_desc *t) {
    for (uint32_t i = 0; i < t->rank; i++)
        if (t->dims[i] == GF_DIM_VARIABLE)
            return (int)i;
    return -1;
}

int gf_frame_desc_check(const gf_frame_desc *d, char *why, size_t why_len) {
    uint64_t total = 0;
    if (d->count < 1 || d->count > GF_FRAME_TENSORS_MAX) {
        gf_errorf(why, why_len, "%" PRIu32 " tensors (1 to %d)", d->count, GF_FRAME_TENSORS_MAX);
        return -1;
    }
    for (uint32_t k = 0; k < d->count; k++) {
        const gf_tensor_desc *t = &d->tensors[k];
        int variable = 0;
        if (gf_dtype_bytes(t->dtype) == 0) {
            gf_errorf(why, why_len, "tensor %" PRIu32 ": dtype %" PRIu32 " is unknown", k,
                      t->dtype);
            return -1;
        }
        if (t->rank > GF_TENSOR_RANK_MAX) {
            gf_errorf(why, why_len, "tensor %" PRIu32 ": rank %" PRIu32 " (at most %d)", k, t->rank,
                      GF_TENSOR_RANK_MAX);
            return -1;
        }
        for (uint32_t i = 0; i < t->rank; i++) {
            if (t->dims[i] == GF_DIM_VARIABLE && d->count == 1 && !variable) {
                variable = 1;
            } else if (t->dims[i] < 1) {
                gf_errorf(why, why_len,
                          "tensor %" PRIu32 ": dimension %" PRIu32 " is %" PRId64
                          " (at least 1, or -1 once in a frame of one tensor)",
                          k, i, t->dims[i]);
                return -1;
            }
        }
        uint64_t n = fixed_bytes(t);
        if (n == UINT64_MAX || total > (uint64_t)INT64_MAX - n) {
            gf_errorf(why, why_len, "tensor %" PRIu32 ": more than 2^63 bytes", k);
            return -1;
        }
        total += n;
    }
    return 0;
}

uint64_t gf_frame_desc_bytes(const gf_frame_desc *d) {
    uint64_t total = 0;
    for (uint32_t k = 0; k < d->count; k++) {
        if (variable_dim(&d->tensors[k]) >= 0)
            return 0;
        total += fixed_bytes(&d->tensors[k]);
    }
    return total;
}

int gf_frame_desc_resolve(gf_frame_desc *d, uint64_t bytes) {
    int v = d->count == 1 ? variable_dim(&d->tensors[0]) : -1;
    if (v < 0)
        return gf_frame_desc_bytes(d) == bytes ? 0 : -1;
    uint64_t unit = fixed_bytes(&d->tensors[0]);
    if (unit == 0 || bytes % unit != 0 || bytes / unit > (uint64_t)INT64_MAX)
        return -1;
    d->tensors[0].dims[v] = (int64_t)(bytes / unit);
    return 0;
}

const char *gf_frame_desc_text(const gf_frame_desc *d, char *buf, size_t len) {
    size_t o = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (uint32_t k = 0; k < d->count && o < len; k++) {
        const gf_tensor_desc *t = &d->tensors[k];
        const char *name = gf_dtype_name(t->dtype);
        o += (size_t)gf_errorf(buf + o, len - o, "%s%s[", k ? ";" : "", name ? name : "?");
        for (uint32_t i = 0; i < t->rank && o < len; i++) {
            if (t->dims[i] == GF_DIM_VARIABLE)
                o += (size_t)gf_errorf(buf + o, len - o, "%sn", i ? "," : "");
            else
                o += (size_t)gf_errorf(buf + o, len - o, "%s%" PRId64, i ? "," : "", t->dims[i]);
        }
        if (o < len)
            o += (size_t)gf_errorf(buf + o, len - o, "]");
    }
    return buf;
}

int gf_frame_desc_equal(const gf_frame_desc *a, const gf_frame_desc *b) {
    if (a->count != b->count)
        return 0;
    for (uint32_t k = 0; k < a->count; k++) {
        const gf_tensor_desc *s = &a->tensors[k], *t = &b->tensors[k];
        if (s->dtype != t->dtype || s->rank != t->rank ||
            memcmp(s->dims, t->dims, s->rank * sizeof s->dims[0]) != 0)
            return 0;
    }
    return 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * A version-3 plugin that describes its frames as tensors (describe): a
 * float16 [2, 3] and an int64 scalar in (20 bytes), a bfloat16 [4] out (8
 * bytes: the input's first 8), when its parameter `mode` is 0.  Modes 1 to
 * 4 describe them wrongly, each in a way the loader must refuse with one
 * line (tests/test_plugins.c): describe fails, a dimension of 0, an input
 * output_bytes() refuses, an output it contradicts.  Built again with FLAGS
 * 2 as bad_flags, which sets a flag no gpuframed knows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuframe_plugin.h"

/* What a frame holds: float16 [2, 3] then int64 [], and bfloat16 [4]. */
#define IN_BYTES  (2 * 2 * 3 + 8)
#define OUT_BYTES (2 * 4)

static const gf_plugin_param params[] = {
    {.key = "mode", .type = GF_PLUGIN_INTEGER, .min = 0, .max = 4, .doc = "0: right; 1-4: wrong"},
};

static void *create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len) {
    (void)env, (void)why, (void)why_len;
    int *mode = malloc(sizeof *mode);
    if (mode)
        *mode = (int)values[0].number;
    return mode;
}

static int64_t output_bytes(const void *state, uint64_t in_bytes, char *why, size_t why_len) {
    (void)state;
    if (in_bytes != IN_BYTES) {
        snprintf(why, why_len, "length %llu is not %d", (unsigned long long)in_bytes, IN_BYTES);
        return -1;
    }
    return OUT_BYTES;
}

static uint64_t max_output_bytes(const void *state, uint64_t max_in_bytes) {
    (void)state;
    return max_in_bytes >= IN_BYTES ? OUT_BYTES : 0;
}

static void reference(const void *state, const void *in, uint64_t in_bytes, void *out) {
    (void)state, (void)in_bytes;
    memcpy(out, in, OUT_BYTES);
}

static int describe(const void *state, gf_frame_desc *in, gf_frame_desc *out, char *why,
                    size_t why_len) {
    int mode = *(const int *)state;
    if (mode == 1) {
        snprintf(why, why_len, "no model loaded");
        return -1;
    }
    in->count = 2;
    in->tensors[0] = (gf_tensor_desc){.dtype = GF_DTYPE_FLOAT16, .rank = 2, .dims = {2, 3}};
    in->tensors[1] = (gf_tensor_desc){.dtype = GF_DTYPE_INT64, .rank = 0};
    out->count = 1;
    out->tensors[0] = (gf_tensor_desc){.dtype = GF_DTYPE_BFLOAT16, .rank = 1, .dims = {4}};
    if (mode == 2)
        in->tensors[0].dims[1] = 0;
    if (mode == 3)
        in->count = 1; /* 12 bytes, which output_bytes refuses */
    if (mode == 4)
        out->tensors[0].dims[0] = 5;
    return 0;
}

#ifndef FLAGS
#define FLAGS 0
#define NAME  "described"
#endif

static const gf_plugin plugin = {.abi_version = GF_PLUGIN_ABI_VERSION,
                                 .name = NAME,
                                 .doc = "copies the first 8 bytes of a 20-byte frame",
                                 .params = params,
                                 .param_count = 1,
                                 .exact = 1,
                                 .create = create,
                                 .destroy = free,
                                 .output_bytes = output_bytes,
                                 .max_output_bytes = max_output_bytes,
                                 .reference = reference,
                                 .describe = describe,
                                 .flags = FLAGS};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

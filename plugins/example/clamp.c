/* SPDX-License-Identifier: MIT */
/*
 * The example plugin "clamp", the one plugins/README.md (PLUGINS.md where
 * installed) walks through: copy this directory to start a plugin.  Each output float is its input
 * limited to [lo, hi].  A NaN stays NaN (every comparison with it is false), and -0 between the
 * bounds stays -0 (it compares equal to 0), on the CPU and the GPU alike: outputs are bit-exact.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpuframe/plugin.h>

#include "clamp.h"

/* Indices into clamp_params, the order create() receives values in. */
enum { PARAM_LO, PARAM_HI };

static const gf_plugin_param clamp_params[] = {
    [PARAM_LO] = {.key = "lo",
                  .type = GF_PLUGIN_NUMBER,
                  .default_number = 0.0,
                  .min = -FLT_MAX,
                  .max = FLT_MAX,
                  .doc = "lower bound: smaller inputs become lo"},
    [PARAM_HI] = {.key = "hi",
                  .type = GF_PLUGIN_NUMBER,
                  .default_number = 1.0,
                  .min = -FLT_MAX,
                  .max = FLT_MAX,
                  .doc = "upper bound: larger inputs become hi"},
};

static void *clamp_create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                          size_t why_len) {
    const float lo = (float)values[PARAM_LO].number, hi = (float)values[PARAM_HI].number;

    if (lo > hi) {
        snprintf(why, why_len, "lo (%g) is above hi (%g)", (double)lo, (double)hi);
        return NULL;
    }
    clamp_state *s = malloc(sizeof *s);
    if (s == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    s->lo = lo;
    s->hi = hi;
    return s;
}

static void clamp_destroy(void *state) {
    free(state);
}

static int64_t clamp_output_bytes(const void *state, uint64_t in_bytes, char *why, size_t why_len) {
    if (in_bytes % sizeof(float) != 0) {
        snprintf(why, why_len, "length %llu is not a multiple of 4", (unsigned long long)in_bytes);
        return -1;
    }
    return (int64_t)in_bytes;
}

static uint64_t clamp_max_output_bytes(const void *state, uint64_t max_in_bytes) {
    return max_in_bytes - max_in_bytes % sizeof(float);
}

/* The definition of the kind; clamp.cu's kernel computes exactly this. */
static void clamp_reference(const void *state, const void *in, uint64_t in_bytes, void *out) {
    const clamp_state *s = state;
    const unsigned char *src = in;
    unsigned char *dst = out;

    for (uint64_t off = 0; off < in_bytes; off += sizeof(float)) {
        float x;
        memcpy(&x, src + off, sizeof x); /* frames need not be float-aligned */
        x = x < s->lo ? s->lo : x;
        x = x > s->hi ? s->hi : x;
        memcpy(dst + off, &x, sizeof x);
    }
}

/* What LIST publishes of its frames: a float32 array of any length in, one
 * as long out (float32 [-1], -1 being the dimension the length decides). */
static int clamp_describe(const void *state, gf_frame_desc *in, gf_frame_desc *out, char *why,
                          size_t why_len) {
    (void)state, (void)why, (void)why_len;
    in->count = 1;
    in->tensors[0] = (gf_tensor_desc){.dtype = GF_DTYPE_FLOAT32, .rank = 1, .dims = {-1}};
    *out = *in;
    return 0;
}

#ifdef GF_HAVE_CUDA
/* The device state is a copy of the host state (launches read it on the
 * host, as kernel arguments). */
static void *clamp_device_open(const void *state, int device, uint32_t streams, char *why,
                               size_t why_len) {
    clamp_state *d = malloc(sizeof *d);
    if (d == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    *d = *(const clamp_state *)state;
    return d;
}

static void clamp_device_close(void *dev) {
    free(dev);
}
#endif

static const gf_plugin clamp_plugin = {
    .abi_version = GF_PLUGIN_ABI_VERSION,
    .name = "clamp",
    .doc = "limits every float32 to [lo, hi]",
    .params = clamp_params,
    .param_count = sizeof clamp_params / sizeof clamp_params[0],
    .input_f32 = 1,
    .exact = 1,
    .create = clamp_create,
    .destroy = clamp_destroy,
    .output_bytes = clamp_output_bytes,
    .max_output_bytes = clamp_max_output_bytes,
    .reference = clamp_reference,
    .describe = clamp_describe,
#ifdef GF_HAVE_CUDA
    .device_open = clamp_device_open,
    .device_close = clamp_device_close,
    .launch = gf__clamp_launch,
#endif
};

GF_PLUGIN_EXPORT const gf_plugin *gf_plugin_entry(void) {
    return &clamp_plugin;
}

/* SPDX-License-Identifier: MIT */
/*
 * The reference of plugin "mlp": the definition of what the kind computes.
 *
 * For each input vector x (dims[0] float32) and each layer l, in order:
 *     y[o] = (float)(b[o] + sum over i = 0, 1, ... of (double)W[o][i] * x[i])
 * with the sum in double in index order (each product of two floats is exact
 * in double), then y[o] = y[o] > 0 ? y[o] : 0 (ReLU) after every layer but
 * the last.  With softmax, the last layer's y becomes
 *     p[o] = (float)(e[o] / sum of e), e[o] = expf(y[o] - max of y)
 * with the sum in double.  The GPU (mlp.cu) sums in float in cuBLAS's order,
 * within the plugin's tolerance of this (mlp.c says why).
 *
 * Compiled with -ffp-contract=off: no FMA the compiler chose changes a bit.
 *
 * Allocates nothing and writes no shared state: several threads may run it
 * on one network at once.  The hidden vectors of the vector in progress live
 * on the caller's stack: two of at most GF_MLP_MAX_HIDDEN floats, 32 KiB in
 * all, far below the stack of any thread started with default attributes
 * (8 MiB with glibc, 128 KiB with musl).  Input and output vectors are read
 * and written where they are.
 */
#include <math.h>
#include <string.h>

#include "mlp.h"

static float load_f32(const unsigned char *p) {
    float v;
    memcpy(&v, p, sizeof v); /* frames need not be float-aligned */
    return v;
}

static void store_f32(unsigned char *p, float v) {
    memcpy(p, &v, sizeof v);
}

/* One layer for one vector: `in_dim` floats at x, `out_dim` floats to y
 * (either may be unaligned), ReLU when `relu`. */
static void dense(const float *w, const float *b, uint32_t in_dim, uint32_t out_dim,
                  const unsigned char *x, unsigned char *y, int relu) {
    for (uint32_t o = 0; o < out_dim; o++) {
        const float *row = w + (uint64_t)o * in_dim;
        double acc = 0.0;
        for (uint32_t i = 0; i < in_dim; i++)
            acc += (double)row[i] * (double)load_f32(x + 4 * (size_t)i);
        float v = (float)(acc + (double)b[o]);
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        store_f32(y + 4 * (size_t)o, v);
    }
}

/* Logits to probabilities, in place, for one vector of `count` floats. */
static void softmax(unsigned char *y, uint32_t count) {
    float max = load_f32(y);
    double sum = 0.0;

    for (uint32_t o = 1; o < count; o++) {
        const float v = load_f32(y + 4 * (size_t)o);
        max = v > max ? v : max;
    }
    for (uint32_t o = 0; o < count; o++) {
        const float e = expf(load_f32(y + 4 * (size_t)o) - max);
        store_f32(y + 4 * (size_t)o, e);
        sum += (double)e;
    }
    for (uint32_t o = 0; o < count; o++)
        store_f32(y + 4 * (size_t)o, (float)((double)load_f32(y + 4 * (size_t)o) / sum));
}

void gf__mlp_reference(const void *state, const void *in, uint64_t in_bytes, void *out) {
    const gf__mlp_net *net = state;
    const gf__mlp_shape *s = &net->shape;
    const uint32_t in_dim = s->dims[0], out_dim = s->dims[s->layer_count];
    const uint64_t count = in_bytes / (4 * (uint64_t)in_dim);
    float hidden[2][GF_MLP_MAX_HIDDEN];

    for (uint64_t v = 0; v < count; v++) {
        const unsigned char *x = (const unsigned char *)in + v * in_dim * 4;
        unsigned char *result = (unsigned char *)out + v * out_dim * 4;
        for (uint32_t l = 0; l < s->layer_count; l++) {
            const int last = l + 1 == s->layer_count;
            const float *w = net->params + net->layer_offset[l];
            const float *b = w + (uint64_t)s->dims[l + 1] * s->dims[l];
            unsigned char *y = last ? result : (unsigned char *)hidden[l % 2];
            dense(w, b, s->dims[l], s->dims[l + 1], x, y, !last);
            x = y;
        }
        if (net->softmax)
            softmax(result, out_dim);
    }
}

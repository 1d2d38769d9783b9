/* SPDX-License-Identifier: MIT */
/*
 * Plugin "torch": a submission's frames as calls of the model, and the
 * search for the batch sizes a package takes (batches.h).  Pure; any thread.
 */
#include "batches.h"

#include <stddef.h>
#include <string.h>

/* The smallest size in (refused, taken] the package takes: `refused` is
 * refused (0: nothing known below), `taken` is taken.  1 first when nothing
 * is known below, as most packages take it; then bisection.  Returns the
 * size, or GF_TORCH_PROBE_STOP. */
static int64_t lowest_taken(uint32_t refused, uint32_t taken, gf__torch_probe_fn probe, void *ctx) {
    if (refused == 0 && taken > 1) {
        int r = probe(ctx, 1);
        if (r < 0)
            return r;
        if (r)
            return 1;
        refused = 1;
    }
    while (taken - refused > 1) {
        uint32_t mid = refused + (taken - refused) / 2;
        int r = probe(ctx, mid);
        if (r < 0)
            return r;
        *(r ? &taken : &refused) = mid;
    }
    return taken;
}

/* The largest size in [taken, refused) the package takes: `taken` is
 * taken, `refused` refused.  Returns it, or GF_TORCH_PROBE_STOP. */
static int64_t highest_taken(uint32_t taken, uint32_t refused, gf__torch_probe_fn probe,
                             void *ctx) {
    while (refused - taken > 1) {
        uint32_t mid = taken + (refused - taken) / 2;
        int r = probe(ctx, mid);
        if (r < 0)
            return r;
        *(r ? &taken : &refused) = mid;
    }
    return taken;
}

int gf__torch_batch_range(uint32_t want, gf__torch_probe_fn probe, void *ctx, uint32_t *lo,
                          uint32_t *hi) {
    if (want == 0)
        return 0;
    /* A size taken, and the largest known refused below it (0: none). */
    uint32_t some = 0, refused_below = 0;
    int r = probe(ctx, want);
    if (r < 0)
        return r;
    if (r)
        some = want;
    for (uint32_t n = 1; some == 0 && n < want; n++) {
        if ((r = probe(ctx, n)) < 0)
            return r;
        if (r)
            some = n;
        else
            refused_below = n;
    }
    if (some == 0)
        return 0;
    int64_t low = lowest_taken(refused_below, some, probe, ctx);
    if (low < 0)
        return (int)low;
    int64_t high = some == want ? want : highest_taken(some, want, probe, ctx);
    if (high < 0)
        return (int)high;
    *lo = (uint32_t)low;
    *hi = (uint32_t)high;
    return 1;
}

uint32_t gf__torch_next_call(const gf_plugin_frame *frames, uint32_t count, uint32_t first,
                             uint64_t frame_bytes, uint32_t min_batch, uint32_t max_batch,
                             gf__torch_call *call) {
    if (first >= count || max_batch == 0)
        return 0;
    const gf_plugin_frame *f = &frames[first];
    uint32_t n = 1;
    uint64_t stride = 0;
    if (max_batch > 1 && first + 1 < count) {
        const uint8_t *in0 = (const uint8_t *)f[0].in_dev, *in1 = (const uint8_t *)f[1].in_dev;
        const uint8_t *out0 = (const uint8_t *)f[0].out_dev;
        if (in1 > in0 && (uint64_t)(in1 - in0) >= frame_bytes) {
            stride = (uint64_t)(in1 - in0);
            while (first + n < count && n < max_batch &&
                   (const uint8_t *)f[n].in_dev == in0 + n * stride &&
                   (const uint8_t *)f[n].out_dev == out0 + n * stride)
                n++;
        }
        if (n == 1)
            stride = 0;
    }
    *call = (gf__torch_call){
        .first = first, .frames = n, .batch = n < min_batch ? min_batch : n, .stride = stride};
    return n;
}

uint32_t gf__torch_warm_sizes(uint32_t min_batch, uint32_t max_batch,
                              uint32_t sizes[GF_TORCH_WARM_SIZES_MAX]) {
    if (min_batch < 1 || min_batch > max_batch || max_batch > GF_TORCH_BATCH_MAX)
        return 0;
    uint32_t count = 0;
    sizes[count++] = max_batch;
    uint32_t p = 1;
    while (p * 2 < max_batch)
        p *= 2;
    for (; p > min_batch && p < max_batch; p /= 2)
        sizes[count++] = p;
    if (min_batch < max_batch)
        sizes[count++] = min_batch;
    return count;
}

int gf__torch_replay_sizes(const uint8_t captured[GF_TORCH_BATCH_MAX + 1], uint32_t min_batch,
                           uint32_t max_batch, uint8_t replay[GF_TORCH_BATCH_MAX + 1]) {
    memset(replay, 0, GF_TORCH_BATCH_MAX + 1);
    if (min_batch < 1 || min_batch > max_batch || max_batch > GF_TORCH_BATCH_MAX)
        return 0;
    uint8_t next = 0; /* the smallest captured size above the one looked at */
    for (uint32_t n = max_batch; n >= min_batch; n--) {
        if (captured[n])
            next = (uint8_t)n;
        replay[n] = next;
    }
    return replay[max_batch] != 0; /* then every smaller size has one too */
}

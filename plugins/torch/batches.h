/* SPDX-License-Identifier: MIT */
/*
 * Plugin "torch": how a submission's frames become calls of the model, and
 * how device_open finds the batch sizes a package takes.  Pure functions
 * (no PyTorch, no CUDA, no allocation), any thread: built into
 * gf_torch_aoti.so (torch_aoti.cpp) and tested by tests/test_plugin_torch.c.
 */
#ifndef GF_PLUGIN_TORCH_BATCHES_H
#define GF_PLUGIN_TORCH_BATCHES_H

#include <stdint.h>

#include <gpuframe/plugin.h>

#include "torch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a probe call (gf__torch_batch_range) says of a batch size. */
enum {
    GF_TORCH_PROBE_STOP = -1,   /* stop probing: the caller has its own reason */
    GF_TORCH_PROBE_REFUSED = 0, /* the package refuses a batch of this size    */
    GF_TORCH_PROBE_TAKEN = 1,   /* it runs one                                 */
};

/* Runs the model on a batch of `frames` frames and says how it went. */
typedef int (*gf__torch_probe_fn)(void *ctx, uint32_t frames);

/*
 * Finds the batch sizes a package takes among 1..want, by probe calls:
 * `want` first; when refused, 1, 2, ... up to the first size taken; then
 * each end of the range by bisection (1 is tried first for the lower end).
 * A package's dynamic batch dimension is checked against one lower and one
 * upper bound (AOTInductor's input checks), so the sizes it takes are one
 * interval.  Returns 1 with it in [*lo, *hi]; 0 when no size of 1..want is
 * taken; GF_TORCH_PROBE_STOP as soon as a probe returns it (*lo and *hi
 * are written only on 1).
 */
int gf__torch_batch_range(uint32_t want, gf__torch_probe_fn probe, void *ctx, uint32_t *lo,
                          uint32_t *hi);

/* One call of the model: `frames` frames of a submission from its frame
 * `first`, each `stride` bytes after the one before in both the input and
 * the output buffers (0 for a single frame), run as a batch of `batch`
 * frames: the frames, then batch - frames frames of zeros (padding), whose
 * outputs are dropped. */
typedef struct gf__torch_call {
    uint32_t first;  /* the submission's frame the call starts at  */
    uint32_t frames; /* the submission's frames it takes            */
    uint32_t batch;  /* the batch the model runs: frames + padding  */
    uint64_t stride; /* bytes from one frame to the next; 0 for one */
} gf__torch_call;

/*
 * The call that takes frames[first..] of a submission of `count`: the
 * longest run of frames from `first` whose inputs and outputs lie at one
 * stride, at least `frame_bytes` (the larger of a frame's input and output
 * lengths), at most max_batch frames; run as a batch of min_batch frames
 * when it has fewer (a package that refuses smaller batches).  Returns the
 * frames it takes (0 when first >= count, or max_batch is 0).
 */
uint32_t gf__torch_next_call(const gf_plugin_frame *frames, uint32_t count, uint32_t first,
                             uint64_t frame_bytes, uint32_t min_batch, uint32_t max_batch,
                             gf__torch_call *call);

/* At most how many batch sizes gf__torch_warm_sizes gives: max_batch, the
 * 6 powers of two below GF_TORCH_BATCH_MAX (64), min_batch. */
#define GF_TORCH_WARM_SIZES_MAX 8

/*
 * The batch sizes device_open always runs on each lane to fill its memory
 * cache, and checks, largest first: max_batch, the powers of two below it
 * down to min_batch, and min_batch itself (calls of fewer frames run padded
 * to it).  A bounded set: the other sizes are run only within a time budget
 * (plugins/torch/README.md, "Memory").  Returns how many, at most
 * GF_TORCH_WARM_SIZES_MAX; 0 unless 1 <= min_batch <= max_batch <=
 * GF_TORCH_BATCH_MAX.
 */
uint32_t gf__torch_warm_sizes(uint32_t min_batch, uint32_t max_batch,
                              uint32_t sizes[GF_TORCH_WARM_SIZES_MAX]);

/*
 * Which graph a call of each batch size replays (README.md, "CUDA
 * graphs"): for every n of min_batch..max_batch, replay[n] is the smallest
 * size s >= n with captured[s] nonzero (the call's frames, then zeros up to
 * s), 0 where there is none; other entries are 0.  Both arrays are indexed
 * by batch size.  Returns 1 when every size of min_batch..max_batch has a
 * graph to replay, else 0 (and 0 unless 1 <= min_batch <= max_batch <=
 * GF_TORCH_BATCH_MAX).
 */
int gf__torch_replay_sizes(const uint8_t captured[GF_TORCH_BATCH_MAX + 1], uint32_t min_batch,
                           uint32_t max_batch, uint8_t replay[GF_TORCH_BATCH_MAX + 1]);

#ifdef __cplusplus
}
#endif

#endif

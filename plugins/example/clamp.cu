/* SPDX-License-Identifier: MIT */
/*
 * The kernel of the example plugin "clamp"; the definition is
 * clamp_reference() in clamp.c, and the same two comparisons give the same
 * bits (no rounding happens: each output is an input or a bound).
 */
#include <cstdint>

#include <cuda_runtime.h>

#include "clamp.h"

/* A multiple of the warp size; the grid-stride loop covers any length. */
static constexpr unsigned kThreadsPerBlock = 256;
/* Enough blocks to fill an H100/H200 (132 SMs) several times over. */
static constexpr unsigned kMaxBlocks = 1024;

static __global__ void clamp_kernel(const float *__restrict__ in, float *__restrict__ out,
                                    size_t count, float lo, float hi) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        float x = in[i];
        x = x < lo ? lo : x;
        x = x > hi ? hi : x;
        out[i] = x;
    }
}

/* Every stream index alike: clamp keeps nothing per stream. */
extern "C" int gf__clamp_launch(void *dev, uint32_t /* stream_index */, const void *in_dev,
                                uint64_t in_bytes, void *out_dev, void *stream) {
    const clamp_state *s = static_cast<const clamp_state *>(dev);
    const size_t count = in_bytes / sizeof(float);

    if (count == 0) {
        return 0;
    }
    const size_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
    const unsigned grid = blocks < kMaxBlocks ? static_cast<unsigned>(blocks) : kMaxBlocks;
    clamp_kernel<<<grid, kThreadsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const float *>(in_dev), static_cast<float *>(out_dev), count, s->lo, s->hi);
    return static_cast<int>(cudaGetLastError());
}

/* SPDX-License-Identifier: MIT */
/*
 * The kernel of pipeline kind "echo": a device-to-device copy; contract in
 * kernels.h.  16-byte vector loads and stores for the bulk, bytes for the
 * tail.
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "launch.cuh"

static_assert(sizeof(uint4) == kVecBytes, "one uint4 is one 16-byte vector");

/* Copies vec_count 16-byte vectors, then the tail_bytes (< 16) that follow
 * them byte by byte, one per thread of the first threads. */
static __global__ void echo_vec_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out,
                                       size_t vec_count, size_t tail_bytes) {
    const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = first; i < vec_count; i += stride) {
        out[i] = in[i];
    }
    if (first < tail_bytes) {
        const unsigned char *in_tail = reinterpret_cast<const unsigned char *>(in + vec_count);
        unsigned char *out_tail = reinterpret_cast<unsigned char *>(out + vec_count);
        out_tail[first] = in_tail[first];
    }
}

/* Copies `bytes` bytes one at a time: buffers that are not 16-byte aligned. */
static __global__ void echo_byte_kernel(const unsigned char *__restrict__ in,
                                        unsigned char *__restrict__ out, size_t bytes) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
         i += stride) {
        out[i] = in[i];
    }
}

extern "C" int gf_echo_launch(const gf_params *p, const void *in_dev, size_t in_bytes,
                              void *out_dev, gf_cuda_stream stream) {
    (void)p;
    return launch_checked(stream, true, in_bytes, [&](cudaStream_t s) {
        if (both_aligned(in_dev, out_dev, kVecBytes)) {
            const vec_split v = split_vectors(in_bytes, kVecBytes);
            echo_vec_kernel<<<blocks_for(v.work), kThreadsPerBlock, 0, s>>>(
                static_cast<const uint4 *>(in_dev), static_cast<uint4 *>(out_dev), v.vec_count,
                v.tail_count);
        } else {
            echo_byte_kernel<<<blocks_for(in_bytes), kThreadsPerBlock, 0, s>>>(
                static_cast<const unsigned char *>(in_dev), static_cast<unsigned char *>(out_dev),
                in_bytes);
        }
    });
}

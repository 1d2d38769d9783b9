/* SPDX-License-Identifier: MIT */
/*
 * The kernel of pipeline kind "affine"; contract in kernels.h.  __fmul_rn and
 * __fadd_rn are never contracted into an FMA, so each element rounds exactly
 * as the reference's a*x then +b (kernels/affine_ref.c).  float4 loads and
 * stores for the bulk, scalars for the tail.
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "launch.cuh"

/* Floats per vector: one float4 load or store moves 16 bytes. */
static constexpr size_t kVecFloats = kVecBytes / sizeof(float);
static_assert(sizeof(float4) == kVecBytes, "one float4 is one 16-byte vector");

/* One element: a*x rounded, then + b rounded. */
static __device__ __forceinline__ float affine_one(float x, float a, float b) {
    return __fadd_rn(__fmul_rn(a, x), b);
}

/* vec_count float4 vectors, then the tail_count (< 4) floats after them, one
 * per thread of the first threads. */
static __global__ void affine_vec_kernel(const float4 *__restrict__ in, float4 *__restrict__ out,
                                         size_t vec_count, size_t tail_count, float a, float b) {
    const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = first; i < vec_count; i += stride) {
        float4 v = in[i];
        v.x = affine_one(v.x, a, b);
        v.y = affine_one(v.y, a, b);
        v.z = affine_one(v.z, a, b);
        v.w = affine_one(v.w, a, b);
        out[i] = v;
    }
    if (first < tail_count) {
        const float *in_tail = reinterpret_cast<const float *>(in + vec_count);
        float *out_tail = reinterpret_cast<float *>(out + vec_count);
        out_tail[first] = affine_one(in_tail[first], a, b);
    }
}

/* `count` floats one at a time: buffers 4- but not 16-byte aligned. */
static __global__ void affine_scalar_kernel(const float *__restrict__ in, float *__restrict__ out,
                                            size_t count, float a, float b) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        out[i] = affine_one(in[i], a, b);
    }
}

extern "C" int gf_affine_launch(const gf_params *p, const void *in_dev, size_t in_bytes,
                                void *out_dev, gf_cuda_stream stream) {
    const size_t count = in_bytes / sizeof(float);
    const bool ok = f32_buffers_ok(in_dev, out_dev, in_bytes);

    return launch_checked(stream, ok, count, [&](cudaStream_t s) {
        if (both_aligned(in_dev, out_dev, kVecBytes)) {
            const vec_split v = split_vectors(count, kVecFloats);
            affine_vec_kernel<<<blocks_for(v.work), kThreadsPerBlock, 0, s>>>(
                static_cast<const float4 *>(in_dev), static_cast<float4 *>(out_dev), v.vec_count,
                v.tail_count, p->a, p->b);
        } else {
            affine_scalar_kernel<<<blocks_for(count), kThreadsPerBlock, 0, s>>>(
                static_cast<const float *>(in_dev), static_cast<float *>(out_dev), count, p->a,
                p->b);
        }
    });
}

/* SPDX-License-Identifier: MIT */
/*
 * The kernel of pipeline kind "sincos"; contract in kernels.h.  Uses the
 * accurate sinf/cosf (never __sinf: the build must not pass
 * --use_fast_math), and __fmul_rn/__fadd_rn so that s*c + v rounds twice, as
 * in the reference (kernels/sincos_ref.c).  Compute-bound: scalar loads.
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "launch.cuh"

/* `iters` repetitions of v = sinf(v)*cosf(v) + v on each of `count` floats. */
static __global__ void sincos_kernel(const float *__restrict__ in, float *__restrict__ out,
                                     size_t count, uint32_t iters) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        float v = in[i];
        for (uint32_t k = 0; k < iters; k++) {
            const float s = sinf(v);
            const float c = cosf(v);
            v = __fadd_rn(__fmul_rn(s, c), v);
        }
        out[i] = v;
    }
}

extern "C" int gf_sincos_launch(const gf_params *p, const void *in_dev, size_t in_bytes,
                                void *out_dev, gf_cuda_stream stream) {
    const size_t count = in_bytes / sizeof(float);
    const bool ok = f32_buffers_ok(in_dev, out_dev, in_bytes);

    return launch_checked(stream, ok, count, [&](cudaStream_t s) {
        sincos_kernel<<<blocks_for(count), kThreadsPerBlock, 0, s>>>(
            static_cast<const float *>(in_dev), static_cast<float *>(out_dev), count, p->iters);
    });
}

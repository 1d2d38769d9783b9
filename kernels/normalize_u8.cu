/* SPDX-License-Identifier: MIT */
/*
 * The kernel of pipeline kind "normalize_u8"; contract in kernels.h.
 * One thread per pixel: three bytes in, one float to each of three planes
 * (stores coalesce per plane).  __fdiv_rn/__fsub_rn round each step to
 * nearest, as the reference does (kernels/normalize_u8_ref.c).
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "launch.cuh"

/* Interleaved RGB: bytes per pixel in, planes out. */
static constexpr unsigned kChannels = 3;
/* An 8-bit channel's full scale: 255 maps to 1.0. */
static constexpr float kU8FullScale = 255.0f;

/* The per-channel statistics, passed by value as kernel arguments. */
struct norm_stats {
    float mean[kChannels];
    float std[kChannels];
};

/* Pixel i's channel c goes to out[c*pixel_count + i]: since i = y*W + x, that
 * is plane c, row y, column x. */
static __global__ void normalize_u8_kernel(const unsigned char *__restrict__ in,
                                           float *__restrict__ out, size_t pixel_count,
                                           norm_stats st) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pixel_count;
         i += stride) {
        const unsigned char *px = in + i * kChannels;
#pragma unroll
        for (unsigned c = 0; c < kChannels; c++) {
            float v = __fdiv_rn(static_cast<float>(px[c]), kU8FullScale);
            v = __fsub_rn(v, st.mean[c]);
            out[c * pixel_count + i] = __fdiv_rn(v, st.std[c]);
        }
    }
}

extern "C" int gf_normalize_u8_launch(const gf_params *p, const void *in_dev, size_t in_bytes,
                                      void *out_dev, gf_cuda_stream stream) {
    const size_t pixel_count = static_cast<size_t>(p->width) * p->height;
    /* A wrong length would write past the output; a misaligned float store
     * would be a sticky error: refuse both here. */
    const bool ok = pixel_count <= SIZE_MAX / kChannels && in_bytes == pixel_count * kChannels &&
                    reinterpret_cast<uintptr_t>(out_dev) % sizeof(float) == 0;

    return launch_checked(stream, ok, pixel_count, [&](cudaStream_t s) {
        norm_stats st;
        for (unsigned c = 0; c < kChannels; c++) {
            st.mean[c] = p->mean[c];
            st.std[c] = p->std[c];
        }
        normalize_u8_kernel<<<blocks_for(pixel_count), kThreadsPerBlock, 0, s>>>(
            static_cast<const unsigned char *>(in_dev), static_cast<float *>(out_dev), pixel_count,
            st);
    });
}

/* SPDX-License-Identifier: MIT */
/*
 * The kernel of pipeline kind "image" (contract in kernels.h) and its
 * device API, the built-in plugin through which the CUDA engine runs a
 * batch of frames in one launch (gf_image_device_api).
 *
 * One thread per output pixel of every frame of the batch: it filters the
 * source pixels under its taps (converting each from its format), then
 * writes its three channels.  The arithmetic is image_math.h's, shared with
 * the reference; this file is compiled with --fmad=false (CMakeLists.txt)
 * so that no multiply and add are fused where the reference rounds twice,
 * and nvcc's float division and rintf round to nearest as the host's do:
 * the two agree bit for bit.  The plan (geometry, coefficients) is made on
 * the host by the reference's own gf_image_plan_for and passed by value.
 *
 * The stage needs no device memory: device_open hands back the stage's
 * parameters (the built-in plugin stage's state, which outlives it).
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "image_math.h"
#include "launch.cuh"

/* Frames one launch takes: a submission's most (the daemon's
 * GF_BATCH_FRAMES_MAX); the table of their buffers is a kernel argument
 * (1 KiB of the 4 KiB allowed). */
static constexpr uint32_t kBatchFrames = 64;

/* The frames of one launch: input and output of frame f. */
struct frame_table {
    const unsigned char *in[kBatchFrames];
    unsigned char *out[kBatchFrames];
};

static __global__ void image_kernel(const gf_image_plan pl, const frame_table ft, uint32_t count) {
    const size_t pixels = static_cast<size_t>(pl.x.out) * pl.y.out;
    const size_t total = pixels * count;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        const uint32_t f = static_cast<uint32_t>(i / pixels);
        const size_t px = i % pixels;
        const int32_t ox = static_cast<int32_t>(px % pl.x.out);
        const int32_t oy = static_cast<int32_t>(px / pl.x.out);
        float rgb[3];
        gf_image_pixel(&pl, ft.in[f], ox, oy, rgb);
#pragma unroll
        for (unsigned c = 0; c < GF_IMAGE_CHANNELS; c++) {
            const size_t o = gf_image_out_index(&pl, ox, oy, c);
            if (pl.dtype == GF_IMAGE_UINT8)
                ft.out[f][o] = gf_image_to_u8(rgb[c]);
            else if (pl.dtype == GF_IMAGE_FLOAT16)
                reinterpret_cast<__half *>(ft.out[f])[o] =
                    __float2half_rn(gf_image_normalise(&pl, rgb[c], c));
            else
                reinterpret_cast<float *>(ft.out[f])[o] = gf_image_normalise(&pl, rgb[c], c);
        }
    }
}

/* Launches frames[0..count) (count <= kBatchFrames) of lengths already
 * checked, with the plan of `p`. */
static int launch_frames(const gf_params *p, const gf_plugin_frame *frames, uint32_t count,
                         cudaStream_t s) {
    gf_image_plan pl;
    frame_table ft = {};
    bool ok = count >= 1 && count <= kBatchFrames;
    const uint64_t want = gf_image_input_bytes(p->format, p->width, p->height);
    for (uint32_t f = 0; ok && f < count; f++) {
        /* float and half stores need aligned outputs: a misaligned one
         * would be a sticky error. */
        ok = frames[f].in_bytes == want &&
             reinterpret_cast<uintptr_t>(frames[f].out_dev) % sizeof(float) == 0;
        ft.in[f] = static_cast<const unsigned char *>(frames[f].in_dev);
        ft.out[f] = static_cast<unsigned char *>(frames[f].out_dev);
    }
    gf_image_plan_for(p, &pl);
    const size_t work = ok ? static_cast<size_t>(pl.x.out) * pl.y.out * count : 0;
    return launch_checked(reinterpret_cast<gf_cuda_stream>(s), ok, work, [&](cudaStream_t st) {
        image_kernel<<<blocks_for(work), kThreadsPerBlock, 0, st>>>(pl, ft, count);
    });
}

extern "C" int gf_image_launch(const gf_params *p, const void *in_dev, size_t in_bytes,
                               void *out_dev, gf_cuda_stream stream) {
    const gf_plugin_frame frame = {in_dev, in_bytes, out_dev, 0};
    return launch_frames(p, &frame, 1, reinterpret_cast<cudaStream_t>(stream));
}

/* ---- the device API (gpuframe_plugin.h's rules) --------------------------------- */

/* No device state: the stage's parameters are all a launch needs. */
static void *image_device_open(const void *state, int device, uint32_t streams, char *why,
                               size_t why_len) {
    (void)device;
    (void)streams;
    (void)why;
    (void)why_len;
    return const_cast<void *>(state);
}

static void image_device_close(void *dev) {
    (void)dev;
}

static int image_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                        void *out_dev, void *stream) {
    (void)stream_index;
    return gf_image_launch(static_cast<const gf_params *>(dev), in_dev, in_bytes, out_dev,
                           static_cast<gf_cuda_stream>(stream));
}

/* A submission's frames, kBatchFrames (the most it has) per launch. */
static int image_launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                              uint32_t count, void *stream) {
    (void)stream_index;
    int err = 0;
    for (uint32_t i = 0; i < count && err == 0; i += kBatchFrames)
        err = launch_frames(static_cast<const gf_params *>(dev), frames + i,
                            count - i < kBatchFrames ? count - i : kBatchFrames,
                            static_cast<cudaStream_t>(stream));
    return err;
}

/* Only the device half is read (kernels/plugin.h, built-in plugin stages). */
extern "C" const gf_plugin gf_image_device_api = {
    GF_PLUGIN_ABI_VERSION,
    "image",
    "the CUDA side of kind image",
    nullptr,
    0,
    0,
    1,
    0.0f,
    0.0f,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    image_device_open,
    image_device_close,
    image_launch,
    image_launch_batch,
    kBatchFrames,
    nullptr,
    0,
};

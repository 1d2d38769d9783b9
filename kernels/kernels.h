/* SPDX-License-Identifier: MIT */
/*
 * Every pipeline kind's two implementations: the C reference, which defines
 * what the kind computes, and the CUDA launcher, which enqueues its kernel.
 *
 * The references (kernels/<kind>_ref.c) build into gfpipelines, a library
 * with no CUDA in it that the client links too; the launchers
 * (kernels/<kind>.cu) and gf_kernel_launcher (kernels/launchers.c) build into
 * gfkernels, which exists only in builds with CUDA and which only the daemon
 * links.  This header declares both; calling a launcher from a program that
 * does not link gfkernels fails to link, as it should.  gfkernels also has
 * the engine's one kernel of its own, gf_copies_launch (kernels/copies.cu).
 *
 * Every reference computes the output of `in_bytes` bytes at `in` into `out`
 * on the calling thread.  Buffers need no particular alignment.  Thread-safe;
 * allocates nothing.
 *
 * Every launcher has the contract of gf_launch_fn below.
 *
 * Both take buffers whose length has passed the kind's output_bytes() rule
 * (kernels/registry.c); input and output must not overlap.
 *
 * Plain C: included by .c and .cu files alike, needs no CUDA header.
 */
#ifndef GF_KERNELS_H
#define GF_KERNELS_H

#include <stddef.h>

#include "gpuframe_plugin.h"
#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's cudaStream_t, named without including its headers. */
typedef struct CUstream_st *gf_cuda_stream;

/*
 * A launcher: enqueues the kernel on `stream` reading the device buffer
 * `in_dev` and writing `out_dev` (cudaMalloc'd, so suitably aligned).  Never
 * synchronises.  Returns 0, or a cudaError_t: cudaErrorInvalidValue for a
 * length or pointer the kind cannot take (nothing is launched), else what
 * cudaGetLastError() reports after the launch.  Zero bytes launch nothing.
 */
typedef int (*gf_launch_fn)(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                            gf_cuda_stream stream);

/* The launcher of `kind`, or NULL for a kind that has none (none in a
 * complete build: test_pipelines checks every kind).  Defined in gfkernels. */
gf_launch_fn gf_kernel_launcher(const gf_pipeline_kind *kind);

/* One copy of gf_copies_launch. */
typedef struct gf_copy {
    const void *from;
    void *to;
    size_t bytes;
} gf_copy;
#define GF_COPIES_MAX 64u

/*
 * Enqueues `count` copies (at most GF_COPIES_MAX; bytes where a copy's
 * source or destination overlaps another's destination end up undefined,
 * nothing else) as one kernel on
 * `stream`, between memory the device reaches: its own, or pinned host
 * memory mapped for it (at its host address where the device can use
 * that).  What the CUDA engine uses to gather a batch's small device
 * frames into its slot and scatter their results back, in place of a
 * launch a frame, and to move a batch's small shm frames between their
 * regions and the slot, in place of a copy a frame.  `across_bus`: some
 * copy has an end in host memory; each block then keeps a quarter of the
 * reads in flight (kernels/copies.cu says why).  Returns as a launcher
 * does (gf_launch_fn); count 0 launches nothing.
 */
int gf_copies_launch(const gf_copy *copies, unsigned count, int across_bus, gf_cuda_stream stream);

/*
 * "echo": the output is a byte-for-byte copy of the input, of any length
 * (0 included).
 */
void gf_echo_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);
int gf_echo_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                   gf_cuda_stream stream);

/*
 * "affine": y = a*x + b on each element of a little-endian float32 array,
 * rounded after the multiply and again after the add (never a fused
 * multiply-add), so the kernel and the reference agree bit for bit.
 */
void gf_affine_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);
int gf_affine_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                     gf_cuda_stream stream);

/*
 * "sincos": `iters` repetitions of v = sinf(v)*cosf(v) + v on each element of
 * a little-endian float32 array; a compute-bound load.  The GPU's sinf/cosf
 * differ from libm's by an ulp or two, so results agree within the registry's
 * tolerance, not bit for bit.
 */
void gf_sincos_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);
int gf_sincos_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                     gf_cuda_stream stream);

/*
 * "normalize_u8": an interleaved 8-bit RGB image of width x height pixels to
 * planar float32 [3][height][width],
 *   out[c*H*W + y*W + x] = (in[(y*W + x)*3 + c] / 255 - mean[c]) / std[c],
 * each operation rounded to nearest float32, so the kernel and the reference
 * agree bit for bit.  The output is 4 times the input's size.
 */
void gf_normalize_u8_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);
int gf_normalize_u8_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                           gf_cuda_stream stream);

/*
 * "image": a width x height frame in `format` (rgb8, bgr8, rgba8, gray8,
 * nv12, i420, yuyv) to R, G, B: converted (BT.601 or BT.709, limited or
 * full range), resized (a tent filter, bilinear or widened for downscaling),
 * cropped or letterboxed, normalised, as planes (CHW) or pixels (HWC) of
 * float32, float16 or uint8.  docs/stages.md has the arithmetic.  Kernel
 * and reference compute it with the same functions (image_math.h), each
 * float32 operation rounded once in the same order, so they agree bit for
 * bit.  gf_image_launch runs one frame; a batch runs through the kind's
 * device API (gf_kernel_device_api).
 */
void gf_image_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);
int gf_image_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                    gf_cuda_stream stream);

/*
 * "spectrogram": mono int16 or float32 PCM to a float32 (rows x columns)
 * spectrogram as torch.stft and torchaudio lay it out: periodic Hann window,
 * reflect padding with `center`, magnitude or power, optionally a mel
 * filterbank and a log.  The reference is an exact DFT in double
 * (spectrogram_ref.c says why); the GPU runs cuFFT and cuBLAS in float32,
 * so results agree within the registry's tolerance.  Runs on the GPU only
 * through the kind's device API (it keeps cuFFT plans on the device).
 */
void gf_spectrogram_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);

/*
 * The CUDA side of a kind with gf_pipeline_kind.device_api set: a plugin
 * description (gpuframe_plugin.h) whose device_open, device_close, launch
 * and launch_batch the CUDA engine calls exactly as it calls a plugin's.
 * Its device_open takes the stage's gf_params as its state (the built-in
 * plugin stage's, kernels/plugin.h).  NULL for any other kind.  Defined in
 * gfkernels (kernels/launchers.c).
 */
const gf_plugin *gf_kernel_device_api(const gf_pipeline_kind *kind);
extern const gf_plugin gf_image_device_api;
extern const gf_plugin gf_spectrogram_device_api;

#ifdef __cplusplus
}
#endif

#endif

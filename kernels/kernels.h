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
 * does not link gfkernels fails to link, as it should.
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

#ifdef __cplusplus
}
#endif

#endif

/*
 * Pipeline kind "normalize_u8": an interleaved 8-bit RGB image of
 * width x height pixels to planar float32 [3][height][width],
 *   out[c*H*W + y*W + x] = (in[(y*W + x)*3 + c] / 255 - mean[c]) / std[c],
 * each operation rounded to nearest float32, so the kernel and the reference
 * agree bit for bit.  The output is 4 times the input's size.
 *
 * gf_normalize_u8_ref (kernels/normalize_u8_ref.c) is the definition;
 * gf_normalize_u8_launch (kernels/normalize_u8.cu) exists only in builds with
 * CUDA.  Both take buffers whose length has passed the kind's output_bytes()
 * rule (kernels/registry.c); input and output must not overlap.
 */
#ifndef GF_NORMALIZE_U8_H
#define GF_NORMALIZE_U8_H

#include <stddef.h>

#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Computes the output of `in_bytes` bytes at `in` into `out` on the calling
 * thread.  Buffers need no particular alignment.  Thread-safe; allocates
 * nothing. */
void gf_normalize_u8_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);

/* Enqueues the kernel on `stream` (a cudaStream_t) reading the device buffer
 * `in_dev` and writing `out_dev` (cudaMalloc'd, so suitably aligned).  Never
 * synchronises.  Returns 0, or a cudaError_t: cudaErrorInvalidValue for a
 * length or pointer the kind cannot take (nothing is launched), else what
 * cudaGetLastError() reports after the launch.  Zero bytes launch nothing. */
int gf_normalize_u8_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                           gf_cuda_stream stream);

#ifdef __cplusplus
}
#endif

#endif

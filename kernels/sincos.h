/*
 * Pipeline kind "sincos": `iters` repetitions of v = sinf(v)*cosf(v) + v on
 * each element of a little-endian float32 array; a compute-bound load.  The
 * GPU's sinf/cosf differ from libm's by an ulp or two, so results agree within
 * the registry's tolerance, not bit for bit.
 *
 * gf_sincos_ref (kernels/sincos_ref.c) is the definition; gf_sincos_launch
 * (kernels/sincos.cu) exists only in builds with CUDA.  Both take buffers
 * whose length has passed the kind's output_bytes() rule (kernels/registry.c);
 * input and output must not overlap.
 */
#ifndef GF_SINCOS_H
#define GF_SINCOS_H

#include <stddef.h>

#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Computes the output of `in_bytes` bytes at `in` into `out` on the calling
 * thread.  Buffers need no particular alignment.  Thread-safe; allocates
 * nothing. */
void gf_sincos_ref(const gf_params *p, const void *in, size_t in_bytes, void *out);

/* Enqueues the kernel on `stream` (a cudaStream_t) reading the device buffer
 * `in_dev` and writing `out_dev` (cudaMalloc'd, so suitably aligned).  Never
 * synchronises.  Returns 0, or a cudaError_t: cudaErrorInvalidValue for a
 * length or pointer the kind cannot take (nothing is launched), else what
 * cudaGetLastError() reports after the launch.  Zero bytes launch nothing. */
int gf_sincos_launch(const gf_params *p, const void *in_dev, size_t in_bytes, void *out_dev,
                     gf_cuda_stream stream);

#ifdef __cplusplus
}
#endif

#endif

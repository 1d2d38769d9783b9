/* SPDX-License-Identifier: MIT */
/*
 * The reference of pipeline kind "sincos"; contract in kernels.h.
 *
 * Compiled with -ffp-contract=off like every reference, so that s*c + v is
 * rounded twice, as the kernel's __fmul_rn/__fadd_rn do; what remains between
 * the two is the difference between libm's and CUDA's sinf/cosf.
 */
#include "kernels.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void gf_sincos_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    const unsigned char *src = in;
    unsigned char *dst = out;
    const uint32_t iters = p->iters;

    assert(in_bytes % sizeof(float) == 0);
    for (size_t off = 0; off + sizeof(float) <= in_bytes; off += sizeof(float)) {
        float v;
        memcpy(&v, src + off, sizeof v);
        for (uint32_t i = 0; i < iters; i++) {
            float s = sinf(v), c = cosf(v);
            float sc = s * c;
            v = sc + v;
        }
        memcpy(dst + off, &v, sizeof v);
    }
}

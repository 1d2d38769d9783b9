/* SPDX-License-Identifier: MIT */
/*
 * The reference of pipeline kind "affine"; contract in kernels.h.
 *
 * Must be compiled with -ffp-contract=off (CMakeLists.txt sets it for every C
 * file of gfpipelines): a compiler that fuses a*x + b into one FMA rounds once
 * instead of twice and no longer matches the kernel's __fmul_rn/__fadd_rn.
 */
#include "kernels.h"

#include <assert.h>
#include <string.h>

void gf_affine_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    const unsigned char *src = in;
    unsigned char *dst = out;
    const float a = p->a, b = p->b;

    assert(in_bytes % sizeof(float) == 0);
    for (size_t off = 0; off + sizeof(float) <= in_bytes; off += sizeof(float)) {
        float x, y;
        /* memcpy: frames need not be float-aligned; compiles to plain loads. */
        memcpy(&x, src + off, sizeof x);
        y = a * x;
        y = y + b;
        memcpy(dst + off, &y, sizeof y);
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * The reference of pipeline kind "normalize_u8"; contract in kernels.h.
 *
 * Every operation is a single float32 operation rounded to nearest (no FMA:
 * compiled with -ffp-contract=off; no reciprocal tricks), as the kernel's
 * __fdiv_rn/__fsub_rn, so the two agree bit for bit.
 */
#include "kernels.h"

#include <assert.h>
#include <string.h>

/* Interleaved RGB: bytes per pixel in, planes out. */
#define RGB_CHANNELS 3
/* An 8-bit channel's full scale: 255 maps to 1.0. */
#define U8_FULL_SCALE 255.0f

void gf_normalize_u8_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    const unsigned char *src = in;
    unsigned char *dst = out;
    const size_t pixel_count = (size_t)p->width * p->height;

    assert(in_bytes == pixel_count * RGB_CHANNELS);
    (void)in_bytes;
    for (size_t i = 0; i < pixel_count; i++) {
        for (size_t c = 0; c < RGB_CHANNELS; c++) {
            float v = (float)src[i * RGB_CHANNELS + c] / U8_FULL_SCALE;
            v = v - p->mean[c];
            v = v / p->std[c];
            /* Plane c holds channel c of every pixel, row after row. */
            memcpy(dst + (c * pixel_count + i) * sizeof(float), &v, sizeof v);
        }
    }
}

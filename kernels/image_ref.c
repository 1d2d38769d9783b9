/* SPDX-License-Identifier: MIT */
/*
 * The reference of pipeline kind "image" (contract in kernels.h), and the
 * plan of the arithmetic that it and the kernel share (image_math.h): the
 * same per-pixel functions, compiled here with -ffp-contract=off, so that
 * both round the same operations in the same order.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "image_math.h"
#include "kernels.h"

/* round((a - b) / 2) with ties to even, as Python's round() in torchvision's
 * center_crop; a >= b. */
static int32_t half_even(uint32_t a, uint32_t b) {
    const uint32_t d = a - b, k = d / 2;
    return (int32_t)(d % 2 == 0 || k % 2 == 0 ? k : k + 1);
}

static void axis_for(gf_image_axis *a, uint32_t in, uint32_t out, uint32_t resized, int32_t offset,
                     int antialias) {
    a->in = in;
    a->out = out;
    a->resized = resized;
    a->offset = offset;
    a->scale = (float)in / (float)resized;
    a->identity = in == resized;
    /* Downscaling with antialias widens the tent to `scale` source pixels
     * each side; otherwise it is bilinear (support 1). */
    a->support = antialias && a->scale > 1.0f ? a->scale : 1.0f;
    a->denom = 2 * (int32_t)(antialias && a->scale > 1.0f ? in : resized);
}

static void yuv_coeffs(uint32_t matrix, uint32_t range, gf_yuv_coeffs *k) {
    const double kr = matrix == GF_YUV_BT709 ? GF_BT709_KR : GF_BT601_KR;
    const double kb = matrix == GF_YUV_BT709 ? GF_BT709_KB : GF_BT601_KB;
    const double kg = 1.0 - kr - kb;
    const int full = range == GF_YUV_FULL;
    k->y_offset = full ? 0.0f : 16.0f;
    k->y_scale = full ? 1.0f : (float)(255.0 / 219.0);
    k->c_scale = full ? 1.0f : (float)(255.0 / 224.0);
    k->cr_r = (float)(2.0 * (1.0 - kr));
    k->cb_b = (float)(2.0 * (1.0 - kb));
    k->cb_g = (float)(2.0 * kb * (1.0 - kb) / kg);
    k->cr_g = (float)(2.0 * kr * (1.0 - kr) / kg);
}

void gf_image_plan_for(const gf_params *p, gf_image_plan *pl) {
    const uint32_t w = p->width, h = p->height;
    const int resize = p->out_width > 0 && p->out_height > 0;
    const uint32_t ow = resize ? p->out_width : w, oh = resize ? p->out_height : h;
    uint32_t rw = ow, rh = oh;
    int32_t dx = 0, dy = 0;
    /* The source is at least as wide as the output, in aspect. */
    const int wide = (uint64_t)w * oh >= (uint64_t)h * ow;

    memset(pl, 0, sizeof *pl);
    pl->format = p->format;
    pl->layout = p->layout;
    pl->dtype = p->dtype;
    if (resize && p->fit == GF_FIT_CROP) {
        if (wide)
            rw = (uint32_t)((uint64_t)w * oh / h);
        else
            rh = (uint32_t)((uint64_t)h * ow / w);
        dx = half_even(rw, ow);
        dy = half_even(rh, oh);
    } else if (resize && p->fit == GF_FIT_LETTERBOX) {
        if (wide)
            rh = (uint32_t)((uint64_t)h * ow / w);
        else
            rw = (uint32_t)((uint64_t)w * oh / h);
        rw = rw > 0 ? rw : 1;
        rh = rh > 0 ? rh : 1;
        dx = (int32_t)((ow - rw) / 2);
        dy = (int32_t)((oh - rh) / 2);
        pl->letterbox = 1;
    }
    axis_for(&pl->x, w, ow, rw, dx, p->antialias != 0);
    axis_for(&pl->y, h, oh, rh, dy, p->antialias != 0);
    yuv_coeffs(p->matrix, p->range, &pl->yuv);
    memcpy(pl->mean, p->mean, sizeof pl->mean);
    memcpy(pl->std, p->std, sizeof pl->std);
    pl->pad_value = p->pad_value;
}

uint16_t gf_f32_to_f16(float f) {
    uint32_t x, mant, sign, half;
    int32_t e;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    mant = x & 0x7FFFFFu;
    e = (int32_t)((x >> 23) & 0xFFu) - 127 + 15;
    if (((x >> 23) & 0xFFu) == 0xFFu) /* infinity, or a quiet NaN */
        return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0u));
    if (e >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        /* A half subnormal (or zero): the 24-bit significand shifted into
         * units of 2^-24, rounded to nearest, ties to even. */
        if (e < -10)
            return (uint16_t)sign;
        const uint32_t m = mant | 0x800000u, shift = (uint32_t)(14 - e);
        const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        half = m >> shift;
        if (rem > halfway || (rem == halfway && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    half = ((uint32_t)e << 10) | (mant >> 13);
    /* Rounding may carry into the exponent, up to infinity: as it should. */
    if ((mant & 0x1FFFu) > 0x1000u || ((mant & 0x1FFFu) == 0x1000u && (half & 1u)))
        half++;
    return (uint16_t)(sign | half);
}

void gf_image_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    gf_image_plan pl;
    unsigned char *dst = out;

    assert(in_bytes == gf_image_input_bytes(p->format, p->width, p->height));
    (void)in_bytes;
    gf_image_plan_for(p, &pl);
    for (uint32_t oy = 0; oy < pl.y.out; oy++) {
        for (uint32_t ox = 0; ox < pl.x.out; ox++) {
            float rgb[3];
            gf_image_pixel(&pl, in, (int32_t)ox, (int32_t)oy, rgb);
            for (unsigned c = 0; c < GF_IMAGE_CHANNELS; c++) {
                const size_t i = gf_image_out_index(&pl, (int32_t)ox, (int32_t)oy, c);
                if (pl.dtype == GF_IMAGE_UINT8) {
                    dst[i] = gf_image_to_u8(rgb[c]);
                } else if (pl.dtype == GF_IMAGE_FLOAT16) {
                    const uint16_t v = gf_f32_to_f16(gf_image_normalise(&pl, rgb[c], c));
                    memcpy(dst + i * sizeof v, &v, sizeof v);
                } else {
                    const float v = gf_image_normalise(&pl, rgb[c], c);
                    memcpy(dst + i * sizeof v, &v, sizeof v);
                }
            }
        }
    }
}

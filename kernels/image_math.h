/* SPDX-License-Identifier: MIT */
/*
 * The arithmetic of pipeline kind "image", written once and compiled twice:
 * by the C compiler into the reference (kernels/image_ref.c, built with
 * -ffp-contract=off) and by nvcc into the kernel (kernels/image.cu, built
 * with --fmad=false).  Every value is a float32 operation rounded to
 * nearest, in the order written here, on both sides, so the kernel and the
 * reference agree bit for bit.  docs/stages.md, "image", states the same
 * arithmetic in words.
 *
 * What depends on the parameters alone (the geometry, the YUV
 * coefficients) is computed on the host by gf_image_plan() and handed to
 * the per-pixel functions; those are all the kernel runs.
 *
 * Plain C99 that nvcc also compiles; included by image_ref.c, image.cu and
 * registry.c only.
 */
#ifndef GF_IMAGE_MATH_H
#define GF_IMAGE_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"

#ifndef __CUDACC__
#include <math.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define GF_IMAGE_FN __host__ __device__ static inline
#else
#define GF_IMAGE_FN static inline
#endif

/* The values of gf_params.format, .matrix, .range, .fit, .layout, .dtype,
 * in the order of their names in registry.c's choice lists. */
enum gf_image_format {
    GF_IMAGE_RGB8,  /* R, G, B bytes per pixel                               */
    GF_IMAGE_BGR8,  /* B, G, R                                               */
    GF_IMAGE_RGBA8, /* R, G, B, A (A ignored)                                */
    GF_IMAGE_GRAY8, /* one byte per pixel, to three equal channels           */
    GF_IMAGE_NV12,  /* Y plane, then interleaved U, V at half size each way  */
    GF_IMAGE_I420,  /* Y plane, U plane, V plane, chroma at half size        */
    GF_IMAGE_YUYV,  /* Y0 U Y1 V for each pair of pixels (4:2:2, YUY2)      */
    GF_IMAGE_FORMAT_COUNT
};
enum gf_yuv_matrix { GF_YUV_BT601, GF_YUV_BT709 };
enum gf_yuv_range { GF_YUV_LIMITED, GF_YUV_FULL };
enum gf_image_fit { GF_FIT_STRETCH, GF_FIT_CROP, GF_FIT_LETTERBOX };
enum gf_image_layout { GF_LAYOUT_CHW, GF_LAYOUT_HWC };
enum gf_image_dtype { GF_IMAGE_FLOAT32, GF_IMAGE_FLOAT16, GF_IMAGE_UINT8 };

/* Output channels: always R, G, B. */
#define GF_IMAGE_CHANNELS 3u
/* An 8-bit channel's full scale. */
#define GF_IMAGE_FULL_SCALE 255.0f

/* Whether `format` carries Y'CbCr (matrix and range apply). */
GF_IMAGE_FN int gf_image_is_yuv(uint32_t format) {
    return format == GF_IMAGE_NV12 || format == GF_IMAGE_I420 || format == GF_IMAGE_YUYV;
}

/* Bytes of one output element of `dtype`. */
GF_IMAGE_FN uint32_t gf_image_dtype_bytes(uint32_t dtype) {
    return dtype == GF_IMAGE_FLOAT32 ? 4u : dtype == GF_IMAGE_FLOAT16 ? 2u : 1u;
}

/* The one input length of a width x height image in `format` (rows packed,
 * no padding; 4:2:0 chroma planes of ceil(w/2) x ceil(h/2)), or 0 for a
 * size the format cannot have (yuyv of odd width). */
GF_IMAGE_FN uint64_t gf_image_input_bytes(uint32_t format, uint32_t w, uint32_t h) {
    const uint64_t px = (uint64_t)w * h, chroma = (uint64_t)((w + 1) / 2) * ((h + 1) / 2);
    switch (format) {
    case GF_IMAGE_RGB8:
    case GF_IMAGE_BGR8: return px * 3;
    case GF_IMAGE_RGBA8: return px * 4;
    case GF_IMAGE_GRAY8: return px;
    case GF_IMAGE_NV12:
    case GF_IMAGE_I420: return px + 2 * chroma;
    case GF_IMAGE_YUYV: return w % 2 == 0 ? px * 2 : 0;
    default: return 0;
    }
}

/*
 * Y'CbCr to R'G'B' in 0..255 units, as float32 constants: y' = (Y - y_offset)
 * * y_scale, cb = (U - 128) * c_scale, cr = (V - 128) * c_scale, then
 * R = y' + cr_r*cr, G = (y' - cb_g*cb) - cr_g*cr, B = y' + cb_b*cb, each
 * clamped to [0, 255].  From Kr, Kb of the matrix (Kg = 1 - Kr - Kb):
 * cr_r = 2(1-Kr), cb_b = 2(1-Kb), cb_g = 2Kb(1-Kb)/Kg, cr_g = 2Kr(1-Kr)/Kg;
 * limited range: y_offset 16, y_scale 255/219, c_scale 255/224; full:
 * 0, 1, 1.  Computed in double, rounded once to float.
 */
typedef struct gf_yuv_coeffs {
    float y_offset, y_scale, c_scale;
    float cr_r, cb_g, cr_g, cb_b;
} gf_yuv_coeffs;

/* Rec. ITU-R BT.601 and BT.709's luma weights of R and B. */
#define GF_BT601_KR 0.299
#define GF_BT601_KB 0.114
#define GF_BT709_KR 0.2126
#define GF_BT709_KB 0.0722

/* The separable filter along one axis: what gf_image_plan() derives from
 * the sizes (docs/stages.md, "Resize"). */
typedef struct gf_image_axis {
    uint32_t in;      /* source pixels along the axis                    */
    uint32_t out;     /* output pixels along it                          */
    uint32_t resized; /* the resized image's pixels along it            */
    int32_t offset;   /* crop: the output's first pixel in the resized
                         image; letterbox: the resized image's first pixel
                         in the output; stretch: 0                        */
    float scale;      /* source pixels per resized pixel: in / resized    */
    float support;    /* the filter's half-width in source pixels         */
    int32_t denom;    /* a tap's distance, in units of the tent, is an
                         integer over denom: 2 * in when widened, else
                         2 * resized (gf_image_tap)                      */
    int identity;     /* resized == in: each output pixel is one source
                         pixel, no filter                                 */
} gf_image_axis;

/* Everything per launch: the geometry and the per-pixel constants. */
typedef struct gf_image_plan {
    uint32_t format, layout, dtype;
    gf_image_axis x, y;
    gf_yuv_coeffs yuv;
    float mean[3], std[3];
    float pad_value;
    int letterbox;
} gf_image_plan;

/* The triangle (tent) filter: 1 - |d| inside (-1, 1), else 0. */
GF_IMAGE_FN float gf_image_tent(float d) {
    if (d < 0.0f)
        d = -d;
    return d < 1.0f ? 1.0f - d : 0.0f;
}

/*
 * The taps of resized pixel `r` along axis `a`: first source pixel *first,
 * count *count, and the sum of their unnormalised weights *total (each
 * tap's weight is gf_image_tap(...) / total).  As PyTorch's
 * upsample_bilinear2d_aa (align_corners=False): centre = scale*(r + 0.5),
 * first = max(int(centre - support + 0.5), 0), end = min(int(centre +
 * support + 0.5), in).
 *
 * A tap's distance from the centre, ((first + j + 0.5) - centre) * inv, is
 * computed exactly as the integer ((2(first + j) + 1) * resized - (2r + 1)
 * * in) over denom, one double division rounded once to float32, so each
 * tap's tent value is within 2^-24 of the exact one (test_media.c).  The
 * centre rounded to float32 on its own is off by up to half its float32
 * step, 6e-5 source pixels near x = 1920, which moved values by up to 4e-5
 * after Normalize on random images.  (PyTorch's float32 kernels, compiled
 * with FMA contraction, fuse that product into each use instead; theirs
 * are off by the float32 scale's rounding times r + 0.5, up to 4.6e-5
 * source pixels for 1080 -> 224, and without antialias by the rounding of
 * the source position too.)
 */
GF_IMAGE_FN float gf_image_centre(const gf_image_axis *a, int32_t r) {
    return a->scale * ((float)r + 0.5f);
}
GF_IMAGE_FN float gf_image_tap(const gf_image_axis *a, int32_t r, int32_t first, int32_t j) {
    const int64_t n = (2 * (int64_t)(j + first) + 1) * (int64_t)a->resized -
                      (2 * (int64_t)r + 1) * (int64_t)a->in;
    return gf_image_tent((float)((double)n / (double)a->denom));
}
GF_IMAGE_FN void gf_image_taps(const gf_image_axis *a, int32_t r, int32_t *first, int32_t *count,
                               float *total) {
    const float centre = gf_image_centre(a, r);
    int32_t lo = (int32_t)((centre - a->support) + 0.5f);
    int32_t hi = (int32_t)((centre + a->support) + 0.5f);
    float t = 0.0f;
    if (lo < 0)
        lo = 0;
    if (hi > (int32_t)a->in)
        hi = (int32_t)a->in;
    for (int32_t j = 0; j < hi - lo; j++)
        t = t + gf_image_tap(a, r, lo, j);
    *first = lo;
    *count = hi - lo;
    *total = t;
}

/* v clamped to [0, 255]; written as two selects, which compile to min and
 * max instructions (colour values land on either side at random, so
 * branches would mispredict). */
GF_IMAGE_FN float gf_image_clamp(float v) {
    v = v > 0.0f ? v : 0.0f;
    return v < GF_IMAGE_FULL_SCALE ? v : GF_IMAGE_FULL_SCALE;
}

/* One source pixel's R, G, B in 0..255 units. */
GF_IMAGE_FN void gf_image_source_rgb(const gf_image_plan *pl, const unsigned char *in, int32_t sx,
                                     int32_t sy, float rgb[3]) {
    const uint32_t w = pl->x.in, h = pl->y.in;
    const size_t px = (size_t)sy * w + (size_t)sx;
    float yv, u, v;
    switch (pl->format) {
    case GF_IMAGE_RGB8:
        rgb[0] = (float)in[px * 3];
        rgb[1] = (float)in[px * 3 + 1];
        rgb[2] = (float)in[px * 3 + 2];
        return;
    case GF_IMAGE_BGR8:
        rgb[0] = (float)in[px * 3 + 2];
        rgb[1] = (float)in[px * 3 + 1];
        rgb[2] = (float)in[px * 3];
        return;
    case GF_IMAGE_RGBA8:
        rgb[0] = (float)in[px * 4];
        rgb[1] = (float)in[px * 4 + 1];
        rgb[2] = (float)in[px * 4 + 2];
        return;
    case GF_IMAGE_GRAY8: rgb[0] = rgb[1] = rgb[2] = (float)in[px]; return;
    case GF_IMAGE_NV12: {
        /* Chroma of the 2x2 block the pixel lies in (nearest). */
        const size_t cw = (w + 1) / 2, c = (size_t)(sy / 2) * cw + (size_t)(sx / 2);
        const unsigned char *uv = in + (size_t)w * h;
        yv = (float)in[px];
        u = (float)uv[c * 2];
        v = (float)uv[c * 2 + 1];
        break;
    }
    case GF_IMAGE_I420: {
        const size_t cw = (w + 1) / 2, ch = (h + 1) / 2,
                     c = (size_t)(sy / 2) * cw + (size_t)(sx / 2);
        const unsigned char *up = in + (size_t)w * h;
        yv = (float)in[px];
        u = (float)up[c];
        v = (float)up[cw * ch + c];
        break;
    }
    default: { /* GF_IMAGE_YUYV: Y0 U Y1 V, the pair's chroma for both */
        const unsigned char *pair = in + (size_t)sy * w * 2 + (size_t)(sx / 2) * 4;
        yv = (float)pair[(sx % 2) * 2];
        u = (float)pair[1];
        v = (float)pair[3];
        break;
    }
    }
    {
        const gf_yuv_coeffs *k = &pl->yuv;
        const float y1 = (yv - k->y_offset) * k->y_scale;
        const float cb = (u - 128.0f) * k->c_scale, cr = (v - 128.0f) * k->c_scale;
        rgb[0] = gf_image_clamp(y1 + k->cr_r * cr);
        rgb[1] = gf_image_clamp((y1 - k->cb_g * cb) - k->cr_g * cr);
        rgb[2] = gf_image_clamp(y1 + k->cb_b * cb);
    }
}

/*
 * Output pixel (ox, oy)'s R, G, B in 0..255 units, before normalisation:
 * the pad value outside a letterboxed image; else the source pixel itself
 * on an identity axis, or the filtered sum: for each tap row i in order,
 * h_i = (sum over tap columns j in order of t_j * v_ij) / T_x, then
 * (sum over i in order of t_i * h_i) / T_y, where t is a tap's tent value
 * and T the sum of its axis' tent values (so the weights t/T sum to 1, as
 * PyTorch's normalised weights do, with one division per row instead of one
 * per tap).
 */
GF_IMAGE_FN void gf_image_pixel(const gf_image_plan *pl, const unsigned char *in, int32_t ox,
                                int32_t oy, float rgb[3]) {
    int32_t rx = ox + (pl->letterbox ? -pl->x.offset : pl->x.offset);
    int32_t ry = oy + (pl->letterbox ? -pl->y.offset : pl->y.offset);
    int32_t x0, xn, y0, yn;
    float xt, yt;
    if (rx < 0 || ry < 0 || rx >= (int32_t)pl->x.resized || ry >= (int32_t)pl->y.resized) {
        rgb[0] = rgb[1] = rgb[2] = pl->pad_value;
        return;
    }
    if (pl->x.identity && pl->y.identity) {
        gf_image_source_rgb(pl, in, rx, ry, rgb);
        return;
    }
    if (pl->x.identity) {
        x0 = rx;
        xn = 1;
        xt = 1.0f;
    } else {
        gf_image_taps(&pl->x, rx, &x0, &xn, &xt);
    }
    if (pl->y.identity) {
        y0 = ry;
        yn = 1;
        yt = 1.0f;
    } else {
        gf_image_taps(&pl->y, ry, &y0, &yn, &yt);
    }
    rgb[0] = rgb[1] = rgb[2] = 0.0f;
    for (int32_t i = 0; i < yn; i++) {
        const float ty = pl->y.identity ? 1.0f : gf_image_tap(&pl->y, ry, y0, i);
        float h[3] = {0.0f, 0.0f, 0.0f};
        for (int32_t j = 0; j < xn; j++) {
            const float tx = pl->x.identity ? 1.0f : gf_image_tap(&pl->x, rx, x0, j);
            float v[3];
            gf_image_source_rgb(pl, in, x0 + j, y0 + i, v);
            h[0] = h[0] + tx * v[0];
            h[1] = h[1] + tx * v[1];
            h[2] = h[2] + tx * v[2];
        }
        rgb[0] = rgb[0] + ty * (h[0] / xt);
        rgb[1] = rgb[1] + ty * (h[1] / xt);
        rgb[2] = rgb[2] + ty * (h[2] / xt);
    }
    rgb[0] = rgb[0] / yt;
    rgb[1] = rgb[1] / yt;
    rgb[2] = rgb[2] / yt;
}

/* A float32 value normalised for channel c: (v/255 - mean) / std. */
GF_IMAGE_FN float gf_image_normalise(const gf_image_plan *pl, float v, unsigned c) {
    return (v / GF_IMAGE_FULL_SCALE - pl->mean[c]) / pl->std[c];
}

/* A value in 0..255 units as a byte: rounded to nearest, ties to even
 * (rintf), then clamped to [0, 255]. */
GF_IMAGE_FN unsigned char gf_image_to_u8(float v) {
    const float r = rintf(v);
    return (unsigned char)(r < 0.0f ? 0.0f : r > GF_IMAGE_FULL_SCALE ? GF_IMAGE_FULL_SCALE : r);
}

/* Where channel c of output pixel (ox, oy) goes, in elements. */
GF_IMAGE_FN size_t gf_image_out_index(const gf_image_plan *pl, int32_t ox, int32_t oy, unsigned c) {
    const size_t px = (size_t)oy * pl->x.out + (size_t)ox;
    return pl->layout == GF_LAYOUT_CHW ? (size_t)c * pl->x.out * pl->y.out + px
                                       : px * GF_IMAGE_CHANNELS + c;
}

/* Output elements of a plan: out_width * out_height * 3. */
GF_IMAGE_FN size_t gf_image_out_elements(const gf_image_plan *pl) {
    return (size_t)pl->x.out * pl->y.out * GF_IMAGE_CHANNELS;
}

/*
 * Fills `pl` from the parameters (host only; the kernel gets the result by
 * value).  `p` has passed the registry's check_params.  The resized size:
 * stretch: the output's; crop: the smallest that covers the output with the
 * source's aspect, the axis that binds at the output's size exactly and the
 * other floor(in * out_binding / in_binding), centred by
 * round_half_even((resized - out) / 2) as torchvision's center_crop;
 * letterbox: the largest that fits, the other axis floor(...) but at least
 * 1, placed at floor((out - resized) / 2).  No resize: the input's size.
 */
void gf_image_plan_for(const gf_params *p, gf_image_plan *pl);

/* float32 to IEEE binary16 bits, rounded to nearest, ties to even (as CUDA's
 * __float2half_rn): overflow gives infinity, tiny values subnormals or 0. */
uint16_t gf_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the media kinds' registry entries and C references, "image"
 * (kernels/image_ref.c, image_math.h) and "spectrogram"
 * (kernels/spectrogram_ref.c): what anyone can check without the reference
 * (no resize is byte/255 exactly, gray is three equal planes, a tone at bin
 * k peaks at bin k, silence is log(eps), Parseval), values worked out by
 * hand (the bilinear and antialiased taps, the crop and letterbox geometry,
 * BT.601 and BT.709 colours), every format, option and odd size, the
 * length and parameter rules with their messages, and the parameters from
 * JSON.  Small images and short audio: a loaded 2-core machine runs it in
 * about a second.  Needs no GPU (test_media_gpu.c runs the kernels).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "image_math.h"
#include "kernels.h"
#include "params_json.h"
#include "pipeline.h"
#include "runner.h"
#include "spectrogram_math.h"

#define WHY_BYTES 512
/* The daemon's default max_frame_bytes. */
#define FRAME_LIMIT (16u << 20)
#define PI          3.14159265358979323846

static const gf_pipeline_kind *kind(const char *name) {
    const gf_pipeline_kind *k = gf_pipeline_kind_find(name);
    ck_assert_msg(k != NULL, "no kind %s", name);
    return k;
}

static float f32_at(const unsigned char *buf, size_t i) {
    float v;
    memcpy(&v, buf + i * sizeof v, sizeof v);
    return v;
}

static uint16_t u16_at(const unsigned char *buf, size_t i) {
    uint16_t v;
    memcpy(&v, buf + i * sizeof v, sizeof v);
    return v;
}

/* xorshift64*: the same inputs every run. */
static uint64_t next_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static void fill_random(unsigned char *buf, size_t n, uint64_t seed) {
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(next_rand(&s) >> 56);
}

/* ---- image: helpers ------------------------------------------------------------- */

static gf_params image_params(const char *format, uint32_t w, uint32_t h) {
    gf_params p;
    gf_params_defaults(kind("image"), &p);
    for (uint32_t i = 0; i < GF_IMAGE_FORMAT_COUNT; i++)
        if (strcmp(gf_param_choice(&kind("image")->params[0], i), format) == 0)
            p.format = i;
    ck_assert_str_eq(gf_param_choice(&kind("image")->params[0], p.format), format);
    p.width = w;
    p.height = h;
    return p;
}

/* Runs the reference on `in` after the registry's checks; returns a
 * malloc'd output of *out_bytes (the caller frees it). */
static unsigned char *run_image(const gf_params *p, const void *in, size_t *out_bytes) {
    const gf_pipeline_kind *k = kind("image");
    char why[WHY_BYTES] = "";
    ck_assert_msg(k->check_params(p, FRAME_LIMIT, why, sizeof why) == 0, "%s", why);
    const uint64_t in_bytes = gf_image_input_bytes(p->format, p->width, p->height);
    const int64_t n = k->output_bytes(p, in_bytes, why, sizeof why);
    ck_assert_msg(n > 0, "%s", why);
    unsigned char *out = malloc((size_t)n);
    ck_assert_ptr_nonnull(out);
    memset(out, 0xA5, (size_t)n);
    k->reference(p, in, (size_t)in_bytes, out);
    *out_bytes = (size_t)n;
    return out;
}

/* ---- image: cases anyone can check ----------------------------------------------- */

/* No resize: rgb8 to float32 planes is byte/255 exactly, at an odd size. */
START_TEST(test_image_rgb8_is_byte_over_255) {
    gf_params p = image_params("rgb8", 7, 5);
    unsigned char in[7 * 5 * 3];
    size_t n;
    fill_random(in, sizeof in, 1);
    unsigned char *out = run_image(&p, in, &n);
    ck_assert_uint_eq(n, sizeof in * 4);
    for (uint32_t c = 0; c < 3; c++)
        for (uint32_t i = 0; i < 35; i++)
            ck_assert_msg(f32_at(out, c * 35 + i) == (float)in[i * 3 + c] / 255.0f,
                          "channel %u pixel %u", c, i);
    free(out);
}
END_TEST

/* gray8 gives three equal planes; rgba8 ignores alpha; bgr8 swaps. */
START_TEST(test_image_gray_rgba_bgr) {
    unsigned char gray[9 * 4], rgba[9 * 4 * 4], rgb[9 * 4 * 3], bgr[9 * 4 * 3];
    size_t n;
    fill_random(gray, sizeof gray, 2);
    fill_random(rgba, sizeof rgba, 3);
    for (size_t i = 0; i < 36; i++) {
        for (size_t c = 0; c < 3; c++) {
            rgb[i * 3 + c] = rgba[i * 4 + c];
            bgr[i * 3 + 2 - c] = rgba[i * 4 + c];
        }
    }
    gf_params p = image_params("gray8", 9, 4);
    unsigned char *g = run_image(&p, gray, &n);
    for (size_t i = 0; i < 36; i++) {
        ck_assert(f32_at(g, i) == (float)gray[i] / 255.0f);
        ck_assert(f32_at(g, 36 + i) == f32_at(g, i) && f32_at(g, 72 + i) == f32_at(g, i));
    }
    free(g);
    /* The same three formats of the same colours, resized: the same bytes. */
    gf_params pa = image_params("rgba8", 9, 4), pr = image_params("rgb8", 9, 4),
              pb = image_params("bgr8", 9, 4);
    pa.out_width = pr.out_width = pb.out_width = 5;
    pa.out_height = pr.out_height = pb.out_height = 3;
    size_t na, nr, nb;
    unsigned char *a = run_image(&pa, rgba, &na), *r = run_image(&pr, rgb, &nr),
                  *b = run_image(&pb, bgr, &nb);
    ck_assert_uint_eq(na, 5 * 3 * 3 * 4);
    ck_assert(na == nr && nr == nb);
    ck_assert_int_eq(memcmp(a, r, na), 0);
    ck_assert_int_eq(memcmp(b, r, nb), 0);
    free(a);
    free(r);
    free(b);
}
END_TEST

/* uint8 HWC without resize is the input itself; CHW is its transpose;
 * float16 is float32 rounded; mean and std are (v/255 - m)/s. */
START_TEST(test_image_layouts_and_dtypes) {
    unsigned char in[5 * 3 * 3];
    size_t n8, n32, nh, n16, nn;
    fill_random(in, sizeof in, 4);
    gf_params p = image_params("rgb8", 5, 3);
    p.dtype = GF_IMAGE_UINT8;
    p.layout = GF_LAYOUT_HWC;
    unsigned char *u8 = run_image(&p, in, &n8);
    ck_assert_uint_eq(n8, sizeof in);
    ck_assert_int_eq(memcmp(u8, in, sizeof in), 0);
    free(u8);

    p = image_params("rgb8", 5, 3);
    unsigned char *chw = run_image(&p, in, &n32);
    p.layout = GF_LAYOUT_HWC;
    unsigned char *hwc = run_image(&p, in, &nh);
    ck_assert_uint_eq(n32, nh);
    for (size_t i = 0; i < 15; i++)
        for (size_t c = 0; c < 3; c++)
            ck_assert(f32_at(hwc, i * 3 + c) == f32_at(chw, c * 15 + i));
    p.layout = GF_LAYOUT_CHW;
    p.dtype = GF_IMAGE_FLOAT16;
    unsigned char *half = run_image(&p, in, &n16);
    ck_assert_uint_eq(n16, n32 / 2);
    for (size_t i = 0; i < 45; i++)
        ck_assert_uint_eq(u16_at(half, i), gf_f32_to_f16(f32_at(chw, i)));
    p.dtype = GF_IMAGE_FLOAT32;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(p.mean, mean, sizeof mean);
    memcpy(p.std, std, sizeof std);
    unsigned char *norm = run_image(&p, in, &nn);
    for (size_t c = 0; c < 3; c++)
        for (size_t i = 0; i < 15; i++)
            ck_assert(f32_at(norm, c * 15 + i) ==
                      ((float)in[i * 3 + c] / 255.0f - mean[c]) / std[c]);
    free(chw);
    free(hwc);
    free(half);
    free(norm);
}
END_TEST

/* binary16 rounding, as CUDA's __float2half_rn. */
START_TEST(test_image_f16_rounding) {
    ck_assert_uint_eq(gf_f32_to_f16(1.0f), 0x3C00);
    ck_assert_uint_eq(gf_f32_to_f16(-2.0f), 0xC000);
    ck_assert_uint_eq(gf_f32_to_f16(0.0f), 0x0000);
    ck_assert_uint_eq(gf_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(gf_f32_to_f16(0.1f), 0x2E66);
    ck_assert_uint_eq(gf_f32_to_f16(65504.0f), 0x7BFF);
    ck_assert_uint_eq(gf_f32_to_f16(65519.0f), 0x7BFF);
    ck_assert_uint_eq(gf_f32_to_f16(65520.0f), 0x7C00); /* halfway to 65536: even is infinity */
    ck_assert_uint_eq(gf_f32_to_f16(1e9f), 0x7C00);
    ck_assert_uint_eq(gf_f32_to_f16(-INFINITY), 0xFC00);
    ck_assert_uint_eq(gf_f32_to_f16(1.0f + 0x1p-11f), 0x3C00); /* tie: to even */
    ck_assert_uint_eq(gf_f32_to_f16(1.0f + 0x3p-11f), 0x3C02); /* tie: to even, up */
    ck_assert_uint_eq(gf_f32_to_f16(0x1p-24f), 0x0001);        /* smallest subnormal */
    ck_assert_uint_eq(gf_f32_to_f16(0x1p-25f), 0x0000);        /* tie: to even 0 */
    ck_assert_uint_eq(gf_f32_to_f16(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(gf_f32_to_f16(0x1p-14f), 0x0400);     /* smallest normal */
    ck_assert_uint_eq(gf_f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up into normals */
}
END_TEST

/* A 1-row gray image resized to `ow` wide, as uint8 or float (0..255). */
static void resize_row(const unsigned char *row, uint32_t w, uint32_t ow, int antialias,
                       float *got) {
    gf_params p = image_params("gray8", w, 1);
    size_t n;
    p.out_width = ow;
    p.out_height = 1;
    p.antialias = (uint32_t)antialias;
    unsigned char *out = run_image(&p, row, &n);
    for (uint32_t x = 0; x < ow; x++)
        got[x] = f32_at(out, x) * 255.0f;
    free(out);
}

/* Bilinear with half-pixel centres (torchvision, OpenCV INTER_LINEAR):
 * 2 -> 4 gives v0, 3/4 v0 + 1/4 v1, 1/4 v0 + 3/4 v1, v1; 4 -> 2 without
 * antialias averages pairs; with antialias the tent is 2 pixels wide:
 * (3 v0 + 3 v1 + v2) / 7 and (v1 + 3 v2 + 3 v3) / 7. */
START_TEST(test_image_resize_taps) {
    const unsigned char two[2] = {0, 200}, four[4] = {10, 50, 90, 250};
    float got[4];
    resize_row(two, 2, 4, 1, got);
    ck_assert_float_eq_tol(got[0], 0.0f, 1e-4f);
    ck_assert_float_eq_tol(got[1], 50.0f, 1e-4f);
    ck_assert_float_eq_tol(got[2], 150.0f, 1e-4f);
    ck_assert_float_eq_tol(got[3], 200.0f, 1e-4f);
    resize_row(four, 4, 2, 0, got);
    ck_assert_float_eq_tol(got[0], 30.0f, 1e-4f);
    ck_assert_float_eq_tol(got[1], 170.0f, 1e-4f);
    resize_row(four, 4, 2, 1, got);
    ck_assert_float_eq_tol(got[0], (3 * 10 + 3 * 50 + 90) / 7.0f, 1e-4f);
    ck_assert_float_eq_tol(got[1], (50 + 3 * 90 + 3 * 250) / 7.0f, 1e-4f);
    /* Upscaling, antialias or not: the same bilinear. */
    float aa[4], plain[4];
    resize_row(two, 2, 4, 1, aa);
    resize_row(two, 2, 4, 0, plain);
    ck_assert_int_eq(memcmp(aa, plain, sizeof aa), 0);
}
END_TEST

/* Each tap's tent value is the exact one rounded: the distance (j + 0.5 -
 * centre) / support from integers, rounded once, then 1 - |d| rounded once,
 * so within 2^-24 (1 - |d| and |d| sum to 1).  A centre rounded to float32
 * first would miss by up to half its float32 step over the support: 1.3e-5
 * at x = 1900 of 1920 -> 398, 100 times more. */
START_TEST(test_image_tap_distances) {
    static const struct {
        uint32_t in, resized, antialias;
    } cases[] = {{1920, 398, 1}, {1920, 398, 0}, {1080, 224, 1}, {45, 160, 1}, {333, 128, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gf_image_plan pl;
        gf_params p = image_params("gray8", cases[c].in, 2);
        p.out_width = cases[c].resized;
        p.out_height = 2;
        p.antialias = cases[c].antialias;
        gf_image_plan_for(&p, &pl);
        const double in = cases[c].in, resized = cases[c].resized;
        const double support = cases[c].antialias && in > resized ? in / resized : 1.0;
        for (int32_t r = 0; r < (int32_t)cases[c].resized; r++) {
            int32_t first, count;
            float total;
            gf_image_taps(&pl.x, r, &first, &count, &total);
            for (int32_t j = 0; j < count; j++) {
                /* In double: within 1e-15 of exact, which 2^-46 covers. */
                const double d = ((first + j + 0.5) * resized - (r + 0.5) * in) / resized / support;
                const double want = fabs(d) < 1.0 ? 1.0 - fabs(d) : 0.0;
                const float got = gf_image_tap(&pl.x, r, first, j);
                ck_assert_msg(fabs(got - want) <= 0x1p-24 + 0x1p-46,
                              "%u -> %u: r %d tap %d: %.9g, exact %.9g", cases[c].in,
                              cases[c].resized, r, first + j, got, want);
            }
        }
    }
}
END_TEST

/* A flat image stays flat through any resize, fit and format. */
START_TEST(test_image_flat_stays_flat) {
    static const char *const formats[] = {"rgb8", "gray8", "nv12", "i420", "yuyv"};
    static const uint32_t outs[][2] = {{3, 3}, {8, 5}, {1, 1}, {21, 2}};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        gf_params p = image_params(formats[f], 10, 7);
        const uint64_t in_bytes = gf_image_input_bytes(p.format, 10, 7);
        unsigned char *in = malloc(in_bytes);
        /* Gray 100 in every format: Y 100 and neutral chroma, full range. */
        memset(in, 100, in_bytes);
        if (p.format == GF_IMAGE_NV12 || p.format == GF_IMAGE_I420)
            memset(in + 70, 128, in_bytes - 70);
        if (p.format == GF_IMAGE_YUYV)
            for (uint64_t i = 1; i < in_bytes; i += 2)
                in[i] = 128;
        p.range = GF_YUV_FULL;
        p.dtype = GF_IMAGE_UINT8;
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
            for (uint32_t fit = GF_FIT_STRETCH; fit <= GF_FIT_LETTERBOX; fit++) {
                size_t n;
                p.out_width = outs[o][0];
                p.out_height = outs[o][1];
                p.fit = fit;
                p.pad_value = 100.0f;
                unsigned char *out = run_image(&p, in, &n);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(out[i] == 100, "%s to %ux%u fit %u: byte %zu is %u", formats[f],
                                  outs[o][0], outs[o][1], fit, i, out[i]);
                free(out);
            }
        }
        free(in);
    }
}
END_TEST

/* The crop and letterbox geometry of torchvision's Resize(short side) +
 * CenterCrop, and of a letterbox, for the sizes cameras give. */
START_TEST(test_image_geometry) {
    gf_image_plan pl;
    gf_params p = image_params("nv12", 1920, 1080);
    p.out_width = p.out_height = 224;
    p.fit = GF_FIT_CROP;
    gf_image_plan_for(&p, &pl);
    /* Resize(224): 1080 -> 224, 1920 -> int(224 * 1920 / 1080) = 398;
     * CenterCrop: round((398 - 224) / 2) = 87. */
    ck_assert_uint_eq(pl.x.resized, 398);
    ck_assert_uint_eq(pl.y.resized, 224);
    ck_assert_int_eq(pl.x.offset, 87);
    ck_assert_int_eq(pl.y.offset, 0);
    ck_assert(pl.x.scale == 1920.0f / 398.0f && pl.y.scale == 1080.0f / 224.0f);
    ck_assert(pl.x.support == pl.x.scale && pl.x.denom == 2 * 1920 && pl.y.denom == 2 * 1080);
    /* Odd margins round half to even: 2.5 -> 2, 3.5 -> 4. */
    p = image_params("gray8", 9, 4);
    p.out_width = p.out_height = 4;
    p.fit = GF_FIT_CROP;
    gf_image_plan_for(&p, &pl);
    ck_assert_int_eq(pl.x.offset, 2);
    p.width = 11;
    gf_image_plan_for(&p, &pl);
    ck_assert_int_eq(pl.x.offset, 4);
    /* Tall sources crop rows. */
    p = image_params("gray8", 4, 11);
    p.out_width = p.out_height = 4;
    p.fit = GF_FIT_CROP;
    gf_image_plan_for(&p, &pl);
    ck_assert_uint_eq(pl.y.resized, 11);
    ck_assert_int_eq(pl.y.offset, 4);
    ck_assert(pl.x.identity && pl.y.identity);
    /* Letterbox 1280x720 into 640x640: 640x360 at row 140. */
    p = image_params("yuyv", 1280, 720);
    p.out_width = p.out_height = 640;
    p.fit = GF_FIT_LETTERBOX;
    gf_image_plan_for(&p, &pl);
    ck_assert_uint_eq(pl.x.resized, 640);
    ck_assert_uint_eq(pl.y.resized, 360);
    ck_assert_int_eq(pl.x.offset, 0);
    ck_assert_int_eq(pl.y.offset, 140);
    ck_assert(pl.letterbox);
    /* Upscaling is bilinear with or without antialias: support 1. */
    p = image_params("gray8", 3, 3);
    p.out_width = p.out_height = 9;
    gf_image_plan_for(&p, &pl);
    ck_assert(pl.x.support == 1.0f && pl.x.denom == 2 * 9 && !pl.x.identity);
}
END_TEST

/* Letterbox borders are pad_value, normalised like a pixel; the image sits
 * between them. */
START_TEST(test_image_letterbox_pad) {
    unsigned char in[8 * 4];
    size_t n;
    fill_random(in, sizeof in, 5);
    gf_params p = image_params("gray8", 8, 4);
    p.out_width = p.out_height = 4;
    p.fit = GF_FIT_LETTERBOX;
    p.pad_value = 114.0f;
    p.mean[0] = p.mean[1] = p.mean[2] = 0.5f;
    p.std[0] = p.std[1] = p.std[2] = 0.25f;
    unsigned char *out = run_image(&p, in, &n);
    const float pad = (114.0f / 255.0f - 0.5f) / 0.25f;
    for (uint32_t c = 0; c < 3; c++) {
        for (uint32_t x = 0; x < 4; x++) {
            ck_assert(f32_at(out, c * 16 + x) == pad);      /* row 0 */
            ck_assert(f32_at(out, c * 16 + 12 + x) == pad); /* row 3 */
        }
    }
    /* The two middle rows are the 8x4 image resized to 4x2. */
    gf_params q = image_params("gray8", 8, 4);
    q.out_width = 4;
    q.out_height = 2;
    memcpy(q.mean, p.mean, sizeof p.mean);
    memcpy(q.std, p.std, sizeof p.std);
    size_t nq;
    unsigned char *mid = run_image(&q, in, &nq);
    ck_assert_int_eq(memcmp(out + 4 * 4, mid, 8 * 4), 0);
    free(out);
    free(mid);
}
END_TEST

/* Y'CbCr to R'G'B' from the matrices' definitions, in double. */
static void yuv_to_rgb(int bt709, int full, double y, double u, double v, double rgb[3]) {
    const double kr = bt709 ? 0.2126 : 0.299, kb = bt709 ? 0.0722 : 0.114, kg = 1 - kr - kb;
    const double yy = full ? y : (y - 16) * 255 / 219;
    const double cb = full ? u - 128 : (u - 128) * 255 / 224;
    const double cr = full ? v - 128 : (v - 128) * 255 / 224;
    rgb[0] = yy + 2 * (1 - kr) * cr;
    rgb[1] = yy - 2 * kb * (1 - kb) / kg * cb - 2 * kr * (1 - kr) / kg * cr;
    rgb[2] = yy + 2 * (1 - kb) * cb;
    for (int c = 0; c < 3; c++)
        rgb[c] = rgb[c] < 0 ? 0 : rgb[c] > 255 ? 255 : rgb[c];
}

/* nv12, i420 and yuyv of one picture (chroma shared by each 2x2 block, so
 * yuyv's 2x1 sharing carries the same values) decode to the same bytes, and
 * each pixel to the matrices' definition within float rounding, for both
 * matrices and ranges, at an odd size where the format allows one. */
START_TEST(test_image_yuv_formats) {
    enum { W = 7, H = 5, CW = 4, CH = 3 };
    unsigned char y[W * H], u[CW * CH], v[CW * CH];
    unsigned char nv12[W * H + 2 * CW * CH], i420[W * H + 2 * CW * CH], yuyv[8 * H * 2];
    fill_random(y, sizeof y, 6);
    fill_random(u, sizeof u, 7);
    fill_random(v, sizeof v, 8);
    memcpy(nv12, y, sizeof y);
    memcpy(i420, y, sizeof y);
    for (int i = 0; i < CW * CH; i++) {
        nv12[W * H + 2 * i] = u[i];
        nv12[W * H + 2 * i + 1] = v[i];
        i420[W * H + i] = u[i];
        i420[W * H + CW * CH + i] = v[i];
    }
    const int bt709 = _i / 2, full = _i % 2;
    gf_params pn = image_params("nv12", W, H), pi = image_params("i420", W, H);
    pn.matrix = pi.matrix = (uint32_t)bt709;
    pn.range = pi.range = (uint32_t)full;
    size_t nn, ni;
    unsigned char *a = run_image(&pn, nv12, &nn), *b = run_image(&pi, i420, &ni);
    ck_assert_uint_eq(nn, (size_t)W * H * 12);
    ck_assert_int_eq(memcmp(a, b, nn), 0);
    for (int row = 0; row < H; row++) {
        for (int x = 0; x < W; x++) {
            double want[3];
            const int c = (row / 2) * CW + x / 2;
            yuv_to_rgb(bt709, full, y[row * W + x], u[c], v[c], want);
            for (int ch = 0; ch < 3; ch++)
                ck_assert_msg(
                    fabs(f32_at(a, (size_t)ch * W * H + (size_t)row * W + (size_t)x) * 255.0 -
                         want[ch]) < 1e-3,
                    "pixel %d,%d channel %d", x, row, ch);
        }
    }
    /* yuyv: width 8 (even only); its first 7 columns equal nv12's. */
    for (int row = 0; row < H; row++) {
        for (int x = 0; x < 8; x++) {
            const int c = (row / 2) * CW + x / 2;
            yuyv[row * 16 + x * 2] = x < W ? y[row * W + x] : 0;
            yuyv[row * 16 + (x / 2) * 4 + 1] = u[c];
            yuyv[row * 16 + (x / 2) * 4 + 3] = v[c];
        }
    }
    gf_params py = image_params("yuyv", 8, H);
    py.matrix = (uint32_t)bt709;
    py.range = (uint32_t)full;
    py.layout = GF_LAYOUT_HWC;
    pn.layout = GF_LAYOUT_HWC;
    size_t ny;
    unsigned char *yy = run_image(&py, yuyv, &ny);
    unsigned char *a2 = run_image(&pn, nv12, &nn);
    for (int row = 0; row < H; row++)
        ck_assert_int_eq(memcmp(yy + (size_t)row * 8 * 12, a2 + (size_t)row * W * 12, W * 12), 0);
    free(a);
    free(b);
    free(yy);
    free(a2);
}
END_TEST

/* 100% red, green, blue and white of each matrix and range, as 8-bit
 * cameras encode them, decode to within 2 of 255/0 (the encoding's own
 * rounding); decoding with the other matrix does not. */
START_TEST(test_image_yuv_colours) {
    static const struct {
        int bt709, full;
        unsigned char yuv[4][3]; /* red, green, blue, white */
    } cases[] = {
        {0, 0, {{81, 90, 240}, {145, 54, 34}, {41, 240, 110}, {235, 128, 128}}},
        {1, 0, {{63, 102, 240}, {173, 42, 26}, {32, 240, 118}, {235, 128, 128}}},
        {0, 1, {{76, 85, 255}, {150, 44, 21}, {29, 255, 107}, {255, 128, 128}}},
        {1, 1, {{54, 99, 255}, {182, 30, 12}, {18, 255, 116}, {255, 128, 128}}},
    };
    static const unsigned char want[4][3] = {
        {255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int other = 0; other < 2; other++) {
            int worst = 0;
            for (int col = 0; col < 4; col++) {
                /* A 2x2 i420 image of one colour. */
                unsigned char in[6] = {cases[k].yuv[col][0], cases[k].yuv[col][0],
                                       cases[k].yuv[col][0], cases[k].yuv[col][0],
                                       cases[k].yuv[col][1], cases[k].yuv[col][2]};
                gf_params p = image_params("i420", 2, 2);
                p.matrix = (uint32_t)(other ? !cases[k].bt709 : cases[k].bt709);
                p.range = (uint32_t)cases[k].full;
                p.dtype = GF_IMAGE_UINT8;
                p.layout = GF_LAYOUT_HWC;
                size_t n;
                unsigned char *out = run_image(&p, in, &n);
                for (int c = 0; c < 3; c++) {
                    const int d = abs((int)out[c] - (int)want[col][c]);
                    worst = d > worst ? d : worst;
                }
                free(out);
            }
            if (other)
                ck_assert_msg(worst > 8, "case %zu decodes with the other matrix too", k);
            else
                ck_assert_msg(worst <= 2, "case %zu: off by %d", k, worst);
        }
    }
}
END_TEST

/* ---- image: lengths and parameters ----------------------------------------------- */

START_TEST(test_image_lengths) {
    const gf_pipeline_kind *k = kind("image");
    char why[WHY_BYTES];
    static const struct {
        const char *format;
        uint32_t w, h;
        uint64_t bytes;
    } sizes[] = {
        {"rgb8", 7, 5, 105},  {"bgr8", 7, 5, 105},
        {"rgba8", 7, 5, 140}, {"gray8", 7, 5, 35},
        {"nv12", 7, 5, 59},   {"i420", 7, 5, 59},
        {"yuyv", 8, 5, 80},   {"nv12", 1920, 1080, 3110400},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        gf_params p = image_params(sizes[i].format, sizes[i].w, sizes[i].h);
        ck_assert_int_eq(k->output_bytes(&p, sizes[i].bytes, why, sizeof why),
                         (int64_t)sizes[i].w * sizes[i].h * 12);
        ck_assert_int_eq(k->output_bytes(&p, sizes[i].bytes + 1, why, sizeof why), -1);
        ck_assert_uint_eq(k->warmup_input_bytes(&p), sizes[i].bytes);
        ck_assert_uint_eq(k->max_output_bytes(&p, sizes[i].bytes), sizes[i].w * sizes[i].h * 12);
        ck_assert_uint_eq(k->max_output_bytes(&p, sizes[i].bytes - 1), 0);
    }
    gf_params p = image_params("nv12", 1920, 1080);
    p.out_width = p.out_height = 224;
    p.dtype = GF_IMAGE_FLOAT16;
    ck_assert_int_eq(k->output_bytes(&p, 3110400, why, sizeof why), 224 * 224 * 3 * 2);
    ck_assert_int_eq(k->output_bytes(&p, 3110399, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 3110399 is not the 3110400 bytes of a 1920x1080 nv12 image");
}
END_TEST

START_TEST(test_image_check_params) {
    const gf_pipeline_kind *k = kind("image");
    char why[WHY_BYTES];
    gf_params p = image_params("yuyv", 7, 4);
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "width 7 is odd: yuyv carries pixels in pairs (Y0 U Y1 V)");
    p = image_params("rgb8", 8, 8);
    p.out_width = 4;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why,
                     "out_width 4 and out_height 0: give both (resize) or neither (no resize)");
    p = image_params("rgb8", 8, 8);
    p.dtype = GF_IMAGE_UINT8;
    p.std[1] = 0.5f;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "mean and std apply to float outputs only"));
    p = image_params("rgb8", 1920, 1080);
    ck_assert_int_eq(k->check_params(&p, 6220800, why, sizeof why), 0);
    ck_assert_int_eq(k->check_params(&p, 6220799, why, sizeof why), -1);
    ck_assert_str_eq(why, "a 1920x1080 rgb8 image is 6220800 bytes, more than max_frame_bytes "
                          "6220799");
    /* Upscaling 8x8 gray to 4096x4096 float32 is 201 MB of output. */
    p = image_params("gray8", 8, 8);
    p.out_width = p.out_height = 4096;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "the output is 201326592 bytes, more than 4 x"));
    p = image_params("gray8", 8, 8);
    p.format = GF_IMAGE_FORMAT_COUNT;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "format has no choice 7");
    p = image_params("gray8", 8, 8);
    p.pad_value = 256.0f;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "pad_value = 256 is outside [0, 255]");
}
END_TEST

/* Parameters from JSON: choices by name, booleans, and the errors. */
START_TEST(test_media_params_json) {
    char err[WHY_BYTES];
    gf_params p;
    cJSON *obj = cJSON_Parse("{\"format\": \"nv12\", \"matrix\": \"bt709\", \"range\": \"full\","
                             " \"out_width\": 224, \"out_height\": 224, \"fit\": \"crop\","
                             " \"antialias\": false, \"layout\": \"hwc\", \"dtype\": \"float16\"}");
    ck_assert_int_eq(gf_params_from_json(kind("image"), obj, "params", &p, err, sizeof err), 0);
    ck_assert_uint_eq(p.format, GF_IMAGE_NV12);
    ck_assert_uint_eq(p.matrix, GF_YUV_BT709);
    ck_assert_uint_eq(p.range, GF_YUV_FULL);
    ck_assert_uint_eq(p.fit, GF_FIT_CROP);
    ck_assert_uint_eq(p.antialias, 0);
    ck_assert_uint_eq(p.layout, GF_LAYOUT_HWC);
    ck_assert_uint_eq(p.dtype, GF_IMAGE_FLOAT16);
    /* And back: names and booleans as written. */
    cJSON *back = gf_params_to_json(kind("image"), &p);
    ck_assert_str_eq(cJSON_GetObjectItem(back, "format")->valuestring, "nv12");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(back, "antialias")));
    ck_assert_str_eq(cJSON_GetObjectItem(back, "dtype")->valuestring, "float16");
    cJSON_Delete(back);
    cJSON_Delete(obj);

    obj = cJSON_Parse("{\"format\": \"NV12\"}");
    ck_assert_int_eq(gf_params_from_json(kind("image"), obj, "params", &p, err, sizeof err), -1);
    ck_assert_str_eq(err, "params.format: expected one of \"rgb8\", \"bgr8\", \"rgba8\", "
                          "\"gray8\", \"nv12\", \"i420\", \"yuyv\", got \"NV12\"");
    cJSON_Delete(obj);
    obj = cJSON_Parse("{\"center\": 1}");
    ck_assert_int_eq(gf_params_from_json(kind("spectrogram"), obj, "params", &p, err, sizeof err),
                     -1);
    ck_assert_str_eq(err, "params.center: expected true or false, got 1");
    cJSON_Delete(obj);
    obj = cJSON_Parse("{\"log\": \"db\", \"n_mels\": 64, \"mel_scale\": \"slaney\", "
                      "\"mel_norm\": \"slaney\", \"center\": false, \"sample_format\": "
                      "\"float32\"}");
    ck_assert_int_eq(gf_params_from_json(kind("spectrogram"), obj, "params", &p, err, sizeof err),
                     0);
    ck_assert_uint_eq(p.log, GF_LOG_DB);
    ck_assert_uint_eq(p.n_mels, 64);
    ck_assert_uint_eq(p.mel_scale, GF_MEL_SLANEY);
    ck_assert_uint_eq(p.mel_norm, GF_MEL_NORM_SLANEY);
    ck_assert_uint_eq(p.center, 0);
    ck_assert_uint_eq(p.sample_format, GF_SAMPLES_F32);
    ck_assert_uint_eq(p.samples, 16000);
    ck_assert_uint_eq(p.n_fft, 400);
    ck_assert_uint_eq(p.hop, 160);
    ck_assert_uint_eq(p.power, 2);
    ck_assert_float_eq(p.eps, 1e-10f);
    cJSON_Delete(obj);
}
END_TEST

/* ---- spectrogram ----------------------------------------------------------------- */

static gf_params spec_params(uint32_t samples, uint32_t n_fft, uint32_t hop) {
    gf_params p;
    gf_params_defaults(kind("spectrogram"), &p);
    p.samples = samples;
    p.n_fft = n_fft;
    p.hop = hop;
    return p;
}

/* The reference on int16 `in` after the registry's checks: a malloc'd
 * float array of rows x columns. */
static float *run_spec(const gf_params *p, const void *in, gf_spec_shape *shape) {
    const gf_pipeline_kind *k = kind("spectrogram");
    char why[WHY_BYTES] = "";
    ck_assert_msg(k->check_params(p, FRAME_LIMIT, why, sizeof why) == 0, "%s", why);
    *shape = gf_spec_shape_of(p);
    const uint64_t in_bytes = (uint64_t)p->samples * shape->sample_bytes;
    const int64_t n = k->output_bytes(p, in_bytes, why, sizeof why);
    ck_assert_msg(n == (int64_t)shape->rows * shape->columns * 4, "%s", why);
    float *out = malloc((size_t)n);
    ck_assert_ptr_nonnull(out);
    k->reference(p, in, (size_t)in_bytes, out);
    return out;
}

START_TEST(test_spec_shapes) {
    gf_params p = spec_params(16000, 400, 160);
    gf_spec_shape s = gf_spec_shape_of(&p);
    ck_assert_uint_eq(s.columns, 101); /* 1 + 16000/160 */
    ck_assert_uint_eq(s.n_freqs, 201);
    ck_assert_uint_eq(s.rows, 201);
    ck_assert_uint_eq(s.pad, 200);
    p.center = 0;
    s = gf_spec_shape_of(&p);
    ck_assert_uint_eq(s.columns, 98); /* 1 + (16000-400)/160 */
    p = spec_params(1000, 401, 100);  /* odd n_fft: pad 200 each side */
    s = gf_spec_shape_of(&p);
    ck_assert_uint_eq(s.n_freqs, 201);
    ck_assert_uint_eq(s.columns, 10); /* 1 + (1000 + 400 - 401)/100 */
    p.n_mels = 40;
    ck_assert_uint_eq(gf_spec_shape_of(&p).rows, 40);
    /* Reflection: ..., x2, x1, [x0, x1, ..., x9], x8, x7, ... */
    ck_assert_uint_eq(gf_spec_reflect(-1, 10), 1);
    ck_assert_uint_eq(gf_spec_reflect(-3, 10), 3);
    ck_assert_uint_eq(gf_spec_reflect(0, 10), 0);
    ck_assert_uint_eq(gf_spec_reflect(9, 10), 9);
    ck_assert_uint_eq(gf_spec_reflect(10, 10), 8);
    ck_assert_uint_eq(gf_spec_reflect(12, 10), 6);
}
END_TEST

/* A cosine at bin k (2 <= k <= n_fft/2 - 2, so that its negative
 * frequency stays clear): each column is (A n_fft/4)^2 at k, (A n_fft/8)^2
 * at k+-1 and 0 elsewhere (the periodic Hann window's spectrum), the edge
 * columns too: the signal ends on a symmetry point of the cosine, so the
 * reflection continues it.  Every column peaks at k. */
START_TEST(test_spec_tone_peaks_at_its_bin) {
    enum { N = 64, SAMPLES = 641, HOP = 32 };
    const uint32_t bins[] = {2, 5, 17, 30};
    const uint32_t k = bins[_i];
    int16_t in[SAMPLES];
    const double amp = 16384.0 / 32768.0;
    for (int n = 0; n < SAMPLES; n++)
        in[n] = (int16_t)lrint(16384.0 * cos(2 * PI * k * n / N));
    gf_params p = spec_params(SAMPLES, N, HOP);
    gf_spec_shape s;
    float *out = run_spec(&p, in, &s);
    for (uint32_t t = 0; t < s.columns; t++) {
        uint32_t best = 0;
        for (uint32_t r = 1; r < s.rows; r++)
            if (out[r * s.columns + t] > out[best * s.columns + t])
                best = r;
        ck_assert_msg(best == k, "column %u peaks at %u, not %u", t, best, k);
    }
    /* int16 rounding of the cosine leaves about 1e-9 of the peak in the
     * other bins. */
    const double peak = pow(amp * N / 4, 2), side = pow(amp * N / 8, 2);
    ck_assert_uint_eq(s.columns, 21);
    for (uint32_t t = 0; t < s.columns; t++) {
        for (uint32_t r = 0; r < s.rows; r++) {
            const double want = r == k ? peak : (r + 1 == k || r == k + 1) ? side : 0.0;
            ck_assert_msg(fabs(out[r * s.columns + t] - want) <= 1e-5 * peak,
                          "column %u bin %u: %g, want %g", t, r, (double)out[r * s.columns + t],
                          want);
        }
    }
    free(out);
}
END_TEST

/* Silence is log(eps) in every cell: ln, and dB of power and of magnitude. */
START_TEST(test_spec_silence_is_log_eps) {
    int16_t in[800] = {0};
    gf_spec_shape s;
    gf_params p = spec_params(800, 128, 50);
    p.n_mels = 16;
    p.log = GF_LOG_LN;
    float *out = run_spec(&p, in, &s);
    for (uint32_t i = 0; i < s.rows * s.columns; i++)
        ck_assert(out[i] == (float)log(1e-10f));
    free(out);
    p.log = GF_LOG_DB;
    p.eps = 1e-5f;
    out = run_spec(&p, in, &s);
    for (uint32_t i = 0; i < s.rows * s.columns; i++)
        ck_assert(out[i] == (float)(10.0 * log10((double)1e-5f)));
    free(out);
    p.power = 1;
    p.n_mels = 0;
    out = run_spec(&p, in, &s);
    for (uint32_t i = 0; i < s.rows * s.columns; i++)
        ck_assert(out[i] == (float)(20.0 * log10((double)1e-5f)));
    free(out);
}
END_TEST

/* Parseval on every column of noise: the one-sided power spectrum sums to
 * n_fft times the windowed column's energy, the column read with the
 * reflection at both ends; even and odd n_fft, center or not. */
START_TEST(test_spec_parseval) {
    static const struct {
        uint32_t samples, n_fft, hop, center;
    } cases[] = {{1000, 128, 40, 1}, {1001, 101, 37, 1}, {700, 64, 64, 0}, {513, 512, 1, 0}};
    const uint32_t samples = cases[_i].samples, n = cases[_i].n_fft;
    int16_t *in = malloc(samples * sizeof *in);
    fill_random((unsigned char *)in, samples * sizeof *in, 9 + (uint64_t)_i);
    gf_params p = spec_params(samples, n, cases[_i].hop);
    p.center = cases[_i].center;
    gf_spec_shape s;
    float *out = run_spec(&p, in, &s);
    for (uint32_t t = 0; t < s.columns; t++) {
        double energy = 0.0, sum = 0.0;
        for (uint32_t j = 0; j < n; j++) {
            const int64_t at = (int64_t)t * p.hop + j - s.pad;
            const double w = 0.5 - 0.5 * cos(2 * PI * j / n);
            const double x = in[gf_spec_reflect(at, samples)] / 32768.0;
            energy += w * w * x * x;
        }
        for (uint32_t k = 0; k < s.n_freqs; k++) {
            /* Bins 1 .. n/2 - 1 stand for their mirror images too. */
            const int twice = k > 0 && !(n % 2 == 0 && k == n / 2);
            sum += (twice ? 2.0 : 1.0) * out[k * s.columns + t];
        }
        ck_assert_msg(fabs(sum - n * energy) <= 1e-6 * n * energy, "column %u: %g vs %g", t, sum,
                      n * energy);
    }
    free(in);
    free(out);
}
END_TEST

/* int16 and float32 of the same samples agree exactly; magnitude is the
 * square root of power; ln and dB are the logs of the plain values. */
START_TEST(test_spec_formats_power_logs) {
    enum { S = 900 };
    int16_t in[S];
    float fin[S];
    fill_random((unsigned char *)in, sizeof in, 10);
    for (int i = 0; i < S; i++)
        fin[i] = (float)in[i] / 32768.0f;
    gf_spec_shape s;
    gf_params p = spec_params(S, 100, 45);
    p.n_mels = 20;
    p.sample_rate = 8000;
    float *pw = run_spec(&p, in, &s);
    p.sample_format = GF_SAMPLES_F32;
    float *pf = run_spec(&p, fin, &s);
    ck_assert_int_eq(memcmp(pw, pf, (size_t)s.rows * s.columns * 4), 0);
    p.sample_format = GF_SAMPLES_INT16;
    p.n_mels = 0;
    float *pow2 = run_spec(&p, in, &s);
    p.power = 1;
    float *mag = run_spec(&p, in, &s);
    p.log = GF_LOG_DB;
    p.eps = 1e-12f;
    float *db = run_spec(&p, in, &s);
    p.power = 2;
    p.log = GF_LOG_LN;
    float *ln = run_spec(&p, in, &s);
    for (uint32_t i = 0; i < s.rows * s.columns; i++) {
        ck_assert(fabs(mag[i] - sqrt(pow2[i])) <= 1e-6 * mag[i] + 1e-12);
        ck_assert(fabs(ln[i] - log(fmax(pow2[i], 1e-12))) <= 1e-5);
        ck_assert(fabs(db[i] - 20 * log10(fmax(mag[i], 1e-12))) <= 1e-4);
    }
    free(pw);
    free(pf);
    free(pow2);
    free(mag);
    free(db);
    free(ln);
}
END_TEST

/* torchaudio's mel scales: HTK 2595 log10(1 + f/700), Slaney linear to
 * 1 kHz (15 mels) then 27 mels per factor 6.4; the triangles of an
 * unnormalised bank sum to 1 between the first and last centres; Slaney's
 * norm makes each band's area (in Hz) 1. */
START_TEST(test_spec_mel_filterbank) {
    ck_assert_double_eq_tol(gf_hz_to_mel(700.0, GF_MEL_HTK), 2595.0 * log10(2.0), 1e-9);
    ck_assert_double_eq_tol(gf_hz_to_mel(1000.0, GF_MEL_SLANEY), 15.0, 1e-12);
    ck_assert_double_eq_tol(gf_hz_to_mel(500.0, GF_MEL_SLANEY), 7.5, 1e-12);
    ck_assert_double_eq_tol(gf_hz_to_mel(6400.0, GF_MEL_SLANEY), 42.0, 1e-9);
    for (double f = 0; f < 9000; f += 333.3)
        for (uint32_t scale = GF_MEL_HTK; scale <= GF_MEL_SLANEY; scale++)
            ck_assert_double_eq_tol(gf_mel_to_hz(gf_hz_to_mel(f, scale), scale), f, 1e-6);
    gf_params p = spec_params(16000, 512, 160);
    p.n_mels = 40;
    p.f_min = 100.0f;
    p.f_max = 7000.0f;
    double f_pts[42];
    for (uint32_t scale = GF_MEL_HTK; scale <= GF_MEL_SLANEY; scale++) {
        p.mel_scale = scale;
        p.mel_norm = GF_MEL_NORM_NONE;
        gf_mel_points(&p, f_pts);
        ck_assert_double_eq_tol(f_pts[0], 100.0, 1e-6);
        ck_assert_double_eq_tol(f_pts[41], 7000.0, 1e-6);
        for (uint32_t k = 0; k < 257; k++) {
            const double f = k * 8000.0 / 256;
            double sum = 0.0;
            for (uint32_t m = 0; m < 40; m++)
                sum += gf_mel_weight(&p, f_pts, 257, k, m);
            if (f >= f_pts[1] && f <= f_pts[40])
                ck_assert_msg(fabs(sum - 1.0) < 1e-9, "bin %u sums to %g", k, sum);
            if (f <= f_pts[0] || f >= f_pts[41])
                ck_assert(sum == 0.0);
        }
        /* Slaney's norm: each band times 2 / (its width in Hz), so that
         * its area is 1. */
        for (uint32_t m = 0; m < 40; m++) {
            for (uint32_t k = 0; k < 257; k++) {
                p.mel_norm = GF_MEL_NORM_NONE;
                const double plain = gf_mel_weight(&p, f_pts, 257, k, m);
                p.mel_norm = GF_MEL_NORM_SLANEY;
                const double normed = gf_mel_weight(&p, f_pts, 257, k, m);
                ck_assert(fabs(normed - plain * 2.0 / (f_pts[m + 2] - f_pts[m])) <= 1e-15);
            }
        }
    }
    /* Mel of the reference is the filterbank times the power spectrum. */
    enum { S = 2000 };
    int16_t in[S];
    fill_random((unsigned char *)in, sizeof in, 11);
    gf_spec_shape sm, sp;
    p = spec_params(S, 256, 100);
    p.n_mels = 24;
    p.mel_scale = GF_MEL_SLANEY;
    p.mel_norm = GF_MEL_NORM_SLANEY;
    float *mel = run_spec(&p, in, &sm);
    p.n_mels = 0;
    float *pw = run_spec(&p, in, &sp);
    p.n_mels = 24;
    double pts[26];
    gf_mel_points(&p, pts);
    for (uint32_t t = 0; t < sm.columns; t++) {
        for (uint32_t m = 0; m < 24; m++) {
            double want = 0.0;
            for (uint32_t k = 0; k < sp.rows; k++)
                want += gf_mel_weight(&p, pts, sp.rows, k, m) * pw[k * sp.columns + t];
            ck_assert(fabs(mel[m * sm.columns + t] - want) <= 1e-5 * want + 1e-9);
        }
    }
    free(mel);
    free(pw);
}
END_TEST

START_TEST(test_spec_lengths_and_params) {
    const gf_pipeline_kind *k = kind("spectrogram");
    char why[WHY_BYTES];
    gf_params p = spec_params(16000, 400, 160);
    p.n_mels = 64;
    ck_assert_int_eq(k->output_bytes(&p, 32000, why, sizeof why), 64 * 101 * 4);
    ck_assert_int_eq(k->output_bytes(&p, 31998, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 31998 is not the 32000 bytes of 16000 int16 samples");
    p.sample_format = GF_SAMPLES_F32;
    ck_assert_int_eq(k->output_bytes(&p, 64000, why, sizeof why), 64 * 101 * 4);
    ck_assert_int_eq(k->input_f32_for(&p), 1);
    ck_assert_uint_eq(k->warmup_input_bytes(&p), 64000);
    ck_assert_uint_eq(k->max_output_bytes(&p, 63999), 0);
    p = spec_params(200, 400, 160);
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "samples 200 must exceed n_fft/2 = 200: center reflects n_fft/2 "
                          "samples about each end");
    p.samples = 201;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), 0);
    p.center = 0;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "samples 201 is less than n_fft 400: without center a frame must fill "
                          "one window");
    p = spec_params(16000, 400, 160);
    p.n_mels = 64;
    p.f_min = 8000.0f;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "f_min 8000 must be below f_max 8000 (0: sample_rate/2)");
    p = spec_params(16000, 400, 160);
    ck_assert_int_eq(k->check_params(&p, 31999, why, sizeof why), -1);
    ck_assert_str_eq(why, "16000 int16 samples are 32000 bytes, more than max_frame_bytes 31999");
    p.n_fft = 4097;
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_str_eq(why, "n_fft = 4097 is outside [2, 4096]");
    /* hop 1 over 4 M samples: 4 M columns of 201 bins, 3.4 GB. */
    p = spec_params(4u << 20, 400, 1);
    ck_assert_int_eq(k->check_params(&p, FRAME_LIMIT, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "the output is"));
}
END_TEST

/* LIST's tensors: the input as each format lays it out, the output as the
 * layout and dtype say, their bytes the lengths the rules give. */
START_TEST(test_media_describe) {
    static const struct {
        const char *format, *in;
    } formats[] = {{"rgb8", "uint8[5,8,3]"}, {"bgr8", "uint8[5,8,3]"}, {"rgba8", "uint8[5,8,4]"},
                   {"gray8", "uint8[5,8]"},  {"nv12", "uint8[64]"},    {"i420", "uint8[64]"},
                   {"yuyv", "uint8[5,8,2]"}};
    const gf_pipeline_kind *k = kind("image");
    char text[256], why[WHY_BYTES];
    gf_frame_desc in, out;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        gf_params p = image_params(formats[i].format, 8, 5);
        p.out_width = 4;
        p.out_height = 3;
        p.layout = (uint32_t)(i % 2);
        p.dtype = (uint32_t)(i % 3);
        k->describe(&p, &in, &out);
        ck_assert_int_eq(gf_frame_desc_check(&in, why, sizeof why), 0);
        ck_assert_int_eq(gf_frame_desc_check(&out, why, sizeof why), 0);
        ck_assert_str_eq(gf_frame_desc_text(&in, text, sizeof text), formats[i].in);
        ck_assert_uint_eq(gf_frame_desc_bytes(&in), gf_image_input_bytes(p.format, 8, 5));
        ck_assert_int_eq((int64_t)gf_frame_desc_bytes(&out),
                         k->output_bytes(&p, gf_frame_desc_bytes(&in), why, sizeof why));
    }
    gf_params p = image_params("nv12", 1920, 1080);
    p.out_width = p.out_height = 224;
    k->describe(&p, &in, &out);
    ck_assert_str_eq(gf_frame_desc_text(&out, text, sizeof text), "float32[3,224,224]");
    p.layout = GF_LAYOUT_HWC;
    p.dtype = GF_IMAGE_FLOAT16;
    k->describe(&p, &in, &out);
    ck_assert_str_eq(gf_frame_desc_text(&out, text, sizeof text), "float16[224,224,3]");

    k = kind("spectrogram");
    gf_params_defaults(k, &p);
    p.n_mels = 64;
    k->describe(&p, &in, &out);
    ck_assert_str_eq(gf_frame_desc_text(&in, text, sizeof text), "int16[16000]");
    ck_assert_str_eq(gf_frame_desc_text(&out, text, sizeof text), "float32[64,101]");
    p.sample_format = GF_SAMPLES_F32;
    p.n_mels = 0;
    k->describe(&p, &in, &out);
    ck_assert_str_eq(gf_frame_desc_text(&in, text, sizeof text), "float32[16000]");
    ck_assert_str_eq(gf_frame_desc_text(&out, text, sizeof text), "float32[201,101]");
}
END_TEST

static Suite *media_suite(void) {
    Suite *s = suite_create("media");
    TCase *image = tcase_create("image");
    TCase *spec = tcase_create("spectrogram");

    tcase_add_test(image, test_image_rgb8_is_byte_over_255);
    tcase_add_test(image, test_image_gray_rgba_bgr);
    tcase_add_test(image, test_image_layouts_and_dtypes);
    tcase_add_test(image, test_image_f16_rounding);
    tcase_add_test(image, test_image_resize_taps);
    tcase_add_test(image, test_image_tap_distances);
    tcase_add_test(image, test_image_flat_stays_flat);
    tcase_add_test(image, test_image_geometry);
    tcase_add_test(image, test_image_letterbox_pad);
    tcase_add_loop_test(image, test_image_yuv_formats, 0, 4);
    tcase_add_test(image, test_image_yuv_colours);
    tcase_add_test(image, test_image_lengths);
    tcase_add_test(image, test_image_check_params);
    tcase_add_test(image, test_media_params_json);
    tcase_add_test(image, test_media_describe);
    suite_add_tcase(s, image);

    tcase_add_test(spec, test_spec_shapes);
    tcase_add_loop_test(spec, test_spec_tone_peaks_at_its_bin, 0, 4);
    tcase_add_test(spec, test_spec_silence_is_log_eps);
    tcase_add_loop_test(spec, test_spec_parseval, 0, 4);
    tcase_add_test(spec, test_spec_formats_power_logs);
    tcase_add_test(spec, test_spec_mel_filterbank);
    tcase_add_test(spec, test_spec_lengths_and_params);
    suite_add_tcase(s, spec);
    return s;
}

int main(void) {
    return gf_test_run(media_suite());
}

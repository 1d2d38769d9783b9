/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of kernels/: the C references against hand-computed values, the
 * registry's length rules, parameter checks, lookup and defaults, and
 * gf_pipeline_compare's tolerances.  Needs no GPU.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "pipeline.h"
#include "runner.h"

/* Room for any reason the registry writes. */
#define WHY_BYTES 256
/* A frame limit large enough for every default: 64 MiB. */
#define BIG_FRAME_BYTES (64u << 20)
/* 1920x1080 RGB: the default image's input length. */
#define HD_RGB_BYTES (1920u * 1080u * 3u)

/* The kind called `name`; fails the test when there is none. */
static const gf_pipeline_kind *kind(const char *name) {
    const gf_pipeline_kind *k = gf_pipeline_kind_find(name);
    ck_assert_msg(k != NULL, "no kind %s", name);
    return k;
}

/* Stores floats into a byte buffer as the wire carries them. */
static void put_f32(unsigned char *buf, const float *v, size_t count) {
    memcpy(buf, v, count * sizeof *v);
}

/* Element i of a float32 byte buffer. */
static float get_f32(const unsigned char *buf, size_t i) {
    float v;
    memcpy(&v, buf + i * sizeof v, sizeof v);
    return v;
}

/* ---- references ----------------------------------------------------------- */

START_TEST(test_echo_ref_copies_bytes) {
    const unsigned char in[7] = {0x00, 0xff, 0x12, 0x34, 0x56, 0x78, 0x9a};
    unsigned char out[8];

    memset(out, 0xA5, sizeof out);
    kind("echo")->reference(NULL, in, sizeof in, out);
    ck_assert_mem_eq(out, in, sizeof in);
    ck_assert_uint_eq(out[7], 0xA5); /* nothing past the length */

    /* Zero bytes: nothing written, null pointers allowed. */
    kind("echo")->reference(NULL, NULL, 0, NULL);
}
END_TEST

START_TEST(test_affine_ref_values) {
    const float in[] = {0.0f, 1.0f, -1.5f, 3e30f, 2e38f, -0.25f};
    unsigned char in_buf[sizeof in], out_buf[sizeof in];
    gf_params p;

    gf_params_defaults(kind("affine"), &p);
    p.a = 2.0f;
    p.b = 1.0f;
    put_f32(in_buf, in, 6);
    kind("affine")->reference(&p, in_buf, sizeof in_buf, out_buf);
    ck_assert_float_eq(get_f32(out_buf, 0), 1.0f);
    ck_assert_float_eq(get_f32(out_buf, 1), 3.0f);
    ck_assert_float_eq(get_f32(out_buf, 2), -2.0f);
    ck_assert_float_eq(get_f32(out_buf, 3), 6e30f); /* 2*3e30 exact; +1 vanishes */
    ck_assert_float_infinite(get_f32(out_buf, 4));  /* 4e38 overflows float32 */
    ck_assert_float_eq(get_f32(out_buf, 5), 0.5f);
}
END_TEST

/* Rounded twice, never fused: a*x + b with a = 1 + 2^-23, x = 1 - 2^-23 and
 * b = -1 is exactly -2^-46 when fused, but a*x rounds to 1 first, giving 0. */
START_TEST(test_affine_ref_no_fma) {
    const float x = 1.0f - 0x1p-23f;
    unsigned char in_buf[sizeof x], out_buf[sizeof x];
    gf_params p = {0};

    p.a = 1.0f + 0x1p-23f;
    p.b = -1.0f;
    put_f32(in_buf, &x, 1);
    gf_affine_ref(&p, in_buf, sizeof in_buf, out_buf);
    ck_assert_float_eq(get_f32(out_buf, 0), 0.0f);
}
END_TEST

START_TEST(test_affine_ref_unaligned) {
    const float in[] = {1.0f, 2.0f, 3.0f};
    unsigned char in_buf[1 + sizeof in], out_buf[1 + sizeof in];
    gf_params p = {0};

    p.a = -1.0f;
    p.b = 0.5f;
    put_f32(in_buf + 1, in, 3);
    gf_affine_ref(&p, in_buf + 1, sizeof in, out_buf + 1);
    ck_assert_float_eq(get_f32(out_buf + 1, 0), -0.5f);
    ck_assert_float_eq(get_f32(out_buf + 1, 1), -1.5f);
    ck_assert_float_eq(get_f32(out_buf + 1, 2), -2.5f);
}
END_TEST

START_TEST(test_sincos_ref_one_iteration) {
    const float in[] = {0.0f, 0.5f, 1.0f, -2.0f, 3.14159f, -4.0f, 1.5707964f};
    const size_t n = sizeof in / sizeof in[0];
    unsigned char in_buf[sizeof in], out_buf[sizeof in];
    gf_params p;

    gf_params_defaults(kind("sincos"), &p);
    p.iters = 1;
    put_f32(in_buf, in, n);
    kind("sincos")->reference(&p, in_buf, sizeof in_buf, out_buf);
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        double want = sin(x) * cos(x) + x;
        ck_assert_msg(fabs(get_f32(out_buf, i) - want) <= 1e-6, "x=%.9g: got %.9g, want %.9g", x,
                      (double)get_f32(out_buf, i), want);
    }
    ck_assert_float_eq(get_f32(out_buf, 0), 0.0f); /* 0 is a fixed point */
}
END_TEST

START_TEST(test_sincos_ref_iterates) {
    const float in[] = {0.25f, -1.0f, 2.5f, 3.9f};
    const size_t n = sizeof in / sizeof in[0];
    unsigned char in_buf[sizeof in], out_buf[sizeof in];
    gf_params p = {0};

    p.iters = 5;
    put_f32(in_buf, in, n);
    gf_sincos_ref(&p, in_buf, sizeof in_buf, out_buf);
    for (size_t i = 0; i < n; i++) {
        double v = in[i];
        for (unsigned k = 0; k < p.iters; k++) {
            v = sin(v) * cos(v) + v;
        }
        ck_assert_msg(fabs(get_f32(out_buf, i) - v) <= 1e-5, "x=%.9g: got %.9g, want %.9g",
                      (double)in[i], (double)get_f32(out_buf, i), v);
    }
}
END_TEST

/* A 2x1 image, mean = std = 0.5: 0 -> -1 and 255 -> 1 exactly; the output is
 * planar, R plane first. */
START_TEST(test_normalize_u8_ref_planar) {
    /* pixel 0 = (0, 255, 255), pixel 1 = (255, 0, 255) */
    const unsigned char in[6] = {0, 255, 255, 255, 0, 255};
    const float want[6] = {-1.0f, 1.0f, /* R */ 1.0f, -1.0f, /* G */ 1.0f, 1.0f /* B */};
    unsigned char out[6 * sizeof(float)];
    gf_params p;

    gf_params_defaults(kind("normalize_u8"), &p);
    p.width = 2;
    p.height = 1;
    for (int c = 0; c < 3; c++) {
        p.mean[c] = 0.5f;
        p.std[c] = 0.5f;
    }
    ck_assert_int_eq(kind("normalize_u8")->output_bytes(&p, sizeof in, NULL, 0), sizeof out);
    kind("normalize_u8")->reference(&p, in, sizeof in, out);
    for (size_t i = 0; i < 6; i++) {
        ck_assert_msg(get_f32(out, i) == want[i], "out[%zu] = %.9g, want %.9g", i,
                      (double)get_f32(out, i), (double)want[i]);
    }
}
END_TEST

/* A 3x2 image with different statistics per channel: the channel and the
 * row-major position of every output, with values that are exact in float. */
START_TEST(test_normalize_u8_ref_channels_and_rows) {
    const unsigned width = 3, height = 2, pixels = width * height;
    unsigned char in[3 * 2 * 3];
    unsigned char out[3 * 3 * 2 * sizeof(float)];
    gf_params p = {0};

    p.width = width;
    p.height = height;
    p.mean[0] = 0.0f, p.mean[1] = 0.5f, p.mean[2] = 1.0f;
    p.std[0] = 1.0f, p.std[1] = 0.5f, p.std[2] = 0.25f;
    /* Channel c of pixel (x, y) is 255 when ((x + 2*y + c) % 2), else 0. */
    for (unsigned y = 0; y < height; y++) {
        for (unsigned x = 0; x < width; x++) {
            for (unsigned c = 0; c < 3; c++) {
                in[(y * width + x) * 3 + c] = ((x + 2 * y + c) % 2) ? 255 : 0;
            }
        }
    }
    gf_normalize_u8_ref(&p, in, sizeof in, out);
    for (unsigned c = 0; c < 3; c++) {
        /* 0 and 255 map to these, exactly. */
        const float lo[3] = {0.0f, -1.0f, -4.0f}, hi[3] = {1.0f, 1.0f, 0.0f};
        for (unsigned y = 0; y < height; y++) {
            for (unsigned x = 0; x < width; x++) {
                float want = ((x + 2 * y + c) % 2) ? hi[c] : lo[c];
                float got = get_f32(out, c * pixels + y * width + x);
                ck_assert_msg(got == want, "c=%u y=%u x=%u: got %.9g, want %.9g", c, y, x,
                              (double)got, (double)want);
            }
        }
    }
}
END_TEST

/* A value that is not exact: within 1 ulp-ish of the double formula. */
START_TEST(test_normalize_u8_ref_inexact) {
    const unsigned char in[3] = {51, 128, 200};
    unsigned char out[3 * sizeof(float)];
    gf_params p;

    gf_params_defaults(kind("normalize_u8"), &p);
    p.width = 1;
    p.height = 1;
    gf_normalize_u8_ref(&p, in, sizeof in, out);
    for (int c = 0; c < 3; c++) {
        double want = (in[c] / 255.0 - (double)p.mean[c]) / (double)p.std[c];
        ck_assert_msg(fabs(get_f32(out, (size_t)c) - want) <= 1e-6 * (1 + fabs(want)),
                      "c=%d: got %.9g, want %.9g", c, (double)get_f32(out, (size_t)c), want);
    }
}
END_TEST

/* ---- length rules ------------------------------------------------------------ */

START_TEST(test_output_bytes_echo) {
    const gf_pipeline_kind *k = kind("echo");
    char why[WHY_BYTES];

    ck_assert_int_eq(k->output_bytes(NULL, 0, why, sizeof why), 0);
    ck_assert_int_eq(k->output_bytes(NULL, 3, why, sizeof why), 3);
    ck_assert_int_eq(k->output_bytes(NULL, 4096, why, sizeof why), 4096);
}
END_TEST

START_TEST(test_output_bytes_float_kinds) {
    const char *names[] = {"affine", "sincos"};

    for (size_t i = 0; i < 2; i++) {
        const gf_pipeline_kind *k = kind(names[i]);
        gf_params p;
        char why[WHY_BYTES] = "";

        gf_params_defaults(k, &p);
        ck_assert_int_eq(k->output_bytes(&p, 0, why, sizeof why), 0);
        ck_assert_int_eq(k->output_bytes(&p, 4, why, sizeof why), 4);
        ck_assert_int_eq(k->output_bytes(&p, 16u << 20, why, sizeof why), 16u << 20);
        ck_assert_int_eq(k->output_bytes(&p, 3, why, sizeof why), -1);
        ck_assert_str_eq(why, "length 3 is not a multiple of 4 (float32 elements)");
        ck_assert_int_eq(k->output_bytes(&p, 10, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "length 10 is not a multiple of 4"));
        /* A short buffer gets a truncated, terminated reason. */
        ck_assert_int_eq(k->output_bytes(&p, 10, why, 8), -1);
        ck_assert_str_eq(why, "length ");
        /* No buffer at all is allowed. */
        ck_assert_int_eq(k->output_bytes(&p, 10, NULL, 0), -1);
    }
}
END_TEST

START_TEST(test_output_bytes_normalize_u8) {
    const gf_pipeline_kind *k = kind("normalize_u8");
    gf_params p;
    char why[WHY_BYTES] = "";

    gf_params_defaults(k, &p);
    ck_assert_int_eq(k->output_bytes(&p, HD_RGB_BYTES, why, sizeof why), 4 * HD_RGB_BYTES);
    ck_assert_int_eq(k->output_bytes(&p, HD_RGB_BYTES + 1, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 6220801 is not width*height*3 = 6220800 (1920x1080 RGB)");
    ck_assert_int_eq(k->output_bytes(&p, HD_RGB_BYTES - 1, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "length 6220799 is not width*height*3 = 6220800"));
    ck_assert_int_eq(k->output_bytes(&p, 0, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "length 0 is not"));
    ck_assert_int_eq(k->output_bytes(&p, 3, why, sizeof why), -1);
    p.width = 1;
    p.height = 1;
    ck_assert_int_eq(k->output_bytes(&p, 3, why, sizeof why), 12);
    ck_assert_int_eq(k->output_bytes(&p, 4, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "(1x1 RGB)"));
}
END_TEST

/* ---- parameters ------------------------------------------------------------------ */

START_TEST(test_check_params_defaults_pass) {
    size_t count = 0;
    const gf_pipeline_kind *all = gf_pipeline_kinds(&count);

    for (size_t i = 0; i < count; i++) {
        gf_params p;
        char why[WHY_BYTES] = "";

        gf_params_defaults(&all[i], &p);
        ck_assert_msg(all[i].check_params(&p, BIG_FRAME_BYTES, why, sizeof why) == 0, "%s: %s",
                      all[i].name, why);
    }
}
END_TEST

START_TEST(test_check_params_ranges) {
    const gf_pipeline_kind *affine = kind("affine"), *sincos = kind("sincos");
    gf_params p;
    char why[WHY_BYTES] = "";

    gf_params_defaults(affine, &p);
    p.a = NAN;
    ck_assert_int_eq(affine->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "a = nan is outside"));
    p.a = 2.0f;
    p.b = -2e30f;
    ck_assert_int_eq(affine->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "b = "));
    p.b = 1e30f * 0.99f;
    ck_assert_int_eq(affine->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), 0);
    /* The bounds themselves, as a config's 1e30 becomes the nearest float. */
    p.a = (float)1e30;
    p.b = (float)-1e30;
    ck_assert_int_eq(affine->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), 0);
    p.a = nextafterf((float)1e30, INFINITY);
    ck_assert_int_eq(affine->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);

    gf_params_defaults(sincos, &p);
    p.iters = 0;
    ck_assert_int_eq(sincos->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_str_eq(why, "iters = 0 is outside [1, 100000]");
    p.iters = 100001;
    ck_assert_int_eq(sincos->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    p.iters = 100000;
    ck_assert_int_eq(sincos->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), 0);
}
END_TEST

START_TEST(test_check_params_normalize_u8) {
    const gf_pipeline_kind *k = kind("normalize_u8");
    gf_params p;
    char why[WHY_BYTES] = "";

    gf_params_defaults(k, &p);
    /* 1920x1080x3 = 6220800 fits 16 MiB but not 6 MB. */
    ck_assert_int_eq(k->check_params(&p, 16u << 20, why, sizeof why), 0);
    ck_assert_int_eq(k->check_params(&p, HD_RGB_BYTES, why, sizeof why), 0);
    ck_assert_int_eq(k->check_params(&p, HD_RGB_BYTES - 1, why, sizeof why), -1);
    ck_assert_str_eq(why, "width*height*3 = 6220800 bytes (1920x1080 RGB) exceeds "
                          "max_frame_bytes 6220799");
    p.width = 65535;
    p.height = 65535;
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "12884508675 bytes (65535x65535 RGB)"));

    gf_params_defaults(k, &p);
    p.width = 0;
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "width = 0 is outside [1, 65535]"));
    gf_params_defaults(k, &p);
    p.height = 65536;
    ck_assert_int_eq(k->check_params(&p, UINT64_MAX, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "height = 65536"));
    gf_params_defaults(k, &p);
    p.std[2] = 0.0f;
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "std[2] = 0 is outside"));
    p.std[2] = (float)1e-6; /* the lower bound itself passes */
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), 0);
    p.std[2] = nextafterf((float)1e-6, 0.0f);
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    gf_params_defaults(k, &p);
    p.mean[1] = INFINITY;
    ck_assert_int_eq(k->check_params(&p, BIG_FRAME_BYTES, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "mean[1] = inf"));
}
END_TEST

START_TEST(test_kind_lookup) {
    const char *names[] = {"echo", "affine", "sincos", "normalize_u8", "image", "spectrogram"};
    size_t count = 0;
    const gf_pipeline_kind *all = gf_pipeline_kinds(&count);

    ck_assert_uint_eq(count, 6);
    for (size_t i = 0; i < count; i++) {
        ck_assert_str_eq(all[i].name, names[i]);
        ck_assert_ptr_eq(gf_pipeline_kind_find(names[i]), &all[i]);
        ck_assert_ptr_nonnull(all[i].doc);
        ck_assert(all[i].output_bytes != NULL);
        ck_assert(all[i].check_params != NULL);
        ck_assert(all[i].reference != NULL);
        ck_assert(all[i].describe != NULL);
#ifdef GF_HAVE_CUDA
        /* A kernel, or a device API for a kind that runs through one. */
        ck_assert_msg(all[i].device_api ? gf_kernel_device_api(&all[i]) != NULL
                                        : gf_kernel_launcher(&all[i]) != NULL,
                      "%s", all[i].name);
#endif
    }
    ck_assert_ptr_null(gf_pipeline_kind_find("nope"));
    ck_assert_ptr_null(gf_pipeline_kind_find(""));
    ck_assert_ptr_null(gf_pipeline_kind_find("Echo"));
    ck_assert_ptr_null(gf_pipeline_kind_find(NULL));
    ck_assert_int_eq(kind("echo")->exact, 1);
    ck_assert_int_eq(kind("affine")->exact, 1);
    ck_assert_int_eq(kind("normalize_u8")->exact, 1);
    ck_assert_int_eq(kind("sincos")->exact, 0);
    ck_assert_int_eq(kind("echo")->input_f32, 0);
    ck_assert_int_eq(kind("affine")->input_f32, 1);
    ck_assert_int_eq(kind("sincos")->input_f32, 1);
    ck_assert_int_eq(kind("normalize_u8")->input_f32, 0);
    ck_assert_float_gt(kind("sincos")->abs_tolerance, 0.0f);
    ck_assert_float_gt(kind("sincos")->rel_tolerance, 0.0f);
}
END_TEST

START_TEST(test_defaults) {
    gf_params p;
    size_t count = 0;
    const gf_pipeline_kind *all = gf_pipeline_kinds(&count);

    gf_params_defaults(kind("affine"), &p);
    ck_assert_float_eq(p.a, 1.0f);
    ck_assert_float_eq(p.b, 0.0f);
    ck_assert_uint_eq(p.iters, 0); /* not affine's */
    gf_params_defaults(kind("sincos"), &p);
    ck_assert_uint_eq(p.iters, 16);
    gf_params_defaults(kind("normalize_u8"), &p);
    ck_assert_uint_eq(p.width, 1920);
    ck_assert_uint_eq(p.height, 1080);
    ck_assert_float_eq(p.mean[0], 0.485f);
    ck_assert_float_eq(p.mean[1], 0.456f);
    ck_assert_float_eq(p.mean[2], 0.406f);
    ck_assert_float_eq(p.std[0], 0.229f);
    ck_assert_float_eq(p.std[1], 0.224f);
    ck_assert_float_eq(p.std[2], 0.225f);

    /* Every descriptor: a key, a doc, a default inside its own range. */
    for (size_t i = 0; i < count; i++) {
        for (size_t j = 0; j < all[i].param_count; j++) {
            const gf_param_desc *d = &all[i].params[j];
            ck_assert_ptr_nonnull(d->key);
            ck_assert_ptr_nonnull(d->doc);
            ck_assert_msg(d->default_value >= d->min && d->default_value <= d->max, "%s.%s",
                          all[i].name, d->key);
        }
    }
}
END_TEST

/* ---- comparison -------------------------------------------------------------------- */

/* Compares one float pair under `k`; returns gf_pipeline_compare's result. */
static int compare_one(const gf_pipeline_kind *k, float got, float ref, char *why, size_t len) {
    unsigned char g[sizeof got], r[sizeof ref];
    put_f32(g, &got, 1);
    put_f32(r, &ref, 1);
    return gf_pipeline_compare(k, g, r, sizeof g, why, len);
}

START_TEST(test_compare_tolerance) {
    const gf_pipeline_kind *k = kind("sincos");
    const double abs_tol = k->abs_tolerance, rel_tol = k->rel_tolerance;
    char why[WHY_BYTES] = "";

    for (int i = 0; i < 3; i++) {
        const float ref = i == 0 ? 0.0f : i == 1 ? 1.0f : -3.0f;
        const double bound = abs_tol + rel_tol * fabs(ref);
        ck_assert_int_eq(compare_one(k, ref, ref, why, sizeof why), 0);
        /* Just inside and just outside the bound, both signs. */
        ck_assert_int_eq(compare_one(k, (float)(ref + 0.9 * bound), ref, why, sizeof why), 0);
        ck_assert_int_eq(compare_one(k, (float)(ref - 0.9 * bound), ref, why, sizeof why), 0);
        ck_assert_int_eq(compare_one(k, (float)(ref + 1.1 * bound), ref, why, sizeof why), -1);
        ck_assert_int_eq(compare_one(k, (float)(ref - 1.1 * bound), ref, why, sizeof why), -1);
    }
}
END_TEST

START_TEST(test_compare_nan_inf) {
    const gf_pipeline_kind *k = kind("sincos");
    char why[WHY_BYTES] = "";

    ck_assert_int_eq(compare_one(k, NAN, NAN, why, sizeof why), 0);
    ck_assert_int_eq(compare_one(k, -NAN, NAN, why, sizeof why), 0);
    ck_assert_int_eq(compare_one(k, NAN, 1.0f, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "got nan, expected 1"));
    ck_assert_int_eq(compare_one(k, 1.0f, NAN, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "got 1, expected nan"));
    ck_assert_int_eq(compare_one(k, INFINITY, INFINITY, why, sizeof why), 0);
    ck_assert_int_eq(compare_one(k, -INFINITY, INFINITY, why, sizeof why), -1);
    ck_assert_int_eq(compare_one(k, 3e38f, INFINITY, why, sizeof why), -1);
    ck_assert_int_eq(compare_one(k, INFINITY, 3e38f, why, sizeof why), -1);
}
END_TEST

START_TEST(test_compare_reports_first_element) {
    const gf_pipeline_kind *k = kind("sincos");
    float got[4] = {1.0f, 2.0f, 3.5f, 9.0f}, ref[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    unsigned char g[sizeof got], r[sizeof ref];
    char why[WHY_BYTES] = "";

    put_f32(g, got, 4);
    put_f32(r, ref, 4);
    ck_assert_int_eq(gf_pipeline_compare(k, g, r, sizeof g, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "element 2 (byte offset 8): got 3.5, expected 3"));
    /* The first two elements match. */
    ck_assert_int_eq(gf_pipeline_compare(k, g, r, 8, why, sizeof why), 0);
    /* A length that is no whole number of floats. */
    ck_assert_int_eq(gf_pipeline_compare(k, g, r, 6, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "length 6 is not a multiple of 4"));
    ck_assert_int_eq(gf_pipeline_compare(k, g, r, 0, why, sizeof why), 0);
}
END_TEST

START_TEST(test_compare_exact) {
    const gf_pipeline_kind *echo = kind("echo"), *affine = kind("affine");
    unsigned char a[16], b[16];
    char why[WHY_BYTES] = "";

    for (int i = 0; i < 16; i++) {
        a[i] = b[i] = (unsigned char)(i * 17 + 3);
    }
    ck_assert_int_eq(gf_pipeline_compare(echo, a, b, sizeof a, why, sizeof why), 0);
    ck_assert_int_eq(gf_pipeline_compare(echo, a, b, 0, why, sizeof why), 0);
    b[5] = 0x34;
    a[9] = 0x00;
    ck_assert_int_eq(gf_pipeline_compare(echo, a, b, sizeof a, why, sizeof why), -1);
    ck_assert_str_eq(why, "byte offset 5 differs: got 0x58, expected 0x34");
    ck_assert_int_eq(gf_pipeline_compare(echo, a, b, 5, why, sizeof why), 0);

    /* An exact float kind: one ulp apart fails, and so does -0 against +0. */
    {
        float one = 1.0f, next = nextafterf(1.0f, 2.0f), zero = 0.0f, neg_zero = -0.0f;
        ck_assert_int_eq(compare_one(affine, next, one, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "byte offset 0 differs: got 0x01, expected 0x00"));
        ck_assert_int_eq(compare_one(affine, neg_zero, zero, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "byte offset 3 differs: got 0x80, expected 0x00"));
        ck_assert_int_eq(compare_one(affine, one, one, why, sizeof why), 0);
    }
}
END_TEST

/* ---- frames as tensors -------------------------------------------------------- */

/* A description as "uint8[224,224,3]" text, for exact comparisons. */
static const char *desc_text(const gf_frame_desc *d) {
    static char buf[GF_FRAME_DESC_TEXT_BYTES];
    return gf_frame_desc_text(d, buf, sizeof buf);
}

/* Describes kind `name` with parameters `p` (NULL: defaults) and checks
 * both sides' text and that each passes gf_frame_desc_check. */
static void check_kind_desc(const char *name, const gf_params *p, const char *in_text,
                            const char *out_text) {
    gf_frame_desc in, out;
    gf_params defaults;
    char why[WHY_BYTES] = "";
    if (p == NULL) {
        gf_params_defaults(kind(name), &defaults);
        p = &defaults;
    }
    memset(&in, 0xA5, sizeof in);
    memset(&out, 0xA5, sizeof out);
    kind(name)->describe(p, &in, &out);
    ck_assert_str_eq(desc_text(&in), in_text);
    ck_assert_str_eq(desc_text(&out), out_text);
    ck_assert_msg(gf_frame_desc_check(&in, why, sizeof why) == 0, "%s in: %s", name, why);
    ck_assert_msg(gf_frame_desc_check(&out, why, sizeof why) == 0, "%s out: %s", name, why);
}

START_TEST(test_describe_kinds) {
    gf_params p;
    check_kind_desc("echo", NULL, "uint8[n]", "uint8[n]");
    check_kind_desc("affine", NULL, "float32[n]", "float32[n]");
    check_kind_desc("sincos", NULL, "float32[n]", "float32[n]");
    check_kind_desc("normalize_u8", NULL, "uint8[1080,1920,3]", "float32[3,1080,1920]");
    gf_params_defaults(kind("normalize_u8"), &p);
    p.width = 32;
    p.height = 16;
    check_kind_desc("normalize_u8", &p, "uint8[16,32,3]", "float32[3,16,32]");

    /* The numbers behind the text: a variable dimension is GF_DIM_VARIABLE. */
    gf_frame_desc in, out;
    kind("affine")->describe(&p, &in, &out);
    ck_assert_uint_eq(in.count, 1);
    ck_assert_uint_eq(in.tensors[0].dtype, GF_DTYPE_FLOAT32);
    ck_assert_uint_eq(in.tensors[0].rank, 1);
    ck_assert_int_eq(in.tensors[0].dims[0], -1);
    kind("normalize_u8")->describe(&p, &in, &out);
    ck_assert_uint_eq(gf_frame_desc_bytes(&in), 16 * 32 * 3);
    ck_assert_uint_eq(gf_frame_desc_bytes(&out), 4 * 16 * 32 * 3);
    ck_assert_uint_eq(gf_frame_desc_bytes(&out),
                      (uint64_t)kind("normalize_u8")->output_bytes(&p, 16 * 32 * 3, NULL, 0));
}
END_TEST

START_TEST(test_dtypes) {
    static const struct {
        uint32_t dtype;
        const char *name;
        uint32_t bytes;
    } want[] = {{GF_DTYPE_UINT8, "uint8", 1},       {GF_DTYPE_INT32, "int32", 4},
                {GF_DTYPE_INT64, "int64", 8},       {GF_DTYPE_FLOAT16, "float16", 2},
                {GF_DTYPE_BFLOAT16, "bfloat16", 2}, {GF_DTYPE_FLOAT32, "float32", 4},
                {GF_DTYPE_INT16, "int16", 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_str_eq(gf_dtype_name(want[i].dtype), want[i].name);
        ck_assert_uint_eq(gf_dtype_from_name(want[i].name), want[i].dtype);
        ck_assert_uint_eq(gf_dtype_bytes(want[i].dtype), want[i].bytes);
    }
    ck_assert_ptr_null(gf_dtype_name(0));
    ck_assert_ptr_null(gf_dtype_name(8));
    ck_assert_uint_eq(gf_dtype_bytes(8), 0);
    ck_assert_uint_eq(gf_dtype_from_name("float64"), 0);
    ck_assert_uint_eq(gf_dtype_from_name("Float32"), 0);
    ck_assert_uint_eq(gf_dtype_from_name(NULL), 0);
}
END_TEST

/* One tensor of `dtype` and up to three dims (rank of them). */
static gf_tensor_desc tensor(uint32_t dtype, uint32_t rank, int64_t d0, int64_t d1, int64_t d2) {
    return (gf_tensor_desc){.dtype = dtype, .rank = rank, .dims = {d0, d1, d2}};
}

/* Asserts gf_frame_desc_check refuses `d` with exactly `reason`. */
static void check_refused(const gf_frame_desc *d, const char *reason) {
    char why[WHY_BYTES] = "";
    ck_assert_int_eq(gf_frame_desc_check(d, why, sizeof why), -1);
    ck_assert_str_eq(why, reason);
}

START_TEST(test_frame_desc_check) {
    gf_frame_desc d = {
        .count = 2,
        .tensors = {tensor(GF_DTYPE_FLOAT16, 3, 3, 224, 224), tensor(GF_DTYPE_INT64, 0, 0, 0, 0)}};
    char why[WHY_BYTES] = "";
    ck_assert_int_eq(gf_frame_desc_check(&d, why, sizeof why), 0);
    ck_assert_str_eq(desc_text(&d), "float16[3,224,224];int64[]");
    ck_assert_uint_eq(gf_frame_desc_bytes(&d), 2 * 3 * 224 * 224 + 8);

    d.count = 0;
    check_refused(&d, "0 tensors (1 to 8)");
    d.count = GF_FRAME_TENSORS_MAX + 1;
    check_refused(&d, "9 tensors (1 to 8)");
    d.count = 2;
    d.tensors[1].dtype = 8;
    check_refused(&d, "tensor 1: dtype 8 is unknown");
    d.tensors[1] = tensor(GF_DTYPE_INT64, GF_TENSOR_RANK_MAX + 1, 1, 1, 1);
    check_refused(&d, "tensor 1: rank 9 (at most 8)");
    d.tensors[1] = tensor(GF_DTYPE_INT64, 2, 4, 0, 0);
    check_refused(&d, "tensor 1: dimension 1 is 0 (at least 1, or -1 once in a frame of one "
                      "tensor)");
    /* A variable dimension only in a frame of one tensor, once. */
    d.tensors[1] = tensor(GF_DTYPE_INT64, 1, -1, 0, 0);
    check_refused(&d, "tensor 1: dimension 0 is -1 (at least 1, or -1 once in a frame of one "
                      "tensor)");
    d.count = 1;
    d.tensors[0] = tensor(GF_DTYPE_FLOAT32, 2, -1, -1, 0);
    check_refused(&d, "tensor 0: dimension 1 is -1 (at least 1, or -1 once in a frame of one "
                      "tensor)");
    d.tensors[0] = tensor(GF_DTYPE_FLOAT32, 2, -2, 3, 0);
    check_refused(&d, "tensor 0: dimension 0 is -2 (at least 1, or -1 once in a frame of one "
                      "tensor)");
    d.tensors[0] = tensor(GF_DTYPE_FLOAT32, 3, INT64_MAX / 2, 4, 1);
    check_refused(&d, "tensor 0: more than 2^63 bytes");
    d.tensors[0] = tensor(GF_DTYPE_FLOAT32, 2, -1, 10, 0);
    ck_assert_int_eq(gf_frame_desc_check(&d, why, sizeof why), 0);
    ck_assert_uint_eq(gf_frame_desc_bytes(&d), 0); /* variable */
}
END_TEST

START_TEST(test_frame_desc_resolve) {
    gf_frame_desc d = {.count = 1, .tensors = {tensor(GF_DTYPE_FLOAT32, 2, -1, 10, 0)}};
    gf_frame_desc e = d;
    ck_assert_int_eq(gf_frame_desc_resolve(&e, 81), -1); /* not whole vectors */
    ck_assert(gf_frame_desc_equal(&e, &d));              /* unchanged */
    ck_assert_int_eq(gf_frame_desc_resolve(&e, 120), 0);
    ck_assert_str_eq(desc_text(&e), "float32[3,10]");
    ck_assert(!gf_frame_desc_equal(&e, &d));
    e = d;
    ck_assert_int_eq(gf_frame_desc_resolve(&e, 0), 0); /* an empty frame: 0 vectors */
    ck_assert_str_eq(desc_text(&e), "float32[0,10]");
    /* A fixed frame resolves to its own length only. */
    ck_assert_int_eq(gf_frame_desc_resolve(&e, 0), 0);
    ck_assert_int_eq(gf_frame_desc_resolve(&e, 40), -1);
    d.tensors[0] = tensor(GF_DTYPE_BFLOAT16, 1, -1, 0, 0);
    ck_assert_str_eq(desc_text(&d), "bfloat16[n]");
    ck_assert_int_eq(gf_frame_desc_resolve(&d, 7), -1);
    ck_assert_int_eq(gf_frame_desc_resolve(&d, 8), 0);
    ck_assert_str_eq(desc_text(&d), "bfloat16[4]");
}
END_TEST

/* A chain's descriptions: normalize_u8 4x2 then affine.  Its input has one
 * length, so every stage's variable dimension resolves. */
START_TEST(test_pipeline_describe_chain) {
    gf_pipeline p = {.name = "chain", .stage_count = 2};
    gf_frame_desc in, out;
    p.stages[0].kind = kind("normalize_u8");
    gf_params_defaults(p.stages[0].kind, &p.stages[0].params);
    p.stages[0].params.width = 4;
    p.stages[0].params.height = 2;
    p.stages[1].kind = kind("affine");
    gf_params_defaults(p.stages[1].kind, &p.stages[1].params);

    gf_pipeline_describe(&p, &in, &out);
    ck_assert_str_eq(desc_text(&in), "uint8[2,4,3]");
    ck_assert_str_eq(desc_text(&out), "float32[24]");
    gf_stage_describe(&p, 0, &in, &out);
    ck_assert_str_eq(desc_text(&in), "uint8[2,4,3]");
    ck_assert_str_eq(desc_text(&out), "float32[3,2,4]");
    gf_stage_describe(&p, 1, &in, &out);
    ck_assert_str_eq(desc_text(&in), "float32[24]");
    ck_assert_str_eq(desc_text(&out), "float32[24]");

    /* affine alone takes any length: nothing resolves. */
    p.stages[0] = p.stages[1];
    p.stage_count = 1;
    gf_pipeline_describe(&p, &in, &out);
    ck_assert_str_eq(desc_text(&in), "float32[n]");
    ck_assert_str_eq(desc_text(&out), "float32[n]");
}
END_TEST

static Suite *pipelines_suite(void) {
    Suite *s = suite_create("pipelines");
    TCase *refs = tcase_create("references");
    TCase *lengths = tcase_create("lengths");
    TCase *params = tcase_create("params");
    TCase *compare = tcase_create("compare");
    TCase *tensors = tcase_create("tensors");

    tcase_add_test(refs, test_echo_ref_copies_bytes);
    tcase_add_test(refs, test_affine_ref_values);
    tcase_add_test(refs, test_affine_ref_no_fma);
    tcase_add_test(refs, test_affine_ref_unaligned);
    tcase_add_test(refs, test_sincos_ref_one_iteration);
    tcase_add_test(refs, test_sincos_ref_iterates);
    tcase_add_test(refs, test_normalize_u8_ref_planar);
    tcase_add_test(refs, test_normalize_u8_ref_channels_and_rows);
    tcase_add_test(refs, test_normalize_u8_ref_inexact);
    suite_add_tcase(s, refs);

    tcase_add_test(lengths, test_output_bytes_echo);
    tcase_add_test(lengths, test_output_bytes_float_kinds);
    tcase_add_test(lengths, test_output_bytes_normalize_u8);
    suite_add_tcase(s, lengths);

    tcase_add_test(params, test_check_params_defaults_pass);
    tcase_add_test(params, test_check_params_ranges);
    tcase_add_test(params, test_check_params_normalize_u8);
    tcase_add_test(params, test_kind_lookup);
    tcase_add_test(params, test_defaults);
    suite_add_tcase(s, params);

    tcase_add_test(compare, test_compare_tolerance);
    tcase_add_test(compare, test_compare_nan_inf);
    tcase_add_test(compare, test_compare_reports_first_element);
    tcase_add_test(compare, test_compare_exact);
    suite_add_tcase(s, compare);

    tcase_add_test(tensors, test_describe_kinds);
    tcase_add_test(tensors, test_dtypes);
    tcase_add_test(tensors, test_frame_desc_check);
    tcase_add_test(tensors, test_frame_desc_resolve);
    tcase_add_test(tensors, test_pipeline_describe_chain);
    suite_add_tcase(s, tensors);
    return s;
}

int main(void) {
    return gf_test_run(pipelines_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * The pipeline registry: the six kinds' entries (parameter tables, length
 * rules, tolerances, references and their frames as tensors) and the
 * functions of pipeline.h that look them up, fill defaults and compare
 * outputs.  No CUDA: the launchers are found through gf_kernel_launcher()
 * (kernels/launchers.c).
 */
#include "pipeline.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_math.h"
#include "kernels.h"
#include "plugin.h"
#include "spectrogram_math.h"
#include "util.h"

/* Frames carry float32 little-endian and the references read them in place. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gpuframed's float pipelines assume a little-endian host"
#endif
_Static_assert(sizeof(float) == 4, "float32 pipelines need a 4-byte float");

/* The number of entries of a static array. */
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* The size of one element of the float32 pipelines. */
#define F32_BYTES 4u
/* normalize_u8's input is interleaved RGB: bytes per pixel, planes out. */
#define RGB_CHANNELS 3u

/* affine's a and b: wide enough for any sane scale and offset, and a range
 * check that rejects infinities and NaN. */
#define AFFINE_COEFF_LIMIT 1e30
/* sincos's iters: at least one pass; at most what keeps a 16 MiB frame
 * under a second of GPU time (about 0.8 s on an H200). */
#define SINCOS_ITERS_DEFAULT 16
#define SINCOS_ITERS_MAX     100000
/* normalize_u8's width and height: a 16-bit dimension, as image formats use. */
#define IMAGE_DIM_MAX        65535
#define IMAGE_WIDTH_DEFAULT  1920
#define IMAGE_HEIGHT_DEFAULT 1080
/* normalize_u8's mean and std: std must stay away from 0 so the division is
 * finite; both bounded so that the range check rejects infinities and NaN. */
#define NORM_MEAN_LIMIT 1e6
#define NORM_STD_MIN    1e-6
#define NORM_STD_MAX    1e6

/*
 * sincos: the GPU's sinf/cosf are within 2 ulp of the true value (CUDA
 * Programming Guide, mathematical functions), glibc's within 1 ulp, so a
 * repetition's sum s*c + v can round one ulp of v apart, and the map
 * v -> v + sin(2v)/2 doubles such a difference near its repelling points
 * (multiples of pi) before its superattracting ones (pi/2 + k*pi) erase it.
 * Measured on an H200 (CUDA 13.0, driver 580, glibc 2.39), as the smallest T
 * with |got - ref| <= T + T*|ref| for every element: at most 7.4e-6, for
 * iters 8 to 14 and inputs 3.8e-3 or less from +-pi (every float within 1e-2
 * of +-pi, 12 Mi uniform in [-4, 4], 4 Mi each uniform in [-1e2, 1e2],
 * [-1e4, 1e4], [-1e6, 1e6]; iters 1 to 100000; from iters 24 on the results
 * were identical).  5e-5 leaves a margin of about 7; a wrong formula still
 * fails by orders of magnitude.
 */
#define SINCOS_ABS_TOLERANCE 5e-5f
#define SINCOS_REL_TOLERANCE 5e-5f

/*
 * spectrogram: the GPU computes in float32 (cuFFT, a float32 cuBLAS GEMM),
 * the reference in double.  bench/repro/spectrogram_tolerance.py computes
 * every option (n_fft 64 to 4096, odd and even, power 1 and 2, mel or not,
 * none, ln and dB) in float32 with each DFT as a matrix product, whose error
 * grows as sqrt(n_fft), faster than an FFT's log(n_fft): on full-scale
 * int16 noise and float32 noise in [-4, 4] (what clients and tests make up)
 * it lands at most 0.45 of this bound, the worst in the log of the few bins
 * near zero at n_fft 4096.  A symmetric Hann window instead of the periodic
 * one lands 91 times over it, a column shifted by one sample 1017 times.
 */
#define SPECTROGRAM_ABS_TOLERANCE 1e-3f
#define SPECTROGRAM_REL_TOLERANCE 1e-3f

/* The ImageNet statistics that torchvision's models expect, per channel R, G, B. */
static const float imagenet_mean[RGB_CHANNELS] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[RGB_CHANNELS] = {0.229f, 0.224f, 0.225f};

/* True when v lies in the descriptor's closed range; false for NaN. */
static int in_range(double v, const gf_param_desc *d) {
    return v >= d->min && v <= d->max;
}

/* The same for a float32 parameter, against the bounds rounded to float32:
 * a config value of exactly 1e30 or 1e-6 is stored as the nearest float,
 * which lies just outside the double bound. */
static int in_range_f32(float v, const gf_param_desc *d) {
    return v >= (float)d->min && v <= (float)d->max;
}

/*
 * Checks every parameter of the table `descs` (count entries) in `p` against
 * its closed range.  Returns 0, or -1 with "key = value is outside [min, max]"
 * in why[why_len].
 */
static int check_ranges(const gf_param_desc *descs, size_t count, const gf_params *p, char *why,
                        size_t why_len) {
    for (size_t i = 0; i < count; i++) {
        const gf_param_desc *d = &descs[i];
        const unsigned char *field = (const unsigned char *)p + d->offset;
        float f[RGB_CHANNELS];
        uint32_t u;

        switch (d->type) {
        case GF_PARAM_F32:
            memcpy(&f[0], field, sizeof f[0]);
            if (!in_range_f32(f[0], d)) {
                gf_errorf(why, why_len, "%s = %.9g is outside [%g, %g]", d->key, f[0], d->min,
                          d->max);
                return -1;
            }
            break;
        case GF_PARAM_U32:
            memcpy(&u, field, sizeof u);
            if (!in_range(u, d)) {
                gf_errorf(why, why_len, "%s = %" PRIu32 " is outside [%g, %g]", d->key, u, d->min,
                          d->max);
                return -1;
            }
            break;
        case GF_PARAM_F32x3:
            memcpy(f, field, sizeof f);
            for (unsigned c = 0; c < RGB_CHANNELS; c++) {
                if (!in_range_f32(f[c], d)) {
                    gf_errorf(why, why_len, "%s[%u] = %.9g is outside [%g, %g]", d->key, c, f[c],
                              d->min, d->max);
                    return -1;
                }
            }
            break;
        case GF_PARAM_ENUM:
        case GF_PARAM_BOOL:
            memcpy(&u, field, sizeof u);
            if (!in_range(u, d)) {
                gf_errorf(why, why_len, "%s has no choice %" PRIu32, d->key, u);
                return -1;
            }
            break;
        }
    }
    return 0;
}

const char *gf_param_choice(const gf_param_desc *d, uint32_t index) {
    if (d->choices == NULL)
        return "?";
    for (uint32_t i = 0; d->choices[i] != NULL; i++)
        if (i == index)
            return d->choices[i];
    return "?";
}

/* The largest output any kind of a fixed output size may have: four times
 * max_frame_bytes, what normalize_u8 makes of its largest input. */
#define OUTPUT_PER_INPUT_MAX 4u

/* An input length as an output length, or -1 when int64_t cannot hold it. */
static int64_t same_length(uint64_t in_bytes, char *why, size_t why_len) {
    if (in_bytes > (uint64_t)INT64_MAX) {
        gf_errorf(why, why_len, "length %" PRIu64 " is too large", in_bytes);
        return -1;
    }
    return (int64_t)in_bytes;
}

/* One tensor of `dtype` and the `rank` dims that follow: a frame's whole
 * input or output. */
static void one_tensor(gf_frame_desc *d, uint32_t dtype, uint32_t rank, int64_t d0, int64_t d1,
                       int64_t d2) {
    d->count = 1;
    d->tensors[0] = (gf_tensor_desc){.dtype = dtype, .rank = rank, .dims = {d0, d1, d2}};
}

/* ---- echo -------------------------------------------------------------- */

/* Any length, 0 included, comes back unchanged. */
static int64_t echo_output_bytes(const gf_params *p, uint64_t in_bytes, char *why, size_t why_len) {
    (void)p;
    return same_length(in_bytes, why, why_len);
}

/* Output = input: at most the largest input. */
static uint64_t same_max_output_bytes(const gf_params *p, uint64_t max_in_bytes) {
    (void)p;
    return max_in_bytes;
}

/* echo's warm-up is one byte. */
static uint64_t echo_warmup_input_bytes(const gf_params *p) {
    (void)p;
    return 1;
}

/* echo has no parameters: always 0. */
static int echo_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                             size_t why_len) {
    (void)p;
    (void)max_frame_bytes;
    (void)why;
    (void)why_len;
    return 0;
}

/* Bytes in, the same bytes out: uint8 [-1] both ways. */
static void echo_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    (void)p;
    one_tensor(in, GF_DTYPE_UINT8, 1, GF_DIM_VARIABLE, 0, 0);
    *out = *in;
}

/* ---- affine and sincos: float32 arrays ---------------------------------- */

/* A whole number of float32 elements (0 included) comes back at its size. */
static int64_t f32_output_bytes(const gf_params *p, uint64_t in_bytes, char *why, size_t why_len) {
    (void)p;
    if (in_bytes % F32_BYTES != 0) {
        gf_errorf(why, why_len, "length %" PRIu64 " is not a multiple of %u (float32 elements)",
                  in_bytes, F32_BYTES);
        return -1;
    }
    return same_length(in_bytes, why, why_len);
}

/* One float32 element warms a float kind up. */
static uint64_t f32_warmup_input_bytes(const gf_params *p) {
    (void)p;
    return F32_BYTES;
}

/* A float32 array in, one of the same length out: float32 [-1] both ways. */
static void f32_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    (void)p;
    one_tensor(in, GF_DTYPE_FLOAT32, 1, GF_DIM_VARIABLE, 0, 0);
    *out = *in;
}

static const gf_param_desc affine_params[] = {
    {"a", GF_PARAM_F32, offsetof(gf_params, a), 1.0, -AFFINE_COEFF_LIMIT, AFFINE_COEFF_LIMIT,
     "scale: y = a*x + b", NULL},
    {"b", GF_PARAM_F32, offsetof(gf_params, b), 0.0, -AFFINE_COEFF_LIMIT, AFFINE_COEFF_LIMIT,
     "offset: y = a*x + b", NULL},
};

/* a and b in range; nothing else to check. */
static int affine_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                               size_t why_len) {
    (void)max_frame_bytes;
    return check_ranges(affine_params, COUNT_OF(affine_params), p, why, why_len);
}

static const gf_param_desc sincos_params[] = {
    {"iters", GF_PARAM_U32, offsetof(gf_params, iters), SINCOS_ITERS_DEFAULT, 1, SINCOS_ITERS_MAX,
     "repetitions of v = sin(v)*cos(v) + v per element", NULL},
};

/* iters in range; nothing else to check. */
static int sincos_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                               size_t why_len) {
    (void)max_frame_bytes;
    return check_ranges(sincos_params, COUNT_OF(sincos_params), p, why, why_len);
}

/* ---- normalize_u8 ---------------------------------------------------------- */

/* The mean and std descriptors hold channel R's default: a descriptor has one
 * default_value, and gf_params_defaults() fills the three ImageNet values. */
static const gf_param_desc normalize_u8_params[] = {
    {"width", GF_PARAM_U32, offsetof(gf_params, width), IMAGE_WIDTH_DEFAULT, 1, IMAGE_DIM_MAX,
     "image width in pixels", NULL},
    {"height", GF_PARAM_U32, offsetof(gf_params, height), IMAGE_HEIGHT_DEFAULT, 1, IMAGE_DIM_MAX,
     "image height in pixels", NULL},
    {"mean", GF_PARAM_F32x3, offsetof(gf_params, mean), 0.485, -NORM_MEAN_LIMIT, NORM_MEAN_LIMIT,
     "per-channel mean subtracted from value/255 (default ImageNet: 0.485 0.456 0.406)", NULL},
    {"std", GF_PARAM_F32x3, offsetof(gf_params, std), 0.229, NORM_STD_MIN, NORM_STD_MAX,
     "per-channel divisor after the mean (default ImageNet: 0.229 0.224 0.225)", NULL},
};

/* The one input length normalize_u8 takes: width*height*3 bytes. */
static uint64_t rgb_frame_bytes(const gf_params *p) {
    /* Both factors are below 2^32, so neither product can wrap 2^64... */
    uint64_t pixels = (uint64_t)p->width * p->height;

    /* ...but times 3 it can; saturate, so no real length ever matches. */
    return pixels > UINT64_MAX / RGB_CHANNELS ? UINT64_MAX : pixels * RGB_CHANNELS;
}

/* Exactly width*height*3 bytes; the output is that many float32. */
static int64_t normalize_u8_output_bytes(const gf_params *p, uint64_t in_bytes, char *why,
                                         size_t why_len) {
    uint64_t want = rgb_frame_bytes(p);

    if (in_bytes != want) {
        gf_errorf(why, why_len,
                  "length %" PRIu64 " is not width*height*3 = %" PRIu64 " (%" PRIu32 "x%" PRIu32
                  " RGB)",
                  in_bytes, want, p->width, p->height);
        return -1;
    }
    if (in_bytes > (uint64_t)INT64_MAX / sizeof(float)) {
        gf_errorf(why, why_len, "length %" PRIu64 " is too large", in_bytes);
        return -1;
    }
    return (int64_t)(in_bytes * sizeof(float));
}

/* The one accepted input makes the one output: 4 bytes per input byte. */
static uint64_t normalize_u8_max_output_bytes(const gf_params *p, uint64_t max_in_bytes) {
    uint64_t in_bytes = rgb_frame_bytes(p);
    return in_bytes <= max_in_bytes ? in_bytes * sizeof(float) : 0;
}

/* normalize_u8 takes one size only: a whole image. */
static uint64_t normalize_u8_warmup_input_bytes(const gf_params *p) {
    return rgb_frame_bytes(p);
}

/* Ranges, then one image must fit one frame. */
static int normalize_u8_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                                     size_t why_len) {
    uint64_t frame_bytes;

    if (check_ranges(normalize_u8_params, COUNT_OF(normalize_u8_params), p, why, why_len) != 0) {
        return -1;
    }
    frame_bytes = rgb_frame_bytes(p);
    if (frame_bytes > max_frame_bytes) {
        gf_errorf(why, why_len,
                  "width*height*3 = %" PRIu64 " bytes (%" PRIu32 "x%" PRIu32
                  " RGB) exceeds max_frame_bytes %" PRIu64,
                  frame_bytes, p->width, p->height, max_frame_bytes);
        return -1;
    }
    return 0;
}

/* An image, rows of interleaved RGB, in: uint8 [height, width, 3]; its
 * planes out: float32 [3, height, width]. */
static void normalize_u8_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    one_tensor(in, GF_DTYPE_UINT8, 3, p->height, p->width, RGB_CHANNELS);
    one_tensor(out, GF_DTYPE_FLOAT32, 3, RGB_CHANNELS, p->height, p->width);
}

/* ---- image ------------------------------------------------------------------ */

static const char *const image_formats[] = {"rgb8", "bgr8", "rgba8", "gray8",
                                            "nv12", "i420", "yuyv",  NULL};
static const char *const yuv_matrices[] = {"bt601", "bt709", NULL};
static const char *const yuv_ranges[] = {"limited", "full", NULL};
static const char *const image_fits[] = {"stretch", "crop", "letterbox", NULL};
static const char *const image_layouts[] = {"chw", "hwc", NULL};
static const char *const image_dtypes[] = {"float32", "float16", "uint8", NULL};

/* An enum parameter: its choices, the default's index, every index allowed. */
#define ENUM_PARAM(key, field, choices, default_index, doc)                                        \
    {                                                                                              \
        key, GF_PARAM_ENUM, offsetof(gf_params, field), default_index, 0, COUNT_OF(choices) - 2,   \
            doc, choices                                                                           \
    }
#define BOOL_PARAM(key, field, default_value, doc)                                                 \
    { key, GF_PARAM_BOOL, offsetof(gf_params, field), default_value, 0, 1, doc, NULL }

static const gf_param_desc image_params[] = {
    ENUM_PARAM("format", format, image_formats, GF_IMAGE_RGB8,
               "input pixel format: rgb8, bgr8, rgba8, gray8, nv12, i420 or yuyv"),
    {"width", GF_PARAM_U32, offsetof(gf_params, width), IMAGE_WIDTH_DEFAULT, 1, IMAGE_DIM_MAX,
     "input width in pixels", NULL},
    {"height", GF_PARAM_U32, offsetof(gf_params, height), IMAGE_HEIGHT_DEFAULT, 1, IMAGE_DIM_MAX,
     "input height in pixels", NULL},
    ENUM_PARAM("matrix", matrix, yuv_matrices, GF_YUV_BT601,
               "YUV formats: the Y'CbCr matrix, bt601 or bt709"),
    ENUM_PARAM("range", range, yuv_ranges, GF_YUV_LIMITED,
               "YUV formats: limited (Y 16-235) or full (0-255) range"),
    {"out_width", GF_PARAM_U32, offsetof(gf_params, out_width), 0, 0, IMAGE_DIM_MAX,
     "output width; 0 with out_height 0: no resize", NULL},
    {"out_height", GF_PARAM_U32, offsetof(gf_params, out_height), 0, 0, IMAGE_DIM_MAX,
     "output height; 0 with out_width 0: no resize", NULL},
    ENUM_PARAM("fit", fit, image_fits, GF_FIT_STRETCH,
               "how the input fills the output: stretch, crop (centre) or letterbox"),
    BOOL_PARAM("antialias", antialias, 1,
               "downscaling widens the bilinear tent to the ratio (torchvision's antialias)"),
    {"pad_value", GF_PARAM_F32, offsetof(gf_params, pad_value), 0.0, 0.0, 255.0,
     "letterbox: the borders' value in 0..255, normalised like a pixel", NULL},
    ENUM_PARAM("layout", layout, image_layouts, GF_LAYOUT_CHW,
               "output layout: chw (3 planes) or hwc (interleaved)"),
    ENUM_PARAM("dtype", dtype, image_dtypes, GF_IMAGE_FLOAT32,
               "output element: float32, float16 or uint8 (0..255, no mean or std)"),
    {"mean", GF_PARAM_F32x3, offsetof(gf_params, mean), 0.0, -NORM_MEAN_LIMIT, NORM_MEAN_LIMIT,
     "per-channel R, G, B mean subtracted from value/255 (default none: 0)", NULL},
    {"std", GF_PARAM_F32x3, offsetof(gf_params, std), 1.0, NORM_STD_MIN, NORM_STD_MAX,
     "per-channel divisor after the mean (default none: 1)", NULL},
};

/* The output's width and height (the input's without a resize). */
static uint64_t image_output_bytes_of(const gf_params *p) {
    const uint64_t w = p->out_width ? p->out_width : p->width;
    const uint64_t h = p->out_height ? p->out_height : p->height;
    return w * h * GF_IMAGE_CHANNELS * gf_image_dtype_bytes(p->dtype);
}

static int64_t image_output_bytes(const gf_params *p, uint64_t in_bytes, char *why,
                                  size_t why_len) {
    const uint64_t want = gf_image_input_bytes(p->format, p->width, p->height);
    if (in_bytes != want) {
        gf_errorf(why, why_len,
                  "length %" PRIu64 " is not the %" PRIu64 " bytes of a %" PRIu32 "x%" PRIu32
                  " %s image",
                  in_bytes, want, p->width, p->height, image_formats[p->format]);
        return -1;
    }
    return (int64_t)image_output_bytes_of(p);
}

static uint64_t image_max_output_bytes(const gf_params *p, uint64_t max_in_bytes) {
    return gf_image_input_bytes(p->format, p->width, p->height) <= max_in_bytes
               ? image_output_bytes_of(p)
               : 0;
}

static uint64_t image_warmup_input_bytes(const gf_params *p) {
    return gf_image_input_bytes(p->format, p->width, p->height);
}

/* The input as its format lays it out: uint8 [height, width, 3] (rgb8,
 * bgr8), [.., 4] (rgba8), [height, width] (gray8), [height, width, 2]
 * (yuyv: Y and one chroma byte a pixel); nv12 and i420, whose planes differ
 * in size, as their bytes: uint8 [n].  The output: float32, float16 or
 * uint8 [3, out_height, out_width] (chw) or [out_height, out_width, 3]. */
static void image_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    const int64_t w = p->width, h = p->height;
    const int64_t ow = p->out_width ? p->out_width : w, oh = p->out_height ? p->out_height : h;
    const uint32_t dtype = p->dtype == GF_IMAGE_FLOAT16 ? GF_DTYPE_FLOAT16
                           : p->dtype == GF_IMAGE_UINT8 ? GF_DTYPE_UINT8
                                                        : GF_DTYPE_FLOAT32;
    switch (p->format) {
    case GF_IMAGE_RGB8:
    case GF_IMAGE_BGR8: one_tensor(in, GF_DTYPE_UINT8, 3, h, w, 3); break;
    case GF_IMAGE_RGBA8: one_tensor(in, GF_DTYPE_UINT8, 3, h, w, 4); break;
    case GF_IMAGE_GRAY8: one_tensor(in, GF_DTYPE_UINT8, 2, h, w, 0); break;
    case GF_IMAGE_YUYV: one_tensor(in, GF_DTYPE_UINT8, 3, h, w, 2); break;
    default:
        one_tensor(in, GF_DTYPE_UINT8, 1,
                   (int64_t)gf_image_input_bytes(p->format, p->width, p->height), 0, 0);
        break;
    }
    if (p->layout == GF_LAYOUT_CHW)
        one_tensor(out, dtype, 3, GF_IMAGE_CHANNELS, oh, ow);
    else
        one_tensor(out, dtype, 3, oh, ow, GF_IMAGE_CHANNELS);
}

static int image_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                              size_t why_len) {
    uint64_t in_bytes, out_bytes;
    if (check_ranges(image_params, COUNT_OF(image_params), p, why, why_len) != 0)
        return -1;
    if ((p->out_width == 0) != (p->out_height == 0)) {
        gf_errorf(why, why_len,
                  "out_width %" PRIu32 " and out_height %" PRIu32
                  ": give both (resize) or neither (no resize)",
                  p->out_width, p->out_height);
        return -1;
    }
    if (p->format == GF_IMAGE_YUYV && p->width % 2 != 0) {
        gf_errorf(why, why_len,
                  "width %" PRIu32 " is odd: yuyv carries pixels in pairs (Y0 U Y1 V)", p->width);
        return -1;
    }
    if (p->dtype == GF_IMAGE_UINT8) {
        for (unsigned c = 0; c < GF_IMAGE_CHANNELS; c++) {
            if (p->mean[c] != 0.0f || p->std[c] != 1.0f) {
                gf_errorf(why, why_len,
                          "dtype uint8 writes 0..255 values: mean and std apply to float "
                          "outputs only (leave them out)");
                return -1;
            }
        }
    }
    in_bytes = gf_image_input_bytes(p->format, p->width, p->height);
    if (in_bytes > max_frame_bytes) {
        gf_errorf(why, why_len,
                  "a %" PRIu32 "x%" PRIu32 " %s image is %" PRIu64
                  " bytes, more than max_frame_bytes %" PRIu64,
                  p->width, p->height, image_formats[p->format], in_bytes, max_frame_bytes);
        return -1;
    }
    out_bytes = image_output_bytes_of(p);
    if (out_bytes > OUTPUT_PER_INPUT_MAX * max_frame_bytes) {
        gf_errorf(why, why_len,
                  "the output is %" PRIu64 " bytes, more than %u x max_frame_bytes %" PRIu64,
                  out_bytes, OUTPUT_PER_INPUT_MAX, max_frame_bytes);
        return -1;
    }
    return 0;
}

/* ---- spectrogram -------------------------------------------------------------- */

static const char *const sample_formats[] = {"int16", "float32", NULL};
static const char *const mel_scales[] = {"htk", "slaney", NULL};
static const char *const mel_norms[] = {"none", "slaney", NULL};
static const char *const spec_logs[] = {"none", "ln", "db", NULL};

/* 1 s of 16 kHz audio, 25 ms windows every 10 ms: the usual speech front
 * end (Whisper's, Kaldi's). */
#define SPEC_SAMPLES_DEFAULT     16000
#define SPEC_SAMPLE_RATE_DEFAULT 16000
#define SPEC_N_FFT_DEFAULT       400
#define SPEC_HOP_DEFAULT         160
/* Frames of at most 2^28 samples (a frame is also bounded by
 * max_frame_bytes); sample rates up to 1 MHz. */
#define SPEC_SAMPLES_MAX     (1u << 28)
#define SPEC_SAMPLE_RATE_MAX 1000000
#define SPEC_HZ_MAX          1e6
/* torchaudio's AmplitudeToDB amin. */
#define SPEC_EPS_DEFAULT 1e-10
#define SPEC_EPS_MIN     1e-30
#define SPEC_EPS_MAX     1e3

static const gf_param_desc spectrogram_params[] = {
    ENUM_PARAM("sample_format", sample_format, sample_formats, GF_SAMPLES_INT16,
               "PCM samples: int16 (read as s/32768) or float32"),
    {"samples", GF_PARAM_U32, offsetof(gf_params, samples), SPEC_SAMPLES_DEFAULT, 1,
     SPEC_SAMPLES_MAX, "samples per frame (mono)", NULL},
    {"sample_rate", GF_PARAM_U32, offsetof(gf_params, sample_rate), SPEC_SAMPLE_RATE_DEFAULT, 2,
     SPEC_SAMPLE_RATE_MAX, "Hz: what the mel filterbank's frequencies mean", NULL},
    {"n_fft", GF_PARAM_U32, offsetof(gf_params, n_fft), SPEC_N_FFT_DEFAULT, 2, GF_SPEC_N_FFT_MAX,
     "FFT size = periodic Hann window length", NULL},
    {"hop", GF_PARAM_U32, offsetof(gf_params, hop), SPEC_HOP_DEFAULT, 1, SPEC_SAMPLES_MAX,
     "samples between STFT columns", NULL},
    BOOL_PARAM("center", center, 1, "reflect-pad n_fft/2 samples each side (torch.stft)"),
    {"power", GF_PARAM_U32, offsetof(gf_params, power), 2, 1, 2, "1: magnitude, 2: power", NULL},
    {"n_mels", GF_PARAM_U32, offsetof(gf_params, n_mels), 0, 0, GF_SPEC_N_MELS_MAX,
     "mel bands; 0: none (n_fft/2+1 frequency bins)", NULL},
    {"f_min", GF_PARAM_F32, offsetof(gf_params, f_min), 0.0, 0.0, SPEC_HZ_MAX,
     "mel filterbank's lowest frequency in Hz", NULL},
    {"f_max", GF_PARAM_F32, offsetof(gf_params, f_max), 0.0, 0.0, SPEC_HZ_MAX,
     "mel filterbank's highest frequency in Hz; 0: sample_rate/2", NULL},
    ENUM_PARAM("mel_scale", mel_scale, mel_scales, GF_MEL_HTK,
               "htk or slaney (torchaudio's MelScale)"),
    ENUM_PARAM("mel_norm", mel_norm, mel_norms, GF_MEL_NORM_NONE,
               "none, or slaney: each band divided by its width"),
    ENUM_PARAM("log", log, spec_logs, GF_LOG_NONE,
               "none; ln: ln(max(x, eps)); db: 10 log10 (power) or 20 log10 (magnitude)"),
    {"eps", GF_PARAM_F32, offsetof(gf_params, eps), SPEC_EPS_DEFAULT, SPEC_EPS_MIN, SPEC_EPS_MAX,
     "the log's floor", NULL},
};

static uint64_t spectrogram_input_bytes(const gf_params *p) {
    return (uint64_t)p->samples * gf_spec_shape_of(p).sample_bytes;
}

static uint64_t spectrogram_output_bytes_of(const gf_params *p) {
    const gf_spec_shape s = gf_spec_shape_of(p);
    return (uint64_t)s.rows * s.columns * sizeof(float);
}

static int64_t spectrogram_output_bytes(const gf_params *p, uint64_t in_bytes, char *why,
                                        size_t why_len) {
    const uint64_t want = spectrogram_input_bytes(p);
    if (in_bytes != want) {
        gf_errorf(why, why_len,
                  "length %" PRIu64 " is not the %" PRIu64 " bytes of %" PRIu32 " %s samples",
                  in_bytes, want, p->samples, sample_formats[p->sample_format]);
        return -1;
    }
    return (int64_t)spectrogram_output_bytes_of(p);
}

static uint64_t spectrogram_max_output_bytes(const gf_params *p, uint64_t max_in_bytes) {
    return spectrogram_input_bytes(p) <= max_in_bytes ? spectrogram_output_bytes_of(p) : 0;
}

static uint64_t spectrogram_warmup_input_bytes(const gf_params *p) {
    return spectrogram_input_bytes(p);
}

static int spectrogram_input_f32(const gf_params *p) {
    return p->sample_format == GF_SAMPLES_F32;
}

/* int16 or float32 [samples] in; float32 [rows, columns] out, rows the
 * mels or the frequency bins, as torch.stft and torchaudio shape it. */
static void spectrogram_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    const gf_spec_shape s = gf_spec_shape_of(p);
    one_tensor(in, p->sample_format == GF_SAMPLES_F32 ? GF_DTYPE_FLOAT32 : GF_DTYPE_INT16, 1,
               p->samples, 0, 0);
    one_tensor(out, GF_DTYPE_FLOAT32, 2, s.rows, s.columns, 0);
}

static int spectrogram_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                                    size_t why_len) {
    uint64_t in_bytes, out_bytes;
    if (check_ranges(spectrogram_params, COUNT_OF(spectrogram_params), p, why, why_len) != 0)
        return -1;
    if (p->center && p->samples <= p->n_fft / 2) {
        gf_errorf(why, why_len,
                  "samples %" PRIu32 " must exceed n_fft/2 = %" PRIu32
                  ": center reflects n_fft/2 samples about each end",
                  p->samples, p->n_fft / 2);
        return -1;
    }
    if (!p->center && p->samples < p->n_fft) {
        gf_errorf(why, why_len,
                  "samples %" PRIu32 " is less than n_fft %" PRIu32 ": without center a frame "
                  "must fill one window",
                  p->samples, p->n_fft);
        return -1;
    }
    if (p->n_mels > 0 && !((double)p->f_min < gf_mel_f_max(p))) {
        gf_errorf(why, why_len, "f_min %g must be below f_max %g (0: sample_rate/2)",
                  (double)p->f_min, gf_mel_f_max(p));
        return -1;
    }
    in_bytes = spectrogram_input_bytes(p);
    if (in_bytes > max_frame_bytes) {
        gf_errorf(why, why_len,
                  "%" PRIu32 " %s samples are %" PRIu64
                  " bytes, more than max_frame_bytes %" PRIu64,
                  p->samples, sample_formats[p->sample_format], in_bytes, max_frame_bytes);
        return -1;
    }
    out_bytes = spectrogram_output_bytes_of(p);
    if (out_bytes > OUTPUT_PER_INPUT_MAX * max_frame_bytes) {
        gf_errorf(why, why_len,
                  "the output is %" PRIu64 " bytes, more than %u x max_frame_bytes %" PRIu64,
                  out_bytes, OUTPUT_PER_INPUT_MAX, max_frame_bytes);
        return -1;
    }
    return 0;
}

/* ---- the registry ----------------------------------------------------------- */

enum {
    KIND_ECHO,
    KIND_AFFINE,
    KIND_SINCOS,
    KIND_NORMALIZE_U8,
    KIND_IMAGE,
    KIND_SPECTROGRAM,
    KIND_COUNT
};

/* A kind's parameter table and how many entries it has. */
#define PARAM_TABLE(table) .params = (table), .param_count = COUNT_OF(table)

/* What every float32-array kind (affine, sincos) shares: its input is float32,
 * any whole number of elements comes back at its size, one element warms it
 * up. */
#define F32_ARRAY_RULES                                                                            \
    .input_f32 = 1, .elementwise = 1, .output_bytes = f32_output_bytes,                            \
    .max_output_bytes = same_max_output_bytes, .warmup_input_bytes = f32_warmup_input_bytes,       \
    .describe = f32_describe

static const gf_pipeline_kind kinds[KIND_COUNT] = {
    [KIND_ECHO] =
        {
            .name = "echo",
            .doc = "Returns the frame unchanged (a device copy); any length.",
            .params = NULL,
            .param_count = 0,
            .exact = 1,
            .elementwise = 1,
            .output_bytes = echo_output_bytes,
            .max_output_bytes = same_max_output_bytes,
            .warmup_input_bytes = echo_warmup_input_bytes,
            .check_params = echo_check_params,
            .reference = gf_echo_ref,
            .describe = echo_describe,
        },
    [KIND_AFFINE] =
        {
            .name = "affine",
            .doc = "Computes y = a*x + b on each float32 of the frame.",
            PARAM_TABLE(affine_params),
            F32_ARRAY_RULES,
            .exact = 1,
            .check_params = affine_check_params,
            .reference = gf_affine_ref,
        },
    [KIND_SINCOS] =
        {
            .name = "sincos",
            .doc = "Repeats v = sin(v)*cos(v) + v iters times on each float32 of the frame.",
            PARAM_TABLE(sincos_params),
            F32_ARRAY_RULES,
            .exact = 0,
            .abs_tolerance = SINCOS_ABS_TOLERANCE,
            .rel_tolerance = SINCOS_REL_TOLERANCE,
            .check_params = sincos_check_params,
            .reference = gf_sincos_ref,
        },
    [KIND_NORMALIZE_U8] =
        {
            .name = "normalize_u8",
            .doc = "Turns an interleaved RGB8 image into planar float32 (v/255 - mean) / std.",
            PARAM_TABLE(normalize_u8_params),
            .exact = 1,
            .output_bytes = normalize_u8_output_bytes,
            .max_output_bytes = normalize_u8_max_output_bytes,
            .warmup_input_bytes = normalize_u8_warmup_input_bytes,
            .check_params = normalize_u8_check_params,
            .reference = gf_normalize_u8_ref,
            .describe = normalize_u8_describe,
        },
    [KIND_IMAGE] =
        {
            .name = "image",
            .doc = "Converts, resizes, crops or letterboxes and normalises a camera frame "
                   "(RGB, BGR, RGBA, gray, NV12, I420, YUYV) into R, G, B planes or pixels.",
            PARAM_TABLE(image_params),
            .exact = 1,
            .device_api = 1,
            .output_bytes = image_output_bytes,
            .max_output_bytes = image_max_output_bytes,
            .warmup_input_bytes = image_warmup_input_bytes,
            .check_params = image_check_params,
            .reference = gf_image_ref,
            .describe = image_describe,
        },
    [KIND_SPECTROGRAM] =
        {
            .name = "spectrogram",
            .doc = "Turns mono PCM into a float32 (frequency or mel) x time spectrogram, "
                   "as torch.stft and torchaudio compute it.",
            PARAM_TABLE(spectrogram_params),
            .exact = 0,
            .abs_tolerance = SPECTROGRAM_ABS_TOLERANCE,
            .rel_tolerance = SPECTROGRAM_REL_TOLERANCE,
            .device_api = 1,
            .input_f32_for = spectrogram_input_f32,
            .output_bytes = spectrogram_output_bytes,
            .max_output_bytes = spectrogram_max_output_bytes,
            .warmup_input_bytes = spectrogram_warmup_input_bytes,
            .check_params = spectrogram_check_params,
            .reference = gf_spectrogram_ref,
            .describe = spectrogram_describe,
        },
};

const gf_pipeline_kind *gf_pipeline_kind_find(const char *name) {
    if (name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < KIND_COUNT; i++) {
        if (strcmp(kinds[i].name, name) == 0) {
            return &kinds[i];
        }
    }
    return NULL;
}

const gf_pipeline_kind *gf_pipeline_kinds(size_t *count) {
    *count = KIND_COUNT;
    return kinds;
}

/* Fields the kind does not read are zero.  Each descriptor's default goes to
 * its field (all three channels for F32x3); normalize_u8's mean and std, whose
 * channels differ, then get the ImageNet values. */
void gf_params_defaults(const gf_pipeline_kind *kind, gf_params *p) {
    assert(kind != NULL && p != NULL);
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < kind->param_count; i++) {
        const gf_param_desc *d = &kind->params[i];
        unsigned char *field = (unsigned char *)p + d->offset;
        float f = (float)d->default_value;
        uint32_t u = (uint32_t)d->default_value;

        switch (d->type) {
        case GF_PARAM_F32: memcpy(field, &f, sizeof f); break;
        case GF_PARAM_U32:
        case GF_PARAM_ENUM:
        case GF_PARAM_BOOL: memcpy(field, &u, sizeof u); break;
        case GF_PARAM_F32x3:
            for (unsigned c = 0; c < RGB_CHANNELS; c++) {
                memcpy(field + c * sizeof f, &f, sizeof f);
            }
            break;
        }
    }
    if (kind == &kinds[KIND_NORMALIZE_U8]) {
        memcpy(p->mean, imagenet_mean, sizeof p->mean);
        memcpy(p->std, imagenet_std, sizeof p->std);
    }
}

/* Bit for bit: the first differing byte, with both values. */
static int compare_exact(const unsigned char *got, const unsigned char *ref, size_t bytes,
                         char *why, size_t why_len) {
    if (bytes == 0 || memcmp(got, ref, bytes) == 0) {
        return 0;
    }
    for (size_t i = 0; i < bytes; i++) {
        if (got[i] != ref[i]) {
            gf_errorf(why, why_len, "byte offset %zu differs: got 0x%02x, expected 0x%02x", i,
                      (unsigned)got[i], (unsigned)ref[i]);
            return -1;
        }
    }
    return 0; /* unreachable: memcmp found a difference */
}

/* Elementwise float32 within abs + rel*|ref|; equal values (infinities of one
 * sign included) and two NaNs match, a NaN against a number does not. */
static int compare_f32(const gf_pipeline_kind *kind, const unsigned char *got,
                       const unsigned char *ref, size_t bytes, char *why, size_t why_len) {
    if (bytes % F32_BYTES != 0) {
        gf_errorf(why, why_len, "length %zu is not a multiple of %u (float32 elements)", bytes,
                  F32_BYTES);
        return -1;
    }
    for (size_t i = 0; i < bytes / F32_BYTES; i++) {
        float g, r;
        double diff, tol;

        memcpy(&g, got + i * F32_BYTES, sizeof g);
        memcpy(&r, ref + i * F32_BYTES, sizeof r);
        if (g == r || (isnan(g) && isnan(r))) {
            continue;
        }
        /* In double: neither the difference nor the bound can overflow.  An
         * infinity matches only itself (above), never a nearby bound. */
        diff = fabs((double)g - (double)r);
        tol = (double)kind->abs_tolerance + (double)kind->rel_tolerance * fabs((double)r);
        if (isinf(r) || !(diff <= tol)) {
            gf_errorf(why, why_len,
                      "element %zu (byte offset %zu): got %.9g, expected %.9g "
                      "(|diff| %.3g > tolerance %.3g)",
                      i, i * F32_BYTES, (double)g, (double)r, diff, tol);
            return -1;
        }
    }
    return 0;
}

int gf_pipeline_compare(const gf_pipeline_kind *kind, const void *got, const void *ref,
                        size_t bytes, char *why, size_t why_len) {
    assert(kind != NULL);
    if (kind->exact) {
        return compare_exact(got, ref, bytes, why, why_len);
    }
    return compare_f32(kind, got, ref, bytes, why, why_len);
}

/* ---- whole pipelines ------------------------------------------------------------ */

int64_t gf_pipeline_stage_lengths(const gf_pipeline *p, uint64_t in_bytes,
                                  uint64_t lengths[GF_STAGES_MAX], char *why, size_t why_len) {
    int64_t n = (int64_t)in_bytes;
    char rule[200];
    if (in_bytes > (uint64_t)INT64_MAX) {
        gf_errorf(why, why_len, "length %" PRIu64 " is too large", in_bytes);
        return -1;
    }
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *s = &p->stages[k];
        rule[0] = '\0';
        n = s->kind->output_bytes(&s->params, (uint64_t)n, rule, sizeof rule);
        if (n < 0) {
            if (p->stage_count == 1)
                gf_errorf(why, why_len, "%s", rule);
            else
                gf_errorf(why, why_len, "stage %" PRIu32 " (%s): %s", k, s->kind->name, rule);
            return -1;
        }
        lengths[k] = (uint64_t)n;
    }
    return n;
}

int64_t gf_pipeline_output_bytes(const gf_pipeline *p, uint64_t in_bytes, char *why,
                                 size_t why_len) {
    uint64_t lengths[GF_STAGES_MAX];
    return gf_pipeline_stage_lengths(p, in_bytes, lengths, why, why_len);
}

/* ---- stages and pipelines as tensors (frame_desc.c) --------------------------- */

void gf_stage_describe(const gf_pipeline *p, uint32_t k, gf_frame_desc *in, gf_frame_desc *out) {
    const gf_stage *s = &p->stages[k];
    gf_frame_desc first, unused;
    uint64_t lengths[GF_STAGES_MAX], in_bytes;
    char why[200];

    memset(in, 0, sizeof *in);
    memset(out, 0, sizeof *out);
    s->kind->describe(&s->params, in, out);
    if (k == 0) {
        first = *in;
    } else {
        memset(&first, 0, sizeof first);
        memset(&unused, 0, sizeof unused);
        p->stages[0].kind->describe(&p->stages[0].params, &first, &unused);
    }
    in_bytes = gf_frame_desc_bytes(&first);
    if (in_bytes == 0 || gf_pipeline_stage_lengths(p, in_bytes, lengths, why, sizeof why) < 0)
        return;
    /* Each resolves or stays as described: a kind whose length rule and
     * description disagree is shown as it describes itself. */
    (void)gf_frame_desc_resolve(in, k == 0 ? in_bytes : lengths[k - 1]);
    (void)gf_frame_desc_resolve(out, lengths[k]);
}

void gf_pipeline_describe(const gf_pipeline *p, gf_frame_desc *in, gf_frame_desc *out) {
    gf_frame_desc unused;
    gf_stage_describe(p, 0, in, &unused);
    gf_stage_describe(p, p->stage_count - 1, &unused, out);
}

uint64_t gf_pipeline_max_output_bytes(const gf_pipeline *p, uint64_t max_in_bytes) {
    uint64_t n = max_in_bytes;
    for (uint32_t k = 0; k < p->stage_count; k++)
        n = p->stages[k].kind->max_output_bytes(&p->stages[k].params, n);
    return n;
}

uint64_t gf_pipeline_max_scratch_bytes(const gf_pipeline *p, uint64_t max_in_bytes) {
    uint64_t n = max_in_bytes, most = 0;
    for (uint32_t k = 0; k + 1 < p->stage_count; k++) {
        n = p->stages[k].kind->max_output_bytes(&p->stages[k].params, n);
        if (n > most)
            most = n;
    }
    return most;
}

int gf_pipeline_elementwise(const gf_pipeline *p) {
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (!p->stages[k].kind->elementwise)
            return 0;
    return 1;
}

int gf_pipeline_input_f32(const gf_pipeline *p) {
    const gf_stage *first = &p->stages[0];
    return first->kind->input_f32_for ? first->kind->input_f32_for(&first->params)
                                      : first->kind->input_f32;
}

int gf_pipeline_has_reference(const gf_pipeline *p) {
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *s = &p->stages[k];
        if (gf_kind_is_plugin(s->kind)) {
            const gf_plugin *api = s->params.plugin ? gf_plugin_stage_api(s->params.plugin) : NULL;
            if (api == NULL || api->reference == NULL || !gf_plugin_stage_state(s->params.plugin))
                return 0;
        }
    }
    return 1;
}

void gf_pipeline_reference(const gf_pipeline *p, const void *in, uint64_t in_bytes,
                           const uint64_t lengths[GF_STAGES_MAX], void *out, void *const scratch[2],
                           uint64_t *stage_end_ns) {
    const void *src = in;
    uint64_t n = in_bytes;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *s = &p->stages[k];
        void *dst = k + 1 == p->stage_count ? out : scratch[k % 2];
        s->kind->reference(&s->params, src, (size_t)n, dst);
        if (stage_end_ns)
            stage_end_ns[k] = gf_now_ns();
        n = lengths[k];
        src = dst;
    }
}

int gf_pipeline_compare_result(const gf_pipeline *p, const void *got, const void *ref, size_t bytes,
                               char *why, size_t why_len) {
    gf_pipeline_kind rule = {.exact = 1};
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_pipeline_kind *kind = p->stages[k].kind;
        if (kind->exact)
            continue;
        rule.exact = 0;
        if (kind->abs_tolerance > rule.abs_tolerance)
            rule.abs_tolerance = kind->abs_tolerance;
        if (kind->rel_tolerance > rule.rel_tolerance)
            rule.rel_tolerance = kind->rel_tolerance;
    }
    return gf_pipeline_compare(&rule, got, ref, bytes, why, why_len);
}

const char *gf_pipeline_kinds_text(const gf_pipeline *p, char *buf, size_t len) {
    size_t o = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (uint32_t k = 0; k < p->stage_count && o < len; k++)
        o += (size_t)gf_errorf(buf + o, len - o, "%s%s", k ? "+" : "", p->stages[k].kind->name);
    return buf;
}

/* A plugin's stage, and a stage of a device_api kind once opened, hold a
 * plugin stage; every other stage's params.plugin is NULL. */
void gf_pipeline_retain(const gf_pipeline *p) {
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (p->stages[k].params.plugin != NULL)
            gf_plugin_stage_retain(p->stages[k].params.plugin);
}

void gf_pipeline_release(const gf_pipeline *p) {
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (p->stages[k].params.plugin != NULL)
            gf_plugin_stage_release(p->stages[k].params.plugin);
}

void gf_pipelines_free(gf_pipeline *pipelines, size_t count) {
    for (size_t i = 0; pipelines && i < count; i++)
        gf_pipeline_release(&pipelines[i]);
    free(pipelines);
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the repository's plugins (plugins/), loaded as gpuframed
 * loads them: dlopen, gf_plugin_entry.  The ABI version, names and parameter
 * tables; clamp's reference on literal values; mlp's reference against
 * literal values of a hand-made network and against an independent double
 * computation of networks from gf_mlp_make_weights; the stated tolerance
 * against float and TF32 summation of the demo network; every create()
 * error, by its text; with CUDA, mlp's device_open when its CUDA side,
 * gf_mlp_cuda.so, is missing or not the right one.  Needs no GPU
 * (test_plugin_builtin_gpu.c runs the device side), nor the CUDA toolkit's
 * libraries (tests/plugins_need_no_toolkit.sh runs it without them).
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuframe_plugin.h"
#include "plugin_util.h"
#include "runner.h"
#ifdef GF_HAVE_CUDA
#include "mlp_cuda.h" /* GF_MLP_CUDA_VERSION */
#endif

/* The env create() gets: the daemon's default 16 MiB frame limit. */
#define MAX_INPUT_BYTES (16u << 20)
#define PATH_BYTES      4096

/* The demo network of plugins/CMakeLists.txt. */
#define DEMO_IN  3072
#define DEMO_OUT 10
/* Its file: 28 header bytes, then W and b of 3072x256, 256x64, 64x10. */
#define DEMO_FILE_BYTES (28 + 4 * (3072 * 256 + 256 + 256 * 64 + 64 + 64 * 10 + 10))

/* The reference against the test's own double computation: it rounds each
 * hidden activation to float (relative 2^-24) and sums in double, so a few
 * layers of fan-in <= 64 agree to far better than this. */
#define NAIVE_ABS_TOLERANCE 1e-5
#define NAIVE_REL_TOLERANCE 1e-5

static const gf_plugin *clamp_plugin(void) {
    return plugin_load(GF_PLUGIN_EXAMPLE_SO, NULL);
}
static const gf_plugin *mlp_plugin(void) {
    return plugin_load(GF_PLUGIN_MLP_SO, NULL);
}

/* clamp's state for [lo, hi]; fails the test if create() refuses. */
static void *clamp_make(const gf_plugin *p, double lo, double hi) {
    const gf_plugin_value values[2] = {{.number = lo}, {.number = hi}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = "/"};
    char why[PLUGIN_WHY_BYTES] = "";
    void *state = p->create(values, &env, why, sizeof why);
    ck_assert_msg(state != NULL, "clamp create: %s", why);
    return state;
}

/* mlp's create() for `weights` (resolved against `config_dir`) and
 * `softmax`; NULL with why[] as the plugin wrote it. */
static void *mlp_try(const gf_plugin *p, const char *weights, const char *config_dir, int softmax,
                     char *why, size_t why_len) {
    const gf_plugin_value values[2] = {{.string = weights}, {.number = softmax}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = config_dir};
    why[0] = '\0';
    return p->create(values, &env, why, why_len);
}

static void *mlp_make(const gf_plugin *p, const char *weights, int softmax) {
    char why[PLUGIN_WHY_BYTES];
    void *state = mlp_try(p, weights, "/nonexistent", softmax, why, sizeof why);
    ck_assert_msg(state != NULL, "mlp create %s: %s", weights, why);
    return state;
}

static uint32_t f32_bits(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* ---- the ABI ---------------------------------------------------------------- */

/* Asserts that `p` describes its frames for `state` as one tensor in, of
 * in_dtype and the in_rank dims of in_dims, and one out likewise. */
static void check_describe(const gf_plugin *p, const void *state, uint32_t in_dtype,
                           uint32_t in_rank, const int64_t *in_dims, uint32_t out_dtype,
                           uint32_t out_rank, const int64_t *out_dims) {
    gf_frame_desc in = {0}, out = {0};
    char why[PLUGIN_WHY_BYTES] = "";
    ck_assert_int_eq(p->describe(state, &in, &out, why, sizeof why), 0);
    ck_assert_uint_eq(in.count, 1);
    ck_assert_uint_eq(in.tensors[0].dtype, in_dtype);
    ck_assert_uint_eq(in.tensors[0].rank, in_rank);
    for (uint32_t i = 0; i < in_rank; i++)
        ck_assert_int_eq(in.tensors[0].dims[i], in_dims[i]);
    ck_assert_uint_eq(out.count, 1);
    ck_assert_uint_eq(out.tensors[0].dtype, out_dtype);
    ck_assert_uint_eq(out.tensors[0].rank, out_rank);
    for (uint32_t i = 0; i < out_rank; i++)
        ck_assert_int_eq(out.tensors[0].dims[i], out_dims[i]);
}

/* The parts of the table every plugin must have, and the device functions
 * all present exactly when the build has CUDA. */
static void check_common(const gf_plugin *p) {
    ck_assert_uint_eq(p->abi_version, GF_PLUGIN_ABI_VERSION);
    ck_assert_uint_eq(p->abi_version, 3);
    ck_assert(p->describe != NULL);
    ck_assert_uint_eq(p->flags, 0); /* their launches are the daemon's to capture */
    ck_assert(p->doc != NULL);
    ck_assert(p->create != NULL);
    ck_assert(p->destroy != NULL);
    ck_assert(p->output_bytes != NULL);
    ck_assert(p->max_output_bytes != NULL);
    ck_assert(p->reference != NULL);
    ck_assert_int_eq(p->input_f32, 1);
#ifdef GF_HAVE_CUDA
    ck_assert(p->device_open != NULL);
    ck_assert(p->device_close != NULL);
    ck_assert(p->launch != NULL);
#else
    ck_assert(p->device_open == NULL);
    ck_assert(p->device_close == NULL);
    ck_assert(p->launch == NULL);
#endif
    for (uint32_t i = 0; i < p->param_count; i++) {
        ck_assert_ptr_nonnull(p->params[i].key);
        ck_assert_ptr_nonnull(p->params[i].doc);
        ck_assert_msg(strspn(p->params[i].key, "abcdefghijklmnopqrstuvwxyz0123456789_") ==
                          strlen(p->params[i].key),
                      "key %s", p->params[i].key);
    }
}

START_TEST(test_clamp_table) {
    void *handle;
    const gf_plugin *p = plugin_load(GF_PLUGIN_EXAMPLE_SO, &handle);

    check_common(p);
    ck_assert_str_eq(p->name, "clamp");
    /* Elementwise: the daemon runs a batch of them as one launch already. */
    ck_assert(p->launch_batch == NULL);
    ck_assert_int_eq(p->exact, 1);
    ck_assert_uint_eq(p->param_count, 2);
    ck_assert_str_eq(p->params[0].key, "lo");
    ck_assert_int_eq(p->params[0].type, GF_PLUGIN_NUMBER);
    ck_assert_int_eq(p->params[0].required, 0);
    ck_assert_double_eq(p->params[0].default_number, 0.0);
    ck_assert_str_eq(p->params[1].key, "hi");
    ck_assert_int_eq(p->params[1].type, GF_PLUGIN_NUMBER);
    ck_assert_int_eq(p->params[1].required, 0);
    ck_assert_double_eq(p->params[1].default_number, 1.0);
    /* -fvisibility=hidden: the launcher shared by clamp.c and clamp.cu is
     * not exported. */
    ck_assert_ptr_null(dlsym(handle, "gf__clamp_launch"));
}
END_TEST

START_TEST(test_mlp_table) {
    void *handle;
    const gf_plugin *p = plugin_load(GF_PLUGIN_MLP_SO, &handle);

    check_common(p);
    ck_assert_str_eq(p->name, "mlp");
    /* Batched launches with the CUDA side: one SGEMM a layer per batch. */
#ifdef GF_HAVE_CUDA
    ck_assert(p->launch_batch != NULL);
    ck_assert_uint_eq(p->max_batch_frames, 1024);
#else
    ck_assert(p->launch_batch == NULL);
#endif
    ck_assert_int_eq(p->exact, 0);
    ck_assert_float_eq(p->abs_tolerance, 1e-5f);
    ck_assert_float_eq(p->rel_tolerance, 1e-5f);
    ck_assert_uint_eq(p->param_count, 2);
    ck_assert_str_eq(p->params[0].key, "weights");
    ck_assert_int_eq(p->params[0].type, GF_PLUGIN_STRING);
    ck_assert_int_eq(p->params[0].required, 1);
    ck_assert_double_eq(p->params[0].min, 1);
    ck_assert_str_eq(p->params[1].key, "softmax");
    ck_assert_int_eq(p->params[1].type, GF_PLUGIN_INTEGER);
    ck_assert_int_eq(p->params[1].required, 0);
    ck_assert_double_eq(p->params[1].default_number, 0);
    ck_assert_double_eq(p->params[1].min, 0);
    ck_assert_double_eq(p->params[1].max, 1);
    ck_assert_ptr_null(dlsym(handle, "gf__mlp_load"));
    ck_assert_ptr_null(dlsym(handle, "gf__mlp_reference"));
}
END_TEST

/* ---- clamp ------------------------------------------------------------------ */

START_TEST(test_clamp_reference_values) {
    const gf_plugin *p = clamp_plugin();
    void *state = clamp_make(p, -1.0, 2.0);
    const float in[] = {-3.0f, -1.0f,     -0.5f,    0.0f, 1.5f,  2.0f,  2.5f,
                        1e30f, -INFINITY, INFINITY, NAN,  -0.0f, 1e-45f};
    const float want[] = {-1.0f, -1.0f, -0.5f, 0.0f, 1.5f,  2.0f,  2.0f,
                          2.0f,  -1.0f, 2.0f,  NAN,  -0.0f, 1e-45f};
    const size_t count = sizeof in / sizeof in[0];
    /* One byte off: frames need not be float-aligned. */
    unsigned char in_bytes[sizeof in + 1], out_bytes[sizeof in + 1 + 4];

    memcpy(in_bytes + 1, in, sizeof in);
    memset(out_bytes, 0xA5, sizeof out_bytes);
    p->reference(state, in_bytes + 1, sizeof in, out_bytes + 1);
    for (size_t i = 0; i < count; i++) {
        float got;
        memcpy(&got, out_bytes + 1 + 4 * i, sizeof got);
        /* Bit for bit: a NaN stays the same NaN, -0 stays -0. */
        ck_assert_msg(f32_bits(got) == f32_bits(want[i]), "element %zu: %a, want %a", i,
                      (double)got, (double)want[i]);
    }
    for (size_t i = 1 + sizeof in; i < sizeof out_bytes; i++)
        ck_assert_uint_eq(out_bytes[i], 0xA5); /* nothing past the output */
    p->destroy(state);
}
END_TEST

START_TEST(test_clamp_lengths) {
    const gf_plugin *p = clamp_plugin();
    void *state = clamp_make(p, 0.0, 1.0);
    char why[PLUGIN_WHY_BYTES] = "";

    ck_assert_int_eq(p->output_bytes(state, 0, why, sizeof why), 0);
    ck_assert_int_eq(p->output_bytes(state, 12, why, sizeof why), 12);
    ck_assert_int_eq(p->output_bytes(state, 10, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 10 is not a multiple of 4");
    ck_assert_uint_eq(p->max_output_bytes(state, 10), 8);
    ck_assert_uint_eq(p->max_output_bytes(state, MAX_INPUT_BYTES), MAX_INPUT_BYTES);
    check_describe(p, state, GF_DTYPE_FLOAT32, 1, (int64_t[]){-1}, GF_DTYPE_FLOAT32, 1,
                   (int64_t[]){-1});
    p->destroy(state);
}
END_TEST

START_TEST(test_clamp_create_refuses_lo_above_hi) {
    const gf_plugin *p = clamp_plugin();
    const gf_plugin_value values[2] = {{.number = 2.0}, {.number = 1.0}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = "/"};
    char why[PLUGIN_WHY_BYTES] = "";

    ck_assert_ptr_null(p->create(values, &env, why, sizeof why));
    ck_assert_str_eq(why, "lo (2) is above hi (1)");
    /* lo == hi is a constant function, and allowed. */
    p->destroy(clamp_make(p, 0.5, 0.5));
}
END_TEST

/* ---- mlp: a hand-made network ------------------------------------------------ */

/* 3 -> 2 (ReLU) -> 2, every value a short binary fraction, so every sum is
 * exact in float and the outputs below are exact literals. */
static const float HAND_W1[] = {1.0f, -2.0f, 0.5f, /**/ 0.25f, 1.0f, -1.0f};
static const float HAND_B1[] = {0.5f, -1.0f};
static const float HAND_W2[] = {2.0f, -1.0f, /**/ 0.5f, 0.25f};
static const float HAND_B2[] = {-1.0f, 0.125f};
/* Two input vectors, and what the network gives for them:
 *   x = (2, 0.5, 1):  hidden (2, -1) -> ReLU (2, 0)  -> (3, 1.125)
 *   x = (0, 1, -2):   hidden (-2.5, 2) -> (0, 2)     -> (-3, 0.625) */
static const float HAND_IN[] = {2.0f, 0.5f, 1.0f, 0.0f, 1.0f, -2.0f};
static const float HAND_OUT[] = {3.0f, 1.125f, -3.0f, 0.625f};
/* With softmax: 1 / (1 + e^-(3 - 1.125)) and 1 / (1 + e^(3.625)), etc. */
static const double HAND_PROB[] = {0.8670357598021706, 0.13296424019782938, 0.02595735719779685,
                                   0.9740426428022031};
/* Header 8 + 4 + 3 * 4, then 2*3 + 2 + 2*2 + 2 floats. */
#define HAND_FILE_BYTES 80

/* The hand-made network's file bytes, malloc'd; length in *len. */
static unsigned char *hand_file(size_t *len) {
    weights_file wt = {.layer_count = 2, .dims = {3, 2, 2}};
    wt.w[0] = (float *)HAND_W1;
    wt.b[0] = (float *)HAND_B1;
    wt.w[1] = (float *)HAND_W2;
    wt.b[1] = (float *)HAND_B2;
    unsigned char *bytes = weights_serialise(&wt, len);
    ck_assert_uint_eq(*len, HAND_FILE_BYTES);
    return bytes;
}

/* Writes the hand-made network as `dir`/`name`, its path to path[]. */
static void hand_write(const char *dir, const char *name, char *path, size_t path_len) {
    size_t len;
    unsigned char *bytes = hand_file(&len);
    path_join(path, path_len, dir, name);
    file_write(path, bytes, len);
    free(bytes);
}

START_TEST(test_mlp_hand_network_values) {
    const gf_plugin *p = mlp_plugin();
    char dir[PATH_BYTES], path[PATH_BYTES];
    float out[4];
    /* Unaligned in and out: one and three bytes off. */
    unsigned char in_bytes[sizeof HAND_IN + 1], out_bytes[sizeof out + 3];

    scratch_dir_make(dir, sizeof dir);
    hand_write(dir, "hand.gfw", path, sizeof path);
    void *state = mlp_make(p, path, 0);
    p->reference(state, HAND_IN, sizeof HAND_IN, out);
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(f32_bits(out[i]) == f32_bits(HAND_OUT[i]), "out[%zu] = %a, want %a", i,
                      (double)out[i], (double)HAND_OUT[i]);
    memcpy(in_bytes + 1, HAND_IN, sizeof HAND_IN);
    p->reference(state, in_bytes + 1, sizeof HAND_IN, out_bytes + 3);
    ck_assert_mem_eq(out_bytes + 3, HAND_OUT, sizeof HAND_OUT);
    p->destroy(state);

    state = mlp_make(p, path, 1);
    p->reference(state, HAND_IN, sizeof HAND_IN, out);
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(fabs(out[i] - HAND_PROB[i]) <= 1e-6, "prob[%zu] = %.9g, want %.9g", i,
                      (double)out[i], HAND_PROB[i]);
    p->destroy(state);
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(test_mlp_lengths) {
    const gf_plugin *p = mlp_plugin();
    char dir[PATH_BYTES], path[PATH_BYTES], why[PLUGIN_WHY_BYTES] = "";

    scratch_dir_make(dir, sizeof dir);
    hand_write(dir, "hand.gfw", path, sizeof path);
    void *state = mlp_make(p, path, 0);
    ck_assert_int_eq(p->output_bytes(state, 12, why, sizeof why), 8);
    ck_assert_int_eq(p->output_bytes(state, 24, why, sizeof why), 16);
    ck_assert_int_eq(p->output_bytes(state, 0, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 0 is not a positive multiple of 12 (vectors of 3 float32)");
    ck_assert_int_eq(p->output_bytes(state, 20, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 20 is not a positive multiple of 12 (vectors of 3 float32)");
    ck_assert_uint_eq(p->max_output_bytes(state, 100), 8 * 8); /* 8 vectors of 12 bytes fit */
    ck_assert_uint_eq(p->max_output_bytes(state, 11), 0);

    check_describe(p, state, GF_DTYPE_FLOAT32, 2, (int64_t[]){-1, 3}, GF_DTYPE_FLOAT32, 2,
                   (int64_t[]){-1, 2});
    p->destroy(state);

    state = mlp_make(p, GF_MLP_DEMO_WEIGHTS, 0);
    check_describe(p, state, GF_DTYPE_FLOAT32, 2, (int64_t[]){-1, DEMO_IN}, GF_DTYPE_FLOAT32, 2,
                   (int64_t[]){-1, DEMO_OUT});
    ck_assert_int_eq(p->output_bytes(state, 2 * 4 * DEMO_IN, why, sizeof why), 2 * 4 * DEMO_OUT);
    ck_assert_int_eq(p->output_bytes(state, 100, why, sizeof why), -1);
    ck_assert_str_eq(why,
                     "length 100 is not a positive multiple of 12288 (vectors of 3072 float32)");
    /* 16 MiB holds 1365 vectors of 12288 bytes: 1365 x 40 bytes out. */
    ck_assert_uint_eq(p->max_output_bytes(state, MAX_INPUT_BYTES), 1365 * 40);
    p->destroy(state);
    scratch_dir_remove(dir);
}
END_TEST

/* ---- mlp: generated networks against an independent computation -------------- */

/* y = the network of `wt` on `count` vectors x, all in double: ReLU between
 * layers, softmax at the end when asked. */
static void naive_forward(const weights_file *wt, const float *x, size_t count, int softmax,
                          double *y) {
    const uint32_t in_dim = wt->dims[0], out_dim = wt->dims[wt->layer_count];
    double *a = malloc(sizeof(double) * 65536), *b = malloc(sizeof(double) * 65536);

    ck_assert(a != NULL && b != NULL);
    for (size_t v = 0; v < count; v++) {
        for (uint32_t i = 0; i < in_dim; i++)
            a[i] = x[v * in_dim + i];
        for (uint32_t l = 0; l < wt->layer_count; l++) {
            const uint32_t k = wt->dims[l], m = wt->dims[l + 1];
            for (uint32_t o = 0; o < m; o++) {
                double s = wt->b[l][o];
                for (uint32_t i = 0; i < k; i++)
                    s += (double)wt->w[l][(size_t)o * k + i] * a[i];
                b[o] = l + 1 < wt->layer_count && s < 0 ? 0 : s;
            }
            double *t = a;
            a = b;
            b = t;
        }
        if (softmax) {
            double max = a[0], sum = 0;
            for (uint32_t o = 1; o < out_dim; o++)
                max = a[o] > max ? a[o] : max;
            for (uint32_t o = 0; o < out_dim; o++)
                sum += exp(a[o] - max);
            for (uint32_t o = 0; o < out_dim; o++)
                a[o] = exp(a[o] - max) / sum;
        }
        memcpy(y + v * out_dim, a, sizeof(double) * out_dim);
    }
    free(a);
    free(b);
}

/* Networks for the comparison: widths, vectors, seed. */
static const struct {
    uint32_t dims[9];
    size_t dim_count, vectors;
} GEN_NETS[] = {
    {{5, 3}, 2, 7},                        /* one layer: no hidden buffer */
    {{16, 32, 4}, 3, 9},                   /* two layers                  */
    {{7, 64, 33, 64, 2}, 5, 5},            /* four, odd widths            */
    {{3, 4, 5, 6, 7, 8, 9, 10, 11}, 9, 3}, /* eight, the most             */
};

START_TEST(test_mlp_generated_against_naive) {
    const gf_plugin *p = mlp_plugin();
    char dir[PATH_BYTES], path[PATH_BYTES];
    const size_t n = (size_t)_i / 2;
    const int softmax = _i % 2;
    size_t len;
    weights_file wt;

    scratch_dir_make(dir, sizeof dir);
    path_join(path, sizeof path, dir, "gen.gfw");
    ck_assert_int_eq(make_weights(path, 100 + n, GEN_NETS[n].dims, GEN_NETS[n].dim_count), 0);
    unsigned char *bytes = file_read(path, &len);
    weights_parse(bytes, len, &wt);
    ck_assert_uint_eq(wt.layer_count, GEN_NETS[n].dim_count - 1);

    const uint32_t in_dim = wt.dims[0], out_dim = wt.dims[wt.layer_count];
    const size_t vectors = GEN_NETS[n].vectors;
    float *x = malloc(sizeof(float) * in_dim * vectors);
    float *got = malloc(sizeof(float) * out_dim * vectors);
    double *want = malloc(sizeof(double) * out_dim * vectors);
    ck_assert(x != NULL && got != NULL && want != NULL);
    fill_uniform(x, (size_t)in_dim * vectors, 2.0f, 7 + n);

    void *state = mlp_make(p, path, softmax);
    p->reference(state, x, sizeof(float) * in_dim * vectors, got);
    naive_forward(&wt, x, vectors, softmax, want);
    int nonzero = 0;
    for (size_t i = 0; i < (size_t)out_dim * vectors; i++) {
        const double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= NAIVE_ABS_TOLERANCE + NAIVE_REL_TOLERANCE * fabs(want[i]),
                      "net %zu softmax %d: out[%zu] = %.9g, naive %.9g", n, softmax, i,
                      (double)got[i], want[i]);
        nonzero |= got[i] != 0.0f;
    }
    ck_assert(nonzero); /* not all ReLU'd away */
    p->destroy(state);
    free(x);
    free(got);
    free(want);
    free(bytes);
    weights_free(&wt);
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(test_make_weights_deterministic) {
    const uint32_t dims[] = {6, 5, 4};
    char dir[PATH_BYTES], a[PATH_BYTES], b[PATH_BYTES], c[PATH_BYTES];
    size_t len_a, len_b, len_c;

    scratch_dir_make(dir, sizeof dir);
    path_join(a, sizeof a, dir, "a.gfw");
    path_join(b, sizeof b, dir, "b.gfw");
    path_join(c, sizeof c, dir, "c.gfw");
    ck_assert_int_eq(make_weights(a, 42, dims, 3), 0);
    ck_assert_int_eq(make_weights(b, 42, dims, 3), 0);
    ck_assert_int_eq(make_weights(c, 43, dims, 3), 0);
    unsigned char *ba = file_read(a, &len_a), *bb = file_read(b, &len_b),
                  *bc = file_read(c, &len_c);
    /* 8 + 4 + 3 * 4 header bytes, then 5*6 + 5 + 4*5 + 4 floats. */
    ck_assert_uint_eq(len_a, 24 + 4 * (30 + 5 + 20 + 4));
    ck_assert_uint_eq(len_b, len_a);
    ck_assert_uint_eq(len_c, len_a);
    ck_assert_mem_eq(ba, bb, len_a);
    ck_assert(memcmp(ba + 24, bc + 24, len_a - 24) != 0);
    /* Every value within 1/sqrt(fan-in). */
    weights_file wt;
    weights_parse(ba, len_a, &wt);
    for (size_t i = 0; i < 30; i++)
        ck_assert(fabsf(wt.w[0][i]) <= 1.0f / sqrtf(6.0f));
    weights_free(&wt);

    /* Bad arguments: exit status 2, and no file. */
    const uint32_t zero[] = {6, 0};
    const uint32_t wide_hidden[] = {6, 4097, 2};
    path_join(a, sizeof a, dir, "bad.gfw");
    ck_assert_int_eq(make_weights(a, 1, zero, 2), 2);
    ck_assert_int_eq(make_weights(a, 1, wide_hidden, 3), 2);
    ck_assert_int_eq(make_weights(a, 1, dims, 1), 2);
    ck_assert_int_eq(access(a, F_OK), -1);
    free(ba);
    free(bb);
    free(bc);
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(test_demo_weights_file) {
    const gf_plugin *p = mlp_plugin();
    size_t len;
    weights_file wt;
    unsigned char *bytes = file_read(GF_MLP_DEMO_WEIGHTS, &len);

    ck_assert_uint_eq(len, DEMO_FILE_BYTES);
    weights_parse(bytes, len, &wt);
    ck_assert_uint_eq(wt.layer_count, 3);
    ck_assert_uint_eq(wt.dims[0], 3072);
    ck_assert_uint_eq(wt.dims[1], 256);
    ck_assert_uint_eq(wt.dims[2], 64);
    ck_assert_uint_eq(wt.dims[3], 10);
    p->destroy(mlp_make(p, GF_MLP_DEMO_WEIGHTS, 0));
    weights_free(&wt);
    free(bytes);
}
END_TEST

/*
 * The tolerance the plugin states, against the demo network computed in
 * float: summed in index order and in reverse (as a GPU might, but worse:
 * sequential summation has the largest error bound of the common orders),
 * with float bias and ReLU, must use at most a tenth of it; with products of
 * operands rounded to TF32's 10 mantissa bits (what cuBLAS would do in
 * CUBLAS_TF32_TENSOR_OP_MATH) it must fail.  Inputs as `gpuframe` makes up
 * float frames, uniform in [-4, 4].  Prints how much of the tolerance each
 * uses.
 */
enum float_order { SEQUENTIAL, REVERSE, TF32_SEQUENTIAL };

static float round_tf32(float v) {
    uint32_t bits = f32_bits(v);
    bits = (bits + 0x1000u) & ~0x1FFFu; /* 23 - 10 = 13 low bits, to nearest */
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void float_forward(const weights_file *wt, const float *x, enum float_order order,
                          float *y) {
    float a[DEMO_IN], b[DEMO_IN];

    memcpy(a, x, sizeof(float) * wt->dims[0]);
    for (uint32_t l = 0; l < wt->layer_count; l++) {
        const uint32_t k = wt->dims[l], m = wt->dims[l + 1];
        for (uint32_t o = 0; o < m; o++) {
            float s = 0.0f;
            for (uint32_t j = 0; j < k; j++) {
                const uint32_t i = order == REVERSE ? k - 1 - j : j;
                const float w = wt->w[l][(size_t)o * k + i];
                s += order == TF32_SEQUENTIAL ? round_tf32(w) * round_tf32(a[i]) : w * a[i];
            }
            s += wt->b[l][o];
            b[o] = l + 1 < wt->layer_count && !(s > 0.0f) ? 0.0f : s;
        }
        memcpy(a, b, sizeof(float) * m);
    }
    memcpy(y, a, sizeof(float) * wt->dims[wt->layer_count]);
}

#define DEMO_VECTORS 32
/* The range of `gpuframe`'s made-up float frames (client/gpuframe_stream_frames.c). */
#define CLIENT_F32_LIMIT 4.0f

START_TEST(test_mlp_tolerance_against_float_orders) {
    static const char *const names[] = {"float32 sequential", "float32 reverse", "TF32 sequential"};
    const gf_plugin *p = mlp_plugin();
    size_t len;
    weights_file wt;
    unsigned char *bytes = file_read(GF_MLP_DEMO_WEIGHTS, &len);
    float *x = malloc(sizeof(float) * DEMO_IN * DEMO_VECTORS);
    float ref[DEMO_OUT * DEMO_VECTORS], y[DEMO_OUT];

    ck_assert_ptr_nonnull(x);
    weights_parse(bytes, len, &wt);
    fill_uniform(x, DEMO_IN * DEMO_VECTORS, CLIENT_F32_LIMIT, 99);
    void *state = mlp_make(p, GF_MLP_DEMO_WEIGHTS, 0);
    p->reference(state, x, sizeof(float) * DEMO_IN * DEMO_VECTORS, ref);
    for (int order = SEQUENTIAL; order <= TF32_SEQUENTIAL; order++) {
        double worst = 0.0, worst_abs = 0.0;
        for (size_t v = 0; v < DEMO_VECTORS; v++) {
            float_forward(&wt, x + v * DEMO_IN, (enum float_order)order, y);
            for (size_t o = 0; o < DEMO_OUT; o++) {
                const double r = ref[v * DEMO_OUT + o], err = fabs((double)y[o] - r);
                const double allowed = p->abs_tolerance + p->rel_tolerance * fabs(r);
                worst = err / allowed > worst ? err / allowed : worst;
                worst_abs = err > worst_abs ? err : worst_abs;
            }
        }
        printf("mlp demo, %s vs reference: max |err| %.3g, %.3g of the tolerance\n", names[order],
               worst_abs, worst);
        if (order == TF32_SEQUENTIAL)
            ck_assert_msg(worst > 1.0, "TF32 within the tolerance (%.3g of it)", worst);
        else
            ck_assert_msg(worst <= 0.1, "%s uses %.3g of the tolerance", names[order], worst);
    }
    p->destroy(state);
    weights_free(&wt);
    free(bytes);
    free(x);
}
END_TEST

/* Several threads on one network at once get what one thread gets. */
#define THREADS 4
struct ref_job {
    const gf_plugin *p;
    const void *state;
    const float *x;
    float *y;
};

static void *ref_thread(void *arg) {
    struct ref_job *j = arg;
    for (int round = 0; round < 8; round++)
        j->p->reference(j->state, j->x, sizeof(float) * DEMO_IN * 4, j->y + round * DEMO_OUT * 4);
    return NULL;
}

START_TEST(test_mlp_reference_concurrent) {
    const gf_plugin *p = mlp_plugin();
    void *state = mlp_make(p, GF_MLP_DEMO_WEIGHTS, 1);
    float *x = malloc(sizeof(float) * DEMO_IN * 4 * THREADS);
    float alone[THREADS][DEMO_OUT * 4], together[THREADS][DEMO_OUT * 4 * 8];
    pthread_t threads[THREADS];
    struct ref_job jobs[THREADS];

    ck_assert_ptr_nonnull(x);
    fill_uniform(x, DEMO_IN * 4 * THREADS, 2.0f, 5);
    for (int t = 0; t < THREADS; t++)
        p->reference(state, x + t * DEMO_IN * 4, sizeof(float) * DEMO_IN * 4, alone[t]);
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct ref_job){p, state, x + t * DEMO_IN * 4, together[t]};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, ref_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
    for (int t = 0; t < THREADS; t++)
        for (int round = 0; round < 8; round++)
            ck_assert_mem_eq(together[t] + round * DEMO_OUT * 4, alone[t], sizeof alone[t]);
    p->destroy(state);
    free(x);
}
END_TEST

/* ---- mlp: create() errors ------------------------------------------------------ */

/* Writes `len` bytes as `dir`/`name` and asserts create() refuses them with
 * "weights: <path>: <want>". */
static void expect_refused(const gf_plugin *p, const char *dir, const char *name, const void *bytes,
                           size_t len, const char *want) {
    char path[PATH_BYTES], why[PLUGIN_WHY_BYTES], expected[PATH_BYTES + 256];

    path_join(path, sizeof path, dir, name);
    file_write(path, bytes, len);
    ck_assert_ptr_null(mlp_try(p, path, dir, 0, why, sizeof why));
    snprintf(expected, sizeof expected, "weights: %s: %s", path, want);
    ck_assert_str_eq(why, expected);
}

static void put_u32_le(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A header alone: magic, `layer_count`, and the `dim_count` widths. */
static size_t header(unsigned char *buf, uint32_t layer_count, const uint32_t *dims,
                     size_t dim_count) {
    memcpy(buf, "GFMLP1\0\0", 8);
    put_u32_le(buf + 8, layer_count);
    for (size_t i = 0; i < dim_count; i++)
        put_u32_le(buf + 12 + 4 * i, dims[i]);
    return 12 + 4 * dim_count;
}

START_TEST(test_mlp_create_file_errors) {
    const gf_plugin *p = mlp_plugin();
    char dir[PATH_BYTES], path[PATH_BYTES], why[PLUGIN_WHY_BYTES], want[PATH_BYTES + 256];

    scratch_dir_make(dir, sizeof dir);

    /* Missing, absolute and relative (resolved against config_dir). */
    path_join(path, sizeof path, dir, "missing.gfw");
    ck_assert_ptr_null(mlp_try(p, path, "/", 0, why, sizeof why));
    snprintf(want, sizeof want, "weights: %s/missing.gfw: No such file or directory", dir);
    ck_assert_str_eq(why, want);
    ck_assert_ptr_null(mlp_try(p, "sub/none.gfw", dir, 0, why, sizeof why));
    snprintf(want, sizeof want, "weights: %s/sub/none.gfw: No such file or directory", dir);
    ck_assert_str_eq(why, want);
    ck_assert_ptr_null(mlp_try(p, "none.gfw", NULL, 0, why, sizeof why));
    ck_assert_str_eq(why, "weights: none.gfw: a relative path, and no configuration directory "
                          "to resolve it in");

    /* A directory. */
    ck_assert_ptr_null(mlp_try(p, dir, "/", 0, why, sizeof why));
    snprintf(want, sizeof want, "weights: %s: not a regular file", dir);
    ck_assert_str_eq(why, want);

    /* Unreadable: only a user other than root is refused. */
    hand_write(dir, "secret.gfw", path, sizeof path);
    ck_assert_int_eq(chmod(path, 0), 0);
    if (geteuid() != 0) {
        ck_assert_ptr_null(mlp_try(p, path, "/", 0, why, sizeof why));
        snprintf(want, sizeof want, "weights: %s: Permission denied", path);
        ck_assert_str_eq(why, want);
    }

    /* A relative path that exists is found in config_dir. */
    hand_write(dir, "hand.gfw", path, sizeof path);
    void *state = mlp_try(p, "hand.gfw", dir, 0, why, sizeof why);
    ck_assert_msg(state != NULL, "%s", why);
    p->destroy(state);

    /* A short why[] is cut, and still a string. */
    path_join(path, sizeof path, dir, "missing.gfw");
    ck_assert_ptr_null(mlp_try(p, path, "/", 0, why, 12));
    snprintf(want, sizeof want, "weights: %s", path);
    ck_assert_uint_eq(strlen(why), 11);
    ck_assert_mem_eq(why, want, 11);
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(test_mlp_create_format_errors) {
    const gf_plugin *p = mlp_plugin();
    unsigned char buf[256];
    char dir[PATH_BYTES];
    size_t len;

    scratch_dir_make(dir, sizeof dir);
    expect_refused(p, dir, "empty.gfw", "", 0, "empty file");
    expect_refused(p, dir, "magic.gfw", "GFMLP2\0\0\1\0\0\0\1\0\0\0\1\0\0\0\0\0\0\0\0\0\0\0", 28,
                   "bad magic: not a GFMLP1 weights file");
    expect_refused(p, dir, "short.gfw", "GFMLP1\0\0\1\0", 10,
                   "truncated header: the file has 10 bytes");
    /* Three layers announced, the file ends after two widths. */
    const uint32_t two[] = {4, 4};
    len = header(buf, 3, two, 2);
    expect_refused(p, dir, "dims.gfw", buf, len, "truncated header: the file has 20 bytes");

    len = header(buf, 0, two, 2);
    expect_refused(p, dir, "zero.gfw", buf, len, "layer count 0 is not within 1..8");
    const uint32_t ten[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    len = header(buf, 9, ten, 10);
    expect_refused(p, dir, "nine.gfw", buf, len, "layer count 9 is not within 1..8");

    const uint32_t dim0[] = {4, 0, 2};
    len = header(buf, 2, dim0, 3);
    expect_refused(p, dir, "dim0.gfw", buf, len, "width dims[1] = 0 is not within 1..65536");
    const uint32_t wide_in[] = {65537, 2};
    len = header(buf, 1, wide_in, 2);
    expect_refused(p, dir, "wide.gfw", buf, len, "width dims[0] = 65537 is not within 1..65536");
    const uint32_t wide_hidden[] = {4, 4097, 2};
    len = header(buf, 2, wide_hidden, 3);
    expect_refused(p, dir, "hidden.gfw", buf, len, "hidden width dims[1] = 4097 is above 4096");
    /* 65536*4096 + 4096 + 4096*65536 + 65536 floats: about 2 GiB. */
    const uint32_t huge[] = {65536, 4096, 65536};
    len = header(buf, 2, huge, 3);
    expect_refused(p, dir, "huge.gfw", buf, len,
                   "2147762176 bytes of weights and biases are above the limit of 1073741824");

    /* The hand-made network one byte short, one byte long. */
    unsigned char *hand = hand_file(&len);
    expect_refused(p, dir, "cut.gfw", hand, len - 1,
                   "truncated: 79 bytes where widths 3x2x2 need 80");
    unsigned char *longer = malloc(len + 1);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, hand, len);
    longer[len] = 0;
    expect_refused(p, dir, "long.gfw", longer, len + 1,
                   "trailing bytes: 81 bytes where widths 3x2x2 need 80");
    /* Not finite: W[1][0] of layer 1 (a NaN), then b[1] of layer 0 (inf). */
    const float nan = NAN, inf = INFINITY;
    memcpy(longer, hand, len);
    memcpy(longer + 24 + 4 * (6 + 2 + 2), &nan, 4);
    expect_refused(p, dir, "nan.gfw", longer, len, "layer 1 W[1][0] is not finite");
    memcpy(longer, hand, len);
    memcpy(longer + 24 + 4 * (6 + 1), &inf, 4);
    expect_refused(p, dir, "inf.gfw", longer, len, "layer 0 b[1] is not finite");
    free(longer);
    free(hand);
    scratch_dir_remove(dir);
}
END_TEST

/* The hidden limit binds hidden layers only: 2 -> 4097 as the one layer is
 * accepted. */
START_TEST(test_mlp_wide_output_accepted) {
    const gf_plugin *p = mlp_plugin();
    const uint32_t dims[] = {2, 4097};
    char dir[PATH_BYTES], path[PATH_BYTES];

    scratch_dir_make(dir, sizeof dir);
    path_join(path, sizeof path, dir, "wide.gfw");
    ck_assert_int_eq(make_weights(path, 3, dims, 2), 0);
    p->destroy(mlp_make(p, path, 0));
    scratch_dir_remove(dir);
}
END_TEST

#ifdef GF_HAVE_CUDA
/* ---- mlp's CUDA side, gf_mlp_cuda.so ----------------------------------------- */

/* gf_mlp.so copied into a new directory under the build tree (objects may
 * be loaded from there, unlike a noexec /tmp) with, when `companion` is not
 * NULL, that file beside it as gf_mlp_cuda.so; then that gf_mlp.so's
 * device_open on the demo network, which must fail before any CUDA call.
 * Its reason goes to why[PLUGIN_WHY_BYTES], the companion's path (the
 * directory's, symbolic links resolved) to path[PATH_BYTES]. */
static void companion_refusal(const char *companion, char *path, char *why) {
    char dir[PATH_BYTES], real_dir[PATH_BYTES], copy[PATH_BYTES];
    unsigned char *bytes;
    size_t len;

    path_join(dir, sizeof dir, GF_TEST_BINARY_DIR, "gf_mlp_copy.XXXXXX");
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    ck_assert(realpath(dir, real_dir) != NULL);
    bytes = file_read(GF_PLUGIN_MLP_SO, &len);
    path_join(copy, sizeof copy, dir, "gf_mlp.so");
    file_write(copy, bytes, len);
    free(bytes);
    /* Another file than the build's gf_mlp.so: dlopen loads it afresh,
     * and its dladdr gives this directory. */
    const gf_plugin *p = plugin_load(copy, NULL);
    if (companion != NULL) {
        bytes = file_read(companion, &len);
        path_join(copy, sizeof copy, dir, "gf_mlp_cuda.so");
        file_write(copy, bytes, len);
        free(bytes);
    }
    path_join(path, PATH_BYTES, real_dir, "gf_mlp_cuda.so");

    void *state = mlp_make(p, GF_MLP_DEMO_WEIGHTS, 0);
    why[0] = '\0';
    ck_assert_ptr_null(p->device_open(state, 0, 1, why, PLUGIN_WHY_BYTES));
    p->destroy(state);
    scratch_dir_remove(dir);
}

/* No gf_mlp_cuda.so beside gf_mlp.so: dlopen's reason, naming the file. */
START_TEST(test_mlp_companion_missing) {
    char path[PATH_BYTES], why[PLUGIN_WHY_BYTES], want[2 * PATH_BYTES + 128];

    companion_refusal(NULL, path, why);
    snprintf(want, sizeof want,
             "cannot load %s: %s: cannot open shared object file: No such file or directory", path,
             path);
    ck_assert_str_eq(why, want);
}
END_TEST

/* A shared object without the companion's entry point. */
START_TEST(test_mlp_companion_no_entry) {
    char path[PATH_BYTES], why[PLUGIN_WHY_BYTES], want[PATH_BYTES + 128];

    companion_refusal(GF_TEST_NO_ENTRY_SO, path, why);
    snprintf(want, sizeof want, "%s: no symbol gf__mlp_cuda_entry (not gf_mlp.so's CUDA side?)",
             path);
    ck_assert_str_eq(why, want);
}
END_TEST

/* A companion of another version (tests/plugins/mlp_cuda_other.c). */
START_TEST(test_mlp_companion_other_version) {
    char path[PATH_BYTES], why[PLUGIN_WHY_BYTES], want[PATH_BYTES + 128];

    companion_refusal(GF_TEST_MLP_CUDA_OTHER_SO, path, why);
    snprintf(want, sizeof want,
             "%s: version %u, where this gf_mlp.so needs %u (install both from one build)", path,
             GF_MLP_CUDA_VERSION + 1, GF_MLP_CUDA_VERSION);
    ck_assert_str_eq(why, want);
}
END_TEST
#endif

static Suite *plugin_suite(void) {
    Suite *s = suite_create("plugin_builtin");
    TCase *tc = tcase_create("plugins");

    tcase_add_test(tc, test_clamp_table);
    tcase_add_test(tc, test_mlp_table);
    tcase_add_test(tc, test_clamp_reference_values);
    tcase_add_test(tc, test_clamp_lengths);
    tcase_add_test(tc, test_clamp_create_refuses_lo_above_hi);
    tcase_add_test(tc, test_mlp_hand_network_values);
    tcase_add_test(tc, test_mlp_lengths);
    tcase_add_loop_test(tc, test_mlp_generated_against_naive, 0,
                        2 * (int)(sizeof GEN_NETS / sizeof GEN_NETS[0]));
    tcase_add_test(tc, test_make_weights_deterministic);
    tcase_add_test(tc, test_demo_weights_file);
    tcase_add_test(tc, test_mlp_tolerance_against_float_orders);
    tcase_add_test(tc, test_mlp_reference_concurrent);
    tcase_add_test(tc, test_mlp_create_file_errors);
    tcase_add_test(tc, test_mlp_create_format_errors);
    tcase_add_test(tc, test_mlp_wide_output_accepted);
#ifdef GF_HAVE_CUDA
    tcase_add_test(tc, test_mlp_companion_missing);
    tcase_add_test(tc, test_mlp_companion_no_entry);
    tcase_add_test(tc, test_mlp_companion_other_version);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(plugin_suite());
}

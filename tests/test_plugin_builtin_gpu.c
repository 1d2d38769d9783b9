/* SPDX-License-Identifier: MIT */
/*
 * GPU tests of the repository's plugins (plugins/): device_open, launch on a
 * stream and device_close, against each plugin's reference: clamp bit for
 * bit, mlp within the tolerance it states (the demo network at 1, 7 and 64
 * vectors, with and without softmax; a one-layer network; a network whose
 * frame runs in three chunks; launch_batch over batches of 1, 7 and 64
 * frames and a mixed one).  Also: two stream indices in flight at once,
 * and no device memory taken by launches after the first.
 *
 * Labelled `gpu`: without CUDA in the build, or without a usable device, it
 * prints why and exits GF_SKIP_CODE, which ctest reports as skipped.  Tests
 * run in this process: a process must never fork after CUDA is initialised,
 * so the weights files are made before it is.
 */
#include <stdio.h>
#include <stdlib.h>

#include "runner.h"

#ifdef GF_HAVE_CUDA

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpuframe_plugin.h"
#include "plugin_util.h"
#include "testutil.h"

/* The env create() gets: 1 MiB frames. */
#define MAX_INPUT_BYTES (1u << 20)
#define PATH_BYTES      4096
/* What output buffers hold before a launch, and the guard bytes past the
 * output that it must leave so. */
#define POISON_BYTE 0xA5
#define GUARD_BYTES 256
/* Streams the plugins are opened for. */
#define STREAMS 2

/* Made in main(), before CUDA starts: the scratch directory and the
 * networks' files. */
static char g_dir[PATH_BYTES / 4];   /* room for a file name after it */
static char g_one_layer[PATH_BYTES]; /* 5 -> 3                          */
static char g_chunked[PATH_BYTES];   /* 2 -> 4096 -> 3: 2048-vector chunks */

/* One frame on the GPU: device buffers, a copy in, a launch, a copy out. */
typedef struct gpu_frame {
    void *in_dev, *out_dev;
    size_t in_bytes, out_bytes;
} gpu_frame;

static void frame_alloc(gpu_frame *f, size_t in_bytes, size_t out_bytes) {
    f->in_bytes = in_bytes;
    f->out_bytes = out_bytes;
    GF_TEST_CK_CUDA(cudaMalloc(&f->in_dev, in_bytes > 0 ? in_bytes : 1));
    GF_TEST_CK_CUDA(cudaMalloc(&f->out_dev, out_bytes + GUARD_BYTES));
}

static void frame_free(gpu_frame *f) {
    GF_TEST_CK_CUDA(cudaFree(f->in_dev));
    GF_TEST_CK_CUDA(cudaFree(f->out_dev));
}

/* Copies `in` up, poisons the output and its guard, launches on `stream`. */
static void frame_launch(const gf_plugin *p, void *dev, uint32_t stream_index, cudaStream_t stream,
                         gpu_frame *f, const void *in) {
    if (f->in_bytes > 0)
        GF_TEST_CK_CUDA(
            cudaMemcpyAsync(f->in_dev, in, f->in_bytes, cudaMemcpyHostToDevice, stream));
    GF_TEST_CK_CUDA(cudaMemsetAsync(f->out_dev, POISON_BYTE, f->out_bytes + GUARD_BYTES, stream));
    const int err = p->launch(dev, stream_index, f->in_dev, f->in_bytes, f->out_dev, stream);
    ck_assert_msg(err == 0, "launch: %s (%d)", cudaGetErrorString((cudaError_t)err), err);
}

/* Waits for `stream` and copies the output (and guard) back into out[],
 * which holds out_bytes + GUARD_BYTES; checks the guard. */
static void frame_finish(cudaStream_t stream, gpu_frame *f, unsigned char *out) {
    GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
    GF_TEST_CK_CUDA(
        cudaMemcpy(out, f->out_dev, f->out_bytes + GUARD_BYTES, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < GUARD_BYTES; i++)
        ck_assert_msg(out[f->out_bytes + i] == POISON_BYTE, "byte %zu past the output written", i);
}

/* Elementwise |got - ref| <= abs + rel |ref|; returns the largest share of
 * the allowance used, and fails on the first element over it. */
static double compare_f32(const unsigned char *got_bytes, const unsigned char *ref_bytes,
                          size_t count, float abs_tol, float rel_tol, const char *what) {
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        float got, ref;
        memcpy(&got, got_bytes + 4 * i, 4);
        memcpy(&ref, ref_bytes + 4 * i, 4);
        const double err = fabs((double)got - (double)ref);
        const double allowed = (double)abs_tol + (double)rel_tol * fabs((double)ref);
        ck_assert_msg(err <= allowed, "%s: element %zu: got %.9g, reference %.9g", what, i,
                      (double)got, (double)ref);
        worst = err / allowed > worst ? err / allowed : worst;
    }
    return worst;
}

/*
 * Runs `vectors` input vectors (or, for clamp, floats) of `in_vec_bytes`
 * each through `p` with `state` on the GPU, stream index `stream_index`, and
 * compares with the reference (bitwise if the plugin is exact).  Inputs are
 * uniform in [-2, 2] from `seed`.
 */
static void check_against_reference(const gf_plugin *p, void *state, void *dev,
                                    uint32_t stream_index, cudaStream_t stream, size_t in_bytes,
                                    uint64_t seed, const char *what) {
    char why[PLUGIN_WHY_BYTES] = "";
    const int64_t out_bytes = p->output_bytes(state, in_bytes, why, sizeof why);
    ck_assert_msg(out_bytes >= 0, "%s: %s", what, why);
    float *in = malloc(in_bytes > 0 ? in_bytes : 1);
    unsigned char *ref = malloc((size_t)out_bytes + 1);
    unsigned char *got = malloc((size_t)out_bytes + GUARD_BYTES);
    gpu_frame f;

    ck_assert(in != NULL && ref != NULL && got != NULL);
    fill_uniform(in, in_bytes / 4, 2.0f, seed);
    p->reference(state, in, in_bytes, ref);
    frame_alloc(&f, in_bytes, (size_t)out_bytes);
    frame_launch(p, dev, stream_index, stream, &f, in);
    frame_finish(stream, &f, got);
    if (p->exact) {
        ck_assert_msg(memcmp(got, ref, (size_t)out_bytes) == 0, "%s: not bit for bit", what);
    } else {
        const double worst =
            compare_f32(got, ref, (size_t)out_bytes / 4, p->abs_tolerance, p->rel_tolerance, what);
        printf("%s: %.3g of the tolerance used\n", what, worst);
    }
    frame_free(&f);
    free(in);
    free(ref);
    free(got);
}

static void *open_device(const gf_plugin *p, const void *state) {
    char why[PLUGIN_WHY_BYTES] = "";
    void *dev = p->device_open(state, 0, STREAMS, why, sizeof why);
    ck_assert_msg(dev != NULL, "device_open: %s", why);
    return dev;
}

static void *create_mlp(const gf_plugin *p, const char *weights, int softmax) {
    const gf_plugin_value values[2] = {{.string = weights}, {.number = softmax}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = "/"};
    char why[PLUGIN_WHY_BYTES] = "";
    void *state = p->create(values, &env, why, sizeof why);
    ck_assert_msg(state != NULL, "mlp create %s: %s", weights, why);
    return state;
}

START_TEST(test_clamp_gpu_exact) {
    const gf_plugin *p = plugin_load(GF_PLUGIN_EXAMPLE_SO, NULL);
    const gf_plugin_value values[2] = {{.number = -1.0}, {.number = 0.5}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = "/"};
    char why[PLUGIN_WHY_BYTES] = "";
    void *state = p->create(values, &env, why, sizeof why);
    cudaStream_t stream;

    ck_assert_msg(state != NULL, "%s", why);
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *dev = open_device(p, state);
    const size_t floats[] = {0, 1, 7, 64, (1u << 18) + 3};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "clamp, %zu floats", floats[i]);
        check_against_reference(p, state, dev, (uint32_t)(i % STREAMS), stream, 4 * floats[i],
                                11 + i, what);
    }
    /* NaN, -0, infinities and bounds, bit for bit. */
    const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, -1.0f, 0.5f, 1e-45f};
    unsigned char ref[sizeof special], got[sizeof special + GUARD_BYTES];
    gpu_frame f;
    p->reference(state, special, sizeof special, ref);
    frame_alloc(&f, sizeof special, sizeof special);
    frame_launch(p, dev, 0, stream, &f, special);
    frame_finish(stream, &f, got);
    ck_assert_mem_eq(got, ref, sizeof special);
    frame_free(&f);

    p->device_close(dev);
    p->destroy(state);
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
}
END_TEST

START_TEST(test_mlp_gpu_demo) {
    const gf_plugin *p = plugin_load(GF_PLUGIN_MLP_SO, NULL);
    const size_t batches[] = {1, 7, 64};
    cudaStream_t stream;

    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int softmax = 0; softmax <= 1; softmax++) {
        void *state = create_mlp(p, GF_MLP_DEMO_WEIGHTS, softmax);
        void *dev = open_device(p, state);
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "mlp demo, softmax %d, %zu vectors", softmax, batches[i]);
            check_against_reference(p, state, dev, 0, stream, batches[i] * 3072 * 4, 21 + i, what);
        }
        p->device_close(dev);
        p->destroy(state);
    }
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
}
END_TEST

START_TEST(test_mlp_gpu_one_layer_and_chunks) {
    const gf_plugin *p = plugin_load(GF_PLUGIN_MLP_SO, NULL);
    cudaStream_t stream;

    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *state = create_mlp(p, g_one_layer, 0);
    void *dev = open_device(p, state);
    check_against_reference(p, state, dev, 1, stream, 7 * 5 * 4, 31, "mlp 5-3, 7 vectors");
    p->device_close(dev);
    p->destroy(state);

    /* 1 MiB frames hold 131072 vectors of 2 floats, but the hidden buffer
     * holds 32 MiB / (4096 x 4) = 2048: 5000 vectors are 3 chunks. */
    state = create_mlp(p, g_chunked, 0);
    dev = open_device(p, state);
    check_against_reference(p, state, dev, 0, stream, 5000 * 2 * 4, 32,
                            "mlp 2-4096-3, 5000 vectors in 3 chunks");
    p->device_close(dev);
    p->destroy(state);
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
}
END_TEST

/*
 * launch_batch as the daemon calls it: `count` frames packed in one
 * buffer at a stride of 12288 bytes (a demo input, 3072 floats, rounded up
 * to 256), each frame's output at its input's offset in another.  Frame i
 * has vectors[i] vectors (1 for all: one SGEMM a layer; else frame by
 * frame).  Every frame's result is checked against the reference within
 * the tolerance, and the bytes between results must stay as they were.
 */
static void check_batch(const gf_plugin *p, void *state, void *dev, cudaStream_t stream,
                        uint32_t count, const uint32_t *vectors, uint64_t seed, const char *what) {
    enum { IN_VEC = 3072 * 4, OUT_VEC = 10 * 4 };
    size_t stride = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t need = ((size_t)vectors[i] * IN_VEC + 255) / 256 * 256;
        stride = need > stride ? need : stride;
    }
    const size_t bytes = stride * count;
    float *in = malloc(bytes);
    unsigned char *got = malloc(bytes), *ref = malloc((size_t)64 * OUT_VEC);
    gf_plugin_frame *frames = calloc(count, sizeof *frames);
    uint8_t *in_dev, *out_dev;
    ck_assert(in != NULL && got != NULL && ref != NULL && frames != NULL);
    fill_uniform(in, bytes / 4, 2.0f, seed);
    GF_TEST_CK_CUDA(cudaMalloc((void **)&in_dev, bytes));
    GF_TEST_CK_CUDA(cudaMalloc((void **)&out_dev, bytes));
    GF_TEST_CK_CUDA(cudaMemcpyAsync(in_dev, in, bytes, cudaMemcpyHostToDevice, stream));
    GF_TEST_CK_CUDA(cudaMemsetAsync(out_dev, POISON_BYTE, bytes, stream));
    for (uint32_t i = 0; i < count; i++)
        frames[i] = (gf_plugin_frame){.in_dev = in_dev + i * stride,
                                      .in_bytes = (uint64_t)vectors[i] * IN_VEC,
                                      .out_dev = out_dev + i * stride,
                                      .out_bytes = (uint64_t)vectors[i] * OUT_VEC};
    ck_assert_uint_ge(p->max_batch_frames, count);
    const int err = p->launch_batch(dev, 0, frames, count, stream);
    ck_assert_msg(err == 0, "%s: launch_batch: %s (%d)", what, cudaGetErrorString((cudaError_t)err),
                  err);
    GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
    GF_TEST_CK_CUDA(cudaMemcpy(got, out_dev, bytes, cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *frame_in = (const unsigned char *)in + i * stride;
        const unsigned char *frame_out = got + i * stride;
        ck_assert_uint_le(vectors[i], 64);
        p->reference(state, frame_in, frames[i].in_bytes, ref);
        char where[96];
        snprintf(where, sizeof where, "%s, frame %u", what, i);
        double w = compare_f32(frame_out, ref, frames[i].out_bytes / 4, p->abs_tolerance,
                               p->rel_tolerance, where);
        worst = w > worst ? w : worst;
        for (size_t b = frames[i].out_bytes; b < stride; b++)
            ck_assert_msg(frame_out[b] == POISON_BYTE, "%s: byte %zu after its result written",
                          where, b);
    }
    printf("%s: %.3g of the tolerance used\n", what, worst);
    GF_TEST_CK_CUDA(cudaFree(in_dev));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
    free(in);
    free(got);
    free(ref);
    free(frames);
}

/* Batches of 1, 7 and 64 one-vector frames (one SGEMM a layer), with and
 * without softmax; and a batch whose frames differ (one of 3 vectors),
 * which runs frame by frame. */
START_TEST(test_mlp_gpu_launch_batch) {
    const gf_plugin *p = plugin_load(GF_PLUGIN_MLP_SO, NULL);
    /* launch_batch is a member of version 2 on. */
    ck_assert_uint_ge(p->abi_version, 2);
    ck_assert(p->launch_batch != NULL);
    static const uint32_t counts[] = {1, 7, 64};
    uint32_t ones[64], mixed[7] = {1, 1, 3, 1, 1, 1, 1};
    for (int i = 0; i < 64; i++)
        ones[i] = 1;
    cudaStream_t stream;
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int softmax = 0; softmax <= 1; softmax++) {
        void *state = create_mlp(p, GF_MLP_DEMO_WEIGHTS, softmax);
        void *dev = open_device(p, state);
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "mlp batch of %u, softmax %d", counts[i], softmax);
            check_batch(p, state, dev, stream, counts[i], ones, 51 + i, what);
        }
        check_batch(p, state, dev, stream, 7, mixed, 61,
                    softmax ? "mlp mixed batch, softmax" : "mlp mixed batch");
        p->device_close(dev);
        p->destroy(state);
    }
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
}
END_TEST

/* Two stream indices with frames in flight together, each on its own
 * stream; then launches after the first take no device memory.
 * cudaMemGetInfo counts every process's memory on the device: ctest runs
 * this suite alone (RUN_SERIAL, tests/CMakeLists.txt). */
START_TEST(test_mlp_gpu_two_streams_no_alloc) {
    const gf_plugin *p = plugin_load(GF_PLUGIN_MLP_SO, NULL);
    void *state = create_mlp(p, GF_MLP_DEMO_WEIGHTS, 0);
    void *dev = open_device(p, state);
    const size_t vectors = 64, in_bytes = vectors * 3072 * 4, out_bytes = vectors * 10 * 4;
    cudaStream_t streams[STREAMS];
    gpu_frame frames[STREAMS];
    float *in[STREAMS];
    unsigned char *ref[STREAMS], *got[STREAMS];

    for (int s = 0; s < STREAMS; s++) {
        GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
        in[s] = malloc(in_bytes);
        ref[s] = malloc(out_bytes);
        got[s] = malloc(out_bytes + GUARD_BYTES);
        ck_assert(in[s] != NULL && ref[s] != NULL && got[s] != NULL);
        fill_uniform(in[s], in_bytes / 4, 2.0f, 41 + (uint64_t)s);
        p->reference(state, in[s], in_bytes, ref[s]);
        frame_alloc(&frames[s], in_bytes, out_bytes);
    }
    size_t free_before = 0, free_after = 0, total;
    for (int round = 0; round < 20; round++) {
        for (int s = 0; s < STREAMS; s++)
            frame_launch(p, dev, (uint32_t)s, streams[s], &frames[s], in[s]);
        for (int s = 0; s < STREAMS; s++) {
            frame_finish(streams[s], &frames[s], got[s]);
            compare_f32(got[s], ref[s], out_bytes / 4, p->abs_tolerance, p->rel_tolerance,
                        "mlp demo, two streams");
        }
        /* After the first round: modules loaded, handles bound. */
        if (round == 0)
            GF_TEST_CK_CUDA(cudaMemGetInfo(&free_before, &total));
    }
    GF_TEST_CK_CUDA(cudaMemGetInfo(&free_after, &total));
    ck_assert_msg(free_after == free_before, "launches took %lld bytes of device memory",
                  (long long)free_before - (long long)free_after);
    for (int s = 0; s < STREAMS; s++) {
        frame_free(&frames[s]);
        free(in[s]);
        free(ref[s]);
        free(got[s]);
        GF_TEST_CK_CUDA(cudaStreamDestroy(streams[s]));
    }
    p->device_close(dev);
    p->destroy(state);
}
END_TEST

static Suite *plugin_gpu_suite(void) {
    Suite *s = suite_create("plugin_builtin_gpu");
    TCase *tc = tcase_create("gpu");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_clamp_gpu_exact);
    tcase_add_test(tc, test_mlp_gpu_demo);
    tcase_add_test(tc, test_mlp_gpu_one_layer_and_chunks);
    tcase_add_test(tc, test_mlp_gpu_launch_batch);
    tcase_add_test(tc, test_mlp_gpu_two_streams_no_alloc);
    suite_add_tcase(s, tc);
    return s;
}

/* Makes the scratch directory and the networks' files; 0, or -1 after
 * printing why.  Runs outside any test, so it checks by hand. */
static int make_networks(void) {
    const uint32_t one_layer[] = {5, 3}, chunked[] = {2, 4096, 3};
    const char *tmp = getenv("TMPDIR");

    snprintf(g_dir, sizeof g_dir, "%s/gf_plugin_gpu.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(g_dir) == NULL) {
        perror(g_dir);
        return -1;
    }
    snprintf(g_one_layer, sizeof g_one_layer, "%s/one_layer.gfw", g_dir);
    snprintf(g_chunked, sizeof g_chunked, "%s/chunked.gfw", g_dir);
    if (make_weights(g_one_layer, 51, one_layer, 2) != 0 ||
        make_weights(g_chunked, 52, chunked, 3) != 0) {
        fprintf(stderr, "gf_mlp_make_weights failed\n");
        return -1;
    }
    return 0;
}

int main(void) {
    int device_count = 0;

    if (make_networks() != 0)
        return EXIT_FAILURE;
    cudaError_t err = cudaGetDeviceCount(&device_count);
    int rc;
    /* CI has nvcc but no driver: cudaErrorInsufficientDriver, not NoDevice. */
    if (err != cudaSuccess || device_count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        rc = GF_SKIP_CODE;
    } else {
        /* Never fork after CUDA is initialised (cudaGetDeviceCount did). */
        rc = gf_test_run_in_process(plugin_gpu_suite());
    }
    remove(g_one_layer);
    remove(g_chunked);
    remove(g_dir);
    return rc;
}

#else /* !GF_HAVE_CUDA */

int main(void) {
    printf("SKIP: built without CUDA\n");
    return GF_SKIP_CODE;
}

#endif

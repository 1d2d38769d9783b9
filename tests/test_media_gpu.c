/* SPDX-License-Identifier: MIT */
/*
 * GPU tests of the media kinds' CUDA sides, image and spectrogram, through
 * their device APIs as the CUDA engine calls them (kernels.h,
 * gf_kernel_device_api): every format and option, odd sizes, against the C
 * references by gf_pipeline_compare (image bit for bit; spectrogram within
 * the registry's tolerance), in batches of 1 to 100 frames at uneven
 * offsets (the bytes between frames must stay untouched), on two stream
 * indices, and replayed from a CUDA graph as the engine replays them.
 *
 * Labelled gpu: without CUDA in the build or a device it prints why and
 * exits GF_SKIP_CODE.  In this process (never fork after CUDA starts).
 */
#include <stdio.h>
#include <stdlib.h>

#include "runner.h"

#ifdef GF_HAVE_CUDA

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "image_math.h"
#include "kernels.h"
#include "pipeline.h"
#include "spectrogram_math.h"
#include "testutil.h"

#define POISON_BYTE 0xA5
#define WHY_BYTES   512
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random bytes, or float32 uniform in [-4, 4] for a float32 input. */
static void fill(unsigned char *buf, size_t bytes, int f32, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (unsigned char)(next_random(&s) >> 56);
    for (size_t i = 0; f32 && i + 4 <= bytes; i += 4) {
        float v = (float)((double)(next_random(&s) >> 40) / (double)(1u << 24) * 8.0 - 4.0);
        memcpy(buf + i, &v, sizeof v);
    }
}

static size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

/*
 * `count` frames of `p` through `kind`'s device API: launch_batch on
 * stream index 1, or launch for one frame on index 0; then the same batch
 * captured as a CUDA graph and replayed.  Frame f lies at an offset that
 * grows by the frame's extent plus 256 * (f % 3) bytes (uneven, as frames
 * of other lengths would leave them), each output compared with the
 * reference and the bytes after it checked untouched.
 */
static void run_batch(const char *kind_name, const gf_params *p, uint32_t count, uint64_t seed) {
    const gf_pipeline_kind *kind = gf_pipeline_kind_find(kind_name);
    const gf_plugin *api = gf_kernel_device_api(kind);
    char why[WHY_BYTES] = "";
    ck_assert_ptr_nonnull(api);
    ck_assert_msg(kind->check_params(p, UINT64_MAX / 8, why, sizeof why) == 0, "%s", why);
    const size_t in_bytes = kind->warmup_input_bytes(p);
    const int64_t out_len = kind->output_bytes(p, in_bytes, why, sizeof why);
    ck_assert_msg(out_len > 0, "%s", why);
    const size_t out_bytes = (size_t)out_len,
                 extent = align256(in_bytes > out_bytes ? in_bytes : out_bytes);
    const int f32 = kind->input_f32_for ? kind->input_f32_for(p) : 0;

    size_t *offset = calloc(count + 1, sizeof *offset);
    for (uint32_t f = 0; f < count; f++)
        offset[f + 1] = offset[f] + extent + 256 * (f % 3);
    const size_t total = offset[count] + 256;
    unsigned char *in_host, *got, *ref = malloc(out_bytes);
    void *in_dev, *out_dev;
    cudaStream_t stream;
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&in_host, total));
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&got, total));
    GF_TEST_CK_CUDA(cudaMalloc(&in_dev, total));
    GF_TEST_CK_CUDA(cudaMalloc(&out_dev, total));
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (uint32_t f = 0; f < count; f++)
        fill(in_host + offset[f], in_bytes, f32, seed + f);
    GF_TEST_CK_CUDA(cudaMemcpy(in_dev, in_host, total, cudaMemcpyHostToDevice));

    gf_plugin_frame *frames = calloc(count, sizeof *frames);
    for (uint32_t f = 0; f < count; f++)
        frames[f] = (gf_plugin_frame){(unsigned char *)in_dev + offset[f], in_bytes,
                                      (unsigned char *)out_dev + offset[f], out_bytes};
    gf_params state = *p;
    void *dev = api->device_open(&state, 0, 2, why, sizeof why);
    ck_assert_msg(dev != NULL, "%s device_open: %s", kind_name, why);

    for (int pass = 0; pass < 2; pass++) {
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        GF_TEST_CK_CUDA(cudaMemsetAsync(out_dev, POISON_BYTE, total, stream));
        GF_TEST_CK_CUDA(cudaGetLastError());
        if (pass == 1)
            GF_TEST_CK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        int rc = count == 1
                     ? api->launch(dev, 0, frames[0].in_dev, in_bytes, frames[0].out_dev, stream)
                     : api->launch_batch(dev, 1, frames, count, stream);
        if (pass == 1) {
            GF_TEST_CK_CUDA(cudaStreamEndCapture(stream, &graph));
            GF_TEST_CK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
            GF_TEST_CK_CUDA(cudaGraphLaunch(exec, stream));
        }
        ck_assert_msg(rc == 0, "%s: %u frames: %s", kind_name, count,
                      cudaGetErrorString((cudaError_t)rc));
        GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
        GF_TEST_CK_CUDA(cudaGetLastError());
        GF_TEST_CK_CUDA(cudaMemcpy(got, out_dev, total, cudaMemcpyDeviceToHost));
        for (uint32_t f = 0; f < count; f++) {
            kind->reference(p, in_host + offset[f], in_bytes, ref);
            ck_assert_msg(
                gf_pipeline_compare(kind, got + offset[f], ref, out_bytes, why, sizeof why) == 0,
                "%s, frame %u of %u%s: %s", kind_name, f, count, pass ? " (graph)" : "", why);
            for (size_t i = offset[f] + out_bytes; i < offset[f + 1]; i++)
                ck_assert_msg(got[i] == POISON_BYTE, "%s, frame %u of %u wrote byte %zu after it",
                              kind_name, f, count, i - offset[f] - out_bytes);
        }
        if (exec)
            GF_TEST_CK_CUDA(cudaGraphExecDestroy(exec));
        if (graph)
            GF_TEST_CK_CUDA(cudaGraphDestroy(graph));
    }
    api->device_close(dev);
    free(frames);
    free(offset);
    free(ref);
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
    GF_TEST_CK_CUDA(cudaFree(in_dev));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
    GF_TEST_CK_CUDA(cudaFreeHost(in_host));
    GF_TEST_CK_CUDA(cudaFreeHost(got));
}

/* ---- image ---------------------------------------------------------------------- */

/* Every format with every fit, layout and dtype it is given here, odd sizes
 * where the format has them, up- and downscaling, both matrices and ranges. */
static const struct image_case {
    uint32_t format, w, h, ow, oh, fit, layout, dtype, matrix, range, antialias;
    uint32_t count;
} image_cases[] = {
    {GF_IMAGE_RGB8, 7, 5, 0, 0, GF_FIT_STRETCH, GF_LAYOUT_CHW, GF_IMAGE_FLOAT32, 0, 0, 1, 3},
    {GF_IMAGE_BGR8, 33, 17, 9, 11, GF_FIT_STRETCH, GF_LAYOUT_HWC, GF_IMAGE_FLOAT16, 0, 0, 1, 5},
    {GF_IMAGE_RGBA8, 5, 3, 17, 13, GF_FIT_CROP, GF_LAYOUT_CHW, GF_IMAGE_UINT8, 0, 0, 1, 2},
    {GF_IMAGE_GRAY8, 101, 77, 10, 10, GF_FIT_LETTERBOX, GF_LAYOUT_HWC, GF_IMAGE_FLOAT32, 0, 0, 0,
     4},
    {GF_IMAGE_NV12, 13, 9, 8, 8, GF_FIT_CROP, GF_LAYOUT_CHW, GF_IMAGE_FLOAT32, GF_YUV_BT709,
     GF_YUV_LIMITED, 1, 1},
    {GF_IMAGE_NV12, 1920, 1080, 224, 224, GF_FIT_CROP, GF_LAYOUT_CHW, GF_IMAGE_FLOAT32,
     GF_YUV_BT709, GF_YUV_LIMITED, 1, 4},
    {GF_IMAGE_I420, 31, 21, 40, 12, GF_FIT_LETTERBOX, GF_LAYOUT_CHW, GF_IMAGE_FLOAT16, GF_YUV_BT601,
     GF_YUV_FULL, 1, 7},
    {GF_IMAGE_I420, 1280, 720, 640, 640, GF_FIT_LETTERBOX, GF_LAYOUT_HWC, GF_IMAGE_UINT8,
     GF_YUV_BT709, GF_YUV_FULL, 1, 3},
    {GF_IMAGE_YUYV, 1280, 720, 0, 0, GF_FIT_STRETCH, GF_LAYOUT_HWC, GF_IMAGE_UINT8, GF_YUV_BT601,
     GF_YUV_LIMITED, 1, 2},
    {GF_IMAGE_YUYV, 22, 9, 300, 200, GF_FIT_STRETCH, GF_LAYOUT_CHW, GF_IMAGE_FLOAT32, GF_YUV_BT709,
     GF_YUV_FULL, 0, 64},
    {GF_IMAGE_GRAY8, 9, 9, 4, 4, GF_FIT_STRETCH, GF_LAYOUT_CHW, GF_IMAGE_FLOAT32, 0, 0, 1, 70},
};

START_TEST(test_image) {
    const struct image_case *c = &image_cases[_i];
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("image"), &p);
    p.format = c->format;
    p.width = c->w;
    p.height = c->h;
    p.out_width = c->ow;
    p.out_height = c->oh;
    p.fit = c->fit;
    p.layout = c->layout;
    p.dtype = c->dtype;
    p.matrix = c->matrix;
    p.range = c->range;
    p.antialias = c->antialias;
    p.pad_value = 114.0f;
    if (c->dtype != GF_IMAGE_UINT8) {
        const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
        memcpy(p.mean, mean, sizeof mean);
        memcpy(p.std, std, sizeof std);
    }
    run_batch("image", &p, c->count, 0x1A9Eu + (uint64_t)_i * 1000);
}
END_TEST

/* ---- spectrogram ------------------------------------------------------------------ */

static const struct spec_case {
    uint32_t sample_format, samples, n_fft, hop, center, power, n_mels, mel_scale, mel_norm, log;
    uint32_t count;
} spec_cases[] = {
    /* 1 s of 16 kHz audio to 64 log-mels: the figure's case, a batch of 64. */
    {GF_SAMPLES_INT16, 16000, 400, 160, 1, 2, 64, GF_MEL_HTK, GF_MEL_NORM_NONE, GF_LOG_LN, 64},
    {GF_SAMPLES_INT16, 16000, 400, 160, 1, 2, 64, GF_MEL_HTK, GF_MEL_NORM_NONE, GF_LOG_LN, 1},
    /* 8 + 4 transforms' frames, the last one past the batch (the batch the
     * daemon forms from 16 clients). */
    {GF_SAMPLES_INT16, 16000, 400, 160, 1, 2, 64, GF_MEL_HTK, GF_MEL_NORM_NONE, GF_LOG_LN, 11},
    {GF_SAMPLES_INT16, 1000, 128, 50, 1, 2, 0, 0, 0, GF_LOG_NONE, 5},
    {GF_SAMPLES_F32, 777, 101, 33, 0, 1, 0, 0, 0, GF_LOG_DB, 7},
    {GF_SAMPLES_F32, 4000, 256, 100, 1, 1, 40, GF_MEL_SLANEY, GF_MEL_NORM_SLANEY, GF_LOG_DB, 9},
    {GF_SAMPLES_INT16, 3001, 512, 128, 0, 2, 80, GF_MEL_SLANEY, GF_MEL_NORM_NONE, GF_LOG_NONE, 17},
    {GF_SAMPLES_INT16, 20000, 4096, 1024, 1, 2, 128, GF_MEL_HTK, GF_MEL_NORM_SLANEY, GF_LOG_LN, 6},
    /* More frames than a call carries: passes of `chunk` (32 here), the
     * second's 8 + 4 transforms over rows the first left; and 16 + 16 up to
     * the chunk. */
    {GF_SAMPLES_INT16, 32000, 400, 160, 1, 2, 64, GF_MEL_HTK, GF_MEL_NORM_NONE, GF_LOG_DB, 43},
    {GF_SAMPLES_INT16, 32000, 400, 160, 1, 2, 64, GF_MEL_HTK, GF_MEL_NORM_NONE, GF_LOG_DB, 31},
    {GF_SAMPLES_INT16, 64, 2, 1, 1, 2, 0, 0, 0, GF_LOG_LN, 2},
};

START_TEST(test_spectrogram) {
    const struct spec_case *c = &spec_cases[_i];
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("spectrogram"), &p);
    p.sample_format = c->sample_format;
    p.samples = c->samples;
    p.n_fft = c->n_fft;
    p.hop = c->hop;
    p.center = c->center;
    p.power = c->power;
    p.n_mels = c->n_mels;
    p.mel_scale = c->mel_scale;
    p.mel_norm = c->mel_norm;
    p.log = c->log;
    run_batch("spectrogram", &p, c->count, 0x5BEC + (uint64_t)_i * 1000);
}
END_TEST

/* A tone at bin k peaks at bin k on the GPU too, every column. */
START_TEST(test_spectrogram_tone) {
    enum { N = 64, SAMPLES = 641 };
    const gf_plugin *api = gf_kernel_device_api(gf_pipeline_kind_find("spectrogram"));
    gf_params p;
    char why[WHY_BYTES];
    gf_params_defaults(gf_pipeline_kind_find("spectrogram"), &p);
    p.samples = SAMPLES;
    p.n_fft = N;
    p.hop = 32;
    const gf_spec_shape s = gf_spec_shape_of(&p);
    int16_t in[SAMPLES];
    for (int n = 0; n < SAMPLES; n++)
        in[n] = (int16_t)(16384.0 * cos(2 * 3.14159265358979323846 * 9 * n / N));
    float *out = malloc((size_t)s.rows * s.columns * 4);
    void *in_dev, *out_dev;
    GF_TEST_CK_CUDA(cudaMalloc(&in_dev, sizeof in));
    GF_TEST_CK_CUDA(cudaMalloc(&out_dev, (size_t)s.rows * s.columns * 4));
    GF_TEST_CK_CUDA(cudaMemcpy(in_dev, in, sizeof in, cudaMemcpyHostToDevice));
    void *dev = api->device_open(&p, 0, 1, why, sizeof why);
    ck_assert_msg(dev != NULL, "%s", why);
    ck_assert_int_eq(api->launch(dev, 0, in_dev, sizeof in, out_dev, NULL), 0);
    GF_TEST_CK_CUDA(cudaDeviceSynchronize());
    GF_TEST_CK_CUDA(
        cudaMemcpy(out, out_dev, (size_t)s.rows * s.columns * 4, cudaMemcpyDeviceToHost));
    for (uint32_t t = 0; t < s.columns; t++) {
        uint32_t best = 0;
        for (uint32_t r = 1; r < s.rows; r++)
            if (out[r * s.columns + t] > out[best * s.columns + t])
                best = r;
        ck_assert_msg(best == 9, "column %u peaks at %u", t, best);
    }
    api->device_close(dev);
    GF_TEST_CK_CUDA(cudaFree(in_dev));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
    free(out);
}
END_TEST

/* Lengths the launchers cannot take are refused without a launch; a
 * stream index past device_open's is refused. */
START_TEST(test_bad_lengths_refused) {
    void *in_dev, *out_dev;
    char why[WHY_BYTES];
    GF_TEST_CK_CUDA(cudaMalloc(&in_dev, 4096));
    GF_TEST_CK_CUDA(cudaMalloc(&out_dev, 1 << 20));
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("image"), &p);
    p.width = 8;
    p.height = 8;
    ck_assert_int_eq(gf_image_launch(&p, in_dev, 191, out_dev, NULL), cudaErrorInvalidValue);
    const gf_plugin *api = gf_kernel_device_api(gf_pipeline_kind_find("spectrogram"));
    gf_params_defaults(gf_pipeline_kind_find("spectrogram"), &p);
    p.samples = 1000;
    p.n_fft = 64;
    p.hop = 32;
    void *dev = api->device_open(&p, 0, 1, why, sizeof why);
    ck_assert_msg(dev != NULL, "%s", why);
    ck_assert_int_eq(api->launch(dev, 0, in_dev, 1998, out_dev, NULL), cudaErrorInvalidValue);
    ck_assert_int_eq(api->launch(dev, 1, in_dev, 2000, out_dev, NULL), cudaErrorInvalidValue);
    GF_TEST_CK_CUDA(cudaDeviceSynchronize());
    GF_TEST_CK_CUDA(cudaGetLastError());
    api->device_close(dev);
    GF_TEST_CK_CUDA(cudaFree(in_dev));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
}
END_TEST

static Suite *media_gpu_suite(void) {
    Suite *s = suite_create("media_gpu");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_image, 0, (int)COUNT_OF(image_cases));
    tcase_add_loop_test(tc, test_spectrogram, 0, (int)COUNT_OF(spec_cases));
    tcase_add_test(tc, test_spectrogram_tone);
    tcase_add_test(tc, test_bad_lengths_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    int device_count = 0;
    cudaError_t err = cudaGetDeviceCount(&device_count);
    if (err != cudaSuccess || device_count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return GF_SKIP_CODE;
    }
    return gf_test_run_in_process(media_gpu_suite());
}

#else /* !GF_HAVE_CUDA */

int main(void) {
    printf("SKIP: built without CUDA\n");
    return GF_SKIP_CODE;
}

#endif

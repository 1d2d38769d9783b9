/* SPDX-License-Identifier: MIT */
/*
 * The media kinds, image and spectrogram, in a real daemon: every format and
 * option streamed with `gpuframe stream --verify` against the C references,
 * at odd sizes; many connections' frames in shared batches; chains with the
 * MLP plugin and with built-in kinds; a frame of the wrong length refused
 * with an ERROR that states the expected bytes; raw frames from a file and
 * from standard input (--input) written back with --output, compared with
 * the references byte for byte; LIST's parameters by name.
 *
 * Registered twice: on the CPU engine (the references serve), and labelled
 * gpu on the CUDA engine, where the same checks hold the kernels, cuFFT and
 * cuBLAS to the references.  Small frames throughout: the CPU engine on a
 * loaded 2-core machine runs the suite in seconds.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "libgpuframe.h"
#include "pipeline.h"
#include "runner.h"
#include "testutil.h"

#define COMMAND_TIMEOUT_MS 120000

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */

#define MLP_SO      GF_TEST_PLUGIN_DIR "/gf_mlp.so"
#define MLP_WEIGHTS GF_TEST_PLUGIN_DIR "/mlp-demo.gfw"

/* Every format, matrix, range, fit, layout and dtype, and every
 * spectrogram option, at sizes the formats allow (odd where they may). */
static const char *const pipelines[] = {
    "{\"name\": \"nv12_crop\", \"kind\": \"image\", \"params\": {\"format\": \"nv12\", "
    "\"width\": 13, \"height\": 9, \"matrix\": \"bt709\", \"out_width\": 8, \"out_height\": 8, "
    "\"fit\": \"crop\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224, 0.225]}}",
    "{\"name\": \"i420_letterbox\", \"kind\": \"image\", \"params\": {\"format\": \"i420\", "
    "\"width\": 11, \"height\": 7, \"range\": \"full\", \"out_width\": 6, \"out_height\": 6, "
    "\"fit\": \"letterbox\", \"pad_value\": 114, \"layout\": \"hwc\", \"dtype\": \"float16\"}}",
    "{\"name\": \"yuyv_u8\", \"kind\": \"image\", \"params\": {\"format\": \"yuyv\", "
    "\"width\": 10, \"height\": 5, \"matrix\": \"bt709\", \"range\": \"full\", "
    "\"layout\": \"hwc\", \"dtype\": \"uint8\"}}",
    "{\"name\": \"rgb_stretch\", \"kind\": \"image\", \"params\": {\"format\": \"rgb8\", "
    "\"width\": 20, \"height\": 10, \"out_width\": 7, \"out_height\": 5, \"antialias\": false}}",
    "{\"name\": \"rgba_up\", \"kind\": \"image\", \"params\": {\"format\": \"rgba8\", "
    "\"width\": 3, \"height\": 3, \"out_width\": 9, \"out_height\": 7, \"dtype\": \"uint8\"}}",
    "{\"name\": \"bgr_f16\", \"kind\": \"image\", \"params\": {\"format\": \"bgr8\", "
    "\"width\": 7, \"height\": 5, \"dtype\": \"float16\"}}",
    "{\"name\": \"gray_down\", \"kind\": \"image\", \"params\": {\"format\": \"gray8\", "
    "\"width\": 64, \"height\": 47, \"out_width\": 5, \"out_height\": 5, \"fit\": \"crop\"}}",
    "{\"name\": \"spec_mel_db\", \"kind\": \"spectrogram\", \"params\": {\"samples\": 1000, "
    "\"n_fft\": 128, \"hop\": 50, \"n_mels\": 16, \"log\": \"db\"}}",
    "{\"name\": \"spec_f32\", \"kind\": \"spectrogram\", \"params\": {\"sample_format\": "
    "\"float32\", \"samples\": 777, \"n_fft\": 101, \"hop\": 33, \"center\": false, "
    "\"power\": 1, \"log\": \"ln\"}}",
    "{\"name\": \"spec_slaney\", \"kind\": \"spectrogram\", \"params\": {\"samples\": 2000, "
    "\"sample_rate\": 22050, \"n_fft\": 256, \"hop\": 100, \"n_mels\": 24, \"f_min\": 50, "
    "\"f_max\": 9000, \"mel_scale\": \"slaney\", \"mel_norm\": \"slaney\", \"log\": \"ln\", "
    "\"eps\": 1e-6}}",
    "{\"name\": \"spec_plain\", \"kind\": \"spectrogram\", \"params\": {\"samples\": 600, "
    "\"n_fft\": 64, \"hop\": 16}}",
    /* A camera frame classified by the demo MLP (32x32 RGB in). */
    "{\"name\": \"camera_classify\", \"stages\": [{\"kind\": \"image\", \"params\": "
    "{\"format\": \"nv12\", \"width\": 40, \"height\": 30, \"out_width\": 32, \"out_height\": 32, "
    "\"fit\": \"crop\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224, 0.225]}}, "
    "{\"kind\": \"plugin\", \"path\": \"" MLP_SO "\", \"params\": {\"weights\": \"" MLP_WEIGHTS
    "\"}}]}",
    /* Two built-in kinds: a spectrogram scaled by affine. */
    "{\"name\": \"spec_affine\", \"stages\": [{\"kind\": \"spectrogram\", \"params\": "
    "{\"samples\": 1000, \"n_fft\": 128, \"hop\": 50, \"n_mels\": 16, \"log\": \"ln\"}}, "
    "{\"kind\": \"affine\", \"params\": {\"a\": 0.5, \"b\": 1}}]}",
    /* Over 16 KiB (28,800 bytes): read into memory to join a batch. */
    "{\"name\": \"nv12_qqvga\", \"kind\": \"image\", \"params\": {\"format\": \"nv12\", "
    "\"width\": 160, \"height\": 120, \"out_width\": 24, \"out_height\": 16}}",
};
#define PIPELINE_COUNT (sizeof pipelines / sizeof pipelines[0])

/* The configuration of every pipeline above, ids in that order. */
static char *config_json(void) {
    size_t n = 64;
    for (size_t i = 0; i < PIPELINE_COUNT; i++)
        n += strlen(pipelines[i]) + 2;
    char *json = malloc(n);
    ck_assert_ptr_nonnull(json);
    size_t o = (size_t)snprintf(json, n, "{\"slots\": 2, \"pipelines\": [");
    for (size_t i = 0; i < PIPELINE_COUNT; i++)
        o += (size_t)snprintf(json + o, n - o, "%s%s", i ? ", " : "", pipelines[i]);
    snprintf(json + o, n - o, "]}");
    return json;
}

static void start(gf_test_daemon *d) {
    char *json = config_json();
    gf_test_ck_daemon_start(d, json, g_engine);
    free(json);
}

/* The name of pipeline i: between its first pair of quotes after "name". */
static void pipeline_name(size_t i, char *name, size_t len) {
    const char *p = strstr(pipelines[i], "\"name\": \"") + 9;
    size_t n = (size_t)(strchr(p, '"') - p);
    ck_assert_uint_lt(n, len);
    memcpy(name, p, n);
    name[n] = '\0';
}

/* `gpuframe stream --verify` of `count` frames (the pipeline's one size,
 * synthetic) with `extra` options: exits 0 and reports no error. */
static void stream_verified(const gf_test_daemon *d, const char *pipeline, const char *count,
                            const char *extra) {
    char *out;
    char *argv[] = {GF_TEST_CLIENT,
                    "stream",
                    "--socket",
                    (char *)d->socket_path,
                    "--pipeline",
                    (char *)pipeline,
                    "--count",
                    (char *)count,
                    "--window",
                    "4",
                    "--verify",
                    (char *)extra,
                    NULL};
    int rc = gf_test_ck_run(d->dir, argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 0 && strstr(out, " errors=0 ") != NULL, "stream to %s exited %d:\n%s",
                  pipeline, rc, out);
    free(out);
}

/* Every pipeline, through the socket and by reference in shared memory. */
START_TEST(every_option_streams_verified) {
    gf_test_daemon d;
    char name[GF_PIPELINE_NAME_MAX];
    start(&d);
    for (size_t i = 0; i < PIPELINE_COUNT; i++) {
        pipeline_name(i, name, sizeof name);
        stream_verified(&d, name, "6", "--no-shm");
        stream_verified(&d, name, "6", "--shm");
    }
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* The batches of pipeline `name` in STATS: submissions and frames. */
static void batches_of(gf_client *c, const char *name, uint64_t *subs, uint64_t *frames) {
    cJSON *st = gf_test_ck_stats(c), *p;
    *subs = *frames = 0;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(st, "pipelines")) {
        if (strcmp(cJSON_GetObjectItem(p, "name")->valuestring, name) == 0) {
            *subs = gf_test_ck_u64(p, "batches.submissions");
            *frames = gf_test_ck_u64(p, "batches.frames");
        }
    }
    cJSON_Delete(st);
}

/* Eight clients at once, each verifying its own results, share batches:
 * fewer submissions than frames, for both kinds.  Small frames (they go
 * whole into a shard's batch), frames over 16 KiB through the socket (read
 * into memory while the pipeline's batches run, then joining them) and
 * shared memory.  On the CUDA engine, batches of either kind replay CUDA
 * graphs (cuda_graphs, the default), shared-memory frames too: a graph of
 * the stages alone, the frames moved into the slot before it and back
 * after (STATS's slots.graph_submissions; some batches are timed, and
 * timed ones run plain). */
START_TEST(connections_share_batches) {
    static const char *const names[] = {"nv12_crop", "spec_mel_db", "nv12_qqvga"};
    gf_test_daemon d;
    start(&d);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        for (int shm = 0; shm < 2; shm++) {
            pid_t pids[8];
            char path[GF_TEST_PATH_MAX];
            uint64_t subs0, frames0, subs, frames;
            batches_of(c, names[k], &subs0, &frames0);
            uint64_t graphed0 = gf_test_ck_stat(c, "slots.graph_submissions");
            for (int i = 0; i < 8; i++) {
                snprintf(path, sizeof path, "%s/client%d.out", d.dir, i);
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                ck_assert_int_ge(fd, 0);
                char *argv[] = {GF_TEST_CLIENT,
                                "stream",
                                "--socket",
                                d.socket_path,
                                "--pipeline",
                                (char *)names[k],
                                "--count",
                                "40",
                                "--window",
                                "8",
                                "--verify",
                                shm ? "--shm" : "--no-shm",
                                NULL};
                pids[i] = gf_test_spawn(argv, fd, fd);
                close(fd);
                ck_assert_int_gt(pids[i], 0);
            }
            for (int i = 0; i < 8; i++) {
                int status = 0;
                ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
                snprintf(path, sizeof path, "%s/client%d.out", d.dir, i);
                char *out = gf_test_read_file(path, NULL);
                ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && out &&
                                  strstr(out, " errors=0 ") != NULL,
                              "client %d of %s: %s", i, names[k], out ? out : "");
                free(out);
            }
            batches_of(c, names[k], &subs, &frames);
            ck_assert_uint_eq(frames - frames0, 320);
            ck_assert_msg(subs - subs0 < frames - frames0,
                          "%s (%s): %llu frames in %llu submissions", names[k],
                          shm ? "shm" : "socket", (unsigned long long)(frames - frames0),
                          (unsigned long long)(subs - subs0));
            uint64_t graphed = gf_test_ck_stat(c, "slots.graph_submissions") - graphed0;
            if (strcmp(g_engine, "cuda") == 0)
                ck_assert_msg(graphed > 0 && graphed <= subs - subs0,
                              "%s (%s): %llu of %llu submissions replayed a CUDA graph", names[k],
                              shm ? "shm" : "socket", (unsigned long long)graphed,
                              (unsigned long long)(subs - subs0));
            else
                ck_assert_uint_eq(graphed, 0);
        }
    }
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* A frame of the wrong length costs only itself: ERROR bad_length naming
 * the bytes expected, and the next frame is answered. */
START_TEST(wrong_length_states_the_expected_bytes) {
    static const struct {
        uint32_t id;
        size_t bytes;
        const char *words;
    } cases[] = {
        {0, 186, "length 186 is not the 187 bytes of a 13x9 nv12 image"},
        {2, 101, "length 101 is not the 100 bytes of a 10x5 yuyv image"},
        {7, 2002, "length 2002 is not the 2000 bytes of 1000 int16 samples"},
        {8, 1554, "length 1554 is not the 3108 bytes of 777 float32 samples"},
        {11, 4, "stage 0 (image): length 4 is not the 1800 bytes of a 40x30 nv12 image"},
    };
    gf_test_daemon d;
    start(&d);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *bad = calloc(1, cases[i].bytes);
        gf_reply r;
        ck_assert_int_eq(gf_client_send_frame(c, cases[i].id, 10 + i, bad, cases[i].bytes), 0);
        int rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "%s", gf_client_error(c));
        ck_assert_int_eq(r.header.type, GF_MSG_ERROR);
        ck_assert_int_eq(r.header.status, GF_ERR_BAD_LENGTH);
        ck_assert_uint_eq(r.header.frame_id, 10 + i);
        char text[512];
        size_t n = r.payload_bytes < sizeof text - 1 ? r.payload_bytes : sizeof text - 1;
        memcpy(text, r.payload, n);
        text[n] = '\0';
        ck_assert_msg(strstr(text, cases[i].words) != NULL, "ERROR \"%s\" lacks \"%s\"", text,
                      cases[i].words);
        free(bad);
    }
    gf_client_close(c);
    stream_verified(&d, "spec_plain", "4", "--no-shm");
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* Raw frames from a file (NV12 pictures) and from standard input (PCM
 * through a pipe), verified, and their results written with --output: the
 * references' bytes, exactly for image, within the tolerance for the
 * spectrogram (--verify checked each; here the file holds all of them in
 * order). */
START_TEST(raw_frames_from_a_file_and_stdin) {
    gf_test_daemon d;
    char in_path[GF_TEST_PATH_MAX], out_path[GF_TEST_PATH_MAX], cmd[4 * GF_TEST_PATH_MAX];
    start(&d);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count = 0;
    gf_pipeline *list = gf_test_ck_list(c, &count);
    ck_assert_uint_eq(count, PIPELINE_COUNT);
    for (int k = 0; k < 2; k++) {
        const gf_pipeline *p = &list[k == 0 ? 0 : 7]; /* nv12_crop, spec_mel_db */
        const size_t frame = k == 0 ? 187 : 2000, frames = 5;
        char why[256];
        int64_t out_bytes = gf_pipeline_output_bytes(p, frame, why, sizeof why);
        ck_assert_int_gt(out_bytes, 0);
        unsigned char *in = malloc(frame * frames), *ref = malloc((size_t)out_bytes * frames);
        uint64_t rng = 77 + (uint64_t)k;
        gf_test_fill_input(p->stages[0].kind, in, frame * frames, &rng);
        uint64_t lengths[GF_STAGES_MAX];
        ck_assert_int_eq(gf_pipeline_stage_lengths(p, frame, lengths, why, sizeof why), out_bytes);
        for (size_t f = 0; f < frames; f++)
            gf_pipeline_reference(p, in + f * frame, frame, lengths, ref + f * (size_t)out_bytes,
                                  NULL, NULL);
        snprintf(in_path, sizeof in_path, "%s/frames.raw", d.dir);
        snprintf(out_path, sizeof out_path, "%s/results.raw", d.dir);
        FILE *fp = fopen(in_path, "wb");
        ck_assert_ptr_nonnull(fp);
        ck_assert_uint_eq(fwrite(in, 1, frame * frames, fp), frame * frames);
        fclose(fp);
        if (k == 0)
            snprintf(cmd, sizeof cmd,
                     "exec '%s' stream --socket '%s' --pipeline %s --input '%s' --output '%s' "
                     "--verify",
                     GF_TEST_CLIENT, d.socket_path, p->name, in_path, out_path);
        else
            snprintf(cmd, sizeof cmd,
                     "cat '%s' | '%s' stream --socket '%s' --pipeline %s --input - --output '%s' "
                     "--verify",
                     in_path, GF_TEST_CLIENT, d.socket_path, p->name, out_path);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL}, *out;
        int rc = gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &out);
        ck_assert_msg(rc == 0 && strstr(out, "frames=5 errors=0 ") != NULL, "%s exited %d:\n%s",
                      cmd, rc, out);
        free(out);
        size_t got_bytes = 0;
        unsigned char *got = (unsigned char *)gf_test_read_file(out_path, &got_bytes);
        ck_assert_uint_eq(got_bytes, (size_t)out_bytes * frames);
        ck_assert_msg(gf_pipeline_compare_result(p, got, ref, got_bytes, why, sizeof why) == 0,
                      "%s: %s", p->name, why);
        free(got);
        free(in);
        free(ref);
    }
    gf_pipelines_free(list, count);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* `gpuframe list` names the choices and the booleans as the config does,
 * and LIST's tensors say what a frame is. */
START_TEST(list_names_choices_and_tensors) {
    gf_test_daemon d;
    start(&d);
    char *out;
    char *argv[] = {GF_TEST_CLIENT, "list", "--socket", d.socket_path, NULL};
    int rc = gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 0, "list exited %d:\n%s", rc, out);
    static const char *const words[] = {
        "format=nv12", "matrix=bt709",          "fit=crop",      "antialias=true",
        "layout=hwc",  "dtype=float16",         "center=false",  "mel_scale=slaney",
        "log=db",      "sample_format=float32", "uint8[187]",    "float32[3,8,8]",
        "int16[1000]", "float32[16,21]",        "float16[6,6,3]"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(out, words[i]) != NULL, "list lacks %s:\n%s", words[i], out);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

static Suite *media_live_suite(void) {
    Suite *s = suite_create("media_live");
    TCase *tc = tcase_create("serve");
    tcase_add_test(tc, every_option_streams_verified);
    tcase_add_test(tc, connections_share_batches);
    tcase_add_test(tc, wrong_length_states_the_expected_bytes);
    tcase_add_test(tc, raw_frames_from_a_file_and_stdin);
    tcase_add_test(tc, list_names_choices_and_tensors);
    tcase_set_timeout(tc, 240);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(media_live_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Device regions on the CUDA engine (PROTOCOL.md, "Device frames"), end to
 * end through libgpuframe's own device allocations (the driver loaded at run
 * time): the daemon maps a client's cuMemCreate memory and runs pipelines on
 * it in place.
 *
 * - every configured pipeline (echo, affine, sincos, normalize_u8, image,
 *   spectrogram, a plugin, the MLP plugin, a chain of two stages), several
 *   frames in flight at once in one region (so they share batches), each
 *   output copied back and compared with the C reference (exact where the
 *   kind is integer, its stated tolerance where float); STATS counts them
 *   as device frames and bytes;
 * - small frames of elementwise pipelines from four connections at once,
 *   each in its own region, every fourth by the socket: they share
 *   submissions (the device frames gathered into the slot and scattered
 *   back), each result right and no other byte of any region touched;
 * - device frames newest-only and of a class: one reply each, in order,
 *   verified or superseded, the last one run, the class counted;
 * - a client that frees its allocation with frames in flight: every frame is
 *   still answered, the daemon keeps serving (a new region runs verified),
 *   and its log has no CUDA error;
 * - refusals, each naming its cause: an fd that is not a CUDA allocation's
 *   (a memfd), a handle type other than a POSIX fd, region_bytes beyond the
 *   allocation (of one granule, and of three claimed as four) or not a
 *   multiple of its granularity, offsets that are not
 *   256-aligned, ranges past the region, a region id not held; then a good
 *   frame still runs; max_device_region_bytes refusing a region past it;
 * - the CUDA graph cache on device frames: for each pipeline with a plugin
 *   stage, the same lengths at other offsets, and in a new region after
 *   the first is removed, each result right and no other byte touched;
 * - libgpuframe's device calls leave the calling thread's current CUDA
 *   context as it was (none, on a thread of its own);
 * - with `cpu` as argument (ctest test_regions_config, in CI): the same
 *   configuration on the CPU engine by the socket, every pipeline's frame
 *   size and layout checked and streamed verified;
 * - with `two` as argument (ctest test_regions_two_gpu): a region on device
 *   1 with a daemon whose pipeline runs on both devices: the connection
 *   moves to device 1's shard and the frames run verified; a region on
 *   device 1 with a daemon serving device 0 alone refused, naming it.
 *   With fewer than two device nodes it exits GF_SKIP_CODE (ctest:
 *   skipped, not passed).
 *
 * Every test runs in its own forked child; CUDA is initialised only there
 * (the runner process never touches the driver).
 */
#define _GNU_SOURCE /* memfd_create */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device_alloc.h"
#include "json_read.h"
#include "libgpuframe.h"
#include "runner.h"
#include "stages_json.h"
#include "testutil.h"

#define TEST_TIMEOUT_S  300
#define REPLY_MS        30000
#define REGION_BYTES    (32u << 20) /* room for every frame of one pipeline */
#define MAX_FRAME_BYTES (8u << 20)  /* the configuration's */
#define IN_FLIGHT       4           /* frames of one pipeline sent at once */
#define ALIGN           GF_DEVICE_FRAME_ALIGN_BYTES

#define CLAMP_SO    GF_TEST_PLUGIN_DIR "/gf_example.so"
#define MLP_SO      GF_TEST_PLUGIN_DIR "/gf_mlp.so"
#define MLP_WEIGHTS GF_TEST_PLUGIN_DIR "/mlp-demo.gfw"

/* Every kind of pipeline there is, and a chain; the order is the test's
 * PIPELINES list below. */
static const char config_json[] =
    "{\"slots\": 4, \"max_frame_bytes\": 8388608, \"frame_timeout_ms\": 30000,"
    " \"log_level\": \"debug\", \"pipelines\": ["
    "{\"name\": \"echo\", \"kind\": \"echo\"},"
    "{\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5}},"
    "{\"name\": \"sincos\", \"kind\": \"sincos\", \"params\": {\"iters\": 8}},"
    "{\"name\": \"rgb\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 64, \"height\": 48}},"
    "{\"name\": \"image\", \"kind\": \"image\", \"params\": {\"format\": \"nv12\","
    " \"width\": 320, \"height\": 240, \"out_width\": 224, \"out_height\": 224,"
    " \"fit\": \"crop\"}},"
    "{\"name\": \"spectrogram\", \"kind\": \"spectrogram\"},"
    "{\"name\": \"clamp\", \"kind\": \"plugin\", \"path\": \"" CLAMP_SO "\","
    " \"params\": {\"lo\": -1.5, \"hi\": 2}},"
    "{\"name\": \"mlp\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\","
    " \"params\": {\"weights\": \"" MLP_WEIGHTS "\"}},"
    "{\"name\": \"classify\", \"stages\": ["
    "{\"kind\": \"normalize_u8\", \"params\": {\"width\": 32, \"height\": 32}},"
    "{\"kind\": \"plugin\", \"path\": \"" MLP_SO "\", \"params\": {\"weights\": \"" MLP_WEIGHTS
    "\"}}]}]}";
#define PIPELINES 9

/* For the two-device case: echo and affine on every device, 2 shards. */
static const char two_json[] =
    "{\"slots\": 2, \"shards\": 2, \"devices\": \"0,1\", \"pipelines\": ["
    "{\"name\": \"echo\", \"kind\": \"echo\"},"
    "{\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5}}]}";

static gf_test_daemon daemon_;

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t round_up(uint64_t v, uint64_t to) {
    return (v + to - 1) / to * to;
}

/* A frame length `p` takes: the one its LIST description fixes (an image,
 * a model's row), else the largest multiple of 256 up to 64 KiB its rule
 * accepts. */
static size_t frame_bytes_for(const gf_pipeline *p) {
    char why[256];
    gf_frame_desc in, out;
    gf_pipeline_describe(p, &in, &out);
    uint64_t fixed = gf_frame_desc_bytes(&in);
    if (fixed > 0 && gf_pipeline_output_bytes(p, fixed, why, sizeof why) >= 0)
        return (size_t)fixed;
    for (size_t b = 65536; b >= 256; b -= 256)
        if (gf_pipeline_output_bytes(p, b, why, sizeof why) >= 0)
            return b;
    ck_abort_msg("pipeline %s takes none of the test's frame sizes", p->name);
    return 0;
}

/* Loads the plugin stages of LIST's pipelines here, for their references. */
static void open_pipelines(gf_pipeline *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char why[512];
        gf_problems pr;
        gf_problems_init(&pr, why, sizeof why, 0, NULL);
        ck_assert_msg(gf_pipeline_open_plugins(&p[i], MAX_FRAME_BYTES, p[i].name, &pr) == 0,
                      "pipeline %s: %s", p[i].name, why);
        ck_assert_msg(gf_pipeline_has_reference(&p[i]), "pipeline %s has no reference", p[i].name);
    }
}

/* LIST's pipelines, their plugins loaded here. */
static gf_pipeline *list_pipelines(gf_client *c, size_t *n) {
    gf_pipeline *p = NULL;
    char err[256];
    ck_assert_msg(gf_test_list(c, &p, n, err, sizeof err) == 0, "LIST: %s", err);
    open_pipelines(p, *n);
    return p;
}

/* One input of `bytes` for `p` (float32 in [-4, 4) where it takes float32,
 * random bytes otherwise) and its reference through every stage; both
 * malloc'd. */
static void make_frame(const gf_pipeline *p, size_t bytes, uint64_t *rng, void **in, void **ref,
                       size_t *ref_bytes) {
    uint64_t lengths[GF_STAGES_MAX];
    char why[256];
    int64_t out = gf_pipeline_stage_lengths(p, bytes, lengths, why, sizeof why);
    ck_assert_msg(out >= 0, "pipeline %s, %zu bytes: %s", p->name, bytes, why);
    unsigned char *i = malloc(bytes ? bytes : 1), *r = malloc(out ? (size_t)out : 1);
    ck_assert(i != NULL && r != NULL);
    for (size_t k = 0; k < bytes; k++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        i[k] = (unsigned char)(*rng >> 56);
    }
    if (gf_pipeline_input_f32(p))
        for (size_t k = 0; k + 4 <= bytes; k += 4) {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            float v = (float)((double)(*rng >> 40) / (double)(1ull << 24) * 8.0 - 4.0);
            memcpy(i + k, &v, sizeof v);
        }
    memset(r, 0xA5, out ? (size_t)out : 1);
    uint64_t scratch = gf_pipeline_max_scratch_bytes(p, bytes);
    void *sc[2] = {scratch ? malloc(scratch) : NULL, scratch ? malloc(scratch) : NULL};
    gf_pipeline_reference(p, i, bytes, lengths, r, sc, NULL);
    free(sc[0]);
    free(sc[1]);
    *in = i;
    *ref = r;
    *ref_bytes = (size_t)out;
}

/* Receives one reply and requires a RESULT of `frame_id`; returns it. */
static gf_reply expect_result(gf_client *c, uint64_t frame_id) {
    gf_reply r;
    int rc = gf_client_recv(c, &r, REPLY_MS);
    ck_assert_msg(rc == 0, "frame %llu: gf_client_recv: %d (%s)", (unsigned long long)frame_id, rc,
                  gf_client_error(c));
    ck_assert_msg(r.header.type == GF_MSG_RESULT, "frame %llu: %s %s: %.*s",
                  (unsigned long long)frame_id, gf_msg_type_name(r.header.type),
                  gf_status_name(r.header.status), (int)r.payload_bytes,
                  r.payload ? (const char *)r.payload : "");
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    return r;
}

/* Receives one reply and requires a device RESULT of `frame_id` whose
 * output is `out_bytes` at `out_offset` of region `region_id`. */
static void expect_device_result(gf_client *c, uint64_t frame_id, uint32_t region_id,
                                 uint64_t out_offset, uint64_t out_bytes) {
    gf_reply r = expect_result(c, frame_id);
    ck_assert_uint_eq(r.header.version, GF_PROTOCOL_VERSION_DEVICE);
    ck_assert_uint_eq(r.header.flags, GF_FLAG_DEVICE);
    ck_assert_int_eq(r.shm, 1);
    ck_assert_uint_eq(r.shm_result.region_id, region_id);
    ck_assert_uint_eq(r.shm_result.out_offset, out_offset);
    ck_assert_uint_eq(r.shm_result.out_bytes, out_bytes);
}

/* Receives one reply and requires a RESULT of `frame_id` sent by the
 * socket whose payload is `ref` (gf_pipeline_compare_result of `p`). */
static void expect_socket_result(gf_client *c, const gf_pipeline *p, uint64_t frame_id,
                                 const void *ref, size_t ref_bytes) {
    gf_reply r = expect_result(c, frame_id);
    ck_assert_int_eq(r.shm, 0);
    ck_assert_uint_eq(r.payload_bytes, ref_bytes);
    char why[512];
    ck_assert_msg(gf_pipeline_compare_result(p, r.payload, ref, ref_bytes, why, sizeof why) == 0,
                  "pipeline %s, frame %llu by the socket: %s", p->name,
                  (unsigned long long)frame_id, why);
}

/* Receives one ERROR of `status` for `frame_id` whose text holds `words`. */
static void expect_error(gf_client *c, uint64_t frame_id, uint32_t status, const char *words) {
    gf_reply r;
    int rc = gf_client_recv(c, &r, REPLY_MS);
    ck_assert_msg(rc == 0, "frame %llu: gf_client_recv: %d (%s)", (unsigned long long)frame_id, rc,
                  gf_client_error(c));
    ck_assert_msg(r.header.type == GF_MSG_ERROR && r.header.status == status,
                  "frame %llu: %s %s, expected ERROR %s", (unsigned long long)frame_id,
                  gf_msg_type_name(r.header.type), gf_status_name(r.header.status),
                  gf_status_name(status));
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    char text[GF_ERROR_TEXT_MAX_BYTES + 1];
    size_t n =
        r.payload_bytes < GF_ERROR_TEXT_MAX_BYTES ? r.payload_bytes : GF_ERROR_TEXT_MAX_BYTES;
    memcpy(text, r.payload, n);
    text[n] = '\0';
    ck_assert_msg(strstr(text, words) != NULL, "frame %llu: '%s' does not say '%s'",
                  (unsigned long long)frame_id, text, words);
}

/* Streams `count` verified frames of pipeline `p` through device region
 * `reg`, all in flight at once at distinct offsets; frame ids from
 * `first_id`.  Returns the input bytes sent. */
static uint64_t run_verified(gf_client *c, const gf_pipeline *p, gf_client_device_region *reg,
                             unsigned count, uint64_t first_id, uint64_t seed) {
    size_t bytes = frame_bytes_for(p);
    void *in[IN_FLIGHT], *ref[IN_FLIGHT];
    size_t ref_bytes[IN_FLIGHT];
    uint64_t in_off[IN_FLIGHT], out_off[IN_FLIGHT];
    uint64_t rng = seed, at = 0;
    ck_assert_uint_le(count, IN_FLIGHT);
    for (unsigned i = 0; i < count; i++) {
        make_frame(p, bytes, &rng, &in[i], &ref[i], &ref_bytes[i]);
        in_off[i] = at;
        at = round_up(at + bytes, ALIGN);
        out_off[i] = at;
        at = round_up(at + ref_bytes[i], ALIGN);
        ck_assert_uint_le(at, reg->bytes);
        ck_assert_int_eq(gf_client_device_copy_to(reg, in_off[i], in[i], bytes), 0);
    }
    for (unsigned i = 0; i < count; i++) {
        gf_shm_frame d = {.region_id = reg->id,
                          .in_offset = in_off[i],
                          .in_bytes = bytes,
                          .out_offset = out_off[i],
                          .out_capacity = ref_bytes[i]};
        ck_assert_int_eq(gf_client_send_frame_device(c, p->id, first_id + i, &d), 0);
    }
    for (unsigned i = 0; i < count; i++) {
        expect_device_result(c, first_id + i, reg->id, out_off[i], ref_bytes[i]);
        void *got = malloc(ref_bytes[i] ? ref_bytes[i] : 1);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(gf_client_device_copy_from(reg, out_off[i], got, ref_bytes[i]), 0);
        char why[512];
        ck_assert_msg(
            gf_pipeline_compare_result(p, got, ref[i], ref_bytes[i], why, sizeof why) == 0,
            "pipeline %s, frame %u of %zu bytes on the device: %s", p->name, i, bytes, why);
        /* The input is untouched: the pipeline wrote only its output. */
        void *back = malloc(bytes);
        ck_assert_ptr_nonnull(back);
        ck_assert_int_eq(gf_client_device_copy_from(reg, in_off[i], back, bytes), 0);
        ck_assert_msg(memcmp(back, in[i], bytes) == 0, "pipeline %s changed its input", p->name);
        free(back);
        free(got);
        free(in[i]);
        free(ref[i]);
    }
    return (uint64_t)bytes * count;
}

/* Connects, and makes a device region of `bytes` on `device`. */
static gf_client *connect_with_region(int device, uint64_t bytes, gf_client_device_region *reg) {
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    int rc = gf_client_device_region_create(c, device, bytes, reg, REPLY_MS);
    ck_assert_msg(rc == 0, "device region of %llu bytes on device %d: %d (%s)",
                  (unsigned long long)bytes, device, rc, gf_client_error(c));
    ck_assert_uint_ge(reg->bytes, bytes);
    return c;
}

/* ---- tests -------------------------------------------------------------------- */

START_TEST(every_pipeline_on_device_frames) {
    gf_test_ck_daemon_start(&daemon_, config_json, "cuda");
    gf_client_device_region reg;
    gf_client *c = connect_with_region(0, REGION_BYTES, &reg);
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c, &n);
    ck_assert_uint_eq(n, PIPELINES);
    uint64_t frames = 0, bytes_in = 0, id = 1;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(gf_pipeline_has_reference(&p[i]), "pipeline %s has no reference", p[i].name);
        /* One frame alone, then IN_FLIGHT at once (one batch or several). */
        bytes_in += run_verified(c, &p[i], &reg, 1, id, 0x5eed + i);
        bytes_in += run_verified(c, &p[i], &reg, IN_FLIGHT, id + 1, 0xbeef + i);
        id += 1 + IN_FLIGHT;
        frames += 1 + IN_FLIGHT;
    }
    cJSON *st = gf_test_ck_stats(c);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.frames"), frames);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.bytes_in"), bytes_in);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.regions_open"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.region_bytes"), reg.bytes);
    ck_assert_uint_eq(gf_test_ck_u64(st, "shm.frames"), 0);
    cJSON_Delete(st);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &reg, REPLY_MS), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.regions_open"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.regions_removed"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.regions_removed"), 0);
    gf_pipelines_free(p, n);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/*
 * Small device frames of elementwise pipelines from several connections at
 * once, every fourth frame of each sent by the socket instead, share
 * submissions: the engine gathers the device frames from their regions
 * into the slot beside the socket frames, runs the batch as one launch and
 * scatters the device results back.  Every result is checked, and every
 * other byte of every region (inputs, the gaps between frames, the places
 * of the socket frames' results) is as the client left it.
 */
START_TEST(small_device_frames_gathered_in_batches) {
    enum { CONNS = 4, FRAMES = 16, BYTES = 4096, STRIDE = 3 * BYTES, GAP = ALIGN };
    const uint64_t region_bytes = 2u << 20;
    gf_test_ck_daemon_start(&daemon_, config_json, "cuda");
    gf_client *c[CONNS];
    gf_client_device_region reg[CONNS];
    unsigned char *mirror[CONNS], *got = malloc(region_bytes);
    void *ref[CONNS][FRAMES];
    ck_assert_ptr_nonnull(got);
    for (int k = 0; k < CONNS; k++) {
        c[k] = connect_with_region(0, region_bytes, &reg[k]);
        mirror[k] = malloc(region_bytes);
        ck_assert_ptr_nonnull(mirror[k]);
    }
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c[0], &n);
    uint64_t id = 1, rng = 0x9a7e;
    for (size_t i = 0; i < 3; i++) { /* echo, affine, sincos */
        ck_assert(gf_pipeline_elementwise(&p[i]));
        uint64_t subs0 = gf_test_ck_stat(c[0], "slots.submissions"),
                 gathered0 = gf_test_ck_stat(c[0], "slots.gathered_submissions");
        for (int k = 0; k < CONNS; k++) {
            for (uint64_t b = 0; b < region_bytes; b++)
                mirror[k][b] = (unsigned char)(b * 7 + (uint64_t)k + i);
            for (int f = 0; f < FRAMES; f++) {
                void *in;
                size_t out_bytes;
                make_frame(&p[i], BYTES, &rng, &in, &ref[k][f], &out_bytes);
                ck_assert_uint_eq(out_bytes, BYTES);
                memcpy(mirror[k] + (size_t)f * STRIDE, in, BYTES);
                free(in);
            }
            ck_assert_int_eq(gf_client_device_copy_to(&reg[k], 0, mirror[k], region_bytes), 0);
        }
        /* Frame f's input at f * STRIDE, its result GAP bytes after it; a
         * socket frame sends the same input, and its result's place in the
         * region keeps the pattern. */
        for (int f = 0; f < FRAMES; f++)
            for (int k = 0; k < CONNS; k++) {
                uint64_t at = (uint64_t)f * STRIDE;
                if (f % 4 == 3) {
                    ck_assert_int_eq(gf_client_send_frame(c[k], p[i].id, id + (uint64_t)f,
                                                          mirror[k] + at, BYTES),
                                     0);
                    continue;
                }
                gf_shm_frame d = {.region_id = reg[k].id,
                                  .in_offset = at,
                                  .in_bytes = BYTES,
                                  .out_offset = at + BYTES + GAP,
                                  .out_capacity = BYTES};
                ck_assert_int_eq(gf_client_send_frame_device(c[k], p[i].id, id + (uint64_t)f, &d),
                                 0);
            }
        for (int k = 0; k < CONNS; k++) /* all on their way before any reply is read */
            ck_assert_int_eq(gf_client_flush(c[k], REPLY_MS), 0);
        for (int k = 0; k < CONNS; k++)
            for (int f = 0; f < FRAMES; f++) {
                if (f % 4 == 3)
                    expect_socket_result(c[k], &p[i], id + (uint64_t)f, ref[k][f], BYTES);
                else
                    expect_device_result(c[k], id + (uint64_t)f, reg[k].id,
                                         (uint64_t)f * STRIDE + BYTES + GAP, BYTES);
            }
        id += FRAMES;
        uint64_t subs = gf_test_ck_stat(c[0], "slots.submissions") - subs0,
                 gathered = gf_test_ck_stat(c[0], "slots.gathered_submissions") - gathered0;
        ck_assert_msg(subs < CONNS * FRAMES, "pipeline %s: %d frames in %llu submissions",
                      p[i].name, CONNS * FRAMES, (unsigned long long)subs);
        ck_assert_msg(gathered > 0 && gathered <= subs,
                      "pipeline %s: %llu of %llu submissions gathered device frames", p[i].name,
                      (unsigned long long)gathered, (unsigned long long)subs);
        for (int k = 0; k < CONNS; k++) {
            ck_assert_int_eq(gf_client_device_copy_from(&reg[k], 0, got, region_bytes), 0);
            for (int f = 0; f < FRAMES; f++) {
                size_t at = (size_t)f * STRIDE + BYTES + GAP;
                char why[512];
                if (f % 4 != 3) {
                    ck_assert_msg(gf_pipeline_compare_result(&p[i], got + at, ref[k][f], BYTES, why,
                                                             sizeof why) == 0,
                                  "pipeline %s, connection %d, frame %d: %s", p[i].name, k, f, why);
                    memcpy(mirror[k] + at, got + at, BYTES); /* checked: the rest must match */
                }
                free(ref[k][f]);
            }
            size_t b = gf_test_first_difference(got, mirror[k], region_bytes);
            ck_assert_msg(b == region_bytes,
                          "pipeline %s, connection %d: byte %zu of the region changed (0x%02x, "
                          "was 0x%02x)",
                          p[i].name, k, b, got[b], mirror[k][b]);
        }
    }
    for (int k = 0; k < CONNS; k++) {
        ck_assert_int_eq(gf_client_device_region_destroy(c[k], &reg[k], REPLY_MS), 0);
        gf_client_close(c[k]);
        free(mirror[k]);
    }
    free(got);
    gf_pipelines_free(p, n);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/*
 * Device frames take a connection's frame options as socket frames do:
 * newest-only (a waiting one answered superseded when the next comes) and
 * a priority class.  32 echo frames of 64 KiB sent at once, newest-only, of
 * class batch: every frame gets one reply, in order, a device RESULT whose
 * output is its input or ERROR superseded; the last one runs; the results
 * and the superseded add up to 32 in STATS; and the class is counted for
 * batch, not for the connection's own normal.
 */
START_TEST(device_frames_newest_only_with_a_class) {
    enum { FRAMES = 32, BYTES = 65536 };
    gf_test_ck_daemon_start(&daemon_, config_json, "cuda");
    gf_client_device_region reg;
    gf_client *c = connect_with_region(0, REGION_BYTES, &reg);
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c, &n);
    ck_assert_str_eq(p[0].name, "echo");
    unsigned char *in = malloc((size_t)FRAMES * BYTES), *got = malloc(BYTES);
    ck_assert(in != NULL && got != NULL);
    uint64_t rng = 0x1a7e57;
    for (unsigned f = 0; f < FRAMES; f++) {
        void *one, *ref;
        size_t ref_bytes;
        make_frame(&p[0], BYTES, &rng, &one, &ref, &ref_bytes);
        memcpy(in + (size_t)f * BYTES, one, BYTES);
        free(one);
        free(ref);
    }
    /* Inputs back to back from 0, results after them. */
    const uint64_t out_at = (uint64_t)FRAMES * BYTES;
    ck_assert_int_eq(gf_client_device_copy_to(&reg, 0, in, (size_t)FRAMES * BYTES), 0);
    cJSON *st = gf_test_ck_stats(c);
    uint64_t batch0 = gf_test_ck_u64(st, "priorities.batch.frames"),
             normal0 = gf_test_ck_u64(st, "priorities.normal.frames"),
             superseded0 = gf_test_ck_u64(st, "rejected.superseded");
    cJSON_Delete(st);
    ck_assert_int_eq(gf_client_set_frame_options(c, 0, 1), 0);
    ck_assert_int_eq(gf_client_set_priority(c, GF_CLASS_BATCH), 0);
    for (unsigned f = 0; f < FRAMES; f++) {
        gf_shm_frame d = {.region_id = reg.id,
                          .in_offset = (uint64_t)f * BYTES,
                          .in_bytes = BYTES,
                          .out_offset = out_at + (uint64_t)f * BYTES,
                          .out_capacity = BYTES};
        ck_assert_int_eq(gf_client_send_frame_device(c, p[0].id, 100 + f, &d), 0);
    }
    ck_assert_int_eq(gf_client_flush(c, REPLY_MS), 0);
    unsigned results = 0;
    for (unsigned f = 0; f < FRAMES; f++) {
        gf_reply r;
        int rc = gf_client_recv(c, &r, REPLY_MS);
        ck_assert_msg(rc == 0, "frame %u: gf_client_recv: %d (%s)", f, rc, gf_client_error(c));
        ck_assert_uint_eq(r.header.frame_id, 100 + f);
        if (r.header.type == GF_MSG_ERROR) {
            ck_assert_msg(r.header.status == GF_ERR_SUPERSEDED && f + 1 < FRAMES,
                          "frame %u of %u: ERROR %s", f, FRAMES, gf_status_name(r.header.status));
            continue;
        }
        ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
        ck_assert_uint_eq(r.header.flags & GF_FLAGS_BY_REF, GF_FLAG_DEVICE);
        ck_assert_uint_eq(r.shm_result.out_offset, out_at + (uint64_t)f * BYTES);
        ck_assert_int_eq(gf_client_device_copy_from(&reg, out_at + (uint64_t)f * BYTES, got, BYTES),
                         0);
        ck_assert_msg(memcmp(got, in + (size_t)f * BYTES, BYTES) == 0,
                      "frame %u: the echo's result is not its input", f);
        results++;
    }
    st = gf_test_ck_stats(c);
    ck_assert_uint_eq(results + gf_test_ck_u64(st, "rejected.superseded") - superseded0, FRAMES);
    ck_assert_uint_gt(gf_test_ck_u64(st, "priorities.batch.frames") - batch0, 0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.normal.frames") - normal0, 0);
    cJSON_Delete(st);
    free(in);
    free(got);
    gf_pipelines_free(p, n);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &reg, REPLY_MS), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

START_TEST(client_frees_its_allocation_mid_stream) {
    gf_test_ck_daemon_start(&daemon_, config_json, "cuda");
    gf_client_device_region reg;
    gf_client *c = connect_with_region(0, REGION_BYTES, &reg);
    /* sincos on 4 MiB frames: long enough that the free lands while they
     * run; 4 of them in flight, inputs of whatever the memory holds. */
    const uint32_t sincos = 2;
    const uint64_t bytes = 4u << 20;
    for (unsigned i = 0; i < 4; i++) {
        gf_shm_frame d = {.region_id = reg.id,
                          .in_offset = i * 2 * bytes,
                          .in_bytes = bytes,
                          .out_offset = i * 2 * bytes + bytes,
                          .out_capacity = bytes};
        ck_assert_int_eq(gf_client_send_frame_device(c, sincos, 10 + i, &d), 0);
    }
    ck_assert_int_eq(gf_client_flush(c, REPLY_MS), 0);
    uint32_t id = reg.id;
    /* Unmapped and released here: the daemon's mapping keeps the memory. */
    ck_assert_int_eq(gf_client_device_region_destroy(NULL, &reg, 0), 0);
    for (unsigned i = 0; i < 4; i++)
        expect_device_result(c, 10 + i, id, i * 2 * bytes + bytes, bytes);
    /* More frames on the region the client no longer maps still run. */
    gf_shm_frame d = {.region_id = id, .in_bytes = 4096, .out_offset = 4096, .out_capacity = 4096};
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 20, &d), 0);
    expect_device_result(c, 20, id, 4096, 4096);
    ck_assert_int_eq(gf_client_region_remove(c, id, NULL, REPLY_MS), 0);
    /* The daemon serves on: a new region, verified frames. */
    gf_client_device_region again;
    ck_assert_int_eq(gf_client_device_region_create(c, 0, 4u << 20, &again, REPLY_MS), 0);
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c, &n);
    run_verified(c, &p[1], &again, IN_FLIGHT, 30, 42); /* affine */
    ck_assert_int_eq(gf_client_device_region_destroy(c, &again, REPLY_MS), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.regions_open"), 0);
    gf_pipelines_free(p, n);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

START_TEST(bad_handles_sizes_and_offsets) {
    gf_test_ck_daemon_start(&daemon_, config_json, "cuda");
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    gf_region_info info;
    uint32_t status = 0;

    /* A memfd is no CUDA allocation. */
    int memfd = memfd_create("not-cuda", MFD_CLOEXEC);
    ck_assert_int_ge(memfd, 0);
    ck_assert_int_eq(ftruncate(memfd, 2u << 20), 0);
    gf_device_region dr = {.region_bytes = 2u << 20, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    ck_assert_int_eq(gf_client_device_region_add_fd(c, memfd, &dr, &info, &status, REPLY_MS),
                     -EREMOTEIO);
    ck_assert_uint_eq(status, GF_ERR_BAD_REGION);
    ck_assert_msg(strstr(gf_client_error(c), "does not import") != NULL, "%s", gf_client_error(c));
    close(memfd);

    /* A real allocation, offered wrongly. */
    gf__device_alloc a;
    int fd = -1;
    char why[256];
    ck_assert_msg(gf__device_alloc_create(0, 2u << 20, &a, &fd, why, sizeof why) == 0, "%s", why);
    dr = (gf_device_region){.region_bytes = a.bytes, .handle_type = 2};
    ck_assert_int_eq(gf_client_device_region_add_fd(c, fd, &dr, &info, &status, REPLY_MS),
                     -EREMOTEIO);
    ck_assert_uint_eq(status, GF_ERR_BAD_REGION);
    ck_assert_msg(strstr(gf_client_error(c), "handle_type 2") != NULL, "%s", gf_client_error(c));
    dr = (gf_device_region){.region_bytes = a.bytes * 2, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    ck_assert_int_eq(gf_client_device_region_add_fd(c, fd, &dr, &info, &status, REPLY_MS),
                     -EREMOTEIO);
    ck_assert_uint_eq(status, GF_ERR_BAD_REGION);
    ck_assert_msg(strstr(gf_client_error(c), "cuMemMap") != NULL, "%s", gf_client_error(c));
    dr.region_bytes = a.bytes - 4096;
    ck_assert_int_eq(gf_client_device_region_add_fd(c, fd, &dr, &info, &status, REPLY_MS),
                     -EREMOTEIO);
    ck_assert_uint_eq(status, GF_ERR_BAD_REGION);
    ck_assert_msg(strstr(gf_client_error(c), "granularity") != NULL, "%s", gf_client_error(c));
    /* An allocation of several granules (three made, four claimed): the
     * daemon's one check of a size is cuMemMap's refusal, which its
     * self-check at open found this driver makes. */
    gf__device_alloc g, three;
    int fd_g = -1, fd_three = -1;
    ck_assert_msg(gf__device_alloc_create(0, 1, &g, &fd_g, why, sizeof why) == 0, "%s", why);
    uint64_t granule = g.bytes; /* one byte rounds up to one granule */
    close(fd_g);
    gf__device_alloc_free(&g);
    ck_assert_msg(gf__device_alloc_create(0, 3 * granule, &three, &fd_three, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_uint_eq(three.bytes, 3 * granule);
    dr.region_bytes = 4 * granule;
    ck_assert_int_eq(gf_client_device_region_add_fd(c, fd_three, &dr, &info, &status, REPLY_MS),
                     -EREMOTEIO);
    ck_assert_uint_eq(status, GF_ERR_BAD_REGION);
    ck_assert_msg(strstr(gf_client_error(c), "cuMemMap") != NULL, "%s", gf_client_error(c));
    close(fd_three);
    gf__device_alloc_free(&three);
    /* The same allocation rightly: region 1 (ids count successes). */
    dr.region_bytes = a.bytes;
    ck_assert_int_eq(gf_client_device_region_add_fd(c, fd, &dr, &info, &status, REPLY_MS), 0);
    ck_assert_uint_eq(info.flags, GF_REGION_DEVICE);
    ck_assert_uint_eq(info.region_bytes, a.bytes);
    close(fd);
    uint32_t id = info.region_id;

    /* Descriptors: misaligned, past the end, overlapping, unknown region. */
    gf_shm_frame d = {.region_id = id,
                      .in_offset = 100,
                      .in_bytes = 4096,
                      .out_offset = 8192,
                      .out_capacity = 4096};
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 1, &d), 0);
    d.in_offset = 0;
    d.out_offset = 8192 + 8;
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 2, &d), 0);
    d.out_offset = a.bytes - 2048;
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 3, &d), 0);
    d.out_offset = 2048; /* overlaps the input */
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 4, &d), 0);
    d.out_offset = 8192;
    d.region_id = id + 7;
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 5, &d), 0);
    d.region_id = id; /* named as a shm frame: the region is a device region */
    ck_assert_int_eq(gf_client_send_frame_shm(c, 0, 6, &d), 0);
    expect_error(c, 1, GF_ERR_BAD_DESCRIPTOR, "256");
    expect_error(c, 2, GF_ERR_BAD_DESCRIPTOR, "256");
    expect_error(c, 3, GF_ERR_BAD_DESCRIPTOR, "region");
    expect_error(c, 4, GF_ERR_BAD_DESCRIPTOR, "overlap");
    expect_error(c, 5, GF_ERR_UNKNOWN_REGION, "region");
    expect_error(c, 6, GF_ERR_BAD_DESCRIPTOR, "device region");

    /* Everything refused, nothing lost: a good frame runs, echoed exactly. */
    gf_client_device_region view = {.id = id, .device = 0, .dev_ptr = a.dev_ptr, .bytes = a.bytes};
    unsigned char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    ck_assert_int_eq(gf_client_device_copy_to(&view, 0, in, sizeof in), 0);
    ck_assert_int_eq(gf_client_send_frame_device(c, 0, 7, &d), 0);
    expect_device_result(c, 7, id, 8192, 4096);
    ck_assert_int_eq(gf_client_device_copy_from(&view, 8192, out, sizeof out), 0);
    ck_assert_mem_eq(out, in, sizeof in);
    cJSON *st = gf_test_ck_stats(c);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.bad_region"), 5);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.frames"), 1);
    cJSON_Delete(st);
    gf__device_alloc_free(&a);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* For the graph cache: one slot (every frame of a pipeline meets the same
 * slot's graphs), no timing (every submission may run from a graph), the
 * two pipelines with a plugin stage. */
static const char graphs_json[] =
    "{\"slots\": 1, \"timing_events\": false, \"frame_timeout_ms\": 30000, \"pipelines\": ["
    "{\"name\": \"mlp\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\","
    " \"params\": {\"weights\": \"" MLP_WEIGHTS "\"}},"
    "{\"name\": \"classify\", \"stages\": ["
    "{\"kind\": \"normalize_u8\", \"params\": {\"width\": 32, \"height\": 32}},"
    "{\"kind\": \"plugin\", \"path\": \"" MLP_SO "\", \"params\": {\"weights\": \"" MLP_WEIGHTS
    "\"}}]}]}";
#define GRAPH_REGION_BYTES (4u << 20)

/* One frame of `p` reading at `in_off` and writing at `out_off` of `reg`,
 * whose every byte `mirror` holds as it should be: its input is written
 * there (and in the mirror), its result checked against the reference,
 * and every byte of the region outside the result as the mirror says. */
static void graph_frame(gf_client *c, const gf_pipeline *p, gf_client_device_region *reg,
                        unsigned char *mirror, uint64_t in_off, uint64_t out_off, uint64_t id) {
    size_t bytes = frame_bytes_for(p), ref_bytes = 0;
    void *in, *ref;
    uint64_t rng = 0x36 + id;
    make_frame(p, bytes, &rng, &in, &ref, &ref_bytes);
    ck_assert_uint_le(in_off + bytes, out_off);
    ck_assert_uint_le(out_off + ref_bytes, reg->bytes);
    ck_assert_int_eq(gf_client_device_copy_to(reg, in_off, in, bytes), 0);
    memcpy(mirror + in_off, in, bytes);
    gf_shm_frame d = {.region_id = reg->id,
                      .in_offset = in_off,
                      .in_bytes = bytes,
                      .out_offset = out_off,
                      .out_capacity = ref_bytes};
    ck_assert_int_eq(gf_client_send_frame_device(c, p->id, id, &d), 0);
    expect_device_result(c, id, reg->id, out_off, ref_bytes);
    unsigned char *back = malloc(reg->bytes);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(gf_client_device_copy_from(reg, 0, back, reg->bytes), 0);
    char why[512];
    ck_assert_msg(
        gf_pipeline_compare_result(p, back + out_off, ref, ref_bytes, why, sizeof why) == 0,
        "pipeline %s, frame %llu (in at %llu, out at %llu): %s", p->name, (unsigned long long)id,
        (unsigned long long)in_off, (unsigned long long)out_off, why);
    memcpy(mirror + out_off, back + out_off, ref_bytes);
    size_t k = gf_test_first_difference(back, mirror, reg->bytes);
    ck_assert_msg(k == reg->bytes,
                  "pipeline %s, frame %llu (out at %llu, %zu bytes): byte %zu of the region is "
                  "0x%02x, not 0x%02x",
                  p->name, (unsigned long long)id, (unsigned long long)out_off, ref_bytes, k,
                  back[k], mirror[k]);
    free(back);
    free(in);
    free(ref);
}

/* The graph cache keys a device frame's shape on its addresses in its
 * region (engine_cuda_graphs.c): for each pipeline with a plugin stage, a
 * frame at offsets A/B, one of the same length at C/D (a graph replayed
 * at A/B would write B, and D would keep its pattern), A/B again (a
 * replay, new data); then the region removed, a new one added (perhaps at
 * the same daemon address) and all again.  Every frame ran from a graph
 * (STATS's slots.graph_submissions), each result is exact against the
 * reference within the kind's tolerance, and no other byte of the region
 * moved. */
START_TEST(graph_cache_keyed_on_device_addresses) {
    gf_test_ck_daemon_start(&daemon_, graphs_json, "cuda");
    gf_client_device_region reg;
    gf_client *c = connect_with_region(0, GRAPH_REGION_BYTES, &reg);
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c, &n);
    ck_assert_uint_eq(n, 2);
    static const uint64_t at[3][2] = {
        {0, 256u << 10}, {(1u << 20) + 768, (3u << 20) + 256}, {0, 256u << 10}};
    unsigned char *mirror = malloc(GRAPH_REGION_BYTES);
    ck_assert_ptr_nonnull(mirror);
    uint64_t id = 1;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            ck_assert_int_eq(gf_client_device_region_destroy(c, &reg, REPLY_MS), 0);
            int rc = gf_client_device_region_create(c, 0, GRAPH_REGION_BYTES, &reg, REPLY_MS);
            ck_assert_msg(rc == 0, "a second region: %d (%s)", rc, gf_client_error(c));
        }
        ck_assert_uint_eq(reg.bytes, GRAPH_REGION_BYTES);
        for (uint64_t k = 0; k < GRAPH_REGION_BYTES; k++)
            mirror[k] = (unsigned char)(k * 131 + 7 + (uint64_t)pass);
        ck_assert_int_eq(gf_client_device_copy_to(&reg, 0, mirror, GRAPH_REGION_BYTES), 0);
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < 3; j++)
                graph_frame(c, &p[i], &reg, mirror, at[j][0], at[j][1], id++);
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "slots.graph_submissions"), id - 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.frames"), id - 1);
    free(mirror);
    gf_pipelines_free(p, n);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &reg, REPLY_MS), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* On a thread of its own with no CUDA context current: libgpuframe's
 * device calls leave it with none.  Returns NULL, or what went wrong. */
static void *context_unchanged(void *arg) {
    static char failure[512];
    (void)arg;
    gf__device_alloc a;
    int fd = -1;
    char why[256];
    if (gf__device_alloc_create(0, 1u << 20, &a, &fd, why, sizeof why) != 0) {
        snprintf(failure, sizeof failure, "create: %s", why);
        return failure;
    }
    close(fd);
    /* libcuda is loaded now (libgpuframe opened it). */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*get_current)(void **ctx) = NULL;
    void *sym = lib ? dlsym(lib, "cuCtxGetCurrent") : NULL;
    memcpy(&get_current, &sym, sizeof get_current);
    if (get_current == NULL) {
        snprintf(failure, sizeof failure, "no cuCtxGetCurrent in libcuda.so.1");
        return failure;
    }
    gf_client_device_region view = {.id = 1, .device = 0, .dev_ptr = a.dev_ptr, .bytes = a.bytes};
    unsigned char in[256], out[256];
    memset(in, 0x5a, sizeof in);
    void *ctx = (void *)1;
    const char *after = "create";
    if (get_current(&ctx) == 0 && ctx == NULL) {
        after = "copy_to";
        if (gf_client_device_copy_to(&view, 0, in, sizeof in) == 0 && get_current(&ctx) == 0 &&
            ctx == NULL) {
            after = "copy_from";
            if (gf_client_device_copy_from(&view, 0, out, sizeof out) == 0 &&
                get_current(&ctx) == 0 && ctx == NULL && memcmp(in, out, sizeof in) == 0) {
                after = "free";
                gf__device_alloc_free(&a);
                if (get_current(&ctx) == 0 && ctx == NULL)
                    after = NULL;
            }
        }
    }
    if (a.dev_ptr != 0)
        gf__device_alloc_free(&a);
    dlclose(lib);
    if (after == NULL)
        return NULL;
    snprintf(failure, sizeof failure, "after %s the thread's current context is %p, not none",
             after, ctx);
    return failure;
}

/* libgpuframe pushes its device's primary context for each call and pops
 * it after: a caller's current context (none here) is as it was. */
START_TEST(callers_context_unchanged) {
    pthread_t t;
    void *failure = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, context_unchanged, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &failure), 0);
    ck_assert_msg(failure == NULL, "%s", failure ? (const char *)failure : "");
}
END_TEST

/* max_device_region_bytes bounds what all connections hold mapped: past
 * it region_limit says so, the client's allocation is freed, and removing
 * a region makes room again. */
START_TEST(device_bytes_limit) {
    gf_test_ck_daemon_start(&daemon_,
                            "{\"max_device_region_bytes\": 4194304, \"pipelines\": ["
                            "{\"name\": \"echo\", \"kind\": \"echo\"}]}",
                            "cuda");
    gf_client_device_region a, b;
    gf_client *c = connect_with_region(0, 2u << 20, &a);
    ck_assert_int_eq(gf_client_device_region_create(c, 0, 4u << 20, &b, REPLY_MS), -EREMOTEIO);
    ck_assert_msg(strstr(gf_client_error(c), "would pass max_device_region_bytes 4194304") != NULL,
                  "%s", gf_client_error(c));
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.region_limit"), 1);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &a, REPLY_MS), 0);
    ck_assert_int_eq(gf_client_device_region_create(c, 0, 4u << 20, &b, REPLY_MS), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.region_bytes"), 4u << 20);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &b, REPLY_MS), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* The configuration of the tests above on the CPU engine, by the socket:
 * every pipeline takes the size frame_bytes_for picks, IN_FLIGHT of them
 * fit one region as run_verified lays them out, and they stream verified
 * (so that the one GPU run fails for nothing but the GPU). */
START_TEST(configuration_on_the_cpu_engine) {
    gf_test_ck_daemon_start(&daemon_, config_json, "cpu");
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c, &n);
    ck_assert_uint_eq(n, PIPELINES);
    char err[512];
    uint64_t rng = 99, id = 1;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = frame_bytes_for(&p[i]);
        int64_t out = gf_pipeline_output_bytes(&p[i], bytes, err, sizeof err);
        ck_assert_int_ge(out, 0);
        uint64_t room = IN_FLIGHT * (round_up(bytes, ALIGN) + round_up((uint64_t)out, ALIGN));
        ck_assert_msg(room <= REGION_BYTES, "pipeline %s: %llu bytes of region", p[i].name,
                      (unsigned long long)room);
        /* The same inputs and references as on the GPU, by the socket. */
        void *in[IN_FLIGHT], *ref[IN_FLIGHT];
        size_t ref_bytes[IN_FLIGHT];
        for (unsigned k = 0; k < IN_FLIGHT; k++) {
            make_frame(&p[i], bytes, &rng, &in[k], &ref[k], &ref_bytes[k]);
            ck_assert_int_eq(gf_client_send_frame(c, p[i].id, id + k, in[k], bytes), 0);
        }
        for (unsigned k = 0; k < IN_FLIGHT; k++) {
            gf_reply r;
            ck_assert_int_eq(gf_client_recv(c, &r, REPLY_MS), 0);
            ck_assert_msg(r.header.type == GF_MSG_RESULT, "pipeline %s: %s %s", p[i].name,
                          gf_msg_type_name(r.header.type), gf_status_name(r.header.status));
            ck_assert_uint_eq(r.payload_bytes, ref_bytes[k]);
            ck_assert_msg(gf_pipeline_compare_result(&p[i], r.payload, ref[k], ref_bytes[k], err,
                                                     sizeof err) == 0,
                          "pipeline %s: %s", p[i].name, err);
            free(in[k]);
            free(ref[k]);
        }
        id += IN_FLIGHT;
    }
    gf_pipelines_free(p, n);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* A region on device 1 moves a connection to device 1's shard.  Two
 * connections open at once go to the two shards (the fewest connections
 * take the next), one on each device, so exactly one of them moves,
 * whichever shard the daemon's start-up probe left next in turn. */
START_TEST(region_on_the_second_device) {
    gf_test_ck_daemon_start(&daemon_, two_json, "cuda");
    gf_client *c[2] = {gf_test_ck_connect(daemon_.socket_path),
                       gf_test_ck_connect(daemon_.socket_path)};
    gf_client_device_region reg[2];
    for (int k = 0; k < 2; k++) {
        int rc = gf_client_device_region_create(c[k], 1, 8u << 20, &reg[k], REPLY_MS);
        ck_assert_msg(rc == 0, "client %d: device region on device 1: %d (%s)", k, rc,
                      gf_client_error(c[k]));
        ck_assert_int_eq(reg[k].device, 1);
    }
    size_t n = 0;
    gf_pipeline *p = list_pipelines(c[0], &n);
    for (int k = 0; k < 2; k++) {
        run_verified(c[k], &p[0], &reg[k], IN_FLIGHT, 1, 7 + k);
        run_verified(c[k], &p[1], &reg[k], IN_FLIGHT, 11, 8 + k);
    }
    cJSON *st = gf_test_ck_stats(c[0]);
    ck_assert_uint_eq(gf_test_ck_u64(st, "device_regions.frames"), 4 * IN_FLIGHT);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.moved"), 1);
    cJSON_Delete(st);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(gf_client_device_region_destroy(c[k], &reg[k], REPLY_MS), 0);
        gf_client_close(c[k]);
    }
    gf_pipelines_free(p, n);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* A region on a device the daemon does not serve: refused bad_region
 * naming the device, before it is mapped; the connection is served on. */
START_TEST(region_on_an_unserved_device) {
    gf_test_ck_daemon_start(&daemon_,
                            "{\"devices\": \"0\", \"pipelines\": [{\"name\": \"echo\", "
                            "\"kind\": \"echo\"}]}",
                            "cuda");
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    gf_client_device_region reg;
    ck_assert_int_eq(gf_client_device_region_create(c, 1, 2u << 20, &reg, REPLY_MS), -EREMOTEIO);
    ck_assert_msg(strstr(gf_client_error(c), "on device 1, which the daemon does not serve") !=
                      NULL,
                  "%s", gf_client_error(c));
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.bad_region"), 1);
    ck_assert_int_eq(gf_client_device_region_create(c, 0, 2u << 20, &reg, REPLY_MS), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "device_regions.regions_open"), 1);
    ck_assert_int_eq(gf_client_device_region_destroy(c, &reg, REPLY_MS), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* CUDA device nodes (/dev/nvidia0, ...), counted without touching the
 * driver in this process (the tests fork). */
static size_t device_nodes(void) {
    glob_t g;
    size_t n = 0;
    if (glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0)
        n = g.gl_pathc;
    globfree(&g);
    return n;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *engine = gf_test_suite_engine(); /* skips without a GPU */
    if (strcmp(mode, "cpu") == 0) {
        Suite *s = suite_create("regions_config");
        TCase *tc = tcase_create("cpu");
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
        tcase_add_test(tc, configuration_on_the_cpu_engine);
        suite_add_tcase(s, tc);
        return gf_test_run(s);
    }
    if (strcmp(engine, "cuda") != 0) {
        printf("SKIP: device regions need the cuda engine (GF_TEST_ENGINE=%s)\n", engine);
        return GF_SKIP_CODE;
    }
    int two = strcmp(mode, "two") == 0;
    size_t nodes = device_nodes();
    if (two && nodes < 2) {
        printf("SKIP: a region on a second GPU needs two; /dev has %zu device node(s)\n", nodes);
        return GF_SKIP_CODE;
    }
    Suite *s = suite_create("regions_gpu");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    if (two) {
        tcase_add_test(tc, region_on_the_second_device);
        tcase_add_test(tc, region_on_an_unserved_device);
    } else {
        tcase_add_test(tc, every_pipeline_on_device_frames);
        tcase_add_test(tc, small_device_frames_gathered_in_batches);
        tcase_add_test(tc, device_frames_newest_only_with_a_class);
        tcase_add_test(tc, client_frees_its_allocation_mid_stream);
        tcase_add_test(tc, bad_handles_sizes_and_offsets);
        tcase_add_test(tc, device_bytes_limit);
        tcase_add_test(tc, callers_context_unchanged);
        tcase_add_test(tc, graph_cache_keyed_on_device_addresses);
    }
    suite_add_tcase(s, tc);
    return gf_test_run(s);
}

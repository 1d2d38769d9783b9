/* SPDX-License-Identifier: MIT */
/*
 * Integration suite: a real gpuframed on a temporary socket, driven through
 * libgpuframe and through raw sockets for requests the library would never
 * send.  Every RESULT is compared with its pipeline's C reference.
 *
 * The engine comes from $GF_TEST_ENGINE (cpu when unset): ctest runs the
 * suite once as test_integration (cpu) and once as test_integration_gpu
 * (cuda), which is skipped on a machine without an NVIDIA device node.  With
 * cuda the daemon must start on the cuda engine; failing to is a failure.
 *
 * Each TCase that shares a daemon starts it in an unchecked fixture (in the
 * runner process); its tests run in forked children that connect over the
 * socket, one after the other.  The fixture's teardown stops the daemon with
 * SIGTERM and requires exit status 0 and a log without errors or warnings;
 * a problem there fails the suite (gf_test_fail_outside_checks).  The drain
 * tests start their own daemon inside the test, because they must reap it
 * themselves.
 *
 * TCases:
 *   serve        LIST; pipelines by name (gf_client_pipeline_id); every
 *                pipeline at boundary sizes, windows 1 and 8;
 *                mixed pipelines in one window; writes split at odd places;
 *                STATS ordered among frames; 4 concurrent clients;
 *                backpressure (window 16 on 2 slots); half-close; exact
 *                counter deltas; a second daemon on the same socket.
 *   errors       too_large from the header alone; fatal headers (magic,
 *                version, type, flags) close only their connection; per-frame
 *                errors (unknown pipeline, bad length) keep it; a fatal
 *                header behind frames; LIST/STATS with a payload; more
 *                slot-less replies pipelined than the daemon keeps unwritten.
 *   disconnects  abrupt close with frames in flight; close mid-frame.
 *   drain        SIGTERM answers what was received, then exit 0 (own daemon).
 *   config       bad configurations and flags: exit status and reason.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

#define MIB (1024u * 1024u)
/* The test config's max_frame_bytes: 4 MiB keeps slot memory small. */
#define MAX_FRAME_BYTES (4u * MIB)
/* normalize_u8 geometries: a small image, and a big one (3 MiB in, 12 MiB out). */
#define RGB_SMALL_WIDTH  64
#define RGB_SMALL_HEIGHT 48
#define RGB_SMALL_BYTES  (RGB_SMALL_WIDTH * RGB_SMALL_HEIGHT * 3u)
#define RGB_BIG_WIDTH    1024
#define RGB_BIG_HEIGHT   1024
#define RGB_BIG_BYTES    (RGB_BIG_WIDTH * RGB_BIG_HEIGHT * 3u)
/* affine's and sincos's parameters in the test config. */
#define AFFINE_A     2.0f
#define AFFINE_B     0.5f
#define SINCOS_ITERS 8u
/* The daemon's staging boundary (conn.h GF_STAGED_PAYLOAD_MAX_BYTES):
 * payloads up to it may be copied from the header buffer, the rest is read
 * straight into the slot. */
#define STAGED_BOUNDARY_BYTES 16384u
/* A pipeline id the test config does not have. */
#define UNKNOWN_PIPELINE_ID 99u
/* How long the tests wait for the daemon to settle (idle, counters). */
#define SETTLE_TIMEOUT_MS 10000
/* Per-test limit of Check; the daemon's own timeouts are far shorter. */
#define TEST_TIMEOUT_S 120
/* Reply timeout where no reply needs compute (errors, STATS): short, so that
 * a daemon that never answers costs a failing test seconds, not minutes. */
#define QUICK_REPLY_TIMEOUT_MS 5000
/* Requests pipelined in one write by the loose-reply test: more than the
 * daemon's GF_CONN_MAX_LOOSE_REPLIES (64) replies that hold no slot. */
#define LOOSE_REQUEST_COUNT 100
/* Error messages of the helpers. */
#define ERR_BYTES (2 * GF_TEST_ERR_MAX)

/* Pipeline ids of the test config, in its order. */
enum { P_ECHO, P_AFFINE, P_SINCOS, P_RGB_SMALL, P_RGB_BIG, P_COUNT };

/* The daemon's config shared by every fixture TCase.  Log level debug, so
 * that a failing test's log shows each refused frame. */
static const char test_config[] =
    "{\n"
    "  \"slots\": 2,\n"
    "  \"max_frame_bytes\": 4194304,\n"
    "  \"frame_timeout_ms\": 30000,\n"
    "  \"log_level\": \"debug\",\n"
    "  \"pipelines\": [\n"
    "    {\"name\": \"echo\", \"kind\": \"echo\"},\n"
    "    {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5}},\n"
    "    {\"name\": \"sincos\", \"kind\": \"sincos\", \"params\": {\"iters\": 8}},\n"
    "    {\"name\": \"rgb_small\", \"kind\": \"normalize_u8\",\n"
    "     \"params\": {\"width\": 64, \"height\": 48}},\n"
    "    {\"name\": \"rgb_big\", \"kind\": \"normalize_u8\",\n"
    "     \"params\": {\"width\": 1024, \"height\": 1024}}\n"
    "  ]\n"
    "}\n";

static const char *const pipeline_names[P_COUNT] = {"echo", "affine", "sincos", "rgb_small",
                                                    "rgb_big"};
static const char *const pipeline_kinds[P_COUNT] = {"echo", "affine", "sincos", "normalize_u8",
                                                    "normalize_u8"};

static const char *g_engine;      /* "cpu" or "cuda": $GF_TEST_ENGINE       */
static gf_test_daemon g_daemon;   /* the current fixture TCase's daemon     */
static int g_failed_before_setup; /* failures counted when it started       */
static gf_pipeline *g_pipelines;  /* LIST of the fixture daemon (per test)  */
static size_t g_pipeline_count;

/* ---- fixture ------------------------------------------------------------------ */

/* Unchecked setup (runner process): start the TCase's daemon. */
static void daemon_setup(void) {
    char err[ERR_BYTES];

    g_failed_before_setup = gf_test_failed_so_far();
    int rc = gf_test_daemon_start(&g_daemon, test_config, g_engine, err, sizeof err);
    ck_assert_msg(rc == 0, "cannot start gpuframed with the %s engine: %s", g_engine, err);
}

/*
 * Unchecked teardown (runner process; Check assertions are not allowed
 * here): SIGTERM, exit status 0, and no failure lines in the log.  Problems
 * are printed and fail the suite through gf_test_fail_outside_checks.  The
 * daemon's directory is kept when anything in the TCase failed.
 */
static void daemon_teardown(void) {
    char desc[96], lines[4096], tail[4096];
    int status = -1, bad = 0;
    int rc = gf_test_daemon_stop(&g_daemon, &status);

    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL: gpuframed (%s) did not stop cleanly after SIGTERM: %s%s\n", g_engine,
                gf_test_describe_status(status, desc, sizeof desc),
                rc != 0 ? ", killed after a timeout" : "");
        bad = 1;
    }
    size_t n = gf_test_log_failures(g_daemon.log_path, lines, sizeof lines);
    if (n > 0) {
        fprintf(stderr, "FAIL: gpuframed logged %zu error/warning line(s):\n%s", n, lines);
        bad = 1;
    }
    if (bad || gf_test_failed_so_far() > g_failed_before_setup) {
        gf_test_log_tail(g_daemon.log_path, 40, tail, sizeof tail);
        fprintf(stderr, "gpuframed log %s (kept), last lines:\n%s\n", g_daemon.log_path, tail);
    } else {
        gf_test_daemon_cleanup(&g_daemon);
    }
    if (bad)
        gf_test_fail_outside_checks();
}

/* ---- helpers for tests ----------------------------------------------------------- */

/* Connections to the fixture daemon. */
static gf_client *connect_client(void) {
    return gf_test_ck_connect(g_daemon.socket_path);
}

static int raw_connect(void) {
    return gf_test_ck_raw_connect(g_daemon.socket_path);
}

/* The fixture daemon's pipeline `id`, from a LIST sent on `c` once per test. */
static const gf_pipeline *pipeline(gf_client *c, uint32_t id) {
    if (g_pipelines == NULL)
        g_pipelines = gf_test_ck_list(c, &g_pipeline_count);
    ck_assert_uint_lt(id, g_pipeline_count);
    return &g_pipelines[id];
}

/* after.path - before.path, asserting that the counter did not go down. */
static uint64_t stat_delta(const cJSON *after, const cJSON *before, const char *path) {
    uint64_t a = gf_test_ck_u64(after, path), b = gf_test_ck_u64(before, path);

    ck_assert_msg(a >= b, "%s went down from %" PRIu64 " to %" PRIu64, path, b, a);
    return a - b;
}

/* A STATS counter and how much a test expects it to have grown. */
typedef struct counter_delta {
    const char *counter;
    uint64_t delta;
} counter_delta;

/* Asserts that each of want[count] grew from `before` to `after` by exactly
 * its delta. */
static void expect_deltas(const cJSON *after, const cJSON *before, const counter_delta *want,
                          size_t count) {
    for (size_t i = 0; i < count; i++) {
        uint64_t got = stat_delta(after, before, want[i].counter);
        ck_assert_msg(got == want[i].delta, "%s grew by %" PRIu64 ", expected %" PRIu64,
                      want[i].counter, got, want[i].delta);
    }
}

/* Waits until the daemon is idle with `open` connections; returns its STATS. */
static cJSON *wait_idle(gf_client *c, uint64_t open) {
    cJSON *st = NULL;

    gf_test_ck_wait_idle(c, open, SETTLE_TIMEOUT_MS, &st);
    return st;
}

/* Asserts that every frame the daemon took has ended one way: answered,
 * dropped, truncated or refused (stats.h).  Only true when it is idle, and
 * only on a daemon that refused no LIST or STATS carrying a payload (those
 * count as bad_length too): no test of the serve or disconnects TCase sends
 * one. */
static void assert_frames_add_up(const cJSON *st) {
    uint64_t refused = 0;

    ck_assert_msg(gf_test_frame_rejections(st, &refused) == 0, "STATS lacks rejected.*");
    uint64_t received = gf_test_ck_u64(st, "frames.received");
    uint64_t answered = gf_test_ck_u64(st, "frames.answered");
    uint64_t dropped = gf_test_ck_u64(st, "frames.dropped");
    uint64_t truncated = gf_test_ck_u64(st, "frames.truncated");
    ck_assert_msg(received == answered + dropped + truncated + refused,
                  "frames do not add up on an idle daemon: received %" PRIu64
                  " != answered %" PRIu64 " + dropped %" PRIu64 " + truncated %" PRIu64
                  " + refused %" PRIu64,
                  received, answered, dropped, truncated, refused);
}

/* Streams `count` verified frames of `bytes` through pipeline `id`. */
static void stream(gf_client *c, uint32_t id, size_t bytes, unsigned count, unsigned window,
                   uint64_t first_frame_id) {
    gf_test_ck_stream(c, &(gf_test_stream){.pipeline = pipeline(c, id),
                                           .frame_bytes = bytes,
                                           .frame_count = count,
                                           .window = window,
                                           .first_frame_id = first_frame_id,
                                           .seed = first_frame_id * 7919u + bytes + id});
}

/* A NUL-terminated copy of an ERROR reply's text. */
static void error_text(const gf_reply *r, char *out, size_t out_len) {
    size_t n = r->payload_bytes < out_len - 1 ? r->payload_bytes : out_len - 1;

    if (n > 0)
        memcpy(out, r->payload, n);
    out[n] = '\0';
}

/* ---- 1. LIST ------------------------------------------------------------------------ */

START_TEST(list_returns_configured_pipelines) {
    gf_client *c = connect_client();
    char *json = NULL, why[512];
    gf_pipeline *p = NULL;
    size_t n = 0;

    int rc = gf_client_request_json(c, GF_MSG_LIST, &json, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "LIST: %s (%s)", strerror(-rc), gf_client_error(c));
    ck_assert_msg(gf_pipelines_from_json(json, &p, &n, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(n, P_COUNT);
    for (uint32_t i = 0; i < P_COUNT; i++) {
        ck_assert_uint_eq(p[i].id, i);
        ck_assert_str_eq(p[i].name, pipeline_names[i]);
        ck_assert_ptr_nonnull(p[i].stages[0].kind);
        ck_assert_str_eq(p[i].stages[0].kind->name, pipeline_kinds[i]);
    }
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.a, AFFINE_A);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.b, AFFINE_B);
    ck_assert_uint_eq(p[P_SINCOS].stages[0].params.iters, SINCOS_ITERS);
    gf_params imagenet;
    gf_params_defaults(gf_pipeline_kind_find("normalize_u8"), &imagenet);
    const uint32_t widths[2] = {RGB_SMALL_WIDTH, RGB_BIG_WIDTH};
    const uint32_t heights[2] = {RGB_SMALL_HEIGHT, RGB_BIG_HEIGHT};
    for (unsigned k = 0; k < 2; k++) {
        const gf_params *q = &p[P_RGB_SMALL + k].stages[0].params;
        ck_assert_uint_eq(q->width, widths[k]);
        ck_assert_uint_eq(q->height, heights[k]);
        for (unsigned ch = 0; ch < 3; ch++) {
            ck_assert_float_eq(q->mean[ch], imagenet.mean[ch]);
            ck_assert_float_eq(q->std[ch], imagenet.std[ch]);
        }
    }

    /* The wire form itself, independently of gf_pipelines_from_json. */
    cJSON *root = cJSON_Parse(json);
    ck_assert_ptr_nonnull(root);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "pipelines");
    ck_assert(cJSON_IsArray(arr));
    ck_assert_int_eq(cJSON_GetArraySize(arr), P_COUNT);
    for (int i = 0; i < P_COUNT; i++) {
        const cJSON *e = cJSON_GetArrayItem(arr, i);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *doc = cJSON_GetObjectItemCaseSensitive(e, "doc");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(e, "params");
        ck_assert(cJSON_IsNumber(id));
        ck_assert_int_eq(id->valueint, i);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring,
                         pipeline_names[i]);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "kind")->valuestring,
                         pipeline_kinds[i]);
        ck_assert_msg(cJSON_IsString(doc) && doc->valuestring[0] != '\0',
                      "pipeline %d has no doc string", i);
        ck_assert(cJSON_IsObject(params));
    }
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, P_ECHO), "params");
    ck_assert_int_eq(cJSON_GetArraySize(pa), 0);
    pa = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, P_AFFINE), "params");
    ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(pa, "a")->valuedouble, 2.0);
    ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(pa, "b")->valuedouble, 0.5);
    pa = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, P_SINCOS), "params");
    ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(pa, "iters")->valuedouble, 8.0);
    pa = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, P_RGB_BIG), "params");
    ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(pa, "width")->valuedouble, 1024.0);
    ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(pa, "height")->valuedouble, 1024.0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pa, "mean")), 3);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pa, "std")), 3);
    cJSON_Delete(root);

    /* The daemon runs the engine it was asked for (cuda must really be cuda). */
    cJSON *st = gf_test_ck_stats(c);
    const char *engine = gf_test_json_str(st, "engine");
    ck_assert_ptr_nonnull(engine);
    ck_assert_str_eq(engine, g_engine);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.per_shard"), 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.count"), 2 * gf_test_ck_u64(st, "shard_count"));
    cJSON_Delete(st);

    free(p);
    free(json);
    gf_client_close(c);
}
END_TEST

/* gf_client_pipeline_id: every name to its id, from one LIST per connection;
 * an unknown name says which there are; the first lookup needs the
 * connection to itself. */
START_TEST(pipeline_id_looks_names_up_once) {
    gf_client *c = connect_client();
    uint32_t id;

    uint64_t lists = gf_test_ck_stat(c, "requests.list");
    for (int round = 0; round < 2; round++) {
        for (uint32_t i = 0; i < P_COUNT; i++) {
            id = UNKNOWN_PIPELINE_ID;
            int rc = gf_client_pipeline_id(c, pipeline_names[i], &id, QUICK_REPLY_TIMEOUT_MS);
            ck_assert_msg(rc == 0, "%s: %s (%s)", pipeline_names[i], strerror(-rc),
                          gf_client_error(c));
            ck_assert_uint_eq(id, i);
        }
    }
    id = UNKNOWN_PIPELINE_ID;
    ck_assert_int_eq(gf_client_pipeline_id(c, "ech", &id, QUICK_REPLY_TIMEOUT_MS), -ENOENT);
    ck_assert_uint_eq(id, UNKNOWN_PIPELINE_ID);
    ck_assert_str_eq(gf_client_error(c), "the daemon has no pipeline 'ech' (it has: echo, affine, "
                                         "sincos, rgb_small, rgb_big)");
    ck_assert_int_eq(gf_client_pipeline_id(c, "", &id, QUICK_REPLY_TIMEOUT_MS), -EINVAL);
    ck_assert_uint_eq(gf_test_ck_stat(c, "requests.list"), lists + 1);
    gf_client_close(c);

    /* A frame in flight: the first lookup would have to wait behind it. */
    static const unsigned char frame[16] = {1, 2, 3};
    gf_reply r;
    c = connect_client();
    ck_assert_int_eq(gf_client_send_frame(c, P_ECHO, 0, frame, sizeof frame), 0);
    ck_assert_int_eq(gf_client_pipeline_id(c, "echo", &id, QUICK_REPLY_TIMEOUT_MS), -EBUSY);
    ck_assert_int_eq(gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS), 0);
    ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
    ck_assert_int_eq(gf_client_pipeline_id(c, "sincos", &id, QUICK_REPLY_TIMEOUT_MS), 0);
    ck_assert_uint_eq(id, P_SINCOS);
    gf_client_close(c);
}
END_TEST

/* ---- 2. every pipeline at several sizes ------------------------------------------- */

static const struct size_case {
    uint32_t pipeline;
    size_t bytes;
    unsigned frames; /* per window */
} size_cases[] = {
    {P_ECHO, 0, 16},
    {P_ECHO, 1, 16},
    {P_ECHO, STAGED_BOUNDARY_BYTES - 1, 16},
    {P_ECHO, STAGED_BOUNDARY_BYTES, 16},
    {P_ECHO, STAGED_BOUNDARY_BYTES + 1, 16},
    {P_ECHO, 65536, 16},
    {P_ECHO, MIB + 1, 8},
    {P_ECHO, MAX_FRAME_BYTES, 8},
    {P_AFFINE, 0, 16},
    {P_AFFINE, 4, 16},
    {P_AFFINE, 4096, 16},
    {P_AFFINE, 4100, 16},
    {P_AFFINE, MIB, 8},
    {P_AFFINE, MAX_FRAME_BYTES, 8},
    {P_SINCOS, 0, 16},
    {P_SINCOS, 4, 16},
    {P_SINCOS, 4096, 16},
    {P_SINCOS, 4100, 16},
    {P_SINCOS, MIB, 4},
    {P_SINCOS, MAX_FRAME_BYTES, 4},
    {P_RGB_SMALL, RGB_SMALL_BYTES, 16},
    {P_RGB_BIG, RGB_BIG_BYTES, 4},
};
#define SIZE_CASE_COUNT (sizeof size_cases / sizeof size_cases[0])

/* One pipeline at one size, with window 1 and then window 8 on one connection.
 * A sanitized build sends two frames of a megabyte or more per window, not
 * four or eight: each size, the window and every check stay, without the
 * sanitizers' 20 to 40 times slower arithmetic on the rest (sincos at 4 MiB
 * took 40 s under TSan). */
START_TEST(pipeline_sizes_verified) {
    const struct size_case *sc = &size_cases[_i];
    gf_client *c = connect_client();
    unsigned frames = sc->bytes >= MIB && gf_test_time_scale() > 1 ? 2 : sc->frames;

    stream(c, sc->pipeline, sc->bytes, frames, 1, 1000);
    stream(c, sc->pipeline, sc->bytes, frames, 8, 2000);
    gf_client_close(c);
}
END_TEST

/* Frames of every pipeline and many sizes interleaved in one window: replies
 * stay in order across pipelines and each matches its own reference. */
START_TEST(mixed_pipelines_one_window) {
    static const struct {
        uint32_t pipeline;
        size_t bytes;
    } specs[] = {
        {P_ECHO, STAGED_BOUNDARY_BYTES + 1},
        {P_AFFINE, 4100},
        {P_SINCOS, 4},
        {P_RGB_SMALL, RGB_SMALL_BYTES},
        {P_ECHO, 0},
        {P_AFFINE, MIB},
        {P_ECHO, 1},
        {P_SINCOS, 65536},
        {P_RGB_BIG, RGB_BIG_BYTES},
        {P_ECHO, STAGED_BOUNDARY_BYTES - 1},
    };
    enum { SPEC_COUNT = sizeof specs / sizeof specs[0], FRAMES = 40, WINDOW = 8 };
    void *in[SPEC_COUNT], *ref[SPEC_COUNT];
    size_t ref_bytes[SPEC_COUNT];
    uint64_t rng = 12345;
    char err[ERR_BYTES];
    gf_client *c = connect_client();

    for (unsigned k = 0; k < SPEC_COUNT; k++) {
        int rc = gf_test_make_frame(pipeline(c, specs[k].pipeline), specs[k].bytes, &rng, &in[k],
                                    &ref[k], &ref_bytes[k], err, sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
    }
    unsigned sent = 0, got = 0;
    while (got < FRAMES) {
        for (; sent < FRAMES && sent - got < WINDOW; sent++) {
            unsigned k = sent % SPEC_COUNT;
            ck_assert_int_eq(
                gf_client_send_frame(c, specs[k].pipeline, 5000 + sent, in[k], specs[k].bytes), 0);
        }
        gf_reply r;
        int rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "reply %u: %s (%s)", got, strerror(-rc), gf_client_error(c));
        unsigned k = got % SPEC_COUNT;
        rc = gf_test_check_result(pipeline(c, specs[k].pipeline), &r, 5000 + got, ref[k],
                                  ref_bytes[k], err, sizeof err);
        ck_assert_msg(rc == 0, "%s %zu bytes: %s", pipeline_names[specs[k].pipeline],
                      specs[k].bytes, err);
        got++;
    }
    for (unsigned k = 0; k < SPEC_COUNT; k++) {
        free(in[k]);
        free(ref[k]);
    }
    gf_client_close(c);
}
END_TEST

/* Frames of three pipelines sent in pieces that cut headers and payloads at
 * odd places (a header in three reads, a payload's end together with the
 * next header): the daemon reassembles them all. */
START_TEST(split_writes_reassembled) {
    static const struct {
        uint32_t pipeline;
        size_t bytes;
        uint64_t frame_id;
    } frames[] = {
        {P_ECHO, 5000, UINT64_MAX}, {P_AFFINE, 4100, 0}, {P_RGB_SMALL, RGB_SMALL_BYTES, 42}};
    static const size_t chunks[] = {1, 7, 24, 31, 32, 33, 4095, 4097, 2};
    enum { N = sizeof frames / sizeof frames[0] };
    void *in[N], *ref[N];
    size_t ref_bytes[N], total = 0, off = 0;
    uint64_t rng = 777;
    char err[ERR_BYTES];
    gf_client *lister = connect_client();

    for (unsigned i = 0; i < N; i++)
        total += GF_HEADER_BYTES + frames[i].bytes;
    unsigned char *wire = malloc(total), *payload = malloc(4 * RGB_SMALL_BYTES);
    ck_assert_ptr_nonnull(wire);
    ck_assert_ptr_nonnull(payload);
    for (unsigned i = 0; i < N; i++) {
        const gf_pipeline *p = pipeline(lister, frames[i].pipeline);
        int rc = gf_test_make_frame(p, frames[i].bytes, &rng, &in[i], &ref[i], &ref_bytes[i], err,
                                    sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
        gf_header h = gf_test_header(GF_MSG_FRAME, frames[i].frame_id, p->id, frames[i].bytes);
        gf_header_encode(&h, wire + off);
        memcpy(wire + off + GF_HEADER_BYTES, in[i], frames[i].bytes);
        off += GF_HEADER_BYTES + frames[i].bytes;
    }

    int fd = raw_connect();
    off = 0;
    for (unsigned k = 0; off < total; k++) {
        size_t n = chunks[k % (sizeof chunks / sizeof chunks[0])];
        if (n > total - off)
            n = total - off;
        ck_assert_int_eq(gf_test_raw_send(fd, wire + off, n), 0);
        off += n;
        gf_test_sleep_ms(2); /* most pieces then arrive in reads of their own */
    }
    for (unsigned i = 0; i < N; i++) {
        gf_header rh;
        int rc = gf_test_raw_recv_reply(fd, &rh, payload, 4 * RGB_SMALL_BYTES,
                                        GF_TEST_REPLY_TIMEOUT_MS, err, sizeof err);
        ck_assert_msg(rc == 0, "reply %u: %s", i + 1, err);
        gf_reply r = {.header = rh, .payload = payload, .payload_bytes = (size_t)rh.payload_bytes};
        rc = gf_test_check_result(pipeline(lister, frames[i].pipeline), &r, frames[i].frame_id,
                                  ref[i], ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "frame sent in pieces: %s", err);
    }
    close(fd);
    for (unsigned i = 0; i < N; i++) {
        free(in[i]);
        free(ref[i]);
    }
    free(wire);
    free(payload);
    gf_client_close(lister);
}
END_TEST

/* A STATS request between frames is answered in its place: after the
 * replies to the frames before it, before the reply to the frame after. */
START_TEST(stats_between_frames_keeps_order) {
    enum { BEFORE = 3 };
    char err[ERR_BYTES];
    uint64_t rng = 2024;
    void *in, *ref, *in2, *ref2;
    size_t ref_bytes, ref2_bytes;
    gf_client *c = connect_client();
    const gf_pipeline *sincos = pipeline(c, P_SINCOS), *echo = pipeline(c, P_ECHO);

    ck_assert_int_eq(
        gf_test_make_frame(sincos, 65536, &rng, &in, &ref, &ref_bytes, err, sizeof err), 0);
    ck_assert_int_eq(gf_test_make_frame(echo, 100, &rng, &in2, &ref2, &ref2_bytes, err, sizeof err),
                     0);
    for (unsigned i = 0; i < BEFORE; i++)
        ck_assert_int_eq(gf_client_send_frame(c, P_SINCOS, i, in, 65536), 0);
    ck_assert_int_eq(gf_client_send_request(c, GF_MSG_STATS, 77), 0);
    ck_assert_int_eq(gf_client_send_frame(c, P_ECHO, 78, in2, 100), 0);

    gf_reply r;
    for (unsigned i = 0; i < BEFORE; i++) {
        int rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "reply %u: %s (%s)", i, strerror(-rc), gf_client_error(c));
        rc = gf_test_check_result(sincos, &r, i, ref, ref_bytes, err, sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
    }
    int rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "STATS reply: %s (%s)", strerror(-rc), gf_client_error(c));
    ck_assert_uint_eq(r.header.type, GF_MSG_STATS);
    ck_assert_uint_eq(r.header.frame_id, 77);
    char *json = strndup(r.payload, r.payload_bytes);
    cJSON *st = cJSON_Parse(json);
    ck_assert_msg(st != NULL, "STATS reply is not JSON: %.200s", json);
    uint64_t received = gf_test_ck_u64(st, "frames.received");
    ck_assert_uint_ge(received, BEFORE);
    cJSON_Delete(st);
    free(json);
    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "last reply: %s (%s)", strerror(-rc), gf_client_error(c));
    rc = gf_test_check_result(echo, &r, 78, ref2, ref2_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    free(in);
    free(ref);
    free(in2);
    free(ref2);
    gf_client_close(c);
}
END_TEST

/* A caller that waits on gf_client_fd in its own poll() (an event loop's
 * way): with nothing asked, gf_client_recv without waiting says there is no
 * reply; the sent frame is written by gf_client_flush, the socket turns
 * readable with its reply, and gf_client_recv without waiting takes it. */
START_TEST(waiting_on_the_client_fd) {
    char err[ERR_BYTES];
    uint64_t rng = 35;
    void *in, *ref;
    size_t ref_bytes;
    gf_client *c = connect_client();
    const gf_pipeline *sincos = pipeline(c, P_SINCOS);
    ck_assert_int_eq(
        gf_test_make_frame(sincos, 65536, &rng, &in, &ref, &ref_bytes, err, sizeof err), 0);

    int fd = gf_client_fd(c);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    gf_reply r;
    ck_assert_int_eq(gf_client_recv(c, &r, 0), -ETIMEDOUT); /* nothing asked */
    ck_assert_int_eq(gf_client_send_frame(c, P_SINCOS, 9, in, 65536), 0);
    ck_assert_int_eq(gf_client_flush(c, GF_TEST_REPLY_TIMEOUT_MS), 0);
    int rc;
    do {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ck_assert_int_eq(poll(&pfd, 1, GF_TEST_REPLY_TIMEOUT_MS), 1);
        ck_assert(pfd.revents & POLLIN);
        rc = gf_client_recv(c, &r, 0); /* a part of the reply may have come */
    } while (rc == -ETIMEDOUT);
    ck_assert_msg(rc == 0, "%s (%s)", strerror(-rc), gf_client_error(c));
    ck_assert_msg(gf_test_check_result(sincos, &r, 9, ref, ref_bytes, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_uint_eq(gf_client_in_flight(c), 0);
    free(in);
    free(ref);
    gf_client_close(c);
}
END_TEST

/* ---- 3. too large: refused from the header ------------------------------------------ */

static const uint64_t too_large_sizes[] = {MAX_FRAME_BYTES + 1ull, 1ull << 40, UINT64_MAX};

START_TEST(too_large_refused_from_header) {
    uint64_t announced = too_large_sizes[_i];
    char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1] = "", want[32];
    gf_client *s = connect_client();
    cJSON *before = gf_test_ck_stats(s);
    int fd = raw_connect();
    gf_header h = gf_test_header(GF_MSG_FRAME, 77, P_ECHO, announced);

    /* The header alone: the ERROR must come without a single payload byte. */
    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    gf_header r;
    int rc = gf_test_raw_recv_reply(fd, &r, text, GF_ERROR_TEXT_MAX_BYTES, GF_TEST_REPLY_TIMEOUT_MS,
                                    err, sizeof err);
    ck_assert_msg(rc == 0, "no ERROR for a header announcing %" PRIu64 " bytes: %s", announced,
                  err);
    text[r.payload_bytes] = '\0';
    ck_assert_uint_eq(r.type, GF_MSG_ERROR);
    ck_assert_msg(r.status == GF_ERR_TOO_LARGE, "status %u (%s), expected too_large: \"%s\"",
                  (unsigned)r.status, gf_status_name(r.status), text);
    ck_assert_uint_eq(r.frame_id, 77);
    ck_assert_uint_eq(r.pipeline_id, P_ECHO);
    snprintf(want, sizeof want, "%" PRIu64, announced);
    ck_assert_msg(strstr(text, want) != NULL, "ERROR text \"%s\" does not name %s", text, want);

    /* Then the daemon closes the connection. */
    size_t extra = 0;
    rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "connection not closed after too_large: %s (%zu more bytes)",
                  strerror(-rc), extra);
    close(fd);

    cJSON *after = wait_idle(s, 1);
    const counter_delta want_deltas[] = {{"rejected.too_large", 1},
                                         {"connections.rejected", 1},
                                         {"frames.received", 0},
                                         {"bytes.in", 0}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    cJSON_Delete(before);
    cJSON_Delete(after);
    stream(s, P_ECHO, 4096, 4, 2, 1);
    gf_client_close(s);
}
END_TEST

/* ---- 4. fatal header errors ------------------------------------------------------- */

static const struct bad_header {
    const char *what;
    uint32_t status;
} bad_headers[] = {
    {"wrong magic", GF_ERR_BAD_MAGIC},
    {"wrong version", GF_ERR_BAD_VERSION},
    {"RESULT sent as a request", GF_ERR_BAD_TYPE},
    {"nonzero flags", GF_ERR_BAD_FLAGS},
};

/* A forged header (with a 16-byte payload the daemon must not read), then
 * the ERROR and the close; a client connected before and one connected
 * after stream verified frames undisturbed. */
START_TEST(bad_header_is_fatal_to_its_connection_only) {
    const struct bad_header *bh = &bad_headers[_i];
    unsigned char buf[GF_HEADER_BYTES + 16];
    char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1] = "";
    gf_client *before_conn = connect_client();
    cJSON *before = gf_test_ck_stats(before_conn);

    stream(before_conn, P_AFFINE, 4096, 4, 4, 1);

    gf_header h = gf_test_header(GF_MSG_FRAME, 4242, P_ECHO, 16);
    if (bh->status == GF_ERR_BAD_VERSION)
        h.version = GF_PROTOCOL_VERSION_MAX + 1;
    if (bh->status == GF_ERR_BAD_TYPE)
        h.type = GF_MSG_RESULT;
    if (bh->status == GF_ERR_BAD_FLAGS)
        h.flags = 1;
    gf_header_encode(&h, buf);
    if (bh->status == GF_ERR_BAD_MAGIC)
        memcpy(buf, "GFRX", 4);
    memset(buf + GF_HEADER_BYTES, 0x33, 16);

    int fd = raw_connect();
    ck_assert_int_eq(gf_test_raw_send(fd, buf, sizeof buf), 0);
    gf_header r;
    int rc = gf_test_raw_recv_reply(fd, &r, text, GF_ERROR_TEXT_MAX_BYTES, GF_TEST_REPLY_TIMEOUT_MS,
                                    err, sizeof err);
    ck_assert_msg(rc == 0, "%s: no ERROR: %s", bh->what, err);
    text[r.payload_bytes] = '\0';
    ck_assert_uint_eq(r.type, GF_MSG_ERROR);
    ck_assert_msg(r.status == bh->status, "%s: status %u (%s), expected %s: \"%s\"", bh->what,
                  (unsigned)r.status, gf_status_name(r.status), gf_status_name(bh->status), text);
    ck_assert_uint_eq(r.frame_id, 4242); /* the bytes at frame_id's offset */
    ck_assert_msg(r.payload_bytes > 0, "%s: ERROR without text", bh->what);
    size_t extra = 0;
    rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "%s: connection not closed: %s (%zu more bytes)", bh->what,
                  strerror(-rc), extra);
    close(fd);

    /* The connection opened before is unaffected, and so is a new one. */
    stream(before_conn, P_AFFINE, 4096, 4, 4, 10);
    gf_client *after_conn = connect_client();
    stream(after_conn, P_RGB_SMALL, RGB_SMALL_BYTES, 4, 4, 1);
    gf_client_close(after_conn);

    char key[64];
    snprintf(key, sizeof key, "rejected.%s", gf_status_name(bh->status));
    cJSON *after = wait_idle(before_conn, 1);
    const counter_delta want_deltas[] = {
        {key, 1}, {"connections.rejected", 1}, {"frames.received", 12}, {"frames.answered", 12}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(before_conn);
}
END_TEST

/* ---- 5. per-frame errors keep the connection ------------------------------------------- */

static const struct bad_frame {
    uint32_t pipeline;
    size_t bytes;
    uint32_t status;
    const char *must_name[2]; /* substrings the ERROR text must hold */
} bad_frames[] = {
    {UNKNOWN_PIPELINE_ID, 1000, GF_ERR_UNKNOWN_PIPELINE, {"pipeline", "99"}},
    /* A payload far beyond the staging buffer: discarded over many reads. */
    {UNKNOWN_PIPELINE_ID, 300000, GF_ERR_UNKNOWN_PIPELINE, {"pipeline", "99"}},
    {P_AFFINE, 10, GF_ERR_BAD_LENGTH, {"affine", "10"}},
    {P_SINCOS, 4097, GF_ERR_BAD_LENGTH, {"sincos", "4097"}},
    {P_RGB_SMALL, RGB_SMALL_BYTES - 1, GF_ERR_BAD_LENGTH, {"rgb_small", "9215"}},
    {P_RGB_SMALL, RGB_SMALL_BYTES + 1, GF_ERR_BAD_LENGTH, {"rgb_small", "9217"}},
    {P_RGB_BIG, RGB_BIG_BYTES - 1, GF_ERR_BAD_LENGTH, {"rgb_big", "3145727"}},
};

/* good frame, bad frame, good frame pipelined on one connection: a RESULT,
 * the ERROR, a RESULT, in order; then the connection streams on. */
START_TEST(bad_frame_costs_only_that_frame) {
    const struct bad_frame *bf = &bad_frames[_i];
    char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1];
    uint64_t rng = 99 + (uint64_t)_i;
    void *good_in, *good_ref;
    size_t good_ref_bytes;
    gf_client *c = connect_client();
    const gf_pipeline *echo = pipeline(c, P_ECHO);
    cJSON *before = gf_test_ck_stats(c);

    int rc =
        gf_test_make_frame(echo, 5000, &rng, &good_in, &good_ref, &good_ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    unsigned char *bad = malloc(bf->bytes);
    ck_assert_ptr_nonnull(bad);
    memset(bad, 0x7E, bf->bytes);

    ck_assert_int_eq(gf_client_send_frame(c, P_ECHO, 1, good_in, 5000), 0);
    ck_assert_int_eq(gf_client_send_frame(c, bf->pipeline, 2, bad, bf->bytes), 0);
    ck_assert_int_eq(gf_client_send_frame(c, P_ECHO, 3, good_in, 5000), 0);

    gf_reply r;
    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "reply 1: %s (%s)", strerror(-rc), gf_client_error(c));
    rc = gf_test_check_result(echo, &r, 1, good_ref, good_ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);

    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "reply 2: %s (%s)", strerror(-rc), gf_client_error(c));
    error_text(&r, text, sizeof text);
    ck_assert_msg(r.header.type == GF_MSG_ERROR && r.header.status == bf->status,
                  "frame of %zu bytes for pipeline %u: got %s status %u (%s) \"%s\", expected "
                  "ERROR %s",
                  bf->bytes, (unsigned)bf->pipeline, gf_msg_type_name(r.header.type),
                  (unsigned)r.header.status, gf_status_name(r.header.status), text,
                  gf_status_name(bf->status));
    ck_assert_uint_eq(r.header.frame_id, 2);
    ck_assert_uint_eq(r.header.pipeline_id, bf->pipeline);
    for (unsigned k = 0; k < 2; k++)
        ck_assert_msg(strstr(text, bf->must_name[k]) != NULL,
                      "ERROR text \"%s\" does not name \"%s\"", text, bf->must_name[k]);

    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "reply 3: %s (%s)", strerror(-rc), gf_client_error(c));
    rc = gf_test_check_result(echo, &r, 3, good_ref, good_ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "after the refused frame: %s", err);

    /* The same connection keeps working, on every pipeline. */
    stream(c, P_AFFINE, 4100, 4, 4, 10);
    stream(c, P_RGB_SMALL, RGB_SMALL_BYTES, 4, 4, 20);

    char key[64];
    snprintf(key, sizeof key, "rejected.%s", gf_status_name(bf->status));
    cJSON *after = wait_idle(c, 1);
    const counter_delta want_deltas[] = {
        {key, 1}, {"connections.rejected", 0}, {"frames.received", 11}, {"frames.answered", 10}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    cJSON_Delete(before);
    cJSON_Delete(after);
    free(bad);
    free(good_in);
    free(good_ref);
    gf_client_close(c);
}
END_TEST

/* A fatal header behind pipelined frames: the frames' RESULTs come first,
 * in order, then the ERROR, then the close. */
static const uint32_t fatal_after_frames_status[] = {GF_ERR_BAD_MAGIC, GF_ERR_TOO_LARGE};

START_TEST(fatal_error_after_frames_answers_them_first) {
    uint32_t status = fatal_after_frames_status[_i];
    char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1];
    uint64_t rng = 606 + (uint64_t)_i;
    gf_client *lister = connect_client();
    const gf_pipeline *p[2] = {pipeline(lister, P_ECHO), pipeline(lister, P_SINCOS)};
    const size_t bytes[2] = {5000, 65536};
    void *in[2], *ref[2];
    size_t ref_bytes[2];
    int fd = raw_connect();

    for (unsigned i = 0; i < 2; i++) {
        int rc = gf_test_make_frame(p[i], bytes[i], &rng, &in[i], &ref[i], &ref_bytes[i], err,
                                    sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
        gf_test_ck_raw_frame(fd, 1 + i, p[i]->id, bytes[i], in[i], bytes[i]);
    }
    unsigned char bad[GF_HEADER_BYTES];
    gf_header h = gf_test_header(GF_MSG_FRAME, 3, P_ECHO,
                                 status == GF_ERR_TOO_LARGE ? MAX_FRAME_BYTES + 1ull : 8);
    gf_header_encode(&h, bad);
    if (status == GF_ERR_BAD_MAGIC)
        memcpy(bad, "XFRM", 4);
    ck_assert_int_eq(gf_test_raw_send(fd, bad, sizeof bad), 0);

    unsigned char *payload = malloc(65536);
    ck_assert_ptr_nonnull(payload);
    for (unsigned i = 0; i < 2; i++) {
        gf_header rh;
        int rc = gf_test_raw_recv_reply(fd, &rh, payload, 65536, GF_TEST_REPLY_TIMEOUT_MS, err,
                                        sizeof err);
        ck_assert_msg(rc == 0, "reply %u before the %s ERROR: %s", i + 1, gf_status_name(status),
                      err);
        gf_reply r = {.header = rh, .payload = payload, .payload_bytes = (size_t)rh.payload_bytes};
        rc = gf_test_check_result(p[i], &r, 1 + i, ref[i], ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "frame sent before a %s header: %s", gf_status_name(status), err);
    }
    gf_header rh;
    int rc = gf_test_raw_recv_reply(fd, &rh, text, GF_ERROR_TEXT_MAX_BYTES,
                                    GF_TEST_REPLY_TIMEOUT_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "no %s ERROR after the RESULTs: %s", gf_status_name(status), err);
    ck_assert_uint_eq(rh.type, GF_MSG_ERROR);
    ck_assert_uint_eq(rh.status, status);
    ck_assert_uint_eq(rh.frame_id, 3);
    size_t extra = 0;
    rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "connection not closed after %s: %s (%zu more bytes)",
                  gf_status_name(status), strerror(-rc), extra);
    close(fd);
    for (unsigned i = 0; i < 2; i++) {
        free(in[i]);
        free(ref[i]);
    }
    free(payload);
    gf_client_close(lister);
}
END_TEST

/* LIST and STATS take no payload: one that announces some is refused with
 * bad_length and the connection is closed (PROTOCOL.md, LIST). */
static const uint8_t request_types[] = {GF_MSG_LIST, GF_MSG_STATS};

START_TEST(request_with_payload_is_refused_and_closed) {
    uint8_t type = request_types[_i];
    char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1];
    unsigned char buf[GF_HEADER_BYTES + 8];
    gf_header h = gf_test_header(type, 12, 0, 8);
    int fd = raw_connect();

    gf_header_encode(&h, buf);
    memset(buf + GF_HEADER_BYTES, '{', 8);
    ck_assert_int_eq(gf_test_raw_send(fd, buf, sizeof buf), 0);
    gf_header rh;
    int rc = gf_test_raw_recv_reply(fd, &rh, text, GF_ERROR_TEXT_MAX_BYTES, QUICK_REPLY_TIMEOUT_MS,
                                    err, sizeof err);
    ck_assert_msg(rc == 0, "%s with a payload: no reply: %s", gf_msg_type_name(type), err);
    text[rh.payload_bytes] = '\0';
    ck_assert_msg(rh.type == GF_MSG_ERROR && rh.status == GF_ERR_BAD_LENGTH,
                  "%s with a payload: got %s status %s, expected ERROR bad_length",
                  gf_msg_type_name(type), gf_msg_type_name(rh.type), gf_status_name(rh.status));
    ck_assert_uint_eq(rh.frame_id, 12);
    ck_assert_msg(strstr(text, gf_msg_type_name(type)) != NULL && strstr(text, "8") != NULL,
                  "ERROR text \"%s\" does not name the %s request and its 8 bytes", text,
                  gf_msg_type_name(type));
    size_t extra = 0;
    rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "connection not closed: %s (%zu more bytes)", strerror(-rc), extra);
    close(fd);
}
END_TEST

/*
 * More requests whose replies hold no slot (STATS, refused frames) than the
 * daemon lets wait unwritten, all in one write: every one is still answered,
 * in order, and the connection goes on (or, after SHUT_WR, closes only once
 * all are answered).
 */
static const struct loose_case {
    const char *what;
    uint8_t type;   /* GF_MSG_STATS, or GF_MSG_FRAME for an unknown pipeline */
    int half_close; /* shutdown(SHUT_WR) right after the requests            */
} loose_cases[] = {
    {"STATS", GF_MSG_STATS, 0},
    {"STATS then SHUT_WR", GF_MSG_STATS, 1},
    {"unknown-pipeline frames", GF_MSG_FRAME, 0},
    {"unknown-pipeline frames then SHUT_WR", GF_MSG_FRAME, 1},
};

START_TEST(pipelined_requests_beyond_loose_reply_limit) {
    const struct loose_case *lc = &loose_cases[_i];
    unsigned char *buf = calloc(LOOSE_REQUEST_COUNT, GF_HEADER_BYTES);
    unsigned char *payload = malloc(1 << 16);
    char err[ERR_BYTES];
    gf_client *s = connect_client();
    cJSON *before = gf_test_ck_stats(s);
    uint64_t polls_before = gf_test_stats_sent;
    int fd = raw_connect();

    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(payload);
    for (unsigned i = 0; i < LOOSE_REQUEST_COUNT; i++) {
        gf_header h = gf_test_header(lc->type, 1000 + i,
                                     lc->type == GF_MSG_FRAME ? UNKNOWN_PIPELINE_ID : 0, 0);
        gf_header_encode(&h, buf + (size_t)i * GF_HEADER_BYTES);
    }
    ck_assert_int_eq(gf_test_raw_send(fd, buf, (size_t)LOOSE_REQUEST_COUNT * GF_HEADER_BYTES), 0);
    if (lc->half_close)
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    for (unsigned i = 0; i < LOOSE_REQUEST_COUNT; i++) {
        gf_header rh;
        int rc = gf_test_raw_recv_reply(fd, &rh, payload, 1 << 16, QUICK_REPLY_TIMEOUT_MS, err,
                                        sizeof err);
        ck_assert_msg(rc == 0, "%u %s in one write: reply %u never came: %s", LOOSE_REQUEST_COUNT,
                      lc->what, i + 1, err);
        ck_assert_uint_eq(rh.frame_id, 1000 + i);
        if (lc->type == GF_MSG_STATS) {
            ck_assert_uint_eq(rh.type, GF_MSG_STATS);
        } else {
            ck_assert_uint_eq(rh.type, GF_MSG_ERROR);
            ck_assert_uint_eq(rh.status, GF_ERR_UNKNOWN_PIPELINE);
        }
    }
    if (lc->half_close) {
        size_t extra = 0;
        int rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
        ck_assert_msg(rc == 0, "no end-of-file after the last reply: %s", strerror(-rc));
    } else {
        /* The connection still takes frames. */
        static const unsigned char data[5] = {1, 2, 3, 4, 5};
        gf_test_ck_raw_frame(fd, 7, P_ECHO, sizeof data, data, sizeof data);
        gf_header rh;
        int rc = gf_test_raw_recv_reply(fd, &rh, payload, 1 << 16, QUICK_REPLY_TIMEOUT_MS, err,
                                        sizeof err);
        ck_assert_msg(rc == 0, "frame after the %s: %s", lc->what, err);
        ck_assert_uint_eq(rh.type, GF_MSG_RESULT);
        ck_assert_uint_eq(rh.frame_id, 7);
        ck_assert_uint_eq(rh.payload_bytes, sizeof data);
        ck_assert_mem_eq(payload, data, sizeof data);
    }
    close(fd);

    cJSON *after = wait_idle(s, 1);
    if (lc->type == GF_MSG_STATS)
        /* The raw connection's, and every STATS that wait_idle polled with
         * (the shards see the close when they see it). */
        ck_assert_uint_eq(stat_delta(after, before, "requests.stats"),
                          LOOSE_REQUEST_COUNT + gf_test_stats_sent - polls_before);
    else
        ck_assert_uint_eq(stat_delta(after, before, "rejected.unknown_pipeline"),
                          LOOSE_REQUEST_COUNT);
    cJSON_Delete(before);
    cJSON_Delete(after);
    free(buf);
    free(payload);
    gf_client_close(s);
}
END_TEST

/* ---- 6. concurrent clients ------------------------------------------------------------ */

#define WORKER_COUNT  4
#define WORKER_FRAMES 50
#define WORKER_WINDOW 8

typedef struct worker {
    pthread_t thread;
    pthread_barrier_t *start; /* all connect, then all stream at once */
    const gf_pipeline *pipeline;
    size_t bytes;
    uint64_t seed;
    int rc; /* 0, or why it failed in err          */
    char err[ERR_BYTES];
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    gf_client *c = NULL;

    w->rc = gf_client_connect(g_daemon.socket_path, &c);
    if (w->rc < 0)
        snprintf(w->err, sizeof w->err, "connect: %s", strerror(-w->rc));
    pthread_barrier_wait(w->start);
    if (w->rc == 0) {
        gf_test_stream s = {.pipeline = w->pipeline,
                            .frame_bytes = w->bytes,
                            .frame_count = WORKER_FRAMES,
                            .window = WORKER_WINDOW,
                            .first_frame_id = 1,
                            .seed = w->seed};
        w->rc = gf_test_stream_verified(c, &s, w->err, sizeof w->err);
    }
    gf_client_close(c);
    return NULL;
}

START_TEST(concurrent_clients_verified) {
    static const struct {
        uint32_t pipeline;
        size_t bytes;
    } plan[WORKER_COUNT] = {
        {P_ECHO, 65536}, {P_AFFINE, 16384}, {P_SINCOS, 4100}, {P_RGB_SMALL, RGB_SMALL_BYTES}};
    worker workers[WORKER_COUNT];
    pthread_barrier_t start;
    gf_client *s = connect_client();
    cJSON *before = gf_test_ck_stats(s);

    ck_assert_int_eq(pthread_barrier_init(&start, NULL, WORKER_COUNT), 0);
    for (unsigned i = 0; i < WORKER_COUNT; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].start = &start;
        workers[i].pipeline = pipeline(s, plan[i].pipeline);
        workers[i].bytes = plan[i].bytes;
        workers[i].seed = 1000 + i;
        ck_assert_int_eq(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]), 0);
    }
    for (unsigned i = 0; i < WORKER_COUNT; i++)
        pthread_join(workers[i].thread, NULL);
    pthread_barrier_destroy(&start);
    for (unsigned i = 0; i < WORKER_COUNT; i++)
        ck_assert_msg(workers[i].rc == 0, "client %u (%s): %s", i, workers[i].pipeline->name,
                      workers[i].err);

    cJSON *after = wait_idle(s, 1);
    ck_assert_uint_eq(stat_delta(after, before, "frames.answered"), WORKER_COUNT * WORKER_FRAMES);
    ck_assert_uint_eq(stat_delta(after, before, "connections.total"), WORKER_COUNT);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(s);
}
END_TEST

/* ---- 7. backpressure ------------------------------------------------------------------- */

/* 16 frames of 1 MiB in flight against 2 slots: the daemon must pause
 * reading, and every reply still comes back whole, correct and in order. */
START_TEST(backpressure_window_larger_than_slots) {
    gf_client *c = connect_client();
    cJSON *before = wait_idle(c, 1);

    stream(c, P_AFFINE, MIB, 32, 16, 1);
    stream(c, P_ECHO, MIB + 1, 16, 16, 100);
    cJSON *after = wait_idle(c, 1);
    ck_assert_msg(stat_delta(after, before, "backpressure_pauses") > 0,
                  "backpressure_pauses did not grow with 16 frames in flight on 2 slots");
    ck_assert_uint_eq(stat_delta(after, before, "frames.answered"), 48);
    ck_assert_uint_eq(stat_delta(after, before, "frames.dropped"), 0);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(c);
}
END_TEST

/* ---- 8. disconnects ----------------------------------------------------------------- */

/* 16 frames of 3 MiB (12 MiB results) queued, no reply read, abrupt close:
 * the slots come back, the frames held are counted as dropped, and the
 * daemon serves the next client. */
START_TEST(disconnect_with_frames_in_flight) {
    enum { FRAMES = 16 };
    char err[ERR_BYTES];
    uint64_t rng = 8;
    void *in, *ref;
    size_t ref_bytes;
    gf_client *s = connect_client();
    const gf_pipeline *big = pipeline(s, P_RGB_BIG);
    cJSON *before = wait_idle(s, 1);
    /* The slots of the connection's shard: a connection stays on one. */
    uint64_t slot_count = gf_test_ck_u64(before, "slots.per_shard");

    int rc = gf_test_make_frame(big, RGB_BIG_BYTES, &rng, &in, &ref, &ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    gf_client *c = connect_client();
    for (unsigned i = 0; i < FRAMES; i++)
        ck_assert_int_eq(gf_client_send_frame(c, P_RGB_BIG, i, in, RGB_BIG_BYTES), 0);
    /* Write what the daemon takes (it stops reading once every slot holds a
     * frame whose result nobody reads) until every slot holds a whole frame:
     * bytes.in counts a frame's payload once all of it is in. */
    uint64_t held_bytes = 0;
    for (int tries = 0; tries < SETTLE_TIMEOUT_MS / 20; tries++) {
        rc = gf_client_flush(c, 20);
        ck_assert_msg(rc == 0 || rc == -ETIMEDOUT, "flush: %s (%s)", strerror(-rc),
                      gf_client_error(c));
        cJSON *st = gf_test_ck_stats(s);
        held_bytes = stat_delta(st, before, "bytes.in");
        cJSON_Delete(st);
        if (held_bytes >= slot_count * RGB_BIG_BYTES)
            break;
    }
    ck_assert_msg(held_bytes == slot_count * RGB_BIG_BYTES,
                  "daemon took %" PRIu64 " payload bytes, expected one whole frame per slot "
                  "(%" PRIu64 " x %u)",
                  held_bytes, slot_count, RGB_BIG_BYTES);
    gf_client_close(c); /* abrupt: 16 requests without a reply */

    cJSON *after = wait_idle(s, 1);
    assert_frames_add_up(after);
    const counter_delta want_deltas[] = {{"frames.received", slot_count},
                                         {"frames.answered", 0},
                                         {"frames.dropped", slot_count},
                                         {"frames.truncated", 0},
                                         {"connections.rejected", 0}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    cJSON_Delete(before);
    cJSON_Delete(after);

    /* Serving goes on, big frames included. */
    stream(s, P_RGB_BIG, RGB_BIG_BYTES, 3, 2, 1);
    stream(s, P_ECHO, 4097, 8, 4, 10);
    free(in);
    free(ref);
    gf_client_close(s);
}
END_TEST

static const struct truncation {
    const char *what;
    uint32_t pipeline;
    uint64_t announced; /* payload_bytes in the header                */
    size_t sent;        /* header bytes + payload bytes actually sent */
    uint64_t truncated; /* frames.truncated must grow by this         */
    uint64_t received;  /* frames.received must grow by this          */
} truncations[] = {
    {"half of a 1 MiB payload", P_ECHO, MIB, GF_HEADER_BYTES + MIB / 2, 1, 1},
    /* A payload that fits the read buffer is taken in whole before its frame
     * claims a slot and counts as received: leaving before that leaves no
     * frame behind (docs/design.md, "What a client gets whatever others do"). */
    {"part of a staged payload", P_ECHO, 4096, GF_HEADER_BYTES + 100, 0, 0},
    {"the header only", P_ECHO, 4096, GF_HEADER_BYTES, 0, 0},
    {"half a header", P_ECHO, 4096, GF_HEADER_BYTES / 2, 0, 0},
};

/* A client that leaves mid-frame: frames.truncated counts it, its slot
 * comes back, and nobody else notices. */
START_TEST(disconnect_mid_frame) {
    const struct truncation *t = &truncations[_i];
    gf_client *s = connect_client();
    cJSON *before = wait_idle(s, 1);
    size_t len = t->sent;
    unsigned char *buf = malloc(len);

    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(i * 131u + 7u);
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, t->pipeline, t->announced);
    unsigned char hdr[GF_HEADER_BYTES];
    gf_header_encode(&h, hdr);
    memcpy(buf, hdr, len < GF_HEADER_BYTES ? len : GF_HEADER_BYTES);

    int fd = raw_connect();
    ck_assert_int_eq(gf_test_raw_send(fd, buf, len), 0);
    if (t->received > 0) {
        /* Be sure the daemon took the frame before leaving. */
        uint64_t got = 0;
        for (int tries = 0; tries < SETTLE_TIMEOUT_MS / 20 && got == 0; tries++) {
            cJSON *st = gf_test_ck_stats(s);
            got = stat_delta(st, before, "frames.received");
            cJSON_Delete(st);
            if (got == 0)
                gf_test_sleep_ms(20);
        }
        ck_assert_msg(got == 1, "%s: daemon never took the frame", t->what);
    }
    close(fd);

    cJSON *after = wait_idle(s, 1);
    assert_frames_add_up(after);
    const counter_delta want_deltas[] = {{"frames.truncated", t->truncated},
                                         {"frames.received", t->received},
                                         {"frames.answered", 0},
                                         {"frames.dropped", 0}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    cJSON_Delete(before);
    cJSON_Delete(after);
    free(buf);
    stream(s, P_ECHO, MIB, 4, 2, 1);
    gf_client_close(s);
}
END_TEST

/* ---- 9. half-close ------------------------------------------------------------------- */

/* Sends frames of `sizes` for pipeline `id` on a raw socket, shuts down
 * writing, and reads every RESULT (verified) and then end-of-file. */
static void half_close_roundtrip(uint32_t id, const size_t *sizes, unsigned count) {
    char err[ERR_BYTES];
    uint64_t rng = 4242 + id;
    gf_client *lister = connect_client();
    const gf_pipeline *p = pipeline(lister, id);
    void *in[8], *ref[8];
    size_t ref_bytes[8], biggest = 0;
    int fd = raw_connect();

    ck_assert_uint_le(count, 8);
    for (unsigned i = 0; i < count; i++) {
        int rc =
            gf_test_make_frame(p, sizes[i], &rng, &in[i], &ref[i], &ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
        if (ref_bytes[i] > biggest)
            biggest = ref_bytes[i];
        gf_test_ck_raw_frame(fd, 100 + i, id, sizes[i], in[i], sizes[i]);
    }
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);

    unsigned char *payload = malloc(biggest + 1);
    ck_assert_ptr_nonnull(payload);
    for (unsigned i = 0; i < count; i++) {
        gf_header h;
        int rc = gf_test_raw_recv_reply(fd, &h, payload, biggest, GF_TEST_REPLY_TIMEOUT_MS, err,
                                        sizeof err);
        ck_assert_msg(rc == 0, "reply %u of %u after SHUT_WR: %s", i + 1, count, err);
        gf_reply r = {.header = h, .payload = payload, .payload_bytes = (size_t)h.payload_bytes};
        rc = gf_test_check_result(p, &r, 100 + i, ref[i], ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "after SHUT_WR: %s", err);
    }
    size_t extra = 0;
    int rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "no end-of-file after the last reply: %s (%zu more bytes)",
                  strerror(-rc), extra);
    close(fd);
    for (unsigned i = 0; i < count; i++) {
        free(in[i]);
        free(ref[i]);
    }
    free(payload);
    gf_client_close(lister);
}

START_TEST(half_close_gets_every_reply) {
    static const size_t sizes[5] = {1, 100, STAGED_BOUNDARY_BYTES, STAGED_BOUNDARY_BYTES + 1,
                                    20000};
    half_close_roundtrip(P_ECHO, sizes, 5);
}
END_TEST

/* The same while results are still being computed when EOF arrives. */
START_TEST(half_close_while_computing) {
    static const size_t sizes[3] = {32768, 32768, 32768};
    half_close_roundtrip(P_SINCOS, sizes, 3);
}
END_TEST

/* ---- 10. counters ------------------------------------------------------------------------ */

START_TEST(counters_count_exactly) {
    enum { AFFINE_FRAMES = 10, RGB_FRAMES = 5 };
    gf_client *c = connect_client();
    (void)pipeline(c, P_ECHO); /* LIST now, so it is not in the deltas below */
    cJSON *before = wait_idle(c, 1);

    stream(c, P_AFFINE, 4096, AFFINE_FRAMES, 4, 1);
    stream(c, P_RGB_SMALL, RGB_SMALL_BYTES, RGB_FRAMES, 2, 100);
    cJSON *after = wait_idle(c, 1);
    const counter_delta want_deltas[] = {
        {"frames.received", AFFINE_FRAMES + RGB_FRAMES},
        {"frames.answered", AFFINE_FRAMES + RGB_FRAMES},
        {"bytes.in", AFFINE_FRAMES * 4096 + RGB_FRAMES * RGB_SMALL_BYTES},
        {"bytes.out", AFFINE_FRAMES * 4096 + RGB_FRAMES * RGB_SMALL_BYTES * 4},
        {"frames.dropped", 0},
        {"frames.truncated", 0}};
    expect_deltas(after, before, want_deltas, sizeof want_deltas / sizeof want_deltas[0]);
    for (uint32_t s = 1; s < GF_STATUS_COUNT_; s++) {
        char key[64];
        snprintf(key, sizeof key, "rejected.%s", gf_status_name(s));
        ck_assert_msg(stat_delta(after, before, key) == 0, "%s grew without a refused frame", key);
    }
    ck_assert_uint_eq(stat_delta(after, before, "requests.list"), 0);
    ck_assert_uint_eq(stat_delta(after, before, "connections.total"), 0);
    assert_frames_add_up(after);

    /* STATS and LIST count themselves: one each. */
    cJSON *s1 = gf_test_ck_stats(c);
    cJSON *s2 = gf_test_ck_stats(c);
    ck_assert_uint_eq(stat_delta(s2, s1, "requests.stats"), 1);
    char *json = NULL;
    ck_assert_int_eq(gf_client_request_json(c, GF_MSG_LIST, &json, GF_TEST_REPLY_TIMEOUT_MS), 0);
    free(json);
    cJSON *s3 = gf_test_ck_stats(c);
    ck_assert_uint_eq(stat_delta(s3, s2, "requests.list"), 1);
    ck_assert_uint_eq(stat_delta(s3, s2, "requests.stats"), 1);

    /* A second connection is counted open and in the total. */
    gf_client *other = connect_client();
    stream(other, P_ECHO, 10, 1, 1, 1);
    cJSON *s4 = gf_test_ck_stats(c);
    ck_assert_uint_eq(gf_test_ck_u64(s4, "connections.open"), 2);
    ck_assert_uint_eq(stat_delta(s4, s3, "connections.total"), 1);
    gf_client_close(other);

    /* Each refused frame adds exactly 1 to its reason, and to nothing else. */
    static const struct {
        uint32_t pipeline;
        size_t bytes;
        uint32_t status;
    } refusals[] = {{UNKNOWN_PIPELINE_ID, 8, GF_ERR_UNKNOWN_PIPELINE},
                    {P_AFFINE, 6, GF_ERR_BAD_LENGTH}};
    static const unsigned char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (unsigned k = 0; k < 2; k++) {
        cJSON *b = wait_idle(c, 1);
        ck_assert_int_eq(gf_client_send_frame(c, refusals[k].pipeline, 9, junk, refusals[k].bytes),
                         0);
        gf_reply r;
        ck_assert_int_eq(gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS), 0);
        ck_assert_uint_eq(r.header.type, GF_MSG_ERROR);
        ck_assert_uint_eq(r.header.status, refusals[k].status);
        cJSON *a = wait_idle(c, 1);
        for (uint32_t s = 1; s < GF_STATUS_COUNT_; s++) {
            char key[64];
            snprintf(key, sizeof key, "rejected.%s", gf_status_name(s));
            ck_assert_msg(stat_delta(a, b, key) == (s == refusals[k].status ? 1u : 0u),
                          "%s grew by %" PRIu64 " for one %s frame", key, stat_delta(a, b, key),
                          gf_status_name(refusals[k].status));
        }
        const counter_delta one_refused[] = {
            {"frames.received", 1}, {"frames.answered", 0}, {"bytes.out", 0}};
        expect_deltas(a, b, one_refused, sizeof one_refused / sizeof one_refused[0]);
        assert_frames_add_up(a);
        cJSON_Delete(a);
        cJSON_Delete(b);
    }

    cJSON_Delete(before);
    cJSON_Delete(after);
    cJSON_Delete(s1);
    cJSON_Delete(s2);
    cJSON_Delete(s3);
    cJSON_Delete(s4);
    gf_client_close(c);
}
END_TEST

/* A second daemon on a socket that is already served refuses to start
 * (exit 3, GF_EXIT_STARTUP) and leaves the first one serving. */
START_TEST(second_daemon_on_same_socket_refused) {
    char *argv[GF_TEST_DAEMON_ARGC + 1], *log;

    gf_test_daemon_argv(&g_daemon, argv);
    int code = gf_test_ck_run(g_daemon.dir, argv, GF_TEST_START_TIMEOUT_MS, &log);
    ck_assert_msg(code == 3, "second gpuframed: exit %d, expected exit 3; output:\n%s", code, log);
    ck_assert_msg(strstr(log, "already") != NULL,
                  "second gpuframed does not say the socket is taken:\n%s", log);
    free(log);

    gf_client *c = connect_client();
    stream(c, P_AFFINE, 4096, 4, 2, 1);
    gf_client_close(c);
}
END_TEST

/* ---- 11. drain on SIGTERM ------------------------------------------------------------------ */

/* The drain daemon: enough slots to hold every queued frame, and sincos
 * frames heavy enough to still be computing when SIGTERM arrives. */
static const char drain_config[] =
    "{\n"
    "  \"slots\": 8,\n"
    "  \"max_frame_bytes\": 4194304,\n"
    "  \"frame_timeout_ms\": 30000,\n"
    "  \"log_level\": \"debug\",\n"
    "  \"pipelines\": [\n"
    "    {\"name\": \"echo\", \"kind\": \"echo\"},\n"
    "    {\"name\": \"sincos\", \"kind\": \"sincos\", \"params\": {\"iters\": 64}}\n"
    "  ]\n"
    "}\n";
enum { DRAIN_ECHO, DRAIN_SINCOS };
#define DRAIN_FRAMES       8
#define DRAIN_SINCOS_BYTES (256u * 1024u)
/* On the cpu engine the last frame computes for about this long, longer
 * than the test's steps from its arrival to the signal on a loaded
 * machine: with 256 KiB frames alone (about 70 ms each) all had finished
 * by then, once in a clean CI run under ASan. */
#define DRAIN_LAST_MS 1000

static void drain_start(gf_test_daemon *d) {
    gf_test_ck_daemon_start(d, drain_config, g_engine);
}

/* After SIGTERM: exit 0 within the stop timeout, socket file gone, a clean
 * log that says it drained; then the directory is removed. */
static void drain_finish(gf_test_daemon *d) {
    char lines[4096];

    gf_test_ck_daemon_exited(d, gf_test_ck_daemon_wait(d, GF_TEST_STOP_TIMEOUT_MS), 0);
    ck_assert_msg(access(d->socket_path, F_OK) != 0 && errno == ENOENT,
                  "socket file %s still exists after the daemon exited", d->socket_path);
    size_t n = gf_test_log_failures(d->log_path, lines, sizeof lines);
    ck_assert_msg(n == 0, "gpuframed logged %zu error/warning line(s):\n%s", n, lines);
    char *log = gf_test_read_file(d->log_path, NULL);
    ck_assert_msg(log != NULL && strstr(log, "drained") != NULL,
                  "the log does not say the daemon drained:\n%s", log ? log : "");
    free(log);
    gf_test_daemon_cleanup(d);
}

START_TEST(sigterm_drains_frames_in_flight) {
    gf_test_daemon d;
    char err[ERR_BYTES];
    uint64_t rng = 31337;
    void *in[DRAIN_FRAMES], *ref[DRAIN_FRAMES];
    size_t bytes[DRAIN_FRAMES], ref_bytes[DRAIN_FRAMES];
    gf_pipeline *pipes = NULL;
    size_t pipe_count = 0;

    drain_start(&d);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_client *s = gf_test_ck_connect(d.socket_path);
    pipes = gf_test_ck_list(s, &pipe_count);
    ck_assert_uint_eq(pipe_count, 2);

    /* Frame 0 is a quick echo, so its reply comes while the others compute. */
    int cpu = strcmp(g_engine, "cpu") == 0;
    size_t last = cpu ? gf_test_slow_frame_bytes(gf_test_sincos_ns(), 64, DRAIN_LAST_MS, 4u << 20)
                      : DRAIN_SINCOS_BYTES;
    for (unsigned i = 0; i < DRAIN_FRAMES; i++) {
        const gf_pipeline *p = &pipes[i == 0 ? DRAIN_ECHO : DRAIN_SINCOS];
        bytes[i] = i == 0 ? 4096 : i + 1 < DRAIN_FRAMES ? DRAIN_SINCOS_BYTES : last;
        int rc =
            gf_test_make_frame(p, bytes[i], &rng, &in[i], &ref[i], &ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_int_eq(gf_client_send_frame(c, p->id, i, in[i], bytes[i]), 0);
    }
    /* One slot per frame: the daemon takes all of them without replies read. */
    int rc = gf_client_flush(c, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "flush: %s (%s)", strerror(-rc), gf_client_error(c));
    /* Until every frame is wholly in: bytes.in counts a payload once complete. */
    uint64_t want_bytes = 0, got_bytes = 0;
    for (unsigned i = 0; i < DRAIN_FRAMES; i++)
        want_bytes += bytes[i];
    got_bytes = gf_test_ck_wait_stat(s, "bytes.in", want_bytes, UINT64_MAX, SETTLE_TIMEOUT_MS);
    ck_assert_uint_eq(got_bytes, want_bytes);

    /* The signal follows what was in flight by one STATS round trip: on a
     * loaded machine the frames may have finished while the test waited
     * for the echo's reply (once, under ASan beside two suites). */
    cJSON *st = gf_test_ck_stats(s);
    uint64_t in_flight = gf_test_ck_u64(st, "slots.in_flight");
    cJSON_Delete(st);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    gf_client_close(s);

    gf_reply r;
    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "first reply: %s (%s)", strerror(-rc), gf_client_error(c));
    rc = gf_test_check_result(&pipes[DRAIN_ECHO], &r, 0, ref[0], ref_bytes[0], err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    for (unsigned i = 1; i < DRAIN_FRAMES; i++) {
        rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0,
                      "reply %u after SIGTERM (%" PRIu64 " in flight at the signal): %s (%s)", i,
                      in_flight, strerror(-rc), gf_client_error(c));
        rc = gf_test_check_result(&pipes[DRAIN_SINCOS], &r, i, ref[i], ref_bytes[i], err,
                                  sizeof err);
        ck_assert_msg(rc == 0, "after SIGTERM: %s", err);
    }
    /* Everything owed was answered; then the daemon closes. */
    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == -ECONNRESET, "after the last reply: %s, expected the connection closed",
                  rc == 0 ? "another reply" : strerror(-rc));
    gf_client_close(c);
    drain_finish(&d);

    /* With the CPU engine the last frame takes far longer than the steps
     * above, so the signal really found frames in flight. */
    if (cpu)
        ck_assert_msg(in_flight > 0, "no frame was in flight at SIGTERM: the drain was not tested");
    for (unsigned i = 0; i < DRAIN_FRAMES; i++) {
        free(in[i]);
        free(ref[i]);
    }
    free(pipes);
}
END_TEST

/* A frame whose header arrived before SIGTERM and whose payload comes after
 * is still read, computed and answered. */
START_TEST(sigterm_finishes_half_received_frame) {
    gf_test_daemon d;
    char err[ERR_BYTES];
    uint64_t rng = 4711;
    void *in, *ref;
    size_t ref_bytes;
    gf_pipeline *pipes = NULL;
    size_t pipe_count = 0;
    enum { BYTES = 65536 };

    drain_start(&d);
    gf_client *s = gf_test_ck_connect(d.socket_path);
    pipes = gf_test_ck_list(s, &pipe_count);
    gf_client_close(s);
    int rc =
        gf_test_make_frame(&pipes[DRAIN_ECHO], BYTES, &rng, &in, &ref, &ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);

    int fd = gf_test_ck_raw_connect(d.socket_path);
    gf_test_ck_raw_frame(fd, 5, DRAIN_ECHO, BYTES, in, BYTES / 2);
    /* Let the daemon take the header and the first half before the signal. */
    gf_client *probe = gf_test_ck_connect(d.socket_path);
    uint64_t received =
        gf_test_ck_wait_stat(probe, "frames.received", 1, UINT64_MAX, SETTLE_TIMEOUT_MS);
    gf_client_close(probe);
    ck_assert_uint_eq(received, 1);

    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    /* The daemon stops listening at once: wait until its socket file goes. */
    for (int tries = 0; tries < SETTLE_TIMEOUT_MS / 5 && access(d.socket_path, F_OK) == 0; tries++)
        gf_test_sleep_ms(5);
    ck_assert_msg(access(d.socket_path, F_OK) != 0, "socket file stays after SIGTERM");
    ck_assert_int_eq(gf_test_raw_send(fd, (unsigned char *)in + BYTES / 2, BYTES / 2), 0);

    unsigned char *payload = malloc(BYTES);
    ck_assert_ptr_nonnull(payload);
    gf_header rh;
    rc = gf_test_raw_recv_reply(fd, &rh, payload, BYTES, GF_TEST_REPLY_TIMEOUT_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "no reply to the frame finished after SIGTERM: %s", err);
    gf_reply r = {.header = rh, .payload = payload, .payload_bytes = (size_t)rh.payload_bytes};
    rc = gf_test_check_result(&pipes[DRAIN_ECHO], &r, 5, ref, ref_bytes, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    size_t extra = 0;
    rc = gf_test_raw_expect_close(fd, SETTLE_TIMEOUT_MS, &extra);
    ck_assert_msg(rc == 0, "connection not closed after the drain: %s", strerror(-rc));
    close(fd);
    drain_finish(&d);
    free(payload);
    free(in);
    free(ref);
    free(pipes);
}
END_TEST

/* ---- 12. configuration errors -------------------------------------------------------------- */

static const struct bad_config {
    const char *what;
    const char *json;          /* written to DIR/bad.json; NULL: no file      */
    const char *extra_flag[2]; /* one more option and its value, or NULLs    */
    int exit_status;
    const char *must_name; /* what the output must mention                */
} bad_configs[] = {
    {"slots 0",
     "{\"slots\": 0, \"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}",
     {NULL, NULL},
     2,
     "slots"},
    {"slots 65",
     "{\"slots\": 65, \"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}",
     {NULL, NULL},
     2,
     "slots"},
    {"unknown key",
     "{\"slot\": 2, \"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}",
     {NULL, NULL},
     2,
     "slot"},
    {"unknown kind",
     "{\"pipelines\": [{\"name\": \"e\", \"kind\": \"foo\"}]}",
     {NULL, NULL},
     2,
     "pipelines[0] (e).kind"},
    {"image larger than a frame",
     "{\"max_frame_bytes\": 1000, \"pipelines\": [{\"name\": \"img\", \"kind\": "
     "\"normalize_u8\", \"params\": {\"width\": 100, \"height\": 100}}]}",
     {NULL, NULL},
     2,
     "max_frame_bytes"},
    {"JSON syntax error", "{\"slots\": 2,", {NULL, NULL}, 2, "bad.json"},
    {"missing file", NULL, {NULL, NULL}, 2, "bad.json"},
    {"--slots 0",
     "{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}",
     {"--slots", "0"},
     2,
     "--slots"},
    {"socket in a missing directory",
     "{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}",
     {"--socket", "/nonexistent-gpuframed-dir/s.sock"},
     3,
     "socket"},
};

START_TEST(bad_config_exits_with_status_and_reason) {
    const struct bad_config *bc = &bad_configs[_i];
    gf_test_daemon d; /* only its directory, paths and engine are used */
    char *text;

    memset(&d, 0, sizeof d);
    ck_assert_int_eq(gf_test_make_temp_dir(d.dir, sizeof d.dir), 0);
    snprintf(d.config_path, sizeof d.config_path, "%s/bad.json", d.dir);
    snprintf(d.socket_path, sizeof d.socket_path, "%s/s.sock", d.dir);
    snprintf(d.engine, sizeof d.engine, "%s", g_engine);
    if (bc->json != NULL)
        ck_assert_int_eq(gf_test_write_file(d.config_path, bc->json), 0);

    char *argv[GF_TEST_DAEMON_ARGC + 2 + 1]; /* + extra_flag + NULL */
    size_t argc = gf_test_daemon_argv(&d, argv);
    if (bc->extra_flag[0] != NULL) {
        argv[argc++] = (char *)bc->extra_flag[0];
        argv[argc++] = (char *)bc->extra_flag[1];
    }
    argv[argc] = NULL;
    int code = gf_test_ck_run(d.dir, argv, GF_TEST_START_TIMEOUT_MS, &text);
    ck_assert_msg(code == bc->exit_status, "%s: gpuframed exit %d, expected exit %d; output:\n%s",
                  bc->what, code, bc->exit_status, text);
    ck_assert_msg(strstr(text, bc->must_name) != NULL, "%s: output does not name \"%s\":\n%s",
                  bc->what, bc->must_name, text);
    ck_assert_msg(access(d.socket_path, F_OK) != 0, "%s: the socket file was created", bc->what);
    free(text);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- deadlines ------------------------------------------------------------------------------ */

/* One frame heavy enough to outlive a 20 ms deadline on either engine. */
static const char deadline_config[] =
    "{\"slots\": 1, \"max_frame_bytes\": 4194304, \"frame_timeout_ms\": 20,"
    " \"pipelines\": [{\"name\": \"slow\", \"kind\": \"sincos\","
    " \"params\": {\"iters\": 100000}}]}";

/* A frame past its deadline means the engine stopped completing frames: the
 * daemon fails the frame with `timeout`, says why, and exits non-zero so
 * that its supervisor restarts it, rather than hanging. */
START_TEST(frame_past_its_deadline_fails_and_exits_nonzero) {
    gf_test_daemon d;
    char desc[96];
    enum { BYTES = 4194304 };
    gf_test_ck_daemon_start(&d, deadline_config, g_engine);
    float *in = malloc(BYTES);
    ck_assert_ptr_nonnull(in);
    for (size_t i = 0; i < BYTES / sizeof(float); i++)
        in[i] = (float)(i % 1000) / 250.0f - 2.0f;
    int fd = gf_test_ck_raw_connect(d.socket_path);
    gf_test_ck_raw_frame(fd, 77, 0, BYTES, in, BYTES);
    gf_header rh = gf_test_ck_raw_error(fd, GF_ERR_TIMEOUT, "deadline", GF_TEST_REPLY_TIMEOUT_MS,
                                        GF_TEST_STAYS_OPEN);
    ck_assert_uint_eq(rh.frame_id, 77);
    int status = gf_test_ck_daemon_wait(&d, GF_TEST_STOP_TIMEOUT_MS);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
                  "gpuframed after a missed deadline: %s, expected a non-zero exit",
                  gf_test_describe_status(status, desc, sizeof desc));
    char *log = gf_test_read_file(d.log_path, NULL);
    ck_assert_msg(log && strstr(log, "fatal:") && strstr(log, "deadline"),
                  "the log does not say why: %s", log ? log : "(none)");
    free(log);
    free(in);
    close(fd);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- the suite ---------------------------------------------------------------------------- */

static TCase *fixture_tcase(const char *name) {
    TCase *tc = tcase_create(name);

    tcase_add_unchecked_fixture(tc, daemon_setup, daemon_teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    return tc;
}

static Suite *integration_suite(void) {
    Suite *s = suite_create("integration");
    TCase *tc;

    tc = fixture_tcase("serve");
    tcase_add_test(tc, list_returns_configured_pipelines);
    tcase_add_test(tc, pipeline_id_looks_names_up_once);
    tcase_add_loop_test(tc, pipeline_sizes_verified, 0, (int)SIZE_CASE_COUNT);
    tcase_add_test(tc, mixed_pipelines_one_window);
    tcase_add_test(tc, split_writes_reassembled);
    tcase_add_test(tc, stats_between_frames_keeps_order);
    tcase_add_test(tc, waiting_on_the_client_fd);
    tcase_add_test(tc, concurrent_clients_verified);
    tcase_add_test(tc, backpressure_window_larger_than_slots);
    tcase_add_test(tc, half_close_gets_every_reply);
    tcase_add_test(tc, half_close_while_computing);
    tcase_add_test(tc, counters_count_exactly);
    tcase_add_test(tc, second_daemon_on_same_socket_refused);
    suite_add_tcase(s, tc);

    tc = fixture_tcase("errors");
    tcase_add_loop_test(tc, too_large_refused_from_header, 0,
                        (int)(sizeof too_large_sizes / sizeof too_large_sizes[0]));
    tcase_add_loop_test(tc, bad_header_is_fatal_to_its_connection_only, 0,
                        (int)(sizeof bad_headers / sizeof bad_headers[0]));
    tcase_add_loop_test(tc, bad_frame_costs_only_that_frame, 0,
                        (int)(sizeof bad_frames / sizeof bad_frames[0]));
    tcase_add_loop_test(
        tc, fatal_error_after_frames_answers_them_first, 0,
        (int)(sizeof fatal_after_frames_status / sizeof fatal_after_frames_status[0]));
    tcase_add_loop_test(tc, request_with_payload_is_refused_and_closed, 0,
                        (int)sizeof request_types);
    tcase_add_loop_test(tc, pipelined_requests_beyond_loose_reply_limit, 0,
                        (int)(sizeof loose_cases / sizeof loose_cases[0]));
    suite_add_tcase(s, tc);

    tc = fixture_tcase("disconnects");
    tcase_add_test(tc, disconnect_with_frames_in_flight);
    tcase_add_loop_test(tc, disconnect_mid_frame, 0,
                        (int)(sizeof truncations / sizeof truncations[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("drain");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, sigterm_drains_frames_in_flight);
    tcase_add_test(tc, sigterm_finishes_half_received_frame);
    suite_add_tcase(s, tc);

    tc = tcase_create("deadline");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, frame_past_its_deadline_fails_and_exits_nonzero);
    suite_add_tcase(s, tc);

    tc = tcase_create("config");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_loop_test(tc, bad_config_exits_with_status_and_reason, 0,
                        (int)(sizeof bad_configs / sizeof bad_configs[0]));
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    printf("integration tests against gpuframed with the %s engine (%s)\n", g_engine,
           gf_test_daemon_path());
    fflush(stdout);
    return gf_test_run(integration_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Shards against a real gpuframed: each an event loop on its own thread
 * with its own connections and slots (config/README.md, "shards"), the
 * control loop handing every accepted connection to the shard with the
 * fewest.  Every test names "shards" in its configuration, so that
 * GF_TEST_SHARDS (which CI sets for the other suites) does not change it.
 *
 *   placement    connections spread evenly, a new one goes to the emptiest
 *                shard, and STATS' per-shard figures add up to its totals;
 *   totals       verified streams on every shard: STATS' totals exact;
 *   trace        TRACE merges every shard's ring, ordered by "written", at
 *                most trace_frames frames; connection ids are the shard's;
 *   limits       max_connections counts every shard's connections;
 *   reload       SIGHUP's new affine parameters on every shard;
 *   drain        SIGTERM answers the frames in flight on every shard, exit 0;
 *   order        a pipelining connection's replies keep their order while
 *                connections on the other shards stream;
 *   devices      (cpu engine) a connection moves to a shard of the device
 *                its frame's pipeline is limited to, replies in order,
 *                regions with it; a pipeline no shard runs is refused.
 *
 * The engine comes from GF_TEST_ENGINE (cpu or cuda); checks that hold on
 * one engine only (the drain's frames still in flight at SIGTERM) say so.
 */
/* The daemon's TRACEs under way at once in a shard (shard_state.h). */
#define GF_GATHERS_MAX_FOR_TEST 4
#define _GNU_SOURCE             /* memfd_create; pthread_barrier_t */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

/* The shards of every test's daemon: more than two, so that "the fewest"
 * and round robin differ, and not a divisor of the client counts below
 * unless a test wants it to be. */
#define SHARDS 3u
/* Slots of each shard. */
#define SLOTS_PER_SHARD 2u
/* Pipeline ids of the test config, in its order. */
enum { P_ECHO, P_AFFINE, P_SLOW, P_COUNT };
/* affine's parameters before and after the reload test's SIGHUP. */
#define AFFINE_A     2.0f
#define AFFINE_B     0.5f
#define AFFINE_A_NEW (-3.0f)
#define AFFINE_B_NEW 1.25f
/* Bytes of an affine frame of the reload test: 1024 floats. */
#define AFFINE_BYTES 4096u
/* The slow pipeline's iterations, and what a drained frame takes on the cpu
 * engine (its size comes from the C reference's speed here). */
#define SLOW_ITERS     1000u
#define DRAIN_FRAME_MS 400u
/* The test config's max_frame_bytes: room for the longest slow frame. */
#define MAX_FRAME_BYTES (4u << 20)
/* An echo frame that is not a multiple of 4 and fits the header buffer. */
#define SMALL_FRAME_BYTES 777u
/* How long a test waits for the daemon to settle or a counter to arrive. */
#define SETTLE_MS 20000
/* Reply timeout for frames that need no compute. */
#define QUICK_REPLY_MS 10000
/* Per-test limit of Check (multiplied by CK_TIMEOUT_MULTIPLIER). */
#define TEST_TIMEOUT_S 120
#define ERR_BYTES      (2 * GF_TEST_ERR_MAX)

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE           */
static double g_sincos_ns;   /* ns per element and iteration of sincos_ref */
static gf_test_daemon daemon_;

/* ---- the daemon ----------------------------------------------------------------- */

/* The test config: SHARDS shards of SLOTS_PER_SHARD slots, affine with `a`
 * and `b` (JSON numbers as text), and `extra` keys (each followed by a
 * comma; may be ""). */
static void make_config(char *buf, size_t len, const char *a, const char *b, const char *extra) {
    int n = snprintf(buf, len,
                     "{\n"
                     "  \"shards\": %u,\n"
                     "  \"slots\": %u,\n"
                     "  \"max_frame_bytes\": %u,\n"
                     "  \"frame_timeout_ms\": 60000,\n"
                     "  \"drain_timeout_ms\": 30000,\n"
                     "  \"log_level\": \"info\",\n"
                     "  %s\n"
                     "  \"pipelines\": [\n"
                     "    {\"name\": \"echo\", \"kind\": \"echo\"},\n"
                     "    {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": %s, "
                     "\"b\": %s}},\n"
                     "    {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": %u}}\n"
                     "  ]\n"
                     "}\n",
                     SHARDS, SLOTS_PER_SHARD, MAX_FRAME_BYTES, extra, a, b, SLOW_ITERS);
    ck_assert_msg(n > 0 && (size_t)n < len, "config does not fit");
}

/* Starts the test's daemon on the test config with `extra` keys. */
static void start(const char *extra) {
    char json[2048];
    make_config(json, sizeof json, "2.0", "0.5", extra);
    gf_test_ck_daemon_start(&daemon_, json, g_engine);
}

/* Stops it: exit 0 after SIGTERM, with no error or warning in its log
 * unless `log_may_warn` (a test whose refusals are logged). */
static void stop(int log_may_warn) {
    gf_test_ck_daemon_stop(&daemon_,
                           log_may_warn ? GF_TEST_STOP_EXIT_0 : GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}

static gf_client *client(void) {
    return gf_test_ck_connect(daemon_.socket_path);
}

/* A connection for STATS and TRACE, returned once the daemon holds it
 * alone: gf_test_daemon_start's probe connection is closed and counted, so
 * that every later placement is the test's own. */
static gf_client *settled_client(void) {
    gf_client *s = client();
    gf_test_ck_wait_idle(s, 1, SETTLE_MS, NULL);
    return s;
}

/* The frame id of client `i`'s `k`th frame: unique in a test, and telling
 * its client. */
static uint64_t frame_id_of(unsigned i, unsigned k) {
    return 1000u * (i + 1u) + k;
}

/* Frame `frame_id`'s input of `bytes` (at most AFFINE_BYTES) into in[]. */
static void fill_pattern(unsigned char *in, size_t bytes, uint64_t frame_id) {
    ck_assert_uint_le(bytes, AFFINE_BYTES);
    for (size_t i = 0; i < bytes; i++)
        in[i] = (unsigned char)(i * 31u + frame_id * 7u);
}

/* One frame of `bytes` on pipeline `pipeline` sent from `in` (which the
 * library reads until its reply), not waited for. */
static void send_pattern(gf_client *c, uint32_t pipeline, uint64_t frame_id, size_t bytes,
                         unsigned char in[AFFINE_BYTES]) {
    fill_pattern(in, bytes, frame_id);
    ck_assert_int_eq(gf_client_send_frame(c, pipeline, frame_id, in, bytes), 0);
}

/* The next reply is frame `frame_id`'s RESULT: send_pattern's input back
 * (echo), or for P_AFFINE each of its floats times 2 plus 0.5 (devices_json's
 * affine, the only one this is asked of). */
static void expect_pattern(gf_client *c, uint32_t pipeline, uint64_t frame_id, size_t bytes) {
    unsigned char in[AFFINE_BYTES];
    fill_pattern(in, bytes, frame_id);
    gf_reply r;
    int rc = gf_client_recv(c, &r, QUICK_REPLY_MS);
    ck_assert_msg(rc == 0, "frame %" PRIu64 ": %s (%s)", frame_id, strerror(-rc),
                  gf_client_error(c));
    ck_assert_msg(r.header.type == GF_MSG_RESULT, "frame %" PRIu64 ": %s %.*s", frame_id,
                  gf_status_name(r.header.status), (int)r.payload_bytes, (const char *)r.payload);
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    ck_assert_uint_eq(r.header.pipeline_id, pipeline);
    ck_assert_uint_eq(r.payload_bytes, bytes);
    if (pipeline != P_AFFINE) {
        ck_assert_mem_eq(r.payload, in, bytes);
        return;
    }
    for (size_t i = 0; i < bytes / sizeof(float); i++) {
        float x, got;
        memcpy(&x, in + 4 * i, sizeof x);
        memcpy(&got, (const unsigned char *)r.payload + 4 * i, sizeof got);
        volatile float ax = 2.0f * x;
        float want = ax + 0.5f;
        ck_assert_msg(memcmp(&got, &want, sizeof want) == 0 || (want != want && got != got),
                      "frame %" PRIu64 " element %zu: got %.9g, expected %.9g", frame_id, i,
                      (double)got, (double)want);
    }
}

/* One echo frame of `bytes` on `c`, answered with its bytes exactly. */
static void echo_frame(gf_client *c, uint64_t frame_id, size_t bytes) {
    unsigned char in[AFFINE_BYTES];
    send_pattern(c, P_ECHO, frame_id, bytes, in);
    expect_pattern(c, P_ECHO, frame_id, bytes);
}

/*
 * Sends one affine frame and checks its result number by number against
 * y = a*x + b computed here (the multiply rounded before the add, as the
 * pipeline defines it), independently of the daemon's and the registry's
 * code (test_systemd.c does the same).
 */
static void assert_affine_result(gf_client *c, float a, float b, uint64_t frame_id) {
    enum { N = AFFINE_BYTES / sizeof(float) };
    static float in[N];
    uint64_t rng = 0x5eed + frame_id;
    gf_reply r;

    gf_test_fill_input(gf_pipeline_kind_find("affine"), in, sizeof in, &rng);
    ck_assert_int_eq(gf_client_send_frame(c, P_AFFINE, frame_id, in, sizeof in), 0);
    int rc = gf_client_recv(c, &r, QUICK_REPLY_MS);
    ck_assert_msg(rc == 0, "affine frame %" PRIu64 ": %s (%s)", frame_id, strerror(-rc),
                  gf_client_error(c));
    ck_assert_msg(r.header.type == GF_MSG_RESULT, "affine frame %" PRIu64 ": %s %.*s", frame_id,
                  gf_status_name(r.header.status), (int)r.payload_bytes, (const char *)r.payload);
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    ck_assert_uint_eq(r.payload_bytes, sizeof in);
    const float *out = r.payload;
    for (unsigned i = 0; i < N; i++) {
        volatile float ax = a * in[i];
        float want = ax + b;
        ck_assert_msg(memcmp(&out[i], &want, sizeof want) == 0,
                      "affine frame %" PRIu64 " element %u: got %.9g for x=%.9g, expected "
                      "%.9g*x%+.9g = %.9g",
                      frame_id, i, (double)out[i], (double)in[i], (double)a, (double)b,
                      (double)want);
    }
}

/* ---- STATS and TRACE -------------------------------------------------------------- */

/* STATS' "shards", asserted to hold SHARDS objects numbered 0, 1, ... in
 * order, each with "device" null on the cpu engine and a number on cuda. */
static const cJSON *shards_of(const cJSON *st) {
    ck_assert_uint_eq(gf_test_ck_u64(st, "shard_count"), SHARDS);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(st, "shards");
    ck_assert_msg(cJSON_IsArray(arr), "STATS has no \"shards\" array");
    ck_assert_int_eq(cJSON_GetArraySize(arr), (int)SHARDS);
    for (unsigned k = 0; k < SHARDS; k++) {
        const cJSON *sh = cJSON_GetArrayItem(arr, (int)k);
        ck_assert_uint_eq(gf_test_ck_u64(sh, "shard"), k);
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(sh, "device");
        if (strcmp(g_engine, "cpu") == 0)
            ck_assert_msg(cJSON_IsNull(dev), "shards[%u].device is not null on the cpu engine", k);
        else
            ck_assert_msg(cJSON_IsNumber(dev), "shards[%u].device is not a number", k);
    }
    return arr;
}

/* shards[k].`key` of a STATS document. */
static uint64_t shard_stat(const cJSON *st, unsigned k, const char *key) {
    return gf_test_ck_u64(cJSON_GetArrayItem(shards_of(st), (int)k), key);
}

/* The sum of shards[].`key` over every shard. */
static uint64_t shard_sum(const cJSON *st, const char *key) {
    uint64_t sum = 0;
    for (unsigned k = 0; k < SHARDS; k++)
        sum += shard_stat(st, k, key);
    return sum;
}

/* A TRACE of the last `max_frames` frames (0: all kept), parsed. */
static cJSON *trace(gf_client *c, uint32_t max_frames) {
    char *json = NULL;
    int rc = gf_client_request_trace(c, max_frames, &json, QUICK_REPLY_MS);
    ck_assert_msg(rc == 0, "TRACE %u: %s (%s)", (unsigned)max_frames, strerror(-rc),
                  gf_client_error(c));
    cJSON *doc = cJSON_Parse(json);
    ck_assert_msg(doc != NULL, "TRACE is not JSON: %.200s", json);
    free(json);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "shards"), SHARDS);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "slots"), SLOTS_PER_SHARD);
    return doc;
}

static const cJSON *trace_frames_of(const cJSON *doc) {
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(doc, "frames");
    ck_assert_msg(cJSON_IsArray(frames), "TRACE has no \"frames\" array");
    return frames;
}

/*
 * The shard that answered frame `frame_id` in TRACE `doc`, asserting that
 * it is there once, that its shard is in range, and that its connection id
 * is one of that shard's (shard k numbers its connections k+1, k+1+SHARDS,
 * ...).  `*conn` gets the connection id when not NULL.
 */
static unsigned trace_shard_of(const cJSON *doc, uint64_t frame_id, uint64_t *conn) {
    const cJSON *f, *found = NULL;
    cJSON_ArrayForEach(f, trace_frames_of(doc)) {
        if (gf_test_ck_u64(f, "frame_id") != frame_id)
            continue;
        ck_assert_msg(found == NULL, "frame %" PRIu64 " is in TRACE twice", frame_id);
        found = f;
    }
    ck_assert_msg(found != NULL, "frame %" PRIu64 " is not in TRACE", frame_id);
    uint64_t shard = gf_test_ck_u64(found, "shard"), id = gf_test_ck_u64(found, "conn");
    ck_assert_uint_lt(shard, SHARDS);
    ck_assert_msg(id >= 1 && (id - 1) % SHARDS == shard,
                  "frame %" PRIu64 ": connection %" PRIu64 " is not one of shard %" PRIu64 "'s",
                  frame_id, id, shard);
    if (conn != NULL)
        *conn = id;
    return (unsigned)shard;
}

/* Asserts that TRACE's frames are ordered by "written", those written at
 * the same time by shard. */
static void assert_written_order(const cJSON *doc) {
    const cJSON *frames = trace_frames_of(doc);
    int n = cJSON_GetArraySize(frames);
    for (int i = 1; i < n; i++) {
        const cJSON *p = cJSON_GetArrayItem(frames, i - 1), *f = cJSON_GetArrayItem(frames, i);
        uint64_t wp = gf_test_ck_u64(p, "written"), wf = gf_test_ck_u64(f, "written");
        ck_assert_msg(wp < wf ||
                          (wp == wf && gf_test_ck_u64(p, "shard") <= gf_test_ck_u64(f, "shard")),
                      "TRACE frame %d (id %" PRIu64 ", shard %" PRIu64 ", written %" PRIu64
                      ") before frame %d (id %" PRIu64 ", shard %" PRIu64 ", written %" PRIu64 ")",
                      i - 1, gf_test_ck_u64(p, "frame_id"), gf_test_ck_u64(p, "shard"), wp, i,
                      gf_test_ck_u64(f, "frame_id"), gf_test_ck_u64(f, "shard"), wf);
    }
}

/* ---- streams on threads --------------------------------------------------------- */

/* One client's verified stream on a thread of its own, started with the
 * others' at a barrier. */
typedef struct stream_job {
    gf_client *c;              /* connected by the test's thread, which closes it */
    gf_test_stream s;          /* what it streams                                 */
    pthread_barrier_t *start;  /* every job's thread waits here first             */
    int rc;                    /* gf_test_stream_verified's                        */
    char err[GF_TEST_ERR_MAX]; /* its reason when rc < 0                           */
} stream_job;

static void *stream_job_main(void *arg) {
    stream_job *j = arg;
    pthread_barrier_wait(j->start);
    j->rc = gf_test_stream_verified(j->c, &j->s, j->err, sizeof j->err);
    return NULL;
}

/* Runs the `n` jobs at once and asserts that every stream was verified. */
static void stream_jobs(stream_job *jobs, unsigned n) {
    pthread_t th[16];
    pthread_barrier_t start;

    ck_assert_uint_le(n, sizeof th / sizeof th[0]);
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, n), 0);
    for (unsigned i = 0; i < n; i++) {
        jobs[i].start = &start;
        ck_assert_int_eq(pthread_create(&th[i], NULL, stream_job_main, &jobs[i]), 0);
    }
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (unsigned i = 0; i < n; i++)
        ck_assert_msg(jobs[i].rc == 0, "client %u: %s", i, jobs[i].err);
}

/* ---- placement ------------------------------------------------------------------- */

/*
 * Six connections after the test's STATS connection: seven over three
 * shards, so 3, 2, 2, and each shard holds two of the six whichever holds
 * the STATS connection.  STATS' per-shard figures add up to its totals.
 * Both connections of one shard then close, and the next two go to that
 * shard, the one with the fewest (round robin alone would spread them).
 */
START_TEST(connections_spread_evenly_over_shards) {
    enum { CLIENTS = 2 * SHARDS };
    start("");
    gf_client *s = settled_client();
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        c[i] = client();
        echo_frame(c[i], frame_id_of(i, 0), SMALL_FRAME_BYTES);
    }
    cJSON *st = gf_test_ck_stats(s);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.open"), CLIENTS + 1);
    /* The start-up probe, the STATS connection and the six. */
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.total"), CLIENTS + 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.per_shard"), SLOTS_PER_SHARD);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.count"), SHARDS * SLOTS_PER_SHARD);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.free"), SHARDS * SLOTS_PER_SHARD);
    unsigned with_three = 0, with_two = 0;
    for (unsigned k = 0; k < SHARDS; k++) {
        uint64_t n = shard_stat(st, k, "connections");
        with_three += n == 3;
        with_two += n == 2;
        /* Two of the six on every shard, one frame each. */
        ck_assert_uint_eq(shard_stat(st, k, "frames_answered"), 2);
        ck_assert_uint_eq(shard_stat(st, k, "frames_failed"), 0);
        ck_assert_uint_eq(shard_stat(st, k, "slots_busy"), 0);
        ck_assert_uint_eq(shard_stat(st, k, "in_flight"), 0);
    }
    ck_assert_msg(with_three == 1 && with_two == SHARDS - 1,
                  "connections per shard %" PRIu64 ", %" PRIu64 ", %" PRIu64
                  ", expected 3, 2, 2 in some order",
                  shard_stat(st, 0, "connections"), shard_stat(st, 1, "connections"),
                  shard_stat(st, 2, "connections"));
    ck_assert_uint_eq(shard_sum(st, "connections"), CLIENTS + 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), CLIENTS);
    ck_assert_uint_eq(shard_sum(st, "frames_answered"), gf_test_ck_u64(st, "frames.answered"));
    ck_assert_uint_eq(shard_sum(st, "submissions"), gf_test_ck_u64(st, "slots.submissions"));
    if (strcmp(g_engine, "cpu") == 0) {
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(st, "devices");
        ck_assert_int_eq(cJSON_GetArraySize(devs), 1);
        const cJSON *dev = cJSON_GetArrayItem(devs, 0);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(dev, "shards")),
                         (int)SHARDS);
        ck_assert_uint_eq(gf_test_ck_u64(dev, "frames_answered"), CLIENTS);
    }
    cJSON_Delete(st);

    /* Which shard each client is on, from the frames it sent. */
    cJSON *tr = trace(s, 0);
    ck_assert_int_eq(cJSON_GetArraySize(trace_frames_of(tr)), CLIENTS);
    unsigned shard_of[CLIENTS], per_shard[SHARDS] = {0};
    uint64_t conn_of[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        shard_of[i] = trace_shard_of(tr, frame_id_of(i, 0), &conn_of[i]);
        per_shard[shard_of[i]]++;
        for (unsigned j = 0; j < i; j++)
            ck_assert_msg(conn_of[j] != conn_of[i], "clients %u and %u: one connection id %" PRIu64,
                          j, i, conn_of[i]);
    }
    assert_written_order(tr);
    cJSON_Delete(tr);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(per_shard[k] == 2, "shard %u answered %u of the six clients, expected 2", k,
                      per_shard[k]);

    /* Without the STATS connection: two on every shard. */
    gf_client_close(s);
    cJSON *idle = NULL;
    gf_test_ck_wait_idle(c[0], CLIENTS, SETTLE_MS, &idle);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_uint_eq(shard_stat(idle, k, "connections"), 2);
    cJSON_Delete(idle);

    /* Shard `emptied` loses both its clients; the next two go there. */
    unsigned emptied = shard_of[CLIENTS - 1], closed = 0;
    for (unsigned i = 0; i < CLIENTS; i++) {
        if (shard_of[i] == emptied) {
            gf_client_close(c[i]);
            c[i] = NULL;
            closed++;
        }
    }
    ck_assert_uint_eq(closed, 2);
    gf_client *keep = c[0] ? c[0] : c[1] ? c[1] : c[2];
    gf_test_ck_wait_idle(keep, CLIENTS - 2, SETTLE_MS, NULL);
    gf_client *fresh[2];
    for (unsigned i = 0; i < 2; i++) {
        fresh[i] = client();
        echo_frame(fresh[i], frame_id_of(CLIENTS + i, 0), SMALL_FRAME_BYTES);
    }
    st = gf_test_ck_stats(keep);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(shard_stat(st, k, "connections") == 2,
                      "shard %u holds %" PRIu64 " connections after two went to shard %u's "
                      "place, expected 2",
                      k, shard_stat(st, k, "connections"), emptied);
    cJSON_Delete(st);
    tr = trace(keep, 0);
    for (unsigned i = 0; i < 2; i++)
        ck_assert_uint_eq(trace_shard_of(tr, frame_id_of(CLIENTS + i, 0), NULL), emptied);
    cJSON_Delete(tr);

    for (unsigned i = 0; i < 2; i++)
        gf_client_close(fresh[i]);
    for (unsigned i = 0; i < CLIENTS; i++)
        if (c[i])
            gf_client_close(c[i]);
    stop(0);
}
END_TEST

/* ---- totals ------------------------------------------------------------------------ */

/*
 * Six clients, two on every shard, stream verified frames of echo and
 * affine at once; then every total of STATS is exactly what was sent, and
 * each shard answered its two clients' frames.  requests.stats counts every
 * STATS the test sent (gf_test_stats_sent), requests.list its one LIST.
 */
START_TEST(totals_are_exact_over_shards) {
    enum { CLIENTS = 2 * SHARDS, FRAMES = 60 };
    static const size_t bytes[2] = {3001, AFFINE_BYTES}; /* echo, affine */
    uint64_t stats_sent0 = gf_test_stats_sent;
    start("");
    gf_client *s = settled_client();
    size_t count = 0;
    gf_pipeline *p = gf_test_ck_list(s, &count);
    ck_assert_uint_eq(count, P_COUNT);
    stream_job jobs[CLIENTS];
    memset(jobs, 0, sizeof jobs);
    uint64_t want_in_bytes = 0;
    for (unsigned i = 0; i < CLIENTS; i++) {
        jobs[i].c = client();
        jobs[i].s = (gf_test_stream){.pipeline = &p[i % 2 ? P_AFFINE : P_ECHO],
                                     .frame_bytes = bytes[i % 2],
                                     .frame_count = FRAMES,
                                     .window = 1 + i % 4,
                                     .first_frame_id = frame_id_of(i, 0) * 100,
                                     .seed = 11 + i};
        want_in_bytes += (uint64_t)FRAMES * bytes[i % 2];
    }
    stream_jobs(jobs, CLIENTS);

    cJSON *st = NULL;
    gf_test_ck_wait_idle(s, CLIENTS + 1, SETTLE_MS, &st);
    const uint64_t total = (uint64_t)CLIENTS * FRAMES;
    uint64_t received = gf_test_ck_u64(st, "frames.received");
    uint64_t answered = gf_test_ck_u64(st, "frames.answered");
    uint64_t failed = gf_test_ck_u64(st, "frames.failed");
    uint64_t dropped = gf_test_ck_u64(st, "frames.dropped");
    uint64_t truncated = gf_test_ck_u64(st, "frames.truncated");
    ck_assert_uint_eq(received, total);
    ck_assert_uint_eq(received, answered + failed + dropped + truncated);
    ck_assert_uint_eq(answered, total);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.in_progress"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "bytes.in"), want_in_bytes);
    ck_assert_uint_eq(gf_test_ck_u64(st, "latency.count"), total);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(st, "pipelines");
    ck_assert_int_eq(cJSON_GetArraySize(pl), P_COUNT);
    const uint64_t want_frames[P_COUNT] = {total / 2, total / 2, 0};
    for (int id = 0; id < P_COUNT; id++) {
        const cJSON *e = cJSON_GetArrayItem(pl, id);
        ck_assert_uint_eq(gf_test_ck_u64(e, "id"), (uint64_t)id);
        ck_assert_uint_eq(gf_test_ck_u64(e, "frames"), want_frames[id]);
        ck_assert_uint_eq(gf_test_ck_u64(e, "phases.end_to_end.count"), want_frames[id]);
    }
    /* Two clients on every shard (the STATS connection came first). */
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(shard_stat(st, k, "frames_answered") == 2 * FRAMES,
                      "shard %u answered %" PRIu64 " frames, expected %u", k,
                      shard_stat(st, k, "frames_answered"), 2 * FRAMES);
    ck_assert_uint_eq(shard_sum(st, "frames_answered"), answered);
    ck_assert_uint_eq(shard_sum(st, "frames_failed"), failed);
    ck_assert_uint_eq(shard_sum(st, "submissions"), gf_test_ck_u64(st, "slots.submissions"));
    ck_assert_uint_eq(shard_sum(st, "connections"), CLIENTS + 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "requests.stats"), gf_test_stats_sent - stats_sent0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "requests.list"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "requests.trace"), 0);
    cJSON_Delete(st);
    /* One more, to see the count move by exactly one STATS. */
    ck_assert_uint_eq(gf_test_ck_stat(s, "requests.stats"), gf_test_stats_sent - stats_sent0);

    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(jobs[i].c);
    free(p);
    gf_client_close(s);
    stop(0);
}
END_TEST

/* ---- TRACE ------------------------------------------------------------------------- */

/*
 * Five clients after the TRACE connection (two on every shard with it)
 * send echo frames in turns, one at a time.  While fewer than trace_frames
 * were answered, TRACE holds every one of them, from every shard, ordered
 * by "written"; once more were, it holds exactly trace_frames, the newest,
 * and a TRACE of N fewer is the last N of those.
 */
START_TEST(trace_merges_every_shard) {
    enum { TRACE_FRAMES = 12, CLIENTS = 5, ROUNDS_FEW = 2, ROUNDS = 8 };
    start("\"trace_frames\": 12,");
    gf_client *s = settled_client();
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++)
        c[i] = client();
    for (unsigned r = 0; r < ROUNDS_FEW; r++)
        for (unsigned i = 0; i < CLIENTS; i++)
            echo_frame(c[i], frame_id_of(i, r), 64);

    cJSON *tr = trace(s, 0);
    ck_assert_int_eq(cJSON_GetArraySize(trace_frames_of(tr)), CLIENTS * ROUNDS_FEW);
    unsigned shard_of[CLIENTS], seen[SHARDS] = {0};
    uint64_t conn_of[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        for (unsigned r = 0; r < ROUNDS_FEW; r++) {
            uint64_t conn;
            unsigned k = trace_shard_of(tr, frame_id_of(i, r), &conn);
            if (r == 0) {
                shard_of[i] = k;
                conn_of[i] = conn;
                seen[k]++;
            }
            /* A connection stays on its shard. */
            ck_assert_uint_eq(k, shard_of[i]);
            ck_assert_uint_eq(conn, conn_of[i]);
        }
    }
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(seen[k] > 0, "no client's frame in TRACE was answered by shard %u", k);
    assert_written_order(tr);
    cJSON_Delete(tr);

    for (unsigned r = ROUNDS_FEW; r < ROUNDS; r++)
        for (unsigned i = 0; i < CLIENTS; i++)
            echo_frame(c[i], frame_id_of(i, r), 64);
    tr = trace(s, 0);
    const cJSON *frames = trace_frames_of(tr);
    ck_assert_int_eq(cJSON_GetArraySize(frames), TRACE_FRAMES);
    assert_written_order(tr);
    /* The newest: every one among the frames sent last, allowing that two
     * frames of the last round may be written in another order than sent
     * (other shards' threads), never one of the first rounds. */
    unsigned seen_late[SHARDS] = {0};
    const cJSON *f;
    cJSON_ArrayForEach(f, frames) {
        uint64_t id = gf_test_ck_u64(f, "frame_id");
        unsigned i = (unsigned)(id / 1000u) - 1u, r = (unsigned)(id % 1000u);
        ck_assert_msg(i < CLIENTS && r < ROUNDS, "TRACE holds frame %" PRIu64 ", never sent", id);
        unsigned sent_index = r * CLIENTS + i;
        ck_assert_msg(sent_index + TRACE_FRAMES + CLIENTS >= ROUNDS * CLIENTS,
                      "TRACE holds frame %" PRIu64 " (sent %u of %u), not among the newest %u", id,
                      sent_index, ROUNDS * CLIENTS, TRACE_FRAMES);
        ck_assert_uint_eq(trace_shard_of(tr, id, NULL), shard_of[i]);
        seen_late[shard_of[i]]++;
    }
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(seen_late[k] > 0, "the newest %u frames hold none of shard %u", TRACE_FRAMES,
                      k);
    /* At most trace_frames whatever is asked; N fewer are the newest N. */
    cJSON *more = trace(s, 1000);
    ck_assert_int_eq(cJSON_GetArraySize(trace_frames_of(more)), TRACE_FRAMES);
    cJSON_Delete(more);
    enum { FEW = 5 };
    cJSON *few = trace(s, FEW);
    const cJSON *few_frames = trace_frames_of(few);
    ck_assert_int_eq(cJSON_GetArraySize(few_frames), FEW);
    for (int j = 0; j < FEW; j++)
        ck_assert_uint_eq(
            gf_test_ck_u64(cJSON_GetArrayItem(few_frames, j), "frame_id"),
            gf_test_ck_u64(cJSON_GetArrayItem(frames, TRACE_FRAMES - FEW + j), "frame_id"));
    cJSON_Delete(few);
    cJSON_Delete(tr);
    ck_assert_uint_eq(gf_test_ck_stat(s, "requests.trace"), 4);

    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(c[i]);
    gf_client_close(s);
    stop(0);
}
END_TEST

/*
 * A TRACE whose reply max_output_bytes_total cannot hold is cut to the
 * newest frames it holds (344 bytes of text a frame, daemon/trace.c), not
 * kept waiting for room that never comes.  With a budget of FIT frames'
 * text, more than a small reply's 16 KiB: TRACEs of every frame kept and of
 * more than FIT give the newest FIT, of FIT all of them, of FEW the newest
 * FEW.  (The daemon counted every other shard's ring as full in each reply,
 * where the reply holds at most trace_frames, and left a TRACE of FIT here
 * unanswered, as it did one of 60,000 frames of 8 shards of 65,536 on an
 * H200.)
 */
START_TEST(a_trace_beyond_the_output_budget_is_cut_to_it) {
    enum { TRACE_FRAMES = 120, FIT = 100, FEW = 3, SENT = 130 };
    char extra[128];
    snprintf(extra, sizeof extra, "\"trace_frames\": %d, \"max_output_bytes_total\": %d,",
             TRACE_FRAMES, FIT * 344 + 3);
    start(extra);
    gf_client *s = settled_client();
    gf_client *c = client();
    for (unsigned r = 0; r < SENT; r++)
        echo_frame(c, frame_id_of(0, r), 64);
    uint32_t asks[] = {0, TRACE_FRAMES, FIT + 1, FIT, FEW};
    for (unsigned a = 0; a < sizeof asks / sizeof asks[0]; a++) {
        cJSON *tr = trace(s, asks[a]);
        const cJSON *frames = trace_frames_of(tr);
        int want = asks[a] == FEW ? FEW : FIT;
        ck_assert_msg(cJSON_GetArraySize(frames) == want, "TRACE %u: %d frames, not %d",
                      (unsigned)asks[a], cJSON_GetArraySize(frames), want);
        for (int j = 0; j < want; j++)
            ck_assert_uint_eq(gf_test_ck_u64(cJSON_GetArrayItem(frames, j), "frame_id"),
                              frame_id_of(0, SENT - want + j));
        cJSON_Delete(tr);
    }
    gf_client_close(c);
    gf_client_close(s);
    stop(0);
}
END_TEST

/* ---- limits ------------------------------------------------------------------------ */

/*
 * max_connections 4 over three shards: with four open, on every shard, the
 * fifth is answered too_many_connections and closed; once one closes, a new
 * one is served, and the next is refused again.
 */
START_TEST(max_connections_counts_every_shard) {
    enum { LIMIT = 4 };
    start("\"max_connections\": 4,");
    gf_client *s = settled_client();
    gf_client *c[LIMIT - 1];
    for (unsigned i = 0; i < LIMIT - 1; i++) {
        c[i] = client();
        echo_frame(c[i], frame_id_of(i, 0), 64);
    }
    cJSON *st = gf_test_ck_stats(s);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.open"), LIMIT);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_uint_ge(shard_stat(st, k, "connections"), 1);
    ck_assert_uint_eq(shard_sum(st, "connections"), LIMIT);
    cJSON_Delete(st);

    int fd = gf_test_ck_raw_connect(daemon_.socket_path);
    gf_header h = gf_test_ck_raw_error(fd, GF_ERR_TOO_MANY_CONNECTIONS, "max_connections 4 reached",
                                       QUICK_REPLY_MS, GF_TEST_CLOSES);
    ck_assert_uint_eq(h.frame_id, 0);
    st = gf_test_ck_stats(s);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.refused"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.too_many_connections"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.open"), LIMIT);
    ck_assert_uint_eq(shard_sum(st, "connections"), LIMIT);
    cJSON_Delete(st);

    /* One goes: a new one is served, and the one after is refused. */
    gf_client_close(c[0]);
    gf_test_ck_wait_idle(s, LIMIT - 1, SETTLE_MS, NULL);
    c[0] = client();
    echo_frame(c[0], frame_id_of(0, 1), 64);
    fd = gf_test_ck_raw_connect(daemon_.socket_path);
    gf_test_ck_raw_error(fd, GF_ERR_TOO_MANY_CONNECTIONS, "max_connections 4 reached",
                         QUICK_REPLY_MS, GF_TEST_CLOSES);
    ck_assert_uint_eq(gf_test_ck_stat(s, "connections.refused"), 2);
    ck_assert_uint_eq(gf_test_ck_stat(s, "connections.open"), LIMIT);

    for (unsigned i = 0; i < LIMIT - 1; i++)
        gf_client_close(c[i]);
    gf_client_close(s);
    stop(1); /* the refusals are logged as warnings */
}
END_TEST

/* STATS and TRACE whose connections go before every shard has answered:
 * the answers come back to nobody, and nothing of the shard's own count of
 * TRACEs under way may be lost or go negative (a STATS dropped that way
 * once took it below zero and made every later TRACE of that shard wait
 * for ever).  Afterwards TRACEs and STATS of every shard are answered. */
START_TEST(requests_of_closed_connections_leave_no_trace) {
    enum { ROUNDS = 30, CLIENTS = 4 };
    start("");
    gf_client *s = settled_client();
    uint64_t accepted = gf_test_ck_stat(s, "connections.total");
    for (unsigned r = 0; r < ROUNDS; r++) {
        /* A frame, then a STATS or TRACE, then gone: writing the frame's
         * result fails (EPIPE) and closes the connection while the shards
         * are still asked for their figures. */
        int fd = gf_test_ck_raw_connect(daemon_.socket_path);
        static const unsigned char data[64];
        gf_test_ck_raw_frame(fd, 1000 + r, 0, sizeof data, data, sizeof data);
        gf_header h = gf_test_header(r % 2 ? GF_MSG_TRACE : GF_MSG_STATS, r, 0, 0);
        ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
        close(fd);
    }
    /* Every one taken by its shard, then closed: a connection placed but
     * still in its shard's mailbox counts for placement, not in STATS, and
     * would send the clients below elsewhere (a loaded TSan run once left
     * a shard without one). */
    ck_assert_uint_ge(
        gf_test_ck_wait_stat(s, "connections.total", accepted + ROUNDS, UINT64_MAX, SETTLE_MS),
        accepted + ROUNDS);
    gf_test_ck_wait_idle(s, 1, SETTLE_MS, NULL);
    /* Clients on every shard: each one's TRACEs and STATS are answered. */
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        c[i] = client();
        echo_frame(c[i], frame_id_of(i, 0), 64);
    }
    for (unsigned round = 0; round < 2 * GF_GATHERS_MAX_FOR_TEST; round++)
        for (unsigned i = 0; i < CLIENTS; i++)
            cJSON_Delete(trace(c[i], 0));
    cJSON *st = gf_test_ck_stats(s);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_uint_ge(shard_stat(st, k, "connections"), 1);
    /* A raw connection's request may be read or not before its close. */
    uint64_t traces = gf_test_ck_u64(st, "requests.trace");
    ck_assert_uint_ge(traces, 2 * GF_GATHERS_MAX_FOR_TEST * CLIENTS);
    ck_assert_uint_le(traces, ROUNDS / 2 + 2 * GF_GATHERS_MAX_FOR_TEST * CLIENTS);
    cJSON_Delete(st);
    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(c[i]);
    gf_client_close(s);
    stop(0);
}
END_TEST

/* ---- reload ------------------------------------------------------------------------ */

/* Polls LIST on `c` until affine's parameters are a, b: the shard of `c`
 * has applied the reload (LIST is answered from the shard's own
 * configuration).  Fails after SETTLE_MS. */
static void wait_affine_params(gf_client *c, float a, float b, unsigned which) {
    uint64_t deadline = gf_now_ms() + SETTLE_MS;
    float got_a = 0, got_b = 0;
    for (;;) {
        size_t count = 0;
        gf_pipeline *p = gf_test_ck_list(c, &count);
        ck_assert_uint_eq(count, P_COUNT);
        got_a = p[P_AFFINE].stages[0].params.a;
        got_b = p[P_AFFINE].stages[0].params.b;
        free(p);
        if ((got_a == a && got_b == b) || gf_now_ms() >= deadline)
            break;
        gf_test_sleep_ms(20);
    }
    ck_assert_msg(got_a == a && got_b == b,
                  "client %u's shard still lists affine a=%g b=%g %d ms after SIGHUP, "
                  "expected a=%g b=%g",
                  which, (double)got_a, (double)got_b, SETTLE_MS, (double)a, (double)b);
}

/*
 * SIGHUP with new affine parameters: connections already open on every
 * shard, and new ones landing on every shard, all get results with the new
 * parameters, exactly.
 */
START_TEST(reload_applies_on_every_shard) {
    enum { CLIENTS = 5, FRESH = SHARDS };
    start("");
    gf_client *s = settled_client();
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        c[i] = client();
        assert_affine_result(c[i], AFFINE_A, AFFINE_B, frame_id_of(i, 0));
    }
    cJSON *tr = trace(s, 0);
    unsigned seen[SHARDS] = {0};
    for (unsigned i = 0; i < CLIENTS; i++)
        seen[trace_shard_of(tr, frame_id_of(i, 0), NULL)]++;
    cJSON_Delete(tr);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(seen[k] > 0, "no client on shard %u: the reload would not be seen there", k);

    char json[2048];
    make_config(json, sizeof json, "-3.0", "1.25", "");
    gf_test_ck_daemon_put_config(&daemon_, json);
    ck_assert_int_eq(gf_test_daemon_signal(&daemon_, SIGHUP), 0);
    for (unsigned i = 0; i < CLIENTS; i++)
        wait_affine_params(c[i], AFFINE_A_NEW, AFFINE_B_NEW, i);
    for (unsigned i = 0; i < CLIENTS; i++)
        assert_affine_result(c[i], AFFINE_A_NEW, AFFINE_B_NEW, frame_id_of(i, 1));

    /* Six open, two on every shard: the next three land one on each. */
    gf_client *fresh[FRESH];
    for (unsigned i = 0; i < FRESH; i++) {
        fresh[i] = client();
        assert_affine_result(fresh[i], AFFINE_A_NEW, AFFINE_B_NEW, frame_id_of(CLIENTS + i, 0));
    }
    tr = trace(s, 0);
    unsigned fresh_seen[SHARDS] = {0};
    for (unsigned i = 0; i < FRESH; i++)
        fresh_seen[trace_shard_of(tr, frame_id_of(CLIENTS + i, 0), NULL)]++;
    cJSON_Delete(tr);
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(fresh_seen[k] == 1, "%u of the new connections on shard %u, expected 1",
                      fresh_seen[k], k);
    ck_assert_uint_eq(gf_test_ck_stat(s, "frames.failed"), 0);

    for (unsigned i = 0; i < FRESH; i++)
        gf_client_close(fresh[i]);
    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(c[i]);
    gf_client_close(s);
    char *log = gf_test_read_file(daemon_.log_path, NULL);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(gf_test_count_lines(log, "reloaded ", "pipelines[1] (affine).params") == 1,
                  "no reload line naming affine's params in the log:\n%s", log);
    free(log);
    stop(0);
}
END_TEST

/* ---- drain ------------------------------------------------------------------------- */

/* Bytes of a slow frame that takes about `ms` on the cpu engine. */
static size_t slow_frame_bytes(unsigned ms) {
    return gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS, ms, MAX_FRAME_BYTES);
}

/*
 * Five clients after the STATS connection (the shard that holds it has one
 * of them, the others two) each send one slow frame, every byte received:
 * on the cpu engine they are still running on every shard at SIGTERM.
 * Every one is answered with its exact result, each connection then closes,
 * and the daemon exits 0, its log saying every frame was answered.
 */
START_TEST(sigterm_drains_every_shard) {
    enum { CLIENTS = 5 };
    char err[ERR_BYTES];
    void *in[CLIENTS], *ref[CLIENTS];
    size_t ref_bytes[CLIENTS], count = 0;
    uint64_t rng = 7;
    start("");
    gf_client *s = settled_client();
    gf_pipeline *p = gf_test_ck_list(s, &count);
    ck_assert_uint_eq(count, P_COUNT);
    size_t bytes = slow_frame_bytes(DRAIN_FRAME_MS);
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        c[i] = client();
        int rc = gf_test_make_frame(&p[P_SLOW], bytes, &rng, &in[i], &ref[i], &ref_bytes[i], err,
                                    sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
    }
    for (unsigned i = 0; i < CLIENTS; i++) {
        ck_assert_int_eq(gf_client_send_frame(c[i], P_SLOW, frame_id_of(i, 0), in[i], bytes), 0);
        int rc = gf_client_flush(c[i], GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "flush: %s (%s)", strerror(-rc), gf_client_error(c[i]));
    }
    /* Every payload wholly in, so that every frame counts as received. */
    uint64_t in_bytes = gf_test_ck_wait_stat(s, "bytes.in", CLIENTS * bytes, UINT64_MAX, SETTLE_MS);
    ck_assert_uint_eq(in_bytes, CLIENTS * bytes);
    cJSON *st = gf_test_ck_stats(s);
    unsigned busy_shards = 0;
    for (unsigned k = 0; k < SHARDS; k++)
        busy_shards += shard_stat(st, k, "slots_busy") > 0;
    uint64_t busy = shard_sum(st, "slots_busy"), received = gf_test_ck_u64(st, "frames.received");
    ck_assert_uint_eq(busy, gf_test_ck_u64(st, "slots.count") - gf_test_ck_u64(st, "slots.free"));
    cJSON_Delete(st);
    ck_assert_uint_eq(received, CLIENTS);
    gf_client_close(s);

    ck_assert_int_eq(gf_test_daemon_signal(&daemon_, SIGTERM), 0);
    for (unsigned i = 0; i < CLIENTS; i++) {
        gf_reply r;
        int rc = gf_client_recv(c[i], &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "client %u: no reply after SIGTERM (%u shards busy): %s (%s)", i,
                      busy_shards, strerror(-rc), gf_client_error(c[i]));
        rc = gf_test_check_result(&p[P_SLOW], &r, frame_id_of(i, 0), ref[i], ref_bytes[i], err,
                                  sizeof err);
        ck_assert_msg(rc == 0, "client %u after SIGTERM: %s", i, err);
        rc = gf_client_recv(c[i], &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == -ECONNRESET,
                      "client %u after its last reply: %s, expected the connection closed", i,
                      rc == 0 ? "another reply" : strerror(-rc));
        gf_client_close(c[i]);
    }
    gf_test_ck_daemon_exited(&daemon_, gf_test_ck_daemon_wait(&daemon_, SETTLE_MS), 0);
    /* The frames were still running on several shards at SIGTERM: else the
     * drain was not tested.  cpu only: a GPU is done with them at once. */
    if (strcmp(g_engine, "cpu") == 0)
        ck_assert_msg(busy_shards >= 2,
                      "%u shard(s) (%" PRIu64 " slots) busy at SIGTERM: the drain of several "
                      "shards was not tested (slow frames of %zu bytes)",
                      busy_shards, busy, bytes);
    char *log = gf_test_read_file(daemon_.log_path, NULL);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strstr(log, "drained: every frame received was answered") != NULL, "log:\n%s",
                  log);
    char failures[4096];
    ck_assert_msg(gf_test_log_failures(daemon_.log_path, failures, sizeof failures) == 0,
                  "the log has failure lines:\n%s", failures);
    free(log);
    for (unsigned i = 0; i < CLIENTS; i++) {
        free(in[i]);
        free(ref[i]);
    }
    free(p);
    gf_test_daemon_cleanup(&daemon_);
}
END_TEST

/* ---- order ------------------------------------------------------------------------- */

/*
 * Five clients after the STATS connection stream at once, window 16: small
 * echo frames (batched), frames past the header buffer, affine.  Each
 * stream's replies are checked in order (gf_test_stream_verified); TRACE
 * shows each connection's frames written in frame id order, the streams on
 * every shard, and streams of different shards overlapping in time.
 */
START_TEST(pipelined_replies_keep_their_order) {
    enum { CLIENTS = 5, FRAMES = 200, WINDOW = 16 };
    static const struct {
        uint32_t pipeline;
        size_t bytes;
    } kinds[CLIENTS] = {
        {P_ECHO, 100}, {P_ECHO, 5000}, {P_AFFINE, AFFINE_BYTES}, {P_ECHO, 40000}, {P_AFFINE, 64}};
    start("");
    gf_client *s = settled_client();
    size_t count = 0;
    gf_pipeline *p = gf_test_ck_list(s, &count);
    ck_assert_uint_eq(count, P_COUNT);
    stream_job jobs[CLIENTS];
    memset(jobs, 0, sizeof jobs);
    for (unsigned i = 0; i < CLIENTS; i++) {
        jobs[i].c = client();
        jobs[i].s = (gf_test_stream){.pipeline = &p[kinds[i].pipeline],
                                     .frame_bytes = kinds[i].bytes,
                                     .frame_count = FRAMES,
                                     .window = WINDOW,
                                     .first_frame_id = frame_id_of(i, 0) * 1000,
                                     .seed = 31 + i};
    }
    stream_jobs(jobs, CLIENTS);

    cJSON *st = NULL;
    gf_test_ck_wait_idle(s, CLIENTS + 1, SETTLE_MS, &st);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), CLIENTS * FRAMES);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.received"), CLIENTS * FRAMES);
    /* The shard with the STATS connection has one stream, the others two. */
    unsigned one = 0, two = 0;
    for (unsigned k = 0; k < SHARDS; k++) {
        uint64_t n = shard_stat(st, k, "frames_answered");
        one += n == FRAMES;
        two += n == 2 * FRAMES;
    }
    ck_assert_msg(one == 1 && two == SHARDS - 1,
                  "frames answered per shard %" PRIu64 ", %" PRIu64 ", %" PRIu64
                  ", expected %u, %u, %u in some order",
                  shard_stat(st, 0, "frames_answered"), shard_stat(st, 1, "frames_answered"),
                  shard_stat(st, 2, "frames_answered"), FRAMES, 2 * FRAMES, 2 * FRAMES);
    cJSON_Delete(st);

    /* Daemon side: per connection, written in frame id order. */
    cJSON *tr = trace(s, 0);
    const cJSON *frames = trace_frames_of(tr);
    ck_assert_int_eq(cJSON_GetArraySize(frames), CLIENTS * FRAMES);
    assert_written_order(tr);
    uint64_t last_id[CLIENTS] = {0}, first_arrived[CLIENTS], last_written[CLIENTS] = {0};
    unsigned got[CLIENTS] = {0}, shard_of[CLIENTS] = {0};
    const cJSON *f;
    cJSON_ArrayForEach(f, frames) {
        uint64_t id = gf_test_ck_u64(f, "frame_id");
        unsigned i = (unsigned)(id / 1000000u) - 1u;
        ck_assert_msg(i < CLIENTS, "TRACE holds frame %" PRIu64 ", never sent", id);
        unsigned k = (unsigned)gf_test_ck_u64(f, "shard");
        if (got[i] == 0) {
            shard_of[i] = k;
            first_arrived[i] = gf_test_ck_u64(f, "arrived");
        } else {
            ck_assert_msg(id > last_id[i],
                          "client %u: frame %" PRIu64 " written after frame %" PRIu64, i, id,
                          last_id[i]);
            ck_assert_uint_eq(k, shard_of[i]);
        }
        uint64_t arrived = gf_test_ck_u64(f, "arrived");
        first_arrived[i] = arrived < first_arrived[i] ? arrived : first_arrived[i];
        last_written[i] = gf_test_ck_u64(f, "written");
        last_id[i] = id;
        got[i]++;
    }
    unsigned on_shard[SHARDS] = {0};
    for (unsigned i = 0; i < CLIENTS; i++) {
        ck_assert_uint_eq(got[i], FRAMES);
        on_shard[shard_of[i]]++;
    }
    for (unsigned k = 0; k < SHARDS; k++)
        ck_assert_msg(on_shard[k] > 0, "no stream on shard %u", k);
    /* Streams of different shards ran at the same time. */
    unsigned overlaps = 0;
    for (unsigned i = 0; i < CLIENTS; i++)
        for (unsigned j = i + 1; j < CLIENTS; j++)
            overlaps += shard_of[i] != shard_of[j] && first_arrived[i] < last_written[j] &&
                        first_arrived[j] < last_written[i];
    ck_assert_msg(overlaps > 0, "no two streams of different shards overlapped in time");
    cJSON_Delete(tr);

    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(jobs[i].c);
    free(p);
    gf_client_close(s);
    stop(0);
}
END_TEST

/* ---- pipelines limited to devices ---------------------------------------------- */

/* Three shards on devices 0, 1, 0: the cpu engine numbers its shards as the
 * devices listed (config/README.md, "Shards"), so a pipeline limited to
 * device 1 runs on shard 1 alone, and one limited to device 0 on 0 and 2. */
static const char devices_json[] =
    "{\"shards\": 3, \"slots\": 2, \"devices\": \"0,1\", \"max_frame_bytes\": 4194304,"
    " \"log_level\": \"info\","
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    " {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5},"
    " \"devices\": \"1\"},"
    " {\"name\": \"on0\", \"kind\": \"echo\", \"devices\": \"0\"}]}";
enum { P_ON1 = P_AFFINE, P_ON0 = 2 };

/*
 * A connection whose frame names a pipeline its shard's device does not run
 * moves to a shard that runs it, once it owes nothing, and goes on there:
 * six connections (two on each shard) each pipeline frames of the three
 * pipelines, alternating, and get every reply in order with its result; a
 * connection with a shared-memory region takes it along.  TRACE shows each
 * limited pipeline's frames on its device's shards only; STATS counts the
 * moves, and no connection or frame is lost or counted twice.
 */
START_TEST(connections_move_to_their_pipelines_device) {
    enum { CLIENTS = 6, ROUNDS = 4 };
    static const struct {
        uint32_t pipeline;
        size_t bytes;
    } burst[] = {{P_ECHO, 100}, {P_ON1, AFFINE_BYTES}, {P_ON0, 300}, {P_ON1, 64}, {P_ON0, 5},
                 {P_ECHO, 7}};
    enum { BURST = sizeof burst / sizeof burst[0] };
    static unsigned char inputs[BURST][AFFINE_BYTES];
    gf_test_ck_daemon_start(&daemon_, devices_json, g_engine);
    gf_client *s = settled_client();
    gf_client *c[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++)
        c[i] = client();
    /* Each client's frames go out together and come back in order, though
     * the connection moves between them. */
    for (unsigned r = 0; r < ROUNDS; r++)
        for (unsigned i = 0; i < CLIENTS; i++) {
            for (unsigned k = 0; k < BURST; k++)
                send_pattern(c[i], burst[k].pipeline, frame_id_of(i, r * BURST + k), burst[k].bytes,
                             inputs[k]);
            for (unsigned k = 0; k < BURST; k++)
                expect_pattern(c[i], burst[k].pipeline, frame_id_of(i, r * BURST + k),
                               burst[k].bytes);
        }
    /* A region goes with its connection: shm frames on device 1, then 0. */
    gf_client *m = client();
    gf_client_shm *set = NULL;
    ck_assert_int_eq(gf_client_shm_open(m, 2, AFFINE_BYTES, AFFINE_BYTES, &set, QUICK_REPLY_MS), 0);
    for (unsigned k = 0; k < 4; k++) {
        uint32_t pipeline = k % 2 ? P_ON0 : P_ON1;
        unsigned char *in = gf_client_shm_frame_buffer(set, k % 2);
        for (size_t b = 0; b < AFFINE_BYTES; b++)
            in[b] = (unsigned char)(b * 31u + (9000u + k) * 7u);
        ck_assert_int_eq(gf_client_send_shm(m, set, k % 2, pipeline, 9000u + k, AFFINE_BYTES), 0);
        gf_reply r;
        ck_assert_int_eq(gf_client_recv(m, &r, QUICK_REPLY_MS), 0);
        ck_assert_msg(r.header.type == GF_MSG_RESULT, "shm frame %u: %s %.*s", k,
                      gf_status_name(r.header.status), (int)r.payload_bytes,
                      (const char *)r.payload);
        size_t out_bytes = 0;
        const unsigned char *out = gf_client_shm_result(set, &r, &out_bytes);
        ck_assert_ptr_nonnull(out);
        ck_assert_uint_eq(out_bytes, AFFINE_BYTES);
        if (pipeline == P_ON0)
            ck_assert_mem_eq(out, in, AFFINE_BYTES);
        else
            for (size_t i = 0; i < AFFINE_BYTES / sizeof(float); i++) {
                float x, got;
                memcpy(&x, in + 4 * i, sizeof x);
                memcpy(&got, out + 4 * i, sizeof got);
                volatile float ax = 2.0f * x;
                float want = ax + 0.5f;
                ck_assert(memcmp(&got, &want, sizeof want) == 0 || (want != want && got != got));
            }
    }
    ck_assert_int_eq(gf_client_shm_close(m, set, QUICK_REPLY_MS), 0);

    cJSON *st = NULL;
    gf_test_ck_wait_idle(s, CLIENTS + 2, SETTLE_MS, &st);
    const uint64_t frames = CLIENTS * ROUNDS * BURST + 4;
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), frames);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.received"), frames);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "connections.open"), CLIENTS + 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "shm.regions_open"), 0);
    /* Every client moved at least once a round; none was counted twice. */
    ck_assert_uint_ge(gf_test_ck_u64(st, "connections.moved"), CLIENTS * ROUNDS);
    ck_assert_uint_le(gf_test_ck_u64(st, "connections.total"), CLIENTS + 3);
    cJSON_Delete(st);
    cJSON *tr = trace(s, 0);
    const cJSON *f;
    unsigned seen[3] = {0};
    cJSON_ArrayForEach(f, trace_frames_of(tr)) {
        uint64_t pipeline = gf_test_ck_u64(f, "pipeline"), shard = gf_test_ck_u64(f, "shard");
        ck_assert_uint_lt(pipeline, 3);
        seen[pipeline]++;
        if (pipeline == P_ON1)
            ck_assert_msg(shard == 1, "affine (device 1) ran on shard %" PRIu64, shard);
        if (pipeline == P_ON0)
            ck_assert_msg(shard != 1, "on0 (device 0) ran on shard 1");
    }
    ck_assert_msg(seen[P_ON1] > 0 && seen[P_ON0] > 0, "TRACE holds %u affine and %u on0 frames",
                  seen[P_ON1], seen[P_ON0]);
    cJSON_Delete(tr);
    for (unsigned i = 0; i < CLIENTS; i++)
        gf_client_close(c[i]);
    gf_client_close(m);
    gf_client_close(s);
    stop(0);
}
END_TEST

/* The next reply on raw socket `sock`: of `type`, for `frame_id`. */
static void expect_raw_reply(int sock, uint8_t type, uint64_t frame_id) {
    gf_header h;
    char err[ERR_BYTES];
    static uint8_t payload[4096];
    ck_assert_msg(gf_test_raw_recv_reply(sock, &h, payload, sizeof payload, QUICK_REPLY_MS, err,
                                         sizeof err) == 0,
                  "reply to %" PRIu64 ": %s", frame_id, err);
    ck_assert_msg(h.type == type, "reply to %" PRIu64 ": type %u, %s %.*s", frame_id, h.type,
                  gf_status_name(h.status), (int)h.payload_bytes, (const char *)payload);
    if (type != GF_MSG_REGION_ADD)
        ck_assert_uint_eq(h.frame_id, frame_id);
}

/* A FRAME that must move and, in the same read, a REGION_ADD with its
 * memfd: the memfd moves with the connection and the REGION_ADD is
 * answered on the new shard.  (The move waited for the memfd to be
 * claimed, which only reading on could do: the FRAME was never answered,
 * and SIGTERM's drain ran out.)  Then SIGTERM drains and the daemon exits 0. */
START_TEST(a_memfd_after_a_moving_frame_goes_along) {
    gf_test_ck_daemon_start(&daemon_, devices_json, g_engine);
    for (uint64_t round = 0; round < 3; round++) {
        int sock = gf_test_ck_raw_connect(daemon_.socket_path);
        uint8_t buf[3 * GF_HEADER_BYTES];
        /* First to a device-0 shard, so that the next frame moves it. */
        gf_test_ck_raw_frame(sock, 10 * round + 1, P_ON0, 8, NULL, 8);
        expect_raw_reply(sock, GF_MSG_RESULT, 10 * round + 1);
        gf_header frame = gf_test_header(GF_MSG_FRAME, 10 * round + 2, P_ON1, 8);
        gf_header add = gf_test_header(GF_MSG_REGION_ADD, 10 * round + 3, 0, 0);
        add.version = 2;
        gf_header_encode(&frame, buf);
        memset(buf + GF_HEADER_BYTES, 7, 8);
        gf_header_encode(&add, buf + GF_HEADER_BYTES + 8);
        int mfd = memfd_create("gf-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(mfd, 0);
        ck_assert_int_eq(ftruncate(mfd, 4096), 0);
        ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
        ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, 2 * GF_HEADER_BYTES + 8, mfd, 1), 0);
        close(mfd);
        expect_raw_reply(sock, GF_MSG_RESULT, 10 * round + 2);
        expect_raw_reply(sock, GF_MSG_REGION_ADD, 10 * round + 3);
        close(sock);
    }
    stop(0);
}
END_TEST

/* A pipeline limited to a device no shard runs on: start-up fails, naming
 * it.  The daemon is run to its exit: it may listen for a moment before it
 * sees the problem, so a connection accepted proves nothing. */
START_TEST(a_pipeline_on_no_shards_device_is_refused) {
    static const char json[] = "{\"shards\": 2, \"devices\": \"0,1\","
                               " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
                               " {\"name\": \"far\", \"kind\": \"echo\", \"devices\": \"2,3\"}]}";
    char err[ERR_BYTES], *out;
    char *argv[GF_TEST_DAEMON_ARGC + 1];
    ck_assert_int_eq(gf_test_daemon_prepare(&daemon_, json, g_engine, err, sizeof err), 0);
    gf_test_daemon_argv(&daemon_, argv);
    ck_assert_int_ne(gf_test_ck_run(daemon_.dir, argv, GF_TEST_START_TIMEOUT_MS, &out), 0);
    ck_assert_msg(strstr(out, "pipeline far: devices \"2,3\": no shard runs on them") != NULL, "%s",
                  out);
    free(out);
    gf_test_daemon_cleanup(&daemon_);
}
END_TEST

/* ---- the suite ----------------------------------------------------------------------- */

static TCase *tcase(const char *name) {
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    return tc;
}

static Suite *shards_suite(void) {
    Suite *s = suite_create("shards");
    TCase *tc = tcase("placement");
    tcase_add_test(tc, connections_spread_evenly_over_shards);
    tcase_add_test(tc, totals_are_exact_over_shards);
    tcase_add_test(tc, max_connections_counts_every_shard);
    suite_add_tcase(s, tc);

    tc = tcase("trace");
    tcase_add_test(tc, trace_merges_every_shard);
    tcase_add_test(tc, a_trace_beyond_the_output_budget_is_cut_to_it);
    tcase_add_test(tc, requests_of_closed_connections_leave_no_trace);
    suite_add_tcase(s, tc);

    tc = tcase("reload");
    tcase_add_test(tc, reload_applies_on_every_shard);
    suite_add_tcase(s, tc);

    tc = tcase("drain");
    tcase_add_test(tc, sigterm_drains_every_shard);
    suite_add_tcase(s, tc);

    tc = tcase("order");
    tcase_add_test(tc, pipelined_replies_keep_their_order);
    suite_add_tcase(s, tc);

    /* The cpu engine numbers its shards as listed devices; on GPUs,
     * tests/two_devices_gpu.sh moves connections between two real ones. */
    if (strcmp(g_engine, "cpu") == 0) {
        tc = tcase("devices");
        tcase_add_test(tc, connections_move_to_their_pipelines_device);
        tcase_add_test(tc, a_pipeline_on_no_shards_device_is_refused);
        tcase_add_test(tc, a_memfd_after_a_moving_frame_goes_along);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    g_sincos_ns = gf_test_sincos_ns();
    printf("shards tests against gpuframed with the %s engine (%s), %u shards; slow frames of "
           "%zu bytes\n",
           g_engine, gf_test_daemon_path(), SHARDS, slow_frame_bytes(DRAIN_FRAME_MS));
    fflush(stdout);
    return gf_test_run(shards_suite());
}

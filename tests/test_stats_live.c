/* SPDX-License-Identifier: MIT */
/*
 * Statistics and traces of a real gpuframed against known traffic: phase
 * totals, the latency histogram, TRACE's frames and their order, and (CUDA
 * engine) that the copies of one slot overlap the other slot's work.
 * The engine comes from GF_TEST_ENGINE (cpu or cuda).
 */
#include <check.h>
#include <inttypes.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

#define REPLY_TIMEOUT_MS 30000
/* Per-test limit of Check. */
#define TEST_TIMEOUT_S 120
#define MIB            (1024u * 1024u)

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */

/* Every frame timed, so that phase counts and overlaps are exact. */
static const char config_json[] =
    "{\"slots\": 2, \"max_frame_bytes\": 4194304, \"frame_timeout_ms\": 30000,"
    " \"timing_sample_every\": 1,"
    " \"trace_frames\": 4096, \"log_level\": \"info\","
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    "                 {\"name\": \"sincos\", \"kind\": \"sincos\", \"params\": {\"iters\": 8}}]}";

/* The same with three slots, for the overlap of copies across slots: with
 * two, one slot at a time is received into (docs/design.md, "What a client gets
 * whatever others do"), and an echo frame's GPU work, far shorter than its
 * receipt through the socket, is over before the next frame is in. */
static const char overlap_json[] =
    "{\"slots\": 3, \"max_frame_bytes\": 4194304, \"frame_timeout_ms\": 30000,"
    " \"timing_sample_every\": 1, \"trace_frames\": 4096,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

static const char untimed_json[] =
    "{\"slots\": 2, \"timing_events\": false, \"max_frame_bytes\": 1048576,"
    " \"zero_copy_max_bytes\": 0,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* One frame in SAMPLE_EVERY timed. */
#define SAMPLE_EVERY 4
static const char sampled_json[] =
    "{\"slots\": 2, \"timing_sample_every\": 4, \"max_frame_bytes\": 1048576,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* Each completion mode, which the CPU engine ignores (printf: the mode). */
static const char completion_json[] =
    "{\"slots\": 2, \"completion\": \"%s\", \"timing_sample_every\": 1,"
    " \"max_frame_bytes\": 4194304,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";
static const char *const completion_modes[] = {"poll", "hybrid", "host_func"};

static gf_test_daemon daemon_;
static gf_pipeline *pipelines;
static size_t pipeline_count;

static cJSON *fetch(gf_client *c, uint8_t type, uint32_t count) {
    char *json = NULL;
    int rc = type == GF_MSG_TRACE ? gf_client_request_trace(c, count, &json, REPLY_TIMEOUT_MS)
                                  : gf_client_request_json(c, type, &json, REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "request %u: %s (%s)", type, strerror(-rc), gf_client_error(c));
    cJSON *doc = cJSON_Parse(json);
    ck_assert_msg(doc != NULL, "reply is not JSON: %.200s", json);
    free(json);
    return doc;
}

static double num(const cJSON *root, const char *dotted) {
    return (double)gf_test_ck_u64(root, dotted);
}

static double real_at(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    ck_assert_msg(cJSON_IsNumber(v), "no number at %s", key);
    return v->valuedouble;
}

static void stream(gf_client *c, uint32_t pipeline, size_t bytes, unsigned count, unsigned window,
                   uint64_t first_id) {
    gf_test_ck_stream(c, &(gf_test_stream){.pipeline = &pipelines[pipeline],
                                           .frame_bytes = bytes,
                                           .frame_count = count,
                                           .window = window,
                                           .first_frame_id = first_id,
                                           .seed = first_id + 1});
}

/* The test's daemon on `json`, with its pipelines as LIST reports them; and
 * stopping it: exit 0 after SIGTERM. */
static void start(const char *json) {
    gf_test_ck_daemon_start(&daemon_, json, g_engine);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    pipelines = gf_test_ck_list(c, &pipeline_count);
    gf_client_close(c);
}

static void stop(void) {
    free(pipelines);
    pipelines = NULL;
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}

/* Phase totals and the histogram move by exactly the frames sent. */
START_TEST(phases_add_up_for_known_traffic) {
    const unsigned n = 64;
    start(config_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *before = fetch(c, GF_MSG_STATS, 0);
    stream(c, 0, MIB, n, 8, 1000);
    cJSON *after = fetch(c, GF_MSG_STATS, 0);
    int timed = 1;
    ck_assert_double_eq(num(after, "frames.answered") - num(before, "frames.answered"), n);
    ck_assert_double_eq(num(after, "latency.count") - num(before, "latency.count"), n);
    const cJSON *pa = cJSON_GetArrayItem(cJSON_GetObjectItem(after, "pipelines"), 0);
    const cJSON *pb = cJSON_GetArrayItem(cJSON_GetObjectItem(before, "pipelines"), 0);
    ck_assert_double_eq(num(pa, "frames") - num(pb, "frames"), n);
    static const char *const phases[] = {"slot_wait", "receive",          "h2d",        "kernel",
                                         "d2h",       "completion_delay", "reply_write"};
    double sum_ns = 0, e2e_ns = 0;
    char key[64];
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++) {
        snprintf(key, sizeof key, "phases.%s.count", phases[i]);
        ck_assert_double_eq(num(pa, key) - num(pb, key), timed ? n : 0);
        snprintf(key, sizeof key, "phases.%s.ns", phases[i]);
        sum_ns += num(pa, key) - num(pb, key);
    }
    e2e_ns = num(pa, "phases.end_to_end.ns") - num(pb, "phases.end_to_end.ns");
    ck_assert_double_gt(num(pa, "phases.receive.ns") - num(pb, "phases.receive.ns"), 0);
    ck_assert_double_gt(num(pa, "phases.reply_write.ns") - num(pb, "phases.reply_write.ns"), 0);
    ck_assert_double_gt(sum_ns, 0);
    ck_assert_msg(sum_ns <= e2e_ns, "phases sum to %.0f ns, over end to end %.0f ns", sum_ns,
                  e2e_ns);
    /* The histogram: counts add up to count; percentiles are ordered. */
    const cJSON *counts = cJSON_GetObjectItem(cJSON_GetObjectItem(after, "latency"), "counts");
    const cJSON *bounds = cJSON_GetObjectItem(cJSON_GetObjectItem(after, "latency"), "bounds_ns");
    ck_assert_int_eq(cJSON_GetArraySize(counts), cJSON_GetArraySize(bounds) + 1);
    double total = 0;
    for (int i = 0; i < cJSON_GetArraySize(counts); i++)
        total += cJSON_GetArrayItem(counts, i)->valuedouble;
    ck_assert_double_eq(total, num(after, "latency.count"));
    ck_assert_double_le(num(after, "latency.p50_ns"), num(after, "latency.p90_ns"));
    ck_assert_double_le(num(after, "latency.p90_ns"), num(after, "latency.p99_ns"));
    ck_assert_double_le(num(after, "latency.p99_ns"), num(after, "latency.p999_ns"));
    ck_assert_double_le(num(after, "latency.p999_ns"), num(after, "latency.max_ns"));
    ck_assert_double_gt(num(after, "latency.p50_ns"), 0);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(c);
    stop();
}
END_TEST

/*
 * With timing_sample_every N the CUDA engine times one submission in N: with
 * one frame in flight every submission is one frame, so one frame in N.  The
 * stage phases count those, the others count every frame, frames.timed says
 * how many, and TRACE shows stages for exactly those frames.  The CPU engine
 * times every frame.
 */
START_TEST(timing_samples_one_frame_in_n) {
    const unsigned n = 64; /* a multiple of SAMPLE_EVERY: the count is exact */
    const double timed = strcmp(g_engine, "cuda") == 0 ? n / SAMPLE_EVERY : n;
    start(sampled_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *before = fetch(c, GF_MSG_STATS, 0);
    stream(c, 0, 4096, n, 1, 1000);
    cJSON *after = fetch(c, GF_MSG_STATS, 0);
    ck_assert_double_eq(num(after, "timing_sample_every"), SAMPLE_EVERY);
    ck_assert_double_eq(num(after, "slots.submissions") - num(before, "slots.submissions"), n);
    ck_assert_double_eq(num(after, "frames.timed") - num(before, "frames.timed"), timed);
    const cJSON *pa = cJSON_GetArrayItem(cJSON_GetObjectItem(after, "pipelines"), 0);
    const cJSON *pb = cJSON_GetArrayItem(cJSON_GetObjectItem(before, "pipelines"), 0);
    static const char *const stages[] = {"h2d", "kernel", "d2h"};
    char key[64];
    for (size_t i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "phases.%s.count", stages[i]);
        ck_assert_double_eq(num(pa, key) - num(pb, key), timed);
    }
    ck_assert_double_eq(num(pa, "phases.end_to_end.count") - num(pb, "phases.end_to_end.count"), n);
    cJSON *trace = fetch(c, GF_MSG_TRACE, n);
    const cJSON *frames = cJSON_GetObjectItem(trace, "frames");
    ck_assert_int_eq(cJSON_GetArraySize(frames), (int)n);
    int with_stages = 0;
    for (int i = 0; i < cJSON_GetArraySize(frames); i++)
        with_stages += !cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(frames, i), "h2d"));
    ck_assert_int_eq(with_stages, (int)timed);
    cJSON_Delete(trace);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(c);
    stop();
}
END_TEST

/*
 * Every completion mode (the loop's _i: poll, hybrid, host_func) answers
 * every frame, verified, with its stage times, one at a time and pipelined:
 * small frames that finish within hybrid's spin window and 4 MiB ones that
 * do not, whose host function then completes them.  STATS says which mode
 * is in effect (the CPU engine keeps its own completions and says null)
 * and how long the loop was kept awake to poll: some time when
 * it polls, none when it does not.
 */
START_TEST(completion_modes_answer_every_frame) {
    const int cuda = strcmp(g_engine, "cuda") == 0;
    const char *mode = completion_modes[_i];
    char json[sizeof completion_json + 16];
    snprintf(json, sizeof json, completion_json, mode);
    start(json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *before = fetch(c, GF_MSG_STATS, 0);
    if (cuda)
        ck_assert_str_eq(cJSON_GetObjectItem(before, "completion")->valuestring, mode);
    else
        ck_assert(cJSON_IsNull(cJSON_GetObjectItem(before, "completion")));
    stream(c, 0, 4096, 100, 1, 1);
    stream(c, 0, 65536, 200, 8, 1000);
    stream(c, 0, 4 * MIB, 16, 2, 2000);
    stream(c, 0, 4096, 100, 1, 3000);
    cJSON *after = fetch(c, GF_MSG_STATS, 0);
    ck_assert_double_eq(num(after, "frames.answered") - num(before, "frames.answered"), 416);
    ck_assert_double_eq(num(after, "frames.timed") - num(before, "frames.timed"), 416);
    ck_assert_double_eq(num(after, "slots.in_flight"), 0);
    if (cuda && _i < 2)
        ck_assert_double_gt(num(after, "loop.polling_ns"), 0);
    else
        ck_assert_double_eq(num(after, "loop.polling_ns"), 0);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(c);
    stop();
}
END_TEST

/* STATS' pipelines[i].batches.`key`. */
static double batch_stat(const cJSON *st, int i, const char *key) {
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "pipelines"), i);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(p, "batches");
    ck_assert_msg(cJSON_IsObject(b), "pipelines[%d] has no batches", i);
    return real_at(b, key);
}

/* The frames of small_frames_share_a_slot, as STATS counts their batches
 * and TRACE shows which shared a submission. */
static void check_batches(gf_client *c, const cJSON *before, const cJSON *after, double submissions,
                          unsigned first_id, const unsigned frames[2]) {
    double subs = 0;
    for (int i = 0; i < 2; i++) {
        double n = batch_stat(after, i, "submissions") - batch_stat(before, i, "submissions");
        double f = batch_stat(after, i, "frames") - batch_stat(before, i, "frames");
        ck_assert_double_eq(f, frames[i]);
        ck_assert_double_ge(n, 1);
        subs += n;
        const cJSON *counts = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(after, "pipelines"), i),
                "batches"),
            "counts");
        double total = 0;
        const cJSON *k;
        cJSON_ArrayForEach(k, counts) total += k->valuedouble;
        ck_assert_double_eq(total, batch_stat(after, i, "submissions"));
        ck_assert_double_eq_tol(
            batch_stat(after, i, "mean"),
            batch_stat(after, i, "frames") / batch_stat(after, i, "submissions"), 1e-9);
    }
    ck_assert_double_eq(subs, submissions);
    /* TRACE: frames of one submission are of one pipeline; there are as
     * many submissions as STATS counted. */
    cJSON *tr = fetch(c, GF_MSG_TRACE, 0);
    uint64_t seen[64];
    uint32_t pipe[64];
    unsigned distinct = 0, found = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(tr, "frames")) {
        uint64_t id = gf_test_ck_u64(f, "frame_id");
        if (id < first_id || id >= first_id + frames[0] + frames[1])
            continue;
        found++;
        uint64_t sub = gf_test_ck_u64(f, "submission");
        uint32_t p = (uint32_t)gf_test_ck_u64(f, "pipeline");
        unsigned j = 0;
        while (j < distinct && seen[j] != sub)
            j++;
        if (j == distinct) {
            ck_assert_uint_lt(distinct, 64);
            seen[distinct] = sub;
            pipe[distinct++] = p;
        }
        ck_assert_msg(pipe[j] == p, "submission %" PRIu64 " holds frames of pipelines %u and %u",
                      sub, pipe[j], p);
    }
    ck_assert_uint_eq(found, frames[0] + frames[1]);
    ck_assert_double_eq(distinct, submissions);
    cJSON_Delete(tr);
}

/*
 * Small frames that arrive in one write share slots: echo frames of odd
 * lengths (packed at aligned offsets) then sincos frames, 24 in all in one
 * send, are each answered in order with their own result, exact for echo
 * and within sincos's tolerance, in at most one submission per pipeline and
 * read (the frames come in one or two reads of the daemon's 16 KiB buffer).
 * Frame by frame it would take 24 submissions.
 */
START_TEST(small_frames_share_a_slot) {
    enum { ECHO_FRAMES = 12, SINCOS_FRAMES = 12, N = ECHO_FRAMES + SINCOS_FRAMES };
    start(config_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *before = fetch(c, GF_MSG_STATS, 0);
    uint8_t *wire = malloc(16384);
    void *in[N], *ref[N];
    size_t ref_bytes[N], len = 0;
    uint64_t rng = 7;
    char err[512] = "";
    ck_assert_ptr_nonnull(wire);
    for (unsigned i = 0; i < N; i++) {
        unsigned p = i < ECHO_FRAMES ? 0 : 1;
        size_t bytes = p == 0 ? 100 + 37 * i : 64 * sizeof(float);
        ck_assert_msg(gf_test_make_frame(&pipelines[p], bytes, &rng, &in[i], &ref[i], &ref_bytes[i],
                                         err, sizeof err) == 0,
                      "%s", err);
        gf_header h = gf_test_header(GF_MSG_FRAME, 500 + i, p, bytes);
        ck_assert_uint_le(len + GF_HEADER_BYTES + bytes, 16384);
        gf_header_encode(&h, wire + len);
        memcpy(wire + len + GF_HEADER_BYTES, in[i], bytes);
        len += GF_HEADER_BYTES + bytes;
    }
    int fd = gf_test_ck_raw_connect(daemon_.socket_path);
    ck_assert_int_eq(gf_test_raw_send(fd, wire, len), 0);
    uint8_t got[1024];
    for (unsigned i = 0; i < N; i++) {
        gf_header h;
        ck_assert_msg(
            gf_test_raw_recv_reply(fd, &h, got, sizeof got, REPLY_TIMEOUT_MS, err, sizeof err) == 0,
            "reply %u: %s", i, err);
        gf_reply r = {.header = h, .payload = got, .payload_bytes = h.payload_bytes};
        const gf_pipeline *p = &pipelines[i < ECHO_FRAMES ? 0 : 1];
        ck_assert_msg(gf_test_check_result(p, &r, 500 + i, ref[i], ref_bytes[i], err, sizeof err) ==
                          0,
                      "frame %u: %s", 500 + i, err);
        free(in[i]);
        free(ref[i]);
    }
    close(fd);
    free(wire);
    cJSON *after = fetch(c, GF_MSG_STATS, 0);
    ck_assert_double_eq(num(after, "frames.answered") - num(before, "frames.answered"), N);
    double submissions = num(after, "slots.submissions") - num(before, "slots.submissions");
    ck_assert_msg(submissions >= 2 && submissions <= 4,
                  "%u frames of 2 pipelines in one send took %.0f submissions", N, submissions);
    check_batches(c, before, after, submissions, 500,
                  (const unsigned[2]){ECHO_FRAMES, SINCOS_FRAMES});
    /* Echo and sincos batches this small run zero-copy on the GPU; the CPU
     * engine has no copies to skip. */
    ck_assert_double_eq(num(after, "slots.zero_copy_submissions") -
                            num(before, "slots.zero_copy_submissions"),
                        strcmp(g_engine, "cuda") == 0 ? submissions : 0);
    cJSON_Delete(before);
    cJSON_Delete(after);
    gf_client_close(c);
    stop();
}
END_TEST

/* Every reply echoes its request's frame_id and pipeline_id: TRACE's too,
 * although there pipeline_id is a frame count (PROTOCOL.md). */
START_TEST(trace_reply_echoes_pipeline_id) {
    start(config_json);
    int fd = gf_test_ck_raw_connect(daemon_.socket_path);
    gf_header h = gf_test_header(GF_MSG_TRACE, 77, 5, 0);
    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    static char doc[1 << 20];
    char err[256];
    gf_header r;
    ck_assert_msg(
        gf_test_raw_recv_reply(fd, &r, doc, sizeof doc, REPLY_TIMEOUT_MS, err, sizeof err) == 0,
        "%s", err);
    ck_assert_uint_eq(r.type, GF_MSG_TRACE);
    ck_assert_uint_eq(r.status, GF_OK);
    ck_assert_uint_eq(r.frame_id, 77);
    ck_assert_uint_eq(r.pipeline_id, 5);
    close(fd);
    stop();
}
END_TEST

/* TRACE returns the last N frames, in order, with ordered timestamps. */
START_TEST(trace_holds_the_last_frames_in_order) {
    const unsigned n = 40;
    start(config_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    stream(c, 1, 256 * 1024, 10, 4, 1);
    stream(c, 1, 256 * 1024, n, 4, 5000);
    cJSON *trace = fetch(c, GF_MSG_TRACE, n);
    ck_assert_str_eq(gf_test_json_str(trace, "engine"), g_engine);
    ck_assert_double_eq(num(trace, "slots"), 2);
    const cJSON *frames = cJSON_GetObjectItem(trace, "frames");
    ck_assert_int_eq(cJSON_GetArraySize(frames), (int)n);
    for (unsigned i = 0; i < n; i++) {
        const cJSON *f = cJSON_GetArrayItem(frames, (int)i);
        ck_assert_double_eq(real_at(f, "frame_id"), 5000 + i);
        ck_assert_double_eq(real_at(f, "pipeline"), 1);
        ck_assert_double_lt(real_at(f, "slot"), 2);
        ck_assert_double_eq(real_at(f, "in_bytes"), 256 * 1024);
        double t[] = {real_at(f, "arrived"),
                      real_at(f, "claimed"),
                      real_at(f, "submitted"),
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "h2d"), 0)->valuedouble,
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "h2d"), 1)->valuedouble,
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "kernel"), 0)->valuedouble,
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "kernel"), 1)->valuedouble,
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "d2h"), 0)->valuedouble,
                      cJSON_GetArrayItem(cJSON_GetObjectItem(f, "d2h"), 1)->valuedouble,
                      real_at(f, "drained"),
                      real_at(f, "written")};
        for (size_t k = 1; k < sizeof t / sizeof *t; k++)
            ck_assert_msg(t[k - 1] <= t[k], "frame %u: timestamp %zu (%.0f) after %zu (%.0f)", i,
                          k - 1, t[k - 1], k, t[k]);
        ck_assert_double_gt(t[6] - t[5], 0); /* sincos takes time */
        ck_assert_double_le(real_at(f, "done"), t[9]);
    }
    cJSON_Delete(trace);
    cJSON *all = fetch(c, GF_MSG_TRACE, 0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(all, "frames")), (int)(10 + n));
    cJSON_Delete(all);
    gf_client_close(c);
    stop();
}
END_TEST

/* With timing events off, no stage is measured and "gpu" is null.  Cuda
 * only: the CPU engine times its own runs whatever the flag says. */
START_TEST(timing_events_off) {
    start(untimed_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    stream(c, 0, 4096, 32, 4, 1);
    cJSON *st = fetch(c, GF_MSG_STATS, 0);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(st, "gpu")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(st, "timing_events")));
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(st, "pipelines"), 0);
    ck_assert_double_eq(num(p, "phases.h2d.count"), 0);
    ck_assert_double_eq(num(p, "phases.end_to_end.count"), 32);
    /* zero_copy_max_bytes 0: every batch was copied in and out. */
    ck_assert_double_eq(num(st, "zero_copy_max_bytes"), 0);
    ck_assert_double_gt(num(st, "slots.submissions"), 0);
    ck_assert_double_eq(num(st, "slots.zero_copy_submissions"), 0);
    cJSON_Delete(st);
    gf_client_close(c);
    stop();
}
END_TEST

/*
 * Batches of at most zero_copy_max_bytes of elementwise built-in stages run
 * zero-copy, larger ones through the copies, and both give the exact echo
 * and sincos within its tolerance (gf_test_stream_verified checks every
 * reply).  One frame in flight makes one submission per frame, so the
 * counts are exact: the 4 KiB frames' 96 submissions ran zero-copy (sincos
 * at window 4 packs at most 16 KiB per batch), the 256 KiB frames' 8 did not.
 */
START_TEST(zero_copy_small_batches) {
    start(config_json);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *before = fetch(c, GF_MSG_STATS, 0);
    ck_assert_double_eq(num(before, "zero_copy_max_bytes"), 65536);
    stream(c, 0, 4096, 64, 1, 1);
    cJSON *mid = fetch(c, GF_MSG_STATS, 0);
    stream(c, 1, 4096, 32, 4, 1000);
    stream(c, 0, 256 * 1024, 8, 1, 2000);
    cJSON *after = fetch(c, GF_MSG_STATS, 0);
    double subs = num(after, "slots.submissions") - num(before, "slots.submissions");
    double zc =
        num(after, "slots.zero_copy_submissions") - num(before, "slots.zero_copy_submissions");
    ck_assert_double_eq(num(mid, "slots.submissions") - num(before, "slots.submissions"), 64);
    ck_assert_double_eq(
        num(mid, "slots.zero_copy_submissions") - num(before, "slots.zero_copy_submissions"), 64);
    ck_assert_msg(zc == subs - 8, "%.0f of %.0f submissions ran zero-copy, expected all but 8", zc,
                  subs);
    cJSON_Delete(before);
    cJSON_Delete(mid);
    cJSON_Delete(after);
    gf_client_close(c);
    stop();
}
END_TEST

/* Three slots, 4 MiB echo frames streamed continuously by three clients:
 * one slot's H2D runs while another slot's kernel or D2H does, and STATS
 * says so.  Cuda only: the CPU engine has no copies to overlap. */
START_TEST(cuda_copies_overlap_across_slots) {
    start(overlap_json);
    /* Copies and kernels of an echo frame take a tenth of its receipt: a few
     * hundred frames give a few dozen overlaps, and some in STATS's last
     * second. */
    enum { STREAMS = 3, FRAMES = 240 };
    char err[512];
    gf_test_stream each = {
        .pipeline = &pipelines[0], .frame_bytes = 4 * MIB, .frame_count = FRAMES, .window = 8};
    ck_assert_msg(gf_test_streams_parallel(daemon_.socket_path, STREAMS, &each, err, sizeof err) ==
                      0,
                  "%s", err);
    gf_client *c = gf_test_ck_connect(daemon_.socket_path);
    cJSON *st = fetch(c, GF_MSG_STATS, 0);
    cJSON *trace = fetch(c, GF_MSG_TRACE, 0);
    const cJSON *g = cJSON_GetObjectItem(st, "gpu");
    ck_assert_msg(cJSON_IsObject(g), "no gpu section");
    printf("gpu over the last %.0f ms (%.0f frames): h2d %.3f kernel %.3f d2h %.3f copy %.3f "
           "compute %.3f overlap %.3f; loop utilisation %.3f\n",
           real_at(g, "window_ns") / 1e6, real_at(g, "frames"), real_at(g, "h2d_busy"),
           real_at(g, "kernel_busy"), real_at(g, "d2h_busy"), real_at(g, "copy_busy"),
           real_at(g, "compute_busy"), real_at(g, "overlap"),
           real_at(cJSON_GetObjectItem(st, "loop"), "utilisation_1s"));
    /* Count H2D intervals that overlap the kernel or D2H of a frame on the
     * other slot. */
    const cJSON *frames = cJSON_GetObjectItem(trace, "frames");
    int n = cJSON_GetArraySize(frames), pairs = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(frames, i);
        double ab = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "h2d"), 0)->valuedouble;
        double ae = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "h2d"), 1)->valuedouble;
        for (int j = i > 8 ? i - 8 : 0; j < n && j < i + 8; j++) {
            const cJSON *b = cJSON_GetArrayItem(frames, j);
            if (real_at(a, "slot") == real_at(b, "slot"))
                continue;
            double kb = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "kernel"), 0)->valuedouble;
            double de = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "d2h"), 1)->valuedouble;
            if (ab < de && kb < ae) {
                pairs++;
                break;
            }
        }
    }
    printf("trace: %d frames, %d whose H2D overlaps the other slot's kernel or D2H\n", n, pairs);
    ck_assert_msg(pairs > 0, "no H2D overlapped another slot's kernel or D2H in %d frames", n);
    ck_assert_double_gt(real_at(g, "overlap"), 0);
    cJSON_Delete(st);
    cJSON_Delete(trace);
    gf_client_close(c);
    stop();
}
END_TEST

static Suite *stats_live_suite(void) {
    Suite *s = suite_create("stats_live");
    TCase *tc = tcase_create("stats_live");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, phases_add_up_for_known_traffic);
    tcase_add_test(tc, trace_holds_the_last_frames_in_order);
    tcase_add_test(tc, timing_samples_one_frame_in_n);
    tcase_add_loop_test(tc, completion_modes_answer_every_frame, 0, 3);
    tcase_add_test(tc, trace_reply_echoes_pipeline_id);
    tcase_add_test(tc, small_frames_share_a_slot);
    suite_add_tcase(s, tc);

    /* A check that cannot run on this engine is not listed, so that the
     * suite's result never counts it as passed; test_stats_live_gpu runs
     * them. */
    if (strcmp(g_engine, "cuda") == 0) {
        tc = tcase_create("cuda");
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
        tcase_add_test(tc, timing_events_off);
        tcase_add_test(tc, cuda_copies_overlap_across_slots);
        tcase_add_test(tc, zero_copy_small_batches);
        suite_add_tcase(s, tc);
    } else {
        printf("not run on the %s engine: timing_events_off, cuda_copies_overlap_across_slots, "
               "zero_copy_small_batches (cuda only)\n",
               g_engine);
    }
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(stats_live_suite());
}

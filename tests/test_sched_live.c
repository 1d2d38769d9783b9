/* SPDX-License-Identifier: MIT */
/*
 * Scheduling for inference through a real gpuframed (issue 35): the "auto"
 * batch delay as STATS shows it; frames with deadlines (protocol version
 * 3), answered in order with exact replies.  The engine comes from
 * GF_TEST_ENGINE (cpu or cuda).
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

/* Per-test limit of Check. */
#define TEST_TIMEOUT_S 120
#define FRAME_BYTES    4096

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */
static double g_sincos_ns;   /* gf_test_sincos_ns, measured once in main */

/* One shard and one slot, which a slow frame (sincos of SLOW_ITERS rounds,
 * sized to take a chosen time on the CPU engine) holds while other frames
 * wait for it. */
#define SLOW_ITERS      200
#define SLOW_ITERS_TEXT "200"
#define SLOW_BYTES_MAX  (8u << 20)
static const char one_slot_json[] =
    "{\"shards\": 1, \"slots\": 1, \"max_frame_bytes\": 8388608, \"frame_timeout_ms\": 600000,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    " {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": " SLOW_ITERS_TEXT "}}]}";
/* The same with three slots: two slow frames on the engine hold the echo
 * batches open. */
static const char three_slots_json[] =
    "{\"shards\": 1, \"slots\": 3, \"max_frame_bytes\": 8388608, \"frame_timeout_ms\": 600000,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    " {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": " SLOW_ITERS_TEXT "}}]}";
/* A slow frame's input, SLOW_BYTES_MAX of it: the values gf_test_sincos_ns
 * measured with, so that a frame takes the time gf_test_slow_frame_bytes
 * sized it for.  (Zeros took a quarter of it: the slow frames of the
 * deadline test came back with its deadline, not four of them later.) */
static const uint8_t *slow_input(void) {
    static uint8_t buf[SLOW_BYTES_MAX];
    static int filled;
    if (!filled) {
        uint64_t rng = 17;
        gf_test_fill_input(gf_pipeline_kind_find("sincos"), buf, sizeof buf, &rng);
        filled = 1;
    }
    return buf;
}

#define ECHO_ID 0
#define SLOW_ID 1
#define SMALL   256 /* bytes of an echo frame */
/* Bytes of a camera frame: two never fit the daemon's read buffer of one
 * header and GF_BATCH_FRAME_BYTES, so a successor is read only if the
 * waiting frame leaves it. */
#define BIG 12288
/* The sincos kind's most iterations (kernels/registry.c): a slow frame of
 * BIG bytes takes at most that many (about a second here). */
#define ITERS_MAX 100000u

/* How long a test waits for one reply: a slow frame's time, widened as the
 * sanitizers and a loaded machine need. */
static int reply_ms(void) {
    return (int)gf_test_latency_bound_ms(30000);
}

/* The CPU time of a step, which a test's slow frames are made of: 100 ms,
 * 200 under the sanitizers.  A step on the wall clock (step_ms) is that,
 * widened by a loaded machine: how long the daemon's own work around a
 * frame may take (reading it, placing it, a STATS round trip), so a
 * deadline that a frame meets when nothing holds it.  The sanitizers slow
 * that work a few times (a STATS: 1.4 ms of a TSan daemon's CPU), which
 * 200 ms still exceeds a hundredfold; the slow frames' own work, sincos on
 * the CPU engine, they hardly slow, so a step of their full factor (4) made
 * every slow frame burn twice the CPU for nothing: 45 s of a core in each
 * sanitized tree, in CI.  The slow frames that hold one, or outlast a
 * test's setting up, are a few steps of work: a loaded machine slows them
 * as much as it slows the rest, so their work is not widened by the load;
 * nor by gf_test_latency_bound_ms, whose sanitizer factor is squared: under
 * TSan they kept a core busy four times as long (three minutes of this
 * suite once), on the machine they slowed. */
static uint64_t work_step_ms(void) {
    return gf_test_time_scale() > 1 ? 200u : 100u;
}

static uint64_t step_ms(void) {
    return (uint64_t)((double)work_step_ms() * gf_test_load_factor());
}

/* Pipeline 0 picks its wait; pipeline 1 has a fixed one. */
static const char auto_json[] =
    "{\"slots\": 2, \"pipelines\": ["
    "{\"name\": \"auto\", \"kind\": \"echo\", \"max_batch_delay_us\": \"auto\"},"
    "{\"name\": \"fixed\", \"kind\": \"echo\", \"max_batch_delay_us\": 30}]}";

/* pipelines[id].batches of a STATS document. */
static const cJSON *batches_of(const cJSON *st, int id) {
    const cJSON *b = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(st, "pipelines"), id), "batches");
    ck_assert_ptr_nonnull(b);
    return b;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    return v->valuedouble;
}

/* A lone client at window 1 never waits for a batch: its shard decided on
 * one frame and no wait, from a measured cost and arrival rate, while the
 * other shards decided nothing.  Clients at window 8 all get their exact
 * results; every shard that served them shows a decision within bounds.
 * The fixed pipeline says its delay and has no "auto". */
START_TEST(auto_batch_delay_in_stats) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, auto_json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count;
    gf_pipeline *p = gf_test_ck_list(c, &count);
    ck_assert_uint_eq(count, 2);
    gf_test_stream s = {.pipeline = &p[0],
                        .frame_bytes = FRAME_BYTES,
                        .frame_count = 400,
                        .window = 1,
                        .first_frame_id = 1};
    gf_test_ck_stream(c, &s);

    cJSON *st = gf_test_ck_stats(c);
    const cJSON *b = batches_of(st, 0);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b, "delay_us")), "auto");
    const cJSON *shards = cJSON_GetObjectItem(b, "auto");
    uint64_t shard_count = gf_test_ck_u64(st, "shard_count");
    ck_assert_int_eq(cJSON_GetArraySize(shards), (int)shard_count);
    unsigned served = 0;
    for (int k = 0; k < cJSON_GetArraySize(shards); k++) {
        const cJSON *e = cJSON_GetArrayItem(shards, k);
        ck_assert_int_eq((int)num(e, "shard"), k);
        if (num(e, "arrivals_per_s") == 0) {
            ck_assert(num(e, "target_frames") == 0 && num(e, "fixed_cost_ns") == 0);
            continue;
        }
        served++;
        ck_assert_double_eq(num(e, "wait_ns"), 0);
        ck_assert_double_eq(num(e, "target_frames"), 1);
        ck_assert_double_eq(num(e, "queued_frames"), 1);
        ck_assert_double_gt(num(e, "fixed_cost_ns"), 0);
        ck_assert_double_eq(num(e, "frame_cost_ns"), 0); /* one batch size: all fixed */
    }
    ck_assert_uint_eq(served, 1);
    const cJSON *fixed = batches_of(st, 1);
    ck_assert_double_eq(num(fixed, "delay_us"), 30);
    ck_assert_ptr_null(cJSON_GetObjectItem(fixed, "auto"));
    cJSON_Delete(st);

    char err[512];
    s.window = 8;
    s.frame_count = 300;
    ck_assert_msg(gf_test_streams_parallel(d.socket_path, 6, &s, err, sizeof err) == 0, "%s", err);
    s.pipeline = &p[1];
    ck_assert_msg(gf_test_streams_parallel(d.socket_path, 3, &s, err, sizeof err) == 0, "%s", err);
    st = gf_test_ck_stats(c);
    shards = cJSON_GetObjectItem(batches_of(st, 0), "auto");
    for (int k = 0; k < cJSON_GetArraySize(shards); k++) {
        const cJSON *e = cJSON_GetArrayItem(shards, k);
        if (num(e, "arrivals_per_s") == 0)
            continue;
        ck_assert_double_ge(num(e, "target_frames"), 1);
        ck_assert_double_le(num(e, "target_frames"), 64);
        ck_assert_double_le(num(e, "wait_ns"), 100000.0 * 1000);
        ck_assert_double_gt(num(e, "fixed_cost_ns") + num(e, "frame_cost_ns"), 0);
    }
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 400 + 6 * 300 + 3 * 300);
    cJSON_Delete(st);
    free(p);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* Sends a version-3 echo FRAME of SMALL bytes (each byte `fill`) on `fd`
 * with `flags` (GF_FLAG_DEADLINE: the deadline `deadline_ns`). */
static void send_v3(int fd, uint64_t frame_id, uint16_t flags, uint64_t deadline_ns, uint8_t fill) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, ECHO_ID, SMALL);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = flags;
    h.status = flags & GF_FLAG_DEADLINE ? gf_deadline_encode(deadline_ns) : 0;
    uint8_t payload[SMALL];
    memset(payload, fill, sizeof payload);
    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    ck_assert_int_eq(gf_test_raw_send(fd, payload, sizeof payload), 0);
}

/* Receives the next reply on `fd`: a version-3 RESULT of frame `frame_id`,
 * `bytes` bytes of `fill` (echo: exact). */
static void expect_bytes(int fd, uint64_t frame_id, uint8_t fill, size_t bytes) {
    gf_header h;
    static uint8_t got[BIG];
    char err[256];
    ck_assert_msg(gf_test_raw_recv_reply(fd, &h, got, sizeof got, reply_ms(), err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(h.type == GF_MSG_RESULT, "frame %llu: type %u status %s",
                  (unsigned long long)h.frame_id, h.type, gf_status_name(h.status));
    ck_assert_uint_eq(h.frame_id, frame_id);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_SCHED);
    ck_assert_uint_eq(h.flags, 0);
    ck_assert_uint_eq(h.payload_bytes, bytes);
    for (size_t i = 0; i < bytes; i++)
        ck_assert_uint_eq(got[i], fill);
}

/* expect_bytes of SMALL bytes. */
static void expect_result(int fd, uint64_t frame_id, uint8_t fill) {
    expect_bytes(fd, frame_id, fill, SMALL);
}

/* Receives the next reply on `fd`: a version-3 ERROR of `status` for frame
 * `frame_id`, whose text holds `words`. */
static void expect_error(int fd, uint64_t frame_id, uint32_t status, const char *words) {
    gf_header h = gf_test_ck_raw_error(fd, status, words, reply_ms(), GF_TEST_STAYS_OPEN);
    ck_assert_uint_eq(h.frame_id, frame_id);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_SCHED);
    ck_assert_uint_eq(h.pipeline_id, ECHO_ID);
}

/* A deadline already passed when the daemon reads the header: answered
 * deadline_exceeded at once, its payload skipped, and the frames around it
 * answered exactly, in order.  One far ahead runs.  A version-1 client on
 * the same daemon sees none of it. */
START_TEST(a_deadline_passed_on_arrival_is_answered_at_once) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, one_slot_json, g_engine);
    gf_client *q = gf_test_ck_connect(d.socket_path);
    int fd = gf_test_ck_raw_connect(d.socket_path);
    uint64_t now = gf_now_ns();
    send_v3(fd, 1, 0, 0, 0x11);
    send_v3(fd, 2, GF_FLAG_DEADLINE, now - 1000000, 0x22);
    send_v3(fd, 3, GF_FLAG_DEADLINE, now + 600ull * 1000000000, 0x33);
    expect_result(fd, 1, 0x11);
    expect_error(fd, 2, GF_ERR_DEADLINE_EXCEEDED, "before it could be placed");
    expect_result(fd, 3, 0x33);
    gf_test_ck_stream_id(q, ECHO_ID, SMALL, 20, 4);
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.deadline_exceeded"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 22);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.superseded"), 0);
    cJSON_Delete(st);
    close(fd);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* While two slow frames keep the engine busy, echo frames wait in their
 * open batch (held while two submissions are on the engine).  One whose
 * deadline passes there is answered deadline_exceeded when the batch goes:
 * alone in it, nothing goes to the engine; beside a frame in time (one
 * batch), it goes along and only the other's result comes.  Every reply in
 * order, exact. */
START_TEST(a_deadline_passed_in_a_batch_is_not_answered_a_result) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, three_slots_json, g_engine);
    uint64_t wait_ms = step_ms();
    size_t slow_bytes =
        gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS, (unsigned)(4 * wait_ms), SLOW_BYTES_MAX);
    const uint8_t *slow = slow_input();
    gf_client *a = gf_test_ck_connect(d.socket_path), *q = gf_test_ck_connect(d.socket_path);
    int b = gf_test_ck_raw_connect(d.socket_path), c = gf_test_ck_raw_connect(d.socket_path);

    for (uint64_t round = 0; round < 2; round++) {
        cJSON *st = gf_test_ck_stats(q);
        uint64_t subs = gf_test_ck_u64(st, "slots.submissions"),
                 received = gf_test_ck_u64(st, "frames.received");
        cJSON_Delete(st);
        for (uint64_t i = 0; i < 2; i++)
            ck_assert_int_eq(gf_client_send_frame(a, SLOW_ID, 2 * round + i, slow, slow_bytes), 0);
        ck_assert_int_eq(gf_client_flush(a, 30000), 0);
        ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 2, 2, 30000), 2);
        send_v3(b, 10 + round, GF_FLAG_DEADLINE, gf_now_ns() + wait_ms * 1000000, 0x44);
        if (round == 1)
            send_v3(c, 20, 0, 0, 0x55);
        ck_assert_uint_ge(
            gf_test_ck_wait_stat(q, "frames.received", received + 3 + round, UINT64_MAX, 10000),
            received + 3 + round);
        /* Still held: the slow frames take four times the deadline. */
        ck_assert_uint_eq(gf_test_ck_stat(q, "slots.submissions"), subs + 2);
        expect_error(b, 10 + round, GF_ERR_DEADLINE_EXCEEDED, "before it went to the engine");
        if (round == 1)
            expect_result(c, 20, 0x55);
        gf_reply rep;
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(gf_client_recv(a, &rep, 2 * reply_ms()), 0);
            ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
        }
        st = gf_test_ck_stats(q);
        ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), subs + 2 + round);
        ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.deadline_exceeded"), 1 + round);
        cJSON_Delete(st);
    }
    /* The connection goes on. */
    send_v3(b, 30, 0, 0, 0x66);
    expect_result(b, 30, 0x66);
    close(b);
    close(c);
    gf_client_close(a);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* Sends on `fd`, in one write, `n` version-3 echo FRAMEs with `flags`, ids
 * first_id.., each SMALL bytes of (fill + i), but frame `odd` (if < n) of
 * SMALL / 2 bytes. */
static void send_burst(int fd, uint64_t first_id, unsigned n, uint16_t flags, uint8_t fill,
                       unsigned odd) {
    static uint8_t buf[16 * (GF_HEADER_BYTES + SMALL)];
    size_t at = 0;
    ck_assert_uint_le(n, 16);
    for (unsigned i = 0; i < n; i++) {
        uint64_t bytes = i == odd ? SMALL / 2 : SMALL;
        gf_header h = gf_test_header(GF_MSG_FRAME, first_id + i, ECHO_ID, bytes);
        h.version = GF_PROTOCOL_VERSION_SCHED;
        h.flags = flags;
        gf_header_encode(&h, buf + at);
        memset(buf + at + GF_HEADER_BYTES, fill + (int)i, bytes);
        at += GF_HEADER_BYTES + bytes;
    }
    ck_assert_int_eq(gf_test_raw_send(fd, buf, at), 0);
}

/* Newest-frame-only: while two slow frames hold the engine, a camera's
 * frames wait in the echo batch.  One admitted while its predecessor waits
 * there takes its place (1, 2 replaced by 2, 3), also when both came in
 * one write (5 by 6).  Every request is answered, in order, the replaced
 * ones superseded at once (1 and 2 before the batch goes) and the others
 * with their own bytes.  A
 * frame of another length is no replacement (4), nor one without the flag
 * (7), nor one after it (8); a neighbour's frame in the batch is untouched.
 * The batch carries six frames, whatever the camera sent. */
START_TEST(newest_frame_only_replaces_a_waiting_frame) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, three_slots_json, g_engine);
    size_t slow_bytes = gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS,
                                                 (unsigned)(4 * work_step_ms()), SLOW_BYTES_MAX);
    const uint8_t *slow = slow_input();
    gf_client *a = gf_test_ck_connect(d.socket_path), *q = gf_test_ck_connect(d.socket_path);
    int cam = gf_test_ck_raw_connect(d.socket_path), nb = gf_test_ck_raw_connect(d.socket_path);
    cJSON *st = gf_test_ck_stats(q);
    uint64_t subs = gf_test_ck_u64(st, "slots.submissions"),
             received = gf_test_ck_u64(st, "frames.received");
    cJSON_Delete(st);
    for (uint64_t i = 0; i < 2; i++)
        ck_assert_int_eq(gf_client_send_frame(a, SLOW_ID, i, slow, slow_bytes), 0);
    ck_assert_int_eq(gf_client_flush(a, 30000), 0);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 2, 2, 30000), 2);
    received += 2;
    send_v3(nb, 50, 0, 0, 0x50);
    for (uint64_t id = 1; id <= 3; id++) {
        ck_assert_uint_eq(
            gf_test_ck_wait_stat(q, "frames.received", received + id, UINT64_MAX, 10000),
            received + id);
        send_burst(cam, id, 1, GF_FLAG_LATEST, (uint8_t)(0x10 + id), 16);
    }
    /* Answered at once, while the batch still waits for the engine. */
    for (uint64_t id = 1; id <= 2; id++)
        expect_error(cam, id, GF_ERR_SUPERSEDED, "took its place before it ran");
    ck_assert_uint_eq(gf_test_ck_stat(q, "slots.submissions"), subs + 2);
    /* One write: 4 half as long, 5 and 6 flagged, 7 not, 8 flagged. */
    send_burst(cam, 4, 3, GF_FLAG_LATEST, 0x14, 0);
    send_burst(cam, 7, 1, 0, 0x17, 16);
    send_burst(cam, 8, 1, GF_FLAG_LATEST, 0x18, 16);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "frames.received", received + 9, UINT64_MAX, 10000),
                      received + 9);
    ck_assert_uint_eq(gf_test_ck_stat(q, "slots.submissions"), subs + 2);
    ck_assert_uint_eq(gf_test_ck_stat(q, "rejected.superseded"), 3);
    expect_bytes(cam, 3, 0x13, SMALL);
    expect_bytes(cam, 4, 0x14, SMALL / 2);
    expect_error(cam, 5, GF_ERR_SUPERSEDED, "took its place before it ran");
    expect_bytes(cam, 6, 0x16, SMALL);
    expect_bytes(cam, 7, 0x17, SMALL);
    expect_bytes(cam, 8, 0x18, SMALL);
    expect_result(nb, 50, 0x50);
    gf_reply rep;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(gf_client_recv(a, &rep, 2 * reply_ms()), 0);
        ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
    }
    gf_test_ck_wait_idle(q, 4, 10000, NULL);
    st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), subs + 3);
    const cJSON *b = batches_of(st, ECHO_ID);
    ck_assert_double_eq(num(b, "submissions"), 1);
    ck_assert_double_eq(num(b, "frames"), 6);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.superseded"), 3);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 3);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 8);
    cJSON_Delete(st);
    close(cam);
    close(nb);
    gf_client_close(a);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* Sends a version-3 FRAME of `bytes` bytes of `in` for `pipeline` on `fd`
 * with `flags`, header and payload in one write up to BIG bytes. */
static void send_frame(int fd, uint64_t frame_id, uint32_t pipeline, uint16_t flags, const void *in,
                       size_t bytes) {
    static uint8_t buf[GF_HEADER_BYTES + BIG];
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, pipeline, bytes);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = flags;
    if (bytes > BIG) { /* a slow frame: two writes */
        ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
        ck_assert_int_eq(gf_test_raw_send(fd, in, bytes), 0);
        return;
    }
    gf_header_encode(&h, buf);
    memcpy(buf + GF_HEADER_BYTES, in, bytes);
    ck_assert_int_eq(gf_test_raw_send(fd, buf, GF_HEADER_BYTES + bytes), 0);
}

/* send_frame of an echo frame, BIG bytes of `fill`. */
static void send_big(int fd, uint64_t frame_id, uint16_t flags, uint8_t fill) {
    static uint8_t in[BIG];
    memset(in, fill, sizeof in);
    send_frame(fd, frame_id, ECHO_ID, flags, in, sizeof in);
}

/* Newest-frame-only behind a busy slot: with the one slot on a slow frame,
 * a camera's frame waits for it, and the camera's next frame, which does
 * not fit the daemon's read buffer beside it, is still read and takes its
 * place: the waiting one is answered superseded at once, while the slow
 * frame still runs (1 by 2, 2 by 3).  What is no successor waits behind
 * it and is answered after it, in order: a frame without the flag (4), and
 * so the flagged one after that (5) replaces nothing.  The slot's frames
 * then carry 3, 4, 5 with their own bytes. */
START_TEST(newest_frame_only_reads_on_while_it_waits_for_a_slot) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, one_slot_json, g_engine);
    size_t slow_bytes = gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS,
                                                 (unsigned)(4 * work_step_ms()), SLOW_BYTES_MAX);
    const uint8_t *slow = slow_input();
    gf_client *a = gf_test_ck_connect(d.socket_path), *q = gf_test_ck_connect(d.socket_path);
    int cam = gf_test_ck_raw_connect(d.socket_path);
    uint64_t received = gf_test_ck_stat(q, "frames.received");
    ck_assert_int_eq(gf_client_send_frame(a, SLOW_ID, 0, slow, slow_bytes), 0);
    ck_assert_int_eq(gf_client_flush(a, 30000), 0);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 1, 1, 30000), 1);
    uint64_t subs = gf_test_ck_stat(q, "slots.submissions");
    for (uint64_t id = 1; id <= 3; id++) {
        send_big(cam, id, GF_FLAG_LATEST, (uint8_t)(0x30 + id));
        /* Read while the slot is busy (held frames count received). */
        ck_assert_uint_eq(
            gf_test_ck_wait_stat(q, "frames.received", received + 1 + id, UINT64_MAX, 10000),
            received + 1 + id);
        if (id > 1)
            expect_error(cam, id - 1, GF_ERR_SUPERSEDED, "read while this one waited to run");
    }
    ck_assert_uint_eq(gf_test_ck_stat(q, "slots.submissions"), subs);
    ck_assert_uint_eq(gf_test_ck_stat(q, "slots.in_flight"), 1);
    send_big(cam, 4, 0, 0x34);
    send_big(cam, 5, GF_FLAG_LATEST, 0x35);
    gf_reply rep;
    ck_assert_int_eq(gf_client_recv(a, &rep, 2 * reply_ms()), 0);
    ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
    expect_bytes(cam, 3, 0x33, BIG);
    expect_bytes(cam, 4, 0x34, BIG);
    expect_bytes(cam, 5, 0x35, BIG);
    gf_test_ck_wait_idle(q, 3, 10000, NULL);
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.superseded"), 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.received"), received + 6);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 4);
    cJSON_Delete(st);
    /* The connection goes on, and its client's close drops nothing. */
    send_big(cam, 6, GF_FLAG_LATEST, 0x36);
    expect_bytes(cam, 6, 0x36, BIG);
    close(cam);
    gf_client_close(a);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* What a live source at twice the served rate saw (issue 35's figure). */
typedef struct live_run {
    unsigned results, superseded;
    double worst_wait_periods; /* the longest a delivered frame waited, in periods */
    unsigned timed, late;      /* delivered frames whose wait was measured; of them,
                                  over two periods and the slack                   */
} live_run;

/* Sends `count` newest-only frames of `in` (BIG bytes) for pipeline 0 on
 * `fd`, one every `period_ns`, ids first_id.., while it takes the replies:
 * every request answered once, in order, a result (exactly `ref`, by
 * gf_pipeline_compare_result of `p`) or superseded.  A delivered frame's
 * wait is its age at delivery less its own run, the time since the previous
 * result (one slot: they run one after another); those over two periods and
 * `slack_ns` are counted (r.late), for the caller to judge. */
static live_run run_live(int fd, const gf_pipeline *p, const void *in, const void *ref,
                         size_t ref_bytes, uint64_t first_id, unsigned count, uint64_t period_ns,
                         uint64_t slack_ns) {
    static uint64_t sent_ns[256];
    static uint8_t got[BIG];
    ck_assert_uint_le(count, 256);
    live_run r = {0};
    unsigned sent = 0, answered = 0;
    uint64_t next_ns = gf_now_ns(), last_result_ns = 0;
    char err[256], why[256];
    while (answered < count) {
        uint64_t now = gf_now_ns();
        if (sent < count && now >= next_ns) {
            send_frame(fd, first_id + sent, p->id, GF_FLAG_LATEST, in, BIG);
            sent_ns[sent++] = gf_now_ns();
            next_ns += period_ns;
            continue;
        }
        int timeout = sent < count ? (int)((next_ns - now) / 1000000 + 1) : reply_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, timeout);
        ck_assert_int_ge(n, 0);
        if (n == 0) {
            ck_assert_msg(sent < count, "no reply to frame %llu within %d ms",
                          (unsigned long long)(first_id + answered), timeout);
            continue;
        }
        gf_header h;
        ck_assert_msg(
            gf_test_raw_recv_reply(fd, &h, got, sizeof got, reply_ms(), err, sizeof err) == 0, "%s",
            err);
        uint64_t at = gf_now_ns();
        ck_assert_uint_eq(h.frame_id, first_id + answered);
        ck_assert_uint_lt(answered, sent);
        if (h.type == GF_MSG_ERROR) {
            ck_assert_msg(h.status == GF_ERR_SUPERSEDED, "frame %llu: %s",
                          (unsigned long long)h.frame_id, gf_status_name(h.status));
            r.superseded++;
        } else {
            ck_assert_uint_eq(h.type, GF_MSG_RESULT);
            ck_assert_uint_eq(h.payload_bytes, ref_bytes);
            ck_assert_msg(gf_pipeline_compare_result(p, got, ref, ref_bytes, why, sizeof why) == 0,
                          "frame %llu: %s", (unsigned long long)h.frame_id, why);
            if (last_result_ns) {
                double wait_ns = (double)(at - sent_ns[answered]) - (double)(at - last_result_ns);
                double periods = wait_ns / (double)period_ns;
                if (periods > r.worst_wait_periods)
                    r.worst_wait_periods = periods;
                r.timed++;
                if (wait_ns > 2.0 * (double)period_ns + (double)slack_ns) {
                    r.late++;
                    printf("frame %llu waited %.1f ms beyond its run: over two periods of "
                           "%.1f ms and %.1f ms of slack\n",
                           (unsigned long long)h.frame_id, wait_ns / 1e6, period_ns / 1e6,
                           slack_ns / 1e6);
                }
            }
            last_result_ns = at;
            r.results++;
        }
        answered++;
    }
    return r;
}

/* A daemon of one shard with `slots` slots and one pipeline, "cam": sincos
 * whose BIG frame takes about `frame_ms` alone; a frame of it and its
 * reference, and a camera's raw connection. */
typedef struct cam_daemon {
    gf_test_daemon d;
    gf_client *q; /* for STATS */
    gf_pipeline *p;
    void *in, *ref;
    size_t ref_bytes;
    int fd;
} cam_daemon;

static void cam_start(cam_daemon *c, double frame_ms, unsigned slots, uint64_t seed) {
    double want = frame_ms * 1e6 / ((double)(BIG / 4) * g_sincos_ns);
    unsigned iters = want < 1 ? 1 : want > ITERS_MAX ? ITERS_MAX : (unsigned)want;
    char json[512], err[256];
    snprintf(json, sizeof json,
             "{\"shards\": 1, \"slots\": %u, \"frame_timeout_ms\": 600000, \"pipelines\": "
             "[{\"name\": \"cam\", \"kind\": \"sincos\", \"params\": {\"iters\": %u}}]}",
             slots, iters);
    gf_test_ck_daemon_start(&c->d, json, g_engine);
    c->q = gf_test_ck_connect(c->d.socket_path);
    size_t count;
    c->p = gf_test_ck_list(c->q, &count);
    ck_assert_uint_eq(count, 1);
    ck_assert_msg(gf_test_make_frame(&c->p[0], BIG, &seed, &c->in, &c->ref, &c->ref_bytes, err,
                                     sizeof err) == 0,
                  "%s", err);
    c->fd = gf_test_ck_raw_connect(c->d.socket_path);
}

static void cam_stop(cam_daemon *c) {
    free(c->in);
    free(c->ref);
    free(c->p);
    close(c->fd);
    gf_client_close(c->q);
    gf_test_ck_daemon_stop(&c->d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}

/* Issue 35's figure on the CPU engine: a newest-only source at twice the
 * rate the one slot serves it (measured first, alone, at window 1) gets
 * every request answered, in order, results exact, and the delivered
 * frames waited at most two frame periods beyond their own run (with a
 * slack that widens with the machine's load), all but one in ten of them:
 * on a loaded 2-core machine the test's own sender can be descheduled for
 * a few hundred ms (412 ms once, in CI's plain run), and no frame comes to
 * replace the waiting one meanwhile.  A daemon that stops reading a
 * waiting connection makes every frame late (2.5-2.9 periods).  Each frame
 * is BIG: a waiting one and its successor never fit the daemon's read
 * buffer together. */
START_TEST(newest_frame_only_at_twice_the_served_rate) {
    /* A frame of about 60 ms alone: a period of 30 ms, against which the
     * loop's own latencies are small. */
    cam_daemon c;
    cam_start(&c, 60, 1, 35);
    gf_client *q = c.q;
    const gf_pipeline *p = c.p;
    int cam = c.fd;
    /* Served alone, one at a time: the median of five is the frame's time. */
    enum { ALONE = 5, LIVE = 60 };
    uint64_t alone[ALONE];
    for (unsigned i = 0; i < ALONE; i++) {
        uint64_t t0 = gf_now_ns();
        live_run one = run_live(cam, &p[0], c.in, c.ref, c.ref_bytes, 1 + i, 1, 1, 0);
        ck_assert_uint_eq(one.results, 1);
        alone[i] = gf_now_ns() - t0;
    }
    for (unsigned i = 0; i < ALONE; i++)
        for (unsigned j = i + 1; j < ALONE; j++)
            if (alone[j] < alone[i]) {
                uint64_t t = alone[i];
                alone[i] = alone[j];
                alone[j] = t;
            }
    uint64_t period_ns = alone[ALONE / 2] / 2;
    uint64_t slack_ns = gf_test_latency_bound_ms(10) * 1000000;
    live_run r = run_live(cam, &p[0], c.in, c.ref, c.ref_bytes, 100, LIVE, period_ns, slack_ns);
    printf("newest_frame_only_at_twice_the_served_rate: frame alone %.1f ms, period %.1f ms: "
           "%u results, %u superseded, longest wait %.2f periods, %u of %u late\n",
           alone[ALONE / 2] / 1e6, period_ns / 1e6, r.results, r.superseded, r.worst_wait_periods,
           r.late, r.timed);
    ck_assert_uint_ge(r.timed, 1);
    ck_assert_msg(r.late * 10 <= r.timed, "%u of %u delivered frames waited over two periods",
                  r.late, r.timed);
    ck_assert_uint_eq(r.results + r.superseded, LIVE);
    ck_assert_uint_ge(r.results, 2);
    ck_assert_uint_eq(gf_test_ck_stat(q, "rejected.superseded"), r.superseded);
    ck_assert_uint_eq(gf_test_ck_stat(q, "frames.received"), ALONE + LIVE);
    cam_stop(&c);
}
END_TEST

/* Newest-frame-only beside its own frame on the engine, slots free: a
 * camera's slow frame (1) runs, and its next ones do not join it on the
 * engine but are held, the newer replacing the older (2 by 3, superseded
 * at once while 1 still runs, its reply queued after 1's); once 1 is back,
 * 3 runs alone, exact.  Two of a camera's frames at once would share the GPU, and the
 * newer would come back older than one that waited (frame_policy.h). */
START_TEST(newest_frame_only_runs_one_frame_at_a_time) {
    /* A frame of about four work steps alone. */
    cam_daemon c;
    cam_start(&c, 4.0 * (double)work_step_ms(), 3, 36);
    gf_client *q = c.q;
    const gf_pipeline *p = c.p;
    const void *in = c.in;
    int cam = c.fd;
    char err[256], why[256];
    uint64_t subs = gf_test_ck_stat(q, "slots.submissions");
    send_frame(cam, 1, p[0].id, GF_FLAG_LATEST, in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 1, 1, 30000), 1);
    send_frame(cam, 2, p[0].id, GF_FLAG_LATEST, in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "frames.received", 2, UINT64_MAX, 10000), 2);
    send_frame(cam, 3, p[0].id, GF_FLAG_LATEST, in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "rejected.superseded", 1, 1, 10000), 1);
    /* Still the one frame on the engine, two slots free. */
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.in_flight"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), subs + 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.received"), 3);
    cJSON_Delete(st);
    /* Answered in order: 2's superseded where its result would have been. */
    static uint8_t got[BIG];
    for (uint64_t id = 1; id <= 3; id += 2) {
        if (id == 3)
            expect_error(cam, 2, GF_ERR_SUPERSEDED, "read while this one waited to run");
        gf_header h;
        ck_assert_msg(
            gf_test_raw_recv_reply(cam, &h, got, sizeof got, reply_ms(), err, sizeof err) == 0,
            "%s", err);
        ck_assert_msg(h.type == GF_MSG_RESULT, "frame %llu: type %u status %s",
                      (unsigned long long)h.frame_id, h.type, gf_status_name(h.status));
        ck_assert_uint_eq(h.frame_id, id);
        ck_assert_uint_eq(h.payload_bytes, c.ref_bytes);
        ck_assert_msg(gf_pipeline_compare_result(&p[0], got, c.ref, c.ref_bytes, why, sizeof why) ==
                          0,
                      "frame %llu: %s", (unsigned long long)id, why);
    }
    gf_test_ck_wait_idle(q, 2, 10000, NULL);
    st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), subs + 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "rejected.superseded"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 2);
    cJSON_Delete(st);
    cam_stop(&c);
}
END_TEST

/* Submission number of frame `frame_id` of connection `conn` in TRACE
 * document `tr` (0 when it is not there). */
static uint64_t submission_of(const cJSON *tr, uint64_t conn, uint64_t frame_id) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(tr, "frames")) {
        if ((uint64_t)num(r, "conn") == conn && (uint64_t)num(r, "frame_id") == frame_id)
            return (uint64_t)num(r, "submission");
    }
    return 0;
}

/* TRACE document `tr`'s `key` (a time, ns after t0) of frame `frame_id`
 * of connection `conn`. */
static double trace_time(const cJSON *tr, uint64_t conn, uint64_t frame_id, const char *key) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(tr, "frames")) {
        if ((uint64_t)num(r, "conn") == conn && (uint64_t)num(r, "frame_id") == frame_id)
            return num(r, key);
    }
    ck_abort_msg("frame %llu is not in the trace", (unsigned long long)frame_id);
    return 0;
}

/* The connection id TRACE gives frame `frame_id` of whichever connection
 * sent it alone (the ids of two connections differ). */
static uint64_t conn_of(const cJSON *tr, uint64_t frame_id) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(tr, "frames")) {
        if ((uint64_t)num(r, "frame_id") == frame_id)
            return (uint64_t)num(r, "conn");
    }
    ck_abort_msg("frame %llu is not in the trace", (unsigned long long)frame_id);
    return 0;
}

/* Reads `n` results on `fd`, frames first_id.., each exactly c->ref. */
static void expect_cam_results(const cam_daemon *c, int fd, uint64_t first_id, unsigned n) {
    static uint8_t got[BIG];
    char err[256], why[256];
    for (unsigned i = 0; i < n; i++) {
        gf_header h;
        ck_assert_msg(
            gf_test_raw_recv_reply(fd, &h, got, sizeof got, reply_ms(), err, sizeof err) == 0, "%s",
            err);
        ck_assert_msg(h.type == GF_MSG_RESULT, "frame %llu: type %u status %s",
                      (unsigned long long)h.frame_id, h.type, gf_status_name(h.status));
        ck_assert_uint_eq(h.frame_id, first_id + i);
        ck_assert_uint_eq(h.payload_bytes, c->ref_bytes);
        ck_assert_msg(
            gf_pipeline_compare_result(&c->p[0], got, c->ref, c->ref_bytes, why, sizeof why) == 0,
            "frame %llu: %s", (unsigned long long)h.frame_id, why);
    }
}

/* A client whose whole frames fill a slot each (two BIG frames do not fit
 * max_frame_bytes) leaves one slot to another client, as a receiver of
 * large payloads does: with its frames 1 and 2 on the engine (2 sent 3/8
 * of a frame's time after 1, so that 1 is back first) and 3 waiting,
 * another client's frame (101, waiting behind 3) gets the first slot back,
 * and 3 the next.  Before, 3 went first and 101 waited for two of the
 * first client's frames.  (That a client alone has every slot, and has
 * them again two claims after the others left, test_scheduler checks.) */
START_TEST(frames_that_fill_a_slot_leave_one_to_another_client) {
    cam_daemon c;
    double want = 4.0 * (double)work_step_ms() * 1e6 / ((double)(BIG / 4) * g_sincos_ns);
    unsigned iters = want < 1 ? 1 : want > ITERS_MAX ? ITERS_MAX : (unsigned)want;
    /* What a frame takes with that (at most ITERS_MAX: less than 4 steps
     * on a fast core under the sanitizers' longer steps). */
    double frame_ms = (double)iters * (double)(BIG / 4) * g_sincos_ns / 1e6;
    char json[512], err[256];
    snprintf(json, sizeof json,
             "{\"shards\": 1, \"slots\": 2, \"max_frame_bytes\": 16384, "
             "\"frame_timeout_ms\": 600000, \"pipelines\": [{\"name\": \"cam\", "
             "\"kind\": \"sincos\", \"params\": {\"iters\": %u}}]}",
             iters);
    gf_test_ck_daemon_start(&c.d, json, g_engine);
    c.q = gf_test_ck_connect(c.d.socket_path);
    size_t count;
    c.p = gf_test_ck_list(c.q, &count);
    ck_assert_uint_eq(count, 1);
    uint64_t seed = 37;
    ck_assert_msg(
        gf_test_make_frame(&c.p[0], BIG, &seed, &c.in, &c.ref, &c.ref_bytes, err, sizeof err) == 0,
        "%s", err);
    c.fd = gf_test_ck_raw_connect(c.d.socket_path);
    int bulk = c.fd, other = gf_test_ck_raw_connect(c.d.socket_path);
    gf_client *q = c.q;
    uint32_t id = c.p[0].id;
    send_frame(bulk, 1, id, 0, c.in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 1, 1, 30000), 1);
    gf_test_sleep_ms((unsigned)(frame_ms * 3 / 8));
    send_frame(bulk, 2, id, 0, c.in, BIG);
    send_frame(bulk, 3, id, 0, c.in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 2, 2, 30000), 2);
    /* 3 waits for a slot (a waiting frame is counted received once placed). */
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "backpressure_pauses", 1, 1, 10000), 1);
    send_frame(other, 101, id, 0, c.in, BIG);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "backpressure_pauses", 2, 2, 10000), 2);
    /* Both slots still on the first client's frames, 3 and 101 waiting. */
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), 2);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.received"), 2);
    cJSON_Delete(st);
    expect_cam_results(&c, bulk, 1, 3);
    expect_cam_results(&c, other, 101, 1);
    char *text = NULL;
    ck_assert_int_eq(gf_client_request_trace(q, 0, &text, 10000), 0);
    cJSON *tr = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(tr);
    uint64_t b = conn_of(tr, 3), o = conn_of(tr, 101);
    ck_assert_uint_ne(b, o);
    uint64_t s3 = submission_of(tr, b, 3), s101 = submission_of(tr, o, 101);
    /* On a loaded machine frames 1 and 2 may both come back before the loop
     * hands either slot on: the first client then holds none, and 3, the
     * first to wait, rightly goes first.  Only then. */
    double drained1 = trace_time(tr, b, 1, "drained"), drained2 = trace_time(tr, b, 2, "drained");
    int both_back = drained1 <= trace_time(tr, b, 3, "submitted") &&
                    drained2 <= trace_time(tr, b, 3, "submitted");
    ck_assert_msg((s101 == 3 && s3 == 4) || (both_back && s3 == 3 && s101 == 4),
                  "the other client's frame went in submission %llu, the first client's third "
                  "frame in %llu: want 3 and 4 (frames 1 and 2 drained at %.0f and %.0f ns, 3 "
                  "submitted at %.0f)",
                  (unsigned long long)s101, (unsigned long long)s3, drained1, drained2,
                  trace_time(tr, b, 3, "submitted"));
    cJSON_Delete(tr);
    close(other);
    cam_stop(&c);
}
END_TEST

/* Two shards of one device (device 0: on a host of two GPUs the shards
 * would otherwise go one to each, and a device's shards pool alone), one
 * pipeline that is not elementwise, frames through the socket.  Its
 * batches wait 2 ms for more frames: the home's own batch is open most of
 * the time, so the other shard's batches (sent when theirs are due) find
 * it open whatever the machine's load. */
static const char pool_json_fmt[] =
    "{\"shards\": 2, \"devices\": \"0\", \"pool_shards\": %s, \"pipelines\": [{\"name\": \"norm\", "
    "\"kind\": \"normalize_u8\", \"params\": {\"width\": 16, \"height\": 16}, "
    "\"max_batch_delay_us\": 2000}]}";

/* What TRACE `tr` says of the pooling of its frames: how many ran in a
 * submission of a shard other than their own (*away), and whether a
 * submission held frames answered by two shards (*shared).  Every frame
 * ran on its own shard or on the pipeline's home, shard 0 (pipeline 0 of
 * two shards). */
static void pooled_in_trace(const cJSON *tr, unsigned *away, int *shared) {
    const cJSON *r, *q;
    *away = 0;
    *shared = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(tr, "frames")) {
        uint64_t shard = (uint64_t)num(r, "shard"), on = (uint64_t)num(r, "submitted_on");
        ck_assert_msg(on == shard || on == 0, "frame %g of shard %llu ran on shard %llu",
                      num(r, "frame_id"), (unsigned long long)shard, (unsigned long long)on);
        *away += on != shard;
        if (*shared || on != shard)
            continue;
        /* A frame of the home's own: did another shard's share its submission? */
        cJSON_ArrayForEach(q, cJSON_GetObjectItem(tr, "frames")) {
            if (num(q, "submitted_on") == (double)on &&
                num(q, "submission") == num(r, "submission") && num(q, "shard") != (double)shard)
                *shared = 1;
        }
    }
}

/* Frames each client of stream_pooled sends. */
#define POOL_FRAMES 80

/* Streams `clients` verified clients at once (POOL_FRAMES each, window 8)
 * through a daemon of pool_json_fmt with `pool`, then reads its STATS and
 * TRACE. */
static void stream_pooled(const char *pool, unsigned clients, cJSON **st, cJSON **tr) {
    gf_test_daemon d;
    char json[512], err[512];
    snprintf(json, sizeof json, pool_json_fmt, pool);
    gf_test_ck_daemon_start(&d, json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count;
    gf_pipeline *p = gf_test_ck_list(c, &count);
    gf_test_stream s = {.pipeline = &p[0],
                        .frame_bytes = 16 * 16 * 3,
                        .frame_count = POOL_FRAMES,
                        .window = 8,
                        .first_frame_id = 1};
    ck_assert_msg(gf_test_streams_parallel(d.socket_path, clients, &s, err, sizeof err) == 0, "%s",
                  err);
    gf_test_ck_wait_idle(c, 1, 10000, NULL);
    *st = gf_test_ck_stats(c);
    char *text = NULL;
    ck_assert_int_eq(gf_client_request_trace(c, 0, &text, 10000), 0);
    *tr = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(*tr);
    gf_pipelines_free(p, count);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}

/* Clients on both shards of a device streaming one model-like pipeline:
 * one shard's batches run in the other's submissions, beside that shard's
 * own frames (pool.h), every reply exactly the C reference's, and every
 * frame counted once (STATS' submitted frames are the frames answered). */
START_TEST(a_device_s_shards_run_one_pipeline_s_batches_together) {
    cJSON *st, *tr;
    stream_pooled("2", 4, &st, &tr);
    uint64_t frames = 4 * POOL_FRAMES;
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), frames);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 0);
    ck_assert_double_eq(num(batches_of(st, 0), "frames"), (double)frames);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"),
                      num(batches_of(st, 0), "submissions"));
    uint64_t pooled = gf_test_ck_u64(st, "slots.pooled_frames");
    ck_assert_uint_gt(gf_test_ck_u64(st, "slots.pooled_batches"), 0);
    ck_assert_uint_gt(pooled, 0);
    unsigned away;
    int shared;
    pooled_in_trace(tr, &away, &shared);
    ck_assert_uint_eq(away, pooled); /* the trace keeps every frame here */
    ck_assert_msg(shared,
                  "no submission held frames of both shards' clients (%llu of %llu frames ran "
                  "on the other shard, in %llu batches; %llu submissions)",
                  (unsigned long long)pooled, (unsigned long long)frames,
                  (unsigned long long)gf_test_ck_u64(st, "slots.pooled_batches"),
                  (unsigned long long)gf_test_ck_u64(st, "slots.submissions"));
    cJSON_Delete(st);
    cJSON_Delete(tr);
}
END_TEST

/* Two pipelines whose homes are each other's senders (ids 0 and 1 over
 * two shards), both streamed at once: a shard keeps a slot of its own
 * back, and batches away do not hold its open batch (scheduler.h, `away`),
 * so neither waits on the other for ever (before, each shard's slots could
 * all be away at the other, each waiting there for a slot, or, with three
 * slots, each home's open batch held while two of its own were away, until
 * the frame timeout made the daemon exit).  Every reply exact, the daemon
 * stops cleanly. */
static const char two_homes_json[] =
    "{\"shards\": 2, \"slots\": 3, \"pool_shards\": 2, \"frame_timeout_ms\": 5000, "
    "\"pipelines\": ["
    "{\"name\": \"n0\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 16, \"height\": 16}},"
    "{\"name\": \"n1\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 16, \"height\": 16}}]}";

typedef struct two_homes_arg {
    const char *socket_path;
    gf_test_stream s;
    int rc;
    char err[512];
} two_homes_arg;

static void *two_homes_stream(void *arg) {
    two_homes_arg *a = arg;
    a->rc = gf_test_streams_parallel(a->socket_path, 2, &a->s, a->err, sizeof a->err);
    return NULL;
}

START_TEST(two_pipelines_homed_on_each_other_never_wait_on_each_other) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, two_homes_json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count;
    gf_pipeline *p = gf_test_ck_list(c, &count);
    two_homes_arg a[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        a[i] = (two_homes_arg){.socket_path = d.socket_path,
                               .s = {.pipeline = &p[i],
                                     .frame_bytes = 16 * 16 * 3,
                                     .frame_count = POOL_FRAMES,
                                     .window = 8,
                                     .first_frame_id = 1}};
        ck_assert_int_eq(pthread_create(&t[i], NULL, two_homes_stream, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(a[i].rc == 0, "pipeline %d: %s", i, a[i].err);
    gf_test_ck_wait_idle(c, 1, 10000, NULL);
    cJSON *st = gf_test_ck_stats(c);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 2 * 2 * POOL_FRAMES);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.failed"), 0);
    cJSON_Delete(st);
    gf_pipelines_free(p, count);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* A lone client's frames run on its own shard; with pool_shards 0, so do
 * everyone's. */
START_TEST(a_lone_client_or_pool_shards_0_runs_on_its_own_shard) {
    cJSON *st, *tr;
    unsigned away;
    int shared;
    stream_pooled("2", 1, &st, &tr);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), POOL_FRAMES);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.pooled_frames"), 0);
    pooled_in_trace(tr, &away, &shared);
    ck_assert_uint_eq(away, 0);
    cJSON_Delete(st);
    cJSON_Delete(tr);
    stream_pooled("0", 2, &st, &tr);
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 2 * POOL_FRAMES);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.pooled_batches"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.pooled_frames"), 0);
    pooled_in_trace(tr, &away, &shared);
    ck_assert_uint_eq(away, 0);
    ck_assert(!shared);
    cJSON_Delete(st);
    cJSON_Delete(tr);
}
END_TEST

/* Newest-frame-only from a client that waits for each reply: nothing is
 * ever replaced, every frame answered with its own bytes. */
START_TEST(newest_frame_only_replaces_nothing_that_ran) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, one_slot_json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    ck_assert_int_eq(gf_client_set_frame_options(c, 0, 1), 0);
    static uint8_t in[SMALL];
    for (uint64_t i = 0; i < 30; i++) {
        memset(in, (int)i, sizeof in);
        ck_assert_int_eq(gf_client_send_frame(c, ECHO_ID, i, in, sizeof in), 0);
        gf_reply rep;
        ck_assert_int_eq(gf_client_recv(c, &rep, 30000), 0);
        ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
        ck_assert_uint_eq(rep.header.version, GF_PROTOCOL_VERSION_SCHED);
        ck_assert_uint_eq(rep.header.frame_id, i);
        ck_assert_int_eq(memcmp(rep.payload, in, SMALL), 0);
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.superseded"), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* The library's frame options: every frame a version-3 FRAME with its
 * deadline, each answered in time; gf_client_set_frame_options refuses a
 * deadline over its bound and then changes nothing. */
START_TEST(the_library_sends_deadlines) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, one_slot_json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    ck_assert_int_eq(gf_client_set_frame_options(c, GF_CLIENT_DEADLINE_US_MAX + 1, 0), -EINVAL);
    ck_assert_int_eq(gf_client_set_frame_options(c, 60u * 1000 * 1000, 0), 0);
    enum { FRAMES = 50, WINDOW = 8 };
    static uint8_t in[FRAMES][SMALL];
    unsigned sent = 0, got = 0;
    while (got < FRAMES) {
        for (; sent < FRAMES && sent - got < WINDOW; sent++) {
            memset(in[sent], (int)sent, SMALL);
            ck_assert_int_eq(gf_client_send_frame(c, ECHO_ID, sent, in[sent], SMALL), 0);
        }
        gf_reply rep;
        ck_assert_int_eq(gf_client_recv(c, &rep, 30000), 0);
        ck_assert_uint_eq(rep.header.version, GF_PROTOCOL_VERSION_SCHED);
        ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
        ck_assert_uint_eq(rep.header.frame_id, got);
        ck_assert_uint_eq(rep.payload_bytes, SMALL);
        ck_assert_int_eq(memcmp(rep.payload, in[got], SMALL), 0);
        got++;
    }
    /* Options off: plain version-1 frames again. */
    ck_assert_int_eq(gf_client_set_frame_options(c, 0, 0), 0);
    gf_test_ck_stream_id(c, ECHO_ID, SMALL, 10, 4);
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.deadline_exceeded"), 0);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* ---- priorities -------------------------------------------------------------------- */

/* One shard and one slot, echo and slow (`iters`); `priorities` (a JSON
 * object). */
static void priorities_config(char *json, size_t len, const char *priorities, unsigned iters) {
    snprintf(json, len,
             "{\"shards\": 1, \"slots\": 1, \"max_frame_bytes\": 8388608, \"frame_timeout_ms\": "
             "600000, \"priorities\": %s, \"pipelines\": [{\"name\": \"echo\", \"kind\": "
             "\"echo\"}, {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": "
             "%u}}]}",
             priorities, iters);
}

/* Receives one reply on each of fds[n], noting the order in which they
 * came: order[k] is the index of the k-th.  Replies ready together (the
 * test's thread was not running when they came) are taken in the order
 * `expected` (indices) says, so that only an order seen apart can fail.
 * Each reply's header goes to h[i], its payload to bufs[i] (caps[i]
 * bytes). */
static void replies_in_order(const int *fds, unsigned n, const unsigned *expected, gf_header *h,
                             uint8_t **bufs, const size_t *caps, unsigned *order) {
    struct pollfd pfd[8];
    unsigned got = 0;
    char err[256];
    ck_assert_uint_le(n, 8);
    for (unsigned i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    while (got < n) {
        int r = poll(pfd, n, 4 * reply_ms());
        ck_assert_msg(r > 0, "%u of %u replies came", got, n);
        for (unsigned k = 0; k < n; k++) {
            unsigned i = expected[k];
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ck_assert_msg(gf_test_raw_recv_reply(fds[i], &h[i], bufs[i], caps[i], reply_ms(), err,
                                                 sizeof err) == 0,
                          "reply %u: %s", i, err);
            order[got++] = i;
            pfd[i].fd = -1;
        }
    }
}

/* Waits until STATS' `dotted` counter reaches `want`. */
static void wait_count(gf_client *q, const char *dotted, uint64_t want) {
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, dotted, want, UINT64_MAX, 10000), want);
}

/* The contest of the priorities tests: while a slow frame holds the one
 * slot, three batch clients (b[0..2]) queue a slow frame each (whole in
 * the daemon: BIG bytes), in turn, then the client `rt` an echo frame
 * naming realtime.  Returns the order of their replies (0: rt, 1..3:
 * b[0..2]; replies_in_order says how `expected` is used), each checked:
 * rt's bytes, the slow results against `ref`. */
static void contest(gf_test_daemon *d, gf_client *q, const gf_pipeline *slow_p, int rt,
                    const int *b, const uint8_t *slow_in, size_t slow_bytes, const void *ref,
                    size_t ref_bytes, const unsigned *expected, unsigned *order) {
    /* The first frame: 32 times a batch client's, so that the contest is
     * set up while it runs (checked below). */
    static uint8_t first[32 * BIG];
    ck_assert_uint_le(slow_bytes, BIG);
    gf_client *a = gf_test_ck_connect(d->socket_path);
    ck_assert_int_eq(gf_client_send_frame(a, SLOW_ID, 0, first, 32 * slow_bytes), 0);
    ck_assert_int_eq(gf_client_flush(a, 30000), 0);
    ck_assert_uint_eq(gf_test_ck_wait_stat(q, "slots.in_flight", 1, 1, 30000), 1);
    uint64_t pauses = gf_test_ck_stat(q, "backpressure_pauses");
    uint64_t subs = gf_test_ck_stat(q, "slots.submissions");
    for (unsigned i = 0; i < 3; i++) {
        send_frame(b[i], 10 + i, SLOW_ID, GF_CLASS_BATCH << GF_FLAG_CLASS_SHIFT, slow_in,
                   slow_bytes);
        wait_count(q, "backpressure_pauses", pauses + 1 + i);
    }
    static uint8_t echo_in[SMALL];
    memset(echo_in, 0x77, sizeof echo_in);
    send_frame(rt, 20, ECHO_ID, GF_CLASS_REALTIME << GF_FLAG_CLASS_SHIFT, echo_in, SMALL);
    wait_count(q, "backpressure_pauses", pauses + 4);
    ck_assert_msg(gf_test_ck_stat(q, "slots.submissions") == subs,
                  "the first frame finished before the contest was set up (a loaded machine)");

    int fds[4] = {rt, b[0], b[1], b[2]};
    gf_header h[4];
    static uint8_t out[4][BIG];
    uint8_t *bufs[4] = {out[0], out[1], out[2], out[3]};
    size_t caps[4] = {BIG, BIG, BIG, BIG};
    replies_in_order(fds, 4, expected, h, bufs, caps, order);
    char why[256];
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_msg(h[i].type == GF_MSG_RESULT, "reply %u: type %u status %s", i, h[i].type,
                      gf_status_name(h[i].status));
        ck_assert_uint_eq(h[i].frame_id, i == 0 ? 20 : 10 + i - 1);
    }
    ck_assert_uint_eq(h[0].payload_bytes, SMALL);
    ck_assert_int_eq(memcmp(out[0], echo_in, SMALL), 0);
    for (unsigned i = 1; i < 4; i++) {
        ck_assert_uint_eq(h[i].payload_bytes, ref_bytes);
        ck_assert_msg(gf_pipeline_compare_result(slow_p, out[i], ref, ref_bytes, why, sizeof why) ==
                          0,
                      "batch client %u: %s", i - 1, why);
    }
    gf_reply rep;
    ck_assert_int_eq(gf_client_recv(a, &rep, 2 * reply_ms()), 0);
    ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
    gf_client_close(a);
}

/* Priorities through the socket: with everyone allowed realtime, a frame
 * that names it, queued after three batch clients' frames waiting for the
 * one slot, is granted it first: its reply comes before theirs, which come
 * in their order.  STATS counts frames and waits by class.  A reload that
 * makes batch the most anyone gets applies to the connections already
 * open: the same contest then goes by arrival, the echo frame last, and
 * the frames count as batch. */
START_TEST(a_realtime_frame_goes_before_waiting_batch_frames) {
    /* A batch client's slow frame of half a step (BIG bytes, so that it
     * waits whole in the daemon); the contest's first frame, 32 times
     * one, of sixteen steps. */
    double want = 0.5e6 * (double)work_step_ms() / ((double)(BIG / 4) * g_sincos_ns);
    unsigned iters = want < 1 ? 1 : want > ITERS_MAX ? ITERS_MAX : (unsigned)want;
    size_t slow_bytes = BIG;
    char json[1024];
    priorities_config(json, sizeof json, "{\"default\": \"realtime\"}", iters);
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, json, g_engine);
    gf_client *q = gf_test_ck_connect(d.socket_path);
    size_t count;
    gf_pipeline *p = gf_test_ck_list(q, &count);
    ck_assert_uint_eq(count, 2);
    uint64_t rng = 7;
    void *in, *ref;
    size_t ref_bytes;
    char err[256];
    ck_assert_msg(gf_test_make_frame(&p[SLOW_ID], slow_bytes, &rng, &in, &ref, &ref_bytes, err,
                                     sizeof err) == 0,
                  "%s", err);
    int rt = gf_test_ck_raw_connect(d.socket_path);
    int b[3];
    for (unsigned i = 0; i < 3; i++)
        b[i] = gf_test_ck_raw_connect(d.socket_path);

    unsigned order[4];
    static const unsigned rt_first[4] = {0, 1, 2, 3}, rt_last[4] = {1, 2, 3, 0};
    contest(&d, q, &p[SLOW_ID], rt, b, in, slow_bytes, ref, ref_bytes, rt_first, order);
    ck_assert_msg(order[0] == 0 && order[1] == 1 && order[2] == 2 && order[3] == 3,
                  "replies came in the order %u %u %u %u (0: realtime, 1-3: batch)", order[0],
                  order[1], order[2], order[3]);
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.realtime.frames"), 2); /* and the first */
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.realtime.waits"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.batch.frames"), 3);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.batch.waits"), 3);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.normal.frames"), 0);
    cJSON_Delete(st);

    /* Batch at most, for everyone: applied once a realtime-named frame of
     * an open connection counts as batch. */
    priorities_config(json, sizeof json, "{\"default\": \"batch\"}", iters);
    gf_test_ck_daemon_put_config(&d, json);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    uint64_t deadline = gf_now_ms() + 10000;
    uint64_t id = 100;
    for (;;) {
        uint64_t was = gf_test_ck_stat(q, "priorities.batch.frames");
        send_frame(rt, id, ECHO_ID, GF_CLASS_REALTIME << GF_FLAG_CLASS_SHIFT,
                   (const uint8_t[SMALL]){0}, SMALL);
        expect_bytes(rt, id++, 0, SMALL);
        if (gf_test_ck_stat(q, "priorities.batch.frames") == was + 1)
            break;
        ck_assert_msg(gf_now_ms() < deadline, "the reload's priorities never applied");
        gf_test_sleep_ms(20);
    }
    contest(&d, q, &p[SLOW_ID], rt, b, in, slow_bytes, ref, ref_bytes, rt_last, order);
    ck_assert_msg(order[0] == 1 && order[1] == 2 && order[2] == 3 && order[3] == 0,
                  "after the reload, replies came in the order %u %u %u %u (0: realtime-named, "
                  "1-3: batch), expected 1 2 3 0",
                  order[0], order[1], order[2], order[3]);
    char *log = gf_test_read_file(d.log_path, NULL);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(gf_test_count_lines(log, "priorities", "default batch") >= 1,
                  "no reload line for priorities in the log:\n%s", log);
    free(log);
    free(in);
    free(ref);
    free(p);
    close(rt);
    for (unsigned i = 0; i < 3; i++)
        close(b[i]);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* The configuration caps what a frame may name: with no "priorities",
 * everyone is normal, and a frame naming realtime counts as normal; one
 * naming batch as batch.  A frame with the reserved class bits of a
 * version-2 header is a bad_flags error, as before. */
START_TEST(a_frame_names_at_most_its_configured_class) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, one_slot_json, g_engine);
    gf_client *q = gf_test_ck_connect(d.socket_path);
    int fd = gf_test_ck_raw_connect(d.socket_path);
    uint8_t in[SMALL];
    memset(in, 0x5a, sizeof in);
    send_frame(fd, 1, ECHO_ID, GF_CLASS_REALTIME << GF_FLAG_CLASS_SHIFT, in, SMALL);
    expect_bytes(fd, 1, 0x5a, SMALL);
    send_frame(fd, 2, ECHO_ID, GF_CLASS_BATCH << GF_FLAG_CLASS_SHIFT, in, SMALL);
    expect_bytes(fd, 2, 0x5a, SMALL);
    ck_assert_int_eq(gf_client_set_priority(q, GF_CLASS_COUNT_), -EINVAL);
    ck_assert_int_eq(gf_client_set_priority(q, GF_CLASS_BATCH), 0);
    for (uint64_t i = 0; i < 5; i++) {
        ck_assert_int_eq(gf_client_send_frame(q, ECHO_ID, i, in, SMALL), 0);
        gf_reply rep;
        ck_assert_int_eq(gf_client_recv(q, &rep, reply_ms()), 0);
        ck_assert_uint_eq(rep.header.type, GF_MSG_RESULT);
        ck_assert_uint_eq(rep.header.version, GF_PROTOCOL_VERSION_SCHED);
        ck_assert_uint_eq(rep.header.frame_id, i);
        ck_assert_int_eq(memcmp(rep.payload, in, SMALL), 0);
    }
    ck_assert_int_eq(gf_client_set_priority(q, GF_CLASS_DEFAULT), 0);
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.realtime.frames"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.normal.frames"), 1);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.batch.frames"), 6);
    cJSON_Delete(st);
    gf_header h = gf_test_header(GF_MSG_FRAME, 3, ECHO_ID, 0);
    h.version = GF_PROTOCOL_VERSION_SHM;
    h.flags = GF_CLASS_BATCH << GF_FLAG_CLASS_SHIFT;
    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    gf_test_ck_raw_error(fd, GF_ERR_BAD_FLAGS, "flags", reply_ms(), GF_TEST_STAYS_OPEN);
    close(fd);
    gf_client_close(q);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

/* Adds test `t` (named `name`) to `tc` on the CPU engine; on another, says
 * that it is not run there: its frames wait behind slow frames, which a
 * GPU runs in milliseconds. */
static void add_cpu_only(TCase *tc, const TTest *t, const char *name) {
    if (strcmp(g_engine, "cpu") == 0)
        tcase_add_test(tc, t);
    else
        printf("not run on the %s engine: %s (cpu only)\n", g_engine, name);
}
#define ADD_CPU_ONLY(tc, t) add_cpu_only(tc, t, #t)

static Suite *sched_live_suite(void) {
    Suite *s = suite_create("sched_live");
    TCase *tc = tcase_create("batch_delay");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, auto_batch_delay_in_stats);
    suite_add_tcase(s, tc);
    tc = tcase_create("deadlines");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, a_deadline_passed_on_arrival_is_answered_at_once);
    tcase_add_test(tc, the_library_sends_deadlines);
    ADD_CPU_ONLY(tc, a_deadline_passed_in_a_batch_is_not_answered_a_result);
    suite_add_tcase(s, tc);
    tc = tcase_create("latest");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, newest_frame_only_replaces_nothing_that_ran);
    ADD_CPU_ONLY(tc, newest_frame_only_replaces_a_waiting_frame);
    ADD_CPU_ONLY(tc, newest_frame_only_reads_on_while_it_waits_for_a_slot);
    ADD_CPU_ONLY(tc, newest_frame_only_at_twice_the_served_rate);
    ADD_CPU_ONLY(tc, newest_frame_only_runs_one_frame_at_a_time);
    suite_add_tcase(s, tc);
    tc = tcase_create("shares");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    ADD_CPU_ONLY(tc, frames_that_fill_a_slot_leave_one_to_another_client);
    suite_add_tcase(s, tc);
    tc = tcase_create("pool");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, a_device_s_shards_run_one_pipeline_s_batches_together);
    tcase_add_test(tc, a_lone_client_or_pool_shards_0_runs_on_its_own_shard);
    tcase_add_test(tc, two_pipelines_homed_on_each_other_never_wait_on_each_other);
    suite_add_tcase(s, tc);
    tc = tcase_create("priorities");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, a_frame_names_at_most_its_configured_class);
    ADD_CPU_ONLY(tc, a_realtime_frame_goes_before_waiting_batch_frames);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    g_sincos_ns = gf_test_sincos_ns();
    slow_input(); /* once, before the tests' processes fork */
    return gf_test_run(sched_live_suite());
}

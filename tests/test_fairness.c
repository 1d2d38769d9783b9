/* SPDX-License-Identifier: MIT */
/*
 * No client can hold the service hostage: the cases of the hardening issue,
 * reproduced through the socket against a real gpuframed, each now bounded.
 *
 * - `slots` clients stall mid-payload of a small frame: they hold no slot,
 *   another client is answered at once;
 * - `slots` clients stall mid-payload of a large frame: each holds a slot
 *   until request_timeout_ms, is told request_timeout and closed, and
 *   another client is answered within 2 x request_timeout_ms;
 * - a client sends large frames and never reads: write_timeout_ms closes it
 *   and another client is answered within 2 x write_timeout_ms;
 * - a bulk client's unread result too large to move out holds a slot, and
 *   its next payload waits: another client is answered at once;
 * - idle_timeout_ms closes a silent connection.
 * Every case checks the STATS counters that account for it.
 * The engine comes from GF_TEST_ENGINE (cpu or cuda).
 */
#define _GNU_SOURCE /* prlimit */
#include <check.h>
#include <errno.h>
#include <pwd.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

/* Short deadlines, so that each case takes about a second. */
#define REQUEST_TIMEOUT_MS 500
#define RECEIVE_STALL_MS   100
#define WRITE_TIMEOUT_MS   500
#define IDLE_TIMEOUT_MS    300
/* A payload that fits the daemon's read buffer (daemon/conn.h
 * GF_STAGED_PAYLOAD_MAX_BYTES), and one that does not. */
#define SMALL_FRAME_BYTES 1000u
#define LARGE_FRAME_BYTES (1u << 20)
/* A reply far larger than the kernel's socket buffer: unread, it blocks. */
#define HUGE_FRAME_BYTES (4u << 20)
#define SLOTS            2
#define TEST_TIMEOUT_S   60
#define ERR_BYTES        512

/* One shard: these are the slots' scheduling within a shard, which each
 * shard has whole. */
static const char config_json[] =
    "{\"shards\": 1, \"slots\": 2, \"max_frame_bytes\": 4194304, \"request_timeout_ms\": 500,"
    " \"receive_stall_ms\": 100, \"write_timeout_ms\": 500,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";
/* The same with no memory for slow payloads: they hold their slots, and
 * receive_stall_ms cuts them. */
static const char unparked_json[] =
    "{\"shards\": 1, \"slots\": 2, \"max_frame_bytes\": 4194304, \"request_timeout_ms\": 500,"
    " \"receive_stall_ms\": 100, \"write_timeout_ms\": 500, \"max_input_bytes_total\": 0,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";
/* Its own daemon: an idle deadline this short would close the other tests'
 * STATS connection between requests. */
static const char idle_json[] = "{\"shards\": 1, \"slots\": 2, \"idle_timeout_ms\": 300,"
                                " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* Three connections at most, to reach the limit with few sockets. */
static const char limits_json[] = "{\"slots\": 2, \"max_connections\": 3,"
                                  " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* Small output limits, to reach them with a few TRACE documents. */
static const char output_json[] =
    "{\"slots\": 2, \"max_output_bytes\": 2097152, \"max_output_bytes_total\": 8388608,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* A slow pipeline (sincos at SLOW_ITERS rounds) to hold the slots: frames
 * of slow_frame_bytes() take SLOW_FRAME_MS on the CPU engine (milliseconds
 * on a GPU), whatever the build's sanitizers make of sincos. */
#define SLOW_ITERS      200
#define SLOW_ITERS_TEXT "200"
#define SLOW_FRAME_MS   400
static const char slow_json[] =
    "{\"slots\": 2, \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    " {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": " SLOW_ITERS_TEXT "}}]}";
static double g_sincos_ns; /* gf_test_sincos_ns, measured once in main */

static gf_test_daemon daemon_;
static const char *g_engine;

/* The test's daemon, on `json`, and stopping it: exit 0 after SIGTERM. */
static void start(const char *json) {
    gf_test_ck_daemon_start(&daemon_, json, g_engine);
}

static void stop(void) {
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}

static gf_client *client(void) {
    return gf_test_ck_connect(daemon_.socket_path);
}

static int raw_client(void) {
    return gf_test_ck_raw_connect(daemon_.socket_path);
}

/* Opens a raw connection and sends a FRAME header announcing `announced`
 * bytes of echo payload, followed by `sent` of them; returns the fd. */
static int stall_mid_payload(uint64_t frame_id, uint64_t announced, size_t sent) {
    int fd = raw_client();
    gf_test_ck_raw_frame(fd, frame_id, 0, announced, NULL, sent);
    return fd;
}

/* One 4 KiB echo frame from a well-behaved client: its result, byte-exact,
 * and how long it took in ms. */
static uint64_t answered_after_ms(gf_client *c, uint64_t frame_id) {
    unsigned char in[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7u + frame_id);
    uint64_t t0 = gf_now_ms();
    ck_assert_int_eq(gf_client_send_frame(c, 0, frame_id, in, sizeof in), 0);
    gf_reply r;
    int rc = gf_client_recv(c, &r, 10000);
    ck_assert_msg(rc == 0, "no reply: %s", gf_client_error(c));
    uint64_t ms = gf_now_ms() - t0;
    ck_assert_msg(r.header.type == GF_MSG_RESULT, "frame %" PRIu64 ": %s %.*s", frame_id,
                  gf_status_name(r.header.status), (int)r.payload_bytes, (const char *)r.payload);
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    ck_assert_uint_eq(r.payload_bytes, sizeof in);
    ck_assert_mem_eq(r.payload, in, sizeof in);
    return ms;
}

/* Stalled small payloads hold no slot: another client is answered at once. */
START_TEST(stalled_small_payloads_hold_no_slot) {
    start(config_json);
    gf_client *c = client();
    uint64_t received = gf_test_ck_stat(c, "frames.received");
    int fds[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        fds[i] = stall_mid_payload(100 + (uint64_t)i, SMALL_FRAME_BYTES, 1);
    gf_test_sleep_ms(100);
    uint64_t ms = answered_after_ms(c, 1);
    ck_assert_msg(ms < REQUEST_TIMEOUT_MS, "answered after %" PRIu64 " ms", ms);
    /* The stalled frames were never taken: only the good one was received. */
    ck_assert_uint_eq(gf_test_ck_stat(c, "frames.received") - received, 1);
    for (int i = 0; i < SLOTS; i++)
        close(fds[i]);
    gf_client_close(c);
    stop();
}
END_TEST

/*
 * Stalled large payloads: the first holds the one slot that may be received
 * into (all but one of the two), so another client's small frame is answered
 * at once from the other.  With memory for slow payloads (the default), the
 * second, which would wait for the first, is read into memory instead (the
 * first keeps its slot: nobody waits for one): both are cut by
 * request_timeout_ms, the second holding no slot meanwhile.  Without it
 * (max_input_bytes_total 0), the second waits; while it waits, the first is
 * cut after receive_stall_ms without progress; the second then gets the
 * slot and, with nobody waiting, keeps it until request_timeout_ms.  Each is
 * told why, for its own frame, and closed.
 */
START_TEST(stalled_large_payloads_time_out) {
    int parking = _i == 0;
    start(parking ? config_json : unparked_json);
    gf_client *c = client();
    uint64_t failed = gf_test_ck_stat(c, "frames.failed");
    uint64_t rejected = gf_test_ck_stat(c, "rejected.request_timeout");
    int fds[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        fds[i] = stall_mid_payload(100 + (uint64_t)i, LARGE_FRAME_BYTES, 1);
        /* In this order: the first holds the slot before the second asks. */
        if (i == 0)
            gf_test_ck_wait_stat(c, "slots.free", 0, SLOTS - 1, 500);
    }
    gf_test_sleep_ms(20);
    uint64_t ms = answered_after_ms(c, 1);
    ck_assert_msg(ms < RECEIVE_STALL_MS, "answered after %" PRIu64 " ms", ms);
    static const char *const why[2][SLOTS] = {{"receive_stall_ms 100", "request_timeout_ms 500"},
                                              {"request_timeout_ms 500", "request_timeout_ms 500"}};
    for (int i = 0; i < SLOTS; i++) {
        char err[ERR_BYTES], text[GF_ERROR_TEXT_MAX_BYTES + 1] = "";
        gf_header h;
        ck_assert_msg(gf_test_raw_recv_reply(fds[i], &h, text, GF_ERROR_TEXT_MAX_BYTES, 5000, err,
                                             sizeof err) == 0,
                      "%s", err);
        ck_assert_uint_eq(h.type, GF_MSG_ERROR);
        ck_assert_uint_eq(h.status, GF_ERR_REQUEST_TIMEOUT);
        ck_assert_uint_eq(h.frame_id, 100 + (uint64_t)i);
        ck_assert_msg(strstr(text, why[parking][i]) && strstr(text, "1 of 1048576"), "%s", text);
        ck_assert_int_eq(gf_test_raw_expect_close(fds[i], 5000, NULL), 0);
        close(fds[i]);
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "frames.failed") - failed, SLOTS);
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.request_timeout") - rejected, SLOTS);
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.closed_receive_stall"), parking ? 0 : 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.closed_request_timeout"), parking ? 2 : 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "frames.parked"), parking ? 1 : 0);
    gf_client_close(c);
    stop();
}
END_TEST

/* Clients that pipeline large frames at window 8, more of them than the
 * slots that may be received into, each blocking in its writes while its
 * results wait to be read: every frame is answered, on 2 and 3 slots.  (A
 * slot granted for a payload that could not be read at once kept counting
 * as received into: every slot free, every client waiting.)  A sanitized
 * build sends 24 frames a client, three windows, not 60: TSan checked every
 * byte of 60's 720 MiB each way, 7.7 s a case (24: 2.6 s). */
START_TEST(pipelining_large_frames_never_wedge) {
    static const char *const json[] = {
        "{\"slots\": 2, \"max_frame_bytes\": 4194304,"
        " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}",
        "{\"slots\": 3, \"max_frame_bytes\": 4194304,"
        " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}"};
    start(json[_i]);
    gf_client *c = client();
    gf_pipeline *p = gf_test_ck_list(c, NULL);
    gf_test_stream st = {.pipeline = &p[0],
                         .frame_bytes = HUGE_FRAME_BYTES,
                         .frame_count = gf_test_time_scale() > 1 ? 24 : 60,
                         .window = 8,
                         .seed = 3};
    char err[ERR_BYTES];
    ck_assert_msg(gf_test_streams_parallel(daemon_.socket_path, 3, &st, err, sizeof err) == 0,
                  "%d slots: %s", 2 + _i, err);
    ck_assert_uint_eq(gf_test_ck_stat(c, "slots.per_shard"), 2 + (uint64_t)_i);
    ck_assert_uint_eq(gf_test_ck_stat(c, "slots.free"), gf_test_ck_stat(c, "slots.count"));
    free(p);
    gf_client_close(c);
    stop();
}
END_TEST

/* A client that sends large frames and never reads its results: its results
 * leave their slots as soon as another client waits (max_output_bytes holds
 * them), so that client is answered well before write_timeout_ms; the
 * non-reader is closed after write_timeout_ms, its results dropped. */
START_TEST(client_that_never_reads_is_closed) {
    /* Answered before the write timeout means answered by the eviction, not
     * after the cut: a write timeout scaled by the build and the machine's
     * load keeps that true where answers are slow (678 ms was seen under
     * TSan on a loaded machine). */
    char json[sizeof config_json + 16];
    uint64_t write_ms = (uint64_t)(WRITE_TIMEOUT_MS * gf_test_time_scale() * gf_test_load_factor());
    const char *at = strstr(config_json, "\"write_timeout_ms\": 500");
    ck_assert_ptr_nonnull(at);
    snprintf(json, sizeof json, "%.*s\"write_timeout_ms\": %" PRIu64 "%s", (int)(at - config_json),
             config_json, write_ms, at + strlen("\"write_timeout_ms\": 500"));
    start(json);
    gf_client *c = client();
    uint64_t dropped = gf_test_ck_stat(c, "frames.dropped");
    int fd = raw_client();
    for (uint64_t id = 1; id <= SLOTS; id++)
        gf_test_ck_raw_frame(fd, id, 0, HUGE_FRAME_BYTES, NULL, HUGE_FRAME_BYTES);
    uint64_t ms = answered_after_ms(c, 1);
    ck_assert_msg(ms < write_ms, "answered after %" PRIu64 " ms; write_timeout_ms %" PRIu64, ms,
                  write_ms);
    ck_assert_uint_ge(gf_test_ck_stat(c, "frames.results_evicted"), 1);
    gf_test_ck_wait_stat(c, "connections.closed_write_timeout", 1, UINT64_MAX,
                         (int)write_ms + 2000);
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.closed_write_timeout"), 1);
    ck_assert_uint_ge(gf_test_ck_stat(c, "frames.dropped") - dropped, 1);
    close(fd);
    gf_client_close(c);
    stop();
}
END_TEST

/* A result larger than max_output_bytes (8 MiB by default): it cannot be
 * moved out of its slot, which it holds until its client reads it. */
#define BULK_FRAME_BYTES (12u << 20)
static const char bulk_json[] =
    "{\"shards\": 1, \"slots\": 2, \"max_frame_bytes\": 16777216, \"request_timeout_ms\": 10000,"
    " \"receive_stall_ms\": 10000, \"write_timeout_ms\": 10000,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

/* A bulk client whose unread result holds one slot, and that starts its
 * next large payload, is not given the other slot while another client uses
 * them: that client's frames are answered at once, not when the bulk client
 * reads or is cut (write_timeout_ms, 10 s).  (It was given it: the other
 * client waited for the deadline.) */
START_TEST(a_bulk_client_leaves_a_slot_to_others) {
    start(bulk_json);
    gf_client *c = client();
    answered_after_ms(c, 1);
    int fd = raw_client();
    gf_test_ck_raw_frame(fd, 1, 0, BULK_FRAME_BYTES, NULL, BULK_FRAME_BYTES);
    gf_test_ck_wait_stat(c, "slots.free", SLOTS - 1, SLOTS - 1, 5000);
    /* The next payload's first bytes are there; it waits for a slot. */
    gf_test_ck_raw_frame(fd, 2, 0, BULK_FRAME_BYTES, NULL, 65536);
    gf_test_sleep_ms(100);
    ck_assert_uint_eq(gf_test_ck_stat(c, "slots.free"), SLOTS - 1);
    for (uint64_t id = 2; id <= 20; id++) {
        uint64_t ms = answered_after_ms(c, id);
        ck_assert_msg(ms < 1000, "frame %" PRIu64 " answered after %" PRIu64 " ms", id, ms);
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "frames.received"), 21);
    close(fd);
    gf_client_close(c);
    stop();
}
END_TEST

/* idle_timeout_ms closes a connection that says nothing: not before it,
 * and within three of it, widened as the sanitizers and a loaded machine
 * slow the loop (2.9 s once under TSan at a load of 6 on 2 cores). */
START_TEST(idle_connection_is_closed) {
    start(idle_json);
    int fd = raw_client();
    uint64_t most = gf_test_latency_bound_ms(3 * IDLE_TIMEOUT_MS);
    uint64_t t0 = gf_now_ms();
    ck_assert_int_eq(gf_test_raw_expect_close(fd, (int)most + 5000, NULL), 0);
    uint64_t ms = gf_now_ms() - t0;
    ck_assert_msg(ms >= IDLE_TIMEOUT_MS && ms <= most,
                  "closed after %" PRIu64 " ms (idle_timeout_ms %d, at most %" PRIu64 " ms here)",
                  ms, IDLE_TIMEOUT_MS, most);
    close(fd);
    gf_client *c = client();
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.closed_idle"), 1);
    gf_client_close(c);
    stop();
}
END_TEST

/* The refusal a connection past a limit gets: a fatal too_many_connections
 * ERROR naming `words`, then the close. */
static void expect_refused(int fd, const char *words) {
    gf_test_ck_raw_error(fd, GF_ERR_TOO_MANY_CONNECTIONS, words, 5000, GF_TEST_CLOSES);
}

/* max_connections: one more is answered too_many_connections and closed;
 * out of descriptors (RLIMIT_NOFILE lowered under the running daemon), the
 * reserve fd answers the same instead of a silent close; both are counted,
 * and the daemon serves again once connections go. */
START_TEST(connection_limits_are_answered) {
    start(limits_json);
    gf_client *c = client();
    /* The start-up probe's close may still be on its way: one connection. */
    gf_test_ck_wait_idle(c, 1, 5000, NULL);
    gf_client *c2 = client(), *c3 = client();
    ck_assert_uint_eq(gf_test_ck_stat(c3, "connections.open"), 3);
    int fd = raw_client();
    expect_refused(fd, "max_connections 3 reached");
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.refused"), 1);
    gf_client_close(c2);
    gf_client_close(c3);
    gf_test_ck_wait_idle(c, 1, 5000, NULL);
    gf_test_ck_stat(c, "uptime_ns"); /* the closed sockets' fds go one loop turn later */

    /* The daemon's current fds plus two: the second connection hits EMFILE. */
    int open_fds = gf_test_daemon_fd_count(&daemon_);
    ck_assert_msg(open_fds >= 0, "the daemon's fds: %s", strerror(-open_fds));
    struct rlimit lim = {.rlim_cur = (rlim_t)open_fds + 1, .rlim_max = 4096};
    ck_assert_msg(prlimit(daemon_.pid, RLIMIT_NOFILE, &lim, NULL) == 0, "prlimit: %s",
                  strerror(errno));
    c3 = client(); /* takes the last fd */
    ck_assert_uint_eq(gf_test_ck_stat(c3, "connections.open"), 2);
    fd = raw_client();
    expect_refused(fd, "out of file descriptors");
    ck_assert_uint_eq(gf_test_ck_stat(c, "connections.refused"), 2);
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.too_many_connections"), 2);
    /* After the limit is back, a new connection is served. */
    lim.rlim_cur = 1024;
    ck_assert_int_eq(prlimit(daemon_.pid, RLIMIT_NOFILE, &lim, NULL), 0);
    gf_client_close(c3);
    gf_client *c4 = client();
    ck_assert_uint_lt(answered_after_ms(c4, 1), 5000);
    gf_client_close(c4);
    gf_client_close(c);
    stop();
}
END_TEST

/* SIGTERM with one client stalled mid-payload and another with 30 frames
 * queued: every frame the daemon read gets a reply (its result, or
 * shutting_down), in order; the stalled one is cut, not waited for; the
 * daemon exits 0 well before any deadline. */
START_TEST(sigterm_answers_every_frame_and_cuts_stalls) {
    enum { FRAMES = 30, BYTES = 4096 };
    start(config_json);
    int stalled = stall_mid_payload(77, LARGE_FRAME_BYTES, 1000);
    int fd = raw_client();
    static unsigned char batch[FRAMES * (GF_HEADER_BYTES + BYTES)];
    for (unsigned i = 0; i < FRAMES; i++) {
        unsigned char *p = batch + i * (GF_HEADER_BYTES + BYTES);
        gf_header h = gf_test_header(GF_MSG_FRAME, i, 0, BYTES);
        gf_header_encode(&h, p);
        memset(p + GF_HEADER_BYTES, (int)i, BYTES);
    }
    ck_assert_int_eq(gf_test_raw_send(fd, batch, sizeof batch), 0);
    gf_client *c = client();
    gf_test_ck_wait_stat(c, "frames.received", 2, UINT64_MAX, 2000);
    gf_client_close(c);

    uint64_t t0 = gf_now_ms();
    ck_assert_int_eq(gf_test_daemon_signal(&daemon_, SIGTERM), 0);
    char err[ERR_BYTES];
    static unsigned char payload[BYTES];
    unsigned results = 0, refused = 0;
    for (unsigned i = 0; i < FRAMES; i++) {
        gf_header r;
        ck_assert_msg(gf_test_raw_recv_reply(fd, &r, payload, BYTES, 5000, err, sizeof err) == 0,
                      "frame %u: no reply: %s", i, err);
        ck_assert_uint_eq(r.frame_id, i);
        if (r.type == GF_MSG_RESULT) {
            ck_assert_uint_eq(r.payload_bytes, BYTES);
            for (unsigned k = 0; k < BYTES; k++)
                ck_assert_uint_eq(payload[k], (unsigned char)i);
            results++;
        } else {
            ck_assert_uint_eq(r.type, GF_MSG_ERROR);
            ck_assert_str_eq(gf_status_name(r.status), "shutting_down");
            refused++;
        }
    }
    ck_assert_uint_eq(results + refused, FRAMES);
    ck_assert_int_eq(gf_test_raw_expect_close(fd, 5000, NULL), 0);
    close(fd);
    gf_header r = gf_test_ck_raw_error(stalled, GF_ERR_SHUTTING_DOWN, "cut after 1000 of 1048576",
                                       5000, GF_TEST_CLOSES);
    ck_assert_uint_eq(r.frame_id, 77);
    int status = gf_test_ck_daemon_wait(&daemon_, 5000);
    uint64_t ms = gf_now_ms() - t0;
    gf_test_ck_daemon_exited(&daemon_, status, 0);
    /* Well under a second on an idle machine; one that waited for the
     * staller would take the drain timeout (30 s). */
    uint64_t bound = 2000 * gf_test_time_scale();
    ck_assert_msg(ms < bound, "the stop took %" PRIu64 " ms; bound %" PRIu64 " ms", ms, bound);
    gf_test_daemon_cleanup(&daemon_);
}
END_TEST

/* "allow": a peer not listed is answered forbidden and closed before any
 * request is read; listed by uid, by group or by user name, it is served. */
START_TEST(allow_rules_refuse_and_admit) {
    char json[512];
    struct passwd *pw = getpwuid(getuid());
    ck_assert_ptr_nonnull(pw);
    const char *rules[] = {"{\"uids\": [4242424], \"gids\": [4242424]}", NULL, NULL, NULL};
    char by_uid[64], by_gid[64], by_name[160];
    snprintf(by_uid, sizeof by_uid, "{\"uids\": [4242424, %u]}", (unsigned)getuid());
    snprintf(by_gid, sizeof by_gid, "{\"gids\": [%u]}", (unsigned)getgid());
    snprintf(by_name, sizeof by_name, "{\"users\": [\"%s\"]}", pw->pw_name);
    rules[1] = by_uid;
    rules[2] = by_gid;
    rules[3] = by_name;
    for (int i = 0; i < 4; i++) {
        snprintf(json, sizeof json,
                 "{\"slots\": 2, \"allow\": %s, \"pipelines\": [{\"name\": \"echo\", "
                 "\"kind\": \"echo\"}]}",
                 rules[i]);
        start(json);
        int fd = raw_client();
        if (i == 0) {
            gf_test_ck_raw_error(fd, GF_ERR_FORBIDDEN, "is not allowed to connect", 5000,
                                 GF_TEST_CLOSES);
        } else {
            gf_header h = gf_test_header(GF_MSG_STATS, 1, 0, 0);
            char err[ERR_BYTES];
            static char doc[1 << 16];
            gf_header r;
            ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
            ck_assert_msg(
                gf_test_raw_recv_reply(fd, &r, doc, sizeof doc - 1, 5000, err, sizeof err) == 0,
                "rule %d: %s", i, err);
            ck_assert_uint_eq(r.type, GF_MSG_STATS);
            close(fd);
        }
        stop();
    }
}
END_TEST

/* Whether memory the daemon frees can leave its RSS: not under ASan, whose
 * quarantine keeps freed blocks resident. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_FOLLOWS_FREE 0
#else
#define RSS_FOLLOWS_FREE 1
#endif

/* The daemon's resident memory (kB). */
static uint64_t daemon_rss_kb(void) {
    return gf_test_ck_daemon_status_kb(&daemon_, "VmRSS:");
}

/* 20 connections ask for 200 TRACE documents each and never read: each
 * stops being read at max_output_bytes, all together at
 * max_output_bytes_total, so the daemon's memory stays bounded, and another
 * client's LIST is answered at once.  (With the limits out of the way this
 * test measured LIST at 2.2 s.) */
START_TEST(unread_trace_flood_is_bounded) {
    enum { FLOODERS = 20, TRACES = 200 };
    start(output_json);
    gf_client *c = client();
    /* Fill the trace ring: each TRACE is then ~300 KB. */
    gf_test_ck_stream_id(c, 0, 64, 1024, 16);
    uint64_t rss0 = daemon_rss_kb();

    int *fds = gf_test_ck_flood_unread(daemon_.socket_path, FLOODERS, TRACES, GF_MSG_TRACE);
    gf_test_sleep_ms(300); /* let the daemon build what it will */

    /* Another client is answered promptly meanwhile. */
    /* 50 ms as the issue asks (the unbounded daemon took 2.2 s). */
    uint64_t scale = gf_test_time_scale();
    uint64_t bound_ms = gf_test_latency_bound_ms(50);
    uint64_t worst = 0;
    for (int k = 0; k < 5; k++) {
        uint64_t t0 = gf_now_ms();
        free(gf_test_ck_list(c, NULL));
        uint64_t ms = gf_now_ms() - t0;
        worst = ms > worst ? ms : worst;
    }
    ck_assert_msg(worst < bound_ms, "LIST took %" PRIu64 " ms during the flood (bound %" PRIu64 ")",
                  worst, bound_ms);
    uint64_t grown_kb = daemon_rss_kb() - rss0;
    /* max_output_bytes_total 8 MiB, plus one document per connection over
     * it, plus slack for the allocator: 48 MiB.  Unbounded, it was
     * 20 x 64 replies of this size: about 400 MiB.  Under the sanitizers
     * (the scale above is 4) ASan's quarantine keeps freed blocks resident,
     * so the bound grows with the scale and still separates the two. */
    uint64_t rss_bound_kb = 48 * 1024 * scale;
    ck_assert_msg(grown_kb < rss_bound_kb, "RSS grew by %" PRIu64 " kB (bound %" PRIu64 " kB)",
                  grown_kb, rss_bound_kb);
    gf_test_flood_close(fds, FLOODERS);
    gf_client_close(c);
    stop();
}
END_TEST

/*
 * One burst of evicted results: a client fills both slots with a 4 MiB and
 * a 4 KiB echo frame and does not read; another client's frame waits for a
 * slot, so the results move out of their slots into the non-reader's
 * memory; then the non-reader goes away and they are dropped.  Returns the
 * daemon's RssAnon (kB) once it is idle again.
 */
static uint64_t eviction_burst_anon_kb(gf_client *c, uint64_t frame_id) {
    uint64_t evicted = gf_test_ck_stat(c, "frames.results_evicted");
    int fd = raw_client();
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    const uint64_t sizes[SLOTS] = {HUGE_FRAME_BYTES, 4096};
    for (unsigned i = 0; i < SLOTS; i++)
        gf_test_ck_raw_frame(fd, i + 1, 0, sizes[i], NULL, sizes[i]);
    gf_test_ck_wait_stat(c, "slots.free", 0, 0, 1000);
    answered_after_ms(c, frame_id);
    /* The 4 MiB result first: its write is what blocked (the 4 KiB one may
     * still be running then, and stays in its slot). */
    ck_assert_uint_ge(gf_test_ck_stat(c, "frames.results_evicted") - evicted, 1);
    close(fd);
    gf_test_ck_wait_idle(c, 1, 5000, NULL);
    /* The heap is trimmed by deferred work after the event that made the
     * daemon idle, which may be the one that answered the STATS above: one
     * more round trip is answered after it. */
    (void)gf_test_ck_stat(c, "connections.open");
    return gf_test_ck_daemon_status_kb(&daemon_, "RssAnon:");
}

/* What the daemon holds for a client that does not read goes back to the
 * system once the daemon is idle (daemon/heap_trim.c): without that, glibc
 * kept the 4 MiB of every burst after the first free at the heap's top,
 * and the soak's idle RssAnon moved by up to 8 MB from one checkpoint to
 * the next. */
START_TEST(evicted_results_memory_comes_back_when_idle) {
    enum { BURSTS = 4, SLACK_KB = 1024 };
    start(config_json);
    gf_client *c = client();
    /* Touch every slot's buffers whole first: they stay resident. */
    gf_test_ck_stream_id(c, 0, HUGE_FRAME_BYTES, 4, SLOTS);
    /* The first burst's results are mmapped (glibc's threshold is 128 KiB
     * until a block that large is freed): the later ones come from the heap. */
    uint64_t base_kb = eviction_burst_anon_kb(c, 100);
    for (uint64_t i = 1; i <= BURSTS; i++) {
        uint64_t kb = eviction_burst_anon_kb(c, 100 + i);
        ck_assert_msg(!RSS_FOLLOWS_FREE || kb <= base_kb + SLACK_KB,
                      "burst %" PRIu64 ": RssAnon %" PRIu64 " kB idle, %" PRIu64
                      " kB after the first",
                      i, kb, base_kb);
    }
    gf_client_close(c);
    stop();
}
END_TEST

/* SIGTERM while a pipelining client waits for a slot with more than the
 * read buffer queued behind it: every one of its frames is answered, in
 * order (the drain reads, answers and reads again; it must never read into
 * a full buffer nor take that for the client's end). */
START_TEST(sigterm_answers_a_waiting_pipeline) {
    enum { FRAMES = 60, BYTES = 1024, SLOW_BYTES_MAX = 1 << 20 };
    start(slow_json);
    /* Two slow frames hold both slots. */
    gf_client *busy = client();
    /* The values gf_test_sincos_ns measured with: zeros take a quarter of
     * the time the frames are sized for. */
    static unsigned char slow[SLOW_BYTES_MAX];
    uint64_t rng = 17;
    gf_test_fill_input(gf_pipeline_kind_find("sincos"), slow, sizeof slow, &rng);
    size_t slow_bytes =
        gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS, SLOW_FRAME_MS, SLOW_BYTES_MAX);
    for (uint64_t i = 0; i < 2; i++)
        ck_assert_int_eq(gf_client_send_frame(busy, 1, i, slow, slow_bytes), 0);
    ck_assert_int_eq(gf_client_flush(busy, 5000), 0);
    gf_client *c = client();
    gf_test_ck_wait_stat(c, "slots.in_flight", 2, UINT64_MAX, 2000);
    gf_client_close(c);
    int fd = raw_client();
    static unsigned char batch[FRAMES * (GF_HEADER_BYTES + BYTES)];
    for (unsigned i = 0; i < FRAMES; i++) {
        gf_header h = gf_test_header(GF_MSG_FRAME, i, 0, BYTES);
        gf_header_encode(&h, batch + i * (GF_HEADER_BYTES + BYTES));
    }
    ck_assert_int_eq(gf_test_raw_send(fd, batch, sizeof batch), 0);
    gf_test_sleep_ms(100); /* it waits for a slot, 60 KB queued */
    ck_assert_int_eq(gf_test_daemon_signal(&daemon_, SIGTERM), 0);
    char err[ERR_BYTES];
    static unsigned char payload[BYTES];
    for (unsigned i = 0; i < FRAMES; i++) {
        gf_header r;
        ck_assert_msg(gf_test_raw_recv_reply(fd, &r, payload, BYTES, 10000, err, sizeof err) == 0,
                      "frame %u: %s", i, err);
        ck_assert_uint_eq(r.frame_id, i);
        ck_assert_msg(r.type == GF_MSG_RESULT ||
                          (r.type == GF_MSG_ERROR && r.status == GF_ERR_SHUTTING_DOWN),
                      "frame %u: type %u status %u", i, r.type, r.status);
    }
    ck_assert_int_eq(gf_test_raw_expect_close(fd, 10000, NULL), 0);
    close(fd);
    gf_reply rep;
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(gf_client_recv(busy, &rep, 20000), 0);
    gf_client_close(busy);
    gf_test_ck_daemon_exited(&daemon_, gf_test_ck_daemon_wait(&daemon_, 20000), 0);
    gf_test_daemon_cleanup(&daemon_);
}
END_TEST

static Suite *fairness_suite(void) {
    Suite *s = suite_create("fairness");
    TCase *tc = tcase_create("fairness");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, stalled_small_payloads_hold_no_slot);
    tcase_add_loop_test(tc, stalled_large_payloads_time_out, 0, 2);
    tcase_add_loop_test(tc, pipelining_large_frames_never_wedge, 0, 2);
    tcase_add_test(tc, client_that_never_reads_is_closed);
    tcase_add_test(tc, a_bulk_client_leaves_a_slot_to_others);
    tcase_add_test(tc, idle_connection_is_closed);
    tcase_add_test(tc, connection_limits_are_answered);
    tcase_add_test(tc, allow_rules_refuse_and_admit);
    tcase_add_test(tc, unread_trace_flood_is_bounded);
    tcase_add_test(tc, evicted_results_memory_comes_back_when_idle);
    tcase_add_test(tc, sigterm_answers_a_waiting_pipeline);
    tcase_add_test(tc, sigterm_answers_every_frame_and_cuts_stalls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    g_sincos_ns = gf_test_sincos_ns();
    return gf_test_run(fairness_suite());
}

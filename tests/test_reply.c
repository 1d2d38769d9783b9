/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of replies (daemon/reply.h): the encoder's headers, the ERROR
 * sent at once, a reply's release; and the queue without a socket: what
 * one sendmsg would carry (the iovecs), what a partial write leaves, the
 * order replies leave in, and the counters that bound a connection's
 * output.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reply.h"
#include "runner.h"
#include "slots.h"
#include "wire.h"

static uint64_t total_loose, since_trim;
static gf_reply_queue q;

static void setup(void) {
    total_loose = since_trim = 0;
    gf_replyq_init(&q, &total_loose, &since_trim, NULL);
}

static char *text(const char *s) {
    char *t = malloc(strlen(s) + 1);
    ck_assert_ptr_nonnull(t);
    strcpy(t, s);
    return t;
}

/* A loose ERROR reply to frame `id` carrying `body`. */
static gf_reply *loose(uint64_t id, const char *body) {
    gf_header h = {.version = GF_PROTOCOL_VERSION, .frame_id = id};
    gf_reply *r = gf_reply_loose(GF_MSG_ERROR, &h, GF_ERR_BAD_LENGTH, text(body), strlen(body));
    ck_assert_ptr_nonnull(r);
    return r;
}

/* A frame's reply, not ready until made (make_result). */
static gf_reply *frame_reply(gf_frame *f) {
    memset(f, 0, sizeof *f);
    gf_link_init(&f->reply.link);
    f->reply.frame = f;
    return &f->reply;
}

/* Makes the frame reply `r` the result `out` of frame `id`. */
static void make_result(gf_reply *r, uint64_t id, const char *out) {
    gf_header req = {.version = GF_PROTOCOL_VERSION, .frame_id = id};
    gf_reply_result(r, &req, out, strlen(out), 0);
}

/* Concatenates what the iovecs would send. */
static size_t flatten(const struct iovec *iov, unsigned n, uint8_t *out) {
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    return len;
}

/* The frame id of the reply header at `bytes`. */
static uint64_t frame_id_at(const uint8_t *bytes) {
    gf_header h;
    gf_test_ck_reply_header(bytes, &h);
    return h.frame_id;
}

START_TEST(headers_answer_in_the_requests_version) {
    gf_reply r;
    gf_header h, req = {.version = GF_PROTOCOL_VERSION_MAX, .frame_id = 7, .pipeline_id = 3};
    uint8_t desc[GF_SHM_RESULT_BYTES] = {0};
    memset(&r, 0, sizeof r);
    gf_reply_result(&r, &req, desc, sizeof desc, GF_FLAG_SHM);
    ck_assert(r.ready);
    gf_test_ck_reply_header(r.header, &h);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_MAX);
    ck_assert_uint_eq(h.type, GF_MSG_RESULT);
    ck_assert_uint_eq(h.flags, GF_FLAG_SHM);
    ck_assert_uint_eq(h.frame_id, 7);
    ck_assert_uint_eq(h.pipeline_id, 3);
    ck_assert_uint_eq(h.payload_bytes, GF_SHM_RESULT_BYTES);
    ck_assert_ptr_eq(r.body, desc);
    /* A version the daemon does not speak is answered in version 1. */
    req.version = 99;
    memset(&r, 0, sizeof r);
    gf_reply_error(&r, &req, GF_ERR_BAD_VERSION, text("no"), 2);
    gf_test_ck_reply_header(r.header, &h);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION);
    ck_assert_uint_eq(h.type, GF_MSG_ERROR);
    ck_assert_uint_eq(h.status, GF_ERR_BAD_VERSION);
    ck_assert_uint_eq(h.payload_bytes, 2);
    ck_assert_ptr_eq(r.body, r.owned);
    free(r.owned);
}
END_TEST

/* An ERROR sent at once on a socket no queue serves: the same header, the
 * text cut at GF_ERROR_TEXT_MAX_BYTES. */
START_TEST(an_error_sent_at_once_is_one_header_and_its_text) {
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    gf_header h, req = {.version = GF_PROTOCOL_VERSION, .frame_id = 9, .pipeline_id = 2};
    gf_reply_send_error(sv[0], &req, GF_ERR_SHUTTING_DOWN, "stopping");
    char long_text[GF_ERROR_TEXT_MAX_BYTES + 100];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    gf_reply_send_error(sv[0], NULL, GF_ERR_TOO_MANY_CONNECTIONS, long_text);
    close(sv[0]);
    uint8_t got[2 * GF_HEADER_BYTES + 8 + GF_ERROR_TEXT_MAX_BYTES];
    size_t n = 0;
    ssize_t k;
    while ((k = read(sv[1], got + n, sizeof got - n)) > 0)
        n += (size_t)k;
    close(sv[1]);
    ck_assert_uint_eq(n, sizeof got);
    gf_test_ck_reply_header(got, &h);
    ck_assert_uint_eq(h.type, GF_MSG_ERROR);
    ck_assert_uint_eq(h.status, GF_ERR_SHUTTING_DOWN);
    ck_assert_uint_eq(h.frame_id, 9);
    ck_assert_uint_eq(h.pipeline_id, 2);
    ck_assert_uint_eq(h.payload_bytes, 8);
    ck_assert_mem_eq(got + GF_HEADER_BYTES, "stopping", 8);
    gf_test_ck_reply_header(got + GF_HEADER_BYTES + 8, &h);
    ck_assert_uint_eq(h.status, GF_ERR_TOO_MANY_CONNECTIONS);
    ck_assert_uint_eq(h.frame_id, 0);
    ck_assert_uint_eq(h.payload_bytes, GF_ERROR_TEXT_MAX_BYTES);
}
END_TEST

static int released, released_delivered;

static void count_release(gf_reply *r, int delivered) {
    ck_assert_ptr_eq(r->extra, &released);
    released++;
    released_delivered = delivered;
}

/* What a reply holds is let go once, when it is finished, and not at all
 * once it was answered. */
START_TEST(a_replys_release_runs_once_when_it_is_finished) {
    setup();
    gf_header req = {.version = GF_PROTOCOL_VERSION, .frame_id = 5, .type = GF_MSG_STATS};
    gf_reply *a = gf_reply_pending(&req, count_release, &released);
    gf_reply *b = gf_reply_pending(&req, count_release, &released);
    ck_assert(a && b && !a->ready);
    gf_replyq_push(&q, a, NULL);
    gf_replyq_push(&q, b, NULL);
    /* a is dropped before it is made: its release runs, once. */
    released = 0;
    gf_replyq_remove(a);
    gf_replyq_release(&q, a, 0);
    ck_assert_int_eq(released, 1);
    ck_assert_int_eq(released_delivered, 0);
    free(a);
    /* b is made: it holds nothing more, and goes out as a STATS of 2 bytes. */
    gf_replyq_answer(&q, b, GF_MSG_STATS, GF_OK, text("{}"), 2);
    ck_assert(b->ready);
    ck_assert_uint_eq(q.loose_bytes, 2);
    gf_header h;
    gf_test_ck_reply_header(b->header, &h);
    ck_assert_uint_eq(h.type, GF_MSG_STATS);
    ck_assert_uint_eq(h.frame_id, 5);
    ck_assert_uint_eq(h.payload_bytes, 2);
    gf_replyq_remove(b);
    gf_replyq_release(&q, b, 1);
    ck_assert_int_eq(released, 1);
    ck_assert_uint_eq(q.loose_bytes, 0);
    free(b);
}
END_TEST

/* Only the ready replies at the head go, in order, header then body. */
START_TEST(gather_takes_the_ready_head_in_order) {
    setup();
    gf_frame f;
    gf_replyq_push(&q, loose(1, "one"), NULL);
    gf_replyq_push(&q, frame_reply(&f), NULL);
    gf_replyq_push(&q, loose(3, "three"), NULL);
    struct iovec iov[2 * GF_WRITE_BATCH_MAX];
    uint8_t flat[512];
    /* The frame's reply is not ready: only the first goes. */
    unsigned n = gf_replyq_gather(&q, iov);
    ck_assert_uint_eq(n, 2);
    size_t len = flatten(iov, n, flat);
    ck_assert_uint_eq(len, GF_HEADER_BYTES + 3);
    ck_assert_uint_eq(frame_id_at(flat), 1);
    ck_assert_mem_eq(flat + GF_HEADER_BYTES, "one", 3);
    make_result(&f.reply, 2, "result");
    n = gf_replyq_gather(&q, iov);
    ck_assert_uint_eq(n, 6);
    len = flatten(iov, n, flat);
    ck_assert_uint_eq(len, 3 * GF_HEADER_BYTES + 3 + 6 + 5);
    ck_assert_uint_eq(frame_id_at(flat + GF_HEADER_BYTES + 3), 2);
    ck_assert_mem_eq(flat + 2 * GF_HEADER_BYTES + 3, "result", 6);
    ck_assert_uint_eq(frame_id_at(flat + 2 * GF_HEADER_BYTES + 9), 3);
    /* All three written: they leave in order, nothing partly written. */
    gf_link done;
    gf_list_init(&done);
    ck_assert_int_eq(gf_replyq_consume(&q, len, &done), 0);
    ck_assert_ptr_null(gf_replyq_head(&q));
    uint64_t want = 1;
    gf_link *l;
    while ((l = gf_list_pop_front(&done))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        ck_assert_uint_eq(frame_id_at(r->header), want++);
        gf_replyq_release(&q, r, 1);
        if (!r->frame)
            free(r);
    }
    ck_assert_uint_eq(q.unfinished, 0);
    ck_assert_uint_eq(q.loose_count, 0);
    ck_assert_uint_eq(total_loose, 0);
}
END_TEST

/* A write that stops inside a reply: the rest is sent from there, and a
 * reply leaves the queue only once written whole. */
START_TEST(a_partial_write_resumes_where_it_stopped) {
    setup();
    gf_replyq_push(&q, loose(1, "abcdef"), NULL);
    gf_replyq_push(&q, loose(2, "gh"), NULL);
    struct iovec iov[2 * GF_WRITE_BATCH_MAX];
    uint8_t all[256], flat[256];
    size_t total = flatten(iov, gf_replyq_gather(&q, iov), all);
    gf_link done;
    gf_list_init(&done);
    size_t sent = 0;
    /* Written in pieces of 5 bytes, cutting headers and bodies anywhere. */
    while (sent < total) {
        unsigned n = gf_replyq_gather(&q, iov);
        size_t len = flatten(iov, n, flat);
        ck_assert_uint_eq(len, total - sent);
        ck_assert_mem_eq(flat, all + sent, len);
        size_t piece = len < 5 ? len : 5;
        int partial = gf_replyq_consume(&q, piece, &done);
        sent += piece;
        ck_assert_int_eq(partial, sent < total && sent != GF_HEADER_BYTES + 6);
    }
    unsigned count = 0;
    gf_link *l;
    while ((l = gf_list_pop_front(&done))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        count++;
        gf_replyq_release(&q, r, 1);
        free(r);
    }
    ck_assert_uint_eq(count, 2);
    ck_assert_uint_eq(q.tx_offset, 0);
}
END_TEST

/* At most GF_WRITE_BATCH_MAX replies per sendmsg. */
START_TEST(one_batch_carries_at_most_the_batch_max) {
    setup();
    enum { N = GF_WRITE_BATCH_MAX + 3 };
    for (unsigned i = 0; i < N; i++)
        gf_replyq_push(&q, loose(i, "x"), NULL);
    struct iovec iov[2 * GF_WRITE_BATCH_MAX];
    ck_assert_uint_eq(gf_replyq_gather(&q, iov), 2 * GF_WRITE_BATCH_MAX);
    ck_assert_uint_eq(q.loose_count, N);
    ck_assert_uint_eq(q.loose_bytes, N);
    ck_assert_uint_eq(total_loose, N);
    ck_assert_uint_eq(since_trim, N);
    gf_link done;
    gf_list_init(&done);
    gf_replyq_consume(&q, (size_t)GF_WRITE_BATCH_MAX * (GF_HEADER_BYTES + 1), &done);
    unsigned left = 0;
    for (gf_reply *r; (r = gf_replyq_head(&q));) {
        gf_replyq_remove(r);
        gf_replyq_release(&q, r, 1);
        free(r);
        left++;
    }
    ck_assert_uint_eq(left, 3);
    gf_link *l;
    while ((l = gf_list_pop_front(&done))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        gf_replyq_release(&q, r, 1);
        free(r);
    }
    ck_assert_uint_eq(total_loose, 0);
    ck_assert_uint_eq(since_trim, N); /* only a trim resets it */
}
END_TEST

/* An evicted result takes its frame's place and is counted as loose. */
START_TEST(a_replacement_keeps_the_place_and_counts_as_loose) {
    setup();
    gf_frame f;
    gf_replyq_push(&q, loose(1, "a"), NULL);
    gf_reply *fr = frame_reply(&f);
    make_result(fr, 2, "result");
    gf_replyq_push(&q, fr, NULL);
    gf_replyq_push(&q, loose(3, "c"), NULL);
    ck_assert_uint_eq(q.unfinished, 3);
    ck_assert_uint_eq(q.loose_bytes, 2);
    gf_reply *copy =
        gf_reply_loose(GF_MSG_RESULT, &(gf_header){.frame_id = 2}, GF_OK, text("result"), 6);
    gf_replyq_replace(&q, fr, copy);
    gf_replyq_release(&q, fr, 0);
    ck_assert_uint_eq(q.unfinished, 3);
    ck_assert_uint_eq(q.loose_count, 3);
    ck_assert_uint_eq(q.loose_bytes, 8);
    ck_assert_uint_eq(total_loose, 8);
    uint64_t want[] = {1, 2, 3};
    int i = 0;
    for (gf_reply *r; (r = gf_replyq_head(&q)); i++) {
        ck_assert_uint_eq(frame_id_at(r->header), want[i]);
        gf_replyq_remove(r);
        gf_replyq_release(&q, r, 1);
        free(r);
    }
    ck_assert_int_eq(i, 3);
    ck_assert_uint_eq(total_loose, 0);
}
END_TEST

static Suite *reply_suite(void) {
    Suite *s = suite_create("reply");
    TCase *tc = tcase_create("reply");
    tcase_add_test(tc, headers_answer_in_the_requests_version);
    tcase_add_test(tc, an_error_sent_at_once_is_one_header_and_its_text);
    tcase_add_test(tc, a_replys_release_runs_once_when_it_is_finished);
    tcase_add_test(tc, gather_takes_the_ready_head_in_order);
    tcase_add_test(tc, a_partial_write_resumes_where_it_stopped);
    tcase_add_test(tc, one_batch_carries_at_most_the_batch_max);
    tcase_add_test(tc, a_replacement_keeps_the_place_and_counts_as_loose);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(reply_suite());
}

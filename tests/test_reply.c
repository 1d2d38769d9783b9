/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the reply queue (daemon/reply.h) without a socket: what one
 * sendmsg would carry (the iovecs), what a partial write leaves, the order
 * replies leave in, and the counters that bound a connection's output.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

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

/* A frame's reply, not ready until made so, whose result is `out`. */
static gf_reply *frame_reply(gf_frame *f, uint64_t id, const char *out) {
    memset(f, 0, sizeof *f);
    gf_link_init(&f->reply.link);
    f->reply.frame = f;
    f->reply.body = out;
    f->reply.body_bytes = strlen(out);
    gf_reply_header(f->reply.header, GF_PROTOCOL_VERSION, GF_MSG_RESULT, 0, id, 0, GF_OK,
                    strlen(out));
    return &f->reply;
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
    uint8_t b[GF_HEADER_BYTES];
    gf_header h;
    gf_reply_header(b, GF_PROTOCOL_VERSION_MAX, GF_MSG_RESULT, GF_FLAG_SHM, 7, 3, GF_OK,
                    GF_SHM_RESULT_BYTES);
    gf_test_ck_reply_header(b, &h);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_MAX);
    ck_assert_uint_eq(h.flags, GF_FLAG_SHM);
    ck_assert_uint_eq(h.frame_id, 7);
    ck_assert_uint_eq(h.pipeline_id, 3);
    ck_assert_uint_eq(h.payload_bytes, GF_SHM_RESULT_BYTES);
    /* A version the daemon does not speak is answered in version 1. */
    gf_reply_header(b, 99, GF_MSG_ERROR, 0, 7, 3, GF_ERR_BAD_VERSION, 0);
    gf_test_ck_reply_header(b, &h);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION);
}
END_TEST

/* Only the ready replies at the head go, in order, header then body. */
START_TEST(gather_takes_the_ready_head_in_order) {
    setup();
    gf_frame f;
    gf_replyq_push(&q, loose(1, "one"), NULL);
    gf_replyq_push(&q, frame_reply(&f, 2, "result"), NULL);
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
    f.reply.ready = 1;
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
        gf_replyq_release(&q, r);
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
        gf_replyq_release(&q, r);
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
        gf_replyq_release(&q, r);
        free(r);
        left++;
    }
    ck_assert_uint_eq(left, 3);
    gf_link *l;
    while ((l = gf_list_pop_front(&done))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        gf_replyq_release(&q, r);
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
    gf_reply *fr = frame_reply(&f, 2, "result");
    fr->ready = 1;
    gf_replyq_push(&q, fr, NULL);
    gf_replyq_push(&q, loose(3, "c"), NULL);
    ck_assert_uint_eq(q.unfinished, 3);
    ck_assert_uint_eq(q.loose_bytes, 2);
    gf_reply *copy =
        gf_reply_loose(GF_MSG_RESULT, &(gf_header){.frame_id = 2}, GF_OK, text("result"), 6);
    gf_replyq_replace(&q, fr, copy);
    gf_replyq_release(&q, fr);
    ck_assert_uint_eq(q.unfinished, 3);
    ck_assert_uint_eq(q.loose_count, 3);
    ck_assert_uint_eq(q.loose_bytes, 8);
    ck_assert_uint_eq(total_loose, 8);
    uint64_t want[] = {1, 2, 3};
    int i = 0;
    for (gf_reply *r; (r = gf_replyq_head(&q)); i++) {
        ck_assert_uint_eq(frame_id_at(r->header), want[i]);
        gf_replyq_remove(r);
        gf_replyq_release(&q, r);
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

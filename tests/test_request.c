/* SPDX-License-Identifier: MIT */
/*
 * Check suite for daemon/request.c, the request-stream decoder.  It links
 * gfprotocol and the decoder alone: no libuv, no engine, no daemon.
 *
 * One stream of seven requests (LIST, an accepted FRAME with payload, a
 * refused FRAME whose payload is skipped, an empty FRAME, STATS, TRACE, then
 * a FRAME over the size limit) is fed to a driver that behaves like a
 * connection: it keeps unconsumed bytes in a small buffer, accepts or refuses
 * each FRAME, and writes what it saw into a transcript.  The transcript must
 * be the same, to the byte, however the stream is cut: at every single point,
 * at every pair of points, and one byte at a time.
 */
#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "runner.h"
#include "wire.h"

/* Payloads larger than this are refused from the header (too_large). */
#define TEST_MAX_FRAME_BYTES 32u
/* FRAMEs to this pipeline are refused by the driver: their payload is skipped. */
#define REFUSED_PIPELINE 9u
/* The driver's buffer: like a connection's, one header plus a little payload. */
#define DRIVER_BUF_BYTES (GF_HEADER_BYTES + 8u)
/* Room for the stream and for the transcript. */
#define STREAM_MAX_BYTES     512u
#define TRANSCRIPT_MAX_BYTES 1024u

/* The driver runs tens of thousands of times: Check records every passing
 * ck_assert, so the driver checks with this and aborts only on failure. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond);                                  \
    } while (0)

/* The transcript every cut of the stream must produce. */
static const char expected[] = "H list 1\n"
                               "H frame 2 p0 5\n"
                               "P 2 abcde\n"
                               "H frame 3 p9 3 refused\n"
                               "H frame 4 p0 0\n"
                               "P 4 \n"
                               "H stats 5\n"
                               "H trace 6 p7\n"
                               "E too_large payload of 40 bytes exceeds max_frame_bytes 32\n";

static size_t put(uint8_t *buf, size_t at, uint8_t type, uint64_t id, uint32_t pipeline,
                  const char *payload, uint64_t payload_bytes) {
    gf_header h = gf_test_header(type, id, pipeline, payload_bytes);
    gf_header_encode(&h, buf + at);
    at += GF_HEADER_BYTES;
    if (payload) {
        memcpy(buf + at, payload, payload_bytes);
        at += payload_bytes;
    }
    return at;
}

/* The seven requests, as a client would send them; returns their length. */
static size_t make_stream(uint8_t *buf) {
    size_t n = 0;
    n = put(buf, n, GF_MSG_LIST, 1, 0, NULL, 0);
    n = put(buf, n, GF_MSG_FRAME, 2, 0, "abcde", 5);
    n = put(buf, n, GF_MSG_FRAME, 3, REFUSED_PIPELINE, "xyz", 3);
    n = put(buf, n, GF_MSG_FRAME, 4, 0, NULL, 0);
    n = put(buf, n, GF_MSG_STATS, 5, 0, NULL, 0);
    n = put(buf, n, GF_MSG_TRACE, 6, 7, NULL, 0);
    /* Its 40 payload bytes are never sent: the header alone is refused. */
    n = put(buf, n, GF_MSG_FRAME, 7, 0, NULL, 40);
    return n;
}

/* A connection's worth of state around the decoder. */
typedef struct driver {
    gf_request_decoder d;
    uint8_t buf[DRIVER_BUF_BYTES];
    size_t start, end;
    uint64_t frame_id; /* the accepted frame being received      */
    char payload[64];  /* its payload so far                     */
    size_t payload_len;
    char out[TRANSCRIPT_MAX_BYTES];
    size_t out_len;
    int failed; /* an ERROR was seen: the stream is over  */
} driver;

static void say(driver *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(driver *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v->out + v->out_len, sizeof v->out - v->out_len, fmt, ap);
    va_end(ap);
    REQUIRE(n >= 0);
    v->out_len += (size_t)n;
    REQUIRE(v->out_len < sizeof v->out);
}

static void on_header(driver *v, const gf_request *r) {
    const gf_header *h = &r->header;
    if (h->type != GF_MSG_FRAME) {
        say(v, "H %s %llu", gf_msg_type_name(h->type), (unsigned long long)h->frame_id);
        if (h->type == GF_MSG_TRACE)
            say(v, " p%u", h->pipeline_id);
        say(v, "\n");
        gf_request_accept(&v->d, r);
        return;
    }
    say(v, "H frame %llu p%u %llu", (unsigned long long)h->frame_id, h->pipeline_id,
        (unsigned long long)h->payload_bytes);
    if (h->pipeline_id == REFUSED_PIPELINE) {
        say(v, " refused\n");
        gf_request_refuse(&v->d, r);
        return;
    }
    say(v, "\n");
    gf_request_accept(&v->d, r);
    v->frame_id = h->frame_id;
    v->payload_len = 0;
    if (!gf_request_in_payload(&v->d))
        say(v, "P %llu \n", (unsigned long long)v->frame_id);
}

/* Decodes everything the buffer holds; what is left waits for more bytes. */
static void drain(driver *v) {
    while (!v->failed) {
        gf_request r;
        memset(&r, 0xEE, sizeof r);
        gf_request_next(&v->d, v->buf + v->start, v->end - v->start, &r);
        switch (r.kind) {
        case GF_REQ_MORE: REQUIRE(r.bytes == 0); return;
        case GF_REQ_HEADER:
            REQUIRE(r.bytes == GF_HEADER_BYTES);
            on_header(v, &r);
            break;
        case GF_REQ_PAYLOAD:
            REQUIRE(r.bytes > 0);
            memcpy(v->payload + v->payload_len, v->buf + v->start, r.bytes);
            v->payload_len += r.bytes;
            gf_request_advance(&v->d, r.bytes);
            if (!gf_request_in_payload(&v->d))
                say(v, "P %llu %.*s\n", (unsigned long long)v->frame_id, (int)v->payload_len,
                    v->payload);
            break;
        case GF_REQ_SKIP:
            REQUIRE(r.bytes > 0);
            gf_request_advance(&v->d, r.bytes);
            break;
        case GF_REQ_ERROR:
            REQUIRE(r.bytes == 0);
            say(v, "E %s %s\n", gf_status_name(r.status), r.text);
            v->failed = 1;
            return;
        }
        v->start += r.bytes;
    }
}

/* Feeds `len` bytes as a socket would deliver them into a bounded buffer. */
static void feed(driver *v, const uint8_t *p, size_t len) {
    while (len > 0 && !v->failed) {
        memmove(v->buf, v->buf + v->start, v->end - v->start);
        v->end -= v->start;
        v->start = 0;
        size_t room = sizeof v->buf - v->end;
        REQUIRE(room > 0); /* the driver never stops for a full buffer */
        size_t n = len < room ? len : room;
        memcpy(v->buf + v->end, p, n);
        v->end += n;
        p += n;
        len -= n;
        drain(v);
    }
}

static void driver_init(driver *v) {
    memset(v, 0, sizeof *v);
    gf_request_init(&v->d, TEST_MAX_FRAME_BYTES);
}

static void check_transcript(const driver *v, const char *where) {
    if (strcmp(v->out, expected) != 0)
        ck_abort_msg("%s: transcript\n%s\ndiffers from\n%s", where, v->out, expected);
}

START_TEST(whole_stream_at_once) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = make_stream(s);
    driver v;
    driver_init(&v);
    feed(&v, s, n);
    check_transcript(&v, "one piece");
}
END_TEST

START_TEST(stream_cut_at_every_point) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = make_stream(s);
    for (size_t i = 0; i <= n; i++) {
        driver v;
        driver_init(&v);
        feed(&v, s, i);
        feed(&v, s + i, n - i);
        char where[64];
        snprintf(where, sizeof where, "cut at %zu", i);
        check_transcript(&v, where);
    }
}
END_TEST

START_TEST(stream_cut_at_every_pair_of_points) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = make_stream(s);
    for (size_t i = 0; i <= n; i++)
        for (size_t j = i; j <= n; j++) {
            driver v;
            driver_init(&v);
            feed(&v, s, i);
            feed(&v, s + i, j - i);
            feed(&v, s + j, n - j);
            if (strcmp(v.out, expected) != 0)
                ck_abort_msg("cut at %zu and %zu: transcript\n%s", i, j, v.out);
        }
}
END_TEST

START_TEST(stream_one_byte_at_a_time) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = make_stream(s);
    driver v;
    driver_init(&v);
    for (size_t i = 0; i < n; i++)
        feed(&v, s + i, 1);
    check_transcript(&v, "bytewise");
}
END_TEST

/* A header the caller neither accepts nor refuses (no slot free) stays put. */
START_TEST(undecided_header_is_offered_again) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = put(s, 0, GF_MSG_FRAME, 42, 1, "hi", 2);
    gf_request_decoder d;
    gf_request_init(&d, TEST_MAX_FRAME_BYTES);
    gf_request a, b;
    gf_request_next(&d, s, n, &a);
    gf_request_next(&d, s, n, &b);
    ck_assert_int_eq(a.kind, GF_REQ_HEADER);
    ck_assert_int_eq(b.kind, GF_REQ_HEADER);
    ck_assert_uint_eq(b.header.frame_id, 42);
    ck_assert_uint_eq(b.header.payload_bytes, 2);
    gf_request_accept(&d, &b);
    gf_request_next(&d, s + GF_HEADER_BYTES, n - GF_HEADER_BYTES, &a);
    ck_assert_int_eq(a.kind, GF_REQ_PAYLOAD);
    ck_assert_uint_eq(a.bytes, 2);
}
END_TEST

/* Payload read out of band (straight into a slot) is reported by count. */
START_TEST(payload_taken_out_of_band) {
    uint8_t s[STREAM_MAX_BYTES];
    size_t n = put(s, 0, GF_MSG_FRAME, 1, 0, NULL, 30);
    n = put(s, n, GF_MSG_STATS, 2, 0, NULL, 0);
    gf_request_decoder d;
    gf_request_init(&d, TEST_MAX_FRAME_BYTES);
    gf_request r;
    gf_request_next(&d, s, GF_HEADER_BYTES, &r);
    ck_assert_int_eq(r.kind, GF_REQ_HEADER);
    gf_request_accept(&d, &r);
    ck_assert(gf_request_in_payload(&d));
    gf_request_next(&d, s, 0, &r);
    ck_assert_int_eq(r.kind, GF_REQ_MORE);
    gf_request_advance(&d, 29);
    ck_assert(gf_request_in_payload(&d));
    gf_request_advance(&d, 1);
    ck_assert(!gf_request_in_payload(&d));
    gf_request_next(&d, s + GF_HEADER_BYTES, GF_HEADER_BYTES, &r);
    ck_assert_int_eq(r.kind, GF_REQ_HEADER);
    ck_assert_uint_eq(r.header.type, GF_MSG_STATS);
    ck_assert_uint_eq(r.header.frame_id, 2);
}
END_TEST

/* Each protocol error's status and the exact text the client will read. */
START_TEST(error_texts) {
    uint8_t s[GF_HEADER_BYTES];
    gf_request_decoder d;
    gf_request r;
    gf_request_init(&d, TEST_MAX_FRAME_BYTES);

    put(s, 0, GF_MSG_LIST, 5, 0, NULL, 3);
    gf_request_next(&d, s, sizeof s, &r);
    ck_assert_int_eq(r.kind, GF_REQ_ERROR);
    ck_assert_uint_eq(r.status, GF_ERR_BAD_LENGTH);
    ck_assert_str_eq(r.text, "a list request carries no payload, got 3 bytes");
    ck_assert_uint_eq(r.header.frame_id, 5);

    put(s, 0, GF_MSG_RESULT, 6, 0, NULL, 0);
    gf_request_next(&d, s, sizeof s, &r);
    ck_assert_uint_eq(r.status, GF_ERR_BAD_TYPE);
    ck_assert_str_eq(r.text, "bad header: bad_type (magic 0x4d524647, version 1, type 2, "
                             "flags 0x0)");

    memcpy(s, "HTTP", 4);
    gf_request_next(&d, s, sizeof s, &r);
    ck_assert_uint_eq(r.status, GF_ERR_BAD_MAGIC);
    ck_assert_str_eq(r.text, "bad header: bad_magic (magic 0x50545448, version 1, type 2, "
                             "flags 0x0)");

    put(s, 0, GF_MSG_FRAME, 7, 0, NULL, TEST_MAX_FRAME_BYTES + 1);
    gf_request_next(&d, s, sizeof s, &r);
    ck_assert_uint_eq(r.status, GF_ERR_TOO_LARGE);
    ck_assert_str_eq(r.text, "payload of 33 bytes exceeds max_frame_bytes 32");

    /* Exactly the limit is fine. */
    put(s, 0, GF_MSG_FRAME, 8, 0, NULL, TEST_MAX_FRAME_BYTES);
    gf_request_next(&d, s, sizeof s, &r);
    ck_assert_int_eq(r.kind, GF_REQ_HEADER);
}
END_TEST

static Suite *request_suite(void) {
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("stream");
    tcase_add_test(tc, whole_stream_at_once);
    tcase_add_test(tc, stream_cut_at_every_point);
    tcase_add_test(tc, stream_cut_at_every_pair_of_points);
    tcase_add_test(tc, stream_one_byte_at_a_time);
    suite_add_tcase(s, tc);
    tc = tcase_create("calls");
    tcase_add_test(tc, undecided_header_is_offered_again);
    tcase_add_test(tc, payload_taken_out_of_band);
    tcase_add_test(tc, error_texts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(request_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Check suite for protocol/: header encode/decode, validation in wire order,
 * the two roles, code names, and the parser driven incrementally over a byte
 * stream split at every possible place.
 *
 * Expected bytes are written out by hand, never produced by the code under
 * test; the examples from PROTOCOL.md are checked here byte for byte.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "runner.h"
#include "wire.h"

/* The payload limit used where a test does not probe the limit itself. */
#define TEST_MAX_PAYLOAD_BYTES (1u << 20)
/* Seeds for the random-chunk stream test: one loop iteration each. */
#define STREAM_SEED_COUNT 500

/* Asserts that every field of two gf_header values is equal. */
#define ASSERT_HEADER_EQ(a, b)                                                                     \
    do {                                                                                           \
        ck_assert_uint_eq((a).version, (b).version);                                               \
        ck_assert_uint_eq((a).type, (b).type);                                                     \
        ck_assert_uint_eq((a).flags, (b).flags);                                                   \
        ck_assert_uint_eq((a).frame_id, (b).frame_id);                                             \
        ck_assert_uint_eq((a).pipeline_id, (b).pipeline_id);                                       \
        ck_assert_uint_eq((a).status, (b).status);                                                 \
        ck_assert_uint_eq((a).payload_bytes, (b).payload_bytes);                                   \
    } while (0)

/* Encodes `h` and parses it back as `role` into `*out`, which starts filled
 * with 0xEE bytes so that untouched fields show.  Returns the parse result. */
static int reparse(const gf_header *h, enum gf_parse_role role, uint64_t max_payload_bytes,
                   gf_header *out) {
    unsigned char buf[GF_HEADER_BYTES];

    gf_header_encode(h, buf);
    memset(out, 0xEE, sizeof *out);
    return gf_header_parse(buf, sizeof buf, role, max_payload_bytes, out);
}

/* PROTOCOL.md, "Worked example": FRAME 7 to pipeline 1 with 16 payload bytes. */
static const unsigned char doc_frame_header[GF_HEADER_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x01, 0x01, 0x00, 0x00, /* "GFRM", v1, FRAME, flags */
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* frame_id 7               */
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* pipeline 1, status 0     */
    0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* payload_bytes 16         */
};

/* PROTOCOL.md, "Worked example": its RESULT. */
static const unsigned char doc_result_header[GF_HEADER_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x01, 0x02, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* PROTOCOL.md, "Worked example": ERROR unknown_pipeline for frame 8, 25 bytes. */
static const unsigned char doc_error_header[GF_HEADER_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x01, 0x03, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x09, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* A header whose every field has distinct bytes, so that any byte-order or
 * offset mistake shows.  Not valid (flags != 0), on purpose. */
static const gf_header distinct_header = {
    .version = 1,
    .type = GF_MSG_RESULT,
    .flags = 0xA1A2,
    .frame_id = 0x0102030405060708u,
    .pipeline_id = 0x11121314u,
    .status = 0x21222324u,
    .payload_bytes = 0x3132333435363738u,
};
static const unsigned char distinct_bytes[GF_HEADER_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x01, 0x02, 0xA2, 0xA1, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
    0x14, 0x13, 0x12, 0x11, 0x24, 0x23, 0x22, 0x21, 0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,
};

/* A small deterministic PRNG (xorshift32) so that failures reproduce. */
static uint32_t next_random(uint32_t *state) {
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

/* ---- encode ------------------------------------------------------------- */

START_TEST(encode_exact_bytes) {
    unsigned char buf[GF_HEADER_BYTES];

    gf_header_encode(&distinct_header, buf);
    ck_assert_mem_eq(buf, distinct_bytes, GF_HEADER_BYTES);
}
END_TEST

START_TEST(encode_doc_examples) {
    unsigned char buf[GF_HEADER_BYTES];
    gf_header h = gf_test_header(GF_MSG_FRAME, 7, 1, 16);

    gf_header_encode(&h, buf);
    ck_assert_mem_eq(buf, doc_frame_header, GF_HEADER_BYTES);

    h.type = GF_MSG_RESULT;
    gf_header_encode(&h, buf);
    ck_assert_mem_eq(buf, doc_result_header, GF_HEADER_BYTES);

    h = gf_test_header(GF_MSG_ERROR, 8, 9, strlen("pipeline 9 does not exist"));
    h.status = GF_ERR_UNKNOWN_PIPELINE;
    gf_header_encode(&h, buf);
    ck_assert_mem_eq(buf, doc_error_header, GF_HEADER_BYTES);
}
END_TEST

START_TEST(encode_unaligned_writes_exactly_32_bytes) {
    unsigned char buf[GF_HEADER_BYTES + 16];
    unsigned char guard[8];

    memset(guard, 0xAA, sizeof guard);
    for (size_t off = 1; off < 8; off++) {
        memset(buf, 0xAA, sizeof buf);
        gf_header_encode(&distinct_header, buf + off);
        ck_assert_mem_eq(buf, guard, off);
        ck_assert_mem_eq(buf + off, distinct_bytes, GF_HEADER_BYTES);
        ck_assert_mem_eq(buf + off + GF_HEADER_BYTES, guard, 8);
    }
}
END_TEST

/* ---- parse: success ------------------------------------------------------ */

START_TEST(parse_exact_fields) {
    gf_header out;
    static const gf_header want = {1, GF_MSG_RESULT, 0, 7, 1, 0, 16};

    memset(&out, 0, sizeof out);
    ck_assert_int_eq(gf_header_parse(doc_result_header, GF_HEADER_BYTES, GF_ROLE_CLIENT,
                                     TEST_MAX_PAYLOAD_BYTES, &out),
                     GF_HEADER_BYTES);
    ASSERT_HEADER_EQ(out, want);

    /* All fields decode even from an invalid header (flags set). */
    ck_assert_int_eq(
        gf_header_parse(distinct_bytes, GF_HEADER_BYTES, GF_ROLE_CLIENT, UINT64_MAX, &out),
        -GF_ERR_BAD_FLAGS);
    ASSERT_HEADER_EQ(out, distinct_header);
}
END_TEST

START_TEST(parse_round_trip) {
    static const struct {
        enum gf_parse_role role;
        gf_header h;
    } cases[] = {
        {GF_ROLE_DAEMON, {1, GF_MSG_FRAME, 0, 0, 0, 0, 0}},
        {GF_ROLE_DAEMON, {1, GF_MSG_FRAME, 0, UINT64_MAX, UINT32_MAX, 0, UINT64_MAX}},
        {GF_ROLE_DAEMON, {1, GF_MSG_FRAME, 0, 0x8000000000000001u, 3, 0, 4096}},
        {GF_ROLE_DAEMON, {1, GF_MSG_LIST, 0, 42, 0, 0, 0}},
        {GF_ROLE_DAEMON, {1, GF_MSG_STATS, 0, 43, 17, 0, 0}},
        {GF_ROLE_CLIENT, {1, GF_MSG_RESULT, 0, 1, 2, 0, 1u << 30}},
        {GF_ROLE_CLIENT, {1, GF_MSG_ERROR, 0, 2, 3, GF_ERR_BAD_LENGTH, 40}},
        {GF_ROLE_CLIENT, {1, GF_MSG_ERROR, 0, 3, 4, GF_ERR_INTERNAL, 0}},
        {GF_ROLE_CLIENT, {1, GF_MSG_LIST, 0, 4, 0, 0, 300}},
        {GF_ROLE_CLIENT, {1, GF_MSG_STATS, 0, UINT64_MAX, UINT32_MAX, 0, UINT64_MAX}},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_header out;

        ck_assert_int_eq(reparse(&cases[i].h, cases[i].role, UINT64_MAX, &out), GF_HEADER_BYTES);
        ASSERT_HEADER_EQ(out, cases[i].h);
    }
}
END_TEST

START_TEST(parse_consumes_only_the_header) {
    unsigned char buf[GF_HEADER_BYTES + 16];
    gf_header out;

    memcpy(buf, doc_frame_header, GF_HEADER_BYTES);
    memset(buf + GF_HEADER_BYTES, 0x47, 16); /* payload that starts like "GG..." */
    ck_assert_int_eq(gf_header_parse(buf, sizeof buf, GF_ROLE_DAEMON, 16, &out), GF_HEADER_BYTES);
    ck_assert_uint_eq(out.frame_id, 7);
    ck_assert_uint_eq(out.payload_bytes, 16);
}
END_TEST

START_TEST(parse_unaligned) {
    unsigned char buf[GF_HEADER_BYTES + 8];

    for (size_t off = 0; off < 8; off++) {
        gf_header out;

        memset(buf, 0, sizeof buf);
        memcpy(buf + off, distinct_bytes, GF_HEADER_BYTES);
        ck_assert_int_eq(
            gf_header_parse(buf + off, GF_HEADER_BYTES, GF_ROLE_CLIENT, UINT64_MAX, &out),
            -GF_ERR_BAD_FLAGS);
        ASSERT_HEADER_EQ(out, distinct_header);
    }
}
END_TEST

/* Any 32 bytes decode losslessly: re-encoding the decoded fields gives the
 * same bytes (the magic aside, which encode always writes as GF_MAGIC). */
START_TEST(parse_decodes_every_byte) {
    uint32_t seed = 0x9E3779B9u;

    for (int round = 0; round < 10000; round++) {
        unsigned char in[GF_HEADER_BYTES], again[GF_HEADER_BYTES];
        gf_header out;

        for (size_t i = 0; i < GF_HEADER_BYTES; i++)
            in[i] = (unsigned char)next_random(&seed);
        if (round % 2 == 0)
            memcpy(in, doc_frame_header, 6); /* get past magic, version, type */
        int rc =
            gf_header_parse(in, sizeof in, (enum gf_parse_role)(round % 4 < 2), UINT64_MAX, &out);
        ck_assert_int_ne(rc, 0);
        gf_header_encode(&out, again);
        ck_assert_mem_eq(again + 4, in + 4, GF_HEADER_BYTES - 4);
        if (rc != -GF_ERR_BAD_MAGIC)
            ck_assert_mem_eq(again, in, 4);
    }
}
END_TEST

/* ---- parse: need more ----------------------------------------------------- */

START_TEST(parse_short_needs_more) {
    unsigned char garbage[GF_HEADER_BYTES];
    gf_header out, sentinel;

    memset(garbage, 0xFF, sizeof garbage);
    memset(&sentinel, 0x5A, sizeof sentinel);
    for (size_t len = 0; len < GF_HEADER_BYTES; len++) {
        for (int role = GF_ROLE_DAEMON; role <= GF_ROLE_CLIENT; role++) {
            out = sentinel;
            ck_assert_int_eq(
                gf_header_parse(doc_frame_header, len, (enum gf_parse_role)role, UINT64_MAX, &out),
                0);
            ck_assert_mem_eq(&out, &sentinel, sizeof out);
            /* Nothing is checked before the whole header is there. */
            ck_assert_int_eq(gf_header_parse(garbage, len, (enum gf_parse_role)role, 0, &out), 0);
            ck_assert_mem_eq(&out, &sentinel, sizeof out);
        }
    }
    ck_assert_int_eq(gf_header_parse(NULL, 0, GF_ROLE_DAEMON, 0, &out), 0);
    ck_assert_mem_eq(&out, &sentinel, sizeof out);
}
END_TEST

/* ---- parse: errors ---------------------------------------------------------- */

START_TEST(parse_bad_magic) {
    static const unsigned char swapped[4] = {'M', 'R', 'F', 'G'}; /* big-endian writer */
    unsigned char buf[GF_HEADER_BYTES];
    gf_header out;

    for (size_t i = 0; i < 4; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            memcpy(buf, doc_frame_header, sizeof buf);
            buf[i] ^= (unsigned char)(1u << bit);
            memset(&out, 0, sizeof out);
            ck_assert_int_eq(gf_header_parse(buf, sizeof buf, GF_ROLE_DAEMON, 16, &out),
                             -GF_ERR_BAD_MAGIC);
            ck_assert_uint_eq(out.frame_id, 7);
            ck_assert_uint_eq(out.pipeline_id, 1);
            ck_assert_uint_eq(out.payload_bytes, 16);
        }
    }
    memcpy(buf, doc_result_header, sizeof buf);
    memcpy(buf, swapped, 4);
    ck_assert_int_eq(gf_header_parse(buf, sizeof buf, GF_ROLE_CLIENT, 16, &out), -GF_ERR_BAD_MAGIC);
    ck_assert_uint_eq(out.frame_id, 7);
}
END_TEST

START_TEST(parse_bad_version) {
    static const uint8_t versions[] = {0, GF_PROTOCOL_VERSION_MAX + 1, 6, 0x81, 0xFF};

    for (size_t i = 0; i < sizeof versions; i++) {
        for (int role = GF_ROLE_DAEMON; role <= GF_ROLE_CLIENT; role++) {
            gf_header h = gf_test_header(role == GF_ROLE_DAEMON ? GF_MSG_FRAME : GF_MSG_RESULT,
                                         100 + i, 5, 8);
            gf_header out;

            h.version = versions[i];
            ck_assert_int_eq(reparse(&h, (enum gf_parse_role)role, 8, &out), -GF_ERR_BAD_VERSION);
            ASSERT_HEADER_EQ(out, h);
        }
    }
}
END_TEST

/* Every one of the 256 type bytes, in both roles. */
START_TEST(parse_types_by_role) {
    for (unsigned type = 0; type <= 0xFF; type++) {
        int daemon_ok = type == GF_MSG_FRAME || type == GF_MSG_LIST || type == GF_MSG_STATS ||
                        type == GF_MSG_TRACE;
        int client_ok = type == GF_MSG_RESULT || type == GF_MSG_ERROR || type == GF_MSG_LIST ||
                        type == GF_MSG_STATS || type == GF_MSG_TRACE;
        gf_header h = gf_test_header((uint8_t)type, 0xABCDEF00u + type, 2, 0);
        gf_header out;

        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out),
                         daemon_ok ? (int)GF_HEADER_BYTES : -GF_ERR_BAD_TYPE);
        ASSERT_HEADER_EQ(out, h);
        ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 0, &out),
                         client_ok ? (int)GF_HEADER_BYTES : -GF_ERR_BAD_TYPE);
        ASSERT_HEADER_EQ(out, h);
    }
}
END_TEST

START_TEST(parse_role_differences) {
    gf_header out;
    gf_header result = gf_test_header(GF_MSG_RESULT, 11, 0, 4);
    gf_header error = gf_test_header(GF_MSG_ERROR, 12, 0, 4);
    gf_header frame = gf_test_header(GF_MSG_FRAME, 13, 0, 4);

    error.status = GF_ERR_ENGINE;
    ck_assert_int_eq(reparse(&result, GF_ROLE_DAEMON, 4, &out), -GF_ERR_BAD_TYPE);
    ck_assert_uint_eq(out.frame_id, 11);
    ck_assert_int_eq(reparse(&error, GF_ROLE_DAEMON, 4, &out), -GF_ERR_BAD_TYPE);
    ck_assert_uint_eq(out.frame_id, 12);
    ck_assert_int_eq(reparse(&frame, GF_ROLE_CLIENT, 4, &out), -GF_ERR_BAD_TYPE);
    ck_assert_uint_eq(out.frame_id, 13);

    ck_assert_int_eq(reparse(&result, GF_ROLE_CLIENT, 4, &out), GF_HEADER_BYTES);
    ck_assert_int_eq(reparse(&error, GF_ROLE_CLIENT, 4, &out), GF_HEADER_BYTES);
    ck_assert_uint_eq(out.status, GF_ERR_ENGINE);
    ck_assert_int_eq(reparse(&frame, GF_ROLE_DAEMON, 4, &out), GF_HEADER_BYTES);
}
END_TEST

START_TEST(parse_flags_must_be_zero) {
    for (unsigned bit = 0; bit < 16; bit++) {
        gf_header frame = gf_test_header(GF_MSG_FRAME, 20 + bit, 1, 0);
        gf_header result = gf_test_header(GF_MSG_RESULT, 40 + bit, 1, 0);
        gf_header out;

        frame.flags = (uint16_t)(1u << bit);
        result.flags = (uint16_t)(1u << bit);
        ck_assert_int_eq(reparse(&frame, GF_ROLE_DAEMON, 0, &out), -GF_ERR_BAD_FLAGS);
        ASSERT_HEADER_EQ(out, frame);
        ck_assert_int_eq(reparse(&result, GF_ROLE_CLIENT, 0, &out), -GF_ERR_BAD_FLAGS);
        ASSERT_HEADER_EQ(out, result);
    }
}
END_TEST

START_TEST(parse_request_status_must_be_zero) {
    static const uint32_t statuses[] = {1, GF_ERR_INTERNAL, 0x100, 0x80000000u, UINT32_MAX};

    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        static const uint8_t types[] = {GF_MSG_FRAME, GF_MSG_LIST, GF_MSG_STATS};

        for (size_t t = 0; t < sizeof types; t++) {
            gf_header h = gf_test_header(types[t], 60 + i, 0, 0);
            gf_header out;

            h.status = statuses[i];
            ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), -GF_ERR_BAD_FLAGS);
            ASSERT_HEADER_EQ(out, h);
        }
    }
}
END_TEST

/* The client role leaves status alone: codes from a newer daemon pass. */
START_TEST(parse_reply_status_unchecked) {
    static const uint32_t statuses[] = {GF_OK, GF_ERR_BAD_MAGIC, GF_ERR_INTERNAL, GF_STATUS_COUNT_,
                                        UINT32_MAX};

    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        gf_header h = gf_test_header(GF_MSG_ERROR, 80 + i, 0, 10);
        gf_header out;

        h.status = statuses[i];
        ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 10, &out), GF_HEADER_BYTES);
        ASSERT_HEADER_EQ(out, h);
    }
}
END_TEST

START_TEST(parse_max_payload_boundary) {
    static const uint64_t maxima[] = {
        0, 1, 4096, TEST_MAX_PAYLOAD_BYTES, UINT32_MAX, UINT64_MAX - 1};

    for (size_t i = 0; i < sizeof maxima / sizeof maxima[0]; i++) {
        gf_header frame = gf_test_header(GF_MSG_FRAME, 90 + i, 3, maxima[i]);
        gf_header result = gf_test_header(GF_MSG_RESULT, 90 + i, 3, maxima[i]);
        gf_header out;

        ck_assert_int_eq(reparse(&frame, GF_ROLE_DAEMON, maxima[i], &out), GF_HEADER_BYTES);
        ck_assert_int_eq(reparse(&result, GF_ROLE_CLIENT, maxima[i], &out), GF_HEADER_BYTES);

        frame.payload_bytes = maxima[i] + 1;
        result.payload_bytes = maxima[i] + 1;
        ck_assert_int_eq(reparse(&frame, GF_ROLE_DAEMON, maxima[i], &out), -GF_ERR_TOO_LARGE);
        ASSERT_HEADER_EQ(out, frame);
        ck_assert_int_eq(reparse(&result, GF_ROLE_CLIENT, maxima[i], &out), -GF_ERR_TOO_LARGE);
        ASSERT_HEADER_EQ(out, result);
    }

    /* The largest payload_bytes on the wire is fine when nothing limits it. */
    gf_header frame = gf_test_header(GF_MSG_FRAME, 1, 0, UINT64_MAX);
    gf_header out;
    ck_assert_int_eq(reparse(&frame, GF_ROLE_DAEMON, UINT64_MAX, &out), GF_HEADER_BYTES);
    ck_assert_uint_eq(out.payload_bytes, UINT64_MAX);
}
END_TEST

START_TEST(parse_error_text_limit) {
    gf_header error = gf_test_header(GF_MSG_ERROR, 5, 0, GF_ERROR_TEXT_MAX_BYTES);
    gf_header result = gf_test_header(GF_MSG_RESULT, 6, 0, GF_ERROR_TEXT_MAX_BYTES + 1);
    gf_header out;

    error.status = GF_ERR_ENGINE;
    ck_assert_int_eq(reparse(&error, GF_ROLE_CLIENT, UINT64_MAX, &out), GF_HEADER_BYTES);
    error.payload_bytes = GF_ERROR_TEXT_MAX_BYTES + 1;
    ck_assert_int_eq(reparse(&error, GF_ROLE_CLIENT, UINT64_MAX, &out), -GF_ERR_TOO_LARGE);
    ASSERT_HEADER_EQ(out, error);
    /* Only ERROR is capped; the caller's own limit still applies first. */
    ck_assert_int_eq(reparse(&result, GF_ROLE_CLIENT, UINT64_MAX, &out), GF_HEADER_BYTES);
    error.payload_bytes = 100;
    ck_assert_int_eq(reparse(&error, GF_ROLE_CLIENT, 99, &out), -GF_ERR_TOO_LARGE);
}
END_TEST

START_TEST(parse_list_stats_with_payload) {
    static const uint8_t types[] = {GF_MSG_LIST, GF_MSG_STATS, GF_MSG_TRACE};

    for (size_t t = 0; t < sizeof types; t++) {
        gf_header h = gf_test_header(types[t], 70 + t, 0, 1);
        gf_header out;

        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, TEST_MAX_PAYLOAD_BYTES, &out),
                         -GF_ERR_BAD_LENGTH);
        ASSERT_HEADER_EQ(out, h);
        ck_assert(!gf_status_is_fatal(GF_ERR_BAD_LENGTH));

        /* Over the limit: TOO_LARGE comes first, in wire order. */
        h.payload_bytes = TEST_MAX_PAYLOAD_BYTES + 1;
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, TEST_MAX_PAYLOAD_BYTES, &out),
                         -GF_ERR_TOO_LARGE);

        /* The same type as a reply carries its JSON. */
        h.payload_bytes = 1000;
        ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, TEST_MAX_PAYLOAD_BYTES, &out),
                         GF_HEADER_BYTES);
        ASSERT_HEADER_EQ(out, h);
    }
}
END_TEST

/* One header with every problem at once; repairing them one by one in wire
 * order must surface each code in turn. */
START_TEST(parse_checks_in_wire_order) {
    unsigned char buf[GF_HEADER_BYTES];
    gf_header h = {
        .version = 9,
        .type = GF_MSG_RESULT, /* not a request */
        .flags = 1,
        .frame_id = 0xFEEDu,
        .pipeline_id = 4,
        .status = 3,
        .payload_bytes = 11,
    };
    gf_header out;

    gf_header_encode(&h, buf);
    buf[0] = 'X';
    ck_assert_int_eq(gf_header_parse(buf, sizeof buf, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_MAGIC);
    ASSERT_HEADER_EQ(out, h);

    h.type = GF_MSG_LIST; /* a request, but with a payload */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_VERSION);
    h.version = GF_PROTOCOL_VERSION;
    h.type = GF_MSG_RESULT;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_TYPE);
    h.type = GF_MSG_LIST;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_FLAGS);
    h.flags = 0;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_FLAGS);
    h.status = 0;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_TOO_LARGE);
    h.payload_bytes = 10;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), -GF_ERR_BAD_LENGTH);
    h.payload_bytes = 0;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 10, &out), GF_HEADER_BYTES);
    ASSERT_HEADER_EQ(out, h);
    ck_assert_uint_eq(out.frame_id, 0xFEEDu);
}
END_TEST

/* ---- version 2: shared-memory regions (PROTOCOL.md, "Shared-memory frames") -- */

/* The example of PROTOCOL.md, byte for byte. */
static const unsigned char doc_region_add[GF_HEADER_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x02, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const unsigned char doc_region_reply[GF_HEADER_BYTES + GF_REGION_INFO_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x02, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00};
static const unsigned char doc_shm_frame[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x02, 0x01, 0x01, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const unsigned char doc_shm_result[GF_HEADER_BYTES + GF_SHM_RESULT_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x02, 0x02, 0x01, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

START_TEST(shm_examples_byte_exact) {
    unsigned char buf[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES];
    gf_header h = {.version = GF_PROTOCOL_VERSION_SHM, .type = GF_MSG_REGION_ADD}, out;

    gf_header_encode(&h, buf);
    ck_assert_mem_eq(buf, doc_region_add, GF_HEADER_BYTES);
    ck_assert_int_eq(gf_header_parse(doc_region_add, GF_HEADER_BYTES, GF_ROLE_DAEMON, 0, &out),
                     GF_HEADER_BYTES);

    h.payload_bytes = GF_REGION_INFO_BYTES;
    gf_header_encode(&h, buf);
    gf_region_info info = {.region_id = 1, .flags = GF_REGION_PINNED, .region_bytes = 1u << 20};
    gf_region_info_encode(&info, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_region_reply, sizeof doc_region_reply);
    ck_assert_int_eq(gf_header_parse(doc_region_reply, GF_HEADER_BYTES, GF_ROLE_CLIENT, 64, &out),
                     GF_HEADER_BYTES);
    gf_region_info back;
    gf_region_info_decode(doc_region_reply + GF_HEADER_BYTES, &back);
    ck_assert_uint_eq(back.region_id, 1);
    ck_assert_uint_eq(back.flags, GF_REGION_PINNED);
    ck_assert_uint_eq(back.region_bytes, 1u << 20);

    h = (gf_header){.version = GF_PROTOCOL_VERSION_SHM,
                    .type = GF_MSG_FRAME,
                    .flags = GF_FLAG_SHM,
                    .frame_id = 9,
                    .payload_bytes = GF_SHM_FRAME_BYTES};
    gf_header_encode(&h, buf);
    gf_shm_frame f = {.region_id = 1,
                      .in_offset = 0,
                      .in_bytes = 4096,
                      .out_offset = 524288,
                      .out_capacity = 4096};
    gf_shm_frame_encode(&f, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_shm_frame, sizeof doc_shm_frame);
    ck_assert_int_eq(
        gf_header_parse(doc_shm_frame, GF_HEADER_BYTES, GF_ROLE_DAEMON, 1u << 20, &out),
        GF_HEADER_BYTES);
    gf_shm_frame fb;
    ck_assert_int_eq(gf_shm_frame_decode(doc_shm_frame + GF_HEADER_BYTES, &fb), 0);
    ck_assert_uint_eq(fb.in_bytes, 4096);
    ck_assert_uint_eq(fb.out_offset, 524288);

    h.type = GF_MSG_RESULT;
    h.payload_bytes = GF_SHM_RESULT_BYTES;
    gf_header_encode(&h, buf);
    gf_shm_result r = {.region_id = 1, .out_offset = 524288, .out_bytes = 4096};
    gf_shm_result_encode(&r, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_shm_result, sizeof doc_shm_result);
    ck_assert_int_eq(gf_header_parse(doc_shm_result, GF_HEADER_BYTES, GF_ROLE_CLIENT, 64, &out),
                     GF_HEADER_BYTES);
    gf_shm_result rb;
    ck_assert_int_eq(gf_shm_result_decode(doc_shm_result + GF_HEADER_BYTES, &rb), 0);
    ck_assert_uint_eq(rb.out_bytes, 4096);
}
END_TEST

/* ---- version 4: device regions (PROTOCOL.md, "Device frames") ------------------ */

/* PROTOCOL.md's example: a DEVICE_REGION_ADD of 2 MiB with its POSIX fd. */
static const unsigned char doc_device_region_add[GF_HEADER_BYTES + GF_DEVICE_REGION_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x04, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
/* Its reply: region 1, device, 2 MiB. */
static const unsigned char doc_device_region_reply[GF_HEADER_BYTES + GF_REGION_INFO_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x04, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00};
/* Frame 5, pipeline 1, on device region 1: 4096 bytes at 0, out at 1 MiB. */
static const unsigned char doc_device_frame[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES] = {
    0x47, 0x46, 0x52, 0x4D, 0x04, 0x01, 0x02, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

START_TEST(device_examples_byte_exact) {
    unsigned char buf[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES];
    gf_header h = {.version = GF_PROTOCOL_VERSION_DEVICE,
                   .type = GF_MSG_DEVICE_REGION_ADD,
                   .payload_bytes = GF_DEVICE_REGION_BYTES},
              out;
    gf_header_encode(&h, buf);
    gf_device_region d = {.region_bytes = 2u << 20, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    gf_device_region_encode(&d, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_device_region_add, sizeof doc_device_region_add);
    ck_assert_int_eq(
        gf_header_parse(doc_device_region_add, GF_HEADER_BYTES, GF_ROLE_DAEMON, 64, &out),
        GF_HEADER_BYTES);
    ck_assert_uint_eq(out.payload_bytes, GF_DEVICE_REGION_BYTES);
    gf_device_region db;
    ck_assert_int_eq(gf_device_region_decode(doc_device_region_add + GF_HEADER_BYTES, &db), 0);
    ck_assert_uint_eq(db.region_bytes, 2u << 20);
    ck_assert_uint_eq(db.handle_type, GF_DEVICE_HANDLE_POSIX_FD);

    gf_header_encode(&h, buf); /* the reply: same header, 16 bytes of region info */
    gf_region_info info = {.region_id = 1, .flags = GF_REGION_DEVICE, .region_bytes = 2u << 20};
    gf_region_info_encode(&info, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_device_region_reply, sizeof doc_device_region_reply);
    ck_assert_int_eq(
        gf_header_parse(doc_device_region_reply, GF_HEADER_BYTES, GF_ROLE_CLIENT, 64, &out),
        GF_HEADER_BYTES);

    h = (gf_header){.version = GF_PROTOCOL_VERSION_DEVICE,
                    .type = GF_MSG_FRAME,
                    .flags = GF_FLAG_DEVICE,
                    .frame_id = 5,
                    .pipeline_id = 1,
                    .payload_bytes = GF_SHM_FRAME_BYTES};
    gf_header_encode(&h, buf);
    gf_shm_frame f = {.region_id = 1,
                      .in_offset = 0,
                      .in_bytes = 4096,
                      .out_offset = 1u << 20,
                      .out_capacity = 4096};
    gf_shm_frame_encode(&f, buf + GF_HEADER_BYTES);
    ck_assert_mem_eq(buf, doc_device_frame, sizeof doc_device_frame);
    ck_assert_int_eq(gf_header_parse(doc_device_frame, GF_HEADER_BYTES, GF_ROLE_DAEMON, 64, &out),
                     GF_HEADER_BYTES);
    ck_assert_uint_eq(out.flags, GF_FLAG_DEVICE);
}
END_TEST

/* What version 4 allows and where. */
START_TEST(device_header_rules) {
    gf_header h, out;
    /* DEVICE_REGION_ADD: version 4 only, in both roles, 16 bytes exactly. */
    for (uint8_t v = 1; v <= 2; v++) {
        h = gf_test_header(GF_MSG_DEVICE_REGION_ADD, 1, 0, GF_DEVICE_REGION_BYTES);
        h.version = v;
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_TYPE);
        ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 64, &out), -GF_ERR_BAD_TYPE);
    }
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), GF_HEADER_BYTES);
    h.payload_bytes = 0; /* no size, no handle type */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_LENGTH);
    h.payload_bytes = GF_DEVICE_REGION_BYTES + 1;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_LENGTH);
    h.payload_bytes = GF_REGION_INFO_BYTES - 1; /* the reply's info has one size */
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 64, &out), -GF_ERR_BAD_LENGTH);
    h.flags = GF_FLAG_DEVICE; /* flags are a FRAME's and a RESULT's */
    h.payload_bytes = GF_DEVICE_REGION_BYTES;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_FLAGS);

    /* The DEVICE flag: version 4 FRAMEs and RESULTs, never with SHM. */
    h = gf_test_header(GF_MSG_FRAME, 2, 0, GF_SHM_FRAME_BYTES);
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    h.flags = GF_FLAG_DEVICE;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_SHM; /* version 4 keeps version 2's frames by reference */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_SHM | GF_FLAG_DEVICE;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_FLAGS);
    h.flags = GF_FLAG_DEVICE;
    h.payload_bytes = 4096; /* a device frame carries its descriptor, not its bytes */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_LENGTH);
    h = gf_test_header(GF_MSG_RESULT, 3, 0, GF_SHM_RESULT_BYTES);
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    h.flags = GF_FLAG_DEVICE;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 64, &out), GF_HEADER_BYTES);
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_TYPE);
    h.payload_bytes = 4096;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 1u << 20, &out), -GF_ERR_BAD_LENGTH);
    /* REGION_REMOVE removes either kind, in version 2 or 4. */
    h = gf_test_header(GF_MSG_REGION_REMOVE, 4, 7, 0);
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), GF_HEADER_BYTES);
    /* Version 3 keeps REGION_REMOVE but has no device messages or flag. */
    h.version = GF_PROTOCOL_VERSION_SCHED;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), GF_HEADER_BYTES);
    ck_assert(gf_version_known(3) && gf_version_known(4) && !gf_version_known(5));
    h = gf_test_header(GF_MSG_FRAME, 5, 0, GF_SHM_FRAME_BYTES);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = GF_FLAG_DEVICE | GF_FLAG_LATEST;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_FLAGS);
    h = gf_test_header(GF_MSG_DEVICE_REGION_ADD, 5, 0, GF_DEVICE_REGION_BYTES);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_TYPE);

    /* Version 4 is a superset of 3: a device frame (or a frame by value, or
     * by shm) with a deadline in `status` and newest-only; a status without
     * DEADLINE stays bad_flags, and the scheduling flags never on a RESULT. */
    h = gf_test_header(GF_MSG_FRAME, 6, 1, GF_SHM_FRAME_BYTES);
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    h.flags = GF_FLAG_DEVICE | GF_FLAG_DEADLINE | GF_FLAG_LATEST;
    h.status = 0x12345678u;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), GF_HEADER_BYTES);
    ck_assert_uint_eq(out.flags, 0x0302u);
    ck_assert_uint_eq(out.status, 0x12345678u);
    /* The priority class (0x0C00) too, as on a version-3 frame. */
    h.flags = (uint16_t)(GF_FLAG_DEVICE | GF_FLAG_DEADLINE | GF_CLASS_BATCH << GF_FLAG_CLASS_SHIFT);
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), GF_HEADER_BYTES);
    ck_assert_uint_eq(out.flags, 0x0D02u);
    h.flags = GF_FLAG_DEVICE | GF_FLAG_LATEST; /* a status, but no deadline */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_FLAGS);
    h.status = 0;
    h.payload_bytes = 4096; /* still its descriptor, whatever else it says */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_LENGTH);
    h.flags = GF_FLAG_DEADLINE; /* by value, with a deadline, in version 4 */
    h.status = 7;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_SHM | GF_FLAG_DEVICE | GF_FLAG_LATEST;
    h.payload_bytes = GF_SHM_FRAME_BYTES;
    h.status = 0;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 64, &out), -GF_ERR_BAD_FLAGS);
    h = gf_test_header(GF_MSG_RESULT, 6, 1, GF_SHM_RESULT_BYTES);
    h.version = GF_PROTOCOL_VERSION_DEVICE;
    h.flags = GF_FLAG_DEVICE | GF_FLAG_LATEST;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 64, &out), -GF_ERR_BAD_FLAGS);

    /* Reserved bytes of the payload must be zero. */
    unsigned char d[GF_DEVICE_REGION_BYTES] = {0};
    gf_device_region dr;
    d[15] = 1;
    ck_assert_int_eq(gf_device_region_decode(d, &dr), -GF_ERR_BAD_REGION);
}
END_TEST

/* What version 2 allows and where: every other use is refused in wire order. */
START_TEST(shm_header_rules) {
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, 0, GF_SHM_FRAME_BYTES), out;
    h.flags = GF_FLAG_SHM; /* version 1: no flags at all */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
    h.version = GF_PROTOCOL_VERSION_SHM;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_DEVICE; /* version 4's */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
    h.flags = 0x0004; /* an unknown bit */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
    h.flags = GF_FLAG_SHM;
    h.payload_bytes = GF_SHM_FRAME_BYTES + 1; /* a descriptor has one size */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_LENGTH);
    h.payload_bytes = 1u << 21; /* too_large comes first, in wire order */
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_TOO_LARGE);
    /* SHM only on FRAME (daemon) and RESULT (client). */
    h = gf_test_header(GF_MSG_LIST, 2, 0, 0);
    h.version = GF_PROTOCOL_VERSION_SHM;
    h.flags = GF_FLAG_SHM;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), -GF_ERR_BAD_FLAGS);
    h = gf_test_header(GF_MSG_RESULT, 3, 0, GF_SHM_RESULT_BYTES - 1);
    h.version = GF_PROTOCOL_VERSION_SHM;
    h.flags = GF_FLAG_SHM;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 64, &out), -GF_ERR_BAD_LENGTH);
    /* The region messages are version 2 only, and take no payload. */
    for (uint8_t t = GF_MSG_REGION_ADD; t <= GF_MSG_REGION_REMOVE; t++) {
        h = gf_test_header(t, 4, 0, 0);
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), -GF_ERR_BAD_TYPE);
        h.version = GF_PROTOCOL_VERSION_SHM;
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), GF_HEADER_BYTES);
        h.payload_bytes = 8;
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 8, &out), -GF_ERR_BAD_LENGTH);
    }
    /* Reserved descriptor bytes must be zero. */
    unsigned char d[GF_SHM_FRAME_BYTES] = {0};
    gf_shm_frame f;
    d[5] = 1;
    ck_assert_int_eq(gf_shm_frame_decode(d, &f), -GF_ERR_BAD_DESCRIPTOR);
    unsigned char rr[GF_SHM_RESULT_BYTES] = {0};
    gf_shm_result r;
    rr[7] = 0x80;
    ck_assert_int_eq(gf_shm_result_decode(rr, &r), -GF_ERR_BAD_DESCRIPTOR);
}
END_TEST

/* What version 3 allows and where: the scheduling flags on a FRAME, a
 * deadline in its status only with GF_FLAG_DEADLINE. */
START_TEST(sched_header_rules) {
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, 0, 64), out;
    const uint16_t flags[] = {GF_FLAG_DEADLINE, GF_FLAG_LATEST, GF_FLAGS_SCHED,
                              GF_FLAGS_SCHED | GF_FLAG_SHM};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        h.flags = flags[i];
        h.payload_bytes = flags[i] & GF_FLAG_SHM ? GF_SHM_FRAME_BYTES : 64;
        h.status = flags[i] & GF_FLAG_DEADLINE ? 0xDEADBEEFu : 0;
        for (uint8_t v = GF_PROTOCOL_VERSION; v < GF_PROTOCOL_VERSION_SCHED; v++) {
            h.version = v;
            ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
        }
        h.version = GF_PROTOCOL_VERSION_SCHED;
        ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), GF_HEADER_BYTES);
        ASSERT_HEADER_EQ(out, h);
    }
    /* A status without GF_FLAG_DEADLINE is still bad_flags. */
    h = gf_test_header(GF_MSG_FRAME, 2, 0, 64);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = GF_FLAG_LATEST;
    h.status = 1;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
    /* Bits beside them are not taken; nor are they on other requests or on
     * replies. */
    h.status = 0;
    h.flags = 0x1000;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 1u << 20, &out), -GF_ERR_BAD_FLAGS);
    h = gf_test_header(GF_MSG_STATS, 3, 0, 0);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_DEADLINE;
    h.status = 5;
    ck_assert_int_eq(reparse(&h, GF_ROLE_DAEMON, 0, &out), -GF_ERR_BAD_FLAGS);
    h = gf_test_header(GF_MSG_RESULT, 4, 0, 8);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 8, &out), GF_HEADER_BYTES);
    h.flags = GF_FLAG_LATEST;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 8, &out), -GF_ERR_BAD_FLAGS);
    /* A version-3 ERROR of the new statuses is a reply like any other. */
    h = gf_test_header(GF_MSG_ERROR, 5, 0, 0);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.status = GF_ERR_SUPERSEDED;
    ck_assert_int_eq(reparse(&h, GF_ROLE_CLIENT, 0, &out), GF_HEADER_BYTES);
    ck_assert(!gf_status_is_fatal(GF_ERR_DEADLINE_EXCEEDED));
    ck_assert(!gf_status_is_fatal(GF_ERR_SUPERSEDED));
}
END_TEST

/* A deadline's 32 bits of microseconds name the instant nearest now, on
 * either side, across the wrap of those bits. */
START_TEST(deadlines_on_the_wire) {
    const uint64_t now = 5000000000123456ull; /* ns: about 58 days of uptime */
    ck_assert_uint_eq(gf_deadline_decode(gf_deadline_encode(now + 33000000), now),
                      (now + 33000000) / 1000 * 1000);
    ck_assert_uint_eq(gf_deadline_decode(gf_deadline_encode(now - 2000000), now),
                      (now - 2000000) / 1000 * 1000);
    /* 30 minutes either way. */
    const uint64_t half_hour = 1800ull * 1000000000;
    ck_assert_uint_eq(gf_deadline_decode(gf_deadline_encode(now + half_hour), now),
                      (now + half_hour) / 1000 * 1000);
    ck_assert_uint_eq(gf_deadline_decode(gf_deadline_encode(now - half_hour), now),
                      (now - half_hour) / 1000 * 1000);
    /* Across the wrap of the low 32 bits of microseconds (every 71.6 min). */
    const uint64_t wrap_us = 1ull << 32, at = 3 * wrap_us * 1000 - 500000; /* 0.5 ms before */
    ck_assert_uint_eq(gf_deadline_encode(at + 1000000), 500);
    ck_assert_uint_eq(gf_deadline_decode(500, at), 3 * wrap_us * 1000 + 500000);
    ck_assert_uint_eq(gf_deadline_decode(gf_deadline_encode(at - 1000000), at + 1000000),
                      (at - 1000000) / 1000 * 1000);
    /* Before the clock's start: 0, long past. */
    ck_assert_uint_eq(gf_deadline_decode(UINT32_MAX - 5, 1000000), 0);
}
END_TEST

/* ---- names and the fatal set ---------------------------------------------- */

START_TEST(status_names) {
    static const char *const want[] = {
        "ok",
        "bad_magic",
        "bad_version",
        "bad_type",
        "bad_flags",
        "too_large",
        "unknown_pipeline",
        "bad_length",
        "engine",
        "shutting_down",
        "timeout",
        "internal",
        "request_timeout",
        "unknown_region",
        "bad_descriptor",
        "bad_region",
        "region_limit",
        "stray_fd",
        "too_many_connections",
        "forbidden",
        "deadline_exceeded",
        "superseded",
    };

    ck_assert_uint_eq(sizeof want / sizeof want[0], GF_STATUS_COUNT_);
    for (uint32_t s = 0; s < GF_STATUS_COUNT_; s++)
        ck_assert_str_eq(gf_status_name(s), want[s]);
    ck_assert_str_eq(gf_status_name(GF_ERR_UNKNOWN_PIPELINE), "unknown_pipeline");
    ck_assert_str_eq(gf_status_name(GF_STATUS_COUNT_), "unknown");
    ck_assert_str_eq(gf_status_name(255), "unknown");
    ck_assert_str_eq(gf_status_name(0x80000000u), "unknown");
    ck_assert_str_eq(gf_status_name(UINT32_MAX), "unknown");
}
END_TEST

START_TEST(msg_type_names) {
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_FRAME), "frame");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_RESULT), "result");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_ERROR), "error");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_LIST), "list");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_STATS), "stats");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_TRACE), "trace");
    ck_assert_str_eq(gf_msg_type_name(0), "unknown");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_REGION_ADD), "region_add");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_REGION_REMOVE), "region_remove");
    ck_assert_str_eq(gf_msg_type_name(GF_MSG_DEVICE_REGION_ADD), "device_region_add");
    ck_assert_str_eq(gf_msg_type_name(10), "unknown");
    ck_assert_str_eq(gf_msg_type_name(0x101), "unknown"); /* not truncated to 1 */
    ck_assert_str_eq(gf_msg_type_name(UINT32_MAX), "unknown");
}
END_TEST

START_TEST(fatal_set) {
    for (uint32_t s = 0; s < 64; s++)
        ck_assert_int_eq(gf_status_is_fatal(s) != 0,
                         (s >= 1 && s <= 5) || s == 12 || (s >= 17 && s <= 19));
    ck_assert(gf_status_is_fatal(GF_ERR_BAD_MAGIC));
    ck_assert(gf_status_is_fatal(GF_ERR_TOO_LARGE));
    ck_assert(!gf_status_is_fatal(GF_OK));
    ck_assert(!gf_status_is_fatal(GF_ERR_UNKNOWN_PIPELINE));
    ck_assert(!gf_status_is_fatal(GF_ERR_TIMEOUT));
    ck_assert(!gf_status_is_fatal(0x80000001u));
    ck_assert(!gf_status_is_fatal(UINT32_MAX));
}
END_TEST

/* ---- the parser over a byte stream ------------------------------------------ */

#define STREAM_MAX_MESSAGES 4
#define STREAM_MAX_BYTES    1024

/* One message to put on the stream: a header and its payload. */
typedef struct test_msg {
    gf_header h;
    const unsigned char *payload; /* h.payload_bytes bytes */
} test_msg;

/*
 * A minimal reader, as the daemon's or client's would be: collects a header
 * (in place when a whole one is at hand, else in `hdr`), parses it, then
 * skips its payload by length, copying it to `payload` for the test to check.
 */
typedef struct test_reader {
    enum gf_parse_role role;
    unsigned char hdr[GF_HEADER_BYTES]; /* partial header collected so far  */
    size_t hdr_len;                     /* bytes of it in `hdr`             */
    uint64_t payload_left_bytes;        /* of the current message's payload */
    gf_header got[STREAM_MAX_MESSAGES]; /* headers parsed, in order         */
    size_t got_count;
    unsigned char payload[STREAM_MAX_BYTES]; /* every payload, concatenated */
    size_t payload_len;
} test_reader;

static void reader_accept(test_reader *r, const gf_header *h) {
    ck_assert_uint_lt(r->got_count, STREAM_MAX_MESSAGES);
    r->got[r->got_count++] = *h;
    r->payload_left_bytes = h->payload_bytes;
}

static void reader_feed(test_reader *r, const unsigned char *p, size_t n) {
    while (n > 0) {
        gf_header h;
        int rc;

        if (r->payload_left_bytes > 0) {
            size_t take = n < r->payload_left_bytes ? n : (size_t)r->payload_left_bytes;

            ck_assert_uint_le(r->payload_len + take, sizeof r->payload);
            memcpy(r->payload + r->payload_len, p, take);
            r->payload_len += take;
            r->payload_left_bytes -= take;
            p += take;
            n -= take;
            continue;
        }
        if (r->hdr_len == 0 && n >= GF_HEADER_BYTES) {
            rc = gf_header_parse(p, n, r->role, TEST_MAX_PAYLOAD_BYTES, &h);
            ck_assert_int_eq(rc, GF_HEADER_BYTES);
            reader_accept(r, &h);
            p += rc;
            n -= (size_t)rc;
            continue;
        }
        size_t take = GF_HEADER_BYTES - r->hdr_len;
        if (take > n)
            take = n;
        memcpy(r->hdr + r->hdr_len, p, take);
        r->hdr_len += take;
        p += take;
        n -= take;
        rc = gf_header_parse(r->hdr, r->hdr_len, r->role, TEST_MAX_PAYLOAD_BYTES, &h);
        if (r->hdr_len < GF_HEADER_BYTES) {
            ck_assert_int_eq(rc, 0);
        } else {
            ck_assert_int_eq(rc, GF_HEADER_BYTES);
            reader_accept(r, &h);
            r->hdr_len = 0;
        }
    }
}

/* Writes `msgs` one after another into `buf`; returns the bytes written. */
static size_t stream_build(const test_msg *msgs, size_t count, unsigned char *buf, size_t cap) {
    size_t len = 0;

    for (size_t i = 0; i < count; i++) {
        ck_assert_uint_le(len + GF_HEADER_BYTES + msgs[i].h.payload_bytes, cap);
        gf_header_encode(&msgs[i].h, buf + len);
        len += GF_HEADER_BYTES;
        if (msgs[i].h.payload_bytes > 0)
            memcpy(buf + len, msgs[i].payload, (size_t)msgs[i].h.payload_bytes);
        len += (size_t)msgs[i].h.payload_bytes;
    }
    return len;
}

/*
 * Feeds the stream of `msgs` to a reader in chunks: of `chunk` bytes when
 * `chunk` is nonzero, else of random sizes from 1 to 80 drawn from `seed`.
 * Asserts that every header and every payload byte came out as sent.
 */
static void stream_check(enum gf_parse_role role, const test_msg *msgs, size_t count, size_t chunk,
                         uint32_t seed) {
    unsigned char stream[STREAM_MAX_BYTES], payloads[STREAM_MAX_BYTES];
    size_t len = stream_build(msgs, count, stream, sizeof stream);
    size_t payloads_len = 0;
    test_reader *r = calloc(1, sizeof *r);

    ck_assert_ptr_nonnull(r);
    r->role = role;
    for (size_t pos = 0; pos < len;) {
        size_t n = chunk ? chunk : 1 + next_random(&seed) % 80;

        if (n > len - pos)
            n = len - pos;
        reader_feed(r, stream + pos, n);
        pos += n;
    }

    ck_assert_uint_eq(r->got_count, count);
    ck_assert_uint_eq(r->hdr_len, 0);
    ck_assert_uint_eq(r->payload_left_bytes, 0);
    for (size_t i = 0; i < count; i++) {
        ASSERT_HEADER_EQ(r->got[i], msgs[i].h);
        if (msgs[i].h.payload_bytes > 0)
            memcpy(payloads + payloads_len, msgs[i].payload, (size_t)msgs[i].h.payload_bytes);
        payloads_len += (size_t)msgs[i].h.payload_bytes;
    }
    ck_assert_uint_eq(r->payload_len, payloads_len);
    ck_assert_mem_eq(r->payload, payloads, payloads_len);
    free(r);
}

/* Three requests: a FRAME, an empty LIST, and a FRAME whose payload holds a
 * valid-looking header that must be skipped as payload, not parsed. */
static void request_stream(test_msg msgs[3], unsigned char big[100]) {
    static const unsigned char hello[5] = {'h', 'e', 'l', 'l', 'o'};
    gf_header decoy = gf_test_header(GF_MSG_STATS, 999, 0, 0);

    for (size_t i = 0; i < 100; i++)
        big[i] = (unsigned char)(i * 7 + 3);
    gf_header_encode(&decoy, big + 10);
    msgs[0] = (test_msg){gf_test_header(GF_MSG_FRAME, 1, 0, sizeof hello), hello};
    msgs[1] = (test_msg){gf_test_header(GF_MSG_LIST, 2, 0, 0), NULL};
    msgs[2] = (test_msg){gf_test_header(GF_MSG_FRAME, 3, 2, 100), big};
}

/* Three replies: a RESULT, an ERROR with its text, a STATS with JSON. */
static void reply_stream(test_msg msgs[3]) {
    static const unsigned char result[8] = {0, 0, 0x80, 0x3F, 0, 0, 0, 0x40};
    static const char text[] = "pipeline 9 does not exist";
    static const char json[] = "{\"frames\":3}";

    msgs[0] = (test_msg){gf_test_header(GF_MSG_RESULT, 1, 0, sizeof result), result};
    msgs[1] =
        (test_msg){gf_test_header(GF_MSG_ERROR, 2, 9, strlen(text)), (const unsigned char *)text};
    msgs[1].h.status = GF_ERR_UNKNOWN_PIPELINE;
    msgs[2] =
        (test_msg){gf_test_header(GF_MSG_STATS, 3, 0, strlen(json)), (const unsigned char *)json};
}

START_TEST(stream_fixed_chunks) {
    test_msg requests[3], replies[3];
    unsigned char big[100];

    request_stream(requests, big);
    reply_stream(replies);
    /* 1: byte by byte; 31..33: around the header size; 1000: all at once. */
    static const size_t chunks[] = {1, 2, 3, 5, 7, 31, 32, 33, 64, 1000};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        stream_check(GF_ROLE_DAEMON, requests, 3, chunks[i], 0);
        stream_check(GF_ROLE_CLIENT, replies, 3, chunks[i], 0);
    }
}
END_TEST

START_TEST(stream_random_chunks) {
    test_msg requests[3], replies[3];
    unsigned char big[100];

    request_stream(requests, big);
    reply_stream(replies);
    stream_check(GF_ROLE_DAEMON, requests, 3, 0, 0x1234567u + (uint32_t)_i);
    stream_check(GF_ROLE_CLIENT, replies, 3, 0, 0x7654321u + (uint32_t)_i);
}
END_TEST

static Suite *protocol_suite(void) {
    Suite *s = suite_create("protocol");
    TCase *tc;

    tc = tcase_create("encode");
    tcase_add_test(tc, encode_exact_bytes);
    tcase_add_test(tc, encode_doc_examples);
    tcase_add_test(tc, encode_unaligned_writes_exactly_32_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("parse");
    tcase_add_test(tc, parse_exact_fields);
    tcase_add_test(tc, parse_round_trip);
    tcase_add_test(tc, parse_consumes_only_the_header);
    tcase_add_test(tc, parse_unaligned);
    tcase_add_test(tc, parse_decodes_every_byte);
    tcase_add_test(tc, parse_short_needs_more);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, parse_bad_magic);
    tcase_add_test(tc, parse_bad_version);
    tcase_add_test(tc, shm_examples_byte_exact);
    tcase_add_test(tc, shm_header_rules);
    tcase_add_test(tc, device_examples_byte_exact);
    tcase_add_test(tc, device_header_rules);
    tcase_add_test(tc, parse_types_by_role);
    tcase_add_test(tc, parse_role_differences);
    tcase_add_test(tc, parse_flags_must_be_zero);
    tcase_add_test(tc, parse_request_status_must_be_zero);
    tcase_add_test(tc, parse_reply_status_unchecked);
    tcase_add_test(tc, parse_max_payload_boundary);
    tcase_add_test(tc, parse_error_text_limit);
    tcase_add_test(tc, parse_list_stats_with_payload);
    tcase_add_test(tc, parse_checks_in_wire_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("version3");
    tcase_add_test(tc, sched_header_rules);
    tcase_add_test(tc, deadlines_on_the_wire);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, status_names);
    tcase_add_test(tc, msg_type_names);
    tcase_add_test(tc, fatal_set);
    suite_add_tcase(s, tc);

    tc = tcase_create("stream");
    tcase_add_test(tc, stream_fixed_chunks);
    tcase_add_loop_test(tc, stream_random_chunks, 0, STREAM_SEED_COUNT);
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    return gf_test_run(protocol_suite());
}

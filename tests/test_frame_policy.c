/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a frame's scheduling flags (daemon/frame_policy.h) without
 * a socket: a deadline at admission, a batch's expired frames, and which
 * request read behind a newest-frame-only FRAME supersedes it.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "frame_policy.h"
#include "runner.h"
#include "wire.h"

static const uint64_t now = 7000000000000ull; /* ns */

START_TEST(a_deadline_is_checked_at_admission) {
    char why[GF_ERROR_TEXT_MAX_BYTES];
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, 0, 64);
    ck_assert_uint_eq(gf_frame_policy_admit(&h, now, why, sizeof why), GF_OK);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = GF_FLAG_DEADLINE;
    h.status = gf_deadline_encode(now + 1000);
    ck_assert_uint_eq(gf_frame_policy_admit(&h, now, why, sizeof why), GF_OK);
    h.status = gf_deadline_encode(now);
    ck_assert_uint_eq(gf_frame_policy_admit(&h, now, why, sizeof why), GF_ERR_DEADLINE_EXCEEDED);
    h.status = gf_deadline_encode(now - 2500000);
    ck_assert_uint_eq(gf_frame_policy_admit(&h, now, why, sizeof why), GF_ERR_DEADLINE_EXCEEDED);
    ck_assert_str_eq(why, "the frame's deadline passed 2500 us before it could be placed");
}
END_TEST

/* Only batched frames count; a frame without a deadline never expires. */
START_TEST(a_batch_expires_the_frames_past_their_deadline) {
    gf_frame frames[4];
    gf_slot s = {.frames = frames, .frame_count = 4};
    memset(frames, 0, sizeof frames);
    for (int i = 0; i < 4; i++)
        frames[i].batched = 1;
    frames[1].deadline_ns = now - 1;
    frames[2].deadline_ns = now + 1;
    frames[3].deadline_ns = now;
    ck_assert_uint_eq(gf_frame_policy_expire(&s, now), 2);
    ck_assert(!frames[0].expired && frames[1].expired && !frames[2].expired && frames[3].expired);
    frames[0].batched = frames[2].batched = 0;
    ck_assert_uint_eq(gf_frame_policy_expire(&s, now), 0);
}
END_TEST

/* `h` with its payload, then `next` with `next_len` payload bytes, into buf:
 * returns the bytes after h's payload that are read. */
static size_t lay_out(uint8_t *buf, const gf_header *h, const gf_header *next, size_t next_bytes) {
    gf_header_encode(h, buf);
    memset(buf + GF_HEADER_BYTES, 0, h->payload_bytes);
    uint8_t *n = buf + GF_HEADER_BYTES + h->payload_bytes;
    gf_header_encode(next, n);
    return next_bytes;
}

START_TEST(the_newer_frame_read_behind) {
    uint8_t buf[512];
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, 3, 64);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = GF_FLAG_LATEST;
    gf_header n = h;
    n.frame_id = 2;
    const uint8_t *pay = buf + GF_HEADER_BYTES, *next = pay + 64;
    size_t avail = lay_out(buf, &h, &n, GF_HEADER_BYTES);
    ck_assert(gf_frame_policy_newer_read(&h, pay, next, avail));
    ck_assert(!gf_frame_policy_newer_read(&h, pay, next, GF_HEADER_BYTES - 1)); /* not all read */
    /* With a deadline too, still the same kind of frame. */
    n.flags |= GF_FLAG_DEADLINE;
    n.status = 12345;
    lay_out(buf, &h, &n, 0);
    ck_assert(gf_frame_policy_newer_read(&h, pay, next, avail));
    /* Another pipeline, length, no flag, an older version, another type. */
    gf_header other[5] = {n, n, n, n, gf_test_header(GF_MSG_STATS, 2, 0, 0)};
    other[0].pipeline_id = 4;
    other[1].payload_bytes = 60;
    other[2].flags = GF_FLAG_DEADLINE;
    other[3].version = GF_PROTOCOL_VERSION_SHM;
    other[3].flags = 0;
    other[3].status = 0;
    for (int i = 0; i < 5; i++) {
        lay_out(buf, &h, &other[i], 0);
        ck_assert_msg(!gf_frame_policy_newer_read(&h, pay, next, avail), "case %d", i);
    }
    /* Without the flag itself, nothing supersedes it. */
    gf_header plain = h;
    plain.flags = 0;
    lay_out(buf, &plain, &n, 0);
    ck_assert(!gf_frame_policy_newer_read(&plain, pay, next, avail));
}
END_TEST

/* By reference: the same input length, read from both descriptors. */
START_TEST(the_newer_frame_by_reference) {
    uint8_t buf[512];
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, 0, GF_SHM_FRAME_BYTES);
    h.version = GF_PROTOCOL_VERSION_SCHED;
    h.flags = GF_FLAG_LATEST | GF_FLAG_SHM;
    gf_header n = h;
    n.frame_id = 2;
    uint8_t *pay = buf + GF_HEADER_BYTES, *next = pay + GF_SHM_FRAME_BYTES;
    gf_shm_frame mine = {.region_id = 1,
                         .in_offset = 0,
                         .in_bytes = 4096,
                         .out_offset = 8192,
                         .out_capacity = 4096},
                 theirs = mine;
    theirs.in_offset = 4096;
    gf_header_encode(&h, buf);
    gf_shm_frame_encode(&mine, pay);
    gf_header_encode(&n, next);
    gf_shm_frame_encode(&theirs, next + GF_HEADER_BYTES);
    size_t avail = GF_HEADER_BYTES + GF_SHM_FRAME_BYTES;
    ck_assert(gf_frame_policy_newer_read(&h, pay, next, avail));
    ck_assert(
        !gf_frame_policy_newer_read(&h, pay, next, avail - 1)); /* its descriptor not all in */
    theirs.in_bytes = 2048;
    gf_shm_frame_encode(&theirs, next + GF_HEADER_BYTES);
    ck_assert(!gf_frame_policy_newer_read(&h, pay, next, avail));
    /* By value behind by reference: not the same kind. */
    n.flags = GF_FLAG_LATEST;
    n.payload_bytes = GF_SHM_FRAME_BYTES;
    gf_header_encode(&n, next);
    ck_assert(!gf_frame_policy_newer_read(&h, pay, next, avail));
}
END_TEST

static Suite *frame_policy_suite(void) {
    Suite *s = suite_create("frame_policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, a_deadline_is_checked_at_admission);
    tcase_add_test(tc, a_batch_expires_the_frames_past_their_deadline);
    tcase_add_test(tc, the_newer_frame_read_behind);
    tcase_add_test(tc, the_newer_frame_by_reference);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(frame_policy_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * A request header as a client writes it, and a reply header as a client
 * reads it, for every suite that builds or reads one: the unit suites, which
 * link nothing but the code they test and the runner, and testutil.c's raw
 * sockets.  Header-only; it needs protocol.h and Check alone.
 */
#ifndef GF_TEST_WIRE_H
#define GF_TEST_WIRE_H

#include <check.h>
#include <stdint.h>

#include "protocol.h"

/* The header of a `type` request for frame `frame_id` of pipeline
 * `pipeline_id` announcing `payload_bytes`: version GF_PROTOCOL_VERSION,
 * flags 0, status GF_OK. */
static inline gf_header gf_test_header(uint8_t type, uint64_t frame_id, uint32_t pipeline_id,
                                       uint64_t payload_bytes) {
    gf_header h = {.version = GF_PROTOCOL_VERSION,
                   .type = type,
                   .flags = 0,
                   .frame_id = frame_id,
                   .pipeline_id = pipeline_id,
                   .status = GF_OK,
                   .payload_bytes = payload_bytes};
    return h;
}

/* Parses the reply header at `bytes` (GF_HEADER_BYTES of them) as a client
 * does, any payload size allowed, into `*h`; fails the running test unless
 * it is a valid header.  For a test's body, where Check may assert. */
static inline void gf_test_ck_reply_header(const uint8_t *bytes, gf_header *h) {
    ck_assert_int_eq(gf_header_parse(bytes, GF_HEADER_BYTES, GF_ROLE_CLIENT, UINT64_MAX, h),
                     GF_HEADER_BYTES);
}

#endif

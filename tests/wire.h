/* SPDX-License-Identifier: MIT */
/*
 * A request header as a client writes it, for every suite that builds one:
 * test_protocol and test_request, which link nothing but the protocol code
 * and the request decoder, and testutil.c's raw sockets.  Header-only; it
 * needs protocol.h alone.
 */
#ifndef GF_TEST_WIRE_H
#define GF_TEST_WIRE_H

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

#endif

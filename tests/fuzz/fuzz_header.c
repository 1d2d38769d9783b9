/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for gf_header_parse (protocol/protocol.h), in both roles,
 * with any bytes and any payload limit.
 *
 * Input: byte 0 picks the role (bit 0) and where the limit comes from (the
 * rest); the next 8 bytes are a little-endian limit when asked for; what
 * follows is the buffer handed to the parser, of any length.
 *
 * Checked against the documented contract, with expectations computed here
 * from the bytes by the header table, never by the code under test: the
 * return value is 0 (fewer than 32 bytes; `*out` untouched), 32, or the
 * negated status of the first check to fail in wire order; whatever it
 * returns for 32 bytes or more, `*out` holds every field as sent, so that
 * gf_header_encode gives back the same bytes (all 32 on success; all but the
 * magic, which is not a field, on error).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "fuzz.h"

/* Limits worth hitting exactly: none, the error text's, a daemon's. */
static const uint64_t limits[] = {0, 1, GF_ERROR_TEXT_MAX_BYTES, 1u << 20, 1ull << 32, UINT64_MAX};
#define LIMIT_COUNT (sizeof limits / sizeof limits[0])
/* Bytes of input that choose the role and the limit. */
#define CONTROL_BYTES 9u

static uint64_t le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The status gf_header_parse must return for the 32 bytes at `p`, by the
 * table and the check order in protocol.h. */
static int expected_result(const uint8_t *p, enum gf_parse_role role, uint64_t max_payload_bytes) {
    uint32_t magic = (uint32_t)le(p, 4), status = (uint32_t)le(p + 20, 4);
    uint8_t version = p[4], type = p[5];
    uint16_t flags = (uint16_t)le(p + 6, 2);
    uint64_t payload_bytes = le(p + 24, 8);
    int daemon = role == GF_ROLE_DAEMON;
    int v2 = version >= 2 && version <= 4; /* 3: 2 and scheduling; 4: 3 and devices */
    int v4 = version == 4;
    int accepted = daemon ? type == GF_MSG_FRAME || type == GF_MSG_LIST || type == GF_MSG_STATS ||
                                type == GF_MSG_TRACE
                          : type >= GF_MSG_RESULT && type <= GF_MSG_TRACE;
    if (v2 && (type == GF_MSG_REGION_ADD || type == GF_MSG_REGION_REMOVE))
        accepted = 1;
    if (v4 && type == GF_MSG_DEVICE_REGION_ADD)
        accepted = 1;
    /* Only a FRAME (daemon) or RESULT (client) of version 2 to 4 may say
     * "shm" (0x0001), and of version 4 "device" (0x0002), never both; only
     * a version-3 or -4 FRAME may say "deadline" (0x0100, its status then
     * the deadline), "latest" (0x0200) and its priority class (the two bits
     * 0x0C00). */
    int may_ref = v2 && type == (daemon ? GF_MSG_FRAME : GF_MSG_RESULT);
    int may_sched = (version == 3 || version == 4) && daemon && type == GF_MSG_FRAME;
    uint16_t sched = may_sched ? (uint16_t)(flags & 0x0F00u) : 0;
    uint16_t ref = (uint16_t)(flags & ~sched);
    int ref_ok = ref == 0 || (may_ref && (ref == 0x0001u || (v4 && ref == 0x0002u)));
    int by_ref = ref != 0;
    int deadline = (sched & 0x0100u) != 0;

    if (magic != GF_MAGIC)
        return -GF_ERR_BAD_MAGIC;
    if (version < 1 || version > 4)
        return -GF_ERR_BAD_VERSION;
    if (!accepted)
        return -GF_ERR_BAD_TYPE;
    if (!ref_ok || (daemon && status != 0 && !deadline))
        return -GF_ERR_BAD_FLAGS;
    if (payload_bytes > max_payload_bytes)
        return -GF_ERR_TOO_LARGE;
    if (!daemon && type == GF_MSG_ERROR && payload_bytes > GF_ERROR_TEXT_MAX_BYTES)
        return -GF_ERR_TOO_LARGE;
    if (daemon && type == GF_MSG_DEVICE_REGION_ADD && payload_bytes != 16)
        return -GF_ERR_BAD_LENGTH;
    if (daemon && type != GF_MSG_FRAME && type != GF_MSG_DEVICE_REGION_ADD && payload_bytes != 0)
        return -GF_ERR_BAD_LENGTH;
    if (daemon && by_ref && payload_bytes != 40)
        return -GF_ERR_BAD_LENGTH;
    if (!daemon && by_ref && payload_bytes != 24)
        return -GF_ERR_BAD_LENGTH;
    if (!daemon && (type == GF_MSG_REGION_ADD || type == GF_MSG_DEVICE_REGION_ADD) && status == 0 &&
        payload_bytes != 16)
        return -GF_ERR_BAD_LENGTH;
    if (!daemon && type == GF_MSG_REGION_REMOVE && payload_bytes != 0)
        return -GF_ERR_BAD_LENGTH;
    return (int)GF_HEADER_BYTES;
}

/* Nonzero when every field of `a` and `b` is equal (padding aside). */
static int same_fields(const gf_header *a, const gf_header *b) {
    return a->version == b->version && a->type == b->type && a->flags == b->flags &&
           a->frame_id == b->frame_id && a->pipeline_id == b->pipeline_id &&
           a->status == b->status && a->payload_bytes == b->payload_bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < CONTROL_BYTES)
        return 0;
    enum gf_parse_role role = data[0] & 1 ? GF_ROLE_CLIENT : GF_ROLE_DAEMON;
    unsigned pick = data[0] >> 1;
    uint64_t max_payload_bytes = pick < LIMIT_COUNT ? limits[pick] : le(data + 1, 8);
    size_t len = size - CONTROL_BYTES;
    /* A copy of its own, so that ASan sees any read past `len`. */
    uint8_t *buf = malloc(len ? len : 1);
    REQUIRE(buf != NULL);
    memcpy(buf, data + CONTROL_BYTES, len);

    gf_header h, untouched;
    memset(&h, 0xA5, sizeof h);
    untouched = h;
    int rc = gf_header_parse(buf, len, role, max_payload_bytes, &h);

    if (len < GF_HEADER_BYTES) {
        REQUIRE(rc == 0);
        REQUIRE(memcmp(&h, &untouched, sizeof h) == 0);
        free(buf);
        return 0;
    }
    REQUIRE(rc == expected_result(buf, role, max_payload_bytes));
    REQUIRE(rc == (int)GF_HEADER_BYTES || (rc < 0 && -rc < GF_STATUS_COUNT_));
    if (rc < 0)
        REQUIRE(gf_status_is_fatal((uint32_t)-rc) || -rc == GF_ERR_BAD_LENGTH);

    uint8_t again[GF_HEADER_BYTES];
    gf_header_encode(&h, again);
    if (rc > 0)
        REQUIRE(memcmp(again, buf, GF_HEADER_BYTES) == 0);
    else
        REQUIRE(memcmp(again + 4, buf + 4, GF_HEADER_BYTES - 4) == 0);

    /* The parser reads 32 bytes and no more: the same header alone parses
     * the same way. */
    gf_header alone;
    REQUIRE(gf_header_parse(buf, GF_HEADER_BYTES, role, max_payload_bytes, &alone) == rc);
    REQUIRE(same_fields(&alone, &h));
    free(buf);
    return 0;
}

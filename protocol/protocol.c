/* SPDX-License-Identifier: MIT */
/*
 * gpuframed wire protocol: header encode/decode and the names of its codes.
 *
 * Integers are read and written byte by byte, least significant first, so the
 * code needs no particular host byte order and no alignment of the buffer.
 */
#include "protocol.h"

#include <assert.h>
#include <string.h>

#include "util.h"

/* Byte offsets of the header's fields, as in the table in protocol.h. */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_TYPE = 5,
    OFF_FLAGS = 6,
    OFF_FRAME_ID = 8,
    OFF_PIPELINE_ID = 16,
    OFF_STATUS = 20,
    OFF_PAYLOAD_BYTES = 24,
    OFF_END_ = 32
};

_Static_assert(OFF_END_ == GF_HEADER_BYTES, "header table and GF_HEADER_BYTES disagree");

static uint16_t get_u16(const unsigned char *p) {
    return (uint16_t)((unsigned)p[0] | (unsigned)p[1] << 8);
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v & 0xFFu);
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)((v >> (8 * i)) & 0xFFu);
}

static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)(v & 0xFFFFFFFFu));
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* Nonzero when a message of `type` may arrive at a peer playing `role` in
 * protocol `version` (already known to be 1 to 3). */
static int type_accepted(enum gf_parse_role role, uint32_t version, uint32_t type) {
    if (type == GF_MSG_REGION_ADD || type == GF_MSG_REGION_REMOVE)
        return version >= GF_PROTOCOL_VERSION_SHM;
    switch (role) {
    case GF_ROLE_DAEMON:
        return type == GF_MSG_FRAME || type == GF_MSG_LIST || type == GF_MSG_STATS ||
               type == GF_MSG_TRACE;
    case GF_ROLE_CLIENT:
        return type == GF_MSG_RESULT || type == GF_MSG_ERROR || type == GF_MSG_LIST ||
               type == GF_MSG_STATS || type == GF_MSG_TRACE;
    }
    assert(0 && "gf_header_parse: unknown role");
    return 0;
}

int gf_header_parse(const void *buf, size_t len, enum gf_parse_role role,
                    uint64_t max_payload_bytes, gf_header *out) {
    const unsigned char *p = buf;

    assert(out != NULL);
    if (len < GF_HEADER_BYTES)
        return 0;
    assert(p != NULL);

    uint32_t magic = get_u32(p + OFF_MAGIC);
    out->version = p[OFF_VERSION];
    out->type = p[OFF_TYPE];
    out->flags = get_u16(p + OFF_FLAGS);
    out->frame_id = get_u64(p + OFF_FRAME_ID);
    out->pipeline_id = get_u32(p + OFF_PIPELINE_ID);
    out->status = get_u32(p + OFF_STATUS);
    out->payload_bytes = get_u64(p + OFF_PAYLOAD_BYTES);

    if (magic != GF_MAGIC)
        return -GF_ERR_BAD_MAGIC;
    if (out->version < GF_PROTOCOL_VERSION || out->version > GF_PROTOCOL_VERSION_MAX)
        return -GF_ERR_BAD_VERSION;
    if (!type_accepted(role, out->version, out->type))
        return -GF_ERR_BAD_TYPE;
    uint16_t allowed_flags = 0;
    if (out->version >= GF_PROTOCOL_VERSION_SHM &&
        out->type == (role == GF_ROLE_DAEMON ? GF_MSG_FRAME : GF_MSG_RESULT))
        allowed_flags = GF_FLAG_SHM;
    if (out->version >= GF_PROTOCOL_VERSION_SCHED && role == GF_ROLE_DAEMON &&
        out->type == GF_MSG_FRAME)
        allowed_flags |= GF_FLAGS_SCHED;
    /* A request's status is 0, but a FRAME's deadline. */
    int status_used = (out->flags & GF_FLAG_DEADLINE) != 0;
    if ((out->flags & ~allowed_flags) != 0 ||
        (role == GF_ROLE_DAEMON && out->status != GF_OK && !status_used))
        return -GF_ERR_BAD_FLAGS;
    if (out->payload_bytes > max_payload_bytes)
        return -GF_ERR_TOO_LARGE;
    if (role == GF_ROLE_CLIENT && out->type == GF_MSG_ERROR &&
        out->payload_bytes > GF_ERROR_TEXT_MAX_BYTES)
        return -GF_ERR_TOO_LARGE;
    int shm = (out->flags & GF_FLAG_SHM) != 0;
    if (role == GF_ROLE_DAEMON &&
        (out->type == GF_MSG_FRAME ? shm && out->payload_bytes != GF_SHM_FRAME_BYTES
                                   : out->payload_bytes != 0))
        return -GF_ERR_BAD_LENGTH;
    if (role == GF_ROLE_CLIENT && ((shm && out->payload_bytes != GF_SHM_RESULT_BYTES) ||
                                   (out->type == GF_MSG_REGION_ADD && out->status == GF_OK &&
                                    out->payload_bytes != GF_REGION_INFO_BYTES) ||
                                   (out->type == GF_MSG_REGION_REMOVE && out->payload_bytes != 0)))
        return -GF_ERR_BAD_LENGTH;
    return (int)GF_HEADER_BYTES;
}

void gf_header_encode(const gf_header *h, void *buf) {
    unsigned char *p = buf;

    assert(h != NULL && p != NULL);
    put_u32(p + OFF_MAGIC, GF_MAGIC);
    p[OFF_VERSION] = h->version;
    p[OFF_TYPE] = h->type;
    put_u16(p + OFF_FLAGS, h->flags);
    put_u64(p + OFF_FRAME_ID, h->frame_id);
    put_u32(p + OFF_PIPELINE_ID, h->pipeline_id);
    put_u32(p + OFF_STATUS, h->status);
    put_u64(p + OFF_PAYLOAD_BYTES, h->payload_bytes);
}

void gf_shm_frame_encode(const gf_shm_frame *f, void *buf) {
    unsigned char *p = buf;
    put_u32(p, f->region_id);
    put_u32(p + 4, 0);
    put_u64(p + 8, f->in_offset);
    put_u64(p + 16, f->in_bytes);
    put_u64(p + 24, f->out_offset);
    put_u64(p + 32, f->out_capacity);
}

int gf_shm_frame_decode(const void *buf, gf_shm_frame *out) {
    const unsigned char *p = buf;
    out->region_id = get_u32(p);
    out->in_offset = get_u64(p + 8);
    out->in_bytes = get_u64(p + 16);
    out->out_offset = get_u64(p + 24);
    out->out_capacity = get_u64(p + 32);
    return get_u32(p + 4) == 0 ? 0 : -GF_ERR_BAD_DESCRIPTOR;
}

void gf_shm_result_encode(const gf_shm_result *r, void *buf) {
    unsigned char *p = buf;
    put_u32(p, r->region_id);
    put_u32(p + 4, 0);
    put_u64(p + 8, r->out_offset);
    put_u64(p + 16, r->out_bytes);
}

int gf_shm_result_decode(const void *buf, gf_shm_result *out) {
    const unsigned char *p = buf;
    out->region_id = get_u32(p);
    out->out_offset = get_u64(p + 8);
    out->out_bytes = get_u64(p + 16);
    return get_u32(p + 4) == 0 ? 0 : -GF_ERR_BAD_DESCRIPTOR;
}

void gf_region_info_encode(const gf_region_info *r, void *buf) {
    unsigned char *p = buf;
    put_u32(p, r->region_id);
    put_u32(p + 4, r->flags);
    put_u64(p + 8, r->region_bytes);
}

void gf_region_info_decode(const void *buf, gf_region_info *out) {
    const unsigned char *p = buf;
    out->region_id = get_u32(p);
    out->flags = get_u32(p + 4);
    out->region_bytes = get_u64(p + 8);
}

/* `len` bytes at `off` lie inside `size` bytes (no overflow possible). */
static int range_inside(uint64_t off, uint64_t len, uint64_t size) {
    return len <= size && off <= size - len;
}

int gf_shm_frame_check(const gf_shm_frame *d, uint64_t region_bytes, uint64_t out_bytes, char *why,
                       size_t why_len) {
    if (!range_inside(d->in_offset, d->in_bytes, region_bytes)) {
        gf_errorf(why, why_len,
                  "input of %llu bytes at offset %llu lies outside region %u (%llu bytes)",
                  (unsigned long long)d->in_bytes, (unsigned long long)d->in_offset, d->region_id,
                  (unsigned long long)region_bytes);
        return -GF_ERR_BAD_DESCRIPTOR;
    }
    if (!range_inside(d->out_offset, d->out_capacity, region_bytes)) {
        gf_errorf(
            why, why_len,
            "output capacity of %llu bytes at offset %llu lies outside region %u (%llu bytes)",
            (unsigned long long)d->out_capacity, (unsigned long long)d->out_offset, d->region_id,
            (unsigned long long)region_bytes);
        return -GF_ERR_BAD_DESCRIPTOR;
    }
    if (out_bytes > d->out_capacity) {
        gf_errorf(why, why_len, "output capacity %llu is less than the pipeline's %llu bytes",
                  (unsigned long long)d->out_capacity, (unsigned long long)out_bytes);
        return -GF_ERR_BAD_DESCRIPTOR;
    }
    /* Both ranges are inside the region now, so these sums cannot overflow. */
    if (d->in_bytes && out_bytes && d->in_offset < d->out_offset + out_bytes &&
        d->out_offset < d->in_offset + d->in_bytes) {
        gf_errorf(
            why, why_len, "input [%llu, %llu) and output [%llu, %llu) overlap",
            (unsigned long long)d->in_offset, (unsigned long long)(d->in_offset + d->in_bytes),
            (unsigned long long)d->out_offset, (unsigned long long)(d->out_offset + out_bytes));
        return -GF_ERR_BAD_DESCRIPTOR;
    }
    return 0;
}

/* Indexed by enum gf_status; PROTOCOL.md's error table uses the same names. */
static const char *const status_names[GF_STATUS_COUNT_] = {
    [GF_OK] = "ok",
    [GF_ERR_BAD_MAGIC] = "bad_magic",
    [GF_ERR_BAD_VERSION] = "bad_version",
    [GF_ERR_BAD_TYPE] = "bad_type",
    [GF_ERR_BAD_FLAGS] = "bad_flags",
    [GF_ERR_TOO_LARGE] = "too_large",
    [GF_ERR_UNKNOWN_PIPELINE] = "unknown_pipeline",
    [GF_ERR_BAD_LENGTH] = "bad_length",
    [GF_ERR_ENGINE] = "engine",
    [GF_ERR_SHUTTING_DOWN] = "shutting_down",
    [GF_ERR_TIMEOUT] = "timeout",
    [GF_ERR_INTERNAL] = "internal",
    [GF_ERR_REQUEST_TIMEOUT] = "request_timeout",
    [GF_ERR_UNKNOWN_REGION] = "unknown_region",
    [GF_ERR_BAD_DESCRIPTOR] = "bad_descriptor",
    [GF_ERR_BAD_REGION] = "bad_region",
    [GF_ERR_REGION_LIMIT] = "region_limit",
    [GF_ERR_STRAY_FD] = "stray_fd",
    [GF_ERR_TOO_MANY_CONNECTIONS] = "too_many_connections",
    [GF_ERR_FORBIDDEN] = "forbidden",
    [GF_ERR_DEADLINE_EXCEEDED] = "deadline_exceeded",
    [GF_ERR_SUPERSEDED] = "superseded",
};

uint32_t gf_deadline_encode(uint64_t deadline_ns) {
    return (uint32_t)(deadline_ns / 1000u);
}

uint64_t gf_deadline_decode(uint32_t wire_us, uint64_t now_ns) {
    uint64_t now_us = now_ns / 1000u;
    /* The signed distance from now's low 32 bits: the nearest instant. */
    uint32_t d = wire_us - (uint32_t)now_us;
    int64_t ahead = d < 0x80000000u ? (int64_t)d : (int64_t)d - 0x100000000ll;
    if (ahead < 0 && (uint64_t)-ahead > now_us)
        return 0;
    return ((uint64_t)((int64_t)now_us + ahead)) * 1000u;
}

const char *gf_status_name(uint32_t status) {
    if (status >= GF_STATUS_COUNT_)
        return "unknown";
    return status_names[status];
}

int gf_status_is_fatal(uint32_t status) {
    return (status >= GF_ERR_BAD_MAGIC && status <= GF_ERR_TOO_LARGE) ||
           status == GF_ERR_REQUEST_TIMEOUT || status == GF_ERR_STRAY_FD ||
           status == GF_ERR_TOO_MANY_CONNECTIONS || status == GF_ERR_FORBIDDEN;
}

static const char *const class_names[GF_CLASS_COUNT_] = {"default", "realtime", "normal", "batch"};

const char *gf_priority_class_name(unsigned cls) {
    return cls < GF_CLASS_COUNT_ ? class_names[cls] : "unknown";
}

int gf_priority_class_parse(const char *name) {
    for (int i = 0; name != NULL && i < GF_CLASS_COUNT_; i++)
        if (strcmp(name, class_names[i]) == 0)
            return i;
    return -1;
}

const char *gf_msg_type_name(uint32_t type) {
    switch (type) {
    case GF_MSG_FRAME: return "frame";
    case GF_MSG_RESULT: return "result";
    case GF_MSG_ERROR: return "error";
    case GF_MSG_LIST: return "list";
    case GF_MSG_STATS: return "stats";
    case GF_MSG_TRACE: return "trace";
    case GF_MSG_REGION_ADD: return "region_add";
    case GF_MSG_REGION_REMOVE: return "region_remove";
    }
    return "unknown";
}

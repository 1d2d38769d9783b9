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

int gf_version_known(uint32_t version) {
    return version >= GF_PROTOCOL_VERSION && version <= GF_PROTOCOL_VERSION_MAX;
}

/* Nonzero when a message of `type` may arrive at a peer playing `role` in
 * protocol `version` (already known to be one gf_version_known takes). */
static int type_accepted(enum gf_parse_role role, uint32_t version, uint32_t type) {
    if (type == GF_MSG_REGION_ADD || type == GF_MSG_REGION_REMOVE)
        return version >= GF_PROTOCOL_VERSION_SHM;
    if (type == GF_MSG_DEVICE_REGION_ADD)
        return version >= GF_PROTOCOL_VERSION_DEVICE;
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

/* The flags a message of `type` may carry at `role` in `version`: at most
 * one of GF_FLAG_SHM (from version 2) and GF_FLAG_DEVICE (4) on a FRAME
 * (daemon) or RESULT (client), and GF_FLAGS_SCHED on a FRAME (from 3). */
static int flags_allowed(enum gf_parse_role role, uint32_t version, uint32_t type, uint16_t flags) {
    if (flags == 0)
        return 1;
    if (type != (role == GF_ROLE_DAEMON ? GF_MSG_FRAME : GF_MSG_RESULT))
        return 0;
    uint16_t sched =
        role == GF_ROLE_DAEMON && version >= GF_PROTOCOL_VERSION_SCHED ? flags & GF_FLAGS_SCHED : 0;
    uint16_t ref = flags & (uint16_t)~sched;
    if (ref == 0)
        return 1;
    if (ref == GF_FLAG_SHM)
        return version >= GF_PROTOCOL_VERSION_SHM;
    if (ref == GF_FLAG_DEVICE)
        return version >= GF_PROTOCOL_VERSION_DEVICE;
    return 0;
}

/* The payload length a request header `h` must have (daemon role), or -1
 * when any up to the maximum will do (a FRAME with its bytes). */
static int64_t request_payload_bytes(const gf_header *h) {
    if (h->type == GF_MSG_FRAME)
        return h->flags & GF_FLAGS_BY_REF ? (int64_t)GF_SHM_FRAME_BYTES : -1;
    return h->type == GF_MSG_DEVICE_REGION_ADD ? (int64_t)GF_DEVICE_REGION_BYTES : 0;
}

/* Whether a reply header `h` has a payload length its type allows (client
 * role). */
static int reply_length_ok(const gf_header *h) {
    if (h->flags & GF_FLAGS_BY_REF)
        return h->payload_bytes == GF_SHM_RESULT_BYTES;
    if ((h->type == GF_MSG_REGION_ADD || h->type == GF_MSG_DEVICE_REGION_ADD) && h->status == GF_OK)
        return h->payload_bytes == GF_REGION_INFO_BYTES;
    return h->type != GF_MSG_REGION_REMOVE || h->payload_bytes == 0;
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
    if (!gf_version_known(out->version))
        return -GF_ERR_BAD_VERSION;
    if (!type_accepted(role, out->version, out->type))
        return -GF_ERR_BAD_TYPE;
    /* A request's status is 0, but a FRAME's deadline. */
    int status_used = role == GF_ROLE_DAEMON && (out->flags & GF_FLAG_DEADLINE) != 0;
    if (!flags_allowed(role, out->version, out->type, out->flags) ||
        (role == GF_ROLE_DAEMON && out->status != GF_OK && !status_used))
        return -GF_ERR_BAD_FLAGS;
    if (out->payload_bytes > max_payload_bytes)
        return -GF_ERR_TOO_LARGE;
    if (role == GF_ROLE_CLIENT && out->type == GF_MSG_ERROR &&
        out->payload_bytes > GF_ERROR_TEXT_MAX_BYTES)
        return -GF_ERR_TOO_LARGE;
    if (role == GF_ROLE_DAEMON) {
        int64_t want = request_payload_bytes(out);
        if (want >= 0 && out->payload_bytes != (uint64_t)want)
            return -GF_ERR_BAD_LENGTH;
    } else if (!reply_length_ok(out)) {
        return -GF_ERR_BAD_LENGTH;
    }
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

void gf_device_region_encode(const gf_device_region *d, void *buf) {
    unsigned char *p = buf;
    put_u64(p, d->region_bytes);
    put_u32(p + 8, d->handle_type);
    put_u32(p + 12, 0);
}

int gf_device_region_decode(const void *buf, gf_device_region *out) {
    const unsigned char *p = buf;
    out->region_bytes = get_u64(p);
    out->handle_type = get_u32(p + 8);
    return get_u32(p + 12) == 0 ? 0 : -GF_ERR_BAD_REGION;
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

int gf_device_frame_check(const gf_shm_frame *d, uint64_t region_bytes, uint64_t out_bytes,
                          char *why, size_t why_len) {
    int rc = gf_shm_frame_check(d, region_bytes, out_bytes, why, why_len);
    if (rc < 0)
        return rc;
    if (d->in_offset % GF_DEVICE_FRAME_ALIGN_BYTES || d->out_offset % GF_DEVICE_FRAME_ALIGN_BYTES) {
        gf_errorf(why, why_len,
                  "device frame offsets %llu (input) and %llu (output) must be multiples of %u",
                  (unsigned long long)d->in_offset, (unsigned long long)d->out_offset,
                  GF_DEVICE_FRAME_ALIGN_BYTES);
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
    case GF_MSG_DEVICE_REGION_ADD: return "device_region_add";
    }
    return "unknown";
}

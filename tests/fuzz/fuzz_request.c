/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the request-stream decoder (daemon/request.h): any
 * bytes, cut at any points, with any FRAMEs refused, driven the way a
 * connection drives it (tests/test_request.c's driver, made to check).
 *
 * Input: a control block, then the stream.
 *   byte 0       max_frame_bytes, from limits[]
 *   byte 1       bit i: the FRAMEs whose index is i mod 8 are refused
 *   byte 2       bit i: header i mod 8 is first left undecided (no slot yet)
 *                and asked for again
 *   byte 3       bit i: payload event i mod 8 is taken only in part, as a
 *                connection reading into a slot reports it (advance by count)
 *   byte 4       the driver buffer's room beyond one header
 *   bytes 5..12  chunk sizes (1 + byte % CHUNK_MAX_BYTES), used in turn
 *
 * Every event is checked against the decoder's contract: it covers no more
 * than is buffered; MORE and ERROR cover nothing; a HEADER covers exactly 32
 * bytes and holds a header gf_header_parse accepts; PAYLOAD and SKIP come only
 * while a payload is left and cover at most what is left; gf_request_next is
 * pure.  After an ERROR the driver stops.  Payload accounting is exact: every
 * byte fed is a header's, an accepted payload's, a skipped payload's, or still
 * buffered at the end; a finished frame got exactly payload_bytes bytes.
 * Finally the transcript (headers, decisions, each frame's payload digest,
 * the error) must be the same as when the whole stream arrives at once.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "fuzz.h"

#define CONTROL_BYTES   13u
#define CHUNK_COUNT     8u
#define CHUNK_MAX_BYTES 97u
/* The largest buffer room beyond one header the driver is given. */
#define ROOM_MAX_BYTES 255u
/* FNV-1a, 64-bit: the transcript's digest. */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static const uint64_t limits[] = {0, 1, 8, 32, 100, 4096, 1u << 20, 1ull << 32};
#define LIMIT_COUNT (sizeof limits / sizeof limits[0])

typedef struct script {
    uint64_t max_frame_bytes;
    uint8_t refuse, defer, partial;
    size_t buf_bytes; /* the driver's buffer: a header plus room */
    size_t chunks[CHUNK_COUNT];
} script;

typedef struct driver {
    const script *sc;
    gf_request_decoder d;
    uint8_t *buf;
    size_t start, end;
    uint64_t headers, frames, payload_events;
    uint64_t payload_left; /* the model's: what the accepted frame still needs   */
    uint64_t skip_left;    /* the model's: what the refused request still needs   */
    uint64_t payload_hash; /* the accepted frame's payload so far                 */
    uint64_t fed;          /* bytes put into the buffer                           */
    uint64_t consumed;     /* bytes covered by events and taken or skipped        */
    uint64_t transcript;   /* digest of everything decided and received           */
    int failed;
} driver;

static void mix(uint64_t *h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * FNV_PRIME;
}

static void mix_u64(uint64_t *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    mix(h, b, sizeof b);
}

static int same_event(const gf_request *a, const gf_request *b) {
    if (a->kind != b->kind || a->bytes != b->bytes)
        return 0;
    if (a->kind == GF_REQ_ERROR)
        return a->status == b->status && strcmp(a->text, b->text) == 0 &&
               a->header.frame_id == b->header.frame_id;
    if (a->kind == GF_REQ_HEADER)
        return a->header.type == b->header.type && a->header.frame_id == b->header.frame_id &&
               a->header.pipeline_id == b->header.pipeline_id &&
               a->header.payload_bytes == b->header.payload_bytes;
    return 1;
}

/* The decoder's state must be the model's. */
static void check_state(const driver *v) {
    REQUIRE(v->d.payload_left == v->payload_left);
    REQUIRE(v->d.skip_left == v->skip_left);
    REQUIRE(!(v->payload_left && v->skip_left));
    REQUIRE(gf_request_in_payload(&v->d) == (v->payload_left > 0));
}

static void finish_frame(driver *v) {
    mix_u64(&v->transcript, v->payload_hash);
    v->payload_hash = FNV_OFFSET;
}

static void on_header(driver *v, const gf_request *r, size_t len) {
    const gf_header *h = &r->header;
    uint8_t again[GF_HEADER_BYTES];

    REQUIRE(r->bytes == GF_HEADER_BYTES && len >= GF_HEADER_BYTES);
    REQUIRE(!v->payload_left && !v->skip_left);
    /* What gf_header_parse accepts from a client, decoded from these bytes. */
    gf_header_encode(h, again);
    REQUIRE(memcmp(again, v->buf + v->start, GF_HEADER_BYTES) == 0);
    REQUIRE(h->type == GF_MSG_FRAME || h->type == GF_MSG_LIST || h->type == GF_MSG_STATS ||
            h->type == GF_MSG_TRACE ||
            (h->version >= GF_PROTOCOL_VERSION_SHM &&
             (h->type == GF_MSG_REGION_ADD || h->type == GF_MSG_REGION_REMOVE)) ||
            (h->version == GF_PROTOCOL_VERSION_DEVICE && h->type == GF_MSG_DEVICE_REGION_ADD));
    /* Scheduling flags on version-3 and -4 frames only; a status only as a
     * deadline. */
    REQUIRE(!(h->flags & (0x0100u | 0x0200u)) || (h->version >= 3 && h->type == GF_MSG_FRAME));
    REQUIRE(h->status == 0 || (h->flags & 0x0100u));
    /* A frame by reference, in memory or on the device, carries exactly its
     * descriptor; a device region its 16 bytes. */
    uint16_t ref = h->flags & (GF_FLAG_SHM | GF_FLAG_DEVICE);
    REQUIRE(ref == 0 || ref == GF_FLAG_SHM ||
            (ref == GF_FLAG_DEVICE && h->version == GF_PROTOCOL_VERSION_DEVICE));
    REQUIRE(ref == 0 || (h->type == GF_MSG_FRAME && h->payload_bytes == GF_SHM_FRAME_BYTES));
    REQUIRE(h->type == GF_MSG_FRAME               ? h->payload_bytes <= v->d.max_frame_bytes
            : h->type == GF_MSG_DEVICE_REGION_ADD ? h->payload_bytes == GF_DEVICE_REGION_BYTES
                                                  : h->payload_bytes == 0);

    unsigned bit = 1u << (v->headers++ % 8);
    if (v->sc->defer & bit) {
        /* Neither accepted nor refused: it stays, and is offered again. */
        gf_request r2;
        memset(&r2, 0x5A, sizeof r2);
        gf_request_next(&v->d, v->buf + v->start, len, &r2);
        REQUIRE(same_event(r, &r2));
    }
    int refuse = h->type == GF_MSG_FRAME && (v->sc->refuse & 1u << (v->frames++ % 8));
    mix(&v->transcript, again, sizeof again);
    mix_u64(&v->transcript, (uint64_t)refuse);
    if (refuse) {
        gf_request_refuse(&v->d, r);
        v->skip_left = h->payload_bytes;
    } else {
        gf_request_accept(&v->d, r);
        v->payload_left = h->payload_bytes;
        if (!v->payload_left)
            finish_frame(v);
    }
}

/* Decodes what the buffer holds until more bytes are needed or an ERROR. */
static void drain(driver *v) {
    while (!v->failed) {
        size_t len = v->end - v->start;
        gf_request r, r2;
        memset(&r, 0xEE, sizeof r);
        memset(&r2, 0x11, sizeof r2);
        check_state(v);
        gf_request_next(&v->d, v->buf + v->start, len, &r);
        gf_request_next(&v->d, v->buf + v->start, len, &r2);
        REQUIRE(same_event(&r, &r2));
        REQUIRE(r.bytes <= len);
        check_state(v);
        size_t taken = r.bytes;
        switch (r.kind) {
        case GF_REQ_MORE:
            REQUIRE(r.bytes == 0);
            REQUIRE(v->payload_left || v->skip_left ? len == 0 : len < GF_HEADER_BYTES);
            return;
        case GF_REQ_HEADER: on_header(v, &r, len); break;
        case GF_REQ_PAYLOAD:
        case GF_REQ_SKIP: {
            uint64_t *left = r.kind == GF_REQ_SKIP ? &v->skip_left : &v->payload_left;
            REQUIRE(*left > 0 && r.bytes > 0);
            REQUIRE(r.bytes == (len < *left ? len : *left));
            if (r.kind == GF_REQ_PAYLOAD && (v->sc->partial & 1u << (v->payload_events++ % 8)))
                taken = 1 + (r.bytes - 1) / 2;
            if (r.kind == GF_REQ_PAYLOAD)
                mix(&v->payload_hash, v->buf + v->start, taken);
            gf_request_advance(&v->d, taken);
            *left -= taken;
            if (r.kind == GF_REQ_PAYLOAD && !*left)
                finish_frame(v);
            break;
        }
        case GF_REQ_ERROR:
            REQUIRE(r.bytes == 0 && len >= GF_HEADER_BYTES);
            REQUIRE(!v->payload_left && !v->skip_left);
            REQUIRE(gf_status_is_fatal(r.status) || r.status == GF_ERR_BAD_LENGTH);
            REQUIRE(memchr(r.text, '\0', sizeof r.text) != NULL && r.text[0] != '\0');
            mix_u64(&v->transcript, r.status);
            mix(&v->transcript, r.text, strlen(r.text));
            v->failed = 1;
            return;
        default: REQUIRE(0);
        }
        v->start += taken;
        v->consumed += taken;
        check_state(v);
    }
}

/* Feeds `len` bytes as a socket would deliver them into the bounded buffer. */
static void feed(driver *v, const uint8_t *p, size_t len) {
    while (len > 0 && !v->failed) {
        memmove(v->buf, v->buf + v->start, v->end - v->start);
        v->end -= v->start;
        v->start = 0;
        size_t room = v->sc->buf_bytes - v->end;
        REQUIRE(room > 0);
        size_t n = len < room ? len : room;
        memcpy(v->buf + v->end, p, n);
        v->end += n;
        v->fed += n;
        p += n;
        len -= n;
        drain(v);
    }
}

/* Runs the stream s[n] through a driver as `sc` says; returns its transcript
 * and, in *consumed, the bytes that events covered. */
static uint64_t run(const script *sc, const uint8_t *s, size_t n, uint64_t *consumed) {
    driver v = {.sc = sc, .payload_hash = FNV_OFFSET, .transcript = FNV_OFFSET};
    v.buf = malloc(sc->buf_bytes);
    REQUIRE(v.buf != NULL);
    gf_request_init(&v.d, sc->max_frame_bytes);
    check_state(&v);

    size_t pos = 0;
    for (size_t i = 0; pos < n && !v.failed; i++) {
        size_t c = sc->chunks[i % CHUNK_COUNT];
        if (c > n - pos)
            c = n - pos;
        feed(&v, s + pos, c);
        pos += c;
    }
    /* Every byte fed is accounted for: covered by an event or still here. */
    REQUIRE(v.consumed + (v.end - v.start) == v.fed);
    REQUIRE(v.failed || v.fed == n);
    if (!v.failed) {
        REQUIRE(v.payload_left || v.skip_left ? v.end == v.start
                                              : v.end - v.start < GF_HEADER_BYTES);
    }
    mix_u64(&v.transcript, (uint64_t)v.failed);
    *consumed = v.consumed;
    free(v.buf);
    return v.transcript;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < CONTROL_BYTES)
        return 0;
    script sc = {
        .max_frame_bytes = limits[data[0] % LIMIT_COUNT],
        .refuse = data[1],
        .defer = data[2],
        .partial = data[3],
        .buf_bytes = GF_HEADER_BYTES + data[4] % (ROOM_MAX_BYTES + 1),
    };
    for (size_t i = 0; i < CHUNK_COUNT; i++)
        sc.chunks[i] = 1 + data[5 + i] % CHUNK_MAX_BYTES;
    const uint8_t *s = data + CONTROL_BYTES;
    size_t n = size - CONTROL_BYTES;

    uint64_t consumed_cut, consumed_whole;
    uint64_t cut = run(&sc, s, n, &consumed_cut);

    script whole = sc;
    whole.defer = whole.partial = 0;
    whole.buf_bytes = n > GF_HEADER_BYTES ? n : GF_HEADER_BYTES;
    for (size_t i = 0; i < CHUNK_COUNT; i++)
        whole.chunks[i] = whole.buf_bytes;
    REQUIRE(run(&whole, s, n, &consumed_whole) == cut);
    REQUIRE(consumed_whole == consumed_cut);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Decoding a connection's request stream: bytes in, requests or a protocol
 * error out.  A pure state machine with no I/O, no libuv and no allocation,
 * so that tests and fuzzers can feed it any byte stream split at any point.
 * The connection (conn.c) drives it; nothing else does.
 *
 * A request stream is a sequence of 32-byte headers, each followed by its
 * payload (only FRAME requests carry one).  The caller looks at what comes
 * next with gf_request_next(), which consumes nothing, and then says what it
 * did with it:
 *
 *   GF_REQ_HEADER   a whole valid header.  gf_request_accept(): the caller
 *                   takes the payload that follows (PAYLOAD events, or bytes
 *                   read out of band, reported with gf_request_advance);
 *                   gf_request_refuse(): the decoder skips it (SKIP events).
 *                   Neither: the header stays where it is (the caller waits
 *                   for a slot and asks again later).
 *   GF_REQ_PAYLOAD  `bytes` bytes of the accepted frame's payload at the
 *                   front of the buffer; gf_request_advance() once taken.
 *   GF_REQ_SKIP     `bytes` bytes of a refused payload; gf_request_advance().
 *   GF_REQ_ERROR    a header the stream cannot go past: `status` and `text`
 *                   say why, for the ERROR reply.  Nothing after it can be
 *                   decoded: the connection answers and closes.
 *   GF_REQ_MORE     nothing can be decided without more bytes.
 */
#ifndef GF_REQUEST_H
#define GF_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

typedef struct gf_request_decoder {
    uint64_t max_frame_bytes; /* larger FRAME payloads are refused from the header */
    uint64_t payload_left;    /* the accepted frame's payload bytes still to come  */
    uint64_t skip_left;       /* a refused request's payload bytes still to skip   */
} gf_request_decoder;

enum gf_request_kind { GF_REQ_MORE, GF_REQ_HEADER, GF_REQ_PAYLOAD, GF_REQ_SKIP, GF_REQ_ERROR };

typedef struct gf_request {
    enum gf_request_kind kind;
    size_t bytes;                       /* bytes at the front of the buffer this event covers */
    gf_header header;                   /* HEADER; ERROR: every field as far as decoded       */
    uint32_t status;                    /* ERROR: the gf_status for the reply                 */
    char text[GF_ERROR_TEXT_MAX_BYTES]; /* ERROR: the reply's message text  */
} gf_request;

/* A decoder at the start of a stream. */
void gf_request_init(gf_request_decoder *d, uint64_t max_frame_bytes);

/* Says what buf[0..len) begins with; changes nothing. */
void gf_request_next(const gf_request_decoder *d, const uint8_t *buf, size_t len, gf_request *out);

/* The HEADER event `r` is consumed; the caller takes its payload. */
void gf_request_accept(gf_request_decoder *d, const gf_request *r);

/* The HEADER event `r` is consumed; its payload will be skipped. */
void gf_request_refuse(gf_request_decoder *d, const gf_request *r);

/* `n` bytes of the payload being taken or skipped went by (at most what is left). */
void gf_request_advance(gf_request_decoder *d, uint64_t n);

/* Nonzero while the accepted frame's payload is still arriving. */
static inline int gf_request_in_payload(const gf_request_decoder *d) {
    return d->payload_left > 0;
}

#endif

/* SPDX-License-Identifier: MIT */
#include "request.h"

#include <assert.h>

#include "util.h"

void gf_request_init(gf_request_decoder *d, uint64_t max_frame_bytes) {
    *d = (gf_request_decoder){.max_frame_bytes = max_frame_bytes};
}

/* The four bytes where the magic should be, as the client sent them. */
static unsigned magic_sent(const uint8_t *p) {
    return p[0] | p[1] << 8 | p[2] << 16 | (unsigned)p[3] << 24;
}

/* Fills out's ERROR fields for a header gf_header_parse refused with `status`. */
static void header_error(const gf_request_decoder *d, const uint8_t *buf, uint32_t status,
                         gf_request *out) {
    const gf_header *h = &out->header;
    out->kind = GF_REQ_ERROR;
    out->status = status;
    if (status == GF_ERR_TOO_LARGE)
        gf_errorf(out->text, sizeof out->text, "payload of %llu bytes exceeds max_frame_bytes %llu",
                  (unsigned long long)h->payload_bytes, (unsigned long long)d->max_frame_bytes);
    else if (status == GF_ERR_BAD_LENGTH && h->type != GF_MSG_FRAME &&
             h->type != GF_MSG_DEVICE_REGION_ADD)
        gf_errorf(out->text, sizeof out->text, "a %s request carries no payload, got %llu bytes",
                  gf_msg_type_name(h->type), (unsigned long long)h->payload_bytes);
    else if (status == GF_ERR_BAD_LENGTH)
        gf_errorf(out->text, sizeof out->text, "a %s request carries %u bytes of payload, got %llu",
                  h->type == GF_MSG_FRAME ? "shm or device frame" : gf_msg_type_name(h->type),
                  h->type == GF_MSG_FRAME ? GF_SHM_FRAME_BYTES : GF_DEVICE_REGION_BYTES,
                  (unsigned long long)h->payload_bytes);
    else
        gf_errorf(out->text, sizeof out->text,
                  "bad header: %s (magic 0x%08x, version %u, type %u, flags 0x%x)",
                  gf_status_name(status), magic_sent(buf), h->version, h->type, h->flags);
}

void gf_request_next(const gf_request_decoder *d, const uint8_t *buf, size_t len, gf_request *out) {
    out->bytes = 0;
    uint64_t left = d->skip_left ? d->skip_left : d->payload_left;
    if (left) {
        out->kind = len == 0 ? GF_REQ_MORE : d->skip_left ? GF_REQ_SKIP : GF_REQ_PAYLOAD;
        out->bytes = len < left ? len : (size_t)left;
        return;
    }
    int rc = gf_header_parse(buf, len, GF_ROLE_DAEMON, d->max_frame_bytes, &out->header);
    if (rc == 0) {
        out->kind = GF_REQ_MORE;
    } else if (rc < 0) {
        header_error(d, buf, (uint32_t)-rc, out);
    } else {
        out->kind = GF_REQ_HEADER;
        out->bytes = GF_HEADER_BYTES;
    }
}

void gf_request_accept(gf_request_decoder *d, const gf_request *r) {
    assert(r->kind == GF_REQ_HEADER && !d->payload_left && !d->skip_left);
    d->payload_left = r->header.payload_bytes;
}

void gf_request_refuse(gf_request_decoder *d, const gf_request *r) {
    assert(r->kind == GF_REQ_HEADER && !d->payload_left && !d->skip_left);
    d->skip_left = r->header.payload_bytes;
}

void gf_request_advance(gf_request_decoder *d, uint64_t n) {
    uint64_t *left = d->skip_left ? &d->skip_left : &d->payload_left;
    assert(n <= *left);
    *left -= n;
}

/* SPDX-License-Identifier: MIT */
/*
 * Replies (reply.h): the encoder, and the queue: enqueueing, the batch for
 * one sendmsg, and the counters that bound a connection's output.
 */
#include "reply.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Encodes the header of a reply of `type`, `status`, `flags` and
 * `payload_bytes` to the request `req` into `out`: the one place reply
 * headers are built.  A version the daemon does not speak gets a version-1
 * reply. */
static void encode(uint8_t out[GF_HEADER_BYTES], const gf_header *req, uint8_t type, uint16_t flags,
                   uint32_t status, uint64_t payload_bytes) {
    uint8_t version = req ? req->version : GF_PROTOCOL_VERSION;
    if (!gf_version_known(version))
        version = GF_PROTOCOL_VERSION;
    gf_header h = {.version = version,
                   .type = type,
                   .flags = flags,
                   .frame_id = req ? req->frame_id : 0,
                   .pipeline_id = req ? req->pipeline_id : 0,
                   .status = status,
                   .payload_bytes = payload_bytes};
    gf_header_encode(&h, out);
}

void gf_reply_result(gf_reply *r, const gf_header *req, const void *body, size_t body_bytes,
                     uint16_t flags) {
    encode(r->header, req, GF_MSG_RESULT, flags, GF_OK, body_bytes);
    r->body = body;
    r->body_bytes = body_bytes;
    r->ready = 1;
}

void gf_reply_error(gf_reply *r, const gf_header *req, uint32_t status, char *text, size_t len) {
    r->owned = text;
    r->body = text;
    r->body_bytes = text ? len : 0;
    encode(r->header, req, GF_MSG_ERROR, 0, status, r->body_bytes);
    r->ready = 1;
}

gf_reply *gf_reply_loose(uint8_t type, const gf_header *h, uint32_t status, char *body,
                         size_t body_bytes) {
    gf_reply *r = calloc(1, sizeof *r);
    if (!r) {
        free(body);
        return NULL;
    }
    gf_link_init(&r->link);
    r->owned = body;
    r->body = body;
    r->body_bytes = body ? body_bytes : 0;
    encode(r->header, h, type, 0, status, r->body_bytes);
    r->ready = 1;
    return r;
}

gf_reply *gf_reply_pending(const gf_header *h, gf_reply_release_fn release, void *extra) {
    gf_reply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    gf_link_init(&r->link);
    r->request = *h;
    r->release = release;
    r->extra = extra;
    return r;
}

void gf_reply_send_error(int fd, const gf_header *req, uint32_t status, const char *text) {
    uint8_t msg[GF_HEADER_BYTES + GF_ERROR_TEXT_MAX_BYTES];
    size_t len = strlen(text);
    if (len > GF_ERROR_TEXT_MAX_BYTES)
        len = GF_ERROR_TEXT_MAX_BYTES;
    encode(msg, req, GF_MSG_ERROR, 0, status, len);
    memcpy(msg + GF_HEADER_BYTES, text, len);
    (void)send(fd, msg, GF_HEADER_BYTES + len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void gf_replyq_init(gf_reply_queue *q, uint64_t *total_loose_bytes,
                    uint64_t *loose_since_trim_bytes, atomic_uint_fast64_t *daemon_loose_bytes) {
    q->daemon_loose_bytes = daemon_loose_bytes;
    gf_list_init(&q->replies);
    q->tx_offset = 0;
    q->unfinished = q->loose_count = 0;
    q->loose_bytes = 0;
    q->total_loose_bytes = total_loose_bytes;
    q->loose_since_trim_bytes = loose_since_trim_bytes;
}

static void loose_add(gf_reply_queue *q, uint64_t bytes) {
    q->loose_bytes += bytes;
    *q->total_loose_bytes += bytes;
    if (q->daemon_loose_bytes)
        atomic_fetch_add_explicit(q->daemon_loose_bytes, bytes, memory_order_relaxed);
    *q->loose_since_trim_bytes += bytes;
}

void gf_replyq_push(gf_reply_queue *q, gf_reply *r, struct gf_conn *conn) {
    r->conn = conn;
    q->unfinished++;
    if (!r->frame) {
        q->loose_count++;
        loose_add(q, r->body_bytes);
    }
    gf_list_push_back(&q->replies, &r->link);
}

void gf_replyq_answer(gf_reply_queue *q, gf_reply *r, uint8_t type, uint32_t status, char *owned,
                      size_t bytes) {
    assert(!r->frame && !r->owned && !r->ready);
    r->owned = owned;
    r->body = owned;
    r->body_bytes = owned ? bytes : 0;
    r->release = NULL;
    r->extra = NULL;
    loose_add(q, r->body_bytes);
    encode(r->header, &r->request, type, 0, status, r->body_bytes);
    r->ready = 1;
}

void gf_replyq_remove(gf_reply *r) {
    gf_list_remove(&r->link);
}

void gf_replyq_replace(gf_reply_queue *q, gf_reply *r, gf_reply *with) {
    assert(!with->frame && gf_linked(&r->link));
    with->conn = r->conn;
    gf_link_insert_after(&r->link, &with->link);
    gf_list_remove(&r->link);
    q->unfinished++;
    q->loose_count++;
    loose_add(q, with->body_bytes);
}

void gf_replyq_release(gf_reply_queue *q, gf_reply *r, int delivered) {
    assert(q->unfinished > 0 && !gf_linked(&r->link));
    if (r->release) {
        gf_reply_release_fn release = r->release;
        r->release = NULL;
        release(r, delivered);
    }
    q->unfinished--;
    if (!r->frame) {
        assert(q->loose_count > 0 && q->loose_bytes >= r->body_bytes);
        q->loose_count--;
        q->loose_bytes -= r->body_bytes;
        *q->total_loose_bytes -= r->body_bytes;
        if (q->daemon_loose_bytes)
            atomic_fetch_sub_explicit(q->daemon_loose_bytes, r->body_bytes, memory_order_relaxed);
    }
    free(r->owned);
    r->owned = NULL;
    r->body = NULL;
    r->conn = NULL;
}

gf_reply *gf_replyq_head(const gf_reply_queue *q) {
    gf_link *l = gf_list_front(&q->replies);
    return l ? gf_list_entry(l, gf_reply, link) : NULL;
}

int gf_replyq_can_write(const gf_reply_queue *q) {
    const gf_reply *r = gf_replyq_head(q);
    return r && r->ready;
}

/* The buffers of one reply: its header, then its body if it has one. */
static unsigned reply_iov(const gf_reply *r, struct iovec *iov) {
    iov[0] = (struct iovec){.iov_base = (void *)r->header, .iov_len = GF_HEADER_BYTES};
    if (r->body_bytes == 0)
        return 1;
    iov[1] = (struct iovec){.iov_base = (void *)r->body, .iov_len = r->body_bytes};
    return 2;
}

unsigned gf_replyq_gather(const gf_reply_queue *q, struct iovec *iov) {
    unsigned count = 0, n = 0;
    for (gf_link *l = gf_list_front(&q->replies); l && n < GF_WRITE_BATCH_MAX;
         l = gf_list_next(&q->replies, l), n++) {
        const gf_reply *r = gf_list_entry(l, gf_reply, link);
        if (!r->ready)
            break;
        count += reply_iov(r, iov + count);
    }
    /* Drop what of the head already went out. */
    size_t skip = q->tx_offset;
    unsigned first = 0;
    while (first < count && skip >= iov[first].iov_len)
        skip -= iov[first++].iov_len;
    if (first > 0)
        for (unsigned i = first; i < count; i++)
            iov[i - first] = iov[i];
    count -= first;
    if (count) {
        iov[0].iov_base = (char *)iov[0].iov_base + skip;
        iov[0].iov_len -= skip;
    }
    return count;
}

int gf_replyq_consume(gf_reply_queue *q, size_t sent, gf_link *done) {
    size_t left = sent + q->tx_offset;
    gf_reply *r;
    while ((r = gf_replyq_head(q)) && r->ready) {
        size_t bytes = GF_HEADER_BYTES + r->body_bytes;
        if (left < bytes)
            break;
        left -= bytes;
        gf_list_remove(&r->link);
        gf_list_push_back(done, &r->link);
    }
    q->tx_offset = left;
    return left > 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The reply queue (reply.h): headers, enqueueing, the batch for one sendmsg,
 * and the counters that bound a connection's output.
 */
#include "reply.h"

#include <assert.h>
#include <stdlib.h>

void gf_reply_header(uint8_t out[GF_HEADER_BYTES], uint8_t version, uint8_t type, uint16_t flags,
                     uint64_t frame_id, uint32_t pipeline_id, uint32_t status,
                     uint64_t payload_bytes) {
    if (version < GF_PROTOCOL_VERSION || version > GF_PROTOCOL_VERSION_MAX)
        version = GF_PROTOCOL_VERSION;
    gf_header h = {.version = version,
                   .type = type,
                   .flags = flags,
                   .frame_id = frame_id,
                   .pipeline_id = pipeline_id,
                   .status = status,
                   .payload_bytes = payload_bytes};
    gf_header_encode(&h, out);
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
    gf_reply_header(r->header, h->version, type, 0, h->frame_id, h->pipeline_id, status,
                    r->body_bytes);
    r->ready = 1;
    return r;
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

void gf_replyq_set_body(gf_reply_queue *q, gf_reply *r, char *owned, size_t bytes) {
    assert(!r->frame && !r->owned);
    r->owned = owned;
    r->body = owned;
    r->body_bytes = owned ? bytes : 0;
    loose_add(q, r->body_bytes);
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

void gf_replyq_release(gf_reply_queue *q, gf_reply *r) {
    assert(q->unfinished > 0 && !gf_linked(&r->link));
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

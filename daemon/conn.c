/*
 * One client connection, from accept to close: it reads and frames requests
 * (request.c decodes them), claims a slot for each frame and receives the
 * payload straight into the slot's input buffer, queues one reply per request
 * and writes them strictly in request order, and closes.
 *
 * Where a frame goes in this file:
 *   read     on_alloc / on_read -> conn_process -> frame_begin (slot claim)
 *   submit   frame_begin / on_read -> gf__server_submit (server.c)
 *   answer   gf__conn_flush -> on_write -> gf__reply_finish (slot release)
 *
 * Rules it keeps:
 * - A slot belongs to exactly one frame from its claim in frame_begin until
 *   the write callback of that frame's reply (gf__reply_finish) returns it.
 * - Every request gets exactly one reply (result or error) while the
 *   connection is open, in the order the requests arrived.
 * - A connection is reference-counted (its handle, plus one per unfinished
 *   reply): closing it never frees memory that a frame still on the engine or
 *   a pending write uses; such a frame's result is dropped when it completes
 *   and its slot still returns.
 * - alloc_cb never returns an empty buffer to pause reading (libuv would spin
 *   on UV_ENOBUFS): reading is stopped with uv_read_stop instead.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server_internal.h"

static void conn_process(gf_conn *c);
static void conn_settle(gf_conn *c);
static void conn_update_reading(gf_conn *c);
static void conn_track_request(gf_conn *c);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* ---- lifetime ------------------------------------------------------------------ */

static void conn_ref(gf_conn *c) {
    c->refs++;
}

static void conn_unref(gf_conn *c) {
    assert(c->refs > 0);
    if (--c->refs > 0)
        return;
    assert(c->closing && !c->replies_head && c->replies_unfinished == 0);
    free(c);
}

static void on_conn_closed(uv_handle_t *h) {
    gf_conn *c = h->data;
    gf_server *srv = c->srv;
    conn_unref(c);
    gf__server_check_drained(srv);
}

void gf__conn_accept(gf_server *srv) {
    gf_conn *c = calloc(1, sizeof *c);
    if (!c) {
        GF_LOG_ERR("accept: out of memory for a connection");
        return;
    }
    c->srv = srv;
    c->refs = 1; /* the handle's, dropped in on_conn_closed */
    uv_pipe_init(srv->loop, &c->pipe, 0);
    c->pipe.data = c;
    int rc = uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->pipe);
    if (rc < 0) {
        GF_LOG_WRN("accept: %s", uv_strerror(rc));
        c->closing = 1;
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
        return;
    }
    gf_request_init(&c->decoder, srv->cfg->max_frame_bytes);
    c->last_input_ns = gf_now_ns();
    c->id = ++srv->next_conn_id;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->stats.connections_open++;
    srv->stats.connections_total++;
    GF_LOG_DBG("connection %llu: accepted", (unsigned long long)c->id);
    conn_update_reading(c);
}

void gf__conn_resume(gf_conn *c) {
    conn_ref(c);
    conn_process(c);
    conn_settle(c);
    conn_update_reading(c);
    conn_track_request(c);
    conn_unref(c);
}

/* ---- replies ------------------------------------------------------------------- */

void gf__reply_header(uint8_t out[GF_HEADER_BYTES], uint8_t type, uint64_t frame_id,
                      uint32_t pipeline_id, uint32_t status, uint64_t payload_bytes) {
    gf_header h = {.version = GF_PROTOCOL_VERSION,
                   .type = type,
                   .frame_id = frame_id,
                   .pipeline_id = pipeline_id,
                   .status = status,
                   .payload_bytes = payload_bytes};
    gf_header_encode(&h, out);
}

/* Appends `r` to the connection's queue; it takes one connection reference. */
static void reply_enqueue(gf_conn *c, gf_queued_reply *r) {
    r->conn = c;
    r->next = NULL;
    conn_ref(c);
    c->replies_unfinished++;
    if (!r->slot)
        c->loose_replies++;
    if (c->replies_tail)
        c->replies_tail->next = r;
    else
        c->replies_head = r;
    c->replies_tail = r;
}

/*
 * A reply is done with: `delivered` (written), or dropped because its
 * connection went away; a frame's result that was computed but never
 * delivered is counted as dropped here, and nowhere else.  Frees what the
 * reply owns, returns its slot, goes on with requests the connection had
 * buffered, and closes a connection that has nothing left to say.
 */
void gf__reply_finish(gf_queued_reply *r, int delivered) {
    gf_conn *c = r->conn;
    gf_server *srv = c->srv;
    gf_slot *slot = r->slot;
    /* A frame never submitted was truncated, one that failed was counted then. */
    if (slot && !delivered && slot->status == GF_OK && slot->submitted_ns)
        srv->stats.frames_dropped++;
    free(r->body);
    r->body = NULL;
    c->replies_unfinished--;
    if (slot) {
        slot->reply.conn = NULL;
        gf_slot_release(&srv->ring, slot);
    } else {
        c->loose_replies--;
        free(r);
    }
    /* c stays valid until conn_unref below. */
    if (!c->closing && c->fatal && c->replies_unfinished == 0)
        gf__conn_close(c);
    /* Requests already buffered may have waited for this reply to go out
     * (the cap on loose replies); no new bytes need arrive to go on. */
    gf__conn_resume(c);
    conn_unref(c);
    if (slot)
        gf__server_slot_freed(srv);
    else
        gf__server_check_drained(srv);
}

/* The buffers of one reply: its header, then its body or the slot's output. */
static unsigned reply_bufs(gf_queued_reply *r, uv_buf_t *bufs) {
    /* uv_buf_t's length is a size_t on Unix; uv_buf_init's is not. */
    bufs[0] = (uv_buf_t){.base = (char *)r->header, .len = GF_HEADER_BYTES};
    if (r->body && r->body_bytes) {
        bufs[1] = (uv_buf_t){.base = r->body, .len = r->body_bytes};
        return 2;
    }
    if (!r->body && r->slot && r->slot->out_bytes) {
        bufs[1] = (uv_buf_t){.base = (char *)r->slot->out_host, .len = r->slot->out_bytes};
        return 2;
    }
    return 1;
}

/*
 * A batch of replies went out (or failed, or was cancelled by a close).  The
 * batch is the chain that gf__conn_flush detached from the queue, first to
 * last through `next`; each reply is finished in order.
 */
static void on_write(uv_write_t *req, int status) {
    gf_queued_reply *r = container_of(req, gf_queued_reply, write_req);
    gf_conn *c = r->conn;
    c->writes_pending--;
    c->write_progress_ns = gf_now_ns();
    if (status < 0 && status != UV_ECANCELED && !c->closing) {
        GF_LOG_INF("connection %llu: write failed (%s); closing", (unsigned long long)c->id,
                   uv_strerror(status));
        gf__conn_close(c);
    }
    while (r) {
        /* Read it first: finishing a frame's reply hands its slot to the next frame. */
        gf_queued_reply *next = r->next;
        if (status == 0 && r->slot && r->slot->status == GF_OK)
            gf__frame_answered(c->srv, c, r->slot);
        gf__reply_finish(r, status == 0);
        r = next;
    }
}

/*
 * Writes, in order, every reply at the head of the queue that is ready: up to
 * GF_WRITE_BATCH_MAX of them in one uv_write, so that a burst of small results
 * costs one writev(2), not one each.  The batch uses its first reply's
 * uv_write_t.
 */
void gf__conn_flush(gf_conn *c) {
    while (c->replies_head && c->replies_head->ready && !c->closing) {
        uv_buf_t bufs[2 * GF_WRITE_BATCH_MAX];
        unsigned nbufs = 0, count = 0;
        gf_queued_reply *first = c->replies_head, *last = NULL;
        for (gf_queued_reply *r = first; r && r->ready && count < GF_WRITE_BATCH_MAX;
             r = r->next, count++) {
            nbufs += reply_bufs(r, bufs + nbufs);
            last = r;
        }
        c->replies_head = last->next;
        if (!c->replies_head)
            c->replies_tail = NULL;
        last->next = NULL;
        int rc = uv_write(&first->write_req, (uv_stream_t *)&c->pipe, bufs, nbufs, on_write);
        if (rc == 0 && c->writes_pending++ == 0)
            c->write_progress_ns = gf_now_ns();
        if (rc < 0) {
            GF_LOG_INF("connection %llu: cannot write (%s); closing", (unsigned long long)c->id,
                       uv_strerror(rc));
            conn_ref(c);
            gf__conn_close(c);
            for (gf_queued_reply *r = first, *next; r; r = next) {
                next = r->next;
                gf__reply_finish(r, 0);
            }
            conn_unref(c);
            return;
        }
    }
}

/* Queues a loose reply (not tied to a slot) to the request `h`, owning `body`
 * (malloc'd or NULL); like every reply it echoes the request's frame_id and
 * pipeline_id (PROTOCOL.md). */
static void reply_loose(gf_conn *c, uint8_t type, const gf_header *h, uint32_t status, char *body,
                        size_t body_bytes) {
    gf_queued_reply *r = calloc(1, sizeof *r);
    if (!r) {
        free(body);
        GF_LOG_ERR("connection %llu: out of memory for a reply; closing",
                   (unsigned long long)c->id);
        gf__conn_close(c);
        return;
    }
    r->body = body;
    r->body_bytes = body ? body_bytes : 0;
    gf__reply_header(r->header, type, h->frame_id, h->pipeline_id, status, r->body_bytes);
    r->ready = 1;
    reply_enqueue(c, r);
    gf__conn_flush(c);
}

/*
 * Queues an ERROR reply for the request `h` with `status` and the message
 * `text`, and counts it.  A fatal status also stops reading: the connection
 * closes once its replies are out.
 */
static void conn_reject_text(gf_conn *c, const gf_header *h, uint32_t status, const char *text) {
    c->srv->stats.rejected[status]++;
    GF_LOG_DBG("connection %llu: frame %llu refused: %s: %s", (unsigned long long)c->id,
               (unsigned long long)h->frame_id, gf_status_name(status), text);
    if (gf_status_is_fatal(status)) {
        c->fatal = 1;
        c->srv->stats.connections_rejected++;
        gf_log_limited(&c->srv->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_INFO,
                       "connection %llu: %s (%s); closing after replies", (unsigned long long)c->id,
                       gf_status_name(status), text);
    }
    size_t len = strlen(text);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, text, len + 1);
    /* Out of memory leaves the ERROR without its text, not the request without a reply. */
    reply_loose(c, GF_MSG_ERROR, h, status, body, len);
}

/* Queues a LIST, STATS or TRACE reply holding `doc` (consumed). */
static void conn_reply_json(gf_conn *c, const gf_header *h, cJSON *doc) {
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) {
        char why[GF_ERROR_TEXT_MAX_BYTES];
        gf_errorf(why, sizeof why, "out of memory building the %s reply",
                  gf_msg_type_name(h->type));
        conn_reject_text(c, h, GF_ERR_INTERNAL, why);
        return;
    }
    reply_loose(c, h->type, h, GF_OK, text, strlen(text));
}

/* ---- the read path ---------------------------------------------------------------- */

/* A request was answered or refused in full: the next one's clock starts
 * when its first byte is seen (conn_track_request). */
static void request_done(gf_conn *c) {
    c->request_begun_ns = 0;
}

/*
 * After reading and processing: a request is begun while any of it is
 * buffered, its payload is arriving or being skipped.  Waiting for a slot is
 * the daemon's doing, so it stops the clock.
 */
static void conn_track_request(gf_conn *c) {
    int begun = c->slot || c->decoder.skip_left || c->buf_end > c->buf_start;
    if (!begun || c->waiting)
        c->request_begun_ns = 0;
    else if (!c->request_begun_ns)
        c->request_begun_ns = gf_now_ns();
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    gf_conn *c = h->data;
    (void)suggested;
    if (c->slot) {
        /* Straight into the slot's pinned input buffer: no staging copy. */
        uint64_t left = c->decoder.payload_left;
        buf->base = (char *)c->slot->in_host + (c->slot->in_bytes - left);
        buf->len = (size_t)left;
        return;
    }
    if (c->buf_start == c->buf_end) {
        c->buf_start = c->buf_end = 0;
    } else if (c->buf_start > 0) {
        memmove(c->buf, c->buf + c->buf_start, c->buf_end - c->buf_start);
        c->buf_end -= c->buf_start;
        c->buf_start = 0;
    }
    /* Reading is active only while the buffer holds less than one request
     * that fits it (a header, and a payload of at most
     * GF_STAGED_PAYLOAD_MAX_BYTES), so there is always room: never hand libuv
     * an empty buffer (it would spin). */
    assert(c->buf_end < sizeof c->buf);
    *buf = uv_buf_init((char *)c->buf + c->buf_end, (unsigned)(sizeof c->buf - c->buf_end));
}

/* The frame's payload is all in: the slot goes to the engine. */
static void frame_received(gf_conn *c) {
    gf_slot *s = c->slot;
    c->slot = NULL;
    request_done(c);
    gf__server_submit(c->srv, s);
}

/* Why a FRAME with header `h` cannot run, as an ERROR status and text, or 0. */
static uint32_t frame_check(const gf_conn *c, const gf_header *h, int64_t *out_bytes, char *why,
                            size_t why_len) {
    const gf_config *cfg = c->srv->cfg;
    uint64_t out_cap = c->srv->ring.slots[0].out_capacity_bytes;
    if (h->pipeline_id >= cfg->pipeline_count) {
        gf_errorf(why, why_len,
                  "pipeline id %u is not configured (ids 0..%zu; send LIST to see them)",
                  h->pipeline_id, cfg->pipeline_count - 1);
        return GF_ERR_UNKNOWN_PIPELINE;
    }
    const gf_pipeline *p = &cfg->pipelines[h->pipeline_id];
    char rule[160];
    *out_bytes = p->kind->output_bytes(&p->params, h->payload_bytes, rule, sizeof rule);
    if (*out_bytes < 0) {
        gf_errorf(why, why_len, "pipeline %s: %s", p->name, rule);
        return GF_ERR_BAD_LENGTH;
    }
    if ((uint64_t)*out_bytes > out_cap) {
        gf_errorf(why, why_len, "pipeline %s: output of %lld bytes exceeds the slot's %llu",
                  p->name, (long long)*out_bytes, (unsigned long long)out_cap);
        return GF_ERR_BAD_LENGTH;
    }
    return GF_OK;
}

/*
 * A FRAME header was decoded: refuse it, or claim a slot for it and take
 * whatever part of its payload is already buffered.  Returns 1 if the header
 * was consumed, 0 if the connection must wait: for the rest of a small
 * payload, or for a slot.
 */
static int frame_begin(gf_conn *c, const gf_request *req) {
    gf_server *srv = c->srv;
    const gf_header *h = &req->header;
    if (!c->header_seen_ns)
        c->header_seen_ns = gf_now_ns();
    char why[GF_ERROR_TEXT_MAX_BYTES];
    int64_t out_bytes = 0;
    uint32_t status = frame_check(c, h, &out_bytes, why, sizeof why);
    if (status != GF_OK) {
        srv->stats.frames_received++;
        srv->stats.frames_failed++;
        c->header_seen_ns = 0;
        c->buf_start += req->bytes;
        gf_request_refuse(&c->decoder, req);
        if (!c->decoder.skip_left)
            request_done(c);
        conn_reject_text(c, h, status, why);
        return 1;
    }
    /* A payload that fits the read buffer is taken in whole before a slot is
     * claimed, so a client that stalls mid-payload holds no slot (README.md,
     * "Fair slots"); a larger one is read straight into the slot. */
    if (h->payload_bytes <= GF_STAGED_PAYLOAD_MAX_BYTES &&
        c->buf_end - c->buf_start < req->bytes + h->payload_bytes)
        return 0;
    gf_slot *s = gf_slot_claim(&srv->ring);
    if (!s) {
        /* No free slot: stop reading until one frees (backpressure). */
        gf__server_wait_for_slot(srv, c);
        return 0;
    }
    srv->stats.frames_received++;
    c->buf_start += req->bytes;
    gf_request_accept(&c->decoder, req);
    const gf_pipeline *p = &srv->cfg->pipelines[h->pipeline_id];
    gf_slot_assign(s, p, h, (uint64_t)out_bytes, c->header_seen_ns);
    c->header_seen_ns = 0;
    reply_enqueue(c, &s->reply);
    c->slot = s;

    /* Whatever part of the payload came in with the header (at most
     * GF_STAGED_PAYLOAD_MAX_BYTES) is copied; the rest is read in place. */
    gf_request body;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &body);
    if (body.kind == GF_REQ_PAYLOAD) {
        memcpy(s->in_host, c->buf + c->buf_start, body.bytes);
        c->buf_start += body.bytes;
        gf_request_advance(&c->decoder, body.bytes);
    }
    if (!gf_request_in_payload(&c->decoder))
        frame_received(c);
    return 1;
}

/* Answers a request that needs no slot (LIST, STATS, TRACE). */
static void answer_query(gf_conn *c, const gf_request *req) {
    gf_server *srv = c->srv;
    const gf_header *h = &req->header;
    c->buf_start += req->bytes;
    gf_request_accept(&c->decoder, req); /* no payload: validated by the decoder */
    request_done(c);
    switch (h->type) {
    case GF_MSG_LIST:
        srv->stats.requests_list++;
        conn_reply_json(c, h, gf__list_document(srv));
        break;
    case GF_MSG_STATS:
        srv->stats.requests_stats++;
        conn_reply_json(c, h, gf__stats_document(srv));
        break;
    case GF_MSG_TRACE:
        srv->stats.requests_trace++;
        conn_reply_json(c, h, gf__trace_document(srv, h->pipeline_id));
        break;
    default: assert(!"the decoder let through a type the daemon does not take");
    }
}

/* Consumes buffered bytes until it needs more, must wait, or must stop. */
static void conn_process(gf_conn *c) {
    while (!c->closing && !c->fatal && !c->waiting && !c->slot &&
           c->loose_replies < GF_CONN_MAX_LOOSE_REPLIES && !c->srv->draining) {
        gf_request req;
        gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
        switch (req.kind) {
        case GF_REQ_MORE: return;
        case GF_REQ_SKIP:
            c->buf_start += req.bytes;
            gf_request_advance(&c->decoder, req.bytes);
            if (!c->decoder.skip_left)
                request_done(c);
            break;
        case GF_REQ_ERROR:
            conn_reject_text(c, &req.header, req.status, req.text);
            /* The stream cannot be trusted past a bad header. */
            c->fatal = 1;
            return;
        case GF_REQ_HEADER:
            if (req.header.type != GF_MSG_FRAME)
                answer_query(c, &req);
            else if (!frame_begin(c, &req))
                return;
            break;
        case GF_REQ_PAYLOAD: assert(!"payload bytes outside a claimed slot"); return;
        }
    }
}

/* Starts or stops reading so that it happens exactly when it can progress. */
static void conn_update_reading(gf_conn *c) {
    if (c->closing)
        return;
    int want = !c->eof && !c->fatal && !c->waiting &&
               c->loose_replies < GF_CONN_MAX_LOOSE_REPLIES && (!c->srv->draining || c->slot);
    if (want && !c->reading)
        c->reading = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0;
    if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = 0;
    }
}

/* Takes back the slot of the frame whose payload is arriving: its reply,
 * the newest and not ready, leaves the queue unsent.  The caller counts it. */
static void conn_take_back_slot(gf_conn *c) {
    gf_slot *s = c->slot;
    gf_queued_reply **pp = &c->replies_head;
    gf_queued_reply *prev = NULL;
    while (*pp != &s->reply) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = NULL;
    c->replies_tail = prev;
    c->slot = NULL;
    gf_request_init(&c->decoder, c->decoder.max_frame_bytes);
    gf__reply_finish(&s->reply, 0);
}

/* The client left mid-payload: its frame is truncated. */
static void conn_truncate_frame(gf_conn *c) {
    gf_slot *s = c->slot;
    GF_LOG_INF("connection %llu: closed after %llu of %llu payload bytes of frame %llu",
               (unsigned long long)c->id,
               (unsigned long long)(s->in_bytes - c->decoder.payload_left),
               (unsigned long long)s->in_bytes, (unsigned long long)s->frame_id);
    c->srv->stats.frames_truncated++;
    conn_take_back_slot(c);
}

/* A request begun request_timeout_ms ago is still not in: its slot goes
 * back at once, the client is told request_timeout and the connection
 * closes once that is written (or write_timeout_ms later). */
static void conn_request_timed_out(gf_conn *c) {
    gf_server *srv = c->srv;
    gf_header h = {.frame_id = 0};
    char text[GF_ERROR_TEXT_MAX_BYTES];
    size_t n = gf_errorf(text, sizeof text, "request not complete within request_timeout_ms %u",
                         srv->cfg->request_timeout_ms);
    if (c->slot) {
        h.frame_id = c->slot->frame_id;
        h.pipeline_id = c->slot->pipeline_id;
        gf_errorf(text + n, sizeof text - n, " (%llu of %llu payload bytes of frame %llu)",
                  (unsigned long long)(c->slot->in_bytes - c->decoder.payload_left),
                  (unsigned long long)c->slot->in_bytes, (unsigned long long)h.frame_id);
        srv->stats.frames_failed++;
        conn_take_back_slot(c);
    }
    srv->stats.closed_request_timeout++;
    c->request_begun_ns = 0;
    conn_reject_text(c, &h, GF_ERR_REQUEST_TIMEOUT, text);
    conn_update_reading(c);
}

void gf__conn_check_deadlines(gf_conn *c, uint64_t now_ns) {
    const gf_config *cfg = c->srv->cfg;
    if (c->closing)
        return;
    if (c->request_begun_ns && !c->fatal &&
        now_ns - c->request_begun_ns > (uint64_t)cfg->request_timeout_ms * 1000000u) {
        conn_request_timed_out(c);
    } else if (c->writes_pending &&
               now_ns - c->write_progress_ns > (uint64_t)cfg->write_timeout_ms * 1000000u) {
        c->srv->stats.closed_write_timeout++;
        gf_log_limited(&c->srv->close_log, GF_CLOSE_LOG_PER_S, now_ns, GF_LOG_INFO,
                       "connection %llu: its replies made no progress for write_timeout_ms %u "
                       "(the client does not read); closing, %u repl%s dropped",
                       (unsigned long long)c->id, cfg->write_timeout_ms, c->replies_unfinished,
                       c->replies_unfinished == 1 ? "y" : "ies");
        gf__conn_close(c);
    } else if (cfg->idle_timeout_ms && !c->replies_unfinished && !c->request_begun_ns &&
               !c->waiting &&
               now_ns - c->last_input_ns > (uint64_t)cfg->idle_timeout_ms * 1000000u) {
        c->srv->stats.closed_idle++;
        gf_log_limited(&c->srv->close_log, GF_CLOSE_LOG_PER_S, now_ns, GF_LOG_INFO,
                       "connection %llu: idle for idle_timeout_ms %u; closing",
                       (unsigned long long)c->id, cfg->idle_timeout_ms);
        gf__conn_close(c);
    }
}

/*
 * After the client's EOF: a frame half received can never complete, and a
 * connection that owes nothing more and waits for nothing is closed.  Frames
 * already whole still get answered first (a half-closed client may be
 * waiting for results on the GPU).
 */
static void conn_settle(gf_conn *c) {
    if (!c->eof || c->closing || c->waiting)
        return;
    if (c->slot)
        conn_truncate_frame(c);
    if (!c->closing && c->replies_unfinished == 0)
        gf__conn_close(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    gf_conn *c = stream->data;
    (void)buf;
    if (nread == 0)
        return;
    conn_ref(c);
    c->last_input_ns = gf_now_ns();
    if (nread == UV_EOF) {
        c->eof = 1;
        c->reading = 0; /* libuv stops reading at EOF by itself */
    } else if (nread < 0) {
        GF_LOG_INF("connection %llu: read failed (%s); closing", (unsigned long long)c->id,
                   uv_strerror((int)nread));
        gf__conn_close(c);
    } else if (c->slot) {
        gf_request_advance(&c->decoder, (uint64_t)nread);
        if (!gf_request_in_payload(&c->decoder)) {
            frame_received(c);
            conn_process(c);
        }
    } else {
        c->buf_end += (size_t)nread;
        conn_process(c);
    }
    conn_settle(c);
    conn_update_reading(c);
    conn_track_request(c);
    conn_unref(c);
}

/*
 * Closes the connection.  Replies not yet written are dropped; a frame still
 * on the engine keeps its slot (and a reference) until it completes, and is
 * then dropped too.  Memory is freed when the last reference goes.
 */
void gf__conn_close(gf_conn *c) {
    gf_server *srv = c->srv;
    if (c->closing)
        return;
    c->closing = 1;
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->pipe);
    c->reading = 0;
    gf__server_stop_waiting(srv, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections_open--;
    conn_ref(c);
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
    if (c->slot)
        conn_truncate_frame(c);
    gf_queued_reply *r = c->replies_head;
    c->replies_head = c->replies_tail = NULL;
    while (r) {
        gf_queued_reply *next = r->next;
        r->next = NULL;
        /* A frame still on the engine is finished when it completes. */
        if (!r->slot || !r->slot->in_flight)
            gf__reply_finish(r, 0);
        r = next;
    }
    conn_unref(c);
}

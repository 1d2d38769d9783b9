/* SPDX-License-Identifier: MIT */
/*
 * One client connection (conn.h): its lifetime, its replies and what
 * finishing one releases, taking back a frame, eviction and closing.
 */
#include "conn.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"
#include "heap_trim.h"
#include "introspect.h"
#include "log.h"
#include "loopprof.h"
#include "region.h"
#include "shard_state.h"

/* A stream nobody serves: its socket and memfd are closed, the count the
 * shard was given for it goes back. */
static void stream_drop(gf_shard *sh, const gf_conn_stream *stream) {
    close(stream->fd);
    if (stream->pending_fd >= 0)
        close(stream->pending_fd);
    atomic_fetch_sub_explicit(&sh->self->connections, 1, memory_order_relaxed);
}

gf_conn *gf_conn_new(gf_shard *sh, const gf_conn_stream *stream) {
    GF_SHARD_OWNED(sh);
    gf_conn *c = calloc(1, sizeof *c);
    if (!c) {
        GF_LOG_ERR("accept: out of memory for a connection");
        stream_drop(sh, stream);
        return NULL;
    }
    int rc = uv_poll_init(sh->loop, &c->poll, stream->fd);
    if (rc < 0) {
        GF_LOG_WRN("accept: cannot watch the socket: %s", uv_strerror(rc));
        stream_drop(sh, stream);
        free(c);
        return NULL;
    }
    c->poll.data = c;
    c->shard = sh;
    c->stream = *stream;
    if (c->stream.id == 0) {
        c->stream.id = sh->next_conn_id;
        sh->next_conn_id += sh->group->count;
        sh->stats.connections_total++;
    }
    c->last_input_ns = gf_now_ns();
    gf_link_init(&c->throttled_link);
    gf_link_init(&c->blocked_link);
    gf_link_init(&c->gather_link);
    gf_list_init(&c->regions);
    gf_defer_item_init(&c->resume, sh->conn_resume);
    gf_sched_client_init(&c->sched);
    gf_request_init(&c->decoder, sh->cfg->max_frame_bytes);
    gf_replyq_init(&c->out, &sh->loose_bytes, &sh->loose_since_trim_bytes, &sh->group->loose_bytes);
    gf_list_push_back(&sh->conns, &c->link);
    sh->stats.connections_open++;
    GF_LOG_DBG("connection %llu: accepted (uid %u gid %u pid %u)", (unsigned long long)c->stream.id,
               c->stream.uid, c->stream.gid, c->stream.pid);
    return c;
}

void gf_conn_defer(gf_conn *c) {
    if (!c->handle_closed)
        gf_shard_defer(c->shard, &c->resume);
}

/* Frees the connection once nothing can reach it any more: its handle is
 * closed and no reply (no frame on the engine) is unfinished. */
static void conn_maybe_free(gf_conn *c) {
    if (!c->handle_closed || c->out.unfinished > 0)
        return;
    gf_defer_cancel(&c->resume);
    free(c->held);
    free(c);
}

static void on_conn_closed(uv_handle_t *h) {
    gf_conn *c = h->data;
    gf_shard *sh = c->shard;
    if (!c->moved)
        close(c->stream.fd);
    c->handle_closed = 1;
    gf_shard_defer(sh, &sh->drained);
    conn_maybe_free(c);
}

/* Stopped for the total's sake: resumed when it goes back under its limit
 * (gf_conn_finish). */
/* Every shard's loose reply bytes: max_output_bytes_total is the daemon's. */
static uint64_t daemon_loose(const gf_shard *sh) {
    return atomic_load_explicit(&sh->group->loose_bytes, memory_order_relaxed);
}

static void conn_throttle(gf_conn *c) {
    if (!gf_linked(&c->throttled_link))
        gf_list_push_back(&c->shard->throttled, &c->throttled_link);
}

int gf_conn_output_room(gf_conn *c) {
    gf_shard *sh = c->shard;
    if (c->out.loose_count >= GF_CONN_MAX_LOOSE_REPLIES ||
        c->out.loose_bytes >= sh->cfg->max_output_bytes)
        return 0;
    if (c->out.loose_bytes > 0 && daemon_loose(sh) >= sh->cfg->max_output_bytes_total) {
        conn_throttle(c);
        return 0;
    }
    return 1;
}

int gf_conn_may_build(gf_conn *c, uint64_t bytes) {
    gf_shard *sh = c->shard;
    int large = bytes > GF_SMALL_REPLY_BYTES;
    if (sh->doc_iteration != sh->defer.iteration) {
        sh->doc_iteration = sh->defer.iteration;
        sh->doc_bytes = 0;
    }
    if (c->doc_iteration == sh->defer.iteration ||
        (large && sh->doc_bytes > 0 && sh->doc_bytes + bytes > GF_DOC_BYTES_PER_ITERATION)) {
        gf_defer_next(&sh->defer, &c->resume);
        return 0;
    }
    if (daemon_loose(sh) + bytes > sh->cfg->max_output_bytes_total &&
        (large || c->out.loose_bytes > 0)) {
        conn_throttle(c);
        return 0;
    }
    c->doc_iteration = sh->defer.iteration;
    if (large)
        sh->doc_bytes += bytes;
    return 1;
}

void gf_conn_push(gf_conn *c, gf_reply *r) {
    gf_replyq_push(&c->out, r, c);
}

void gf_conn_reply(gf_conn *c, uint8_t type, const gf_header *h, uint32_t status, char *body,
                   size_t body_bytes) {
    if (c->closing) { /* nobody would write or finish it */
        free(body);
        return;
    }
    gf_reply *r = gf_reply_loose(type, h, status, body, body_bytes);
    if (!r) {
        gf_log_limited(&c->shard->group->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_ERROR,
                       "connection %llu: out of memory for a reply; closing",
                       (unsigned long long)c->stream.id);
        gf_conn_close(c);
        return;
    }
    gf_conn_push(c, r);
}

void gf_conn_reject(gf_conn *c, const gf_header *h, uint32_t status, const char *text) {
    c->shard->stats.rejected[status]++;
    GF_LOG_DBG("connection %llu: frame %llu refused: %s: %s", (unsigned long long)c->stream.id,
               (unsigned long long)h->frame_id, gf_status_name(status), text);
    if (gf_status_is_fatal(status)) {
        c->fatal = 1;
        c->shard->stats.connections_rejected++;
        gf_log_limited(&c->shard->group->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_INFO,
                       "connection %llu (uid %u pid %u): %s (%s); closing after replies",
                       (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
                       gf_status_name(status), text);
    }
    /* Out of memory leaves the ERROR without its text, not the request without a reply. */
    gf_conn_reply(c, GF_MSG_ERROR, h, status, strdup(text), strlen(text));
}

void gf_conn_resume_throttled(gf_shard *sh) {
    if (daemon_loose(sh) >= sh->cfg->max_output_bytes_total)
        return;
    gf_link *l;
    while ((l = gf_list_pop_front(&sh->throttled)))
        gf_conn_defer(gf_list_entry(l, gf_conn, throttled_link));
}

void gf_conn_finish(gf_reply *r, int delivered) {
    gf_conn *c = r->conn;
    gf_shard *sh = c->shard;
    gf_frame *frame = r->frame;
    GF_SHARD_OWNED(sh);
    int prof = gf_prof_enter(GF_PROF_FINISH);
    /* A frame never submitted was truncated, one that failed was counted then. */
    if (frame && !delivered && frame->status == GF_OK && frame->submitted_ns)
        sh->stats.frames_dropped++;
    gf_replyq_release(&c->out, r, delivered);
    if (frame) {
        if (frame->region) {
            gf_region_unref(frame->region);
            frame->region = NULL;
        }
        gf_sched_release(&sh->sched, frame);
    } else {
        free(r);
        gf_conn_resume_throttled(sh);
    }
    /* Requests already buffered, or reading stopped for want of output
     * room, may have waited for this reply to go out; a connection that
     * reads and has nothing buffered goes on by itself. */
    if (!c->reading || c->buf_end > c->buf_start || c->stream.eof || c->fatal || sh->draining)
        gf_conn_defer(c);
    if (sh->draining)
        gf_shard_defer(sh, &sh->drained);
    if (gf_heap_trim_wanted(sh->loose_since_trim_bytes))
        gf_shard_defer(sh, &sh->trim);
    conn_maybe_free(c);
    gf_prof_leave(prof);
}

void gf_conn_unslot_frame(gf_conn *c) {
    gf_frame *f = c->frame;
    assert(f && f->reply.conn == c);
    gf_replyq_remove(&f->reply);
    c->frame = NULL;
    gf_sched_received(&c->shard->sched, &c->sched);
    gf_conn_finish(&f->reply, 0);
    /* Its slot held it alone: the slot goes back to the ring. */
    gf_sched_close_batch(&c->shard->sched, &c->sched);
}

/* An evicted result's reply is finished: the copy of its frame counts it
 * answered when it was written, dropped when not. */
static void evicted_release(gf_reply *r, int delivered) {
    gf_frame *snap = r->extra;
    gf_conn *c = r->conn;
    if (snap->status == GF_OK && delivered)
        gf_frame_answered(c->shard, c->stream.id, snap);
    else if (snap->status == GF_OK)
        c->shard->stats.frames_dropped++;
    free(snap);
}

int gf_conn_park(gf_conn *c, const gf_header *h, uint64_t arrived_ns) {
    atomic_uint_fast64_t *total = &c->shard->group->parked_bytes;
    uint64_t bytes = h->payload_bytes;
    uint64_t was = atomic_fetch_add_explicit(total, bytes, memory_order_relaxed);
    uint8_t *p =
        was + bytes <= c->shard->cfg->max_input_bytes_total ? malloc(bytes ? bytes : 1) : NULL;
    if (p == NULL) {
        atomic_fetch_sub_explicit(total, bytes, memory_order_relaxed);
        return -1;
    }
    assert(c->parked == NULL);
    c->parked = p;
    c->parked_header = *h;
    c->parked_arrived_ns = arrived_ns;
    c->shard->stats.frames_parked++;
    return 0;
}

void gf_conn_unpark(gf_conn *c) {
    if (c->parked == NULL)
        return;
    free(c->parked);
    c->parked = NULL;
    atomic_fetch_sub_explicit(&c->shard->group->parked_bytes, c->parked_header.payload_bytes,
                              memory_order_relaxed);
}

gf_header gf_conn_arriving_header(const gf_conn *c) {
    const gf_frame *f = c->frame;
    if (f == NULL)
        return c->parked_header;
    return (gf_header){.version = f->version,
                       .type = GF_MSG_FRAME,
                       .frame_id = f->frame_id,
                       .pipeline_id = f->pipeline_id,
                       .payload_bytes = f->in_bytes};
}

void gf_conn_drop_arriving(gf_conn *c) {
    if (c->frame)
        gf_conn_unslot_frame(c);
    else
        gf_conn_unpark(c);
    gf_request_init(&c->decoder, c->decoder.max_frame_bytes);
}

/* Moves the ready result `r` of a frame out of its slot into a loose reply
 * of its own.  Returns 0, or -1 without memory. */
static int evict_one(gf_conn *c, gf_reply *r) {
    gf_frame *f = r->frame;
    gf_reply *q = calloc(1, sizeof *q);
    gf_frame *snap = malloc(sizeof *snap);
    char *body = r->body_bytes ? malloc(r->body_bytes) : NULL;
    if (!q || !snap || (r->body_bytes && !body)) {
        free(q);
        free(snap);
        free(body);
        return -1;
    }
    if (r->body_bytes)
        memcpy(body, r->body, r->body_bytes);
    *snap = *f;
    snap->pipeline.stage_count = 0; /* the frame's release drops its plugins */
    gf_link_init(&q->link);
    memcpy(q->header, r->header, sizeof q->header);
    q->ready = 1;
    q->owned = body;
    q->body = body;
    q->body_bytes = r->body_bytes;
    q->release = evicted_release;
    q->extra = snap;
    gf_replyq_replace(&c->out, r, q);
    gf_replyq_release(&c->out, r, 0);
    if (f->region) {
        gf_region_unref(f->region);
        f->region = NULL;
    }
    gf_sched_release(&c->shard->sched, f);
    c->shard->stats.results_evicted++;
    return 0;
}

void gf_conn_evict_results(gf_conn *c) {
    gf_shard *sh = c->shard;
    /* Only for another client: a connection waiting for a slot of its own
     * while its socket is full is a pipelining client, and copying its
     * results would only slow it down (a measured 2x at 4 MiB frames). */
    if (c->closing || !gf_sched_others_wait(&sh->sched, &c->sched))
        return;
    gf_link *l = gf_list_front(&c->out.replies);
    while (l) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        if (!r->ready)
            break;
        l = gf_list_next(&c->out.replies, l);
        if (!r->frame)
            continue;
        if (c->out.loose_bytes + r->body_bytes > sh->cfg->max_output_bytes || evict_one(c, r) < 0)
            break;
    }
}

void gf_conn_truncate_frame(gf_conn *c) {
    gf_header h = gf_conn_arriving_header(c);
    gf_log_limited(&c->shard->group->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_INFO,
                   "connection %llu (uid %u pid %u): closed after %llu of %llu payload bytes of "
                   "frame %llu",
                   (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
                   (unsigned long long)gf_conn_payload_received(c),
                   (unsigned long long)h.payload_bytes, (unsigned long long)h.frame_id);
    c->shard->stats.frames_truncated++;
    gf_conn_drop_arriving(c);
}

/* Drops the replies still queued: loose ones and results not on the engine
 * are finished now; a frame's on the engine when it completes (conn_io.c). */
static void conn_drop_replies(gf_conn *c) {
    gf_link *l;
    while ((l = gf_list_pop_front(&c->out.replies))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        if (!r->frame || !r->frame->batched)
            gf_conn_finish(r, 0);
    }
}

/* `c` leaves its shard: it takes no more events, is on none of the
 * shard's lists and no longer counted open, and its poll handle closes
 * (on_conn_closed closes the socket, unless it moved).  uv_close stops the
 * poll at once (epoll_ctl DEL): the socket is no longer this loop's when it
 * returns. */
static void conn_leave(gf_conn *c) {
    gf_shard *sh = c->shard;
    c->closing = 1;
    c->reading = 0;
    gf_list_remove(&c->link);
    gf_list_remove(&c->throttled_link);
    gf_list_remove(&c->blocked_link);
    gf_list_remove(&c->gather_link);
    sh->stats.connections_open--;
    atomic_fetch_sub_explicit(&sh->self->connections, 1, memory_order_relaxed);
    uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

void gf_conn_hand_over(gf_conn *c) {
    assert(!c->closing && c->out.unfinished == 0);
    c->moved = 1;
    conn_leave(c);
    gf_shard_defer(c->shard, &c->shard->drained);
}

void gf_conn_close(gf_conn *c) {
    gf_shard *sh = c->shard;
    GF_SHARD_OWNED(sh);
    if (c->closing)
        return;
    if (c->stream.pending_fd >= 0)
        close(c->stream.pending_fd);
    c->stream.pending_fd = -1;
    gf_sched_stop_waiting(&sh->sched, &c->sched);
    conn_leave(c);
    if (gf_conn_arriving(c)) {
        gf_conn_truncate_frame(c);
    } else if (c->parked) {
        /* Whole, and waiting for a place: its client left first. */
        sh->stats.frames_dropped++;
        gf_conn_unpark(c);
    }
    if (c->holding) { /* the same, a newest-only frame (admit.h, "held") */
        sh->stats.frames_dropped++;
        c->holding = 0;
    }
    /* Replies leave the queue before the batch goes: if the engine refuses
     * it, its frames are dropped at once. */
    gf_link queued;
    gf_list_init(&queued);
    gf_list_splice(&queued, &c->out.replies);
    /* Whole frames of a batch still open run, and are dropped when they
     * complete, like those already on the engine. */
    gf_sched_close_batch(&sh->sched, &c->sched);
    gf_list_splice(&c->out.replies, &queued);
    conn_drop_replies(c);
    /* Frames in flight keep their regions until they complete. */
    gf_link *l;
    while ((l = gf_list_pop_front(&c->regions))) {
        c->region_count--;
        gf_region_unref(gf_list_entry(l, gf_region, link));
    }
    gf_shard_defer(sh, &sh->drained);
}

gf_region *gf_conn_region(const gf_conn *c, uint32_t id) {
    for (gf_link *l = gf_list_front(&c->regions); l; l = gf_list_next(&c->regions, l)) {
        gf_region *r = gf_list_entry(l, gf_region, link);
        if (r->id == id)
            return r;
    }
    return NULL;
}

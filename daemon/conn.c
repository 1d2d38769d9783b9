/*
 * One client connection, from accept to close: it reads and frames requests
 * (request.c decodes them), claims a slot for each frame and receives the
 * payload straight into the slot's input buffer (or, for a frame by
 * reference, points the slot at the client's region), queues one reply per
 * request and writes them strictly in request order, and closes.
 *
 * Where a frame goes in this file:
 *   read     on_io -> conn_read (recvmsg) -> conn_process -> frame_begin (slot claim)
 *   submit   frame_begin / conn_received -> gf__server_submit (server.c)
 *   answer   gf__conn_flush (sendmsg) -> gf__reply_finish (slot release)
 *
 * The socket is driven through a uv_poll_t with recvmsg/sendmsg of our own,
 * not a uv_stream_t: a client passes its memfd (REGION_ADD) as SCM_RIGHTS
 * ancillary data, and only our own recvmsg sees which bytes an fd came with,
 * whether the control data was truncated, and can close every stray fd.
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
 * - Every file descriptor that arrives is claimed by the REGION_ADD request it
 *   came with or closed at once: none leaks, whatever the client sends.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "loopprof.h"
#include "server_internal.h"

static void conn_process(gf_conn *c);
static void conn_settle(gf_conn *c);
static void conn_update_reading(gf_conn *c);
static void conn_track_request(gf_conn *c);
static void conn_take_back_frame(gf_conn *c);
static void conn_read(gf_conn *c);
static void conn_read_some(gf_conn *c);
static void on_io(uv_poll_t *h, int status, int events);

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
    close(c->fd);
    conn_unref(c);
    gf__server_check_drained(srv);
}

/* A memfd that no request claimed, or one of a refused request: closed. */
static void conn_drop_pending_fd(gf_conn *c) {
    if (c->pending_fd >= 0)
        close(c->pending_fd);
    c->pending_fd = -1;
}

void gf__conn_accept(gf_server *srv, int fd, uint32_t uid, uint32_t gid, uint32_t pid) {
    gf_conn *c = calloc(1, sizeof *c);
    if (!c) {
        GF_LOG_ERR("accept: out of memory for a connection");
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    c->pending_fd = -1;
    c->uid = uid;
    c->gid = gid;
    c->pid = pid;
    c->next_region_id = 1;
    int rc = uv_poll_init(srv->loop, &c->poll, fd);
    if (rc < 0) {
        GF_LOG_WRN("accept: cannot watch the socket: %s", uv_strerror(rc));
        close(fd);
        free(c);
        return;
    }
    c->refs = 1; /* the handle's, dropped in on_conn_closed */
    c->poll.data = c;
    gf_request_init(&c->decoder, srv->cfg->max_frame_bytes);
    c->last_input_ns = gf_now_ns();
    c->id = ++srv->next_conn_id;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->stats.connections_open++;
    srv->stats.connections_total++;
    GF_LOG_DBG("connection %llu: accepted (uid %u gid %u pid %u)", (unsigned long long)c->id, uid,
               gid, pid);
    conn_update_reading(c);
}

void gf__conn_resume(gf_conn *c) {
    conn_ref(c);
    conn_process(c);
    conn_settle(c);
    conn_update_reading(c);
    /* Stopping: read what the socket holds now rather than wait for an
     * event that an idle client never causes; EAGAIN ends its input. */
    if (c->srv->draining && c->reading && !c->input_drained && !c->in_read && !c->processing &&
        !c->cutting) {
        conn_read(c);
        conn_settle(c);
        conn_update_reading(c);
    }
    conn_track_request(c);
    conn_unref(c);
}

/* ---- replies ------------------------------------------------------------------- */

void gf__reply_header(uint8_t out[GF_HEADER_BYTES], uint8_t version, uint8_t type, uint16_t flags,
                      uint64_t frame_id, uint32_t pipeline_id, uint32_t status,
                      uint64_t payload_bytes) {
    /* The reply to a header of a version we do not speak is in version 1. */
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

/* A loose reply's body of `bytes` is held for the connection: it counts
 * against max_output_bytes and the total, and towards the next heap trim
 * (gf__server_trim_if_idle). */
static void loose_add(gf_conn *c, uint64_t bytes) {
    c->loose_bytes += bytes;
    c->srv->loose_bytes += bytes;
    c->srv->loose_since_trim_bytes += bytes;
}

/* Appends `r` to the connection's queue; it takes one connection reference. */
static void reply_enqueue(gf_conn *c, gf_queued_reply *r) {
    r->conn = c;
    r->next = NULL;
    conn_ref(c);
    c->replies_unfinished++;
    if (!r->frame) {
        c->loose_replies++;
        loose_add(c, r->body_bytes);
    }
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
    gf_frame *frame = r->frame;
    int prof = gf_prof_enter(GF_PROF_FINISH);
    int slot_freed = 0;
    /* A frame never submitted was truncated, one that failed was counted then. */
    if (frame && !delivered && frame->status == GF_OK && frame->submitted_ns)
        srv->stats.frames_dropped++;
    if (r->evicted) {
        if (!delivered && r->evicted->status == GF_OK)
            srv->stats.frames_dropped++;
        free(r->evicted);
        r->evicted = NULL;
    }
    free(r->body);
    r->body = NULL;
    c->replies_unfinished--;
    if (r->removing) {
        /* A REGION_REMOVE reply dropped before its region was released. */
        r->removing->remove_reply = NULL;
        r->removing = NULL;
    }
    if (r->region) {
        /* A REGION_ADD dropped while its region is being pinned: the region
         * goes when the pinning is done (region_ready). */
        c->region_count--;
        r->region->on_ready_arg = NULL;
        gf__region_unref(r->region);
        r->region = NULL;
    }
    if (frame) {
        frame->reply.conn = NULL;
        if (frame->region) {
            gf__region_unref(frame->region);
            frame->region = NULL;
        }
        slot_freed = gf_frame_release(&srv->ring, frame);
    } else {
        c->loose_replies--;
        c->loose_bytes -= r->body_bytes;
        srv->loose_bytes -= r->body_bytes;
        free(r);
    }
    /* c stays valid until conn_unref below. */
    if (!c->closing && c->fatal && c->replies_unfinished == 0)
        gf__conn_close(c);
    /* Requests already buffered may have waited for this reply to go out
     * (the cap on loose replies); no new bytes need arrive to go on. */
    gf__conn_resume(c);
    if (!frame && srv->output_throttled &&
        srv->loose_bytes < srv->cfg->max_output_bytes_total) {
        /* Connections stopped for the total's sake may go on. */
        srv->output_throttled = 0;
        for (gf_conn *o = srv->conns, *next; o; o = next) {
            next = o->next;
            if (o != c && o->loose_bytes > 0)
                gf__conn_resume(o);
        }
    }
    conn_unref(c);
    if (slot_freed)
        gf__server_slot_freed(srv);
    else
        gf__server_check_drained(srv);
    gf__server_trim_if_idle(srv);
    gf_prof_leave(prof);
}

/* The buffers of one reply: its header, then its body, the slot's output or
 * a shm frame's result descriptor. */
static unsigned reply_iov(const gf_queued_reply *r, struct iovec *iov) {
    iov[0] = (struct iovec){.iov_base = (void *)r->header, .iov_len = GF_HEADER_BYTES};
    const gf_frame *s = r->frame;
    if (r->body && r->body_bytes) {
        iov[1] = (struct iovec){.iov_base = r->body, .iov_len = r->body_bytes};
        return 2;
    }
    if (!r->body && s && s->status == GF_OK && s->region) {
        iov[1] = (struct iovec){.iov_base = (void *)s->shm_result, .iov_len = GF_SHM_RESULT_BYTES};
        return 2;
    }
    if (!r->body && s && s->status == GF_OK && s->out_bytes) {
        iov[1] = (struct iovec){.iov_base = s->out_host, .iov_len = s->out_bytes};
        return 2;
    }
    return 1;
}

/* Drops the first `n` bytes of iov[0..*count), moving the array up. */
static struct iovec *iov_advance(struct iovec *iov, unsigned *count, size_t n) {
    while (*count && n >= iov->iov_len) {
        n -= iov->iov_len;
        iov++;
        (*count)--;
    }
    if (*count) {
        iov->iov_base = (char *)iov->iov_base + n;
        iov->iov_len -= n;
    }
    return iov;
}

/* Asks the poll handle for exactly the events the connection waits for. */
static void conn_set_events(gf_conn *c) {
    if (c->closing)
        return;
    int want = (c->reading ? UV_READABLE : 0) | (c->write_blocked ? UV_WRITABLE : 0);
    if (want == c->poll_events)
        return;
    c->poll_events = want;
    if (want)
        uv_poll_start(&c->poll, want, on_io);
    else
        uv_poll_stop(&c->poll);
}

/*
 * Writes one batch: the ready replies at the head of the queue (at most
 * GF_WRITE_BATCH_MAX) in one sendmsg, so a burst of small results costs one
 * system call.  Replies written whole leave the queue and are returned as a
 * chain through `next`, in order, for the caller to finish; a partly written
 * head stays, with c->tx_offset.  Returns the chain, or NULL; sets
 * write_blocked when the socket is full, and closes the connection on an
 * error (the caller sees c->closing).
 */
static gf_queued_reply *conn_write_batch(gf_conn *c) {
    struct iovec iov_all[2 * GF_WRITE_BATCH_MAX];
    unsigned count = 0, n = 0;
    for (gf_queued_reply *r = c->replies_head; r && r->ready && n < GF_WRITE_BATCH_MAX;
         r = r->next, n++)
        count += reply_iov(r, iov_all + count);
    if (n == 0)
        return NULL;
    struct iovec *iov = iov_advance(iov_all, &count, c->tx_offset);
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = count};
    ssize_t sent;
    int prof = gf_prof_enter(GF_PROF_SEND);
    do
        sent = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (sent < 0 && errno == EINTR);
    gf_prof_leave(prof);
    if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!c->write_blocked)
                c->write_progress_ns = gf_now_ns();
            c->write_blocked = 1;
            return NULL;
        }
        GF_LOG_INF("connection %llu: write failed (%s); closing", (unsigned long long)c->id,
                   strerror(errno));
        gf__conn_close(c);
        return NULL;
    }
    c->write_progress_ns = gf_now_ns();
    /* Detach what went out whole. */
    size_t left = (size_t)sent + c->tx_offset;
    gf_queued_reply *done = NULL, **tail = &done;
    while (c->replies_head && c->replies_head->ready) {
        struct iovec one[2];
        unsigned k = reply_iov(c->replies_head, one);
        size_t bytes = one[0].iov_len + (k > 1 ? one[1].iov_len : 0);
        if (left < bytes)
            break;
        left -= bytes;
        gf_queued_reply *r = c->replies_head;
        c->replies_head = r->next;
        r->next = NULL;
        *tail = r;
        tail = &r->next;
    }
    if (!c->replies_head)
        c->replies_tail = NULL;
    c->tx_offset = left;
    c->write_blocked = c->replies_head && c->replies_head->ready && left > 0;
    return done;
}

/*
 * The client is not reading and other connections wait for a slot: results
 * waiting to be written move out of their slots into memory of the
 * connection's own, within max_output_bytes (with its LIST/STATS/TRACE
 * replies), and the slots go back to the ring at once.  A client that stops
 * reading then holds no slot others need beyond that limit; past it the rest
 * stay in their slots until write_timeout_ms closes the connection.  Results
 * normally go out straight from the slot's pinned buffer: this copy happens
 * only for a client whose socket is full while others wait.
 */
void gf__conn_evict_results(gf_conn *c) {
    gf_server *srv = c->srv;
    unsigned freed = 0;
    /* Only for another client: a connection waiting for a slot of its own
     * while its socket is full is a pipelining client, and copying its
     * results would only slow it down (a measured 2x at 4 MiB frames). */
    const gf_conn *w = srv->waiting_head;
    while (w && w == c)
        w = w->next_waiting;
    if (!w)
        return;
    gf_queued_reply *prev = NULL;
    for (gf_queued_reply *r = c->replies_head; r && r->ready; prev = r, r = r->next) {
        gf_frame *s = r->frame;
        if (!s || s->batched)
            continue;
        struct iovec iov[2];
        size_t bytes = reply_iov(r, iov) > 1 ? iov[1].iov_len : 0;
        if (c->loose_bytes + bytes > srv->cfg->max_output_bytes)
            break;
        gf_queued_reply *q = calloc(1, sizeof *q);
        gf_frame *snap = malloc(sizeof *snap);
        char *body = bytes ? malloc(bytes) : NULL;
        if (!q || !snap || (bytes && !body)) {
            free(q);
            free(snap);
            free(body);
            break;
        }
        if (bytes)
            memcpy(body, iov[1].iov_base, bytes);
        free(r->body); /* a failed frame's ERROR text, copied above */
        r->body = NULL;
        *snap = *s;
        snap->pipeline.stage_count = 0; /* the frame's release below drops its plugins */
        memcpy(q->header, r->header, sizeof q->header);
        q->conn = c;
        q->ready = 1;
        q->body = body;
        q->body_bytes = bytes;
        q->evicted = snap;
        q->next = r->next;
        /* q takes r's place in the queue and its connection reference. */
        if (prev)
            prev->next = q;
        else
            c->replies_head = q;
        if (c->replies_tail == r)
            c->replies_tail = q;
        c->loose_replies++;
        loose_add(c, bytes);
        s->reply.conn = NULL;
        if (s->region) {
            gf__region_unref(s->region);
            s->region = NULL;
        }
        freed += gf_frame_release(&srv->ring, s);
        srv->stats.results_evicted++;
        r = q;
    }
    if (freed)
        gf__server_slot_freed(srv);
}

/*
 * Writes, in order, every reply at the head of the queue that is ready, and
 * finishes each one written (which frees its slot for the next frame).  A
 * reply that becomes ready while this runs (finishing one resumes the
 * connection, which may answer buffered requests) is written by the same
 * call's next round: the function never nests.
 */
void gf__conn_flush(gf_conn *c) {
    if (c->flushing) {
        c->flush_again = 1;
        return;
    }
    conn_ref(c);
    c->flushing = 1;
    int prof = gf_prof_enter(GF_PROF_FLUSH);
    do {
        c->flush_again = 0;
        while (!c->closing && !c->write_blocked) {
            gf_queued_reply *r = conn_write_batch(c);
            if (!r)
                break;
            while (r) {
                /* Read it first: finishing a frame's reply hands its slot on. */
                gf_queued_reply *next = r->next;
                if (r->frame && r->frame->status == GF_OK)
                    gf__frame_answered(c->srv, c, r->frame);
                else if (r->evicted && r->evicted->status == GF_OK)
                    gf__frame_answered(c->srv, c, r->evicted);
                gf__reply_finish(r, 1);
                r = next;
            }
        }
    } while (c->flush_again && !c->closing);
    gf_prof_leave(prof);
    c->flushing = 0;
    if (c->write_blocked && !c->closing)
        gf__conn_evict_results(c);
    conn_set_events(c);
    conn_unref(c);
}

/* Queues a loose reply (not tied to a slot) to the request `h`, owning `body`
 * (malloc'd or NULL); like every reply it echoes the request's frame_id and
 * pipeline_id (PROTOCOL.md). */
static void reply_loose(gf_conn *c, uint8_t type, const gf_header *h, uint32_t status, char *body,
                        size_t body_bytes) {
    if (c->closing) { /* nobody would write or finish it */
        free(body);
        return;
    }
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
    gf__reply_header(r->header, h->version, type, 0, h->frame_id, h->pipeline_id, status,
                     r->body_bytes);
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
                       "connection %llu (uid %u pid %u): %s (%s); closing after replies",
                       (unsigned long long)c->id, c->uid, c->pid, gf_status_name(status), text);
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
 * Whether the connection may take more requests given the replies it has not
 * let us write: fewer than GF_CONN_MAX_LOOSE_REPLIES, under max_output_bytes,
 * and, while all connections together are over max_output_bytes_total, none
 * at all queued (so a client that reads is still answered).  A connection
 * over its share is simply not read until its client reads: memory stays
 * bounded and nothing is lost.
 */
static int conn_output_room(gf_conn *c) {
    gf_server *srv = c->srv;
    if (c->loose_replies >= GF_CONN_MAX_LOOSE_REPLIES ||
        c->loose_bytes >= srv->cfg->max_output_bytes)
        return 0;
    if (c->loose_bytes > 0 && srv->loose_bytes >= srv->cfg->max_output_bytes_total) {
        srv->output_throttled = 1;
        return 0;
    }
    return 1;
}

/* Part of a request is in: a payload arriving or being skipped, or bytes
 * of a request buffered. */
static int conn_request_begun(const gf_conn *c) {
    return c->frame || c->decoder.skip_left || c->buf_end > c->buf_start;
}

/*
 * After reading and processing: a request is begun while any of it is
 * buffered, its payload is arriving or being skipped.  Waiting for a slot is
 * the daemon's doing, so it stops the clock.
 */
static void conn_track_request(gf_conn *c) {
    int begun = conn_request_begun(c);
    /* Nor does a connection we stopped reading because its client does not
     * read its replies: write_timeout_ms bounds that, not this clock. */
    if (!begun || c->waiting || !conn_output_room(c))
        c->request_begun_ns = 0;
    else if (!c->request_begun_ns)
        c->request_begun_ns = gf_now_ns();
}

/* Where the next received bytes go: the rest of the payload being read
 * straight into a slot, or the free end of the connection's buffer. */
static void conn_read_target(gf_conn *c, struct iovec *iov) {
    if (c->frame) {
        /* Straight into the slot's pinned input buffer: no staging copy. */
        uint64_t left = c->decoder.payload_left;
        iov->iov_base = c->frame->in_host + (c->frame->in_bytes - left);
        iov->iov_len = (size_t)left;
        return;
    }
    if (c->buf_start == c->buf_end) {
        c->buf_start = c->buf_end = 0;
    } else if (c->buf_start > 0) {
        memmove(c->buf, c->buf + c->buf_start, c->buf_end - c->buf_start);
        c->buf_end -= c->buf_start;
        c->buf_start = 0;
    }
    /* Reading is on only while the buffer holds less than one request that
     * fits it (a header and a payload of at most GF_STAGED_PAYLOAD_MAX_BYTES),
     * so there is always room. */
    assert(c->buf_end < sizeof c->buf);
    iov->iov_base = c->buf + c->buf_end;
    iov->iov_len = sizeof c->buf - c->buf_end;
}

/* Frame `f`'s payload is all in: it joins its slot's batch, which goes to
 * the engine when the connection's processing ends (conn_close_batch). */
static void frame_received(gf_conn *c, gf_frame *f) {
    if (c->frame == f)
        c->frame = NULL;
    request_done(c);
    f->batched = 1;
}

/* The connection's open slot, unless a payload is still arriving into it,
 * goes to the engine with the frames it holds (back to the ring if it holds
 * none). */
static void conn_close_batch(gf_conn *c) {
    gf_slot *s = c->batch;
    if (s == NULL || c->frame != NULL)
        return;
    c->batch = NULL;
    gf__server_close_batch(c->srv, s);
}

/* Processing ended: the frames it took in go to the engine now, unless
 * more are coming: the socket is being read (conn_read closes the batch once
 * the socket is drained, so one submission carries everything a readiness
 * event brought, not one read buffer's worth), or the GPU has
 * GF_BATCH_HOLD_IN_FLIGHT submissions to work on, when the batch stays open
 * for the next reads' frames until a slot completes (gf__conn_submit_held),
 * so that more slots make bigger batches, not more submissions of fewer
 * frames. */
static void conn_end_processing(gf_conn *c) {
    if (c->batch && !c->closing && !c->fatal &&
        (c->in_read || (c->srv->slots_in_flight >= GF_BATCH_HOLD_IN_FLIGHT && !c->srv->draining)))
        return;
    conn_close_batch(c);
}

void gf__conn_submit_held(gf_conn *c) {
    if (!c->processing && !c->in_read)
        conn_close_batch(c);
}

/* Why a FRAME for `pipeline_id` with `in_bytes` of input cannot run, as an
 * ERROR status and text, or 0 with each stage's output length in
 * stage_bytes[] and the result's in *out_bytes.  Every length is checked
 * here, once, against the slot's buffers: the result against its output
 * buffer, a chain's intermediate results against its scratch. */
static uint32_t frame_check(const gf_conn *c, uint32_t pipeline_id, uint64_t in_bytes,
                            uint64_t stage_bytes[GF_STAGES_MAX], int64_t *out_bytes, char *why,
                            size_t why_len) {
    const gf_config *cfg = c->srv->cfg;
    uint64_t out_cap = c->srv->ring.slots[0].out_capacity_bytes;
    uint64_t scratch_cap = c->srv->ring.slots[0].scratch_capacity_bytes;
    if (pipeline_id >= cfg->pipeline_count) {
        gf_errorf(why, why_len,
                  "pipeline id %u is not configured (ids 0..%zu; send LIST to see them)",
                  pipeline_id, cfg->pipeline_count - 1);
        return GF_ERR_UNKNOWN_PIPELINE;
    }
    const gf_pipeline *p = &cfg->pipelines[pipeline_id];
    char rule[256];
    *out_bytes = gf_pipeline_stage_lengths(p, in_bytes, stage_bytes, rule, sizeof rule);
    if (*out_bytes < 0) {
        gf_errorf(why, why_len, "pipeline %s: %s", p->name, rule);
        return GF_ERR_BAD_LENGTH;
    }
    if ((uint64_t)*out_bytes > out_cap) {
        gf_errorf(why, why_len, "pipeline %s: output of %lld bytes exceeds the slot's %llu",
                  p->name, (long long)*out_bytes, (unsigned long long)out_cap);
        return GF_ERR_BAD_LENGTH;
    }
    /* A plugin's lengths are its own: one beyond what its max_output_bytes
     * promised at load must not run past the scratch. */
    for (uint32_t k = 0; k + 1 < p->stage_count; k++)
        if (stage_bytes[k] > scratch_cap) {
            gf_errorf(why, why_len,
                      "pipeline %s: stage %u's output of %llu bytes exceeds the slot's %llu of "
                      "scratch",
                      p->name, k, (unsigned long long)stage_bytes[k],
                      (unsigned long long)scratch_cap);
            return GF_ERR_BAD_LENGTH;
        }
    return GF_OK;
}

/* The region `id` of this connection, ready for frames, or NULL. */
static gf_region *conn_region(const gf_conn *c, uint32_t id) {
    for (gf_region *r = c->regions; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/*
 * Why the shm FRAME `h` with descriptor `d` cannot run, or 0 with its region
 * in *region and its output length in *out_bytes.  Every offset and length
 * is checked before anything is enqueued, without overflow.
 */
static uint32_t shm_check(const gf_conn *c, const gf_header *h, const uint8_t *payload,
                          gf_shm_frame *d, gf_region **region, uint64_t stage_bytes[GF_STAGES_MAX],
                          int64_t *out_bytes, char *why, size_t why_len) {
    if (gf_shm_frame_decode(payload, d) < 0) {
        gf_errorf(why, why_len, "shm descriptor: reserved bytes 4..7 are not zero");
        return GF_ERR_BAD_DESCRIPTOR;
    }
    gf_region *r = conn_region(c, d->region_id);
    if (!r) {
        gf_errorf(why, why_len, "region %u is not one of this connection's (REGION_ADD first)",
                  d->region_id);
        return GF_ERR_UNKNOWN_REGION;
    }
    if (d->in_bytes > c->srv->cfg->max_frame_bytes) {
        gf_errorf(why, why_len, "shm frame of %llu bytes exceeds max_frame_bytes %llu",
                  (unsigned long long)d->in_bytes,
                  (unsigned long long)c->srv->cfg->max_frame_bytes);
        return GF_ERR_BAD_LENGTH;
    }
    uint32_t status =
        frame_check(c, h->pipeline_id, d->in_bytes, stage_bytes, out_bytes, why, why_len);
    if (status != GF_OK)
        return status;
    if (gf_shm_frame_check(d, r->bytes, (uint64_t)*out_bytes, why, why_len) < 0)
        return GF_ERR_BAD_DESCRIPTOR;
    *region = r;
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
    uint64_t stage_bytes[GF_STAGES_MAX];
    int shm = (h->flags & GF_FLAG_SHM) != 0;
    /* A payload that fits the read buffer is taken in whole before a slot is
     * claimed, so a client that stalls mid-payload holds no slot (README.md,
     * "Fair slots"); a larger one is read straight into the slot.  A shm
     * frame's payload is its 40-byte descriptor. */
    if (h->payload_bytes <= GF_STAGED_PAYLOAD_MAX_BYTES &&
        c->buf_end - c->buf_start < req->bytes + h->payload_bytes)
        return 0;
    gf_shm_frame desc;
    gf_region *region = NULL;
    uint32_t status;
    if (srv->draining) {
        /* Stopping: every frame read gets an answer, none runs. */
        gf_errorf(why, sizeof why, "the daemon is stopping; frame not run");
        status = GF_ERR_SHUTTING_DOWN;
    } else if (shm) {
        status = shm_check(c, h, c->buf + c->buf_start + req->bytes, &desc, &region,
                           stage_bytes, &out_bytes, why, sizeof why);
    } else {
        status = frame_check(c, h->pipeline_id, h->payload_bytes, stage_bytes, &out_bytes, why,
                             sizeof why);
    }
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
    /* A small frame joins the batch this connection's read opened, if it
     * fits and runs the same pipeline; a large one, whose payload is read in
     * place and may stall, has a slot of its own. */
    const gf_pipeline *p = &srv->cfg->pipelines[h->pipeline_id];
    uint64_t in_bytes = shm ? desc.in_bytes : h->payload_bytes;
    int staged = shm || h->payload_bytes <= GF_STAGED_PAYLOAD_MAX_BYTES;
    gf_frame *s = c->batch && staged ? gf_slot_add(c->batch, p, h, in_bytes, stage_bytes,
                                                   c->header_seen_ns)
                                     : NULL;
    if (!s) {
        conn_close_batch(c);
        /* Slots go to connections in the order they asked: one that finds
         * others waiting queues behind them, even if its own reply just
         * freed a slot (a pipelining client would otherwise take every slot
         * it frees).  The connection whose turn slot_freed gave may take one
         * slot. */
        gf_slot *slot = srv->waiting_head && srv->turn != c ? NULL : gf_slot_claim(&srv->ring, c);
        if (!slot) {
            /* No slot for it now: stop reading until one frees (backpressure). */
            gf__server_wait_for_slot(srv, c);
            return 0;
        }
        if (srv->turn == c)
            srv->turn = NULL;
        c->batch = slot;
        /* An empty slot takes any frame frame_check passed. */
        s = gf_slot_add(slot, p, h, in_bytes, stage_bytes, c->header_seen_ns);
        assert(s != NULL);
    }
    srv->stats.frames_received++;
    c->buf_start += req->bytes;
    gf_request_accept(&c->decoder, req);
    c->header_seen_ns = 0;
    reply_enqueue(c, &s->reply);
    if (shm) {
        /* By reference: the engine copies straight from and into the region. */
        c->buf_start += GF_SHM_FRAME_BYTES;
        gf_request_advance(&c->decoder, GF_SHM_FRAME_BYTES);
        gf__region_ref(region);
        s->region = region;
        s->in_bytes = desc.in_bytes;
        s->src = region->base + desc.in_offset;
        s->dst = region->base + desc.out_offset;
        gf_shm_result res = {.region_id = region->id,
                             .out_offset = desc.out_offset,
                             .out_bytes = (uint64_t)out_bytes};
        gf_shm_result_encode(&res, s->shm_result);
        frame_received(c, s);
        return 1;
    }
    c->frame = s;

    /* Whatever part of the payload came in with the header (at most
     * GF_STAGED_PAYLOAD_MAX_BYTES) is copied; the rest is read in place. */
    gf_request body;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &body);
    if (body.kind == GF_REQ_PAYLOAD) {
        int prof = gf_prof_enter(GF_PROF_COPY);
        memcpy(s->in_host, c->buf + c->buf_start, body.bytes);
        gf_prof_leave(prof);
        c->buf_start += body.bytes;
        gf_request_advance(&c->decoder, body.bytes);
    }
    if (!gf_request_in_payload(&c->decoder))
        frame_received(c, s);
    return 1;
}

/* Pinning of a REGION_ADD's region ended: its reply, waiting in order in
 * the queue (`arg`; NULL when the connection went meanwhile), is made. */
static void region_ready(gf_region *r, void *arg) {
    gf_queued_reply *q = arg;
    if (!q)
        return;
    gf_conn *c = q->conn;
    gf_server *srv = c->srv;
    const gf_header *h = &q->request;
    q->region = NULL;
    if (r->pin_status < 0) {
        size_t len = strlen(r->why);
        q->body = malloc(len + 1);
        if (q->body)
            memcpy(q->body, r->why, len + 1);
        q->body_bytes = q->body ? len : 0;
        loose_add(c, q->body_bytes);
        gf__reply_header(q->header, h->version, GF_MSG_ERROR, 0, h->frame_id, h->pipeline_id,
                         GF_ERR_BAD_REGION, q->body_bytes);
        srv->stats.rejected[GF_ERR_BAD_REGION]++;
        GF_LOG_INF("connection %llu: region of %llu bytes refused: %s", (unsigned long long)c->id,
                   (unsigned long long)r->bytes, r->why);
        c->region_count--;
        gf__region_unref(r);
    } else {
        gf_region_info info = {.region_id = r->id,
                               .flags = r->pinned ? GF_REGION_PINNED : 0,
                               .region_bytes = r->bytes};
        q->body = malloc(GF_REGION_INFO_BYTES);
        if (q->body)
            gf_region_info_encode(&info, q->body);
        q->body_bytes = q->body ? GF_REGION_INFO_BYTES : 0;
        loose_add(c, q->body_bytes);
        /* Out of memory: an empty reply the client refuses, which closes it. */
        gf__reply_header(q->header, h->version, GF_MSG_REGION_ADD, 0, h->frame_id, h->pipeline_id,
                         GF_OK, q->body_bytes);
        r->next = c->regions;
        c->regions = r;
        srv->stats.regions_added++;
        GF_LOG_DBG("connection %llu: region %u of %llu bytes added%s", (unsigned long long)c->id,
                   r->id, (unsigned long long)r->bytes, r->pinned ? ", pinned" : "");
    }
    q->ready = 1;
    gf__conn_flush(c);
}

/* REGION_ADD with the memfd `fd` it carried (-1: none; taken in any case).
 * The reply waits in the queue while the region is pinned off the loop. */
static void region_add(gf_conn *c, const gf_header *h, int fd) {
    char why[GF_ERROR_TEXT_MAX_BYTES];
    if (c->srv->draining) {
        if (fd >= 0)
            close(fd);
        conn_reject_text(c, h, GF_ERR_SHUTTING_DOWN, "the daemon is stopping; no new regions");
        return;
    }
    if (fd < 0) {
        conn_reject_text(c, h, GF_ERR_BAD_REGION,
                         "REGION_ADD came without a file descriptor: send the memfd as "
                         "SCM_RIGHTS with the request's own bytes");
        return;
    }
    gf_region *r;
    uint32_t status =
        gf__region_open(c->srv, fd, c->next_region_id, c->region_count, &r, why, sizeof why);
    if (status != GF_OK) {
        conn_reject_text(c, h, status, why);
        return;
    }
    gf_queued_reply *q = calloc(1, sizeof *q);
    if (!q) {
        gf__region_unref(r);
        conn_reject_text(c, h, GF_ERR_INTERNAL, "out of memory for a REGION_ADD reply");
        return;
    }
    c->next_region_id++;
    c->region_count++;
    q->region = r;
    q->request = *h;
    reply_enqueue(c, q);
    gf__region_pin(r, region_ready, q);
}

/* REGION_REMOVE of the region `h->pipeline_id` names: frames still in flight
 * on it finish first; then it is unpinned and unmapped, and only then is the
 * reply sent, so the memory is free (and STATS says so) when it arrives. */
static void region_remove(gf_conn *c, const gf_header *h) {
    for (gf_region **pp = &c->regions; *pp; pp = &(*pp)->next) {
        gf_region *r = *pp;
        if (r->id != h->pipeline_id)
            continue;
        gf_queued_reply *q = calloc(1, sizeof *q);
        if (!q) {
            conn_reject_text(c, h, GF_ERR_INTERNAL, "out of memory for a REGION_REMOVE reply");
            return;
        }
        *pp = r->next;
        c->region_count--;
        c->srv->stats.regions_removed++;
        gf__reply_header(q->header, h->version, GF_MSG_REGION_REMOVE, 0, h->frame_id,
                         h->pipeline_id, GF_OK, 0);
        q->removing = r;
        r->remove_reply = q;
        reply_enqueue(c, q);
        gf__region_unref(r); /* may release it, and make q ready, at once */
        return;
    }
    char why[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(why, sizeof why, "region %u is not one of this connection's", h->pipeline_id);
    conn_reject_text(c, h, GF_ERR_UNKNOWN_REGION, why);
}

/* Answers a request that needs no slot (LIST, STATS, TRACE, REGION_*);
 * `fd` is the memfd that came with it, or -1. */
static void answer_query(gf_conn *c, const gf_request *req, int fd) {
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
    case GF_MSG_REGION_ADD: region_add(c, h, fd); break;
    case GF_MSG_REGION_REMOVE: region_remove(c, h); break;
    default: assert(!"the decoder let through a type the daemon does not take");
    }
}

/* File descriptors are allowed on REGION_ADD only, one at a time, whole:
 * anything else is a fatal stray_fd, and every fd received is closed. */
static void conn_stray_fd(gf_conn *c, const char *what) {
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    conn_drop_pending_fd(c);
    if (c->frame) {
        h.version = c->frame->version;
        h.frame_id = c->frame->frame_id;
        h.pipeline_id = c->frame->pipeline_id;
        c->srv->stats.frames_failed++;
        conn_take_back_frame(c);
    }
    char text[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(text, sizeof text, "%s; only REGION_ADD takes one, sent with its own bytes", what);
    conn_reject_text(c, &h, GF_ERR_STRAY_FD, text);
}

/*
 * The memfd that came with the request `req` at the front of the buffer:
 * the pending fd whose last byte lies inside the request's bytes, taken
 * from the connection.  Returns it, -1 when none came with it, or -2 after
 * refusing an fd that came with earlier bytes.
 */
static int conn_request_fd(gf_conn *c, const gf_request *req) {
    if (c->pending_fd < 0)
        return -1;
    uint64_t start = c->rx_bytes - (c->buf_end - c->buf_start);
    uint64_t end =
        start + req->bytes + (req->header.type == GF_MSG_FRAME ? req->header.payload_bytes : 0);
    if (c->pending_fd_pos < start) {
        conn_stray_fd(c, "a file descriptor came with a refused frame's payload");
        return -2;
    }
    if (c->pending_fd_pos >= end)
        return -1;
    int fd = c->pending_fd;
    c->pending_fd = -1;
    return fd;
}

/* Consumes buffered bytes until it needs more, must wait, or must stop.
 * Answering a request can write and finish replies, which resumes the
 * connection: such a nested call returns at once, and this loop goes on. */
static void conn_process(gf_conn *c) {
    if (c->processing)
        return;
    c->processing = 1;
    int prof = gf_prof_enter(GF_PROF_PARSE);
    while (!c->closing && !c->fatal && !c->waiting && !c->frame && conn_output_room(c)) {
        gf_request req;
        gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
        switch (req.kind) {
        case GF_REQ_MORE: goto out;
        case GF_REQ_SKIP:
            c->buf_start += req.bytes;
            gf_request_advance(&c->decoder, req.bytes);
            if (!c->decoder.skip_left)
                request_done(c);
            break;
        case GF_REQ_ERROR:
            /* The stream cannot be trusted past a bad header.  A status not
             * fatal in itself (bad_length on a LIST) ends it too: count it. */
            if (!gf_status_is_fatal(req.status))
                c->srv->stats.connections_rejected++;
            c->fatal = 1;
            conn_reject_text(c, &req.header, req.status, req.text);
            goto out;
        case GF_REQ_HEADER: {
            int fd = conn_request_fd(c, &req);
            if (fd == -2)
                goto out;
            if (fd >= 0 && req.header.type != GF_MSG_REGION_ADD) {
                close(fd);
                char what[96];
                gf_errorf(what, sizeof what, "a file descriptor came with a %s request",
                          gf_msg_type_name(req.header.type));
                conn_stray_fd(c, what);
                goto out;
            }
            if (req.header.type != GF_MSG_FRAME)
                answer_query(c, &req, fd);
            else if (!frame_begin(c, &req))
                goto out;
            break;
        }
        case GF_REQ_PAYLOAD: assert(!"payload bytes outside a claimed slot"); goto out;
        }
    }
out:
    /* The frames this pass took in go to the engine as one batch. */
    conn_end_processing(c);
    gf_prof_leave(prof);
    c->processing = 0;
}

/* Starts or stops reading so that it happens exactly when it can progress. */
static void conn_update_reading(gf_conn *c) {
    if (c->closing)
        return;
    c->reading = !c->eof && !c->fatal && !c->waiting && conn_output_room(c);
    /* Stopping: a connection that reads nothing more has no input left. */
    if (c->srv->draining && (c->eof || c->fatal) && !c->cutting)
        c->input_drained = 1;
    conn_set_events(c);
}

/* Takes back the slot of the frame whose payload is arriving: its reply,
 * the newest and not ready, leaves the queue unsent.  The caller counts it. */
static void conn_take_back_frame(gf_conn *c) {
    gf_frame *s = c->frame;
    gf_queued_reply **pp = &c->replies_head;
    gf_queued_reply *prev = NULL;
    while (*pp != &s->reply) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = NULL;
    c->replies_tail = prev;
    c->frame = NULL;
    gf_request_init(&c->decoder, c->decoder.max_frame_bytes);
    gf__reply_finish(&s->reply, 0);
    /* Its slot held it alone: the slot goes back to the ring. */
    conn_close_batch(c);
}

/* The client left mid-payload: its frame is truncated. */
static void conn_truncate_frame(gf_conn *c) {
    gf_frame *s = c->frame;
    GF_LOG_INF("connection %llu (uid %u pid %u): closed after %llu of %llu payload bytes of "
               "frame %llu",
               (unsigned long long)c->id, c->uid, c->pid,
               (unsigned long long)(s->in_bytes - c->decoder.payload_left),
               (unsigned long long)s->in_bytes, (unsigned long long)s->frame_id);
    c->srv->stats.frames_truncated++;
    conn_take_back_frame(c);
}

/* A request begun request_timeout_ms ago is still not in: its slot goes
 * back at once, the client is told request_timeout and the connection
 * closes once that is written (or write_timeout_ms later). */
static void conn_request_timed_out(gf_conn *c) {
    gf_server *srv = c->srv;
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    char text[GF_ERROR_TEXT_MAX_BYTES];
    size_t n = gf_errorf(text, sizeof text, "request not complete within request_timeout_ms %u",
                         srv->cfg->request_timeout_ms);
    if (c->frame) {
        h.version = c->frame->version;
        h.frame_id = c->frame->frame_id;
        h.pipeline_id = c->frame->pipeline_id;
        gf_errorf(text + n, sizeof text - n, " (%llu of %llu payload bytes of frame %llu)",
                  (unsigned long long)(c->frame->in_bytes - c->decoder.payload_left),
                  (unsigned long long)c->frame->in_bytes, (unsigned long long)h.frame_id);
        srv->stats.frames_failed++;
        conn_take_back_frame(c);
    }
    srv->stats.closed_request_timeout++;
    c->request_begun_ns = 0;
    conn_reject_text(c, &h, GF_ERR_REQUEST_TIMEOUT, text);
    conn_update_reading(c);
}

/* Nanoseconds from `then` to `now`; 0 when `then` is later (a clock read
 * after the caller's, e.g. a request that began while the watchdog's round
 * freed a slot: unsigned subtraction would make it ancient). */
static uint64_t since(uint64_t now, uint64_t then) {
    return now > then ? now - then : 0;
}

void gf__conn_check_deadlines(gf_conn *c, uint64_t now_ns) {
    const gf_config *cfg = c->srv->cfg;
    if (c->closing)
        return;
    /* Only while we read: a connection we stopped reading (its replies pile
     * up unread) is not stalled, and is bounded by write_timeout_ms. */
    if (c->srv->draining && !c->input_drained && c->reading &&
        since(now_ns, c->last_input_ns) > (uint64_t)GF_DRAIN_STALL_MS * 1000000u) {
        gf__conn_input_drained(c);
        return;
    }
    if (c->request_begun_ns && !c->fatal &&
        since(now_ns, c->request_begun_ns) > (uint64_t)cfg->request_timeout_ms * 1000000u) {
        conn_request_timed_out(c);
    } else if (c->write_blocked &&
               since(now_ns, c->write_progress_ns) > (uint64_t)cfg->write_timeout_ms * 1000000u) {
        c->srv->stats.closed_write_timeout++;
        gf_log_limited(&c->srv->close_log, GF_CLOSE_LOG_PER_S, now_ns, GF_LOG_INFO,
                       "connection %llu (uid %u pid %u): its replies made no progress for "
                       "write_timeout_ms %u (the client does not read); closing, %u repl%s dropped",
                       (unsigned long long)c->id, c->uid, c->pid, cfg->write_timeout_ms,
                       c->replies_unfinished, c->replies_unfinished == 1 ? "y" : "ies");
        gf__conn_close(c);
    } else if (cfg->idle_timeout_ms && !c->replies_unfinished && !c->request_begun_ns &&
               !c->waiting &&
               since(now_ns, c->last_input_ns) > (uint64_t)cfg->idle_timeout_ms * 1000000u) {
        c->srv->stats.closed_idle++;
        gf_log_limited(&c->srv->close_log, GF_CLOSE_LOG_PER_S, now_ns, GF_LOG_INFO,
                       "connection %llu (uid %u pid %u): idle for idle_timeout_ms %u; closing",
                       (unsigned long long)c->id, c->uid, c->pid, cfg->idle_timeout_ms);
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
    if (c->frame)
        conn_truncate_frame(c);
    if (!c->closing && c->replies_unfinished == 0)
        gf__conn_close(c);
}

/* `n` bytes arrived where conn_read_target said (0: end of file), with the
 * memfd `fd` (-1: none) or control data that was `bad` (several fds, or
 * truncated). */
static void conn_received(gf_conn *c, size_t n, int fd, int bad) {
    c->last_input_ns = gf_now_ns();
    if (n == 0) {
        if (fd >= 0)
            close(fd);
        c->eof = 1;
        return;
    }
    c->rx_bytes += n;
    int into_slot = c->frame != NULL;
    if (into_slot) {
        gf_request_advance(&c->decoder, (uint64_t)n);
        if (!gf_request_in_payload(&c->decoder))
            frame_received(c, c->frame);
    } else {
        c->buf_end += n;
    }
    if (fd >= 0 || bad) {
        /* Payload read into a slot is a frame's: no fd may come with it. */
        if (bad || into_slot || c->pending_fd >= 0) {
            if (fd >= 0)
                close(fd);
            conn_stray_fd(c, bad ? "several file descriptors, or truncated control data, came "
                                   "with one read"
                             : into_slot ? "a file descriptor came with a frame's payload"
                                         : "a second file descriptor came before the first "
                                           "was claimed");
            return;
        }
        c->pending_fd = fd;
        c->pending_fd_pos = c->rx_bytes - 1;
    }
    conn_process(c);
}

/*
 * Stopping, and the socket has nothing more to read: every request read in
 * whole has been answered or queued.  What is begun and not complete (a
 * payload arriving into a slot, a header in parts) is cut now rather than
 * waited for: the slot's frame is answered shutting_down, and the
 * connection closes once its replies are out.
 */
void gf__conn_input_drained(gf_conn *c) {
    if (c->closing || c->input_drained || c->cutting)
        return;
    /* Until the cut frame's reply is queued, the server must not see this
     * connection as done (taking the slot back checks for the drain's end). */
    c->cutting = 1;
    if (c->frame) {
        gf_header h = {.version = c->frame->version,
                       .type = GF_MSG_FRAME,
                       .frame_id = c->frame->frame_id,
                       .pipeline_id = c->frame->pipeline_id};
        char text[GF_ERROR_TEXT_MAX_BYTES];
        gf_errorf(text, sizeof text,
                  "the daemon is stopping; frame cut after %llu of %llu payload bytes",
                  (unsigned long long)(c->frame->in_bytes - c->decoder.payload_left),
                  (unsigned long long)c->frame->in_bytes);
        c->srv->stats.frames_failed++;
        conn_take_back_frame(c);
        conn_reject_text(c, &h, GF_ERR_SHUTTING_DOWN, text);
    }
    c->cutting = 0;
    c->fatal = 1; /* read nothing more; close once the replies are out */
    c->input_drained = 1;
    conn_update_reading(c);
    if (!c->closing && c->replies_unfinished == 0)
        gf__conn_close(c);
    gf__server_check_drained(c->srv);
}

/* Reads per readiness event at most: a connection that always has bytes
 * must not keep the loop from the others. */
#define GF_READS_PER_EVENT 16

/* Reads what the socket holds, with any memfd that came with it. */
static void conn_read(gf_conn *c) {
    c->in_read = 1;
    conn_read_some(c);
    c->in_read = 0;
    if (!c->processing)
        conn_end_processing(c);
}

static void conn_read_some(gf_conn *c) {
    for (int i = 0; i < GF_READS_PER_EVENT && c->reading && !c->closing; i++) {
        /* A full buffer must be consumed before reading more (a read of 0
         * bytes would look like EOF). */
        if (!c->frame && c->buf_start == 0 && c->buf_end == sizeof c->buf)
            break;
        struct iovec iov;
        conn_read_target(c, &iov);
        union {
            struct cmsghdr align;
            char bytes[CMSG_SPACE(sizeof(int))];
        } control;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = control.bytes,
                             .msg_controllen = sizeof control.bytes};
        ssize_t n;
        int prof = gf_prof_enter(GF_PROF_RECV);
        do
            n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        gf_prof_leave(prof);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                GF_LOG_INF("connection %llu: read failed (%s); closing", (unsigned long long)c->id,
                           strerror(errno));
                gf__conn_close(c);
            } else if (c->srv->draining && !conn_request_begun(c)) {
                /* Nothing begun: the client's input is all answered.  A
                 * begun request gets GF_DRAIN_STALL_MS to go on arriving
                 * (gf__conn_check_deadlines). */
                gf__conn_input_drained(c);
            }
            return;
        }
        int fd = -1, bad = (msg.msg_flags & MSG_CTRUNC) != 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t k = 0; k < count; k++) {
                int got;
                memcpy(&got, CMSG_DATA(cm) + k * sizeof(int), sizeof got);
                if (fd < 0) {
                    fd = got;
                } else {
                    close(got);
                    bad = 1;
                }
            }
        }
        conn_received(c, (size_t)n, fd, bad);
        conn_settle(c);
        conn_update_reading(c);
        if (n == 0 || (size_t)n < iov.iov_len)
            return;
    }
}

/* The socket is readable or writable (or failed). */
static void on_io(uv_poll_t *h, int status, int events) {
    gf_conn *c = h->data;
    conn_ref(c);
    if (status < 0) {
        GF_LOG_INF("connection %llu: socket error (%s); closing", (unsigned long long)c->id,
                   uv_strerror(status));
        gf__conn_close(c);
    }
    if ((events & UV_WRITABLE) && !c->closing) {
        c->write_blocked = 0;
        gf__conn_flush(c);
    }
    if ((events & UV_READABLE) && c->reading && !c->closing && !c->in_read)
        conn_read(c);
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
    c->reading = 0;
    conn_drop_pending_fd(c);
    gf__server_stop_waiting(srv, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections_open--;
    conn_ref(c);
    uv_close((uv_handle_t *)&c->poll, on_conn_closed);
    if (c->frame)
        conn_truncate_frame(c);
    /* Whole frames of a batch still open run, and are dropped when they
     * complete, like those already on the engine. */
    conn_close_batch(c);
    /* Frames in flight keep their regions until they complete. */
    while (c->regions) {
        gf_region *r = c->regions;
        c->regions = r->next;
        c->region_count--;
        gf__region_unref(r);
    }
    gf_queued_reply *r = c->replies_head;
    c->replies_head = c->replies_tail = NULL;
    while (r) {
        gf_queued_reply *next = r->next;
        r->next = NULL;
        /* A frame still on the engine is finished when it completes. */
        if (!r->frame || !r->frame->batched)
            gf__reply_finish(r, 0);
        r = next;
    }
    conn_unref(c);
}

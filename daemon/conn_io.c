/* SPDX-License-Identifier: MIT */
/*
 * A connection's driver (conn_io.h): events, recvmsg and the request loop,
 * sendmsg of ready replies, EOF, the drain, deadlines.
 */
#include "conn_io.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "admit.h"
#include "deadline.h"
#include "group.h"
#include "introspect.h"
#include "log.h"
#include "loopprof.h"
#include "move.h"
#include "query.h"
#include "shard_state.h"

static void on_io(uv_poll_t *h, int status, int events);

/* A line about something a client did, within the daemon's budget. */
#define conn_log(c, ...)                                                                           \
    gf_log_limited(&(c)->shard->group->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_INFO,    \
                   __VA_ARGS__)

/* ---- reading on and off ------------------------------------------------------- */

/* Asks the poll handle for exactly the events the connection waits for. */
static void conn_set_events(gf_conn *c) {
    if (c->closing)
        return;
    /* Not read (waiting for a slot, above all): its client's hang-up must
     * still be seen at once (conn_hung_up); once seen, no more, since it
     * stays (level-triggered). */
    int hup = !c->reading && !c->stream.eof && !c->hup_seen;
    int want = (c->reading ? UV_READABLE : 0) | (c->write_blocked ? UV_WRITABLE : 0) |
               (hup ? UV_DISCONNECT : 0);
    if (want == c->poll_events)
        return;
    c->poll_events = want;
    if (want)
        uv_poll_start(&c->poll, want, on_io);
    else
        uv_poll_stop(&c->poll);
}

/* Whether reading can make progress now. */
static int conn_can_read(gf_conn *c) {
    return !c->closing && !c->stream.eof && !c->fatal && !c->moving &&
           (!gf_sched_waiting(&c->sched) || gf_admit_reads_on(c)) && gf_conn_output_room(c);
}

static void conn_update_reading(gf_conn *c) {
    if (c->closing)
        return;
    c->reading = conn_can_read(c);
    /* Stopping: a connection that reads nothing more has no input left. */
    if (c->shard->draining && (c->stream.eof || c->fatal))
        c->input_drained = 1;
    conn_set_events(c);
}

/* Part of a request is in: a payload arriving or being skipped, or bytes
 * of a request buffered. */
static int conn_request_begun(const gf_conn *c) {
    return c->frame || c->parked || c->holding || c->decoder.skip_left || c->buf_end > c->buf_start;
}

/* A request's clock runs while part of it is in and it can progress.  A
 * whole frame waiting for a slot waits through the daemon's doing: no clock.
 * A payload waiting to be received keeps its clock, which the watchdog reads
 * only while the client is not sending it (conn_request_clock).  And a
 * connection held back for unread replies, its own or everyone's
 * (max_output_bytes_total), or waiting for them to move (move.h), is
 * bounded by write_timeout_ms instead. */
static void conn_track_request(gf_conn *c) {
    /* A held frame (admit.h) waits for a slot or for its connection's
     * frame on the engine: either way the daemon's doing. */
    int waiting = gf_sched_waiting(&c->sched) || c->holding;
    if (!conn_request_begun(c) || (waiting && !c->sched.receive) || !gf_conn_output_room(c) ||
        gf_linked(&c->throttled_link) || c->moving)
        c->request_begun_ns = 0;
    else if (!c->request_begun_ns)
        c->request_begun_ns = gf_now_ns();
}

/* ---- writing -------------------------------------------------------------------- */

/* The socket is full (`blocked`), or takes bytes again: the shard keeps
 * the list of those that are full, whose results may have to leave their
 * slots (gf_conn_evict_results). */
static void conn_set_blocked(gf_conn *c, int blocked) {
    c->write_blocked = blocked != 0;
    if (blocked && !gf_linked(&c->blocked_link))
        gf_list_push_back(&c->shard->blocked, &c->blocked_link);
    else if (!blocked)
        gf_list_remove(&c->blocked_link);
}

/* Finishes the replies written whole, counting each result answered. */
static void finish_written(gf_conn *c, gf_link *done) {
    gf_link *l;
    while ((l = gf_list_pop_front(done))) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        if (r->frame && r->frame->status == GF_OK)
            gf_frame_answered(c->shard, c->stream.id, r->frame);
        gf_conn_finish(r, 1); /* an evicted result's release counts it answered */
    }
}

/* Writes, in order, the ready replies at the head of the queue, a batch of
 * them per sendmsg, until none is ready or the socket is full. */
static void conn_flush(gf_conn *c) {
    int prof = gf_prof_enter(GF_PROF_FLUSH);
    while (!c->closing && !c->write_blocked && gf_replyq_can_write(&c->out)) {
        struct iovec iov[2 * GF_WRITE_BATCH_MAX];
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = gf_replyq_gather(&c->out, iov)};
        ssize_t sent;
        int send_prof = gf_prof_enter(GF_PROF_SEND);
        do
            sent = sendmsg(c->stream.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (sent < 0 && errno == EINTR);
        gf_prof_leave(send_prof);
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->write_progress_ns = gf_now_ns();
            conn_set_blocked(c, 1);
        } else if (sent < 0) {
            conn_log(c, "connection %llu (uid %u pid %u): write failed (%s); closing",
                     (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
                     strerror(errno));
            gf_conn_close(c);
        } else {
            c->write_progress_ns = gf_now_ns();
            gf_link done;
            gf_list_init(&done);
            conn_set_blocked(c, gf_replyq_consume(&c->out, (size_t)sent, &done));
            finish_written(c, &done);
        }
    }
    gf_prof_leave(prof);
    if (c->write_blocked)
        gf_conn_evict_results(c);
}

/* ---- what ends a connection's input ---------------------------------------------- */

/* The frame whose payload is arriving (or is parked) is cut by the daemon:
 * it fails, and its slot or memory goes back.  Returns the request's
 * header, for its ERROR. */
static gf_header conn_cut_frame(gf_conn *c) {
    gf_header h = gf_conn_arriving_header(c);
    h.payload_bytes = 0;
    c->shard->stats.frames_failed++;
    gf_conn_drop_arriving(c);
    return h;
}

/* Ends the frame or request that is late: its slot goes back at once, the
 * client is told request_timeout with `why`, and the connection closes once
 * that is written (or write_timeout_ms later). */
static void conn_end_request(gf_conn *c, const char *why) {
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    char text[GF_ERROR_TEXT_MAX_BYTES];
    size_t n = gf_errorf(text, sizeof text, "%s", why);
    if (gf_conn_arriving(c)) {
        gf_header a = gf_conn_arriving_header(c);
        gf_errorf(text + n, sizeof text - n, " (%llu of %llu payload bytes of frame %llu)",
                  (unsigned long long)gf_conn_payload_received(c),
                  (unsigned long long)a.payload_bytes, (unsigned long long)a.frame_id);
        h = conn_cut_frame(c);
    } else if (c->holding) {
        /* Held (admit.h): received, and waiting for a slot (or for its
         * connection's frame on the engine) that it no longer needs. */
        h = c->held_header;
        c->holding = 0;
        c->shard->stats.frames_failed++;
        gf_sched_stop_waiting(&c->shard->sched, &c->sched);
    } else if (gf_sched_waiting(&c->sched)) {
        /* Its header waits in the buffer for a slot that it no longer needs. */
        gf_request req;
        gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
        h = req.header;
        gf_sched_stop_waiting(&c->shard->sched, &c->sched);
    }
    c->request_begun_ns = 0;
    gf_conn_reject(c, &h, GF_ERR_REQUEST_TIMEOUT, text);
}

/*
 * Stopping, and the socket has nothing more to read: every request read in
 * whole has been answered or queued.  What is begun and not complete (a
 * payload arriving into a slot, a header in parts) is cut now rather than
 * waited for: the frame is answered shutting_down, and the connection
 * closes once its replies are out.
 */
static void conn_input_drained(gf_conn *c) {
    if (c->closing || c->input_drained)
        return;
    if (gf_conn_arriving(c)) {
        char text[GF_ERROR_TEXT_MAX_BYTES];
        gf_errorf(text, sizeof text,
                  "the daemon is stopping; frame cut after %llu of %llu payload bytes",
                  (unsigned long long)gf_conn_payload_received(c),
                  (unsigned long long)gf_conn_arriving_header(c).payload_bytes);
        gf_header h = conn_cut_frame(c);
        gf_conn_reject(c, &h, GF_ERR_SHUTTING_DOWN, text);
    }
    c->fatal = 1; /* read nothing more; close once the replies are out */
    c->input_drained = 1;
    gf_shard_defer(c->shard, &c->shard->drained);
}

/* The bytes of the request at the front of the buffer that are neither
 * buffered nor in the socket: 0 when it is all there (or nothing is begun). */
static uint64_t conn_request_missing(gf_conn *c) {
    /* A parked or held frame waits whole; one arriving is read, never waiting. */
    if (c->parked || c->holding)
        return 0;
    gf_request req;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
    if (req.kind != GF_REQ_HEADER && req.kind != GF_REQ_MORE)
        return 0;
    uint64_t want =
        req.kind == GF_REQ_MORE
            ? GF_HEADER_BYTES
            : req.bytes + (req.header.type == GF_MSG_FRAME ? req.header.payload_bytes : 0);
    uint64_t have = c->buf_end - c->buf_start;
    int queued = 0;
    if (have < want && ioctl(c->stream.fd, FIONREAD, &queued) == 0 && queued > 0)
        have += (uint64_t)queued;
    return have < want ? want - have : 0;
}

/*
 * The client hung up (or shut down its writing side) while the connection
 * was not read.  A request waiting for a slot whose bytes will never all
 * come ends its input now (conn_settle gives it up), not when its slot or
 * its deadline comes: its connection stops counting against
 * max_connections at once (a flood of clients closing mid-payload filled
 * it for request_timeout_ms).  One whose bytes are all in the socket still
 * runs: a half-closed client may be waiting for its results.
 */
static void conn_hung_up(gf_conn *c) {
    c->hup_seen = 1;
    if (gf_sched_waiting(&c->sched) && conn_request_missing(c) > 0)
        c->stream.eof = 1;
}

/* The input is over while the FRAME at the front of the buffer waits for a
 * slot, short of bytes it will never get: it never runs.  Like any request
 * not admitted it is not counted received; its connection is counted in
 * STATS connections.closed_while_waiting. */
static void conn_give_up_waiting(gf_conn *c) {
    conn_log(c,
             "connection %llu (uid %u pid %u): closed %llu bytes short of a frame that waited "
             "for a slot",
             (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
             (unsigned long long)conn_request_missing(c));
    gf_sched_stop_waiting(&c->shard->sched, &c->sched);
    c->shard->stats.closed_while_waiting++;
    c->buf_start = c->buf_end;
}

/*
 * After the client's EOF or a fatal error: a frame half received can never
 * complete, and a connection that owes nothing more and waits for nothing
 * is closed.  Frames already whole still get answered first (a half-closed
 * client may be waiting for results on the GPU).
 */
static void conn_settle(gf_conn *c) {
    if (c->closing || c->moving) /* its buffered FRAME goes with it */
        return;
    if (c->stream.eof && gf_sched_waiting(&c->sched) && conn_request_missing(c) > 0)
        conn_give_up_waiting(c);
    int input_over = c->stream.eof && !gf_sched_waiting(&c->sched);
    if (input_over && gf_conn_arriving(c))
        gf_conn_truncate_frame(c);
    /* Requests put off to the next iteration (gf_conn_may_build) still
     * get their replies. */
    if ((input_over || c->fatal) && c->out.unfinished == 0 && !gf_linked(&c->resume.link))
        gf_conn_close(c);
}

/* After any event: what the connection took in goes to the engine, what it
 * owes goes out, its input is settled, and it reads exactly when it can. */
static void conn_go_on(gf_conn *c) {
    if (!c->closing)
        gf_sched_end_batch(&c->shard->sched, &c->sched, c->frame != NULL);
    conn_flush(c);
    conn_settle(c);
    conn_update_reading(c);
    conn_track_request(c);
    if (c->moving)
        gf_move_try(c);
}

/* ---- the request loop -------------------------------------------------------------- */

/* File descriptors are allowed on REGION_ADD and DEVICE_REGION_ADD only,
 * one at a time, whole: anything else is a fatal stray_fd, and every fd
 * received is closed. */
static void conn_stray_fd(gf_conn *c, const char *what) {
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    if (c->stream.pending_fd >= 0)
        close(c->stream.pending_fd);
    c->stream.pending_fd = -1;
    if (c->frame || c->parked)
        h = conn_cut_frame(c);
    char text[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(text, sizeof text,
              "%s; only REGION_ADD and DEVICE_REGION_ADD take one, sent with their own bytes",
              what);
    gf_conn_reject(c, &h, GF_ERR_STRAY_FD, text);
}

/*
 * The memfd that came with the request `req` at the front of the buffer:
 * the pending fd whose last byte lies inside the request's bytes, taken
 * from the connection.  Returns it, -1 when none came with it, or -2 after
 * refusing an fd that came with earlier bytes.
 */
static int conn_request_fd(gf_conn *c, const gf_request *req) {
    if (c->stream.pending_fd < 0)
        return -1;
    uint64_t start = c->stream.rx_bytes - (c->buf_end - c->buf_start);
    uint64_t end = start + req->bytes + req->header.payload_bytes;
    if (c->stream.pending_fd_pos < start) {
        conn_stray_fd(c, "a file descriptor came with a refused frame's payload");
        return -2;
    }
    if (c->stream.pending_fd_pos >= end)
        return -1;
    int fd = c->stream.pending_fd;
    c->stream.pending_fd = -1;
    return fd;
}

/* A whole request header: to admission or to the queries.  Returns 1 when
 * it was consumed and the loop may go on. */
static int conn_dispatch(gf_conn *c, const gf_request *req) {
    /* A request other than FRAME with a payload (DEVICE_REGION_ADD's 16
     * bytes) is taken whole, with the fd that came with its last byte; a
     * frame by reference with its descriptor, which says where it runs. */
    if ((req->header.type != GF_MSG_FRAME || (req->header.flags & GF_FLAGS_BY_REF) != 0) &&
        c->buf_end - c->buf_start < req->bytes + req->header.payload_bytes)
        return 0;
    int fd = conn_request_fd(c, req);
    if (fd == -2)
        return 0;
    if (fd >= 0 && req->header.type != GF_MSG_REGION_ADD &&
        req->header.type != GF_MSG_DEVICE_REGION_ADD) {
        close(fd);
        char what[96];
        gf_errorf(what, sizeof what, "a file descriptor came with a %s request",
                  gf_msg_type_name(req->header.type));
        conn_stray_fd(c, what);
        return 0;
    }
    if (req->header.type != GF_MSG_FRAME)
        return gf_query_answer(c, req, fd);
    if (gf_move_wanted(c, &req->header, c->buf + c->buf_start + req->bytes)) {
        c->moving = 1;
        return 0;
    }
    return gf_admit_frame(c, req);
}

/* Takes one decoded event of the request stream.  Returns 1 to go on. */
static int conn_take(gf_conn *c, const gf_request *req) {
    switch (req->kind) {
    case GF_REQ_MORE: return 0;
    case GF_REQ_SKIP:
        c->buf_start += req->bytes;
        gf_request_advance(&c->decoder, req->bytes);
        if (!c->decoder.skip_left)
            c->request_begun_ns = 0;
        return 1;
    case GF_REQ_ERROR:
        /* The stream cannot be trusted past a bad header.  A status not
         * fatal in itself (bad_length on a LIST) ends it too: count it. */
        if (!gf_status_is_fatal(req->status))
            c->shard->stats.connections_rejected++;
        c->fatal = 1;
        gf_conn_reject(c, &req->header, req->status, req->text);
        return 0;
    case GF_REQ_HEADER: return conn_dispatch(c, req);
    case GF_REQ_PAYLOAD: assert(!"payload bytes outside a claimed slot"); return 0;
    }
    return 0;
}

/* Consumes buffered bytes until it needs more, must wait, or must stop. */
static void conn_process(gf_conn *c) {
    int prof = gf_prof_enter(GF_PROF_PARSE);
    while (!c->closing && !c->fatal && !c->moving && (!gf_sched_waiting(&c->sched) || c->holding) &&
           !c->frame && gf_conn_output_room(c)) {
        /* A parked payload is placed once whole, before any request after it;
         * a held frame too, or gives way to its successor. */
        if (c->parked || c->holding) {
            if (!(c->parked ? gf_admit_parked(c) : gf_admit_held(c)))
                break;
            continue;
        }
        gf_request req;
        gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
        if (!conn_take(c, &req))
            break;
    }
    gf_prof_leave(prof);
}

/* ---- reading -------------------------------------------------------------------- */

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
    if (gf_conn_arriving(c)) {
        /* Parked: into its own memory. */
        uint64_t left = c->decoder.payload_left;
        iov->iov_base = c->parked + (c->parked_header.payload_bytes - left);
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

/* `n` bytes arrived where conn_read_target said (0: end of file), with the
 * memfd `fd` (-1: none) or control data that was `bad` (several fds, or
 * truncated). */
static void conn_received(gf_conn *c, size_t n, int fd, int bad) {
    c->last_input_ns = gf_now_ns();
    if (n == 0) {
        if (fd >= 0)
            close(fd);
        c->stream.eof = 1;
        return;
    }
    c->stream.rx_bytes += n;
    int into_slot = gf_conn_arriving(c);
    if (into_slot)
        gf_admit_payload(c, n);
    else
        c->buf_end += n;
    if (fd >= 0 || bad) {
        /* Payload read into a slot is a frame's: no fd may come with it. */
        if (bad || into_slot || c->stream.pending_fd >= 0) {
            if (fd >= 0)
                close(fd);
            conn_stray_fd(c, bad ? "several file descriptors, or truncated control data, came "
                                   "with one read"
                             : into_slot ? "a file descriptor came with a frame's payload"
                                         : "a second file descriptor came before the first "
                                           "was claimed");
            return;
        }
        c->stream.pending_fd = fd;
        c->stream.pending_fd_pos = c->stream.rx_bytes - 1;
    }
    conn_process(c);
}

/* The one fd SCM_RIGHTS brought with a read into *fd; `bad` when there were
 * several (all but the first closed) or the control data was truncated. */
static int take_fds(struct msghdr *msg, int *fd) {
    int bad = (msg->msg_flags & MSG_CTRUNC) != 0;
    *fd = -1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t k = 0; k < count; k++) {
            int got;
            memcpy(&got, CMSG_DATA(cm) + k * sizeof(int), sizeof got);
            if (*fd < 0) {
                *fd = got;
            } else {
                close(got);
                bad = 1;
            }
        }
    }
    return bad;
}

/* One recvmsg where conn_read_target says.  Returns the bytes read (0: EOF),
 * or -1 when the socket had nothing (or failed: the connection closed). */
static ssize_t conn_recv(gf_conn *c, struct iovec *iov) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr msg = {.msg_iov = iov,
                         .msg_iovlen = 1,
                         .msg_control = control.bytes,
                         .msg_controllen = sizeof control.bytes};
    ssize_t n;
    int prof = gf_prof_enter(GF_PROF_RECV);
    do
        n = recvmsg(c->stream.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    gf_prof_leave(prof);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            conn_log(c, "connection %llu (uid %u pid %u): read failed (%s); closing",
                     (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
                     strerror(errno));
            gf_conn_close(c);
        } else if (c->shard->draining && !conn_request_begun(c)) {
            /* Nothing begun: the client's input is all answered.  A begun
             * request gets GF_DRAIN_STALL_MS to go on arriving. */
            conn_input_drained(c);
        }
        return -1;
    }
    int fd;
    int bad = take_fds(&msg, &fd);
    conn_received(c, (size_t)n, fd, bad);
    return n;
}

/* Reads what the socket holds, up to the quantum, with any memfd that came
 * with it, and processes it as it comes.  What is left is read at the next
 * readiness event, after the other connections' (the poll is
 * level-triggered). */
static void conn_read(gf_conn *c) {
    size_t quantum = 0;
    for (int i = 0; i < GF_READS_PER_EVENT && quantum < GF_READ_QUANTUM_BYTES && c->reading; i++) {
        /* A full buffer must be consumed before reading more (a read of 0
         * bytes would look like EOF). */
        if (!gf_conn_arriving(c) && c->buf_start == 0 && c->buf_end == sizeof c->buf)
            break;
        struct iovec iov;
        conn_read_target(c, &iov);
        size_t asked = iov.iov_len;
        ssize_t n = conn_recv(c, &iov);
        c->reading = c->reading && conn_can_read(c);
        if (n <= 0 || (size_t)n < asked)
            return;
        quantum += (size_t)n;
    }
}

/* ---- events ------------------------------------------------------------------------- */

/* The socket is readable or writable (or failed). */
static void on_io(uv_poll_t *h, int status, int events) {
    gf_conn *c = h->data;
    if (status < 0) {
        conn_log(c, "connection %llu (uid %u pid %u): socket error (%s); closing",
                 (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid,
                 uv_strerror(status));
        gf_conn_close(c);
    }
    if ((events & UV_DISCONNECT) && !c->reading)
        conn_hung_up(c);
    if ((events & UV_WRITABLE) && !c->closing)
        conn_set_blocked(c, 0);
    if ((events & UV_READABLE) && c->reading && !c->closing)
        conn_read(c);
    conn_go_on(c);
}

void gf_conn_io_resume(gf_defer_item *it) {
    gf_conn *c = gf_list_entry(it, gf_conn, resume);
    if (c->closing)
        return;
    conn_process(c);
    /* Stopping: read what the socket holds now rather than wait for an
     * event that an idle client never causes; EAGAIN ends its input. */
    if (c->shard->draining && !c->input_drained) {
        c->reading = conn_can_read(c);
        conn_read(c);
    }
    conn_go_on(c);
}

void gf_conn_io_accept(gf_shard *sh, int fd, uint32_t uid, uint32_t gid, uint32_t pid) {
    gf_conn_stream stream = {
        .fd = fd, .uid = uid, .gid = gid, .pid = pid, .pending_fd = -1, .next_region_id = 1};
    gf_conn *c = gf_conn_new(sh, &stream);
    if (c)
        conn_update_reading(c);
}

/* ---- deadlines ---------------------------------------------------------------------- */

static void conn_close_for(gf_conn *c, uint64_t now_ns, const char *why, uint32_t ms) {
    gf_log_limited(&c->shard->group->close_log, GF_CLOSE_LOG_PER_S, now_ns, GF_LOG_INFO,
                   "connection %llu (uid %u pid %u): %s %u; closing, %u repl%s dropped",
                   (unsigned long long)c->stream.id, c->stream.uid, c->stream.pid, why, ms,
                   c->out.unfinished, c->out.unfinished == 1 ? "y" : "ies");
    gf_conn_close(c);
}

/* The request clock the watchdog goes by: none after a fatal error, none
 * for a request waiting for every shard's figures, and none for a payload
 * that waits for a slot while its bytes are there (the wait is the daemon's
 * doing); one that waits and is not being sent times out
 * like any other request, so a staller cannot wait in line for ever. */
static uint64_t conn_request_clock(gf_conn *c) {
    if (c->fatal)
        return 0;
    if (gf_sched_waiting(&c->sched) && gf_conn_io_receive_ready(&c->sched, NULL))
        return 0;
    /* A STATS or TRACE waiting for the shards' figures waits through the
     * daemon's doing too. */
    if (c->gathering || gf_linked(&c->gather_link))
        return 0;
    return c->request_begun_ns;
}

void gf_conn_io_check_deadlines(gf_conn *c, uint64_t now_ns) {
    gf_shard *sh = c->shard;
    const gf_config *cfg = sh->cfg;
    if (c->closing)
        return;
    gf_conn_clocks k = {
        .request_begun_ns = conn_request_clock(c),
        .write_blocked_ns = c->write_blocked ? c->write_progress_ns : 0,
        .last_input_ns = c->last_input_ns,
        .receive_progress_ns = c->frame ? c->receive_progress_ns : 0,
        .receive_held_ns =
            c->frame && cfg->max_input_bytes_total && gf_sched_others_wait(&sh->sched, &c->sched)
                ? c->frame->claimed_ns
                : 0,
        .idle = !c->out.unfinished && !c->request_begun_ns && !gf_sched_waiting(&c->sched),
        .drain_reading = sh->draining && !c->input_drained && c->reading,
        .receive_contended = gf_sched_receive_contended(&sh->sched),
    };
    gf_deadline_limits lim = gf_deadline_limits_of(cfg);
    char why[GF_ERROR_TEXT_MAX_BYTES];
    enum gf_deadline due = gf_deadline_due(&k, &lim, now_ns);
    if (due == GF_DUE_RECEIVE_HOLD && gf_admit_park_arriving(c) < 0) {
        /* No memory for it: it keeps its slot, under its other deadlines. */
        k.receive_held_ns = 0;
        due = gf_deadline_due(&k, &lim, now_ns);
    }
    switch (due) {
    case GF_DUE_NONE: return;
    case GF_DUE_RECEIVE_HOLD: break; /* parked: the slot went back */
    case GF_DUE_DRAIN_STALL: conn_input_drained(c); break;
    case GF_DUE_RECEIVE_STALL:
        sh->stats.closed_receive_stall++;
        gf_errorf(why, sizeof why,
                  "payload made no progress for receive_stall_ms %u while other clients waited "
                  "for a slot",
                  cfg->receive_stall_ms);
        conn_end_request(c, why);
        break;
    case GF_DUE_REQUEST:
        sh->stats.closed_request_timeout++;
        gf_errorf(why, sizeof why, "request not complete within request_timeout_ms %u",
                  cfg->request_timeout_ms);
        conn_end_request(c, why);
        break;
    case GF_DUE_WRITE:
        sh->stats.closed_write_timeout++;
        conn_close_for(c, now_ns,
                       "its replies made no progress (the client does not read) for "
                       "write_timeout_ms",
                       cfg->write_timeout_ms);
        break;
    case GF_DUE_IDLE:
        sh->stats.closed_idle++;
        conn_close_for(c, now_ns, "idle for idle_timeout_ms", cfg->idle_timeout_ms);
        break;
    }
    conn_go_on(c);
}

void gf_conn_io_fail_batched(gf_conn *c, uint32_t status, const char *text) {
    if (c->closing)
        return;
    gf_link *l = gf_list_front(&c->out.replies);
    while (l) {
        gf_reply *r = gf_list_entry(l, gf_reply, link);
        l = gf_list_next(&c->out.replies, l);
        if (r->ready)
            continue;
        const gf_frame *f = r->frame;
        if (f == NULL || !f->batched)
            break; /* nor may any after it go before it */
        /* The engine may still run the frame (a worker reads it): it is left
         * alone, and an ERROR of its own takes its reply's place. */
        gf_header h = {.version = f->version,
                       .type = GF_MSG_FRAME,
                       .frame_id = f->frame_id,
                       .pipeline_id = f->pipeline_id};
        char *body = strdup(text);
        gf_reply *q = gf_reply_loose(GF_MSG_ERROR, &h, status, body, body ? strlen(body) : 0);
        if (q == NULL) {
            free(body);
            break;
        }
        gf_replyq_replace(&c->out, r, q);
        c->shard->stats.rejected[status]++;
        c->shard->stats.frames_failed++;
    }
    conn_flush(c);
}

/* ---- the scheduler's hooks ------------------------------------------------------------ */

void gf_conn_io_granted(gf_sched_client *sc, void *arg) {
    (void)arg;
    gf_conn *c = gf_conn_of(sc);
    /* Its request's clock starts again: the wait was not its doing (one
     * that ran while it was not sending was checked meanwhile). */
    c->request_begun_ns = 0;
    gf_conn_defer(c);
}

/* `c`'s frames of the finished slot `s` have their replies ready: written
 * now when `completed` (outside any event of the connection), else after
 * this event; a closing connection's are dropped (the last may free it). */
static void replies_ready(gf_conn *c, gf_slot *s, int completed) {
    if (!c->closing && completed) {
        /* Written now: the slot goes back before the next reads want one. */
        conn_flush(c);
        conn_set_events(c);
        if (c->holding) /* a newest-only frame waited for this one (admit.h) */
            gf_conn_defer(c);
        return;
    }
    if (!c->closing) {
        gf_conn_defer(c);
        return;
    }
    /* Its connection went: the results are dropped (the last may free it). */
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_reply *r = &s->frames[i].reply;
        if (r->conn != c || !r->ready)
            continue;
        gf_replyq_remove(r);
        gf_conn_finish(r, 0);
    }
}

/* Adds `c` to told[0..*n) unless it is there already: each connection with
 * frames in a slot is told once.  Its frames usually lie together, so the
 * search starts at the last. */
static void note_conn(gf_conn **told, uint32_t *n, gf_conn *c) {
    for (uint32_t i = *n; i-- > 0;)
        if (told[i] == c)
            return;
    told[(*n)++] = c;
}

void gf_conn_io_finished(gf_slot *s, int completed, void *arg) {
    gf_shard *sh = arg;
    GF_SHARD_OWNED(sh);
    gf_conn *told[GF_SLOT_FRAMES_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_frame *f = &s->frames[i];
        if (!f->batched)
            continue;
        f->batched = 0;
        /* A launch that failed partway is answered at completion
         * (gf_engine_submit), with the same words as a refusal. */
        gf_frame_reply(f, completed && !s->failed ? NULL : sh->engine->ops->name);
        note_conn(told, &n, gf_conn_of(f->client));
    }
    for (uint32_t i = 0; i < n; i++)
        replies_ready(told[i], s, completed);
}

int gf_conn_io_receive_ready(gf_sched_client *sc, void *arg) {
    (void)arg;
    gf_conn *c = gf_conn_of(sc);
    gf_request req;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
    if (req.kind != GF_REQ_HEADER)
        return 1;
    uint64_t want = req.header.payload_bytes < GF_RECEIVE_READY_BYTES ? req.header.payload_bytes
                                                                      : GF_RECEIVE_READY_BYTES;
    uint64_t have = c->buf_end - c->buf_start - req.bytes;
    int queued = 0;
    if (have < want && ioctl(c->stream.fd, FIONREAD, &queued) == 0 && queued > 0)
        have += (uint64_t)queued;
    return have >= want;
}

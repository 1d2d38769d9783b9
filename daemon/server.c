#include "server.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "completion.h"
#include "engine.h"
#include "log.h"
#include "slots.h"
#include "trace.h"

/* The connection's buffer: one header plus a small staged payload. */
#define GF_CONN_BUF_BYTES (GF_HEADER_BYTES + GF_STAGED_PAYLOAD_MAX_BYTES)
/* ERROR/LIST/STATS replies a connection may have queued before we stop
 * reading from it: a client that floods bad frames and never reads cannot
 * make the daemon's memory grow without bound. */
#define GF_CONN_MAX_LOOSE_REPLIES 64
/* Pending connections the kernel queues for accept(). */
#define GF_LISTEN_BACKLOG 128
/* Rates and loop utilisation are sampled this often. */
#define GF_SAMPLE_PERIOD_MS 1000u
/* The span over which STATS reports GPU busy and overlap fractions. */
#define GF_GPU_WINDOW_NS 1000000000ull
/* How often in-flight frames are checked against their deadline. */
#define GF_WATCHDOG_PERIOD_MAX_MS 1000u

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

enum conn_state {
    CONN_HEADER,  /* collecting a header in buf                                 */
    CONN_PAYLOAD, /* reading a frame's payload straight into slot->in_host        */
    CONN_DISCARD, /* skipping the payload of a frame that was refused             */
};

/* One client connection: its whole state. */
typedef struct gf_conn {
    uv_pipe_t pipe; /* the socket; pipe.data is the conn            */
    gf_server *srv;
    uint64_t id;                  /* for logs: 1, 2, ... in accept order          */
    struct gf_conn *prev, *next;  /* the server's list of live connections        */
    struct gf_conn *next_waiting; /* the server's queue of slot waiters           */

    enum conn_state state;
    uint8_t buf[GF_CONN_BUF_BYTES]; /* received bytes not yet consumed              */
    size_t buf_start, buf_end;      /* unconsumed bytes are buf[buf_start..buf_end) */
    gf_slot *slot;                  /* CONN_PAYLOAD: the slot being filled          */
    uint64_t payload_received;      /* CONN_PAYLOAD: bytes of it in slot->in_host   */
    uint64_t discard_left;          /* CONN_DISCARD: payload bytes still to skip    */
    uint64_t header_seen_ns;        /* when the pending FRAME header was first read */

    gf_queued_reply *replies_head; /* replies owed and not yet handed to uv_write, */
    gf_queued_reply *replies_tail; /* in request order                             */
    uint32_t replies_unfinished;   /* owed replies not yet written or dropped      */
    uint32_t loose_replies;        /* of them, those not tied to a slot            */
    uint32_t refs;                 /* the handle (until its close callback) + one
                                      per unfinished reply; freed at zero          */

    unsigned reading : 1; /* uv_read_start is in effect                   */
    unsigned waiting : 1; /* on the server's slot-waiter queue            */
    unsigned eof : 1;     /* the client shut down its writing side        */
    unsigned fatal : 1;   /* a fatal protocol error: close after replies  */
    unsigned closing : 1; /* uv_close called                              */
} gf_conn;

struct gf_server {
    uv_loop_t *loop;
    const gf_config *cfg;
    gf_engine *engine;
    gf_slot_ring ring;
    gf_completion done; /* engines push finished slots here            */
    uv_pipe_t listener;
    uv_timer_t watchdog;    /* frame deadlines                              */
    uv_timer_t sampler;     /* rates and loop utilisation, once a second    */
    uv_timer_t drain_timer; /* bounds a graceful stop                     */
    gf_trace trace;         /* the last frames' stage times (TRACE)         */
    int listen_fd;          /* >= 0: a socket passed by systemd             */
    gf_stats stats;
    gf_conn *conns;                       /* live connections                             */
    gf_conn *waiting_head, *waiting_tail; /* paused for want of a slot, FIFO       */
    uint64_t next_conn_id;
    uint32_t slots_in_flight; /* submitted and not yet completed              */
    unsigned listening : 1;
    unsigned draining : 1;
    unsigned failed : 1; /* fatal engine failure                         */
    unsigned handles_closed : 1;
    unsigned drain_timer_started : 1;
};

static void conn_process(gf_conn *c);
static void conn_flush(gf_conn *c);
static void conn_close(gf_conn *c);
static void conn_update_reading(gf_conn *c);
static void conn_settle(gf_conn *c);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void server_check_drained(gf_server *srv);
static void server_fatal(gf_server *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- connection lifetime ------------------------------------------------ */

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

static void waiting_remove(gf_server *srv, gf_conn *c) {
    if (!c->waiting)
        return;
    gf_conn **pp = &srv->waiting_head;
    gf_conn *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->next_waiting;
    }
    if (*pp) {
        *pp = c->next_waiting;
        if (srv->waiting_tail == c)
            srv->waiting_tail = prev;
    }
    c->next_waiting = NULL;
    c->waiting = 0;
}

static void waiting_push(gf_server *srv, gf_conn *c) {
    assert(!c->waiting);
    c->waiting = 1;
    c->next_waiting = NULL;
    if (srv->waiting_tail)
        srv->waiting_tail->next_waiting = c;
    else
        srv->waiting_head = c;
    srv->waiting_tail = c;
    srv->stats.backpressure_pauses++;
}

static void on_conn_closed(uv_handle_t *h) {
    gf_conn *c = h->data;
    gf_server *srv = c->srv;
    conn_unref(c);
    server_check_drained(srv);
}

/* ---- replies -------------------------------------------------------------- */

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
 * reply owns, returns its slot, resumes readers waiting for a slot, and
 * closes a connection that has nothing left to say.
 */
static void reply_finish(gf_queued_reply *r, int delivered) {
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
        conn_close(c);
    /* Requests already buffered may have waited for this reply to go out
     * (the cap on loose replies); no new bytes need arrive to go on. */
    conn_process(c);
    conn_settle(c);
    conn_update_reading(c);
    conn_unref(c);

    /* A free slot goes to connections paused for one, in arrival order. */
    while (srv->ring.free_count > 0 && srv->waiting_head && !srv->draining) {
        gf_conn *w = srv->waiting_head;
        waiting_remove(srv, w);
        conn_ref(w);
        conn_process(w);
        conn_settle(w);
        conn_update_reading(w);
        conn_unref(w);
    }
    server_check_drained(srv);
}

/*
 * A RESULT was written: count it, add its phases (STATS.md) and keep its
 * stage times for TRACE.  O(1), no allocation.
 */
static void frame_answered(gf_server *srv, const gf_conn *c, const gf_slot *s) {
    uint64_t written = gf_now_ns();
    const gf_stage_times *t = &s->stages;
    uint64_t ph[GF_PHASE_COUNT] = {0};
    unsigned mask = (1u << GF_PHASE_SLOT_WAIT) | (1u << GF_PHASE_RECEIVE) |
                    (1u << GF_PHASE_COMPLETION_DELAY) | (1u << GF_PHASE_REPLY_WRITE) |
                    (1u << GF_PHASE_END_TO_END);
    ph[GF_PHASE_SLOT_WAIT] = s->claimed_ns - s->arrived_ns;
    ph[GF_PHASE_RECEIVE] = s->submitted_ns - s->claimed_ns;
    if (t->timed) {
        ph[GF_PHASE_H2D] = t->h2d_end_ns - t->h2d_begin_ns;
        ph[GF_PHASE_KERNEL] = t->kernel_end_ns - t->kernel_begin_ns;
        ph[GF_PHASE_D2H] = t->d2h_end_ns - t->d2h_begin_ns;
        mask |= (1u << GF_PHASE_H2D) | (1u << GF_PHASE_KERNEL) | (1u << GF_PHASE_D2H);
    }
    ph[GF_PHASE_COMPLETION_DELAY] =
        s->drained_ns > t->gpu_done_ns ? s->drained_ns - t->gpu_done_ns : 0;
    ph[GF_PHASE_REPLY_WRITE] = written - s->drained_ns;
    ph[GF_PHASE_END_TO_END] = written - s->arrived_ns;
    srv->stats.frames_answered++;
    srv->stats.bytes_out += s->out_bytes;
    gf_stats_frame_answered(&srv->stats, s->pipeline_id, ph, mask);
    gf_trace_rec rec = {.frame_id = s->frame_id,
                        .conn_id = c->id,
                        .pipeline_id = s->pipeline_id,
                        .slot = s->index,
                        .status = GF_OK,
                        .in_bytes = s->in_bytes,
                        .out_bytes = s->out_bytes,
                        .arrived_ns = s->arrived_ns,
                        .claimed_ns = s->claimed_ns,
                        .submitted_ns = s->submitted_ns,
                        .done_ns = s->done_ns,
                        .drained_ns = s->drained_ns,
                        .written_ns = written,
                        .stages = *t};
    gf_trace_push(&srv->trace, &rec);
}

static void on_write(uv_write_t *req, int status) {
    gf_queued_reply *r = container_of(req, gf_queued_reply, write_req);
    gf_conn *c = r->conn;
    gf_server *srv = c->srv;
    if (status == 0 && r->slot && r->slot->status == GF_OK)
        frame_answered(srv, c, r->slot);
    if (status < 0 && status != UV_ECANCELED && !c->closing) {
        GF_LOG_INF("connection %llu: write failed (%s); closing", (unsigned long long)c->id,
                   uv_strerror(status));
        conn_close(c);
    }
    reply_finish(r, status == 0);
}

/* Writes, in order, every reply at the head of the queue that is ready. */
static void conn_flush(gf_conn *c) {
    while (c->replies_head && c->replies_head->ready && !c->closing) {
        gf_queued_reply *r = c->replies_head;
        c->replies_head = r->next;
        if (!c->replies_head)
            c->replies_tail = NULL;
        r->next = NULL;
        /* uv_buf_t's length is a size_t on Unix; uv_buf_init's is not. */
        uv_buf_t bufs[2] = {{.base = (char *)r->header, .len = GF_HEADER_BYTES}};
        unsigned n = 1;
        if (r->body && r->body_bytes)
            bufs[n++] = (uv_buf_t){.base = r->body, .len = r->body_bytes};
        else if (!r->body && r->slot && r->slot->out_bytes)
            bufs[n++] = (uv_buf_t){.base = (char *)r->slot->out_host, .len = r->slot->out_bytes};
        int rc = uv_write(&r->write_req, (uv_stream_t *)&c->pipe, bufs, n, on_write);
        if (rc < 0) {
            GF_LOG_INF("connection %llu: cannot write (%s); closing", (unsigned long long)c->id,
                       uv_strerror(rc));
            conn_ref(c);
            conn_close(c);
            reply_finish(r, 0);
            conn_unref(c);
            return;
        }
    }
}

/* Fills a reply's header. */
static void reply_header(gf_queued_reply *r, uint8_t type, uint64_t frame_id, uint32_t pipeline_id,
                         uint32_t status, uint64_t payload_bytes) {
    gf_header h = {.version = GF_PROTOCOL_VERSION,
                   .type = type,
                   .frame_id = frame_id,
                   .pipeline_id = pipeline_id,
                   .status = status,
                   .payload_bytes = payload_bytes};
    gf_header_encode(&h, r->header);
}

/* Formats an ERROR text into a malloc'd buffer; *len gets its length. */
static char *error_vtext(size_t *len, const char *fmt, va_list ap) {
    char *text = malloc(GF_ERROR_TEXT_MAX_BYTES);
    if (!text)
        return NULL;
    int n = vsnprintf(text, GF_ERROR_TEXT_MAX_BYTES, fmt, ap);
    *len = n < 0 ? 0
                 : ((size_t)n >= GF_ERROR_TEXT_MAX_BYTES ? GF_ERROR_TEXT_MAX_BYTES - 1 : (size_t)n);
    return text;
}

static char *error_text(size_t *len, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *error_text(size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = error_vtext(len, fmt, ap);
    va_end(ap);
    return text;
}

/*
 * Queues an ERROR reply for the request `h` with `status` and a message, and
 * counts it.  A fatal status also stops reading: the connection closes once
 * its replies are out.
 */
static void conn_reject(gf_conn *c, const gf_header *h, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void conn_reject(gf_conn *c, const gf_header *h, uint32_t status, const char *fmt, ...) {
    gf_server *srv = c->srv;
    srv->stats.rejected[status]++;
    gf_queued_reply *r = calloc(1, sizeof *r);
    va_list ap;
    va_start(ap, fmt);
    char *text = r ? error_vtext(&r->body_bytes, fmt, ap) : NULL;
    va_end(ap);
    GF_LOG_DBG("connection %llu: frame %llu refused: %s: %s", (unsigned long long)c->id,
               (unsigned long long)h->frame_id, gf_status_name(status), text ? text : "");
    if (gf_status_is_fatal(status)) {
        c->fatal = 1;
        srv->stats.connections_rejected++;
        GF_LOG_INF("connection %llu: %s (%s); closing after replies", (unsigned long long)c->id,
                   gf_status_name(status), text ? text : "");
    }
    if (!r || !text) {
        free(r);
        free(text);
        GF_LOG_ERR("connection %llu: out of memory for an error reply; closing",
                   (unsigned long long)c->id);
        conn_close(c);
        return;
    }
    r->body = text;
    reply_header(r, GF_MSG_ERROR, h->frame_id, h->pipeline_id, status, r->body_bytes);
    r->ready = 1;
    reply_enqueue(c, r);
    conn_flush(c);
}

/* Queues a LIST or STATS reply holding `doc` (consumed). */
static void conn_reply_json(gf_conn *c, const gf_header *h, cJSON *doc) {
    gf_queued_reply *r = calloc(1, sizeof *r);
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!r || !text) {
        free(r);
        free(text);
        gf_header copy = *h;
        conn_reject(c, &copy, GF_ERR_INTERNAL, "out of memory building the %s reply",
                    gf_msg_type_name(h->type));
        return;
    }
    r->body = text;
    r->body_bytes = strlen(text);
    reply_header(r, h->type, h->frame_id, 0, GF_OK, r->body_bytes);
    r->ready = 1;
    reply_enqueue(c, r);
    conn_flush(c);
}

static cJSON *stats_document(gf_server *srv) {
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    cJSON_AddStringToObject(doc, "version", GF_VERSION);
    cJSON_AddStringToObject(doc, "engine", srv->engine->ops->name);
    const gf_device_info *d = &srv->engine->device;
    cJSON *dev = cJSON_AddObjectToObject(doc, "device");
    cJSON_AddStringToObject(dev, "name", d->name);
    if (d->is_gpu) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
        cJSON_AddStringToObject(dev, "compute_capability", cc);
        cJSON_AddNumberToObject(dev, "sm_count", d->sm_count);
        cJSON_AddNumberToObject(dev, "memory_bytes", (double)d->memory_bytes);
        cJSON_AddStringToObject(dev, "pci_bus_id", d->pci_bus_id);
        /* The CUDA runtime does not report the PCIe link. */
        cJSON_AddNullToObject(dev, "pcie_generation");
        cJSON_AddNullToObject(dev, "pcie_width");
    } else {
        cJSON_AddNumberToObject(dev, "threads", d->threads);
    }
    cJSON_AddBoolToObject(doc, "timing_events", srv->cfg->timing_events);
    cJSON *slots = cJSON_AddObjectToObject(doc, "slots");
    cJSON_AddNumberToObject(slots, "count", srv->ring.count);
    cJSON_AddNumberToObject(slots, "free", srv->ring.free_count);
    cJSON_AddNumberToObject(slots, "in_flight", srv->slots_in_flight);
    cJSON_AddNumberToObject(slots, "in_bytes", (double)srv->engine->slots[0].in_capacity_bytes);
    cJSON_AddNumberToObject(slots, "out_bytes", (double)srv->engine->slots[0].out_capacity_bytes);
    cJSON_AddNumberToObject(doc, "pinned_bytes", (double)srv->engine->pinned_bytes);
    uint64_t now = gf_now_ns();
    gf_stats_to_json(&srv->stats, srv->cfg->pipelines, doc, now, uv_metrics_idle_time(srv->loop));
    gf_gpu_busy busy;
    if (!srv->cfg->timing_events ||
        gf_trace_gpu_busy(&srv->trace, now, GF_GPU_WINDOW_NS, &busy) < 0) {
        cJSON_AddNullToObject(doc, "gpu");
    } else {
        cJSON *g = cJSON_AddObjectToObject(doc, "gpu");
        cJSON_AddNumberToObject(g, "window_ns", (double)busy.window_ns);
        cJSON_AddNumberToObject(g, "frames", (double)busy.frames);
        cJSON_AddNumberToObject(g, "h2d_busy", busy.h2d);
        cJSON_AddNumberToObject(g, "kernel_busy", busy.kernel);
        cJSON_AddNumberToObject(g, "d2h_busy", busy.d2h);
        cJSON_AddNumberToObject(g, "copy_busy", busy.copy);
        cJSON_AddNumberToObject(g, "compute_busy", busy.compute);
        cJSON_AddNumberToObject(g, "overlap", busy.overlap);
    }
    return doc;
}

/* The TRACE reply: the last `max_frames` frames' stage times (STATS.md). */
static cJSON *trace_document(gf_server *srv, uint32_t max_frames) {
    cJSON *doc = cJSON_CreateObject();
    cJSON *frames = gf_trace_frames_json(&srv->trace, max_frames, srv->stats.started_ns);
    if (!doc || !frames) {
        cJSON_Delete(doc);
        cJSON_Delete(frames);
        return NULL;
    }
    cJSON_AddStringToObject(doc, "clock", "monotonic");
    cJSON_AddNumberToObject(doc, "t0_ns", (double)srv->stats.started_ns);
    cJSON_AddStringToObject(doc, "engine", srv->engine->ops->name);
    cJSON_AddNumberToObject(doc, "slots", srv->ring.count);
    cJSON_AddItemToObject(doc, "frames", frames);
    return doc;
}

/* ---- the read path ---------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    gf_conn *c = h->data;
    (void)suggested;
    if (c->state == CONN_PAYLOAD) {
        /* Straight into the slot's pinned input buffer: no staging copy. */
        gf_slot *s = c->slot;
        buf->base = (char *)s->in_host + c->payload_received;
        buf->len = (size_t)(s->in_bytes - c->payload_received);
        return;
    }
    if (c->buf_start == c->buf_end) {
        c->buf_start = c->buf_end = 0;
    } else if (c->buf_start > 0) {
        memmove(c->buf, c->buf + c->buf_start, c->buf_end - c->buf_start);
        c->buf_end -= c->buf_start;
        c->buf_start = 0;
    }
    /* Reading is active only while less than a header is buffered, so there
     * is always room: never hand libuv an empty buffer (it would spin). */
    assert(c->buf_end < sizeof c->buf);
    *buf = uv_buf_init((char *)c->buf + c->buf_end, (unsigned)(sizeof c->buf - c->buf_end));
}

/* The payload is complete: hand the frame to the engine. */
static void frame_submit(gf_conn *c) {
    gf_server *srv = c->srv;
    gf_slot *s = c->slot;
    c->slot = NULL;
    c->state = CONN_HEADER;
    srv->stats.bytes_in += s->in_bytes;
    s->submitted_ns = gf_now_ns();
    s->in_flight = 1;
    srv->slots_in_flight++;
    int rc = gf_engine_submit(srv->engine, s);
    if (rc == 0)
        return;
    s->in_flight = 0;
    srv->slots_in_flight--;
    s->status = GF_ERR_ENGINE;
    srv->stats.rejected[GF_ERR_ENGINE]++;
    srv->stats.frames_failed++;
    /* Out of memory leaves the ERROR without its text, not the frame without a reply. */
    s->reply.body = error_text(&s->reply.body_bytes, "the %s engine could not start this frame",
                               srv->engine->ops->name);
    reply_header(&s->reply, GF_MSG_ERROR, s->frame_id, s->pipeline_id, GF_ERR_ENGINE,
                 s->reply.body ? s->reply.body_bytes : 0);
    s->reply.ready = 1;
    conn_flush(c);
    if (srv->engine->poisoned)
        server_fatal(srv, "the CUDA context is poisoned by a sticky error");
}

/*
 * A FRAME header was parsed: refuse it, or claim a slot for it.  Returns 1 if
 * the header was consumed, 0 if the connection must wait for a slot.
 */
static int frame_begin(gf_conn *c, const gf_header *h) {
    gf_server *srv = c->srv;
    const gf_config *cfg = srv->cfg;
    char why[160];

    if (!c->header_seen_ns)
        c->header_seen_ns = gf_now_ns();
    if (h->pipeline_id >= cfg->pipeline_count) {
        srv->stats.frames_received++;
        srv->stats.frames_failed++;
        conn_reject(c, h, GF_ERR_UNKNOWN_PIPELINE,
                    "pipeline id %u is not configured (ids 0..%zu; send LIST to see them)",
                    h->pipeline_id, cfg->pipeline_count - 1);
        goto discard;
    }
    const gf_pipeline *p = &cfg->pipelines[h->pipeline_id];
    int64_t out_bytes = p->kind->output_bytes(&p->params, h->payload_bytes, why, sizeof why);
    if (out_bytes < 0 || (uint64_t)out_bytes > srv->ring.slots[0].out_capacity_bytes) {
        srv->stats.frames_received++;
        srv->stats.frames_failed++;
        if (out_bytes >= 0)
            snprintf(why, sizeof why, "output of %lld bytes exceeds the slot's %llu",
                     (long long)out_bytes,
                     (unsigned long long)srv->ring.slots[0].out_capacity_bytes);
        conn_reject(c, h, GF_ERR_BAD_LENGTH, "pipeline %s: %s", p->name, why);
        goto discard;
    }
    gf_slot *s = gf_slot_claim(&srv->ring);
    if (!s) {
        /* No free slot: stop reading until one frees (backpressure). */
        waiting_push(srv, c);
        return 0;
    }
    srv->stats.frames_received++;
    c->buf_start += GF_HEADER_BYTES;
    s->kind = p->kind;
    s->params = p->params;
    s->pipeline_id = h->pipeline_id;
    s->frame_id = h->frame_id;
    s->in_bytes = h->payload_bytes;
    s->out_bytes = (uint64_t)out_bytes;
    s->status = GF_OK;
    memset(&s->stages, 0, sizeof s->stages);
    s->claimed_ns = gf_now_ns();
    s->arrived_ns = c->header_seen_ns;
    c->header_seen_ns = 0;
    s->submitted_ns = s->done_ns = s->drained_ns = 0;
    memset(&s->reply, 0, sizeof s->reply);
    s->reply.slot = s;
    reply_enqueue(c, &s->reply);

    /* Whatever part of the payload came in with the header (at most
     * GF_STAGED_PAYLOAD_MAX_BYTES) is copied; the rest is read in place. */
    size_t staged = c->buf_end - c->buf_start;
    if (staged > s->in_bytes)
        staged = (size_t)s->in_bytes;
    memcpy(s->in_host, c->buf + c->buf_start, staged);
    c->buf_start += staged;
    c->slot = s;
    c->payload_received = staged;
    c->state = CONN_PAYLOAD;
    if (c->payload_received == s->in_bytes)
        frame_submit(c);
    return 1;

discard:
    c->header_seen_ns = 0;
    c->buf_start += GF_HEADER_BYTES;
    c->discard_left = h->payload_bytes;
    c->state = CONN_DISCARD;
    return 1;
}

/* Consumes buffered bytes until it needs more, must wait, or must stop. */
static void conn_process(gf_conn *c) {
    gf_server *srv = c->srv;
    while (!c->closing && !c->fatal && !c->waiting && c->state != CONN_PAYLOAD &&
           c->loose_replies < GF_CONN_MAX_LOOSE_REPLIES && !srv->draining) {
        size_t avail = c->buf_end - c->buf_start;
        if (c->state == CONN_DISCARD) {
            size_t n = avail < c->discard_left ? avail : (size_t)c->discard_left;
            c->buf_start += n;
            c->discard_left -= n;
            if (c->discard_left > 0)
                return;
            c->state = CONN_HEADER;
            continue;
        }
        gf_header h;
        int rc = gf_header_parse(c->buf + c->buf_start, avail, GF_ROLE_DAEMON,
                                 srv->cfg->max_frame_bytes, &h);
        if (rc == 0)
            return;
        if (rc < 0) {
            uint32_t status = (uint32_t)-rc;
            if (status == GF_ERR_TOO_LARGE)
                conn_reject(c, &h, status, "payload of %llu bytes exceeds max_frame_bytes %llu",
                            (unsigned long long)h.payload_bytes,
                            (unsigned long long)srv->cfg->max_frame_bytes);
            else if (status == GF_ERR_BAD_LENGTH)
                conn_reject(c, &h, status, "a %s request carries no payload, got %llu bytes",
                            gf_msg_type_name(h.type), (unsigned long long)h.payload_bytes);
            else
                conn_reject(c, &h, status,
                            "bad header: %s (magic 0x%08x, version %u, type %u, flags 0x%x)",
                            gf_status_name(status),
                            (unsigned)(c->buf[c->buf_start] | c->buf[c->buf_start + 1] << 8 |
                                       c->buf[c->buf_start + 2] << 16 |
                                       (unsigned)c->buf[c->buf_start + 3] << 24),
                            h.version, h.type, h.flags);
            /* The stream cannot be trusted past a bad header. */
            c->fatal = 1;
            return;
        }
        switch (h.type) {
        case GF_MSG_FRAME:
            if (!frame_begin(c, &h))
                return;
            break;
        case GF_MSG_LIST:
            c->buf_start += GF_HEADER_BYTES;
            srv->stats.requests_list++;
            conn_reply_json(c, &h,
                            gf_pipelines_to_json(srv->cfg->pipelines, srv->cfg->pipeline_count));
            break;
        case GF_MSG_STATS:
            c->buf_start += GF_HEADER_BYTES;
            srv->stats.requests_stats++;
            conn_reply_json(c, &h, stats_document(srv));
            break;
        case GF_MSG_TRACE:
            c->buf_start += GF_HEADER_BYTES;
            srv->stats.requests_trace++;
            conn_reply_json(c, &h, trace_document(srv, h.pipeline_id));
            break;
        default: assert(!"gf_header_parse let through a type the daemon does not take");
        }
    }
}

/* Starts or stops reading so that it happens exactly when it can progress. */
static void conn_update_reading(gf_conn *c) {
    if (c->closing)
        return;
    int want = !c->eof && !c->fatal && !c->waiting &&
               c->loose_replies < GF_CONN_MAX_LOOSE_REPLIES &&
               (!c->srv->draining || c->state == CONN_PAYLOAD);
    if (want && !c->reading)
        c->reading = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0;
    if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = 0;
    }
}

/* Takes back the slot of a frame whose payload can no longer arrive. */
static void conn_truncate_frame(gf_conn *c) {
    gf_slot *s = c->slot;
    GF_LOG_INF("connection %llu: closed after %llu of %llu payload bytes of frame %llu",
               (unsigned long long)c->id, (unsigned long long)c->payload_received,
               (unsigned long long)s->in_bytes, (unsigned long long)s->frame_id);
    c->srv->stats.frames_truncated++;
    /* Its reply is the newest, not ready: still the queue's tail. */
    gf_queued_reply **pp = &c->replies_head;
    gf_queued_reply *prev = NULL;
    while (*pp != &s->reply) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = NULL;
    c->replies_tail = prev;
    c->slot = NULL;
    c->state = CONN_HEADER;
    reply_finish(&s->reply, 0);
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
    if (c->state == CONN_PAYLOAD)
        conn_truncate_frame(c);
    if (!c->closing && c->replies_unfinished == 0)
        conn_close(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    gf_conn *c = stream->data;
    (void)buf;
    if (nread == 0)
        return;
    conn_ref(c);
    if (nread == UV_EOF) {
        c->eof = 1;
        c->reading = 0; /* libuv stops reading at EOF by itself */
    } else if (nread < 0) {
        GF_LOG_INF("connection %llu: read failed (%s); closing", (unsigned long long)c->id,
                   uv_strerror((int)nread));
        conn_close(c);
    } else if (c->state == CONN_PAYLOAD) {
        c->payload_received += (uint64_t)nread;
        if (c->payload_received == c->slot->in_bytes) {
            frame_submit(c);
            conn_process(c);
        }
    } else {
        c->buf_end += (size_t)nread;
        conn_process(c);
    }
    conn_settle(c);
    conn_update_reading(c);
    conn_unref(c);
}

/*
 * Closes the connection.  Replies not yet written are dropped; a frame still
 * on the engine keeps its slot (and a reference) until it completes, and is
 * then dropped too.  Memory is freed when the last reference goes.
 */
static void conn_close(gf_conn *c) {
    gf_server *srv = c->srv;
    if (c->closing)
        return;
    c->closing = 1;
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->pipe);
    c->reading = 0;
    waiting_remove(srv, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections_open--;
    conn_ref(c);
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
    if (c->state == CONN_PAYLOAD)
        conn_truncate_frame(c);
    gf_queued_reply *r = c->replies_head;
    c->replies_head = c->replies_tail = NULL;
    while (r) {
        gf_queued_reply *next = r->next;
        r->next = NULL;
        /* A frame still on the engine is finished by on_slot_done. */
        if (!r->slot || !r->slot->in_flight)
            reply_finish(r, 0);
        r = next;
    }
    conn_unref(c);
}

/* ---- completions ---------------------------------------------------------- */

/* Loop thread: a slot came back from the engine. */
static void on_slot_done(gf_slot *s, void *arg) {
    gf_server *srv = arg;
    assert(s->in_flight);
    s->in_flight = 0;
    srv->slots_in_flight--;
    gf_engine_finish(srv->engine, s);
    s->drained_ns = gf_now_ns();
    srv->stats.frames_completed++;
    gf_conn *c = s->reply.conn;
    if (s->status == GF_OK) {
        reply_header(&s->reply, GF_MSG_RESULT, s->frame_id, s->pipeline_id, GF_OK, s->out_bytes);
    } else {
        srv->stats.rejected[s->status]++;
        srv->stats.frames_failed++;
        reply_header(&s->reply, GF_MSG_ERROR, s->frame_id, s->pipeline_id, (uint32_t)s->status, 0);
    }
    s->reply.ready = 1;
    if (c->closing) {
        reply_finish(&s->reply, 0);
        return;
    }
    conn_flush(c);
}

/* ---- accepting ------------------------------------------------------------- */

static void on_connection(uv_stream_t *listener, int status) {
    gf_server *srv = listener->data;
    if (status < 0) {
        GF_LOG_WRN("accept: %s", uv_strerror(status));
        return;
    }
    gf_conn *c = calloc(1, sizeof *c);
    if (!c) {
        GF_LOG_ERR("accept: out of memory for a connection");
        return;
    }
    c->srv = srv;
    c->refs = 1; /* the handle's, dropped in on_conn_closed */
    uv_pipe_init(srv->loop, &c->pipe, 0);
    c->pipe.data = c;
    int rc = uv_accept(listener, (uv_stream_t *)&c->pipe);
    if (rc < 0) {
        GF_LOG_WRN("accept: %s", uv_strerror(rc));
        c->closing = 1;
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
        return;
    }
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

/* Nonzero when something is accepting connections on `path`. */
static int socket_is_live(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live;
}

/* Binds and listens on `path`; a stale socket file nobody listens on is replaced. */
static int server_listen(gf_server *srv, const char *path) {
    int rc = uv_pipe_init(srv->loop, &srv->listener, 0);
    if (rc < 0)
        return rc;
    srv->listener.data = srv;
    srv->listening = 1;
    rc = uv_pipe_bind(&srv->listener, path);
    if (rc == UV_EADDRINUSE) {
        if (socket_is_live(path)) {
            GF_LOG_ERR("socket %s: another daemon is already listening there", path);
            return rc;
        }
        GF_LOG_INF("socket %s: replacing a stale socket file nobody listens on", path);
        unlink(path);
        rc = uv_pipe_bind(&srv->listener, path);
    }
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, GF_LISTEN_BACKLOG, on_connection);
    if (rc < 0)
        GF_LOG_ERR("socket %s: cannot listen: %s", path, uv_strerror(rc));
    return rc;
}

/* ---- deadlines, fatal failure, shutdown ------------------------------------------ */

/* The daemon cannot go on (a stuck or poisoned engine): fail every frame on
 * the engine as best we can, and stop the loop so the daemon exits non-zero
 * and systemd restarts it. */
static void server_fatal(gf_server *srv, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    GF_LOG_ERR("fatal: %s; failing %u frame(s) in flight and exiting", msg, srv->slots_in_flight);
    srv->failed = 1;
    for (uint32_t i = 0; i < srv->ring.count; i++) {
        gf_slot *s = &srv->ring.slots[i];
        if (!s->in_flight || !s->reply.conn || s->reply.conn->closing)
            continue;
        /* Best effort and non-blocking: the reply queue order no longer matters. */
        uint8_t hdr[GF_HEADER_BYTES];
        gf_queued_reply tmp;
        size_t len = strlen(msg);
        reply_header(&tmp, GF_MSG_ERROR, s->frame_id, s->pipeline_id, GF_ERR_TIMEOUT, len);
        memcpy(hdr, tmp.header, sizeof hdr);
        uv_buf_t bufs[2] = {uv_buf_init((char *)hdr, sizeof hdr), uv_buf_init(msg, (unsigned)len)};
        uv_try_write((uv_stream_t *)&s->reply.conn->pipe, bufs, 2);
        srv->stats.rejected[GF_ERR_TIMEOUT]++;
        srv->stats.frames_failed++;
    }
    uv_stop(srv->loop);
}

static void on_watchdog(uv_timer_t *t) {
    gf_server *srv = t->data;
    uint64_t now = gf_now_ns();
    uint64_t deadline_ns = (uint64_t)srv->cfg->frame_timeout_ms * 1000000u;
    for (uint32_t i = 0; i < srv->ring.count; i++) {
        gf_slot *s = &srv->ring.slots[i];
        if (s->in_flight && now - s->submitted_ns > deadline_ns) {
            server_fatal(srv,
                         "frame %llu (%s) on slot %u has been on the %s engine for %llu ms, over "
                         "its %u ms deadline: the engine stopped completing frames",
                         (unsigned long long)s->frame_id, s->kind->name, s->index,
                         srv->engine->ops->name,
                         (unsigned long long)((now - s->submitted_ns) / 1000000u),
                         srv->cfg->frame_timeout_ms);
            return;
        }
    }
}

static void on_handle_closed(uv_handle_t *h) {
    (void)h;
}

/* During a drain: once nothing is in flight or owed, close every handle. */
static void server_check_drained(gf_server *srv) {
    if (!srv->draining || srv->handles_closed || srv->slots_in_flight > 0)
        return;
    for (gf_conn *c = srv->conns; c; c = c->next)
        if (c->replies_unfinished > 0 || c->state == CONN_PAYLOAD)
            return;
    srv->handles_closed = 1;
    while (srv->conns)
        conn_close(srv->conns);
    uv_close((uv_handle_t *)&srv->watchdog, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sampler, on_handle_closed);
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    gf_completion_close(&srv->done, on_handle_closed);
    GF_LOG_INF("drained: every frame received was answered");
}

/* The drain ran out of time: abandon what is left and stop. */
static void on_drain_timeout(uv_timer_t *t) {
    gf_server *srv = t->data;
    const gf_stats *st = &srv->stats;
    uint64_t left = st->frames_received - st->frames_answered - st->frames_failed -
                    st->frames_dropped - st->frames_truncated;
    GF_LOG_ERR("drain timed out after %u ms: abandoning %llu frame(s) not yet answered (%u on the "
               "engine)",
               srv->cfg->drain_timeout_ms, (unsigned long long)left, srv->slots_in_flight);
    srv->failed = 1;
    uv_stop(srv->loop);
}

void gf_server_shutdown(gf_server *srv) {
    if (srv->draining)
        return;
    srv->draining = 1;
    GF_LOG_INF("stopping: no new connections or frames; %u frame(s) in flight",
               srv->slots_in_flight);
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
        srv->listening = 0;
        /* A socket systemd passed is systemd's to remove. */
        if (srv->listen_fd < 0)
            unlink(srv->cfg->socket_path);
    }
    while (srv->waiting_head)
        waiting_remove(srv, srv->waiting_head);
    for (gf_conn *c = srv->conns; c; c = c->next)
        conn_update_reading(c);
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->cfg->drain_timeout_ms, 0);
    server_check_drained(srv);
}

/* ---- run-time changes and the supervisor's view ---------------------------- */

/* Appends "what" to the restart note, comma-separated. */
static void note_add(char *note, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t len, const char *fmt, ...) {
    size_t used = strlen(note);
    if (used + 3 >= len)
        return;
    if (used == 0)
        used = (size_t)snprintf(note, len, "needs a restart: ");
    else
        used += (size_t)snprintf(note + used, len - used, ", ");
    if (used >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + used, len - used, fmt, ap);
    va_end(ap);
}

void gf_server_reload(gf_server *srv, gf_config *next, char *note, size_t note_len) {
    const gf_config *cur = srv->cfg;
    uint64_t in_cap = srv->ring.slots[0].in_capacity_bytes;
    uint64_t out_cap = srv->ring.slots[0].out_capacity_bytes;
    note[0] = '\0';
    if (strcmp(next->socket_path, cur->socket_path) != 0) {
        note_add(note, note_len, "socket %s -> %s", cur->socket_path, next->socket_path);
        snprintf(next->socket_path, sizeof next->socket_path, "%s", cur->socket_path);
    }
    if (next->engine != cur->engine) {
        note_add(note, note_len, "engine %s -> %s", gf_engine_choice_name(cur->engine),
                 gf_engine_choice_name(next->engine));
        next->engine = cur->engine;
    }
    if (next->slot_count != cur->slot_count) {
        note_add(note, note_len, "slots %u -> %u", cur->slot_count, next->slot_count);
        next->slot_count = cur->slot_count;
    }
    if (next->trace_frames != cur->trace_frames) {
        note_add(note, note_len, "trace_frames %u -> %u", cur->trace_frames, next->trace_frames);
        next->trace_frames = cur->trace_frames;
    }
    if (next->max_frame_bytes > in_cap) {
        note_add(note, note_len, "max_frame_bytes %llu above the slots' %llu",
                 (unsigned long long)next->max_frame_bytes, (unsigned long long)in_cap);
        next->max_frame_bytes = cur->max_frame_bytes;
    }
    int same_pipelines = next->pipeline_count == cur->pipeline_count;
    for (size_t i = 0; same_pipelines && i < cur->pipeline_count; i++)
        same_pipelines = next->pipelines[i].kind == cur->pipelines[i].kind &&
                         strcmp(next->pipelines[i].name, cur->pipelines[i].name) == 0;
    if (!same_pipelines || gf_config_max_output_bytes(next) > out_cap) {
        note_add(note, note_len, "%s",
                 !same_pipelines ? "pipelines added, removed, renamed or of another kind"
                                 : "a pipeline's output would exceed the slots' buffers");
        /* Keep the running pipelines, parameters included. */
        gf_pipeline *mine = malloc(cur->pipeline_count * sizeof *mine);
        if (mine) {
            memcpy(mine, cur->pipelines, cur->pipeline_count * sizeof *mine);
            free(next->pipelines);
            next->pipelines = mine;
            next->pipeline_count = cur->pipeline_count;
        }
    }
    /* The watchdog and the timing flag are read at each use: they apply now.
     * Timing events are recorded by the engine, which was opened with the
     * old value: changing it needs a restart too. */
    if (next->timing_events != cur->timing_events) {
        note_add(note, note_len, "timing_events");
        next->timing_events = cur->timing_events;
    }
    srv->cfg = next;
}

void gf_server_progress(const gf_server *srv, uint64_t *completed, uint32_t *in_flight) {
    *completed = srv->stats.frames_completed;
    *in_flight = srv->slots_in_flight;
}

void gf_server_status(const gf_server *srv, char *buf, size_t len) {
    double fps, in, out, busy;
    gf_stats_rates(&srv->stats, 1000000000ull, gf_now_ns(), uv_metrics_idle_time(srv->loop), &fps,
                   &in, &out, &busy);
    uint64_t refused = srv->stats.frames_failed;
    snprintf(buf, len,
             "%s%llu connection(s), %.0f frames/s, %.2f GB/s in, %u/%u slots busy, %llu frames "
             "answered, %llu failed",
             srv->draining ? "draining: " : "", (unsigned long long)srv->stats.connections_open,
             fps, in / 1e9, srv->ring.count - srv->ring.free_count, srv->ring.count,
             (unsigned long long)srv->stats.frames_answered, (unsigned long long)refused);
}

/* ---- start-up and teardown ------------------------------------------------------- */

static void on_sample(uv_timer_t *t) {
    gf_server *srv = t->data;
    gf_stats_sample(&srv->stats, gf_now_ns(), uv_metrics_idle_time(srv->loop));
}

/* Serves a socket systemd bound and passed (socket activation). */
static int server_listen_fd(gf_server *srv, int fd) {
    int rc = uv_pipe_init(srv->loop, &srv->listener, 0);
    if (rc < 0)
        return rc;
    srv->listener.data = srv;
    srv->listening = 1;
    rc = uv_pipe_open(&srv->listener, fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, GF_LISTEN_BACKLOG, on_connection);
    if (rc < 0)
        GF_LOG_ERR("socket fd %d passed by systemd: cannot listen: %s", fd, uv_strerror(rc));
    return rc;
}

int gf_server_open(uv_loop_t *loop, const gf_config *cfg, int listen_fd, gf_server **out) {
    gf_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->cfg = cfg;
    srv->listen_fd = listen_fd;
    /* uv_metrics_idle_time needs this before the loop runs. */
    uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    int rc = gf_stats_init(&srv->stats, cfg->pipeline_count, gf_now_ns());
    if (rc < 0)
        goto fail_free;
    rc = gf_trace_init(&srv->trace, cfg->trace_frames);
    if (rc < 0)
        goto fail_stats;
    rc = gf_completion_init(&srv->done, loop, on_slot_done, srv);
    if (rc < 0)
        goto fail_trace;
    gf_engine_params ep = {.slot_count = cfg->slot_count,
                           .in_capacity_bytes = cfg->max_frame_bytes,
                           .out_capacity_bytes = gf_config_max_output_bytes(cfg),
                           .pipelines = cfg->pipelines,
                           .pipeline_count = cfg->pipeline_count,
                           .timing_events = cfg->timing_events};
    rc = gf_engine_open(cfg->engine, &ep, &srv->done, &srv->engine);
    if (rc < 0)
        goto fail_completion;
    gf_slot_ring_init(&srv->ring, srv->engine->slots, srv->engine->slot_count);
    uv_timer_init(loop, &srv->watchdog);
    uv_timer_init(loop, &srv->sampler);
    uv_timer_init(loop, &srv->drain_timer);
    srv->watchdog.data = srv->sampler.data = srv->drain_timer.data = srv;
    uint64_t period = cfg->frame_timeout_ms / 2 + 1;
    if (period > GF_WATCHDOG_PERIOD_MAX_MS)
        period = GF_WATCHDOG_PERIOD_MAX_MS;
    uv_timer_start(&srv->watchdog, on_watchdog, period, period);
    uv_timer_start(&srv->sampler, on_sample, GF_SAMPLE_PERIOD_MS, GF_SAMPLE_PERIOD_MS);
    /* Timers alone do not keep the daemon running. */
    uv_unref((uv_handle_t *)&srv->watchdog);
    uv_unref((uv_handle_t *)&srv->sampler);
    uv_unref((uv_handle_t *)&srv->drain_timer);
    rc = listen_fd >= 0 ? server_listen_fd(srv, listen_fd) : server_listen(srv, cfg->socket_path);
    if (rc < 0)
        goto fail_listen;
    srv->stats.started_ns = gf_now_ns();
    gf_stats_sample(&srv->stats, srv->stats.started_ns, uv_metrics_idle_time(loop));
    char desc[512];
    gf_engine_describe(srv->engine, desc, sizeof desc);
    GF_LOG_INF("ready: listening on %s%s; engine %s (%s); %u slots; %zu pipelines; %llu bytes "
               "pinned",
               cfg->socket_path, listen_fd >= 0 ? " (socket passed by systemd)" : "",
               srv->engine->ops->name, desc, cfg->slot_count, cfg->pipeline_count,
               (unsigned long long)srv->engine->pinned_bytes);
    *out = srv;
    return 0;

fail_listen:
    if (srv->listening)
        uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_close((uv_handle_t *)&srv->watchdog, NULL);
    uv_close((uv_handle_t *)&srv->sampler, NULL);
    uv_close((uv_handle_t *)&srv->drain_timer, NULL);
    gf_engine_close(srv->engine);
fail_completion:
    gf_completion_close(&srv->done, NULL);
    uv_run(loop, UV_RUN_NOWAIT); /* let the close callbacks run before freeing */
fail_trace:
    gf_trace_free(&srv->trace);
fail_stats:
    gf_stats_free(&srv->stats);
fail_free:
    free(srv);
    return rc;
}

int gf_server_failed(const gf_server *srv) {
    return srv->failed;
}

int gf_server_close(gf_server *srv) {
    int failed = srv->failed;
    /* After a fatal failure the device may never finish: the process exits
     * without waiting for it, and the OS takes the memory back. */
    if (!failed)
        gf_engine_close(srv->engine);
    gf_trace_free(&srv->trace);
    gf_stats_free(&srv->stats);
    free(srv);
    return failed ? 1 : 0;
}

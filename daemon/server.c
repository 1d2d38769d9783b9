/*
 * The server: listens on the Unix socket and accepts connections (conn.c
 * serves each), hands frames to the engine and drains its completions, keeps
 * the slot-waiter queue, enforces frame deadlines (the fatal path), drains on
 * a graceful stop, applies reloads, and opens and closes everything.
 *
 * Where a frame goes in this file:
 *   submit    gf__server_submit -> gf_engine_submit (engine_cuda.c / engine_cpu.c)
 *   complete  completion.c -> on_slot_done -> gf__conn_flush (conn.c)
 *
 * When no slot is free, a connection that needs one stops reading and waits
 * on a FIFO queue; every slot that frees resumes waiters in arrival order.
 * The kernel's socket buffer then fills and the client's writes block:
 * backpressure end to end, bounded memory, no frame dropped.
 *
 * After start-up nothing here makes a blocking CUDA call (the engine's
 * submit only enqueues); a frame that misses its deadline on the engine means
 * the engine is stuck or poisoned, which is fatal: the daemon fails what is
 * in flight and exits non-zero so that systemd restarts it.
 */
#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "loopprof.h"
#include "plugin.h"
#include "server_internal.h"

/* Rates and loop utilisation are sampled this often. */
#define GF_SAMPLE_PERIOD_MS 1000u
/* How often in-flight frames are checked against their deadline. */
#define GF_WATCHDOG_PERIOD_MAX_MS 1000u

static void server_fatal(gf_server *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- slot waiters ------------------------------------------------------------ */

void gf__server_stop_waiting(gf_server *srv, gf_conn *c) {
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

void gf__server_wait_for_slot(gf_server *srv, gf_conn *c) {
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

void gf__server_slot_freed(gf_server *srv) {
    /* A free slot goes to connections paused for one, in arrival order. */
    while (srv->ring.free_count > 0 && srv->waiting_head && !srv->draining) {
        gf_conn *w = srv->waiting_head;
        gf__server_stop_waiting(srv, w);
        srv->turn = w; /* its one slot, ahead of those still waiting */
        gf__conn_resume(w);
        srv->turn = NULL;
    }
    gf__server_check_drained(srv);
}

/* ---- submit and complete ------------------------------------------------------- */

/* completion = poll: every loop iteration while frames are in flight asks
 * the engine which finished; an active idle handle keeps the loop from
 * sleeping in epoll, which is the mode's cost (one busy core) and its gain
 * (no host-function hand-off, no wake-up).  It goes on spinning for
 * GF_POLL_LINGER_NS after the last frame completed, so that a client's next
 * frame, sent when it has read the last reply, finds the loop awake too. */
static void on_poll(uv_idle_t *h) {
    gf_server *srv = h->data;
    uint32_t polling = gf_engine_poll(srv->engine);
    uint64_t now = gf_now_ns();
    /* STATS's loop.polling_ns: the time the loop was kept from sleeping. */
    srv->stats.polling_ns += now - srv->poll_last_ns;
    srv->poll_last_ns = now;
    if (polling > 0)
        srv->poll_quiet_ns = 0;
    else if (srv->poll_quiet_ns == 0)
        srv->poll_quiet_ns = now;
    uint64_t linger = srv->completion == GF_COMPLETION_POLL ? GF_POLL_LINGER_NS : 0;
    if (polling == 0 && now - srv->poll_quiet_ns >= linger)
        uv_idle_stop(h);
}

/* Hands the closed slot `s` and its batch to the engine. */
static void server_submit(gf_server *srv, gf_slot *s) {
    uint64_t now = gf_now_ns();
    for (uint32_t i = 0; i < s->frame_count; i++) {
        srv->stats.bytes_in += s->frames[i].in_bytes;
        s->frames[i].submitted_ns = now;
    }
    /* Timing events cost a small frame about as much as the frame itself:
     * time one submission in timing_sample_every (config/README.md). */
    s->time_stages =
        srv->cfg->timing_events && srv->submit_seq++ % srv->cfg->timing_sample_every == 0;
    s->submitted_ns = now;
    s->in_flight = 1;
    srv->slots_in_flight++;
    srv->stats.submissions++;
    int prof = gf_prof_enter(GF_PROF_SUBMIT);
    int rc = gf_engine_submit(srv->engine, s);
    gf_prof_leave(prof);
    if (rc == 0) {
        srv->stats.zero_copy_submissions += (uint64_t)s->zero_copy;
        if (srv->engine->polled && !uv_is_active((uv_handle_t *)&srv->poller)) {
            srv->poll_quiet_ns = 0;
            srv->poll_last_ns = gf_now_ns();
            uv_idle_start(&srv->poller, on_poll);
        }
        return;
    }
    s->in_flight = 0;
    srv->slots_in_flight--;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_frame *f = &s->frames[i];
        f->batched = 0;
        f->status = GF_ERR_ENGINE;
        srv->stats.rejected[GF_ERR_ENGINE]++;
        srv->stats.frames_failed++;
        /* Out of memory leaves the ERROR without its text, not the frame
         * without a reply. */
        f->reply.body = malloc(GF_ERROR_TEXT_MAX_BYTES);
        f->reply.body_bytes =
            gf_errorf(f->reply.body, GF_ERROR_TEXT_MAX_BYTES,
                      "the %s engine could not start this frame", srv->engine->ops->name);
        gf__reply_header(f->reply.header, f->version, GF_MSG_ERROR, 0, f->frame_id,
                         f->pipeline_id, GF_ERR_ENGINE, f->reply.body_bytes);
        f->reply.ready = 1;
    }
    gf__conn_flush(s->owner);
    if (srv->engine->poisoned)
        server_fatal(srv, "the CUDA context is poisoned by a sticky error");
}

void gf__server_close_batch(gf_server *srv, gf_slot *s) {
    if (gf_slot_close(&srv->ring, s))
        gf__server_slot_freed(srv);
    else
        server_submit(srv, s);
}

/* Loop thread: a slot came back from the engine; its frames' replies are
 * written together. */
static void on_slot_done(gf_slot *s, void *arg) {
    gf_server *srv = arg;
    int prof = gf_prof_enter(GF_PROF_DONE);
    assert(s->in_flight);
    s->in_flight = 0;
    srv->slots_in_flight--;
    gf_engine_finish(srv->engine, s);
    uint64_t drained = gf_now_ns();
    gf_conn *c = s->owner;
    /* Dropping the last reply of a closed connection frees it. */
    int closing = c->closing;
    /* Finishing the replies may release every frame: the slot must not go
     * back to the ring (and be claimed anew) while this walks its frames. */
    gf_slot_hold(s);
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_frame *f = &s->frames[i];
        assert(f->batched);
        f->batched = 0;
        f->done_ns = s->done_ns;
        f->drained_ns = drained;
        srv->stats.frames_completed++;
        if (f->status == GF_OK && f->region) {
            /* By reference: the output is in the client's region already. */
            gf__reply_header(f->reply.header, f->version, GF_MSG_RESULT, GF_FLAG_SHM, f->frame_id,
                             f->pipeline_id, GF_OK, GF_SHM_RESULT_BYTES);
        } else if (f->status == GF_OK) {
            gf__reply_header(f->reply.header, f->version, GF_MSG_RESULT, 0, f->frame_id,
                             f->pipeline_id, GF_OK, f->out_bytes);
        } else {
            srv->stats.rejected[f->status]++;
            srv->stats.frames_failed++;
            gf__reply_header(f->reply.header, f->version, GF_MSG_ERROR, 0, f->frame_id,
                             f->pipeline_id, (uint32_t)f->status, 0);
        }
        f->reply.ready = 1;
        if (closing)
            gf__reply_finish(&f->reply, 0);
    }
    if (!closing)
        gf__conn_flush(c);
    if (gf_slot_unhold(&srv->ring, s))
        gf__server_slot_freed(srv);
    /* Batches held open while the engine was busy go now. */
    for (uint32_t i = 0; i < srv->ring.count; i++) {
        gf_slot *o = &srv->ring.slots[i];
        if (o->open && o->frames_held > 0 && o->owner->batch == o)
            gf__conn_submit_held(o->owner);
    }
    gf_prof_leave(prof);
}

/* ---- deadlines, fatal failure, shutdown -------------------------------------------- */

/* The daemon cannot go on (a stuck or poisoned engine): fail every frame on
 * the engine as best we can, and stop the loop so the daemon exits non-zero
 * and systemd restarts it. */
static void server_fatal(gf_server *srv, const char *fmt, ...) {
    char msg[GF_ERROR_TEXT_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    size_t len = gf_verrorf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    GF_LOG_ERR("fatal: %s; failing %u frame(s) in flight and exiting", msg, srv->slots_in_flight);
    srv->failed = 1;
    for (uint32_t i = 0; i < srv->ring.count; i++) {
        gf_slot *s = &srv->ring.slots[i];
        for (uint32_t k = 0; s->in_flight && k < s->frame_count; k++) {
            const gf_frame *f = &s->frames[k];
            if (!f->batched || !f->reply.conn || f->reply.conn->closing)
                continue;
            /* Best effort and non-blocking: the reply queue order no longer matters. */
            uint8_t hdr[GF_HEADER_BYTES];
            gf__reply_header(hdr, f->version, GF_MSG_ERROR, 0, f->frame_id, f->pipeline_id,
                             GF_ERR_TIMEOUT, len);
            struct iovec iov[2] = {{.iov_base = hdr, .iov_len = sizeof hdr},
                                   {.iov_base = msg, .iov_len = len}};
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
            (void)sendmsg(f->reply.conn->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
            srv->stats.rejected[GF_ERR_TIMEOUT]++;
            srv->stats.frames_failed++;
        }
    }
    uv_stop(srv->loop);
}

/* The watchdog's period: half the shortest deadline it enforces, at most
 * GF_WATCHDOG_PERIOD_MAX_MS, so that each is noticed within 1.5 times it. */
static uint64_t watchdog_period_ms(const gf_config *cfg) {
    uint32_t shortest = cfg->frame_timeout_ms;
    if (cfg->request_timeout_ms < shortest)
        shortest = cfg->request_timeout_ms;
    if (cfg->write_timeout_ms < shortest)
        shortest = cfg->write_timeout_ms;
    if (cfg->idle_timeout_ms && cfg->idle_timeout_ms < shortest)
        shortest = cfg->idle_timeout_ms;
    uint64_t period = shortest / 2 + 1;
    return period < GF_WATCHDOG_PERIOD_MAX_MS ? period : GF_WATCHDOG_PERIOD_MAX_MS;
}

static void on_watchdog(uv_timer_t *t) {
    gf_server *srv = t->data;
    uint64_t now = gf_now_ns();
    /* Connections first: a client's stalled request, unread replies or
     * silence must not hold slots for longer than their deadlines. */
    for (gf_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        gf__conn_check_deadlines(c, now);
    }
    /* Clients that stopped reading give back the slots others wait for. */
    for (gf_conn *c = srv->conns; c; c = c->next)
        if (c->write_blocked && !c->closing && srv->waiting_head)
            gf__conn_evict_results(c);
    /* Closing those may have freed slots that were submitted again since. */
    now = gf_now_ns();
    uint64_t deadline_ns = (uint64_t)srv->cfg->frame_timeout_ms * 1000000u;
    for (uint32_t i = 0; i < srv->ring.count; i++) {
        gf_slot *s = &srv->ring.slots[i];
        if (s->in_flight && now - s->submitted_ns > deadline_ns) {
            server_fatal(srv,
                         "frame %llu (%s) on slot %u has been on the %s engine for %llu ms, over "
                         "its %u ms deadline: the engine stopped completing frames",
                         (unsigned long long)s->frames[0].frame_id, s->frames[0].pipeline.name,
                         s->index,
                         srv->engine->ops->name,
                         (unsigned long long)((now - s->submitted_ns) / 1000000u),
                         srv->cfg->frame_timeout_ms);
            return;
        }
    }
}

static void on_sample(uv_timer_t *t) {
    gf_server *srv = t->data;
    gf_stats_sample(&srv->stats, gf_now_ns(), uv_metrics_idle_time(srv->loop));
}

static void on_handle_closed(uv_handle_t *h) {
    (void)h;
}

void gf__server_check_drained(gf_server *srv) {
    if (!srv->draining || srv->handles_closed || srv->slots_in_flight > 0)
        return;
    for (gf_conn *c = srv->conns; c; c = c->next)
        if (c->replies_unfinished > 0 || c->frame || !c->input_drained)
            return;
    srv->handles_closed = 1;
    while (srv->conns)
        gf__conn_close(srv->conns);
    uv_close((uv_handle_t *)&srv->watchdog, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sampler, on_handle_closed);
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->poller, on_handle_closed);
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
    gf__listener_close(srv);
    while (srv->waiting_head)
        gf__server_stop_waiting(srv, srv->waiting_head);
    /* Every connection reads what its socket holds and answers each frame
     * shutting_down; what is begun and not complete then is cut (conn.c,
     * gf__conn_input_drained). */
    for (gf_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        gf__conn_resume(c);
    }
    if (srv->handles_closed) /* the resumes above finished the drain */
        return;
    /* Stalled requests must be cut within GF_DRAIN_STALL_MS: check often. */
    uv_timer_start(&srv->watchdog, on_watchdog, GF_DRAIN_STALL_MS / 4, GF_DRAIN_STALL_MS / 4);
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->cfg->drain_timeout_ms, 0);
    gf__server_check_drained(srv);
}

/* ---- memory ----------------------------------------------------------------------- */

/* Loose reply bytes after which an idle daemon trims its heap: glibc's own
 * default trim threshold, before its dynamic mmap threshold raises it. */
#define GF_TRIM_AFTER_LOOSE_BYTES (128u * 1024)

/*
 * The memory policy.  Results leave from the slots' own buffers, allocated
 * once; the daemon's large heap blocks are what it holds for clients that do
 * not read at once: results moved out of their slots
 * (gf__conn_evict_results) and TRACE documents, up to megabytes each,
 * short-lived and in bursts.  glibc serves the first such block with mmap;
 * once it is freed, glibc raises its mmap threshold to that block's size and
 * its trim threshold to twice it, so the later ones come from the heap.
 * That keeps them fast (their pages stay mapped from one burst to the next:
 * a fixed 128 KiB mmap threshold cut the soak's throughput 3x), but the heap
 * then keeps up to twice the largest block free at its top, and the holes
 * under long-lived blocks, however idle the daemon: the soak's idle RssAnon
 * was 35 or 42 MB depending on the last burst.  So when a finished reply
 * leaves the daemon idle (every slot free, no loose reply queued) after at
 * least GF_TRIM_AFTER_LOOSE_BYTES of loose replies since the last trim,
 * malloc_trim gives the heap's free pages back.  That costs the loop a few
 * milliseconds (1.7-6 ms in the soak on a 2-core VM; bench/README.md,
 * "Memory"), at a moment nothing waits for it; under a steady load the
 * slots are never all free and it does not run.  Loop thread.
 */
void gf__server_trim_if_idle(gf_server *srv) {
    if (srv->loose_since_trim_bytes < GF_TRIM_AFTER_LOOSE_BYTES || srv->loose_bytes > 0 ||
        srv->ring.free_count < srv->ring.count)
        return;
#ifdef __GLIBC__
    uint64_t t0 = gf_now_ns();
    malloc_trim(0);
    GF_LOG_DBG("idle: heap trimmed after %llu kB of loose replies in %llu us",
               (unsigned long long)(srv->loose_since_trim_bytes / 1024),
               (unsigned long long)((gf_now_ns() - t0) / 1000));
#endif
    srv->loose_since_trim_bytes = 0;
}

/* ---- run-time changes ------------------------------------------------------------- */

/* Gives `next` a copy of the running pipelines (a reload whose own cannot
 * run): each plugin stage gains a reference, `next`'s own are dropped. */
static int keep_pipelines(const gf_config *cur, gf_config *next) {
    gf_pipeline *kept = malloc(cur->pipeline_count * sizeof *kept);
    if (kept == NULL)
        return -ENOMEM;
    memcpy(kept, cur->pipelines, cur->pipeline_count * sizeof *kept);
    for (size_t i = 0; i < cur->pipeline_count; i++)
        gf_pipeline_retain(&kept[i]);
    gf_pipelines_free(next->pipelines, next->pipeline_count);
    next->pipelines = kept;
    next->pipeline_count = cur->pipeline_count;
    return 0;
}

int gf_server_reload(gf_server *srv, gf_config *next, char *note, size_t note_len) {
    const gf_config *cur = srv->cfg;
    uint64_t in_cap = srv->ring.slots[0].in_capacity_bytes;
    uint64_t out_cap = srv->ring.slots[0].out_capacity_bytes;
    note[0] = '\0';
    int rc = gf_config_keep_restart_keys(cur, next, note, note_len);
    if (rc < 0)
        return rc;
    /* What the slots were allocated for bounds what a reload may ask. */
    if (next->max_frame_bytes > in_cap) {
        gf_config_note_restart(note, note_len, "max_frame_bytes %llu above the slots' %llu",
                               (unsigned long long)next->max_frame_bytes,
                               (unsigned long long)in_cap);
        next->max_frame_bytes = cur->max_frame_bytes;
    }
    char why[512];
    int kept_running = 0;
    if (gf_config_max_output_bytes(next) > out_cap ||
        gf_config_max_scratch_bytes(next) > srv->ring.slots[0].scratch_capacity_bytes) {
        gf_config_note_restart(note, note_len,
                               "the new pipelines need larger slot buffers than the daemon "
                               "started with: the running pipelines stay");
        rc = keep_pipelines(cur, next);
        kept_running = 1;
    } else if (gf_engine_prepare(srv->engine, next->pipelines, next->pipeline_count, why,
                                 sizeof why) < 0) {
        gf_config_note_restart(note, note_len, "%s: the running pipelines stay", why);
        rc = keep_pipelines(cur, next);
        kept_running = 1;
    }
    if (rc < 0)
        return rc;
    /* Kept pipelines' plugins were created for the running frame size:
     * no frame may outgrow what they were promised. */
    if (kept_running && next->max_frame_bytes > cur->max_frame_bytes) {
        gf_config_note_restart(note, note_len,
                               "max_frame_bytes %llu above the kept pipelines' %llu",
                               (unsigned long long)next->max_frame_bytes,
                               (unsigned long long)cur->max_frame_bytes);
        next->max_frame_bytes = cur->max_frame_bytes;
    }
    if ((rc = gf_stats_rekey_pipelines(&srv->stats, cur->pipelines, cur->pipeline_count,
                                       next->pipelines, next->pipeline_count)) < 0)
        return rc;
    /* Connections check frame sizes in their decoders: the new limit applies
     * from their next header on. */
    for (gf_conn *c = srv->conns; c; c = c->next)
        c->decoder.max_frame_bytes = next->max_frame_bytes;
    srv->cfg = next;
    /* Restarted only when its period changes: restarting it on every reload
     * postponed every deadline by a period, and reloads more often than that
     * disabled them all (found by bench/soak.sh).  A drain keeps its own. */
    uint64_t period = watchdog_period_ms(next);
    if (!srv->draining && period != uv_timer_get_repeat(&srv->watchdog))
        uv_timer_start(&srv->watchdog, on_watchdog, period, period);
    return 0;
}

/* ---- start-up and teardown ------------------------------------------------------- */

/* Starts the watchdog and the sampler; neither keeps the loop alive. */
static void timers_start(gf_server *srv) {
    const gf_config *cfg = srv->cfg;
    uv_timer_init(srv->loop, &srv->watchdog);
    uv_timer_init(srv->loop, &srv->sampler);
    uv_timer_init(srv->loop, &srv->drain_timer);
    srv->watchdog.data = srv->sampler.data = srv->drain_timer.data = srv;
    uint64_t period = watchdog_period_ms(cfg);
    uv_timer_start(&srv->watchdog, on_watchdog, period, period);
    uv_timer_start(&srv->sampler, on_sample, GF_SAMPLE_PERIOD_MS, GF_SAMPLE_PERIOD_MS);
    uv_unref((uv_handle_t *)&srv->watchdog);
    uv_unref((uv_handle_t *)&srv->sampler);
    uv_unref((uv_handle_t *)&srv->drain_timer);
    uv_idle_init(srv->loop, &srv->poller);
    srv->poller.data = srv;
}

/* Opens the engine the configuration names, sized from it. */
static int engine_open(gf_server *srv) {
    const gf_config *cfg = srv->cfg;
    gf_engine_params ep = {.slot_count = cfg->slot_count,
                           .in_capacity_bytes = cfg->max_frame_bytes,
                           .out_capacity_bytes = gf_config_max_output_bytes(cfg),
                           .scratch_capacity_bytes = gf_config_max_scratch_bytes(cfg),
                           .pipelines = cfg->pipelines,
                           .pipeline_count = cfg->pipeline_count,
                           .completion = cfg->completion,
                           .zero_copy_max_bytes = cfg->zero_copy_max_bytes};
    int rc = gf_engine_open(cfg->engine, &ep, &srv->done, &srv->engine);
    if (rc < 0)
        return rc;
    if ((rc = gf_slot_ring_init(&srv->ring, srv->engine->slots, srv->engine->slot_count)) < 0) {
        gf_engine_close(srv->engine);
        return rc;
    }
    if (cfg->completion == GF_COMPLETION_POLL && !srv->engine->polled)
        GF_LOG_WRN("completion poll: the %s engine completes frames through its own threads; "
                   "ignored",
                   srv->engine->ops->name);
    srv->completion = srv->engine->polled ? cfg->completion : GF_COMPLETION_HOST_FUNC;
    return 0;
}

static void log_ready(const gf_server *srv) {
    const gf_config *cfg = srv->cfg;
    char desc[512];
    gf_engine_describe(srv->engine, desc, sizeof desc);
    GF_LOG_INF("ready: listening on %s%s; engine %s (%s); %u slots; %zu pipelines; %llu bytes "
               "pinned",
               cfg->socket_path, srv->listen_fd >= 0 ? " (socket passed by systemd)" : "",
               srv->engine->ops->name, desc, cfg->slot_count, cfg->pipeline_count,
               (unsigned long long)srv->engine->pinned_bytes);
}

/* ---- plugin stages after their last frame ----------------------------------------- */

/* A plugin stage that a reload removed is destroyed when its last frame
 * completes, which is on the loop; its device_close may synchronise the
 * device (cudaFree does), which the loop must never wait for.  So the
 * destruction runs on libuv's thread pool, like a region's unpinning. */
typedef struct reap_req {
    uv_work_t work;
    gf_plugin_stage *stage;
} reap_req;

static uv_loop_t *reap_loop; /* the running server's, while it runs */

static void reap_work(uv_work_t *w) {
    gf_plugin_stage_destroy(((reap_req *)w)->stage);
}

static void reap_done(uv_work_t *w, int status) {
    if (status == UV_ECANCELED) /* never ran */
        gf_plugin_stage_destroy(((reap_req *)w)->stage);
    free(w);
}

static void reap(gf_plugin_stage *stage) {
    reap_req *r = malloc(sizeof *r);
    if (r == NULL || reap_loop == NULL) {
        free(r);
        gf_plugin_stage_destroy(stage);
        return;
    }
    r->stage = stage;
    if (uv_queue_work(reap_loop, &r->work, reap_work, reap_done) < 0) {
        free(r);
        gf_plugin_stage_destroy(stage);
    }
}

int gf_server_open(uv_loop_t *loop, const gf_config *cfg, int listen_fd, gf_server **out) {
    gf_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->cfg = cfg;
    srv->listen_fd = listen_fd;
    srv->listener_fd = srv->reserve_fd = -1;
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
    rc = engine_open(srv);
    if (rc < 0)
        goto fail_completion;
    timers_start(srv);
    rc = gf__listener_open(srv, listen_fd, cfg->socket_path);
    if (rc < 0)
        goto fail_listen;
    srv->stats.started_ns = gf_now_ns();
    gf_stats_sample(&srv->stats, srv->stats.started_ns, uv_metrics_idle_time(loop));
    log_ready(srv);
    reap_loop = loop;
    gf_plugin_set_reaper(reap);
    *out = srv;
    return 0;

fail_listen:
    gf__listener_close(srv);
    uv_close((uv_handle_t *)&srv->watchdog, NULL);
    uv_close((uv_handle_t *)&srv->sampler, NULL);
    uv_close((uv_handle_t *)&srv->drain_timer, NULL);
    uv_close((uv_handle_t *)&srv->poller, NULL);
    gf_slot_ring_free(&srv->ring);
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
    gf_prof_print(srv->stats.frames_answered, uv_metrics_idle_time(srv->loop));
    /* The loop has stopped: from here a stage is destroyed where released. */
    gf_plugin_set_reaper(NULL);
    reap_loop = NULL;
    /* After a fatal failure the device may never finish: the process exits
     * without waiting for it, and the OS takes the memory back. */
    if (!failed) {
        gf_slot_ring_free(&srv->ring);
        gf_engine_close(srv->engine);
    }
    gf_trace_free(&srv->trace);
    gf_stats_free(&srv->stats);
    free(srv);
    return failed ? 1 : 0;
}

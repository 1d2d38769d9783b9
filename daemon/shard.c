/* SPDX-License-Identifier: MIT */
/*
 * One shard: start-up and teardown, the deferred work of the loop, the
 * watchdog and the fatal path, the graceful drain, and a reload's switch.
 * It wires the pieces together at open: a socket the control loop hands it
 * (gf_shard_accept) goes to conn_io.c, the completion queue hands finished
 * slots to the scheduler, and the scheduler's hooks reach connections
 * (conn_io.c) and the deferred work here.  shard_state.h draws the whole
 * map.
 *
 * After start-up nothing here makes a blocking CUDA call (the engine's
 * submit only enqueues); a batch that misses its deadline on the engine
 * means the engine is stuck or poisoned, which is fatal: the daemon fails
 * what is in flight and exits non-zero so that systemd restarts it.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "conn_io.h"
#include "deadline.h"
#include "listener.h"
#include "mailbox.h"
#include "log.h"
#include "loopprof.h"
#include "heap_trim.h"
#include "numa.h"
#include "pool.h"
#include "reaper.h"
#include "shard.h"
#include "shard_state.h"

/* Rates and loop utilisation are sampled this often. */
#define GF_SAMPLE_PERIOD_MS 1000u
/* completion = poll: how long the loop goes on spinning once no frame is in
 * flight (hybrid stops at once).  A client streaming one frame at a time
 * sends its next frame tens of µs after the reply; 1 ms catches it without
 * a wake-up, and costs an idle daemon 1 ms of a core after its last frame. */
#define GF_POLL_LINGER_NS 1000000ull

static void shard_fatal(gf_shard *sh, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void on_watchdog(uv_timer_t *t);

/* ---- submit and complete ------------------------------------------------------- */

/* completion = poll: every loop iteration while frames are in flight asks
 * the engine which finished; an active idle handle keeps the loop from
 * sleeping in epoll, which is the mode's cost (one busy core) and its gain
 * (no host-function hand-off, no wake-up).  It goes on spinning for
 * GF_POLL_LINGER_NS after the last frame completed, so that a client's next
 * frame, sent when it has read the last reply, finds the loop awake too. */
static void on_poll(uv_idle_t *h) {
    gf_shard *sh = h->data;
    uint32_t polling = gf_engine_poll(sh->engine);
    uint64_t now = gf_now_ns();
    /* STATS's loop.polling_ns: the time the loop was kept from sleeping. */
    sh->stats.polling_ns += now - sh->poll_last_ns;
    sh->poll_last_ns = now;
    if (polling > 0)
        sh->poll_quiet_ns = 0;
    else if (sh->poll_quiet_ns == 0)
        sh->poll_quiet_ns = now;
    uint64_t linger = sh->completion == GF_COMPLETION_POLL ? GF_POLL_LINGER_NS : 0;
    if (polling == 0 && now - sh->poll_quiet_ns >= linger)
        uv_idle_stop(h);
}

/* The scheduler's `submitted` hook: a polling engine's submissions are
 * polled from now on; a refusal that poisoned the engine is fatal. */
static void on_submitted(gf_slot *slot, int rc, void *arg) {
    gf_shard *sh = arg;
    (void)slot;
    if (rc == 0) {
        if (sh->engine->polled && !uv_is_active((uv_handle_t *)&sh->poller)) {
            sh->poll_quiet_ns = 0;
            sh->poll_last_ns = gf_now_ns();
            uv_idle_start(&sh->poller, on_poll);
        }
    } else if (sh->engine->poisoned) {
        shard_fatal(sh, GF_ERR_ENGINE, "the CUDA context is poisoned by a sticky error");
    }
}

/* The scheduler's `granted` hook: a connection, or the client that stands
 * for other shards' batches here (pool.h). */
static void on_granted(gf_sched_client *c, void *arg) {
    gf_shard *sh = arg;
    if (gf_pool_is_client(sh->pool, c))
        gf_pool_granted(sh);
    else
        gf_conn_io_granted(c, arg);
}

/* The scheduler's `finished` hook: other shards' frames go back to them
 * (pool.h), then the connections' frames are answered. */
static void on_finished(gf_slot *s, int completed, void *arg) {
    gf_pool_finished(arg, s, completed);
    gf_conn_io_finished(s, completed, arg);
}

/* The scheduler's `wake` hook: free slots go to waiters after this event. */
static void on_slot_back(void *arg) {
    gf_shard *sh = arg;
    gf_shard_defer(sh, &sh->grant);
}

static void run_grant(gf_defer_item *it) {
    gf_sched_grant(&gf_list_entry(it, gf_shard, grant)->sched);
}

/* The scheduler's `batches` hook: open batches go to the engine after this
 * event, those that are due (scheduler.h), and after the connections it
 * invited to join them. */
static void on_batches(void *arg) {
    gf_shard *sh = arg;
    gf_defer_mark_last(&sh->defer, &sh->batches);
}

static void run_batches(gf_defer_item *it) {
    gf_shard *sh = gf_list_entry(it, gf_shard, batches);
    gf_alarm_set(&sh->batch_alarm, gf_sched_submit_batches(&sh->sched, gf_now_ns()));
}

/* A batch waited its pipeline's max_batch_delay_us. */
static void on_batch_due(gf_alarm *a) {
    gf_shard *sh = (gf_shard *)((char *)a - offsetof(gf_shard, batch_alarm));
    gf_shard_defer(sh, &sh->batches);
}

static uint64_t watchdog_period_ms(const gf_shard *sh, const gf_config *cfg);
static void on_contended(void *arg);

/* The scheduler's `waiting` hook: results of clients whose sockets are full
 * leave their slots for the client that waits, after this event, rather
 * than at the watchdog's next round (a non-reader sharing batches held
 * others up for a second at a time). */
static void on_waiting(void *arg) {
    gf_shard *sh = arg;
    if (!gf_list_empty(&sh->blocked))
        gf_shard_defer(sh, &sh->evict);
    on_contended(arg); /* a payload in a slot may have held it long enough */
}

/* Clients that stopped reading give back the slots others wait for. */
static void run_evict(gf_defer_item *it) {
    gf_shard *sh = gf_list_entry(it, gf_shard, evict);
    gf_list_each(l, next, &sh->blocked) {
        gf_conn_evict_results(gf_list_entry(l, gf_conn, blocked_link));
    }
}

/* The scheduler's `contended` hook: a receiver's stall, or a payload's hold
 * of its slot, is a deadline from now on, which the watchdog must see
 * within half of it (it goes back to its usual period once nobody waits
 * and no payload is received in place). */
static void on_contended(void *arg) {
    gf_shard *sh = arg;
    uint64_t period = watchdog_period_ms(sh, sh->cfg);
    if (!sh->draining && period < uv_timer_get_repeat(&sh->watchdog))
        uv_timer_start(&sh->watchdog, on_watchdog, period, period);
}

/* ---- deadlines, fatal failure, shutdown -------------------------------------------- */

/* Every frame of the shard in a batch fails with `status` and `text`, and
 * each connection is written what it is owed now, in its request order, as
 * far as its socket takes it: the loop stops next. */
static void fail_batched(gf_shard *sh, uint32_t status, const char *text) {
    gf_list_each(l, next, &sh->conns) {
        gf_conn_io_fail_batched(gf_list_entry(l, gf_conn, link), status, text);
    }
}

/* The daemon cannot go on (a stuck or poisoned engine): fail every frame in
 * a batch with `status`, as best we can, and stop the loop so the daemon
 * exits non-zero and systemd restarts it. */
static void shard_fatal(gf_shard *sh, uint32_t status, const char *fmt, ...) {
    char msg[GF_ERROR_TEXT_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    gf_verrorf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    GF_LOG_ERR("fatal: %s; failing %u batch(es) in flight and exiting", msg, sh->sched.in_flight);
    sh->failed = 1;
    fail_batched(sh, status, msg);
    uv_stop(sh->loop);
}

/* The watchdog's period for `cfg`, shorter while receivers contend. */
static uint64_t watchdog_period_ms(const gf_shard *sh, const gf_config *cfg) {
    gf_deadline_limits lim = gf_deadline_limits_of(cfg);
    const gf_sched *s = &sh->sched;
    int held = s->receiving > 0 && cfg->max_input_bytes_total > 0 &&
               (!gf_list_empty(&s->wait_run) || !gf_list_empty(&s->wait_receive));
    return gf_deadline_period_ms(&lim, cfg->frame_timeout_ms, gf_sched_receive_contended(s), held);
}

/* A batch on the engine past its deadline (deadline.h): the engine stopped
 * completing frames.  The log names the oldest batch on the engine, the one
 * that stopped first.  Returns 1 after the fatal path. */
static int check_batches(gf_shard *sh, uint64_t now) {
    const gf_slot *oldest = NULL;
    int overdue = 0;
    for (uint32_t i = 0; i < sh->sched.ring.count; i++) {
        const gf_slot *s = &sh->sched.ring.slots[i];
        if (!s->in_flight)
            continue;
        if (oldest == NULL || s->submitted_ns < oldest->submitted_ns)
            oldest = s;
        overdue |=
            now > gf_deadline_batch_ns(s->submitted_ns, s->frame_count, sh->cfg->frame_timeout_ms);
    }
    if (!overdue)
        return 0;
    shard_fatal(sh, GF_ERR_TIMEOUT,
                "frame %llu (%s) on slot %u, in a batch of %u, the oldest of %u on the %s engine, "
                "has been there %llu ms; a batch's deadline is %u ms a frame: the engine stopped "
                "completing frames",
                (unsigned long long)oldest->frames[0].frame_id, oldest->frames[0].pipeline.name,
                oldest->index, oldest->frame_count, sh->sched.in_flight, sh->engine->ops->name,
                (unsigned long long)((now - oldest->submitted_ns) / 1000000u),
                sh->cfg->frame_timeout_ms);
    return 1;
}

static void on_watchdog(uv_timer_t *t) {
    gf_shard *sh = t->data;
    uint64_t now = gf_now_ns();
    /* Connections first: a client's stalled request, unread replies or
     * silence must not hold slots for longer than their deadlines. */
    gf_list_each(l, next, &sh->conns) {
        gf_conn_io_check_deadlines(gf_list_entry(l, gf_conn, link), now);
    }
    run_evict(&sh->evict);
    /* Other shards' replies went meanwhile: the daemon's total may allow more. */
    if (!gf_list_empty(&sh->throttled))
        gf_conn_resume_throttled(sh);
    /* Closing those may have freed slots that were submitted again since. */
    if (check_batches(sh, gf_now_ns()))
        return;
    /* Receivers whose bytes are not there get a free slot now (only now:
     * it stays free for sending ones meanwhile), and a stall to be cut. */
    if (gf_sched_receive_contended(&sh->sched))
        gf_sched_grant_unready(&sh->sched);
    uint64_t period = sh->draining ? GF_DRAIN_STALL_MS / 4 : watchdog_period_ms(sh, sh->cfg);
    if (period != uv_timer_get_repeat(t))
        uv_timer_start(t, on_watchdog, period, period);
}

/* Once a second: rates, and the figures STATUS= shows (group.h). */
static void on_sample(uv_timer_t *t) {
    gf_shard *sh = t->data;
    gf_shard_shared *me = sh->self;
    uint64_t now = gf_now_ns(), idle = uv_metrics_idle_time(sh->loop);
    gf_stats_sample(&sh->stats, now, idle);
    double fps, in, out, busy;
    gf_stats_rates(&sh->stats, 1000000000ull, now, idle, &fps, &in, &out, &busy);
    atomic_store_explicit(&me->rate_fps, (uint64_t)(fps * 1000.0), memory_order_relaxed);
    atomic_store_explicit(&me->rate_in, (uint64_t)in, memory_order_relaxed);
    atomic_store_explicit(&me->answered, sh->stats.frames_answered, memory_order_relaxed);
    atomic_store_explicit(&me->failed, sh->stats.frames_failed, memory_order_relaxed);
    atomic_store_explicit(&me->slots_busy, sh->sched.ring.count - sh->sched.ring.free_count,
                          memory_order_relaxed);
}

/* After every loop iteration: what the systemd watchdog reads of this
 * shard (frames in flight and none completed is a stuck device), which a
 * once-a-second sample would make stale for a watchdog period under it. */
static void on_publish(uv_check_t *h) {
    const gf_shard *sh = h->data;
    atomic_store_explicit(&sh->self->completed, sh->stats.frames_completed, memory_order_relaxed);
    atomic_store_explicit(&sh->self->in_flight, sh->sched.in_flight, memory_order_relaxed);
}

static void on_handle_closed(uv_handle_t *h) {
    (void)h;
}

/* Deferred work while stopping: once nothing is in flight or owed, close
 * every handle so that uv_run returns. */
static void run_drained(gf_defer_item *it) {
    gf_shard *sh = gf_list_entry(it, gf_shard, drained);
    if (!sh->draining || sh->handles_closed || sh->sched.in_flight > 0 || !gf_pool_idle(sh->pool))
        return;
    gf_list_each(l, next, &sh->conns) {
        const gf_conn *c = gf_list_entry(l, gf_conn, link);
        if (c->out.unfinished > 0 || c->frame || c->parked || !c->input_drained)
            return;
    }
    sh->handles_closed = 1;
    gf_link *l;
    while ((l = gf_list_front(&sh->conns)))
        gf_conn_close(gf_list_entry(l, gf_conn, link));
    uv_close((uv_handle_t *)&sh->watchdog, on_handle_closed);
    uv_close((uv_handle_t *)&sh->sampler, on_handle_closed);
    uv_close((uv_handle_t *)&sh->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&sh->poller, on_handle_closed);
    uv_close((uv_handle_t *)&sh->publish, on_handle_closed);
    gf_completion_close(&sh->done, on_handle_closed);
    gf_alarm_close(&sh->batch_alarm, on_handle_closed);
    gf_defer_close(&sh->defer, on_handle_closed);
    GF_LOG_DBG("shard %u drained: every frame it received was answered", sh->index);
}

/* The drain ran out of time: abandon what is left and stop. */
static void on_drain_timeout(uv_timer_t *t) {
    gf_shard *sh = t->data;
    const gf_stats *st = &sh->stats;
    uint64_t left = st->frames_received - st->frames_answered - st->frames_failed -
                    st->frames_dropped - st->frames_truncated;
    GF_LOG_ERR("drain timed out after %u ms: abandoning %llu frame(s) not yet answered (%u "
               "batch(es) on the engine), each told shutting_down",
               sh->cfg->drain_timeout_ms, (unsigned long long)left, sh->sched.in_flight);
    sh->failed = 1;
    char text[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(text, sizeof text,
              "the daemon is stopping and its drain_timeout_ms %u ran out: frame abandoned",
              sh->cfg->drain_timeout_ms);
    fail_batched(sh, GF_ERR_SHUTTING_DOWN, text);
    uv_stop(sh->loop);
}

void gf_shard_shutdown(gf_shard *sh) {
    GF_SHARD_OWNED(sh);
    if (sh->draining)
        return;
    sh->draining = 1;
    sh->sched.draining = 1;
    GF_LOG_INF("stopping: no new connections or frames; %u batch(es) in flight",
               sh->sched.in_flight);
    /* Every connection reads what its socket holds and answers each frame
     * shutting_down; what is begun and not complete then is cut
     * (conn_io.c, conn_input_drained). */
    gf_list_each(l, next, &sh->conns) {
        gf_conn *c = gf_list_entry(l, gf_conn, link);
        gf_sched_stop_waiting(&sh->sched, &c->sched);
        gf_conn_defer(c);
    }
    /* Batches waiting for more frames go now. */
    gf_shard_defer(sh, &sh->batches);
    /* Stalled requests must be cut within GF_DRAIN_STALL_MS: check often. */
    uv_timer_start(&sh->watchdog, on_watchdog, GF_DRAIN_STALL_MS / 4, GF_DRAIN_STALL_MS / 4);
    uv_timer_start(&sh->drain_timer, on_drain_timeout, sh->cfg->drain_timeout_ms, 0);
    gf_shard_defer(sh, &sh->drained);
}

/* ---- memory ----------------------------------------------------------------------- */

/* Deferred work, marked by a finished reply (conn.c): heap_trim.h's policy. */
static void run_trim(gf_defer_item *it) {
    gf_shard *sh = gf_list_entry(it, gf_shard, trim);
    if (gf_heap_trim_if_idle(sh->loose_since_trim_bytes, sh->loose_bytes,
                             sh->sched.ring.free_count == sh->sched.ring.count))
        sh->loose_since_trim_bytes = 0;
}

/* ---- run-time changes ------------------------------------------------------------- */

void gf_shard_reload_apply(gf_shard *sh, const gf_config *next, gf_pipeline_stats *fresh) {
    GF_SHARD_OWNED(sh);
    const gf_config *cur = sh->cfg;
    gf_stats_rekey_into(&sh->stats, cur->pipelines, cur->pipeline_count, next->pipelines,
                        next->pipeline_count, fresh);
    /* Connections check frame sizes in their decoders: the new limit applies
     * from their next header on. */
    gf_list_each(l, n, &sh->conns) {
        gf_list_entry(l, gf_conn, link)->decoder.max_frame_bytes = next->max_frame_bytes;
    }
    sh->cfg = next;
    sh->sched.cfg = next;
    /* Restarted only when its period changes: restarting it on every reload
     * postponed every deadline by a period, and reloads more often than that
     * disabled them all (found by bench/soak.sh).  A drain keeps its own. */
    uint64_t period = watchdog_period_ms(sh, next);
    if (!sh->draining && period != uv_timer_get_repeat(&sh->watchdog))
        uv_timer_start(&sh->watchdog, on_watchdog, period, period);
}

/* ---- start-up and teardown ------------------------------------------------------- */

/* Starts the watchdog and the sampler; neither keeps the loop alive. */
static void timers_start(gf_shard *sh) {
    const gf_config *cfg = sh->cfg;
    uv_timer_init(sh->loop, &sh->watchdog);
    uv_timer_init(sh->loop, &sh->sampler);
    uv_timer_init(sh->loop, &sh->drain_timer);
    sh->watchdog.data = sh->sampler.data = sh->drain_timer.data = sh;
    uint64_t period = watchdog_period_ms(sh, cfg);
    uv_timer_start(&sh->watchdog, on_watchdog, period, period);
    uv_timer_start(&sh->sampler, on_sample, GF_SAMPLE_PERIOD_MS, GF_SAMPLE_PERIOD_MS);
    uv_unref((uv_handle_t *)&sh->watchdog);
    uv_unref((uv_handle_t *)&sh->sampler);
    uv_unref((uv_handle_t *)&sh->drain_timer);
    uv_idle_init(sh->loop, &sh->poller);
    sh->poller.data = sh;
}

/* Opens the engine the configuration names, sized from it, and the
 * scheduler over its slots. */
static int engine_open(gf_shard *sh, const gf_shard_place *place) {
    static const gf_sched_hooks hooks = {.granted = on_granted,
                                         .finished = on_finished,
                                         .wake = on_slot_back,
                                         .batches = on_batches,
                                         .receive_ready = gf_conn_io_receive_ready,
                                         .submitted = on_submitted,
                                         .contended = on_contended,
                                         .pool = gf_pool_take,
                                         .waiting = on_waiting};
    const gf_config *cfg = sh->cfg;
    /* Near its device before the engine allocates its pinned buffers. */
    gf_numa_place_shard(sh->index, cfg->shard_cpus,
                        place->engine == GF_ENGINE_CUDA ? place->device : -1);
    gf_engine_params ep = {.slot_count = cfg->slot_count,
                           .in_capacity_bytes = cfg->max_frame_bytes,
                           .out_capacity_bytes = gf_config_max_output_bytes(cfg),
                           .scratch_capacity_bytes = gf_config_max_scratch_bytes(cfg),
                           .pipelines = cfg->pipelines,
                           .pipeline_count = cfg->pipeline_count,
                           .completion = cfg->completion,
                           .device = place->device,
                           .stream_base = place->stream_base,
                           .device_streams = place->device_streams,
                           .zero_copy_max_bytes = cfg->zero_copy_max_bytes,
                           .cuda_graphs = cfg->cuda_graphs};
    int rc = gf_engine_open(place->engine, &ep, &sh->done, &sh->engine);
    if (rc < 0)
        return rc;
    gf_sched_hooks h = hooks;
    h.arg = sh;
    if ((rc = gf_sched_init(&sh->sched, sh->engine, &sh->stats, cfg, &h)) < 0 ||
        (rc = gf_pool_open(sh)) < 0) {
        gf_sched_free(&sh->sched);
        gf_engine_close(sh->engine);
        return rc;
    }
    sh->sched.shard = sh->index;
    if (cfg->completion == GF_COMPLETION_POLL && !sh->engine->polled)
        GF_LOG_WRN("completion poll: the %s engine completes frames through its own threads; "
                   "ignored",
                   sh->engine->ops->name);
    sh->completion = sh->engine->polled ? cfg->completion : GF_COMPLETION_HOST_FUNC;
    return 0;
}

static void log_ready(const gf_shard *sh) {
    const gf_config *cfg = sh->cfg;
    char desc[512];
    gf_engine_describe(sh->engine, desc, sizeof desc);
    GF_LOG_INF("shard %u ready: engine %s (%s); %u slots; %zu pipelines; %llu bytes pinned",
               sh->index, sh->engine->ops->name, desc, cfg->slot_count, cfg->pipeline_count,
               (unsigned long long)sh->engine->pinned_bytes);
}

/* The shard's own parts, before the engine: counters, the trace ring,
 * deferred work, the completion queue.  Returns 0 or a negative errno,
 * logged; on failure nothing is left to close. */
static int parts_open(gf_shard *sh) {
    int rc;
    const char *what = "counters";
    if ((rc = gf_stats_init(&sh->stats, sh->cfg->pipeline_count, gf_now_ns())) < 0)
        goto fail;
    what = "trace ring";
    if ((rc = gf_trace_init(&sh->trace, sh->cfg->trace_frames)) < 0)
        goto fail_stats;
    what = "deferred work";
    if ((rc = gf_defer_init(&sh->defer, sh->loop)) < 0)
        goto fail_trace;
    what = "batch alarm";
    if ((rc = gf_alarm_init(&sh->batch_alarm, sh->loop, on_batch_due)) < 0)
        goto fail_defer;
    what = "completion queue";
    if ((rc = gf_completion_init(&sh->done, sh->loop, gf_sched_complete, &sh->sched)) < 0)
        goto fail_alarm;
    return 0;

fail_alarm:
    gf_alarm_close(&sh->batch_alarm, NULL);
fail_defer:
    gf_defer_close(&sh->defer, NULL);
    uv_run(sh->loop, UV_RUN_NOWAIT); /* let the close callbacks run before freeing */
fail_trace:
    gf_trace_free(&sh->trace);
fail_stats:
    gf_stats_free(&sh->stats);
fail:
    GF_LOG_ERR("start-up failed: %s: %s", what, rc > -4096 ? uv_strerror(rc) : "error");
    return rc;
}

/* Undoes parts_open. */
static void parts_close(gf_shard *sh) {
    gf_completion_close(&sh->done, NULL);
    gf_alarm_close(&sh->batch_alarm, NULL);
    gf_defer_close(&sh->defer, NULL);
    uv_run(sh->loop, UV_RUN_NOWAIT); /* let the close callbacks run before freeing */
    gf_trace_free(&sh->trace);
    gf_stats_free(&sh->stats);
}

int gf_shard_open(uv_loop_t *loop, const gf_config *cfg, gf_group *group,
                  const gf_shard_place *place, gf_shard **out) {
    gf_shard *sh = calloc(1, sizeof *sh);
    if (!sh) {
        GF_LOG_ERR("start-up failed: out of memory");
        return -ENOMEM;
    }
    sh->loop = loop;
    sh->thread = uv_thread_self();
    sh->cfg = cfg;
    sh->group = group;
    sh->index = place->index;
    sh->self = &group->shard[place->index];
    sh->next_conn_id = place->index + 1;
    gf_list_init(&sh->conns);
    gf_list_init(&sh->throttled);
    gf_list_init(&sh->blocked);
    gf_list_init(&sh->gather_waiters);
    gf_defer_item_init(&sh->grant, run_grant);
    gf_defer_item_init(&sh->batches, run_batches);
    gf_defer_item_init(&sh->drained, run_drained);
    gf_defer_item_init(&sh->trim, run_trim);
    sh->conn_resume = gf_conn_io_resume;
    gf_defer_item_init(&sh->evict, run_evict);
    /* uv_metrics_idle_time needs this before the loop runs. */
    uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    int rc = parts_open(sh);
    if (rc < 0)
        goto fail_free;
    if ((rc = engine_open(sh, place)) < 0)
        goto fail_parts;
    timers_start(sh);
    uv_check_init(loop, &sh->publish);
    sh->publish.data = sh;
    uv_check_start(&sh->publish, on_publish);
    uv_unref((uv_handle_t *)&sh->publish);
    sh->stats.started_ns = gf_now_ns();
    gf_stats_sample(&sh->stats, sh->stats.started_ns, uv_metrics_idle_time(loop));
    log_ready(sh);
    gf_reaper_on(loop);
    *out = sh;
    return 0;

fail_parts:
    parts_close(sh);
fail_free:
    free(sh);
    return rc;
}

void gf_shard_accept(gf_shard *sh, int fd, uint32_t uid, uint32_t gid, uint32_t pid) {
    GF_SHARD_OWNED(sh);
    if (sh->draining) {
        /* Handed over as the drain began: told so, like every frame now. */
        gf_group_refuse_handoff(sh->group, sh->index, &sh->stats, fd, -1, NULL);
        return;
    }
    gf_conn_io_accept(sh, fd, uid, gid, pid);
}

/* ---- what the control loop asks ------------------------------------------------ */

int gf_shard_failed(const gf_shard *sh) {
    return sh->failed;
}

int gf_shard_close(gf_shard *sh) {
    GF_SHARD_OWNED(sh);
    int failed = sh->failed;
    gf_prof_print(sh->index, sh->stats.frames_answered, uv_metrics_idle_time(sh->loop));
    /* The loop has stopped: from here a stage is destroyed where released. */
    gf_reaper_on(NULL);
    /* After a fatal failure the device may never finish: the process exits
     * without waiting for it, and the OS takes the memory back. */
    if (!failed) {
        gf_pool_close(sh);
        gf_sched_free(&sh->sched);
        gf_engine_close(sh->engine);
    }
    gf_trace_free(&sh->trace);
    gf_stats_free(&sh->stats);
    free(sh);
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The shards and the control loop's side of them (shards.h).  Every shard's
 * thread opens its own shard (shard.h) and loop; the control loop reaches
 * a shard only by mail (mailbox.h), and reads only group.h's atomics.
 */
#include "shards.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "group.h"
#include "listener.h"
#include "log.h"
#include "mailbox.h"
#include "options.h"
#include "reaper.h"
#include "reload_check.h"
#include "shard.h"
#include "shard_plan.h"

/* The control loop's handle on one shard's thread: starting, stopping and
 * joining it.  The shard itself (shard.h) lives on that thread, which
 * alone sees it.  Calls (mailbox.h) carry everything between the two but
 * the thread's own life: before the shard's mailbox exists and after it
 * has closed there is nothing to post to, so three semaphores order its
 * start (opened, go) and its end (closing). */
typedef struct shard_thread {
    gf_shards *owner;
    gf_shard_place place;
    uv_thread_t thread;
    uv_loop_t loop;   /* its thread's */
    uv_sem_t opened;  /* its thread set open_rc                          */
    uv_sem_t go;      /* the control loop set proceed                    */
    uv_sem_t closing; /* the control loop is done: until then the thread
                         stays, so that none has ended unjoined when a
                         failure exits the process (on_finished)         */
    int open_rc;      /* written before opened is posted, read after     */
    int proceed;      /* written before go is posted, read after         */
    int failed;       /* written before `finished` is mailed, read after */
    gf_call drain;    /* to it: stop (gf_shard_shutdown)                */
    gf_call finished; /* from it: its loop has ended                     */
} shard_thread;

/* A reload being applied: a call to each shard, answered when it has. */
typedef struct apply_round apply_round;
typedef struct apply_mail {
    gf_call call; /* to the shard: apply; back to the control loop: done */
    apply_round *round;
    gf_pipeline_stats *fresh; /* its new per-pipeline totals, or NULL once used */
} apply_mail;

struct apply_round {
    gf_shards *owner;
    const gf_config *next;
    uint32_t left; /* shards yet to apply; control loop only */
    gf_shards_applied_cb done;
    void *arg;
    apply_mail *mails; /* [count] */
};

struct gf_shards {
    uv_loop_t *loop;      /* the control loop                             */
    uv_thread_t thread;   /* its thread: everything here is its own, but
                             what group.h shares (CONTROL_LOOP)           */
    const gf_config *cfg; /* the running configuration, as the control
                             loop sees it (each shard has its own
                             pointer, switched when it applies a reload) */
    gf_group group;
    shard_thread *shards; /* [group.count] */
    gf_listener listener;
    gf_reload_limits limits; /* a reload's bounds, fixed at start-up       */
    gf_mailbox *control;     /* the control loop's (main.c's): shards answer
                                there, and say they have finished          */
    uint32_t next;           /* placement: the shard after the last tie     */
    uint32_t finished;       /* shards whose loop has ended                 */
    uint32_t slot_count;     /* per shard, fixed                            */
    int draining;
};

/* Debug builds assert that the caller is the control loop's thread where
 * its state is touched from a mail or a callback (shard.h's
 * GF_SHARD_OWNED, for the control loop); nothing with NDEBUG. */
#define CONTROL_LOOP(g) assert(uv_thread_equal(&(g)->thread, &(uv_thread_t){uv_thread_self()}))

int gf_shards_bind(const gf_config *cfg) {
    return gf_listener_bind(cfg->socket_path, cfg->socket_group, cfg->socket_mode);
}

/* ---- the hand-off ---------------------------------------------------------------- */

typedef struct accept_mail {
    gf_call call; /* to the shard; no answer */
    gf_group *group;
    uint32_t shard; /* whose count includes this one */
    int fd;
    uint32_t uid, gid, pid;
} accept_mail;

/* The shard's thread (owner NULL: it had stopped with the call queued). */
static void on_accept_mail(gf_call *m, void *owner) {
    accept_mail *a = gf_list_entry(m, accept_mail, call);
    if (owner != NULL)
        gf_shard_accept(owner, a->fd, a->uid, a->gid, a->pid);
    else
        gf_group_refuse_handoff(a->group, a->shard, NULL, a->fd, -1, NULL);
    free(a);
}

/* The shard with the fewest connections; ties go in turn.  *total gets every
 * shard's connections. */
static uint32_t place(gf_shards *g, uint64_t *total) {
    uint32_t best = g->next % g->group.count, best_n = UINT32_MAX;
    *total = 0;
    for (uint32_t i = 0; i < g->group.count; i++) {
        uint32_t k = (g->next + i) % g->group.count;
        uint32_t n = atomic_load_explicit(&g->group.shard[k].connections, memory_order_relaxed);
        *total += n;
        if (n < best_n) {
            best = k;
            best_n = n;
        }
    }
    g->next = best + 1;
    return best;
}

static void on_accepted(gf_listener *l, int fd, uint32_t uid, uint32_t gid, uint32_t pid) {
    gf_shards *g = l->arg;
    CONTROL_LOOP(g);
    char text[GF_ERROR_TEXT_MAX_BYTES];
    uint64_t total;
    uint32_t k = place(g, &total);
    if (total >= g->cfg->max_connections) {
        gf_errorf(text, sizeof text, "max_connections %u reached (uid %u, pid %u refused)",
                  g->cfg->max_connections, uid, pid);
        gf_listener_refuse(l, fd, GF_ERR_TOO_MANY_CONNECTIONS, text);
        return;
    }
    accept_mail *a = malloc(sizeof *a);
    if (a == NULL) {
        gf_listener_refuse(l, fd, GF_ERR_INTERNAL, "out of memory for a connection");
        return;
    }
    *a = (accept_mail){.call.run = on_accept_mail,
                       .group = &g->group,
                       .shard = k,
                       .fd = fd,
                       .uid = uid,
                       .gid = gid,
                       .pid = pid};
    atomic_fetch_add_explicit(&g->group.shard[k].connections, 1, memory_order_relaxed);
    if (gf_call_post(&g->group.shard[k].mailbox, &a->call) < 0) {
        free(a);
        gf_group_refuse_handoff(&g->group, k, NULL, fd, -1, NULL);
    }
}

static void on_refused(gf_listener *l, uint32_t status) {
    gf_group_count_refusal(&((gf_shards *)l->arg)->group, status);
}

/* ---- a shard's thread -------------------------------------------------------------- */

/* The shard's thread. */
static void on_drain_mail(gf_call *m, void *owner) {
    (void)m;
    if (owner != NULL)
        gf_shard_shutdown(owner);
}

/* Control loop: a shard's loop has ended. */
static void on_finished(gf_call *m, void *owner) {
    shard_thread *th = gf_list_entry(m, shard_thread, finished);
    gf_shards *g = th->owner;
    (void)owner;
    CONTROL_LOOP(g);
    if (th->failed) {
        /* Every shard's thread is still there, serving or waiting on
         * `closing`: none has ended unjoined (ThreadSanitizer would count it
         * as leaked), and all go with the process. */
        /* Its engine is stuck or poisoned, or its drain ran out of time (it
         * logged how many frames it abandoned): waiting for a device could
         * hang for ever, and the other shards' frames go with the process. */
        GF_LOG_ERR("shard %u stopped after a failure: exiting with status %d so that the "
                   "supervisor restarts the daemon",
                   th->place.index, GF_EXIT_FAILURE);
        _exit(GF_EXIT_FAILURE);
    }
    if (++g->finished < g->group.count)
        return;
    GF_LOG_INF("drained: every frame received was answered");
    gf_listener_close(&g->listener);
    gf_mailbox_close(g->control, NULL);
}

/* A shard's own thread, all its life: opens the shard and its mailbox; the
 * control loop waits for that (opened), then says whether to serve (go).
 * Its engine is closed here, on the thread whose device is current. */
static void shard_main(void *arg) {
    shard_thread *th = arg;
    gf_shards *g = th->owner;
    gf_shard_shared *me = &g->group.shard[th->place.index];
    gf_shard *sh = NULL;
    int rc = uv_loop_init(&th->loop);
    if (rc == 0 && (rc = gf_shard_open(&th->loop, g->cfg, &g->group, &th->place, &sh)) == 0 &&
        (rc = gf_mailbox_init(&me->mailbox, &th->loop, sh)) < 0) {
        gf_shard_shutdown(sh);
        uv_run(&th->loop, UV_RUN_DEFAULT);
        gf_shard_close(sh);
    }
    th->open_rc = rc;
    uv_sem_post(&th->opened);
    if (rc < 0) {
        uv_loop_close(&th->loop);
        return;
    }
    uv_sem_wait(&th->go);
    if (!th->proceed)
        gf_shard_shutdown(sh); /* nothing to drain: its handles close */
    uv_run(&th->loop, UV_RUN_DEFAULT);
    if (th->proceed && gf_shard_failed(sh)) {
        th->failed = 1;
        if (gf_call_post(g->control, &th->finished) < 0)
            _exit(GF_EXIT_FAILURE);
        uv_sem_wait(&th->closing); /* never posted: the control loop exits the process */
        return;
    }
    gf_mailbox_close(&me->mailbox, NULL);
    uv_run(&th->loop, UV_RUN_NOWAIT);
    if (th->proceed) {
        gf_call_post(g->control, &th->finished);
        uv_sem_wait(&th->closing);
    }
    gf_shard_close(sh);
    int lc = uv_loop_close(&th->loop);
    if (lc != 0)
        GF_LOG_WRN("shard %u: event loop closed with handles still open: %s", th->place.index,
                   uv_strerror(lc));
}

/* ---- start-up ---------------------------------------------------------------------- */

/* Runs gf_shard_plan and makes the shards' handles and shared parts.
 * Returns 0, or -1 with the problem logged. */
static int plan(gf_shards *g, const gf_config *cfg, enum gf_engine_choice engine, int visible) {
    gf_shard_place *places;
    int count = gf_shard_plan(cfg, engine, visible, sysconf(_SC_NPROCESSORS_ONLN), &places);
    if (count < 0)
        return -1;
    g->shards = calloc((size_t)count, sizeof *g->shards);
    g->group.shard = calloc((size_t)count, sizeof *g->group.shard);
    if (!g->shards || !g->group.shard) {
        GF_LOG_ERR("start-up failed: out of memory");
        free(places);
        return -1;
    }
    for (int k = 0; k < count; k++) {
        shard_thread *th = &g->shards[k];
        th->owner = g;
        th->place = places[k];
        th->drain.run = on_drain_mail;
        th->finished.run = on_finished;
        g->group.shard[k].device = places[k].device;
    }
    g->group.count = (uint32_t)count;
    gf_reload_limits_init(&g->limits, cfg, places, (uint32_t)count);
    free(places);
    return 0;
}

/* Starts the threads and waits until every shard has opened.  Returns 0, or
 * the first failure; the shards that opened are told to stop, and every
 * thread is joined. */
static int start(gf_shards *g, uint32_t *started_out) {
    int rc = 0;
    uint32_t started = 0;
    for (; started < g->group.count; started++) {
        shard_thread *th = &g->shards[started];
        uv_sem_init(&th->opened, 0);
        uv_sem_init(&th->go, 0);
        uv_sem_init(&th->closing, 0);
        if ((rc = uv_thread_create(&th->thread, shard_main, th)) < 0) {
            GF_LOG_ERR("start-up failed: cannot start shard %u's thread: %s", started,
                       uv_strerror(rc));
            uv_sem_destroy(&th->opened);
            uv_sem_destroy(&th->go);
            uv_sem_destroy(&th->closing);
            break;
        }
    }
    for (uint32_t k = 0; k < started; k++) {
        uv_sem_wait(&g->shards[k].opened);
        if (rc == 0 && g->shards[k].open_rc < 0)
            rc = g->shards[k].open_rc;
    }
    *started_out = started;
    return rc;
}

/* Says go (proceed) or stop to every shard that opened, of `started`. */
static void release(gf_shards *g, uint32_t started, int proceed) {
    for (uint32_t k = 0; k < started; k++) {
        shard_thread *th = &g->shards[k];
        th->proceed = proceed;
        if (th->open_rc == 0)
            uv_sem_post(&th->go);
    }
}

static void join(gf_shards *g, uint32_t started) {
    for (uint32_t k = 0; k < started; k++) {
        uv_thread_join(&g->shards[k].thread);
        uv_sem_destroy(&g->shards[k].opened);
        uv_sem_destroy(&g->shards[k].go);
        uv_sem_destroy(&g->shards[k].closing);
    }
}

static void shards_free(gf_shards *g) {
    free(g->shards);
    free(g->group.shard);
    free(g);
}

int gf_shards_open(uv_loop_t *loop, const gf_config *cfg, int listen_fd, int owned,
                   gf_mailbox *control, gf_shards **out) {
    gf_shards *g = calloc(1, sizeof *g);
    if (!g) {
        GF_LOG_ERR("start-up failed: out of memory");
        return -ENOMEM;
    }
    g->loop = loop;
    g->thread = uv_thread_self();
    g->control = control;
    g->cfg = cfg;
    g->slot_count = cfg->slot_count;
#ifdef __GLIBC__
    /* One malloc arena for every thread.  The frame path allocates nothing,
     * so shards never contend for it; and shard.c's trim of an idle heap
     * ("memory") needs it: glibc's malloc_trim gives back the top of the
     * main arena only, and a shard's own arena kept the 4 MiB of evicted
     * results at its top (test_fairness: idle RssAnon 21 MB after a burst,
     * 17 MB with one arena). */
    mallopt(M_ARENA_MAX, 1);
#endif
    int visible = 0;
    enum gf_engine_choice engine = gf_engine_choose(cfg->engine, &visible);
    if (engine == GF_ENGINE_CUDA && visible == 0) {
        GF_LOG_ERR("engine cuda: no usable CUDA device");
        free(g);
        return -ENODEV;
    }
    if (plan(g, cfg, engine, visible) < 0) {
        shards_free(g);
        return -EINVAL;
    }
    uint32_t started = 0;
    int rc = start(g, &started);
    if (rc == 0) {
        g->listener = (gf_listener){.cfg = cfg,
                                    .fd = -1,
                                    .reserve_fd = -1,
                                    .accepted = on_accepted,
                                    .refused = on_refused,
                                    .arg = g};
        rc = gf_listener_open(&g->listener, loop, listen_fd, owned);
    }
    if (rc < 0) {
        release(g, started, 0);
        join(g, started);
        shards_free(g);
        return rc;
    }
    /* A reload's old configuration is freed here: its removed plugin
     * stages go to the thread pool, as on a shard. */
    gf_reaper_on(loop);
    /* Alive while shards serve: the drain ends when every one has mailed. */
    uv_ref((uv_handle_t *)&control->async);
    release(g, g->group.count, 1);
    GF_LOG_INF("ready: listening on %s%s; %u shard(s) of %u slots; %zu pipelines", cfg->socket_path,
               owned ? "" : " (socket passed by systemd)", g->group.count, cfg->slot_count,
               cfg->pipeline_count);
    *out = g;
    return 0;
}

/* ---- stopping ---------------------------------------------------------------------- */

void gf_shards_shutdown(gf_shards *g) {
    if (g->draining)
        return;
    g->draining = 1;
    gf_listener_close(&g->listener);
    for (uint32_t k = 0; k < g->group.count; k++)
        if (gf_call_post(&g->group.shard[k].mailbox, &g->shards[k].drain) < 0)
            GF_LOG_DBG("shard %u: already stopped", k);
}

int gf_shards_close(gf_shards *g) {
    gf_reaper_on(NULL); /* the control loop has stopped */
    for (uint32_t k = 0; k < g->group.count; k++)
        uv_sem_post(&g->shards[k].closing);
    join(g, g->group.count);
    shards_free(g);
    return 0;
}

/* ---- reloads ----------------------------------------------------------------------- */

const gf_reload_limits *gf_shards_limits(const gf_shards *g) {
    return &g->limits;
}

static void round_free(apply_round *r) {
    for (uint32_t k = 0; k < r->owner->group.count; k++)
        free(r->mails[k].fresh);
    free(r->mails);
    free(r);
}

/* Control loop: one shard has applied the reload (or had stopped).  With
 * no owner, on the shard's thread: the control loop stopped first, and
 * nothing waits for the round any more. */
static void on_applied(gf_call *m, void *owner) {
    apply_mail *am = gf_list_entry(m, apply_mail, call);
    apply_round *r = am->round;
    if (owner == NULL) {
        GF_LOG_WRN("reload: the control loop stopped before every shard applied it");
        return;
    }
    CONTROL_LOOP(r->owner);
    if (--r->left > 0)
        return;
    r->done(r->arg);
    round_free(r);
}

/* A shard's thread: between two of its events, switch. */
static void on_apply(gf_call *m, void *owner) {
    apply_mail *am = gf_list_entry(m, apply_mail, call);
    if (owner != NULL) {
        gf_shard_reload_apply(owner, am->round->next, am->fresh);
        am->fresh = NULL;
    }
}

int gf_shards_reload_apply(gf_shards *g, const gf_config *next, gf_shards_applied_cb done,
                           void *arg) {
    CONTROL_LOOP(g);
    apply_round *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->owner = g;
    r->next = next;
    r->done = done;
    r->arg = arg;
    r->left = g->group.count;
    r->mails = calloc(g->group.count, sizeof *r->mails);
    int rc = r->mails ? 0 : -ENOMEM;
    for (uint32_t k = 0; rc == 0 && k < g->group.count; k++) {
        apply_mail *am = &r->mails[k];
        am->call = (gf_call){.run = on_apply, .done = on_applied, .reply_to = g->control};
        am->round = r;
        if (!(am->fresh = gf_stats_pipelines_new(next->pipeline_count)))
            rc = -ENOMEM;
    }
    if (rc < 0) {
        if (r->mails)
            round_free(r);
        else
            free(r);
        return rc;
    }
    g->cfg = next;
    g->listener.cfg = next;
    for (uint32_t k = 0; k < g->group.count; k++)
        if (gf_call_post(&g->group.shard[k].mailbox, &r->mails[k].call) < 0)
            on_applied(&r->mails[k].call, g); /* stopped: nothing to apply */
    return 0;
}

/* ---- what the supervisor asks ---------------------------------------------------- */

void gf_shards_progress(const gf_shards *g, uint64_t *completed, uint32_t *in_flight) {
    *completed = 0;
    *in_flight = 0;
    for (uint32_t k = 0; k < g->group.count; k++) {
        const gf_shard_shared *s = &g->group.shard[k];
        *completed += atomic_load_explicit(&s->completed, memory_order_relaxed);
        *in_flight += atomic_load_explicit(&s->in_flight, memory_order_relaxed);
    }
}

void gf_shards_status(const gf_shards *g, char *buf, size_t len) {
    uint64_t connections = 0, fps_milli = 0, in = 0, answered = 0, failed = 0;
    uint32_t busy = 0;
    for (uint32_t k = 0; k < g->group.count; k++) {
        const gf_shard_shared *s = &g->group.shard[k];
        connections += atomic_load_explicit(&s->connections, memory_order_relaxed);
        fps_milli += atomic_load_explicit(&s->rate_fps, memory_order_relaxed);
        in += atomic_load_explicit(&s->rate_in, memory_order_relaxed);
        answered += atomic_load_explicit(&s->answered, memory_order_relaxed);
        failed += atomic_load_explicit(&s->failed, memory_order_relaxed);
        busy += atomic_load_explicit(&s->slots_busy, memory_order_relaxed);
    }
    snprintf(buf, len,
             "%s%" PRIu64 " connection(s), %.0f frames/s, %.2f GB/s in, %u/%u slots busy, %" PRIu64
             " frames answered, %" PRIu64 " failed, %u shard(s)",
             g->draining ? "draining: " : "", connections, (double)fps_milli / 1000.0,
             (double)in / 1e9, busy, g->group.count * g->slot_count, answered, failed,
             g->group.count);
}

/* SPDX-License-Identifier: MIT */
/*
 * One shard's serving loop: one struct that the daemon's serving files share
 * (shard.h keeps it opaque to everyone else).  Each shard (shards.h) has
 * its own, on its own thread.  It is data only, and no header hands it
 * out: conn.h names a connection's shard without it, and a file that
 * reaches into the shard includes this itself (with group.h or engine.h
 * where it touches those), so what each file sees is on its include list.
 * The calls between the files that read it go one way, from the top down:
 *
 *   shard.c       start-up, teardown, reload, graceful drain, the watchdog
 *                 and the fatal path, the deferred-work items of the loop
 *     conn_io.c   a connection's driver: its events, recvmsg and the request
 *                 loop, sendmsg of ready replies, EOF, its deadlines, the
 *                 scheduler's hooks (a finished slot's replies)
 *       query.c   LIST, STATS, TRACE and the region messages
 *         gather.c  STATS and TRACE of every shard: a call to each
 *       admit.c   a FRAME's admission: checks, a slot, its payload
 *       move.c    a connection handed to another shard, whose device runs
 *                 its FRAME's pipeline (a call)
 *         conn.c  the connection itself: its replies and what finishing one
 *                 releases, taking back a frame, closing
 *           introspect.c  frame accounting, the STATS/LIST/TRACE documents
 *           region.c      shared-memory regions
 *           pool.c        batches run in a submission of another shard of
 *                         the device, or of theirs here (a call each way)
 *           scheduler.c       slots: waiters, grants, batches, completion
 *             slots.c (a frame's outcome as a reply), reply.c (the one
 *             encoder, the reply queue), deadline.c, defer.c, alarm.c (a
 *             batch's delay), heap_trim.c, stats.c, trace.c ...
 *
 * What goes back up goes through hooks set at open (the scheduler's, a
 * connection's conn_resume, the listener's accept, a region's release) or
 * through deferred work (defer.h): an event marks what must happen next
 * and one pass after the loop's I/O does it.  Everything here belongs to
 * the shard's thread (GF_SHARD_OWNED asserts it in debug builds); the
 * engines reach it only through the completion queue, and other threads
 * only through calls to its mailbox (mailbox.h; group.h: the little that
 * shards share).
 */
#ifndef GF_SHARD_STATE_H
#define GF_SHARD_STATE_H

#include <assert.h>
#include <stdint.h>

#include <uv.h>

#include "alarm.h"
#include "completion.h"
#include "config.h"
#include "defer.h"
#include "list.h"
#include "scheduler.h"
#include "stats.h"
#include "trace.h"

/* Shared with other threads (group.h): a shard holds them by pointer; the
 * files that touch them include group.h. */
typedef struct gf_group gf_group;
typedef struct gf_shard_shared gf_shard_shared;
/* Its part in its device's pool (pool.h); pool.c's. */
typedef struct gf_pool gf_pool;

/* shard.h keeps it opaque; here it is whole. */
typedef struct gf_shard gf_shard;

/* Lines per second about connections refused or closed by a deadline or an
 * error they caused: a local client must not be able to flood the journal. */
#define GF_CLOSE_LOG_PER_S 10
/* STATS and TRACE requests of one shard gathering the others' figures at
 * once: each holds a copy of every shard's counters (and trace), which no
 * output limit counts until its reply is made, so a flood of them must wait
 * its turn (test_hostile's floods of unread STATS and TRACE). */
#define GF_GATHERS_MAX 4

struct gf_shard {
    uv_loop_t *loop;
    uv_thread_t thread;   /* its own: the one that touches everything here
                             (GF_SHARD_OWNED)                              */
    const gf_config *cfg; /* the running configuration                       */
    gf_engine *engine;
    gf_sched sched;                         /* the slots and who gets them                      */
    gf_completion done;                     /* engines push finished slots here                 */
    gf_defer defer;                         /* work after each event (defer.h)                  */
    gf_defer_item grant;                    /* free slots to hand to waiters                    */
    gf_defer_item batches;                  /* open batches that are due go to the engine       */
    gf_alarm batch_alarm;                   /* the next open batch is due (max_batch_delay_us)  */
    gf_defer_item drained;                  /* stopping: see whether everything is answered     */
    gf_defer_item trim;                     /* see whether the heap can be trimmed              */
    void (*conn_resume)(gf_defer_item *it); /* a connection's deferred work
                                               (conn_io.c), set at open      */
    gf_defer_item evict;                    /* a client waits for a slot: results nobody
                                               reads leave theirs (gf_conn_evict_results) */
    gf_pool *pool;                          /* batches run with other shards' (pool.h)   */

    gf_group *group;       /* the daemon's shards (group.h)                   */
    uint32_t index;        /* this one's in group->shard                 */
    gf_shard_shared *self; /* group->shard[index]                            */
    uv_check_t publish;    /* after every iteration: self's counts           */

    uv_timer_t watchdog;                /* connection deadlines and batch deadlines         */
    uv_timer_t sampler;                 /* rates and loop utilisation, once a second        */
    uv_timer_t drain_timer;             /* bounds a graceful stop                           */
    uv_idle_t poller;                   /* completion = poll, hybrid: runs while the engine
                                           polls submissions, so the loop never sleeps then,
                                           and (poll) GF_POLL_LINGER_NS after               */
    enum gf_completion_mode completion; /* in effect: the CPU engine's is host_func */
    uint64_t poll_last_ns;              /* the poller's last run, or its start              */
    uint64_t poll_quiet_ns;             /* when it found nothing left to poll               */

    gf_trace trace;                  /* the last frames' stage times (TRACE)             */
    gf_stats stats;                  /* every counter (stats.h)                          */
    gf_link conns;                   /* live connections (gf_conn.link)                  */
    gf_link blocked;                 /* of them, those whose socket is full
                                        (gf_conn.blocked_link)                           */
    gf_link throttled;               /* of them, stopped for max_output_bytes_total
                                        (gf_conn.throttled_link)                         */
    uint64_t next_conn_id;           /* shard + 1, then steps of the shard count        */
    uint64_t doc_iteration;          /* the loop iteration doc_bytes counts      */
    uint64_t doc_bytes;              /* large documents begun in it (conn.h,
                                        gf_conn_may_build)                        */
    uint32_t gathers;                /* TRACEs gathering every shard's trace now
                                        (query.c): at most GF_GATHERS_MAX               */
    gf_link gather_waiters;          /* connections whose next one waits for that
                                        (gf_conn.gather_link)                           */
    uint64_t loose_bytes;            /* every connection's unwritten loose replies */
    uint64_t loose_since_trim_bytes; /* of them, bytes queued since the heap was
                                        last trimmed                             */
    unsigned draining : 1;
    unsigned failed : 1;         /* fatal engine failure or drain timeout        */
    unsigned handles_closed : 1; /* the drain ended: every handle is closing     */
};

/* Whether the calling thread is `sh`'s own. */
static inline int gf_shard_on_its_thread(const gf_shard *sh) {
    uv_thread_t me = uv_thread_self();
    return uv_thread_equal(&me, &sh->thread);
}

/* Debug builds assert the owning thread where a shard's state is touched by
 * a call that another thread could make by mistake (Seastar's
 * this_shard_id(), Redis 8's c->running_tid): a mail's run, a hook, a
 * connection's or a region's entry points.  Compiled out with NDEBUG, as
 * the default RelWithDebInfo build has it. */
#define GF_SHARD_OWNED(sh) assert(gf_shard_on_its_thread(sh))

/* Marks `it` to run after the current event (defer.h). */
static inline void gf_shard_defer(gf_shard *sh, gf_defer_item *it) {
    gf_defer_mark(&sh->defer, it);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What the shards share (shards.h runs them): each other's mailboxes, and
 * the few counts that are the daemon's rather than one shard's.  The
 * control loop fills it before any shard serves; after that only the
 * atomics change.  Every field says which threads touch it and what guards
 * it: this is the one structure on the frame path that two threads see.
 */
#ifndef GF_GROUP_H
#define GF_GROUP_H

#include <stdatomic.h>
#include <stdint.h>

#include "log.h"
#include "mailbox.h"
#include "protocol.h"

/* Pipelines told apart by the shards' note of when they last submitted one
 * (gf_shard_shared.pool_seen_ns): ids modulo this.  Two pipelines that
 * share a key only make a batch of one look shared a little more often. */
#define GF_POOL_KEYS 16

/* What of one shard other threads may touch: its mailbox, its device and
 * the counts it publishes (the rest of a shard is its own thread's). */
typedef struct gf_shard_shared {
    gf_mailbox mailbox; /* its loop's (mailbox.h: its own lock); initialised by
                           its thread before the control loop starts
                           accepting (a semaphore orders them), closed by
                           its thread when its loop has ended                */
    int device;         /* its CUDA device, -1 for the cpu engine; fixed     */
    /* Written by the shard's thread, read by the control loop's (placement,
     * max_connections, STATUS=, the watchdog): relaxed atomics, each a
     * count on its own, no invariant between them. */
    atomic_uint connections;        /* open, plus handed over and not yet
                                       opened (the control loop adds one
                                       before the hand-off)                 */
    atomic_uint_fast64_t completed; /* frames the engine finished: after  */
    atomic_uint in_flight;          /* batches on the engine   each loop
                                       iteration (the watchdog)           */
    /* The rest once a second (STATUS=). */
    atomic_uint_fast64_t answered; /* RESULT replies written              */
    atomic_uint_fast64_t failed;   /* frames answered with an ERROR       */
    atomic_uint_fast64_t rate_fps; /* frames/s over the last second, x1000 */
    atomic_uint_fast64_t rate_in;  /* payload bytes/s in, the same          */
    atomic_uint slots_busy;        /* its slots not free                  */
    /* When it last submitted a batch of a pipeline that may be pooled
     * (pool.h), by the pipeline's id modulo GF_POOL_KEYS: written by its
     * thread, read by its device's other shards' (whether a batch of the
     * pipeline would find others' frames at its home); relaxed. */
    atomic_uint_fast64_t pool_seen_ns[GF_POOL_KEYS];
} gf_shard_shared;

typedef struct gf_group {
    uint32_t count;         /* shards; fixed                                */
    gf_shard_shared *shard; /* [count]; fixed                               */
    /* Read and written by every shard's thread: atomics. */
    atomic_uint_fast64_t region_bytes;        /* all connections' shared-memory regions,
                                                 against max_shm_bytes             */
    atomic_uint_fast64_t device_region_bytes; /* all connections' device regions,
                                                 against max_device_region_bytes  */
    atomic_uint_fast64_t loose_bytes;         /* all connections' unwritten LIST, STATS,
                                                 TRACE and ERROR replies, against
                                                 max_output_bytes_total (reply.h)   */
    atomic_uint_fast64_t parked_bytes;        /* all connections' parked payloads, against
                                                 max_input_bytes_total (conn.h)     */
    gf_log_budget close_log;                  /* lines about connections closed or refused by a
                                                 shard (GF_CLOSE_LOG_PER_S): one budget for the
                                                 daemon; log.c's lock guards it             */
    /* Refusals before a shard served the connection: added by the control
     * loop (at accept) and by a shard that stopped with one in its mailbox,
     * read by shards building STATS. */
    atomic_uint_fast64_t refused;
    atomic_uint_fast64_t refused_by_status[GF_STATUS_COUNT_];
} gf_group;

/* A connection refused before any shard served it, counted for STATS.  Any
 * thread. */
static inline void gf_group_count_refusal(gf_group *g, uint32_t status) {
    atomic_fetch_add_explicit(&g->refused, 1, memory_order_relaxed);
    if (status < GF_STATUS_COUNT_)
        atomic_fetch_add_explicit(&g->refused_by_status[status], 1, memory_order_relaxed);
}

struct gf_stats;

/*
 * A socket handed to shard `shard` by mail (an accepted one from the control
 * loop, or a connection moving there, which carries the FRAME `frame` it
 * moved for; NULL for an accepted one) that no shard will serve, because
 * the daemon stops: the one place that refuses such a socket.  Its client
 * is told shutting_down (answering that FRAME), its socket and
 * `pending_fd` (-1: none) are closed, the count the hand-off added to the
 * shard's connections goes back, and the refusal is counted: in `stats` by
 * the shard that had it, on its thread, or in the group's counts when no
 * shard did (NULL).  An accepted one also counts as a connection refused
 * (STATS's connections.refused); a moved one was served before.  Any
 * thread.
 */
void gf_group_refuse_handoff(gf_group *g, uint32_t shard, struct gf_stats *stats, int fd,
                             int pending_fd, const gf_header *frame);

/* Whether a shard on `device` (-1: the cpu engine's, which has none) runs a
 * pipeline limited to the devices of `mask` (gf_pipeline.devices; 0: any). */
static inline int gf_device_runs(int device, uint32_t mask) {
    return mask == 0 || device < 0 || ((mask >> device) & 1u);
}

/* Whether a shard of `g` serves CUDA device `device`. */
static inline int gf_group_serves(const gf_group *g, int device) {
    for (uint32_t k = 0; k < g->count; k++)
        if (g->shard[k].device == device)
            return 1;
    return 0;
}

#endif

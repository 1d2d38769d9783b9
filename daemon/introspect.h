/* SPDX-License-Identifier: MIT */
/*
 * What a shard says about itself: the accounting of each answered frame
 * (counters, phases, the trace ring), the LIST, STATS and TRACE reply
 * documents (daemon/STATS.md describes every field).  It reads
 * the shard's state and changes only its statistics and trace; it calls
 * nothing that serves connections.  The shard's thread only.
 */
#ifndef GF_INTROSPECT_H
#define GF_INTROSPECT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "shard_state.h"

/* A RESULT was written to connection `conn_id`: count it, add its phases,
 * keep it for TRACE.  O(1), no allocation. */
void gf_frame_answered(gf_shard *sh, uint64_t conn_id, const gf_frame *f);

/* What one shard says of itself for STATS and TRACE, copied on its own
 * thread (gather.c carries it to the shard that answers). */
typedef struct gf_snapshot {
    int present; /* taken (a shard that has stopped is left out) */
    uint32_t shard;
    int device; /* CUDA ordinal, -1: the cpu engine */
    uint64_t now_ns, loop_idle_ns;
    uint32_t slots, slots_free, in_flight;
    uint64_t pinned_bytes;
    gf_device_info device_info;
    gf_rates rates[GF_RATE_WINDOWS];
    int gpu_ok;                          /* timed GPU frames to show (recent) */
    gf_stats stats;                      /* a copy; its pipelines its own       */
    char (*names)[GF_PIPELINE_NAME_MAX]; /* stats' pipelines' names, in order   */
    gf_trace_rec *trace;                 /* the newest records, oldest first    */
    uint32_t trace_count;
    gf_trace_rec *recent; /* STATS on a GPU with timing events:
                             the records of the last second, for
                             "gpu" over every shard of a device */
    uint32_t recent_count;
    uint64_t recent_from_ns; /* what its ring still covers of it    */
} gf_snapshot;

/* gf_snapshot_take's trace_frames for none (STATS needs no trace). */
#define GF_SNAPSHOT_NO_TRACE UINT32_MAX

/* Copies `sh`'s figures and its newest `trace_frames` trace records (0:
 * all it keeps).  Returns 0, or -1 without memory (gf_snapshot_free then). */
int gf_snapshot_take(const gf_shard *sh, gf_snapshot *snap, uint32_t trace_frames);
void gf_snapshot_free(gf_snapshot *snap);

/* The LIST, STATS and TRACE (the last `max_frames` frames) reply
 * documents, STATS and TRACE from the `n` shards' snapshots, as `sh` (the
 * shard answering) numbers the pipelines; NULL without memory.  The caller
 * owns the document. */
cJSON *gf_list_document(const gf_shard *sh);
cJSON *gf_stats_document(const gf_shard *sh, const gf_snapshot *snaps, uint32_t n);
cJSON *gf_trace_document(const gf_shard *sh, const gf_snapshot *snaps, uint32_t n,
                         uint32_t max_frames);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The trace ring: the stage timestamps of the last frames answered, for the
 * TRACE reply (a timeline people can look at) and for the GPU busy and
 * overlap fractions in STATS.  Pushing a frame is O(1) and allocates nothing;
 * the ring is allocated once at start-up.  Loop thread only.
 */
#ifndef GF_TRACE_H
#define GF_TRACE_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "slots.h"

/* One answered frame.  Times are CLOCK_MONOTONIC ns. */
typedef struct gf_trace_rec {
    uint64_t frame_id, conn_id, submission;
    uint32_t pipeline_id, slot, shard, submitted_on;
    uint32_t status;
    uint64_t in_bytes, out_bytes;
    uint64_t arrived_ns, claimed_ns, submitted_ns, done_ns, drained_ns, written_ns;
    gf_stage_times stages;
} gf_trace_rec;

typedef struct gf_trace {
    gf_trace_rec *recs; /* capacity records, oldest at (next - count) */
    uint32_t capacity, count, next;
} gf_trace;

/* GPU activity over a window (STATS.md: "gpu"). */
typedef struct gf_gpu_busy {
    uint64_t window_ns;      /* the span measured                              */
    uint64_t frames;         /* frames with a timed stage inside it            */
    double h2d, kernel, d2h; /* fraction of the window each stage ran      */
    double copy, compute;    /* any copy (either direction); any kernel    */
    double overlap;          /* at least two of H2D, kernel, D2H at once   */
} gf_gpu_busy;

/* Allocates room for `capacity` frames (0: a ring that keeps nothing).
 * Returns 0 or -ENOMEM. */
int gf_trace_init(gf_trace *t, uint32_t capacity);
void gf_trace_free(gf_trace *t);

/* Keeps a copy of `rec`, dropping the oldest when full. */
void gf_trace_push(gf_trace *t, const gf_trace_rec *rec);

/* The TRACE document's "frames" array: the last `max_frames` frames (0: all
 * kept), oldest first, times relative to `t0_ns`.  NULL when out of memory. */
cJSON *gf_trace_frames_json(const gf_trace *t, uint32_t max_frames, uint64_t t0_ns);

/* The same array as JSON text, written directly (fast: the TRACE reply's
 * bulk); malloc'd, NUL-terminated, NULL without memory. */
char *gf_trace_frames_text(const gf_trace *t, uint32_t max_frames, uint64_t t0_ns);

/* About how many bytes gf_trace_frames_text of `frames` frames makes, before
 * it is made: what a TRACE reply of them will hold for its client. */
uint64_t gf_trace_text_bytes(uint32_t frames);
/* The most frames whose text (gf_trace_text_bytes) fits in `bytes`. */
uint32_t gf_trace_frames_within(uint64_t bytes);

/*
 * Busy fractions over [now - window, now] from the kept frames' timed stage
 * intervals; the window shrinks to what the ring still covers when it has
 * wrapped.  Returns 0, or -1 when nothing is kept (capacity 0) or out of
 * memory.  Allocates a scratch array: call it for STATS, not per frame.
 */
int gf_trace_gpu_busy(const gf_trace *t, uint64_t now_ns, uint64_t window_ns, gf_gpu_busy *out);

#endif

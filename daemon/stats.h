/* SPDX-License-Identifier: MIT */
/*
 * The daemon's counters, all in one struct that each shard updates on the
 * loop thread (so plain integers suffice), and one function that turns them
 * into the STATS document (daemon/STATS.md describes every field).
 *
 * Every FRAME header accepted ends in exactly one of: answered, failed (an
 * ERROR, by reason), dropped (its client left first) or truncated (the client
 * left mid-payload); until then it is in progress.  So the counters always
 * add up.  Recording a frame is O(1) and allocates nothing.
 */
#ifndef GF_STATS_H
#define GF_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "batch_delay.h"
#include "pipeline.h"
#include "protocol.h"
#include "util.h"

/* The phases of an answered frame (STATS.md: pipelines[].phases). */
enum gf_phase {
    GF_PHASE_SLOT_WAIT,
    GF_PHASE_RECEIVE,
    GF_PHASE_H2D,
    GF_PHASE_KERNEL,
    GF_PHASE_D2H,
    GF_PHASE_COMPLETION_DELAY,
    GF_PHASE_REPLY_WRITE,
    GF_PHASE_END_TO_END,
    GF_PHASE_COUNT
};

/* Cumulative time in one phase: divide the differences of two polls. */
typedef struct gf_phase_total {
    uint64_t count;
    uint64_t ns;
} gf_phase_total;

/* Frames per submission, by bucket: 1, 2, 3-4, 5-8, ..., 33-64. */
#define GF_BATCH_BUCKETS 7
extern const uint32_t gf_batch_bounds[GF_BATCH_BUCKETS];

typedef struct gf_pipeline_stats {
    uint64_t frames; /* answered through this pipeline */
    gf_phase_total phase[GF_PHASE_COUNT];
    /* Its submissions to the engine: how many, the frames they carried, by
     * frames per submission, and the time the frames waited in their
     * slot, whole, for their batch to go (gf_stats_submitted). */
    uint64_t submissions, submitted_frames, batch_wait_ns;
    uint64_t batch_counts[GF_BATCH_BUCKETS];
    /* What one frame of its batches costs the engine, submission to
     * completion over the batch's frames, smoothed over the last few
     * (gf_stats_completed); 0 until one completed.  This shard's own: the
     * scheduler bounds the pipeline's batches by it; not in STATS, not
     * summed over shards. */
    uint64_t frame_cost_ns;
    /* Its batches' measured cost and arrivals and the last wait chosen
     * from them, for max_batch_delay_us "auto" (batch_delay.h): this
     * shard's own, like frame_cost_ns; STATS shows each shard's. */
    gf_batch_delay delay;
} gf_pipeline_stats;

/* End-to-end latency buckets: 1-2-5 steps from 1 µs to 100 s, plus one
 * bucket above the last bound. */
#define GF_LATENCY_BOUNDS 25
extern const uint64_t gf_latency_bounds_ns[GF_LATENCY_BOUNDS];

/* Samples kept for the 1 s and 10 s rates: one a second, 10 intervals. */
#define GF_RATE_SAMPLES 11

typedef struct gf_rate_sample {
    uint64_t t_ns, answered, bytes_in, bytes_out, loop_idle_ns;
} gf_rate_sample;

/* One kind of region's counts (gf_stats.regions). */
typedef struct gf_region_stats {
    uint64_t open;                /* regions mapped now (shm: pinned on the GPU engine) */
    uint64_t bytes;               /* their bytes                                         */
    uint64_t added;               /* REGION_ADD or DEVICE_REGION_ADD requests that succeeded */
    uint64_t removed;             /* REGION_REMOVE requests that succeeded              */
    uint64_t frames;              /* frames in such regions answered with a RESULT      */
    uint64_t bytes_in, bytes_out; /* their input and output bytes                       */
} gf_region_stats;
#define GF_REGION_KINDS 2

typedef struct gf_stats {
    uint64_t started_ns;                    /* when the daemon started serving       */
    uint64_t connections_open;              /* accepted and not yet closed           */
    uint64_t connections_total;             /* accepted since start                  */
    uint64_t connections_rejected;          /* closed by us after a fatal error      */
    uint64_t closed_request_timeout;        /* a begun request not in within time   */
    uint64_t closed_receive_stall;          /* a payload stalled while others waited */
    uint64_t closed_write_timeout;          /* replies unread for write_timeout_ms   */
    uint64_t closed_idle;                   /* idle for idle_timeout_ms              */
    uint64_t closed_while_waiting;          /* hung up short of a payload whose frame
                                               waited for a slot (not received)     */
    uint64_t frames_received;               /* FRAME headers accepted by the parser  */
    uint64_t frames_timed;                  /* answered with measured stage times    */
    uint64_t frames_answered;               /* RESULT replies written                */
    uint64_t frames_failed;                 /* frames answered with an ERROR         */
    uint64_t frames_dropped;                /* results dropped: client left first    */
    uint64_t frames_truncated;              /* client left before the whole payload  */
    uint64_t frames_completed;              /* frames the engine has finished        */
    uint64_t submissions;                   /* slots handed to the engine: batches   */
    uint64_t zero_copy_submissions;         /* of them, run with no copy (zero copy) */
    uint64_t graph_submissions;             /* of them, replayed from a CUDA graph   */
    uint64_t priority_submissions;          /* of them, urgent on a high-priority
                                               stream                                */
    uint64_t gathered_submissions;          /* of them, device frames gathered in    */
    uint64_t host_gathered_submissions;     /* of them, shm frames moved by a kernel */
    uint64_t pooled_batches;                /* batches sent to run in another shard's
                                               submission (pool.h)                   */
    uint64_t pooled_frames;                 /* the frames they carried               */
    uint64_t polling_ns;                    /* the loop kept awake to poll the GPU   */
    uint64_t rejected[GF_STATUS_COUNT_];    /* ERROR replies sent, by status    */
    uint64_t requests_list;                 /* LIST requests answered                */
    uint64_t requests_stats;                /* STATS requests answered               */
    uint64_t requests_trace;                /* TRACE requests answered               */
    uint64_t bytes_in;                      /* frame payload bytes received          */
    uint64_t bytes_out;                     /* result payload bytes written          */
    uint64_t backpressure_pauses;           /* reading stopped for want of a slot    */
    uint64_t class_frames[GF_CLASS_COUNT_]; /* frames admitted, by priority class */
    uint64_t class_waits[GF_CLASS_COUNT_];  /* of its pauses, by the frame's class */
    uint64_t connections_refused;           /* refused at accept (limit, fds, allow) */
    uint64_t connections_moved;             /* moved here from another shard (move.h) */
    uint64_t results_evicted; /* results moved out of their slots: the client was not reading */
    uint64_t frames_parked;   /* payloads read into memory, not a slot (conn.h) */
    /* By the kind of region (a gf_region's on_device: 0 shared memory,
     * 1 device memory): STATS' "shm" and "device_regions". */
    gf_region_stats regions[GF_REGION_KINDS];

    gf_pipeline_stats *pipelines; /* one per configured pipeline, by id    */
    size_t pipeline_count;

    uint64_t latency_counts[GF_LATENCY_BOUNDS + 1]; /* end to end, by bucket */
    uint64_t latency_sum_ns, latency_max_ns;

    gf_rate_sample samples[GF_RATE_SAMPLES]; /* ring, newest at sample_next-1 */
    unsigned sample_count, sample_next;
} gf_stats;

/* Zeroed per-pipeline totals for `count` pipelines, or NULL: allocated
 * before a reload is applied anywhere, so that applying it cannot fail. */
gf_pipeline_stats *gf_stats_pipelines_new(size_t count);

/* A reload changed the pipelines from `from` to `to`: each of `to` keeps the
 * totals of the pipeline of its name in `from`, a new name starts at zero,
 * a removed one's are dropped; `next` (gf_stats_pipelines_new(to_count))
 * becomes st's. */
void gf_stats_rekey_into(gf_stats *st, const gf_pipeline *from, size_t from_count,
                         const gf_pipeline *to, size_t to_count, gf_pipeline_stats *next);

/* A copy of `from` with its own per-pipeline totals.  Returns 0 or -ENOMEM. */
int gf_stats_copy(gf_stats *to, const gf_stats *from);

/* Adds every counter of `from` (another shard's) to `to`, whose pipelines
 * are `to_pipelines`: each pipeline's totals to the one of the same name
 * (from_names, one per from->pipeline_count).  Not the rate samples. */
void gf_stats_add(gf_stats *to, const gf_pipeline *to_pipelines, const gf_stats *from,
                  const char (*from_names)[GF_PIPELINE_NAME_MAX]);

/* Zeroes `st` and allocates per-pipeline totals.  Returns 0 or -ENOMEM. */
int gf_stats_init(gf_stats *st, size_t pipeline_count, uint64_t now_ns);

/* Frees what gf_stats_init allocated. */
void gf_stats_free(gf_stats *st);

/* A batch of `frames` frames of pipeline `pipeline_id` came back from the
 * engine `engine_ns` after its submission: its frame_cost_ns moves an
 * eighth of the way to engine_ns / frames, and its batch cost fit takes it
 * (gf_batch_delay_completed). */
void gf_stats_completed(gf_stats *st, uint32_t pipeline_id, uint32_t frames, uint64_t engine_ns);

/*
 * Records one answered frame of pipeline `pipeline_id`: adds each phase whose
 * bit is set in `phase_mask` (1u << GF_PHASE_...) and, from
 * phase_ns[GF_PHASE_END_TO_END], the latency histogram.  O(1).
 */
void gf_stats_frame_answered(gf_stats *st, uint32_t pipeline_id,
                             const uint64_t phase_ns[GF_PHASE_COUNT], unsigned phase_mask);

/* Takes a rate sample (the shard calls this once a second). */
void gf_stats_sample(gf_stats *st, uint64_t now_ns, uint64_t loop_idle_ns);

/* A submission of `frames` frames of pipeline `pipeline_id` went to the
 * engine; together they had waited `wait_ns`, whole, for it. */
void gf_stats_submitted(gf_stats *st, uint32_t pipeline_id, uint32_t frames, uint64_t wait_ns);

/*
 * The latency below which a fraction `q` (0..1) of answered frames fell,
 * interpolated linearly inside its histogram bucket and capped at the
 * largest latency seen; 0 when no frame was answered.
 */
uint64_t gf_stats_latency_quantile(const gf_stats *st, double q);

/*
 * Rates over about the last `window_ns` up to `now_ns`: from the newest
 * sample at least `window_ns` old (or the oldest there is, right after
 * start) to the counters now.  `busy` gets the loop's busy fraction, from
 * `loop_idle_ns` now.  Zeros before the first sample.
 */
void gf_stats_rates(const gf_stats *st, uint64_t window_ns, uint64_t now_ns, uint64_t loop_idle_ns,
                    double *frames_per_s, double *bytes_in_per_s, double *bytes_out_per_s,
                    double *busy);

/* Rates over the last 1 s and 10 s, and the loop's busy fraction. */
#define GF_RATE_WINDOWS 2
typedef struct gf_rates {
    double frames_per_s, bytes_in_per_s, bytes_out_per_s, busy;
} gf_rates;

/* gf_stats_rates for both windows. */
void gf_stats_window_rates(const gf_stats *st, uint64_t now_ns, uint64_t loop_idle_ns,
                           gf_rates rates[GF_RATE_WINDOWS]);

/* Adds every counter to `obj` (STATS.md): connections, frames, rejected,
 * requests, bytes, backpressure, pipelines (named from `pipelines`), latency,
 * rates (`rates`: 1 s and 10 s; every shard's added), loop. */
void gf_stats_to_json(const gf_stats *st, const gf_pipeline *pipelines, cJSON *obj, uint64_t now_ns,
                      const gf_rates rates[GF_RATE_WINDOWS], uint64_t loop_idle_ns);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * How long a pipeline's open batch waits for more frames when its
 * max_batch_delay_us is "auto" (config/README.md; docs/design.md, "Small
 * frames"): the rule, and the two measurements it reads.
 *
 * Triton (max_queue_delay_microseconds), TF Serving (batch_timeout_micros)
 * and Ray Serve make their users pick the wait by hand; Clipper adapts the
 * batch size to a latency objective.  Here the wait follows from what the
 * shard measures of the pipeline:
 *
 * - its submission cost against batch size, T(n) = a + b·n: `a` the fixed
 *   cost of one submission (copies' and launches' overheads, the
 *   completion), `b` each frame's; a least-squares fit of the batches that
 *   came back from the engine, older ones forgotten geometrically
 *   (GF_BATCH_COST_FORGET);
 * - its arrival rate λ: whole frames joining its batches, counted with an
 *   exponential decay of time constant GF_BATCH_RATE_TAU_NS.
 *
 * With C submissions on the engine at once (GF_BATCH_HOLD_IN_FLIGHT), a
 * pipeline whose batches hold n frames serves at most C·n / T(n) frames a
 * second.  The rule picks the smallest batch that keeps up with the
 * arrivals,
 *
 *     n* = ceil(λ·a / (C − λ·b)),   or max_batch_frames when λ·b ≥ C
 *
 * (no batch keeps up: the largest one serves the most), at most
 * max_batch_frames, at least 1.  A batch of fewer than n* frames waits
 * until the n*-th is due at the measured rate, (n* − 1) / λ after its first
 * frame, and goes at once when it holds n*.  A larger batch would not serve
 * more frames (the engine already keeps up) and each of its frames would
 * wait longer; a smaller one would leave the engine short of the arrivals,
 * and the frames would queue behind it instead.
 *
 * A lone client never waits: sending its next frame only after the last
 * one's result, it arrives at most once a T(1) (λ ≤ 1 / (a + b)), so
 * λ·a / (C − λ·b) < 1 and n* = 1, which its one frame fills.  Nor does a
 * pipeline not yet measured (no batch back, or no arrival rate).  The wait
 * is never more than the time the n*-th frame takes to come, and never more
 * than GF_BATCH_DELAY_US_MAX.
 *
 * Everything here runs on the loop thread of the shard whose counters hold
 * the state (stats.h).
 */
#ifndef GF_BATCH_DELAY_H
#define GF_BATCH_DELAY_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* The weight a completed batch's cost loses with each newer one: the fit
 * follows a change of load within a few dozen submissions. */
#define GF_BATCH_COST_FORGET (1.0 / 32)
/* The arrival rate's time constant: long enough to average a few hundred
 * frames of a loaded pipeline, short enough that a burst's rate fades
 * within a few of a camera's frame periods. */
#define GF_BATCH_RATE_TAU_NS (10ull * 1000 * 1000)
/* Below this variance of batch sizes (frames²) the fit cannot tell the
 * fixed cost from the per-frame one: it takes the whole cost as fixed. */
#define GF_BATCH_SIZE_VARIANCE_MIN 0.25

/* Frames by which a batch may fall short of n* and still count as keeping
 * up: a client exactly as fast as its submissions (λ = 1 / (a + b)) must
 * not wait for a second frame for want of the last bit of a double. */
#define GF_BATCH_KEEP_UP_SLACK 1e-6

/* What the rule reads (each a measurement or the batch's state now). */
typedef struct gf_batch_delay_in {
    double fixed_ns;       /* a: one submission's fixed cost (0: unmeasured)   */
    double frame_ns;       /* b: each frame's cost                             */
    double arrivals_per_s; /* λ: whole frames of the pipeline arriving, now   */
    uint32_t queued;       /* frames in the open batch                         */
    uint32_t max_frames;   /* the pipeline's max_batch_frames                  */
    uint32_t concurrency;  /* submissions the engine runs at once (C)          */
} gf_batch_delay_in;

/* What it chose. */
typedef struct gf_batch_delay_out {
    uint32_t target_frames; /* n*                                            */
    uint64_t wait_ns;       /* after the batch's first frame; 0: go at once   */
} gf_batch_delay_out;

/* The rule above: a pure function of `in`. */
gf_batch_delay_out gf_batch_delay_decide(const gf_batch_delay_in *in);

/* One pipeline's measurements and its last decision, kept with its
 * counters (gf_pipeline_stats) so that a reload keeps them by name and a
 * STATS snapshot copies them.  Zeroed: nothing measured. */
typedef struct gf_batch_delay {
    /* The cost fit's sums over completed batches, each weighted by
     * (1 − GF_BATCH_COST_FORGET)^age: weight, frames, cost, frames²,
     * frames × cost. */
    double w, sn, st, snn, snt;
    double rate_per_ns; /* arrivals a nanosecond at rate_ns, decayed     */
    uint64_t rate_ns;   /* the last arrival (CLOCK_MONOTONIC ns)         */
    /* The last decision and its inputs (STATS, pipelines[].batches.auto). */
    gf_batch_delay_in last_in;
    gf_batch_delay_out last_out;
} gf_batch_delay;

/* `frames` whole frames joined the pipeline's batches at `now_ns`. */
void gf_batch_delay_arrived(gf_batch_delay *d, uint32_t frames, uint64_t now_ns);

/* A batch of `frames` frames came back from the engine `engine_ns` after
 * its submission. */
void gf_batch_delay_completed(gf_batch_delay *d, uint32_t frames, uint64_t engine_ns);

/* The cost fit now: a and b (both 0 until a batch came back). */
void gf_batch_delay_cost(const gf_batch_delay *d, double *fixed_ns, double *frame_ns);

/* The arrival rate at `now_ns`, frames a second. */
double gf_batch_delay_rate(const gf_batch_delay *d, uint64_t now_ns);

/*
 * When an open batch of `queued` frames whose first frame was whole at
 * `first_ns` is due, by the rule on `d`'s measurements at `now_ns`
 * (CLOCK_MONOTONIC ns; at or before `now_ns`: at once).  Keeps the decision
 * and its inputs in `d` for STATS.
 */
uint64_t gf_batch_delay_due(gf_batch_delay *d, uint64_t first_ns, uint32_t queued,
                            uint32_t max_frames, uint32_t concurrency, uint64_t now_ns);

/* Adds `d`'s last decision and its inputs to `obj` (STATS.md,
 * pipelines[].batches.auto). */
void gf_batch_delay_to_json(const gf_batch_delay *d, cJSON *obj);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The "auto" batch delay (batch_delay.h): the rule and its measurements.
 * Loop thread of the shard that owns the state.
 */
#include "batch_delay.h"

#include <math.h>

#include "config.h"

gf_batch_delay_out gf_batch_delay_decide(const gf_batch_delay_in *in) {
    gf_batch_delay_out out = {.target_frames = 1, .wait_ns = 0};
    uint32_t most = in->max_frames > 0 ? in->max_frames : 1;
    double lambda = in->arrivals_per_s / 1e9; /* frames a nanosecond */
    double c = in->concurrency > 0 ? in->concurrency : 1;
    if (lambda <= 0 || in->fixed_ns + in->frame_ns <= 0)
        return out; /* nothing measured: no frame waits on a guess */
    double per_frame = lambda * in->frame_ns;
    double n = per_frame >= c
                   ? most
                   : ceil(lambda * in->fixed_ns / (c - per_frame) - GF_BATCH_KEEP_UP_SLACK);
    out.target_frames = n >= most ? most : n <= 1 ? 1 : (uint32_t)n;
    if (in->queued >= out.target_frames)
        return out;
    double wait = (out.target_frames - 1) / lambda;
    double cap = (double)GF_BATCH_DELAY_US_MAX * 1000;
    out.wait_ns = (uint64_t)(wait < cap ? wait : cap);
    return out;
}

void gf_batch_delay_arrived(gf_batch_delay *d, uint32_t frames, uint64_t now_ns) {
    double decay = 1;
    if (d->rate_ns && now_ns > d->rate_ns)
        decay = exp(-(double)(now_ns - d->rate_ns) / (double)GF_BATCH_RATE_TAU_NS);
    d->rate_per_ns = d->rate_per_ns * decay + frames / (double)GF_BATCH_RATE_TAU_NS;
    if (now_ns > d->rate_ns)
        d->rate_ns = now_ns;
}

double gf_batch_delay_rate(const gf_batch_delay *d, uint64_t now_ns) {
    double decay = 1;
    if (now_ns > d->rate_ns)
        decay = exp(-(double)(now_ns - d->rate_ns) / (double)GF_BATCH_RATE_TAU_NS);
    return d->rate_per_ns * decay * 1e9;
}

void gf_batch_delay_completed(gf_batch_delay *d, uint32_t frames, uint64_t engine_ns) {
    if (frames == 0)
        return;
    double keep = 1 - GF_BATCH_COST_FORGET, n = frames, t = (double)engine_ns;
    d->w = d->w * keep + 1;
    d->sn = d->sn * keep + n;
    d->st = d->st * keep + t;
    d->snn = d->snn * keep + n * n;
    d->snt = d->snt * keep + n * t;
}

void gf_batch_delay_cost(const gf_batch_delay *d, double *fixed_ns, double *frame_ns) {
    *fixed_ns = *frame_ns = 0;
    if (d->w <= 0)
        return;
    double mean_n = d->sn / d->w, mean_t = d->st / d->w;
    double var = d->snn / d->w - mean_n * mean_n;
    if (var < GF_BATCH_SIZE_VARIANCE_MIN) {
        *fixed_ns = mean_t; /* one batch size: its whole cost is taken as fixed */
        return;
    }
    double b = (d->snt / d->w - mean_n * mean_t) / var;
    double a = mean_t - b * mean_n;
    if (b < 0) { /* noise: larger batches measured cheaper */
        b = 0;
        a = mean_t;
    } else if (a < 0) { /* no fixed cost to share out */
        a = 0;
        b = mean_t / mean_n;
    }
    *fixed_ns = a;
    *frame_ns = b;
}

uint64_t gf_batch_delay_due(gf_batch_delay *d, uint64_t first_ns, uint32_t queued,
                            uint32_t max_frames, uint32_t concurrency, uint64_t now_ns) {
    gf_batch_delay_in in = {.arrivals_per_s = gf_batch_delay_rate(d, now_ns),
                            .queued = queued,
                            .max_frames = max_frames,
                            .concurrency = concurrency};
    gf_batch_delay_cost(d, &in.fixed_ns, &in.frame_ns);
    gf_batch_delay_out out = gf_batch_delay_decide(&in);
    d->last_in = in;
    d->last_out = out;
    return first_ns + out.wait_ns;
}

void gf_batch_delay_to_json(const gf_batch_delay *d, cJSON *obj) {
    cJSON_AddNumberToObject(obj, "wait_ns", (double)d->last_out.wait_ns);
    cJSON_AddNumberToObject(obj, "target_frames", d->last_out.target_frames);
    cJSON_AddNumberToObject(obj, "queued_frames", d->last_in.queued);
    cJSON_AddNumberToObject(obj, "fixed_cost_ns", round(d->last_in.fixed_ns));
    cJSON_AddNumberToObject(obj, "frame_cost_ns", round(d->last_in.frame_ns));
    cJSON_AddNumberToObject(obj, "arrivals_per_s", round(d->last_in.arrivals_per_s));
}

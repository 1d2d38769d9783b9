/* SPDX-License-Identifier: MIT */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* 1-2-5 steps: wide enough for a 4 KiB echo (tens of µs) and a stuck frame. */
const uint64_t gf_latency_bounds_ns[GF_LATENCY_BOUNDS] = {
    1000,        2000,        5000,        10000,        20000,      50000,      100000,
    200000,      500000,      1000000,     2000000,      5000000,    10000000,   20000000,
    50000000,    100000000,   200000000,   500000000,    1000000000, 2000000000, 5000000000,
    10000000000, 20000000000, 50000000000, 100000000000,
};

static const char *const phase_names[GF_PHASE_COUNT] = {
    "slot_wait", "receive", "h2d", "kernel", "d2h", "completion_delay", "reply_write", "end_to_end",
};

int gf_stats_init(gf_stats *st, size_t pipeline_count, uint64_t now_ns) {
    memset(st, 0, sizeof *st);
    st->pipelines = calloc(pipeline_count ? pipeline_count : 1, sizeof *st->pipelines);
    if (!st->pipelines)
        return -ENOMEM;
    st->pipeline_count = pipeline_count;
    st->started_ns = now_ns;
    return 0;
}

gf_pipeline_stats *gf_stats_pipelines_new(size_t count) {
    return calloc(count ? count : 1, sizeof(gf_pipeline_stats));
}

void gf_stats_rekey_into(gf_stats *st, const gf_pipeline *from, size_t from_count,
                         const gf_pipeline *to, size_t to_count, gf_pipeline_stats *next) {
    for (size_t i = 0; i < to_count; i++)
        for (size_t j = 0; j < from_count && j < st->pipeline_count; j++)
            if (strcmp(to[i].name, from[j].name) == 0)
                next[i] = st->pipelines[j];
    free(st->pipelines);
    st->pipelines = next;
    st->pipeline_count = to_count;
}

int gf_stats_copy(gf_stats *to, const gf_stats *from) {
    *to = *from;
    to->pipelines = gf_stats_pipelines_new(from->pipeline_count);
    if (!to->pipelines)
        return -ENOMEM;
    memcpy(to->pipelines, from->pipelines, from->pipeline_count * sizeof *to->pipelines);
    return 0;
}

void gf_stats_add(gf_stats *to, const gf_pipeline *to_pipelines, const gf_stats *from,
                  const char (*from_names)[GF_PIPELINE_NAME_MAX]) {
#define ADD(f) to->f += from->f
    ADD(connections_open);
    ADD(connections_total);
    ADD(connections_rejected);
    ADD(closed_request_timeout);
    ADD(closed_receive_stall);
    ADD(closed_write_timeout);
    ADD(closed_idle);
    ADD(closed_while_waiting);
    ADD(frames_received);
    ADD(frames_timed);
    ADD(frames_answered);
    ADD(frames_failed);
    ADD(frames_dropped);
    ADD(frames_truncated);
    ADD(frames_completed);
    ADD(submissions);
    ADD(zero_copy_submissions);
    ADD(graph_submissions);
    ADD(priority_submissions);
    ADD(gathered_submissions);
    ADD(host_gathered_submissions);
    ADD(pooled_batches);
    ADD(pooled_frames);
    ADD(polling_ns);
    for (unsigned i = 0; i < GF_STATUS_COUNT_; i++)
        ADD(rejected[i]);
    ADD(requests_list);
    ADD(requests_stats);
    ADD(requests_trace);
    ADD(bytes_in);
    ADD(bytes_out);
    ADD(backpressure_pauses);
    for (unsigned i = 0; i < GF_CLASS_COUNT_; i++) {
        ADD(class_frames[i]);
        ADD(class_waits[i]);
    }
    ADD(connections_refused);
    ADD(connections_moved);
    ADD(results_evicted);
    ADD(frames_parked);
    for (unsigned k = 0; k < GF_REGION_KINDS; k++) {
        ADD(regions[k].open);
        ADD(regions[k].bytes);
        ADD(regions[k].added);
        ADD(regions[k].removed);
        ADD(regions[k].frames);
        ADD(regions[k].bytes_in);
        ADD(regions[k].bytes_out);
    }
    for (unsigned b = 0; b <= GF_LATENCY_BOUNDS; b++)
        ADD(latency_counts[b]);
    ADD(latency_sum_ns);
#undef ADD
    if (from->latency_max_ns > to->latency_max_ns)
        to->latency_max_ns = from->latency_max_ns;
    if (from->started_ns < to->started_ns)
        to->started_ns = from->started_ns;
    /* A shard that has not applied a reload yet may number them otherwise:
     * pipelines are matched by name. */
    for (size_t j = 0; j < from->pipeline_count; j++)
        for (size_t i = 0; i < to->pipeline_count; i++) {
            if (strcmp(to_pipelines[i].name, from_names[j]) != 0)
                continue;
            gf_pipeline_stats *t = &to->pipelines[i];
            const gf_pipeline_stats *f = &from->pipelines[j];
            t->frames += f->frames;
            for (unsigned k = 0; k < GF_PHASE_COUNT; k++) {
                t->phase[k].count += f->phase[k].count;
                t->phase[k].ns += f->phase[k].ns;
            }
            t->submissions += f->submissions;
            t->submitted_frames += f->submitted_frames;
            t->batch_wait_ns += f->batch_wait_ns;
            for (unsigned k = 0; k < GF_BATCH_BUCKETS; k++)
                t->batch_counts[k] += f->batch_counts[k];
            break;
        }
}

void gf_stats_free(gf_stats *st) {
    free(st->pipelines);
    st->pipelines = NULL;
}

const uint32_t gf_batch_bounds[GF_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64};

void gf_stats_submitted(gf_stats *st, uint32_t pipeline_id, uint32_t frames, uint64_t wait_ns) {
    if (pipeline_id >= st->pipeline_count || frames == 0)
        return;
    gf_pipeline_stats *p = &st->pipelines[pipeline_id];
    unsigned b = 0;
    while (b + 1 < GF_BATCH_BUCKETS && frames > gf_batch_bounds[b])
        b++;
    p->submissions++;
    p->submitted_frames += frames;
    p->batch_wait_ns += wait_ns;
    p->batch_counts[b]++;
}

void gf_stats_completed(gf_stats *st, uint32_t pipeline_id, uint32_t frames, uint64_t engine_ns) {
    if (pipeline_id >= st->pipeline_count || frames == 0)
        return;
    uint64_t *cost = &st->pipelines[pipeline_id].frame_cost_ns, one = engine_ns / frames;
    *cost = *cost ? *cost - *cost / 8 + one / 8 : one;
    gf_batch_delay_completed(&st->pipelines[pipeline_id].delay, frames, engine_ns);
}

void gf_stats_frame_answered(gf_stats *st, uint32_t pipeline_id,
                             const uint64_t phase_ns[GF_PHASE_COUNT], unsigned phase_mask) {
    if (pipeline_id < st->pipeline_count) {
        gf_pipeline_stats *p = &st->pipelines[pipeline_id];
        p->frames++;
        for (unsigned i = 0; i < GF_PHASE_COUNT; i++) {
            if (phase_mask & (1u << i)) {
                p->phase[i].count++;
                p->phase[i].ns += phase_ns[i];
            }
        }
    }
    uint64_t e2e = phase_ns[GF_PHASE_END_TO_END];
    unsigned b = 0;
    while (b < GF_LATENCY_BOUNDS && e2e > gf_latency_bounds_ns[b])
        b++;
    st->latency_counts[b]++;
    st->latency_sum_ns += e2e;
    if (e2e > st->latency_max_ns)
        st->latency_max_ns = e2e;
}

void gf_stats_sample(gf_stats *st, uint64_t now_ns, uint64_t loop_idle_ns) {
    gf_rate_sample *s = &st->samples[st->sample_next];
    s->t_ns = now_ns;
    s->answered = st->frames_answered;
    s->bytes_in = st->bytes_in;
    s->bytes_out = st->bytes_out;
    s->loop_idle_ns = loop_idle_ns;
    st->sample_next = (st->sample_next + 1) % GF_RATE_SAMPLES;
    if (st->sample_count < GF_RATE_SAMPLES)
        st->sample_count++;
}

void gf_stats_rates(const gf_stats *st, uint64_t window_ns, uint64_t now_ns, uint64_t loop_idle_ns,
                    double *frames_per_s, double *bytes_in_per_s, double *bytes_out_per_s,
                    double *busy) {
    *frames_per_s = *bytes_in_per_s = *bytes_out_per_s = *busy = 0.0;
    if (st->sample_count == 0)
        return;
    /* Newest first: the first sample old enough, else the oldest kept. */
    const gf_rate_sample *then = NULL;
    for (unsigned k = 1; k <= st->sample_count; k++) {
        then = &st->samples[(st->sample_next + GF_RATE_SAMPLES - k) % GF_RATE_SAMPLES];
        if (now_ns - then->t_ns >= window_ns)
            break;
    }
    if (now_ns <= then->t_ns)
        return;
    double secs = (double)(now_ns - then->t_ns) / 1e9;
    *frames_per_s = (double)(st->frames_answered - then->answered) / secs;
    *bytes_in_per_s = (double)(st->bytes_in - then->bytes_in) / secs;
    *bytes_out_per_s = (double)(st->bytes_out - then->bytes_out) / secs;
    double idle = (double)(loop_idle_ns - then->loop_idle_ns) / 1e9;
    *busy = idle >= secs ? 0.0 : 1.0 - idle / secs;
}

uint64_t gf_stats_latency_quantile(const gf_stats *st, double q) {
    uint64_t total = 0;
    for (unsigned b = 0; b <= GF_LATENCY_BOUNDS; b++)
        total += st->latency_counts[b];
    if (total == 0)
        return 0;
    double rank = q * (double)total, seen = 0;
    for (unsigned b = 0; b <= GF_LATENCY_BOUNDS; b++) {
        uint64_t n = st->latency_counts[b];
        if (n == 0 || seen + (double)n < rank) {
            seen += (double)n;
            continue;
        }
        double lo = b == 0 ? 0.0 : (double)gf_latency_bounds_ns[b - 1];
        double hi =
            b == GF_LATENCY_BOUNDS ? (double)st->latency_max_ns : (double)gf_latency_bounds_ns[b];
        double v = lo + (hi - lo) * ((rank - seen) / (double)n);
        return v > (double)st->latency_max_ns ? st->latency_max_ns : (uint64_t)v;
    }
    return st->latency_max_ns;
}

static void add_u64(cJSON *obj, const char *key, uint64_t v) {
    cJSON_AddNumberToObject(obj, key, (double)v);
}

/* STATS' "pipelines" array: each pipeline's frames and time per phase. */
static void add_pipelines(const gf_stats *st, const gf_pipeline *pipelines, cJSON *obj) {
    cJSON *pl = cJSON_AddArrayToObject(obj, "pipelines");
    for (size_t i = 0; i < st->pipeline_count; i++) {
        const gf_pipeline_stats *ps = &st->pipelines[i];
        cJSON *p = cJSON_CreateObject();
        cJSON_AddItemToArray(pl, p);
        add_u64(p, "id", i);
        cJSON_AddStringToObject(p, "name", pipelines[i].name);
        char kinds[GF_PIPELINE_NAME_MAX * GF_STAGES_MAX];
        cJSON_AddStringToObject(p, "kind",
                                gf_pipeline_kinds_text(&pipelines[i], kinds, sizeof kinds));
        add_u64(p, "frames", ps->frames);
        cJSON *bt = cJSON_AddObjectToObject(p, "batches");
        add_u64(bt, "submissions", ps->submissions);
        add_u64(bt, "frames", ps->submitted_frames);
        cJSON_AddNumberToObject(
            bt, "mean",
            ps->submissions ? (double)ps->submitted_frames / (double)ps->submissions : 0.0);
        cJSON *bb = cJSON_AddArrayToObject(bt, "bounds");
        cJSON *bc = cJSON_AddArrayToObject(bt, "counts");
        for (unsigned k = 0; k < GF_BATCH_BUCKETS; k++) {
            cJSON_AddItemToArray(bb, cJSON_CreateNumber(gf_batch_bounds[k]));
            cJSON_AddItemToArray(bc, cJSON_CreateNumber((double)ps->batch_counts[k]));
        }
        add_u64(bt, "wait_ns", ps->batch_wait_ns);
        if (pipelines[i].max_batch_delay_us == GF_BATCH_DELAY_AUTO)
            cJSON_AddStringToObject(bt, "delay_us", "auto");
        else
            add_u64(bt, "delay_us", pipelines[i].max_batch_delay_us);
        cJSON *ph = cJSON_AddObjectToObject(p, "phases");
        for (unsigned k = 0; k < GF_PHASE_COUNT; k++) {
            cJSON *one = cJSON_AddObjectToObject(ph, phase_names[k]);
            add_u64(one, "count", ps->phase[k].count);
            add_u64(one, "ns", ps->phase[k].ns);
        }
    }
}

/* STATS' "latency" object: the histogram, its totals and quantiles. */
static void add_latency(const gf_stats *st, cJSON *obj) {
    cJSON *lat = cJSON_AddObjectToObject(obj, "latency");
    cJSON *bounds = cJSON_AddArrayToObject(lat, "bounds_ns");
    cJSON *counts = cJSON_AddArrayToObject(lat, "counts");
    uint64_t total = 0;
    for (unsigned i = 0; i <= GF_LATENCY_BOUNDS; i++) {
        if (i < GF_LATENCY_BOUNDS)
            cJSON_AddItemToArray(bounds, cJSON_CreateNumber((double)gf_latency_bounds_ns[i]));
        cJSON_AddItemToArray(counts, cJSON_CreateNumber((double)st->latency_counts[i]));
        total += st->latency_counts[i];
    }
    add_u64(lat, "count", total);
    add_u64(lat, "sum_ns", st->latency_sum_ns);
    add_u64(lat, "max_ns", st->latency_max_ns);
    add_u64(lat, "p50_ns", gf_stats_latency_quantile(st, 0.50));
    add_u64(lat, "p90_ns", gf_stats_latency_quantile(st, 0.90));
    add_u64(lat, "p99_ns", gf_stats_latency_quantile(st, 0.99));
    add_u64(lat, "p999_ns", gf_stats_latency_quantile(st, 0.999));
}

static void add_rates(cJSON *rates, const char *key, const gf_rates *r) {
    cJSON *o = cJSON_AddObjectToObject(rates, key);
    cJSON_AddNumberToObject(o, "frames_per_s", r->frames_per_s);
    cJSON_AddNumberToObject(o, "bytes_in_per_s", r->bytes_in_per_s);
    cJSON_AddNumberToObject(o, "bytes_out_per_s", r->bytes_out_per_s);
}

void gf_stats_window_rates(const gf_stats *st, uint64_t now_ns, uint64_t loop_idle_ns,
                           gf_rates rates[GF_RATE_WINDOWS]) {
    static const uint64_t window_ns[GF_RATE_WINDOWS] = {1000000000ull, 10000000000ull};
    for (unsigned w = 0; w < GF_RATE_WINDOWS; w++)
        gf_stats_rates(st, window_ns[w], now_ns, loop_idle_ns, &rates[w].frames_per_s,
                       &rates[w].bytes_in_per_s, &rates[w].bytes_out_per_s, &rates[w].busy);
}

void gf_stats_to_json(const gf_stats *st, const gf_pipeline *pipelines, cJSON *obj, uint64_t now_ns,
                      const gf_rates rates[GF_RATE_WINDOWS], uint64_t loop_idle_ns) {
    add_u64(obj, "uptime_ns", now_ns - st->started_ns);
    cJSON *c = cJSON_AddObjectToObject(obj, "connections");
    add_u64(c, "open", st->connections_open);
    add_u64(c, "total", st->connections_total);
    add_u64(c, "rejected", st->connections_rejected);
    add_u64(c, "closed_request_timeout", st->closed_request_timeout);
    add_u64(c, "closed_receive_stall", st->closed_receive_stall);
    add_u64(c, "closed_write_timeout", st->closed_write_timeout);
    add_u64(c, "closed_idle", st->closed_idle);
    add_u64(c, "closed_while_waiting", st->closed_while_waiting);
    add_u64(c, "refused", st->connections_refused);
    add_u64(c, "moved", st->connections_moved);

    cJSON *f = cJSON_AddObjectToObject(obj, "frames");
    add_u64(f, "received", st->frames_received);
    add_u64(f, "answered", st->frames_answered);
    add_u64(f, "failed", st->frames_failed);
    add_u64(f, "dropped", st->frames_dropped);
    add_u64(f, "truncated", st->frames_truncated);
    add_u64(f, "timed", st->frames_timed);
    add_u64(f, "results_evicted", st->results_evicted);
    add_u64(f, "parked", st->frames_parked);
    add_u64(f, "in_progress",
            st->frames_received - st->frames_answered - st->frames_failed - st->frames_dropped -
                st->frames_truncated);
    cJSON *r = cJSON_AddObjectToObject(obj, "rejected");
    for (uint32_t s = 1; s < GF_STATUS_COUNT_; s++)
        add_u64(r, gf_status_name(s), st->rejected[s]);
    cJSON *q = cJSON_AddObjectToObject(obj, "requests");
    add_u64(q, "list", st->requests_list);
    add_u64(q, "stats", st->requests_stats);
    add_u64(q, "trace", st->requests_trace);
    cJSON *b = cJSON_AddObjectToObject(obj, "bytes");
    add_u64(b, "in", st->bytes_in);
    add_u64(b, "out", st->bytes_out);
    add_u64(obj, "backpressure_pauses", st->backpressure_pauses);
    cJSON *pr = cJSON_AddObjectToObject(obj, "priorities");
    for (unsigned k = GF_CLASS_REALTIME; k < GF_CLASS_COUNT_; k++) {
        cJSON *o = cJSON_AddObjectToObject(pr, gf_priority_class_name(k));
        add_u64(o, "frames", st->class_frames[k]);
        add_u64(o, "waits", st->class_waits[k]);
    }
    static const char *const region_keys[GF_REGION_KINDS] = {"shm", "device_regions"};
    for (unsigned k = 0; k < GF_REGION_KINDS; k++) {
        const gf_region_stats *rs = &st->regions[k];
        cJSON *o = cJSON_AddObjectToObject(obj, region_keys[k]);
        add_u64(o, "regions_open", rs->open);
        add_u64(o, "region_bytes", rs->bytes);
        add_u64(o, "regions_added", rs->added);
        add_u64(o, "regions_removed", rs->removed);
        add_u64(o, "frames", rs->frames);
        add_u64(o, "bytes_in", rs->bytes_in);
        add_u64(o, "bytes_out", rs->bytes_out);
    }

    add_pipelines(st, pipelines, obj);
    add_latency(st, obj);

    cJSON *r_obj = cJSON_AddObjectToObject(obj, "rates");
    add_rates(r_obj, "1s", &rates[0]);
    add_rates(r_obj, "10s", &rates[1]);

    cJSON *loop = cJSON_AddObjectToObject(obj, "loop");
    cJSON_AddNumberToObject(loop, "utilisation_1s", rates[0].busy);
    cJSON_AddNumberToObject(loop, "utilisation_10s", rates[1].busy);
    add_u64(loop, "idle_ns", loop_idle_ns);
    add_u64(loop, "polling_ns", st->polling_ns);
}

/* SPDX-License-Identifier: MIT */
/*
 * What a shard says about itself: the accounting of each answered frame
 * (counters, phases, the trace ring), the LIST, STATS and TRACE reply
 * documents (daemon/STATS.md describes every field) (introspect.h).
 */
#include "introspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "loopprof.h"

/* The span over which STATS reports GPU busy and overlap fractions. */
#define GF_GPU_WINDOW_NS 1000000000ull

/*
 * A RESULT was written: count it, add its phases (STATS.md) and keep its
 * stage times for TRACE.  O(1), no allocation.
 */
void gf_frame_answered(gf_shard *sh, uint64_t conn_id, const gf_frame *s) {
    int prof = gf_prof_enter(GF_PROF_STATS);
    uint64_t written = gf_now_ns();
    const gf_stage_times *t = &s->stages;
    uint64_t ph[GF_PHASE_COUNT] = {0};
    unsigned mask = (1u << GF_PHASE_SLOT_WAIT) | (1u << GF_PHASE_RECEIVE) |
                    (1u << GF_PHASE_COMPLETION_DELAY) | (1u << GF_PHASE_REPLY_WRITE) |
                    (1u << GF_PHASE_END_TO_END);
    ph[GF_PHASE_SLOT_WAIT] = s->claimed_ns - s->arrived_ns;
    ph[GF_PHASE_RECEIVE] = s->submitted_ns - s->claimed_ns;
    if (t->timed) {
        ph[GF_PHASE_H2D] = t->h2d_end_ns - t->h2d_begin_ns;
        ph[GF_PHASE_KERNEL] = t->kernel_end_ns - t->kernel_begin_ns;
        ph[GF_PHASE_D2H] = t->d2h_end_ns - t->d2h_begin_ns;
        mask |= (1u << GF_PHASE_H2D) | (1u << GF_PHASE_KERNEL) | (1u << GF_PHASE_D2H);
        sh->stats.frames_timed++;
    }
    ph[GF_PHASE_COMPLETION_DELAY] =
        s->drained_ns > t->gpu_done_ns ? s->drained_ns - t->gpu_done_ns : 0;
    ph[GF_PHASE_REPLY_WRITE] = written - s->drained_ns;
    ph[GF_PHASE_END_TO_END] = written - s->arrived_ns;
    sh->stats.frames_answered++;
    sh->stats.bytes_out += s->out_bytes;
    if (s->region) {
        gf_region_stats *k = &sh->stats.regions[s->on_device];
        k->frames++;
        k->bytes_in += s->in_bytes;
        k->bytes_out += s->out_bytes;
    }
    /* Under the pipeline it ran as, found by name: a reload may have moved
     * it; one a reload removed has no totals left to add to. */
    uint32_t id = gf_config_pipeline_id(sh->cfg, s->pipeline_id, s->pipeline.name);
    if (id < sh->cfg->pipeline_count)
        gf_stats_frame_answered(&sh->stats, id, ph, mask);
    gf_trace_rec rec = {.frame_id = s->frame_id,
                        .conn_id = conn_id,
                        .submission = s->submission,
                        .pipeline_id = s->pipeline_id,
                        .slot = s->slot->index,
                        .shard = sh->index,
                        .submitted_on = s->submitted_on,
                        .status = GF_OK,
                        .in_bytes = s->in_bytes,
                        .out_bytes = s->out_bytes,
                        .arrived_ns = s->arrived_ns,
                        .claimed_ns = s->claimed_ns,
                        .submitted_ns = s->submitted_ns,
                        .done_ns = s->done_ns,
                        .drained_ns = s->drained_ns,
                        .written_ns = written,
                        .stages = *t};
    gf_trace_push(&sh->trace, &rec);
    gf_prof_leave(prof);
}

cJSON *gf_list_document(const gf_shard *sh) {
    cJSON *doc = gf_pipelines_to_json(sh->cfg->pipelines, sh->cfg->pipeline_count);
    /* So that a client can size its frames (and shared memory) before it
     * sends one the daemon refuses. */
    if (doc != NULL &&
        !cJSON_AddNumberToObject(doc, "max_frame_bytes", (double)sh->cfg->max_frame_bytes)) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* STATS's "device": what the engine runs on. */
static void add_device(cJSON *doc, const gf_device_info *d) {
    cJSON *dev = cJSON_AddObjectToObject(doc, "device");
    cJSON_AddStringToObject(dev, "name", d->name);
    if (!d->is_gpu) {
        cJSON_AddNumberToObject(dev, "threads", d->threads);
        return;
    }
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    cJSON_AddStringToObject(dev, "compute_capability", cc);
    cJSON_AddNumberToObject(dev, "sm_count", d->sm_count);
    cJSON_AddNumberToObject(dev, "memory_bytes", (double)d->memory_bytes);
    cJSON_AddStringToObject(dev, "pci_bus_id", d->pci_bus_id);
    /* The CUDA runtime does not report the PCIe link. */
    cJSON_AddNullToObject(dev, "pcie_generation");
    cJSON_AddNullToObject(dev, "pcie_width");
}

/* The trace records of the last GF_GPU_WINDOW_NS, oldest first, and from
 * when the ring covers that window. */
static int take_recent(const gf_shard *sh, gf_snapshot *snap) {
    const gf_trace *t = &sh->trace;
    uint64_t from = snap->now_ns > GF_GPU_WINDOW_NS ? snap->now_ns - GF_GPU_WINDOW_NS : 0;
    uint32_t n = 0;
    while (n < t->count &&
           t->recs[(t->next + t->capacity - 1 - n) % t->capacity].submitted_ns >= from)
        n++;
    if (t->count == t->capacity && n == t->count && t->count > 0 &&
        t->recs[t->next % t->capacity].submitted_ns > from)
        from = t->recs[t->next % t->capacity].submitted_ns; /* older ones fell out */
    snap->recent_from_ns = from;
    if (n == 0)
        return 0;
    if (!(snap->recent = malloc(n * sizeof *snap->recent)))
        return -1;
    for (uint32_t i = 0; i < n; i++)
        snap->recent[i] = t->recs[(t->next + t->capacity - n + i) % t->capacity];
    snap->recent_count = n;
    return 0;
}

int gf_snapshot_take(const gf_shard *sh, gf_snapshot *snap, uint32_t trace_frames) {
    GF_SHARD_OWNED(sh);
    memset(snap, 0, sizeof *snap);
    snap->present = 1;
    snap->shard = sh->index;
    snap->device = sh->self->device;
    snap->now_ns = gf_now_ns();
    snap->loop_idle_ns = uv_metrics_idle_time(sh->loop);
    snap->slots = sh->sched.ring.count;
    snap->slots_free = sh->sched.ring.free_count;
    snap->in_flight = sh->sched.in_flight;
    snap->pinned_bytes = sh->engine->pinned_bytes;
    snap->device_info = sh->engine->device;
    /* Timed frames to show: none on the CPU engine or without timing events. */
    snap->gpu_ok = sh->engine->device.is_gpu && sh->cfg->timing_events;
    if (snap->gpu_ok && take_recent(sh, snap) < 0)
        return -1;
    gf_stats_window_rates(&sh->stats, snap->now_ns, snap->loop_idle_ns, snap->rates);
    if (gf_stats_copy(&snap->stats, &sh->stats) < 0)
        return -1;
    snap->names =
        calloc(sh->stats.pipeline_count ? sh->stats.pipeline_count : 1, sizeof *snap->names);
    if (!snap->names)
        return -1;
    for (size_t i = 0; i < sh->stats.pipeline_count && i < sh->cfg->pipeline_count; i++)
        memcpy(snap->names[i], sh->cfg->pipelines[i].name, sizeof snap->names[i]);
    /* The newest trace_frames records, oldest first. */
    const gf_trace *t = &sh->trace;
    uint32_t n = trace_frames == 0 || trace_frames > t->count ? t->count : trace_frames;
    /* One shard answers from its own ring, in place (gf_trace_document). */
    if (trace_frames == GF_SNAPSHOT_NO_TRACE || sh->group->count == 1)
        n = 0;
    if (n > 0 && !(snap->trace = malloc(n * sizeof *snap->trace)))
        return -1;
    for (uint32_t i = 0; i < n; i++)
        snap->trace[i] = t->recs[(t->next + t->capacity - n + i) % t->capacity];
    snap->trace_count = n;
    return 0;
}

void gf_snapshot_free(gf_snapshot *snap) {
    gf_stats_free(&snap->stats);
    free(snap->names);
    free(snap->trace);
    free(snap->recent);
    snap->names = NULL;
    snap->trace = NULL;
    snap->recent = NULL;
}

static void add_gpu(cJSON *obj, const gf_gpu_busy *busy, int ok) {
    if (!ok) {
        cJSON_AddNullToObject(obj, "gpu");
        return;
    }
    cJSON *g = cJSON_AddObjectToObject(obj, "gpu");
    cJSON_AddNumberToObject(g, "window_ns", (double)busy->window_ns);
    cJSON_AddNumberToObject(g, "frames", (double)busy->frames);
    cJSON_AddNumberToObject(g, "h2d_busy", busy->h2d);
    cJSON_AddNumberToObject(g, "kernel_busy", busy->kernel);
    cJSON_AddNumberToObject(g, "d2h_busy", busy->d2h);
    cJSON_AddNumberToObject(g, "copy_busy", busy->copy);
    cJSON_AddNumberToObject(g, "compute_busy", busy->compute);
    cJSON_AddNumberToObject(g, "overlap", busy->overlap);
}

/* STATS's "slots": every shard's together. */
static void add_slots(cJSON *doc, const gf_shard *sh, const gf_snapshot *snaps, uint32_t n) {
    uint64_t count = 0, free_count = 0, in_flight = 0;
    for (uint32_t k = 0; k < n; k++)
        if (snaps[k].present) {
            count += snaps[k].slots;
            free_count += snaps[k].slots_free;
            in_flight += snaps[k].in_flight;
        }
    cJSON *slots = cJSON_AddObjectToObject(doc, "slots");
    cJSON_AddNumberToObject(slots, "count", (double)count);
    cJSON_AddNumberToObject(slots, "free", (double)free_count);
    cJSON_AddNumberToObject(slots, "in_flight", (double)in_flight);
    cJSON_AddNumberToObject(slots, "per_shard", sh->sched.ring.count);
    cJSON_AddNumberToObject(slots, "in_bytes", (double)sh->sched.ring.in_capacity_bytes);
    cJSON_AddNumberToObject(slots, "out_bytes", (double)sh->sched.ring.out_capacity_bytes);
}

static int timed_busy(const gf_snapshot *snaps, uint32_t n, int device, uint32_t shard,
                      uint64_t now, gf_gpu_busy *busy);

/* STATS's "shards": each one's own figures. */
static void add_shards(cJSON *doc, const gf_snapshot *snaps, uint32_t n, uint64_t now) {
    cJSON *arr = cJSON_AddArrayToObject(doc, "shards");
    for (uint32_t k = 0; k < n; k++) {
        const gf_snapshot *s = &snaps[k];
        if (!s->present)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "shard", s->shard);
        if (s->device >= 0)
            cJSON_AddNumberToObject(o, "device", s->device);
        else
            cJSON_AddNullToObject(o, "device");
        cJSON_AddNumberToObject(o, "connections", (double)s->stats.connections_open);
        cJSON_AddNumberToObject(o, "slots_busy", s->slots - s->slots_free);
        cJSON_AddNumberToObject(o, "in_flight", s->in_flight);
        cJSON_AddNumberToObject(o, "frames_answered", (double)s->stats.frames_answered);
        cJSON_AddNumberToObject(o, "frames_failed", (double)s->stats.frames_failed);
        cJSON_AddNumberToObject(o, "submissions", (double)s->stats.submissions);
        cJSON_AddNumberToObject(o, "frames_per_s", s->rates[0].frames_per_s);
        cJSON_AddNumberToObject(o, "bytes_in_per_s", s->rates[0].bytes_in_per_s);
        cJSON_AddNumberToObject(o, "loop_utilisation_1s", s->rates[0].busy);
        gf_gpu_busy busy;
        add_gpu(o, &busy, timed_busy(snaps, n, s->device, s->shard, now, &busy) == 0);
    }
}

/* Each "auto" pipeline's pipelines[].batches.auto: every shard's last
 * wait and its inputs (batch_delay.h), found by the pipeline's name. */
static void add_batch_delays(cJSON *doc, const gf_shard *sh, const gf_snapshot *snaps, uint32_t n) {
    cJSON *pl = cJSON_GetObjectItem(doc, "pipelines");
    for (size_t i = 0; i < sh->cfg->pipeline_count; i++) {
        const gf_pipeline *p = &sh->cfg->pipelines[i];
        cJSON *bt = cJSON_GetObjectItem(cJSON_GetArrayItem(pl, (int)i), "batches");
        if (p->max_batch_delay_us != GF_BATCH_DELAY_AUTO || bt == NULL)
            continue;
        cJSON *arr = cJSON_AddArrayToObject(bt, "auto");
        for (uint32_t k = 0; k < n; k++) {
            const gf_snapshot *s = &snaps[k];
            for (size_t j = 0; s->present && j < s->stats.pipeline_count; j++) {
                if (strcmp(s->names[j], p->name) != 0)
                    continue;
                cJSON *o = cJSON_CreateObject();
                cJSON_AddItemToArray(arr, o);
                cJSON_AddNumberToObject(o, "shard", s->shard);
                gf_batch_delay_to_json(&s->stats.pipelines[j].delay, o);
            }
        }
    }
}

/* Every shard of a device (timed_busy). */
#define GF_ALL_SHARDS UINT32_MAX

/* Whether `s` has timed frames of `device` and is `shard` (or any). */
static int timed_of(const gf_snapshot *s, int device, uint32_t shard) {
    return s->present && s->device == device && s->gpu_ok &&
           (shard == GF_ALL_SHARDS || s->shard == shard);
}

/* GPU busy and overlap over the last second from the timed frames of shard
 * `shard` of `device`, or of every shard on it (GF_ALL_SHARDS), merged:
 * shards share the device's copy engines and SMs.  Returns 0, or -1 when
 * none has timed frames to show. */
static int timed_busy(const gf_snapshot *snaps, uint32_t n, int device, uint32_t shard,
                      uint64_t now, gf_gpu_busy *busy) {
    uint32_t total = 0;
    uint64_t from = 0;
    int any = 0;
    for (uint32_t k = 0; k < n; k++)
        if (timed_of(&snaps[k], device, shard)) {
            any = 1;
            total += snaps[k].recent_count;
            from = snaps[k].recent_from_ns > from ? snaps[k].recent_from_ns : from;
        }
    gf_trace merged;
    /* One more than the records: a full ring would narrow the window. */
    if (!any || gf_trace_init(&merged, total + 1) < 0)
        return -1;
    for (uint32_t k = 0; k < n; k++)
        if (timed_of(&snaps[k], device, shard))
            for (uint32_t i = 0; i < snaps[k].recent_count; i++)
                gf_trace_push(&merged, &snaps[k].recent[i]);
    int rc = gf_trace_gpu_busy(&merged, now, now > from ? now - from : 0, busy);
    gf_trace_free(&merged);
    return rc;
}

/* STATS's "devices": each device the shards run on, with its shards' totals. */
static void add_devices(cJSON *doc, const gf_snapshot *snaps, uint32_t n, uint64_t now) {
    cJSON *arr = cJSON_AddArrayToObject(doc, "devices");
    for (uint32_t k = 0; k < n; k++) {
        const gf_snapshot *s = &snaps[k];
        if (!s->present)
            continue;
        int seen = 0;
        for (uint32_t j = 0; j < k; j++)
            seen |= snaps[j].present && snaps[j].device == s->device;
        if (seen)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        if (s->device >= 0)
            cJSON_AddNumberToObject(o, "index", s->device);
        else
            cJSON_AddNullToObject(o, "index");
        cJSON_AddStringToObject(o, "name", s->device_info.name);
        if (s->device_info.is_gpu)
            cJSON_AddStringToObject(o, "pci_bus_id", s->device_info.pci_bus_id);
        cJSON *ids = cJSON_AddArrayToObject(o, "shards");
        double answered = 0, fps = 0, bytes_in = 0;
        uint64_t pinned = 0;
        uint32_t in_flight = 0;
        for (uint32_t j = k; j < n; j++) {
            if (!snaps[j].present || snaps[j].device != s->device)
                continue;
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(snaps[j].shard));
            answered += (double)snaps[j].stats.frames_answered;
            fps += snaps[j].rates[0].frames_per_s;
            bytes_in += snaps[j].rates[0].bytes_in_per_s;
            pinned += snaps[j].pinned_bytes;
            in_flight += snaps[j].in_flight;
        }
        cJSON_AddNumberToObject(o, "in_flight", in_flight);
        cJSON_AddNumberToObject(o, "frames_answered", answered);
        cJSON_AddNumberToObject(o, "frames_per_s", fps);
        cJSON_AddNumberToObject(o, "bytes_in_per_s", bytes_in);
        cJSON_AddNumberToObject(o, "pinned_bytes", (double)pinned);
        gf_gpu_busy busy;
        int ok = timed_busy(snaps, n, s->device, GF_ALL_SHARDS, now, &busy) == 0;
        add_gpu(o, &busy, ok);
    }
}

cJSON *gf_stats_document(const gf_shard *sh, const gf_snapshot *snaps, uint32_t n) {
    static const char *const completion[] = {
        [GF_COMPLETION_HOST_FUNC] = "host_func",
        [GF_COMPLETION_POLL] = "poll",
        [GF_COMPLETION_HYBRID] = "hybrid",
    };
    cJSON *doc = cJSON_CreateObject();
    gf_stats sum;
    if (!doc || gf_stats_init(&sum, sh->cfg->pipeline_count, gf_now_ns()) < 0) {
        cJSON_Delete(doc);
        return NULL;
    }
    int gpu = sh->engine->device.is_gpu;
    cJSON_AddStringToObject(doc, "version", GF_VERSION);
    cJSON_AddStringToObject(doc, "engine", sh->engine->ops->name);
    add_device(doc, &sh->engine->device);
    cJSON_AddBoolToObject(doc, "timing_events", sh->cfg->timing_events);
    cJSON_AddNumberToObject(doc, "timing_sample_every", sh->cfg->timing_sample_every);
    /* The CPU engine has no completion mode and no zero-copy: it says so. */
    if (gpu)
        cJSON_AddStringToObject(doc, "completion", completion[sh->completion]);
    else
        cJSON_AddNullToObject(doc, "completion");
    if (gpu)
        cJSON_AddNumberToObject(doc, "zero_copy_max_bytes", (double)sh->cfg->zero_copy_max_bytes);
    else
        cJSON_AddNullToObject(doc, "zero_copy_max_bytes");
    add_slots(doc, sh, snaps, n);
    /* Every shard's counters, rates and pinned memory added; the loop's
     * utilisation and idle time are the shards' mean; "gpu" is the busiest
     * device's, all its shards' frames together (each device's is under
     * "devices", each shard's own under "shards"). */
    gf_rates rates[GF_RATE_WINDOWS] = {{0}};
    uint64_t pinned = 0, idle = 0, now = gf_now_ns();
    uint32_t present = 0;
    for (uint32_t k = 0; k < n; k++) {
        const gf_snapshot *s = &snaps[k];
        if (!s->present)
            continue;
        present++;
        gf_stats_add(&sum, sh->cfg->pipelines, &s->stats,
                     (const char(*)[GF_PIPELINE_NAME_MAX])s->names);
        for (unsigned w = 0; w < GF_RATE_WINDOWS; w++) {
            rates[w].frames_per_s += s->rates[w].frames_per_s;
            rates[w].bytes_in_per_s += s->rates[w].bytes_in_per_s;
            rates[w].bytes_out_per_s += s->rates[w].bytes_out_per_s;
            rates[w].busy += s->rates[w].busy;
        }
        pinned += s->pinned_bytes;
        idle += s->loop_idle_ns;
    }
    sum.started_ns = sh->stats.started_ns;
    sum.connections_refused += atomic_load_explicit(&sh->group->refused, memory_order_relaxed);
    for (uint32_t st = 0; st < GF_STATUS_COUNT_; st++)
        sum.rejected[st] +=
            atomic_load_explicit(&sh->group->refused_by_status[st], memory_order_relaxed);
    for (unsigned w = 0; present > 0 && w < GF_RATE_WINDOWS; w++)
        rates[w].busy /= present;
    cJSON_AddNumberToObject(doc, "pinned_bytes", (double)pinned);
    cJSON_AddNumberToObject(doc, "shard_count", present);
    gf_stats_to_json(&sum, sh->cfg->pipelines, doc, now, rates, present ? idle / present : 0);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "submissions",
                            (double)sum.submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "zero_copy_submissions",
                            (double)sum.zero_copy_submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "graph_submissions",
                            (double)sum.graph_submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "priority_submissions",
                            (double)sum.priority_submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "gathered_submissions",
                            (double)sum.gathered_submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "host_gathered_submissions",
                            (double)sum.host_gathered_submissions);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "pooled_batches",
                            (double)sum.pooled_batches);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(doc, "slots"), "pooled_frames",
                            (double)sum.pooled_frames);
    /* The busiest device's: a host of one GPU has just that one. */
    gf_gpu_busy busy, best;
    int have = 0;
    for (uint32_t k = 0; k < n; k++) {
        int seen = 0;
        for (uint32_t j = 0; j < k; j++)
            seen |= snaps[j].present && snaps[j].device == snaps[k].device;
        if (seen || !snaps[k].present ||
            timed_busy(snaps, n, snaps[k].device, GF_ALL_SHARDS, now, &busy) < 0)
            continue;
        if (!have || busy.copy + busy.compute > best.copy + best.compute)
            best = busy;
        have = 1;
    }
    add_gpu(doc, &best, have);
    add_batch_delays(doc, sh, snaps, n);
    add_shards(doc, snaps, n, now);
    add_devices(doc, snaps, n, now);
    gf_stats_free(&sum);
    return doc;
}

static cJSON *trace_document(const gf_shard *sh, const gf_trace *t, uint32_t max_frames,
                             uint32_t n);

/* Orders trace records by when they were written, then by shard. */
static int rec_cmp(const void *a, const void *b) {
    const gf_trace_rec *x = a, *y = b;
    if (x->written_ns != y->written_ns)
        return x->written_ns < y->written_ns ? -1 : 1;
    return x->shard < y->shard ? -1 : x->shard > y->shard;
}

/* The TRACE reply: the last `max_frames` frames' stage times of every shard,
 * merged in the order they were answered (STATS.md). */
cJSON *gf_trace_document(const gf_shard *sh, const gf_snapshot *snaps, uint32_t n,
                         uint32_t max_frames) {
    if (sh->group->count == 1)
        return trace_document(sh, &sh->trace, max_frames, 1);
    /* The daemon keeps trace_frames frames: the newest of every shard's. */
    if (max_frames == 0 || max_frames > sh->cfg->trace_frames)
        max_frames = sh->cfg->trace_frames;
    uint32_t total = 0;
    for (uint32_t k = 0; k < n; k++)
        total += snaps[k].trace_count;
    gf_trace merged;
    if (gf_trace_init(&merged, total) < 0)
        return NULL;
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < snaps[k].trace_count; i++)
            gf_trace_push(&merged, &snaps[k].trace[i]);
    if (merged.count > 1)
        qsort(merged.recs, merged.count, sizeof *merged.recs, rec_cmp);
    merged.next = merged.count % (merged.capacity ? merged.capacity : 1);
    cJSON *doc = trace_document(sh, &merged, max_frames, n);
    gf_trace_free(&merged);
    return doc;
}

static cJSON *trace_document(const gf_shard *sh, const gf_trace *t, uint32_t max_frames,
                             uint32_t n) {
    cJSON *doc = cJSON_CreateObject();
    char *frames = gf_trace_frames_text(t, max_frames, sh->stats.started_ns);
    if (!doc || !frames) {
        cJSON_Delete(doc);
        free(frames);
        return NULL;
    }
    cJSON_AddStringToObject(doc, "clock", "monotonic");
    cJSON_AddNumberToObject(doc, "t0_ns", (double)sh->stats.started_ns);
    cJSON_AddStringToObject(doc, "engine", sh->engine->ops->name);
    cJSON_AddNumberToObject(doc, "slots", sh->sched.ring.count);
    cJSON_AddNumberToObject(doc, "shards", n);
    /* Raw: printed as it is, without a cJSON object per frame. */
    cJSON_AddRawToObject(doc, "frames", frames);
    free(frames);
    return doc;
}

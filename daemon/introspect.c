/* SPDX-License-Identifier: MIT */
/*
 * What the server says about itself: the accounting of each answered frame
 * (counters, phases, the trace ring), the LIST, STATS and TRACE reply
 * documents (daemon/STATS.md describes every field) (introspect.h).
 */
#include "introspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopprof.h"

/* The span over which STATS reports GPU busy and overlap fractions. */
#define GF_GPU_WINDOW_NS 1000000000ull

/*
 * A RESULT was written: count it, add its phases (STATS.md) and keep its
 * stage times for TRACE.  O(1), no allocation.
 */
void gf_frame_answered(gf_server *srv, uint64_t conn_id, const gf_frame *s) {
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
        srv->stats.frames_timed++;
    }
    ph[GF_PHASE_COMPLETION_DELAY] =
        s->drained_ns > t->gpu_done_ns ? s->drained_ns - t->gpu_done_ns : 0;
    ph[GF_PHASE_REPLY_WRITE] = written - s->drained_ns;
    ph[GF_PHASE_END_TO_END] = written - s->arrived_ns;
    srv->stats.frames_answered++;
    srv->stats.bytes_out += s->out_bytes;
    if (s->region) {
        srv->stats.shm_frames++;
        srv->stats.shm_bytes_in += s->in_bytes;
        srv->stats.shm_bytes_out += s->out_bytes;
    }
    /* Under the pipeline it ran as, found by name: a reload may have moved
     * it; one a reload removed has no totals left to add to. */
    const gf_config *cfg = srv->cfg;
    uint32_t id = s->pipeline_id;
    if (id >= cfg->pipeline_count || strcmp(cfg->pipelines[id].name, s->pipeline.name) != 0)
        for (id = 0; id < cfg->pipeline_count; id++)
            if (strcmp(cfg->pipelines[id].name, s->pipeline.name) == 0)
                break;
    if (id < cfg->pipeline_count)
        gf_stats_frame_answered(&srv->stats, id, ph, mask);
    gf_trace_rec rec = {.frame_id = s->frame_id,
                        .conn_id = conn_id,
                        .pipeline_id = s->pipeline_id,
                        .slot = s->slot->index,
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
    gf_trace_push(&srv->trace, &rec);
    gf_prof_leave(prof);
}

cJSON *gf_list_document(const gf_server *srv) {
    return gf_pipelines_to_json(srv->cfg->pipelines, srv->cfg->pipeline_count);
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

/* STATS's "slots". */
static void add_slots(cJSON *doc, const gf_server *srv) {
    cJSON *slots = cJSON_AddObjectToObject(doc, "slots");
    cJSON_AddNumberToObject(slots, "count", srv->sched.ring.count);
    cJSON_AddNumberToObject(slots, "free", srv->sched.ring.free_count);
    cJSON_AddNumberToObject(slots, "in_flight", srv->sched.in_flight);
    cJSON_AddNumberToObject(slots, "submissions", (double)srv->stats.submissions);
    cJSON_AddNumberToObject(slots, "zero_copy_submissions",
                            (double)srv->stats.zero_copy_submissions);
    cJSON_AddNumberToObject(slots, "in_bytes", (double)srv->engine->slots[0].in_capacity_bytes);
    cJSON_AddNumberToObject(slots, "out_bytes", (double)srv->engine->slots[0].out_capacity_bytes);
}

/* STATS's "gpu": busy and overlap over the last second, from the timed
 * frames; null on the CPU engine, without timing events, or without memory. */
static void add_gpu(cJSON *doc, const gf_server *srv, uint64_t now) {
    gf_gpu_busy busy;
    if (!srv->engine->device.is_gpu || !srv->cfg->timing_events ||
        gf_trace_gpu_busy(&srv->trace, now, GF_GPU_WINDOW_NS, &busy) < 0) {
        cJSON_AddNullToObject(doc, "gpu");
        return;
    }
    cJSON *g = cJSON_AddObjectToObject(doc, "gpu");
    cJSON_AddNumberToObject(g, "window_ns", (double)busy.window_ns);
    cJSON_AddNumberToObject(g, "frames", (double)busy.frames);
    cJSON_AddNumberToObject(g, "h2d_busy", busy.h2d);
    cJSON_AddNumberToObject(g, "kernel_busy", busy.kernel);
    cJSON_AddNumberToObject(g, "d2h_busy", busy.d2h);
    cJSON_AddNumberToObject(g, "copy_busy", busy.copy);
    cJSON_AddNumberToObject(g, "compute_busy", busy.compute);
    cJSON_AddNumberToObject(g, "overlap", busy.overlap);
}

cJSON *gf_stats_document(gf_server *srv) {
    static const char *const completion[] = {
        [GF_COMPLETION_HOST_FUNC] = "host_func",
        [GF_COMPLETION_POLL] = "poll",
        [GF_COMPLETION_HYBRID] = "hybrid",
    };
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    int gpu = srv->engine->device.is_gpu;
    cJSON_AddStringToObject(doc, "version", GF_VERSION);
    cJSON_AddStringToObject(doc, "engine", srv->engine->ops->name);
    add_device(doc, &srv->engine->device);
    cJSON_AddBoolToObject(doc, "timing_events", srv->cfg->timing_events);
    cJSON_AddNumberToObject(doc, "timing_sample_every", srv->cfg->timing_sample_every);
    /* The CPU engine has no completion mode and no zero-copy: it says so. */
    if (gpu)
        cJSON_AddStringToObject(doc, "completion", completion[srv->completion]);
    else
        cJSON_AddNullToObject(doc, "completion");
    if (gpu)
        cJSON_AddNumberToObject(doc, "zero_copy_max_bytes", (double)srv->cfg->zero_copy_max_bytes);
    else
        cJSON_AddNullToObject(doc, "zero_copy_max_bytes");
    add_slots(doc, srv);
    cJSON_AddNumberToObject(doc, "pinned_bytes", (double)srv->engine->pinned_bytes);
    uint64_t now = gf_now_ns();
    gf_stats_to_json(&srv->stats, srv->cfg->pipelines, doc, now, uv_metrics_idle_time(srv->loop));
    add_gpu(doc, srv, now);
    return doc;
}

/* The TRACE reply: the last `max_frames` frames' stage times (STATS.md). */
cJSON *gf_trace_document(const gf_server *srv, uint32_t max_frames) {
    cJSON *doc = cJSON_CreateObject();
    char *frames = gf_trace_frames_text(&srv->trace, max_frames, srv->stats.started_ns);
    if (!doc || !frames) {
        cJSON_Delete(doc);
        free(frames);
        return NULL;
    }
    cJSON_AddStringToObject(doc, "clock", "monotonic");
    cJSON_AddNumberToObject(doc, "t0_ns", (double)srv->stats.started_ns);
    cJSON_AddStringToObject(doc, "engine", srv->engine->ops->name);
    cJSON_AddNumberToObject(doc, "slots", srv->sched.ring.count);
    /* Raw: printed as it is, without a cJSON object per frame. */
    cJSON_AddRawToObject(doc, "frames", frames);
    free(frames);
    return doc;
}

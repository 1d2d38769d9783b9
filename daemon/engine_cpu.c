/* SPDX-License-Identifier: MIT */
/*
 * The CPU engine: each slot has a worker thread that runs the pipeline's C
 * reference on each frame of the slot's batch and completes the slot through
 * the same queue as the CUDA engine.  It lets the daemon serve on a machine without a GPU and lets
 * CI exercise every line of the shards; it is not why the product exists.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "stats.h"

/* Slot buffers are page-aligned, like the CUDA engine's pinned ones. */
#define GF_CPU_BUFFER_ALIGN_BYTES 4096

typedef struct cpu_worker {
    gf_engine *engine;
    gf_slot *slot;
    void *scratch[2]; /* intermediate results of a pipeline of several stages */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int has_job; /* under lock: a frame waits to be run     */
    int stop;    /* under lock: exit once no job is pending */
    int started; /* the thread exists (for cleanup)         */
} cpu_worker;

typedef struct cpu_engine {
    gf_engine base;
    cpu_worker *workers;
} cpu_engine;

/* The slot's worker thread: waits for a job, runs the batch's frames
 * through their C references, and pushes the slot onto the completion
 * queue; the loop meanwhile touches neither the slot nor its frames. */
static void *worker_main(void *arg) {
    cpu_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (!w->has_job && !w->stop)
            pthread_cond_wait(&w->wake, &w->lock);
        if (!w->has_job) {
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        w->has_job = 0;
        pthread_mutex_unlock(&w->lock);

        gf_slot *slot = w->slot;
        uint64_t t1 = 0;
        for (uint32_t i = 0; i < slot->frame_count; i++) {
            gf_frame *s = &slot->frames[i];
            uint64_t t0 = gf_now_ns();
            uint64_t ends[GF_STAGES_MAX];
            /* Device regions are refused at DEVICE_REGION_ADD on this engine
             * (no device_map): every frame's bytes are host memory. */
            assert(!s->on_device);
            gf_pipeline_reference(&s->pipeline, s->src, s->in_bytes, s->stage_bytes, s->dst,
                                  w->scratch, ends);
            t1 = gf_now_ns();
            /* No copies: the "device" is this thread, the run is the kernel. */
            s->stages = (gf_stage_times){.h2d_begin_ns = t0,
                                         .h2d_end_ns = t0,
                                         .kernel_begin_ns = t0,
                                         .kernel_end_ns = t1,
                                         .d2h_begin_ns = t1,
                                         .d2h_end_ns = t1,
                                         .gpu_done_ns = t1,
                                         .timed = 1};
            uint32_t n = s->pipeline.stage_count;
            s->stages.kernel_stages = n > 1 ? n : 0;
            for (uint32_t k = 0; n > 1 && k < n; k++)
                s->stages.kernel_stage_ns[k] = ends[k] - (k ? ends[k - 1] : t0);
            s->status = GF_OK;
        }
        slot->done_ns = t1;
        gf_completion_push(w->engine->done, slot);
    }
}

/* The loop thread: hands the slot to its worker. */
static int cpu_submit(gf_engine *e, gf_slot *slot) {
    cpu_worker *w = slot->engine_state;
    (void)e;
    pthread_mutex_lock(&w->lock);
    w->has_job = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static void cpu_finish(gf_engine *e, gf_slot *slot) {
    /* The worker filled status and stages before it pushed the slot. */
    (void)e;
    (void)slot;
}

/* The shard's thread, at shutdown: stops and joins the workers. */
static void cpu_close(gf_engine *e) {
    cpu_engine *ce = (cpu_engine *)e;
    for (uint32_t i = 0; ce->workers && i < e->slot_count; i++) {
        cpu_worker *w = &ce->workers[i];
        if (!w->started)
            continue;
        pthread_mutex_lock(&w->lock);
        w->stop = 1;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
    }
    for (uint32_t i = 0; e->slots && i < e->slot_count; i++) {
        free(e->slots[i].in_host);
        free(e->slots[i].out_host);
        if (ce->workers) {
            free(ce->workers[i].scratch[0]);
            free(ce->workers[i].scratch[1]);
        }
    }
    free(ce->workers);
    free(e->slots);
    free(ce);
}

/* Every stage must have a C reference.  Any thread. */
int gf__engine_cpu_prepare(gf_pipeline *pipelines, size_t count, char *why, size_t why_len) {
    for (size_t i = 0; i < count; i++) {
        gf_pipeline *p = &pipelines[i];
        if (!gf_pipeline_has_reference(p)) {
            snprintf(why, why_len,
                     "pipeline %s: a plugin stage has no CPU implementation (reference), so the "
                     "cpu engine cannot run it",
                     p->name);
            return -1;
        }
    }
    return 0;
}

static const gf_engine_ops cpu_ops = {
    .name = "cpu", .submit = cpu_submit, .finish = cpu_finish, .close = cpu_close};

/* Page-aligned allocation of at least one byte, so a 0-byte frame has a buffer. */
static void *alloc_buffer(uint64_t bytes) {
    size_t n = (size_t)((bytes + GF_CPU_BUFFER_ALIGN_BYTES) / GF_CPU_BUFFER_ALIGN_BYTES) *
               GF_CPU_BUFFER_ALIGN_BYTES;
    return aligned_alloc(GF_CPU_BUFFER_ALIGN_BYTES, n);
}

/* Slot `i`'s buffers and its worker thread.  Returns 0 or -1, logged. */
static int open_worker(const gf_engine_params *params, gf_engine *e, uint32_t i) {
    cpu_engine *ce = (cpu_engine *)e;
    gf_slot *s = &e->slots[i];
    cpu_worker *w = &ce->workers[i];
    s->index = i;
    s->in_capacity_bytes = params->in_capacity_bytes;
    s->out_capacity_bytes = params->out_capacity_bytes;
    s->scratch_capacity_bytes = params->scratch_capacity_bytes;
    s->in_host = alloc_buffer(params->in_capacity_bytes);
    s->out_host = alloc_buffer(params->out_capacity_bytes);
    if (params->scratch_capacity_bytes) {
        w->scratch[0] = alloc_buffer(params->scratch_capacity_bytes);
        w->scratch[1] = alloc_buffer(params->scratch_capacity_bytes);
    }
    if (!s->in_host || !s->out_host ||
        (params->scratch_capacity_bytes && (!w->scratch[0] || !w->scratch[1]))) {
        GF_LOG_ERR("engine cpu: cannot allocate %llu + %llu bytes for slot %u",
                   (unsigned long long)params->in_capacity_bytes,
                   (unsigned long long)params->out_capacity_bytes, i);
        return -1;
    }
    s->engine_state = w;
    w->engine = e;
    w->slot = s;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        GF_LOG_ERR("engine cpu: cannot start worker %u: %s", i, strerror(rc));
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        return -1;
    }
    w->started = 1;
    return 0;
}

int gf__engine_cpu_open(const gf_engine_params *params, gf_completion *done, gf_engine **out) {
    cpu_engine *ce = calloc(1, sizeof *ce);
    if (!ce)
        return -ENOMEM;
    gf_engine *e = &ce->base;
    e->ops = &cpu_ops;
    e->done = done;
    e->slot_count = params->slot_count;
    e->slots = calloc(params->slot_count, sizeof *e->slots);
    ce->workers = calloc(params->slot_count, sizeof *ce->workers);
    if (!e->slots || !ce->workers)
        goto fail;
    for (uint32_t i = 0; i < params->slot_count; i++)
        if (open_worker(params, e, i) < 0)
            goto fail;
    char why[GF_ENGINE_WHY_BYTES];
    if (gf__engine_cpu_prepare(params->pipelines, params->pipeline_count, why, sizeof why) < 0) {
        GF_LOG_ERR("engine cpu: %s", why);
        cpu_close(e);
        return -EINVAL;
    }
    snprintf(e->device.name, sizeof e->device.name, "cpu");
    e->device.threads = params->slot_count;
    GF_LOG_INF("engine cpu: %u slots of %llu bytes in, %llu bytes out, 2 x %llu bytes of scratch",
               params->slot_count, (unsigned long long)params->in_capacity_bytes,
               (unsigned long long)params->out_capacity_bytes,
               (unsigned long long)params->scratch_capacity_bytes);
    *out = e;
    return 0;
fail:
    cpu_close(e);
    return -ENOMEM;
}

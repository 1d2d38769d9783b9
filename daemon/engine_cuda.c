/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine: the product.
 *
 * Every slot has pinned host buffers (cudaHostAlloc), device buffers, its own
 * non-blocking stream (and one of the device's greatest priority, below),
 * four timing events and one untimed "done" event.  A frame is one sequence
 * on its slot's stream:
 *
 *   event[0]  H2D copy  event[1]  kernel  event[2]  D2H copy  event[3]  then
 *     completion = host_func:  a host function
 *     completion = poll:       the done event
 *     completion = hybrid:     the done event, and a host function added
 *                              if it is not done a window after its
 *                              launches were queued (GF_COMPLETION_SPIN_NS,
 *                              or longer where the shard's recent
 *                              submissions took longer: config.h)
 *
 * A small batch of elementwise stages runs zero-copy (runs_zero_copy): no
 * copies, its kernels read and write the pinned host buffers themselves.  A
 * batch's small device frames, and its small shm frames that would take a
 * copy each, move by one kernel each way instead (engine_cuda_launch.c): the
 * "copies" above may be kernels.
 * With cuda_graphs, an untimed batch of a pipeline of a plugin or of
 * several stages is captured once as a CUDA graph per slot and batch shape
 * and replayed (engine_cuda_graphs.c): one launch instead of a copy, the
 * stages' kernels and a copy, which costs the GPU and the loop less.
 *
 * An untimed urgent batch (a realtime frame's, scheduler.h) runs on a
 * second stream of the slot's, of the device's greatest priority, so that
 * its kernels are scheduled ahead of other slots' waiting ones, when
 * nothing ties it to the slot's stream: a graph replay (the capture holds
 * what the plugins bound to that stream), or built-in kernels, which take
 * any stream.  A plugin's plain launches stay on the stream of its stream
 * index (gpuframe_plugin.h).  A slot is submitted again only once its
 * completion has been seen, so nothing of its earlier batch is still
 * queued on the other stream; except after a submission that failed
 * without a sticky error (cuda_submit's -EIO), whose queued work may still
 * run: the next batch, on the other stream, waits for it (settle).
 *
 * The four timing events are recorded only for the frames the scheduler samples
 * (gf_slot.time_stages).  The host function runs on the driver's thread once
 * the D2H copy is done; it only timestamps and pushes the slot onto the
 * completion queue, whose uv_async_send wakes the loop.  In poll mode there is
 * neither the driver thread's hand-off nor the wake-up: the loop calls
 * gf__cuda_poll on every iteration while frames are in flight, which asks
 * each pending slot's done event with cudaEventQuery, which never blocks.
 * Hybrid polls the same way, for a window after a submission's launches
 * were queued (engine.h, gf_hybrid_spin_ns); one that takes longer gets
 * its host function then, and the loop may sleep.
 * Nothing here blocks the loop after gf__engine_cuda_open returns: submit only
 * enqueues, and finish reads elapsed times of events that have completed.
 *
 * This file opens and closes the engine and submits; engine_cuda_state.h
 * maps the files of its other concerns and the five threads they run on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cuda_complete.h"
#include "engine_cuda_graphs.h"
#include "engine_cuda_launch.h"
#include "engine_cuda_vmm.h"
#include "kernels.h"
#include "plugin.h"
#include "stats.h"

/* Logs what became of batch `s` (`what`), CUDA's `err` last. */
static void log_batch(const gf_slot *s, const char *what, cudaError_t err) {
    GF_LOG_ERR("engine cuda: %u frame(s) from %llu (%s, %llu bytes first) on slot %u %s: %s (%s)",
               s->frame_count, (unsigned long long)s->frames[0].frame_id,
               s->frames[0].pipeline.name, (unsigned long long)s->frames[0].in_bytes, s->index,
               what, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* Whether a stage of batch `s`'s pipeline is a plugin's (or a device_api
 * kind's), whose launches must come on its stream index's stream
 * (gpuframe_plugin.h); a built-in kernel takes any stream. */
static int has_plugin_stage(const gf_slot *s) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (p->stages[k].params.plugin != NULL)
            return 1;
    return 0;
}

/* The shard's loop: a batch answered unfinished (cuda_submit's -EIO) may
 * still run on cs->unsettled; the slot's next batch, on cs->busy, waits for
 * it when that is another stream. */
static cudaError_t settle(cuda_slot *cs) {
    cudaStream_t prev = cs->unsettled;
    cs->unsettled = NULL;
    if (prev == NULL || prev == cs->busy)
        return cudaSuccess;
    cudaError_t err = cudaEventRecord(cs->done, prev);
    return err != cudaSuccess ? err : cudaStreamWaitEvent(cs->busy, cs->done, 0);
}

/* The shard's loop: the batch's launches (from a graph, or plain), then
 * what tells the loop it finished; never waits for the device.  A launch
 * that fails without poisoning the context fails the batch at its
 * completion, not now: what was queued before it still runs, reading the
 * slot's buffers and the frames' shm regions, which the frames keep pinned
 * until they are answered. */
static int cuda_submit(gf_engine *e, gf_slot *s) {
    cuda_engine *ce = (cuda_engine *)e;
    cuda_slot *cs = s->engine_state;
    int with_copies = 1;
    cs->busy = cs->stream; /* a capture's */
    cudaGraphExec_t exec = gf__cuda_graph(ce, s, cs, &with_copies);
    s->graphed = exec != NULL;
    s->failed = 0;
    s->prioritized =
        cs->urgent && s->urgent && !s->time_stages && (exec != NULL || !has_plugin_stage(s));
    cs->busy = s->prioritized ? cs->urgent : cs->stream;
    cudaError_t err = settle(cs);
    if (err == cudaSuccess && exec == NULL)
        err = gf__cuda_enqueue(ce, s, cs);
    else if (err == cudaSuccess && with_copies)
        err = cudaGraphLaunch(exec, cs->busy);
    else if (err == cudaSuccess && (err = gf__cuda_copy(ce, s, cs, 1)) == cudaSuccess &&
             (err = cudaGraphLaunch(exec, cs->busy)) == cudaSuccess)
        err = gf__cuda_copy(ce, s, cs, 0);
    if (err != cudaSuccess && !is_sticky(err)) {
        log_batch(s, "failed, answered once the work queued before has run", err);
        cudaGetLastError(); /* a launch error is not sticky: clear it */
        s->failed = 1;
        err = cudaSuccess;
    }
    if (err == cudaSuccess)
        err = gf__cuda_complete_after(e, s, cs);
    if (err == cudaSuccess)
        return 0;
    log_batch(s, "answered now, unfinished", err);
    if (is_sticky(err)) {
        e->poisoned = 1;
    } else {
        cudaGetLastError();
        cs->unsettled = cs->busy;
    }
    /*
     * Nothing tells the loop when the stream is idle (a sticky error has
     * poisoned the engine, or the completion itself could not be queued):
     * the scheduler answers the frames now.  In the second case, without a
     * sticky error, work queued before may still read the slot's buffers
     * and the frames' regions after they are answered: a host function and
     * an event record that fail on a healthy context are the window left.
     */
    return -EIO;
}

/* The shard's thread at shutdown, the device idle: frees one slot. */
static void free_slot(cuda_slot *cs, gf_slot *s) {
    for (int i = 0; i < EV_COUNT; i++)
        if (cs->ev[i])
            cudaEventDestroy(cs->ev[i]);
    for (int i = 0; i < GF_STAGES_MAX - 1; i++)
        if (cs->stage_ev[i])
            cudaEventDestroy(cs->stage_ev[i]);
    if (cs->done)
        cudaEventDestroy(cs->done);
    gf__cuda_graphs_close(cs);
    if (cs->stream)
        cudaStreamDestroy(cs->stream);
    if (cs->urgent)
        cudaStreamDestroy(cs->urgent);
    cudaFree(cs->in_dev);
    cudaFree(cs->out_dev);
    cudaFree(cs->scratch_dev[0]);
    cudaFree(cs->scratch_dev[1]);
    cudaFreeHost(s->in_host);
    cudaFreeHost(s->out_host);
}

/* The shard's thread at shutdown (or a failed open): waits for the device,
 * then frees everything. */
static void cuda_close(gf_engine *e) {
    cuda_engine *ce = (cuda_engine *)e;
    /* Shutdown only: waiting here is allowed, and needed before freeing. */
    if (!e->poisoned)
        CUDA_CHECK(cudaDeviceSynchronize());
    for (uint32_t i = 0; ce->cslots && i < e->slot_count; i++)
        free_slot(&ce->cslots[i], &e->slots[i]);
    free(ce->cslots);
    free(e->slots);
    free(ce);
}

/* A client's region: page-locked where it lies (no copy), so the copy
 * engines DMA straight from and into the client's pages.  The region is a
 * MAP_SHARED mapping of a memfd; cudaHostRegister takes such pages (issue 11
 * measured 53-55 GB/s from them on an H200), and mapped where kernels can
 * use host addresses (host_pointers, set at open) so that a kernel may move
 * small frames from and into them too (engine_cuda_launch.c).  A worker of
 * the shard's thread pool: the call takes about 1.3 ms per MiB, and a
 * thread starts on device 0 unless told. */
static int cuda_pin(gf_engine *e, void *base, uint64_t bytes, char *why, size_t why_len) {
    cuda_engine *ce = (cuda_engine *)e;
    cudaError_t err = cudaSetDevice(ce->device);
    if (err == cudaSuccess)
        err = cudaHostRegister(base, (size_t)bytes,
                               cudaHostRegisterPortable |
                                   (ce->host_pointers ? cudaHostRegisterMapped : 0));
    if (err == cudaSuccess)
        return 0;
    gf_errorf(why, why_len, "cudaHostRegister of %llu bytes failed: %s", (unsigned long long)bytes,
              cudaGetErrorString(err));
    (void)cudaGetLastError(); /* not sticky: clear it for this thread */
    return -ENOMEM;
}

/* A worker of the shard's thread pool, once no frame uses the region. */
static void cuda_unpin(gf_engine *e, void *base) {
    cuda_engine *ce = (cuda_engine *)e;
    if (cudaSetDevice(ce->device) != cudaSuccess || cudaHostUnregister(base) != cudaSuccess) {
        GF_LOG_WRN("engine cuda: cudaHostUnregister: %s", cudaGetErrorString(cudaGetLastError()));
    }
}

/* Opens stage `st`'s device side on `device` for `streams` stream
 * indices: a plugin's, or a device_api kind's built-in plugin stage with
 * the kind's device API; any other built-in kind needs its kernel.  Returns
 * 0, or -1 (or a plugin's GF_PLUGIN_OPEN_FAILED_BEFORE) with why[]. */
static int open_stage(gf_stage *st, int device, uint32_t streams, char *why, size_t why_len) {
    if (gf_kind_is_plugin(st->kind))
        return gf_plugin_stage_open_device(st->params.plugin, device, streams, why, why_len);
    if (st->kind->device_api) {
        const gf_plugin *api = gf_kernel_device_api(st->kind);
        if (api == NULL || st->params.plugin == NULL) {
            snprintf(why, why_len, "kind %s: %s", st->kind->name,
                     api ? "its stage was not opened (gf_pipeline_open_plugins)"
                         : "no device API in this build");
            return -1;
        }
        return gf_plugin_stage_open_device_api(st->params.plugin, api, device, streams, why,
                                               why_len);
    }
    if (gf_kernel_launcher(st->kind) == NULL) {
        snprintf(why, why_len, "kind %s has no CUDA kernel", st->kind->name);
        return -1;
    }
    return 0;
}

/* Every stage of every pipeline opened (open_stage), on `device`, for
 * `device_streams` stream indices.  The
 * calling thread's current device becomes `device`: a shard's own at
 * start-up, a worker of the thread pool for a reload.  Returns 0, or -1 (or
 * a plugin's GF_PLUGIN_OPEN_FAILED_BEFORE) with why[]. */
int gf__engine_cuda_prepare(int device, uint32_t device_streams, gf_pipeline *pipelines,
                            size_t count, char *why, size_t why_len) {
    char inner[GF_PLUGIN_WHY_BYTES + 128];
    if (cudaSetDevice(device) != cudaSuccess) {
        snprintf(why, why_len, "cudaSetDevice(%d) failed", device);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        gf_pipeline *p = &pipelines[i];
        for (uint32_t k = 0; k < p->stage_count; k++) {
            int rc = open_stage(&p->stages[k], device, device_streams, inner, sizeof inner);
            if (rc < 0) {
                snprintf(why, why_len, "pipeline %s: %s", p->name, inner);
                return rc;
            }
        }
    }
    return 0;
}

static const gf_engine_ops cuda_ops = {.name = "cuda",
                                       .submit = cuda_submit,
                                       .finish = gf__cuda_finish,
                                       .close = cuda_close,
                                       .poll = gf__cuda_poll,
                                       .pin = cuda_pin,
                                       .unpin = cuda_unpin,
                                       .device_map = gf__cuda_device_map,
                                       .device_unmap = gf__cuda_device_unmap};

/* Allocates one slot's memory, stream and events; the shard's thread at
 * start-up.  Returns 0 or a negative errno (cuda_errno) with the failed
 * call logged. */
static int open_slot(const gf_engine_params *p, gf_engine *e, gf_slot *s, cuda_slot *cs) {
    /* cudaHostAlloc(0 bytes) fails; a slot always has at least one byte. */
    size_t in_b = p->in_capacity_bytes ? p->in_capacity_bytes : 1;
    size_t out_b = p->out_capacity_bytes ? p->out_capacity_bytes : 1;
    cs->engine = e;
    s->engine_state = cs;
    s->in_capacity_bytes = p->in_capacity_bytes;
    s->out_capacity_bytes = p->out_capacity_bytes;
    s->scratch_capacity_bytes = p->scratch_capacity_bytes;
    int least = 0, greatest = 0;
    cudaError_t err;
    if ((err = CUDA_CHECK(cudaHostAlloc((void **)&s->in_host, in_b, cudaHostAllocDefault))) ||
        (err = CUDA_CHECK(cudaHostAlloc((void **)&s->out_host, out_b, cudaHostAllocDefault))) ||
        (err = CUDA_CHECK(cudaMalloc(&cs->in_dev, in_b))) ||
        (err = CUDA_CHECK(cudaMalloc(&cs->out_dev, out_b))) ||
        (p->scratch_capacity_bytes &&
         ((err = CUDA_CHECK(cudaMalloc(&cs->scratch_dev[0], p->scratch_capacity_bytes))) ||
          (err = CUDA_CHECK(cudaMalloc(&cs->scratch_dev[1], p->scratch_capacity_bytes))))) ||
        (err = CUDA_CHECK(cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking))) ||
        (err = CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest))) ||
        (greatest != least && (err = CUDA_CHECK(cudaStreamCreateWithPriority(
                                   &cs->urgent, cudaStreamNonBlocking, greatest)))))
        return cuda_errno(err);
    cs->busy = cs->stream;
    for (int i = 0; i < EV_COUNT; i++)
        if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->ev[i], cudaEventDefault))))
            return cuda_errno(err);
    for (int i = 0; i < GF_STAGES_MAX - 1; i++)
        if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->stage_ev[i], cudaEventDefault))))
            return cuda_errno(err);
    if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->done, cudaEventDisableTiming))))
        return cuda_errno(err);
    if (p->cuda_graphs && gf__cuda_graphs_open(cs) < 0)
        return -ENOMEM;
    e->pinned_bytes += in_b + out_b;
    return 0;
}

/*
 * Runs every pipeline once on slot 0 and waits, so that module loading and
 * first-launch costs are paid before the daemon says it is ready.  The
 * shard's thread at start-up, before its loop serves: waiting is allowed.
 */
static int warm_up(const cuda_engine *ce, const gf_engine_params *p, gf_slot *s, cuda_slot *cs) {
    char why[128];
    /* The scheduler gives the slots their frames later: a batch of one frame
     * of its own, emptied again below. */
    gf_frame f = {.slot = s, .in_host = s->in_host, .out_host = s->out_host};
    s->frames = &f;
    s->frame_count = 1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->pipeline_count; i++) {
        const gf_pipeline *pl = &p->pipelines[i];
        const gf_stage *first = &pl->stages[0];
        uint64_t n = first->kind->warmup_input_bytes(&first->params);
        int64_t out = n ? gf_pipeline_stage_lengths(pl, n, f.stage_bytes, why, sizeof why) : -1;
        int fits = out >= 0 && n <= s->in_capacity_bytes && (uint64_t)out <= s->out_capacity_bytes;
        for (uint32_t k = 0; fits && k + 1 < pl->stage_count; k++)
            fits = f.stage_bytes[k] <= p->scratch_capacity_bytes;
        if (!fits)
            continue; /* a plugin warms itself up in device_open */
        memset(s->in_host, 0, n);
        f.src = s->in_host;
        f.dst = s->out_host;
        /* A copy without references, never released. */
        f.pipeline = *pl;
        f.in_bytes = n;
        f.out_bytes = (uint64_t)out;
        cudaError_t err = CUDA_CHECK(gf__cuda_enqueue(ce, s, cs));
        if (!err)
            err = CUDA_CHECK(cudaStreamSynchronize(cs->stream));
        if (err) {
            rc = -EIO;
            break;
        }
        GF_LOG_DBG("engine cuda: warmed up pipeline %s (%llu bytes)", pl->name,
                   (unsigned long long)n);
    }
    s->frames = NULL;
    s->frame_count = 0;
    return rc;
}

/* What STATS says of the device. */
static void describe_device(gf_device_info *d, const struct cudaDeviceProp *prop, int device) {
    d->is_gpu = 1;
    snprintf(d->name, sizeof d->name, "%s", prop->name);
    d->cc_major = prop->major;
    d->cc_minor = prop->minor;
    d->sm_count = prop->multiProcessorCount;
    d->memory_bytes = prop->totalGlobalMem;
    if (cudaDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, device) != cudaSuccess)
        cudaGetLastError();
}

/* engine.h's gf_engine_open: the shard's thread at start-up. */
int gf__engine_cuda_open(const gf_engine_params *p, gf_completion *done, gf_engine **out) {
    char why[GF_ENGINE_WHY_BYTES];
    if (!gf_engine_cuda_available(why, sizeof why)) {
        GF_LOG_ERR("engine cuda: %s", why);
        return -ENODEV;
    }
    cuda_engine *ce = calloc(1, sizeof *ce);
    if (!ce)
        return -ENOMEM;
    gf_engine *e = &ce->base;
    e->ops = &cuda_ops;
    e->done = done;
    e->slot_count = p->slot_count;
    e->polled = p->completion != GF_COMPLETION_HOST_FUNC;
    ce->hybrid = p->completion == GF_COMPLETION_HYBRID;
    ce->zero_copy_max_bytes = p->zero_copy_max_bytes;
    ce->device = p->device;
    ce->stream_base = p->stream_base;
    ce->device_streams = p->device_streams > 0 ? p->device_streams : p->slot_count;
    e->slots = calloc(p->slot_count, sizeof *e->slots);
    ce->cslots = calloc(p->slot_count, sizeof *ce->cslots);
    int rc = -ENOMEM;
    if (!e->slots || !ce->cslots)
        goto fail;
    struct cudaDeviceProp prop;
    cudaError_t err;
    if ((err = CUDA_CHECK(cudaSetDevice(ce->device))) ||
        (err = CUDA_CHECK(cudaGetDeviceProperties(&prop, ce->device)))) {
        rc = cuda_errno(err);
        goto fail;
    }
    ce->host_pointers = prop.canUseHostPointerForRegisteredMem;
    ce->max_pitch = prop.memPitch;
    for (uint32_t i = 0; i < p->slot_count; i++) {
        e->slots[i].index = i;
        if ((rc = open_slot(p, e, &e->slots[i], &ce->cslots[i])) != 0) {
            GF_LOG_ERR("engine cuda: cannot set up slot %u (%llu + %llu bytes pinned and on "
                       "the device, a stream, %d events): %s",
                       i, (unsigned long long)p->in_capacity_bytes,
                       (unsigned long long)p->out_capacity_bytes, EV_COUNT, strerror(-rc));
            goto fail;
        }
    }
    if ((rc = gf__engine_cuda_prepare(ce->device, ce->device_streams, p->pipelines,
                                      p->pipeline_count, why, sizeof why)) < 0) {
        /* One line for a plugin that failed on another shard of this device. */
        if (rc != GF_PLUGIN_OPEN_FAILED_BEFORE)
            GF_LOG_ERR("engine cuda: %s", why);
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = warm_up(ce, p, &e->slots[0], &ce->cslots[0])) != 0)
        goto fail;
    gf__cuda_vmm_check(ce);
    describe_device(&e->device, &prop, ce->device);
    /* The device itself: the shard's "ready" line (gf_engine_describe, which
     * engine.c owns: calls go from there to here, never back). */
    GF_LOG_INF("engine cuda: device %d; %u slots, each %llu bytes in and %llu bytes out (2 x %llu "
               "bytes of scratch on the device), pinned %llu bytes in all",
               ce->device, p->slot_count, (unsigned long long)p->in_capacity_bytes,
               (unsigned long long)p->out_capacity_bytes,
               (unsigned long long)p->scratch_capacity_bytes, (unsigned long long)e->pinned_bytes);
    *out = e;
    return 0;
fail:
    cuda_close(e);
    return rc;
}

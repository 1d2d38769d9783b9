/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine: the product.
 *
 * Every slot has pinned host buffers (cudaHostAlloc), device buffers, its own
 * non-blocking stream, four timing events and one untimed "done" event.  A
 * frame is one sequence on its slot's stream:
 *
 *   event[0]  H2D copy  event[1]  kernel  event[2]  D2H copy  event[3]  then
 *     completion = host_func:  a host function
 *     completion = poll:       the done event
 *     completion = hybrid:     the done event, and a host function added
 *                              if it is not done GF_COMPLETION_SPIN_NS later
 *
 * A small batch of elementwise stages runs zero-copy (runs_zero_copy): no
 * copies, its kernels read and write the pinned host buffers themselves.
 * With cuda_graphs, an untimed batch of a pipeline of a plugin or of
 * several stages is captured once as a CUDA graph per slot and batch shape
 * and replayed (graph_for): one launch instead of a copy, the stages'
 * kernels and a copy, which costs the GPU and the loop less.
 *
 * The four timing events are recorded only for the frames the scheduler samples
 * (gf_slot.time_stages).  The host function runs on the driver's thread once
 * the D2H copy is done; it only timestamps and pushes the slot onto the
 * completion queue, whose uv_async_send wakes the loop.  In poll mode there is
 * neither the driver thread's hand-off nor the wake-up: the loop calls
 * cuda_poll on every iteration while frames are in flight, and cuda_poll asks
 * each pending slot's done event with cudaEventQuery, which never blocks.
 * Hybrid polls the same way, for GF_COMPLETION_SPIN_NS per submission; one
 * that takes longer gets its host function then, and the loop may sleep.
 * Nothing here blocks the loop after gf__engine_cuda_open returns: submit only
 * enqueues, and finish reads elapsed times of events that have completed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine.h"
#include "kernels.h"
#include "log.h"
#include "plugin.h"
#include "stats.h"

enum { EV_START, EV_H2D, EV_KERNEL, EV_D2H, EV_COUNT };

/* Graphs a slot keeps, the least recently used replaced: the batch shapes
 * that recur (a client's window, the pipeline's max_batch_frames). */
#define GF_GRAPHS_PER_SLOT 16

/* One captured batch: the launches of a batch of this shape on this slot,
 * replayed as they were (addresses in the slot's buffers, lengths). */
typedef struct graph_entry {
    cudaGraphExec_t exec; /* NULL: the entry is free                      */
    int failed;           /* capture refused (a plugin's call that cannot
                             be captured): such batches run plain        */
    uint64_t last_used;   /* the slot's graph clock at its last replay    */
    /* The shape: the stages (a plugin by its serial, never reused), the
     * frames' places and lengths (the rest follows from these). */
    uint32_t stage_count, frame_count;
    gf_stage stages[GF_STAGES_MAX];
    uint64_t serials[GF_STAGES_MAX];
    uint64_t offset[GF_SLOT_FRAMES_MAX], in_bytes[GF_SLOT_FRAMES_MAX];
} graph_entry;

typedef struct cuda_slot {
    gf_engine *engine;
    void *in_dev, *out_dev;
    void *scratch_dev[2]; /* intermediate results of a pipeline of several stages */
    cudaStream_t stream;
    cudaEvent_t ev[EV_COUNT];
    cudaEvent_t stage_ev[GF_STAGES_MAX - 1]; /* timed: after each stage but the last */
    cudaEvent_t done;       /* poll, hybrid: recorded after the D2H copy, untimed   */
    int pending;            /* poll, hybrid: submitted, done not yet seen by a poll */
    uint64_t spin_until_ns; /* hybrid: then a host function takes over     */
    graph_entry *graphs;    /* cuda_graphs: GF_GRAPHS_PER_SLOT of them      */
    uint64_t graph_clock;   /* replays so far: the entries' last_used       */
} cuda_slot;

typedef struct cuda_engine {
    gf_engine base;
    cuda_slot *cslots;
    int device;                   /* gf_engine_params': the CUDA ordinal */
    uint32_t stream_base;         /* gf_engine_params': the first plugin
                                     stream index of these slots          */
    uint32_t device_streams;      /* gf_engine_params': the device's      */
    uint64_t zero_copy_max_bytes; /* gf_engine_params' */
    uint64_t spin_ns;             /* hybrid: GF_COMPLETION_SPIN_NS; else 0 */
} cuda_engine;

/* Logs a failed CUDA call with its text, place and error string; yields the error. */
static cudaError_t check(cudaError_t err, const char *call, const char *file, int line) {
    if (err != cudaSuccess)
        GF_LOG_ERR("engine cuda: %s failed at %s:%d: %s (%s)", call, file, line,
                   cudaGetErrorString(err), cudaGetErrorName(err));
    return err;
}
#define CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

/* The negative errno a failed start-up call stands for: out of memory only
 * when it was, no device when there is none, an I/O error otherwise. */
static int cuda_errno(cudaError_t err) {
    switch (err) {
    case cudaSuccess: return 0;
    case cudaErrorMemoryAllocation: return -ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return -ENODEV;
    default: return -EIO;
    }
}

/*
 * Errors that poison the context: after one, every later call fails and host
 * functions never run again.  The daemon must exit so systemd restarts it.
 */
static int is_sticky(cudaError_t err) {
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown: return 1;
    default: return 0;
    }
}

/* Runs on the driver's host-function thread: no CUDA call, no lock. */
static void CUDART_CB on_stream_done(void *arg) {
    gf_slot *s = arg;
    cuda_slot *cs = s->engine_state;
    s->done_ns = gf_now_ns();
    gf_completion_push(cs->engine->done, s);
}

/* Records event `ev` on the slot's stream when the scheduler asked for this
 * frame's stage times (one frame in timing_sample_every). */
static cudaError_t mark(const gf_slot *s, cuda_slot *cs, int ev) {
    return s->time_stages ? cudaEventRecord(cs->ev[ev], cs->stream) : cudaSuccess;
}

/* Launches stage `st` on the slot's stream: a plugin's launch on this
 * device's side with the slot's own stream index (stream_base + the slot's
 * index: the device's shards never share one), or the built-in kind's
 * kernel. */
static cudaError_t launch_stage(const gf_slot *s, cuda_slot *cs, const gf_stage *st, const void *in,
                                uint64_t in_bytes, void *out) {
    if (gf_kind_is_plugin(st->kind)) {
        const gf_plugin *api = gf_plugin_stage_api(st->params.plugin);
        const cuda_engine *ce = (const cuda_engine *)cs->engine;
        return (cudaError_t)api->launch(gf_plugin_stage_device(st->params.plugin, ce->device),
                                        ce->stream_base + s->index, in, in_bytes, out, cs->stream);
    }
    gf_launch_fn launch = gf_kernel_launcher(st->kind);
    if (launch == NULL) /* refused by gf__engine_cuda_prepare: never here */
        return cudaErrorInvalidDeviceFunction;
    return (cudaError_t)launch(&st->params, in, (size_t)in_bytes, out, cs->stream);
}

/* Launches stage `st` (stage k of the pipeline) for every frame of the slot,
 * each frame's input at `in` + its offset and output at `out` + its offset:
 * a plugin with launch_batch gets them in calls of at most its
 * max_batch_frames, anything else one launch a frame. */
static cudaError_t launch_frames(const gf_slot *s, cuda_slot *cs, const gf_stage *st, uint32_t k,
                                 uint8_t *in, uint8_t *out) {
    const gf_plugin *api =
        gf_kind_is_plugin(st->kind) ? gf_plugin_stage_api(st->params.plugin) : NULL;
    uint32_t per_call = api ? gf_plugin_batch_frames(api) : 0;
    cudaError_t err = cudaSuccess;
    if (per_call == 0) {
        for (uint32_t i = 0; i < s->frame_count && err == cudaSuccess; i++) {
            const gf_frame *f = &s->frames[i];
            uint64_t n = k == 0 ? f->in_bytes : f->stage_bytes[k - 1];
            err = launch_stage(s, cs, st, in + f->offset, n, out + f->offset);
        }
        return err;
    }
    const cuda_engine *ce = (const cuda_engine *)cs->engine;
    void *dev = gf_plugin_stage_device(st->params.plugin, ce->device);
    gf_plugin_frame frames[GF_SLOT_FRAMES_MAX];
    for (uint32_t i = 0; i < s->frame_count; i++) {
        const gf_frame *f = &s->frames[i];
        frames[i] = (gf_plugin_frame){.in_dev = in + f->offset,
                                      .in_bytes = k == 0 ? f->in_bytes : f->stage_bytes[k - 1],
                                      .out_dev = out + f->offset,
                                      .out_bytes = f->stage_bytes[k]};
    }
    for (uint32_t i = 0; i < s->frame_count && err == cudaSuccess; i += per_call) {
        uint32_t n = s->frame_count - i < per_call ? s->frame_count - i : per_call;
        err = (cudaError_t)api->launch_batch(dev, ce->stream_base + s->index, frames + i, n,
                                             cs->stream);
    }
    return err;
}

/* Whether every stage of `p` is elementwise (gf_pipeline_kind.elementwise). */
static int all_elementwise(const gf_pipeline *p) {
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (!p->stages[k].kind->elementwise)
            return 0;
    return 1;
}

/* Whether shm frame `g` lies right after `f` both in their region and in
 * the slot (no byte between them on either side), so that one copy moves
 * both and writes nothing else into the client's region. */
static int region_adjacent(const gf_frame *f, const gf_frame *g, int to_device) {
    uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
    const uint8_t *end = (to_device ? f->src : f->dst) + bytes;
    return g->region == f->region && g->offset == f->offset + bytes &&
           (to_device ? g->src : g->dst) == end;
}

/* Copies the batch's inputs to the device (to_device) or its results back:
 * frames whose host side is the slot's own buffer lie end to end there and
 * go in one copy per run of them; shm frames, in their client's region, go
 * in one copy per run of frames that lie back to back both there and in the
 * slot (a client's consecutive frames of a multiple of 256 bytes do), each
 * on its own otherwise. */
static cudaError_t copy_frames(const gf_slot *s, cuda_slot *cs, int to_device) {
    enum cudaMemcpyKind dir = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    uint8_t *dev = to_device ? cs->in_dev : cs->out_dev;
    uint8_t *host = to_device ? s->in_host : s->out_host;
    for (uint32_t i = 0; i < s->frame_count;) {
        const gf_frame *f = &s->frames[i];
        uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
        const void *from = to_device ? (const void *)f->src : dev + f->offset;
        void *to = to_device ? (void *)(dev + f->offset) : f->dst;
        uint32_t j = i + 1;
        if (f->region != NULL) {
            while (j < s->frame_count &&
                   region_adjacent(&s->frames[j - 1], &s->frames[j], to_device)) {
                bytes += to_device ? s->frames[j].in_bytes : s->frames[j].out_bytes;
                j++;
            }
        } else {
            /* The run of frames in the slot's buffer from here. */
            while (j < s->frame_count && s->frames[j].region == NULL)
                j++;
            const gf_frame *last = &s->frames[j - 1];
            bytes = last->offset + (to_device ? last->in_bytes : last->out_bytes) - f->offset;
            from = to_device ? (const void *)(host + f->offset) : dev + f->offset;
            to = to_device ? (void *)(dev + f->offset) : host + f->offset;
        }
        if (bytes) {
            cudaError_t err = cudaMemcpyAsync(to, from, bytes, dir, cs->stream);
            if (err != cudaSuccess)
                return err;
        }
        i = j;
    }
    return cudaSuccess;
}

/*
 * Whether the batch runs zero-copy: its first stage reads the inputs from
 * the slot's pinned input buffer across the bus and its last stage writes
 * the results into the pinned output buffer, with no copy before or after.
 * A small batch saves the two copies' fixed costs, a few µs of the GPU's
 * and of the loop's time each (docs/design.md, "Small frames").  Only stages that
 * read each byte once (`elementwise`, which only built-in kinds are: a
 * plugin's kernel may read its input many times, each time across the bus)
 * on the slot's own buffers (shm frames lie in their regions, not end to
 * end) qualify.
 * Pinned memory from cudaHostAlloc is addressable by kernels at the same
 * address (unified addressing), and a kernel's writes to it are visible to
 * the host once the stream's later host function or event has run.
 */
static int runs_zero_copy(const cuda_engine *ce, const gf_slot *s, int elementwise) {
    const gf_frame *last = &s->frames[s->frame_count - 1];
    uint64_t in_end = last->offset + last->in_bytes, out_end = last->offset + last->out_bytes;
    if (!elementwise || in_end > ce->zero_copy_max_bytes || out_end > ce->zero_copy_max_bytes)
        return 0;
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (s->frames[i].region != NULL)
            return 0;
    return 1;
}

/*
 * Enqueues the slot's whole batch on its stream: the inputs' copies, each
 * stage's kernels (stage k reads what stage k-1 wrote, intermediate results
 * alternating between the slot's two scratch buffers on the device, each
 * frame at its offset), the results' copies; a zero-copy batch
 * (runs_zero_copy) has no copies, its first and last stages use the host
 * buffers.  A batch of elementwise stages runs as one launch per stage over
 * all its frames, the bytes between them included (GF_FRAME_ALIGN_BYTES);
 * any other runs stage by stage, each stage over every frame: a plugin's
 * launch_batch for all of them, or a launch a frame (launch_frames).
 */
static cudaError_t enqueue(const cuda_engine *ce, gf_slot *s, cuda_slot *cs) {
    const gf_pipeline *p = &s->frames[0].pipeline; /* every frame's */
    const gf_frame *last = &s->frames[s->frame_count - 1];
    int elementwise = all_elementwise(p);
    int whole = s->frame_count == 1 || elementwise;
    s->zero_copy = runs_zero_copy(ce, s, elementwise);
    uint8_t *in_first = s->zero_copy ? s->in_host : cs->in_dev;
    uint8_t *out_last = s->zero_copy ? s->out_host : cs->out_dev;
    cudaError_t err;
    if ((err = mark(s, cs, EV_START)) != cudaSuccess ||
        (!s->zero_copy && (err = copy_frames(s, cs, 1)) != cudaSuccess) ||
        (err = mark(s, cs, EV_H2D)) != cudaSuccess)
        return err;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *st = &p->stages[k];
        uint8_t *in = k == 0 ? in_first : cs->scratch_dev[(k - 1) % 2];
        uint8_t *out = k + 1 == p->stage_count ? out_last : cs->scratch_dev[k % 2];
        if (whole) {
            /* One frame (at offset 0), or all of them as one input. */
            uint64_t n = s->frame_count == 1 ? (k == 0 ? last->in_bytes : last->stage_bytes[k - 1])
                                             : last->offset + last->in_bytes;
            err = launch_stage(s, cs, st, in, n, out);
        } else {
            err = launch_frames(s, cs, st, k, in, out);
        }
        if (err != cudaSuccess)
            return err;
        if (k + 1 < p->stage_count && s->time_stages &&
            (err = cudaEventRecord(cs->stage_ev[k], cs->stream)) != cudaSuccess)
            return err;
    }
    if ((err = mark(s, cs, EV_KERNEL)) != cudaSuccess ||
        (!s->zero_copy && (err = copy_frames(s, cs, 0)) != cudaSuccess))
        return err;
    return mark(s, cs, EV_D2H);
}

/* Whether batch `s` runs from a graph: cuda_graphs on (the slot has
 * graphs), untimed (a timed batch records its events between the stages),
 * every frame in the slot's own buffers (a shm frame's copies are its
 * region's), of a pipeline whose launches cost more than one kernel's:
 * a plugin's, or several stages (an elementwise stage alone is one kernel,
 * or zero-copy), and with no plugin that says GF_PLUGIN_NO_GRAPHS. */
static int runs_from_graph(const cuda_slot *cs, const gf_slot *s) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (!cs->graphs || s->time_stages ||
        (p->stage_count == 1 && !gf_kind_is_plugin(p->stages[0].kind)))
        return 0;
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (gf_kind_is_plugin(p->stages[k].kind) &&
            !gf_plugin_graphs_ok(gf_plugin_stage_api(p->stages[k].params.plugin)))
            return 0;
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (s->frames[i].region != NULL)
            return 0;
    return 1;
}

/* Stage `st`'s serial: its plugin's (gf_plugin_stage_serial), 0 for a built-in kind. */
static uint64_t stage_serial(const gf_stage *st) {
    return gf_kind_is_plugin(st->kind) ? gf_plugin_stage_serial(st->params.plugin) : 0;
}

/* Whether `g` is the graph of batch `s`. */
static int same_shape(const graph_entry *g, const gf_slot *s) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (!g->exec && !g->failed)
        return 0;
    if (g->frame_count != s->frame_count || g->stage_count != p->stage_count ||
        memcmp(g->stages, p->stages, p->stage_count * sizeof p->stages[0]) != 0)
        return 0;
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (g->serials[k] != stage_serial(&p->stages[k]))
            return 0;
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (g->offset[i] != s->frames[i].offset || g->in_bytes[i] != s->frames[i].in_bytes)
            return 0;
    return 1;
}

/* Captures batch `s`'s launches into `g`, replacing what it held.  A
 * failure leaves `g` marked failed (those batches run plain) and the
 * stream out of capture. */
static void capture(const cuda_engine *ce, gf_slot *s, cuda_slot *cs, graph_entry *g) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    g->exec = NULL;
    g->failed = 1;
    g->stage_count = p->stage_count;
    g->frame_count = s->frame_count;
    memcpy(g->stages, p->stages, p->stage_count * sizeof p->stages[0]);
    for (uint32_t k = 0; k < p->stage_count; k++)
        g->serials[k] = stage_serial(&p->stages[k]);
    for (uint32_t i = 0; i < s->frame_count; i++) {
        g->offset[i] = s->frames[i].offset;
        g->in_bytes[i] = s->frames[i].in_bytes;
    }
    cudaGraph_t graph = NULL;
    if (cudaStreamBeginCapture(cs->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    cudaError_t err = enqueue(ce, s, cs);
    cudaError_t end = cudaStreamEndCapture(cs->stream, &graph);
    if (err == cudaSuccess && end == cudaSuccess &&
        cudaGraphInstantiate(&g->exec, graph, 0) == cudaSuccess)
        g->failed = 0;
    else
        g->exec = NULL;
    if (graph)
        cudaGraphDestroy(graph);
    if (g->failed) {
        cudaGetLastError();
        GF_LOG_WRN("engine cuda: pipeline %s: a batch of %u frame(s) could not be captured as a "
                   "CUDA graph (%s); batches of its shape run without one",
                   p->name, s->frame_count, cudaGetErrorString(err ? err : end));
    }
}

/* The graph of batch `s` on its slot: found, or captured in the least
 * recently used entry; NULL when its shape cannot be captured. */
static cudaGraphExec_t graph_for(const cuda_engine *ce, gf_slot *s, cuda_slot *cs) {
    graph_entry *lru = &cs->graphs[0];
    for (int i = 0; i < GF_GRAPHS_PER_SLOT; i++) {
        graph_entry *g = &cs->graphs[i];
        if (same_shape(g, s)) {
            lru = g;
            goto found;
        }
        if (g->last_used < lru->last_used)
            lru = g;
    }
    capture(ce, s, cs, lru);
found:
    lru->last_used = ++cs->graph_clock;
    s->zero_copy = runs_zero_copy(ce, s, all_elementwise(&s->frames[0].pipeline));
    return lru->exec;
}

static int cuda_submit(gf_engine *e, gf_slot *s) {
    cuda_engine *ce = (cuda_engine *)e;
    cuda_slot *cs = s->engine_state;
    cudaGraphExec_t exec = runs_from_graph(cs, s) ? graph_for(ce, s, cs) : NULL;
    s->graphed = exec != NULL;
    cudaError_t err = exec ? cudaGraphLaunch(exec, cs->stream) : enqueue(ce, s, cs);
    if (err == cudaSuccess)
        err = e->polled ? cudaEventRecord(cs->done, cs->stream)
                        : cudaLaunchHostFunc(cs->stream, on_stream_done, s);
    if (err == cudaSuccess) {
        cs->pending = e->polled;
        cs->spin_until_ns = ce->spin_ns ? s->submitted_ns + ce->spin_ns : 0;
        return 0;
    }
    GF_LOG_ERR("engine cuda: %u frame(s) from %llu (%s, %llu bytes first) on slot %u not "
               "started: %s (%s)",
               s->frame_count, (unsigned long long)s->frames[0].frame_id,
               s->frames[0].pipeline.name, (unsigned long long)s->frames[0].in_bytes, s->index,
               cudaGetErrorString(err), cudaGetErrorName(err));
    if (is_sticky(err))
        e->poisoned = 1;
    else
        cudaGetLastError(); /* a launch error is not sticky: clear it */
    /*
     * Work already enqueued before the failure still runs and reads this
     * slot's buffers; the scheduler must not hand the slot to another frame
     * until it is idle.  Enqueueing nothing after a failure keeps that
     * window short; it is closed for good by the next frame's ordering on
     * the same stream.
     */
    return -EIO;
}

/*
 * Hybrid: slot `s` has run past its spin window; a host function completes
 * it from now on, and the loop stops polling it.  If that cannot be
 * enqueued, polling goes on for as long as it takes.
 */
static void hand_to_host_func(gf_engine *e, gf_slot *s, cuda_slot *cs) {
    cudaError_t err = cudaLaunchHostFunc(cs->stream, on_stream_done, s);
    if (err == cudaSuccess) {
        cs->pending = 0;
        return;
    }
    GF_LOG_ERR("engine cuda: slot %u: cudaLaunchHostFunc: %s (%s); polling it instead", s->index,
               cudaGetErrorString(err), cudaGetErrorName(err));
    if (is_sticky(err))
        e->poisoned = 1;
    else
        cudaGetLastError();
    cs->spin_until_ns = 0;
}

/*
 * Poll and hybrid, on the loop: every pending slot whose done event has
 * completed goes to the loop at once; in hybrid, one whose spin window has
 * passed goes to a host function.  An error other than "not ready" leaves
 * the slot pending-less and in flight: a sticky one poisons the engine, and
 * the shard's watchdog fails the frame and stops the daemon, as it does
 * when a host function never runs.  Returns the slots still polled, counted
 * last: handing a slot to the loop may submit another.
 */
static uint32_t cuda_poll(gf_engine *e) {
    cuda_engine *ce = (cuda_engine *)e;
    uint64_t now = 0;
    for (uint32_t i = 0; i < e->slot_count; i++) {
        cuda_slot *cs = &ce->cslots[i];
        if (!cs->pending)
            continue;
        cudaError_t err = cudaEventQuery(cs->done);
        if (err == cudaErrorNotReady) {
            if (cs->spin_until_ns && (now ? now : (now = gf_now_ns())) >= cs->spin_until_ns)
                hand_to_host_func(e, &e->slots[i], cs);
            continue;
        }
        cs->pending = 0;
        if (err != cudaSuccess) {
            GF_LOG_ERR("engine cuda: slot %u: cudaEventQuery: %s (%s)", i, cudaGetErrorString(err),
                       cudaGetErrorName(err));
            e->poisoned |= is_sticky(err);
            continue;
        }
        e->slots[i].done_ns = gf_now_ns();
        gf_completion_deliver(e->done, &e->slots[i]);
    }
    uint32_t polling = 0;
    for (uint32_t i = 0; i < e->slot_count; i++)
        polling += (uint32_t)ce->cslots[i].pending;
    return polling;
}

static uint64_t elapsed_ns(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.0f;
    /* Both events have completed (the host function ran after them), so this
     * does not block. */
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

/*
 * Places the stages on the host clock: the stream was idle when the batch
 * was submitted, so its first event ran within a few µs of submitted_ns; the
 * events give the rest.  Every frame of a batch gets the batch's times.
 * Without timing, only the host function's time is known.
 */
static void cuda_finish(gf_engine *e, gf_slot *s) {
    cuda_slot *cs = s->engine_state;
    gf_stage_times times = {.gpu_done_ns = s->done_ns}, *t = &times;
    (void)e;
    for (uint32_t i = 0; !s->time_stages && i < s->frame_count; i++) {
        s->frames[i].status = GF_OK;
        s->frames[i].stages = times;
    }
    if (!s->time_stages)
        return;
    t->timed = 1;
    t->h2d_begin_ns = s->submitted_ns;
    t->h2d_end_ns = t->h2d_begin_ns + elapsed_ns(cs->ev[EV_START], cs->ev[EV_H2D]);
    t->kernel_begin_ns = t->h2d_end_ns;
    t->kernel_end_ns = t->kernel_begin_ns + elapsed_ns(cs->ev[EV_H2D], cs->ev[EV_KERNEL]);
    /* Each stage's share of the kernel phase, from the events between them. */
    uint32_t n = s->frames[0].pipeline.stage_count;
    t->kernel_stages = n > 1 ? n : 0;
    for (uint32_t k = 0; n > 1 && k < n; k++)
        t->kernel_stage_ns[k] = elapsed_ns(k == 0 ? cs->ev[EV_H2D] : cs->stage_ev[k - 1],
                                           k + 1 == n ? cs->ev[EV_KERNEL] : cs->stage_ev[k]);
    t->d2h_begin_ns = t->kernel_end_ns;
    t->d2h_end_ns = t->d2h_begin_ns + elapsed_ns(cs->ev[EV_KERNEL], cs->ev[EV_D2H]);
    t->gpu_done_ns = t->d2h_end_ns;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        s->frames[i].status = GF_OK;
        s->frames[i].stages = times;
    }
}

static void free_slot(cuda_slot *cs, gf_slot *s) {
    for (int i = 0; i < EV_COUNT; i++)
        if (cs->ev[i])
            cudaEventDestroy(cs->ev[i]);
    for (int i = 0; i < GF_STAGES_MAX - 1; i++)
        if (cs->stage_ev[i])
            cudaEventDestroy(cs->stage_ev[i]);
    if (cs->done)
        cudaEventDestroy(cs->done);
    for (int i = 0; cs->graphs && i < GF_GRAPHS_PER_SLOT; i++)
        if (cs->graphs[i].exec)
            cudaGraphExecDestroy(cs->graphs[i].exec);
    free(cs->graphs);
    if (cs->stream)
        cudaStreamDestroy(cs->stream);
    cudaFree(cs->in_dev);
    cudaFree(cs->out_dev);
    cudaFree(cs->scratch_dev[0]);
    cudaFree(cs->scratch_dev[1]);
    cudaFreeHost(s->in_host);
    cudaFreeHost(s->out_host);
}

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
 * measured 53-55 GB/s from them on an H200).  Worker thread: the call takes
 * about 1.3 ms per MiB, and a thread starts on device 0 unless told. */
static int cuda_pin(gf_engine *e, void *base, uint64_t bytes, char *why, size_t why_len) {
    cuda_engine *ce = (cuda_engine *)e;
    cudaError_t err = cudaSetDevice(ce->device);
    if (err == cudaSuccess)
        err = cudaHostRegister(base, (size_t)bytes, cudaHostRegisterPortable);
    if (err == cudaSuccess)
        return 0;
    gf_errorf(why, why_len, "cudaHostRegister of %llu bytes failed: %s", (unsigned long long)bytes,
              cudaGetErrorString(err));
    (void)cudaGetLastError(); /* not sticky: clear it for this thread */
    return -ENOMEM;
}

static void cuda_unpin(gf_engine *e, void *base) {
    cuda_engine *ce = (cuda_engine *)e;
    if (cudaSetDevice(ce->device) != cudaSuccess || cudaHostUnregister(base) != cudaSuccess) {
        GF_LOG_WRN("engine cuda: cudaHostUnregister: %s", cudaGetErrorString(cudaGetLastError()));
    }
}

/* Every built-in stage must have a kernel, every plugin stage its device side
 * (opened here, on `device`, for `device_streams` stream indices).  The
 * calling thread's current device becomes `device`: a shard's own at
 * start-up, a worker of the thread pool for a reload.  Returns 0, or -1 (or
 * a plugin's GF_PLUGIN_OPEN_FAILED_BEFORE) with why[]. */
int gf__engine_cuda_prepare(int device, uint32_t device_streams, gf_pipeline *pipelines,
                            size_t count, char *why, size_t why_len) {
    char inner[384];
    if (cudaSetDevice(device) != cudaSuccess) {
        snprintf(why, why_len, "cudaSetDevice(%d) failed", device);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        gf_pipeline *p = &pipelines[i];
        for (uint32_t k = 0; k < p->stage_count; k++) {
            gf_stage *st = &p->stages[k];
            if (gf_kind_is_plugin(st->kind)) {
                int rc = gf_plugin_stage_open_device(st->params.plugin, device, device_streams,
                                                     inner, sizeof inner);
                if (rc < 0) {
                    snprintf(why, why_len, "pipeline %s: %s", p->name, inner);
                    return rc;
                }
            } else if (gf_kernel_launcher(st->kind) == NULL) {
                snprintf(why, why_len, "pipeline %s: kind %s has no CUDA kernel", p->name,
                         st->kind->name);
                return -1;
            }
        }
    }
    return 0;
}

static const gf_engine_ops cuda_ops = {.name = "cuda",
                                       .submit = cuda_submit,
                                       .finish = cuda_finish,
                                       .close = cuda_close,
                                       .poll = cuda_poll,
                                       .pin = cuda_pin,
                                       .unpin = cuda_unpin};

/* Allocates one slot's memory, stream and events.  Returns 0 or a negative
 * errno (cuda_errno) with the failed call logged. */
static int open_slot(const gf_engine_params *p, gf_engine *e, gf_slot *s, cuda_slot *cs) {
    /* cudaHostAlloc(0 bytes) fails; a slot always has at least one byte. */
    size_t in_b = p->in_capacity_bytes ? p->in_capacity_bytes : 1;
    size_t out_b = p->out_capacity_bytes ? p->out_capacity_bytes : 1;
    cs->engine = e;
    s->engine_state = cs;
    s->in_capacity_bytes = p->in_capacity_bytes;
    s->out_capacity_bytes = p->out_capacity_bytes;
    s->scratch_capacity_bytes = p->scratch_capacity_bytes;
    cudaError_t err;
    if ((err = CUDA_CHECK(cudaHostAlloc((void **)&s->in_host, in_b, cudaHostAllocDefault))) ||
        (err = CUDA_CHECK(cudaHostAlloc((void **)&s->out_host, out_b, cudaHostAllocDefault))) ||
        (err = CUDA_CHECK(cudaMalloc(&cs->in_dev, in_b))) ||
        (err = CUDA_CHECK(cudaMalloc(&cs->out_dev, out_b))) ||
        (p->scratch_capacity_bytes &&
         ((err = CUDA_CHECK(cudaMalloc(&cs->scratch_dev[0], p->scratch_capacity_bytes))) ||
          (err = CUDA_CHECK(cudaMalloc(&cs->scratch_dev[1], p->scratch_capacity_bytes))))) ||
        (err = CUDA_CHECK(cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking))))
        return cuda_errno(err);
    for (int i = 0; i < EV_COUNT; i++)
        if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->ev[i], cudaEventDefault))))
            return cuda_errno(err);
    for (int i = 0; i < GF_STAGES_MAX - 1; i++)
        if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->stage_ev[i], cudaEventDefault))))
            return cuda_errno(err);
    if ((err = CUDA_CHECK(cudaEventCreateWithFlags(&cs->done, cudaEventDisableTiming))))
        return cuda_errno(err);
    if (p->cuda_graphs && !(cs->graphs = calloc(GF_GRAPHS_PER_SLOT, sizeof *cs->graphs)))
        return -ENOMEM;
    e->pinned_bytes += in_b + out_b;
    return 0;
}

/*
 * Runs every pipeline once on slot 0 and waits, so that module loading and
 * first-launch costs are paid before the daemon says it is ready.
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
        cudaError_t err = CUDA_CHECK(enqueue(ce, s, cs));
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

int gf__engine_cuda_open(const gf_engine_params *p, gf_completion *done, gf_engine **out) {
    char why[256];
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
    ce->spin_ns = p->completion == GF_COMPLETION_HYBRID ? GF_COMPLETION_SPIN_NS : 0;
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
    describe_device(&e->device, &prop, ce->device);
    char desc[512];
    gf_engine_describe(e, desc, sizeof desc);
    GF_LOG_INF("engine cuda: %s; %u slots, each %llu bytes in and %llu bytes out (2 x %llu "
               "bytes of scratch on the device), pinned %llu bytes in all",
               desc, p->slot_count, (unsigned long long)p->in_capacity_bytes,
               (unsigned long long)p->out_capacity_bytes,
               (unsigned long long)p->scratch_capacity_bytes, (unsigned long long)e->pinned_bytes);
    *out = e;
    return 0;
fail:
    cuda_close(e);
    return rc;
}

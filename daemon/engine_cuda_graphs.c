/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's graph cache (engine_cuda_graphs.h).  The shard's loop:
 * a capture and its instantiation happen at a batch's first submission of
 * its shape, on the loop, and never wait for the device.
 */
#include "engine_cuda_graphs.h"

#include <stdlib.h>
#include <string.h>

#include "engine_cuda_launch.h"
#include "plugin.h"
#include "util.h"

/* Graphs a slot keeps, the least recently used replaced: the batch shapes
 * that recur (a client's window, the pipeline's max_batch_frames; at a
 * pool's home, pool.h, batches of every size up to max_batch_frames, made
 * of other shards' batches).  About 3 KB of host memory each. */
#define GF_GRAPHS_PER_SLOT 64

/* Captures of one shape, in all, that may be broken from outside before
 * the shape is given up: cudaErrorStreamCaptureInvalidated with no error
 * from the batch's own calls, seen on an H200 (test_plugins_gpu, twice in
 * 16 ms, once in many runs) as a reload opened and closed plugins' device
 * sides on other threads beside the capture.  Such a shape runs plain for
 * GF_CAPTURE_RETRY_NS, then is captured again (a reload's calls are
 * likely over by then), while a plugin that breaks every capture itself is
 * given up within a few tenths of a second. */
#define GF_CAPTURE_TRIES    3
#define GF_CAPTURE_RETRY_NS 100000000u

/* One captured batch: the launches of a batch of this shape on this slot,
 * replayed as they were (addresses in the slot's buffers, lengths). */
struct graph_entry {
    cudaGraphExec_t exec; /* NULL: the entry is free                      */
    int failed;           /* capture refused (a plugin's call that cannot
                             be captured): such batches run plain        */
    unsigned invalidated; /* captures of this shape broken from outside
                             in a row: tried again below GF_CAPTURE_TRIES */
    uint64_t retry_ns;    /* not before then (gf_now_ns)                  */
    uint64_t last_used;   /* the slot's graph clock at its last replay    */
    int with_copies;      /* it holds the batch's copies too (its frames
                             are in the slot's own buffers), or only its
                             stages (frames of another shard's slots)     */
    /* The shape: the stages (a plugin by its serial, never reused), the
     * frames' places and lengths (the rest follows from these). */
    uint32_t stage_count, frame_count;
    gf_stage stages[GF_STAGES_MAX];
    uint64_t serials[GF_STAGES_MAX];
    uint64_t offset[GF_SLOT_FRAMES_MAX], in_bytes[GF_SLOT_FRAMES_MAX];
    /* A device frame's input and output in its region (0 for any other):
     * the launches read and write there, so they are part of the shape. */
    uintptr_t src[GF_SLOT_FRAMES_MAX], dst[GF_SLOT_FRAMES_MAX];
};

/* Whether batch `s` runs from a graph: cuda_graphs on (the slot has
 * graphs), untimed (a timed batch records its events between the stages),
 * of a pipeline whose launches cost more than one kernel's: a plugin's, or
 * several stages (an elementwise stage alone is one kernel, or zero-copy),
 * and with no plugin that says GF_PLUGIN_NO_GRAPHS.  A device frame's
 * addresses in its region, stable while it is mapped, are part of the
 * shape; an shm frame's are not (copies_in_graph). */
static int runs_from_graph(const cuda_slot *cs, const gf_slot *s) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (!cs->graphs || s->time_stages ||
        (p->stage_count == 1 && p->stages[0].params.plugin == NULL))
        return 0;
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (p->stages[k].params.plugin != NULL &&
            !gf_plugin_graphs_ok(gf_plugin_stage_api(p->stages[k].params.plugin)))
            return 0;
    return 1;
}

/* Whether batch `s`'s graph holds its copies: every frame in the slot's own
 * buffers (or a device frame).  Frames of another shard's slots (pool.h)
 * and shm frames, in their clients' regions, are moved from and to those
 * before and after a graph of the stages alone (gf__cuda_copy), whose
 * shape is the same wherever they came from: the spectrogram's 16 clients
 * of shared-memory frames submitted a batch in 71 to 100 us of the loop's
 * time in plain launches (an H200, 4 and 8 shards). */
static int copies_in_graph(const gf_slot *s) {
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (!s->frames[i].on_device &&
            !gf_frame_in_slot_buffers(&s->frames[i], s->in_host, s->out_host))
            return 0;
    return 1;
}

/* Where device frame `f`'s pipeline reads (`in`) or writes in its region;
 * 0 for a frame in the slot's buffers. */
static uintptr_t device_at(const gf_frame *f, int in) {
    return f->on_device ? (uintptr_t)(in ? f->src : f->dst) : 0;
}

/* Stage `st`'s serial: its plugin stage's (gf_plugin_stage_serial), 0 for
 * a built-in kind without one. */
static uint64_t stage_serial(const gf_stage *st) {
    return st->params.plugin ? gf_plugin_stage_serial(st->params.plugin) : 0;
}

/* Whether `g` is the graph of batch `s`, whose copies go in it or not
 * (`with_copies`). */
static int same_shape(const graph_entry *g, const gf_slot *s, int with_copies) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (!g->exec && !g->failed)
        return 0;
    if (g->with_copies != with_copies || g->frame_count != s->frame_count ||
        g->stage_count != p->stage_count ||
        memcmp(g->stages, p->stages, p->stage_count * sizeof p->stages[0]) != 0)
        return 0;
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (g->serials[k] != stage_serial(&p->stages[k]))
            return 0;
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (g->offset[i] != s->frames[i].offset || g->in_bytes[i] != s->frames[i].in_bytes ||
            g->src[i] != device_at(&s->frames[i], 1) || g->dst[i] != device_at(&s->frames[i], 0))
            return 0;
    return 1;
}

/* Captures batch `s`'s launches into `g`, replacing what it held; `tries`
 * is how many captures of this shape were broken from outside before.  A
 * failure leaves `g` marked failed (those batches run plain) and the
 * stream out of capture: for good, with a warning, unless another thread
 * broke it and the shape has tries left (g->invalidated). */
static void capture(const cuda_engine *ce, gf_slot *s, cuda_slot *cs, graph_entry *g,
                    int with_copies, unsigned tries) {
    const gf_pipeline *p = &s->frames[0].pipeline;
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    g->exec = NULL;
    g->failed = 1;
    g->invalidated = 0;
    g->with_copies = with_copies;
    g->stage_count = p->stage_count;
    g->frame_count = s->frame_count;
    memcpy(g->stages, p->stages, p->stage_count * sizeof p->stages[0]);
    for (uint32_t k = 0; k < p->stage_count; k++)
        g->serials[k] = stage_serial(&p->stages[k]);
    for (uint32_t i = 0; i < s->frame_count; i++) {
        g->offset[i] = s->frames[i].offset;
        g->in_bytes[i] = s->frames[i].in_bytes;
        g->src[i] = device_at(&s->frames[i], 1);
        g->dst[i] = device_at(&s->frames[i], 0);
    }
    cudaGraph_t graph = NULL;
    cudaError_t begin = cudaStreamBeginCapture(cs->stream, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
        cudaGetLastError();
        GF_LOG_WRN("engine cuda: pipeline %s: a batch of %u frame(s) could not begin a CUDA "
                   "graph's capture (%s); batches of its shape run without one",
                   p->name, s->frame_count, cudaGetErrorString(begin));
        return;
    }
    cudaError_t err = with_copies ? gf__cuda_enqueue(ce, s, cs) : gf__cuda_enqueue_stages(s, cs);
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
        if ((err ? err : end) == cudaErrorStreamCaptureInvalidated &&
            tries + 1 < GF_CAPTURE_TRIES) {
            g->invalidated = tries + 1;
            g->retry_ns = gf_now_ns() + GF_CAPTURE_RETRY_NS;
            GF_LOG_DBG("engine cuda: pipeline %s: capture %u of %u of a batch of %u frame(s) "
                       "was broken from outside; its shape runs plain, and is captured again "
                       "in %u ms",
                       p->name, tries + 1, GF_CAPTURE_TRIES, s->frame_count,
                       GF_CAPTURE_RETRY_NS / 1000000u);
            return;
        }
        GF_LOG_WRN("engine cuda: pipeline %s: a batch of %u frame(s) could not be captured as a "
                   "CUDA graph (%s); batches of its shape run without one",
                   p->name, s->frame_count, cudaGetErrorString(err ? err : end));
    }
}

/* The graph of batch `s` on its slot: found, or captured in the least
 * recently used entry; NULL when its shape cannot be captured. */
static cudaGraphExec_t graph_for(const cuda_engine *ce, gf_slot *s, cuda_slot *cs,
                                 int with_copies) {
    graph_entry *lru = &cs->graphs[0];
    for (int i = 0; i < GF_GRAPHS_PER_SLOT; i++) {
        graph_entry *g = &cs->graphs[i];
        if (same_shape(g, s, with_copies)) {
            lru = g;
            if (g->failed && g->invalidated && gf_now_ns() >= g->retry_ns)
                capture(ce, s, cs, g, with_copies, g->invalidated);
            goto found;
        }
        if (g->last_used < lru->last_used)
            lru = g;
    }
    capture(ce, s, cs, lru, with_copies, 0);
found:
    lru->last_used = ++cs->graph_clock;
    gf__cuda_plan_moves(ce, s, with_copies);
    return lru->exec;
}

cudaGraphExec_t gf__cuda_graph(const cuda_engine *ce, gf_slot *s, cuda_slot *cs, int *with_copies) {
    if (!runs_from_graph(cs, s))
        return NULL;
    *with_copies = copies_in_graph(s);
    return graph_for(ce, s, cs, *with_copies);
}

int gf__cuda_graphs_open(cuda_slot *cs) {
    cs->graphs = calloc(GF_GRAPHS_PER_SLOT, sizeof *cs->graphs);
    return cs->graphs ? 0 : -ENOMEM;
}

void gf__cuda_graphs_close(cuda_slot *cs) {
    for (int i = 0; cs->graphs && i < GF_GRAPHS_PER_SLOT; i++)
        if (cs->graphs[i].exec)
            cudaGraphExecDestroy(cs->graphs[i].exec);
    free(cs->graphs);
    cs->graphs = NULL;
}

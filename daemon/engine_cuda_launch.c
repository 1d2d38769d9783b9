/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine: a batch's copies and launches on its slot's stream
 * (engine_cuda_launch.h).  The shard's loop, or its thread at start-up
 * (the warm-up); nothing here waits for the device.
 */
#include "engine_cuda_launch.h"

#include <assert.h>

#include "kernels.h"
#include "plugin.h"

/* Records event `ev` on the slot's stream when the scheduler asked for this
 * frame's stage times (one frame in timing_sample_every). */
static cudaError_t mark(const gf_slot *s, cuda_slot *cs, int ev) {
    return s->time_stages ? cudaEventRecord(cs->ev[ev], cs->busy) : cudaSuccess;
}

/* Launches stage `st` on the slot's stream: a plugin's launch (a plugin
 * kind's, or a device_api kind's built-in one: the stage holds a plugin
 * stage) on this device's side with the slot's own stream index
 * (stream_base + the slot's index: the device's shards never share one), or
 * the built-in kind's kernel. */
static cudaError_t launch_stage(const gf_slot *s, cuda_slot *cs, const gf_stage *st, const void *in,
                                uint64_t in_bytes, void *out) {
    if (st->params.plugin != NULL) {
        const gf_plugin *api = gf_plugin_stage_api(st->params.plugin);
        const cuda_engine *ce = (const cuda_engine *)cs->engine;
        assert(cs->busy == cs->stream); /* a plugin's index has one stream */
        return (cudaError_t)api->launch(gf_plugin_stage_device(st->params.plugin, ce->device),
                                        ce->stream_base + s->index, in, in_bytes, out, cs->stream);
    }
    gf_launch_fn launch = gf_kernel_launcher(st->kind);
    if (launch == NULL) /* refused by gf__engine_cuda_prepare: never here */
        return cudaErrorInvalidDeviceFunction;
    return (cudaError_t)launch(&st->params, in, (size_t)in_bytes, out, cs->busy);
}

/* Where frame `f` is read by stage k: a device frame's first stage reads
 * its region in place; any other, `in` + its offset. */
static const uint8_t *frame_in(const gf_frame *f, uint32_t k, const uint8_t *in) {
    return k == 0 && f->on_device ? f->src : in + f->offset;
}

/* Where stage k of `f`'s pipeline writes: a device frame's last stage into
 * its region in place; any other, `out` + its offset. */
static uint8_t *frame_out(const gf_frame *f, uint32_t k, uint8_t *out) {
    return k + 1 == f->pipeline.stage_count && f->on_device ? f->dst : out + f->offset;
}

/* Launches stage `st` (stage k of the pipeline) for every frame of the slot,
 * each frame's input at `in` + its offset and output at `out` + its offset
 * (a device frame's first input and last output in its region: frame_in,
 * frame_out): a plugin with launch_batch gets them in calls of at most its
 * max_batch_frames, anything else one launch a frame. */
static cudaError_t launch_frames(const gf_slot *s, cuda_slot *cs, const gf_stage *st, uint32_t k,
                                 uint8_t *in, uint8_t *out) {
    const gf_plugin *api = st->params.plugin ? gf_plugin_stage_api(st->params.plugin) : NULL;
    uint32_t per_call = api ? gf_plugin_batch_frames(api) : 0;
    cudaError_t err = cudaSuccess;
    if (per_call == 0) {
        for (uint32_t i = 0; i < s->frame_count && err == cudaSuccess; i++) {
            const gf_frame *f = &s->frames[i];
            uint64_t n = k == 0 ? f->in_bytes : f->stage_bytes[k - 1];
            err = launch_stage(s, cs, st, frame_in(f, k, in), n, frame_out(f, k, out));
        }
        return err;
    }
    const cuda_engine *ce = (const cuda_engine *)cs->engine;
    void *dev = gf_plugin_stage_device(st->params.plugin, ce->device);
    gf_plugin_frame frames[GF_SLOT_FRAMES_MAX];
    for (uint32_t i = 0; i < s->frame_count; i++) {
        const gf_frame *f = &s->frames[i];
        frames[i] = (gf_plugin_frame){.in_dev = frame_in(f, k, in),
                                      .in_bytes = k == 0 ? f->in_bytes : f->stage_bytes[k - 1],
                                      .out_dev = frame_out(f, k, out),
                                      .out_bytes = f->stage_bytes[k]};
    }
    for (uint32_t i = 0; i < s->frame_count && err == cudaSuccess; i += per_call) {
        uint32_t n = s->frame_count - i < per_call ? s->frame_count - i : per_call;
        err = (cudaError_t)api->launch_batch(dev, ce->stream_base + s->index, frames + i, n,
                                             cs->stream);
    }
    return err;
}

/* Where shm frame `f`'s bytes of that direction lie in its region. */
static const uint8_t *region_side(const gf_frame *f, int to_device) {
    return to_device ? f->src : f->dst;
}

/* Whether shm frame `g` lies right after `f` both in their region and in
 * the slot (no byte between them on either side), so that one copy moves
 * both and writes nothing else into the client's region. */
static int region_adjacent(const gf_frame *f, const gf_frame *g, int to_device) {
    uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
    return g->region == f->region && g->offset == f->offset + bytes &&
           region_side(g, to_device) == region_side(f, to_device) + bytes;
}

/* Whether shm frame `g` comes `*region_pitch` bytes after `f` in their
 * region and `*slot_pitch` after it in the slot (0: set from this pair),
 * with as many bytes of that direction, each pitch at least that many and
 * at most `max_pitch`: one 2D copy moves a run of such frames and writes
 * nothing between them into the client's region.  A client's consecutive
 * frames lie one entry apart, their inputs at a page-rounded stride
 * (gf_client_shm_open). */
static int region_pitched(const gf_frame *f, const gf_frame *g, int to_device, uint64_t max_pitch,
                          uint64_t *region_pitch, uint64_t *slot_pitch) {
    uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
    const uint8_t *a = region_side(f, to_device), *b = region_side(g, to_device);
    if (g->region != f->region || (to_device ? g->in_bytes : g->out_bytes) != bytes ||
        b < a + bytes || g->offset < f->offset + bytes || (uint64_t)(b - a) > max_pitch ||
        g->offset - f->offset > max_pitch)
        return 0;
    uint64_t rp = (uint64_t)(b - a), sp = g->offset - f->offset;
    if (*region_pitch == 0) {
        *region_pitch = rp;
        *slot_pitch = sp;
    }
    return rp == *region_pitch && sp == *slot_pitch;
}

/* Whether the run of frames [i, j) of `s` lie at one stride with one
 * length each (`bytes`, the direction's) and the gaps between them would
 * be most of one copy over them all: a frame's input (or result) much
 * shorter than its largest length (an image normalised to float, a model's
 * classes), then one 2D copy moves the frames alone. */
static int strided_run(const gf_slot *s, uint32_t i, uint32_t j, int to_device, uint64_t *stride) {
    const gf_frame *f = &s->frames[i];
    uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
    if (j - i < 2)
        return 0;
    *stride = s->frames[i + 1].offset - f->offset;
    if (*stride < 2 * bytes)
        return 0;
    for (uint32_t k = i + 1; k < j; k++) {
        const gf_frame *g = &s->frames[k];
        if ((to_device ? g->in_bytes : g->out_bytes) != bytes ||
            g->offset - s->frames[k - 1].offset != *stride)
            return 0;
    }
    return 1;
}

/* A device frame whose input and result are at most this many bytes is
 * gathered into the slot in a batch of an elementwise pipeline (gathers: a
 * block copies 64 KiB in about a microsecond; a launch costs a few). */
#define GATHER_MAX_BYTES (64u << 10)
/* An shm frame whose input and result are at most this many bytes moves
 * by kernel in a batch whose shm frames would take several copies
 * (host_gathers): a copy costs the copy engine about 3.5 us however small
 * (16 of 32,000 bytes took 57 us on an H200), the kernel reads them all
 * across the bus at once.  Measured on an H200 with 4 KiB and 32,000-byte
 * frames (1.8x and 1.9-2.8x the frames/s from 16 and 64 clients); larger
 * ones keep their copies until measured. */
#define HOST_GATHER_MAX_BYTES (32u << 10)
/* The bytes a copy of a batch's small shm frames moves on average below
 * which one kernel moves them instead, when they would take several
 * (host_gathers): the copy engines leave the SMs to the stages, and a copy
 * of rows costs about what one of a frame does.  On an H200, same run, 16
 * clients' spectrograms (32,000 bytes in, 25,856 out) at window 64 went
 * 1.10 M frames/s with 256 KiB against 0.77 M with a kernel for any two
 * copies, 1.10 M with 128 KiB, 1.08-1.10 M with 64 KiB; at window 16 0.70-0.72
 * M against 0.60-0.62, 0.65-0.68 and 0.65; 32,000-byte echo 0.89 M against
 * 0.85, 0.77-0.79 and 0.76-0.77. */
#define HOST_GATHER_COPY_BYTES (256u << 10)
_Static_assert(GF_SLOT_FRAMES_MAX <= GF_COPIES_MAX, "one gf_copies_launch moves a whole batch");

/* Whether shm frame `f` may be moved by a kernel: the engine's kernels
 * reach registered memory at its host address (host_pointers), the frame
 * is small, and both its ends, in the region and in the slot, are whole
 * 16-byte vectors (gf_copies_launch moves bytes one by one otherwise, each
 * a trip across the bus). */
static int host_gatherable(const cuda_engine *ce, const gf_frame *f) {
    return ce->host_pointers && f->region != NULL && !f->on_device &&
           f->in_bytes <= HOST_GATHER_MAX_BYTES && f->out_bytes <= HOST_GATHER_MAX_BYTES &&
           ((uintptr_t)f->src | (uintptr_t)f->dst | (uintptr_t)f->offset) % 16 == 0;
}

/* Whether frame `f` of `s` moves by gf_copies_launch in that direction
 * (move_frames) rather than by a copy: a device frame of a batch that
 * gathers, an shm frame of a batch that gathers its shm frames that way
 * (host_gathers). */
static int moved_by_kernel(const cuda_engine *ce, const gf_slot *s, const gf_frame *f,
                           int to_device) {
    if (f->on_device)
        return s->gathered;
    return (s->host_gathered & (to_device ? GF_HOST_GATHER_IN : GF_HOST_GATHER_OUT)) &&
           host_gatherable(ce, f);
}

/* Where frame `f`'s host side (its input, or its result) would put the
 * slot's offset 0: frames with one such base lie in one buffer as they lie
 * in the slot (the slot's own buffer, or another shard's slot: pool.h). */
static uintptr_t host_base(const gf_frame *f, int to_device) {
    return (uintptr_t)(to_device ? f->src : f->dst) - f->offset;
}

/* What one copy of a run of shm frames moves: `rows` rows of `bytes`, at
 * `region_pitch` in their region and `slot_pitch` in the slot when there
 * are several. */
struct run_shape {
    uint64_t bytes, region_pitch, slot_pitch;
    uint32_t rows;
};

/* Whether frame `g` may join a run: `gatherable`, one a kernel may move
 * (host_gatherable: host_gathers counts the copies they would take); else
 * one that is copied (!moved_by_kernel: copy_frames). */
static int run_takes(const cuda_engine *ce, const gf_slot *s, const gf_frame *g, int to_device,
                     int gatherable) {
    return gatherable ? host_gatherable(ce, g) : !moved_by_kernel(ce, s, g, to_device);
}

/* The run of shm frames of `s` from frame i that one copy moves in that
 * direction (run_takes): back to back on both sides (one copy of
 * r->bytes), or else at two pitches (r->rows > 1 rows of r->bytes,
 * region_pitched).  Returns its end. */
static uint32_t region_run(const cuda_engine *ce, const gf_slot *s, uint32_t i, int to_device,
                           int gatherable, struct run_shape *r) {
    const gf_frame *f = &s->frames[i];
    uint32_t j = i + 1;
    *r = (struct run_shape){.bytes = to_device ? f->in_bytes : f->out_bytes, .rows = 1};
    while (j < s->frame_count && run_takes(ce, s, &s->frames[j], to_device, gatherable) &&
           region_adjacent(&s->frames[j - 1], &s->frames[j], to_device)) {
        r->bytes += to_device ? s->frames[j].in_bytes : s->frames[j].out_bytes;
        j++;
    }
    if (j > i + 1)
        return j;
    while (j < s->frame_count && run_takes(ce, s, &s->frames[j], to_device, gatherable) &&
           region_pitched(&s->frames[j - 1], &s->frames[j], to_device, ce->max_pitch,
                          &r->region_pitch, &r->slot_pitch))
        j++;
    r->rows = j - i;
    return j;
}

/* Copies the batch's inputs to the device (to_device) or its results back:
 * frames whose host side is a slot's buffer (its own, or, for frames of
 * another shard's batch, that one's) lie end to end there and go in one
 * copy per run of them (a 2D copy when they lie far apart: strided_run);
 * shm frames, in their client's region, go in one copy per
 * run of them (region_run: frames back to back both there and in the slot,
 * as a client's consecutive frames of a multiple of 256 bytes are, or of
 * one length at one pitch on each side, as a client's consecutive frame
 * buffers are, in one 2D copy), unless a kernel moves them (move_frames); device frames
 * are not copied here (their stages run in their region, or move_frames
 * gathers them). */
static cudaError_t copy_frames(const cuda_engine *ce, const gf_slot *s, cuda_slot *cs,
                               int to_device) {
    enum cudaMemcpyKind dir = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    uint8_t *dev = to_device ? cs->in_dev : cs->out_dev;
    for (uint32_t i = 0; i < s->frame_count;) {
        const gf_frame *f = &s->frames[i];
        if (f->on_device || moved_by_kernel(ce, s, f, to_device)) {
            i++;
            continue;
        }
        uint64_t bytes = to_device ? f->in_bytes : f->out_bytes;
        const void *from = to_device ? (const void *)f->src : dev + f->offset;
        void *to = to_device ? (void *)(dev + f->offset) : f->dst;
        uint32_t j = i + 1, rows = 1;
        uint64_t pitch = 0, to_pitch = 0, from_pitch = 0;
        if (f->region != NULL) {
            struct run_shape r;
            j = region_run(ce, s, i, to_device, 0, &r);
            bytes = r.bytes;
            rows = r.rows;
            to_pitch = to_device ? r.slot_pitch : r.region_pitch;
            from_pitch = to_device ? r.region_pitch : r.slot_pitch;
        } else {
            /* The run of frames in one slot's buffer from here. */
            uintptr_t base = host_base(f, to_device);
            while (j < s->frame_count && s->frames[j].region == NULL &&
                   host_base(&s->frames[j], to_device) == base)
                j++;
            const gf_frame *last = &s->frames[j - 1];
            if (strided_run(s, i, j, to_device, &pitch)) {
                rows = j - i;
                to_pitch = from_pitch = pitch;
            } else
                bytes = last->offset + (to_device ? last->in_bytes : last->out_bytes) - f->offset;
        }
        if (bytes) {
            cudaError_t err = rows > 1 ? cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, bytes,
                                                           rows, dir, cs->busy)
                                       : cudaMemcpyAsync(to, from, bytes, dir, cs->busy);
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
        if (!gf_frame_in_slot_buffers(&s->frames[i], s->in_host, s->out_host))
            return 0;
    return 1;
}

/* Whether any frame of `s` is a device frame (its stages run in place in
 * its region, unless the batch gathers it into the slot). */
static int has_device_frames(const gf_slot *s) {
    for (uint32_t i = 0; i < s->frame_count; i++)
        if (s->frames[i].on_device)
            return 1;
    return 0;
}

/* Whether batch `s` gathers its device frames into the slot's device
 * buffers, runs as one launch a stage over the slot, and scatters their
 * results back (move_frames): an elementwise pipeline, more than one
 * frame, every device frame small.  Otherwise each device frame runs in
 * place in its region, a launch a frame for an elementwise stage. */
static int gathers(const gf_slot *s, int elementwise) {
    int device = 0;
    if (s->frame_count < 2 || !elementwise)
        return 0;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        const gf_frame *f = &s->frames[i];
        if (f->on_device && (f->in_bytes > GATHER_MAX_BYTES || f->out_bytes > GATHER_MAX_BYTES))
            return 0;
        device |= f->on_device;
    }
    return device;
}

/* Which directions of batch `s` move its small shm frames by one kernel
 * (GF_HOST_GATHER_IN, _OUT): those in which copy_frames would otherwise
 * make two copies or more for them (frames of several clients, or runs of
 * one client's broken where its window wraps), of less than
 * HOST_GATHER_COPY_BYTES each on average. */
static int host_gathers(const cuda_engine *ce, const gf_slot *s) {
    unsigned copies[2] = {0, 0}; /* the copies they would take: out, in */
    uint64_t bytes[2] = {0, 0};  /* and the bytes these would move      */
    for (int in = 0; in < 2; in++)
        for (uint32_t i = 0; ce->host_pointers && i < s->frame_count;) {
            struct run_shape r;
            if (!host_gatherable(ce, &s->frames[i])) {
                i++;
                continue;
            }
            i = region_run(ce, s, i, in, 1, &r);
            copies[in]++;
            bytes[in] += r.bytes * r.rows;
        }
    const uint64_t most = HOST_GATHER_COPY_BYTES;
    return (copies[1] >= 2 && bytes[1] < copies[1] * most ? GF_HOST_GATHER_IN : 0) |
           (copies[0] >= 2 && bytes[0] < copies[0] * most ? GF_HOST_GATHER_OUT : 0);
}

/* Moves the frames of `s` that a kernel moves (moved_by_kernel): their
 * inputs from their regions (device or shm) into the slot's input buffer
 * (`in`), or their results from the slot's output buffer into their
 * regions; one kernel, whatever their number, and none for no frame. */
static cudaError_t move_frames(const cuda_engine *ce, const gf_slot *s, cuda_slot *cs, int in) {
    gf_copy copies[GF_SLOT_FRAMES_MAX];
    unsigned n = 0;
    int across_bus = 0;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        const gf_frame *f = &s->frames[i];
        if (!moved_by_kernel(ce, s, f, in))
            continue;
        copies[n++] = in ? (gf_copy){f->src, (uint8_t *)cs->in_dev + f->offset, f->in_bytes}
                         : (gf_copy){(uint8_t *)cs->out_dev + f->offset, f->dst, f->out_bytes};
        across_bus |= !f->on_device;
    }
    return n ? (cudaError_t)gf_copies_launch(copies, n, across_bus, cs->busy) : cudaSuccess;
}

/* The batch's stages, from `in_first` (the first stage's input) to
 * `out_last` (the last one's output). */
static cudaError_t enqueue_stages(const gf_slot *s, cuda_slot *cs, uint8_t *in_first,
                                  uint8_t *out_last) {
    const gf_pipeline *p = &s->frames[0].pipeline; /* every frame's */
    const gf_frame *last = &s->frames[s->frame_count - 1];
    int whole = (s->gathered || !has_device_frames(s)) &&
                (s->frame_count == 1 || gf_pipeline_elementwise(p));
    cudaError_t err;
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
            (err = cudaEventRecord(cs->stage_ev[k], cs->busy)) != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

cudaError_t gf__cuda_enqueue(const cuda_engine *ce, gf_slot *s, cuda_slot *cs) {
    int elementwise = gf_pipeline_elementwise(&s->frames[0].pipeline);
    s->gathered = gathers(s, elementwise);
    s->host_gathered = host_gathers(ce, s);
    s->zero_copy = runs_zero_copy(ce, s, elementwise);
    cudaError_t err;
    if ((err = mark(s, cs, EV_START)) != cudaSuccess ||
        (!s->zero_copy && (err = copy_frames(ce, s, cs, 1)) != cudaSuccess) ||
        (err = move_frames(ce, s, cs, 1)) != cudaSuccess ||
        (err = mark(s, cs, EV_H2D)) != cudaSuccess ||
        (err = enqueue_stages(s, cs, s->zero_copy ? s->in_host : cs->in_dev,
                              s->zero_copy ? s->out_host : cs->out_dev)) != cudaSuccess ||
        (err = mark(s, cs, EV_KERNEL)) != cudaSuccess ||
        (!s->zero_copy && (err = copy_frames(ce, s, cs, 0)) != cudaSuccess) ||
        (err = move_frames(ce, s, cs, 0)) != cudaSuccess)
        return err;
    return mark(s, cs, EV_D2H);
}

cudaError_t gf__cuda_enqueue_stages(gf_slot *s, cuda_slot *cs) {
    s->gathered = 0;
    s->host_gathered = 0;
    s->zero_copy = 0;
    return enqueue_stages(s, cs, cs->in_dev, cs->out_dev);
}

void gf__cuda_plan_moves(const cuda_engine *ce, gf_slot *s, int whole) {
    if (whole) { /* every frame in the slot's buffers or a device region */
        int elementwise = gf_pipeline_elementwise(&s->frames[0].pipeline);
        s->gathered = gathers(s, elementwise);
        s->host_gathered = 0;
        s->zero_copy = runs_zero_copy(ce, s, elementwise);
    } else {
        s->gathered = 0;
        s->host_gathered = host_gathers(ce, s);
        s->zero_copy = 0;
    }
}

cudaError_t gf__cuda_copy(const cuda_engine *ce, const gf_slot *s, cuda_slot *cs, int to_device) {
    cudaError_t err = copy_frames(ce, s, cs, to_device);
    return err != cudaSuccess ? err : move_frames(ce, s, cs, to_device);
}

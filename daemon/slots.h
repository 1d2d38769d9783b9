/* SPDX-License-Identifier: MIT */
/*
 * The slot ring: N slots (two by default: ping-pong), each a pinned input
 * buffer, a pinned output buffer, their device copies and a stream, and the
 * frames that use them.  A slot is one submission to the engine: it carries
 * a batch of one or more whole frames of one pipeline, from one connection or
 * several, packed end to end in its buffers, which the engine runs together
 * and completes together.  Small frames share the fixed costs of a
 * submission that way (the copies, the launches, the completion, the
 * wake-up); a large one has its slot to itself.  The engine allocates the
 * slots' buffers; the scheduler claims, fills and releases slots and frames, on
 * the loop thread only.
 *
 * A slot is claimed open and empty by one connection (gf_slot_claim: the
 * scheduler, scheduler.h, decides who gets one and who may join its batch),
 * takes frames while it is open (gf_slot_add), goes to the engine whole, and
 * returns to the ring when it is closed and the last of its frames has been
 * released (gf_frame_release), which happens when that frame's reply has
 * been written, or its result moved out of the slot, or dropped.
 */
#ifndef GF_SLOTS_H
#define GF_SLOTS_H

#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "list.h"
#include "pipeline.h"
#include "protocol.h"
#include "reply.h"

/* Frames one slot carries at most: a batch fills the write of its replies
 * (GF_WRITE_BATCH_MAX) and the socket's reads of small frames. */
#define GF_SLOT_FRAMES_MAX GF_BATCH_FRAMES_MAX

struct gf_sched_client;
struct gf_slot;

/*
 * Where one frame's stages ran, as intervals on the host's CLOCK_MONOTONIC
 * (ns), filled by the engine.  The CUDA engine measures them with events on
 * the slot's stream and anchors the first event at the submit time; the CPU
 * engine reads its own clock (its copies are empty intervals).
 */
typedef struct gf_stage_times {
    uint64_t h2d_begin_ns, h2d_end_ns;
    uint64_t kernel_begin_ns, kernel_end_ns;
    uint64_t d2h_begin_ns, d2h_end_ns;
    uint64_t gpu_done_ns; /* the device finished (= d2h_end_ns when timed)   */
    int timed;            /* the intervals are measured (timing_events on)    */
    /* A timed frame of a pipeline of several stages: how long each stage's
     * kernels took (the kernel interval is their sum); 0 stages otherwise. */
    uint32_t kernel_stages;
    uint64_t kernel_stage_ns[GF_STAGES_MAX];
} gf_stage_times;

/* One frame, from the acceptance of its header until its reply is done
 * with: where it lies in its slot, what to run, its reply and its clocks. */
typedef struct gf_frame {
    struct gf_slot *slot;     /* the slot it is packed into                      */
    uint64_t offset;          /* where its input, output and intermediate results
                                 start in the slot's buffers (host and device)  */
    uint8_t *in_host;         /* slot->in_host + offset: the payload lands here  */
    uint8_t *out_host;        /* slot->out_host + offset: the engine's result    */
    const uint8_t *src;       /* the frame's input: in_host, or in a region      */
    uint8_t *dst;             /* its output: out_host, or in a region            */
    struct gf_region *region; /* a frame by reference: its region (one reference) */
    int on_device;            /* src and dst are device addresses in a device
                                 region: the stages run on them in place, with
                                 no copy (GF_FLAG_DEVICE)                    */
    /* Its connection's part in the scheduler: whom the reply is for. */
    struct gf_sched_client *client;

    /* Set by the scheduler at claim, read by the engine. */
    gf_pipeline pipeline; /* what to run: a copy of its name and stages, fixed for
                             this frame; its plugin stages held (one reference
                             each) until the frame is released               */
    uint32_t pipeline_id;
    uint64_t frame_id;
    uint8_t version; /* the request's protocol version, echoed in the reply */
    uint8_t shm_result[GF_SHM_RESULT_BYTES]; /* a shm frame's RESULT payload */
    uint64_t in_bytes;                       /* payload length                            */
    uint64_t out_bytes;                      /* result length (gf_pipeline_output_bytes)  */
    uint64_t stage_bytes[GF_STAGES_MAX];     /* each stage's output length, checked at
                                                claim against the slot's buffers        */
    gf_reply reply;                          /* this frame's place in its reply queue     */

    /* Set by the engine before it completes the slot. */
    int status; /* GF_OK, or GF_ERR_ENGINE                   */
    gf_stage_times stages;

    /* Clock readings, CLOCK_MONOTONIC ns. */
    uint64_t arrived_ns;   /* its header was first read                 */
    uint64_t claimed_ns;   /* header accepted, place in a slot taken    */
    uint64_t whole_ns;     /* its payload all in: it waits for its batch */
    uint64_t submitted_ns; /* its slot handed to the engine             */
    uint64_t done_ns;      /* engine thread saw the slot finish         */
    uint64_t drained_ns;   /* the loop took the slot off the queue      */

    int batched; /* whole and in its slot's batch: the slot is open or on
                    the engine, and its completion not yet handled       */
    /* What its request's scheduling flags ask (PROTOCOL.md, version 3;
     * frame_policy.h). */
    uint64_t deadline_ns;  /* GF_FLAG_DEADLINE: when it must be on the engine
                              (CLOCK_MONOTONIC ns); 0: no deadline         */
    unsigned latest : 1;   /* GF_FLAG_LATEST: a newer such frame replaces it */
    unsigned expired : 1;  /* its deadline passed before its batch went: it is
                              answered GF_ERR_DEADLINE_EXCEEDED whatever the
                              engine did with the batch                   */
    uint64_t submission;   /* the number of the submission it ran in, among
                              those of shard submitted_on: frames with one
                              shared a submission (TRACE's "submission")    */
    uint32_t submitted_on; /* the shard whose submission it ran in: its own,
                              or its device's pool home (pool.h)          */
    /* A frame of another shard's batch run in this slot (pool.h): that
     * frame, whose buffers this one's src and dst are; NULL for one of this
     * shard's own. */
    struct gf_frame *pooled_from;
} gf_frame;

/* Whether `f`'s input and result are its slot's own buffers at its offset
 * (not a client's region, nor another shard's slot). */
static inline int gf_frame_in_slot_buffers(const gf_frame *f, const uint8_t *in_host,
                                           const uint8_t *out_host) {
    return f->region == NULL && f->src == in_host + f->offset && f->dst == out_host + f->offset;
}

/* gf_slot's host_gathered: the directions whose shm frames a kernel moved. */
#define GF_HOST_GATHER_IN  1
#define GF_HOST_GATHER_OUT 2

typedef struct gf_slot {
    uint32_t index;                  /* position in the ring, 0..count-1          */
    uint8_t *in_host;                /* frames' payloads are packed into it       */
    uint8_t *out_host;               /* the engine writes their results here      */
    uint64_t in_capacity_bytes;      /* = max_frame_bytes                         */
    uint64_t out_capacity_bytes;     /* largest output any pipeline can produce   */
    uint64_t scratch_capacity_bytes; /* the engine's intermediate buffers     */
    void *engine_state;              /* the engine's per-slot state (streams...)  */

    /* The batch: frames[0..frame_count), packed in that order. */
    gf_frame *frames;              /* GF_SLOT_FRAMES_MAX records (gf_slot_ring_init) */
    uint32_t frame_count;          /* frames placed in it since its claim           */
    uint32_t frames_held;          /* of them, not yet released                      */
    uint64_t used_bytes;           /* where the next frame may start (aligned up)    */
    struct gf_sched_client *owner; /* whose slot it is while one connection's
                                      (scheduler.h: a receiver's, or a frame
                                      that fills it alone); NULL once another
                                      connection's frame is in it          */
    int open;                      /* claimed and not yet handed to the engine        */
    int urgent;                    /* open, with a realtime frame: goes to the engine
                                      without waiting for more (scheduler.h)        */
    int in_flight;                 /* on the engine, completion not yet handled      */
    int time_stages;               /* set at submit: record this batch's stage times */
    int zero_copy;                 /* set by the engine's submit: its kernels ran on
                                      the pinned host buffers, with no copy      */
    int graphed;                   /* set by the engine's submit: replayed from a
                                      CUDA graph                                 */
    int prioritized;               /* set by the engine's submit: urgent, on a
                                      stream of the device's greatest priority */
    int gathered;                  /* set by the engine's submit: its device frames
                                      gathered into the slot and back          */
    int host_gathered;             /* set by the engine's submit: its small shm
                                      frames moved by a kernel each way, not a
                                      copy each (GF_HOST_GATHER_IN | _OUT)     */
    int failed;                    /* set by the engine's submit: a launch failed after
                                      work was queued; the slot completes once that
                                      work has run, and finish fails its frames */
    uint64_t submitted_ns;         /* handed to the engine                           */
    uint64_t done_ns;              /* engine thread saw it finish                    */
    struct gf_pool_call *pooled;   /* its batch runs in another shard's submission
                                      (pool.h): on its way there and back, as if
                                      on the engine; NULL otherwise             */

    gf_link free_link;         /* the ring's free list (loop thread)         */
    gf_link open_link;         /* the scheduler's open batches (scheduler.h)     */
    struct gf_slot *next_done; /* completion stack link (engine threads)    */
} gf_slot;

typedef struct gf_slot_ring {
    gf_slot *slots; /* the engine's array, `count` long          */
    uint32_t count;
    /* Every slot's buffers (the engine sizes them alike): what a frame,
     * its result and a chain's intermediate result may take. */
    uint64_t in_capacity_bytes, out_capacity_bytes, scratch_capacity_bytes;
    gf_link free; /* FIFO, so frames rotate over all streams */
    uint32_t free_count;
} gf_slot_ring;

/* Gives every slot of `slots` its frame records and puts it on the free
 * list.  Returns 0 or -ENOMEM. */
int gf_slot_ring_init(gf_slot_ring *ring, gf_slot *slots, uint32_t count);

/* Frees what gf_slot_ring_init allocated. */
void gf_slot_ring_free(gf_slot_ring *ring);

/* Takes the oldest free slot, open and empty, for `owner`'s frames; NULL
 * when every slot is busy. */
gf_slot *gf_slot_claim(gf_slot_ring *ring, struct gf_sched_client *owner);

/* Whether two frames of `in_bytes` whose `stages` stages give
 * stage_bytes[] fit one slot of `ring`: whether such frames can share a
 * batch at all. */
int gf_slot_ring_fits_two(const gf_slot_ring *ring, uint32_t stages, uint64_t in_bytes,
                          const uint64_t stage_bytes[GF_STAGES_MAX]);

/*
 * Places `client`'s frame of pipeline `p` announced by header `h`, with
 * `in_bytes` of input (the payload's, or a shm frame's) and each stage's
 * output length in stage_bytes (the last is the result's), into the open
 * slot `s` after the frames it has: NULL when it does not fit (the slot
 * holds the pipeline's max_batch_frames, or its buffers lack room for the
 * input, the result or an intermediate result) or, past the first frame,
 * when it is another pipeline's or the pipeline's stages changed since.  The
 * frame's header was first seen at `arrived_ns`; every other per-frame field
 * is reset.  A slot owned by another client is no one's from then on.  Loop
 * thread.
 */
gf_frame *gf_slot_add(gf_slot *s, struct gf_sched_client *client, const gf_pipeline *p,
                      const gf_header *h, uint64_t in_bytes,
                      const uint64_t stage_bytes[GF_STAGES_MAX], uint64_t arrived_ns);

/*
 * Whether every frame of batch `from` (another shard's slot, of the same
 * capacities) would fit after the frames of open slot `s`: the same
 * pipeline and stages as its first, within its max_batch_frames and
 * `max_frames`, and each input, result and intermediate result within
 * the buffers.  Any thread that may read both.
 */
int gf_slot_takes(const gf_slot *s, const gf_slot *from, uint32_t max_frames);

/*
 * Places frame `from` (of another shard's batch, pool.h; not a device frame)
 * into the open slot `s` after the frames it has, as a frame of no
 * connection of this shard (client NULL) that the engine reads from
 * `from`'s input and writes into its output (that shard's slot, or its
 * client's shared-memory region, which `from` keeps): NULL when it does not
 * fit (gf_slot_takes).  Batched at once: it is whole.  Loop thread.
 */
gf_frame *gf_slot_add_pooled(gf_slot *s, gf_frame *from);

/* Keeps `s` from going back to the ring while its frames are released one
 * by one; gf_slot_unhold ends that, and returns 1 when the slot then went
 * back (no frame held, closed). */
void gf_slot_hold(gf_slot *s);
int gf_slot_unhold(gf_slot_ring *ring, gf_slot *s);

/* Ends the open slot's batch: no frame joins it any more.  Returns 1 when
 * it holds no frame (every one was taken back) and went back to the ring,
 * 0 when it holds frames and must go to the engine. */
int gf_slot_close(gf_slot_ring *ring, gf_slot *s);

/* Makes the reply of frame `f`, done with its batch: a RESULT where the
 * engine left it (the slot's output, or the client's region) for GF_OK,
 * else an ERROR of its status; `refused_by` names the engine that refused
 * the submission (an ERROR with that text), NULL when it completed.  The
 * words of the reply are reply.c's; this says what the frame's outcome is. */
void gf_frame_reply(gf_frame *f, const char *refused_by);

/* Releases frame `f`: its plugin stages may go.  Returns 1 when it was the
 * last of a closed slot, which went back to the ring, else 0. */
int gf_frame_release(gf_slot_ring *ring, gf_frame *f);

#endif

/*
 * The slot ring: N frame slots (two by default: ping-pong), each owning the
 * memory one frame needs from the moment its header is accepted until its
 * reply has been written.  The engine allocates the slots' buffers (pinned
 * host memory for CUDA); the server claims and releases slots, on the loop
 * thread only.
 *
 * A slot belongs to exactly one frame from gf_slot_claim() until the write
 * callback of that frame's reply calls gf_slot_release().
 */
#ifndef GF_SLOTS_H
#define GF_SLOTS_H

#include <stdint.h>

#include <uv.h>

#include "pipeline.h"
#include "protocol.h"

struct gf_conn;
struct gf_slot;

/*
 * One reply owed to a connection.  Replies wait in their connection's queue
 * in the order the requests arrived and are written strictly in that order:
 * every request gets exactly one reply while its connection is open.  A frame's reply lives inside
 * its slot; an ERROR, LIST or STATS reply not tied to a slot is malloc'd and owns its body.
 */
typedef struct gf_queued_reply {
    struct gf_queued_reply *next;    /* next reply of the same connection        */
    struct gf_conn *conn;            /* the connection; this reply holds one ref */
    struct gf_slot *slot;            /* the frame's slot, or NULL (owns `body`)  */
    int ready;                       /* header/body are final, may be written    */
    uint8_t header[GF_HEADER_BYTES]; /* encoded reply header                     */
    char *body;                      /* slot == NULL: malloc'd payload, or NULL  */
    size_t body_bytes;               /* its length                               */
    struct gf_region *region;        /* REGION_ADD: the region being pinned       */
    struct gf_region *removing;      /* REGION_REMOVE: the region being released  */
    struct gf_slot *evicted;         /* a frame's result moved out of its slot
                                        (its client stopped reading): a malloc'd
                                        copy of the slot, for the accounting when
                                        it is written; its `region` is only ever
                                        compared with NULL                        */
    gf_header request;               /* REGION_ADD: its request, for the reply    */
} gf_queued_reply;

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

typedef struct gf_slot {
    uint32_t index;              /* position in the ring, 0..count-1          */
    uint8_t *in_host;            /* payloads are received straight into it    */
    uint8_t *out_host;           /* the engine writes results here            */
    const uint8_t *src;          /* the frame's input: in_host, or in a region */
    uint8_t *dst;                /* its output: out_host, or in a region      */
    struct gf_region *region;    /* a shm frame's region (one reference held) */
    uint64_t in_capacity_bytes;  /* = max_frame_bytes                         */
    uint64_t out_capacity_bytes; /* largest output any pipeline can produce   */
    void *engine_state;          /* the engine's per-slot state (streams...)  */

    /* The frame it holds; set by the server at claim, read by the engine. */
    gf_pipeline pipeline; /* what to run: a copy of its name and stages, fixed for
                             this frame; its plugin stages held (one reference
                             each) until the slot is released                  */
    uint32_t pipeline_id;
    uint64_t frame_id;
    uint8_t version; /* the request's protocol version, echoed in the reply */
    uint8_t shm_result[GF_SHM_RESULT_BYTES]; /* a shm frame's RESULT payload */
    uint64_t in_bytes;                       /* payload length                            */
    uint64_t out_bytes;                      /* result length (gf_pipeline_output_bytes)  */
    uint64_t stage_bytes[GF_STAGES_MAX];     /* each stage's output length, checked at
                                                claim against the slot's buffers        */
    gf_queued_reply reply;                   /* this frame's place in its reply queue     */

    int time_stages; /* set at submit: record this frame's stage times       */

    /* Set by the engine before it completes the slot. */
    int status; /* GF_OK, or GF_ERR_ENGINE                   */
    gf_stage_times stages;

    /* Clock readings, CLOCK_MONOTONIC ns. */
    uint64_t arrived_ns;   /* its header was first read                 */
    uint64_t claimed_ns;   /* header accepted, slot claimed             */
    uint64_t submitted_ns; /* whole payload in, handed to the engine    */
    uint64_t done_ns;      /* engine thread saw it finish               */
    uint64_t drained_ns;   /* the loop took it off the completion queue */

    int in_flight;             /* submitted, completion not yet handled     */
    struct gf_slot *next_free; /* free list link (loop thread)              */
    struct gf_slot *next_done; /* completion stack link (engine threads)    */
} gf_slot;

typedef struct gf_slot_ring {
    gf_slot *slots; /* the engine's array, `count` long          */
    uint32_t count;
    gf_slot *free_head, *free_tail; /* FIFO, so frames rotate over all streams */
    uint32_t free_count;
} gf_slot_ring;

/* Puts every slot of `slots` on the free list. */
void gf_slot_ring_init(gf_slot_ring *ring, gf_slot *slots, uint32_t count);

/* Takes the oldest free slot, or returns NULL when every slot is busy. */
gf_slot *gf_slot_claim(gf_slot_ring *ring);

/* Gives a claimed slot the frame header `h` announces for pipeline `p`, with
 * each stage's output length in stage_bytes (the last is the result's) and
 * its header first seen at `arrived_ns`; every other per-frame field is
 * reset.  Loop thread. */
void gf_slot_assign(gf_slot *slot, const gf_pipeline *p, const gf_header *h,
                    const uint64_t stage_bytes[GF_STAGES_MAX], uint64_t arrived_ns);

/* Returns `slot` to the free list; it must have been claimed. */
void gf_slot_release(gf_slot_ring *ring, gf_slot *slot);

#endif

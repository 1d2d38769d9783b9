/* SPDX-License-Identifier: MIT */
/*
 * Slot scheduling: who gets a slot, when a batch goes to the engine, and
 * what a finished slot means for its frames' replies.
 *
 * A connection (a client of the scheduler: gf_sched_client, embedded in
 * gf_conn) asks for a slot for its next frame with gf_sched_claim.  It gets
 * one at once, or waits on one of two FIFO queues and is granted one later:
 *
 * - a frame that is whole (its payload staged in the connection's buffer, or
 *   a shm descriptor) needs a slot only to run: it waits on `wait_run`;
 * - a frame whose payload is read in place needs the slot while its bytes
 *   arrive, which the client controls: it waits on `wait_receive`.
 *
 * At most `receive_max` slots (all but one, when there are two or more) are
 * being received into at once, so a client that stalls mid-payload, or many
 * that take turns doing so, never hold every slot: a whole frame always
 * finds one within a submission's time.  Nor does one connection receiving
 * large payloads: while another connection uses the slots (it claimed one
 * since either of this one's last two claims, or waits for one, also a
 * receiver whose bytes have not come), a receiver holds at most all slots
 * but one, counting those whose results it has not yet read, so that
 * another's frame never waits for a bulk transfer through the socket
 * (docs/design.md, "What a client gets whatever others do").  Nor does a
 * connection whose whole frames fill a slot each (two do not fit one:
 * large frames by reference, or staged ones near max_frame_bytes): the
 * same share holds it.  Alone, either may use them all.  When a slot frees,
 * waiters are granted slots in arrival order across both queues, either
 * only while it holds less than its share, a receiver only under the cap
 * on receivers and only if its bytes are there (the `receive_ready` hook):
 * a client that announced a payload and sent nothing does not take a slot
 * that a sending client will want a moment later.  Such a receiver is
 * granted a free slot only by the watchdog's round
 * (gf_sched_grant_unready), and then holds it only until its stall is cut
 * (deadline.h).  A newcomer that finds others waiting queues behind those
 * a free slot could go to.
 *
 * Grants happen in one pass after the loop's I/O (gf_sched_grant, run by
 * the shard's deferred work when the `wake` hook asked for it), never from
 * inside the event that freed the slot; the client granted a slot finds it
 * as its open batch, empty, and is resumed through the `granted` hook.
 *
 * Batches.  A whole frame (staged, shm, or parked: admit.h) joins the open batch of its
 * pipeline, whichever connection opened it (gf_sched_join); when there is
 * none, or it has no room, the frame's connection claims a slot as above,
 * which becomes the pipeline's open batch, and whole-frame waiters of the
 * same pipeline are invited to join it (resumed through `granted`, with no
 * slot of their own; one that finds it full waits again in its old place).
 * A frame received in place has
 * its slot to itself, its connection's batch until its payload is in
 * (gf_sched_end_batch).  Open batches go to the engine in one pass after
 * the loop's I/O (gf_sched_submit_batches, run by the shard's deferred
 * work when the `batches` hook asked for it), so the frames of every
 * connection read in one loop iteration share a submission: a full batch
 * (the pipeline's max_batch_frames) goes then, and one that is not waits
 * while GF_BATCH_HOLD_IN_FLIGHT submissions keep the engine busy (until one
 * completes; not those run in another shard's submission, `away`) and
 * until its first frame has waited the pipeline's max_batch_delay_us.  A
 * batch only ever holds whole frames, so no client that stalls or closes
 * holds back another's.  When a slot completes, the
 * scheduler counts its frames and says so, once, through the `finished`
 * hook; it never formats a reply: the connections' side makes each frame's
 * reply (slots.h, gf_frame_reply; the bytes are reply.c's) and writes or
 * drops them, each connection's in its own order.  Loop thread only.
 */
#ifndef GF_SCHEDULER_H
#define GF_SCHEDULER_H

#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "list.h"
#include "slots.h"
#include "stats.h"

/* Priorities (the configuration's "priorities", a FRAME's class).  A
 * waiter's place is the time it began to wait plus GF_PRIORITY_STEP_NS for
 * each class it is below realtime: a realtime frame is granted a slot
 * before normal frames that began to wait less than 50 ms before it, and
 * before batch frames of less than 100 ms; one that waited longer goes
 * first.  So no class starves: a batch frame waits at most 100 ms more
 * than it would among equals.  Whole-frame waiters of one pipeline invited
 * to a batch join it in that order, so a realtime frame forms a batch or
 * joins it before batch frames; and an open batch that holds a realtime
 * frame goes to the engine after this loop iteration's I/O, waiting
 * neither for its pipeline's max_batch_delay_us nor for the submissions on
 * the engine, and passes its turn to be timed on (scheduler.c, timed());
 * untimed, the CUDA engine runs it on a stream of the device's greatest
 * priority where it can (engine_cuda.c).  Frames already in a
 * slot are never taken out, and a client that holds its share of the
 * slots (above) waits whatever its class: lower classes' frames pass it
 * meanwhile. */
#define GF_PRIORITY_STEP_NS (50ull * 1000 * 1000)

/* Submissions on the engine above which a batch of small frames is held
 * open for more, until a slot completes: two keep the copies of one batch
 * overlapping the kernels of the other. */
#define GF_BATCH_HOLD_IN_FLIGHT 2
/* While another pipeline has frames on the engine (GF_BATCH_SHARE_NS), a
 * batch closes, whatever its pipeline's max_batch_frames, once its frames
 * would keep the engine this long by the pipeline's measured cost per frame
 * (gf_stats_completed; at one frame when a frame costs more): the other
 * pipeline's frame that finds every slot taken by such batches waits about
 * one frame of them, or this, not a whole batch (40 frames of ~1 s once
 * went as two batches of 20, one per slot, and held a 4 KiB frame 12.8 s).
 * Light batches are far below it: 64 frames of 4 KiB take tens of us on a
 * GPU, and a model's batch of 64 a few ms.  Alone, a pipeline batches as
 * its max_batch_frames says. */
#define GF_BATCH_COST_MAX_NS (20ull * 1000 * 1000)
/* How recently another pipeline must have submitted for batches to be
 * bounded by their cost. */
#define GF_BATCH_SHARE_NS (1000ull * 1000 * 1000)
/* Receive waiters a grant asks about their bytes (the receive_ready hook)
 * before it takes the oldest anyway: bounds the system calls of one grant. */
#define GF_GRANT_PROBES_MAX 8

/* What the scheduler keeps of one connection. */
typedef struct gf_sched_client {
    gf_link waiting;           /* on wait_run or wait_receive                      */
    gf_slot *batch;            /* its open slot, which its next frames join; a
                                  granted slot is open and empty                   */
    uint64_t wait_seq;         /* its place among waiters: when it began to wait
                                  (ns), plus its class's GF_PRIORITY_STEP_NS      */
    uint8_t priority;          /* its frame's class (GF_CLASS_REALTIME..BATCH),
                                  set by admission before it asks for a place     */
    uint64_t claim_seq;        /* the scheduler's claim_seq after its last claim   */
    uint32_t wait_pipeline;    /* on wait_run (gf_sched_join): its frame's
                                  pipeline id, to join a batch of it that opens */
    uint32_t latest_on_engine; /* its GF_FLAG_LATEST frames submitted and not
                                  yet back (frame_policy.h)                 */
    unsigned receive : 1;      /* waiting to receive a payload in place            */
    unsigned receiving : 1;    /* its batch's slot is being received into (counted
                                  in receiving)                                   */
    unsigned shared : 1;       /* another client claimed a slot between its last
                                  two claims                                      */
    unsigned invited : 1;      /* taken off wait_run to join a batch: should it
                                  wait again, it keeps its place (wait_seq)       */
    unsigned fills_slot : 1;   /* its last whole frame to claim a slot fills one
                                  alone (two do not fit a slot): it holds at most
                                  its share of them, as a receiver does            */
} gf_sched_client;

typedef struct gf_sched_hooks {
    /* `c` was granted a slot (its batch): go on with it, after this pass. */
    void (*granted)(gf_sched_client *c, void *arg);
    /* `s` finished: each of its frames still `batched` has its status (the
     * engine's, or GF_ERR_ENGINE from a refusal) and is to be answered:
     * unbatched, its reply made (gf_frame_reply), then written, or dropped
     * if its connection is closing.  `completed`: called from
     * gf_sched_complete, outside any connection's event, where writing at
     * once is safe (the hot path: the slot goes back sooner); else from a
     * refused submission inside a connection's own processing, where the
     * writes must be deferred.  The slot does not go back to the ring
     * during the call. */
    void (*finished)(gf_slot *s, int completed, void *arg);
    /* A slot went back to the ring: call gf_sched_grant after this event. */
    void (*wake)(void *arg);
    /* A batch opened, or the engine finished one: call
     * gf_sched_submit_batches after this event. */
    void (*batches)(void *arg);
    /* A receive waiter's payload bytes: nonzero when they are there to read
     * (enough of them to be worth a slot).  Called during gf_sched_grant. */
    int (*receive_ready)(gf_sched_client *c, void *arg);
    /* The engine took `s` (rc 0) or refused it (rc < 0, its frames already
     * failed): start polling, or stop the daemon if the engine is poisoned. */
    void (*submitted)(gf_slot *s, int rc, void *arg);
    /* A client now waits for a slot to receive into, and none did before,
     * or a payload began to be received into a slot: a receiver's stall,
     * or its hold of the slot, has become a deadline (deadline.h). */
    void (*contended)(void *arg);
    /* Closed batch `s` is about to go to the engine: nonzero when the hook
     * took it to run in another shard's submission instead (pool.h), which
     * completes it through gf_sched_complete with its frames' outcomes set.
     * May be NULL. */
    int (*pool)(gf_slot *s, void *arg);
    /* A client now waits for a slot: results that a client does not read
     * may be holding one, and must leave it (conn.h, gf_conn_evict_results)
     * after this event.  May be NULL. */
    void (*waiting)(void *arg);
    void *arg;
} gf_sched_hooks;

typedef struct gf_sched {
    gf_slot_ring ring; /* the engine's slots                               */
    gf_engine *engine;
    gf_stats *stats;      /* counters of submissions and completions          */
    const gf_config *cfg; /* the running configuration (timing sampling)      */
    gf_link wait_run;     /* clients with a whole frame waiting for a slot    */
    gf_link wait_receive; /* clients with a payload to receive in place       */
    gf_link open;         /* open batches, a pipeline's each (slot open_link) */
    uint32_t in_flight;   /* slots on the engine                              */
    uint32_t away;        /* of them, batches run in another shard's
                             submission (the `pool` hook): they do not keep
                             this engine busy, so hold no batch open       */
    uint32_t receiving;   /* slots a payload is being received into           */
    uint32_t receive_max; /* the cap on `receiving`                           */
    uint64_t claim_seq;   /* slots claimed or granted so far: whether another
                             client claimed since one's last claim            */
    uint64_t submit_seq;  /* submissions: picks the ones timed                */
    uint32_t timing_owed; /* a timing due: 0 none, else 1 + the urgent batches
                             that passed it on (timed)                        */
    /* The two pipelines (ids) that submitted last, and when: whether
     * another pipeline shares the engine (GF_BATCH_SHARE_NS). */
    uint32_t recent_id[2];
    uint64_t recent_ns[2];
    uint32_t shard; /* its shard's index: its frames' submitted_on     */
    int draining;   /* stopping: batches are not held (the only waiters
                       then are parked frames, conn.h, whole before the
                       drain began: they are granted slots)            */
    gf_sched_hooks hooks;
} gf_sched;

/*
 * Takes the engine's slots into the ring.  `hooks` is copied.  Returns 0 or
 * -ENOMEM.
 */
int gf_sched_init(gf_sched *s, gf_engine *engine, gf_stats *stats, const gf_config *cfg,
                  const gf_sched_hooks *hooks);

/* Frees what gf_sched_init allocated. */
void gf_sched_free(gf_sched *s);

/* A client at its start: no batch, waiting for nothing. */
void gf_sched_client_init(gf_sched_client *c);

/*
 * `c` needs an empty slot for a frame (`receive`: its payload will be read
 * into the slot in place): its batch when that is empty (a granted slot),
 * else a free slot unless others wait before it.  Returns the slot, now
 * `c`'s batch, or NULL: `c` waits, and will be granted one.  `c`'s batch
 * must be empty or closed before it asks.
 */
gf_slot *gf_sched_claim(gf_sched *s, gf_sched_client *c, int receive);

/* Whether gf_sched_claim(s, c, 1) would give `c` a slot to receive into
 * now, rather than have it wait. */
int gf_sched_can_receive(const gf_sched *s, const gf_sched_client *c);

/* Nonzero while `c` waits for a slot. */
static inline int gf_sched_waiting(const gf_sched_client *c) {
    return gf_linked(&c->waiting);
}

/* Takes `c` off the waiter queues (it closes, or the daemon stops). */
void gf_sched_stop_waiting(gf_sched *s, gf_sched_client *c);

/* Hands free slots to waiters, in the order the header comment says, a
 * receiver only if its bytes are there.  Run once after the events that
 * freed slots (the `wake` hook). */
void gf_sched_grant(gf_sched *s);

/* The same, and a free slot to the oldest receiver not sending when none
 * is: the watchdog's round, so that it waits, but not for ever. */
void gf_sched_grant_unready(gf_sched *s);

/* The payload `c` was receiving in place is whole, or taken back: its slot
 * no longer counts as receiving. */
void gf_sched_received(gf_sched *s, gf_sched_client *c);

/*
 * A place for `c`'s whole frame of pipeline `p` (header `h`; gf_slot_add
 * says the rest): in the open batch of its pipeline, else in a slot `c`
 * claims (gf_sched_claim: `c`'s batch must be empty or closed), which
 * becomes the open batch.  Returns the frame, or NULL: `c` waits for a slot.
 */
gf_frame *gf_sched_join(gf_sched *s, gf_sched_client *c, const gf_pipeline *p, const gf_header *h,
                        uint64_t in_bytes, const uint64_t stage_bytes[GF_STAGES_MAX],
                        uint64_t arrived_ns);

/*
 * Every frame of `from`, another shard's batch (pool.h), joins the open batch
 * of its pipeline here together, as frames of no connection
 * (gf_slot_add_pooled), or a slot `c` claims for them (a client that stands
 * for that other shard's batches: its batch must be empty or closed) opens
 * that batch.  Returns 1 when they joined, 0 when `c` waits for a slot
 * (granted later, as any client), -1 when no slot here could take them.
 * When the batch completes they are not counted here: their shard counts
 * them, and its `finished` hook sends them back.
 */
int gf_sched_join_pooled(gf_sched *s, gf_sched_client *c, gf_slot *from);

/* Batch `b`, taken by the `pool` hook and in flight, goes to this shard's
 * engine after all (the other shard did not run it). */
void gf_sched_run_here(gf_sched *s, gf_slot *b);

/*
 * Open batches that are due go to the engine: full ones, and those whose
 * first frame has waited its pipeline's max_batch_delay_us at `now`, unless
 * the engine is busy; all while draining.  Returns when the next one will be
 * due (CLOCK_MONOTONIC ns), or 0 if none waits for its delay.
 */
uint64_t gf_sched_submit_batches(gf_sched *s, uint64_t now);

/* `c`'s read was processed.  Its batch (a frame received in place) goes to
 * the engine now, unless its payload is still arriving (`receiving_now`);
 * an empty one (a grant not used) goes back to the ring. */
void gf_sched_end_batch(gf_sched *s, gf_sched_client *c, int receiving_now);

/* Closes `c`'s batch now, if it has one: its frames go to the engine. */
void gf_sched_close_batch(gf_sched *s, gf_sched_client *c);

/* Frame `f` is done with (its reply written, its result moved out, or
 * dropped): its slot goes back once the last of its frames is released. */
void gf_sched_release(gf_sched *s, gf_frame *f);

/* The completion queue's callback (completion.h): `slot` came back from the
 * engine; `arg` is the scheduler. */
void gf_sched_complete(gf_slot *slot, void *arg);

/* Whether pipeline `id` has a batch open (or a frame arriving in a slot)
 * or on the engine. */
int gf_sched_pipeline_busy(const gf_sched *s, uint32_t id);

/* Whether a client other than `c` waits for a slot. */
int gf_sched_others_wait(const gf_sched *s, const gf_sched_client *c);

/* Clients waiting for a slot to receive into: the receive-stall deadline
 * matters only then. */
static inline int gf_sched_receive_contended(const gf_sched *s) {
    return !gf_list_empty(&s->wait_receive);
}

#endif

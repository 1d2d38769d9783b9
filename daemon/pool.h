/* SPDX-License-Identifier: MIT */
/*
 * One pipeline's frames from every shard of a device in one submission.
 *
 * Each shard batches what its own connections send (scheduler.h), so with
 * clients spread over a device's shards a pipeline's batches stay at each
 * shard's share (16 clients on 8 shards: two clients' frames a batch),
 * while a model's submission costs about as much for 64 frames as for 16
 * (docs/design.md, "One pipeline's frames from every shard").  So a batch
 * about to go to the engine (the scheduler's `pool` hook) may go instead
 * to the pipeline's home: the device's shards, in order, form groups of
 * `pool_shards`, and the pipeline's id picks one shard of each group, to
 * which the group's batches go, as a call by mail (mailbox.h).  It goes
 * when
 *   - the shard's group has two shards or more, and it is not stopping;
 *   - the pipeline is not elementwise (a model, an image conversion, a
 *     spectrogram: what a submission costs grows slowly with its frames),
 *     and the batch holds fewer frames than its max_batch_frames;
 *   - no frame is a device frame or asks for a deadline, newest-only or
 *     the realtime class (none is urgent): frames through the socket (in
 *     the slot's own buffers) and shm frames (in their region, which the
 *     device's context has pinned whichever shard pinned it) go;
 *   - the shard keeps a slot of its own back (at most all but one are
 *     away): a home may wait for a slot of its own to run another shard's
 *     batch, and two shards whose slots were all away at each other (two
 *     pipelines, each's home the other's sender) would wait for ever;
 *   - another shard of the group submitted a batch of the pipeline within
 *     GF_POOL_RECENT_NS (and twice its max_batch_delay_us): a lone
 *     client's frames never take the detour.
 * At the home, its frames join the pipeline's open batch together
 * (gf_sched_join_pooled) beside the home's own frames and other shards',
 * and the engine reads them from the sending shard's pinned buffers and
 * writes their results back there.  When that submission completes, the
 * home answers the call with each frame's outcome, and the sending shard
 * completes its slot as if its own engine had (gf_sched_complete): the
 * replies, their order and the slot stay its own.  The home stands for the
 * shards it serves with one client of its scheduler (`client`), which waits
 * for a slot in turn like any other.  A home that is stopping, or whose
 * mailbox has closed, sends a batch back unrun, and it runs where it came
 * from (gf_sched_run_here).  Off by default (pool_shards 0): measured on an
 * H200, the home's loop, submitting for its whole group, costs more than
 * the larger batches save (docs/design.md, "One pipeline's frames from
 * every shard").
 *
 * Each function says on whose thread it runs: the sending shard's, or the
 * home's.
 */
#ifndef GF_POOL_H
#define GF_POOL_H

#include <stdint.h>

#include "scheduler.h"

/* How recently another shard of the group must have submitted a batch of
 * a pipeline for this shard's batches of it to go to its home, plus twice
 * the pipeline's max_batch_delay_us. */
#define GF_POOL_RECENT_NS (5ull * 1000 * 1000)

struct gf_shard;
/* A shard's part in its device's pool: the calls of its batches away, and,
 * as a home, the other shards' batches it holds (pool.c). */
typedef struct gf_pool gf_pool;

/* Sets up `sh`'s part (its slots and group known).  Returns 0 or -ENOMEM.
 * The shard's thread, at start-up. */
int gf_pool_open(struct gf_shard *sh);

/* Frees what gf_pool_open allocated. */
void gf_pool_close(struct gf_shard *sh);

/* The scheduler's `pool` hook: hands batch `b` to its home when the header
 * comment says so, and returns 1; else 0 (it runs here).  `arg` is the
 * shard.  The sending shard's thread. */
int gf_pool_take(gf_slot *b, void *arg);

/* Whether `c` is the client that stands for other shards' batches at the
 * home `p`. */
int gf_pool_is_client(const gf_pool *p, const gf_sched_client *c);

/* The home's client was granted a slot, or invited into a batch: the
 * waiting batches go on.  The home's thread. */
void gf_pool_granted(struct gf_shard *sh);

/* Slot `s` of the home finished (the scheduler's `finished` hook, before the
 * connections hear of it): its frames from other shards' batches take their
 * outcomes back, and each such batch goes home.  The home's thread. */
void gf_pool_finished(struct gf_shard *sh, gf_slot *s, int completed);

/* Whether the home holds no other shard's batch (a drain may end). */
int gf_pool_idle(const gf_pool *p);

#endif

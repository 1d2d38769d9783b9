/* SPDX-License-Identifier: MIT */
/*
 * What a frame's scheduling flags ask (PROTOCOL.md, version 3): its
 * deadline (GF_FLAG_DEADLINE) and its place taken by the connection's newer
 * frame (GF_FLAG_LATEST).  Admission (admit.c) and the scheduler
 * (scheduler.c) call these at the moments the flags speak of; the replies'
 * words are slots.c's and reply.c's.
 *
 * Deadlines.  A frame whose deadline has passed when its header is
 * admitted is refused GF_ERR_DEADLINE_EXCEEDED and takes no slot (its
 * payload is skipped).  One whose deadline passes while it waits for a
 * slot or in an open batch is found when its batch goes to the engine: a
 * batch of such frames only is not submitted at all, and each is answered
 * deadline_exceeded then; in a batch with frames still in time, it goes
 * along (the batch's buffers are laid out and its launches take it) and is
 * answered deadline_exceeded when the batch comes back, its result
 * dropped.  Either way it is counted in STATS' rejected.deadline_exceeded.
 *
 * The newest frame only.  A FRAME with GF_FLAG_LATEST whose connection's
 * previous request was a frame that asked the same, of the same pipeline
 * (its stages unchanged by a reload), length and transport (by value in
 * the connection's buffer, or by reference), and which waits whole in an
 * open batch, takes that frame's place: the old request is answered
 * GF_ERR_SUPERSEDED at once, where its reply stood, and the new frame's
 * input goes into the old one's room in the batch, so the batch neither
 * grows nor runs the stale frame.  And a LATEST frame not yet placed (it
 * waits for a slot, or while one of the connection's LATEST frames is on
 * the engine: gf_sched_client's latest_on_engine) is held while the
 * connection reads on (admit.h, "held"): its successor of the same kind,
 * read whole, takes its place, the held one answered superseded at once.
 * So a source's next frame does not join its previous one on the engine,
 * where the two would share the GPU and the newer come back older than one
 * that waits for the first and then runs alone.  This takes a frame the
 * daemon reads whole before placing it (a payload of at most
 * GF_STAGED_PAYLOAD_MAX_BYTES, or any frame by reference); a larger one
 * sent through the socket is received into its slot as it arrives, and
 * runs beside it.  The wait is per connection: a connection's LATEST
 * frames of two pipelines wait for each other.  A frame already on the
 * engine is never replaced.  Counted in STATS' rejected.superseded.
 *
 * Loop thread of the frame's shard.
 */
#ifndef GF_FRAME_POLICY_H
#define GF_FRAME_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"
#include "reply.h"
#include "slots.h"
#include "stats.h"

/* The FRAME header `h` is being admitted at `now_ns`: GF_OK, or
 * GF_ERR_DEADLINE_EXCEEDED with the reason in why[why_len]. */
uint32_t gf_frame_policy_admit(const gf_header *h, uint64_t now_ns, char *why, size_t why_len);

/* Batch `b` goes to the engine at `now_ns`: each of its frames whose
 * deadline has passed is marked `expired`.  Returns how many of its batched
 * frames are still in time (0: none is to run). */
uint32_t gf_frame_policy_expire(gf_slot *b, uint64_t now_ns);

/*
 * Whether the FRAME `h` (GF_FLAG_LATEST), whose whole payload `payload`
 * (for a frame by reference: its descriptor) is read, is superseded by the
 * request read behind it, whose first `avail` bytes are at `next`: a FRAME
 * with GF_FLAG_LATEST of the same pipeline, version-3 flags and length (by
 * reference: the same input length, its descriptor read too).  Pure.
 */
int gf_frame_policy_newer_read(const gf_header *h, const uint8_t *payload, const uint8_t *next,
                               size_t avail);

/*
 * The FRAME `h` (GF_FLAG_LATEST; pipeline `p`, `in_bytes` of input, `shm`:
 * by reference) is admitted on the connection `conn`, whose replies `q`
 * holds: when the frame of its last reply may be replaced (above), that
 * reply is answered superseded (counted in `st`), the frame's own reply goes
 * to the back of `q` for the new request, and the frame takes the new
 * request's id, version, flags and deadline (its header read at
 * `arrived_ns`).  Returns that frame, whose input the caller then takes as
 * for a new one (its old region reference still held), or NULL: place the
 * new frame as usual.
 */
gf_frame *gf_frame_policy_supersede(gf_reply_queue *q, struct gf_conn *conn, const gf_pipeline *p,
                                    const gf_header *h, uint64_t in_bytes, int shm,
                                    uint64_t arrived_ns, gf_stats *st);

#endif

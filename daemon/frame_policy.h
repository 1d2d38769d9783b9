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
 * Loop thread of the frame's shard.
 */
#ifndef GF_FRAME_POLICY_H
#define GF_FRAME_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"
#include "slots.h"

/* The FRAME header `h` is being admitted at `now_ns`: GF_OK, or
 * GF_ERR_DEADLINE_EXCEEDED with the reason in why[why_len]. */
uint32_t gf_frame_policy_admit(const gf_header *h, uint64_t now_ns, char *why, size_t why_len);

/* Batch `b` goes to the engine at `now_ns`: each of its frames whose
 * deadline has passed is marked `expired`.  Returns how many of its batched
 * frames are still in time (0: none is to run). */
uint32_t gf_frame_policy_expire(gf_slot *b, uint64_t now_ns);

#endif

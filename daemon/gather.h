/* SPDX-License-Identifier: MIT */
/*
 * STATS and TRACE of every shard: the shard that got the request asks each
 * other shard, by mail, for a snapshot of itself (introspect.h), taken on
 * that shard's own thread between two of its events, in a call (mailbox.h)
 * that each answers to the asking shard; once every one has, the asking
 * shard builds the reply on its own thread.  No shard reads another's state, and a reply counts
 * every frame answered before it was asked for: a shard takes its snapshot after the event it is
 * in, never in the middle of one.
 */
#ifndef GF_GATHER_H
#define GF_GATHER_H

#include <stdint.h>

#include "introspect.h"
#include "shard_state.h"

/* Called on the asking shard's thread with every shard's snapshot, in shard
 * order (a shard that has stopped is not `present`), the trace_frames asked
 * for, and the `arg` given, unless the asker cleared it (gf_gather's
 * *arg_slot) meanwhile: then with NULL. */
typedef void (*gf_gather_cb)(gf_shard *sh, const gf_snapshot *snaps, uint32_t n,
                             uint32_t trace_frames, void *arg);

/*
 * Gathers a snapshot of every shard with its newest `trace_frames` trace
 * records (GF_SNAPSHOT_NO_TRACE: none) and calls `cb`: at once with one
 * shard, else once the others have answered.  *arg_slot gets where `arg`
 * is kept: storing NULL there (the requester went) makes the callback get
 * NULL.  Returns 0, or -1 without memory (and `cb` is not called).
 */
int gf_gather(gf_shard *sh, uint32_t trace_frames, gf_gather_cb cb, void *arg, void ***arg_slot);

#endif

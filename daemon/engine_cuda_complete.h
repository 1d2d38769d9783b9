/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's completion modes: how a finished slot reaches the loop.
 *   host_func  a host function after the batch's last copy pushes it onto
 *              the completion queue, from the driver's thread;
 *   poll       the loop asks each pending slot's done event on every
 *              iteration (gf__cuda_poll), which never blocks;
 *   hybrid     poll for a window after a submission's launches were queued
 *              (GF_COMPLETION_SPIN_NS, or as long as the shard's recent
 *              submissions took, up to GF_COMPLETION_SPIN_MAX_NS), then a
 *              host function takes over and the loop may sleep.
 * And a finished slot's stage times, from its events (gf__cuda_finish).
 * engine_cuda_state.h has the engine's map.
 */
#ifndef GF_ENGINE_CUDA_COMPLETE_H
#define GF_ENGINE_CUDA_COMPLETE_H

#include "engine_cuda_state.h"

/* After batch `s` is enqueued: what tells the loop it finished, in the
 * engine's mode (the done event, or a host function).  The shard's loop.
 * Returns the call's error. */
cudaError_t gf__cuda_complete_after(gf_engine *e, gf_slot *s, cuda_slot *cs);

/* The engine's poll (engine.h, gf_engine_poll).  The shard's loop. */
uint32_t gf__cuda_poll(gf_engine *e);

/* The engine's finish (engine.h, gf_engine_finish): each frame's status
 * and stage times.  The shard's loop; reads events that have completed. */
void gf__cuda_finish(gf_engine *e, gf_slot *s);

#endif

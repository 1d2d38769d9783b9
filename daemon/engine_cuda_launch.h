/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine: a batch's copies and launches on its slot's stream
 * (engine_cuda_state.h has the engine's map).
 */
#ifndef GF_ENGINE_CUDA_LAUNCH_H
#define GF_ENGINE_CUDA_LAUNCH_H

#include "engine_cuda_state.h"

/*
 * Enqueues the slot's whole batch on cs->busy (its stream, or for an
 * urgent batch of built-in kernels its urgent one): the inputs' copies, each
 * stage's kernels (stage k reads what stage k-1 wrote, intermediate results
 * alternating between the slot's two scratch buffers on the device, each
 * frame at its offset), the results' copies; a zero-copy batch
 * (s->zero_copy) has no copies, its first and last stages use the host
 * buffers.  A device frame needs no copy: its first stage reads its region
 * and its last writes there, in place, or (s->gathered) one kernel
 * gathers the batch's device frames into the slot's device buffer beside
 * the copied ones and another scatters their results back.  Small shm
 * frames that would take a copy each (several clients' in one batch) move
 * the same way, a kernel reading and writing their pinned regions across
 * the bus (s->host_gathered).  A batch of elementwise stages with no
 * device frame in place runs as one launch per stage over all its frames,
 * the bytes between them included (GF_FRAME_ALIGN_BYTES); any other runs
 * stage by stage, each stage over every frame: a plugin's launch_batch for
 * all of them, or a launch a frame (launch_frames).  Sets s->zero_copy,
 * s->gathered and s->host_gathered.  The shard's loop (or its thread at
 * start-up); never waits.  Returns the first failed call's error.
 */
cudaError_t gf__cuda_enqueue(const cuda_engine *ce, gf_slot *s, cuda_slot *cs);

/* The same for an untimed batch whose frames are not all in the slot's own
 * buffers (another shard's slots, pool.h; shm regions), without its
 * copies: its stages alone, on the slot's device buffers (what a graph of
 * such a batch holds; gf__cuda_copy moves the frames before and after).
 * Sets s->zero_copy, s->gathered and s->host_gathered to 0. */
cudaError_t gf__cuda_enqueue_stages(gf_slot *s, cuda_slot *cs);

/* Sets s->zero_copy, s->gathered and s->host_gathered for a replay of
 * batch `s`'s graph: as gf__cuda_enqueue would for a graph of the `whole`
 * batch, copies included; for one of its stages alone, no zero-copy and no
 * gathering of device frames (they ran in place when it was captured),
 * its small shm frames moved by kernel as gf__cuda_enqueue would. */
void gf__cuda_plan_moves(const cuda_engine *ce, gf_slot *s, int whole);

/* Batch `s`'s copies (and kernels that move frames: s->gathered,
 * s->host_gathered) to the device (to_device) or back, as
 * gf__cuda_enqueue makes them. */
cudaError_t gf__cuda_copy(const cuda_engine *ce, const gf_slot *s, cuda_slot *cs, int to_device);

#endif

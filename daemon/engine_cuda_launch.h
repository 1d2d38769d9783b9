/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine: a batch's copies and launches on its slot's stream
 * (engine_cuda_state.h has the engine's map).
 */
#ifndef GF_ENGINE_CUDA_LAUNCH_H
#define GF_ENGINE_CUDA_LAUNCH_H

#include "engine_cuda_state.h"

/*
 * Enqueues the slot's whole batch on its stream: the inputs' copies, each
 * stage's kernels (stage k reads what stage k-1 wrote, intermediate results
 * alternating between the slot's two scratch buffers on the device, each
 * frame at its offset), the results' copies; a zero-copy batch
 * (gf__cuda_zero_copy) has no copies, its first and last stages use the host
 * buffers.  A device frame needs no copy: its first stage reads its region
 * and its last writes there, in place, or (gf__cuda_gathers) one kernel
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

/* The same for a batch of frames that are all in slots' host buffers (its
 * own, or another shard's: pool.h), untimed, without its copies: its
 * stages alone, on the slot's device buffers (what a graph of such a batch
 * holds; gf__cuda_copy moves the frames before and after).  Sets
 * s->zero_copy, s->gathered and s->host_gathered to 0. */
cudaError_t gf__cuda_enqueue_stages(gf_slot *s, cuda_slot *cs);

/* Batch `s`'s copies to the device (to_device) or back, as gf__cuda_enqueue
 * makes them. */
cudaError_t gf__cuda_copy(const cuda_engine *ce, const gf_slot *s, cuda_slot *cs, int to_device);

/* Whether batch `s` gathers its device frames into the slot's device
 * buffers and scatters their results back: an elementwise pipeline, more
 * than one frame, every device frame 64 KiB or less (what a replayed
 * graph's slot says, as gf__cuda_zero_copy). */
int gf__cuda_gathers(const gf_slot *s);

/* Whether batch `s` runs zero-copy (its kernels on the pinned host
 * buffers, no copy): elementwise stages, within zero_copy_max_bytes, no
 * shm frame. */
int gf__cuda_zero_copy(const cuda_engine *ce, const gf_slot *s);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's graph cache: with cuda_graphs, an untimed batch of a
 * pipeline of a plugin or of several stages is captured once per slot and
 * batch shape as a CUDA graph and replayed (one launch instead of a copy,
 * the stages' kernels and a copy, which costs the GPU and the loop less);
 * each slot keeps the shapes that recur, the least recently used replaced.
 * engine_cuda_state.h has the engine's map.
 */
#ifndef GF_ENGINE_CUDA_GRAPHS_H
#define GF_ENGINE_CUDA_GRAPHS_H

#include "engine_cuda_state.h"

typedef struct graph_entry graph_entry;

/* The graph that runs batch `s` on its slot: found, or captured now; NULL
 * when the batch runs plain (no cache, timed, one elementwise stage, a
 * plugin that refuses graphs, or a capture that failed).  *with_copies
 * says whether it holds the batch's copies, or only its stages (frames in
 * another shard's slots, pool.h, or in shm regions: gf__cuda_copy moves
 * them before and after).  Sets s->zero_copy, s->gathered and
 * s->host_gathered (gf__cuda_plan_moves).  The shard's loop. */
cudaGraphExec_t gf__cuda_graph(const cuda_engine *ce, gf_slot *s, cuda_slot *cs, int *with_copies);

/* A slot's cache, empty (open), or its graphs destroyed and freed (close).
 * The shard's thread at start-up and shutdown.  open returns 0 or
 * -ENOMEM. */
int gf__cuda_graphs_open(cuda_slot *cs);
void gf__cuda_graphs_close(cuda_slot *cs);

#endif

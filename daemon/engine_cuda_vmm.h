/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's device regions (engine_cuda_vmm.c): engine.h's
 * gf_engine_device_map and gf_engine_device_unmap, through the driver's
 * virtual memory management looked up at run time, and their self-check at
 * engine open.
 */
#ifndef GF_ENGINE_CUDA_VMM_H
#define GF_ENGINE_CUDA_VMM_H

#include "engine_cuda_state.h"

/* Whether cuMemMap on `ce`'s device (current) refuses a size beyond an
 * imported allocation, checked once per device: where it does not, device
 * regions are off there (ce->vmm_status -ENOTSUP, one log line) and
 * gf__cuda_device_map refuses every region naming why.  The shard's thread
 * at engine open. */
void gf__cuda_vmm_check(cuda_engine *ce);

int gf__cuda_device_map(gf_engine *e, int fd, uint64_t bytes, uint32_t served,
                        gf_device_mapping *out, char *why, size_t why_len);
void gf__cuda_device_unmap(gf_engine *e, const gf_device_mapping *m);

#endif

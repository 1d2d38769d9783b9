/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's device regions (engine_cuda_vmm.c): engine.h's
 * gf_engine_device_map and gf_engine_device_unmap, through the driver's
 * virtual memory management looked up at run time.  Workers of the shard's
 * thread pool only.
 */
#ifndef GF_ENGINE_CUDA_VMM_H
#define GF_ENGINE_CUDA_VMM_H

#include "engine.h"

int gf__cuda_device_map(gf_engine *e, int fd, uint64_t bytes, gf_device_mapping *out, char *why,
                        size_t why_len);
void gf__cuda_device_unmap(gf_engine *e, const gf_device_mapping *m);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Device planning: how many shards the daemon runs and where each runs (its
 * engine, its CUDA device, its plugin streams), from the configuration's
 * "shards" and "devices", the devices visible and the cores online.  Pure
 * apart from its log lines; the control loop's thread, once, at start-up
 * (shards.c starts the shards it plans).
 */
#ifndef GF_SHARD_PLAN_H
#define GF_SHARD_PLAN_H

#include <stdint.h>

#include "config.h"

/* Shards per CUDA device when "shards" is 0, at most one per CPU core:
 * config/README.md ("Shards") has the measurements behind it. */
#define GF_SHARDS_PER_DEVICE_AUTO 8

/* Where one shard runs. */
typedef struct gf_shard_place {
    uint32_t index;               /* its index among the shards            */
    enum gf_engine_choice engine; /* cuda or cpu: chosen once, for all     */
    int device;                   /* CUDA ordinal (-1 for cpu)              */
    uint32_t stream_base;         /* the plugins' first stream index here   */
    uint32_t device_streams;      /* stream indices of every shard on device */
} gf_shard_place;

/*
 * The shards for `cfg` on `engine` (cuda or cpu, chosen), with `visible`
 * CUDA devices and `cores` CPU cores online: shard k runs on the k mod n-th
 * of the n devices used; "shards" 0 picks one per core, at most
 * GF_SHARDS_PER_DEVICE_AUTO per device, fewer where their slots would pass
 * max_pinned_bytes (the cpu engine: one).  Logs how many and why.  Returns
 * the count with *out a malloc'd array of that many places (the caller
 * frees it), or -1 with the problem logged (a device not visible, pinned
 * memory over its limit, a pipeline limited to devices no shard runs on,
 * out of memory).
 */
int gf_shard_plan(const gf_config *cfg, enum gf_engine_choice engine, int visible, long cores,
                  gf_shard_place **out);

/* Whether a shard of places[0..count) runs a pipeline limited to the
 * devices of `mask` (gf_pipeline.devices; 0: any). */
int gf_shard_plan_runs(const gf_shard_place *places, uint32_t count, uint32_t mask);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A reload's check: what of a new configuration the running daemon can
 * take.  It works from limits copied at start-up (the slots' buffers, where
 * the shards run), never from the running shards, so it runs off every
 * loop (reload.c: on a worker of the control loop's thread pool), where
 * nothing slow holds up a frame.
 */
#ifndef GF_RELOAD_CHECK_H
#define GF_RELOAD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "shard_plan.h"

/* What the daemon started with that bounds a reload: every slot's buffers,
 * as allocated for the start-up configuration, and where each shard runs
 * (shard_plan.h).  Filled once at start-up (gf_reload_limits_init), read
 * only after. */
typedef struct gf_reload_limits {
    uint64_t in_capacity_bytes;      /* max_frame_bytes at start-up              */
    uint64_t out_capacity_bytes;     /* gf_config_max_output_bytes at start-up   */
    uint64_t scratch_capacity_bytes; /* gf_config_max_scratch_bytes at start-up  */
    uint32_t shard_count;
    gf_shard_place places[GF_SHARDS_MAX]; /* [shard_count] */
} gf_reload_limits;

/* The limits of shards places[0..count) opened with `cfg`. */
void gf_reload_limits_init(gf_reload_limits *lim, const gf_config *cfg,
                           const gf_shard_place *places, uint32_t count);

/*
 * On any thread but a loop's, with `cur` the running configuration
 * (unchanged meanwhile): what cannot change while running (the keys
 * config.c's table marks as needing a restart, a frame or output size
 * beyond the slots' buffers, pipelines no shard's engine can run) keeps its
 * running value in `*next`, and is named in note[note_len] ("needs a
 * restart: slots 2 -> 4"; "" when everything applies); the new pipelines
 * are made runnable on every device a shard runs on (gf_engine_prepare:
 * plugins' device_open, once per device), unless the running ones stay for
 * a reason above: next's own are freed here (their device side may wait)
 * and next gets the running ones (gf_config_keep_pipelines), which the note
 * says.  Returns 0; -EINVAL when a device cannot run the new pipelines (a
 * package that does not load), note[] then saying why, the reload refused;
 * or -ENOMEM.
 */
int gf_reload_check(const gf_reload_limits *lim, const gf_config *cur, gf_config *next, char *note,
                    size_t note_len);

#endif

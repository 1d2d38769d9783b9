/* SPDX-License-Identifier: MIT */
/*
 * One shard, as shards.c sees it: a libuv loop on its own thread.  It
 * serves the connections the control loop hands it, reads each frame's
 * header into its connection's small buffer and its payload straight into a
 * claimed slot's (pinned) input buffer, submits the slot to the engine,
 * drains completions and writes replies in request order.
 *
 * Where a frame goes is drawn in conn_io.h, the connection's driver; which
 * file of a shard does what, in shard_state.h.
 */
#ifndef GF_SHARD_H
#define GF_SHARD_H

#include <uv.h>

#include "config.h"
#include "group.h"
#include "shard_plan.h"
#include "stats.h"

typedef struct gf_shard gf_shard;

/*
 * Start-up of one shard, on its own thread with its own `loop`: opens its
 * engine (allocating every slot and warming up every pipeline) on its
 * device, as shard `place` of `group` (filled before any serves).  It
 * serves what its mailbox hands it (gf_shard_accept).  `cfg` must stay
 * valid until the next gf_shard_reload_apply or gf_shard_close.  Returns 0,
 * or a negative errno / libuv error with its reason logged.
 */
int gf_shard_open(uv_loop_t *loop, const gf_config *cfg, gf_group *group,
                  const gf_shard_place *place, gf_shard **out);

/* Serves the accepted socket `fd` of peer uid/gid/pid, which the control
 * loop counted in this shard's connections; refuses it with shutting_down
 * once a drain has begun.  The shard's thread. */
void gf_shard_accept(gf_shard *sh, int fd, uint32_t uid, uint32_t gid, uint32_t pid);

/*
 * Starts a graceful stop: stop accepting, stop reading new frames, let every
 * frame already received finish and its reply be written, then close every
 * handle so that uv_run returns.  If that takes longer than
 * cfg->drain_timeout_ms, the frames still unanswered are abandoned (logged
 * with their count) and the shard counts as failed.  Safe to call more than
 * once.
 */
void gf_shard_shutdown(gf_shard *sh);

/*
 * A reload's second step (reload_check.h has the first), on the shard's
 * thread: from now on it uses `*next` (log level, pipeline parameters,
 * max_frame_bytes, timeouts, limits), and `fresh` (gf_stats_pipelines_new
 * for next's pipelines) as its per-pipeline totals.  It cannot fail:
 * whatever could was done before (shards.c).  Frames already claimed keep
 * the parameters they started with.
 */
void gf_shard_reload_apply(gf_shard *sh, const gf_config *next, gf_pipeline_stats *fresh);

/*
 * After uv_run has returned: closes the engine (waiting for the device), frees
 * the shard and returns the daemon's exit status: 0, or nonzero after a fatal
 * engine failure.
 */
int gf_shard_close(gf_shard *sh);

/* Nonzero once a fatal engine failure or a drain that ran out of time has
 * stopped the shard: the daemon must exit non-zero. */
int gf_shard_failed(const gf_shard *sh);

#endif

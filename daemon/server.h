/* SPDX-License-Identifier: MIT */
/*
 * The server: one shard's libuv side, as shards.c sees it.  It serves the
 * connections the control loop hands it, reads each frame's header into its connection's small
 * buffer and its payload straight into a claimed slot's (pinned) input
 * buffer, submits the slot to the engine, drains completions and writes
 * replies in request order.
 *
 * Where a frame goes (server_state.h draws the map of the files behind it):
 *   read      conn_io.c  on_io -> conn_read (recvmsg) -> conn_process ->
 *                        gf_admit_frame (admit.c: a place in a slot) ->
 *                        payload read straight into the slot
 *   submit    scheduler.c    gf_sched_submit_batches (deferred work, every
 *                        connection's whole frames of a pipeline together)
 *                        or gf_sched_end_batch -> gf_engine_submit
 *   complete  scheduler.c    completion.c's async callback -> gf_sched_complete
 *                        (reply headers ready; the connection is resumed)
 *   answer    conn_io.c  conn_resume -> conn_flush (sendmsg) ->
 *                        gf_conn_finish (conn.c: the slot goes back)
 */
#ifndef GF_SERVER_H
#define GF_SERVER_H

#include <uv.h>

#include "config.h"
#include "group.h"
#include "stats.h"

typedef struct gf_server gf_server;

/* Which shard a server is, and what it runs on (shards.c chooses). */
typedef struct gf_shard_ident {
    gf_group *group;              /* every shard, filled before any serves  */
    uint32_t index;               /* this one's, in group->shard            */
    enum gf_engine_choice engine; /* cuda or cpu: chosen once, for all     */
    int device;                   /* CUDA ordinal (-1 for cpu)              */
    uint32_t stream_base;         /* the plugins' first stream index here   */
    uint32_t device_streams;      /* stream indices of every shard on device */
} gf_shard_ident;

/*
 * Start-up of one shard, on its own thread with its own `loop`: opens its
 * engine (allocating every slot and warming up every pipeline) on its
 * device.  It serves what its mailbox hands it (gf_server_accept).  `cfg`
 * must stay valid until the next gf_server_reload_apply or gf_server_close.
 * Returns 0, or a negative errno / libuv error with its reason logged.
 */
int gf_server_open(uv_loop_t *loop, const gf_config *cfg, const gf_shard_ident *id,
                   gf_server **out);

/* Plugin stages whose last reference the calling thread drops are
 * destroyed on libuv's thread pool of `loop` (their device_close may wait
 * for the device), or where dropped once `loop` is NULL (it has stopped).
 * Each shard's thread sets its own; the control loop, which frees a
 * reload's old configuration, sets its own too. */
void gf_server_reap_on(uv_loop_t *loop);

/* Serves the accepted socket `fd` of peer uid/gid/pid, which the control
 * loop counted in this shard's connections; refuses it with shutting_down
 * once a drain has begun.  The shard's thread. */
void gf_server_accept(gf_server *srv, int fd, uint32_t uid, uint32_t gid, uint32_t pid);

/*
 * Starts a graceful stop: stop accepting, stop reading new frames, let every
 * frame already received finish and its reply be written, then close every
 * handle so that uv_run returns.  If that takes longer than
 * cfg->drain_timeout_ms, the frames still unanswered are abandoned (logged
 * with their count) and the server counts as failed.  Safe to call more than
 * once.
 */
void gf_server_shutdown(gf_server *srv);

/*
 * A reload, in two steps, so that nothing slow runs on a loop that serves
 * frames (reload.c runs the first on a thread of its own).
 *
 * gf_server_reload_prepare, on any thread while the loops run, with `cur`
 * the running configuration (unchanged meanwhile) and every shard's server:
 * what cannot change while running (the keys config.c's table marks as
 * needing a restart, a frame or output size beyond the slots' buffers,
 * pipelines an engine cannot run) keeps its running value in `*next`, and
 * is named in note[note_len] ("needs a restart: slots 2 -> 4"; "" when
 * everything applies); the new pipelines are made runnable on every
 * shard's engine (plugins' device_open, once per device), or *keep_running
 * says the running ones stay.  It touches nothing of the running servers.
 * Returns 0 or -ENOMEM.
 *
 * gf_server_reload_apply, on the shard's thread: from now on it uses `*next`
 * (log level, pipeline parameters, max_frame_bytes, timeouts, limits), and
 * `fresh` (gf_stats_pipelines_new for next's pipelines) as its per-pipeline
 * totals.  It cannot fail: whatever could was done before (shards.c).
 * Frames already claimed keep the parameters they started with.
 */
int gf_server_reload_prepare(gf_server *const *srvs, uint32_t count, const gf_config *cur,
                             gf_config *next, int *keep_running, char *note, size_t note_len);
void gf_server_reload_apply(gf_server *srv, const gf_config *next, gf_pipeline_stats *fresh);

/*
 * After uv_run has returned: closes the engine (waiting for the device), frees
 * the server and returns the daemon's exit status: 0, or nonzero after a fatal
 * engine failure.
 */
int gf_server_close(gf_server *srv);

/* Nonzero once a fatal engine failure or a drain that ran out of time has
 * stopped the server: the daemon must exit non-zero. */
int gf_server_failed(const gf_server *srv);

#endif

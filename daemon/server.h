/* SPDX-License-Identifier: MIT */
/*
 * The server: the libuv side of the daemon, as main.c sees it.  It listens
 * on the Unix socket, reads each frame's header into its connection's small
 * buffer and its payload straight into a claimed slot's (pinned) input
 * buffer, submits the slot to the engine, drains completions and writes
 * replies in request order.
 *
 * Where a frame goes (server_state.h draws the map of the files behind it):
 *   read      conn_io.c  on_io -> conn_read (recvmsg) -> conn_process ->
 *                        gf_admit_frame (admit.c: a place in a slot) ->
 *                        payload read straight into the slot
 *   submit    scheduler.c    gf_sched_end_batch -> gf_engine_submit
 *   complete  scheduler.c    completion.c's async callback -> gf_sched_complete
 *                        (reply headers ready; the connection is resumed)
 *   answer    conn_io.c  conn_resume -> conn_flush (sendmsg) ->
 *                        gf_conn_finish (conn.c: the slot goes back)
 */
#ifndef GF_SERVER_H
#define GF_SERVER_H

#include <uv.h>

#include "config.h"
#include "stats.h"

typedef struct gf_server gf_server;

/*
 * Start-up's first step: binds cfg->socket_path with cfg->socket_mode and
 * listens, replacing a stale socket file but nothing else, and refusing a
 * path where another daemon listens.  First, so that a second daemon fails
 * at once with one line, before it touches a GPU.  Returns the fd, or a
 * negative errno with one line logged.
 */
int gf_server_bind(const gf_config *cfg);

/*
 * Start-up: opens the engine named by cfg->engine (allocating every slot and
 * warming up every pipeline), then accepts on `listen_fd`: bound by
 * gf_server_bind (`owned`: the path is removed at close) or passed by
 * systemd, already listening.  When it returns 0 the daemon is ready: this
 * is the one place where start-up ends.  `cfg` must stay valid until the
 * next gf_server_reload_apply or gf_server_close.  Returns 0, or a negative
 * errno / libuv error with its reason logged; the caller still owns
 * `listen_fd` then.
 */
int gf_server_open(uv_loop_t *loop, const gf_config *cfg, int listen_fd, int owned,
                   gf_server **out);

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
 * A reload, in two steps, so that nothing slow runs on the loop that serves
 * frames (reload.c runs the first on a thread of its own).
 *
 * gf_server_reload_prepare, on any thread while the loop runs, with `cur`
 * the running configuration (unchanged meanwhile): what cannot change while
 * running (the keys config.c's table marks as needing a restart, a frame or
 * output size beyond the slots' buffers, pipelines the engine cannot run)
 * keeps its running value in `*next`, and is named in note[note_len]
 * ("needs a restart: slots 2 -> 4"; "" when everything applies); the new
 * pipelines are made runnable on the engine (plugins' device_open), or
 * *keep_running says the running ones stay.  It touches nothing of the
 * running server.  Returns 0 or -ENOMEM.
 *
 * gf_server_reload_apply, on the loop: from now on the server uses `*next`
 * (with the running pipelines in it if keep_running): log level, pipeline
 * parameters, max_frame_bytes, timeouts, limits.  Frames already claimed
 * keep the parameters they started with.  The caller keeps `*next` valid and
 * may free the old configuration.  Returns 0, or -ENOMEM and nothing
 * changed: the caller keeps the running configuration.
 */
int gf_server_reload_prepare(const gf_server *srv, const gf_config *cur, gf_config *next,
                             int *keep_running, char *note, size_t note_len);
int gf_server_reload_apply(gf_server *srv, gf_config *next, int keep_running);

/* For a watchdog: frames the engine has completed since start, and frames on
 * the engine now.  A server with frames in flight whose completed count stays
 * still is stuck. */
void gf_server_progress(const gf_server *srv, uint64_t *completed, uint32_t *in_flight);

/* One line for systemd's STATUS=: connections, frames/s over the last
 * second, slots busy, frames refused. */
void gf_server_status(const gf_server *srv, char *buf, size_t len);

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

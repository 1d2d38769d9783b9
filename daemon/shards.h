/* SPDX-License-Identifier: MIT */
/*
 * The shards: the daemon's serving loops, each a libuv loop on its own
 * thread with its own connections, slots (on its own CUDA device), engine,
 * completion queue, counters and trace: shared nothing on the frame path.
 * The control loop (main.c's, on the main thread) owns the listening
 * socket and hands each connection to one shard for its whole life, so its
 * replies keep their order; it also runs signals, systemd, reloads (parsed
 * once, applied by each shard between two of its events) and the drain.
 *
 *   control loop   listener.c: accept -> placement -> the shard's mailbox
 *   shard k        shard.c and below (shard_state.h draws them), on
 *                  device k mod devices
 *
 * Placement: the shard with the fewest connections, ties taken in turn.
 * What shards share is in group.h; how they talk is mailbox.h.
 */
#ifndef GF_SHARDS_H
#define GF_SHARDS_H

#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "mailbox.h"
#include "reload_check.h"

typedef struct gf_shards gf_shards;

/* Start-up's first step: binds cfg->socket_path with cfg->socket_group and
 * cfg->socket_mode and listens (listener.h), before any GPU is touched, so
 * that a second daemon fails at once with one line.  Returns the fd, or a
 * negative errno. */
int gf_shards_bind(const gf_config *cfg);

/*
 * Start-up: chooses the engine, the devices and the number of shards (each
 * logged with why), starts every shard's thread, which opens its engine,
 * and once all have, accepts on `listen_fd` (bound by gf_shards_bind, or
 * passed by systemd: `owned` 0) on `loop`.  The shards call the control
 * loop through `control`, its mailbox (mailbox.h), which the caller
 * initialised on `loop`: it keeps `loop` alive while the shards serve and
 * is closed once every shard has finished, which ends the control loop's
 * uv_run.  When it returns 0 the daemon is ready.  `cfg` stays valid until
 * gf_shards_close or a reload replaces it.  Returns 0, or a negative errno
 * with its reason logged (every shard is stopped again; the caller still
 * owns `listen_fd` and `control`).
 */
int gf_shards_open(uv_loop_t *loop, const gf_config *cfg, int listen_fd, int owned,
                   gf_mailbox *control, gf_shards **out);

/* A graceful stop: no new connections; every shard drains (shard.h's
 * gf_shard_shutdown), and the control loop's uv_run returns once all
 * have.  A shard whose drain runs out of time, or whose engine fails, makes
 * the process exit with GF_EXIT_FAILURE at once.  Safe more than once. */
void gf_shards_shutdown(gf_shards *g);

/* What a reload is checked against (reload_check.h), fixed at start-up. */
const gf_reload_limits *gf_shards_limits(const gf_shards *g);

/*
 * A reload's last step, on the control loop: everything that can fail is
 * done first (each shard's new per-pipeline totals), so that the reload is
 * applied on every shard or, returning -ENOMEM, on none.
 * Then each shard switches to `next` between two of its events, and `done`
 * runs on the control loop once all have: only then may the caller free
 * the configuration it replaced.  Returns 0 or -ENOMEM.
 */
typedef void (*gf_shards_applied_cb)(void *arg);
int gf_shards_reload_apply(gf_shards *g, const gf_config *next, gf_shards_applied_cb done,
                           void *arg);

/* For the systemd watchdog: frames the engines completed since start, and
 * batches on them now, every shard's. */
void gf_shards_progress(const gf_shards *g, uint64_t *completed, uint32_t *in_flight);

/* One line for systemd's STATUS=: shards, connections, frames/s over the
 * last second, slots busy, frames answered and failed. */
void gf_shards_status(const gf_shards *g, char *buf, size_t len);

/* After the control loop's uv_run returned: lets every shard close its
 * state and engine, each on its own thread (whose device is current),
 * joins them and frees everything.  Until then a drained shard's thread
 * waits, so that none has ended unjoined should another's failure exit the
 * process.  Returns 0. */
int gf_shards_close(gf_shards *g);

#endif

/*
 * The server: the libuv side of the daemon.  It listens on the Unix socket,
 * reads each frame's header into its connection's small buffer and its
 * payload straight into a claimed slot's (pinned) input buffer, submits the
 * slot to the engine, drains completions and writes replies in request order.
 *
 * Where a frame goes, in server.c:
 *   read      on_alloc / on_read / conn_process  (header parse, slot claim)
 *   submit    frame_submit                        (engine hand-off)
 *   complete  on_slot_done                         (completion queue drain)
 *   answer    conn_flush / on_write                (reply write, slot release)
 */
#ifndef GF_SERVER_H
#define GF_SERVER_H

#include <uv.h>

#include "config.h"
#include "stats.h"

/* Payload bytes that may travel in a connection's header buffer and be copied
 * into the slot: a small frame then costs one read(2), not two.  Every byte of
 * a payload beyond this is read by the kernel straight into pinned memory. */
#define GF_STAGED_PAYLOAD_MAX_BYTES 4096u

typedef struct gf_server gf_server;

/*
 * Start-up: opens the engine named by cfg->engine (allocating every slot and
 * warming up every pipeline), then listens on cfg->socket_path.  When it
 * returns 0 the daemon is ready: this is the one place where start-up ends.
 * `cfg` must outlive the server.  Returns 0 or a negative errno / libuv
 * error, logged with its reason.
 */
int gf_server_open(uv_loop_t *loop, const gf_config *cfg, gf_server **out);

/*
 * Starts a graceful stop: stop accepting, stop reading new frames, let every
 * frame already received finish and its reply be written, then close every
 * handle so that uv_run returns.  Safe to call more than once.
 */
void gf_server_shutdown(gf_server *srv);

/*
 * After uv_run has returned: closes the engine (waiting for the device), frees
 * the server and returns the daemon's exit status: 0, or nonzero after a fatal
 * engine failure.
 */
int gf_server_close(gf_server *srv);

/* Nonzero once a fatal engine failure has stopped the server. */
int gf_server_failed(const gf_server *srv);

#endif

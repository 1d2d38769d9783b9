/* SPDX-License-Identifier: MIT */
/*
 * A connection's driver: the events it reacts to and what it does about
 * them.  Its socket is watched with a uv_poll_t and read and written with
 * recvmsg/sendmsg of our own, not a uv_stream_t: a client passes its memfd
 * (REGION_ADD) as SCM_RIGHTS ancillary data, and only our own recvmsg sees
 * which bytes an fd came with, whether the control data was truncated, and
 * can close every stray fd.
 *
 * Where a frame goes in this file:
 *   read     on_io -> conn_read (recvmsg) -> conn_process (request.c decodes)
 *            -> gf_admit_frame (admit.c) or gf_query_answer (query.c)
 *   submit   a whole frame's batch after the loop's I/O (scheduler.c
 *            gf_sched_submit_batches); a frame received in place at
 *            conn_go_on -> gf_sched_end_batch -> the engine
 *   answer   the scheduler's finished hook (gf_conn_io_finished: each
 *            frame's reply made) -> conn_flush (one sendmsg
 *            per batch of ready replies) -> gf_conn_finish (conn.c: the slot
 *            goes back; what that makes possible is deferred work)
 *
 * After every event the driver does the same things in the same order
 * (conn_go_on): what was taken in goes to the engine, what is owed goes out,
 * an EOF or a fatal error is settled, and reading is on exactly when it can
 * progress.  What an event makes possible elsewhere is deferred work
 * (defer.h): no function here runs inside another's call for the same
 * connection.  Loop thread only.
 */
#ifndef GF_CONN_IO_H
#define GF_CONN_IO_H

#include <stdint.h>

#include "conn.h"

/* Reads, and bytes, per readiness event at most: a connection that always
 * has bytes must not keep the loop from the others.  1 MiB is about 0.3 ms
 * of copying at the 3 GB/s one loop thread moves, and costs a 16 MiB frame
 * 16 trips round the loop instead of 5 (a few µs each). */
#define GF_READS_PER_EVENT    16
#define GF_READ_QUANTUM_BYTES (1u << 20)
/* A receiver is "ready" for a slot (the scheduler's receive_ready hook)
 * when this much of its payload, or all of it if less, is there to read. */
#define GF_RECEIVE_READY_BYTES (64u * 1024)

/* The listener's accept callback: serves the accepted socket `fd` of the
 * peer uid/gid/pid; takes `fd` in every case. */
void gf_conn_io_accept(gf_shard *sh, int fd, uint32_t uid, uint32_t gid, uint32_t pid);

/* A connection's deferred work (gf_conn.resume, the shard's conn_resume):
 * something it waited for happened (a slot was granted, a reply went out or
 * became ready, the daemon started draining, it arrived from another
 * shard); it goes on. */
void gf_conn_io_resume(gf_defer_item *it);

/* The watchdog's round for one connection at `now_ns` (deadline.h): cuts
 * what a drain waits for, ends a stalled or late request, closes a
 * connection whose client does not read or is idle; each close is counted
 * and logged. */
void gf_conn_io_check_deadlines(gf_conn *c, uint64_t now_ns);

/*
 * The daemon gives up on the engine (a stuck or poisoned one), or on its
 * drain: every frame of `c` in a batch (open or on the engine) is answered
 * `status` with `text`, and what `c` is owed goes out now, in request order,
 * as far as its socket takes it without waiting.  The frames themselves are
 * left to the engine, with their slots and stages: the loop is about to
 * stop.
 */
void gf_conn_io_fail_batched(gf_conn *c, uint32_t status, const char *text);

/* The scheduler's hooks (scheduler.h), `arg` the shard: a slot was
 * granted; a slot finished (its frames' replies are made and written, or
 * dropped); is a receive waiter's payload there to read. */
void gf_conn_io_granted(gf_sched_client *sc, void *arg);
void gf_conn_io_finished(gf_slot *s, int completed, void *arg);
int gf_conn_io_receive_ready(gf_sched_client *sc, void *arg);

#endif

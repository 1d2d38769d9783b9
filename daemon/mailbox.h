/* SPDX-License-Identifier: MIT */
/*
 * How threads talk: one way, a call that carries its reply (Seastar's
 * submit_to returning a future; h2o's h2o_multithread_send_message with a
 * reply receiver).  Every exchange between threads is a gf_call: the
 * control loop handing a shard an accepted socket, a drain or a reload;
 * a shard telling the control loop it has finished; a shard asking the
 * others for their figures (gather.c) or handing one a connection
 * (move.c); a reload's loading thread answering the control loop
 * (reload.c).  None builds its own lock, condition variable or flags.
 *
 * A loop that takes calls has a mailbox: any thread posts a call to it
 * (gf_call_post) and the owning loop runs every call posted, in the order
 * posted, on its own thread, from one uv_async_t callback: `run(c, owner)`.
 * A call with an answer (`done` set) then travels back to the caller's
 * mailbox `reply_to`, whose loop runs `done(c, owner)` on its thread; the
 * call's struct carries the request and the answer both, so nothing is
 * shared while it travels but the mailboxes' queues.  A call without one
 * ends with `run`, which owns it from then on (frees it, keeps it).
 *
 * A call that cannot be delivered runs with a NULL owner where it is, so
 * that each cleans up after itself (closes the socket it carried, frees
 * itself): `run(c, NULL)` when the callee's mailbox closed with it queued
 * (its answer, if it has one, still goes back); `done(c, NULL)` when the
 * caller's mailbox had closed, on the thread that answered.
 *
 * The mutex guards a mailbox's queue and `closed`, and uv_async_send is
 * called under it, so nothing is sent to a handle once gf_mailbox_close
 * began.  A closed mailbox stays valid to post to (gf_call_post returns -1)
 * until its memory is freed: a mailbox that a thread of no loop may still
 * answer to (the control loop's, reload.c) lives as long as the process.
 */
#ifndef GF_MAILBOX_H
#define GF_MAILBOX_H

#include <uv.h>

#include "list.h"

typedef struct gf_call gf_call;
typedef struct gf_mailbox gf_mailbox;

/* What a call runs: on the callee's thread (run) or the caller's (done);
 * `owner` is that mailbox's owner, or NULL when it was not delivered. */
typedef void (*gf_call_fn)(gf_call *c, void *owner);

struct gf_call {
    gf_link link;         /* on a mailbox's queue; guarded by its lock       */
    gf_call_fn run;       /* the callee's thread                             */
    gf_call_fn done;      /* the caller's thread; NULL: no answer            */
    gf_mailbox *reply_to; /* where the answer goes (with `done`)             */
    int answering;        /* on its way back: `done` runs next               */
    int kept;             /* set by `run` (gf_call_keep): it answers later   */
};

struct gf_mailbox {
    uv_async_t async; /* wakes the owner's loop; unref'd: mail keeps no loop alive */
    uv_mutex_t lock;
    gf_link queue; /* guarded by lock */
    int closed;    /* guarded by lock */
    void *owner;   /* passed to each call's run or done */
};

/* On `loop`'s thread.  Returns 0 or a libuv error. */
int gf_mailbox_init(gf_mailbox *mb, uv_loop_t *loop, void *owner);

/* Any thread: posts `c` (run, and done with reply_to, set) to `to`.
 * Returns 0, or -1 when `to` is closed (`c` not taken). */
int gf_call_post(gf_mailbox *to, gf_call *c);

/* Called by `run` on the callee's thread: the call does not go back when
 * run returns; the callee answers it later with gf_call_answer (work that
 * ends in a later event of its loop: pool.h's batches). */
static inline void gf_call_keep(gf_call *c) {
    c->kept = 1;
}

/* Sends kept call `c` back to its caller (done runs there), now.  The
 * callee's thread. */
void gf_call_answer(gf_call *c);

/* Runs `work(c)` on a detached thread of its own, for work that may block
 * for good (a read of a FIFO or a hung mount), then answers `c` (done and
 * reply_to set) from that thread as a callee's loop does.  Returns 0, or a
 * negative errno (`c` not taken). */
int gf_call_spawn(gf_call *c, void (*work)(gf_call *c));

/* The owner's thread: refuses new calls, runs what is queued with a NULL
 * owner, and closes the handle; `mb` must stay valid until `cb` runs. */
void gf_mailbox_close(gf_mailbox *mb, uv_close_cb cb);

#endif

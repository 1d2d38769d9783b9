/* SPDX-License-Identifier: MIT */
/*
 * A mailbox: how one thread asks another's loop to do something.  Any
 * thread posts a message (a gf_mail, with the function to run); the owning
 * loop runs every message posted, in the order posted, on its own thread,
 * from one uv_async_t callback.  It is how the control loop hands a shard
 * an accepted socket, a drain or a reload, and how shards answer each
 * other (shards.c): Seastar's submit_to, with a mutex and a list.
 *
 * The mutex guards the queue and `closed`, and uv_async_send is called
 * under it, so nothing is sent to a handle once gf_mailbox_close began.  A
 * message posted to a closed mailbox is not taken: the poster keeps it.
 * Messages still queued when the mailbox closes are run with a NULL owner:
 * each cleans itself up (closes the socket it carried, frees itself).
 */
#ifndef GF_MAILBOX_H
#define GF_MAILBOX_H

#include <uv.h>

#include "list.h"

typedef struct gf_mail gf_mail;

struct gf_mail {
    gf_link link;                         /* on the queue; guarded by its lock */
    void (*run)(gf_mail *m, void *owner); /* the owner's thread; owner NULL:
                                             not delivered, clean up           */
};

typedef struct gf_mailbox {
    uv_async_t async; /* wakes the owner's loop; unref'd: mail keeps no loop alive */
    uv_mutex_t lock;
    gf_link queue; /* guarded by lock */
    int closed;    /* guarded by lock */
    void *owner;   /* passed to each message's run */
} gf_mailbox;

/* On `loop`'s thread.  Returns 0 or a libuv error. */
int gf_mailbox_init(gf_mailbox *mb, uv_loop_t *loop, void *owner);

/* Any thread.  Returns 0, or -1 when the mailbox is closed (`m` not taken). */
int gf_mailbox_post(gf_mailbox *mb, gf_mail *m);

/* The owner's thread: refuses new mail, runs what is queued with a NULL
 * owner, and closes the handle; `mb` must stay valid until `cb` runs. */
void gf_mailbox_close(gf_mailbox *mb, uv_close_cb cb);

#endif

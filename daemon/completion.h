/* SPDX-License-Identifier: MIT */
/*
 * The completion queue: how a finished slot travels from an engine's thread
 * (the CUDA driver's host-function thread, or a CPU worker) to the loop.
 *
 * gf_completion_push() is lock-free (a Treiber stack) and then calls
 * uv_async_send(), so it is safe inside a cudaLaunchHostFunc callback, which
 * must make no CUDA call and take no lock that a thread inside a CUDA call
 * could hold.  uv_async_send coalesces several sends into one callback, so the
 * loop-side callback drains the whole stack every time and hands each slot,
 * oldest first, to `on_done`.
 */
#ifndef GF_COMPLETION_H
#define GF_COMPLETION_H

#include <stdatomic.h>

#include <uv.h>

#include "slots.h"

typedef void (*gf_completion_cb)(gf_slot *slot, void *arg);

typedef struct gf_completion {
    uv_async_t async;         /* wakes the loop; closed by gf_completion_close */
    _Atomic(gf_slot *) head;  /* pushed slots, newest first                     */
    gf_completion_cb on_done; /* runs on the loop thread for each slot          */
    void *arg;
} gf_completion;

/* Initialises `q` on `loop`.  Returns 0 or a libuv error. Loop thread. */
int gf_completion_init(gf_completion *q, uv_loop_t *loop, gf_completion_cb on_done, void *arg);

/* Hands `slot` to the loop.  Any thread; never blocks. */
void gf_completion_push(gf_completion *q, gf_slot *slot);

/* Hands `slot` to `on_done` at once: for a polling engine, which finds
 * finished slots on the loop thread itself.  Loop thread only. */
static inline void gf_completion_deliver(gf_completion *q, gf_slot *slot) {
    q->on_done(slot, q->arg);
}

/* Closes the async handle; `q` must stay valid until `cb` runs. */
void gf_completion_close(gf_completion *q, uv_close_cb cb);

#endif

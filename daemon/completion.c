/* SPDX-License-Identifier: MIT */
#include "completion.h"

#include <stddef.h>

#include "loopprof.h"

/* The loop thread, the async callback: runs on_done for everything pushed so far, oldest
 * first.  uv_async_send coalesces, so all of it, every time. */
static void on_async(uv_async_t *handle) {
    gf_completion *q = handle->data;
    int prof = gf_prof_enter(GF_PROF_WAKE);
    gf_slot *s = atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
    /* The stack is newest first; reverse it to hand slots over in completion order. */
    gf_slot *fifo = NULL;
    while (s) {
        gf_slot *next = s->next_done;
        s->next_done = fifo;
        fifo = s;
        s = next;
    }
    while (fifo) {
        gf_slot *next = fifo->next_done;
        fifo->next_done = NULL;
        q->on_done(fifo, q->arg);
        fifo = next;
    }
    gf_prof_leave(prof);
}

int gf_completion_init(gf_completion *q, uv_loop_t *loop, gf_completion_cb on_done, void *arg) {
    atomic_init(&q->head, NULL);
    q->on_done = on_done;
    q->arg = arg;
    q->async.data = q;
    return uv_async_init(loop, &q->async, on_async);
}

/* An engine's thread (or any): a lock-free push, then a wake-up. */
void gf_completion_push(gf_completion *q, gf_slot *slot) {
    gf_slot *old = atomic_load_explicit(&q->head, memory_order_relaxed);
    do {
        slot->next_done = old;
    } while (!atomic_compare_exchange_weak_explicit(&q->head, &old, slot, memory_order_release,
                                                    memory_order_relaxed));
    uv_async_send(&q->async);
}

void gf_completion_close(gf_completion *q, uv_close_cb cb) {
    uv_close((uv_handle_t *)&q->async, cb);
}

/* SPDX-License-Identifier: MIT */
/*
 * Calls between threads (mailbox.h).
 */
#include "mailbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* Puts `c` on `mb`'s queue unless it is closed.  Any thread.  Returns 0 or
 * -1. */
static int enqueue(gf_mailbox *mb, gf_call *c) {
    uv_mutex_lock(&mb->lock);
    int closed = mb->closed;
    if (!closed) {
        gf_list_push_back(&mb->queue, &c->link);
        uv_async_send(&mb->async);
    }
    uv_mutex_unlock(&mb->lock);
    return closed ? -1 : 0;
}

/* The callee's side is over (run has returned): the answer goes back, or,
 * when the caller's mailbox is closed, `done` cleans up here.  The callee's
 * thread: its loop's, or a spawned call's own. */
static void answer(gf_call *c) {
    c->answering = 1;
    if (enqueue(c->reply_to, c) < 0)
        c->done(c, NULL);
}

/* Runs one call taken off a queue with `owner` (NULL: not delivered), on
 * the mailbox's owner's thread. */
static void deliver(gf_call *c, void *owner) {
    if (c->answering) {
        c->done(c, owner);
        return;
    }
    /* Read before run: without an answer, run owns the call. */
    int answers = c->done != NULL;
    c->kept = 0;
    c->run(c, owner);
    if (answers && !c->kept)
        answer(c);
}

/* The owner's loop: runs every call posted so far. */
static void on_mail(uv_async_t *h) {
    gf_mailbox *mb = h->data;
    gf_link batch;
    gf_list_init(&batch);
    uv_mutex_lock(&mb->lock);
    gf_list_splice(&batch, &mb->queue);
    uv_mutex_unlock(&mb->lock);
    gf_link *l;
    while ((l = gf_list_pop_front(&batch)))
        deliver(gf_list_entry(l, gf_call, link), mb->owner);
}

int gf_mailbox_init(gf_mailbox *mb, uv_loop_t *loop, void *owner) {
    int rc = uv_mutex_init(&mb->lock);
    if (rc < 0)
        return rc;
    gf_list_init(&mb->queue);
    mb->closed = 0;
    mb->owner = owner;
    mb->async.data = mb;
    if ((rc = uv_async_init(loop, &mb->async, on_mail)) < 0) {
        uv_mutex_destroy(&mb->lock);
        return rc;
    }
    uv_unref((uv_handle_t *)&mb->async);
    return 0;
}

void gf_call_answer(gf_call *c) {
    c->kept = 0;
    answer(c);
}

int gf_call_post(gf_mailbox *to, gf_call *c) {
    c->answering = 0;
    return enqueue(to, c);
}

/* What a spawned call's thread is given. */
typedef struct spawned {
    gf_call *call;
    void (*work)(gf_call *c);
} spawned;

/* A spawned call's own thread: the work, then the answer. */
static void *spawned_main(void *arg) {
    spawned s = *(spawned *)arg;
    free(arg);
    s.work(s.call);
    answer(s.call);
    return NULL;
}

int gf_call_spawn(gf_call *c, void (*work)(gf_call *c)) {
    spawned *s = malloc(sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    *s = (spawned){.call = c, .work = work};
    c->answering = 0;
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, spawned_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(s);
        return -rc;
    }
    return 0;
}

void gf_mailbox_close(gf_mailbox *mb, uv_close_cb cb) {
    gf_link left;
    gf_list_init(&left);
    uv_mutex_lock(&mb->lock);
    mb->closed = 1;
    gf_list_splice(&left, &mb->queue);
    uv_mutex_unlock(&mb->lock);
    gf_link *l;
    while ((l = gf_list_pop_front(&left)))
        deliver(gf_list_entry(l, gf_call, link), NULL);
    uv_close((uv_handle_t *)&mb->async, cb);
}

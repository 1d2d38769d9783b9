/* SPDX-License-Identifier: MIT */
/*
 * Deferred work: what an event causes elsewhere runs once the event is over,
 * never inside it.  A finished reply, a freed slot or a closed connection
 * only marks an item (go on with this connection, grant free slots, see
 * whether the drain is over, trim the heap); one pass after the loop's I/O
 * phase (a uv_check_t) runs every marked item in the order marked, and
 * items marked during the pass run in the same pass.  This is libuv's
 * write_completed_queue, Redis's beforeSleep and h2o's pending list: no
 * event handler re-enters the object that caused it, so none needs a guard
 * against its own nesting.
 *
 * An item marked outside the I/O phase (a timer, a close callback) must not
 * wait for the next event: a marked item keeps an idle handle started,
 * which makes the loop's next poll return at once.
 *
 * An item may also be put off to the next loop iteration
 * (gf_defer_next): it runs before that iteration's poll, so the sockets
 * that are ready meanwhile are served in between.  That is how a
 * connection yields the loop after its share of work.  Loop thread only.
 */
#ifndef GF_DEFER_H
#define GF_DEFER_H

#include <uv.h>

#include "list.h"

/* Rounds of one pass: an item marked again each time it runs (a bug) must
 * not keep the loop from its sockets; what is left runs in the next pass. */
#define GF_DEFER_ROUNDS_MAX 64

typedef struct gf_defer_item {
    gf_link link;                          /* on the pass's list while marked */
    void (*run)(struct gf_defer_item *it); /* what to do; may mark items      */
} gf_defer_item;

typedef struct gf_defer {
    uv_check_t pass;    /* runs the marked items after each poll                */
    uv_idle_t kick;     /* started while items wait: the poll won't block, and
                           it runs the next iteration's items before that poll  */
    gf_link marked;     /* items to run after this event, in the order marked   */
    gf_link next;       /* items to run in the next loop iteration              */
    uint64_t iteration; /* loop iterations so far (one per pass)                */
} gf_defer;

/* Initialises `d` on `loop`; its handles keep no loop alive.  Returns 0 or
 * a libuv error. */
int gf_defer_init(gf_defer *d, uv_loop_t *loop);

/* An item that runs `run` when marked. */
void gf_defer_item_init(gf_defer_item *it, void (*run)(gf_defer_item *it));

/* Marks `it` to run in the next pass; marking it again before then does
 * nothing more. */
void gf_defer_mark(gf_defer *d, gf_defer_item *it);

/* Marks `it` to run after every item marked so far, moving it there if it
 * is marked already: work that must see what those items do. */
void gf_defer_mark_last(gf_defer *d, gf_defer_item *it);

/* Puts `it` off to the next loop iteration, before its poll; an item
 * already marked or put off stays where it is. */
void gf_defer_next(gf_defer *d, gf_defer_item *it);

/* Unmarks `it` (its owner goes away). */
void gf_defer_cancel(gf_defer_item *it);

/* Runs the marked items now (the pass, for a caller that cannot wait for the
 * loop: start-up and teardown). */
void gf_defer_run(gf_defer *d);

/* Closes both handles; `d` must stay valid until `cb` ran for each. */
void gf_defer_close(gf_defer *d, uv_close_cb cb);

#endif

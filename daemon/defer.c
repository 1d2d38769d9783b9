/* SPDX-License-Identifier: MIT */
/*
 * Deferred work (defer.h): a list of marked items, run by a check handle.
 */
#include "defer.h"

#include <stddef.h>

/* Before the poll: what was put off to this iteration runs now. */
static void on_kick(uv_idle_t *h) {
    gf_defer *d = h->data;
    if (gf_list_empty(&d->next))
        return;
    gf_list_splice(&d->marked, &d->next);
    gf_defer_run(d);
}

static void on_pass(uv_check_t *h) {
    gf_defer *d = h->data;
    d->iteration++;
    gf_defer_run(d);
}

/* The idle handle runs while anything waits, so that no poll blocks. */
static void kick_update(gf_defer *d) {
    if (uv_is_closing((uv_handle_t *)&d->kick))
        return;
    if (gf_list_empty(&d->marked) && gf_list_empty(&d->next))
        uv_idle_stop(&d->kick);
    else
        uv_idle_start(&d->kick, on_kick);
}

int gf_defer_init(gf_defer *d, uv_loop_t *loop) {
    gf_list_init(&d->marked);
    gf_list_init(&d->next);
    d->iteration = 0;
    int rc = uv_check_init(loop, &d->pass);
    if (rc < 0)
        return rc;
    uv_idle_init(loop, &d->kick);
    d->pass.data = d->kick.data = d;
    uv_check_start(&d->pass, on_pass);
    uv_unref((uv_handle_t *)&d->pass);
    uv_unref((uv_handle_t *)&d->kick);
    return 0;
}

void gf_defer_item_init(gf_defer_item *it, void (*run)(gf_defer_item *it)) {
    gf_link_init(&it->link);
    it->run = run;
}

void gf_defer_mark(gf_defer *d, gf_defer_item *it) {
    if (gf_linked(&it->link))
        return;
    gf_list_push_back(&d->marked, &it->link);
    kick_update(d);
}

void gf_defer_mark_last(gf_defer *d, gf_defer_item *it) {
    gf_list_remove(&it->link);
    gf_list_push_back(&d->marked, &it->link);
    kick_update(d);
}

void gf_defer_next(gf_defer *d, gf_defer_item *it) {
    if (gf_linked(&it->link))
        return;
    gf_list_push_back(&d->next, &it->link);
    kick_update(d);
}

void gf_defer_cancel(gf_defer_item *it) {
    gf_list_remove(&it->link);
}

void gf_defer_run(gf_defer *d) {
    for (int round = 0; round < GF_DEFER_ROUNDS_MAX && !gf_list_empty(&d->marked); round++) {
        /* This round runs what is marked now; what it marks runs next round. */
        gf_link now;
        gf_list_init(&now);
        gf_list_splice(&now, &d->marked);
        gf_link *l;
        while ((l = gf_list_pop_front(&now))) {
            gf_defer_item *it = gf_list_entry(l, gf_defer_item, link);
            it->run(it);
        }
    }
    kick_update(d);
}

void gf_defer_close(gf_defer *d, uv_close_cb cb) {
    uv_close((uv_handle_t *)&d->pass, cb);
    uv_close((uv_handle_t *)&d->kick, cb);
}

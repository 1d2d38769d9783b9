/*
 * Deferred work (defer.h): a list of marked items, run by a check handle.
 */
#include "defer.h"

#include <stddef.h>

static void on_kick(uv_idle_t *h) {
    (void)h;
}

static void on_pass(uv_check_t *h) {
    gf_defer_run(h->data);
}

int gf_defer_init(gf_defer *d, uv_loop_t *loop) {
    gf_list_init(&d->marked);
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
    if (gf_list_empty(&d->marked) && !uv_is_closing((uv_handle_t *)&d->kick))
        uv_idle_start(&d->kick, on_kick);
    gf_list_push_back(&d->marked, &it->link);
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
    if (gf_list_empty(&d->marked) && !uv_is_closing((uv_handle_t *)&d->kick))
        uv_idle_stop(&d->kick);
}

void gf_defer_close(gf_defer *d, uv_close_cb cb) {
    uv_close((uv_handle_t *)&d->pass, cb);
    uv_close((uv_handle_t *)&d->kick, cb);
}

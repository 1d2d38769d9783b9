/* SPDX-License-Identifier: MIT */
#include "mailbox.h"

static void on_mail(uv_async_t *h) {
    gf_mailbox *mb = h->data;
    gf_link batch;
    gf_list_init(&batch);
    uv_mutex_lock(&mb->lock);
    gf_list_splice(&batch, &mb->queue);
    uv_mutex_unlock(&mb->lock);
    gf_link *l;
    while ((l = gf_list_pop_front(&batch)))
        gf_list_entry(l, gf_mail, link)->run(gf_list_entry(l, gf_mail, link), mb->owner);
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

int gf_mailbox_post(gf_mailbox *mb, gf_mail *m) {
    uv_mutex_lock(&mb->lock);
    int closed = mb->closed;
    if (!closed) {
        gf_list_push_back(&mb->queue, &m->link);
        uv_async_send(&mb->async);
    }
    uv_mutex_unlock(&mb->lock);
    return closed ? -1 : 0;
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
        gf_list_entry(l, gf_mail, link)->run(gf_list_entry(l, gf_mail, link), NULL);
    uv_close((uv_handle_t *)&mb->async, cb);
}

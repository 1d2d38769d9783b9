/* SPDX-License-Identifier: MIT */
/*
 * The one list type of the daemon: an intrusive, circular, doubly linked
 * list (libuv's uv__queue, nng's nni_list).  A struct that can be on a list
 * embeds a gf_link; the list's head is a gf_link of its own.  Insertion,
 * removal from anywhere and "is it on a list" are O(1) and allocate nothing,
 * so no per-frame path ever scans a list to take something off it.
 *
 *   gf_list_init(&head);
 *   gf_list_push_back(&head, &conn->waiting_link);
 *   gf_conn *c = gf_list_entry(gf_list_front(&head), gf_conn, waiting_link);
 *   gf_list_remove(&c->waiting_link);
 *
 * A link that is on no list points to itself (gf_link_init, and every
 * removal), so gf_linked() tells whether it is queued.  Not thread-safe: a
 * list belongs to the thread its comment names.
 */
#ifndef GF_LIST_H
#define GF_LIST_H

#include <stddef.h>

typedef struct gf_link {
    struct gf_link *next, *prev;
} gf_link;

/* The struct of type `type` whose member `member` is the link `link`. */
#define gf_list_entry(link, type, member) ((type *)((char *)(link)-offsetof(type, member)))

/* A list head, or a link on no list. */
static inline void gf_link_init(gf_link *l) {
    l->next = l->prev = l;
}
#define gf_list_init gf_link_init

/* Nonzero when the link is on a list. */
static inline int gf_linked(const gf_link *l) {
    return l->next != l;
}

static inline int gf_list_empty(const gf_link *head) {
    return head->next == head;
}

/* The first element's link, or NULL when the list is empty. */
static inline gf_link *gf_list_front(const gf_link *head) {
    return head->next == head ? NULL : head->next;
}

/* The link after `l` on the list `head`, or NULL at its end. */
static inline gf_link *gf_list_next(const gf_link *head, const gf_link *l) {
    return l->next == head ? NULL : l->next;
}

/* Puts `l` (on no list) after `at`. */
static inline void gf_link_insert_after(gf_link *at, gf_link *l) {
    l->prev = at;
    l->next = at->next;
    at->next->prev = l;
    at->next = l;
}

static inline void gf_list_push_back(gf_link *head, gf_link *l) {
    gf_link_insert_after(head->prev, l);
}

static inline void gf_list_push_front(gf_link *head, gf_link *l) {
    gf_link_insert_after(head, l);
}

/* Takes `l` off its list, if it is on one. */
static inline void gf_list_remove(gf_link *l) {
    l->prev->next = l->next;
    l->next->prev = l->prev;
    gf_link_init(l);
}

/* Takes the first element off and returns its link, or NULL when empty. */
static inline gf_link *gf_list_pop_front(gf_link *head) {
    gf_link *l = gf_list_front(head);
    if (l)
        gf_list_remove(l);
    return l;
}

/* Moves every element of `from` to the end of `to`, leaving `from` empty. */
static inline void gf_list_splice(gf_link *to, gf_link *from) {
    if (gf_list_empty(from))
        return;
    gf_link *first = from->next, *last = from->prev;
    first->prev = to->prev;
    to->prev->next = first;
    last->next = to;
    to->prev = last;
    gf_link_init(from);
}

/* A for loop over the list `head`: `it` names each link in turn, `after` the
 * one after it, so the body may remove `it` (but no other element). */
#define gf_list_each(it, after, head)                                                              \
    for (gf_link *it = (head)->next, *after = it->next; it != (head); it = after, after = it->next)

#endif

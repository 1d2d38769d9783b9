/* SPDX-License-Identifier: MIT */
#include "gather.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "mailbox.h"

typedef struct gather gather;

/* One shard's part: the mail asking for its snapshot. */
typedef struct part {
    gf_mail mail;
    gather *g;
    uint32_t shard;
} part;

struct gather {
    gf_mailbox *origin; /* the asking shard's (group.h: it outlives the shard,
                           which may be gone when the parts are in:
                           its requester left, and it stopped)               */
    uint32_t origin_shard;
    gf_gather_cb cb;
    void *arg; /* NULL once the requester went                      */
    uint32_t trace_frames;
    uint32_t count;
    atomic_uint left;   /* parts not yet taken: the last one mails `back`    */
    gf_mail back;       /* to the origin's mailbox, once every part is taken */
    gf_snapshot *snaps; /* [count]; snaps[k] written by shard k's thread only,
                           read by the origin's after `back` arrives: the
                           mailboxes' locks order them                       */
    part *parts;        /* [count] */
};

static void gather_free(gather *g) {
    for (uint32_t k = 0; k < g->count; k++)
        gf_snapshot_free(&g->snaps[k]);
    free(g->snaps);
    free(g->parts);
    free(g);
}

/* Origin's thread: every part is in. */
static void on_back(gf_mail *m, void *owner) {
    gather *g = gf_list_entry(m, gather, back);
    if (owner != NULL)
        g->cb(owner, g->snaps, g->count, g->trace_frames, g->arg);
    gather_free(g);
}

/* One part is done: the last one sends the whole back to the origin. */
static void part_done(gather *g) {
    if (atomic_fetch_sub_explicit(&g->left, 1, memory_order_acq_rel) != 1)
        return;
    if (gf_mailbox_post(g->origin, &g->back) < 0)
        gather_free(g); /* the origin stopped: nobody waits for it */
}

/* Shard k's thread, between two of its events. */
static void on_part(gf_mail *m, void *owner) {
    part *p = gf_list_entry(m, part, mail);
    gather *g = p->g;
    gf_snapshot *snap = &g->snaps[p->shard];
    if (owner != NULL && gf_snapshot_take(owner, snap, g->trace_frames) < 0) {
        gf_snapshot_free(snap);
        snap->present = 0;
    }
    part_done(g);
}

int gf_gather(gf_shard *sh, uint32_t trace_frames, gf_gather_cb cb, void *arg, void ***arg_slot) {
    uint32_t n = sh->group->count;
    gather *g = calloc(1, sizeof *g);
    if (g == NULL)
        return -1;
    g->snaps = calloc(n, sizeof *g->snaps);
    g->parts = calloc(n, sizeof *g->parts);
    if (g->snaps == NULL || g->parts == NULL ||
        gf_snapshot_take(sh, &g->snaps[sh->index], trace_frames) < 0) {
        gather_free(g);
        return -1;
    }
    g->origin = &sh->group->shard[sh->index].mailbox;
    g->origin_shard = sh->index;
    g->cb = cb;
    g->arg = arg;
    g->trace_frames = trace_frames;
    g->count = n;
    g->back.run = on_back;
    *arg_slot = &g->arg;
    if (n == 1) {
        cb(sh, g->snaps, 1, trace_frames, arg);
        gather_free(g);
        *arg_slot = NULL;
        return 0;
    }
    /* One for each other shard, and one held here until every mail is
     * posted, so that the set cannot come back before that. */
    atomic_init(&g->left, n);
    for (uint32_t k = 0; k < n; k++) {
        if (k == g->origin_shard)
            continue;
        part *p = &g->parts[k];
        p->g = g;
        p->shard = k;
        p->mail.run = on_part;
        if (gf_mailbox_post(&sh->group->shard[k].mailbox, &p->mail) < 0)
            part_done(g); /* that shard has stopped: left out */
    }
    part_done(g);
    return 0;
}

/* SPDX-License-Identifier: MIT */
#include "gather.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "group.h"
#include "mailbox.h"

typedef struct gather gather;

/* One shard's part: a call asking for its snapshot, answered to the
 * asking shard. */
typedef struct part {
    gf_call call;
    gather *g;
    uint32_t shard;
} part;

struct gather {
    gf_gather_cb cb;
    void *arg; /* NULL once the requester went                      */
    uint32_t trace_frames;
    uint32_t count;
    atomic_uint left;   /* parts not yet answered (and one held while they
                           are posted): the last one calls cb            */
    gf_snapshot *snaps; /* [count]; snaps[k] written by shard k's thread only,
                           read by the origin's once every part has answered:
                           the mailboxes' locks order them                   */
    part *parts;        /* [count] */
};

static void gather_free(gather *g) {
    for (uint32_t k = 0; k < g->count; k++)
        gf_snapshot_free(&g->snaps[k]);
    free(g->snaps);
    free(g->parts);
    free(g);
}

/* One part is in.  The last calls cb on the asking shard `origin` and frees
 * the whole; with no origin (it has stopped: this runs on the thread whose
 * answer found its mailbox closed) nobody waits, and the whole is freed. */
static void part_done(gather *g, gf_shard *origin) {
    if (atomic_fetch_sub_explicit(&g->left, 1, memory_order_acq_rel) != 1)
        return;
    if (origin != NULL)
        g->cb(origin, g->snaps, g->count, g->trace_frames, g->arg);
    gather_free(g);
}

/* Shard k's thread, between two of its events (owner NULL: it had
 * stopped, and is left out). */
static void on_part(gf_call *c, void *owner) {
    part *p = gf_list_entry(c, part, call);
    gather *g = p->g;
    gf_snapshot *snap = &g->snaps[p->shard];
    if (owner != NULL && gf_snapshot_take(owner, snap, g->trace_frames) < 0) {
        gf_snapshot_free(snap);
        snap->present = 0;
    }
}

/* The asking shard's thread: shard k's part is in. */
static void on_part_back(gf_call *c, void *owner) {
    part_done(gf_list_entry(c, part, call)->g, owner);
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
    g->cb = cb;
    g->arg = arg;
    g->trace_frames = trace_frames;
    g->count = n;
    *arg_slot = &g->arg;
    if (n == 1) {
        cb(sh, g->snaps, 1, trace_frames, arg);
        gather_free(g);
        *arg_slot = NULL;
        return 0;
    }
    /* One for each other shard, and one held here until every call is
     * posted, so that the set cannot be complete before that. */
    atomic_init(&g->left, n);
    for (uint32_t k = 0; k < n; k++) {
        if (k == sh->index)
            continue;
        part *p = &g->parts[k];
        p->g = g;
        p->shard = k;
        p->call = (gf_call){
            .run = on_part, .done = on_part_back, .reply_to = &sh->group->shard[sh->index].mailbox};
        if (gf_call_post(&sh->group->shard[k].mailbox, &p->call) < 0)
            part_done(g, sh); /* that shard has stopped: left out */
    }
    part_done(g, sh);
    return 0;
}

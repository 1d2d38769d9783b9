/* SPDX-License-Identifier: MIT */
/*
 * A device's shards running one pipeline's batches together (pool.h).  Two
 * threads meet here, and only through a call's mail: the sending shard's
 * (gf_pool_take, back) and the home's (arrive, the pass, gf_pool_finished).
 * While a batch travels, the sending shard leaves its slot and frames
 * alone, as it does while its engine runs them; the home reads them, and
 * writes only each frame's outcome (status, stage times, submission,
 * submitted_on) and the slot's done_ns and failed, before it answers.
 */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>

#include "defer.h"
#include "group.h"
#include "list.h"
#include "loopprof.h"
#include "mailbox.h"
#include "shard_state.h"
#include "util.h"

/* One batch on its way to its home and back: a call per slot of the
 * sending shard, which a slot's `pooled` points to while it travels. */
typedef struct gf_pool_call {
    gf_call call;    /* first: the mailbox hands this back            */
    gf_slot *slot;   /* the sending shard's batch                     */
    gf_link pending; /* the home's: waiting for a place in a batch     */
    int ran;         /* the answer: the home ran it (its frames' outcomes
                        are set), or not (it runs where it came from)  */
} gf_pool_call;

struct gf_pool {
    /* The sending side. */
    gf_pool_call *calls; /* [the shard's slots]                          */
    uint32_t *peers;     /* the shards of this one's device, in order,
                            this one among them                         */
    uint32_t peer_count;
    uint32_t me; /* this one's place in peers                 */
    /* The home side. */
    gf_sched_client client; /* stands for the other shards' batches       */
    gf_link pending;        /* their calls waiting for a place (FIFO)     */
    uint32_t held;          /* calls taken and not yet answered           */
    gf_defer_item pass;     /* pending calls to place, after this event   */
    gf_shard *sh;           /* whose                                       */
};

static void arrive(gf_call *call, void *owner);
static void back(gf_call *call, void *owner);
static void run_pass(gf_defer_item *it);

int gf_pool_open(gf_shard *sh) {
    const gf_group *g = sh->group;
    gf_pool *p = sh->pool = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->sh = sh;
    p->calls = calloc(sh->sched.ring.count ? sh->sched.ring.count : 1, sizeof *p->calls);
    p->peers = calloc(g->count, sizeof *p->peers);
    if (p->calls == NULL || p->peers == NULL) {
        gf_pool_close(sh);
        return -ENOMEM;
    }
    p->peer_count = 0;
    for (uint32_t k = 0; k < g->count; k++) {
        if (k == sh->index)
            p->me = p->peer_count;
        if (g->shard[k].device == sh->self->device)
            p->peers[p->peer_count++] = k;
    }
    gf_sched_client_init(&p->client);
    gf_list_init(&p->pending);
    p->held = 0;
    gf_defer_item_init(&p->pass, run_pass);
    return 0;
}

void gf_pool_close(gf_shard *sh) {
    if (sh->pool == NULL)
        return;
    free(sh->pool->calls);
    free(sh->pool->peers);
    free(sh->pool);
    sh->pool = NULL;
}

int gf_pool_is_client(const gf_pool *p, const gf_sched_client *c) {
    return c == &p->client;
}

int gf_pool_idle(const gf_pool *p) {
    return p->held == 0;
}

/* ---- the sending shard ------------------------------------------------------------ */

/* Notes that this shard submits pipeline `key`'s batches at `now`: a
 * store only when the last one is a tenth of GF_POOL_RECENT_NS old, so the
 * others' reads seldom find the line changed. */
static void note_seen(gf_shard_shared *me, uint32_t key, uint64_t now) {
    uint64_t last = atomic_load_explicit(&me->pool_seen_ns[key], memory_order_relaxed);
    if (now - last > GF_POOL_RECENT_NS / 10)
        atomic_store_explicit(&me->pool_seen_ns[key], now, memory_order_relaxed);
}

/* This shard's group: peers[*first .. *first + returned count), groups of
 * pool_shards of the device's shards in order (the last may be smaller). */
static uint32_t pool_group(const gf_shard *sh, uint32_t *first) {
    const gf_pool *p = sh->pool;
    uint32_t size = sh->cfg->pool_shards;
    *first = size ? p->me / size * size : p->me;
    uint32_t left = p->peer_count - *first;
    return size < left ? size : left;
}

/* Whether a shard of this one's group other than it submitted a batch of
 * pipeline `key` within `recent` ns of `now`. */
static int others_seen(const gf_shard *sh, uint32_t first, uint32_t count, uint32_t key,
                       uint64_t now, uint64_t recent) {
    const gf_pool *p = sh->pool;
    for (uint32_t i = first; i < first + count; i++) {
        const gf_shard_shared *o = &sh->group->shard[p->peers[i]];
        if (o == sh->self)
            continue;
        uint64_t t = atomic_load_explicit(&o->pool_seen_ns[key], memory_order_relaxed);
        if (t != 0 && t + recent > now) /* t may be after `now` */
            return 1;
    }
    return 0;
}

/* Whether batch `b` holds a frame of this shard's own connections: only
 * those make the shard one that submits the pipeline (a home's batches of
 * other shards' frames alone do not, or a lone client whose batches went
 * to the home once would find it busy with them for ever after). */
static int has_own_frames(const gf_slot *b) {
    for (uint32_t i = 0; i < b->frame_count; i++)
        if (b->frames[i].pooled_from == NULL)
            return 1;
    return 0;
}

/* Whether batch `b` may run in another shard's submission: frames in its
 * own buffers or in shared-memory regions (host memory the device's
 * context has pinned, whichever shard pinned it), none in device memory,
 * none that asked to go soon. */
static int poolable(const gf_slot *b) {
    if (b->urgent || b->frame_count >= b->frames[0].pipeline.max_batch_frames)
        return 0;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        const gf_frame *f = &b->frames[i];
        if (f->on_device || f->deadline_ns != 0 || f->latest)
            return 0;
    }
    return 1;
}

int gf_pool_take(gf_slot *b, void *arg) {
    gf_shard *sh = arg;
    GF_SHARD_OWNED(sh);
    gf_pool *p = sh->pool;
    const gf_frame *first = &b->frames[0];
    uint32_t start, count = pool_group(sh, &start);
    if (count < 2 || sh->draining || gf_pipeline_elementwise(&first->pipeline))
        return 0;
    uint32_t key = first->pipeline_id % GF_POOL_KEYS;
    if (has_own_frames(b))
        note_seen(sh->self, key, b->submitted_ns);
    uint32_t home = p->peers[start + first->pipeline_id % count];
    /* A pipeline whose batches wait for more frames submits that much less
     * often: its window grows with the wait. */
    uint32_t delay_us = first->pipeline.max_batch_delay_us;
    uint64_t recent =
        GF_POOL_RECENT_NS + (delay_us == GF_BATCH_DELAY_AUTO ? 0 : 2000ull * delay_us);
    /* A batch away holds its slot until its home answers, and a home may
     * wait for a slot of its own to run it: a shard that kept none back
     * could wait on a home that waits on it (two pipelines, each's home the
     * other's sender).  The scheduler counts the batches away (`away`,
     * this one not yet among them). */
    if (home == sh->index || sh->sched.away + 1 >= sh->sched.ring.count || !poolable(b) ||
        !others_seen(sh, start, count, key, b->submitted_ns, recent))
        return 0;
    gf_pool_call *c = &p->calls[b->index];
    c->slot = b;
    c->ran = 0;
    c->call.run = arrive;
    c->call.done = back;
    c->call.reply_to = &sh->self->mailbox;
    b->pooled = c;
    if (gf_call_post(&sh->group->shard[home].mailbox, &c->call) < 0) {
        b->pooled = NULL; /* the home has stopped */
        return 0;
    }
    return 1;
}

/* The answer, on the sending shard's thread (NULL: its loop has ended, and
 * nothing waits for the batch).  A batch the home ran completes as if this
 * shard's engine had run it; one it did not runs here now. */
static void back(gf_call *call, void *owner) {
    gf_pool_call *c = (gf_pool_call *)call;
    gf_shard *sh = owner;
    if (sh == NULL)
        return;
    GF_SHARD_OWNED(sh);
    gf_slot *b = c->slot;
    if (!c->ran) {
        b->pooled = NULL;
        gf_sched_run_here(&sh->sched, b);
        return;
    }
    sh->stats.pooled_batches++;
    for (uint32_t i = 0; i < b->frame_count; i++)
        sh->stats.pooled_frames += b->frames[i].batched;
    gf_sched_complete(b, &sh->sched);
}

/* ---- the home --------------------------------------------------------------------- */

/* A batch arrives at its home (`owner`; NULL: the home's mailbox closed
 * with it queued).  A home that is stopping sends it back at once. */
static void arrive(gf_call *call, void *owner) {
    gf_pool_call *c = (gf_pool_call *)call;
    gf_shard *sh = owner;
    c->ran = 0;
    if (sh == NULL || sh->draining || sh->failed)
        return; /* answered now, unrun */
    GF_SHARD_OWNED(sh);
    int prof = gf_prof_enter(GF_PROF_POOL);
    gf_call_keep(call);
    sh->pool->held++;
    gf_list_push_back(&sh->pool->pending, &c->pending);
    gf_shard_defer(sh, &sh->pool->pass);
    gf_prof_leave(prof);
}

/* Batch `c` leaves its home: answered, ran or not. */
static void send_back(gf_shard *sh, gf_pool_call *c, int ran) {
    c->ran = ran;
    sh->pool->held--;
    gf_call_answer(&c->call);
    if (sh->draining)
        gf_shard_defer(sh, &sh->drained);
}

/* The waiting batches join their pipelines' open batches, in arrival order,
 * until one must wait for a slot (the client waits; its grant runs this
 * again). */
static void run_pass(gf_defer_item *it) {
    gf_pool *p = gf_list_entry(it, gf_pool, pass);
    gf_shard *sh = p->sh;
    int prof = gf_prof_enter(GF_PROF_POOL);
    gf_link *l;
    while (!gf_sched_waiting(&p->client) && (l = gf_list_front(&p->pending))) {
        gf_pool_call *c = gf_list_entry(l, gf_pool_call, pending);
        int rc = gf_sched_join_pooled(&sh->sched, &p->client, c->slot);
        if (rc == 0)
            break;
        gf_list_remove(&c->pending);
        if (rc < 0)
            send_back(sh, c, 0);
    }
    /* A slot granted to the client that its batches did not need (they
     * joined another open batch) goes back. */
    if (!gf_sched_waiting(&p->client))
        gf_sched_end_batch(&sh->sched, &p->client, 0);
    gf_prof_leave(prof);
}

void gf_pool_granted(gf_shard *sh) {
    GF_SHARD_OWNED(sh);
    gf_shard_defer(sh, &sh->pool->pass);
}

void gf_pool_finished(gf_shard *sh, gf_slot *s, int completed) {
    GF_SHARD_OWNED(sh);
    int prof = gf_prof_enter(GF_PROF_POOL);
    gf_slot *from = NULL;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_frame *f = &s->frames[i];
        if (f->pooled_from == NULL)
            continue;
        gf_frame *g = f->pooled_from;
        if (g->slot != from && from != NULL)
            send_back(sh, from->pooled, 1);
        from = g->slot;
        from->done_ns = completed ? s->done_ns : gf_now_ns();
        from->failed = s->failed || !completed;
        /* Only what differs from its own record's (GF_OK, untimed), and
         * only for a frame its shard answers: its lines are that shard's. */
        if (f->batched) {
            if (f->status != GF_OK)
                g->status = f->status;
            if (f->stages.timed)
                g->stages = f->stages;
            g->submission = f->submission;
            g->submitted_on = f->submitted_on;
        }
        f->batched = 0;
        gf_sched_release(&sh->sched, f);
    }
    if (from != NULL)
        send_back(sh, from->pooled, 1);
    gf_prof_leave(prof);
}

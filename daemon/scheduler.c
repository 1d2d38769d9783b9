/* SPDX-License-Identifier: MIT */
/*
 * Slot scheduling (scheduler.h): claims and waiters, grants, batches, submission
 * to the engine and completion.
 */
#include "scheduler.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "frame_policy.h"
#include "loopprof.h"
#include "util.h"

int gf_sched_init(gf_sched *s, gf_engine *engine, gf_stats *stats, const gf_config *cfg,
                  const gf_sched_hooks *hooks) {
    s->engine = engine;
    s->stats = stats;
    s->cfg = cfg;
    s->hooks = *hooks;
    gf_list_init(&s->wait_run);
    gf_list_init(&s->wait_receive);
    gf_list_init(&s->open);
    s->in_flight = s->away = s->receiving = 0;
    s->submit_seq = s->claim_seq = 0;
    s->timing_owed = 0;
    s->recent_ns[0] = s->recent_ns[1] = 0;
    s->draining = 0;
    int rc = gf_slot_ring_init(&s->ring, engine->slots, engine->slot_count);
    /* All slots but one may be received into: a whole frame always finds one. */
    s->receive_max = s->ring.count > 1 ? s->ring.count - 1 : 1;
    return rc;
}

void gf_sched_free(gf_sched *s) {
    gf_slot_ring_free(&s->ring);
}

void gf_sched_client_init(gf_sched_client *c) {
    gf_link_init(&c->waiting);
    c->batch = NULL;
    c->wait_seq = c->claim_seq = 0;
    c->wait_pipeline = 0;
    c->priority = GF_CLASS_NORMAL;
    c->receive = c->receiving = c->shared = c->invited = c->fills_slot = 0;
}

static void receiving_start(gf_sched *s, gf_sched_client *c) {
    if (!c->receiving) {
        c->receiving = 1;
        s->receiving++;
        /* A payload holds a slot: its hold is a deadline (deadline.h). */
        if (s->hooks.contended)
            s->hooks.contended(s->hooks.arg);
    }
}

/* `c` takes slot `slot` (its batch): counted among the claims. */
static gf_slot *take(gf_sched *s, gf_sched_client *c, gf_slot *slot) {
    c->batch = slot;
    c->shared = s->claim_seq != c->claim_seq;
    c->claim_seq = ++s->claim_seq;
    return slot;
}

/* Whether `c`, a receiver or a client whose whole frame fills a slot
 * alone (`fills_slot`), already holds its share of the slots: all but one (in
 * any state: being received into, on the engine, or their results unread)
 * while another client uses them (it claimed one since either of `c`'s
 * last two claims, or waits: on the queues, or `set_aside` by a grant that
 * took waiters off them), so that a slot stays for it. */
static int holds_its_share(const gf_sched *s, const gf_sched_client *c, int set_aside) {
    if (s->ring.count < 2)
        return 0;
    uint32_t held = 0;
    for (uint32_t i = 0; i < s->ring.count; i++)
        held += s->ring.slots[i].owner == c;
    return held >= s->ring.count - 1 &&
           (c->shared || s->claim_seq != c->claim_seq || set_aside || gf_sched_others_wait(s, c));
}

/* Whether a waiting receiver could take a free slot: the cap on receivers
 * allows one, and one of the oldest does not hold its share already. */
static int receivers_could_go(const gf_sched *s) {
    if (s->receiving >= s->receive_max)
        return 0;
    const gf_link *l = gf_list_front(&s->wait_receive);
    for (int i = 0; l && i < GF_GRANT_PROBES_MAX; i++, l = gf_list_next(&s->wait_receive, l))
        if (!holds_its_share(s, gf_list_entry(l, gf_sched_client, waiting), 0))
            return 1;
    return 0;
}

/* Whether whole-frame waiter `c` may not take a slot now: its frames fill
 * a slot each and it holds its share. */
static int capped(const gf_sched *s, const gf_sched_client *c) {
    return c->fills_slot && holds_its_share(s, c, 0);
}

/* Whether a whole-frame waiter could take a free slot: one of the oldest
 * GF_GRANT_PROBES_MAX is not capped (or more wait than that). */
static int runners_could_go(const gf_sched *s) {
    const gf_link *l = gf_list_front(&s->wait_run);
    for (int i = 0; l && i < GF_GRANT_PROBES_MAX; i++, l = gf_list_next(&s->wait_run, l))
        if (!capped(s, gf_list_entry(l, gf_sched_client, waiting)))
            return 1;
    return l != NULL;
}

/* Whether a newcomer asking for a slot must queue behind those waiting: a
 * whole frame behind whole frames that a free slot could go to, and behind
 * such receivers; a receiver behind anyone, and while receivers are
 * capped. */
static int must_wait(const gf_sched *s, int receive) {
    if (!receive)
        return runners_could_go(s) || receivers_could_go(s);
    return runners_could_go(s) || !gf_list_empty(&s->wait_receive) ||
           s->receiving >= s->receive_max;
}

/* Queues `c` on `q` by its wait_seq, after those of the same: a newcomer
 * behind those of its class, ahead of the lower classes' recent ones
 * (GF_PRIORITY_STEP_NS); one invited to a batch that it found full goes
 * back to its old place.  Searched from the back: a newcomer passes only
 * the waiters it goes before. */
static void queue_in_order(gf_link *q, gf_sched_client *c) {
    gf_link *l = q->prev;
    while (l != q && gf_list_entry(l, gf_sched_client, waiting)->wait_seq > c->wait_seq)
        l = l->prev;
    gf_link_insert_after(l, &c->waiting);
}

int gf_sched_can_receive(const gf_sched *s, const gf_sched_client *c) {
    if (c->batch)
        return c->batch->frame_count == 0;
    return !must_wait(s, 1) && !holds_its_share(s, c, 0) && s->ring.free_count > 0;
}

gf_slot *gf_sched_claim(gf_sched *s, gf_sched_client *c, int receive) {
    assert(!gf_sched_waiting(c));
    int invited = c->invited && !receive;
    c->invited = 0;
    gf_slot *slot = c->batch;
    if (slot) {
        /* Granted, or left open and empty: it takes any frame. */
        assert(slot->open && slot->frame_count == 0);
    } else if (!must_wait(s, receive) &&
               !((receive || c->fills_slot) && holds_its_share(s, c, 0)) &&
               (slot = gf_slot_claim(&s->ring, c))) {
        take(s, c, slot);
    } else {
        int first_receiver = receive && gf_list_empty(&s->wait_receive);
        c->receive = receive != 0;
        if (!invited) {
            unsigned below = c->priority > GF_CLASS_REALTIME ? c->priority - GF_CLASS_REALTIME : 0;
            c->wait_seq = gf_now_ns() + below * GF_PRIORITY_STEP_NS;
            s->stats->backpressure_pauses++;
            s->stats->class_waits[c->priority % GF_CLASS_COUNT_]++;
        }
        queue_in_order(receive ? &s->wait_receive : &s->wait_run, c);
        if (first_receiver && s->hooks.contended)
            s->hooks.contended(s->hooks.arg);
        if (s->hooks.waiting)
            s->hooks.waiting(s->hooks.arg);
        /* A slot is free but held for receivers whose bytes are there:
         * this one may be such, or go before those that are not. */
        if (s->ring.free_count > 0 && (!receive || s->receiving < s->receive_max))
            s->hooks.wake(s->hooks.arg);
        return NULL;
    }
    if (receive)
        receiving_start(s, c);
    return slot;
}

/* Takes `c` off its waiter queue. */
static void unqueue(gf_sched_client *c) {
    gf_list_remove(&c->waiting);
    c->receive = 0;
}

void gf_sched_stop_waiting(gf_sched *s, gf_sched_client *c) {
    unqueue(c);
    /* A receiver, or a client whose frames fill a slot, held to its share
     * for this one's sake may take a free slot now. */
    if (s->ring.free_count > 0 &&
        (!gf_list_empty(&s->wait_receive) || !gf_list_empty(&s->wait_run)))
        s->hooks.wake(s->hooks.arg);
}

int gf_sched_others_wait(const gf_sched *s, const gf_sched_client *c) {
    const gf_link *queues[] = {&s->wait_run, &s->wait_receive};
    for (int i = 0; i < 2; i++) {
        const gf_link *l = gf_list_front(queues[i]);
        if (l && (l != &c->waiting || gf_list_next(queues[i], l)))
            return 1;
    }
    return 0;
}

static gf_sched_client *waiter(gf_link *l) {
    return l ? gf_list_entry(l, gf_sched_client, waiting) : NULL;
}

/* The receiver a free slot goes to: the first of the oldest
 * GF_GRANT_PROBES_MAX whose bytes are there and who does not hold its share
 * already; those passed over go to the back.  When none is ready, the
 * oldest of those passed over for want of bytes if `unready`, else none:
 * the slot waits for one that sends. */
static gf_sched_client *pick_receiver(gf_sched *s, int unready) {
    gf_link asked;
    gf_list_init(&asked);
    gf_sched_client *ready = NULL, *oldest = NULL;
    for (int i = 0; i < GF_GRANT_PROBES_MAX && !ready; i++) {
        gf_sched_client *c = waiter(gf_list_pop_front(&s->wait_receive));
        if (!c)
            break;
        int eligible = !holds_its_share(s, c, !gf_list_empty(&asked));
        if (eligible && (!s->hooks.receive_ready || s->hooks.receive_ready(c, s->hooks.arg)))
            ready = c;
        else
            gf_list_push_back(&asked, &c->waiting);
        if (eligible && !oldest)
            oldest = c;
    }
    gf_list_splice(&s->wait_receive, &asked);
    if (ready) {
        gf_list_push_front(&s->wait_receive, &ready->waiting);
        return ready;
    }
    return unready ? oldest : NULL;
}

int gf_sched_pipeline_busy(const gf_sched *s, uint32_t id) {
    for (uint32_t i = 0; i < s->ring.count; i++) {
        const gf_slot *b = &s->ring.slots[i];
        if ((b->open || b->in_flight) && b->frame_count > 0 && b->frames[0].pipeline_id == id)
            return 1;
    }
    return 0;
}

/* The whole-frame waiter a free slot goes to, of the oldest
 * GF_GRANT_PROBES_MAX and not capped (one whose frames fill a slot each and
 * that holds its share): the first whose pipeline has no batch open or on
 * the engine, else the first; none when the only one probed is capped (it
 * takes the next slot of its own that goes back).  So a frame of another
 * pipeline waits for one frame of a pipeline that holds every slot (heavy
 * frames, one a batch), not for one more of them that waited before it;
 * and another client's frame of the same pipeline does not wait for a
 * second one of a client whose frames fill the slots. */
static gf_sched_client *pick_runner(const gf_sched *s) {
    const gf_link *l = gf_list_front(&s->wait_run);
    gf_sched_client *oldest = NULL;
    for (int i = 0; l && i < GF_GRANT_PROBES_MAX; i++, l = gf_list_next(&s->wait_run, l)) {
        gf_sched_client *c = gf_list_entry(l, gf_sched_client, waiting);
        if (capped(s, c))
            continue;
        if (!oldest)
            oldest = c;
        else if (c->priority != oldest->priority)
            break; /* never ahead of a higher class */
        if (!gf_sched_pipeline_busy(s, c->wait_pipeline))
            return c;
    }
    return oldest;
}

/* Hands free slots to waiters; receivers not sending only if `unready`. */
static void grant(gf_sched *s, int unready) {
    while (s->ring.free_count > 0) {
        gf_sched_client *run = pick_runner(s);
        gf_sched_client *recv = s->receiving < s->receive_max ? pick_receiver(s, unready) : NULL;
        gf_sched_client *c = run && (!recv || run->wait_seq < recv->wait_seq) ? run : recv;
        if (!c)
            return;
        int receive = c->receive;
        unqueue(c);
        assert(!c->batch);
        take(s, c, gf_slot_claim(&s->ring, c));
        if (receive)
            receiving_start(s, c);
        s->hooks.granted(c, s->hooks.arg);
    }
}

void gf_sched_grant(gf_sched *s) {
    grant(s, 0);
}

void gf_sched_grant_unready(gf_sched *s) {
    grant(s, 1);
}

void gf_sched_received(gf_sched *s, gf_sched_client *c) {
    if (!c->receiving)
        return;
    c->receiving = 0;
    s->receiving--;
    /* A receiver held back by the cap may take a free slot now. */
    if (!gf_list_empty(&s->wait_receive) && s->ring.free_count > 0)
        s->hooks.wake(s->hooks.arg);
}

/* `b` finished (`completed`: back from the engine; else refused by it):
 * its frames are answered (the `finished` hook).  Answering may release
 * every frame: the slot must not go back to the ring (and be claimed anew)
 * meanwhile. */
static void finish_slot(gf_sched *s, gf_slot *b, int completed) {
    gf_slot_hold(b);
    s->hooks.finished(b, completed, s->hooks.arg);
    if (gf_slot_unhold(&s->ring, b))
        s->hooks.wake(s->hooks.arg);
}

/* Pipeline `id` submitted a batch at `now`. */
static void note_submitter(gf_sched *s, uint32_t id, uint64_t now) {
    if (s->recent_ns[0] == 0 || s->recent_id[0] != id) {
        s->recent_id[1] = s->recent_id[0];
        s->recent_ns[1] = s->recent_ns[0];
        s->recent_id[0] = id;
    }
    s->recent_ns[0] = now;
}

/* Whether a pipeline other than `id` submitted within GF_BATCH_SHARE_NS of
 * `now`, or a frame of one waits for a slot (among the oldest
 * GF_GRANT_PROBES_MAX whole-frame waiters): one that waits long behind
 * `id`'s batches still counts. */
static int others_share(const gf_sched *s, uint32_t id, uint64_t now) {
    for (int k = 0; k < 2; k++)
        if (s->recent_ns[k] && s->recent_id[k] != id && now - s->recent_ns[k] < GF_BATCH_SHARE_NS)
            return 1;
    const gf_link *l = gf_list_front(&s->wait_run);
    for (int i = 0; l && i < GF_GRANT_PROBES_MAX; i++, l = gf_list_next(&s->wait_run, l))
        if (gf_list_entry(l, gf_sched_client, waiting)->wait_pipeline != id)
            return 1;
    return 0;
}

/* Batch `b`, closed, holds only frames whose deadline passed: none goes to
 * the engine, each is answered deadline_exceeded (frame_policy.h). */
static void expire_all(gf_sched *s, gf_slot *b) {
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        if (!f->batched)
            continue;
        f->status = GF_ERR_DEADLINE_EXCEEDED;
        s->stats->rejected[GF_ERR_DEADLINE_EXCEEDED]++;
        s->stats->frames_failed++;
    }
    finish_slot(s, b, 0);
}

/*
 * Whether batch `b`, going to the engine now, is timed.  Timing events
 * cost a small frame about as much as the frame itself: one submission in
 * timing_sample_every is (config/README.md).  An urgent batch passes its
 * turn on to the next one, timing_sample_every - 1 times in a row at most:
 * untimed, it can replay its graph at the device's priority (engine_cuda.c),
 * and traffic that is all realtime is sampled as often, each turn taken
 * timing_sample_every - 1 submissions late.
 */
static int timed(gf_sched *s, const gf_slot *b) {
    uint32_t every = s->cfg->timing_sample_every;
    if (!s->cfg->timing_events)
        return 0;
    if (s->submit_seq++ % every == 0 && s->timing_owed == 0)
        s->timing_owed = 1;
    if (s->timing_owed == 0)
        return 0;
    if (b->urgent && s->timing_owed < every) {
        s->timing_owed++;
        return 0;
    }
    s->timing_owed = 0;
    return 1;
}

/* Hands the closed slot `b`, counted in flight since `now`, to the engine;
 * on its refusal every frame fails with engine. */
static void run_here(gf_sched *s, gf_slot *b, uint64_t now) {
    uint64_t waited = 0;
    uint32_t frames = 0;
    s->stats->submissions++;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        f->submission = s->stats->submissions;
        f->submitted_on = s->shard;
        if (f->batched) {
            frames++;
            waited += f->whole_ns && now > f->whole_ns ? now - f->whole_ns : 0;
        }
    }
    gf_stats_submitted(
        s->stats,
        gf_config_pipeline_id(s->cfg, b->frames[0].pipeline_id, b->frames[0].pipeline.name), frames,
        waited);
    b->time_stages = timed(s, b);
    int prof = gf_prof_enter(GF_PROF_SUBMIT);
    int rc = gf_engine_submit(s->engine, b);
    gf_prof_leave(prof);
    if (rc == 0) {
        s->stats->zero_copy_submissions += (uint64_t)b->zero_copy;
        s->stats->graph_submissions += (uint64_t)b->graphed;
        s->stats->priority_submissions += (uint64_t)b->prioritized;
        s->stats->gathered_submissions += (uint64_t)b->gathered;
        s->stats->host_gathered_submissions += (uint64_t)(b->host_gathered != 0);
        s->hooks.submitted(b, 0, s->hooks.arg);
        return;
    }
    b->in_flight = 0;
    s->in_flight--;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        if (!f->batched)
            continue;
        if (f->latest)
            f->client->latest_on_engine--;
        f->status = GF_ERR_ENGINE;
        if (f->pooled_from) /* another shard's: it counts it */
            continue;
        s->stats->rejected[GF_ERR_ENGINE]++;
        s->stats->frames_failed++;
    }
    finish_slot(s, b, 0);
    s->hooks.submitted(b, rc, s->hooks.arg);
}

/* The closed slot `b` and its batch go to the engine, or to another
 * shard's submission (the `pool` hook), and count as in flight until they
 * complete.  Frames whose deadline passed go only along with frames in
 * time. */
static void submit(gf_sched *s, gf_slot *b) {
    uint64_t now = gf_now_ns();
    if (gf_frame_policy_expire(b, now) == 0) {
        expire_all(s, b);
        return;
    }
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        f->submitted_ns = now;
        if (!f->pooled_from) /* another shard's: it counted them */
            s->stats->bytes_in += f->in_bytes;
        if (f->batched && f->latest) /* no other frame touches its client here */
            f->client->latest_on_engine++;
    }
    note_submitter(s, b->frames[0].pipeline_id, now);
    b->submitted_ns = now;
    b->in_flight = 1;
    s->in_flight++;
    if (s->hooks.pool && s->hooks.pool(b, s->hooks.arg)) {
        s->away++;
        return;
    }
    run_here(s, b, now);
}

void gf_sched_run_here(gf_sched *s, gf_slot *b) {
    assert(b->in_flight && b->pooled == NULL && s->away > 0);
    s->away--;
    run_here(s, b, gf_now_ns());
}

/* Ends batch `b`: its frames go to the engine, or the slot goes back to
 * the ring if it has none. */
static void close_slot(gf_sched *s, gf_slot *b) {
    gf_list_remove(&b->open_link);
    if (gf_slot_close(&s->ring, b))
        s->hooks.wake(s->hooks.arg);
    else
        submit(s, b);
}

void gf_sched_close_batch(gf_sched *s, gf_sched_client *c) {
    gf_slot *b = c->batch;
    if (!b)
        return;
    /* A slot granted for a payload that never came (its frame refused, or
     * the connection stopped reading before taking it) is no longer
     * received into: the count must not keep it (a leak here left every
     * slot free and every receiver waiting). */
    gf_sched_received(s, c);
    c->batch = NULL;
    close_slot(s, b);
}

void gf_sched_end_batch(gf_sched *s, gf_sched_client *c, int receiving_now) {
    if (c->batch && !receiving_now)
        gf_sched_close_batch(s, c);
}

/* The most frames batch `b` may hold now: its pipeline's max_batch_frames,
 * or, while another pipeline shares the engine, fewer when its frames cost
 * more than GF_BATCH_COST_MAX_NS together by the pipeline's measured cost,
 * at least one. */
static uint32_t batch_frames_max(const gf_sched *s, const gf_slot *b) {
    const gf_frame *first = &b->frames[0];
    uint32_t most = first->pipeline.max_batch_frames;
    if (!others_share(s, first->pipeline_id, gf_now_ns()))
        return most;
    uint32_t id = gf_config_pipeline_id(s->cfg, first->pipeline_id, first->pipeline.name);
    uint64_t cost = id < s->stats->pipeline_count ? s->stats->pipelines[id].frame_cost_ns : 0;
    uint64_t fit = cost ? GF_BATCH_COST_MAX_NS / cost : most;
    return fit < 1 ? 1 : fit < most ? (uint32_t)fit : most;
}

/* The open batch of pipeline `id`, or NULL: one at most, since a frame
 * that finds it full sends it before it opens the next. */
static gf_slot *open_batch(const gf_sched *s, uint32_t id) {
    for (gf_link *l = gf_list_front(&s->open); l; l = gf_list_next(&s->open, l)) {
        gf_slot *b = gf_list_entry(l, gf_slot, open_link);
        if (b->frames[0].pipeline_id == id)
            return b;
    }
    return NULL;
}

/* Whole-frame waiters of pipeline `id` may join its batch, just opened:
 * they go on after this event as if granted, with no slot of their own. */
static void invite(gf_sched *s, uint32_t id) {
    gf_link *l = gf_list_front(&s->wait_run);
    while (l) {
        gf_sched_client *w = gf_list_entry(l, gf_sched_client, waiting);
        l = gf_list_next(&s->wait_run, l);
        if (w->wait_pipeline != id || capped(s, w))
            continue;
        gf_list_remove(&w->waiting);
        w->invited = 1;
        s->hooks.granted(w, s->hooks.arg);
    }
}

/* The "auto" batch delay's state of frame `f`'s pipeline (batch_delay.h),
 * or NULL for one a reload removed. */
static gf_batch_delay *auto_delay(const gf_sched *s, const gf_frame *f) {
    uint32_t id = gf_config_pipeline_id(s->cfg, f->pipeline_id, f->pipeline.name);
    return id < s->stats->pipeline_count ? &s->stats->pipelines[id].delay : NULL;
}

/* `f` and the `n` - 1 frames after it joined a batch of an "auto"
 * pipeline: their arrival counts, and the batch may have reached the size
 * it waits for. */
static void auto_joined(gf_sched *s, const gf_frame *f, uint32_t n) {
    gf_batch_delay *d = auto_delay(s, f);
    if (d)
        gf_batch_delay_arrived(d, n, f->arrived_ns);
    s->hooks.batches(s->hooks.arg);
}

/* `c` claims an empty slot for the next batch of pipeline `id`
 * (`fills_slot`: its frame fills one alone): NULL when it must wait. */
static gf_slot *claim_for(gf_sched *s, gf_sched_client *c, uint32_t id, int fills_slot) {
    c->wait_pipeline = id;
    c->fills_slot = fills_slot != 0;
    gf_slot *b = gf_sched_claim(s, c, 0);
    if (b)
        c->batch = NULL;
    return b;
}

/* Slot `b`, claimed by `c` (claim_for) and holding its first frames, is
 * its pipeline's open batch now: no one connection's, unless `c`'s frame
 * fills it, which counts as `c`'s (holds_its_share); whole-frame waiters
 * of the pipeline are invited to join it. */
static void open_slot(gf_sched *s, gf_sched_client *c, gf_slot *b) {
    b->owner = c->fills_slot ? c : NULL;
    gf_list_push_back(&s->open, &b->open_link);
    invite(s, b->frames[0].pipeline_id);
    s->hooks.batches(s->hooks.arg);
}

/* When open batch `b` is due at `now`: its pipeline's max_batch_delay_us
 * after its first frame, or the wait batch_delay.h picks for "auto". */
static uint64_t batch_due(gf_sched *s, const gf_slot *b, uint64_t now) {
    const gf_frame *first = &b->frames[0];
    uint32_t delay_us = first->pipeline.max_batch_delay_us;
    if (delay_us != GF_BATCH_DELAY_AUTO)
        return first->whole_ns + (uint64_t)delay_us * 1000u;
    gf_batch_delay *d = auto_delay(s, first);
    return d ? gf_batch_delay_due(d, first->whole_ns, b->frame_count, batch_frames_max(s, b),
                                  GF_BATCH_HOLD_IN_FLIGHT, now)
             : first->whole_ns;
}

gf_frame *gf_sched_join(gf_sched *s, gf_sched_client *c, const gf_pipeline *p, const gf_header *h,
                        uint64_t in_bytes, const uint64_t stage_bytes[GF_STAGES_MAX],
                        uint64_t arrived_ns) {
    gf_slot *b = open_batch(s, h->pipeline_id);
    if (b && b->frame_count >= batch_frames_max(s, b)) {
        close_slot(s, b); /* as much as the engine should take at once: it goes now */
        b = NULL;
    }
    gf_frame *f = b ? gf_slot_add(b, c, p, h, in_bytes, stage_bytes, arrived_ns) : NULL;
    if (b && !f)
        close_slot(s, b); /* as full as it gets for this frame: it goes now */
    if (!f) {
        if (!(b = claim_for(
                  s, c, h->pipeline_id,
                  !gf_slot_ring_fits_two(&s->ring, p->stage_count, in_bytes, stage_bytes))))
            return NULL;
        f = gf_slot_add(b, c, p, h, in_bytes, stage_bytes, arrived_ns);
        assert(f != NULL); /* an empty slot takes any frame admission passed */
        open_slot(s, c, b);
    }
    c->invited = 0;
    if (c->priority == GF_CLASS_REALTIME) {
        f->slot->urgent = 1; /* it goes after this iteration's I/O */
        s->hooks.batches(s->hooks.arg);
    }
    if (p->max_batch_delay_us == GF_BATCH_DELAY_AUTO)
        auto_joined(s, f, 1);
    return f;
}

int gf_sched_join_pooled(gf_sched *s, gf_sched_client *c, gf_slot *from) {
    uint32_t id = from->frames[0].pipeline_id;
    gf_slot *b = open_batch(s, id);
    if (b && !gf_slot_takes(b, from, batch_frames_max(s, b))) {
        close_slot(s, b); /* as full as it gets for these frames: it goes now */
        b = NULL;
    }
    int opened = b == NULL;
    if (opened) {
        if (!(b = claim_for(s, c, id, 0)))
            return 0;
        if (!gf_slot_takes(b, from, GF_SLOT_FRAMES_MAX)) {
            /* Not even an empty slot takes them (a slot of this shard is no
             * smaller than theirs, so never): they run where they are. */
            if (gf_slot_close(&s->ring, b))
                s->hooks.wake(s->hooks.arg);
            c->invited = 0;
            return -1;
        }
    }
    c->invited = 0;
    gf_frame *first = NULL;
    for (uint32_t i = 0; i < from->frame_count; i++) {
        gf_frame *f = gf_slot_add_pooled(b, &from->frames[i]);
        assert(f != NULL); /* gf_slot_takes said so */
        first = first ? first : f;
    }
    if (opened)
        open_slot(s, c, b);
    if (first->pipeline.max_batch_delay_us == GF_BATCH_DELAY_AUTO)
        auto_joined(s, first, from->frame_count);
    s->hooks.batches(s->hooks.arg);
    return 1;
}

uint64_t gf_sched_submit_batches(gf_sched *s, uint64_t now) {
    uint64_t next = 0;
    gf_link *l = gf_list_front(&s->open);
    while (l) {
        gf_slot *b = gf_list_entry(l, gf_slot, open_link);
        l = gf_list_next(&s->open, l);
        uint64_t due = batch_due(s, b, now);
        if (b->frame_count < batch_frames_max(s, b) && !s->draining && !b->urgent) {
            /* Waiting for the engine costs its frames nothing: a completion
             * runs this again. */
            if (s->in_flight - s->away >= GF_BATCH_HOLD_IN_FLIGHT)
                continue;
            if (now < due) {
                next = next && next < due ? next : due;
                continue;
            }
        }
        close_slot(s, b);
    }
    return next;
}

void gf_sched_release(gf_sched *s, gf_frame *f) {
    if (gf_frame_release(&s->ring, f))
        s->hooks.wake(s->hooks.arg);
}

void gf_sched_complete(gf_slot *slot, void *arg) {
    gf_sched *s = arg;
    int prof = gf_prof_enter(GF_PROF_DONE);
    assert(slot->in_flight);
    slot->in_flight = 0;
    s->in_flight--;
    /* A batch that ran in another shard's submission has its frames'
     * outcomes already (pool.h); its time there is that shard's to count. */
    int ran_here = slot->pooled == NULL;
    if (ran_here)
        gf_engine_finish(s->engine, slot);
    else
        s->away--;
    slot->pooled = NULL;
    /* A failed batch's time is not its pipeline's cost (batch_delay.h). */
    if (ran_here && slot->frame_count > 0 && !slot->failed && slot->done_ns > slot->submitted_ns)
        gf_stats_completed(s->stats,
                           gf_config_pipeline_id(s->cfg, slot->frames[0].pipeline_id,
                                                 slot->frames[0].pipeline.name),
                           slot->frame_count, slot->done_ns - slot->submitted_ns);
    uint64_t drained = gf_now_ns();
    for (uint32_t i = 0; i < slot->frame_count; i++) {
        gf_frame *f = &slot->frames[i];
        if (!f->batched || f->pooled_from) /* another shard's: it counts it */
            continue;
        f->done_ns = slot->done_ns;
        f->drained_ns = drained;
        if (f->latest)
            f->client->latest_on_engine--;
        /* Its result is not wanted (frame_policy.h); a failure is told as one. */
        if (f->expired && f->status == GF_OK)
            f->status = GF_ERR_DEADLINE_EXCEEDED;
        s->stats->frames_completed++;
        if (f->status != GF_OK) {
            s->stats->rejected[f->status]++;
            s->stats->frames_failed++;
        }
    }
    finish_slot(s, slot, 1);
    /* Batches held open while the engine was busy may go now. */
    if (!gf_list_empty(&s->open))
        s->hooks.batches(s->hooks.arg);
    gf_prof_leave(prof);
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of slot scheduling (daemon/scheduler.h) without a socket: an
 * engine of our own records submissions, hooks record what the scheduler
 * asks of the connections, and each test checks who got which slot when,
 * what went to the engine, and what each frame's reply says.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "scheduler.h"
#include "wire.h"

enum { SLOTS_MAX = 4, BUF_BYTES = 4096, CLIENTS = 8, FRAME_BYTES = 64 };

/* ---- an engine and hooks that record ------------------------------------------- */

static gf_engine engine;
static gf_slot slots[SLOTS_MAX];
static uint8_t buffers[SLOTS_MAX][2][BUF_BYTES];
static gf_slot *submitted[64];
static unsigned submitted_count;
static int refuse_submit;     /* the engine refuses what it is given      */
static int finish_status[64]; /* the status fake_finish gives frame i     */

static gf_sched sched;
static gf_stats stats;
static gf_config cfg;
static gf_pipeline echo, echo2; /* ids 0 and 1 */
static gf_sched_client clients[CLIENTS];
static int ready_to_receive[CLIENTS]; /* receive_ready's answer per client  */
static gf_sched_client *granted[64];
static unsigned granted_count, wakes, contended_count, refused_count;
static gf_sched_client *answered_client;
static gf_slot *answered_slot;
static gf_sched_client *told[CLIENTS]; /* on_finished's clients, in order */
static unsigned told_count, batches_calls;

static int fake_submit(gf_engine *e, gf_slot *s) {
    (void)e;
    if (refuse_submit)
        return -EIO;
    submitted[submitted_count++] = s;
    return 0;
}

static void fake_finish(gf_engine *e, gf_slot *s) {
    (void)e;
    for (uint32_t i = 0; i < s->frame_count; i++)
        s->frames[i].status = finish_status[i];
}

static const gf_engine_ops fake_ops = {
    .name = "fake", .submit = fake_submit, .finish = fake_finish};

static void on_granted(gf_sched_client *c, void *arg) {
    (void)arg;
    granted[granted_count++] = c;
}

static int answered_completed; /* the hook's `completed`                   */

/* The `finished` hook, as the connections' side (conn_io.c) does it: each
 * frame still batched is unbatched and its reply made; each client with
 * frames in the slot is told once, in the order its first frame lies. */
static void on_finished(gf_slot *s, int completed, void *arg) {
    (void)arg;
    answered_completed = completed;
    answered_slot = s;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        gf_frame *f = &s->frames[i];
        if (!f->batched)
            continue;
        f->batched = 0;
        gf_frame_reply(f, completed ? NULL : "fake");
        unsigned k = 0;
        while (k < told_count && told[k] != f->client)
            k++;
        if (k == told_count) {
            ck_assert_uint_lt(told_count, CLIENTS);
            told[told_count++] = f->client;
        }
        answered_client = f->client;
    }
}

static void on_batches(void *arg) {
    (void)arg;
    batches_calls++;
}

static void on_wake(void *arg) {
    (void)arg;
    wakes++;
}

static int on_receive_ready(gf_sched_client *c, void *arg) {
    (void)arg;
    return ready_to_receive[c - clients];
}

static void on_submitted(gf_slot *s, int rc, void *arg) {
    (void)s;
    (void)arg;
    refused_count += rc < 0;
}

static void on_contended(void *arg) {
    (void)arg;
    contended_count++;
}

static void setup(unsigned slot_count) {
    memset(&engine, 0, sizeof engine);
    memset(slots, 0, sizeof slots);
    for (unsigned i = 0; i < slot_count; i++) {
        slots[i].index = i;
        slots[i].in_host = buffers[i][0];
        slots[i].out_host = buffers[i][1];
        slots[i].in_capacity_bytes = slots[i].out_capacity_bytes = BUF_BYTES;
    }
    engine.ops = &fake_ops;
    engine.slots = slots;
    engine.slot_count = slot_count;
    submitted_count = granted_count = wakes = contended_count = refused_count = 0;
    refuse_submit = 0;
    memset(finish_status, 0, sizeof finish_status);
    memset(ready_to_receive, 0, sizeof ready_to_receive);
    answered_client = NULL;
    answered_slot = NULL;
    told_count = batches_calls = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.timing_sample_every = 1;
    memset(&echo, 0, sizeof echo);
    snprintf(echo.name, sizeof echo.name, "echo");
    echo.stage_count = 1;
    echo.stages[0].kind = gf_pipeline_kind_find("echo");
    ck_assert_ptr_nonnull(echo.stages[0].kind);
    echo.max_batch_frames = GF_SLOT_FRAMES_MAX;
    echo2 = echo;
    echo2.id = 1;
    snprintf(echo2.name, sizeof echo2.name, "echo2");
    ck_assert_int_eq(gf_stats_init(&stats, 1, 0), 0);
    gf_sched_hooks hooks = {.granted = on_granted,
                            .finished = on_finished,
                            .wake = on_wake,
                            .batches = on_batches,
                            .receive_ready = on_receive_ready,
                            .submitted = on_submitted,
                            .contended = on_contended};
    ck_assert_int_eq(gf_sched_init(&sched, &engine, &stats, &cfg, &hooks), 0);
    for (int i = 0; i < CLIENTS; i++)
        gf_sched_client_init(&clients[i]);
}

static void teardown(void) {
    gf_sched_free(&sched);
    gf_stats_free(&stats);
}

/* A whole frame of FRAME_BYTES in `c`'s batch, as admission places it. */
static gf_frame *add_frame(gf_sched_client *c, uint64_t frame_id) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, 0, FRAME_BYTES);
    uint64_t stage_bytes[GF_STAGES_MAX] = {FRAME_BYTES};
    ck_assert_ptr_nonnull(c->batch);
    gf_frame *f = gf_slot_add(c->batch, c, &echo, &h, FRAME_BYTES, stage_bytes, 0);
    ck_assert_ptr_nonnull(f);
    f->batched = 1;
    return f;
}

/* A whole frame of `c` for pipeline `p`, arrived and whole at `whole_ns`,
 * as admission places it: in the pipeline's open batch (NULL: `c` waits). */
static gf_frame *join_at(gf_sched_client *c, const gf_pipeline *p, uint64_t frame_id,
                         uint64_t whole_ns) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, p->id, FRAME_BYTES);
    uint64_t stage_bytes[GF_STAGES_MAX] = {FRAME_BYTES};
    gf_frame *f = gf_sched_join(&sched, c, p, &h, FRAME_BYTES, stage_bytes, whole_ns);
    if (f) {
        ck_assert_ptr_eq(f->client, c);
        f->whole_ns = whole_ns;
        f->batched = 1;
    }
    return f;
}

static gf_frame *join(gf_sched_client *c, uint64_t frame_id) {
    return join_at(c, &echo, frame_id, 1);
}

/* The loop's pass after I/O: due batches go. */
static void pass(void) {
    gf_sched_submit_batches(&sched, 2);
}

/* `c`'s batch, empty, goes back: its slot is free again. */
static void give_back(gf_sched_client *c) {
    gf_sched_close_batch(&sched, c);
}

#define A (&clients[0])
#define B (&clients[1])
#define C (&clients[2])
#define D (&clients[3])
#define E (&clients[4])

/* ---- claims, waiters, grants ---------------------------------------------------- */

START_TEST(free_slots_are_claimed_then_clients_wait_in_order) {
    setup(2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 0));
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, B, 0));
    ck_assert_ptr_ne(A->batch, B->batch);
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 0));
    ck_assert_ptr_null(gf_sched_claim(&sched, D, 0));
    ck_assert(gf_sched_waiting(C) && gf_sched_waiting(D));
    ck_assert_uint_eq(stats.backpressure_pauses, 2);
    /* A slot back: one wake, and the grant goes to the first waiter. */
    give_back(A);
    ck_assert_uint_eq(wakes, 1);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], C);
    ck_assert(!gf_sched_waiting(C) && C->batch != NULL && C->batch->frame_count == 0);
    /* A granted slot is the client's claim: it takes the frame at once. */
    ck_assert_ptr_eq(gf_sched_claim(&sched, C, 0), C->batch);
    give_back(B);
    gf_sched_grant(&sched);
    ck_assert_ptr_eq(granted[1], D);
    teardown();
}
END_TEST

/* A slot freed by one event is granted after it: a client that asks in
 * between queues behind those already waiting. */
START_TEST(a_newcomer_queues_behind_waiters) {
    setup(2);
    gf_sched_claim(&sched, A, 0);
    gf_sched_claim(&sched, B, 0);
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 0));
    give_back(A);
    ck_assert_uint_eq(sched.ring.free_count, 1);
    ck_assert_ptr_null(gf_sched_claim(&sched, E, 0));
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], C);
    ck_assert(gf_sched_waiting(E));
    teardown();
}
END_TEST

START_TEST(stop_waiting_takes_a_client_from_the_middle) {
    setup(1);
    gf_sched_claim(&sched, A, 0);
    gf_sched_claim(&sched, B, 0);
    gf_sched_claim(&sched, C, 0);
    gf_sched_claim(&sched, D, 0);
    gf_sched_stop_waiting(&sched, C);
    ck_assert(!gf_sched_waiting(C));
    give_back(A);
    gf_sched_grant(&sched);
    give_back(B);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 2);
    ck_assert_ptr_eq(granted[0], B);
    ck_assert_ptr_eq(granted[1], D);
    teardown();
}
END_TEST

/* ---- receivers ---------------------------------------------------------------- */

/* With two slots one receiver at most: a second waits though a slot is
 * free, and a whole frame takes that slot. */
START_TEST(receivers_never_hold_every_slot) {
    setup(2);
    ck_assert_uint_eq(sched.receive_max, 1);
    ck_assert(gf_sched_can_receive(&sched, A));
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    ck_assert(A->receiving && sched.receiving == 1);
    /* A payload holds a slot: its hold is a deadline (the hook says so). */
    ck_assert_uint_eq(contended_count, 1);
    ready_to_receive[1] = 1;
    ck_assert(!gf_sched_can_receive(&sched, B));
    ck_assert_ptr_null(gf_sched_claim(&sched, B, 1));
    ck_assert_uint_eq(contended_count, 2);
    ck_assert(gf_sched_receive_contended(&sched));
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, C, 0));
    /* A's payload is in: the cap no longer holds B back, but no slot is free. */
    gf_sched_received(&sched, A);
    ck_assert_uint_eq(sched.receiving, 0);
    ck_assert_uint_eq(wakes, 0);
    give_back(C);
    gf_sched_grant(&sched);
    ck_assert_ptr_eq(granted[0], B);
    ck_assert(B->receiving && sched.receiving == 1);
    ck_assert(!gf_sched_receive_contended(&sched));
    teardown();
}
END_TEST

/* A receiver whose bytes are there goes before older ones whose are not;
 * those asked go behind it; with none ready none goes, until the
 * watchdog's round gives the oldest the free slot. */
START_TEST(a_ready_receiver_goes_before_a_stalled_one) {
    setup(2);
    gf_sched_claim(&sched, A, 1);
    ck_assert_ptr_null(gf_sched_claim(&sched, B, 1));
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 1));
    ck_assert_ptr_null(gf_sched_claim(&sched, D, 1));
    ready_to_receive[3] = 1;
    gf_sched_received(&sched, A);
    give_back(A);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], D);
    gf_sched_received(&sched, D);
    give_back(D);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_uint_eq(sched.ring.free_count, 2);
    /* One that starts sending is found by the next grant. */
    ready_to_receive[2] = 1;
    gf_sched_grant(&sched);
    ck_assert_ptr_eq(granted[1], C);
    gf_sched_received(&sched, C);
    give_back(C);
    gf_sched_grant_unready(&sched);
    ck_assert_ptr_eq(granted[2], B);
    teardown();
}
END_TEST

/* A slot granted for a payload that is not taken (the connection could not
 * read it yet) goes back, and no longer counts as received into. */
START_TEST(an_unused_receive_grant_is_not_counted) {
    setup(2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    ck_assert_uint_eq(sched.receiving, 1);
    gf_sched_end_batch(&sched, A, 0);
    ck_assert_uint_eq(sched.receiving, 0);
    ck_assert_uint_eq(sched.ring.free_count, 2);
    ck_assert(!A->receiving);
    /* So the next receiver is not held back by a count nobody holds. */
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, B, 1));
    teardown();
}
END_TEST

/* Arrival order holds across the two queues, the cap allowing. */
START_TEST(grants_follow_arrival_across_both_queues) {
    setup(2);
    gf_sched_claim(&sched, A, 0);
    gf_sched_claim(&sched, B, 0);
    ready_to_receive[2] = 1;
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 1)); /* receiver first */
    ck_assert_ptr_null(gf_sched_claim(&sched, D, 0));
    give_back(A);
    give_back(B);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 2);
    ck_assert_ptr_eq(granted[0], C);
    ck_assert_ptr_eq(granted[1], D);
    teardown();
}
END_TEST

/* A receiver's frame, received and on the engine: it keeps its slot until
 * the frame is released (its result read). */
static gf_frame *run_received(gf_sched_client *c, uint64_t frame_id) {
    gf_frame *f = add_frame(c, frame_id);
    gf_sched_received(&sched, c);
    gf_sched_close_batch(&sched, c);
    return f;
}

/* A connection receiving large payloads uses every slot while it is alone,
 * but holds at most all but one while another connection uses them: the
 * other's frame finds a slot at once instead of waiting for a bulk
 * transfer, and the receiver is granted one when its own comes back. */
START_TEST(a_receiver_leaves_a_slot_to_others) {
    setup(3);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    gf_frame *a1 = run_received(A, 1);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    gf_frame *a2 = run_received(A, 2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1)); /* alone: the last one too */
    gf_frame *a3 = run_received(A, 3);
    ck_assert_uint_eq(sched.ring.free_count, 0);
    for (unsigned i = 0; i < 3; i++)
        gf_sched_complete(submitted[i], &sched);
    gf_sched_release(&sched, a1);
    gf_sched_release(&sched, a2);
    /* B uses a slot: from now on A leaves one. */
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, B, 0));
    gf_frame *b1 = add_frame(B, 1);
    gf_sched_close_batch(&sched, B);
    gf_sched_complete(submitted[3], &sched);
    gf_sched_release(&sched, b1);
    ck_assert_uint_eq(sched.ring.free_count, 2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    gf_frame *a4 = run_received(A, 4); /* A holds two: a3's result, a4 */
    ck_assert_uint_eq(sched.ring.free_count, 1);
    ck_assert_ptr_null(gf_sched_claim(&sched, A, 1));
    ck_assert(gf_sched_waiting(A));
    /* The free slot is not granted to A, and B's next frame takes it. */
    ready_to_receive[0] = 1;
    gf_sched_grant_unready(&sched);
    ck_assert_uint_eq(granted_count, 0);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, B, 0));
    ck_assert(!gf_sched_waiting(B));
    /* A third client's receive goes before A, which holds its share. */
    ready_to_receive[2] = 1;
    give_back(B);
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 1)); /* behind A, in arrival order */
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], C);
    ck_assert(gf_sched_waiting(A));
    /* One of A's own comes back: A is granted the next free slot. */
    gf_sched_received(&sched, C);
    give_back(C);
    gf_sched_release(&sched, a3);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 2);
    ck_assert_ptr_eq(granted[1], A);
    gf_sched_complete(submitted[4], &sched);
    gf_sched_release(&sched, a4);
    teardown();
}
END_TEST

/* Receiver A holds all slots but one; receiver C, whose bytes are not there
 * yet, waits before it.  A grant passes C over for want of bytes, and must
 * still count it as waiting: A is not given the last slot.  When C leaves,
 * a grant is asked for, and A, alone now, gets it. */
START_TEST(a_waiter_passed_over_still_counts) {
    setup(2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 1));
    gf_frame *a1 = run_received(A, 1);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 0); /* C is not sending */
    ck_assert_ptr_null(gf_sched_claim(&sched, A, 1));
    ready_to_receive[0] = 1;
    gf_sched_grant(&sched);
    ck_assert_msg(granted_count == 0, "%s was granted the last slot while C waits",
                  granted[0] == A ? "A" : "C");
    unsigned before = wakes;
    gf_sched_stop_waiting(&sched, C);
    ck_assert_uint_gt(wakes, before);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], A);
    gf_sched_complete(submitted[0], &sched);
    gf_sched_release(&sched, a1);
    teardown();
}
END_TEST

/* ---- batches, submission, completion ------------------------------------------- */

/* Whole frames of several clients join one open batch, which goes to the
 * engine in the pass after the loop's I/O; its completion tells each client
 * once, and every frame has its reply. */
START_TEST(whole_frames_of_several_clients_share_a_batch) {
    setup(2);
    gf_sched_client *who[5] = {A, A, B, C, B};
    gf_frame *f[5];
    for (int i = 0; i < 5; i++)
        f[i] = join(who[i], 10 + (uint64_t)i);
    ck_assert_uint_eq(batches_calls, 1); /* the batch opened */
    ck_assert_uint_eq(sched.ring.free_count, 1);
    ck_assert(A->batch == NULL && B->batch == NULL && C->batch == NULL);
    ck_assert_ptr_eq(f[4]->slot, f[0]->slot);
    ck_assert_ptr_null(f[0]->slot->owner);
    ck_assert_uint_eq(submitted_count, 0);
    pass();
    ck_assert_uint_eq(submitted_count, 1);
    ck_assert_uint_eq(submitted[0]->frame_count, 5);
    ck_assert_uint_eq(stats.submissions, 1);
    gf_sched_complete(submitted[0], &sched);
    ck_assert_uint_eq(told_count, 3);
    ck_assert_ptr_eq(told[0], A);
    ck_assert_ptr_eq(told[1], B);
    ck_assert_ptr_eq(told[2], C);
    ck_assert_int_eq(answered_completed, 1);
    for (int i = 0; i < 5; i++) {
        gf_header h;
        ck_assert(f[i]->reply.ready && !f[i]->batched);
        ck_assert_uint_eq(f[i]->submission, 1);
        gf_test_ck_reply_header(f[i]->reply.header, &h);
        ck_assert_uint_eq(h.frame_id, 10 + (uint64_t)i);
        ck_assert_uint_eq(h.type, GF_MSG_RESULT);
    }
    for (int i = 0; i < 5; i++)
        gf_sched_release(&sched, f[i]);
    ck_assert_uint_eq(sched.ring.free_count, 2);
    teardown();
}
END_TEST

/* A batch holds one pipeline's frames: another pipeline's open a batch of
 * their own. */
START_TEST(pipelines_do_not_share_a_batch) {
    setup(2);
    gf_frame *a = join_at(A, &echo, 1, 1), *b = join_at(B, &echo2, 2, 1);
    gf_frame *c = join_at(C, &echo, 3, 1);
    ck_assert_ptr_ne(a->slot, b->slot);
    ck_assert_ptr_eq(a->slot, c->slot);
    pass();
    ck_assert_uint_eq(submitted_count, 2);
    ck_assert_uint_eq(a->slot->frame_count, 2);
    ck_assert_uint_eq(b->slot->frame_count, 1);
    teardown();
}
END_TEST

/* A batch holds max_batch_frames at most: the frame that finds it full
 * sends it and opens the next; the pass sends a full batch though the
 * engine is busy. */
START_TEST(a_full_batch_goes_at_once) {
    setup(4);
    echo.max_batch_frames = 2;
    gf_frame *f0 = join(A, 1), *f1 = join(B, 2);
    ck_assert_ptr_eq(f0->slot, f1->slot);
    ck_assert_uint_eq(submitted_count, 0);
    gf_frame *f2 = join(C, 3);
    ck_assert_uint_eq(submitted_count, 1); /* sent by C's frame */
    ck_assert_ptr_eq(submitted[0], f0->slot);
    ck_assert_ptr_ne(f2->slot, f0->slot);
    join(D, 4);
    pass();
    ck_assert_uint_eq(submitted_count, 2); /* full */
    join(A, 5);
    pass(); /* two on the engine: one frame waits for more */
    ck_assert_uint_eq(submitted_count, 2);
    join(B, 6);
    pass();
    ck_assert_uint_eq(submitted_count, 3);
    teardown();
}
END_TEST

/* Priorities (scheduler.h): waiters are granted by class, realtime first,
 * each class in arrival order; a batch frame that began to wait more than
 * two GF_PRIORITY_STEP_NS before a realtime one still goes first. */
START_TEST(grants_go_by_class_and_none_starves) {
    setup(1);
    gf_sched_claim(&sched, A, 0);
    B->priority = GF_CLASS_BATCH;
    C->priority = GF_CLASS_NORMAL;
    D->priority = GF_CLASS_REALTIME;
    E->priority = GF_CLASS_REALTIME;
    gf_sched_client *order[] = {B, C, D, E};
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_null(gf_sched_claim(&sched, order[i], 0));
    ck_assert_uint_eq(stats.class_waits[GF_CLASS_REALTIME], 2);
    ck_assert_uint_eq(stats.class_waits[GF_CLASS_BATCH], 1);
    gf_sched_client *want[] = {D, E, C, B};
    gf_sched_client *holder = A;
    for (int i = 0; i < 4; i++) {
        give_back(holder);
        gf_sched_grant(&sched);
        ck_assert_uint_eq(granted_count, (unsigned)i + 1);
        ck_assert_ptr_eq(granted[i], want[i]);
        holder = want[i];
    }
    /* While B holds the slot, C waits with a batch frame as if for three
     * steps: a realtime frame that comes now queues behind it. */
    give_back(C);
    C->priority = GF_CLASS_BATCH;
    ck_assert_ptr_null(gf_sched_claim(&sched, C, 0));
    C->wait_seq -= 3 * GF_PRIORITY_STEP_NS;
    give_back(D);
    ck_assert_ptr_null(gf_sched_claim(&sched, D, 0));
    give_back(holder);
    gf_sched_grant(&sched);
    ck_assert_ptr_eq(granted[4], C);
    teardown();
}
END_TEST

/* A batch that holds a realtime frame goes at the next pass, neither
 * waiting its delay nor held while two submissions are on the engine. */
START_TEST(a_batch_with_a_realtime_frame_goes_at_once) {
    setup(4);
    echo.max_batch_delay_us = 100;
    echo.max_batch_frames = 8;
    const uint64_t t0 = 5000000;
    join_at(A, &echo, 1, t0);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0 + 10), t0 + 100000);
    ck_assert_uint_eq(submitted_count, 0);
    B->priority = GF_CLASS_REALTIME;
    ck_assert_ptr_nonnull(join_at(B, &echo, 2, t0 + 20));
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0 + 30), 0);
    ck_assert_uint_eq(submitted_count, 1);
    ck_assert_uint_eq(submitted[0]->frame_count, 2);
    teardown();
}
END_TEST

static void complete_and_release(unsigned k);

/* Timing (timing_sample_every 3): a batch with a realtime frame passes its
 * turn on to the next submission, twice in a row at most.  Each frame goes
 * alone and completes before the next: A is normal, R realtime; the turns
 * fall on submissions 0, 3 and 6. */
START_TEST(a_realtime_batch_passes_its_timing_turn_on) {
    setup(4);
    cfg.timing_events = 1;
    cfg.timing_sample_every = 3;
    echo.max_batch_frames = 1;
    clients[5].priority = GF_CLASS_REALTIME;
    gf_sched_client *order[] = {&clients[5], A,           &clients[5], &clients[5],
                                &clients[5], &clients[5], A,           A};
    /* 0: its turn passed on; 1: A takes it; 3: passed, 4: passed again,
     * 5: taken, the second time in a row being the most; 6: A's own. */
    static const int want[] = {0, 1, 0, 0, 0, 1, 1, 0};
    for (unsigned k = 0; k < 8; k++) {
        ck_assert_ptr_nonnull(join(order[k], k + 1));
        pass();
        ck_assert_uint_eq(submitted_count, k + 1);
        ck_assert_int_eq(submitted[k]->urgent, order[k] != A);
        ck_assert_msg(submitted[k]->time_stages == want[k], "submission %u timed %d, not %d", k,
                      submitted[k]->time_stages, want[k]);
        complete_and_release(k);
    }
    teardown();
}
END_TEST

/* With max_batch_delay_us, a batch that is not full waits that long after
 * its first frame was whole, and the pass says when it will be due. */
START_TEST(a_batch_waits_its_delay) {
    setup(2);
    echo.max_batch_delay_us = 100;
    echo.max_batch_frames = 3;
    const uint64_t t0 = 5000000;
    join_at(A, &echo, 1, t0);
    join_at(B, &echo, 2, t0 + 30000);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0 + 50000), t0 + 100000);
    ck_assert_uint_eq(submitted_count, 0);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0 + 100000), 0);
    ck_assert_uint_eq(submitted_count, 1);
    /* A full one does not wait. */
    for (uint64_t i = 0; i < 3; i++)
        join_at(C, &echo, 3 + i, t0 + 200000);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0 + 200000), 0);
    ck_assert_uint_eq(submitted_count, 2);
    teardown();
}
END_TEST

/* With max_batch_delay_us "auto", an unmeasured pipeline's batch goes at
 * once, as with 0; once its batches' cost and its arrivals are measured
 * (40 µs a submission, 1 µs a frame, 500k frames/s), a batch waits for the
 * 14 frames that keep up with them (batch_delay.h), and goes as soon as it
 * holds them.  STATS's inputs are the ones it decided on. */
START_TEST(an_auto_batch_waits_for_the_batch_that_keeps_up) {
    setup(3);
    echo.max_batch_delay_us = GF_BATCH_DELAY_AUTO;
    const uint64_t t0 = 1000000000ull;
    join_at(A, &echo, 1, t0);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t0), 0);
    ck_assert_uint_eq(submitted_count, 1);
    gf_sched_complete(submitted[0], &sched);
    gf_batch_delay *d = &stats.pipelines[0].delay;
    memset(d, 0, sizeof *d);
    for (int round = 0; round < 10; round++)
        for (uint32_t n = 1; n <= 16; n++)
            gf_batch_delay_completed(d, n, 40000 + 1000 * (uint64_t)n);
    const uint64_t t1 = 2 * t0;
    for (uint64_t t = t1 - 100000000ull; t < t1; t += 2000)
        gf_batch_delay_arrived(d, 1, t);
    unsigned calls = batches_calls;
    join_at(B, &echo, 2, t1);
    ck_assert_uint_gt(batches_calls, calls); /* a pass will look at it */
    uint64_t due = gf_sched_submit_batches(&sched, t1);
    ck_assert_uint_eq(submitted_count, 1);
    ck_assert_uint_eq(d->last_out.target_frames, 14);
    ck_assert_uint_ge(due, t1 + 25000);
    ck_assert_uint_le(due, t1 + 27000);
    for (uint64_t i = 0; i < 12; i++) {
        calls = batches_calls;
        join_at(C, &echo, 3 + i, t1 + 1000 * (i + 1));
        ck_assert_uint_gt(batches_calls, calls);
        ck_assert_uint_ne(gf_sched_submit_batches(&sched, t1 + 1000 * (i + 1)), 0);
        ck_assert_uint_eq(submitted_count, 1);
    }
    join_at(D, &echo, 15, t1 + 13000);
    ck_assert_uint_eq(gf_sched_submit_batches(&sched, t1 + 13000), 0);
    ck_assert_uint_eq(submitted_count, 2);
    ck_assert_uint_eq(submitted[1]->frame_count, 14);
    ck_assert_uint_eq(d->last_in.queued, 14);
    teardown();
}
END_TEST

/* A batch that opens invites the whole-frame waiters of its pipeline to
 * join it, not others'; one that finds it full waits again in its old
 * place. */
START_TEST(waiters_are_invited_to_a_batch_that_opens) {
    setup(1);
    gf_frame *a = join(A, 1);
    pass();
    ck_assert_ptr_null(join(B, 2));
    ck_assert_ptr_null(join_at(C, &echo2, 3, 1));
    ck_assert_ptr_null(join(D, 4));
    ck_assert_ptr_null(join(E, 5));
    gf_sched_complete(submitted[0], &sched);
    gf_sched_release(&sched, a);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], B);
    gf_frame *b = join(B, 2); /* in its granted slot: D and E are invited, not C */
    ck_assert_uint_eq(granted_count, 3);
    ck_assert_ptr_eq(granted[1], D);
    ck_assert_ptr_eq(granted[2], E);
    ck_assert(gf_sched_waiting(C) && !gf_sched_waiting(D) && !gf_sched_waiting(E));
    gf_frame *d = join(D, 4);
    ck_assert_ptr_eq(d->slot, b->slot);
    /* E finds it full: it goes, and E waits again before C's next... */
    echo.max_batch_frames = 2;
    b->slot->frames[0].pipeline.max_batch_frames = 2;
    ck_assert_ptr_null(join(E, 5));
    ck_assert_uint_eq(submitted_count, 2);
    ck_assert_ptr_eq(submitted[1], b->slot);
    /* ...in its old place: behind C, which waited first, ahead of a newcomer. */
    ck_assert_ptr_null(join(A, 6));
    gf_link *l = gf_list_front(&sched.wait_run);
    ck_assert_ptr_eq(gf_list_entry(l, gf_sched_client, waiting), C);
    l = gf_list_next(&sched.wait_run, l);
    ck_assert_ptr_eq(gf_list_entry(l, gf_sched_client, waiting), E);
    l = gf_list_next(&sched.wait_run, l);
    ck_assert_ptr_eq(gf_list_entry(l, gf_sched_client, waiting), A);
    teardown();
}
END_TEST

/* A batch that is not full waits while two are on the engine; a
 * completion asks for the pass, which sends it. */
START_TEST(batches_are_held_while_the_engine_is_busy) {
    setup(3);
    gf_sched_client *who[3] = {A, B, C};
    for (int i = 0; i < 3; i++) {
        join(who[i], (uint64_t)i);
        pass();
    }
    /* Two on the engine; the third waits for more frames. */
    ck_assert_uint_eq(submitted_count, 2);
    ck_assert_uint_eq(sched.in_flight, 2);
    /* A payload still arriving keeps its own batch open whatever the engine does. */
    ck_assert_ptr_null(gf_sched_claim(&sched, D, 1));
    unsigned calls = batches_calls;
    gf_sched_complete(submitted[0], &sched);
    ck_assert_ptr_eq(answered_client, A);
    ck_assert_uint_eq(batches_calls, calls + 1);
    pass();
    ck_assert_uint_eq(submitted_count, 3);
    ck_assert_uint_eq(stats.submissions, 3);
    teardown();
}
END_TEST

/* A frame received in place has its slot to itself, its client's batch:
 * it goes when its read is processed, not before its payload is in. */
START_TEST(a_received_frame_has_its_slot_to_itself) {
    setup(2);
    ck_assert_ptr_nonnull(gf_sched_claim(&sched, A, 1));
    gf_frame *f = add_frame(A, 1);
    gf_sched_end_batch(&sched, A, 1);
    ck_assert_uint_eq(submitted_count, 0);
    gf_frame *g = join(B, 2);
    ck_assert_ptr_ne(g->slot, f->slot);
    gf_sched_received(&sched, A);
    gf_sched_end_batch(&sched, A, 0);
    ck_assert_uint_eq(submitted_count, 1);
    ck_assert_ptr_eq(submitted[0], f->slot);
    ck_assert_ptr_null(A->batch);
    teardown();
}
END_TEST

START_TEST(an_empty_batch_goes_back_to_the_ring) {
    setup(1);
    gf_sched_claim(&sched, A, 0);
    ck_assert_uint_eq(sched.ring.free_count, 0);
    gf_sched_end_batch(&sched, A, 0);
    ck_assert_uint_eq(sched.ring.free_count, 1);
    ck_assert_uint_eq(wakes, 1);
    ck_assert_uint_eq(submitted_count, 0);
    teardown();
}
END_TEST

/* A whole frame of `c` of BIG bytes: two never fit a slot (BUF_BYTES). */
enum { BIG = 3000 };
static gf_frame *join_big(gf_sched_client *c, uint64_t frame_id) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, 0, BIG);
    uint64_t stage_bytes[GF_STAGES_MAX] = {BIG};
    gf_frame *f = gf_sched_join(&sched, c, &echo, &h, BIG, stage_bytes, 1);
    if (f)
        f->batched = 1;
    return f;
}

/* Completes submission k and releases its frames: the slot goes back. */
static void complete_and_release(unsigned k) {
    gf_slot *s = submitted[k];
    gf_sched_complete(s, &sched);
    for (uint32_t i = 0; i < s->frame_count; i++)
        gf_sched_release(&sched, &s->frames[i]);
}

/* A client whose frames fill a slot each has both slots alone; once
 * another waits, the slot that comes back goes to the other, though the
 * first's frame waited longer, and the first is not invited to the other's
 * batch either (its frame would fit beside a small one); it gets the next
 * slot of its own that comes back.  Once the other has claimed nothing for
 * two of its claims, it has both slots again. */
START_TEST(a_client_whose_frames_fill_a_slot_leaves_one_to_another) {
    setup(2);
    gf_frame *a1 = join_big(A, 1);
    ck_assert_ptr_nonnull(a1);
    ck_assert_ptr_eq(a1->slot->owner, A);
    pass();
    gf_frame *a2 = join_big(A, 2);
    ck_assert_ptr_nonnull(a2); /* alone: both slots */
    pass();
    ck_assert_uint_eq(submitted_count, 2);
    ck_assert_ptr_null(join_big(A, 3));
    ck_assert_ptr_null(join(B, 10));
    complete_and_release(0);
    ck_assert_uint_eq(sched.ring.free_count, 1);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert_ptr_eq(granted[0], B);
    gf_frame *b = join(B, 10); /* in its grant: A, capped, is not invited */
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(granted_count, 1);
    ck_assert(gf_sched_waiting(A));
    pass();
    complete_and_release(1);
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 2);
    ck_assert_ptr_eq(granted[1], A);
    ck_assert_ptr_nonnull(join_big(A, 3)); /* in its grant */
    pass();
    complete_and_release(2); /* B's */
    /* B claimed since A's last two claims: A holds one, and waits. */
    ck_assert_ptr_null(join_big(A, 4));
    complete_and_release(3);
    gf_sched_grant(&sched);
    ck_assert_ptr_eq(granted[granted_count - 1], A);
    ck_assert_ptr_nonnull(join_big(A, 4));
    pass();
    /* Two claims of its own since B's: both slots again. */
    ck_assert_ptr_nonnull(join_big(A, 5));
    ck_assert_uint_eq(sched.ring.free_count, 0);
    teardown();
}
END_TEST

/* A newcomer takes a free slot that the only waiter, capped, may not: it
 * does not queue behind it.  And a client that stops waiting asks for a
 * grant while a slot is free, for whoever waited behind it or was capped
 * for its sake. */
START_TEST(a_capped_client_holds_no_one_up) {
    setup(2);
    ck_assert_ptr_nonnull(join_big(A, 1));
    pass();
    ck_assert_ptr_nonnull(join(C, 20)); /* C's batch in the other slot */
    pass();
    ck_assert_ptr_null(join_big(A, 2)); /* no slot free */
    complete_and_release(1);            /* C's */
    gf_sched_grant(&sched);
    ck_assert_uint_eq(granted_count, 0); /* A holds its share: C used a slot */
    ck_assert_uint_eq(sched.ring.free_count, 1);
    gf_frame *d = join(D, 30);
    ck_assert_ptr_nonnull(d); /* at once, not behind A */
    ck_assert(!gf_sched_waiting(D));
    pass();
    ck_assert_ptr_null(join(B, 40)); /* behind A: no slot free */
    complete_and_release(2);         /* D's: one is, before the grant */
    ck_assert(gf_sched_waiting(B));
    unsigned before = wakes;
    gf_sched_stop_waiting(&sched, B); /* B closes */
    ck_assert_uint_eq(wakes, before + 1);
    teardown();
}
END_TEST

/* A slot a client's frame fills is that client's until another client's
 * frame joins its batch, beside it: then no one's. */
START_TEST(a_slot_is_no_ones_once_another_frame_joins) {
    setup(1);
    gf_frame *a = join_big(A, 1);
    ck_assert_ptr_eq(a->slot->owner, A);
    gf_frame *b = join(B, 2);
    ck_assert_ptr_eq(b->slot, a->slot);
    ck_assert_ptr_null(a->slot->owner);
    teardown();
}
END_TEST

/* Each frame's reply is made from its status: a result whose body is the
 * slot's output, or an ERROR counted by reason. */
START_TEST(completion_makes_each_frame_reply_ready) {
    setup(1);
    gf_frame *f[3];
    for (int i = 0; i < 3; i++)
        f[i] = join(A, 10 + (uint64_t)i);
    finish_status[1] = GF_ERR_ENGINE;
    pass();
    ck_assert_uint_eq(submitted_count, 1);
    gf_sched_complete(submitted[0], &sched);
    ck_assert_ptr_eq(answered_slot, submitted[0]);
    ck_assert_int_eq(answered_completed, 1);
    ck_assert_uint_eq(told_count, 1);
    gf_header h;
    for (int i = 0; i < 3; i++) {
        ck_assert(f[i]->reply.ready && !f[i]->batched);
        gf_test_ck_reply_header(f[i]->reply.header, &h);
        ck_assert_uint_eq(h.frame_id, 10 + (uint64_t)i);
    }
    gf_test_ck_reply_header(f[0]->reply.header, &h);
    ck_assert_uint_eq(h.type, GF_MSG_RESULT);
    ck_assert_uint_eq(h.payload_bytes, FRAME_BYTES);
    ck_assert_ptr_eq(f[0]->reply.body, f[0]->out_host);
    ck_assert_uint_eq(f[0]->reply.body_bytes, FRAME_BYTES);
    gf_test_ck_reply_header(f[1]->reply.header, &h);
    ck_assert_uint_eq(h.type, GF_MSG_ERROR);
    ck_assert_uint_eq(h.status, GF_ERR_ENGINE);
    ck_assert_uint_eq(f[1]->reply.body_bytes, 0);
    ck_assert_uint_eq(stats.frames_completed, 3);
    ck_assert_uint_eq(stats.frames_failed, 1);
    ck_assert_uint_eq(stats.rejected[GF_ERR_ENGINE], 1);
    /* The slot goes back with the last frame released, not before. */
    gf_sched_release(&sched, f[0]);
    gf_sched_release(&sched, f[1]);
    ck_assert_uint_eq(sched.ring.free_count, 0);
    ck_assert_uint_eq(wakes, 0);
    gf_sched_release(&sched, f[2]);
    ck_assert_uint_eq(sched.ring.free_count, 1);
    ck_assert_uint_eq(wakes, 1);
    teardown();
}
END_TEST

START_TEST(a_refused_submission_fails_every_frame_with_its_text) {
    setup(1);
    refuse_submit = 1;
    gf_frame *f0 = join(A, 1), *f1 = join(B, 2);
    pass();
    ck_assert_uint_eq(refused_count, 1);
    ck_assert_uint_eq(sched.in_flight, 0);
    ck_assert_uint_eq(told_count, 2); /* each client, once */
    ck_assert_ptr_eq(told[0], A);
    ck_assert_ptr_eq(told[1], B);
    ck_assert_int_eq(answered_completed, 0); /* not from a completion: deferred */
    gf_frame *f[2] = {f0, f1};
    for (int i = 0; i < 2; i++) {
        gf_header h;
        ck_assert(f[i]->reply.ready);
        gf_test_ck_reply_header(f[i]->reply.header, &h);
        ck_assert_uint_eq(h.type, GF_MSG_ERROR);
        ck_assert_uint_eq(h.status, GF_ERR_ENGINE);
        ck_assert_uint_eq(h.payload_bytes, f[i]->reply.body_bytes);
        ck_assert_mem_eq(f[i]->reply.body, "the fake engine could not start this frame",
                         f[i]->reply.body_bytes);
    }
    ck_assert_uint_eq(stats.frames_failed, 2);
    free(f0->reply.owned);
    free(f1->reply.owned);
    teardown();
}
END_TEST

static Suite *scheduler_suite(void) {
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("grants");
    tcase_add_test(tc, free_slots_are_claimed_then_clients_wait_in_order);
    tcase_add_test(tc, a_newcomer_queues_behind_waiters);
    tcase_add_test(tc, grants_go_by_class_and_none_starves);
    tcase_add_test(tc, a_batch_with_a_realtime_frame_goes_at_once);
    tcase_add_test(tc, a_realtime_batch_passes_its_timing_turn_on);
    tcase_add_test(tc, stop_waiting_takes_a_client_from_the_middle);
    suite_add_tcase(s, tc);
    tc = tcase_create("receivers");
    tcase_add_test(tc, receivers_never_hold_every_slot);
    tcase_add_test(tc, a_ready_receiver_goes_before_a_stalled_one);
    tcase_add_test(tc, grants_follow_arrival_across_both_queues);
    tcase_add_test(tc, an_unused_receive_grant_is_not_counted);
    tcase_add_test(tc, a_receiver_leaves_a_slot_to_others);
    tcase_add_test(tc, a_waiter_passed_over_still_counts);
    suite_add_tcase(s, tc);
    tc = tcase_create("batches");
    tcase_add_test(tc, whole_frames_of_several_clients_share_a_batch);
    tcase_add_test(tc, pipelines_do_not_share_a_batch);
    tcase_add_test(tc, a_full_batch_goes_at_once);
    tcase_add_test(tc, a_batch_waits_its_delay);
    tcase_add_test(tc, an_auto_batch_waits_for_the_batch_that_keeps_up);
    tcase_add_test(tc, waiters_are_invited_to_a_batch_that_opens);
    tcase_add_test(tc, batches_are_held_while_the_engine_is_busy);
    tcase_add_test(tc, a_received_frame_has_its_slot_to_itself);
    tcase_add_test(tc, an_empty_batch_goes_back_to_the_ring);
    tcase_add_test(tc, a_client_whose_frames_fill_a_slot_leaves_one_to_another);
    tcase_add_test(tc, a_capped_client_holds_no_one_up);
    tcase_add_test(tc, a_slot_is_no_ones_once_another_frame_joins);
    tcase_add_test(tc, completion_makes_each_frame_reply_ready);
    tcase_add_test(tc, a_refused_submission_fails_every_frame_with_its_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(scheduler_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of calls between threads (daemon/mailbox.h): a call runs on
 * the callee's loop and its answer on the caller's, each with its owner;
 * calls run in the order posted; a call that cannot be delivered runs with
 * a NULL owner where it is and still answers; a spawned call's work runs on
 * a thread of its own and answers the caller's loop.  Two loops on this
 * thread stand for two threads' loops (which thread posts does not matter
 * to a mailbox); the spawned call has a real thread.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include <uv.h>

#include "mailbox.h"
#include "runner.h"
#include "util.h"

/* What one call saw. */
typedef struct probe {
    gf_call call;
    int order;        /* its place among the calls run            */
    void *run_owner;  /* the owner its run saw (or (void *)1: not run) */
    void *done_owner; /* the owner its done saw (or (void *)1: not run) */
    int runs, dones;  /* how many times each ran                  */
    pthread_t work_thread;
} probe;

static int run_count;
static char owner_a, owner_b; /* the two mailboxes' owners */
static uv_loop_t loop_a, loop_b;
static gf_mailbox box_a, box_b;

static void on_run(gf_call *c, void *owner) {
    probe *p = gf_list_entry(c, probe, call);
    p->runs++;
    p->run_owner = owner;
    p->order = run_count++;
}

static void on_done(gf_call *c, void *owner) {
    probe *p = gf_list_entry(c, probe, call);
    p->dones++;
    p->done_owner = owner;
}

static void probe_init(probe *p, int answered) {
    *p = (probe){.call = {.run = on_run, .done = answered ? on_done : NULL, .reply_to = &box_a},
                 .run_owner = (void *)1,
                 .done_owner = (void *)1};
}

static void setup(void) {
    run_count = 0;
    ck_assert_int_eq(uv_loop_init(&loop_a), 0);
    ck_assert_int_eq(uv_loop_init(&loop_b), 0);
    ck_assert_int_eq(gf_mailbox_init(&box_a, &loop_a, &owner_a), 0);
    ck_assert_int_eq(gf_mailbox_init(&box_b, &loop_b, &owner_b), 0);
    /* A mailbox keeps no loop alive; these loops have nothing else, and a
     * loop that is not alive does not poll. */
    uv_ref((uv_handle_t *)&box_a.async);
    uv_ref((uv_handle_t *)&box_b.async);
}

/* Closes whichever mailboxes are still open, then both loops. */
static void teardown(int a_open, int b_open) {
    if (a_open)
        gf_mailbox_close(&box_a, NULL);
    if (b_open)
        gf_mailbox_close(&box_b, NULL);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    uv_run(&loop_b, UV_RUN_NOWAIT);
    ck_assert_int_eq(uv_loop_close(&loop_a), 0);
    ck_assert_int_eq(uv_loop_close(&loop_b), 0);
}

/* A call runs on the callee's loop with its owner, and its answer on the
 * caller's with the caller's: not before each loop runs. */
START_TEST(a_call_runs_there_and_answers_here) {
    probe p;
    setup();
    probe_init(&p, 1);
    ck_assert_int_eq(gf_call_post(&box_b, &p.call), 0);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.runs, 0);
    uv_run(&loop_b, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.runs, 1);
    ck_assert_ptr_eq(p.run_owner, &owner_b);
    ck_assert_int_eq(p.dones, 0);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.dones, 1);
    ck_assert_ptr_eq(p.done_owner, &owner_a);
    teardown(1, 1);
}
END_TEST

/* Calls run in the order posted, those without an answer too, which end
 * with their run. */
START_TEST(calls_run_in_the_order_posted) {
    probe p[5];
    setup();
    for (int i = 0; i < 5; i++) {
        probe_init(&p[i], i % 2);
        ck_assert_int_eq(gf_call_post(&box_b, &p[i].call), 0);
    }
    uv_run(&loop_b, UV_RUN_NOWAIT);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(p[i].order, i);
        ck_assert_int_eq(p[i].runs, 1);
        ck_assert_int_eq(p[i].dones, i % 2);
    }
    teardown(1, 1);
}
END_TEST

/* A closed mailbox takes no call: the poster keeps it. */
START_TEST(a_closed_mailbox_takes_no_call) {
    probe p;
    setup();
    gf_mailbox_close(&box_b, NULL);
    probe_init(&p, 1);
    ck_assert_int_eq(gf_call_post(&box_b, &p.call), -1);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.runs + p.dones, 0);
    teardown(1, 0);
}
END_TEST

/* A call queued when its callee closes runs with no owner, there, and its
 * answer still comes back. */
START_TEST(a_call_queued_at_close_runs_ownerless_and_answers) {
    probe p;
    setup();
    probe_init(&p, 1);
    ck_assert_int_eq(gf_call_post(&box_b, &p.call), 0);
    gf_mailbox_close(&box_b, NULL);
    ck_assert_int_eq(p.runs, 1);
    ck_assert_ptr_null(p.run_owner);
    uv_run(&loop_a, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.dones, 1);
    ck_assert_ptr_eq(p.done_owner, &owner_a);
    teardown(1, 0);
}
END_TEST

/* An answer that finds its caller's mailbox closed runs its done with no
 * owner where the callee answered; so does an answer queued when it
 * closes. */
START_TEST(an_answer_to_a_closed_caller_cleans_up_there) {
    probe p, q;
    setup();
    probe_init(&p, 1);
    probe_init(&q, 1);
    ck_assert_int_eq(gf_call_post(&box_b, &p.call), 0);
    ck_assert_int_eq(gf_call_post(&box_b, &q.call), 0);
    gf_mailbox_close(&box_a, NULL);
    uv_run(&loop_b, UV_RUN_NOWAIT);
    ck_assert_int_eq(p.runs, 1);
    ck_assert_ptr_eq(p.run_owner, &owner_b);
    ck_assert_int_eq(p.dones, 1);
    ck_assert_ptr_null(p.done_owner);
    ck_assert_int_eq(q.dones, 1);
    ck_assert_ptr_null(q.done_owner);
    teardown(0, 1);
}
END_TEST

static void spawned_work(gf_call *c) {
    probe *p = gf_list_entry(c, probe, call);
    p->work_thread = pthread_self();
    p->runs++;
}

/* A spawned call's work runs on a thread of its own; its answer on the
 * caller's loop, with the caller's owner. */
START_TEST(a_spawned_call_works_elsewhere_and_answers_here) {
    probe p;
    setup();
    probe_init(&p, 1);
    ck_assert_int_eq(gf_call_spawn(&p.call, spawned_work), 0);
    uint64_t until = gf_now_ns() + 10000000000ull;
    while (p.dones == 0 && gf_now_ns() < until) {
        uv_run(&loop_a, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    ck_assert_int_eq(p.dones, 1);
    ck_assert_int_eq(p.runs, 1);
    ck_assert_ptr_eq(p.done_owner, &owner_a);
    ck_assert(!pthread_equal(p.work_thread, pthread_self()));
    teardown(1, 1);
}
END_TEST

static Suite *mailbox_suite(void) {
    Suite *s = suite_create("mailbox");
    TCase *tc = tcase_create("calls");
    tcase_add_test(tc, a_call_runs_there_and_answers_here);
    tcase_add_test(tc, calls_run_in_the_order_posted);
    tcase_add_test(tc, a_closed_mailbox_takes_no_call);
    tcase_add_test(tc, a_call_queued_at_close_runs_ownerless_and_answers);
    tcase_add_test(tc, an_answer_to_a_closed_caller_cleans_up_there);
    tcase_add_test(tc, a_spawned_call_works_elsewhere_and_answers_here);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(mailbox_suite());
}

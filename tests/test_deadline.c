/* SPDX-License-Identifier: MIT */
/* Unit tests of the deadlines (daemon/deadline.h): clocks and limits in,
 * which deadline is due out, at exact boundaries. */
#include <check.h>

#include "deadline.h"
#include "runner.h"

#define MS 1000000ull
/* An arbitrary "now" far from zero, so that every clock below is nonzero. */
#define T0 (1000000 * MS)

#define STALL_MS 100
static const gf_deadline_limits limits = {.request_timeout_ms = 500,
                                          .receive_stall_ms = STALL_MS,
                                          .write_timeout_ms = 2000,
                                          .idle_timeout_ms = 10000};

START_TEST(nothing_started_is_never_due) {
    gf_conn_clocks c = {.last_input_ns = T0};
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 5000 * MS), GF_DUE_NONE);
    /* Idle, but only once idle_timeout_ms has passed, and never with 0. */
    c.idle = 1;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 10000 * MS), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 10000 * MS + 1), GF_DUE_IDLE);
    gf_deadline_limits no_idle = limits;
    no_idle.idle_timeout_ms = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &no_idle, T0 + 100000 * MS), GF_DUE_NONE);
}
END_TEST

START_TEST(a_deadline_passes_strictly_after_its_limit) {
    gf_conn_clocks c = {.last_input_ns = T0, .request_begun_ns = T0};
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 500 * MS), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 500 * MS + 1), GF_DUE_REQUEST);
    c = (gf_conn_clocks){.last_input_ns = T0, .write_blocked_ns = T0};
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 2000 * MS), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 2000 * MS + 1), GF_DUE_WRITE);
}
END_TEST

/* A clock read after the caller's "now" (a request that began while the
 * watchdog's round freed a slot) has not passed: unsigned subtraction
 * would make it ancient. */
START_TEST(a_clock_later_than_now_has_not_passed) {
    gf_conn_clocks c = {.last_input_ns = T0 + 10 * MS,
                        .request_begun_ns = T0 + 10 * MS,
                        .write_blocked_ns = T0 + 10 * MS,
                        .idle = 1,
                        .drain_reading = 1};
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0), GF_DUE_NONE);
}
END_TEST

/* The receive stall is a deadline only while others wait to receive. */
START_TEST(receive_stall_only_when_contended) {
    gf_conn_clocks c = {.last_input_ns = T0, .receive_progress_ns = T0};
    uint64_t later = T0 + STALL_MS * MS + 1;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, later), GF_DUE_NONE);
    c.receive_contended = 1;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, later - 1), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, later), GF_DUE_RECEIVE_STALL);
    /* No payload arriving in place: nothing to stall. */
    c.receive_progress_ns = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, later), GF_DUE_NONE);
}
END_TEST

/* A payload received in place that could move to memory does so
 * GF_RECEIVE_HOLD_MS after it took its slot, before its stall counts. */
START_TEST(receive_hold_before_the_stall) {
    gf_conn_clocks c = {.last_input_ns = T0,
                        .receive_progress_ns = T0,
                        .receive_held_ns = T0,
                        .receive_contended = 1,
                        .request_begun_ns = T0};
    uint64_t held = T0 + GF_RECEIVE_HOLD_MS * MS;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, held), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, held + 1), GF_DUE_RECEIVE_HOLD);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 100000 * MS), GF_DUE_RECEIVE_HOLD);
    /* One that cannot move (no memory): its stall, then its request. */
    c.receive_held_ns = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + 100000 * MS), GF_DUE_RECEIVE_STALL);
}
END_TEST

/* Several due: the drain's cut first, then the stall, the request, the
 * writes, the silence. */
START_TEST(the_first_of_several_in_order) {
    gf_conn_clocks c = {.last_input_ns = T0,
                        .request_begun_ns = T0,
                        .write_blocked_ns = T0,
                        .receive_progress_ns = T0,
                        .receive_contended = 1,
                        .idle = 1,
                        .drain_reading = 1};
    uint64_t much_later = T0 + 100000 * MS;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, much_later), GF_DUE_DRAIN_STALL);
    c.drain_reading = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, much_later), GF_DUE_RECEIVE_STALL);
    c.receive_contended = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, much_later), GF_DUE_REQUEST);
    c.request_begun_ns = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, much_later), GF_DUE_WRITE);
    c.write_blocked_ns = 0;
    ck_assert_int_eq(gf_deadline_due(&c, &limits, much_later), GF_DUE_IDLE);
    /* The drain's cut counts from the last input, not from a request. */
    c = (gf_conn_clocks){.last_input_ns = T0, .drain_reading = 1};
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + GF_DRAIN_STALL_MS * MS), GF_DUE_NONE);
    ck_assert_int_eq(gf_deadline_due(&c, &limits, T0 + GF_DRAIN_STALL_MS * MS + 1),
                     GF_DUE_DRAIN_STALL);
}
END_TEST

/* A batch's deadline follows from its frames: frame_timeout_ms each. */
START_TEST(a_batch_gets_frame_timeout_for_each_frame) {
    ck_assert_uint_eq(gf_deadline_batch_ns(T0, 1, 10000), T0 + 10000 * MS);
    ck_assert_uint_eq(gf_deadline_batch_ns(T0, 40, 10000), T0 + 400000 * MS);
    ck_assert_uint_eq(gf_deadline_batch_ns(T0, 64, 600000), T0 + 64 * 600000 * MS);
    /* An empty batch (every frame taken back) still gets one. */
    ck_assert_uint_eq(gf_deadline_batch_ns(T0, 0, 10000), T0 + 10000 * MS);
}
END_TEST

START_TEST(the_watchdog_period_is_half_the_shortest_deadline) {
    ck_assert_uint_eq(gf_deadline_period_ms(&limits, 10000, 0, 0), 251);
    ck_assert_uint_eq(gf_deadline_period_ms(&limits, 100, 0, 0), 51);
    gf_deadline_limits slow = {
        .request_timeout_ms = 30000, .receive_stall_ms = STALL_MS, .write_timeout_ms = 30000};
    ck_assert_uint_eq(gf_deadline_period_ms(&slow, 60000, 0, 0), GF_WATCHDOG_PERIOD_MAX_MS);
    /* Receivers contending: their stall must be seen within half of it. */
    ck_assert_uint_eq(gf_deadline_period_ms(&slow, 60000, 1, 0), STALL_MS / 2 + 1);
    /* A payload received in place: its hold must be seen within half of it. */
    ck_assert_uint_eq(gf_deadline_period_ms(&slow, 60000, 0, 1), GF_RECEIVE_HOLD_MS / 2 + 1);
    /* idle_timeout_ms 0 is "never", not the shortest. */
    gf_deadline_limits idle_off = {
        .request_timeout_ms = 4000, .receive_stall_ms = 4000, .write_timeout_ms = 4000};
    ck_assert_uint_eq(gf_deadline_period_ms(&idle_off, 4000, 0, 0), 1000);
}
END_TEST

static Suite *deadline_suite(void) {
    Suite *s = suite_create("deadline");
    TCase *tc = tcase_create("deadline");
    tcase_add_test(tc, nothing_started_is_never_due);
    tcase_add_test(tc, a_deadline_passes_strictly_after_its_limit);
    tcase_add_test(tc, a_clock_later_than_now_has_not_passed);
    tcase_add_test(tc, receive_stall_only_when_contended);
    tcase_add_test(tc, receive_hold_before_the_stall);
    tcase_add_test(tc, the_first_of_several_in_order);
    tcase_add_test(tc, a_batch_gets_frame_timeout_for_each_frame);
    tcase_add_test(tc, the_watchdog_period_is_half_the_shortest_deadline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(deadline_suite());
}

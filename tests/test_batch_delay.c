/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the "auto" batch delay (daemon/batch_delay.h): the rule's
 * decisions on synthetic costs and arrival rates, checked against the
 * smallest batch that keeps up found by counting, and the two measurements
 * it reads (the cost fit, the arrival rate) on synthetic batches and
 * arrivals.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch_delay.h"
#include "config.h"
#include "runner.h"

#define US 1000.0 /* ns */

static gf_batch_delay_out decide(double fixed_ns, double frame_ns, double per_s, uint32_t queued,
                                 uint32_t max_frames, uint32_t concurrency) {
    gf_batch_delay_in in = {.fixed_ns = fixed_ns,
                            .frame_ns = frame_ns,
                            .arrivals_per_s = per_s,
                            .queued = queued,
                            .max_frames = max_frames,
                            .concurrency = concurrency};
    return gf_batch_delay_decide(&in);
}

/* A lone client sends its next frame only after the last one's result: it
 * arrives at most once per submission (plus its own turnaround), so its
 * one frame is the whole batch the rule asks for, whatever the costs. */
START_TEST(a_lone_client_never_waits) {
    const double fixed[] = {1 * US, 20 * US, 300 * US, 5000 * US};
    const double frame[] = {0, 0.1 * US, 10 * US, 2000 * US};
    const double turnaround[] = {0, 5 * US, 100 * US};
    for (unsigned c = 1; c <= 4; c++)
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
            for (size_t j = 0; j < sizeof frame / sizeof frame[0]; j++)
                for (size_t k = 0; k < sizeof turnaround / sizeof turnaround[0]; k++) {
                    double per_s = 1e9 / (fixed[i] + frame[j] + turnaround[k]);
                    gf_batch_delay_out o = decide(fixed[i], frame[j], per_s, 1, 64, c);
                    ck_assert_uint_eq(o.target_frames, 1);
                    ck_assert_uint_eq(o.wait_ns, 0);
                }
}
END_TEST

/* Nothing measured (no batch back, or no arrivals): no frame waits. */
START_TEST(nothing_measured_never_waits) {
    gf_batch_delay_out o = decide(0, 0, 1e6, 1, 64, 2);
    ck_assert_uint_eq(o.target_frames, 1);
    ck_assert_uint_eq(o.wait_ns, 0);
    o = decide(40 * US, 1 * US, 0, 1, 64, 2);
    ck_assert_uint_eq(o.target_frames, 1);
    ck_assert_uint_eq(o.wait_ns, 0);
}
END_TEST

/* 500k frames/s against 40 µs a submission and 1 µs a frame, two
 * submissions at once: 13 frames serve 2·13/53 = 0.49 frames/µs, short of
 * 0.5; 14 serve 2·14/54 = 0.52.  A batch of one waits for the 14th frame,
 * due 13 arrivals (26 µs) after its first; one of 14 goes at once. */
START_TEST(a_loaded_pipeline_waits_for_the_batch_that_keeps_up) {
    gf_batch_delay_out o = decide(40 * US, 1 * US, 500e3, 1, 64, 2);
    ck_assert_uint_eq(o.target_frames, 14);
    ck_assert_uint_eq(o.wait_ns, 26000);
    o = decide(40 * US, 1 * US, 500e3, 13, 64, 2);
    ck_assert_uint_eq(o.target_frames, 14);
    ck_assert_uint_eq(o.wait_ns, 26000); /* from the first frame, whatever came since */
    o = decide(40 * US, 1 * US, 500e3, 14, 64, 2);
    ck_assert_uint_eq(o.target_frames, 14);
    ck_assert_uint_eq(o.wait_ns, 0);
    /* One submission at a time needs 0.5·40 / (1 − 0.5) = 40 frames. */
    o = decide(40 * US, 1 * US, 500e3, 1, 64, 1);
    ck_assert_uint_eq(o.target_frames, 40);
    ck_assert_uint_eq(o.wait_ns, 78000);
    /* At most the pipeline's max_batch_frames. */
    o = decide(40 * US, 1 * US, 500e3, 1, 8, 1);
    ck_assert_uint_eq(o.target_frames, 8);
    ck_assert_uint_eq(o.wait_ns, 14000);
}
END_TEST

/* When each frame alone costs more than the arrivals leave (λ·b ≥ C), no
 * batch keeps up: the largest serves the most. */
START_TEST(an_overloaded_pipeline_waits_for_a_full_batch) {
    gf_batch_delay_out o = decide(40 * US, 5 * US, 500e3, 1, 64, 2);
    ck_assert_uint_eq(o.target_frames, 64);
    ck_assert_uint_eq(o.wait_ns, 126000); /* 63 arrivals of 2 µs */
    o = decide(40 * US, 5 * US, 500e3, 64, 64, 2);
    ck_assert_uint_eq(o.wait_ns, 0);
}
END_TEST

/* A slow trickle to a costly model: the wait stops at the configuration's
 * largest fixed delay. */
START_TEST(the_wait_is_bounded) {
    gf_batch_delay_out o = decide(10e9, 0, 100, 1, 64, 2);
    ck_assert_uint_eq(o.target_frames, 64);
    ck_assert_uint_eq(o.wait_ns, (uint64_t)GF_BATCH_DELAY_US_MAX * 1000);
}
END_TEST

/* The smallest n in [1, most] with C·n / (a + b·n) ≥ λ, by counting; most
 * when none. */
static uint32_t smallest_keeping_up(double a, double b, double per_s, uint32_t most, uint32_t c) {
    double lambda = per_s / 1e9;
    for (uint32_t n = 1; n <= most; n++)
        if (c * (double)n >= lambda * (a + b * n))
            return n;
    return most;
}

/* On a grid of costs and rates, the rule's batch is the one counting
 * finds, and its wait is when that batch's last frame is due. */
START_TEST(the_batch_is_the_smallest_that_keeps_up) {
    unsigned checked = 0, waited = 0;
    srand(35);
    for (int i = 0; i < 20000; i++) {
        double a = exp((rand() / (double)RAND_MAX) * 12) * 100;              /* 100 ns to 16 ms */
        double b = (rand() % 4 ? exp((rand() / (double)RAND_MAX) * 10) : 0); /* 0, 1 ns to 22 µs */
        double per_s = exp((rand() / (double)RAND_MAX) * 16);                /* 1 to 8.9 M/s */
        uint32_t most = 1 + (uint32_t)(rand() % 64), c = 1 + (uint32_t)(rand() % 3);
        uint32_t queued = 1 + (uint32_t)(rand() % most);
        gf_batch_delay_out o = decide(a, b, per_s, queued, most, c);
        uint32_t n = smallest_keeping_up(a, b, per_s, most, c);
        ck_assert_msg(o.target_frames == n, "a %g b %g rate %g most %u C %u: %u, counted %u", a, b,
                      per_s, most, c, o.target_frames, n);
        double wait = queued >= n ? 0 : (n - 1) / (per_s / 1e9);
        if (wait > GF_BATCH_DELAY_US_MAX * 1000.0)
            wait = GF_BATCH_DELAY_US_MAX * 1000.0;
        ck_assert_msg(fabs((double)o.wait_ns - wait) <= 1, "wait %llu, expected %.1f",
                      (unsigned long long)o.wait_ns, wait);
        checked++;
        waited += o.wait_ns > 0;
    }
    /* The grid holds both kinds of decision. */
    ck_assert_uint_gt(waited, 1000);
    ck_assert_uint_gt(checked - waited, 1000);
}
END_TEST

/* Batches that cost exactly a + b·n are fitted to a and b. */
START_TEST(the_cost_fit_finds_fixed_and_per_frame_costs) {
    gf_batch_delay d;
    memset(&d, 0, sizeof d);
    double a, b;
    gf_batch_delay_cost(&d, &a, &b);
    ck_assert(a == 0 && b == 0);
    for (int round = 0; round < 10; round++)
        for (uint32_t n = 1; n <= 16; n++)
            gf_batch_delay_completed(&d, n, 40000 + 1500 * (uint64_t)n);
    gf_batch_delay_cost(&d, &a, &b);
    ck_assert_double_eq_tol(a, 40000, 1e-3);
    ck_assert_double_eq_tol(b, 1500, 1e-6);
    /* One size only: the fit cannot split the cost, and takes it as fixed. */
    memset(&d, 0, sizeof d);
    for (int i = 0; i < 50; i++)
        gf_batch_delay_completed(&d, 8, 52000);
    gf_batch_delay_cost(&d, &a, &b);
    ck_assert_double_eq_tol(a, 52000, 1e-6);
    ck_assert(b == 0);
    /* Larger batches measured cheaper (noise): no negative per-frame cost. */
    memset(&d, 0, sizeof d);
    gf_batch_delay_completed(&d, 1, 30000);
    gf_batch_delay_completed(&d, 9, 20000);
    gf_batch_delay_cost(&d, &a, &b);
    const double keep = 1 - GF_BATCH_COST_FORGET; /* the older one's weight */
    ck_assert_double_eq_tol(a, (30000 * keep + 20000) / (keep + 1), 1e-6);
    ck_assert(b == 0);
    /* Costs that grow faster than the batch: no negative fixed cost. */
    memset(&d, 0, sizeof d);
    gf_batch_delay_completed(&d, 1, 1000);
    gf_batch_delay_completed(&d, 9, 18000);
    gf_batch_delay_cost(&d, &a, &b);
    ck_assert(a == 0);
    ck_assert_double_eq_tol(b, (1000 * keep + 18000) / (1 * keep + 9), 1e-6);
}
END_TEST

/* Older batches fade: after a change of cost the fit follows the new one. */
START_TEST(the_cost_fit_follows_a_change) {
    gf_batch_delay d;
    memset(&d, 0, sizeof d);
    for (int round = 0; round < 20; round++)
        for (uint32_t n = 1; n <= 8; n++)
            gf_batch_delay_completed(&d, n, 100000 + 1000 * (uint64_t)n);
    for (int round = 0; round < 40; round++)
        for (uint32_t n = 1; n <= 8; n++)
            gf_batch_delay_completed(&d, n, 10000 + 1000 * (uint64_t)n);
    double a, b;
    gf_batch_delay_cost(&d, &a, &b);
    /* (31/32)^320 of the old weight is left: 4e-5. */
    ck_assert_double_eq_tol(a, 10000, 10);
    ck_assert_double_eq_tol(b, 1000, 10);
}
END_TEST

/* A steady stream is measured at its rate; it fades once it stops. */
START_TEST(the_arrival_rate_follows_the_stream) {
    gf_batch_delay d;
    memset(&d, 0, sizeof d);
    uint64_t t = 1000000000ull;
    ck_assert(gf_batch_delay_rate(&d, t) == 0);
    /* One frame every 10 µs for 10 time constants. */
    for (int i = 0; i < 10000; i++, t += 10000)
        gf_batch_delay_arrived(&d, 1, t);
    ck_assert_double_eq_tol(gf_batch_delay_rate(&d, t - 10000), 100000, 100000 * 0.01);
    /* Bursts of 16 every 160 µs: the same rate. */
    for (int i = 0; i < 625; i++, t += 160000)
        gf_batch_delay_arrived(&d, 16, t);
    ck_assert_double_eq_tol(gf_batch_delay_rate(&d, t - 160000), 100000, 100000 * 0.1);
    /* 10 time constants later, e^-10 of it. */
    double later = gf_batch_delay_rate(&d, t + 10 * GF_BATCH_RATE_TAU_NS);
    ck_assert_double_lt(later, 100000 * 1.1 * exp(-10) * 2);
    /* An arrival stamped before the newest one still counts, undecayed. */
    double before = gf_batch_delay_rate(&d, t - 160000);
    gf_batch_delay_arrived(&d, 1, t - 500000);
    ck_assert_double_eq_tol(gf_batch_delay_rate(&d, t - 160000),
                            before + 1e9 / GF_BATCH_RATE_TAU_NS, 1e-6);
}
END_TEST

/* The measured state in, a due time out, and the decision kept for STATS. */
START_TEST(due_applies_the_rule_to_the_measurements) {
    gf_batch_delay d;
    memset(&d, 0, sizeof d);
    const uint64_t first = 2000000000ull;
    /* Nothing measured: due at once. */
    ck_assert_uint_eq(gf_batch_delay_due(&d, first, 1, 64, 2, first), first);
    for (int round = 0; round < 10; round++)
        for (uint32_t n = 1; n <= 16; n++)
            gf_batch_delay_completed(&d, n, 40000 + 1000 * (uint64_t)n);
    uint64_t t = first - 100000000ull;
    for (; t <= first; t += 2000) /* 500k frames/s */
        gf_batch_delay_arrived(&d, 1, t);
    uint64_t due = gf_batch_delay_due(&d, first, 1, 64, 2, first);
    ck_assert_uint_eq(d.last_out.target_frames, 14);
    ck_assert_uint_ge(due, first + 25000);
    ck_assert_uint_le(due, first + 27000);
    ck_assert_double_eq_tol(d.last_in.fixed_ns, 40000, 1e-3);
    ck_assert_double_eq_tol(d.last_in.frame_ns, 1000, 1e-6);
    ck_assert_double_eq_tol(d.last_in.arrivals_per_s, 500e3, 500e3 * 0.01);
    ck_assert_uint_eq(d.last_in.queued, 1);
    ck_assert_uint_eq(gf_batch_delay_due(&d, first, 14, 64, 2, first + 1000), first);
    ck_assert_uint_eq(d.last_out.wait_ns, 0);
    /* STATS shows the decision and its inputs. */
    cJSON *o = cJSON_CreateObject();
    gf_batch_delay_due(&d, first, 3, 64, 2, first);
    gf_batch_delay_to_json(&d, o);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "target_frames")->valueint, 14);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "queued_frames")->valueint, 3);
    ck_assert_double_eq(cJSON_GetObjectItem(o, "fixed_cost_ns")->valuedouble, 40000);
    ck_assert_double_eq(cJSON_GetObjectItem(o, "frame_cost_ns")->valuedouble, 1000);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(o, "arrivals_per_s")->valuedouble, 500e3, 5e3);
    ck_assert_double_eq(cJSON_GetObjectItem(o, "wait_ns")->valuedouble, (double)d.last_out.wait_ns);
    ck_assert_int_eq(cJSON_GetArraySize(o), 6);
    cJSON_Delete(o);
}
END_TEST

static Suite *batch_delay_suite(void) {
    Suite *s = suite_create("batch_delay");
    TCase *tc = tcase_create("rule");
    tcase_add_test(tc, a_lone_client_never_waits);
    tcase_add_test(tc, nothing_measured_never_waits);
    tcase_add_test(tc, a_loaded_pipeline_waits_for_the_batch_that_keeps_up);
    tcase_add_test(tc, an_overloaded_pipeline_waits_for_a_full_batch);
    tcase_add_test(tc, the_wait_is_bounded);
    tcase_add_test(tc, the_batch_is_the_smallest_that_keeps_up);
    suite_add_tcase(s, tc);
    tc = tcase_create("measurements");
    tcase_add_test(tc, the_cost_fit_finds_fixed_and_per_frame_costs);
    tcase_add_test(tc, the_cost_fit_follows_a_change);
    tcase_add_test(tc, the_arrival_rate_follows_the_stream);
    tcase_add_test(tc, due_applies_the_rule_to_the_measurements);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(batch_delay_suite());
}

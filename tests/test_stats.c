/* SPDX-License-Identifier: MIT */
/* Unit tests of the stats module (histogram, quantiles, rates) and of the
 * trace ring's GPU busy/overlap sweep, on hand-made data with exact answers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "stats.h"
#include "trace.h"

static uint64_t ph[GF_PHASE_COUNT];

static void answer(gf_stats *st, uint64_t e2e_ns) {
    memset(ph, 0, sizeof ph);
    ph[GF_PHASE_END_TO_END] = e2e_ns;
    gf_stats_frame_answered(st, 0, ph, 1u << GF_PHASE_END_TO_END);
}

START_TEST(histogram_buckets_are_inclusive_upper_bounds) {
    gf_stats st;
    ck_assert_int_eq(gf_stats_init(&st, 1, 0), 0);
    answer(&st, 1000);            /* <= 1 µs: bucket 0 */
    answer(&st, 1001);            /* bucket 1 (<= 2 µs) */
    answer(&st, 200000000000ull); /* above 100 s: overflow bucket */
    ck_assert_uint_eq(st.latency_counts[0], 1);
    ck_assert_uint_eq(st.latency_counts[1], 1);
    ck_assert_uint_eq(st.latency_counts[GF_LATENCY_BOUNDS], 1);
    ck_assert_uint_eq(st.latency_sum_ns, 1000 + 1001 + 200000000000ull);
    ck_assert_uint_eq(st.latency_max_ns, 200000000000ull);
    ck_assert_uint_eq(st.pipelines[0].phase[GF_PHASE_END_TO_END].count, 3);
    ck_assert_uint_eq(st.pipelines[0].phase[GF_PHASE_H2D].count, 0);
    gf_stats_free(&st);
}
END_TEST

/* Frames per submission land in buckets 1, 2, 3-4, ..., 33-64 (each bound
 * inclusive), with their frames and wait added up, per pipeline; and the
 * shards' stats add them by pipeline name. */
START_TEST(batches_count_frames_per_submission) {
    gf_stats st, other;
    ck_assert_int_eq(gf_stats_init(&st, 2, 0), 0);
    ck_assert_int_eq(gf_stats_init(&other, 2, 0), 0);
    static const uint32_t sizes[] = {1, 2, 3, 4, 5, 16, 17, 64};
    static const unsigned bucket[] = {0, 1, 2, 2, 3, 4, 5, 6};
    uint64_t frames = 0;
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        gf_stats_submitted(&st, 1, sizes[i], 1000u * sizes[i]);
        frames += sizes[i];
    }
    gf_stats_submitted(&st, 2, 7, 1); /* no such pipeline: not counted */
    gf_stats_submitted(&st, 0, 0, 1); /* no frame: not a batch */
    const gf_pipeline_stats *p = &st.pipelines[1];
    ck_assert_uint_eq(p->submissions, 8);
    ck_assert_uint_eq(p->submitted_frames, frames);
    ck_assert_uint_eq(p->batch_wait_ns, 1000u * frames);
    uint64_t want[GF_BATCH_BUCKETS] = {0};
    for (unsigned i = 0; i < sizeof bucket / sizeof bucket[0]; i++)
        want[bucket[i]]++;
    for (unsigned k = 0; k < GF_BATCH_BUCKETS; k++)
        ck_assert_uint_eq(p->batch_counts[k], want[k]);
    ck_assert_uint_eq(st.pipelines[0].submissions, 0);
    /* Another shard's, its pipelines in another order: added by name. */
    gf_pipeline names[2];
    memset(names, 0, sizeof names);
    snprintf(names[0].name, sizeof names[0].name, "a");
    snprintf(names[1].name, sizeof names[1].name, "b");
    static const char other_names[2][GF_PIPELINE_NAME_MAX] = {"b", "a"};
    gf_stats_submitted(&other, 0, 64, 5); /* "b" there */
    gf_stats_add(&st, names, &other, other_names);
    ck_assert_uint_eq(st.pipelines[1].submissions, 9);
    ck_assert_uint_eq(st.pipelines[1].batch_counts[6], 2);
    ck_assert_uint_eq(st.pipelines[1].batch_wait_ns, 1000u * frames + 5);
    gf_stats_free(&st);
    gf_stats_free(&other);
}
END_TEST

START_TEST(quantiles_interpolate_within_a_bucket_and_cap_at_max) {
    gf_stats st;
    ck_assert_int_eq(gf_stats_init(&st, 1, 0), 0);
    ck_assert_uint_eq(gf_stats_latency_quantile(&st, 0.5), 0);
    /* 100 frames in (10 µs, 20 µs]: bucket bounds 10000..20000. */
    for (int i = 0; i < 100; i++)
        answer(&st, 15000);
    /* rank 50 of 100 in a bucket spanning 10000 ns: 10000 + 0.5 * 10000,
     * then capped at the largest latency seen (15000). */
    ck_assert_uint_eq(gf_stats_latency_quantile(&st, 0.5), 15000);
    ck_assert_uint_eq(gf_stats_latency_quantile(&st, 0.25), 12500);
    answer(&st, 40000); /* one in (20 µs, 50 µs] */
    ck_assert_uint_eq(gf_stats_latency_quantile(&st, 1.0), 40000);
    ck_assert_uint_eq(gf_stats_latency_quantile(&st, 0.25), 12525); /* rank 25.25 */
    gf_stats_free(&st);
}
END_TEST

START_TEST(rates_over_one_and_ten_seconds) {
    gf_stats st;
    double fps, in, out, busy;
    const uint64_t s1 = 1000000000ull;
    ck_assert_int_eq(gf_stats_init(&st, 1, 0), 0);
    gf_stats_rates(&st, s1, 5 * s1, 0, &fps, &in, &out, &busy);
    ck_assert(fps == 0.0 && busy == 0.0);
    for (uint64_t s = 0; s <= 12; s++) {
        st.frames_answered = 100 * s * s; /* accelerating */
        st.bytes_in = 1000 * s;
        st.bytes_out = 2000 * s;
        gf_stats_sample(&st, s * s1, s * 750000000ull); /* idle 75 % */
    }
    /* Half a second after the last sample, 50 more frames, loop idle all along. */
    st.frames_answered += 50;
    uint64_t now = 12 * s1 + s1 / 2, idle = 12 * 750000000ull + s1 / 2;
    gf_stats_rates(&st, s1, now, idle, &fps, &in, &out, &busy);
    /* From the sample at 11 s: (14450 - 12100) frames over 1.5 s. */
    ck_assert_double_eq_tol(fps, (14450.0 - 12100.0) / 1.5, 1e-6);
    ck_assert_double_eq_tol(in, 1000.0 / 1.5, 1e-9);
    ck_assert_double_eq_tol(out, 2000.0 / 1.5, 1e-9);
    ck_assert_double_eq_tol(busy, 1.0 - (0.75 + 0.5) / 1.5, 1e-12);
    gf_stats_rates(&st, 10 * s1, now, idle, &fps, &in, &out, &busy);
    ck_assert_double_eq_tol(fps, (14450.0 - 400.0) / 10.5, 1e-6); /* from the sample at 2 s */
    /* Right after start: the span since the first sample. */
    gf_stats st2;
    ck_assert_int_eq(gf_stats_init(&st2, 1, 0), 0);
    gf_stats_sample(&st2, 0, 0);
    st2.frames_answered = 30;
    gf_stats_rates(&st2, s1, s1 / 10, 0, &fps, &in, &out, &busy);
    ck_assert_double_eq_tol(fps, 300.0, 1e-9);
    ck_assert_double_eq_tol(busy, 1.0, 1e-12);
    gf_stats_free(&st2);
    gf_stats_free(&st);
}
END_TEST

static gf_trace_rec frame(uint64_t id, uint64_t h2d_b, uint64_t h2d_e, uint64_t k_e, uint64_t d_e) {
    gf_trace_rec r = {.frame_id = id, .submitted_ns = h2d_b};
    r.stages = (gf_stage_times){.h2d_begin_ns = h2d_b,
                                .h2d_end_ns = h2d_e,
                                .kernel_begin_ns = h2d_e,
                                .kernel_end_ns = k_e,
                                .d2h_begin_ns = k_e,
                                .d2h_end_ns = d_e,
                                .gpu_done_ns = d_e,
                                .timed = 1};
    return r;
}

START_TEST(gpu_busy_and_overlap_from_intervals) {
    gf_trace t;
    gf_gpu_busy b;
    ck_assert_int_eq(gf_trace_init(&t, 8), 0);
    gf_trace_rec a = frame(1, 1000, 1100, 1150, 1250);
    gf_trace_rec c = frame(2, 1200, 1300, 1310, 1400);
    gf_trace_push(&t, &a);
    gf_trace_push(&t, &c);
    ck_assert_int_eq(gf_trace_gpu_busy(&t, 1400, 400, &b), 0);
    ck_assert_uint_eq(b.window_ns, 400);
    ck_assert_uint_eq(b.frames, 2);
    ck_assert_double_eq_tol(b.h2d, 200.0 / 400, 1e-12);
    ck_assert_double_eq_tol(b.kernel, 60.0 / 400, 1e-12);
    ck_assert_double_eq_tol(b.d2h, 190.0 / 400, 1e-12);
    /* copies: [1000,1100] + [1150,1300] + [1310,1400] */
    ck_assert_double_eq_tol(b.copy, 340.0 / 400, 1e-12);
    ck_assert_double_eq_tol(b.compute, 60.0 / 400, 1e-12);
    /* frame 2's H2D [1200,1300] runs during frame 1's D2H [1150,1250]. */
    ck_assert_double_eq_tol(b.overlap, 50.0 / 400, 1e-12);
    /* A window that cuts frame 1: [1200, 1400]. */
    ck_assert_int_eq(gf_trace_gpu_busy(&t, 1400, 200, &b), 0);
    ck_assert_double_eq_tol(b.d2h, (50.0 + 90.0) / 200, 1e-12);
    ck_assert_double_eq_tol(b.overlap, 50.0 / 200, 1e-12);
    gf_trace_free(&t);
    ck_assert_int_eq(gf_trace_init(&t, 0), 0);
    ck_assert_int_eq(gf_trace_gpu_busy(&t, 1400, 400, &b), -1);
    gf_trace_free(&t);
}
END_TEST

START_TEST(ring_keeps_the_newest_oldest_first) {
    gf_trace t;
    ck_assert_int_eq(gf_trace_init(&t, 2), 0);
    for (uint64_t i = 1; i <= 3; i++) {
        gf_trace_rec r = frame(i, 100 * i, 100 * i + 10, 100 * i + 20, 100 * i + 30);
        gf_trace_push(&t, &r);
    }
    cJSON *all = gf_trace_frames_json(&t, 0, 50);
    ck_assert_int_eq(cJSON_GetArraySize(all), 2);
    ck_assert_int_eq((int)cJSON_GetObjectItem(cJSON_GetArrayItem(all, 0), "frame_id")->valuedouble,
                     2);
    cJSON *h2d = cJSON_GetObjectItem(cJSON_GetArrayItem(all, 1), "h2d");
    ck_assert_double_eq(cJSON_GetArrayItem(h2d, 0)->valuedouble, 300 - 50);
    ck_assert_double_eq(cJSON_GetArrayItem(h2d, 1)->valuedouble, 310 - 50);
    cJSON_Delete(all);
    cJSON *last = gf_trace_frames_json(&t, 1, 0);
    ck_assert_int_eq(cJSON_GetArraySize(last), 1);
    ck_assert_int_eq((int)cJSON_GetObjectItem(cJSON_GetArrayItem(last, 0), "frame_id")->valuedouble,
                     3);
    cJSON_Delete(last);
    /* The ring wrapped: the window starts at its oldest frame (200). */
    gf_gpu_busy b;
    ck_assert_int_eq(gf_trace_gpu_busy(&t, 400, 1000, &b), 0);
    ck_assert_uint_eq(b.window_ns, 200);
    gf_trace_free(&t);
}
END_TEST

static Suite *stats_suite(void) {
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, histogram_buckets_are_inclusive_upper_bounds);
    tcase_add_test(tc, batches_count_frames_per_submission);
    tcase_add_test(tc, quantiles_interpolate_within_a_bucket_and_cap_at_max);
    tcase_add_test(tc, rates_over_one_and_ten_seconds);
    tcase_add_test(tc, gpu_busy_and_overlap_from_intervals);
    tcase_add_test(tc, ring_keeps_the_newest_oldest_first);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(stats_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Scheduling for inference through a real gpuframed (issue 35): the "auto"
 * batch delay as STATS shows it.  The engine comes from GF_TEST_ENGINE
 * (cpu or cuda).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

/* Per-test limit of Check. */
#define TEST_TIMEOUT_S 120
#define FRAME_BYTES    4096

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */

/* Pipeline 0 picks its wait; pipeline 1 has a fixed one. */
static const char auto_json[] =
    "{\"slots\": 2, \"pipelines\": ["
    "{\"name\": \"auto\", \"kind\": \"echo\", \"max_batch_delay_us\": \"auto\"},"
    "{\"name\": \"fixed\", \"kind\": \"echo\", \"max_batch_delay_us\": 30}]}";

/* pipelines[id].batches of a STATS document. */
static const cJSON *batches_of(const cJSON *st, int id) {
    const cJSON *b = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(st, "pipelines"), id), "batches");
    ck_assert_ptr_nonnull(b);
    return b;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    return v->valuedouble;
}

/* A lone client at window 1 never waits for a batch: its shard decided on
 * one frame and no wait, from a measured cost and arrival rate, while the
 * other shards decided nothing.  Clients at window 8 all get their exact
 * results; every shard that served them shows a decision within bounds.
 * The fixed pipeline says its delay and has no "auto". */
START_TEST(auto_batch_delay_in_stats) {
    gf_test_daemon d;
    gf_test_ck_daemon_start(&d, auto_json, g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count;
    gf_pipeline *p = gf_test_ck_list(c, &count);
    ck_assert_uint_eq(count, 2);
    gf_test_stream s = {.pipeline = &p[0],
                        .frame_bytes = FRAME_BYTES,
                        .frame_count = 400,
                        .window = 1,
                        .first_frame_id = 1};
    gf_test_ck_stream(c, &s);

    cJSON *st = gf_test_ck_stats(c);
    const cJSON *b = batches_of(st, 0);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b, "delay_us")), "auto");
    const cJSON *shards = cJSON_GetObjectItem(b, "auto");
    uint64_t shard_count = gf_test_ck_u64(st, "shard_count");
    ck_assert_int_eq(cJSON_GetArraySize(shards), (int)shard_count);
    unsigned served = 0;
    for (int k = 0; k < cJSON_GetArraySize(shards); k++) {
        const cJSON *e = cJSON_GetArrayItem(shards, k);
        ck_assert_int_eq((int)num(e, "shard"), k);
        if (num(e, "arrivals_per_s") == 0) {
            ck_assert(num(e, "target_frames") == 0 && num(e, "fixed_cost_ns") == 0);
            continue;
        }
        served++;
        ck_assert_double_eq(num(e, "wait_ns"), 0);
        ck_assert_double_eq(num(e, "target_frames"), 1);
        ck_assert_double_eq(num(e, "queued_frames"), 1);
        ck_assert_double_gt(num(e, "fixed_cost_ns"), 0);
        ck_assert_double_eq(num(e, "frame_cost_ns"), 0); /* one batch size: all fixed */
    }
    ck_assert_uint_eq(served, 1);
    const cJSON *fixed = batches_of(st, 1);
    ck_assert_double_eq(num(fixed, "delay_us"), 30);
    ck_assert_ptr_null(cJSON_GetObjectItem(fixed, "auto"));
    cJSON_Delete(st);

    char err[512];
    s.window = 8;
    s.frame_count = 300;
    ck_assert_msg(gf_test_streams_parallel(d.socket_path, 6, &s, err, sizeof err) == 0, "%s", err);
    s.pipeline = &p[1];
    ck_assert_msg(gf_test_streams_parallel(d.socket_path, 3, &s, err, sizeof err) == 0, "%s", err);
    st = gf_test_ck_stats(c);
    shards = cJSON_GetObjectItem(batches_of(st, 0), "auto");
    for (int k = 0; k < cJSON_GetArraySize(shards); k++) {
        const cJSON *e = cJSON_GetArrayItem(shards, k);
        if (num(e, "arrivals_per_s") == 0)
            continue;
        ck_assert_double_ge(num(e, "target_frames"), 1);
        ck_assert_double_le(num(e, "target_frames"), 64);
        ck_assert_double_le(num(e, "wait_ns"), 100000.0 * 1000);
        ck_assert_double_gt(num(e, "fixed_cost_ns") + num(e, "frame_cost_ns"), 0);
    }
    ck_assert_uint_eq(gf_test_ck_u64(st, "frames.answered"), 400 + 6 * 300 + 3 * 300);
    cJSON_Delete(st);
    free(p);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}
END_TEST

static Suite *sched_live_suite(void) {
    Suite *s = suite_create("sched_live");
    TCase *tc = tcase_create("batch_delay");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, auto_batch_delay_in_stats);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(sched_live_suite());
}

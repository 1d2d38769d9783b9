/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of device planning (daemon/shard_plan.h): how many shards a
 * configuration gets on how many devices and cores, on which device each
 * runs, and the plugins' stream indices each is given, with the refusals
 * named.  No device is touched: the devices visible and the cores are
 * arguments.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "runner.h"
#include "shard_plan.h"

enum { SLOTS = 2 };

/* A configuration of `slots` SLOTS, 1 MiB frames (4 MiB pinned per shard
 * with echo's output), the given shards, devices and pinned cap, and an
 * echo pipeline limited to `pipeline_devices` ("" for none). */
static void config(gf_config *cfg, unsigned shards, const char *devices, unsigned long pinned_cap,
                   const char *pipeline_devices) {
    char json[1024], pdev[64] = "", err[512];
    if (pipeline_devices[0])
        snprintf(pdev, sizeof pdev, ", \"devices\": \"%s\"", pipeline_devices);
    snprintf(json, sizeof json,
             "{\"slots\": %d, \"max_frame_bytes\": 1048576, \"shards\": %u, \"devices\": \"%s\", "
             "\"max_pinned_bytes\": %lu, \"pipelines\": [{\"name\": \"e\", \"kind\": "
             "\"echo\"%s}]}",
             SLOTS, shards, devices, pinned_cap, pdev);
    ck_assert_msg(gf_config_parse(json, cfg, err, sizeof err) == 0, "%s: %s", json, err);
}

/* Asserts place k of `p`: its device, first stream and the device's streams. */
static void check_place(const gf_shard_place *p, uint32_t k, enum gf_engine_choice engine,
                        int device, uint32_t stream_base, uint32_t device_streams) {
    ck_assert_uint_eq(p[k].index, k);
    ck_assert_int_eq(p[k].engine, engine);
    ck_assert_int_eq(p[k].device, device);
    ck_assert_uint_eq(p[k].stream_base, stream_base);
    ck_assert_uint_eq(p[k].device_streams, device_streams);
}

#define MIB (1024ul * 1024)

START_TEST(cpu_engine_runs_one_shard_on_no_device) {
    gf_config cfg;
    gf_shard_place *p;
    config(&cfg, 0, "all", 0, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CPU, 0, 16, &p), 1);
    check_place(p, 0, GF_ENGINE_CPU, -1, 0, SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(cpu_engine_numbers_shards_as_the_listed_devices) {
    gf_config cfg;
    gf_shard_place *p;
    config(&cfg, 4, "0,1", 0, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CPU, 0, 16, &p), 4);
    check_place(p, 0, GF_ENGINE_CPU, 0, 0, 2 * SLOTS);
    check_place(p, 1, GF_ENGINE_CPU, 1, 0, 2 * SLOTS);
    check_place(p, 2, GF_ENGINE_CPU, 0, SLOTS, 2 * SLOTS);
    check_place(p, 3, GF_ENGINE_CPU, 1, SLOTS, 2 * SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(auto_is_one_per_core_at_most_eight_per_device) {
    gf_config cfg;
    gf_shard_place *p;
    config(&cfg, 0, "all", 0, "");
    /* 16 cores, 2 devices: 8 each, alternating. */
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 2, 16, &p), 16);
    for (uint32_t k = 0; k < 16; k++)
        check_place(p, k, GF_ENGINE_CUDA, (int)(k % 2), (k / 2) * SLOTS, 8 * SLOTS);
    free(p);
    /* 64 cores still 8 per device; 3 cores on 2 devices one each. */
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 2, 64, &p), 16);
    free(p);
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 2, 3, &p), 2);
    check_place(p, 0, GF_ENGINE_CUDA, 0, 0, SLOTS);
    check_place(p, 1, GF_ENGINE_CUDA, 1, 0, SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(auto_stays_within_max_pinned_bytes) {
    gf_config cfg;
    gf_shard_place *p;
    /* 4 MiB a shard, 16 MiB in all: 2 per device on 2 devices. */
    config(&cfg, 0, "all", 16 * MIB, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 2, 16, &p), 4);
    for (uint32_t k = 0; k < 4; k++)
        check_place(p, k, GF_ENGINE_CUDA, (int)(k % 2), (k / 2) * SLOTS, 2 * SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(uneven_shards_share_their_devices_streams) {
    gf_config cfg;
    gf_shard_place *p;
    config(&cfg, 3, "all", 0, "");
    /* Device 0 runs shards 0 and 2, device 1 shard 1 alone. */
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 2, 16, &p), 3);
    check_place(p, 0, GF_ENGINE_CUDA, 0, 0, 2 * SLOTS);
    check_place(p, 1, GF_ENGINE_CUDA, 1, 0, SLOTS);
    check_place(p, 2, GF_ENGINE_CUDA, 0, SLOTS, 2 * SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(fewer_shards_than_devices_use_the_first) {
    gf_config cfg;
    gf_shard_place *p;
    config(&cfg, 1, "2,3", 0, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 4, 16, &p), 1);
    check_place(p, 0, GF_ENGINE_CUDA, 2, 0, SLOTS);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(refusals) {
    gf_config cfg;
    gf_shard_place *p = NULL;
    /* A device that is not visible. */
    config(&cfg, 0, "1", 0, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 1, 16, &p), -1);
    gf_config_free(&cfg);
    /* One shard on each of 8 devices passes max_pinned_bytes (8 x 4 MiB >
     * 16 MiB; the configuration alone asks for 1 x 4 MiB). */
    config(&cfg, 0, "all", 16 * MIB, "");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 8, 16, &p), -1);
    gf_config_free(&cfg);
    /* A pipeline limited to a device no shard runs on. */
    config(&cfg, 0, "0,1", 0, "3");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 4, 16, &p), -1);
    gf_config_free(&cfg);
    ck_assert_ptr_null(p);
    /* ...and one that a shard runs. */
    config(&cfg, 0, "0,1", 0, "1");
    ck_assert_int_eq(gf_shard_plan(&cfg, GF_ENGINE_CUDA, 4, 2, &p), 2);
    free(p);
    gf_config_free(&cfg);
}
END_TEST

static Suite *shard_plan_suite(void) {
    Suite *s = suite_create("shard_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, cpu_engine_runs_one_shard_on_no_device);
    tcase_add_test(tc, cpu_engine_numbers_shards_as_the_listed_devices);
    tcase_add_test(tc, auto_is_one_per_core_at_most_eight_per_device);
    tcase_add_test(tc, auto_stays_within_max_pinned_bytes);
    tcase_add_test(tc, uneven_shards_share_their_devices_streams);
    tcase_add_test(tc, fewer_shards_than_devices_use_the_first);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(shard_plan_suite());
}

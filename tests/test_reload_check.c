/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a reload's check (daemon/reload_check.h): from the limits
 * copied at start-up alone, what of a new configuration applies, what keeps
 * its running value, and the one note that says so.  The cpu engine's
 * prepare stands for the devices' (it checks every stage has a C
 * reference), so nothing here needs a GPU or a running shard.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "reload_check.h"
#include "runner.h"

#define ECHO   "{\"name\": \"echo\", \"kind\": \"echo\"}"
#define AFFINE "{\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 3.0, \"b\": 1.0}}"
/* Two stages: an intermediate result the slots' scratch must hold. */
#define TWICE                                                                                      \
    "{\"name\": \"twice\", \"stages\": [{\"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": "   \
    "0.0}}, {\"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.0}}]}"

static gf_config cur, next;
static gf_reload_limits lim;
static char note[1024];

/* The running configuration (slots 2, 1 MiB frames, `pipelines`) and the
 * limits of two cpu shards numbered as devices 0 and 1, opened with it. */
static void start(const char *pipelines) {
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"slots\": 2, \"max_frame_bytes\": 1048576, \"devices\": \"0,1\", \"pipelines\": "
             "[%s]}",
             pipelines);
    ck_assert_msg(gf_config_parse(json, &cur, err, sizeof err) == 0, "%s", err);
    gf_shard_place places[2] = {{.index = 0, .engine = GF_ENGINE_CPU, .device = 0},
                                {.index = 1, .engine = GF_ENGINE_CPU, .device = 1}};
    gf_reload_limits_init(&lim, &cur, places, 2);
}

/* Loads `json` as the next configuration and checks it. */
static void check(const char *json) {
    char err[512];
    ck_assert_msg(gf_config_parse(json, &next, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(gf_reload_check(&lim, &cur, &next, note, sizeof note), 0);
}

static void done(void) {
    gf_config_free(&next);
    gf_config_free(&cur);
}

START_TEST(limits_are_the_start_up_configurations) {
    start(ECHO);
    ck_assert_uint_eq(lim.in_capacity_bytes, 1048576);
    ck_assert_uint_eq(lim.out_capacity_bytes, gf_config_max_output_bytes(&cur));
    ck_assert_uint_eq(lim.scratch_capacity_bytes, 0);
    ck_assert_uint_eq(lim.shard_count, 2);
    ck_assert_int_eq(lim.places[1].device, 1);
    gf_config_free(&cur);
}
END_TEST

START_TEST(what_fits_applies_with_no_note) {
    start(ECHO);
    check("{\"slots\": 2, \"max_frame_bytes\": 65536, \"devices\": \"0,1\", \"pipelines\": "
          "[" ECHO ", " AFFINE "]}");
    ck_assert_str_eq(note, "");
    ck_assert_uint_eq(next.pipeline_count, 2);
    ck_assert_str_eq(next.pipelines[1].name, "affine");
    ck_assert_uint_eq(next.max_frame_bytes, 65536);
    done();
}
END_TEST

/* Pipelines that need buffers the slots do not have: the running ones
 * stay, in `next` itself, and the note says a restart is needed. */
START_TEST(pipelines_beyond_the_slots_keep_the_running_ones) {
    start(ECHO ", " AFFINE);
    check("{\"slots\": 2, \"max_frame_bytes\": 1048576, \"devices\": \"0,1\", \"pipelines\": "
          "[" TWICE "]}");
    /* Both 1 MiB frames' sizes: out as before, a scratch the slots lack. */
    ck_assert_str_eq(note, "needs a restart: the new pipelines need slot buffers of 1048576 bytes "
                           "out and 1048576 of scratch, the daemon started with 1048576 and 0: "
                           "restart to run them; the running pipelines stay");
    ck_assert_uint_eq(next.pipeline_count, 2);
    ck_assert_str_eq(next.pipelines[0].name, "echo");
    ck_assert_str_eq(next.pipelines[1].name, "affine");
    ck_assert_float_eq(next.pipelines[1].stages[0].params.a, 3.0f);
    done();
}
END_TEST

/* A restart key keeps its running value; a frame size beyond the slots'
 * too; what else changed applies. */
START_TEST(restart_keys_and_larger_frames_keep_their_running_value) {
    start(ECHO);
    check("{\"slots\": 4, \"max_frame_bytes\": 2097152, \"devices\": \"0,1\", \"log_level\": "
          "\"debug\", \"pipelines\": [" ECHO "]}");
    ck_assert_str_eq(note, "needs a restart: slots 2 -> 4, max_frame_bytes 2097152 above the "
                           "slots' 1048576");
    ck_assert_uint_eq(next.slot_count, 2);
    ck_assert_uint_eq(next.max_frame_bytes, 1048576);
    ck_assert_int_eq(next.log_level, GF_LOG_DEBUG);
    done();
}
END_TEST

/* A pipeline limited to a device no shard runs on: the running ones stay. */
START_TEST(a_pipeline_on_no_shards_device_keeps_the_running_ones) {
    start(ECHO);
    check("{\"slots\": 2, \"max_frame_bytes\": 1048576, \"devices\": \"0,1\", \"pipelines\": "
          "[{\"name\": \"far\", \"kind\": \"echo\", \"devices\": \"3\"}]}");
    ck_assert_str_eq(note, "needs a restart: pipeline far: devices \"3\": no shard runs on them: "
                           "the running pipelines stay");
    ck_assert_uint_eq(next.pipeline_count, 1);
    ck_assert_str_eq(next.pipelines[0].name, "echo");
    done();
}
END_TEST

static Suite *reload_check_suite(void) {
    Suite *s = suite_create("reload_check");
    TCase *tc = tcase_create("check");
    tcase_add_test(tc, limits_are_the_start_up_configurations);
    tcase_add_test(tc, what_fits_applies_with_no_note);
    tcase_add_test(tc, pipelines_beyond_the_slots_keep_the_running_ones);
    tcase_add_test(tc, restart_keys_and_larger_frames_keep_their_running_value);
    tcase_add_test(tc, a_pipeline_on_no_shards_device_keeps_the_running_ones);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(reload_check_suite());
}

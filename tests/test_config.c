/* SPDX-License-Identifier: MIT */
/*
 * Check suite of daemon/config.c: the default config file, every kind of
 * error a config can carry (each must name its key path), parameter parsing,
 * the LIST reply's round trip through JSON text, and the key table behind
 * command-line flags, reloads and config/README.md.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "runner.h"

#ifndef GF_TEST_CONFIG_DIR
#define GF_TEST_CONFIG_DIR "config"
#endif

/* Big enough for any error the module writes. */
#define ERR_BYTES 512

/* One pipeline that makes an otherwise minimal config valid. */
#define ECHO_PIPELINES "\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]"

/* The parameters `kind` gets by default, with every other field zero: the
 * baseline that parsed parameters are compared to with memcmp. */
static gf_params default_params(const char *kind_name) {
    const gf_pipeline_kind *kind = gf_pipeline_kind_find(kind_name);
    gf_params p;

    ck_assert_ptr_nonnull(kind);
    memset(&p, 0, sizeof p);
    gf_params_defaults(kind, &p);
    return p;
}

static void assert_pipeline(const gf_pipeline *p, uint32_t id, const char *name, const char *kind,
                            const gf_params *want) {
    ck_assert_uint_eq(p->id, id);
    ck_assert_str_eq(p->name, name);
    ck_assert_ptr_eq(p->stages[0].kind, gf_pipeline_kind_find(kind));
    ck_assert_str_eq(p->stages[0].kind->name, kind);
    ck_assert_msg(memcmp(&p->stages[0].params, want, sizeof *want) == 0, "params of %s differ",
                  name);
}

static void assert_empty(const gf_config *cfg) {
    ck_assert_ptr_null(cfg->pipelines);
    ck_assert_uint_eq(cfg->pipeline_count, 0);
}

/* ---- the default file ------------------------------------------------------- */

START_TEST(default_file_parses_to_documented_values) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    gf_params want;

    ck_assert_msg(
        gf_config_load_file(GF_TEST_CONFIG_DIR "/gpuframed.json", &cfg, err, sizeof err) == 0, "%s",
        err);
    ck_assert_str_eq(cfg.socket_path, "/run/gpuframed.sock");
    ck_assert_int_eq(cfg.engine, GF_ENGINE_AUTO);
    ck_assert_uint_eq(cfg.slot_count, 2);
    ck_assert_uint_eq(cfg.max_frame_bytes, 16777216);
    ck_assert_uint_eq(cfg.frame_timeout_ms, 10000);
    ck_assert_int_eq(cfg.log_level, GF_LOG_INFO);
    ck_assert_uint_eq(cfg.pipeline_count, 4);

    want = default_params("echo");
    assert_pipeline(&cfg.pipelines[0], 0, "echo", "echo", &want);

    want = default_params("affine");
    want.a = 2.0f;
    want.b = 0.5f;
    assert_pipeline(&cfg.pipelines[1], 1, "affine", "affine", &want);

    want = default_params("sincos");
    want.iters = 16;
    assert_pipeline(&cfg.pipelines[2], 2, "sincos", "sincos", &want);

    /* (float)0.485 rounds as the parser does: text -> double -> float. */
    want = default_params("normalize_u8");
    want.width = 1920;
    want.height = 1080;
    want.mean[0] = (float)0.485;
    want.mean[1] = (float)0.456;
    want.mean[2] = (float)0.406;
    want.std[0] = (float)0.229;
    want.std[1] = (float)0.224;
    want.std[2] = (float)0.225;
    assert_pipeline(&cfg.pipelines[3], 3, "normalize_u8", "normalize_u8", &want);

    gf_config_free(&cfg);
    assert_empty(&cfg);
    gf_config_free(&cfg); /* safe on an empty config */
}
END_TEST

START_TEST(absent_keys_take_defaults) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    gf_params want = default_params("normalize_u8");

    ck_assert_msg(gf_config_parse("{\"pipelines\": [{\"name\": \"n\", \"kind\": "
                                  "\"normalize_u8\", \"params\": {}}]}",
                                  &cfg, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(cfg.socket_path, "/run/gpuframed.sock");
    ck_assert_int_eq(cfg.engine, GF_ENGINE_AUTO);
    ck_assert_uint_eq(cfg.slot_count, GF_SLOTS_DEFAULT);
    ck_assert_uint_eq(cfg.max_frame_bytes, 16777216);
    ck_assert_uint_eq(cfg.frame_timeout_ms, 10000);
    ck_assert_int_eq(cfg.log_level, GF_LOG_INFO);
    ck_assert_uint_eq(cfg.pipeline_count, 1);
    assert_pipeline(&cfg.pipelines[0], 0, "n", "normalize_u8", &want);
    ck_assert_uint_eq(cfg.pipelines[0].devices, 0); /* every device */
    ck_assert_uint_eq(cfg.pipelines[0].max_batch_frames, GF_BATCH_FRAMES_MAX);
    ck_assert_uint_eq(cfg.pipelines[0].max_batch_delay_us, 0);
    gf_config_free(&cfg);
}
END_TEST

/* A pipeline's batching keys, each pipeline its own. */
START_TEST(pipeline_batching_keys_parse) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    ck_assert_msg(
        gf_config_parse("{\"pipelines\": [{\"name\": \"a\", \"kind\": \"echo\", "
                        "\"max_batch_frames\": 7, \"max_batch_delay_us\": 250}, "
                        "{\"name\": \"b\", \"kind\": \"echo\", \"max_batch_frames\": 1}]}",
                        &cfg, err, sizeof err) == 0,
        "%s", err);
    ck_assert_uint_eq(cfg.pipelines[0].max_batch_frames, 7);
    ck_assert_uint_eq(cfg.pipelines[0].max_batch_delay_us, 250);
    ck_assert_uint_eq(cfg.pipelines[1].max_batch_frames, 1);
    ck_assert_uint_eq(cfg.pipelines[1].max_batch_delay_us, 0);
    gf_config_free(&cfg);
}
END_TEST

/* "shard_cpus": auto by default, none, or a CPU list kept as written. */
START_TEST(shard_cpus_parse) {
    static const char *const ok[] = {"auto", "none", "0-15,32-47", "7"};
    gf_config cfg;
    char err[ERR_BYTES] = "", json[256];
    ck_assert_msg(gf_config_parse("{" ECHO_PIPELINES "}", &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(cfg.shard_cpus, "auto");
    gf_config_free(&cfg);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(json, sizeof json, "{\"shard_cpus\": \"%s\", " ECHO_PIPELINES "}", ok[i]);
        ck_assert_msg(gf_config_parse(json, &cfg, err, sizeof err) == 0, "%s: %s", ok[i], err);
        ck_assert_str_eq(cfg.shard_cpus, ok[i]);
        gf_config_free(&cfg);
    }
}
END_TEST

/* "priorities": a connection's class from its uid or primary gid, else the
 * default; a frame gets that class or the lower one it names.  Absent:
 * everyone normal, naming realtime included. */
START_TEST(priorities_parse_and_cap) {
    gf_config cfg;
    char err[ERR_BYTES] = "";
    ck_assert_msg(gf_config_parse("{" ECHO_PIPELINES "}", &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(gf_priority_of(&cfg.priorities, 1000, 44, GF_CLASS_DEFAULT), GF_CLASS_NORMAL);
    ck_assert_uint_eq(gf_priority_of(&cfg.priorities, 1000, 44, GF_CLASS_REALTIME),
                      GF_CLASS_NORMAL);
    ck_assert_uint_eq(gf_priority_of(&cfg.priorities, 1000, 44, GF_CLASS_BATCH), GF_CLASS_BATCH);
    gf_config_free(&cfg);
    ck_assert_msg(gf_config_parse(
                      "{\"priorities\": {\"realtime\": {\"uids\": [1000]}, "
                      "\"batch\": {\"gids\": [44]}, \"default\": \"normal\"}, " ECHO_PIPELINES "}",
                      &cfg, err, sizeof err) == 0,
                  "%s", err);
    const gf_priorities *p = &cfg.priorities;
    ck_assert_uint_eq(gf_priority_of(p, 1000, 44, GF_CLASS_DEFAULT), GF_CLASS_REALTIME);
    ck_assert_uint_eq(gf_priority_of(p, 1000, 44, GF_CLASS_BATCH), GF_CLASS_BATCH);
    ck_assert_uint_eq(gf_priority_of(p, 7, 44, GF_CLASS_REALTIME), GF_CLASS_BATCH);
    ck_assert_uint_eq(gf_priority_of(p, 7, 5, GF_CLASS_DEFAULT), GF_CLASS_NORMAL);
    ck_assert_uint_eq(gf_priority_of(p, 7, 5, GF_CLASS_REALTIME), GF_CLASS_NORMAL);
    char text[256];
    gf_priorities_describe(p, text, sizeof text);
    ck_assert_str_eq(text, "realtime: uid 1000; batch: gid 44; default normal");
    gf_config_free(&cfg);
}
END_TEST

/* A pipeline's "devices" is a set of ordinals; "all" is every device. */
START_TEST(pipeline_devices_parse_to_a_set) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    ck_assert_msg(gf_config_parse("{\"pipelines\": [{\"name\": \"a\", \"kind\": \"echo\", "
                                  "\"devices\": \"2,0,15\"}, {\"name\": \"b\", \"kind\": "
                                  "\"echo\", \"devices\": \"all\"}]}",
                                  &cfg, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(cfg.pipelines[0].devices, (1u << 0) | (1u << 2) | (1u << 15));
    ck_assert_uint_eq(cfg.pipelines[1].devices, 0);
    gf_config_free(&cfg);
}
END_TEST

/* Sets one command-line flag, which must be valid. */
static void set_flag(gf_config_overrides *flags, const char *key, const char *text) {
    char err[ERR_BYTES] = "";
    ck_assert_msg(gf_config_override(flags, key, text, err, sizeof err) == 0, "%s=%s: %s", key,
                  text, err);
}

/* Writes `text` into a new file named after the template `path`
 * ("/tmp/name_XXXXXX"), which the caller unlinks. */
static void write_temp_config(char *path, const char *text) {
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* Command-line flags replace the file's values before anything depending on
 * them is checked: a flag can make a file valid, or invalid. */
START_TEST(overrides_apply_before_the_checks) {
    char errs[ERR_BYTES] = "", path[] = "/tmp/gf_overrides_XXXXXX";
    size_t count = 99;
    gf_config cfg;
    /* A 1024x1024 image (3 MiB) does not fit the file's 1 MiB frames. */
    write_temp_config(path, "{\"max_frame_bytes\": 1048576, \"pipelines\": [{\"name\": \"n\", "
                            "\"kind\": \"normalize_u8\", \"params\": {\"width\": 1024, "
                            "\"height\": 1024}}]}");
    ck_assert_int_eq(gf_config_load(path, NULL, &cfg, errs, sizeof errs, &count), -1);
    ck_assert_uint_eq(count, 1);
    ck_assert_msg(strstr(errs, path) == errs && strstr(errs, "exceeds max_frame_bytes 1048576"),
                  "%s", errs);

    gf_config_overrides flags = {0};
    set_flag(&flags, "socket", "/tmp/x.sock");
    set_flag(&flags, "engine", "cpu");
    set_flag(&flags, "slots", "3");
    set_flag(&flags, "max_frame_bytes", "4194304");
    ck_assert_msg(gf_config_load(path, &flags, &cfg, errs, sizeof errs, &count) == 0, "%s", errs);
    ck_assert_uint_eq(count, 0);
    ck_assert_str_eq(cfg.socket_path, "/tmp/x.sock");
    ck_assert_int_eq(cfg.engine, GF_ENGINE_CPU);
    ck_assert_uint_eq(cfg.slot_count, 3);
    ck_assert_uint_eq(cfg.max_frame_bytes, 4194304);
    gf_config_free(&cfg);

    /* The built-in configuration, made invalid by a flag: named as such. */
    gf_config_overrides small = {0};
    set_flag(&small, "max_frame_bytes", "1000");
    ck_assert_int_eq(gf_config_load(NULL, &small, &cfg, errs, sizeof errs, &count), -1);
    ck_assert_msg(strstr(errs, "built-in configuration: ") == errs &&
                      strstr(errs, "(normalize_u8).params") &&
                      strstr(errs, "exceeds max_frame_bytes 1000"),
                  "%s", errs);
    /* The pinned-memory cap is checked on the values the flags give. */
    gf_config_overrides big = {0};
    set_flag(&big, "slots", "64");
    set_flag(&big, "max_frame_bytes", "4294967296");
    ck_assert_int_eq(gf_config_load(path, &big, &cfg, errs, sizeof errs, &count), -1);
    ck_assert_msg(strstr(errs, "max_pinned_bytes: 1 shard(s) of 64 slots of 4294967296 bytes"),
                  "%s", errs);
    unlink(path);
}
END_TEST

static void parse_ok(const char *json, gf_config *cfg);

/* socket_group takes a name or any gid (the host's group need not be named
 * in a container); user a name or a uid the user database knows.  Both
 * default to "", and are kept as written. */
START_TEST(accounts_parse) {
    char err[ERR_BYTES] = "";
    gf_config cfg;

    parse_ok("{" ECHO_PIPELINES "}", &cfg);
    ck_assert_str_eq(cfg.socket_group, "");
    ck_assert_str_eq(cfg.user, "");
    gf_config_free(&cfg);
    parse_ok("{\"socket_group\": \"root\", \"user\": \"root\", " ECHO_PIPELINES "}", &cfg);
    ck_assert_str_eq(cfg.socket_group, "root");
    ck_assert_str_eq(cfg.user, "root");
    gf_config_free(&cfg);
    parse_ok("{\"socket_group\": \"4000000001\", \"user\": \"0\", " ECHO_PIPELINES "}", &cfg);
    ck_assert_str_eq(cfg.socket_group, "4000000001");
    ck_assert_str_eq(cfg.user, "0");
    gf_config_free(&cfg);
    /* Both wrong: both named. */
    size_t count = 0;
    ck_assert_int_eq(gf_config_parse_all("{\"socket_group\": \"no-such-group-gf\", \"user\": "
                                         "\"no-such-user-gf\", " ECHO_PIPELINES "}",
                                         &cfg, err, sizeof err, &count),
                     -1);
    ck_assert_uint_eq(count, 2);
    ck_assert_msg(strstr(err, "socket_group: no group named") && strstr(err, "user: no user named"),
                  "%s", err);
    /* On the command line, with the same lookups at load. */
    gf_config_overrides flags = {0};
    set_flag(&flags, "socket_group", "4000000001");
    set_flag(&flags, "user", "root");
    ck_assert_int_eq(
        gf_config_override(&flags, "user", "123456789012345678901234567890123", err, sizeof err),
        -1);
    ck_assert_str_eq(err, "expected a user name or uid of at most 32 bytes");
    ck_assert_msg(gf_config_load(NULL, &flags, &cfg, err, sizeof err, &count) == 0, "%s", err);
    ck_assert_str_eq(cfg.socket_group, "4000000001");
    ck_assert_str_eq(cfg.user, "root");
    gf_config_free(&cfg);
}
END_TEST

/* gf_config_load_keys reads every key but the pipelines, which it neither
 * needs nor checks: a file whose pipelines are wrong, or missing, loads. */
START_TEST(load_keys_leaves_the_pipelines_out) {
    char errs[ERR_BYTES] = "", path[] = "/tmp/gf_keys_XXXXXX";
    size_t count = 99;
    gf_config cfg;
    write_temp_config(path, "{\"slots\": 3, \"user\": \"root\", \"pipelines\": [{\"name\": \"p\", "
                            "\"kind\": \"plugin\", \"path\": \"/nonexistent/gf_none.so\"}]}");
    ck_assert_msg(gf_config_load_keys(path, NULL, &cfg, errs, sizeof errs, &count) == 0, "%s",
                  errs);
    ck_assert_uint_eq(count, 0);
    ck_assert_uint_eq(cfg.slot_count, 3);
    ck_assert_str_eq(cfg.user, "root");
    ck_assert_uint_eq(cfg.pipeline_count, 0);
    ck_assert_ptr_null(cfg.pipelines);
    gf_config_free(&cfg);
    ck_assert_int_eq(gf_config_load(path, NULL, &cfg, errs, sizeof errs, &count), -1);
    ck_assert_msg(strstr(errs, "gf_none.so"), "%s", errs);
    /* A bad key is still a problem. */
    gf_config_overrides flags = {0};
    set_flag(&flags, "user", "no-such-user-gf");
    ck_assert_int_eq(gf_config_load_keys(path, &flags, &cfg, errs, sizeof errs, &count), -1);
    ck_assert_uint_eq(count, 1);
    ck_assert_msg(strstr(errs, "user: no user named \"no-such-user-gf\""), "%s", errs);
    unlink(path);
}
END_TEST

/* A full batch of a pipeline whose input has one size: as many frames as
 * the input buffer holds, each as far from the last as its largest length
 * (a 224x224 image, 150,528 bytes, normalised to 602,112), at most 64. */
START_TEST(slot_buffers_hold_a_full_batch_of_fixed_size_frames) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    const uint64_t in = 224 * 224 * 3, out = in * 4;
#define FIXED_SIZE_CONFIG                                                                          \
    "{\"max_frame_bytes\": %llu, \"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", "   \
    "\"params\": {\"width\": 224, \"height\": 224}}, {\"name\": \"e\", \"kind\": \"echo\"}]}"
    /* frames at out's distance: (bytes - in) / out + 1 of them fit. */
    const struct {
        unsigned long long max_frame_bytes, frames;
    } cases[] = {{16777216, 28}, {1048576, 2}, {in, 1}, {64 * out, 64}, {100 * out, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, FIXED_SIZE_CONFIG, cases[i].max_frame_bytes);
        ck_assert_msg(gf_config_parse(json, &cfg, err, sizeof err) == 0, "%s", err);
        /* Or echo's result of a frame of max_frame_bytes, where more (its
         * 64 small frames need no more than that). */
        uint64_t want = cases[i].frames * out;
        if (want < cases[i].max_frame_bytes)
            want = cases[i].max_frame_bytes;
        ck_assert_msg(gf_config_max_output_bytes(&cfg) == want,
                      "max_frame_bytes %llu: %llu bytes out, want %llu (%llu frames)",
                      cases[i].max_frame_bytes,
                      (unsigned long long)gf_config_max_output_bytes(&cfg),
                      (unsigned long long)want, cases[i].frames);
        gf_config_free(&cfg);
    }
}
END_TEST

START_TEST(pinned_cap_and_new_keys) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    /* 2 slots * (1 MiB in + 4 MiB out of a 1024x341 RGB image) = 10 MiB > 8 MiB. */
    const char *over = "{\"max_pinned_bytes\": 8388608, \"max_frame_bytes\": 1048576,"
                       "\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\","
                       "\"params\": {\"width\": 1024, \"height\": 341}}]}";
    ck_assert_int_eq(gf_config_parse(over, &cfg, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "max_pinned_bytes") && strstr(err, "8388608"), "%s", err);
    const char *fits = "{\"max_pinned_bytes\": 10584064, \"max_frame_bytes\": 1048576,"
                       "\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\","
                       "\"params\": {\"width\": 1024, \"height\": 341}}]}";
    ck_assert_msg(gf_config_parse(fits, &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(gf_config_max_output_bytes(&cfg), 1024ull * 341 * 3 * 4);
    ck_assert_uint_eq(gf_config_pinned_bytes(&cfg), 2ull * (1048576 + 1024ull * 341 * 3 * 4));
    ck_assert_int_eq(cfg.timing_events, 1);
    ck_assert_uint_eq(cfg.timing_sample_every, 64);
    ck_assert_uint_eq(cfg.trace_frames, 4096);
    ck_assert_uint_eq(cfg.drain_timeout_ms, 30000);
    gf_config_free(&cfg);
    ck_assert_int_eq(gf_config_parse("{\"timing_events\": 1, \"pipelines\": [{\"name\": \"e\","
                                     "\"kind\": \"echo\"}]}",
                                     &cfg, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "timing_events: expected true or false"), "%s", err);
    ck_assert_int_eq(gf_config_parse("{\"timing_sample_every\": 0, \"pipelines\": [{\"name\": "
                                     "\"e\", \"kind\": \"echo\"}]}",
                                     &cfg, err, sizeof err),
                     -1);
    ck_assert_str_eq(err, "timing_sample_every: expected an integer in [1, 1048576], got 0");
    ck_assert_int_eq(gf_config_parse("{\"trace_frames\": -1, \"pipelines\": [{\"name\": \"e\","
                                     "\"kind\": \"echo\"}]}",
                                     &cfg, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "trace_frames"), "%s", err);
}
END_TEST

/* max_device_region_bytes: a quarter of the device's memory by default, the
 * value when given, and its bounds named. */
START_TEST(device_region_cap) {
    char err[ERR_BYTES] = "";
    gf_config cfg;
    ck_assert_msg(gf_config_parse("{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}]}", &cfg,
                                  err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(cfg.max_device_region_bytes, 0);
    ck_assert_uint_eq(gf_config_device_region_cap(&cfg, 144ull << 30), 36ull << 30);
    gf_config_free(&cfg);
    ck_assert_msg(gf_config_parse("{\"max_device_region_bytes\": 1125899906842624, \"pipelines\":"
                                  " [{\"name\": \"e\", \"kind\": \"echo\"}]}",
                                  &cfg, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(gf_config_device_region_cap(&cfg, 144ull << 30), 1ull << 50);
    gf_config_free(&cfg);
    ck_assert_int_eq(gf_config_parse("{\"max_device_region_bytes\": -1, \"pipelines\": "
                                     "[{\"name\": \"e\", \"kind\": \"echo\"}]}",
                                     &cfg, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "max_device_region_bytes: expected an integer in [0, "), "%s", err);
}
END_TEST

START_TEST(every_key_set_and_bounds_accepted) {
    char err[ERR_BYTES] = "", json[1024];
    char sock[GF_SOCKET_PATH_MAX];
    gf_config cfg;
    gf_params want;

    /* Longest socket path, largest values, names at their limits. */
    memset(sock, 's', GF_SOCKET_PATH_MAX - 1);
    sock[0] = '/';
    sock[GF_SOCKET_PATH_MAX - 1] = '\0';
    snprintf(json, sizeof json,
             "{\"pipelines\": [{\"kind\": \"sincos\", \"params\": {\"iters\": 3}, \"name\": "
             "\"Ab-9_.x\"}, {\"name\": \"%s\", \"kind\": \"affine\", \"params\": {\"b\": -1e-3}}],"
             "\"log_level\": \"debug\", \"socket\": \"%s\", \"engine\": \"cpu\", \"slots\": 64,"
             "\"max_frame_bytes\": 4294967296, \"frame_timeout_ms\": 3600000,"
             "\"drain_timeout_ms\": 3600000, \"max_pinned_bytes\": 1125899906842624,"
             "\"timing_events\": false, \"trace_frames\": 1048576,"
             "\"max_input_bytes_total\": 1099511627776}",
             "123456789012345678901234567890123456789012345678901234567890123", sock);
    ck_assert_msg(gf_config_parse(json, &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(cfg.socket_path, sock);
    ck_assert_int_eq(cfg.engine, GF_ENGINE_CPU);
    ck_assert_uint_eq(cfg.slot_count, 64);
    ck_assert_uint_eq(cfg.max_frame_bytes, 4294967296ull);
    ck_assert_uint_eq(cfg.frame_timeout_ms, 3600000);
    ck_assert_uint_eq(cfg.drain_timeout_ms, 3600000);
    ck_assert_uint_eq(cfg.max_pinned_bytes, 1ull << 50);
    ck_assert_int_eq(cfg.timing_events, 0);
    ck_assert_uint_eq(cfg.trace_frames, 1u << 20);
    ck_assert_uint_eq(cfg.max_input_bytes_total, 1ull << 40);
    ck_assert_int_eq(cfg.log_level, GF_LOG_DEBUG);
    ck_assert_uint_eq(cfg.pipeline_count, 2);
    want = default_params("sincos");
    want.iters = 3;
    assert_pipeline(&cfg.pipelines[0], 0, "Ab-9_.x", "sincos", &want);
    want = default_params("affine");
    want.b = (float)-1e-3;
    assert_pipeline(&cfg.pipelines[1], 1,
                    "123456789012345678901234567890123456789012345678901234567890123", "affine",
                    &want);
    gf_config_free(&cfg);

    ck_assert_msg(
        gf_config_parse("{\"slots\": 1, \"max_frame_bytes\": 1, \"frame_timeout_ms\": "
                        "1, \"engine\": \"cuda\", \"log_level\": \"error\", " ECHO_PIPELINES "}",
                        &cfg, err, sizeof err) == 0,
        "%s", err);
    ck_assert_uint_eq(cfg.slot_count, 1);
    /* Parking slow payloads is on by default: 256 MiB of them. */
    ck_assert_uint_eq(cfg.max_input_bytes_total, 256ull << 20);
    ck_assert_uint_eq(cfg.max_frame_bytes, 1);
    ck_assert_uint_eq(cfg.frame_timeout_ms, 1);
    ck_assert_int_eq(cfg.engine, GF_ENGINE_CUDA);
    ck_assert_int_eq(cfg.log_level, GF_LOG_ERROR);
    gf_config_free(&cfg);
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

struct bad_config {
    const char *json;
    const char *want; /* must occur in the error text */
};

static const struct bad_config bad_configs[] = {
    /* structure and syntax */
    {"{\"slot\": 2, " ECHO_PIPELINES "}",
     "slot: unknown key (known keys: socket, socket_mode, socket_group, user, allow, priorities, "
     "engine, "},
    /* priorities: classes of allow's lists, a default class */
    {"{\"priorities\": {\"realtime\": {\"users\": [\"no-such-user-gf\"]}}, " ECHO_PIPELINES "}",
     "priorities.realtime.users[0]"},
    {"{\"priorities\": {\"default\": \"urgent\"}, " ECHO_PIPELINES "}", "priorities.default: "},
    {"{\"priorities\": {\"fast\": {}}, " ECHO_PIPELINES "}", "fast"},
    {"{\"priorities\": [], " ECHO_PIPELINES "}",
     "priorities: expected an object of realtime, normal, batch and default"},
    {"{\"slots\": 2, \"slots\": 3, " ECHO_PIPELINES "}", "slots: duplicate key"},
    /* allow: names resolved at load, ids checked */
    {"{\"allow\": {\"users\": [\"no-such-user-gf\"]}, " ECHO_PIPELINES "}",
     "allow.users[0]: no user named \"no-such-user-gf\" on this system"},
    {"{\"allow\": {\"groups\": [\"no-such-group-gf\"]}, " ECHO_PIPELINES "}",
     "allow.groups[0]: no group named \"no-such-group-gf\" on this system"},
    {"{\"allow\": {\"uids\": [-1]}, " ECHO_PIPELINES "}", "allow.uids[0]: expected an integer"},
    {"{\"allow\": {\"gid\": [1]}, " ECHO_PIPELINES "}", "allow.gid: unknown key"},
    {"{\"allow\": [1], " ECHO_PIPELINES "}", "allow: expected an object"},
    {"{\"allow\": {\"uids\": 5}, " ECHO_PIPELINES "}", "allow.uids: expected an array"},
    {"{\"socket_mode\": \"0660x\", " ECHO_PIPELINES "}", "socket_mode: expected permission bits"},
    {"{\"socket_mode\": 432, " ECHO_PIPELINES "}", "socket_mode: expected permission bits"},
    /* socket_group and user: looked up at load */
    {"{\"socket_group\": \"no-such-group-gf\", " ECHO_PIPELINES "}",
     "socket_group: no group named \"no-such-group-gf\" on this system ('getent group "
     "no-such-group-gf' finds none; name it by gid, or make it with groupadd)"},
    {"{\"socket_group\": 44, " ECHO_PIPELINES "}",
     "socket_group: expected a group name or gid of at most 32 bytes, got 44"},
    {"{\"socket_group\": \"123456789012345678901234567890123\", " ECHO_PIPELINES "}",
     "socket_group: expected a group name or gid of at most 32 bytes, got \"1234567890"},
    {"{\"user\": \"no-such-user-gf\", " ECHO_PIPELINES "}",
     "user: no user named \"no-such-user-gf\" on this system ('getent passwd no-such-user-gf' "
     "finds none; systemd-sysusers or useradd makes one)"},
    {"{\"user\": \"4000000001\", " ECHO_PIPELINES "}",
     "user: no user with uid \"4000000001\" on this system"},
    {"{\"user\": [\"root\"], " ECHO_PIPELINES "}",
     "user: expected a user name or uid of at most 32 bytes, got an array"},
    {"[1, 2]", "config: expected a JSON object, got an array of 2 elements"},
    {"{}", "pipelines: missing"},
    {"{\"pipelines\": []}", "pipelines: expected a non-empty array of pipeline objects, got an "
                            "array of 0 elements"},
    {"{\"pipelines\": {}}", "pipelines: expected a non-empty array"},
    {"{\"pipelines\": [\"echo\"]}", "pipelines[0]: expected an object"},
    {"{\n  \"slots\": 2,\n  \"pipelines\": [\n}\n", "line 4, column 1"},
    {"{\"slots\": 2,}", "JSON syntax error at line 1"},
    {"{\"slots\": 2} x", "JSON syntax error at line 1, column 14"},
    {"", "at the end of the input"},
    {"{\"slots\": 2,\n\"engine\": \"auto\"", "line 2"},
    /* socket */
    {"{\"socket\": 5, " ECHO_PIPELINES "}", "socket: expected a path of 1 to 107 bytes, got 5"},
    {"{\"socket\": \"\", " ECHO_PIPELINES "}", "socket: expected a path of 1 to 107 bytes, got "
                                               "a string of 0 bytes"},
    {"{\"socket\": \"/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\", " ECHO_PIPELINES "}",
     "socket: expected a path of 1 to 107 bytes, got a string of 108 bytes"},
    /* engine, log_level */
    {"{\"engine\": \"gpu\", " ECHO_PIPELINES "}",
     "engine: expected one of \"auto\", \"cuda\", \"cpu\", got \"gpu\""},
    {"{\"engine\": 1, " ECHO_PIPELINES "}", "engine: expected one of"},
    {"{\"engine\": \"AUTO\", " ECHO_PIPELINES "}", "got \"AUTO\""},
    {"{\"log_level\": \"verbose\", " ECHO_PIPELINES "}",
     "log_level: expected one of \"error\", \"warn\", \"info\", \"debug\", got \"verbose\""},
    /* integers */
    {"{\"slots\": 0, " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got 0"},
    {"{\"slots\": 65, " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got 65"},
    {"{\"slots\": 2.5, " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got 2.5"},
    {"{\"slots\": -1, " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got -1"},
    {"{\"slots\": \"2\", " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got \"2\""},
    {"{\"slots\": true, " ECHO_PIPELINES "}", "slots: expected an integer in [1, 64], got true"},
    {"{\"slots\": null, " ECHO_PIPELINES "}", "got null"},
    {"{\"slots\": 1e999, " ECHO_PIPELINES "}", "slots: expected an integer"},
    {"{\"max_frame_bytes\": 0, " ECHO_PIPELINES "}",
     "max_frame_bytes: expected an integer in [1, 4294967296], got 0"},
    {"{\"max_frame_bytes\": 4294967297, " ECHO_PIPELINES "}", "got 4294967297"},
    {"{\"max_frame_bytes\": 9007199254740993, " ECHO_PIPELINES "}", "max_frame_bytes: expected"},
    {"{\"max_frame_bytes\": 1e300, " ECHO_PIPELINES "}", "got 1e+300"},
    {"{\"frame_timeout_ms\": 0, " ECHO_PIPELINES "}",
     "frame_timeout_ms: expected an integer in [1, 3600000], got 0"},
    {"{\"frame_timeout_ms\": 3600001, " ECHO_PIPELINES "}", "frame_timeout_ms: expected"},
    /* pipeline objects */
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"param\": {}}]}",
     "pipelines[0].param: unknown key (known keys: name, kind, params, path, stages, devices, "
     "max_batch_frames, max_batch_delay_us)"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_frames\": 0}]}",
     "pipelines[0] (e).max_batch_frames: expected an integer in [1, 64], got 0"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_frames\": 65}]}",
     "pipelines[0] (e).max_batch_frames: expected an integer in [1, 64], got 65"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_delay_us\": -1}]}",
     "pipelines[0] (e).max_batch_delay_us: expected \"auto\" or an integer in [0, 100000], got -1"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_delay_us\": 2.5}]}",
     "pipelines[0] (e).max_batch_delay_us: expected \"auto\" or an integer in [0, 100000], got "
     "2.5"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_delay_us\": 100001}]}",
     "pipelines[0] (e).max_batch_delay_us: expected \"auto\" or an integer in [0, 100000], got "
     "100001"},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"max_batch_delay_us\": \"Auto\"}]}",
     "pipelines[0] (e).max_batch_delay_us: expected \"auto\" or an integer in [0, 100000], got "
     "\"Auto\""},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"bad key\": 1}]}",
     "pipelines[0].\"bad key\": unknown key"},
    {"{\"shard_cpus\": \"3-1\", " ECHO_PIPELINES "}",
     "shard_cpus: expected \"auto\", \"none\" or a CPU list such as \"0-15,32-47\" (CPUs below "
     "1024), got \"3-1\""},
    {"{\"shard_cpus\": \"0-1024\", " ECHO_PIPELINES "}", "got \"0-1024\""},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"devices\": \"0,x\"}]}",
     "pipelines[0] (e).devices: expected \"all\" or CUDA device ordinals 0 to 15 separated by "
     "commas, such as \"0,1\"; got \"0,x\""},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"devices\": \"1,1\"}]}",
     "pipelines[0] (e).devices: device 1 is named twice in \"1,1\""},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"devices\": 1}]}",
     "pipelines[0] (e).devices: expected a string, \"all\" or device ordinals such as \"0,1\", got "
     "1"},
    {"{\"pipelines\": [{\"kind\": \"echo\"}]}", "pipelines[0].name: missing"},
    {"{\"pipelines\": [{\"name\": \"e\"}]}", "pipelines[0] (e).kind: missing"},
    {"{\"pipelines\": [{\"name\": 3, \"kind\": \"echo\"}]}",
     "pipelines[0].name: expected a string of 1 to 63 characters from [A-Za-z0-9_.-], got 3"},
    {"{\"pipelines\": [{\"name\": \"a b\", \"kind\": \"echo\"}]}",
     "pipelines[0].name: expected a string"},
    {"{\"pipelines\": [{\"name\": \"\", \"kind\": \"echo\"}]}", "pipelines[0].name: expected"},
    {"{\"pipelines\": [{\"name\": "
     "\"1234567890123456789012345678901234567890123456789012345678901234\", \"kind\": \"echo\"}]}",
     "pipelines[0].name: expected a string of 1 to 63"},
    {"{\"pipelines\": [{\"name\": \"x\", \"kind\": \"echo\"}, {\"name\": \"y\", \"kind\": "
     "\"echo\"}, {\"name\": \"x\", \"kind\": \"affine\"}]}",
     "pipelines[2].name: duplicate name \"x\" (also pipelines[0].name)"},
    {"{\"pipelines\": [{\"name\": \"x\", \"kind\": \"echo\"}, {\"name\": \"y\", \"kind\": "
     "\"foo\"}]}",
     "pipelines[1] (y).kind: unknown kind \"foo\" (known: "},
    {"{\"pipelines\": [{\"name\": \"x\", \"kind\": [\"echo\"]}]}",
     "pipelines[0] (x).kind: expected the name of a kind"},
    /* parameters */
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", \"params\": {\"x\": 1}}]}",
     "pipelines[0] (e).params.x: unknown parameter (kind echo takes no parameters)"},
    {"{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"c\": 1}}]}",
     "pipelines[0] (af).params.c: unknown parameter of kind affine (known: a, b)"},
    {"{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": [1]}]}",
     "pipelines[0] (af).params: expected an object"},
    {"{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"a\": \"2\"}}]}",
     "pipelines[0] (af).params.a: expected a number in ["},
    {"{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"a\": 1, \"a\": "
     "2}}]}",
     "pipelines[0] (af).params.a: duplicate key"},
    {"{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"b\": 1e300}}]}",
     "pipelines[0] (af).params.b: expected a number in ["},
    {"{\"pipelines\": [{\"name\": \"sc\", \"kind\": \"sincos\", \"params\": {\"iters\": 1.5}}]}",
     "pipelines[0] (sc).params.iters: expected an integer in ["},
    {"{\"pipelines\": [{\"name\": \"sc\", \"kind\": \"sincos\", \"params\": {\"iters\": -1}}]}",
     "pipelines[0] (sc).params.iters: expected an integer in ["},
    {"{\"pipelines\": [{\"name\": \"sc\", \"kind\": \"sincos\", \"params\": {\"iters\": "
     "4294967296}}]}",
     "pipelines[0] (sc).params.iters: expected an integer in ["},
    {"{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}, {\"name\": \"n\", \"kind\": "
     "\"normalize_u8\", \"params\": {\"mean\": [0.5, 0.5]}}]}",
     "pipelines[1] (n).params.mean: expected an array of 3 numbers, got an array of 2 elements"},
    {"{\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"mean\": "
     "0.5}}]}",
     "pipelines[0] (n).params.mean: expected an array of 3 numbers, got 0.5"},
    {"{\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"std\": [1, "
     "\"1\", 1]}}]}",
     "pipelines[0] (n).params.std[1]: expected a number in ["},
    {"{\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"std\": [1, "
     "1, 0]}}]}",
     "pipelines[0] (n).params.std[2]: expected a number in ["},
    {"{\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 0}}]}",
     "pipelines[0] (n).params.width: expected an integer in ["},
    /* width*height*3 = 6220800 > 1000: the kind's own check, with the key path */
    {"{\"max_frame_bytes\": 1000, \"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"}, "
     "{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 1920, \"height\": "
     "1080}}]}",
     "pipelines[1] (n).params: "},
    /* max_frame_bytes given after the pipelines still applies to them */
    {"{\"pipelines\": [{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"width\": "
     "100, \"height\": 100}}], \"max_frame_bytes\": 29999}",
     "pipelines[0] (n).params: "},
};

START_TEST(bad_config_is_rejected_with_key_path) {
    const struct bad_config *c = &bad_configs[_i];
    char err[ERR_BYTES] = "";
    gf_config cfg;

    memset(&cfg, 0xa5, sizeof cfg); /* parse must empty it, not free it */
    ck_assert_msg(gf_config_parse(c->json, &cfg, err, sizeof err) == -1, "accepted: %s", c->json);
    ck_assert_msg(strstr(err, c->want) != NULL, "error \"%s\" lacks \"%s\"", err, c->want);
    ck_assert_msg(strchr(err, '\n') == NULL, "error is not one line: %s", err);
    assert_empty(&cfg);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(unknown_kind_lists_every_kind) {
    char err[ERR_BYTES] = "";
    size_t count;
    const gf_pipeline_kind *kinds = gf_pipeline_kinds(&count);
    gf_config cfg;

    ck_assert_int_eq(gf_config_parse("{\"pipelines\": [{\"name\": \"e\", \"kind\": \"foo\"}]}",
                                     &cfg, err, sizeof err),
                     -1);
    ck_assert_uint_ge(count, 4);
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(strstr(err, kinds[i].name) != NULL, "%s lacks %s", err, kinds[i].name);
    ck_assert_ptr_nonnull(strstr(err, "echo, affine, sincos, normalize_u8"));
}
END_TEST

START_TEST(exact_error_texts) {
    char err[ERR_BYTES] = "";
    gf_config cfg;

    ck_assert_int_eq(gf_config_parse("{\"slots\": 0, " ECHO_PIPELINES "}", &cfg, err, sizeof err),
                     -1);
    ck_assert_str_eq(err, "slots: expected an integer in [1, 64], got 0");
    ck_assert_int_eq(
        gf_config_parse("{\"engine\": \"gpu\", " ECHO_PIPELINES "}", &cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "engine: expected one of \"auto\", \"cuda\", \"cpu\", got \"gpu\"");
}
END_TEST

/* A config of `count` echo pipelines named p0, p1, ...; the caller frees it. */
static char *echo_pipelines_json(int count) {
    size_t len = 64 + (size_t)count * 48, o = 0;
    char *json = malloc(len);

    ck_assert_ptr_nonnull(json);
    o += (size_t)snprintf(json + o, len - o, "{\"pipelines\": [");
    for (int i = 0; i < count; i++)
        o += (size_t)snprintf(json + o, len - o, "%s{\"name\": \"p%d\", \"kind\": \"echo\"}",
                              i ? "," : "", i);
    ck_assert_uint_lt(o + 3, len);
    snprintf(json + o, len - o, "]}");
    return json;
}

START_TEST(too_many_pipelines) {
    char *json = echo_pipelines_json(GF_MAX_PIPELINES + 1), err[ERR_BYTES] = "";
    gf_config cfg;

    ck_assert_int_eq(gf_config_parse(json, &cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "pipelines: expected at most 256 pipelines, got 257");
    free(json);

    /* Exactly the limit is fine, and ids follow positions. */
    json = echo_pipelines_json(GF_MAX_PIPELINES);
    ck_assert_msg(gf_config_parse(json, &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(cfg.pipeline_count, GF_MAX_PIPELINES);
    for (size_t i = 0; i < cfg.pipeline_count; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%zu", i);
        ck_assert_uint_eq(cfg.pipelines[i].id, i);
        ck_assert_str_eq(cfg.pipelines[i].name, name);
    }
    gf_config_free(&cfg);
    free(json);
}
END_TEST

START_TEST(errors_are_escaped_and_truncated) {
    char err[ERR_BYTES] = "", small[24];
    gf_config cfg;

    /* A control character and a long value stay on one short line. */
    ck_assert_int_eq(
        gf_config_parse(
            "{\"engine\": \"a\\nb\\u0001"
            "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\", " ECHO_PIPELINES "}",
            &cfg, err, sizeof err),
        -1);
    ck_assert_ptr_nonnull(strstr(err, "got \"a\\nb\\x01ccc"));
    ck_assert_ptr_nonnull(strstr(err, "...\""));
    ck_assert_ptr_null(strchr(err, '\n'));

    /* A small buffer gets a cut, terminated message. */
    memset(small, 'z', sizeof small);
    ck_assert_int_eq(
        gf_config_parse("{\"slots\": 0, " ECHO_PIPELINES "}", &cfg, small, sizeof small), -1);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(
        strncmp(small, "slots: expected an integer in [1, 64], got 0", sizeof small - 1), 0);

    /* No buffer at all is allowed. */
    ck_assert_int_eq(gf_config_parse("{\"slots\": 0}", &cfg, NULL, 0), -1);
    assert_empty(&cfg);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

/* Writes `len` bytes of `data` to a new temporary file; returns its path in
 * path[len] (the caller unlinks it). */
static void write_temp(char *path, size_t path_len, const void *data, size_t len) {
    int fd;

    snprintf(path, path_len, "/tmp/gf_test_config_XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
}

START_TEST(load_file_errors_start_with_the_path) {
    char err[ERR_BYTES] = "", path[64], want[128];
    const char bad[] = "{\"slots\": 65, " ECHO_PIPELINES "}";
    const char nul[] = "{\"slots\": 2}\0garbage";
    gf_config cfg;
    char *big;

    ck_assert_int_eq(gf_config_load_file("/nonexistent/gpuframed.json", &cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "/nonexistent/gpuframed.json: No such file or directory");
    assert_empty(&cfg);

    ck_assert_int_eq(gf_config_load_file("/tmp", &cfg, err, sizeof err), -1);
    ck_assert_int_eq(strncmp(err, "/tmp: ", 6), 0);

    write_temp(path, sizeof path, bad, strlen(bad));
    ck_assert_int_eq(gf_config_load_file(path, &cfg, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: slots: expected an integer in [1, 64], got 65", path);
    ck_assert_str_eq(err, want);
    assert_empty(&cfg);
    unlink(path);

    write_temp(path, sizeof path, nul, sizeof nul - 1);
    ck_assert_int_eq(gf_config_load_file(path, &cfg, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, ": contains a NUL byte at offset 12"));
    unlink(path);

    /* 1 MiB + 1 bytes of whitespace: too large, whatever it holds. */
    big = malloc((1u << 20) + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', (1u << 20) + 1);
    write_temp(path, sizeof path, big, (1u << 20) + 1);
    ck_assert_int_eq(gf_config_load_file(path, &cfg, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "larger than the limit of 1048576 bytes"));
    ck_assert_int_eq(strncmp(err, path, strlen(path)), 0);
    unlink(path);

    /* Exactly 1 MiB is read (and here parses once the object ends it). */
    memcpy(big + (1u << 20) - 64, "{" ECHO_PIPELINES "}", strlen("{" ECHO_PIPELINES "}"));
    write_temp(path, sizeof path, big, 1u << 20);
    ck_assert_msg(gf_config_load_file(path, &cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(cfg.pipeline_count, 1);
    gf_config_free(&cfg);
    unlink(path);
    free(big);
}
END_TEST

/* ---- small parsers ---------------------------------------------------------- */

START_TEST(engine_and_log_level_names) {
    enum gf_engine_choice e = GF_ENGINE_AUTO;
    enum gf_log_level l = GF_LOG_ERROR;

    ck_assert_int_eq(gf_engine_choice_parse("cuda", &e), 0);
    ck_assert_int_eq(e, GF_ENGINE_CUDA);
    ck_assert_int_eq(gf_engine_choice_parse("cpu", &e), 0);
    ck_assert_int_eq(e, GF_ENGINE_CPU);
    ck_assert_int_eq(gf_engine_choice_parse("auto", &e), 0);
    ck_assert_int_eq(e, GF_ENGINE_AUTO);
    ck_assert_int_eq(gf_engine_choice_parse("gpu", &e), -1);
    ck_assert_int_eq(gf_engine_choice_parse("", &e), -1);
    ck_assert_int_eq(e, GF_ENGINE_AUTO);
    ck_assert_str_eq(gf_engine_choice_name(GF_ENGINE_AUTO), "auto");
    ck_assert_str_eq(gf_engine_choice_name(GF_ENGINE_CUDA), "cuda");
    ck_assert_str_eq(gf_engine_choice_name(GF_ENGINE_CPU), "cpu");

    ck_assert_int_eq(gf_log_level_parse("warn", &l), 0);
    ck_assert_int_eq(l, GF_LOG_WARN);
    ck_assert_int_eq(gf_log_level_parse("debug", &l), 0);
    ck_assert_int_eq(l, GF_LOG_DEBUG);
    ck_assert_int_eq(gf_log_level_parse("info", &l), 0);
    ck_assert_int_eq(l, GF_LOG_INFO);
    ck_assert_int_eq(gf_log_level_parse("error", &l), 0);
    ck_assert_int_eq(l, GF_LOG_ERROR);
    ck_assert_int_eq(gf_log_level_parse("warning", &l), -1);
    ck_assert_int_eq(l, GF_LOG_ERROR);
}
END_TEST

START_TEST(params_from_json_defaults_and_prefix) {
    const gf_pipeline_kind *affine = gf_pipeline_kind_find("affine");
    gf_params got, want = default_params("affine");
    char err[ERR_BYTES] = "";
    cJSON *obj;

    ck_assert_ptr_nonnull(affine);
    memset(&got, 0xa5, sizeof got);
    ck_assert_int_eq(gf_params_from_json(affine, NULL, "p", &got, err, sizeof err), 0);
    ck_assert_int_eq(memcmp(&got, &want, sizeof got), 0);

    obj = cJSON_Parse("{\"b\": -0.25}");
    ck_assert_ptr_nonnull(obj);
    ck_assert_int_eq(gf_params_from_json(affine, obj, "p", &got, err, sizeof err), 0);
    want.b = -0.25f;
    ck_assert_int_eq(memcmp(&got, &want, sizeof got), 0);
    cJSON_Delete(obj);

    obj = cJSON_Parse("{\"a\": [1]}");
    ck_assert_ptr_nonnull(obj);
    ck_assert_int_eq(gf_params_from_json(affine, obj, "my.prefix", &got, err, sizeof err), -1);
    ck_assert_int_eq(strncmp(err, "my.prefix.a: expected a number in [", 35), 0);
    ck_assert_ptr_nonnull(strstr(err, "got an array of 1 elements"));
    cJSON_Delete(obj);
}
END_TEST

START_TEST(f32_range_is_checked_after_rounding) {
    const gf_pipeline_kind *affine = gf_pipeline_kind_find("affine");
    const gf_param_desc *d;
    char err[ERR_BYTES] = "", text[64];
    gf_params got;
    cJSON *obj;
    int rc;

    ck_assert_ptr_nonnull(affine);
    d = &affine->params[0];
    /* The bound itself, written exactly: accepted only when its float32 still
     * lies in the range, else refused with the rounding named. */
    snprintf(text, sizeof text, "{\"%s\": %.17g}", d->key, d->max);
    obj = cJSON_Parse(text);
    ck_assert_ptr_nonnull(obj);
    rc = gf_params_from_json(affine, obj, "p", &got, err, sizeof err);
    if ((double)(float)d->max <= d->max) {
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_float_eq(got.a, (float)d->max);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(err, "as a float32") != NULL, "%s", err);
    }
    cJSON_Delete(obj);
}
END_TEST

/* ---- the LIST reply ------------------------------------------------------------ */

/* Encodes `cfg`'s pipelines, prints them as text, parses the text back and
 * checks that every field, params included, is identical. */
static void assert_round_trip(const gf_config *cfg) {
    char err[ERR_BYTES] = "";
    gf_pipeline *back = NULL;
    size_t count = 0;
    cJSON *tree = gf_pipelines_to_json(cfg->pipelines, cfg->pipeline_count);
    char *text;

    ck_assert_ptr_nonnull(tree);
    text = cJSON_PrintUnformatted(tree);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(gf_pipelines_from_json(text, &back, &count, err, sizeof err) == 0, "%s: %s", err,
                  text);
    ck_assert_uint_eq(count, cfg->pipeline_count);
    for (size_t i = 0; i < count; i++) {
        const gf_pipeline *a = &cfg->pipelines[i], *b = &back[i];
        const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(tree, "pipelines"), (int)i);

        ck_assert_uint_eq(b->id, i);
        ck_assert_uint_eq(b->id, a->id);
        ck_assert_str_eq(b->name, a->name);
        ck_assert_ptr_eq(b->stages[0].kind, a->stages[0].kind);
        ck_assert_msg(
            memcmp(&a->stages[0].params, &b->stages[0].params, sizeof a->stages[0].params) == 0,
            "params of %s differ after the round trip: %s", a->name, text);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(item, "doc")),
                         a->stages[0].kind->doc);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(item, "params")),
                         (int)a->stages[0].kind->param_count);
    }
    free(back);
    cJSON_free(text);
    cJSON_Delete(tree);
}

START_TEST(list_round_trip_default_config) {
    char err[ERR_BYTES] = "";
    gf_config cfg;

    ck_assert_msg(
        gf_config_load_file(GF_TEST_CONFIG_DIR "/gpuframed.json", &cfg, err, sizeof err) == 0, "%s",
        err);
    assert_round_trip(&cfg);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(list_round_trip_awkward_values) {
    char err[ERR_BYTES] = "";
    gf_config cfg;

    /* Values that are not exact in float32 or that need 9 significant digits. */
    ck_assert_msg(
        gf_config_parse("{\"pipelines\": ["
                        "{\"name\": \"a1\", \"kind\": \"affine\", \"params\": {\"a\": 0.1, "
                        "\"b\": -3.3333333333e-7}},"
                        "{\"name\": \"a2\", \"kind\": \"affine\", \"params\": {\"a\": "
                        "16777217, \"b\": 1.00000011920928955}},"
                        "{\"name\": \"e\", \"kind\": \"echo\", \"params\": {}},"
                        "{\"name\": \"s\", \"kind\": \"sincos\", \"params\": {\"iters\": 1}},"
                        "{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"width\": "
                        "7, \"height\": 5, \"mean\": [0.1, 0.2, 0.3], \"std\": [0.7, "
                        "0.123456789, 0.3]}}]}",
                        &cfg, err, sizeof err) == 0,
        "%s", err);
    ck_assert_float_eq(cfg.pipelines[0].stages[0].params.a, (float)0.1);
    ck_assert_float_eq(cfg.pipelines[1].stages[0].params.a, 16777216.0f);
    assert_round_trip(&cfg);
    gf_config_free(&cfg);
}
END_TEST

START_TEST(list_round_trip_random_floats) {
    const gf_pipeline_kind *affine = gf_pipeline_kind_find("affine");
    gf_pipeline p[64];
    gf_config cfg;
    uint32_t state = 12345u;
    size_t n = 0;

    ck_assert_ptr_nonnull(affine);
    ck_assert_uint_eq(affine->param_count, 2);
    /* 4096 float bit patterns, each within the parameter's declared range,
     * through text and back in batches of 64 pipelines. */
    for (int round = 0; round < 64; round++) {
        for (n = 0; n < 64;) {
            float f[2];
            for (int k = 0; k < 2; k++) {
                const gf_param_desc *d = &affine->params[k];
                do {
                    uint32_t bits;
                    state = state * 1664525u + 1013904223u;
                    bits = state;
                    memcpy(&f[k], &bits, sizeof bits);
                } while (!(f[k] >= d->min && f[k] <= d->max));
            }
            memset(&p[n], 0, sizeof p[n]);
            p[n].id = (uint32_t)n;
            snprintf(p[n].name, sizeof p[n].name, "a%zu", n);
            p[n].stage_count = 1;
            p[n].stages[0].kind = affine;
            gf_params_defaults(affine, &p[n].stages[0].params);
            memcpy((char *)&p[n].stages[0].params + affine->params[0].offset, &f[0], sizeof f[0]);
            memcpy((char *)&p[n].stages[0].params + affine->params[1].offset, &f[1], sizeof f[1]);
            n++;
        }
        cfg.pipelines = p;
        cfg.pipeline_count = n;
        assert_round_trip(&cfg);
    }
}
END_TEST

struct bad_list {
    const char *json;
    const char *want;
};

static const struct bad_list bad_lists[] = {
    {"{\"pipelines\": [", "pipeline list: JSON syntax error at line 1"},
    {"[]", "pipelines: expected an array"},
    {"{\"pipelines\": 1}", "pipelines: expected an array"},
    {"{\"pipelines\": [{\"id\": 1, \"name\": \"e\", \"kind\": \"echo\", \"params\": {}}]}",
     "pipelines[0].id: expected an integer in [0, 0], got 1"},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"e\", \"kind\": \"echo\"}]}",
     "pipelines[0].params: missing"},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"e\", \"kind\": \"nope\", \"params\": {}}]}",
     "pipelines[0] (e).kind: unknown kind \"nope\""},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"e\", \"kind\": \"echo\", \"params\": {}},"
     "{\"id\": 1, \"name\": \"e\", \"kind\": \"echo\", \"params\": {}}]}",
     "pipelines[1].name: duplicate name"},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"a\", \"kind\": \"affine\", \"params\": "
     "{\"a\": null}}]}",
     "pipelines[0] (a).params.a: expected a number in ["},
    /* A plugin stage's frames as listed: what it says is believed, checked. */
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/x.so\", "
     "\"params\": {}, \"inputs\": [{\"dtype\": \"float64\", \"shape\": [2]}], \"outputs\": "
     "[{\"dtype\": \"uint8\", \"shape\": [-1]}]}]}",
     "pipelines[0] (p).inputs[0].dtype: expected uint8, int16, int32, int64, float16, bfloat16 or "
     "float32, got \"float64\""},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/x.so\", "
     "\"params\": {}, \"inputs\": [{\"dtype\": \"uint8\", \"shape\": [-1]}], \"outputs\": "
     "[{\"dtype\": \"uint8\", \"shape\": [-1, -1]}]}]}",
     "pipelines[0] (p).outputs: tensor 0: dimension 1 is -1 (at least 1, or -1 once in a "
     "frame of one tensor)"},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/x.so\", "
     "\"params\": {}, \"inputs\": [], \"outputs\": [{\"dtype\": \"uint8\", \"shape\": [1]}]}]}",
     "pipelines[0] (p).inputs: expected an array of 1 to 8 tensors, got an array of 0 elements"},
    {"{\"pipelines\": [{\"id\": 0, \"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/x.so\", "
     "\"params\": {}, \"inputs\": [{\"dtype\": \"uint8\", \"shape\": [1.5]}], \"outputs\": "
     "[{\"dtype\": \"uint8\", \"shape\": [1]}]}]}",
     "pipelines[0] (p).inputs[0].shape[0]: expected an integer in [-1, "},
};

START_TEST(bad_list_is_rejected) {
    const struct bad_list *c = &bad_lists[_i];
    char err[ERR_BYTES] = "";
    gf_pipeline dummy, *out = &dummy; /* must be reset, never freed */
    size_t count = 99;

    ck_assert_msg(gf_pipelines_from_json(c->json, &out, &count, err, sizeof err) == -1,
                  "accepted: %s", c->json);
    ck_assert_msg(strstr(err, c->want) != NULL, "error \"%s\" lacks \"%s\"", err, c->want);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(count, 0);
}
END_TEST

/* Pipeline k's "inputs" or "outputs" (`key`) in a LIST tree, as compact
 * text; the caller frees it with cJSON_free. */
static char *listed_frames(const cJSON *tree, int k, const char *key) {
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(tree, "pipelines"), k);
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(item, key));
    ck_assert_ptr_nonnull(text);
    return text;
}

/* LIST publishes every built-in kind's frames, exactly: a variable
 * dimension is -1, an image's dimensions its parameters'; a chain's are its
 * first stage's input and last stage's output, resolved from its one input
 * length, and each stage's its own. */
START_TEST(list_publishes_frames) {
    static const struct {
        const char *inputs, *outputs;
    } want[] = {
        {"[{\"dtype\":\"uint8\",\"shape\":[-1]}]", "[{\"dtype\":\"uint8\",\"shape\":[-1]}]"},
        {"[{\"dtype\":\"float32\",\"shape\":[-1]}]", "[{\"dtype\":\"float32\",\"shape\":[-1]}]"},
        {"[{\"dtype\":\"float32\",\"shape\":[-1]}]", "[{\"dtype\":\"float32\",\"shape\":[-1]}]"},
        {"[{\"dtype\":\"uint8\",\"shape\":[5,7,3]}]",
         "[{\"dtype\":\"float32\",\"shape\":[3,5,7]}]"},
        {"[{\"dtype\":\"uint8\",\"shape\":[2,4,3]}]", "[{\"dtype\":\"float32\",\"shape\":[24]}]"},
    };
    char err[ERR_BYTES] = "";
    gf_config cfg;
    ck_assert_msg(
        gf_config_parse("{\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\"},"
                        "{\"name\": \"a\", \"kind\": \"affine\"},"
                        "{\"name\": \"s\", \"kind\": \"sincos\"},"
                        "{\"name\": \"n\", \"kind\": \"normalize_u8\", \"params\": {\"width\": "
                        "7, \"height\": 5}},"
                        "{\"name\": \"c\", \"stages\": [{\"kind\": \"normalize_u8\", \"params\": "
                        "{\"width\": 4, \"height\": 2}}, {\"kind\": \"sincos\"}]}]}",
                        &cfg, err, sizeof err) == 0,
        "%s", err);
    cJSON *tree = gf_pipelines_to_json(cfg.pipelines, cfg.pipeline_count);
    ck_assert_ptr_nonnull(tree);
    for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++) {
        char *in = listed_frames(tree, k, "inputs"), *out = listed_frames(tree, k, "outputs");
        ck_assert_str_eq(in, want[k].inputs);
        ck_assert_str_eq(out, want[k].outputs);
        cJSON_free(in);
        cJSON_free(out);
    }
    const cJSON *stages = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(tree, "pipelines"), 4), "stages");
    char *text = cJSON_PrintUnformatted(stages);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\"inputs\":[{\"dtype\":\"uint8\",\"shape\":[2,4,3]}],"
                                       "\"outputs\":[{\"dtype\":\"float32\",\"shape\":[3,2,4]}]"));
    ck_assert_ptr_nonnull(strstr(text, "\"inputs\":[{\"dtype\":\"float32\",\"shape\":[24]}],"
                                       "\"outputs\":[{\"dtype\":\"float32\",\"shape\":[24]}]"));
    cJSON_free(text);
    cJSON_Delete(tree);
    gf_config_free(&cfg);
}
END_TEST

/* A LIST's plugin stage, never loaded here, is described as listed. */
START_TEST(list_plugin_stage_described_as_listed) {
    char err[ERR_BYTES] = "", in[GF_FRAME_DESC_TEXT_BYTES], out[GF_FRAME_DESC_TEXT_BYTES];
    gf_pipeline *p = NULL;
    gf_frame_desc a, b;
    size_t count = 0;
    ck_assert_msg(
        gf_pipelines_from_json(
            "{\"pipelines\": [{\"id\": 0, \"name\": \"m\", \"kind\": \"plugin\", \"plugin\": "
            "\"torch\", \"path\": \"/x.so\", \"config_dir\": \"/\", \"params\": {}, \"inputs\": "
            "[{\"dtype\": \"uint8\", \"shape\": [224, 224, 3]}, {\"dtype\": \"int64\", "
            "\"shape\": []}], \"outputs\": [{\"dtype\": \"bfloat16\", \"shape\": [1000]}]},"
            "{\"id\": 1, \"name\": \"old\", \"kind\": \"plugin\", \"path\": \"/y.so\", "
            "\"params\": {}}]}",
            &p, &count, err, sizeof err) == 0,
        "%s", err);
    ck_assert_uint_eq(count, 2);
    gf_pipeline_describe(&p[0], &a, &b);
    ck_assert_str_eq(gf_frame_desc_text(&a, in, sizeof in), "uint8[224,224,3];int64[]");
    ck_assert_str_eq(gf_frame_desc_text(&b, out, sizeof out), "bfloat16[1000]");
    /* A daemon from before LIST described frames: bytes both ways. */
    gf_pipeline_describe(&p[1], &a, &b);
    ck_assert_str_eq(gf_frame_desc_text(&a, in, sizeof in), "uint8[n]");
    ck_assert_str_eq(gf_frame_desc_text(&b, out, sizeof out), "uint8[n]");
    gf_pipelines_free(p, count);
}
END_TEST

START_TEST(list_ignores_doc_and_unknown_keys) {
    char err[ERR_BYTES] = "";
    gf_pipeline *out = NULL;
    size_t count = 0;
    gf_params want = default_params("sincos");

    want.iters = 9;
    ck_assert_msg(gf_pipelines_from_json("{\"version\": 2, \"pipelines\": [{\"id\": 0, \"name\": "
                                         "\"s\", \"kind\": \"sincos\", \"params\": {\"iters\": "
                                         "9}, \"doc\": \"x\", \"future\": [1]}]}",
                                         &out, &count, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(count, 1);
    assert_pipeline(&out[0], 0, "s", "sincos", &want);
    free(out);
}
END_TEST

/* ---- the key table: flags, reloads, documentation ---------------------------- */

/* Every kind of key refuses a bad flag with the file's range, and the flag
 * is then not given. */
START_TEST(override_errors_name_what_was_expected) {
    static const struct {
        const char *key, *text, *want;
    } bad[] = {
        {"slots", "0", "expected an integer in [1, 64], got '0'"},
        {"slots", "2x", "expected an integer in [1, 64], got '2x'"},
        {"max_frame_bytes", "-1",
         "expected an integer in [1, 4294967296] (bytes; suffixes K, M, G), got '-1'"},
        {"max_frame_bytes", "64MB",
         "expected an integer in [1, 4294967296] (bytes; suffixes K, M, G), got '64MB'"},
        {"max_frame_bytes", "5G",
         "expected an integer in [1, 4294967296] (bytes; suffixes K, M, G), got '5G'"},
        {"slots", "2K", "expected an integer in [1, 64], got '2K'"},
        {"engine", "gpu", "expected auto, cuda or cpu, got 'gpu'"},
        {"log_level", "loud", "expected error, warn, info or debug, got 'loud'"},
        {"timing_events", "yes", "expected false or true, got 'yes'"},
        {"socket", "", "expected a path of 1 to 107 bytes"},
        {"pipelines", "[]", "pipelines cannot be set from the command line"},
        {"slot", "2", "slot cannot be set from the command line"},
    };
    gf_config_overrides flags = {0};
    char err[ERR_BYTES];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(gf_config_override(&flags, bad[i].key, bad[i].text, err, sizeof err), -1);
        ck_assert_str_eq(err, bad[i].want);
    }
    ck_assert_uint_eq(flags.given, 0);
    set_flag(&flags, "timing_events", "false");
    set_flag(&flags, "log_level", "debug");
    ck_assert_int_eq(flags.values.timing_events, 0);
    ck_assert_int_eq(flags.values.log_level, GF_LOG_DEBUG);
    /* A byte count takes the client's binary suffixes, either case. */
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {{"64M", 64ull << 20},
                 {"64m", 64ull << 20},
                 {"512k", 512ull << 10},
                 {"4G", 4ull << 30},
                 {"1000", 1000}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        set_flag(&flags, "max_frame_bytes", sizes[i].text);
        ck_assert_uint_eq(flags.values.max_frame_bytes, sizes[i].bytes);
    }
}
END_TEST

/* Parses `json`, which must be valid. */
static void parse_ok(const char *json, gf_config *cfg) {
    char err[ERR_BYTES] = "";
    ck_assert_msg(gf_config_parse(json, cfg, err, sizeof err) == 0, "%s", err);
}

/* A reload keeps every needs-a-restart key's running value and says so; the
 * rest is what gf_config_describe_changes then reports as applied. */
START_TEST(keep_restart_keys_notes_and_keeps) {
    gf_config running, next;
    char note[512] = "", changes[512];

    parse_ok("{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"a\": 2}}]}",
             &running);
    parse_ok("{\"socket\": \"/tmp/other.sock\", \"engine\": \"cpu\", \"slots\": 4, \"log_level\": "
             "\"debug\", \"timing_events\": false, \"trace_frames\": 16, \"max_frame_bytes\": "
             "1048576, \"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": "
             "{\"a\": 3}, \"max_batch_frames\": 8, \"max_batch_delay_us\": 50}]}",
             &next);
    ck_assert_int_eq(gf_config_keep_restart_keys(&running, &next, note, sizeof note), 0);
    ck_assert_str_eq(note, "needs a restart: socket /run/gpuframed.sock -> /tmp/other.sock, "
                           "engine auto -> cpu, slots 2 -> 4, timing_events true -> false, "
                           "trace_frames 4096 -> 16");
    ck_assert_str_eq(next.socket_path, "/run/gpuframed.sock");
    ck_assert_int_eq(next.engine, GF_ENGINE_AUTO);
    ck_assert_uint_eq(next.slot_count, 2);
    ck_assert_int_eq(next.timing_events, 1);
    ck_assert_uint_eq(next.trace_frames, 4096);
    gf_config_describe_changes(&running, &next, changes, sizeof changes);
    ck_assert_str_eq(changes, "max_frame_bytes 16777216 -> 1048576, log_level info -> debug, "
                              "pipelines[0] (af).max_batch_frames 64 -> 8, pipelines[0] "
                              "(af).max_batch_delay_us 0 -> 50, pipelines[0] (af).params "
                              "{\"a\":2,\"b\":0} -> {\"a\":3,\"b\":0}");
    /* "auto" is said as the file says it. */
    gf_config autoed;
    parse_ok("{\"max_frame_bytes\": 1048576, \"log_level\": \"debug\", \"pipelines\": [{\"name\": "
             "\"af\", \"kind\": \"affine\", \"params\": {\"a\": 3}, \"max_batch_frames\": 8, "
             "\"max_batch_delay_us\": \"auto\"}]}",
             &autoed);
    gf_config_describe_changes(&next, &autoed, changes, sizeof changes);
    ck_assert_str_eq(changes, "pipelines[0] (af).max_batch_delay_us 50 -> auto");
    gf_config_describe_changes(&autoed, &next, changes, sizeof changes);
    ck_assert_str_eq(changes, "pipelines[0] (af).max_batch_delay_us auto -> 50");
    gf_config_free(&autoed);

    /* Nothing that needs a restart changed: the note stays empty. */
    note[0] = '\0';
    ck_assert_int_eq(gf_config_keep_restart_keys(&running, &next, note, sizeof note), 0);
    ck_assert_str_eq(note, "");
    gf_config_free(&next);
    gf_config_free(&running);
}
END_TEST

/* Pipelines added, removed, renamed or of another kind apply on reload: the
 * next configuration keeps its own; whether the slots can run them is the
 * server's to judge (test_systemd reloads them). */
START_TEST(keep_restart_keys_keeps_the_running_pipelines) {
    static const char *const layouts[] = {
        "{\"pipelines\": [{\"name\": \"af2\", \"kind\": \"affine\", \"params\": {\"a\": 3}}]}",
        "{\"pipelines\": [{\"name\": \"af\", \"kind\": \"sincos\"}]}",
        ("{\"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": {\"a\": 3}}, "
         "{\"name\": \"e\", \"kind\": \"echo\"}]}"),
    };
    gf_config running, next;
    parse_ok("{\"slots\": 3, \"pipelines\": [{\"name\": \"af\", \"kind\": \"affine\", \"params\": "
             "{\"a\": 2}}]}",
             &running);
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        char note[256] = "needs a restart: max_frame_bytes 9 above the slots' 8";
        parse_ok(layouts[i], &next);
        ck_assert_int_eq(gf_config_keep_restart_keys(&running, &next, note, sizeof note), 0);
        ck_assert_str_eq(note, "needs a restart: max_frame_bytes 9 above the slots' 8, slots 3 -> "
                               "2");
        ck_assert_uint_eq(next.pipeline_count, i == 2 ? 2 : 1);
        ck_assert_str_eq(next.pipelines[0].name, i == 0 ? "af2" : "af");
        ck_assert_str_eq(next.pipelines[0].stages[0].kind->name, i == 1 ? "sincos" : "affine");
        ck_assert_ptr_ne(next.pipelines, running.pipelines);
        gf_config_free(&next);
    }
    gf_config_free(&running);
}
END_TEST

/* A note that does not fit ends in "..." and stays a string. */
START_TEST(restart_note_is_cut_with_dots) {
    char note[32] = "";

    gf_config_note_restart(note, sizeof note, "slots %u -> %u", 2u, 4u);
    ck_assert_str_eq(note, "needs a restart: slots 2 -> 4");
    gf_config_note_restart(note, sizeof note, "trace_frames %u -> %u", 4096u, 16u);
    ck_assert_str_eq(note, "needs a restart: slots 2 -> ...");
    gf_config_note_restart(note, sizeof note, "engine");
    ck_assert_str_eq(note, "needs a restart: slots 2 -> ...");
}
END_TEST

/* The `key` cells of the first table after `heading` in `doc`, as a list of
 * "`key`" strings in keys[max]; returns how many. */
static size_t readme_table_keys(const char *doc, const char *heading, char keys[][64], size_t max) {
    const char *line = strstr(doc, heading);
    size_t n = 0;

    ck_assert_msg(line != NULL, "config/README.md has no \"%s\"", heading);
    for (line = strchr(line, '\n'); line != NULL && n < max; line = strchr(line + 1, '\n')) {
        const char *end;
        if (strncmp(line + 1, "## ", 3) == 0)
            break;
        if (strncmp(line + 1, "| `", 3) != 0)
            continue;
        end = strchr(line + 4, '`');
        ck_assert_ptr_nonnull(end);
        ck_assert_int_lt(end - (line + 4), 64);
        snprintf(keys[n++], 64, "%.*s", (int)(end - (line + 4)), line + 4);
    }
    return n;
}

/* config/README.md documents every key of the table and no other; its reload
 * table puts each key that needs a restart on the right side. */
START_TEST(readme_documents_every_key) {
    char keys[64][64], *doc = NULL, *restart_row;
    size_t count, doc_count, len = 0;
    const gf_config_key *table = gf_config_keys(&count);
    FILE *f = fopen(GF_TEST_CONFIG_DIR "/README.md", "rb");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(getdelim(&doc, &len, '\0', f) > 0, 1);
    fclose(f);
    doc_count = readme_table_keys(doc, "## Top-level keys", keys, 64);
    for (size_t i = 0; i < count; i++) {
        size_t j = 0;
        while (j < doc_count && strcmp(keys[j], table[i].key) != 0)
            j++;
        ck_assert_msg(j < doc_count, "config/README.md does not document \"%s\"", table[i].key);
    }
    for (size_t j = 0; j < doc_count; j++)
        ck_assert_msg(gf_config_key_find(keys[j]) != NULL,
                      "config/README.md documents \"%s\", which the key table lacks", keys[j]);
    ck_assert_uint_eq(doc_count, count);

    /* "| changes at once | needs a restart ... |", its separator, then the row. */
    restart_row = strstr(doc, "| changes at once |");
    ck_assert_ptr_nonnull(restart_row);
    restart_row = strchr(strchr(restart_row, '\n') + 1, '\n') + 1;
    restart_row = strchr(restart_row + 1, '|'); /* the restart cell; "\n" ends it */
    *strchr(restart_row, '\n') = '\0';
    for (size_t i = 0; i < count; i++) {
        char quoted[72];
        snprintf(quoted, sizeof quoted, "`%s`", table[i].key);
        if (table[i].reload == GF_RELOAD_NEEDS_RESTART)
            ck_assert_msg(strstr(restart_row, quoted), "README: %s needs a restart", quoted);
        else
            ck_assert_msg(!strstr(restart_row, quoted), "README: %s applies at once", quoted);
        ck_assert_msg(table[i].doc != NULL && table[i].doc[0] != '\0', "%s", table[i].key);
    }
    free(doc);
}
END_TEST

static Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("file");

    tcase_add_test(tc, default_file_parses_to_documented_values);
    tcase_add_test(tc, absent_keys_take_defaults);
    tcase_add_test(tc, pipeline_devices_parse_to_a_set);
    tcase_add_test(tc, shard_cpus_parse);
    tcase_add_test(tc, priorities_parse_and_cap);
    tcase_add_test(tc, pipeline_batching_keys_parse);
    tcase_add_test(tc, every_key_set_and_bounds_accepted);
    tcase_add_test(tc, slot_buffers_hold_a_full_batch_of_fixed_size_frames);
    tcase_add_test(tc, pinned_cap_and_new_keys);
    tcase_add_test(tc, device_region_cap);
    tcase_add_test(tc, accounts_parse);
    tcase_add_test(tc, load_keys_leaves_the_pipelines_out);
    tcase_add_test(tc, overrides_apply_before_the_checks);
    tcase_add_test(tc, load_file_errors_start_with_the_path);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_loop_test(tc, bad_config_is_rejected_with_key_path, 0,
                        (int)(sizeof bad_configs / sizeof bad_configs[0]));
    tcase_add_test(tc, unknown_kind_lists_every_kind);
    tcase_add_test(tc, exact_error_texts);
    tcase_add_test(tc, too_many_pipelines);
    tcase_add_test(tc, errors_are_escaped_and_truncated);
    suite_add_tcase(s, tc);

    tc = tcase_create("values");
    tcase_add_test(tc, engine_and_log_level_names);
    tcase_add_test(tc, params_from_json_defaults_and_prefix);
    tcase_add_test(tc, f32_range_is_checked_after_rounding);
    suite_add_tcase(s, tc);

    tc = tcase_create("list");
    tcase_add_test(tc, list_round_trip_default_config);
    tcase_add_test(tc, list_round_trip_awkward_values);
    tcase_add_test(tc, list_round_trip_random_floats);
    tcase_add_loop_test(tc, bad_list_is_rejected, 0, (int)(sizeof bad_lists / sizeof bad_lists[0]));
    tcase_add_test(tc, list_ignores_doc_and_unknown_keys);
    tcase_add_test(tc, list_publishes_frames);
    tcase_add_test(tc, list_plugin_stage_described_as_listed);
    suite_add_tcase(s, tc);

    tc = tcase_create("keys");
    tcase_add_test(tc, override_errors_name_what_was_expected);
    tcase_add_test(tc, keep_restart_keys_notes_and_keeps);
    tcase_add_test(tc, keep_restart_keys_keeps_the_running_pipelines);
    tcase_add_test(tc, restart_note_is_cut_with_dots);
    tcase_add_test(tc, readme_documents_every_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(config_suite());
}

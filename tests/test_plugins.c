/* SPDX-License-Identifier: MIT */
/*
 * Check suite of plugin stages and pipelines of several stages, against a
 * real gpuframed (issue 13), with the repository's plugins (plugins/):
 *   - every way loading a plugin fails gives one line naming the pipeline,
 *     the key and what is wrong, from --check-config;
 *   - the example plugin, the MLP and the chain normalize_u8 -> mlp stream
 *     frames verified against their C references (gpuframe stream
 *     --verify loads the same plugin to compute them);
 *   - LIST describes a plugin stage and the stages of a chain; TRACE gives
 *     each stage's share of a chain's kernel time;
 *   - reloads that add and remove a plugin while frames stream lose no
 *     frame, and the added plugin serves at once.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "runner.h"
#include "testutil.h"
#include "wire.h"

/* How long one gpuframe or gpuframed command may take. */
#define COMMAND_TIMEOUT_MS 120000
/* The demo network: a 32x32 RGB image's planar float32 in, 10 logits out. */
#define MLP_IN_FLOATS 3072
#define IMAGE_SIDE    32
/* Frames the background stream sends while the daemon reloads. */
#define RELOAD_STREAM_FRAMES "4000"
#define RELOADS              6

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */

#define EXAMPLE_SO  GF_TEST_PLUGIN_DIR "/gf_example.so"
#define MLP_SO      GF_TEST_PLUGIN_DIR "/gf_mlp.so"
#define MLP_WEIGHTS GF_TEST_PLUGIN_DIR "/mlp-demo.gfw"

/* A clamp stage, the MLP, and the chain of the demo. */
#define CLAMP_PIPELINE                                                                             \
    "{\"name\": \"clamp\", \"kind\": \"plugin\", \"path\": \"" EXAMPLE_SO "\", "                   \
    "\"params\": {\"lo\": -1.5, \"hi\": 2}}"
#define MLP_PIPELINE                                                                               \
    "{\"name\": \"mlp\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\", "                         \
    "\"params\": {\"weights\": \"" MLP_WEIGHTS "\"}}"
#define CHAIN_PIPELINE                                                                             \
    "{\"name\": \"classify\", \"stages\": ["                                                       \
    "{\"kind\": \"normalize_u8\", \"params\": {\"width\": 32, \"height\": 32}}, "                  \
    "{\"kind\": \"plugin\", \"path\": \"" MLP_SO "\", \"params\": {\"weights\": \"" MLP_WEIGHTS    \
    "\"}}]}"

static const char config_json[] = "{\"slots\": 2, \"pipelines\": ["
                                  "{\"name\": \"echo\", \"kind\": \"echo\"}, " CLAMP_PIPELINE
                                  ", " MLP_PIPELINE ", " CHAIN_PIPELINE "]}";

/* The batching tests' MLP on the CPU engine: 64-32-16-10, made at build
 * time (GF_TEST_MLP_SMALL_WEIGHTS), which batches as the demo network does
 * with a three-hundredth of its arithmetic, the daemon's and the verifying
 * clients' (the demo's took two minutes under TSan).  On a GPU the demo
 * network's, whose batched launch is what runs there. */
#define MLP_SMALL_IN_FLOATS 64
#define MLP_SMALL_PIPELINE                                                                         \
    "{\"name\": \"mlp\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\", "                         \
    "\"params\": {\"weights\": \"" GF_TEST_MLP_SMALL_WEIGHTS "\"}}"
static const char mlp_small_json[] = "{\"slots\": 2, \"pipelines\": [" MLP_SMALL_PIPELINE "]}";

/* Whether the batching tests use the small MLP: on the CPU engine. */
static int small_mlp(void) {
    return strcmp(g_engine, "cpu") == 0;
}

/* A daemon on `json`, and stopping it: exit 0 after SIGTERM and a log
 * without a failure line. */
static void start(gf_test_daemon *d, const char *json) {
    gf_test_ck_daemon_start(d, json, g_engine);
}

static void stop(gf_test_daemon *d) {
    gf_test_ck_daemon_stop(d, GF_TEST_STOP_EXIT_0_CLEAN_LOG);
}

/* `gpuframe stream --verify` of `count` frames of `size` bytes to `pipeline`:
 * exits 0 and reports no error. */
static void stream_verified(const gf_test_daemon *d, const char *pipeline, const char *size,
                            const char *count) {
    char *out, frames[24];
    /* A sanitized build streams a quarter of the frames (at least 8, twice
     * the window): the same pipelines, sizes and checks, without the
     * sanitizers' 20 to 40 times slower arithmetic on the rest (the demo
     * network, computed by the daemon and again by the client). */
    unsigned scale = gf_test_time_scale(), n = (unsigned)atoi(count);
    if (scale > 1)
        n = n / scale > 8 ? n / scale : n < 8 ? n : 8;
    snprintf(frames, sizeof frames, "%u", n);
    char *argv[] = {GF_TEST_CLIENT, "stream",
                    "--socket",     (char *)d->socket_path,
                    "--pipeline",   (char *)pipeline,
                    "--count",      frames,
                    "--window",     "4",
                    "--verify",     size ? "--size" : NULL,
                    (char *)size,   NULL};
    int rc = gf_test_ck_run(d->dir, argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 0 && strstr(out, " errors=0 ") != NULL, "stream to %s exited %d:\n%s",
                  pipeline, rc, out);
    free(out);
}

/* ---- load errors ------------------------------------------------------------------- */

static const struct load_case {
    const char *pipeline; /* one pipelines[] entry */
    const char *line;     /* what its one problem line must contain */
} load_cases[] = {
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/nonexistent/gf_x.so\"}",
     "pipelines[0] (p).path: cannot load: /nonexistent/gf_x.so: cannot open shared object file"},
    /* Text that is not the daemon's (a path, dlerror()) stays on its line. */
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"/nonexistent/a\\nb.so\"}",
     "pipelines[0] (p).path: expected the path of a plugin's shared object, got \"/nonexistent/a"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" MLP_SO
     "\", \"params\": {\"weights\": \"/nonexistent/x\\ny.gfw\"}}",
     "pipelines[0] (p): plugin mlp: weights: /nonexistent/x?y.gfw"},
    {"{\"name\": \"p\", \"kind\": \"plugin\"}",
     "pipelines[0] (p).path: expected the path of a plugin's shared object, got nothing"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_NO_ENTRY_SO "\"}",
     "pipelines[0] (p).path: " GF_TEST_NO_ENTRY_SO ": no symbol gf_plugin_entry"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_BAD_ABI_SO "\"}",
     "pipelines[0] (p).path: " GF_TEST_BAD_ABI_SO ": plugin ABI version 99; this gpuframed "
     "speaks 1 to 3"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_BAD_BATCH_SO "\"}",
     "pipelines[0] (p).path: " GF_TEST_BAD_BATCH_SO ": plugin bad_batch declares launch_batch "
     "with max_batch_frames 0; it takes 1 to 4096, with launch"},
    /* A plugin's description of its frames is checked at load. */
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_DESCRIBED_SO
     "\", \"params\": {\"mode\": 1}}",
     "pipelines[0] (p): plugin described: describe: no model loaded"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_DESCRIBED_SO
     "\", \"params\": {\"mode\": 2}}",
     "pipelines[0] (p): plugin described: describe: input: tensor 0: dimension 1 is 0 (at least "
     "1, or -1 once in a frame of one tensor)"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_DESCRIBED_SO
     "\", \"params\": {\"mode\": 3}}",
     "pipelines[0] (p): plugin described: describe: the input it describes (12 bytes) is one it "
     "refuses: length 12 is not 20"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_DESCRIBED_SO
     "\", \"params\": {\"mode\": 4}}",
     "pipelines[0] (p): plugin described: describe: its output for the input it describes is 8 "
     "bytes, which the output it describes cannot be"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_BAD_FLAGS_SO "\"}",
     "pipelines[0] (p).path: " GF_TEST_BAD_FLAGS_SO ": plugin bad_flags sets flags 0x2 this "
     "gpuframed does not know"},
    /* A pipeline never gives a plugin more frames than it declared. */
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_BATCH4_SO
     "\", \"max_batch_frames\": 8}",
     "pipelines[0] (p).max_batch_frames: 8 frames, more than plugin batch4 takes in one "
     "launch_batch (its max_batch_frames is 4)"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" EXAMPLE_SO
     "\", \"params\": {\"lo\": \"low\"}}",
     "pipelines[0] (p).params.lo: expected a number"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" EXAMPLE_SO
     "\", \"params\": {\"low\": 1}}",
     "pipelines[0] (p).params.low: unknown parameter of plugin clamp (known: lo, hi)"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" EXAMPLE_SO
     "\", \"params\": {\"lo\": 3, \"hi\": 2}}",
     "pipelines[0] (p): plugin clamp: "},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\"}",
     "pipelines[0] (p).params.weights: missing (required"},
    {"{\"name\": \"p\", \"kind\": \"plugin\", \"path\": \"" MLP_SO
     "\", \"params\": {\"weights\": \"/nonexistent.gfw\"}}",
     "pipelines[0] (p): plugin mlp: weights: /nonexistent.gfw"},
    {"{\"name\": \"p\", \"kind\": \"echo\", \"path\": \"" EXAMPLE_SO "\"}",
     "pipelines[0] (p).path: only a stage of kind \"plugin\" has a path"},
    {"{\"name\": \"p\", \"kind\": \"echo\", \"stages\": [{\"kind\": \"echo\"}]}",
     "pipelines[0] (p): give either \"stages\" or \"kind\""},
    {"{\"name\": \"p\", \"stages\": []}", "pipelines[0] (p).stages: expected an array of 1 to 8"},
    /* 16x16 RGB makes 768 floats; the demo network takes 3072. */
    {"{\"name\": \"p\", \"stages\": [{\"kind\": \"normalize_u8\", \"params\": {\"width\": 16, "
     "\"height\": 16}}, {\"kind\": \"plugin\", \"path\": \"" MLP_SO
     "\", \"params\": {\"weights\": \"" MLP_WEIGHTS "\"}}]}",
     "pipelines[0] (p).stages: the stages' lengths do not fit together: stage 1 (mlp): "},
};

/* Each bad pipeline fails --check-config with exit 2 and one problem line. */
START_TEST(load_errors_name_the_stage) {
    const struct load_case *c = &load_cases[_i];
    char dir[GF_TEST_DIR_MAX], path[GF_TEST_PATH_MAX], json[2048], *out;
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    snprintf(json, sizeof json, "{\"pipelines\": [%s]}", c->pipeline);
    ck_assert_int_eq(gf_test_write_file(path, json), 0);
    char *argv[] = {(char *)gf_test_daemon_path(), "--check-config", path, NULL};
    int rc = gf_test_ck_run(dir, argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 2, "--check-config exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, c->line) != NULL, "no \"%s\" in:\n%s", c->line, out);
    size_t lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    ck_assert_msg(lines == 2 && strstr(out, ": 1 problem(s)") != NULL,
                  "%zu lines, not one problem and the count:\n%s", lines, out);
    free(out);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- serving ---------------------------------------------------------------------- */

/* The example plugin, the MLP (batches of 1 and 7 vectors) and the chain
 * stream verified against their references. */
START_TEST(plugins_and_chains_stream_verified) {
    gf_test_daemon d;
    char size[32];
    start(&d, config_json);
    stream_verified(&d, "clamp", "65536", "64");
    snprintf(size, sizeof size, "%d", MLP_IN_FLOATS * 4);
    stream_verified(&d, "mlp", size, "32");
    snprintf(size, sizeof size, "%d", 7 * MLP_IN_FLOATS * 4);
    stream_verified(&d, "mlp", size, "32");
    stream_verified(&d, "classify", NULL, "48"); /* one 32x32 image: the default size */
    stop(&d);
}
END_TEST

/* LIST: a plugin stage gives its name, path and parameters; a chain its
 * stages.  TRACE: a chain's frames say how long each stage took. */
START_TEST(list_and_trace_describe_stages) {
    gf_test_daemon d;
    char *json = NULL;
    start(&d, config_json);
    stream_verified(&d, "classify", NULL, "8");
    gf_client *c = gf_test_ck_connect(d.socket_path);
    ck_assert_int_eq(gf_client_request_json(c, GF_MSG_LIST, &json, 10000), 0);
    cJSON *list = cJSON_Parse(json);
    ck_assert_ptr_nonnull(list);
    const cJSON *pl = cJSON_GetObjectItem(list, "pipelines");
    const cJSON *clamp = cJSON_GetArrayItem(pl, 1), *chain = cJSON_GetArrayItem(pl, 3);
    ck_assert_str_eq(gf_test_json_str(clamp, "kind"), "plugin");
    ck_assert_str_eq(gf_test_json_str(clamp, "plugin"), "clamp");
    ck_assert_str_eq(gf_test_json_str(clamp, "path"), EXAMPLE_SO);
    ck_assert_double_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(clamp, "params"), "lo")->valuedouble, -1.5);
    ck_assert_ptr_null(cJSON_GetObjectItem(chain, "kind"));
    const cJSON *stages = cJSON_GetObjectItem(chain, "stages");
    ck_assert_int_eq(cJSON_GetArraySize(stages), 2);
    ck_assert_str_eq(gf_test_json_str(cJSON_GetArrayItem(stages, 0), "kind"), "normalize_u8");
    ck_assert_str_eq(gf_test_json_str(cJSON_GetArrayItem(stages, 1), "plugin"), "mlp");
    cJSON_Delete(list);
    free(json);

    json = NULL;
    ck_assert_int_eq(gf_client_request_trace(c, 8, &json, 10000), 0);
    cJSON *trace = cJSON_Parse(json);
    ck_assert_ptr_nonnull(trace);
    const cJSON *frames = cJSON_GetObjectItem(trace, "frames"), *f;
    ck_assert_int_eq(cJSON_GetArraySize(frames), 8);
    cJSON_ArrayForEach(f, frames) {
        const cJSON *ks = cJSON_GetObjectItem(f, "kernel_stages");
        const cJSON *k = cJSON_GetObjectItem(f, "kernel");
        uint64_t pipeline = 0;
        ck_assert_int_eq(gf_test_json_u64(f, "pipeline", &pipeline), 0);
        ck_assert_uint_eq(pipeline, 3);
        if (cJSON_IsNull(k)) /* untimed (CUDA samples one frame in 64) */
            continue;
        ck_assert_int_eq(cJSON_GetArraySize(ks), 2);
        double sum =
            cJSON_GetArrayItem(ks, 0)->valuedouble + cJSON_GetArrayItem(ks, 1)->valuedouble;
        double span = cJSON_GetArrayItem(k, 1)->valuedouble - cJSON_GetArrayItem(k, 0)->valuedouble;
        /* The stages are the kernel interval, cut at their ends. */
        ck_assert_msg(sum <= span + 1000 && sum >= span * 0.5, "stages %.0f ns, kernel %.0f ns",
                      sum, span);
    }
    cJSON_Delete(trace);
    free(json);
    gf_client_close(c);
    stop(&d);
}
END_TEST

/* LIST publishes each plugin pipeline's frames as its plugin describes them
 * (the fallback for one of version 1), a chain's resolved from its one
 * input length; `gpuframe list`, which loads no plugin, shows them from the
 * LIST; and a described plugin's frames stream verified.  Two of the
 * plugins have no CUDA side: the cpu engine. */
START_TEST(list_publishes_plugin_frames) {
    static const char json[] =
        "{\"slots\": 2, \"pipelines\": [" CLAMP_PIPELINE ", " MLP_PIPELINE ", " CHAIN_PIPELINE
        ", {\"name\": \"v1\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_VERSION1_SO "\"}, "
        "{\"name\": \"d\", \"kind\": \"plugin\", \"path\": \"" GF_TEST_DESCRIBED_SO "\"}]}";
    static const struct {
        const char *name, *inputs, *outputs, *listed;
    } want[] = {
        {"clamp", "[{\"dtype\":\"float32\",\"shape\":[-1]}]",
         "[{\"dtype\":\"float32\",\"shape\":[-1]}]", "float32[n]->float32[n]"},
        {"mlp", "[{\"dtype\":\"float32\",\"shape\":[-1,3072]}]",
         "[{\"dtype\":\"float32\",\"shape\":[-1,10]}]", "float32[n,3072]->float32[n,10]"},
        {"classify", "[{\"dtype\":\"uint8\",\"shape\":[32,32,3]}]",
         "[{\"dtype\":\"float32\",\"shape\":[1,10]}]", "uint8[32,32,3]->float32[1,10]"},
        {"v1", "[{\"dtype\":\"uint8\",\"shape\":[-1]}]", "[{\"dtype\":\"uint8\",\"shape\":[-1]}]",
         "uint8[n]->uint8[n]"},
        {"d", "[{\"dtype\":\"float16\",\"shape\":[2,3]},{\"dtype\":\"int64\",\"shape\":[]}]",
         "[{\"dtype\":\"bfloat16\",\"shape\":[4]}]", "float16[2,3];int64[]->bfloat16[4]"},
    };
    gf_test_daemon d;
    char *text = NULL, *listing = NULL;
    start(&d, json);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    ck_assert_int_eq(gf_client_request_json(c, GF_MSG_LIST, &text, 10000), 0);
    /* A client that loads no plugin knows the lengths LIST's frames fix. */
    size_t count = 0;
    gf_pipeline *listed = gf_test_ck_list(c, &count);
    ck_assert_uint_eq(count, 5);
    char why[256] = "";
    ck_assert_int_eq(gf_pipeline_output_bytes(&listed[4], 20, why, sizeof why), 8);
    ck_assert_int_eq(gf_pipeline_output_bytes(&listed[4], 12, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 12 is not the 20 bytes of plugin described's input");
    ck_assert_int_eq(gf_pipeline_output_bytes(&listed[2], 32 * 32 * 3, why, sizeof why), 40);
    ck_assert_int_eq(gf_pipeline_output_bytes(&listed[0], 64, why, sizeof why), -1);
    ck_assert_msg(strstr(why, " is not loaded") != NULL, "%s", why);
    gf_pipelines_free(listed, count);
    gf_client_close(c);
    cJSON *list = cJSON_Parse(text);
    ck_assert_ptr_nonnull(list);
    char *argv[] = {GF_TEST_CLIENT, "list", "--socket", (char *)d.socket_path, NULL};
    ck_assert_int_eq(gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &listing), 0);
    for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++) {
        const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(list, "pipelines"), k);
        char *in = cJSON_PrintUnformatted(cJSON_GetObjectItem(p, "inputs"));
        char *out = cJSON_PrintUnformatted(cJSON_GetObjectItem(p, "outputs"));
        ck_assert_str_eq(gf_test_json_str(p, "name"), want[k].name);
        ck_assert_str_eq(in, want[k].inputs);
        ck_assert_str_eq(out, want[k].outputs);
        cJSON_free(in);
        cJSON_free(out);
        char line[256];
        snprintf(line, sizeof line, " %s ", want[k].listed);
        ck_assert_msg(strstr(listing, line) != NULL, "no \"%s\" in:\n%s", line, listing);
    }
    const cJSON *mlp_stage = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(list, "pipelines"), 2),
                            "stages"),
        1);
    char *in = cJSON_PrintUnformatted(cJSON_GetObjectItem(mlp_stage, "inputs"));
    ck_assert_str_eq(in, "[{\"dtype\":\"float32\",\"shape\":[1,3072]}]");
    cJSON_free(in);
    cJSON_Delete(list);
    free(text);
    free(listing);
    stream_verified(&d, "d", "20", "40");
    /* By reference without --verify: its lengths from LIST. */
    char *out = NULL;
    char *shm_argv[] = {GF_TEST_CLIENT, "stream", "--socket", (char *)d.socket_path,
                        "--pipeline",   "d",      "--size",   "20",
                        "--count",      "40",     "--shm",    NULL};
    int rc = gf_test_ck_run(d.dir, shm_argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 0 && strstr(out, " errors=0 ") && strstr(out, "transport=shm"),
                  "exit %d:\n%s", rc, out);
    free(out);
    /* A length LIST's frames rule out is refused here, saying why. */
    shm_argv[7] = "12";
    rc = gf_test_ck_run(d.dir, shm_argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc == 2 && strstr(out, "--size 12: pipeline 'd' (described) cannot take it: "
                                         "length 12 is not the 20 bytes of plugin described's "
                                         "input\n"),
                  "exit %d:\n%s", rc, out);
    free(out);
    stop(&d);
}
END_TEST

/* ---- reloads ---------------------------------------------------------------------- */

/* Starts `gpuframe stream` of `count` frames in the background, output into
 * `path`. */
static pid_t spawn_stream(const gf_test_daemon *d, const char *pipeline, const char *count,
                          const char *path, int verify) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        execl(GF_TEST_CLIENT, GF_TEST_CLIENT, "stream", "--socket", d->socket_path, "--pipeline",
              pipeline, "--count", count, "--window", "8", "--size", "16384",
              verify ? "--verify" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Reloads between [echo, clamp] and [echo, mlp] while echo frames stream:
 * every frame is answered and verified, the plugin a reload adds serves at
 * once. */
/* How far the reloads in `log` have come: the reloads ended (taken or
 * rejected) into *ended; returns nonzero when none runs or waits to run (a
 * SIGHUP during a reload queues one more, "a reload is under way"). */
static int reloads_settled(const char *log, int *ended) {
    int running = 0, queued = 0;
    *ended = 0;
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (gf_test_line_has(line, len, "SIGHUP: reloading")) {
            running = 1;
            queued = 0;
        } else if (gf_test_line_has(line, len, "a reload is under way")) {
            queued = 1;
        } else if (gf_test_line_has(line, len, "reloaded ") ||
                   gf_test_line_has(line, len, "reload rejected")) {
            running = 0;
            ++*ended;
        }
        line = end ? end + 1 : NULL;
    }
    return !running && !queued;
}

/* Replaces d's configuration with `json`, sends SIGHUP and waits until the
 * daemon logged the end of a reload after it and none runs or waits any
 * more, so that the last one read `json` (reloads sent just before may
 * still be running: the daemon queues ours behind them).  With many shards
 * on several devices, preparing the plugins takes its time. */
static void reload_and_wait(gf_test_daemon *d, const char *json) {
    char *log = gf_test_read_file(d->log_path, NULL);
    int before = 0, now = 0, settled = 0;
    reloads_settled(log, &before);
    free(log);
    gf_test_ck_daemon_put_config(d, json);
    ck_assert_int_eq(gf_test_daemon_signal(d, SIGHUP), 0);
    for (int ms = 0; !(settled && now > before) && ms < 20000 * (int)gf_test_time_scale();
         ms += 20) {
        gf_test_sleep_ms(20);
        log = gf_test_read_file(d->log_path, NULL);
        settled = reloads_settled(log ? log : "", &now);
        free(log);
    }
    ck_assert_msg(settled && now > before, "the reload did not end within 20 s");
}

START_TEST(reloads_add_and_remove_plugins_while_streaming) {
    static const char with_clamp[] =
        "{\"slots\": 2, \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}, " CLAMP_PIPELINE
        "]}";
    static const char with_mlp[] =
        "{\"slots\": 2, \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}, " MLP_PIPELINE
        "]}";
    gf_test_daemon d;
    char out_path[GF_TEST_PATH_MAX], size[32];
    start(&d, with_clamp);
    snprintf(out_path, sizeof out_path, "%s/stream.out", d.dir);
    pid_t pid = spawn_stream(&d, "echo", RELOAD_STREAM_FRAMES, out_path, 1);
    for (int i = 0; i < RELOADS; i++) {
        gf_test_sleep_ms(150);
        gf_test_ck_daemon_put_config(&d, i % 2 ? with_clamp : with_mlp);
        ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char *out = gf_test_read_file(out_path, NULL);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                      strstr(out, "frames=" RELOAD_STREAM_FRAMES " errors=0 ") != NULL,
                  "the echo stream lost frames across reloads (status %d):\n%s", status, out);
    free(out);

    /* The last reload (i = 5) put clamp back; one more adds the MLP. */
    reload_and_wait(&d, with_mlp);
    snprintf(size, sizeof size, "%d", 2 * MLP_IN_FLOATS * 4);
    stream_verified(&d, "mlp", size, "16");

    /* A plugin removed under its own frames: those in flight finish with
     * the stage they began with (a reference each), which is destroyed
     * after the last; frames sent to its id after the reload go to what the
     * id is now (16 KiB is no length the MLP takes: bad_length).  Under
     * ASan this is where a stage freed too early would show. */
    reload_and_wait(&d, with_clamp);
    pid = spawn_stream(&d, "clamp", "40000", out_path, 0);
    gf_test_sleep_ms(100);
    gf_test_ck_daemon_put_config(&d, with_mlp);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    out = gf_test_read_file(out_path, NULL);
    unsigned long long frames = 0, errors = 0;
    const char *line = strstr(out, "frames=");
    ck_assert_msg(line && sscanf(line, "frames=%llu errors=%llu", &frames, &errors) == 2 &&
                      frames == 40000 && errors > 0 && errors < frames,
                  "the reload did not land mid-stream (answered, then bad_length):\n%s", out);
    free(out);
    stream_verified(&d, "echo", "4096", "64");
    stop(&d);
}
END_TEST

/* A reload whose new pipelines cannot run keeps the running ones, and with
 * them the frame size their plugins were created for: a plugin is never
 * given a frame longer than its create() was promised. */
START_TEST(reload_keeping_pipelines_keeps_their_frame_size) {
    static const char small[] =
        "{\"slots\": 2, \"max_frame_bytes\": 4096, \"pipelines\": [" CLAMP_PIPELINE "]}";
    /* The chain needs scratch, which a daemon started without chains lacks. */
    static const char large_with_chain[] =
        "{\"slots\": 2, \"max_frame_bytes\": 65536, \"pipelines\": [" CLAMP_PIPELINE ", "
        "{\"name\": \"chain\", \"stages\": [{\"kind\": \"echo\"}, {\"kind\": \"echo\"}]}]}";
    gf_test_daemon d;
    char *out;
    start(&d, "{\"slots\": 2, \"max_frame_bytes\": 65536, \"pipelines\": [" CLAMP_PIPELINE "]}");
    reload_and_wait(&d, small);
    reload_and_wait(&d, large_with_chain);
    /* --no-check: the client knows the limit from LIST, and sends anyway. */
    char *argv[] = {GF_TEST_CLIENT, "stream", "--socket", d.socket_path, "--pipeline", "clamp",
                    "--size",       "8192",   "--count",  "1",           "--no-check", NULL};
    int rc = gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &out);
    ck_assert_msg(rc != 0 && strstr(out, "too_large") != NULL,
                  "an 8 KiB frame reached a plugin created for 4 KiB (exit %d):\n%s", rc, out);
    free(out);
    stream_verified(&d, "clamp", "4096", "8");
    char *log = gf_test_read_file(d.log_path, NULL);
    ck_assert_msg(log && strstr(log, "max_frame_bytes 65536 above the kept pipelines' 4096"),
                  "the log does not say why max_frame_bytes stayed:\n%s", log ? log : "");
    free(log);
    /* That warning is the point here: only the exit status is checked. */
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* A plugin built for ABI version 1 (before launch_batch) still loads, and
 * its frames are verified against its reference, batched ones included
 * (window 16 of 100-byte frames).  It has no CUDA side: the cpu engine. */
START_TEST(a_version_1_plugin_still_runs) {
    static const char json[] = "{\"slots\": 2, \"pipelines\": [{\"name\": \"v1\", \"kind\": "
                               "\"plugin\", \"path\": \"" GF_TEST_VERSION1_SO "\"}]}";
    gf_test_daemon d;
    start(&d, json);
    stream_verified(&d, "v1", "100", "400");
    stream_verified(&d, "v1", "65536", "16");
    stop(&d);
}
END_TEST

/* The MLP's frames in submissions of many frames (one-vector frames at
 * window 64 and 7) and of one (window 1), verified against the reference:
 * on the GPU, its launch_batch runs them (test_plugin_builtin_gpu checks
 * batches of exactly 1, 7 and 64 frames). */
START_TEST(mlp_batches_stream_verified) {
    gf_test_daemon d;
    char size[32];
    start(&d, small_mlp() ? mlp_small_json : config_json);
    snprintf(size, sizeof size, "%d", (small_mlp() ? MLP_SMALL_IN_FLOATS : MLP_IN_FLOATS) * 4);
    static const char *const windows[] = {"64", "7", "1"};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        char *out;
        char *argv[] = {GF_TEST_CLIENT, "stream",  "--socket", d.socket_path, "--pipeline",
                        "mlp",          "--count", "640",      "--window",    (char *)windows[i],
                        "--verify",     "--size",  size,       NULL};
        int rc = gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &out);
        ck_assert_msg(rc == 0 && strstr(out, " errors=0 ") != NULL, "window %s exited %d:\n%s",
                      windows[i], rc, out);
        free(out);
    }
    stop(&d);
}
END_TEST

/* ---- batches across connections (issue 24) ---------------------------------------- */

/* Pipelines whose batches wait up to 100 ms for more frames, so that the
 * frames of several connections meet in one: the MLP in batches of at most
 * 1, 7 and 64 one-vector frames, and clamp (exact) in batches of 4.  One
 * shard: every connection's frames may meet. */
#define BATCHED_MLP(name, frames, weights)                                                         \
    "{\"name\": \"" name "\", \"kind\": \"plugin\", \"path\": \"" MLP_SO "\", "                    \
    "\"params\": {\"weights\": \"" weights "\"}, \"max_batch_frames\": " frames ", "               \
    "\"max_batch_delay_us\": 100000}"
#define BATCHED_JSON(weights)                                                                      \
    "{\"shards\": 1, \"slots\": 2, \"pipelines\": [" BATCHED_MLP(                                  \
        "mlp1", "1",                                                                               \
        weights) ", " BATCHED_MLP("mlp7", "7",                                                     \
                                  weights) ", " BATCHED_MLP("mlp64", "64",                         \
                                                            weights) ", "                          \
                                                                     "{\"name\": \"clamp4\", "     \
                                                                     "\"kind\": \"plugin\", "      \
                                                                     "\"path\": \"" EXAMPLE_SO     \
                                                                     "\", "                        \
                                                                     "\"params\": {\"lo\": -1.5, " \
                                                                     "\"hi\": 2}, "                \
                                                                     "\"max_batch_frames\": 4, "   \
                                                                     "\"max_batch_delay_us\": "    \
                                                                     "100000}]}"
static const char batched_json[] = BATCHED_JSON(MLP_WEIGHTS);
static const char batched_small_json[] = BATCHED_JSON(GF_TEST_MLP_SMALL_WEIGHTS);
enum { MLP1_ID, MLP7_ID, MLP64_ID, CLAMP4_ID };

/* What TRACE says of pipeline `id`'s submissions: the most frames one had,
 * and how many had exactly `want` frames from more than one connection. */
typedef struct batch_shape {
    uint64_t most;
    uint64_t mixed_full;
} batch_shape;

static batch_shape trace_batches(const char *socket_path, uint64_t id, uint64_t want) {
    gf_client *c = gf_test_ck_connect(socket_path);
    char *json = NULL;
    ck_assert_int_eq(gf_client_request_trace(c, 0, &json, 10000), 0);
    gf_client_close(c);
    cJSON *trace = cJSON_Parse(json);
    ck_assert_ptr_nonnull(trace);
    const cJSON *frames = cJSON_GetObjectItem(trace, "frames"), *f;
    /* Frames of one submission lie together in the ring: one pass. */
    batch_shape shape = {0, 0};
    uint64_t sub = 0, n = 0, first_conn = 0;
    int mixed = 0;
    cJSON_ArrayForEach(f, frames) {
        uint64_t pipeline, s, conn;
        ck_assert_int_eq(gf_test_json_u64(f, "pipeline", &pipeline), 0);
        ck_assert_int_eq(gf_test_json_u64(f, "submission", &s), 0);
        ck_assert_int_eq(gf_test_json_u64(f, "conn", &conn), 0);
        if (pipeline != id)
            continue;
        if (s != sub) {
            shape.mixed_full += n == want && mixed;
            sub = s, n = 0, mixed = 0, first_conn = conn;
        }
        n++;
        mixed |= conn != first_conn;
        shape.most = n > shape.most ? n : shape.most;
    }
    shape.mixed_full += n == want && mixed;
    cJSON_Delete(trace);
    free(json);
    return shape;
}

/* `clients` verified streams of `count` one-vector frames each at `window`
 * to `pipeline`, at once; each must verify every result. */
static void streams_verified(const gf_test_daemon *d, const char *pipeline, int clients,
                             const char *count, const char *window) {
    char size[32], path[GF_TEST_PATH_MAX];
    pid_t pids[16];
    ck_assert_int_le(clients, 16);
    snprintf(size, sizeof size, "%d", (small_mlp() ? MLP_SMALL_IN_FLOATS : MLP_IN_FLOATS) * 4);
    for (int i = 0; i < clients; i++) {
        snprintf(path, sizeof path, "%s/client%d.out", d->dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ck_assert_int_ge(fd, 0);
        char *argv[] = {GF_TEST_CLIENT, "stream",         "--socket", (char *)d->socket_path,
                        "--pipeline",   (char *)pipeline, "--count",  (char *)count,
                        "--window",     (char *)window,   "--size",   size,
                        "--verify",     "--no-shm",       NULL};
        pids[i] = gf_test_spawn(argv, fd, fd);
        close(fd);
        ck_assert_int_gt(pids[i], 0);
    }
    for (int i = 0; i < clients; i++) {
        int status = 0;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        snprintf(path, sizeof path, "%s/client%d.out", d->dir, i);
        char *out = gf_test_read_file(path, NULL);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && out &&
                          strstr(out, " errors=0 ") != NULL,
                      "client %d of %s (status %d):\n%s", i, pipeline, status, out ? out : "");
        free(out);
    }
}

/* `conns` connections of this process send `per` frames each of `bytes`
 * to pipeline `id`, every frame before any result is read, then read each
 * result: a burst that one batch may take whole, sent in far less than a
 * batch's 100 ms wait however slowly the machine starts clients.  Until
 * TRACE shows a submission of exactly conns * per frames from more than
 * one connection, up to four bursts (a sender descheduled mid-burst splits
 * one).  Returns TRACE's batch shape after the last. */
static batch_shape full_batch_of_a_burst(const gf_test_daemon *d, uint64_t id, uint32_t bytes,
                                         int conns, int per) {
    enum { CONNS_MAX = 16 };
    ck_assert_int_le(conns, CONNS_MAX);
    char *payload = calloc(1, bytes);
    ck_assert_ptr_nonnull(payload);
    batch_shape s = {0, 0};
    for (int burst = 0; burst < 4 && s.mixed_full == 0; burst++) {
        int fds[CONNS_MAX];
        for (int c = 0; c < conns; c++)
            ck_assert_int_ge(fds[c] = gf_test_raw_connect(d->socket_path), 0);
        for (int c = 0; c < conns; c++)
            for (int i = 0; i < per; i++) {
                gf_header h = gf_test_header(GF_MSG_FRAME, (uint64_t)i + 1, id, bytes);
                ck_assert_int_eq(gf_test_raw_send_header(fds[c], &h), 0);
                ck_assert_int_eq(gf_test_raw_send(fds[c], payload, bytes), 0);
            }
        for (int c = 0; c < conns; c++) {
            for (int i = 0; i < per; i++) {
                char got[4096], err[256];
                gf_header h;
                ck_assert_msg(gf_test_raw_recv_reply(fds[c], &h, got, sizeof got, 30000, err,
                                                     sizeof err) == 0,
                              "connection %d frame %d: %s", c, i + 1, err);
                ck_assert_uint_eq(h.type, GF_MSG_RESULT);
                ck_assert_uint_eq(h.frame_id, (uint64_t)i + 1);
            }
            close(fds[c]);
        }
        s = trace_batches(d->socket_path, id, (uint64_t)conns * (uint64_t)per);
    }
    free(payload);
    return s;
}

/* Many clients of one pipeline share its batches: each client's results
 * are verified against the reference, and no submission holds more than
 * max_batch_frames frames; a burst from several connections fills one to
 * exactly max_batch_frames (clients at window 1 can make no batch of 7
 * otherwise, at window 8 none of 64), which streaming clients a sanitizer
 * slows may not; with max_batch_frames 1 every frame has its own. */
START_TEST(batches_take_frames_of_many_connections) {
    gf_test_daemon d;
    start(&d, small_mlp() ? batched_small_json : batched_json);
    uint32_t bytes = (small_mlp() ? MLP_SMALL_IN_FLOATS : MLP_IN_FLOATS) * 4;
    streams_verified(&d, "mlp7", 9, "14", "1");
    ck_assert_uint_le(trace_batches(d.socket_path, MLP7_ID, 7).most, 7);
    batch_shape s = full_batch_of_a_burst(&d, MLP7_ID, bytes, 7, 1);
    ck_assert_uint_eq(s.most, 7);
    ck_assert_uint_ge(s.mixed_full, 1);
    streams_verified(&d, "mlp64", 16, "48", "8");
    ck_assert_uint_le(trace_batches(d.socket_path, MLP64_ID, 64).most, 64);
    s = full_batch_of_a_burst(&d, MLP64_ID, bytes, 8, 8);
    ck_assert_uint_eq(s.most, 64);
    ck_assert_uint_ge(s.mixed_full, 1);
    streams_verified(&d, "mlp1", 4, "16", "4");
    s = trace_batches(d.socket_path, MLP1_ID, 1);
    ck_assert_uint_eq(s.most, 1);
    /* On the GPU the untimed batches (all but one in 64) were replayed
     * from CUDA graphs, every result verified all the same. */
    gf_client *q = gf_test_ck_connect(d.socket_path);
    cJSON *st = gf_test_ck_stats(q);
    uint64_t graphed = gf_test_ck_u64(st, "slots.graph_submissions"),
             subs = gf_test_ck_u64(st, "slots.submissions");
    if (strcmp(g_engine, "cuda") == 0)
        ck_assert_msg(graphed * 2 > subs, "%llu of %llu submissions from graphs",
                      (unsigned long long)graphed, (unsigned long long)subs);
    else
        ck_assert_uint_eq(graphed, 0);
    cJSON_Delete(st);
    gf_client_close(q);
    stop(&d);
}
END_TEST

/* A FRAME of `bytes` from `in` for `pipeline` on `fd`, naming priority
 * class `cls` (0: none, a version-2 header). */
static void send_as(int fd, uint64_t frame_id, uint32_t pipeline, unsigned cls, const void *in,
                    size_t bytes) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, pipeline, bytes);
    if (cls) {
        h.version = GF_PROTOCOL_VERSION_SCHED;
        h.flags = (uint16_t)(cls << GF_FLAG_CLASS_SHIFT);
    }
    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    ck_assert_int_eq(gf_test_raw_send(fd, in, bytes), 0);
}

/* One frame of FLOATS values for clamp pipeline `pipeline` on `fd`, naming
 * priority class `cls` (0: none): value i is base + i / 64. */
enum { CLAMP_FLOATS = 256 };
static void send_clamp_to(int fd, uint64_t frame_id, uint32_t pipeline, float base, unsigned cls) {
    float v[CLAMP_FLOATS];
    for (int i = 0; i < CLAMP_FLOATS; i++)
        v[i] = base + (float)i / 64;
    send_as(fd, frame_id, pipeline, cls, v, sizeof v);
}

/* One clamp4 frame (send_clamp_to). */
static void send_clamp(int fd, uint64_t frame_id, float base) {
    send_clamp_to(fd, frame_id, CLAMP4_ID, base, 0);
}

/* Reads frame `frame_id`'s RESULT on `fd`: exactly clamp(-1.5, 2) of it. */
static void expect_clamp(int fd, uint64_t frame_id, float base) {
    float got[CLAMP_FLOATS];
    gf_header h;
    char err[256];
    ck_assert_msg(gf_test_raw_recv_reply(fd, &h, got, sizeof got, 10000, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(h.type, GF_MSG_RESULT);
    ck_assert_uint_eq(h.frame_id, frame_id);
    ck_assert_uint_eq(h.payload_bytes, sizeof got);
    for (int i = 0; i < CLAMP_FLOATS; i++) {
        float x = base + (float)i / 64, want = x < -1.5f ? -1.5f : x > 2.0f ? 2.0f : x;
        ck_assert_msg(got[i] == want, "value %d: %g, not %g", i, got[i], want);
    }
}

/* STATS' submissions and frames of pipeline clamp4 in `*subs`, `*frames`. */
static void clamp4_batches(gf_client *q, uint64_t *subs, uint64_t *frames) {
    cJSON *st = gf_test_ck_stats(q);
    const cJSON *b = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(st, "pipelines"), CLAMP4_ID), "batches");
    ck_assert_int_eq(gf_test_json_u64(b, "submissions", subs), 0);
    ck_assert_int_eq(gf_test_json_u64(b, "frames", frames), 0);
    cJSON_Delete(st);
}

/* A realtime frame's batch of a plugin pipeline replays its graph on a
 * stream of the device's greatest priority (an H100 or H200 has several),
 * and one of a built-in kind launches its kernels there, with exactly the
 * results of the others: frames one at a time, six clamp frames naming
 * realtime and six batch, then two echo frames naming realtime; STATS
 * counts the eight as priority submissions on the CUDA engine, none on the
 * CPU engine. */
START_TEST(realtime_frames_replay_at_the_device_s_priority) {
    gf_test_daemon d;
    start(&d,
          "{\"shards\": 1, \"slots\": 2, \"priorities\": {\"default\": \"realtime\"}, "
          "\"pipelines\": [{\"name\": \"clamp\", \"kind\": \"plugin\", \"path\": \"" EXAMPLE_SO
          "\", \"params\": {\"lo\": -1.5, \"hi\": 2}}, {\"name\": \"echo\", \"kind\": \"echo\"}]}");
    int fd = gf_test_ck_raw_connect(d.socket_path);
    for (uint64_t id = 1; id <= 12; id++) {
        float base = -3.0f + (float)id / 4;
        send_clamp_to(fd, id, 0, base, id <= 6 ? GF_CLASS_REALTIME : GF_CLASS_BATCH);
        expect_clamp(fd, id, base);
    }
    for (uint64_t id = 13; id <= 14; id++) {
        uint8_t in[1024], got[1024];
        for (size_t i = 0; i < sizeof in; i++)
            in[i] = (uint8_t)(i * 7 + id);
        send_as(fd, id, 1, GF_CLASS_REALTIME, in, sizeof in);
        gf_header h;
        char err[256];
        ck_assert_msg(gf_test_raw_recv_reply(fd, &h, got, sizeof got, 10000, err, sizeof err) == 0,
                      "%s", err);
        ck_assert_uint_eq(h.type, GF_MSG_RESULT);
        ck_assert_uint_eq(h.payload_bytes, sizeof got);
        ck_assert_int_eq(memcmp(got, in, sizeof in), 0);
    }
    close(fd);
    gf_client *q = gf_test_ck_connect(d.socket_path);
    cJSON *st = gf_test_ck_stats(q);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.realtime.frames"), 8);
    ck_assert_uint_eq(gf_test_ck_u64(st, "priorities.batch.frames"), 6);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.submissions"), 14);
    ck_assert_uint_eq(gf_test_ck_u64(st, "slots.priority_submissions"),
                      strcmp(g_engine, "cuda") == 0 ? 8 : 0);
    cJSON_Delete(st);
    gf_client_close(q);
    stop(&d);
}
END_TEST

/* Frames of a connection that closes, of one that does not read, and of one
 * stalled mid-payload hold back no one else's: the batch of four goes with
 * the closed connection's three and the other's one, whose result is
 * exact; the closed one's are counted dropped (TRACE has only the frames
 * answered, STATS counts the batch); the stalled frame never joins a batch,
 * and the one beside it is answered after the delay. */
START_TEST(a_connection_closing_mid_batch_holds_back_no_one) {
    gf_test_daemon d;
    start(&d, batched_json);
    gf_client *q = gf_test_ck_connect(d.socket_path);
    cJSON *before = gf_test_ck_stats(q);
    int a = gf_test_raw_connect(d.socket_path), b = gf_test_raw_connect(d.socket_path);
    ck_assert(a >= 0 && b >= 0);
    for (uint64_t i = 0; i < 3; i++)
        send_clamp(a, 1 + i, -3.0f + (float)i);
    close(a);
    send_clamp(b, 7, -2.0f);
    expect_clamp(b, 7, -2.0f);
    uint64_t subs, frames;
    clamp4_batches(q, &subs, &frames);
    ck_assert_uint_eq(subs, 1);
    ck_assert_uint_eq(frames, 4);

    /* One that never reads its results. */
    int silent = gf_test_raw_connect(d.socket_path);
    ck_assert_int_ge(silent, 0);
    for (uint64_t i = 0; i < 3; i++)
        send_clamp(silent, 1 + i, 0.5f);
    send_clamp(b, 8, 1.0f);
    expect_clamp(b, 8, 1.0f);
    clamp4_batches(q, &subs, &frames);
    ck_assert_uint_eq(subs, 2);
    ck_assert_uint_eq(frames, 8);
    ck_assert_uint_eq(trace_batches(d.socket_path, CLAMP4_ID, 4).mixed_full, 1);

    /* One stalled mid-payload: half a frame. */
    int stalled = gf_test_raw_connect(d.socket_path);
    ck_assert_int_ge(stalled, 0);
    float half[CLAMP_FLOATS / 2] = {0};
    gf_header h = gf_test_header(GF_MSG_FRAME, 1, CLAMP4_ID, CLAMP_FLOATS * sizeof(float));
    ck_assert_int_eq(gf_test_raw_send_header(stalled, &h), 0);
    ck_assert_int_eq(gf_test_raw_send(stalled, half, sizeof half), 0);
    uint64_t t0 = gf_now_ns();
    send_clamp(b, 9, 0.0f);
    expect_clamp(b, 9, 0.0f);
    /* It waited for the delay (100 ms), not for the stalled frame. */
    ck_assert_uint_ge(gf_now_ns() - t0, 100000000u);
    clamp4_batches(q, &subs, &frames);
    ck_assert_uint_eq(subs, 3);
    ck_assert_uint_eq(frames, 9);

    cJSON *after = gf_test_ck_stats(q);
    uint64_t d0, d1, a0, a1;
    ck_assert_int_eq(gf_test_json_u64(before, "frames.dropped", &d0), 0);
    ck_assert_int_eq(gf_test_json_u64(after, "frames.dropped", &d1), 0);
    ck_assert_int_eq(gf_test_json_u64(before, "frames.answered", &a0), 0);
    ck_assert_int_eq(gf_test_json_u64(after, "frames.answered", &a1), 0);
    ck_assert_uint_eq(d1 - d0, 3); /* the closed connection's */
    ck_assert_uint_eq(a1 - a0, 6); /* b's three, the silent one's three */
    cJSON_Delete(before);
    cJSON_Delete(after);
    close(silent);
    close(stalled);
    close(b);
    gf_client_close(q);
    stop(&d);
}
END_TEST

/* The CUDA engine: a launch that fails after work was queued on the slot's
 * stream (tests/plugins/fail_launch.c: a host function that sleeps
 * FAIL_SLEEP_MS, a copy, then cudaErrorInvalidValue for a frame of
 * FAIL_BYTES) is answered engine only once that work has run, for until
 * then it may read the frame's shared memory, which its region keeps
 * pinned.  The region then goes, and the pipeline goes on serving, exact. */
#define FAIL_SLEEP_MS 300
#define FAIL_BYTES    64
#define FAIL_REGION   65536
static const char fail_launch_json[] =
    "{\"slots\": 2, \"pipelines\": [{\"name\": \"fail\", \"kind\": \"plugin\", \"path\": "
    "\"" GF_TEST_FAIL_LAUNCH_SO "\", \"params\": {\"sleep_ms\": 300, \"fail_bytes\": 64}}]}";

START_TEST(a_failed_launch_is_answered_after_its_queued_work) {
    gf_test_daemon d;
    start(&d, fail_launch_json);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    size_t count = 0;
    gf_pipeline *p = gf_test_ck_list(c, &count);
    ck_assert_uint_eq(count, 1);
    uint32_t id = p[0].id;
    gf_pipelines_free(p, count);
    gf_client_region reg;
    ck_assert_msg(gf_client_region_create(c, FAIL_REGION, &reg, GF_TEST_REPLY_TIMEOUT_MS) == 0,
                  "region: %s", gf_client_error(c));
    memset(reg.base, 0x5A, FAIL_BYTES);
    gf_shm_frame f = {.region_id = reg.id,
                      .in_bytes = FAIL_BYTES,
                      .out_offset = FAIL_REGION / 2,
                      .out_capacity = FAIL_BYTES};
    uint64_t t0 = gf_now_ns();
    ck_assert_int_eq(gf_client_send_frame_shm(c, id, 1, &f), 0);
    gf_reply r;
    ck_assert_msg(gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS) == 0, "recv: %s",
                  gf_client_error(c));
    uint64_t took = gf_now_ns() - t0;
    ck_assert_uint_eq(r.header.frame_id, 1);
    ck_assert_uint_eq(r.header.type, GF_MSG_ERROR);
    ck_assert_str_eq(gf_status_name(r.header.status), "engine");
    static const char words[] = "the cuda engine could not start this frame";
    ck_assert_msg(r.payload_bytes == sizeof words - 1 &&
                      memcmp(r.payload, words, sizeof words - 1) == 0,
                  "ERROR text \"%.*s\"", (int)r.payload_bytes, (const char *)r.payload);
    ck_assert_msg(took >= FAIL_SLEEP_MS * 1000000ull,
                  "answered %.1f ms after it was sent, before the %d ms of work queued ahead of "
                  "its failed launch had run",
                  (double)took / 1e6, FAIL_SLEEP_MS);
    ck_assert_int_eq(gf_client_region_destroy(c, &reg, GF_TEST_REPLY_TIMEOUT_MS), 0);

    /* Served on: a frame of another length comes back exact. */
    unsigned char in[FAIL_BYTES / 2];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    ck_assert_int_eq(gf_client_send_frame(c, id, 2, in, sizeof in), 0);
    ck_assert_msg(gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS) == 0, "recv: %s",
                  gf_client_error(c));
    ck_assert_uint_eq(r.header.frame_id, 2);
    ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
    ck_assert_uint_eq(r.payload_bytes, sizeof in);
    ck_assert_int_eq(memcmp(r.payload, in, sizeof in), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.engine"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "frames.failed"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.regions_removed"), 1);
    gf_client_close(c);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

static Suite *plugins_suite(void) {
    Suite *s = suite_create("plugins");
    TCase *tc = tcase_create("load");
    tcase_add_loop_test(tc, load_errors_name_the_stage, 0,
                        (int)(sizeof load_cases / sizeof load_cases[0]));
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("serve");
    tcase_add_test(tc, plugins_and_chains_stream_verified);
    tcase_add_test(tc, list_and_trace_describe_stages);
    tcase_add_test(tc, reloads_add_and_remove_plugins_while_streaming);
    tcase_add_test(tc, reload_keeping_pipelines_keeps_their_frame_size);
    tcase_add_test(tc, mlp_batches_stream_verified);
    tcase_add_test(tc, batches_take_frames_of_many_connections);
    tcase_add_test(tc, realtime_frames_replay_at_the_device_s_priority);
    tcase_add_test(tc, a_connection_closing_mid_batch_holds_back_no_one);
    if (strcmp(g_engine, "cpu") == 0) {
        tcase_add_test(tc, a_version_1_plugin_still_runs);
        tcase_add_test(tc, list_publishes_plugin_frames);
    } else {
        tcase_add_test(tc, a_failed_launch_is_answered_after_its_queued_work);
    }
    tcase_set_timeout(tc, 240);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(plugins_suite());
}

/*
 * Check suite of the gpuframe command (client/gpuframe*.c) against a real
 * gpuframed: what it prints and writes, byte for byte where it can be known.
 *   - `stats --prometheus --output FILE`, the textfile collector's writer:
 *     the file parses as exposition format 0.0.4 (prom.h) and holds the
 *     traffic sent; it is replaced atomically (mode 0644, no temporary file
 *     left), and a failed run leaves it as it was;
 *   - the stats table of a CPU daemon names no GPU and no copy times;
 *   - a stream in which every frame fails says what failed, not a rate;
 *   - --seed with --input is refused.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prom.h"
#include "runner.h"
#include "testutil.h"

/* How long one gpuframe command may take. */
#define COMMAND_TIMEOUT_MS 60000
/* Frames streamed before the statistics are read. */
#define FRAMES_SENT 48
/* Their size: small, so the test is quick on any engine. */
#define FRAME_BYTES 4096

static const char *g_engine; /* "cpu" or "cuda": $GF_TEST_ENGINE */

/* The built-in configuration's pipelines, minus its socket. */
static const char config_json[] =
    "{\"slots\": 2, \"pipelines\": ["
    " {\"name\": \"echo\", \"kind\": \"echo\"},"
    " {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5}}]}";

static struct prom_doc prom; /* large: not on the stack */

/*
 * Runs `gpuframe ARGS...` (a NULL-terminated list), its stdout and stderr
 * into one file, and returns its exit status; *out gets what it printed
 * (the caller frees).  Fails the test if it does not exit on its own.
 */
static int run_gpuframe(const char *dir, char **out, ...) {
    char *argv[24];
    int argc = 0;
    va_list ap;

    argv[argc++] = GF_TEST_CLIENT;
    va_start(ap, out);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 23;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return gf_test_ck_run(dir, argv, COMMAND_TIMEOUT_MS, out);
}

/* The names in `dir`, sorted and joined by spaces, into buf[len]. */
static void list_dir(const char *dir, char *buf, size_t len) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    size_t at = 0;

    ck_assert_int_ge(n, 0);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.' && at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at > 0 ? " " : "", names[i]->d_name);
        free(names[i]);
    }
    free(names);
}

/* Streams FRAMES_SENT verified echo frames through the library. */
static void send_traffic(const gf_test_daemon *d) {
    gf_client *c = gf_test_ck_connect(d->socket_path);
    gf_test_ck_stream_id(c, 0, FRAME_BYTES, FRAMES_SENT, 4);
    gf_client_close(c);
}

START_TEST(prometheus_textfile_is_valid_and_replaced_atomically) {
    gf_test_daemon d;
    char dir[GF_TEST_DIR_MAX], prom_path[GF_TEST_PATH_MAX], names[256], err[512];
    char *out, *text;
    struct stat st;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    send_traffic(&d);
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(prom_path, sizeof prom_path, "%s/gpuframe.prom", dir);

    ck_assert_int_eq(run_gpuframe(dir, &out, "stats", "--prometheus", "--socket", d.socket_path,
                                  "--output", prom_path, (char *)NULL),
                     0);
    ck_assert_str_eq(out, ""); /* everything went to the file */
    free(out);
    list_dir(dir, names, sizeof names);
    ck_assert_str_eq(names, "gpuframe.prom"); /* no temporary file left */
    ck_assert_int_eq(stat(prom_path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0644); /* node_exporter reads it as another user */

    text = gf_test_read_file(prom_path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(prom_parse(text, &prom, err, sizeof err) == 0, "%s in:\n%s", err, text);
    assert_prom_conventions(&prom);
    assert_prom_histograms(&prom);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_frames_answered_total", NULL), FRAMES_SENT);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_pipeline_frames_total", "pipeline", "echo", NULL),
                        FRAMES_SENT);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_seconds_count", NULL), FRAMES_SENT);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_input_bytes_total", NULL),
                        FRAMES_SENT * FRAME_BYTES);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_phase_seconds_count", "pipeline", "echo", "phase",
                                 "completion_delay", NULL),
                        FRAMES_SENT);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_slots", NULL), 2);

    /* The table of the same daemon. */
    ck_assert_int_eq(run_gpuframe(dir, &out, "stats", "--socket", d.socket_path, (char *)NULL), 0);
    ck_assert_msg(strstr(out, " completion_delay reply_write end_to_end\n") != NULL, "%s", out);
    if (strcmp(g_engine, "cpu") == 0) {
        ck_assert_msg(strstr(out, "\ngpu ") == NULL && strstr(out, "\noverlap ") == NULL, "%s",
                      out);
        const char *echo = strstr(out, "\necho ");
        ck_assert_ptr_nonnull(echo);
        char w[10][32];
        ck_assert_int_eq(sscanf(echo, "%31s %31s %31s %31s %31s %31s %31s", w[0], w[1], w[2], w[3],
                                w[4], w[5], w[6]),
                         7);
        ck_assert_str_eq(w[1], "48"); /* FRAMES_SENT */
        ck_assert_str_eq(w[4], "-");  /* h2d */
        ck_assert_str_eq(w[6], "-");  /* d2h */
    }
    free(out);

    /* With the daemon gone the run fails, says why, and the file stays. */
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
    ck_assert_int_eq(run_gpuframe(dir, &out, "stats", "--prometheus", "--socket", d.socket_path,
                                  "--output", prom_path, (char *)NULL),
                     1);
    char want[GF_TEST_PATH_MAX + 64];
    snprintf(want, sizeof want, "gpuframe: cannot connect to %s: No such file or directory\n",
             d.socket_path);
    ck_assert_str_eq(out, want);
    free(out);
    char *after = gf_test_read_file(prom_path, NULL);
    ck_assert_ptr_nonnull(after);
    ck_assert_str_eq(after, text);
    list_dir(dir, names, sizeof names);
    ck_assert_str_eq(names, "gpuframe.prom");
    free(after);
    free(text);
    unlink(prom_path);
    rmdir(dir);
}
END_TEST

START_TEST(stream_where_every_frame_fails_says_what_failed) {
    gf_test_daemon d;
    char *out;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    /* 4099 bytes are not whole float32 values: affine refuses each frame. */
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "affine", "--size", "4099", "--count", "5", "--no-check",
                                  "--quiet", (char *)NULL),
                     1);
    ck_assert_str_eq(out, "frames=5 errors=5 every frame failed: 5 bad_length\n");
    free(out);
    /* One good frame among them: the usual line, rates and all. */
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "4096", "--count", "3", "--quiet",
                                  (char *)NULL),
                     0);
    ck_assert_msg(strncmp(out, "frames=3 errors=0 seconds=", 26) == 0, "%s", out);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

START_TEST(seed_with_input_is_refused) {
    char dir[GF_TEST_DIR_MAX], *out;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    ck_assert_int_eq(run_gpuframe(dir, &out, "stream", "--pipeline", "echo", "--input", "/dev/null",
                                  "--seed", "7", (char *)NULL),
                     2);
    ck_assert_str_eq(out, "gpuframe stream: --seed chooses synthetic frames; with --input the "
                          "frames are the file's, so drop one of them\n"
                          "Try 'gpuframe stream --help'.\n");
    free(out);
    ck_assert_int_eq(
        run_gpuframe(dir, &out, "stats", "--output", "x.prom", "--watch", "1", (char *)NULL), 2);
    ck_assert_str_eq(out, "gpuframe stats: --output writes one snapshot; run it from a timer "
                          "rather than with --watch\n"
                          "Try 'gpuframe stats --help'.\n");
    free(out);
    rmdir(dir);
}
END_TEST

static Suite *gpuframe_suite(void) {
    Suite *s = suite_create("gpuframe");
    TCase *tc = tcase_create("gpuframe");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, prometheus_textfile_is_valid_and_replaced_atomically);
    tcase_add_test(tc, stream_where_every_frame_fails_says_what_failed);
    tcase_add_test(tc, seed_with_input_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(gpuframe_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Check suite of the gpuframe command (client/gpuframe*.c) against a real
 * gpuframed: what it prints and writes, byte for byte where it can be known.
 *   - `stats --prometheus --output FILE`, the textfile collector's writer:
 *     the file parses as exposition format 0.0.4 (prom.h) and holds the
 *     traffic sent, no GPU metric of a CPU daemon, and passes promtool
 *     check metrics where promtool is installed; it is replaced atomically
 *     (mode 0644, no temporary file left), and a failed run leaves it as it
 *     was;
 *   - the stats table of a CPU daemon names no GPU and no copy times;
 *   - a stream in which every frame fails says what failed, not a rate;
 *   - stream's frames go through shared memory from 64 KiB up, and the
 *     summary says how they went;
 *   - --seed with --input is refused;
 *   - a failed connect says what is wrong and what to do;
 *   - --version, the option names, '-' for stdin and stdout, --json, the
 *     progress line on a terminal, Ctrl-C.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prom.h"
#include "runner.h"
#include "testutil.h"

/* Changing user for the permission cases: util-linux's setpriv, the user
 * nobody, and a group that is not nobody's (Debian's "daemon"). */
#define SETPRIV    "/usr/bin/setpriv"
#define NOBODY_UID 65534
#define OTHER_GID  1
#define STR_(x)    #x
#define STR(x)     STR_(x)

/* Prometheus's linter of the exposition format, where it is installed. */
#define PROMTOOL "/usr/bin/promtool"

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
    " {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.0, \"b\": 0.5}},"
    " {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": 16}}]}";
/* Frames of `slow` that keep a CPU daemon busy: 150 of them, two at a time,
 * took 5 s on the machine that wrote this test; Ctrl-C comes long before the
 * last of 100000. */
#define SLOW_FRAME_SIZE "1M"
/* How long a relay holds the daemon's replies back for the progress line,
 * which shows from a second into a run. */
#define PROGRESS_HOLD_MS 1300

static struct prom_doc prom; /* large: not on the stack */

/* run_gpuframe with its arguments as a va_list. */
static int run_gpuframe_v(const char *dir, char **out, va_list ap) {
    char *argv[24];
    int argc = 0;

    argv[argc++] = GF_TEST_CLIENT;
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 23;)
        argv[argc++] = a;
    argv[argc] = NULL;
    return gf_test_ck_run(dir, argv, COMMAND_TIMEOUT_MS, out);
}

/*
 * Runs `gpuframe ARGS...` (a NULL-terminated list), its stdout and stderr
 * into one file, and returns its exit status; *out gets what it printed
 * (the caller frees).  Fails the test if it does not exit on its own.
 */
static int run_gpuframe(const char *dir, char **out, ...) {
    va_list ap;

    va_start(ap, out);
    int status = run_gpuframe_v(dir, out, ap);
    va_end(ap);
    return status;
}

/* Runs `gpuframe ARGS...` and asserts that it exits with `status` having
 * printed exactly `want`. */
static void expect_gpuframe(const char *dir, int status, const char *want, ...) {
    char *out;
    va_list ap;

    va_start(ap, want);
    int got = run_gpuframe_v(dir, &out, ap);
    va_end(ap);
    ck_assert_msg(got == status && strcmp(out, want) == 0,
                  "exit %d, printed:\n%s\nwanted exit %d:\n%s", got, out, status, want);
    free(out);
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

/* One STATS of d and its counter at `dotted`. */
static uint64_t stat_of(const gf_test_daemon *d, const char *dotted) {
    gf_client *c = gf_test_ck_connect(d->socket_path);
    uint64_t v = gf_test_ck_stat(c, dotted);
    gf_client_close(c);
    return v;
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
    ck_assert_double_eq(prom_get(&prom, "gpuframe_slots", NULL),
                        2 * prom_get(&prom, "gpuframe_shards", NULL));
    ck_assert(prom_get(&prom, "gpuframe_submissions_total", NULL) >= 1);
    if (strcmp(g_engine, "cpu") == 0) /* the CPU engine's STATS describe no GPU */
        ck_assert(!prom_has_prefix(&prom, "gpuframe_gpu_"));
    /* Prometheus's own linter, where it is installed (Debian: prometheus). */
    if (access(PROMTOOL, X_OK) == 0) {
        char cmd[GF_TEST_PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "exec " PROMTOOL " check metrics <'%s'", prom_path);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        char *lint;
        ck_assert_int_eq(gf_test_ck_run(dir, argv, COMMAND_TIMEOUT_MS, &lint), 0);
        ck_assert_str_eq(lint, "");
        free(lint);
    } else {
        printf("prometheus_textfile: %s not installed: the test's own checks only\n", PROMTOOL);
    }

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
    char want[GF_TEST_PATH_MAX + 256];
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: no such socket: is gpuframed running? start it "
             "(systemctl start gpuframed), or pass --socket PATH / set GPUFRAMED_SOCKET\n",
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
    expect_gpuframe(d.dir, 1, "frames=5 errors=5 every frame failed: 5 bad_length\n", "stream",
                    "--socket", d.socket_path, "--pipeline", "affine", "--size", "4099", "--count",
                    "5", "--no-check", "--quiet", (char *)NULL);
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
    char dir[GF_TEST_DIR_MAX];

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    expect_gpuframe(dir, 2,
                    "gpuframe stream: --seed chooses synthetic frames; with --input the frames are "
                    "the file's, so drop one of them\nTry 'gpuframe stream --help'.\n",
                    "stream", "--pipeline", "echo", "--input", "/dev/null", "--seed", "7",
                    (char *)NULL);
    expect_gpuframe(dir, 2,
                    "gpuframe stats: --output writes one snapshot; run it from a timer rather than "
                    "with --watch\nTry 'gpuframe stats --help'.\n",
                    "stats", "--output", "x.prom", "--watch", "1", (char *)NULL);
    rmdir(dir);
}
END_TEST

/* --start-at: a time that is not one is refused, naming it; a client set
 * up at once waits for the time given, sends nothing before it, and counts
 * its summary's seconds from then; a time past starts at once. */
/* The summary's started= (its last field, with --start-at): seconds since
 * the Epoch, to the millisecond (compared with STARTED_PRINTED_S of room). */
#define STARTED_PRINTED_S 0.001
static double summary_started(const char *out) {
    const char *at = strstr(out, " started=");
    char *end = NULL;
    ck_assert_msg(at != NULL, "no started= in %s", out);
    double s = strtod(at + strlen(" started="), &end);
    ck_assert_msg(end != NULL && strcmp(end, "\n") == 0, "started= is not the last field: %s", out);
    return s;
}

static double realtime_s(void) {
    struct timespec now;
    ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &now), 0);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

START_TEST(stream_start_at_waits_for_its_time) {
    gf_test_daemon d;
    char at[64], *out;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    expect_gpuframe(d.dir, 2,
                    "gpuframe stream: --start-at: expected seconds since the Epoch, got 'soon'\n"
                    "Try 'gpuframe stream --help'.\n",
                    "stream", "--socket", d.socket_path, "--pipeline", "echo", "--start-at", "soon",
                    (char *)NULL);
    struct timespec now;
    ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &now), 0);
    snprintf(at, sizeof at, "%lld.%09ld", (long long)now.tv_sec + 2, now.tv_nsec);
    uint64_t t0 = gf_now_ns();
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "4096", "--count", "3", "--quiet", "--start-at",
                                  at, (char *)NULL),
                     0);
    double waited_s = (double)(gf_now_ns() - t0) / 1e9, seconds = -1;
    ck_assert_msg(sscanf(out, "frames=3 errors=0 seconds=%lf", &seconds) == 1, "%s", out);
    ck_assert_msg(waited_s >= 1.9, "started %.3f s after it was run, not at the time 2 s ahead",
                  waited_s);
    ck_assert_msg(seconds >= 0 && seconds < waited_s - 1.5,
                  "summary seconds %.3f count the wait (the run took %.3f s)", seconds, waited_s);
    /* Its first frame went at the time asked (a loaded machine's lag allowed). */
    double asked = strtod(at, NULL), started = summary_started(out);
    ck_assert_msg(started >= asked - STARTED_PRINTED_S && started < asked + 1.0,
                  "started=%.3f for --start-at %.3f: %s", started, asked, out);
    free(out);
    double before = realtime_s();
    t0 = gf_now_ns();
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "4096", "--count", "3", "--quiet", "--start-at",
                                  "1000000000", (char *)NULL),
                     0);
    ck_assert_msg(strncmp(out, "frames=3 errors=0 ", 18) == 0, "%s", out);
    ck_assert_msg(gf_now_ns() - t0 < 3000000000u, "a time past (2001) did not start at once");
    started = summary_started(out);
    ck_assert_msg(
        started >= before - STARTED_PRINTED_S && started <= realtime_s() + STARTED_PRINTED_S,
        "started=%.3f for a time past, run between %.3f and now: %s", started, before, out);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* --rate: frame i goes i / rate after the first, so 6 frames at 50 a second
 * take at least 100 ms however fast the daemon answers (and a loaded
 * machine's lag makes them no earlier). */
START_TEST(stream_rate_paces_its_frames) {
    gf_test_daemon d;
    char *out;
    double seconds = -1;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "4096", "--count", "6", "--window", "4",
                                  "--rate", "50", "--quiet", (char *)NULL),
                     0);
    ck_assert_msg(sscanf(out, "frames=6 errors=0 seconds=%lf", &seconds) == 1, "%s", out);
    ck_assert_msg(seconds >= 0.1, "6 frames at --rate 50 took %.3f s, under 5 periods of 20 ms",
                  seconds);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* The tail of a stream's summary line in `out`: what follows "max_us=N ". */
static const char *summary_tail(const char *out) {
    const char *at = strstr(out, " max_us=");
    ck_assert_msg(at != NULL && strstr(out, "frames=") != NULL && strstr(out, " errors=0 ") != NULL,
                  "%s", out);
    at = strchr(at + 1, ' ');
    ck_assert_ptr_nonnull(at);
    return at + 1;
}

/* `gpuframe stream` sends frames from 64 KiB up through shared memory by
 * default, smaller ones and --no-shm through the socket, --shm every size
 * through shared memory, and says which; where the daemon refuses regions it
 * falls back to the socket and says why (not with --quiet), unless --shm. */
START_TEST(stream_uses_shared_memory_from_64k_up) {
    static const struct {
        const char *size, *flag, *tail;
    } cases[] = {
        {"64K", NULL, "transport=shm\n"},          {"65535", NULL, "transport=socket\n"},
        {"64K", "--no-shm", "transport=socket\n"}, {"4K", "--shm", "transport=shm\n"},
        {"1M", NULL, "transport=shm\n"},
    };
    gf_test_daemon d;
    char *out;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path,
                                      "--pipeline", "echo", "--size", cases[i].size, "--count",
                                      "20", "--verify", "--quiet", cases[i].flag, (char *)NULL),
                         0);
        ck_assert_msg(strcmp(summary_tail(out), cases[i].tail) == 0, "--size %s %s: %s",
                      cases[i].size, cases[i].flag ? cases[i].flag : "", out);
        free(out);
    }
    ck_assert_uint_eq(stat_of(&d, "shm.regions_added"), 3);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);

    gf_test_ck_daemon_start(&d,
                            "{\"max_regions\": 0, \"pipelines\": [{\"name\": \"echo\", "
                            "\"kind\": \"echo\"}]}",
                            g_engine);
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "1M", "--count", "8", "--verify", (char *)NULL),
                     0);
    ck_assert_msg(strstr(out, "gpuframe stream: frames go through the socket: no shared memory: "
                              "daemon refused region_add: region_limit: ") != NULL,
                  "%s", out);
    ck_assert_str_eq(summary_tail(out), "transport=socket\n");
    free(out);
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "1M", "--count", "8", "--quiet", (char *)NULL),
                     0);
    ck_assert_msg(strncmp(out, "frames=8 errors=0 ", 18) == 0, "%s", out); /* the line alone */
    free(out);
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "1M", "--count", "8", "--shm", (char *)NULL),
                     1);
    ck_assert_msg(strncmp(out, "gpuframe: --shm: daemon refused region_add: region_limit: ", 58) ==
                      0,
                  "%s", out);
    free(out);
    expect_gpuframe(d.dir, 2,
                    "gpuframe stream: --shm and --no-shm exclude each other\n"
                    "Try 'gpuframe stream --help'.\n",
                    "stream", "--pipeline", "echo", "--shm", "--no-shm", (char *)NULL);
    /* Device frames: synthetic and on the GPU, so neither shm nor --input;
     * a device ordinal in range. */
    expect_gpuframe(d.dir, 2,
                    "gpuframe stream: --device-frames sends synthetic frames already on the GPU: "
                    "not with --shm, --no-shm or --input\n"
                    "Try 'gpuframe stream --help'.\n",
                    "stream", "--pipeline", "echo", "--device-frames", "--shm", (char *)NULL);
    expect_gpuframe(d.dir, 2,
                    "gpuframe stream: --device-frames: expected a CUDA device in [0, 63], got "
                    "'64'\n"
                    "Try 'gpuframe stream --help'.\n",
                    "stream", "--pipeline", "echo", "--device-frames=64", (char *)NULL);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* `gpuframe --version`: the version and every protocol version it speaks;
 * the names --out and --frames of trace's --output and --count still work;
 * -w means --window alone. */
/* A --size above the daemon's max_frame_bytes (which LIST gives) is
 * refused before a byte or a region goes out; a size the pipeline refuses
 * with --no-check goes through the socket and says why. */
START_TEST(stream_sizes_the_daemon_refuses) {
    gf_test_daemon d;
    char *out;

    gf_test_ck_daemon_start(&d,
                            "{\"max_frame_bytes\": 1048576, \"pipelines\": [{\"name\": \"echo\", "
                            "\"kind\": \"echo\"}, {\"name\": \"affine\", \"kind\": \"affine\"}]}",
                            g_engine);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    char *json = NULL;
    ck_assert_int_eq(gf_client_request_json(c, GF_MSG_LIST, &json, COMMAND_TIMEOUT_MS), 0);
    ck_assert_msg(strstr(json, "\"max_frame_bytes\":1048576") != NULL, "%s", json);
    free(json);
    gf_client_close(c);
    expect_gpuframe(
        d.dir, 2,
        "gpuframe stream: --size 1048577 is above the daemon's max_frame_bytes 1048576: "
        "send smaller frames, or restart the daemon with a larger max_frame_bytes\n",
        "stream", "--socket", d.socket_path, "--pipeline", "echo", "--size", "1048577", "--count",
        "1", (char *)NULL);
    expect_gpuframe(d.dir, 2,
                    "gpuframe stream: --size 1073741824 is above the daemon's max_frame_bytes "
                    "1048576: send smaller frames, or restart the daemon with a larger "
                    "max_frame_bytes\n",
                    "stream", "--socket", d.socket_path, "--pipeline", "echo", "--size", "1G",
                    "--shm", (char *)NULL);
    ck_assert_uint_eq(stat_of(&d, "shm.regions_added"), 0);
    ck_assert_uint_eq(stat_of(&d, "frames.received"), 0);
    /* --no-check sends it, through the socket: the daemon's too_large. */
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "2M", "--count", "1", "--no-check",
                                  (char *)NULL),
                     1);
    static const char over[] = "gpuframe stream: frames go through the socket: frames of 2097152 "
                               "bytes are above the daemon's max_frame_bytes 1048576\n";
    ck_assert_msg(strncmp(out, over, sizeof over - 1) == 0 && strstr(out, "too_large") != NULL,
                  "%s", out);
    free(out);
    ck_assert_uint_eq(stat_of(&d, "shm.regions_added"), 0);
    /* The limit itself is fine. */
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "echo", "--size", "1M", "--count", "2", "--verify", "--quiet",
                                  (char *)NULL),
                     0);
    ck_assert_str_eq(summary_tail(out), "transport=shm\n");
    free(out);
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "--pipeline",
                                  "affine", "--size", "65537", "--count", "2", "--no-check",
                                  (char *)NULL),
                     1);
    static const char why[] = "gpuframe stream: frames go through the socket: pipeline 'affine' "
                              "refuses frames of 65537 bytes, so no place for their results can "
                              "be laid out\n";
    ck_assert_msg(strncmp(out, why, sizeof why - 1) == 0, "%s", out);
    ck_assert_msg(strstr(out, "frames=2 errors=2 every frame failed: 2 bad_length\n"), "%s", out);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

START_TEST(version_and_option_names) {
    char dir[GF_TEST_DIR_MAX], *out;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    expect_gpuframe(dir, 0, "gpuframe " GF_VERSION " (protocol 1, 2, 3, 4)\n", "--version",
                    (char *)NULL);
    expect_gpuframe(dir, 2, "gpuframe stats: unknown option '-w'\nTry 'gpuframe stats --help'.\n",
                    "stats", "-w", "1", (char *)NULL);

    gf_test_daemon d;
    char path[GF_TEST_PATH_MAX];
    gf_test_ck_daemon_start(&d, config_json, g_engine);
    send_traffic(&d);
    snprintf(path, sizeof path, "%s/t.json", dir);
    ck_assert_int_eq(run_gpuframe(dir, &out, "trace", "--socket", d.socket_path, "--frames", "3",
                                  "--out", path, (char *)NULL),
                     0);
    ck_assert_msg(strncmp(out, "trace: 3 frames, ", 17) == 0, "%s", out);
    free(out);
    char *chrome = gf_test_read_file(path, NULL);
    ck_assert_msg(chrome != NULL && chrome[0] == '{' && strstr(chrome, "\"traceEvents\":[") != NULL,
                  "%s", chrome ? chrome : "(none)");
    free(chrome);
    unlink(path);
    /* --output - of stats is standard output, as without --output. */
    ck_assert_int_eq(run_gpuframe(dir, &out, "stats", "--socket", d.socket_path, "--prometheus",
                                  "-o", "-", (char *)NULL),
                     0);
    ck_assert_msg(strncmp(out, "# HELP gpuframe_info ", 21) == 0, "%s", out);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
    rmdir(dir);
}
END_TEST

/* stream's --input - and --output - (the results on stdout, the summary on
 * stderr) and --json (one object: the figures, how the frames went). */
START_TEST(stream_pipes_and_json) {
    gf_test_daemon d;
    char cmd[4 * GF_TEST_PATH_MAX + 256], in[GF_TEST_PATH_MAX], res[GF_TEST_PATH_MAX],
        err_path[GF_TEST_PATH_MAX], *out;
    unsigned char data[1000003];
    uint64_t rng = 5;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    snprintf(in, sizeof in, "%s/in.bin", d.dir);
    snprintf(res, sizeof res, "%s/out.bin", d.dir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", d.dir);
    gf_test_fill_input(gf_pipeline_kind_find("echo"), data, sizeof data, &rng);
    FILE *f = fopen(in, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, sizeof data, f), sizeof data);
    ck_assert_int_eq(fclose(f), 0);

    snprintf(
        cmd, sizeof cmd,
        "exec '%s' stream --socket '%s' -p echo --size 64K -i - -o - --json <'%s' >'%s' 2>'%s'",
        GF_TEST_CLIENT, d.socket_path, in, res, err_path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_eq(gf_test_ck_run(d.dir, argv, COMMAND_TIMEOUT_MS, &out), 0);
    ck_assert_str_eq(out, "");
    free(out);
    size_t got_bytes = 0;
    char *got = gf_test_read_file(res, &got_bytes);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got_bytes, sizeof data);
    ck_assert_int_eq(memcmp(got, data, sizeof data), 0);
    free(got);
    char *summary = gf_test_read_file(err_path, NULL);
    ck_assert_ptr_nonnull(summary);
    cJSON *doc = cJSON_Parse(summary);
    ck_assert_msg(doc != NULL && strchr(summary, '\n') == summary + strlen(summary) - 1,
                  "not one JSON line: %s", summary);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "frames"), 16); /* 15 of 64 KiB, one of 16963 bytes */
    ck_assert_uint_eq(gf_test_ck_u64(doc, "errors"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "no_reply"), 0);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "wrong_results"), 0);
    ck_assert_str_eq(gf_test_json_str(doc, "transport"), "shm");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(doc, "interrupted")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "errors_by_status")),
                     0);
    for (const char *const *k =
             (const char *const[]){"seconds", "frames_per_s", "in_GBps", "out_GBps", "p50_us",
                                   "p99_us", "max_us", NULL};
         *k != NULL; k++)
        ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, *k)), "%s", *k);
    cJSON_Delete(doc);
    free(summary);

    /* Refused frames, counted by status; stdout holds the object alone. */
    ck_assert_int_eq(run_gpuframe(d.dir, &out, "stream", "--socket", d.socket_path, "-p", "affine",
                                  "--size", "4099", "-n", "3", "--no-check", "--json", "-q",
                                  (char *)NULL),
                     1);
    doc = cJSON_Parse(out);
    ck_assert_msg(doc != NULL, "%s", out);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "errors"), 3);
    ck_assert_uint_eq(gf_test_ck_u64(doc, "errors_by_status.bad_length"), 3);
    ck_assert_str_eq(gf_test_json_str(doc, "transport"), "socket");
    cJSON_Delete(doc);
    free(out);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* Reads what the command writes to the terminal `master` until it closes
 * its side, into a malloc'd, NUL-terminated buffer. */
static char *read_terminal(int master) {
    size_t len = 0, cap = 4096;
    char *text = malloc(cap);

    ck_assert_ptr_nonnull(text);
    for (;;) {
        if (cap - len < 1024) {
            cap *= 2;
            text = realloc(text, cap);
            ck_assert_ptr_nonnull(text);
        }
        ssize_t n = read(master, text + len, cap - len - 1);
        if (n <= 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* EIO: every slave fd is closed */
        len += (size_t)n;
    }
    text[len] = '\0';
    return text;
}

/* Copies what each of two connected sockets sends to the other until
 * either closes (or timeout_ms passes); fails the test on an error.  Once
 * more than `hold_after` bytes came from `a` (with hold_ms > 0), nothing goes
 * from `b` to `a` for hold_ms: a daemon that seems to take that long. */
static void relay(int a, int b, size_t hold_after, int hold_ms, int timeout_ms) {
    char buf[65536];
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms, hold_until = 0;
    size_t from_a = 0;

    for (;;) {
        uint64_t now = gf_now_ms();
        int holding = hold_until > now;
        struct pollfd pfd[2] = {{.fd = a, .events = POLLIN},
                                {.fd = b, .events = holding ? 0 : POLLIN}};
        ck_assert_msg(now < deadline, "relay: still open after %d ms", timeout_ms);
        if (poll(pfd, 2, holding ? (int)(hold_until - now) : 100) < 0) {
            ck_assert_int_eq(errno, EINTR);
            continue;
        }
        for (int i = 0; i < 2; i++) {
            if (!pfd[i].revents)
                continue;
            ssize_t n = read(pfd[i].fd, buf, sizeof buf);
            if (n <= 0)
                return; /* closed (or reset): the relay is over */
            ck_assert_int_eq(gf_test_raw_send(pfd[1 - i].fd, buf, (size_t)n), 0);
            if (i == 0 && hold_ms > 0 && from_a <= hold_after && (from_a += (size_t)n) > hold_after)
                hold_until = gf_now_ms() + (uint64_t)hold_ms;
        }
    }
}

/* `argv` (a gpuframe command line whose --socket is `path`) started with
 * stdout into `out_fd` and stderr into `err_fd`, connected through relay()
 * to d's socket; `shell` (or NULL) is a sh -c prefix to run it with.  Returns
 * the client's connection, accepted, and *pid; *listener is the relay's
 * listening socket.  The caller relays. */
static int accept_relayed(const char *path, char *const argv[], int out_fd, int err_fd, pid_t *pid,
                          int *listener) {
    *listener = gf_test_ck_unix_socket(path, 1);
    *pid = gf_test_spawn(argv, out_fd, err_fd);
    ck_assert_int_gt(*pid, 0);
    struct pollfd pfd = {.fd = *listener, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, COMMAND_TIMEOUT_MS), 1);
    int client = accept(*listener, NULL, NULL);
    ck_assert_int_ge(client, 0);
    return client;
}

/* On a terminal a run longer than a second redraws a progress line on
 * stderr and erases it at the end; the summary is on stdout.  Not on a
 * terminal, nothing of it. */
START_TEST(stream_shows_progress_on_a_terminal) {
    gf_test_daemon d;
    char out_path[GF_TEST_PATH_MAX], path[GF_TEST_PATH_MAX];
    int master, slave, status, listener;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    snprintf(out_path, sizeof out_path, "%s/out.txt", d.dir);
    snprintf(path, sizeof path, "%s/relay.sock", d.dir);
    char *argv[] = {GF_TEST_CLIENT, "stream", "--socket", path, "-p", "echo",     "--size",
                    "1M",           "-n",     "50",       "-w", "2",  "--no-shm", NULL};
    ck_assert_int_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(out, 0);
    pid_t pid;
    int client = accept_relayed(path, argv, out, slave, &pid, &listener);
    close(out);
    close(slave);
    /* The replies held back for 1.3 s once a frame went out: the run lasts
     * past the second after which progress shows, without a busy daemon. */
    int daemon = gf_test_ck_raw_connect(d.socket_path);
    relay(client, daemon, FRAME_BYTES, PROGRESS_HOLD_MS, COMMAND_TIMEOUT_MS);
    close(client);
    close(daemon);
    close(listener);
    char *tty = read_terminal(master);
    close(master);
    ck_assert_int_eq(gf_test_reap(pid, COMMAND_TIMEOUT_MS, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", tty);
    char *summary = gf_test_read_file(out_path, NULL);
    ck_assert_ptr_nonnull(summary);
    const char *line = strstr(summary, "frames=50 errors=0 seconds=");
    ck_assert_msg(line != NULL, "%s", summary);
    double seconds = atof(line + strlen("frames=50 errors=0 seconds="));
    ck_assert_msg(seconds >= PROGRESS_HOLD_MS / 1000.0, "the run took %.3f s", seconds);
    /* "\r<frames> frames  <GB/s> GB/s  <s> s\033[K", redrawn, then erased. */
    unsigned long frames;
    double gbps, at_s;
    const char *first = strchr(tty, '\r');
    ck_assert_msg(first != NULL &&
                      sscanf(first, "\r%lu frames  %lf GB/s  %lf s", &frames, &gbps, &at_s) == 3,
                  "no progress line on the terminal: %s", tty);
    ck_assert_msg(at_s >= 1.0 && frames >= 1 && frames <= 50 && gbps > 0, "%s", first);
    size_t n = strlen(tty);
    ck_assert_msg(n >= 4 && strcmp(tty + n - 4, "\r\033[K") == 0, "not erased at the end: %s", tty);
    ck_assert_ptr_null(strchr(summary, '\r'));
    ck_assert_ptr_null(strchr(summary, '\033'));
    free(tty);
    free(summary);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* Ctrl-C: no more frames are sent, those in flight are answered, the
 * summary covers what was, and the exit status is 130. */
START_TEST(ctrl_c_prints_what_completed_and_exits_130) {
    gf_test_daemon d;
    char out_path[GF_TEST_PATH_MAX];
    int status;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    snprintf(out_path, sizeof out_path, "%s/out.txt", d.dir);
    char *argv[] = {GF_TEST_CLIENT,  "stream", "--socket", d.socket_path, "-p", "slow", "--size",
                    SLOW_FRAME_SIZE, "-n",     "100000",   "-w",          "2",  NULL};
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(out, 0);
    pid_t pid = gf_test_spawn(argv, out, out);
    ck_assert_int_gt(pid, 0);
    close(out);
    /* A few frames answered, press it. */
    gf_client *c = gf_test_ck_connect(d.socket_path);
    uint64_t answered =
        gf_test_ck_wait_stat(c, "frames.answered", 3, UINT64_MAX, COMMAND_TIMEOUT_MS);
    ck_assert_msg(answered >= 3, "%" PRIu64 " frames answered", answered);
    gf_client_close(c);
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    char *text;
    ck_assert_int_eq(gf_test_reap(pid, COMMAND_TIMEOUT_MS, &status), 0);
    text = gf_test_read_file(out_path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 130, "%s", text);
    unsigned long frames = 0, sent = 0;
    const char *line = strstr(text, "\nframes=");
    ck_assert_msg(line != NULL && sscanf(line, "\nframes=%lu errors=0 ", &frames) == 1, "%s", text);
    const char *note = strstr(text, "gpuframe stream: interrupted: sent ");
    ck_assert_msg(note != NULL && sscanf(note,
                                         "gpuframe stream: interrupted: sent %lu of 100000 "
                                         "frames\n",
                                         &sent) == 1,
                  "%s", text);
    ck_assert_uint_eq(sent, frames);
    ck_assert_msg(frames >= 1 && frames < 100000, "%s", text);
    /* Every frame sent was answered: the daemon has none left. */
    ck_assert_uint_eq(stat_of(&d, "frames.answered"), frames);
    free(text);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* A Ctrl-C during start-up counts: started as a script's background job
 * (SIGINT ignored), gpuframe stream is interrupted while it waits for the
 * daemon's first reply, then gets it (through a relay that holds it back
 * until the signal was sent): it sends no frame, prints its summary and
 * exits 130, where it used to ignore the signal and stream on. */
START_TEST(ctrl_c_during_start_up_stops_before_the_first_frame) {
    gf_test_daemon d;
    char path[GF_TEST_PATH_MAX], out_path[GF_TEST_PATH_MAX];
    int status, listener;

    gf_test_ck_daemon_start(&d, config_json, g_engine);
    snprintf(path, sizeof path, "%s/relay.sock", d.dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", d.dir);
    char *argv[] = {"/bin/sh",
                    "-c",
                    "trap '' INT; exec \"$@\"",
                    "sh",
                    GF_TEST_CLIENT,
                    "stream",
                    "--socket",
                    path,
                    "-p",
                    "echo",
                    "--size",
                    "4K",
                    "-n",
                    "3",
                    NULL};
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(out, 0);
    pid_t pid;
    int client = accept_relayed(path, argv, out, out, &pid, &listener);
    close(out);
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    int daemon = gf_test_ck_raw_connect(d.socket_path);
    relay(client, daemon, 0, 0, COMMAND_TIMEOUT_MS);
    close(client);
    close(daemon);
    close(listener);
    ck_assert_int_eq(gf_test_reap(pid, COMMAND_TIMEOUT_MS, &status), 0);
    char *text = gf_test_read_file(out_path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 130, "%s", text);
    ck_assert_msg(strstr(text, "\nframes=0 errors=0 ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "gpuframe stream: interrupted: sent 0 of 3 frames\n") != NULL, "%s",
                  text);
    ck_assert_uint_eq(stat_of(&d, "frames.received"), 0);
    free(text);
    gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
}
END_TEST

/* A socket at `path` that listens (and is never accepted from), with owner
 * root, group `gid` and `mode`; returns its fd. */
static int listening_socket(const char *path, gid_t gid, mode_t mode) {
    int fd = gf_test_ck_unix_socket(path, 1);

    ck_assert_int_eq(chown(path, 0, gid), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
    return fd;
}

/* `gpuframe list --socket PATH` as user NOBODY_UID with group `gid` alone
 * (setpriv); returns what it printed, after checking it exited 1. */
static char *list_as_nobody(const char *dir, const char *path, gid_t gid) {
    char regid[32], *out;
    snprintf(regid, sizeof regid, "--regid=%u", (unsigned)gid);
    char *argv[] = {SETPRIV,
                    "--reuid=" STR(NOBODY_UID),
                    regid,
                    "--clear-groups",
                    GF_TEST_CLIENT,
                    "list",
                    "--socket",
                    (char *)path,
                    NULL};
    ck_assert_int_eq(gf_test_ck_run(dir, argv, COMMAND_TIMEOUT_MS, &out), 1);
    return out;
}

/* What every gpuframe command says when it cannot connect: no socket, a
 * stale one; and, where this test may change user (root, setpriv, a user
 * `nobody`), a socket of a group the user is not in, and of a group the
 * user database lists him in but his session lacks. */
START_TEST(connect_errors_say_what_to_do) {
    char dir[GF_TEST_DIR_MAX], path[GF_TEST_PATH_MAX], want[2 * GF_TEST_PATH_MAX + 256], *out;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/s.sock", dir);
    ck_assert_int_eq(
        run_gpuframe(dir, &out, "stream", "--socket", path, "--pipeline", "echo", (char *)NULL), 1);
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: no such socket: is gpuframed running? start it "
             "(systemctl start gpuframed), or pass --socket PATH / set GPUFRAMED_SOCKET\n",
             path);
    ck_assert_str_eq(out, want);
    free(out);

    close(gf_test_ck_unix_socket(path, 0)); /* the file stays; nobody listens */
    ck_assert_int_eq(run_gpuframe(dir, &out, "stats", "--socket", path, (char *)NULL), 1);
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: a socket file is there but no daemon listens: "
             "gpuframed stopped without removing it, or crashed; start it (systemctl start "
             "gpuframed), or pass --socket PATH / set GPUFRAMED_SOCKET\n",
             path);
    ck_assert_str_eq(out, want);
    free(out);
    unlink(path);

    const struct passwd *nobody = getpwuid(NOBODY_UID);
    const struct group *other = getgrgid(OTHER_GID);
    if (geteuid() != 0 || access(SETPRIV, X_OK) != 0 || nobody == NULL || other == NULL ||
        nobody->pw_gid == OTHER_GID) {
        printf("connect_errors_say_what_to_do: permission cases skipped: they need root, "
               "%s, a user %d and a group %d\n",
               SETPRIV, NOBODY_UID, OTHER_GID);
        rmdir(dir);
        return;
    }
    char other_name[64], nobody_group[64];
    snprintf(other_name, sizeof other_name, "%s", other->gr_name);
    const struct group *ng = getgrgid(nobody->pw_gid);
    ck_assert_ptr_nonnull(ng);
    snprintf(nobody_group, sizeof nobody_group, "%s", ng->gr_name);
    gid_t nobody_gid = nobody->pw_gid;
    ck_assert_int_eq(chmod(dir, 0755), 0);

    /* A group the user is not in: join it. */
    int fd = listening_socket(path, OTHER_GID, 0660);
    out = list_as_nobody(dir, path, nobody_gid);
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: permission denied: the socket admits user root "
             "and group %s (mode 0660): join group %s (sudo usermod -aG %s $USER, then log in "
             "again)\n",
             path, other_name, other_name, other_name);
    ck_assert_str_eq(out, want);
    free(out);
    close(fd);
    unlink(path);

    /* Group root, as a root daemon without socket_group makes it: never
     * the group to join. */
    fd = listening_socket(path, 0, 0660);
    out = list_as_nobody(dir, path, nobody_gid);
    const struct group *rg = getgrgid(0);
    ck_assert_ptr_nonnull(rg);
    char root_group[64];
    snprintf(root_group, sizeof root_group, "%s", rg->gr_name);
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: permission denied: the socket admits user root "
             "and group %s (mode 0660), and group %s grants far more than this socket: do not "
             "join it; have the daemon give its socket a group of its own (socket_group or "
             "--socket-group, or the socket unit's SocketGroup=; gpuframed by default), then "
             "join that group\n",
             path, root_group, root_group);
    ck_assert_str_eq(out, want);
    free(out);
    close(fd);
    unlink(path);

    /* The user's own group, which this session (started with another)
     * lacks: log in again. */
    fd = listening_socket(path, nobody_gid, 0660);
    out = list_as_nobody(dir, path, OTHER_GID);
    snprintf(want, sizeof want,
             "gpuframe: cannot connect to %s: permission denied: you are in group %s, which may "
             "connect, but this login session began before you joined it: log in again (or run "
             "'newgrp %s')\n",
             path, nobody_group, nobody_group);
    ck_assert_str_eq(out, want);
    free(out);
    close(fd);
    unlink(path);
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
    tcase_add_test(tc, stream_start_at_waits_for_its_time);
    tcase_add_test(tc, stream_rate_paces_its_frames);
    tcase_add_test(tc, connect_errors_say_what_to_do);
    tcase_add_test(tc, stream_uses_shared_memory_from_64k_up);
    tcase_add_test(tc, stream_sizes_the_daemon_refuses);
    tcase_add_test(tc, version_and_option_names);
    tcase_add_test(tc, stream_pipes_and_json);
    tcase_add_test(tc, stream_shows_progress_on_a_terminal);
    tcase_add_test(tc, ctrl_c_prints_what_completed_and_exits_130);
    tcase_add_test(tc, ctrl_c_during_start_up_stops_before_the_first_frame);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(gpuframe_suite());
}

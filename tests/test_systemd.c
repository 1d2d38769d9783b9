/* SPDX-License-Identifier: MIT */
/*
 * gpuframed under systemd, without systemd running: each test plays the
 * service manager's part itself.
 *
 *   activation  systemd-socket-activate (Debian's systemd package) binds the
 *               socket and execs the daemon with LISTEN_FDS/LISTEN_PID: the
 *               daemon serves a socket it did not create and leaves it in
 *               place at exit; two sockets are refused with a reason.
 *   notify      the test's own datagram socket is NOTIFY_SOCKET (an
 *               abstract @name and a path): READY=1, STATUS=, periodic
 *               WATCHDOG=1 and STOPPING=1 arrive in that order; WATCHDOG=1
 *               stops while a frame is on the engine and nothing completes,
 *               and comes back after it; WATCHDOG_PID of another process
 *               turns the pings off.
 *   drain       SIGTERM with frames in flight answers every one of them and
 *               exits 0; a client stalled mid-payload with a short
 *               drain_timeout_ms makes the daemon give up, say how many
 *               frames it abandoned and exit 1.
 *   reload      SIGHUP with changed affine parameters changes the results of
 *               later frames (checked number by number), with RELOADING=1 +
 *               MONOTONIC_USEC= then READY=1; a slot count change is named
 *               as needing a restart; a bad file is rejected with every
 *               problem logged and the old parameters keep serving.
 *   cli         --check-config on good and bad files; --help's sections;
 *               gf_config_parse_all and gf_config_describe_changes.
 *   socket      a stale socket file is replaced; a live one is an error
 *               that says so and is left alone.
 *   journal     "<N>" priority prefixes when JOURNAL_STREAM names stderr;
 *               timestamped lines when it names something else.
 *
 * The engine comes from $GF_TEST_ENGINE (cpu when unset); ctest runs the
 * suite as test_systemd (cpu) and test_systemd_gpu (cuda, skipped without
 * /dev/nvidiactl).  Each test starts its own daemon in its own forked
 * process, so the environment variables it sets stay with it.
 *
 * Slow frames are sincos frames sized from a measurement of the C reference
 * at start, so that one takes a known time on the cpu engine of this machine.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "runner.h"
#include "testutil.h"
#ifndef GF_TEST_CONFIG_DIR
#define GF_TEST_CONFIG_DIR "config"
#endif

/* Pipeline ids of the test config, in its order. */
enum { P_ECHO, P_AFFINE, P_SLOW, P_COUNT };

/* The test config's max_frame_bytes: room for the longest slow frame. */
#define MAX_FRAME_BYTES (4u << 20)
/* The slow pipeline's iterations; frames are sized to take a given time. */
#define SLOW_ITERS 1000u
/* What a drained frame and the watchdog test's frame take on the cpu engine. */
#define DRAIN_FRAME_MS    300u
#define WATCHDOG_FRAME_MS 1500u
/* Frames in flight at SIGTERM in the drain test: one slot each. */
#define DRAIN_FRAMES 4u
/* WATCHDOG_USEC the tests ask for: a ping every 100 ms. */
#define WATCHDOG_USEC_TEXT "200000"
#define WATCHDOG_TICK_MS   100u
/* The daemon's STATUS= period (main.c GF_STATUS_PERIOD_MS) and a margin. */
#define STATUS_PERIOD_MS 2000u
/* A short drain limit for the test where the drain must run out of time. */
#define SHORT_DRAIN_MS 300u
/* Bytes of the affine frames of the reload tests: 1024 floats. */
#define AFFINE_BYTES 4096u
/* Per-test limit of Check. */
#define TEST_TIMEOUT_S 120
/* How long a test waits for a notification, an exit, a settled counter. */
#define WAIT_MS 20000
/* Reply timeout for frames that need no compute. */
#define QUICK_REPLY_TIMEOUT_MS 10000
/* Notifications one test keeps, and the longest one. */
#define NOTIFY_MSGS_MAX      1024
#define NOTIFY_MSG_MAX_BYTES 512
#define ERR_BYTES            (2 * GF_TEST_ERR_MAX)
#define LOG_SCAN_MAX_LINES   4096

static const char *g_engine;        /* "cpu" or "cuda": $GF_TEST_ENGINE           */
static double g_sincos_ns;          /* ns per element and iteration of sincos_ref */
static char g_socket_activate[256]; /* path of systemd-socket-activate, or ""   */

/* ---- small helpers ------------------------------------------------------------- */

/* Microseconds of CLOCK_MONOTONIC, the unit of MONOTONIC_USEC=. */
static uint64_t now_us(void) {
    return gf_now_ns() / 1000u;
}

/* The test config: affine with parameters `a` and `b` (JSON numbers as
 * text), `slots` slots, the given drain limit and any `extra` keys (each
 * followed by a comma). */
static void make_config(char *buf, size_t len, const char *a, const char *b, unsigned slots,
                        unsigned drain_ms, const char *extra) {
    int n = snprintf(buf, len,
                     "{\n"
                     "  \"slots\": %u,\n"
                     "  \"max_frame_bytes\": %u,\n"
                     "  \"frame_timeout_ms\": 60000,\n"
                     "  \"drain_timeout_ms\": %u,\n"
                     "  \"log_level\": \"debug\",\n"
                     "  %s\n"
                     "  \"pipelines\": [\n"
                     "    {\"name\": \"echo\", \"kind\": \"echo\"},\n"
                     "    {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": %s, "
                     "\"b\": %s}},\n"
                     "    {\"name\": \"slow\", \"kind\": \"sincos\", \"params\": {\"iters\": %u}}\n"
                     "  ]\n"
                     "}\n",
                     slots, MAX_FRAME_BYTES, drain_ms, extra ? extra : "", a, b, SLOW_ITERS);
    ck_assert_msg(n > 0 && (size_t)n < len, "config does not fit");
}

/* Bytes of a slow frame that takes about `ms` on the cpu engine. */
static size_t slow_frame_bytes(unsigned ms) {
    return gf_test_slow_frame_bytes(g_sincos_ns, SLOW_ITERS, ms, MAX_FRAME_BYTES);
}

/* Number of lines of `text` that contain `needle`. */
static unsigned count_lines_with(const char *text, const char *needle) {
    unsigned n = 0;

    for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The daemon's log (caller frees), asserted free of sanitizer reports and
 * failed assertions (tests/testutil.c is_failure_line's other marks). */
static char *read_log(const gf_test_daemon *d) {
    static const char *const marks[] = {"Sanitizer", "runtime error:", "Assertion"};
    char *text = gf_test_read_file(d->log_path, NULL);

    ck_assert_msg(text != NULL, "cannot read %s", d->log_path);
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        ck_assert_msg(strstr(text, marks[i]) == NULL, "the daemon's log reports \"%s\":\n%s",
                      marks[i], text);
    return text;
}

/* Waits for the daemon to exit on its own and asserts its exit code. */
static void expect_exit(gf_test_daemon *d, int code) {
    gf_test_ck_daemon_exited(d, gf_test_ck_daemon_wait(d, WAIT_MS), code);
}

/* LIST through `c`: the configured pipelines (caller frees). */
static gf_pipeline *list(gf_client *c, size_t *count) {
    gf_pipeline *p = gf_test_ck_list(c, count);

    ck_assert_uint_eq(*count, P_COUNT);
    return p;
}

/* Streams `count` frames of `bytes` through pipeline `id`, each checked
 * against the C reference with the pipeline's parameters as LIST reports
 * them. */
static void stream_verified(gf_client *c, const gf_pipeline *p, size_t bytes, unsigned count,
                            uint64_t first_id) {
    gf_test_ck_stream(c, &(gf_test_stream){.pipeline = p,
                                           .frame_bytes = bytes,
                                           .frame_count = count,
                                           .window = 2,
                                           .first_frame_id = first_id,
                                           .seed = first_id + 17});
}

/*
 * Sends one affine frame and checks its result number by number against
 * y = a*x + b computed here (the multiply rounded before the add, as the
 * pipeline defines it), independently of the daemon's and the registry's
 * code.
 */
static void assert_affine_result(gf_client *c, float a, float b, uint64_t frame_id) {
    enum { N = AFFINE_BYTES / sizeof(float) };
    static float in[N];
    uint64_t rng = 0x5eed + frame_id;
    gf_reply r;

    gf_test_fill_input(gf_pipeline_kind_find("affine"), in, sizeof in, &rng);
    ck_assert_int_eq(gf_client_send_frame(c, P_AFFINE, frame_id, in, sizeof in), 0);
    int rc = gf_client_recv(c, &r, QUICK_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "affine frame %" PRIu64 ": %s (%s)", frame_id, strerror(-rc),
                  gf_client_error(c));
    ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
    ck_assert_uint_eq(r.header.frame_id, frame_id);
    ck_assert_uint_eq(r.payload_bytes, sizeof in);
    const float *out = r.payload;
    for (unsigned i = 0; i < N; i++) {
        volatile float ax = a * in[i];
        float want = ax + b;
        ck_assert_msg(memcmp(&out[i], &want, sizeof want) == 0,
                      "affine frame %" PRIu64 " element %u: got %.9g for x=%.9g, expected "
                      "%.9g*x%+.9g = %.9g",
                      frame_id, i, (double)out[i], (double)in[i], (double)a, (double)b,
                      (double)want);
    }
}

/* ---- the notify socket: a test's stand-in for systemd's ------------------------- */

typedef struct notify_msg {
    char text[NOTIFY_MSG_MAX_BYTES]; /* the datagram, NUL-terminated */
    uint64_t at_ms;                  /* when it arrived (CLOCK_MONOTONIC) */
} notify_msg;

/* A datagram socket the daemon's NOTIFY_SOCKET names, read by a thread that
 * time-stamps each message as it arrives. */
typedef struct notify_log {
    int fd;
    char name[GF_TEST_PATH_MAX]; /* the NOTIFY_SOCKET value              */
    char path[GF_TEST_PATH_MAX]; /* the bound file; "" when abstract     */
    pthread_t reader;
    pthread_mutex_t lock;
    int stop;         /* tells the reader to end (under lock)  */
    notify_msg *msgs; /* NOTIFY_MSGS_MAX, under lock            */
    size_t count;     /* messages received (under lock)         */
} notify_log;

static void *notify_reader(void *arg) {
    notify_log *n = arg;
    char buf[NOTIFY_MSG_MAX_BYTES];

    for (;;) {
        struct pollfd pfd = {.fd = n->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, 20);
        pthread_mutex_lock(&n->lock);
        int stop = n->stop;
        pthread_mutex_unlock(&n->lock);
        if (stop)
            return NULL;
        if (pr <= 0)
            continue;
        ssize_t got = recv(n->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
        if (got < 0)
            continue;
        buf[got] = '\0';
        pthread_mutex_lock(&n->lock);
        if (n->count < NOTIFY_MSGS_MAX) {
            snprintf(n->msgs[n->count].text, sizeof n->msgs[n->count].text, "%s", buf);
            n->msgs[n->count].at_ms = gf_now_ms();
            n->count++;
        }
        pthread_mutex_unlock(&n->lock);
    }
}

/* Binds the socket (an abstract name when `abstract`, else DIR/notify.sock),
 * starts the reader and sets NOTIFY_SOCKET for the daemons this test starts. */
static void notify_open(notify_log *n, const gf_test_daemon *d, int abstract) {
    static unsigned serial;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    socklen_t len;

    memset(n, 0, sizeof *n);
    n->msgs = calloc(NOTIFY_MSGS_MAX, sizeof *n->msgs);
    ck_assert_ptr_nonnull(n->msgs);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(n->fd, 0);
    if (abstract) {
        snprintf(n->name, sizeof n->name, "@gftest/notify/%ld/%u", (long)getpid(), serial++);
        memcpy(sa.sun_path, n->name, strlen(n->name));
        sa.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(n->name));
    } else {
        snprintf(n->path, sizeof n->path, "%s/notify.sock", d->dir);
        snprintf(n->name, sizeof n->name, "%s", n->path);
        ck_assert_uint_lt(strlen(n->path), sizeof sa.sun_path);
        memcpy(sa.sun_path, n->path, strlen(n->path) + 1);
        len = (socklen_t)sizeof sa;
    }
    ck_assert_msg(bind(n->fd, (struct sockaddr *)&sa, len) == 0, "bind %s: %s", n->name,
                  strerror(errno));
    pthread_mutex_init(&n->lock, NULL);
    ck_assert_int_eq(pthread_create(&n->reader, NULL, notify_reader, n), 0);
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", n->name, 1), 0);
}

static void notify_close(notify_log *n) {
    pthread_mutex_lock(&n->lock);
    n->stop = 1;
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->reader, NULL);
    pthread_mutex_destroy(&n->lock);
    close(n->fd);
    if (n->path[0] != '\0')
        unlink(n->path);
    free(n->msgs);
    unsetenv("NOTIFY_SOCKET");
}

/* Nonzero when the message `text` has the line `line` exactly. */
static int has_line(const char *text, const char *line) {
    size_t len = strlen(line);

    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (n == len && memcmp(p, line, len) == 0)
            return 1;
        p += n + (nl != NULL);
    }
    return 0;
}

/* The value of the line "KEY=value" of `text` for `key` ("STATUS="), copied
 * into out[len]; 0, or -1 when absent. */
static int line_value(const char *text, const char *key, char *out, size_t len) {
    size_t klen = strlen(key);

    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (n >= klen && memcmp(p, key, klen) == 0) {
            snprintf(out, len, "%.*s", (int)(n - klen), p + klen);
            return 0;
        }
        p += n + (nl != NULL);
    }
    return -1;
}

/* A copy of message `i` (asserted to exist). */
static notify_msg notify_get(notify_log *n, size_t i) {
    notify_msg m;

    pthread_mutex_lock(&n->lock);
    ck_assert_uint_lt(i, n->count);
    m = n->msgs[i];
    pthread_mutex_unlock(&n->lock);
    return m;
}

static size_t notify_count(notify_log *n) {
    pthread_mutex_lock(&n->lock);
    size_t c = n->count;
    pthread_mutex_unlock(&n->lock);
    return c;
}

/* The index of the first message at or after `from` that has `line`
 * (or, for a key ending in '=', a line with that key); waits at most
 * `timeout_ms`; -1 when none came. */
static long notify_find(notify_log *n, const char *line, size_t from, int timeout_ms) {
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms;
    int is_key = line[strlen(line) - 1] == '=';
    char value[NOTIFY_MSG_MAX_BYTES];

    for (;;) {
        size_t count = notify_count(n);
        for (size_t i = from; i < count; i++) {
            notify_msg m = notify_get(n, i);
            if (is_key ? line_value(m.text, line, value, sizeof value) == 0
                       : has_line(m.text, line))
                return (long)i;
        }
        from = count;
        if (gf_now_ms() >= deadline)
            return -1;
        gf_test_sleep_ms(5);
    }
}

/* Every message so far, for a failure's message. */
static void notify_dump(notify_log *n, char *out, size_t len) {
    size_t o = 0, count = notify_count(n);

    out[0] = '\0';
    for (size_t i = 0; i < count && o + 1 < len; i++) {
        notify_msg m = notify_get(n, i);
        int w = snprintf(out + o, len - o, "[%zu @%" PRIu64 "] %s\n", i, m.at_ms, m.text);
        if (w < 0)
            break;
        o += (size_t)w < len - o ? (size_t)w : len - o - 1;
    }
}

/* Asserts that `line` arrives at or after message `from`; returns its index. */
static size_t notify_expect(notify_log *n, const char *line, size_t from) {
    char dump[8192];
    long i = notify_find(n, line, from, WAIT_MS);

    if (i < 0) {
        notify_dump(n, dump, sizeof dump);
        ck_abort_msg("no notification %s after message %zu within %d ms; got:\n%s", line, from,
                     WAIT_MS, dump);
    }
    return (size_t)i;
}

/* ---- starting daemons ------------------------------------------------------------- */

/* Prepares d with the test config (affine a, b; `slots`; drain limit). */
static void prepare(gf_test_daemon *d, const char *a, const char *b, unsigned slots,
                    unsigned drain_ms) {
    char config[4096], err[ERR_BYTES];

    make_config(config, sizeof config, a, b, slots, drain_ms, NULL);
    int rc = gf_test_daemon_prepare(d, config, g_engine, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
}

/*
 * Starts the prepared daemon on its own socket path, in the environment the
 * test set up.  With `watchdog`, WATCHDOG_USEC asks for a ping every 100 ms
 * and WATCHDOG_PID names the daemon itself: a shell exports its own pid and
 * execs gpuframed, which keeps that pid.
 */
static void start_plain(gf_test_daemon *d, int watchdog) {
    char err[ERR_BYTES];
    char *plain[GF_TEST_DAEMON_ARGC + 1];
    char *with_pid[3 + GF_TEST_DAEMON_ARGC + 1] = {"/bin/sh", "-c",
                                                   "export WATCHDOG_PID=$$; exec \"$0\" \"$@\""};

    gf_test_daemon_argv(d, plain);
    gf_test_daemon_argv(d, with_pid + 3); /* after the shell's three */

    if (watchdog)
        ck_assert_int_eq(setenv("WATCHDOG_USEC", WATCHDOG_USEC_TEXT, 1), 0);
    int rc = gf_test_daemon_spawn(d, watchdog ? with_pid : plain, err, sizeof err);
    unsetenv("WATCHDOG_USEC");
    ck_assert_msg(rc == 0, "%s", err);
    rc =
        gf_test_daemon_wait_listening(d, d->socket_path, GF_TEST_START_TIMEOUT_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
}

/* Fails a test that needs systemd-socket-activate when it is missing:
 * scripts/setup.sh installs it, so its absence is a broken setup, not a
 * reason to skip. */
static void require_socket_activate(void) {
    ck_assert_msg(g_socket_activate[0] != '\0',
                  "systemd-socket-activate not found on PATH: scripts/setup.sh installs the "
                  "systemd package that provides it");
}

/* ---- activation ----------------------------------------------------------------- */

/* systemd-socket-activate binds ACT.sock and execs gpuframed on the first
 * connection, passing the socket as fd 3: the daemon serves it, never makes
 * its own (--socket names a path that must stay absent) and leaves the file
 * in place when it stops. */
START_TEST(serves_socket_it_did_not_create) {
    gf_test_daemon d;
    notify_log n;
    char act[GF_TEST_PATH_MAX], env[GF_TEST_PATH_MAX + 32], err[ERR_BYTES];
    struct stat before, after;
    size_t count;

    require_socket_activate();
    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 0);
    snprintf(act, sizeof act, "%s/act.sock", d.dir);
    snprintf(env, sizeof env, "NOTIFY_SOCKET=%s", n.name);
    char *argv[5 + GF_TEST_DAEMON_ARGC + 1] = {g_socket_activate, "-l", act, "-E", env};
    gf_test_daemon_argv(&d, argv + 5); /* after systemd-socket-activate's five */
    ck_assert_int_eq(gf_test_daemon_spawn(&d, argv, err, sizeof err), 0);
    /* The first connection (this probe) makes systemd-socket-activate exec
     * the daemon, which keeps its pid. */
    int rc = gf_test_daemon_wait_listening(&d, act, GF_TEST_START_TIMEOUT_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(stat(act, &before), 0);
    ck_assert(S_ISSOCK(before.st_mode));

    gf_client *c = gf_test_ck_connect(act);
    gf_pipeline *p = list(c, &count);
    notify_expect(&n, "READY=1", 0);
    stream_verified(c, &p[P_AFFINE], AFFINE_BYTES, 8, 1);
    stream_verified(c, &p[P_ECHO], 65536, 4, 100);
    assert_affine_result(c, 2.0f, 0.5f, 200);
    gf_client_close(c);
    ck_assert_msg(access(d.socket_path, F_OK) != 0,
                  "the daemon created %s although systemd passed it a socket", d.socket_path);

    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    notify_expect(&n, "STOPPING=1", 0);
    /* The socket file is systemd's: still there, the very same one. */
    ck_assert_msg(stat(act, &after) == 0, "the daemon removed %s, a socket it did not create", act);
    ck_assert(S_ISSOCK(after.st_mode));
    ck_assert_uint_eq(after.st_ino, before.st_ino);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "passed by systemd") != NULL, "log does not say so:\n%s", log);
    free(log);
    notify_close(&n);
    unlink(act);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* LISTEN_FDS=2: the daemon serves exactly one socket and says why it stops. */
START_TEST(two_passed_sockets_are_refused) {
    gf_test_daemon d;
    char a[GF_TEST_PATH_MAX], b[GF_TEST_PATH_MAX], err[ERR_BYTES];

    require_socket_activate();
    prepare(&d, "2.0", "0.5", 2, 20000);
    snprintf(a, sizeof a, "%s/a.sock", d.dir);
    snprintf(b, sizeof b, "%s/b.sock", d.dir);
    char *argv[] = {
        g_socket_activate, "-l",          a,          "-l",     b,   (char *)gf_test_daemon_path(),
        "--config",        d.config_path, "--engine", d.engine, NULL};
    ck_assert_int_eq(gf_test_daemon_spawn(&d, argv, err, sizeof err), 0);
    /* Any connection starts it; it then exits.  The socket file appears at
     * systemd-socket-activate's bind(), a moment before its listen(): until
     * then a connection is refused, so try again. */
    int fd = gf_test_raw_connect(a);
    for (int tries = 0; tries < WAIT_MS / 10 && fd < 0; tries++) {
        gf_test_sleep_ms(10);
        fd = gf_test_raw_connect(a);
    }
    ck_assert_msg(fd >= 0, "connect(%s): %s", a, strerror(-fd));
    int status = gf_test_ck_daemon_wait(&d, WAIT_MS);
    close(fd);
    gf_test_ck_daemon_exited(&d, status, 3);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "systemd passed 2 sockets") != NULL, "log:\n%s", log);
    free(log);
    unlink(a);
    unlink(b);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- notify ------------------------------------------------------------------------ */

/* READY=1 first, then STATUS= (refreshed), WATCHDOG=1 every 100 ms while
 * idle, then STOPPING=1 on SIGTERM; an abstract NOTIFY_SOCKET. */
START_TEST(ready_status_watchdog_stopping_in_order) {
    gf_test_daemon d;
    notify_log n;
    char status[NOTIFY_MSG_MAX_BYTES], dump[16384];
    size_t count;

    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 1);
    start_plain(&d, 1);
    size_t ready = notify_expect(&n, "READY=1", 0);
    uint64_t ready_ms = notify_get(&n, ready).at_ms;
    size_t first_status = notify_expect(&n, "STATUS=", ready);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_pipeline *p = list(c, &count);
    stream_verified(c, &p[P_AFFINE], AFFINE_BYTES, 4, 1);
    /* Long enough for a refreshed STATUS= and a dozen ticks. */
    gf_test_sleep_ms(STATUS_PERIOD_MS + 600);
    gf_client_close(c);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    size_t stopping = notify_expect(&n, "STOPPING=1", ready);
    uint64_t stopping_ms = notify_get(&n, stopping).at_ms;
    gf_test_sleep_ms(50);

    notify_dump(&n, dump, sizeof dump);
    ck_assert_msg(ready == 0, "the first notification is not READY=1:\n%s", dump);
    size_t total = notify_count(&n), statuses = 0, pings = 0, readies = 0;
    for (size_t i = 0; i < total; i++) {
        notify_msg m = notify_get(&n, i);
        readies += has_line(m.text, "READY=1");
        if (has_line(m.text, "WATCHDOG=1")) {
            ck_assert_msg(i > ready, "WATCHDOG=1 before READY=1:\n%s", dump);
            if (i < stopping)
                pings++;
        }
        if (line_value(m.text, "STATUS=", status, sizeof status) == 0 && i < stopping) {
            statuses++;
            ck_assert_msg(status[0] != '\0' && strchr(status, '\n') == NULL, "STATUS=%s", status);
            ck_assert_msg(strstr(status, "slots busy") != NULL, "STATUS=%s", status);
        }
    }
    ck_assert_msg(first_status >= ready, "STATUS= before READY=1:\n%s", dump);
    ck_assert_msg(readies == 1, "%zu READY=1 without a reload:\n%s", readies, dump);
    ck_assert_msg(statuses >= 2, "STATUS= was not refreshed within %u ms:\n%s",
                  STATUS_PERIOD_MS + 600, dump);
    /* A ping per 100 ms tick while running: at least half of them, allowing
     * for a loaded machine. */
    uint64_t expect = (stopping_ms - ready_ms) / WATCHDOG_TICK_MS;
    ck_assert_msg(pings >= expect / 2 && pings <= expect + 3,
                  "%zu WATCHDOG=1 in %" PRIu64 " ms, expected about %" PRIu64 ":\n%s", pings,
                  stopping_ms - ready_ms, expect, dump);
    ck_assert_msg(stopping > first_status, "STOPPING=1 before STATUS=:\n%s", dump);
    notify_close(&n);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* WATCHDOG=1 stops while a frame is on the engine and nothing completes,
 * and comes back once it completes (a path NOTIFY_SOCKET).  Listed for the
 * cpu engine only: its slow frame is sized from the C reference's speed, and
 * a frame that takes a second on a GPU is not portable. */
START_TEST(watchdog_withheld_while_nothing_completes) {
    gf_test_daemon d;
    notify_log n;
    char err[ERR_BYTES], dump[32768];
    void *in, *ref;
    size_t ref_bytes, count;
    uint64_t rng = 99;

    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 0);
    start_plain(&d, 1);
    notify_expect(&n, "READY=1", 0);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_pipeline *p = list(c, &count);
    size_t bytes = slow_frame_bytes(WATCHDOG_FRAME_MS);
    ck_assert_int_eq(
        gf_test_make_frame(&p[P_SLOW], bytes, &rng, &in, &ref, &ref_bytes, err, sizeof err), 0);
    gf_test_sleep_ms(5 * WATCHDOG_TICK_MS); /* pings while idle */

    /* The frame is on the engine once STATS says so, not when it is sent:
     * its megabytes may take a while to arrive on a loaded machine (a TSan
     * daemon beside a busy core once took most of a second), and the
     * watchdog rightly pings meanwhile. */
    gf_client *q = gf_test_ck_connect(d.socket_path);
    uint64_t sent_ms = gf_now_ms();
    ck_assert_int_eq(gf_client_send_frame(c, P_SLOW, 1, in, bytes), 0);
    ck_assert_int_eq(gf_client_flush(c, GF_TEST_REPLY_TIMEOUT_MS), 0);
    ck_assert_uint_eq(
        gf_test_ck_wait_stat(q, "slots.in_flight", 1, UINT64_MAX, GF_TEST_REPLY_TIMEOUT_MS), 1);
    uint64_t engine_ms = gf_now_ms();
    gf_reply r;
    int rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    uint64_t reply_ms = gf_now_ms();
    ck_assert_msg(rc == 0, "slow frame: %s (%s)", strerror(-rc), gf_client_error(c));
    ck_assert_int_eq(gf_test_check_result(&p[P_SLOW], &r, 1, ref, ref_bytes, err, sizeof err), 0);
    gf_test_sleep_ms(6 * WATCHDOG_TICK_MS);
    ck_assert_msg(reply_ms - engine_ms >= 600,
                  "the slow frame took only %" PRIu64 " ms: cannot see the watchdog stop",
                  reply_ms - engine_ms);

    size_t idle = 0, during = 0, after = 0, total = notify_count(&n);
    for (size_t i = 0; i < total; i++) {
        notify_msg m = notify_get(&n, i);
        if (!has_line(m.text, "WATCHDOG=1"))
            continue;
        if (m.at_ms < sent_ms)
            idle++;
        else if (m.at_ms > engine_ms + 2 * WATCHDOG_TICK_MS &&
                 m.at_ms + WATCHDOG_TICK_MS < reply_ms)
            during++;
        else if (m.at_ms > reply_ms)
            after++;
    }
    notify_dump(&n, dump, sizeof dump);
    ck_assert_msg(idle >= 2, "no WATCHDOG=1 while idle (%zu):\n%s", idle, dump);
    ck_assert_msg(during == 0,
                  "%zu WATCHDOG=1 while a frame was on the engine for %" PRIu64
                  " ms and nothing completed:\n%s",
                  during, reply_ms - engine_ms, dump);
    ck_assert_msg(after >= 2, "WATCHDOG=1 did not resume after the frame (%zu):\n%s", after, dump);
    gf_client_close(q);
    gf_client_close(c);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "withholding WATCHDOG=1") != NULL, "log:\n%s", log);
    ck_assert_msg(strstr(log, "WATCHDOG=1 resumed") != NULL, "log:\n%s", log);
    free(log);
    notify_close(&n);
    free(in);
    free(ref);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* WATCHDOG_PID of another process: the pings are not for this daemon. */
START_TEST(watchdog_pid_of_another_process_means_no_pings) {
    gf_test_daemon d;
    notify_log n;
    char err[ERR_BYTES];

    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 1);
    ck_assert_int_eq(setenv("WATCHDOG_USEC", WATCHDOG_USEC_TEXT, 1), 0);
    ck_assert_int_eq(setenv("WATCHDOG_PID", "1", 1), 0);
    char *argv[GF_TEST_DAEMON_ARGC + 1];
    gf_test_daemon_argv(&d, argv);
    ck_assert_int_eq(gf_test_daemon_spawn(&d, argv, err, sizeof err), 0);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    notify_expect(&n, "READY=1", 0);
    gf_test_sleep_ms(6 * WATCHDOG_TICK_MS);
    ck_assert_msg(notify_find(&n, "WATCHDOG=1", 0, 0) < 0, "WATCHDOG=1 sent for WATCHDOG_PID=1");
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    notify_close(&n);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- drain -------------------------------------------------------------------------- */

/* SIGTERM while every slot holds a slow frame (under socket activation, as
 * systemd runs it): each frame is answered and checked, the connection then
 * closes, STOPPING=1 was sent and the exit status is 0. */
START_TEST(sigterm_answers_every_frame_in_flight) {
    gf_test_daemon d;
    notify_log n;
    char act[GF_TEST_PATH_MAX], env[GF_TEST_PATH_MAX + 32], err[ERR_BYTES];
    void *in[DRAIN_FRAMES], *ref[DRAIN_FRAMES];
    size_t ref_bytes[DRAIN_FRAMES], count;
    uint64_t rng = 7;

    require_socket_activate();
    prepare(&d, "2.0", "0.5", DRAIN_FRAMES, 20000);
    notify_open(&n, &d, 0);
    snprintf(act, sizeof act, "%s/act.sock", d.dir);
    snprintf(env, sizeof env, "NOTIFY_SOCKET=%s", n.name);
    char *argv[] = {
        g_socket_activate, "-l",          act,        "-E",     env, (char *)gf_test_daemon_path(),
        "--config",        d.config_path, "--engine", d.engine, NULL};
    ck_assert_int_eq(gf_test_daemon_spawn(&d, argv, err, sizeof err), 0);
    int rc = gf_test_daemon_wait_listening(&d, act, GF_TEST_START_TIMEOUT_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    gf_client *s = gf_test_ck_connect(act);
    gf_pipeline *p = list(s, &count);
    notify_expect(&n, "READY=1", 0);

    size_t bytes = slow_frame_bytes(DRAIN_FRAME_MS);
    gf_client *c = gf_test_ck_connect(act);
    for (unsigned i = 0; i < DRAIN_FRAMES; i++) {
        rc = gf_test_make_frame(&p[P_SLOW], bytes, &rng, &in[i], &ref[i], &ref_bytes[i], err,
                                sizeof err);
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_int_eq(gf_client_send_frame(c, P_SLOW, i, in[i], bytes), 0);
    }
    rc = gf_client_flush(c, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == 0, "flush: %s (%s)", strerror(-rc), gf_client_error(c));
    /* Every payload wholly in, so that every frame counts as received. */
    uint64_t in_bytes =
        gf_test_ck_wait_stat(s, "bytes.in", DRAIN_FRAMES * bytes, UINT64_MAX, WAIT_MS);
    ck_assert_uint_eq(in_bytes, DRAIN_FRAMES * bytes);
    uint64_t in_flight = gf_test_ck_stat(s, "slots.in_flight");
    gf_client_close(s);

    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    for (unsigned i = 0; i < DRAIN_FRAMES; i++) {
        gf_reply r;
        rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        ck_assert_msg(rc == 0, "reply %u after SIGTERM (%" PRIu64 " in flight): %s (%s)", i,
                      in_flight, strerror(-rc), gf_client_error(c));
        rc = gf_test_check_result(&p[P_SLOW], &r, i, ref[i], ref_bytes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "after SIGTERM: %s", err);
    }
    gf_reply r;
    rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
    ck_assert_msg(rc == -ECONNRESET, "after the last reply: %s, expected the connection closed",
                  rc == 0 ? "another reply" : strerror(-rc));
    gf_client_close(c);
    expect_exit(&d, 0);
    size_t ready = notify_expect(&n, "READY=1", 0);
    notify_expect(&n, "STOPPING=1", ready + 1);
    if (strcmp(g_engine, "cpu") == 0)
        ck_assert_msg(in_flight > 0, "no frame was in flight at SIGTERM: the drain was not tested");
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "drained: every frame received was answered") != NULL, "log:\n%s",
                  log);
    free(log);
    for (unsigned i = 0; i < DRAIN_FRAMES; i++) {
        free(in[i]);
        free(ref[i]);
    }
    notify_close(&n);
    unlink(act);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* A client that sent a header and half its payload, then stalled: the drain
 * cannot finish, so after drain_timeout_ms the daemon abandons that frame,
 * says so with the count, and exits 1. */
START_TEST(drain_timeout_abandons_and_exits_nonzero) {
    gf_test_daemon d;
    /* A result far larger than the socket's buffers: unread, it blocks. */
    enum { BYTES = 1 << 20 };
    static unsigned char payload[BYTES];

    prepare(&d, "2.0", "0.5", 2, SHORT_DRAIN_MS);
    start_plain(&d, 0);
    /* A client that sends a frame and never reads its result: the drain
     * waits for that reply (write_timeout_ms is 10 s) until drain_timeout_ms. */
    int fd = gf_test_ck_raw_connect(d.socket_path);
    memset(payload, 0x5a, sizeof payload);
    gf_test_ck_raw_frame(fd, 9, P_ECHO, BYTES, payload, BYTES);
    gf_client *probe = gf_test_ck_connect(d.socket_path);
    uint64_t received = gf_test_ck_wait_stat(probe, "frames.received", 1, UINT64_MAX, WAIT_MS);
    gf_client_close(probe);
    ck_assert_uint_eq(received, 1);
    gf_test_sleep_ms(200); /* its result is computed and stuck in the socket */

    uint64_t t0 = gf_now_ms();
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    int status = gf_test_ck_daemon_wait(&d, WAIT_MS);
    uint64_t took = gf_now_ms() - t0;
    close(fd);
    gf_test_ck_daemon_exited(&d, status, 1);
    ck_assert_msg(took + 20 >= SHORT_DRAIN_MS,
                  "exited after %" PRIu64 " ms, before the %u ms drain", took, SHORT_DRAIN_MS);
    ck_assert_msg(took < SHORT_DRAIN_MS + 5000, "exited only after %" PRIu64 " ms", took);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "abandoning 1 frame(s)") != NULL,
                  "the log does not name the one abandoned frame:\n%s", log);
    ck_assert_msg(strstr(log, "exiting with status 1") != NULL, "log:\n%s", log);
    free(log);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- reload -------------------------------------------------------------------------- */

/* SIGHUP with a pipeline of two stages, which needs a scratch buffer that
 * the slots were not allocated with: one warning line says that nothing
 * was applied and that it needs a restart, and no line says the pipelines
 * went ("pipelines: 3 -> 0 entries") while the running ones keep serving
 * (issue 37: the installed classify.json reloaded onto the default). */
START_TEST(sighup_that_needs_a_restart_says_so_in_one_line) {
    gf_test_daemon d;
    char config[2048];
    size_t count;

    prepare(&d, "2.0", "0.5", 2, 20000);
    start_plain(&d, 0);
    int n = snprintf(config, sizeof config,
                     "{\"slots\": 2, \"max_frame_bytes\": %u, \"frame_timeout_ms\": 60000, "
                     "\"drain_timeout_ms\": 20000, \"log_level\": \"debug\", \"pipelines\": "
                     "[{\"name\": \"twice\", \"stages\": [{\"kind\": \"affine\", \"params\": "
                     "{\"a\": 2.0, \"b\": 0.0}}, {\"kind\": \"affine\", \"params\": {\"a\": "
                     "2.0, \"b\": 0.0}}]}]}\n",
                     MAX_FRAME_BYTES);
    ck_assert(n > 0 && (size_t)n < sizeof config);
    gf_test_ck_daemon_put_config(&d, config); /* with GF_TEST_SHARDS's shards */
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    char *log = NULL;
    for (unsigned ms = 0; ms < 20000 * gf_test_time_scale(); ms += 20) {
        free(log);
        log = read_log(&d);
        if (strstr(log, "reloaded ") != NULL)
            break;
        gf_test_sleep_ms(20);
    }
    ck_assert_msg(count_lines_with(log, "reloaded ") == 1, "no reload line:\n%s", log);
    char line[2048];
    const char *at = strstr(log, "reloaded ");
    snprintf(line, sizeof line, "%.*s", (int)strcspn(at, "\n"), at);
    ck_assert_msg(strstr(line, "nothing applied, needs a restart: the new pipelines need slot "
                               "buffers of ") != NULL &&
                      strstr(line, "restart to run them; the running pipelines stay") != NULL,
                  "the reload line does not say it needs a restart: %s", line);
    ck_assert_msg(strstr(log, " entries") == NULL && strstr(log, "reload of ") == NULL,
                  "more than one line about the reload:\n%s", log);
    free(log);

    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_pipeline *p = list(c, &count);
    ck_assert_uint_eq(count, P_COUNT);
    ck_assert_str_eq(p[P_AFFINE].name, "affine");
    assert_affine_result(c, 2.0f, 0.5f, 1);
    free(p);
    gf_client_close(c);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* SIGHUP with affine a=-3, b=1.25 (and slots 4, which needs a restart):
 * RELOADING=1 with this clock's MONOTONIC_USEC, then READY=1; LIST shows
 * the new parameters; frames sent after compute -3x+1.25 exactly; the slot
 * count stays 2 and the log says a restart is needed for it. */
START_TEST(sighup_applies_new_parameters) {
    gf_test_daemon d;
    notify_log n;
    char config[4096], value[NOTIFY_MSG_MAX_BYTES], dump[8192];
    size_t count;

    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 0);
    start_plain(&d, 0);
    size_t ready = notify_expect(&n, "READY=1", 0);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_pipeline *p = list(c, &count);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.a, 2.0f);
    assert_affine_result(c, 2.0f, 0.5f, 1);
    stream_verified(c, &p[P_AFFINE], AFFINE_BYTES, 4, 10);
    free(p);

    make_config(config, sizeof config, "-3.0", "1.25", 4, 20000, NULL);
    ck_assert_int_eq(gf_test_write_file(d.config_path, config), 0);
    uint64_t before_us = now_us();
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    size_t reloading = notify_expect(&n, "RELOADING=1", ready + 1);
    uint64_t after_us = now_us();
    notify_msg m = notify_get(&n, reloading);
    ck_assert_msg(line_value(m.text, "MONOTONIC_USEC=", value, sizeof value) == 0,
                  "RELOADING=1 without MONOTONIC_USEC=: %s", m.text);
    uint64_t mono = strtoull(value, NULL, 10);
    ck_assert_msg(mono >= before_us && mono <= after_us,
                  "MONOTONIC_USEC=%s is not between %" PRIu64 " and %" PRIu64
                  " (CLOCK_MONOTONIC around the SIGHUP)",
                  value, before_us, after_us);
    size_t ready2 = notify_expect(&n, "READY=1", reloading + 1);
    notify_dump(&n, dump, sizeof dump);
    ck_assert_msg(ready2 > reloading, "%s", dump);

    p = list(c, &count);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.a, -3.0f);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.b, 1.25f);
    assert_affine_result(c, -3.0f, 1.25f, 2);
    stream_verified(c, &p[P_AFFINE], AFFINE_BYTES, 4, 20);
    stream_verified(c, &p[P_SLOW], 4096, 2, 30);
    ck_assert_uint_eq(gf_test_ck_stat(c, "slots.per_shard"), 2);
    gf_client_close(c);

    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "pipelines[1] (affine).params") != NULL,
                  "the log does not name what was applied:\n%s", log);
    ck_assert_msg(strstr(log, "needs a restart") && strstr(log, "slots 2 -> 4"),
                  "the log does not say that slots need a restart:\n%s", log);
    free(log);
    notify_close(&n);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* SIGHUP with a file that has two problems: rejected, both logged, READY=1
 * still follows RELOADING=1, and frames keep the old parameters. */
START_TEST(sighup_with_bad_config_keeps_running_one) {
    gf_test_daemon d;
    notify_log n;
    char status[NOTIFY_MSG_MAX_BYTES];
    size_t count;

    prepare(&d, "2.0", "0.5", 2, 20000);
    notify_open(&n, &d, 1);
    start_plain(&d, 0);
    size_t ready = notify_expect(&n, "READY=1", 0);
    gf_client *c = gf_test_ck_connect(d.socket_path);

    ck_assert_int_eq(gf_test_write_file(d.config_path,
                                        "{\"slots\": 0, \"bogus\": 1, \"pipelines\": "
                                        "[{\"name\": \"affine\", \"kind\": \"affine\", "
                                        "\"params\": {\"a\": 5}}]}"),
                     0);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGHUP), 0);
    size_t reloading = notify_expect(&n, "RELOADING=1", ready + 1);
    size_t ready2 = notify_expect(&n, "READY=1", reloading + 1);
    notify_msg m = notify_get(&n, ready2);
    ck_assert_msg(line_value(m.text, "STATUS=", status, sizeof status) == 0 &&
                      strstr(status, "reload rejected: 2 problem(s)") != NULL,
                  "READY=1 after a rejected reload: %s", m.text);

    gf_pipeline *p = list(c, &count);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.a, 2.0f);
    ck_assert_float_eq(p[P_AFFINE].stages[0].params.b, 0.5f);
    assert_affine_result(c, 2.0f, 0.5f, 1);
    stream_verified(c, &p[P_AFFINE], AFFINE_BYTES, 4, 10);
    gf_client_close(c);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);

    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "reload rejected: 2 problem(s)") != NULL, "log:\n%s", log);
    ck_assert_msg(count_lines_with(log, "slots: expected an integer in [1, 64], got 0") == 1,
                  "log:\n%s", log);
    ck_assert_msg(count_lines_with(log, "bogus: unknown key") == 1, "log:\n%s", log);
    free(log);
    notify_close(&n);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- command line ----------------------------------------------------------------- */

/* Runs gpuframed with `args` (NULL-terminated) in `dir`; returns the exit
 * code (asserted to be an exit) and the output in *out (caller frees). */
static int run_daemon(const char *dir, char *const args[], char **out) {
    char *argv[16];
    int argc = 0;

    argv[argc++] = (char *)gf_test_daemon_path();
    for (int i = 0; args[i] != NULL && argc < 15; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    return gf_test_ck_run(dir, argv, WAIT_MS, out);
}

/* A socket in a directory that does not exist: the error says so (not a
 * bare "permission denied" or "no such file"), and start-up fails. */
START_TEST(socket_in_missing_directory) {
    char dir[GF_TEST_DIR_MAX], sock[GF_TEST_PATH_MAX + 32], want[GF_TEST_PATH_MAX + 96];
    char *out;
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(sock, sizeof sock, "%s/missing/x.sock", dir);
    char *args[] = {"--engine", "cpu", "--socket", sock, NULL};
    ck_assert_int_ne(run_daemon(dir, args, &out), 0);
    snprintf(want, sizeof want, "the directory %s/missing does not exist", dir);
    ck_assert_msg(strstr(out, want) != NULL, "output lacks \"%s\":\n%s", want, out);
    free(out);
    rmdir(dir);
}
END_TEST

/* The socket's mode is socket_mode, whatever the umask: 0660 by default,
 * what the configuration says otherwise; a bad value names the key. */
START_TEST(socket_mode_is_set_not_inherited) {
    static const struct {
        const char *json_value; /* NULL: the default */
        unsigned mode;
    } cases[] = {{NULL, 0660}, {"\"0600\"", 0600}, {"\"755\"", 0755}};
    mode_t old = umask(0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char config[512];
        snprintf(config, sizeof config,
                 "{%s%s%s \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}",
                 cases[i].json_value ? "\"socket_mode\": " : "",
                 cases[i].json_value ? cases[i].json_value : "", cases[i].json_value ? "," : "");
        gf_test_daemon d;
        gf_test_ck_daemon_start(&d, config, g_engine);
        struct stat st;
        ck_assert_int_eq(stat(d.socket_path, &st), 0);
        ck_assert_msg((st.st_mode & 0777) == cases[i].mode, "mode %04o, expected %04o",
                      (unsigned)(st.st_mode & 0777), cases[i].mode);
        gf_test_ck_daemon_stop(&d, GF_TEST_STOP_EXIT_0);
    }
    umask(old);
    char dir[GF_TEST_DIR_MAX], bad[GF_TEST_PATH_MAX + 16];
    char *out;
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    ck_assert_int_eq(gf_test_write_file(bad, "{\"socket_mode\": \"0989\", \"pipelines\": "
                                             "[{\"name\": \"e\", \"kind\": \"echo\"}]}"),
                     0);
    char *args[] = {"--check-config", bad, NULL};
    ck_assert_int_eq(run_daemon(dir, args, &out), 2);
    ck_assert_msg(strstr(out, "socket_mode: expected permission bits as an octal string") != NULL,
                  "%s", out);
    free(out);
    unlink(bad);
    rmdir(dir);
}
END_TEST

START_TEST(check_config_good_and_bad) {
    char dir[GF_TEST_DIR_MAX], bad[GF_TEST_PATH_MAX], sock[GF_TEST_PATH_MAX], want[512];
    const char *good = GF_TEST_CONFIG_DIR "/gpuframed.json";
    char *out;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    char *ok_args[] = {"--check-config", (char *)good, "--socket", sock, NULL};
    ck_assert_int_eq(run_daemon(dir, ok_args, &out), 0);
    snprintf(want, sizeof want, "%s: ok\n", good);
    ck_assert_str_eq(out, want);
    free(out);

    /* Five problems: every one named with its key, after the file's path. */
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    ck_assert_int_eq(gf_test_write_file(bad,
                                        "{\"slots\": 0, \"slot\": 2, \"engine\": \"gpu\",\n"
                                        " \"pipelines\": [{\"name\": \"e\", \"kind\": \"foo\"},\n"
                                        "   {\"name\": \"a\", \"kind\": \"affine\", \"params\": "
                                        "{\"b\": \"x\"}}]}\n"),
                     0);
    char *bad_args[] = {"--check-config", bad, "--socket", sock, NULL};
    ck_assert_int_eq(run_daemon(dir, bad_args, &out), 2);
    static const char *const named[] = {
        "slot: unknown key",
        "slots: expected an integer in [1, 64], got 0",
        "engine: expected one of \"auto\", \"cuda\", \"cpu\", got \"gpu\"",
        "pipelines[0] (e).kind: unknown kind \"foo\"",
        "pipelines[1] (a).params.b: expected a number",
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        snprintf(want, sizeof want, "%s: %s", bad, named[i]);
        ck_assert_msg(count_lines_with(out, want) == 1, "output lacks \"%s\":\n%s", want, out);
    }
    snprintf(want, sizeof want, "%s: 5 problem(s)", bad);
    ck_assert_msg(strstr(out, want) != NULL, "output:\n%s", out);
    free(out);

    /* Flags are checked with the file: normalize_u8's 1080p image does not
     * fit a 1000-byte frame. */
    char *flag_args[] = {"--check-config", (char *)good, "--max-frame-bytes", "1000", NULL};
    ck_assert_int_eq(run_daemon(dir, flag_args, &out), 2);
    ck_assert_msg(strstr(out, "(normalize_u8).params: width*height*3 = 6220800 bytes") != NULL &&
                      strstr(out, "exceeds max_frame_bytes 1000") != NULL,
                  "%s", out);
    free(out);
    /* The older spelling: the file of --config, before or after; the
     * file's problems as above. */
    char *spelled_args[] = {"--check-config", "--config", (char *)good, NULL};
    ck_assert_int_eq(run_daemon(dir, spelled_args, &out), 0);
    snprintf(want, sizeof want, "%s: ok\n", good);
    ck_assert_str_eq(out, want);
    free(out);
    char *after_args[] = {"--config", bad, "--check-config", NULL};
    ck_assert_int_eq(run_daemon(dir, after_args, &out), 2);
    snprintf(want, sizeof want, "%s: 5 problem(s)", bad);
    ck_assert_msg(strstr(out, want) != NULL, "output:\n%s", out);
    free(out);
    /* No file at all: said so. */
    char *no_file_args[] = {"--check-config", NULL};
    ck_assert_int_eq(run_daemon(dir, no_file_args, &out), 2);
    ck_assert_msg(strstr(out, "gpuframed: --check-config: which file? --check-config FILE, or "
                              "--config FILE --check-config\n") != NULL,
                  "%s", out);
    free(out);
    /* A missing file names itself. */
    snprintf(bad, sizeof bad, "%s/missing.json", dir);
    char *missing_args[] = {"--check-config", bad, NULL};
    ck_assert_int_eq(run_daemon(dir, missing_args, &out), 2);
    snprintf(want, sizeof want, "%s: No such file or directory", bad);
    ck_assert_msg(strstr(out, want) != NULL, "%s", out);
    free(out);
    ck_assert_msg(access(sock, F_OK) != 0, "--check-config created the socket");
    unlink(bad);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    unlink(bad);
    rmdir(dir);
}
END_TEST

START_TEST(help_is_man_style) {
    char dir[GF_TEST_DIR_MAX], *out;
    static const char *const sections[] = {"NAME",  "SYNOPSIS", "DESCRIPTION", "OPTIONS",
                                           "FILES", "SIGNALS",  "ENVIRONMENT", "EXIT STATUS"};
    static const char *const words[] = {"LISTEN_FDS",     "NOTIFY_SOCKET",        "WATCHDOG_USEC",
                                        "JOURNAL_STREAM", "CUDA_VISIBLE_DEVICES", "--check-config",
                                        "SIGHUP",         "drain_timeout_ms"};
    const char *prev = NULL;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    char *args[] = {"--help", NULL};
    ck_assert_int_eq(run_daemon(dir, args, &out), 0);
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s%s\n", i == 0 ? "" : "\n", sections[i]);
        const char *at = i == 0 && strncmp(out, "NAME\n", 5) == 0 ? out : strstr(out, want);
        ck_assert_msg(at != NULL, "--help lacks the section %s:\n%s", sections[i], out);
        ck_assert_msg(prev == NULL || at > prev, "section %s out of order", sections[i]);
        prev = at;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(out, words[i]) != NULL, "--help does not mention %s", words[i]);
    free(out);
    rmdir(dir);
}
END_TEST

/* The library calls behind --check-config and the reload log line. */
START_TEST(parse_all_and_describe_changes) {
    char errs[2048], first[256], changes[1024];
    size_t count = 99;
    gf_config a, b;

    ck_assert_int_eq(gf_config_parse_all("{\"slots\": 0, \"log_level\": \"loud\", \"x\": 1, "
                                         "\"pipelines\": [{\"name\": \"e\", \"kind\": \"echo\", "
                                         "\"params\": {\"k\": 1}}]}",
                                         &a, errs, sizeof errs, &count),
                     -1);
    ck_assert_uint_eq(count, 4);
    ck_assert_str_eq(
        errs, "x: unknown key (known keys: socket, socket_mode, socket_group, user, allow, "
              "priorities, engine, "
              "slots, "
              "shards, devices, shard_cpus, "
              "max_frame_bytes, "
              "frame_timeout_ms, request_timeout_ms, receive_stall_ms, write_timeout_ms, "
              "idle_timeout_ms, "
              "log_level, drain_timeout_ms, max_pinned_bytes, "
              "timing_events, timing_sample_every, completion, zero_copy_max_bytes, cuda_graphs, "
              "pool_shards, "
              "trace_frames, "
              "max_connections, max_output_bytes, max_output_bytes_total, max_input_bytes_total, "
              "max_regions, "
              "max_shm_bytes, max_device_region_bytes, pipelines)\n"
              "slots: expected an integer in [1, 64], got 0\n"
              "log_level: expected one of \"error\", \"warn\", \"info\", \"debug\", got "
              "\"loud\"\n"
              "pipelines[0] (e).params.k: unknown parameter (kind echo takes no "
              "parameters)\n");
    ck_assert_ptr_null(a.pipelines);
    /* The one-line parser reports the same first problem. */
    ck_assert_int_eq(gf_config_parse("{\"slots\": 0, \"log_level\": \"loud\", \"pipelines\": "
                                     "[{\"name\": \"e\", \"kind\": \"echo\"}]}",
                                     &a, first, sizeof first),
                     -1);
    ck_assert_str_eq(first, "slots: expected an integer in [1, 64], got 0");
    /* A small buffer keeps whole lines only, and the count stays exact. */
    char small[60];
    ck_assert_int_eq(gf_config_parse_all("{\"slots\": 0, \"engine\": 1, \"pipelines\": []}", &a,
                                         small, sizeof small, &count),
                     -1);
    ck_assert_uint_eq(count, 3);
    ck_assert_str_eq(small, "engine: expected one of \"auto\", \"cuda\", \"cpu\", got 1\n");

    ck_assert_int_eq(gf_config_parse_all("{\"pipelines\": [{\"name\": \"af\", \"kind\": "
                                         "\"affine\", \"params\": {\"a\": 2, \"b\": 0.5}}]}",
                                         &a, errs, sizeof errs, &count),
                     0);
    ck_assert_uint_eq(count, 0);
    ck_assert_str_eq(errs, "");
    ck_assert_int_eq(gf_config_parse_all("{\"log_level\": \"debug\", \"slots\": 3, \"pipelines\": "
                                         "[{\"name\": \"af\", \"kind\": \"affine\", \"params\": "
                                         "{\"a\": -3, \"b\": 1.25}}]}",
                                         &b, errs, sizeof errs, &count),
                     0);
    gf_config_describe_changes(&a, &b, changes, sizeof changes);
    ck_assert_str_eq(changes, "slots 2 -> 3, log_level info -> debug, pipelines[0] (af).params "
                              "{\"a\":2,\"b\":0.5} -> {\"a\":-3,\"b\":1.25}");
    gf_config_describe_changes(&a, &a, changes, sizeof changes);
    ck_assert_str_eq(changes, "");
    gf_config_free(&a);
    gf_config_free(&b);
}
END_TEST

/* ---- the socket path ------------------------------------------------------------ */

/* A socket file left by a daemon that died: nobody listens, so it is
 * replaced, and the daemon serves. */
START_TEST(stale_socket_file_is_replaced) {
    gf_test_daemon d;
    struct stat st;
    size_t count;

    prepare(&d, "2.0", "0.5", 2, 20000);
    close(gf_test_ck_unix_socket(d.socket_path, 0)); /* the file stays; nothing listens */
    ck_assert_int_eq(stat(d.socket_path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));

    start_plain(&d, 0);
    gf_client *c = gf_test_ck_connect(d.socket_path);
    gf_pipeline *p = list(c, &count);
    stream_verified(c, &p[P_ECHO], 4096, 4, 1);
    gf_client_close(c);
    ck_assert_int_eq(gf_test_daemon_signal(&d, SIGTERM), 0);
    expect_exit(&d, 0);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "stale socket") != NULL, "log:\n%s", log);
    free(log);
    free(p);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* Something listens on the path: the daemon refuses to take it over, says
 * why, exits 3 and leaves the other listener working. */
START_TEST(live_socket_is_an_error) {
    gf_test_daemon d;
    char err[ERR_BYTES];

    prepare(&d, "2.0", "0.5", 2, 20000);
    int fd = gf_test_ck_unix_socket(d.socket_path, 8);

    char *argv[GF_TEST_DAEMON_ARGC + 1];
    gf_test_daemon_argv(&d, argv);
    ck_assert_int_eq(gf_test_daemon_spawn(&d, argv, err, sizeof err), 0);
    expect_exit(&d, 3);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "another daemon is already listening") != NULL, "log:\n%s", log);
    free(log);
    /* Ours still works: the file was not removed or replaced. */
    int c = gf_test_raw_connect(d.socket_path);
    ck_assert_msg(c >= 0, "the live socket stopped working: %s", strerror(-c));
    int a = accept(fd, NULL, NULL);
    ck_assert_int_ge(a, 0);
    close(a);
    close(c);
    close(fd);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- the journal -------------------------------------------------------------------- */

/* Starts and stops a daemon with JOURNAL_STREAM set to `value` ("" means:
 * the device and inode of the log file, which is its stderr); returns the
 * log (caller frees). */
static char *log_with_journal_stream(gf_test_daemon *d, const char *value) {
    char stream[64];
    struct stat st;

    prepare(d, "2.0", "0.5", 2, 20000);
    ck_assert_int_eq(gf_test_write_file(d->log_path, ""), 0);
    ck_assert_int_eq(stat(d->log_path, &st), 0);
    if (value[0] == '\0')
        snprintf(stream, sizeof stream, "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
    else
        snprintf(stream, sizeof stream, "%s", value);
    ck_assert_int_eq(setenv("JOURNAL_STREAM", stream, 1), 0);
    start_plain(d, 0);
    unsetenv("JOURNAL_STREAM");
    ck_assert_int_eq(gf_test_daemon_signal(d, SIGTERM), 0);
    expect_exit(d, 0);
    return read_log(d);
}

START_TEST(journal_stream_gives_priority_prefixes) {
    gf_test_daemon d;
    char *log = log_with_journal_stream(&d, "");
    unsigned lines = 0, info = 0, debug = 0;

    for (char *line = log; *line != '\0';) {
        char *nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "unterminated line: %s", line);
        *nl = '\0';
        ck_assert_msg(strlen(line) > 3 && line[0] == '<' && strchr("3467", line[1]) != NULL &&
                          line[2] == '>' && line[3] != '\0',
                      "not a \"<N>text\" line: %s", line);
        ck_assert_msg(strstr(line, "gpuframed[") == NULL, "a time stamp or pid: %s", line);
        info += line[1] == '6';
        debug += line[1] == '7';
        lines++;
        line = nl + 1;
    }
    ck_assert_uint_ge(lines, 3);
    ck_assert_uint_ge(info, 2);  /* starting ..., ready ..., stopped */
    ck_assert_uint_ge(debug, 1); /* the test config logs at debug    */
    free(log);
    gf_test_daemon_cleanup(&d);

    /* Another stream (say stderr redirected by a wrapper): plain lines. */
    log = log_with_journal_stream(&d, "1:1");
    ck_assert_msg(log[0] != '<' && strstr(log, "]: info: ") != NULL, "log:\n%s", log);
    ck_assert_ptr_null(strstr(log, "\n<6>"));
    free(log);
    gf_test_daemon_cleanup(&d);
}
END_TEST

/* ---- the suite ---------------------------------------------------------------------- */

static TCase *tcase(const char *name) {
    TCase *tc = tcase_create(name);

    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    return tc;
}

static Suite *systemd_suite(void) {
    Suite *s = suite_create("systemd");
    TCase *tc;

    tc = tcase("activation");
    tcase_add_test(tc, serves_socket_it_did_not_create);
    tcase_add_test(tc, two_passed_sockets_are_refused);
    suite_add_tcase(s, tc);

    tc = tcase("notify");
    tcase_add_test(tc, ready_status_watchdog_stopping_in_order);
    tcase_add_test(tc, watchdog_pid_of_another_process_means_no_pings);
    suite_add_tcase(s, tc);

    /* A check that cannot run on this engine is not listed, so that the
     * suite's result never counts it as passed. */
    if (strcmp(g_engine, "cpu") == 0) {
        tc = tcase("notify_cpu");
        tcase_add_test(tc, watchdog_withheld_while_nothing_completes);
        suite_add_tcase(s, tc);
    } else {
        printf("not run on the %s engine: watchdog_withheld_while_nothing_completes (cpu only)\n",
               g_engine);
    }

    tc = tcase("drain");
    tcase_add_test(tc, sigterm_answers_every_frame_in_flight);
    tcase_add_test(tc, drain_timeout_abandons_and_exits_nonzero);
    suite_add_tcase(s, tc);

    tc = tcase("reload");
    tcase_add_test(tc, sighup_applies_new_parameters);
    tcase_add_test(tc, sighup_that_needs_a_restart_says_so_in_one_line);
    tcase_add_test(tc, sighup_with_bad_config_keeps_running_one);
    suite_add_tcase(s, tc);

    tc = tcase("cli");
    tcase_add_test(tc, check_config_good_and_bad);
    tcase_add_test(tc, socket_in_missing_directory);
    tcase_add_test(tc, socket_mode_is_set_not_inherited);
    tcase_add_test(tc, help_is_man_style);
    tcase_add_test(tc, parse_all_and_describe_changes);
    suite_add_tcase(s, tc);

    tc = tcase("socket");
    tcase_add_test(tc, stale_socket_file_is_replaced);
    tcase_add_test(tc, live_socket_is_an_error);
    suite_add_tcase(s, tc);

    tc = tcase("journal");
    tcase_add_test(tc, journal_stream_gives_priority_prefixes);
    suite_add_tcase(s, tc);
    return s;
}

/* Finds `name` on $PATH; writes its path into out[len] or "". */
static void find_on_path(const char *name, char *out, size_t len) {
    const char *path = getenv("PATH");
    size_t name_len = strlen(name);

    out[0] = '\0';
    for (const char *p = path ? path : "/usr/bin:/bin"; *p != '\0';) {
        const char *colon = strchr(p, ':');
        size_t n = colon != NULL ? (size_t)(colon - p) : strlen(p);
        if (n > 0 && n + 1 + name_len < len) {
            memcpy(out, p, n);
            out[n] = '/';
            memcpy(out + n + 1, name, name_len + 1);
            if (access(out, X_OK) == 0)
                return;
        }
        p += n + (colon != NULL);
    }
    out[0] = '\0';
}

int main(void) {
    g_engine = gf_test_suite_engine();
    /* Variables a developer's shell or a CI runner may carry would change
     * what the daemons under test do. */
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("JOURNAL_STREAM");
    find_on_path("systemd-socket-activate", g_socket_activate, sizeof g_socket_activate);
    g_sincos_ns = gf_test_sincos_ns();
    printf("systemd tests against gpuframed with the %s engine (%s); sincos %.2f ns per element "
           "and iteration; slow frames %zu bytes (drain) and %zu bytes (watchdog)\n",
           g_engine, gf_test_daemon_path(), g_sincos_ns, slow_frame_bytes(DRAIN_FRAME_MS),
           slow_frame_bytes(WATCHDOG_FRAME_MS));
    fflush(stdout);
    return gf_test_run(systemd_suite());
}

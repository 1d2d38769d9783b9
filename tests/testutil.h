/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the integration tests: a real gpuframed on a temporary socket,
 * raw socket I/O for forged requests, STATS and LIST through libgpuframe, and
 * a streaming loop that checks every RESULT against the pipeline's C
 * reference.
 *
 * These functions use no Check assertion: they return 0 or a negative errno
 * (-1 where no errno fits) and describe a failure in err[err_len], so they
 * are safe from any thread and from Check's unchecked fixtures.  The test
 * asserts on the return value and prints the reason.  The gf_test_ck_*
 * functions at the end are the exception: the same steps asserted, for a
 * test's own body, so that no suite writes its own.
 */
#ifndef GF_TESTUTIL_H
#define GF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "libgpuframe.h"
#include "pipeline.h"
#include "protocol.h"
#include "util.h"

/* Room for a temporary directory's path: a socket inside it must fit
 * sun_path (108 bytes) anyway. */
#define GF_TEST_DIR_MAX 128
/* Room for any path the helpers build (a temp dir plus a file name). */
#define GF_TEST_PATH_MAX 256
/* How long a daemon may take to accept its first connection. */
#define GF_TEST_START_TIMEOUT_MS 30000
/* How long a daemon may take to exit after SIGTERM before it gets SIGKILL. */
#define GF_TEST_STOP_TIMEOUT_MS 30000
/* The receive timeout the tests use for every reply: a hung daemon fails
 * the test instead of hanging it. */
#define GF_TEST_REPLY_TIMEOUT_MS 30000
/* Room for an error message of the helpers. */
#define GF_TEST_ERR_MAX 1024
/* The receive buffer of gf_test_ck_flood_unread's connections. */
#define GF_TEST_FLOOD_RCVBUF_BYTES 4096

/* One daemon process started by gf_test_daemon_start. */
typedef struct gf_test_daemon {
    char dir[GF_TEST_DIR_MAX];          /* the temporary directory it lives in   */
    char config_path[GF_TEST_PATH_MAX]; /* DIR/gpuframed.json                     */
    char socket_path[GF_TEST_PATH_MAX]; /* DIR/s.sock                             */
    char log_path[GF_TEST_PATH_MAX];    /* DIR/daemon.log: its stdout and stderr  */
    char engine[16];                    /* the --engine it was given              */
    pid_t pid;                          /* > 0 while it has not been reaped       */
    int exit_status;                    /* waitpid status once reaped, else -1    */
} gf_test_daemon;

/* ---- time ------------------------------------------------------------------ */

/* The clock is util/util.h's gf_now_ms (CLOCK_MONOTONIC), included here
 * for every suite. */

/* Sleeps `ms` milliseconds, resuming after signals. */
void gf_test_sleep_ms(unsigned ms);

/* ---- files and processes ------------------------------------------------- */

/*
 * Creates a fresh directory "gftest.XXXXXX" under $TMPDIR (or /tmp when unset,
 * or when its paths would be too long for a socket) and writes its path into
 * out[out_len].  Returns 0 or a negative errno.
 */
int gf_test_make_temp_dir(char *out, size_t out_len);

/* Writes `text` to `path` (created or truncated).  Returns 0 or -errno. */
int gf_test_write_file(const char *path, const char *text);

/*
 * Reads the whole file at `path` into a malloc'd, NUL-terminated buffer the
 * caller frees; `*len` (if not NULL) gets its length.  NULL on failure.
 */
char *gf_test_read_file(const char *path, size_t *len);

/* Where `a` and `b`, `n` bytes each, first differ: the byte's offset, or
 * `n` when they are equal (one memcmp; the scan only after a difference). */
size_t gf_test_first_difference(const void *a, const void *b, size_t n);

/* Writes the last `lines` lines of the file at `path` into out[out_len]
 * (truncated from the front if they do not fit), or "(no log)". */
void gf_test_log_tail(const char *path, unsigned lines, char *out, size_t out_len);

/*
 * Scans the daemon log at `path` for failure messages: lines logged at level
 * error or warn, sanitizer reports and failed assert()s.  Returns how many
 * such lines there are and copies them into out[out_len] (may be NULL).
 */
size_t gf_test_log_failures(const char *path, char *out, size_t out_len);

/*
 * Runs `argv[0]` (a path) with `argv`, stdin from /dev/null and stdout plus
 * stderr into the file `output_path`, and waits for it at most `timeout_ms`
 * (SIGKILL after that).  Returns 0 with its waitpid status in `*status`, or a
 * negative errno.  For commands expected to exit on their own.
 */
int gf_test_run_command(char *const argv[], const char *output_path, int timeout_ms, int *status);

/*
 * The two halves of gf_test_run_command, for a test that does something
 * while the command runs (signals it, reads a terminal it writes to).
 * gf_test_spawn starts `argv[0]` (a path) with `argv`, stdin from /dev/null,
 * stdout and stderr onto the caller's `out_fd` and `err_fd` (which stay the
 * caller's), every other fd closed, SIGINT and SIGPIPE at their defaults,
 * killed if the calling thread exits; returns its pid or a negative errno.
 * gf_test_reap waits at most `timeout_ms` for `pid`, then kills it: returns
 * 0 with its waitpid status in `*status`, or -ETIMEDOUT (killed and reaped).
 */
pid_t gf_test_spawn(char *const argv[], int out_fd, int err_fd);
int gf_test_reap(pid_t pid, int timeout_ms, int *status);

/* "exit 0", "killed by signal 11 (Segmentation fault)", ... for a waitpid status. */
const char *gf_test_describe_status(int status, char *buf, size_t len);

/* ---- the daemon ------------------------------------------------------------ */

/*
 * Makes a temporary directory, writes `config_json` there, and starts
 * `gpuframed --config DIR/gpuframed.json --socket DIR/s.sock --engine ENGINE`
 * with fork+execv (stdout and stderr into DIR/daemon.log).  The daemon is
 * killed if the thread that started it exits, so a failed test leaves no
 * daemon behind.  Waits until the socket accepts a connection (at most
 * GF_TEST_START_TIMEOUT_MS); if the process exits first, or never listens,
 * fails with its exit status and the log's tail in err[err_len], and
 * removes the directory.  Returns 0 (`*d` filled) or a negative errno.
 */
int gf_test_daemon_start(gf_test_daemon *d, const char *config_json, const char *engine, char *err,
                         size_t err_len);

/* The gpuframed binary the helpers start: $GF_TEST_DAEMON, else the build's. */
const char *gf_test_daemon_path(void);

/*
 * The engine a suite runs its daemons on: $GF_TEST_ENGINE, or "cpu" when
 * that is unset or empty.  Returns 0 with `*engine` set; -EINVAL when it
 * names neither cpu nor cuda (the suite fails); -ENODEV for cuda on a
 * machine without an NVIDIA device node (the suite skips).  On failure the
 * reason is in why[why_len].
 */
int gf_test_select_engine(const char **engine, char *why, size_t why_len);

/*
 * The start of main() in a suite that starts daemons: returns the engine of
 * gf_test_select_engine and ignores SIGPIPE (raw sockets send with
 * MSG_NOSIGNAL; this is for anything else).  Unlike the other helpers it may
 * end the process: where the engine cannot run here it prints "SKIP: " and
 * the reason and exits with GF_SKIP_CODE; where $GF_TEST_ENGINE is invalid it
 * prints the reason and exits with EXIT_FAILURE.  For main() only.
 */
const char *gf_test_suite_engine(void);

/* Arguments gf_test_daemon_argv writes before its NULL. */
#define GF_TEST_DAEMON_ARGC 7

/* With GF_TEST_SHARDS=N in the environment (CI runs the suites so), a copy
 * of `config_json` with "shards": N, malloc'd; NULL when it is unset or the
 * configuration says "shards" itself (a test of one shard's scheduling). */
char *gf_test_config_with_shards(const char *config_json);

/*
 * Writes the command line gf_test_daemon_start runs for d into
 * argv[0..GF_TEST_DAEMON_ARGC]: gf_test_daemon_path(), then --config,
 * --socket and --engine with d's paths and engine, then NULL.  argv needs
 * room for GF_TEST_DAEMON_ARGC + 1 entries; they point into d (and the
 * environment) and live as long as it.  Returns GF_TEST_DAEMON_ARGC, the
 * index of the NULL, where a caller may append more flags.
 */
size_t gf_test_daemon_argv(const gf_test_daemon *d, char **argv);

/*
 * The first half of gf_test_daemon_start, for tests that start the daemon
 * their own way (through systemd-socket-activate, with another environment):
 * makes the temporary directory, writes `config_json` to d->config_path and
 * fills d's paths and engine; no process yet (d->pid is -1).  Returns 0 or a
 * negative errno with the reason in err[err_len].
 */
int gf_test_daemon_prepare(gf_test_daemon *d, const char *config_json, const char *engine,
                           char *err, size_t err_len);

/*
 * Starts `argv` (argv[0] a path; the environment is the caller's) as d's
 * process, stdin from /dev/null, stdout and stderr into d->log_path
 * (truncated), every other fd closed, killed if the calling thread exits.
 * Does not wait for anything.  Returns 0 (d->pid set) or a negative errno.
 */
int gf_test_daemon_spawn(gf_test_daemon *d, char *const argv[], char *err, size_t err_len);

/*
 * Waits until `socket_path` accepts a connection (at most `timeout_ms`).
 * Fails with -ECHILD when d's process exits first, -ETIMEDOUT otherwise,
 * with its status and the log's tail in err[err_len].  Returns 0 on success.
 */
int gf_test_daemon_wait_listening(gf_test_daemon *d, const char *socket_path, int timeout_ms,
                                  char *err, size_t err_len);

/* Sends `sig` to the daemon.  Returns 0 or -errno (-ESRCH once reaped). */
int gf_test_daemon_signal(gf_test_daemon *d, int sig);

/*
 * Waits at most `timeout_ms` for the daemon to exit on its own and reaps it;
 * stores the waitpid status in d->exit_status and `*status` (may be NULL).
 * Returns 0, or -ETIMEDOUT (still running; nothing changed).
 */
int gf_test_daemon_wait(gf_test_daemon *d, int timeout_ms, int *status);

/*
 * Stops the daemon: SIGTERM, then waits GF_TEST_STOP_TIMEOUT_MS for it to
 * exit, then SIGKILL.  Stores its waitpid status in `*status`.  Returns 0 if
 * it exited after SIGTERM, -ETIMEDOUT if it had to be killed.  A daemon that
 * already exited is just reaped.
 */
int gf_test_daemon_stop(gf_test_daemon *d, int *status);

/* Removes the daemon's files and its directory (the daemon must be reaped). */
void gf_test_daemon_cleanup(gf_test_daemon *d);

/*
 * gf_test_daemon_start without a configuration file: makes the temporary
 * directory and starts `gpuframed --socket DIR/s.sock --engine ENGINE`, so
 * the daemon runs its built-in configuration (config/gpuframed.json) with
 * only the socket and engine overridden; d->config_path names no file.
 * Returns 0 (`*d` filled) or a negative errno with the reason in err[err_len].
 */
int gf_test_daemon_start_builtin(gf_test_daemon *d, const char *engine, char *err, size_t err_len);

/*
 * Replaces d's configuration file with `config_json` in one step (written to
 * a file beside it, then renamed over it), so that a SIGHUP already sent
 * reads the old file or the new, never a part.  Returns 0 or a negative errno.
 */
int gf_test_daemon_put_config(const gf_test_daemon *d, const char *config_json);

/* ---- raw sockets: forged requests -------------------------------------------- */

/* A blocking connection to `socket_path` with send and receive timeouts of
 * GF_TEST_REPLY_TIMEOUT_MS.  Returns the fd or a negative errno. */
int gf_test_raw_connect(const char *socket_path);

/* Sends all `len` bytes (MSG_NOSIGNAL).  Returns 0 or a negative errno. */
int gf_test_raw_send(int fd, const void *buf, size_t len);

/* Encodes `h` and sends it.  Returns 0 or a negative errno. */
int gf_test_raw_send_header(int fd, const gf_header *h);

/* Sends `len` (> 0) bytes of `buf` in one sendmsg with `nfds` (1 to 4)
 * copies of the descriptor `fd` attached as SCM_RIGHTS.  Returns 0, or a
 * negative errno (-EMSGSIZE when fewer bytes went). */
int gf_test_raw_send_fds(int sock, const void *buf, size_t len, int fd, int nfds);

/*
 * Receives one reply: its header (parsed in the client role, any payload
 * size up to `cap`) and its payload into payload[cap].  Returns 0, or a
 * negative errno with the reason in err[err_len].
 */
int gf_test_raw_recv_reply(int fd, gf_header *h, void *payload, size_t cap, int timeout_ms,
                           char *err, size_t err_len);

/*
 * Waits for the peer to close: a read returning 0 or failing with
 * ECONNRESET.  Returns 0, -ETIMEDOUT, or -EPROTO when bytes arrived instead
 * (their count in `*extra` when not NULL).
 */
int gf_test_raw_expect_close(int fd, int timeout_ms, size_t *extra);

/* ---- LIST and STATS ------------------------------------------------------- */

/*
 * Sends LIST on `c` (nothing else in flight) and parses the reply with
 * gf_pipelines_from_json into a malloc'd array the caller frees.  Returns 0
 * or a negative errno (-EPROTO for an unparsable reply) with err[err_len].
 */
int gf_test_list(gf_client *c, gf_pipeline **out, size_t *count, char *err, size_t err_len);

/* Sends STATS on `c` and parses the reply into a cJSON tree the caller
 * frees with cJSON_Delete.  Returns 0 or a negative errno with err[err_len]. */
int gf_test_stats(gf_client *c, cJSON **out, char *err, size_t err_len);

/*
 * The number at the dotted path `dotted` ("frames.answered") of `root`, as
 * an exact non-negative integer.  Returns 0, or -1 when the path is missing
 * or holds something else.
 */
int gf_test_json_u64(const cJSON *root, const char *dotted, uint64_t *out);

/* The string at `dotted`, or NULL. */
const char *gf_test_json_str(const cJSON *root, const char *dotted);

/* The sum of rejected.<name> over the statuses that refuse one FRAME
 * (unknown_pipeline, bad_length, engine, shutting_down, timeout, internal). */
int gf_test_frame_rejections(const cJSON *stats, uint64_t *out);

/*
 * Polls STATS on `c` (every few ms, at most `timeout_ms`) until the daemon is
 * idle: slots.free == slots.count, slots.in_flight == 0 and
 * connections.open == `open_connections`.  Stores the last STATS in `*last`
 * (caller frees; may be NULL).  Returns 0, or -ETIMEDOUT with the last values
 * in err[err_len], or another negative errno.
 */
int gf_test_wait_idle(gf_client *c, uint64_t open_connections, int timeout_ms, cJSON **last,
                      char *err, size_t err_len);

/* ---- inputs and verified streaming ------------------------------------------ */

/*
 * Fills in[bytes] with a frame for `kind`: float32 values uniform in [-4, 4]
 * (none exactly 0) when kind->input_f32 (affine, sincos), random bytes
 * otherwise; never all zero when bytes > 0.
 */
void gf_test_fill_input(const gf_pipeline_kind *kind, void *in, size_t bytes, uint64_t *rng);

/* The sincos reference on this machine: ns per element and iteration, the
 * best of many short runs (at least 0.1), so that a busy machine does not
 * make it look slower than it is. */
double gf_test_sincos_ns(void);

/* Bytes of a sincos frame of `iters` iterations that takes about `ms` on
 * the cpu engine at `sincos_ns` (gf_test_sincos_ns): 64 floats at least,
 * `max_bytes` at most. */
size_t gf_test_slow_frame_bytes(double sincos_ns, unsigned iters, unsigned ms, size_t max_bytes);

/*
 * Makes one input of `bytes` for pipeline `p` and its reference output.
 * *in and *ref are malloc'd (caller frees; never NULL on success) and
 * *ref_bytes gets the output length.  Returns 0, or -EINVAL when the
 * pipeline cannot take `bytes` (reason in err), or -ENOMEM.
 */
int gf_test_make_frame(const gf_pipeline *p, size_t bytes, uint64_t *rng, void **in, void **ref,
                       size_t *ref_bytes, char *err, size_t err_len);

/*
 * Checks one reply against the request it answers: a RESULT (status 0) with
 * `frame_id` and the pipeline's id, `ref_bytes` of payload that
 * gf_pipeline_compare accepts against `ref`.  Returns 0 or -1 with err.
 */
int gf_test_check_result(const gf_pipeline *p, const gf_reply *r, uint64_t frame_id,
                         const void *ref, size_t ref_bytes, char *err, size_t err_len);

/* What gf_test_stream_verified streams. */
typedef struct gf_test_stream {
    const gf_pipeline *pipeline; /* id, kind and params (as LIST reports them) */
    size_t frame_bytes;          /* every frame's payload length               */
    unsigned frame_count;        /* frames to send                             */
    unsigned window;             /* most frames in flight at once (>= 1)       */
    uint64_t first_frame_id;     /* frame ids are first, first+1, ...          */
    uint64_t seed;               /* of the inputs; 0 picks a fixed one         */
} gf_test_stream;

/*
 * Streams s->frame_count frames through `c` keeping at most s->window in
 * flight, and checks every reply with gf_test_check_result: in order, the
 * right frame_id and pipeline, a RESULT of the output length the pipeline
 * rules, matching the C reference.  Inputs rotate over a small pool of
 * distinct random frames, so a reply holding another frame's (or a stale)
 * output is caught.  `c` must have nothing in flight.  Returns 0, or a
 * negative errno (-EBADMSG for a wrong reply) with the frame and reason in
 * err[err_len].  Safe to run on several clients from several threads.
 */
int gf_test_stream_verified(gf_client *c, const gf_test_stream *s, char *err, size_t err_len);

/*
 * `clients` clients of the daemon at `socket_path`, each on a thread of its
 * own and a connection of its own, stream as gf_test_stream_verified does
 * with `s` (client i's frame ids start at 100000 * (i + 1), its seed is
 * s->seed + i), all at once.  Returns 0 when every one succeeded, or the
 * first failure's negative errno with "client i: ..." in err[err_len].
 */
int gf_test_streams_parallel(const char *socket_path, unsigned clients, const gf_test_stream *s,
                             char *err, size_t err_len);

/* ---- the daemon's process --------------------------------------------------- */

/* The number of file descriptors d's process holds (its /proc/PID/fd), or a
 * negative errno. */
int gf_test_daemon_fd_count(const gf_test_daemon *d);

/*
 * One field of d's /proc/PID/status, `field` with its colon ("VmRSS:",
 * "RssAnon:"), in kB.  Returns it (>= 0), or a negative errno: -ENOENT when
 * the process or the field is missing.
 */
int64_t gf_test_daemon_status_kb(const gf_test_daemon *d, const char *field);

/* ---- bounds and logs ------------------------------------------------------------- */

/* How much slower this build runs the tests: $CK_TIMEOUT_MULTIPLIER, which
 * gf_add_test sets to GF_TIMEOUT_SCALE (4 under the sanitizers, else 1); 1
 * when unset or not a positive integer. */
unsigned gf_test_time_scale(void);

/* Nonzero in a ThreadSanitizer build (GF_TEST_SANITIZE, set by
 * tests/CMakeLists.txt): its shadow memory makes a daemon's RSS several
 * times what it allocates, so memory bounds are reported, not judged. */
int gf_test_under_tsan(void);

/*
 * The latency bound a suite asserts for `ms` milliseconds on an idle
 * machine with a plain build: `ms` x scale^2 under the sanitizers (scale
 * gf_test_time_scale), and times gf_test_load_factor() on a busy machine.
 * The sanitizers' slowdown of the daemon's loop is uneven, not a factor: a
 * loaded 2-core CI machine measured 648 ms under them for what a plain build
 * does in well under 50 ms.  A busy machine gives the daemon a share of a
 * core: a LIST the stats flood test saw in 60 ms on an idle machine took
 * 117 ms at a load of 7 on 2 cores, and 467 ms above 8 (scripts/test.sh
 * beside a whole CI run).  The daemons those bounds catch took seconds, so
 * a bound up to 8 times as wide (the load factor, capped at 8 here rather
 * than 4) still catches them.
 */
uint64_t gf_test_latency_bound_ms(uint64_t ms);

/* How busy the machine is: the load average of the last minute over the
 * online CPUs, from 1 (idle or unknown) up to at most 4: what tests scale
 * waits and work by (work sized by the load makes more load). */
double gf_test_load_factor(void);

/* The number of lines of `text` that contain `a` and, unless it is NULL,
 * also `b`. */
/* Nonzero when the `len` bytes at `line` contain `word`. */
int gf_test_line_has(const char *line, size_t len, const char *word);

size_t gf_test_count_lines(const char *text, const char *a, const char *b);

/*
 * The most lines of one kind that the daemon log at `path` holds in any one
 * second: for every kind, the most lines whose time stamps lie within 1000 ms
 * of each other.  Lines in the journal's format or of another writer (a
 * sanitizer) are not counted.  A line's kind is its text (after
 * "<level>: ") with every run of digits read as '#', without a leading
 * "connection # (...): ", up to its first '(', ';' or ':' : "bad_magic",
 * "write failed", "reload rejected".  The kind of the worst is copied into
 * kind[kind_len] ("" when the log has no line) and its time stamp's second
 * into when[when_len] (both may be NULL).  Returns the count, or a negative
 * errno when the log cannot be read.
 */
int gf_test_log_max_per_second(const char *path, char *kind, size_t kind_len, char *when,
                               size_t when_len);

/* ---- the same, asserted: for the body of a Check test ------------------------------ */

/*
 * Each of these runs one step above and, where it fails, fails the running
 * test with Check's assertions, naming the step and the reason, instead of
 * returning an error.  Call them only where Check may assert: the body of a
 * test (START_TEST) or a checked fixture, in the thread that runs it; never
 * from an unchecked fixture or another thread.
 */

/* gf_test_daemon_start with the reason in the failure. */
void gf_test_ck_daemon_start(gf_test_daemon *d, const char *config_json, const char *engine);

/* gf_test_daemon_start_builtin with the reason in the failure. */
void gf_test_ck_daemon_start_builtin(gf_test_daemon *d, const char *engine);

/* gf_test_daemon_put_config. */
void gf_test_ck_daemon_put_config(const gf_test_daemon *d, const char *config_json);

/* gf_test_daemon_status_kb: the field's value in kB. */
uint64_t gf_test_ck_daemon_status_kb(const gf_test_daemon *d, const char *field);

/* What gf_test_ck_daemon_stop asserts. */
enum gf_test_stop_check {
    GF_TEST_STOP_EXIT_0,           /* exit 0 after SIGTERM, not killed      */
    GF_TEST_STOP_EXIT_0_CLEAN_LOG, /* that, and no failure line in its log */
};

/*
 * Stops d (gf_test_daemon_stop) and asserts that it exited 0 after SIGTERM,
 * not killed after GF_TEST_STOP_TIMEOUT_MS; with GF_TEST_STOP_EXIT_0_CLEAN_LOG
 * also that its log holds no failure line (gf_test_log_failures).  Then
 * removes its directory (gf_test_daemon_cleanup).
 */
void gf_test_ck_daemon_stop(gf_test_daemon *d, enum gf_test_stop_check check);

/*
 * Waits at most `timeout_ms` for d to exit on its own (on a signal the test
 * sent, or by itself) and returns its waitpid status.  A daemon still running
 * then is killed and the test fails with its log's tail.
 */
int gf_test_ck_daemon_wait(gf_test_daemon *d, int timeout_ms);

/* Asserts that the waitpid `status` of d is exit `code`, failing with the
 * tail of d's log otherwise. */
void gf_test_ck_daemon_exited(const gf_test_daemon *d, int status, int code);

/* A libgpuframe connection to `socket_path` (the caller closes it). */
gf_client *gf_test_ck_connect(const char *socket_path);

/* gf_test_raw_connect: the fd (the caller closes it). */
int gf_test_ck_raw_connect(const char *socket_path);

/* A Unix stream socket bound at `path` (which must not exist), listening
 * with `backlog` when it is above 0: the fd (the caller closes it; the file
 * stays, as a daemon that died leaves it). */
int gf_test_ck_unix_socket(const char *path, int backlog);

/* gf_test_list: the pipelines, malloc'd (the caller frees them); their
 * number in `*count` when `count` is not NULL. */
gf_pipeline *gf_test_ck_list(gf_client *c, size_t *count);

/* gf_test_stats: the document (the caller frees it with cJSON_Delete). */
cJSON *gf_test_ck_stats(gf_client *c);

/* gf_test_json_u64: the exact non-negative integer at `dotted` of `root`. */
uint64_t gf_test_ck_u64(const cJSON *root, const char *dotted);

/* One STATS on `c` and its counter at `dotted`. */
uint64_t gf_test_ck_stat(gf_client *c, const char *dotted);

/*
 * Polls STATS on `c` (every few ms, at most `timeout_ms`) until its counter
 * at `dotted` is at least `least` and at most `most`.  Returns the last value
 * read, whether or not it got there: the test asserts on it.
 */
uint64_t gf_test_ck_wait_stat(gf_client *c, const char *dotted, uint64_t least, uint64_t most,
                              int timeout_ms);

/* STATS requests gf_test_stats has sent (every helper here that asks for
 * STATS goes through it): a test of requests.stats subtracts its own polls. */
extern uint64_t gf_test_stats_sent;

/* gf_test_wait_idle; the last STATS into `*last` (the caller frees it) when
 * `last` is not NULL. */
void gf_test_ck_wait_idle(gf_client *c, uint64_t open_connections, int timeout_ms, cJSON **last);

/* gf_test_stream_verified. */
void gf_test_ck_stream(gf_client *c, const gf_test_stream *s);

/* A LIST on `c`, then `frame_count` verified frames of `frame_bytes` through
 * the pipeline with id `pipeline_id`, at most `window` in flight (frame ids
 * from 0, the default seed). */
void gf_test_ck_stream_id(gf_client *c, uint32_t pipeline_id, size_t frame_bytes,
                          unsigned frame_count, unsigned window);

/*
 * Sends on the raw connection `fd` a FRAME header (GF_PROTOCOL_VERSION) for
 * frame `frame_id` of pipeline `pipeline_id` announcing `payload_bytes`, then
 * the first `sent_bytes` of `payload`, or that many zero bytes when `payload`
 * is NULL.
 */
void gf_test_ck_raw_frame(int fd, uint64_t frame_id, uint32_t pipeline_id, uint64_t payload_bytes,
                          const void *payload, size_t sent_bytes);

/*
 * `connections` raw connections to `socket_path`, each with a receive buffer
 * of GF_TEST_FLOOD_RCVBUF_BYTES (so that the kernel holds few replies for
 * it), then on each `requests` requests of `type` (frame ids 0, 1, ...,
 * pipeline 0, no payload), never read.  Returns their fds, malloc'd, for
 * gf_test_flood_close.
 */
int *gf_test_ck_flood_unread(const char *socket_path, unsigned connections, unsigned requests,
                             uint8_t type);

/* Closes the `connections` fds of gf_test_ck_flood_unread and frees them. */
void gf_test_flood_close(int *fds, unsigned connections);

/* What follows an ERROR that gf_test_ck_raw_error expects. */
enum gf_test_after_error {
    GF_TEST_STAYS_OPEN, /* nothing asserted                                   */
    GF_TEST_CLOSES,     /* the daemon closes the connection; so does the test */
};

/*
 * Receives one reply on the raw connection `fd` (at most `timeout_ms`) and
 * asserts that it is an ERROR of `status` whose text holds `words`; with
 * GF_TEST_CLOSES, also that the daemon then closes the connection (within
 * `timeout_ms`), and closes `fd`.  Returns the reply's header.
 */
gf_header gf_test_ck_raw_error(int fd, uint32_t status, const char *words, int timeout_ms,
                               enum gf_test_after_error after);

/*
 * Runs `argv` (gf_test_run_command; argv[0] a path, NULL-terminated) with its
 * stdout and stderr into a file in `dir`, and asserts that it exited on its
 * own within `timeout_ms` (not killed, not by a signal).  Returns its exit
 * code; `*out` gets what it printed, NUL-terminated (the caller frees it).
 */
int gf_test_ck_run(const char *dir, char *const argv[], int timeout_ms, char **out);

/* ---- CUDA, for the gpu suites ---------------------------------------------------- */

/* Fails the running test, naming the call and CUDA's error, unless it
 * succeeded.  Defined where <cuda_runtime_api.h> is included before this
 * header, as in the gpu suites; the includer has <check.h> (runner.h). */
#ifdef CUDART_VERSION
#define GF_TEST_CK_CUDA(call)                                                                      \
    do {                                                                                           \
        cudaError_t ck_cuda_err_ = (call);                                                         \
        ck_assert_msg(ck_cuda_err_ == cudaSuccess, "%s failed: %s (%d)", #call,                    \
                      cudaGetErrorString(ck_cuda_err_), (int)ck_cuda_err_);                        \
    } while (0)
#endif

#endif

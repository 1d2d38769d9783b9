/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the integration tests; see testutil.h for every contract.
 */
#include "testutil.h"

#include <assert.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "runner.h"
#include "wire.h"

#ifndef GF_TEST_DAEMON
#define GF_TEST_DAEMON "gpuframed"
#endif

/* The most gf_test_load_factor scales anything by, and the most a latency
 * bound is widened by (testutil.h): work sized by the load makes more load. */
#define LOAD_FACTOR_MAX  4.0
#define LATENCY_LOAD_MAX 8.0
/* How often the helpers poll a process or the daemon's STATS. */
#define POLL_INTERVAL_MS 10

/* The pause between two STATS of a helper that waits for a value: `ms`,
 * times the sanitizers' slowdown.  A STATS costs a sanitized daemon about
 * as much more (1.4 ms of TSan's with three shards against 0.2), and the
 * suites wait on it for minutes in all: polled as often as in a plain tree,
 * it kept most of a core busy answering. */
static unsigned stats_poll_ms(unsigned ms) {
    return ms * gf_test_time_scale();
}
/* Inputs a streamed frame rotates over: more than the daemon's two slots, so
 * that a reply showing a neighbour's (or a stale) output is caught. */
#define STREAM_POOL_COUNT 3
/* File descriptors a started daemon may inherit are closed up to this. */
#define CHILD_FD_CLOSE_LIMIT 4096
/* The seed used when a gf_test_stream asks for none. */
#define DEFAULT_SEED 0x6766726d65643031ull
/* The socket file's name inside the daemon's directory. */
#define SOCKET_NAME "s.sock"
/* The file gf_test_ck_run writes a command's output to, in its directory. */
#define COMMAND_OUTPUT_NAME "command.out"
/* Lines of a daemon's log that a failure shows, and room for them. */
#define LOG_TAIL_LINES 30
#define LOG_TEXT_MAX   4096

/* ---- time ------------------------------------------------------------------ */

void gf_test_sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- files and processes --------------------------------------------------- */

int gf_test_make_temp_dir(char *out, size_t out_len) {
    const char *base = getenv("TMPDIR");
    char tmpl[GF_TEST_PATH_MAX];
    size_t longest = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

    /* The socket lives in the directory: its path must fit sun_path. */
    if (base == NULL || base[0] == '\0' ||
        strlen(base) + strlen("/gftest.XXXXXX/" SOCKET_NAME) > longest)
        base = "/tmp";
    if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/gftest.XXXXXX", base) >= sizeof tmpl)
        return -ENAMETOOLONG;
    if (mkdtemp(tmpl) == NULL)
        return -errno;
    if ((size_t)snprintf(out, out_len, "%s", tmpl) >= out_len) {
        rmdir(tmpl);
        return -ENAMETOOLONG;
    }
    return 0;
}

int gf_test_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    size_t len = strlen(text);

    if (f == NULL)
        return -errno;
    if (fwrite(text, 1, len, f) != len) {
        int e = errno ? errno : EIO;
        fclose(f);
        return -e;
    }
    return fclose(f) == 0 ? 0 : -errno;
}

size_t gf_test_first_difference(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    size_t k = 0;
    if (memcmp(a, b, n) == 0)
        return n;
    while (x[k] == y[k])
        k++;
    return k;
}

char *gf_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        if (cap - n < 4096) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap + 1);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

void gf_test_log_tail(const char *path, unsigned lines, char *out, size_t out_len) {
    size_t len;
    char *text = gf_test_read_file(path, &len);

    if (out_len == 0)
        return;
    if (text == NULL || len == 0) {
        snprintf(out, out_len, "(no log)");
        free(text);
        return;
    }
    /* Walk back over `lines` newlines (a trailing one does not count). */
    size_t start = len;
    unsigned seen = 0;
    if (start > 0 && text[start - 1] == '\n')
        start--;
    while (start > 0) {
        if (text[start - 1] == '\n' && ++seen == lines)
            break;
        start--;
    }
    if (len - start >= out_len) {
        /* Too long: keep the newest lines that fit, whole. */
        start = len - (out_len - 1);
        char *nl = memchr(text + start, '\n', len - start);
        if (nl != NULL && (size_t)(nl + 1 - text) < len)
            start = (size_t)(nl + 1 - text);
    }
    snprintf(out, out_len, "%s", text + start);
    free(text);
}

/* Nonzero when a daemon log line reports a failure. */
static int is_failure_line(const char *line) {
    static const char *const marks[] = {
        "]: error: ",     /* GF_LOG_ERR                         */
        "]: warn: ",      /* GF_LOG_WRN                         */
        "Sanitizer",      /* AddressSanitizer, LeakSanitizer... */
        "runtime error:", /* UBSan                              */
        "Assertion",      /* a failed assert()                  */
    };

    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strstr(line, marks[i]) != NULL)
            return 1;
    return 0;
}

size_t gf_test_log_failures(const char *path, char *out, size_t out_len) {
    char *text = gf_test_read_file(path, NULL);
    size_t count = 0, used = 0;

    if (out != NULL && out_len > 0)
        out[0] = '\0';
    if (text == NULL)
        return 0;
    for (char *line = text; *line != '\0';) {
        char *end = strchr(line, '\n');
        char *next = end != NULL ? end + 1 : line + strlen(line);
        if (end != NULL)
            *end = '\0';
        if (is_failure_line(line)) {
            count++;
            if (out != NULL && used + 1 < out_len) {
                int n = snprintf(out + used, out_len - used, "%s\n", line);
                used += n < 0 ? 0 : (size_t)n;
                if (used >= out_len)
                    used = out_len - 1;
            }
        }
        line = next;
    }
    free(text);
    return count;
}

pid_t gf_test_spawn(char *const argv[], int out_fd, int err_fd) {
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid < 0)
        return -errno;
    if (pid > 0)
        return pid;

    /* The child: never return from here. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
    int in = open("/dev/null", O_RDONLY);
    if (in < 0)
        _exit(126);
    if (dup2(in, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
        dup2(err_fd, STDERR_FILENO) < 0)
        _exit(126);
    for (int fd = STDERR_FILENO + 1; fd < CHILD_FD_CLOSE_LIMIT; fd++)
        close(fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    execv(argv[0], argv);
    dprintf(STDERR_FILENO, "testutil: cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* gf_test_spawn with stdout and stderr into the file `output_path`. */
static pid_t spawn(char *const argv[], const char *output_path) {
    int out = open(output_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);

    if (out < 0)
        return -errno;
    pid_t pid = gf_test_spawn(argv, out, out);
    close(out);
    return pid;
}

/* Waits at most timeout_ms for `pid` to exit.  Returns 0 with its status, or
 * -ETIMEDOUT, or a negative errno of waitpid. */
static int wait_pid(pid_t pid, int timeout_ms, int *status) {
    uint64_t deadline = gf_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (gf_now_ms() >= deadline)
            return -ETIMEDOUT;
        gf_test_sleep_ms(POLL_INTERVAL_MS);
    }
}

int gf_test_reap(pid_t pid, int timeout_ms, int *status) {
    int rc = wait_pid(pid, timeout_ms, status);
    if (rc == -ETIMEDOUT) {
        kill(pid, SIGKILL);
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
            ;
    }
    return rc;
}

int gf_test_run_command(char *const argv[], const char *output_path, int timeout_ms, int *status) {
    pid_t pid = spawn(argv, output_path);

    if (pid < 0)
        return (int)pid;
    return gf_test_reap(pid, timeout_ms, status);
}

const char *gf_test_describe_status(int status, char *buf, size_t len) {
    if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "wait status 0x%x", (unsigned)status);
    return buf;
}

/* ---- the daemon ---------------------------------------------------------------- */

/* Nonzero when something accepts connections on `path`. */
static int socket_accepts(const char *path) {
    int fd = gf_test_raw_connect(path);

    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

const char *gf_test_daemon_path(void) {
    const char *daemon = getenv("GF_TEST_DAEMON");

    return daemon != NULL && daemon[0] != '\0' ? daemon : GF_TEST_DAEMON;
}

int gf_test_select_engine(const char **engine, char *why, size_t why_len) {
    const char *e = getenv("GF_TEST_ENGINE");

    if (e == NULL || e[0] == '\0')
        e = "cpu";
    if (strcmp(e, "cpu") != 0 && strcmp(e, "cuda") != 0) {
        gf_errorf(why, why_len, "GF_TEST_ENGINE must be cpu or cuda, not \"%s\"", e);
        return -EINVAL;
    }
    if (strcmp(e, "cuda") == 0 && access("/dev/nvidiactl", F_OK) != 0) {
        gf_errorf(why, why_len,
                  "no NVIDIA device node (/dev/nvidiactl); the cuda engine cannot run here");
        return -ENODEV;
    }
    *engine = e;
    return 0;
}

const char *gf_test_suite_engine(void) {
    const char *engine = NULL;
    char why[GF_TEST_ERR_MAX];
    int rc = gf_test_select_engine(&engine, why, sizeof why);

    if (rc == -ENODEV) {
        printf("SKIP: %s\n", why);
        exit(GF_SKIP_CODE);
    }
    if (rc < 0) {
        fprintf(stderr, "%s\n", why);
        exit(EXIT_FAILURE);
    }
    signal(SIGPIPE, SIG_IGN);
    return engine;
}

size_t gf_test_daemon_argv(const gf_test_daemon *d, char **argv) {
    size_t n = 0;

    argv[n++] = (char *)gf_test_daemon_path();
    argv[n++] = "--config";
    argv[n++] = (char *)d->config_path;
    argv[n++] = "--socket";
    argv[n++] = (char *)d->socket_path;
    argv[n++] = "--engine";
    argv[n++] = (char *)d->engine;
    assert(n == GF_TEST_DAEMON_ARGC);
    argv[n] = NULL;
    return n;
}

int gf_test_daemon_prepare(gf_test_daemon *d, const char *config_json, const char *engine,
                           char *err, size_t err_len) {
    int rc;

    memset(d, 0, sizeof *d);
    d->pid = -1;
    d->exit_status = -1;
    snprintf(d->engine, sizeof d->engine, "%s", engine);
    rc = gf_test_make_temp_dir(d->dir, sizeof d->dir);
    if (rc < 0) {
        gf_errorf(err, err_len, "cannot make a temporary directory: %s", strerror(-rc));
        return rc;
    }
    snprintf(d->config_path, sizeof d->config_path, "%s/gpuframed.json", d->dir);
    snprintf(d->socket_path, sizeof d->socket_path, "%s/" SOCKET_NAME, d->dir);
    snprintf(d->log_path, sizeof d->log_path, "%s/daemon.log", d->dir);
    char *with_shards = gf_test_config_with_shards(config_json);
    rc = gf_test_write_file(d->config_path, with_shards ? with_shards : config_json);
    free(with_shards);
    if (rc < 0) {
        gf_errorf(err, err_len, "cannot write %s: %s", d->config_path, strerror(-rc));
        return rc;
    }
    return 0;
}

char *gf_test_config_with_shards(const char *config_json) {
    const char *shards = getenv("GF_TEST_SHARDS");
    const char *brace = strchr(config_json, '{');
    if (!shards || !*shards || !brace || strstr(config_json, "\"shards\""))
        return NULL;
    size_t head = (size_t)(brace - config_json) + 1, len = strlen(config_json);
    char *out = malloc(len + strlen(shards) + 32);
    if (!out)
        return NULL;
    snprintf(out, len + strlen(shards) + 32, "%.*s\"shards\": %s,%s", (int)head, config_json,
             shards, brace + 1);
    return out;
}

int gf_test_daemon_spawn(gf_test_daemon *d, char *const argv[], char *err, size_t err_len) {
    pid_t pid = spawn(argv, d->log_path);

    if (pid < 0) {
        gf_errorf(err, err_len, "cannot start %s: %s", argv[0], strerror((int)-pid));
        return (int)pid;
    }
    d->pid = pid;
    d->exit_status = -1;
    return 0;
}

int gf_test_daemon_wait_listening(gf_test_daemon *d, const char *socket_path, int timeout_ms,
                                  char *err, size_t err_len) {
    char tail[2048], desc[96];
    uint64_t deadline = gf_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);

    for (;;) {
        int status;
        pid_t r = d->pid > 0 ? waitpid(d->pid, &status, WNOHANG) : -1;
        if (r == d->pid || d->pid <= 0) {
            if (r == d->pid) {
                d->pid = -1;
                d->exit_status = status;
            }
            gf_test_log_tail(d->log_path, 20, tail, sizeof tail);
            gf_errorf(
                err, err_len,
                "gpuframed (--engine %s) exited (%s) before accepting a connection; log %s:\n%s",
                d->engine, gf_test_describe_status(d->exit_status, desc, sizeof desc), d->log_path,
                tail);
            return -ECHILD;
        }
        if (socket_accepts(socket_path))
            return 0;
        if (gf_now_ms() >= deadline)
            break;
        gf_test_sleep_ms(POLL_INTERVAL_MS);
    }
    gf_test_log_tail(d->log_path, 20, tail, sizeof tail);
    gf_errorf(err, err_len,
              "gpuframed (--engine %s) did not accept a connection on %s within %d ms; "
              "log %s:\n%s",
              d->engine, socket_path, timeout_ms, d->log_path, tail);
    return -ETIMEDOUT;
}

/* Starts `argv` as d's process and waits until d's socket accepts.  A
 * daemon that never listens is stopped, and one that did not start leaves
 * nothing behind: its directory goes (the reason, with the log's tail, is
 * in err[err_len]).  Returns 0 or a negative errno. */
static int spawn_listening(gf_test_daemon *d, char *const argv[], char *err, size_t err_len) {
    int rc = gf_test_daemon_spawn(d, argv, err, err_len);

    if (rc == 0)
        rc = gf_test_daemon_wait_listening(d, d->socket_path, GF_TEST_START_TIMEOUT_MS, err,
                                           err_len);
    if (rc == -ETIMEDOUT) {
        int status;
        gf_test_daemon_stop(d, &status);
    }
    if (rc < 0)
        gf_test_daemon_cleanup(d);
    return rc;
}

int gf_test_daemon_start(gf_test_daemon *d, const char *config_json, const char *engine, char *err,
                         size_t err_len) {
    int rc = gf_test_daemon_prepare(d, config_json, engine, err, err_len);

    if (rc < 0)
        return rc;
    char *argv[GF_TEST_DAEMON_ARGC + 1];
    gf_test_daemon_argv(d, argv);
    return spawn_listening(d, argv, err, err_len);
}

int gf_test_daemon_signal(gf_test_daemon *d, int sig) {
    if (d->pid <= 0)
        return -ESRCH;
    return kill(d->pid, sig) == 0 ? 0 : -errno;
}

int gf_test_daemon_wait(gf_test_daemon *d, int timeout_ms, int *status) {
    int st = 0;

    if (d->pid <= 0) {
        if (status != NULL)
            *status = d->exit_status;
        return 0;
    }
    int rc = wait_pid(d->pid, timeout_ms, &st);
    if (rc < 0)
        return rc;
    d->pid = -1;
    d->exit_status = st;
    if (status != NULL)
        *status = st;
    return 0;
}

int gf_test_daemon_stop(gf_test_daemon *d, int *status) {
    if (d->pid <= 0)
        return gf_test_daemon_wait(d, 0, status);
    kill(d->pid, SIGTERM);
    if (gf_test_daemon_wait(d, GF_TEST_STOP_TIMEOUT_MS, status) == 0)
        return 0;
    kill(d->pid, SIGKILL);
    int st = 0;
    while (waitpid(d->pid, &st, 0) < 0 && errno == EINTR)
        ;
    d->pid = -1;
    d->exit_status = st;
    if (status != NULL)
        *status = st;
    return -ETIMEDOUT;
}

void gf_test_daemon_cleanup(gf_test_daemon *d) {
    if (d->dir[0] == '\0')
        return;
    DIR *dir = opendir(d->dir);
    if (dir != NULL) {
        struct dirent *e;
        char path[GF_TEST_PATH_MAX * 2];
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", d->dir, e->d_name);
            unlink(path);
        }
        closedir(dir);
    }
    rmdir(d->dir);
    d->dir[0] = '\0';
}

int gf_test_daemon_start_builtin(gf_test_daemon *d, const char *engine, char *err, size_t err_len) {
    int rc = gf_test_daemon_prepare(d, "", engine, err, err_len);

    if (rc < 0)
        return rc;
    unlink(d->config_path);
    char *argv[] = {
        (char *)gf_test_daemon_path(), "--socket", d->socket_path, "--engine", d->engine, NULL};
    return spawn_listening(d, argv, err, err_len);
}

int gf_test_daemon_put_config(const gf_test_daemon *d, const char *config_json) {
    char tmp[GF_TEST_PATH_MAX + 8];

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.new", d->config_path) >= sizeof tmp)
        return -ENAMETOOLONG;
    char *with_shards = gf_test_config_with_shards(config_json);
    int rc = gf_test_write_file(tmp, with_shards ? with_shards : config_json);
    free(with_shards);
    if (rc < 0)
        return rc;
    return rename(tmp, d->config_path) == 0 ? 0 : -errno;
}

/* ---- raw sockets -------------------------------------------------------------------- */

int gf_test_raw_connect(const char *socket_path) {
    struct sockaddr_un sa;
    struct timeval tv = {.tv_sec = GF_TEST_REPLY_TIMEOUT_MS / 1000,
                         .tv_usec = (GF_TEST_REPLY_TIMEOUT_MS % 1000) * 1000};

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

int gf_test_raw_send_fds(int sock, const void *buf, size_t len, int fd, int nfds) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(4 * sizeof(int))];
    } control;
    if (nfds < 1 || nfds > 4 || len == 0)
        return -EINVAL;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.bytes,
                         .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int))};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    for (int i = 0; i < nfds; i++)
        memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof fd);
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EMSGSIZE;
}

int gf_test_raw_send(int fd, const void *buf, size_t len) {
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int gf_test_raw_send_header(int fd, const gf_header *h) {
    unsigned char buf[GF_HEADER_BYTES];

    gf_header_encode(h, buf);
    return gf_test_raw_send(fd, buf, sizeof buf);
}

/*
 * Waits until `fd` has bytes (or EOF) to read, at most until `deadline_ms`
 * of gf_now_ms.  Returns 1 when it has; 0 when poll woke with nothing or
 * was interrupted (call again); -ETIMEDOUT once the deadline is reached; or
 * poll's negative errno.
 */
static int wait_readable(int fd, uint64_t deadline_ms) {
    uint64_t now = gf_now_ms();

    if (now >= deadline_ms)
        return -ETIMEDOUT;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, (int)(deadline_ms - now));
    if (pr < 0)
        return errno == EINTR ? 0 : -errno;
    return pr > 0;
}

/*
 * Receives exactly `len` bytes, waiting at most `timeout_ms` in all.
 * Returns `len`; fewer (>= 0) when the peer closed first; -ETIMEDOUT;
 * -ECONNRESET; or another negative errno.
 */
static ssize_t raw_recv(int fd, void *buf, size_t len, int timeout_ms) {
    unsigned char *p = buf;
    size_t got = 0;
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms;

    while (got < len) {
        int ready = wait_readable(fd, deadline);
        if (ready < 0)
            return ready;
        if (ready == 0)
            continue;
        ssize_t n = recv(fd, p + got, len - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            return (ssize_t)got;
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return got > 0 ? (ssize_t)got : -errno;
        }
    }
    return (ssize_t)got;
}

int gf_test_raw_recv_reply(int fd, gf_header *h, void *payload, size_t cap, int timeout_ms,
                           char *err, size_t err_len) {
    unsigned char buf[GF_HEADER_BYTES];
    ssize_t n = raw_recv(fd, buf, sizeof buf, timeout_ms);

    if (n < 0) {
        gf_errorf(err, err_len, "no reply header: %s", strerror((int)-n));
        return (int)n;
    }
    if ((size_t)n < sizeof buf) {
        gf_errorf(err, err_len, "connection closed after %zd bytes of a reply header", n);
        return -ECONNRESET;
    }
    int rc = gf_header_parse(buf, sizeof buf, GF_ROLE_CLIENT, cap, h);
    if (rc < 0) {
        gf_errorf(err, err_len, "bad reply header: %s (type %u, payload %" PRIu64 " bytes)",
                  gf_status_name((uint32_t)-rc), (unsigned)h->type, h->payload_bytes);
        return -EPROTO;
    }
    if (h->payload_bytes == 0)
        return 0;
    n = raw_recv(fd, payload, (size_t)h->payload_bytes, timeout_ms);
    if (n < 0) {
        gf_errorf(err, err_len, "no payload after a %s header: %s", gf_msg_type_name(h->type),
                  strerror((int)-n));
        return (int)n;
    }
    if ((uint64_t)n < h->payload_bytes) {
        gf_errorf(err, err_len, "connection closed after %zd of %" PRIu64 " payload bytes", n,
                  h->payload_bytes);
        return -ECONNRESET;
    }
    return 0;
}

int gf_test_raw_expect_close(int fd, int timeout_ms, size_t *extra) {
    unsigned char buf[4096];
    size_t more = 0;
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        int ready = wait_readable(fd, deadline);
        if (ready == -ETIMEDOUT && extra != NULL)
            *extra = more;
        if (ready < 0)
            return ready;
        if (ready == 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            more += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n < 0 && errno != ECONNRESET)
            return -errno;
        if (extra != NULL)
            *extra = more;
        return more > 0 ? -EPROTO : 0;
    }
}

/* ---- LIST and STATS ------------------------------------------------------------- */

int gf_test_list(gf_client *c, gf_pipeline **out, size_t *count, char *err, size_t err_len) {
    char *json = NULL, why[512];
    int rc = gf_client_request_json(c, GF_MSG_LIST, &json, GF_TEST_REPLY_TIMEOUT_MS);

    if (rc < 0) {
        gf_errorf(err, err_len, "LIST failed: %s (%s)", strerror(-rc), gf_client_error(c));
        return rc;
    }
    if (gf_pipelines_from_json(json, out, count, why, sizeof why) != 0) {
        gf_errorf(err, err_len, "LIST reply does not parse: %s; reply: %.300s", why, json);
        free(json);
        return -EPROTO;
    }
    free(json);
    return 0;
}

uint64_t gf_test_stats_sent;

int gf_test_stats(gf_client *c, cJSON **out, char *err, size_t err_len) {
    char *json = NULL;
    gf_test_stats_sent++;
    int rc = gf_client_request_json(c, GF_MSG_STATS, &json, GF_TEST_REPLY_TIMEOUT_MS);

    if (rc < 0) {
        gf_errorf(err, err_len, "STATS failed: %s (%s)", strerror(-rc), gf_client_error(c));
        return rc;
    }
    cJSON *root = cJSON_Parse(json);
    if (root == NULL || !cJSON_IsObject(root)) {
        gf_errorf(err, err_len, "STATS reply is not a JSON object: %.300s", json);
        cJSON_Delete(root);
        free(json);
        return -EPROTO;
    }
    free(json);
    *out = root;
    return 0;
}

/* The item at the dotted path, or NULL. */
static const cJSON *json_at(const cJSON *root, const char *dotted) {
    char path[256], *save = NULL;
    const cJSON *node = root;

    if ((size_t)snprintf(path, sizeof path, "%s", dotted) >= sizeof path)
        return NULL;
    for (char *key = strtok_r(path, ".", &save); key != NULL && node != NULL;
         key = strtok_r(NULL, ".", &save))
        node = cJSON_IsObject(node) ? cJSON_GetObjectItemCaseSensitive(node, key) : NULL;
    return node;
}

int gf_test_json_u64(const cJSON *root, const char *dotted, uint64_t *out) {
    const cJSON *item = json_at(root, dotted);
    /* Doubles hold integers exactly up to 2^53. */
    const double exact_max = 9007199254740992.0;

    if (!cJSON_IsNumber(item))
        return -1;
    double v = item->valuedouble;
    if (!(v >= 0.0 && v <= exact_max) || v != (double)(uint64_t)v)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

const char *gf_test_json_str(const cJSON *root, const char *dotted) {
    const cJSON *item = json_at(root, dotted);

    return cJSON_IsString(item) ? item->valuestring : NULL;
}

int gf_test_frame_rejections(const cJSON *stats, uint64_t *out) {
    static const uint32_t frame_statuses[] = {GF_ERR_UNKNOWN_PIPELINE, GF_ERR_BAD_LENGTH,
                                              GF_ERR_ENGINE,           GF_ERR_SHUTTING_DOWN,
                                              GF_ERR_TIMEOUT,          GF_ERR_INTERNAL};
    uint64_t sum = 0;

    for (size_t i = 0; i < sizeof frame_statuses / sizeof frame_statuses[0]; i++) {
        char path[64];
        uint64_t v;
        snprintf(path, sizeof path, "rejected.%s", gf_status_name(frame_statuses[i]));
        if (gf_test_json_u64(stats, path, &v) != 0)
            return -1;
        sum += v;
    }
    *out = sum;
    return 0;
}

int gf_test_wait_idle(gf_client *c, uint64_t open_connections, int timeout_ms, cJSON **last,
                      char *err, size_t err_len) {
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        cJSON *st = NULL;
        uint64_t count, free_count, in_flight, open;
        int rc = gf_test_stats(c, &st, err, err_len);
        if (rc < 0)
            return rc;
        if (gf_test_json_u64(st, "slots.count", &count) != 0 ||
            gf_test_json_u64(st, "slots.free", &free_count) != 0 ||
            gf_test_json_u64(st, "slots.in_flight", &in_flight) != 0 ||
            gf_test_json_u64(st, "connections.open", &open) != 0) {
            gf_errorf(err, err_len, "STATS lacks slots.count/free/in_flight or connections.open");
            cJSON_Delete(st);
            return -EPROTO;
        }
        if (free_count == count && in_flight == 0 && open == open_connections) {
            if (last != NULL)
                *last = st;
            else
                cJSON_Delete(st);
            return 0;
        }
        if (gf_now_ms() >= deadline) {
            gf_errorf(err, err_len,
                      "daemon not idle after %d ms: slots.free %" PRIu64 " of %" PRIu64
                      ", slots.in_flight %" PRIu64 ", connections.open %" PRIu64 " (want %" PRIu64
                      ")",
                      timeout_ms, free_count, count, in_flight, open, open_connections);
            if (last != NULL)
                *last = st;
            else
                cJSON_Delete(st);
            return -ETIMEDOUT;
        }
        cJSON_Delete(st);
        gf_test_sleep_ms(stats_poll_ms(2 * POLL_INTERVAL_MS));
    }
}

/* ---- inputs and verified streaming ---------------------------------------------- */

/* xorshift64*: a fast per-caller random stream, so threads never share one. */
static uint64_t next_rand(uint64_t *state) {
    uint64_t x = *state ? *state : DEFAULT_SEED;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

void gf_test_fill_input(const gf_pipeline_kind *kind, void *in, size_t bytes, uint64_t *rng) {
    unsigned char *p = in;
    size_t i = 0;

    if (kind->input_f32) {
        for (; i + sizeof(float) <= bytes; i += sizeof(float)) {
            /* 24 random bits: every value is a float exactly. */
            float f = (float)(next_rand(rng) >> 40) / 16777216.0f * 8.0f - 4.0f;
            if (f == 0.0f)
                f = 0.25f;
            memcpy(p + i, &f, sizeof f);
        }
    }
    for (; i < bytes; i += sizeof(uint64_t)) {
        uint64_t r = next_rand(rng);
        size_t n = bytes - i < sizeof r ? bytes - i : sizeof r;
        memcpy(p + i, &r, n);
    }
    /* Never an all-zero frame: it would hide a reply of untouched memory. */
    for (i = 0; i < bytes && p[i] == 0; i++)
        ;
    if (bytes > 0 && i == bytes)
        p[0] = 0x5A;
}

double gf_test_sincos_ns(void) {
    /* Many short runs: on a loaded machine some run undisturbed, and the
     * best of three could be three times too slow (a test's "slow" frame
     * then took 589 ms where it meant 1500). */
    enum { FLOATS = 4096, ITERS = 50, RUNS = 24 };
    const gf_pipeline_kind *kind = gf_pipeline_kind_find("sincos");
    static float in[FLOATS], out[FLOATS];
    gf_params params;
    uint64_t rng = 1;
    double best = 1e30;

    memset(&params, 0, sizeof params);
    gf_params_defaults(kind, &params);
    params.iters = ITERS;
    gf_test_fill_input(kind, in, sizeof in, &rng);
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = gf_now_ns();
        kind->reference(&params, in, sizeof in, out);
        double ns = (double)(gf_now_ns() - t0) / ((double)FLOATS * ITERS);
        if (ns < best)
            best = ns;
    }
    return best > 0.1 ? best : 0.1;
}

size_t gf_test_slow_frame_bytes(double sincos_ns, unsigned iters, unsigned ms, size_t max_bytes) {
    double floats = (double)ms * 1e6 / ((double)iters * sincos_ns);

    if (floats < 64)
        floats = 64;
    if (floats > (double)(max_bytes / 4))
        floats = (double)(max_bytes / 4);
    return (size_t)floats * 4u;
}

int gf_test_make_frame(const gf_pipeline *p, size_t bytes, uint64_t *rng, void **in, void **ref,
                       size_t *ref_bytes, char *err, size_t err_len) {
    char why[256];
    int64_t out = p->stages[0].kind->output_bytes(&p->stages[0].params, bytes, why, sizeof why);

    if (out < 0) {
        gf_errorf(err, err_len, "pipeline %s cannot take %zu bytes: %s", p->name, bytes, why);
        return -EINVAL;
    }
    void *i = malloc(bytes > 0 ? bytes : 1);
    void *r = malloc(out > 0 ? (size_t)out : 1);
    if (i == NULL || r == NULL) {
        free(i);
        free(r);
        gf_errorf(err, err_len, "out of memory for a frame of %zu bytes", bytes);
        return -ENOMEM;
    }
    gf_test_fill_input(p->stages[0].kind, i, bytes, rng);
    /* A canary, so that a reference that wrote nothing is noticed. */
    memset(r, 0xA5, out > 0 ? (size_t)out : 1);
    p->stages[0].kind->reference(&p->stages[0].params, i, bytes, r);
    *in = i;
    *ref = r;
    *ref_bytes = (size_t)out;
    return 0;
}

int gf_test_check_result(const gf_pipeline *p, const gf_reply *r, uint64_t frame_id,
                         const void *ref, size_t ref_bytes, char *err, size_t err_len) {
    const gf_header *h = &r->header;
    char why[512];

    if (h->type != GF_MSG_RESULT) {
        char text[GF_ERROR_TEXT_MAX_BYTES + 1] = "";
        if (h->type == GF_MSG_ERROR && r->payload_bytes > 0) {
            size_t n = r->payload_bytes < GF_ERROR_TEXT_MAX_BYTES ? r->payload_bytes
                                                                  : GF_ERROR_TEXT_MAX_BYTES;
            memcpy(text, r->payload, n);
            text[n] = '\0';
        }
        gf_errorf(err, err_len, "frame %" PRIu64 ": got %s (status %u %s) \"%s\", expected RESULT",
                  frame_id, gf_msg_type_name(h->type), (unsigned)h->status,
                  gf_status_name(h->status), text);
        return -1;
    }
    if (h->status != GF_OK || h->flags != 0 || h->version != GF_PROTOCOL_VERSION) {
        gf_errorf(err, err_len, "frame %" PRIu64 ": RESULT with status %u, flags %u, version %u",
                  frame_id, (unsigned)h->status, (unsigned)h->flags, (unsigned)h->version);
        return -1;
    }
    if (h->frame_id != frame_id || h->pipeline_id != p->id) {
        gf_errorf(err, err_len,
                  "RESULT for frame %" PRIu64 " pipeline %u, expected frame %" PRIu64
                  " pipeline %u",
                  h->frame_id, (unsigned)h->pipeline_id, frame_id, (unsigned)p->id);
        return -1;
    }
    if (r->payload_bytes != ref_bytes || h->payload_bytes != ref_bytes) {
        gf_errorf(err, err_len, "frame %" PRIu64 ": RESULT of %zu bytes, expected %zu", frame_id,
                  r->payload_bytes, ref_bytes);
        return -1;
    }
    if (ref_bytes > 0 &&
        gf_pipeline_compare(p->stages[0].kind, r->payload, ref, ref_bytes, why, sizeof why) != 0) {
        gf_errorf(err, err_len, "frame %" PRIu64 ": output differs from the %s reference: %s",
                  frame_id, p->stages[0].kind->name, why);
        return -1;
    }
    return 0;
}

int gf_test_stream_verified(gf_client *c, const gf_test_stream *s, char *err, size_t err_len) {
    const gf_pipeline *p = s->pipeline;
    void *in[STREAM_POOL_COUNT] = {NULL}, *ref[STREAM_POOL_COUNT] = {NULL};
    size_t ref_bytes = 0;
    unsigned pool = s->frame_count < STREAM_POOL_COUNT ? s->frame_count : STREAM_POOL_COUNT;
    uint64_t rng = s->seed ? s->seed : DEFAULT_SEED;
    char why[GF_TEST_ERR_MAX];
    int rc = 0;

    if (s->window == 0 || gf_client_in_flight(c) != 0) {
        gf_errorf(err, err_len, "stream of %s: window 0 or %zu requests already in flight", p->name,
                  gf_client_in_flight(c));
        return -EINVAL;
    }
    for (unsigned k = 0; k < pool; k++) {
        rc = gf_test_make_frame(p, s->frame_bytes, &rng, &in[k], &ref[k], &ref_bytes, why,
                                sizeof why);
        if (rc < 0) {
            gf_errorf(err, err_len, "%s", why);
            goto out;
        }
    }

    unsigned sent = 0, received = 0;
    while (received < s->frame_count) {
        while (sent < s->frame_count && sent - received < s->window) {
            rc = gf_client_send_frame(c, p->id, s->first_frame_id + sent, in[sent % pool],
                                      s->frame_bytes);
            if (rc < 0) {
                gf_errorf(err, err_len,
                          "%s, %zu bytes, window %u: queueing frame %u of %u: %s (%s)", p->name,
                          s->frame_bytes, s->window, sent + 1, s->frame_count, strerror(-rc),
                          gf_client_error(c));
                goto out;
            }
            sent++;
        }
        gf_reply r;
        rc = gf_client_recv(c, &r, GF_TEST_REPLY_TIMEOUT_MS);
        if (rc < 0) {
            gf_errorf(err, err_len, "%s, %zu bytes, window %u: no reply to frame %u of %u: %s (%s)",
                      p->name, s->frame_bytes, s->window, received + 1, s->frame_count,
                      strerror(-rc), gf_client_error(c));
            goto out;
        }
        if (gf_test_check_result(p, &r, s->first_frame_id + received, ref[received % pool],
                                 ref_bytes, why, sizeof why) != 0) {
            gf_errorf(err, err_len, "%s, %zu bytes, window %u, reply %u of %u: %s", p->name,
                      s->frame_bytes, s->window, received + 1, s->frame_count, why);
            rc = -EBADMSG;
            goto out;
        }
        received++;
    }
    rc = 0;

out:
    for (unsigned k = 0; k < pool; k++) {
        free(in[k]);
        free(ref[k]);
    }
    return rc;
}

/* ---- the daemon's process ------------------------------------------------------- */

int gf_test_daemon_fd_count(const gf_test_daemon *d) {
    char path[64];
    int count = 0;

    snprintf(path, sizeof path, "/proc/%d/fd", (int)d->pid);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -errno;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        count += e->d_name[0] != '.';
    closedir(dir);
    return count;
}

int64_t gf_test_daemon_status_kb(const gf_test_daemon *d, const char *field) {
    char path[64], line[256];
    size_t n = strlen(field);
    int64_t kb = -ENOENT;

    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -errno;
    while (kb < 0 && fgets(line, sizeof line, f) != NULL) {
        uint64_t v;
        if (strncmp(line, field, n) == 0 && sscanf(line + n, "%" SCNu64, &v) == 1)
            kb = (int64_t)v;
    }
    fclose(f);
    return kb;
}

/* ---- bounds and logs --------------------------------------------------------------- */

unsigned gf_test_time_scale(void) {
    const char *text = getenv("CK_TIMEOUT_MULTIPLIER");
    int scale = text != NULL ? atoi(text) : 0;

    return scale > 0 ? (unsigned)scale : 1u;
}

int gf_test_under_tsan(void) {
    const char *s = getenv("GF_TEST_SANITIZE");
    return s != NULL && strstr(s, "thread") != NULL;
}

/* The load average of the last minute over the online CPUs, from 1 to `most`. */
static double load_factor(double most) {
    double load = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/loadavg", "r");

    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1)
            load = 0;
        fclose(f);
    }
    double factor = cpus > 0 ? load / (double)cpus : 1;
    return factor < 1 ? 1 : factor > most ? most : factor;
}

double gf_test_load_factor(void) {
    return load_factor(LOAD_FACTOR_MAX);
}

uint64_t gf_test_latency_bound_ms(uint64_t ms) {
    uint64_t scale = gf_test_time_scale();

    return (uint64_t)((double)(ms * scale * scale) * load_factor(LATENCY_LOAD_MAX));
}

int gf_test_line_has(const char *line, size_t len, const char *word) {
    size_t n = strlen(word);

    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(line + i, word, n) == 0)
            return 1;
    return 0;
}

size_t gf_test_count_lines(const char *text, const char *a, const char *b) {
    size_t count = 0;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        count += gf_test_line_has(line, len, a) && (b == NULL || gf_test_line_has(line, len, b));
        line = end != NULL ? end + 1 : NULL;
    }
    return count;
}

/* Longest kind of log line kept; longer ones are cut (and still compared). */
#define LOG_KIND_MAX 80

/* One line of a daemon log as gf_test_log_max_per_second sees it. */
typedef struct log_entry {
    char kind[LOG_KIND_MAX]; /* the message, read as described in testutil.h */
    int64_t t_ms;            /* its time stamp, ms since the epoch (as UTC)   */
    size_t line;             /* its place in the log, to keep the order        */
} log_entry;

/* Parses one daemon log line "<date>T<time>.<ms> gpuframed[<pid>]: <level>:
 * <text>" into `e`.  Returns 0, or -1 for a line of another format. */
static int parse_log_line(const char *line, log_entry *e) {
    struct tm tm = {0};
    int ms = 0, used = 0;

    if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3d gpuframed[%*d]: %n", &tm.tm_year, &tm.tm_mon,
               &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &used) != 7 ||
        used == 0)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    e->t_ms = (int64_t)timegm(&tm) * 1000 + ms;
    const char *text = strstr(line + used, ": ");
    if (text == NULL)
        return -1;
    text += 2;
    /* Digits read as '#'. */
    char norm[GF_TEST_ERR_MAX];
    size_t n = 0;
    for (const char *p = text; *p != '\0' && *p != '\n' && n + 1 < sizeof norm; p++) {
        if (*p >= '0' && *p <= '9') {
            if (n == 0 || norm[n - 1] != '#')
                norm[n++] = '#';
            continue;
        }
        norm[n++] = *p;
    }
    norm[n] = '\0';
    const char *start = norm;
    if (strncmp(start, "connection #", strlen("connection #")) == 0) {
        const char *after = strstr(start, "): ");
        if (after != NULL)
            start = after + 3;
    }
    size_t len = strcspn(start, "(;:");
    while (len > 0 && start[len - 1] == ' ')
        len--;
    if (len >= sizeof e->kind)
        len = sizeof e->kind - 1;
    memcpy(e->kind, start, len);
    e->kind[len] = '\0';
    return 0;
}

/* qsort: by kind, then in log order. */
static int log_entry_cmp(const void *a, const void *b) {
    const log_entry *x = a, *y = b;
    int k = strcmp(x->kind, y->kind);

    if (k != 0)
        return k;
    return x->line < y->line ? -1 : x->line > y->line;
}

int gf_test_log_max_per_second(const char *path, char *kind, size_t kind_len, char *when,
                               size_t when_len) {
    char *text = gf_test_read_file(path, NULL);
    log_entry *e = NULL;
    size_t count = 0, cap = 0;
    int worst = 0;

    if (kind != NULL && kind_len > 0)
        kind[0] = '\0';
    if (when != NULL && when_len > 0)
        when[0] = '\0';
    if (text == NULL)
        return errno != 0 ? -errno : -EIO;
    for (char *line = text; *line != '\0';) {
        char *end = strchr(line, '\n');
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 256;
            log_entry *ne = realloc(e, ncap * sizeof *ne);
            if (ne == NULL) {
                free(e);
                free(text);
                return -ENOMEM;
            }
            e = ne;
            cap = ncap;
        }
        if (parse_log_line(line, &e[count]) == 0) {
            e[count].line = count;
            count++;
        }
        line = end != NULL ? end + 1 : line + strlen(line);
    }
    qsort(e, count, sizeof *e, log_entry_cmp);
    /* Per kind, a window from each line to the last within 1000 ms of it. */
    for (size_t first = 0, last = 0; first < count; first++) {
        if (last < first)
            last = first;
        while (last + 1 < count && strcmp(e[last + 1].kind, e[first].kind) == 0 &&
               e[last + 1].t_ms - e[first].t_ms < 1000)
            last++;
        int n = (int)(last - first + 1);
        if (n > worst) {
            worst = n;
            if (kind != NULL)
                snprintf(kind, kind_len, "%s", e[first].kind);
            if (when != NULL) {
                time_t s = (time_t)(e[first].t_ms / 1000);
                struct tm tm;
                gmtime_r(&s, &tm);
                strftime(when, when_len, "%H:%M:%S", &tm);
            }
        }
    }
    free(e);
    free(text);
    return worst;
}

/* ---- the same, asserted ---------------------------------------------------------- */

void gf_test_ck_daemon_start(gf_test_daemon *d, const char *config_json, const char *engine) {
    char err[GF_TEST_ERR_MAX];
    int rc = gf_test_daemon_start(d, config_json, engine, err, sizeof err);

    ck_assert_msg(rc == 0, "cannot start gpuframed with the %s engine: %s", engine, err);
}

void gf_test_ck_daemon_start_builtin(gf_test_daemon *d, const char *engine) {
    char err[GF_TEST_ERR_MAX];
    int rc = gf_test_daemon_start_builtin(d, engine, err, sizeof err);

    ck_assert_msg(rc == 0, "cannot start gpuframed (built-in configuration) with the %s engine: %s",
                  engine, err);
}

void gf_test_ck_daemon_put_config(const gf_test_daemon *d, const char *config_json) {
    int rc = gf_test_daemon_put_config(d, config_json);

    ck_assert_msg(rc == 0, "cannot replace %s: %s", d->config_path, strerror(-rc));
}

uint64_t gf_test_ck_daemon_status_kb(const gf_test_daemon *d, const char *field) {
    int64_t kb = gf_test_daemon_status_kb(d, field);

    ck_assert_msg(kb >= 0, "/proc/%d/status %s: %s", (int)d->pid, field, strerror((int)-kb));
    return (uint64_t)kb;
}

void gf_test_ck_daemon_stop(gf_test_daemon *d, enum gf_test_stop_check check) {
    char desc[96], lines[LOG_TEXT_MAX];
    int status = -1;
    int rc = gf_test_daemon_stop(d, &status);

    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        gf_test_log_tail(d->log_path, LOG_TAIL_LINES, lines, sizeof lines);
        ck_abort_msg("gpuframed did not stop cleanly after SIGTERM: %s%s; log:\n%s",
                     gf_test_describe_status(status, desc, sizeof desc),
                     rc != 0 ? ", killed after a timeout" : "", lines);
    }
    if (check == GF_TEST_STOP_EXIT_0_CLEAN_LOG) {
        size_t n = gf_test_log_failures(d->log_path, lines, sizeof lines);
        ck_assert_msg(n == 0, "gpuframed logged %zu error/warning line(s):\n%s", n, lines);
    }
    gf_test_daemon_cleanup(d);
}

int gf_test_ck_daemon_wait(gf_test_daemon *d, int timeout_ms) {
    char tail[LOG_TEXT_MAX];
    int status = -1;

    if (gf_test_daemon_wait(d, timeout_ms, &status) != 0) {
        gf_test_daemon_stop(d, &status);
        gf_test_log_tail(d->log_path, LOG_TAIL_LINES, tail, sizeof tail);
        ck_abort_msg("gpuframed did not exit within %d ms; log:\n%s", timeout_ms, tail);
    }
    return status;
}

void gf_test_ck_daemon_exited(const gf_test_daemon *d, int status, int code) {
    char tail[LOG_TEXT_MAX], desc[96];

    if (WIFEXITED(status) && WEXITSTATUS(status) == code)
        return;
    gf_test_log_tail(d->log_path, LOG_TAIL_LINES, tail, sizeof tail);
    ck_abort_msg("gpuframed %s, expected exit %d; log:\n%s",
                 gf_test_describe_status(status, desc, sizeof desc), code, tail);
}

gf_client *gf_test_ck_connect(const char *socket_path) {
    gf_client *c = NULL;
    int rc = gf_client_connect(socket_path, &c);

    ck_assert_msg(rc == 0, "gf_client_connect(%s): %s", socket_path, strerror(-rc));
    return c;
}

int gf_test_ck_raw_connect(const char *socket_path) {
    int fd = gf_test_raw_connect(socket_path);

    ck_assert_msg(fd >= 0, "connect(%s): %s", socket_path, strerror(-fd));
    return fd;
}

int gf_test_ck_unix_socket(const char *path, int backlog) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_msg(strlen(path) < sizeof sa.sun_path, "%s: too long for a socket", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind %s: %s", path,
                  strerror(errno));
    if (backlog > 0)
        ck_assert_int_eq(listen(fd, backlog), 0);
    return fd;
}

gf_pipeline *gf_test_ck_list(gf_client *c, size_t *count) {
    char err[GF_TEST_ERR_MAX];
    gf_pipeline *p = NULL;
    size_t n = 0;

    ck_assert_msg(gf_test_list(c, &p, &n, err, sizeof err) == 0, "%s", err);
    if (count != NULL)
        *count = n;
    return p;
}

cJSON *gf_test_ck_stats(gf_client *c) {
    char err[GF_TEST_ERR_MAX];
    cJSON *st = NULL;

    ck_assert_msg(gf_test_stats(c, &st, err, sizeof err) == 0, "%s", err);
    return st;
}

uint64_t gf_test_ck_u64(const cJSON *root, const char *dotted) {
    uint64_t v = 0;

    ck_assert_msg(gf_test_json_u64(root, dotted, &v) == 0, "no counter %s (an exact integer >= 0)",
                  dotted);
    return v;
}

uint64_t gf_test_ck_stat(gf_client *c, const char *dotted) {
    cJSON *st = gf_test_ck_stats(c);
    uint64_t v = gf_test_ck_u64(st, dotted);

    cJSON_Delete(st);
    return v;
}

uint64_t gf_test_ck_wait_stat(gf_client *c, const char *dotted, uint64_t least, uint64_t most,
                              int timeout_ms) {
    uint64_t deadline = gf_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);

    for (;;) {
        uint64_t v = gf_test_ck_stat(c, dotted);
        if ((v >= least && v <= most) || gf_now_ms() >= deadline)
            return v;
        gf_test_sleep_ms(stats_poll_ms(POLL_INTERVAL_MS / 2));
    }
}

void gf_test_ck_wait_idle(gf_client *c, uint64_t open_connections, int timeout_ms, cJSON **last) {
    char err[GF_TEST_ERR_MAX];
    cJSON *st = NULL;
    int rc = gf_test_wait_idle(c, open_connections, timeout_ms, &st, err, sizeof err);

    if (rc != 0 || last == NULL)
        cJSON_Delete(st);
    ck_assert_msg(rc == 0, "%s", err);
    if (last != NULL)
        *last = st;
}

void gf_test_ck_stream(gf_client *c, const gf_test_stream *s) {
    char err[GF_TEST_ERR_MAX];

    ck_assert_msg(gf_test_stream_verified(c, s, err, sizeof err) == 0, "%s", err);
}

void gf_test_ck_stream_id(gf_client *c, uint32_t pipeline_id, size_t frame_bytes,
                          unsigned frame_count, unsigned window) {
    size_t count = 0;
    gf_pipeline *p = gf_test_ck_list(c, &count);

    ck_assert_msg(pipeline_id < count, "no pipeline %u in LIST (%zu)", (unsigned)pipeline_id,
                  count);
    gf_test_ck_stream(c, &(gf_test_stream){.pipeline = &p[pipeline_id],
                                           .frame_bytes = frame_bytes,
                                           .frame_count = frame_count,
                                           .window = window});
    free(p);
}

void gf_test_ck_raw_frame(int fd, uint64_t frame_id, uint32_t pipeline_id, uint64_t payload_bytes,
                          const void *payload, size_t sent_bytes) {
    gf_header h = gf_test_header(GF_MSG_FRAME, frame_id, pipeline_id, payload_bytes);
    void *zeros = NULL;

    ck_assert_int_eq(gf_test_raw_send_header(fd, &h), 0);
    if (payload == NULL) {
        zeros = calloc(1, sent_bytes > 0 ? sent_bytes : 1);
        ck_assert_ptr_nonnull(zeros);
        payload = zeros;
    }
    ck_assert_int_eq(gf_test_raw_send(fd, payload, sent_bytes), 0);
    free(zeros);
}

int *gf_test_ck_flood_unread(const char *socket_path, unsigned connections, unsigned requests,
                             uint8_t type) {
    int *fds = calloc(connections, sizeof *fds);
    unsigned char *reqs = malloc((size_t)requests * GF_HEADER_BYTES);
    int small = GF_TEST_FLOOD_RCVBUF_BYTES;

    ck_assert_ptr_nonnull(fds);
    ck_assert_ptr_nonnull(reqs);
    for (unsigned i = 0; i < requests; i++) {
        gf_header h = gf_test_header(type, i, 0, 0);
        gf_header_encode(&h, reqs + (size_t)i * GF_HEADER_BYTES);
    }
    for (unsigned i = 0; i < connections; i++) {
        fds[i] = gf_test_ck_raw_connect(socket_path);
        setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    for (unsigned i = 0; i < connections; i++)
        ck_assert_int_eq(gf_test_raw_send(fds[i], reqs, (size_t)requests * GF_HEADER_BYTES), 0);
    free(reqs);
    return fds;
}

void gf_test_flood_close(int *fds, unsigned connections) {
    for (unsigned i = 0; i < connections; i++)
        close(fds[i]);
    free(fds);
}

gf_header gf_test_ck_raw_error(int fd, uint32_t status, const char *words, int timeout_ms,
                               enum gf_test_after_error after) {
    char err[GF_TEST_ERR_MAX], text[GF_ERROR_TEXT_MAX_BYTES + 1];
    gf_header h;
    int rc =
        gf_test_raw_recv_reply(fd, &h, text, GF_ERROR_TEXT_MAX_BYTES, timeout_ms, err, sizeof err);

    ck_assert_msg(rc == 0, "no %s ERROR: %s", gf_status_name(status), err);
    text[h.payload_bytes] = '\0';
    ck_assert_msg(h.type == GF_MSG_ERROR, "a %s reply, expected ERROR %s", gf_msg_type_name(h.type),
                  gf_status_name(status));
    ck_assert_msg(h.status == status, "ERROR %s (%u), expected %s (%u): \"%s\"",
                  gf_status_name(h.status), (unsigned)h.status, gf_status_name(status),
                  (unsigned)status, text);
    ck_assert_msg(strstr(text, words) != NULL, "ERROR text \"%s\" lacks \"%s\"", text, words);
    if (after == GF_TEST_CLOSES) {
        ck_assert_int_eq(gf_test_raw_expect_close(fd, timeout_ms, NULL), 0);
        close(fd);
    }
    return h;
}

int gf_test_ck_run(const char *dir, char *const argv[], int timeout_ms, char **out) {
    char path[GF_TEST_PATH_MAX], desc[96];
    int status = -1;

    ck_assert_msg((size_t)snprintf(path, sizeof path, "%s/" COMMAND_OUTPUT_NAME, dir) < sizeof path,
                  "%s: path too long", dir);
    int rc = gf_test_run_command(argv, path, timeout_ms, &status);
    ck_assert_msg(rc == 0, "%s did not exit within %d ms: %s", argv[0], timeout_ms, strerror(-rc));
    *out = gf_test_read_file(path, NULL);
    ck_assert_msg(*out != NULL, "cannot read %s", path);
    unlink(path);
    ck_assert_msg(WIFEXITED(status), "%s %s:\n%s", argv[0],
                  gf_test_describe_status(status, desc, sizeof desc), *out);
    return WEXITSTATUS(status);
}

/* One client of gf_test_streams_parallel. */
typedef struct parallel_stream {
    const char *socket_path;
    gf_test_stream s;
    int rc;
    char err[GF_TEST_ERR_MAX];
} parallel_stream;

static void *parallel_stream_main(void *arg) {
    parallel_stream *p = arg;
    gf_client *c = NULL;
    p->rc = gf_client_connect(p->socket_path, &c);
    if (p->rc < 0) {
        snprintf(p->err, sizeof p->err, "connect: %s", strerror(-p->rc));
        return NULL;
    }
    p->rc = gf_test_stream_verified(c, &p->s, p->err, sizeof p->err);
    gf_client_close(c);
    return NULL;
}

int gf_test_streams_parallel(const char *socket_path, unsigned clients, const gf_test_stream *s,
                             char *err, size_t err_len) {
    parallel_stream *ps = calloc(clients, sizeof *ps);
    pthread_t *th = calloc(clients, sizeof *th);
    int rc = 0;
    if (!ps || !th) {
        free(ps);
        free(th);
        snprintf(err, err_len, "out of memory");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < clients; i++) {
        ps[i].socket_path = socket_path;
        ps[i].s = *s;
        ps[i].s.first_frame_id = 100000ull * (i + 1);
        ps[i].s.seed = s->seed + i;
        if (pthread_create(&th[i], NULL, parallel_stream_main, &ps[i]) != 0) {
            ps[i].rc = -EAGAIN;
            snprintf(ps[i].err, sizeof ps[i].err, "cannot start its thread");
            th[i] = 0;
        }
    }
    for (unsigned i = 0; i < clients; i++) {
        if (th[i])
            pthread_join(th[i], NULL);
        if (ps[i].rc < 0 && rc == 0) {
            rc = ps[i].rc;
            snprintf(err, err_len, "client %u: %s", i, ps[i].err);
        }
    }
    free(ps);
    free(th);
    return rc;
}

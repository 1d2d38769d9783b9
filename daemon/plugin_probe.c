/* SPDX-License-Identifier: MIT */
/*
 * A plugin tried in a process of its own before the daemon loads it
 * (plugin_probe.h): the prober, on the thread loading a configuration, and
 * the probe process's main.
 */
#define _GNU_SOURCE /* pipe2, sigabbrev_np */
#include "plugin_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "plugin.h"
#include "stages_json.h"
#include "util.h"

extern char **environ;

/* The descriptor a probe writes its report to: the prober's pipe. */
#define GF_PROBE_REPORT_FD 3
/* The report: the plugin's problem lines, or GF_PROBE_CREATED alone. */
#define GF_PROBE_REPORT_BYTES 4096
#define GF_PROBE_CREATED      "created\n"
/* The probe's own binary: gpuframed as it runs now (a new build installed
 * meanwhile is not what the daemon would load the plugin into). */
#define GF_PROBE_SELF "/proc/self/exe"
/* How often the prober looks whether a probe that closed its report has
 * exited. */
#define GF_PROBE_REAP_POLL_MS 5

/* ---- the probe process ------------------------------------------------------------ */

int gf_plugin_probe_main(int argc, char **argv) {
    /* gpuframed --plugin-probe PREFIX PATH CONFIG_DIR MAX_IN_BYTES PARAMS */
    if (argc != 7)
        return 2;
    char *end;
    errno = 0;
    unsigned long long max_in = strtoull(argv[5], &end, 10);
    if (errno != 0 || end == argv[5] || *end != '\0')
        return 2;
    char buf[GF_PROBE_REPORT_BYTES];
    gf_problems pr;
    gf_problems_init(&pr, buf, sizeof buf, 1, NULL);
    gf_plugin_stage *st = gf_plugin_stage_new(argv[3], argv[4], argv[6]);
    int rc = -1;
    if (st == NULL)
        gf_problem(&pr, "%s.path: out of memory", argv[2]);
    else
        rc = gf_plugin_stage_open(st, max_in, argv[2], &pr);
    const char *report = rc == 0 ? GF_PROBE_CREATED : buf;
    for (size_t off = 0, len = strlen(report); off < len;) {
        ssize_t n = write(GF_PROBE_REPORT_FD, report + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    gf_plugin_stage_release(st);
    return rc == 0 ? 0 : 1;
}

/* ---- the prober ------------------------------------------------------------------- */

/* A probe started: its pid and the read end of its report. */
typedef struct probe {
    pid_t pid;
    int report_fd;
} probe;

/* Starts a probe of `st` with these arguments.  Returns 0, or a positive
 * errno (nothing to reap). */
static int probe_start(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix, probe *p) {
    char max_text[24];
    snprintf(max_text, sizeof max_text, "%" PRIu64, max_in_bytes);
    char *argv[] = {"gpuframed",
                    GF_PLUGIN_PROBE_FLAG,
                    (char *)prefix,
                    (char *)gf_plugin_stage_path(st),
                    (char *)gf_plugin_stage_config_dir(st),
                    max_text,
                    (char *)gf_plugin_stage_params_json(st),
                    NULL};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return errno;
    /* dup2 of a descriptor onto itself would leave it close-on-exec. */
    if (fds[1] == GF_PROBE_REPORT_FD) {
        int moved = fcntl(fds[1], F_DUPFD_CLOEXEC, GF_PROBE_REPORT_FD + 1);
        close(fds[1]);
        if (moved < 0) {
            int err = errno;
            close(fds[0]);
            return err;
        }
        fds[1] = moved;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0 && (rc = posix_spawnattr_init(&attr)) != 0)
        posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) {
        /* The probe starts as a process of its own would: no signal blocked
         * or ignored that the loading thread happens to have. */
        if ((rc = posix_spawn_file_actions_adddup2(&fa, fds[1], GF_PROBE_REPORT_FD)) == 0 &&
            (rc = posix_spawnattr_setflags(&attr,
                                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0 &&
            (rc = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (rc = posix_spawnattr_setsigdefault(&attr, &defaults)) == 0)
            rc = posix_spawn(&p->pid, GF_PROBE_SELF, &fa, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return rc;
    }
    p->report_fd = fds[0];
    return 0;
}

/* Reads the probe's report into buf[cap] until it ends or `deadline_ms`
 * passes.  Returns 0 at its end, -1 at the deadline. */
static int read_report(int fd, char *buf, size_t cap, uint64_t deadline_ms) {
    size_t used = 0;
    buf[0] = '\0';
    for (;;) {
        uint64_t now = gf_now_ms();
        if (now >= deadline_ms)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline_ms - now));
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        char scratch[256];
        char *into = used + 1 < cap ? buf + used : scratch;
        size_t room = used + 1 < cap ? cap - 1 - used : sizeof scratch;
        ssize_t n = read(fd, into, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        if (into == buf + used) {
            used += (size_t)n;
            buf[used] = '\0';
        }
    }
}

/* Waits for the probe to exit until `deadline_ms`, then kills it.  Returns
 * its wait status, and whether it was killed in *killed. */
static int reap(pid_t pid, uint64_t deadline_ms, int *killed) {
    int status = 0;
    *killed = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return status;
        if (got < 0 && errno != EINTR)
            return 0;
        if (got == 0 && gf_now_ms() >= deadline_ms) {
            kill(pid, SIGKILL);
            *killed = 1;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return status;
        }
        poll(NULL, 0, GF_PROBE_REAP_POLL_MS);
    }
}

/* The prober (stages_json.h): the stage loaded and created in a probe
 * first; its problems, or what ended it, reported as the stage's. */
static int probe_stage(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                       gf_problems *pr) {
    const char *path = gf_plugin_stage_path(st);
    probe p;
    int err = probe_start(st, max_in_bytes, prefix, &p);
    if (err != 0) {
        /* No probe can run here (no /proc?): the plugin is loaded as it was
         * before probes existed, and the log says so. */
        GF_LOG_WRN("%s.path: %s: cannot start a probe process (%s); loading the plugin "
                   "without one",
                   prefix, path, strerror(err));
        return 0;
    }
    uint64_t deadline = gf_now_ms() + GF_PLUGIN_PROBE_TIMEOUT_MS;
    char report[GF_PROBE_REPORT_BYTES];
    int late = read_report(p.report_fd, report, sizeof report, deadline) < 0;
    close(p.report_fd);
    int killed;
    int status = reap(p.pid, late ? 0 : deadline, &killed);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && strcmp(report, GF_PROBE_CREATED) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && report[0] != '\0') {
        /* The plugin's own refusal, as loading it here would have said. */
        for (const char *line = report; *line != '\0';) {
            const char *nl = strchr(line, '\n');
            int n = nl != NULL ? (int)(nl - line) : (int)strlen(line);
            gf_problem(pr, "%.*s", n, line);
            line += n + (nl != NULL);
        }
        return -1;
    }
    char what[128];
    if (late || killed)
        gf_errorf(what, sizeof what, "did not finish within %d ms (killed)",
                  GF_PLUGIN_PROBE_TIMEOUT_MS);
    else if (WIFSIGNALED(status))
        gf_errorf(what, sizeof what, "was killed by signal SIG%s (%s)",
                  sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
                  strsignal(WTERMSIG(status)));
    else
        gf_errorf(what, sizeof what, "exited with status %d before create() returned",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    gf_problem(pr,
               "%s.path: %s: a probe process loading it and calling its create() %s; not loaded",
               prefix, path, what);
    return -1;
}

void gf_plugin_probe_install(void) {
    gf_set_plugin_prober(probe_stage);
}

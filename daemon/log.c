/* SPDX-License-Identifier: MIT */
/*
 * Logging; log.h is the contract.  Two line formats, chosen once per process
 * from $JOURNAL_STREAM (systemd.exec(5), "JOURNAL_STREAM"): "<N>text" when
 * stderr is the journal's stream, where journald takes the priority from the
 * prefix and stamps the time itself; "<time> gpuframed[<pid>]: <level>: text"
 * otherwise.
 */
#include "log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One log line at most; longer text is cut. */
#define GF_LOG_LINE_MAX_BYTES 1024

/* A rate-limited line is formatted here first. */
#define GF_LOG_LIMITED_LINE_BYTES 512

static atomic_int log_level = GF_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog(3) priorities of the levels: LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG, as sd-daemon(3)'s "<N>" prefixes expect. */
static const int level_priorities[] = {3, 4, 6, 7};

static pthread_once_t format_once = PTHREAD_ONCE_INIT;
static int to_journal; /* set once by detect_journal, read-only after */

/* Nonzero when $JOURNAL_STREAM ("<device>:<inode>") names the file that
 * stderr is: systemd connected stderr to journald for this process, and not
 * to something the process's own child redirected it to. */
static void detect_journal(void) {
    const char *v = getenv("JOURNAL_STREAM");
    uintmax_t dev, ino;
    struct stat st;
    char tail;

    if (v == NULL || sscanf(v, "%ju:%ju%c", &dev, &ino, &tail) != 2)
        return;
    if (fstat(STDERR_FILENO, &st) != 0)
        return;
    to_journal = (uintmax_t)st.st_dev == dev && (uintmax_t)st.st_ino == ino;
}

int gf_log_to_journal(void) {
    pthread_once(&format_once, detect_journal);
    return to_journal;
}

void gf_log_set_level(enum gf_log_level level) {
    atomic_store(&log_level, (int)level);
}

void gf_log(enum gf_log_level level, const char *fmt, ...) {
    if ((int)level > atomic_load(&log_level))
        return;
    char line[GF_LOG_LINE_MAX_BYTES];
    int n;
    if (gf_log_to_journal()) {
        n = snprintf(line, sizeof line, "<%d>", level_priorities[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        n += snprintf(line + n, sizeof line - (size_t)n,
                      ".%03ld gpuframed[%ld]: %s: ", ts.tv_nsec / 1000000, (long)getpid(),
                      level_names[level]);
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

/* Budgets are shared by threads (the shards' one, group.h): their counts
 * change under this lock; the line is written outside it. */
static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;

int gf_log_limited(gf_log_budget *b, uint32_t per_second, uint64_t now_ns, enum gf_log_level level,
                   const char *fmt, ...) {
    pthread_mutex_lock(&budget_lock);
    if (now_ns - b->window_ns >= 1000000000u && now_ns > b->window_ns) {
        b->window_ns = now_ns;
        b->passed = 0;
    }
    if (b->passed >= per_second) {
        b->dropped++;
        pthread_mutex_unlock(&budget_lock);
        return 0;
    }
    b->passed++;
    uint32_t dropped = b->dropped;
    b->dropped = 0;
    pthread_mutex_unlock(&budget_lock);
    char line[GF_LOG_LIMITED_LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (dropped)
        gf_log(level, "%s (and %u more like it, not logged)", line, dropped);
    else
        gf_log(level, "%s", line);
    return 1;
}

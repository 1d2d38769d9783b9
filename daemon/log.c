#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One log line at most; longer text is cut. */
#define GF_LOG_LINE_MAX_BYTES 1024

static atomic_int log_level = GF_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void gf_log_set_level(enum gf_log_level level) {
    atomic_store(&log_level, (int)level);
}

enum gf_log_level gf_log_get_level(void) {
    return (enum gf_log_level)atomic_load(&log_level);
}

void gf_log(enum gf_log_level level, const char *fmt, ...) {
    if ((int)level > atomic_load(&log_level))
        return;
    char line[GF_LOG_LINE_MAX_BYTES];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n,
                  ".%03ld gpuframed[%ld]: %s: ", ts.tv_nsec / 1000000, (long)getpid(),
                  level_names[level]);
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

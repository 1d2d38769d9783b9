/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per event on stderr.  Under systemd, when
 * $JOURNAL_STREAM names stderr's device and inode, a line is "<N><text>"
 * with N the syslog priority (error 3, warn 4, info 6, debug 7) and no time
 * (journald stamps it); otherwise "<time> gpuframed[<pid>]: <level>: <text>".
 * Safe from any thread (each line is one write(2)).  The level threshold is
 * process-wide and may be changed at run time.
 */
#ifndef GF_LOG_H
#define GF_LOG_H

#include <stdint.h>

/* Severities, most severe first: a threshold keeps every level up to it. */
enum gf_log_level { GF_LOG_ERROR, GF_LOG_WARN, GF_LOG_INFO, GF_LOG_DEBUG };

/* Lines above `level` are dropped.  Default GF_LOG_INFO. */
void gf_log_set_level(enum gf_log_level level);

/* Nonzero when lines go to journald in the "<N>" format (decided on the
 * first call, from $JOURNAL_STREAM and stderr). */
int gf_log_to_journal(void);

/* printf-style; a trailing newline is added. */
void gf_log(enum gf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A budget for lines that a client can cause (one per connection refused or
 * timed out): at most `per_second` pass in any one-second window, and the
 * first line after a window that dropped some says how many.  One budget per
 * kind of line; the caller owns it (zeroed to start) and its thread.
 */
typedef struct gf_log_budget {
    uint64_t window_ns; /* start of the current one-second window */
    uint32_t passed;    /* lines logged in it                     */
    uint32_t dropped;   /* lines dropped since the last one logged */
} gf_log_budget;

/* gf_log within `b` at `now_ns`; returns 1 if the line was written. */
int gf_log_limited(gf_log_budget *b, uint32_t per_second, uint64_t now_ns, enum gf_log_level level,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define GF_LOG_ERR(...) gf_log(GF_LOG_ERROR, __VA_ARGS__)
#define GF_LOG_WRN(...) gf_log(GF_LOG_WARN, __VA_ARGS__)
#define GF_LOG_INF(...) gf_log(GF_LOG_INFO, __VA_ARGS__)
#define GF_LOG_DBG(...) gf_log(GF_LOG_DEBUG, __VA_ARGS__)

#endif

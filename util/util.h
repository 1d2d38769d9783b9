/* SPDX-License-Identifier: MIT */
/*
 * The helpers every part of gpuframed needs, daemon and client alike, so that
 * each exists once: the monotonic clock, formatting a message into a
 * caller's fixed-size error buffer, percentiles, and reading the numbers of
 * a command line.  The gfutil library: below the wire
 * format (protocol/), the pipelines (kernels/) and the daemon, which all use
 * it; it uses none of them, and links no CUDA and no libuv.
 */
#ifndef GF_UTIL_H
#define GF_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds.  Any thread. */
static inline uint64_t gf_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t gf_now_ms(void) {
    return gf_now_ns() / 1000000u;
}

/*
 * Formats a message into buf[len], always NUL-terminated and truncated to fit.
 * Does nothing when buf is NULL or len is 0, so callers may pass an optional
 * error buffer straight through.  Returns the message's length as written
 * (at most len - 1).
 */
size_t gf_errorf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Sorts `n` latencies (ns) in place, smallest first. */
void gf_sort_ns(uint64_t *values, size_t n);

/* The nearest-rank percentile `pct` (0..100) of `n` sorted latencies (ns),
 * in microseconds; 0 when n is 0.  Every tool that prints p50/p99 uses it,
 * so their figures compare. */
double gf_percentile_us(const uint64_t *sorted, size_t n, unsigned pct);

/* The same with a va_list. */
size_t gf_verrorf(char *buf, size_t len, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Parses a whole decimal unsigned integer; returns 0 or -1. */
int gf_parse_u64(const char *s, uint64_t *out);

/* Parses BYTES with an optional binary suffix K, M or G (either case: KiB,
 * MiB, GiB), as every byte count on a command line is written; returns 0,
 * or -1 for anything else or a value past 2^64 - 1. */
int gf_parse_size(const char *s, uint64_t *out);

#endif

/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

size_t gf_verrorf(char *buf, size_t len, const char *fmt, va_list ap) {
    if (!buf || len == 0)
        return 0;
    int n = vsnprintf(buf, len, fmt, ap);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < len ? (size_t)n : len - 1;
}

size_t gf_errorf(char *buf, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t n = gf_verrorf(buf, len, fmt, ap);
    va_end(ap);
    return n;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void gf_sort_ns(uint64_t *values, size_t n) {
    if (n > 1) /* none may be NULL, which qsort may not be given */
        qsort(values, n, sizeof *values, cmp_u64);
}

double gf_percentile_us(const uint64_t *sorted, size_t n, unsigned pct) {
    if (n == 0)
        return 0.0;
    size_t rank = (n * pct + 99) / 100;
    return (double)sorted[rank > 0 ? rank - 1 : 0] / 1e3;
}

/* Parses the decimal digits at the start of `s` into *out and points *end
 * just past them.  Returns 0, or -1 when `s` does not start with a digit or
 * the value does not fit. */
static int parse_digits(const char *s, unsigned long long *out, char **end) {
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, end, 10);
    return errno != 0 ? -1 : 0;
}

int gf_parse_u64(const char *s, uint64_t *out) {
    unsigned long long v;
    char *end;

    if (parse_digits(s, &v, &end) < 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int gf_parse_size(const char *s, uint64_t *out) {
    unsigned long long v;
    char *end;

    if (parse_digits(s, &v, &end) < 0)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    default: return -1;
    }
    if (shift > 0 && end[1] != '\0')
        return -1;
    if (v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

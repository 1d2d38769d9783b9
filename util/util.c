/* SPDX-License-Identifier: MIT */
#include "util.h"

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
    qsort(values, n, sizeof *values, cmp_u64);
}

double gf_percentile_us(const uint64_t *sorted, size_t n, unsigned pct) {
    if (n == 0)
        return 0.0;
    size_t rank = (n * pct + 99) / 100;
    return (double)sorted[rank > 0 ? rank - 1 : 0] / 1e3;
}

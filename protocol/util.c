#include "util.h"

#include <stdio.h>

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

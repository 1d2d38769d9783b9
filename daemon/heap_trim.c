/* SPDX-License-Identifier: MIT */
/*
 * The memory policy (heap_trim.h).
 */
#include "heap_trim.h"

#include <malloc.h>

#include "log.h"
#include "util.h"

int gf_heap_trim_if_idle(uint64_t loose_since_trim_bytes, uint64_t loose_bytes,
                         int slots_all_free) {
    if (!gf_heap_trim_wanted(loose_since_trim_bytes) || loose_bytes > 0 || !slots_all_free)
        return 0;
#ifdef __GLIBC__
    uint64_t t0 = gf_now_ns();
    malloc_trim(0);
    GF_LOG_DBG("idle: heap trimmed after %llu kB of loose replies in %llu us",
               (unsigned long long)(loose_since_trim_bytes / 1024),
               (unsigned long long)((gf_now_ns() - t0) / 1000));
#endif
    return 1;
}

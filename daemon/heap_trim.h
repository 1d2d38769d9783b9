/* SPDX-License-Identifier: MIT */
/*
 * The memory policy.  Results leave from the slots' own buffers, allocated
 * once; the daemon's large heap blocks are what it holds for clients that do
 * not read at once: results moved out of their slots
 * (gf_conn_evict_results) and TRACE documents, up to megabytes each,
 * short-lived and in bursts.  glibc serves the first such block with mmap;
 * once it is freed, glibc raises its mmap threshold to that block's size and
 * its trim threshold to twice it, so the later ones come from the heap.
 * That keeps them fast (their pages stay mapped from one burst to the next:
 * a fixed 128 KiB mmap threshold cut the soak's throughput 3x), but the heap
 * then keeps up to twice the largest block free at its top, and the holes
 * under long-lived blocks, however idle the daemon: the soak's idle RssAnon
 * was 35 or 42 MB depending on the last burst.  So when a finished reply
 * leaves the daemon idle (every slot free, no loose reply queued) after at
 * least GF_TRIM_AFTER_LOOSE_BYTES of loose replies since the last trim,
 * malloc_trim gives the heap's free pages back.  That costs the loop a few
 * milliseconds (1.7-6 ms in the soak on a 2-core VM; bench/README.md,
 * "Memory"), at a moment nothing waits for it; under a steady load the
 * slots are never all free and it does not run.  Deferred work, marked by a
 * finished reply (conn.c); shard.c runs it.
 */
#ifndef GF_HEAP_TRIM_H
#define GF_HEAP_TRIM_H

#include <stdint.h>

/* Loose reply bytes after which an idle daemon trims its heap: glibc's own
 * default trim threshold, before its dynamic mmap threshold raises it. */
#define GF_TRIM_AFTER_LOOSE_BYTES (128u * 1024)

/* Whether `loose_since_trim_bytes` of loose replies since the last trim
 * make a trim worth looking at (the deferred check is marked then). */
static inline int gf_heap_trim_wanted(uint64_t loose_since_trim_bytes) {
    return loose_since_trim_bytes >= GF_TRIM_AFTER_LOOSE_BYTES;
}

/* Trims the heap if the shard is idle (`loose_bytes` 0 and every slot free,
 * `slots_all_free`) after gf_heap_trim_wanted's bytes.  Returns 1 when it
 * did (the caller's count of loose bytes since the trim starts again), else
 * 0.  On the loop's thread: it costs milliseconds, when nothing waits. */
int gf_heap_trim_if_idle(uint64_t loose_since_trim_bytes, uint64_t loose_bytes, int slots_all_free);

#endif

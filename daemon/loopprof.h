/* SPDX-License-Identifier: MIT */
/*
 * Where the loop thread's time goes, per frame: a build with
 * -DGF_LOOP_PROFILE=ON charges every nanosecond of the loop thread to the
 * innermost section it is in (exclusive time: a submit nested in a read's
 * processing counts as submit, not as parsing) and prints the totals when
 * the daemon stops.  In every other build the calls compile to nothing.
 *
 *   int prev = gf_prof_enter(GF_PROF_SEND);  ...  gf_prof_leave(prev);
 *
 * Loop thread only.  Each section costs two clock reads (~40 ns).
 */
#ifndef GF_LOOPPROF_H
#define GF_LOOPPROF_H

#include <stdint.h>

enum gf_prof_section {
    GF_PROF_LOOP,   /* libuv itself, the poll, and idle time (split at print) */
    GF_PROF_RECV,   /* recvmsg                                               */
    GF_PROF_PARSE,  /* decoding requests, checking frames, claiming slots    */
    GF_PROF_COPY,   /* staged payload bytes copied into a slot               */
    GF_PROF_SUBMIT, /* the engine's submit: its CUDA calls                   */
    GF_PROF_WAKE,   /* the completion queue's async callback                 */
    GF_PROF_DONE,   /* a slot off the queue: finish, its reply header        */
    GF_PROF_FLUSH,  /* building a batch of replies                           */
    GF_PROF_SEND,   /* sendmsg                                               */
    GF_PROF_FINISH, /* a written reply: the slot released, the conn resumed  */
    GF_PROF_STATS,  /* counters and the trace record of an answered frame    */
    GF_PROF_POOL,   /* another shard's batch: taken in, placed, sent back    */
    GF_PROF_COUNT
};

#ifdef GF_LOOP_PROFILE
#include <time.h>

typedef struct gf_prof {
    uint64_t ns[GF_PROF_COUNT];
    uint64_t calls[GF_PROF_COUNT];
    uint64_t last;
    int cur;
} gf_prof;

extern _Thread_local gf_prof gf_prof_state; /* each loop's own */

static inline uint64_t gf_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int gf_prof_switch(int to) {
    uint64_t now = gf_prof_now();
    int prev = gf_prof_state.cur;
    if (gf_prof_state.last)
        gf_prof_state.ns[prev] += now - gf_prof_state.last;
    gf_prof_state.last = now;
    gf_prof_state.cur = to;
    return prev;
}

static inline int gf_prof_enter(int section) {
    gf_prof_state.calls[section]++;
    return gf_prof_switch(section);
}

static inline void gf_prof_leave(int prev) {
    (void)gf_prof_switch(prev);
}

/* Prints the calling loop's table to stderr, each line tagged with its
 * `shard`: each section's total, calls, and µs per frame for `frames`
 * answered; `idle_ns` (uv_metrics_idle_time) is split off the loop's own
 * share. */
void gf_prof_print(uint32_t shard, uint64_t frames, uint64_t idle_ns);
#else
static inline int gf_prof_enter(int section) {
    (void)section;
    return 0;
}
static inline void gf_prof_leave(int prev) {
    (void)prev;
}
static inline void gf_prof_print(uint32_t shard, uint64_t frames, uint64_t idle_ns) {
    (void)shard;
    (void)frames;
    (void)idle_ns;
}
#endif

#endif

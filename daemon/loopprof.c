/* SPDX-License-Identifier: MIT */
#include "loopprof.h"

#ifdef GF_LOOP_PROFILE
#include <stdio.h>

_Thread_local gf_prof gf_prof_state;

void gf_prof_print(uint32_t shard, uint64_t frames, uint64_t idle_ns) {
    static const char *const names[GF_PROF_COUNT] = {"loop (libuv, poll)",
                                                     "recv",
                                                     "parse",
                                                     "copy",
                                                     "submit",
                                                     "wake",
                                                     "done",
                                                     "flush",
                                                     "send",
                                                     "finish",
                                                     "stats",
                                                     "pool"};
    (void)gf_prof_switch(gf_prof_state.cur);
    uint64_t busy = 0;
    gf_prof_state.ns[GF_PROF_LOOP] -=
        idle_ns < gf_prof_state.ns[GF_PROF_LOOP] ? idle_ns : gf_prof_state.ns[GF_PROF_LOOP];
    for (int i = 0; i < GF_PROF_COUNT; i++)
        busy += gf_prof_state.ns[i];
    double per = frames ? (double)frames : 1.0;
    fprintf(stderr, "loop profile %u: %llu frames answered, busy %.3f s, idle %.3f s\n", shard,
            (unsigned long long)frames, (double)busy / 1e9, (double)idle_ns / 1e9);
    fprintf(stderr, "loop profile %u: %-20s %10s %12s %10s %6s\n", shard, "section", "ms", "calls",
            "us/frame", "share");
    for (int i = 0; i < GF_PROF_COUNT; i++)
        fprintf(stderr, "loop profile %u: %-20s %10.1f %12llu %10.3f %5.1f%%\n", shard, names[i],
                (double)gf_prof_state.ns[i] / 1e6, (unsigned long long)gf_prof_state.calls[i],
                (double)gf_prof_state.ns[i] / 1e3 / per,
                busy ? 100.0 * (double)gf_prof_state.ns[i] / (double)busy : 0.0);
    fprintf(stderr, "loop profile %u: %-20s %10.1f %12s %10.3f\n", shard, "busy, all",
            (double)busy / 1e6, "", (double)busy / 1e3 / per);
}
#else
typedef int gf_loopprof_unused; /* ISO C: a translation unit is not empty */
#endif

/* SPDX-License-Identifier: MIT */
/*
 * Threads near their GPU (numa.h).  The parsers run anywhere; the placing
 * runs on the shard's own thread.
 */
#define _GNU_SOURCE /* cpu_set_t, pthread_setaffinity_np */
#include "numa.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "util.h"

/* Moves the calling thread onto `want` within what the process may use,
 * into *used.  Returns 0, or a negative errno with the reason in why. */
static int move_thread(const gf_cpus *want, gf_cpus *used, char *why, size_t why_len) {
    cpu_set_t allowed, set;
    memset(used, 0, sizeof *used);
    if (sched_getaffinity(0, sizeof allowed, &allowed) < 0) {
        gf_errorf(why, why_len, "sched_getaffinity: %s", strerror(errno));
        return -errno;
    }
    CPU_ZERO(&set);
    for (unsigned c = 0; c < GF_CPUS_MAX && c < CPU_SETSIZE; c++)
        if (gf_cpus_has(want, c) && CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &set);
            gf_cpus_set(used, c);
        }
    if (CPU_COUNT(&set) == 0) {
        gf_errorf(why, why_len, "none of them is among the CPUs this process may use");
        return -EINVAL;
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0) {
        gf_errorf(why, why_len, "pthread_setaffinity_np: %s", strerror(rc));
        return -rc;
    }
    return 0;
}

void gf_numa_place_shard(uint32_t shard, const char *shard_cpus, int device) {
    enum gf_cpus_kind kind;
    gf_cpus want, used;
    char why[512] = "", list[256], bus[32] = "";
    int node = -1;
    if (gf_cpus_setting_parse(shard_cpus, &kind, &want, why, sizeof why) < 0) {
        GF_LOG_WRN("shard %u: %s; its thread stays where it is", shard, why); /* checked at load */
        return;
    }
    if (kind == GF_CPUS_NONE || (kind == GF_CPUS_AUTO && device < 0)) {
        GF_LOG_INF("shard %u: thread not pinned (shard_cpus %s%s)", shard, shard_cpus,
                   device < 0 ? ", the cpu engine" : "");
        return;
    }
    if (kind == GF_CPUS_AUTO && (gf_engine_bus_id(device, bus, sizeof bus, why, sizeof why) < 0 ||
                                 gf_device_cpus("/sys", bus, &node, &want, why, sizeof why) < 0)) {
        GF_LOG_WRN("shard %u: device %d's CPUs unknown (%s); its thread stays where it is", shard,
                   device, why);
        return;
    }
    if (move_thread(&want, &used, why, sizeof why) < 0) {
        gf_cpulist_format(&want, list, sizeof list);
        GF_LOG_WRN("shard %u: cannot move its thread to CPUs %s: %s; it stays where it is", shard,
                   list, why);
        return;
    }
    gf_cpulist_format(&used, list, sizeof list);
    if (kind == GF_CPUS_AUTO)
        GF_LOG_INF("shard %u: thread on CPUs %s, NUMA node %d, local to device %d (%s)", shard,
                   list, node, device, bus);
    else
        GF_LOG_INF("shard %u: thread on CPUs %s (shard_cpus)", shard, list);
}

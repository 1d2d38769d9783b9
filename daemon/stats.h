/*
 * The daemon's counters, all in one struct that the server updates on the
 * loop thread (so plain integers suffice) and one function turns into the
 * STATS reply.  Every frame that arrives ends in exactly one of: answered,
 * failed (by reason), dropped (its client left first) or truncated (the
 * client left mid-payload), so the counters always add up.
 */
#ifndef GF_STATS_H
#define GF_STATS_H

#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "protocol.h"

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t gf_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct gf_stats {
    uint64_t started_ns;                 /* when the daemon started serving       */
    uint64_t connections_open;           /* accepted and not yet closed           */
    uint64_t connections_total;          /* accepted since start                  */
    uint64_t connections_closed_fatal;   /* closed by us after a fatal error      */
    uint64_t frames_received;            /* FRAME headers accepted by the parser  */
    uint64_t frames_answered;            /* RESULT replies written                */
    uint64_t frames_dropped;             /* results dropped: client left first    */
    uint64_t frames_truncated;           /* client left before the whole payload  */
    uint64_t rejected[GF_STATUS_COUNT_]; /* ERROR replies sent, by status code  */
    uint64_t requests_list;              /* LIST requests answered                */
    uint64_t requests_stats;             /* STATS requests answered               */
    uint64_t bytes_in;                   /* frame payload bytes received          */
    uint64_t bytes_out;                  /* result payload bytes written          */
    uint64_t backpressure_pauses;        /* reading stopped for want of a slot    */
    uint64_t engine_ns_total;            /* submit -> engine done, summed         */
    uint64_t end_to_end_ns_total;        /* header accepted -> reply written      */
} gf_stats;

/* Adds the counters to `obj` under their names (see daemon docs). */
void gf_stats_to_json(const gf_stats *st, cJSON *obj);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Deadlines, as pure functions: clock readings and limits in, which
 * deadline is due out.  No I/O, no libuv, no state of their own, so the
 * watchdog's rules are tested alone (tests/test_deadline.c) and applied in
 * one place (conn_io.c, gf_conn_io_check_deadlines; shard.c's watchdog).
 *
 * A connection has six:
 *   drain stall     stopping: the client sent nothing for GF_DRAIN_STALL_MS
 *                   while we still read it; what it began is cut
 *   receive hold    a payload received in place still arriving
 *                   GF_RECEIVE_HOLD_MS after it took its slot, while
 *                   another client waits for a slot: it moves to memory
 *                   (conn.h, "parked") and the slot goes back
 *   receive stall   a payload received in place made no progress for
 *                   receive_stall_ms while others wait for a slot to
 *                   receive into, and could not move to memory
 *                   (max_input_bytes_total): the request is ended
 *   request         a request begun (bytes of it buffered, its payload
 *                   arriving or being skipped) is not in after
 *                   request_timeout_ms; waiting for a slot, the daemon's
 *                   doing, does not count
 *   write           its replies made no progress for write_timeout_ms while
 *                   the socket was full (the client does not read)
 *   idle            nothing owed, begun or awaited, and no byte for
 *                   idle_timeout_ms (0: never)
 * and a batch on the engine one: frame_timeout_ms for each of its frames,
 * so that a legitimately heavy batch never looks like a dead engine.
 */
#ifndef GF_DEADLINE_H
#define GF_DEADLINE_H

#include <stdint.h>

#include "config.h"

/* While stopping, a request begun but not complete is waited for this long
 * after the client's last bytes, then cut: a client in the middle of a
 * payload finishes it, a stalled one holds nothing up. */
#define GF_DRAIN_STALL_MS 200
/* How often the watchdog looks at most: each deadline is noticed within
 * 1.5 times it, and never later than this after it. */
#define GF_WATCHDOG_PERIOD_MAX_MS 1000u
/* How long a payload received in place may hold its slot before it moves to
 * memory: far longer than a client that sends a frame in one go takes (a
 * 16 MiB frame through the socket: ~5 ms), far shorter than a large frame
 * may wait for the slot (docs/design.md: 1.5 s). */
#define GF_RECEIVE_HOLD_MS 100u

/* One connection's clocks (CLOCK_MONOTONIC ns) and state, as the watchdog
 * sees them. */
typedef struct gf_conn_clocks {
    uint64_t request_begun_ns;    /* a request is arriving since; 0: none, or
                                     waiting is not its fault                  */
    uint64_t write_blocked_ns;    /* replies wait for a full socket since its
                                     last progress; 0: not blocked             */
    uint64_t last_input_ns;       /* bytes last arrived                        */
    uint64_t receive_progress_ns; /* a payload is received in place, and bytes
                                     of it last came then; 0: none             */
    uint64_t receive_held_ns;     /* a payload received in place holds its slot
                                     since, others wait for one, and it could
                                     move to memory; 0: none                   */
    int idle;                     /* owes nothing, has nothing begun, waits for
                                     no slot                                   */
    int drain_reading;            /* the daemon is stopping and still reads it */
    int receive_contended;        /* others wait for a slot to receive into    */
} gf_conn_clocks;

typedef struct gf_deadline_limits {
    uint32_t request_timeout_ms;
    uint32_t receive_stall_ms;
    uint32_t write_timeout_ms;
    uint32_t idle_timeout_ms; /* 0: never */
} gf_deadline_limits;

enum gf_deadline {
    GF_DUE_NONE,
    GF_DUE_DRAIN_STALL,
    GF_DUE_RECEIVE_HOLD,
    GF_DUE_RECEIVE_STALL,
    GF_DUE_REQUEST,
    GF_DUE_WRITE,
    GF_DUE_IDLE,
};

/* Which of the connection's deadlines has passed at `now_ns`, the first in
 * the order of the enum when several have; GF_DUE_NONE when none has.  A
 * clock reading later than `now_ns` (read after the caller's) has not
 * passed. */
enum gf_deadline gf_deadline_due(const gf_conn_clocks *c, const gf_deadline_limits *l,
                                 uint64_t now_ns);

/* When a batch of `frames` frames submitted at `submitted_ns` is overdue on
 * the engine: frame_timeout_ms for each frame, as the engine runs a slot's
 * frames one after another at worst. */
uint64_t gf_deadline_batch_ns(uint64_t submitted_ns, uint32_t frames, uint32_t frame_timeout_ms);

/* The watchdog's period: half the shortest deadline it enforces (the
 * receive stall's only while `receive_contended`, the receive hold's only
 * while `receiving`: a payload is received in place while others wait), at
 * most
 * GF_WATCHDOG_PERIOD_MAX_MS. */
uint64_t gf_deadline_period_ms(const gf_deadline_limits *l, uint32_t frame_timeout_ms,
                               int receive_contended, int receiving);

/* The connection deadlines `cfg` sets. */
static inline gf_deadline_limits gf_deadline_limits_of(const gf_config *cfg) {
    return (gf_deadline_limits){.request_timeout_ms = cfg->request_timeout_ms,
                                .receive_stall_ms = cfg->receive_stall_ms,
                                .write_timeout_ms = cfg->write_timeout_ms,
                                .idle_timeout_ms = cfg->idle_timeout_ms};
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Deadlines as pure functions (deadline.h).
 */
#include "deadline.h"

#define NS_PER_MS 1000000ull

/* Whether more than `ms` passed from `then` to `now`; a `then` of 0 never
 * started, and one later than `now` has not passed. */
static int passed(uint64_t now, uint64_t then, uint64_t ms) {
    return then != 0 && now > then && now - then > ms * NS_PER_MS;
}

enum gf_deadline gf_deadline_due(const gf_conn_clocks *c, const gf_deadline_limits *l,
                                 uint64_t now_ns) {
    if (c->drain_reading && passed(now_ns, c->last_input_ns, GF_DRAIN_STALL_MS))
        return GF_DUE_DRAIN_STALL;
    if (passed(now_ns, c->receive_held_ns, GF_RECEIVE_HOLD_MS))
        return GF_DUE_RECEIVE_HOLD;
    if (c->receive_contended && passed(now_ns, c->receive_progress_ns, l->receive_stall_ms))
        return GF_DUE_RECEIVE_STALL;
    if (passed(now_ns, c->request_begun_ns, l->request_timeout_ms))
        return GF_DUE_REQUEST;
    if (passed(now_ns, c->write_blocked_ns, l->write_timeout_ms))
        return GF_DUE_WRITE;
    if (l->idle_timeout_ms && c->idle && passed(now_ns, c->last_input_ns, l->idle_timeout_ms))
        return GF_DUE_IDLE;
    return GF_DUE_NONE;
}

uint64_t gf_deadline_batch_ns(uint64_t submitted_ns, uint32_t frames, uint32_t frame_timeout_ms) {
    return submitted_ns + (uint64_t)(frames ? frames : 1) * frame_timeout_ms * NS_PER_MS;
}

uint64_t gf_deadline_period_ms(const gf_deadline_limits *l, uint32_t frame_timeout_ms,
                               int receive_contended, int receiving) {
    uint32_t shortest = frame_timeout_ms;
    if (l->request_timeout_ms < shortest)
        shortest = l->request_timeout_ms;
    if (l->write_timeout_ms < shortest)
        shortest = l->write_timeout_ms;
    if (l->idle_timeout_ms && l->idle_timeout_ms < shortest)
        shortest = l->idle_timeout_ms;
    if (receive_contended && l->receive_stall_ms < shortest)
        shortest = l->receive_stall_ms;
    if (receiving && GF_RECEIVE_HOLD_MS < shortest)
        shortest = GF_RECEIVE_HOLD_MS;
    uint64_t period = shortest / 2 + 1;
    return period < GF_WATCHDOG_PERIOD_MAX_MS ? period : GF_WATCHDOG_PERIOD_MAX_MS;
}

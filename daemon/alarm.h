/* SPDX-License-Identifier: MIT */
/*
 * An alarm at an instant of CLOCK_MONOTONIC to the microsecond: a timerfd
 * watched by the loop.  libuv's timers count whole milliseconds, too coarse
 * for a batch that waits max_batch_delay_us for more frames (scheduler.h).
 * Loop thread only.
 */
#ifndef GF_ALARM_H
#define GF_ALARM_H

#include <stdint.h>

#include <uv.h>

typedef struct gf_alarm {
    uv_poll_t poll; /* the timerfd's readability                           */
    int fd;         /* the timerfd, or -1                                  */
    uint64_t at_ns; /* when it rings (CLOCK_MONOTONIC ns), 0 when unset    */
    void (*ring)(struct gf_alarm *a);
    uv_close_cb closed_cb; /* gf_alarm_close's                           */
} gf_alarm;

/* An alarm on `loop` that calls `ring` when it goes off; unset, it keeps no
 * loop alive.  Returns 0 or a libuv error. */
int gf_alarm_init(gf_alarm *a, uv_loop_t *loop, void (*ring)(gf_alarm *a));

/* Sets the alarm to go off at `at_ns` (CLOCK_MONOTONIC ns; at once if that
 * has passed), replacing the instant set before; 0 unsets it. */
void gf_alarm_set(gf_alarm *a, uint64_t at_ns);

/* Closes the alarm; `cb` (may be NULL) runs once its handle is closed. */
void gf_alarm_close(gf_alarm *a, uv_close_cb cb);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The microsecond alarm (alarm.h).
 */
#include "alarm.h"

#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_readable(uv_poll_t *h, int status, int events) {
    gf_alarm *a = h->data;
    uint64_t expirations;
    (void)events;
    /* Read whatever the status: a timerfd left readable would spin the loop. */
    (void)!read(a->fd, &expirations, sizeof expirations);
    if (status < 0 || a->at_ns == 0)
        return;
    a->at_ns = 0;
    uv_poll_stop(&a->poll);
    a->ring(a);
}

int gf_alarm_init(gf_alarm *a, uv_loop_t *loop, void (*ring)(gf_alarm *a)) {
    a->ring = ring;
    a->at_ns = 0;
    a->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (a->fd < 0)
        return -errno;
    int rc = uv_poll_init(loop, &a->poll, a->fd);
    if (rc < 0) {
        close(a->fd);
        a->fd = -1;
        return rc;
    }
    a->poll.data = a;
    return 0;
}

void gf_alarm_set(gf_alarm *a, uint64_t at_ns) {
    if (at_ns == a->at_ns)
        return;
    a->at_ns = at_ns;
    /* it_value 0 disarms; an instant already past fires at once. */
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at_ns / 1000000000u),
                                          .tv_nsec = (long)(at_ns % 1000000000u)}};
    if (at_ns && its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;
    (void)timerfd_settime(a->fd, TFD_TIMER_ABSTIME, &its, NULL);
    if (at_ns)
        uv_poll_start(&a->poll, UV_READABLE, on_readable);
    else
        uv_poll_stop(&a->poll);
}

static void on_closed(uv_handle_t *h) {
    gf_alarm *a = h->data;
    close(a->fd);
    a->fd = -1;
    if (a->closed_cb)
        a->closed_cb(h);
}

void gf_alarm_close(gf_alarm *a, uv_close_cb cb) {
    a->at_ns = 0;
    a->closed_cb = cb;
    uv_close((uv_handle_t *)&a->poll, on_closed);
}

/* SPDX-License-Identifier: MIT */
/*
 * systemd integration without libsystemd: the sd_notify datagram protocol
 * (READY=1, STATUS=, WATCHDOG=1, STOPPING=1, RELOADING=1) and the socket
 * activation variables (LISTEN_FDS, LISTEN_PID).  Both protocols are
 * documented as stable interfaces for standalone implementations
 * (sd_notify(3), sd_listen_fds(3), systemd's "Interface Portability and
 * Stability" promise).
 *
 * Every function here is called from the loop thread.  None blocks: the
 * notify socket is non-blocking, and a message the manager cannot take at
 * once is dropped and reported, never waited for.
 */
#ifndef GF_NOTIFY_H
#define GF_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The first file descriptor systemd passes (SD_LISTEN_FDS_START). */
#define GF_LISTEN_FDS_START 3

/* Where notifications go: $NOTIFY_SOCKET, resolved once. */
typedef struct gf_notifier {
    int fd;                  /* SOCK_DGRAM | NONBLOCK | CLOEXEC; -1: not under systemd */
    struct sockaddr_un addr; /* the manager's socket; abstract when sun_path[0] == 0     */
    socklen_t addr_len;      /* exact: an abstract name is not NUL-terminated           */
} gf_notifier;

/*
 * Reads $NOTIFY_SOCKET ("/path" or "@abstract") and opens the socket that
 * sends to it.  Without the variable, n->fd is -1 and every send is a no-op.
 * Returns 0, or a negative errno with the reason in err[err_len] (a value
 * that is not a usable address, or socket(2) failing); n is then disabled.
 */
int gf_notify_open(gf_notifier *n, char *err, size_t err_len);

/* Closes the socket; safe on a disabled or closed notifier. */
void gf_notify_close(gf_notifier *n);

/* Nonzero when notifications are being sent. */
int gf_notify_enabled(const gf_notifier *n);

/*
 * Sends one datagram holding `msg` ("KEY=VALUE" lines separated by '\n')
 * with MSG_NOSIGNAL | MSG_DONTWAIT.  Returns 0 (also when disabled), or a
 * negative errno (-EAGAIN when the manager's queue is full; the message is
 * then lost).
 */
int gf_notify_send(gf_notifier *n, const char *msg);

/* READY=1, with STATUS=<status> when status is not NULL. */
int gf_notify_ready(gf_notifier *n, const char *status);

/* STATUS=<status>: one line; newlines in it are sent as spaces. */
int gf_notify_status(gf_notifier *n, const char *status);

/* WATCHDOG=1. */
int gf_notify_watchdog(gf_notifier *n);

/* STOPPING=1, with STATUS=<status> when status is not NULL. */
int gf_notify_stopping(gf_notifier *n, const char *status);

/* RELOADING=1 and MONOTONIC_USEC=<CLOCK_MONOTONIC now, in microseconds>,
 * as Type=notify-reload expects; READY=1 must follow once the reload is
 * over, whether it succeeded or not. */
int gf_notify_reloading(gf_notifier *n);

/*
 * The watchdog interval systemd asks for: $WATCHDOG_USEC, honoured only when
 * $WATCHDOG_PID is unset or names this process.  Stores it in `*usec`
 * (0: no watchdog).  Returns 0, or -EINVAL with the reason in err[err_len]
 * for a value that is not a positive integer (then *usec is 0).
 */
int gf_notify_watchdog_usec(uint64_t *usec, char *err, size_t err_len);

/*
 * Socket activation: the listening socket systemd passed.  When LISTEN_PID
 * names this process and LISTEN_FDS is 1, stores GF_LISTEN_FDS_START in
 * `*fd`, after checking that it is a listening Unix stream socket and
 * marking it close-on-exec.  Without the variables (or when they are meant
 * for another process) stores -1.  Either way LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES are removed from the environment, so no child inherits
 * them.  Returns 0, or -EINVAL with the reason in err[err_len]: more than
 * one socket, a malformed value, or an fd that is not a listening Unix
 * stream socket.
 */
int gf_notify_listen_fd(int *fd, char *err, size_t err_len);

#endif

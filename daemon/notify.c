/* SPDX-License-Identifier: MIT */
/*
 * sd_notify and socket activation without libsystemd; notify.h is the
 * contract.  The wire formats follow sd_notify(3) and sd_listen_fds(3).
 */
#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* One notification: a few KEY=VALUE lines.  STATUS= is one short line. */
#define GF_NOTIFY_MSG_MAX_BYTES 1024
/* Decimal digits of the largest value any of the variables may hold. */
#define GF_ENV_NUMBER_MAX_DIGITS 20

/* Parses a whole positive decimal number without sign or spaces; -1 if `s`
 * is not one. */
static int parse_positive(const char *s, uint64_t *out) {
    uint64_t v = 0;
    size_t i;

    if (s == NULL || s[0] == '\0' || strlen(s) > GF_ENV_NUMBER_MAX_DIGITS)
        return -1;
    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v == 0)
        return -1;
    *out = v;
    return 0;
}

/* ---- notifications --------------------------------------------------------- */

int gf_notify_open(gf_notifier *n, char *err, size_t err_len) {
    const char *e = getenv("NOTIFY_SOCKET");
    size_t len;

    memset(n, 0, sizeof *n);
    n->fd = -1;
    if (e == NULL || e[0] == '\0')
        return 0;
    len = strlen(e);
    if ((e[0] != '/' && e[0] != '@') || len < 2 || len > sizeof n->addr.sun_path) {
        gf_errorf(err, err_len,
                  "NOTIFY_SOCKET=\"%.*s\": expected an absolute path or an @abstract name of at "
                  "most %zu bytes; not notifying systemd",
                  (int)sizeof n->addr.sun_path, e, sizeof n->addr.sun_path);
        return -EINVAL;
    }
    if (e[0] == '/' && len == sizeof n->addr.sun_path) {
        gf_errorf(err, err_len, "NOTIFY_SOCKET: a path of %zu bytes leaves no room for its NUL",
                  len);
        return -EINVAL;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, e, len);
    if (e[0] == '@') {
        /* An abstract name is the bytes after the leading NUL, exactly as
         * many as given: a trailing NUL would name another socket. */
        n->addr.sun_path[0] = '\0';
        n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    } else {
        n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    }
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (n->fd < 0) {
        int rc = -errno;
        gf_errorf(err, err_len, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        return rc;
    }
    return 0;
}

void gf_notify_close(gf_notifier *n) {
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

int gf_notify_enabled(const gf_notifier *n) {
    return n->fd >= 0;
}

int gf_notify_send(gf_notifier *n, const char *msg) {
    ssize_t w;

    if (n->fd < 0)
        return 0;
    do {
        w = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
                   (const struct sockaddr *)&n->addr, n->addr_len);
    } while (w < 0 && errno == EINTR);
    return w < 0 ? -errno : 0;
}

/* Sends `head` followed, when `status` is not NULL, by "\nSTATUS=<status>"
 * with newlines in status replaced by spaces. */
static int send_with_status(gf_notifier *n, const char *head, const char *status) {
    char msg[GF_NOTIFY_MSG_MAX_BYTES];
    int o;

    o = snprintf(msg, sizeof msg, "%s%s%s", head, head[0] && status ? "\n" : "",
                 status ? "STATUS=" : "");
    if (o < 0 || (size_t)o >= sizeof msg)
        return -EMSGSIZE;
    if (status != NULL) {
        snprintf(msg + o, sizeof msg - (size_t)o, "%s", status);
        for (char *c = msg + o; *c != '\0'; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
    }
    return gf_notify_send(n, msg);
}

int gf_notify_ready(gf_notifier *n, const char *status) {
    return send_with_status(n, "READY=1", status);
}

int gf_notify_status(gf_notifier *n, const char *status) {
    return send_with_status(n, "", status ? status : "");
}

int gf_notify_watchdog(gf_notifier *n) {
    return gf_notify_send(n, "WATCHDOG=1");
}

int gf_notify_stopping(gf_notifier *n, const char *status) {
    return send_with_status(n, "STOPPING=1", status);
}

int gf_notify_reloading(gf_notifier *n) {
    char msg[64];

    /* MONOTONIC_USEC= is CLOCK_MONOTONIC in microseconds (sd_notify(3)). */
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, gf_now_ns() / 1000u);
    return gf_notify_send(n, msg);
}

/* ---- the watchdog ----------------------------------------------------------- */

int gf_notify_watchdog_usec(uint64_t *usec, char *err, size_t err_len) {
    const char *v = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
    uint64_t pid;

    *usec = 0;
    if (v == NULL || v[0] == '\0')
        return 0;
    if (p != NULL && p[0] != '\0') {
        if (parse_positive(p, &pid) < 0) {
            gf_errorf(err, err_len, "WATCHDOG_PID=\"%.32s\": not a process id; watchdog off", p);
            return -EINVAL;
        }
        if (pid != (uint64_t)getpid())
            return 0; /* meant for another process */
    }
    if (parse_positive(v, usec) < 0) {
        gf_errorf(err, err_len,
                  "WATCHDOG_USEC=\"%.32s\": expected a positive integer; watchdog off", v);
        *usec = 0;
        return -EINVAL;
    }
    return 0;
}

/* ---- socket activation -------------------------------------------------------- */

/* Removes the activation variables, as sd_listen_fds(1) does. */
static void unset_listen_env(void) {
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
}

/* 0 when `fd` is a listening AF_UNIX stream socket; else -EINVAL with why. */
static int check_listener(int fd, char *err, size_t err_len) {
    int type = 0, listening = 0;
    socklen_t len = sizeof type;
    struct sockaddr_un sa;
    socklen_t sa_len = sizeof sa;

    if (fcntl(fd, F_GETFD) < 0) {
        gf_errorf(err, err_len, "LISTEN_FDS=1 but fd %d is not open: %s", fd, strerror(errno));
        return -EINVAL;
    }
    memset(&sa, 0, sizeof sa);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sa_len) < 0) {
        gf_errorf(err, err_len, "fd %d passed by systemd is not a socket: %s", fd, strerror(errno));
        return -EINVAL;
    }
    len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
        listening = 0;
    if (sa.sun_family != AF_UNIX || type != SOCK_STREAM || !listening) {
        gf_errorf(err, err_len,
                  "fd %d passed by systemd is not a listening Unix stream socket (family %d, "
                  "type %d, listening %d): use ListenStream=/path in the .socket unit",
                  fd, (int)sa.sun_family, type, listening);
        return -EINVAL;
    }
    return 0;
}

int gf_notify_listen_fd(int *fd, char *err, size_t err_len) {
    const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
    uint64_t pid, count;
    int rc = 0;

    *fd = -1;
    if (pid_s == NULL && fds_s == NULL)
        goto out;
    if (parse_positive(pid_s, &pid) < 0) {
        gf_errorf(err, err_len, "LISTEN_PID=\"%.32s\": expected a process id", pid_s ? pid_s : "");
        rc = -EINVAL;
        goto out;
    }
    if (pid != (uint64_t)getpid())
        goto out; /* passed to another process: not ours to use */
    if (fds_s == NULL || parse_positive(fds_s, &count) < 0) {
        gf_errorf(err, err_len, "LISTEN_FDS=\"%.32s\": expected a positive number of sockets",
                  fds_s ? fds_s : "");
        rc = -EINVAL;
        goto out;
    }
    if (count != 1) {
        gf_errorf(err, err_len,
                  "systemd passed %" PRIu64 " sockets (LISTEN_FDS=%" PRIu64 "); gpuframed serves "
                  "exactly one: give gpuframed.socket a single ListenStream=",
                  count, count);
        rc = -EINVAL;
        goto out;
    }
    rc = check_listener(GF_LISTEN_FDS_START, err, err_len);
    if (rc < 0)
        goto out;
    if (fcntl(GF_LISTEN_FDS_START, F_SETFD, FD_CLOEXEC) < 0) {
        rc = -errno;
        gf_errorf(err, err_len, "fd %d: cannot set close-on-exec: %s", GF_LISTEN_FDS_START,
                  strerror(errno));
        goto out;
    }
    *fd = GF_LISTEN_FDS_START;
out:
    unset_listen_env();
    return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * The listening socket: bound here (or passed by systemd), watched with a
 * uv_poll_t, and accepted with accept4() of our own so that every refusal is
 * answered and counted instead of dropped in silence:
 *
 * - past max_connections a client is accepted, told too_many_connections
 *   in an ERROR and closed;
 * - out of file descriptors (EMFILE/ENFILE), one descriptor held in reserve
 *   is given up to accept the client and tell it the same, then taken back,
 *   so the daemon neither spins on a listener that stays readable nor drops
 *   connections without a word.
 *
 * Each refusal is logged at most GF_CLOSE_LOG_PER_S times a second.  A path
 * taken by a socket nobody listens on (a daemon that died) is replaced; a
 * live socket, or anything that is not a socket, never is.
 */
#define _GNU_SOURCE /* accept4, struct ucred */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "account.h"
#include "log.h"
#include "listener.h"
#include "reply.h"
#include "util.h"

/* Pending connections the kernel queues for accept(). */
#define GF_LISTEN_BACKLOG 128
/* Connections accepted per readiness event, so a flood of connects cannot
 * keep the loop from the clients already connected. */
#define GF_ACCEPTS_PER_EVENT 64

/* Answers a connection we will not serve with an ERROR of `status` and
 * closes it; never blocks (the reply is 32 bytes plus a line).  Counted
 * first: a client told so may ask STATS at once, on another connection. */
void gf_listener_refuse(gf_listener *l, int fd, uint32_t status, const char *text) {
    l->refused(l, status);
    gf_reply_send_error(fd, NULL, status, text);
    close(fd);
    gf_log_limited(&l->log, GF_LISTENER_LOG_PER_S, gf_now_ns(), GF_LOG_WARN,
                   "connection refused: %s: %s", gf_status_name(status), text);
}

/* Out of descriptors: use the reserve to tell one waiting client so. */
static void refuse_with_reserve(gf_listener *l, int err) {
    if (l->reserve_fd < 0) {
        gf_log_limited(&l->log, GF_LISTENER_LOG_PER_S, gf_now_ns(), GF_LOG_WARN,
                       "accept: %s, and no descriptor in reserve", strerror(err));
        return;
    }
    close(l->reserve_fd);
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
        gf_listener_refuse(l, fd, GF_ERR_TOO_MANY_CONNECTIONS,
                           err == EMFILE ? "the daemon is out of file descriptors (RLIMIT_NOFILE)"
                                         : "the system is out of file descriptors");
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Groups of a peer we look at: far more than anyone is in. */
#define GF_PEER_GROUPS_MAX 256

/* Whether the configuration's "allow" lets the peer of `fd` in: its uid, its
 * primary group, or one of its supplementary groups (SO_PEERGROUPS). */
static int peer_allowed(const gf_listener *l, int fd, const struct ucred *cred) {
    const gf_allow *a = &l->cfg->allow;
    if (!a->set)
        return 1;
    uint32_t gids[GF_PEER_GROUPS_MAX + 1];
    size_t n = 0;
    gids[n++] = (uint32_t)cred->gid;
    gid_t groups[GF_PEER_GROUPS_MAX];
    socklen_t len = sizeof groups;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
        for (size_t i = 0; i < len / sizeof groups[0]; i++)
            gids[n++] = (uint32_t)groups[i];
    return gf_allow_permits(a, (uint32_t)cred->uid, gids, n);
}

static void on_listen(uv_poll_t *h, int status, int events) {
    gf_listener *l = h->data;
    (void)events;
    if (status < 0) {
        GF_LOG_WRN("listener: %s", uv_strerror(status));
        return;
    }
    for (int i = 0; i < GF_ACCEPTS_PER_EVENT && l->listening; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE)
                refuse_with_reserve(l, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                GF_LOG_WRN("accept: %s", strerror(errno));
            return;
        }
        struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
        socklen_t cred_len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) < 0)
            GF_LOG_WRN("accept: SO_PEERCRED: %s", strerror(errno));
        if (!peer_allowed(l, fd, &cred)) {
            char text[GF_ERROR_TEXT_MAX_BYTES];
            gf_errorf(text, sizeof text,
                      "uid %u gid %u (pid %u) is not allowed to connect (the configuration's "
                      "\"allow\")",
                      (unsigned)cred.uid, (unsigned)cred.gid, (unsigned)cred.pid);
            gf_listener_refuse(l, fd, GF_ERR_FORBIDDEN, text);
            continue;
        }
        l->accepted(l, fd, (uint32_t)cred.uid, (uint32_t)cred.gid, (uint32_t)cred.pid);
    }
}

/* Nonzero when something is accepting connections on `path`. */
static int socket_is_live(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live;
}

/* Says why binding `path` failed in words an operator acts on: which
 * directory is missing or not writable, rather than a bare errno. */
static void explain_bind_error(const char *path, int err) {
    char dir[GF_SOCKET_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat st;
    if (err == ENOENT || err == ENOTDIR) {
        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
            GF_LOG_ERR("socket %s: the directory %s does not exist (create it, or choose another "
                       "path with --socket or \"socket\")",
                       path, dir);
            return;
        }
    } else if (err == EACCES || err == EPERM) {
        GF_LOG_ERR("socket %s: no permission to create a socket in %s (user %u): %s; start "
                   "gpuframed as root with \"user\" naming whom to run as, choose a directory "
                   "this user may write (--socket or \"socket\"), or let systemd's "
                   "gpuframed.socket make the socket",
                   path, dir, (unsigned)geteuid(), strerror(err));
        return;
    }
    GF_LOG_ERR("socket %s: cannot bind: %s", path, strerror(err));
}

/* `path` is taken: replaces it if it is a socket nobody listens on (a
 * daemon that died left it), and only then.  Returns 0 when it is gone, or
 * a negative errno, logged. */
static int replace_stale(const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        GF_LOG_ERR("socket %s: the path exists and is not a socket; refusing to replace it "
                   "(remove it yourself, or choose another path with --socket or \"socket\")",
                   path);
        return -EEXIST;
    }
    if (socket_is_live(path)) {
        GF_LOG_ERR("socket %s: another daemon is already listening there (stop it, or "
                   "choose another path with --socket or \"socket\")",
                   path);
        return -EADDRINUSE;
    }
    GF_LOG_INF("socket %s: replacing a stale socket file nobody listens on", path);
    if (unlink(path) < 0 && errno != ENOENT) {
        int err = errno;
        explain_bind_error(path, err);
        return -err;
    }
    return 0;
}

/* Gives the socket at `path` the group `group` names (socket_group).
 * Returns 0, or a negative errno, logged. */
static int give_group(const char *path, const char *group) {
    char why[256];
    uint32_t gid;
    if (gf_account_group(group, &gid, why, sizeof why) < 0) {
        GF_LOG_ERR("socket %s: socket_group: %s", path, why);
        return -EINVAL;
    }
    if (chown(path, (uid_t)-1, (gid_t)gid) == 0)
        return 0;
    int err = errno;
    if (err == EPERM && geteuid() == 0)
        GF_LOG_ERR("socket %s: cannot give it group %s (gid %u): root without the capability "
                   "CHOWN (in a container, add it to the securityContext's capabilities)",
                   path, group, gid);
    else if (err == EPERM)
        GF_LOG_ERR("socket %s: cannot give it group %s (gid %u): only root, or a member of that "
                   "group, may (gpuframed runs as user %u)",
                   path, group, gid, (unsigned)geteuid());
    else
        GF_LOG_ERR("socket %s: cannot give it group %s: %s", path, group, strerror(err));
    return -err;
}

/* A socket bound at `path` with group `group` ("": the daemon's own) and
 * permission bits `mode` (socket_group, socket_mode: who may connect,
 * whatever the umask).  Returns the fd, or a negative errno, logged. */
static int bind_path(const char *path, const char *group, mode_t mode) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        GF_LOG_ERR("socket %s: the path is longer than %zu bytes", path, sizeof sa.sun_path - 1);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* bind() creates the file with the umask's mode: create it closed to
     * everyone, then open it up exactly as far as `mode` says. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
    if (rc == -EADDRINUSE && (rc = replace_stale(path)) == 0)
        rc = bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
    umask(old);
    /* The group first: the mode opens the socket to it. */
    if (rc == 0 && group[0] != '\0' && (rc = give_group(path, group)) < 0) {
        close(fd);
        unlink(path);
        return rc;
    }
    if (rc == 0 && chmod(path, mode) < 0)
        rc = -errno;
    if (rc < 0) {
        if (rc != -EEXIST && rc != -EADDRINUSE)
            explain_bind_error(path, -rc);
        close(fd);
        return rc;
    }
    return fd;
}

int gf_listener_bind(const char *path, const char *group, unsigned mode) {
    int fd = bind_path(path, group, (mode_t)mode);
    if (fd < 0)
        return fd;
    /* Listening at once: a client that connects before the engine is up
     * waits in the backlog rather than being refused. */
    if (listen(fd, GF_LISTEN_BACKLOG) < 0) {
        int rc = -errno;
        GF_LOG_ERR("socket %s: cannot listen: %s", path, strerror(-rc));
        close(fd);
        unlink(path);
        return rc;
    }
    return fd;
}

int gf_listener_open(gf_listener *l, uv_loop_t *loop, int fd, int owned) {
    int rc = 0;
    const char *what = owned ? l->cfg->socket_path : "passed by systemd";
    /* systemd's socket is blocking; ours must never block the loop. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || listen(fd, GF_LISTEN_BACKLOG) < 0 ||
        (rc = uv_poll_init(loop, &l->poll, fd)) < 0) {
        rc = rc < 0 ? rc : -errno;
        GF_LOG_ERR("socket %s: cannot listen: %s", what, strerror(-rc));
        return rc;
    }
    l->poll.data = l;
    l->fd = fd;
    l->owned = owned != 0;
    l->listening = 1;
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_poll_start(&l->poll, UV_READABLE, on_listen);
    return 0;
}

static void on_listener_closed(uv_handle_t *h) {
    gf_listener *l = h->data;
    close(l->fd);
    l->fd = -1;
}

void gf_listener_close(gf_listener *l) {
    if (!l->listening)
        return;
    l->listening = 0;
    uv_close((uv_handle_t *)&l->poll, on_listener_closed);
    /* A socket systemd passed is systemd's to remove.  A daemon that became
     * "user" may not be allowed to remove its own (main.c). */
    if (l->owned && unlink(l->cfg->socket_path) < 0 && errno != ENOENT)
        GF_LOG_WRN("socket %s: cannot remove it: %s (the next start replaces it)",
                   l->cfg->socket_path, strerror(errno));
    if (l->reserve_fd >= 0)
        close(l->reserve_fd);
    l->reserve_fd = -1;
}

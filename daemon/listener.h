/* SPDX-License-Identifier: MIT */
/*
 * The listening socket (listener.c): bound or passed by systemd, accepted
 * with accept4() of our own, every refusal answered and counted; each
 * socket accepted from a peer the configuration's "allow" lets in goes to
 * `accepted`, which hands it on (shards.c) or refuses it.  The control
 * loop's thread only.
 */
#ifndef GF_LISTENER_H
#define GF_LISTENER_H

#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "config.h"
#include "log.h"
#include "protocol.h"

typedef struct gf_listener gf_listener;

struct gf_listener {
    uv_poll_t poll; /* the listening socket's readiness                  */
    int fd;         /* the listening socket, or -1                       */
    int owned;      /* bound here: its path is removed at close (not a
                       socket systemd passed)                           */
    int reserve_fd; /* kept open to answer one client at EMFILE          */
    int listening;
    const gf_config *cfg; /* socket path, "allow": the running configuration   */
    gf_log_budget log;    /* lines about refusals                              */
    /* A socket accepted from a peer "allow" lets in: serve it or refuse it
     * (gf_listener_refuse).  uid, gid and pid from SO_PEERCRED. */
    void (*accepted)(gf_listener *l, int fd, uint32_t uid, uint32_t gid, uint32_t pid);
    /* A refusal, counted by its status. */
    void (*refused)(gf_listener *l, uint32_t status);
    void *arg;
};

/* A socket bound at `path`, given group `group` (a name or gid; "": the
 * daemon's own) and permission bits `mode`, and listening; a stale socket
 * file nobody listens on is replaced, anything else at `path` never is.
 * Returns the fd, or a negative errno with one line logged. */
int gf_listener_bind(const char *path, const char *group, unsigned mode);

/* Accepts on `fd` on `loop`, bound by gf_listener_bind (`owned`: its path is
 * removed at close) or passed by systemd; l's cfg, accepted, refused and arg
 * are set.  Returns 0 or a negative errno, logged; the caller still owns
 * `fd` then. */
int gf_listener_open(gf_listener *l, uv_loop_t *loop, int fd, int owned);

/* Answers `fd` with an ERROR of `status` and `text`, closes it, counts and
 * logs the refusal (at most GF_LISTENER_LOG_PER_S lines a second). */
void gf_listener_refuse(gf_listener *l, int fd, uint32_t status, const char *text);

/* Stops accepting and closes the listening socket (its path is unlinked
 * unless systemd owns it). */
void gf_listener_close(gf_listener *l);

#define GF_LISTENER_LOG_PER_S 10

#endif

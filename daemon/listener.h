/* SPDX-License-Identifier: MIT */
/*
 * The listening socket (listener.c): bound or passed by systemd, accepted
 * with accept4() of our own, every refusal answered and counted; each
 * accepted socket goes to srv->accept.  Loop thread only.
 */
#ifndef GF_LISTENER_H
#define GF_LISTENER_H

#include "server_state.h"

/* A socket bound at `path` with permission bits `mode` and listening; a
 * stale socket file nobody listens on is replaced, anything else at `path`
 * never is.  Returns the fd, or a negative errno with one line logged. */
int gf_listener_bind(const char *path, unsigned mode);

/* Accepts on `fd`, bound by gf_listener_bind (`owned`: its path is removed
 * at close) or passed by systemd.  Returns 0 or a negative errno, logged;
 * the caller still owns `fd` then. */
int gf_listener_open(gf_server *srv, int fd, int owned);

/* Stops accepting and closes the listening socket (its path is unlinked
 * unless systemd owns it). */
void gf_listener_close(gf_server *srv);

#endif

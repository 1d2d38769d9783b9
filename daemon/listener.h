/*
 * The listening socket (listener.c): bound or passed by systemd, accepted
 * with accept4() of our own, every refusal answered and counted; each
 * accepted socket goes to srv->accept.  Loop thread only.
 */
#ifndef GF_LISTENER_H
#define GF_LISTENER_H

#include "server_state.h"

/* Listens on `fd` when >= 0 (passed by systemd), else binds `path` with the
 * configured mode.  Returns 0 or a negative errno, logged. */
int gf_listener_open(gf_server *srv, int fd, const char *path);

/* Stops accepting and closes the listening socket (its path is unlinked
 * unless systemd owns it). */
void gf_listener_close(gf_server *srv);

#endif

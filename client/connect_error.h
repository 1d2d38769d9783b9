/* SPDX-License-Identifier: MIT */
/*
 * Why a connection to the daemon's socket failed, said so that a person knows
 * what to do: start the daemon, remove nothing, join a group, point the
 * client elsewhere.  gf_client_connect_error (libgpuframe.h) is the public
 * side; this header splits it into what it finds out about the socket and
 * the user (gf__connect_facts_gather, which asks the file system and the
 * user and group databases) and the wording (gf__connect_explain, pure), so
 * that every wording is tested without privileges.
 */
#ifndef GF_CONNECT_ERROR_H
#define GF_CONNECT_ERROR_H

#include <stddef.h>

/* Room for a user or group name. */
#define GF_CONNECT_NAME_BYTES 64

/* What the wording depends on. */
typedef struct gf__connect_facts {
    const char *path;                  /* the socket path given to gf_client_connect          */
    int err;                           /* its negative errno                                  */
    const char *how_to_point;          /* how the program is told another socket, or NULL     */
    int stat_err;                      /* 0, or stat(path)'s negative errno                   */
    int is_socket;                     /* the path is a socket                                */
    unsigned mode;                     /* its permission bits                                 */
    unsigned long uid, gid;            /* its owner and group                                 */
    char owner[GF_CONNECT_NAME_BYTES]; /* the owner's name, "" when unknown           */
    char group[GF_CONNECT_NAME_BYTES]; /* the group's name, "" when unknown           */
    int group_privileged;              /* that group grants far more than the socket (root)   */
    int listed_in_group;               /* the user database lists this user in that group     */
    int session_has_group;             /* this process runs with that group                   */
} gf__connect_facts;

/* Fills f's socket and user facts for f->path (f->path, f->err and
 * f->how_to_point set by the caller); what cannot be found out stays 0 or
 * "".  Only looks; changes nothing. */
void gf__connect_facts_gather(gf__connect_facts *f);

/* Writes the one-line explanation of `f` into buf[len] (truncated to fit,
 * always NUL-terminated when len > 0).  Pure. */
void gf__connect_explain(const gf__connect_facts *f, char *buf, size_t len);

#endif

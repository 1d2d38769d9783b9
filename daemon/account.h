/* SPDX-License-Identifier: MIT */
/*
 * The accounts gpuframed runs under (config.h: "socket_group", "user"):
 * looked up from a name or an id, at load (config.c, so that --check-config
 * names a user or group this system lacks) and at start-up; and the switch
 * to "user" once the socket is bound (main.c, on the main thread, before any
 * other thread, plugin or CUDA call exists).
 */
#ifndef GF_ACCOUNT_H
#define GF_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>

/* Room for a user name, as the user database spells it. */
#define GF_ACCOUNT_NAME_BYTES 64

typedef struct gf_account {
    uint32_t uid, gid;                /* the user and its primary group */
    char name[GF_ACCOUNT_NAME_BYTES]; /* its name, for initgroups and logs */
} gf_account;

/* The user `text` names: a user name, or a uid the user database knows.
 * Returns 0, or -1 with why ("no user \"x\" on this system") in why[len]. */
int gf_account_user(const char *text, gf_account *out, char *why, size_t len);

/* The group `text` names: a group name, or any gid in digits (a gid needs no
 * name: a container may lack the host's group).  Returns 0, or -1 with why. */
int gf_account_group(const char *text, uint32_t *gid, char *why, size_t len);

/* Becomes `a` for good: its groups as the group database lists them, its
 * primary group, its uid; then checks that root cannot be had back, and
 * leaves the process dumpable, as if `a` had started it.  The process must
 * be single-threaded.  Returns 0, or -1 with why; the process is then in no
 * state to go on. */
int gf_account_become(const gf_account *a, char *why, size_t len);

/* "uid 998 (gpuframed), gid 998, groups 998, 44", this process's, for logs. */
void gf_account_describe_self(char *buf, size_t len);

#endif

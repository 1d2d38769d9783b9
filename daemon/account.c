/* SPDX-License-Identifier: MIT */
/*
 * Users and groups of "user" and "socket_group", and becoming "user"
 * (account.h is the contract).  Start-up's main thread, and config.c's
 * loads (a reload's thread among them): the lookups are reentrant.
 */
#include "account.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util.h"

/* getpwnam_r/getgrnam_r buffers: generous for any NSS entry. */
#define GF_NSS_BUF_BYTES 16384
/* Supplementary groups listed in a log line; more are counted. */
#define GF_GROUPS_SHOWN 16

/* `text` as an id when it is all digits and fits below (uid_t)-1; else -1. */
static int64_t as_id(const char *text) {
    char *end;
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v >= UINT32_MAX)
        return -1;
    return (int64_t)v;
}

int gf_account_user(const char *text, gf_account *out, char *why, size_t len) {
    char *buf = malloc(GF_NSS_BUF_BYTES);
    struct passwd pw, *res = NULL;
    int64_t id = as_id(text);
    int rc = ENOMEM;

    if (buf != NULL)
        rc = id >= 0 ? getpwuid_r((uid_t)id, &pw, buf, GF_NSS_BUF_BYTES, &res)
                     : getpwnam_r(text, &pw, buf, GF_NSS_BUF_BYTES, &res);
    if (rc == 0 && res != NULL) {
        out->uid = (uint32_t)pw.pw_uid;
        out->gid = (uint32_t)pw.pw_gid;
        gf_errorf(out->name, sizeof out->name, "%s", pw.pw_name);
    } else if (rc != 0) {
        gf_errorf(why, len, "cannot look up user \"%s\": %s", text, strerror(rc));
    } else {
        gf_errorf(why, len,
                  "no user %s \"%s\" on this system ('getent passwd %s' finds none; "
                  "systemd-sysusers or useradd makes one)",
                  id >= 0 ? "with uid" : "named", text, text);
    }
    free(buf);
    return rc == 0 && res != NULL ? 0 : -1;
}

int gf_account_group(const char *text, uint32_t *gid, char *why, size_t len) {
    int64_t id = as_id(text);
    if (id >= 0) {
        *gid = (uint32_t)id;
        return 0;
    }
    char *buf = malloc(GF_NSS_BUF_BYTES);
    struct group gr, *res = NULL;
    int rc = buf != NULL ? getgrnam_r(text, &gr, buf, GF_NSS_BUF_BYTES, &res) : ENOMEM;
    if (rc == 0 && res != NULL)
        *gid = (uint32_t)gr.gr_gid;
    else if (rc != 0)
        gf_errorf(why, len, "cannot look up group \"%s\": %s", text, strerror(rc));
    else
        gf_errorf(why, len,
                  "no group named \"%s\" on this system ('getent group %s' finds none; name "
                  "it by gid, or make it with groupadd)",
                  text, text);
    free(buf);
    return rc == 0 && res != NULL ? 0 : -1;
}

int gf_account_become(const gf_account *a, char *why, size_t len) {
    const char *step = "initgroups";
    if (initgroups(a->name, (gid_t)a->gid) < 0 || (step = "setgid", setgid((gid_t)a->gid) < 0) ||
        (step = "setuid", setuid((uid_t)a->uid) < 0)) {
        int err = errno;
        gf_errorf(why, len, "cannot become user %s (uid %u, gid %u): %s: %s%s", a->name, a->uid,
                  a->gid, step, strerror(err),
                  err == EPERM ? " (root needs the capabilities SETUID and SETGID: in a container, "
                                 "add them to the securityContext's capabilities)"
                               : "");
        return -1;
    }
    /* setuid() from root drops the saved uid too; that it did is what makes
     * the switch one-way. */
    if (a->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
        gf_errorf(why, len, "became user %s, yet could become root again", a->name);
        return -1;
    }
    /* A process whose ids changed is not dumpable: its /proc files would
     * be root's and it would leave no core.  It holds nothing of root's, so
     * it is made what it would be had `a` started it. */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) {
        gf_errorf(why, len, "became user %s, but PR_SET_DUMPABLE: %s", a->name, strerror(errno));
        return -1;
    }
    return 0;
}

void gf_account_describe_self(char *buf, size_t len) {
    char pwbuf[GF_NSS_BUF_BYTES];
    struct passwd pw, *me = NULL;
    gid_t groups[GF_GROUPS_SHOWN];
    int n = getgroups(GF_GROUPS_SHOWN, groups);
    size_t used;

    if (getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &me) != 0)
        me = NULL;
    used = gf_errorf(buf, len, "uid %u (%s), gid %u, groups", (unsigned)geteuid(),
                     me != NULL ? me->pw_name : "no name", (unsigned)getegid());
    if (n < 0)
        used += gf_errorf(buf + used, len - used, " more than %d", GF_GROUPS_SHOWN);
    for (int i = 0; i < n; i++)
        used += gf_errorf(buf + used, len - used, "%s %u", i ? "," : "", (unsigned)groups[i]);
    if (n == 0)
        gf_errorf(buf + used, len - used, " none");
}

/* SPDX-License-Identifier: MIT */
/*
 * Explaining a failed connect to the daemon's socket; connect_error.h and
 * gf_client_connect_error in libgpuframe.h are the contract.
 */
#include "connect_error.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libgpuframe.h"

/* Buffers of the user and group database lookups: enough for a group with
 * a few hundred members; a larger entry leaves the name unknown. */
#define DB_ENTRY_BYTES 16384
/* Groups asked of getgrouplist at first; it says how many more it needs. */
#define GROUPS_FIRST_COUNT 64
/* What starts the daemon, in every explanation that needs it started. */
#define START_HINT "start it (systemctl start gpuframed)"
/* How to point a program elsewhere when the caller did not say. */
#define POINT_HINT_DEFAULT "point this program at the socket it listens on"

/* Groups that grant far more than a socket: telling a user to join one of
 * them to reach gpuframed would be a remedy worse than the problem.  gid 0
 * is one whatever its name.  python/gpuframe/client.py has the same list. */
static const char *const privileged_groups[] = {
    "root", "wheel", "sudo", "admin", "adm", "shadow", "disk", "kmem", "docker", "lxd", "libvirt",
};

static int is_privileged_group(unsigned long gid, const char *name) {
    if (gid == 0)
        return 1;
    for (size_t i = 0; i < sizeof privileged_groups / sizeof privileged_groups[0]; i++)
        if (strcmp(name, privileged_groups[i]) == 0)
            return 1;
    return 0;
}

/* Whether this user is listed in group `gid`, as a member or by his primary
 * group, according to the databases (not this process's groups). */
static int listed_in(gid_t gid) {
    char buf[DB_ENTRY_BYTES];
    struct passwd pw, *me = NULL;

    if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &me) != 0 || me == NULL)
        return 0;
    if (me->pw_gid == gid)
        return 1;
    int count = GROUPS_FIRST_COUNT, listed = 0;
    gid_t *groups = malloc((size_t)count * sizeof *groups);
    if (groups != NULL && getgrouplist(me->pw_name, me->pw_gid, groups, &count) < 0) {
        gid_t *more = realloc(groups, (size_t)count * sizeof *groups);
        if (more == NULL || getgrouplist(me->pw_name, me->pw_gid, more, &count) < 0)
            count = 0;
        groups = more != NULL ? more : groups;
    }
    for (int i = 0; groups != NULL && i < count; i++)
        listed |= groups[i] == gid;
    free(groups);
    return listed;
}

/* Whether this process runs with group `gid`. */
static int session_has(gid_t gid) {
    if (getegid() == gid)
        return 1;
    int count = getgroups(0, NULL), has = 0;
    gid_t *groups = count > 0 ? malloc((size_t)count * sizeof *groups) : NULL;
    if (groups != NULL)
        count = getgroups(count, groups);
    for (int i = 0; groups != NULL && i < count; i++)
        has |= groups[i] == gid;
    free(groups);
    return has;
}

void gf__connect_facts_gather(gf__connect_facts *f) {
    char buf[DB_ENTRY_BYTES];
    struct stat st;

    if (stat(f->path, &st) < 0) {
        f->stat_err = -errno;
        return;
    }
    f->is_socket = S_ISSOCK(st.st_mode);
    f->mode = (unsigned)(st.st_mode & 07777);
    f->uid = (unsigned long)st.st_uid;
    f->gid = (unsigned long)st.st_gid;
    struct passwd pw, *owner = NULL;
    if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &owner) == 0 && owner != NULL)
        snprintf(f->owner, sizeof f->owner, "%s", owner->pw_name);
    struct group gr, *group = NULL;
    if (getgrgid_r(st.st_gid, &gr, buf, sizeof buf, &group) == 0 && group != NULL)
        snprintf(f->group, sizeof f->group, "%s", group->gr_name);
    f->group_privileged = is_privileged_group(f->gid, f->group);
    f->listed_in_group = listed_in(st.st_gid);
    f->session_has_group = session_has(st.st_gid);
}

/* "name" or, when the database has none, "uid N" / "gid N". */
static const char *who(const char *name, const char *kind, unsigned long id, char *buf,
                       size_t len) {
    if (name[0] != '\0')
        return name;
    snprintf(buf, len, "%s %lu", kind, id);
    return buf;
}

/* The permission problem: a directory on the path, the socket's mode, or
 * the user's groups. */
static void explain_access(const gf__connect_facts *f, const char *point, char *buf, size_t len) {
    char owner_buf[32], group_buf[32];
    const char *owner = who(f->owner, "uid", f->uid, owner_buf, sizeof owner_buf);
    const char *group = who(f->group, "gid", f->gid, group_buf, sizeof group_buf);

    if (f->stat_err != 0) {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied on a directory on its path: ask its "
                 "owner for access, or %s",
                 f->path, point);
    } else if (!(f->mode & S_IWGRP)) {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied: the socket's mode %04o lets only its "
                 "owner %s connect (the daemon's socket_mode, or its socket unit's SocketMode=, "
                 "decides; 0660 admits group %s)",
                 f->path, f->mode, owner, group);
    } else if (f->listed_in_group && !f->session_has_group) {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied: you are in group %s, which may connect, "
                 "but this login session began before you joined it: log in again (or run "
                 "'newgrp %s')",
                 f->path, group, group);
    } else if (!f->session_has_group && f->group_privileged) {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied: the socket admits user %s and group %s "
                 "(mode %04o), and group %s grants far more than this socket: do not join it; have "
                 "the daemon give its socket a group of its own (socket_group or --socket-group, "
                 "or the socket unit's SocketGroup=; gpuframed by default), then join that group",
                 f->path, owner, group, f->mode, group);
    } else if (!f->session_has_group) {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied: the socket admits user %s and group %s "
                 "(mode %04o): join group %s (sudo usermod -aG %s $USER, then log in again)",
                 f->path, owner, group, f->mode, group, group);
    } else {
        snprintf(buf, len,
                 "cannot connect to %s: permission denied, though you are in its group %s (mode "
                 "%04o): a directory on its path or a security module refuses",
                 f->path, group, f->mode);
    }
}

void gf__connect_explain(const gf__connect_facts *f, char *buf, size_t len) {
    const char *point = f->how_to_point != NULL ? f->how_to_point : POINT_HINT_DEFAULT;

    if (len == 0)
        return;
    switch (-f->err) {
    case ENOENT:
    case ENOTDIR:
        snprintf(buf, len,
                 "cannot connect to %s: no such socket: is gpuframed running? " START_HINT
                 ", or %s",
                 f->path, point);
        return;
    case ECONNREFUSED:
        if (f->stat_err == 0 && !f->is_socket) {
            snprintf(buf, len, "cannot connect to %s: that is not a socket: %s", f->path, point);
            return;
        }
        snprintf(buf, len,
                 "cannot connect to %s: a socket file is there but no daemon listens: gpuframed "
                 "stopped without removing it, or crashed; " START_HINT ", or %s",
                 f->path, point);
        return;
    case EACCES:
    case EPERM: explain_access(f, point, buf, len); return;
    case ENAMETOOLONG:
        snprintf(buf, len,
                 "cannot connect to %s: the path has %zu bytes; a socket's has at most %zu",
                 f->path, strlen(f->path), sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        return;
    case EINVAL: snprintf(buf, len, "cannot connect: no socket path given"); return;
    }
    snprintf(buf, len, "cannot connect to %s: %s", f->path, strerror(-f->err));
}

const char *gf_client_connect_error(const char *socket_path, int err, const char *how_to_point,
                                    char *buf, size_t len) {
    gf__connect_facts f;

    memset(&f, 0, sizeof f);
    f.path = socket_path != NULL ? socket_path : "";
    f.err = err;
    f.how_to_point = how_to_point;
    if (f.path[0] != '\0' && (err == -EACCES || err == -EPERM || err == -ECONNREFUSED))
        gf__connect_facts_gather(&f);
    gf__connect_explain(&f, buf, len);
    return buf;
}

/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the "allow" object (who may connect), read at load, names
 * resolved to ids there, so that accept() only compares numbers.
 *
 *   "allow": {"users": ["alice"], "groups": ["video"], "uids": [1001], "gids": [44]}
 *
 * A peer is allowed when its uid is one of the users/uids, or its primary or
 * any supplementary group (SO_PEERCRED, SO_PEERGROUPS) is one of the
 * groups/gids.  No "allow" key (or an empty object): everyone who can open
 * the socket, whose mode (socket_mode) is then the whole access model.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "listing.h"
#include "util.h"

/* getpwnam_r/getgrnam_r buffers: generous for any NSS entry. */
#define GF_NSS_BUF_BYTES 16384

enum { A_USERS, A_GROUPS, A_UIDS, A_GIDS, A_COUNT };
static const char *const allow_names[A_COUNT] = {"users", "groups", "uids", "gids"};

/* Adds `id` to ids[*count] unless there, or reports that the list is full. */
static int add_id(uint32_t *ids, uint32_t *count, uint32_t id, const char *path, gf_problems *pr) {
    for (uint32_t i = 0; i < *count; i++)
        if (ids[i] == id)
            return 0;
    if (*count == GF_ALLOW_MAX) {
        gf_problem(pr, "%s: more than %u ids in one list", path, (unsigned)GF_ALLOW_MAX);
        return -1;
    }
    ids[(*count)++] = id;
    return 0;
}

/* The id of user or group `name`, resolved now; -1 with the problem filed. */
static int64_t resolve(const char *name, int group, const char *path, gf_problems *pr) {
    char *buf = malloc(GF_NSS_BUF_BYTES);
    int64_t id = -1;
    int rc = ENOMEM;
    if (buf != NULL) {
        if (group) {
            struct group g, *res = NULL;
            rc = getgrnam_r(name, &g, buf, GF_NSS_BUF_BYTES, &res);
            if (rc == 0 && res != NULL)
                id = (int64_t)g.gr_gid;
        } else {
            struct passwd p, *res = NULL;
            rc = getpwnam_r(name, &p, buf, GF_NSS_BUF_BYTES, &res);
            if (rc == 0 && res != NULL)
                id = (int64_t)p.pw_uid;
        }
    }
    free(buf);
    if (id < 0 && rc != 0)
        gf_problem(pr, "%s: cannot look up %s \"%s\": %s", path, group ? "group" : "user", name,
                   strerror(rc));
    else if (id < 0)
        gf_problem(pr, "%s: no %s named \"%s\" on this system", path, group ? "group" : "user",
                   name);
    return id;
}

int gf__config_read_allow(const cJSON *v, const char *key, gf_allow *out, gf_problems *pr) {
    const cJSON *items[A_COUNT] = {0};
    char path[96], got[GF_VALUE_TEXT_BYTES];
    gf_allow a;
    int rc = 0;

    memset(&a, 0, sizeof a);
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected an object of users, groups, uids and gids, got %s", key, got);
        return -1;
    }
    if (gf_json_collect_keys(v, key, allow_names, A_COUNT, 0, items, pr) < 0)
        rc = -1;
    for (int k = 0; k < A_COUNT; k++) {
        if (items[k] == NULL)
            continue;
        if (!cJSON_IsArray(items[k])) {
            gf_json_describe(items[k], got, sizeof got);
            gf_problem(pr, "%s.%s: expected an array, got %s", key, allow_names[k], got);
            rc = -1;
            continue;
        }
        int group = k == A_GROUPS || k == A_GIDS;
        uint32_t *ids = group ? a.gids : a.uids;
        uint32_t *count = group ? &a.gid_count : &a.uid_count;
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, items[k]) {
            snprintf(path, sizeof path, "%s.%s[%d]", key, allow_names[k], i++);
            int64_t id = -1;
            double n;
            if (k == A_USERS || k == A_GROUPS) {
                if (cJSON_IsString(e)) {
                    id = resolve(e->valuestring, group, path, pr);
                } else {
                    gf_json_describe(e, got, sizeof got);
                    gf_problem(pr, "%s: expected a name, got %s", path, got);
                }
            } else if (gf_json_read_integer(e, path, 0, 4294967294.0, &n, pr) == 0) {
                id = (int64_t)n;
            }
            if (id < 0 || add_id(ids, count, (uint32_t)id, path, pr) < 0)
                rc = -1;
        }
    }
    a.set = a.uid_count + a.gid_count > 0;
    if (rc == 0)
        *out = a;
    return rc;
}

int gf_allow_permits(const gf_allow *a, uint32_t uid, const uint32_t *gids, size_t gid_count) {
    if (!a->set)
        return 1;
    for (uint32_t i = 0; i < a->uid_count; i++)
        if (a->uids[i] == uid)
            return 1;
    for (size_t g = 0; g < gid_count; g++)
        for (uint32_t i = 0; i < a->gid_count; i++)
            if (a->gids[i] == gids[g])
                return 1;
    return 0;
}

void gf_allow_describe(const gf_allow *a, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    if (!a->set) {
        gf_errorf(buf, len, "everyone");
        return;
    }
    for (int group = 0; group <= 1; group++) {
        const uint32_t *ids = group ? a->gids : a->uids;
        uint32_t count = group ? a->gid_count : a->uid_count;
        for (uint32_t i = 0; i < count && used < len; i++) {
            used += gf_errorf(buf + used, len - used, "%s%s %u", used ? ", " : "",
                              group ? "gid" : "uid", (unsigned)ids[i]);
        }
    }
}

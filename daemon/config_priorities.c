/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the "priorities" object (whose frames go first), read at
 * load, names resolved to ids there, as "allow" does (config_allow.c):
 *
 *   "priorities": {"realtime": {"users": ["camera"], "gids": [44]},
 *                  "batch": {"uids": [1002]}, "default": "normal"}
 *
 * A connection's class is the first of realtime, normal, batch whose lists
 * hold its uid or its primary gid (SO_PEERCRED), else "default" (normal
 * when absent).  Its frames have that class, or a lower one they name
 * (GF_FLAG_CLASS_MASK, PROTOCOL.md).  No "priorities": everyone is normal,
 * and a frame that names realtime is normal too.  What a class does is the
 * scheduler's (scheduler.h, "Priorities").
 */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"
#include "util.h"

static const char *const keys[] = {"realtime", "normal", "batch", "default"};
enum { P_DEFAULT = 3, P_COUNT = 4 };
/* The classes one may default to, in the order of keys[]. */
static const char *const default_names[] = {"realtime", "normal", "batch"};

int gf__config_read_priorities(const cJSON *v, gf_priorities *out, gf_problems *pr) {
    const cJSON *items[P_COUNT] = {0};
    char got[GF_VALUE_TEXT_BYTES], key[32];
    gf_priorities p;
    int rc = 0;

    memset(&p, 0, sizeof p);
    p.default_class = GF_CLASS_NORMAL;
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr,
                   "priorities: expected an object of realtime, normal, batch and default, "
                   "got %s",
                   got);
        return -1;
    }
    if (gf_json_collect_keys(v, "priorities", keys, P_COUNT, 0, items, pr) < 0)
        rc = -1;
    for (int k = 0; k < P_DEFAULT; k++) {
        snprintf(key, sizeof key, "priorities.%s", keys[k]);
        if (items[k] &&
            gf__config_read_allow(items[k], key, &p.members[GF_CLASS_REALTIME + k], pr) < 0)
            rc = -1;
    }
    if (items[P_DEFAULT]) {
        int i = gf_json_read_choice(items[P_DEFAULT], "priorities.default", default_names, 3, pr);
        if (i < 0)
            rc = -1;
        else
            p.default_class = GF_CLASS_REALTIME + i;
    }
    if (rc == 0)
        *out = p;
    return rc;
}

/* Whether the list `a` holds `uid` or `gid`. */
static int member(const gf_allow *a, uint32_t uid, uint32_t gid) {
    for (uint32_t i = 0; i < a->uid_count; i++)
        if (a->uids[i] == uid)
            return 1;
    for (uint32_t i = 0; i < a->gid_count; i++)
        if (a->gids[i] == gid)
            return 1;
    return 0;
}

unsigned gf_priority_of(const gf_priorities *p, uint32_t uid, uint32_t gid, unsigned asked) {
    unsigned cls = (unsigned)p->default_class;
    for (unsigned c = GF_CLASS_REALTIME; c <= GF_CLASS_BATCH; c++)
        if (member(&p->members[c], uid, gid)) {
            cls = c;
            break;
        }
    return asked > cls && asked < GF_CLASS_COUNT_ ? asked : cls;
}

void gf_priorities_describe(const gf_priorities *p, char *buf, size_t len) {
    size_t used = 0;
    char ids[256];
    buf[0] = '\0';
    for (unsigned c = GF_CLASS_REALTIME; c <= GF_CLASS_BATCH && used < len; c++) {
        if (!p->members[c].set)
            continue;
        gf_allow_describe(&p->members[c], ids, sizeof ids);
        used += gf_errorf(buf + used, len - used, "%s: %s; ", gf_priority_class_name(c), ids);
    }
    if (used < len)
        gf_errorf(buf + used, len - used, "default %s",
                  gf_priority_class_name((unsigned)p->default_class));
}

/* SPDX-License-Identifier: MIT */
/*
 * TRACE documents to events, and gf_report_trace_summary; report_trace.h and
 * report.h are the contract.
 */
#include "report_trace.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report_doc.h"
#include "util.h"

const gf_ev_kind_info gf_ev_kinds[GF_EV_KINDS] = {
    [GF_EV_RECEIVE] = {"receive", "host", GF_REPORT_LANE_HOST, "#9c9c9c", 0},
    [GF_EV_H2D] = {"H2D", "gpu", GF_REPORT_LANE_H2D, "#4e79a7", 0},
    [GF_EV_KERNEL] = {"kernel", "gpu", GF_REPORT_LANE_KERNEL, "#59a14f", 0},
    [GF_EV_D2H] = {"D2H", "gpu", GF_REPORT_LANE_D2H, "#f28e2b", 1},
    [GF_EV_COMPLETION] = {"completion_delay", "host", GF_REPORT_LANE_HOST, "#e15759", 1},
    [GF_EV_REPLY] = {"reply_write", "host", GF_REPORT_LANE_HOST, "#b07aa1", 1},
};

const char *const gf_lane_names[GF_REPORT_LANES_PER_SLOT] = {
    [GF_REPORT_LANE_H2D] = "H2D",
    [GF_REPORT_LANE_KERNEL] = "kernel",
    [GF_REPORT_LANE_D2H] = "D2H",
    [GF_REPORT_LANE_HOST] = "host",
};

void gf_tdoc_free(gf_tdoc *t) {
    free(t->frames);
    free(t->events);
    free(t->lane_used);
    memset(t, 0, sizeof *t);
}

/* Reads the integer member `key` of frame `i` into *out; when `required`
 * is 0 a missing member reads as 0. */
static int frame_uint(const cJSON *f, size_t i, const char *key, int required, uint64_t *out,
                      char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, key);

    if (v == NULL && !required) {
        *out = 0;
        return 0;
    }
    if (!gf_doc_is_uint(v)) {
        gf_errorf(err, err_len, "trace frame %zu: \"%s\" is %s, not a non-negative integer", i, key,
                  v == NULL ? "missing" : "something else");
        return -EINVAL;
    }
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* Reads the stage interval `key` of frame `i`: 1 and [*b, *e] when there is
 * one, 0 when it is null or missing, -EINVAL when malformed. */
static int frame_interval(const cJSON *f, size_t i, const char *key, uint64_t *b, uint64_t *e,
                          char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, key);

    if (v == NULL || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !gf_doc_is_uint(v->child) ||
        !gf_doc_is_uint(v->child->next) || v->child->next->valuedouble < v->child->valuedouble) {
        gf_errorf(err, err_len, "trace frame %zu: \"%s\" is not null or [begin, end]", i, key);
        return -EINVAL;
    }
    *b = (uint64_t)v->child->valuedouble;
    *e = (uint64_t)v->child->next->valuedouble;
    return 1;
}

/* Appends the event [b, e] unless it is empty. */
static void add_event(gf_tdoc *t, size_t frame, enum gf_ev_kind kind, uint64_t b, uint64_t e) {
    if (e <= b)
        return;
    t->events[t->event_count++] = (gf_tev){.frame = frame, .kind = kind, .begin = b, .end = e};
}

/* Reads the members of frame `i` (`f`) into `fr`: its slot and the host
 * timestamps that place its events are required, the rest default to 0 (the
 * shard of a daemon before sharding too).  place_frames sets fr->group. */
static int read_frame(gf_tframe *fr, const cJSON *f, size_t i, char *err, size_t err_len) {
    uint64_t slot, shard;

    if (!cJSON_IsObject(f)) {
        gf_errorf(err, err_len, "trace frame %zu is not an object", i);
        return -EINVAL;
    }
    const struct {
        const char *key;
        int required; /* the host timestamps that place the frame's events */
        uint64_t *dst;
    } fields[] = {
        {"slot", 1, &slot},
        {"claimed", 1, &fr->claimed},
        {"submitted", 1, &fr->submitted},
        {"done", 1, &fr->done},
        {"drained", 1, &fr->drained},
        {"written", 1, &fr->written},
        {"shard", 0, &shard},
        {"arrived", 0, &fr->arrived},
        {"frame_id", 0, &fr->frame_id},
        {"conn", 0, &fr->conn},
        {"pipeline", 0, &fr->pipeline},
        {"status", 0, &fr->status},
        {"in_bytes", 0, &fr->in_bytes},
        {"out_bytes", 0, &fr->out_bytes},
    };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (frame_uint(f, i, fields[k].key, fields[k].required, fields[k].dst, err, err_len) < 0)
            return -EINVAL;
    if (slot >= GF_REPORT_SLOTS_MAX) {
        gf_errorf(err, err_len, "trace frame %zu: slot %" PRIu64 " is beyond %u", i, slot,
                  GF_REPORT_SLOTS_MAX);
        return -EINVAL;
    }
    if (shard >= GF_REPORT_SLOTS_MAX) {
        gf_errorf(err, err_len, "trace frame %zu: shard %" PRIu64 " is beyond %u", i, shard,
                  GF_REPORT_SLOTS_MAX);
        return -EINVAL;
    }
    fr->slot = (uint32_t)slot;
    fr->shard = (uint32_t)shard;
    if (fr->arrived == 0 && cJSON_GetObjectItemCaseSensitive(f, "arrived") == NULL)
        fr->arrived = fr->claimed;
    return 0;
}

/* Checks frame `i` (`f`) and appends its events. */
static int parse_frame(gf_tdoc *t, const cJSON *f, size_t i, char *err, size_t err_len) {
    gf_tframe *fr = &t->frames[i];
    uint64_t iv[3][2];
    int has[3];
    static const char *const stage_keys[3] = {"h2d", "kernel", "d2h"};

    if (read_frame(fr, f, i, err, err_len) < 0)
        return -EINVAL;
    for (int s = 0; s < 3; s++) {
        has[s] = frame_interval(f, i, stage_keys[s], &iv[s][0], &iv[s][1], err, err_len);
        if (has[s] < 0)
            return -EINVAL;
    }

    /* GPU done on the host clock: the end of the last timed stage, else the
     * moment the engine's thread saw the frame finish. */
    uint64_t gpu_end = has[2] ? iv[2][1] : has[1] ? iv[1][1] : has[0] ? iv[0][1] : fr->done;
    add_event(t, i, GF_EV_RECEIVE, fr->claimed, fr->submitted);
    for (int s = 0; s < 3; s++)
        if (has[s])
            add_event(t, i, (enum gf_ev_kind)(GF_EV_H2D + s), iv[s][0], iv[s][1]);
    add_event(t, i, GF_EV_COMPLETION, gpu_end, fr->drained);
    add_event(t, i, GF_EV_REPLY, fr->drained, fr->written);
    return 0;
}

/* The member `key` of document `trace` when it is an integer, at most
 * GF_REPORT_SLOTS_MAX (a larger one places every lane beyond the bound
 * anyway); 0 when it is missing or something else. */
static uint32_t doc_count(const cJSON *trace, const char *key) {
    const cJSON *v = gf_doc_get(trace, key);

    if (!gf_doc_is_uint(v))
        return 0;
    return v->valuedouble > GF_REPORT_SLOTS_MAX ? GF_REPORT_SLOTS_MAX : (uint32_t)v->valuedouble;
}

/* Sets t's shard count and slots per shard from document `trace` and its
 * frames, and each frame's lane group, which must stay below
 * GF_REPORT_SLOTS_MAX. */
static int place_frames(gf_tdoc *t, const cJSON *trace, char *err, size_t err_len) {
    t->shard_count = doc_count(trace, "shards");
    t->slots_per_shard = doc_count(trace, "slots");
    for (size_t i = 0; i < t->frame_count; i++) {
        const gf_tframe *fr = &t->frames[i];
        if (fr->shard >= t->shard_count)
            t->shard_count = fr->shard + 1;
        if (fr->slot >= t->slots_per_shard)
            t->slots_per_shard = fr->slot + 1;
    }
    t->shard_count = t->shard_count > 0 ? t->shard_count : 1;
    t->slots_per_shard = t->slots_per_shard > 0 ? t->slots_per_shard : 1;
    for (size_t i = 0; i < t->frame_count; i++) {
        gf_tframe *fr = &t->frames[i];
        uint64_t group = (uint64_t)fr->shard * t->slots_per_shard + fr->slot;
        if (group >= GF_REPORT_SLOTS_MAX) {
            gf_errorf(err, err_len,
                      "trace frame %zu: shard %" PRIu32 " slot %" PRIu32 " is beyond the %u "
                      "slots a trace draws (%" PRIu32 " a shard)",
                      i, fr->shard, fr->slot, GF_REPORT_SLOTS_MAX, t->slots_per_shard);
            return -EINVAL;
        }
        fr->group = (uint32_t)group;
    }
    return 0;
}

/* Sets the span of t's events, the lane groups they use and which lanes hold
 * one. */
static int place_events(gf_tdoc *t, char *err, size_t err_len) {
    for (size_t k = 0; k < t->event_count; k++) {
        const gf_tev *e = &t->events[k];
        uint32_t groups = t->frames[e->frame].group + 1;
        t->group_count = groups > t->group_count ? groups : t->group_count;
        if (k == 0 || e->begin < t->begin)
            t->begin = e->begin;
        if (k == 0 || e->end > t->end)
            t->end = e->end;
    }
    if (t->group_count > 0) {
        t->lane_used = calloc((size_t)t->group_count * GF_REPORT_LANES_PER_SLOT, 1);
        if (t->lane_used == NULL) {
            gf_errorf(err, err_len, "out of memory");
            return -ENOMEM;
        }
    }
    for (size_t k = 0; k < t->event_count; k++) {
        unsigned char *used = &t->lane_used[gf_tdoc_lane(t, &t->events[k])];
        t->lanes += *used == 0;
        *used = 1;
    }
    return 0;
}

int gf_tdoc_parse(const cJSON *trace, gf_tdoc *t, char *err, size_t err_len) {
    const cJSON *frames = gf_doc_get(trace, "frames"), *f;
    size_t i = 0;

    memset(t, 0, sizeof *t);
    t->doc = trace;
    if (!cJSON_IsObject(trace) || !cJSON_IsArray(frames)) {
        gf_errorf(err, err_len, "the TRACE document is not an object with a \"frames\" array");
        return -EINVAL;
    }
    size_t n = (size_t)cJSON_GetArraySize(frames);
    if (n > 0) {
        t->frames = calloc(n, sizeof *t->frames);
        t->events = calloc(n, GF_EV_KINDS * sizeof *t->events);
        if (t->frames == NULL || t->events == NULL) {
            gf_errorf(err, err_len, "out of memory for %zu trace frames", n);
            return -ENOMEM;
        }
    }
    cJSON_ArrayForEach(f, frames) {
        if (parse_frame(t, f, i, err, err_len) < 0)
            return -EINVAL;
        i++;
    }
    t->frame_count = n;
    if (place_frames(t, trace, err, err_len) < 0)
        return -EINVAL;
    return place_events(t, err, err_len);
}

size_t gf_tdoc_lane(const gf_tdoc *t, const gf_tev *e) {
    return (size_t)t->frames[e->frame].group * GF_REPORT_LANES_PER_SLOT + gf_ev_kinds[e->kind].lane;
}

void gf_tdoc_put_slot(const gf_tdoc *t, uint32_t shard, uint32_t slot, FILE *out) {
    if (t->shard_count > 1)
        fprintf(out, "shard %" PRIu32 " ", shard);
    fprintf(out, "slot %" PRIu32, slot);
}

void gf_tdoc_put_group(const gf_tdoc *t, uint32_t group, FILE *out) {
    assert(group < t->group_count);
    gf_tdoc_put_slot(t, group / t->slots_per_shard, group % t->slots_per_shard, out);
}

int gf_report_trace_summary(const cJSON *trace, gf_report_trace_info *info, char *err,
                            size_t err_len) {
    gf_tdoc t;
    int rc = gf_tdoc_parse(trace, &t, err, err_len);

    if (rc == 0) {
        info->frames = t.frame_count;
        info->events = t.event_count;
        info->lanes = t.lanes;
        info->begin_ns = t.begin;
        info->end_ns = t.end;
    }
    gf_tdoc_free(&t);
    return rc;
}

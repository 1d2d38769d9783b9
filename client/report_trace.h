/* SPDX-License-Identifier: MIT */
/*
 * A TRACE document as the trace renderers draw it: checked, and turned into a
 * flat list of events, one per stage of each frame, in the lanes report.h
 * describes.  report_chrome.c, report_svg.c and gf_report_trace_summary all
 * draw from this one list, so they always agree.
 *
 * Every shard of the daemon numbers its slots from 0, so a slot is named by
 * its shard and its number: the lanes of report.h belong to a lane group, one
 * per (shard, slot), numbered shard * slots_per_shard + slot.  A document of
 * one shard (a daemon before sharding sends no "shard") has one group per
 * slot, numbered as the slot, and its lanes are labelled "slot J" as before;
 * a document of several labels them "shard K slot J".
 */
#ifndef GF_REPORT_TRACE_H
#define GF_REPORT_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "report.h"

/* The stages of a frame, in the order they happen. */
enum gf_ev_kind {
    GF_EV_RECEIVE,
    GF_EV_H2D,
    GF_EV_KERNEL,
    GF_EV_D2H,
    GF_EV_COMPLETION,
    GF_EV_REPLY,
    GF_EV_KINDS
};

/* How events of one kind are named, placed and drawn. */
typedef struct gf_ev_kind_info {
    const char *name;     /* event name, also in labels and tooltips */
    const char *category; /* Chrome "cat"                            */
    enum gf_report_lane lane;
    const char *colour; /* SVG fill                                */
    int out_bytes;      /* 1: the frame's output size is its bytes */
} gf_ev_kind_info;

extern const gf_ev_kind_info gf_ev_kinds[GF_EV_KINDS];

/* The name of each lane of a slot: "H2D", "kernel", "D2H", "host". */
extern const char *const gf_lane_names[GF_REPORT_LANES_PER_SLOT];

/* One frame of the TRACE document, checked. */
typedef struct gf_tframe {
    uint64_t frame_id, conn, in_bytes, out_bytes, pipeline, status;
    uint32_t shard; /* the shard that answered it; 0 when the document has none */
    uint32_t slot;  /* its slot in that shard                                  */
    uint32_t group; /* its lane group: shard * slots_per_shard + slot          */
    uint64_t arrived, claimed, submitted, done, drained, written;
} gf_tframe;

/* One event: a stage of frame `frame` from `begin` to `end` (ns after t0). */
typedef struct gf_tev {
    size_t frame;
    enum gf_ev_kind kind;
    uint64_t begin, end;
} gf_tev;

/* A TRACE document as the renderers draw it. */
typedef struct gf_tdoc {
    const cJSON *doc;
    gf_tframe *frames;
    size_t frame_count;
    gf_tev *events;
    size_t event_count;
    unsigned char *lane_used; /* [group_count * LANES_PER_SLOT]: lane has events  */
    uint32_t group_count;     /* highest lane group with an event + 1            */
    uint32_t shard_count;     /* the document's "shards", or more if a frame's
                                 shard says so; 1 for a document without shards */
    uint32_t slots_per_shard; /* the document's "slots", or the highest slot of a
                                 frame + 1 if more; at least 1                   */
    size_t lanes;             /* lanes with events                               */
    uint64_t begin, end;      /* span of the events; 0, 0 without events          */
} gf_tdoc;

/*
 * Parses and checks `trace` into `t`, which points into `trace` (the caller
 * keeps it alive) and owns its arrays: free it with gf_tdoc_free, also after
 * an error.  Returns 0, or -EINVAL/-ENOMEM with the reason in err[err_len].
 */
int gf_tdoc_parse(const cJSON *trace, gf_tdoc *t, char *err, size_t err_len);

/* Frees what gf_tdoc_parse allocated and zeroes `t`. */
void gf_tdoc_free(gf_tdoc *t);

/* The index of event `e`'s lane, group * GF_REPORT_LANES_PER_SLOT + lane:
 * its place in t->lane_used and in a renderer's per-lane arrays.  The Chrome
 * thread id of the lane is GF_REPORT_TID(group, lane). */
size_t gf_tdoc_lane(const gf_tdoc *t, const gf_tev *e);

/* Writes the name of slot `slot` of shard `shard` to `out`: "slot J" when
 * t has one shard, else "shard K slot J". */
void gf_tdoc_put_slot(const gf_tdoc *t, uint32_t shard, uint32_t slot, FILE *out);

/* Writes the name of lane group `group` (< t->group_count) as
 * gf_tdoc_put_slot does. */
void gf_tdoc_put_group(const gf_tdoc *t, uint32_t group, FILE *out);

#endif

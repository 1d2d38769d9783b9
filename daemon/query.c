/* SPDX-License-Identifier: MIT */
/*
 * LIST, STATS, TRACE and the region messages (query.h).
 */
#include "query.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gather.h"
#include "group.h"
#include "introspect.h"
#include "log.h"
#include "region.h"
#include "shard_state.h"

/* Queues a LIST, STATS or TRACE reply holding `doc` (consumed). */
static void reply_json(gf_conn *c, const gf_header *h, cJSON *doc) {
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) {
        char why[GF_ERROR_TEXT_MAX_BYTES];
        gf_errorf(why, sizeof why, "out of memory building the %s reply",
                  gf_msg_type_name(h->type));
        gf_conn_reject(c, h, GF_ERR_INTERNAL, why);
        return;
    }
    gf_conn_reply(c, h->type, h, GF_OK, text, strlen(text));
}

/* Pinning of a REGION_ADD's region ended: its reply, waiting in order in
 * the queue (`arg`; NULL when the connection went meanwhile), is made. */
static void region_ready(gf_region *r, void *arg) {
    gf_reply *q = arg;
    if (!q)
        return;
    gf_conn *c = q->conn;
    char *body;
    if (r->pin_status < 0) {
        gf_replyq_answer(&c->out, q, GF_MSG_ERROR, GF_ERR_BAD_REGION, strdup(r->why),
                         strlen(r->why));
        c->shard->stats.rejected[GF_ERR_BAD_REGION]++;
        gf_log_limited(&c->shard->group->close_log, GF_CLOSE_LOG_PER_S, gf_now_ns(), GF_LOG_INFO,
                       "connection %llu: region of %llu bytes refused: %s",
                       (unsigned long long)c->stream.id, (unsigned long long)r->bytes, r->why);
        c->region_count--;
        gf_region_unref(r);
    } else {
        gf_region_info info = {.region_id = r->id,
                               .flags = r->on_device ? GF_REGION_DEVICE
                                        : r->pinned  ? GF_REGION_PINNED
                                                     : 0,
                               .region_bytes = r->bytes};
        body = malloc(GF_REGION_INFO_BYTES);
        if (body)
            gf_region_info_encode(&info, (uint8_t *)body);
        /* Out of memory: an empty reply the client refuses, which closes it. */
        gf_replyq_answer(&c->out, q, r->on_device ? GF_MSG_DEVICE_REGION_ADD : GF_MSG_REGION_ADD,
                         GF_OK, body, GF_REGION_INFO_BYTES);
        gf_list_push_front(&c->regions, &r->link);
        c->shard->stats.regions[r->on_device].added++;
        GF_LOG_DBG("connection %llu: %sregion %u of %llu bytes added%s%s",
                   (unsigned long long)c->stream.id, r->on_device ? "device " : "", r->id,
                   (unsigned long long)r->bytes, r->pinned && !r->on_device ? ", pinned" : "",
                   r->on_device ? ", mapped" : "");
    }
    gf_conn_defer(c);
}

/* A REGION_ADD reply dropped while its region is being pinned: the region
 * goes when the pinning is done. */
static void region_add_release(gf_reply *q, int delivered) {
    gf_region *r = q->extra;
    (void)delivered;
    q->conn->region_count--;
    r->on_ready_arg = NULL;
    gf_region_unref(r);
}

/* REGION_ADD with the memfd `fd` it carried (-1: none; taken in any case),
 * or DEVICE_REGION_ADD with its CUDA fd and `payload` (its 16 bytes).  The
 * reply waits in the queue while the region is pinned or mapped off the
 * loop. */
static void region_add(gf_conn *c, const gf_header *h, int fd, const uint8_t *payload) {
    char why[GF_ERROR_TEXT_MAX_BYTES];
    if (c->shard->draining) {
        if (fd >= 0)
            close(fd);
        gf_conn_reject(c, h, GF_ERR_SHUTTING_DOWN, "the daemon is stopping; no new regions");
        return;
    }
    int device = h->type == GF_MSG_DEVICE_REGION_ADD;
    if (fd < 0) {
        gf_conn_reject(c, h, GF_ERR_BAD_REGION,
                       device ? "DEVICE_REGION_ADD came without a file descriptor: send the "
                                "cuMemExportToShareableHandle fd as SCM_RIGHTS with the "
                                "request's own 48 bytes"
                              : "REGION_ADD came without a file descriptor: send the memfd as "
                                "SCM_RIGHTS with the request's own bytes");
        return;
    }
    gf_region *r;
    uint32_t status;
    if (device) {
        gf_device_region d;
        if (gf_device_region_decode(payload, &d) < 0) {
            close(fd);
            gf_conn_reject(c, h, GF_ERR_BAD_REGION,
                           "DEVICE_REGION_ADD: reserved bytes 12..15 are not zero");
            return;
        }
        status = gf_region_open_device(c->shard, fd, &d, c->stream.next_region_id, c->region_count,
                                       &r, why, sizeof why);
    } else {
        status = gf_region_open(c->shard, fd, c->stream.next_region_id, c->region_count, &r, why,
                                sizeof why);
    }
    if (status != GF_OK) {
        gf_conn_reject(c, h, status, why);
        return;
    }
    gf_reply *q = gf_reply_pending(h, region_add_release, r);
    if (!q) {
        gf_region_unref(r);
        gf_conn_reject(c, h, GF_ERR_INTERNAL, "out of memory for a REGION_ADD reply");
        return;
    }
    c->stream.next_region_id++;
    c->region_count++;
    gf_conn_push(c, q);
    gf_region_pin(r, region_ready, q);
}

/* The region a REGION_REMOVE named is unpinned and unmapped: its reply
 * (`arg`) may go. */
static void region_released(void *arg) {
    gf_reply *q = arg;
    gf_replyq_answer(&q->conn->out, q, GF_MSG_REGION_REMOVE, GF_OK, NULL, 0);
    gf_conn_defer(q->conn);
}

/* A REGION_REMOVE reply dropped before its region was released. */
static void region_remove_release(gf_reply *q, int delivered) {
    gf_region *r = q->extra;
    (void)delivered;
    r->released_arg = NULL;
}

/* REGION_REMOVE of the region `h->pipeline_id` names: frames still in flight
 * on it finish first; then it is unpinned and unmapped, and only then is the
 * reply sent, so the memory is free (and STATS says so) when it arrives. */
static void region_remove(gf_conn *c, const gf_header *h) {
    for (gf_link *l = gf_list_front(&c->regions); l; l = gf_list_next(&c->regions, l)) {
        gf_region *r = gf_list_entry(l, gf_region, link);
        if (r->id != h->pipeline_id)
            continue;
        gf_reply *q = gf_reply_pending(h, region_remove_release, r);
        if (!q) {
            gf_conn_reject(c, h, GF_ERR_INTERNAL, "out of memory for a REGION_REMOVE reply");
            return;
        }
        gf_list_remove(&r->link);
        c->region_count--;
        c->shard->stats.regions[r->on_device].removed++;
        r->on_released = region_released;
        r->released_arg = q;
        gf_conn_push(c, q);
        gf_region_unref(r); /* may release it, and make q ready, at once */
        return;
    }
    char why[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(why, sizeof why, "region %u is not one of this connection's", h->pipeline_id);
    gf_conn_reject(c, h, GF_ERR_UNKNOWN_REGION, why);
}

/* Every shard's figures are in (gather.h): STATS's or TRACE's reply `arg`,
 * waiting in order in the queue (NULL: the connection went), is made. */
static void gathered(gf_shard *sh, const gf_snapshot *snaps, uint32_t n, uint32_t trace_frames,
                     void *arg) {
    gf_reply *q = arg;
    if (trace_frames != GF_SNAPSHOT_NO_TRACE) {
        /* A TRACE's place is free: every waiter tries again (one that is
         * throttled meanwhile must not keep the others waiting). */
        sh->gathers--;
        gf_link *l;
        while ((l = gf_list_pop_front(&sh->gather_waiters)))
            gf_conn_defer(gf_list_entry(l, gf_conn, gather_link));
    }
    if (!q)
        return;
    gf_conn *c = q->conn;
    c->gathering = 0;
    const gf_header *h = &q->request;
    cJSON *doc = !snaps                    ? NULL
                 : h->type == GF_MSG_STATS ? gf_stats_document(sh, snaps, n)
                                           : gf_trace_document(sh, snaps, n, trace_frames);
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (text) {
        gf_replyq_answer(&c->out, q, h->type, GF_OK, text, strlen(text));
    } else {
        char why[GF_ERROR_TEXT_MAX_BYTES];
        size_t len = gf_errorf(why, sizeof why, "out of memory building the %s reply",
                               gf_msg_type_name(h->type));
        gf_replyq_answer(&c->out, q, GF_MSG_ERROR, GF_ERR_INTERNAL, strdup(why), len);
        sh->stats.rejected[GF_ERR_INTERNAL]++;
    }
    gf_conn_defer(c);
}

/* A STATS or TRACE dropped while the shards answer: they answer no one. */
static void gather_release(gf_reply *q, int delivered) {
    (void)delivered;
    *(void **)q->extra = NULL;
}

/* The frames a TRACE that asks for `asked` (0: every one kept) is sent: at
 * most trace_frames, the newest of every shard's merged (gf_trace_document),
 * and no more than max_output_bytes_total holds, so that the reply can be
 * sent whole (one that could not would wait for room that never comes). */
static uint32_t trace_frames_sent(const gf_config *cfg, uint32_t asked) {
    uint32_t n = asked == 0 || asked > cfg->trace_frames ? cfg->trace_frames : asked;
    uint32_t fit = gf_trace_frames_within(cfg->max_output_bytes_total);
    n = n < fit ? n : fit > 0 ? fit : 1;
    return n < GF_SNAPSHOT_NO_TRACE ? n : GF_SNAPSHOT_NO_TRACE - 1;
}

/* STATS or TRACE of `frames` (trace_frames_sent; GF_SNAPSHOT_NO_TRACE for
 * STATS): a reply that waits in the queue, in order, while every shard's
 * figures are gathered. */
static void gather_reply(gf_conn *c, const gf_header *h, uint32_t frames) {
    gf_reply *q = gf_reply_pending(h, NULL, NULL);
    if (!q) {
        gf_conn_reject(c, h, GF_ERR_INTERNAL, "out of memory for a STATS or TRACE reply");
        return;
    }
    gf_conn_push(c, q);
    c->gathering = 1;
    if (h->type == GF_MSG_TRACE)
        c->shard->gathers++;
    void **slot = NULL;
    if (gf_gather(c->shard, frames, gathered, q, &slot) < 0) {
        gathered(c->shard, NULL, 0, frames, q);
    } else if (!q->ready) {
        /* Not answered at once (every other shard had stopped, or there is
         * one): it holds its place in the gathering until it is. */
        q->release = gather_release;
        q->extra = slot;
    }
}

/* Whether a STATS or TRACE of `c` may gather now: one of a connection at a
 * time, and GF_GATHERS_MAX TRACEs of a shard (each copies every shard's
 * trace); else it waits, and its connection goes on when its own ends or a
 * TRACE's does (gathered). */
static int may_gather(gf_conn *c, const gf_header *h) {
    gf_shard *sh = c->shard;
    if (c->gathering)
        return 0;
    if (h->type != GF_MSG_TRACE || sh->gathers < GF_GATHERS_MAX)
        return 1;
    if (!gf_linked(&c->gather_link))
        gf_list_push_back(&sh->gather_waiters, &c->gather_link);
    return 0;
}

int gf_query_answer(gf_conn *c, const gf_request *req, int fd) {
    gf_shard *sh = c->shard;
    const gf_header *h = &req->header;
    int doc = h->type == GF_MSG_LIST || h->type == GF_MSG_STATS || h->type == GF_MSG_TRACE;
    uint32_t trace_frames =
        h->type == GF_MSG_TRACE ? trace_frames_sent(sh->cfg, h->pipeline_id) : GF_SNAPSHOT_NO_TRACE;
    if (doc) {
        uint64_t bytes =
            h->type == GF_MSG_TRACE ? gf_trace_text_bytes(trace_frames) : GF_SMALL_REPLY_BYTES / 2;
        if (!gf_conn_may_build(c, bytes) || (h->type != GF_MSG_LIST && !may_gather(c, h)))
            return 0;
    }
    /* Whole, with its payload (conn_io.c waited for it): DEVICE_REGION_ADD's
     * 16 bytes, copied before the buffer moves on. */
    uint8_t payload[GF_DEVICE_REGION_BYTES] = {0};
    assert(h->payload_bytes <= sizeof payload);
    memcpy(payload, c->buf + c->buf_start + req->bytes, (size_t)h->payload_bytes);
    c->buf_start += req->bytes + (size_t)h->payload_bytes;
    gf_request_accept(&c->decoder, req);
    gf_request_advance(&c->decoder, h->payload_bytes);
    c->request_begun_ns = 0;
    switch (h->type) {
    case GF_MSG_LIST:
        sh->stats.requests_list++;
        reply_json(c, h, gf_list_document(sh));
        return 1;
    case GF_MSG_STATS:
        sh->stats.requests_stats++;
        gather_reply(c, h, GF_SNAPSHOT_NO_TRACE);
        return 1;
    case GF_MSG_TRACE:
        sh->stats.requests_trace++;
        gather_reply(c, h, trace_frames);
        return 1;
    default: break;
    }
    switch (h->type) {
    case GF_MSG_REGION_ADD:
    case GF_MSG_DEVICE_REGION_ADD: region_add(c, h, fd, payload); break;
    case GF_MSG_REGION_REMOVE: region_remove(c, h); break;
    default: assert(!"the decoder let through a type the daemon does not take");
    }
    return 1;
}

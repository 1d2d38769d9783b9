/* SPDX-License-Identifier: MIT */
/*
 * A frame's scheduling flags (frame_policy.h).  Loop thread.
 */
#include "frame_policy.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

uint32_t gf_frame_policy_admit(const gf_header *h, uint64_t now_ns, char *why, size_t why_len) {
    if (!(h->flags & GF_FLAG_DEADLINE))
        return GF_OK;
    uint64_t deadline = gf_deadline_decode(h->status, now_ns);
    if (deadline > now_ns)
        return GF_OK;
    gf_errorf(why, why_len, "the frame's deadline passed %llu us before it could be placed",
              (unsigned long long)((now_ns - deadline) / 1000u));
    return GF_ERR_DEADLINE_EXCEEDED;
}

uint32_t gf_frame_policy_expire(gf_slot *b, uint64_t now_ns) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        if (!f->batched)
            continue;
        f->expired = f->deadline_ns != 0 && f->deadline_ns <= now_ns;
        live += !f->expired;
    }
    return live;
}

/* Whether frame `f`, of the last reply of its connection, may be replaced
 * by the FRAME `h` (frame_policy.h). */
static int replaceable(const gf_frame *f, const gf_pipeline *p, const gf_header *h,
                       uint64_t in_bytes, int shm) {
    return f->latest && f->batched && f->slot->open && !f->slot->in_flight &&
           f->pipeline_id == h->pipeline_id && f->in_bytes == in_bytes &&
           (f->region != NULL) == (shm != 0) &&
           (f->on_device != 0) == ((h->flags & GF_FLAG_DEVICE) != 0) &&
           f->pipeline.stage_count == p->stage_count &&
           memcmp(f->pipeline.stages, p->stages, p->stage_count * sizeof p->stages[0]) == 0;
}

gf_frame *gf_frame_policy_supersede(gf_reply_queue *q, struct gf_conn *conn, const gf_pipeline *p,
                                    const gf_header *h, uint64_t in_bytes, int shm,
                                    uint64_t arrived_ns, gf_stats *st) {
    gf_reply *old =
        gf_list_empty(&q->replies) ? NULL : gf_list_entry(q->replies.prev, gf_reply, link);
    gf_frame *f = old ? old->frame : NULL;
    if (!(h->flags & GF_FLAG_LATEST) || !f || !replaceable(f, p, h, in_bytes, shm))
        return NULL;
    gf_header was = {.version = f->version, .frame_id = f->frame_id, .pipeline_id = f->pipeline_id};
    char *text = malloc(GF_ERROR_TEXT_MAX_BYTES);
    size_t len = text ? gf_errorf(text, GF_ERROR_TEXT_MAX_BYTES,
                                  "frame %llu of this connection took its place before it ran",
                                  (unsigned long long)h->frame_id)
                      : 0;
    gf_reply *answer = gf_reply_loose(GF_MSG_ERROR, &was, GF_ERR_SUPERSEDED, text, len);
    if (!answer)
        return NULL; /* out of memory: the new frame is placed as any */
    /* The old request's answer where its reply stood; the frame's reply,
     * for the new request, at the back. */
    gf_replyq_replace(q, old, answer);
    gf_replyq_release(q, old, 0);
    gf_replyq_push(q, old, conn);
    st->rejected[GF_ERR_SUPERSEDED]++;
    st->frames_failed++;
    f->frame_id = h->frame_id;
    f->version = h->version;
    f->arrived_ns = arrived_ns;
    f->deadline_ns = h->flags & GF_FLAG_DEADLINE ? gf_deadline_decode(h->status, arrived_ns) : 0;
    f->expired = 0;
    f->status = GF_OK;
    return f;
}

int gf_frame_policy_newer_read(const gf_header *h, const uint8_t *payload, const uint8_t *next,
                               size_t avail) {
    gf_header n;
    if (!(h->flags & GF_FLAG_LATEST) ||
        gf_header_parse(next, avail, GF_ROLE_DAEMON, h->payload_bytes, &n) != (int)GF_HEADER_BYTES)
        return 0;
    if (n.type != GF_MSG_FRAME || n.pipeline_id != h->pipeline_id || !(n.flags & GF_FLAG_LATEST) ||
        (n.flags & GF_FLAGS_BY_REF) != (h->flags & GF_FLAGS_BY_REF) ||
        n.payload_bytes != h->payload_bytes)
        return 0;
    if (!(h->flags & GF_FLAGS_BY_REF))
        return 1;
    gf_shm_frame mine, theirs;
    return avail >= GF_HEADER_BYTES + GF_SHM_FRAME_BYTES &&
           gf_shm_frame_decode(payload, &mine) == 0 &&
           gf_shm_frame_decode(next + GF_HEADER_BYTES, &theirs) == 0 &&
           mine.in_bytes == theirs.in_bytes;
}

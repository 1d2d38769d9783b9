/* SPDX-License-Identifier: MIT */
#include "slots.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void slot_put(gf_slot_ring *ring, gf_slot *slot) {
    assert(ring->free_count < ring->count);
    assert(!slot->in_flight && !slot->open && slot->frames_held == 0);
    slot->frame_count = 0;
    slot->used_bytes = 0;
    slot->owner = NULL;
    slot->urgent = 0;
    gf_list_push_back(&ring->free, &slot->free_link);
    ring->free_count++;
}

int gf_slot_ring_init(gf_slot_ring *ring, gf_slot *slots, uint32_t count) {
    ring->slots = slots;
    ring->count = count;
    ring->in_capacity_bytes = count ? slots[0].in_capacity_bytes : 0;
    ring->out_capacity_bytes = count ? slots[0].out_capacity_bytes : 0;
    ring->scratch_capacity_bytes = count ? slots[0].scratch_capacity_bytes : 0;
    gf_list_init(&ring->free);
    ring->free_count = 0;
    for (uint32_t i = 0; i < count; i++) {
        gf_link_init(&slots[i].free_link);
        gf_link_init(&slots[i].open_link);
        slots[i].frames = calloc(GF_SLOT_FRAMES_MAX, sizeof *slots[i].frames);
        if (slots[i].frames == NULL) {
            gf_slot_ring_free(ring);
            return -ENOMEM;
        }
        for (uint32_t k = 0; k < GF_SLOT_FRAMES_MAX; k++)
            slots[i].frames[k].slot = &slots[i];
        slot_put(ring, &slots[i]);
    }
    return 0;
}

void gf_slot_ring_free(gf_slot_ring *ring) {
    for (uint32_t i = 0; ring->slots && i < ring->count; i++) {
        free(ring->slots[i].frames);
        ring->slots[i].frames = NULL;
    }
}

gf_slot *gf_slot_claim(gf_slot_ring *ring, struct gf_sched_client *owner) {
    gf_link *l = gf_list_pop_front(&ring->free);
    if (!l)
        return NULL;
    gf_slot *s = gf_list_entry(l, gf_slot, free_link);
    ring->free_count--;
    s->open = 1;
    s->owner = owner;
    return s;
}

int gf_slot_close(gf_slot_ring *ring, gf_slot *s) {
    assert(s->open);
    s->open = 0;
    if (s->frames_held > 0)
        return 0;
    slot_put(ring, s);
    return 1;
}

void gf_slot_hold(gf_slot *s) {
    s->frames_held++;
}

int gf_slot_unhold(gf_slot_ring *ring, gf_slot *s) {
    assert(s->frames_held > 0);
    if (--s->frames_held > 0 || s->open || s->in_flight)
        return 0;
    slot_put(ring, s);
    return 1;
}

void gf_frame_reply(gf_frame *f, const char *refused_by) {
    gf_header req = {.version = f->version, .frame_id = f->frame_id, .pipeline_id = f->pipeline_id};
    if (f->status == GF_ERR_DEADLINE_EXCEEDED) {
        /* Its result is not wanted any more (frame_policy.h). */
        char *text = malloc(GF_ERROR_TEXT_MAX_BYTES);
        size_t len = text ? gf_errorf(text, GF_ERROR_TEXT_MAX_BYTES,
                                      "the frame's deadline passed before it went to the engine")
                          : 0;
        gf_reply_error(&f->reply, &req, GF_ERR_DEADLINE_EXCEEDED, text, len);
    } else if (refused_by != NULL) {
        /* Out of memory leaves the ERROR without its text, not the frame
         * without a reply. */
        char *text = malloc(GF_ERROR_TEXT_MAX_BYTES);
        size_t len = text ? gf_errorf(text, GF_ERROR_TEXT_MAX_BYTES,
                                      "the %s engine could not start this frame", refused_by)
                          : 0;
        gf_reply_error(&f->reply, &req, (uint32_t)f->status, text, len);
    } else if (f->status == GF_OK && f->region) {
        gf_reply_result(&f->reply, &req, f->shm_result, GF_SHM_RESULT_BYTES,
                        f->on_device ? GF_FLAG_DEVICE : GF_FLAG_SHM);
    } else if (f->status == GF_OK) {
        gf_reply_result(&f->reply, &req, f->out_host, f->out_bytes, 0);
    } else {
        gf_reply_error(&f->reply, &req, (uint32_t)f->status, NULL, 0);
    }
}

int gf_frame_release(gf_slot_ring *ring, gf_frame *f) {
    assert(!f->batched);
    /* The frame is over: a plugin stage that a reload removed may go now
     * (another shard's frame's stages are that frame's: gf_slot_add_pooled). */
    if (f->pooled_from == NULL)
        gf_pipeline_release(&f->pipeline);
    f->pipeline.stage_count = 0;
    return gf_slot_unhold(ring, f->slot);
}

/* Whether a frame of `in_bytes` and stage lengths stage_bytes[0..stages)
 * fits the buffers of a slot like `s` at offset `off`: input, result and
 * intermediate results all start there, each within its own buffer.  Its
 * largest length goes to *extent. */
static int fits_at(const gf_slot *s, uint64_t off, uint32_t stages, uint64_t in_bytes,
                   const uint64_t stage_bytes[GF_STAGES_MAX], uint64_t *extent) {
    uint32_t last = stages - 1;
    *extent = in_bytes;
    if (off + in_bytes > s->in_capacity_bytes || off + stage_bytes[last] > s->out_capacity_bytes)
        return 0;
    for (uint32_t k = 0; k <= last; k++) {
        if (k < last && off + stage_bytes[k] > s->scratch_capacity_bytes)
            return 0;
        if (stage_bytes[k] > *extent)
            *extent = stage_bytes[k];
    }
    return 1;
}

int gf_slot_ring_fits_two(const gf_slot_ring *ring, uint32_t stages, uint64_t in_bytes,
                          const uint64_t stage_bytes[GF_STAGES_MAX]) {
    uint64_t extent;
    return ring->count > 0 && fits_at(&ring->slots[0], 0, stages, in_bytes, stage_bytes, &extent) &&
           fits_at(&ring->slots[0], gf_frame_align(extent), stages, in_bytes, stage_bytes, &extent);
}

/* Whether a frame of pipeline `id` with `p`'s stages may join the batch
 * of `s`, which has frames: one pipeline a batch, as it was when the batch
 * began (a reload in between may have given its id other stages). */
static int same_pipeline(const gf_slot *s, uint32_t id, const gf_pipeline *p) {
    const gf_pipeline *first = &s->frames[0].pipeline;
    return s->frames[0].pipeline_id == id && first->stage_count == p->stage_count &&
           memcmp(first->stages, p->stages, p->stage_count * sizeof p->stages[0]) == 0;
}

/* The next frame record of open slot `s`, for a frame of pipeline `p`
 * (its id `id`) with `in_bytes` of input and stage lengths stage_bytes[],
 * placed after the frames it has, in the slot's buffers, with every field
 * that does not depend on where the frame came from set; NULL when it
 * does not fit (gf_slot_add).  `retain`: the copy of `p` takes references
 * on its plugin stages (else it borrows those of the frame it stands for,
 * which outlives it). */
static gf_frame *place(gf_slot *s, const gf_pipeline *p, uint32_t id, uint64_t in_bytes,
                       const uint64_t stage_bytes[GF_STAGES_MAX], int retain) {
    assert(s->open && p->max_batch_frames >= 1 && p->max_batch_frames <= GF_SLOT_FRAMES_MAX);
    if (s->frame_count > 0 &&
        (s->frame_count >= s->frames[0].pipeline.max_batch_frames || !same_pipeline(s, id, p)))
        return NULL;
    uint64_t off = gf_frame_align(s->used_bytes), extent;
    if (!fits_at(s, off, p->stage_count, in_bytes, stage_bytes, &extent))
        return NULL;
    uint32_t last = p->stage_count - 1;
    gf_frame *f = &s->frames[s->frame_count++];
    s->frames_held++;
    s->used_bytes = off + extent;
    /* Only the stages in use are copied: usually one. */
    f->pipeline.id = p->id;
    memcpy(f->pipeline.name, p->name, sizeof p->name);
    f->pipeline.stage_count = p->stage_count;
    f->pipeline.max_batch_frames = p->max_batch_frames;
    f->pipeline.max_batch_delay_us = p->max_batch_delay_us;
    memcpy(f->pipeline.stages, p->stages, p->stage_count * sizeof p->stages[0]);
    memcpy(f->stage_bytes, stage_bytes, p->stage_count * sizeof stage_bytes[0]);
    if (retain)
        gf_pipeline_retain(&f->pipeline);
    f->offset = off;
    f->in_host = s->in_host + off;
    f->out_host = s->out_host + off;
    f->src = f->in_host;
    f->dst = f->out_host;
    f->region = NULL;
    f->on_device = 0;
    f->pipeline_id = id;
    f->in_bytes = in_bytes;
    f->out_bytes = stage_bytes[last];
    f->status = GF_OK;
    memset(&f->stages, 0, sizeof f->stages);
    f->claimed_ns = gf_now_ns();
    f->submitted_ns = f->done_ns = f->drained_ns = f->whole_ns = 0;
    f->submission = 0;
    f->submitted_on = 0;
    f->pooled_from = NULL;
    f->batched = 0;
    f->deadline_ns = 0;
    f->latest = 0;
    f->expired = 0;
    memset(&f->reply, 0, sizeof f->reply);
    gf_link_init(&f->reply.link);
    f->reply.frame = f;
    return f;
}

gf_frame *gf_slot_add(gf_slot *s, struct gf_sched_client *client, const gf_pipeline *p,
                      const gf_header *h, uint64_t in_bytes,
                      const uint64_t stage_bytes[GF_STAGES_MAX], uint64_t arrived_ns) {
    gf_frame *f = place(s, p, h->pipeline_id, in_bytes, stage_bytes, 1);
    if (f == NULL)
        return NULL;
    f->client = client;
    if (s->owner != client)
        s->owner = NULL; /* another connection's frame is in it: no one's slot */
    f->frame_id = h->frame_id;
    f->version = h->version;
    f->arrived_ns = arrived_ns;
    if (h->flags & GF_FLAG_DEADLINE)
        f->deadline_ns = gf_deadline_decode(h->status, arrived_ns ? arrived_ns : f->claimed_ns);
    f->latest = (h->flags & GF_FLAG_LATEST) != 0;
    return f;
}

int gf_slot_takes(const gf_slot *s, const gf_slot *from, uint32_t max_frames) {
    if (from->frame_count == 0)
        return 0;
    const gf_frame *g = &from->frames[0];
    uint32_t most = g->pipeline.max_batch_frames;
    if (s->frame_count > 0) {
        if (!same_pipeline(s, g->pipeline_id, &g->pipeline))
            return 0;
        most = s->frames[0].pipeline.max_batch_frames;
    }
    most = max_frames < most ? max_frames : most;
    if (s->frame_count + from->frame_count > most)
        return 0;
    uint64_t used = s->used_bytes, extent;
    for (uint32_t i = 0; i < from->frame_count; i++) {
        const gf_frame *h = &from->frames[i];
        uint64_t off = gf_frame_align(used);
        if (!fits_at(s, off, h->pipeline.stage_count, h->in_bytes, h->stage_bytes, &extent))
            return 0;
        used = off + extent;
    }
    return 1;
}

gf_frame *gf_slot_add_pooled(gf_slot *s, gf_frame *from) {
    /* `from` holds its stages until its shard releases it, after this
     * frame is done with (pool.h): a reference each way per frame on a
     * count every shard's thread touches is not taken. */
    gf_frame *f =
        place(s, &from->pipeline, from->pipeline_id, from->in_bytes, from->stage_bytes, 0);
    if (f == NULL)
        return NULL;
    f->client = NULL;
    s->owner = NULL;
    f->src = from->src;
    f->dst = from->dst;
    f->region = from->region; /* its region's copies are the engine's to make */
    f->frame_id = from->frame_id;
    f->version = from->version;
    f->arrived_ns = from->arrived_ns;
    /* Whole here now: a batch it opens waits its pipeline's delay for this
     * shard's frames, as one opened by a frame of its own would. */
    f->whole_ns = f->claimed_ns;
    f->pooled_from = from;
    f->batched = from->batched; /* one taken back still runs, unanswered */
    return f;
}

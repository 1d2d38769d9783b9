#include "slots.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "util.h"

void gf_slot_ring_init(gf_slot_ring *ring, gf_slot *slots, uint32_t count) {
    ring->slots = slots;
    ring->count = count;
    ring->free_head = ring->free_tail = NULL;
    ring->free_count = 0;
    for (uint32_t i = 0; i < count; i++)
        gf_slot_release(ring, &slots[i]);
}

gf_slot *gf_slot_claim(gf_slot_ring *ring) {
    gf_slot *s = ring->free_head;
    if (!s)
        return NULL;
    ring->free_head = s->next_free;
    if (!ring->free_head)
        ring->free_tail = NULL;
    s->next_free = NULL;
    ring->free_count--;
    return s;
}

void gf_slot_release(gf_slot_ring *ring, gf_slot *slot) {
    assert(ring->free_count < ring->count);
    assert(!slot->in_flight);
    /* The frame is over: a plugin stage that a reload removed may go now. */
    gf_pipeline_release(&slot->pipeline);
    slot->pipeline.stage_count = 0;
    slot->next_free = NULL;
    if (ring->free_tail)
        ring->free_tail->next_free = slot;
    else
        ring->free_head = slot;
    ring->free_tail = slot;
    ring->free_count++;
}

void gf_slot_assign(gf_slot *s, const gf_pipeline *p, const gf_header *h,
                    const uint64_t stage_bytes[GF_STAGES_MAX], uint64_t arrived_ns) {
    uint64_t out_bytes = stage_bytes[p->stage_count - 1];
    /* Only the stages in use are copied: usually one. */
    s->pipeline.id = p->id;
    memcpy(s->pipeline.name, p->name, sizeof p->name);
    s->pipeline.stage_count = p->stage_count;
    memcpy(s->pipeline.stages, p->stages, p->stage_count * sizeof p->stages[0]);
    memcpy(s->stage_bytes, stage_bytes, p->stage_count * sizeof stage_bytes[0]);
    gf_pipeline_retain(&s->pipeline);
    s->pipeline_id = h->pipeline_id;
    s->frame_id = h->frame_id;
    s->version = h->version;
    s->src = s->in_host;
    s->dst = s->out_host;
    s->region = NULL;
    s->in_bytes = h->payload_bytes;
    s->out_bytes = out_bytes;
    s->status = GF_OK;
    memset(&s->stages, 0, sizeof s->stages);
    s->arrived_ns = arrived_ns;
    s->claimed_ns = gf_now_ns();
    s->submitted_ns = s->done_ns = s->drained_ns = 0;
    memset(&s->reply, 0, sizeof s->reply);
    s->reply.slot = s;
}

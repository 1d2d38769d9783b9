/* SPDX-License-Identifier: MIT */
/*
 * A FRAME's admission (admit.h): checked, refused or placed in a slot, its
 * reply queued and its staged payload taken.
 */
#include "admit.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "frame_policy.h"
#include "group.h"
#include "loopprof.h"
#include "region.h"
#include "shard_state.h"

/* What the checks of one FRAME header found. */
typedef struct admission {
    uint32_t status;                     /* GF_OK, or why it is refused     */
    char why[GF_ERROR_TEXT_MAX_BYTES];   /* the refusal's text              */
    int shm;                             /* by reference (GF_FLAG_SHM or
                                            GF_FLAG_DEVICE)                 */
    int device;                          /* on the device (GF_FLAG_DEVICE)  */
    int staged;                          /* its payload is in the buffer    */
    uint64_t in_bytes;                   /* its input                       */
    int64_t out_bytes;                   /* its result                      */
    uint64_t stage_bytes[GF_STAGES_MAX]; /* each stage's output             */
    gf_shm_frame desc;                   /* shm: the descriptor             */
    gf_region *region;                   /* shm: the region it names        */
} admission;

/* Checks `in_bytes` of input for pipeline `pipeline_id` against the
 * pipeline's rule and the slot's buffers, once: the result against its
 * output buffer, a chain's intermediate results against its scratch. */
static uint32_t check_lengths(const gf_conn *c, uint32_t pipeline_id, admission *a) {
    const gf_config *cfg = c->shard->cfg;
    const gf_slot_ring *ring = &c->shard->sched.ring;
    if (pipeline_id >= cfg->pipeline_count) {
        gf_errorf(a->why, sizeof a->why,
                  "pipeline id %u is not configured (ids 0..%zu; send LIST to see them)",
                  pipeline_id, cfg->pipeline_count - 1);
        return GF_ERR_UNKNOWN_PIPELINE;
    }
    const gf_pipeline *p = &cfg->pipelines[pipeline_id];
    char rule[256];
    a->out_bytes = gf_pipeline_stage_lengths(p, a->in_bytes, a->stage_bytes, rule, sizeof rule);
    if (a->out_bytes < 0) {
        gf_errorf(a->why, sizeof a->why, "pipeline %s: %s", p->name, rule);
        return GF_ERR_BAD_LENGTH;
    }
    if ((uint64_t)a->out_bytes > ring->out_capacity_bytes) {
        gf_errorf(a->why, sizeof a->why,
                  "pipeline %s: output of %lld bytes exceeds the slot's %llu", p->name,
                  (long long)a->out_bytes, (unsigned long long)ring->out_capacity_bytes);
        return GF_ERR_BAD_LENGTH;
    }
    /* A plugin's lengths are its own: one beyond what its max_output_bytes
     * promised at load must not run past the scratch. */
    for (uint32_t k = 0; k + 1 < p->stage_count; k++)
        if (a->stage_bytes[k] > ring->scratch_capacity_bytes) {
            gf_errorf(a->why, sizeof a->why,
                      "pipeline %s: stage %u's output of %llu bytes exceeds the slot's %llu of "
                      "scratch",
                      p->name, k, (unsigned long long)a->stage_bytes[k],
                      (unsigned long long)ring->scratch_capacity_bytes);
            return GF_ERR_BAD_LENGTH;
        }
    return GF_OK;
}

/* Whether device frame `a`'s region lies on this shard's device, and its
 * pipeline runs there (move.h sends it to the region's device first, when
 * the pipeline runs there). */
static uint32_t check_device(const gf_conn *c, const gf_header *h, admission *a) {
    int here = c->shard->self->device, there = a->region->mapping.device;
    const gf_pipeline *p = &c->shard->cfg->pipelines[h->pipeline_id];
    if (there == here && gf_device_runs(here, p->devices))
        return GF_OK;
    gf_errorf(a->why, sizeof a->why, "pipeline %s does not run on device %d, where region %u lies",
              p->name, there, a->region->id);
    return GF_ERR_BAD_DESCRIPTOR;
}

/* Checks a shm or device frame's descriptor `payload`: its region, of the
 * kind its flag says, and every offset and length before anything is
 * enqueued, without overflow. */
static uint32_t check_shm(const gf_conn *c, const gf_header *h, const uint8_t *payload,
                          admission *a) {
    if (gf_shm_frame_decode(payload, &a->desc) < 0) {
        gf_errorf(a->why, sizeof a->why, "shm descriptor: reserved bytes 4..7 are not zero");
        return GF_ERR_BAD_DESCRIPTOR;
    }
    a->region = gf_conn_region(c, a->desc.region_id);
    if (!a->region) {
        gf_errorf(a->why, sizeof a->why,
                  "region %u is not one of this connection's (REGION_ADD first)",
                  a->desc.region_id);
        return GF_ERR_UNKNOWN_REGION;
    }
    a->in_bytes = a->desc.in_bytes;
    if (a->in_bytes > c->shard->cfg->max_frame_bytes) {
        gf_errorf(a->why, sizeof a->why, "shm frame of %llu bytes exceeds max_frame_bytes %llu",
                  (unsigned long long)a->in_bytes,
                  (unsigned long long)c->shard->cfg->max_frame_bytes);
        return GF_ERR_BAD_LENGTH;
    }
    if (a->region->on_device != a->device) {
        gf_errorf(a->why, sizeof a->why,
                  "region %u is a %s region: name it with the %s flag (0x%04x)", a->region->id,
                  a->region->on_device ? "device" : "shared-memory",
                  a->region->on_device ? "DEVICE" : "SHM",
                  a->region->on_device ? GF_FLAG_DEVICE : GF_FLAG_SHM);
        return GF_ERR_BAD_DESCRIPTOR;
    }
    uint32_t status = check_lengths(c, h->pipeline_id, a);
    if (status != GF_OK)
        return status;
    if ((a->device ? gf_device_frame_check : gf_shm_frame_check)(
            &a->desc, a->region->bytes, (uint64_t)a->out_bytes, a->why, sizeof a->why) < 0)
        return GF_ERR_BAD_DESCRIPTOR;
    return a->device ? check_device(c, h, a) : GF_OK;
}

/* Everything a FRAME header must pass before it may take a place. */
static uint32_t check(const gf_conn *c, const gf_request *req, admission *a) {
    const gf_header *h = &req->header;
    a->shm = (h->flags & (GF_FLAG_SHM | GF_FLAG_DEVICE)) != 0;
    a->device = (h->flags & GF_FLAG_DEVICE) != 0;
    a->staged = a->shm || h->payload_bytes <= GF_STAGED_PAYLOAD_MAX_BYTES;
    a->in_bytes = h->payload_bytes;
    if (c->shard->draining) {
        /* Stopping: every frame read gets an answer, none runs. */
        gf_errorf(a->why, sizeof a->why, "the daemon is stopping; frame not run");
        return GF_ERR_SHUTTING_DOWN;
    }
    uint32_t late = gf_frame_policy_admit(h, gf_now_ns(), a->why, sizeof a->why);
    if (late != GF_OK)
        return late;
    if (a->shm)
        return check_shm(c, h, c->buf + c->buf_start + req->bytes, a);
    return check_lengths(c, h->pipeline_id, a);
}

/* A frame was taken (placed, parked or held): counted received, under the
 * class admission gave it. */
static void count_received(gf_conn *c) {
    c->shard->stats.frames_received++;
    c->shard->stats.class_frames[c->sched.priority % GF_CLASS_COUNT_]++;
}

/* The class of the frame `h` (config.h, gf_priority_of): a few comparisons
 * per frame, so that a reload applies at the connection's next frame. */
static uint8_t frame_class(const gf_conn *c, const gf_header *h) {
    return (uint8_t)gf_priority_of(&c->shard->cfg->priorities, c->stream.uid, c->stream.gid,
                                   (h->flags & GF_FLAG_CLASS_MASK) >> GF_FLAG_CLASS_SHIFT);
}

/* The frame `req` is refused: its payload will be skipped. */
static void refuse(gf_conn *c, const gf_request *req, const admission *a) {
    c->shard->stats.frames_received++;
    c->shard->stats.frames_failed++;
    c->header_seen_ns = 0;
    c->buf_start += req->bytes;
    gf_request_refuse(&c->decoder, req);
    if (!c->decoder.skip_left)
        c->request_begun_ns = 0;
    gf_conn_reject(c, &req->header, a->status, a->why);
}

/* A place for the frame: a whole one in its pipeline's open batch, shared
 * with other connections' (gf_sched_join); one whose payload is read in
 * place in an empty slot of its own.  Either way a frame received in place
 * before it goes to the engine first.  NULL: the connection waits for a
 * slot. */
static gf_frame *place(gf_conn *c, const gf_header *h, const admission *a) {
    gf_sched *s = &c->shard->sched;
    const gf_pipeline *p = &c->shard->cfg->pipelines[h->pipeline_id];
    if (a->staged)
        return gf_sched_join(s, &c->sched, p, h, a->in_bytes, a->stage_bytes, c->header_seen_ns);
    gf_slot *b = gf_sched_claim(s, &c->sched, 1);
    if (!b)
        return NULL; /* no slot now: reading stops until one is granted (backpressure) */
    /* An empty slot takes any frame the checks passed. */
    gf_frame *f = gf_slot_add(b, &c->sched, p, h, a->in_bytes, a->stage_bytes, c->header_seen_ns);
    assert(f != NULL);
    return f;
}

/* Frame `f`'s payload is all in: it joins its slot's batch, which goes to
 * the engine after the loop's I/O (a shared one) or when the connection's
 * read is processed (its own). */
static void frame_whole(gf_conn *c, gf_frame *f) {
    /* Its last bytes came now (read in place), or with its header. */
    f->whole_ns = c->frame == f ? c->receive_progress_ns : f->claimed_ns;
    if (c->frame == f) {
        c->frame = NULL;
        gf_sched_received(&c->shard->sched, &c->sched);
    }
    c->request_begun_ns = 0;
    f->batched = 1;
}

/* By reference: the engine copies straight from and into the region, or
 * (on the device) runs the pipeline on it in place. */
static void bind_region(gf_conn *c, gf_frame *f, const admission *a) {
    gf_region_ref(a->region);
    f->region = a->region;
    f->in_bytes = a->desc.in_bytes;
    f->src = a->region->base + a->desc.in_offset;
    f->dst = a->region->base + a->desc.out_offset;
    f->on_device = a->device;
    gf_shm_result res = {.region_id = a->region->id,
                         .out_offset = a->desc.out_offset,
                         .out_bytes = (uint64_t)a->out_bytes};
    gf_shm_result_encode(&res, f->shm_result);
    frame_whole(c, f);
}

/* The same, its descriptor taken from the buffer. */
static void bind_shm(gf_conn *c, gf_frame *f, const admission *a) {
    c->buf_start += GF_SHM_FRAME_BYTES;
    gf_request_advance(&c->decoder, GF_SHM_FRAME_BYTES);
    bind_region(c, f, a);
}

/* Whatever part of the payload came in with the header (at most
 * GF_STAGED_PAYLOAD_MAX_BYTES) is copied; the rest is read in place. */
static void take_staged(gf_conn *c, gf_frame *f) {
    c->frame = f;
    c->receive_progress_ns = gf_now_ns();
    gf_request body;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &body);
    if (body.kind == GF_REQ_PAYLOAD) {
        int prof = gf_prof_enter(GF_PROF_COPY);
        memcpy(f->in_host, c->buf + c->buf_start, body.bytes);
        gf_prof_leave(prof);
        c->buf_start += body.bytes;
        gf_request_advance(&c->decoder, body.bytes);
    }
    if (!gf_request_in_payload(&c->decoder))
        frame_whole(c, f);
}

/* Whether a payload to be read in place goes to memory instead: when it
 * would wait for its slot while another client's payload is received into
 * one or others wait (a slow sender ahead of it must not make it wait,
 * issue 31), and the daemon's max_input_bytes_total has room.  A client
 * alone waits for its own frames' slots, as before: no copy. */
static int park_instead(gf_conn *c, const gf_request *req) {
    const gf_sched *s = &c->shard->sched;
    return !gf_sched_can_receive(s, &c->sched) &&
           (s->receiving > 0 || gf_sched_others_wait(s, &c->sched)) &&
           gf_conn_park(c, &req->header, c->header_seen_ns) == 0;
}

/* Whether a payload to be read in place goes to memory instead, to join
 * its pipeline's batch once whole as a small frame does: its pipeline
 * batches and has a stage that is not elementwise (a model, an image's
 * resize: a batch saves calls; elementwise kinds run a frame in one launch
 * anyway, and the copy would cost more), has a batch open or on the
 * engine (an idle pipeline's frame is read in place: a lone client pays no
 * copy), the payload is at most GF_BATCH_JOIN_BYTES, two such frames fit
 * a slot, and max_input_bytes_total has room.  So many clients' images
 * share a model's calls (issue 33: 16 clients of 150 KB images got one
 * frame a submission). */
static int park_to_join(gf_conn *c, const gf_request *req, const admission *a) {
    const gf_header *h = &req->header;
    const gf_pipeline *p = &c->shard->cfg->pipelines[h->pipeline_id];
    return p->max_batch_frames > 1 && !gf_pipeline_elementwise(p) &&
           a->in_bytes <= GF_BATCH_JOIN_BYTES &&
           gf_slot_ring_fits_two(&c->shard->sched.ring, p->stage_count, a->in_bytes,
                                 a->stage_bytes) &&
           gf_sched_pipeline_busy(&c->shard->sched, h->pipeline_id) &&
           gf_conn_park(c, h, c->header_seen_ns) == 0;
}

/* Takes the bytes of the parked payload that came with its header. */
static void take_parked(gf_conn *c) {
    c->receive_progress_ns = gf_now_ns();
    gf_request body;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &body);
    if (body.kind == GF_REQ_PAYLOAD) {
        memcpy(c->parked, c->buf + c->buf_start, body.bytes);
        c->buf_start += body.bytes;
        gf_request_advance(&c->decoder, body.bytes);
    }
}

/* A newest-frame-only FRAME takes the place of the connection's previous
 * one, if that still waits in its batch (frame_policy.h): its input goes
 * where the old one's was, and the batch's wait is not restarted.  Returns
 * 1 when it did, 0 when the frame is to be placed as any. */
static int supersede(gf_conn *c, const gf_request *req, const admission *a) {
    const gf_header *h = &req->header;
    gf_frame *f =
        gf_frame_policy_supersede(&c->out, c, &c->shard->cfg->pipelines[h->pipeline_id], h,
                                  a->in_bytes, a->shm, c->header_seen_ns, &c->shard->stats);
    if (f == NULL)
        return 0;
    uint64_t whole = f->whole_ns;
    count_received(c);
    c->buf_start += req->bytes;
    gf_request_accept(&c->decoder, req);
    c->header_seen_ns = 0;
    if (a->shm) {
        gf_region_unref(f->region);
        bind_shm(c, f, a);
    } else {
        take_staged(c, f);
    }
    f->whole_ns = whole;
    return 1;
}

/* ---- held: a newest-only frame waiting for a slot (admit.h) ---------------------- */

/* Takes the whole FRAME `req` (its payload, or descriptor, staged in the
 * buffer) out of the buffer into the held memory, its request consumed and
 * counted received.  Returns 1, or 0 without memory (it waits in the
 * buffer, as any frame does). */
static int hold(gf_conn *c, const gf_request *req) {
    if (!c->held && !(c->held = malloc(GF_STAGED_PAYLOAD_MAX_BYTES)))
        return 0;
    uint64_t payload = req->header.payload_bytes;
    memcpy(c->held, c->buf + c->buf_start + req->bytes, payload);
    c->held_header = req->header;
    c->held_arrived_ns = c->header_seen_ns;
    c->holding = 1;
    count_received(c);
    c->buf_start += req->bytes + payload;
    gf_request_accept(&c->decoder, req);
    gf_request_advance(&c->decoder, payload);
    c->header_seen_ns = 0;
    c->request_begun_ns = 0;
    return 1;
}

/* Whether the header `h` may be the held frame's successor: a newest-only
 * FRAME of its pipeline, transport and length (the whole check is
 * gf_frame_policy_newer_read's, once its descriptor is in). */
static int may_succeed(const gf_conn *c, const gf_header *h) {
    const gf_header *held = &c->held_header;
    return h->type == GF_MSG_FRAME && (h->flags & GF_FLAG_LATEST) &&
           h->pipeline_id == held->pipeline_id && h->payload_bytes == held->payload_bytes &&
           (h->flags & GF_FLAGS_BY_REF) == (held->flags & GF_FLAGS_BY_REF);
}

/* The request at the front of the buffer, as the decoder sees it. */
static gf_request front(const gf_conn *c) {
    gf_request req;
    gf_request_next(&c->decoder, c->buf + c->buf_start, c->buf_end - c->buf_start, &req);
    return req;
}

int gf_admit_reads_on(const gf_conn *c) {
    if (!c->holding || c->shard->draining || c->stream.pending_fd >= 0)
        return 0;
    gf_request req = front(c);
    if (req.kind == GF_REQ_MORE)
        return 1;
    /* A successor whose payload is still arriving; anything else waits. */
    return req.kind == GF_REQ_HEADER && may_succeed(c, &req.header) &&
           c->buf_end - c->buf_start < req.bytes + req.header.payload_bytes;
}

/* The held frame still waits: the frame at the front of the buffer, whole,
 * takes its place if it is its successor and would be admitted; the held
 * one is answered superseded at once (no reply of the connection's is
 * queued after it).  Returns 1 when it did. */
static int supersede_held(gf_conn *c) {
    gf_request req = front(c);
    if (req.kind != GF_REQ_HEADER || c->stream.pending_fd >= 0 || !may_succeed(c, &req.header))
        return 0;
    if (!c->header_seen_ns)
        c->header_seen_ns = gf_now_ns();
    size_t avail = c->buf_end - c->buf_start;
    if (avail < req.bytes + req.header.payload_bytes ||
        !gf_frame_policy_newer_read(&c->held_header, c->held, c->buf + c->buf_start, avail))
        return 0;
    admission a;
    if (check(c, &req, &a) != GF_OK)
        return 0; /* refused after the held frame is answered, in order */
    char why[GF_ERROR_TEXT_MAX_BYTES];
    gf_errorf(why, sizeof why,
              "frame %llu of this connection was read while this one waited to run",
              (unsigned long long)req.header.frame_id);
    c->shard->stats.frames_failed++;
    gf_conn_reject(c, &c->held_header, GF_ERR_SUPERSEDED, why);
    return hold(c, &req);
}

/* The held frame's connection was granted a slot: the frame is placed as
 * a whole one is (checked again: a reload may have changed its pipeline).
 * Returns 1 when it was placed or refused, 0 when it waits again. */
static int place_held(gf_conn *c) {
    gf_header h = c->held_header;
    admission a = {.in_bytes = h.payload_bytes,
                   .shm = (h.flags & GF_FLAGS_BY_REF) != 0,
                   .device = (h.flags & GF_FLAG_DEVICE) != 0};
    a.status = a.shm ? check_shm(c, &h, c->held, &a) : check_lengths(c, h.pipeline_id, &a);
    if (a.status != GF_OK) {
        c->holding = 0;
        c->shard->stats.frames_failed++; /* received when it was held */
        gf_conn_reject(c, &h, a.status, a.why);
        return 1;
    }
    gf_sched *s = &c->shard->sched;
    if (c->sched.batch && c->sched.batch->frame_count > 0)
        gf_sched_close_batch(s, &c->sched);
    gf_frame *f = gf_sched_join(s, &c->sched, &c->shard->cfg->pipelines[h.pipeline_id], &h,
                                a.in_bytes, a.stage_bytes, c->held_arrived_ns);
    if (f == NULL)
        return 0;
    c->holding = 0;
    gf_conn_push(c, &f->reply);
    if (a.shm) {
        bind_region(c, f, &a);
        return 1;
    }
    int prof = gf_prof_enter(GF_PROF_COPY);
    memcpy(f->in_host, c->held, a.in_bytes);
    gf_prof_leave(prof);
    frame_whole(c, f);
    return 1;
}

int gf_admit_held(gf_conn *c) {
    if (gf_sched_waiting(&c->sched))
        return supersede_held(c);
    if (c->sched.latest_on_engine > 0) {
        /* A slot granted to it meanwhile goes back rather than wait idle:
         * the frame waits for its predecessor (frame_policy.h). */
        if (c->sched.batch && c->sched.batch->frame_count == 0)
            gf_sched_close_batch(&c->shard->sched, &c->sched);
        return supersede_held(c);
    }
    return place_held(c);
}

int gf_admit_frame(gf_conn *c, const gf_request *req) {
    const gf_header *h = &req->header;
    if (!c->header_seen_ns)
        c->header_seen_ns = gf_now_ns();
    /* A payload that fits the buffer is taken in whole before a slot is
     * asked for (docs/design.md, "What a client gets whatever others do"). */
    if (h->payload_bytes <= GF_STAGED_PAYLOAD_MAX_BYTES &&
        c->buf_end - c->buf_start < req->bytes + h->payload_bytes)
        return 0;
    admission a;
    a.status = check(c, req, &a);
    if (a.status != GF_OK) {
        refuse(c, req, &a);
        return 1;
    }
    c->sched.priority = frame_class(c, h);
    if ((h->flags & GF_FLAG_LATEST) && a.staged && supersede(c, req, &a))
        return 1;
    /* Newest-only behind its own frame on the engine: it waits out of the
     * buffer for that one (frame_policy.h), its successor read meanwhile. */
    if ((h->flags & GF_FLAG_LATEST) && a.staged && c->sched.latest_on_engine > 0 && hold(c, req))
        return 1;
    gf_sched *s = &c->shard->sched;
    if (c->sched.batch && c->sched.batch->frame_count > 0)
        gf_sched_close_batch(s, &c->sched);
    gf_frame *f = NULL;
    if (!a.staged && (park_instead(c, req) || park_to_join(c, req, &a))) {
        /* Received now, read into memory; placed when whole (gf_admit_parked). */
    } else if (!(f = place(c, h, &a))) {
        /* Newest-only: it waits out of the buffer, so its successor is read. */
        return (h->flags & GF_FLAG_LATEST) && a.staged && hold(c, req);
    }
    count_received(c);
    c->buf_start += req->bytes;
    gf_request_accept(&c->decoder, req);
    c->header_seen_ns = 0;
    if (f == NULL) {
        take_parked(c);
        return 1;
    }
    gf_conn_push(c, &f->reply);
    if (a.shm)
        bind_shm(c, f, &a);
    else
        take_staged(c, f);
    return 1;
}

void gf_admit_payload(gf_conn *c, size_t n) {
    c->receive_progress_ns = gf_now_ns();
    gf_request_advance(&c->decoder, (uint64_t)n);
    if (!gf_request_in_payload(&c->decoder) && c->frame)
        frame_whole(c, c->frame);
}

int gf_admit_parked(gf_conn *c) {
    if (gf_request_in_payload(&c->decoder))
        return 0;
    gf_request req = {.kind = GF_REQ_HEADER, .bytes = GF_HEADER_BYTES, .header = c->parked_header};
    admission a = {.in_bytes = c->parked_header.payload_bytes};
    /* Checked again against the configuration of now: a reload may have
     * changed its pipeline meanwhile.  It was received before any drain
     * began, and runs even then, as a payload arriving in its slot would. */
    a.status = check_lengths(c, req.header.pipeline_id, &a);
    if (a.status != GF_OK) {
        c->shard->stats.frames_failed++; /* received when it was parked */
        gf_conn_unpark(c);
        gf_conn_reject(c, &req.header, a.status, a.why);
        return 1;
    }
    gf_sched *s = &c->shard->sched;
    if (c->sched.batch && c->sched.batch->frame_count > 0)
        gf_sched_close_batch(s, &c->sched);
    /* Whole, it joins its pipeline's batch as a staged frame does, and
     * waits for a slot as a whole frame: the wait is the daemon's doing. */
    const gf_header *h = &c->parked_header;
    gf_frame *f = gf_sched_join(s, &c->sched, &c->shard->cfg->pipelines[h->pipeline_id], h,
                                a.in_bytes, a.stage_bytes, c->parked_arrived_ns);
    if (f == NULL)
        return 0;
    gf_conn_push(c, &f->reply);
    int prof = gf_prof_enter(GF_PROF_COPY);
    memcpy(f->in_host, c->parked, a.in_bytes);
    gf_prof_leave(prof);
    gf_conn_unpark(c);
    frame_whole(c, f);
    return 1;
}

int gf_admit_park_arriving(gf_conn *c) {
    gf_frame *f = c->frame;
    gf_header h = gf_conn_arriving_header(c);
    uint64_t got = gf_conn_payload_received(c);
    if (gf_conn_park(c, &h, f->arrived_ns) < 0)
        return -1;
    memcpy(c->parked, f->in_host, got);
    gf_conn_unslot_frame(c);
    return 0;
}

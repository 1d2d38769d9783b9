/* SPDX-License-Identifier: MIT */
/*
 * A connection moves to another shard (move.h): whether it must, when it
 * may, which shard takes it, and the hand-over by mail.
 */
#include "move.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"
#include "listener.h"
#include "log.h"
#include "mailbox.h"
#include "region.h"
#include "shard_state.h"

/* What travels: the connection's stream, copied whole, its buffered bytes
 * and its regions.  Nothing else of the old gf_conn goes: it owes nothing
 * (owes_nothing), so the new shard starts the rest afresh. */
typedef struct move_mail {
    gf_call call; /* to the new shard; no answer */
    gf_group *group;
    uint32_t to;           /* the new shard, whose count includes this one */
    gf_conn_stream stream; /* c->stream, whole                              */
    gf_link regions;       /* in flight: see move.h                         */
    size_t bytes;          /* buffered and not consumed: the FRAME's header first */
    uint8_t buf[GF_CONN_BUF_BYTES];
} move_mail;

uint32_t gf_move_wanted(const gf_conn *c, const gf_header *h, const uint8_t *payload) {
    const gf_config *cfg = c->shard->cfg;
    if (c->shard->draining || h->pipeline_id >= cfg->pipeline_count)
        return 0;
    uint32_t mask = cfg->pipelines[h->pipeline_id].devices;
    gf_shm_frame d;
    const gf_region *r = NULL;
    if ((h->flags & GF_FLAG_DEVICE) && gf_shm_frame_decode(payload, &d) == 0)
        r = gf_conn_region(c, d.region_id);
    if (r != NULL && r->on_device) {
        if (!gf_device_runs(r->mapping.device, mask))
            return 0; /* nowhere: bad_descriptor */
        mask = 1u << r->mapping.device;
    }
    return gf_device_runs(c->shard->self->device, mask) ? 0 : mask;
}

/* Whether `c` owes nothing and waits for nothing: no reply unwritten, no
 * frame being received, batched or on the engine, no region being pinned,
 * no gathering pending.  (A memfd that came with bytes after the FRAME goes
 * along.) */
static int owes_nothing(const gf_conn *c) {
    uint32_t ready = 0;
    for (gf_link *l = gf_list_front(&c->regions); l; l = gf_list_next(&c->regions, l))
        ready++;
    return gf_list_empty(&c->out.replies) && c->out.unfinished == 0 && !c->frame && !c->parked &&
           !c->sched.batch && !gf_sched_waiting(&c->sched) && !c->gathering &&
           !gf_linked(&c->gather_link) && ready == c->region_count;
}

/* The shard with the fewest connections among the others that run a
 * pipeline of `mask`, or -1. */
static int pick(const gf_shard *sh, uint32_t mask) {
    const gf_group *g = sh->group;
    int best = -1;
    unsigned best_n = UINT_MAX;
    for (uint32_t k = 0; k < g->count; k++) {
        if (k == sh->index || !gf_device_runs(g->shard[k].device, mask))
            continue;
        unsigned n = atomic_load_explicit(&g->shard[k].connections, memory_order_relaxed);
        if (n < best_n) {
            best = (int)k;
            best_n = n;
        }
    }
    return best;
}

/* Regions leave their shard, or come to `sh` (region.h; arriving: how
 * many). */
static void regions_leave(gf_link *regions) {
    for (gf_link *l = gf_list_front(regions); l; l = gf_list_next(regions, l))
        gf_region_leave(gf_list_entry(l, gf_region, link));
}

static uint32_t regions_arrive(gf_shard *sh, gf_link *regions) {
    uint32_t n = 0;
    for (gf_link *l = gf_list_front(regions); l; l = gf_list_next(regions, l), n++)
        gf_region_arrive(gf_list_entry(l, gf_region, link), sh);
    return n;
}

static void regions_release(gf_link *regions) {
    gf_link *l;
    while ((l = gf_list_pop_front(regions)))
        gf_region_unref(gf_list_entry(l, gf_region, link));
}

/* The connection could not be taken (the daemon stops): its buffered FRAME
 * is answered shutting_down, with its own id, as the drain answers frames,
 * and counted; the socket is closed, and `sh`'s thread (its regions now)
 * releases its regions. */
static void refuse(move_mail *mv, gf_shard *sh) {
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    (void)gf_header_parse(mv->buf, mv->bytes, GF_ROLE_DAEMON, UINT64_MAX, &h);
    gf_group_refuse_handoff(mv->group, mv->to, sh ? &sh->stats : NULL, mv->stream.fd,
                            mv->stream.pending_fd, &h);
    if (sh != NULL) {
        regions_arrive(sh, &mv->regions); /* region_free counts them out */
        regions_release(&mv->regions);
    }
    /* With no shard (its mailbox closed as the daemon stops), the regions
     * stay mapped until the process exits a moment later: no thread that
     * may unpin them runs any more. */
    free(mv);
}

/* The new shard's loop: the connection goes on there, its buffered FRAME
 * first. */
static void on_move_mail(gf_call *m, void *owner) {
    move_mail *mv = gf_list_entry(m, move_mail, call);
    gf_shard *sh = owner;
    if (sh == NULL || sh->draining) {
        refuse(mv, sh);
        return;
    }
    uint32_t regions = regions_arrive(sh, &mv->regions);
    gf_conn *c = gf_conn_new(sh, &mv->stream);
    if (c == NULL) { /* its socket and memfd are closed, the count taken back */
        regions_release(&mv->regions);
        free(mv);
        return;
    }
    memcpy(c->buf, mv->buf, mv->bytes);
    c->buf_end = mv->bytes;
    c->region_count = regions;
    gf_list_splice(&c->regions, &mv->regions);
    sh->stats.connections_moved++;
    GF_LOG_DBG("connection %llu: moved here (shard %u)", (unsigned long long)c->stream.id,
               sh->index);
    /* Its deferred work reads the buffered FRAME and starts reading. */
    gf_conn_defer(c);
    free(mv);
}

void gf_move_try(gf_conn *c) {
    gf_shard *sh = c->shard;
    if (c->closing || !owes_nothing(c))
        return;
    /* The FRAME it stopped at is at the front of its buffer, whole. */
    gf_header h;
    uint32_t mask = 0;
    if (gf_header_parse(c->buf + c->buf_start, c->buf_end - c->buf_start, GF_ROLE_DAEMON,
                        UINT64_MAX, &h) > 0)
        mask = gf_move_wanted(c, &h, c->buf + c->buf_start + GF_HEADER_BYTES);
    if (mask == 0) {
        /* A reload or the drain since: it is served here after all. */
        c->moving = 0;
        gf_conn_defer(c);
        return;
    }
    int k = pick(sh, mask);
    move_mail *mv = k < 0 ? NULL : malloc(sizeof *mv);
    if (mv == NULL) {
        /* No shard runs it (configurations are refused that way) or no
         * memory: the client cannot be served, and is told by the close. */
        GF_LOG_ERR("connection %llu: cannot move to a shard that runs pipeline %s: %s",
                   (unsigned long long)c->stream.id, sh->cfg->pipelines[h.pipeline_id].name,
                   k < 0 ? "none does" : "out of memory");
        gf_conn_close(c);
        return;
    }
    *mv = (move_mail){.call.run = on_move_mail,
                      .group = sh->group,
                      .to = (uint32_t)k,
                      .stream = c->stream,
                      .bytes = c->buf_end - c->buf_start};
    memcpy(mv->buf, c->buf + c->buf_start, mv->bytes);
    gf_list_init(&mv->regions);
    gf_list_splice(&mv->regions, &c->regions);
    regions_leave(&mv->regions);
    c->region_count = 0;
    c->stream.pending_fd = -1; /* the mail's now */
    /* Counted by the new shard before this one lets it go: the total the
     * control loop checks against max_connections never misses it. */
    atomic_fetch_add_explicit(&sh->group->shard[k].connections, 1, memory_order_relaxed);
    /* Off this loop's poll before the other loop polls it. */
    gf_conn_hand_over(c);
    if (gf_call_post(&sh->group->shard[k].mailbox, &mv->call) < 0)
        refuse(mv, sh);
}

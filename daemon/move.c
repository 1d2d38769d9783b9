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

/* What travels: the socket and everything the connection was told or told
 * us that a new gf_conn would not know. */
typedef struct move_mail {
    gf_call call; /* to the new shard; no answer */
    gf_group *group;
    atomic_uint *connections;          /* the new shard's count, which includes this one */
    void (*resume)(gf_defer_item *it); /* the connection's deferred work (conn_io.c) */
    int fd;
    uint64_t id, rx_bytes;
    uint32_t uid, gid, pid, next_region_id, region_count;
    int eof;
    int pending_fd;          /* a memfd that came with later bytes, or -1     */
    uint64_t pending_fd_pos; /* where in the stream it came (conn.h)          */
    gf_link regions;         /* ready, each with no shard (sh NULL) on the way */
    size_t bytes;            /* buffered and not consumed: the FRAME's header first */
    uint8_t buf[GF_CONN_BUF_BYTES];
} move_mail;

int gf_move_wanted(const gf_conn *c, const gf_header *h) {
    const gf_config *cfg = c->shard->cfg;
    return !c->shard->draining && h->pipeline_id < cfg->pipeline_count &&
           !gf_device_runs(c->shard->self->device, cfg->pipelines[h->pipeline_id].devices);
}

/* Whether `c` owes nothing and waits for nothing: no reply unwritten, no
 * frame being received, batched or on the engine, no region being pinned,
 * no gathering pending.  (A memfd that came with bytes after the FRAME goes
 * along.) */
static int owes_nothing(const gf_conn *c) {
    uint32_t ready = 0;
    for (gf_link *l = gf_list_front(&c->regions); l; l = gf_list_next(&c->regions, l))
        ready++;
    return gf_list_empty(&c->out.replies) && c->out.unfinished == 0 && !c->frame &&
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

/* Regions leave `sh` (its counts), or come to it. */
static void regions_leave(gf_shard *sh, gf_link *regions) {
    for (gf_link *l = gf_list_front(regions); l; l = gf_list_next(regions, l)) {
        gf_region *r = gf_list_entry(l, gf_region, link);
        sh->stats.regions_open--;
        sh->stats.region_bytes -= r->bytes;
        r->shard = NULL;
    }
}

static void regions_arrive(gf_shard *sh, gf_link *regions) {
    for (gf_link *l = gf_list_front(regions); l; l = gf_list_next(regions, l)) {
        gf_region *r = gf_list_entry(l, gf_region, link);
        sh->stats.regions_open++;
        sh->stats.region_bytes += r->bytes;
        r->shard = sh;
    }
}

/* The connection could not be taken (the daemon stops): its buffered FRAME
 * is answered shutting_down, with its own id, as the drain answers frames,
 * and counted; the socket is closed, and `sh`'s thread (its regions now)
 * releases its regions. */
static void refuse(move_mail *mv, gf_shard *sh) {
    gf_header h = {.version = GF_PROTOCOL_VERSION};
    (void)gf_header_parse(mv->buf, mv->bytes, GF_ROLE_DAEMON, UINT64_MAX, &h);
    gf_refuse_fd(mv->fd, &h, GF_ERR_SHUTTING_DOWN, "the daemon is stopping and took no new frame");
    if (mv->pending_fd >= 0)
        close(mv->pending_fd);
    atomic_fetch_sub_explicit(mv->connections, 1, memory_order_relaxed);
    if (sh == NULL) {
        gf_group_count_refusal(mv->group, GF_ERR_SHUTTING_DOWN);
    } else {
        sh->stats.rejected[GF_ERR_SHUTTING_DOWN]++;
        regions_arrive(sh, &mv->regions); /* region_free counts them out */
        gf_link *l;
        while ((l = gf_list_pop_front(&mv->regions)))
            gf_region_unref(gf_list_entry(l, gf_region, link));
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
    regions_arrive(sh, &mv->regions);
    gf_conn *c = gf_conn_new(sh, mv->fd, mv->uid, mv->gid, mv->pid, mv->id, mv->resume);
    if (c == NULL) { /* the socket is closed, the count taken back */
        if (mv->pending_fd >= 0)
            close(mv->pending_fd);
        gf_link *l;
        while ((l = gf_list_pop_front(&mv->regions)))
            gf_region_unref(gf_list_entry(l, gf_region, link));
        free(mv);
        return;
    }
    memcpy(c->buf, mv->buf, mv->bytes);
    c->buf_end = mv->bytes;
    c->rx_bytes = mv->rx_bytes;
    c->eof = mv->eof != 0;
    c->pending_fd = mv->pending_fd;
    c->pending_fd_pos = mv->pending_fd_pos;
    c->next_region_id = mv->next_region_id;
    c->region_count = mv->region_count;
    gf_list_splice(&c->regions, &mv->regions);
    sh->stats.connections_moved++;
    GF_LOG_DBG("connection %llu: moved here (shard %u)", (unsigned long long)c->id, sh->index);
    /* Its deferred work reads the buffered FRAME and starts reading. */
    gf_conn_defer(c);
    free(mv);
}

void gf_move_try(gf_conn *c) {
    gf_shard *sh = c->shard;
    if (c->closing || !owes_nothing(c))
        return;
    gf_header h = {.pipeline_id = c->moving_pipeline};
    if (!gf_move_wanted(c, &h)) {
        /* A reload or the drain since: it is served here after all. */
        c->moving = 0;
        gf_conn_defer(c);
        return;
    }
    int k = pick(sh, sh->cfg->pipelines[h.pipeline_id].devices);
    move_mail *mv = k < 0 ? NULL : malloc(sizeof *mv);
    if (mv == NULL) {
        /* No shard runs it (configurations are refused that way) or no
         * memory: the client cannot be served, and is told by the close. */
        GF_LOG_ERR("connection %llu: cannot move to a shard that runs pipeline %s: %s",
                   (unsigned long long)c->id, sh->cfg->pipelines[h.pipeline_id].name,
                   k < 0 ? "none does" : "out of memory");
        gf_conn_close(c);
        return;
    }
    *mv = (move_mail){.call.run = on_move_mail,
                      .group = sh->group,
                      .connections = &sh->group->shard[k].connections,
                      .resume = c->resume.run,
                      .fd = c->fd,
                      .id = c->id,
                      .rx_bytes = c->rx_bytes,
                      .uid = c->uid,
                      .gid = c->gid,
                      .pid = c->pid,
                      .next_region_id = c->next_region_id,
                      .region_count = c->region_count,
                      .eof = c->eof,
                      .pending_fd = c->pending_fd,
                      .pending_fd_pos = c->pending_fd_pos,
                      .bytes = c->buf_end - c->buf_start};
    memcpy(mv->buf, c->buf + c->buf_start, mv->bytes);
    gf_list_init(&mv->regions);
    gf_list_splice(&mv->regions, &c->regions);
    regions_leave(sh, &mv->regions);
    c->region_count = 0;
    c->pending_fd = -1; /* the mail's now */
    /* Off this loop's poll before the other loop polls it. */
    gf_conn_hand_over(c);
    atomic_fetch_add_explicit(mv->connections, 1, memory_order_relaxed);
    if (gf_call_post(&sh->group->shard[k].mailbox, &mv->call) < 0)
        refuse(mv, sh);
}

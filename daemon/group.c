/* SPDX-License-Identifier: MIT */
/*
 * What the shards share (group.h): the refusal of a socket handed to a
 * shard that will not serve it.
 */
#include "group.h"

#include <unistd.h>

#include "reply.h"
#include "stats.h"

void gf_group_refuse_handoff(gf_group *g, uint32_t shard, gf_stats *stats, int fd, int pending_fd,
                             const gf_header *frame) {
    /* Counted before the client can know (it may ask STATS at once); the
     * connection counted open until its socket is closed. */
    if (stats == NULL && frame == NULL) {
        gf_group_count_refusal(g, GF_ERR_SHUTTING_DOWN);
    } else if (stats == NULL) {
        atomic_fetch_add_explicit(&g->refused_by_status[GF_ERR_SHUTTING_DOWN], 1,
                                  memory_order_relaxed);
    } else {
        stats->rejected[GF_ERR_SHUTTING_DOWN]++;
        stats->connections_refused += frame == NULL;
    }
    gf_reply_send_error(fd, frame, GF_ERR_SHUTTING_DOWN,
                        frame ? "the daemon is stopping and took no new frame"
                              : "the daemon is stopping; no new connections");
    close(fd);
    if (pending_fd >= 0)
        close(pending_fd);
    atomic_fetch_sub_explicit(&g->shard[shard].connections, 1, memory_order_relaxed);
}

/* SPDX-License-Identifier: MIT */
/*
 * A connection moves to another shard: the one way a connection leaves the
 * shard it was handed to.  A pipeline may be limited to some devices (its
 * "devices" key), and a device frame runs on the device that holds its
 * region (PROTOCOL.md, "Device frames"); a FRAME read on a shard of another
 * device is not admitted there.  The connection stops reading, and once it owes nothing
 * (every reply written, no frame received or in flight, no region being
 * pinned) it is handed, with the bytes it has buffered (that FRAME's header
 * first) and its regions, to the shard with the fewest connections among
 * those that run the pipeline, by mail (mailbox.h), as the control loop
 * hands over an accepted one.  Nothing is in flight when it moves, so its
 * replies keep their order.  What survives is its stream (conn.h's
 * gf_conn_stream: socket, id, peer credentials, stream position, a memfd
 * that came with later bytes, EOF, region ids), copied whole, with the
 * bytes it buffered; everything else starts afresh on the new shard.  A
 * connection whose frames alternate between pipelines of different devices
 * moves each time: correct, not fast (config/README.md, "Shards").
 *
 * Regions in flight.  The connection's regions (all ready, none used by a
 * frame: it owes nothing) travel in the mail.  They leave the old shard's
 * counts when it is posted and belong to no shard (region->shard NULL)
 * until the new shard takes them into its counts (gf_region_arrive), on
 * its thread, whether it serves the connection or refuses it; then it
 * unpins and frees them when their last reference goes.  max_shm_bytes
 * counts them all the way (the group's region_bytes).  A mail that finds
 * no shard at all (the daemon stops: the mailbox closed) leaves them
 * mapped until the process exits a moment later, since no thread that may
 * unpin them runs any more.
 *
 * Loop thread of the shard that owns the connection; the call runs on the
 * new shard's.
 */
#ifndef GF_MOVE_H
#define GF_MOVE_H

#include "conn.h"

/* The devices (a gf_pipeline.devices mask) of the shards that may run the
 * FRAME `h`, whose payload `payload` (a device frame's descriptor) is
 * whole in the buffer, when this shard may not: the pipeline is limited to
 * other devices, or the device region it names lies on another device.  0
 * when it runs here, or nowhere (admission then refuses it). */
uint32_t gf_move_wanted(const gf_conn *c, const gf_header *h, const uint8_t *payload);

/* `c` waits to move (c->moving): hands it over if it owes nothing now. */
void gf_move_try(gf_conn *c);

#endif

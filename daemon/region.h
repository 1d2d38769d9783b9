/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory regions: a client's memfd, mapped by the daemon and pinned
 * for the engine, so that frames by reference (GF_FLAG_SHM) are copied to and
 * from the GPU straight out of the client's pages.  The socket then carries
 * only descriptors.  protocol/PROTOCOL.md, "Shared-memory frames", is the
 * contract; docs/design.md, "Frames in shared memory", says when to use it.
 *
 * A region belongs to one connection, which alone can name it (ids are per
 * connection).  It is reference-counted: the connection's table holds one
 * reference until REGION_REMOVE or the close, every frame in flight on it one
 * more, and pinning or unpinning in progress one.  The mapping is unpinned and
 * unmapped only when the last reference goes, so never under the GPU's feet.
 *
 * Pinning (cudaHostRegister) takes about a millisecond per MiB, so it runs on
 * libuv's thread pool; the REGION_ADD reply waits for it in the connection's
 * reply queue, which keeps every other client served meanwhile.
 *
 * A device region (DEVICE_REGION_ADD, PROTOCOL.md "Device frames") is the
 * same object over a client's GPU memory: the engine imports and maps it on
 * the thread pool where a memfd region is pinned (gf_engine_device_map),
 * frames run on it in place, and its last reference unmaps it there.  Its
 * size and device are the driver's (gf_device_mapping), never the client's
 * word alone.  Shared-memory and device regions share a connection's ids and
 * its max_regions; their bytes count against max_shm_bytes and
 * max_device_region_bytes.
 *
 * Loop thread only, except the pool's work functions.
 */
#ifndef GF_REGION_H
#define GF_REGION_H

#include <stdint.h>

#include <uv.h>

#include "engine.h"
#include "list.h"
#include "protocol.h"

struct gf_shard;

typedef struct gf_region {
    uint32_t id;                       /* the client's name for it, unique on its connection */
    uint32_t refs;                     /* table + frames in flight + pool work               */
    uint8_t *base;                     /* MAP_SHARED mapping of the client's memfd, or
                                          (device) the daemon's device address of it    */
    uint64_t bytes;                    /* its size when added (F_SEAL_SHRINK keeps it)      */
    int on_device;                     /* a device region (GF_REGION_DEVICE)                */
    int device_fd;                     /* device: the client's fd until it is mapped, or -1 */
    gf_device_mapping mapping;         /* device: the engine's mapping, once mapped        */
    int pinned;                        /* the engine page-locked it, or (device) mapped it  */
    int ready;                         /* pinned (or failed): frames may name it            */
    int pin_status;                    /* after pinning: 0, or a negative errno              */
    char why[GF_ERROR_TEXT_MAX_BYTES]; /* why pinning failed                    */
    struct gf_shard *shard;
    gf_link link;   /* the connection's table                            */
    uv_work_t work; /* pin or unpin on the thread pool                    */
    void (*on_ready)(struct gf_region *r, void *arg); /* pinning finished         */
    void *on_ready_arg;
    /* Called with released_arg once the region is unpinned and unmapped
     * (REGION_REMOVE's reply waits for it, so a client that has the reply
     * knows the memory is released); not when released_arg is NULL. */
    void (*on_released)(void *arg);
    void *released_arg;
} gf_region;

/*
 * Takes `fd` (always closed here, whatever happens) as a region for a
 * connection that holds `held` regions: checks that it is a memfd sealed
 * against shrinking, of at most the bytes the configuration still allows,
 * and maps it.  Returns 0 with *out (one reference: the caller's table),
 * or a gf_status (GF_ERR_BAD_REGION, GF_ERR_REGION_LIMIT, GF_ERR_INTERNAL)
 * with the reason in why[why_len].
 */
uint32_t gf_region_open(struct gf_shard *sh, int fd, uint32_t id, uint32_t held, gf_region **out,
                        char *why, size_t why_len);

/*
 * Takes `fd` (always closed, here or once mapped) as a device region of
 * `bytes` with handle type `handle_type` (gf_device_region) for a
 * connection that holds `held` regions: checks the engine maps device
 * memory, the handle type, max_regions and max_device_region_bytes; the
 * mapping itself is gf_region_pin's.  Returns as gf_region_open.
 */
uint32_t gf_region_open_device(struct gf_shard *sh, int fd, const gf_device_region *d, uint32_t id,
                               uint32_t held, gf_region **out, char *why, size_t why_len);

/* Pins `r` on the thread pool (a device region: imports and maps it), then
 * calls on_ready(r, arg) on the loop; r->pin_status says how it went.
 * Holds a reference meanwhile. */
void gf_region_pin(gf_region *r, void (*on_ready)(gf_region *r, void *arg), void *arg);

void gf_region_ref(gf_region *r);

/* `r`, ready and used by no frame, leaves its shard with the connection
 * that moves to another (move.h): it is no longer counted there and
 * belongs to no shard (r->shard NULL) while it travels; the daemon's
 * max_shm_bytes still counts it.  The shard's thread. */
void gf_region_leave(gf_region *r);

/* `r` arrives on `sh`: counted there, and unpinned and freed by it.  The
 * thread of `sh`. */
void gf_region_arrive(gf_region *r, struct gf_shard *sh);

/* Drops a reference; the last one unpins (on the pool) and unmaps. */
void gf_region_unref(gf_region *r);

#endif

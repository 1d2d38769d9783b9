/* SPDX-License-Identifier: MIT */
/*
 * The reply queue: what a connection owes its client, in request order.
 *
 * Every request gets exactly one reply, queued when the request is accepted
 * (a frame's reply is embedded in its gf_frame; any other is "loose": it owns
 * itself and its body) and written once it and every reply before it are
 * ready.  The queue is pure bookkeeping: it never does I/O and never looks
 * inside a frame.  The connection's driver (conn_io.c) gathers the ready
 * replies at the head into one iovec array for one sendmsg
 * (gf_replyq_gather), reports how many bytes went out (gf_replyq_consume),
 * and finishes each reply written whole.  The queue also keeps the counters
 * that bound a connection's output: replies not yet finished, and the loose
 * replies' count and body bytes, which it adds to a total shared by every
 * queue of the loop (max_output_bytes_total).
 *
 * Loop thread only.
 */
#ifndef GF_REPLY_H
#define GF_REPLY_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "list.h"
#include "protocol.h"

/* Replies one sendmsg carries at most (two buffers each; far under IOV_MAX). */
#define GF_WRITE_BATCH_MAX 64

struct gf_conn;
struct gf_frame;
struct gf_region;

typedef struct gf_reply {
    gf_link link;                    /* its queue, in request order; unlinked once
                                        written, dropped or taken back             */
    struct gf_conn *conn;            /* the connection it is owed to; NULL once
                                        finished (never dereferenced here)         */
    struct gf_frame *frame;          /* the frame whose result it is (the frame
                                        embeds it); NULL: a loose reply, which
                                        owns itself                                */
    int ready;                       /* header and body are final: may be written */
    uint8_t header[GF_HEADER_BYTES]; /* the encoded reply header                  */
    const void *body;                /* what follows the header: a slot's output,
                                        a shm frame's result descriptor, or `owned` */
    size_t body_bytes;               /* its length                               */
    char *owned;                     /* a malloc'd body this reply frees: an ERROR's
                                        text, a document, an evicted result        */
    struct gf_region *region;        /* REGION_ADD: the region being pinned       */
    struct gf_region *removing;      /* REGION_REMOVE: the region being released  */
    struct gf_frame *evicted;        /* a frame's result moved out of its slot (its
                                        client stopped reading): a malloc'd copy of
                                        the frame, for the accounting when it is
                                        written; only its fields are read           */
    void **gathering;                /* STATS, TRACE: where the gathering of every
                                        shard's figures keeps this reply (gather.h);
                                        NULL once it came                          */
    gf_header request;               /* REGION_ADD, STATS, TRACE: its request     */
} gf_reply;

typedef struct gf_reply_queue {
    gf_link replies;                          /* owed and not yet written, in request order      */
    size_t tx_offset;                         /* bytes of the head reply already written         */
    uint32_t unfinished;                      /* queued and not yet finished (gf_replyq_release):
                                                 also those taken off the list whose frame is
                                                 still on the engine                             */
    uint32_t loose_count;                     /* of them, loose replies                          */
    uint64_t loose_bytes;                     /* their body bytes (max_output_bytes)             */
    uint64_t *total_loose_bytes;              /* every queue's loose_bytes together, of the shard */
    atomic_uint_fast64_t *daemon_loose_bytes; /* the same, of every shard (group.h; NULL:
                                                 none): max_output_bytes_total          */
    uint64_t *loose_since_trim_bytes;         /* loose body bytes queued anywhere since the
                                                 heap was last trimmed                      */
} gf_reply_queue;

/*
 * Encodes a reply header into `out`: the one place replies' headers are
 * built.  `version` is the request's (a version the daemon does not speak
 * gets a version-1 reply); `flags` is GF_FLAG_SHM on a shm RESULT, else 0.
 */
void gf_reply_header(uint8_t out[GF_HEADER_BYTES], uint8_t version, uint8_t type, uint16_t flags,
                     uint64_t frame_id, uint32_t pipeline_id, uint32_t status,
                     uint64_t payload_bytes);

/*
 * A loose reply of `type` and `status` to the request `h` (it echoes its
 * frame_id and pipeline_id), ready, carrying `body` of `body_bytes` (malloc'd,
 * or NULL: an empty body).  Takes `body` in every case.  Returns the reply,
 * or NULL without memory.
 */
gf_reply *gf_reply_loose(uint8_t type, const gf_header *h, uint32_t status, char *body,
                         size_t body_bytes);

/* An empty queue adding its loose bytes to *total_loose_bytes and
 * *loose_since_trim_bytes. */
void gf_replyq_init(gf_reply_queue *q, uint64_t *total_loose_bytes,
                    uint64_t *loose_since_trim_bytes, atomic_uint_fast64_t *daemon_loose_bytes);

/* Appends `r` (owed to `conn`) and counts it. */
void gf_replyq_push(gf_reply_queue *q, gf_reply *r, struct gf_conn *conn);

/* Gives the queued loose reply `r` its malloc'd body (counted as loose bytes
 * from now on). */
void gf_replyq_set_body(gf_reply_queue *q, gf_reply *r, char *owned, size_t bytes);

/* Takes `r` off the list unwritten; it stays counted until released. */
void gf_replyq_remove(gf_reply *r);

/* Puts the loose reply `with` where `r` stands (r is taken off unreleased). */
void gf_replyq_replace(gf_reply_queue *q, gf_reply *r, gf_reply *with);

/* `r` is finished (written, dropped or taken back): it is no longer counted,
 * and its owned body is freed. */
void gf_replyq_release(gf_reply_queue *q, gf_reply *r);

/* The first reply on the queue, or NULL. */
gf_reply *gf_replyq_head(const gf_reply_queue *q);

/* Nonzero when the head reply is ready to be written. */
int gf_replyq_can_write(const gf_reply_queue *q);

/*
 * Fills iov[] (room for 2 * GF_WRITE_BATCH_MAX) with the ready replies at the
 * head, at most GF_WRITE_BATCH_MAX, less the head's tx_offset bytes already
 * written.  Returns the count of iovecs (0: nothing ready).
 */
unsigned gf_replyq_gather(const gf_reply_queue *q, struct iovec *iov);

/*
 * `sent` bytes of what gf_replyq_gather gave went out: every reply written
 * whole leaves the queue and is appended to `done` (in order) for the caller
 * to finish; a partly written head stays, with tx_offset.  Returns nonzero
 * when the head is ready but only partly written (the socket is full).
 */
int gf_replyq_consume(gf_reply_queue *q, size_t sent, gf_link *done);

#endif

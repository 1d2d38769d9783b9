/* SPDX-License-Identifier: MIT */
/*
 * Replies: the one encoder of what the daemon puts on the wire, and the
 * reply queue, what a connection owes its client, in request order.
 *
 * The encoder.  Every reply header the daemon sends is built here, from the
 * request it answers and what happened: a frame's result or error
 * (gf_reply_result, gf_reply_error: the scheduler only says a slot
 * finished; slots.c's gf_frame_reply says what that means for a frame), a
 * LIST, STATS, TRACE, region or ERROR reply (gf_reply_loose, or
 * gf_reply_pending then gf_replyq_answer for one made later), and the
 * ERROR sent at once on a socket no queue serves (gf_reply_send_error: a
 * connection refused, or frames failed by a daemon that cannot go on).
 *
 * The queue.  Every request gets exactly one reply (result or error),
 * queued when the request is accepted (a frame's reply is embedded in its
 * gf_frame; any other is "loose": it owns itself and its body) and written
 * once it and every reply before it are ready.  The queue is bookkeeping:
 * it never does I/O.  The connection's driver (conn_io.c) gathers the
 * ready replies at the head into one iovec array for one sendmsg
 * (gf_replyq_gather), reports how many bytes went out (gf_replyq_consume),
 * and finishes each reply written whole.  The queue also keeps the
 * counters that bound a connection's output: replies not yet finished, and
 * the loose replies' count and body bytes, which it adds to a total shared
 * by every queue of the loop (max_output_bytes_total).  What a reply holds
 * besides its body (a region being pinned or released, a gathering of the
 * shards, an evicted frame's copy) is behind its one `release` callback.
 *
 * Loop thread only, but gf_reply_send_error (any thread).
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

typedef struct gf_reply gf_reply;

/* What a reply holds besides its body, let go when the reply is finished:
 * `delivered` when it was written whole, else dropped.  The reply's
 * connection (r->conn) is still there. */
typedef void (*gf_reply_release_fn)(gf_reply *r, int delivered);

struct gf_reply {
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
    gf_reply_release_fn release;     /* what it holds besides (NULL: nothing):
                                        called once, when it is finished          */
    void *extra;                     /* that: the release's own                   */
    gf_header request;               /* a reply made later (gf_reply_pending): its
                                        request                                   */
};

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

/* A frame's reply, ready: a RESULT to the request `req` of `body_bytes` at
 * `body`, the slot's output or, with `flags` GF_FLAG_SHM or GF_FLAG_DEVICE,
 * a frame by reference's result descriptor. */
void gf_reply_result(gf_reply *r, const gf_header *req, const void *body, size_t body_bytes,
                     uint16_t flags);

/* A frame's reply, ready: an ERROR of `status` to the request `req`,
 * carrying `text` of `len` bytes (malloc'd, the reply's from now on; NULL:
 * none). */
void gf_reply_error(gf_reply *r, const gf_header *req, uint32_t status, char *text, size_t len);

/*
 * A loose reply of `type` and `status` to the request `h` (it echoes its
 * frame_id and pipeline_id, and its version where the daemon speaks it),
 * ready, carrying `body` of `body_bytes` (malloc'd, or NULL: an empty
 * body).  Takes `body` in every case.  Returns the reply, or NULL without
 * memory.
 */
gf_reply *gf_reply_loose(uint8_t type, const gf_header *h, uint32_t status, char *body,
                         size_t body_bytes);

/* A loose reply to the request `h`, not ready: it is made later
 * (gf_replyq_answer), and holds what `release` lets go (with `extra`) if it
 * is finished before.  Returns it, or NULL without memory. */
gf_reply *gf_reply_pending(const gf_header *h, gf_reply_release_fn release, void *extra);

/* The queued pending reply `r` is made: `type` and `status`, carrying
 * `owned` of `bytes` (malloc'd, counted as loose bytes from now on; NULL:
 * an empty body); it holds nothing more; it is ready. */
void gf_replyq_answer(gf_reply_queue *q, gf_reply *r, uint8_t type, uint32_t status, char *owned,
                      size_t bytes);

/* Sends an ERROR of `status` carrying `text` (cut at GF_ERROR_TEXT_MAX_BYTES)
 * on `fd` at once, in one non-blocking send, for a socket that no queue
 * serves: a connection refused before any shard served it, or frames a
 * daemon that cannot go on fails.  It answers the request `req` (its
 * version, frame and pipeline ids), or none when NULL.  Best effort: a full
 * socket loses it.  Any thread. */
void gf_reply_send_error(int fd, const gf_header *req, uint32_t status, const char *text);

/* An empty queue adding its loose bytes to *total_loose_bytes and
 * *loose_since_trim_bytes. */
void gf_replyq_init(gf_reply_queue *q, uint64_t *total_loose_bytes,
                    uint64_t *loose_since_trim_bytes, atomic_uint_fast64_t *daemon_loose_bytes);

/* Appends `r` (owed to `conn`) and counts it. */
void gf_replyq_push(gf_reply_queue *q, gf_reply *r, struct gf_conn *conn);

/* Takes `r` off the list unwritten; it stays counted until released. */
void gf_replyq_remove(gf_reply *r);

/* Puts the loose reply `with` where `r` stands (r is taken off unreleased). */
void gf_replyq_replace(gf_reply_queue *q, gf_reply *r, gf_reply *with);

/* `r` is finished (written, dropped or taken back; `delivered`: written
 * whole): what it holds is let go (its release), it is no longer counted,
 * and its owned body is freed. */
void gf_replyq_release(gf_reply_queue *q, gf_reply *r, int delivered);

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

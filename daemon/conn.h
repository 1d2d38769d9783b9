/* SPDX-License-Identifier: MIT */
/*
 * One client connection: its whole state in one struct, and what every file
 * that serves it shares: queueing its replies, finishing one (which releases
 * the frame, slot, region or memory it held), taking back a frame whose
 * payload is arriving, and closing.  conn_io.c drives the connection (its
 * events, reads and writes); query.c and admit.c handle its requests.
 *
 * Rules it keeps:
 * - Every request gets exactly one reply (result or error) while the
 *   connection is open, in the order the requests arrived.
 * - A slot holds a batch of one pipeline's whole frames, of any connections,
 *   or one connection's frame received in place, from its claim until the
 *   last of its frames' replies is written, its result moved out of the slot
 *   (gf_conn_evict_results), or dropped.
 * - Closing never frees memory a frame on the engine or a reply still uses:
 *   the struct is freed once its handle is closed and no reply is
 *   unfinished; a frame's result that completes after the close is dropped,
 *   and its slot still returns.
 * - Finishing a reply never re-enters the connection: what it makes
 *   possible (reading again, writing the next reply, a slot for a waiter)
 *   is deferred work (defer.h).
 * - Every file descriptor that arrives is claimed by the REGION_ADD request
 *   it came with or closed at once.
 *
 * Loop thread only.
 */
#ifndef GF_CONN_H
#define GF_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "defer.h"
#include "list.h"
#include "reply.h"
#include "request.h"
#include "scheduler.h"

/* The shard that serves it (shard_state.h, which a file that reaches into
 * the shard includes itself). */
typedef struct gf_shard gf_shard;

/* Payload bytes that may travel in a connection's read buffer and be copied
 * into the slot: a small frame then costs one read(2), not two, and a client
 * that pipelines small frames has several of them taken in by one read.
 * Every byte of a payload beyond what the buffer holds is read by the kernel
 * straight into pinned memory. */
#define GF_STAGED_PAYLOAD_MAX_BYTES GF_BATCH_FRAME_BYTES
/* The connection's buffer: one header plus a small staged payload. */
#define GF_CONN_BUF_BYTES (GF_HEADER_BYTES + GF_STAGED_PAYLOAD_MAX_BYTES)
/* ERROR/LIST/STATS/TRACE replies a connection may have queued before we stop
 * reading from it: a client that floods requests and never reads cannot
 * make the daemon's memory grow without bound. */
#define GF_CONN_MAX_LOOSE_REPLIES 64
/* A reply that may go to a connection with nothing queued even while all
 * connections together are over max_output_bytes_total: a LIST or STATS
 * document, so that a client that reads is still answered; 1024 such
 * connections then hold 16 MiB beyond the total at most. */
#define GF_SMALL_REPLY_BYTES (16u * 1024)
/* Bytes of large documents (TRACE; over GF_SMALL_REPLY_BYTES) a shard
 * builds in one loop iteration, at least one: about one TRACE of 1024
 * frames (300 KB), whose cJSON takes milliseconds; the next loop iteration
 * polls every socket before more are built. */
#define GF_DOC_BYTES_PER_ITERATION (256u << 10)

/* A connection as its client knows it, whichever shard serves it: the one
 * part of it that survives a move to another shard (move.h), copied whole;
 * the rest is the shard's and starts afresh there. */
typedef struct gf_conn_stream {
    int fd;                  /* the socket: read with recvmsg (it may carry a
                                memfd), written with sendmsg; closed in the
                                close callback                               */
    uint64_t id;             /* for logs: shard k numbers its accepted ones
                                k + 1, k + 1 + shards, ...: one daemon-wide,
                                kept when it moves (0: not yet numbered)     */
    uint32_t uid, gid, pid;  /* the peer, from SO_PEERCRED at accept         */
    uint64_t rx_bytes;       /* bytes received since accept                  */
    int pending_fd;          /* a memfd received and not yet claimed, or -1  */
    uint64_t pending_fd_pos; /* the stream offset of the last byte that came
                                with it: the request holding that byte owns it */
    uint32_t next_region_id; /* the id the next region gets (from 1)         */
    unsigned eof : 1;        /* the client shut down its writing side        */
} gf_conn_stream;

typedef struct gf_conn {
    uv_poll_t poll;        /* readiness of the socket; poll.data is the conn   */
    gf_conn_stream stream; /* the socket, its peer and how far it has come     */
    int poll_events;       /* UV_READABLE | UV_WRITABLE now asked of `poll`    */
    gf_shard *shard;
    gf_link link;           /* the shard's live connections                  */
    gf_link gather_link;    /* the shard's connections waiting to gather a STATS
                               or TRACE (GF_GATHERS_MAX are under way)        */
    gf_link blocked_link;   /* the shard's connections whose socket is full
                               (write_blocked)                                */
    gf_link throttled_link; /* the shard's connections stopped for
                               max_output_bytes_total                        */
    gf_defer_item resume;   /* deferred: go on with it (conn_io.c)            */
    gf_sched_client sched;  /* its slot: waiting for one, its open batch      */

    gf_request_decoder decoder;     /* where the request stream stands              */
    uint8_t buf[GF_CONN_BUF_BYTES]; /* received bytes not yet consumed              */
    size_t buf_start, buf_end;      /* unconsumed bytes are buf[buf_start..buf_end) */
    gf_frame *frame;                /* the frame whose payload is being received in
                                       place, into its own slot                     */
    uint8_t *parked;                /* or a frame's payload in memory of its own: one
                                       that arrives while another client's payload
                                       holds the slot, or that held its slot too long
                                       (admit.h, "parked"); arriving, or whole and
                                       waiting for a place in a batch                */
    gf_header parked_header;        /* the parked frame's FRAME header              */
    uint64_t parked_arrived_ns;     /* when that header was first read              */
    uint8_t *held;                  /* a newest-only frame's payload (or descriptor)
                                       that waits for a slot, taken out of `buf` so
                                       that its successor is read (admit.h, "held"):
                                       GF_STAGED_PAYLOAD_MAX_BYTES, from the first
                                       hold to the close; NULL: none yet            */
    gf_header held_header;          /* while `holding`: its FRAME header            */
    uint64_t held_arrived_ns;       /* when that header was first read              */
    uint64_t header_seen_ns;        /* when the pending FRAME header was first read */
    uint64_t request_begun_ns;      /* an unfinished request is arriving since; 0:
                                       none (or waiting for a slot: not its fault)  */
    uint64_t last_input_ns;         /* bytes last arrived (idle_timeout_ms)         */
    uint64_t write_progress_ns;     /* bytes last went out while the socket was full */
    uint64_t receive_progress_ns;   /* bytes of `frame`'s payload last arrived      */
    uint64_t doc_iteration;         /* the loop iteration it last had a LIST, STATS
                                       or TRACE document built in (one each)        */
    gf_link regions;                /* its regions, ready for frames (REGION_ADD)   */
    uint32_t region_count;          /* regions held and being pinned                */
    gf_reply_queue out;             /* replies owed, in request order               */

    unsigned reading : 1;       /* UV_READABLE is asked for                        */
    unsigned write_blocked : 1; /* the socket was full: waiting for UV_WRITABLE    */
    unsigned input_drained : 1; /* stopping: read all there was, then cut the rest */
    unsigned hup_seen : 1;      /* its hang-up was seen while it was not read
                                   (UV_DISCONNECT, asked for only until then)     */
    unsigned fatal : 1;         /* a fatal protocol error: close after replies     */
    unsigned closing : 1;       /* gf_conn_close ran                               */
    unsigned gathering : 1;     /* a STATS or TRACE of its gathers the shards'
                                   figures: its next one waits (query.c)          */
    unsigned handle_closed : 1; /* the poll handle's close callback ran            */
    unsigned moving : 1;        /* its buffered FRAME's pipeline runs on another
                                   shard's device: it reads nothing more and moves
                                   there once it owes nothing (move.h)            */
    unsigned moved : 1;         /* handed to another shard: its socket is theirs   */
    unsigned holding : 1;       /* `held` holds a frame waiting for a slot         */
} gf_conn;

/* The connection that `sc` is the scheduler's view of. */
static inline gf_conn *gf_conn_of(gf_sched_client *sc) {
    return gf_list_entry(sc, gf_conn, sched);
}

/*
 * A connection for `stream` (its socket non-blocking and close-on-exec),
 * copied whole, on the shard's list, not yet reading; the shard's
 * conn_resume runs when its deferred work is marked.  A stream with id 0
 * is one accepted now: it gets the shard's next id.  Takes the socket in
 * every case.  Returns it, or NULL (logged).
 */
gf_conn *gf_conn_new(gf_shard *sh, const gf_conn_stream *stream);

/* Takes `c`, which owes nothing, off its shard without closing its socket:
 * move.c hands the socket to another shard once this returns (the socket is
 * no longer polled here). */
void gf_conn_hand_over(gf_conn *c);

/* Marks the connection to go on after the current event (conn_io.c). */
void gf_conn_defer(gf_conn *c);

/*
 * Whether the connection may take more requests given the replies it has
 * not let us write: fewer than GF_CONN_MAX_LOOSE_REPLIES, under
 * max_output_bytes, and, while all connections together are over
 * max_output_bytes_total, none queued at all.  A connection over its share
 * is not read until its client reads: memory stays bounded, nothing is lost.
 */
int gf_conn_output_room(gf_conn *c);

/*
 * Whether a document reply (LIST, STATS, TRACE) of about `bytes` may be
 * built for the connection now.  One per connection per loop iteration: a
 * client that floods the loop with requests for documents gets one each
 * time round, while everyone else's sockets are served in between (the
 * rest of its requests wait for the next iteration).  Large ones (TRACE)
 * of all connections together, GF_DOC_BYTES_PER_ITERATION an iteration (at
 * least one): hundreds of connections asking for TRACE must not make one
 * iteration, and another client's LIST, wait for hundreds of them to be
 * built (1 to 3 s once).  And within the output
 * limits: while all connections together are over max_output_bytes_total,
 * only a small reply (GF_SMALL_REPLY_BYTES) to a connection that has
 * nothing queued, so that unread documents cannot pile up past the total.
 * Returns 1, or 0: the connection goes on when it may (its deferred work
 * is scheduled).
 */
int gf_conn_may_build(gf_conn *c, uint64_t bytes);

/* Appends `r` to the connection's queue (a frame's, or a loose one). */
void gf_conn_push(gf_conn *c, gf_reply *r);

/* Queues a loose reply to the request `h` owning `body` (malloc'd or NULL);
 * out of memory closes the connection. */
void gf_conn_reply(gf_conn *c, uint8_t type, const gf_header *h, uint32_t status, char *body,
                   size_t body_bytes);

/*
 * Queues an ERROR reply for the request `h` with `status` and the message
 * `text`, and counts it.  A fatal status also stops reading: the connection
 * closes once its replies are out.
 */
void gf_conn_reject(gf_conn *c, const gf_header *h, uint32_t status, const char *text);

/*
 * A reply is done with, off its queue: written (`delivered`), or dropped.  A
 * frame's result computed and never delivered is counted as dropped here,
 * and nowhere else.  Frees what the reply owns, releases its frame (its
 * slot returns after its batch's last), region or memory, and marks what
 * that makes possible as deferred work.  The connection may be freed.
 */
void gf_conn_finish(gf_reply *r, int delivered);

/* Takes the frame whose payload is arriving in its slot out of the slot:
 * its reply, the newest and not ready, leaves the queue unsent, its slot
 * goes back; the request decoder keeps its place in the payload (admit.c
 * parks the bytes received so far). */
void gf_conn_unslot_frame(gf_conn *c);

/* Parks the payload of the FRAME `h` (header first read at arrived_ns):
 * memory for all of it, within the daemon's max_input_bytes_total, counted
 * in STATS frames.parked.  Returns 0, or -1 when the total or memory is
 * short (it is then read into a slot, as before). */
int gf_conn_park(gf_conn *c, const gf_header *h, uint64_t arrived_ns);

/* Frees the parked payload, if any. */
void gf_conn_unpark(gf_conn *c);

/* Whether a frame's payload is arriving: into its slot, or parked. */
static inline int gf_conn_arriving(const gf_conn *c) {
    return c->frame != NULL || (c->parked != NULL && gf_request_in_payload(&c->decoder));
}

/* The FRAME header of the frame whose payload is arriving, or parked. */
gf_header gf_conn_arriving_header(const gf_conn *c);

/* The bytes of the arriving frame's payload received so far. */
static inline uint64_t gf_conn_payload_received(const gf_conn *c) {
    return gf_conn_arriving_header(c).payload_bytes - c->decoder.payload_left;
}

/* Gives up the frame whose payload is arriving, or is parked: its slot
 * goes back (its reply leaves the queue unsent), or its memory is freed,
 * and the request stream starts again at the next header.  The caller
 * counts it and answers the request if it must. */
void gf_conn_drop_arriving(gf_conn *c);

/* The client left, or is cut, mid-payload: the arriving frame is dropped,
 * logged and counted truncated. */
void gf_conn_truncate_frame(gf_conn *c);

/*
 * The client is not reading and another connection waits for a slot:
 * results waiting to be written move out of their slots into memory of the
 * connection's own, within max_output_bytes, and the slots go back.  Past
 * that limit the rest stay in their slots until write_timeout_ms closes the
 * connection.  Results normally go out straight from the slot's pinned
 * buffer: this copy happens only for a client whose socket is full while
 * others wait.
 */
void gf_conn_evict_results(gf_conn *c);

/*
 * Closes the connection.  Replies not yet written are dropped; a frame still
 * on the engine keeps its slot until it completes, and is then dropped too.
 * Memory is freed once the handle is closed and no reply is unfinished.
 */
void gf_conn_close(gf_conn *c);

/* The region `id` of `c`, ready for frames (REGION_ADD or
 * DEVICE_REGION_ADD answered), or NULL. */
struct gf_region *gf_conn_region(const gf_conn *c, uint32_t id);

/* Connections stopped for max_output_bytes_total's sake go on, if the
 * daemon's loose replies are back under it: after a loose reply of this
 * shard went, and on the watchdog for those another shard's replies freed. */
void gf_conn_resume_throttled(gf_shard *sh);

#endif

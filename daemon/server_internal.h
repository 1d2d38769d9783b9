/*
 * The server's private structures and the calls between its three files.
 * Only conn.c, server.c and introspect.c include this header.
 *
 *   conn.c        one client connection: reading and framing requests (with
 *                 request.c), claiming a slot, receiving the payload into it,
 *                 the reply queue and its writes, errors, close.  Kept in one
 *                 file because a finished reply is what resumes reading.
 *   server.c      listen/accept, the slot-waiter queue, submitting to the
 *                 engine and draining its completions, deadlines and the
 *                 fatal path, graceful drain, reload, open/close.
 *   introspect.c  what the server says about itself: frame accounting when a
 *                 result is written, the LIST/STATS/TRACE documents, the
 *                 supervisor's status line and progress.
 *
 * Calls go conn.c -> server.c (submit, wait for a slot, slot freed, fatal)
 * and conn.c -> introspect.c (documents, frame answered); server.c calls
 * conn.c to accept, resume, flush and close connections.  introspect.c calls
 * neither.  Everything runs on the loop thread.
 */
#ifndef GF_SERVER_INTERNAL_H
#define GF_SERVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "completion.h"
#include "config.h"
#include "engine.h"
#include "log.h"
#include "region.h"
#include "request.h"
#include "server.h"
#include "slots.h"
#include "stats.h"
#include "trace.h"

/* The connection's buffer: one header plus a small staged payload. */
#define GF_CONN_BUF_BYTES (GF_HEADER_BYTES + GF_STAGED_PAYLOAD_MAX_BYTES)
/* ERROR/LIST/STATS/TRACE replies a connection may have queued before we stop
 * reading from it: a client that floods bad frames and never reads cannot
 * make the daemon's memory grow without bound. */
#define GF_CONN_MAX_LOOSE_REPLIES 64
/* Submissions on the engine above which a batch of small frames is held
 * open for more, until a slot completes: two keep the copies of one batch
 * overlapping the kernels of the other (conn.c, conn_end_processing). */
#define GF_BATCH_HOLD_IN_FLIGHT 2
/* completion = poll: how long the loop goes on spinning once no frame is in
 * flight (hybrid stops at once).  A client streaming one frame at a time sends its next frame tens
 * of µs after the reply; 1 ms catches it without a wake-up, and costs an
 * idle daemon 1 ms of a core after its last frame. */
#define GF_POLL_LINGER_NS 1000000ull
/* Replies one uv_write may carry (two buffers each; far under IOV_MAX). */
#define GF_WRITE_BATCH_MAX 64
/* While stopping, a request begun but not complete is waited for this long
 * after the client's last bytes, then cut: a client in the middle of a
 * payload finishes it, a stalled one holds nothing up. */
#define GF_DRAIN_STALL_MS 200
/* Lines per second about connections refused or closed by a deadline: a
 * local client must not be able to flood the journal. */
#define GF_CLOSE_LOG_PER_S 10

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* One client connection: its whole state. */
typedef struct gf_conn {
    uv_poll_t poll;  /* readiness of the socket; poll.data is the conn     */
    int fd;          /* the socket: read with recvmsg (it may carry a memfd),
                        written with sendmsg; closed in the close callback */
    int poll_events; /* UV_READABLE | UV_WRITABLE now asked of `poll`      */
    gf_server *srv;
    uint64_t id;                  /* for logs: 1, 2, ... in accept order          */
    uint32_t uid, gid, pid;       /* the peer, from SO_PEERCRED at accept         */
    struct gf_conn *prev, *next;  /* the server's list of live connections        */
    struct gf_conn *next_waiting; /* the server's queue of slot waiters           */

    gf_request_decoder decoder;     /* where the request stream stands              */
    uint8_t buf[GF_CONN_BUF_BYTES]; /* received bytes not yet consumed              */
    size_t buf_start, buf_end;      /* unconsumed bytes are buf[buf_start..buf_end) */
    gf_frame *frame;                /* the frame whose payload is being received    */
    gf_slot *batch;                 /* the open slot its next small frames join     */
    uint64_t header_seen_ns;        /* when the pending FRAME header was first read */
    uint64_t request_begun_ns;      /* an unfinished request is arriving since; 0:
                                       none (or waiting for a slot: not its fault) */
    uint64_t last_input_ns;         /* bytes last arrived (idle_timeout_ms)         */
    uint64_t write_progress_ns;     /* bytes last went out while the socket was full */
    uint64_t rx_bytes;              /* bytes received since accept                  */
    size_t tx_offset;               /* bytes of the head reply already written      */
    int pending_fd;                 /* a memfd received and not yet claimed, or -1  */
    uint64_t pending_fd_pos;        /* the stream offset of the last byte that came
                                       with it: the request holding that byte owns it */
    struct gf_region *regions;      /* this connection's regions (REGION_ADD)        */
    uint32_t region_count;          /* regions held and pending                     */
    uint32_t next_region_id;        /* the id the next region gets (from 1)         */

    gf_queued_reply *replies_head; /* replies owed and not yet handed to uv_write, */
    gf_queued_reply *replies_tail; /* in request order                             */
    uint32_t replies_unfinished;   /* owed replies not yet written or dropped      */
    uint32_t loose_replies;        /* of them, those not tied to a slot            */
    uint64_t loose_bytes;          /* their payload bytes (max_output_bytes)       */
    uint32_t refs;                 /* the handle (until its close callback) + one
                                      per unfinished reply; freed at zero          */

    unsigned reading : 1;       /* UV_READABLE is asked for                     */
    unsigned write_blocked : 1; /* the socket was full: waiting for UV_WRITABLE */
    unsigned flushing : 1;      /* gf__conn_flush is on the stack               */
    unsigned processing : 1;    /* conn_process is on the stack                 */
    unsigned input_drained : 1; /* stopping: read all there was, then cut the rest */
    unsigned in_read : 1;       /* conn_read is on the stack                    */
    unsigned cutting : 1;       /* gf__conn_input_drained is on the stack       */
    unsigned flush_again : 1;   /* a reply became ready meanwhile               */
    unsigned waiting : 1;       /* on the server's slot-waiter queue            */
    unsigned eof : 1;           /* the client shut down its writing side        */
    unsigned fatal : 1;         /* a fatal protocol error: close after replies  */
    unsigned closing : 1;       /* uv_close called                              */
} gf_conn;

struct gf_server {
    uv_loop_t *loop;
    const gf_config *cfg;
    gf_engine *engine;
    gf_slot_ring ring;
    gf_completion done;     /* engines push finished slots here            */
    uv_poll_t listener;     /* the listening socket's readiness             */
    int listener_fd;        /* the listening socket, or -1                  */
    int reserve_fd;         /* kept open to answer one client at EMFILE     */
    uv_timer_t watchdog;    /* frame deadlines                              */
    uv_timer_t sampler;     /* rates and loop utilisation, once a second    */
    uv_timer_t drain_timer; /* bounds a graceful stop                       */
    uv_idle_t poller;        /* completion = poll, hybrid: runs while the
                                engine polls submissions, so the loop never
                                sleeps then, and (poll) GF_POLL_LINGER_NS
                                after                                       */
    enum gf_completion_mode completion; /* in effect: the CPU engine's is host_func */
    uint64_t poll_last_ns;    /* the poller's last run, or its start        */
    uint64_t poll_quiet_ns;   /* when it found nothing left to poll          */
    gf_trace trace;         /* the last frames' stage times (TRACE)         */
    int listen_fd;          /* >= 0: a socket passed by systemd             */
    gf_stats stats;
    gf_conn *conns;                       /* live connections                       */
    gf_conn *waiting_head, *waiting_tail; /* paused for want of a slot, FIFO        */
    gf_conn *turn; /* the waiter being resumed: it may claim one slot past the queue */
    uint64_t next_conn_id;
    uint32_t slots_in_flight;      /* submitted and not yet completed              */
    uint64_t submit_seq;           /* frames submitted: picks the ones to time     */
    gf_log_budget close_log;       /* lines about connections we refuse or close   */
    uint64_t loose_bytes;          /* all connections' unwritten loose replies       */
    uint64_t loose_since_trim_bytes; /* of them, bytes queued since the heap was last
                                        trimmed (gf__server_trim_if_idle)           */
    unsigned output_throttled : 1; /* a connection stopped for max_output_bytes_total */
    unsigned listening : 1;
    unsigned draining : 1;
    unsigned failed : 1; /* fatal engine failure or drain timeout         */
    unsigned handles_closed : 1;
};

/* ---- listener.c ------------------------------------------------------------ */

/* Listens on `fd` when >= 0 (passed by systemd), else binds `path` with the
 * configured mode.  Returns 0 or a negative errno, logged. */
int gf__listener_open(gf_server *srv, int fd, const char *path);

/* Stops accepting and closes the listening socket (its path is unlinked
 * unless systemd owns it). */
void gf__listener_close(gf_server *srv);

/* ---- conn.c ---------------------------------------------------------------- */

/* Serves the accepted socket `fd` (non-blocking, close-on-exec) from the
 * peer `cred`; takes `fd` in every case. */
void gf__conn_accept(gf_server *srv, int fd, uint32_t uid, uint32_t gid, uint32_t pid);

/* Goes on with a connection after something it waited for happened (a slot
 * freed, a reply went out, the server started draining): consumes what is
 * buffered, settles it after EOF, and starts or stops reading. */
void gf__conn_resume(gf_conn *c);

/* Writes, in order, every reply at the head of the queue that is ready. */
void gf__conn_flush(gf_conn *c);

/* The watchdog's round: closes the connection if a request it began, its
 * replies or its silence outlasted request_timeout_ms, write_timeout_ms or
 * idle_timeout_ms (all at `now_ns`).  Each close is counted and logged. */
void gf__conn_check_deadlines(gf_conn *c, uint64_t now_ns);

/* Stopping: the connection's socket had nothing more to read (see conn.c). */
void gf__conn_input_drained(gf_conn *c);

/* Its client is not reading while others wait for slots: moves its results
 * out of their slots, within max_output_bytes (conn.c). */
void gf__conn_evict_results(gf_conn *c);

/* A slot completed: the connection's batch held open for more frames goes
 * to the engine (unless it is being filled right now). */
void gf__conn_submit_held(gf_conn *c);

/* Closes the connection; see conn.c for what happens to its frames. */
void gf__conn_close(gf_conn *c);

/* A reply is done with, written (`delivered`) or dropped; see conn.c. */
void gf__reply_finish(gf_queued_reply *r, int delivered);

/* Encodes a reply header into `out`: the one place replies' headers are built.
 * `version` is the request's; `flags` GF_FLAG_SHM on a shm RESULT, else 0. */
void gf__reply_header(uint8_t out[GF_HEADER_BYTES], uint8_t version, uint8_t type, uint16_t flags,
                      uint64_t frame_id, uint32_t pipeline_id, uint32_t status,
                      uint64_t payload_bytes);

/* ---- server.c -------------------------------------------------------------- */

/* Ends the batch of the open slot `s`: it goes to the engine with its
 * frames, or back to the ring when it holds none.  On the engine's refusal
 * every frame's ERROR reply is made ready here. */
void gf__server_close_batch(gf_server *srv, gf_slot *s);

/* `c` needs a slot and none is free: it waits, in arrival order. */
void gf__server_wait_for_slot(gf_server *srv, gf_conn *c);

/* Takes `c` off the slot-waiter queue, if it is on it. */
void gf__server_stop_waiting(gf_server *srv, gf_conn *c);

/* A slot went back to the ring: wake waiters, and finish a drain. */
void gf__server_slot_freed(gf_server *srv);

/* During a drain: once nothing is in flight or owed, close every handle. */
void gf__server_check_drained(gf_server *srv);

/* A reply was finished: if the daemon is now idle after a burst of loose
 * replies, the heap gives its free memory back (server.c, "memory"). */
void gf__server_trim_if_idle(gf_server *srv);

/* ---- introspect.c ---------------------------------------------------------- */

/* A RESULT was written: count it, add its phases, keep it for TRACE. */
void gf__frame_answered(gf_server *srv, const gf_conn *c, const gf_frame *f);

/* The LIST, STATS and TRACE reply documents (STATS.md); NULL without memory. */
cJSON *gf__list_document(const gf_server *srv);
cJSON *gf__stats_document(gf_server *srv);
cJSON *gf__trace_document(const gf_server *srv, uint32_t max_frames);

#endif

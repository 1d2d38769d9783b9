/* SPDX-License-Identifier: MIT */
/*
 * libgpuframe: a pipelined client for gpuframed's Unix socket.
 *
 * Requests live in a ring from the moment they are queued until they have
 * been both written completely and answered.  Two cursors walk the ring: the
 * write cursor (the oldest request not yet written completely) and the reply
 * cursor (the oldest request without a reply).  The reply cursor may pass the
 * write cursor by one request: the daemon may refuse a frame from its header
 * and answer before the payload has been written.
 *
 * Replies are read through a small staging buffer, so that many small replies
 * cost one recv(); once a large payload's header has been parsed, the rest of
 * that payload is read straight into the payload buffer.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include "libgpuframe.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "device_alloc.h"
#include "list_names.h"
#include "util.h"

/* Staging buffer for replies: holds a header plus many small payloads, so a
 * window of small results is read with one system call. */
#define READ_BUFFER_BYTES (64u * 1024u)
/* iovecs per sendmsg(): a header and a payload each for 32 requests, enough
 * to write a whole window of small frames at once, far below IOV_MAX. */
#define WRITE_IOV_MAX 64
/* Ring slots allocated at connect; the ring doubles when full. */
#define RING_INITIAL_COUNT 16
/* Payload buffers are allocated with this alignment (and size multiple), so
 * float results can be read in place. */
#define PAYLOAD_ALIGN_BYTES 64
/* Longest message kept for gf_client_error(). */
#define ERROR_MESSAGE_BYTES 320
/* Zeros that pad the rest of a frame the daemon answered before its payload
 * was written: the daemon discards that payload, and the caller may already
 * have freed it. */
#define PAD_ZERO_BYTES (64u * 1024u)

static const unsigned char pad_zeros[PAD_ZERO_BYTES];

/* One request, kept until it has been written completely and answered. */
struct gf_request {
    unsigned char header[GF_HEADER_BYTES];  /* encoded header, written first        */
    const void *data;                       /* caller's payload; NULL: send zeros   */
    size_t data_bytes;                      /* length of `data`                     */
    size_t written_bytes;                   /* of header + data written so far      */
    uint64_t frame_id;                      /* the reply must echo it               */
    uint8_t type;                           /* request type; decides reply types    */
    int shm;                                /* data is `desc` (moves with the ring) */
    uint16_t ref_flags;                     /* by reference: GF_FLAG_SHM or _DEVICE */
    unsigned char desc[GF_SHM_FRAME_BYTES]; /* a shm frame's descriptor            */
};

struct gf_client {
    int fd; /* the connected socket, non-blocking, close-on-exec */

    /* Request ring: ring[seq & (ring_count - 1)] is request number `seq`;
     * live requests are min(write_seq, reply_seq) .. tail_seq - 1. */
    struct gf_request *ring;
    size_t ring_count;  /* a power of two                             */
    uint64_t write_seq; /* oldest request not yet written completely  */
    uint64_t reply_seq; /* oldest request whose reply has not arrived */
    uint64_t tail_seq;  /* number the next queued request gets        */

    /* Staging buffer: bytes rbuf[rbuf_start .. rbuf_end) are read, unparsed. */
    unsigned char *rbuf;
    size_t rbuf_start, rbuf_end;

    /* The reply being received once its header has been parsed. */
    int have_header;     /* nonzero from header parsed to reply delivered */
    int cur_answers;     /* nonzero when `cur` answers request reply_seq  */
    gf_header cur;       /* its header                                    */
    size_t payload_have; /* payload bytes of `cur` received so far        */

    /* Payload buffer, reused across replies, grown up to max_reply_bytes. */
    unsigned char *payload;
    size_t payload_cap;
    uint64_t max_reply_bytes;

    /* The daemon's LIST document, NUL-terminated, fetched by the first
     * gf_client_pipeline_id; NULL before.  A daemon keeps its pipelines'
     * names and ids while it runs, so it is never fetched again. */
    char *list_json;
    size_t list_bytes;

    /* The scheduling options of the frames queued from now on
     * (gf_client_set_frame_options): a deadline this long after queueing
     * (0: none), GF_FLAG_LATEST. */
    uint32_t frame_deadline_us;
    int frame_latest;
    unsigned frame_class; /* gf_client_set_priority: GF_CLASS_*, 0: none named */

    /* Connection state. */
    int write_closed;                /* a send failed with EPIPE/ECONNRESET: write no more */
    int read_closed;                 /* recv saw EOF or ECONNRESET: nothing more arrives   */
    int sticky_err;                  /* -EPROTO/-EMSGSIZE once the stream is lost, else 0  */
    char error[ERROR_MESSAGE_BYTES]; /* gf_client_error()                   */
};

static void set_error(gf_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats the message gf_client_error() returns into c->error. */
static void set_error(gf_client *c, const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    gf_verrorf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
}

/* Records a sticky error: the reply stream can no longer be followed. */
static int fail_sticky(gf_client *c, int err) {
    assert(err < 0);
    c->sticky_err = err;
    return err;
}

/* Copies up to `len` bytes of untrusted text into out[out_len], replacing
 * control characters with '?', always NUL-terminated. */
static void sanitize_text(const void *text, size_t len, char *out, size_t out_len) {
    const unsigned char *s = text;
    size_t n = 0;

    assert(out_len > 0);
    for (size_t i = 0; i < len && n + 1 < out_len; i++)
        out[n++] = (s[i] < 0x20 || s[i] == 0x7F) ? '?' : (char)s[i];
    out[n] = '\0';
}

/* Milliseconds left until `deadline_ms` for poll(): -1 when there is no
 * deadline (timeout_ms < 0), 0 when it has passed. */
static int remaining_ms(int timeout_ms, uint64_t deadline_ms) {
    if (timeout_ms < 0)
        return -1;
    uint64_t now = gf_now_ms();
    if (now >= deadline_ms)
        return 0;
    uint64_t left = deadline_ms - now;
    return left > (uint64_t)timeout_ms ? timeout_ms : (int)left;
}

static struct gf_request *request_at(const gf_client *c, uint64_t seq) {
    return &c->ring[seq & (c->ring_count - 1)];
}

static uint64_t oldest_live_seq(const gf_client *c) {
    return c->write_seq < c->reply_seq ? c->write_seq : c->reply_seq;
}

static int has_unwritten(const gf_client *c) {
    return c->write_seq < c->tail_seq;
}

int gf_client_connect(const char *socket_path, gf_client **out) {
    struct sockaddr_un sa;
    gf_client *c = NULL;
    int fd = -1, err;

    if (socket_path == NULL || out == NULL || socket_path[0] == '\0')
        return -EINVAL;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);

    c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->fd = -1;
    c->ring_count = RING_INITIAL_COUNT;
    c->ring = calloc(c->ring_count, sizeof *c->ring);
    c->rbuf = malloc(READ_BUFFER_BYTES);
    c->max_reply_bytes = GF_CLIENT_DEFAULT_MAX_REPLY_BYTES;
    if (c->ring == NULL || c->rbuf == NULL) {
        err = -ENOMEM;
        goto fail;
    }

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = -errno;
        goto fail;
    }
    /* Blocking connect: for AF_UNIX it completes at once or fails, waiting
     * only while the listen backlog is full; after EINTR it is simply
     * retried (the attempt left no state behind). */
    while (connect(fd, (const struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno != EINTR) {
            err = -errno;
            goto fail;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        err = -errno;
        goto fail;
    }
    c->fd = fd;
    *out = c;
    return 0;

fail:
    if (fd >= 0)
        close(fd);
    free(c->rbuf);
    free(c->ring);
    free(c);
    return err;
}

void gf_client_close(gf_client *c) {
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->list_json);
    free(c->payload);
    free(c->rbuf);
    free(c->ring);
    free(c);
}

const char *gf_client_error(const gf_client *c) {
    return c->error;
}

int gf_client_set_max_reply_bytes(gf_client *c, uint64_t max_bytes) {
    if (max_bytes > SIZE_MAX)
        return -EINVAL;
    c->max_reply_bytes = max_bytes;
    return 0;
}

size_t gf_client_in_flight(const gf_client *c) {
    return (size_t)(c->tail_seq - c->reply_seq);
}

int gf_client_fd(const gf_client *c) {
    return c->fd;
}

/* Doubles the ring, keeping every live request at its sequence number. */
static int grow_ring(gf_client *c) {
    size_t count = c->ring_count * 2;
    struct gf_request *ring = calloc(count, sizeof *ring);

    if (ring == NULL)
        return -ENOMEM;
    for (uint64_t seq = oldest_live_seq(c); seq < c->tail_seq; seq++)
        ring[seq & (count - 1)] = *request_at(c, seq);
    free(c->ring);
    c->ring = ring;
    c->ring_count = count;
    return 0;
}

/* The protocol version a request of `type` with `flags` needs: 4 for the
 * device messages, 3 for a FRAME's scheduling flags, 2 for the
 * shared-memory ones, else 1. */
static uint8_t request_version(uint8_t type, uint16_t flags) {
    if (flags & GF_FLAG_DEVICE || type == GF_MSG_DEVICE_REGION_ADD)
        return GF_PROTOCOL_VERSION_DEVICE;
    if (flags & GF_FLAGS_SCHED)
        return GF_PROTOCOL_VERSION_SCHED;
    if (flags != 0 || type == GF_MSG_REGION_ADD || type == GF_MSG_REGION_REMOVE)
        return GF_PROTOCOL_VERSION_SHM;
    return GF_PROTOCOL_VERSION;
}

/* Appends a request to the ring; the header is encoded now, in the version
 * its type and `flags` need (request_version), with the connection's
 * scheduling options on a FRAME. */
static int queue_request_flags(gf_client *c, uint8_t type, uint16_t flags, uint32_t pipeline_id,
                               uint64_t frame_id, const void *data, size_t len) {
    if (c->sticky_err)
        return c->sticky_err;
    if (c->write_closed || c->read_closed)
        return -EPIPE;
    if (c->tail_seq - oldest_live_seq(c) == c->ring_count) {
        int err = grow_ring(c);
        if (err < 0)
            return err;
    }

    struct gf_request *r = request_at(c, c->tail_seq);
    uint32_t status = GF_OK;
    if (type == GF_MSG_FRAME && c->frame_deadline_us > 0) {
        flags |= GF_FLAG_DEADLINE;
        status = gf_deadline_encode(gf_now_ns() + (uint64_t)c->frame_deadline_us * 1000u);
    }
    if (type == GF_MSG_FRAME && c->frame_latest)
        flags |= GF_FLAG_LATEST;
    if (type == GF_MSG_FRAME)
        flags |= (uint16_t)(c->frame_class << GF_FLAG_CLASS_SHIFT);
    gf_header h = {
        .version = request_version(type, flags),
        .type = type,
        .flags = flags,
        .frame_id = frame_id,
        .pipeline_id = pipeline_id,
        .status = status,
        .payload_bytes = len,
    };
    gf_header_encode(&h, r->header);
    r->data = len > 0 ? data : NULL;
    r->data_bytes = len;
    r->written_bytes = 0;
    r->frame_id = frame_id;
    r->type = type;
    r->shm = 0;
    r->ref_flags = 0;
    c->tail_seq++;
    return 0;
}

static int queue_request(gf_client *c, uint8_t type, uint32_t pipeline_id, uint64_t frame_id,
                         const void *data, size_t len) {
    return queue_request_flags(c, type, 0, pipeline_id, frame_id, data, len);
}

/* Queues a frame by reference with `flags` (GF_FLAG_SHM or GF_FLAG_DEVICE)
 * and the descriptor `desc`. */
static int send_frame_ref(gf_client *c, uint16_t flags, uint32_t pipeline_id, uint64_t frame_id,
                          const gf_shm_frame *desc) {
    int err = queue_request_flags(c, GF_MSG_FRAME, flags, pipeline_id, frame_id, NULL,
                                  GF_SHM_FRAME_BYTES);
    if (err < 0)
        return err;
    struct gf_request *r = request_at(c, c->tail_seq - 1);
    gf_shm_frame_encode(desc, r->desc);
    r->shm = 1;
    r->ref_flags = flags;
    return 0;
}

int gf_client_set_frame_options(gf_client *c, uint32_t deadline_us, int latest_only) {
    if (deadline_us > GF_CLIENT_DEADLINE_US_MAX)
        return -EINVAL;
    c->frame_deadline_us = deadline_us;
    c->frame_latest = latest_only != 0;
    return 0;
}

int gf_client_set_priority(gf_client *c, unsigned cls) {
    if (cls >= GF_CLASS_COUNT_)
        return -EINVAL;
    c->frame_class = cls;
    return 0;
}

int gf_client_send_frame_shm(gf_client *c, uint32_t pipeline_id, uint64_t frame_id,
                             const gf_shm_frame *desc) {
    return send_frame_ref(c, GF_FLAG_SHM, pipeline_id, frame_id, desc);
}

int gf_client_send_frame_device(gf_client *c, uint32_t pipeline_id, uint64_t frame_id,
                                const gf_shm_frame *desc) {
    return send_frame_ref(c, GF_FLAG_DEVICE, pipeline_id, frame_id, desc);
}

int gf_client_send_frame(gf_client *c, uint32_t pipeline_id, uint64_t frame_id, const void *data,
                         size_t len) {
    if (data == NULL && len > 0)
        return -EINVAL;
    return queue_request(c, GF_MSG_FRAME, pipeline_id, frame_id, data, len);
}

/* Nonzero for the request types whose reply is a JSON document. */
static int is_json_request(uint8_t type) {
    return type == GF_MSG_LIST || type == GF_MSG_STATS || type == GF_MSG_TRACE;
}

int gf_client_send_request(gf_client *c, uint8_t type, uint64_t frame_id) {
    if (!is_json_request(type))
        return -EINVAL;
    return queue_request(c, type, 0, frame_id, NULL, 0);
}

/*
 * Writes as much of the unwritten requests as the socket takes in one
 * sendmsg().  Returns the bytes written (> 0), 0 when nothing is queued,
 * -EAGAIN when the socket is full, -EPIPE when the daemon has closed (and
 * marks the write side closed), or another negative errno.
 */
static ssize_t write_some(gf_client *c) {
    struct iovec iov[WRITE_IOV_MAX];
    int n = 0;

    if (c->write_closed)
        return -EPIPE;
    for (uint64_t seq = c->write_seq; seq < c->tail_seq && n + 2 <= WRITE_IOV_MAX; seq++) {
        struct gf_request *r = request_at(c, seq);
        size_t done = r->written_bytes;

        if (done < GF_HEADER_BYTES) {
            iov[n].iov_base = r->header + done;
            iov[n].iov_len = GF_HEADER_BYTES - done;
            n++;
            done = GF_HEADER_BYTES;
        }
        size_t data_done = done - GF_HEADER_BYTES;
        if (data_done < r->data_bytes) {
            size_t left = r->data_bytes - data_done;
            /* sendmsg() only reads through iov_base. */
            if (r->shm) {
                iov[n].iov_base = r->desc + data_done;
                iov[n].iov_len = left;
            } else if (r->data != NULL) {
                iov[n].iov_base = (void *)((const unsigned char *)r->data + data_done);
                iov[n].iov_len = left;
            } else {
                iov[n].iov_base = (void *)pad_zeros;
                iov[n].iov_len = left < PAD_ZERO_BYTES ? left : PAD_ZERO_BYTES;
            }
            n++;
            if (iov[n - 1].iov_len < left)
                break; /* the next request must not start before this one ends */
        }
    }
    if (n == 0)
        return 0;

    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n;
    ssize_t w;
    do {
        w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -EAGAIN;
        if (errno == EPIPE || errno == ECONNRESET) {
            c->write_closed = 1;
            return -EPIPE;
        }
        return -errno;
    }

    size_t left = (size_t)w;
    while (left > 0) {
        struct gf_request *r = request_at(c, c->write_seq);
        size_t need = GF_HEADER_BYTES + r->data_bytes - r->written_bytes;

        assert(c->write_seq < c->tail_seq);
        if (left < need) {
            r->written_bytes += left;
            break;
        }
        r->written_bytes += need;
        left -= need;
        r->data = NULL; /* written: the caller's buffer is no longer used */
        c->write_seq++;
    }
    return w;
}

/*
 * Reads what the socket has.  Returns the bytes read (> 0), -EAGAIN when
 * nothing is there, 0 when the daemon has closed (and marks the read side
 * closed), or another negative errno.  Called only when no whole reply is
 * buffered, so while a payload is being received the staging buffer is empty
 * and a large rest can go straight to the payload buffer.
 */
static ssize_t read_some(gf_client *c) {
    unsigned char *dst;
    size_t room;

    if (c->have_header && c->cur.payload_bytes - c->payload_have >= READ_BUFFER_BYTES) {
        assert(c->rbuf_start == c->rbuf_end);
        dst = c->payload + c->payload_have;
        room = c->cur.payload_bytes - c->payload_have;
    } else {
        /* What is left is a partial header (< GF_HEADER_BYTES) or nothing. */
        size_t left = c->rbuf_end - c->rbuf_start;
        if (c->rbuf_start > 0) {
            memmove(c->rbuf, c->rbuf + c->rbuf_start, left);
            c->rbuf_start = 0;
            c->rbuf_end = left;
        }
        dst = c->rbuf + c->rbuf_end;
        room = READ_BUFFER_BYTES - c->rbuf_end;
        assert(room > 0);
    }

    ssize_t n;
    do {
        n = recv(c->fd, dst, room, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -EAGAIN;
        if (errno != ECONNRESET)
            return -errno;
        n = 0;
    }
    if (n == 0) {
        c->read_closed = 1;
        return 0;
    }
    if (dst == c->rbuf + c->rbuf_end)
        c->rbuf_end += (size_t)n;
    else
        c->payload_have += (size_t)n;
    return n;
}

/* Nonzero when a reply of type `reply` may answer a request of type `req`. */
static int type_answers(uint8_t req, uint8_t reply) {
    if (reply == GF_MSG_ERROR)
        return 1;
    switch (req) {
    case GF_MSG_FRAME: return reply == GF_MSG_RESULT;
    case GF_MSG_LIST: return reply == GF_MSG_LIST;
    case GF_MSG_STATS: return reply == GF_MSG_STATS;
    case GF_MSG_TRACE: return reply == GF_MSG_TRACE;
    case GF_MSG_REGION_ADD: return reply == GF_MSG_REGION_ADD;
    case GF_MSG_REGION_REMOVE: return reply == GF_MSG_REGION_REMOVE;
    case GF_MSG_DEVICE_REGION_ADD: return reply == GF_MSG_DEVICE_REGION_ADD;
    }
    return 0;
}

/* Turns an error of gf_header_parse into the client's sticky error. */
static int fail_header(gf_client *c, int status, const gf_header *h) {
    if (status == GF_ERR_TOO_LARGE && h->type != GF_MSG_ERROR) {
        set_error(c, "reply of %llu bytes (%s, frame %llu) exceeds the client's cap of %llu bytes",
                  (unsigned long long)h->payload_bytes, gf_msg_type_name(h->type),
                  (unsigned long long)h->frame_id, (unsigned long long)c->max_reply_bytes);
        return fail_sticky(c, -EMSGSIZE);
    }
    set_error(c,
              "daemon sent a bad reply header (%s): version %u, type %u, flags %u, "
              "frame %llu, payload %llu bytes",
              gf_status_name((uint32_t)status), (unsigned)h->version, (unsigned)h->type,
              (unsigned)h->flags, (unsigned long long)h->frame_id,
              (unsigned long long)h->payload_bytes);
    return fail_sticky(c, -EPROTO);
}

/*
 * Decides whether the reply `h` answers the oldest request without a reply
 * (*answers = 1), is a fatal ERROR sent before a close (*answers = 0), or is
 * unexpected: returns 0 or a sticky -EPROTO.
 */
static int check_reply(gf_client *c, const gf_header *h, int *answers) {
    if ((h->type == GF_MSG_ERROR) != (h->status != GF_OK)) {
        set_error(c, "daemon sent a %s reply with status %u (%s)", gf_msg_type_name(h->type),
                  (unsigned)h->status, gf_status_name(h->status));
        return fail_sticky(c, -EPROTO);
    }
    if (c->reply_seq < c->tail_seq) {
        const struct gf_request *r = request_at(c, c->reply_seq);
        if (r->written_bytes >= GF_HEADER_BYTES && h->frame_id == r->frame_id &&
            type_answers(r->type, h->type)) {
            *answers = 1;
            return 0;
        }
    }
    if (h->type == GF_MSG_ERROR && gf_status_is_fatal(h->status)) {
        *answers = 0;
        return 0;
    }
    if (c->reply_seq < c->tail_seq) {
        const struct gf_request *r = request_at(c, c->reply_seq);
        set_error(c, "daemon sent %s for frame %llu; expected the reply to frame %llu (%s)",
                  gf_msg_type_name(h->type), (unsigned long long)h->frame_id,
                  (unsigned long long)r->frame_id, gf_msg_type_name(r->type));
    } else {
        set_error(c, "daemon sent %s for frame %llu with no request in flight",
                  gf_msg_type_name(h->type), (unsigned long long)h->frame_id);
    }
    return fail_sticky(c, -EPROTO);
}

/* Makes the payload buffer hold at least `bytes` (<= max_reply_bytes). */
static int reserve_payload(gf_client *c, size_t bytes) {
    if (bytes <= c->payload_cap)
        return 0;
    size_t cap = bytes;
    if (c->payload_cap <= SIZE_MAX / 2 && 2 * c->payload_cap > cap &&
        2 * c->payload_cap <= c->max_reply_bytes)
        cap = 2 * c->payload_cap;
    if (cap > SIZE_MAX - PAYLOAD_ALIGN_BYTES)
        return -ENOMEM;
    cap = (cap + PAYLOAD_ALIGN_BYTES - 1) / PAYLOAD_ALIGN_BYTES * PAYLOAD_ALIGN_BYTES;

    unsigned char *p = aligned_alloc(PAYLOAD_ALIGN_BYTES, cap);
    if (p == NULL)
        return -ENOMEM;
    free(c->payload); /* holds no live bytes between replies */
    c->payload = p;
    c->payload_cap = cap;
    return 0;
}

/*
 * Checks a RESULT against the FRAME `r` it answers: by reference exactly
 * when the frame was, and then with its output where the frame asked for it
 * (its region and offset) and no longer than the room given, so that a
 * caller may read reply->shm_result's range of its region.  Returns 0 or a
 * sticky -EPROTO.
 */
static int check_shm_result(gf_client *c, const struct gf_request *r, const gf_reply *reply) {
    gf_shm_frame asked;

    if (reply->shm != r->shm || reply->header.flags != r->ref_flags) {
        set_error(c, "daemon answered frame %llu %s, which was sent %s",
                  (unsigned long long)r->frame_id,
                  reply->header.flags == GF_FLAG_DEVICE ? "with a device RESULT"
                  : reply->shm                          ? "with a shm RESULT"
                                                        : "with its bytes",
                  r->ref_flags == GF_FLAG_DEVICE ? "on the device"
                  : r->shm                       ? "by reference"
                                                 : "with its bytes");
        return fail_sticky(c, -EPROTO);
    }
    if (!r->shm)
        return 0;
    /* Fields decode whatever the reserved bytes hold; a frame with those set
     * gets bad_descriptor, never a RESULT. */
    (void)gf_shm_frame_decode(r->desc, &asked);
    const gf_shm_result *got = &reply->shm_result;
    if (got->region_id != asked.region_id || got->out_offset != asked.out_offset ||
        got->out_bytes > asked.out_capacity) {
        set_error(c,
                  "daemon's shm RESULT for frame %llu says region %u offset %llu bytes %llu; "
                  "the frame asked for region %u offset %llu with room for %llu",
                  (unsigned long long)r->frame_id, (unsigned)got->region_id,
                  (unsigned long long)got->out_offset, (unsigned long long)got->out_bytes,
                  (unsigned)asked.region_id, (unsigned long long)asked.out_offset,
                  (unsigned long long)asked.out_capacity);
        return fail_sticky(c, -EPROTO);
    }
    return 0;
}

/*
 * Moves buffered bytes into the reply being received.  Returns 1 and fills
 * `*reply` when a whole reply is there, 0 when more bytes are needed, or a
 * negative errno.  Does no I/O.
 */
static int take_reply(gf_client *c, gf_reply *reply) {
    size_t avail = c->rbuf_end - c->rbuf_start;

    if (!c->have_header) {
        gf_header h;
        int answers = 0;
        int r =
            gf_header_parse(c->rbuf + c->rbuf_start, avail, GF_ROLE_CLIENT, c->max_reply_bytes, &h);
        if (r == 0)
            return 0;
        if (r < 0)
            return fail_header(c, -r, &h);
        int err = check_reply(c, &h, &answers);
        if (err < 0)
            return err;
        /* Reserve before consuming the header, so -ENOMEM can be retried. */
        err = reserve_payload(c, (size_t)h.payload_bytes);
        if (err < 0)
            return err;
        c->rbuf_start += GF_HEADER_BYTES;
        avail -= GF_HEADER_BYTES;
        c->cur = h;
        c->cur_answers = answers;
        c->have_header = 1;
        c->payload_have = 0;
    }

    size_t need = (size_t)c->cur.payload_bytes - c->payload_have;
    size_t take = need < avail ? need : avail;
    if (take > 0) {
        memcpy(c->payload + c->payload_have, c->rbuf + c->rbuf_start, take);
        c->payload_have += take;
        c->rbuf_start += take;
    }
    if (c->payload_have < c->cur.payload_bytes)
        return 0;

    reply->header = c->cur;
    reply->payload = c->cur.payload_bytes > 0 ? c->payload : NULL;
    reply->payload_bytes = (size_t)c->cur.payload_bytes;
    reply->shm = 0;
    if (c->cur.type == GF_MSG_RESULT && c->cur.flags != 0) {
        /* The parser checked its size; reserved bytes must be zero. */
        if (gf_shm_result_decode(c->payload, &reply->shm_result) < 0) {
            set_error(c, "daemon sent a shm RESULT whose reserved bytes are not zero");
            return fail_sticky(c, -EPROTO);
        }
        reply->shm = 1;
    }
    if (c->cur_answers && c->cur.type == GF_MSG_RESULT) {
        int err = check_shm_result(c, request_at(c, c->reply_seq), reply);
        if (err < 0)
            return err;
    }
    c->have_header = 0;
    if (c->cur_answers) {
        /* Answered early: the caller may free the frame once it has the
         * reply, so what is left of it goes out as zeros. */
        request_at(c, c->reply_seq)->data = NULL;
        c->reply_seq++;
    }
    return 1;
}

/* The error for a closed connection once every buffered reply is delivered. */
static int closed_error(gf_client *c) {
    if (c->have_header || c->rbuf_end > c->rbuf_start)
        set_error(c, "daemon closed the connection in the middle of a reply");
    else
        set_error(c, "daemon closed the connection with %zu request(s) without reply",
                  gf_client_in_flight(c));
    return -ECONNRESET;
}

int gf_client_recv(gf_client *c, gf_reply *reply, int timeout_ms) {
    uint64_t deadline_ms = timeout_ms >= 0 ? gf_now_ms() + (uint64_t)timeout_ms : 0;

    if (c->sticky_err)
        return c->sticky_err;
    for (;;) {
        int r = take_reply(c, reply);
        if (r < 0)
            return r;
        if (r > 0) {
            /* Keep the daemon fed before the caller processes this reply;
             * failures show again on the next call. */
            if (has_unwritten(c))
                (void)write_some(c);
            return 0;
        }
        if (c->read_closed)
            return closed_error(c);

        int progress = 0;
        if (has_unwritten(c) && !c->write_closed) {
            ssize_t w = write_some(c);
            if (w > 0)
                progress = 1;
            else if (w < 0 && w != -EAGAIN && w != -EPIPE)
                return (int)w;
        }
        ssize_t n = read_some(c);
        if (n >= 0)
            continue; /* bytes to parse, or a close to report */
        if (n != -EAGAIN)
            return (int)n;
        if (progress)
            continue;

        int wait_ms = remaining_ms(timeout_ms, deadline_ms);
        if (wait_ms == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {
            .fd = c->fd,
            .events = (short)(POLLIN | (has_unwritten(c) && !c->write_closed ? POLLOUT : 0)),
        };
        if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
            return -errno;
    }
}

int gf_client_flush(gf_client *c, int timeout_ms) {
    uint64_t deadline_ms = timeout_ms >= 0 ? gf_now_ms() + (uint64_t)timeout_ms : 0;

    if (c->sticky_err)
        return c->sticky_err;
    while (has_unwritten(c)) {
        ssize_t w = write_some(c);
        if (w > 0)
            continue;
        if (w != -EAGAIN)
            return (int)w;

        int wait_ms = remaining_ms(timeout_ms, deadline_ms);
        if (wait_ms == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
        if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

/* gf_client_request_json and gf_client_request_trace: sends a request of
 * `type` whose header carries `pipeline_id`, and returns its JSON reply. */
static int request_json(gf_client *c, uint8_t type, uint32_t pipeline_id, char **json_out,
                        int timeout_ms) {
    gf_reply reply;
    int err;

    assert(is_json_request(type));
    if (gf_client_in_flight(c) > 0)
        return -EBUSY;
    err = queue_request(c, type, pipeline_id, 0, NULL, 0);
    if (err < 0)
        return err;
    err = gf_client_recv(c, &reply, timeout_ms);
    if (err < 0)
        return err;

    if (reply.header.type == GF_MSG_ERROR) {
        char text[GF_ERROR_TEXT_MAX_BYTES + 1];
        sanitize_text(reply.payload, reply.payload_bytes, text, sizeof text);
        set_error(c, "daemon refused %s: %s: %s", gf_msg_type_name(type),
                  gf_status_name(reply.header.status), text);
        return -EREMOTEIO;
    }
    assert(reply.header.type == type);
    if (reply.payload_bytes > 0 && memchr(reply.payload, '\0', reply.payload_bytes) != NULL) {
        set_error(c, "daemon's %s reply contains a NUL byte", gf_msg_type_name(type));
        return -EPROTO;
    }
    char *json = malloc(reply.payload_bytes + 1);
    if (json == NULL)
        return -ENOMEM;
    if (reply.payload_bytes > 0)
        memcpy(json, reply.payload, reply.payload_bytes);
    json[reply.payload_bytes] = '\0';
    *json_out = json;
    return 0;
}

int gf_client_request_json(gf_client *c, uint8_t type, char **json_out, int timeout_ms) {
    if (!is_json_request(type))
        return -EINVAL;
    return request_json(c, type, 0, json_out, timeout_ms);
}

int gf_client_request_trace(gf_client *c, uint32_t max_frames, char **json_out, int timeout_ms) {
    return request_json(c, GF_MSG_TRACE, max_frames, json_out, timeout_ms);
}

/* ---- pipelines by name ------------------------------------------------------- */

/* Appends the pipelines' names, comma-separated, to the error message being
 * built (what gf_client_pipeline_id says after "it has: "). */
struct name_list {
    char *buf;
    size_t cap, len;
};

static int append_name(const char *name, size_t name_bytes, uint32_t id, void *arg) {
    struct name_list *l = arg;
    char clean[GF_LIST_NAMES_NAME_MAX + 1];

    (void)id;
    sanitize_text(name, name_bytes, clean, sizeof clean);
    int n = snprintf(l->buf + l->len, l->cap - l->len, "%s%s", l->len > 0 ? ", " : "", clean);
    if (n < 0 || (size_t)n >= l->cap - l->len)
        return 1; /* full: the message ends with what fitted */
    l->len += (size_t)n;
    return 0;
}

int gf_client_pipeline_id(gf_client *c, const char *name, uint32_t *id, int timeout_ms) {
    char why[ERROR_MESSAGE_BYTES];

    if (name == NULL || name[0] == '\0' || id == NULL)
        return -EINVAL;
    if (c->list_json == NULL) {
        int err = gf_client_request_json(c, GF_MSG_LIST, &c->list_json, timeout_ms);
        if (err < 0)
            return err;
        c->list_bytes = strlen(c->list_json);
    }
    int found = gf__list_names_find(c->list_json, c->list_bytes, name, id, why, sizeof why);
    if (found < 0) {
        set_error(c, "%s", why);
        free(c->list_json);
        c->list_json = NULL;
        return found;
    }
    if (found == 0) {
        char names[ERROR_MESSAGE_BYTES / 2] = "";
        struct name_list l = {names, sizeof names, 0};
        (void)gf__list_names_each(c->list_json, c->list_bytes, append_name, &l, why, sizeof why);
        set_error(c, "the daemon has no pipeline '%s' (it has: %s)", name,
                  l.len > 0 ? names : "none");
        return -ENOENT;
    }
    return 0;
}

/* ---- shared-memory regions --------------------------------------------------- */

/* Sends a REGION_ADD header (`payload` NULL), or a DEVICE_REGION_ADD header
 * and its 16-byte `payload`, with `fd` as SCM_RIGHTS on exactly those
 * bytes, in one sendmsg, and queues it for its reply.  Nothing else may be
 * unwritten (the fd must ride on exactly these bytes). */
static int send_region_add(gf_client *c, int fd, const uint8_t *payload, int timeout_ms) {
    uint8_t type = payload ? GF_MSG_DEVICE_REGION_ADD : GF_MSG_REGION_ADD;
    size_t len = payload ? GF_DEVICE_REGION_BYTES : 0;
    /* No data pointer: the payload goes from `bytes` below; should this
     * sendmsg never happen, the ring would send zeros in its place. */
    int err = queue_request(c, type, 0, 0, NULL, len);
    if (err < 0)
        return err;
    struct gf_request *r = request_at(c, c->tail_seq - 1);
    unsigned char bytes[GF_HEADER_BYTES + GF_DEVICE_REGION_BYTES];
    memcpy(bytes, r->header, GF_HEADER_BYTES);
    if (len)
        memcpy(bytes + GF_HEADER_BYTES, payload, len);
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = bytes, .iov_len = GF_HEADER_BYTES + len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.bytes,
                         .msg_controllen = sizeof control.bytes};
    if (fd >= 0) {
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    } else {
        /* No descriptor at all: what a broken client sends (tests). */
        msg.msg_control = NULL;
        msg.msg_controllen = 0;
    }
    uint64_t deadline_ms = timeout_ms >= 0 ? gf_now_ms() + (uint64_t)timeout_ms : 0;
    for (;;) {
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (w == (ssize_t)(GF_HEADER_BYTES + len))
            break;
        if (w >= 0) {
            /* A few bytes into an empty socket buffer go in whole or not at all. */
            set_error(c, "%s: only %zd of its %zu bytes were sent", gf_msg_type_name(type), w,
                      GF_HEADER_BYTES + len);
            return fail_sticky(c, -EPROTO);
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            err = -errno;
            if (errno == EPIPE || errno == ECONNRESET)
                c->write_closed = 1;
            return err;
        }
        int wait_ms = remaining_ms(timeout_ms, deadline_ms);
        if (wait_ms == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
        if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
            return -errno;
    }
    r->written_bytes = GF_HEADER_BYTES + len;
    c->write_seq++;
    return 0;
}

/* Receives the reply to the one request in flight: 0, or -EREMOTEIO with
 * the daemon's ERROR in gf_client_error() (and its status in *status). */
static int recv_one(gf_client *c, gf_reply *reply, uint32_t *status, int timeout_ms) {
    int err = gf_client_recv(c, reply, timeout_ms);
    if (err < 0)
        return err;
    *status = reply->header.status;
    if (reply->header.type != GF_MSG_ERROR)
        return 0;
    char text[GF_ERROR_TEXT_MAX_BYTES + 1];
    sanitize_text(reply->payload, reply->payload_bytes, text, sizeof text);
    set_error(c, "daemon refused %s: %s: %s",
              gf_msg_type_name(request_at(c, c->reply_seq - 1)->type),
              gf_status_name(reply->header.status), text);
    return -EREMOTEIO;
}

/* REGION_ADD (`payload` NULL) or DEVICE_REGION_ADD with `fd`, and its
 * reply's region info; returns as gf_client_region_add_fd. */
static int region_add(gf_client *c, int fd, const uint8_t *payload, gf_region_info *info,
                      uint32_t *status, int timeout_ms) {
    gf_reply reply;
    uint32_t st = GF_OK;
    if (gf_client_in_flight(c) > 0)
        return -EBUSY;
    int err = send_region_add(c, fd, payload, timeout_ms);
    if (err == 0)
        err = recv_one(c, &reply, &st, timeout_ms);
    if (status)
        *status = st;
    if (err == 0)
        gf_region_info_decode(reply.payload, info);
    return err;
}

int gf_client_region_add_fd(gf_client *c, int fd, gf_region_info *info, uint32_t *status,
                            int timeout_ms) {
    return region_add(c, fd, NULL, info, status, timeout_ms);
}

int gf_client_device_region_add_fd(gf_client *c, int fd, const gf_device_region *d,
                                   gf_region_info *info, uint32_t *status, int timeout_ms) {
    uint8_t payload[GF_DEVICE_REGION_BYTES];
    gf_device_region_encode(d, payload);
    return region_add(c, fd, payload, info, status, timeout_ms);
}

int gf_client_region_remove(gf_client *c, uint32_t region_id, uint32_t *status, int timeout_ms) {
    gf_reply reply;
    uint32_t st = GF_OK;
    if (gf_client_in_flight(c) > 0)
        return -EBUSY;
    int err = queue_request(c, GF_MSG_REGION_REMOVE, region_id, 0, NULL, 0);
    if (err == 0)
        err = recv_one(c, &reply, &st, timeout_ms);
    if (status)
        *status = st;
    return err;
}

int gf_client_device_region_create(gf_client *c, int device, uint64_t bytes,
                                   gf_client_device_region *out, int timeout_ms) {
    char why[256];
    gf__device_alloc a;
    int fd = -1;
    if (gf_client_in_flight(c) > 0)
        return -EBUSY;
    int err = gf__device_alloc_create(device, bytes, &a, &fd, why, sizeof why);
    if (err < 0) {
        set_error(c, "device region: %s", why);
        return err;
    }
    gf_device_region d = {.region_bytes = a.bytes, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    gf_region_info info;
    err = gf_client_device_region_add_fd(c, fd, &d, &info, NULL, timeout_ms);
    close(fd); /* the daemon holds its own copy, or none */
    if (err < 0) {
        gf__device_alloc_free(&a);
        return err;
    }
    *out = (gf_client_device_region){.id = info.region_id,
                                     .device = device,
                                     .dev_ptr = a.dev_ptr,
                                     .bytes = a.bytes,
                                     .handle = a.handle};
    return 0;
}

int gf_client_device_region_destroy(gf_client *c, gf_client_device_region *r, int timeout_ms) {
    int err = c != NULL && r->id != 0 ? gf_client_region_remove(c, r->id, NULL, timeout_ms) : 0;
    gf__device_alloc a = {
        .device = r->device, .dev_ptr = r->dev_ptr, .bytes = r->bytes, .handle = r->handle};
    gf__device_alloc_free(&a);
    r->dev_ptr = 0;
    r->id = 0;
    return err;
}

/* Whether [offset, offset + bytes) lies in `r`. */
static int device_range_ok(const gf_client_device_region *r, uint64_t offset, size_t bytes) {
    return r->dev_ptr != 0 && bytes <= r->bytes && offset <= r->bytes - bytes;
}

int gf_client_device_copy_to(const gf_client_device_region *r, uint64_t offset, const void *src,
                             size_t bytes) {
    if (!device_range_ok(r, offset, bytes))
        return -EINVAL;
    return gf__device_copy(r->device, r->dev_ptr + offset, (void *)src, bytes, 1);
}

int gf_client_device_copy_from(const gf_client_device_region *r, uint64_t offset, void *dst,
                               size_t bytes) {
    if (!device_range_ok(r, offset, bytes))
        return -EINVAL;
    return gf__device_copy(r->device, r->dev_ptr + offset, dst, bytes, 0);
}

int gf_client_region_create(gf_client *c, uint64_t bytes, gf_client_region *out, int timeout_ms) {
    if (bytes == 0 || bytes > (uint64_t)SIZE_MAX)
        return -EINVAL;
    int fd = memfd_create("gpuframe-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        set_error(c, "memfd_create: %s", strerror(errno));
        return -errno;
    }
    int err = 0;
    void *base = MAP_FAILED;
    /* Sealed against shrinking and growing: the daemon's mapping can never
     * lose its pages (SIGBUS) and the size is final. */
    if (ftruncate(fd, (off_t)bytes) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        err = -errno;
        set_error(c, "preparing a %llu-byte memfd: %s", (unsigned long long)bytes, strerror(errno));
        goto fail;
    }
    base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        err = -errno;
        set_error(c, "mapping a %llu-byte memfd: %s", (unsigned long long)bytes, strerror(errno));
        goto fail;
    }
    gf_region_info info;
    err = gf_client_region_add_fd(c, fd, &info, NULL, timeout_ms);
    if (err < 0)
        goto fail;
    out->id = info.region_id;
    out->pinned = (info.flags & GF_REGION_PINNED) != 0;
    out->base = base;
    out->bytes = bytes;
    out->fd = fd;
    return 0;

fail:
    if (base != MAP_FAILED)
        munmap(base, (size_t)bytes);
    close(fd);
    return err;
}

int gf_client_region_destroy(gf_client *c, gf_client_region *r, int timeout_ms) {
    int err = c ? gf_client_region_remove(c, r->id, NULL, timeout_ms) : 0;
    if (r->base)
        munmap(r->base, (size_t)r->bytes);
    if (r->fd >= 0)
        close(r->fd);
    r->base = NULL;
    r->fd = -1;
    return err;
}

/* ---- frame buffers in a region ------------------------------------------------- */

struct gf_client_shm {
    gf_client_region region; /* the memfd, mapped here and added to the daemon */
    uint32_t count;          /* entries                                         */
    size_t in_capacity;      /* bytes an entry's input may have                 */
    uint64_t in_stride;      /* entry i's input at i * in_stride                */
    uint64_t out_stride;     /* its output at count * in_stride + i * out_stride */
};

/* `bytes` rounded up to whole pages (at least one), or 0 on overflow. */
static uint64_t page_round(uint64_t bytes, uint64_t page) {
    if (bytes == 0)
        return page;
    return bytes > UINT64_MAX - (page - 1) ? 0 : (bytes + page - 1) / page * page;
}

int gf_client_shm_open(gf_client *c, uint32_t count, size_t in_capacity, size_t out_capacity,
                       gf_client_shm **out, int timeout_ms) {
    long page = sysconf(_SC_PAGESIZE);
    gf_client_shm *s;

    if (count == 0 || out == NULL || page <= 0)
        return -EINVAL;
    uint64_t in_stride = page_round(in_capacity, (uint64_t)page);
    uint64_t out_stride = page_round(out_capacity, (uint64_t)page);
    if (in_stride == 0 || out_stride == 0 || in_stride > UINT64_MAX / count ||
        out_stride > (UINT64_MAX - in_stride * count) / count)
        return -EINVAL;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    int err = gf_client_region_create(c, count * (in_stride + out_stride), &s->region, timeout_ms);
    if (err < 0) {
        free(s);
        return err;
    }
    s->count = count;
    s->in_capacity = in_capacity;
    s->in_stride = in_stride;
    s->out_stride = out_stride;
    *out = s;
    return 0;
}

void *gf_client_shm_frame_buffer(gf_client_shm *s, uint32_t entry) {
    if (s == NULL || entry >= s->count)
        return NULL;
    return (unsigned char *)s->region.base + entry * s->in_stride;
}

const gf_client_region *gf_client_shm_region(const gf_client_shm *s) {
    return &s->region;
}

int gf_client_send_shm(gf_client *c, gf_client_shm *s, uint32_t entry, uint32_t pipeline_id,
                       uint64_t frame_id, size_t in_bytes) {
    if (s == NULL || entry >= s->count || in_bytes > s->in_capacity)
        return -EINVAL;
    gf_shm_frame d = {
        .region_id = s->region.id,
        .in_offset = entry * s->in_stride,
        .in_bytes = in_bytes,
        .out_offset = s->count * s->in_stride + entry * s->out_stride,
        .out_capacity = s->out_stride,
    };
    return gf_client_send_frame_shm(c, pipeline_id, frame_id, &d);
}

const void *gf_client_shm_result(const gf_client_shm *s, const gf_reply *reply, size_t *bytes) {
    if (s == NULL || reply == NULL || !reply->shm || reply->header.type != GF_MSG_RESULT)
        return NULL;
    const gf_shm_result *r = &reply->shm_result;
    /* gf_client_recv checked the range against the frame's descriptor;
     * this checks that the frame was one of this set's. */
    if (r->region_id != s->region.id || r->out_offset > s->region.bytes ||
        r->out_bytes > s->region.bytes - r->out_offset)
        return NULL;
    if (bytes != NULL)
        *bytes = (size_t)r->out_bytes;
    return (const unsigned char *)s->region.base + r->out_offset;
}

int gf_client_shm_close(gf_client *c, gf_client_shm *s, int timeout_ms) {
    if (s == NULL)
        return 0;
    int err = gf_client_region_destroy(c, &s->region, timeout_ms);
    free(s);
    return err;
}

const char *gf_client_version(void) {
    return GF_VERSION;
}

/* SPDX-License-Identifier: MIT */
/*
 * gpuframed wire protocol, versions 1 to 4.
 *
 * protocol/PROTOCOL.md is the contract; this header is its C form, shared by
 * the daemon and the client.  Every message is a fixed 32-byte header followed
 * by `payload_bytes` bytes of payload.  All integers are little-endian.
 *
 *   offset size field
 *        0    4 magic          GF_MAGIC ("GFRM" on the wire)
 *        4    1 version        1; 2 for the shared-memory messages; 3 for
 *                              a FRAME's scheduling flags; 4 for device
 *                              regions (and everything 3 has)
 *        5    1 type           enum gf_msg_type
 *        6    2 flags          0, or GF_FLAG_SHM (version 2 to 4), or
 *                              GF_FLAG_DEADLINE, GF_FLAG_LATEST (3, 4), or
 *                              GF_FLAG_DEVICE (4)
 *        8    8 frame_id       chosen by the client, echoed in the reply
 *       16    4 pipeline_id    FRAME: which pipeline; replies: echoed
 *       20    4 status         replies: enum gf_status; requests: must be 0,
 *                              but a FRAME's deadline (GF_FLAG_DEADLINE)
 *       24    8 payload_bytes  length of the payload that follows
 *
 * Nothing here does I/O or allocates.
 */
#ifndef GF_PROTOCOL_H
#define GF_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "GFRM" read as a little-endian 32-bit integer. */
#define GF_MAGIC            0x4D524647u
#define GF_PROTOCOL_VERSION 1u
/* Version 2 is version 1 plus shared-memory regions: the REGION_ADD and
 * REGION_REMOVE messages and GF_FLAG_SHM.  A client marks only the messages
 * that need it as version 2; every reply carries its request's version. */
#define GF_PROTOCOL_VERSION_SHM 2u
/* Version 3 is version 2 plus a FRAME's scheduling flags, GF_FLAG_DEADLINE
 * and GF_FLAG_LATEST, and the two statuses only they bring
 * (GF_ERR_DEADLINE_EXCEEDED, GF_ERR_SUPERSEDED).  Likewise a client marks
 * only the frames that use them as version 3. */
#define GF_PROTOCOL_VERSION_SCHED 3u
/* Version 4 is version 3 plus device regions: GPU memory a client made with
 * the CUDA driver's cuMemCreate, shared as a POSIX file descriptor
 * (DEVICE_REGION_ADD), and frames whose input and output lie there
 * (GF_FLAG_DEVICE), which may carry the scheduling flags too. */
#define GF_PROTOCOL_VERSION_DEVICE 4u
#define GF_PROTOCOL_VERSION_MAX    GF_PROTOCOL_VERSION_DEVICE
/* The fixed header that precedes every payload. */
#define GF_HEADER_BYTES 32u
/* Upper bound on an ERROR reply's message text, so a client can size it. */
#define GF_ERROR_TEXT_MAX_BYTES 256u

enum gf_msg_type {
    GF_MSG_FRAME = 1,  /* client -> daemon: payload is the frame's input   */
    GF_MSG_RESULT = 2, /* daemon -> client: payload is the frame's output  */
    GF_MSG_ERROR = 3,  /* daemon -> client: status + UTF-8 message text    */
    GF_MSG_LIST = 4,   /* request: empty payload; reply: JSON of pipelines */
    GF_MSG_STATS = 5,  /* request: empty payload; reply: JSON of counters  */
    GF_MSG_TRACE = 6,  /* request: empty payload, pipeline_id = most frames
                          wanted (0: all kept); reply: JSON of stage timestamps */
    /* Version 2 only. */
    GF_MSG_REGION_ADD = 7,    /* request: empty payload, one memfd as SCM_RIGHTS;
                                 reply: gf_region_info                       */
    GF_MSG_REGION_REMOVE = 8, /* request: empty payload, pipeline_id = region
                                 id (of either kind); reply: empty            */
    /* Version 4 only. */
    GF_MSG_DEVICE_REGION_ADD = 9, /* request: gf_device_region, one cuMemCreate
                                     POSIX fd as SCM_RIGHTS; reply:
                                     gf_region_info (GF_REGION_DEVICE)       */
};

/* FRAME (version 2): the payload is a gf_shm_frame descriptor, not the input;
 * its RESULT carries the flag too and a gf_shm_result descriptor. */
#define GF_FLAG_SHM 0x0001u
/* FRAME (version 4): the same descriptor, naming a device region: the input
 * and output lie in GPU memory and the pipeline runs on them in place; its
 * RESULT carries the flag and a gf_shm_result.  Never with GF_FLAG_SHM. */
#define GF_FLAG_DEVICE 0x0002u
/* The flags that make a FRAME's or RESULT's payload a descriptor. */
#define GF_FLAGS_BY_REF (GF_FLAG_SHM | GF_FLAG_DEVICE)
/* FRAME (version 3 and 4): the header's `status` is the frame's deadline,
 * the low 32 bits of CLOCK_MONOTONIC in microseconds (gf_deadline_encode); a
 * frame not handed to the engine by then is answered GF_ERR_DEADLINE_EXCEEDED
 * without running. */
#define GF_FLAG_DEADLINE 0x0100u
/* FRAME (version 3 and 4): only the newest such frame of the connection
 * matters.  Its previous frame, if that asked the same, is of the same
 * pipeline and length and has not gone to the engine yet, is answered
 * GF_ERR_SUPERSEDED at once, and this one runs in its place. */
#define GF_FLAG_LATEST 0x0200u
/* FRAME (version 3 and 4): the frame's priority class in two bits
 * (GF_FLAG_CLASS_SHIFT), one of enum gf_priority_class: none (0) for the
 * class its connection's credentials give (the daemon's "priorities"
 * configuration), or one the client names, never above that one. */
#define GF_FLAG_CLASS_MASK  0x0C00u
#define GF_FLAG_CLASS_SHIFT 10
/* The flags a version-3 or -4 FRAME may carry besides SHM or DEVICE. */
#define GF_FLAGS_SCHED (GF_FLAG_DEADLINE | GF_FLAG_LATEST | GF_FLAG_CLASS_MASK)

/* Priority classes, highest first (PROTOCOL.md, "Scheduling flags"). */
enum gf_priority_class {
    GF_CLASS_DEFAULT = 0,  /* on the wire: the credentials' class */
    GF_CLASS_REALTIME = 1, /* live sources: slots and batches first  */
    GF_CLASS_NORMAL = 2,   /* everything not configured otherwise    */
    GF_CLASS_BATCH = 3,    /* bulk work: what is left over           */
    GF_CLASS_COUNT_ = 4
};

/* "realtime", "normal", "batch" ("default" for 0; "unknown" beyond). */
const char *gf_priority_class_name(unsigned cls);

/* The class named `name` (one of the above, "default" included), or -1. */
int gf_priority_class_parse(const char *name);

/* Payload sizes of the version-2 descriptors, fixed. */
#define GF_SHM_FRAME_BYTES     40u
#define GF_SHM_RESULT_BYTES    24u
#define GF_REGION_INFO_BYTES   16u
#define GF_DEVICE_REGION_BYTES 16u

/*
 * Status codes.  0 is success; every other value names why a message was
 * refused.  `fatal` codes (see gf_status_is_fatal) are followed by the daemon
 * closing the connection, because the byte stream can no longer be trusted.
 */
enum gf_status {
    GF_OK = 0,
    GF_ERR_BAD_MAGIC = 1,             /* fatal: header does not start with GF_MAGIC      */
    GF_ERR_BAD_VERSION = 2,           /* fatal: version is not GF_PROTOCOL_VERSION       */
    GF_ERR_BAD_TYPE = 3,              /* fatal: type unknown or not valid in a request    */
    GF_ERR_BAD_FLAGS = 4,             /* fatal: reserved flags or status were not zero    */
    GF_ERR_TOO_LARGE = 5,             /* fatal: payload_bytes over the daemon's maximum   */
    GF_ERR_UNKNOWN_PIPELINE = 6,      /* the frame's pipeline_id names no pipeline        */
    GF_ERR_BAD_LENGTH = 7,            /* the pipeline cannot take a payload of this size  */
    GF_ERR_ENGINE = 8,                /* the engine failed to run the frame               */
    GF_ERR_SHUTTING_DOWN = 9,         /* the daemon is stopping and took no new frame     */
    GF_ERR_TIMEOUT = 10,              /* the frame missed its deadline on the engine      */
    GF_ERR_INTERNAL = 11,             /* a bug or resource failure inside the daemon      */
    GF_ERR_REQUEST_TIMEOUT = 12,      /* fatal: a request was not sent in time            */
    GF_ERR_UNKNOWN_REGION = 13,       /* a region id this connection does not hold        */
    GF_ERR_BAD_DESCRIPTOR = 14,       /* a shm frame's ranges do not fit its region      */
    GF_ERR_BAD_REGION = 15,           /* REGION_ADD: no fd, or not a sealed memfd we take */
    GF_ERR_REGION_LIMIT = 16,         /* REGION_ADD: over the regions or bytes allowed    */
    GF_ERR_STRAY_FD = 17,             /* fatal: fds sent with another request, several
                                         at once, or with truncated control data        */
    GF_ERR_TOO_MANY_CONNECTIONS = 18, /* fatal: max_connections or fds exhausted     */
    GF_ERR_FORBIDDEN = 19,            /* fatal: the peer's uid/gids are not allowed       */
    GF_ERR_DEADLINE_EXCEEDED = 20,    /* its deadline passed before it could run (v3)     */
    GF_ERR_SUPERSEDED = 21,           /* a newer GF_FLAG_LATEST frame took its place (v3) */
    GF_STATUS_COUNT_ = 22
};

/* One decoded header.  Field meanings as in the table at the top. */
typedef struct gf_header {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint64_t frame_id;
    uint32_t pipeline_id;
    uint32_t status;
    uint64_t payload_bytes;
} gf_header;

/* A shared-memory FRAME's payload: where in which region its input lies and
 * where its output goes.  Encoded as 40 bytes: u32 region_id, u32 reserved
 * (0), then the four u64 fields in this order. */
typedef struct gf_shm_frame {
    uint32_t region_id;
    uint64_t in_offset, in_bytes;
    uint64_t out_offset, out_capacity;
} gf_shm_frame;

/* A shared-memory RESULT's payload: where the output was written.  24 bytes:
 * u32 region_id, u32 reserved (0), u64 out_offset, u64 out_bytes. */
typedef struct gf_shm_result {
    uint32_t region_id;
    uint64_t out_offset, out_bytes;
} gf_shm_result;

/* REGION_ADD's reply payload.  16 bytes: u32 region_id, u32 flags
 * (GF_REGION_PINNED), u64 region_bytes. */
typedef struct gf_region_info {
    uint32_t region_id;
    uint32_t flags;
    uint64_t region_bytes;
} gf_region_info;
/* The region is page-locked for the GPU's copy engines (CUDA engine). */
#define GF_REGION_PINNED 0x1u
/* The region is device memory, mapped on the GPU that holds it. */
#define GF_REGION_DEVICE 0x2u

/* DEVICE_REGION_ADD's payload: what the client says of the allocation whose
 * file descriptor comes with it.  16 bytes: u64 region_bytes (the size it
 * gave cuMemCreate), u32 handle_type (GF_DEVICE_HANDLE_POSIX_FD), u32
 * reserved (0).  The daemon believes neither: the driver's import, its
 * properties and the mapping of exactly region_bytes check them. */
typedef struct gf_device_region {
    uint64_t region_bytes;
    uint32_t handle_type;
} gf_device_region;
/* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: the one handle type taken. */
#define GF_DEVICE_HANDLE_POSIX_FD 1u

/* Nonzero for a version this code speaks: 1 to 4 (GF_PROTOCOL_VERSION to
 * GF_PROTOCOL_VERSION_MAX). */
int gf_version_known(uint32_t version);

/*
 * Which side is parsing: the daemon accepts requests (FRAME, LIST, STATS),
 * the client accepts replies (RESULT, ERROR, LIST, STATS).
 */
enum gf_parse_role { GF_ROLE_DAEMON, GF_ROLE_CLIENT };

/*
 * Parses one header from the first `len` bytes of `buf` (any alignment).
 *
 * Returns GF_HEADER_BYTES (the bytes consumed; the payload is the caller's)
 * and fills `*out` when a whole, valid header is there; 0 when fewer than
 * GF_HEADER_BYTES bytes are there ("need more"; `*out` untouched; nothing is
 * checked yet); or the negated gf_status naming the first problem found,
 * checked in wire order:
 *   magic                                  -GF_ERR_BAD_MAGIC
 *   version not gf_version_known           -GF_ERR_BAD_VERSION
 *   type not accepted by `role` in that
 *     version (REGION_* need version 2,
 *     DEVICE_REGION_ADD version 4)         -GF_ERR_BAD_TYPE
 *   flags other than GF_FLAG_SHM on a
 *     version-2 to -4 FRAME/RESULT,
 *     GF_FLAGS_SCHED on a version-3 or -4
 *     FRAME, GF_FLAG_DEVICE on a version-4
 *     FRAME/RESULT (never with SHM), or
 *     (daemon) status != 0 but a FRAME's
 *     deadline                             -GF_ERR_BAD_FLAGS
 *   payload_bytes > max_payload_bytes      -GF_ERR_TOO_LARGE
 *   (client) ERROR payload_bytes over
 *     GF_ERROR_TEXT_MAX_BYTES              -GF_ERR_TOO_LARGE
 *   (daemon) a request other than FRAME
 *     and DEVICE_REGION_ADD with a
 *     payload; a shm or device FRAME whose
 *     payload is not GF_SHM_FRAME_BYTES; a
 *     DEVICE_REGION_ADD whose payload is
 *     not GF_DEVICE_REGION_BYTES           -GF_ERR_BAD_LENGTH
 *   (client) a shm or device RESULT not of
 *     GF_SHM_RESULT_BYTES, a REGION_ADD or
 *     DEVICE_REGION_ADD reply not of
 *     GF_REGION_INFO_BYTES                 -GF_ERR_BAD_LENGTH
 * On error `*out` still holds every decoded field, so the caller can echo
 * frame_id and say what was sent.
 *
 * Every error returned here ends the connection, since the reader can no
 * longer find the next header: the daemon replies ERROR and closes without
 * reading a payload byte; a client closes.  That includes BAD_LENGTH, which
 * gf_status_is_fatal does not list because a FRAME refused by its pipeline's
 * length rule (checked by the daemon, not here) costs only that frame.
 * The client role leaves a reply's `status` unchecked: a code it does not
 * know is a per-frame error (PROTOCOL.md, "Versioning").
 * A pure function: no I/O, no allocation, no global state.
 */
int gf_header_parse(const void *buf, size_t len, enum gf_parse_role role,
                    uint64_t max_payload_bytes, gf_header *out);

/*
 * Writes GF_MAGIC plus every field of `h` exactly as given (set version to
 * GF_PROTOCOL_VERSION; tests forge bad headers this way) as GF_HEADER_BYTES
 * bytes into `buf`, which needs no alignment.  Writes nothing else.
 */
void gf_header_encode(const gf_header *h, void *buf);

/* The version-2 and -4 descriptors, to and from their fixed little-endian
 * layouts.
 * A decoder returns 0, or -GF_ERR_BAD_DESCRIPTOR (gf_device_region:
 * -GF_ERR_BAD_REGION) when a reserved field is not 0 (the buffer holds the
 * layout's size: the header parser checked it). */
void gf_shm_frame_encode(const gf_shm_frame *f, void *buf);
int gf_shm_frame_decode(const void *buf, gf_shm_frame *out);
void gf_shm_result_encode(const gf_shm_result *r, void *buf);
int gf_shm_result_decode(const void *buf, gf_shm_result *out);
void gf_region_info_encode(const gf_region_info *r, void *buf);
void gf_region_info_decode(const void *buf, gf_region_info *out);
void gf_device_region_encode(const gf_device_region *d, void *buf);
int gf_device_region_decode(const void *buf, gf_device_region *out);

/*
 * Whether the shm frame `d` fits a region of `region_bytes` when its
 * pipeline writes `out_bytes`: both ranges inside the region, the output
 * within d->out_capacity, and the input and output ranges disjoint (empty
 * ranges overlap nothing).  Overflow-safe for every 64-bit value.  Returns
 * 0, or -GF_ERR_BAD_DESCRIPTOR with the reason in why[why_len] (which names
 * region `region_id`).  Pure: the daemon calls it before any copy, and
 * tests/fuzz/fuzz_shm.c checks it against 128-bit arithmetic.
 */
int gf_shm_frame_check(const gf_shm_frame *d, uint64_t region_bytes, uint64_t out_bytes, char *why,
                       size_t why_len);

/*
 * A deadline on the wire (GF_FLAG_DEADLINE): the low 32 bits of the instant
 * on CLOCK_MONOTONIC in microseconds, which the daemon and its clients on
 * one host share.  gf_deadline_encode gives them for `deadline_ns`;
 * gf_deadline_decode gives back the instant (ns) nearest `now_ns` that has
 * them: anything within about 35 minutes of now either way, 0 for an
 * instant before the clock's start.  Pure.
 */
uint32_t gf_deadline_encode(uint64_t deadline_ns);
uint64_t gf_deadline_decode(uint32_t wire_us, uint64_t now_ns);

/* Where a device frame's input and output may start in their region: the
 * kernels read and write there in place, and a misaligned vector access on
 * the GPU is a sticky error that would end every client's work. */
#define GF_DEVICE_FRAME_ALIGN_BYTES 256u

/*
 * gf_shm_frame_check for a device frame (GF_FLAG_DEVICE), and in_offset
 * and out_offset multiples of GF_DEVICE_FRAME_ALIGN_BYTES.  Same returns;
 * fuzzed beside it.
 */
int gf_device_frame_check(const gf_shm_frame *d, uint64_t region_bytes, uint64_t out_bytes,
                          char *why, size_t why_len);

/* The name of a status code ("bad_magic", ...), or "unknown" if out of range.
 * Names are stable: they are used as stats keys and in PROTOCOL.md. */
const char *gf_status_name(uint32_t status);

/*
 * Nonzero for the codes after which the daemon always closes the connection
 * (BAD_MAGIC .. TOO_LARGE, REQUEST_TIMEOUT, STRAY_FD, TOO_MANY_CONNECTIONS,
 * FORBIDDEN).  BAD_LENGTH is not among them: see
 * gf_header_parse for the one case where it, too, ends the connection.
 */
int gf_status_is_fatal(uint32_t status);

/* The name of a message type ("frame", ...), or "unknown". */
const char *gf_msg_type_name(uint32_t type);

#ifdef __cplusplus
}
#endif

#endif

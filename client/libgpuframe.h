/* SPDX-License-Identifier: MIT */
/*
 * libgpuframe: the client library of gpuframed.
 *
 * One gf_client is one connection to the daemon's Unix socket.  Requests
 * (frames, LIST, STATS, TRACE) are only queued by the send functions; gf_client_recv
 * writes queued bytes and reads replies at the same time, so a caller can keep
 * many frames in flight without ever blocking in a write while the daemon is
 * blocked writing replies back (the pipelined window of the `gpuframe stream`
 * command).  The daemon answers every request exactly once, in the order they
 * were sent (protocol/PROTOCOL.md); the library checks that order.
 *
 * Every fallible function returns 0 or a negative errno.  When the daemon sent
 * something the library cannot accept the code is -EPROTO (or -EMSGSIZE for a
 * reply over the size cap) and gf_client_error() says what it was; those two
 * errors are sticky: the byte stream can no longer be followed, so every later
 * call returns the same code and the caller should close the client.
 *
 * A gf_client is not thread-safe: use one from one thread at a time.
 * The library links only gfprotocol and libc, and never raises SIGPIPE; it
 * reads the JSON it needs itself (a LIST's names and ids).
 *
 * Using it.  Installed, this header is <gpuframe/libgpuframe.h> beside
 * <gpuframe/protocol.h> (the wire format: gf_header, the GF_MSG_* types and
 * GF_ERR_* statuses, gf_status_name), and the library is libgpuframe.so and
 * libgpuframe.a, which hold everything they need (libc only):
 *
 *     cc prog.c $(pkg-config --cflags --libs gpuframe)
 *     cc prog.c $(pkg-config --cflags gpuframe) -l:libgpuframe.a     (static)
 *
 * examples/stream_file.c in the repository is a whole program: connect, the
 * pipeline's id by name, a window of frames from a file through it, the
 * results to a file.  The library reads what it needs of the daemon's JSON
 * (a LIST's names and ids) itself, so neither it nor a program needs a JSON
 * library; gf_client_request_json hands out the whole documents for programs
 * that want more.
 *
 * Exports.  The shared library is built with -fvisibility=hidden: it exports
 * exactly the functions declared GF_API here and the functions protocol.h
 * declares, nothing of the internals it carries.
 *
 * Versions.  The library's version is gpuframed's (gf_client_version(),
 * `pkg-config --modversion gpuframe`).  Its soname is libgpuframe.so.N, where
 * N is GF_CLIENT_ABI_VERSION below (CMake reads it from here).  N changes only
 * when a program built against an older header could misbehave with the newer
 * library: a function removed, or its signature or meaning changed; a public
 * struct (gf_reply, gf_header) or a constant changed.  Adding a function, a
 * message type or a status code keeps N; a program that calls a function
 * added later needs at least the version that added it, which the function's
 * comment names when it is not 0.1.0.  (0.1.0, the first release, has every
 * function declared here: gf_client_pipeline_id, gf_client_connect_error and
 * the gf_client_shm_* frame buffers joined the others before it was made.)
 * The wire protocol has a version of its own (GF_PROTOCOL_VERSION), which
 * the daemon and this library check.
 */
#ifndef GF_LIBGPUFRAME_H
#define GF_LIBGPUFRAME_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version: the N of the soname libgpuframe.so.N (see "Versions"). */
#define GF_CLIENT_ABI_VERSION 0

/* Marks the functions the shared library exports (see "Exports"). */
#if defined(__GNUC__)
#define GF_API __attribute__((visibility("default")))
#else
#define GF_API
#endif

/* The default cap on one reply's payload (gf_client_set_max_reply_bytes). */
#define GF_CLIENT_DEFAULT_MAX_REPLY_BYTES (1ull << 30)

/* One connection; opaque.  Created by gf_client_connect, freed by
 * gf_client_close. */
typedef struct gf_client gf_client;

/*
 * One reply as gf_client_recv returns it.  `header` is the decoded header
 * (type GF_MSG_RESULT, GF_MSG_ERROR, GF_MSG_LIST, GF_MSG_STATS or
 * GF_MSG_TRACE; `status` is GF_OK except for ERROR).  `payload` points at
 * `payload_bytes` bytes in a buffer the library owns, 64-byte aligned, valid
 * until the next call of gf_client_recv, gf_client_request_json,
 * gf_client_request_trace or gf_client_close on the same client; NULL when
 * payload_bytes is 0.  An ERROR's payload is UTF-8 text, not NUL-terminated,
 * at most GF_ERROR_TEXT_MAX_BYTES bytes.
 */
typedef struct gf_reply {
    gf_header header;
    const void *payload;
    size_t payload_bytes;
    /* A RESULT of a frame sent with gf_client_send_frame_shm (or, with
     * header.flags GF_FLAG_DEVICE, gf_client_send_frame_device): its output
     * is in the region, where shm_result says; `payload` holds the raw
     * 24-byte descriptor. */
    int shm;
    gf_shm_result shm_result;
} gf_reply;

/*
 * A shared-memory region (PROTOCOL.md, "Shared-memory frames"): a sealed
 * memfd of `bytes` mapped at `base` here and in the daemon, which knows it
 * as `id` on this connection only.  Frames sent by reference read their
 * input from it and get their output written into it, with no byte on the
 * socket.  `pinned`: the daemon page-locked it for the GPU's copy engines.
 */
typedef struct gf_client_region {
    uint32_t id;
    int pinned;
    void *base;
    uint64_t bytes;
    int fd; /* the memfd, closed by gf_client_region_destroy */
} gf_client_region;

/*
 * A device region (PROTOCOL.md, "Device frames"): `bytes` of GPU memory on
 * CUDA device `device` (this process's ordinal), made by
 * gf_client_device_region_create with the CUDA driver's cuMemCreate, mapped
 * here at `dev_ptr` (a CUdeviceptr: this process's kernels, cudaMemcpy,
 * torch.from_blob and the like use it) and in the daemon, which knows it as
 * `id` on this connection.  Frames sent with gf_client_send_frame_device
 * run on it in place, with no copy to or from the host.
 */
typedef struct gf_client_device_region {
    uint32_t id;
    int device;
    uint64_t dev_ptr;
    uint64_t bytes;  /* the size asked for, rounded up to the allocation granularity */
    uint64_t handle; /* the driver's CUmemGenericAllocationHandle */
} gf_client_device_region;

/*
 * Connects to the daemon listening on the Unix socket `socket_path` and
 * stores a new client in `*out` (untouched on failure).  Returns 0,
 * -ENAMETOOLONG when the path does not fit sun_path, -ENOMEM, or the errno of
 * socket()/connect() (-ENOENT, -ECONNREFUSED, -EACCES, ...).  The connect
 * itself blocks only while the daemon's listen backlog is full.  The socket
 * is close-on-exec and non-blocking; the caller never sees it.
 */
GF_API int gf_client_connect(const char *socket_path, gf_client **out);

/*
 * Says in one line, for a person, why gf_client_connect(socket_path, ...)
 * failed with `err` and what to do about it: no socket there ("is gpuframed
 * running? start it ..."), a socket nobody listens on (a daemon that
 * stopped or crashed), a permission problem (a directory on the path; the
 * socket's mode; or the socket's group, which the user must join: "join
 * group G (sudo usermod -aG G $USER, then log in again)", or has joined
 * since this login session began; a group that grants far more than the
 * socket, such as root, is never the one to join: the daemon should give
 * its socket a group of its own, its socket_group).  To be precise it looks at the socket
 * file (stat) and at the user and group databases; it changes nothing.
 * `how_to_point` tells how this program is pointed at another socket, e.g.
 * "pass --socket PATH / set GPUFRAMED_SOCKET" (NULL: a general phrase).
 * Writes into buf[len] (truncated to fit, NUL-terminated when len > 0) and
 * returns buf.
 */
GF_API const char *gf_client_connect_error(const char *socket_path, int err,
                                           const char *how_to_point, char *buf, size_t len);

/*
 * Closes the connection and frees the client and every buffer it owns,
 * including the last reply's payload.  Queued requests not yet written are
 * dropped; after this the library references no caller data any more.
 * NULL is accepted and ignored.
 */
GF_API void gf_client_close(gf_client *c);

/*
 * A one-line description of the most recent error that had one (a malformed
 * reply, a reply out of order, the daemon closing the connection, an ERROR
 * answer to gf_client_request_json), or "" if there was none.  The string is
 * owned by the client and valid until its next call.
 */
GF_API const char *gf_client_error(const gf_client *c);

/*
 * Sets the largest reply payload the client accepts (the receive buffer grows
 * up to it as needed; default GF_CLIENT_DEFAULT_MAX_REPLY_BYTES).  A header
 * announcing more makes gf_client_recv fail with -EMSGSIZE.  Applies from the
 * next reply header received.  Returns 0, or -EINVAL when `max_bytes` is
 * larger than SIZE_MAX.
 */
GF_API int gf_client_set_max_reply_bytes(gf_client *c, uint64_t max_bytes);

/*
 * Queues one FRAME request of `len` bytes at `data` for pipeline `pipeline_id`,
 * tagged `frame_id` (echoed by its reply).  Writes nothing: bytes go out in
 * gf_client_recv or gf_client_flush.
 *
 * `data` is referenced, not copied: it must stay valid and unmodified until
 * that frame's reply has been returned by gf_client_recv (or the client is
 * closed); from then on the library no longer touches it.  (If the daemon
 * refuses a frame before its payload has been written, the rest of the
 * payload is sent as zeros, which the daemon discards.)  The same buffer may
 * be queued several times at once.
 *
 * Returns 0; -EINVAL when `data` is NULL with `len` > 0; -ENOMEM; -EPIPE when
 * the connection is already known to be closed (call gf_client_recv to collect
 * replies that arrived before the close); or a sticky error.
 */
GF_API int gf_client_send_frame(gf_client *c, uint32_t pipeline_id, uint64_t frame_id,
                                const void *data, size_t len);

/* The longest deadline gf_client_set_frame_options takes: half an hour,
 * within what a deadline on the wire can name (PROTOCOL.md, version 3). */
#define GF_CLIENT_DEADLINE_US_MAX (1800u * 1000u * 1000u)

/*
 * Scheduling options of every frame queued on `c` from now on (by value or
 * by reference), in protocol version 3 (a daemon older than it answers
 * bad_version and closes):
 *
 * - `deadline_us` > 0: the frame must go to the engine within that many
 *   microseconds of being queued here, else it is answered ERROR
 *   deadline_exceeded without its result (CLOCK_MONOTONIC, which the daemon
 *   shares).  At most GF_CLIENT_DEADLINE_US_MAX.
 * - `latest_only`: only the newest frame matters (a live camera): a frame
 *   still waiting in the daemon, not yet on the engine, is answered ERROR
 *   superseded at once when the next frame of the same pipeline and length
 *   comes, which runs in its place.  Every frame still gets one reply, in
 *   order.
 *
 * 0 and 0 (the default) send plain frames.  Returns 0, or -EINVAL for a
 * deadline over the limit (nothing changes).
 */
GF_API int gf_client_set_frame_options(gf_client *c, uint32_t deadline_us, int latest_only);

/*
 * The priority class of the frames queued from now on: GF_CLASS_REALTIME,
 * GF_CLASS_NORMAL or GF_CLASS_BATCH (protocol.h; gf_priority_class_parse
 * reads the names), or GF_CLASS_DEFAULT (the default) for the class the
 * daemon's "priorities" configuration gives this user, which is also the
 * highest a frame may name: asking for more gets that.  A class other than
 * the default makes frames version-3 FRAMEs.  Returns 0, or -EINVAL for an
 * unknown class (nothing changes).
 */
GF_API int gf_client_set_priority(gf_client *c, unsigned cls);

/*
 * Queues one request without payload: `type` is GF_MSG_LIST, GF_MSG_STATS or
 * GF_MSG_TRACE (else -EINVAL; a TRACE queued here asks for every frame the
 * daemon keeps).  Its reply carries a JSON document (or is an ERROR).  Other
 * return values as for gf_client_send_frame.
 */
GF_API int gf_client_send_request(gf_client *c, uint8_t type, uint64_t frame_id);

/*
 * Waits for the next reply, writing queued requests while it reads, and
 * stores it in `*reply` (see gf_reply for how long its payload lives).
 * `timeout_ms` bounds the whole call: < 0 waits for ever, 0 does only the I/O
 * possible without waiting.  Replies arrive in the order the requests were
 * queued; the library checks each reply's type and frame_id against the
 * oldest request without a reply, and that its status is nonzero exactly for
 * ERROR (a fatal ERROR, which the daemon sends just before closing, is
 * delivered even if it matches no request; gf_client_in_flight then stays
 * unchanged).  pipeline_id is left to the caller to check.
 *
 * Returns 0 with one whole reply; -ETIMEDOUT (no reply yet; nothing is lost,
 * call again); -ECONNRESET once the daemon has closed the connection and every
 * reply it sent before closing has been delivered (so a final ERROR always
 * comes first); -EPROTO for a malformed, unexpected or out-of-order reply and
 * -EMSGSIZE for one over the cap (both sticky, see gf_client_error); -ENOMEM;
 * or another errno of poll()/recv()/send().  Waiting with no request in flight
 * is allowed (it notices the daemon closing) but only ends by timeout or
 * close.
 */
GF_API int gf_client_recv(gf_client *c, gf_reply *reply, int timeout_ms);

/*
 * Writes every queued request, waiting at most `timeout_ms` (< 0: for ever).
 * It does not read: if the daemon stops reading until its replies are read
 * (it does once all its slots are busy), flushing many frames ends in
 * -ETIMEDOUT; streaming callers use gf_client_recv, which does both.
 * Returns 0 when nothing is left queued, -ETIMEDOUT, -EPIPE when the daemon
 * has closed the connection (replies it sent before are still delivered by
 * gf_client_recv), a sticky error, or another errno of poll()/send().
 */
GF_API int gf_client_flush(gf_client *c, int timeout_ms);

/* The number of requests queued or sent whose replies have not yet been
 * returned by gf_client_recv. */
GF_API size_t gf_client_in_flight(const gf_client *c);

/*
 * The connection's socket, for a caller that waits in its own poll(), epoll
 * or event loop (with a finer timeout than milliseconds, or beside other
 * descriptors).  gf_client_recv reads all the socket holds and keeps the
 * replies it does not return yet, so before waiting again call
 * gf_client_recv(c, &reply, 0) until it returns -ETIMEDOUT: a reply already
 * read makes the socket no more readable.  While gf_client_flush(c, 0)
 * returns -ETIMEDOUT, requests remain unwritten: wait for writable too, and
 * then call gf_client_flush(c, 0) (or gf_client_recv) again.  The library
 * keeps owning it: never read, write or close it.
 */
GF_API int gf_client_fd(const gf_client *c);

/*
 * Sends a LIST, STATS or TRACE request (`type`; a TRACE asks for every frame
 * the daemon keeps), waits for its reply and stores a malloc'd,
 * NUL-terminated copy of the JSON document in `*json_out`, which the caller
 * frees with free().  Needs no other request in flight (-EBUSY).
 * Returns 0; -EINVAL for another `type`; -EREMOTEIO when the daemon answered
 * with an ERROR (gf_client_error has its status name and text); -EPROTO when
 * the document contains a NUL byte (not sticky: the connection stays usable);
 * or what gf_client_send_request and gf_client_recv return.  `timeout_ms` as
 * for gf_client_recv.  Invalidates the payload of the previous gf_client_recv.
 */
GF_API int gf_client_request_json(gf_client *c, uint8_t type, char **json_out, int timeout_ms);

/*
 * Like gf_client_request_json with GF_MSG_TRACE, asking for the last
 * `max_frames` frames only (0: every frame the daemon keeps).  The document
 * (daemon/STATS.md, TRACE) is the caller's to free() in `*json_out`.
 */
GF_API int gf_client_request_trace(gf_client *c, uint32_t max_frames, char **json_out,
                                   int timeout_ms);

/*
 * Looks up the pipeline named `name` in the daemon's LIST and stores its id
 * (what gf_client_send_frame takes) in *id, so that a program needs no JSON
 * parser.  The first call on a connection sends LIST and waits for it (at
 * most `timeout_ms`, as for gf_client_recv; no other request may be in
 * flight then: -EBUSY) and keeps the document; later calls read the kept one
 * and do no I/O: a daemon's pipelines keep their names and ids for as long
 * as it runs (adding, removing or renaming one needs a restart, which
 * closes the connection).  Returns 0; -ENOENT when the daemon has no
 * pipeline of that name (gf_client_error names those it has); -EINVAL for a
 * NULL or empty name; -EPROTO when the LIST document is malformed (not
 * sticky; gf_client_error says where; the next call asks again); or what
 * gf_client_request_json returns.
 */
GF_API int gf_client_pipeline_id(gf_client *c, const char *name, uint32_t *id, int timeout_ms);

/*
 * The version of the library in use, "MAJOR.MINOR.PATCH" (gpuframed's), for
 * a program to check the library it was loaded with.  A static string.
 */
GF_API const char *gf_client_version(void);

/*
 * Creates a region of `bytes`: a memfd sealed against shrinking and growing,
 * mapped here, and handed to the daemon (REGION_ADD), which maps and pins it
 * (that takes about a millisecond per MiB on the GPU engine).  No request may
 * be in flight (-EBUSY).  Returns 0 and fills *out; -EREMOTEIO when the
 * daemon refused it (gf_client_error says why: region_limit, bad_region);
 * or an errno of memfd_create/mmap or what gf_client_recv returns.
 */
GF_API int gf_client_region_create(gf_client *c, uint64_t bytes, gf_client_region *out,
                                   int timeout_ms);

/*
 * Tells the daemon to forget the region (REGION_REMOVE; it unpins it once
 * frames in flight on it are done), then unmaps and closes it here.  With
 * `c` NULL only the local side is undone (the connection is gone).  Returns
 * 0 or what gf_client_region_remove returns; the local side is undone
 * either way.
 */
GF_API int gf_client_region_destroy(gf_client *c, gf_client_region *r, int timeout_ms);

/*
 * The two requests under those, for callers that manage the memfd
 * themselves: REGION_ADD with `fd` (not closed here; -1 sends none, which the
 * daemon refuses) fills *info; REGION_REMOVE
 * of `region_id`.  No request may be in flight (-EBUSY).  Returns 0,
 * -EREMOTEIO with the daemon's status in *status (if not NULL) and text in
 * gf_client_error(), or what gf_client_recv returns.
 */
GF_API int gf_client_region_add_fd(gf_client *c, int fd, gf_region_info *info, uint32_t *status,
                                   int timeout_ms);
GF_API int gf_client_region_remove(gf_client *c, uint32_t region_id, uint32_t *status,
                                   int timeout_ms);

/*
 * Queues a frame by reference: pipeline `pipeline_id` reads desc->in_bytes
 * at desc->in_offset of region desc->region_id and writes its output at
 * desc->out_offset (at most desc->out_capacity bytes).  The reply is a RESULT
 * with reply.shm set, or an ERROR (unknown_region, bad_descriptor, ...).  The
 * input bytes must stay unchanged and the output range unread until the
 * reply arrives.  Return values as for gf_client_send_frame.
 */
GF_API int gf_client_send_frame_shm(gf_client *c, uint32_t pipeline_id, uint64_t frame_id,
                                    const gf_shm_frame *desc);

/*
 * Device regions (PROTOCOL.md, "Device frames").  The library links no
 * CUDA: it loads the driver (libcuda.so.1) at run time, on the first call
 * that needs it, and these return -ENOSYS (gf_client_error says why) where
 * there is none.
 *
 * gf_client_device_region_create allocates at least `bytes` on `device`,
 * maps it here and hands it to the daemon (DEVICE_REGION_ADD), which maps
 * it once.  No request may be in flight (-EBUSY).  Returns 0 and fills
 * *out; -EREMOTEIO when the daemon refused it (gf_client_error says why:
 * bad_region, for one on the cpu engine; region_limit); -ENOSYS, -ENODEV,
 * -ENOMEM, -EIO from the driver; or what gf_client_recv returns.
 * gf_client_device_region_destroy removes it (REGION_REMOVE: the daemon
 * unmaps it once frames in flight on it are done) and frees it here; with
 * `c` NULL only the local side is undone.  Freeing here first is safe too:
 * the daemon's mapping keeps the memory until it unmaps it.
 */
GF_API int gf_client_device_region_create(gf_client *c, int device, uint64_t bytes,
                                          gf_client_device_region *out, int timeout_ms);
GF_API int gf_client_device_region_destroy(gf_client *c, gf_client_device_region *r,
                                           int timeout_ms);

/*
 * DEVICE_REGION_ADD with `fd` (a cuMemExportToShareableHandle POSIX fd, not
 * closed here; -1 sends none, which the daemon refuses) and the payload `d`,
 * for callers that allocate themselves; fills *info.  Returns as
 * gf_client_region_add_fd.
 */
GF_API int gf_client_device_region_add_fd(gf_client *c, int fd, const gf_device_region *d,
                                          gf_region_info *info, uint32_t *status, int timeout_ms);

/*
 * Queues a device frame: pipeline `pipeline_id` reads desc->in_bytes at
 * desc->in_offset of device region desc->region_id and writes its output at
 * desc->out_offset, on the GPU in place; both offsets multiples of
 * GF_DEVICE_FRAME_ALIGN_BYTES.  The input must be written (and the writing
 * stream synchronised) before the call, and stay unchanged, and the output
 * range unread, until the reply: a RESULT with reply.shm set and
 * header.flags GF_FLAG_DEVICE, or an ERROR.  Return values as for
 * gf_client_send_frame.
 */
GF_API int gf_client_send_frame_device(gf_client *c, uint32_t pipeline_id, uint64_t frame_id,
                                       const gf_shm_frame *desc);

/*
 * Copies `bytes` from host memory `src` to `offset` of device region `r`,
 * or from there to `dst`, synchronously (cuMemcpyHtoD, cuMemcpyDtoH), for
 * a program with no CUDA code of its own (gpuframe stream --device-frames).
 * Returns 0, -EINVAL for a range outside the region, -ENOSYS or -ENODEV
 * without a driver, -EIO for a failed copy.  Any thread.
 */
GF_API int gf_client_device_copy_to(const gf_client_device_region *r, uint64_t offset,
                                    const void *src, size_t bytes);
GF_API int gf_client_device_copy_from(const gf_client_device_region *r, uint64_t offset, void *dst,
                                      size_t bytes);

/*
 * Frame buffers in shared memory: the fast path for frames from 64 KiB up
 * (docs/design.md, "Frames in shared memory").  A producer writes each frame in
 * place into a buffer the library hands out, and only a 40-byte descriptor
 * crosses the socket; the daemon copies the frame to the GPU straight from
 * those pages and writes the result into the set's memory, which the caller
 * reads in place.  No frame byte is copied by either side's CPU.
 *
 *     gf_client_shm *s;
 *     gf_client_shm_open(c, 8, frame_bytes, result_bytes, &s, timeout_ms);
 *     void *in = gf_client_shm_frame_buffer(s, i % 8);   (write frame i there)
 *     gf_client_send_shm(c, s, i % 8, pipeline_id, i, frame_bytes);
 *     ... gf_client_recv(c, &reply, timeout_ms);
 *     const void *out = gf_client_shm_result(s, &reply, &out_bytes);
 *
 * A set is one region (gf_client_region_create): `count` entries, each an
 * input of `in_capacity` bytes and an output of `out_capacity` bytes, every
 * one starting on a page of its own; inputs lie one after another, then the
 * outputs, so that consecutive frames whose size is a multiple of the page
 * size lie back to back and the daemon moves a batch of them in one copy.
 * An entry is the caller's to write again once its frame's reply has been
 * returned by gf_client_recv (and its output read: the next frame of the
 * entry writes over it).  A set belongs to its connection.
 */
typedef struct gf_client_shm gf_client_shm;

/*
 * Creates a set of `count` entries on `c` and stores it in *out (the caller
 * ends it with gf_client_shm_close).  No request may be in flight (-EBUSY).
 * Returns 0; -EINVAL for count 0 or sizes whose region overflows; -ENOMEM;
 * -EREMOTEIO when the daemon refused the region (region_limit: past its
 * max_regions or max_shm_bytes; bad_region; gf_client_error says which;
 * the connection goes on); or what gf_client_region_create returns (a
 * daemon that speaks only protocol version 1 closes the connection:
 * -ECONNRESET).
 */
GF_API int gf_client_shm_open(gf_client *c, uint32_t count, size_t in_capacity, size_t out_capacity,
                              gf_client_shm **out, int timeout_ms);

/* Entry `entry`'s input buffer: `in_capacity` writable bytes, page-aligned,
 * where the producer writes the frame; NULL when `entry` >= count. */
GF_API void *gf_client_shm_frame_buffer(gf_client_shm *s, uint32_t entry);

/* The set's region: its id, whether the daemon pinned it, where it is
 * mapped here and its size.  Owned by the set. */
GF_API const gf_client_region *gf_client_shm_region(const gf_client_shm *s);

/*
 * Queues entry `entry`'s frame: the first `in_bytes` of its input buffer
 * through pipeline `pipeline_id`, tagged `frame_id`, its output into the
 * entry's output.  The reply is a RESULT (gf_client_shm_result finds its
 * output) or an ERROR.  Returns 0, -EINVAL when `entry` >= count or
 * `in_bytes` > in_capacity, or what gf_client_send_frame_shm returns.
 */
GF_API int gf_client_send_shm(gf_client *c, gf_client_shm *s, uint32_t entry, uint32_t pipeline_id,
                              uint64_t frame_id, size_t in_bytes);

/*
 * The output of `reply`, a RESULT to a frame sent with gf_client_send_shm
 * on `s`: its address in the set's memory, its length in *bytes (if not
 * NULL).  gf_client_recv has checked that it lies where the frame asked.
 * Valid until the entry's next frame is sent or the set is closed.  NULL
 * for any other reply.
 */
GF_API const void *gf_client_shm_result(const gf_client_shm *s, const gf_reply *reply,
                                        size_t *bytes);

/*
 * Ends a set: removes its region from the daemon (REGION_REMOVE, answered
 * once the frames in flight on it are done; nothing else may be in flight:
 * -EBUSY), then unmaps and frees it here.  With `c` NULL (the connection is
 * gone) only the local side is undone.  The set is freed whatever the
 * return: 0 or what gf_client_region_remove returns.  NULL is accepted.
 */
GF_API int gf_client_shm_close(gf_client *c, gf_client_shm *s, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Frames by reference through shared memory (PROTOCOL.md, "Shared-memory
 * frames") against a real gpuframed:
 *
 * - every pipeline's shm frames match the C references (echo bit-exact),
 *   with descriptors made here and through libgpuframe's frame buffers;
 * - a RESULT that is not where its frame by reference asked (from a scripted
 *   peer) is a protocol error;
 * - every bad descriptor gets its per-frame ERROR and the connection goes on;
 * - every bad fd (none, not a memfd, unsealed, too large, over the limits,
 *   with another request, two at once) is refused as documented, while
 *   another connection keeps being served;
 * - the daemon's open fds return to their baseline after 1000 add/remove
 *   cycles and after 100 clients that leave with frames in flight.
 * The engine comes from GF_TEST_ENGINE (cpu or cuda).
 */
#define _GNU_SOURCE /* memfd_create */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

#define TEST_TIMEOUT_S 120
#define ERR_BYTES      512
#define REPLY_MS       10000
/* Enough for a window of 4 frames of 64 KiB in and 256 KiB out. */
#define REGION_BYTES (2u << 20)
#define FRAME_BYTES  (64u << 10)

static const char config_json[] =
    "{\"slots\": 2, \"max_frame_bytes\": 1048576, \"max_regions\": 4,"
    " \"max_shm_bytes\": 67108864,"
    " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"},"
    "  {\"name\": \"affine\", \"kind\": \"affine\", \"params\": {\"a\": 2.5, \"b\": -1}},"
    "  {\"name\": \"sincos\", \"kind\": \"sincos\", \"params\": {\"iters\": 4}},"
    "  {\"name\": \"rgb\", \"kind\": \"normalize_u8\", \"params\": {\"width\": 64, \"height\": 32,"
    "   \"mean\": [0.5, 0.4, 0.3], \"std\": [0.2, 0.25, 0.3]}}]}";
enum { P_ECHO, P_AFFINE, P_SINCOS, P_RGB, P_COUNT };

static gf_test_daemon daemon_;
static const char *g_engine;

/* The test's daemon on config_json, and stopping it: exit 0 after SIGTERM. */
static void start(void) {
    gf_test_ck_daemon_start(&daemon_, config_json, g_engine);
}

static void stop(void) {
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}

static gf_client *client(void) {
    return gf_test_ck_connect(daemon_.socket_path);
}

static gf_pipeline *list(gf_client *c) {
    size_t n = 0;
    gf_pipeline *p = gf_test_ck_list(c, &n);
    ck_assert_uint_eq(n, P_COUNT);
    return p;
}

/* Waits until the daemon serves exactly `open` connections (the start-up
 * probe's close may still be on its way), so fds can be counted. */
static void settle(gf_client *c, uint64_t open) {
    gf_test_ck_wait_idle(c, open, REPLY_MS, NULL);
    /* A closed connection's fd goes in the close callback, one loop turn
     * after the count drops: one more round trip lets that turn pass. */
    gf_test_ck_stat(c, "uptime_ns");
}

/* The daemon's open file descriptors, from /proc. */
static unsigned daemon_fds(void) {
    int n = gf_test_daemon_fd_count(&daemon_);
    ck_assert_msg(n >= 0, "the daemon's fds: %s", strerror(-n));
    return (unsigned)n;
}

/* Waits until the daemon's fds are back to `want` (closes are asynchronous:
 * the client's close reaches the daemon's loop a moment later). */
static void expect_fds(unsigned want) {
    unsigned got = 0;
    for (int i = 0; i < 200; i++) {
        got = daemon_fds();
        if (got == want)
            return;
        gf_test_sleep_ms(10);
    }
    char path[64], list[1024] = "", link[256];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)daemon_.pid);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char p[320];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        ssize_t n = readlink(p, link, sizeof link - 1);
        link[n > 0 ? n : 0] = '\0';
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, " %s", link);
    }
    if (d)
        closedir(d);
    ck_abort_msg("the daemon holds %u fds, expected its baseline %u:%s", got, want, list);
}

/* Sends one shm frame and returns its reply (payload copied into *r's
 * own buffer is not needed: checks happen before the next receive). */
static void shm_frame(gf_client *c, uint32_t pipeline, uint64_t id, const gf_shm_frame *d,
                      gf_reply *r) {
    ck_assert_int_eq(gf_client_send_frame_shm(c, pipeline, id, d), 0);
    int rc = gf_client_recv(c, r, REPLY_MS);
    ck_assert_msg(rc == 0, "recv: %s: %s", strerror(-rc), gf_client_error(c));
    ck_assert_uint_eq(r->header.frame_id, id);
}

/* The RESULT by reference `r` as a socket RESULT would carry its output,
 * `bytes` at `out`: what gf_test_check_result checks. */
static gf_reply as_socket_result(const gf_reply *r, const void *out, size_t bytes) {
    gf_reply view = *r;
    view.header.version = GF_PROTOCOL_VERSION;
    view.header.flags = 0;
    view.header.payload_bytes = bytes;
    view.payload = out;
    view.payload_bytes = bytes;
    return view;
}

/* An ERROR of `status` whose text contains `words`. */
static void expect_error(const gf_reply *r, uint32_t status, const char *words) {
    char text[GF_ERROR_TEXT_MAX_BYTES + 1];
    ck_assert_uint_eq(r->header.type, GF_MSG_ERROR);
    ck_assert_str_eq(gf_status_name(r->header.status), gf_status_name(status));
    memcpy(text, r->payload, r->payload_bytes);
    text[r->payload_bytes] = '\0';
    ck_assert_msg(strstr(text, words) != NULL, "ERROR text \"%s\" lacks \"%s\"", text, words);
}

/* Every pipeline, by reference, against its C reference. */
START_TEST(shm_frames_match_references) {
    start();
    gf_client *c = client();
    gf_pipeline *p = list(c);
    gf_client_region reg;
    int rc = gf_client_region_create(c, REGION_BYTES, &reg, REPLY_MS);
    ck_assert_msg(rc == 0, "region: %s", gf_client_error(c));
    ck_assert_uint_eq(reg.id, 1);
    ck_assert_int_eq(reg.pinned, strcmp(g_engine, "cuda") == 0);
    uint64_t rng = 42, id = 0;
    for (int k = 0; k < P_COUNT; k++) {
        size_t bytes = k == P_RGB ? 64u * 32u * 3u : FRAME_BYTES;
        for (int rep = 0; rep < 3; rep++, id++) {
            void *in = NULL, *ref = NULL;
            size_t ref_bytes = 0;
            char err[ERR_BYTES];
            ck_assert_msg(
                gf_test_make_frame(&p[k], bytes, &rng, &in, &ref, &ref_bytes, err, sizeof err) == 0,
                "%s", err);
            /* Input at an odd offset: nothing needs alignment. */
            uint64_t in_off = 4096 * rep + 4, out_off = REGION_BYTES / 2 + 12;
            memcpy((char *)reg.base + in_off, in, bytes);
            memset((char *)reg.base + out_off, 0xEE, ref_bytes + 64);
            gf_shm_frame d = {.region_id = reg.id,
                              .in_offset = in_off,
                              .in_bytes = bytes,
                              .out_offset = out_off,
                              .out_capacity = ref_bytes + 64};
            gf_reply r;
            shm_frame(c, p[k].id, id, &d, &r);
            ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
            ck_assert_uint_eq(r.header.version, GF_PROTOCOL_VERSION_SHM);
            ck_assert_uint_eq(r.header.flags, GF_FLAG_SHM);
            ck_assert_int_eq(r.shm, 1);
            ck_assert_uint_eq(r.shm_result.region_id, reg.id);
            ck_assert_uint_eq(r.shm_result.out_offset, out_off);
            ck_assert_uint_eq(r.shm_result.out_bytes, ref_bytes);
            gf_reply view = as_socket_result(&r, (char *)reg.base + out_off, ref_bytes);
            ck_assert_msg(gf_test_check_result(&p[k], &view, id, ref, ref_bytes, err, sizeof err) ==
                              0,
                          "%s: %s", p[k].name, err);
            if (k == P_ECHO)
                ck_assert_int_eq(memcmp(view.payload, in, bytes), 0);
            /* Nothing past the output was touched. */
            for (size_t i = 0; i < 64; i++)
                ck_assert_uint_eq(((unsigned char *)reg.base)[out_off + ref_bytes + i], 0xEE);
            free(in);
            free(ref);
        }
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.frames"), id);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.regions_open"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.region_bytes"), REGION_BYTES);
    ck_assert_int_eq(gf_client_region_destroy(c, &reg, REPLY_MS), 0);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.regions_removed"), 1);
    /* A removed region is unknown from then on. */
    gf_shm_frame d = {.region_id = 1, .in_bytes = 16, .out_offset = 4096, .out_capacity = 16};
    gf_reply r;
    shm_frame(c, P_ECHO, 99, &d, &r);
    expect_error(&r, GF_ERR_UNKNOWN_REGION, "region 1");
    free(p);
    gf_client_close(c);
    stop();
}
END_TEST

/* libgpuframe's frame buffers (gf_client_shm_*): the layout, every pipeline
 * through them with a window of frames written in place, the arguments
 * refused, and the region gone with the set. */
START_TEST(frame_buffers_are_filled_in_place) {
    enum { ENTRIES = 4, FRAMES = 12 };
    start();
    gf_client *c = client();
    gf_pipeline *p = list(c);
    uint64_t rng = 7, id = 0;
    long page = sysconf(_SC_PAGESIZE);
    char err[ERR_BYTES];

    for (int k = 0; k < P_COUNT; k++) {
        /* Not a whole number of pages: each entry still starts on its own. */
        size_t bytes = k == P_RGB ? 64u * 32u * 3u : FRAME_BYTES - 4;
        size_t out_cap = k == P_RGB ? 4 * bytes : bytes;
        size_t in_stride = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
        size_t out_stride = (out_cap + (size_t)page - 1) / (size_t)page * (size_t)page;
        gf_client_shm *s = NULL;
        int rc = gf_client_shm_open(c, ENTRIES, bytes, out_cap, &s, REPLY_MS);
        ck_assert_msg(rc == 0, "gf_client_shm_open: %s: %s", strerror(-rc), gf_client_error(c));
        const gf_client_region *reg = gf_client_shm_region(s);
        ck_assert_uint_eq(reg->bytes, ENTRIES * (in_stride + out_stride));
        ck_assert_int_eq(reg->pinned, strcmp(g_engine, "cuda") == 0);
        for (uint32_t e = 0; e < ENTRIES; e++)
            ck_assert_ptr_eq(gf_client_shm_frame_buffer(s, e), (char *)reg->base + e * in_stride);
        ck_assert_ptr_null(gf_client_shm_frame_buffer(s, ENTRIES));
        ck_assert_int_eq(gf_client_send_shm(c, s, ENTRIES, p[k].id, id, bytes), -EINVAL);
        ck_assert_int_eq(gf_client_send_shm(c, s, 0, p[k].id, id, bytes + 1), -EINVAL);

        void *in[FRAMES], *ref[FRAMES];
        size_t ref_bytes = 0;
        for (int f = 0; f < FRAMES; f++)
            ck_assert_msg(gf_test_make_frame(&p[k], bytes, &rng, &in[f], &ref[f], &ref_bytes, err,
                                             sizeof err) == 0,
                          "%s", err);
        /* ENTRIES frames in flight; entry f % ENTRIES is written when the
         * frame that used it before has its reply. */
        int sent = 0, got = 0;
        while (got < FRAMES) {
            while (sent < FRAMES && sent - got < ENTRIES) {
                uint32_t e = (uint32_t)(sent % ENTRIES);
                memcpy(gf_client_shm_frame_buffer(s, e), in[sent], bytes);
                ck_assert_int_eq(gf_client_send_shm(c, s, e, p[k].id, id + (uint64_t)sent, bytes),
                                 0);
                sent++;
            }
            gf_reply r;
            rc = gf_client_recv(c, &r, REPLY_MS);
            ck_assert_msg(rc == 0, "recv: %s: %s", strerror(-rc), gf_client_error(c));
            size_t out_bytes = 0;
            const void *out = gf_client_shm_result(s, &r, &out_bytes);
            ck_assert_ptr_eq(out, (char *)reg->base + ENTRIES * in_stride +
                                      (size_t)(got % ENTRIES) * out_stride);
            gf_reply view = as_socket_result(&r, out, out_bytes);
            ck_assert_msg(gf_test_check_result(&p[k], &view, id + (uint64_t)got, ref[got],
                                               ref_bytes, err, sizeof err) == 0,
                          "%s frame %d: %s", p[k].name, got, err);
            got++;
        }
        for (int f = 0; f < FRAMES; f++) {
            free(in[f]);
            free(ref[f]);
        }
        id += FRAMES;
        ck_assert_int_eq(gf_client_shm_close(c, s, REPLY_MS), 0);
        ck_assert_uint_eq(gf_test_ck_stat(c, "shm.regions_open"), 0);
    }
    /* A reply through the socket is no frame buffer's. */
    gf_client_shm *s = NULL;
    ck_assert_int_eq(gf_client_shm_open(c, 1, 16, 16, &s, REPLY_MS), 0);
    static const unsigned char bytes16[16] = {1};
    gf_reply r;
    ck_assert_int_eq(gf_client_send_frame(c, P_ECHO, id, bytes16, sizeof bytes16), 0);
    ck_assert_int_eq(gf_client_recv(c, &r, REPLY_MS), 0);
    ck_assert_ptr_null(gf_client_shm_result(s, &r, NULL));
    ck_assert_int_eq(gf_client_shm_close(c, s, REPLY_MS), 0);
    ck_assert_int_eq(gf_client_shm_open(c, 0, 16, 16, &s, REPLY_MS), -EINVAL);
    ck_assert_int_eq(gf_client_shm_open(c, 2, SIZE_MAX, 16, &s, REPLY_MS), -EINVAL);
    ck_assert_uint_eq(gf_test_ck_stat(c, "shm.frames"), id);
    free(p);
    gf_client_close(c);
    stop();
}
END_TEST

/* ---- a scripted peer: RESULTs the daemon never sends ---------------------------- */

/* What the peer answers a frame by reference with. */
enum peer_lie {
    LIE_OFFSET,   /* a RESULT by reference at another offset than asked        */
    LIE_LONGER,   /* a RESULT by reference longer than the room given           */
    LIE_BY_VALUE, /* the frame's bytes on the socket: a RESULT without SHM      */
    LIE_COUNT_,
};

struct peer {
    int listen_fd;
    enum peer_lie lie;
};

/* Reads exactly `len` bytes (and, with `fd`, the descriptor that came along,
 * closed at once).  Returns 0 or -1. */
static int peer_read(int conn, void *buf, size_t len, int with_fd) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (with_fd) {
        msg.msg_control = control.bytes;
        msg.msg_controllen = sizeof control.bytes;
    }
    ssize_t n = recvmsg(conn, &msg, MSG_WAITALL);
    if (with_fd) {
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        if (cm != NULL && cm->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
            close(fd);
        }
    }
    return n == (ssize_t)len ? 0 : -1;
}

/* Sends a reply header of `type` answering `req`, with `payload`. */
static int peer_reply(int conn, const gf_header *req, uint8_t type, uint16_t flags,
                      const void *payload, size_t len) {
    unsigned char buf[GF_HEADER_BYTES + 64];
    gf_header h = {.version = req->version,
                   .type = type,
                   .flags = flags,
                   .frame_id = req->frame_id,
                   .pipeline_id = req->pipeline_id,
                   .payload_bytes = len};
    gf_header_encode(&h, buf);
    memcpy(buf + GF_HEADER_BYTES, payload, len);
    return send(conn, buf, GF_HEADER_BYTES + len, MSG_NOSIGNAL) == (ssize_t)(GF_HEADER_BYTES + len)
               ? 0
               : -1;
}

/* The peer's one connection: REGION_ADD answered truly, then one frame by
 * reference answered with the lie. */
static void *peer_main(void *arg) {
    struct peer *pr = arg;
    unsigned char buf[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES];
    gf_header h;
    int conn = accept(pr->listen_fd, NULL, NULL);
    if (conn < 0)
        return NULL;
    if (peer_read(conn, buf, GF_HEADER_BYTES, 1) == 0 &&
        gf_header_parse(buf, GF_HEADER_BYTES, GF_ROLE_DAEMON, 1u << 20, &h) > 0) {
        unsigned char info[GF_REGION_INFO_BYTES];
        gf_region_info ri = {.region_id = 1, .flags = 0, .region_bytes = 8192};
        gf_region_info_encode(&ri, info);
        peer_reply(conn, &h, GF_MSG_REGION_ADD, 0, info, sizeof info);
    }
    gf_shm_frame d;
    if (peer_read(conn, buf, sizeof buf, 0) == 0 &&
        gf_header_parse(buf, GF_HEADER_BYTES, GF_ROLE_DAEMON, 1u << 20, &h) > 0 &&
        gf_shm_frame_decode(buf + GF_HEADER_BYTES, &d) == 0) {
        unsigned char res[GF_SHM_RESULT_BYTES];
        gf_shm_result sr = {.region_id = d.region_id,
                            .out_offset = d.out_offset + (pr->lie == LIE_OFFSET ? 4096 : 0),
                            .out_bytes = d.out_capacity + (pr->lie == LIE_LONGER)};
        gf_shm_result_encode(&sr, res);
        if (pr->lie == LIE_BY_VALUE)
            peer_reply(conn, &h, GF_MSG_RESULT, 0, res, 16);
        else
            peer_reply(conn, &h, GF_MSG_RESULT, GF_FLAG_SHM, res, sizeof res);
    }
    gf_test_sleep_ms(200); /* let the client read before the close */
    close(conn);
    return NULL;
}

/* gf_client_recv refuses a RESULT that is not where its frame by reference
 * asked for it, or that comes by value: the caller would read another
 * frame's memory, or past the room it gave. */
START_TEST(shm_result_elsewhere_is_a_protocol_error) {
    static const char *const words[LIE_COUNT_] = {
        [LIE_OFFSET] = "says region 1 offset 8192 bytes 4096; the frame asked for region 1 "
                       "offset 4096 with room for 4096",
        [LIE_LONGER] = "says region 1 offset 4096 bytes 4097; the frame asked for region 1 "
                       "offset 4096 with room for 4096",
        [LIE_BY_VALUE] = "answered frame 5 with its bytes, which was sent by reference",
    };
    char dir[GF_TEST_DIR_MAX], path[GF_TEST_PATH_MAX];
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/peer.sock", dir);
    struct peer pr = {.listen_fd = gf_test_ck_unix_socket(path, 1), .lie = (enum peer_lie)_i};
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, peer_main, &pr), 0);

    gf_client *c = gf_test_ck_connect(path);
    gf_client_shm *s = NULL;
    int rc = gf_client_shm_open(c, 1, 4096, 4096, &s, REPLY_MS);
    ck_assert_msg(rc == 0, "%s: %s", strerror(-rc), gf_client_error(c));
    ck_assert_int_eq(gf_client_send_shm(c, s, 0, 0, 5, 16), 0);
    gf_reply r;
    ck_assert_int_eq(gf_client_recv(c, &r, REPLY_MS), -EPROTO);
    ck_assert_msg(strstr(gf_client_error(c), words[_i]) != NULL, "'%s' lacks '%s'",
                  gf_client_error(c), words[_i]);
    ck_assert_int_eq(gf_client_recv(c, &r, 0), -EPROTO); /* sticky */
    gf_client_shm_close(NULL, s, 0);
    gf_client_close(c);
    pthread_join(thread, NULL);
    close(pr.listen_fd);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* Each bad descriptor: its ERROR, and the next frame on the connection runs. */
START_TEST(bad_descriptors_fail_only_their_frame) {
    start();
    gf_client *c = client();
    gf_client_region reg;
    ck_assert_int_eq(gf_client_region_create(c, REGION_BYTES, &reg, REPLY_MS), 0);
    const uint64_t size = REGION_BYTES;
    struct {
        uint32_t pipeline;
        gf_shm_frame d;
        uint32_t status;
        const char *words;
    } cases[] = {
        {P_ECHO,
         {.region_id = 7, .in_bytes = 16, .out_offset = 64, .out_capacity = 16},
         GF_ERR_UNKNOWN_REGION,
         "region 7"},
        {P_ECHO,
         {.region_id = 1, .in_offset = size - 8, .in_bytes = 16, .out_capacity = 16},
         GF_ERR_BAD_DESCRIPTOR,
         "input of 16 bytes at offset"},
        {P_ECHO,
         {.region_id = 1, .in_offset = UINT64_MAX - 4, .in_bytes = 16, .out_capacity = 16},
         GF_ERR_BAD_DESCRIPTOR,
         "outside region 1"},
        {P_ECHO,
         {.region_id = 1, .in_bytes = 16, .out_offset = size, .out_capacity = 16},
         GF_ERR_BAD_DESCRIPTOR,
         "output capacity of 16 bytes"},
        {P_ECHO,
         {.region_id = 1, .in_bytes = 16, .out_offset = 64, .out_capacity = UINT64_MAX},
         GF_ERR_BAD_DESCRIPTOR,
         "outside region 1"},
        {P_ECHO,
         {.region_id = 1, .in_bytes = 64, .out_offset = 4096, .out_capacity = 63},
         GF_ERR_BAD_DESCRIPTOR,
         "less than the pipeline's 64"},
        {P_RGB,
         {.region_id = 1, .in_bytes = 64 * 32 * 3, .out_offset = 8192, .out_capacity = 8192},
         GF_ERR_BAD_DESCRIPTOR,
         "less than the pipeline's 24576"},
        {P_ECHO,
         {.region_id = 1, .in_offset = 100, .in_bytes = 64, .out_offset = 163, .out_capacity = 64},
         GF_ERR_BAD_DESCRIPTOR,
         "overlap"},
        {P_AFFINE,
         {.region_id = 1, .in_bytes = 6, .out_offset = 64, .out_capacity = 64},
         GF_ERR_BAD_LENGTH,
         "affine"},
        {P_ECHO,
         {.region_id = 1, .in_bytes = (1u << 20) + 1, .out_offset = 0, .out_capacity = 1},
         GF_ERR_BAD_LENGTH,
         "max_frame_bytes"},
        {9,
         {.region_id = 1, .in_bytes = 16, .out_offset = 64, .out_capacity = 16},
         GF_ERR_UNKNOWN_PIPELINE,
         "pipeline id 9"},
    };
    uint64_t id = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_reply r;
        shm_frame(c, cases[i].pipeline, id++, &cases[i].d, &r);
        expect_error(&r, cases[i].status, cases[i].words);
        /* The connection goes on: a good frame right after. */
        memset(reg.base, (int)i, 32);
        gf_shm_frame ok = {.region_id = 1, .in_bytes = 32, .out_offset = 4096, .out_capacity = 32};
        shm_frame(c, P_ECHO, id++, &ok, &r);
        ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
        ck_assert_int_eq(memcmp((char *)reg.base + 4096, reg.base, 32), 0);
    }
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.bad_descriptor"), 7);
    ck_assert_uint_eq(gf_test_ck_stat(c, "rejected.unknown_region"), 1);
    ck_assert_int_eq(gf_client_region_destroy(c, &reg, REPLY_MS), 0);
    gf_client_close(c);
    stop();
}
END_TEST

/* A memfd of `bytes` with `seals` added (0: none). */
static int make_memfd(uint64_t bytes, int seals) {
    int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)bytes), 0);
    if (seals)
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
    return fd;
}

/* REGION_ADD with `fd`: the daemon's status, and its text contains `words`. */
static void add_refused(gf_client *c, int fd, uint32_t status, const char *words) {
    gf_region_info info;
    uint32_t got = 0;
    int rc = gf_client_region_add_fd(c, fd, &info, &got, REPLY_MS);
    ck_assert_msg(rc == -EREMOTEIO, "REGION_ADD: %s (%s)", strerror(-rc), gf_client_error(c));
    ck_assert_str_eq(gf_status_name(got), gf_status_name(status));
    ck_assert_msg(strstr(gf_client_error(c), words) != NULL, "\"%s\" lacks \"%s\"",
                  gf_client_error(c), words);
}

/* Sends `h` on a raw socket with `nfds` copies of `fd` attached. */
static void raw_send_fds(int sock, const gf_header *h, int fd, int nfds) {
    uint8_t buf[GF_HEADER_BYTES];
    gf_header_encode(h, buf);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, sizeof buf, fd, nfds), 0);
}

/* A raw connection gets a fatal stray_fd ERROR and is closed. */
static void expect_stray(int sock, const char *words) {
    gf_test_ck_raw_error(sock, GF_ERR_STRAY_FD, words, REPLY_MS, GF_TEST_CLOSES);
}

START_TEST(bad_fds_are_refused_and_closed) {
    start();
    gf_client *other = client();
    gf_pipeline *p = list(other);
    gf_client *c = client();
    settle(c, 2);
    unsigned base_fds = daemon_fds();

    add_refused(c, -1, GF_ERR_BAD_REGION, "without a file descriptor");
    int fd = make_memfd(4096, 0);
    add_refused(c, fd, GF_ERR_BAD_REGION, "F_SEAL_SHRINK");
    close(fd);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_eq(ftruncate(fileno(tmp), 4096), 0);
    add_refused(c, fileno(tmp), GF_ERR_BAD_REGION, "not a memfd");
    fclose(tmp);
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    add_refused(c, pipefd[0], GF_ERR_BAD_REGION, "not a memfd");
    close(pipefd[0]);
    close(pipefd[1]);
    fd = make_memfd(4096, F_SEAL_SHRINK | F_SEAL_WRITE);
    add_refused(c, fd, GF_ERR_BAD_REGION, "sealed against writing");
    close(fd);
    fd = make_memfd(128u << 20, F_SEAL_SHRINK); /* sparse: costs nothing */
    add_refused(c, fd, GF_ERR_REGION_LIMIT, "max_shm_bytes");
    close(fd);
    /* max_regions 4: the fifth is refused. */
    gf_client_region regs[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(gf_client_region_create(c, 4096, &regs[i], REPLY_MS), 0);
    fd = make_memfd(4096, F_SEAL_SHRINK);
    add_refused(c, fd, GF_ERR_REGION_LIMIT, "max_regions is 4");
    close(fd);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(gf_client_region_destroy(c, &regs[i], REPLY_MS), 0);
    /* The connection survived every refusal. */
    gf_client_region reg;
    ck_assert_int_eq(gf_client_region_create(c, 8192, &reg, REPLY_MS), 0);
    ck_assert_int_eq(gf_client_region_destroy(c, &reg, REPLY_MS), 0);

    /* Fatal: an fd with a LIST, two fds at once, an fd inside a payload. */
    fd = make_memfd(4096, F_SEAL_SHRINK);
    gf_header list_h = gf_test_header(GF_MSG_LIST, 3, 0, 0);
    int sock = gf_test_ck_raw_connect(daemon_.socket_path);
    raw_send_fds(sock, &list_h, fd, 1);
    expect_stray(sock, "came with a list request");
    gf_header add_h = {.version = GF_PROTOCOL_VERSION_SHM, .type = GF_MSG_REGION_ADD};
    sock = gf_test_ck_raw_connect(daemon_.socket_path);
    raw_send_fds(sock, &add_h, fd, 2);
    expect_stray(sock, "several file descriptors");
    sock = gf_test_ck_raw_connect(daemon_.socket_path);
    raw_send_fds(sock, &add_h, fd, 4);
    expect_stray(sock, "several file descriptors");
    gf_header frame_h = gf_test_header(GF_MSG_FRAME, 5, 0, 100000);
    sock = gf_test_ck_raw_connect(daemon_.socket_path);
    ck_assert_int_eq(gf_test_raw_send_header(sock, &frame_h), 0);
    gf_header junk = {.version = 1}; /* 32 payload bytes, carrying the fd */
    raw_send_fds(sock, &junk, fd, 1);
    expect_stray(sock, "with a frame");
    close(fd);

    /* Meanwhile another connection is served, and no fd stayed behind. */
    gf_test_ck_stream(
        other, &(gf_test_stream){
                   .pipeline = &p[P_ECHO], .frame_bytes = 4096, .frame_count = 20, .window = 4});
    expect_fds(base_fds);
    ck_assert_uint_eq(gf_test_ck_stat(other, "rejected.stray_fd"), 4);
    ck_assert_uint_eq(gf_test_ck_stat(other, "rejected.bad_region"), 5);
    ck_assert_uint_eq(gf_test_ck_stat(other, "rejected.region_limit"), 2);
    ck_assert_uint_eq(gf_test_ck_stat(other, "shm.regions_open"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(other, "shm.region_bytes"), 0);
    free(p);
    gf_client_close(c);
    gf_client_close(other);
    stop();
}
END_TEST

/*
 * Small shm frames of several clients at once share submissions, and on the
 * CUDA engine a batch of them moves by one kernel each way (read from and
 * written to the pinned regions across the bus) instead of a copy a frame:
 * every pipeline, every result against its reference, every other byte of
 * every region (inputs, the gaps around the results) as the client left
 * it, and STATS' host_gathered_submissions counting such batches (none on
 * the CPU engine, which copies nothing).  Frames lie with gaps between
 * them: those of the last two clients at gaps that grow, so that no three
 * are one copy; the first two clients' at one stride, so that each one's
 * frames of a batch are one 2D copy of rows with the gaps left as they
 * are, the first client's 4 bytes off 16-byte boundaries too (no kernel
 * moves them), so that their copies go beside the kernel in the same
 * batches.
 */
enum { SHARE_FRAMES = 12, SHARE_STRIDE = 64u << 10, SHARE_OUT_AT = 32u << 10, SHARE_SKEW = 4 };

/* Where client k's frame f has its input (or its result: `out`) in its
 * region in small_shm_frames_of_several_clients_share_batches. */
static size_t share_at(int k, int f, int out) {
    return (size_t)f * SHARE_STRIDE + (out ? SHARE_OUT_AT : 0) + (k == 0 ? SHARE_SKEW : 0) +
           (k >= 2 ? (size_t)f * (size_t)f * 16 : 0);
}

START_TEST(small_shm_frames_of_several_clients_share_batches) {
    enum { CONNS = 4, FRAMES = SHARE_FRAMES };
    start();
    gf_client *c[CONNS];
    gf_client_region reg[CONNS];
    unsigned char *before[CONNS];
    void *ref[CONNS][FRAMES];
    size_t ref_bytes[CONNS][FRAMES];
    for (int k = 0; k < CONNS; k++) {
        before[k] = malloc(REGION_BYTES);
        ck_assert_ptr_nonnull(before[k]);
        c[k] = client();
        ck_assert_msg(gf_client_region_create(c[k], REGION_BYTES, &reg[k], REPLY_MS) == 0, "%s",
                      gf_client_error(c[k]));
    }
    gf_pipeline *p = list(c[0]);
    uint64_t id = 1, rng = 0x5a17;
    for (int i = 0; i < P_COUNT; i++) {
        size_t bytes = i == P_RGB ? 64u * 32u * 3u : 4096u;
        uint64_t subs0 = gf_test_ck_stat(c[0], "slots.submissions"),
                 moved0 = gf_test_ck_stat(c[0], "slots.host_gathered_submissions");
        for (int k = 0; k < CONNS; k++) {
            unsigned char *base = reg[k].base;
            for (size_t b = 0; b < REGION_BYTES; b++)
                base[b] = (unsigned char)(b * 13 + (size_t)k + (size_t)i);
            for (int f = 0; f < FRAMES; f++) {
                void *in;
                char err[ERR_BYTES];
                ck_assert_msg(gf_test_make_frame(&p[i], bytes, &rng, &in, &ref[k][f],
                                                 &ref_bytes[k][f], err, sizeof err) == 0,
                              "%s", err);
                ck_assert_uint_le(share_at(k, f, 1) + ref_bytes[k][f], share_at(k, f + 1, 0));
                ck_assert_uint_le(share_at(k, f, 0) + bytes, share_at(k, f, 1));
                memcpy(base + share_at(k, f, 0), in, bytes);
                free(in);
            }
            memcpy(before[k], base, REGION_BYTES);
        }
        for (int f = 0; f < FRAMES; f++)
            for (int k = 0; k < CONNS; k++) {
                gf_shm_frame d = {.region_id = reg[k].id,
                                  .in_offset = share_at(k, f, 0),
                                  .in_bytes = bytes,
                                  .out_offset = share_at(k, f, 1),
                                  .out_capacity = ref_bytes[k][f]};
                ck_assert_int_eq(gf_client_send_frame_shm(c[k], p[i].id, id + (uint64_t)f, &d), 0);
            }
        for (int k = 0; k < CONNS; k++) /* all on their way before any reply is read */
            ck_assert_int_eq(gf_client_flush(c[k], REPLY_MS), 0);
        for (int k = 0; k < CONNS; k++) {
            unsigned char *base = reg[k].base;
            for (int f = 0; f < FRAMES; f++) {
                gf_reply r;
                char err[ERR_BYTES];
                int rc = gf_client_recv(c[k], &r, REPLY_MS);
                ck_assert_msg(rc == 0, "recv: %s: %s", strerror(-rc), gf_client_error(c[k]));
                ck_assert_uint_eq(r.header.frame_id, id + (uint64_t)f);
                ck_assert_uint_eq(r.header.type, GF_MSG_RESULT);
                ck_assert_uint_eq(r.shm_result.out_bytes, ref_bytes[k][f]);
                gf_reply view = as_socket_result(&r, base + share_at(k, f, 1), ref_bytes[k][f]);
                ck_assert_msg(gf_test_check_result(&p[i], &view, id + (uint64_t)f, ref[k][f],
                                                   ref_bytes[k][f], err, sizeof err) == 0,
                              "%s, connection %d, frame %d: %s", p[i].name, k, f, err);
                free(ref[k][f]);
            }
        }
        /* Apart from the results, each region is as its client left it. */
        for (int k = 0; k < CONNS; k++) {
            const unsigned char *base = reg[k].base;
            for (int f = 0; f < FRAMES; f++) /* checked above */
                memcpy(before[k] + share_at(k, f, 1), base + share_at(k, f, 1), ref_bytes[k][f]);
            size_t b = gf_test_first_difference(base, before[k], REGION_BYTES);
            ck_assert_msg(b == REGION_BYTES,
                          "%s, connection %d: byte %zu of the region is 0x%02x, was 0x%02x",
                          p[i].name, k, b, base[b], before[k][b]);
        }
        id += FRAMES;
        uint64_t subs = gf_test_ck_stat(c[0], "slots.submissions") - subs0,
                 moved = gf_test_ck_stat(c[0], "slots.host_gathered_submissions") - moved0;
        ck_assert_msg(subs < CONNS * FRAMES, "pipeline %s: %d frames in %llu submissions",
                      p[i].name, CONNS * FRAMES, (unsigned long long)subs);
        if (strcmp(g_engine, "cuda") == 0)
            ck_assert_msg(moved > 0 && moved <= subs,
                          "pipeline %s: %llu of %llu submissions moved shm frames by a kernel",
                          p[i].name, (unsigned long long)moved, (unsigned long long)subs);
        else
            ck_assert_uint_eq(moved, 0);
    }
    free(p);
    for (int k = 0; k < CONNS; k++) {
        free(before[k]);
        ck_assert_int_eq(gf_client_region_destroy(c[k], &reg[k], REPLY_MS), 0);
        gf_client_close(c[k]);
    }
    stop();
}
END_TEST

/* 1000 add/remove cycles, then 100 clients that leave with frames in
 * flight on their regions: fds, regions and bytes all back to baseline. */
START_TEST(fds_and_regions_return_to_baseline) {
    start();
    gf_client *watch = client();
    settle(watch, 1);
    unsigned base_fds = daemon_fds();
    gf_client *c = client();
    for (int i = 0; i < 1000; i++) {
        gf_client_region reg;
        int rc = gf_client_region_create(c, 64u << 10, &reg, REPLY_MS);
        ck_assert_msg(rc == 0, "cycle %d: %s", i, gf_client_error(c));
        ck_assert_int_eq(gf_client_region_destroy(c, &reg, REPLY_MS), 0);
    }
    gf_client_close(c);
    expect_fds(base_fds);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "shm.regions_added"), 1000);
    for (int i = 0; i < 100; i++) {
        c = client();
        gf_client_region reg;
        int rc = gf_client_region_create(c, 256u << 10, &reg, REPLY_MS);
        ck_assert_msg(rc == 0, "client %d: %s", i, gf_client_error(c));
        for (uint64_t f = 0; f < 4; f++) {
            gf_shm_frame d = {.region_id = reg.id,
                              .in_offset = f * (32u << 10),
                              .in_bytes = 32u << 10,
                              .out_offset = (128u << 10) + f * (32u << 10),
                              .out_capacity = 32u << 10};
            ck_assert_int_eq(gf_client_send_frame_shm(c, P_AFFINE, f, &d), 0);
        }
        ck_assert_int_eq(gf_client_flush(c, REPLY_MS), 0);
        gf_client_close(c); /* frames still on the engine */
        gf_client_region_destroy(NULL, &reg, 0);
    }
    expect_fds(base_fds);
    gf_test_ck_wait_stat(watch, "shm.regions_open", 0, 0, 2000);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "shm.regions_open"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "shm.region_bytes"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "frames.in_progress"), 0);
    gf_client_close(watch);
    stop();
}
END_TEST

static Suite *shm_suite(void) {
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("shm");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, shm_frames_match_references);
    tcase_add_test(tc, frame_buffers_are_filled_in_place);
    tcase_add_loop_test(tc, shm_result_elsewhere_is_a_protocol_error, 0, LIE_COUNT_);
    tcase_add_test(tc, bad_descriptors_fail_only_their_frame);
    tcase_add_test(tc, bad_fds_are_refused_and_closed);
    tcase_add_test(tc, fds_and_regions_return_to_baseline);
    tcase_add_test(tc, small_shm_frames_of_several_clients_share_batches);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_engine = gf_test_suite_engine();
    return gf_test_run(shm_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Device regions (PROTOCOL.md, "Device frames") against a real gpuframed
 * on the CPU engine, with forged requests: what every engine does before
 * any device memory is touched.
 *
 * - DEVICE_REGION_ADD is refused bad_region naming the cpu engine, the fd
 *   it carried closed, the connection served on;
 * - without an fd, with nonzero reserved bytes, another handle type or no
 *   bytes, bad_region saying so; past max_regions (memfd regions count),
 *   region_limit;
 * - a device FRAME naming no region is unknown_region, one naming a memfd
 *   region bad_descriptor (and a shm FRAME on it still runs);
 * - DEVICE_REGION_ADD of the wrong length, or below version 4, is fatal;
 * - STATS counts each refusal, and its "device_regions" object stays at zero.
 * The CUDA engine's side (regions mapped, frames run in place) is
 * test_regions_gpu.c's.
 */
#define _GNU_SOURCE /* memfd_create */
#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"
#include "wire.h"

#define TEST_TIMEOUT_S 120
#define REPLY_MS       10000
#define REGION_BYTES   (64u << 10)

static const char config_json[] = "{\"slots\": 2, \"max_frame_bytes\": 1048576, \"max_regions\": 4,"
                                  " \"pipelines\": [{\"name\": \"echo\", \"kind\": \"echo\"}]}";

static gf_test_daemon daemon_;

/* A memfd of REGION_BYTES sealed against shrinking: a valid REGION_ADD's
 * fd, and for DEVICE_REGION_ADD any fd at all. */
static int make_memfd(void) {
    int fd = memfd_create("test_device_regions", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, REGION_BYTES), 0);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    return fd;
}

/* DEVICE_REGION_ADD's 48 bytes: `bytes`, handle type `handle_type`, and
 * reserved bytes `reserved`, with the version `version` and `payload`
 * bytes announced. */
static size_t device_add(uint8_t out[GF_HEADER_BYTES + GF_DEVICE_REGION_BYTES], uint8_t version,
                         uint64_t frame_id, uint64_t payload, uint64_t bytes, uint32_t handle_type,
                         uint32_t reserved) {
    gf_header h = {.version = version,
                   .type = GF_MSG_DEVICE_REGION_ADD,
                   .frame_id = frame_id,
                   .payload_bytes = payload};
    gf_header_encode(&h, out);
    gf_device_region d = {.region_bytes = bytes, .handle_type = handle_type};
    gf_device_region_encode(&d, out + GF_HEADER_BYTES);
    out[GF_HEADER_BYTES + 12] = (uint8_t)reserved;
    return GF_HEADER_BYTES + (size_t)payload;
}

/* A version-4 FRAME of pipeline 0 with `flags` and the descriptor `d`. */
static void send_ref_frame(int sock, uint64_t frame_id, uint16_t flags, const gf_shm_frame *d) {
    uint8_t buf[GF_HEADER_BYTES + GF_SHM_FRAME_BYTES];
    gf_header h = {.version = GF_PROTOCOL_VERSION_DEVICE,
                   .type = GF_MSG_FRAME,
                   .flags = flags,
                   .frame_id = frame_id,
                   .payload_bytes = GF_SHM_FRAME_BYTES};
    gf_header_encode(&h, buf);
    gf_shm_frame_encode(d, buf + GF_HEADER_BYTES);
    ck_assert_int_eq(gf_test_raw_send(sock, buf, sizeof buf), 0);
}

/* Receives one reply that is not an ERROR, of `type` and `frame_id`;
 * its payload into payload[cap]. */
static gf_header expect_reply(int sock, uint8_t type, uint64_t frame_id, void *payload,
                              size_t cap) {
    gf_header h;
    char err[256];
    int rc = gf_test_raw_recv_reply(sock, &h, payload, cap, REPLY_MS, err, sizeof err);
    ck_assert_msg(rc == 0, "reply: %s", err);
    ck_assert_msg(h.type == type, "got a %s (status %s), expected a %s", gf_msg_type_name(h.type),
                  gf_status_name(h.status), gf_msg_type_name(type));
    ck_assert_uint_eq(h.frame_id, frame_id);
    return h;
}

START_TEST(cpu_engine_refuses_device_regions) {
    gf_test_ck_daemon_start(&daemon_, config_json, "cpu");
    gf_client *watch = gf_test_ck_connect(daemon_.socket_path);
    gf_test_ck_wait_idle(watch, 1, REPLY_MS, NULL);
    gf_test_ck_stat(watch, "uptime_ns");
    int base_fds = gf_test_daemon_fd_count(&daemon_);
    ck_assert_int_gt(base_fds, 0);

    int sock = gf_test_ck_raw_connect(daemon_.socket_path);
    uint8_t buf[GF_HEADER_BYTES + GF_DEVICE_REGION_BYTES];
    int fd = make_memfd();

    /* The CPU engine has no device memory: refused, and the fd closed. */
    size_t n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 1, GF_DEVICE_REGION_BYTES, 2u << 20,
                          GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, n, fd, 1), 0);
    gf_header h = gf_test_ck_raw_error(sock, GF_ERR_BAD_REGION, "the cpu engine", REPLY_MS,
                                       GF_TEST_STAYS_OPEN);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_DEVICE);
    ck_assert_uint_eq(h.type, GF_MSG_ERROR);
    ck_assert_uint_eq(h.frame_id, 1);

    /* Without a descriptor; with reserved bytes set (checked first). */
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 2, GF_DEVICE_REGION_BYTES, 2u << 20,
                   GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send(sock, buf, n), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_REGION, "without a file descriptor", REPLY_MS,
                         GF_TEST_STAYS_OPEN);
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 3, GF_DEVICE_REGION_BYTES, 2u << 20,
                   GF_DEVICE_HANDLE_POSIX_FD, 7);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, n, fd, 1), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_REGION, "reserved bytes", REPLY_MS, GF_TEST_STAYS_OPEN);

    /* A device frame on no region; then on a memfd region, which takes
     * frames by reference only. */
    gf_shm_frame d = {.region_id = 1, .in_bytes = 4096, .out_offset = 8192, .out_capacity = 4096};
    send_ref_frame(sock, 4, GF_FLAG_DEVICE, &d);
    gf_test_ck_raw_error(sock, GF_ERR_UNKNOWN_REGION, "region 1", REPLY_MS, GF_TEST_STAYS_OPEN);
    gf_header add = {.version = GF_PROTOCOL_VERSION_SHM, .type = GF_MSG_REGION_ADD, .frame_id = 5};
    uint8_t add_bytes[GF_HEADER_BYTES];
    gf_header_encode(&add, add_bytes);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, add_bytes, sizeof add_bytes, fd, 1), 0);
    uint8_t info_bytes[GF_REGION_INFO_BYTES];
    expect_reply(sock, GF_MSG_REGION_ADD, 5, info_bytes, sizeof info_bytes);
    gf_region_info info;
    gf_region_info_decode(info_bytes, &info);
    ck_assert_uint_eq(info.region_id, 1);
    ck_assert_uint_eq(info.flags & GF_REGION_DEVICE, 0);
    send_ref_frame(sock, 6, GF_FLAG_DEVICE, &d);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_DESCRIPTOR, "is a shared-memory region", REPLY_MS,
                         GF_TEST_STAYS_OPEN);
    send_ref_frame(sock, 7, GF_FLAG_SHM, &d);
    uint8_t res_bytes[GF_SHM_RESULT_BYTES];
    h = expect_reply(sock, GF_MSG_RESULT, 7, res_bytes, sizeof res_bytes);
    ck_assert_uint_eq(h.flags, GF_FLAG_SHM);
    ck_assert_uint_eq(h.version, GF_PROTOCOL_VERSION_DEVICE);
    gf_shm_result res;
    ck_assert_int_eq(gf_shm_result_decode(res_bytes, &res), 0);
    ck_assert_uint_eq(res.out_offset, 8192);
    ck_assert_uint_eq(res.out_bytes, 4096);

    /* The request itself is checked before the engine is asked: another
     * handle type, no bytes, the connection's max_regions (4: the memfd
     * region and three more fill it). */
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 10, GF_DEVICE_REGION_BYTES, 2u << 20, 2, 0);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, n, fd, 1), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_REGION,
                         "handle_type 2 is not taken: only 1 (a POSIX file descriptor)", REPLY_MS,
                         GF_TEST_STAYS_OPEN);
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 11, GF_DEVICE_REGION_BYTES, 0,
                   GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, n, fd, 1), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_REGION, "region_bytes is 0", REPLY_MS,
                         GF_TEST_STAYS_OPEN);
    for (uint64_t id = 12; id < 15; id++) {
        add.frame_id = id;
        gf_header_encode(&add, add_bytes);
        ck_assert_int_eq(gf_test_raw_send_fds(sock, add_bytes, sizeof add_bytes, fd, 1), 0);
        expect_reply(sock, GF_MSG_REGION_ADD, id, info_bytes, sizeof info_bytes);
    }
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 15, GF_DEVICE_REGION_BYTES, 2u << 20,
                   GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send_fds(sock, buf, n, fd, 1), 0);
    gf_test_ck_raw_error(sock, GF_ERR_REGION_LIMIT,
                         "this connection holds 4 region(s), max_regions is 4", REPLY_MS,
                         GF_TEST_STAYS_OPEN);

    /* Fatal: a payload of the wrong length; DEVICE_REGION_ADD in version 2. */
    n = device_add(buf, GF_PROTOCOL_VERSION_DEVICE, 8, 8, 2u << 20, GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send(sock, buf, n), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_LENGTH, "16 bytes of payload, got 8", REPLY_MS,
                         GF_TEST_CLOSES);
    sock = gf_test_ck_raw_connect(daemon_.socket_path);
    n = device_add(buf, GF_PROTOCOL_VERSION_SHM, 9, GF_DEVICE_REGION_BYTES, 2u << 20,
                   GF_DEVICE_HANDLE_POSIX_FD, 0);
    ck_assert_int_eq(gf_test_raw_send(sock, buf, n), 0);
    gf_test_ck_raw_error(sock, GF_ERR_BAD_TYPE, "bad_type", REPLY_MS, GF_TEST_CLOSES);
    close(fd);

    /* Every refusal counted, no device region held, no fd left behind. */
    ck_assert_uint_eq(gf_test_ck_stat(watch, "rejected.bad_region"), 5);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "rejected.region_limit"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "rejected.unknown_region"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "rejected.bad_descriptor"), 1);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "device_regions.regions_open"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "device_regions.regions_added"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "device_regions.frames"), 0);
    ck_assert_uint_eq(gf_test_ck_stat(watch, "shm.frames"), 1);
    gf_test_ck_wait_idle(watch, 1, REPLY_MS, NULL);
    gf_test_ck_stat(watch, "uptime_ns");
    for (int i = 0; i < 200 && gf_test_daemon_fd_count(&daemon_) != base_fds; i++)
        gf_test_sleep_ms(10);
    ck_assert_int_eq(gf_test_daemon_fd_count(&daemon_), base_fds);
    gf_client_close(watch);
    gf_test_ck_daemon_stop(&daemon_, GF_TEST_STOP_EXIT_0);
}
END_TEST

static Suite *device_regions_suite(void) {
    Suite *s = suite_create("device_regions");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, TEST_TIMEOUT_S);
    tcase_add_test(tc, cpu_engine_refuses_device_regions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(device_regions_suite());
}

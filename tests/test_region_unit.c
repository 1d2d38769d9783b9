/* SPDX-License-Identifier: MIT */
/*
 * A device region's life in region.c alone, against a shard of the test's
 * own whose engine says it maps device memory (and is never asked to):
 *
 * - a region freed before its mapping was queued (query.c's path when the
 *   reply cannot be allocated) closes the client's fd, and gives back what
 *   it held of max_device_region_bytes and the shard's counts;
 * - a region larger than max_device_region_bytes is refused region_limit
 *   naming the key, its fd closed, nothing held.
 */
#define _GNU_SOURCE /* memfd_create */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "group.h"
#include "region.h"
#include "runner.h"
#include "shard_state.h"

static int never_map(gf_engine *e, int fd, uint64_t bytes, uint32_t served, gf_device_mapping *out,
                     char *why, size_t why_len) {
    (void)e, (void)fd, (void)bytes, (void)served, (void)out, (void)why, (void)why_len;
    ck_abort_msg("the engine was asked to map");
    return -EIO;
}

static void never_unmap(gf_engine *e, const gf_device_mapping *m) {
    (void)e, (void)m;
    ck_abort_msg("the engine was asked to unmap");
}

static const gf_engine_ops maps_ops = {
    .name = "maps", .device_map = never_map, .device_unmap = never_unmap};

static gf_config cfg;
static gf_engine engine = {.ops = &maps_ops};
static gf_group group;
static gf_shard shard;

static void setup(void) {
    char err[256];
    ck_assert_msg(gf_config_parse("{\"max_device_region_bytes\": 8388608, \"pipelines\": "
                                  "[{\"name\": \"echo\", \"kind\": \"echo\"}]}",
                                  &cfg, err, sizeof err) == 0,
                  "%s", err);
    shard.cfg = &cfg;
    shard.engine = &engine;
    shard.group = &group;
    shard.thread = uv_thread_self();
}

/* A memfd: any fd stands for the client's here. */
static int some_fd(void) {
    int fd = memfd_create("test_region_unit", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    return fd;
}

static int is_closed(int fd) {
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

START_TEST(freed_before_mapping_closes_the_fd) {
    setup();
    int fd = some_fd();
    gf_device_region d = {.region_bytes = 4u << 20, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    gf_region *r = NULL;
    char why[256] = "";
    ck_assert_uint_eq(gf_region_open_device(&shard, fd, &d, 1, 0, &r, why, sizeof why), GF_OK);
    ck_assert_int_eq(r->device_fd, fd);
    ck_assert_uint_eq(shard.stats.regions[1].open, 1);
    ck_assert_uint_eq(atomic_load(&group.device_region_bytes), 4u << 20);
    ck_assert(!is_closed(fd));
    gf_region_unref(r); /* as query.c when its reply cannot be allocated */
    ck_assert_msg(is_closed(fd), "the client's fd %d is still open", fd);
    ck_assert_uint_eq(shard.stats.regions[1].open, 0);
    ck_assert_uint_eq(shard.stats.regions[1].bytes, 0);
    ck_assert_uint_eq(atomic_load(&group.device_region_bytes), 0);
}
END_TEST

START_TEST(larger_than_the_cap_refused) {
    setup();
    int fd = some_fd();
    gf_device_region d = {.region_bytes = 16u << 20, .handle_type = GF_DEVICE_HANDLE_POSIX_FD};
    gf_region *r = NULL;
    char why[256] = "";
    ck_assert_uint_eq(gf_region_open_device(&shard, fd, &d, 1, 0, &r, why, sizeof why),
                      GF_ERR_REGION_LIMIT);
    ck_assert_msg(strstr(why, "would pass max_device_region_bytes 8388608") != NULL, "%s", why);
    ck_assert(is_closed(fd));
    ck_assert_uint_eq(atomic_load(&group.device_region_bytes), 0);
    ck_assert_uint_eq(shard.stats.regions[1].open, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("region_unit");
    TCase *tc = tcase_create("device");
    tcase_add_test(tc, freed_before_mapping_closes_the_fd);
    tcase_add_test(tc, larger_than_the_cap_refused);
    suite_add_tcase(s, tc);
    return gf_test_run(s);
}

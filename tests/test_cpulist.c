/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of what places shard threads (daemon/cpulist.h): CPU lists as sysfs
 * writes them, "shard_cpus", the CUDA runtime's bus ids in sysfs's
 * spelling, and a device's node and CPUs read from a sysfs tree of the
 * test's own.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cpulist.h"
#include "runner.h"
#include "testutil.h"

static int has(const gf_cpus *s, unsigned c) {
    return gf_cpus_has(s, c);
}

START_TEST(cpu_lists) {
    gf_cpus s;
    char text[256];
    ck_assert_int_eq(gf_cpulist_parse("0-3,8,10-11\n", &s), 7);
    ck_assert(has(&s, 0) && has(&s, 3) && !has(&s, 4) && has(&s, 8) && !has(&s, 9) && has(&s, 11) &&
              !has(&s, 12));
    gf_cpulist_format(&s, text, sizeof text);
    ck_assert_str_eq(text, "0-3,8,10-11");
    ck_assert_int_eq(gf_cpulist_parse("1023", &s), 1);
    gf_cpulist_format(&s, text, sizeof text);
    ck_assert_str_eq(text, "1023");
    ck_assert_int_eq(gf_cpulist_parse("0-1023", &s), 1024);
    gf_cpulist_format(&s, text, sizeof text);
    ck_assert_str_eq(text, "0-1023");
    ck_assert_int_eq(gf_cpulist_parse("64-127,0", &s), 65); /* any order, as cpusets allow */
    gf_cpulist_format(&s, text, sizeof text);
    ck_assert_str_eq(text, "0,64-127");
    static const char *const bad[] = {"",   "\n", "1024", "3-1", "a",     "1,",
                                      ",1", "1-", "-1",   "1 2", "1\n\n", "0-99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(gf_cpulist_parse(bad[i], &s) == -EINVAL, "\"%s\" taken", bad[i]);
    /* A list cut at the buffer keeps what fits. */
    ck_assert_int_eq(gf_cpulist_parse("0,2,4,6,8", &s), 5);
    gf_cpulist_format(&s, text, 6);
    ck_assert_str_eq(text, "0,2,4");
}
END_TEST

START_TEST(the_setting) {
    enum gf_cpus_kind kind;
    gf_cpus s;
    char why[256];
    ck_assert_int_eq(gf_cpus_setting_parse("auto", &kind, &s, why, sizeof why), 0);
    ck_assert_int_eq(kind, GF_CPUS_AUTO);
    ck_assert_int_eq(gf_cpus_setting_parse("none", &kind, &s, why, sizeof why), 0);
    ck_assert_int_eq(kind, GF_CPUS_NONE);
    ck_assert_int_eq(gf_cpus_setting_parse("4-7", &kind, &s, why, sizeof why), 0);
    ck_assert_int_eq(kind, GF_CPUS_LIST);
    ck_assert(has(&s, 4) && has(&s, 7) && !has(&s, 3));
    ck_assert_int_eq(gf_cpus_setting_parse("Auto", &kind, &s, why, sizeof why), -EINVAL);
    ck_assert_str_eq(why, "shard_cpus: expected \"auto\", \"none\" or a CPU list such as "
                          "\"0-15,32-47\" (CPUs below 1024), got \"Auto\"");
}
END_TEST

START_TEST(bus_ids) {
    char out[16];
    ck_assert_int_eq(gf_bus_id_sysfs("0000:06:00.0", out, sizeof out), 0);
    ck_assert_str_eq(out, "0000:06:00.0");
    ck_assert_int_eq(gf_bus_id_sysfs("00000000:C1:1F.7", out, sizeof out), 0);
    ck_assert_str_eq(out, "0000:c1:1f.7");
    ck_assert_int_eq(gf_bus_id_sysfs("0001:0A:00.0", out, sizeof out), 0);
    ck_assert_str_eq(out, "0001:0a:00.0");
    static const char *const bad[] = {"",
                                      "06:00.0",
                                      "0000:06:00",
                                      "0000:06:00.0 ",
                                      "0000-06:00.0",
                                      "00010000:06:00.0",
                                      "000:06:00.0",
                                      "0000:0g:00.0",
                                      "0000:06:00:0",
                                      "0000:06.00.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(gf_bus_id_sysfs(bad[i], out, sizeof out) == -EINVAL, "\"%s\" taken", bad[i]);
    ck_assert_int_eq(gf_bus_id_sysfs("0000:06:00.0", out, 12), -EINVAL); /* no room */
}
END_TEST

/* A device directory under root with its two attributes (NULL: absent). */
static void fake_device(const char *root, const char *bdf, const char *node, const char *cpus) {
    char path[512];
    snprintf(path, sizeof path, "%s/bus", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bus/pci", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bus/pci/devices", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s", root, bdf);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    if (node) {
        snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", root, bdf);
        ck_assert_int_eq(gf_test_write_file(path, node), 0);
    }
    if (cpus) {
        snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", root, bdf);
        ck_assert_int_eq(gf_test_write_file(path, cpus), 0);
    }
}

START_TEST(a_devices_cpus_from_sysfs) {
    char root[256], why[512];
    ck_assert_int_eq(gf_test_make_temp_dir(root, sizeof root), 0);
    fake_device(root, "0000:06:00.0", "0\n", "0-15,32-47\n");
    fake_device(root, "0000:c1:00.0", "1\n", "16-31,48-63\n");
    fake_device(root, "0000:41:00.0", "-1\n", "0-63\n");
    fake_device(root, "0000:42:00.0", "1\n", NULL);
    fake_device(root, "0000:43:00.0", "x\n", "0-3\n");
    fake_device(root, "0000:44:00.0", "0\n", "0-3,\n");
    gf_cpus s;
    int node;
    ck_assert_int_eq(gf_device_cpus(root, "00000000:06:00.0", &node, &s, why, sizeof why), 32);
    ck_assert_int_eq(node, 0);
    ck_assert(has(&s, 0) && has(&s, 15) && !has(&s, 16) && has(&s, 32) && !has(&s, 48));
    ck_assert_int_eq(gf_device_cpus(root, "0000:C1:00.0", &node, &s, why, sizeof why), 32);
    ck_assert_int_eq(node, 1);
    ck_assert(has(&s, 16) && has(&s, 63) && !has(&s, 0));
    /* No node from the firmware: every CPU is as near as any. */
    ck_assert_int_eq(gf_device_cpus(root, "0000:41:00.0", &node, &s, why, sizeof why), 64);
    ck_assert_int_eq(node, -1);
    /* What is missing or wrong is named. */
    char want[700];
    ck_assert_int_eq(gf_device_cpus(root, "0000:42:00.0", &node, &s, why, sizeof why), -ENOENT);
    snprintf(want, sizeof want, "%s/bus/pci/devices/0000:42:00.0/local_cpulist: %s", root,
             strerror(ENOENT));
    ck_assert_str_eq(why, want);
    ck_assert_int_eq(gf_device_cpus(root, "0000:43:00.0", &node, &s, why, sizeof why), -EINVAL);
    snprintf(want, sizeof want,
             "%s/bus/pci/devices/0000:43:00.0/numa_node: not a node number: "
             "\"x\n\"",
             root);
    ck_assert_str_eq(why, want);
    ck_assert_int_eq(gf_device_cpus(root, "0000:44:00.0", &node, &s, why, sizeof why), -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "local_cpulist: not a CPU list"));
    ck_assert_int_eq(gf_device_cpus(root, "0000:99:00.0", &node, &s, why, sizeof why), -ENOENT);
    ck_assert_int_eq(node, -1);
    ck_assert_int_eq(gf_device_cpus(root, "bus 6", &node, &s, why, sizeof why), -EINVAL);
    ck_assert_str_eq(why, "PCI bus id \"bus 6\" is not domain:bus:device.function");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *cpulist_suite(void) {
    Suite *s = suite_create("cpulist");
    TCase *tc = tcase_create("cpulist");
    tcase_add_test(tc, cpu_lists);
    tcase_add_test(tc, the_setting);
    tcase_add_test(tc, bus_ids);
    tcase_add_test(tc, a_devices_cpus_from_sysfs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(cpulist_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * CPU lists and where a PCI device's CPUs are, read from sysfs as
 * `lspci -vv` and nvidia-smi topo read them:
 * /sys/bus/pci/devices/<bus id>/numa_node and local_cpulist.  Pure but for
 * the two reads of gf_device_cpus, which takes the sysfs root so that tests
 * run it on a tree of their own.  numa.h places the shards' threads with
 * them; config.c checks "shard_cpus" with gf_cpus_setting_parse.
 */
#ifndef GF_CPULIST_H
#define GF_CPULIST_H

#include <stddef.h>
#include <stdint.h>

/* A set of CPUs: bit c of bits[c / 64] for CPU c (cpu_set_t's size, which
 * needs _GNU_SOURCE where it is declared: numa.c converts). */
#define GF_CPUS_MAX 1024
typedef struct gf_cpus {
    uint64_t bits[GF_CPUS_MAX / 64];
} gf_cpus;

/* CPU `c` (below GF_CPUS_MAX) into *s; whether *s has it. */
void gf_cpus_set(gf_cpus *s, unsigned c);
int gf_cpus_has(const gf_cpus *s, unsigned c);

/* What "shard_cpus" says. */
enum gf_cpus_kind { GF_CPUS_AUTO, GF_CPUS_NONE, GF_CPUS_LIST };

/*
 * Parses a CPU list as sysfs and cpusets write it ("0-3,8,10-11", a
 * newline at the end allowed) into *set.  Returns the number of CPUs, or
 * -EINVAL for anything else (empty, a range backwards, a CPU at or past
 * GF_CPUS_MAX).  Pure.
 */
int gf_cpulist_parse(const char *text, gf_cpus *set);

/* Writes *set as a CPU list ("0-3,8") into buf[len]; "" when empty. */
void gf_cpulist_format(const gf_cpus *set, char *buf, size_t len);

/*
 * "shard_cpus" `text`: its kind, and the CPUs of a list in *set.  Returns 0,
 * or -EINVAL with the reason (naming the key) in why[why_len].  Pure.
 */
int gf_cpus_setting_parse(const char *text, enum gf_cpus_kind *kind, gf_cpus *set, char *why,
                          size_t why_len);

/*
 * The PCI bus id `bus_id` as the CUDA runtime writes it ("0000:06:00.0",
 * "00000000:C1:00.0") in sysfs's spelling: a domain of 4 hex digits,
 * lowercase ("0000:c1:00.0"), into out[len].  Returns 0, or -EINVAL when it
 * is not of that form.  Pure.
 */
int gf_bus_id_sysfs(const char *bus_id, char *out, size_t len);

/*
 * The NUMA node (*node, -1 when the firmware gives none) and the CPUs
 * (*set) local to the PCI device `bus_id`, from the sysfs tree at
 * `sysfs_root` ("/sys").  Returns the number of CPUs, or a negative errno
 * with what was missing or wrong in why[why_len].
 */
int gf_device_cpus(const char *sysfs_root, const char *bus_id, int *node, gf_cpus *set, char *why,
                   size_t why_len);

#endif

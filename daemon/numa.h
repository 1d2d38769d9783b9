/* SPDX-License-Identifier: MIT */
/*
 * Threads near their GPU: each shard's thread runs on the CPUs of its
 * device's NUMA node, and so do the pinned buffers its engine allocates
 * from that thread (the pages are placed where they are first touched).
 * On a host of several sockets a shard whose thread lands on the other
 * socket pays the interconnect on every copy and completion: measured on
 * two H200s, one client's 4 KiB round trip was 35.4 us with the default
 * shards against 30.8 with one.
 *
 * Where a device's CPUs are comes from sysfs, as `lspci -vv` and
 * nvidia-smi topo read it: /sys/bus/pci/devices/<bus id>/numa_node and
 * local_cpulist, the bus id being the CUDA runtime's
 * (cudaDeviceGetPCIBusId) in sysfs's spelling.  The configuration's
 * "shard_cpus" overrides it: "auto" (the default: the device's CPUs),
 * "none" (threads where the kernel puts them) or a CPU list such as
 * "0-15,32-47" for every shard.  Each shard logs where its thread went.
 *
 * cpulist.h reads sysfs; gf_numa_place_shard runs on the shard's own
 * thread.
 */
#ifndef GF_NUMA_H
#define GF_NUMA_H

#include <stdint.h>

#include "cpulist.h"

/*
 * Shard `shard`'s thread, at its start and before its engine opens (its
 * pinned buffers come after): moves itself to the CPUs the configuration's
 * `shard_cpus` says for CUDA device `device` (-1: the cpu engine, which
 * "auto" leaves where it is), within the CPUs the process may use, and logs
 * where it went and why.  Never fails the shard: a thread that cannot move
 * stays, with a warning.
 */
void gf_numa_place_shard(uint32_t shard, const char *shard_cpus, int device);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * gf_copies_launch: up to GF_COPIES_MAX copies in one kernel, between
 * memory the device reaches (contract in kernels.h).  The table travels in the kernel's
 * parameters, one block a copy; 16-byte vectors where both ends allow,
 * bytes for the rest.  Either end may be pinned host memory that the
 * device reaches (the engine's small shm frames): each thread loads
 * kUnroll vectors before it stores any, so that a block keeps that many
 * reads across the bus in flight rather than one.
 *
 * A launch across the bus has blocks of kBusThreads, 4 KiB of reads in
 * flight each rather than 16: the batches of 16 streams at once then
 * asked for more than the bus serves, and the extra only queued, holding
 * threads that other streams' stages could use.  Measured on an H200
 * (16 clients, frames in shared memory, window 64, same run): the
 * spectrogram 762-764k frames/s against 699-705k with 256 threads, or
 * with 64 threads of 16 vectors each; echo of 32,000 bytes 870k against
 * 851-853k; echo of 4 KiB from 16 and 64 clients alike within the runs'
 * spread.  Copies in device memory keep kThreadsPerBlock.
 */
#include "kernels.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "launch.cuh"

static_assert(sizeof(uint4) == kVecBytes, "one uint4 is one 16-byte vector");

constexpr size_t kUnroll = 4;
constexpr unsigned kBusThreads = 64;

/* The copies of one launch, passed by value. */
struct copy_table {
    gf_copy c[GF_COPIES_MAX];
};
static_assert(sizeof(copy_table) <= 4000, "the table fits the 4 KiB of a kernel's parameters");

/* Block b makes copy b: its 16-byte vectors where both ends are aligned to
 * them, then the bytes after them (all of it byte by byte otherwise). */
static __global__ void copies_kernel(const copy_table t) {
    const gf_copy c = t.c[blockIdx.x];
    const auto *from = static_cast<const unsigned char *>(c.from);
    auto *to = static_cast<unsigned char *>(c.to);
    size_t done = 0;
    if ((reinterpret_cast<uintptr_t>(c.from) | reinterpret_cast<uintptr_t>(c.to)) % kVecBytes ==
        0) {
        const size_t vecs = c.bytes / kVecBytes, step = blockDim.x;
        const auto *src = reinterpret_cast<const uint4 *>(from);
        auto *dst = reinterpret_cast<uint4 *>(to);
        size_t i = threadIdx.x;
        for (; i + (kUnroll - 1) * step < vecs; i += kUnroll * step) {
            uint4 v[kUnroll];
#pragma unroll
            for (size_t u = 0; u < kUnroll; u++)
                v[u] = src[i + u * step];
#pragma unroll
            for (size_t u = 0; u < kUnroll; u++)
                dst[i + u * step] = v[u];
        }
        for (; i < vecs; i += step)
            dst[i] = src[i];
        done = vecs * kVecBytes;
    }
    for (size_t i = done + threadIdx.x; i < c.bytes; i += blockDim.x)
        to[i] = from[i];
}

extern "C" int gf_copies_launch(const gf_copy *copies, unsigned count, int across_bus,
                                gf_cuda_stream stream) {
    copy_table t{};
    const bool ok = count <= GF_COPIES_MAX;
    for (unsigned i = 0; ok && i < count; i++)
        t.c[i] = copies[i];
    return launch_checked(stream, ok, count, [&](cudaStream_t s) {
        copies_kernel<<<count, across_bus ? kBusThreads : kThreadsPerBlock, 0, s>>>(t);
    });
}

/*
 * What every pipeline's launcher shares: how big a grid to launch, and the
 * check that buffers can be read as float32.  Included by kernels/<kind>.cu
 * only.
 */
#ifndef GF_LAUNCH_CUH
#define GF_LAUNCH_CUH

#include <cstddef>
#include <cstdint>

/* A multiple of the warp size that keeps every multiprocessor busy. */
static constexpr unsigned kThreadsPerBlock = 256;
/* Enough blocks to fill an H100/H200 (132 SMs) several times over; the
 * grid-stride loops cover any length, so no per-launch device query. */
static constexpr unsigned kMaxBlocks = 1024;

/* Blocks for `work` items: enough for one item per thread, at most kMaxBlocks. */
static inline unsigned blocks_for(size_t work) {
    size_t blocks = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
    return blocks > kMaxBlocks ? kMaxBlocks : static_cast<unsigned>(blocks);
}

/* Whether `bytes` at `in` and `out` can be read and written as float32: a
 * whole number of elements, both pointers 4-byte aligned.  A misaligned
 * float access would be a sticky error, so launchers refuse it up front. */
static inline bool f32_buffers_ok(const void *in, const void *out, size_t bytes) {
    const uintptr_t addr_bits = reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out);
    return bytes % sizeof(float) == 0 && addr_bits % sizeof(float) == 0;
}

#endif

/*
 * What every pipeline's launcher shares: how big a grid to launch, the check
 * that buffers can be read as float32, and launch_checked(), the one shape of
 * a launcher (refuse, skip empty work, launch, report cudaGetLastError()).
 * Included by kernels/<kind>.cu and kernels/copies.cu only.
 */
#ifndef GF_LAUNCH_CUH
#define GF_LAUNCH_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels.h"

/* A multiple of the warp size that keeps every multiprocessor busy. */
static constexpr unsigned kThreadsPerBlock = 256;
/* Enough blocks to fill an H100/H200 (132 SMs) several times over; the
 * grid-stride loops cover any length, so no per-launch device query. */
static constexpr unsigned kMaxBlocks = 1024;
/* The widest load the kernels use (uint4, float4): 16 bytes. */
static constexpr size_t kVecBytes = 16;

/* Blocks for `work` items: enough for one item per thread, at most kMaxBlocks. */
static inline unsigned blocks_for(size_t work) {
    size_t blocks = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
    return blocks > kMaxBlocks ? kMaxBlocks : static_cast<unsigned>(blocks);
}

/* Whether both pointers are aligned to `align` bytes. */
static inline bool both_aligned(const void *in, const void *out, size_t align) {
    const uintptr_t addr_bits = reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out);
    return addr_bits % align == 0;
}

/* Whether `bytes` at `in` and `out` can be read and written as float32: a
 * whole number of elements, both pointers 4-byte aligned.  A misaligned
 * float access would be a sticky error, so launchers refuse it up front. */
static inline bool f32_buffers_ok(const void *in, const void *out, size_t bytes) {
    return bytes % sizeof(float) == 0 && both_aligned(in, out, sizeof(float));
}

/*
 * How a vectorised kernel splits `count` items of which `per_vec` make one
 * 16-byte vector: vec_count whole vectors, then tail_count (< per_vec) items
 * that one thread each of the first threads handles; `work` is the larger of
 * the two, what the grid is sized for.
 */
struct vec_split {
    size_t vec_count, tail_count, work;
};
static inline vec_split split_vectors(size_t count, size_t per_vec) {
    const size_t vec_count = count / per_vec, tail_count = count % per_vec;
    return {vec_count, tail_count, vec_count > tail_count ? vec_count : tail_count};
}

/*
 * The one shape of every launcher.  Returns cudaErrorInvalidValue without
 * launching when `ok` is false (buffers the kind cannot take), 0 without
 * launching when `items` is 0, else calls `enqueue(s)` with the cudaStream_t
 * behind `stream` (it launches the kernel there and never synchronises) and
 * returns what cudaGetLastError() reports after it.
 */
template <typename Enqueue>
static inline int launch_checked(gf_cuda_stream stream, bool ok, size_t items, Enqueue enqueue) {
    if (!ok) {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    if (items == 0) {
        return 0;
    }
    enqueue(reinterpret_cast<cudaStream_t>(stream));
    return static_cast<int>(cudaGetLastError());
}

#endif

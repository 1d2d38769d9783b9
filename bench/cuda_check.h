/* SPDX-License-Identifier: MIT */
// What the in-process CUDA benchmarks (bench/*.cu) share: a CUDA call that
// fails ends the program with its place and error, and a microsecond clock.
#ifndef GF_BENCH_CUDA_CHECK_H
#define GF_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                      \
                         cudaGetErrorString(e_));                                                  \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

/* The steady clock in microseconds. */
static inline double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

#endif

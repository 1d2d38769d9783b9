/* SPDX-License-Identifier: MIT */
// What a small frame's GPU round trip costs, in-process, by the way its bytes move and the way
// its completion is seen (bench/README.md, "Zero-copy batches and the completion modes"):
//   path  copy:      H2D copy, the echo kernel, D2H copy (the engine's path for large batches)
//         zerocopy:  the echo kernel reading and writing the pinned host buffers itself
//   wait  hostfunc+eventfd: a host function writes an eventfd an epoll waiter sleeps on
//                           (completion host_func: the driver's thread, then the loop's wake-up)
//         hostfunc+spin:    a host function sets a flag the waiter spins on
//         event+spin:       the waiter polls the stream's event (completion poll and hybrid)
// p50/p99 from before the first CUDA call to the waiter seeing the completion, one frame at a
// time with 20 us between frames; submit_cpu is the time the CUDA calls took.  Then
// back-to-back batches on 2 streams, copies against zero-copy.  Every result is checked.
//   nvcc -O2 -arch=sm_90 -std=c++17 -Ikernels -Iprotocol bench/zero_copy_cost.cu kernels/echo.cu
#include <cuda_runtime.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "kernels.h"
#include "cuda_check.h"
static std::atomic<int> flag;
static int efd;
static void CUDART_CB hf_flag(void *) {
    flag.store(1, std::memory_order_release);
}
static void CUDART_CB hf_efd(void *) {
    uint64_t one = 1;
    (void)!write(efd, &one, 8);
}
int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *ih, *oh, *id, *od;
    CHECK(cudaHostAlloc((void **)&ih, 1 << 20, 0));
    CHECK(cudaHostAlloc((void **)&oh, 1 << 20, 0));
    CHECK(cudaMalloc((void **)&id, 1 << 20));
    CHECK(cudaMalloc((void **)&od, 1 << 20));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    efd = eventfd(0, EFD_NONBLOCK);
    int ep = epoll_create1(0);
    struct epoll_event ee = {};
    ee.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ee);
    for (int i = 0; i < (1 << 20); i++)
        ih[i] = (unsigned char)(i * 7 + 3);
    const char *cn[] = {"copy", "zerocopy"},
               *wn[] = {"hostfunc+eventfd", "hostfunc+spin", "event+spin"};
    for (size_t sz : {4096ul, 16384ul, 65536ul, 262144ul}) {
        for (int zc = 0; zc < 2; zc++)
            for (int w = 0; w < 3; w++) {
                std::vector<double> lat, cpu;
                int n = 4000;
                for (int i = 0; i < n + 200; i++) {
                    memset(oh, 0, sz);
                    flag.store(0);
                    double t0 = now_us();
                    if (zc)
                        CHECK((cudaError_t)gf_echo_launch(nullptr, ih, sz, oh, s));
                    else {
                        CHECK(cudaMemcpyAsync(id, ih, sz, cudaMemcpyHostToDevice, s));
                        CHECK((cudaError_t)gf_echo_launch(nullptr, id, sz, od, s));
                        CHECK(cudaMemcpyAsync(oh, od, sz, cudaMemcpyDeviceToHost, s));
                    }
                    if (w == 0)
                        CHECK(cudaLaunchHostFunc(s, hf_efd, nullptr));
                    else if (w == 1)
                        CHECK(cudaLaunchHostFunc(s, hf_flag, nullptr));
                    else
                        CHECK(cudaEventRecord(ev, s));
                    double t1 = now_us();
                    if (w == 0) {
                        struct epoll_event got;
                        while (epoll_wait(ep, &got, 1, -1) != 1) {
                        }
                        uint64_t v;
                        (void)!read(efd, &v, 8);
                    } else if (w == 1) {
                        while (!flag.load(std::memory_order_acquire)) {
                        }
                    } else {
                        while (cudaEventQuery(ev) == cudaErrorNotReady) {
                        }
                    }
                    double t2 = now_us();
                    if (memcmp(ih, oh, sz) != 0) {
                        printf("MISMATCH size %zu zc %d\n", sz, zc);
                        return 1;
                    }
                    if (i >= 200) {
                        lat.push_back(t2 - t0);
                        cpu.push_back(t1 - t0);
                    }
                    usleep(20); // like a client's think time: the GPU and threads go idle between
                                // frames
                }
                std::sort(lat.begin(), lat.end());
                std::sort(cpu.begin(), cpu.end());
                printf(
                    "zc size=%zu path=%s wait=%s p50_us=%.1f p99_us=%.1f submit_cpu_p50_us=%.1f\n",
                    sz, cn[zc], wn[w], lat[n / 2], lat[n * 99 / 100], cpu[n / 2]);
            }
    }
    // throughput: back-to-back submissions on 2 streams of a 64 KiB batch (16 x 4 KiB), copies vs
    // zero copy
    cudaStream_t s2;
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (size_t sz : {16384ul, 65536ul, 262144ul})
        for (int zc = 0; zc < 2; zc++) {
            int n = 4000;
            double t0 = now_us();
            for (int i = 0; i < n; i++) {
                cudaStream_t st = i & 1 ? s2 : s;
                size_t off = (i & 1) * (512 << 10);
                if (zc)
                    CHECK((cudaError_t)gf_echo_launch(nullptr, ih + off, sz, oh + off, st));
                else {
                    CHECK(cudaMemcpyAsync(id + off, ih + off, sz, cudaMemcpyHostToDevice, st));
                    CHECK((cudaError_t)gf_echo_launch(nullptr, id + off, sz, od + off, st));
                    CHECK(cudaMemcpyAsync(oh + off, od + off, sz, cudaMemcpyDeviceToHost, st));
                }
            }
            CHECK(cudaDeviceSynchronize());
            double el = now_us() - t0;
            printf("zc_tput size=%zu path=%s batches_per_s=%.0f GBps=%.2f\n", sz, cn[zc],
                   n / el * 1e6, n * (double)sz / el / 1e3);
        }
    return 0;
}

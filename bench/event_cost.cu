/* SPDX-License-Identifier: MIT */
// What timing events cost on the daemon's path, measured in-process (no
// socket): 2 slots, each with its own non-blocking stream, looping
// H2D -> echo kernel -> D2H -> cudaLaunchHostFunc on 4 KiB frames, as
// daemon/engine_cuda.c does.  A slot is resubmitted from the host function's
// completion, seen by a waiting thread (as the loop would).  Variants:
//   none      no events
//   timed4    4 events with timing around the stages (the engine's default)
//   untimed4  4 events created with cudaEventDisableTiming
//   timed2    2 events with timing (first and last only)
// Prints frames/s and the p50/p99 of submit -> host function for each.
//
//   nvcc -O2 -arch=sm_90 bench/event_cost.cu -o event_cost && ./event_cost
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "cuda_check.h"

static const size_t kBytes = 4096;
static const int kSlots = 2;
static const int kFrames = 20000;

static __global__ void echo(const unsigned *in, unsigned *out, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i];
}

struct Slot {
    int index;
    cudaStream_t stream;
    cudaEvent_t ev[4];
    void *in_host, *out_host, *in_dev, *out_dev;
    double submitted_us;
};

// The completion queue: the host function pushes, the "loop" thread pops.
static std::mutex mu;
static std::condition_variable cv;
static std::vector<Slot *> done;
static std::vector<double> latency_us;

static void CUDART_CB on_done(void *arg) {
    Slot *s = static_cast<Slot *>(arg);
    double t = now_us();
    std::lock_guard<std::mutex> g(mu);
    latency_us.push_back(t - s->submitted_us);
    done.push_back(s);
    cv.notify_one();
}

static void submit(Slot *s, int events) {
    s->submitted_us = now_us();
    auto mark = [&](int i) {
        if (events == 4 || (events == 2 && (i == 0 || i == 3)))
            CHECK(cudaEventRecord(s->ev[i], s->stream));
    };
    mark(0);
    CHECK(cudaMemcpyAsync(s->in_dev, s->in_host, kBytes, cudaMemcpyHostToDevice, s->stream));
    mark(1);
    echo<<<4, 256, 0, s->stream>>>((const unsigned *)s->in_dev, (unsigned *)s->out_dev, kBytes / 4);
    CHECK(cudaGetLastError());
    mark(2);
    CHECK(cudaMemcpyAsync(s->out_host, s->out_dev, kBytes, cudaMemcpyDeviceToHost, s->stream));
    mark(3);
    CHECK(cudaLaunchHostFunc(s->stream, on_done, s));
}

static void run(const char *name, int events, unsigned flags) {
    const bool timed = !(flags & cudaEventDisableTiming);
    Slot slots[kSlots];
    for (int i = 0; i < kSlots; i++) {
        Slot &s = slots[i];
        s.index = i;
        CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
        for (auto &e : s.ev)
            CHECK(cudaEventCreateWithFlags(&e, flags));
        CHECK(cudaHostAlloc(&s.in_host, kBytes, cudaHostAllocDefault));
        CHECK(cudaHostAlloc(&s.out_host, kBytes, cudaHostAllocDefault));
        CHECK(cudaMalloc(&s.in_dev, kBytes));
        CHECK(cudaMalloc(&s.out_dev, kBytes));
    }
    latency_us.clear();
    latency_us.reserve(kFrames);
    int submitted = 0, completed = 0;
    double t0 = now_us();
    for (int i = 0; i < kSlots; i++, submitted++)
        submit(&slots[i], events);
    while (completed < kFrames) {
        std::vector<Slot *> batch;
        {
            std::unique_lock<std::mutex> l(mu);
            cv.wait(l, [] { return !done.empty(); });
            batch.swap(done);
        }
        for (Slot *s : batch) {
            completed++;
            if (events == 4 && timed) { // the engine reads its three stage times
                float ms;
                for (int k = 0; k < 3; k++)
                    CHECK(cudaEventElapsedTime(&ms, s->ev[k], s->ev[k + 1]));
            }
            if (submitted < kFrames) {
                submit(s, events);
                submitted++;
            }
        }
    }
    double secs = (now_us() - t0) / 1e6;
    CHECK(cudaDeviceSynchronize());
    std::sort(latency_us.begin(), latency_us.end());
    std::printf("%-9s %10.0f frames/s   submit->host function p50 %6.1f us  p99 %6.1f us\n", name,
                kFrames / secs, latency_us[latency_us.size() / 2],
                latency_us[latency_us.size() * 99 / 100]);
    for (auto &s : slots) {
        for (auto &e : s.ev)
            CHECK(cudaEventDestroy(e));
        CHECK(cudaStreamDestroy(s.stream));
        CHECK(cudaFreeHost(s.in_host));
        CHECK(cudaFreeHost(s.out_host));
        CHECK(cudaFree(s.in_dev));
        CHECK(cudaFree(s.out_dev));
    }
}

int main() {
    CHECK(cudaFree(0));
    std::printf("4 KiB frames, %d slots, %d frames per run, in-process\n", kSlots, kFrames);
    for (int rep = 0; rep < 2; rep++) {
        run("none", 0, cudaEventDefault);
        run("timed4", 4, cudaEventDefault);
        run("untimed4", 4, cudaEventDisableTiming);
        run("timed2", 2, cudaEventDefault);
    }
    return 0;
}

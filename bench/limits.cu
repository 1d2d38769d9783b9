/* SPDX-License-Identifier: MIT */
/*
 * gf_limits: what gpuframed's GPU path could reach with no socket and no
 * event loop, measured in-process on the engine's path: pinned host buffers
 * (cudaHostAlloc), non-blocking streams with their own buffers ("lanes", as
 * the daemon's slots), each frame H2D -> the daemon's own echo kernel
 * (gf_echo_launch) -> D2H -> an untimed event that marks it done.
 *
 * The pipeline is a ceiling, so it is the best this hardware does per frame,
 * not a model of the daemon: a limit set too low makes every ratio flatter
 * the daemon.  Until 2026-11 it kept one frame in flight per stream, each
 * completed by cudaLaunchHostFunc and one waiting thread; on an H200 that gave
 * 21.9k / 23.6k / 23.7k 4 KiB frames/s on 1 / 2 / 4 streams, while a pipeline
 * keeping its streams full reached 109k on 2.  Two things serialised it: host
 * functions of every stream of a context run one after another on the
 * driver's single callback thread (and hold their stream until they return),
 * and each stream sat idle for the whole callback -> wake-up -> resubmit round
 * trip between frames.  So now (run_lane):
 *   - each lane keeps kDepth frames in flight, so its stream always has the
 *     next frame queued when one finishes (frames on one stream run in
 *     stream order, so they can share the lane's buffers);
 *   - each lane has its own host thread that submits and completes its
 *     frames, polling the oldest frame's event with cudaEventQuery (never
 *     blocks, no hand-off to another thread): one thread for every stream
 *     would cap the total at one thread's rate of API calls (about five per
 *     frame), a limit of this program's, not of the GPU's; the sharded daemon
 *     has a thread per shard for the same reason.
 * The latency floor is a separate run: one lane, one frame in flight, the
 * same polling (the daemon's `poll` completion does the same).
 * No timing events: the figures are the floor under the daemon's defaults.
 *
 *   gf_limits [--sizes BYTES,...] [--short]
 *
 * Prints one line per figure (bench/README.md says what each is):
 *   limit name=pipeline streams=S depth=D size=B frames=N fps=R GBps=R p50_us=L p99_us=L
 *   limit name=latency size=B p50_us=L p99_us=L      (1 stream, 1 frame in flight)
 *   limit name=hostfunc p50_us=L p99_us=L            (cudaLaunchHostFunc alone)
 *   limit name=h2d size=B GBps=R / limit name=d2h size=B GBps=R   (pinned copies)
 * GB/s are 1e9 bytes per second, one direction.  Lines starting with '#' are
 * comments (the device).  Exit status 0, 1 on any CUDA error or a completion
 * that never came (the message on stderr), 2 on a bad command line.
 */
#include <cuda_runtime.h>

#include <cassert>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels.h"
extern "C" {
#include "util.h"
}

/* Logs the failed call with its place and error text and returns -1 from the
 * calling function, which returns int. */
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "gf_limits: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
                         cudaGetErrorString(e_));                                                  \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* The daemon's slot counts the benchmark compares against (1, 2, 4), and 8
 * for several shards' slots at once (bench/run.sh --clients takes the best). */
static const int kStreamCounts[] = {1, 2, 4, 8};
static const int kMaxStreams = 8;
/* Frames in flight per lane in the pipeline runs: enough that the stream
 * never waits for its thread to see a completion and submit (a 4 KiB frame
 * is a few microseconds of GPU work, about as long as one submit's API calls),
 * few enough that the run's start and end are no noticeable part of it. */
static const int kDepth = 8;
/* Default frame sizes: a small frame, the socket's sweet spot, and PCIe-sized ones. */
static const size_t kDefaultSizes[] = {4096, 65536, 1 << 20, 4 << 20, 16 << 20};
static const size_t kMaxSizeCount = 16;
/* Frames per pipeline run: about this many bytes, within [min, max] frames,
 * and never longer than the time cap (a slow machine still finishes). */
static const size_t kPipelineTargetBytes = size_t(2) << 30;
static const size_t kPipelineMinFrames = 200, kPipelineMaxFrames = 20000;
static const double kPipelineMaxSeconds = 1.0;
/* Copies per bandwidth run: about this many bytes, within [min, max] copies. */
static const size_t kCopyTargetBytes = size_t(1) << 30;
static const size_t kCopyMinCount = 8, kCopyMaxCount = 2000;
/* Frames of a latency run (one in flight) at most. */
static const size_t kLatencyMaxFrames = 5000;
static const int kHostFuncCount = 2000;
/* --short divides the counts and the time cap by this. */
static const size_t kShortDivisor = 10;
/* A completion not seen for this long means the GPU is stuck (a sticky
 * error stops host functions for good): fail instead of hanging. */
static const auto kStuckTimeout = std::chrono::seconds(10);

struct Bench;

/* One stream with its own buffers, like one daemon slot, and the state of
 * its frames in flight: a ring of kDepth done events, oldest at `head`.
 * While a run goes on, only the lane's own thread touches it. */
struct Lane {
    Bench *bench;                  /* the owner                                      */
    cudaStream_t stream;           /* non-blocking                                   */
    void *in_host, *out_host;      /* pinned, max_bytes each                        */
    void *in_dev, *out_dev;        /* device, max_bytes each                         */
    cudaEvent_t done[kDepth];      /* untimed; recorded after each frame's D2H copy  */
    uint64_t submitted_ns[kDepth]; /* when each frame in flight was submitted   */
    uint64_t completed_ns;         /* hostfunc(): set by the host function           */
    std::vector<uint64_t> lat_ns;  /* this run's submit -> completion seen     */
    int rc;                        /* this run's result: 0, or -1 after an error     */
};

/* Everything the runs share.  The completion queue is hostfunc()'s hand-off
 * from the host function to the waiting thread; `tickets` hands out a run's
 * frames to its lanes' threads. */
struct Bench {
    Lane lanes[kMaxStreams];
    int device; /* the CUDA device, set current in every thread   */
    size_t max_bytes;
    double max_seconds;
    size_t divisor; /* 1, or kShortDivisor */
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Lane *> done;    /* completed lanes not yet seen, under mu */
    std::atomic<size_t> tickets; /* frames of the current run handed out so far */
};

static uint64_t percentile_ns(std::vector<uint64_t> &v, unsigned pct) {
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t rank = (v.size() * pct + 99) / 100;
    return v[rank > 0 ? rank - 1 : 0];
}

static size_t clamp_count(size_t want, size_t lo, size_t hi) {
    return std::max(lo, std::min(hi, want));
}

/* hostfunc()'s host function: stamps the lane, queues it, wakes the
 * waiter.  No CUDA call (DESIGN.md invariant 2). */
static void CUDART_CB on_done(void *arg) {
    Lane *l = static_cast<Lane *>(arg);
    Bench *b = l->bench;
    l->completed_ns = gf_now_ns();
    std::lock_guard<std::mutex> g(b->mu);
    b->done.push_back(l);
    b->cv.notify_one();
}

/* Waits for at least one host function's completion and moves all of them
 * into *batch.  Returns 0, or -1 when none came within kStuckTimeout. */
static int wait_done(Bench *b, std::vector<Lane *> *batch) {
    batch->clear();
    std::unique_lock<std::mutex> l(b->mu);
    if (!b->cv.wait_for(l, kStuckTimeout, [b] { return !b->done.empty(); })) {
        std::fprintf(stderr, "gf_limits: no completion for %lld s: the GPU is stuck\n",
                     (long long)kStuckTimeout.count());
        return -1;
    }
    batch->swap(b->done);
    return 0;
}

/* Enqueues one frame of `bytes` on the lane, its done event in ring place
 * `k`: the daemon's submit. */
static int submit(Lane *l, int k, size_t bytes) {
    l->submitted_ns[k] = gf_now_ns();
    CK(cudaMemcpyAsync(l->in_dev, l->in_host, bytes, cudaMemcpyHostToDevice, l->stream));
    CK(static_cast<cudaError_t>(gf_echo_launch(nullptr, l->in_dev, bytes, l->out_dev, l->stream)));
    CK(cudaMemcpyAsync(l->out_host, l->out_dev, bytes, cudaMemcpyDeviceToHost, l->stream));
    CK(cudaEventRecord(l->done[k], l->stream));
    return 0;
}

/* Takes the run's next frame, if any is left and the deadline has not
 * passed: 1 when the caller should submit one, 0 when not. */
static int take_ticket(Bench *b, size_t frames, uint64_t deadline_ns) {
    if (gf_now_ns() >= deadline_ns)
        return 0;
    return b->tickets.fetch_add(1, std::memory_order_relaxed) < frames;
}

/* One lane's thread in a run: keeps up to `depth` frames of `bytes` in
 * flight on its stream, taking them from b->tickets until `frames` are
 * handed out or `deadline_ns` passes, and completes them in order by polling
 * the oldest one's event (frames of one stream finish in order).  Appends each
 * frame's submit -> completion seen to l->lat_ns.  Returns 0, or -1 after a
 * CUDA error or a frame not done within kStuckTimeout (its frames may then
 * still be in flight; the caller synchronises before reusing the lane). */
static int run_lane(Lane *l, int depth, size_t bytes, size_t frames, uint64_t deadline_ns) {
    Bench *b = l->bench;
    int head = 0, in_flight = 0;
    CK(cudaSetDevice(b->device));
    for (;;) {
        while (in_flight < depth && take_ticket(b, frames, deadline_ns)) {
            if (submit(l, (head + in_flight) % depth, bytes) != 0)
                return -1;
            in_flight++;
        }
        if (in_flight == 0)
            return 0;
        cudaError_t err;
        while ((err = cudaEventQuery(l->done[head])) == cudaErrorNotReady)
            if (gf_now_ns() - l->submitted_ns[head] > (uint64_t)1e9 * kStuckTimeout.count()) {
                std::fprintf(stderr, "gf_limits: a frame not done after %lld s: the GPU is stuck\n",
                             (long long)kStuckTimeout.count());
                return -1;
            }
        CK(err);
        l->lat_ns.push_back(gf_now_ns() - l->submitted_ns[head]);
        head = (head + 1) % depth;
        in_flight--;
    }
}

/* Runs `frames` frames of `bytes` over the first `streams` lanes, `depth` in
 * flight on each (at most kDepth), one thread per lane, stopping early after
 * max_seconds.  Fills the per-frame submit -> completion latencies; returns 0
 * with *secs the wall time from the threads' start to the last completion,
 * or -1. */
static int run_frames(Bench *b, int streams, int depth, size_t bytes, size_t frames,
                      double max_seconds, std::vector<uint64_t> *lat_ns, double *secs) {
    std::vector<std::thread> threads;
    int rc = 0;
    assert(depth >= 1 && depth <= kDepth && streams >= 1 && streams <= kMaxStreams);
    lat_ns->clear();
    b->tickets.store(0);
    for (int i = 0; i < streams; i++) {
        b->lanes[i].lat_ns.clear();
        b->lanes[i].lat_ns.reserve(frames);
    }
    const uint64_t t0 = gf_now_ns();
    const uint64_t deadline = t0 + (uint64_t)(max_seconds * 1e9);
    for (int i = 0; i < streams; i++)
        threads.emplace_back([=] {
            Lane *l = &b->lanes[i];
            l->rc = run_lane(l, depth, bytes, frames, deadline);
        });
    for (std::thread &t : threads)
        t.join();
    *secs = (double)(gf_now_ns() - t0) / 1e9;
    for (int i = 0; i < streams; i++) {
        Lane *l = &b->lanes[i];
        rc |= l->rc;
        lat_ns->insert(lat_ns->end(), l->lat_ns.begin(), l->lat_ns.end());
    }
    return rc != 0 ? -1 : 0;
}

/* The pipeline on every count of kStreamCounts at one size, kDepth frames
 * in flight per stream, then the latency floor: one stream, one frame in
 * flight. */
static int pipeline(Bench *b, size_t bytes) {
    std::vector<uint64_t> lat;
    double secs;
    const size_t frames =
        clamp_count(kPipelineTargetBytes / bytes / b->divisor, kPipelineMinFrames / b->divisor,
                    kPipelineMaxFrames / b->divisor);
    /* Warm-up (first launches, page mappings, the threads' contexts), then
     * check the echo really ran. */
    for (int i = 0; i < kMaxStreams; i++)
        std::memset(b->lanes[i].out_host, 0, bytes);
    if (run_frames(b, kMaxStreams, kDepth, bytes, 4 * kDepth * kMaxStreams, b->max_seconds, &lat,
                   &secs) != 0)
        return -1;
    for (int i = 0; i < kMaxStreams; i++)
        if (std::memcmp(b->lanes[i].in_host, b->lanes[i].out_host, bytes) != 0) {
            std::fprintf(stderr, "gf_limits: stream %d returned wrong bytes at size %zu\n", i,
                         bytes);
            return -1;
        }
    for (int streams : kStreamCounts) {
        if (run_frames(b, streams, kDepth, bytes, frames, b->max_seconds, &lat, &secs) != 0)
            return -1;
        const double fps = (double)lat.size() / secs;
        const double p50 = percentile_ns(lat, 50) / 1e3, p99 = percentile_ns(lat, 99) / 1e3;
        std::printf("limit name=pipeline streams=%d depth=%d size=%zu frames=%zu fps=%.1f "
                    "GBps=%.3f p50_us=%.1f p99_us=%.1f\n",
                    streams, kDepth, bytes, lat.size(), fps, fps * (double)bytes / 1e9, p50, p99);
        std::fflush(stdout);
    }
    if (run_frames(b, 1, 1, bytes, std::min(frames, kLatencyMaxFrames / b->divisor), b->max_seconds,
                   &lat, &secs) != 0)
        return -1;
    std::printf("limit name=latency size=%zu p50_us=%.1f p99_us=%.1f\n", bytes,
                percentile_ns(lat, 50) / 1e3, percentile_ns(lat, 99) / 1e3);
    std::fflush(stdout);
    return 0;
}

/* cudaLaunchHostFunc alone on an idle stream: submit -> callback. */
static int hostfunc(Bench *b) {
    Lane *l = &b->lanes[0];
    std::vector<Lane *> batch;
    std::vector<uint64_t> lat;
    const int count = kHostFuncCount / (int)b->divisor;
    lat.reserve(count);
    for (int i = -count / 10; i < count; i++) { /* the first tenth is warm-up */
        const uint64_t submitted_ns = gf_now_ns();
        CK(cudaLaunchHostFunc(l->stream, on_done, l));
        if (wait_done(b, &batch) != 0)
            return -1;
        if (i >= 0)
            lat.push_back(l->completed_ns - submitted_ns);
    }
    std::printf("limit name=hostfunc p50_us=%.1f p99_us=%.1f\n", percentile_ns(lat, 50) / 1e3,
                percentile_ns(lat, 99) / 1e3);
    return 0;
}

/* Pinned copy bandwidth one way at one size: back-to-back copies on one
 * stream, timed with events around them. */
static int copy_bw(Bench *b, size_t bytes, cudaMemcpyKind kind, const char *name) {
    Lane *l = &b->lanes[0];
    void *dst = kind == cudaMemcpyHostToDevice ? l->in_dev : l->out_host;
    const void *src = kind == cudaMemcpyHostToDevice ? l->in_host : l->out_dev;
    const size_t count =
        clamp_count(kCopyTargetBytes / bytes / b->divisor, kCopyMinCount, kCopyMaxCount);
    cudaEvent_t start = nullptr, stop = nullptr;
    float ms = 0;
    int rc = -1;
    CK(cudaEventCreate(&start));
    if (cudaEventCreate(&stop) != cudaSuccess)
        goto fail;
    if (cudaMemcpyAsync(dst, src, bytes, kind, l->stream) != cudaSuccess || /* warm-up */
        cudaEventRecord(start, l->stream) != cudaSuccess)
        goto fail;
    for (size_t i = 0; i < count; i++)
        if (cudaMemcpyAsync(dst, src, bytes, kind, l->stream) != cudaSuccess)
            goto fail;
    if (cudaEventRecord(stop, l->stream) != cudaSuccess ||
        cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess)
        goto fail;
    std::printf("limit name=%s size=%zu GBps=%.3f\n", name, bytes,
                (double)bytes * (double)count / (ms / 1e3) / 1e9);
    rc = 0;
fail:
    if (rc != 0)
        std::fprintf(stderr, "gf_limits: %s copies of %zu bytes: %s\n", name, bytes,
                     cudaGetErrorString(cudaGetLastError()));
    if (stop)
        cudaEventDestroy(stop);
    cudaEventDestroy(start);
    return rc;
}

static int lanes_open(Bench *b) {
    for (int i = 0; i < kMaxStreams; i++) {
        Lane *l = &b->lanes[i];
        l->bench = b;
        CK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
        CK(cudaHostAlloc(&l->in_host, b->max_bytes, cudaHostAllocDefault));
        CK(cudaHostAlloc(&l->out_host, b->max_bytes, cudaHostAllocDefault));
        CK(cudaMalloc(&l->in_dev, b->max_bytes));
        CK(cudaMalloc(&l->out_dev, b->max_bytes));
        for (cudaEvent_t &e : l->done)
            CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        unsigned char *in = static_cast<unsigned char *>(l->in_host);
        for (size_t k = 0; k < b->max_bytes; k++)
            in[k] = (unsigned char)(k * 131u + (unsigned)i * 7u + 1u);
    }
    return 0;
}

/* Frees what lanes_open got, whatever point it reached (zeroed lanes). */
static void lanes_close(Bench *b) {
    for (Lane &l : b->lanes) {
        if (l.stream) {
            cudaStreamSynchronize(l.stream);
            cudaStreamDestroy(l.stream);
        }
        if (l.in_host)
            cudaFreeHost(l.in_host);
        if (l.out_host)
            cudaFreeHost(l.out_host);
        if (l.in_dev)
            cudaFree(l.in_dev);
        if (l.out_dev)
            cudaFree(l.out_dev);
        for (cudaEvent_t e : l.done)
            if (e)
                cudaEventDestroy(e);
    }
}

/* Parses "4096,64K,1M" (K and M binary) into sizes[]; returns the count, or 0. */
static size_t parse_sizes(const char *s, size_t *sizes, size_t cap) {
    size_t n = 0;
    while (*s) {
        char *end;
        unsigned long long v = std::strtoull(s, &end, 10);
        if (end == s || n == cap)
            return 0;
        if (*end == 'K' || *end == 'M')
            v <<= (*end++ == 'K' ? 10 : 20);
        if (v == 0 || v > (1ull << 30) || (*end != ',' && *end != '\0'))
            return 0;
        sizes[n++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    static Bench b; /* zeroed: lanes_close can tell what was opened */
    size_t sizes[kMaxSizeCount];
    size_t size_count = sizeof kDefaultSizes / sizeof kDefaultSizes[0];
    int dev = 0, driver = 0, runtime = 0, rc = 1;
    cudaDeviceProp prop;

    std::copy(kDefaultSizes, kDefaultSizes + size_count, sizes);
    b.divisor = 1;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--short")) {
            b.divisor = kShortDivisor;
        } else if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) {
            if ((size_count = parse_sizes(argv[++i], sizes, kMaxSizeCount)) == 0) {
                std::fprintf(stderr,
                             "gf_limits: --sizes: expected BYTES[K|M],... (at most %zu, "
                             "each at most 1G), got '%s'\n",
                             kMaxSizeCount, argv[i]);
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: gf_limits [--sizes BYTES,...] [--short]\n");
            return 2;
        }
    }
    b.max_bytes = *std::max_element(sizes, sizes + size_count);
    b.max_seconds = kPipelineMaxSeconds / (double)b.divisor;

    cudaError_t err = cudaGetDevice(&dev);
    b.device = dev;
    if (err == cudaSuccess)
        err = cudaGetDeviceProperties(&prop, dev);
    if (err != cudaSuccess) {
        std::fprintf(stderr, "gf_limits: no usable CUDA device: %s\n", cudaGetErrorString(err));
        return 1;
    }
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf("# device: %s, sm_%d%d, driver API %d, runtime %d\n", prop.name, prop.major,
                prop.minor, driver, runtime);

    if (lanes_open(&b) != 0)
        goto fail;
    if (hostfunc(&b) != 0)
        goto fail;
    for (size_t i = 0; i < size_count; i++)
        if (pipeline(&b, sizes[i]) != 0 ||
            copy_bw(&b, sizes[i], cudaMemcpyHostToDevice, "h2d") != 0 ||
            copy_bw(&b, sizes[i], cudaMemcpyDeviceToHost, "d2h") != 0)
            goto fail;
    if (cudaDeviceSynchronize() != cudaSuccess) {
        std::fprintf(stderr, "gf_limits: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    rc = 0;
fail:
    std::fflush(stdout);
    lanes_close(&b);
    return rc;
}

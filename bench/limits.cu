/* SPDX-License-Identifier: MIT */
/*
 * gf_limits: what gpuframed's GPU path could reach with no socket and no
 * event loop, measured in-process the way daemon/engine_cuda.c works: pinned
 * host buffers (cudaHostAlloc), one non-blocking stream per "slot" with its
 * own buffers, H2D -> the daemon's own echo kernel (gf_echo_launch) -> D2H ->
 * cudaLaunchHostFunc, whose callback pushes the slot onto a completion queue
 * that a waiting host thread drains (the loop's role).  A slot gets its next
 * frame only after the host saw its previous completion, as in the daemon.
 * No timing events: the figures are the floor under the daemon's defaults.
 *
 *   gf_limits [--sizes BYTES,...] [--short]
 *
 * Prints one line per figure (bench/README.md says what each is):
 *   limit name=pipeline streams=S size=B frames=N fps=R GBps=R p50_us=L p99_us=L
 *   limit name=latency size=B p50_us=L p99_us=L      (1 stream, 1 frame in flight)
 *   limit name=hostfunc p50_us=L p99_us=L            (cudaLaunchHostFunc alone)
 *   limit name=h2d size=B GBps=R / limit name=d2h size=B GBps=R   (pinned copies)
 * GB/s are 1e9 bytes per second, one direction.  Lines starting with '#' are
 * comments (the device).  Exit status 0, 1 on any CUDA error or a completion
 * that never came (the message on stderr), 2 on a bad command line.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
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

/* The daemon's slot counts the benchmark compares against. */
static const int kStreamCounts[] = {1, 2, 4};
static const int kMaxStreams = 4;
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
static const int kHostFuncCount = 2000;
/* --short divides the counts and the time cap by this. */
static const size_t kShortDivisor = 10;
/* A completion not seen for this long means the GPU is stuck (a sticky
 * error stops host functions for good): fail instead of hanging. */
static const auto kStuckTimeout = std::chrono::seconds(10);

struct Bench;

/* One stream with its own buffers, like one daemon slot. */
struct Lane {
    Bench *bench;             /* the owner, for the host function               */
    cudaStream_t stream;      /* non-blocking                                   */
    void *in_host, *out_host; /* pinned, max_bytes each                        */
    void *in_dev, *out_dev;   /* device, max_bytes each                         */
    uint64_t submitted_ns;    /* when its frame in flight was submitted         */
    uint64_t completed_ns;    /* set by the host function                       */
};

/* Everything the runs share; the completion queue is the host functions'
 * hand-off to the waiting thread. */
struct Bench {
    Lane lanes[kMaxStreams];
    size_t max_bytes;
    double max_seconds;
    size_t divisor; /* 1, or kShortDivisor */
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Lane *> done; /* completed lanes not yet seen, under mu */
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

/* The host function: stamps the lane, queues it, wakes the waiter.  No CUDA
 * call (DESIGN.md invariant 2). */
static void CUDART_CB on_done(void *arg) {
    Lane *l = static_cast<Lane *>(arg);
    Bench *b = l->bench;
    l->completed_ns = gf_now_ns();
    std::lock_guard<std::mutex> g(b->mu);
    b->done.push_back(l);
    b->cv.notify_one();
}

/* Waits for at least one completion and moves all of them into *batch.
 * Returns 0, or -1 when none came within kStuckTimeout. */
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

/* Enqueues one frame of `bytes` on the lane: the daemon's submit. */
static int submit(Lane *l, size_t bytes) {
    l->submitted_ns = gf_now_ns();
    CK(cudaMemcpyAsync(l->in_dev, l->in_host, bytes, cudaMemcpyHostToDevice, l->stream));
    CK(static_cast<cudaError_t>(gf_echo_launch(nullptr, l->in_dev, bytes, l->out_dev, l->stream)));
    CK(cudaMemcpyAsync(l->out_host, l->out_dev, bytes, cudaMemcpyDeviceToHost, l->stream));
    CK(cudaLaunchHostFunc(l->stream, on_done, l));
    return 0;
}

/* Runs `frames` frames of `bytes` over the first `streams` lanes, each lane
 * resubmitted when its completion is seen, stopping early after max_seconds.
 * Fills the per-frame submit -> callback latencies; returns 0 with *secs the
 * wall time from first submit to last completion seen, or -1. */
static int run_frames(Bench *b, int streams, size_t bytes, size_t frames, double max_seconds,
                      std::vector<uint64_t> *lat_ns, double *secs) {
    std::vector<Lane *> batch;
    size_t submitted = 0, completed = 0;
    lat_ns->clear();
    lat_ns->reserve(frames);
    const uint64_t t0 = gf_now_ns();
    const uint64_t deadline = t0 + (uint64_t)(max_seconds * 1e9);
    for (int i = 0; i < streams && submitted < frames; i++, submitted++)
        if (submit(&b->lanes[i], bytes) != 0)
            return -1;
    while (completed < submitted) {
        if (wait_done(b, &batch) != 0)
            return -1;
        for (Lane *l : batch) {
            completed++;
            lat_ns->push_back(l->completed_ns - l->submitted_ns);
            if (submitted < frames && gf_now_ns() < deadline) {
                if (submit(l, bytes) != 0)
                    return -1;
                submitted++;
            }
        }
    }
    *secs = (double)(gf_now_ns() - t0) / 1e9;
    return 0;
}

/* The pipeline on 1, 2 and 4 streams at one size; the 1-stream run is also
 * the latency floor (one frame in flight). */
static int pipeline(Bench *b, size_t bytes) {
    std::vector<uint64_t> lat;
    double secs;
    const size_t frames =
        clamp_count(kPipelineTargetBytes / bytes / b->divisor, kPipelineMinFrames / b->divisor,
                    kPipelineMaxFrames / b->divisor);
    /* Warm-up (first launches, page mappings), then check the echo really ran. */
    for (int i = 0; i < kMaxStreams; i++)
        std::memset(b->lanes[i].out_host, 0, bytes);
    if (run_frames(b, kMaxStreams, bytes, 4 * kMaxStreams, b->max_seconds, &lat, &secs) != 0)
        return -1;
    for (int i = 0; i < kMaxStreams; i++)
        if (std::memcmp(b->lanes[i].in_host, b->lanes[i].out_host, bytes) != 0) {
            std::fprintf(stderr, "gf_limits: stream %d returned wrong bytes at size %zu\n", i,
                         bytes);
            return -1;
        }
    for (int streams : kStreamCounts) {
        if (run_frames(b, streams, bytes, frames, b->max_seconds, &lat, &secs) != 0)
            return -1;
        const double fps = (double)lat.size() / secs;
        const double p50 = percentile_ns(lat, 50) / 1e3, p99 = percentile_ns(lat, 99) / 1e3;
        std::printf("limit name=pipeline streams=%d size=%zu frames=%zu fps=%.1f GBps=%.3f "
                    "p50_us=%.1f p99_us=%.1f\n",
                    streams, bytes, lat.size(), fps, fps * (double)bytes / 1e9, p50, p99);
        if (streams == 1)
            std::printf("limit name=latency size=%zu p50_us=%.1f p99_us=%.1f\n", bytes, p50, p99);
        std::fflush(stdout);
    }
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
        l->submitted_ns = gf_now_ns();
        CK(cudaLaunchHostFunc(l->stream, on_done, l));
        if (wait_done(b, &batch) != 0)
            return -1;
        if (i >= 0)
            lat.push_back(l->completed_ns - l->submitted_ns);
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

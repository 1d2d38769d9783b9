/* SPDX-License-Identifier: MIT */
// CUDA graphs against plain launches, for a plugin's batched entry (issue 24):
// one submission as the CUDA engine makes it (an H2D copy of the batch's
// inputs, the plugin's launch_batch over all its frames, a D2H copy of the
// results at the frames' stride), enqueued as plain calls or replayed from a
// graph captured once for that batch shape.  For each batch size:
//   throughput  submissions back to back on one stream: GPU time each;
//   latency     one submission enqueued and waited for, one at a time;
//   enqueue     host time to enqueue one (what the loop thread pays).
// Both ways run in the same process, alternating, and print their ratio.
//
//   gf_graphs PLUGIN.so WEIGHTS [--iterations N]
//
// stdout: one line per batch size,
//   graphs frames=N plain_us=A graph_us=B ratio=B/A latency_plain_us=C
//          latency_graph_us=D enqueue_plain_us=E enqueue_graph_us=F
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"
#include "gpuframe_plugin.h"

/* One batch shape: pinned host and device buffers, the frames as the engine
 * lays them out (each input and output at the same 256-byte-aligned offset). */
struct Batch {
    uint32_t count;
    size_t in_bytes, out_bytes, stride;
    unsigned char *in_host, *out_host, *in_dev, *out_dev;
    std::vector<gf_plugin_frame> frames;
};

static void enqueue(const gf_plugin *p, void *dev, const Batch &b, cudaStream_t s) {
    CHECK(cudaMemcpyAsync(b.in_dev, b.in_host, b.stride * b.count, cudaMemcpyHostToDevice, s));
    int err = p->launch_batch(dev, 0, b.frames.data(), b.count, s);
    if (err != 0) {
        std::fprintf(stderr, "launch_batch: %s\n", cudaGetErrorString((cudaError_t)err));
        std::exit(1);
    }
    CHECK(cudaMemcpy2DAsync(b.out_host, b.stride, b.out_dev, b.stride, b.out_bytes, b.count,
                            cudaMemcpyDeviceToHost, s));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: gf_graphs PLUGIN.so WEIGHTS [--iterations N]\n");
        return 2;
    }
    int iterations =
        argc > 4 && std::strcmp(argv[3], "--iterations") == 0 ? std::atoi(argv[4]) : 2000;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    auto entry = h ? (const gf_plugin *(*)(void))dlsym(h, "gf_plugin_entry") : nullptr;
    if (!entry) {
        std::fprintf(stderr, "gf_graphs: %s\n", dlerror());
        return 1;
    }
    const gf_plugin *p = entry();
    if (p->abi_version < 2 || !p->launch_batch) {
        std::fprintf(stderr, "gf_graphs: plugin %s has no launch_batch\n", p->name);
        return 1;
    }
    char why[512] = "";
    gf_plugin_value values[2] = {};
    values[0].string = argv[2];
    values[1].number = 1;
    gf_plugin_env env = {};
    env.max_input_bytes = 1u << 20;
    env.config_dir = "/";
    void *state = p->create(values, &env, why, sizeof why);
    if (!state) {
        std::fprintf(stderr, "gf_graphs: create: %s\n", why);
        return 1;
    }
    CHECK(cudaSetDevice(0));
    void *dev = p->device_open(state, 0, 1, why, sizeof why);
    if (!dev) {
        std::fprintf(stderr, "gf_graphs: device_open: %s\n", why);
        return 1;
    }
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* The smallest input the plugin takes whole: one vector, found by asking. */
    size_t in_bytes = 4;
    while (p->output_bytes(state, in_bytes, why, sizeof why) < 0 && in_bytes < (1u << 20))
        in_bytes += 4;
    size_t out_bytes = (size_t)p->output_bytes(state, in_bytes, why, sizeof why);
    const uint32_t sizes[] = {1, 4, 16, 64};
    for (uint32_t count : sizes) {
        if (count > p->max_batch_frames)
            break;
        Batch b;
        b.count = count;
        b.in_bytes = in_bytes;
        b.out_bytes = out_bytes;
        b.stride = (std::max(in_bytes, out_bytes) + 255) / 256 * 256;
        CHECK(cudaMallocHost(&b.in_host, b.stride * count));
        CHECK(cudaMallocHost(&b.out_host, b.stride * count));
        CHECK(cudaMalloc(&b.in_dev, b.stride * count));
        CHECK(cudaMalloc(&b.out_dev, b.stride * count));
        for (size_t i = 0; i < b.stride * count / 4; i++)
            ((float *)b.in_host)[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
        for (uint32_t i = 0; i < count; i++)
            b.frames.push_back(
                {b.in_dev + i * b.stride, in_bytes, b.out_dev + i * b.stride, out_bytes});
        /* Warm up (cuBLAS picks its kernels, the stream is bound), then capture. */
        for (int i = 0; i < 20; i++)
            enqueue(p, dev, b, s);
        CHECK(cudaStreamSynchronize(s));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        enqueue(p, dev, b, s);
        CHECK(cudaStreamEndCapture(s, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        std::vector<unsigned char> plain_out(b.stride * count), graph_out(b.stride * count);
        double thr[2] = {0, 0}, lat[2] = {0, 0}, enq[2] = {0, 0};
        for (int round = 0; round < 3; round++) {
            for (int way = 0; way < 2; way++) {
                double t0 = now_us(), e = 0;
                for (int i = 0; i < iterations; i++) {
                    double q = now_us();
                    if (way == 0)
                        enqueue(p, dev, b, s);
                    else
                        CHECK(cudaGraphLaunch(exec, s));
                    e += now_us() - q;
                }
                CHECK(cudaStreamSynchronize(s));
                thr[way] += (now_us() - t0) / iterations / 3;
                enq[way] += e / iterations / 3;
                t0 = now_us();
                for (int i = 0; i < iterations / 10; i++) {
                    if (way == 0)
                        enqueue(p, dev, b, s);
                    else
                        CHECK(cudaGraphLaunch(exec, s));
                    CHECK(cudaStreamSynchronize(s));
                }
                lat[way] += (now_us() - t0) / (iterations / 10) / 3;
                std::memcpy(way == 0 ? plain_out.data() : graph_out.data(), b.out_host,
                            b.stride * count);
            }
        }
        /* The same results either way: the graph replays the same work. */
        for (uint32_t i = 0; i < count; i++)
            if (std::memcmp(plain_out.data() + i * b.stride, graph_out.data() + i * b.stride,
                            out_bytes) != 0) {
                std::fprintf(stderr, "gf_graphs: frame %u of %u differs between the two ways\n", i,
                             count);
                return 1;
            }
        std::printf("graphs frames=%u plain_us=%.1f graph_us=%.1f ratio=%.2f latency_plain_us=%.1f "
                    "latency_graph_us=%.1f enqueue_plain_us=%.1f enqueue_graph_us=%.1f\n",
                    count, thr[0], thr[1], thr[1] / thr[0], lat[0], lat[1], enq[0], enq[1]);
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        CHECK(cudaFreeHost(b.in_host));
        CHECK(cudaFreeHost(b.out_host));
        CHECK(cudaFree(b.in_dev));
        CHECK(cudaFree(b.out_dev));
    }
    p->device_close(dev);
    p->destroy(state);
    return 0;
}

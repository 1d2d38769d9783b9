/* SPDX-License-Identifier: MIT */
/*
 * gf_devices_copy: the host's copy bound for frames on several GPUs at once
 * (bench/devices.sh).  An echo frame of the daemon crosses the bus twice
 * (H2D, then D2H); here every device of 0..N-1 runs pinned copies both ways
 * at once, H2D on one stream and D2H on another, each with its own pinned
 * host buffers, all devices together from one thread (asynchronous copies;
 * the clock is the host's, from the first copy queued to the last device
 * done).  Prints, for N = 1 and for every device:
 *
 *   limit name=echo_copies devices=N size=B GBps=R fps=R
 *
 * GBps counts one direction's bytes (the frame's), as the daemon's in_GBps
 * does; fps is frames of B bytes both ways per second.  Host buffers are
 * allocated by the thread, so they sit on its NUMA node, as the client's
 * shared memory would for a client on that node.
 *
 *   gf_devices_copy [--size BYTES] [--seconds S]
 */
#include <cstring>
#include <vector>

#include "cuda_check.h"

namespace {

struct Dev {
    int id = -1;
    cudaStream_t up = nullptr, down = nullptr;
    void *in_host = nullptr, *out_host = nullptr, *in_dev = nullptr, *out_dev = nullptr;
};

void open_dev(Dev &d, int id, size_t bytes) {
    d.id = id;
    CHECK(cudaSetDevice(id));
    CHECK(cudaStreamCreateWithFlags(&d.up, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&d.down, cudaStreamNonBlocking));
    CHECK(cudaHostAlloc(&d.in_host, bytes, cudaHostAllocPortable));
    CHECK(cudaHostAlloc(&d.out_host, bytes, cudaHostAllocPortable));
    CHECK(cudaMalloc(&d.in_dev, bytes));
    CHECK(cudaMalloc(&d.out_dev, bytes));
    std::memset(d.in_host, 0x5a, bytes);
}

/* Frames per device of `bytes` both ways on devices [0, n), `rounds` each:
 * seconds from the first copy queued to the last stream done. */
double run(std::vector<Dev> &devs, int n, size_t bytes, int rounds) {
    double t0 = now_us();
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < n; k++) {
            Dev &d = devs[(size_t)k];
            CHECK(cudaSetDevice(d.id));
            CHECK(cudaMemcpyAsync(d.in_dev, d.in_host, bytes, cudaMemcpyHostToDevice, d.up));
            CHECK(cudaMemcpyAsync(d.out_host, d.out_dev, bytes, cudaMemcpyDeviceToHost, d.down));
        }
    for (int k = 0; k < n; k++) {
        CHECK(cudaSetDevice(devs[(size_t)k].id));
        CHECK(cudaStreamSynchronize(devs[(size_t)k].up));
        CHECK(cudaStreamSynchronize(devs[(size_t)k].down));
    }
    return (now_us() - t0) / 1e6;
}

} // namespace

int main(int argc, char **argv) {
    size_t bytes = 16u << 20;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        char *end = nullptr;
        if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
            unsigned long long v = std::strtoull(argv[++i], &end, 10);
            if (*end == 'K' || *end == 'M')
                v <<= (*end++ == 'K' ? 10 : 20);
            if (end == argv[i] || *end != '\0' || v == 0 || v > (1ull << 30)) {
                std::fprintf(stderr,
                             "gf_devices_copy: --size: expected BYTES[K|M] up to 1G, "
                             "got '%s'\n",
                             argv[i]);
                return 2;
            }
            bytes = (size_t)v;
        } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = std::strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(seconds > 0 && seconds <= 60)) {
                std::fprintf(stderr,
                             "gf_devices_copy: --seconds: expected 0 < S <= 60, got "
                             "'%s'\n",
                             argv[i]);
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: gf_devices_copy [--size BYTES] [--seconds S]\n");
            return 2;
        }
    }
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count < 1) {
        std::fprintf(stderr, "gf_devices_copy: no usable CUDA device: %s\n",
                     cudaGetErrorString(err));
        return 1;
    }
    std::vector<Dev> devs((size_t)count);
    for (int k = 0; k < count; k++)
        open_dev(devs[(size_t)k], k, bytes);
    /* Rounds for about `seconds` on one device, from a warm-up's rate. */
    double warm = run(devs, 1, bytes, 4);
    int rounds = (int)(seconds / (warm / 4));
    if (rounds < 8)
        rounds = 8;
    for (int n = 1; n <= count; n = n == count ? count + 1 : (n * 2 > count ? count : n * 2)) {
        run(devs, n, bytes, 2); /* warm-up of the devices added */
        double s = run(devs, n, bytes, rounds);
        double fps = (double)rounds * n / s;
        std::printf("limit name=echo_copies devices=%d size=%zu GBps=%.3f fps=%.1f\n", n, bytes,
                    fps * (double)bytes / 1e9, fps);
    }
    std::fflush(stdout);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * gf_media: the media kinds' limits in-process, for bench/media.sh (issue
 * 34): the stages' kernels through their device APIs exactly as the CUDA
 * engine calls them (kernels.h, gf_kernel_device_api) on inputs already on
 * the device, and the copy bound of their frames: pinned H2D of the inputs
 * and D2H of the outputs, on four streams, nothing else.
 *
 *   gf_media [--short]
 *
 * Cases (the figures' own): image, 1920x1080 NV12 (BT.709 limited) to
 * 3x224x224 float32, resized to cover, centre-cropped, ImageNet-normalised,
 * at batch 1 and 16, and the same from RGB8 at batch 16 (torchvision's
 * input); spectrogram, 1 s of 16 kHz int16 to 64 log-mels (n_fft 400, hop
 * 160), at batch 16 and 64.  Every case is first checked against the C
 * reference (two frames of the batch), then timed with events over many
 * launches of the batch.  Prints:
 *   # device NAME
 *   kernel case=C batch=B us_per_batch=T frames_per_s=R
 *   limit name=copy case=C in_bytes=I out_bytes=O frames_per_s=R
 * Exit status 0, 1 on a CUDA error or a result that differs from the
 * reference.
 */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"
#include "kernels.h"
#include "pipeline.h"

static gf_params image_params(uint32_t format) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("image"), &p);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    p.format = format; /* 4 nv12, 0 rgb8: kernels/image_math.h's order */
    p.width = 1920;
    p.height = 1080;
    p.matrix = 1; /* bt709 */
    p.out_width = p.out_height = 224;
    p.fit = 1; /* crop */
    std::memcpy(p.mean, mean, sizeof mean);
    std::memcpy(p.std, std, sizeof std);
    return p;
}

static gf_params spectrogram_params() {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("spectrogram"), &p);
    p.n_mels = 64;
    p.log = 1; /* ln */
    p.eps = 1e-6f;
    return p;
}

static size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

/* Checks, then times `batch` frames of `kind` with `p`, and prints the line. */
static void time_kernel(const char *label, const char *kind_name, const gf_params &p,
                        uint32_t batch, int iters) {
    const gf_pipeline_kind *kind = gf_pipeline_kind_find(kind_name);
    const gf_plugin *api = gf_kernel_device_api(kind);
    char why[512];
    const size_t in_bytes = kind->warmup_input_bytes(&p);
    const int64_t out = kind->output_bytes(&p, in_bytes, why, sizeof why);
    if (out <= 0) {
        std::fprintf(stderr, "gf_media: %s: %s\n", label, why);
        std::exit(1);
    }
    const size_t out_bytes = static_cast<size_t>(out),
                 stride = align256(in_bytes > out_bytes ? in_bytes : out_bytes);
    std::vector<unsigned char> in(stride * batch), got(out_bytes), ref(out_bytes);
    uint64_t s = 0x34;
    for (auto &b : in) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        b = static_cast<unsigned char>(s >> 56);
    }
    void *in_dev, *out_dev;
    cudaStream_t stream;
    CHECK(cudaMalloc(&in_dev, stride * batch));
    CHECK(cudaMalloc(&out_dev, stride * batch));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cudaMemcpy(in_dev, in.data(), stride * batch, cudaMemcpyHostToDevice));
    std::vector<gf_plugin_frame> frames(batch);
    for (uint32_t f = 0; f < batch; f++)
        frames[f] = {static_cast<unsigned char *>(in_dev) + f * stride, in_bytes,
                     static_cast<unsigned char *>(out_dev) + f * stride, out_bytes};
    gf_params state = p;
    void *dev = api->device_open(&state, 0, 1, why, sizeof why);
    if (dev == nullptr) {
        std::fprintf(stderr, "gf_media: %s: device_open: %s\n", label, why);
        std::exit(1);
    }
    int rc = api->launch_batch(dev, 0, frames.data(), batch, stream);
    CHECK(static_cast<cudaError_t>(rc));
    CHECK(cudaStreamSynchronize(stream));
    for (uint32_t f : {0u, batch - 1}) {
        CHECK(cudaMemcpy(got.data(), static_cast<unsigned char *>(out_dev) + f * stride, out_bytes,
                         cudaMemcpyDeviceToHost));
        kind->reference(&p, in.data() + f * stride, in_bytes, ref.data());
        if (gf_pipeline_compare(kind, got.data(), ref.data(), out_bytes, why, sizeof why) != 0) {
            std::fprintf(stderr, "gf_media: %s batch %u frame %u differs from the reference: %s\n",
                         label, batch, f, why);
            std::exit(1);
        }
    }
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; i++)
        CHECK(static_cast<cudaError_t>(api->launch_batch(dev, 0, frames.data(), batch, stream)));
    CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; i++)
        CHECK(static_cast<cudaError_t>(api->launch_batch(dev, 0, frames.data(), batch, stream)));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double us = 1000.0 * ms / iters;
    std::printf("kernel case=%s batch=%u us_per_batch=%.1f frames_per_s=%.0f\n", label, batch, us,
                batch * 1e6 / us);
    std::fflush(stdout);
    api->device_close(dev);
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(in_dev));
    CHECK(cudaFree(out_dev));
}

/* Frames/s of copies alone: per frame its input H2D and its output D2H,
 * batches of `batch` frames on 4 streams (H2D and D2H overlap, as in the
 * daemon's slots). */
static void copy_bound(const char *label, size_t in_bytes, size_t out_bytes, uint32_t batch,
                       int rounds) {
    constexpr int kStreams = 4;
    void *host_in[kStreams], *host_out[kStreams], *dev_in[kStreams], *dev_out[kStreams];
    cudaStream_t st[kStreams];
    for (int i = 0; i < kStreams; i++) {
        CHECK(cudaHostAlloc(&host_in[i], in_bytes * batch, cudaHostAllocDefault));
        CHECK(cudaHostAlloc(&host_out[i], out_bytes * batch, cudaHostAllocDefault));
        CHECK(cudaMalloc(&dev_in[i], in_bytes * batch));
        CHECK(cudaMalloc(&dev_out[i], out_bytes * batch));
        CHECK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    }
    double t0 = 0;
    for (int r = -2; r < rounds; r++) {
        if (r == 0) {
            CHECK(cudaDeviceSynchronize());
            t0 = now_us();
        }
        for (int i = 0; i < kStreams; i++) {
            CHECK(cudaMemcpyAsync(dev_in[i], host_in[i], in_bytes * batch, cudaMemcpyHostToDevice,
                                  st[i]));
            CHECK(cudaMemcpyAsync(host_out[i], dev_out[i], out_bytes * batch,
                                  cudaMemcpyDeviceToHost, st[i]));
        }
    }
    CHECK(cudaDeviceSynchronize());
    const double us = now_us() - t0;
    std::printf("limit name=copy case=%s in_bytes=%zu out_bytes=%zu frames_per_s=%.0f\n", label,
                in_bytes, out_bytes, static_cast<double>(rounds) * kStreams * batch * 1e6 / us);
    std::fflush(stdout);
    for (int i = 0; i < kStreams; i++) {
        CHECK(cudaFreeHost(host_in[i]));
        CHECK(cudaFreeHost(host_out[i]));
        CHECK(cudaFree(dev_in[i]));
        CHECK(cudaFree(dev_out[i]));
        CHECK(cudaStreamDestroy(st[i]));
    }
}

int main(int argc, char **argv) {
    const bool short_run = argc > 1 && std::strcmp(argv[1], "--short") == 0;
    if (argc > 2 || (argc == 2 && !short_run)) {
        std::fprintf(stderr, "usage: gf_media [--short]\n");
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# device %s\n", prop.name);
    const int iters = short_run ? 5 : 200;
    const gf_params nv12 = image_params(4), rgb = image_params(0), spec = spectrogram_params();
    time_kernel("image_nv12", "image", nv12, 1, iters);
    time_kernel("image_nv12", "image", nv12, 16, iters);
    time_kernel("image_rgb8", "image", rgb, 16, iters);
    time_kernel("spectrogram", "spectrogram", spec, 16, iters);
    time_kernel("spectrogram", "spectrogram", spec, 64, iters);
    copy_bound("image_nv12", 1920 * 1080 * 3 / 2, 224 * 224 * 3 * 4, 16, short_run ? 3 : 60);
    copy_bound("spectrogram", 16000 * 2, 64 * 101 * 4, 64, short_run ? 3 : 400);
    return 0;
}

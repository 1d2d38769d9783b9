/* SPDX-License-Identifier: MIT */
/*
 * The CUDA side of plugin "mlp", built alone into gf_mlp_cuda.so, which
 * gf_mlp.so loads at device_open (mlp_cuda.h, mlp_cuda_load.c): weights on
 * the device, one cuBLAS handle and one set of scratch per stream, and per
 * frame one SGEMM plus one bias(+ReLU) kernel per layer (and a softmax
 * kernel at the end).
 *
 * Layout: a frame of `rows` input vectors is X, row-major rows x in, which
 * is column-major in x rows with leading dimension in; W is row-major
 * out x in, column-major in x out.  So Y^T = W X^T is, in cuBLAS's
 * column-major terms, Y (out x rows, ld out) = op_T(W) * X, and Y is
 * row-major rows x out: the output's layout, vector after vector.
 *
 * Device memory (README.md, "Memory"): the parameters once, and per stream
 * a cuBLAS workspace of MLP_WORKSPACE_BYTES plus two (one for a two-layer
 * network, none for one layer) hidden buffers of chunk_rows x max_hidden
 * floats, where chunk_rows is the most vectors a frame can carry
 * (max_input_bytes / (4 in)) but at most MLP_SCRATCH_BYTES' worth.  A frame
 * with more vectors than chunk_rows runs in chunks of chunk_rows.
 *
 * launch() enqueues only: no allocation (the workspace is ours, so cuBLAS
 * allocates none either), no synchronisation.  The math mode is
 * CUBLAS_PEDANTIC_MATH: every SGEMM computes in float32, with no TF32 tensor
 * cores or reduced-precision emulation, whatever the defaults of a later
 * cuBLAS or its environment variables say (CUBLAS_DEFAULT_MATH excludes TF32
 * today too).  The price is a narrower choice of kernels, which matters
 * little for classifier-sized products.  The tolerance in mlp.c assumes
 * float32: TF32 would exceed it about 30 times.  Results are bitwise
 * reproducible on one GPU model and cuBLAS version.
 *
 * device_close frees with cudaFree and cublasDestroy, which synchronise the
 * device: the daemon calls it only when the stage has left the
 * configuration.
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gpuframe/plugin.h>

#include "mlp_cuda.h"

/* cuBLAS's own scratch per handle: what NVIDIA recommends for GPUs before
 * Hopper; on Hopper (32 MiB recommended) a smaller workspace only narrows
 * the kernels cuBLAS may pick, for the small SGEMMs of a classifier. */
static constexpr size_t kWorkspaceBytes = 4u << 20;
/* The most bytes one hidden buffer of one stream may take. */
static constexpr uint64_t kScratchBytes = 32u << 20;
/* A chunk's vector count is an int for cuBLAS; a one-layer network has no
 * hidden buffer to bound it, so this does. */
static constexpr uint64_t kMaxChunkRows = 1u << 20;
/* A multiple of the warp size; grid-stride loops cover any length. */
static constexpr unsigned kThreadsPerBlock = 256;
/* Enough blocks to fill an H100/H200 (132 SMs) several times over. */
static constexpr unsigned kMaxBlocks = 1024;
static constexpr unsigned kWarp = 32;

/* One stream's handle and scratch. */
struct mlp_stream {
    cublasHandle_t blas; /* pedantic math; bound to `bound` with our workspace */
    cudaStream_t bound;  /* the stream blas was last bound to (launch binds it) */
    int is_bound;        /* nonzero once launch has bound blas                  */
    void *workspace;     /* kWorkspaceBytes for cuBLAS                          */
    float *hidden[2];    /* chunk_rows x max_hidden floats each, or NULL        */
};

/* The device state device_open returns. */
struct mlp_dev {
    const gf__mlp_net *net; /* the host state: shape, offsets, softmax   */
    float *params;          /* net->params on the device                 */
    uint64_t chunk_rows;    /* vectors per SGEMM, >= 1                    */
    uint32_t stream_count;  /* entries of streams                         */
    mlp_stream *streams;    /* one per stream index                       */
    int device;             /* the CUDA device it was opened on          */
};

/* Writes "call failed: error (mlp.cu:line)" to why[] and jumps to fail. */
#define DEV_CUDA(call)                                                                             \
    do {                                                                                           \
        cudaError_t dev_err_ = (call);                                                             \
        if (dev_err_ != cudaSuccess) {                                                             \
            snprintf(why, why_len, "%s failed: %s (mlp.cu:%d)", #call,                             \
                     cudaGetErrorString(dev_err_), __LINE__);                                      \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define DEV_BLAS(call)                                                                             \
    do {                                                                                           \
        cublasStatus_t dev_st_ = (call);                                                           \
        if (dev_st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            snprintf(why, why_len, "%s failed: %s (mlp.cu:%d)", #call,                             \
                     cublasGetStatusString(dev_st_), __LINE__);                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Frees whatever of `d` exists; for device_close and device_open's failure. */
static void free_dev(mlp_dev *d) {
    for (uint32_t i = 0; d->streams != nullptr && i < d->stream_count; i++) {
        mlp_stream *s = &d->streams[i];
        if (s->blas != nullptr)
            cublasDestroy(s->blas);
        cudaFree(s->workspace);
        cudaFree(s->hidden[0]);
        cudaFree(s->hidden[1]);
    }
    cudaFree(d->params);
    free(d->streams);
    delete d;
}

/* Vectors per SGEMM: the longest frame's, or a batch of one-vector frames
 * (MLP_BATCH_FRAMES_MAX) if more, but at most kScratchBytes of one hidden
 * buffer's worth and kMaxChunkRows; at least 1.  (Sized for the longest
 * frame alone, a stage whose input is one vector, as classify's behind
 * normalize_u8, ran every batch frame by frame.) */
static uint64_t chunk_rows_for(const gf__mlp_net *net) {
    uint64_t rows = net->max_input_bytes / (sizeof(float) * net->shape.dims[0]);
    if (rows < MLP_BATCH_FRAMES_MAX)
        rows = MLP_BATCH_FRAMES_MAX;
    if (net->max_hidden > 0 && rows > kScratchBytes / (sizeof(float) * net->max_hidden))
        rows = kScratchBytes / (sizeof(float) * net->max_hidden);
    rows = rows < kMaxChunkRows ? rows : kMaxChunkRows;
    return rows > 0 ? rows : 1;
}

static int warm_up(mlp_dev *d, char *why, size_t why_len);

/* The device is current already (the ABI says so); it is kept for
 * device_close, which may come with another one current. */
static void *mlp_device_open(const void *state, int device, uint32_t streams, char *why,
                             size_t why_len) {
    const gf__mlp_net *net = static_cast<const gf__mlp_net *>(state);
    const gf__mlp_shape *shape = &net->shape;
    const uint64_t param_bytes = shape->param_count * sizeof(float);
    const uint32_t hidden_count = shape->layer_count > 2 ? 2 : shape->layer_count - 1;

    if (streams == 0) {
        snprintf(why, why_len, "device_open for 0 streams");
        return nullptr;
    }
    mlp_dev *d = new (std::nothrow) mlp_dev();
    if (d == nullptr) {
        snprintf(why, why_len, "out of memory");
        return nullptr;
    }
    d->net = net;
    d->device = device;
    d->chunk_rows = chunk_rows_for(net);
    d->streams = static_cast<mlp_stream *>(calloc(streams, sizeof *d->streams));
    if (d->streams == nullptr) {
        snprintf(why, why_len, "out of memory");
        goto fail;
    }
    d->stream_count = streams;
    DEV_CUDA(cudaMalloc(&d->params, param_bytes));
    DEV_CUDA(cudaMemcpy(d->params, net->params, param_bytes, cudaMemcpyHostToDevice));
    for (uint32_t i = 0; i < streams; i++) {
        mlp_stream *s = &d->streams[i];
        DEV_BLAS(cublasCreate(&s->blas));
        DEV_BLAS(cublasSetMathMode(s->blas, CUBLAS_PEDANTIC_MATH));
        DEV_CUDA(cudaMalloc(&s->workspace, kWorkspaceBytes));
        for (uint32_t h = 0; h < hidden_count; h++)
            DEV_CUDA(cudaMalloc(&s->hidden[h], d->chunk_rows * net->max_hidden * sizeof(float)));
    }
    if (warm_up(d, why, why_len) != 0)
        goto fail;
    return d;

fail:
    free_dev(d);
    return nullptr;
}

static void mlp_device_close(void *dev) {
    if (dev == nullptr)
        return;
    mlp_dev *d = static_cast<mlp_dev *>(dev);
    int current = d->device;
    cudaGetDevice(&current);
    cudaSetDevice(d->device);
    free_dev(d);
    cudaSetDevice(current); /* the caller's thread may launch on its own device next */
}

/* y[r][o] += b[o] for `rows` x `cols`, rounded to float, then ReLU when
 * `relu` by the reference's comparison (a NaN becomes 0 in both).  Row r
 * starts at y + r * ld. */
static __global__ void bias_kernel(float *__restrict__ y, const float *__restrict__ b, size_t rows,
                                   uint32_t cols, bool relu, size_t ld) {
    const size_t count = rows * cols;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        float *p = y + (i / cols) * ld + i % cols;
        float v = __fadd_rn(*p, b[i % cols]);
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        *p = v;
    }
}

/* Each of `rows` vectors of `cols` logits to probabilities, in place: one
 * warp per vector, max and sum reduced across the warp.  Row r starts at
 * y + r * ld. */
static __global__ void softmax_kernel(float *__restrict__ y, size_t rows, uint32_t cols,
                                      size_t ld) {
    const unsigned lane = threadIdx.x % kWarp;
    const size_t warps_per_grid = static_cast<size_t>(gridDim.x) * (blockDim.x / kWarp);

    for (size_t r = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; r < rows;
         r += warps_per_grid) {
        float *v = y + r * ld;
        float max = v[0];
        for (uint32_t o = lane; o < cols; o += kWarp)
            max = v[o] > max ? v[o] : max;
        for (unsigned off = kWarp / 2; off > 0; off /= 2) {
            const float other = __shfl_xor_sync(0xffffffffu, max, off);
            max = other > max ? other : max;
        }
        float sum = 0.0f;
        for (uint32_t o = lane; o < cols; o += kWarp) {
            const float e = expf(v[o] - max);
            v[o] = e;
            sum += e;
        }
        for (unsigned off = kWarp / 2; off > 0; off /= 2)
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        for (uint32_t o = lane; o < cols; o += kWarp)
            v[o] = __fdiv_rn(v[o], sum);
    }
}

static unsigned blocks_for(uint64_t threads) {
    const uint64_t blocks = (threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
    return blocks < kMaxBlocks ? static_cast<unsigned>(blocks) : kMaxBlocks;
}

/*
 * A cuBLAS failure as the cudaError_t launch() must return: the CUDA error
 * behind it when there is one; else the nearest code for a frame's failure,
 * and cudaErrorUnknown (which the daemon treats as poisoning the context)
 * for a failure that no frame explains.
 */
static int blas_error(cublasStatus_t st) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return static_cast<int>(err);
    switch (st) {
    case CUBLAS_STATUS_INVALID_VALUE: return static_cast<int>(cudaErrorInvalidValue);
    case CUBLAS_STATUS_ALLOC_FAILED: return static_cast<int>(cudaErrorMemoryAllocation);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return static_cast<int>(cudaErrorNotSupported);
    default: return static_cast<int>(cudaErrorUnknown);
    }
}

/* Stream index `stream_index`'s handle, bound to `s`, or NULL with the
 * error in *err.  device_open is not told the streams: bound at the first
 * launch of an index (and again should its stream ever change);
 * cublasSetStream drops the workspace, so it is set again after. */
static mlp_stream *bound_stream(mlp_dev *d, uint32_t stream_index, cudaStream_t s, int *err) {
    if (stream_index >= d->stream_count) {
        *err = static_cast<int>(cudaErrorInvalidValue);
        return nullptr;
    }
    mlp_stream *ms = &d->streams[stream_index];
    if (!ms->is_bound || ms->bound != s) {
        cublasStatus_t st = cublasSetStream(ms->blas, s);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasSetWorkspace(ms->blas, ms->workspace, kWorkspaceBytes);
        if (st != CUBLAS_STATUS_SUCCESS) {
            *err = blas_error(st);
            return nullptr;
        }
        ms->bound = s;
        ms->is_bound = 1;
    }
    return ms;
}

/*
 * The network over `n` (<= chunk_rows) vectors: row r of the input at
 * x + r * ldx, of the output at out + r * ldo (in floats).  One SGEMM and
 * one bias kernel per layer, the hidden layers in the stream's buffers;
 * then the softmax.
 */
static int run_rows(mlp_dev *d, mlp_stream *ms, cudaStream_t s, const float *x, size_t ldx,
                    float *out, size_t ldo, uint64_t n) {
    const gf__mlp_net *net = d->net;
    const gf__mlp_shape *shape = &net->shape;
    const float one = 1.0f, zero = 0.0f;
    for (uint32_t l = 0; l < shape->layer_count; l++) {
        const uint32_t k = shape->dims[l], m = shape->dims[l + 1];
        const bool last = l + 1 == shape->layer_count;
        const float *w = d->params + net->layer_offset[l], *b = w + static_cast<uint64_t>(m) * k;
        float *y = last ? out : ms->hidden[l % 2];
        const size_t ldy = last ? ldo : m;
        const cublasStatus_t st =
            cublasSgemm(ms->blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m),
                        static_cast<int>(n), static_cast<int>(k), &one, w, static_cast<int>(k), x,
                        static_cast<int>(ldx), &zero, y, static_cast<int>(ldy));
        if (st != CUBLAS_STATUS_SUCCESS)
            return blas_error(st);
        bias_kernel<<<blocks_for(n * m), kThreadsPerBlock, 0, s>>>(y, b, n, m, !last, ldy);
        x = y;
        ldx = ldy;
    }
    if (net->softmax)
        softmax_kernel<<<blocks_for(n * kWarp), kThreadsPerBlock, 0, s>>>(
            out, n, shape->dims[shape->layer_count], ldo);
    return static_cast<int>(cudaGetLastError());
}

/*
 * device_open's last step: the network over zeros, one vector and then a
 * chunk, on a stream of its own with stream index 0's handle, waited for.
 * A process's first SGEMM loads cuBLAS's kernels and heuristics: the first
 * frame after start took 60 to 77 ms (an H200, CUDA 13; 0.3 ms after).
 * The handle is unbound again after, for the stream it serves.  0, or -1
 * with why[].
 */
static int warm_up(mlp_dev *d, char *why, size_t why_len) {
    const gf__mlp_shape *shape = &d->net->shape;
    const uint32_t in_dim = shape->dims[0], out_dim = shape->dims[shape->layer_count];
    mlp_stream *ms = &d->streams[0];
    cudaStream_t s = nullptr;
    float *x = nullptr, *y = nullptr;
    int rc = -1, err = 0;
    DEV_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    DEV_CUDA(cudaMalloc(&x, d->chunk_rows * in_dim * sizeof(float)));
    DEV_CUDA(cudaMalloc(&y, d->chunk_rows * out_dim * sizeof(float)));
    DEV_CUDA(cudaMemsetAsync(x, 0, d->chunk_rows * in_dim * sizeof(float), s));
    if (bound_stream(d, 0, s, &err) == nullptr ||
        (err = run_rows(d, ms, s, x, in_dim, y, out_dim, 1)) != 0 ||
        (err = run_rows(d, ms, s, x, in_dim, y, out_dim, d->chunk_rows)) != 0) {
        snprintf(why, why_len, "the warm-up's launches failed: %s",
                 cudaGetErrorString(static_cast<cudaError_t>(err)));
        goto fail;
    }
    DEV_CUDA(cudaStreamSynchronize(s));
    rc = 0;
fail:
    /* Whatever bound_stream got as far as: the handle on the legacy stream
     * again before `s` goes, and bound at the first launch. */
    cublasSetStream(ms->blas, nullptr);
    ms->bound = nullptr;
    ms->is_bound = 0;
    cudaFree(y);
    cudaFree(x);
    if (s != nullptr)
        cudaStreamDestroy(s);
    return rc;
}

static int mlp_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                      void *out_dev, void *stream) {
    mlp_dev *d = static_cast<mlp_dev *>(dev);
    const gf__mlp_shape *shape = &d->net->shape;
    const uint32_t in_dim = shape->dims[0], out_dim = shape->dims[shape->layer_count];
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    int err = 0;

    if (in_bytes % (sizeof(float) * in_dim) != 0)
        return static_cast<int>(cudaErrorInvalidValue);
    mlp_stream *ms = bound_stream(d, stream_index, s, &err);
    if (ms == nullptr)
        return err;
    const uint64_t rows = in_bytes / (sizeof(float) * in_dim);
    for (uint64_t row0 = 0; row0 < rows && err == 0; row0 += d->chunk_rows) {
        const uint64_t n = rows - row0 < d->chunk_rows ? rows - row0 : d->chunk_rows;
        err = run_rows(d, ms, s, static_cast<const float *>(in_dev) + row0 * in_dim, in_dim,
                       static_cast<float *>(out_dev) + row0 * out_dim, out_dim, n);
    }
    return err;
}

/*
 * A submission's frames.  Frames of one vector each that lie at one stride
 * (the daemon packs a slot's frames that way: every frame's input and
 * output at the same offset, a multiple of 256 bytes) are the rows of one
 * SGEMM per layer, read and written in place at that stride: the batch
 * costs about what one frame does.  Anything else (frames of several
 * vectors, of different lengths, more than a hidden buffer holds) runs
 * frame by frame, as launch does.
 */
static int mlp_launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                            uint32_t count, void *stream) {
    mlp_dev *d = static_cast<mlp_dev *>(dev);
    const gf__mlp_shape *shape = &d->net->shape;
    const uint64_t in_vec = sizeof(float) * shape->dims[0],
                   out_vec = sizeof(float) * shape->dims[shape->layer_count];
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    int err = 0;

    const char *in0 = static_cast<const char *>(frames[0].in_dev);
    char *out0 = static_cast<char *>(frames[0].out_dev);
    const ptrdiff_t stride = count > 1 ? static_cast<const char *>(frames[1].in_dev) - in0 : 0;
    bool one_gemm = count > 1 && count <= d->chunk_rows && stride > 0 &&
                    stride % sizeof(float) == 0 && static_cast<uint64_t>(stride) >= in_vec &&
                    static_cast<uint64_t>(stride) >= out_vec;
    for (uint32_t i = 0; i < count && one_gemm; i++)
        one_gemm = frames[i].in_bytes == in_vec &&
                   static_cast<const char *>(frames[i].in_dev) == in0 + i * stride &&
                   static_cast<char *>(frames[i].out_dev) == out0 + i * stride;
    if (!one_gemm) {
        for (uint32_t i = 0; i < count && err == 0; i++)
            err = mlp_launch(dev, stream_index, frames[i].in_dev, frames[i].in_bytes,
                             frames[i].out_dev, stream);
        return err;
    }
    mlp_stream *ms = bound_stream(d, stream_index, s, &err);
    if (ms == nullptr)
        return err;
    const size_t ld = static_cast<size_t>(stride) / sizeof(float);
    return run_rows(d, ms, s, reinterpret_cast<const float *>(in0), ld,
                    reinterpret_cast<float *>(out0), ld, count);
}

/* What gf_mlp.so finds by GF_MLP_CUDA_ENTRY_SYMBOL (mlp_cuda.h). */
static const gf__mlp_cuda_api mlp_cuda_api = {
    GF_MLP_CUDA_VERSION, mlp_device_open, mlp_device_close, mlp_launch, mlp_launch_batch,
};

extern "C" const gf__mlp_cuda_api *gf__mlp_cuda_entry(void) {
    return &mlp_cuda_api;
}

/* SPDX-License-Identifier: MIT */
/*
 * The CUDA side of pipeline kind "spectrogram" (contract in kernels.h): its
 * device API, the built-in plugin the CUDA engine opens per device and
 * launches per submission (gf_spectrogram_device_api).
 *
 * A call's frames (a submission's, up to 64) run as one pass of at most
 * `chunk` frames each:
 *   1. frames_kernel, a block per column of a frame: the column,
 *      reflect-padded, times the window (periodic Hann, a table made at
 *      device_open), into scratch A as float32 rows of idist;
 *   2. cuFFT: batched real-to-complex transforms of all those rows, from
 *      plans made at device_open for 1, 2, 4, ... chunk frames, into
 *      scratch B: the plan of the largest power of two in the count, then
 *      one of the smallest power of two that holds the rest (its last rows
 *      transform scratch that nothing reads), so at most two execs;
 *   3. with mel: power_kernel, a block per row, writes |X| or |X|^2 into A
 *      (rows of ldp), one cuBLAS SGEMM by the filterbank (n_mels x n_freqs)
 *      writes every row's mels into B;
 *   4. finish_kernel, 32 x 32 tiles through shared memory: the log, and the
 *      transpose into each frame's output, (rows x columns) row-major as
 *      torch.stft lays it out.
 * The kernels index in 32 bits within a frame and take the frame from the
 * grid: no 64-bit division per element.  Everything runs on the slot's
 * stream; nothing allocates or synchronises.
 *
 * Device memory per stream index (plans and handles must not be shared by
 * streams that run at once): A and B, sized for `chunk` frames where chunk
 * is the largest power of two (at most 64) whose frames fit kScratchBytes,
 * the plans' shared work area, a cuBLAS handle and its workspace; once per
 * device the window and the filterbank.  1 s of 16 kHz audio with n_fft 400: 64 frames,
 * about 21 MiB a stream.
 *
 * cuFFT and cuBLAS are loaded with dlopen when the first stage opens on a
 * GPU (load_libs), not linked: gpuframed itself then still needs nothing of
 * the toolkit but the driver (CMakeLists.txt, "kernels"), and a daemon that
 * runs no spectrogram never needs them.  A missing library fails the
 * stage's device_open with the loader's reason, at load.
 *
 * cuBLAS computes in float32 (CUBLAS_PEDANTIC_MATH: no TF32, whatever its
 * defaults or environment say); the registry's tolerance assumes it.
 */
#include "kernels.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <dlfcn.h>
#include <pthread.h>

#include "launch.cuh"
#include "spectrogram_math.h"

/* Frames one launch_batch call may bring: a submission's most. */
static constexpr uint32_t kBatchFrames = 64;
/* Plans for 1, 2, 4, ..., kBatchFrames frames. */
static constexpr int kPlanSizes = 7;
/* Scratch A and B of one stream together at most this, unless one frame
 * alone needs more. */
static constexpr uint64_t kScratchBytes = 32u << 20;
/* cuBLAS's workspace per handle (plugins/mlp/mlp.cu says why 4 MiB). */
static constexpr size_t kBlasWorkspaceBytes = 4u << 20;
/* Threads of a frames_kernel or power_kernel block (a column's n_fft
 * samples, a row's n_freqs bins). */
static constexpr unsigned kRowThreads = 128;
/* finish_kernel's tiles: kTile x kTile values, kTile x kTileRows threads. */
static constexpr unsigned kTile = 32, kTileRows = 8;

/* ---- cuFFT and cuBLAS, loaded at the first device_open -------------------------- */

struct media_libs {
    decltype(&cufftCreate) fft_create;
    decltype(&cufftSetAutoAllocation) fft_set_auto_allocation;
    decltype(&cufftMakePlanMany) fft_make_plan_many;
    decltype(&cufftSetWorkArea) fft_set_work_area;
    decltype(&cufftSetStream) fft_set_stream;
    decltype(&cufftExecR2C) fft_exec_r2c;
    decltype(&cufftDestroy) fft_destroy;
    decltype(&cublasCreate_v2) blas_create;
    decltype(&cublasDestroy_v2) blas_destroy;
    decltype(&cublasSetStream_v2) blas_set_stream;
    decltype(&cublasSetWorkspace_v2) blas_set_workspace;
    decltype(&cublasSetMathMode) blas_set_math_mode;
    decltype(&cublasSgemm_v2) blas_sgemm;
    char why[512]; /* empty when everything loaded */
};

static media_libs libs;
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

/* The library by its soname (the system's search path), else where this
 * build found it (GF_*_PATH, CMakeLists.txt). */
static void *open_lib(const char *soname, const char *path) {
    void *dl = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == nullptr)
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == nullptr) {
        const char *e = dlerror();
        snprintf(libs.why, sizeof libs.why, "spectrogram needs %s, not found (%s)", soname,
                 e ? e : "dlopen failed");
    }
    return dl;
}

/* Sets `fn` to `name` in `dl`, or writes why not. */
template <typename Fn> static void find(void *dl, const char *name, Fn *fn) {
    *reinterpret_cast<void **>(fn) = dl ? dlsym(dl, name) : nullptr;
    if (*fn == nullptr && libs.why[0] == '\0')
        snprintf(libs.why, sizeof libs.why, "spectrogram: no symbol %s in cuFFT or cuBLAS", name);
}

static void load_libs(void) {
    void *fft = open_lib(GF_CUFFT_SONAME, GF_CUFFT_PATH);
    void *blas = open_lib(GF_CUBLAS_SONAME, GF_CUBLAS_PATH);
    find(fft, "cufftCreate", &libs.fft_create);
    find(fft, "cufftSetAutoAllocation", &libs.fft_set_auto_allocation);
    find(fft, "cufftMakePlanMany", &libs.fft_make_plan_many);
    find(fft, "cufftSetWorkArea", &libs.fft_set_work_area);
    find(fft, "cufftSetStream", &libs.fft_set_stream);
    find(fft, "cufftExecR2C", &libs.fft_exec_r2c);
    find(fft, "cufftDestroy", &libs.fft_destroy);
    find(blas, "cublasCreate_v2", &libs.blas_create);
    find(blas, "cublasDestroy_v2", &libs.blas_destroy);
    find(blas, "cublasSetStream_v2", &libs.blas_set_stream);
    find(blas, "cublasSetWorkspace_v2", &libs.blas_set_workspace);
    find(blas, "cublasSetMathMode", &libs.blas_set_math_mode);
    find(blas, "cublasSgemm_v2", &libs.blas_sgemm);
}

/* ---- device state ---------------------------------------------------------------- */

/* One stream index's plans, handle and scratch. */
struct spec_stream {
    cufftHandle plan[kPlanSizes]; /* plan[b]: 2^b frames' columns         */
    bool made[kPlanSizes];        /* plan[b] was created (to destroy)      */
    void *fft_work;               /* the plans' shared work area           */
    cublasHandle_t blas;          /* pedantic math, our workspace           */
    void *blas_workspace;         /* kBlasWorkspaceBytes                    */
    float *a;                     /* windowed columns, then |X|^p rows     */
    float2 *b;                    /* spectra, then mel rows                 */
    cudaStream_t bound;           /* the stream the plans and handle use    */
    bool is_bound;
};

struct spec_dev {
    gf_params p;     /* the stage's parameters                            */
    gf_spec_shape s; /* their shape                                        */
    int device;      /* for device_close, which may come on another device */
    uint32_t idist;  /* floats per windowed column in A (n_fft, to 16 B)  */
    uint32_t odist;  /* complex bins per spectrum in B (n_freqs, to 16 B) */
    uint32_t ldp;    /* floats per |X|^p row in A (n_freqs, to 16 B)      */
    uint32_t chunk;  /* frames per pass: a power of two <= kBatchFrames   */
    int plans;       /* plan[0..plans) exist: 1 .. chunk frames           */
    float *fb;       /* n_mels x n_freqs column-major (ld n_mels), or null */
    float *window;   /* n_fft floats: the periodic Hann window            */
    uint32_t stream_count;
    spec_stream *streams;
};

/* The frames of one pass: input and output of frame f. */
struct frame_table {
    const void *in[kBatchFrames];
    float *out[kBatchFrames];
};

static uint32_t round_up(uint32_t n, uint32_t to) {
    return (n + to - 1) / to * to;
}

static void free_dev(spec_dev *d) {
    for (uint32_t i = 0; d->streams != nullptr && i < d->stream_count; i++) {
        spec_stream *s = &d->streams[i];
        for (int b = 0; b < kPlanSizes; b++)
            if (s->made[b])
                libs.fft_destroy(s->plan[b]);
        if (s->blas != nullptr)
            libs.blas_destroy(s->blas);
        cudaFree(s->fft_work);
        cudaFree(s->blas_workspace);
        cudaFree(s->a);
        cudaFree(s->b);
    }
    cudaFree(d->fb);
    cudaFree(d->window);
    free(d->streams);
    delete d;
}

/* Bytes of A and of B per frame. */
static uint64_t a_bytes_per_frame(const spec_dev *d) {
    return static_cast<uint64_t>(d->s.columns) * d->idist * sizeof(float);
}
static uint64_t b_bytes_per_frame(const spec_dev *d) {
    const uint64_t spectra = static_cast<uint64_t>(d->odist) * sizeof(float2);
    const uint64_t mels = static_cast<uint64_t>(d->p.n_mels) * sizeof(float);
    return static_cast<uint64_t>(d->s.columns) * (spectra > mels ? spectra : mels);
}

/* `count` floats from `host` into a new device array *dev. */
static cudaError_t upload(float **dev, const float *host, size_t count) {
    cudaError_t err = cudaMalloc(dev, count * sizeof(float));
    if (err == cudaSuccess)
        err = cudaMemcpy(*dev, host, count * sizeof(float), cudaMemcpyHostToDevice);
    return err;
}

/* The device's tables, from the reference's formulas in double: the window
 * and, with mel, the filterbank (on the legacy stream: spec_device_open
 * waits for it). */
static cudaError_t upload_tables(spec_dev *d) {
    const uint32_t n_fft = d->p.n_fft, n_mels = d->p.n_mels, n_freqs = d->s.n_freqs;
    const size_t fb_count = static_cast<size_t>(n_mels) * n_freqs;
    double f_pts[GF_SPEC_N_MELS_MAX + 2];
    float *host =
        static_cast<float *>(malloc((n_fft > fb_count ? n_fft : fb_count) * sizeof(float)));
    if (host == nullptr)
        return cudaErrorMemoryAllocation;
    for (uint32_t j = 0; j < n_fft; j++)
        host[j] = static_cast<float>(gf_spec_window(j, n_fft));
    cudaError_t err = upload(&d->window, host, n_fft);
    if (err == cudaSuccess && n_mels > 0) {
        gf_mel_points(&d->p, f_pts);
        for (uint32_t k = 0; k < n_freqs; k++)
            for (uint32_t m = 0; m < n_mels; m++)
                host[static_cast<size_t>(k) * n_mels + m] =
                    static_cast<float>(gf_mel_weight(&d->p, f_pts, n_freqs, k, m));
        err = upload(&d->fb, host, fb_count);
    }
    free(host);
    return err;
}

/* Stream index i's plans, handle and scratch. */
static int open_stream(spec_dev *d, spec_stream *s, char *why, size_t why_len) {
    int n[1] = {static_cast<int>(d->p.n_fft)};
    int inembed[1] = {static_cast<int>(d->idist)}, onembed[1] = {static_cast<int>(d->odist)};
    size_t work_bytes = 0;
    cudaError_t err;
    for (int b = 0; b < d->plans; b++) {
        size_t bytes = 0;
        const int batch = static_cast<int>(d->s.columns << b);
        cufftResult r = libs.fft_create(&s->plan[b]);
        s->made[b] = r == CUFFT_SUCCESS;
        if (r == CUFFT_SUCCESS)
            r = libs.fft_set_auto_allocation(s->plan[b], 0);
        if (r == CUFFT_SUCCESS)
            r = libs.fft_make_plan_many(s->plan[b], 1, n, inembed, 1, static_cast<int>(d->idist),
                                        onembed, 1, static_cast<int>(d->odist), CUFFT_R2C, batch,
                                        &bytes);
        if (r != CUFFT_SUCCESS) {
            snprintf(why, why_len, "cuFFT plan of %d transforms of %u: error %d", batch, d->p.n_fft,
                     static_cast<int>(r));
            return -1;
        }
        work_bytes = bytes > work_bytes ? bytes : work_bytes;
    }
    if ((err = cudaMalloc(&s->fft_work, work_bytes > 0 ? work_bytes : 1)) != cudaSuccess ||
        (err = cudaMalloc(&s->a, d->chunk * a_bytes_per_frame(d))) != cudaSuccess ||
        (err = cudaMalloc(&s->b, d->chunk * b_bytes_per_frame(d))) != cudaSuccess) {
        snprintf(why, why_len, "cudaMalloc of a stream's scratch: %s", cudaGetErrorString(err));
        return -1;
    }
    /* A pass's last exec may transform rows past its frames (run_pass):
     * zeros, never memory nobody wrote. */
    if ((err = cudaMemset(s->a, 0, d->chunk * a_bytes_per_frame(d))) != cudaSuccess) {
        snprintf(why, why_len, "cudaMemset of a stream's scratch: %s", cudaGetErrorString(err));
        return -1;
    }
    for (int b = 0; b < d->plans; b++) {
        if (libs.fft_set_work_area(s->plan[b], s->fft_work) != CUFFT_SUCCESS) {
            snprintf(why, why_len, "cufftSetWorkArea failed");
            return -1;
        }
    }
    if (d->p.n_mels > 0) {
        if (libs.blas_create(&s->blas) != CUBLAS_STATUS_SUCCESS ||
            libs.blas_set_math_mode(s->blas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, why_len, "cublasCreate failed");
            return -1;
        }
        if ((err = cudaMalloc(&s->blas_workspace, kBlasWorkspaceBytes)) != cudaSuccess) {
            snprintf(why, why_len, "cudaMalloc of cuBLAS's workspace: %s", cudaGetErrorString(err));
            return -1;
        }
    }
    return 0;
}

/* `state` is the stage's gf_params (the built-in plugin stage's copy). */
static void *spec_device_open(const void *state, int device, uint32_t streams, char *why,
                              size_t why_len) {
    const gf_params *p = static_cast<const gf_params *>(state);
    cudaError_t err;
    pthread_once(&libs_once, load_libs);
    if (libs.why[0] != '\0') {
        snprintf(why, why_len, "%s", libs.why);
        return nullptr;
    }
    if (streams == 0) {
        snprintf(why, why_len, "device_open for 0 streams");
        return nullptr;
    }
    spec_dev *d = new (std::nothrow) spec_dev();
    if (d == nullptr) {
        snprintf(why, why_len, "out of memory");
        return nullptr;
    }
    d->p = *p;
    d->s = gf_spec_shape_of(p);
    d->device = device;
    d->idist = round_up(p->n_fft, 4);
    d->odist = round_up(d->s.n_freqs, 2);
    d->ldp = round_up(d->s.n_freqs, 4);
    d->chunk = kBatchFrames;
    while (d->chunk > 1 && d->chunk * (a_bytes_per_frame(d) + b_bytes_per_frame(d)) > kScratchBytes)
        d->chunk /= 2;
    for (d->plans = 1; (1u << d->plans) <= d->chunk; d->plans++) {
    }
    d->streams = static_cast<spec_stream *>(calloc(streams, sizeof *d->streams));
    if (d->streams == nullptr) {
        snprintf(why, why_len, "out of memory");
        goto fail;
    }
    d->stream_count = streams;
    if ((err = upload_tables(d)) != cudaSuccess) {
        snprintf(why, why_len, "the window or mel filterbank: %s", cudaGetErrorString(err));
        goto fail;
    }
    for (uint32_t i = 0; i < streams; i++)
        if (open_stream(d, &d->streams[i], why, why_len) < 0)
            goto fail;
    /* The tables' copies and the scratch's zeroing ran on the legacy stream,
     * which the shards' streams do not wait for (and a cudaMemcpy from
     * pageable memory may return before its DMA ends). */
    if ((err = cudaStreamSynchronize(cudaStreamLegacy)) != cudaSuccess) {
        snprintf(why, why_len, "the device's tables and scratch: %s", cudaGetErrorString(err));
        goto fail;
    }
    return d;

fail:
    cudaGetLastError(); /* the caller's next launch must not read this one's error */
    free_dev(d);
    return nullptr;
}

static void spec_device_close(void *dev) {
    if (dev == nullptr)
        return;
    spec_dev *d = static_cast<spec_dev *>(dev);
    int current = d->device;
    cudaGetDevice(&current);
    cudaSetDevice(d->device);
    free_dev(d);
    cudaSetDevice(current); /* the caller's thread may launch on its own device next */
}

/* ---- kernels --------------------------------------------------------------------- */

/* Block (t, f): column t of frame f of the pass, A[(f*columns + t)*idist +
 * j] = w[j] x[t*hop + j - pad], x reflected at the ends and int16 scaled
 * by 1/32768. */
static __global__ void frames_kernel(const frame_table ft, const gf_params p, const gf_spec_shape s,
                                     uint32_t idist, const float *w, float *a) {
    const uint32_t t = blockIdx.x, f = blockIdx.y;
    const int64_t first = static_cast<int64_t>(t) * p.hop - s.pad;
    const int16_t *x16 = static_cast<const int16_t *>(ft.in[f]);
    const float *x32 = static_cast<const float *>(ft.in[f]);
    float *column = a + (static_cast<size_t>(f) * s.columns + t) * idist;
    for (uint32_t j = threadIdx.x; j < p.n_fft; j += blockDim.x) {
        const uint32_t src = gf_spec_reflect(first + j, p.samples);
        const float x = s.sample_bytes == 2 ? static_cast<float>(x16[src]) *
                                                  static_cast<float>(1.0 / GF_INT16_FULL_SCALE)
                                            : x32[src];
        column[j] = w[j] * x;
    }
}

/* |X| (power 1) or |X|^2 (power 2) of bin k of spectrum row r. */
static __device__ float bin_value(const float2 *b, uint32_t odist, size_t r, uint32_t k,
                                  uint32_t power) {
    const float2 z = b[r * odist + k];
    const float sq = z.x * z.x + z.y * z.y;
    return power == 1 ? sqrtf(sq) : sq;
}

/* Block r: A[r*ldp + k] = bin k of row r, the GEMM's input. */
static __global__ void power_kernel(const float2 *b, uint32_t odist, uint32_t n_freqs,
                                    uint32_t power, uint32_t ldp, float *a) {
    const size_t r = blockIdx.x;
    for (uint32_t k = threadIdx.x; k < n_freqs; k += blockDim.x)
        a[r * ldp + k] = bin_value(b, odist, r, k, power);
}

/* Block (x, y, f), kTile x kTileRows threads: out_f[row*columns + t] for
 * the kTile columns t from x*kTile and the kTile rows from y*kTile of frame
 * f, the log of mel `row` (B as n_mels floats per column) or of bin `row`
 * (B as spectra).  Read along rows, written along columns, through a tile. */
static __global__ void finish_kernel(const frame_table ft, const gf_params p, const gf_spec_shape s,
                                     uint32_t odist, const float2 *b) {
    __shared__ float tile[kTile][kTile + 1];
    const uint32_t f = blockIdx.z, t0 = blockIdx.x * kTile, row0 = blockIdx.y * kTile;
    const float db_scale = p.power == 1 ? 20.0f : 10.0f;
    for (uint32_t i = threadIdx.y; i < kTile; i += kTileRows) {
        const uint32_t t = t0 + i, row = row0 + threadIdx.x;
        if (t >= s.columns || row >= s.rows)
            continue;
        const size_t r = static_cast<size_t>(f) * s.columns + t;
        float v = p.n_mels > 0 ? reinterpret_cast<const float *>(b)[r * p.n_mels + row]
                               : bin_value(b, odist, r, row, p.power);
        if (p.log == GF_LOG_LN)
            v = logf(fmaxf(v, p.eps));
        else if (p.log == GF_LOG_DB)
            v = db_scale * log10f(fmaxf(v, p.eps));
        tile[i][threadIdx.x] = v;
    }
    __syncthreads();
    for (uint32_t i = threadIdx.y; i < kTile; i += kTileRows) {
        const uint32_t row = row0 + i, t = t0 + threadIdx.x;
        if (t < s.columns && row < s.rows)
            ft.out[f][static_cast<size_t>(row) * s.columns + t] = tile[threadIdx.x][i];
    }
}

/* ---- launches -------------------------------------------------------------------- */

/* cuFFT's or cuBLAS's failure as the cudaError_t a launch returns: the CUDA
 * error behind it if any; a bad argument as cudaErrorInvalidValue (the
 * frames fail, the pipeline goes on); else cudaErrorUnknown. */
static int library_error(bool invalid_value) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return static_cast<int>(err);
    return static_cast<int>(invalid_value ? cudaErrorInvalidValue : cudaErrorUnknown);
}

/* Stream index `i`'s plans and handle, bound to `st` (at its first launch,
 * or should its stream change: cublasSetStream drops the workspace, so it
 * is set again). */
static spec_stream *bound_stream(spec_dev *d, uint32_t i, cudaStream_t st, int *err) {
    if (i >= d->stream_count) {
        *err = static_cast<int>(cudaErrorInvalidValue);
        return nullptr;
    }
    spec_stream *s = &d->streams[i];
    if (s->is_bound && s->bound == st)
        return s;
    for (int b = 0; b < d->plans; b++) {
        if (libs.fft_set_stream(s->plan[b], st) != CUFFT_SUCCESS) {
            *err = library_error(true);
            return nullptr;
        }
    }
    if (s->blas != nullptr &&
        (libs.blas_set_stream(s->blas, st) != CUBLAS_STATUS_SUCCESS ||
         libs.blas_set_workspace(s->blas, s->blas_workspace, kBlasWorkspaceBytes) !=
             CUBLAS_STATUS_SUCCESS)) {
        *err = library_error(true);
        return nullptr;
    }
    s->bound = st;
    s->is_bound = true;
    return s;
}

/* One pass: frames[0..count), count <= chunk, lengths checked. */
static int run_pass(spec_dev *d, spec_stream *s, cudaStream_t st, const gf_plugin_frame *frames,
                    uint32_t count) {
    frame_table ft = {};
    const gf_spec_shape sh = d->s;
    for (uint32_t f = 0; f < count; f++) {
        ft.in[f] = frames[f].in_dev;
        ft.out[f] = static_cast<float *>(frames[f].out_dev);
    }
    frames_kernel<<<dim3(sh.columns, count), kRowThreads, 0, st>>>(ft, d->p, sh, d->idist,
                                                                   d->window, s->a);
    /* The largest power of two in count, then the rest rounded up to one
     * (step 2 above). */
    for (uint32_t done = 0; done < count;) {
        const uint32_t left = count - done;
        int b = 31 - __builtin_clz(left);
        if (done > 0 && (1u << b) < left)
            b++;
        const size_t row = static_cast<size_t>(done) * sh.columns;
        if (libs.fft_exec_r2c(s->plan[b], s->a + row * d->idist,
                              reinterpret_cast<cufftComplex *>(s->b + row * d->odist)) !=
            CUFFT_SUCCESS)
            return library_error(false);
        done += 1u << b;
    }
    const size_t rows = static_cast<size_t>(count) * sh.columns;
    if (d->p.n_mels > 0) {
        const float one = 1.0f, zero = 0.0f;
        power_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, st>>>(
            s->b, d->odist, sh.n_freqs, d->p.power, d->ldp, s->a);
        /* Column-major: mels (n_mels x rows) = fb (n_mels x n_freqs) times
         * |X|^p (n_freqs x rows, ld ldp). */
        if (libs.blas_sgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d->p.n_mels),
                            static_cast<int>(rows), static_cast<int>(sh.n_freqs), &one, d->fb,
                            static_cast<int>(d->p.n_mels), s->a, static_cast<int>(d->ldp), &zero,
                            reinterpret_cast<float *>(s->b),
                            static_cast<int>(d->p.n_mels)) != CUBLAS_STATUS_SUCCESS)
            return library_error(false);
    }
    const dim3 tiles((sh.columns + kTile - 1) / kTile, (sh.rows + kTile - 1) / kTile, count);
    finish_kernel<<<tiles, dim3(kTile, kTileRows), 0, st>>>(ft, d->p, sh, d->odist, s->b);
    return static_cast<int>(cudaGetLastError());
}

static int spec_launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                             uint32_t count, void *stream) {
    spec_dev *d = static_cast<spec_dev *>(dev);
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const uint64_t want = static_cast<uint64_t>(d->p.samples) * d->s.sample_bytes;
    int err = 0;
    for (uint32_t f = 0; f < count; f++)
        if (frames[f].in_bytes != want ||
            reinterpret_cast<uintptr_t>(frames[f].in_dev) % d->s.sample_bytes != 0 ||
            reinterpret_cast<uintptr_t>(frames[f].out_dev) % sizeof(float) != 0)
            return static_cast<int>(cudaErrorInvalidValue);
    spec_stream *s = bound_stream(d, stream_index, st, &err);
    if (s == nullptr)
        return err;
    for (uint32_t i = 0; i < count && err == 0; i += d->chunk)
        err = run_pass(d, s, st, frames + i, count - i < d->chunk ? count - i : d->chunk);
    return err;
}

static int spec_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                       void *out_dev, void *stream) {
    const gf_plugin_frame frame = {in_dev, in_bytes, out_dev, 0};
    return spec_launch_batch(dev, stream_index, &frame, 1, stream);
}

/* Only the device half is read (kernels/plugin.h, built-in plugin stages). */
extern "C" const gf_plugin gf_spectrogram_device_api = {
    GF_PLUGIN_ABI_VERSION,
    "spectrogram",
    "the CUDA side of kind spectrogram",
    nullptr,
    0,
    0,
    0,
    0.0f,
    0.0f,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    spec_device_open,
    spec_device_close,
    spec_launch,
    spec_launch_batch,
    kBatchFrames,
    nullptr,
    0,
};

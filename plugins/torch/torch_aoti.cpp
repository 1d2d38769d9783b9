// SPDX-License-Identifier: MIT
/*
 * gf_torch_aoti.so, the PyTorch side of plugin "torch" (torch.h): the
 * package loaded by PyTorch's own loader, and the launches.  C++ inside;
 * outside, the C functions of gf__torch_aoti_api, none of which lets an
 * exception out.
 *
 * The loader.  One torch::inductor::AOTIModelPackageLoader per device, made
 * by device_open.
 *
 * CUDA graphs (the "cuda_graphs" parameter, on by default).  device_open
 * captures the model's calls, each batch size on each stream index's lane,
 * and a launch replays them: the frames gathered into the lane's own inputs
 * (a tensor of max_batch frames per input tensor), one cudaGraphLaunch, the
 * outputs scattered from the graph's into the slot's output buffer, all on
 * the daemon's stream.  No PyTorch code runs at a launch: none of its host
 * work (cuDNN's and the container's, most of a call at small batches), no
 * allocation, no per-thread state.  The loader is then a single-threaded
 * container (run_single_threaded: no lock, no event recorded, which a
 * capture could not hold), called by device_open's thread alone.  A lane's
 * graphs share one memory pool of PyTorch's (at::cuda::graph_pool_handle),
 * captured largest first so that smaller ones reuse what larger ones freed:
 * they replay one at a time, in the order of the lane's stream index (the
 * daemon launches a slot's next submission only after its last completed).
 * Every batch size is captured within a time budget, and the bounded set of
 * sizes always (gf__torch_warm_sizes): a call of a size without a graph
 * replays the next larger, its other frames zeroed, their outputs dropped
 * (gf__torch_replay_sizes).  A model that draws random numbers would draw
 * the same ones at every replay: the generator's offsets are not advanced.
 * A package whose calls cannot be captured (PyTorch's reason in the log)
 * runs as without graphs.
 *
 * Without graphs.  The AOTInductor model container behind the loader holds
 * several model instances over one copy of the weights; a call takes a free
 * instance and gives it back once the GPU has finished that call (an event
 * it records on the call's stream), and when none is free it waits on the
 * host for the oldest.  So that no launch ever waits, there are as many
 * instances as calls can be in flight: one per call of a submission (64
 * frames in calls of max_batch), per stream index; the daemon launches a
 * slot's next submission only after its last completed.  (A loader per
 * stream would hold the weights once per stream; the container's runs are
 * thread-safe, so shards launch concurrently, each on its own stream
 * indices.)
 *
 * Lanes.  Each stream index has a lane: a CUDA stream of the plugin's own.
 * With graphs it is where that index's graphs are captured.  Without, that
 * index's calls run on it, joined to the daemon's stream by two events (the
 * daemon's stream -> the lane before a call, the lane -> the daemon's stream
 * after it).  PyTorch's caching allocator keeps what it frees for reuse on
 * the stream that allocated it, so the memory a call needs must be cached
 * on the stream it runs on: device_open runs every batch size on every lane,
 * as the daemon lays frames (only a bounded set, batches.h, once a time
 * budget is spent: a large model on many lanes), then checks the bounded
 * set allocates nothing more; launches then allocate no device memory.
 * What no device_open can do for a launch is PyTorch's per-thread state:
 * the cuBLAS and cuDNN handles (and their workspaces) of a shard's thread
 * are made by that thread's first call (README.md, "Memory").  Lanes'
 * streams outlive their package, kept for the next one on the device (a
 * reload), because the blocks cached on them are reused only on them.
 *
 * A launch without graphs.  The daemon lays a submission's frames at one
 * stride in the slot's device buffers, each at a multiple of 256 bytes, its
 * output at the same offset in the output buffer.  When a frame's input is
 * one tensor a multiple of 256 bytes long, the frames are one contiguous
 * batch: the input is a tensor over the slot's buffer itself (from_blob).
 * Otherwise each input tensor is gathered into a batch by one
 * cudaMemcpy2DAsync.  The model runs on the lane (the loader's stream
 * argument, and a CUDAStreamGuard for PyTorch's own allocations), and each
 * output tensor is scattered into the slot's output buffer by one more
 * cudaMemcpy2DAsync.  A package that refuses batches below some size
 * (PyTorch specialises sizes 0 and 1 where its export could not avoid it)
 * gets fewer frames gathered into a batch of that size, the rest zeros, and
 * their outputs dropped.  Nothing waits for the GPU and nothing goes
 * through the host.
 *
 * Threads: device_open and device_close on whichever thread the daemon
 * calls them (start-up, a reload's loading thread, a worker); the launches
 * on the shards' loop threads, concurrently, each with its own streams.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "batches.h"
#include "torch.h"

namespace {

/* AOTInductor reads and aligns inputs of this alignment in place; others it
 * copies first, warning on every call. */
constexpr uintptr_t kAotiAlignBytes = 16;
/* How the AOTInductor container prints what a call threw. */
const char kAotiError[] = "Error: ";
/* Frames lie in the daemon's buffers at multiples of this. */
constexpr uint64_t kFrameAlignBytes = 256;
/* device_open's checking passes over the warm-up's bounded batch sizes on
 * every lane, at most: each should allocate nothing. */
constexpr int kWarmPassesMax = 3;
/* The warm-up runs the other batch sizes while it has taken less than this
 * (a large model on many lanes would take minutes for all of them). */
constexpr double kWarmAllSeconds = 10.0;
/* Graphs of the other batch sizes are captured while the captures have
 * taken less than this; the bounded set always is. */
constexpr double kGraphAllSeconds = 10.0;
/* Launch failures logged in full per device; later ones are counted only. */
constexpr unsigned kFailuresLogged = 8;
/* Metadata gpuframe-export writes into a package (aot_inductor.metadata). */
const char kMetaInputs[] = "gpuframe.inputs";
const char kMetaOutputs[] = "gpuframe.outputs";
const char kMetaMaxBatch[] = "gpuframe.max_batch";

/* One call of n frames captured on a lane: the graph, and where its
 * outputs are (its own, in the lane's pool). */
struct Graph {
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    cudaGraphExec_t exec = nullptr;
    std::vector<at::Tensor> outs;         /* destroyed before `graph`, which then gives back
                                           * its use of the lane's pool */
    std::vector<const uint8_t *> out_ptr; /* outs' data, read by a launch without ATen */
};

/* One stream index's lane (the file's comment): its stream, and the events
 * that join it to the daemon's stream; with graphs, the inputs every graph
 * of the lane reads (a tensor of max_batch frames per input tensor) and the
 * graphs, by batch size. */
struct Lane {
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr; /* recorded on the daemon's stream, waited by the lane */
    cudaEvent_t done = nullptr;  /* recorded on the lane, waited by the daemon's stream */
    std::vector<at::Tensor> in;
    std::vector<uint8_t *> in_ptr;            /* in's data, read by a launch without ATen */
    std::vector<Graph> graphs;                /* GF_TORCH_BATCH_MAX + 1, by size */
    uint8_t replay[GF_TORCH_BATCH_MAX + 1]{}; /* gf__torch_replay_sizes */
};

/* The lanes' streams of closed devices, per device, for the next
 * device_open there: the blocks PyTorch cached on a stream are reused on it
 * alone.  Any thread (device_open, device_close), under its mutex. */
std::mutex spare_lock;
std::map<c10::DeviceIndex, std::vector<cudaStream_t>> spare_streams;

/* The device side of one stage on one device. */
struct Device {
    const gf__torch_model *m = nullptr;
    c10::DeviceIndex index = 0;
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
    size_t instances = 0;      /* the model instances the loader holds       */
    uint32_t min_batch = 1;    /* the smallest batch the model takes: calls of
                                * fewer frames are padded with zeros to it  */
    uint32_t max_batch = 1;    /* frames one call takes, at most              */
    bool batched = true;       /* the model's tensors lead with a batch dimension */
    bool graphs_tried = false; /* the loader is one thread's, for captures */
    bool graphs = false;       /* launches replay the lanes' graphs         */
    std::vector<Lane> lanes;
    std::atomic<unsigned> failures{0};

    Device() = default;
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;
    /* Every launch has completed (device_close's contract). */
    ~Device() {
        for (Lane &l : lanes) {
            l.graphs.clear();
            l.in.clear();
        }
        loader.reset();
        std::lock_guard<std::mutex> lock(spare_lock);
        for (Lane &l : lanes) {
            if (l.ready)
                cudaEventDestroy(l.ready);
            if (l.done)
                cudaEventDestroy(l.done);
            if (l.stream)
                spare_streams[index].push_back(l.stream);
        }
    }
};

/* A call's outputs that the parameters do not describe: a configuration
 * error, never a batch size the model refuses. */
struct Mismatch : std::runtime_error {
    using std::runtime_error::runtime_error;
};

at::ScalarType scalar_type(uint32_t dtype) {
    switch (dtype) {
    case GF_DTYPE_UINT8: return at::kByte;
    case GF_DTYPE_INT32: return at::kInt;
    case GF_DTYPE_INT64: return at::kLong;
    case GF_DTYPE_FLOAT16: return at::kHalf;
    case GF_DTYPE_BFLOAT16: return at::kBFloat16;
    case GF_DTYPE_FLOAT32: return at::kFloat;
    }
    throw std::runtime_error("dtype " + std::to_string(dtype) + " has no PyTorch type");
}

/* The sizes of tensor `t` for a call of n frames: [n, dims...], or dims
 * alone for a model without a batch dimension (n is 1 then). */
std::vector<int64_t> sizes_of(const gf_tensor_desc &t, int64_t n, bool batched) {
    std::vector<int64_t> s;
    if (batched)
        s.push_back(n);
    for (uint32_t i = 0; i < t.rank; i++)
        s.push_back(t.dims[i]);
    return s;
}

/* A PyTorch dtype as the parameters name it ("float32"), else PyTorch's. */
std::string dtype_name(at::ScalarType t) {
    switch (t) {
    case at::kByte: return "uint8";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    default: return c10::toString(t);
    }
}

/* "float32[1,10]", as the parameters write tensors (with the batch). */
std::string text_of(const at::Tensor &t) {
    std::string s = dtype_name(t.scalar_type()) + "[";
    for (int64_t i = 0; i < t.dim(); i++)
        s += (i ? "," : "") + std::to_string(t.size(i));
    return s + "]";
}

/* The first line of `s`, without trailing spaces. */
std::string first_line(const std::string &s) {
    std::string line = s.substr(0, s.find('\n'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
        line.pop_back();
    return line;
}

/* An exception's message as one line: PyTorch's without its backtrace. */
std::string reason(const std::exception &e) {
    if (const auto *ce = dynamic_cast<const c10::Error *>(&e))
        return first_line(ce->what_without_backtrace());
    return first_line(e.what());
}

/*
 * The AOTInductor container's C functions catch what the model throws and
 * print it to stderr ("Error: input_handles[0]: unmatched dim value at
 * 1, ..."), returning only a failure code, so PyTorch's reason for refusing
 * a call never reaches the exception this side gets.  For device_open's
 * calls, which decide whether the package loads, stderr is captured into a
 * memory file for the call's duration and its last "Error: " line taken as
 * the reason; the rest, what other threads wrote meanwhile included, is
 * passed on afterwards, late by the call's duration.
 */
class StderrCapture {
  public:
    StderrCapture() {
        fflush(stderr);
        mem_ = memfd_create("gf_torch_stderr", MFD_CLOEXEC);
        saved_ = mem_ >= 0 ? dup(STDERR_FILENO) : -1;
        if (saved_ < 0 || dup2(mem_, STDERR_FILENO) < 0) {
            if (saved_ >= 0)
                close(saved_);
            if (mem_ >= 0)
                close(mem_);
            mem_ = saved_ = -1;
        }
    }
    StderrCapture(const StderrCapture &) = delete;
    StderrCapture &operator=(const StderrCapture &) = delete;
    ~StderrCapture() { finish(); }

    /* Restores stderr, passes on what was written but the container's
     * "Error: " lines (the reasons this object reports or handles itself),
     * and returns the last of those lines (empty when none). */
    std::string finish() {
        if (mem_ < 0)
            return reason_;
        fflush(stderr);
        dup2(saved_, STDERR_FILENO);
        close(saved_);
        std::string text, others;
        char buf[4096];
        ssize_t n;
        lseek(mem_, 0, SEEK_SET);
        while ((n = read(mem_, buf, sizeof buf)) > 0)
            text.append(buf, static_cast<size_t>(n));
        close(mem_);
        mem_ = saved_ = -1;
        for (size_t at = 0; at < text.size();) {
            size_t end = text.find('\n', at);
            end = end == std::string::npos ? text.size() : end + 1;
            std::string line = text.substr(at, end - at);
            if (line.compare(0, strlen(kAotiError), kAotiError) == 0)
                reason_ = first_line(line.substr(strlen(kAotiError)));
            else
                others += line;
            at = end;
        }
        if (!others.empty() && write(STDERR_FILENO, others.data(), others.size()) < 0) {
            /* stderr is gone: nothing to pass it on to */
        }
        return reason_;
    }

  private:
    int mem_ = -1, saved_ = -1;
    std::string reason_;
};

/* Checks a call's outputs against the parameters' for n frames. */
void check_outputs(const Device &d, const std::vector<at::Tensor> &outs, int64_t n) {
    const gf__torch_model *m = d.m;
    if (outs.size() != m->out.count)
        throw Mismatch("the model gives " + std::to_string(outs.size()) +
                       " output tensor(s), outputs says " + std::to_string(m->out.count) + " (" +
                       m->out_text + ")");
    for (uint32_t k = 0; k < m->out.count; k++) {
        const gf_tensor_desc &t = m->out.tensors[k];
        std::vector<int64_t> want = sizes_of(t, n, d.batched);
        if (outs[k].scalar_type() != scalar_type(t.dtype) ||
            outs[k].sizes() != at::IntArrayRef(want) || !outs[k].is_cuda())
            throw Mismatch("output " + std::to_string(k) + " of a call of " + std::to_string(n) +
                           " frame(s) is " + text_of(outs[k]) +
                           (outs[k].is_cuda() ? "" : " (not on the GPU)") +
                           ", where outputs says " + m->out_text + " a frame");
    }
}

/* Zeroed inputs of a call of n frames, on the current stream. */
std::vector<at::Tensor> zeros_for(const Device &d, int64_t n, bool batched) {
    std::vector<at::Tensor> in;
    for (uint32_t k = 0; k < d.m->in.count; k++) {
        const gf_tensor_desc &t = d.m->in.tensors[k];
        in.push_back(
            at::zeros(sizes_of(t, n, batched),
                      at::TensorOptions().dtype(scalar_type(t.dtype)).device(at::kCUDA, d.index)));
    }
    return in;
}

/* Throws what a CUDA runtime call returned, unless it succeeded. */
void check_cuda(cudaError_t err, const char *what) {
    if (err != cudaSuccess)
        throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, err,
                                    std::string(what) + ": " + cudaGetErrorString(err));
}

/*
 * One call of the model (batches.h): frames[c.first..] of a submission, on
 * `stream`, which is current.  Inputs over the slot's buffer, or gathered
 * (then padded with zeros up to c.batch), outputs scattered into it (the
 * file's comment); the padding's outputs are dropped.
 */
void run_call(const Device &d, const gf_plugin_frame *frames, const gf__torch_call &c,
              cudaStream_t stream) {
    const gf__torch_model *m = d.m;
    const auto *in_base = static_cast<const uint8_t *>(frames[c.first].in_dev);
    auto *out_base = static_cast<uint8_t *>(frames[c.first].out_dev);
    const uint32_t n = c.frames;
    std::vector<at::Tensor> inputs;
    inputs.reserve(m->in.count);
    for (uint32_t k = 0; k < m->in.count; k++) {
        const gf_tensor_desc &t = m->in.tensors[k];
        const uint64_t bytes = m->in_tensor_bytes[k];
        const uint8_t *src = in_base + m->in_offset[k];
        const auto opts =
            at::TensorOptions().dtype(scalar_type(t.dtype)).device(at::kCUDA, d.index);
        const auto sizes = sizes_of(t, c.batch, d.batched);
        if (c.batch == n && (n == 1 || c.stride == bytes) &&
            reinterpret_cast<uintptr_t>(src) % kAotiAlignBytes == 0) {
            inputs.push_back(at::for_blob(const_cast<uint8_t *>(src), sizes)
                                 .options(opts)
                                 .target_device(opts.device())
                                 .make_tensor());
            continue;
        }
        at::Tensor batch = c.batch > n ? at::zeros(sizes, opts) : at::empty(sizes, opts);
        check_cuda(cudaMemcpy2DAsync(batch.data_ptr(), bytes, src, n > 1 ? c.stride : bytes, bytes,
                                     n, cudaMemcpyDeviceToDevice, stream),
                   "gathering an input");
        inputs.push_back(std::move(batch));
    }
    std::vector<at::Tensor> outs = d.loader->run(inputs, stream);
    check_outputs(d, outs, c.batch);
    for (uint32_t k = 0; k < m->out.count; k++) {
        const uint64_t bytes = m->out_tensor_bytes[k];
        at::Tensor t = outs[k].is_contiguous() ? outs[k] : outs[k].contiguous();
        check_cuda(cudaMemcpy2DAsync(out_base + m->out_offset[k], n > 1 ? c.stride : bytes,
                                     t.data_ptr(), bytes, bytes, n, cudaMemcpyDeviceToDevice,
                                     stream),
                   "scattering an output");
    }
}

/* Runs a submission's frames[0..count) in calls of at most max_batch, each
 * padded to min_batch (batches.h), on `stream`, which is current. */
void run_frames(const Device &d, const gf_plugin_frame *frames, uint32_t count,
                cudaStream_t stream) {
    const uint64_t frame_bytes = std::max(d.m->in_bytes, d.m->out_bytes);
    gf__torch_call c;
    for (uint32_t i = 0, n;
         (n = gf__torch_next_call(frames, count, i, frame_bytes, d.min_batch, d.max_batch, &c)) > 0;
         i += n)
        run_call(d, frames, c, stream);
}

/* The error code a failed launch returns: the CUDA error behind it, so that
 * the daemon sees a sticky one; cudaErrorMemoryAllocation for PyTorch
 * running out of memory; otherwise cudaErrorInvalidValue, which fails the
 * submission's frames and nothing else.  Logs the reason, for the first
 * kFailuresLogged failures of the device. */
int failed(Device &d, const std::exception *e, uint32_t count) {
    cudaError_t code = cudaErrorInvalidValue;
    if (const auto *ae = dynamic_cast<const c10::AcceleratorError *>(e))
        code = static_cast<cudaError_t>(ae->get_error_code());
    else if (dynamic_cast<const c10::OutOfMemoryError *>(e))
        code = cudaErrorMemoryAllocation;
    cudaError_t last = cudaGetLastError(); /* a sticky error stays sticky */
    if (code == cudaErrorInvalidValue && last != cudaSuccess)
        code = last;
    unsigned n = d.failures.fetch_add(1, std::memory_order_relaxed);
    if (n < kFailuresLogged)
        fprintf(stderr,
                "gpuframed: plugin torch: %s: a submission of %u frame(s) failed%s: %s "
                "(PyTorch's own error, if any, is on the line before)\n",
                d.m->package, count, n + 1 == kFailuresLogged ? " (later failures not logged)" : "",
                e ? reason(*e).c_str() : "an exception that is not a std::exception");
    return code == cudaSuccess ? cudaErrorInvalidValue : code;
}

/* A probe's state: the device, the stream, the batch dimension tried, why
 * a call was refused, and the exception that stops the probe. */
struct Probe {
    Device *d;
    cudaStream_t stream;
    bool batched;
    std::string why, why_one; /* the last refusal's reason, a batch of one's */
    std::exception_ptr stop;  /* a Mismatch: the parameters are wrong */
};

/* gf__torch_probe_fn: a call of zeroed inputs of n frames. */
int probe_call(void *ctx, uint32_t n) {
    auto &p = *static_cast<Probe *>(ctx);
    p.d->batched = p.batched;
    StderrCapture capture;
    try {
        std::vector<at::Tensor> outs = p.d->loader->run(zeros_for(*p.d, n, p.batched), p.stream);
        capture.finish();
        check_outputs(*p.d, outs, n);
        return GF_TORCH_PROBE_TAKEN;
    } catch (const Mismatch &) {
        p.stop = std::current_exception();
        return GF_TORCH_PROBE_STOP;
    } catch (const std::exception &e) {
        std::string printed = capture.finish();
        p.why = printed.empty() ? reason(e) : printed;
        if (n == 1)
            p.why_one = p.why;
        return GF_TORCH_PROBE_REFUSED;
    }
}

/*
 * Finds how the package takes frames, by calls of zeroed inputs on `stream`
 * (current): the batch sizes it takes among 1..want (gf__torch_batch_range:
 * want first, then the ends of the range), else one frame without a batch
 * dimension.  A package whose smallest batch is above 1 (PyTorch specialised
 * sizes 0 and 1) gets calls of fewer frames padded, and the log says so.
 * Throws with PyTorch's reason when no call works, and Mismatch for outputs
 * the parameters do not describe.
 */
void probe(Device &d, uint32_t want, cudaStream_t stream) {
    Probe p{&d, stream, true, {}, {}, {}};
    uint32_t lo = 0, hi = 0;
    const int found = gf__torch_batch_range(want, probe_call, &p, &lo, &hi);
    if (p.stop)
        std::rethrow_exception(p.stop);
    if (found == 1) {
        d.batched = true;
        d.min_batch = lo;
        d.max_batch = hi;
        if (lo > 1)
            fprintf(stderr,
                    "gpuframed: plugin torch: %s takes batches of %u to %u frames, not fewer "
                    "(refusing one frame: %s): calls of fewer frames run padded with zeros to "
                    "%u, the padding's results dropped\n",
                    d.m->package, lo, hi, p.why_one.c_str(), lo);
        return;
    }
    /* No batch of 1..want: a model without a batch dimension, or none. */
    p.batched = false;
    const std::string why_batched = p.why_one.empty() ? p.why : p.why_one;
    if (probe_call(&p, 1) == GF_TORCH_PROBE_TAKEN) {
        d.min_batch = d.max_batch = 1;
        return;
    }
    if (p.stop)
        std::rethrow_exception(p.stop);
    throw std::runtime_error("it refuses a frame of " + std::string(d.m->in_text) +
                             " in every batch of 1 to " + std::to_string(want) +
                             " frames and without a batch dimension: " + why_batched);
}

/* The package's metadata must agree with the parameters where gpuframe-
 * export wrote it. */
void check_metadata(const Device &d) {
    const gf__torch_model *m = d.m;
    auto meta = d.loader->get_metadata();
    auto agree = [&](const char *key, const char *param, const char *value) {
        auto it = meta.find(key);
        if (it != meta.end() && it->second != value)
            throw std::runtime_error(std::string(param) + " is \"" + value +
                                     "\", but the package was exported for \"" + it->second + "\"");
    };
    agree(kMetaInputs, "inputs", m->in_text);
    agree(kMetaOutputs, "outputs", m->out_text);
}

/* The batch gpuframe-export wrote into the package's metadata, read
 * without loading it; 0 when there is none. */
uint32_t metadata_batch(const char *package) {
    try {
        auto meta =
            torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(package, "model");
        auto it = meta.find(kMetaMaxBatch);
        long v = it == meta.end() ? 0 : std::strtol(it->second.c_str(), nullptr, 10);
        return v >= 1 ? static_cast<uint32_t>(std::min<long>(v, GF_TORCH_BATCH_MAX)) : 0;
    } catch (const std::exception &) {
        return 0; /* loading it says what is wrong */
    }
}

/* The most calls of the model one submission makes: its frames (at most
 * GF_TORCH_BATCH_MAX, at one stride) in calls of max_batch. */
size_t calls_per_submission(uint32_t max_batch) {
    return (GF_TORCH_BATCH_MAX + max_batch - 1) / max_batch;
}

/* Loads the package with `instances` model instances, PyTorch's reason in
 * the exception when it cannot.  `single_threaded`: the container's calls
 * take no lock and record no event (one thread calls it, and graphs capture
 * its calls). */
void load(Device &d, size_t instances, bool single_threaded) {
    d.loader.reset();
    StderrCapture capture;
    try {
        d.loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
            d.m->package, "model", single_threaded, instances, d.index);
        d.instances = instances;
    } catch (const std::exception &e) {
        std::string printed = capture.finish();
        throw std::runtime_error("cannot load: " + reason(e) +
                                 (printed.empty() ? "" : " (" + printed + ")"));
    }
}

/* Creates the lanes, taking the streams of closed devices first. */
void open_lanes(Device &d, uint32_t count) {
    d.lanes.resize(count);
    for (Lane &l : d.lanes) {
        {
            std::lock_guard<std::mutex> lock(spare_lock);
            std::vector<cudaStream_t> &spare = spare_streams[d.index];
            if (!spare.empty()) {
                l.stream = spare.back();
                spare.pop_back();
            }
        }
        if (!l.stream)
            check_cuda(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking),
                       "creating a lane's stream");
        check_cuda(cudaEventCreateWithFlags(&l.ready, cudaEventDisableTiming),
                   "creating a lane's event");
        check_cuda(cudaEventCreateWithFlags(&l.done, cudaEventDisableTiming),
                   "creating a lane's event");
    }
}

/* Device memory PyTorch's caching allocator has taken from CUDA on the
 * device: the count of its cudaMalloc calls, and the bytes it holds. */
std::pair<int64_t, int64_t> allocator_state(c10::DeviceIndex index) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    return {stats.num_device_alloc,
            stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                .current};
}

/* A device buffer for device_open's calls, freed with it. */
struct Scratch {
    void *p = nullptr;
    explicit Scratch(uint64_t bytes) {
        check_cuda(cudaMalloc(&p, bytes), "allocating the warm-up's buffers");
        check_cuda(cudaMemset(p, 0, bytes), "clearing the warm-up's buffers");
    }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch() { cudaFree(p); }
};

/* What the warm-up did: the batch sizes it ran of the `of` a call can have,
 * its checking passes, and what the last of them took (0 unless
 * kWarmPassesMax ran out). */
struct Warm {
    uint32_t sizes = 0, of = 0;
    int passes = 0;
    int64_t grew = 0;
};

/*
 * Fills every lane's memory cache: runs every batch size from max_batch
 * down to min_batch on every lane, zeroed, laid out as the daemon lays
 * frames (at a stride where the frames are a contiguous batch, when they
 * can be, and at one where they are gathered); after kWarmAllSeconds only
 * the bounded set (gf__torch_warm_sizes: max_batch, the powers of two below
 * it, min_batch).  Then passes over the bounded set until one takes no
 * device memory from CUDA.
 */
Warm warm_lanes(Device &d) {
    const gf__torch_model *m = d.m;
    const uint64_t unit = (std::max(m->in_bytes, m->out_bytes) + kFrameAlignBytes - 1) /
                          kFrameAlignBytes * kFrameAlignBytes;
    std::vector<uint64_t> strides = {unit + kFrameAlignBytes}; /* gathered */
    if (m->in.count == 1 && unit == m->in_bytes)
        strides.push_back(unit); /* one contiguous batch */
    uint32_t bounded[GF_TORCH_WARM_SIZES_MAX];
    const uint32_t bounded_count = gf__torch_warm_sizes(d.min_batch, d.max_batch, bounded);
    const uint64_t bytes = d.max_batch * (unit + kFrameAlignBytes);
    Scratch in(bytes), out(bytes);
    std::vector<gf_plugin_frame> frames(d.max_batch);
    /* n frames on every lane in every layout, waited for. */
    auto run_size = [&](uint32_t n) {
        for (uint64_t stride : strides)
            for (Lane &l : d.lanes) {
                for (uint32_t i = 0; i < n; i++)
                    frames[i] = {static_cast<uint8_t *>(in.p) + i * stride, m->in_bytes,
                                 static_cast<uint8_t *>(out.p) + i * stride, m->out_bytes};
                c10::cuda::CUDAStreamGuard guard(
                    c10::cuda::getStreamFromExternal(l.stream, d.index));
                run_frames(d, frames.data(), n, l.stream);
            }
        for (Lane &l : d.lanes)
            check_cuda(cudaStreamSynchronize(l.stream), "warming the lanes");
    };
    Warm w;
    w.of = d.max_batch - d.min_batch + 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t n = d.max_batch; n >= d.min_batch && n >= 1; n--) {
        const bool bound =
            std::find(bounded, bounded + bounded_count, n) != bounded + bounded_count;
        if (!bound && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
                          kWarmAllSeconds)
            continue;
        run_size(n);
        w.sizes++;
    }
    do {
        const int64_t before = allocator_state(d.index).first;
        for (uint32_t i = 0; i < bounded_count; i++)
            run_size(bounded[i]);
        w.grew = allocator_state(d.index).first - before;
        w.passes++;
    } while (w.grew > 0 && w.passes < kWarmPassesMax);
    return w;
}

/* The memory of one lane's graphs, which they share: they replay one at a
 * time, in the order of the lane's stream index. */
using Pool = decltype(at::cuda::graph_pool_handle());

/*
 * Captures lane l's call of n frames, reading the lane's inputs, into
 * l.graphs[n], on the lane's stream (current).  The capture is the calling
 * thread's alone (cudaStreamCaptureModeThreadLocal): the shards' launches of
 * a running package beside a reload go on.  Throws with PyTorch's reason
 * (the container prints what the model threw) when the call cannot be
 * captured; the lane is then as before.
 */
void capture(Device &d, Lane &l, uint32_t n, const Pool &pool) {
    std::vector<at::Tensor> inputs;
    for (const at::Tensor &t : l.in)
        inputs.push_back(d.batched ? t.narrow(0, 0, n) : t);
    Graph &g = l.graphs[n];
    g.graph = std::make_unique<at::cuda::CUDAGraph>();
    StderrCapture printed;
    try {
        g.graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
        std::vector<at::Tensor> outs = d.loader->run(inputs, l.stream);
        check_outputs(d, outs, n);
        for (const at::Tensor &t : outs)
            g.outs.push_back(t.is_contiguous() ? t : t.contiguous());
        g.graph->capture_end();
        g.exec = g.graph->raw_cuda_graph_exec();
    } catch (const std::exception &e) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(l.stream, &status) == cudaSuccess &&
            status != cudaStreamCaptureStatusNone) {
            try {
                g.graph->capture_end();
            } catch (const std::exception &) {
                /* the capture is over either way */
            }
        }
        try { /* where capture_end threw before giving the pool back */
            c10::cuda::CUDACachingAllocator::endAllocateToPool(d.index, pool);
        } catch (const std::exception &) {
            /* it had */
        }
        (void)cudaGetLastError();
        g.out_ptr.clear();
        g.outs.clear();
        g.exec = nullptr;
        g.graph.reset();
        const std::string why = printed.finish();
        if (dynamic_cast<const Mismatch *>(&e))
            throw;
        throw std::runtime_error("a call of " + std::to_string(n) +
                                 " frame(s): " + (why.empty() ? reason(e) : why));
    }
    for (const at::Tensor &t : g.outs)
        g.out_ptr.push_back(static_cast<const uint8_t *>(t.data_ptr()));
}

/* What capture_lanes did: the batch sizes captured (on each lane) of the
 * `of` a call can have. */
struct Captured {
    uint32_t sizes = 0, of = 0;
};

/*
 * Captures every lane's calls (the file's comment), largest first, so that
 * the smaller ones reuse the memory the larger freed in the lane's pool:
 * every batch size from max_batch down to min_batch, those outside the
 * bounded set (gf__torch_warm_sizes) only within kGraphAllSeconds.  Each
 * size runs once first on lane 0, uncaptured, so that what PyTorch makes at
 * a call's first run (kernels loaded, cuDNN's plans) is made outside a
 * capture.  Each lane's inputs are zeroed, on its stream, and waited for.
 * device_open's thread.
 */
Captured capture_lanes(Device &d) {
    uint32_t bounded[GF_TORCH_WARM_SIZES_MAX];
    const uint32_t bounded_count = gf__torch_warm_sizes(d.min_batch, d.max_batch, bounded);
    std::vector<Pool> pools;
    std::vector<std::array<uint8_t, GF_TORCH_BATCH_MAX + 1>> captured(d.lanes.size());
    for (Lane &l : d.lanes) {
        c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(l.stream, d.index));
        l.in = zeros_for(d, d.max_batch, d.batched);
        for (const at::Tensor &t : l.in)
            l.in_ptr.push_back(static_cast<uint8_t *>(t.data_ptr()));
        l.graphs.resize(GF_TORCH_BATCH_MAX + 1);
        pools.push_back(at::cuda::graph_pool_handle());
    }
    Captured c;
    c.of = d.max_batch - d.min_batch + 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t n = d.max_batch; n >= d.min_batch && n >= 1; n--) {
        const bool bound =
            std::find(bounded, bounded + bounded_count, n) != bounded + bounded_count;
        if (!bound && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
                          kGraphAllSeconds)
            continue;
        Lane &first = d.lanes[0];
        {
            c10::cuda::CUDAStreamGuard guard(
                c10::cuda::getStreamFromExternal(first.stream, d.index));
            d.loader->run(zeros_for(d, n, d.batched), first.stream);
            check_cuda(cudaStreamSynchronize(first.stream), "running a call before its capture");
        }
        for (size_t i = 0; i < d.lanes.size(); i++) {
            Lane &l = d.lanes[i];
            c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(l.stream, d.index));
            capture(d, l, n, pools[i]);
            captured[i][n] = 1;
        }
        c.sizes++;
    }
    for (size_t i = 0; i < d.lanes.size(); i++) {
        Lane &l = d.lanes[i];
        if (!gf__torch_replay_sizes(captured[i].data(), d.min_batch, d.max_batch, l.replay))
            throw std::runtime_error("no graph of " + std::to_string(d.max_batch) + " frames");
        check_cuda(cudaStreamSynchronize(l.stream), "zeroing the graphs' inputs");
    }
    return c;
}

/* Drops every lane's graphs and their inputs (device_open's thread, after a
 * capture failed). */
void drop_graphs(Device &d) {
    for (Lane &l : d.lanes) {
        l.graphs.clear();
        l.in.clear();
        l.in_ptr.clear();
    }
    d.graphs = false;
}

/* Seconds since `t0`, and `t0` moved to now. */
double lap(std::chrono::steady_clock::time_point &t0) {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - t0).count();
    t0 = now;
    return s;
}

/* Makes `d` run each call of the package on its lane (no graphs): as many
 * model instances as calls can be in flight, each run once, and the lanes
 * warmed.  Logs what it did; `t` and the seconds so far as for the load
 * line (where captures were tried, the batch sizes' figure includes them
 * and the loading again). */
void open_eager(Device &d, cudaStream_t lane0, std::chrono::steady_clock::time_point &t,
                double load_s, double probe_s) {
    const gf__torch_model *m = d.m;
    const size_t instances = d.lanes.size() * calls_per_submission(d.max_batch);
    if (instances > d.instances || d.graphs_tried)
        load(d, instances, false); /* the probe found a smaller batch than wanted, or the
                                    * loader was one thread's, for graphs */
    probe_s += lap(t);
    /* Every model instance runs once (a call takes a free one while there
     * is one), so that none loads its kernels under frames. */
    for (size_t i = 0; i < d.instances; i++)
        d.loader->run(zeros_for(d, d.min_batch, d.batched), lane0);
    const double instances_s = lap(t);
    const Warm w = warm_lanes(d);
    const double warm_s = lap(t);
    const auto held = allocator_state(d.index).second;
    if (w.grew > 0)
        fprintf(stderr,
                "gpuframed: plugin torch: %s: the last of %d checking passes of the warm-up "
                "still took device memory (%lld cudaMalloc): later frames may too\n",
                m->package, w.passes, static_cast<long long>(w.grew));
    if (w.sizes < w.of)
        fprintf(stderr,
                "gpuframed: plugin torch: %s: the warm-up ran %u of the %u batch sizes (the "
                "rest after %.0f s): a lane's first call of another size may take device "
                "memory\n",
                m->package, w.sizes, w.of, kWarmAllSeconds);
    fprintf(stderr,
            "gpuframed: plugin torch: %s loaded in %.1f s: batches of %u..%u%s, no CUDA graphs, "
            "%zu model instances, %zu lanes warmed at %u of %u batch sizes, checked in %d "
            "passes; PyTorch holds %.1f MiB on device %d (loading %.1f s, batch sizes %.1f s, "
            "instances %.1f s, warm-up %.1f s)\n",
            m->package, load_s + probe_s + instances_s + warm_s, d.min_batch, d.max_batch,
            d.min_batch > 1 ? " (fewer frames padded)" : "", d.instances, d.lanes.size(), w.sizes,
            w.of, w.passes, static_cast<double>(held) / (1 << 20), static_cast<int>(d.index),
            load_s, probe_s, instances_s, warm_s);
}

void *aoti_device_open(const void *state, int device, uint32_t streams, char *why, size_t why_len) {
    const auto *m = static_cast<const gf__torch_model *>(state);
    try {
        auto t = std::chrono::steady_clock::now();
        auto d = std::make_unique<Device>();
        d->m = m;
        d->index = static_cast<c10::DeviceIndex>(device);
        c10::cuda::CUDAGuard device_guard(d->index);
        open_lanes(*d, std::max<uint32_t>(streams, 1));
        cudaStream_t lane0 = d->lanes[0].stream;
        c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromExternal(lane0, d->index));
        /* As many instances as the batch the package says it takes needs;
         * one for graphs, which only this thread's calls make. */
        const uint32_t meta_batch = metadata_batch(m->package);
        const uint32_t want = m->max_batch ? m->max_batch
                              : meta_batch ? meta_batch
                                           : GF_TORCH_BATCH_MAX;
        /* Said first, so that a start-up that takes long says where. */
        fprintf(stderr,
                "gpuframed: plugin torch: %s: loading on device %d for %zu stream(s), batches "
                "of up to %u%s\n",
                m->package, device, d->lanes.size(), want,
                m->cuda_graphs ? ", as CUDA graphs" : "");
        d->graphs_tried = m->cuda_graphs != 0;
        load(*d, d->graphs_tried ? 1 : d->lanes.size() * calls_per_submission(want),
             d->graphs_tried);
        check_metadata(*d);
        const double load_s = lap(t);
        probe(*d, want, lane0);
        if (d->max_batch == 1 && m->max_batch == 0)
            fprintf(stderr,
                    "gpuframed: plugin torch: %s takes no batch of several frames (%s): its "
                    "frames run one at a time\n",
                    m->package,
                    d->batched ? "its batch dimension is not dynamic"
                               : "it has no batch dimension");
        const double probe_s = lap(t);
        if (d->graphs_tried) {
            try {
                const Captured c = capture_lanes(*d);
                d->graphs = true;
                const double capture_s = lap(t);
                fprintf(stderr,
                        "gpuframed: plugin torch: %s loaded in %.1f s: batches of %u..%u%s, "
                        "CUDA graphs of %u of the %u batch sizes on each of %zu lanes (a call "
                        "of another size replays the next larger, its padding zeros); PyTorch "
                        "holds %.1f MiB on device %d (loading %.1f s, batch sizes %.1f s, "
                        "captures %.1f s)\n",
                        m->package, load_s + probe_s + capture_s, d->min_batch, d->max_batch,
                        d->min_batch > 1 ? " (fewer frames padded)" : "", c.sizes, c.of,
                        d->lanes.size(),
                        static_cast<double>(allocator_state(d->index).second) / (1 << 20), device,
                        load_s, probe_s, capture_s);
                return d.release();
            } catch (const Mismatch &) {
                throw;
            } catch (const std::exception &e) {
                drop_graphs(*d);
                fprintf(stderr,
                        "gpuframed: plugin torch: %s: its calls cannot be captured as CUDA "
                        "graphs (%s): each call runs the package\n",
                        m->package, reason(e).c_str());
            }
        }
        open_eager(*d, lane0, t, load_s, probe_s);
        return d.release();
    } catch (const std::exception &e) {
        snprintf(why, why_len, "package %s: %s", m->package, reason(e).c_str());
    } catch (...) {
        snprintf(why, why_len, "package %s: an exception that is not a std::exception", m->package);
    }
    return nullptr;
}

void aoti_device_close(void *dev) {
    try {
        delete static_cast<Device *>(dev);
    } catch (const std::exception &e) {
        fprintf(stderr, "gpuframed: plugin torch: closing a package: %s\n", reason(e).c_str());
    } catch (...) {
    }
}

/* Makes the daemon's stream wait for the lane: what was enqueued on the lane
 * completes before anything enqueued on `stream` after it. */
cudaError_t join(const Lane &l, cudaStream_t stream) {
    cudaError_t err = cudaEventRecord(l.done, l.stream);
    return err ? err : cudaStreamWaitEvent(stream, l.done, 0);
}

/*
 * One call replayed from lane l's graphs, on `stream`: the call's frames
 * gathered into the lane's inputs, the rest of the graph's batch (a call of
 * a size without a graph of its own, or padded to min_batch) zeroed, the
 * graph launched, its outputs scattered into the slot's output buffer.
 * Four enqueued calls for a one-tensor model; no PyTorch.  The shard's loop
 * thread that owns the stream index.
 */
void replay_call(const Device &d, const Lane &l, const gf_plugin_frame *frames,
                 const gf__torch_call &c, cudaStream_t stream) {
    const gf__torch_model *m = d.m;
    const auto *in_base = static_cast<const uint8_t *>(frames[c.first].in_dev);
    auto *out_base = static_cast<uint8_t *>(frames[c.first].out_dev);
    const uint32_t n = c.frames, size = l.replay[c.batch];
    if (size == 0)
        throw std::runtime_error("no graph for a call of " + std::to_string(c.batch) + " frames");
    const Graph &g = l.graphs[size];
    for (uint32_t k = 0; k < m->in.count; k++) {
        const uint64_t bytes = m->in_tensor_bytes[k];
        check_cuda(cudaMemcpy2DAsync(l.in_ptr[k], bytes, in_base + m->in_offset[k],
                                     n > 1 ? c.stride : bytes, bytes, n, cudaMemcpyDeviceToDevice,
                                     stream),
                   "gathering an input");
        if (size > n)
            check_cuda(cudaMemsetAsync(l.in_ptr[k] + n * bytes, 0, (size - n) * bytes, stream),
                       "zeroing a batch's padding");
    }
    check_cuda(cudaGraphLaunch(g.exec, stream), "replaying a call's graph");
    for (uint32_t k = 0; k < m->out.count; k++) {
        const uint64_t bytes = m->out_tensor_bytes[k];
        check_cuda(cudaMemcpy2DAsync(out_base + m->out_offset[k], n > 1 ? c.stride : bytes,
                                     g.out_ptr[k], bytes, bytes, n, cudaMemcpyDeviceToDevice,
                                     stream),
                   "scattering an output");
    }
}

int aoti_launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                      uint32_t count, void *stream) {
    Device &d = *static_cast<Device *>(dev);
    if (stream_index >= d.lanes.size()) {
        const std::runtime_error e("stream index " + std::to_string(stream_index) +
                                   " is beyond the " + std::to_string(d.lanes.size()) +
                                   " device_open was given");
        return failed(d, &e, count);
    }
    const Lane &l = d.lanes[stream_index];
    auto s = static_cast<cudaStream_t>(stream);
    if (d.graphs) {
        try {
            const uint64_t frame_bytes = std::max(d.m->in_bytes, d.m->out_bytes);
            gf__torch_call c;
            for (uint32_t i = 0, n; (n = gf__torch_next_call(frames, count, i, frame_bytes,
                                                             d.min_batch, d.max_batch, &c)) > 0;
                 i += n)
                replay_call(d, l, frames, c, s);
            return 0;
        } catch (const std::exception &e) {
            return failed(d, &e, count);
        }
    }
    cudaError_t err = cudaEventRecord(l.ready, s);
    if (!err)
        err = cudaStreamWaitEvent(l.stream, l.ready, 0);
    if (err)
        return err;
    try {
        c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(l.stream, d.index));
        run_frames(d, frames, count, l.stream);
        return join(l, s);
    } catch (const std::exception &e) {
        join(l, s); /* what was enqueued still completes before the slot is reused */
        return failed(d, &e, count);
    } catch (...) {
        join(l, s);
        return failed(d, nullptr, count);
    }
}

int aoti_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                void *out_dev, void *stream) {
    const gf_plugin_frame frame = {in_dev, in_bytes, out_dev,
                                   static_cast<const Device *>(dev)->m->out_bytes};
    return aoti_launch_batch(dev, stream_index, &frame, 1, stream);
}

const gf__torch_aoti_api api = {GF_TORCH_AOTI_VERSION, aoti_device_open, aoti_device_close,
                                aoti_launch, aoti_launch_batch};

} // namespace

extern "C" const gf__torch_aoti_api *gf__torch_aoti_entry(void) {
    return &api;
}

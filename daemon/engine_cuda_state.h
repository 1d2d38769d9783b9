/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's state, shared by the files that split its concerns:
 *
 *   engine_cuda.c           open (slots, warm-up) and close, submit, a
 *                           region's pinning, a reload's prepare
 *   engine_cuda_launch.c    a batch's copies and launches on its slot's
 *                           stream; zero-copy batches
 *   engine_cuda_graphs.c    the graph cache: a batch's launches captured
 *                           once per shape and replayed
 *   engine_cuda_complete.c  the completion modes (host function, poll,
 *                           hybrid) and the stage times of a finished slot
 *   engine_cuda_vmm.c       device regions: a client's cuMemCreate memory
 *                           imported and mapped through the driver API
 *
 * Five threads run this code, each function says which:
 *   - the shard's thread at start-up and shutdown: open (allocations,
 *     warm-up, the pipelines' device side) and close (it may wait);
 *   - the shard's loop: submit, launches, graphs, poll, finish (never
 *     blocking on the device);
 *   - the CUDA driver's host-function thread: on_stream_done (no CUDA call,
 *     no lock);
 *   - workers of the shard's libuv thread pool: a region's pin and unpin,
 *     a device region's map and unmap;
 *   - a worker of the control loop's thread pool: a reload's prepare
 *     (gf__engine_cuda_prepare), which touches no open engine.
 *
 * The header of engine_cuda.c tells a frame's trip through them.
 */
#ifndef GF_ENGINE_CUDA_STATE_H
#define GF_ENGINE_CUDA_STATE_H

#include <errno.h>

#include <cuda_runtime_api.h>

#include "engine.h"
#include "log.h"

enum { EV_START, EV_H2D, EV_KERNEL, EV_D2H, EV_COUNT };

typedef struct cuda_slot {
    gf_engine *engine;
    void *in_dev, *out_dev;
    void *scratch_dev[2];   /* intermediate results of a pipeline of several stages */
    cudaStream_t stream;    /* the slot's, with its plugin stream index       */
    cudaStream_t urgent;    /* the same work at the device's greatest stream
                               priority (an urgent batch: cuda_submit); NULL
                               where the device has one priority              */
    cudaStream_t busy;      /* the one the batch in flight went on           */
    cudaStream_t unsettled; /* where a batch answered unfinished may still run
                               (cuda_submit's -EIO): the next one waits for it */
    cudaEvent_t ev[EV_COUNT];
    cudaEvent_t stage_ev[GF_STAGES_MAX - 1]; /* timed: after each stage but the last */
    cudaEvent_t done;           /* poll, hybrid: recorded after the D2H copy, untimed   */
    int pending;                /* poll, hybrid: submitted, done not yet seen by a poll */
    uint64_t spin_until_ns;     /* hybrid: then a host function takes over     */
    uint64_t queued_ns;         /* hybrid: when its launches were queued       */
    struct graph_entry *graphs; /* cuda_graphs: the graph cache
                                   (engine_cuda_graphs.c)          */
    uint64_t graph_clock;       /* replays so far: the entries' last_used       */
} cuda_slot;

typedef struct cuda_engine {
    gf_engine base;
    cuda_slot *cslots;
    int device;                   /* gf_engine_params': the CUDA ordinal */
    uint32_t stream_base;         /* gf_engine_params': the first plugin
                                     stream index of these slots          */
    uint32_t device_streams;      /* gf_engine_params': the device's      */
    uint64_t zero_copy_max_bytes; /* gf_engine_params' */
    int host_pointers;            /* kernels reach registered (shm) memory
                                     at its host address: small shm frames
                                     may be gathered (engine_cuda_launch.c) */
    uint64_t max_pitch;           /* the largest pitch a 2D copy takes
                                     (cudaDeviceProp.memPitch)            */
    int hybrid;                   /* completion = hybrid (gf_hybrid_spin_ns) */
    uint64_t tail_ns;             /* hybrid: the GPU's time after a submission's
                                     launches were queued, a moving mean
                                     (gf__cuda_complete_after uses it)    */
    int vmm_status;               /* device regions: 0, or -ENOTSUP when the
                                     self-check at open turned them off   */
    char vmm_why[200];            /* why they are off (gf__cuda_vmm_check) */
} cuda_engine;

/* Logs a failed CUDA call with its text, place and error string; yields the error. */
static inline cudaError_t check(cudaError_t err, const char *call, const char *file, int line) {
    if (err != cudaSuccess)
        GF_LOG_ERR("engine cuda: %s failed at %s:%d: %s (%s)", call, file, line,
                   cudaGetErrorString(err), cudaGetErrorName(err));
    return err;
}
#define CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

/* The negative errno a failed start-up call stands for: out of memory only
 * when it was, no device when there is none, an I/O error otherwise. */
static inline int cuda_errno(cudaError_t err) {
    switch (err) {
    case cudaSuccess: return 0;
    case cudaErrorMemoryAllocation: return -ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return -ENODEV;
    default: return -EIO;
    }
}

/*
 * Errors that poison the context: after one, every later call fails and host
 * functions never run again.  The daemon must exit so systemd restarts it.
 */
static inline int is_sticky(cudaError_t err) {
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown: return 1;
    default: return 0;
    }
}

#endif

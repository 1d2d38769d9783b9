/* SPDX-License-Identifier: MIT */
/*
 * The engine interface: the one seam between a shard and compute.
 *
 * An engine owns the slots' memory and runs frames.  A shard claims a
 * slot, packs one or more frames of one pipeline into it (slots.h), then
 * calls gf_engine_submit() on the loop thread; the engine runs every frame of
 * the slot and, from its own thread, pushes the slot onto the completion
 * queue exactly once.  On the loop, the shard then calls gf_engine_finish()
 * to collect each frame's status and stage times before it writes the
 * replies.
 *
 * Two engines: "cuda" (engine_cuda.c: the product) and "cpu" (engine_cpu.c:
 * the pipelines' C references on a worker thread per slot, for machines with
 * no GPU and for CI).
 */
#ifndef GF_ENGINE_H
#define GF_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "completion.h"
#include "config.h"
#include "plugin.h"
#include "slots.h"

/* What an engine is opened with; everything it allocates is sized here. */
typedef struct gf_engine_params {
    uint32_t slot_count;
    uint64_t in_capacity_bytes;      /* per slot: the largest frame payload */
    uint64_t out_capacity_bytes;     /* per slot: the largest result        */
    uint64_t scratch_capacity_bytes; /* per slot, twice: the largest
                                        intermediate result of a pipeline
                                        of several stages (0: none)     */
    gf_pipeline *pipelines;          /* prepared and warmed up before open
                                        returns                            */
    size_t pipeline_count;
    enum gf_completion_mode completion; /* poll, hybrid: gf_engine_poll finds
                                           done frames                       */
    int device;                         /* CUDA: the device ordinal          */
    uint32_t stream_base;               /* CUDA: the first plugin stream index
                                           of these slots on the device (shards
                                           before this one there x slots)     */
    uint32_t device_streams;            /* CUDA: plugin stream indices on the
                                           device, every shard's              */
    uint64_t zero_copy_max_bytes;       /* CUDA: a batch of elementwise built-in
                                           stages in the slot's buffers, of at
                                           most this many bytes in and out, runs
                                           its kernels on the pinned host buffers
                                           (no copy); 0: never                 */
    int cuda_graphs;                    /* CUDA: replay batches of plugin or
                                           multi-stage pipelines from graphs   */
} gf_engine_params;

/* What the engine runs on, for STATS. */
typedef struct gf_device_info {
    int is_gpu;             /* 1: a CUDA device; 0: the CPU engine       */
    char name[256];         /* "NVIDIA H200", or "cpu"                  */
    int cc_major, cc_minor; /* compute capability                        */
    int sm_count;           /* streaming multiprocessors                 */
    uint64_t memory_bytes;  /* device memory                             */
    char pci_bus_id[32];    /* "0000:06:00.0"                            */
    uint32_t threads;       /* CPU engine: worker threads                */
} gf_device_info;

typedef struct gf_engine gf_engine;

/* A client's device memory, imported and mapped by the engine
 * (gf_engine_device_map): where the daemon reaches it and what the driver
 * says it is. */
typedef struct gf_device_mapping {
    uint64_t dev_ptr;           /* the daemon's mapping: a device address     */
    uint64_t bytes;             /* mapped: the size the client gave (cuMemMap) */
    int device;                 /* the CUDA ordinal that holds the memory      */
    uint64_t granularity_bytes; /* the allocation's minimum granularity   */
} gf_device_mapping;

typedef struct gf_engine_ops {
    const char *name; /* "cuda" or "cpu" */
    /* See gf_engine_submit / gf_engine_finish / gf_engine_close. */
    int (*submit)(gf_engine *e, gf_slot *slot);
    void (*finish)(gf_engine *e, gf_slot *slot);
    void (*close)(gf_engine *e);
    /* NULL for an engine that always completes through the queue. */
    uint32_t (*poll)(gf_engine *e);
    /* See gf_engine_pin / gf_engine_unpin; NULL where host memory needs no
     * pinning (the CPU engine). */
    int (*pin)(gf_engine *e, void *base, uint64_t bytes, char *why, size_t why_len);
    void (*unpin)(gf_engine *e, void *base);
    /* See gf_engine_device_map / gf_engine_device_unmap; NULL where the
     * engine has no device memory (the CPU engine). */
    int (*device_map)(gf_engine *e, int fd, uint64_t bytes, uint32_t served, gf_device_mapping *out,
                      char *why, size_t why_len);
    void (*device_unmap)(gf_engine *e, const gf_device_mapping *m);
} gf_engine_ops;

struct gf_engine {
    const gf_engine_ops *ops;
    gf_slot *slots; /* slot_count slots, buffers allocated     */
    uint32_t slot_count;
    gf_completion *done;   /* where finished slots are pushed         */
    gf_device_info device; /* the same, as fields                     */
    uint64_t pinned_bytes; /* page-locked host memory held            */
    int poisoned;          /* a sticky error: the daemon must exit    */
    int polled;            /* completions may be found by gf_engine_poll */
    void *impl;            /* the engine's own state                  */
};

/*
 * The engine `choice` comes to (auto: cuda when a device answers, else cpu),
 * logged with its reason, once for the daemon; *devices gets the CUDA
 * devices visible (0 for cpu or none).
 */
enum gf_engine_choice gf_engine_choose(enum gf_engine_choice choice, int *devices);

/*
 * Opens the engine `choice` names (auto: as gf_engine_choose).  Allocates every slot's memory,
 * creates streams or threads, warms up every pipeline, and only then returns:
 * after it, submitting makes no allocation.  Returns 0 and sets *out, or a
 * negative errno with the reason logged.  Start-up only, on the thread of
 * the loop that submits (a CUDA device is current per thread).
 */
int gf_engine_open(enum gf_engine_choice choice, const gf_engine_params *params,
                   gf_completion *done, gf_engine **out);

/*
 * Starts the frames of `slot`'s batch.  Loop thread; never blocks on the device.
 * Returns 0: the slot will be pushed to `done` exactly once, after every
 * piece of its work that was started; a launch that failed partway sets
 * slot->failed, and finish fails its frames then.  Returns < 0: it will
 * not be pushed (its completion could not be queued, or a sticky error
 * poisoned the engine, which sets `poisoned`).
 */
static inline int gf_engine_submit(gf_engine *e, gf_slot *slot) {
    return e->ops->submit(e, slot);
}

/* Loop thread, after the slot came off the completion queue: fills each of
 * its frames' status and stages.  Never blocks. */
static inline void gf_engine_finish(gf_engine *e, gf_slot *slot) {
    e->ops->finish(e, slot);
}

/*
 * For an engine opened with completion = poll or hybrid (e->polled): checks,
 * without blocking, which submitted frames have finished and hands each to
 * the loop at once (gf_completion_deliver); in hybrid, a submission still
 * running a window after its launches were queued (config.h) goes to a host
 * function instead, which completes it through the queue.  Returns the
 * submissions it still polls: the shard calls it on every loop iteration
 * until that is 0.  Loop thread.
 */
static inline uint32_t gf_engine_poll(gf_engine *e) {
    return e->ops->poll(e);
}

/*
 * completion = hybrid: how long to poll a submission queued now, from
 * `tail_ns`, the moving mean of how long the shard's recent ones took the
 * device after their launches were queued: GF_COMPLETION_SPIN_NS, or, where
 * that mean and a quarter more is longer but at most
 * GF_COMPLETION_SPIN_MAX_NS, that (config.h says why).  Pure.
 */
static inline uint64_t gf_hybrid_spin_ns(uint64_t tail_ns) {
    uint64_t want = tail_ns + tail_ns / 4;
    return want > GF_COMPLETION_SPIN_NS && want <= GF_COMPLETION_SPIN_MAX_NS
               ? want
               : GF_COMPLETION_SPIN_NS;
}

/* The moving mean gf_hybrid_spin_ns takes: `mean` (0: none yet) with one
 * more submission's `tail_ns`, weighted an eighth.  Pure. */
static inline uint64_t gf_hybrid_tail_mean(uint64_t mean, uint64_t tail_ns) {
    return mean ? mean - mean / 8 + tail_ns / 8 : tail_ns;
}

/*
 * Page-locks `bytes` of host memory at `base` (a client's shared-memory
 * region, mapped by the daemon) so that the engine's copies run straight
 * from and into it.  Slow (milliseconds per hundred MiB) and thread-safe:
 * called on a worker thread, never on the loop.  Returns 0, or a negative
 * errno with the engine's reason in why[why_len].  Engines without `pin`
 * succeed at once.
 */
static inline int gf_engine_pin(gf_engine *e, void *base, uint64_t bytes, char *why,
                                size_t why_len) {
    return e->ops->pin ? e->ops->pin(e, base, bytes, why, why_len) : 0;
}

/* Undoes gf_engine_pin once no frame uses the memory; worker thread. */
static inline void gf_engine_unpin(gf_engine *e, void *base) {
    if (e->ops->unpin)
        e->ops->unpin(e, base);
}

/* Nonzero when gf_engine_pin does something (the region is then "pinned"). */
static inline int gf_engine_pins(const gf_engine *e) {
    return e->ops->pin != NULL;
}

/* Whether the engine maps clients' device memory (device regions). */
static inline int gf_engine_maps_device(const gf_engine *e) {
    return e->ops->device_map != NULL;
}

/*
 * Imports the CUDA allocation whose POSIX file descriptor is `fd` (a
 * client's cuMemCreate, exported; the caller keeps and closes the fd) and
 * maps exactly `bytes` of it, readable and writable by the device that
 * holds it, which the driver names (never the client).  No driver call
 * gives an imported allocation's size: `bytes` beyond it is refused only by
 * cuMemMap, which CUDA does not promise; the engine checks at open that its
 * driver does, or maps nothing (engine_cuda_vmm.c).  Memory on a device
 * not in `served` (bit d: the daemon serves CUDA device d) is refused,
 * -ENODEV, before anything is mapped.  Slow (hundreds of
 * microseconds) and thread-safe: a worker thread, never the loop.  Returns
 * 0 with *out, or a negative errno with the driver's reason in
 * why[why_len].  Only where gf_engine_maps_device.
 */
static inline int gf_engine_device_map(gf_engine *e, int fd, uint64_t bytes, uint32_t served,
                                       gf_device_mapping *out, char *why, size_t why_len) {
    return e->ops->device_map(e, fd, bytes, served, out, why, why_len);
}

/* Undoes gf_engine_device_map once no frame uses the memory: the import's
 * last reference goes, and with it the memory if the client freed its own.
 * Worker thread. */
static inline void gf_engine_device_unmap(gf_engine *e, const gf_device_mapping *m) {
    e->ops->device_unmap(e, m);
}

/*
 * Makes `pipelines` runnable on `device` by the engine `choice` (cuda or
 * cpu, as chosen) before any of their frames is submitted: the CUDA engine
 * opens each plugin stage's device side there (device_open: its device
 * memory and handles, once per stage and device, for `device_streams`
 * stream indices) and checks every built-in kind has a kernel; the CPU
 * engine checks every stage has a C reference.  The scratch is the
 * caller's to check (a reload's sizes, each frame's lengths at its header).
 * It touches no open engine: gf_engine_open calls it for the pipelines it
 * is given, on the shard's thread at start-up, and a reload's check
 * (reload_check.h) for a reload's, on a worker of the control loop's
 * thread pool, never on a loop that serves frames: it may block for what
 * device_open takes.  Returns 0, or a negative value with the first
 * pipeline that cannot run in why[why_len]: -1, or a plugin's
 * GF_PLUGIN_OPEN_FAILED_BEFORE when its device side failed on this device
 * before (plugin.h).
 */
/* Room for gf_engine_prepare's why: a plugin's reason and the names before it. */
#define GF_ENGINE_WHY_BYTES (GF_PLUGIN_WHY_BYTES + 256)
int gf_engine_prepare(enum gf_engine_choice choice, int device, uint32_t device_streams,
                      gf_pipeline *pipelines, size_t count, char *why, size_t why_len);

/* Waits for all submitted work (shutdown may block), then frees everything. */
void gf_engine_close(gf_engine *e);

/* One line for logs: "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB, bus 0000:06:00.0"
 * or "cpu, 2 worker threads", from e->device. */
void gf_engine_describe(const gf_engine *e, char *buf, size_t len);

/* The engines this build has, e.g. "cuda cpu". */
const char *gf_engine_builtin_names(void);

/*
 * How many CUDA devices can be used (0: none), with what was found in
 * why[why_len]; if none, writes why into why[why_len] in
 * words a user acts on: no driver at all, the kernel module not loaded, the
 * driver library missing, the driver too old (with both CUDA versions), or
 * no device.  Any failure counts as "no GPU".  Always 0 in a build without
 * CUDA.
 */
int gf_engine_cuda_available(char *why, size_t why_len);

/* CUDA device `device`'s PCI bus id ("0000:06:00.0", cudaDeviceGetPCIBusId)
 * into buf[len].  Returns 0, or -ENODEV with the reason in why[why_len]
 * (always, in a build without CUDA). */
int gf_engine_bus_id(int device, char *buf, size_t len, char *why, size_t why_len);

/* The engines' constructors and preparers, for gf_engine_open and
 * gf_engine_prepare only. */
int gf__engine_cpu_open(const gf_engine_params *params, gf_completion *done, gf_engine **out);
int gf__engine_cuda_open(const gf_engine_params *params, gf_completion *done, gf_engine **out);
int gf__engine_cpu_prepare(gf_pipeline *pipelines, size_t count, char *why, size_t why_len);
int gf__engine_cuda_prepare(int device, uint32_t device_streams, gf_pipeline *pipelines,
                            size_t count, char *why, size_t why_len);

#endif

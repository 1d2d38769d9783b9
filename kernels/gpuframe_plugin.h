/* SPDX-License-Identifier: MIT */
/*
 * gpuframed's pipeline plugin ABI, version 3: what a shared object implements
 * so that gpuframed runs it as a pipeline kind, or as one stage of a
 * multi-stage pipeline.  Installed as <gpuframe/plugin.h>; plain C, needs
 * neither the CUDA headers nor cJSON.
 *
 * A plugin exports one function,
 *
 *     const gf_plugin *gf_plugin_entry(void);
 *
 * that returns a pointer to a static gf_plugin whose first member is
 * GF_PLUGIN_ABI_VERSION as the plugin was built.  gpuframed loads plugins of
 * versions GF_PLUGIN_ABI_VERSION_MIN to GF_PLUGIN_ABI_VERSION and refuses
 * any other, reading nothing else of it.  Versions are told apart by that
 * first member alone: version 2 added launch_batch and max_batch_frames at
 * the end of gf_plugin, and gpuframed reads no member past `launch` of a
 * version-1 plugin, which runs frame by frame as it always did; version 3
 * added describe and flags after them, which gpuframed reads of version-3
 * plugins only (an older one's frames are described from input_f32 and
 * exact: see describe).
 *
 * Life of a plugin stage (each configured use of a plugin is one "stage"):
 *
 *   dlopen, gf_plugin_entry()   at config load (start-up, SIGHUP reload,
 *                               --check-config) and in `gpuframe --verify`
 *   create(values, env)         host state: parameters validated, files
 *                               read.  No CUDA call.  Its failure is a
 *                               config error and names the stage.  The
 *                               daemon calls it first in a probe process
 *                               of its own, where a crash refuses the
 *                               plugin (plugins/README.md).
 *   describe(state, ...)        (version 3, optional) once, right after
 *                               create(): the frames' tensors, which LIST
 *                               publishes.
 *   device_open(state, ...)     the CUDA engine only, once per CUDA device
 *                               the daemon runs on (that device current),
 *                               before the stage's first frame there:
 *                               device memory, handles, one set per stream.
 *   launch(dev, ...)            per frame, on the thread of the shard (an
 *                               event loop) that runs the frame: enqueue
 *                               only.  Shards on one device share its `dev`
 *                               and launch concurrently, each on its own
 *                               stream indices.
 *   launch_batch(dev, ...)      (version 2, optional) instead of launch for
 *                               a submission of several frames: every frame
 *                               of this stage at once, on one stream.
 *   reference(state, ...)       per frame on the CPU engine (one of its
 *                               worker threads, concurrently for different
 *                               frames), and per frame in --verify.
 *   device_close(dev), destroy  when the stage has left the configuration
 *                               (a reload, shutdown) and its last frame has
 *                               completed: never under the GPU's feet; on
 *                               a worker thread after a reload, on the
 *                               main thread at shutdown; once per `dev`,
 *                               with any device current (set your own).
 *
 * Lengths: output_bytes() is asked of every frame before a slot is claimed;
 * a frame it refuses gets a bad_length ERROR with the plugin's text.
 * max_output_bytes() sizes the daemon's buffers, once at start-up: a reload
 * that would need more is kept back until a restart.
 *
 * Rules for launch(): enqueue work on `stream` only (a cudaStream_t), never
 * synchronise, never allocate (device_open allocates), return 0 or the
 * cudaError_t that cudaGetLastError() gives after the launch.  After a
 * nonzero return the stream still runs what was queued on it before (the
 * submission's frames are answered, failed, once it has); a sticky error
 * poisons the context and stops the daemon.  Launches of
 * one stage come on different streams concurrently, each with its own
 * `stream_index` below the `streams` given to device_open, and one index
 * always comes with the same stream (gpuframed's shard k of a device has
 * stream indices k * slots to k * slots + slots - 1 for its whole life):
 * keep per-stream scratch and handles (a cuBLAS handle per stream, bound to
 * it at its first launch), and nothing per `dev` that launches write: two
 * threads launch on one `dev` at once, never with the same stream index.  `in_dev` and `out_dev`
 * are device buffers aligned to at least 256 bytes; they never overlap.
 *
 * reference() gets host buffers with no particular alignment.
 * env->config_dir is always an absolute directory: the configuration file's,
 * or the current directory for a configuration given as text.  device_close
 * may synchronise the device (cudaFree does): gpuframed calls it, and
 * destroy, off its loop thread, with nothing else of the stage running;
 * another stage of the same plugin may be created or run meanwhile.
 */
#ifndef GPUFRAME_PLUGIN_H
#define GPUFRAME_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a member of gf_plugin, gf_plugin_param, gf_plugin_value or
 * gf_plugin_env changes meaning, order or size; additions go at the ends of
 * the structs and raise it too.  A plugin is built for exactly one version. */
#define GF_PLUGIN_ABI_VERSION 3
/* The oldest version gpuframed still loads. */
#define GF_PLUGIN_ABI_VERSION_MIN 1
/* The most frames one launch_batch call may be given (max_batch_frames). */
#define GF_PLUGIN_BATCH_FRAMES_MAX 4096

/* gf_plugin.flags (version 3). */
/* gpuframed never captures this plugin's launches into its own CUDA graphs
 * (the cuda_graphs key): for launches that allocate memory a graph cannot
 * own (PyTorch's caching allocator), query or wait on events, or capture
 * graphs of their own. */
#define GF_PLUGIN_NO_GRAPHS (1u << 0)

/* The name of the one symbol gpuframed looks up. */
#define GF_PLUGIN_ENTRY_SYMBOL "gf_plugin_entry"

/* How a parameter is written in the pipeline's "params" object. */
enum gf_plugin_param_type {
    GF_PLUGIN_NUMBER = 1,  /* a JSON number, within [min, max]              */
    GF_PLUGIN_INTEGER = 2, /* a JSON integer, within [min, max] (and 2^53)   */
    GF_PLUGIN_STRING = 3,  /* a JSON string of min..max bytes, no NUL inside */
};

/* One parameter.  gpuframed checks type, range, required and unknown keys
 * and reports each problem with its key path, as for the built-in kinds;
 * create() checks what only the plugin can (files, relations between keys). */
typedef struct gf_plugin_param {
    const char *key;            /* [a-z0-9_]+                                   */
    int type;                   /* enum gf_plugin_param_type                    */
    int required;               /* nonzero: the config must give it             */
    double default_number;      /* NUMBER, INTEGER: the value when absent       */
    const char *default_string; /* STRING: the value when absent (NULL: "")     */
    double min, max;            /* NUMBER, INTEGER: inclusive; STRING: lengths  */
    const char *doc;            /* one line: what it means, its unit            */
} gf_plugin_param;

/* One parameter's value, in the order of gf_plugin.params. */
typedef struct gf_plugin_value {
    double number;      /* NUMBER and INTEGER                                    */
    const char *string; /* STRING: NUL-terminated; valid until destroy(state)     */
} gf_plugin_value;

/* What create() is told about where it runs. */
typedef struct gf_plugin_env {
    /* No frame's input is longer than this (the daemon's max_frame_bytes). */
    uint64_t max_input_bytes;
    /* The directory of the configuration file the stage comes from: resolve
     * a relative path in a STRING parameter against it (never against the
     * current directory, which is / under systemd). */
    const char *config_dir;
} gf_plugin_env;

/*
 * What a frame holds, as LIST publishes it for every pipeline (PROTOCOL.md,
 * "LIST"): one or more tensors laid end to end in the frame's bytes, in
 * order, with no padding, each row-major (C order, the last dimension
 * varying fastest) and little-endian.  A built-in kind is described by the
 * same types (kernels/pipeline.h).
 */
enum gf_dtype {
    GF_DTYPE_UINT8 = 1,    /* "uint8"; also what "bytes" are                 */
    GF_DTYPE_INT32 = 2,    /* "int32"                                        */
    GF_DTYPE_INT64 = 3,    /* "int64"                                        */
    GF_DTYPE_FLOAT16 = 4,  /* "float16": IEEE 754 binary16                   */
    GF_DTYPE_BFLOAT16 = 5, /* "bfloat16": a float32's upper 16 bits          */
    GF_DTYPE_FLOAT32 = 6,  /* "float32": IEEE 754 binary32                   */
    GF_DTYPE_INT16 = 7,    /* "int16": PCM audio                             */
};
/* Most dimensions of one tensor (0 dimensions: a scalar, one element). */
#define GF_TENSOR_RANK_MAX 8
/* Most tensors in one frame's input, or in its output. */
#define GF_FRAME_TENSORS_MAX 8
/* A dimension whose size the frame's length decides ("-1" in LIST, as
 * NumPy's reshape writes it): at most one per tensor, and only in a frame
 * of one tensor, so that a length gives it one value. */
#define GF_DIM_VARIABLE (-1)

/* One tensor: its element type and shape, per frame. */
typedef struct gf_tensor_desc {
    uint32_t dtype;                   /* enum gf_dtype                        */
    uint32_t rank;                    /* 0..GF_TENSOR_RANK_MAX                */
    int64_t dims[GF_TENSOR_RANK_MAX]; /* outermost first; >= 1, or
                                         GF_DIM_VARIABLE; unused past rank    */
} gf_tensor_desc;

/* A frame's input, or its output: 1..GF_FRAME_TENSORS_MAX tensors. */
typedef struct gf_frame_desc {
    uint32_t count;
    gf_tensor_desc tensors[GF_FRAME_TENSORS_MAX];
} gf_frame_desc;

/* One frame of a launch_batch call: what launch() would be given for it. */
typedef struct gf_plugin_frame {
    const void *in_dev; /* its input on the device, aligned to 256 bytes      */
    uint64_t in_bytes;  /* a length output_bytes() accepted                   */
    void *out_dev;      /* where its output goes, aligned to 256 bytes        */
    uint64_t out_bytes; /* what output_bytes() said for in_bytes              */
} gf_plugin_frame;

typedef struct gf_plugin {
    uint32_t abi_version; /* GF_PLUGIN_ABI_VERSION: always the first member   */
    const char *name;     /* the kind's name: LIST's "plugin", STATS: [a-z0-9_]+ */
    const char *doc;      /* one sentence: what it computes                    */
    const gf_plugin_param *params;
    uint32_t param_count;

    /* Nonzero when the input is float32 (clients make up float data). */
    int input_f32;
    /* Nonzero when outputs are compared bit for bit with reference(); else
     * elementwise float32, |got - ref| <= abs_tolerance + rel_tolerance*|ref|. */
    int exact;
    float abs_tolerance, rel_tolerance;

    /* Required.  Validates `values` and builds the host state, or returns
     * NULL with one line in why[why_len] that names the key concerned
     * ("weights: /x.gfw: no such file").  No CUDA call. */
    void *(*create)(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len);
    /* Required.  Frees what create() made. */
    void (*destroy)(void *state);

    /* Required.  The output length for an input of `in_bytes`, or -1 with
     * the reason in why[why_len] ("length 10 is not a multiple of 4"). */
    int64_t (*output_bytes)(const void *state, uint64_t in_bytes, char *why, size_t why_len);
    /* Required.  The longest output of any input of at most max_in_bytes. */
    uint64_t (*max_output_bytes)(const void *state, uint64_t max_in_bytes);

    /* Optional (NULL: the CPU engine and --verify cannot run this plugin).
     * Computes `out` from `in` (lengths accepted by output_bytes), on any
     * thread, concurrently; allocates nothing. */
    void (*reference)(const void *state, const void *in, uint64_t in_bytes, void *out);

    /* Optional (NULL: the CUDA engine cannot run this plugin).  Builds the
     * device state on CUDA device `device` (already current) for launches
     * on up to `streams` streams at once; NULL with why[] on failure. */
    void *(*device_open)(const void *state, int device, uint32_t streams, char *why,
                         size_t why_len);
    /* With device_open.  Frees the device state; every launch has completed. */
    void (*device_close)(void *dev);
    /* With device_open.  Enqueues the computation of `in_bytes` at `in_dev`
     * into `out_dev` on `stream` (a cudaStream_t); see the rules above. */
    int (*launch)(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                  void *out_dev, void *stream);

    /* ---- version 2 --------------------------------------------------------- */

    /* Optional, with launch (NULL: gpuframed calls launch for each frame).
     * Enqueues frames[0..count) on `stream`, each as launch() would: the
     * frames of one submission that this stage runs, 1 to max_batch_frames
     * of them (a pipeline's own max_batch_frames is at most this, so a
     * submission never holds more), in the order they lie in the slot's
     * buffers, from one client or several.  Every
     * frame's input starts at the same offset from its buffer's start as
     * its output from theirs, in increasing order, each a multiple of 256
     * bytes, so frames of one length lie at one stride: one GEMM over the
     * rows of all of them is the point.  The rules for launch() hold.  A
     * nonzero return (a cudaError_t) fails every frame of the submission,
     * each with its own ERROR; the pipeline goes on serving. */
    int (*launch_batch)(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                        uint32_t count, void *stream);
    /* With launch_batch: the most frames one call takes, 1 to
     * GF_PLUGIN_BATCH_FRAMES_MAX (a plugin declaring another is refused at
     * load). */
    uint32_t max_batch_frames;

    /* ---- version 3 --------------------------------------------------------- */

    /* Optional.  Describes the frames of the stage create() made `state`
     * for: its input's tensors into *in and its output's into *out (both
     * zeroed by the caller), from the stage's parameters.  Returns 0, or -1
     * with one line in why[why_len]; either fails the stage's load, as does
     * a description gpuframed refuses (an unknown dtype, a rank or count
     * out of range, a variable dimension where none may be) or one whose
     * fixed lengths output_bytes() contradicts.  An input and output of
     * fixed lengths say the stage takes frames of that length only: clients
     * that do not load the plugin lay out frames and results by LIST's
     * description (gpuframe stream, the Python package), so a stage that
     * takes several lengths describes a variable dimension.  Called once,
     * right after create(), on the same thread.  NULL (and every plugin of version 1
     * or 2): the input is float32 [-1] when input_f32, else uint8 [-1]; the
     * output float32 [-1] when input_f32 or not exact, else uint8 [-1]. */
    int (*describe)(const void *state, gf_frame_desc *in, gf_frame_desc *out, char *why,
                    size_t why_len);
    /* GF_PLUGIN_NO_GRAPHS, or 0; other bits are refused at load. */
    uint32_t flags;
} gf_plugin;

/* What a plugin defines; GF_PLUGIN_EXPORT makes it visible in a library
 * built with -fvisibility=hidden. */
#define GF_PLUGIN_EXPORT __attribute__((visibility("default")))
GF_PLUGIN_EXPORT const gf_plugin *gf_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif

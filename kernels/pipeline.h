/* SPDX-License-Identifier: MIT */
/*
 * The pipeline registry: every kind of pipeline the daemon can run.
 *
 * A pipeline kind is a pure function from an input byte buffer to an output
 * byte buffer, with parameters.  Each kind has
 *   - a plain C reference in kernels/<kind>_ref.c, the definition of what the
 *     kind computes: the CPU engine runs it and clients verify against it,
 *   - an entry in kernels/registry.c: name, parameter table, input check and
 *     output size rule, comparison tolerance,
 *   - a CUDA launcher in kernels/<kind>.cu (only when built with CUDA), which
 *     this header does not name: the CUDA engine finds it with
 *     gf_kernel_launcher() (kernels/kernels.h).
 * A configured pipeline (gf_pipeline) is a kind plus parameter values plus the
 * name and id under which clients address it.
 *
 * All of this header is defined in the gfpipelines library, which has no CUDA
 * in it: clients link it to verify results.  The header is plain C (included
 * by .c and .cu files alike) and needs neither the CUDA headers nor cJSON.
 */
#ifndef GF_PIPELINE_H
#define GF_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

/* gf_tensor_desc, gf_frame_desc and enum gf_dtype: how a frame's bytes are
 * tensors, one description for built-in kinds and plugins alike. */
#include "gpuframe_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest pipeline name, including the terminating NUL. */
#define GF_PIPELINE_NAME_MAX 64
/* Where frames packed into one buffer start: a multiple of this, so that
 * every frame's data is aligned for any element type and vector access. */
#define GF_FRAME_ALIGN_BYTES 256u
/* `n` rounded up to a multiple of GF_FRAME_ALIGN_BYTES. */
static inline uint64_t gf_frame_align(uint64_t n) {
    return (n + GF_FRAME_ALIGN_BYTES - 1) / GF_FRAME_ALIGN_BYTES * GF_FRAME_ALIGN_BYTES;
}
/* Most stages one pipeline may chain (config/README.md, "stages"). */
#define GF_STAGES_MAX 8

/* A loaded plugin stage (kernels/plugin.c); opaque outside it. */
typedef struct gf_plugin_stage gf_plugin_stage;

/*
 * Parameter values of every kind, in one struct so that a configured pipeline
 * can hold them by value.  Each kind reads only its own fields.
 */
typedef struct gf_params {
    float a, b;      /* affine: y = a*x + b                                 */
    uint32_t iters;  /* sincos: repetitions of v = sin(v)*cos(v) + v        */
    uint32_t width;  /* normalize_u8, image: image width in pixels          */
    uint32_t height; /* normalize_u8, image: image height in pixels         */
    float mean[3];   /* normalize_u8, image: per-channel mean, [0,1] units  */
    float std[3];    /* normalize_u8, image: per-channel std deviation, > 0 */
    /* image (kernels/image_math.h has the enums; docs/stages.md the
     * arithmetic): */
    uint32_t format;     /* enum gf_image_format: the input's pixel format    */
    uint32_t matrix;     /* enum gf_yuv_matrix: BT.601 or BT.709 (YUV inputs)  */
    uint32_t range;      /* enum gf_yuv_range: limited or full (YUV inputs)    */
    uint32_t out_width;  /* output width; 0 with out_height 0: no resize      */
    uint32_t out_height; /* output height; 0 with out_width 0: no resize      */
    uint32_t fit;        /* enum gf_image_fit: stretch, crop or letterbox     */
    uint32_t antialias;  /* 1: the downscale filter widens with the ratio     */
    float pad_value;     /* letterbox fill, 0..255 units, before mean and std */
    uint32_t layout;     /* enum gf_image_layout: CHW planes or HWC           */
    uint32_t dtype;      /* enum gf_image_dtype: float32, float16 or uint8    */
    /* spectrogram (kernels/spectrogram_math.h, docs/stages.md): */
    uint32_t sample_format; /* enum gf_sample_format: int16 or float32 PCM     */
    uint32_t samples;       /* samples per frame (the one input length)       */
    uint32_t sample_rate;   /* Hz: the mel scale's frequencies                */
    uint32_t n_fft;         /* FFT length = window length                      */
    uint32_t hop;           /* samples between STFT columns                    */
    uint32_t center;        /* 1: reflect-pad n_fft/2 each side (torch.stft)  */
    uint32_t power;         /* 1 magnitude, 2 power                            */
    uint32_t n_mels;        /* mel bands; 0: none (frequency bins out)         */
    float f_min, f_max;     /* mel filterbank's range in Hz; f_max 0: rate/2  */
    uint32_t mel_scale;     /* enum gf_mel_scale: HTK or Slaney                */
    uint32_t mel_norm;      /* enum gf_mel_norm: none or Slaney's area norm    */
    uint32_t log;           /* enum gf_spec_log: none, ln or dB                */
    float eps;              /* the log's floor: log(max(x, eps))               */
    /* kind "plugin": the loaded shared object, its parameter values and
     * state (one reference per gf_stage that names it: gf_stage_retain). */
    gf_plugin_stage *plugin;
} gf_params;

/* How a parameter is typed in the config file. */
enum gf_param_type {
    GF_PARAM_F32,   /* one float:  "a": 2.0                  */
    GF_PARAM_U32,   /* one integer: "iters": 16               */
    GF_PARAM_F32x3, /* three floats: "mean": [0.5, 0.5, 0.5] */
    GF_PARAM_ENUM,  /* one of named choices: "format": "nv12", stored as
                       the choice's index (uint32_t)                   */
    GF_PARAM_BOOL,  /* true or false: "center": true, stored as 1 or 0
                       (uint32_t)                                      */
};

/* One parameter of a kind: its config key, type, where it lives in gf_params,
 * its default and the closed range every value (each of three) must lie in. */
typedef struct gf_param_desc {
    const char *key;
    enum gf_param_type type;
    size_t offset;        /* offsetof(gf_params, field)                 */
    double default_value; /* used when the key is absent (all 3 for x3) */
    double min, max;      /* inclusive bounds                           */
    const char *doc;      /* one line for `gpuframe list` and the docs  */
    /* GF_PARAM_ENUM: the choices' names, NULL-terminated; default_value,
     * min and max are indices into it.  NULL for every other type. */
    const char *const *choices;
} gf_param_desc;

/* The name of choice `index` of an enum parameter, or "?" out of range. */
const char *gf_param_choice(const gf_param_desc *d, uint32_t index);

/* A kind of pipeline.  Every function pointer is always set. */
typedef struct gf_pipeline_kind {
    const char *name; /* "echo", "affine", "sincos", "normalize_u8" */
    const char *doc;  /* one sentence: what it computes             */
    const gf_param_desc *params;
    size_t param_count;

    /* Nonzero when the input is an array of float32 (its length a multiple
     * of 4); zero when it is bytes.  Tells clients what data to make up. */
    int input_f32;

    /* Nonzero when outputs are compared bit for bit; else elementwise
     * |got - ref| <= abs_tolerance + rel_tolerance * |ref| on float32. */
    int exact;
    float abs_tolerance, rel_tolerance;

    /* Nonzero when byte i of the output depends on the input at i alone (in
     * float32 elements for input_f32) and the output is as long as the
     * input: frames laid end to end, at offsets aligned to
     * GF_FRAME_ALIGN_BYTES, then run as one input, each come out exactly as
     * if run alone.  The CUDA engine runs a batch of such frames as one
     * launch per stage. */
    int elementwise;

    /* Nonzero when the kind's CUDA side is a built-in plugin
     * (gf_kernel_device_api): device state made at load (cuFFT plans) and
     * batches of frames at their own offsets in one launch_batch.  Each
     * stage of it then holds a built-in plugin stage in params.plugin
     * (gf_pipeline_open_plugins makes it), which the CUDA engine opens,
     * launches and closes exactly as it does a plugin's. */
    int device_api;

    /* Optional (NULL: input_f32 says): whether the input is float32 under
     * these parameters (spectrogram's sample_format). */
    int (*input_f32_for)(const gf_params *p);

    /*
     * Checks whether an input of `in_bytes` can be processed with `p`.
     * Returns the output size in bytes, or -1 and writes a one-line reason
     * ("length 10 is not a multiple of 4 (float32)") into why[why_len].
     */
    int64_t (*output_bytes)(const gf_params *p, uint64_t in_bytes, char *why, size_t why_len);

    /* The largest output any input of at most `max_in_bytes` bytes can
     * produce: what every slot's output buffer must hold. */
    uint64_t (*max_output_bytes)(const gf_params *p, uint64_t max_in_bytes);

    /* The smallest non-empty input it accepts: what the engines' warm-up
     * runs, so the kernel's first launch is paid before serving. */
    uint64_t (*warmup_input_bytes)(const gf_params *p);

    /* Checks parameter values beyond their ranges (e.g. width*height*3 must
     * fit a frame).  Returns 0, or -1 with a reason in why[why_len]. */
    int (*check_params)(const gf_params *p, uint64_t max_frame_bytes, char *why, size_t why_len);

    /* The reference: computes `out` from `in`.  `in_bytes` has passed
     * output_bytes(); `out` holds at least that many bytes.  Thread-safe. */
    void (*reference)(const gf_params *p, const void *in, size_t in_bytes, void *out);

    /* Describes a frame's input and output under `p` as tensors (LIST's
     * "inputs" and "outputs"; gpuframe_plugin.h, gf_frame_desc): fills
     * both, each valid for gf_frame_desc_check.  A dimension the frame's
     * length decides is GF_DIM_VARIABLE (echo: uint8 [-1]; normalize_u8:
     * uint8 [height, width, 3] to float32 [3, height, width]). */
    void (*describe)(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out);
} gf_pipeline_kind;

/* One stage of a pipeline: a kind and its parameters. */
typedef struct gf_stage {
    const gf_pipeline_kind *kind;
    gf_params params;
} gf_stage;

/*
 * A configured pipeline, as clients see it through LIST: one stage, or up to
 * GF_STAGES_MAX run back to back on one slot (stage k's output is stage
 * k+1's input; on the GPU intermediate results stay on the device).
 */
typedef struct gf_pipeline {
    uint32_t id;                     /* what FRAME headers carry; its index */
    char name[GF_PIPELINE_NAME_MAX]; /* unique among configured pipelines   */
    uint32_t stage_count;            /* 1..GF_STAGES_MAX                    */
    gf_stage stages[GF_STAGES_MAX];
    /* The daemon's, from its keys of the same names (config/README.md): */
    uint32_t devices;            /* devices it may run on, bit d for device d;
                                    0 for every one                          */
    uint32_t max_batch_frames;   /* frames one submission carries at most     */
    uint32_t max_batch_delay_us; /* how long a batch may wait for more frames */
} gf_pipeline;

/* The kind called `name`, or NULL.  Static storage; never freed. */
const gf_pipeline_kind *gf_pipeline_kind_find(const char *name);

/* All kinds, in a static array of *count entries. */
const gf_pipeline_kind *gf_pipeline_kinds(size_t *count);

/* Fills `p` with every parameter's default for `kind`. */
void gf_params_defaults(const gf_pipeline_kind *kind, gf_params *p);

/*
 * Compares `got` with `ref` (`bytes` each) under `kind`'s rule.  Returns 0
 * when they match, else -1 and writes the first mismatch (index, both values)
 * into why[why_len].
 */
int gf_pipeline_compare(const gf_pipeline_kind *kind, const void *got, const void *ref,
                        size_t bytes, char *why, size_t why_len);

/* ---- whole pipelines: their stages' rules composed ---------------------------- */

/* The output length of `p` for an input of `in_bytes` through every stage,
 * or -1 with the first refusal in why[] ("stage 1 (mlp): length ..." when
 * there are several stages). */
int64_t gf_pipeline_output_bytes(const gf_pipeline *p, uint64_t in_bytes, char *why,
                                 size_t why_len);

/* The same, also writing each stage's output length into lengths[k] (the
 * last is the result's): what runs the frame uses, so that no stage's rule
 * is asked twice or off the caller's thread. */
int64_t gf_pipeline_stage_lengths(const gf_pipeline *p, uint64_t in_bytes,
                                  uint64_t lengths[GF_STAGES_MAX], char *why, size_t why_len);

/* The longest output of `p` for inputs of at most max_in_bytes. */
uint64_t gf_pipeline_max_output_bytes(const gf_pipeline *p, uint64_t max_in_bytes);

/* The longest intermediate result (output of a stage but the last) for
 * inputs of at most max_in_bytes: what each of a slot's two scratch
 * buffers must hold.  0 for one stage. */
uint64_t gf_pipeline_max_scratch_bytes(const gf_pipeline *p, uint64_t max_in_bytes);

/* Nonzero when stage 0 takes float32 input. */
int gf_pipeline_input_f32(const gf_pipeline *p);

/* Nonzero when every stage of `p` is elementwise (gf_pipeline_kind). */
int gf_pipeline_elementwise(const gf_pipeline *p);

/* Nonzero when every stage can run on the CPU (has a reference). */
int gf_pipeline_has_reference(const gf_pipeline *p);

/*
 * Runs every stage's reference: `in` (in_bytes) to `out`, with the stage
 * output lengths gf_pipeline_stage_lengths gave for in_bytes, intermediate
 * results alternating between scratch[0] and scratch[1] (each at least the
 * largest intermediate length; unused, and may be NULL, for one stage).
 * When `stage_end_ns` is not NULL it gets the CLOCK_MONOTONIC time at which
 * each stage ended.  Calls nothing of a stage but its reference: safe on any
 * thread; allocates nothing.
 */
void gf_pipeline_reference(const gf_pipeline *p, const void *in, uint64_t in_bytes,
                           const uint64_t lengths[GF_STAGES_MAX], void *out, void *const scratch[2],
                           uint64_t *stage_end_ns);

/* Compares a result of `p`: bit for bit when every stage is exact, else
 * under the widest tolerance of its inexact stages (the float stages of
 * gpuframed's chains are the last ones; an exact stage before them feeds
 * both sides the same bytes). */
int gf_pipeline_compare_result(const gf_pipeline *p, const void *got, const void *ref, size_t bytes,
                               char *why, size_t why_len);

/* ---- frames as tensors (kernels/frame_desc.c) ------------------------------------ */

/* A dtype's LIST name ("float32"), or NULL for a value enum gf_dtype lacks. */
const char *gf_dtype_name(uint32_t dtype);
/* The dtype called `name`, or 0 when there is none. */
uint32_t gf_dtype_from_name(const char *name);
/* Bytes of one element of `dtype`; 0 for an unknown one. */
uint32_t gf_dtype_bytes(uint32_t dtype);

/* Checks what a description may hold (gpuframe_plugin.h): 1..8 tensors of
 * known dtypes, ranks 0..8, dimensions >= 1 or GF_DIM_VARIABLE, at most one
 * variable dimension and only in a frame of one tensor, and a fixed length
 * below 2^63.  Returns 0, or -1 with the first problem in why[why_len]
 * ("tensor 1: dimension 0 is 0"). */
int gf_frame_desc_check(const gf_frame_desc *d, char *why, size_t why_len);

/* The bytes of a frame `d` describes, or 0 when a dimension is variable. */
uint64_t gf_frame_desc_bytes(const gf_frame_desc *d);

/* Gives d's variable dimension (if any) the value that makes the frame
 * `bytes` long.  Returns 0, or -1 (d unchanged) when no value does. */
int gf_frame_desc_resolve(gf_frame_desc *d, uint64_t bytes);

/* "uint8[224,224,3]", tensors joined by ";", a variable dimension as "n";
 * written into buf[len], of which GF_FRAME_DESC_TEXT_BYTES hold any. */
#define GF_FRAME_DESC_TEXT_BYTES 1536
const char *gf_frame_desc_text(const gf_frame_desc *d, char *buf, size_t len);

/* Nonzero when a and b describe the same tensors. */
int gf_frame_desc_equal(const gf_frame_desc *a, const gf_frame_desc *b);

/* Stage k's input and output as its kind describes them, the variable
 * dimensions resolved where the pipeline's input has a fixed length (then
 * every stage's lengths are fixed: gf_pipeline_stage_lengths). */
void gf_stage_describe(const gf_pipeline *p, uint32_t k, gf_frame_desc *in, gf_frame_desc *out);

/* The pipeline's input (stage 0's) and output (the last stage's), resolved
 * as gf_stage_describe resolves them: what LIST publishes. */
void gf_pipeline_describe(const gf_pipeline *p, gf_frame_desc *in, gf_frame_desc *out);

/* "echo", or "normalize_u8+mlp" for a chain: written into buf[len]. */
const char *gf_pipeline_kinds_text(const gf_pipeline *p, char *buf, size_t len);

/* ---- stages that hold plugins --------------------------------------------------- */

/* Takes one more reference on each plugin stage of `p` (a copy of it now
 * exists); gf_pipeline_release drops them.  No-ops for built-in kinds.  Not
 * thread-safe: the daemon calls both on its loop thread only. */
void gf_pipeline_retain(const gf_pipeline *p);
void gf_pipeline_release(const gf_pipeline *p);

/* gf_pipeline_release on each of `count` pipelines, then free(pipelines). */
void gf_pipelines_free(gf_pipeline *pipelines, size_t count);

#ifdef __cplusplus
}
#endif

#endif

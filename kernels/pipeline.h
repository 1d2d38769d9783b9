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

#ifdef __cplusplus
extern "C" {
#endif

/* Longest pipeline name, including the terminating NUL. */
#define GF_PIPELINE_NAME_MAX 64

/*
 * Parameter values of every kind, in one struct so that a configured pipeline
 * can hold them by value.  Each kind reads only its own fields.
 */
typedef struct gf_params {
    float a, b;      /* affine: y = a*x + b                                 */
    uint32_t iters;  /* sincos: repetitions of v = sin(v)*cos(v) + v        */
    uint32_t width;  /* normalize_u8: image width in pixels                 */
    uint32_t height; /* normalize_u8: image height in pixels                */
    float mean[3];   /* normalize_u8: per-channel mean, in [0,1] units      */
    float std[3];    /* normalize_u8: per-channel std deviation, > 0        */
} gf_params;

/* How a parameter is typed in the config file. */
enum gf_param_type {
    GF_PARAM_F32,   /* one float:  "a": 2.0                  */
    GF_PARAM_U32,   /* one integer: "iters": 16               */
    GF_PARAM_F32x3, /* three floats: "mean": [0.5, 0.5, 0.5] */
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
} gf_param_desc;

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
} gf_pipeline_kind;

/* A configured pipeline, as clients see it through LIST. */
typedef struct gf_pipeline {
    uint32_t id;                     /* what FRAME headers carry; its index */
    char name[GF_PIPELINE_NAME_MAX]; /* unique among configured pipelines   */
    const gf_pipeline_kind *kind;
    gf_params params;
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

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The plugin "torch" as gf_torch.so has it: its gf_plugin table, parameters,
 * length rules and the frames' description, and device functions that
 * forward to gf_torch_aoti.so, the companion that holds PyTorch (torch.h).
 * create() reads no more of the package than that it is a file that opens
 * and starts as a zip archive (a .pt2 is one): nothing here loads PyTorch or
 * touches CUDA, so --check-config, the CPU engine's refusal and a client's
 * `gpuframe list` cost nothing; the package is loaded, and refused with
 * PyTorch's reason, by device_open.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gpuframe/plugin.h>

#include "../companion.h"
#include "torch.h"

/* Indices into torch_params, the order create() receives values in. */
enum { PARAM_PACKAGE, PARAM_INPUTS, PARAM_OUTPUTS, PARAM_MAX_BATCH, PARAM_CUDA_GRAPHS };

/* The longest "inputs" or "outputs" text. */
#define TENSORS_TEXT_MAX 255
/* A zip archive's local file header starts with these four bytes. */
static const unsigned char zip_magic[4] = {'P', 'K', 3, 4};

static const gf_plugin_param torch_params[] = {
    [PARAM_PACKAGE] = {.key = "package",
                       .type = GF_PLUGIN_STRING,
                       .required = 1,
                       .min = 1,
                       .max = PATH_MAX - 1,
                       .doc = "the model package (.pt2) from torch._inductor."
                              "aoti_compile_and_package or gpuframe-export; relative to the "
                              "configuration file's directory"},
    [PARAM_INPUTS] = {.key = "inputs",
                      .type = GF_PLUGIN_STRING,
                      .required = 1,
                      .min = 1,
                      .max = TENSORS_TEXT_MAX,
                      .doc = "one frame's input tensors, without the batch dimension: "
                             "dtype[d0,d1,...] (uint8, int32, int64, float16, bfloat16, "
                             "float32), several joined by ';'"},
    [PARAM_OUTPUTS] = {.key = "outputs",
                       .type = GF_PLUGIN_STRING,
                       .required = 1,
                       .min = 1,
                       .max = TENSORS_TEXT_MAX,
                       .doc = "one frame's output tensors, written as inputs"},
    [PARAM_MAX_BATCH] = {.key = "max_batch",
                         .type = GF_PLUGIN_INTEGER,
                         .default_number = 0,
                         .min = 0,
                         .max = GF_TORCH_BATCH_MAX,
                         .doc = "the most frames one call of the model takes; 0: the package's "
                                "dynamic batch dimension's, found at load (1 without one: frames "
                                "then run one at a time)"},
    [PARAM_CUDA_GRAPHS] = {.key = "cuda_graphs",
                           .type = GF_PLUGIN_INTEGER,
                           .default_number = 1,
                           .min = 0,
                           .max = 1,
                           .doc = "1: the model's calls are captured as CUDA graphs at load, every "
                                  "batch size on every stream, and replayed (one launch a call, "
                                  "no host work in PyTorch); 0, or a package whose calls cannot "
                                  "be captured: each call runs the package"},
};

/* ---- tensors as text -------------------------------------------------------------- */

static const struct {
    const char *name;
    uint32_t dtype, bytes;
} dtypes[] = {
    {"uint8", GF_DTYPE_UINT8, 1},       {"int32", GF_DTYPE_INT32, 4},
    {"int64", GF_DTYPE_INT64, 8},       {"float16", GF_DTYPE_FLOAT16, 2},
    {"bfloat16", GF_DTYPE_BFLOAT16, 2}, {"float32", GF_DTYPE_FLOAT32, 4},
};
#define DTYPE_COUNT (sizeof dtypes / sizeof dtypes[0])

static uint32_t dtype_bytes(uint32_t dtype) {
    for (size_t i = 0; i < DTYPE_COUNT; i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].bytes;
    return 0;
}

static const char *skip_spaces(const char *p) {
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* One "dtype[d0,d1,...]" at *pp into *t; advances *pp past it.  Tensor k of
 * `text`, for messages. */
static int parse_tensor(const char **pp, const char *text, uint32_t k, gf_tensor_desc *t, char *why,
                        size_t why_len) {
    const char *p = skip_spaces(*pp), *name = p;
    while (isalnum((unsigned char)*p))
        p++;
    t->dtype = 0;
    for (size_t i = 0; i < DTYPE_COUNT; i++)
        if (strlen(dtypes[i].name) == (size_t)(p - name) &&
            strncmp(dtypes[i].name, name, (size_t)(p - name)) == 0)
            t->dtype = dtypes[i].dtype;
    if (t->dtype == 0) {
        snprintf(why, why_len,
                 "\"%s\": tensor %u: expected a dtype (uint8, int32, int64, float16, bfloat16, "
                 "float32) at \"%.*s\"",
                 text, k, (int)(p - name) + 1, name);
        return -1;
    }
    p = skip_spaces(p);
    if (*p != '[') {
        snprintf(why, why_len, "\"%s\": tensor %u: expected '[' after the dtype", text, k);
        return -1;
    }
    p = skip_spaces(p + 1);
    t->rank = 0;
    while (*p != ']') {
        char *end;
        if (t->rank == GF_TENSOR_RANK_MAX) {
            snprintf(why, why_len, "\"%s\": tensor %u: more than %d dimensions", text, k,
                     GF_TENSOR_RANK_MAX);
            return -1;
        }
        errno = 0;
        long long d = isdigit((unsigned char)*p) ? strtoll(p, &end, 10) : 0;
        if (!isdigit((unsigned char)*p) || errno != 0 || d < 1 || d > (1ll << 40)) {
            snprintf(why, why_len,
                     "\"%s\": tensor %u: dimension %u is not a whole number from 1 to 2^40", text,
                     k, t->rank);
            return -1;
        }
        t->dims[t->rank++] = d;
        p = skip_spaces(end);
        if (*p == ',')
            p = skip_spaces(p + 1);
        else if (*p != ']') {
            snprintf(why, why_len, "\"%s\": tensor %u: expected ',' or ']' after dimension %u",
                     text, k, t->rank - 1);
            return -1;
        }
    }
    *pp = skip_spaces(p + 1);
    return 0;
}

int gf__torch_parse_tensors(const char *text, gf_frame_desc *d, char *why, size_t why_len) {
    const char *p = text;
    memset(d, 0, sizeof *d);
    for (;;) {
        if (d->count == GF_FRAME_TENSORS_MAX) {
            snprintf(why, why_len, "\"%s\": more than %d tensors", text, GF_FRAME_TENSORS_MAX);
            return -1;
        }
        if (parse_tensor(&p, text, d->count, &d->tensors[d->count], why, why_len) < 0)
            return -1;
        d->count++;
        if (*p == '\0')
            return 0;
        if (*p != ';') {
            snprintf(why, why_len, "\"%s\": expected ';' or the end after tensor %u", text,
                     d->count - 1);
            return -1;
        }
        p++;
    }
}

/* d as the parameters write it, without spaces ("float16[2,3];int64[]"):
 * what messages show and gpuframe-export's metadata is compared with. */
static void tensors_text(const gf_frame_desc *d, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < d->count && o < len; k++) {
        const char *name = "?";
        for (size_t i = 0; i < DTYPE_COUNT; i++)
            if (dtypes[i].dtype == d->tensors[k].dtype)
                name = dtypes[i].name;
        o += (size_t)snprintf(buf + o, len - o, "%s%s[", k ? ";" : "", name);
        for (uint32_t i = 0; i < d->tensors[k].rank && o < len; i++)
            o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "",
                                  (long long)d->tensors[k].dims[i]);
        if (o < len)
            o += (size_t)snprintf(buf + o, len - o, "]");
    }
}

/* Fills offset[] and bytes[] of d's tensors, laid end to end, and returns
 * the frame's length; 0 when it passes 2^62 (no frame is that long). */
static uint64_t layout(const gf_frame_desc *d, uint64_t *offset, uint64_t *bytes) {
    const uint64_t limit = 1ull << 62;
    uint64_t total = 0;
    for (uint32_t k = 0; k < d->count; k++) {
        uint64_t n = dtype_bytes(d->tensors[k].dtype);
        for (uint32_t i = 0; i < d->tensors[k].rank; i++) {
            if ((uint64_t)d->tensors[k].dims[i] > limit / n)
                return 0;
            n *= (uint64_t)d->tensors[k].dims[i];
        }
        offset[k] = total;
        bytes[k] = n;
        total += n;
        if (total > limit)
            return 0;
    }
    return total;
}

/* ---- the plugin -------------------------------------------------------------------- */

/* Reads one of the "inputs"/"outputs" values into d, its layout and text. */
static int read_tensors(const char *key, const char *text, uint64_t max_bytes, gf_frame_desc *d,
                        uint64_t *offset, uint64_t *bytes, uint64_t *total, char *copy,
                        size_t copy_len, char *why, size_t why_len) {
    char inner[384];
    if (gf__torch_parse_tensors(text, d, inner, sizeof inner) < 0) {
        snprintf(why, why_len, "%s: %s", key, inner);
        return -1;
    }
    *total = layout(d, offset, bytes);
    if (*total == 0 || *total > max_bytes) {
        snprintf(why, why_len,
                 "%s: \"%s\" makes frames of %llu bytes, more than max_frame_bytes %llu", key, text,
                 (unsigned long long)*total, (unsigned long long)max_bytes);
        return -1;
    }
    tensors_text(d, copy, copy_len);
    return 0;
}

static void *torch_create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                          size_t why_len) {
    const char *package = values[PARAM_PACKAGE].string;
    gf__torch_model *m = calloc(1, sizeof *m);
    int n;
    if (m == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    if (package[0] == '/')
        n = snprintf(m->package, sizeof m->package, "%s", package);
    else
        n = snprintf(m->package, sizeof m->package, "%s/%s", env->config_dir, package);
    if (n < 0 || (size_t)n >= sizeof m->package) {
        snprintf(why, why_len, "package: %s: the resolved path is longer than %d bytes", package,
                 PATH_MAX - 1);
        goto fail;
    }
    /* The frames: checked here, against the model at device_open. */
    if (read_tensors("inputs", values[PARAM_INPUTS].string, env->max_input_bytes, &m->in,
                     m->in_offset, m->in_tensor_bytes, &m->in_bytes, m->in_text, sizeof m->in_text,
                     why, why_len) < 0 ||
        read_tensors("outputs", values[PARAM_OUTPUTS].string, UINT64_MAX, &m->out, m->out_offset,
                     m->out_tensor_bytes, &m->out_bytes, m->out_text, sizeof m->out_text, why,
                     why_len) < 0)
        goto fail;
    m->max_batch = (uint32_t)values[PARAM_MAX_BATCH].number;
    m->cuda_graphs = (uint32_t)values[PARAM_CUDA_GRAPHS].number;

    /* The file: there, a regular file (a FIFO would block the open), and a
     * zip archive.  What is in it is PyTorch's to judge, at device_open. */
    struct stat sb;
    unsigned char head[sizeof zip_magic];
    if (stat(m->package, &sb) != 0) {
        snprintf(why, why_len, "package: %s: %s", m->package, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, why_len, "package: %s: not a regular file", m->package);
        goto fail;
    }
    FILE *f = fopen(m->package, "rb");
    if (f == NULL) {
        snprintf(why, why_len, "package: %s: %s", m->package, strerror(errno));
        goto fail;
    }
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got != sizeof head || memcmp(head, zip_magic, sizeof head) != 0) {
        snprintf(why, why_len,
                 "package: %s: not a PyTorch package (a .pt2 is a zip archive; make one with "
                 "gpuframe-export or torch._inductor.aoti_compile_and_package)",
                 m->package);
        goto fail;
    }
    return m;
fail:
    free(m);
    return NULL;
}

static void torch_destroy(void *state) {
    free(state);
}

/* Exactly one frame's worth of the inputs' tensors. */
static int64_t torch_output_bytes(const void *state, uint64_t in_bytes, char *why, size_t why_len) {
    const gf__torch_model *m = state;
    if (in_bytes != m->in_bytes) {
        snprintf(why, why_len, "length %llu is not the %llu bytes of a frame (%s)",
                 (unsigned long long)in_bytes, (unsigned long long)m->in_bytes, m->in_text);
        return -1;
    }
    return (int64_t)m->out_bytes;
}

static uint64_t torch_max_output_bytes(const void *state, uint64_t max_in_bytes) {
    const gf__torch_model *m = state;
    return max_in_bytes >= m->in_bytes ? m->out_bytes : 0;
}

/* The parameters' tensors, as LIST publishes them. */
static int torch_describe(const void *state, gf_frame_desc *in, gf_frame_desc *out, char *why,
                          size_t why_len) {
    const gf__torch_model *m = state;
    (void)why, (void)why_len;
    *in = m->in;
    *out = m->out;
    return 0;
}

/* ---- the device side: gf_torch_aoti.so ------------------------------------------------ */

/* The companion's functions: NULL until a device_open loads it, then the
 * same for the life of the process.  Written once, under companion_lock;
 * device_close and the launches read it after the device_open that returned
 * their `dev`, and so after the write. */
static const gf__torch_aoti_api *companion;
static pthread_mutex_t companion_lock = PTHREAD_MUTEX_INITIALIZER;

/* gf_torch_aoti.so, found from the address of this description. */
static const gf__companion aoti = {.anchor = &aoti,
                                   .plugin_so = "gf_torch.so",
                                   .file = GF_TORCH_AOTI_SO,
                                   .entry_symbol = GF_TORCH_AOTI_ENTRY_SYMBOL,
                                   .what = "gf_torch.so's PyTorch side",
                                   .version = GF_TORCH_AOTI_VERSION};

static void *torch_device_open(const void *state, int device, uint32_t streams, char *why,
                               size_t why_len) {
    pthread_mutex_lock(&companion_lock);
    if (companion == NULL)
        companion = gf__companion_open(&aoti, why, why_len);
    const gf__torch_aoti_api *api = companion;
    pthread_mutex_unlock(&companion_lock);
    return api ? api->device_open(state, device, streams, why, why_len) : NULL;
}

static void torch_device_close(void *dev) {
    companion->device_close(dev);
}

static int torch_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                        void *out_dev, void *stream) {
    return companion->launch(dev, stream_index, in_dev, in_bytes, out_dev, stream);
}

static int torch_launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                              uint32_t count, void *stream) {
    return companion->launch_batch(dev, stream_index, frames, count, stream);
}

/*
 * AOTInductor checks a call's inputs (dtype, every dimension within the
 * range the package was exported for, strides) only where this variable is
 * set, and otherwise runs whatever it is given: a wrong shape would read
 * and write past the slot's buffers, and device_open could not tell which
 * batches a package takes.  The checks cost a few comparisons a call.  Each
 * model object reads the variable once, at its first call; it is set here,
 * when gpuframed loads this plugin (at configuration load, before any
 * package is loaded, on one thread at start-up).
 */
__attribute__((constructor)) static void aoti_check_inputs(void) {
    /* Not again where it is set (a reload loading this plugin while
     * PyTorch's threads run): setenv may move the environment under them. */
    const char *v = getenv("AOTI_RUNTIME_CHECK_INPUTS");
    if (v == NULL || strcmp(v, "1") != 0)
        setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", 1);
}

static const gf_plugin torch_plugin = {
    .abi_version = GF_PLUGIN_ABI_VERSION,
    .name = "torch",
    .doc = "a PyTorch model compiled by AOTInductor (.pt2), a submission's frames as one batch",
    .params = torch_params,
    .param_count = sizeof torch_params / sizeof torch_params[0],
    /* No reference: the model runs on the GPU only (no CPU engine, no
     * --verify); results are compared with PyTorch by the tests. */
    .exact = 0,
    .create = torch_create,
    .destroy = torch_destroy,
    .output_bytes = torch_output_bytes,
    .max_output_bytes = torch_max_output_bytes,
    .device_open = torch_device_open,
    .device_close = torch_device_close,
    .launch = torch_launch,
    .launch_batch = torch_launch_batch,
    .max_batch_frames = GF_TORCH_BATCH_MAX,
    .describe = torch_describe,
    /* PyTorch's caching allocator hands out memory during a launch, which
     * a graph gpuframed captured would replay into after it was freed. */
    .flags = GF_PLUGIN_NO_GRAPHS,
};

GF_PLUGIN_EXPORT const gf_plugin *gf_plugin_entry(void) {
    return &torch_plugin;
}

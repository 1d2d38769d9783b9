/* SPDX-License-Identifier: MIT */
/*
 * Plugin stages: loading, the ABI check, the adapter that makes a plugin a
 * gf_pipeline_kind, and the reference count that unloads it after its last
 * frame.  Contract in plugin.h.
 */
#define _GNU_SOURCE
#include "plugin.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Devices a stage may be opened on: the daemon's GF_DEVICES_MAX. */
#define GF_PLUGIN_DEVICES_MAX 16

struct gf_plugin_stage {
    atomic_uint refs; /* frames of several shards' threads hold the stage */
    uint64_t serial;  /* gf_plugin_stage_serial                            */
    char *path, *config_dir, *params_json;
    char *listed_name; /* a LIST reply's "plugin", for an unloaded stage   */
    void *dl;
    const gf_plugin *api;
    gf_plugin_value values[GF_PLUGIN_PARAMS_MAX];
    char *strings[GF_PLUGIN_PARAMS_MAX];      /* the values' own copies           */
    void *state;                              /* create()'s                        */
    void *dev[GF_PLUGIN_DEVICES_MAX];         /* device_open()'s, per CUDA device;
                                                 set under dev_lock, before any
                                                 launch on that device            */
    char *dev_failure[GF_PLUGIN_DEVICES_MAX]; /* device_open()'s reason, once it
                                            failed there (under dev_lock)   */
    gf_pipeline_kind kind;                    /* the adapter; kind.params unused   */
    /* Its frames as tensors: describe()'s (or the fallback for a plugin
     * without it) once created, a LIST reply's for an unloaded stage;
     * count 0 until either. */
    gf_frame_desc in_desc, out_desc;
    int builtin; /* gf_plugin_stage_new_builtin's: state is a gf_params
                    copy, api the kind's device API once opened (set under
                    dev_lock, before any launch)                           */
};

/* The stage of an adapter kind's parameters. */
static const gf_plugin_stage *stage_of(const gf_params *p) {
    return p->plugin;
}

/* An unloaded stage's (a client's, from LIST) frames, when LIST describes
 * both with fixed lengths: its one input length (the output's is
 * out_desc's).  The daemon refused at load a plugin whose output_bytes()
 * contradicts what it describes, so these are the plugin's own lengths.
 * 0: not known so, or the stage is loaded (or NULL). */
static uint64_t listed_in_bytes(const gf_plugin_stage *st) {
    if (st == NULL || st->state != NULL || gf_frame_desc_bytes(&st->out_desc) == 0)
        return 0;
    return gf_frame_desc_bytes(&st->in_desc);
}

static int64_t adapter_output_bytes(const gf_params *p, uint64_t in_bytes, char *why,
                                    size_t why_len) {
    const gf_plugin_stage *st = stage_of(p);
    uint64_t listed = listed_in_bytes(st);
    if (listed != 0) {
        if (in_bytes == listed)
            return (int64_t)gf_frame_desc_bytes(&st->out_desc);
        gf_errorf(why, why_len, "length %llu is not the %llu bytes of plugin %s's input",
                  (unsigned long long)in_bytes, (unsigned long long)listed, st->kind.name);
        return -1;
    }
    if (st == NULL || st->state == NULL) {
        gf_errorf(why, why_len, "plugin %s is not loaded", st ? st->path : "?");
        return -1;
    }
    return st->api->output_bytes(st->state, in_bytes, why, why_len);
}

static uint64_t adapter_max_output_bytes(const gf_params *p, uint64_t max_in_bytes) {
    const gf_plugin_stage *st = stage_of(p);
    uint64_t listed = listed_in_bytes(st);
    if (listed != 0)
        return max_in_bytes >= listed ? gf_frame_desc_bytes(&st->out_desc) : 0;
    return st && st->state ? st->api->max_output_bytes(st->state, max_in_bytes) : 0;
}

/* Plugins name no smallest input: a chain that starts with one is not
 * probed at load (config/README.md, "stages"). */
static uint64_t adapter_warmup_input_bytes(const gf_params *p) {
    (void)p;
    return 0;
}

/* The plugin checked its values in create(). */
static int adapter_check_params(const gf_params *p, uint64_t max_frame_bytes, char *why,
                                size_t why_len) {
    (void)p;
    (void)max_frame_bytes;
    (void)why;
    (void)why_len;
    return 0;
}

/* Only called where gf_pipeline_has_reference() said yes. */
static void adapter_reference(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    const gf_plugin_stage *st = stage_of(p);
    st->api->reference(st->state, in, in_bytes, out);
}

/* A frame of one tensor of `dtype`, any length: `dtype` [-1]. */
static gf_frame_desc any_length(uint32_t dtype) {
    return (gf_frame_desc){.count = 1,
                           .tensors = {{.dtype = dtype, .rank = 1, .dims = {GF_DIM_VARIABLE}}}};
}

/* A created stage's, or a listed one's; bytes (uint8 [-1]) both ways for a
 * stage that is neither: nothing is known of it. */
static void adapter_describe(const gf_params *p, gf_frame_desc *in, gf_frame_desc *out) {
    const gf_plugin_stage *st = stage_of(p);
    if (st == NULL || st->in_desc.count == 0) {
        *in = *out = any_length(GF_DTYPE_UINT8);
        return;
    }
    *in = st->in_desc;
    *out = st->out_desc;
}

static const gf_pipeline_kind unloaded_kind = {
    .name = "plugin",
    .doc = "A pipeline kind from a shared object (not loaded here).",
    .output_bytes = adapter_output_bytes,
    .max_output_bytes = adapter_max_output_bytes,
    .warmup_input_bytes = adapter_warmup_input_bytes,
    .check_params = adapter_check_params,
    .reference = adapter_reference,
    .describe = adapter_describe,
};

int gf_kind_is_plugin(const gf_pipeline_kind *kind) {
    return kind != NULL && kind->output_bytes == adapter_output_bytes;
}

/* gf_plugin_stage_serial's next value.  Atomic: stages are made at start-up
 * and on the reload thread. */
static uint64_t next_serial(void) {
    static atomic_uint_fast64_t serials;
    return atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
}

/* `path` made absolute against `dir`, malloc'd; NULL when out of memory. */
static char *absolute(const char *path, const char *dir) {
    char *out;
    if (path[0] == '/')
        return strdup(path);
    size_t n = strlen(dir) + 1 + strlen(path) + 1;
    out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, path);
    return out;
}

gf_plugin_stage *gf_plugin_stage_new(const char *path, const char *config_dir,
                                     const char *params_json) {
    gf_plugin_stage *st = calloc(1, sizeof *st);
    char cwd[PATH_MAX];
    if (st == NULL)
        return NULL;
    /* A configuration given as text (the built-in one, tests) has no
     * directory: its relative paths are the current directory's. */
    if (config_dir == NULL || config_dir[0] == '\0')
        config_dir = getcwd(cwd, sizeof cwd) ? cwd : "/";
    atomic_init(&st->refs, 1);
    st->serial = next_serial();
    st->path = absolute(path, config_dir);
    st->config_dir = strdup(config_dir);
    st->params_json = strdup(params_json ? params_json : "");
    st->kind = unloaded_kind;
    if (!st->path || !st->config_dir || !st->params_json) {
        gf_plugin_stage_release(st);
        return NULL;
    }
    return st;
}

gf_plugin_stage *gf_plugin_stage_new_builtin(const gf_params *params) {
    gf_plugin_stage *st = calloc(1, sizeof *st);
    gf_params *copy = malloc(sizeof *copy);
    if (st == NULL || copy == NULL) {
        free(st);
        free(copy);
        return NULL;
    }
    *copy = *params;
    copy->plugin = NULL;
    atomic_init(&st->refs, 1);
    st->serial = next_serial();
    st->builtin = 1;
    st->state = copy;
    st->kind = unloaded_kind;
    return st;
}

int gf_plugin_stage_lengths_known(const gf_plugin_stage *st) {
    return st->state != NULL || listed_in_bytes(st) != 0;
}

int gf_plugin_stage_is_builtin(const gf_plugin_stage *st) {
    return st->builtin;
}

int gf_plugin_stage_set_listed_name(gf_plugin_stage *st, const char *name) {
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    free(st->listed_name);
    st->listed_name = copy;
    if (st->api == NULL)
        st->kind.name = copy;
    return 0;
}

void gf_plugin_stage_set_listed_desc(gf_plugin_stage *st, const gf_frame_desc *in,
                                     const gf_frame_desc *out) {
    if (st->state != NULL)
        return;
    st->in_desc = *in;
    st->out_desc = *out;
}

const char *gf_plugin_stage_path(const gf_plugin_stage *st) {
    return st->path;
}
const char *gf_plugin_stage_config_dir(const gf_plugin_stage *st) {
    return st->config_dir;
}
const char *gf_plugin_stage_params_json(const gf_plugin_stage *st) {
    return st->params_json;
}
const gf_plugin *gf_plugin_stage_api(const gf_plugin_stage *st) {
    return st->api;
}

uint64_t gf_plugin_stage_serial(const gf_plugin_stage *st) {
    return st->serial;
}
void *gf_plugin_stage_state(const gf_plugin_stage *st) {
    return st->state;
}
void *gf_plugin_stage_device(const gf_plugin_stage *st, int device) {
    return device >= 0 && device < GF_PLUGIN_DEVICES_MAX ? st->dev[device] : NULL;
}
const gf_pipeline_kind *gf_plugin_stage_kind(gf_plugin_stage *st) {
    return &st->kind;
}

int gf_plugin_name_ok(const char *s) {
    if (s == NULL || *s == '\0' || strlen(s) >= GF_PIPELINE_NAME_MAX)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* What a plugin's description must hold before anything of it is called. */
static int check_api(const gf_plugin *api, char *why, size_t why_len) {
    if (api->abi_version < GF_PLUGIN_ABI_VERSION_MIN || api->abi_version > GF_PLUGIN_ABI_VERSION) {
        gf_errorf(why, why_len, "plugin ABI version %" PRIu32 "; this gpuframed speaks %d to %d",
                  api->abi_version, GF_PLUGIN_ABI_VERSION_MIN, GF_PLUGIN_ABI_VERSION);
        return -1;
    }
    if (!gf_plugin_name_ok(api->name)) {
        gf_errorf(why, why_len, "the plugin's name is not [a-z0-9_]+ of at most %d characters",
                  GF_PIPELINE_NAME_MAX - 1);
        return -1;
    }
    if (!api->create || !api->destroy || !api->output_bytes || !api->max_output_bytes) {
        gf_errorf(why, why_len, "plugin %s lacks create, destroy, output_bytes or max_output_bytes",
                  api->name);
        return -1;
    }
    if (api->device_open && (!api->launch || !api->device_close)) {
        gf_errorf(why, why_len, "plugin %s has device_open without launch and device_close",
                  api->name);
        return -1;
    }
    if (api->abi_version >= 2 && api->launch_batch &&
        (!api->launch || api->max_batch_frames < 1 ||
         api->max_batch_frames > GF_PLUGIN_BATCH_FRAMES_MAX)) {
        gf_errorf(why, why_len,
                  "plugin %s declares launch_batch with max_batch_frames %" PRIu32
                  "%s; it takes 1 to %d, with launch",
                  api->name, api->max_batch_frames, api->launch ? "" : " and no launch",
                  GF_PLUGIN_BATCH_FRAMES_MAX);
        return -1;
    }
    if (api->abi_version >= 3 && (api->flags & ~(uint32_t)GF_PLUGIN_NO_GRAPHS) != 0) {
        gf_errorf(why, why_len, "plugin %s sets flags 0x%" PRIx32 " this gpuframed does not know",
                  api->name, api->flags & ~(uint32_t)GF_PLUGIN_NO_GRAPHS);
        return -1;
    }
    if (api->param_count > GF_PLUGIN_PARAMS_MAX || (api->param_count && !api->params)) {
        gf_errorf(why, why_len, "plugin %s declares %" PRIu32 " parameters (at most %d)", api->name,
                  api->param_count, GF_PLUGIN_PARAMS_MAX);
        return -1;
    }
    for (uint32_t i = 0; i < api->param_count; i++) {
        const gf_plugin_param *d = &api->params[i];
        if (!gf_plugin_name_ok(d->key) ||
            (d->type != GF_PLUGIN_NUMBER && d->type != GF_PLUGIN_INTEGER &&
             d->type != GF_PLUGIN_STRING) ||
            !(d->min <= d->max)) {
            gf_errorf(why, why_len, "plugin %s: parameter %" PRIu32 " has a bad key, type or range",
                      api->name, i);
            return -1;
        }
    }
    return 0;
}

const gf_plugin *gf_plugin_stage_dlopen(gf_plugin_stage *st, char *why, size_t why_len) {
    if (st->api)
        return st->api;
    /* RTLD_LOCAL: two plugins may define the same symbols; RTLD_NOW: an
     * unresolved symbol fails here, at load, not at a frame; RTLD_NODELETE:
     * the object stays mapped after its last stage is destroyed.  Plugins
     * load the CUDA runtime and cuBLAS, which register exit handlers and
     * fat binaries with the driver and are not safe to unmap while the
     * process holds a context; and what their static constructors allocate
     * stays reachable (LeakSanitizer reported libstdc++'s exception pool of
     * each unmapped copy as leaked).  A reload that names the same path
     * again finds it loaded; to run a new build of a plugin, give it a new
     * path or restart.  Only a regular file is opened: dlopen of a FIFO
     * would wait for a writer, for ever. */
    struct stat sb;
    if (strchr(st->path, '/') && stat(st->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        gf_errorf(why, why_len,
                  "%s is not a regular file (a plugin is a shared object); not opened", st->path);
        return NULL;
    }
    void *dl = dlopen(st->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        const char *e = dlerror();
        gf_errorf(why, why_len, "cannot load: %s", e ? e : "dlopen failed");
        return NULL;
    }
    const gf_plugin *(*entry)(void);
    *(void **)&entry = dlsym(dl, GF_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) {
        gf_errorf(why, why_len, "%s: no symbol %s (not a gpuframed plugin?)", st->path,
                  GF_PLUGIN_ENTRY_SYMBOL);
        dlclose(dl);
        return NULL;
    }
    const gf_plugin *api = entry();
    if (api == NULL) {
        gf_errorf(why, why_len, "%s: %s() returned NULL", st->path, GF_PLUGIN_ENTRY_SYMBOL);
        dlclose(dl);
        return NULL;
    }
    char inner[256];
    if (check_api(api, inner, sizeof inner) < 0) {
        gf_errorf(why, why_len, "%s: %s", st->path, inner);
        dlclose(dl);
        return NULL;
    }
    st->dl = dl;
    st->api = api;
    st->kind.name = api->name;
    st->kind.doc = api->doc ? api->doc : "";
    st->kind.input_f32 = api->input_f32;
    st->kind.exact = api->exact;
    st->kind.abs_tolerance = api->abs_tolerance;
    st->kind.rel_tolerance = api->rel_tolerance;
    return api;
}

/* Checks that a fixed-length description agrees with the plugin's length
 * rule: its input's length accepted, giving its output's.  0 or -1 with
 * why[]. */
static int desc_agrees(const gf_plugin_stage *st, char *why, size_t why_len) {
    uint64_t in_bytes = gf_frame_desc_bytes(&st->in_desc);
    gf_frame_desc out = st->out_desc;
    char rule[256] = "";
    if (in_bytes == 0)
        return 0;
    int64_t n = st->api->output_bytes(st->state, in_bytes, rule, sizeof rule);
    if (n < 0) {
        gf_errorf(why, why_len, "the input it describes (%" PRIu64 " bytes) is one it refuses: %s",
                  in_bytes, rule);
        return -1;
    }
    if (gf_frame_desc_resolve(&out, (uint64_t)n) < 0) {
        gf_errorf(why, why_len,
                  "its output for the input it describes is %" PRId64
                  " bytes, which the output it describes cannot be",
                  n);
        return -1;
    }
    return 0;
}

/* Fills the created stage's descriptions: describe()'s, checked, or the
 * fallback of a plugin without one.  0 or -1 with why[]. */
static int describe(gf_plugin_stage *st, char *why, size_t why_len) {
    const gf_plugin *api = st->api;
    char inner[256] = "";
    memset(&st->in_desc, 0, sizeof st->in_desc);
    memset(&st->out_desc, 0, sizeof st->out_desc);
    if (api->abi_version < 3 || api->describe == NULL) {
        st->in_desc = any_length(api->input_f32 ? GF_DTYPE_FLOAT32 : GF_DTYPE_UINT8);
        st->out_desc =
            any_length(api->input_f32 || !api->exact ? GF_DTYPE_FLOAT32 : GF_DTYPE_UINT8);
        return 0;
    }
    if (api->describe(st->state, &st->in_desc, &st->out_desc, inner, sizeof inner) != 0) {
        gf_errorf(why, why_len, "%s", inner[0] ? inner : "failed");
        goto fail;
    }
    if (gf_frame_desc_check(&st->in_desc, inner, sizeof inner) < 0) {
        gf_errorf(why, why_len, "input: %s", inner);
        goto fail;
    }
    if (gf_frame_desc_check(&st->out_desc, inner, sizeof inner) < 0) {
        gf_errorf(why, why_len, "output: %s", inner);
        goto fail;
    }
    if (desc_agrees(st, why, why_len) < 0)
        goto fail;
    return 0;
fail:
    st->in_desc.count = st->out_desc.count = 0;
    return -1;
}

int gf_plugin_stage_create(gf_plugin_stage *st, const gf_plugin_value *values,
                           uint64_t max_input_bytes, char *why, size_t why_len) {
    const gf_plugin *api = st->api;
    if (api == NULL || st->state != NULL) {
        gf_errorf(why, why_len, "plugin %s: not loaded, or created twice", st->path);
        return -1;
    }
    for (uint32_t i = 0; i < api->param_count; i++) {
        st->values[i].number = values[i].number;
        if (api->params[i].type == GF_PLUGIN_STRING) {
            st->strings[i] = strdup(values[i].string ? values[i].string : "");
            if (st->strings[i] == NULL) {
                gf_errorf(why, why_len, "out of memory");
                return -1;
            }
            st->values[i].string = st->strings[i];
        }
    }
    gf_plugin_env env = {.max_input_bytes = max_input_bytes, .config_dir = st->config_dir};
    char inner[GF_PLUGIN_WHY_BYTES] = "";
    st->state = api->create(st->values, &env, inner, sizeof inner);
    if (st->state == NULL) {
        gf_errorf(why, why_len, "plugin %s: %s", api->name, inner[0] ? inner : "create failed");
        return -1;
    }
    if (describe(st, inner, sizeof inner) < 0) {
        gf_errorf(why, why_len, "plugin %s: describe: %s", api->name, inner);
        return -1;
    }
    return 0;
}

/* Shards open their engines at once, each on its own thread, and share the
 * stages: one device side per device, opened by whichever comes first. */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

int gf_plugin_stage_open_device_api(gf_plugin_stage *st, const gf_plugin *api, int device,
                                    uint32_t streams, char *why, size_t why_len) {
    pthread_mutex_lock(&dev_lock);
    if (st->builtin && st->api == NULL)
        st->api = api;
    const gf_plugin *bound = st->api;
    pthread_mutex_unlock(&dev_lock);
    if (bound != api) {
        gf_errorf(why, why_len, "stage opened with a device API not its own");
        return -1;
    }
    return gf_plugin_stage_open_device(st, device, streams, why, why_len);
}

int gf_plugin_stage_open_device(gf_plugin_stage *st, int device, uint32_t streams, char *why,
                                size_t why_len) {
    const gf_plugin *api = st->api;
    if (device < 0 || device >= GF_PLUGIN_DEVICES_MAX) {
        gf_errorf(why, why_len, "plugin %s: device %d is beyond the %d a stage can be opened on",
                  api ? api->name : st->path, device, GF_PLUGIN_DEVICES_MAX);
        return -1;
    }
    if (api == NULL || st->state == NULL || api->device_open == NULL) {
        gf_errorf(why, why_len, "plugin %s has no CUDA implementation (device_open)",
                  api ? api->name : st->path);
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&dev_lock);
    if (st->dev[device] == NULL && st->dev_failure[device] != NULL) {
        /* Not again: a model that did not load will not, and its reason
         * was said once, by the caller that got -1. */
        gf_errorf(why, why_len, "%s", st->dev_failure[device]);
        rc = GF_PLUGIN_OPEN_FAILED_BEFORE;
    } else if (st->dev[device] == NULL) {
        char inner[GF_PLUGIN_WHY_BYTES] = "";
        st->dev[device] = api->device_open(st->state, device, streams, inner, sizeof inner);
        if (st->dev[device] == NULL) {
            gf_errorf(why, why_len, "plugin %s: device_open: %s", api->name,
                      inner[0] ? inner : "failed");
            st->dev_failure[device] = strdup(why);
            rc = -1;
        }
    }
    pthread_mutex_unlock(&dev_lock);
    return rc;
}

void gf_plugin_stage_retain(gf_plugin_stage *st) {
    atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
}

/* Set by the daemon's loop thread, read by whichever thread releases a
 * stage's last reference (the loop, or a reload's loading thread): atomic. */
static _Atomic(gf_plugin_reaper) reaper;

void gf_plugin_set_reaper(gf_plugin_reaper r) {
    atomic_store(&reaper, r);
}

static int stage_has_device(const gf_plugin_stage *st) {
    for (int d = 0; d < GF_PLUGIN_DEVICES_MAX; d++)
        if (st->dev[d])
            return 1;
    return 0;
}

void gf_plugin_stage_release(gf_plugin_stage *st) {
    /* The last release must see every other holder's writes: acq_rel. */
    if (st == NULL || atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) > 1)
        return;
    gf_plugin_reaper r = atomic_load(&reaper);
    if (r != NULL && (stage_has_device(st) || st->state))
        r(st);
    else
        gf_plugin_stage_destroy(st);
}

void gf_plugin_stage_destroy(gf_plugin_stage *st) {
    for (int d = 0; d < GF_PLUGIN_DEVICES_MAX; d++)
        if (st->dev[d])
            st->api->device_close(st->dev[d]);
    if (st->builtin)
        free(st->state);
    else if (st->state)
        st->api->destroy(st->state);
    for (size_t i = 0; i < GF_PLUGIN_PARAMS_MAX; i++)
        free(st->strings[i]);
    for (int d = 0; d < GF_PLUGIN_DEVICES_MAX; d++)
        free(st->dev_failure[d]);
    if (st->dl)
        dlclose(st->dl);
    free(st->path);
    free(st->config_dir);
    free(st->params_json);
    free(st->listed_name);
    free(st);
}

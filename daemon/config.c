/*
 * Configuration: parses the daemon's JSON settings and pipelines (config.h is
 * the contract, config/README.md documents every key) with the JSON readers
 * of protocol/listing.c, which name the key path of every problem.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defaults of the keys a config file may leave out (config/README.md). */
#define GF_SOCKET_PATH_DEFAULT      "/run/gpuframed.sock"
#define GF_MAX_FRAME_BYTES_DEFAULT  (16ull << 20)
#define GF_FRAME_TIMEOUT_MS_DEFAULT 10000u
/* A frame stuck on the engine for an hour is a hung daemon, not a slow one. */
#define GF_FRAME_TIMEOUT_MS_MAX     3600000u
#define GF_DRAIN_TIMEOUT_MS_DEFAULT 30000u
#define GF_DRAIN_TIMEOUT_MS_MAX     3600000u
#define GF_TRACE_FRAMES_DEFAULT     4096u
#define GF_TRACE_FRAMES_MAX         (1u << 20)
/* The default cap on pinned memory: this fraction of physical RAM.  Pinned
 * pages cannot be swapped, and RLIMIT_MEMLOCK does not bound CUDA's. */
#define GF_PINNED_RAM_DIVISOR     4u
#define GF_MAX_PINNED_BYTES_LIMIT (1ull << 50)
/* A config file is a few KiB; anything near this is a wrong path. */
#define GF_CONFIG_FILE_MAX_BYTES (1u << 20)

/* ---- the config file -------------------------------------------------------- */

enum top_key {
    K_SOCKET,
    K_ENGINE,
    K_SLOTS,
    K_MAX_FRAME_BYTES,
    K_FRAME_TIMEOUT_MS,
    K_LOG_LEVEL,
    K_DRAIN_TIMEOUT_MS,
    K_MAX_PINNED_BYTES,
    K_TIMING_EVENTS,
    K_TRACE_FRAMES,
    K_PIPELINES,
    K_COUNT_
};
static const char *const top_keys[K_COUNT_] = {
    "socket",           "engine",           "slots",
    "max_frame_bytes",  "frame_timeout_ms", "log_level",
    "drain_timeout_ms", "max_pinned_bytes", "timing_events",
    "trace_frames",     "pipelines",
};

enum pipeline_key { P_NAME, P_KIND, P_PARAMS, P_COUNT_ };
static const char *const pipeline_keys[P_COUNT_] = {"name", "kind", "params"};

static const char *const engine_names[] = {"auto", "cuda", "cpu"};
static const char *const log_level_names[] = {"error", "warn", "info", "debug"};
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

int gf_engine_choice_parse(const char *s, enum gf_engine_choice *out) {
    int i = s != NULL ? gf_json_name_index(engine_names, ARRAY_LEN(engine_names), s) : -1;

    if (i < 0)
        return -1;
    *out = (enum gf_engine_choice)i;
    return 0;
}

const char *gf_engine_choice_name(enum gf_engine_choice e) {
    if ((unsigned)e >= ARRAY_LEN(engine_names))
        return "unknown";
    return engine_names[e];
}

int gf_log_level_parse(const char *s, enum gf_log_level *out) {
    int i = s != NULL ? gf_json_name_index(log_level_names, ARRAY_LEN(log_level_names), s) : -1;

    if (i < 0)
        return -1;
    *out = (enum gf_log_level)i;
    return 0;
}

/* Parses one element of the config's "pipelines" array into `p`, whose
 * `index` earlier siblings before[] are already parsed.  Reports every
 * problem it can tell apart; checks the parameters as a whole against
 * `max_frame_bytes` unless that is 0 (itself invalid).  Returns 0 or -1. */
static int parse_pipeline(const cJSON *v, size_t index, const gf_pipeline *before,
                          uint64_t max_frame_bytes, gf_pipeline *p, gf_problems *pr) {
    const cJSON *items[P_COUNT_] = {0};
    char prefix[32], path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES], why[GF_PATH_BYTES];
    int rc = 0;

    snprintf(prefix, sizeof prefix, "pipelines[%zu]", index);
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr,
                   "%s: expected an object with \"name\", \"kind\" and optional "
                   "\"params\", got %s",
                   prefix, got);
        return -1;
    }
    if (gf_json_collect_keys(v, prefix, pipeline_keys, P_COUNT_, 0, items, pr) < 0)
        rc = -1;
    for (int k = P_NAME; k <= P_KIND; k++) {
        if (items[k] == NULL) {
            gf_problem(pr, "%s.%s: missing (required)", prefix, pipeline_keys[k]);
            rc = -1;
        }
    }

    p->id = (uint32_t)index;
    snprintf(path, sizeof path, "%s.name", prefix);
    if (items[P_NAME] != NULL &&
        gf_json_read_pipeline_name(items[P_NAME], path, before, index, p->name, pr) < 0)
        rc = -1;
    if (items[P_KIND] == NULL)
        return -1;
    snprintf(path, sizeof path, "%s.kind", prefix);
    p->kind = gf_json_read_kind(items[P_KIND], path, pr);
    if (p->kind == NULL)
        return -1;
    if (p->name[0] != '\0')
        snprintf(path, sizeof path, "%s (%s).params", prefix, p->name);
    else
        snprintf(path, sizeof path, "%s.params", prefix);
    if (gf_params_read(p->kind, items[P_PARAMS], path, &p->params, pr) < 0)
        return -1;
    why[0] = '\0';
    if (max_frame_bytes > 0 &&
        p->kind->check_params(&p->params, max_frame_bytes, why, sizeof why) != 0) {
        gf_problem(pr, "%s: %s", path, why[0] ? why : "invalid parameters");
        return -1;
    }
    return rc;
}

/* Parses the config's "pipelines" array into a new array in *out, reporting
 * the problems of every element. */
static int parse_pipelines(const cJSON *v, uint64_t max_frame_bytes, gf_pipeline **out,
                           size_t *out_count, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];
    gf_pipeline *pipelines = NULL;
    size_t count, i = 0;
    const cJSON *m;
    int rc = 0;

    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "pipelines: expected a non-empty array of pipeline objects, got %s", got);
        goto fail;
    }
    count = (size_t)cJSON_GetArraySize(v);
    if (count > GF_MAX_PIPELINES) {
        gf_problem(pr, "pipelines: expected at most %d pipelines, got %zu", GF_MAX_PIPELINES,
                   count);
        goto fail;
    }
    pipelines = calloc(count, sizeof *pipelines);
    if (pipelines == NULL) {
        gf_problem(pr, "pipelines: out of memory");
        goto fail;
    }
    cJSON_ArrayForEach(m, v) {
        if (parse_pipeline(m, i, pipelines, max_frame_bytes, &pipelines[i], pr) < 0)
            rc = -1;
        i++;
    }
    if (rc < 0)
        goto fail_pipelines;
    *out = pipelines;
    *out_count = count;
    return 0;

fail_pipelines:
    free(pipelines);
fail:
    return -1;
}

uint64_t gf_config_max_output_bytes(const gf_config *cfg) {
    uint64_t most = 0;
    for (size_t i = 0; i < cfg->pipeline_count; i++) {
        const gf_pipeline *p = &cfg->pipelines[i];
        uint64_t out = p->kind->max_output_bytes(&p->params, cfg->max_frame_bytes);
        if (out > most)
            most = out;
    }
    return most;
}

uint64_t gf_config_pinned_bytes(const gf_config *cfg) {
    return (uint64_t)cfg->slot_count * (cfg->max_frame_bytes + gf_config_max_output_bytes(cfg));
}

/* max_pinned_bytes, or a quarter of physical memory when it is 0. */
static uint64_t pinned_cap(const gf_config *cfg) {
    if (cfg->max_pinned_bytes)
        return cfg->max_pinned_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return GF_MAX_PINNED_BYTES_LIMIT;
    return (uint64_t)pages * (uint64_t)page / GF_PINNED_RAM_DIVISOR;
}

/* gf_config_check_pinned, reporting to `pr`. */
static int check_pinned(const gf_config *cfg, gf_problems *pr) {
    uint64_t want = gf_config_pinned_bytes(cfg), cap = pinned_cap(cfg);
    if (want <= cap)
        return 0;
    gf_problem(pr,
               "max_pinned_bytes: %u slots of %llu bytes in and %llu bytes out need %llu bytes of "
               "pinned memory, over the cap of %llu%s; lower slots or max_frame_bytes, or raise "
               "max_pinned_bytes",
               cfg->slot_count, (unsigned long long)cfg->max_frame_bytes,
               (unsigned long long)gf_config_max_output_bytes(cfg), (unsigned long long)want,
               (unsigned long long)cap, cfg->max_pinned_bytes ? "" : " (1/4 of physical memory)");
    return -1;
}

/* Replaces the file's values with the command line's (already range-checked). */
static void apply_overrides(gf_config *cfg, const gf_config_overrides *f) {
    if (f->socket_path != NULL)
        snprintf(cfg->socket_path, sizeof cfg->socket_path, "%s", f->socket_path);
    if (f->has_engine)
        cfg->engine = f->engine;
    if (f->has_log_level)
        cfg->log_level = f->log_level;
    if (f->has_slots)
        cfg->slot_count = f->slot_count;
    if (f->has_max_frame_bytes)
        cfg->max_frame_bytes = f->max_frame_bytes;
}

/* gf_config_parse with `flags` (may be NULL), reporting every problem to
 * `pr`: a value that is wrong does not hide the next one. */
static int config_parse(const char *json, const gf_config_overrides *flags, gf_config *out,
                        gf_problems *pr) {
    const cJSON *items[K_COUNT_] = {0};
    char got[GF_VALUE_TEXT_BYTES];
    gf_config cfg;
    cJSON *root;
    size_t first_problem = pr->count;
    int frame_bytes_ok = 1;
    double n;
    int i;

    memset(out, 0, sizeof *out);
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.socket_path, sizeof cfg.socket_path, "%s", GF_SOCKET_PATH_DEFAULT);
    cfg.engine = GF_ENGINE_AUTO;
    cfg.slot_count = GF_SLOTS_DEFAULT;
    cfg.max_frame_bytes = GF_MAX_FRAME_BYTES_DEFAULT;
    cfg.frame_timeout_ms = GF_FRAME_TIMEOUT_MS_DEFAULT;
    cfg.log_level = GF_LOG_INFO;
    cfg.drain_timeout_ms = GF_DRAIN_TIMEOUT_MS_DEFAULT;
    cfg.max_pinned_bytes = 0;
    cfg.timing_events = 1;
    cfg.trace_frames = GF_TRACE_FRAMES_DEFAULT;

    root = gf_json_parse_document("config", json, pr);
    if (root == NULL)
        goto fail;
    if (!cJSON_IsObject(root)) {
        gf_json_describe(root, got, sizeof got);
        gf_problem(pr, "config: expected a JSON object, got %s", got);
        goto fail_root;
    }
    /* Unknown and duplicate keys are reported; the known ones are still
     * read, so that one run names every problem of the file. */
    gf_json_collect_keys(root, "", top_keys, K_COUNT_, 0, items, pr);

    /* Fixed order, whatever the file's: pipelines need max_frame_bytes. */
    if (items[K_SOCKET] != NULL) {
        const cJSON *v = items[K_SOCKET];
        size_t len = cJSON_IsString(v) ? strlen(v->valuestring) : 0;

        if (len == 0 || len >= GF_SOCKET_PATH_MAX) {
            if (cJSON_IsString(v))
                snprintf(got, sizeof got, "a string of %zu bytes", len);
            else
                gf_json_describe(v, got, sizeof got);
            gf_problem(pr, "socket: expected a path of 1 to %d bytes, got %s",
                       GF_SOCKET_PATH_MAX - 1, got);
        } else {
            memcpy(cfg.socket_path, v->valuestring, len + 1);
        }
    }
    if (items[K_ENGINE] != NULL) {
        i = gf_json_read_choice(items[K_ENGINE], "engine", engine_names, ARRAY_LEN(engine_names),
                                pr);
        if (i >= 0)
            cfg.engine = (enum gf_engine_choice)i;
    }
    if (items[K_SLOTS] != NULL) {
        if (gf_json_read_integer(items[K_SLOTS], "slots", GF_SLOTS_MIN, GF_SLOTS_MAX, &n, pr) == 0)
            cfg.slot_count = (uint32_t)n;
    }
    if (items[K_MAX_FRAME_BYTES] != NULL) {
        if (gf_json_read_integer(items[K_MAX_FRAME_BYTES], "max_frame_bytes", 1,
                                 (double)GF_MAX_FRAME_BYTES_LIMIT, &n, pr) == 0)
            cfg.max_frame_bytes = (uint64_t)n;
        else
            frame_bytes_ok = 0;
    }
    if (items[K_FRAME_TIMEOUT_MS] != NULL) {
        if (gf_json_read_integer(items[K_FRAME_TIMEOUT_MS], "frame_timeout_ms", 1,
                                 GF_FRAME_TIMEOUT_MS_MAX, &n, pr) == 0)
            cfg.frame_timeout_ms = (uint32_t)n;
    }
    if (items[K_LOG_LEVEL] != NULL) {
        i = gf_json_read_choice(items[K_LOG_LEVEL], "log_level", log_level_names,
                                ARRAY_LEN(log_level_names), pr);
        if (i >= 0)
            cfg.log_level = (enum gf_log_level)i;
    }
    if (items[K_DRAIN_TIMEOUT_MS] != NULL) {
        if (gf_json_read_integer(items[K_DRAIN_TIMEOUT_MS], "drain_timeout_ms", 1,
                                 GF_DRAIN_TIMEOUT_MS_MAX, &n, pr) == 0)
            cfg.drain_timeout_ms = (uint32_t)n;
    }
    if (items[K_MAX_PINNED_BYTES] != NULL) {
        if (gf_json_read_integer(items[K_MAX_PINNED_BYTES], "max_pinned_bytes", 0,
                                 (double)GF_MAX_PINNED_BYTES_LIMIT, &n, pr) == 0)
            cfg.max_pinned_bytes = (uint64_t)n;
    }
    if (items[K_TIMING_EVENTS] != NULL) {
        if (!cJSON_IsBool(items[K_TIMING_EVENTS])) {
            gf_json_describe(items[K_TIMING_EVENTS], got, sizeof got);
            gf_problem(pr, "timing_events: expected true or false, got %s", got);
        } else {
            cfg.timing_events = cJSON_IsTrue(items[K_TIMING_EVENTS]);
        }
    }
    if (items[K_TRACE_FRAMES] != NULL) {
        if (gf_json_read_integer(items[K_TRACE_FRAMES], "trace_frames", 0, GF_TRACE_FRAMES_MAX, &n,
                                 pr) == 0)
            cfg.trace_frames = (uint32_t)n;
    }
    if (flags != NULL) {
        apply_overrides(&cfg, flags);
        frame_bytes_ok |= flags->has_max_frame_bytes;
    }
    if (items[K_PIPELINES] == NULL) {
        gf_problem(pr, "pipelines: missing (required: a non-empty array of pipelines)");
        goto fail_root;
    }
    /* Without a valid max_frame_bytes the kinds' size checks would only
     * repeat that problem. */
    if (parse_pipelines(items[K_PIPELINES], frame_bytes_ok ? cfg.max_frame_bytes : 0,
                        &cfg.pipelines, &cfg.pipeline_count, pr) < 0)
        goto fail_root;
    /* The cap is checked on values that are all valid, or not at all. */
    if (pr->count > first_problem || check_pinned(&cfg, pr) < 0) {
        gf_config_free(&cfg);
        goto fail_root;
    }

    cJSON_Delete(root);
    *out = cfg;
    return 0;

fail_root:
    cJSON_Delete(root);
fail:
    return -1;
}

int gf_config_parse(const char *json, gf_config *out, char *err, size_t err_len) {
    gf_problems pr;

    gf_problems_init(&pr, err, err_len, 0, NULL);
    return config_parse(json, NULL, out, &pr);
}

int gf_config_parse_all(const char *json, gf_config *out, char *errs, size_t errs_len,
                        size_t *problem_count) {
    gf_problems pr;
    int rc;

    gf_problems_init(&pr, errs, errs_len, 1, NULL);
    rc = config_parse(json, NULL, out, &pr);
    if (problem_count != NULL)
        *problem_count = pr.count;
    return rc;
}

/* gf_config_load, reporting every problem to `pr`, each line prefixed with
 * the path. */
static int config_load(const char *path, const gf_config_overrides *flags, gf_config *out,
                       gf_problems *pr) {
    const char *saved_prefix = pr->prefix;
    char *buf = NULL;
    size_t len;
    FILE *f;
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (path == NULL) {
        pr->prefix = "built-in configuration";
        rc = config_parse(gf_default_config_json, flags, out, pr);
        goto out;
    }
    pr->prefix = path;
    f = fopen(path, "rb");
    if (f == NULL) {
        gf_problem(pr, "%s", strerror(errno));
        goto out;
    }
    /* One byte past the limit tells "too large" from "exactly the limit". */
    buf = malloc(GF_CONFIG_FILE_MAX_BYTES + 2);
    if (buf == NULL) {
        gf_problem(pr, "out of memory");
        goto out_file;
    }
    len = fread(buf, 1, GF_CONFIG_FILE_MAX_BYTES + 1, f);
    if (ferror(f)) {
        gf_problem(pr, "read failed: %s", strerror(errno));
        goto out_buf;
    }
    if (len > GF_CONFIG_FILE_MAX_BYTES) {
        gf_problem(pr, "larger than the limit of %u bytes (1 MiB) for a config file",
                   GF_CONFIG_FILE_MAX_BYTES);
        goto out_buf;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        gf_problem(pr, "contains a NUL byte at offset %zu", strlen(buf));
        goto out_buf;
    }
    rc = config_parse(buf, flags, out, pr);

out_buf:
    free(buf);
out_file:
    fclose(f);
out:
    pr->prefix = saved_prefix;
    return rc;
}

int gf_config_load_file(const char *path, gf_config *out, char *err, size_t err_len) {
    gf_problems pr;

    gf_problems_init(&pr, err, err_len, 0, NULL);
    return config_load(path, NULL, out, &pr);
}

int gf_config_load(const char *path, const gf_config_overrides *flags, gf_config *out, char *errs,
                   size_t errs_len, size_t *problem_count) {
    gf_problems pr;
    int rc;

    gf_problems_init(&pr, errs, errs_len, 1, NULL);
    rc = config_load(path, flags, out, &pr);
    if (problem_count != NULL)
        *problem_count = pr.count;
    return rc;
}

void gf_config_free(gf_config *cfg) {
    if (cfg == NULL)
        return;
    free(cfg->pipelines);
    memset(cfg, 0, sizeof *cfg);
}

/* ---- differences between two configurations ---------------------------------- */

/* Appends ", " (unless first) and the formatted text to buf[len] at *used;
 * a text that does not fit ends the list with "...". */
__attribute__((format(printf, 4, 5))) static void append_change(char *buf, size_t len, size_t *used,
                                                                const char *fmt, ...) {
    va_list ap;
    int n;

    if (*used >= len)
        return;
    if (*used > 0) {
        n = snprintf(buf + *used, len - *used, ", ");
        if (n < 0 || (size_t)n >= len - *used)
            goto cut;
        *used += (size_t)n;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *used)
        goto cut;
    *used += (size_t)n;
    return;
cut:
    if (len >= 4)
        memcpy(buf + len - 4, "...", 4);
    *used = len;
}

/* A pipeline's parameters as compact JSON text in buf[len] ("?" when out of
 * memory). */
static void params_text(const gf_pipeline *p, char *buf, size_t len) {
    cJSON *obj = gf_params_to_json(p->kind, &p->params);
    char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;

    snprintf(buf, len, "%s", text != NULL ? text : "?");
    cJSON_free(text);
    cJSON_Delete(obj);
}

void gf_config_describe_changes(const gf_config *from, const gf_config *to, char *buf, size_t len) {
    static const char *const bools[] = {"false", "true"};
    size_t used = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    if (strcmp(from->socket_path, to->socket_path) != 0)
        append_change(buf, len, &used, "socket %s -> %s", from->socket_path, to->socket_path);
    if (from->engine != to->engine)
        append_change(buf, len, &used, "engine %s -> %s", gf_engine_choice_name(from->engine),
                      gf_engine_choice_name(to->engine));
    if (from->slot_count != to->slot_count)
        append_change(buf, len, &used, "slots %u -> %u", from->slot_count, to->slot_count);
    if (from->max_frame_bytes != to->max_frame_bytes)
        append_change(buf, len, &used, "max_frame_bytes %llu -> %llu",
                      (unsigned long long)from->max_frame_bytes,
                      (unsigned long long)to->max_frame_bytes);
    if (from->frame_timeout_ms != to->frame_timeout_ms)
        append_change(buf, len, &used, "frame_timeout_ms %u -> %u", from->frame_timeout_ms,
                      to->frame_timeout_ms);
    if (from->log_level != to->log_level)
        append_change(buf, len, &used, "log_level %s -> %s", log_level_names[from->log_level],
                      log_level_names[to->log_level]);
    if (from->drain_timeout_ms != to->drain_timeout_ms)
        append_change(buf, len, &used, "drain_timeout_ms %u -> %u", from->drain_timeout_ms,
                      to->drain_timeout_ms);
    if (from->max_pinned_bytes != to->max_pinned_bytes)
        append_change(buf, len, &used, "max_pinned_bytes %llu -> %llu",
                      (unsigned long long)from->max_pinned_bytes,
                      (unsigned long long)to->max_pinned_bytes);
    if (from->timing_events != to->timing_events)
        append_change(buf, len, &used, "timing_events %s -> %s", bools[!!from->timing_events],
                      bools[!!to->timing_events]);
    if (from->trace_frames != to->trace_frames)
        append_change(buf, len, &used, "trace_frames %u -> %u", from->trace_frames,
                      to->trace_frames);
    if (from->pipeline_count != to->pipeline_count)
        append_change(buf, len, &used, "pipelines: %zu -> %zu entries", from->pipeline_count,
                      to->pipeline_count);
    for (size_t i = 0; i < from->pipeline_count && i < to->pipeline_count; i++) {
        const gf_pipeline *a = &from->pipelines[i], *b = &to->pipelines[i];
        char pa[GF_KNOWN_LIST_BYTES], pb[GF_KNOWN_LIST_BYTES];

        if (strcmp(a->name, b->name) != 0)
            append_change(buf, len, &used, "pipelines[%zu].name %s -> %s", i, a->name, b->name);
        if (a->kind != b->kind) {
            append_change(buf, len, &used, "pipelines[%zu] (%s).kind %s -> %s", i, b->name,
                          a->kind->name, b->kind->name);
            continue;
        }
        if (memcmp(&a->params, &b->params, sizeof a->params) != 0) {
            params_text(a, pa, sizeof pa);
            params_text(b, pb, sizeof pb);
            append_change(buf, len, &used, "pipelines[%zu] (%s).params %s -> %s", i, b->name, pa,
                          pb);
        }
    }
}

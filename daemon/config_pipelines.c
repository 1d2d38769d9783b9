/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the "pipelines" array (gf__config_parse_pipelines, for
 * config.c's parser) and the output size the configured pipelines need.
 * Each element's name, kind and parameters are read with the JSON readers of
 * protocol/ (json_read.c, stages_json.c, params_json.c), which name the key
 * path of every problem.  Lists of CUDA devices are read here too, a
 * pipeline's "devices" and the top-level key's (config.c calls
 * gf_devices_parse): calls go from config.c to this file, never back.
 */
#include "config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "util.h"

enum pipeline_key {
    P_NAME,
    P_KIND,
    P_PARAMS,
    P_PATH,
    P_STAGES,
    P_DEVICES,
    P_BATCH_FRAMES,
    P_BATCH_DELAY,
    P_COUNT_
};
static const char *const pipeline_keys[P_COUNT_] = {
    "name",   "kind",    "params",           "path",
    "stages", "devices", "max_batch_frames", "max_batch_delay_us"};

/* ---- lists of CUDA devices ------------------------------------------------------ */

int gf_devices_parse(const char *text, const char *key, int out[GF_DEVICES_MAX], char *why,
                     size_t why_len) {
    const char *p = text;
    if (strcmp(p, "all") == 0)
        return 0;
    int n = 0;
    for (;;) {
        char *end;
        errno = 0;
        long d = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (d < 0 || d >= GF_DEVICES_MAX || errno != 0 || (*end != ',' && *end != '\0')) {
            gf_errorf(why, why_len,
                      "%s: expected \"all\" or CUDA device ordinals 0 to %d separated by "
                      "commas, such as \"0,1\"; got \"%s\"",
                      key, GF_DEVICES_MAX - 1, text);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == (int)d) {
                gf_errorf(why, why_len, "%s: device %ld is named twice in \"%s\"", key, d, text);
                return -1;
            }
        out[n++] = (int)d;
        if (*end == '\0')
            return n;
        p = end + 1;
    }
}

void gf_devices_format(uint32_t mask, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < GF_DEVICES_MAX && at < len; d++)
        if ((mask >> d) & 1u) {
            int n = snprintf(buf + at, len - at, "%s%d", at ? "," : "", d);
            if (n < 0)
                break;
            at += (size_t)n;
        }
}

/* A pipeline's "devices": the devices it may run on, as a mask (0: all). */
static int read_devices(const cJSON *v, const char *path, uint32_t *mask, gf_problems *pr) {
    char key[GF_PATH_BYTES + 16], why[256];
    int list[GF_DEVICES_MAX];
    snprintf(key, sizeof key, "%s.devices", path);
    if (!cJSON_IsString(v)) {
        char got[GF_VALUE_TEXT_BYTES];
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a string, \"all\" or device ordinals such as \"0,1\", got %s",
                   key, got);
        return -1;
    }
    int n = gf_devices_parse(v->valuestring, key, list, why, sizeof why);
    if (n < 0) {
        gf_problem(pr, "%s", why);
        return -1;
    }
    *mask = 0;
    for (int i = 0; i < n; i++)
        *mask |= 1u << list[i];
    return 0;
}

/* A pipeline's "max_batch_frames" and "max_batch_delay_us" (`frames`,
 * `delay`: NULL when absent), once its plugins are open: a plugin's
 * launch_batch that takes fewer frames than GF_BATCH_FRAMES_MAX lowers the
 * default, and a larger value is refused, so no plugin is ever given more
 * than it declared. */
static int read_batching(const cJSON *frames, const cJSON *delay, const char *path, gf_pipeline *p,
                         gf_problems *pr) {
    char key[GF_PATH_BYTES + 24];
    const char *bound_by = NULL;
    uint32_t most = GF_BATCH_FRAMES_MAX;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *st = &p->stages[k];
        const gf_plugin *api =
            gf_kind_is_plugin(st->kind) ? gf_plugin_stage_api(st->params.plugin) : NULL;
        uint32_t n = api ? gf_plugin_batch_frames(api) : 0;
        if (n > 0 && n < most) {
            most = n;
            bound_by = api->name;
        }
    }
    double v;
    int rc = 0;
    p->max_batch_frames = most;
    snprintf(key, sizeof key, "%s.max_batch_frames", path);
    if (frames && gf_json_read_integer(frames, key, 1, GF_BATCH_FRAMES_MAX, &v, pr) < 0) {
        rc = -1;
    } else if (frames && v > most) {
        gf_problem(pr,
                   "%s: %.0f frames, more than plugin %s takes in one launch_batch (its "
                   "max_batch_frames is %u)",
                   key, v, bound_by, most);
        rc = -1;
    } else if (frames) {
        p->max_batch_frames = (uint32_t)v;
    }
    p->max_batch_delay_us = 0;
    snprintf(key, sizeof key, "%s.max_batch_delay_us", path);
    if (cJSON_IsString(delay) && strcmp(delay->valuestring, "auto") == 0) {
        p->max_batch_delay_us = GF_BATCH_DELAY_AUTO; /* batch_delay.h picks the wait */
    } else if (delay && !(cJSON_IsNumber(delay) && delay->valuedouble >= 0 &&
                          delay->valuedouble <= GF_BATCH_DELAY_US_MAX &&
                          delay->valuedouble == floor(delay->valuedouble))) {
        char got[GF_VALUE_TEXT_BYTES];
        gf_json_describe(delay, got, sizeof got);
        gf_problem(pr, "%s: expected \"auto\" or an integer in [0, %u], got %s", key,
                   GF_BATCH_DELAY_US_MAX, got);
        rc = -1;
    } else if (delay) {
        p->max_batch_delay_us = (uint32_t)delay->valuedouble;
    }
    return rc;
}

/* Parses one element of the config's "pipelines" array into `p`, whose
 * `index` earlier siblings before[] are already parsed: its name, its
 * stages, each plugin loaded and created, then the stages checked as a chain
 * against `max_frame_bytes` unless that is 0 (itself invalid).  Reports
 * every problem it can tell apart.  Returns 0 or -1 (then `p` holds no
 * plugin reference). */
static int parse_pipeline(const cJSON *v, size_t index, const gf_pipeline *before,
                          uint64_t max_frame_bytes, const char *config_dir, gf_pipeline *p,
                          gf_problems *pr) {
    const cJSON *items[P_COUNT_] = {0};
    char prefix[32], path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
    int rc = 0;

    snprintf(prefix, sizeof prefix, "pipelines[%zu]", index);
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr,
                   "%s: expected an object with \"name\" and \"kind\" (or \"stages\") and "
                   "optional \"params\", got %s",
                   prefix, got);
        return -1;
    }
    if (gf_json_collect_keys(v, prefix, pipeline_keys, P_COUNT_, 0, items, pr) < 0)
        rc = -1;
    if (items[P_NAME] == NULL) {
        gf_problem(pr, "%s.name: missing (required)", prefix);
        rc = -1;
    }
    p->id = (uint32_t)index;
    snprintf(path, sizeof path, "%s.name", prefix);
    if (items[P_NAME] != NULL &&
        gf_json_read_pipeline_name(items[P_NAME], path, before, index, p->name, pr) < 0)
        rc = -1;
    if (p->name[0] != '\0')
        snprintf(path, sizeof path, "%s (%s)", prefix, p->name);
    else
        snprintf(path, sizeof path, "%s", prefix);
    gf_stage_json j = {.kind = items[P_KIND],
                       .params = items[P_PARAMS],
                       .path = items[P_PATH],
                       .stages = items[P_STAGES]};
    if (items[P_DEVICES] != NULL && read_devices(items[P_DEVICES], path, &p->devices, pr) < 0)
        rc = -1;
    if (gf_json_read_stages(&j, config_dir, path, p, pr) < 0)
        return -1;
    if (gf_pipeline_open_plugins(p, max_frame_bytes, path, pr) < 0 ||
        (max_frame_bytes > 0 && gf_pipeline_check_stages(p, max_frame_bytes, path, pr) < 0) ||
        read_batching(items[P_BATCH_FRAMES], items[P_BATCH_DELAY], path, p, pr) < 0)
        rc = -1;
    if (rc < 0) {
        gf_pipeline_release(p);
        p->stage_count = 0;
    }
    return rc;
}

int gf__config_parse_pipelines(const cJSON *v, uint64_t max_frame_bytes, const char *config_dir,
                               gf_pipeline **out, size_t *out_count, gf_problems *pr) {
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
        if (parse_pipeline(m, i, pipelines, max_frame_bytes, config_dir, &pipelines[i], pr) < 0)
            rc = -1;
        i++;
    }
    if (rc < 0)
        goto fail_pipelines;
    *out = pipelines;
    *out_count = count;
    return 0;

fail_pipelines:
    gf_pipelines_free(pipelines, count);
fail:
    return -1;
}

static uint64_t larger(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

/* The largest of `measure` over the configured pipelines, for inputs of at
 * most `max_in_bytes`. */
static uint64_t most_over_pipelines(const gf_config *cfg,
                                    uint64_t (*measure)(const gf_pipeline *, uint64_t),
                                    uint64_t max_in_bytes) {
    uint64_t most = 0;
    for (size_t i = 0; i < cfg->pipeline_count; i++)
        most = larger(most, measure(&cfg->pipelines[i], max_in_bytes));
    return most;
}

/* What a full batch of pipeline `p`'s frames needs in each buffer of a
 * slot, whose input buffer holds `max_frame_bytes`: its frames lie at one
 * offset in every buffer, each as far from the last as its largest length
 * (input, result or intermediate), aligned.  The frames are those of the
 * one length its input takes (a tensor of fixed shape: an image, a
 * model's), or else of GF_BATCH_FRAME_BYTES; a batch holds
 * GF_BATCH_FRAMES_MAX of them, or as many as the input buffer does at that
 * stride (not the pipeline's max_batch_frames, which a reload may raise). */
static uint64_t pipeline_batch_bytes(const gf_pipeline *p, uint64_t max_frame_bytes) {
    gf_frame_desc in, out;
    gf_pipeline_describe(p, &in, &out);
    uint64_t frame = gf_frame_desc_bytes(&in);
    if (frame == 0)
        frame = GF_BATCH_FRAME_BYTES;
    if (frame > max_frame_bytes)
        frame = max_frame_bytes;
    uint64_t extent =
        gf_frame_align(larger(frame, larger(gf_pipeline_max_output_bytes(p, frame),
                                            gf_pipeline_max_scratch_bytes(p, frame))));
    uint64_t fit = (max_frame_bytes - frame) / extent + 1;
    return (fit < GF_BATCH_FRAMES_MAX ? fit : GF_BATCH_FRAMES_MAX) * extent;
}

/* What a full batch of any pipeline's frames needs (pipeline_batch_bytes). */
static uint64_t batch_bytes(const gf_config *cfg) {
    uint64_t most = 0;
    for (size_t i = 0; i < cfg->pipeline_count; i++)
        most = larger(most, pipeline_batch_bytes(&cfg->pipelines[i], cfg->max_frame_bytes));
    return most;
}

uint64_t gf_config_max_output_bytes(const gf_config *cfg) {
    return larger(most_over_pipelines(cfg, gf_pipeline_max_output_bytes, cfg->max_frame_bytes),
                  batch_bytes(cfg));
}

uint64_t gf_config_max_scratch_bytes(const gf_config *cfg) {
    /* None without a pipeline of several stages. */
    uint64_t most = most_over_pipelines(cfg, gf_pipeline_max_scratch_bytes, cfg->max_frame_bytes);
    return most ? larger(most, batch_bytes(cfg)) : 0;
}

uint32_t gf_config_pipeline_id(const gf_config *cfg, uint32_t id, const char *name) {
    if (id < cfg->pipeline_count && strcmp(cfg->pipelines[id].name, name) == 0)
        return id;
    for (id = 0; id < cfg->pipeline_count; id++)
        if (strcmp(cfg->pipelines[id].name, name) == 0)
            break;
    return id;
}

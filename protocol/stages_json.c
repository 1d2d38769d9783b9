/* SPDX-License-Identifier: MIT */
/*
 * A pipeline's stages from JSON: read, plugins loaded, checked;
 * stages_json.h is the contract.
 */
#include "stages_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frame_desc_json.h"
#include "params_json.h"
#include "plugin.h"
#include "util.h"

/* Nonzero when `p` is a path this daemon would write: not empty, no
 * control character, and starting with '/' when `absolute`. */
static int path_text(const char *p, int absolute) {
    if (p[0] == '\0' || (absolute && p[0] != '/'))
        return 0;
    for (; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/* Gives the unloaded plugin stage `out` the "inputs" and "outputs" a LIST
 * reply lists for it.  Returns 0 or -1 with a problem. */
static int read_listed_desc(const gf_stage_json *j, const char *prefix, gf_stage *out,
                            gf_problems *pr) {
    char path[GF_PATH_BYTES];
    gf_frame_desc in, outs;
    snprintf(path, sizeof path, "%s.inputs", prefix);
    if (gf_frame_desc_from_json(j->inputs, path, &in, pr) < 0)
        return -1;
    snprintf(path, sizeof path, "%s.outputs", prefix);
    if (gf_frame_desc_from_json(j->outputs, path, &outs, pr) < 0)
        return -1;
    gf_plugin_stage_set_listed_desc(out->params.plugin, &in, &outs);
    return 0;
}

/* Reads a plugin stage's "path" (and, in a LIST reply, "config_dir") into a
 * new unloaded stage in out->params.plugin.  Returns 0 or -1 with a problem. */
static int read_plugin_stage(const gf_stage_json *j, const char *config_dir, const char *prefix,
                             gf_stage *out, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];
    char *params_text = NULL;
    /* A LIST reply's paths were made absolute by the daemon: anything else
     * would be resolved again, against this process's directory. */
    if (!cJSON_IsString(j->path) || !path_text(j->path->valuestring, j->listed)) {
        gf_json_describe(j->path, got, sizeof got);
        gf_problem(pr, "%s.path: expected the %spath of a plugin's shared object, got %s", prefix,
                   j->listed ? "absolute " : "", got);
        return -1;
    }
    if (j->config_dir != NULL) {
        if (!cJSON_IsString(j->config_dir) || !path_text(j->config_dir->valuestring, 1)) {
            gf_json_describe(j->config_dir, got, sizeof got);
            gf_problem(pr, "%s.config_dir: expected an absolute directory, got %s", prefix, got);
            return -1;
        }
        config_dir = j->config_dir->valuestring;
    }
    if (j->plugin != NULL &&
        !(cJSON_IsString(j->plugin) && gf_plugin_name_ok(j->plugin->valuestring))) {
        gf_json_describe(j->plugin, got, sizeof got);
        gf_problem(pr, "%s.plugin: expected a kind name of [a-z0-9_], got %s", prefix, got);
        return -1;
    }
    if (j->params != NULL && !cJSON_IsObject(j->params)) {
        gf_json_describe(j->params, got, sizeof got);
        gf_problem(pr, "%s.params: expected an object of the plugin's parameters, got %s", prefix,
                   got);
        return -1;
    }
    if (j->params != NULL && (params_text = cJSON_PrintUnformatted(j->params)) == NULL) {
        gf_problem(pr, "%s: out of memory", prefix);
        return -1;
    }
    memset(&out->params, 0, sizeof out->params);
    out->params.plugin = gf_plugin_stage_new(j->path->valuestring, config_dir, params_text);
    cJSON_free(params_text);
    if (out->params.plugin == NULL) {
        gf_problem(pr, "%s: out of memory", prefix);
        return -1;
    }
    out->kind = gf_plugin_stage_kind(out->params.plugin);
    if (cJSON_IsString(j->plugin) &&
        gf_plugin_stage_set_listed_name(out->params.plugin, j->plugin->valuestring) < 0) {
        gf_problem(pr, "%s: out of memory", prefix);
        goto fail;
    }
    if (j->inputs != NULL && j->outputs != NULL && read_listed_desc(j, prefix, out, pr) < 0)
        goto fail;
    return 0;
fail:
    gf_plugin_stage_release(out->params.plugin);
    return -1;
}

/* Reads one stage, built-in or plugin, from its members.  Returns 0 or -1
 * with every problem reported; on success a plugin stage holds one
 * reference (the caller's pipeline's). */
static int read_stage(const gf_stage_json *j, const char *config_dir, const char *prefix,
                      gf_stage *out, gf_problems *pr) {
    char path[GF_PATH_BYTES];
    if (j->kind == NULL) {
        gf_problem(pr, "%s.kind: missing (required)", prefix);
        return -1;
    }
    if (cJSON_IsString(j->kind) && strcmp(j->kind->valuestring, GF_PLUGIN_KIND_NAME) == 0)
        return read_plugin_stage(j, config_dir, prefix, out, pr);
    snprintf(path, sizeof path, "%s.kind", prefix);
    out->kind = gf_json_read_kind(j->kind, path, pr);
    if (out->kind == NULL)
        return -1;
    if (j->path != NULL) {
        gf_problem(pr, "%s.path: only a stage of kind \"plugin\" has a path (this one is %s)",
                   prefix, out->kind->name);
        return -1;
    }
    snprintf(path, sizeof path, "%s.params", prefix);
    return gf_params_read(out->kind, j->params, path, &out->params, pr);
}

/* Reads the stage object `m`, element `k` of a "stages" array, into
 * p->stages[k].  Returns 0 or -1 with every problem reported. */
static int read_stage_object(const gf_stage_json *j, const cJSON *m, const char *config_dir,
                             const char *prefix, gf_pipeline *p, gf_problems *pr) {
    static const char *const keys[] = {"kind",   "params", "path",   "config_dir",
                                       "plugin", "doc",    "inputs", "outputs"};
    const cJSON *items[8] = {0};
    char path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];

    snprintf(path, sizeof path, "%s.stages[%" PRIu32 "]", prefix, p->stage_count);
    if (!cJSON_IsObject(m)) {
        gf_json_describe(m, got, sizeof got);
        gf_problem(pr, "%s: expected an object with \"kind\" and optional \"params\", got %s", path,
                   got);
        return -1;
    }
    /* A configuration's stage takes kind, params and path; a LIST
     * reply's may carry more (and what a newer daemon adds). */
    if (gf_json_collect_keys(m, path, keys, j->listed ? 8 : 3, j->listed, items, pr) < 0)
        return -1;
    gf_stage_json sj = {.kind = items[0],
                        .params = items[1],
                        .path = items[2],
                        .config_dir = items[3],
                        .plugin = items[4],
                        .inputs = items[6],
                        .outputs = items[7],
                        .listed = j->listed};
    return read_stage(&sj, config_dir, path, &p->stages[p->stage_count], pr);
}

int gf_json_read_stages(const gf_stage_json *j, const char *config_dir, const char *prefix,
                        gf_pipeline *p, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];
    const cJSON *m;
    int rc = 0;
    p->stage_count = 0;
    if (j->stages == NULL) {
        p->stage_count = 1;
        if (read_stage(j, config_dir, prefix, &p->stages[0], pr) == 0)
            return 0;
        p->stage_count = 0;
        return -1;
    }
    if (j->kind || j->params || j->path) {
        gf_problem(pr, "%s: give either \"stages\" or \"kind\" (with its \"params\"), not both",
                   prefix);
        return -1;
    }
    int n = cJSON_IsArray(j->stages) ? cJSON_GetArraySize(j->stages) : -1;
    if (n < 1 || n > GF_STAGES_MAX) {
        gf_json_describe(j->stages, got, sizeof got);
        gf_problem(pr, "%s.stages: expected an array of 1 to %d stage objects, got %s", prefix,
                   GF_STAGES_MAX, got);
        return -1;
    }
    cJSON_ArrayForEach(m, j->stages) {
        if (read_stage_object(j, m, config_dir, prefix, p, pr) < 0) {
            rc = -1;
            break;
        }
        p->stage_count++;
    }
    if (rc < 0) {
        gf_pipeline_release(p);
        p->stage_count = 0;
    }
    return rc;
}

/* Files each member of the plugin's "params" object `obj` (NULL: none)
 * under its index in the plugin's table into given[] (zeroed by the caller),
 * reporting unknown and duplicate keys.  Returns 0 or -1. */
static int collect_plugin_params(const gf_plugin *api, const cJSON *obj, const char *prefix,
                                 const cJSON **given, gf_problems *pr) {
    char path[GF_PATH_BYTES], list[GF_KNOWN_LIST_BYTES];
    const char *names[GF_PLUGIN_PARAMS_MAX];
    const cJSON *m;
    int rc = 0;
    for (uint32_t i = 0; i < api->param_count; i++)
        names[i] = api->params[i].key;
    if (obj == NULL)
        return 0;
    cJSON_ArrayForEach(m, obj) {
        int i = gf_json_name_index(names, api->param_count, m->string);
        gf_json_key_path(prefix, m->string, path, sizeof path);
        if (i < 0) {
            gf_json_join_names(names, api->param_count, list, sizeof list);
            gf_problem(pr, "%s: unknown parameter of plugin %s (known: %s)", path, api->name,
                       api->param_count ? list : "none");
            rc = -1;
        } else if (given[i]) {
            gf_problem(pr, "%s: duplicate key", path);
            rc = -1;
        } else {
            given[i] = m;
        }
    }
    return rc;
}

/* Reads the given value `v` of plugin parameter `d` into *value after
 * checking its type and range.  Returns 0 or -1 with the problem reported. */
static int read_plugin_value(const gf_plugin_param *d, const cJSON *v, const char *path,
                             gf_plugin_value *value, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];

    switch (d->type) {
    case GF_PLUGIN_NUMBER:
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= d->min && v->valuedouble <= d->max)) {
            gf_json_describe(v, got, sizeof got);
            gf_problem(pr, "%s: expected a number in [%g, %g], got %s", path, d->min, d->max, got);
            return -1;
        }
        value->number = v->valuedouble;
        return 0;
    case GF_PLUGIN_INTEGER:
        return gf_json_read_integer(v, path, d->min, d->max, &value->number, pr);
    case GF_PLUGIN_STRING: {
        size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
        if (!cJSON_IsString(v) || n < d->min || n > d->max) {
            gf_json_describe(v, got, sizeof got);
            gf_problem(pr, "%s: expected a string of %g to %g bytes, got %s", path, d->min, d->max,
                       got);
            return -1;
        }
        value->string = v->valuestring;
        return 0;
    }
    }
    return 0;
}

/* Reads a plugin's parameters from the stage's "params" object `obj` (NULL:
 * none) with the plugin's table into values[], whose strings then point
 * into obj: defaults, types, ranges, required and unknown keys, each problem
 * named by its key path.  Returns 0 or -1. */
static int read_plugin_values(const gf_plugin *api, const cJSON *obj, const char *prefix,
                              gf_plugin_value *values, gf_problems *pr) {
    char path[GF_PATH_BYTES];
    const cJSON *given[GF_PLUGIN_PARAMS_MAX] = {0};
    int rc = collect_plugin_params(api, obj, prefix, given, pr);
    for (uint32_t i = 0; i < api->param_count; i++) {
        const gf_plugin_param *d = &api->params[i];
        gf_json_key_path(prefix, d->key, path, sizeof path);
        values[i].number = d->default_number;
        values[i].string = d->default_string ? d->default_string : "";
        if (given[i] == NULL) {
            if (d->required) {
                gf_problem(pr, "%s: missing (required: %s)", path, d->doc ? d->doc : d->key);
                rc = -1;
            }
            continue;
        }
        if (read_plugin_value(d, given[i], path, &values[i], pr) < 0)
            rc = -1;
    }
    return rc;
}

int gf_plugin_stage_open(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                         gf_problems *pr) {
    char why[GF_PATH_BYTES * 2], path[GF_PATH_BYTES];
    gf_plugin_value values[GF_PLUGIN_PARAMS_MAX];
    const gf_plugin *api;
    gf_errorf(path, sizeof path, "%s.path", prefix);
    if ((api = gf_plugin_stage_dlopen(st, why, sizeof why)) == NULL) {
        gf_problem(pr, "%s: %s", path, why);
        return -1;
    }
    gf_errorf(path, sizeof path, "%s.params", prefix);
    /* The values' strings point into obj until create() has copied them. */
    const char *text = gf_plugin_stage_params_json(st);
    cJSON *obj = text[0] ? cJSON_Parse(text) : NULL;
    int rc = read_plugin_values(api, obj, path, values, pr);
    if (rc == 0 && (rc = gf_plugin_stage_create(st, values, max_in_bytes, why, sizeof why)) < 0)
        gf_problem(pr, "%s: %s", prefix, why);
    cJSON_Delete(obj);
    return rc;
}

/* Written once by the daemon's main thread before any other thread starts
 * (pthread_create orders it before their reads). */
static gf_plugin_prober plugin_prober;

void gf_set_plugin_prober(gf_plugin_prober prober) {
    plugin_prober = prober;
}

/* Loads and creates one plugin stage, unless it is already or the prober
 * refuses it. */
static int open_plugin_stage(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                             gf_problems *pr) {
    if (gf_plugin_stage_state(st) != NULL)
        return 0;
    if (plugin_prober != NULL && plugin_prober(st, max_in_bytes, prefix, pr) < 0)
        return -1;
    return gf_plugin_stage_open(st, max_in_bytes, prefix, pr);
}

int gf_pipeline_open_plugins(gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr) {
    char path[GF_PATH_BYTES];
    uint64_t max_in = max_frame_bytes;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        gf_stage *s = &p->stages[k];
        if (p->stage_count > 1)
            snprintf(path, sizeof path, "%s.stages[%" PRIu32 "]", prefix, k);
        else
            snprintf(path, sizeof path, "%s", prefix);
        if (gf_kind_is_plugin(s->kind) && open_plugin_stage(s->params.plugin, max_in, path, pr) < 0)
            return -1;
        if (s->kind->device_api && s->params.plugin == NULL &&
            (s->params.plugin = gf_plugin_stage_new_builtin(&s->params)) == NULL) {
            gf_problem(pr, "%s: out of memory", path);
            return -1;
        }
        max_in = s->kind->max_output_bytes(&s->params, max_in);
    }
    return 0;
}

int gf_pipeline_check_stages(const gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr) {
    char why[GF_PATH_BYTES];
    uint64_t max_in = max_frame_bytes;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        const gf_stage *s = &p->stages[k];
        char at[64] = "";
        if (p->stage_count > 1)
            snprintf(at, sizeof at, ".stages[%" PRIu32 "] (%s)", k, s->kind->name);
        why[0] = '\0';
        if (s->kind->check_params(&s->params, max_in, why, sizeof why) != 0) {
            gf_problem(pr, "%s%s.params: %s", prefix, at, why[0] ? why : "invalid parameters");
            return -1;
        }
        uint64_t out = s->kind->max_output_bytes(&s->params, max_in);
        if (k + 1 < p->stage_count && out == 0 && max_in > 0) {
            gf_problem(pr, "%s%s: no input of at most %" PRIu64 " bytes gives an output", prefix,
                       at, max_in);
            return -1;
        }
        max_in = out;
    }
    /* The lengths compose: stage 0's smallest input goes through them all. */
    uint64_t probe = p->stages[0].kind->warmup_input_bytes(&p->stages[0].params);
    if (p->stage_count > 1 && probe > 0 &&
        gf_pipeline_output_bytes(p, probe, why, sizeof why) < 0) {
        gf_problem(pr,
                   "%s.stages: the stages' lengths do not fit together: %s (for stage 0's "
                   "input of %" PRIu64 " bytes)",
                   prefix, why, probe);
        return -1;
    }
    return 0;
}

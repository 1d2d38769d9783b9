/* SPDX-License-Identifier: MIT */
/*
 * The LIST document both ways: configured pipelines to the LIST reply, and a
 * LIST reply back to pipelines (their stages read by stages_json.c, plugin
 * stages left unloaded); listing.h is the contract.
 */
#include "listing.h"

#include <stdio.h>
#include <stdlib.h>

#include "frame_desc_json.h"
#include "plugin.h"

/* Adds one stage's members to `obj`: "kind" and "params", and for a plugin
 * "plugin" (its name, once loaded), "path" and "config_dir".  -1 when out of
 * memory. */
static int add_stage(cJSON *obj, const gf_stage *s) {
    int plugin = gf_kind_is_plugin(s->kind);
    cJSON *params;
    if (!cJSON_AddStringToObject(obj, "kind", plugin ? GF_PLUGIN_KIND_NAME : s->kind->name))
        return -1;
    if (plugin) {
        const gf_plugin_stage *st = s->params.plugin;
        if ((gf_plugin_stage_api(st) && !cJSON_AddStringToObject(obj, "plugin", s->kind->name)) ||
            !cJSON_AddStringToObject(obj, "path", gf_plugin_stage_path(st)) ||
            !cJSON_AddStringToObject(obj, "config_dir", gf_plugin_stage_config_dir(st)))
            return -1;
    }
    params = gf_stage_params_to_json(s);
    if (params == NULL || !cJSON_AddItemToObject(obj, "params", params)) {
        cJSON_Delete(params);
        return -1;
    }
    return 0;
}

/* Adds "inputs" and "outputs" to `obj`.  -1 when out of memory. */
static int add_desc(cJSON *obj, const gf_frame_desc *in, const gf_frame_desc *out) {
    cJSON *a = gf_frame_desc_to_json(in), *b = a ? gf_frame_desc_to_json(out) : NULL;
    if (a == NULL || !cJSON_AddItemToObject(obj, "inputs", a)) {
        cJSON_Delete(a);
        cJSON_Delete(b);
        return -1;
    }
    if (b == NULL || !cJSON_AddItemToObject(obj, "outputs", b)) {
        cJSON_Delete(b);
        return -1;
    }
    return 0;
}

/* One pipeline's LIST entry; NULL when out of memory. */
static cJSON *pipeline_to_json(const gf_pipeline *p) {
    cJSON *obj = cJSON_CreateObject(), *arr;
    char doc[GF_KNOWN_LIST_BYTES];
    gf_frame_desc in, out;
    gf_pipeline_describe(p, &in, &out);
    if (obj == NULL || !cJSON_AddNumberToObject(obj, "id", (double)p->id) ||
        !cJSON_AddStringToObject(obj, "name", p->name))
        goto fail;
    if (p->stage_count == 1) {
        if (add_stage(obj, &p->stages[0]) < 0 || add_desc(obj, &in, &out) < 0 ||
            !cJSON_AddStringToObject(obj, "doc", p->stages[0].kind->doc))
            goto fail;
        return obj;
    }
    if ((arr = cJSON_AddArrayToObject(obj, "stages")) == NULL)
        goto fail;
    for (uint32_t k = 0; k < p->stage_count; k++) {
        cJSON *st = cJSON_CreateObject();
        if (st == NULL || !cJSON_AddItemToArray(arr, st)) {
            cJSON_Delete(st);
            goto fail;
        }
        gf_stage_describe(p, k, &in, &out);
        if (add_stage(st, &p->stages[k]) < 0 || add_desc(st, &in, &out) < 0 ||
            !cJSON_AddStringToObject(st, "doc", p->stages[k].kind->doc))
            goto fail;
    }
    gf_pipeline_describe(p, &in, &out);
    if (add_desc(obj, &in, &out) < 0)
        goto fail;
    gf_pipeline_kinds_text(p, doc, sizeof doc);
    char text[GF_KNOWN_LIST_BYTES + 64];
    snprintf(text, sizeof text, "Runs %s, each stage's output the next one's input.", doc);
    if (!cJSON_AddStringToObject(obj, "doc", text))
        goto fail;
    return obj;
fail:
    cJSON_Delete(obj);
    return NULL;
}

cJSON *gf_pipelines_to_json(const gf_pipeline *pipelines, size_t count) {
    cJSON *root = cJSON_CreateObject(), *arr;

    if (root == NULL)
        goto fail;
    arr = cJSON_AddArrayToObject(root, "pipelines");
    if (arr == NULL)
        goto fail_root;
    for (size_t i = 0; i < count; i++) {
        cJSON *obj = pipeline_to_json(&pipelines[i]);
        if (obj == NULL)
            goto fail_root;
        if (!cJSON_AddItemToArray(arr, obj)) {
            cJSON_Delete(obj);
            goto fail_root;
        }
    }
    return root;

fail_root:
    cJSON_Delete(root);
fail:
    return NULL;
}

enum list_key {
    L_ID,
    L_NAME,
    L_KIND,
    L_PARAMS,
    L_PATH,
    L_CONFIG_DIR,
    L_PLUGIN,
    L_STAGES,
    L_INPUTS,
    L_OUTPUTS,
    L_COUNT_
};
static const char *const list_keys[L_COUNT_] = {
    "id", "name", "kind", "params", "path", "config_dir", "plugin", "stages", "inputs", "outputs"};

/* Parses one element of a LIST reply's "pipelines" into `p`.  Keys other than
 * list_keys ("doc", or what a newer daemon adds) are ignored.  Plugin stages
 * are left unloaded (gf_pipeline_open_plugins loads them). */
static int parse_listed_pipeline(const cJSON *v, size_t index, const gf_pipeline *before,
                                 gf_pipeline *p, gf_problems *pr) {
    const cJSON *items[L_COUNT_] = {0};
    char prefix[32], path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
    double id;

    snprintf(prefix, sizeof prefix, "pipelines[%zu]", index);
    if (!cJSON_IsObject(v)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a pipeline object, got %s", prefix, got);
        return -1;
    }
    if (gf_json_collect_keys(v, prefix, list_keys, L_COUNT_, 1, items, pr) < 0)
        return -1;
    for (int k = L_ID; k <= L_NAME; k++) {
        if (items[k] == NULL) {
            gf_problem(pr, "%s.%s: missing (required)", prefix, list_keys[k]);
            return -1;
        }
    }
    if (items[L_STAGES] == NULL && items[L_PARAMS] == NULL) {
        gf_problem(pr, "%s.params: missing (required)", prefix);
        return -1;
    }
    /* Ids are array positions; a list that says otherwise is corrupt. */
    snprintf(path, sizeof path, "%s.id", prefix);
    if (gf_json_read_integer(items[L_ID], path, (double)index, (double)index, &id, pr) < 0)
        return -1;
    p->id = (uint32_t)id;
    snprintf(path, sizeof path, "%s.name", prefix);
    if (gf_json_read_pipeline_name(items[L_NAME], path, before, index, p->name, pr) < 0)
        return -1;
    snprintf(path, sizeof path, "%s (%s)", prefix, p->name);
    gf_stage_json j = {.kind = items[L_KIND],
                       .params = items[L_PARAMS],
                       .path = items[L_PATH],
                       .config_dir = items[L_CONFIG_DIR],
                       .plugin = items[L_PLUGIN],
                       .stages = items[L_STAGES],
                       .inputs = items[L_INPUTS],
                       .outputs = items[L_OUTPUTS],
                       .listed = 1};
    return gf_json_read_stages(&j, NULL, path, p, pr);
}

int gf_pipelines_from_json(const char *json, gf_pipeline **out, size_t *count, char *err,
                           size_t err_len) {
    char got[GF_VALUE_TEXT_BYTES];
    gf_problems first, *pr = &first;
    gf_pipeline *pipelines = NULL;
    const cJSON *arr, *m;
    size_t n, i = 0;
    cJSON *root;

    gf_problems_init(&first, err, err_len, 0, NULL);
    *out = NULL;
    *count = 0;
    root = gf_json_parse_document("pipeline list", json, pr);
    if (root == NULL)
        goto fail;
    arr = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "pipelines") : NULL;
    if (!cJSON_IsArray(arr)) {
        gf_json_describe(cJSON_IsObject(root) ? arr : root, got, sizeof got);
        gf_problem(pr,
                   "pipelines: expected an array in an object {\"pipelines\": [...]}, "
                   "got %s",
                   got);
        goto fail_root;
    }
    n = (size_t)cJSON_GetArraySize(arr);
    if (n > GF_MAX_PIPELINES) {
        gf_problem(pr, "pipelines: expected at most %d pipelines, got %zu", GF_MAX_PIPELINES, n);
        goto fail_root;
    }
    if (n > 0) {
        pipelines = calloc(n, sizeof *pipelines);
        if (pipelines == NULL) {
            gf_problem(pr, "pipelines: out of memory");
            goto fail_root;
        }
    }
    cJSON_ArrayForEach(m, arr) {
        if (parse_listed_pipeline(m, i, pipelines, &pipelines[i], pr) < 0)
            goto fail_pipelines;
        i++;
    }
    cJSON_Delete(root);
    *out = pipelines;
    *count = n;
    return 0;

fail_pipelines:
    gf_pipelines_free(pipelines, i);
fail_root:
    cJSON_Delete(root);
fail:
    return -1;
}

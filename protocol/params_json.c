/* SPDX-License-Identifier: MIT */
/*
 * A stage's parameters from JSON and back; params_json.h is the contract.
 */
#include "params_json.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "util.h"

/* Reports `path` as a parameter `kind` does not have, listing those it has. */
static void unknown_param(const gf_pipeline_kind *kind, const char *path, gf_problems *pr) {
    char list[GF_KNOWN_LIST_BYTES];
    size_t o = 0;

    if (kind->param_count == 0) {
        gf_problem(pr, "%s: unknown parameter (kind %s takes no parameters)", path, kind->name);
        return;
    }
    list[0] = '\0';
    for (size_t i = 0; i < kind->param_count && o < sizeof list; i++)
        o += gf_errorf(list + o, sizeof list - o, "%s%s", i ? ", " : "", kind->params[i].key);
    gf_problem(pr, "%s: unknown parameter of kind %s (known: %s)", path, kind->name, list);
}

/* Reads the value `m` of parameter `d` into its field of `out`.  Returns 0
 * or -1 with the problem reported. */
static int read_param(const gf_param_desc *d, const cJSON *m, const char *path, gf_params *out,
                      gf_problems *pr) {
    char *field = (char *)out + d->offset, got[GF_VALUE_TEXT_BYTES];
    int bad = 0;

    switch (d->type) {
    case GF_PARAM_F32: {
        float f;
        if (gf_json_read_f32(m, path, d->min, d->max, &f, pr) < 0)
            return -1;
        memcpy(field, &f, sizeof f);
        return 0;
    }
    case GF_PARAM_U32: {
        double lo = d->min < 0 ? 0 : d->min, hi = d->max > UINT32_MAX ? UINT32_MAX : d->max;
        double v;
        uint32_t u;
        if (gf_json_read_integer(m, path, lo, hi, &v, pr) < 0)
            return -1;
        u = (uint32_t)v;
        memcpy(field, &u, sizeof u);
        return 0;
    }
    case GF_PARAM_F32x3: {
        float f[3];
        if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 3) {
            gf_json_describe(m, got, sizeof got);
            gf_problem(pr, "%s: expected an array of 3 numbers, got %s", path, got);
            return -1;
        }
        for (unsigned i = 0; i < 3; i++) {
            char epath[GF_PATH_BYTES + 16];
            snprintf(epath, sizeof epath, "%s[%u]", path, i);
            if (gf_json_read_f32(cJSON_GetArrayItem(m, (int)i), epath, d->min, d->max, &f[i], pr) <
                0)
                bad = 1;
        }
        if (bad)
            return -1;
        memcpy(field, f, sizeof f);
        return 0;
    }
    case GF_PARAM_ENUM: {
        char list[GF_KNOWN_LIST_BYTES];
        size_t o = 0;
        if (cJSON_IsString(m)) {
            for (uint32_t i = 0; d->choices[i] != NULL; i++) {
                if (strcmp(d->choices[i], m->valuestring) == 0) {
                    memcpy(field, &i, sizeof i);
                    return 0;
                }
            }
        }
        list[0] = '\0';
        for (uint32_t i = 0; d->choices[i] != NULL && o < sizeof list; i++)
            o += gf_errorf(list + o, sizeof list - o, "%s\"%s\"", i ? ", " : "", d->choices[i]);
        gf_json_describe(m, got, sizeof got);
        gf_problem(pr, "%s: expected one of %s, got %s", path, list, got);
        return -1;
    }
    case GF_PARAM_BOOL: {
        uint32_t u;
        if (!cJSON_IsBool(m)) {
            gf_json_describe(m, got, sizeof got);
            gf_problem(pr, "%s: expected true or false, got %s", path, got);
            return -1;
        }
        u = cJSON_IsTrue(m) ? 1u : 0u;
        memcpy(field, &u, sizeof u);
        return 0;
    }
    }
    gf_problem(pr, "%s: parameter of an unsupported type %d", path, (int)d->type);
    return -1;
}

int gf_params_read(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                   gf_params *out, gf_problems *pr) {
    char path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
    const cJSON *m;
    int rc = 0;

    assert(kind != NULL && out != NULL);
    if (prefix == NULL)
        prefix = "params";
    memset(out, 0, sizeof *out);
    gf_params_defaults(kind, out);
    if (obj == NULL)
        return 0;
    if (!cJSON_IsObject(obj)) {
        gf_json_describe(obj, got, sizeof got);
        gf_problem(pr, "%s: expected an object of the parameters of kind %s, got %s", prefix,
                   kind->name, got);
        return -1;
    }
    cJSON_ArrayForEach(m, obj) {
        const gf_param_desc *d = NULL;
        int twin = 0;

        for (size_t i = 0; i < kind->param_count; i++)
            if (strcmp(kind->params[i].key, m->string) == 0)
                d = &kind->params[i];
        gf_json_key_path(prefix, m->string, path, sizeof path);
        if (d == NULL) {
            unknown_param(kind, path, pr);
            rc = -1;
            continue;
        }
        /* Known keys are few, so this scan for an earlier twin stays short. */
        for (const cJSON *p = obj->child; p != m; p = p->next)
            if (strcmp(p->string, m->string) == 0)
                twin = 1;
        if (twin)
            gf_problem(pr, "%s: duplicate key", path);
        if (twin || read_param(d, m, path, out, pr) < 0)
            rc = -1;
    }
    return rc;
}

int gf_params_from_json(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                        gf_params *out, char *err, size_t err_len) {
    gf_problems pr;

    gf_problems_init(&pr, err, err_len, 0, NULL);
    return gf_params_read(kind, obj, prefix, out, &pr);
}

/*
 * A JSON number for the float32 `f`: the shortest decimal (up to 9 significant
 * digits, which always suffice) that reads back as `f` through the path a
 * reader takes (text -> double -> float), so the LIST reply shows 0.485, not
 * 0.48500001430511475, and still round-trips bit for bit.
 */
static cJSON *f32_to_json(float f) {
    char text[32];

    for (int digits = 6; digits <= 9; digits++) {
        double d;

        snprintf(text, sizeof text, "%.*g", digits, (double)f);
        d = strtod(text, NULL);
        if ((float)d == f)
            return cJSON_CreateNumber(d);
    }
    return cJSON_CreateNumber((double)f);
}

/* {"<key>": value, ...} with every parameter of `kind`; NULL when out of
 * memory. */
cJSON *gf_params_to_json(const gf_pipeline_kind *kind, const gf_params *p) {
    cJSON *obj = cJSON_CreateObject();

    if (obj == NULL)
        goto fail;
    for (size_t i = 0; i < kind->param_count; i++) {
        const gf_param_desc *d = &kind->params[i];
        const char *field = (const char *)p + d->offset;
        cJSON *v = NULL;

        switch (d->type) {
        case GF_PARAM_F32: {
            float f;
            memcpy(&f, field, sizeof f);
            v = f32_to_json(f);
            break;
        }
        case GF_PARAM_U32: {
            uint32_t u;
            memcpy(&u, field, sizeof u);
            v = cJSON_CreateNumber((double)u);
            break;
        }
        case GF_PARAM_ENUM: {
            uint32_t u;
            memcpy(&u, field, sizeof u);
            v = cJSON_CreateString(gf_param_choice(d, u));
            break;
        }
        case GF_PARAM_BOOL: {
            uint32_t u;
            memcpy(&u, field, sizeof u);
            v = cJSON_CreateBool(u != 0);
            break;
        }
        case GF_PARAM_F32x3: {
            float f[3];
            memcpy(f, field, sizeof f);
            v = cJSON_CreateArray();
            for (int j = 0; v != NULL && j < 3; j++) {
                cJSON *e = f32_to_json(f[j]);
                if (e == NULL || !cJSON_AddItemToArray(v, e)) {
                    cJSON_Delete(e);
                    cJSON_Delete(v);
                    v = NULL;
                }
            }
            break;
        }
        }
        if (v == NULL)
            goto fail_obj;
        if (!cJSON_AddItemToObject(obj, d->key, v)) {
            cJSON_Delete(v);
            goto fail_obj;
        }
    }
    return obj;

fail_obj:
    cJSON_Delete(obj);
fail:
    return NULL;
}

cJSON *gf_stage_params_to_json(const gf_stage *s) {
    if (!gf_kind_is_plugin(s->kind))
        return gf_params_to_json(s->kind, &s->params);
    const char *text = gf_plugin_stage_params_json(s->params.plugin);
    return text[0] ? cJSON_Parse(text) : cJSON_CreateObject();
}

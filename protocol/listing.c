/*
 * The LIST codec and the JSON readers it shares with daemon/config.c;
 * listing.h is the contract.
 */
#include "listing.h"

#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "util.h"

/* 2^53: above it a JSON number (a double in cJSON) no longer holds every
 * integer exactly, so integers must not exceed it. */
#define GF_JSON_INT_EXACT_MAX 9007199254740992.0
/* At most this many characters of an offending value are quoted in a problem. */
#define GF_QUOTE_MAX_CHARS 40
/* The most kinds one "(known: ...)" list names. */
#define GF_KINDS_LISTED_MAX 32
/* Room for one problem's line before a prefix is put in front of it. */
#define GF_PROBLEM_LINE_BYTES 1024

/* ---- error text helpers ------------------------------------------------- */

void gf_problems_init(gf_problems *pr, char *buf, size_t cap, int all, const char *prefix) {
    memset(pr, 0, sizeof *pr);
    pr->buf = cap > 0 ? buf : NULL;
    pr->cap = buf != NULL ? cap : 0;
    pr->all = all;
    pr->prefix = prefix;
    if (pr->buf != NULL)
        pr->buf[0] = '\0';
}

void gf_problem(gf_problems *pr, const char *fmt, ...) {
    char line[GF_PROBLEM_LINE_BYTES];
    va_list ap;
    int n;

    va_start(ap, fmt);
    gf_verrorf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One problem, one line: text that is not ours (a plugin's reason,
     * dlerror(), a path from the file) may hold control characters. */
    for (char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    pr->count++;
    if (pr->buf == NULL)
        return;
    if (!pr->all) {
        if (pr->count == 1) {
            snprintf(pr->buf, pr->cap, "%s%s%s", pr->prefix ? pr->prefix : "",
                     pr->prefix ? ": " : "", line);
            pr->kept_count = 1;
        }
        return;
    }
    if (pr->kept_count + 1 < pr->count)
        return; /* an earlier line did not fit: keep the text in order */
    n = snprintf(pr->buf + pr->used, pr->cap - pr->used, "%s%s%s\n", pr->prefix ? pr->prefix : "",
                 pr->prefix ? ": " : "", line);
    if (n < 0 || (size_t)n >= pr->cap - pr->used) {
        pr->buf[pr->used] = '\0';
        return;
    }
    pr->used += (size_t)n;
    pr->kept_count++;
}

/* Writes `s` as a double-quoted, escaped string of at most GF_QUOTE_MAX_CHARS
 * source characters ("..." marks a cut) into buf[len]. */
static void quote(const char *s, char *buf, size_t len) {
    size_t o = 0, i;

    if (len < 8) {
        if (len > 0)
            buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    for (i = 0; s[i] != '\0' && i < GF_QUOTE_MAX_CHARS; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t n;

        if (c == '"' || c == '\\')
            n = (size_t)snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n')
            n = (size_t)snprintf(esc, sizeof esc, "\\n");
        else if (c == '\t')
            n = (size_t)snprintf(esc, sizeof esc, "\\t");
        else if (c < 0x20 || c == 0x7f)
            n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
        else {
            esc[0] = (char)c;
            n = 1;
        }
        if (o + n + 5 > len) /* keep room for `..."` and the NUL */
            break;
        memcpy(buf + o, esc, n);
        o += n;
    }
    if (s[i] != '\0') {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

/* Formats a JSON number the way a reader wrote it: integers without a
 * fraction, other values in the shortest form that reads back the same. */
static void format_number(double d, char *buf, size_t len) {
    if (!isfinite(d)) {
        snprintf(buf, len, "%s", isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
    } else if (d == floor(d) && fabs(d) <= GF_JSON_INT_EXACT_MAX) {
        snprintf(buf, len, "%.0f", d);
    } else {
        snprintf(buf, len, "%.15g", d);
        if (strtod(buf, NULL) != d)
            snprintf(buf, len, "%.17g", d);
    }
}

/* Describes a JSON value for the "got ..." half of an error: numbers as
 * written, strings quoted, other types named. */
void gf_json_describe(const cJSON *v, char *buf, size_t len) {
    if (v == NULL)
        snprintf(buf, len, "nothing");
    else if (cJSON_IsNumber(v))
        format_number(v->valuedouble, buf, len);
    else if (cJSON_IsString(v))
        quote(v->valuestring, buf, len);
    else if (cJSON_IsTrue(v))
        snprintf(buf, len, "true");
    else if (cJSON_IsFalse(v))
        snprintf(buf, len, "false");
    else if (cJSON_IsNull(v))
        snprintf(buf, len, "null");
    else if (cJSON_IsArray(v))
        snprintf(buf, len, "an array of %d elements", cJSON_GetArraySize(v));
    else if (cJSON_IsObject(v))
        snprintf(buf, len, "an object");
    else
        snprintf(buf, len, "an invalid value");
}

/* Nonzero when `key` can stand in a key path unquoted. */
static int plain_key(const char *key) {
    if (key[0] == '\0')
        return 0;
    for (const char *c = key; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return 0;
    return 1;
}

/* Writes "<prefix>.<key>" (or just "<key>" for an empty prefix) into
 * buf[len], quoting a key that is not a plain identifier. */
static void key_path(const char *prefix, const char *key, char *buf, size_t len) {
    char k[GF_VALUE_TEXT_BYTES];

    if (plain_key(key))
        snprintf(k, sizeof k, "%s", key);
    else
        quote(key, k, sizeof k);
    if (prefix[0] == '\0')
        snprintf(buf, len, "%s", k);
    else
        snprintf(buf, len, "%s.%s", prefix, k);
}

/* Joins `names[count]` with ", " into buf[len]; "..." marks a cut. */
static void join_names(const char *const *names, size_t count, char *buf, size_t len) {
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        int n = snprintf(buf + o, len - o, "%s%s", i ? ", " : "", names[i]);
        if (n < 0 || (size_t)n >= len - o) {
            if (len >= 4)
                memcpy(buf + len - 4, "...", 4);
            return;
        }
        o += (size_t)n;
    }
}

/* Finds `key` among names[count]; returns its index or -1. */
int gf_json_name_index(const char *const *names, size_t count, const char *key) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], key) == 0)
            return (int)i;
    return -1;
}

/* ---- typed readers: each writes "<path>: expected ..., got ..." --------- */

/* Reads an integer in [min, max] (both within 2^53) from `v`. */
int gf_json_read_integer(const cJSON *v, const char *path, double min, double max, double *out,
                         gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES], lo[32], hi[32];

    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) <= GF_JSON_INT_EXACT_MAX && d >= min &&
            d <= max) {
            *out = d;
            return 0;
        }
    }
    gf_json_describe(v, got, sizeof got);
    format_number(min, lo, sizeof lo);
    format_number(max, hi, sizeof hi);
    gf_problem(pr, "%s: expected an integer in [%s, %s], got %s", path, lo, hi, got);
    return -1;
}

/*
 * Reads a number into a float32 and checks the value stored, not the text,
 * against [min, max]: what is stored lies in the range (as the kind's own
 * check_params sees it) and reads back unchanged from the LIST reply.
 */
static int read_f32(const cJSON *v, const char *path, double min, double max, float *out,
                    gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES], lo[32], hi[32];

    format_number(min, lo, sizeof lo);
    format_number(max, hi, sizeof hi);
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (isfinite(d) && fabs(d) <= (double)FLT_MAX) {
            float f = (float)d;
            if ((double)f >= min && (double)f <= max) {
                *out = f;
                return 0;
            }
            if (d >= min && d <= max) {
                format_number(d, got, sizeof got);
                gf_problem(pr,
                           "%s: expected a number in [%s, %s], got %s, which is %.9g as a float32",
                           path, lo, hi, got, (double)f);
                return -1;
            }
        }
    }
    gf_json_describe(v, got, sizeof got);
    gf_problem(pr, "%s: expected a number in [%s, %s], got %s", path, lo, hi, got);
    return -1;
}

/* Reads one of names[count] from `v`; returns its index or -1. */
int gf_json_read_choice(const cJSON *v, const char *path, const char *const *names, size_t count,
                        gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES], list[GF_KNOWN_LIST_BYTES];
    size_t o = 0;

    if (cJSON_IsString(v)) {
        int i = gf_json_name_index(names, count, v->valuestring);
        if (i >= 0)
            return i;
    }
    list[0] = '\0';
    for (size_t i = 0; i < count && o < sizeof list; i++) {
        int n = snprintf(list + o, sizeof list - o, "%s\"%s\"", i ? ", " : "", names[i]);
        if (n < 0)
            break;
        o += (size_t)n;
    }
    gf_json_describe(v, got, sizeof got);
    gf_problem(pr, "%s: expected one of %s, got %s", path, list, got);
    return -1;
}

/* Nonzero when `name` is 1..GF_PIPELINE_NAME_MAX-1 characters of
 * [A-Za-z0-9_.-]. */
static int valid_pipeline_name(const char *name) {
    size_t n = strlen(name);

    if (n == 0 || n >= GF_PIPELINE_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* Reads a pipeline name into dst[GF_PIPELINE_NAME_MAX] and checks that none
 * of the `count` pipelines before it has the same name. */
int gf_json_read_pipeline_name(const cJSON *v, const char *path, const gf_pipeline *before,
                               size_t count, char *dst, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];

    if (!cJSON_IsString(v) || !valid_pipeline_name(v->valuestring)) {
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a string of 1 to %d characters from [A-Za-z0-9_.-], got %s",
                   path, GF_PIPELINE_NAME_MAX - 1, got);
        return -1;
    }
    for (size_t j = 0; j < count; j++) {
        if (strcmp(before[j].name, v->valuestring) == 0) {
            gf_problem(pr, "%s: duplicate name \"%s\" (also pipelines[%zu].name)", path,
                       v->valuestring, j);
            return -1;
        }
    }
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* Looks up the kind named by `v`; on failure lists the known kinds. */
const gf_pipeline_kind *gf_json_read_kind(const cJSON *v, const char *path, gf_problems *pr) {
    const gf_pipeline_kind *kinds, *kind = NULL;
    const char *names[GF_KINDS_LISTED_MAX];
    char got[GF_VALUE_TEXT_BYTES], list[GF_KNOWN_LIST_BYTES];
    size_t count = 0;

    if (cJSON_IsString(v))
        kind = gf_pipeline_kind_find(v->valuestring);
    if (kind != NULL)
        return kind;
    kinds = gf_pipeline_kinds(&count);
    if (count > GF_KINDS_LISTED_MAX - 1)
        count = GF_KINDS_LISTED_MAX - 1;
    for (size_t i = 0; i < count; i++)
        names[i] = kinds[i].name;
    names[count++] = GF_PLUGIN_KIND_NAME;
    join_names(names, count, list, sizeof list);
    gf_json_describe(v, got, sizeof got);
    if (cJSON_IsString(v))
        gf_problem(pr, "%s: unknown kind %s (known: %s)", path, got, list);
    else
        gf_problem(pr, "%s: expected the name of a kind (%s), got %s", path, list, got);
    return NULL;
}

/*
 * Walks the members of the object `obj` and files each under its index in
 * names[count] into items[] (which the caller zeroed).  An unknown key is an
 * error unless `allow_unknown`; a repeated known key always is (its first
 * value is the one filed).  Reports every such key and returns -1 if there
 * was one, else 0.
 */
int gf_json_collect_keys(const cJSON *obj, const char *prefix, const char *const *names,
                         size_t count, int allow_unknown, const cJSON **items, gf_problems *pr) {
    char path[GF_PATH_BYTES], list[GF_KNOWN_LIST_BYTES];
    const cJSON *m;
    int rc = 0;

    cJSON_ArrayForEach(m, obj) {
        int i = gf_json_name_index(names, count, m->string);

        if (i < 0 && allow_unknown)
            continue;
        key_path(prefix, m->string, path, sizeof path);
        if (i < 0) {
            join_names(names, count, list, sizeof list);
            gf_problem(pr, "%s: unknown key (known keys: %s)", path, list);
            rc = -1;
        } else if (items[i] != NULL) {
            gf_problem(pr, "%s: duplicate key", path);
            rc = -1;
        } else {
            items[i] = m;
        }
    }
    return rc;
}

/* Writes "<what>: JSON syntax error at line L, column C (byte B) near ..."
 * for a parse of `json` that stopped at `stop` (NULL: unknown). */
static void syntax_error(const char *what, const char *json, const char *stop, gf_problems *pr) {
    size_t line = 1, column = 1;
    char near[GF_VALUE_TEXT_BYTES + 8];

    if (stop == NULL || stop < json) {
        gf_problem(pr, "%s: JSON syntax error (or out of memory)", what);
        return;
    }
    for (const char *c = json; c < stop; c++) {
        if (*c == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    if (*stop == '\0')
        snprintf(near, sizeof near, "at the end of the input");
    else {
        char q[GF_VALUE_TEXT_BYTES];
        quote(stop, q, sizeof q);
        snprintf(near, sizeof near, "near %s", q);
    }
    gf_problem(pr, "%s: JSON syntax error at line %zu, column %zu (byte %zu), %s", what, line,
               column, (size_t)(stop - json), near);
}

/* Parses `json` as one JSON document with nothing after it.  Returns the tree
 * (the caller cJSON_Deletes it) or NULL with the error reported to `pr`. */
cJSON *gf_json_parse_document(const char *what, const char *json, gf_problems *pr) {
    const char *stop = NULL;
    cJSON *root;

    if (json == NULL) {
        gf_problem(pr, "%s: no JSON text", what);
        return NULL;
    }
    root = cJSON_ParseWithOpts(json, &stop, 1);
    if (root == NULL)
        syntax_error(what, json, stop, pr);
    return root;
}

/* ---- parameters ----------------------------------------------------------- */

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
        if (read_f32(m, path, d->min, d->max, &f, pr) < 0)
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
            if (read_f32(cJSON_GetArrayItem(m, (int)i), epath, d->min, d->max, &f[i], pr) < 0)
                bad = 1;
        }
        if (bad)
            return -1;
        memcpy(field, f, sizeof f);
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
        key_path(prefix, m->string, path, sizeof path);
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

/* ---- the LIST reply ----------------------------------------------------------- */

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

/* ---- stages: built-in kinds and plugins ------------------------------------------ */

cJSON *gf_stage_params_to_json(const gf_stage *s) {
    if (!gf_kind_is_plugin(s->kind))
        return gf_params_to_json(s->kind, &s->params);
    const char *text = gf_plugin_stage_params_json(s->params.plugin);
    return text[0] ? cJSON_Parse(text) : cJSON_CreateObject();
}

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

/* One pipeline's LIST entry; NULL when out of memory. */
static cJSON *pipeline_to_json(const gf_pipeline *p) {
    cJSON *obj = cJSON_CreateObject(), *arr;
    char doc[GF_KNOWN_LIST_BYTES];
    if (obj == NULL || !cJSON_AddNumberToObject(obj, "id", (double)p->id) ||
        !cJSON_AddStringToObject(obj, "name", p->name))
        goto fail;
    if (p->stage_count == 1) {
        if (add_stage(obj, &p->stages[0]) < 0 ||
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
        if (add_stage(st, &p->stages[k]) < 0 ||
            !cJSON_AddStringToObject(st, "doc", p->stages[k].kind->doc))
            goto fail;
    }
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
    if (j->plugin != NULL && !(cJSON_IsString(j->plugin) && gf_plugin_name_ok(j->plugin->valuestring))) {
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
        gf_plugin_stage_release(out->params.plugin);
        return -1;
    }
    return 0;
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

int gf_json_read_stages(const gf_stage_json *j, const char *config_dir, const char *prefix,
                        gf_pipeline *p, gf_problems *pr) {
    char path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
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
        static const char *const keys[] = {"kind", "params", "path", "config_dir", "plugin",
                                           "doc"};
        const cJSON *items[6] = {0};
        snprintf(path, sizeof path, "%s.stages[%" PRIu32 "]", prefix, p->stage_count);
        if (!cJSON_IsObject(m)) {
            gf_json_describe(m, got, sizeof got);
            gf_problem(pr, "%s: expected an object with \"kind\" and optional \"params\", got %s",
                       path, got);
            rc = -1;
            break;
        }
        /* A configuration's stage takes kind, params and path; a LIST
         * reply's may carry more (and what a newer daemon adds). */
        if (gf_json_collect_keys(m, path, keys, j->listed ? 6 : 3, j->listed, items, pr) < 0) {
            rc = -1;
            break;
        }
        gf_stage_json sj = {.kind = items[0],
                            .params = items[1],
                            .path = items[2],
                            .config_dir = items[3],
                            .plugin = items[4],
                            .listed = j->listed};
        if (read_stage(&sj, config_dir, path, &p->stages[p->stage_count], pr) < 0) {
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

/* Reads a plugin's parameters from the stage's "params" object `obj` (NULL:
 * none) with the plugin's table into values[], whose strings then point
 * into obj: defaults, types, ranges, required and unknown keys, each problem
 * named by its key path.  Returns 0 or -1. */
static int read_plugin_values(const gf_plugin *api, const cJSON *obj, const char *prefix,
                              gf_plugin_value *values, gf_problems *pr) {
    char path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES], list[GF_KNOWN_LIST_BYTES];
    const cJSON *given[GF_PLUGIN_PARAMS_MAX] = {0};
    const char *names[GF_PLUGIN_PARAMS_MAX];
    int rc = 0;
    for (uint32_t i = 0; i < api->param_count; i++)
        names[i] = api->params[i].key;
    if (obj != NULL) {
        const cJSON *m;
        cJSON_ArrayForEach(m, obj) {
            int i = gf_json_name_index(names, api->param_count, m->string);
            key_path(prefix, m->string, path, sizeof path);
            if (i < 0) {
                join_names(names, api->param_count, list, sizeof list);
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
    }
    for (uint32_t i = 0; i < api->param_count; i++) {
        const gf_plugin_param *d = &api->params[i];
        const cJSON *v = given[i];
        key_path(prefix, d->key, path, sizeof path);
        values[i].number = d->default_number;
        values[i].string = d->default_string ? d->default_string : "";
        if (v == NULL) {
            if (d->required) {
                gf_problem(pr, "%s: missing (required: %s)", path, d->doc ? d->doc : d->key);
                rc = -1;
            }
            continue;
        }
        switch (d->type) {
        case GF_PLUGIN_NUMBER:
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= d->min && v->valuedouble <= d->max)) {
                gf_json_describe(v, got, sizeof got);
                gf_problem(pr, "%s: expected a number in [%g, %g], got %s", path, d->min, d->max,
                           got);
                rc = -1;
            } else {
                values[i].number = v->valuedouble;
            }
            break;
        case GF_PLUGIN_INTEGER:
            if (gf_json_read_integer(v, path, d->min, d->max, &values[i].number, pr) < 0)
                rc = -1;
            break;
        case GF_PLUGIN_STRING: {
            size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
            if (!cJSON_IsString(v) || n < d->min || n > d->max) {
                gf_json_describe(v, got, sizeof got);
                gf_problem(pr, "%s: expected a string of %g to %g bytes, got %s", path, d->min,
                           d->max, got);
                rc = -1;
            } else {
                values[i].string = v->valuestring;
            }
            break;
        }
        }
    }
    return rc;
}

/* Loads and creates one plugin stage whose inputs are at most max_in_bytes. */
static int open_plugin_stage(gf_plugin_stage *st, uint64_t max_in_bytes, const char *prefix,
                             gf_problems *pr) {
    char why[GF_PATH_BYTES * 2], path[GF_PATH_BYTES];
    gf_plugin_value values[GF_PLUGIN_PARAMS_MAX];
    const gf_plugin *api;
    if (gf_plugin_stage_state(st) != NULL)
        return 0;
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
        gf_problem(pr, "%s.stages: the stages' lengths do not fit together: %s (for stage 0's "
                   "input of %" PRIu64 " bytes)", prefix, why, probe);
        return -1;
    }
    return 0;
}

enum list_key {
    L_ID, L_NAME, L_KIND, L_PARAMS, L_PATH, L_CONFIG_DIR, L_PLUGIN, L_STAGES, L_COUNT_
};
static const char *const list_keys[L_COUNT_] = {"id",   "name",       "kind",   "params",
                                                "path", "config_dir", "plugin", "stages"};

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

/* SPDX-License-Identifier: MIT */
/*
 * Reading JSON with key-path problems: the problem report, describing and
 * quoting what was got, and the typed readers; json_read.h is the contract.
 */
#include "json_read.h"

#include <float.h>
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

void gf_json_key_path(const char *prefix, const char *key, char *buf, size_t len) {
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

void gf_json_join_names(const char *const *names, size_t count, char *buf, size_t len) {
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

int gf_json_read_f32(const cJSON *v, const char *path, double min, double max, float *out,
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
    gf_json_join_names(names, count, list, sizeof list);
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
        gf_json_key_path(prefix, m->string, path, sizeof path);
        if (i < 0) {
            gf_json_join_names(names, count, list, sizeof list);
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

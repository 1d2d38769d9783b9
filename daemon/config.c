/*
 * Configuration: parses the daemon's JSON settings and pipelines (config.h is
 * the contract, config/README.md documents every key), and encodes pipelines
 * as the LIST reply and back.
 *
 * Every value that comes from a file or a socket is validated here: types,
 * ranges, unknown and duplicate keys.  Each error is one line that starts with
 * the key path ("pipelines[1].kind") and says what was expected and what was
 * got.  Strings quoted in errors are escaped and truncated, so a hostile file
 * cannot put a newline or a megabyte into a log line.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
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
/* 2^53: above it a JSON number (a double in cJSON) no longer holds every
 * integer exactly, so integers must not exceed it. */
#define GF_JSON_INT_EXACT_MAX 9007199254740992.0
/* At most this many characters of an offending value are quoted in an error. */
#define GF_QUOTE_MAX_CHARS 40
/* Room for one key path ("pipelines[255] (<63 chars>).params.<quoted key>")
 * and for one quoted or described value. */
#define GF_PATH_BYTES       256
#define GF_VALUE_TEXT_BYTES 128
/* Room for one "(known: ...)" list of kinds or keys, and the most kinds it
 * names. */
#define GF_KNOWN_LIST_BYTES 256
#define GF_KINDS_LISTED_MAX 32

/* ---- error text helpers ------------------------------------------------- */

/* Room for one problem's line before a prefix is put in front of it. */
#define GF_PROBLEM_LINE_BYTES 1024

/*
 * Where a parse reports its problems.  In "first" mode buf gets the first
 * problem alone, without a newline (gf_config_parse's one-line err); in
 * "all" mode every problem is appended as one line ending in '\n', as long
 * as whole lines fit.  Either way every problem is counted.
 */
typedef struct problems {
    char *buf;          /* NULL or buf[cap]: the text, NUL-terminated       */
    size_t cap;         /* its size                                          */
    size_t used;        /* "all" mode: bytes of lines in buf                 */
    size_t count;       /* problems found, whether kept in buf or not        */
    size_t kept_count;  /* of them, those whose line is in buf               */
    int all;            /* 0: keep the first only                            */
    const char *prefix; /* put with ": " in front of each line, or NULL      */
} problems;

static void problems_init(problems *pr, char *buf, size_t cap, int all, const char *prefix) {
    memset(pr, 0, sizeof *pr);
    pr->buf = cap > 0 ? buf : NULL;
    pr->cap = buf != NULL ? cap : 0;
    pr->all = all;
    pr->prefix = prefix;
    if (pr->buf != NULL)
        pr->buf[0] = '\0';
}

/* Reports one problem: a line that starts with the key path it concerns. */
__attribute__((format(printf, 2, 3))) static void problem(problems *pr, const char *fmt, ...) {
    char line[GF_PROBLEM_LINE_BYTES];
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
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
static void describe(const cJSON *v, char *buf, size_t len) {
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
static int key_index(const char *const *names, size_t count, const char *key) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], key) == 0)
            return (int)i;
    return -1;
}

/* ---- typed readers: each writes "<path>: expected ..., got ..." --------- */

/* Reads an integer in [min, max] (both within 2^53) from `v`. */
static int read_integer(const cJSON *v, const char *path, double min, double max, double *out,
                        problems *pr) {
    char got[GF_VALUE_TEXT_BYTES], lo[32], hi[32];

    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) <= GF_JSON_INT_EXACT_MAX && d >= min &&
            d <= max) {
            *out = d;
            return 0;
        }
    }
    describe(v, got, sizeof got);
    format_number(min, lo, sizeof lo);
    format_number(max, hi, sizeof hi);
    problem(pr, "%s: expected an integer in [%s, %s], got %s", path, lo, hi, got);
    return -1;
}

/*
 * Reads a number into a float32 and checks the value stored, not the text,
 * against [min, max]: what is stored lies in the range (as the kind's own
 * check_params sees it) and reads back unchanged from the LIST reply.
 */
static int read_f32(const cJSON *v, const char *path, double min, double max, float *out,
                    problems *pr) {
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
                problem(pr, "%s: expected a number in [%s, %s], got %s, which is %.9g as a float32",
                        path, lo, hi, got, (double)f);
                return -1;
            }
        }
    }
    describe(v, got, sizeof got);
    problem(pr, "%s: expected a number in [%s, %s], got %s", path, lo, hi, got);
    return -1;
}

/* Reads one of names[count] from `v`; returns its index or -1. */
static int read_choice(const cJSON *v, const char *path, const char *const *names, size_t count,
                       problems *pr) {
    char got[GF_VALUE_TEXT_BYTES], list[GF_KNOWN_LIST_BYTES];
    size_t o = 0;

    if (cJSON_IsString(v)) {
        int i = key_index(names, count, v->valuestring);
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
    describe(v, got, sizeof got);
    problem(pr, "%s: expected one of %s, got %s", path, list, got);
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
static int read_pipeline_name(const cJSON *v, const char *path, const gf_pipeline *before,
                              size_t count, char *dst, problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];

    if (!cJSON_IsString(v) || !valid_pipeline_name(v->valuestring)) {
        describe(v, got, sizeof got);
        problem(pr, "%s: expected a string of 1 to %d characters from [A-Za-z0-9_.-], got %s", path,
                GF_PIPELINE_NAME_MAX - 1, got);
        return -1;
    }
    for (size_t j = 0; j < count; j++) {
        if (strcmp(before[j].name, v->valuestring) == 0) {
            problem(pr, "%s: duplicate name \"%s\" (also pipelines[%zu].name)", path,
                    v->valuestring, j);
            return -1;
        }
    }
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* Looks up the kind named by `v`; on failure lists the known kinds. */
static const gf_pipeline_kind *read_kind(const cJSON *v, const char *path, problems *pr) {
    const gf_pipeline_kind *kinds, *kind = NULL;
    const char *names[GF_KINDS_LISTED_MAX];
    char got[GF_VALUE_TEXT_BYTES], list[GF_KNOWN_LIST_BYTES];
    size_t count = 0;

    if (cJSON_IsString(v))
        kind = gf_pipeline_kind_find(v->valuestring);
    if (kind != NULL)
        return kind;
    kinds = gf_pipeline_kinds(&count);
    if (count > GF_KINDS_LISTED_MAX)
        count = GF_KINDS_LISTED_MAX;
    for (size_t i = 0; i < count; i++)
        names[i] = kinds[i].name;
    join_names(names, count, list, sizeof list);
    describe(v, got, sizeof got);
    if (cJSON_IsString(v))
        problem(pr, "%s: unknown kind %s (known: %s)", path, got, list);
    else
        problem(pr, "%s: expected the name of a kind (%s), got %s", path, list, got);
    return NULL;
}

/*
 * Walks the members of the object `obj` and files each under its index in
 * names[count] into items[] (which the caller zeroed).  An unknown key is an
 * error unless `allow_unknown`; a repeated known key always is (its first
 * value is the one filed).  Reports every such key and returns -1 if there
 * was one, else 0.
 */
static int collect_keys(const cJSON *obj, const char *prefix, const char *const *names,
                        size_t count, int allow_unknown, const cJSON **items, problems *pr) {
    char path[GF_PATH_BYTES], list[GF_KNOWN_LIST_BYTES];
    const cJSON *m;
    int rc = 0;

    cJSON_ArrayForEach(m, obj) {
        int i = key_index(names, count, m->string);

        if (i < 0 && allow_unknown)
            continue;
        key_path(prefix, m->string, path, sizeof path);
        if (i < 0) {
            join_names(names, count, list, sizeof list);
            problem(pr, "%s: unknown key (known keys: %s)", path, list);
            rc = -1;
        } else if (items[i] != NULL) {
            problem(pr, "%s: duplicate key", path);
            rc = -1;
        } else {
            items[i] = m;
        }
    }
    return rc;
}

/* Writes "<what>: JSON syntax error at line L, column C (byte B) near ..."
 * for a parse of `json` that stopped at `stop` (NULL: unknown). */
static void syntax_error(const char *what, const char *json, const char *stop, problems *pr) {
    size_t line = 1, column = 1;
    char near[GF_VALUE_TEXT_BYTES + 8];

    if (stop == NULL || stop < json) {
        problem(pr, "%s: JSON syntax error (or out of memory)", what);
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
    problem(pr, "%s: JSON syntax error at line %zu, column %zu (byte %zu), %s", what, line, column,
            (size_t)(stop - json), near);
}

/* Parses `json` as one JSON document with nothing after it.  Returns the tree
 * (the caller cJSON_Deletes it) or NULL with the error reported to `pr`. */
static cJSON *parse_document(const char *what, const char *json, problems *pr) {
    const char *stop = NULL;
    cJSON *root;

    if (json == NULL) {
        problem(pr, "%s: no JSON text", what);
        return NULL;
    }
    root = cJSON_ParseWithOpts(json, &stop, 1);
    if (root == NULL)
        syntax_error(what, json, stop, pr);
    return root;
}

/* ---- parameters ----------------------------------------------------------- */

/* gf_params_from_json, reporting every bad parameter of `obj` to `pr`. */
static int params_parse(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                        gf_params *out, problems *pr) {
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
        describe(obj, got, sizeof got);
        problem(pr, "%s: expected an object of the parameters of kind %s, got %s", prefix,
                kind->name, got);
        return -1;
    }

    cJSON_ArrayForEach(m, obj) {
        const gf_param_desc *d = NULL;
        int twin = 0;
        char *field;

        for (size_t i = 0; i < kind->param_count; i++)
            if (strcmp(kind->params[i].key, m->string) == 0)
                d = &kind->params[i];
        key_path(prefix, m->string, path, sizeof path);
        if (d == NULL) {
            char list[GF_KNOWN_LIST_BYTES];
            size_t o = 0;

            rc = -1;
            if (kind->param_count == 0) {
                problem(pr, "%s: unknown parameter (kind %s takes no parameters)", path,
                        kind->name);
                continue;
            }
            list[0] = '\0';
            for (size_t i = 0; i < kind->param_count && o < sizeof list; i++) {
                int n =
                    snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", kind->params[i].key);
                if (n < 0)
                    break;
                o += (size_t)n;
            }
            problem(pr, "%s: unknown parameter of kind %s (known: %s)", path, kind->name, list);
            continue;
        }
        /* Known keys are few, so this scan for an earlier twin stays short. */
        for (const cJSON *p = obj->child; p != m; p = p->next)
            if (strcmp(p->string, m->string) == 0)
                twin = 1;
        if (twin) {
            problem(pr, "%s: duplicate key", path);
            rc = -1;
            continue;
        }

        field = (char *)out + d->offset;
        switch (d->type) {
        case GF_PARAM_F32: {
            float f;
            if (read_f32(m, path, d->min, d->max, &f, pr) < 0)
                rc = -1;
            else
                memcpy(field, &f, sizeof f);
            break;
        }
        case GF_PARAM_U32: {
            double lo = d->min < 0 ? 0 : d->min, hi = d->max > UINT32_MAX ? UINT32_MAX : d->max;
            double v;
            uint32_t u;
            if (read_integer(m, path, lo, hi, &v, pr) < 0) {
                rc = -1;
                break;
            }
            u = (uint32_t)v;
            memcpy(field, &u, sizeof u);
            break;
        }
        case GF_PARAM_F32x3: {
            float f[3];
            int bad = 0;
            if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 3) {
                describe(m, got, sizeof got);
                problem(pr, "%s: expected an array of 3 numbers, got %s", path, got);
                rc = -1;
                break;
            }
            for (unsigned i = 0; i < 3; i++) {
                char epath[GF_PATH_BYTES + 16];
                snprintf(epath, sizeof epath, "%s[%u]", path, i);
                if (read_f32(cJSON_GetArrayItem(m, (int)i), epath, d->min, d->max, &f[i], pr) < 0)
                    bad = 1;
            }
            if (bad)
                rc = -1;
            else
                memcpy(field, f, sizeof f);
            break;
        }
        default:
            problem(pr, "%s: parameter of an unsupported type %d", path, (int)d->type);
            rc = -1;
            break;
        }
    }
    return rc;
}

int gf_params_from_json(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                        gf_params *out, char *err, size_t err_len) {
    problems pr;

    problems_init(&pr, err, err_len, 0, NULL);
    return params_parse(kind, obj, prefix, out, &pr);
}

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
    int i = s != NULL ? key_index(engine_names, ARRAY_LEN(engine_names), s) : -1;

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
    int i = s != NULL ? key_index(log_level_names, ARRAY_LEN(log_level_names), s) : -1;

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
                          uint64_t max_frame_bytes, gf_pipeline *p, problems *pr) {
    const cJSON *items[P_COUNT_] = {0};
    char prefix[32], path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES], why[GF_PATH_BYTES];
    int rc = 0;

    snprintf(prefix, sizeof prefix, "pipelines[%zu]", index);
    if (!cJSON_IsObject(v)) {
        describe(v, got, sizeof got);
        problem(pr,
                "%s: expected an object with \"name\", \"kind\" and optional "
                "\"params\", got %s",
                prefix, got);
        return -1;
    }
    if (collect_keys(v, prefix, pipeline_keys, P_COUNT_, 0, items, pr) < 0)
        rc = -1;
    for (int k = P_NAME; k <= P_KIND; k++) {
        if (items[k] == NULL) {
            problem(pr, "%s.%s: missing (required)", prefix, pipeline_keys[k]);
            rc = -1;
        }
    }

    p->id = (uint32_t)index;
    snprintf(path, sizeof path, "%s.name", prefix);
    if (items[P_NAME] != NULL &&
        read_pipeline_name(items[P_NAME], path, before, index, p->name, pr) < 0)
        rc = -1;
    if (items[P_KIND] == NULL)
        return -1;
    snprintf(path, sizeof path, "%s.kind", prefix);
    p->kind = read_kind(items[P_KIND], path, pr);
    if (p->kind == NULL)
        return -1;
    if (p->name[0] != '\0')
        snprintf(path, sizeof path, "%s (%s).params", prefix, p->name);
    else
        snprintf(path, sizeof path, "%s.params", prefix);
    if (params_parse(p->kind, items[P_PARAMS], path, &p->params, pr) < 0)
        return -1;
    why[0] = '\0';
    if (max_frame_bytes > 0 &&
        p->kind->check_params(&p->params, max_frame_bytes, why, sizeof why) != 0) {
        problem(pr, "%s: %s", path, why[0] ? why : "invalid parameters");
        return -1;
    }
    return rc;
}

/* Parses the config's "pipelines" array into a new array in *out, reporting
 * the problems of every element. */
static int parse_pipelines(const cJSON *v, uint64_t max_frame_bytes, gf_pipeline **out,
                           size_t *out_count, problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];
    gf_pipeline *pipelines = NULL;
    size_t count, i = 0;
    const cJSON *m;
    int rc = 0;

    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
        describe(v, got, sizeof got);
        problem(pr, "pipelines: expected a non-empty array of pipeline objects, got %s", got);
        goto fail;
    }
    count = (size_t)cJSON_GetArraySize(v);
    if (count > GF_MAX_PIPELINES) {
        problem(pr, "pipelines: expected at most %d pipelines, got %zu", GF_MAX_PIPELINES, count);
        goto fail;
    }
    pipelines = calloc(count, sizeof *pipelines);
    if (pipelines == NULL) {
        problem(pr, "pipelines: out of memory");
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
static int check_pinned(const gf_config *cfg, problems *pr) {
    uint64_t want = gf_config_pinned_bytes(cfg), cap = pinned_cap(cfg);
    if (want <= cap)
        return 0;
    problem(pr,
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
                        problems *pr) {
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

    root = parse_document("config", json, pr);
    if (root == NULL)
        goto fail;
    if (!cJSON_IsObject(root)) {
        describe(root, got, sizeof got);
        problem(pr, "config: expected a JSON object, got %s", got);
        goto fail_root;
    }
    /* Unknown and duplicate keys are reported; the known ones are still
     * read, so that one run names every problem of the file. */
    collect_keys(root, "", top_keys, K_COUNT_, 0, items, pr);

    /* Fixed order, whatever the file's: pipelines need max_frame_bytes. */
    if (items[K_SOCKET] != NULL) {
        const cJSON *v = items[K_SOCKET];
        size_t len = cJSON_IsString(v) ? strlen(v->valuestring) : 0;

        if (len == 0 || len >= GF_SOCKET_PATH_MAX) {
            if (cJSON_IsString(v))
                snprintf(got, sizeof got, "a string of %zu bytes", len);
            else
                describe(v, got, sizeof got);
            problem(pr, "socket: expected a path of 1 to %d bytes, got %s", GF_SOCKET_PATH_MAX - 1,
                    got);
        } else {
            memcpy(cfg.socket_path, v->valuestring, len + 1);
        }
    }
    if (items[K_ENGINE] != NULL) {
        i = read_choice(items[K_ENGINE], "engine", engine_names, ARRAY_LEN(engine_names), pr);
        if (i >= 0)
            cfg.engine = (enum gf_engine_choice)i;
    }
    if (items[K_SLOTS] != NULL) {
        if (read_integer(items[K_SLOTS], "slots", GF_SLOTS_MIN, GF_SLOTS_MAX, &n, pr) == 0)
            cfg.slot_count = (uint32_t)n;
    }
    if (items[K_MAX_FRAME_BYTES] != NULL) {
        if (read_integer(items[K_MAX_FRAME_BYTES], "max_frame_bytes", 1,
                         (double)GF_MAX_FRAME_BYTES_LIMIT, &n, pr) == 0)
            cfg.max_frame_bytes = (uint64_t)n;
        else
            frame_bytes_ok = 0;
    }
    if (items[K_FRAME_TIMEOUT_MS] != NULL) {
        if (read_integer(items[K_FRAME_TIMEOUT_MS], "frame_timeout_ms", 1, GF_FRAME_TIMEOUT_MS_MAX,
                         &n, pr) == 0)
            cfg.frame_timeout_ms = (uint32_t)n;
    }
    if (items[K_LOG_LEVEL] != NULL) {
        i = read_choice(items[K_LOG_LEVEL], "log_level", log_level_names,
                        ARRAY_LEN(log_level_names), pr);
        if (i >= 0)
            cfg.log_level = (enum gf_log_level)i;
    }
    if (items[K_DRAIN_TIMEOUT_MS] != NULL) {
        if (read_integer(items[K_DRAIN_TIMEOUT_MS], "drain_timeout_ms", 1, GF_DRAIN_TIMEOUT_MS_MAX,
                         &n, pr) == 0)
            cfg.drain_timeout_ms = (uint32_t)n;
    }
    if (items[K_MAX_PINNED_BYTES] != NULL) {
        if (read_integer(items[K_MAX_PINNED_BYTES], "max_pinned_bytes", 0,
                         (double)GF_MAX_PINNED_BYTES_LIMIT, &n, pr) == 0)
            cfg.max_pinned_bytes = (uint64_t)n;
    }
    if (items[K_TIMING_EVENTS] != NULL) {
        if (!cJSON_IsBool(items[K_TIMING_EVENTS])) {
            describe(items[K_TIMING_EVENTS], got, sizeof got);
            problem(pr, "timing_events: expected true or false, got %s", got);
        } else {
            cfg.timing_events = cJSON_IsTrue(items[K_TIMING_EVENTS]);
        }
    }
    if (items[K_TRACE_FRAMES] != NULL) {
        if (read_integer(items[K_TRACE_FRAMES], "trace_frames", 0, GF_TRACE_FRAMES_MAX, &n, pr) ==
            0)
            cfg.trace_frames = (uint32_t)n;
    }
    if (flags != NULL) {
        apply_overrides(&cfg, flags);
        frame_bytes_ok |= flags->has_max_frame_bytes;
    }
    if (items[K_PIPELINES] == NULL) {
        problem(pr, "pipelines: missing (required: a non-empty array of pipelines)");
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
    problems pr;

    problems_init(&pr, err, err_len, 0, NULL);
    return config_parse(json, NULL, out, &pr);
}

int gf_config_parse_all(const char *json, gf_config *out, char *errs, size_t errs_len,
                        size_t *problem_count) {
    problems pr;
    int rc;

    problems_init(&pr, errs, errs_len, 1, NULL);
    rc = config_parse(json, NULL, out, &pr);
    if (problem_count != NULL)
        *problem_count = pr.count;
    return rc;
}

/* gf_config_load, reporting every problem to `pr`, each line prefixed with
 * the path. */
static int config_load(const char *path, const gf_config_overrides *flags, gf_config *out,
                       problems *pr) {
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
        problem(pr, "%s", strerror(errno));
        goto out;
    }
    /* One byte past the limit tells "too large" from "exactly the limit". */
    buf = malloc(GF_CONFIG_FILE_MAX_BYTES + 2);
    if (buf == NULL) {
        problem(pr, "out of memory");
        goto out_file;
    }
    len = fread(buf, 1, GF_CONFIG_FILE_MAX_BYTES + 1, f);
    if (ferror(f)) {
        problem(pr, "read failed: %s", strerror(errno));
        goto out_buf;
    }
    if (len > GF_CONFIG_FILE_MAX_BYTES) {
        problem(pr, "larger than the limit of %u bytes (1 MiB) for a config file",
                GF_CONFIG_FILE_MAX_BYTES);
        goto out_buf;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        problem(pr, "contains a NUL byte at offset %zu", strlen(buf));
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
    problems pr;

    problems_init(&pr, err, err_len, 0, NULL);
    return config_load(path, NULL, out, &pr);
}

int gf_config_load(const char *path, const gf_config_overrides *flags, gf_config *out, char *errs,
                   size_t errs_len, size_t *problem_count) {
    problems pr;
    int rc;

    problems_init(&pr, errs, errs_len, 1, NULL);
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
static cJSON *params_to_json(const gf_pipeline_kind *kind, const gf_params *p) {
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

cJSON *gf_pipelines_to_json(const gf_pipeline *pipelines, size_t count) {
    cJSON *root = cJSON_CreateObject(), *arr;

    if (root == NULL)
        goto fail;
    arr = cJSON_AddArrayToObject(root, "pipelines");
    if (arr == NULL)
        goto fail_root;
    for (size_t i = 0; i < count; i++) {
        const gf_pipeline *p = &pipelines[i];
        cJSON *obj = cJSON_CreateObject(), *params;

        if (obj == NULL)
            goto fail_root;
        if (!cJSON_AddItemToArray(arr, obj)) {
            cJSON_Delete(obj);
            goto fail_root;
        }
        if (cJSON_AddNumberToObject(obj, "id", (double)p->id) == NULL ||
            cJSON_AddStringToObject(obj, "name", p->name) == NULL ||
            cJSON_AddStringToObject(obj, "kind", p->kind->name) == NULL)
            goto fail_root;
        params = params_to_json(p->kind, &p->params);
        if (params == NULL)
            goto fail_root;
        if (!cJSON_AddItemToObject(obj, "params", params)) {
            cJSON_Delete(params);
            goto fail_root;
        }
        if (cJSON_AddStringToObject(obj, "doc", p->kind->doc) == NULL)
            goto fail_root;
    }
    return root;

fail_root:
    cJSON_Delete(root);
fail:
    return NULL;
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
    cJSON *obj = params_to_json(p->kind, &p->params);
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

enum list_key { L_ID, L_NAME, L_KIND, L_PARAMS, L_COUNT_ };
static const char *const list_keys[L_COUNT_] = {"id", "name", "kind", "params"};

/* Parses one element of a LIST reply's "pipelines" into `p`.  Keys other than
 * list_keys ("doc", or what a newer daemon adds) are ignored. */
static int parse_listed_pipeline(const cJSON *v, size_t index, const gf_pipeline *before,
                                 gf_pipeline *p, problems *pr) {
    const cJSON *items[L_COUNT_] = {0};
    char prefix[32], path[GF_PATH_BYTES], got[GF_VALUE_TEXT_BYTES];
    double id;

    snprintf(prefix, sizeof prefix, "pipelines[%zu]", index);
    if (!cJSON_IsObject(v)) {
        describe(v, got, sizeof got);
        problem(pr, "%s: expected a pipeline object, got %s", prefix, got);
        return -1;
    }
    if (collect_keys(v, prefix, list_keys, L_COUNT_, 1, items, pr) < 0)
        return -1;
    for (int k = 0; k < L_COUNT_; k++) {
        if (items[k] == NULL) {
            problem(pr, "%s.%s: missing (required)", prefix, list_keys[k]);
            return -1;
        }
    }
    /* Ids are array positions; a list that says otherwise is corrupt. */
    snprintf(path, sizeof path, "%s.id", prefix);
    if (read_integer(items[L_ID], path, (double)index, (double)index, &id, pr) < 0)
        return -1;
    p->id = (uint32_t)id;
    snprintf(path, sizeof path, "%s.name", prefix);
    if (read_pipeline_name(items[L_NAME], path, before, index, p->name, pr) < 0)
        return -1;
    snprintf(path, sizeof path, "%s.kind", prefix);
    p->kind = read_kind(items[L_KIND], path, pr);
    if (p->kind == NULL)
        return -1;
    snprintf(path, sizeof path, "%s (%s).params", prefix, p->name);
    return params_parse(p->kind, items[L_PARAMS], path, &p->params, pr);
}

int gf_pipelines_from_json(const char *json, gf_pipeline **out, size_t *count, char *err,
                           size_t err_len) {
    char got[GF_VALUE_TEXT_BYTES];
    problems first, *pr = &first;
    gf_pipeline *pipelines = NULL;
    const cJSON *arr, *m;
    size_t n, i = 0;
    cJSON *root;

    problems_init(&first, err, err_len, 0, NULL);
    *out = NULL;
    *count = 0;
    root = parse_document("pipeline list", json, pr);
    if (root == NULL)
        goto fail;
    arr = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "pipelines") : NULL;
    if (!cJSON_IsArray(arr)) {
        describe(cJSON_IsObject(root) ? arr : root, got, sizeof got);
        problem(pr,
                "pipelines: expected an array in an object {\"pipelines\": [...]}, "
                "got %s",
                got);
        goto fail_root;
    }
    n = (size_t)cJSON_GetArraySize(arr);
    if (n > GF_MAX_PIPELINES) {
        problem(pr, "pipelines: expected at most %d pipelines, got %zu", GF_MAX_PIPELINES, n);
        goto fail_root;
    }
    if (n > 0) {
        pipelines = calloc(n, sizeof *pipelines);
        if (pipelines == NULL) {
            problem(pr, "pipelines: out of memory");
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
    free(pipelines);
fail_root:
    cJSON_Delete(root);
fail:
    return -1;
}

/*
 * Configuration: the differences between two configurations, for SIGHUP
 * (config.h: gf_config_describe_changes, gf_config_keep_restart_keys,
 * gf_config_note_restart).  It walks the key table of config.c and owns the
 * texts a reload logs: "<key> <old> -> <new>" and "needs a restart: ...".
 */
#include "config_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* What a reload's note starts with, as gf_server_reload has always logged. */
#define GF_RESTART_NOTE_PREFIX "needs a restart: "

/* Nonzero when key `k` (not the pipelines) differs between `a` and `b`. */
static int field_differs(const gf_config *a, const gf_config *b, const gf_config_key *k) {
    if (k->type == GF_CONFIG_PATH)
        return strcmp((const char *)a + k->offset, (const char *)b + k->offset) != 0;
    return gf__config_field_get(a, k) != gf__config_field_get(b, k);
}

/* Key `k`'s value in `cfg` as the log writes it: "4", "cpu", "true", a path. */
static void field_text(const gf_config *cfg, const gf_config_key *k, char *buf, size_t len) {
    uint64_t v;

    if (k->type == GF_CONFIG_PATH) {
        gf_errorf(buf, len, "%s", (const char *)cfg + k->offset);
        return;
    }
    v = gf__config_field_get(cfg, k);
    if (k->type == GF_CONFIG_BOOL)
        v = v != 0;
    if (k->type == GF_CONFIG_MODE)
        gf_errorf(buf, len, "%04llo", (unsigned long long)v);
    else if (k->type == GF_CONFIG_INTEGER)
        gf_errorf(buf, len, "%llu", (unsigned long long)v);
    else
        gf_errorf(buf, len, "%s", v < k->choice_count ? k->choices[v] : "unknown");
}

/* Appends `first` (when buf is empty) or ", ", then the formatted text, to
 * the list in buf[len]; a text that does not fit ends the list with "...",
 * after which nothing more is added. */
static void list_vappend(char *buf, size_t len, const char *first, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void list_vappend(char *buf, size_t len, const char *first, const char *fmt, va_list ap) {
    size_t used = strlen(buf);
    int n;

    if (used + 1 < len) {
        n = snprintf(buf + used, len - used, "%s", used == 0 ? first : ", ");
        if (n >= 0 && (size_t)n < len - used) {
            used += (size_t)n;
            n = vsnprintf(buf + used, len - used, fmt, ap);
            if (n >= 0 && (size_t)n < len - used)
                return;
        }
    }
    if (len >= 4)
        memcpy(buf + len - 4, "...", 4);
}

__attribute__((format(printf, 3, 4))) static void append_change(char *buf, size_t len,
                                                                const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    list_vappend(buf, len, "", fmt, ap);
    va_end(ap);
}

void gf_config_note_restart(char *note, size_t len, const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    list_vappend(note, len, GF_RESTART_NOTE_PREFIX, fmt, ap);
    va_end(ap);
}

/* Appends "<key> <from's value> -> <to's value>" to the list in buf[len]. */
static void append_key_change(char *buf, size_t len, const char *first, const gf_config_key *k,
                              const gf_config *from, const gf_config *to) {
    char a[GF_SOCKET_PATH_MAX], b[GF_SOCKET_PATH_MAX];

    field_text(from, k, a, sizeof a);
    field_text(to, k, b, sizeof b);
    if (first[0] == '\0')
        append_change(buf, len, "%s %s -> %s", k->key, a, b);
    else
        gf_config_note_restart(buf, len, "%s %s -> %s", k->key, a, b);
}

/* A pipeline's parameters as compact JSON text in buf[len] ("?" when out of
 * memory). */
static void params_text(const gf_pipeline *p, char *buf, size_t len) {
    cJSON *obj = gf_params_to_json(p->kind, &p->params);
    char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;

    gf_errorf(buf, len, "%s", text != NULL ? text : "?");
    cJSON_free(text);
    cJSON_Delete(obj);
}

/* Appends what differs between the pipelines of `from` and `to`. */
static void describe_pipeline_changes(const gf_config *from, const gf_config *to, char *buf,
                                      size_t len) {
    if (from->pipeline_count != to->pipeline_count)
        append_change(buf, len, "pipelines: %zu -> %zu entries", from->pipeline_count,
                      to->pipeline_count);
    for (size_t i = 0; i < from->pipeline_count && i < to->pipeline_count; i++) {
        const gf_pipeline *a = &from->pipelines[i], *b = &to->pipelines[i];
        char pa[GF_KNOWN_LIST_BYTES], pb[GF_KNOWN_LIST_BYTES];

        if (strcmp(a->name, b->name) != 0)
            append_change(buf, len, "pipelines[%zu].name %s -> %s", i, a->name, b->name);
        if (a->kind != b->kind) {
            append_change(buf, len, "pipelines[%zu] (%s).kind %s -> %s", i, b->name, a->kind->name,
                          b->kind->name);
            continue;
        }
        if (memcmp(&a->params, &b->params, sizeof a->params) != 0) {
            params_text(a, pa, sizeof pa);
            params_text(b, pb, sizeof pb);
            append_change(buf, len, "pipelines[%zu] (%s).params %s -> %s", i, b->name, pa, pb);
        }
    }
}

void gf_config_describe_changes(const gf_config *from, const gf_config *to, char *buf, size_t len) {
    size_t count;
    const gf_config_key *keys = gf_config_keys(&count);

    if (len == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < count; i++)
        if (keys[i].type != GF_CONFIG_PIPELINES && field_differs(from, to, &keys[i]))
            append_key_change(buf, len, "", &keys[i], from, to);
    describe_pipeline_changes(from, to, buf, len);
}

/* Nonzero when `a` and `b` have the same pipelines by number, name and kind
 * (their parameters may differ). */
static int same_pipeline_layout(const gf_config *a, const gf_config *b) {
    if (a->pipeline_count != b->pipeline_count)
        return 0;
    for (size_t i = 0; i < a->pipeline_count; i++)
        if (a->pipelines[i].kind != b->pipelines[i].kind ||
            strcmp(a->pipelines[i].name, b->pipelines[i].name) != 0)
            return 0;
    return 1;
}

int gf_config_keep_restart_keys(const gf_config *running, gf_config *next, char *note,
                                size_t note_len) {
    size_t count;
    const gf_config_key *keys = gf_config_keys(&count);
    gf_pipeline *kept;

    for (size_t i = 0; i < count; i++) {
        const gf_config_key *k = &keys[i];
        if (k->reload != GF_RELOAD_NEEDS_RESTART || !field_differs(running, next, k))
            continue;
        append_key_change(note, note_len, GF_RESTART_NOTE_PREFIX, k, running, next);
        gf__config_field_copy(next, running, k);
    }
    if (same_pipeline_layout(running, next))
        return 0;
    /* Keep the running pipelines, parameters included. */
    kept = malloc(running->pipeline_count * sizeof *kept);
    if (kept == NULL)
        return -ENOMEM;
    memcpy(kept, running->pipelines, running->pipeline_count * sizeof *kept);
    free(next->pipelines);
    next->pipelines = kept;
    next->pipeline_count = running->pipeline_count;
    gf_config_note_restart(note, note_len, "pipelines added, removed, renamed or of another kind");
    return 0;
}

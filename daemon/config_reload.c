/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the differences between two configurations, for SIGHUP
 * (config.h: gf_config_describe_changes, gf_config_keep_restart_keys,
 * gf_config_note_restart, gf_config_keep_pipelines).  It walks the key table of config.c and owns
 * the texts a reload logs: "<key> <old> -> <new>" and "needs a restart: ...".
 */
#include "config_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "util.h"

/* What a reload's note starts with, as gf_shard_reload has always logged. */
#define GF_RESTART_NOTE_PREFIX "needs a restart: "

/* Nonzero when key `k` (not the pipelines) differs between `a` and `b`. */
static int field_differs(const gf_config *a, const gf_config *b, const gf_config_key *k) {
    if (k->type == GF_CONFIG_PATH || k->type == GF_CONFIG_ACCOUNT)
        return strcmp((const char *)a + k->offset, (const char *)b + k->offset) != 0;
    if (k->type == GF_CONFIG_ALLOW || k->type == GF_CONFIG_PRIORITIES)
        return memcmp((const char *)a + k->offset, (const char *)b + k->offset, k->size) != 0;
    return gf__config_field_get(a, k) != gf__config_field_get(b, k);
}

/* Key `k`'s value in `cfg` as the log writes it: "4", "cpu", "true", a path. */
static void field_text(const gf_config *cfg, const gf_config_key *k, char *buf, size_t len) {
    uint64_t v;

    if (k->type == GF_CONFIG_PATH || k->type == GF_CONFIG_ACCOUNT) {
        const char *text = (const char *)cfg + k->offset;
        gf_errorf(buf, len, "%s", text[0] != '\0' ? text : "\"\"");
        return;
    }
    if (k->type == GF_CONFIG_ALLOW) {
        gf_allow_describe(&cfg->allow, buf, len);
        return;
    }
    if (k->type == GF_CONFIG_PRIORITIES) {
        gf_priorities_describe(&cfg->priorities, buf, len);
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

/* A stage's parameters as compact JSON text in buf[len] ("?" when out of
 * memory). */
static void params_text(const gf_stage *s, char *buf, size_t len) {
    cJSON *obj = gf_stage_params_to_json(s);
    char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;
    gf_errorf(buf, len, "%s", text != NULL ? text : "?");
    cJSON_free(text);
    cJSON_Delete(obj);
}

/* Nonzero when two stages run the same code: one built-in kind, or plugins
 * from one shared object. */
static int same_code(const gf_stage *a, const gf_stage *b) {
    if (gf_kind_is_plugin(a->kind) && gf_kind_is_plugin(b->kind))
        return strcmp(gf_plugin_stage_path(a->params.plugin),
                      gf_plugin_stage_path(b->params.plugin)) == 0;
    return a->kind == b->kind;
}

/* What a pipeline runs, as compact text in buf[len]: each stage's kind, a
 * plugin's path, and parameters as JSON ("?" when out of memory). */
static void pipeline_text(const gf_pipeline *p, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < p->stage_count && o < len; k++) {
        const gf_stage *s = &p->stages[k];
        cJSON *obj = gf_stage_params_to_json(s);
        char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;
        o += gf_errorf(buf + o, len - o, "%s%s%s%s %s", k ? " + " : "", s->kind->name,
                       gf_kind_is_plugin(s->kind) ? "@" : "",
                       gf_kind_is_plugin(s->kind) ? gf_plugin_stage_path(s->params.plugin) : "",
                       text != NULL ? text : "?");
        cJSON_free(text);
        cJSON_Delete(obj);
    }
}

/* Appends what differs between the pipelines of `from` and `to`. */
/* A max_batch_delay_us as the file says it: "auto" or the number. */
static const char *delay_text(uint32_t delay_us, char *buf, size_t len) {
    if (delay_us == GF_BATCH_DELAY_AUTO)
        return "auto";
    snprintf(buf, len, "%u", delay_us);
    return buf;
}

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
        if (a->max_batch_frames != b->max_batch_frames)
            append_change(buf, len, "pipelines[%zu] (%s).max_batch_frames %u -> %u", i, b->name,
                          a->max_batch_frames, b->max_batch_frames);
        if (a->max_batch_delay_us != b->max_batch_delay_us) {
            char da[16], db[16];
            append_change(buf, len, "pipelines[%zu] (%s).max_batch_delay_us %s -> %s", i, b->name,
                          delay_text(a->max_batch_delay_us, da, sizeof da),
                          delay_text(b->max_batch_delay_us, db, sizeof db));
        }
        pipeline_text(a, pa, sizeof pa);
        pipeline_text(b, pb, sizeof pb);
        if (strcmp(pa, pb) == 0)
            continue;
        /* One stage of the same kind (and object): only its parameters. */
        if (a->stage_count == 1 && b->stage_count == 1 && same_code(&a->stages[0], &b->stages[0])) {
            params_text(&a->stages[0], pa, sizeof pa);
            params_text(&b->stages[0], pb, sizeof pb);
            append_change(buf, len, "pipelines[%zu] (%s).params %s -> %s", i, b->name, pa, pb);
        } else {
            append_change(buf, len, "pipelines[%zu] (%s) %s -> %s", i, b->name, pa, pb);
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

int gf_config_keep_restart_keys(const gf_config *running, gf_config *next, char *note,
                                size_t note_len) {
    size_t count;
    const gf_config_key *keys = gf_config_keys(&count);

    for (size_t i = 0; i < count; i++) {
        const gf_config_key *k = &keys[i];
        if (k->reload != GF_RELOAD_NEEDS_RESTART || !field_differs(running, next, k))
            continue;
        append_key_change(note, note_len, GF_RESTART_NOTE_PREFIX, k, running, next);
        gf__config_field_copy(next, running, k);
    }
    /* The pipelines are the shards' to judge: whether the slots' buffers
     * hold what they need (gf_shard_reload). */
    return 0;
}

int gf_config_keep_pipelines(const gf_config *running, gf_config *next) {
    gf_pipelines_free(next->pipelines, next->pipeline_count);
    next->pipelines = NULL;
    next->pipeline_count = 0;
    gf_pipeline *kept = malloc(running->pipeline_count * sizeof *kept);
    if (kept == NULL)
        return -ENOMEM;
    memcpy(kept, running->pipelines, running->pipeline_count * sizeof *kept);
    for (size_t i = 0; i < running->pipeline_count; i++)
        gf_pipeline_retain(&kept[i]);
    next->pipelines = kept;
    next->pipeline_count = running->pipeline_count;
    return 0;
}

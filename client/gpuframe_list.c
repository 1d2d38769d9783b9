/* SPDX-License-Identifier: MIT */
/*
 * gpuframe list: the daemon's pipelines as a table of id, name, kind, frames
 * (input and output tensors) and parameters, or its LIST document as it is
 * (--json).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_options.h"
#include "listing.h"
#include "plugin.h"

static const char list_help[] =
    "Usage: gpuframe list [OPTIONS]\n"
    "\n"
    "Prints the daemon's pipelines: id, name, kind, frames and parameters.  FRAMES\n"
    "is a frame's input and output as tensors, dtype[shape], \"n\" for the\n"
    "dimension the frame's length decides (-1 in the LIST document).\n"
    "\n"
    "      --json              print the daemon's LIST document as it is\n" COMMON_HELP;

/* Appends one parameter's value as "key=value" to buf[len] at *pos. */
static void format_param(const gf_param_desc *d, const gf_params *p, char *buf, size_t len,
                         size_t *pos) {
    const unsigned char *field = (const unsigned char *)p + d->offset;
    float f[3];
    uint32_t u;
    int n = 0;

    if (*pos >= len)
        return;
    switch (d->type) {
    case GF_PARAM_F32:
        memcpy(&f[0], field, sizeof f[0]);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%g", *pos ? " " : "", d->key, (double)f[0]);
        break;
    case GF_PARAM_U32:
        memcpy(&u, field, sizeof u);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%" PRIu32, *pos ? " " : "", d->key, u);
        break;
    case GF_PARAM_F32x3:
        memcpy(f, field, sizeof f);
        n = snprintf(buf + *pos, len - *pos, "%s%s=[%g,%g,%g]", *pos ? " " : "", d->key,
                     (double)f[0], (double)f[1], (double)f[2]);
        break;
    case GF_PARAM_ENUM:
        memcpy(&u, field, sizeof u);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%s", *pos ? " " : "", d->key,
                     gf_param_choice(d, u));
        break;
    case GF_PARAM_BOOL:
        memcpy(&u, field, sizeof u);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%s", *pos ? " " : "", d->key,
                     u ? "true" : "false");
        break;
    }
    if (n > 0)
        *pos += (size_t)n;
}

/* Appends a stage's parameters to buf[len] at *pos: a built-in kind's as
 * "key=value", a plugin's as its JSON object; "kind:" before them when the
 * pipeline has several stages. */
static void format_stage_params(const gf_stage *st, int name_it, char *buf, size_t len,
                                size_t *pos) {
    if (*pos < len && name_it)
        *pos +=
            (size_t)snprintf(buf + *pos, len - *pos, "%s%s:", *pos ? " | " : "", st->kind->name);
    if (!gf_kind_is_plugin(st->kind)) {
        for (size_t k = 0; k < st->kind->param_count; k++)
            format_param(&st->kind->params[k], &st->params, buf, len, pos);
        return;
    }
    cJSON *obj = gf_stage_params_to_json(st);
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (*pos < len)
        *pos += (size_t)snprintf(buf + *pos, len - *pos, "%s%s %s", *pos ? " " : "",
                                 gf_plugin_stage_path(st->params.plugin), text ? text : "?");
    cJSON_free(text);
    cJSON_Delete(obj);
}

/* Writes p's frames, "uint8[224,224,3]->float32[3,224,224]" (no space: one
 * column for awk), into buf[len]. */
static const char *frames_text(const gf_pipeline *p, char *buf, size_t len) {
    char in_text[GF_FRAME_DESC_TEXT_BYTES], out_text[GF_FRAME_DESC_TEXT_BYTES];
    gf_frame_desc in, out;
    gf_pipeline_describe(p, &in, &out);
    snprintf(buf, len, "%s->%s", gf_frame_desc_text(&in, in_text, sizeof in_text),
             gf_frame_desc_text(&out, out_text, sizeof out_text));
    return buf;
}

/* Prints the table: ID, NAME, KIND, FRAMES and PARAMS, columns as wide as
 * their widest entry. */
static void print_pipelines(const gf_pipeline *pipelines, size_t count) {
    char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX], frames[2 * GF_FRAME_DESC_TEXT_BYTES + 8];
    int name_w = (int)strlen("NAME"), kind_w = (int)strlen("KIND"),
        frames_w = (int)strlen("FRAMES");

    for (size_t i = 0; i < count; i++) {
        int nw = (int)strlen(pipelines[i].name);
        int kw = (int)strlen(gf_pipeline_kinds_text(&pipelines[i], kinds, sizeof kinds));
        int fw = (int)strlen(frames_text(&pipelines[i], frames, sizeof frames));
        name_w = nw > name_w ? nw : name_w;
        kind_w = kw > kind_w ? kw : kind_w;
        frames_w = fw > frames_w ? fw : frames_w;
    }
    printf("%-4s  %-*s  %-*s  %-*s  %s\n", "ID", name_w, "NAME", kind_w, "KIND", frames_w, "FRAMES",
           "PARAMS");
    for (size_t i = 0; i < count; i++) {
        const gf_pipeline *p = &pipelines[i];
        char params[1024] = "";
        size_t pos = 0;

        for (uint32_t k = 0; k < p->stage_count; k++)
            format_stage_params(&p->stages[k], p->stage_count > 1, params, sizeof params, &pos);
        gf_pipeline_kinds_text(p, kinds, sizeof kinds);
        frames_text(p, frames, sizeof frames);
        if (params[0] == '\0')
            printf("%-4" PRIu32 "  %-*s  %-*s  %s\n", p->id, name_w, p->name, kind_w, kinds,
                   frames);
        else
            printf("%-4" PRIu32 "  %-*s  %-*s  %-*s  %s\n", p->id, name_w, p->name, kind_w, kinds,
                   frames_w, frames, params);
    }
}

int gf_cmd_list(int argc, char *argv[]) {
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON}, COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    gf_common_opts o;
    int raw_json = 0, opt;

    gf_common_defaults(&o);
    while ((opt = getopt_long(argc, argv, ":" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (gf_common_option("list", opt, &o, argv, list_help))
            continue;
        if (opt == OPT_JSON)
            raw_json = 1;
    }
    gf_no_operands("list", argc, argv);

    gf_client *c = gf_connect_or_die(&o);
    if (raw_json) {
        char *json = gf_request_json_or_die(c, GF_MSG_LIST, &o);
        printf("%s\n", json);
        free(json);
        gf_client_close(c);
        return EXIT_OK;
    }

    size_t count;
    gf_pipeline *pipelines = gf_fetch_pipelines(c, &o, &count, NULL);
    gf_client_close(c);
    print_pipelines(pipelines, count);
    gf_pipelines_free(pipelines, count);
    return EXIT_OK;
}

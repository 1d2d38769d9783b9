/* SPDX-License-Identifier: MIT */
/*
 * gpuframe list: the daemon's pipelines as a table of id, name, kind and
 * parameters, or its LIST document as it is (--json).
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
    "Prints the daemon's pipelines: id, name, kind and parameters.\n"
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

/* Prints the table: ID, NAME, KIND and PARAMS, columns as wide as their
 * widest entry. */
static void print_pipelines(const gf_pipeline *pipelines, size_t count) {
    char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
    int name_w = (int)strlen("NAME"), kind_w = (int)strlen("KIND");

    for (size_t i = 0; i < count; i++) {
        int nw = (int)strlen(pipelines[i].name);
        int kw = (int)strlen(gf_pipeline_kinds_text(&pipelines[i], kinds, sizeof kinds));
        name_w = nw > name_w ? nw : name_w;
        kind_w = kw > kind_w ? kw : kind_w;
    }
    printf("%-4s  %-*s  %-*s  %s\n", "ID", name_w, "NAME", kind_w, "KIND", "PARAMS");
    for (size_t i = 0; i < count; i++) {
        const gf_pipeline *p = &pipelines[i];
        char params[1024] = "";
        size_t pos = 0;

        for (uint32_t k = 0; k < p->stage_count; k++)
            format_stage_params(&p->stages[k], p->stage_count > 1, params, sizeof params, &pos);
        gf_pipeline_kinds_text(p, kinds, sizeof kinds);
        if (params[0] == '\0')
            printf("%-4" PRIu32 "  %-*s  %s\n", p->id, name_w, p->name, kinds);
        else
            printf("%-4" PRIu32 "  %-*s  %-*s  %s\n", p->id, name_w, p->name, kind_w, kinds,
                   params);
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
    gf_pipeline *pipelines = gf_fetch_pipelines(c, &o, &count);
    gf_client_close(c);
    print_pipelines(pipelines, count);
    gf_pipelines_free(pipelines, count);
    return EXIT_OK;
}

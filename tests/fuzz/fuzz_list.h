/* SPDX-License-Identifier: MIT */
/*
 * The LIST round trip that the config and LIST harnesses both require of the
 * pipelines they accept.  Header-only, for the harnesses that link gflisting.
 */
#ifndef GF_FUZZ_LIST_H
#define GF_FUZZ_LIST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "listing.h"
#include "plugin.h"

/* The LIST document of p[count], decoded back, names the same pipelines
 * (id, name, kind) with the same parameters, bit for bit. */
static inline void gf_fuzz_list_round_trip(const gf_pipeline *p, size_t count) {
    cJSON *doc = gf_pipelines_to_json(p, count);
    REQUIRE(doc != NULL);
    char *text = cJSON_PrintUnformatted(doc);
    REQUIRE(text != NULL);
    cJSON_Delete(doc);

    gf_pipeline *back;
    size_t back_count;
    char err[1024];
    REQUIRE(gf_pipelines_from_json(text, &back, &back_count, err, sizeof err) == 0);
    REQUIRE(back_count == count);
    for (size_t i = 0; i < count; i++) {
        REQUIRE(back[i].id == p[i].id && strcmp(back[i].name, p[i].name) == 0);
        REQUIRE(back[i].stage_count == p[i].stage_count);
        for (uint32_t s = 0; s < p[i].stage_count; s++) {
            const gf_stage *a = &p[i].stages[s], *b = &back[i].stages[s];
            if (gf_kind_is_plugin(a->kind)) {
                /* Unloaded both sides: the same object, directory and params. */
                REQUIRE(gf_kind_is_plugin(b->kind));
                REQUIRE(!strcmp(gf_plugin_stage_path(a->params.plugin),
                                gf_plugin_stage_path(b->params.plugin)));
                REQUIRE(!strcmp(gf_plugin_stage_config_dir(a->params.plugin),
                                gf_plugin_stage_config_dir(b->params.plugin)));
                continue;
            }
            REQUIRE(b->kind == a->kind);
            for (size_t k = 0; k < a->kind->param_count; k++) {
                const gf_param_desc *d = &a->kind->params[k];
                size_t n = d->type == GF_PARAM_F32x3 ? 3 * sizeof(float) : sizeof(uint32_t);
                REQUIRE(memcmp((const char *)&b->params + d->offset,
                               (const char *)&a->params + d->offset, n) == 0);
            }
        }
    }
    gf_pipelines_free(back, back_count);
    cJSON_free(text);
}

#endif

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
        REQUIRE(back[i].id == p[i].id && back[i].kind == p[i].kind);
        REQUIRE(strcmp(back[i].name, p[i].name) == 0);
        for (size_t k = 0; k < p[i].kind->param_count; k++) {
            const gf_param_desc *d = &p[i].kind->params[k];
            size_t n = d->type == GF_PARAM_F32x3 ? 3 * sizeof(float) : sizeof(uint32_t);
            REQUIRE(memcmp((const char *)&back[i].params + d->offset,
                           (const char *)&p[i].params + d->offset, n) == 0);
        }
    }
    free(back);
    cJSON_free(text);
}

#endif

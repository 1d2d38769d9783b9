/* SPDX-License-Identifier: MIT */
/*
 * Lookups in the daemon's documents for the report renderers; report_doc.h
 * is the contract.
 */
#include "report_doc.h"

#include <math.h>
#include <string.h>

/* Numbers in the documents are doubles; an integer field must be a whole
 * number in [0, 2^63) to be taken as one. */
#define INT_FIELD_MAX 9223372036854775807.0

const cJSON *gf_doc_get(const cJSON *o, const char *path) {
    char key[64];

    while (o != NULL && *path != '\0') {
        const char *dot = strchr(path, '.');
        size_t n = dot != NULL ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key || !cJSON_IsObject(o))
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (dot != NULL);
    }
    return o;
}

double gf_doc_num(const cJSON *o, const char *path) {
    const cJSON *v = gf_doc_get(o, path);

    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *gf_doc_str(const cJSON *o, const char *path) {
    const cJSON *v = gf_doc_get(o, path);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int gf_doc_is_uint(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < INT_FIELD_MAX &&
           v->valuedouble == floor(v->valuedouble);
}

int gf_doc_engine_is_cpu(const cJSON *stats) {
    const char *engine = gf_doc_str(stats, "engine");

    return engine != NULL && strcmp(engine, "cpu") == 0;
}

const char *gf_doc_pipeline_name(const cJSON *list, uint64_t id) {
    const cJSON *p;

    cJSON_ArrayForEach(p, gf_doc_get(list, "pipelines")) {
        if (gf_doc_is_uint(gf_doc_get(p, "id")) && (uint64_t)gf_doc_num(p, "id") == id)
            return gf_doc_str(p, "name");
    }
    return NULL;
}

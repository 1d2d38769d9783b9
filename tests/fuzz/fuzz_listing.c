/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the LIST reply's decoder, gf_pipelines_from_json
 * (protocol/listing.h): any text from a peer, NUL-terminated as the client
 * terminates the payload it read.
 *
 * Checked: 0 with a pipeline array the caller frees (ids are indices, names
 * non-empty and unique, kinds known), which encodes to a LIST document that
 * decodes to the same pipelines, bit for bit; or -1 with a reason, nothing
 * returned.  LeakSanitizer reports anything not freed.
 *
 * And libgpuframe's own reader of names and ids (client/list_names.h), which
 * needs no cJSON: on any input, 0 or -EPROTO with a reason; on a document
 * both accept, the same names with the same ids, in order (a name that holds
 * an escaped NUL is one cJSON cuts there).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_list.h"
#include "list_names.h"
#include "listing.h"

#define ERR_BYTES 1024u

/* What libgpuframe's reader reported: names (as decoded) and ids. */
struct seen {
    size_t count;
    char name[GF_MAX_PIPELINES][GF_LIST_NAMES_NAME_MAX];
    size_t name_bytes[GF_MAX_PIPELINES];
    uint32_t id[GF_MAX_PIPELINES];
};

static int note(const char *name, size_t name_bytes, uint32_t id, void *arg) {
    struct seen *s = arg;

    if (s->count == GF_MAX_PIPELINES)
        return 1;
    REQUIRE(name_bytes <= GF_LIST_NAMES_NAME_MAX);
    memcpy(s->name[s->count], name, name_bytes);
    s->name_bytes[s->count] = name_bytes;
    s->id[s->count++] = id;
    return 0;
}

static struct seen seen; /* large: not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = gf_fuzz_text(data, size);

    char why[ERR_BYTES] = "";
    seen.count = 0;
    int names_rc = gf__list_names_each(json, strlen(json), note, &seen, why, sizeof why);
    REQUIRE(names_rc == 0 || (names_rc == -EPROTO && why[0] != '\0' && seen.count == 0));

    gf_pipeline *p = (gf_pipeline *)&p;
    size_t count = 12345;
    char err[ERR_BYTES] = "";
    int rc = gf_pipelines_from_json(json, &p, &count, err, sizeof err);
    free(json);
    if (rc == 0 && names_rc == 0) {
        REQUIRE(seen.count == count);
        for (size_t i = 0; i < count; i++) {
            size_t n = strlen(p[i].name);
            REQUIRE(seen.id[i] == p[i].id && seen.name_bytes[i] >= n &&
                    memcmp(seen.name[i], p[i].name, n) == 0 &&
                    (seen.name_bytes[i] == n || seen.name[i][n] == '\0'));
        }
    }
    if (rc != 0) {
        REQUIRE(rc == -1 && p == NULL && count == 0 && err[0] != '\0');
        return 0;
    }
    REQUIRE(count <= GF_MAX_PIPELINES && (count == 0 || p != NULL));
    for (size_t i = 0; i < count; i++) {
        REQUIRE(p[i].id == i && p[i].stage_count >= 1 && p[i].stage_count <= GF_STAGES_MAX);
        REQUIRE(memchr(p[i].name, '\0', sizeof p[i].name) != NULL && p[i].name[0] != '\0');
        for (size_t j = 0; j < i; j++)
            REQUIRE(strcmp(p[i].name, p[j].name) != 0);
    }

    gf_fuzz_list_round_trip(p, count);
    gf_pipelines_free(p, count);
    return 0;
}

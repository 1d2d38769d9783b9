/*
 * libFuzzer harness for the LIST reply's decoder, gf_pipelines_from_json
 * (protocol/listing.h): any text from a peer, NUL-terminated as the client
 * terminates the payload it read.
 *
 * Checked: 0 with a pipeline array the caller frees (ids are indices, names
 * non-empty and unique, kinds known), which encodes to a LIST document that
 * decodes to the same pipelines, bit for bit; or -1 with a reason, nothing
 * returned.  LeakSanitizer reports anything not freed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "listing.h"
#include "fuzz_list.h"

#define ERR_BYTES 1024u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = gf_fuzz_text(data, size);

    gf_pipeline *p = (gf_pipeline *)&p;
    size_t count = 12345;
    char err[ERR_BYTES] = "";
    int rc = gf_pipelines_from_json(json, &p, &count, err, sizeof err);
    free(json);
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

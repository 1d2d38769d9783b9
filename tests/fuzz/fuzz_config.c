/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for gf_config_parse_all (daemon/config.h): any text as a
 * configuration file (a NUL-terminated copy, as gf_config_load hands it over).
 *
 * Checked: the result is 0 with no problem reported, or -1 with at least one
 * and an empty configuration; the first problem of parse_all is the one
 * gf_config_parse reports alone; an accepted configuration is within the
 * documented bounds and its pipelines survive the LIST codec unchanged; what
 * either parse returns is freed (LeakSanitizer reports anything left).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_list.h"

/* Room for every problem of a small file, and for one. */
#define ERRS_BYTES 8192u
#define ERR_BYTES  1024u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = gf_fuzz_text(data, size);

    static char errs[ERRS_BYTES];
    char err[ERR_BYTES];
    size_t problems = 12345;
    gf_config cfg, one;
    memset(&cfg, 0xA5, sizeof cfg);
    int rc = gf_config_parse_all(json, &cfg, errs, sizeof errs, &problems);
    int rc_one = gf_config_parse(json, &one, err, sizeof err);
    REQUIRE(rc == rc_one);

    if (rc == 0) {
        REQUIRE(problems == 0 && errs[0] == '\0');
        REQUIRE(cfg.slot_count >= GF_SLOTS_MIN && cfg.slot_count <= GF_SLOTS_MAX);
        REQUIRE(cfg.max_frame_bytes <= GF_MAX_FRAME_BYTES_LIMIT);
        REQUIRE(memchr(cfg.socket_path, '\0', sizeof cfg.socket_path) != NULL);
        REQUIRE(cfg.pipeline_count <= GF_MAX_PIPELINES);
        REQUIRE(cfg.pipeline_count == 0 || cfg.pipelines != NULL);
        for (size_t i = 0; i < cfg.pipeline_count; i++) {
            const gf_pipeline *p = &cfg.pipelines[i];
            REQUIRE(p->id == i && p->stages[0].kind != NULL);
            REQUIRE(memchr(p->name, '\0', sizeof p->name) != NULL && p->name[0] != '\0');
        }
        gf_fuzz_list_round_trip(cfg.pipelines, cfg.pipeline_count);
        REQUIRE(one.pipeline_count == cfg.pipeline_count);
    } else {
        REQUIRE(rc == -1);
        REQUIRE(problems >= 1 && errs[0] != '\0');
        REQUIRE(cfg.pipelines == NULL && cfg.pipeline_count == 0);
        REQUIRE(one.pipelines == NULL && one.pipeline_count == 0);
        /* parse_all's first line is parse's one line (as far as it fits). */
        size_t first = strcspn(errs, "\n");
        REQUIRE(errs[first] == '\n');
        size_t n = strlen(err);
        REQUIRE(n > 0 && n <= first && memcmp(err, errs, n) == 0);
    }
    gf_config_free(&cfg);
    gf_config_free(&one);
    free(json);
    return 0;
}

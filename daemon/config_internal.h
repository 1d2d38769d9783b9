/* SPDX-License-Identifier: MIT */
/*
 * Private to the configuration module, whose files are config.c (the key
 * table, reading values, loading and freeing), config_pipelines.c (the
 * "pipelines" array) and config_reload.c (differences between two
 * configurations).  What one of them defines and another calls is declared
 * here; nothing outside those files includes it.
 */
#ifndef GF_CONFIG_INTERNAL_H
#define GF_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The value of an integer, bool or choice key `k` in `cfg`, widened. */
uint64_t gf__config_field_get(const gf_config *cfg, const gf_config_key *k);

/* Copies key `k`'s value from `from` into `to`.  Not for the pipelines. */
void gf__config_field_copy(gf_config *to, const gf_config *from, const gf_config_key *k);

/*
 * Parses the config's "pipelines" array `v` into a new array in *out (owned
 * by the caller, freed with gf_pipelines_free()) of *out_count entries,
 * reporting the problems of every element to `pr`; loads every plugin
 * (relative paths against `config_dir`) and checks each pipeline's stages
 * against `max_frame_bytes` unless that is 0 (itself invalid).  Returns 0,
 * or -1 with *out and *out_count untouched.
 */
int gf__config_parse_pipelines(const cJSON *v, uint64_t max_frame_bytes, const char *config_dir,
                               gf_pipeline **out, size_t *out_count, gf_problems *pr);

/* Reads the "allow" object `v` (named `key` in problems: "allow",
 * "priorities.realtime") into *out (names resolved now), reporting every
 * problem to `pr`.  Returns 0, or -1 with *out untouched. */
int gf__config_read_allow(const cJSON *v, const char *key, gf_allow *out, gf_problems *pr);

/* Reads the "priorities" object `v` into *out, the same way. */
int gf__config_read_priorities(const cJSON *v, gf_priorities *out, gf_problems *pr);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A plugin built for ABI version 1, before launch_batch: its gf_plugin ends
 * at `launch`, so the struct below is that version's (members up to
 * `reference` set, nothing after `launch` read).  gpuframed must load it
 * and run it frame by frame (tests/test_plugins.c, on the cpu engine: it
 * has no CUDA side).  It adds 1 to every byte.
 */
#include <stdlib.h>

#include "same_length.h"

static void *create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len) {
    (void)values, (void)env, (void)why, (void)why_len;
    return malloc(1);
}

static void reference(const void *state, const void *in, uint64_t in_bytes, void *out) {
    (void)state;
    for (uint64_t i = 0; i < in_bytes; i++)
        ((unsigned char *)out)[i] = (unsigned char)(((const unsigned char *)in)[i] + 1u);
}

static const gf_plugin plugin = {.abi_version = 1,
                                 .name = "plus_one_v1",
                                 .doc = "adds 1 to every byte (a version-1 plugin)",
                                 .exact = 1,
                                 .create = create,
                                 .destroy = free,
                                 .output_bytes = same_length_output_bytes,
                                 .max_output_bytes = same_length_max_output_bytes,
                                 .reference = reference};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

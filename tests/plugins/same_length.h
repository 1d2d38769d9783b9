/* SPDX-License-Identifier: MIT */
/*
 * What the fixture plugins here whose result is as long as their input
 * share: that length, and a reference that copies the input.  Each fixture
 * is a shared object of its own and includes this once.
 */
#ifndef GF_TEST_PLUGINS_SAME_LENGTH_H
#define GF_TEST_PLUGINS_SAME_LENGTH_H

#include <string.h>

#include "gpuframe_plugin.h"

static inline int64_t same_length_output_bytes(const void *state, uint64_t in_bytes, char *why,
                                               size_t why_len) {
    (void)state, (void)why, (void)why_len;
    return (int64_t)in_bytes;
}

static inline uint64_t same_length_max_output_bytes(const void *state, uint64_t max_in_bytes) {
    (void)state;
    return max_in_bytes;
}

static inline void copy_reference(const void *state, const void *in, uint64_t in_bytes, void *out) {
    (void)state;
    memcpy(out, in, in_bytes);
}

#endif

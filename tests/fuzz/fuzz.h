/* SPDX-License-Identifier: MIT */
/*
 * What every harness in tests/fuzz/ uses: the check by which a broken
 * contract becomes a crash, so that libFuzzer keeps the input, and the input
 * as text.  Header-only: each harness is its own executable.
 */
#ifndef GF_FUZZ_H
#define GF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

/* The input as a NUL-terminated string, as the daemon and the client hand
 * text to their parsers: a malloc'd copy the harness frees. */
static inline char *gf_fuzz_text(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    REQUIRE(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

#endif

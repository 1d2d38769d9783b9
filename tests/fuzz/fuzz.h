/*
 * The check every harness in tests/fuzz/ uses: a broken contract becomes a
 * crash, so that libFuzzer keeps the input.  Header-only: each harness is its
 * own executable.
 */
#ifndef GF_FUZZ_H
#define GF_FUZZ_H

#include <stdlib.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

#endif

/* SPDX-License-Identifier: MIT */
/* The reference of pipeline kind "echo"; contract in kernels.h. */
#include "kernels.h"

#include <string.h>

void gf_echo_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    (void)p;
    /* memcpy with a null pointer is undefined even for 0 bytes. */
    if (in_bytes > 0) {
        memcpy(out, in, in_bytes);
    }
}

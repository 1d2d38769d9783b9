/* SPDX-License-Identifier: MIT */
/*
 * The example plugin "clamp": y = min(max(x, lo), hi) on float32.  What its
 * C file and its CUDA file share: the state create() builds, and the kernel's
 * launcher, which clamp.c puts in the plugin's launch member.
 */
#ifndef GF_PLUGIN_CLAMP_H
#define GF_PLUGIN_CLAMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The host state, and the device state too: the bounds travel as kernel
 * arguments, so the device needs no memory of its own. */
typedef struct clamp_state {
    float lo, hi; /* lo <= hi, both finite */
} clamp_state;

/* The plugin's launch(): `dev` is a clamp_state.  Defined in clamp.cu. */
int gf__clamp_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                     void *out_dev, void *stream);

#ifdef __cplusplus
}
#endif

#endif

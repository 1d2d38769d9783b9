/* SPDX-License-Identifier: MIT */
/*
 * A version-2 plugin that declares launch_batch but no batch it would take
 * (max_batch_frames 0): the loader must refuse it at load with one line
 * (tests/test_plugins.c).  Built again with BATCH_FRAMES 4 as batch4, a
 * plugin that loads, and that a pipeline asking for larger batches may not
 * have.
 */
#include <stdlib.h>

#include "same_length.h"

static void *create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len) {
    (void)values, (void)env, (void)why, (void)why_len;
    return malloc(1);
}

static int launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                  void *out_dev, void *stream) {
    (void)dev, (void)stream_index, (void)in_dev, (void)in_bytes, (void)out_dev, (void)stream;
    return 0;
}

static int launch_batch(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                        uint32_t count, void *stream) {
    (void)dev, (void)stream_index, (void)frames, (void)count, (void)stream;
    return 0;
}

#ifndef BATCH_FRAMES
#define BATCH_FRAMES 0
#define NAME         "bad_batch"
#endif

static const gf_plugin plugin = {.abi_version = GF_PLUGIN_ABI_VERSION,
                                 .name = NAME,
                                 .create = create,
                                 .destroy = free,
                                 .output_bytes = same_length_output_bytes,
                                 .max_output_bytes = same_length_max_output_bytes,
                                 .launch = launch,
                                 .launch_batch = launch_batch,
                                 .max_batch_frames = BATCH_FRAMES};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

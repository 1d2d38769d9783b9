/* SPDX-License-Identifier: MIT */
/*
 * The CUDA launcher and device API of each pipeline kind, found by the
 * kind's name: the one place that ties the registry (gfpipelines, no CUDA)
 * to the kernels (gfkernels).  Part of gfkernels; contract in kernels.h.
 */
#include "kernels.h"

#include <string.h>

static const struct {
    const char *kind_name; /* gf_pipeline_kind.name */
    gf_launch_fn launch;
} launchers[] = {
    {"echo", gf_echo_launch},     {"affine", gf_affine_launch},
    {"sincos", gf_sincos_launch}, {"normalize_u8", gf_normalize_u8_launch},
    {"image", gf_image_launch},
};

/* The kinds whose CUDA side is a built-in plugin (gf_pipeline_kind.device_api). */
static const struct {
    const char *kind_name;
    const gf_plugin *api;
} device_apis[] = {
    {"image", &gf_image_device_api},
    {"spectrogram", &gf_spectrogram_device_api},
};

const gf_plugin *gf_kernel_device_api(const gf_pipeline_kind *kind) {
    for (size_t i = 0; kind != NULL && i < sizeof device_apis / sizeof device_apis[0]; i++)
        if (strcmp(device_apis[i].kind_name, kind->name) == 0)
            return device_apis[i].api;
    return NULL;
}

gf_launch_fn gf_kernel_launcher(const gf_pipeline_kind *kind) {
    if (kind == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        if (strcmp(launchers[i].kind_name, kind->name) == 0) {
            return launchers[i].launch;
        }
    }
    return NULL;
}

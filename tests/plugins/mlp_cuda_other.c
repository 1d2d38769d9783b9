/* SPDX-License-Identifier: MIT */
/*
 * A gf_mlp_cuda.so of another version than gf_mlp.so's: it exports the
 * companion's entry point, whose table gf_mlp.so must refuse by its version
 * alone (tests/test_plugin_builtin.c).  No CUDA: the table has no functions.
 */
#include "mlp_cuda.h"

static const gf__mlp_cuda_api other_version = {.version = GF_MLP_CUDA_VERSION + 1};

const gf__mlp_cuda_api *gf__mlp_cuda_entry(void) {
    return &other_version;
}

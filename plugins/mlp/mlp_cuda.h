/* SPDX-License-Identifier: MIT */
/*
 * The interface between the two objects of plugin "mlp": gf_mlp.so, the
 * plugin gpuframed loads, which needs nothing of the CUDA toolkit, and
 * gf_mlp_cuda.so beside it, which holds the CUDA and cuBLAS code and which
 * gf_mlp.so loads only when device_open is first called (mlp_cuda_load.c).
 * Private to the plugin: both objects are built from this one tree and
 * installed together; gpuframed's ABI (<gpuframe/plugin.h>) knows nothing
 * of it.
 *
 * gf_mlp_cuda.so exports one function, GF_MLP_CUDA_ENTRY_SYMBOL, which
 * returns a pointer to a static gf__mlp_cuda_api whose first member is
 * GF_MLP_CUDA_VERSION as the companion was built.  gf_mlp.so refuses a
 * companion of another version and reads nothing else of it.
 */
#ifndef GF_PLUGIN_MLP_CUDA_H
#define GF_PLUGIN_MLP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever this header or gf__mlp_net (mlp.h), which the companion
 * reads, changes in any way: an old companion beside a new gf_mlp.so must
 * be refused, not read a struct of another layout. */
#define GF_MLP_CUDA_VERSION 2u

/* The companion's file name; gf_mlp.so looks for it in its own directory. */
#define GF_MLP_CUDA_SO "gf_mlp_cuda.so"
/* The name of the one symbol gf_mlp.so looks up in it. */
#define GF_MLP_CUDA_ENTRY_SYMBOL "gf__mlp_cuda_entry"

/* The companion's functions: the plugin's device_open, device_close,
 * launch and launch_batch, with gpuframed's contracts (<gpuframe/plugin.h>); `state` is a
 * gf__mlp_net. */
typedef struct gf__mlp_cuda_api {
    uint32_t version; /* GF_MLP_CUDA_VERSION: always the first member */
    void *(*device_open)(const void *state, int device, uint32_t streams, char *why,
                         size_t why_len);
    void (*device_close)(void *dev);
    int (*launch)(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                  void *out_dev, void *stream);
    int (*launch_batch)(void *dev, uint32_t stream_index, const struct gf_plugin_frame *frames,
                        uint32_t count, void *stream);
} gf__mlp_cuda_api;

/* Defined by gf_mlp_cuda.so (mlp.cu), its one exported symbol. */
__attribute__((visibility("default"))) const gf__mlp_cuda_api *gf__mlp_cuda_entry(void);

#ifdef __cplusplus
}
#endif

#endif

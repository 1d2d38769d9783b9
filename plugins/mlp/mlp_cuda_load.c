/* SPDX-License-Identifier: MIT */
/*
 * The device functions of plugin "mlp" as gf_mlp.so has them: device_open,
 * device_close and launch forward to gf_mlp_cuda.so, the companion object
 * that holds the CUDA and cuBLAS code (mlp_cuda.h, mlp.cu).  The companion
 * is loaded by the first device_open, from the directory gf_mlp.so itself
 * lies in, so gf_mlp.so needs nothing of the CUDA toolkit: the CPU engine
 * and `gpuframe stream --verify`, which never call device_open, load it on
 * a host without the toolkit's libraries, and never map cuBLAS's half a
 * gigabyte.  Built only with CUDA (GF_HAVE_CUDA); without, the plugin has
 * no device functions.
 */
#include <assert.h>
#include <pthread.h>

#include "../companion.h"
#include "mlp.h"
#include "mlp_cuda.h"

/* The companion's functions: NULL until a device_open loads it, then the
 * same for the life of the process (it is never unloaded).  Written once,
 * under companion_lock; device_close and launch read it without the lock,
 * after the device_open that returned their `dev`, and so after the write. */
static const gf__mlp_cuda_api *companion;
static pthread_mutex_t companion_lock = PTHREAD_MUTEX_INITIALIZER;

/* gf_mlp_cuda.so, found from the address of this description in gf_mlp.so. */
static const gf__companion mlp_cuda = {.anchor = &mlp_cuda,
                                       .plugin_so = "gf_mlp.so",
                                       .file = GF_MLP_CUDA_SO,
                                       .entry_symbol = GF_MLP_CUDA_ENTRY_SYMBOL,
                                       .what = "gf_mlp.so's CUDA side",
                                       .version = GF_MLP_CUDA_VERSION};

void *gf__mlp_device_open(const void *state, int device, uint32_t streams, char *why,
                          size_t why_len) {
    pthread_mutex_lock(&companion_lock);
    if (companion == NULL)
        companion = gf__companion_open(&mlp_cuda, why, why_len);
    const gf__mlp_cuda_api *api = companion;
    pthread_mutex_unlock(&companion_lock);

    return api ? api->device_open(state, device, streams, why, why_len) : NULL;
}

void gf__mlp_device_close(void *dev) {
    assert(companion != NULL);
    companion->device_close(dev);
}

int gf__mlp_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                   void *out_dev, void *stream) {
    assert(companion != NULL);
    return companion->launch(dev, stream_index, in_dev, in_bytes, out_dev, stream);
}

int gf__mlp_launch_batch(void *dev, uint32_t stream_index, const struct gf_plugin_frame *frames,
                         uint32_t count, void *stream) {
    assert(companion != NULL);
    return companion->launch_batch(dev, stream_index, frames, count, stream);
}

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
#define _GNU_SOURCE /* dladdr */
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "mlp_cuda.h"

/* The companion's file name, in gf_mlp.so's own data: its address is what
 * dladdr takes to find gf_mlp.so's path. */
static const char companion_name[] = GF_MLP_CUDA_SO;

/* The companion's functions: NULL until a device_open loads it, then the
 * same for the life of the process (it is never unloaded).  Written once,
 * under companion_lock; device_close and launch read it without the lock,
 * after the device_open that returned their `dev`, and so after the write. */
static const gf__mlp_cuda_api *companion;
static pthread_mutex_t companion_lock = PTHREAD_MUTEX_INITIALIZER;

/* The companion's path into path[PATH_MAX]: the directory of gf_mlp.so as
 * loaded, symbolic links resolved (the two objects are installed side by
 * side; a link to gf_mlp.so is a link to the pair), then GF_MLP_CUDA_SO.
 * Returns 0, or -1 with one line in why[why_len]. */
static int companion_path(char *path, char *why, size_t why_len) {
    Dl_info info;
    char self[PATH_MAX];

    if (dladdr(companion_name, &info) == 0 || info.dli_fname == NULL) {
        snprintf(why, why_len, "cannot find %s: dladdr gives no path for gf_mlp.so",
                 GF_MLP_CUDA_SO);
        return -1;
    }
    if (realpath(info.dli_fname, self) == NULL) {
        snprintf(why, why_len, "cannot find %s: %s: %s", GF_MLP_CUDA_SO, info.dli_fname,
                 strerror(errno));
        return -1;
    }
    /* realpath's result is absolute: there is a slash. */
    const char *slash = strrchr(self, '/');
    const int n = snprintf(path, PATH_MAX, "%.*s/%s", (int)(slash - self), self, GF_MLP_CUDA_SO);
    if (n < 0 || n >= PATH_MAX) {
        snprintf(why, why_len, "cannot find %s: the path beside %s is too long", GF_MLP_CUDA_SO,
                 self);
        return -1;
    }
    return 0;
}

/* Loads the companion and checks its version; called with companion_lock
 * held and companion NULL.  Returns its table, or NULL with one line in
 * why[why_len] that names the file. */
static const gf__mlp_cuda_api *companion_open(char *why, size_t why_len) {
    char path[PATH_MAX];

    if (companion_path(path, why, why_len) < 0)
        return NULL;
    /* As gpuframed loads plugins: RTLD_NOW fails here rather than at a
     * frame; RTLD_LOCAL keeps cuBLAS's symbols to the companion;
     * RTLD_NODELETE keeps the CUDA runtime and cuBLAS mapped for the life of
     * a process that holds a context. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load %s: %s", path, e ? e : "dlopen failed");
        return NULL;
    }
    const gf__mlp_cuda_api *(*entry)(void);
    *(void **)&entry = dlsym(dl, GF_MLP_CUDA_ENTRY_SYMBOL);
    if (entry == NULL) {
        snprintf(why, why_len, "%s: no symbol %s (not gf_mlp.so's CUDA side?)", path,
                 GF_MLP_CUDA_ENTRY_SYMBOL);
        dlclose(dl);
        return NULL;
    }
    const gf__mlp_cuda_api *api = entry();
    if (api == NULL || api->version != GF_MLP_CUDA_VERSION) {
        snprintf(why, why_len,
                 "%s: version %u, where this gf_mlp.so needs %u (install both from one build)",
                 path, api ? (unsigned)api->version : 0u, GF_MLP_CUDA_VERSION);
        dlclose(dl);
        return NULL;
    }
    return api;
}

void *gf__mlp_device_open(const void *state, int device, uint32_t streams, char *why,
                          size_t why_len) {
    pthread_mutex_lock(&companion_lock);
    if (companion == NULL)
        companion = companion_open(why, why_len);
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

/* SPDX-License-Identifier: MIT */
/*
 * A plugin whose launch fails after it has queued work
 * (tests/test_plugins.c, a_failed_launch_is_answered_after_its_queued_work).
 * Each launch queues a host function that sleeps `sleep_ms` on the stream,
 * then the copy of its input to its output; a frame of `fail_bytes` bytes
 * then returns cudaErrorInvalidValue.  The CUDA engine must answer such a
 * frame only once the sleep has run: until then the stream may still read
 * the frame's memory.  On the CPU engine (reference) it copies.
 *
 * The CUDA driver's two calls come through dlopen, so that it builds
 * without a CUDA library to link.  device_open runs on the shard's thread;
 * launch on the shard's loop; sleep_then on the driver's host-function
 * thread.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "same_length.h"

/* cudaErrorInvalidValue: not sticky, the context goes on. */
#define INVALID_VALUE 1
/* cudaErrorUnknown: a driver call failed. */
#define UNKNOWN_ERROR 999

typedef int (*launch_host_func_fn)(void *stream, void (*fn)(void *), void *arg);
typedef int (*copy_fn)(uintptr_t dst, uintptr_t src, size_t bytes, void *stream);

struct state {
    unsigned sleep_ms;
    uint64_t fail_bytes;
};

struct device {
    const struct state *st;
    void *libcuda;
    launch_host_func_fn launch_host_func;
    copy_fn copy;
};

static const gf_plugin_param params[] = {
    {.key = "sleep_ms",
     .type = GF_PLUGIN_INTEGER,
     .min = 0,
     .max = 10000,
     .doc = "what each launch's host function sleeps, in milliseconds"},
    {.key = "fail_bytes",
     .type = GF_PLUGIN_INTEGER,
     .min = 0,
     .max = 1 << 30,
     .doc = "a frame of this length fails its launch after the sleep is queued (0: none)"},
};

static void *create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len) {
    (void)env, (void)why, (void)why_len;
    struct state *st = malloc(sizeof *st);
    if (st)
        *st = (struct state){.sleep_ms = (unsigned)values[0].number,
                             .fail_bytes = (uint64_t)values[1].number};
    return st;
}

static void *device_open(const void *state, int device, uint32_t streams, char *why,
                         size_t why_len) {
    (void)device, (void)streams;
    struct device *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    d->st = state;
    d->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d->libcuda) {
        void *launch_sym = dlsym(d->libcuda, "cuLaunchHostFunc");
        void *copy_sym = dlsym(d->libcuda, "cuMemcpyDtoDAsync_v2");
        memcpy(&d->launch_host_func, &launch_sym, sizeof launch_sym);
        memcpy(&d->copy, &copy_sym, sizeof copy_sym);
    }
    if (!d->launch_host_func || !d->copy) {
        snprintf(why, why_len, "libcuda.so.1's cuLaunchHostFunc and cuMemcpyDtoDAsync_v2: %s",
                 dlerror());
        if (d->libcuda)
            dlclose(d->libcuda);
        free(d);
        return NULL;
    }
    return d;
}

static void device_close(void *dev) {
    struct device *d = dev;
    dlclose(d->libcuda);
    free(d);
}

static void sleep_then(void *arg) {
    unsigned ms = (unsigned)(uintptr_t)arg;
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static int launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                  void *out_dev, void *stream) {
    const struct device *d = dev;
    (void)stream_index;
    if (d->st->sleep_ms &&
        d->launch_host_func(stream, sleep_then, (void *)(uintptr_t)d->st->sleep_ms) != 0)
        return UNKNOWN_ERROR;
    if (d->copy((uintptr_t)out_dev, (uintptr_t)in_dev, (size_t)in_bytes, stream) != 0)
        return UNKNOWN_ERROR;
    return in_bytes == d->st->fail_bytes ? INVALID_VALUE : 0;
}

static const gf_plugin plugin = {.abi_version = GF_PLUGIN_ABI_VERSION,
                                 .name = "fail_launch",
                                 .doc = "copies its input, after a sleep; a frame of fail_bytes "
                                        "fails its launch",
                                 .params = params,
                                 .param_count = 2,
                                 .exact = 1,
                                 .create = create,
                                 .destroy = free,
                                 .output_bytes = same_length_output_bytes,
                                 .max_output_bytes = same_length_max_output_bytes,
                                 .reference = copy_reference,
                                 .device_open = device_open,
                                 .device_close = device_close,
                                 .launch = launch,
                                 .flags = GF_PLUGIN_NO_GRAPHS};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

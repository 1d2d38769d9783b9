/* SPDX-License-Identifier: MIT */
#include "engine.h"

#include <errno.h>
#include <stdio.h>

#include "log.h"

const char *gf_engine_builtin_names(void) {
#ifdef GF_HAVE_CUDA
    return "cuda cpu";
#else
    return "cpu";
#endif
}

#ifndef GF_HAVE_CUDA
int gf_engine_cuda_available(char *why, size_t why_len) {
    snprintf(why, why_len, "this gpuframed was built without CUDA");
    return 0;
}

int gf_engine_bus_id(int device, char *buf, size_t len, char *why, size_t why_len) {
    (void)device;
    if (len > 0)
        buf[0] = '\0';
    snprintf(why, why_len, "this gpuframed was built without CUDA");
    return -ENODEV;
}

int gf__engine_cuda_open(const gf_engine_params *params, gf_completion *done, gf_engine **out) {
    (void)params;
    (void)done;
    (void)out;
    GF_LOG_ERR("engine cuda: this gpuframed was built without CUDA (engines: %s): use "
               "--engine cpu or auto, or build it where the CUDA toolkit is "
               "(/usr/local/cuda; README.md)",
               gf_engine_builtin_names());
    return -ENOTSUP;
}

int gf__engine_cuda_prepare(int device, uint32_t device_streams, gf_pipeline *pipelines,
                            size_t count, char *why, size_t why_len) {
    (void)device;
    (void)device_streams;
    (void)pipelines;
    (void)count;
    snprintf(why, why_len, "this gpuframed was built without CUDA");
    return -1;
}
#endif

enum gf_engine_choice gf_engine_choose(enum gf_engine_choice choice, int *devices) {
    char why[256] = "";
    *devices = choice == GF_ENGINE_CPU ? 0 : gf_engine_cuda_available(why, sizeof why);
    switch (choice) {
    case GF_ENGINE_CUDA: GF_LOG_INF("engine cuda: chosen by configuration"); return choice;
    case GF_ENGINE_CPU: GF_LOG_INF("engine cpu: chosen by configuration"); return choice;
    case GF_ENGINE_AUTO: break;
    }
    if (*devices > 0) {
        GF_LOG_INF("engine auto: chose cuda (%s)", why);
        return GF_ENGINE_CUDA;
    }
    GF_LOG_INF("engine auto: chose cpu, because %s", why);
    return GF_ENGINE_CPU;
}

int gf_engine_open(enum gf_engine_choice choice, const gf_engine_params *params,
                   gf_completion *done, gf_engine **out) {
    int devices;
    if (choice == GF_ENGINE_AUTO)
        choice = gf_engine_choose(choice, &devices);
    return choice == GF_ENGINE_CUDA ? gf__engine_cuda_open(params, done, out)
                                    : gf__engine_cpu_open(params, done, out);
}

int gf_engine_prepare(enum gf_engine_choice choice, int device, uint32_t device_streams,
                      gf_pipeline *pipelines, size_t count, char *why, size_t why_len) {
    return choice == GF_ENGINE_CUDA
               ? gf__engine_cuda_prepare(device, device_streams, pipelines, count, why, why_len)
               : gf__engine_cpu_prepare(pipelines, count, why, why_len);
}

void gf_engine_describe(const gf_engine *e, char *buf, size_t len) {
    const gf_device_info *d = &e->device;
    if (d->is_gpu)
        snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB, bus %s", d->name, d->cc_major,
                 d->cc_minor, d->sm_count, (double)d->memory_bytes / (1024.0 * 1024.0 * 1024.0),
                 d->pci_bus_id);
    else
        snprintf(buf, len, "cpu, C reference pipelines on %u worker threads", d->threads);
}

void gf_engine_close(gf_engine *e) {
    if (e)
        e->ops->close(e);
}

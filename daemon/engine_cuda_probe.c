/* SPDX-License-Identifier: MIT */
/*
 * Whether a CUDA device can be used, and, when not, why, in words a user
 * acts on (gf_engine_cuda_available, engine.h): engine = auto picks the
 * CPU engine on that answer, engine = cuda refuses to start with it.
 */
#include <stdio.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "engine.h"

/* The node the NVIDIA kernel module creates; libcuda opens it first. */
#define NVIDIA_CONTROL_NODE "/dev/nvidiactl"

/*
 * Why cudaGetDeviceCount failed with `err`, in words a user acts on: which of
 * the kernel module (its control node) and the driver library (libcuda.so.1,
 * whose CUDA version cudaDriverGetVersion gives, 0 when it cannot be loaded)
 * is missing, or whether the driver is older than this build's runtime.
 */
static void explain_no_device(cudaError_t err, char *why, size_t why_len) {
    int driver = 0, runtime = 0;
    int node = access(NVIDIA_CONTROL_NODE, F_OK) == 0;

    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    if (driver == 0 && !node)
        snprintf(why, why_len,
                 "no NVIDIA driver: " NVIDIA_CONTROL_NODE " does not exist and libcuda.so.1"
                 " cannot be loaded (install the NVIDIA driver, for CUDA %d.%d or later)",
                 runtime / 1000, runtime % 1000 / 10);
    else if (driver == 0)
        snprintf(why, why_len,
                 "the NVIDIA driver's library libcuda.so.1 is missing though " NVIDIA_CONTROL_NODE
                 " exists (install the driver's CUDA library, for CUDA %d.%d or later)",
                 runtime / 1000, runtime % 1000 / 10);
    else if (err == cudaErrorInsufficientDriver)
        snprintf(why, why_len,
                 "the NVIDIA driver is too old: it supports CUDA %d.%d, this gpuframed needs"
                 " %d.%d (update the driver)",
                 driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    else if (!node)
        snprintf(why, why_len,
                 "the NVIDIA kernel module is not loaded: " NVIDIA_CONTROL_NODE
                 " does not exist (modprobe nvidia, or reboot after installing the driver)");
    else
        snprintf(why, why_len,
                 "no usable CUDA device: cudaGetDeviceCount: %s (%s); driver for CUDA %d.%d",
                 cudaGetErrorString(err), cudaGetErrorName(err), driver / 1000, driver % 1000 / 10);
}

int gf_engine_cuda_available(char *why, size_t why_len) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        explain_no_device(err, why, why_len);
        cudaGetLastError();
        return 0;
    }
    if (count == 0) {
        snprintf(why, why_len, "no CUDA device present");
        return 0;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        snprintf(why, why_len, "CUDA device 0 does not answer");
        cudaGetLastError();
        return 0;
    }
    snprintf(why, why_len, "found %d CUDA device(s); device 0 is %s", count, prop.name);
    return count;
}

int gf_engine_bus_id(int device, char *buf, size_t len, char *why, size_t why_len) {
    cudaError_t err = cudaDeviceGetPCIBusId(buf, (int)len, device);
    if (err == cudaSuccess)
        return 0;
    cudaGetLastError();
    snprintf(why, why_len, "cudaDeviceGetPCIBusId(%d): %s", device, cudaGetErrorString(err));
    return -ENODEV;
}

/* SPDX-License-Identifier: MIT */
/*
 * GPU memory for device regions (device_alloc.h), and copies in and out of
 * it.
 *
 * The driver is opened here at run time (dlopen of libcuda.so.1, then
 * cuGetProcAddress for the ABI of CUDA 12.0, whose calls used here exist
 * unchanged since 10.2), once, on the first call that needs it; a program
 * that never makes a device region needs neither the toolkit nor a driver.
 * The driver's types are cuda_abi.h's.  Each call that needs a context
 * pushes the device's primary context, the one the CUDA runtime uses too,
 * onto its thread's stack and pops it before it returns, so the caller's
 * current context is unchanged.  Any thread.
 */
#include "device_alloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_abi.h"

#define DRIVER_ABI 12000

/* The driver's calls, looked up once (load). */
struct driver {
    int status;    /* 0: loaded; else the negative errno of the failure */
    char why[192]; /* the failure                                       */
    cuda_abi_result (*init)(unsigned flags);
    cuda_abi_result (*device_get)(int *dev, int ordinal);
    cuda_abi_result (*primary_retain)(void **ctx, int dev);
    cuda_abi_result (*ctx_push)(void *ctx);
    cuda_abi_result (*ctx_pop)(void **ctx);
    cuda_abi_result (*granularity)(size_t *g, const cuda_abi_alloc_prop *prop, int option);
    cuda_abi_result (*create)(uint64_t *handle, size_t size, const cuda_abi_alloc_prop *prop,
                              unsigned long long flags);
    cuda_abi_result (*release)(uint64_t handle);
    cuda_abi_result (*reserve)(uint64_t *ptr, size_t size, size_t align, uint64_t addr,
                               unsigned long long flags);
    cuda_abi_result (*free_va)(uint64_t ptr, size_t size);
    cuda_abi_result (*map)(uint64_t ptr, size_t size, size_t offset, uint64_t handle,
                           unsigned long long flags);
    cuda_abi_result (*unmap)(uint64_t ptr, size_t size);
    cuda_abi_result (*set_access)(uint64_t ptr, size_t size, const cuda_abi_access_desc *desc,
                                  size_t count);
    cuda_abi_result (*export_handle)(void *out, uint64_t handle, int type,
                                     unsigned long long flags);
    cuda_abi_result (*htod)(uint64_t dst, const void *src, size_t bytes);
    cuda_abi_result (*dtoh)(void *dst, uint64_t src, size_t bytes);
    cuda_abi_result (*ctx_sync)(void);
    cuda_abi_result (*error_name)(cuda_abi_result rc, const char **name);
};
static struct driver drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(drv.why, sizeof drv.why, "the CUDA driver (libcuda.so.1) cannot be loaded: %s",
                 dlerror());
        drv.status = -ENOSYS;
        return;
    }
    cuda_abi_result (*proc)(const char *, void **, int, uint64_t, int *);
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    memcpy(&proc, &sym, sizeof proc);
    if (sym == NULL) {
        snprintf(drv.why, sizeof drv.why, "the CUDA driver has no cuGetProcAddress_v2 (12.0)");
        drv.status = -ENOSYS;
        return;
    }
    static const struct {
        const char *name;
        size_t offset;
    } calls[] = {
        {"cuInit", offsetof(struct driver, init)},
        {"cuDeviceGet", offsetof(struct driver, device_get)},
        {"cuDevicePrimaryCtxRetain", offsetof(struct driver, primary_retain)},
        {"cuCtxPushCurrent", offsetof(struct driver, ctx_push)},
        {"cuCtxPopCurrent", offsetof(struct driver, ctx_pop)},
        {"cuMemGetAllocationGranularity", offsetof(struct driver, granularity)},
        {"cuMemCreate", offsetof(struct driver, create)},
        {"cuMemRelease", offsetof(struct driver, release)},
        {"cuMemAddressReserve", offsetof(struct driver, reserve)},
        {"cuMemAddressFree", offsetof(struct driver, free_va)},
        {"cuMemMap", offsetof(struct driver, map)},
        {"cuMemUnmap", offsetof(struct driver, unmap)},
        {"cuMemSetAccess", offsetof(struct driver, set_access)},
        {"cuMemExportToShareableHandle", offsetof(struct driver, export_handle)},
        {"cuMemcpyHtoD", offsetof(struct driver, htod)},
        {"cuMemcpyDtoH", offsetof(struct driver, dtoh)},
        {"cuCtxSynchronize", offsetof(struct driver, ctx_sync)},
        {"cuGetErrorName", offsetof(struct driver, error_name)},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        void *fn = NULL;
        int found = -1; /* CUdriverProcAddressQueryResult: 0 found */
        if (proc(calls[i].name, &fn, DRIVER_ABI, 0, &found) != CUDA_ABI_SUCCESS || found != 0 ||
            fn == NULL) {
            snprintf(drv.why, sizeof drv.why, "the CUDA driver has no %s", calls[i].name);
            drv.status = -ENOSYS;
            return;
        }
        memcpy((char *)&drv + calls[i].offset, &fn, sizeof fn);
    }
    cuda_abi_result rc = drv.init(0);
    if (rc != CUDA_ABI_SUCCESS) {
        snprintf(drv.why, sizeof drv.why, "cuInit failed with CUDA error %d: no usable GPU",
                 (int)rc);
        drv.status = -ENODEV;
    }
}

/* The driver's name of `rc`. */
static const char *rc_name(cuda_abi_result rc) {
    const char *name = NULL;
    if (drv.error_name == NULL || drv.error_name(rc, &name) != CUDA_ABI_SUCCESS || name == NULL)
        return "an unknown CUDA error";
    return name;
}

/* Devices whose primary context this process retained (once each, kept
 * for the process's life, as the CUDA runtime keeps its own). */
#define DEVICES_MAX 64
static void *contexts[DEVICES_MAX]; /* guarded by contexts_lock */
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads the driver and pushes `device`'s primary context onto this
 * thread's stack, current until done() pops it: the caller's own current
 * context (PyTorch's, another library's) is back when the call returns.
 * Returns 0, or a negative errno with the reason in why[] (nothing
 * pushed). */
static int ready(int device, char *why, size_t why_len) {
    pthread_once(&drv_once, load);
    if (drv.status < 0) {
        snprintf(why, why_len, "%s", drv.why);
        return drv.status;
    }
    if (device < 0 || device >= DEVICES_MAX) {
        snprintf(why, why_len, "CUDA device %d: not a device ordinal", device);
        return -ENODEV;
    }
    int dev = 0;
    cuda_abi_result rc = CUDA_ABI_SUCCESS;
    pthread_mutex_lock(&contexts_lock);
    void *ctx = contexts[device];
    if (ctx == NULL) {
        rc = drv.device_get(&dev, device);
        if (rc == CUDA_ABI_SUCCESS)
            rc = drv.primary_retain(&ctx, dev);
        if (rc == CUDA_ABI_SUCCESS)
            contexts[device] = ctx;
    }
    pthread_mutex_unlock(&contexts_lock);
    if (rc == CUDA_ABI_SUCCESS)
        rc = drv.ctx_push(ctx);
    if (rc != CUDA_ABI_SUCCESS) {
        snprintf(why, why_len, "CUDA device %d: %s", device, rc_name(rc));
        return -ENODEV;
    }
    return 0;
}

/* Undoes a successful ready(): the caller's context current again. */
static void done(void) {
    void *ctx = NULL;
    (void)drv.ctx_pop(&ctx);
}

int gf__device_alloc_create(int device, uint64_t bytes, gf__device_alloc *out, int *fd, char *why,
                            size_t why_len) {
    int err = ready(device, why, why_len);
    if (err < 0)
        return err;
    cuda_abi_alloc_prop prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CUDA_ABI_ALLOCATION_TYPE_PINNED;
    prop.requested_handle_types = CUDA_ABI_HANDLE_TYPE_POSIX_FD;
    prop.location.type = CUDA_ABI_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t g = 0;
    cuda_abi_result rc = drv.granularity(&g, &prop, CUDA_ABI_GRANULARITY_MINIMUM);
    if (rc != CUDA_ABI_SUCCESS || g == 0) {
        snprintf(why, why_len, "cuMemGetAllocationGranularity: %s", rc_name(rc));
        done();
        return -EIO;
    }
    if (bytes == 0 || bytes > SIZE_MAX - g) {
        snprintf(why, why_len, "a device region of %llu bytes", (unsigned long long)bytes);
        done();
        return -EINVAL;
    }
    size_t size = (size_t)((bytes + g - 1) / g * g);
    uint64_t handle = 0, ptr = 0;
    cuda_abi_access_desc access = {.location = prop.location, .flags = CUDA_ABI_ACCESS_READWRITE};
    const char *call = "cuMemCreate";
    if ((rc = drv.create(&handle, size, &prop, 0)) != CUDA_ABI_SUCCESS)
        goto fail;
    call = "cuMemAddressReserve";
    if ((rc = drv.reserve(&ptr, size, g, 0, 0)) != CUDA_ABI_SUCCESS)
        goto fail_release;
    call = "cuMemMap";
    if ((rc = drv.map(ptr, size, 0, handle, 0)) != CUDA_ABI_SUCCESS)
        goto fail_free;
    call = "cuMemSetAccess";
    if ((rc = drv.set_access(ptr, size, &access, 1)) != CUDA_ABI_SUCCESS)
        goto fail_unmap;
    call = "cuMemExportToShareableHandle";
    *fd = -1;
    if ((rc = drv.export_handle(fd, handle, CUDA_ABI_HANDLE_TYPE_POSIX_FD, 0)) != CUDA_ABI_SUCCESS)
        goto fail_unmap;
    *out = (gf__device_alloc){.device = device, .dev_ptr = ptr, .bytes = size, .handle = handle};
    done();
    return 0;

fail_unmap:
    drv.unmap(ptr, size);
fail_free:
    drv.free_va(ptr, size);
fail_release:
    drv.release(handle);
fail:
    snprintf(why, why_len, "%zu bytes on device %d: %s: %s", size, device, call, rc_name(rc));
    done();
    return rc == CUDA_ABI_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

void gf__device_alloc_free(gf__device_alloc *a) {
    char why[256];
    /* The driver's calls need a context current on this thread, which may
     * not be the one that made `a`. */
    if (a->dev_ptr == 0 || ready(a->device, why, sizeof why) < 0)
        return;
    drv.unmap(a->dev_ptr, (size_t)a->bytes);
    drv.free_va(a->dev_ptr, (size_t)a->bytes);
    drv.release(a->handle);
    done();
    a->dev_ptr = 0;
}

int gf__device_copy(int device, uint64_t dev_ptr, void *host, size_t bytes, int to_device) {
    char why[256];
    int err = ready(device, why, sizeof why);
    if (err < 0)
        return err;
    cuda_abi_result rc =
        to_device ? drv.htod(dev_ptr, host, bytes) : drv.dtoh(host, dev_ptr, bytes);
    /* From pageable memory, cuMemcpyHtoD may return once the bytes are
     * staged, before they reach the device: the daemon, in a context of
     * its own, could read the old ones.  Wait for the copy. */
    if (to_device && rc == CUDA_ABI_SUCCESS)
        rc = drv.ctx_sync();
    done();
    return bytes == 0 || rc == CUDA_ABI_SUCCESS ? 0 : -EIO;
}

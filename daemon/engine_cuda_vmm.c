/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's device regions: a client's cuMemCreate allocation,
 * shared as a POSIX file descriptor, imported and mapped into the daemon
 * with the driver's virtual memory management (PROTOCOL.md, "Device
 * frames"; engine.h, gf_engine_device_map).
 *
 * The daemon links the CUDA runtime statically and not libcuda, so that it
 * starts where there is no driver (the CPU engine).  The driver calls here
 * are looked up at run time through the runtime's own entry point,
 * cudaGetDriverEntryPointByVersion, for the ABI of CUDA 12.0, once.
 *
 * What the daemon believes comes from the driver, never from the client:
 * the import fails for anything that is not a CUDA allocation's handle; the
 * allocation's properties say it is device memory on one of our devices and
 * shareable as a POSIX fd; its granularity must divide the size the client
 * gave, and cuMemMap maps exactly that size or fails for one beyond the
 * allocation.  The handle is released once mapped: the mapping alone keeps
 * the memory alive, so a client that frees its allocation takes nothing
 * from under a kernel; the memory goes at gf_engine_device_unmap.
 *
 * Workers of the shard's libuv thread pool only (a region's map and unmap):
 * each call may block for hundreds of microseconds.
 */
#include "engine_cuda_vmm.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "engine_cuda_state.h"
#include "util.h"

/* The driver ABI the entry points are asked for: every call here exists
 * unchanged since CUDA 10.2, and 12.0 is the oldest driver the toolkit
 * of this build supports. */
#define VMM_DRIVER_ABI 12000

/* The driver's calls, looked up once (vmm_load). */
static struct {
    PFN_cuMemImportFromShareableHandle_v10020 import;
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 properties;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 free_va;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemRelease_v10020 release;
    PFN_cuGetErrorName_v6000 error_name;
    char missing[64]; /* the first call not found, or "" */
} vmm;
static uv_once_t vmm_once = UV_ONCE_INIT;

/* Looks `symbol` up into *fn; records the first one missing. */
static void lookup(const char *symbol, void **fn) {
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(symbol, fn, VMM_DRIVER_ABI, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess || *fn == NULL) {
        *fn = NULL;
        (void)cudaGetLastError();
        if (vmm.missing[0] == '\0')
            snprintf(vmm.missing, sizeof vmm.missing, "%s", symbol);
    }
}

static void vmm_load(void) {
    lookup("cuMemImportFromShareableHandle", (void **)&vmm.import);
    lookup("cuMemGetAllocationPropertiesFromHandle", (void **)&vmm.properties);
    lookup("cuMemGetAllocationGranularity", (void **)&vmm.granularity);
    lookup("cuMemAddressReserve", (void **)&vmm.reserve);
    lookup("cuMemAddressFree", (void **)&vmm.free_va);
    lookup("cuMemMap", (void **)&vmm.map);
    lookup("cuMemUnmap", (void **)&vmm.unmap);
    lookup("cuMemSetAccess", (void **)&vmm.set_access);
    lookup("cuMemRelease", (void **)&vmm.release);
    lookup("cuGetErrorName", (void **)&vmm.error_name);
}

/* The driver's name for `rc` ("CUDA_ERROR_INVALID_VALUE"). */
static const char *rc_name(CUresult rc) {
    const char *name = NULL;
    if (vmm.error_name == NULL || vmm.error_name(rc, &name) != CUDA_SUCCESS || name == NULL)
        return "an unknown CUDA error";
    return name;
}

int gf__cuda_device_map(gf_engine *e, int fd, uint64_t bytes, gf_device_mapping *out, char *why,
                        size_t why_len) {
    cuda_engine *ce = (cuda_engine *)e;
    /* The runtime's device (and with it the driver's context) for this
     * worker thread; it also initialises the driver before the lookup. */
    if (cudaSetDevice(ce->device) != cudaSuccess) {
        (void)cudaGetLastError();
        gf_errorf(why, why_len, "cudaSetDevice(%d) failed on the worker", ce->device);
        return -EIO;
    }
    uv_once(&vmm_once, vmm_load);
    if (vmm.missing[0] != '\0') {
        gf_errorf(why, why_len, "the CUDA driver has no %s: device regions need a newer driver",
                  vmm.missing);
        return -ENOTSUP;
    }
    CUmemGenericAllocationHandle handle;
    CUresult rc =
        vmm.import(&handle, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (rc != CUDA_SUCCESS) {
        gf_errorf(why, why_len,
                  "the CUDA driver does not import the file descriptor (%s): it is not a "
                  "cuMemCreate allocation exported as a POSIX file descriptor",
                  rc_name(rc));
        return -EINVAL;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    int devices = 0;
    size_t granularity = 0;
    CUdeviceptr va = 0;
    CUmemAccessDesc access;
    int err = -EINVAL;
    if ((rc = vmm.properties(&prop, handle)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemGetAllocationPropertiesFromHandle failed: %s", rc_name(rc));
        goto fail_release;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess)
        devices = 0;
    if (prop.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id < 0 ||
        prop.location.id >= devices) {
        gf_errorf(why, why_len,
                  "the allocation is not device memory on one of the daemon's %d device(s) "
                  "(type %d, location type %d, id %d)",
                  devices, (int)prop.type, (int)prop.location.type, prop.location.id);
        goto fail_release;
    }
    if (!(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        gf_errorf(why, why_len, "the allocation was not made shareable as a POSIX file descriptor");
        goto fail_release;
    }
    if ((rc = vmm.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) !=
            CUDA_SUCCESS ||
        granularity == 0) {
        gf_errorf(why, why_len, "cuMemGetAllocationGranularity failed: %s", rc_name(rc));
        goto fail_release;
    }
    if (bytes == 0 || bytes % granularity != 0) {
        gf_errorf(why, why_len,
                  "region_bytes %llu is not a nonzero multiple of the allocation's granularity "
                  "%zu",
                  (unsigned long long)bytes, granularity);
        goto fail_release;
    }
    if ((rc = vmm.reserve(&va, (size_t)bytes, granularity, 0, 0)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemAddressReserve of %llu bytes failed: %s",
                  (unsigned long long)bytes, rc_name(rc));
        err = -ENOMEM;
        goto fail_release;
    }
    /* The driver refuses a size beyond the allocation: the one check of the
     * size the client gave against the memory that is there. */
    if ((rc = vmm.map(va, (size_t)bytes, 0, handle, 0)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len,
                  "cuMemMap of region_bytes %llu failed (%s): larger than the allocation?",
                  (unsigned long long)bytes, rc_name(rc));
        goto fail_free;
    }
    access =
        (CUmemAccessDesc){.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((rc = vmm.set_access(va, (size_t)bytes, &access, 1)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemSetAccess for device %d failed: %s", prop.location.id,
                  rc_name(rc));
        goto fail_unmap;
    }
    /* The mapping holds the memory from now on. */
    (void)vmm.release(handle);
    *out = (gf_device_mapping){.dev_ptr = (uint64_t)va,
                               .bytes = bytes,
                               .device = prop.location.id,
                               .granularity_bytes = granularity};
    return 0;

fail_unmap:
    (void)vmm.unmap(va, (size_t)bytes);
fail_free:
    (void)vmm.free_va(va, (size_t)bytes);
fail_release:
    (void)vmm.release(handle);
    return err;
}

void gf__cuda_device_unmap(gf_engine *e, const gf_device_mapping *m) {
    cuda_engine *ce = (cuda_engine *)e;
    if (cudaSetDevice(ce->device) != cudaSuccess)
        (void)cudaGetLastError();
    CUresult rc = vmm.unmap((CUdeviceptr)m->dev_ptr, (size_t)m->bytes);
    if (rc == CUDA_SUCCESS)
        rc = vmm.free_va((CUdeviceptr)m->dev_ptr, (size_t)m->bytes);
    if (rc != CUDA_SUCCESS)
        GF_LOG_WRN("engine cuda: unmapping a device region of %llu bytes: %s",
                   (unsigned long long)m->bytes, rc_name(rc));
}

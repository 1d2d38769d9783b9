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
 * gave.  The size itself the driver cannot tell us: there is no query of an
 * imported allocation's size, and CUDA documents "offset + size must be
 * less than the size of the memory allocation" as a requirement on
 * cuMemMap's caller, not as a check it makes.  So the one check of the
 * client's size is cuMemMap refusing a size beyond the allocation, which
 * the drivers do but do not promise: at engine open (gf__cuda_vmm_check,
 * once per device) the daemon maps two granules of a one-granule
 * allocation of its own, exported and imported as a client's would be,
 * and where the driver does not refuse that, device regions are off on
 * that device.  The handle is released once mapped: the mapping alone
 * keeps the memory alive, so a client that frees its allocation takes
 * nothing from under a kernel; the memory goes at gf_engine_device_unmap.
 *
 * gf__cuda_vmm_check: the shard's thread at start-up.  The rest:
 * workers of the shard's libuv thread pool only (a region's map and unmap):
 * each call may block for hundreds of microseconds.
 */
#include "engine_cuda_vmm.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
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
    PFN_cuMemCreate_v10020 create;                   /* the self-check's */
    PFN_cuMemExportToShareableHandle_v10020 export_; /* the self-check's */
    char missing[64];                                /* the first call not found, or "" */
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
    lookup("cuMemCreate", (void **)&vmm.create);
    lookup("cuMemExportToShareableHandle", (void **)&vmm.export_);
}

/* The driver's entry points, looked up once: 0, or -ENOTSUP with the one
 * missing in why[why_len]. */
static int vmm_ready(char *why, size_t why_len) {
    uv_once(&vmm_once, vmm_load);
    if (vmm.missing[0] == '\0')
        return 0;
    gf_errorf(why, why_len, "the CUDA driver has no %s: device regions need a newer driver",
              vmm.missing);
    return -ENOTSUP;
}

/* The driver's name for `rc` ("CUDA_ERROR_INVALID_VALUE"). */
static const char *rc_name(CUresult rc) {
    const char *name = NULL;
    if (vmm.error_name == NULL || vmm.error_name(rc, &name) != CUDA_SUCCESS || name == NULL)
        return "an unknown CUDA error";
    return name;
}

/* The self-check's verdict on each device (gf__cuda_vmm_check): shards of
 * one device share it. */
static struct {
    int done;
    int status; /* 0: device regions on; -ENOTSUP: off, for `why` */
    char why[sizeof((cuda_engine *)0)->vmm_why];
} checked[GF_DEVICES_MAX];
static uv_mutex_t checked_lock;
static uv_once_t checked_once = UV_ONCE_INIT;

static void checked_init(void) {
    if (uv_mutex_init(&checked_lock) != 0)
        abort();
}

/* The self-check itself on `device` (current): 0, or -ENOTSUP with the
 * reason device regions are off in why[why_len]. */
static int self_check(int device, char *why, size_t why_len) {
    if (vmm_ready(why, why_len) < 0)
        return -ENOTSUP;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CUmemGenericAllocationHandle own = 0, imported = 0;
    int fd = -1, have_own = 0, have_imported = 0;
    CUdeviceptr va = 0;
    int err = -ENOTSUP;
    CUresult rc = vmm.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS || gran == 0) {
        gf_errorf(why, why_len, "cuMemGetAllocationGranularity failed: %s", rc_name(rc));
        goto out;
    }
    if ((rc = vmm.create(&own, gran, &prop, 0)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemCreate of one granule shareable as a POSIX fd failed: %s",
                  rc_name(rc));
        goto out;
    }
    have_own = 1;
    if ((rc = vmm.export_(&fd, own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) != CUDA_SUCCESS) {
        fd = -1;
        gf_errorf(why, why_len, "cuMemExportToShareableHandle failed: %s", rc_name(rc));
        goto out;
    }
    if ((rc = vmm.import(&imported, (void *)(uintptr_t)fd,
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemImportFromShareableHandle of its own fd failed: %s",
                  rc_name(rc));
        goto out;
    }
    have_imported = 1;
    if ((rc = vmm.reserve(&va, 2 * gran, gran, 0, 0)) != CUDA_SUCCESS) {
        va = 0;
        gf_errorf(why, why_len, "cuMemAddressReserve of two granules failed: %s", rc_name(rc));
        goto out;
    }
    /* One granule maps: a refusal of two below is for their size alone. */
    if ((rc = vmm.map(va, gran, 0, imported, 0)) != CUDA_SUCCESS) {
        gf_errorf(why, why_len, "cuMemMap of an imported granule failed: %s", rc_name(rc));
        goto out;
    }
    (void)vmm.unmap(va, gran);
    if ((rc = vmm.map(va, 2 * gran, 0, imported, 0)) == CUDA_SUCCESS) {
        (void)vmm.unmap(va, 2 * gran);
        gf_errorf(why, why_len,
                  "the CUDA driver mapped two granules of a one-granule allocation, so it cannot "
                  "check a device region's size against its allocation");
        goto out;
    }
    err = 0;
out:
    if (va != 0)
        (void)vmm.free_va(va, 2 * gran);
    if (have_imported)
        (void)vmm.release(imported);
    if (fd >= 0)
        close(fd);
    if (have_own)
        (void)vmm.release(own);
    return err;
}

void gf__cuda_vmm_check(cuda_engine *ce) {
    int device = ce->device;
    if (device < 0 || device >= GF_DEVICES_MAX) {
        ce->vmm_status = self_check(device, ce->vmm_why, sizeof ce->vmm_why);
    } else {
        uv_once(&checked_once, checked_init);
        uv_mutex_lock(&checked_lock);
        if (!checked[device].done) {
            checked[device].status =
                self_check(device, checked[device].why, sizeof checked[device].why);
            checked[device].done = 1;
            if (checked[device].status < 0)
                GF_LOG_WRN("engine cuda: device regions are off on device %d: %s", device,
                           checked[device].why);
        }
        ce->vmm_status = checked[device].status;
        memcpy(ce->vmm_why, checked[device].why, sizeof ce->vmm_why);
        uv_mutex_unlock(&checked_lock);
        return;
    }
    if (ce->vmm_status < 0)
        GF_LOG_WRN("engine cuda: device regions are off on device %d: %s", device, ce->vmm_why);
}

int gf__cuda_device_map(gf_engine *e, int fd, uint64_t bytes, uint32_t served,
                        gf_device_mapping *out, char *why, size_t why_len) {
    cuda_engine *ce = (cuda_engine *)e;
    if (ce->vmm_status < 0) {
        gf_errorf(why, why_len, "device regions are off on device %d: %s", ce->device, ce->vmm_why);
        return ce->vmm_status;
    }
    /* The runtime's device (and with it the driver's context) for this
     * worker thread; it also initialises the driver before the lookup. */
    if (cudaSetDevice(ce->device) != cudaSuccess) {
        (void)cudaGetLastError();
        gf_errorf(why, why_len, "cudaSetDevice(%d) failed on the worker", ce->device);
        return -EIO;
    }
    if (vmm_ready(why, why_len) < 0)
        return -ENOTSUP;
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
    if (prop.location.id >= GF_DEVICES_MAX || !(served & (1u << prop.location.id))) {
        gf_errorf(why, why_len,
                  "the allocation is on device %d, which the daemon does not serve (devices)",
                  prop.location.id);
        err = -ENODEV;
        goto fail_release;
    }
    /* No check of prop.requestedHandleTypes: the import from a POSIX file
     * descriptor above is the proof that the allocation was made shareable
     * so, and an imported handle's properties report no handle types (0 on
     * an H200 with the driver of CUDA 13: every region was refused). */
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
    /* The one check of the size the client gave against the memory that is
     * there: cuMemMap refuses a size beyond the allocation on this driver,
     * as the self-check at engine open saw (the header says why). */
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

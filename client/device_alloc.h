/* SPDX-License-Identifier: MIT */
/*
 * GPU memory for libgpuframe's device regions (device_alloc.c): made with
 * the CUDA driver's virtual memory management, mapped in this process and
 * exported as a POSIX file descriptor for the daemon, through a driver
 * opened at run time, so that the library links no CUDA.  Internal to the
 * library; libgpuframe.c speaks the protocol around it.  Any thread.
 */
#ifndef GF_DEVICE_ALLOC_H
#define GF_DEVICE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* One allocation: `bytes` (rounded up to the granularity) on `device`,
 * mapped at `dev_ptr`, whose driver handle is `handle`. */
typedef struct gf__device_alloc {
    int device;
    uint64_t dev_ptr;
    uint64_t bytes;
    uint64_t handle;
} gf__device_alloc;

/*
 * Allocates at least `bytes` on CUDA device `device` (this process's
 * ordinal), maps it here readable and writable by that device, and
 * exports it: *fd (the caller closes it).  Returns 0, or a negative errno
 * (-ENOSYS: no CUDA driver; -ENODEV; -ENOMEM; -EINVAL; -EIO) with the
 * driver's reason in why[why_len].
 */
int gf__device_alloc_create(int device, uint64_t bytes, gf__device_alloc *out, int *fd, char *why,
                            size_t why_len);

/* Unmaps and frees `a` here (the daemon's mapping keeps the memory alive
 * until it unmaps its own). */
void gf__device_alloc_free(gf__device_alloc *a);

/* Copies `bytes` between host memory `host` and device address `dev_ptr`
 * on `device`, to the device when `to_device`, synchronously.  Returns 0,
 * -ENOSYS or -ENODEV without a driver, -EIO for a failed copy. */
int gf__device_copy(int device, uint64_t dev_ptr, void *host, size_t bytes, int to_device);

#endif

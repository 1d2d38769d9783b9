/* SPDX-License-Identifier: MIT */
/*
 * The few types and constants of the CUDA driver API that libgpuframe's
 * device regions use (device_alloc.c), declared here as the driver's ABI
 * defines them, so that the library compiles and links without the CUDA
 * toolkit.  tests/test_cuda_abi.c holds every one of them to the toolkit's
 * cuda.h where the build has it.
 */
#ifndef GF_CUDA_ABI_H
#define GF_CUDA_ABI_H

#include <stdint.h>

typedef int cuda_abi_result;           /* CUresult */
#define CUDA_ABI_SUCCESS             0 /* CUDA_SUCCESS                  */
#define CUDA_ABI_ERROR_OUT_OF_MEMORY 2 /* CUDA_ERROR_OUT_OF_MEMORY      */

#define CUDA_ABI_ALLOCATION_TYPE_PINNED 1 /* CU_MEM_ALLOCATION_TYPE_PINNED */
#define CUDA_ABI_HANDLE_TYPE_POSIX_FD   1 /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
#define CUDA_ABI_LOCATION_TYPE_DEVICE   1 /* CU_MEM_LOCATION_TYPE_DEVICE   */
#define CUDA_ABI_ACCESS_READWRITE       3 /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
#define CUDA_ABI_GRANULARITY_MINIMUM    0 /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */

/* CUmemLocation */
typedef struct cuda_abi_location {
    int type;
    int id;
} cuda_abi_location;

/* CUmemAllocationProp (_v1) */
typedef struct cuda_abi_alloc_prop {
    int type;
    int requested_handle_types;
    cuda_abi_location location;
    void *win32_handle_meta_data;
    struct {
        unsigned char compression_type;
        unsigned char gpu_direct_rdma_capable;
        unsigned short usage;
        unsigned char reserved[4];
    } alloc_flags;
} cuda_abi_alloc_prop;

/* CUmemAccessDesc (_v1) */
typedef struct cuda_abi_access_desc {
    cuda_abi_location location;
    int flags;
} cuda_abi_access_desc;

#endif

/* SPDX-License-Identifier: MIT */
/*
 * libgpuframe declares the CUDA driver types and constants it uses itself
 * (client/cuda_abi.h), so that it builds without the toolkit; this holds
 * each of them to the toolkit's cuda.h: sizes, field offsets and values, at
 * compile time, and says so at run time.
 */
#include <check.h>
#include <cuda.h>
#include <stddef.h>

#include "cuda_abi.h"
#include "runner.h"

#define SAME_FIELD(ours, theirs, f_ours, f_theirs)                                                 \
    _Static_assert(offsetof(ours, f_ours) == offsetof(theirs, f_theirs) &&                         \
                       sizeof(((ours *)0)->f_ours) == sizeof(((theirs *)0)->f_theirs),             \
                   #ours "." #f_ours " is not " #theirs "." #f_theirs)

_Static_assert(sizeof(cuda_abi_result) == sizeof(CUresult), "CUresult");
_Static_assert(CUDA_ABI_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(CUDA_ABI_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
_Static_assert(CUDA_ABI_ALLOCATION_TYPE_PINNED == CU_MEM_ALLOCATION_TYPE_PINNED, "pinned");
_Static_assert(CUDA_ABI_HANDLE_TYPE_POSIX_FD == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "fd");
_Static_assert(CUDA_ABI_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE, "device");
_Static_assert(CUDA_ABI_ACCESS_READWRITE == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "read-write");
_Static_assert(CUDA_ABI_GRANULARITY_MINIMUM == CU_MEM_ALLOC_GRANULARITY_MINIMUM, "minimum");
_Static_assert(sizeof(uint64_t) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(uint64_t) == sizeof(CUmemGenericAllocationHandle), "handle");
_Static_assert(sizeof(int) == sizeof(CUdevice), "CUdevice");
_Static_assert(sizeof(cuda_abi_location) == sizeof(CUmemLocation), "CUmemLocation");
SAME_FIELD(cuda_abi_location, CUmemLocation, type, type);
SAME_FIELD(cuda_abi_location, CUmemLocation, id, id);
_Static_assert(sizeof(cuda_abi_alloc_prop) == sizeof(CUmemAllocationProp), "CUmemAllocationProp");
SAME_FIELD(cuda_abi_alloc_prop, CUmemAllocationProp, type, type);
SAME_FIELD(cuda_abi_alloc_prop, CUmemAllocationProp, requested_handle_types, requestedHandleTypes);
SAME_FIELD(cuda_abi_alloc_prop, CUmemAllocationProp, location, location);
SAME_FIELD(cuda_abi_alloc_prop, CUmemAllocationProp, win32_handle_meta_data, win32HandleMetaData);
SAME_FIELD(cuda_abi_alloc_prop, CUmemAllocationProp, alloc_flags, allocFlags);
_Static_assert(sizeof(cuda_abi_access_desc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc");
SAME_FIELD(cuda_abi_access_desc, CUmemAccessDesc, location, location);
SAME_FIELD(cuda_abi_access_desc, CUmemAccessDesc, flags, flags);

/* The checks are the _Static_asserts above: this test exists once they
 * compiled. */
START_TEST(cuda_abi_matches_cuda_h) {
    ck_assert_uint_eq(sizeof(cuda_abi_alloc_prop), sizeof(CUmemAllocationProp));
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, cuda_abi_matches_cuda_h);
    suite_add_tcase(s, tc);
    return gf_test_run(s);
}

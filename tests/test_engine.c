/* SPDX-License-Identifier: MIT */
/*
 * engine.c and engine_cuda.c's gf_engine_cuda_available: the reason engine
 * auto logs when it chooses the CPU engine says what is missing, in words a
 * user acts on.  The expectation is worked out from this machine: the NVIDIA
 * control node, whether libcuda.so.1 loads, and the CUDA runtime's version.
 * And completion = hybrid's polling window (engine.h), which is pure.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef GF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "engine.h"
#include "runner.h"

/* Room for the reason, as engine.c gives it. */
#define WHY_BYTES 256

START_TEST(no_gpu_reason_names_what_is_missing) {
    char why[WHY_BYTES] = "";
    int available = gf_engine_cuda_available(why, sizeof why);
#ifndef GF_HAVE_CUDA
    ck_assert_int_eq(available, 0);
    ck_assert_str_eq(why, "this gpuframed was built without CUDA");
#else
    char want[WHY_BYTES];
    int node = access("/dev/nvidiactl", F_OK) == 0;
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int driver_lib = libcuda != NULL, runtime = 0;
    if (libcuda != NULL)
        dlclose(libcuda);
    ck_assert_int_eq(cudaRuntimeGetVersion(&runtime), cudaSuccess);
    if (!node && !driver_lib) {
        /* CI and any machine without a driver. */
        snprintf(want, sizeof want,
                 "no NVIDIA driver: /dev/nvidiactl does not exist and libcuda.so.1 cannot be "
                 "loaded (install the NVIDIA driver, for CUDA %d.%d or later)",
                 runtime / 1000, runtime % 1000 / 10);
        ck_assert_int_eq(available, 0);
        ck_assert_str_eq(why, want);
    } else if (node && !driver_lib) {
        snprintf(want, sizeof want,
                 "the NVIDIA driver's library libcuda.so.1 is missing though /dev/nvidiactl "
                 "exists (install the driver's CUDA library, for CUDA %d.%d or later)",
                 runtime / 1000, runtime % 1000 / 10);
        ck_assert_int_eq(available, 0);
        ck_assert_str_eq(why, want);
    } else if (available) {
        /* A GPU host. */
        ck_assert_msg(strncmp(why, "found ", 6) == 0 && strstr(why, " device 0 is ") != NULL,
                      "reason: %s", why);
    } else {
        /* A driver that is too old, or a module not loaded: the reason names
         * the driver, never only the runtime's error string. */
        ck_assert_msg(strstr(why, "NVIDIA") != NULL || strstr(why, "driver for CUDA") != NULL,
                      "reason: %s", why);
    }
#endif
}
END_TEST

/* The window is 50 µs until the recent submissions' mean and a quarter
 * more passes it; it follows them to 500 µs, and beyond, work that long
 * goes back to 50 µs and a host function. */
START_TEST(hybrid_polls_as_long_as_recent_submissions_took) {
    ck_assert_uint_eq(GF_COMPLETION_SPIN_NS, 50000);
    ck_assert_uint_eq(GF_COMPLETION_SPIN_MAX_NS, 500000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(0), 50000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(40000), 50000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(40004), 50005);
    ck_assert_uint_eq(gf_hybrid_spin_ns(100000), 125000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(400000), 500000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(400004), 50000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(2000000), 50000);
    /* The mean: the first submission's own time, then an eighth of each. */
    ck_assert_uint_eq(gf_hybrid_tail_mean(0, 80000), 80000);
    ck_assert_uint_eq(gf_hybrid_tail_mean(80000, 160000), 90000);
    uint64_t mean = 0;
    for (int i = 0; i < 64; i++)
        mean = gf_hybrid_tail_mean(mean, i < 32 ? 30000 : 300000);
    ck_assert_uint_gt(mean, 290000);
    ck_assert_uint_le(mean, 300000);
    ck_assert_uint_eq(gf_hybrid_spin_ns(mean), mean + mean / 4);
}
END_TEST

static Suite *engine_suite(void) {
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, no_gpu_reason_names_what_is_missing);
    tcase_add_test(tc, hybrid_polls_as_long_as_recent_submissions_took);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(engine_suite());
}

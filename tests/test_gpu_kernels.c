/* SPDX-License-Identifier: MIT */
/*
 * GPU tests of kernels/: every kind's launcher on the device against its C
 * reference, through gf_pipeline_compare, at sizes from empty to 16 MiB;
 * and gf_copies_launch, the engine's gather of device frames, byte-exact.
 *
 * Labelled `gpu`: without CUDA in the build, or without a usable device, it
 * prints why and exits GF_SKIP_CODE, which ctest reports as skipped.  Tests
 * run in this process (CK_NOFORK): a process must never fork after CUDA is
 * initialised.
 */
#include <stdio.h>
#include <stdlib.h>

#include "runner.h"

#ifdef GF_HAVE_CUDA

#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "pipeline.h"
#include "testutil.h"

/* What the output buffers are filled with before a run: a kernel that skips
 * an element leaves this pattern, which no reference produces by chance. */
#define POISON_BYTE 0xA5
/* Bytes past the output that the kernel must leave poisoned. */
#define GUARD_BYTES 256
/* Float inputs are uniform in [-F32_INPUT_LIMIT, F32_INPUT_LIMIT]. */
#define F32_INPUT_LIMIT 4.0
/* Room for any reason the registry writes. */
#define WHY_BYTES 512
/* 1 MiB and 16 MiB, the daemon's typical and large frames. */
#define MIB (1u << 20)

/* splitmix64: a fixed seed gives the same inputs on every run. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills `bytes` bytes with random bytes. */
static void fill_bytes(unsigned char *buf, size_t bytes, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i < bytes; i++) {
        buf[i] = (unsigned char)(next_random(&state) >> 56);
    }
}

/* How a case's input is made. */
enum fill_mode {
    FILL_BYTES,       /* uniform random bytes                               */
    FILL_F32,         /* float32 uniform in [-F32_INPUT_LIMIT, F32_INPUT_LIMIT] */
    FILL_F32_NEAR_PI, /* float32 within NEAR_PI_SPREAD of +-pi: where sincos's
                         GPU and reference differ most                       */
};
/* Half-width of FILL_F32_NEAR_PI's two intervals. */
#define NEAR_PI_SPREAD 1e-2
#define PI             3.14159265358979323846

/* Fills `bytes` / 4 floats as `mode` says (FILL_F32 or FILL_F32_NEAR_PI). */
static void fill_f32(unsigned char *buf, size_t bytes, enum fill_mode mode, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i + sizeof(float) <= bytes; i += sizeof(float)) {
        /* 24 random bits: every value is an exact float in [0, 1). */
        double u = (double)(next_random(&state) >> 40) / (double)(1u << 24);
        float v;
        if (mode == FILL_F32_NEAR_PI) {
            v = (float)(((i / sizeof(float)) % 2 ? PI : -PI) + (2.0 * u - 1.0) * NEAR_PI_SPREAD);
        } else {
            v = (float)((2.0 * u - 1.0) * F32_INPUT_LIMIT);
        }
        memcpy(buf + i, &v, sizeof v);
    }
}

/*
 * Runs `kind_name` with `p` on `in_bytes` bytes of fresh random input (made
 * as `mode` says, from `seed`) on the device and compares the result with
 * the reference.  Every CUDA call is checked; a failure fails the test (and
 * leaks this case's buffers: the process ends soon after).
 */
static void run_case(const char *kind_name, const gf_params *p, size_t in_bytes,
                     enum fill_mode mode, uint64_t seed) {
    const gf_pipeline_kind *kind = gf_pipeline_kind_find(kind_name);
    char why[WHY_BYTES] = "";
    int64_t out_len;
    size_t out_bytes;
    unsigned char *in_host = NULL, *got_host = NULL, *ref_host = NULL;
    void *in_dev = NULL, *out_dev = NULL;
    cudaStream_t stream = NULL;
    gf_launch_fn launch;
    int rc;

    ck_assert_msg(kind != NULL, "no kind %s", kind_name);
    launch = gf_kernel_launcher(kind);
    ck_assert_msg(launch != NULL, "%s has no launcher in a CUDA build", kind_name);
    ck_assert_msg(kind->check_params(p, UINT64_MAX, why, sizeof why) == 0, "%s", why);
    out_len = kind->output_bytes(p, in_bytes, why, sizeof why);
    ck_assert_msg(out_len >= 0, "%s: %s", kind_name, why);
    out_bytes = (size_t)out_len;

    /* Pinned host memory, as the daemon's slots use; +1 keeps 0-byte cases
     * real allocations. */
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&in_host, in_bytes + 1));
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&got_host, out_bytes + GUARD_BYTES));
    ref_host = malloc(out_bytes + 1);
    ck_assert_ptr_nonnull(ref_host);
    GF_TEST_CK_CUDA(cudaMalloc(&in_dev, in_bytes + 1));
    GF_TEST_CK_CUDA(cudaMalloc(&out_dev, out_bytes + GUARD_BYTES));
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    if (mode == FILL_BYTES) {
        fill_bytes(in_host, in_bytes, seed);
    } else {
        fill_f32(in_host, in_bytes, mode, seed);
    }
    kind->reference(p, in_host, in_bytes, ref_host);
    memset(got_host, POISON_BYTE, out_bytes + GUARD_BYTES);

    GF_TEST_CK_CUDA(cudaMemsetAsync(out_dev, POISON_BYTE, out_bytes + GUARD_BYTES, stream));
    GF_TEST_CK_CUDA(cudaMemcpyAsync(in_dev, in_host, in_bytes, cudaMemcpyHostToDevice, stream));
    /* The launcher reports cudaGetLastError(): start from a clean slate so
     * that what it returns is its own launch's. */
    GF_TEST_CK_CUDA(cudaGetLastError());
    rc = launch(p, in_dev, in_bytes, out_dev, (gf_cuda_stream)stream);
    ck_assert_msg(rc == 0, "%s launch of %zu bytes: %s (%d)", kind_name, in_bytes,
                  cudaGetErrorString((cudaError_t)rc), rc);
    GF_TEST_CK_CUDA(cudaMemcpyAsync(got_host, out_dev, out_bytes + GUARD_BYTES,
                                    cudaMemcpyDeviceToHost, stream));
    GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
    /* A fault inside the kernel surfaces here, not at the launch. */
    GF_TEST_CK_CUDA(cudaGetLastError());

    ck_assert_msg(gf_pipeline_compare(kind, got_host, ref_host, out_bytes, why, sizeof why) == 0,
                  "%s, %zu bytes in: %s", kind_name, in_bytes, why);
    for (size_t i = 0; i < GUARD_BYTES; i++) {
        ck_assert_msg(got_host[out_bytes + i] == POISON_BYTE,
                      "%s, %zu bytes in: wrote past its output at byte %zu", kind_name, in_bytes,
                      out_bytes + i);
    }

    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
    GF_TEST_CK_CUDA(cudaFree(in_dev));
    free(ref_host);
    GF_TEST_CK_CUDA(cudaFreeHost(got_host));
    GF_TEST_CK_CUDA(cudaFreeHost(in_host));
}

/* Input sizes of the byte and float kinds: empty, one element, tails of the
 * 16-byte vector paths, a page, 1 MiB + 4 and 16 MiB. */
static const size_t echo_sizes[] = {0, 1, 4, 15, 17, 4096, MIB + 4, MIB + 7, 16 * MIB};
static const size_t f32_sizes[] = {0, 4, 12, 20, 4096, MIB + 4, 16 * MIB};
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_echo) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("echo"), &p);
    run_case("echo", &p, echo_sizes[_i], FILL_BYTES, 0xEC40u + (uint64_t)_i);
}
END_TEST

START_TEST(test_affine) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("affine"), &p);
    p.a = 1.7f;
    p.b = -0.3f;
    run_case("affine", &p, f32_sizes[_i], FILL_F32, 0xAFF1u + (uint64_t)_i);
}
END_TEST

/* Parameters at the range's edge, whose products overflow to infinity, and
 * tiny ones whose results are subnormal (the kernel must not flush them). */
START_TEST(test_affine_extremes) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("affine"), &p);
    p.a = _i == 0 ? 1e30f : 1e-38f;
    p.b = _i == 0 ? -1e30f : 1e-44f;
    run_case("affine", &p, MIB, FILL_F32, 0xAFF2u + (uint64_t)_i);
}
END_TEST

START_TEST(test_sincos) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("sincos"), &p);
    run_case("sincos", &p, f32_sizes[_i], FILL_F32, 0x51C0u + (uint64_t)_i);
}
END_TEST

/* Other repetition counts, on 1 MiB: the first pass alone, those where the
 * GPU and the reference differ most (8 to 14), and many. */
static const uint32_t sincos_iters[] = {1, 3, 8, 10, 12, 14, 100, 1000};

/* run_case of sincos with sincos_iters[i] repetitions on 1 MiB of input made
 * as `mode` says from `seed`. */
static void run_sincos_iters(int i, enum fill_mode mode, uint64_t seed) {
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("sincos"), &p);
    p.iters = sincos_iters[i];
    run_case("sincos", &p, MIB, mode, seed);
}

START_TEST(test_sincos_iters) {
    run_sincos_iters(_i, FILL_F32, 0x51C1u + (uint64_t)_i);
}
END_TEST

/* The same counts on inputs near +-pi, the map's repelling points, where a
 * one-ulp difference grows most before it is damped. */
START_TEST(test_sincos_near_pi) {
    run_sincos_iters(_i, FILL_F32_NEAR_PI, 0x51C2u + (uint64_t)_i);
}
END_TEST

START_TEST(test_normalize_u8) {
    static const uint32_t dims[][2] = {{1, 1}, {3, 7}, {64, 48}, {1920, 1080}, {2048, 2730}};
    gf_params p;
    gf_params_defaults(gf_pipeline_kind_find("normalize_u8"), &p);
    p.width = dims[_i][0];
    p.height = dims[_i][1];
    run_case("normalize_u8", &p, (size_t)p.width * p.height * 3, FILL_BYTES,
             0x4E0Du + (uint64_t)_i);
}
END_TEST

/* Lengths a launcher cannot take are refused without a launch. */
START_TEST(test_bad_lengths_refused) {
    gf_params p;
    void *in_dev = NULL, *out_dev = NULL;
    cudaStream_t stream = NULL;

    GF_TEST_CK_CUDA(cudaMalloc(&in_dev, 64));
    GF_TEST_CK_CUDA(cudaMalloc(&out_dev, 256));
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GF_TEST_CK_CUDA(cudaGetLastError());
    gf_params_defaults(gf_pipeline_kind_find("affine"), &p);
    ck_assert_int_eq(gf_affine_launch(&p, in_dev, 6, out_dev, (gf_cuda_stream)stream),
                     cudaErrorInvalidValue);
    gf_params_defaults(gf_pipeline_kind_find("sincos"), &p);
    ck_assert_int_eq(gf_sincos_launch(&p, in_dev, 10, out_dev, (gf_cuda_stream)stream),
                     cudaErrorInvalidValue);
    gf_params_defaults(gf_pipeline_kind_find("normalize_u8"), &p);
    p.width = 4;
    p.height = 4;
    ck_assert_int_eq(gf_normalize_u8_launch(&p, in_dev, 47, out_dev, (gf_cuda_stream)stream),
                     cudaErrorInvalidValue);
    GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
    GF_TEST_CK_CUDA(cudaGetLastError());
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
    GF_TEST_CK_CUDA(cudaFree(out_dev));
    GF_TEST_CK_CUDA(cudaFree(in_dev));
}
END_TEST

/*
 * gf_copies_launch, the engine's gather and scatter: `count` copies from one
 * buffer into another, copy i of copy_bytes(i) bytes at source and
 * destination offsets that are 16-byte aligned, or not, as `misalign` says
 * (0 both aligned, 1 the source off by 3, 2 both off by 5), the sizes
 * covering empty, tails of the vector path, a page and 64 KiB, launched as
 * the engine launches them for those ends (across_bus: blocks of 64 threads
 * where an end is host memory, else 256); every copied byte exact and every
 * other byte of the destination still poison.
 */
static size_t copy_bytes(unsigned i) {
    static const size_t sizes[] = {0, 1, 15, 16, 17, 255, 4096, 4099, 32000, 49168, 65536};
    return sizes[i % COUNT_OF(sizes)];
}

/* Where run_copies' copies read and write: device memory, or host memory
 * registered as the engine registers a client's shm region (malloc'd pages,
 * cudaHostRegister mapped), which the kernel reaches across the bus. */
enum copy_ends { DEVICE_TO_DEVICE, HOST_TO_DEVICE, DEVICE_TO_HOST, COPY_ENDS_ };

/* Registered host memory of `bytes`, page-aligned, as a shm region is. */
static void *registered(size_t bytes) {
    void *p = NULL;
    ck_assert_int_eq(posix_memalign(&p, 4096, bytes), 0);
    GF_TEST_CK_CUDA(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    return p;
}

static void unregister(void *p) {
    GF_TEST_CK_CUDA(cudaHostUnregister(p));
    free(p);
}

static void run_copies(unsigned count, int misalign, enum copy_ends ends) {
    const size_t stride = 65536 + 512, total = (size_t)(count ? count : 1) * stride;
    unsigned char *src_host, *got;
    void *src_dev, *dst_dev;
    cudaStream_t stream;
    gf_copy copies[GF_COPIES_MAX];
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&src_host, total));
    GF_TEST_CK_CUDA(cudaMallocHost((void **)&got, total));
    if (ends == HOST_TO_DEVICE)
        src_dev = registered(total);
    else
        GF_TEST_CK_CUDA(cudaMalloc(&src_dev, total));
    if (ends == DEVICE_TO_HOST)
        dst_dev = registered(total);
    else
        GF_TEST_CK_CUDA(cudaMalloc(&dst_dev, total));
    GF_TEST_CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    fill_bytes(src_host, total, 0xc0b1e5u + count);
    GF_TEST_CK_CUDA(cudaMemcpyAsync(src_dev, src_host, total, cudaMemcpyDefault, stream));
    GF_TEST_CK_CUDA(cudaMemsetAsync(dst_dev, POISON_BYTE, total, stream));
    const size_t from_skew = misalign ? (misalign == 1 ? 3 : 5) : 0,
                 to_skew = misalign == 2 ? 5 : 0;
    for (unsigned i = 0; i < count; i++) {
        /* Copy i lands in slot count-1-i: the table's order is not the memory's. */
        copies[i] =
            (gf_copy){(unsigned char *)src_dev + i * stride + from_skew,
                      (unsigned char *)dst_dev + (count - 1 - i) * stride + to_skew, copy_bytes(i)};
    }
    GF_TEST_CK_CUDA(cudaGetLastError());
    int rc = gf_copies_launch(copies, count, ends != DEVICE_TO_DEVICE, (gf_cuda_stream)stream);
    ck_assert_msg(rc == 0, "%u copies: %s", count, cudaGetErrorString((cudaError_t)rc));
    GF_TEST_CK_CUDA(cudaMemcpyAsync(got, dst_dev, total, cudaMemcpyDefault, stream));
    GF_TEST_CK_CUDA(cudaStreamSynchronize(stream));
    GF_TEST_CK_CUDA(cudaGetLastError());
    unsigned char *want = malloc(stride);
    ck_assert_ptr_nonnull(want);
    for (unsigned i = 0; i < count; i++) {
        const unsigned char *slot = got + (size_t)(count - 1 - i) * stride;
        memset(want, POISON_BYTE, stride);
        memcpy(want + to_skew, src_host + i * stride + from_skew, copy_bytes(i));
        size_t b = gf_test_first_difference(slot, want, stride);
        ck_assert_msg(b == stride,
                      "%u copies (misalign %d, ends %d): copy %u of %zu bytes, byte %zu of its "
                      "slot is 0x%02x, not 0x%02x",
                      count, misalign, (int)ends, i, copy_bytes(i), b, slot[b], want[b]);
    }
    free(want);
    GF_TEST_CK_CUDA(cudaStreamDestroy(stream));
    if (ends == DEVICE_TO_HOST)
        unregister(dst_dev);
    else
        GF_TEST_CK_CUDA(cudaFree(dst_dev));
    if (ends == HOST_TO_DEVICE)
        unregister(src_dev);
    else
        GF_TEST_CK_CUDA(cudaFree(src_dev));
    GF_TEST_CK_CUDA(cudaFreeHost(got));
    GF_TEST_CK_CUDA(cudaFreeHost(src_host));
}

START_TEST(test_copies) {
    static const unsigned counts[] = {0, 1, 9, GF_COPIES_MAX};
    for (int ends = 0; ends < COPY_ENDS_; ends++)
        for (int misalign = 0; misalign < 3; misalign++)
            run_copies(counts[_i], misalign, (enum copy_ends)ends);
}
END_TEST

START_TEST(test_copies_too_many_refused) {
    gf_copy copies[GF_COPIES_MAX + 1];
    memset(copies, 0, sizeof copies);
    GF_TEST_CK_CUDA(cudaGetLastError());
    ck_assert_int_eq(gf_copies_launch(copies, GF_COPIES_MAX + 1, 0, NULL), cudaErrorInvalidValue);
}
END_TEST

static Suite *gpu_kernels_suite(void) {
    Suite *s = suite_create("gpu_kernels");
    TCase *tc = tcase_create("kernels");

    /* Only honoured when forking, which these tests never do; ctest's own
     * timeout bounds the run. */
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_echo, 0, (int)COUNT_OF(echo_sizes));
    tcase_add_loop_test(tc, test_affine, 0, (int)COUNT_OF(f32_sizes));
    tcase_add_loop_test(tc, test_affine_extremes, 0, 2);
    tcase_add_loop_test(tc, test_sincos, 0, (int)COUNT_OF(f32_sizes));
    tcase_add_loop_test(tc, test_sincos_iters, 0, (int)COUNT_OF(sincos_iters));
    tcase_add_loop_test(tc, test_sincos_near_pi, 0, (int)COUNT_OF(sincos_iters));
    tcase_add_loop_test(tc, test_normalize_u8, 0, 5);
    tcase_add_test(tc, test_bad_lengths_refused);
    tcase_add_loop_test(tc, test_copies, 0, 4);
    tcase_add_test(tc, test_copies_too_many_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    int device_count = 0;
    cudaError_t err = cudaGetDeviceCount(&device_count);

    /* CI has nvcc but no driver: cudaErrorInsufficientDriver, not NoDevice. */
    if (err != cudaSuccess || device_count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return GF_SKIP_CODE;
    }
    /* Never fork after CUDA is initialised (cudaGetDeviceCount did). */
    return gf_test_run_in_process(gpu_kernels_suite());
}

#else /* !GF_HAVE_CUDA */

int main(void) {
    printf("SKIP: built without CUDA\n");
    return GF_SKIP_CODE;
}

#endif

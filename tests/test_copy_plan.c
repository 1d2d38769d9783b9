/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's moves of a batch's shared-memory frames between their
 * regions and the slot (daemon/engine_cuda_launch.c: copy_frames, its runs
 * of frames back to back or at one pitch, host_gathers' choice of one
 * kernel instead, move_frames), on the host, with no device: that file is
 * compiled into this suite, and the CUDA calls it makes (cudaMemcpyAsync,
 * cudaMemcpy2DAsync, gf_copies_launch) are replaced here by host copies
 * that count every byte they write and check each 2D copy's pitches.  A
 * batch is planned as the engine plans one of frames in regions
 * (gf__cuda_plan_moves, not whole), moved to the device and back
 * (gf__cuda_copy); then every input is in the slot and every result in its
 * region, each of their bytes written once, no other byte of a region or
 * of the slot written; and the copies and launches are the ones the plan
 * promises.  Single-threaded.
 */
#include "engine_cuda_launch.c"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

enum { REGIONS = 4 };
#define REGION_BYTES (1u << 20)
#define SLOT_BYTES   (4u << 20)

static uint8_t *g_region[REGIONS], *g_slot_in, *g_slot_out;
/* How many times each byte was written, buffer by buffer. */
static uint8_t *g_wrote_region[REGIONS], *g_wrote_in, *g_wrote_out;
/* What the stubs were asked: plain and 2D copies, kernel launches, and
 * the largest pitch the device takes (cuda_engine.max_pitch). */
static unsigned g_copies, g_copies_2d, g_kernels;
static uint64_t g_max_pitch;

/* The first of `n` bytes at which `a` and `b` differ; `n` if none does
 * (one memcmp; the scan only after a difference).  testutil.c's
 * gf_test_first_difference, which this suite cannot link: gf_test_util
 * brings gfcore and cudart, whose copies the stubs below replace. */
static size_t first_difference(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t i = 0;
    if (memcmp(a, b, n) == 0)
        return n;
    while (a[i] == b[i])
        i++;
    return i;
}

/* The write counts of the `n` bytes at `p`, which lie in one buffer. */
static uint8_t *wrote_at(const uint8_t *p, size_t n) {
    for (int r = 0; r < REGIONS; r++)
        if (p >= g_region[r] && p + n <= g_region[r] + REGION_BYTES)
            return g_wrote_region[r] + (p - g_region[r]);
    if (p >= g_slot_in && p + n <= g_slot_in + SLOT_BYTES)
        return g_wrote_in + (p - g_slot_in);
    if (p >= g_slot_out && p + n <= g_slot_out + SLOT_BYTES)
        return g_wrote_out + (p - g_slot_out);
    ck_abort_msg("a write of %zu bytes outside every buffer", n);
    return NULL;
}

static void copy_counted(void *to, const void *from, size_t n) {
    uint8_t *w = wrote_at(to, n);
    for (size_t i = 0; i < n; i++)
        w[i]++;
    memmove(to, from, n);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
    g_copies++;
    copy_counted(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
    g_copies_2d++;
    ck_assert_msg(width > 0 && height > 1 && dpitch >= width && spitch >= width &&
                      dpitch <= g_max_pitch && spitch <= g_max_pitch,
                  "a 2D copy of %zu rows of %zu bytes at pitches %zu (to) and %zu (from), "
                  "the device's largest %llu",
                  height, width, dpitch, spitch, (unsigned long long)g_max_pitch);
    for (size_t r = 0; r < height; r++)
        copy_counted((uint8_t *)dst + r * dpitch, (const uint8_t *)src + r * spitch, width);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    return cudaSuccess;
}

int gf_copies_launch(const gf_copy *copies, unsigned count, int across_bus, gf_cuda_stream stream) {
    g_kernels++;
    ck_assert_uint_le(count, GF_COPIES_MAX);
    ck_assert_int_eq(across_bus, 1); /* every frame here lies in host memory */
    for (unsigned i = 0; i < count; i++) {
        ck_assert_uint_eq(((uintptr_t)copies[i].from | (uintptr_t)copies[i].to) % 16, 0);
        ck_assert_uint_le(copies[i].bytes, HOST_GATHER_MAX_BYTES);
        copy_counted(copies[i].to, copies[i].from, copies[i].bytes);
    }
    return 0;
}

/* The stages are not run here. */
gf_launch_fn gf_kernel_launcher(const gf_pipeline_kind *kind) {
    return NULL;
}
const gf_plugin *gf_plugin_stage_api(const gf_plugin_stage *stage) {
    return NULL;
}
void *gf_plugin_stage_device(const gf_plugin_stage *stage, int device) {
    return NULL;
}
int gf_pipeline_elementwise(const gf_pipeline *p) {
    return 0;
}

static void setup(void) {
    for (int r = 0; r < REGIONS; r++) {
        g_region[r] = aligned_alloc(4096, REGION_BYTES);
        g_wrote_region[r] = malloc(REGION_BYTES);
        ck_assert(g_region[r] != NULL && g_wrote_region[r] != NULL);
    }
    g_slot_in = aligned_alloc(4096, SLOT_BYTES);
    g_slot_out = aligned_alloc(4096, SLOT_BYTES);
    g_wrote_in = malloc(SLOT_BYTES);
    g_wrote_out = malloc(SLOT_BYTES);
    ck_assert(g_slot_in && g_slot_out && g_wrote_in && g_wrote_out);
}

static void teardown(void) {
    for (int r = 0; r < REGIONS; r++) {
        free(g_region[r]);
        free(g_wrote_region[r]);
    }
    free(g_slot_in);
    free(g_slot_out);
    free(g_wrote_in);
    free(g_wrote_out);
}

/* A batch being built: its frames, and where the next one goes in the slot
 * (as the slot packs them: each at a multiple of 256 bytes). */
typedef struct batch {
    gf_frame frames[GF_SLOT_FRAMES_MAX];
    uint32_t count;
    uint64_t slot_at;
} batch;

/* Adds a frame of region r: its input at `in_at`, its result at `out_at`. */
static void add(batch *b, int r, uint64_t in_at, uint64_t in_bytes, uint64_t out_at,
                uint64_t out_bytes) {
    ck_assert_uint_lt(b->count, GF_SLOT_FRAMES_MAX);
    ck_assert_uint_le(in_at + in_bytes, REGION_BYTES);
    ck_assert_uint_le(out_at + out_bytes, REGION_BYTES);
    gf_frame *f = &b->frames[b->count++];
    memset(f, 0, sizeof *f);
    f->region = (struct gf_region *)&g_region[r]; /* compared, never read */
    f->src = g_region[r] + in_at;
    f->dst = g_region[r] + out_at;
    f->in_bytes = in_bytes;
    f->out_bytes = out_bytes;
    f->offset = b->slot_at;
    uint64_t most = in_bytes > out_bytes ? in_bytes : out_bytes;
    b->slot_at += (most + 255) / 256 * 256;
    ck_assert_uint_le(b->slot_at, SLOT_BYTES);
}

/* What moving batch `b` took. */
typedef struct moved {
    unsigned copies, copies_2d, kernels, host_gathered;
} moved;

/* Moves `b` in and out on an engine whose kernels reach registered memory
 * (`host_pointers`) and whose 2D copies take pitches up to `max_pitch`,
 * and checks every byte (above). */
static moved move(batch *b, int host_pointers, uint64_t max_pitch) {
    static uint8_t want_in[SLOT_BYTES], want_region[REGIONS][REGION_BYTES];
    cuda_engine ce;
    memset(&ce, 0, sizeof ce);
    ce.host_pointers = host_pointers;
    ce.max_pitch = g_max_pitch = max_pitch;
    cuda_slot cs;
    memset(&cs, 0, sizeof cs);
    cs.in_dev = g_slot_in;
    cs.out_dev = g_slot_out;
    gf_slot s;
    memset(&s, 0, sizeof s);
    s.frames = b->frames;
    s.frame_count = b->count;

    for (int r = 0; r < REGIONS; r++) {
        for (size_t i = 0; i < REGION_BYTES; i++)
            g_region[r][i] = (uint8_t)(i * 7 + (size_t)r);
        memset(g_wrote_region[r], 0, REGION_BYTES);
    }
    memset(g_slot_in, 0xAA, SLOT_BYTES);
    for (size_t i = 0; i < SLOT_BYTES; i++) /* the stages' results, as it were */
        g_slot_out[i] = (uint8_t)(i * 13 + 5);
    memset(g_wrote_in, 0, SLOT_BYTES);
    memset(g_wrote_out, 0, SLOT_BYTES);
    g_copies = g_copies_2d = g_kernels = 0;

    gf__cuda_plan_moves(&ce, &s, 0);
    ck_assert_int_eq(gf__cuda_copy(&ce, &s, &cs, 1), cudaSuccess);
    ck_assert_int_eq(gf__cuda_copy(&ce, &s, &cs, 0), cudaSuccess);

    memset(want_in, 0, sizeof want_in);
    memset(want_region, 0, sizeof want_region);
    for (uint32_t i = 0; i < b->count; i++) {
        const gf_frame *f = &b->frames[i];
        int r = (int)((uint8_t **)f->region - g_region);
        ck_assert_msg(memcmp(g_slot_in + f->offset, f->src, f->in_bytes) == 0,
                      "frame %u's input is not in the slot", i);
        ck_assert_msg(memcmp(f->dst, g_slot_out + f->offset, f->out_bytes) == 0,
                      "frame %u's result is not in its region", i);
        for (uint64_t k = 0; k < f->in_bytes; k++)
            want_in[f->offset + k]++;
        for (uint64_t k = 0; k < f->out_bytes; k++)
            want_region[r][(size_t)(f->dst - g_region[r]) + k]++;
    }
    size_t at = first_difference(g_wrote_in, want_in, SLOT_BYTES);
    ck_assert_msg(at == SLOT_BYTES, "slot byte %zu written %u times, not %u", at, g_wrote_in[at],
                  want_in[at]);
    memset(want_in, 0, sizeof want_in); /* nothing writes the slot's results */
    at = first_difference(g_wrote_out, want_in, SLOT_BYTES);
    ck_assert_msg(at == SLOT_BYTES, "the slot's result byte %zu was written", at);
    for (int r = 0; r < REGIONS; r++) {
        at = first_difference(g_wrote_region[r], want_region[r], REGION_BYTES);
        ck_assert_msg(at == REGION_BYTES, "region %d's byte %zu written %u times, not %u", r, at,
                      g_wrote_region[r][at], want_region[r][at]);
    }
    return (moved){g_copies, g_copies_2d, g_kernels, s.host_gathered};
}

/* A client's frame buffers (gf_client_shm_open: inputs one page-rounded
 * entry apart, then the results likewise) hold a spectrogram's frames. */
enum { AUDIO_IN = 32000, AUDIO_OUT = 25856, AUDIO_IN_STRIDE = 32768, AUDIO_OUT_STRIDE = 28672 };

/* `count` of client r's consecutive audio frames from entry `first`. */
static void add_audio(batch *b, int r, unsigned first, unsigned count) {
    for (unsigned e = first; e < first + count; e++)
        add(b, r, (uint64_t)e * AUDIO_IN_STRIDE, AUDIO_IN,
            16u * AUDIO_IN_STRIDE + (uint64_t)e * AUDIO_OUT_STRIDE, AUDIO_OUT);
}

/* A device that takes 2D copies of any pitch here. */
#define ANY_PITCH (1ull << 31)

/* What moving a batch took was exactly this. */
static void expect(moved m, unsigned copies, unsigned copies_2d, unsigned kernels,
                   unsigned host_gathered) {
    ck_assert_uint_eq(m.copies, copies);
    ck_assert_uint_eq(m.copies_2d, copies_2d);
    ck_assert_uint_eq(m.kernels, kernels);
    ck_assert_uint_eq(m.host_gathered, host_gathered);
}

/* Twelve of a client's frame buffers in a row: one 2D copy each way. */
START_TEST(a_clients_frame_buffers_are_one_2d_copy_each_way) {
    batch b = {0};
    add_audio(&b, 0, 2, 12);
    expect(move(&b, 1, ANY_PITCH), 0, 2, 0, 0);
}
END_TEST

/* Back to back in the region and in the slot: one plain copy each way. */
START_TEST(frames_back_to_back_are_one_copy_each_way) {
    batch b = {0};
    for (unsigned e = 0; e < 8; e++)
        add(&b, 1, e * 4096u, 4096, 65536 + e * 4096u, 4096);
    expect(move(&b, 1, ANY_PITCH), 2, 0, 0, 0);
}
END_TEST

/* Four clients' runs of three frames: copies of 96 KB on average, under
 * HOST_GATHER_COPY_BYTES, so one kernel each way moves them all; without
 * host pointers, a 2D copy a run each way. */
START_TEST(several_clients_short_runs_go_by_kernel) {
    batch b = {0};
    for (int r = 0; r < REGIONS; r++)
        add_audio(&b, r, 0, 3);
    expect(move(&b, 1, ANY_PITCH), 0, 0, 2, GF_HOST_GATHER_IN | GF_HOST_GATHER_OUT);
    expect(move(&b, 0, ANY_PITCH), 0, 2 * REGIONS, 0, 0);
}
END_TEST

/* Two clients' runs of twelve frames: copies of 384 KB, so they stay
 * copies, a 2D copy a run each way. */
START_TEST(several_clients_long_runs_keep_their_copies) {
    batch b = {0};
    add_audio(&b, 0, 0, 12);
    add_audio(&b, 1, 4, 12);
    expect(move(&b, 1, ANY_PITCH), 0, 4, 0, 0);
}
END_TEST

/* A client whose frames lie off 16-byte boundaries is copied, in a 2D copy
 * of its run each way, beside the kernel that moves the others'. */
START_TEST(unaligned_frames_are_copied_beside_the_kernel) {
    batch b = {0};
    for (unsigned e = 0; e < 3; e++)
        add(&b, 0, 4 + (uint64_t)e * AUDIO_IN_STRIDE, AUDIO_IN,
            4 + 16u * AUDIO_IN_STRIDE + (uint64_t)e * AUDIO_OUT_STRIDE, AUDIO_OUT);
    add_audio(&b, 1, 0, 3);
    add_audio(&b, 2, 0, 3);
    expect(move(&b, 1, ANY_PITCH), 0, 2, 2, GF_HOST_GATHER_IN | GF_HOST_GATHER_OUT);
}
END_TEST

/* Rows further apart than the device's largest pitch: a copy a frame. */
START_TEST(pitches_beyond_the_device_are_a_copy_a_frame) {
    batch b = {0};
    add_audio(&b, 0, 0, 4);
    expect(move(&b, 0, AUDIO_OUT_STRIDE - 1), 8, 0, 0, 0); /* each pitch is more */
}
END_TEST

/* A number below `n` from the xorshift state *rng. */
static uint64_t next(uint64_t *rng, uint64_t n) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return *rng % n;
}

/* Random batches: frames of up to four regions, back to back, at a pitch,
 * anywhere, or in decreasing order, some off 16-byte boundaries, of sizes
 * from 0 to past HOST_GATHER_MAX_BYTES, with and without host pointers and
 * with several largest pitches; every byte as above. */
START_TEST(random_batches_move_every_byte_once) {
    static const uint64_t sizes[] = {0, 16, 256, 4096, 4100, 25856, 32000, 32768, 40000, 70000};
    static const uint64_t pitches[] = {4096, 32768, 36864, 65536, 81920};
    static const uint64_t max_pitches[] = {ANY_PITCH, 65536, 40000, 4096};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    unsigned kernels = 0, copies_2d = 0;
    for (int round = 0; round < 120; round++) {
        batch b = {0};
        uint64_t in_next[REGIONS], out_next[REGIONS];
        for (int r = 0; r < REGIONS; r++) {
            in_next[r] = next(&rng, 64) * 16;
            out_next[r] = REGION_BYTES / 2 + next(&rng, 64) * 16;
        }
        unsigned frames = 1 + (unsigned)next(&rng, GF_SLOT_FRAMES_MAX);
        int r = (int)next(&rng, REGIONS), how = (int)next(&rng, 4);
        uint64_t bytes = sizes[next(&rng, 10)], pitch = pitches[next(&rng, 5)],
                 skew = next(&rng, 3) ? 0 : 4;
        for (unsigned i = 0; i < frames && b.slot_at + 70000 <= SLOT_BYTES; i++) {
            if (next(&rng, 5) == 0) { /* another client */
                r = (int)next(&rng, REGIONS);
                how = (int)next(&rng, 4);
                bytes = sizes[next(&rng, 10)];
            }
            uint64_t step = pitch < bytes ? (bytes + 4095) / 4096 * 4096 : pitch;
            uint64_t in_at, out_at, gap = 16 * next(&rng, 3) + skew;
            if (how == 0) { /* back to back */
                in_at = in_next[r];
                out_at = out_next[r];
            } else if (how == 1) { /* one pitch */
                in_at = (in_next[r] + step - 1) / step * step + skew;
                out_at = (out_next[r] + step - 1) / step * step + skew;
            } else if (how == 2) { /* gaps that vary */
                in_at = in_next[r] + gap;
                out_at = out_next[r] + gap;
            } else { /* before the last one */
                in_at = in_next[r] > 2 * step ? in_next[r] - 2 * step : 0;
                out_at = REGION_BYTES / 2 + next(&rng, REGION_BYTES / 2 / 4096 - 32) * 4096;
            }
            if (in_at + bytes > REGION_BYTES / 2 || out_at + bytes > REGION_BYTES)
                continue;
            /* Frames of a region never overlap: skip one that would. */
            int overlaps = 0;
            for (uint32_t k = 0; k < b.count; k++) {
                const gf_frame *g = &b.frames[k];
                if (g->region != (struct gf_region *)&g_region[r])
                    continue;
                const uint8_t *in = g_region[r] + in_at, *out = g_region[r] + out_at;
                overlaps |= (in < g->src + g->in_bytes && g->src < in + bytes) ||
                            (out < g->dst + g->out_bytes && g->dst < out + bytes);
            }
            if (overlaps)
                continue;
            add(&b, r, in_at, bytes, out_at, bytes);
            in_next[r] = in_at + bytes;
            out_next[r] = out_at + bytes;
        }
        if (b.count == 0)
            continue;
        moved m = move(&b, next(&rng, 4) != 0, max_pitches[next(&rng, 4)]);
        kernels += m.kernels;
        copies_2d += m.copies_2d;
    }
    /* The batches took every way there is. */
    ck_assert_uint_gt(kernels, 0);
    ck_assert_uint_gt(copies_2d, 0);
}
END_TEST

static Suite *copy_plan_suite(void) {
    Suite *s = suite_create("copy_plan");
    TCase *tc = tcase_create("moves");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_clients_frame_buffers_are_one_2d_copy_each_way);
    tcase_add_test(tc, frames_back_to_back_are_one_copy_each_way);
    tcase_add_test(tc, several_clients_short_runs_go_by_kernel);
    tcase_add_test(tc, several_clients_long_runs_keep_their_copies);
    tcase_add_test(tc, unaligned_frames_are_copied_beside_the_kernel);
    tcase_add_test(tc, pitches_beyond_the_device_are_a_copy_a_frame);
    tcase_add_test(tc, random_batches_move_every_byte_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(copy_plan_suite());
}

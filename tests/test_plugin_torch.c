/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of plugin "torch"'s host part, gf_torch.so (plugins/torch/
 * torch.c), loaded as gpuframed loads it: its table, the "inputs" and
 * "outputs" parameters' syntax and every error create() names, frame
 * lengths and the frames' description; and how its PyTorch side cuts a
 * submission into calls of the model and finds the batch sizes a package
 * takes (plugins/torch/batches.c), against stand-in packages.  No PyTorch
 * and no GPU: the package itself is PyTorch's to judge, at device_open
 * (python/tests/test_torch_gpu.py, on a GPU).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batches.h"
#include "plugin_util.h"
#include "runner.h"

/* A frame limit for create(): 16 MiB, the daemon's default. */
#define MAX_INPUT_BYTES (16u << 20)
/* A zip archive's first bytes: what create() takes for a package. */
static const char zip_head[] = "PK\003\004 and the rest of a package";

static const gf_plugin *torch_plugin(void) {
    return plugin_load(GF_PLUGIN_TORCH_SO, NULL);
}

/* create() with `package` (resolved against `dir`), `inputs`, `outputs`,
 * `max_batch`; NULL with why[] as the plugin wrote it. */
static void *torch_try(const char *dir, const char *package, const char *inputs,
                       const char *outputs, double max_batch, char *why) {
    const gf_plugin_value values[5] = {{.string = package},
                                       {.string = inputs},
                                       {.string = outputs},
                                       {.number = max_batch},
                                       {.number = 1}};
    const gf_plugin_env env = {.max_input_bytes = MAX_INPUT_BYTES, .config_dir = dir};
    why[0] = '\0';
    return torch_plugin()->create(values, &env, why, PLUGIN_WHY_BYTES);
}

/* A scratch directory holding model.pt2 (a zip head); removed by the caller. */
static void package_dir(char *dir, size_t len) {
    char path[512];
    scratch_dir_make(dir, len);
    path_join(path, sizeof path, dir, "model.pt2");
    file_write(path, zip_head, sizeof zip_head - 1);
}

START_TEST(test_torch_table) {
    const gf_plugin *p = torch_plugin();
    ck_assert_uint_eq(p->abi_version, GF_PLUGIN_ABI_VERSION);
    ck_assert_uint_eq(p->abi_version, 3);
    ck_assert_str_eq(p->name, "torch");
    /* PyTorch allocates during launches: never in the daemon's graphs. */
    ck_assert_uint_eq(p->flags, GF_PLUGIN_NO_GRAPHS);
    ck_assert(p->describe != NULL);
    ck_assert(p->device_open && p->device_close && p->launch && p->launch_batch);
    ck_assert_uint_eq(p->max_batch_frames, 64);
    ck_assert(p->reference == NULL); /* a model runs on the GPU only */
    ck_assert_uint_eq(p->param_count, 5);
    static const char *const keys[] = {"package", "inputs", "outputs", "max_batch", "cuda_graphs"};
    for (uint32_t i = 0; i < p->param_count; i++) {
        ck_assert_str_eq(p->params[i].key, keys[i]);
        ck_assert_ptr_nonnull(p->params[i].doc);
    }
    ck_assert_int_eq(p->params[0].type, GF_PLUGIN_STRING);
    ck_assert_int_eq(p->params[0].required, 1);
    ck_assert_int_eq(p->params[3].type, GF_PLUGIN_INTEGER);
    ck_assert_int_eq(p->params[3].required, 0);
    ck_assert_double_eq(p->params[3].default_number, 0);
    ck_assert_double_eq(p->params[3].max, 64);
    /* CUDA graphs by default; 0 turns them off. */
    ck_assert_int_eq(p->params[4].type, GF_PLUGIN_INTEGER);
    ck_assert_int_eq(p->params[4].required, 0);
    ck_assert_double_eq(p->params[4].default_number, 1);
    ck_assert_double_eq(p->params[4].min, 0);
    ck_assert_double_eq(p->params[4].max, 1);
}
END_TEST

/* A package as the docs make it: ResNet's frames and logits, relative to
 * the configuration's directory; lengths and description follow. */
START_TEST(test_torch_frames) {
    const gf_plugin *p = torch_plugin();
    char dir[256], why[PLUGIN_WHY_BYTES];
    package_dir(dir, sizeof dir);
    void *s = torch_try(dir, "model.pt2", "float32[3,224,224]", "float32[1000]", 0, why);
    ck_assert_msg(s != NULL, "%s", why);
    ck_assert_int_eq(p->output_bytes(s, 3 * 224 * 224 * 4, why, sizeof why), 4000);
    ck_assert_int_eq(p->output_bytes(s, 602111, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 602111 is not the 602112 bytes of a frame (float32[3,224,224])");
    ck_assert_int_eq(p->output_bytes(s, 0, why, sizeof why), -1);
    ck_assert_uint_eq(p->max_output_bytes(s, MAX_INPUT_BYTES), 4000);
    ck_assert_uint_eq(p->max_output_bytes(s, 602111), 0);
    gf_frame_desc in = {0}, out = {0};
    ck_assert_int_eq(p->describe(s, &in, &out, why, sizeof why), 0);
    ck_assert_uint_eq(in.count, 1);
    ck_assert_uint_eq(in.tensors[0].dtype, GF_DTYPE_FLOAT32);
    ck_assert_uint_eq(in.tensors[0].rank, 3);
    ck_assert_int_eq(in.tensors[0].dims[0], 3);
    ck_assert_int_eq(in.tensors[0].dims[2], 224);
    ck_assert_uint_eq(out.count, 1);
    ck_assert_uint_eq(out.tensors[0].rank, 1);
    ck_assert_int_eq(out.tensors[0].dims[0], 1000);
    p->destroy(s);

    /* Several tensors, every dtype, a scalar, spaces: lengths add up. */
    s = torch_try(dir, "model.pt2", " uint8[2, 3] ; int32[1];int64[] ",
                  "float16[4];bfloat16[2,2];float32[]", 8, why);
    ck_assert_msg(s != NULL, "%s", why);
    ck_assert_int_eq(p->output_bytes(s, 6 + 4 + 8, why, sizeof why), 8 + 8 + 4);
    /* Messages write the tensors as gpuframe-export does, without spaces. */
    ck_assert_int_eq(p->output_bytes(s, 1, why, sizeof why), -1);
    ck_assert_str_eq(why, "length 1 is not the 18 bytes of a frame (uint8[2,3];int32[1];int64[])");
    ck_assert_int_eq(p->describe(s, &in, &out, why, sizeof why), 0);
    ck_assert_uint_eq(in.count, 3);
    ck_assert_uint_eq(in.tensors[0].dtype, GF_DTYPE_UINT8);
    ck_assert_uint_eq(in.tensors[1].dtype, GF_DTYPE_INT32);
    ck_assert_uint_eq(in.tensors[2].dtype, GF_DTYPE_INT64);
    ck_assert_uint_eq(in.tensors[2].rank, 0);
    ck_assert_uint_eq(out.count, 3);
    ck_assert_uint_eq(out.tensors[0].dtype, GF_DTYPE_FLOAT16);
    ck_assert_uint_eq(out.tensors[1].dtype, GF_DTYPE_BFLOAT16);
    ck_assert_uint_eq(out.tensors[2].dtype, GF_DTYPE_FLOAT32);
    p->destroy(s);
    scratch_dir_remove(dir);
}
END_TEST

static const struct refusal {
    const char *package, *inputs, *outputs;
    const char *why; /* exactly; "%s" is the scratch directory */
} refusals[] = {
    {"missing.pt2", "float32[4]", "float32[2]",
     "package: %s/missing.pt2: No such file or directory"},
    {".", "float32[4]", "float32[2]", "package: %s/.: not a regular file"},
    {"notzip.pt2", "float32[4]", "float32[2]",
     "package: %s/notzip.pt2: not a PyTorch package (a .pt2 is a zip archive; make one with "
     "gpuframe-export or torch._inductor.aoti_compile_and_package)"},
    {"model.pt2", "float64[4]", "float32[2]",
     "inputs: \"float64[4]\": tensor 0: expected a dtype (uint8, int32, int64, float16, "
     "bfloat16, float32) at \"float64[\""},
    {"model.pt2", "float32", "float32[2]",
     "inputs: \"float32\": tensor 0: expected '[' after the dtype"},
    {"model.pt2", "float32[4", "float32[2]",
     "inputs: \"float32[4\": tensor 0: expected ',' or ']' after dimension 0"},
    {"model.pt2", "float32[4,0]", "float32[2]",
     "inputs: \"float32[4,0]\": tensor 0: dimension 1 is not a whole number from 1 to 2^40"},
    {"model.pt2", "float32[-1]", "float32[2]",
     "inputs: \"float32[-1]\": tensor 0: dimension 0 is not a whole number from 1 to 2^40"},
    {"model.pt2", "float32[4] uint8[2]", "float32[2]",
     "inputs: \"float32[4] uint8[2]\": expected ';' or the end after tensor 0"},
    {"model.pt2", "float32[4]", "float32[1,2,3,4,5,6,7,8,9]",
     "outputs: \"float32[1,2,3,4,5,6,7,8,9]\": tensor 0: more than 8 dimensions"},
    {"model.pt2", "u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1]", "float32[2]",
     "inputs: \"u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1];u8[1]\": tensor 0: expected a "
     "dtype (uint8, int32, int64, float16, bfloat16, float32) at \"u8[\""},
    {"model.pt2",
     "uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1]",
     "float32[2]",
     "inputs: \"uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];uint8[1];"
     "uint8[1]\": more than 8 tensors"},
    {"model.pt2", "float32[2048,2049]", "float32[2]",
     "inputs: \"float32[2048,2049]\" makes frames of 16785408 bytes, more than max_frame_bytes "
     "16777216"},
};

/* Each bad parameter or package is refused with one line naming it. */
START_TEST(test_torch_refusals) {
    const struct refusal *c = &refusals[_i];
    char dir[256], why[PLUGIN_WHY_BYTES], want[PLUGIN_WHY_BYTES + 256], path[512];
    package_dir(dir, sizeof dir);
    path_join(path, sizeof path, dir, "notzip.pt2");
    file_write(path, "not a zip", 9);
    ck_assert_ptr_null(torch_try(dir, c->package, c->inputs, c->outputs, 0, why));
    const char *at = strstr(c->why, "%s");
    if (at)
        snprintf(want, sizeof want, "%.*s%s%s", (int)(at - c->why), c->why, dir, at + 2);
    else
        snprintf(want, sizeof want, "%s", c->why);
    ck_assert_str_eq(why, want);
    scratch_dir_remove(dir);
}
END_TEST

/* An absolute package path is taken as it is. */
START_TEST(test_torch_absolute_path) {
    char dir[256], why[PLUGIN_WHY_BYTES], path[512];
    package_dir(dir, sizeof dir);
    path_join(path, sizeof path, dir, "model.pt2");
    void *s = torch_try("/nonexistent", path, "uint8[8]", "uint8[8]", 1, why);
    ck_assert_msg(s != NULL, "%s", why);
    torch_plugin()->destroy(s);
    scratch_dir_remove(dir);
}
END_TEST

/* ---- batches.c: calls of the model, and the batch sizes a package takes ---- */

/* A stand-in package: takes batches of lo..hi frames (none when lo is 0);
 * a probe of `stop_at` frames says stop.  Counts and records the probes. */
struct fake_package {
    uint32_t lo, hi, stop_at;
    uint32_t probes, seen[GF_TORCH_BATCH_MAX + 1];
};

static int fake_probe(void *ctx, uint32_t frames) {
    struct fake_package *p = ctx;
    ck_assert_uint_ge(frames, 1);
    ck_assert_uint_le(frames, GF_TORCH_BATCH_MAX);
    p->seen[p->probes++] = frames;
    if (frames == p->stop_at)
        return GF_TORCH_PROBE_STOP;
    return p->lo != 0 && frames >= p->lo && frames <= p->hi ? GF_TORCH_PROBE_TAKEN
                                                            : GF_TORCH_PROBE_REFUSED;
}

static const struct range_case {
    uint32_t want, lo, hi;   /* the probe's limit, the package's range (lo 0: none) */
    int found;               /* what gf__torch_batch_range returns             */
    uint32_t got_lo, got_hi; /* the range it finds                             */
    uint32_t probes_max;     /* at most this many probes                       */
} range_cases[] = {
    {64, 1, 64, 1, 1, 64, 2},  /* dynamic from 1: want, then 1                */
    {64, 2, 64, 1, 2, 64, 7},  /* 0/1 specialised: want, 1, bisection to 2    */
    {64, 1, 128, 1, 1, 64, 2}, /* exported for more than gpuframed forms      */
    {64, 1, 1, 1, 1, 1, 8},    /* a static batch of 1: want, 1, bisection     */
    {64, 2, 2, 1, 2, 2, 9},    /* a static batch of 2                         */
    {64, 5, 20, 1, 5, 20, 12}, /* want refused: 1..5 scanned, then the top    */
    {16, 1, 64, 1, 1, 16, 2},  /* max_batch 16                                */
    {1, 1, 64, 1, 1, 1, 1},    /* max_batch 1                                 */
    {1, 2, 64, 0, 0, 0, 1},    /* max_batch 1, the package from 2: none       */
    {64, 0, 0, 0, 0, 0, 64},   /* refuses every batch                         */
    {64, 70, 90, 0, 0, 0, 64}, /* takes only batches gpuframed never forms    */
};

START_TEST(test_torch_batch_range) {
    const struct range_case *c = &range_cases[_i];
    struct fake_package p = {.lo = c->lo, .hi = c->hi};
    uint32_t lo = 99, hi = 99;
    int found = gf__torch_batch_range(c->want, fake_probe, &p, &lo, &hi);
    ck_assert_int_eq(found, c->found);
    if (found == 1) {
        ck_assert_uint_eq(lo, c->got_lo);
        ck_assert_uint_eq(hi, c->got_hi);
    } else {
        ck_assert_uint_eq(lo, 99); /* untouched */
        ck_assert_uint_eq(hi, 99);
    }
    ck_assert_msg(p.probes <= c->probes_max, "case %d: %u probes, expected at most %u", _i,
                  p.probes, c->probes_max);
    ck_assert_uint_eq(p.seen[0], c->want); /* the size wanted first */
    for (uint32_t i = 0; i < p.probes; i++)
        ck_assert_uint_le(p.seen[i], c->want);
}
END_TEST

/* A probe that says stop ends the search at once, whatever it found. */
START_TEST(test_torch_batch_range_stops) {
    static const uint32_t stops[] = {64, 1, 32, 2};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++) {
        struct fake_package p = {.lo = 2, .hi = 64, .stop_at = stops[k]};
        uint32_t lo = 99, hi = 99;
        ck_assert_int_eq(gf__torch_batch_range(64, fake_probe, &p, &lo, &hi), GF_TORCH_PROBE_STOP);
        ck_assert_uint_eq(p.seen[p.probes - 1], stops[k]);
        ck_assert_uint_eq(lo, 99);
        ck_assert_uint_eq(hi, 99);
    }
    struct fake_package none = {.lo = 0};
    uint32_t lo, hi;
    ck_assert_int_eq(gf__torch_batch_range(0, fake_probe, &none, &lo, &hi), 0);
    ck_assert_uint_eq(none.probes, 0);
}
END_TEST

/* Frames of a submission at `offsets` (in units of `stride` bytes) in two
 * buffers; the calls gf__torch_next_call makes of them, written to calls[]
 * as "first+frames/batch@stride" strings joined by spaces. */
static void plan(const uint32_t *offsets, uint32_t count, uint64_t stride, uint64_t frame_bytes,
                 uint32_t min_batch, uint32_t max_batch, char *out, size_t out_len) {
    static uint8_t in[128 * 4096], res[128 * 4096];
    gf_plugin_frame frames[128];
    for (uint32_t i = 0; i < count; i++)
        frames[i] = (gf_plugin_frame){.in_dev = in + offsets[i] * stride,
                                      .in_bytes = frame_bytes,
                                      .out_dev = res + offsets[i] * stride,
                                      .out_bytes = frame_bytes};
    out[0] = '\0';
    gf__torch_call c;
    uint32_t i = 0, n, calls = 0;
    while ((n = gf__torch_next_call(frames, count, i, frame_bytes, min_batch, max_batch, &c)) > 0) {
        ck_assert_uint_eq(c.first, i);
        ck_assert_uint_eq(c.frames, n);
        size_t len = strlen(out);
        snprintf(out + len, out_len - len, "%s%u+%u/%u@%llu", calls++ ? " " : "", c.first, c.frames,
                 c.batch, (unsigned long long)c.stride);
        i += n;
    }
    ck_assert_uint_eq(i, count); /* every frame in exactly one call */
}

START_TEST(test_torch_calls) {
    uint32_t seq[128];
    for (uint32_t i = 0; i < 128; i++)
        seq[i] = i;
    char got[1024];
    /* One frame: alone, or padded to a package's smallest batch. */
    plan(seq, 1, 1024, 1000, 1, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+1/1@0");
    plan(seq, 1, 1024, 1000, 2, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+1/2@0");
    /* 7 at one stride: one call; above the smallest batch, no padding. */
    plan(seq, 7, 1024, 1000, 2, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+7/7@1024");
    plan(seq, 7, 1024, 1000, 16, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+7/16@1024");
    /* 70 frames: 64, then 6; max_batch 32: 32, 32, 6 padded to 8. */
    plan(seq, 70, 1024, 1000, 1, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+64/64@1024 64+6/6@1024");
    plan(seq, 70, 1024, 1000, 8, 32, got, sizeof got);
    ck_assert_str_eq(got, "0+32/32@1024 32+32/32@1024 64+6/8@1024");
    /* Frames not all at one stride: each run a call, a lone one padded. */
    static const uint32_t mixed[] = {0, 1, 2, 5, 6, 9};
    plan(mixed, 6, 1024, 1000, 2, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+3/3@1024 3+2/2@1024 5+1/2@0");
    /* A stride shorter than a frame is no batch; nor is max_batch 1. */
    plan(seq, 3, 512, 1000, 1, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+1/1@0 1+1/1@0 2+1/1@0");
    plan(seq, 3, 1024, 1000, 2, 1, got, sizeof got);
    ck_assert_str_eq(got, "0+1/2@0 1+1/2@0 2+1/2@0");
    /* Frames in reverse order are no batch either. */
    static const uint32_t reverse[] = {3, 2, 1, 0};
    plan(reverse, 4, 1024, 1000, 1, 64, got, sizeof got);
    ck_assert_str_eq(got, "0+1/1@0 1+1/1@0 2+1/1@0 3+1/1@0");
}
END_TEST

/* Outputs that do not follow their inputs' stride end a run. */
START_TEST(test_torch_calls_outputs) {
    static uint8_t in[8 * 1024], out[8 * 1024];
    gf_plugin_frame f[4];
    for (uint32_t i = 0; i < 4; i++)
        f[i] = (gf_plugin_frame){in + i * 1024, 1000, out + (i == 2 ? 3 : i) * 1024, 1000};
    gf__torch_call c;
    ck_assert_uint_eq(gf__torch_next_call(f, 4, 0, 1000, 1, 64, &c), 2);
    ck_assert_uint_eq(gf__torch_next_call(f, 4, 2, 1000, 1, 64, &c), 1);
    ck_assert_uint_eq(c.stride, 0);
    ck_assert_uint_eq(gf__torch_next_call(f, 4, 3, 1000, 1, 64, &c), 1);
    ck_assert_uint_eq(gf__torch_next_call(f, 4, 4, 1000, 1, 64, &c), 0);
    ck_assert_uint_eq(gf__torch_next_call(f, 4, 0, 1000, 1, 0, &c), 0);
}
END_TEST

START_TEST(test_torch_warm_sizes) {
    static const struct {
        uint32_t min, max, count, sizes[GF_TORCH_WARM_SIZES_MAX];
    } cases[] = {
        {1, 64, 7, {64, 32, 16, 8, 4, 2, 1}},
        {2, 64, 6, {64, 32, 16, 8, 4, 2}},
        {3, 64, 6, {64, 32, 16, 8, 4, 3}},
        {1, 48, 7, {48, 32, 16, 8, 4, 2, 1}},
        {5, 63, 5, {63, 32, 16, 8, 5}},
        {1, 3, 3, {3, 2, 1}},
        {1, 2, 2, {2, 1}},
        {1, 1, 1, {1}},
        {64, 64, 1, {64}},
        {0, 64, 0, {0}},
        {5, 4, 0, {0}},
        {1, GF_TORCH_BATCH_MAX + 1, 0, {0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint32_t sizes[GF_TORCH_WARM_SIZES_MAX];
        uint32_t n = gf__torch_warm_sizes(cases[k].min, cases[k].max, sizes);
        ck_assert_msg(n == cases[k].count, "min %u max %u: %u sizes, expected %u", cases[k].min,
                      cases[k].max, n, cases[k].count);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_uint_eq(sizes[i], cases[k].sizes[i]);
    }
}
END_TEST

/* replay[n] is want for every {n, want} of pairs[0..count). */
static void check_replay(const uint8_t *replay, const uint8_t (*pairs)[2], size_t count) {
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(replay[pairs[i][0]] == pairs[i][1], "replay[%u] = %u, expected %u",
                      pairs[i][0], replay[pairs[i][0]], pairs[i][1]);
}

/* The graph a call of each size replays: the smallest captured size at or
 * above it; none above the largest captured. */
START_TEST(test_torch_replay_sizes) {
    uint8_t captured[GF_TORCH_BATCH_MAX + 1] = {0}, replay[GF_TORCH_BATCH_MAX + 1];
    /* The bounded set of 1..64 alone (a large model past the time budget). */
    for (uint32_t s = 1; s <= 64; s *= 2)
        captured[s] = 1;
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 1, 64, replay), 1);
    static const uint8_t bounded[][2] = {{0, 0}, {1, 1},  {2, 2},   {3, 4},  {5, 8},
                                         {8, 8}, {9, 16}, {33, 64}, {64, 64}};
    check_replay(replay, bounded, sizeof bounded / sizeof bounded[0]);
    /* Every size captured: each its own. */
    memset(captured, 1, sizeof captured);
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 1, 64, replay), 1);
    for (uint32_t n = 1; n <= 64; n++)
        ck_assert_uint_eq(replay[n], n);
    /* A package from 2 to 48: nothing below 2 or above 48. */
    memset(captured, 0, sizeof captured);
    captured[2] = captured[7] = captured[48] = 1;
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 2, 48, replay), 1);
    static const uint8_t from_two[][2] = {{1, 0},  {2, 2},   {3, 7}, {7, 7},
                                          {8, 48}, {48, 48}, {49, 0}};
    check_replay(replay, from_two, sizeof from_two / sizeof from_two[0]);
    /* Without the largest, the sizes above the largest captured have none. */
    captured[48] = 0;
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 2, 48, replay), 0);
    static const uint8_t no_largest[][2] = {{7, 7}, {8, 0}};
    check_replay(replay, no_largest, sizeof no_largest / sizeof no_largest[0]);
    /* Bounds out of range: nothing. */
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 0, 48, replay), 0);
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 9, 8, replay), 0);
    ck_assert_int_eq(gf__torch_replay_sizes(captured, 1, GF_TORCH_BATCH_MAX + 1, replay), 0);
    ck_assert_uint_eq(replay[7], 0);
}
END_TEST

static Suite *torch_suite(void) {
    Suite *s = suite_create("plugin_torch");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_torch_table);
    tcase_add_test(tc, test_torch_frames);
    tcase_add_loop_test(tc, test_torch_refusals, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, test_torch_absolute_path);
    suite_add_tcase(s, tc);
    TCase *calls = tcase_create("calls");
    tcase_add_loop_test(calls, test_torch_batch_range, 0,
                        (int)(sizeof range_cases / sizeof range_cases[0]));
    tcase_add_test(calls, test_torch_batch_range_stops);
    tcase_add_test(calls, test_torch_calls);
    tcase_add_test(calls, test_torch_calls_outputs);
    tcase_add_test(calls, test_torch_warm_sizes);
    tcase_add_test(calls, test_torch_replay_sizes);
    suite_add_tcase(s, calls);
    return s;
}

int main(void) {
    return gf_test_run(torch_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of plugin "torch"'s host part, gf_torch.so (plugins/torch/
 * torch.c), loaded as gpuframed loads it: its table, the "inputs" and
 * "outputs" parameters' syntax and every error create() names, frame
 * lengths and the frames' description.  No PyTorch and no GPU: the package
 * itself is PyTorch's to judge, at device_open (python/tests/
 * test_torch_gpu.py, on a GPU).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    const gf_plugin_value values[4] = {
        {.string = package}, {.string = inputs}, {.string = outputs}, {.number = max_batch}};
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
    ck_assert_uint_eq(p->param_count, 4);
    static const char *const keys[] = {"package", "inputs", "outputs", "max_batch"};
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

static Suite *torch_suite(void) {
    Suite *s = suite_create("plugin_torch");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_torch_table);
    tcase_add_test(tc, test_torch_frames);
    tcase_add_loop_test(tc, test_torch_refusals, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, test_torch_absolute_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(torch_suite());
}

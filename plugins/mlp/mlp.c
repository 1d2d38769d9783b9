/* SPDX-License-Identifier: MIT */
/*
 * The plugin "mlp": its gf_plugin table, parameters, length rules, and the
 * host state's life.  The reference is in mlp_ref.c, the GPU side in mlp.cu,
 * the weights file's reader in mlp_file.c.
 *
 * Tolerance (MLP_ABS_TOLERANCE, MLP_REL_TOLERANCE: 1e-5 absolute plus 1e-5
 * relative).  The reference sums each dot product in double, in index
 * order, so it is the float32 network's exact value to within one rounding
 * per layer.  cuBLAS sums in float32 in an order of its own (tiles, FMA,
 * maybe split-K); the error of a float sum of n products is at most about
 * n * 2^-24 * sum |w_i x_i| (sequential order, the worst common one) and
 * typically sqrt(n) times less, and it flows on through the later layers.
 * For networks scaled as make_weights scales them (weights ~ 1/sqrt(fan-in),
 * inputs of order 1, so activations of order 1) that is far below 1e-5: the
 * demo network 3072-256-64-10 on inputs in [-4, 4] (what `gpuframe` makes
 * up), summed sequentially in float, is within 9e-7 of the reference, under
 * a tenth of the tolerance.  TF32 (10-bit mantissas) would be 4e-4 off, 30
 * times the tolerance, as would a wrong weight, bias, layout or ReLU, by far.
 * tests/test_plugin_builtin.c checks both on every build.  Networks with
 * large activations or much cancellation need more, and the ABI has one
 * tolerance per plugin, not per network.  Softmax outputs are in [0, 1]
 * and their error below their logits'.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <gpuframe/plugin.h>

#include "mlp.h"

/* The stated tolerance of the GPU against the reference; see above. */
#define MLP_ABS_TOLERANCE 1e-5f
#define MLP_REL_TOLERANCE 1e-5f
/* The longest weights path, as configured and as resolved. */
#define MLP_PATH_BYTES PATH_MAX

/* Indices into mlp_params, the order create() receives values in. */
enum { PARAM_WEIGHTS, PARAM_SOFTMAX };

static const gf_plugin_param mlp_params[] = {
    [PARAM_WEIGHTS] = {.key = "weights",
                       .type = GF_PLUGIN_STRING,
                       .required = 1,
                       .min = 1,
                       .max = MLP_PATH_BYTES - 1,
                       .doc = "weights file (plugins/mlp/README.md); relative to the "
                              "configuration file's directory"},
    [PARAM_SOFTMAX] = {.key = "softmax",
                       .type = GF_PLUGIN_INTEGER,
                       .default_number = 0,
                       .min = 0,
                       .max = 1,
                       .doc = "1: probabilities (softmax of each vector's logits); 0: logits"},
};

/* Bytes of one input vector and of one output vector. */
static uint64_t in_vector_bytes(const gf__mlp_net *net) {
    return sizeof(float) * (uint64_t)net->shape.dims[0];
}
static uint64_t out_vector_bytes(const gf__mlp_net *net) {
    return sizeof(float) * (uint64_t)net->shape.dims[net->shape.layer_count];
}

static void *mlp_create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                        size_t why_len) {
    const char *weights = values[PARAM_WEIGHTS].string;
    char path[MLP_PATH_BYTES];
    int n;

    if (weights[0] == '/') {
        n = snprintf(path, sizeof path, "%s", weights);
    } else if (env->config_dir != NULL && env->config_dir[0] != '\0') {
        n = snprintf(path, sizeof path, "%s/%s", env->config_dir, weights);
    } else {
        snprintf(why, why_len,
                 "weights: %s: a relative path, and no configuration directory to resolve it in",
                 weights);
        return NULL;
    }
    if (n < 0 || (size_t)n >= sizeof path) {
        snprintf(why, why_len, "weights: %s: the resolved path is longer than %d bytes", weights,
                 MLP_PATH_BYTES - 1);
        return NULL;
    }
    gf__mlp_net *net = calloc(1, sizeof *net);
    if (net == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    if (gf__mlp_load(path, net, why, why_len) != 0) {
        free(net);
        return NULL;
    }
    net->softmax = values[PARAM_SOFTMAX].number != 0;
    net->max_input_bytes = env->max_input_bytes;
    return net;
}

static void mlp_destroy(void *state) {
    gf__mlp_net *net = state;

    if (net != NULL)
        free(net->params);
    free(net);
}

static int64_t mlp_output_bytes(const void *state, uint64_t in_bytes, char *why, size_t why_len) {
    const gf__mlp_net *net = state;
    const uint64_t in_vec = in_vector_bytes(net), out_vec = out_vector_bytes(net);

    if (in_bytes == 0 || in_bytes % in_vec != 0) {
        snprintf(why, why_len,
                 "length %llu is not a positive multiple of %llu (vectors of %u float32)",
                 (unsigned long long)in_bytes, (unsigned long long)in_vec, net->shape.dims[0]);
        return -1;
    }
    const uint64_t count = in_bytes / in_vec;
    if (count > (uint64_t)INT64_MAX / out_vec) {
        snprintf(why, why_len, "length %llu: %llu vectors of %llu bytes out is too long",
                 (unsigned long long)in_bytes, (unsigned long long)count,
                 (unsigned long long)out_vec);
        return -1;
    }
    return (int64_t)(count * out_vec);
}

static uint64_t mlp_max_output_bytes(const void *state, uint64_t max_in_bytes) {
    const gf__mlp_net *net = state;
    const uint64_t count = max_in_bytes / in_vector_bytes(net), out_vec = out_vector_bytes(net);

    return count > UINT64_MAX / out_vec ? UINT64_MAX : count * out_vec;
}

/* A frame is vectors of the network's input width, each giving one of its
 * output width: float32 [-1, in] to float32 [-1, out]. */
static int mlp_describe(const void *state, gf_frame_desc *in, gf_frame_desc *out, char *why,
                        size_t why_len) {
    const gf__mlp_net *net = state;
    (void)why, (void)why_len;
    in->count = out->count = 1;
    in->tensors[0] = (gf_tensor_desc){
        .dtype = GF_DTYPE_FLOAT32, .rank = 2, .dims = {GF_DIM_VARIABLE, net->shape.dims[0]}};
    out->tensors[0] =
        (gf_tensor_desc){.dtype = GF_DTYPE_FLOAT32,
                         .rank = 2,
                         .dims = {GF_DIM_VARIABLE, net->shape.dims[net->shape.layer_count]}};
    return 0;
}

static const gf_plugin mlp_plugin = {
    .abi_version = GF_PLUGIN_ABI_VERSION,
    .name = "mlp",
    .doc = "a dense ReLU network (1 to 8 layers) applied to each float32 vector of the frame",
    .params = mlp_params,
    .param_count = sizeof mlp_params / sizeof mlp_params[0],
    .input_f32 = 1,
    .exact = 0,
    .abs_tolerance = MLP_ABS_TOLERANCE,
    .rel_tolerance = MLP_REL_TOLERANCE,
    .create = mlp_create,
    .destroy = mlp_destroy,
    .output_bytes = mlp_output_bytes,
    .max_output_bytes = mlp_max_output_bytes,
    .reference = gf__mlp_reference,
    .describe = mlp_describe,
#ifdef GF_HAVE_CUDA
    .device_open = gf__mlp_device_open,
    .device_close = gf__mlp_device_close,
    .launch = gf__mlp_launch,
    /* One SGEMM per layer over the vectors of every frame of a submission
     * (mlp.cu): the point of a batch. */
    .launch_batch = gf__mlp_launch_batch,
    .max_batch_frames = MLP_BATCH_FRAMES_MAX,
#endif
};

GF_PLUGIN_EXPORT const gf_plugin *gf_plugin_entry(void) {
    return &mlp_plugin;
}

/* SPDX-License-Identifier: MIT */
/*
 * The plugin "mlp": a small dense classifier (README.md beside this file).
 * What its files share: the weights file's format and limits, the network
 * in host memory, and the functions each file defines.
 *
 *   mlp_file.c    the weights file: header parser and loader
 *   mlp_ref.c     the C reference, the definition of what the kind computes
 *   mlp.c         the gf_plugin table: parameters, lengths, create/destroy
 *   mlp_cuda_load.c  device_open, launch, device_close: load gf_mlp_cuda.so
 *                 beside gf_mlp.so and forward to it
 *   mlp.cu        gf_mlp_cuda.so, the CUDA side: device state, launches
 *                 (cuBLAS); its interface is mlp_cuda.h
 *   make_weights.c  writes weights files (the demo network, test networks)
 *
 * gf_mlp.so is mlp.c, mlp_file.c, mlp_ref.c and (with CUDA) mlp_cuda_load.c,
 * and needs no library of the CUDA toolkit; gf_mlp_cuda.so is mlp.cu.
 */
#ifndef GF_PLUGIN_MLP_H
#define GF_PLUGIN_MLP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file's first 8 bytes. */
#define GF_MLP_MAGIC       "GFMLP1\0\0"
#define GF_MLP_MAGIC_BYTES 8
/* Dense layers in a network: at least one, at most this. */
#define GF_MLP_MAX_LAYERS 8
/* Any width, input and output included: keeps every product of two widths,
 * and a layer's weight count, far inside 64 bits and cuBLAS's int. */
#define GF_MLP_MAX_DIM 65536
/* A hidden layer's width: the reference keeps two hidden vectors on the
 * stack of whatever thread calls it (2 x 16 KiB), since it may allocate
 * nothing and may run on several threads at once. */
#define GF_MLP_MAX_HIDDEN 4096
/* Weights and biases together, in bytes: the host keeps them in memory and
 * every GPU a copy. */
#define GF_MLP_MAX_PARAM_BYTES (1ull << 30)
/* The longest header: magic, layer count, GF_MLP_MAX_LAYERS + 1 widths. */
#define GF_MLP_MAX_HEADER_BYTES (GF_MLP_MAGIC_BYTES + 4 + 4 * (GF_MLP_MAX_LAYERS + 1))

/* A network's shape, as the header gives it. */
typedef struct gf__mlp_shape {
    uint32_t layer_count;                 /* 1..GF_MLP_MAX_LAYERS                 */
    uint32_t dims[GF_MLP_MAX_LAYERS + 1]; /* dims[0] in, dims[layer_count] out    */
    uint64_t header_bytes;                /* where layer 0's weights begin        */
    uint64_t param_count;                 /* floats after the header: all W and b */
} gf__mlp_shape;

/* The host state create() builds: the network and the parameter values. */
typedef struct gf__mlp_net {
    gf__mlp_shape shape;
    /* Every layer's W[out][in] then b[out], in file order, host-endian. */
    float *params;
    /* Where layer l's W begins in params; its b follows W's out*in floats. */
    uint64_t layer_offset[GF_MLP_MAX_LAYERS];
    /* The widest hidden layer, 0 when there is none (one layer). */
    uint32_t max_hidden;
    /* Nonzero: outputs are softmax probabilities per vector, not logits. */
    int softmax;
    /* The daemon's longest frame (gf_plugin_env.max_input_bytes): sizes the
     * GPU's scratch. */
    uint64_t max_input_bytes;
} gf__mlp_net;

/*
 * Parses a weights file's header from its first `len` bytes (all of the
 * file, or at least GF_MLP_MAX_HEADER_BYTES of it).  Pure: no I/O, no
 * allocation.  Returns the header's length in bytes and fills *shape; 0 when
 * `len` ends inside the header; or -EINVAL with one line in why[why_len]
 * (bad magic, a count or width out of bounds, parameters above
 * GF_MLP_MAX_PARAM_BYTES), which the caller prefixes with the key and path.
 */
int64_t gf__mlp_parse_header(const unsigned char *bytes, size_t len, gf__mlp_shape *shape,
                             char *why, size_t why_len);

/*
 * Reads the weights file at `path` into *net (shape, params, offsets,
 * max_hidden; softmax and max_input_bytes are left to the caller).  Returns
 * 0, or a negative errno with one line in why[why_len] that names the key
 * ("weights: "), the path and what is wrong.  On success net->params is the
 * caller's, freed with free().
 */
int gf__mlp_load(const char *path, gf__mlp_net *net, char *why, size_t why_len);

/* The plugin's reference(); `state` is a gf__mlp_net (mlp_ref.c). */
void gf__mlp_reference(const void *state, const void *in, uint64_t in_bytes, void *out);

/* Frames one launch_batch call takes (gf_plugin.max_batch_frames): a
 * slot's most (GF_SLOT_FRAMES_MAX, 64) and then some; each is at least one
 * row of every SGEMM, and the hidden buffers hold chunk_rows (mlp.cu). */
#define MLP_BATCH_FRAMES_MAX 1024u

/* The plugin's device_open, device_close, launch and launch_batch
 * (mlp_cuda_load.c).
 * device_open loads gf_mlp_cuda.so at its first call, or fails with one
 * line naming the file and why it could not be loaded; the others forward
 * to it too. */
void *gf__mlp_device_open(const void *state, int device, uint32_t streams, char *why,
                          size_t why_len);
void gf__mlp_device_close(void *dev);
int gf__mlp_launch(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                   void *out_dev, void *stream);
struct gf_plugin_frame; /* <gpuframe/plugin.h> */
int gf__mlp_launch_batch(void *dev, uint32_t stream_index, const struct gf_plugin_frame *frames,
                         uint32_t count, void *stream);

#ifdef __cplusplus
}
#endif

#endif

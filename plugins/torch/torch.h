/* SPDX-License-Identifier: MIT */
/*
 * The plugin "torch": a PyTorch model, exported by torch.export and compiled
 * by AOTInductor into a package (.pt2: torch._inductor.aoti_compile_and_package,
 * or gpuframe-export), as a pipeline stage (README.md beside this file).
 * What its two objects share:
 *
 *   torch.c        gf_torch.so, the plugin gpuframed loads: parameters,
 *                  lengths, the frames' description; no PyTorch, no CUDA
 *                  toolkit library.  Its device_open loads the companion.
 *   torch_aoti.cpp gf_torch_aoti.so, the companion: the package loaded by
 *                  PyTorch's AOTIModelPackageLoader, and the launches.  C++
 *                  inside, this header's C functions outside, every
 *                  exception caught there.
 *
 * Both are built from this one tree and installed together; the companion
 * reads gf__torch_model as gf_torch.so made it, so GF_TORCH_AOTI_VERSION
 * changes with any change here.
 */
#ifndef GF_PLUGIN_TORCH_H
#define GF_PLUGIN_TORCH_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <gpuframe/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever this header changes in any way: an old companion beside a
 * new gf_torch.so must be refused, not read a struct of another layout. */
#define GF_TORCH_AOTI_VERSION 2u
/* The companion's file name, beside gf_torch.so, and its one symbol. */
#define GF_TORCH_AOTI_SO           "gf_torch_aoti.so"
#define GF_TORCH_AOTI_ENTRY_SYMBOL "gf__torch_aoti_entry"

/* The most frames one call of the model takes: a submission's most
 * (gpuframed's max_batch_frames is at most 64); larger batches are never
 * formed, so a package's larger dynamic batch is never used. */
#define GF_TORCH_BATCH_MAX 64

/* The host state create() builds from the parameters. */
typedef struct gf__torch_model {
    char package[PATH_MAX]; /* the .pt2, absolute                            */
    gf_frame_desc in, out;  /* one frame's tensors (no batch dimension)      */
    uint64_t in_bytes;      /* a frame's length: its tensors end to end      */
    uint64_t out_bytes;     /* a result's                                    */
    /* Where each tensor starts in a frame, and its length. */
    uint64_t in_offset[GF_FRAME_TENSORS_MAX], in_tensor_bytes[GF_FRAME_TENSORS_MAX];
    uint64_t out_offset[GF_FRAME_TENSORS_MAX], out_tensor_bytes[GF_FRAME_TENSORS_MAX];
    /* The "max_batch" parameter: the most frames a call takes, 0 to find
     * it at device_open (the package's dynamic batch dimension). */
    uint32_t max_batch;
    /* The "cuda_graphs" parameter: 1 to capture each lane's calls as CUDA
     * graphs at device_open and replay them (README.md, "CUDA graphs"). */
    uint32_t cuda_graphs;
    /* The parameters' tensors as text, without spaces: "float32[3,224,224]"
     * (messages; compared with gpuframe-export's metadata). */
    char in_text[256], out_text[256];
} gf__torch_model;

/* The companion's functions: the plugin's device_open, device_close,
 * launch and launch_batch, with gpuframed's contracts (<gpuframe/plugin.h>);
 * `state` is a gf__torch_model. */
typedef struct gf__torch_aoti_api {
    uint32_t version; /* GF_TORCH_AOTI_VERSION: always the first member */
    void *(*device_open)(const void *state, int device, uint32_t streams, char *why,
                         size_t why_len);
    void (*device_close)(void *dev);
    int (*launch)(void *dev, uint32_t stream_index, const void *in_dev, uint64_t in_bytes,
                  void *out_dev, void *stream);
    int (*launch_batch)(void *dev, uint32_t stream_index, const gf_plugin_frame *frames,
                        uint32_t count, void *stream);
} gf__torch_aoti_api;

/* Defined by gf_torch_aoti.so (torch_aoti.cpp), its one exported symbol. */
__attribute__((visibility("default"))) const gf__torch_aoti_api *gf__torch_aoti_entry(void);

/*
 * Parses tensors as the "inputs" and "outputs" parameters write them, and
 * as `gpuframe list` shows them: "float32[3,224,224]", several joined by
 * ';' ("float16[2,3];int64[]"), dimensions >= 1, spaces allowed between
 * tokens.  Returns 0 and fills *d, or -1 with the problem in why[why_len].
 * Pure (torch.c).
 */
int gf__torch_parse_tensors(const char *text, gf_frame_desc *d, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A plugin's companion: the shared object beside it that holds its device
 * side, loaded by the plugin's first device_open, so that the plugin itself
 * needs no library of the CUDA toolkit (or of PyTorch): the CPU engine,
 * `--check-config` and `gpuframe stream --verify` load it on a host without
 * them and never map their gigabytes.  gf_mlp.so loads gf_mlp_cuda.so
 * (mlp/mlp_cuda_load.c), gf_torch.so loads gf_torch_aoti.so
 * (torch/torch.c).  Private to the repository's plugins: gpuframed's ABI
 * (<gpuframe/plugin.h>) knows nothing of it.
 *
 * A companion exports one function that returns a pointer to a static
 * table whose first member is a uint32_t version, raised whenever the
 * interface between the two objects changes; a companion of another
 * version is refused and nothing else of it is read.
 */
#ifndef GF_PLUGIN_COMPANION_H
#define GF_PLUGIN_COMPANION_H

#include <stddef.h>
#include <stdint.h>

/* What to load and how to name it in messages. */
typedef struct gf__companion {
    const void *anchor;       /* any address inside the plugin: dladdr finds its file */
    const char *plugin_so;    /* the plugin's file name: "gf_mlp.so"                  */
    const char *file;         /* the companion's, beside it: "gf_mlp_cuda.so"         */
    const char *entry_symbol; /* the one symbol it exports                            */
    const char *what;         /* what it is, for a wrong file: "gf_mlp.so's CUDA side" */
    uint32_t version;         /* the version its table must start with                */
} gf__companion;

/*
 * Loads the companion from the directory the plugin lies in (symbolic links
 * resolved: the two objects are installed side by side), calls its entry
 * point and checks the version.  Returns its table, which stays mapped for
 * the life of the process (RTLD_NODELETE), or NULL with one line in
 * why[why_len] that names the file ("cannot load PATH: <dlerror>", "PATH: no
 * symbol S (not WHAT?)", "PATH: version 3, where this PLUGIN needs 2 (install
 * both from one build)").  Not thread-safe: callers hold their own lock.
 */
const void *gf__companion_open(const gf__companion *c, char *why, size_t why_len);

#endif

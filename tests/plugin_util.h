/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the plugin suites (test_plugin_builtin*.c): load a plugin as
 * gpuframed does, make and read weights files, scratch directories.  Every
 * helper but make_weights fails the running Check test on an error, so
 * callers check nothing.
 */
#ifndef GF_TEST_PLUGIN_UTIL_H
#define GF_TEST_PLUGIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gpuframe_plugin.h"

/* Room for any reason a plugin writes. */
#define PLUGIN_WHY_BYTES 512

/* dlopens `path` (RTLD_NOW | RTLD_LOCAL), as gpuframed does, and returns
 * what its gf_plugin_entry returns; *handle_out (if not NULL) gets the
 * handle.  The library stays loaded for the life of the process. */
const gf_plugin *plugin_load(const char *path, void **handle_out);

/* A new empty directory under $TMPDIR (or /tmp) in dir[dir_len]. */
void scratch_dir_make(char *dir, size_t dir_len);
/* Removes `dir` and everything in it. */
void scratch_dir_remove(const char *dir);
/* `dir`/`name` into path[path_len]. */
void path_join(char *path, size_t path_len, const char *dir, const char *name);

/* Writes `len` bytes to `path`, replacing it. */
void file_write(const char *path, const void *bytes, size_t len);
/* The whole file at `path`, malloc'd (the caller frees it), its length in *len. */
unsigned char *file_read(const char *path, size_t *len);

/* Runs gf_mlp_make_weights OUTPUT SEED DIM... (dims[0..dim_count-1]) and
 * returns its exit status (0 on success), or -1 after printing why it could
 * not run it.  Asserts nothing: main() may call it, outside any test. */
int make_weights(const char *output, uint64_t seed, const uint32_t *dims, size_t dim_count);

/*
 * A weights file read independently of the plugin: the widths and, for
 * layer l, W[o][i] at w[l][o * dims[l] + i] and b[o] at b[l][o].
 * weights_parse fails the test unless `bytes` is a well-formed file.
 */
#define WEIGHTS_MAX_LAYERS 8
typedef struct weights {
    uint32_t layer_count;
    uint32_t dims[WEIGHTS_MAX_LAYERS + 1];
    float *w[WEIGHTS_MAX_LAYERS], *b[WEIGHTS_MAX_LAYERS]; /* into `storage` */
    float *storage;
} weights_file;
void weights_parse(const unsigned char *bytes, size_t len, weights_file *out);
void weights_free(weights_file *wt);
/* Serialises `wt` (dims and values) as a weights file; returns malloc'd
 * bytes, their count in *len. */
unsigned char *weights_serialise(const weights_file *wt, size_t *len);

/* splitmix64: the same seed gives the same numbers on every run. */
uint64_t test_random(uint64_t *state);
/* `count` floats uniform in [-limit, limit), from 24 random bits each. */
void fill_uniform(float *v, size_t count, float limit, uint64_t seed);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the plugin suites; contracts in plugin_util.h.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "plugin_util.h"

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

/* Magic and header layout of plugins/mlp/README.md, written out again here
 * so that the tests do not share the plugin's reader. */
static const unsigned char WEIGHTS_MAGIC[8] = {'G', 'F', 'M', 'L', 'P', '1', 0, 0};

const gf_plugin *plugin_load(const char *path, void **handle_out) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(handle != NULL, "dlopen %s: %s", path, dlerror());
    void *sym = dlsym(handle, GF_PLUGIN_ENTRY_SYMBOL);
    ck_assert_msg(sym != NULL, "%s: no %s: %s", path, GF_PLUGIN_ENTRY_SYMBOL, dlerror());
    /* POSIX's way from dlsym's object pointer to a function pointer. */
    const gf_plugin *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const gf_plugin *p = entry();
    ck_assert_ptr_nonnull(p);
    if (handle_out != NULL)
        *handle_out = handle;
    return p;
}

void scratch_dir_make(char *dir, size_t dir_len) {
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, dir_len, "%s/gf_plugin_test.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    ck_assert(n > 0 && (size_t)n < dir_len);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

void scratch_dir_remove(const char *dir) {
    ck_assert_msg(nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "removing %s: %s", dir,
                  strerror(errno));
}

void path_join(char *path, size_t path_len, const char *dir, const char *name) {
    int n = snprintf(path, path_len, "%s/%s", dir, name);
    ck_assert(n > 0 && (size_t)n < path_len);
}

void file_write(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert(fwrite(bytes, 1, len, f) == len);
    ck_assert(fclose(f) == 0);
}

unsigned char *file_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert(fseek(f, 0, SEEK_END) == 0);
    long size = ftell(f);
    ck_assert(size >= 0);
    ck_assert(fseek(f, 0, SEEK_SET) == 0);
    unsigned char *bytes = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(bytes);
    ck_assert(fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return bytes;
}

int make_weights(const char *output, uint64_t seed, const uint32_t *dims, size_t dim_count) {
    char args[1 + WEIGHTS_MAX_LAYERS + 2][24];
    char *argv[3 + WEIGHTS_MAX_LAYERS + 2 + 1];
    size_t argc = 0;
    pid_t pid;
    int status;

    if (dim_count > WEIGHTS_MAX_LAYERS + 2) {
        fprintf(stderr, "make_weights: %zu widths\n", dim_count);
        return -1;
    }
    argv[argc++] = (char *)GF_MLP_MAKE_WEIGHTS;
    argv[argc++] = (char *)output;
    snprintf(args[0], sizeof args[0], "%llu", (unsigned long long)seed);
    argv[argc++] = args[0];
    for (size_t i = 0; i < dim_count; i++) {
        snprintf(args[i + 1], sizeof args[i + 1], "%u", dims[i]);
        argv[argc++] = args[i + 1];
    }
    argv[argc] = NULL;
    int err = posix_spawn(&pid, GF_MLP_MAKE_WEIGHTS, NULL, NULL, argv, environ);
    if (err != 0) {
        fprintf(stderr, "spawning %s: %s\n", GF_MLP_MAKE_WEIGHTS, strerror(err));
        return -1;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("waitpid");
            return -1;
        }
    }
    if (!WIFEXITED(status)) {
        fprintf(stderr, "%s died\n", GF_MLP_MAKE_WEIGHTS);
        return -1;
    }
    return WEXITSTATUS(status);
}

static uint32_t get_u32_le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32_le(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Floats of W and b for the layers of `wt`. */
static size_t param_count(const weights_file *wt) {
    size_t n = 0;
    for (uint32_t l = 0; l < wt->layer_count; l++)
        n += (size_t)wt->dims[l + 1] * wt->dims[l] + wt->dims[l + 1];
    return n;
}

/* Points w[] and b[] into storage. */
static void weights_point(weights_file *wt) {
    size_t at = 0;
    for (uint32_t l = 0; l < wt->layer_count; l++) {
        wt->w[l] = wt->storage + at;
        at += (size_t)wt->dims[l + 1] * wt->dims[l];
        wt->b[l] = wt->storage + at;
        at += wt->dims[l + 1];
    }
}

void weights_parse(const unsigned char *bytes, size_t len, weights_file *out) {
    weights_file wt = {0};

    ck_assert(len >= 12);
    ck_assert_mem_eq(bytes, WEIGHTS_MAGIC, sizeof WEIGHTS_MAGIC);
    wt.layer_count = get_u32_le(bytes + 8);
    ck_assert(wt.layer_count >= 1 && wt.layer_count <= WEIGHTS_MAX_LAYERS);
    const size_t header = 12 + 4 * ((size_t)wt.layer_count + 1);
    ck_assert(len >= header);
    for (uint32_t i = 0; i <= wt.layer_count; i++)
        wt.dims[i] = get_u32_le(bytes + 12 + 4 * i);
    const size_t count = param_count(&wt);
    ck_assert_uint_eq(len, header + 4 * count);
    wt.storage = malloc(count * sizeof(float));
    ck_assert_ptr_nonnull(wt.storage);
    for (size_t i = 0; i < count; i++) {
        const uint32_t bits = get_u32_le(bytes + header + 4 * i);
        memcpy(&wt.storage[i], &bits, sizeof bits);
    }
    weights_point(&wt);
    *out = wt;
}

void weights_free(weights_file *wt) {
    free(wt->storage);
    wt->storage = NULL;
}

unsigned char *weights_serialise(const weights_file *wt, size_t *len) {
    const size_t header = 12 + 4 * ((size_t)wt->layer_count + 1);
    size_t at = header;
    unsigned char *bytes = malloc(header + 4 * param_count(wt));

    ck_assert_ptr_nonnull(bytes);
    memcpy(bytes, WEIGHTS_MAGIC, sizeof WEIGHTS_MAGIC);
    put_u32_le(bytes + 8, wt->layer_count);
    for (uint32_t i = 0; i <= wt->layer_count; i++)
        put_u32_le(bytes + 12 + 4 * i, wt->dims[i]);
    for (uint32_t l = 0; l < wt->layer_count; l++) {
        const size_t nw = (size_t)wt->dims[l + 1] * wt->dims[l];
        for (size_t i = 0; i < nw + wt->dims[l + 1]; i++, at += 4) {
            const float v = i < nw ? wt->w[l][i] : wt->b[l][i - nw];
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            put_u32_le(bytes + at, bits);
        }
    }
    *len = at;
    return bytes;
}

uint64_t test_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fill_uniform(float *v, size_t count, float limit, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i < count; i++) {
        const double u = (double)(test_random(&state) >> 40) / (double)(1u << 24); /* [0, 1) */
        v[i] = (float)((2.0 * u - 1.0) * limit);
    }
}

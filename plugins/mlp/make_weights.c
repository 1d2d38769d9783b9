/* SPDX-License-Identifier: MIT */
/*
 * gf_mlp_make_weights: writes a weights file for plugin "mlp" (format in
 * README.md) with deterministic pseudo-random values.
 *
 *     gf_mlp_make_weights OUTPUT SEED DIM0 DIM1 [DIM2 ... DIM8]
 *
 * DIM0 is the input width, the last DIM the output width, one layer between
 * each two.  Every weight and bias of a layer with fan-in `in` is uniform in
 * [-1/sqrt(in), 1/sqrt(in)) (the bound of PyTorch's nn.Linear default
 * initialisation), from splitmix64 seeded with SEED: the same arguments give
 * the same bytes on every machine.  The build makes the demo network with it
 * (plugins/CMakeLists.txt), tests make small ones.  Writes OUTPUT.tmp and
 * renames it, so OUTPUT is whole or absent.  Exit status 0, or 1 with a
 * message on stderr; 2 for bad arguments.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

/* splitmix64 (Steele, Lea, Flood 2014): small, fast, and fully specified. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-bound, bound): 24 random bits, each value an exact float in
 * [-1, 1) before the one multiplication. */
static float uniform(uint64_t *state, float bound) {
    const int32_t bits = (int32_t)(next_random(state) >> 40) - (1 << 23);
    const float u = (float)bits / (float)(1 << 23);
    return u * bound;
}

static int put_u32_le(FILE *f, uint32_t v) {
    const unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                                (unsigned char)(v >> 24)};
    return fwrite(b, 1, sizeof b, f) == sizeof b ? 0 : -1;
}

static int put_f32_le(FILE *f, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_u32_le(f, bits);
}

static int usage(const char *why) {
    fprintf(stderr,
            "gf_mlp_make_weights: %s\n"
            "usage: gf_mlp_make_weights OUTPUT SEED DIM0 DIM1 [DIM2 ... DIM%d]\n",
            why, GF_MLP_MAX_LAYERS);
    return 2;
}

/* Parses a decimal number in [min, max] into *out; -1 if it is not one. */
static int parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (text[0] < '0' || text[0] > '9')
        return -1;
    const unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    unsigned char header[GF_MLP_MAX_HEADER_BYTES];
    char tmp_path[4096], why[160];
    uint64_t seed, dim;

    if (argc < 5 || argc > 3 + GF_MLP_MAX_LAYERS + 1)
        return usage("wrong number of arguments");
    if (parse_u64(argv[2], 0, UINT64_MAX, &seed) != 0)
        return usage("SEED is not a decimal number");
    const uint32_t layer_count = (uint32_t)(argc - 4);
    memcpy(header, GF_MLP_MAGIC, GF_MLP_MAGIC_BYTES);
    for (uint32_t i = 0; i < 4; i++)
        header[GF_MLP_MAGIC_BYTES + i] = (unsigned char)(layer_count >> (8 * i));
    uint32_t dims[GF_MLP_MAX_LAYERS + 1];
    for (uint32_t l = 0; l <= layer_count; l++) {
        if (parse_u64(argv[3 + l], 1, GF_MLP_MAX_DIM, &dim) != 0)
            return usage("a DIM is not a number within 1..65536");
        dims[l] = (uint32_t)dim;
        for (uint32_t i = 0; i < 4; i++)
            header[GF_MLP_MAGIC_BYTES + 4 + 4 * l + i] = (unsigned char)(dims[l] >> (8 * i));
    }
    /* The plugin's own checks: what this writes, create() accepts. */
    gf__mlp_shape shape;
    const int64_t header_bytes =
        gf__mlp_parse_header(header, sizeof header, &shape, why, sizeof why);
    if (header_bytes <= 0)
        return usage(why);

    if (snprintf(tmp_path, sizeof tmp_path, "%s.tmp", argv[1]) >= (int)sizeof tmp_path)
        return usage("OUTPUT is too long");
    FILE *f = fopen(tmp_path, "wb");
    if (f == NULL) {
        fprintf(stderr, "gf_mlp_make_weights: %s: %s\n", tmp_path, strerror(errno));
        return 1;
    }
    int bad = fwrite(header, 1, (size_t)header_bytes, f) != (size_t)header_bytes;
    uint64_t state = seed;
    for (uint32_t l = 0; l < layer_count && !bad; l++) {
        const float bound = (float)(1.0 / sqrt((double)dims[l]));
        const uint64_t count = (uint64_t)dims[l + 1] * dims[l] + dims[l + 1]; /* W, then b */
        for (uint64_t i = 0; i < count && !bad; i++)
            bad = put_f32_le(f, uniform(&state, bound)) != 0;
    }
    if (fclose(f) != 0)
        bad = 1;
    if (bad || rename(tmp_path, argv[1]) != 0) {
        fprintf(stderr, "gf_mlp_make_weights: %s: %s\n", bad ? tmp_path : argv[1], strerror(errno));
        remove(tmp_path);
        return 1;
    }
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The weights file of plugin "mlp" (format in README.md): a pure parser of
 * its header, and the loader that checks the file's length against the
 * header before it reads a byte of the weights.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mlp.h"

/* Room for a parser's reason, and for "3072x256x64x10" at the widest. */
#define DETAIL_BYTES 160
#define WIDTHS_BYTES (GF_MLP_MAX_LAYERS + 1) * 8

static uint32_t get_u32_le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int64_t gf__mlp_parse_header(const unsigned char *bytes, size_t len, gf__mlp_shape *shape,
                             char *why, size_t why_len) {
    const size_t count_at = GF_MLP_MAGIC_BYTES, dims_at = count_at + 4;

    if (len < GF_MLP_MAGIC_BYTES)
        return 0;
    if (memcmp(bytes, GF_MLP_MAGIC, GF_MLP_MAGIC_BYTES) != 0) {
        snprintf(why, why_len, "bad magic: not a GFMLP1 weights file");
        return -EINVAL;
    }
    if (len < dims_at)
        return 0;
    const uint32_t layer_count = get_u32_le(bytes + count_at);
    if (layer_count < 1 || layer_count > GF_MLP_MAX_LAYERS) {
        snprintf(why, why_len, "layer count %u is not within 1..%u", layer_count,
                 GF_MLP_MAX_LAYERS);
        return -EINVAL;
    }
    const size_t header_bytes = dims_at + 4 * ((size_t)layer_count + 1);
    if (len < header_bytes)
        return 0;

    gf__mlp_shape s = {.layer_count = layer_count, .header_bytes = header_bytes};
    for (uint32_t i = 0; i <= layer_count; i++) {
        const uint32_t dim = get_u32_le(bytes + dims_at + 4 * (size_t)i);
        if (dim < 1 || dim > GF_MLP_MAX_DIM) {
            snprintf(why, why_len, "width dims[%u] = %u is not within 1..%u", i, dim,
                     GF_MLP_MAX_DIM);
            return -EINVAL;
        }
        if (i > 0 && i < layer_count && dim > GF_MLP_MAX_HIDDEN) {
            snprintf(why, why_len, "hidden width dims[%u] = %u is above %u", i, dim,
                     GF_MLP_MAX_HIDDEN);
            return -EINVAL;
        }
        s.dims[i] = dim;
    }
    /* At most 8 layers of 65536 x 65536 + 65536 floats: no overflow. */
    for (uint32_t l = 0; l < layer_count; l++)
        s.param_count += (uint64_t)s.dims[l + 1] * s.dims[l] + s.dims[l + 1];
    if (s.param_count * sizeof(float) > GF_MLP_MAX_PARAM_BYTES) {
        snprintf(why, why_len, "%llu bytes of weights and biases are above the limit of %llu",
                 (unsigned long long)(s.param_count * sizeof(float)),
                 (unsigned long long)GF_MLP_MAX_PARAM_BYTES);
        return -EINVAL;
    }
    *shape = s;
    return (int64_t)header_bytes;
}

/* Reads `len` bytes at `offset`; 0, -EIO for a short read, or -errno. */
static int read_at(int fd, void *buf, size_t len, off_t offset) {
    unsigned char *p = buf;

    while (len > 0) {
        ssize_t got = pread(fd, p, len, offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            return -EIO; /* the file shrank since fstat */
        p += got;
        len -= (size_t)got;
        offset += got;
    }
    return 0;
}

/* "3072x256x64x10" into buf[len]. */
static void format_widths(const gf__mlp_shape *s, char *buf, size_t len) {
    size_t at = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i <= s->layer_count && at < len; i++) {
        int n = snprintf(buf + at, len - at, i == 0 ? "%u" : "x%u", s->dims[i]);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

/* Host floats from the file's little-endian ones, in place; then the first
 * value that is not finite, reported as -EINVAL with why[]. */
static int decode_params(const char *path, gf__mlp_net *net, char *why, size_t why_len) {
    const gf__mlp_shape *s = &net->shape;
    unsigned char *bytes = (unsigned char *)net->params;

    for (uint64_t i = 0; i < s->param_count; i++) {
        const uint32_t bits = get_u32_le(bytes + 4 * i);
        memcpy(&net->params[i], &bits, sizeof bits);
    }
    for (uint32_t l = 0; l < s->layer_count; l++) {
        const uint32_t in = s->dims[l], out = s->dims[l + 1];
        const float *w = net->params + net->layer_offset[l], *b = w + (uint64_t)out * in;
        for (uint64_t i = 0; i < (uint64_t)out * in; i++) {
            if (!isfinite(w[i])) {
                snprintf(why, why_len, "weights: %s: layer %u W[%llu][%llu] is not finite", path, l,
                         (unsigned long long)(i / in), (unsigned long long)(i % in));
                return -EINVAL;
            }
        }
        for (uint32_t o = 0; o < out; o++) {
            if (!isfinite(b[o])) {
                snprintf(why, why_len, "weights: %s: layer %u b[%u] is not finite", path, l, o);
                return -EINVAL;
            }
        }
    }
    return 0;
}

int gf__mlp_load(const char *path, gf__mlp_net *net, char *why, size_t why_len) {
    unsigned char head[GF_MLP_MAX_HEADER_BYTES];
    char detail[DETAIL_BYTES], widths[WIDTHS_BYTES];
    gf__mlp_shape shape;
    gf__mlp_net n = {0};
    struct stat st;
    int err;

    /* O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
     * waiting for a writer; reads of a regular file ignore it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        err = -errno;
        snprintf(why, why_len, "weights: %s: %s", path, strerror(-err));
        return err;
    }
    if (fstat(fd, &st) != 0) {
        err = -errno;
        snprintf(why, why_len, "weights: %s: %s", path, strerror(-err));
        goto fail_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        err = -EINVAL;
        snprintf(why, why_len, "weights: %s: not a regular file", path);
        goto fail_fd;
    }
    const uint64_t file_bytes = (uint64_t)st.st_size;
    if (file_bytes == 0) {
        err = -EINVAL;
        snprintf(why, why_len, "weights: %s: empty file", path);
        goto fail_fd;
    }
    const size_t head_bytes = file_bytes < sizeof head ? (size_t)file_bytes : sizeof head;
    err = read_at(fd, head, head_bytes, 0);
    if (err < 0) {
        snprintf(why, why_len, "weights: %s: %s", path, strerror(-err));
        goto fail_fd;
    }

    const int64_t header_bytes =
        gf__mlp_parse_header(head, head_bytes, &shape, detail, sizeof detail);
    if (header_bytes <= 0) {
        err = -EINVAL;
        if (header_bytes == 0)
            snprintf(why, why_len, "weights: %s: truncated header: the file has %llu bytes", path,
                     (unsigned long long)file_bytes);
        else
            snprintf(why, why_len, "weights: %s: %s", path, detail);
        goto fail_fd;
    }
    format_widths(&shape, widths, sizeof widths);
    const uint64_t need_bytes = (uint64_t)header_bytes + shape.param_count * sizeof(float);
    if (file_bytes != need_bytes) {
        err = -EINVAL;
        if (file_bytes < need_bytes)
            snprintf(why, why_len, "weights: %s: truncated: %llu bytes where widths %s need %llu",
                     path, (unsigned long long)file_bytes, widths, (unsigned long long)need_bytes);
        else
            snprintf(why, why_len,
                     "weights: %s: trailing bytes: %llu bytes where widths %s need %llu", path,
                     (unsigned long long)file_bytes, widths, (unsigned long long)need_bytes);
        goto fail_fd;
    }

    n.shape = shape;
    n.params = malloc(shape.param_count * sizeof(float));
    if (n.params == NULL) {
        err = -ENOMEM;
        snprintf(why, why_len, "weights: %s: no memory for %llu bytes of weights", path,
                 (unsigned long long)(shape.param_count * sizeof(float)));
        goto fail_fd;
    }
    err = read_at(fd, n.params, shape.param_count * sizeof(float), (off_t)header_bytes);
    if (err < 0) {
        snprintf(why, why_len, "weights: %s: %s", path, strerror(-err));
        goto fail_params;
    }
    uint64_t offset = 0;
    for (uint32_t l = 0; l < shape.layer_count; l++) {
        n.layer_offset[l] = offset;
        offset += (uint64_t)shape.dims[l + 1] * shape.dims[l] + shape.dims[l + 1];
        if (l + 1 < shape.layer_count && shape.dims[l + 1] > n.max_hidden)
            n.max_hidden = shape.dims[l + 1];
    }
    assert(offset == shape.param_count);
    err = decode_params(path, &n, why, why_len);
    if (err < 0)
        goto fail_params;
    close(fd);
    *net = n;
    return 0;

fail_params:
    free(n.params);
fail_fd:
    close(fd);
    return err;
}

/* SPDX-License-Identifier: MIT */
/*
 * The frames `gpuframe stream` sends: synthetic ones (a small seeded pool) or
 * --input's chunks, in libgpuframe's shared-memory frame buffers or not,
 * their C references for --verify, and queueing the next one on the
 * connection.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_stream_frames.h"
#include "util.h"

/* With no --count: frames to send (with --input: the whole file). */
#define STREAM_COUNT_DEFAULT 1000
/* Synthetic float32 inputs lie in [-SYNTH_FLOAT_LIMIT, SYNTH_FLOAT_LIMIT]. */
#define SYNTH_FLOAT_LIMIT 4.0
/* Frame buffers are aligned like the daemon's pinned buffers. */
#define FRAME_ALIGN_BYTES 64

unsigned char *gf_alloc_frame(size_t bytes) {
    size_t rounded = (bytes + FRAME_ALIGN_BYTES - 1) / FRAME_ALIGN_BYTES * FRAME_ALIGN_BYTES;
    if (rounded == 0)
        rounded = FRAME_ALIGN_BYTES;
    unsigned char *p = rounded >= bytes ? aligned_alloc(FRAME_ALIGN_BYTES, rounded) : NULL;
    if (p == NULL) {
        fprintf(stderr, "gpuframe: out of memory allocating %zu bytes\n", bytes);
        exit(EXIT_FAIL);
    }
    return p;
}

/* xorshift64*: a fast, seeded, reproducible generator for synthetic frames. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* splitmix64 of the seed: a nonzero, well-mixed xorshift state per frame. */
static uint64_t rng_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z != 0 ? z : 1;
}

/* Fills a synthetic frame: float32 in [-4, 4] or random bytes. */
static void fill_synthetic(int input_f32, uint64_t seed, unsigned char *buf, size_t bytes) {
    uint64_t state = rng_seed(seed);
    size_t i = 0;

    if (input_f32) {
        for (; i + sizeof(float) <= bytes; i += sizeof(float)) {
            /* 24 random bits: every value is exact in float32. */
            double u = (double)(rng_next(&state) >> 40) / (double)(1u << 24);
            float f = (float)(-SYNTH_FLOAT_LIMIT + 2.0 * SYNTH_FLOAT_LIMIT * u);
            memcpy(buf + i, &f, sizeof f);
        }
    }
    for (; i < bytes; i++)
        buf[i] = (unsigned char)(rng_next(&state) >> 56);
}

void gf_stream_fit_reply_cap(gf_stream_run *r) {
    if (r->full_expect > 0 && (uint64_t)r->full_expect > GF_CLIENT_DEFAULT_MAX_REPLY_BYTES)
        (void)gf_client_set_max_reply_bytes(r->client, (uint64_t)r->full_expect);
}

void gf_stream_reference(gf_stream_run *r, const void *in, size_t n, void *out) {
    uint64_t lengths[GF_STAGES_MAX];
    char why[WHY_BYTES];
    if (gf_pipeline_stage_lengths(r->pipeline, n, lengths, why, sizeof why) >= 0)
        gf_pipeline_reference(r->pipeline, in, n, lengths, out, r->stage_scratch, NULL);
}

/* Opens --input, checks its length against --size and sets `planned`. */
static void open_input(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    struct stat st;
    char why[WHY_BYTES];

    r->in = IS_STDIO(o->input_path) ? stdin : fopen(o->input_path, "rb");
    if (r->in == NULL) {
        fprintf(stderr, "gpuframe: --input %s: %s\n", o->input_path, strerror(errno));
        exit(EXIT_USAGE);
    }
    if (o->size_bytes == 0) {
        fprintf(stderr, "gpuframe: --input needs a --size above 0\n");
        exit(EXIT_USAGE);
    }
    r->planned = o->count != 0 ? o->count : UINT64_MAX;
    if (fstat(fileno(r->in), &st) < 0 || !S_ISREG(st.st_mode))
        return; /* a pipe: the last chunk is checked when it arrives */

    uint64_t file_bytes = (uint64_t)st.st_size;
    uint64_t full = file_bytes / o->size_bytes;
    uint64_t tail = file_bytes % o->size_bytes;
    if (file_bytes == 0) {
        fprintf(stderr, "gpuframe: --input %s is empty\n", o->input_path);
        exit(EXIT_USAGE);
    }
    uint64_t frames = full + (tail > 0);
    if (tail > 0 && frames <= r->planned && !o->no_check &&
        gf_pipeline_output_bytes(r->pipeline, tail, why, sizeof why) < 0) {
        fprintf(stderr,
                "gpuframe: --input %s: its last chunk of %" PRIu64
                " bytes cannot be a frame of pipeline '%s': %s\n",
                o->input_path, tail, r->pipeline->name, why);
        exit(EXIT_USAGE);
    }
    if (frames < r->planned)
        r->planned = frames;
}

/* Makes the synthetic pool and, with --verify, its references. */
static void make_pool(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    const gf_pipeline *p = r->pipeline;
    size_t bytes = (size_t)o->size_bytes;

    r->pool_count = r->planned < SYNTH_POOL_MAX ? (size_t)r->planned : SYNTH_POOL_MAX;
    for (size_t k = 0; k < r->pool_count; k++) {
        r->pool[k] = gf_alloc_frame(bytes);
        fill_synthetic(gf_pipeline_input_f32(p), o->seed * SYNTH_POOL_MAX + k, r->pool[k], bytes);
        if (o->verify && r->full_expect >= 0) {
            r->pool_refs[k] = gf_alloc_frame((size_t)r->full_expect);
            gf_stream_reference(r, r->pool[k], bytes, r->pool_refs[k]);
        }
    }
}

/* Points `s` at synthetic frame r->queued: a buffer of the pool, or in
 * shared memory the frame buffer `entry`, which holds the same bytes. */
static void next_synthetic(gf_stream_run *r, gf_frame_slot *s, unsigned char *entry) {
    const gf_stream_opts *o = r->o;
    size_t k;

    if (entry != NULL || r->device.dev_ptr != 0) {
        /* The frame buffers (or the device region's inputs) were filled
         * once (gf_stream_prepare): no copy. */
        k = (size_t)(r->queued % o->window % r->pool_count);
        s->data = entry != NULL ? entry : r->pool[k];
    } else {
        k = (size_t)(r->queued % r->pool_count);
        s->data = r->pool[k];
    }
    s->bytes = (size_t)o->size_bytes;
    s->expect_bytes = r->full_expect;
    s->ref = r->pool_refs[k];
}

/* Reads frame r->queued from --input into its window entry's buffer (in
 * shared memory, the frame buffer `entry`) and points `s` at it.  Returns 1, 0 at the
 * end of the input, or -1 on a failure already reported. */
static int next_chunk(gf_stream_run *r, gf_frame_slot *s, unsigned char *entry) {
    const gf_stream_opts *o = r->o;
    unsigned char **buf = &r->in_bufs[r->queued % o->window];
    char why[WHY_BYTES];

    if (entry != NULL)
        *buf = entry; /* read straight into shared memory */
    else if (*buf == NULL)
        *buf = gf_alloc_frame((size_t)o->size_bytes);
    size_t n = fread(*buf, 1, (size_t)o->size_bytes, r->in);
    if (n < o->size_bytes && ferror(r->in)) {
        fprintf(stderr, "gpuframe: --input %s: %s\n", o->input_path, strerror(errno));
        return -1;
    }
    if (n == 0)
        return 0;
    s->data = *buf;
    s->bytes = n;
    s->ref = NULL;
    s->expect_bytes = n == o->size_bytes
                          ? r->full_expect
                          : gf_pipeline_output_bytes(r->pipeline, n, why, sizeof why);
    if (s->expect_bytes < 0 && !o->no_check) {
        fprintf(stderr,
                "gpuframe: --input %s: its last chunk of %zu bytes cannot be a frame of "
                "pipeline '%s': %s\n",
                o->input_path, n, r->pipeline->name, why);
        return -1;
    }
    if (n < o->size_bytes)
        r->input_done = 1; /* a short chunk is the last */
    return 1;
}

/* Sends the frame in `s` as frame r->queued: its bytes, or in shared memory
 * a descriptor of its window entry's frame buffer.  Returns 0, or -1 (reported unless the
 * daemon closed the connection, which the next receive reports). */
static int send_frame(gf_stream_run *r, const gf_frame_slot *s) {
    const gf_stream_opts *o = r->o;
    int err;

    if (r->device.dev_ptr != 0) {
        uint64_t at = (r->queued % o->window) * r->device_entry_bytes;
        gf_shm_frame d = {.region_id = r->device.id,
                          .in_offset = at,
                          .in_bytes = s->bytes,
                          .out_offset = at + r->device_in_bytes,
                          .out_capacity = r->device_entry_bytes - r->device_in_bytes};
        err = gf_client_send_frame_device(r->client, r->pipeline->id, r->queued, &d);
    } else if (r->shm != NULL) {
        err = gf_client_send_shm(r->client, r->shm, (uint32_t)(r->queued % o->window),
                                 r->pipeline->id, r->queued, s->bytes);
    } else {
        err = gf_client_send_frame(r->client, r->pipeline->id, r->queued, s->data, s->bytes);
    }
    if (err < 0) {
        if (err != -EPIPE) /* a close: the next receive reports it */
            gf_print_client_error(r->client, "send", err);
        return -1;
    }
    return 0;
}

int gf_stream_queue_next(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    gf_frame_slot *s = &r->slots[r->queued % o->window];

    /* In shared memory: this window entry's frame buffer. */
    unsigned char *entry = gf_client_shm_frame_buffer(r->shm, (uint32_t)(r->queued % o->window));
    if (r->in == NULL) {
        next_synthetic(r, s, entry);
    } else {
        int got = next_chunk(r, s, entry);
        if (got <= 0)
            return got;
    }
    s->queued_ns = gf_now_ns();
    if (send_frame(r, s) < 0)
        return -1;
    r->queued++;
    return 1;
}

/* Whether --size is above the daemon's max_frame_bytes (with --no-check:
 * gpuframe_stream.c refuses it otherwise). */
static int over_the_limit(const gf_stream_run *r) {
    return r->max_frame_bytes != 0 && r->o->size_bytes > r->max_frame_bytes;
}

/* Whether frames go by reference: with --shm always; by default from
 * STREAM_SHM_MIN_BYTES up when this client knows how long a result is (the
 * frame buffers' outputs are laid out for it: not for a plugin pipeline
 * without --verify, nor a size the pipeline refuses), else never. */
static int wants_shm(const gf_stream_run *r) {
    const gf_stream_opts *o = r->o;

    if (o->shm != STREAM_SHM_AUTO)
        return o->shm == STREAM_SHM_ON;
    return o->size_bytes >= STREAM_SHM_MIN_BYTES && r->full_expect >= 0 && !r->lengths_unknown &&
           !over_the_limit(r);
}

/* Says, unless --quiet or --json, why frames large enough for shared
 * memory go through the socket by default: this client cannot lay out
 * where their results go. */
static void say_why_socket(const gf_stream_run *r) {
    const gf_stream_opts *o = r->o;

    if (o->shm != STREAM_SHM_AUTO || o->size_bytes < STREAM_SHM_MIN_BYTES || o->quiet || o->json)
        return;
    if (r->lengths_unknown)
        fprintf(stderr,
                "gpuframe stream: frames go through the socket: pipeline '%s' has a plugin stage, "
                "whose results' length LIST does not fix, so this client knows it only with "
                "--verify or --shm (which load "
                "the plugin here)\n",
                r->pipeline->name);
    else if (over_the_limit(r))
        fprintf(stderr,
                "gpuframe stream: frames go through the socket: frames of %" PRIu64 " bytes are "
                "above the daemon's max_frame_bytes %" PRIu64 "\n",
                o->size_bytes, r->max_frame_bytes);
    else if (r->full_expect < 0)
        fprintf(stderr,
                "gpuframe stream: frames go through the socket: pipeline '%s' refuses frames of "
                "%" PRIu64 " bytes, so no place for their results can be laid out\n",
                r->pipeline->name, o->size_bytes);
}

/* Opens a fresh connection in place of r->client, with the same reply cap. */
static void reconnect(gf_stream_run *r) {
    gf_client_close(r->client);
    r->client = gf_connect_or_die(&r->o->common);
    gf_stream_fit_reply_cap(r);
}

/*
 * Frames by reference: one frame buffer per window entry, the synthetic
 * pool written into them once (frames then cost the client no copy).  With
 * --shm a failure is the run's; by default the frames go through the socket
 * instead, on a fresh connection (a daemon without regions closes this one),
 * and the run says why unless --quiet.
 */
static int prepare_shm(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    char why[GF_CONNECT_WHY_BYTES];
    uint64_t out_bytes = r->full_expect > 0 ? (uint64_t)r->full_expect : 0;

    int err = gf_client_shm_open(r->client, o->window, (size_t)o->size_bytes, (size_t)out_bytes,
                                 &r->shm, o->common.timeout_ms);
    if (err < 0) {
        if (o->shm == STREAM_SHM_ON) {
            gf_print_client_error(r->client, "--shm", err);
            return EXIT_FAIL;
        }
        snprintf(why, sizeof why, "%s",
                 err == -EREMOTEIO || err == -EPROTO || err == -ECONNRESET
                     ? gf_client_error(r->client)
                     : strerror(-err));
        if (!o->quiet)
            fprintf(stderr, "gpuframe stream: frames go through the socket: no shared memory: %s\n",
                    why);
        r->shm = NULL;
        reconnect(r);
        return EXIT_OK;
    }
    const gf_client_region *region = gf_client_shm_region(r->shm);
    if (!o->quiet && !o->json)
        fprintf(r->report, "shared-memory region %" PRIu32 " of %" PRIu64 " bytes%s\n", region->id,
                region->bytes, region->pinned ? ", pinned by the daemon" : "");
    if (r->in == NULL)
        for (uint32_t i = 0; i < o->window; i++)
            memcpy(gf_client_shm_frame_buffer(r->shm, i), r->pool[i % r->pool_count],
                   (size_t)o->size_bytes);
    return EXIT_OK;
}

/* A multiple of GF_DEVICE_FRAME_ALIGN_BYTES, at least `v`. */
static uint64_t device_align(uint64_t v) {
    return (v + GF_DEVICE_FRAME_ALIGN_BYTES - 1) / GF_DEVICE_FRAME_ALIGN_BYTES *
           GF_DEVICE_FRAME_ALIGN_BYTES;
}

/*
 * --device-frames: one device region on o->device with an input and an
 * output per window entry, the synthetic pool copied into the inputs once
 * (frames then cost no copy at all).  A failure is the run's.
 */
static int prepare_device(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    if (r->full_expect < 0 && !o->no_check) {
        fprintf(stderr,
                "gpuframe stream: --device-frames: pipeline '%s' refuses frames of %" PRIu64
                " bytes, so no place for their results can be laid out\n",
                r->pipeline->name, o->size_bytes);
        return EXIT_USAGE;
    }
    uint64_t out_bytes = r->full_expect > 0 ? (uint64_t)r->full_expect : o->size_bytes;
    r->device_in_bytes = device_align(o->size_bytes ? o->size_bytes : 1);
    r->device_entry_bytes = r->device_in_bytes + device_align(out_bytes ? out_bytes : 1);
    int err = gf_client_device_region_create(
        r->client, o->device, r->device_entry_bytes * o->window, &r->device, o->common.timeout_ms);
    if (err < 0) {
        /* The driver's failures here are said in the client's error too. */
        if ((err == -ENOSYS || err == -ENODEV || err == -ENOMEM || err == -EIO) &&
            gf_client_error(r->client)[0] != '\0')
            fprintf(stderr, "gpuframe: --device-frames: %s\n", gf_client_error(r->client));
        else
            gf_print_client_error(r->client, "--device-frames", err);
        return EXIT_FAIL;
    }
    if (o->verify || r->out != NULL) {
        r->device_host = gf_alloc_frame((size_t)out_bytes);
        if (r->device_host == NULL) {
            fprintf(stderr, "gpuframe: out of memory\n");
            return EXIT_FAIL;
        }
    }
    if (!o->quiet && !o->json)
        fprintf(r->report, "device region %" PRIu32 " of %" PRIu64 " bytes on GPU %d\n",
                r->device.id, r->device.bytes, o->device);
    for (uint32_t i = 0; i < o->window; i++) {
        err = gf_client_device_copy_to(&r->device, i * r->device_entry_bytes,
                                       r->pool[i % r->pool_count], (size_t)o->size_bytes);
        if (err < 0) {
            fprintf(stderr, "gpuframe stream: --device-frames: copying the frames to GPU %d: %s\n",
                    o->device, strerror(-err));
            return EXIT_FAIL;
        }
    }
    return EXIT_OK;
}

int gf_stream_prepare(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;

    if (o->input_path != NULL) {
        open_input(r);
        r->in_bufs = calloc(o->window, sizeof *r->in_bufs);
        if (r->in_bufs == NULL) {
            fprintf(stderr, "gpuframe: out of memory\n");
            return EXIT_FAIL;
        }
    } else {
        r->planned = o->count != 0 ? o->count : STREAM_COUNT_DEFAULT;
        make_pool(r);
    }
    if (o->output_path != NULL) {
        r->out = IS_STDIO(o->output_path) ? stdout : fopen(o->output_path, "wb");
        if (r->out == NULL) {
            fprintf(stderr, "gpuframe: --output %s: %s\n", o->output_path, strerror(errno));
            return EXIT_USAGE;
        }
    }
    r->slots = calloc(o->window, sizeof *r->slots);
    if (r->slots == NULL) {
        fprintf(stderr, "gpuframe: out of memory\n");
        return EXIT_FAIL;
    }
    if (o->device_frames)
        return prepare_device(r);
    if (wants_shm(r))
        return prepare_shm(r);
    say_why_socket(r);
    return EXIT_OK;
}

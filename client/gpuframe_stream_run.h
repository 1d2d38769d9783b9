/* SPDX-License-Identifier: MIT */
/*
 * The state of one `gpuframe stream` run, which its three files share.  Only
 * client/gpuframe_stream*.c include this header.
 *
 *   gpuframe_stream.c          the subcommand: options, the pipeline and
 *                              frame size, the plugins it loads, the loop
 *                              that keeps a window of frames in flight,
 *                              freeing the run
 *   gpuframe_stream_frames.c   the frames sent: synthetic ones or --input
 *                              chunks, in shared memory or not, their C
 *                              references, sending the next one
 *   gpuframe_stream_replies.c  each reply: checked against its frame,
 *                              counted, written to --output; the summary
 *                              line and the exit status
 *
 * Calls go gpuframe_stream.c -> the other two, and
 * gpuframe_stream_replies.c -> gpuframe_stream_frames.c (buffers and
 * references).  Everything runs on one thread.
 */
#ifndef GF_GPUFRAME_STREAM_RUN_H
#define GF_GPUFRAME_STREAM_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuframe_options.h"
#include "libgpuframe.h"
#include "pipeline.h"

/* Distinct synthetic frames: enough that a pipeline returning a stale buffer
 * is caught by --verify, few enough that references are cheap. */
#define SYNTH_POOL_MAX 4

/* Frames from this size up go through shared memory unless --no-shm, where
 * docs/design.md ("Frames in shared memory") says always to use it: 5.4 times the
 * socket's bytes/s at 64 KiB on an H200.  Smaller frames gain less, and a
 * run's region costs locked memory and its pinning whatever the size. */
#define STREAM_SHM_MIN_BYTES (64u * 1024u)

/* How frames travel: by reference in shared memory, or their bytes on the
 * socket. */
enum stream_shm {
    STREAM_SHM_AUTO, /* shared memory from STREAM_SHM_MIN_BYTES up, where it can */
    STREAM_SHM_ON,   /* --shm: shared memory for every size, or fail           */
    STREAM_SHM_OFF,  /* --no-shm: the socket                                    */
};

/* What `gpuframe stream` was asked for. */
typedef struct gf_stream_opts {
    gf_common_opts common;
    const char *pipeline; /* --pipeline: a name or an id            */
    uint64_t size_bytes;  /* --size; 0 with have_size == 0: default */
    int have_size;
    uint64_t count;          /* --count; 0: default depends on --input */
    uint32_t window;         /* --window                               */
    int verify;              /* --verify                               */
    int no_check;            /* --no-check                             */
    int quiet;               /* --quiet                                */
    int json;                /* --json                                 */
    const char *input_path;  /* --input, or NULL: synthetic frames     */
    const char *output_path; /* --output, or NULL                      */
    uint64_t seed;           /* --seed                                 */
    int have_seed;           /* --seed was given                       */
    enum stream_shm shm;     /* --shm, --no-shm or neither             */
    uint32_t deadline_ms;    /* --deadline-ms; 0: none                 */
    int latest_only;         /* --latest-only                          */
    int device_frames;       /* --device-frames                        */
    int device;              /* its CUDA device                        */
    double rate;             /* --rate, frames a second; 0: the window's pace */
    double start_at;         /* --start-at, seconds since the Epoch; 0: at once */
    unsigned priority;       /* --priority: GF_CLASS_*; 0: the configured one */
} gf_stream_opts;

/* One frame in flight: what was sent and what its reply must be. */
typedef struct gf_frame_slot {
    const unsigned char *data; /* the input, alive until the reply      */
    size_t bytes;              /* its length                            */
    int64_t expect_bytes;      /* result length, or -1 (--no-check)     */
    const unsigned char *ref;  /* precomputed reference, or NULL        */
    uint64_t queued_ns;        /* when it was queued                    */
} gf_frame_slot;

/* The whole state of one `gpuframe stream` run. */
typedef struct gf_stream_run {
    const gf_stream_opts *o;
    gf_pipeline *pipelines; /* the daemon's LIST, decoded     */
    size_t pipeline_count;
    const gf_pipeline *pipeline; /* --pipeline, one of `pipelines` */
    void *stage_scratch[2];      /* a chain's intermediate results */
    int lengths_unknown;         /* plugins not loaded: the daemon's rule */
    uint64_t max_frame_bytes;    /* the daemon's, from LIST; 0: not said  */
    gf_client *client;
    gf_frame_slot *slots; /* window entries, frame i in slots[i % window] */

    /* Synthetic frames: frame i sends pool[i % pool_count]. */
    unsigned char *pool[SYNTH_POOL_MAX];
    unsigned char *pool_refs[SYNTH_POOL_MAX]; /* with --verify and a valid size */
    size_t pool_count;

    /* --input: the file and one buffer per window entry (allocated lazily). */
    FILE *in; /* stdin for "-" */
    unsigned char **in_bufs;
    int input_done;      /* no more frames to queue                */
    int input_error;     /* the input could not be sent completely */
    uint64_t planned;    /* frames to send; UINT64_MAX: until EOF  */
    int64_t full_expect; /* output bytes of a frame of --size      */

    /* Frames by reference: one frame buffer per window entry (frame i in
     * entry i % window); NULL when frames go through the socket. */
    gf_client_shm *shm;

    /* --device-frames: one device region, window entry i's input at
     * i * device_entry_bytes and its output device_in_bytes after it; the
     * results copied to device_host only to verify or write them. */
    gf_client_device_region device; /* dev_ptr 0: none          */
    uint64_t device_entry_bytes, device_in_bytes;
    unsigned char *device_host;

    FILE *out;              /* --output (stdout for "-"), or NULL   */
    FILE *report;           /* the banner and summary: stdout, or
                               stderr when the results go there    */
    unsigned char *scratch; /* references of --input frames         */
    size_t scratch_bytes;

    uint64_t *latency_ns; /* one per reply, sorted at the end */
    size_t latency_count, latency_cap;

    uint64_t queued;     /* frames queued                               */
    uint64_t answered;   /* frames whose reply arrived                  */
    uint64_t failed;     /* answered frames without a correct result    */
    uint64_t mismatches; /* of those, wrong results (printed: the first) */
    uint64_t in_bytes;   /* input bytes of the frames answered by RESULT */
    uint64_t out_bytes;  /* result bytes received                        */
    /* Frames the daemon dropped as --deadline-ms and --latest-only asked:
     * answered deadline_exceeded or superseded, not failures. */
    uint64_t late, superseded;
    /* The window's run: when it began (monotonic, and in seconds since the
     * Epoch for --start-at's summary), the progress line on a terminal
     * (shown at all, and when next), and whether Ctrl-C cut it short. */
    uint64_t start_ns;
    double started_s;
    int progress, progress_shown;
    uint64_t progress_next_ns;
    int interrupted;

    /* Of the failed, the ERROR replies by status (the last: statuses this
     * client does not know), for the summary of a run where all failed. */
    uint64_t errors_by_status[GF_STATUS_COUNT_ + 1];
} gf_stream_run;

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The frames of a `gpuframe stream` run (gpuframe_stream_frames.c): their
 * buffers and C references, preparing them, sending the next one.
 */
#ifndef GF_GPUFRAME_STREAM_FRAMES_H
#define GF_GPUFRAME_STREAM_FRAMES_H

#include <stddef.h>

#include "gpuframe_stream_run.h"

/* Allocates `bytes` (0 allowed) aligned like the daemon's pinned buffers;
 * exits on failure, since the command cannot run without its frames. */
unsigned char *gf_alloc_frame(size_t bytes);

/* Raises r->client's reply cap to fit a result of r->full_expect bytes
 * where that is above libgpuframe's default; called for each connection the
 * run opens. */
void gf_stream_fit_reply_cap(gf_stream_run *r);

/* The run's pipeline's C reference of `n` bytes at `in` into `out`, whose
 * length the pipeline accepted. */
void gf_stream_reference(gf_stream_run *r, const void *in, size_t n, void *out);

/* Prepares the frames (--input, or the synthetic pool), opens --output and
 * allocates the window.  Returns EXIT_OK, or the command's exit status after
 * saying what failed; the caller frees what was prepared either way. */
int gf_stream_prepare(gf_stream_run *r);

/*
 * Queues frame number r->queued, reading it from --input if there is one.
 * Returns 1 when a frame was queued, 0 when the input has ended, -1 on a
 * failure already reported (the run stops queueing).
 */
int gf_stream_queue_next(gf_stream_run *r);

#endif

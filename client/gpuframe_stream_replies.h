/* SPDX-License-Identifier: MIT */
/*
 * The replies of a `gpuframe stream` run (gpuframe_stream_replies.c): each
 * one handled as it arrives, and the run's summary at the end.
 */
#ifndef GF_GPUFRAME_STREAM_REPLIES_H
#define GF_GPUFRAME_STREAM_REPLIES_H

#include <stdint.h>

#include "gpuframe_stream_run.h"
#include "libgpuframe.h"

/* Handles the reply to frame number r->answered. */
void gf_stream_handle_reply(gf_stream_run *r, const gf_reply *raw);

/* Closes --output and prints the summary of a run that took `elapsed_ns`
 * (to r->report; --json's object or the line).  Returns the command's exit
 * status: EXIT_INTERRUPTED after Ctrl-C, else 0 only when every frame got a
 * correct result and nothing failed. */
int gf_stream_finish(gf_stream_run *r, uint64_t elapsed_ns, int connection_failed);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * How gpuframe's subcommands reach the daemon: connecting, asking for its
 * LIST and STATS documents, and saying what went wrong.  The *_or_die calls
 * print the reason and exit with EXIT_FAIL (gpuframe_commands.h) instead of
 * returning an error.
 */
#ifndef GF_GPUFRAME_CONNECT_H
#define GF_GPUFRAME_CONNECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuframe_options.h"
#include "libgpuframe.h"
#include "pipeline.h"

/* Prints an ERROR reply to `f` as "STATUS: TEXT" and a newline, after
 * whatever prefix the caller printed: the status by name, or by number when
 * this client does not know it (a newer daemon's); control characters of the
 * text as '?'. */
void gf_print_error_reply(FILE *f, const gf_reply *rep);

/* Reports a failed libgpuframe call `what` that returned `err` on stderr:
 * the client's own message when it has one (`c` may be NULL). */
void gf_print_client_error(const gf_client *c, const char *what, int err);

/* Room for gf_client_connect_error's explanation: a path of up to 107
 * bytes twice, names and advice. */
#define GF_CONNECT_WHY_BYTES 768

/* Connects to the daemon at o->socket_path, or exits saying why and what to
 * do (gf_client_connect_error). */
gf_client *gf_connect_or_die(const gf_common_opts *o);

/* Sends LIST or STATS (`type`) and returns the malloc'd JSON reply, which
 * the caller frees; on failure closes `c` and exits. */
char *gf_request_json_or_die(gf_client *c, uint8_t type, const gf_common_opts *o);

/* Fetches and decodes the daemon's pipelines into a new array of *count,
 * freed with gf_pipelines_free(), and (when not NULL) into
 * *max_frame_bytes the largest frame it takes, 0 when its LIST does not
 * say (an older daemon); on failure closes `c` and exits. */
gf_pipeline *gf_fetch_pipelines(gf_client *c, const gf_common_opts *o, size_t *count,
                                uint64_t *max_frame_bytes);

#endif

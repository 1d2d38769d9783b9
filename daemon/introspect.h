/* SPDX-License-Identifier: MIT */
/*
 * What the server says about itself: the accounting of each answered frame
 * (counters, phases, the trace ring), the LIST, STATS and TRACE reply
 * documents (daemon/STATS.md describes every field).  It reads
 * the server's state and changes only its statistics and trace; it calls
 * nothing that serves connections.  Loop thread only.
 */
#ifndef GF_INTROSPECT_H
#define GF_INTROSPECT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "server_state.h"

/* A RESULT was written to connection `conn_id`: count it, add its phases,
 * keep it for TRACE.  O(1), no allocation. */
void gf_frame_answered(gf_server *srv, uint64_t conn_id, const gf_frame *f);

/* The LIST, STATS and TRACE (the last `max_frames` frames) reply
 * documents; NULL without memory.  The caller owns the document. */
cJSON *gf_list_document(const gf_server *srv);
cJSON *gf_stats_document(gf_server *srv);
cJSON *gf_trace_document(const gf_server *srv, uint32_t max_frames);

#endif

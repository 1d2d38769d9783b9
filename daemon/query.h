/* SPDX-License-Identifier: MIT */
/*
 * The requests that need no slot: LIST, STATS and TRACE (answered at once
 * with a document: introspect.c), and the region messages, REGION_ADD (the
 * memfd is checked and mapped, and pinned on the thread pool while its reply
 * waits in order in the queue) and REGION_REMOVE (answered once the region
 * is released).  protocol/PROTOCOL.md is the contract.  Loop thread only.
 */
#ifndef GF_QUERY_H
#define GF_QUERY_H

#include "conn.h"
#include "request.h"

/* Answers the request `req` at the front of the connection's buffer (not a
 * FRAME) and consumes it; `fd` is the memfd that came with it, or -1 (taken
 * in any case).  Returns 1, or 0 when a document must wait
 * (gf_conn_may_build): the request stays, and nothing was taken. */
int gf_query_answer(gf_conn *c, const gf_request *req, int fd);

#endif

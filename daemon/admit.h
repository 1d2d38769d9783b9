/* SPDX-License-Identifier: MIT */
/*
 * A FRAME's admission: its header is checked against the pipeline and the
 * slots (lengths, a shm frame's descriptor and region), refused with an
 * ERROR, or given a place in a slot (the connection's open batch, or one
 * from the scheduler), its reply queued, and as much of its payload as is
 * buffered taken; the rest is read in place (conn_io.c).
 *
 * Where the payload goes decides when a slot is needed: a payload that fits
 * the connection's buffer (GF_STAGED_PAYLOAD_MAX_BYTES) is taken in whole
 * before any slot is asked for, so a client that stalls mid-payload holds
 * none; a larger one is read straight into its own slot's pinned buffer, a
 * shm frame's is its 40-byte descriptor.  Loop thread only.
 */
#ifndef GF_ADMIT_H
#define GF_ADMIT_H

#include "conn.h"
#include "request.h"

/*
 * The FRAME header `req` was decoded at the front of the connection's
 * buffer.  Returns 1 when it was consumed (refused, or admitted), 0 when the
 * connection must wait: for the rest of a small payload, or for a slot.
 */
int gf_admit_frame(gf_conn *c, const gf_request *req);

/* `n` more payload bytes of the frame being received in place arrived in
 * its slot; the frame joins its batch when they are all in. */
void gf_admit_payload(gf_conn *c, size_t n);

#endif

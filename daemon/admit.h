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

/* `n` more payload bytes of the frame being received arrived, in its slot
 * (the frame joins its batch when they are all in) or parked. */
void gf_admit_payload(gf_conn *c, size_t n);

/*
 * Parked payloads (conn.h): a payload larger than the buffer stages, which
 * would wait for its slot while another client's payload is received into
 * one (or others wait), is read into memory of its own instead, within
 * max_input_bytes_total; so is one that still arrives GF_RECEIVE_HOLD_MS
 * after it took its slot while another client waits for one
 * (gf_admit_park_arriving), whose slot then goes back.  A slow sender thus holds no slot that
 * others' payloads need, and still finishes.  So is a payload of at most GF_BATCH_JOIN_BYTES
 * whose pipeline batches while that pipeline has a batch open or on the engine: many clients'
 * images share a model's calls.  Whole, the frame is checked again and joins its pipeline's
 * batch as a staged frame does (gf_sched_join), its payload copied in.
 *
 * gf_admit_parked places the parked frame once its payload is whole:
 * returns 1 when it was placed (or refused: a reload took its pipeline),
 * 0 while its payload arrives or it waits for a slot.
 */
int gf_admit_parked(gf_conn *c);

/* The payload arriving in c->frame's slot moves to memory and the slot goes
 * back.  Returns 0, or -1 when max_input_bytes_total or memory is short
 * (nothing changed). */
int gf_admit_park_arriving(gf_conn *c);

/*
 * Held frames: a newest-only FRAME (GF_FLAG_LATEST) whose payload is staged
 * (or a descriptor) and that must wait for a slot, or for the connection's
 * LATEST frame on the engine (frame_policy.h), is taken out of the
 * connection's buffer into memory of the connection's own (one frame's,
 * GF_STAGED_PAYLOAD_MAX_BYTES), counted received, so that the connection
 * reads on while it waits: a live source's newer frame must be seen to
 * replace it.  While it waits:
 * - its successor (a newest-only FRAME of the same pipeline, transport and
 *   length), whole and admissible, takes its place: the held frame is
 *   answered superseded at once, and the successor is held in its stead,
 *   keeping the connection's place among the waiters;
 * - anything else read behind it (another request, a frame that would be
 *   refused) waits in the buffer, and reading stops, as for any frame that
 *   waits: its reply must follow the held frame's.
 * So a connection holds at most one waiting frame beyond those on the
 * engine, and every request is answered once, in order.  When the slot is
 * granted, and the connection's frame on the engine is back, the held
 * frame is placed as a whole frame is.  While the daemon
 * stops, nothing more is read behind it.
 *
 * gf_admit_held: the connection holds a frame; returns 1 when the loop may
 * go on with the buffer (the frame was placed, refused, or superseded), 0
 * when it waits.  gf_admit_reads_on: whether the connection may read while
 * its held frame waits (what is buffered behind it is not yet a whole
 * request, or is its successor arriving).
 */
int gf_admit_held(gf_conn *c);
int gf_admit_reads_on(const gf_conn *c);

#endif

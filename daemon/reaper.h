/* SPDX-License-Identifier: MIT */
/*
 * Where a plugin stage goes after its last reference: a stage that a
 * reload removed is destroyed when its last frame completes, which is on a
 * loop; its device_close may synchronise the device (cudaFree does), which
 * a loop must never wait for.  So on a loop thread the destruction runs on
 * libuv's thread pool of that loop, like a region's unpinning; on any other
 * thread (a reload's loading thread freeing the pipelines it made, a worker)
 * it runs where the last reference is dropped, since that thread may wait.
 */
#ifndef GF_REAPER_H
#define GF_REAPER_H

#include <uv.h>

/* Plugin stages whose last reference the calling thread drops are
 * destroyed on libuv's thread pool of `loop`, or where dropped once `loop`
 * is NULL (it has stopped).  Each shard's thread sets its own; the control
 * loop, which frees a reload's old configuration, sets its own too.  The
 * calling thread's setting only. */
void gf_reaper_on(uv_loop_t *loop);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Loading a new configuration off the loop.  A reload reads files, opens
 * plugins (dlopen), creates their state (weights read from disk) and their
 * device side (weights uploaded, cuBLAS handles): any of it may take long,
 * or block for good on a FIFO or a hung network mount, and the loop that
 * serves frames must never wait for it.  So each reload runs on a thread of
 * its own: gf_config_load, then gf_shards_reload_prepare; when it is done,
 * the loop is woken (uv_async_send) and the caller's callback applies the
 * result there.
 *
 * One load at a time (the caller starts the next from its callback).  At
 * shutdown a load still running is abandoned: its thread frees
 * what it made when it returns, and nothing waits for it.
 *
 * The job between the loop and the loading thread is the only state both
 * touch; its mutex guards every field both read (reload.c).
 */
#ifndef GF_RELOAD_H
#define GF_RELOAD_H

#include <stddef.h>

#include <uv.h>

#include "config.h"
#include "shards.h"

/* Bytes of the problems a failed load reports, one per line. */
#define GF_RELOAD_PROBLEMS_BYTES 8192
/* Bytes of what a reload could not apply (gf_shards_reload_prepare's note). */
#define GF_RELOAD_NOTE_BYTES 1024

/* What one load made, handed to the loop. */
typedef struct gf_reload_result {
    gf_config *next;                         /* the new configuration (the callback owns it), or
                                                NULL when it could not be read                    */
    int keep_running;                        /* its pipelines cannot run: the running ones stay   */
    char problems[GF_RELOAD_PROBLEMS_BYTES]; /* why not, a line each          */
    size_t problem_count;
    char note[GF_RELOAD_NOTE_BYTES]; /* what needs a restart; "" if nothing   */
    double seconds;                  /* how long the load took                */
} gf_reload_result;

/* Runs on the loop when a load ended, with its result (freed after). */
typedef void (*gf_reload_done_cb)(gf_reload_result *res, void *arg);

typedef struct gf_reload gf_reload;

/* A reloader on `loop` for `shards`, calling `done(res, arg)` after each load.
 * Returns 0 or a negative errno / libuv error. */
int gf_reload_open(uv_loop_t *loop, gf_shards *shards, gf_reload_done_cb done, void *arg,
                   gf_reload **out);

/*
 * Starts loading `path` (NULL: the built-in configuration) with `flags`
 * applied, against the running configuration `cur`, which must not change
 * until the callback ran.  Returns 0, -EBUSY while a load runs (the caller
 * starts another from its callback), or another negative errno.
 */
int gf_reload_start(gf_reload *r, const char *path, const gf_config_overrides *flags,
                    const gf_config *cur);

/* Nonzero while a load runs. */
int gf_reload_busy(const gf_reload *r);

/* Closes the reloader; a load still running is abandoned.  Loop thread. */
void gf_reload_close(gf_reload *r);

#endif

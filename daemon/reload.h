/* SPDX-License-Identifier: MIT */
/*
 * Loading a new configuration off the loop.  A reload reads files, opens
 * plugins (dlopen), creates their state (weights read from disk) and their
 * device side (weights uploaded, cuBLAS handles): any of it may take long,
 * or block for good on a FIFO or a hung network mount, and the loop that
 * serves frames must never wait for it.  So a reload is two calls
 * (mailbox.h) that carry their answers back to the control loop:
 *
 *   load    gf_config_load on a thread of its own (gf_call_spawn),
 *           answered through the control loop's mailbox;
 *   check   gf_reload_check (reload_check.h: restart keys, the slots'
 *           limits copied at start-up, the plugins' device side) on a
 *           worker of the control loop's thread pool (uv_queue_work),
 *           answered on the control loop;
 *
 * then the caller's callback applies the result there.  Neither reads a
 * running shard.  One reload at a time (the caller starts the next from
 * its callback).  At shutdown a load still running is abandoned: its
 * answer finds the control loop's mailbox closed, and its thread frees what
 * it made; a check under way is waited for (it is bounded: the control
 * loop runs until it is done).
 */
#ifndef GF_RELOAD_H
#define GF_RELOAD_H

#include <stddef.h>

#include <uv.h>

#include "config.h"
#include "mailbox.h"
#include "reload_check.h"

/* Bytes of the problems a failed load reports, one per line. */
#define GF_RELOAD_PROBLEMS_BYTES 8192
/* Bytes of what a reload could not apply (gf_reload_check's note). */
#define GF_RELOAD_NOTE_BYTES 1024

/* What one reload made, handed to the loop. */
typedef struct gf_reload_result {
    gf_config *next;                         /* the new configuration (the callback owns it), or
                                                NULL when it could not be read                    */
    char problems[GF_RELOAD_PROBLEMS_BYTES]; /* why not, a line each          */
    size_t problem_count;
    char note[GF_RELOAD_NOTE_BYTES]; /* what needs a restart; "" if nothing   */
    double seconds;                  /* how long the load took                */
} gf_reload_result;

/* Runs on the loop when a reload ended, with its result (freed after). */
typedef void (*gf_reload_done_cb)(gf_reload_result *res, void *arg);

typedef struct gf_reload gf_reload;

/* A reloader on `loop`, whose loads answer through `control` (the control
 * loop's mailbox, which must stay valid as long as the process: an
 * abandoned load answers it whenever it ends), checking against a copy of
 * `limits`, and calling `done(res, arg)` after each reload.  Returns 0 or
 * -ENOMEM. */
int gf_reload_open(uv_loop_t *loop, gf_mailbox *control, const gf_reload_limits *limits,
                   gf_reload_done_cb done, void *arg, gf_reload **out);

/*
 * Starts loading `path` (NULL: the built-in configuration) with `flags`
 * applied, against the running configuration `cur`, which must not change
 * until the callback ran.  Returns 0, -EBUSY while a reload runs (the
 * caller starts another from its callback), or another negative errno.
 */
int gf_reload_start(gf_reload *r, const char *path, const gf_config_overrides *flags,
                    const gf_config *cur);

/* Frees the reloader once the control loop has stopped and its mailbox is
 * closed; a load still running is abandoned.  Loop thread. */
void gf_reload_close(gf_reload *r);

#endif

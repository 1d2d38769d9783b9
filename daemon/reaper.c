/* SPDX-License-Identifier: MIT */
/*
 * Plugin stages destroyed off the loop (reaper.h).
 */
#include "reaper.h"

#include <stdlib.h>

#include "plugin.h"

/* A stage waiting for the thread pool. */
typedef struct reap_req {
    uv_work_t work;
    gf_plugin_stage *stage;
} reap_req;

/* The loop of the thread this is, a shard's or the control loop's
 * (gf_reaper_on); NULL on every other thread (a reload's loading
 * thread, a worker) and once the loop has stopped. */
static _Thread_local uv_loop_t *reap_loop;

static void reap(gf_plugin_stage *stage);

void gf_reaper_on(uv_loop_t *loop) {
    reap_loop = loop;
    if (loop)
        gf_plugin_set_reaper(reap);
}

/* On a worker of libuv's thread pool. */
static void reap_work(uv_work_t *w) {
    gf_plugin_stage_destroy(((reap_req *)w)->stage);
}

/* Back on the loop's thread. */
static void reap_done(uv_work_t *w, int status) {
    if (status == UV_ECANCELED) /* never ran */
        gf_plugin_stage_destroy(((reap_req *)w)->stage);
    free(w);
}

/* Off the loop (a reload's loading thread freeing the pipelines it made)
 * the stage is destroyed where it is: that thread may wait. */
static void reap(gf_plugin_stage *stage) {
    if (reap_loop == NULL) {
        gf_plugin_stage_destroy(stage);
        return;
    }
    reap_req *r = malloc(sizeof *r);
    if (r == NULL) {
        gf_plugin_stage_destroy(stage);
        return;
    }
    r->stage = stage;
    if (uv_queue_work(reap_loop, &r->work, reap_work, reap_done) < 0) {
        free(r);
        gf_plugin_stage_destroy(stage);
    }
}

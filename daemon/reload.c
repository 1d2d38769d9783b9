/* SPDX-License-Identifier: MIT */
/*
 * Loading a new configuration off the loop (reload.h).
 */
#include "reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

struct gf_reload {
    uv_loop_t *loop;         /* the control loop                            */
    gf_mailbox *control;     /* its mailbox: loads answer there            */
    gf_reload_limits limits; /* copied at open                              */
    gf_reload_done_cb done;
    void *arg;
    int busy;            /* a reload is under way; control loop only     */
    uint64_t started_ns; /* when it started                               */
};

/* One reload: the call to its loading thread, then the check on the thread
 * pool.  Each step's thread writes the result alone while the step runs;
 * the call's answer and the work's completion hand it on. */
typedef struct load_job {
    gf_call call;                     /* load: on a thread of its own, answered on the loop */
    uv_work_t work;                   /* check: on the thread pool, answered on the loop    */
    gf_reload *reload;                /* the control loop's only (not the loading thread's) */
    char *path;                       /* the file, or NULL: built in                        */
    const gf_config_overrides *flags; /* the command line's keys               */
    const gf_config *cur;             /* the running configuration             */
    gf_reload_result result;
} load_job;

static void job_free(load_job *job) {
    if (job->result.next) {
        gf_config_free(job->result.next);
        free(job->result.next);
    }
    free(job->path);
    free(job);
}

/* The loading thread: reads the configuration into the result. */
static void load_work(gf_call *c) {
    load_job *job = gf_list_entry(c, load_job, call);
    gf_reload_result *res = &job->result;
    res->next = calloc(1, sizeof *res->next);
    if (res->next == NULL) {
        snprintf(res->problems, sizeof res->problems, "out of memory");
        res->problem_count = 1;
        return;
    }
    if (gf_config_load(job->path, job->flags, res->next, res->problems, sizeof res->problems,
                       &res->problem_count) < 0) {
        free(res->next);
        res->next = NULL;
    }
}

/* A worker of the thread pool: checks the loaded configuration against the
 * limits and prepares its pipelines on the devices. */
static void check_work(uv_work_t *w) {
    load_job *job = gf_list_entry(w, load_job, work);
    gf_reload_result *res = &job->result;
    int rc =
        gf_reload_check(&job->reload->limits, job->cur, res->next, res->note, sizeof res->note);
    if (rc < 0) {
        gf_config_free(res->next);
        free(res->next);
        res->next = NULL;
        snprintf(res->problems, sizeof res->problems, "%s",
                 rc == -ENOMEM ? "out of memory" : res->note);
        res->note[0] = '\0';
        res->problem_count = 1;
    }
}

/* Control loop: the reload is over; its result goes to the callback. */
static void finish(load_job *job) {
    gf_reload *r = job->reload;
    job->result.seconds = (double)(gf_now_ns() - r->started_ns) / 1e9;
    r->busy = 0;
    r->done(&job->result, r->arg);
    job->result.next = NULL; /* the callback's now */
    job_free(job);
}

static void on_checked(uv_work_t *w, int status) {
    (void)status; /* never cancelled: nothing cancels it */
    finish(gf_list_entry(w, load_job, work));
}

/* Control loop: the load ended; what was read goes to be checked.  With no
 * owner the control loop has stopped (this runs on the loading thread, or
 * as its mailbox closes): nobody waits, and what was read goes. */
static void on_loaded(gf_call *c, void *owner) {
    load_job *job = gf_list_entry(c, load_job, call);
    if (owner == NULL) {
        job_free(job);
        return;
    }
    if (job->result.next == NULL ||
        uv_queue_work(job->reload->loop, &job->work, check_work, on_checked) < 0)
        finish(job);
}

int gf_reload_open(uv_loop_t *loop, gf_mailbox *control, const gf_reload_limits *limits,
                   gf_reload_done_cb done, void *arg, gf_reload **out) {
    gf_reload *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    r->loop = loop;
    r->control = control;
    r->limits = *limits;
    r->done = done;
    r->arg = arg;
    *out = r;
    return 0;
}

int gf_reload_start(gf_reload *r, const char *path, const gf_config_overrides *flags,
                    const gf_config *cur) {
    if (r->busy)
        return -EBUSY;
    load_job *job = calloc(1, sizeof *job);
    if (job == NULL || (path && (job->path = strdup(path)) == NULL)) {
        free(job);
        return -ENOMEM;
    }
    job->call = (gf_call){.done = on_loaded, .reply_to = r->control};
    job->reload = r;
    job->flags = flags;
    job->cur = cur;
    int rc = gf_call_spawn(&job->call, load_work);
    if (rc < 0) {
        job_free(job);
        return rc;
    }
    r->busy = 1;
    r->started_ns = gf_now_ns();
    return 0;
}

void gf_reload_close(gf_reload *r) {
    if (r->busy)
        GF_LOG_WRN("reload: abandoning a configuration still loading after %.1f s",
                   (double)(gf_now_ns() - r->started_ns) / 1e9);
    free(r);
}

/* SPDX-License-Identifier: MIT */
/*
 * Loading a new configuration on a thread of its own (reload.h).
 */
#include "reload.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* One load: what the loop gives the loading thread, and what it gets back.
 * The fields under "shared" are guarded by `lock`; the others are set
 * before the thread starts and only read by it. */
typedef struct load_job {
    char *path;                       /* the file, or NULL: built in          */
    const gf_config_overrides *flags; /* the command line's keys              */
    const gf_config *cur;             /* the running configuration            */
    gf_shards *shards;
    uint64_t started_ns;

    pthread_mutex_t lock;
    pthread_cond_t prepared; /* `preparing` went back to 0          */
    /* shared, guarded by lock: */
    uv_async_t *wake; /* the loop's handle; NULL once abandoned */
    int preparing;    /* the thread reads the running shards
                         (gf_shards_reload_prepare): the loop
                         must not free it meanwhile           */
    int finished;     /* the thread put its result here      */
    gf_reload_result result;
} load_job;

struct gf_reload {
    uv_async_t wake; /* a load finished; closed by gf_reload_close       */
    gf_shards *shards;
    gf_reload_done_cb done;
    void *arg;
    load_job *job; /* the load running or finished and not yet taken;
                      loop thread                                      */
};

static void job_free(load_job *job) {
    if (job->result.next) {
        gf_config_free(job->result.next);
        free(job->result.next);
    }
    pthread_cond_destroy(&job->prepared);
    pthread_mutex_destroy(&job->lock);
    free(job->path);
    free(job);
}

/* Reads the configuration into res; 0, or -1 with res's problems. */
static int load(load_job *job, gf_reload_result *res) {
    res->next = calloc(1, sizeof *res->next);
    if (res->next == NULL) {
        snprintf(res->problems, sizeof res->problems, "out of memory");
        res->problem_count = 1;
        return -1;
    }
    if (gf_config_load(job->path, job->flags, res->next, res->problems, sizeof res->problems,
                       &res->problem_count) < 0) {
        free(res->next);
        res->next = NULL;
        return -1;
    }
    return 0;
}

/* Checks the loaded configuration against the running shards and prepares
 * its pipelines on the engine, unless the loop is gone. */
static void prepare(load_job *job, gf_reload_result *res) {
    pthread_mutex_lock(&job->lock);
    int go = job->preparing = job->wake != NULL;
    pthread_mutex_unlock(&job->lock);
    if (!go)
        return;
    if (gf_shards_reload_prepare(job->shards, job->cur, res->next, &res->keep_running, res->note,
                                 sizeof res->note) < 0) {
        gf_config_free(res->next);
        free(res->next);
        res->next = NULL;
        snprintf(res->problems, sizeof res->problems, "out of memory");
        res->problem_count = 1;
    }
    pthread_mutex_lock(&job->lock);
    job->preparing = 0;
    pthread_cond_broadcast(&job->prepared);
    pthread_mutex_unlock(&job->lock);
}

/* The loading thread: reads, checks and prepares the configuration, then
 * hands it to the loop, or, if the loop is gone, frees it. */
static void *load_main(void *arg) {
    load_job *job = arg;
    gf_reload_result res;
    memset(&res, 0, sizeof res);
    if (load(job, &res) == 0)
        prepare(job, &res);
    res.seconds = (double)(gf_now_ns() - job->started_ns) / 1e9;
    pthread_mutex_lock(&job->lock);
    job->result = res;
    job->finished = 1;
    int abandoned = job->wake == NULL;
    if (!abandoned)
        uv_async_send(job->wake);
    pthread_mutex_unlock(&job->lock);
    if (abandoned)
        job_free(job);
    return NULL;
}

/* Loop thread: the load ended; its result goes to the callback. */
static void on_wake(uv_async_t *h) {
    gf_reload *r = h->data;
    load_job *job = r->job;
    if (job == NULL)
        return;
    pthread_mutex_lock(&job->lock);
    int finished = job->finished;
    pthread_mutex_unlock(&job->lock);
    if (!finished)
        return;
    r->job = NULL;
    r->done(&job->result, r->arg);
    job->result.next = NULL; /* the callback's now */
    job_free(job);
}

int gf_reload_open(uv_loop_t *loop, gf_shards *shards, gf_reload_done_cb done, void *arg,
                   gf_reload **out) {
    gf_reload *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    int rc = uv_async_init(loop, &r->wake, on_wake);
    if (rc < 0) {
        free(r);
        return rc;
    }
    uv_unref((uv_handle_t *)&r->wake);
    r->wake.data = r;
    r->shards = shards;
    r->done = done;
    r->arg = arg;
    *out = r;
    return 0;
}

int gf_reload_start(gf_reload *r, const char *path, const gf_config_overrides *flags,
                    const gf_config *cur) {
    if (r->job != NULL)
        return -EBUSY;
    load_job *job = calloc(1, sizeof *job);
    if (job == NULL || (path && (job->path = strdup(path)) == NULL)) {
        free(job);
        return -ENOMEM;
    }
    job->flags = flags;
    job->cur = cur;
    job->shards = r->shards;
    job->wake = &r->wake;
    job->started_ns = gf_now_ns();
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->prepared, NULL);
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, load_main, job);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        job_free(job);
        return -rc;
    }
    r->job = job;
    return 0;
}

int gf_reload_busy(const gf_reload *r) {
    return r->job != NULL;
}

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

void gf_reload_close(gf_reload *r) {
    load_job *job = r->job;
    if (job != NULL) {
        pthread_mutex_lock(&job->lock);
        job->wake = NULL; /* the thread must not wake a closed handle */
        /* Nor read the shards once the caller frees them: a prepare under
         * way is waited for (it is bounded; a stalled read is not). */
        while (job->preparing)
            pthread_cond_wait(&job->prepared, &job->lock);
        int finished = job->finished;
        pthread_mutex_unlock(&job->lock);
        if (finished) {
            job_free(job);
        } else {
            GF_LOG_WRN("reload: abandoning a configuration still loading after %.1f s",
                       (double)(gf_now_ns() - job->started_ns) / 1e9);
        }
    }
    uv_close((uv_handle_t *)&r->wake, on_closed);
}

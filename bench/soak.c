/* SPDX-License-Identifier: MIT */
/*
 * gf_soak: many clients against one running gpuframed for minutes, well-behaved
 * and hostile ones mixed, failing unless nothing was lost, wrong or leaked
 * (bench/README.md, "Soak"; bench/soak.sh starts the daemon and runs this).
 *
 *   gf_soak --socket PATH --pid PID --configs A.json[,B.json] [--clients N]
 *           [--hostile N] [--minutes M | --seconds S] [--samples FILE]
 *           [--seed N] [--expect-reloads] [--min-ratio R] [--heavy-bytes B]
 *
 * --configs names the configuration files the daemon may be running (soak.sh
 * swaps them under SIGHUP): a pipeline's result is correct when it matches
 * its C reference under the parameters of one of them.  --pid is the
 * daemon's, for its RSS and open fds in /proc.
 *
 * Well-behaved clients stream windows of verified frames (some by shared
 * memory, some with LIST/STATS/TRACE in the window); hostile ones, started
 * after a quiet baseline phase, disconnect mid-frame, send bad requests,
 * stall mid-request and stop reading, over and over; and (issue 31) close
 * in bursts mid-payload, trickle a large payload a few bytes at a time,
 * stop reading small frames that share the well-behaved clients' batches,
 * and send 40 frames of the "heavy" pipeline at once (--heavy-bytes each;
 * the well-behaved clients never use that pipeline).  At checkpoints every
 * client pauses at a safe point, the daemon goes idle, and the daemon's
 * STATS, RSS and fds are compared with what the clients did, and the
 * well-behaved clients' frames/s while hostile ones act with their frames/s
 * in the baseline (at least --min-ratio R of it, 0.8 by default).  The last
 * lines are one summary table; exit status 0 when every check held, 1
 * otherwise, 2 on a bad command line.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "libgpuframe.h"
#include "listing.h"
#include "pipeline.h"
#include "protocol.h"
#include "util.h"

/* ---- constants ------------------------------------------------------------------ */

/* Elementwise frames are slices of one random pool, so that any size at any
 * offset has its reference in a slice of the pool's reference. */
#define POOL_BYTES ((size_t)8 << 20)
/* Frame sizes of the elementwise pipelines: log-uniform in [min, max]. */
#define FRAME_MIN_BYTES ((size_t)4 << 10)
#define FRAME_MAX_BYTES ((size_t)4 << 20)
/* One elementwise frame in this many is empty (valid for every such kind). */
#define EMPTY_FRAME_EVERY 128
/* Distinct inputs per fixed-size (normalize_u8) pipeline. */
#define IMAGES 4
/* Parameter sets a pipeline may run with: one per configuration file. */
#define MAX_SETS  2
#define MAX_PIPES 16
/* Latency classes by input bytes: <= 16 KiB (staged payloads), <= 256 KiB,
 * <= 1 MiB, <= 4 MiB. */
#define CLASSES 4
static const size_t class_max_bytes[CLASSES] = {16u << 10, 256u << 10, 1u << 20, 4u << 20};
static const char *const class_names[CLASSES] = {"<=16K", "<=256K", "<=1M", "<=4M"};
/* Phases whose latencies are kept apart: before the hostile clients start,
 * and after. */
enum { PH_BASE, PH_SOAK, PH_COUNT };

/* A well-behaved client's windows, by its index. */
static const unsigned wb_windows[] = {1, 2, 4, 8};
/* Shared-memory clients: every SHM_EVERY-th well-behaved client, window
 * SHM_WINDOW, one region of SHM_WINDOW slots of input and output; they send
 * one frame in SHM_SOCKET_EVERY over the socket instead. */
#define SHM_EVERY        4
#define SHM_WINDOW       4
#define SHM_SLOT_BYTES   (2 * FRAME_MAX_BYTES)
#define SHM_SOCKET_EVERY 4
/* Query clients: every QUERY_EVERY_CLIENT-th well-behaved client puts a
 * LIST, STATS or TRACE in its window in place of one frame in QUERY_EVERY. */
#define QUERY_EVERY_CLIENT 3
#define QUERY_EVERY        16
/* After a reply, one chance in this many that a socket client drains and
 * reconnects, and that a shm client replaces its region. */
#define RECONNECT_EVERY    2000
#define REGION_RENEW_EVERY 1000
/* The pipeline the heavy attack uses, if the configuration has it. */
#define HEAVY_PIPELINE "heavy"
/* A heavy attack's frames at most: 40 results of it fit the daemon's
 * max_output_bytes unread (8 MiB), so sending them all before reading
 * cannot wedge. */
#define HEAVY_BYTES_MAX (64u << 10)
/* A heavy frame is a slice of the pool's first HEAVY_SPAN_FRAMES frames'
 * worth of bytes, the one part of the pool whose heavy reference is
 * computed: it costs the CPU every round for every float (20,000 rounds on
 * CUDA; over the whole pool, most of an hour). */
#define HEAVY_SPAN_FRAMES 2
/* Poison written over a shm frame's output range before it is sent, so a
 * frame the daemon never wrote cannot pass on an earlier frame's output. */
#define OUT_POISON_BYTES 64

/* A well-behaved reply slower than this is reported (and waited for again);
 * after STUCK_MS in all the connection is given up as failed. */
#define REPLY_TIMEOUT_MS 30000
#define STUCK_MS         120000
/* Raw sockets of hostile clients: blocking I/O bounded by this. */
#define RAW_IO_TIMEOUT_MS 30000
/* A hostile client waits this many deadlines (request_timeout_ms or
 * write_timeout_ms) for the daemon to cut it before calling it uncut. */
#define CUT_WAIT_DEADLINES 10
/* How long a checkpoint waits for every client to pause, and then for the
 * daemon to go idle. */
#define PAUSE_TIMEOUT_MS 180000
#define IDLE_TIMEOUT_MS  30000
/* Checkpoints after warm-up (the first is the reference). */
#define CHECKPOINTS 10
/* The daemon stops reading a connection that owes this many replies not
 * tied to a slot (GF_CONN_MAX_LOOSE_REPLIES in daemon/conn.h). */
#define DAEMON_LOOSE_REPLY_CAP 64
/* Failures kept for the summary (all are printed as they happen). */
#define FAILURES_KEPT 40
#define TEXT_BYTES    512
/* "Flat": RssAnon's floor and fds per connection at the checkpoints after
 * warm-up stay within this fraction (see the summary's resource rows). */
#define FLAT_FRACTION 0.05
/* Whether the daemon's RssAnon follows what it frees: not under ASan, whose
 * quarantine keeps freed blocks resident and grows for minutes, nor under
 * TSan, whose shadow memory and allocator do the same.  gf_soak is built
 * with the daemon's sanitizers (one build tree), so it can tell. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_FOLLOWS_FREE 0
#else
#define RSS_FOLLOWS_FREE 1
#endif

/* ---- options ---------------------------------------------------------------- */

static struct {
    const char *socket_path;
    long pid;
    const char *configs[MAX_SETS];
    unsigned config_count;
    unsigned clients, hostile;
    double seconds;
    const char *samples_path;
    uint64_t seed;
    int expect_reloads;
    double min_ratio;   /* well-behaved frames/s, hostile phase over baseline */
    size_t heavy_bytes; /* a heavy attack's frames                           */
    /* From the first configuration file. */
    unsigned request_timeout_ms, write_timeout_ms;
    uint64_t max_frame_bytes;
} opt = {.clients = 64,
         .hostile = (unsigned)-1,
         .seconds = 600,
         .seed = 1,
         .min_ratio = 0.8,
         .heavy_bytes = 4096};

/* Phase boundaries, seconds after the clients start. */
static double t_baseline_end, t_warmup_end;
/* Streaming time the checkpoints took from the soak phase: the pauses
 * before the last (the monitor's thread only), and when the last began. */
static double paused_s, t_last_pause_s;
static uint64_t t0_ns;

static double since_start_s(void) {
    return (double)(gf_now_ns() - t0_ns) / 1e9;
}

/* ---- small tools -------------------------------------------------------------- */

/* xorshift64*: each thread its own state. */
static uint64_t rnd(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n) {
    return n ? rnd(s) % n : 0;
}

/* Uniform in [0, 1). */
static double rnd_unit(uint64_t *s) {
    return (double)(rnd(s) >> 11) / 9007199254740992.0;
}

/* "hh:mm:ss.mmm" of the wall clock, to correlate with the daemon's log. */
static void wall_clock(char *buf, size_t len) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    snprintf(buf, len, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000);
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* A growable array of latencies (ns). */
typedef struct lat_vec {
    uint64_t *v;
    size_t n, cap;
} lat_vec;

static void lat_push(lat_vec *l, uint64_t ns) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return; /* out of memory: the sample is lost, nothing else */
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = ns;
}

static unsigned size_class(size_t bytes) {
    unsigned k = 0;
    while (k + 1 < CLASSES && bytes > class_max_bytes[k])
        k++;
    return k;
}

/* ---- failures ------------------------------------------------------------------ */

static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fail_count;
static char fail_kept[FAILURES_KEPT][TEXT_BYTES];

/* Records one failure: printed at once with the wall-clock time and kept
 * (the first FAILURES_KEPT) for the summary.  Any thread. */
__attribute__((format(printf, 1, 2))) static void failure(const char *fmt, ...) {
    char text[TEXT_BYTES], when[32];
    va_list ap;
    va_start(ap, fmt);
    gf_verrorf(text, sizeof text, fmt, ap);
    va_end(ap);
    wall_clock(when, sizeof when);
    pthread_mutex_lock(&fail_mu);
    if (fail_count < FAILURES_KEPT)
        gf_errorf(fail_kept[fail_count], TEXT_BYTES, "%s t=%.1fs %s", when, since_start_s(), text);
    fail_count++;
    pthread_mutex_unlock(&fail_mu);
    fprintf(stderr, "gf_soak: FAIL %s t=%.1fs %s\n", when, since_start_s(), text);
}

/* ---- pipelines and their references -------------------------------------------- */

typedef struct soak_pipe {
    gf_pipeline p;                  /* as LIST reported it at the start          */
    gf_params sets[MAX_SETS];       /* the parameters each configuration gives   */
    unsigned set_count;             /* distinct sets among them (1 or 2)         */
    int elementwise;                /* output element i depends on input i only  */
    size_t image_bytes;             /* fixed-size kinds: the one input length    */
    uint8_t *image[IMAGES];         /* fixed-size kinds: the inputs              */
    uint8_t *ref[MAX_SETS][IMAGES]; /* outputs: [set][0] of the pool for
                                       elementwise kinds, else [set][image]     */
    unsigned weight;                /* relative frequency in the mix             */
} soak_pipe;

static soak_pipe pipes[MAX_PIPES];
static unsigned pipe_count, weight_total;
static uint8_t *pool; /* POOL_BYTES of float32 in [-4, 4], never 0 */

/* Fills `bytes` at `p` with float32 values in [-4, 4] (none 0; random bytes
 * after the last whole float). */
static void fill_f32(uint8_t *p, size_t bytes, uint64_t *rng) {
    size_t i = 0;
    for (; i + 4 <= bytes; i += 4) {
        float f = (float)(rnd(rng) >> 40) / 16777216.0f * 8.0f - 4.0f;
        if (f == 0.0f)
            f = 0.25f;
        memcpy(p + i, &f, 4);
    }
    for (; i < bytes; i++)
        p[i] = (uint8_t)(rnd(rng) | 1);
}

/* Reads every configuration file's pipelines and keeps, per pipeline of the
 * LIST, the distinct parameter sets; the first file also gives the
 * timeouts and max_frame_bytes.  Returns 0 or -1 (reason printed). */
static int load_configs(void) {
    for (unsigned f = 0; f < opt.config_count; f++) {
        FILE *fp = fopen(opt.configs[f], "rb");
        if (!fp) {
            fprintf(stderr, "gf_soak: %s: %s\n", opt.configs[f], strerror(errno));
            return -1;
        }
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text - 1, fp);
        fclose(fp);
        text[n] = '\0';
        cJSON *root = cJSON_Parse(text);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "pipelines");
        if (!cJSON_IsArray(list)) {
            fprintf(stderr, "gf_soak: %s: no pipelines array\n", opt.configs[f]);
            cJSON_Delete(root);
            return -1;
        }
        if (f == 0) {
            const cJSON *v;
            opt.request_timeout_ms = opt.write_timeout_ms = 10000;
            opt.max_frame_bytes = 16u << 20;
            if ((v = cJSON_GetObjectItemCaseSensitive(root, "request_timeout_ms")) &&
                cJSON_IsNumber(v))
                opt.request_timeout_ms = (unsigned)v->valuedouble;
            if ((v = cJSON_GetObjectItemCaseSensitive(root, "write_timeout_ms")) &&
                cJSON_IsNumber(v))
                opt.write_timeout_ms = (unsigned)v->valuedouble;
            if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_frame_bytes")) &&
                cJSON_IsNumber(v))
                opt.max_frame_bytes = (uint64_t)v->valuedouble;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, list) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
            if (!cJSON_IsString(name) || !cJSON_IsString(kind))
                continue;
            for (unsigned i = 0; i < pipe_count; i++) {
                soak_pipe *sp = &pipes[i];
                if (strcmp(sp->p.name, name->valuestring) != 0)
                    continue;
                if (strcmp(sp->p.stages[0].kind->name, kind->valuestring) != 0) {
                    fprintf(stderr, "gf_soak: %s: pipeline %s is of kind %s, the daemon's of %s\n",
                            opt.configs[f], sp->p.name, kind->valuestring,
                            sp->p.stages[0].kind->name);
                    cJSON_Delete(root);
                    return -1;
                }
                gf_params ps;
                char err[TEXT_BYTES];
                if (gf_params_from_json(sp->p.stages[0].kind,
                                        cJSON_GetObjectItemCaseSensitive(e, "params"), sp->p.name,
                                        &ps, err, sizeof err) < 0) {
                    fprintf(stderr, "gf_soak: %s: %s\n", opt.configs[f], err);
                    cJSON_Delete(root);
                    return -1;
                }
                int known = 0;
                for (unsigned s = 0; s < sp->set_count; s++)
                    known |= memcmp(&sp->sets[s], &ps, sizeof ps) == 0;
                if (!known && sp->set_count < MAX_SETS)
                    sp->sets[sp->set_count++] = ps;
            }
        }
        cJSON_Delete(root);
    }
    for (unsigned i = 0; i < pipe_count; i++) {
        if (pipes[i].set_count == 0) {
            fprintf(stderr, "gf_soak: pipeline %s is in no configuration file\n", pipes[i].p.name);
            return -1;
        }
        if (memcmp(&pipes[i].sets[0], &pipes[i].p.stages[0].params, sizeof(gf_params)) != 0 &&
            (pipes[i].set_count < 2 ||
             memcmp(&pipes[i].sets[1], &pipes[i].p.stages[0].params, sizeof(gf_params)) != 0)) {
            fprintf(stderr, "gf_soak: pipeline %s runs parameters no configuration file has\n",
                    pipes[i].p.name);
            return -1;
        }
    }
    return 0;
}

/* The bytes at the pool's start that heavy frames are slices of. */
static size_t heavy_span(void) {
    return opt.heavy_bytes * HEAVY_SPAN_FRAMES;
}

/* Makes the inputs and every reference output.  Returns 0 or -1. */
static int build_references(uint64_t seed) {
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    pool = malloc(POOL_BYTES);
    if (!pool)
        return -1;
    fill_f32(pool, POOL_BYTES, &rng);
    for (unsigned i = 0; i < pipe_count; i++) {
        soak_pipe *sp = &pipes[i];
        const char *k = sp->p.stages[0].kind->name;
        sp->elementwise = !strcmp(k, "echo") || !strcmp(k, "affine") || !strcmp(k, "sincos");
        /* The heavy pipeline is the heavy attack's alone. */
        sp->weight = !strcmp(sp->p.name, HEAVY_PIPELINE) ? 0
                     : !strcmp(k, "sincos")              ? 1
                     : !strcmp(k, "normalize_u8")        ? 2
                                                         : 3;
        weight_total += sp->weight;
        char why[TEXT_BYTES];
        if (sp->elementwise) {
            size_t span = sp->weight == 0 ? heavy_span() : POOL_BYTES;
            for (unsigned s = 0; s < sp->set_count; s++) {
                if (!(sp->ref[s][0] = malloc(span)))
                    return -1;
                sp->p.stages[0].kind->reference(&sp->sets[s], pool, span, sp->ref[s][0]);
            }
            continue;
        }
        sp->image_bytes = (size_t)sp->p.stages[0].params.width * sp->p.stages[0].params.height * 3;
        int64_t out = sp->p.stages[0].kind->output_bytes(&sp->p.stages[0].params, sp->image_bytes,
                                                         why, sizeof why);
        if (out < 0) {
            fprintf(stderr, "gf_soak: %s: %s\n", sp->p.name, why);
            return -1;
        }
        for (unsigned m = 0; m < IMAGES; m++) {
            if (!(sp->image[m] = malloc(sp->image_bytes)))
                return -1;
            for (size_t b = 0; b < sp->image_bytes; b++)
                sp->image[m][b] = (uint8_t)rnd(&rng);
            for (unsigned s = 0; s < sp->set_count; s++) {
                if (!(sp->ref[s][m] = malloc((size_t)out)))
                    return -1;
                sp->p.stages[0].kind->reference(&sp->sets[s], sp->image[m], sp->image_bytes,
                                                sp->ref[s][m]);
            }
        }
    }
    return 0;
}

/* ---- pausing and stopping ------------------------------------------------------- */

/* Every client thread reaches ctl_gate() at safe points: a well-behaved
 * client with nothing in flight, a hostile one between attacks.  While a
 * checkpoint pauses them they wait there, counted in `paused`. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pause, stop;
    unsigned paused;
} ctl = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

/* Nonzero when the caller should reach its gate: a pause or stop is asked. */
static int ctl_wanted(void) {
    pthread_mutex_lock(&ctl.mu);
    int v = ctl.pause || ctl.stop;
    pthread_mutex_unlock(&ctl.mu);
    return v;
}

/* Waits out a pause.  Returns 0 to go on, -1 when the run is over. */
static int ctl_gate(void) {
    pthread_mutex_lock(&ctl.mu);
    if (ctl.pause && !ctl.stop) {
        ctl.paused++;
        pthread_cond_broadcast(&ctl.cv);
        while (ctl.pause && !ctl.stop)
            pthread_cond_wait(&ctl.cv, &ctl.mu);
        ctl.paused--;
    }
    int stop = ctl.stop;
    pthread_mutex_unlock(&ctl.mu);
    return stop ? -1 : 0;
}

/* Sleeps `ms`, or less when a pause or stop is asked. */
static void ctl_sleep_ms(unsigned ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&ctl.mu);
    while (!ctl.pause && !ctl.stop)
        if (pthread_cond_timedwait(&ctl.cv, &ctl.mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&ctl.mu);
}

/* ---- well-behaved clients -------------------------------------------------------- */

/* One request in a well-behaved client's window. */
typedef struct wb_req {
    uint8_t type;  /* GF_MSG_FRAME, _LIST, _STATS or _TRACE             */
    unsigned pipe; /* index in pipes[]                                  */
    uint64_t frame_id;
    size_t offset;    /* elementwise: where in the pool the input starts   */
    size_t bytes;     /* input length                                      */
    size_t out_bytes; /* output length by the pipeline's rule              */
    unsigned image;   /* fixed-size kinds: which input                     */
    int shm;          /* sent by reference, in shm slot `shm_slot`         */
    unsigned shm_slot;
    uint64_t sent_ns;
} wb_req;

/* Counts of one client (well-behaved or hostile, and the monitor). */
typedef struct counts {
    uint64_t connects;
    /* well-behaved */
    uint64_t frames_sent, frames_answered, frames_failed;
    uint64_t bytes_in, bytes_out;
    uint64_t shm_frames, shm_bytes_in, shm_bytes_out;
    uint64_t pipe_answered[MAX_PIPES];
    uint64_t matched[MAX_PIPES][MAX_SETS];
    uint64_t lists, stats, traces, queries_failed;
    uint64_t regions_added, regions_removed, reconnects;
    /* hostile: what the daemon must have counted (see check_stats) */
    uint64_t attacks;
    uint64_t disc_header, disc_small, disc_large;
    uint64_t whole_frames, whole_bytes;
    uint64_t whole_cut;                          /* closed by the daemon mid-send   */
    uint64_t bad[GF_STATUS_COUNT_];              /* ERRORs received, by status     */
    uint64_t bad_length_frame, bad_length_fatal; /* of bad[BAD_LENGTH]     */
    uint64_t stall_cut[3];                       /* header / small / large payload */
    uint64_t stall_cut_waiting; /* of stall_cut[2]: cut while waiting for a slot, the
                                   frame never taken (its ERROR says no bytes)   */
    uint64_t noread_frame_cut, noread_frame_bytes, trace_flood_sent;
    uint64_t closers;                     /* of disc_large, closed in bursts          */
    uint64_t trickles_cut;                /* of stall_cut[2], trickled, not stalled   */
    uint64_t noread_shared_cut;           /* small frames never read, cut by write_timeout */
    uint64_t heavy_frames;                /* of frames_answered, the heavy attacks'   */
    uint64_t floods_cut, floods_over_cap; /* TRACE floods closed; of them, > cap */
    uint64_t stall_cut_max_ms[3], noread_cut_max_ms;
    uint64_t hostile_anomalies;
} counts;

typedef struct wb_client {
    unsigned index;
    int shm, queries;
    unsigned window;
    pthread_t thread;
    uint64_t rng;
    gf_client *c;
    gf_client_region region;
    int have_region;
    wb_req fifo[8];
    unsigned head, count;
    uint64_t next_id, frame_seq;
    counts n;
    lat_vec lat[PH_COUNT][CLASSES];
} wb_client;

static wb_client *wbs;
static unsigned wb_count;

/* Chooses the next frame of `w` into `r` (pipeline, size, input). */
static void wb_pick(wb_client *w, wb_req *r) {
    unsigned x = (unsigned)rnd_below(&w->rng, weight_total), i = 0;
    while (x >= pipes[i].weight) {
        x -= pipes[i].weight;
        i++;
    }
    const soak_pipe *sp = &pipes[i];
    r->pipe = i;
    r->image = 0;
    r->offset = 0;
    if (!sp->elementwise) {
        r->image = (unsigned)rnd_below(&w->rng, IMAGES);
        r->bytes = sp->image_bytes;
    } else if (rnd_below(&w->rng, EMPTY_FRAME_EVERY) == 0) {
        r->bytes = 0;
    } else {
        double octaves = log2((double)FRAME_MAX_BYTES / FRAME_MIN_BYTES);
        r->bytes = (size_t)((double)FRAME_MIN_BYTES * exp2(rnd_unit(&w->rng) * octaves));
        if (r->bytes > FRAME_MAX_BYTES)
            r->bytes = FRAME_MAX_BYTES;
        /* echo takes any length at any offset; float kinds whole floats. */
        size_t unit = strcmp(sp->p.stages[0].kind->name, "echo") == 0 ? 1 : 4;
        r->bytes -= r->bytes % unit;
        r->offset = (size_t)rnd_below(&w->rng, (POOL_BYTES - r->bytes) / unit + 1) * unit;
    }
    char why[TEXT_BYTES];
    int64_t out =
        sp->p.stages[0].kind->output_bytes(&sp->p.stages[0].params, r->bytes, why, sizeof why);
    r->out_bytes = out < 0 ? 0 : (size_t)out;
}

static const uint8_t *wb_input(const wb_req *r) {
    const soak_pipe *sp = &pipes[r->pipe];
    return sp->elementwise ? pool + r->offset : sp->image[r->image];
}

static const uint8_t *wb_reference(const wb_req *r, unsigned set) {
    const soak_pipe *sp = &pipes[r->pipe];
    return sp->elementwise ? sp->ref[set][0] + r->offset : sp->ref[set][r->image];
}

static void describe_req(const wb_client *w, const wb_req *r, char *buf, size_t len) {
    if (r->type != GF_MSG_FRAME)
        gf_errorf(buf, len, "client %u %s request %" PRIu64, w->index, gf_msg_type_name(r->type),
                  r->frame_id);
    else
        gf_errorf(buf, len,
                  "client %u frame %" PRIu64 " (%s, %zu bytes at offset %zu, image %u, %s)",
                  w->index, r->frame_id, pipes[r->pipe].p.name, r->bytes, r->offset, r->image,
                  r->shm ? "by reference" : "on the socket");
}

static int check_list(const void *json, size_t len, char *why, size_t why_len);

/* Connects `w` (and makes its region); counts.  Returns 0 or -1 (failure
 * recorded). */
static int wb_connect(wb_client *w) {
    int rc = gf_client_connect(opt.socket_path, &w->c);
    if (rc < 0) {
        failure("client %u: connect: %s", w->index, strerror(-rc));
        w->c = NULL;
        return -1;
    }
    w->n.connects++;
    /* A LIST on every connection: names and ids must not have changed. */
    char *json = NULL;
    rc = gf_client_request_json(w->c, GF_MSG_LIST, &json, REPLY_TIMEOUT_MS);
    if (rc < 0) {
        failure("client %u: LIST: %s: %s", w->index, strerror(-rc), gf_client_error(w->c));
        return -1;
    }
    w->n.lists++;
    char why[TEXT_BYTES];
    rc = check_list(json, strlen(json), why, sizeof why);
    free(json);
    if (rc < 0) {
        failure("client %u: LIST on connecting: %s", w->index, why);
        w->n.queries_failed++;
    }
    if (w->shm) {
        rc = gf_client_region_create(w->c, (uint64_t)SHM_WINDOW * SHM_SLOT_BYTES, &w->region,
                                     REPLY_TIMEOUT_MS);
        if (rc < 0) {
            failure("client %u: region: %s: %s", w->index, strerror(-rc), gf_client_error(w->c));
            return -1;
        }
        w->have_region = 1;
        w->n.regions_added++;
    }
    return 0;
}

static void wb_disconnect(wb_client *w) {
    if (w->have_region) {
        int rc = gf_client_region_destroy(w->c, &w->region, REPLY_TIMEOUT_MS);
        if (w->c && rc == 0)
            w->n.regions_removed++;
        else if (w->c)
            failure("client %u: REGION_REMOVE: %s: %s", w->index, strerror(-rc),
                    gf_client_error(w->c));
        w->have_region = 0;
    }
    gf_client_close(w->c);
    w->c = NULL;
}

/* The connection failed under `w`: every request in flight has failed. */
static void wb_lost(wb_client *w, const char *why) {
    char what[TEXT_BYTES];
    for (; w->count > 0; w->count--, w->head = (w->head + 1) % w->window) {
        wb_req *r = &w->fifo[w->head];
        describe_req(w, r, what, sizeof what);
        failure("%s: no reply: %s", what, why);
        if (r->type == GF_MSG_FRAME)
            w->n.frames_failed++;
        else
            w->n.queries_failed++;
    }
    if (w->have_region) {
        gf_client_region_destroy(NULL, &w->region, 0);
        w->have_region = 0;
    }
    gf_client_close(w->c);
    w->c = NULL;
}

/* Queues the next request of `w`.  Returns 0 or -1 (the connection failed). */
static int wb_send(wb_client *w) {
    wb_req *r = &w->fifo[(w->head + w->count) % w->window];
    memset(r, 0, sizeof *r);
    r->frame_id = w->next_id++;
    int rc;
    if (w->queries && rnd_below(&w->rng, QUERY_EVERY) == 0) {
        static const uint8_t types[] = {GF_MSG_LIST, GF_MSG_STATS, GF_MSG_TRACE};
        r->type = types[rnd_below(&w->rng, 3)];
        rc = gf_client_send_request(w->c, r->type, r->frame_id);
    } else {
        r->type = GF_MSG_FRAME;
        wb_pick(w, r);
        const soak_pipe *sp = &pipes[r->pipe];
        r->shm = w->have_region && rnd_below(&w->rng, SHM_SOCKET_EVERY) != 0;
        if (r->shm) {
            r->shm_slot = (unsigned)(w->frame_seq % SHM_WINDOW);
            uint8_t *base = (uint8_t *)w->region.base + (size_t)r->shm_slot * SHM_SLOT_BYTES;
            memcpy(base, wb_input(r), r->bytes);
            size_t poison = r->out_bytes < OUT_POISON_BYTES ? r->out_bytes : OUT_POISON_BYTES;
            memset(base + FRAME_MAX_BYTES, 0xA5, poison);
            memset(base + FRAME_MAX_BYTES + r->out_bytes - poison, 0xA5, poison);
            gf_shm_frame d = {.region_id = w->region.id,
                              .in_offset = (uint64_t)r->shm_slot * SHM_SLOT_BYTES,
                              .in_bytes = r->bytes,
                              .out_offset =
                                  (uint64_t)r->shm_slot * SHM_SLOT_BYTES + FRAME_MAX_BYTES,
                              .out_capacity = FRAME_MAX_BYTES};
            rc = gf_client_send_frame_shm(w->c, sp->p.id, r->frame_id, &d);
        } else {
            rc = gf_client_send_frame(w->c, sp->p.id, r->frame_id, wb_input(r), r->bytes);
        }
        w->frame_seq++;
        w->n.frames_sent++;
        w->n.bytes_in += r->bytes;
    }
    r->sent_ns = gf_now_ns();
    w->count++;
    if (rc < 0) {
        char why[TEXT_BYTES];
        gf_errorf(why, sizeof why, "send: %s: %s", strerror(-rc), gf_client_error(w->c));
        wb_lost(w, why);
        return -1;
    }
    return 0;
}

/* Checks a LIST reply: the pipelines of the start, each running one of
 * its configured parameter sets.  Returns 0 or -1 with why. */
static int check_list(const void *json, size_t len, char *why, size_t why_len) {
    char *text = malloc(len + 1);
    if (!text)
        return gf_errorf(why, why_len, "out of memory"), -1;
    memcpy(text, json, len);
    text[len] = '\0';
    gf_pipeline *got = NULL;
    size_t count = 0;
    int rc = gf_pipelines_from_json(text, &got, &count, why, why_len);
    free(text);
    if (rc < 0)
        return -1;
    rc = -1;
    if (count != pipe_count) {
        gf_errorf(why, why_len, "LIST has %zu pipelines, %u at the start", count, pipe_count);
        goto out;
    }
    for (unsigned i = 0; i < pipe_count; i++) {
        const soak_pipe *sp = &pipes[i];
        if (got[i].id != sp->p.id || strcmp(got[i].name, sp->p.name) ||
            got[i].stages[0].kind != sp->p.stages[0].kind) {
            gf_errorf(why, why_len, "LIST entry %u is %s, was %s", i, got[i].name, sp->p.name);
            goto out;
        }
        int known = 0;
        for (unsigned s = 0; s < sp->set_count; s++)
            known |= memcmp(&sp->sets[s], &got[i].stages[0].params, sizeof(gf_params)) == 0;
        if (!known) {
            gf_errorf(why, why_len, "LIST: %s runs parameters of no configuration file",
                      sp->p.name);
            goto out;
        }
    }
    rc = 0;
out:
    free(got);
    return rc;
}

/* Checks one reply against the request at the head of the window, counts
 * it and records its latency. */
static void wb_check(wb_client *w, const wb_req *r, const gf_reply *rep, uint64_t now_ns) {
    char what[TEXT_BYTES], why[TEXT_BYTES] = "";
    const gf_header *h = &rep->header;
    describe_req(w, r, what, sizeof what);
    if (h->type == GF_MSG_ERROR) {
        char text[GF_ERROR_TEXT_MAX_BYTES + 1];
        size_t n = rep->payload_bytes < GF_ERROR_TEXT_MAX_BYTES ? rep->payload_bytes
                                                                : GF_ERROR_TEXT_MAX_BYTES;
        memcpy(text, rep->payload ? rep->payload : "", n);
        text[n] = '\0';
        failure("%s: ERROR %s: %s", what, gf_status_name(h->status), text);
        if (r->type == GF_MSG_FRAME)
            w->n.frames_failed++;
        else
            w->n.queries_failed++;
        return;
    }
    if (r->type != GF_MSG_FRAME) {
        int bad = 0;
        if (r->type == GF_MSG_LIST) {
            bad = check_list(rep->payload, rep->payload_bytes, why, sizeof why) < 0;
            w->n.lists++;
        } else {
            /* A STATS or TRACE document: a JSON object with its main key. */
            char *text = malloc(rep->payload_bytes + 1);
            cJSON *doc = NULL;
            if (text) {
                memcpy(text, rep->payload, rep->payload_bytes);
                text[rep->payload_bytes] = '\0';
                doc = cJSON_Parse(text);
                free(text);
            }
            const char *key = "frames"; /* an object in STATS, an array in TRACE */
            bad = !cJSON_GetObjectItemCaseSensitive(doc, key);
            gf_errorf(why, sizeof why, "the document does not parse or lacks \"%s\"", key);
            cJSON_Delete(doc);
            if (r->type == GF_MSG_STATS)
                w->n.stats++;
            else
                w->n.traces++;
        }
        if (bad) {
            failure("%s: %s", what, why);
            w->n.queries_failed++;
        }
        return;
    }
    /* A frame: a RESULT of the right pipeline and length, equal (or within
     * the kind's tolerance) to the reference under one configuration. */
    const soak_pipe *sp = &pipes[r->pipe];
    const uint8_t *got = NULL;
    if (h->pipeline_id != sp->p.id) {
        gf_errorf(why, sizeof why, "RESULT for pipeline %u", h->pipeline_id);
    } else if (r->shm) {
        uint64_t out_offset = (uint64_t)r->shm_slot * SHM_SLOT_BYTES + FRAME_MAX_BYTES;
        if (!rep->shm || rep->shm_result.region_id != w->region.id ||
            rep->shm_result.out_offset != out_offset || rep->shm_result.out_bytes != r->out_bytes)
            gf_errorf(why, sizeof why,
                      "shm RESULT (shm %d) says region %u offset %" PRIu64 " bytes %" PRIu64
                      ", expected %u, %" PRIu64 ", %zu",
                      rep->shm, rep->shm_result.region_id, rep->shm_result.out_offset,
                      rep->shm_result.out_bytes, w->region.id, out_offset, r->out_bytes);
        else
            got = (const uint8_t *)w->region.base + out_offset;
    } else if (rep->shm || rep->payload_bytes != r->out_bytes) {
        gf_errorf(why, sizeof why, "RESULT of %zu bytes (shm %d), expected %zu", rep->payload_bytes,
                  rep->shm, r->out_bytes);
    } else {
        got = r->out_bytes ? rep->payload : (const uint8_t *)"";
    }
    if (got) {
        int set = -1;
        for (unsigned s = 0; s < sp->set_count && set < 0; s++)
            if (r->out_bytes == 0 ||
                gf_pipeline_compare(sp->p.stages[0].kind, got, wb_reference(r, s), r->out_bytes,
                                    why, sizeof why) == 0)
                set = (int)s;
        if (set < 0) {
            /* Say how it differs from the first configuration's result. */
            gf_pipeline_compare(sp->p.stages[0].kind, got, wb_reference(r, 0), r->out_bytes, why,
                                sizeof why);
            got = NULL;
        } else {
            w->n.matched[r->pipe][set]++;
        }
    }
    if (!got) {
        failure("%s: wrong result: %s", what, why);
        w->n.frames_failed++;
        return;
    }
    w->n.frames_answered++;
    w->n.bytes_out += r->out_bytes;
    w->n.pipe_answered[r->pipe]++;
    if (r->shm) {
        w->n.shm_frames++;
        w->n.shm_bytes_in += r->bytes;
        w->n.shm_bytes_out += r->out_bytes;
    }
    double sent_s = (double)(r->sent_ns - t0_ns) / 1e9;
    lat_push(&w->lat[sent_s < t_baseline_end ? PH_BASE : PH_SOAK][size_class(r->bytes)],
             now_ns - r->sent_ns);
}

/* Waits for the reply at the head of the window and checks it.  Returns 0,
 * or -1 when the connection was given up. */
static int wb_recv(wb_client *w) {
    uint64_t began_ms = gf_now_ms();
    for (;;) {
        gf_reply rep;
        int rc = gf_client_recv(w->c, &rep, REPLY_TIMEOUT_MS);
        char what[TEXT_BYTES], why[TEXT_BYTES];
        wb_req *r = &w->fifo[w->head];
        if (rc == -ETIMEDOUT) {
            describe_req(w, r, what, sizeof what);
            uint64_t waited_ms = gf_now_ms() - began_ms;
            failure("%s: no reply after %" PRIu64 " ms (%u in flight)", what, waited_ms, w->count);
            if (waited_ms < STUCK_MS)
                continue;
            wb_lost(w, "given up");
            return -1;
        }
        if (rc < 0) {
            gf_errorf(why, sizeof why, "%s: %s", strerror(-rc), gf_client_error(w->c));
            wb_lost(w, why);
            return -1;
        }
        wb_check(w, r, &rep, gf_now_ns());
        w->head = (w->head + 1) % w->window;
        w->count--;
        if (rep.header.type == GF_MSG_ERROR && gf_status_is_fatal(rep.header.status)) {
            /* The daemon closes after a fatal ERROR: what is in flight fails. */
            gf_errorf(why, sizeof why, "the daemon closed the connection after ERROR %s",
                      gf_status_name(rep.header.status));
            wb_lost(w, why);
            return -1;
        }
        return 0;
    }
}

static void *wb_main(void *arg) {
    wb_client *w = arg;
    int connected = wb_connect(w) == 0;
    for (;;) {
        /* Safe point: nothing in flight. */
        if (ctl_gate() < 0)
            break;
        if (!connected) {
            if (w->c)
                wb_disconnect(w);
            sleep_ms(1000);
            connected = wb_connect(w) == 0;
            continue;
        }
        /* Stream until a pause, a stop, a reconnect or a lost connection. */
        int renew = 0;
        while (connected && !renew && !ctl_wanted()) {
            while (w->count < w->window)
                if (wb_send(w) < 0) {
                    connected = 0;
                    break;
                }
            if (connected && wb_recv(w) < 0)
                connected = 0;
            if (connected && w->have_region && rnd_below(&w->rng, REGION_RENEW_EVERY) == 0)
                renew = 2;
            else if (connected && !w->shm && rnd_below(&w->rng, RECONNECT_EVERY) == 0)
                renew = 1;
        }
        while (connected && w->count > 0)
            if (wb_recv(w) < 0)
                connected = 0;
        if (connected && renew == 2) {
            /* A new region on the same connection: REGION_REMOVE, then ADD. */
            int rc = gf_client_region_destroy(w->c, &w->region, REPLY_TIMEOUT_MS);
            w->have_region = 0;
            if (rc < 0) {
                failure("client %u: REGION_REMOVE: %s: %s", w->index, strerror(-rc),
                        gf_client_error(w->c));
                connected = 0;
                continue;
            }
            w->n.regions_removed++;
            rc = gf_client_region_create(w->c, (uint64_t)SHM_WINDOW * SHM_SLOT_BYTES, &w->region,
                                         REPLY_TIMEOUT_MS);
            if (rc < 0) {
                failure("client %u: region: %s: %s", w->index, strerror(-rc),
                        gf_client_error(w->c));
                connected = 0;
                continue;
            }
            w->have_region = 1;
            w->n.regions_added++;
        } else if (connected && renew == 1 && !ctl_wanted()) {
            wb_disconnect(w);
            w->n.reconnects++;
            connected = wb_connect(w) == 0;
        }
    }
    if (w->c)
        wb_disconnect(w);
    return NULL;
}

/* ---- hostile clients ------------------------------------------------------------- */

typedef struct hostile_client {
    unsigned index;
    pthread_t thread;
    uint64_t rng;
    counts n;
} hostile_client;

static hostile_client *hcs;
static unsigned hostile_count;

/* A blocking connection with send and receive timeouts.  Returns the fd or
 * -1 (reason recorded). */
static int raw_connect(hostile_client *hc) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        failure("hostile %u: socket: %s", hc->index, strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", opt.socket_path);
    struct timeval tv = {.tv_sec = RAW_IO_TIMEOUT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        failure("hostile %u: connect: %s", hc->index, strerror(errno));
        close(fd);
        return -1;
    }
    hc->n.connects++;
    return fd;
}

/* Sends all `len` bytes.  Returns 0 or a negative errno. */
static int raw_send(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int raw_send_header(int fd, const gf_header *h) {
    uint8_t b[GF_HEADER_BYTES];
    gf_header_encode(h, b);
    return raw_send(fd, b, sizeof b);
}

/* Sends the request `h` and `bytes` of its payload from `payload` (all of
 * it, or the part a client sends before it stops or leaves).  Returns 0 or
 * a negative errno. */
static int raw_send_frame(int fd, const gf_header *h, const void *payload, size_t bytes) {
    int rc = raw_send_header(fd, h);
    return rc == 0 ? raw_send(fd, payload, bytes) : rc;
}

/* Receives exactly `len` bytes within `timeout_ms`.  Returns 0, -EPIPE on
 * end of file, -ETIMEDOUT, or a negative errno. */
static int raw_recv(int fd, void *buf, size_t len, int timeout_ms) {
    uint8_t *p = buf;
    uint64_t deadline = gf_now_ms() + (uint64_t)timeout_ms;
    while (len > 0) {
        uint64_t now = gf_now_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - now));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one reply; an ERROR's text goes to text[TEXT_BYTES], other payloads
 * are discarded.  Returns 0 or a negative errno. */
static int raw_reply(int fd, gf_header *h, char *text, int timeout_ms) {
    uint8_t b[GF_HEADER_BYTES];
    int rc = raw_recv(fd, b, sizeof b, timeout_ms);
    if (rc < 0)
        return rc;
    if (gf_header_parse(b, sizeof b, GF_ROLE_CLIENT, UINT64_MAX, h) != GF_HEADER_BYTES)
        return -EPROTO;
    text[0] = '\0';
    uint64_t left = h->payload_bytes;
    while (left > 0) {
        uint8_t chunk[4096];
        size_t n = left < sizeof chunk ? (size_t)left : sizeof chunk;
        if ((rc = raw_recv(fd, chunk, n, timeout_ms)) < 0)
            return rc;
        if (h->type == GF_MSG_ERROR && left == h->payload_bytes) {
            memcpy(text, chunk, n < TEXT_BYTES - 1 ? n : TEXT_BYTES - 1);
            text[n < TEXT_BYTES - 1 ? n : TEXT_BYTES - 1] = '\0';
        }
        left -= n;
    }
    return 0;
}

/* Waits for the daemon to close: end of file or ECONNRESET, discarding
 * bytes.  Returns 0 or -ETIMEDOUT. */
static int raw_expect_close(int fd, int timeout_ms) {
    uint8_t sink[4096];
    for (;;) {
        int rc = raw_recv(fd, sink, 1, timeout_ms);
        if (rc == -EPIPE || rc == -ECONNRESET)
            return 0;
        if (rc < 0)
            return rc;
        (void)!recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    }
}

static gf_header frame_header(uint32_t pipeline_id, uint64_t frame_id, uint64_t bytes) {
    return (gf_header){.version = GF_PROTOCOL_VERSION,
                       .type = GF_MSG_FRAME,
                       .frame_id = frame_id,
                       .pipeline_id = pipeline_id,
                       .payload_bytes = bytes};
}

/* The echo pipeline's id: hostile frames that are valid run there only, so
 * the other pipelines' counters belong to the well-behaved clients. */
static uint32_t echo_id, affine_id;
static int heavy_idx = -1; /* pipes[] index of HEAVY_PIPELINE, or -1 */

static void anomaly(hostile_client *hc, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void anomaly(hostile_client *hc, const char *what, const char *fmt, ...) {
    char text[TEXT_BYTES];
    va_list ap;
    va_start(ap, fmt);
    gf_verrorf(text, sizeof text, fmt, ap);
    va_end(ap);
    hc->n.hostile_anomalies++;
    failure("hostile %u (%s): %s", hc->index, what, text);
}

/* A request begun and not finished, as a client that stops or leaves sends
 * it: kind 0 part of an echo frame's header; 1 the header of a small frame
 * `id` (staged, no slot) and part of its payload; 2 that of a large one
 * (read into a slot).  At least `min_sent` payload bytes go, fewer than
 * the frame's.  Returns 0 or a negative errno. */
static int send_begun(hostile_client *hc, int fd, int kind, uint64_t id, unsigned min_sent) {
    uint64_t bytes = kind == 1 ? min_sent + 1 + rnd_below(&hc->rng, 16384 - min_sent)
                               : 16385 + rnd_below(&hc->rng, FRAME_MAX_BYTES - 16384);
    gf_header h = frame_header(echo_id, id, bytes);
    if (kind == 0) {
        uint8_t b[GF_HEADER_BYTES];
        gf_header_encode(&h, b);
        return raw_send(fd, b, 1 + rnd_below(&hc->rng, GF_HEADER_BYTES - 1));
    }
    return raw_send_frame(fd, &h, pool, min_sent + (size_t)rnd_below(&hc->rng, bytes - min_sent));
}

/* Connects, sends a frame's header and part of its payload (or part of a
 * header), and closes.  kind 0: part of a header; 1: a small payload
 * (staged, no slot); 2: a large one (read into a slot: truncated). */
static void attack_disconnect(hostile_client *hc, int kind) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    int rc = send_begun(hc, fd, kind, rnd(&hc->rng), 0);
    close(fd);
    if (rc < 0) {
        anomaly(hc, "disconnect", "send: %s", strerror(-rc));
        return;
    }
    if (kind == 0)
        hc->n.disc_header++;
    else if (kind == 1)
        hc->n.disc_small++;
    else
        hc->n.disc_large++;
}

/* Sends `frames` whole echo frames of min_bytes + [0, span) bytes on `fd`
 * and reads no reply, counting them whole frames (received, then answered
 * or dropped: check_stats).  Returns 0, or -1 after an anomaly `what`. */
static int send_whole(hostile_client *hc, int fd, unsigned frames, size_t min_bytes, size_t span,
                      const char *what) {
    for (unsigned i = 0; i < frames; i++) {
        size_t bytes = min_bytes + (size_t)rnd_below(&hc->rng, span);
        gf_header h = frame_header(echo_id, i, bytes);
        int rc = raw_send_frame(fd, &h, pool, bytes);
        if (rc == -EPIPE || rc == -ECONNRESET) {
            /* It does not read: its first reply can block while later
             * frames wait for slots, and write_timeout_ms cuts it. */
            hc->n.whole_cut++;
            return 0;
        }
        if (rc < 0) {
            anomaly(hc, what, "send: %s", strerror(-rc));
            return -1;
        }
        hc->n.whole_frames++;
        hc->n.whole_bytes += bytes;
    }
    return 0;
}

/* Sends 1..4 whole echo frames and closes without reading a reply. */
static void attack_whole_then_close(hostile_client *hc) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    (void)send_whole(hc, fd, 1 + (unsigned)rnd_below(&hc->rng, 4), 4096, 256u << 10,
                     "whole frames");
    close(fd);
}

/* One to four bad requests on one connection, each answered by the ERROR
 * its status names; a fatal one ends the connection. */
static void attack_bad_requests(hostile_client *hc) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    unsigned n = 1 + (unsigned)rnd_below(&hc->rng, 4);
    for (unsigned i = 0; i < n; i++) {
        uint64_t id = rnd(&hc->rng) >> 1;
        gf_header h = frame_header(echo_id, id, 0);
        uint32_t want;
        size_t payload = 0;
        int corrupt_magic = 0, list_payload = 0;
        switch (rnd_below(&hc->rng, i + 1 < n ? 2 : 9)) {
        case 0: /* non-fatal: no such pipeline, with a payload to skip */
            h.pipeline_id = pipe_count + (uint32_t)rnd_below(&hc->rng, 1000);
            h.payload_bytes = payload = (size_t)rnd_below(&hc->rng, 64u << 10);
            want = GF_ERR_UNKNOWN_PIPELINE;
            break;
        case 1: /* non-fatal: float32 pipeline, length not a multiple of 4 */
            h.pipeline_id = affine_id;
            h.payload_bytes = payload =
                4 * (size_t)rnd_below(&hc->rng, 256u << 10) + 1 + (size_t)rnd_below(&hc->rng, 3);
            want = GF_ERR_BAD_LENGTH;
            break;
        case 2:
            corrupt_magic = 1;
            want = GF_ERR_BAD_MAGIC;
            break;
        case 3:
            h.version = 9;
            want = GF_ERR_BAD_VERSION;
            break;
        case 4:
            h.type = GF_MSG_RESULT;
            want = GF_ERR_BAD_TYPE;
            break;
        case 5:
            h.flags = 0x8000;
            want = GF_ERR_BAD_FLAGS;
            break;
        case 6:
            h.type = GF_MSG_LIST;
            h.status = 3;
            want = GF_ERR_BAD_FLAGS;
            break;
        case 7:
            h.payload_bytes = opt.max_frame_bytes + 1 + rnd_below(&hc->rng, 1u << 30);
            want = GF_ERR_TOO_LARGE;
            break;
        default: /* a LIST with a payload: bad_length, and the connection closes */
            h.type = GF_MSG_LIST;
            h.pipeline_id = 0;
            h.payload_bytes = 1 + rnd_below(&hc->rng, 100);
            want = GF_ERR_BAD_LENGTH;
            list_payload = 1;
            break;
        }
        uint8_t b[GF_HEADER_BYTES];
        gf_header_encode(&h, b);
        if (corrupt_magic)
            b[rnd_below(&hc->rng, 4)] ^= 0x20;
        int rc = raw_send(fd, b, sizeof b);
        if (rc == 0 && payload)
            rc = raw_send(fd, pool, payload);
        /* The daemon may close before a fatal request's payload: EPIPE is
         * fine, the ERROR is still there to read. */
        if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET) {
            anomaly(hc, "bad request", "send: %s", strerror(-rc));
            break;
        }
        gf_header got;
        char text[TEXT_BYTES];
        rc = raw_reply(fd, &got, text, RAW_IO_TIMEOUT_MS);
        if (rc < 0) {
            anomaly(hc, "bad request", "no ERROR %s for the request: %s", gf_status_name(want),
                    strerror(-rc));
            break;
        }
        if (got.type != GF_MSG_ERROR || got.status != want ||
            (!corrupt_magic && got.frame_id != id)) {
            anomaly(hc, "bad request",
                    "expected ERROR %s for frame_id %" PRIu64
                    ", got type %u status %s frame_id %" PRIu64 ": %s",
                    gf_status_name(want), id, got.type, gf_status_name(got.status), got.frame_id,
                    text);
            break;
        }
        hc->n.bad[want]++;
        if (want == GF_ERR_BAD_LENGTH && !list_payload)
            hc->n.bad_length_frame++;
        if (list_payload)
            hc->n.bad_length_fatal++;
        if (gf_status_is_fatal(want) || list_payload) {
            if (raw_expect_close(fd, RAW_IO_TIMEOUT_MS) < 0)
                anomaly(hc, "bad request", "still open after ERROR %s", gf_status_name(want));
            break;
        }
    }
    close(fd);
}

/* Begins a request and stops: kind 0 mid-header, 1 mid small payload, 2
 * mid large payload (holding a slot).  The daemon must answer
 * request_timeout and close. */
static void attack_stall(hostile_client *hc, int kind) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    uint64_t id = rnd(&hc->rng) >> 1;
    /* At least one payload byte: a stall, not a frame that is all there. */
    int rc = send_begun(hc, fd, kind, id, 1);
    if (rc < 0) {
        anomaly(hc, "stall", "send: %s", strerror(-rc));
        close(fd);
        return;
    }
    uint64_t stalled_ms = gf_now_ms();
    gf_header got;
    char text[TEXT_BYTES];
    int wait_ms = CUT_WAIT_DEADLINES * (int)opt.request_timeout_ms;
    rc = raw_reply(fd, &got, text, wait_ms);
    uint64_t cut_ms = gf_now_ms() - stalled_ms;
    static const char *const what[] = {"stall mid-header", "stall mid small payload",
                                       "stall mid large payload"};
    if (rc < 0) {
        anomaly(hc, what[kind], "no request_timeout within %d ms: %s", wait_ms, strerror(-rc));
    } else if (got.type != GF_MSG_ERROR || got.status != GF_ERR_REQUEST_TIMEOUT ||
               got.frame_id != (kind == 2 ? id : 0)) {
        anomaly(hc, what[kind],
                "expected ERROR request_timeout for frame_id %" PRIu64
                ", got type %u status %s frame_id %" PRIu64 ": %s",
                kind == 2 ? id : 0, got.type, gf_status_name(got.status), got.frame_id, text);
    } else if (raw_expect_close(fd, RAW_IO_TIMEOUT_MS) < 0) {
        anomaly(hc, what[kind], "still open after request_timeout");
    } else {
        hc->n.stall_cut[kind]++;
        /* A large payload cut while it waited for a slot was never taken:
         * its ERROR names no bytes of the frame (daemon/conn_io.c). */
        if (kind == 2 && strstr(text, " payload bytes of frame ") == NULL)
            hc->n.stall_cut_waiting++;
        hc->n.bad[GF_ERR_REQUEST_TIMEOUT]++;
        if (cut_ms > hc->n.stall_cut_max_ms[kind])
            hc->n.stall_cut_max_ms[kind] = cut_ms;
    }
    close(fd);
}

/* Waits, without reading, until the daemon closes the connection.
 * Returns the ms waited, or -1 when it did not within `timeout_ms`. */
static int64_t wait_hangup(int fd, int timeout_ms) {
    uint64_t began = gf_now_ms();
    for (;;) {
        uint64_t waited = gf_now_ms() - began;
        if (waited >= (uint64_t)timeout_ms)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
        int pr = poll(&pfd, 1, timeout_ms - (int)waited);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return (int64_t)(gf_now_ms() - began);
        if (pr == 0)
            return -1;
    }
}

/* Sends requests whose replies cannot fit the socket and never reads:
 * kind 0 one 4 MiB echo frame, kind 1 a flood of TRACE requests.  The
 * daemon must close it after write_timeout_ms. */
static void attack_noread(hostile_client *hc, int kind) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    int rc = 0;
    unsigned traces = 0;
    if (kind == 0) {
        gf_header h = frame_header(echo_id, 1, FRAME_MAX_BYTES);
        rc = raw_send_frame(fd, &h, pool, FRAME_MAX_BYTES);
    } else {
        /* Half of them within the daemon's cap on unwritten replies, half
         * past it, which leaves whole requests unread in its buffer. */
        traces =
            DAEMON_LOOSE_REPLY_CAP / 2 + (unsigned)rnd_below(&hc->rng, DAEMON_LOOSE_REPLY_CAP + 1);
        for (unsigned i = 0; i < traces && rc == 0; i++) {
            gf_header h = {.version = GF_PROTOCOL_VERSION, .type = GF_MSG_TRACE, .frame_id = i};
            rc = raw_send_header(fd, &h);
        }
        hc->n.trace_flood_sent += traces;
    }
    if (rc < 0) {
        anomaly(hc, kind ? "no-read TRACE flood" : "no-read frame", "send: %s", strerror(-rc));
        close(fd);
        return;
    }
    int wait_ms = CUT_WAIT_DEADLINES * (int)opt.write_timeout_ms;
    int64_t cut_ms = wait_hangup(fd, wait_ms);
    if (cut_ms < 0) {
        anomaly(hc, kind ? "no-read TRACE flood" : "no-read frame",
                "not closed by the daemon within %d ms", wait_ms);
    } else if (kind == 0) {
        hc->n.noread_frame_cut++;
        hc->n.noread_frame_bytes += FRAME_MAX_BYTES;
    } else {
        hc->n.floods_cut++;
        hc->n.floods_over_cap += traces > DAEMON_LOOSE_REPLY_CAP;
    }
    if (cut_ms > (int64_t)hc->n.noread_cut_max_ms)
        hc->n.noread_cut_max_ms = (uint64_t)cut_ms;
    close(fd);
}

/* ---- issue 31's hostile kinds ------------------------------------------------------ */

/* Closers: a burst of connections, each announcing a payload larger than
 * the daemon stages, sending part of it and closing at once.  Each is a
 * large disconnect: received and truncated, also when its frame waited
 * for a slot (the daemon sees the hang-up then too). */
#define CLOSER_BURST           20
#define CLOSER_ANNOUNCED_BYTES 100000
#define CLOSER_SENT_BYTES      1000
static void attack_closers(hostile_client *hc) {
    for (unsigned i = 0; i < CLOSER_BURST; i++) {
        int fd = raw_connect(hc);
        if (fd < 0)
            return;
        gf_header h = frame_header(echo_id, rnd(&hc->rng), CLOSER_ANNOUNCED_BYTES);
        int rc = raw_send_frame(fd, &h, pool, CLOSER_SENT_BYTES);
        close(fd);
        if (rc < 0) {
            anomaly(hc, "closer", "send: %s", strerror(-rc));
            return;
        }
        hc->n.disc_large++;
        hc->n.closers++;
    }
}

/* Tricklers: a 1 MiB payload sent 1 KiB every 0.9 s, or 16 bytes every
 * 0.5 s: never stalled, never complete.  It must hold no slot (it moves to
 * memory) and be cut by request_timeout_ms like a stall. */
#define TRICKLE_ANNOUNCED_BYTES (1u << 20)
static void attack_trickle(hostile_client *hc) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    int slow = rnd_below(&hc->rng, 2) == 0;
    size_t chunk = slow ? 16 : 1024;
    int period_ms = slow ? 500 : 900;
    uint64_t id = rnd(&hc->rng) >> 1;
    gf_header h = frame_header(echo_id, id, TRICKLE_ANNOUNCED_BYTES);
    int rc = raw_send_header(fd, &h);
    uint64_t began = gf_now_ms(), give_up = began + CUT_WAIT_DEADLINES * opt.request_timeout_ms;
    size_t sent = 0;
    /* A chunk, then the period or the daemon's reply, whichever comes
     * first; a send the daemon refuses (it cut us) ends the trickle. */
    while (rc == 0 && gf_now_ms() < give_up && sent + chunk < TRICKLE_ANNOUNCED_BYTES) {
        if (raw_send(fd, pool + sent, chunk) < 0)
            break;
        sent += chunk;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, period_ms) > 0)
            break;
    }
    if (rc < 0) {
        anomaly(hc, "trickle", "send: %s", strerror(-rc));
        close(fd);
        return;
    }
    gf_header got;
    char text[TEXT_BYTES];
    uint64_t now = gf_now_ms();
    rc = raw_reply(fd, &got, text, now < give_up ? (int)(give_up - now) : 1);
    uint64_t cut_ms = gf_now_ms() - began;
    if (rc < 0) {
        anomaly(hc, "trickle", "no request_timeout within %" PRIu64 " ms: %s", give_up - began,
                strerror(-rc));
    } else if (got.type != GF_MSG_ERROR || got.status != GF_ERR_REQUEST_TIMEOUT ||
               got.frame_id != id) {
        anomaly(hc, "trickle",
                "expected ERROR request_timeout for frame_id %" PRIu64
                ", got type %u status %s frame_id %" PRIu64 ": %s",
                id, got.type, gf_status_name(got.status), got.frame_id, text);
    } else if (raw_expect_close(fd, RAW_IO_TIMEOUT_MS) < 0) {
        anomaly(hc, "trickle", "still open after request_timeout");
    } else {
        /* Counted as a large stall: request_timeout, once taken failed. */
        hc->n.stall_cut[2]++;
        hc->n.trickles_cut++;
        if (strstr(text, " payload bytes of frame ") == NULL)
            hc->n.stall_cut_waiting++;
        hc->n.bad[GF_ERR_REQUEST_TIMEOUT]++;
        if (cut_ms > hc->n.stall_cut_max_ms[2])
            hc->n.stall_cut_max_ms[2] = cut_ms;
    }
    close(fd);
}

/* A non-reader in shared batches: small echo frames, which share batches
 * with the well-behaved clients' echo frames, sent and never read.  Its
 * results must leave the slots as soon as another client waits; the daemon
 * closes it after write_timeout_ms.  Its frames are counted like whole
 * frames sent before a close: received, then answered or dropped. */
#define NOREAD_SHARED_FRAMES 64
static void attack_noread_shared(hostile_client *hc) {
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    if (send_whole(hc, fd, NOREAD_SHARED_FRAMES, 12u << 10, 4u << 10, "no-read shared") < 0) {
        close(fd);
        return;
    }
    int wait_ms = CUT_WAIT_DEADLINES * (int)opt.write_timeout_ms;
    int64_t cut_ms = wait_hangup(fd, wait_ms);
    if (cut_ms < 0)
        anomaly(hc, "no-read shared", "not closed by the daemon within %d ms", wait_ms);
    else
        hc->n.noread_shared_cut++;
    if (cut_ms > (int64_t)hc->n.noread_cut_max_ms)
        hc->n.noread_cut_max_ms = (uint64_t)cut_ms;
    close(fd);
}

/* Heavy batches: 40 frames of the heavy pipeline at once, as a client of a
 * heavy model would send them, every result read as it comes and checked.
 * The daemon bounds its batches by the pipeline's measured cost, so the
 * well-behaved clients wait about one heavy frame, not a batch. */
#define HEAVY_FRAMES 40
static void attack_heavy(hostile_client *hc) {
    const soak_pipe *sp = &pipes[heavy_idx];
    int fd = raw_connect(hc);
    if (fd < 0)
        return;
    size_t offs[HEAVY_FRAMES];
    unsigned sent = 0, got = 0;
    uint8_t *out = malloc(opt.heavy_bytes);
    int ok = out != NULL;
    /* Each frame is a slice of the pool's heavy span; each reply is checked
     * against the reference of its slice. */
    while (ok && got < HEAVY_FRAMES) {
        if (sent < HEAVY_FRAMES) {
            offs[sent] = (size_t)rnd_below(&hc->rng, (heavy_span() - opt.heavy_bytes) / 4 + 1) * 4;
            gf_header h = frame_header(sp->p.id, sent, opt.heavy_bytes);
            int rc = raw_send_frame(fd, &h, pool + offs[sent], opt.heavy_bytes);
            if (rc < 0) {
                anomaly(hc, "heavy", "send frame %u: %s", sent, strerror(-rc));
                ok = 0;
                break;
            }
            hc->n.frames_sent++;
            hc->n.bytes_in += opt.heavy_bytes;
            sent++;
            /* Replies as they come, between sends; then the rest. */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            if (poll(&pfd, 1, 0) <= 0)
                continue;
        }
        uint8_t b[GF_HEADER_BYTES];
        gf_header h;
        int rc = raw_recv(fd, b, sizeof b, REPLY_TIMEOUT_MS);
        if (rc == 0 &&
            gf_header_parse(b, sizeof b, GF_ROLE_CLIENT, UINT64_MAX, &h) != GF_HEADER_BYTES)
            rc = -EPROTO;
        if (rc == 0 &&
            (h.type != GF_MSG_RESULT || h.frame_id != got || h.payload_bytes != opt.heavy_bytes))
            rc = -EBADMSG;
        if (rc == 0)
            rc = raw_recv(fd, out, opt.heavy_bytes, REPLY_TIMEOUT_MS);
        char why[TEXT_BYTES] = "";
        if (rc == 0 && gf_pipeline_compare(sp->p.stages[0].kind, out, sp->ref[0][0] + offs[got],
                                           opt.heavy_bytes, why, sizeof why) != 0)
            rc = -EDOM;
        if (rc < 0) {
            anomaly(hc, "heavy", "frame %u: %s%s%s", got, strerror(-rc), why[0] ? ": " : "", why);
            ok = 0;
            break;
        }
        hc->n.frames_answered++;
        hc->n.bytes_out += opt.heavy_bytes;
        hc->n.pipe_answered[heavy_idx]++;
        hc->n.matched[heavy_idx][0]++;
        hc->n.heavy_frames++;
        got++;
    }
    /* A heavy attack that went wrong is an anomaly, which fails the soak. */
    free(out);
    close(fd);
}

/* The attacks and their weights: those that hold a slot for a deadline
 * (a large stalled payload, a frame never read) are rare, so the slots
 * mostly serve the well-behaved clients (docs/design.md, "What a client gets whatever others do": a
 * per-connection share is still to come). */
enum {
    A_DISC_HEADER,
    A_DISC_SMALL,
    A_DISC_LARGE,
    A_WHOLE,
    A_BAD,
    A_STALL_HEADER,
    A_STALL_SMALL,
    A_STALL_LARGE,
    A_NOREAD_FRAME,
    A_NOREAD_TRACE,
    A_CLOSERS,
    A_TRICKLE,
    A_NOREAD_SHARED,
    A_HEAVY,
    A_COUNT
};
static const unsigned attack_weight[A_COUNT] = {6, 8, 8, 10, 30, 5, 6, 2, 2, 2, 2, 2, 2, 2};
/* The kinds the summary requires to have happened (stalls of each size,
 * never-readers of each kind, issue 31's four): the hostile clients do
 * these first, client k from the k-th share of the list on, so that
 * together they have done each within a few attacks even in a short run
 * with long deadlines (CI's minute under the sanitizers). */
static const unsigned first_attacks[] = {A_STALL_HEADER, A_CLOSERS,     A_STALL_SMALL,
                                         A_TRICKLE,      A_STALL_LARGE, A_NOREAD_SHARED,
                                         A_NOREAD_FRAME, A_HEAVY,       A_NOREAD_TRACE};
#define FIRST_ATTACKS (sizeof first_attacks / sizeof first_attacks[0])
/* Pause between two attacks of one hostile client, ms. */
#define ATTACK_PAUSE_MIN_MS 200
#define ATTACK_PAUSE_MAX_MS 1200

/* The attack kinds done so far, a bit each (1 << A_...), by any hostile
 * client: the main thread's wait_first_attacks reads it. */
static atomic_uint kinds_done;

static void *hostile_main(void *arg) {
    hostile_client *hc = arg;
    unsigned total = 0;
    for (unsigned a = 0; a < A_COUNT; a++)
        total += attack_weight[a];
    /* Quiet until the baseline phase is over. */
    while (since_start_s() < t_baseline_end) {
        if (ctl_gate() < 0)
            return NULL;
        ctl_sleep_ms(100);
    }
    for (;;) {
        if (ctl_gate() < 0)
            break;
        unsigned a = 0;
        if (hc->n.attacks < FIRST_ATTACKS) {
            size_t from = hc->index * FIRST_ATTACKS / (hostile_count ? hostile_count : 1);
            a = first_attacks[(hc->n.attacks + from) % FIRST_ATTACKS];
        } else {
            unsigned x = (unsigned)rnd_below(&hc->rng, total);
            while (x >= attack_weight[a])
                x -= attack_weight[a++];
        }
        switch (a) {
        case A_DISC_HEADER: attack_disconnect(hc, 0); break;
        case A_DISC_SMALL: attack_disconnect(hc, 1); break;
        case A_DISC_LARGE: attack_disconnect(hc, 2); break;
        case A_WHOLE: attack_whole_then_close(hc); break;
        case A_BAD: attack_bad_requests(hc); break;
        case A_STALL_HEADER: attack_stall(hc, 0); break;
        case A_STALL_SMALL: attack_stall(hc, 1); break;
        case A_STALL_LARGE: attack_stall(hc, 2); break;
        case A_NOREAD_FRAME: attack_noread(hc, 0); break;
        case A_NOREAD_TRACE: attack_noread(hc, 1); break;
        case A_CLOSERS: attack_closers(hc); break;
        case A_TRICKLE: attack_trickle(hc); break;
        case A_NOREAD_SHARED: attack_noread_shared(hc); break;
        default:
            if (heavy_idx >= 0)
                attack_heavy(hc);
            else
                attack_closers(hc);
            break;
        }
        hc->n.attacks++;
        atomic_fetch_or(&kinds_done, 1u << a);
        ctl_sleep_ms(ATTACK_PAUSE_MIN_MS +
                     (unsigned)rnd_below(&hc->rng, ATTACK_PAUSE_MAX_MS - ATTACK_PAUSE_MIN_MS));
    }
    return NULL;
}

/* The main thread, before the last checkpoint: waits until the hostile
 * clients together have done every kind of first_attacks, which the
 * summary requires, at most FIRST_ATTACKS_WAIT_S more.  On a loaded
 * machine two clients had done ten attacks in a 20 s run, the TRACE flood
 * not among them. */
#define FIRST_ATTACKS_WAIT_S 60
static void wait_first_attacks(void) {
    unsigned want = 0;
    for (size_t i = 0; i < FIRST_ATTACKS; i++)
        want |= 1u << first_attacks[i];
    if (hostile_count == 0)
        return;
    double until = since_start_s() + FIRST_ATTACKS_WAIT_S;
    while ((atomic_load(&kinds_done) & want) != want && since_start_s() < until)
        sleep_ms(100);
}

/* ---- the monitor: STATS, /proc, checkpoints ------------------------------------- */

static gf_client *mon;
static counts mon_n;

/* STATS on the monitor's connection, parsed.  NULL on failure (recorded). */
static cJSON *stats_now(void) {
    char *json = NULL;
    int rc = gf_client_request_json(mon, GF_MSG_STATS, &json, REPLY_TIMEOUT_MS);
    if (rc < 0) {
        failure("monitor: STATS: %s: %s", strerror(-rc), gf_client_error(mon));
        return NULL;
    }
    mon_n.stats++;
    cJSON *doc = cJSON_Parse(json);
    free(json);
    if (!doc)
        failure("monitor: STATS does not parse");
    return doc;
}

/* The number at the dotted path `path` of `root`, or UINT64_MAX. */
static uint64_t jnum(const cJSON *root, const char *path) {
    char key[64];
    const cJSON *node = root;
    while (node && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key)
            return UINT64_MAX;
        memcpy(key, path, n);
        key[n] = '\0';
        node = cJSON_GetObjectItemCaseSensitive(node, key);
        path += n + (path[n] == '.');
    }
    return cJSON_IsNumber(node) ? (uint64_t)node->valuedouble : UINT64_MAX;
}

/* The daemon's resident memory (kB) and open fds, from /proc. */
typedef struct proc_sample {
    uint64_t rss_kb, anon_kb, shmem_kb, fds;
} proc_sample;

static int proc_read(proc_sample *s) {
    char path[64], line[256];
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "/proc/%ld/status", opt.pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    while (fgets(line, sizeof line, fp)) {
        unsigned long long v;
        if (sscanf(line, "VmRSS: %llu", &v) == 1)
            s->rss_kb = v;
        else if (sscanf(line, "RssAnon: %llu", &v) == 1)
            s->anon_kb = v;
        else if (sscanf(line, "RssShmem: %llu", &v) == 1)
            s->shmem_kb = v;
    }
    fclose(fp);
    snprintf(path, sizeof path, "/proc/%ld/fd", opt.pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        s->fds += e->d_name[0] != '.';
    closedir(d);
    return 0;
}

/* Sums every client's counts (all paused or finished); the *_max_ms fields
 * become maxima.  counts is all uint64_t, so it is summed word by word. */
static void sum_counts(counts *t) {
    memset(t, 0, sizeof *t);
    unsigned all = wb_count + hostile_count + 1;
    for (unsigned k = 0; k < all; k++) {
        const counts *c = k < wb_count                   ? &wbs[k].n
                          : k < wb_count + hostile_count ? &hcs[k - wb_count].n
                                                         : &mon_n;
        const uint64_t *src = (const uint64_t *)c;
        uint64_t *dst = (uint64_t *)t;
        for (size_t i = 0; i < sizeof *t / sizeof(uint64_t); i++)
            dst[i] += src[i];
    }
    t->noread_cut_max_ms = 0;
    for (unsigned i = 0; i < 3; i++)
        t->stall_cut_max_ms[i] = 0;
    for (unsigned k = 0; k < hostile_count; k++) {
        for (unsigned i = 0; i < 3; i++)
            if (hcs[k].n.stall_cut_max_ms[i] > t->stall_cut_max_ms[i])
                t->stall_cut_max_ms[i] = hcs[k].n.stall_cut_max_ms[i];
        if (hcs[k].n.noread_cut_max_ms > t->noread_cut_max_ms)
            t->noread_cut_max_ms = hcs[k].n.noread_cut_max_ms;
    }
}

/* ---- the summary table ---------------------------------------------------------- */

#define MAX_ROWS 160
typedef struct row {
    char name[64];
    char value[96];
    char expect[96];
    int result; /* 1 ok, 0 FAIL, -1 information */
} row;
static row rows[MAX_ROWS];
static unsigned row_count;

__attribute__((format(printf, 4, 5))) static void
add_row(int result, const char *name, const char *value, const char *expect_fmt, ...) {
    if (row_count == MAX_ROWS)
        return;
    row *r = &rows[row_count++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->value, sizeof r->value, "%s", value);
    va_list ap;
    va_start(ap, expect_fmt);
    vsnprintf(r->expect, sizeof r->expect, expect_fmt, ap);
    va_end(ap);
    r->result = result;
}

/*
 * One relation between a daemon counter and the clients' counts.  With
 * `table` it becomes a row; otherwise only a failure names it.  `rel` is
 * '=' (equal), '>' (at least lo), or '[' (within [lo, hi]).
 */
static int relate(int table, const char *when, const char *name, uint64_t got, char rel,
                  uint64_t lo, uint64_t hi, const char *why) {
    int ok = rel == '=' ? got == lo : rel == '>' ? got >= lo : got >= lo && got <= hi;
    char value[96];
    snprintf(value, sizeof value, "%" PRIu64, got);
    if (table) {
        if (rel == '=')
            add_row(ok, name, value, "= %" PRIu64 " %s", lo, why);
        else if (rel == '>')
            add_row(ok, name, value, ">= %" PRIu64 " %s", lo, why);
        else
            add_row(ok, name, value, "in [%" PRIu64 ", %" PRIu64 "] %s", lo, hi, why);
    }
    if (!ok)
        failure("%s: daemon %s = %" PRIu64 ", expected %c %" PRIu64 " (%" PRIu64 ") %s", when, name,
                got, rel, lo, hi, why);
    return ok;
}

/*
 * The daemon's STATS against the clients' counts `t`, with every client
 * paused at a safe point or gone, and the daemon idle.  `open` is the
 * number of connections that must be open, `regions` of regions.
 */
static void check_stats(const cJSON *st, const counts *t, unsigned open, unsigned regions,
                        const char *when, int table) {
    /* Exactly known: every frame a well-behaved client sent (answered or
     * failed), the never-read frame of each client cut by write_timeout
     * (read whole, never written whole: dropped), bad frames (failed),
     * large stalls (failed by request_timeout) and large disconnects
     * (truncated).  Known only as a range: the whole frames a hostile client
     * sent before closing without reading, U of them received, 0 <= U <=
     * whole_frames: once the daemon fails to write a reply to the closed
     * peer it closes too, and frames still in its socket are never read. */
    uint64_t wb_frames = t->frames_answered + t->frames_failed;
    uint64_t h_bad_frames = t->bad[GF_ERR_UNKNOWN_PIPELINE] + t->bad_length_frame;
    uint64_t h_fatal = t->bad[GF_ERR_BAD_MAGIC] + t->bad[GF_ERR_BAD_VERSION] +
                       t->bad[GF_ERR_BAD_TYPE] + t->bad[GF_ERR_BAD_FLAGS] +
                       t->bad[GF_ERR_TOO_LARGE];
    uint64_t stalls = t->stall_cut[0] + t->stall_cut[1] + t->stall_cut[2];
    uint64_t received = jnum(st, "frames.received"), answered = jnum(st, "frames.answered"),
             failed = jnum(st, "frames.failed"), dropped = jnum(st, "frames.dropped"),
             truncated = jnum(st, "frames.truncated");
    /* A large stall cut while it waited for a slot was never received.  A
     * large disconnect (a closer's too) is received and truncated, or, when
     * it closed while its frame waited for a slot, never received: the
     * daemon sees the hang-up and counts the connection in
     * closed_while_waiting (W of them).  (A daemon that did not see it cut
     * it later by request_timeout, unseen: D of them, 0 <= D <= disc_large,
     * each one request_timeout more than the hostile clients read.) */
    uint64_t stalls_taken = t->stall_cut[2] - t->stall_cut_waiting;
    uint64_t unseen = jnum(cJSON_GetObjectItemCaseSensitive(st, "rejected"), "request_timeout") -
                      t->bad[GF_ERR_REQUEST_TIMEOUT];
    uint64_t gone = jnum(st, "connections.closed_while_waiting");
    uint64_t disc_taken = t->disc_large - gone;
    uint64_t known = wb_frames + t->noread_frame_cut + h_bad_frames + stalls_taken + disc_taken;

    /* A frame cut mid-send (whole_cut) may have been received and truncated. */
    relate(table, when, "request_timeouts unseen (large disconnects cut waiting)", unseen, '[', 0,
           t->disc_large, "");
    relate(table, when, "connections.closed_while_waiting", gone, '[', 0, t->disc_large - unseen,
           "large disconnects that hung up waiting for a slot");
    relate(table, when, "frames.received", received, '[', known - unseen,
           known - unseen + t->whole_frames + t->whole_cut,
           "wb + never-read + bad + large stalls/disconnects taken, + some whole");
    relate(table, when, "frames: received - all outcomes",
           received - answered - failed - dropped - truncated, '=', 0, 0,
           "nothing in progress, nothing unaccounted");
    relate(table, when, "frames.answered", answered, '[', t->frames_answered,
           t->frames_answered + t->whole_frames, "wb answered, + some hostile whole");
    relate(table, when, "frames.dropped", dropped, '[', t->noread_frame_cut,
           t->noread_frame_cut + t->whole_frames, "never-read frames, + some hostile whole");
    relate(table, when, "frames.failed", failed, '=',
           t->frames_failed + h_bad_frames + stalls_taken, 0,
           "wb failed + bad frames + large stalls cut once taken");
    relate(table, when, "frames.truncated", truncated, '[', disc_taken - unseen,
           disc_taken - unseen + t->whole_frames + t->whole_cut,
           "large disconnects taken, + some whole (EPIPE close)");
    relate(table, when, "frames.in_progress", jnum(st, "frames.in_progress"), '=', 0, 0,
           "all quiet");
    relate(table, when, "bytes.in", jnum(st, "bytes.in"), '[', t->bytes_in + t->noread_frame_bytes,
           t->bytes_in + t->noread_frame_bytes + t->whole_bytes, "wb + never-read, + some whole");
    relate(table, when, "bytes.out", jnum(st, "bytes.out"), '[', t->bytes_out,
           t->bytes_out + t->whole_bytes, "wb outputs, + some hostile echo");
    relate(table, when, "shm.frames", jnum(st, "shm.frames"), '=', t->shm_frames, 0,
           "wb by reference");
    relate(table, when, "shm.bytes_in", jnum(st, "shm.bytes_in"), '=', t->shm_bytes_in, 0, "");
    relate(table, when, "shm.bytes_out", jnum(st, "shm.bytes_out"), '=', t->shm_bytes_out, 0, "");
    relate(table, when, "shm.regions_added", jnum(st, "shm.regions_added"), '=', t->regions_added,
           0, "");
    relate(table, when, "shm.regions_removed", jnum(st, "shm.regions_removed"), '=',
           t->regions_removed, 0, "");
    relate(table, when, "shm.regions_open", jnum(st, "shm.regions_open"), '=', regions, 0, "");
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(st, "pipelines");
    for (unsigned i = 0; i < pipe_count; i++) {
        char name[96];
        snprintf(name, sizeof name, "pipelines[%s].frames", pipes[i].p.name);
        uint64_t got = jnum(cJSON_GetArrayItem(pl, (int)pipes[i].p.id), "frames");
        if (pipes[i].p.id == echo_id)
            relate(table, when, name, got, '[', t->pipe_answered[i],
                   t->pipe_answered[i] + t->whole_frames, "wb + some hostile");
        else
            relate(table, when, name, got, '=', t->pipe_answered[i], 0, "wb answered");
    }
    relate(table, when, "requests.list", jnum(st, "requests.list"), '=', t->lists, 0, "");
    relate(table, when, "requests.stats", jnum(st, "requests.stats"), '=', t->stats, 0,
           "wb + monitor");
    relate(table, when, "requests.trace", jnum(st, "requests.trace"), '[', t->traces,
           t->traces + t->trace_flood_sent, "wb + some of the floods' requests");
    static const uint32_t hostile_statuses[] = {
        GF_ERR_BAD_MAGIC, GF_ERR_BAD_VERSION,      GF_ERR_BAD_TYPE,   GF_ERR_BAD_FLAGS,
        GF_ERR_TOO_LARGE, GF_ERR_UNKNOWN_PIPELINE, GF_ERR_BAD_LENGTH, GF_ERR_REQUEST_TIMEOUT};
    for (uint32_t s = 1; s < GF_STATUS_COUNT_; s++) {
        char name[96];
        snprintf(name, sizeof name, "rejected.%s", gf_status_name(s));
        int hostile = 0;
        for (size_t k = 0; k < sizeof hostile_statuses / sizeof *hostile_statuses; k++)
            hostile |= hostile_statuses[k] == s;
        uint64_t want = hostile ? t->bad[s] : 0;
        if (s == GF_ERR_REQUEST_TIMEOUT)
            want += unseen; /* bounded above */
        relate(table, when, name,
               jnum(cJSON_GetObjectItemCaseSensitive(st, "rejected"), gf_status_name(s)), '=', want,
               0, hostile ? "ERRORs hostile clients read" : "");
    }
    relate(table, when, "connections.total", jnum(st, "connections.total"), '=', t->connects, 0,
           "every connect of the soak");
    relate(table, when, "connections.open", jnum(st, "connections.open"), '=', open, 0, "");
    /* Documented: request_timeout cuts a client that stopped in the middle
     * of a request, receive_stall one whose payload into a slot stopped while
     * others waited for one, write_timeout one that stopped reading
     * (docs/design.md, "What a client gets whatever others do"); each close is
     * counted once, by one. */
    relate(table, when, "connections.closed_request_timeout + closed_receive_stall",
           jnum(st, "connections.closed_request_timeout") +
               jnum(st, "connections.closed_receive_stall"),
           '=', stalls + unseen, 0, "stalls cut, + large disconnects cut waiting");
    relate(table, when, "connections.closed_write_timeout",
           jnum(st, "connections.closed_write_timeout"), '[',
           t->noread_frame_cut + t->floods_cut + t->noread_shared_cut,
           t->noread_frame_cut + t->floods_cut + t->noread_shared_cut + t->whole_cut,
           "never-read frames (large, shared) + floods, + whole-frame senders cut mid-send");
    /* A LIST with a payload gets bad_length and is closed: counted too. */
    relate(table, when, "connections.rejected", jnum(st, "connections.rejected"), '=',
           h_fatal + stalls + unseen + t->bad_length_fatal, 0,
           "fatal header errors + stalls (+ unseen) + LIST with payload");
    relate(table, when, "connections.closed_idle", jnum(st, "connections.closed_idle"), '=', 0, 0,
           "");
    relate(table, when, "connections.refused", jnum(st, "connections.refused"), '=', 0, 0, "");
}

/* Per-second samples and checkpoint results. */
typedef struct checkpoint {
    double t_s;
    proc_sample proc;
    uint64_t open;         /* connections open, by STATS (all quiet)      */
    uint64_t region_bytes; /* STATS shm.region_bytes: clients' mapped regions */
    uint64_t pinned_bytes; /* STATS pinned_bytes: the slots' page-locked buffers
                              (shared mappings of the CUDA driver: RssShmem) */
} checkpoint;
static checkpoint cps[CHECKPOINTS + 1];
static unsigned cp_count;
static proc_sample sec_min, sec_max;
static uint64_t sec_samples, fds_minus_open_min = UINT64_MAX, fds_minus_open_max;
static FILE *samples_fp;

static void sample_second(void) {
    proc_sample p;
    if (proc_read(&p) < 0) {
        failure("monitor: /proc/%ld is gone: the daemon exited", opt.pid);
        return;
    }
    cJSON *st = stats_now();
    uint64_t open = st ? jnum(st, "connections.open") : 0;
    uint64_t answered = st ? jnum(st, "frames.answered") : 0;
    cJSON_Delete(st);
    double t = since_start_s();
    if (samples_fp)
        fprintf(samples_fp,
                "%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", t,
                p.rss_kb, p.anon_kb, p.shmem_kb, p.fds, open, answered);
    if (t < t_warmup_end)
        return;
    if (sec_samples == 0)
        sec_min = sec_max = p;
    sec_samples++;
    if (p.rss_kb < sec_min.rss_kb)
        sec_min.rss_kb = p.rss_kb;
    if (p.rss_kb > sec_max.rss_kb)
        sec_max.rss_kb = p.rss_kb;
    if (p.fds < sec_min.fds)
        sec_min.fds = p.fds;
    if (p.fds > sec_max.fds)
        sec_max.fds = p.fds;
    uint64_t d = p.fds - open;
    if (d < fds_minus_open_min)
        fds_minus_open_min = d;
    if (d > fds_minus_open_max)
        fds_minus_open_max = d;
}

/* The connections every paused moment has: each well-behaved client's and
 * the monitor's; and the regions: each shm client's one. */
static unsigned quiet_open(void) {
    unsigned n = 1;
    for (unsigned i = 0; i < wb_count; i++)
        n += wbs[i].c != NULL;
    return n;
}

static unsigned quiet_regions(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < wb_count; i++)
        n += wbs[i].have_region;
    return n;
}

/* Polls STATS until the daemon has `open` connections, has accepted the
 * `connects` the clients made (a connect completes in the listen backlog:
 * under ASan on a loaded machine, 20 of a checkpoint's were not yet
 * accepted, nor their frames counted, when the counters were read) and has
 * no frame in flight; returns that STATS (caller frees) or NULL after
 * IDLE_TIMEOUT_MS. */
static cJSON *wait_idle(unsigned open, uint64_t connects, const char *when) {
    uint64_t deadline = gf_now_ms() + IDLE_TIMEOUT_MS;
    for (;;) {
        cJSON *st = stats_now();
        if (!st)
            return NULL;
        int quiet = jnum(st, "connections.open") == open &&
                    jnum(st, "connections.total") >= connects &&
                    jnum(st, "frames.in_progress") == 0 &&
                    jnum(st, "slots.free") == jnum(st, "slots.count");
        if (quiet)
            return st;
        if (gf_now_ms() > deadline) {
            failure("%s: the daemon is not idle after %d ms: %" PRIu64
                    " connections open (expected %u), %" PRIu64 " accepted (of %" PRIu64
                    "), %" PRIu64 " frames in progress, %" PRIu64 " of %" PRIu64 " slots free",
                    when, IDLE_TIMEOUT_MS, jnum(st, "connections.open"), open,
                    jnum(st, "connections.total"), connects, jnum(st, "frames.in_progress"),
                    jnum(st, "slots.free"), jnum(st, "slots.count"));
            return st;
        }
        cJSON_Delete(st);
        sleep_ms(20);
    }
}

/* Pauses every client at a safe point, checks the daemon against them and
 * samples it, then lets them go on (unless `last`). */
static void checkpoint_run(int last) {
    char when[64];
    snprintf(when, sizeof when, "checkpoint %u (t=%.0fs)", cp_count, since_start_s());
    unsigned threads = wb_count + hostile_count;
    uint64_t began = gf_now_ms();
    double began_s = since_start_s();
    pthread_mutex_lock(&ctl.mu);
    ctl.pause = 1;
    pthread_cond_broadcast(&ctl.cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += PAUSE_TIMEOUT_MS / 1000;
    while (ctl.paused < threads)
        if (pthread_cond_timedwait(&ctl.cv, &ctl.mu, &until) == ETIMEDOUT)
            break;
    unsigned paused = ctl.paused;
    pthread_mutex_unlock(&ctl.mu);
    uint64_t pause_ms = gf_now_ms() - began;
    if (paused < threads) {
        failure("%s: only %u of %u clients paused within %d ms", when, paused, threads,
                PAUSE_TIMEOUT_MS);
    } else {
        unsigned open = quiet_open();
        counts t;
        sum_counts(&t);
        cJSON *st = wait_idle(open, t.connects, when);
        sum_counts(&t); /* wait_idle's STATS requests are counted too */
        checkpoint *cp = &cps[cp_count < CHECKPOINTS + 1 ? cp_count : CHECKPOINTS];
        cp->t_s = since_start_s();
        cp->open = open;
        if (proc_read(&cp->proc) < 0)
            failure("%s: cannot read /proc/%ld", when, opt.pid);
        if (st) {
            check_stats(st, &t, open, quiet_regions(), when, 0);
            cp->region_bytes = jnum(st, "shm.region_bytes");
            cp->pinned_bytes = jnum(st, "pinned_bytes");
            cp->open = jnum(st, "connections.open");
        }
        fprintf(stderr,
                "gf_soak: %s: paused in %" PRIu64 " ms; wb frames %" PRIu64 " answered, %" PRIu64
                " failed; hostile attacks %" PRIu64 "; daemon rss %" PRIu64 " kB (anon %" PRIu64
                "), %" PRIu64 " fds, %u connections\n",
                when, pause_ms, t.frames_answered, t.frames_failed, t.attacks, cp->proc.rss_kb,
                cp->proc.anon_kb, cp->proc.fds, open);
        cJSON_Delete(st);
        if (cp_count < CHECKPOINTS + 1)
            cp_count++;
    }
    if (!last) {
        pthread_mutex_lock(&ctl.mu);
        ctl.pause = 0;
        pthread_cond_broadcast(&ctl.cv);
        pthread_mutex_unlock(&ctl.mu);
        paused_s += since_start_s() - began_s;
    } else {
        t_last_pause_s = began_s;
    }
}

/* ---- latency --------------------------------------------------------------------- */

typedef struct lat_stat {
    size_t n;
    double p50_ms, p99_ms, max_ms;
} lat_stat;

static lat_stat lat_merge(unsigned phase, unsigned cls) {
    size_t n = 0;
    for (unsigned i = 0; i < wb_count; i++)
        n += wbs[i].lat[phase][cls].n;
    lat_stat s = {.n = n};
    if (n == 0)
        return s;
    uint64_t *all = malloc(n * sizeof *all);
    if (!all)
        return s;
    size_t k = 0;
    for (unsigned i = 0; i < wb_count; i++) {
        memcpy(all + k, wbs[i].lat[phase][cls].v, wbs[i].lat[phase][cls].n * sizeof *all);
        k += wbs[i].lat[phase][cls].n;
    }
    gf_sort_ns(all, n);
    s.p50_ms = gf_percentile_us(all, n, 50) / 1000.0;
    s.p99_ms = gf_percentile_us(all, n, 99) / 1000.0;
    s.max_ms = (double)all[n - 1] / 1e6;
    free(all);
    return s;
}

/* Well-behaved frames answered that were sent in `phase`: those whose
 * latency was recorded. */
static size_t phase_frames(unsigned phase) {
    size_t n = 0;
    for (unsigned i = 0; i < wb_count; i++)
        for (unsigned k = 0; k < CLASSES; k++)
            n += wbs[i].lat[phase][k].n;
    return n;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr,
            "usage: gf_soak --socket PATH --pid PID --configs A.json[,B.json] [--clients N]\n"
            "               [--hostile N] [--minutes M | --seconds S] [--samples FILE]\n"
            "               [--seed N] [--expect-reloads] [--min-ratio R] [--heavy-bytes B]\n");
    exit(2);
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--expect-reloads")) {
            opt.expect_reloads = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--socket")) {
            opt.socket_path = v;
        } else if (!strcmp(a, "--pid")) {
            opt.pid = strtol(v, NULL, 10);
        } else if (!strcmp(a, "--configs")) {
            static char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save);
                 tok && opt.config_count < MAX_SETS; tok = strtok_r(NULL, ",", &save))
                opt.configs[opt.config_count++] = tok;
        } else if (!strcmp(a, "--clients")) {
            opt.clients = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(a, "--hostile")) {
            opt.hostile = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(a, "--minutes")) {
            opt.seconds = 60 * strtod(v, NULL);
        } else if (!strcmp(a, "--seconds")) {
            opt.seconds = strtod(v, NULL);
        } else if (!strcmp(a, "--samples")) {
            opt.samples_path = v;
        } else if (!strcmp(a, "--seed")) {
            opt.seed = strtoull(v, NULL, 10);
        } else if (!strcmp(a, "--min-ratio")) {
            opt.min_ratio = strtod(v, NULL);
        } else if (!strcmp(a, "--heavy-bytes")) {
            opt.heavy_bytes = (size_t)strtoul(v, NULL, 10) / 4 * 4;
        } else {
            usage();
        }
    }
    if (!opt.socket_path || opt.pid <= 0 || opt.config_count == 0 || opt.clients < 2 ||
        opt.seconds < 10 || !(opt.min_ratio >= 0) || opt.heavy_bytes == 0 ||
        opt.heavy_bytes > HEAVY_BYTES_MAX)
        usage();
    if (opt.hostile == (unsigned)-1)
        opt.hostile = opt.clients / 8;
    if (opt.hostile >= opt.clients)
        usage();
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    signal(SIGPIPE, SIG_IGN);

    /* The monitor's connection; the daemon may still be starting. */
    int rc = -1;
    for (int tries = 0; tries < 300 && rc < 0; tries++) {
        rc = gf_client_connect(opt.socket_path, &mon);
        if (rc < 0)
            sleep_ms(100);
    }
    if (rc < 0) {
        fprintf(stderr, "gf_soak: cannot connect to %s: %s\n", opt.socket_path, strerror(-rc));
        return 1;
    }
    mon_n.connects++;
    char *json = NULL, err[TEXT_BYTES];
    gf_pipeline *listed = NULL;
    size_t listed_count = 0;
    if ((rc = gf_client_request_json(mon, GF_MSG_LIST, &json, REPLY_TIMEOUT_MS)) < 0 ||
        gf_pipelines_from_json(json, &listed, &listed_count, err, sizeof err) < 0) {
        fprintf(stderr, "gf_soak: LIST: %s\n", rc < 0 ? gf_client_error(mon) : err);
        return 1;
    }
    mon_n.lists++;
    free(json);
    if (listed_count > MAX_PIPES) {
        fprintf(stderr, "gf_soak: %zu pipelines; at most %d\n", listed_count, MAX_PIPES);
        return 1;
    }
    pipe_count = (unsigned)listed_count;
    int have_echo = 0, have_affine = 0;
    for (unsigned i = 0; i < pipe_count; i++) {
        pipes[i].p = listed[i];
        if (!strcmp(listed[i].stages[0].kind->name, "echo") && !have_echo)
            echo_id = listed[i].id, have_echo = 1;
        if (!strcmp(listed[i].stages[0].kind->name, "affine") && !have_affine)
            affine_id = listed[i].id, have_affine = 1;
        if (!strcmp(listed[i].name, HEAVY_PIPELINE) &&
            !strcmp(listed[i].stages[0].kind->name, "sincos"))
            heavy_idx = (int)i;
    }
    free(listed);
    if (!have_echo || !have_affine) {
        fprintf(stderr, "gf_soak: the daemon needs an echo and an affine pipeline\n");
        return 1;
    }
    if (load_configs() < 0 || build_references(opt.seed) < 0) {
        fprintf(stderr, "gf_soak: cannot prepare the references\n");
        return 1;
    }
    cJSON *st0 = stats_now();
    char engine[32] = "?";
    uint64_t slots = 0;
    if (st0) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(st0, "engine");
        if (cJSON_IsString(e))
            snprintf(engine, sizeof engine, "%s", e->valuestring);
        slots = jnum(st0, "slots.count");
        if (jnum(st0, "frames.received") != 0 || jnum(st0, "connections.total") != 1)
            fprintf(stderr, "gf_soak: warning: the daemon has served others before: counters "
                            "will not agree\n");
    }
    cJSON_Delete(st0);
    if (opt.samples_path && !(samples_fp = fopen(opt.samples_path, "w"))) {
        fprintf(stderr, "gf_soak: %s: %s\n", opt.samples_path, strerror(errno));
        return 1;
    }
    if (samples_fp)
        fprintf(samples_fp, "t_s,rss_kb,rss_anon_kb,rss_shmem_kb,fds,connections_open,"
                            "frames_answered\n");

    /* Phases: a quiet baseline (well-behaved clients only), warm-up, then
     * CHECKPOINTS checkpoints evenly up to the end. */
    t_baseline_end = opt.seconds / 20 < 5 ? 5 : opt.seconds / 20 > 30 ? 30 : opt.seconds / 20;
    t_warmup_end = opt.seconds / 10 < 10 ? 10 : opt.seconds / 10 > 60 ? 60 : opt.seconds / 10;
    if (t_warmup_end < 2 * t_baseline_end)
        t_warmup_end = 2 * t_baseline_end;

    wb_count = opt.clients - opt.hostile;
    hostile_count = opt.hostile;
    wbs = calloc(wb_count, sizeof *wbs);
    hcs = calloc(hostile_count ? hostile_count : 1, sizeof *hcs);
    if (!wbs || !hcs)
        return 1;
    unsigned shm_clients = 0, query_clients = 0;
    for (unsigned i = 0; i < wb_count; i++) {
        wb_client *w = &wbs[i];
        w->index = i;
        w->shm = i % SHM_EVERY == SHM_EVERY - 1;
        w->queries = i % QUERY_EVERY_CLIENT == 1;
        w->window = w->shm ? SHM_WINDOW : wb_windows[i % (sizeof wb_windows / sizeof *wb_windows)];
        w->rng = opt.seed * 1000003u + i + 1;
        shm_clients += w->shm;
        query_clients += w->queries;
    }
    for (unsigned i = 0; i < hostile_count; i++) {
        hcs[i].index = i;
        hcs[i].rng = opt.seed * 7919u + 0xABCDEFu + i;
    }
    fprintf(stderr,
            "gf_soak: %u clients (%u well-behaved: %u by shared memory, %u with queries; %u "
            "hostile) for %.0f s on engine %s, %" PRIu64 " slots; baseline until %.0f s, warm-up "
            "until %.0f s\n",
            opt.clients, wb_count, shm_clients, query_clients, hostile_count, opt.seconds, engine,
            slots, t_baseline_end, t_warmup_end);

    t0_ns = gf_now_ns();
    for (unsigned i = 0; i < wb_count; i++)
        pthread_create(&wbs[i].thread, NULL, wb_main, &wbs[i]);
    for (unsigned i = 0; i < hostile_count; i++)
        pthread_create(&hcs[i].thread, NULL, hostile_main, &hcs[i]);

    /* Per-second samples; checkpoints at warm-up's end and evenly after. */
    unsigned next_cp = 0;
    double step = (opt.seconds - t_warmup_end) / (CHECKPOINTS - 1);
    for (;;) {
        double t = since_start_s();
        double cp_at = t_warmup_end + step * next_cp;
        if (t >= cp_at) {
            int last = next_cp == CHECKPOINTS - 1;
            if (last)
                wait_first_attacks();
            checkpoint_run(last);
            next_cp++;
            if (last)
                break;
            continue;
        }
        sample_second();
        double wait = cp_at - since_start_s();
        sleep_ms(wait > 1 ? 1000 : wait > 0 ? (unsigned)(wait * 1000) : 0);
    }
    /* Stop: each client drains, removes its region, closes. */
    pthread_mutex_lock(&ctl.mu);
    ctl.stop = 1;
    pthread_cond_broadcast(&ctl.cv);
    pthread_mutex_unlock(&ctl.mu);
    for (unsigned i = 0; i < wb_count; i++)
        pthread_join(wbs[i].thread, NULL);
    for (unsigned i = 0; i < hostile_count; i++)
        pthread_join(hcs[i].thread, NULL);
    double run_s = since_start_s();
    if (samples_fp)
        fclose(samples_fp);

    /* ---- the final accounting ---- */
    counts t;
    sum_counts(&t);
    cJSON *st = wait_idle(1, t.connects, "end");
    sum_counts(&t); /* wait_idle's STATS requests are counted too */
    add_row(-1, "run", engine,
            "%.0f s, %u clients (%u wb, %u shm, %u query, %u hostile), %" PRIu64 " slots", run_s,
            opt.clients, wb_count, shm_clients, query_clients, hostile_count, slots);
    char v[96];
    snprintf(v, sizeof v, "%" PRIu64, t.frames_answered);
    add_row(t.frames_answered == t.frames_sent, "wb frames answered exactly once", v,
            "= %" PRIu64 " sent (%.0f frames/s)", t.frames_sent, (double)t.frames_answered / run_s);
    snprintf(v, sizeof v, "%" PRIu64, t.frames_failed);
    add_row(t.frames_failed == 0, "wb frames failed or wrong", v, "= 0 (each listed above)");
    snprintf(v, sizeof v, "%" PRIu64, t.queries_failed);
    add_row(t.queries_failed == 0, "wb LIST/STATS/TRACE failed", v, "= 0 of %" PRIu64,
            t.lists + t.stats + t.traces);
    snprintf(v, sizeof v, "%" PRIu64, t.shm_frames);
    add_row(-1, "wb frames by reference", v, "in %" PRIu64 " regions", t.regions_added);
    for (unsigned i = 0; i < pipe_count; i++) {
        if (pipes[i].set_count < 2)
            continue;
        char name[96];
        snprintf(name, sizeof name, "%s results per config", pipes[i].p.name);
        snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64, t.matched[i][0], t.matched[i][1]);
        int ok = !opt.expect_reloads || (t.matched[i][0] > 0 && t.matched[i][1] > 0);
        add_row(opt.expect_reloads ? ok : -1, name, v, "%s",
                opt.expect_reloads ? "both > 0: reloads applied" : "(no reloads expected)");
    }
    snprintf(v, sizeof v, "%" PRIu64, t.attacks);
    add_row(-1, "hostile attacks", v,
            "%" PRIu64 " bad requests answered, %" PRIu64 " whole frames then gone (%" PRIu64
            " senders cut)",
            t.bad[GF_ERR_UNKNOWN_PIPELINE] + t.bad[GF_ERR_BAD_LENGTH] + t.bad[GF_ERR_BAD_MAGIC] +
                t.bad[GF_ERR_BAD_VERSION] + t.bad[GF_ERR_BAD_TYPE] + t.bad[GF_ERR_BAD_FLAGS] +
                t.bad[GF_ERR_TOO_LARGE],
            t.whole_frames, t.whole_cut);
    snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64 " / %" PRIu64, t.disc_header, t.disc_small,
             t.disc_large);
    add_row(-1, "hostile disconnects hdr/small/large", v, "mid-request, then closed");
    snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64 " / %" PRIu64, t.stall_cut[0], t.stall_cut[1],
             t.stall_cut[2]);
    int stalls_ok = hostile_count == 0 || (t.stall_cut[0] + t.stall_cut[1] + t.stall_cut[2]) > 0;
    add_row(stalls_ok, "stalls cut hdr/small/large", v, "> 0 in all, by request_timeout %u ms",
            opt.request_timeout_ms);
    snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64 " / %" PRIu64 " ms", t.stall_cut_max_ms[0],
             t.stall_cut_max_ms[1], t.stall_cut_max_ms[2]);
    uint64_t cut_bound = opt.request_timeout_ms + opt.request_timeout_ms / 2 + 1 + 500;
    int cut_ok = t.stall_cut_max_ms[0] <= cut_bound && t.stall_cut_max_ms[1] <= cut_bound;
    add_row(cut_ok, "stall cut time max hdr/small/large", v,
            "hdr, small <= %" PRIu64 " ms (1.5 deadlines + 0.5 s); large waits for a slot first",
            cut_bound);
    snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64, t.noread_frame_cut, t.floods_cut);
    int noread_ok = hostile_count == 0 || (t.noread_frame_cut > 0 && t.floods_cut > 0);
    add_row(noread_ok, "never-reading cut: frame / TRACE flood", v,
            "> 0 each; closed %" PRIu64 " ms after the last send at most", t.noread_cut_max_ms);
    snprintf(v, sizeof v, "%" PRIu64 " / %" PRIu64 " / %" PRIu64 " / %" PRIu64, t.closers,
             t.trickles_cut, t.noread_shared_cut, t.heavy_frames);
    int kinds_ok =
        hostile_count == 0 || (t.closers > 0 && t.trickles_cut > 0 && t.noread_shared_cut > 0 &&
                               (heavy_idx < 0 || t.heavy_frames > 0));
    add_row(kinds_ok, "closers/trickles/shared non-readers/heavy", v,
            "> 0 each: closed mid-payload, cut by request_timeout, by write_timeout; heavy "
            "frames answered");
    snprintf(v, sizeof v, "%" PRIu64, t.floods_over_cap);
    add_row(-1, "TRACE floods past the 64-reply cap", v,
            "of the floods above: whole requests left unread in the daemon");
    snprintf(v, sizeof v, "%" PRIu64, t.bad_length_fatal);
    add_row(-1, "LIST with payload: closed", v,
            "bad_length, then the close; in connections.rejected");
    snprintf(v, sizeof v, "%" PRIu64, t.hostile_anomalies);
    add_row(t.hostile_anomalies == 0, "hostile answered as documented", v,
            "= 0 anomalies (each listed above)");

    if (st) {
        check_stats(st, &t, 1, 0, "end", 1);
        cJSON_Delete(st);
    }

    /* Resources at the checkpoints, every client paused and the daemon idle:
     * the same connections and regions open, nothing in flight.  Its own
     * memory is RssAnon (heap, slots' buffers on the CPU engine); VmRSS also
     * counts RssShmem, the pages of the clients' regions it has mapped,
     * which belong to the clients, grow as frames touch more of them and
     * are bounded by STATS shm.region_bytes.  An fd per connection, so
     * fds - connections.open is what must not move. */
    if (cp_count >= 2) {
        const checkpoint *c0 = &cps[0];
        uint64_t anon_lo = c0->proc.anon_kb, anon_hi = anon_lo, rss_lo = c0->proc.rss_kb,
                 rss_hi = rss_lo, base_lo = c0->proc.fds - c0->open, base_hi = base_lo;
        /* Beyond the clients' regions and the slots' pinned buffers, the
         * CUDA driver maps some shared memory of its own (8 MiB on an H200
         * with driver 580, 2026-11-23): what the first checkpoint shows
         * above those two is that, and must not grow. */
        uint64_t own0 = c0->proc.shmem_kb * 1024, known0 = c0->region_bytes + c0->pinned_bytes;
        uint64_t driver_bytes = own0 > known0 ? own0 - known0 : 0;
        int shmem_ok = 1;
        for (unsigned i = 0; i < cp_count; i++) {
            const checkpoint *c = &cps[i];
            uint64_t base = c->proc.fds - c->open;
            if (c->proc.anon_kb < anon_lo)
                anon_lo = c->proc.anon_kb;
            if (c->proc.anon_kb > anon_hi)
                anon_hi = c->proc.anon_kb;
            if (c->proc.rss_kb < rss_lo)
                rss_lo = c->proc.rss_kb;
            if (c->proc.rss_kb > rss_hi)
                rss_hi = c->proc.rss_kb;
            if (base < base_lo)
                base_lo = base;
            if (base > base_hi)
                base_hi = base;
            shmem_ok &= c->proc.shmem_kb * 1024 <=
                        c->region_bytes + c->pinned_bytes +
                            (uint64_t)((double)driver_bytes * (1 + FLAT_FRACTION));
        }
        /* A leak raises the floor; memory the daemon freed but malloc kept
         * (after a burst of large TRACE replies, say) raises single
         * checkpoints.  So the lowest RssAnon of the last third of the
         * checkpoints is compared with the lowest of the first third. */
        unsigned third = cp_count / 3 ? cp_count / 3 : 1;
        uint64_t first_floor = UINT64_MAX, last_floor = UINT64_MAX;
        for (unsigned i = 0; i < third; i++) {
            if (cps[i].proc.anon_kb < first_floor)
                first_floor = cps[i].proc.anon_kb;
            if (cps[cp_count - 1 - i].proc.anon_kb < last_floor)
                last_floor = cps[cp_count - 1 - i].proc.anon_kb;
        }
        int anon_ok = (double)last_floor <= (double)first_floor * (1 + FLAT_FRACTION) &&
                      (double)last_floor >= (double)first_floor * (1 - FLAT_FRACTION);
        snprintf(v, sizeof v, "%" PRIu64 " -> %" PRIu64 " kB", first_floor, last_floor);
        add_row(RSS_FOLLOWS_FREE ? anon_ok : -1, "daemon RssAnon floor, first->last third", v,
                "within 5%%%s; %u checkpoints from t=%.0fs, all %" PRIu64 " .. %" PRIu64 " kB",
                RSS_FOLLOWS_FREE ? "" : " (not checked: the sanitizer keeps freed memory)",
                cp_count, c0->t_s, anon_lo, anon_hi);
        snprintf(v, sizeof v, "%" PRIu64 " .. %" PRIu64 " kB", rss_lo, rss_hi);
        add_row(shmem_ok, "daemon VmRSS at checkpoints", v,
                "RssShmem <= shm.region_bytes + pinned_bytes + the driver's own %" PRIu64
                " kB (at the first checkpoint) + 5%% at each (last %" PRIu64 " <= %" PRIu64 " kB)",
                driver_bytes / 1024, cps[cp_count - 1].proc.shmem_kb,
                (cps[cp_count - 1].region_bytes + cps[cp_count - 1].pinned_bytes +
                 (uint64_t)((double)driver_bytes * (1 + FLAT_FRACTION))) /
                    1024);
        double fref = (double)(c0->proc.fds - c0->open);
        int fd_ok = (double)base_hi <= fref * (1 + FLAT_FRACTION) &&
                    (double)base_lo >= fref * (1 - FLAT_FRACTION);
        snprintf(v, sizeof v, "%" PRIu64 " .. %" PRIu64, base_lo, base_hi);
        add_row(fd_ok, "daemon fds - connections at checkpoints", v,
                "within 5%% of %" PRIu64 " (fds %" PRIu64 " with %" PRIu64 " connections first)",
                c0->proc.fds - c0->open, c0->proc.fds, c0->open);
    } else {
        add_row(0, "checkpoints", "too few", "at least 2");
    }
    snprintf(v, sizeof v, "%" PRIu64 " .. %" PRIu64 " kB", sec_min.rss_kb, sec_max.rss_kb);
    add_row(-1, "daemon VmRSS each second", v, "after warm-up, under load (%" PRIu64 " samples)",
            sec_samples);
    snprintf(v, sizeof v, "%" PRIu64 " .. %" PRIu64, fds_minus_open_min, fds_minus_open_max);
    add_row(-1, "fds - connections.open each s", v,
            "fds %" PRIu64 " .. %" PRIu64 " under load (sampled apart: races)", sec_min.fds,
            sec_max.fds);

    /* Latency per size class: the baseline phase against the soak phase. */
    uint64_t deadline_ms = opt.request_timeout_ms > opt.write_timeout_ms ? opt.request_timeout_ms
                                                                         : opt.write_timeout_ms;
    for (unsigned k = 0; k < CLASSES; k++) {
        lat_stat b = lat_merge(PH_BASE, k), s = lat_merge(PH_SOAK, k);
        char name[64];
        snprintf(name, sizeof name, "latency %s base p50/p99/max", class_names[k]);
        snprintf(v, sizeof v, "%.1f / %.1f / %.1f ms", b.p50_ms, b.p99_ms, b.max_ms);
        add_row(-1, name, v, "%zu frames, before hostile clients", b.n);
        /* A hostile client holds a slot for at most a deadline, noticed
         * within half a deadline more (the watchdog's period): the tail of
         * the soak phase may be that much above the quiet tail. */
        double bound = b.p99_ms + 1.5 * (double)deadline_ms;
        snprintf(name, sizeof name, "latency %s soak p50/p99/max", class_names[k]);
        snprintf(v, sizeof v, "%.1f / %.1f / %.1f ms", s.p50_ms, s.p99_ms, s.max_ms);
        int ok = b.n == 0 || s.n == 0 || s.p99_ms <= bound;
        add_row(b.n && s.n ? ok : -1, name, v,
                "p99 <= %.0f ms = base p99 + 1.5 x %" PRIu64 " ms; %zu frames", bound, deadline_ms,
                s.n);
    }

    /* Throughput: the well-behaved clients' frames/s while hostile ones act,
     * against the baseline's.  A frame counts in the phase it was sent in,
     * as its latency does; the soak phase's streaming time leaves out the
     * checkpoints, where every client pauses. */
    double base_s = t_baseline_end, soak_s = t_last_pause_s - t_baseline_end - paused_s;
    double base_fps = base_s > 0 ? (double)phase_frames(PH_BASE) / base_s : 0;
    double soak_fps = soak_s > 0 ? (double)phase_frames(PH_SOAK) / soak_s : 0;
    double ratio = base_fps > 0 ? soak_fps / base_fps : 0;
    snprintf(v, sizeof v, "%.0f / %.0f = %.2f", soak_fps, base_fps, ratio);
    add_row(ratio >= opt.min_ratio, "wb frames/s hostile / baseline", v,
            ">= %.2f (--min-ratio); %.0f s of baseline, %.0f s with hostile clients "
            "(checkpoints left out)",
            opt.min_ratio, base_s, soak_s);

    /* The table. */
    unsigned failed_rows = 0;
    printf("\n%-40s %-26s %-8s %s\n", "check", "value", "result", "expected");
    for (unsigned i = 0; i < row_count; i++) {
        const row *r = &rows[i];
        const char *res = r->result == 1 ? "ok" : r->result == 0 ? "FAIL" : "-";
        failed_rows += r->result == 0;
        printf("%-40s %-26s %-8s %s\n", r->name, r->value, res, r->expect);
    }
    if (fail_count > 0) {
        printf("\n%" PRIu64 " failure(s)%s:\n", fail_count,
               fail_count > FAILURES_KEPT ? " (the first ones)" : "");
        for (uint64_t i = 0; i < fail_count && i < FAILURES_KEPT; i++)
            printf("  %s\n", fail_kept[i]);
    }
    int pass = failed_rows == 0 && fail_count == 0;
    printf("\ngf_soak: %s (%u check(s) failed, %" PRIu64 " failure(s) recorded)\n",
           pass ? "PASS" : "FAIL", failed_rows, fail_count);
    gf_client_close(mon);
    return pass ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { STAGE_H2D, STAGE_KERNEL, STAGE_D2H, STAGE_COUNT };

int gf_trace_init(gf_trace *t, uint32_t capacity) {
    memset(t, 0, sizeof *t);
    if (capacity == 0)
        return 0;
    t->recs = calloc(capacity, sizeof *t->recs);
    if (!t->recs)
        return -ENOMEM;
    t->capacity = capacity;
    return 0;
}

void gf_trace_free(gf_trace *t) {
    free(t->recs);
    memset(t, 0, sizeof *t);
}

void gf_trace_push(gf_trace *t, const gf_trace_rec *rec) {
    if (t->capacity == 0)
        return;
    t->recs[t->next] = *rec;
    t->next = (t->next + 1) % t->capacity;
    if (t->count < t->capacity)
        t->count++;
}

/* The i-th kept record, 0 = oldest. */
static const gf_trace_rec *rec_at(const gf_trace *t, uint32_t i) {
    return &t->recs[(t->next + t->capacity - t->count + i) % t->capacity];
}

static double rel(uint64_t ns, uint64_t t0) {
    return ns >= t0 ? (double)(ns - t0) : 0.0;
}

/*
 * The frames array is written as text directly: a TRACE of the 4096 frames
 * kept by default is ~1.2 MB, and building it as cJSON objects took 30-60 ms
 * of the loop (every other client waits meanwhile); this writer takes a few.
 */
typedef struct text_buf {
    char *p;
    size_t len, cap;
    int failed;
} text_buf;

static void tb_reserve(text_buf *b, size_t more) {
    if (b->failed || b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void tb_str(text_buf *b, const char *s) {
    size_t n = strlen(s);
    tb_reserve(b, n);
    if (!b->failed) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

static void tb_u64(text_buf *b, uint64_t v) {
    char digits[20];
    int n = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    tb_reserve(b, (size_t)n);
    if (b->failed)
        return;
    while (n > 0)
        b->p[b->len++] = digits[--n];
}

/* ,"key":value  (ns relative to t0, never negative) */
static void tb_field(text_buf *b, const char *key, uint64_t v) {
    tb_str(b, ",\"");
    tb_str(b, key);
    tb_str(b, "\":");
    tb_u64(b, v);
}

static void tb_interval(text_buf *b, const char *key, uint64_t beg, uint64_t end, uint64_t t0,
                        int timed) {
    tb_str(b, ",\"");
    tb_str(b, key);
    if (!timed) {
        tb_str(b, "\":null");
        return;
    }
    tb_str(b, "\":[");
    tb_u64(b, (uint64_t)rel(beg, t0));
    tb_str(b, ",");
    tb_u64(b, (uint64_t)rel(end, t0));
    tb_str(b, "]");
}

/* A frame's record as text, typically: the buffer is reserved for this. */
#define GF_TRACE_RECORD_TEXT_BYTES 344

/* The frames a TRACE of `max_frames` shows: the last ones kept. */
static uint32_t frames_shown(const gf_trace *t, uint32_t max_frames) {
    return max_frames && max_frames < t->count ? max_frames : t->count;
}

uint64_t gf_trace_text_bytes(uint32_t frames) {
    return (uint64_t)frames * GF_TRACE_RECORD_TEXT_BYTES + 3;
}

uint32_t gf_trace_frames_within(uint64_t bytes) {
    uint64_t n = bytes > 3 ? (bytes - 3) / GF_TRACE_RECORD_TEXT_BYTES : 0;
    return n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

char *gf_trace_frames_text(const gf_trace *t, uint32_t max_frames, uint64_t t0_ns) {
    text_buf b = {0};
    uint32_t n = frames_shown(t, max_frames);
    tb_reserve(&b, gf_trace_text_bytes(n));
    tb_str(&b, "[");
    for (uint32_t i = t->count - n; i < t->count; i++) {
        const gf_trace_rec *r = rec_at(t, i);
        const gf_stage_times *st = &r->stages;
        tb_str(&b, i == t->count - n ? "{\"frame_id\":" : ",{\"frame_id\":");
        tb_u64(&b, r->frame_id);
        tb_field(&b, "conn", r->conn_id);
        tb_field(&b, "pipeline", r->pipeline_id);
        tb_field(&b, "slot", r->slot);
        tb_field(&b, "shard", r->shard);
        tb_field(&b, "submission", r->submission);
        tb_field(&b, "submitted_on", r->submitted_on);
        tb_field(&b, "status", r->status);
        tb_field(&b, "in_bytes", r->in_bytes);
        tb_field(&b, "out_bytes", r->out_bytes);
        tb_field(&b, "arrived", (uint64_t)rel(r->arrived_ns, t0_ns));
        tb_field(&b, "claimed", (uint64_t)rel(r->claimed_ns, t0_ns));
        tb_field(&b, "submitted", (uint64_t)rel(r->submitted_ns, t0_ns));
        tb_interval(&b, "h2d", st->h2d_begin_ns, st->h2d_end_ns, t0_ns, st->timed);
        tb_interval(&b, "kernel", st->kernel_begin_ns, st->kernel_end_ns, t0_ns, st->timed);
        if (st->timed && st->kernel_stages > 1) {
            /* A pipeline of several stages: each stage's share of "kernel". */
            tb_str(&b, ",\"kernel_stages\":[");
            for (uint32_t k = 0; k < st->kernel_stages; k++) {
                tb_str(&b, k ? "," : "");
                tb_u64(&b, st->kernel_stage_ns[k]);
            }
            tb_str(&b, "]");
        }
        tb_interval(&b, "d2h", st->d2h_begin_ns, st->d2h_end_ns, t0_ns, st->timed);
        tb_field(&b, "done", (uint64_t)rel(r->done_ns, t0_ns));
        tb_field(&b, "drained", (uint64_t)rel(r->drained_ns, t0_ns));
        tb_field(&b, "written", (uint64_t)rel(r->written_ns, t0_ns));
        tb_str(&b, "}");
    }
    tb_str(&b, "]");
    tb_reserve(&b, 1);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    b.p[b.len] = '\0';
    return b.p;
}

cJSON *gf_trace_frames_json(const gf_trace *t, uint32_t max_frames, uint64_t t0_ns) {
    char *text = gf_trace_frames_text(t, max_frames, t0_ns);
    cJSON *frames = text ? cJSON_Parse(text) : NULL;
    free(text);
    return frames;
}

/* A stage's interval starting or ending: the sweep's events. */
typedef struct edge {
    uint64_t t;
    int stage;
    int delta; /* +1 begins, -1 ends */
} edge;

static int edge_cmp(const void *a, const void *b) {
    const edge *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->delta - y->delta; /* ends before begins at the same instant */
}

/* The timed frames' stage intervals clipped to [ws, now] as begin and end
 * edges into `edges` (room for count * STAGE_COUNT * 2); returns how many,
 * and counts the frames with an interval inside in *frames. */
static size_t collect_edges(const gf_trace *t, uint64_t ws, uint64_t now, edge *edges,
                            uint64_t *frames) {
    size_t n = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const gf_stage_times *s = &rec_at(t, i)->stages;
        if (!s->timed)
            continue;
        const uint64_t iv[STAGE_COUNT][2] = {{s->h2d_begin_ns, s->h2d_end_ns},
                                             {s->kernel_begin_ns, s->kernel_end_ns},
                                             {s->d2h_begin_ns, s->d2h_end_ns}};
        int inside = 0;
        for (int k = 0; k < STAGE_COUNT; k++) {
            uint64_t b = iv[k][0] < ws ? ws : iv[k][0];
            uint64_t e = iv[k][1] > now ? now : iv[k][1];
            if (e <= b)
                continue;
            edges[n++] = (edge){b, k, +1};
            edges[n++] = (edge){e, k, -1};
            inside = 1;
        }
        *frames += (uint64_t)inside;
    }
    return n;
}

/* Sweeps the sorted edges: each fraction of out->window_ns. */
static void sweep(const edge *edges, size_t n, gf_gpu_busy *out) {
    uint64_t busy[STAGE_COUNT] = {0}, copy = 0, compute = 0, overlap = 0;
    int active[STAGE_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            uint64_t dt = edges[i].t - edges[i - 1].t;
            int kinds = 0;
            for (int k = 0; k < STAGE_COUNT; k++) {
                if (active[k] > 0) {
                    busy[k] += dt;
                    kinds++;
                }
            }
            if (active[STAGE_H2D] > 0 || active[STAGE_D2H] > 0)
                copy += dt;
            if (active[STAGE_KERNEL] > 0)
                compute += dt;
            if (kinds >= 2)
                overlap += dt;
        }
        active[edges[i].stage] += edges[i].delta;
    }
    double w = (double)out->window_ns;
    out->h2d = (double)busy[STAGE_H2D] / w;
    out->kernel = (double)busy[STAGE_KERNEL] / w;
    out->d2h = (double)busy[STAGE_D2H] / w;
    out->copy = (double)copy / w;
    out->compute = (double)compute / w;
    out->overlap = (double)overlap / w;
}

int gf_trace_gpu_busy(const gf_trace *t, uint64_t now_ns, uint64_t window_ns, gf_gpu_busy *out) {
    memset(out, 0, sizeof *out);
    if (t->capacity == 0)
        return -1;
    uint64_t ws = now_ns > window_ns ? now_ns - window_ns : 0;
    if (t->count == t->capacity && rec_at(t, 0)->submitted_ns > ws)
        ws = rec_at(t, 0)->submitted_ns; /* older frames fell out of the ring */
    if (now_ns <= ws)
        return 0;
    out->window_ns = now_ns - ws;
    edge *edges = malloc((size_t)t->count * STAGE_COUNT * 2 * sizeof *edges + 1);
    if (!edges)
        return -1;
    size_t n = collect_edges(t, ws, now_ns, edges, &out->frames);
    qsort(edges, n, sizeof *edges, edge_cmp);
    sweep(edges, n, out);
    free(edges);
    return 0;
}

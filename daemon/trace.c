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

static void add_interval(cJSON *obj, const char *key, uint64_t b, uint64_t e, uint64_t t0,
                         int timed) {
    if (!timed) {
        cJSON_AddNullToObject(obj, key);
        return;
    }
    cJSON *a = cJSON_AddArrayToObject(obj, key);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(rel(b, t0)));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(rel(e, t0)));
}

cJSON *gf_trace_frames_json(const gf_trace *t, uint32_t max_frames, uint64_t t0_ns) {
    cJSON *frames = cJSON_CreateArray();
    if (!frames)
        return NULL;
    uint32_t n = max_frames && max_frames < t->count ? max_frames : t->count;
    for (uint32_t i = t->count - n; i < t->count; i++) {
        const gf_trace_rec *r = rec_at(t, i);
        cJSON *f = cJSON_CreateObject();
        if (!f) {
            cJSON_Delete(frames);
            return NULL;
        }
        cJSON_AddItemToArray(frames, f);
        cJSON_AddNumberToObject(f, "frame_id", (double)r->frame_id);
        cJSON_AddNumberToObject(f, "conn", (double)r->conn_id);
        cJSON_AddNumberToObject(f, "pipeline", r->pipeline_id);
        cJSON_AddNumberToObject(f, "slot", r->slot);
        cJSON_AddNumberToObject(f, "status", r->status);
        cJSON_AddNumberToObject(f, "in_bytes", (double)r->in_bytes);
        cJSON_AddNumberToObject(f, "out_bytes", (double)r->out_bytes);
        cJSON_AddNumberToObject(f, "arrived", rel(r->arrived_ns, t0_ns));
        cJSON_AddNumberToObject(f, "claimed", rel(r->claimed_ns, t0_ns));
        cJSON_AddNumberToObject(f, "submitted", rel(r->submitted_ns, t0_ns));
        const gf_stage_times *s = &r->stages;
        add_interval(f, "h2d", s->h2d_begin_ns, s->h2d_end_ns, t0_ns, s->timed);
        add_interval(f, "kernel", s->kernel_begin_ns, s->kernel_end_ns, t0_ns, s->timed);
        add_interval(f, "d2h", s->d2h_begin_ns, s->d2h_end_ns, t0_ns, s->timed);
        cJSON_AddNumberToObject(f, "done", rel(r->done_ns, t0_ns));
        cJSON_AddNumberToObject(f, "drained", rel(r->drained_ns, t0_ns));
        cJSON_AddNumberToObject(f, "written", rel(r->written_ns, t0_ns));
    }
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
            uint64_t e = iv[k][1] > now_ns ? now_ns : iv[k][1];
            if (e <= b)
                continue;
            edges[n++] = (edge){b, k, +1};
            edges[n++] = (edge){e, k, -1};
            inside = 1;
        }
        out->frames += (uint64_t)inside;
    }
    qsort(edges, n, sizeof *edges, edge_cmp);
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
    free(edges);
    double w = (double)out->window_ns;
    out->h2d = (double)busy[STAGE_H2D] / w;
    out->kernel = (double)busy[STAGE_KERNEL] / w;
    out->d2h = (double)busy[STAGE_D2H] / w;
    out->copy = (double)copy / w;
    out->compute = (double)compute / w;
    out->overlap = (double)overlap / w;
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * gf_report_stats_prometheus: a STATS document in the Prometheus text
 * exposition format (0.0.4); report.h is the contract.  Keys are looked up as
 * the families are written, and a family whose keys are all missing is left
 * out.
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "report_doc.h"
#include "report_text.h"
#include "util.h"

/* The number of entries of a static array. */
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* Room for one number as gf_fmt_double writes it. */
#define NUM_BYTES 40

/*
 * The family being written: its HELP and TYPE lines go out just before its
 * first sample, so a family whose keys are all missing leaves no trace.
 */
struct prom {
    FILE *out;
    const char *name, *type, *help; /* the family; NULL before the first   */
    int announced;                  /* HELP and TYPE written for `name`    */
};

static void prom_family(struct prom *p, const char *name, const char *type, const char *help) {
    p->name = name;
    p->type = type;
    p->help = help;
    p->announced = 0;
}

/*
 * Writes one sample of the current family: the family's name with `suffix`
 * ("" or "_bucket", "_sum", "_count"), the labels given as NULL-terminated
 * name, value pairs, and `v`.  A NaN `v` (a missing key) writes nothing.
 */
static void prom_sample(struct prom *p, const char *suffix, double v, ...) {
    char buf[NUM_BYTES];
    va_list ap;
    const char *label;
    int first = 1;

    if (isnan(v))
        return;
    if (!p->announced) {
        fprintf(p->out, "# HELP %s %s\n# TYPE %s %s\n", p->name, p->help, p->name, p->type);
        p->announced = 1;
    }
    fprintf(p->out, "%s%s", p->name, suffix);
    va_start(ap, v);
    while ((label = va_arg(ap, const char *)) != NULL) {
        const char *value = va_arg(ap, const char *);
        fprintf(p->out, "%s%s=\"", first ? "{" : ",", label);
        gf_put_text(p->out, value, GF_ESC_PROM);
        fputc('"', p->out);
        first = 0;
    }
    va_end(ap);
    fprintf(p->out, "%s %s\n", first ? "" : "}", gf_fmt_double(v, buf, sizeof buf));
}

/* One family with one unlabelled sample: the number at `path` divided by
 * `divisor` (1e9 turns ns into seconds exactly where that is possible). */
static void prom_single(struct prom *p, const cJSON *st, const char *path, const char *name,
                        const char *type, const char *help, double divisor) {
    prom_family(p, name, type, help);
    prom_sample(p, "", gf_doc_num(st, path) / divisor, (const char *)NULL);
}

/* One family with a sample per numeric member of the object at `path`,
 * labelled label=<member name>. */
static void prom_by_key(struct prom *p, const cJSON *st, const char *path, const char *label,
                        const char *name, const char *type, const char *help) {
    const cJSON *item, *obj = gf_doc_get(st, path);

    prom_family(p, name, type, help);
    if (!cJSON_IsObject(obj))
        return;
    cJSON_ArrayForEach(item, obj) {
        if (cJSON_IsNumber(item))
            prom_sample(p, "", item->valuedouble, label, item->string, (const char *)NULL);
    }
}

/* One family with a sample per numeric member of the object at `path` whose
 * name starts with `prefix`, labelled label=<the name without it>. */
static void prom_by_prefix(struct prom *p, const cJSON *st, const char *path, const char *prefix,
                           const char *label, const char *name, const char *type,
                           const char *help) {
    const cJSON *item, *obj = gf_doc_get(st, path);
    size_t n = strlen(prefix);

    prom_family(p, name, type, help);
    if (!cJSON_IsObject(obj))
        return;
    cJSON_ArrayForEach(item, obj) {
        if (cJSON_IsNumber(item) && strncmp(item->string, prefix, n) == 0)
            prom_sample(p, "", item->valuedouble, label, item->string + n, (const char *)NULL);
    }
}

/* The label a pipeline's samples carry: its name, else its id, else "?". */
static const char *pipeline_label(const cJSON *pl, char *buf) {
    const char *name = gf_doc_str(pl, "name");

    if (name != NULL)
        return name;
    if (gf_doc_is_uint(gf_doc_get(pl, "id"))) {
        snprintf(buf, CELL_BYTES, "%.0f", gf_doc_num(pl, "id"));
        return buf;
    }
    return "?";
}

static void prom_pipelines(struct prom *p, const cJSON *st) {
    const cJSON *pipelines = gf_doc_get(st, "pipelines"), *pl, *ph;
    char buf[CELL_BYTES];

    if (!cJSON_IsArray(pipelines))
        return;
    prom_family(p, "gpuframe_pipeline_frames_total", "counter",
                "Frames answered with a result, by pipeline.");
    cJSON_ArrayForEach(pl, pipelines) {
        prom_sample(p, "", gf_doc_num(pl, "frames"), "pipeline", pipeline_label(pl, buf),
                    (const char *)NULL);
    }
    prom_family(p, "gpuframe_phase_seconds", "summary",
                "Time answered frames spent in each phase (slot_wait, receive, h2d, kernel, d2h, "
                "completion_delay, reply_write, end_to_end): _sum / _count is the mean.");
    cJSON_ArrayForEach(pl, pipelines) {
        const char *label = pipeline_label(pl, buf);
        if (!cJSON_IsObject(gf_doc_get(pl, "phases")))
            continue;
        cJSON_ArrayForEach(ph, gf_doc_get(pl, "phases")) {
            double ns = gf_doc_num(ph, "ns"), count = gf_doc_num(ph, "count");
            if (isnan(ns) || isnan(count))
                continue;
            prom_sample(p, "_sum", ns / NS_PER_S, "pipeline", label, "phase", ph->string,
                        (const char *)NULL);
            prom_sample(p, "_count", count, "pipeline", label, "phase", ph->string,
                        (const char *)NULL);
        }
    }
}

/* Each pipeline's frames per submission, as a histogram (le: the bucket's
 * upper bound), and the time frames waited for their batch. */
static void prom_batches(struct prom *p, const cJSON *st) {
    const cJSON *pipelines = gf_doc_get(st, "pipelines"), *pl;
    char buf[CELL_BYTES], le[NUM_BYTES];

    if (!cJSON_IsArray(pipelines))
        return;
    prom_family(p, "gpuframe_pipeline_batch_frames", "histogram",
                "Frames per submission to the engine, by pipeline: a submission is one slot's "
                "batch.");
    cJSON_ArrayForEach(pl, pipelines) {
        const cJSON *bt = gf_doc_get(pl, "batches");
        const cJSON *bounds = gf_doc_get(bt, "bounds"), *counts = gf_doc_get(bt, "counts");
        if (!cJSON_IsArray(bounds) || !cJSON_IsArray(counts) ||
            cJSON_GetArraySize(bounds) != cJSON_GetArraySize(counts))
            continue;
        const char *label = pipeline_label(pl, buf);
        double cum = 0;
        for (int i = 0; i < cJSON_GetArraySize(bounds); i++) {
            cum += cJSON_GetArrayItem(counts, i)->valuedouble;
            snprintf(le, sizeof le, "%.0f", cJSON_GetArrayItem(bounds, i)->valuedouble);
            prom_sample(p, "_bucket", cum, "pipeline", label, "le", le, (const char *)NULL);
        }
        prom_sample(p, "_bucket", cum, "pipeline", label, "le", "+Inf", (const char *)NULL);
        prom_sample(p, "_sum", gf_doc_num(bt, "frames"), "pipeline", label, (const char *)NULL);
        prom_sample(p, "_count", gf_doc_num(bt, "submissions"), "pipeline", label,
                    (const char *)NULL);
    }
    prom_family(p, "gpuframe_pipeline_batch_wait_seconds_total", "counter",
                "Time frames spent whole in their slot waiting for their batch to go, by "
                "pipeline.");
    cJSON_ArrayForEach(pl, pipelines) {
        double ns = gf_doc_num(gf_doc_get(pl, "batches"), "wait_ns");
        if (!isnan(ns))
            prom_sample(p, "", ns / NS_PER_S, "pipeline", pipeline_label(pl, buf),
                        (const char *)NULL);
    }
}

/* The latency histogram; -EINVAL when its arrays do not fit together. */
static int prom_latency(struct prom *p, const cJSON *st, char *err, size_t err_len) {
    const cJSON *lat = gf_doc_get(st, "latency");
    const cJSON *bounds = gf_doc_get(lat, "bounds_ns"), *counts = gf_doc_get(lat, "counts");
    char le[NUM_BYTES];

    if (!cJSON_IsObject(lat))
        return 0;
    if (bounds != NULL || counts != NULL) {
        int nb = cJSON_GetArraySize(bounds), nc = cJSON_GetArraySize(counts);
        if (!cJSON_IsArray(bounds) || !cJSON_IsArray(counts) || nc != nb + 1) {
            gf_errorf(err, err_len,
                      "latency: bounds_ns and counts must be arrays, counts one longer (got %d and "
                      "%d)",
                      nb, nc);
            return -EINVAL;
        }
        double prev = -1, total = 0;
        for (int i = 0; i < nc; i++) {
            const cJSON *b = cJSON_GetArrayItem(bounds, i), *c = cJSON_GetArrayItem(counts, i);
            if (!gf_doc_is_uint(c) || (i < nb && (!gf_doc_is_uint(b) || b->valuedouble <= prev))) {
                gf_errorf(err, err_len,
                          "latency: entry %d is not a count, or bounds_ns does not increase", i);
                return -EINVAL;
            }
            if (i < nb)
                prev = b->valuedouble;
        }
        prom_family(p, "gpuframe_latency_seconds", "histogram",
                    "End-to-end latency of answered frames, header read to reply written.");
        for (int i = 0; i < nc; i++) {
            total += cJSON_GetArrayItem(counts, i)->valuedouble;
            if (i < nb)
                gf_fmt_double(cJSON_GetArrayItem(bounds, i)->valuedouble / NS_PER_S, le, sizeof le);
            else
                snprintf(le, sizeof le, "+Inf");
            prom_sample(p, "_bucket", total, "le", le, (const char *)NULL);
        }
        /* _count is the +Inf bucket by definition, whatever "count" says. */
        prom_sample(p, "_sum", gf_doc_num(lat, "sum_ns") / NS_PER_S, (const char *)NULL);
        prom_sample(p, "_count", total, (const char *)NULL);
    }
    prom_single(p, lat, "max_ns", "gpuframe_latency_max_seconds", "gauge",
                "Largest end-to-end latency since start.", (double)NS_PER_S);
    return 0;
}

/*
 * The GPU's busy fractions over the daemon's last window.  Left out when
 * `gpu` is null (timing events off, no trace ring) and when the engine is
 * the CPU one, whose "gpu" object describes no GPU.
 */
static void prom_gpu(struct prom *p, const cJSON *st) {
    static const char *const stages[] = {"h2d", "kernel", "d2h"};
    const cJSON *gpu = gf_doc_get(st, "gpu");
    char key[32];

    if (!cJSON_IsObject(gpu) || gf_doc_engine_is_cpu(st))
        return;
    prom_single(p, gpu, "window_ns", "gpuframe_gpu_window_seconds", "gauge",
                "Length of the window the GPU busy fractions cover.", (double)NS_PER_S);
    prom_single(p, gpu, "frames", "gpuframe_gpu_window_frames", "gauge",
                "Frames with a timed stage inside the GPU window.", 1.0);
    prom_family(p, "gpuframe_gpu_busy_ratio", "gauge",
                "Fraction of the GPU window during which some H2D copy, kernel or D2H copy ran.");
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        snprintf(key, sizeof key, "%s_busy", stages[i]);
        prom_sample(p, "", gf_doc_num(gpu, key), "stage", stages[i], (const char *)NULL);
    }
    prom_single(p, gpu, "copy_busy", "gpuframe_gpu_copy_busy_ratio", "gauge",
                "Fraction of the GPU window during which a copy of either direction ran.", 1.0);
    prom_single(p, gpu, "compute_busy", "gpuframe_gpu_compute_busy_ratio", "gauge",
                "Fraction of the GPU window during which a kernel ran.", 1.0);
    prom_single(p, gpu, "overlap", "gpuframe_gpu_overlap_ratio", "gauge",
                "Fraction of the GPU window during which at least two of H2D, kernel and D2H ran "
                "at once.",
                1.0);
}

/* A family read straight from the STATS document: the number at `path`, or,
 * with `label`, one sample per numeric member of the object at `path`,
 * labelled label=<member name>. */
struct prom_metric {
    const char *path;  /* dotted path in the STATS document       */
    const char *name;  /* the family's name                        */
    const char *type;  /* "gauge" or "counter"                     */
    const char *help;  /* its HELP text                            */
    const char *label; /* NULL: the number at `path` is one sample */
};

/* Writes the `count` families of `m`, in order. */
static void prom_metrics(struct prom *p, const cJSON *st, const struct prom_metric *m,
                         size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (m[i].label != NULL)
            prom_by_key(p, st, m[i].path, m[i].label, m[i].name, m[i].type, m[i].help);
        else
            prom_single(p, st, m[i].path, m[i].name, m[i].type, m[i].help, 1.0);
    }
}

/* The device's and the slots' sizes, after gpuframe_info and uptime. */
static const struct prom_metric identity_gauges[] = {
    {"device.memory_bytes", "gpuframe_device_memory_bytes", "gauge", "Memory of the GPU in use.",
     NULL},
    {"device.sm_count", "gpuframe_device_multiprocessors", "gauge",
     "Streaming multiprocessors of the GPU in use.", NULL},
    {"device.threads", "gpuframe_cpu_engine_threads", "gauge", "Worker threads of the CPU engine.",
     NULL},
    {"slots.count", "gpuframe_slots", "gauge", "Frame slots.", NULL},
    {"slots.free", "gpuframe_slots_free", "gauge", "Frame slots free now.", NULL},
    {"slots.in_flight", "gpuframe_slots_in_flight", "gauge",
     "Frame slots whose frame is on the engine now.", NULL},
    {"slots.in_bytes", "gpuframe_slot_input_buffer_bytes", "gauge",
     "Size of each slot's input buffer.", NULL},
    {"slots.out_bytes", "gpuframe_slot_output_buffer_bytes", "gauge",
     "Size of each slot's output buffer.", NULL},
    {"pinned_bytes", "gpuframe_pinned_memory_bytes", "gauge",
     "Pinned host memory the daemon holds.", NULL},
};

/* Connections, frames, requests, bytes and pauses since start. */
static const struct prom_metric counter_metrics[] = {
    {"connections.open", "gpuframe_connections_open", "gauge", "Client connections open now.",
     NULL},
    {"connections.total", "gpuframe_connections_total", "counter", "Client connections accepted.",
     NULL},
    {"connections.rejected", "gpuframe_connections_rejected_total", "counter",
     "Connections closed by the daemon after a fatal protocol error.", NULL},
    {"frames.received", "gpuframe_frames_received_total", "counter", "FRAME requests accepted.",
     NULL},
    {"frames.answered", "gpuframe_frames_answered_total", "counter",
     "Frames answered with a RESULT.", NULL},
    {"frames.failed", "gpuframe_frames_failed_total", "counter",
     "Frames answered with an ERROR (reasons in gpuframe_rejected_total).", NULL},
    {"frames.dropped", "gpuframe_frames_dropped_total", "counter",
     "Frames whose client left before the result could be written.", NULL},
    {"frames.truncated", "gpuframe_frames_truncated_total", "counter",
     "Frames whose client left in the middle of the payload.", NULL},
    {"frames.in_progress", "gpuframe_frames_in_progress", "gauge",
     "Frames received and not yet finished.", NULL},
    {"rejected", "gpuframe_rejected_total", "counter",
     "ERROR replies sent, by status name (fatal header errors included).", "reason"},
    {"requests", "gpuframe_requests_total", "counter",
     "LIST, STATS and TRACE requests answered, by type.", "type"},
    {"bytes.in", "gpuframe_input_bytes_total", "counter",
     "Frame payload bytes received into slots.", NULL},
    {"bytes.out", "gpuframe_output_bytes_total", "counter",
     "Result payload bytes written to clients.", NULL},
    {"backpressure_pauses", "gpuframe_backpressure_pauses_total", "counter",
     "Times the daemon stopped reading a connection for want of a free slot.", NULL},
    {"connections.refused", "gpuframe_connections_refused_total", "counter",
     "Connections answered too_many_connections at accept and closed.", NULL},
    {"connections.moved", "gpuframe_connections_moved_total", "counter",
     "Connections moved to a shard of the device their frame's pipeline is limited to.", NULL},
    {"frames.timed", "gpuframe_frames_timed_total", "counter",
     "Answered frames whose stage times were measured (timing_sample_every).", NULL},
    {"frames.results_evicted", "gpuframe_results_evicted_total", "counter",
     "Results moved out of their slots because their client was not reading while another "
     "waited for a slot.",
     NULL},
    {"frames.parked", "gpuframe_payloads_parked_total", "counter",
     "Payloads read into memory of their own rather than a slot: slower than others needed it.",
     NULL},
    {"slots.submissions", "gpuframe_submissions_total", "counter",
     "Batches handed to the engine; frames over submissions is the mean batch size.", NULL},
    {"slots.zero_copy_submissions", "gpuframe_zero_copy_submissions_total", "counter",
     "Batches whose kernels ran on the pinned host buffers, with no copy.", NULL},
    {"slots.graph_submissions", "gpuframe_graph_submissions_total", "counter",
     "Batches replayed from a CUDA graph (cuda_graphs).", NULL},
    {"slots.priority_submissions", "gpuframe_priority_submissions_total", "counter",
     "Batches with a realtime frame, run on a stream of the device's greatest priority.", NULL},
    {"slots.gathered_submissions", "gpuframe_gathered_submissions_total", "counter",
     "Batches whose small device frames were gathered into the slot and run as one launch.", NULL},
    {"slots.host_gathered_submissions", "gpuframe_host_gathered_submissions_total", "counter",
     "Batches whose small shm frames moved by one kernel, either way, instead of a copy each.",
     NULL},
};

/* Shared-memory regions and the frames by reference. */
static const struct prom_metric shm_metrics[] = {
    {"shm.regions_open", "gpuframe_shm_regions_open", "gauge",
     "Shared-memory regions clients hold now.", NULL},
    {"shm.region_bytes", "gpuframe_shm_region_bytes", "gauge",
     "Bytes of the shared-memory regions clients hold now (page-locked on the CUDA engine).", NULL},
    {"shm.regions_added", "gpuframe_shm_regions_added_total", "counter",
     "REGION_ADD requests that added a region.", NULL},
    {"shm.regions_removed", "gpuframe_shm_regions_removed_total", "counter",
     "REGION_REMOVE requests that removed a region.", NULL},
    {"shm.frames", "gpuframe_shm_frames_total", "counter",
     "Frames by reference answered with a RESULT (also in gpuframe_frames_answered_total).", NULL},
    {"shm.bytes_in", "gpuframe_shm_input_bytes_total", "counter",
     "Input bytes of the frames by reference answered.", NULL},
    {"shm.bytes_out", "gpuframe_shm_output_bytes_total", "counter",
     "Output bytes of the frames by reference answered.", NULL},
};

/* Device regions and the frames in them (STATS' "device_regions"). */
static const struct prom_metric device_region_metrics[] = {
    {"device_regions.regions_open", "gpuframe_device_regions_open", "gauge",
     "Device regions clients hold mapped now.", NULL},
    {"device_regions.region_bytes", "gpuframe_device_region_bytes", "gauge",
     "Bytes of the device regions clients hold mapped now.", NULL},
    {"device_regions.regions_added", "gpuframe_device_regions_added_total", "counter",
     "DEVICE_REGION_ADD requests that added a region.", NULL},
    {"device_regions.regions_removed", "gpuframe_device_regions_removed_total", "counter",
     "REGION_REMOVE requests that removed a device region.", NULL},
    {"device_regions.frames", "gpuframe_device_frames_total", "counter",
     "Device frames answered with a RESULT (also in gpuframe_frames_answered_total).", NULL},
    {"device_regions.bytes_in", "gpuframe_device_input_bytes_total", "counter",
     "Input bytes of the device frames answered.", NULL},
    {"device_regions.bytes_out", "gpuframe_device_output_bytes_total", "counter",
     "Output bytes of the device frames answered.", NULL},
};

static void prom_identity(struct prom *p, const cJSON *st) {
    const char *version = gf_doc_str(st, "version"), *engine = gf_doc_str(st, "engine");
    const char *device = gf_doc_str(st, "device.name");
    const cJSON *te = gf_doc_get(st, "timing_events");

    prom_family(p, "gpuframe_info", "gauge", "Version, engine and device of the daemon.");
    prom_sample(p, "", 1.0, "version", version ? version : "", "engine", engine ? engine : "",
                "device", device ? device : "", (const char *)NULL);
    prom_single(p, st, "uptime_ns", "gpuframe_uptime_seconds", "gauge",
                "Time since the daemon started.", (double)NS_PER_S);
    prom_family(p, "gpuframe_timing_events_enabled", "gauge",
                "1 when per-stage timing events are recorded (timing_events), else 0.");
    prom_sample(p, "", cJSON_IsBool(te) ? (double)cJSON_IsTrue(te) : NAN, (const char *)NULL);
    prom_metrics(p, st, identity_gauges, COUNT_OF(identity_gauges));
}

/* A family with one sample per element of a STATS array ("shards",
 * "devices"): the number at `key` in each element. */
struct prom_member {
    const char *key;  /* the member of each element             */
    const char *name; /* the family's name                       */
    const char *type; /* "gauge" or "counter"                    */
    const char *help; /* its HELP text                           */
};

/* Each shard's own figures, labelled shard and device.  Its frames_per_s and
 * bytes_in_per_s are left out like the document's other rates: rate() of
 * gpuframe_shard_frames_answered_total gives them.  Its loop utilisation has
 * no counter to take a rate of, so it is a gauge, like the GPU's busy
 * fractions. */
static const struct prom_member shard_members[] = {
    {"connections", "gpuframe_shard_connections", "gauge",
     "Client connections open now, by shard."},
    {"slots_busy", "gpuframe_shard_slots_busy", "gauge",
     "Frame slots holding a frame now, by shard."},
    {"in_flight", "gpuframe_shard_in_flight", "gauge",
     "Frame slots whose frame is on the engine now, by shard."},
    {"frames_answered", "gpuframe_shard_frames_answered_total", "counter",
     "Frames answered with a RESULT, by shard."},
    {"frames_failed", "gpuframe_shard_frames_failed_total", "counter",
     "Frames answered with an ERROR, by shard."},
    {"submissions", "gpuframe_shard_submissions_total", "counter",
     "Batches handed to the engine, by shard."},
    {"loop_utilisation_1s", "gpuframe_shard_loop_utilisation_ratio", "gauge",
     "Busy fraction of the shard's event loop over the daemon's last second."},
};

/* Each device's figures over the shards on it, labelled device.  Its
 * frames_per_s and bytes_in_per_s are left out: rate() of the counter. */
static const struct prom_member device_members[] = {
    {"in_flight", "gpuframe_device_in_flight", "gauge",
     "Frame slots whose frame is on the device now, over its shards."},
    {"frames_answered", "gpuframe_device_frames_answered_total", "counter",
     "Frames answered with a RESULT by the device's shards."},
    {"pinned_bytes", "gpuframe_device_pinned_bytes", "gauge",
     "Pinned host memory the device's shards hold."},
};

/* The `device` label of a shard or device whose ordinal is `v`: the number,
 * "cpu" for null (the CPU engine), or NULL when it is malformed. */
static const char *device_label(const cJSON *v, char *buf) {
    if (cJSON_IsNull(v))
        return "cpu";
    if (!gf_doc_is_uint(v))
        return NULL;
    snprintf(buf, CELL_BYTES, "%.0f", v->valuedouble);
    return buf;
}

/* Nonzero when element `e` of `arr` has a usable `key` (a whole number, or
 * null where `null_ok`) that no element before it has: a document that names
 * a shard or a device twice must not give a series twice, which would make a
 * scraper refuse the whole file. */
static int first_of_its_key(const cJSON *arr, const cJSON *e, const char *key, int null_ok) {
    const cJSON *v = gf_doc_get(e, key), *o;

    if (!gf_doc_is_uint(v) && !(null_ok && cJSON_IsNull(v)))
        return 0;
    cJSON_ArrayForEach(o, arr) {
        if (o == e)
            return 1;
        const cJSON *w = gf_doc_get(o, key);
        if (cJSON_IsNull(v) ? cJSON_IsNull(w)
                            : gf_doc_is_uint(w) && w->valuedouble == v->valuedouble)
            return 0;
    }
    return 1;
}

/* The shard count, then the families of `shards` and `devices`; each is left
 * out when its array is (a daemon before sharding). */
static void prom_shards(struct prom *p, const cJSON *st) {
    const cJSON *shards = gf_doc_get(st, "shards"), *devices = gf_doc_get(st, "devices"), *o;
    char shard[CELL_BYTES], dev[CELL_BYTES];

    prom_single(p, st, "shard_count", "gpuframe_shards", "gauge",
                "Shards: event loops, each on its own thread with its own slots.", 1.0);
    for (size_t i = 0; cJSON_IsArray(shards) && i < COUNT_OF(shard_members); i++) {
        prom_family(p, shard_members[i].name, shard_members[i].type, shard_members[i].help);
        cJSON_ArrayForEach(o, shards) {
            const char *device = device_label(gf_doc_get(o, "device"), dev);
            if (!first_of_its_key(shards, o, "shard", 0) || device == NULL)
                continue;
            snprintf(shard, sizeof shard, "%.0f", gf_doc_num(o, "shard"));
            prom_sample(p, "", gf_doc_num(o, shard_members[i].key), "shard", shard, "device",
                        device, (const char *)NULL);
        }
    }
    if (!cJSON_IsArray(devices))
        return;
    prom_family(p, "gpuframe_device_info", "gauge",
                "Name and PCI bus id of each device the shards run on.");
    cJSON_ArrayForEach(o, devices) {
        const char *name = gf_doc_str(o, "name"), *bus = gf_doc_str(o, "pci_bus_id");
        if (first_of_its_key(devices, o, "index", 1))
            prom_sample(p, "", 1.0, "device", device_label(gf_doc_get(o, "index"), dev), "name",
                        name ? name : "", "pci_bus_id", bus ? bus : "", (const char *)NULL);
    }
    for (size_t i = 0; i < COUNT_OF(device_members); i++) {
        prom_family(p, device_members[i].name, device_members[i].type, device_members[i].help);
        cJSON_ArrayForEach(o, devices) {
            if (first_of_its_key(devices, o, "index", 1))
                prom_sample(p, "", gf_doc_num(o, device_members[i].key), "device",
                            device_label(gf_doc_get(o, "index"), dev), (const char *)NULL);
        }
    }
}

int gf_report_stats_prometheus(const cJSON *stats, FILE *out, char *err, size_t err_len) {
    struct prom p = {.out = out};
    int rc;

    if (!cJSON_IsObject(stats)) {
        gf_errorf(err, err_len, "the STATS document is not a JSON object");
        return -EINVAL;
    }
    prom_identity(&p, stats);
    prom_metrics(&p, stats, counter_metrics, COUNT_OF(counter_metrics));
    prom_by_prefix(&p, stats, "connections", "closed_", "reason",
                   "gpuframe_connections_closed_total", "counter",
                   "Connections the daemon closed on a deadline, by which (request_timeout, "
                   "receive_stall, write_timeout, idle).");
    prom_metrics(&p, stats, shm_metrics, COUNT_OF(shm_metrics));
    prom_metrics(&p, stats, device_region_metrics, COUNT_OF(device_region_metrics));
    prom_pipelines(&p, stats);
    prom_batches(&p, stats);
    rc = prom_latency(&p, stats, err, err_len);
    if (rc < 0)
        return rc;
    /* No rates: the STATS document's "rates" and loop.utilisation_* are
     * windows the daemon computed, which a scrape every 15 s would sample
     * arbitrarily; rate() over the counters above gives them for any window
     * (SERVICE.md, "Prometheus"). */
    prom_gpu(&p, stats);
    prom_single(&p, stats, "loop.idle_ns", "gpuframe_loop_idle_seconds_total", "counter",
                "Time the event loop spent idle since start: 1 - rate() of it is the loop's "
                "busy fraction.",
                (double)NS_PER_S);
    prom_single(&p, stats, "loop.polling_ns", "gpuframe_loop_polling_seconds_total", "counter",
                "Time the event loop was kept from sleeping to poll the GPU for completions.",
                (double)NS_PER_S);
    prom_shards(&p, stats);
    return ferror(out) ? -EIO : 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * gf_report_stats_table: a STATS document as the summary table `gpuframe
 * stats` prints; report.h is the contract.  Keys are looked up as the table
 * is written, and a missing one prints as "-" or leaves its line out.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report_doc.h"
#include "report_text.h"

/* The micro sign of terminal output: ASCII, like `gpuframe stream`'s p50_us. */
#define TABLE_MICRO "us"

/* The phases of a pipeline in the order a frame goes through them, named in
 * the table's header as in STATS (daemon/STATS.md) and Prometheus's `phase`
 * label: one name for each everywhere.  `copy`: a host-device copy, which the
 * CPU engine does not make. */
static const struct {
    const char *key;
    int copy;
} phase_columns[] = {
    {"slot_wait", 0}, {"receive", 0},          {"h2d", 1},         {"kernel", 0},
    {"d2h", 1},       {"completion_delay", 0}, {"reply_write", 0}, {"end_to_end", 0},
};
#define PHASE_COLUMNS (sizeof phase_columns / sizeof phase_columns[0])
/* The narrowest phase column: room for "100000.0" and a space. */
#define PHASE_COLUMN_MIN_WIDTH 10

/* A count, or "-" when missing. */
static const char *cell_count(double v, char *buf) {
    if (isnan(v))
        return "-";
    snprintf(buf, CELL_BYTES, "%.0f", v);
    return buf;
}

/* Bytes with a binary unit, or "-". */
static const char *cell_bytes(double v, char *buf) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;

    if (isnan(v))
        return "-";
    if (v < 1024) {
        snprintf(buf, CELL_BYTES, "%.0f B", v);
        return buf;
    }
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, CELL_BYTES, "%.1f %s", v, units[u]);
    return buf;
}

/* A fraction as a percentage with one decimal, or "-". */
static const char *cell_pct(double v, char *buf) {
    if (isnan(v))
        return "-";
    snprintf(buf, CELL_BYTES, "%.1f%%", v * 100.0);
    return buf;
}

/* A duration in ns for people, or "-". */
static const char *cell_ns(double v, char *buf) {
    if (isnan(v) || v < 0)
        return "-";
    return gf_report_format_ns(v >= 1.8e19 ? UINT64_MAX : (uint64_t)v, TABLE_MICRO, buf,
                               CELL_BYTES);
}

/* Uptime as "3d 04h 05m 06s", leaving out leading zero units. */
static const char *cell_uptime(double ns, char *buf) {
    if (isnan(ns) || ns < 0)
        return "-";
    uint64_t s = (uint64_t)(ns / NS_PER_S);
    uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    s %= 60;
    if (d > 0)
        snprintf(buf, CELL_BYTES, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", d, h,
                 m, s);
    else if (h > 0)
        snprintf(buf, CELL_BYTES, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", h, m, s);
    else if (m > 0)
        snprintf(buf, CELL_BYTES, "%" PRIu64 "m %02" PRIu64 "s", m, s);
    else
        snprintf(buf, CELL_BYTES, "%.3f s", ns / NS_PER_S);
    return buf;
}

/* The mean of a phase {count, ns} in microseconds with one decimal, or "-"
 * when it is missing or counted nothing. */
static const char *cell_mean_us(const cJSON *phase, char *buf) {
    double count = gf_doc_num(phase, "count"), ns = gf_doc_num(phase, "ns");

    if (isnan(count) || isnan(ns) || count <= 0)
        return "-";
    snprintf(buf, CELL_BYTES, "%.1f", ns / count / NS_PER_US);
    return buf;
}

/* Prints "label" then each of the object's numeric members as "N key",
 * separated by commas; nothing when the object is missing. */
static void table_object_counts(FILE *out, const char *label, const cJSON *obj, int nonzero_only) {
    const cJSON *item;
    char c[CELL_BYTES];
    int first = 1;

    if (!cJSON_IsObject(obj))
        return;
    fprintf(out, "%-13s", label);
    cJSON_ArrayForEach(item, obj) {
        if (!cJSON_IsNumber(item) || (nonzero_only && item->valuedouble == 0))
            continue;
        fputs(first ? "" : ", ", out);
        if (nonzero_only) {
            gf_put_text(out, item->string, GF_ESC_TERMINAL);
            fprintf(out, " %s", cell_count(item->valuedouble, c));
        } else {
            fprintf(out, "%s ", cell_count(item->valuedouble, c));
            gf_put_text(out, item->string, GF_ESC_TERMINAL);
        }
        first = 0;
    }
    fputs(first ? "none\n" : "\n", out);
}

static void table_identity(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES];
    const cJSON *dev = gf_doc_get(st, "device");

    fputs("gpuframed ", out);
    gf_put_text(out, gf_doc_str(st, "version") ? gf_doc_str(st, "version") : "?", GF_ESC_TERMINAL);
    fputs(", engine ", out);
    gf_put_text(out, gf_doc_str(st, "engine") ? gf_doc_str(st, "engine") : "?", GF_ESC_TERMINAL);
    fprintf(out, ", up %s\n", cell_uptime(gf_doc_num(st, "uptime_ns"), a));

    if (cJSON_IsObject(dev)) {
        fprintf(out, "%-13s", "device");
        gf_put_text(out, gf_doc_str(dev, "name") ? gf_doc_str(dev, "name") : "?", GF_ESC_TERMINAL);
        if (gf_doc_str(dev, "compute_capability") != NULL) {
            fputs(", compute ", out);
            gf_put_text(out, gf_doc_str(dev, "compute_capability"), GF_ESC_TERMINAL);
        }
        if (!isnan(gf_doc_num(dev, "sm_count")))
            fprintf(out, ", %s SMs", cell_count(gf_doc_num(dev, "sm_count"), a));
        if (!isnan(gf_doc_num(dev, "memory_bytes")))
            fprintf(out, ", %s", cell_bytes(gf_doc_num(dev, "memory_bytes"), a));
        if (!isnan(gf_doc_num(dev, "threads")))
            fprintf(out, ", %s threads", cell_count(gf_doc_num(dev, "threads"), a));
        if (!isnan(gf_doc_num(dev, "pcie_generation")) && !isnan(gf_doc_num(dev, "pcie_width")))
            fprintf(out, ", PCIe gen %s x%s", cell_count(gf_doc_num(dev, "pcie_generation"), a),
                    cell_count(gf_doc_num(dev, "pcie_width"), b));
        if (gf_doc_str(dev, "pci_bus_id") != NULL) {
            fputs(", bus ", out);
            gf_put_text(out, gf_doc_str(dev, "pci_bus_id"), GF_ESC_TERMINAL);
        }
        fputc('\n', out);
    }
    if (cJSON_IsObject(gf_doc_get(st, "slots"))) {
        char d[CELL_BYTES], e[CELL_BYTES];
        fprintf(out, "%-13s%s (", "slots", cell_count(gf_doc_num(st, "slots.count"), a));
        /* A sharded daemon's count is all shards' slots together. */
        if (!isnan(gf_doc_num(st, "slots.per_shard")))
            fprintf(out, "%s per shard; ", cell_count(gf_doc_num(st, "slots.per_shard"), a));
        fprintf(out, "%s free, %s in flight), %s in + %s out each",
                cell_count(gf_doc_num(st, "slots.free"), b),
                cell_count(gf_doc_num(st, "slots.in_flight"), c),
                cell_bytes(gf_doc_num(st, "slots.in_bytes"), d),
                cell_bytes(gf_doc_num(st, "slots.out_bytes"), e));
        if (!isnan(gf_doc_num(st, "pinned_bytes")))
            fprintf(out, "; pinned %s", cell_bytes(gf_doc_num(st, "pinned_bytes"), c));
        const cJSON *te = gf_doc_get(st, "timing_events");
        if (cJSON_IsBool(te))
            fprintf(out, "; timing events %s", cJSON_IsTrue(te) ? "on" : "off");
        fputc('\n', out);
    }
}

static void table_counters(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES], f[CELL_BYTES];

    fputc('\n', out);
    if (cJSON_IsObject(gf_doc_get(st, "connections")))
        fprintf(out, "%-13s%s open, %s total, %s rejected\n", "connections",
                cell_count(gf_doc_num(st, "connections.open"), a),
                cell_count(gf_doc_num(st, "connections.total"), b),
                cell_count(gf_doc_num(st, "connections.rejected"), c));
    if (cJSON_IsObject(gf_doc_get(st, "frames")))
        fprintf(out,
                "%-13s%s received, %s answered, %s failed, %s dropped, %s truncated, %s in "
                "progress\n",
                "frames", cell_count(gf_doc_num(st, "frames.received"), a),
                cell_count(gf_doc_num(st, "frames.answered"), b),
                cell_count(gf_doc_num(st, "frames.failed"), c),
                cell_count(gf_doc_num(st, "frames.dropped"), d),
                cell_count(gf_doc_num(st, "frames.truncated"), e),
                cell_count(gf_doc_num(st, "frames.in_progress"), f));
    if (cJSON_IsObject(gf_doc_get(st, "bytes")))
        fprintf(out, "%-13s%s in, %s out\n", "bytes", cell_bytes(gf_doc_num(st, "bytes.in"), a),
                cell_bytes(gf_doc_num(st, "bytes.out"), b));
    table_object_counts(out, "requests", gf_doc_get(st, "requests"), 0);
    if (!isnan(gf_doc_num(st, "backpressure_pauses")))
        fprintf(out, "%-13s%s pauses (reading stopped for want of a slot)\n", "backpressure",
                cell_count(gf_doc_num(st, "backpressure_pauses"), a));
    table_object_counts(out, "rejected", gf_doc_get(st, "rejected"), 1);
}

static void table_rates_latency(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES];
    const cJSON *rates = gf_doc_get(st, "rates"), *w;
    const cJSON *lat = gf_doc_get(st, "latency");

    if (cJSON_IsObject(rates) && rates->child != NULL) {
        fprintf(out, "\n%-13s%12s %12s %12s\n", "rates", "frames/s", "in MB/s", "out MB/s");
        cJSON_ArrayForEach(w, rates) {
            fputs("  last ", out);
            gf_put_text(out, w->string, GF_ESC_TERMINAL);
            int pad = 13 - 7 - (int)strlen(w->string);
            fprintf(out, "%*s%12.1f %12.3f %12.3f\n", pad > 0 ? pad : 0, "",
                    gf_doc_num(w, "frames_per_s"), gf_doc_num(w, "bytes_in_per_s") / 1e6,
                    gf_doc_num(w, "bytes_out_per_s") / 1e6);
        }
    }
    if (cJSON_IsObject(lat)) {
        double count = gf_doc_num(lat, "count"), sum = gf_doc_num(lat, "sum_ns");
        fprintf(out, "\n%-13s%s frames", "latency", cell_count(count, a));
        if (count > 0 && !isnan(sum))
            fprintf(out, ", mean %s", cell_ns(sum / count, b));
        fputs(" (end to end, since start)\n", out);
        if (count > 0)
            fprintf(out, "%-13sp50 %s   p90 %s   p99 %s   p99.9 %s   max %s\n", "",
                    cell_ns(gf_doc_num(lat, "p50_ns"), a), cell_ns(gf_doc_num(lat, "p90_ns"), b),
                    cell_ns(gf_doc_num(lat, "p99_ns"), c), cell_ns(gf_doc_num(lat, "p999_ns"), d),
                    cell_ns(gf_doc_num(lat, "max_ns"), e));
    }
}

/* The width of phase column i: its name's, at least PHASE_COLUMN_MIN_WIDTH. */
static int phase_width(size_t i) {
    int w = (int)strlen(phase_columns[i].key);
    return w > PHASE_COLUMN_MIN_WIDTH ? w : PHASE_COLUMN_MIN_WIDTH;
}

/* The width of the pipeline column: the longest name, or "pipeline". */
static int pipeline_name_width(const cJSON *pipelines) {
    const cJSON *p;
    int w = (int)strlen("pipeline");
    cJSON_ArrayForEach(p, pipelines) {
        const char *name = gf_doc_str(p, "name");
        if (name != NULL && (int)strlen(name) > w)
            w = (int)strlen(name);
    }
    return w;
}

/* A pipeline's name cell, padded to `w`. */
static void put_pipeline_name(FILE *out, const cJSON *p, int w) {
    char a[CELL_BYTES];
    const char *name = gf_doc_str(p, "name");
    if (name != NULL) {
        gf_put_text(out, name, GF_ESC_TERMINAL);
        fprintf(out, "%*s", w - (int)strlen(name), "");
    } else {
        fprintf(out, "%-*s", w, cell_count(gf_doc_num(p, "id"), a));
    }
}

static void table_pipelines(FILE *out, const cJSON *st) {
    const cJSON *pipelines = gf_doc_get(st, "pipelines"), *p;
    char a[CELL_BYTES];
    int name_w = pipeline_name_width(pipelines);
    int cpu = gf_doc_engine_is_cpu(st);

    if (!cJSON_IsArray(pipelines) || cJSON_GetArraySize(pipelines) == 0)
        return;
    fprintf(out, "\nmean time per frame and phase, microseconds (sum / count since start)\n");
    fprintf(out, "%-*s %8s", name_w, "pipeline", "frames");
    for (size_t i = 0; i < PHASE_COLUMNS; i++)
        fprintf(out, " %*s", phase_width(i), phase_columns[i].key);
    fputc('\n', out);
    cJSON_ArrayForEach(p, pipelines) {
        put_pipeline_name(out, p, name_w);
        fprintf(out, " %8s", cell_count(gf_doc_num(p, "frames"), a));
        for (size_t i = 0; i < PHASE_COLUMNS; i++)
            fprintf(
                out, " %*s", phase_width(i),
                phase_columns[i].copy && cpu
                    ? "-"
                    : cell_mean_us(gf_doc_get(gf_doc_get(p, "phases"), phase_columns[i].key), a));
        fputc('\n', out);
    }
}

/* Each pipeline's submissions to the engine: frames per submission, mean
 * and by bucket (1, 2, 3-4, ... 33-64), and the mean time a whole frame
 * waited in its slot for its batch to go.  Nothing from a daemon without
 * "batches". */
static void table_batches(FILE *out, const cJSON *st) {
    const cJSON *pipelines = gf_doc_get(st, "pipelines"), *p;
    char a[CELL_BYTES];
    int name_w = pipeline_name_width(pipelines);
    const cJSON *bounds = NULL; /* the first pipeline's: every one has the same */

    cJSON_ArrayForEach(p, pipelines) {
        if (bounds == NULL && cJSON_IsArray(gf_doc_get(gf_doc_get(p, "batches"), "bounds")))
            bounds = gf_doc_get(gf_doc_get(p, "batches"), "bounds");
    }
    if (bounds == NULL)
        return;
    fprintf(out, "\nframes per submission (batches), by pipeline; wait: mean time a whole frame "
                 "waited for its batch, microseconds\n");
    fprintf(out, "%-*s %11s %6s", name_w, "pipeline", "submissions", "mean");
    double lo = 1;
    const cJSON *b;
    cJSON_ArrayForEach(b, bounds) {
        char head[32];
        if (b->valuedouble <= lo)
            snprintf(head, sizeof head, "%.0f", b->valuedouble);
        else
            snprintf(head, sizeof head, "%.0f-%.0f", lo, b->valuedouble);
        fprintf(out, " %6s", head);
        lo = b->valuedouble + 1;
    }
    fprintf(out, " %8s\n", "wait");
    cJSON_ArrayForEach(p, pipelines) {
        const cJSON *bt = gf_doc_get(p, "batches"), *c;
        if (!cJSON_IsObject(bt))
            continue;
        put_pipeline_name(out, p, name_w);
        double n = gf_doc_num(bt, "submissions"), frames = gf_doc_num(bt, "frames");
        fprintf(out, " %11s", cell_count(n, a));
        if (n > 0 && !isnan(frames))
            fprintf(out, " %6.1f", frames / n);
        else
            fprintf(out, " %6s", "-");
        cJSON_ArrayForEach(c, gf_doc_get(bt, "counts")) {
            fprintf(out, " %6s", cell_count(cJSON_IsNumber(c) ? c->valuedouble : NAN, a));
        }
        double wait = gf_doc_num(bt, "wait_ns");
        if (frames > 0 && !isnan(wait))
            fprintf(out, " %8.1f\n", wait / frames / NS_PER_US);
        else
            fprintf(out, " %8s\n", "-");
    }
}

static void table_gpu_loop(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES], f[CELL_BYTES];
    char g[CELL_BYTES];
    const cJSON *gpu = gf_doc_get(st, "gpu");

    fputc('\n', out);
    if (gf_doc_engine_is_cpu(st)) {
        /* The CPU engine has no GPU to be busy and makes no copies. */
    } else if (cJSON_IsObject(gpu)) {
        fprintf(out,
                "%-13slast %s, %s frames: busy h2d %s, kernel %s, d2h %s; copy %s, compute %s\n",
                "gpu", cell_ns(gf_doc_num(gpu, "window_ns"), a),
                cell_count(gf_doc_num(gpu, "frames"), b), cell_pct(gf_doc_num(gpu, "h2d_busy"), c),
                cell_pct(gf_doc_num(gpu, "kernel_busy"), d),
                cell_pct(gf_doc_num(gpu, "d2h_busy"), e), cell_pct(gf_doc_num(gpu, "copy_busy"), f),
                cell_pct(gf_doc_num(gpu, "compute_busy"), g));
        fprintf(out, "%-13s%s of the time two of H2D, kernel, D2H ran at once\n", "overlap",
                cell_pct(gf_doc_num(gpu, "overlap"), a));
    } else if (cJSON_IsNull(gpu)) {
        fprintf(out, "%-13snot measured (timing_events off or trace_frames 0)\n", "gpu");
    }
    if (cJSON_IsObject(gf_doc_get(st, "loop")))
        fprintf(out, "%-13sbusy %s over 1 s, %s over 10 s\n", "event loop",
                cell_pct(gf_doc_num(st, "loop.utilisation_1s"), a),
                cell_pct(gf_doc_num(st, "loop.utilisation_10s"), b));
}

/* A rate with one decimal, or "-". */
static const char *cell_rate(double v, char *buf) {
    if (isnan(v))
        return "-";
    snprintf(buf, CELL_BYTES, "%.1f", v);
    return buf;
}

/* A device ordinal as the shards and devices sections show it: the number,
 * "cpu" for null (the CPU engine), "-" when missing or malformed. */
static const char *cell_device(const cJSON *v, char *buf) {
    if (cJSON_IsNull(v))
        return "cpu";
    return gf_doc_is_uint(v) ? cell_count(v->valuedouble, buf) : "-";
}

/* Writes the shards of array `shards` that are numbers, comma-separated,
 * into buf[len]; a list too long ends in "...". */
static const char *shard_list(const cJSON *shards, char *buf, size_t len) {
    const cJSON *k;
    size_t used = 0;

    buf[0] = '\0';
    cJSON_ArrayForEach(k, shards) {
        if (!gf_doc_is_uint(k))
            continue;
        int n = snprintf(buf + used, len - used, "%s%.0f", used > 0 ? "," : "", k->valuedouble);
        if (n < 0 || (size_t)n >= len - used) {
            snprintf(buf + (used < len - 4 ? used : len - 4), 4, "...");
            break;
        }
        used += (size_t)n;
    }
    return buf[0] != '\0' ? buf : "-";
}

/* Room for the shard list of one device: 32 two-digit shards. */
#define SHARD_LIST_BYTES 96

/* The shards and the devices they run on, each on its own line; left out
 * for a daemon whose document has no such arrays (before sharding). */
static void table_shards(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES];
    char f[CELL_BYTES], g[CELL_BYTES], list[SHARD_LIST_BYTES];
    const cJSON *shards = gf_doc_get(st, "shards"), *devices = gf_doc_get(st, "devices"), *o;
    int name_w = (int)strlen("name"), list_w = (int)strlen("shards");

    if (cJSON_IsArray(shards) && cJSON_GetArraySize(shards) > 0) {
        fputs("\nshards: event loops, each with its own slots (rates over the last 1 s)\n", out);
        fprintf(out, "%5s %6s %11s %10s %9s %10s %9s\n", "shard", "device", "connections",
                "slots busy", "in flight", "frames/s", "loop busy");
        cJSON_ArrayForEach(o, shards) {
            fprintf(out, "%5s %6s %11s %10s %9s %10s %9s\n", cell_count(gf_doc_num(o, "shard"), a),
                    cell_device(gf_doc_get(o, "device"), b),
                    cell_count(gf_doc_num(o, "connections"), c),
                    cell_count(gf_doc_num(o, "slots_busy"), d),
                    cell_count(gf_doc_num(o, "in_flight"), e),
                    cell_rate(gf_doc_num(o, "frames_per_s"), f),
                    cell_pct(gf_doc_num(o, "loop_utilisation_1s"), g));
        }
    }
    if (!cJSON_IsArray(devices) || cJSON_GetArraySize(devices) == 0)
        return;
    cJSON_ArrayForEach(o, devices) {
        const char *name = gf_doc_str(o, "name");
        int lw = (int)strlen(shard_list(gf_doc_get(o, "shards"), list, sizeof list));
        if (name != NULL && (int)strlen(name) > name_w)
            name_w = (int)strlen(name);
        list_w = lw > list_w ? lw : list_w;
    }
    fprintf(out, "\n%6s %-*s %-*s %10s\n", "device", name_w, "name", list_w, "shards", "frames/s");
    cJSON_ArrayForEach(o, devices) {
        const char *name = gf_doc_str(o, "name") != NULL ? gf_doc_str(o, "name") : "?";
        fprintf(out, "%6s ", cell_device(gf_doc_get(o, "index"), a));
        gf_put_text(out, name, GF_ESC_TERMINAL);
        fprintf(out, "%*s %-*s %10s\n", name_w - (int)strlen(name), "", list_w,
                shard_list(gf_doc_get(o, "shards"), list, sizeof list),
                cell_rate(gf_doc_num(o, "frames_per_s"), b));
    }
}

int gf_report_stats_table(const cJSON *stats, FILE *out) {
    if (!cJSON_IsObject(stats))
        return -EINVAL;
    table_identity(out, stats);
    table_counters(out, stats);
    table_rates_latency(out, stats);
    table_pipelines(out, stats);
    table_batches(out, stats);
    table_gpu_loop(out, stats);
    table_shards(out, stats);
    return ferror(out) ? -EIO : 0;
}

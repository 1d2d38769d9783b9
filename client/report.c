/*
 * report: STATS and TRACE documents to a table, Prometheus text, a Chrome
 * trace and an SVG timeline (see report.h for the contract of each).
 *
 * The STATS renderers look keys up as they go and skip what is missing.  The
 * TRACE renderers first turn the document into a flat list of events (one
 * per stage of each frame, in the lanes report.h describes) and draw that, so
 * the Chrome trace, the SVG and gf_report_trace_summary always agree.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Numbers in the documents are doubles; an integer field must be a whole
 * number in [0, 2^63) to be taken as one. */
#define INT_FIELD_MAX 9223372036854775807.0
#define NS_PER_US     1000u
#define NS_PER_MS     1000000u
#define NS_PER_S      1000000000u

/* The number of entries of a static array. */
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* ---- small helpers ---------------------------------------------------------- */

/* The item at dotted path `path` ("frames.answered") below `o`, or NULL. */
static const cJSON *get(const cJSON *o, const char *path) {
    char key[64];

    while (o != NULL && *path != '\0') {
        const char *dot = strchr(path, '.');
        size_t n = dot != NULL ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key || !cJSON_IsObject(o))
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (dot != NULL);
    }
    return o;
}

/* The number at `path`, or NAN when it is missing or not a number. */
static double num(const cJSON *o, const char *path) {
    const cJSON *v = get(o, path);

    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The string at `path`, or NULL. */
static const char *str(const cJSON *o, const char *path) {
    const cJSON *v = get(o, path);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Nonzero when `v` is a number holding a whole value in [0, 2^63). */
static int is_uint(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < INT_FIELD_MAX &&
           v->valuedouble == floor(v->valuedouble);
}

/*
 * The length (1-4) of the well-formed UTF-8 sequence starting at s[0] (with
 * s NUL-terminated), or 0 when it is not one: a stray continuation byte, an
 * overlong form, a surrogate, or a code point above U+10FFFF.
 */
static size_t utf8_len(const unsigned char *s) {
    unsigned cp, n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        cp = s[0] & 0x1Fu;
        n = 2;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        cp = s[0] & 0x0Fu;
        n = 3;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        cp = s[0] & 0x07u;
        n = 4;
    } else {
        return 0;
    }
    for (unsigned i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* How put_text escapes a string for its output. */
enum escape {
    ESC_TERMINAL, /* control characters become '?'                       */
    ESC_PROM,     /* Prometheus label value: \\ \" \n                    */
    ESC_JSON,     /* JSON string body: \\ \" and \u00XX for controls     */
    ESC_XML,      /* XML text or attribute: entities; controls become '?' */
};

/* Writes `s` escaped for `mode`; bytes that are not UTF-8 become '?'.  NULL
 * writes nothing. */
static void put_text(FILE *out, const char *s, enum escape mode) {
    const unsigned char *p = (const unsigned char *)s;

    if (p == NULL)
        return;
    while (*p != '\0') {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputc('?', out);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        unsigned char ch = *p++;
        switch (mode) {
        case ESC_TERMINAL: fputc(ch < 0x20 || ch == 0x7F ? '?' : ch, out); break;
        case ESC_PROM:
            if (ch == '\\' || ch == '"')
                fprintf(out, "\\%c", ch);
            else if (ch == '\n')
                fputs("\\n", out);
            else
                fputc(ch, out);
            break;
        case ESC_JSON:
            if (ch == '\\' || ch == '"')
                fprintf(out, "\\%c", ch);
            else if (ch < 0x20)
                fprintf(out, "\\u%04x", ch);
            else
                fputc(ch, out);
            break;
        case ESC_XML:
            switch (ch) {
            case '&': fputs("&amp;", out); break;
            case '<': fputs("&lt;", out); break;
            case '>': fputs("&gt;", out); break;
            case '"': fputs("&quot;", out); break;
            case '\'': fputs("&apos;", out); break;
            default:
                /* XML 1.0 allows no control character but tab, LF and CR. */
                fputc((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7F ? '?'
                                                                                          : ch,
                      out);
            }
            break;
        }
    }
}

/* Formats `v` so that it reads back as the same double: the shortest of 15
 * or 17 significant digits; NaN and infinities as Prometheus spells them. */
static const char *fmt_double(double v, char *buf, size_t len) {
    if (isnan(v))
        snprintf(buf, len, "NaN");
    else if (isinf(v))
        snprintf(buf, len, "%cInf", v > 0 ? '+' : '-');
    else {
        snprintf(buf, len, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, len, "%.17g", v);
    }
    return buf;
}

const char *gf_report_format_ns(uint64_t ns, const char *micro, char *buf, size_t len) {
    if (ns < NS_PER_US)
        snprintf(buf, len, "%" PRIu64 " ns", ns);
    else if (ns < NS_PER_MS)
        snprintf(buf, len, "%.1f %s", (double)ns / NS_PER_US, micro);
    else if (ns < NS_PER_S)
        snprintf(buf, len, "%.3f ms", (double)ns / NS_PER_MS);
    else
        snprintf(buf, len, "%.3f s", (double)ns / NS_PER_S);
    return buf;
}

/* ---- the summary table ------------------------------------------------------ */

/* Room for one formatted cell. */
#define CELL_BYTES 48
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
    double count = num(phase, "count"), ns = num(phase, "ns");

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
            put_text(out, item->string, ESC_TERMINAL);
            fprintf(out, " %s", cell_count(item->valuedouble, c));
        } else {
            fprintf(out, "%s ", cell_count(item->valuedouble, c));
            put_text(out, item->string, ESC_TERMINAL);
        }
        first = 0;
    }
    fputs(first ? "none\n" : "\n", out);
}

static void table_identity(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES];
    const cJSON *dev = get(st, "device");

    fputs("gpuframed ", out);
    put_text(out, str(st, "version") ? str(st, "version") : "?", ESC_TERMINAL);
    fputs(", engine ", out);
    put_text(out, str(st, "engine") ? str(st, "engine") : "?", ESC_TERMINAL);
    fprintf(out, ", up %s\n", cell_uptime(num(st, "uptime_ns"), a));

    if (cJSON_IsObject(dev)) {
        fprintf(out, "%-13s", "device");
        put_text(out, str(dev, "name") ? str(dev, "name") : "?", ESC_TERMINAL);
        if (str(dev, "compute_capability") != NULL) {
            fputs(", compute ", out);
            put_text(out, str(dev, "compute_capability"), ESC_TERMINAL);
        }
        if (!isnan(num(dev, "sm_count")))
            fprintf(out, ", %s SMs", cell_count(num(dev, "sm_count"), a));
        if (!isnan(num(dev, "memory_bytes")))
            fprintf(out, ", %s", cell_bytes(num(dev, "memory_bytes"), a));
        if (!isnan(num(dev, "threads")))
            fprintf(out, ", %s threads", cell_count(num(dev, "threads"), a));
        if (!isnan(num(dev, "pcie_generation")) && !isnan(num(dev, "pcie_width")))
            fprintf(out, ", PCIe gen %s x%s", cell_count(num(dev, "pcie_generation"), a),
                    cell_count(num(dev, "pcie_width"), b));
        if (str(dev, "pci_bus_id") != NULL) {
            fputs(", bus ", out);
            put_text(out, str(dev, "pci_bus_id"), ESC_TERMINAL);
        }
        fputc('\n', out);
    }
    if (cJSON_IsObject(get(st, "slots"))) {
        char d[CELL_BYTES], e[CELL_BYTES];
        fprintf(out, "%-13s%s (%s free, %s in flight), %s in + %s out each", "slots",
                cell_count(num(st, "slots.count"), a), cell_count(num(st, "slots.free"), b),
                cell_count(num(st, "slots.in_flight"), c), cell_bytes(num(st, "slots.in_bytes"), d),
                cell_bytes(num(st, "slots.out_bytes"), e));
        if (!isnan(num(st, "pinned_bytes")))
            fprintf(out, "; pinned %s", cell_bytes(num(st, "pinned_bytes"), c));
        const cJSON *te = get(st, "timing_events");
        if (cJSON_IsBool(te))
            fprintf(out, "; timing events %s", cJSON_IsTrue(te) ? "on" : "off");
        fputc('\n', out);
    }
}

static void table_counters(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES], f[CELL_BYTES];

    fputc('\n', out);
    if (cJSON_IsObject(get(st, "connections")))
        fprintf(out, "%-13s%s open, %s total, %s rejected\n", "connections",
                cell_count(num(st, "connections.open"), a),
                cell_count(num(st, "connections.total"), b),
                cell_count(num(st, "connections.rejected"), c));
    if (cJSON_IsObject(get(st, "frames")))
        fprintf(out,
                "%-13s%s received, %s answered, %s failed, %s dropped, %s truncated, %s in "
                "progress\n",
                "frames", cell_count(num(st, "frames.received"), a),
                cell_count(num(st, "frames.answered"), b), cell_count(num(st, "frames.failed"), c),
                cell_count(num(st, "frames.dropped"), d),
                cell_count(num(st, "frames.truncated"), e),
                cell_count(num(st, "frames.in_progress"), f));
    if (cJSON_IsObject(get(st, "bytes")))
        fprintf(out, "%-13s%s in, %s out\n", "bytes", cell_bytes(num(st, "bytes.in"), a),
                cell_bytes(num(st, "bytes.out"), b));
    table_object_counts(out, "requests", get(st, "requests"), 0);
    if (!isnan(num(st, "backpressure_pauses")))
        fprintf(out, "%-13s%s pauses (reading stopped for want of a slot)\n", "backpressure",
                cell_count(num(st, "backpressure_pauses"), a));
    table_object_counts(out, "rejected", get(st, "rejected"), 1);
}

static void table_rates_latency(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES];
    const cJSON *rates = get(st, "rates"), *w;
    const cJSON *lat = get(st, "latency");

    if (cJSON_IsObject(rates) && rates->child != NULL) {
        fprintf(out, "\n%-13s%12s %12s %12s\n", "rates", "frames/s", "in MB/s", "out MB/s");
        cJSON_ArrayForEach(w, rates) {
            fputs("  last ", out);
            put_text(out, w->string, ESC_TERMINAL);
            int pad = 13 - 7 - (int)strlen(w->string);
            fprintf(out, "%*s%12.1f %12.3f %12.3f\n", pad > 0 ? pad : 0, "", num(w, "frames_per_s"),
                    num(w, "bytes_in_per_s") / 1e6, num(w, "bytes_out_per_s") / 1e6);
        }
    }
    if (cJSON_IsObject(lat)) {
        double count = num(lat, "count"), sum = num(lat, "sum_ns");
        fprintf(out, "\n%-13s%s frames", "latency", cell_count(count, a));
        if (count > 0 && !isnan(sum))
            fprintf(out, ", mean %s", cell_ns(sum / count, b));
        fputs(" (end to end, since start)\n", out);
        if (count > 0)
            fprintf(out, "%-13sp50 %s   p90 %s   p99 %s   p99.9 %s   max %s\n", "",
                    cell_ns(num(lat, "p50_ns"), a), cell_ns(num(lat, "p90_ns"), b),
                    cell_ns(num(lat, "p99_ns"), c), cell_ns(num(lat, "p999_ns"), d),
                    cell_ns(num(lat, "max_ns"), e));
    }
}

/* The width of phase column i: its name's, at least PHASE_COLUMN_MIN_WIDTH. */
static int phase_width(size_t i) {
    int w = (int)strlen(phase_columns[i].key);
    return w > PHASE_COLUMN_MIN_WIDTH ? w : PHASE_COLUMN_MIN_WIDTH;
}

/* Nonzero for a daemon on the CPU engine: no GPU, no copies to report. */
static int engine_is_cpu(const cJSON *st) {
    const char *engine = str(st, "engine");
    return engine != NULL && strcmp(engine, "cpu") == 0;
}

static void table_pipelines(FILE *out, const cJSON *st) {
    const cJSON *pipelines = get(st, "pipelines"), *p;
    char a[CELL_BYTES];
    int name_w = (int)strlen("pipeline");
    int cpu = engine_is_cpu(st);

    if (!cJSON_IsArray(pipelines) || cJSON_GetArraySize(pipelines) == 0)
        return;
    cJSON_ArrayForEach(p, pipelines) {
        const char *name = str(p, "name");
        if (name != NULL && (int)strlen(name) > name_w)
            name_w = (int)strlen(name);
    }
    fprintf(out, "\nmean time per frame and phase, microseconds (sum / count since start)\n");
    fprintf(out, "%-*s %8s", name_w, "pipeline", "frames");
    for (size_t i = 0; i < PHASE_COLUMNS; i++)
        fprintf(out, " %*s", phase_width(i), phase_columns[i].key);
    fputc('\n', out);
    cJSON_ArrayForEach(p, pipelines) {
        const char *name = str(p, "name");
        if (name != NULL) {
            put_text(out, name, ESC_TERMINAL);
            fprintf(out, "%*s", name_w - (int)strlen(name), "");
        } else {
            fprintf(out, "%-*s", name_w, cell_count(num(p, "id"), a));
        }
        fprintf(out, " %8s", cell_count(num(p, "frames"), a));
        for (size_t i = 0; i < PHASE_COLUMNS; i++)
            fprintf(out, " %*s", phase_width(i),
                    phase_columns[i].copy && cpu
                        ? "-"
                        : cell_mean_us(get(get(p, "phases"), phase_columns[i].key), a));
        fputc('\n', out);
    }
}

static void table_gpu_loop(FILE *out, const cJSON *st) {
    char a[CELL_BYTES], b[CELL_BYTES], c[CELL_BYTES], d[CELL_BYTES], e[CELL_BYTES], f[CELL_BYTES];
    char g[CELL_BYTES];
    const cJSON *gpu = get(st, "gpu");

    fputc('\n', out);
    if (engine_is_cpu(st)) {
        /* The CPU engine has no GPU to be busy and makes no copies. */
    } else if (cJSON_IsObject(gpu)) {
        fprintf(out,
                "%-13slast %s, %s frames: busy h2d %s, kernel %s, d2h %s; copy %s, compute %s\n",
                "gpu", cell_ns(num(gpu, "window_ns"), a), cell_count(num(gpu, "frames"), b),
                cell_pct(num(gpu, "h2d_busy"), c), cell_pct(num(gpu, "kernel_busy"), d),
                cell_pct(num(gpu, "d2h_busy"), e), cell_pct(num(gpu, "copy_busy"), f),
                cell_pct(num(gpu, "compute_busy"), g));
        fprintf(out, "%-13s%s of the time two of H2D, kernel, D2H ran at once\n", "overlap",
                cell_pct(num(gpu, "overlap"), a));
    } else if (cJSON_IsNull(gpu)) {
        fprintf(out, "%-13snot measured (timing_events off or trace_frames 0)\n", "gpu");
    }
    if (cJSON_IsObject(get(st, "loop")))
        fprintf(out, "%-13sbusy %s over 1 s, %s over 10 s\n", "event loop",
                cell_pct(num(st, "loop.utilisation_1s"), a),
                cell_pct(num(st, "loop.utilisation_10s"), b));
}

int gf_report_stats_table(const cJSON *stats, FILE *out) {
    if (!cJSON_IsObject(stats))
        return -EINVAL;
    table_identity(out, stats);
    table_counters(out, stats);
    table_rates_latency(out, stats);
    table_pipelines(out, stats);
    table_gpu_loop(out, stats);
    return ferror(out) ? -EIO : 0;
}

/* ---- Prometheus text format ----------------------------------------------- */

/* Room for one number as fmt_double writes it. */
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
        put_text(p->out, value, ESC_PROM);
        fputc('"', p->out);
        first = 0;
    }
    va_end(ap);
    fprintf(p->out, "%s %s\n", first ? "" : "}", fmt_double(v, buf, sizeof buf));
}

/* One family with one unlabelled sample: the number at `path` divided by
 * `divisor` (1e9 turns ns into seconds exactly where that is possible). */
static void prom_single(struct prom *p, const cJSON *st, const char *path, const char *name,
                        const char *type, const char *help, double divisor) {
    prom_family(p, name, type, help);
    prom_sample(p, "", num(st, path) / divisor, (const char *)NULL);
}

/* One family with a sample per numeric member of the object at `path`,
 * labelled label=<member name>. */
static void prom_by_key(struct prom *p, const cJSON *st, const char *path, const char *label,
                        const char *name, const char *type, const char *help) {
    const cJSON *item, *obj = get(st, path);

    prom_family(p, name, type, help);
    if (!cJSON_IsObject(obj))
        return;
    cJSON_ArrayForEach(item, obj) {
        if (cJSON_IsNumber(item))
            prom_sample(p, "", item->valuedouble, label, item->string, (const char *)NULL);
    }
}

/* One family with a sample per window of `rates` ("1s", "10s"). */
static void prom_rates(struct prom *p, const cJSON *st, const char *key, const char *name,
                       const char *help) {
    const cJSON *w, *rates = get(st, "rates");

    prom_family(p, name, "gauge", help);
    if (!cJSON_IsObject(rates))
        return;
    cJSON_ArrayForEach(w, rates) {
        prom_sample(p, "", num(w, key), "window", w->string, (const char *)NULL);
    }
}

/* The label a pipeline's samples carry: its name, else its id, else "?". */
static const char *pipeline_label(const cJSON *pl, char *buf) {
    const char *name = str(pl, "name");

    if (name != NULL)
        return name;
    if (is_uint(get(pl, "id"))) {
        snprintf(buf, CELL_BYTES, "%.0f", num(pl, "id"));
        return buf;
    }
    return "?";
}

static void prom_pipelines(struct prom *p, const cJSON *st) {
    const cJSON *pipelines = get(st, "pipelines"), *pl, *ph;
    char buf[CELL_BYTES];

    if (!cJSON_IsArray(pipelines))
        return;
    prom_family(p, "gpuframe_pipeline_frames_total", "counter",
                "Frames answered with a result, by pipeline.");
    cJSON_ArrayForEach(pl, pipelines) {
        prom_sample(p, "", num(pl, "frames"), "pipeline", pipeline_label(pl, buf),
                    (const char *)NULL);
    }
    prom_family(p, "gpuframe_phase_seconds", "summary",
                "Time answered frames spent in each phase (slot_wait, receive, h2d, kernel, d2h, "
                "completion_delay, reply_write, end_to_end): _sum / _count is the mean.");
    cJSON_ArrayForEach(pl, pipelines) {
        const char *label = pipeline_label(pl, buf);
        if (!cJSON_IsObject(get(pl, "phases")))
            continue;
        cJSON_ArrayForEach(ph, get(pl, "phases")) {
            double ns = num(ph, "ns"), count = num(ph, "count");
            if (isnan(ns) || isnan(count))
                continue;
            prom_sample(p, "_sum", ns / NS_PER_S, "pipeline", label, "phase", ph->string,
                        (const char *)NULL);
            prom_sample(p, "_count", count, "pipeline", label, "phase", ph->string,
                        (const char *)NULL);
        }
    }
}

/* The latency histogram; -EINVAL when its arrays do not fit together. */
static int prom_latency(struct prom *p, const cJSON *st, char *err, size_t err_len) {
    const cJSON *lat = get(st, "latency");
    const cJSON *bounds = get(lat, "bounds_ns"), *counts = get(lat, "counts");
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
            if (!is_uint(c) || (i < nb && (!is_uint(b) || b->valuedouble <= prev))) {
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
                fmt_double(cJSON_GetArrayItem(bounds, i)->valuedouble / NS_PER_S, le, sizeof le);
            else
                snprintf(le, sizeof le, "+Inf");
            prom_sample(p, "_bucket", total, "le", le, (const char *)NULL);
        }
        /* _count is the +Inf bucket by definition, whatever "count" says. */
        prom_sample(p, "_sum", num(lat, "sum_ns") / NS_PER_S, (const char *)NULL);
        prom_sample(p, "_count", total, (const char *)NULL);
    }
    prom_single(p, lat, "max_ns", "gpuframe_latency_max_seconds", "gauge",
                "Largest end-to-end latency since start.", (double)NS_PER_S);
    return 0;
}

static void prom_gpu(struct prom *p, const cJSON *st) {
    static const char *const stages[] = {"h2d", "kernel", "d2h"};
    const cJSON *gpu = get(st, "gpu");
    char key[32];

    if (!cJSON_IsObject(gpu))
        return; /* null: timing events off or no trace ring */
    prom_single(p, gpu, "window_ns", "gpuframe_gpu_window_seconds", "gauge",
                "Length of the window the GPU busy fractions cover.", (double)NS_PER_S);
    prom_single(p, gpu, "frames", "gpuframe_gpu_window_frames", "gauge",
                "Frames with a timed stage inside the GPU window.", 1.0);
    prom_family(p, "gpuframe_gpu_busy_ratio", "gauge",
                "Fraction of the GPU window during which some H2D copy, kernel or D2H copy ran.");
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        snprintf(key, sizeof key, "%s_busy", stages[i]);
        prom_sample(p, "", num(gpu, key), "stage", stages[i], (const char *)NULL);
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
};

static void prom_identity(struct prom *p, const cJSON *st) {
    const char *version = str(st, "version"), *engine = str(st, "engine");
    const char *device = str(st, "device.name");
    const cJSON *te = get(st, "timing_events");

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

int gf_report_stats_prometheus(const cJSON *stats, FILE *out, char *err, size_t err_len) {
    struct prom p = {.out = out};
    int rc;

    if (!cJSON_IsObject(stats)) {
        gf_errorf(err, err_len, "the STATS document is not a JSON object");
        return -EINVAL;
    }
    prom_identity(&p, stats);
    prom_metrics(&p, stats, counter_metrics, COUNT_OF(counter_metrics));
    prom_pipelines(&p, stats);
    rc = prom_latency(&p, stats, err, err_len);
    if (rc < 0)
        return rc;
    prom_rates(&p, stats, "frames_per_s", "gpuframe_frames_per_second",
               "Frames answered per second over the window.");
    prom_rates(&p, stats, "bytes_in_per_s", "gpuframe_input_bytes_per_second",
               "Frame payload bytes received per second over the window.");
    prom_rates(&p, stats, "bytes_out_per_s", "gpuframe_output_bytes_per_second",
               "Result payload bytes written per second over the window.");
    prom_gpu(&p, stats);
    prom_family(&p, "gpuframe_loop_utilisation_ratio", "gauge",
                "Fraction of the window the event loop was busy (not idle in epoll).");
    prom_sample(&p, "", num(stats, "loop.utilisation_1s"), "window", "1s", (const char *)NULL);
    prom_sample(&p, "", num(stats, "loop.utilisation_10s"), "window", "10s", (const char *)NULL);
    prom_single(&p, stats, "loop.idle_ns", "gpuframe_loop_idle_seconds_total", "counter",
                "Time the event loop spent idle since start.", (double)NS_PER_S);
    return ferror(out) ? -EIO : 0;
}

/* ---- TRACE: frames to events ------------------------------------------------ */

/* The stages of a frame, in the order they happen. */
enum ev_kind { EV_RECEIVE, EV_H2D, EV_KERNEL, EV_D2H, EV_COMPLETION, EV_REPLY, EV_KINDS };

static const struct {
    const char *name;     /* event name, also in labels and tooltips */
    const char *category; /* Chrome "cat"                            */
    enum gf_report_lane lane;
    const char *colour; /* SVG fill                                */
    int out_bytes;      /* 1: the frame's output size is its bytes */
} ev_kinds[EV_KINDS] = {
    [EV_RECEIVE] = {"receive", "host", GF_REPORT_LANE_HOST, "#9c9c9c", 0},
    [EV_H2D] = {"H2D", "gpu", GF_REPORT_LANE_H2D, "#4e79a7", 0},
    [EV_KERNEL] = {"kernel", "gpu", GF_REPORT_LANE_KERNEL, "#59a14f", 0},
    [EV_D2H] = {"D2H", "gpu", GF_REPORT_LANE_D2H, "#f28e2b", 1},
    [EV_COMPLETION] = {"completion_delay", "host", GF_REPORT_LANE_HOST, "#e15759", 1},
    [EV_REPLY] = {"reply_write", "host", GF_REPORT_LANE_HOST, "#b07aa1", 1},
};

static const char *const lane_names[GF_REPORT_LANES_PER_SLOT] = {
    [GF_REPORT_LANE_H2D] = "H2D",
    [GF_REPORT_LANE_KERNEL] = "kernel",
    [GF_REPORT_LANE_D2H] = "D2H",
    [GF_REPORT_LANE_HOST] = "host",
};

/* One frame of the TRACE document, checked. */
struct tframe {
    uint64_t frame_id, conn, in_bytes, out_bytes, pipeline, status;
    uint32_t slot;
    uint64_t arrived, claimed, submitted, done, drained, written;
};

/* One event: a stage of frame `frame` from `begin` to `end` (ns after t0). */
struct tev {
    size_t frame;
    enum ev_kind kind;
    uint64_t begin, end;
};

/* A TRACE document as the renderers draw it. */
struct tdoc {
    const cJSON *doc;
    struct tframe *frames;
    size_t frame_count;
    struct tev *events;
    size_t event_count;
    unsigned char *lane_used; /* [slot_count * LANES_PER_SLOT]: lane has events */
    uint32_t slot_count;      /* highest slot with an event + 1                 */
    size_t lanes;             /* lanes with events                              */
    uint64_t begin, end;      /* span of the events; 0, 0 without events         */
};

static void tdoc_free(struct tdoc *t) {
    free(t->frames);
    free(t->events);
    free(t->lane_used);
    memset(t, 0, sizeof *t);
}

/* Reads the integer member `key` of frame `i` into *out; when `required`
 * is 0 a missing member reads as 0. */
static int frame_uint(const cJSON *f, size_t i, const char *key, int required, uint64_t *out,
                      char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, key);

    if (v == NULL && !required) {
        *out = 0;
        return 0;
    }
    if (!is_uint(v)) {
        gf_errorf(err, err_len, "trace frame %zu: \"%s\" is %s, not a non-negative integer", i, key,
                  v == NULL ? "missing" : "something else");
        return -EINVAL;
    }
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* Reads the stage interval `key` of frame `i`: 1 and [*b, *e] when there is
 * one, 0 when it is null or missing, -EINVAL when malformed. */
static int frame_interval(const cJSON *f, size_t i, const char *key, uint64_t *b, uint64_t *e,
                          char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, key);

    if (v == NULL || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !is_uint(v->child) ||
        !is_uint(v->child->next) || v->child->next->valuedouble < v->child->valuedouble) {
        gf_errorf(err, err_len, "trace frame %zu: \"%s\" is not null or [begin, end]", i, key);
        return -EINVAL;
    }
    *b = (uint64_t)v->child->valuedouble;
    *e = (uint64_t)v->child->next->valuedouble;
    return 1;
}

/* Appends the event [b, e] unless it is empty. */
static void add_event(struct tdoc *t, size_t frame, enum ev_kind kind, uint64_t b, uint64_t e) {
    if (e <= b)
        return;
    t->events[t->event_count++] = (struct tev){.frame = frame, .kind = kind, .begin = b, .end = e};
}

/* Checks frame `i` (`f`) and appends its events. */
static int parse_frame(struct tdoc *t, const cJSON *f, size_t i, char *err, size_t err_len) {
    struct tframe *fr = &t->frames[i];
    uint64_t slot, iv[3][2];
    int has[3];
    static const char *const stage_keys[3] = {"h2d", "kernel", "d2h"};

    if (!cJSON_IsObject(f)) {
        gf_errorf(err, err_len, "trace frame %zu is not an object", i);
        return -EINVAL;
    }
    const struct {
        const char *key;
        int required; /* the host timestamps that place the frame's events */
        uint64_t *dst;
    } fields[] = {
        {"slot", 1, &slot},
        {"claimed", 1, &fr->claimed},
        {"submitted", 1, &fr->submitted},
        {"done", 1, &fr->done},
        {"drained", 1, &fr->drained},
        {"written", 1, &fr->written},
        {"arrived", 0, &fr->arrived},
        {"frame_id", 0, &fr->frame_id},
        {"conn", 0, &fr->conn},
        {"pipeline", 0, &fr->pipeline},
        {"status", 0, &fr->status},
        {"in_bytes", 0, &fr->in_bytes},
        {"out_bytes", 0, &fr->out_bytes},
    };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (frame_uint(f, i, fields[k].key, fields[k].required, fields[k].dst, err, err_len) < 0)
            return -EINVAL;
    if (slot >= GF_REPORT_SLOTS_MAX) {
        gf_errorf(err, err_len, "trace frame %zu: slot %" PRIu64 " is beyond %u", i, slot,
                  GF_REPORT_SLOTS_MAX);
        return -EINVAL;
    }
    fr->slot = (uint32_t)slot;
    if (fr->arrived == 0 && cJSON_GetObjectItemCaseSensitive(f, "arrived") == NULL)
        fr->arrived = fr->claimed;
    for (int s = 0; s < 3; s++) {
        has[s] = frame_interval(f, i, stage_keys[s], &iv[s][0], &iv[s][1], err, err_len);
        if (has[s] < 0)
            return -EINVAL;
    }

    /* GPU done on the host clock: the end of the last timed stage, else the
     * moment the engine's thread saw the frame finish. */
    uint64_t gpu_end = has[2] ? iv[2][1] : has[1] ? iv[1][1] : has[0] ? iv[0][1] : fr->done;
    add_event(t, i, EV_RECEIVE, fr->claimed, fr->submitted);
    for (int s = 0; s < 3; s++)
        if (has[s])
            add_event(t, i, (enum ev_kind)(EV_H2D + s), iv[s][0], iv[s][1]);
    add_event(t, i, EV_COMPLETION, gpu_end, fr->drained);
    add_event(t, i, EV_REPLY, fr->drained, fr->written);
    return 0;
}

/* Parses and checks `trace` into `t` (freed with tdoc_free, also on error). */
static int tdoc_parse(const cJSON *trace, struct tdoc *t, char *err, size_t err_len) {
    const cJSON *frames = get(trace, "frames"), *f;
    size_t i = 0;

    memset(t, 0, sizeof *t);
    t->doc = trace;
    if (!cJSON_IsObject(trace) || !cJSON_IsArray(frames)) {
        gf_errorf(err, err_len, "the TRACE document is not an object with a \"frames\" array");
        return -EINVAL;
    }
    size_t n = (size_t)cJSON_GetArraySize(frames);
    if (n > 0) {
        t->frames = calloc(n, sizeof *t->frames);
        t->events = calloc(n, EV_KINDS * sizeof *t->events);
        if (t->frames == NULL || t->events == NULL) {
            gf_errorf(err, err_len, "out of memory for %zu trace frames", n);
            return -ENOMEM;
        }
    }
    cJSON_ArrayForEach(f, frames) {
        if (parse_frame(t, f, i, err, err_len) < 0)
            return -EINVAL;
        i++;
    }
    t->frame_count = n;

    for (size_t k = 0; k < t->event_count; k++) {
        const struct tev *e = &t->events[k];
        uint32_t slots = t->frames[e->frame].slot + 1;
        t->slot_count = slots > t->slot_count ? slots : t->slot_count;
        if (k == 0 || e->begin < t->begin)
            t->begin = e->begin;
        if (k == 0 || e->end > t->end)
            t->end = e->end;
    }
    if (t->slot_count > 0) {
        t->lane_used = calloc((size_t)t->slot_count * GF_REPORT_LANES_PER_SLOT, 1);
        if (t->lane_used == NULL) {
            gf_errorf(err, err_len, "out of memory");
            return -ENOMEM;
        }
    }
    for (size_t k = 0; k < t->event_count; k++) {
        const struct tev *e = &t->events[k];
        unsigned char *used =
            &t->lane_used[(size_t)t->frames[e->frame].slot * GF_REPORT_LANES_PER_SLOT +
                          ev_kinds[e->kind].lane];
        t->lanes += *used == 0;
        *used = 1;
    }
    return 0;
}

int gf_report_trace_summary(const cJSON *trace, gf_report_trace_info *info, char *err,
                            size_t err_len) {
    struct tdoc t;
    int rc = tdoc_parse(trace, &t, err, err_len);

    if (rc == 0) {
        info->frames = t.frame_count;
        info->events = t.event_count;
        info->lanes = t.lanes;
        info->begin_ns = t.begin;
        info->end_ns = t.end;
    }
    tdoc_free(&t);
    return rc;
}

/* The name of pipeline `id` in LIST document `list`, or NULL. */
static const char *pipeline_name(const cJSON *list, uint64_t id) {
    const cJSON *p;

    cJSON_ArrayForEach(p, get(list, "pipelines")) {
        if (is_uint(get(p, "id")) && (uint64_t)num(p, "id") == id)
            return str(p, "name");
    }
    return NULL;
}

/* Writes `ns` as microseconds with exactly three decimals. */
static void put_us(FILE *out, uint64_t ns) {
    fprintf(out, "%" PRIu64 ".%03u", ns / NS_PER_US, (unsigned)(ns % NS_PER_US));
}

/* ---- TRACE: Chrome trace-event JSON ---------------------------------------- */

static void chrome_metadata(FILE *out, const struct tdoc *t) {
    const char *engine = str(t->doc, "engine");

    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\""
          "gpuframed",
          out);
    if (engine != NULL) {
        fputs(" (", out);
        put_text(out, engine, ESC_JSON);
        fputs(" engine)", out);
    }
    fputs("\"}}", out);
    for (uint32_t s = 0; s < t->slot_count; s++)
        for (unsigned l = 0; l < GF_REPORT_LANES_PER_SLOT; l++) {
            if (!t->lane_used[(size_t)s * GF_REPORT_LANES_PER_SLOT + l])
                continue;
            unsigned tid = GF_REPORT_TID(s, l);
            fprintf(out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
                    "\"args\":{\"name\":\"slot %" PRIu32 " %s\"}}",
                    tid, s, lane_names[l]);
            fprintf(out,
                    ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
                    "\"args\":{\"sort_index\":%u}}",
                    tid, tid);
        }
}

static void chrome_event(FILE *out, const struct tdoc *t, const struct tev *e,
                         const cJSON *pipelines) {
    const struct tframe *f = &t->frames[e->frame];
    const char *pname = pipeline_name(pipelines, f->pipeline);

    fprintf(out, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":",
            ev_kinds[e->kind].name, ev_kinds[e->kind].category,
            GF_REPORT_TID(f->slot, ev_kinds[e->kind].lane));
    put_us(out, e->begin);
    fputs(",\"dur\":", out);
    put_us(out, e->end - e->begin);
    fprintf(out, ",\"args\":{\"frame_id\":%" PRIu64 ",\"pipeline\":%" PRIu64, f->frame_id,
            f->pipeline);
    if (pname != NULL) {
        fputs(",\"pipeline_name\":\"", out);
        put_text(out, pname, ESC_JSON);
        fputc('"', out);
    }
    fprintf(out,
            ",\"slot\":%" PRIu32 ",\"conn\":%" PRIu64 ",\"status\":%" PRIu64 ",\"bytes\":%" PRIu64
            ",\"slot_wait_ns\":%" PRIu64 ",\"end_to_end_ns\":%" PRIu64 "}}",
            f->slot, f->conn, f->status, ev_kinds[e->kind].out_bytes ? f->out_bytes : f->in_bytes,
            f->claimed > f->arrived ? f->claimed - f->arrived : 0,
            f->written > f->arrived ? f->written - f->arrived : 0);
}

int gf_report_trace_chrome(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                           size_t err_len) {
    struct tdoc t;
    int rc = tdoc_parse(trace, &t, err, err_len);

    if (rc < 0) {
        tdoc_free(&t);
        return rc;
    }
    fputs("{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"source\":\"gpuframed TRACE\","
          "\"clock\":\"",
          out);
    put_text(out, str(trace, "clock") ? str(trace, "clock") : "monotonic", ESC_JSON);
    fprintf(out, "\",\"t0_ns\":%.0f,\"engine\":\"",
            is_uint(get(trace, "t0_ns")) ? num(trace, "t0_ns") : 0.0);
    put_text(out, str(trace, "engine"), ESC_JSON);
    fprintf(out, "\",\"frames\":%zu},\n\"traceEvents\":[\n", t.frame_count);
    chrome_metadata(out, &t);
    for (size_t k = 0; k < t.event_count; k++)
        chrome_event(out, &t, &t.events[k], pipelines);
    fputs("\n]}\n", out);
    tdoc_free(&t);
    return ferror(out) ? -EIO : 0;
}

/* ---- TRACE: SVG timeline ---------------------------------------------------- */

/* Layout, in SVG user units (pixels). */
#define SVG_WIDTH      1200 /* the whole picture                         */
#define SVG_LABEL_W    130  /* lane labels, left of the plot             */
#define SVG_RIGHT_W    30   /* margin right of the plot                  */
#define SVG_TOP_H      62   /* title and legend above the lanes          */
#define SVG_ROW_H      20   /* one lane                                  */
#define SVG_BAR_H      14   /* an event's rectangle inside its lane      */
#define SVG_AXIS_H     48   /* tick labels and the axis caption          */
#define SVG_CHAR_W     7    /* a generous width of one label character   */
#define SVG_LEGEND_GAP 20   /* between one legend entry and the next     */
/* About this many ticks on the time axis. */
#define SVG_TICKS 8
/* The micro sign in the picture: the real one, the file is UTF-8. */
#define SVG_MICRO "\xC2\xB5s"

/* The 1-2-5 tick step for `span_ns` and the unit its labels use. */
static void tick_step(uint64_t span_ns, uint64_t *step, uint64_t *unit, const char **unit_name) {
    uint64_t raw = span_ns / SVG_TICKS, p = 1;

    while (p <= raw / 10)
        p *= 10;
    *step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    if (*step >= NS_PER_S) {
        *unit = NS_PER_S;
        *unit_name = "s";
    } else if (*step >= NS_PER_MS) {
        *unit = NS_PER_MS;
        *unit_name = "ms";
    } else if (*step >= NS_PER_US) {
        *unit = NS_PER_US;
        *unit_name = SVG_MICRO;
    } else {
        *unit = 1;
        *unit_name = "ns";
    }
}

static void svg_header(FILE *out, int height) {
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, "
            "sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH, height);
}

static void svg_title(FILE *out, const struct tdoc *t) {
    char span[CELL_BYTES];
    const char *engine = str(t->doc, "engine");

    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">gpuframed trace: ", out);
    if (t->event_count == 0)
        fprintf(out, "%zu frames, nothing to draw", t->frame_count);
    else
        fprintf(out, "%zu frame%s over %s", t->frame_count, t->frame_count == 1 ? "" : "s",
                gf_report_format_ns(t->end - t->begin, SVG_MICRO, span, sizeof span));
    if (engine != NULL) {
        fputs(", ", out);
        put_text(out, engine, ESC_XML);
        fputs(" engine", out);
    }
    if (is_uint(get(t->doc, "slots")))
        fprintf(out, ", %.0f slots", num(t->doc, "slots"));
    fputs("</text>\n", out);
}

static void svg_legend(FILE *out) {
    int x = SVG_LABEL_W;

    for (int k = 0; k < EV_KINDS; k++) {
        const char *lane = ev_kinds[k].lane == GF_REPORT_LANE_HOST ? " (host)" : "";
        fprintf(out,
                "<rect class=\"key\" x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"46\">%s%s</text>\n",
                x, ev_kinds[k].colour, x + 17, ev_kinds[k].name, lane);
        x += 17 + (int)(strlen(ev_kinds[k].name) + strlen(lane)) * SVG_CHAR_W + SVG_LEGEND_GAP;
    }
}

/* The lane rows and their labels; `row_of` gets each used lane's row. */
static void svg_lanes(FILE *out, const struct tdoc *t, int *row_of) {
    int row = 0;

    fputs("<g id=\"lanes\">\n", out);
    for (uint32_t s = 0; s < t->slot_count; s++)
        for (unsigned l = 0; l < GF_REPORT_LANES_PER_SLOT; l++) {
            size_t lane = (size_t)s * GF_REPORT_LANES_PER_SLOT + l;
            row_of[lane] = -1;
            if (!t->lane_used[lane])
                continue;
            int y = SVG_TOP_H + row * SVG_ROW_H;
            /* Shade every other slot so its lanes read as one group. */
            fprintf(out,
                    "<rect class=\"lane\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"%s\"/><text x=\"%d\" y=\"%d\" text-anchor=\"end\">slot %" PRIu32
                    " %s</text>\n",
                    y, SVG_WIDTH, SVG_ROW_H, s % 2 ? "#f3f3f3" : "#fbfbfb", SVG_LABEL_W - 8,
                    y + SVG_ROW_H / 2 + 4, s, lane_names[l]);
            row_of[lane] = row++;
        }
    fputs("</g>\n", out);
}

static void svg_axis(FILE *out, const struct tdoc *t, int rows, double scale) {
    uint64_t span = t->end - t->begin, step, unit;
    const char *unit_name;
    int top = SVG_TOP_H, bottom = SVG_TOP_H + rows * SVG_ROW_H;

    tick_step(span, &step, &unit, &unit_name);
    fputs("<g id=\"axis\" stroke=\"#c8c8c8\" stroke-width=\"1\">\n", out);
    for (uint64_t v = 0; v <= span; v += step) {
        double x = SVG_LABEL_W + (double)v * scale;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>\n", x, top, x,
                bottom + 4);
        if (span - v < step)
            break; /* the next tick would be past the end (and v + step may wrap) */
    }
    fputs("</g>\n<g id=\"ticks\" text-anchor=\"middle\" fill=\"#333333\">\n", out);
    for (uint64_t v = 0; v <= span; v += step) {
        fprintf(out, "<text x=\"%.2f\" y=\"%d\">%" PRIu64 " %s</text>\n",
                SVG_LABEL_W + (double)v * scale, bottom + 17, v / unit, unit_name);
        if (span - v < step)
            break;
    }
    fprintf(out,
            "</g>\n<text x=\"%d\" y=\"%d\" fill=\"#555555\">time from the first event, %.6f s "
            "after the daemon started; hover a bar for its frame</text>\n",
            SVG_LABEL_W, bottom + 38, (double)t->begin / NS_PER_S);
}

static void svg_event(FILE *out, const struct tdoc *t, const struct tev *e, int row, double scale,
                      const cJSON *pipelines) {
    const struct tframe *f = &t->frames[e->frame];
    const char *pname = pipeline_name(pipelines, f->pipeline);
    double x = SVG_LABEL_W + (double)(e->begin - t->begin) * scale;
    double w = (double)(e->end - e->begin) * scale;
    char dur[CELL_BYTES];

    if (w < GF_REPORT_SVG_MIN_RECT_PX)
        w = GF_REPORT_SVG_MIN_RECT_PX;
    fprintf(out,
            "<rect class=\"ev\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
            "<title>frame %" PRIu64 " (pipeline ",
            x, SVG_TOP_H + row * SVG_ROW_H + (SVG_ROW_H - SVG_BAR_H) / 2, w, SVG_BAR_H,
            ev_kinds[e->kind].colour, f->frame_id);
    if (pname != NULL)
        put_text(out, pname, ESC_XML);
    else
        fprintf(out, "%" PRIu64, f->pipeline);
    fprintf(out, ", slot %" PRIu32 "): %s %s, %" PRIu64 " bytes</title></rect>\n", f->slot,
            ev_kinds[e->kind].name,
            gf_report_format_ns(e->end - e->begin, SVG_MICRO, dur, sizeof dur),
            ev_kinds[e->kind].out_bytes ? f->out_bytes : f->in_bytes);
}

int gf_report_trace_svg(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                        size_t err_len) {
    struct tdoc t;
    int *row_of = NULL;
    int rc = tdoc_parse(trace, &t, err, err_len);

    if (rc < 0)
        goto done;
    if (t.event_count == 0) {
        svg_header(out, SVG_TOP_H);
        svg_title(out, &t);
        fputs("<text x=\"10\" y=\"46\">The daemon has answered no frame since it started, or "
              "keeps none (trace_frames 0).</text>\n</svg>\n",
              out);
        rc = ferror(out) ? -EIO : 0;
        goto done;
    }
    row_of = malloc((size_t)t.slot_count * GF_REPORT_LANES_PER_SLOT * sizeof *row_of);
    if (row_of == NULL) {
        gf_errorf(err, err_len, "out of memory");
        rc = -ENOMEM;
        goto done;
    }
    int rows = (int)t.lanes;
    double span = (double)(t.end - t.begin);
    double scale = (SVG_WIDTH - SVG_LABEL_W - SVG_RIGHT_W) / span;

    svg_header(out, SVG_TOP_H + rows * SVG_ROW_H + SVG_AXIS_H);
    svg_title(out, &t);
    svg_legend(out);
    svg_lanes(out, &t, row_of);
    svg_axis(out, &t, rows, scale);
    fputs("<g id=\"events\">\n", out);
    for (size_t k = 0; k < t.event_count; k++) {
        const struct tev *e = &t.events[k];
        size_t lane =
            (size_t)t.frames[e->frame].slot * GF_REPORT_LANES_PER_SLOT + ev_kinds[e->kind].lane;
        svg_event(out, &t, e, row_of[lane], scale, pipelines);
    }
    fputs("</g>\n</svg>\n", out);
    rc = ferror(out) ? -EIO : 0;
done:
    free(row_of);
    tdoc_free(&t);
    return rc;
}

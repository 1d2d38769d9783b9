/*
 * Check suite of client/report.c: fixed STATS and TRACE documents (written
 * here after daemon/STATS.md) rendered as a table, Prometheus text, a Chrome
 * trace and an SVG, each read back by a test-side parser: a Prometheus text
 * parser (names, labels, escapes, HELP/TYPE, grouped families, cumulative
 * histograms), cJSON for the trace, and a small XML well-formedness checker.
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "report.h"
#include "runner.h"

/* Big enough for any reason the module or a checker writes. */
#define ERR_BYTES 512

/* ---- fixed documents -------------------------------------------------------- */

/* A pipeline name that needs every Prometheus label escape. */
#define AWKWARD_NAME "we\"ird\\name\nx"

/*
 * STATS: pipeline "echo" answered 4 frames with phase sums chosen so the
 * means are round (slot_wait 1.0 us, receive 2.5, h2d 2.1, kernel 0.9, d2h
 * 2.0, completion 3.9, reply 1.5, end_to_end 15.0); the awkward pipeline has
 * counted nothing.  Latency buckets (not cumulative): (1,2] us: 1,
 * (2,5] us: 2, (10,20] us: 1.
 */
static const char stats_json[] =
    "{\"version\":\"0.1.0\",\"engine\":\"cuda\","
    " \"device\":{\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\",\"sm_count\":132,"
    "   \"memory_bytes\":150109880320,\"pci_bus_id\":\"0000:06:00.0\","
    "   \"pcie_generation\":null,\"pcie_width\":null},"
    " \"uptime_ns\":3723000000000,\"timing_events\":true,"
    " \"slots\":{\"count\":2,\"free\":1,\"in_flight\":1,\"in_bytes\":16777216,"
    "   \"out_bytes\":16777216},"
    " \"pinned_bytes\":67108864,"
    " \"connections\":{\"open\":1,\"total\":7,\"rejected\":0},"
    " \"frames\":{\"received\":6,\"answered\":4,\"failed\":1,\"dropped\":0,\"truncated\":0,"
    "   \"in_progress\":1},"
    " \"rejected\":{\"bad_magic\":0,\"unknown_pipeline\":1,\"timeout\":0},"
    " \"requests\":{\"list\":3,\"stats\":2,\"trace\":0},"
    " \"bytes\":{\"in\":16384,\"out\":16384},"
    " \"backpressure_pauses\":12,"
    " \"pipelines\":["
    "  {\"id\":0,\"name\":\"echo\",\"kind\":\"echo\",\"frames\":4,"
    "   \"phases\":{\"slot_wait\":{\"count\":4,\"ns\":4000},\"receive\":{\"count\":4,\"ns\":10000},"
    "     \"h2d\":{\"count\":4,\"ns\":8400},\"kernel\":{\"count\":4,\"ns\":3600},"
    "     \"d2h\":{\"count\":4,\"ns\":8000},\"completion_delay\":{\"count\":4,\"ns\":15600},"
    "     \"reply_write\":{\"count\":4,\"ns\":6000},\"end_to_end\":{\"count\":4,\"ns\":60000}}},"
    "  {\"id\":1,\"name\":\"we\\\"ird\\\\name\\nx\",\"kind\":\"affine\",\"frames\":0,"
    "   \"phases\":{\"slot_wait\":{\"count\":0,\"ns\":0},\"receive\":{\"count\":0,\"ns\":0},"
    "     \"h2d\":{\"count\":0,\"ns\":0},\"kernel\":{\"count\":0,\"ns\":0},"
    "     \"d2h\":{\"count\":0,\"ns\":0},\"completion_delay\":{\"count\":0,\"ns\":0},"
    "     \"reply_write\":{\"count\":0,\"ns\":0},\"end_to_end\":{\"count\":0,\"ns\":0}}}],"
    " \"latency\":{\"bounds_ns\":[1000,2000,5000,10000,20000],\"counts\":[0,1,2,0,1,0],"
    "   \"count\":4,\"sum_ns\":60000,\"max_ns\":19000,"
    "   \"p50_ns\":4000,\"p90_ns\":17000,\"p99_ns\":18800,\"p999_ns\":19000},"
    " \"rates\":{\"1s\":{\"frames_per_s\":97.0,\"bytes_in_per_s\":409600.0,"
    "   \"bytes_out_per_s\":397312.0},"
    "   \"10s\":{\"frames_per_s\":9.7,\"bytes_in_per_s\":40960.0,\"bytes_out_per_s\":39731.2}},"
    " \"gpu\":{\"window_ns\":1000000000,\"frames\":97,\"h2d_busy\":0.21,\"kernel_busy\":0.05,"
    "   \"d2h_busy\":0.2,\"copy_busy\":0.38,\"compute_busy\":0.05,\"overlap\":0.03},"
    " \"loop\":{\"utilisation_1s\":0.12,\"utilisation_10s\":0.04,\"idle_ns\":987654321}}";

/* The LIST document that names pipeline 0 for the trace renderers. */
static const char list_json[] = "{\"pipelines\":[{\"id\":0,\"name\":\"echo\",\"kind\":\"echo\"}]}";

/*
 * TRACE: frames 7 and 8 in slots 0 and 1 with timed stages (8's H2D overlaps
 * 7's kernel and D2H), and frame 9 back in slot 0 with timing events off
 * (null stages) after waiting for the slot from 3000 to 20000.
 */
static const char trace_json[] =
    "{\"clock\":\"monotonic\",\"t0_ns\":5123456789,\"engine\":\"cuda\",\"slots\":2,\"frames\":["
    " {\"frame_id\":7,\"conn\":3,\"pipeline\":0,\"slot\":0,\"status\":0,\"in_bytes\":4096,"
    "  \"out_bytes\":4096,\"arrived\":1000,\"claimed\":1000,\"submitted\":5000,"
    "  \"h2d\":[5000,9000],\"kernel\":[9000,10500],\"d2h\":[10500,14000],"
    "  \"done\":16000,\"drained\":17000,\"written\":20000},"
    " {\"frame_id\":8,\"conn\":3,\"pipeline\":0,\"slot\":1,\"status\":0,\"in_bytes\":4096,"
    "  \"out_bytes\":2048,\"arrived\":2000,\"claimed\":2000,\"submitted\":8000,"
    "  \"h2d\":[8000,12000],\"kernel\":[12000,13250],\"d2h\":[14000,17123],"
    "  \"done\":18000,\"drained\":19000,\"written\":23456},"
    " {\"frame_id\":9,\"conn\":4,\"pipeline\":5,\"slot\":0,\"status\":0,\"in_bytes\":100,"
    "  \"out_bytes\":100,\"arrived\":3000,\"claimed\":20000,\"submitted\":21000,"
    "  \"h2d\":null,\"kernel\":null,\"d2h\":null,"
    "  \"done\":22000,\"drained\":22500,\"written\":25000}]}";

/* Every event the trace above must draw. */
static const struct expect_event {
    unsigned frame_id, slot;
    const char *name, *lane;
    unsigned long begin_ns, end_ns;
    unsigned long bytes;
} trace_events[] = {
    {7, 0, "receive", "host", 1000, 5000, 4096},
    {7, 0, "H2D", "H2D", 5000, 9000, 4096},
    {7, 0, "kernel", "kernel", 9000, 10500, 4096},
    {7, 0, "D2H", "D2H", 10500, 14000, 4096},
    {7, 0, "completion", "host", 14000, 17000, 4096},
    {7, 0, "reply", "host", 17000, 20000, 4096},
    {8, 1, "receive", "host", 2000, 8000, 4096},
    {8, 1, "H2D", "H2D", 8000, 12000, 4096},
    {8, 1, "kernel", "kernel", 12000, 13250, 4096},
    {8, 1, "D2H", "D2H", 14000, 17123, 2048},
    {8, 1, "completion", "host", 17123, 19000, 2048},
    {8, 1, "reply", "host", 19000, 23456, 2048},
    {9, 0, "receive", "host", 20000, 21000, 100},
    {9, 0, "completion", "host", 22000, 22500, 100},
    {9, 0, "reply", "host", 22500, 25000, 100},
};
#define TRACE_EVENTS (sizeof trace_events / sizeof trace_events[0])

/* ---- helpers ---------------------------------------------------------------- */

static cJSON *parse_or_fail(const char *json) {
    cJSON *doc = cJSON_Parse(json);

    ck_assert_msg(doc != NULL, "test document does not parse near: %.40s", cJSON_GetErrorPtr());
    return doc;
}

/* What a renderer wrote, and what it returned. */
struct rendered {
    char *text;
    size_t len;
    int rc;
    char err[ERR_BYTES];
};

enum renderer { R_TABLE, R_PROM, R_CHROME, R_SVG };

/* Renders `doc` into memory; `list` for the trace renderers may be NULL. */
static struct rendered render(enum renderer r, const cJSON *doc, const cJSON *list) {
    struct rendered out;
    FILE *m;

    memset(&out, 0, sizeof out);
    m = open_memstream(&out.text, &out.len);
    ck_assert_ptr_nonnull(m);
    switch (r) {
    case R_TABLE: out.rc = gf_report_stats_table(doc, m); break;
    case R_PROM: out.rc = gf_report_stats_prometheus(doc, m, out.err, sizeof out.err); break;
    case R_CHROME: out.rc = gf_report_trace_chrome(doc, list, m, out.err, sizeof out.err); break;
    case R_SVG: out.rc = gf_report_trace_svg(doc, list, m, out.err, sizeof out.err); break;
    }
    ck_assert_int_eq(fclose(m), 0);
    return out;
}

/* Counts the non-overlapping occurrences of `needle` in `hay`. */
static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + strlen(needle), needle))
        n++;
    return n;
}

/* ---- a Prometheus text-format (0.0.4) parser ------------------------------- */

#define PROM_MAX_SAMPLES  256
#define PROM_MAX_FAMILIES 96
#define PROM_MAX_LABELS   4
#define PROM_NAME_BYTES   96
#define PROM_VALUE_BYTES  128

struct prom_sample {
    char name[PROM_NAME_BYTES];
    int family; /* index into families */
    int label_count;
    char label[PROM_MAX_LABELS][PROM_NAME_BYTES];
    char value_of[PROM_MAX_LABELS][PROM_VALUE_BYTES]; /* unescaped */
    double value;
};

struct prom_family {
    char name[PROM_NAME_BYTES];
    char type[16];
    int has_help, closed;
};

struct prom_doc {
    struct prom_sample samples[PROM_MAX_SAMPLES];
    int sample_count;
    struct prom_family families[PROM_MAX_FAMILIES];
    int family_count;
};

static int is_name_start(int c) {
    return isalpha(c) || c == '_' || c == ':';
}

static int is_name_char(int c) {
    return isalnum(c) || c == '_' || c == ':';
}

/* Reads a metric name (or label name when `label`) at *p into buf. */
static int read_name(const char **p, char *buf, int label) {
    size_t n = 0;

    if (!is_name_start((unsigned char)**p) || (label && **p == ':'))
        return -1;
    while (is_name_char((unsigned char)**p) && !(label && **p == ':')) {
        if (n + 1 >= PROM_NAME_BYTES)
            return -1;
        buf[n++] = *(*p)++;
    }
    buf[n] = '\0';
    return 0;
}

static int find_family(struct prom_doc *d, const char *name) {
    for (int i = 0; i < d->family_count; i++)
        if (strcmp(d->families[i].name, name) == 0)
            return i;
    return -1;
}

static int add_family(struct prom_doc *d, const char *name) {
    int i = find_family(d, name);

    if (i >= 0)
        return i;
    ck_assert_int_lt(d->family_count, PROM_MAX_FAMILIES);
    i = d->family_count++;
    memset(&d->families[i], 0, sizeof d->families[i]);
    snprintf(d->families[i].name, sizeof d->families[i].name, "%s", name);
    return i;
}

/* Parses a sample value: a float as Go's ParseFloat takes it, or +Inf,
 * -Inf, NaN. */
static int read_value(const char *s, double *v) {
    char *end;

    if (strcmp(s, "+Inf") == 0) {
        *v = INFINITY;
        return 0;
    }
    if (strcmp(s, "-Inf") == 0) {
        *v = -INFINITY;
        return 0;
    }
    if (strcmp(s, "NaN") == 0) {
        *v = NAN;
        return 0;
    }
    if (*s == '\0' || isspace((unsigned char)*s))
        return -1;
    *v = strtod(s, &end);
    return *end == '\0' && !isinf(*v) && !isnan(*v) ? 0 : -1;
}

/* The family a sample named `name` belongs to: a histogram or summary
 * family for its _bucket/_sum/_count series, else the name itself. */
static int family_of(struct prom_doc *d, const char *name) {
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    char base[PROM_NAME_BYTES];

    for (size_t k = 0; k < 3; k++) {
        size_t n = strlen(name), sl = strlen(suffixes[k]);
        if (n <= sl || strcmp(name + n - sl, suffixes[k]) != 0)
            continue;
        memcpy(base, name, n - sl);
        base[n - sl] = '\0';
        int f = find_family(d, base);
        if (f >= 0 && (strcmp(d->families[f].type, "histogram") == 0 ||
                       (k > 0 && strcmp(d->families[f].type, "summary") == 0)))
            return f;
    }
    return find_family(d, name);
}

/* Parses one sample line.  Returns 0 or -1 with the reason. */
static int parse_sample(struct prom_doc *d, const char *line, char *err, size_t err_len) {
    struct prom_sample *s;
    const char *p = line;
    char value[64];
    size_t n = 0;

    ck_assert_int_lt(d->sample_count, PROM_MAX_SAMPLES);
    s = &d->samples[d->sample_count];
    memset(s, 0, sizeof *s);
    if (read_name(&p, s->name, 0) < 0) {
        snprintf(err, err_len, "bad metric name in '%.200s'", line);
        return -1;
    }
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (s->label_count == PROM_MAX_LABELS ||
                read_name(&p, s->label[s->label_count], 1) < 0 || *p++ != '=' || *p++ != '"') {
                snprintf(err, err_len, "bad label in '%.200s'", line);
                return -1;
            }
            size_t k = 0;
            char *v = s->value_of[s->label_count];
            for (; *p != '"'; p++) {
                if (*p == '\0' || *p == '\n' || k + 1 >= PROM_VALUE_BYTES) {
                    snprintf(err, err_len, "unterminated label value in '%.200s'", line);
                    return -1;
                }
                if (*p == '\\') {
                    p++;
                    if (*p != '\\' && *p != '"' && *p != 'n') {
                        snprintf(err, err_len, "bad escape \\%c in '%.200s'", *p, line);
                        return -1;
                    }
                    v[k++] = *p == 'n' ? '\n' : *p;
                } else {
                    v[k++] = *p;
                }
            }
            v[k] = '\0';
            p++;
            for (int j = 0; j < s->label_count; j++)
                if (strcmp(s->label[j], s->label[s->label_count]) == 0) {
                    snprintf(err, err_len, "label %s twice in '%.200s'", s->label[j], line);
                    return -1;
                }
            s->label_count++;
            if (*p == ',')
                p++;
            else if (*p != '}') {
                snprintf(err, err_len, "expected , or } in '%.200s'", line);
                return -1;
            }
        }
        p++;
    }
    if (*p++ != ' ') {
        snprintf(err, err_len, "no single space before the value in '%.200s'", line);
        return -1;
    }
    while (*p != '\0' && n + 1 < sizeof value)
        value[n++] = *p++;
    value[n] = '\0';
    if (read_value(value, &s->value) < 0) {
        snprintf(err, err_len, "bad value '%s' in '%.200s'", value, line);
        return -1;
    }
    s->family = family_of(d, s->name);
    if (s->family < 0 || !d->families[s->family].has_help ||
        d->families[s->family].type[0] == '\0') {
        snprintf(err, err_len, "sample '%.200s' has no HELP and TYPE before it", line);
        return -1;
    }
    if (d->families[s->family].closed) {
        snprintf(err, err_len, "family %s is not contiguous ('%.200s')",
                 d->families[s->family].name, line);
        return -1;
    }
    for (int f = 0; f < d->family_count; f++)
        if (f != s->family && d->sample_count > 0 && d->samples[d->sample_count - 1].family == f)
            d->families[f].closed = 1;
    d->sample_count++;
    return 0;
}

/* Parses the whole exposition into `d`.  Returns 0 or -1 with the reason. */
static int prom_parse(const char *text, struct prom_doc *d, char *err, size_t err_len) {
    char line[1024];

    memset(d, 0, sizeof *d);
    if (text[0] != '\0' && text[strlen(text) - 1] != '\n') {
        snprintf(err, err_len, "the last line does not end with a newline");
        return -1;
    }
    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        ck_assert_uint_lt(n, sizeof line);
        memcpy(line, p, n);
        line[n] = '\0';
        p = nl + 1;
        if (n == 0) {
            snprintf(err, err_len, "empty line");
            return -1;
        }
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            const char *q = line + 7;
            char name[PROM_NAME_BYTES];
            if (read_name(&q, name, 0) < 0 || *q != ' ' || q[1] == '\0') {
                snprintf(err, err_len, "malformed '%.200s'", line);
                return -1;
            }
            int f = add_family(d, name);
            if (line[2] == 'H') {
                if (d->families[f].has_help) {
                    snprintf(err, err_len, "second HELP for %s", name);
                    return -1;
                }
                d->families[f].has_help = 1;
            } else {
                static const char *const types[] = {"counter", "gauge", "histogram", "summary",
                                                    "untyped"};
                int known = 0;
                for (size_t k = 0; k < 5; k++)
                    known |= strcmp(q + 1, types[k]) == 0;
                if (!known || d->families[f].type[0] != '\0') {
                    snprintf(err, err_len, "bad or second TYPE '%.200s'", line);
                    return -1;
                }
                snprintf(d->families[f].type, sizeof d->families[f].type, "%s", q + 1);
            }
            continue;
        }
        if (line[0] == '#')
            continue; /* a comment */
        if (parse_sample(d, line, err, err_len) < 0)
            return -1;
    }
    return 0;
}

/* The value of the sample `name` whose labels are exactly the given
 * NULL-terminated name, value pairs; fails the test if there is none. */
static double prom_get(const struct prom_doc *d, const char *name, ...) {
    for (int i = 0; i < d->sample_count; i++) {
        const struct prom_sample *s = &d->samples[i];
        va_list ap;
        const char *l;
        int n = 0, match = strcmp(s->name, name) == 0;

        va_start(ap, name);
        while (match && (l = va_arg(ap, const char *)) != NULL) {
            const char *v = va_arg(ap, const char *);
            int found = 0;
            for (int j = 0; j < s->label_count; j++)
                found |= strcmp(s->label[j], l) == 0 && strcmp(s->value_of[j], v) == 0;
            match = found;
            n++;
        }
        va_end(ap);
        if (match && n == s->label_count)
            return s->value;
    }
    ck_abort_msg("no sample %s with those labels", name);
    return NAN;
}

/* Nonzero when some sample's name starts with `prefix`. */
static int prom_has_prefix(const struct prom_doc *d, const char *prefix) {
    for (int i = 0; i < d->sample_count; i++)
        if (strncmp(d->samples[i].name, prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

/* Naming rules of the house: counters end in _total, nothing else does. */
static void assert_prom_conventions(const struct prom_doc *d) {
    for (int f = 0; f < d->family_count; f++) {
        const struct prom_family *fam = &d->families[f];
        size_t n = strlen(fam->name);
        int total = n > 6 && strcmp(fam->name + n - 6, "_total") == 0;

        ck_assert_msg(fam->has_help && fam->type[0] != '\0', "%s lacks HELP or TYPE", fam->name);
        ck_assert_msg(strncmp(fam->name, "gpuframe_", 9) == 0, "%s is not gpuframe_", fam->name);
        ck_assert_msg(total == (strcmp(fam->type, "counter") == 0),
                      "%s: counters and only counters end in _total", fam->name);
    }
}

/* Every histogram: per label set, buckets in increasing le ending with +Inf,
 * cumulative (non-decreasing) counts, +Inf equal to _count, and a _sum. */
static void assert_prom_histograms(const struct prom_doc *d) {
    for (int f = 0; f < d->family_count; f++) {
        const struct prom_family *fam = &d->families[f];
        char bucket[PROM_NAME_BYTES + 8], count[PROM_NAME_BYTES + 8], sum[PROM_NAME_BYTES + 8];
        double prev_le = -INFINITY, prev_v = -1, last_v = -1, count_v = -1;
        int buckets = 0, sums = 0;

        if (strcmp(fam->type, "histogram") != 0)
            continue;
        snprintf(bucket, sizeof bucket, "%s_bucket", fam->name);
        snprintf(count, sizeof count, "%s_count", fam->name);
        snprintf(sum, sizeof sum, "%s_sum", fam->name);
        for (int i = 0; i < d->sample_count; i++) {
            const struct prom_sample *s = &d->samples[i];
            if (s->family != f)
                continue;
            if (strcmp(s->name, bucket) == 0) {
                double le;
                ck_assert_int_eq(s->label_count, 1);
                ck_assert_str_eq(s->label[0], "le");
                ck_assert_int_eq(read_value(s->value_of[0], &le), 0);
                ck_assert_msg(le > prev_le, "le %s does not increase", s->value_of[0]);
                ck_assert_msg(s->value >= prev_v, "bucket le=%s is not cumulative", s->value_of[0]);
                prev_le = le;
                prev_v = last_v = s->value;
                buckets++;
            } else if (strcmp(s->name, count) == 0) {
                count_v = s->value;
            } else if (strcmp(s->name, sum) == 0) {
                sums++;
            } else {
                ck_abort_msg("%s in histogram %s", s->name, fam->name);
            }
        }
        ck_assert_int_gt(buckets, 1);
        ck_assert_msg(isinf(prev_le), "%s: the last bucket is not +Inf", fam->name);
        ck_assert_double_eq(last_v, count_v);
        ck_assert_int_eq(sums, 1);
    }
}

/* ---- a small XML well-formedness checker ------------------------------------ */

#define XML_DEPTH_MAX 32
#define XML_ATTRS_MAX 16

static int xml_name(const char **p, char *buf, size_t len) {
    size_t n = 0;

    if (!(isalpha((unsigned char)**p) || **p == '_' || **p == ':'))
        return -1;
    while (isalnum((unsigned char)**p) || **p == '_' || **p == ':' || **p == '-' || **p == '.') {
        if (n + 1 >= len)
            return -1;
        buf[n++] = *(*p)++;
    }
    buf[n] = '\0';
    return 0;
}

/* Checks character data or an attribute value up to `stop` (not included):
 * no '<', every '&' a known entity, no control character but tab/LF/CR. */
static int xml_chars(const char *p, const char *stop, char *err, size_t err_len) {
    static const char *const entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};

    for (; p < stop; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '<' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
            snprintf(err, err_len, "raw character 0x%02x in text near '%.30s'", c, p);
            return -1;
        }
        if (c == '&') {
            int ok = 0;
            for (size_t k = 0; k < 5; k++)
                ok |= strncmp(p, entities[k], strlen(entities[k])) == 0;
            if (!ok && p[1] == '#') {
                const char *q = p + 2 + (p[2] == 'x');
                while (isxdigit((unsigned char)*q))
                    q++;
                ok = q > p + 2 + (p[2] == 'x') && *q == ';';
            }
            if (!ok) {
                snprintf(err, err_len, "unescaped & near '%.30s'", p);
                return -1;
            }
        }
    }
    return 0;
}

/* Checks that `doc` is one well-formed XML element named `root` (after an
 * optional declaration), with balanced tags, quoted unique attributes and
 * escaped text.  Returns 0 or -1 with the reason. */
static int xml_check(const char *doc, const char *root, char *err, size_t err_len) {
    char stack[XML_DEPTH_MAX][64];
    int depth = 0, roots = 0;
    const char *p = doc;

    if (strncmp(p, "<?xml ", 6) == 0) {
        p = strstr(p, "?>");
        if (p == NULL) {
            snprintf(err, err_len, "unterminated XML declaration");
            return -1;
        }
        p += 2;
    }
    while (*p != '\0') {
        const char *lt = strchr(p, '<');
        const char *text_end = lt != NULL ? lt : p + strlen(p);
        if (depth == 0) {
            for (const char *q = p; q < text_end; q++)
                if (!isspace((unsigned char)*q)) {
                    snprintf(err, err_len, "text outside the root element: '%.20s'", q);
                    return -1;
                }
        } else if (xml_chars(p, text_end, err, err_len) < 0) {
            return -1;
        }
        if (lt == NULL)
            break;
        p = lt + 1;
        if (strncmp(p, "!--", 3) == 0) {
            const char *end = strstr(p, "-->");
            if (end == NULL) {
                snprintf(err, err_len, "unterminated comment");
                return -1;
            }
            p = end + 3;
            continue;
        }
        int closing = *p == '/';
        char name[64];
        p += closing;
        if (xml_name(&p, name, sizeof name) < 0) {
            snprintf(err, err_len, "bad tag name near '%.20s'", p);
            return -1;
        }
        if (closing) {
            if (*p++ != '>' || depth == 0 || strcmp(stack[depth - 1], name) != 0) {
                snprintf(err, err_len, "</%s> does not close <%s>", name,
                         depth > 0 ? stack[depth - 1] : "(nothing)");
                return -1;
            }
            depth--;
            continue;
        }
        if (depth == 0) {
            if (roots++ > 0 || strcmp(name, root) != 0) {
                snprintf(err, err_len, "second root or root <%s> is not <%s>", name, root);
                return -1;
            }
        }
        char attrs[XML_ATTRS_MAX][64];
        int attr_count = 0;
        for (;;) {
            int space = isspace((unsigned char)*p);
            while (isspace((unsigned char)*p))
                p++;
            if (*p == '>' || strncmp(p, "/>", 2) == 0)
                break;
            char attr[64];
            if (!space || xml_name(&p, attr, sizeof attr) < 0 || *p++ != '=' ||
                (*p != '"' && *p != '\'')) {
                snprintf(err, err_len, "bad attribute in <%s> near '%.20s'", name, p);
                return -1;
            }
            for (int k = 0; k < attr_count; k++)
                if (strcmp(attrs[k], attr) == 0) {
                    snprintf(err, err_len, "attribute %s twice in <%s>", attr, name);
                    return -1;
                }
            ck_assert_int_lt(attr_count, XML_ATTRS_MAX);
            snprintf(attrs[attr_count++], 64, "%s", attr);
            char quote = *p++;
            const char *end = strchr(p, quote);
            if (end == NULL || xml_chars(p, end, err, err_len) < 0) {
                if (end == NULL)
                    snprintf(err, err_len, "unterminated attribute %s", attr);
                return -1;
            }
            p = end + 1;
        }
        if (*p == '/') {
            p += 2; /* empty element */
        } else {
            p++;
            if (depth == XML_DEPTH_MAX) {
                snprintf(err, err_len, "elements nested too deep");
                return -1;
            }
            snprintf(stack[depth++], 64, "%s", name);
        }
    }
    if (depth != 0 || roots != 1) {
        snprintf(err, err_len, "%d element(s) left open, %d root(s)", depth, roots);
        return -1;
    }
    return 0;
}

/* ---- the table -------------------------------------------------------------- */

/* The whitespace-separated words of the line of `text` starting with
 * `start`; fails the test when there is no such line. */
static int words_of_line(const char *text, const char *start, char words[][32], int max) {
    const char *p = text;
    int n = 0;

    while (p != NULL && strncmp(p, start, strlen(start)) != 0) {
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    ck_assert_msg(p != NULL, "no line starting with '%s' in:\n%s", start, text);
    while (*p != '\n' && *p != '\0' && n < max) {
        while (*p == ' ')
            p++;
        size_t k = 0;
        while (*p != ' ' && *p != '\n' && *p != '\0' && k + 1 < 32)
            words[n][k++] = *p++;
        words[n][k] = '\0';
        if (k > 0)
            n++;
    }
    return n;
}

START_TEST(table_holds_the_expected_numbers) {
    cJSON *doc = parse_or_fail(stats_json);
    struct rendered r = render(R_TABLE, doc, NULL);
    char w[16][32];
    static const char *const echo_row[] = {"echo", "4",   "1.0", "2.5", "2.1",
                                           "0.9",  "2.0", "3.9", "1.5", "15.0"};

    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(words_of_line(r.text, "echo ", w, 16), 10);
    for (int i = 0; i < 10; i++)
        ck_assert_str_eq(w[i], echo_row[i]);
    /* The awkward name is printed with '?' for its newline; its phases
     * counted nothing and show "-", never a division by zero. */
    ck_assert_int_eq(words_of_line(r.text, "we\"ird\\name?x", w, 16), 10);
    ck_assert_str_eq(w[1], "0");
    for (int i = 2; i < 10; i++)
        ck_assert_str_eq(w[i], "-");

    ck_assert_ptr_nonnull(strstr(r.text, "gpuframed 0.1.0, engine cuda, up 1h 02m 03s\n"));
    ck_assert_ptr_nonnull(strstr(r.text, "NVIDIA H200, compute 9.0, 132 SMs, 139.8 GiB"));
    ck_assert_ptr_nonnull(strstr(r.text, "2 (1 free, 1 in flight), 16.0 MiB in + 16.0 MiB out"));
    ck_assert_ptr_nonnull(
        strstr(r.text, "6 received, 4 answered, 1 failed, 0 dropped, 0 truncated, 1 in progress"));
    ck_assert_ptr_nonnull(strstr(r.text, "3 list, 2 stats, 0 trace\n"));
    ck_assert_ptr_nonnull(strstr(r.text, "rejected     unknown_pipeline 1\n"));
    ck_assert_ptr_nonnull(strstr(r.text, "4 frames, mean 15.0 us"));
    ck_assert_ptr_nonnull(
        strstr(r.text, "p50 4.0 us   p90 17.0 us   p99 18.8 us   p99.9 19.0 us   max 19.0 us"));
    ck_assert_int_eq(words_of_line(r.text, "  last 10s", w, 16), 5);
    ck_assert_str_eq(w[2], "9.7");
    ck_assert_str_eq(w[3], "0.041");
    ck_assert_str_eq(w[4], "0.040");
    ck_assert_ptr_nonnull(strstr(r.text, "busy h2d 21.0%, kernel 5.0%, d2h 20.0%; copy 38.0%"));
    ck_assert_ptr_nonnull(strstr(r.text, "3.0% of the time two of H2D"));
    ck_assert_ptr_nonnull(strstr(r.text, "busy 12.0% over 1 s, 4.0% over 10 s"));
    for (size_t i = 0; i < r.len; i++)
        ck_assert_msg((unsigned char)r.text[i] >= 0x20 || r.text[i] == '\n',
                      "control character 0x%02x in the table", (unsigned char)r.text[i]);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(table_of_a_cpu_daemon_with_null_gpu) {
    cJSON *doc = parse_or_fail("{\"version\":\"0.1.0\",\"engine\":\"cpu\","
                               "\"device\":{\"name\":\"cpu\",\"threads\":2},\"gpu\":null,"
                               "\"pipelines\":[],\"latency\":{\"count\":0,\"sum_ns\":0,"
                               "\"p50_ns\":0,\"max_ns\":0}}");
    struct rendered r = render(R_TABLE, doc, NULL);

    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.text, "device       cpu, 2 threads\n"));
    ck_assert_ptr_nonnull(strstr(r.text, "gpu          not measured"));
    ck_assert_ptr_null(strstr(r.text, "pipeline")); /* no pipelines, no table */
    /* No frame yet: no mean, no percentiles of nothing. */
    ck_assert_ptr_nonnull(strstr(r.text, "latency      0 frames (end to end, since start)\n"));
    ck_assert_ptr_null(strstr(r.text, "p50"));
    free(r.text);
    cJSON_Delete(doc);

    doc = parse_or_fail("[1, 2]");
    r = render(R_TABLE, doc, NULL);
    ck_assert_int_eq(r.rc, -EINVAL);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

/* ---- Prometheus ------------------------------------------------------------- */

static struct prom_doc prom; /* large: not on the stack */

START_TEST(prometheus_parses_and_holds_the_values) {
    cJSON *doc = parse_or_fail(stats_json);
    struct rendered r = render(R_PROM, doc, NULL);
    char err[ERR_BYTES];

    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    assert_prom_conventions(&prom);
    assert_prom_histograms(&prom);

    ck_assert_double_eq(prom_get(&prom, "gpuframe_info", "version", "0.1.0", "engine", "cuda",
                                 "device", "NVIDIA H200", NULL),
                        1);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_uptime_seconds", NULL), 3723);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_frames_received_total", NULL), 6);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_frames_in_progress", NULL), 1);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_rejected_total", "reason", "unknown_pipeline", NULL), 1);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_requests_total", "type", "list", NULL), 3);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_input_bytes_total", NULL), 16384);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_device_memory_bytes", NULL), 150109880320.0);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_pipeline_frames_total", "pipeline", "echo", NULL),
                        4);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_phase_seconds_sum", "pipeline", "echo", "phase", "h2d", NULL),
        8400 / 1e9);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_phase_seconds_count", "pipeline", "echo", "phase",
                                 "end_to_end", NULL),
                        4);
    /* Histogram: exact cumulative counts per bound, in seconds. */
    static const struct {
        const char *le;
        double count;
    } buckets[] = {{"1e-06", 0}, {"2e-06", 1}, {"5e-06", 3},
                   {"1e-05", 3}, {"2e-05", 4}, {"+Inf", 4}};
    for (size_t i = 0; i < sizeof buckets / sizeof buckets[0]; i++)
        ck_assert_double_eq(
            prom_get(&prom, "gpuframe_latency_seconds_bucket", "le", buckets[i].le, NULL),
            buckets[i].count);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_seconds_count", NULL), 4);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_seconds_sum", NULL), 60000 / 1e9);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_max_seconds", NULL), 19000 / 1e9);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_frames_per_second", "window", "10s", NULL), 9.7);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_output_bytes_per_second", "window", "10s", NULL),
                        39731.2);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_gpu_busy_ratio", "stage", "h2d", NULL), 0.21);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_gpu_overlap_ratio", NULL), 0.03);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_loop_utilisation_ratio", "window", "1s", NULL),
                        0.12);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_loop_idle_seconds_total", NULL), 0.987654321);
    /* pcie_generation is null: no metric invents a value for it. */
    ck_assert(!prom_has_prefix(&prom, "gpuframe_device_pcie"));
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(prometheus_label_escaping_round_trips) {
    cJSON *doc = parse_or_fail(stats_json);
    struct rendered r;
    char err[ERR_BYTES];

    /* An engine name with bytes that are not UTF-8 becomes '?'. */
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "engine", cJSON_CreateString("c\xff\"u"));
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(strstr(r.text, "pipeline=\"we\\\"ird\\\\name\\nx\""));
    /* The parser unescapes the label back to the name exactly. */
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_pipeline_frames_total", "pipeline", AWKWARD_NAME, NULL), 0);
    /* A pipeline that counted nothing: _sum and _count 0, no NaN. */
    ck_assert_double_eq(prom_get(&prom, "gpuframe_phase_seconds_sum", "pipeline", AWKWARD_NAME,
                                 "phase", "kernel", NULL),
                        0);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_phase_seconds_count", "pipeline", AWKWARD_NAME,
                                 "phase", "kernel", NULL),
                        0);
    ck_assert_ptr_null(strstr(r.text, "NaN"));
    ck_assert_double_eq(prom_get(&prom, "gpuframe_info", "version", "0.1.0", "engine", "c?\"u",
                                 "device", "NVIDIA H200", NULL),
                        1);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(prometheus_null_gpu_and_missing_keys) {
    cJSON *doc = parse_or_fail(stats_json);
    struct rendered r;
    char err[ERR_BYTES];

    cJSON_ReplaceItemInObjectCaseSensitive(doc, "gpu", cJSON_CreateNull());
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "rates");
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s", err);
    assert_prom_conventions(&prom);
    ck_assert(!prom_has_prefix(&prom, "gpuframe_gpu_"));
    ck_assert_ptr_null(strstr(r.text, "gpuframe_gpu_")); /* nor their HELP lines */
    ck_assert_ptr_null(strstr(r.text, "gpuframe_frames_per_second"));
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_seconds_count", NULL), 4);
    free(r.text);
    cJSON_Delete(doc);

    /* The smallest document: only the info metric, with empty labels. */
    doc = parse_or_fail("{}");
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.text, "# HELP gpuframe_info Version, engine and device of the daemon.\n"
                             "# TYPE gpuframe_info gauge\n"
                             "gpuframe_info{version=\"\",engine=\"\",device=\"\"} 1\n");
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(prometheus_refuses_a_malformed_histogram) {
    cJSON *doc = parse_or_fail(stats_json);
    cJSON *lat = cJSON_GetObjectItemCaseSensitive(doc, "latency");
    struct rendered r;

    /* counts must be one longer than bounds_ns */
    cJSON_DeleteItemFromArray(cJSON_GetObjectItemCaseSensitive(lat, "counts"), 0);
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, -EINVAL);
    ck_assert_ptr_nonnull(strstr(r.err, "latency"));
    free(r.text);

    /* bounds must increase */
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lat, "counts"), cJSON_CreateNumber(0));
    cJSON_ReplaceItemInArray(cJSON_GetObjectItemCaseSensitive(lat, "bounds_ns"), 2,
                             cJSON_CreateNumber(1500));
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, -EINVAL);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

/* ---- the Chrome trace ------------------------------------------------------- */

/* The lane name Chrome shows for `tid`, from the thread_name events. */
static const char *thread_name(const cJSON *events, double tid) {
    const cJSON *e;

    cJSON_ArrayForEach(e, events) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (strcmp(name->valuestring, "thread_name") == 0 &&
            cJSON_GetObjectItemCaseSensitive(e, "tid")->valuedouble == tid)
            return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"),
                                                    "name")
                ->valuestring;
    }
    return NULL;
}

static double member(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    ck_assert_msg(cJSON_IsNumber(v), "no number %s", key);
    return v->valuedouble;
}

START_TEST(chrome_trace_has_every_event_in_its_lane) {
    cJSON *trace = parse_or_fail(trace_json), *list = parse_or_fail(list_json);
    struct rendered r = render(R_CHROME, trace, list);
    int seen[TRACE_EVENTS] = {0};
    size_t x_events = 0, thread_names = 0, sort_indexes = 0;
    const cJSON *e;

    ck_assert_msg(r.rc == 0, "%s", r.err);
    cJSON *out = cJSON_Parse(r.text);
    ck_assert_msg(out != NULL, "Chrome trace does not parse:\n%s", r.text);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(out, "displayTimeUnit")->valuestring, "ns");
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(out, "traceEvents");
    ck_assert(cJSON_IsArray(events));

    cJSON_ArrayForEach(e, events) {
        const char *ph = cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring;
        const char *name = cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        ck_assert_double_eq(member(e, "pid"), 1);
        if (strcmp(ph, "M") == 0) {
            if (strcmp(name, "thread_name") == 0)
                thread_names++;
            if (strcmp(name, "thread_sort_index") == 0) {
                ck_assert_double_eq(member(args, "sort_index"), member(e, "tid"));
                sort_indexes++;
            }
            continue;
        }
        ck_assert_str_eq(ph, "X");
        x_events++;
        unsigned frame_id = (unsigned)member(args, "frame_id");
        size_t k = 0;
        while (k < TRACE_EVENTS &&
               !(trace_events[k].frame_id == frame_id && strcmp(trace_events[k].name, name) == 0))
            k++;
        ck_assert_msg(k < TRACE_EVENTS, "unexpected event %s of frame %u", name, frame_id);
        ck_assert_msg(!seen[k]++, "event %s of frame %u twice", name, frame_id);

        const struct expect_event *x = &trace_events[k];
        char lane[32];
        snprintf(lane, sizeof lane, "slot %u %s", x->slot, x->lane);
        const char *tname = thread_name(events, member(e, "tid"));
        ck_assert_ptr_nonnull(tname);
        ck_assert_str_eq(tname, lane);
        ck_assert_double_eq(member(e, "tid"),
                            GF_REPORT_TID(x->slot, strcmp(x->lane, "H2D") == 0      ? 0
                                                   : strcmp(x->lane, "kernel") == 0 ? 1
                                                   : strcmp(x->lane, "D2H") == 0    ? 2
                                                                                    : 3));
        /* Exact: microseconds with three decimals parse to ns / 1000. */
        ck_assert_double_eq(member(e, "ts"), (double)x->begin_ns / 1000.0);
        ck_assert_double_eq(member(e, "dur"), (double)(x->end_ns - x->begin_ns) / 1000.0);
        ck_assert_double_eq(member(args, "slot"), x->slot);
        ck_assert_double_eq(member(args, "bytes"), (double)x->bytes);
        if (frame_id == 9) {
            ck_assert_double_eq(member(args, "pipeline"), 5);
            ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(args, "pipeline_name"));
            ck_assert_double_eq(member(args, "slot_wait_ns"), 17000);
            ck_assert_double_eq(member(args, "end_to_end_ns"), 22000);
        } else {
            ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(args, "pipeline_name")->valuestring,
                             "echo");
            ck_assert_double_eq(member(args, "slot_wait_ns"), 0);
        }
    }
    ck_assert_uint_eq(x_events, TRACE_EVENTS);
    ck_assert_uint_eq(thread_names, 8); /* 2 slots x 4 lanes, all in use */
    ck_assert_uint_eq(sort_indexes, 8);
    /* One lane never holds two overlapping events (Chrome needs nesting). */
    for (size_t a = 0; a < TRACE_EVENTS; a++)
        for (size_t b = a + 1; b < TRACE_EVENTS; b++) {
            const struct expect_event *p = &trace_events[a], *q = &trace_events[b];
            if (p->slot == q->slot && strcmp(p->lane, q->lane) == 0)
                ck_assert(p->end_ns <= q->begin_ns || q->end_ns <= p->begin_ns);
        }

    gf_report_trace_info info;
    char err[ERR_BYTES];
    ck_assert_int_eq(gf_report_trace_summary(trace, &info, err, sizeof err), 0);
    ck_assert_uint_eq(info.frames, 3);
    ck_assert_uint_eq(info.events, TRACE_EVENTS);
    ck_assert_uint_eq(info.lanes, 8);
    ck_assert_uint_eq(info.begin_ns, 1000);
    ck_assert_uint_eq(info.end_ns, 25000);
    cJSON_Delete(out);
    free(r.text);
    cJSON_Delete(list);
    cJSON_Delete(trace);
}
END_TEST

START_TEST(chrome_trace_of_no_frames_and_cpu_frames) {
    cJSON *trace = parse_or_fail("{\"clock\":\"monotonic\",\"t0_ns\":1,\"engine\":\"cpu\","
                                 "\"slots\":2,\"frames\":[]}");
    struct rendered r = render(R_CHROME, trace, NULL);
    cJSON *out;

    ck_assert_int_eq(r.rc, 0);
    out = cJSON_Parse(r.text);
    ck_assert_ptr_nonnull(out);
    /* Only the process name: no lane, no event. */
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(out, "traceEvents")), 1);
    cJSON_Delete(out);
    free(r.text);
    cJSON_Delete(trace);

    /* The CPU engine: empty copies draw nothing; the kernel is the run. */
    trace = parse_or_fail("{\"engine\":\"cpu\",\"slots\":1,\"frames\":[{\"frame_id\":1,"
                          "\"slot\":0,\"arrived\":10,\"claimed\":10,\"submitted\":20,"
                          "\"h2d\":[20,20],\"kernel\":[20,70],\"d2h\":[70,70],\"done\":75,"
                          "\"drained\":80,\"written\":90}]}");
    gf_report_trace_info info;
    char err[ERR_BYTES];
    ck_assert_int_eq(gf_report_trace_summary(trace, &info, err, sizeof err), 0);
    ck_assert_uint_eq(info.events, 4); /* receive, kernel, completion, reply */
    ck_assert_uint_eq(info.lanes, 2);  /* slot 0 kernel, slot 0 host */
    r = render(R_CHROME, trace, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.text, "\"name\":\"kernel\",\"cat\":\"gpu\",\"ph\":\"X\","
                                         "\"pid\":1,\"tid\":2,\"ts\":0.020,\"dur\":0.050"));
    ck_assert_ptr_null(strstr(r.text, "slot 0 H2D"));
    free(r.text);
    cJSON_Delete(trace);
}
END_TEST

/* Documents the trace renderers must refuse, with a word of the reason. */
static const struct {
    const char *json, *reason;
} bad_traces[] = {
    {"{\"frames\":{}}", "frames"},
    {"[]", "frames"},
    {"{\"frames\":[{\"claimed\":1,\"submitted\":2,\"done\":3,\"drained\":4,\"written\":5}]}",
     "slot"},
    {"{\"frames\":[{\"slot\":0,\"claimed\":1,\"submitted\":2,\"done\":3,\"drained\":4,"
     "\"written\":-5}]}",
     "written"},
    {"{\"frames\":[{\"slot\":0,\"claimed\":1,\"submitted\":2,\"h2d\":[3],\"done\":3,"
     "\"drained\":4,\"written\":5}]}",
     "h2d"},
    {"{\"frames\":[{\"slot\":0,\"claimed\":1,\"submitted\":2,\"kernel\":[9,3],\"done\":3,"
     "\"drained\":4,\"written\":5}]}",
     "kernel"},
    {"{\"frames\":[{\"slot\":5000,\"claimed\":1,\"submitted\":2,\"done\":3,\"drained\":4,"
     "\"written\":5}]}",
     "slot"},
    {"{\"frames\":[7]}", "frame 0"},
};

START_TEST(trace_renderers_refuse_malformed_documents) {
    cJSON *trace = parse_or_fail(bad_traces[_i].json);
    struct rendered r = render(R_CHROME, trace, NULL);

    ck_assert_int_eq(r.rc, -EINVAL);
    ck_assert_msg(strstr(r.err, bad_traces[_i].reason) != NULL, "'%s' does not name '%s'", r.err,
                  bad_traces[_i].reason);
    free(r.text);
    r = render(R_SVG, trace, NULL);
    ck_assert_int_eq(r.rc, -EINVAL);
    free(r.text);
    cJSON_Delete(trace);
}
END_TEST

/* ---- the SVG ---------------------------------------------------------------- */

START_TEST(svg_is_well_formed_with_one_rect_per_event) {
    cJSON *trace = parse_or_fail(trace_json), *list = parse_or_fail(list_json);
    struct rendered r;
    char err[ERR_BYTES];

    /* Text that must be escaped, in the title. */
    cJSON_ReplaceItemInObjectCaseSensitive(trace, "engine", cJSON_CreateString("<c&'u\">\x01"));
    r = render(R_SVG, trace, list);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_msg(xml_check(r.text, "svg", err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    ck_assert_uint_eq(count_of(r.text, "<rect class=\"ev\""), TRACE_EVENTS);
    ck_assert_uint_eq(count_of(r.text, "<rect class=\"lane\""), 8);
    ck_assert_ptr_nonnull(strstr(r.text, "&lt;c&amp;&apos;u&quot;&gt;? engine"));
    ck_assert_ptr_nonnull(strstr(r.text, "3 frames over 24.0 \xC2\xB5s"));
    ck_assert_ptr_nonnull(strstr(r.text, ">slot 1 D2H</text>"));
    ck_assert_ptr_nonnull(strstr(r.text,
                                 "<title>frame 8 (pipeline echo, slot 1): D2H 3.1 \xC2\xB5s, "
                                 "2048 bytes</title>"));
    /* 24 us span: 5 us ticks from 0 to 20 us. */
    ck_assert_ptr_nonnull(strstr(r.text, ">0 \xC2\xB5s</text>"));
    ck_assert_ptr_nonnull(strstr(r.text, ">20 \xC2\xB5s</text>"));
    ck_assert_ptr_null(strstr(r.text, ">25 \xC2\xB5s</text>"));
    free(r.text);

    /* Rectangles sit in their lane's row and scale with time: frame 7's H2D
     * (4 us of a 24 us span over 1040 px) starts at the plot's left + 4/24. */
    cJSON_ReplaceItemInObjectCaseSensitive(trace, "engine", cJSON_CreateString("cuda"));
    r = render(R_SVG, trace, list);
    ck_assert_ptr_nonnull(strstr(r.text, "<rect class=\"ev\" x=\"303.33\" y=\"65\" "
                                         "width=\"173.33\" height=\"14\" fill=\"#4e79a7\">"));
    free(r.text);
    cJSON_Delete(list);
    cJSON_Delete(trace);
}
END_TEST

START_TEST(svg_of_no_frames_is_well_formed) {
    cJSON *trace = parse_or_fail("{\"engine\":\"cuda\",\"slots\":2,\"frames\":[]}");
    struct rendered r = render(R_SVG, trace, NULL);
    char err[ERR_BYTES];

    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(xml_check(r.text, "svg", err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    ck_assert_uint_eq(count_of(r.text, "<rect class=\"ev\""), 0);
    ck_assert_ptr_nonnull(strstr(r.text, "0 frames, nothing to draw"));
    free(r.text);
    cJSON_Delete(trace);
}
END_TEST

START_TEST(xml_checker_catches_what_it_must) {
    static const char *const bad[] = {
        "<svg><g></svg>",         "<svg a=b/>", "<svg>a & b</svg>", "<svg/><svg/>",
        "<svg a=\"1\" a=\"2\"/>", "<g/>",       "text<svg/>",       "<svg>\x01</svg>",
    };
    char err[ERR_BYTES];

    ck_assert_int_eq(xml_check("<?xml version=\"1.0\"?>\n<svg a='&amp;'><g>x &lt; y</g></svg>\n",
                               "svg", err, sizeof err),
                     0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(xml_check(bad[i], "svg", err, sizeof err) < 0, "accepted %s", bad[i]);
}
END_TEST

START_TEST(durations_for_people) {
    char buf[32];

    ck_assert_str_eq(gf_report_format_ns(850, "us", buf, sizeof buf), "850 ns");
    ck_assert_str_eq(gf_report_format_ns(12345, "us", buf, sizeof buf), "12.3 us");
    ck_assert_str_eq(gf_report_format_ns(1234567, "us", buf, sizeof buf), "1.235 ms");
    ck_assert_str_eq(gf_report_format_ns(2500000000u, "us", buf, sizeof buf), "2.500 s");
}
END_TEST

static Suite *report_suite(void) {
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("table");

    tcase_add_test(tc, table_holds_the_expected_numbers);
    tcase_add_test(tc, table_of_a_cpu_daemon_with_null_gpu);
    tcase_add_test(tc, durations_for_people);
    suite_add_tcase(s, tc);

    tc = tcase_create("prometheus");
    tcase_add_test(tc, prometheus_parses_and_holds_the_values);
    tcase_add_test(tc, prometheus_label_escaping_round_trips);
    tcase_add_test(tc, prometheus_null_gpu_and_missing_keys);
    tcase_add_test(tc, prometheus_refuses_a_malformed_histogram);
    suite_add_tcase(s, tc);

    tc = tcase_create("trace");
    tcase_add_test(tc, chrome_trace_has_every_event_in_its_lane);
    tcase_add_test(tc, chrome_trace_of_no_frames_and_cpu_frames);
    tcase_add_loop_test(tc, trace_renderers_refuse_malformed_documents, 0,
                        (int)(sizeof bad_traces / sizeof bad_traces[0]));
    tcase_add_test(tc, svg_is_well_formed_with_one_rect_per_event);
    tcase_add_test(tc, svg_of_no_frames_is_well_formed);
    tcase_add_test(tc, xml_checker_catches_what_it_must);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(report_suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Check suite of the report renderers (client/report.h, client/report_*.c):
 * fixed STATS and TRACE documents (written here after daemon/STATS.md)
 * rendered as a table, Prometheus text, a Chrome trace and an SVG, each read
 * back by a test-side parser: a Prometheus text parser (prom.h: names,
 * labels, escapes, HELP/TYPE, grouped families, cumulative histograms), cJSON
 * for the trace, and a small XML well-formedness checker.
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

#include "prom.h"
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
 * 2.0, completion_delay 3.9, reply_write 1.5, end_to_end 15.0); the awkward pipeline has
 * counted nothing.  Latency buckets (not cumulative): (1,2] us: 1,
 * (2,5] us: 2, (10,20] us: 1.
 */
static const char stats_json[] =
    "{\"version\":\"0.1.0\",\"engine\":\"cuda\","
    " \"device\":{\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\",\"sm_count\":132,"
    "   \"memory_bytes\":150109880320,\"pci_bus_id\":\"0000:06:00.0\","
    "   \"pcie_generation\":null,\"pcie_width\":null},"
    " \"uptime_ns\":3723000000000,\"timing_events\":true,"
    " \"slots\":{\"count\":2,\"free\":1,\"in_flight\":1,\"submissions\":3,"
    "   \"zero_copy_submissions\":2,\"priority_submissions\":6,\"gathered_submissions\":1,"
    "   \"host_gathered_submissions\":3,"
    "   \"in_bytes\":16777216,\"out_bytes\":16777216},"
    " \"pinned_bytes\":67108864,"
    " \"connections\":{\"open\":1,\"total\":7,\"rejected\":0,\"closed_request_timeout\":2,"
    "   "
    "\"closed_receive_stall\":0,\"closed_write_timeout\":1,\"closed_idle\":3,\"refused\":5,"
    "\"moved\":6},"
    " \"frames\":{\"received\":6,\"answered\":4,\"failed\":1,\"dropped\":0,\"truncated\":0,"
    "   \"timed\":4,\"results_evicted\":0,\"parked\":7,\"in_progress\":1},"
    " \"rejected\":{\"bad_magic\":0,\"unknown_pipeline\":1,\"timeout\":0},"
    " \"requests\":{\"list\":3,\"stats\":2,\"trace\":0},"
    " \"bytes\":{\"in\":16384,\"out\":16384},"
    " \"backpressure_pauses\":12,"
    " \"shm\":{\"regions_open\":1,\"region_bytes\":1048576,\"regions_added\":3,"
    "   \"regions_removed\":2,\"frames\":2,\"bytes_in\":8192,\"bytes_out\":8192},"
    " \"device_regions\":{\"regions_open\":2,\"region_bytes\":4194304,\"regions_added\":4,"
    "   \"regions_removed\":2,\"frames\":5,\"bytes_in\":20480,\"bytes_out\":10240},"
    " \"pipelines\":["
    "  {\"id\":0,\"name\":\"echo\",\"kind\":\"echo\",\"frames\":4,"
    "   \"batches\":{\"submissions\":3,\"frames\":4,\"mean\":1.333,"
    "     \"bounds\":[1,2,4,8,16,32,64],\"counts\":[2,1,0,0,0,0,0],\"wait_ns\":2000},"
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
    " \"loop\":{\"utilisation_1s\":0.12,\"utilisation_10s\":0.04,\"idle_ns\":987654321,"
    "   \"polling_ns\":20480000}}";

/*
 * What a daemon of two shards on two devices adds to stats_json (daemon/
 * STATS.md): shard 0 on device 0 answered 3 frames and failed 1, shard 1 on
 * device 1 answered 1; their sums are stats_json's totals (slots, frames,
 * submissions, 1 s rate, pinned memory) and their loops' mean is its 12%.
 */
static const char shards_json[] =
    "{\"shard_count\":2,"
    " \"shards\":["
    "  {\"shard\":0,\"device\":0,\"connections\":1,\"slots_busy\":1,\"in_flight\":1,"
    "   \"frames_answered\":3,\"frames_failed\":1,\"submissions\":2,\"frames_per_s\":64.5,"
    "   \"bytes_in_per_s\":262144.0,\"loop_utilisation_1s\":0.15,"
    "   \"gpu\":{\"window_ns\":1000000000,\"frames\":97,\"h2d_busy\":0.21,\"kernel_busy\":0.05,"
    "     \"d2h_busy\":0.2,\"copy_busy\":0.38,\"compute_busy\":0.05,\"overlap\":0.03}},"
    "  {\"shard\":1,\"device\":1,\"connections\":0,\"slots_busy\":0,\"in_flight\":0,"
    "   \"frames_answered\":1,\"frames_failed\":0,\"submissions\":1,\"frames_per_s\":32.5,"
    "   \"bytes_in_per_s\":147456.0,\"loop_utilisation_1s\":0.09,\"gpu\":null}],"
    " \"devices\":["
    "  {\"index\":0,\"name\":\"NVIDIA H200\",\"pci_bus_id\":\"0000:06:00.0\",\"shards\":[0],"
    "   \"in_flight\":1,\"frames_answered\":3,\"frames_per_s\":64.5,\"bytes_in_per_s\":262144.0,"
    "   \"pinned_bytes\":33554432},"
    "  {\"index\":1,\"name\":\"NVIDIA H200\",\"pci_bus_id\":\"0000:07:00.0\",\"shards\":[1],"
    "   \"in_flight\":0,\"frames_answered\":1,\"frames_per_s\":32.5,\"bytes_in_per_s\":147456.0,"
    "   \"pinned_bytes\":33554432}]}";

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
    {7, 0, "completion_delay", "host", 14000, 17000, 4096},
    {7, 0, "reply_write", "host", 17000, 20000, 4096},
    {8, 1, "receive", "host", 2000, 8000, 4096},
    {8, 1, "H2D", "H2D", 8000, 12000, 4096},
    {8, 1, "kernel", "kernel", 12000, 13250, 4096},
    {8, 1, "D2H", "D2H", 14000, 17123, 2048},
    {8, 1, "completion_delay", "host", 17123, 19000, 2048},
    {8, 1, "reply_write", "host", 19000, 23456, 2048},
    {9, 0, "receive", "host", 20000, 21000, 100},
    {9, 0, "completion_delay", "host", 22000, 22500, 100},
    {9, 0, "reply_write", "host", 22500, 25000, 100},
};
#define TRACE_EVENTS (sizeof trace_events / sizeof trace_events[0])

/*
 * TRACE of a daemon of two shards of two slots: frame 7 in slot 0 of shard 0
 * (timed) and frame 8 in slot 0 of shard 1 (timing off), at the same time.
 * The two slots 0 are different slots and must not share lanes.
 */
static const char trace_two_shards_json[] =
    "{\"clock\":\"monotonic\",\"t0_ns\":5123456789,\"engine\":\"cuda\",\"slots\":2,"
    "\"shards\":2,\"frames\":["
    " {\"frame_id\":7,\"conn\":3,\"pipeline\":0,\"slot\":0,\"shard\":0,\"status\":0,"
    "  \"in_bytes\":4096,\"out_bytes\":4096,\"arrived\":1000,\"claimed\":1000,"
    "  \"submitted\":5000,\"h2d\":[5000,9000],\"kernel\":[9000,10500],"
    "  \"d2h\":[10500,14000],\"done\":16000,\"drained\":17000,\"written\":20000},"
    " {\"frame_id\":8,\"conn\":5,\"pipeline\":0,\"slot\":0,\"shard\":1,\"status\":0,"
    "  \"in_bytes\":100,\"out_bytes\":100,\"arrived\":2000,\"claimed\":2000,"
    "  \"submitted\":6000,\"h2d\":null,\"kernel\":null,\"d2h\":null,"
    "  \"done\":8000,\"drained\":9000,\"written\":12000}]}";

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

/* stats_json with the members of shards_json added, and slots.per_shard
 * set to `per_shard`: a sharded daemon's STATS.  The caller deletes it. */
static cJSON *sharded_stats(double per_shard) {
    cJSON *doc = parse_or_fail(stats_json), *add = parse_or_fail(shards_json), *item;

    while ((item = add->child) != NULL)
        cJSON_AddItemToObject(doc, item->string, cJSON_DetachItemViaPointer(add, item));
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(doc, "slots"), "per_shard", per_shard);
    cJSON_Delete(add);
    return doc;
}

/* Counts the non-overlapping occurrences of `needle` in `hay`. */
static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + strlen(needle), needle))
        n++;
    return n;
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
    /* The phases are named as in STATS and Prometheus. */
    ck_assert_ptr_nonnull(strstr(r.text, "pipeline        frames  slot_wait    receive        h2d "
                                         "    kernel        d2h completion_delay reply_write "
                                         "end_to_end\n"));
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
    ck_assert_ptr_null(strstr(r.text, "\ngpu "));
    ck_assert_ptr_null(strstr(r.text, "pipeline")); /* no pipelines, no table */
    /* No frame yet: no mean, no percentiles of nothing. */
    ck_assert_ptr_nonnull(strstr(r.text, "latency      0 frames (end to end, since start)\n"));
    ck_assert_ptr_null(strstr(r.text, "p50"));
    free(r.text);
    cJSON_Delete(doc);

    /* What a CPU daemon really sends: a "gpu" object and copy phases of 0 ns.
     * The table shows neither a gpu line nor copy times the engine never had. */
    doc = parse_or_fail(
        "{\"version\":\"0.1.0\",\"engine\":\"cpu\",\"device\":{\"name\":\"cpu\",\"threads\":2},"
        " \"pipelines\":[{\"id\":0,\"name\":\"echo\",\"kind\":\"echo\",\"frames\":2,"
        "   "
        "\"phases\":{\"slot_wait\":{\"count\":2,\"ns\":2000},\"receive\":{\"count\":2,\"ns\":4000},"
        "     \"h2d\":{\"count\":2,\"ns\":0},\"kernel\":{\"count\":2,\"ns\":6000},"
        "     \"d2h\":{\"count\":2,\"ns\":0},\"completion_delay\":{\"count\":2,\"ns\":8000},"
        "     "
        "\"reply_write\":{\"count\":2,\"ns\":10000},\"end_to_end\":{\"count\":2,\"ns\":40000}}}],"
        " \"gpu\":{\"window_ns\":1000000000,\"frames\":2,\"h2d_busy\":0,\"kernel_busy\":0.01,"
        "   \"d2h_busy\":0,\"copy_busy\":0,\"compute_busy\":0.01,\"overlap\":0}}");
    r = render(R_TABLE, doc, NULL);
    char w[16][32];
    static const char *const header[] = {
        "pipeline", "frames", "slot_wait",        "receive",     "h2d",
        "kernel",   "d2h",    "completion_delay", "reply_write", "end_to_end"};
    static const char *const row[] = {"echo", "2", "1.0", "2.0", "-",
                                      "3.0",  "-", "4.0", "5.0", "20.0"};
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(words_of_line(r.text, "pipeline ", w, 16), 10);
    for (int i = 0; i < 10; i++)
        ck_assert_str_eq(w[i], header[i]);
    ck_assert_int_eq(words_of_line(r.text, "echo ", w, 16), 10);
    for (int i = 0; i < 10; i++)
        ck_assert_str_eq(w[i], row[i]);
    ck_assert_ptr_null(strstr(r.text, "\ngpu "));
    ck_assert_ptr_null(strstr(r.text, "\noverlap "));
    free(r.text);
    cJSON_Delete(doc);

    /* A CUDA daemon with timing events off says why there is no gpu line. */
    doc = parse_or_fail("{\"engine\":\"cuda\",\"gpu\":null}");
    r = render(R_TABLE, doc, NULL);
    ck_assert_ptr_nonnull(strstr(r.text, "gpu          not measured (timing_events off"));
    free(r.text);
    cJSON_Delete(doc);

    doc = parse_or_fail("[1, 2]");
    r = render(R_TABLE, doc, NULL);
    ck_assert_int_eq(r.rc, -EINVAL);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

/* stats_json's whole table, as it was before the daemon had shards. */
static const char stats_table[] =
    "gpuframed 0.1.0, engine cuda, up 1h 02m 03s\n"
    "device       NVIDIA H200, compute 9.0, 132 SMs, 139.8 GiB, bus 0000:06:00.0\n"
    "slots        2 (1 free, 1 in flight), 16.0 MiB in + 16.0 MiB out each; pinned 64.0 MiB; "
    "timing events on\n"
    "\n"
    "connections  1 open, 7 total, 0 rejected\n"
    "frames       6 received, 4 answered, 1 failed, 0 dropped, 0 truncated, 1 in progress\n"
    "bytes        16.0 KiB in, 16.0 KiB out\n"
    "requests     3 list, 2 stats, 0 trace\n"
    "backpressure 12 pauses (reading stopped for want of a slot)\n"
    "rejected     unknown_pipeline 1\n"
    "\n"
    "rates            frames/s      in MB/s     out MB/s\n"
    "  last 1s            97.0        0.410        0.397\n"
    "  last 10s            9.7        0.041        0.040\n"
    "\n"
    "latency      4 frames, mean 15.0 us (end to end, since start)\n"
    "             p50 4.0 us   p90 17.0 us   p99 18.8 us   p99.9 19.0 us   max 19.0 us\n"
    "\n"
    "mean time per frame and phase, microseconds (sum / count since start)\n"
    "pipeline        frames  slot_wait    receive        h2d     kernel        d2h "
    "completion_delay reply_write end_to_end\n"
    "echo                 4        1.0        2.5        2.1        0.9        2.0         "
    "     3.9         1.5       15.0\n"
    "we\"ird\\name?x        0          -          -          -          -          -         "
    "       -           -          -\n"
    "\n"
    "frames per submission (batches), by pipeline; wait: mean time a whole frame waited for its "
    "batch, microseconds\n"
    "pipeline      submissions   mean      1      2    3-4    5-8   9-16  17-32  33-64     wait\n"
    "echo                    3    1.3      2      1      0      0      0      0      0      0.5\n"
    "\n"
    "gpu          last 1.000 s, 97 frames: busy h2d 21.0%, kernel 5.0%, d2h 20.0%; copy 38.0%, "
    "compute 5.0%\n"
    "overlap      3.0% of the time two of H2D, kernel, D2H ran at once\n"
    "event loop   busy 12.0% over 1 s, 4.0% over 10 s\n";

/* A document without "shards" and "devices" (a daemon before sharding)
 * prints exactly the table it always did. */
START_TEST(table_without_shards_is_unchanged) {
    cJSON *doc = parse_or_fail(stats_json);
    struct rendered r = render(R_TABLE, doc, NULL);

    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.text, stats_table);
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

/* Two shards on two GPUs: the slots line names the slots per shard, and a
 * line per shard and per device follows the rest, which is unchanged. */
START_TEST(table_of_a_sharded_daemon) {
    static const char slots_line[] =
        "slots        2 (1 per shard; 1 free, 1 in flight), 16.0 MiB in + 16.0 MiB out each; "
        "pinned 64.0 MiB; timing events on\n";
    static const char shards_part[] =
        "\n"
        "shards: event loops, each with its own slots (rates over the last 1 s)\n"
        "shard device connections slots busy in flight   frames/s loop busy\n"
        "    0      0           1          1         1       64.5     15.0%\n"
        "    1      1           0          0         0       32.5      9.0%\n"
        "\n"
        "device name        shards   frames/s\n"
        "     0 NVIDIA H200 0            64.5\n"
        "     1 NVIDIA H200 1            32.5\n";
    cJSON *doc = sharded_stats(1);
    struct rendered r = render(R_TABLE, doc, NULL);
    char expect[sizeof stats_table + sizeof slots_line + sizeof shards_part];
    const char *old_slots = strstr(stats_table, "slots ");
    const char *old_rest = strchr(old_slots, '\n') + 1;

    ck_assert_int_eq(r.rc, 0);
    snprintf(expect, sizeof expect, "%.*s%s%s%s", (int)(old_slots - stats_table), stats_table,
             slots_line, old_rest, shards_part);
    ck_assert_str_eq(r.text, expect);
    free(r.text);
    cJSON_Delete(doc);

    /* The CPU engine's shards run on no device ("cpu"), all on one line of
     * the devices section; a missing figure prints as "-". */
    doc = parse_or_fail(
        "{\"shards\":[{\"shard\":0,\"device\":null,\"connections\":2,\"slots_busy\":1,"
        "   \"in_flight\":1,\"frames_per_s\":10.25,\"loop_utilisation_1s\":0.5},"
        "  {\"shard\":1,\"device\":null}],"
        " \"devices\":[{\"index\":null,\"name\":\"cpu\",\"shards\":[0,1],\"frames_per_s\":10.25}]"
        "}");
    r = render(R_TABLE, doc, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.text,
                     "gpuframed ?, engine ?, up -\n"
                     "\n"
                     "\n"
                     "\n"
                     "shards: event loops, each with its own slots (rates over the last 1 s)\n"
                     "shard device connections slots busy in flight   frames/s loop busy\n"
                     "    0    cpu           2          1         1       10.2     50.0%\n"
                     "    1    cpu           -          -         -          -         -\n"
                     "\n"
                     "device name shards   frames/s\n"
                     "   cpu cpu  0,1          10.2\n");
    free(r.text);
    cJSON_Delete(doc);
}
END_TEST

/* ---- Prometheus ------------------------------------------------------------- */

static struct prom_doc prom; /* large: not on the stack */

/* The parser the Prometheus tests rely on takes a valid exposition and
 * refuses each way of breaking format 0.0.4, naming the line. */
START_TEST(prometheus_parser_is_strict) {
    static const char head[] = "# HELP gpuframe_x_total X.\n# TYPE gpuframe_x_total counter\n";
    static const struct {
        const char *body, *error;
    } bad[] = {
        {"gpuframe_x_total 1", "the last line does not end with a newline"},
        {"gpuframe_x_total 1\n\n", "empty line"},
        {"gpuframe_x_total{a=\"1\"} 1\ngpuframe_x_total{a=\"1\"} 2\n", "appears twice"},
        {"gpuframe_x_total{a=\"1\",a=\"2\"} 1\n", "label a twice"},
        {"gpuframe_x_total{__a=\"1\"} 1\n", "reserved label name"},
        {"gpuframe_x_total{a=\"\\t\"} 1\n", "bad escape"},
        {"gpuframe_x_total{a=\"1} 1\n", "unterminated label value"},
        {"gpuframe_x_total{a:b=\"1\"} 1\n", "bad label"},
        {"gpuframe_x_total  1\n", "bad value"},
        {"gpuframe_x_total 1 1700000000000\n", "bad value"},
        {"gpuframe_x_total one\n", "bad value"},
        {"gpuframe_y 1\n", "has no HELP and TYPE"},
        {"# TYPE gpuframe_x_total gauge\n", "bad or second TYPE"},
        {"# HELP gpuframe_x_total again\n", "second HELP"},
        {"# HELP gpuframe_y bad \\t escape\n", "bad escape"},
        {"# TYPE gpuframe_y countr\n", "bad or second TYPE"},
        {"gpuframe_x_total 1\n# HELP gpuframe_y Y.\n# TYPE gpuframe_y gauge\ngpuframe_y 1\n"
         "gpuframe_x_total{a=\"2\"} 1\n",
         "not contiguous"},
    };
    char text[512], err[ERR_BYTES];

    snprintf(text, sizeof text, "%sgpuframe_x_total{a=\"q\\\"\\\\\\n\"} +Inf\n", head);
    ck_assert_msg(prom_parse(text, &prom, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(prom.samples[0].value_of[0], "q\"\\\n");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", head, bad[i].body);
        err[0] = '\0';
        ck_assert_msg(prom_parse(text, &prom, err, sizeof err) < 0, "accepted:\n%s", text);
        ck_assert_msg(strstr(err, bad[i].error) != NULL, "'%s' for:\n%s", err, text);
    }
}
END_TEST

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
    /* Frames per submission: a cumulative histogram, its sum the frames. */
    ck_assert_double_eq(prom_get(&prom, "gpuframe_pipeline_batch_frames_bucket", "pipeline", "echo",
                                 "le", "1", NULL),
                        2);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_pipeline_batch_frames_bucket", "pipeline", "echo",
                                 "le", "2", NULL),
                        3);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_pipeline_batch_frames_bucket", "pipeline", "echo",
                                 "le", "+Inf", NULL),
                        3);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_pipeline_batch_frames_sum", "pipeline", "echo", NULL), 4);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_pipeline_batch_frames_count", "pipeline", "echo", NULL), 3);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_pipeline_batch_wait_seconds_total", "pipeline", "echo", NULL),
        2000 / 1e9);
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
    ck_assert_double_eq(prom_get(&prom, "gpuframe_gpu_busy_ratio", "stage", "h2d", NULL), 0.21);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_gpu_overlap_ratio", NULL), 0.03);
    /* Every counter of STATS, as a counter; the shm gauges. */
    static const struct {
        const char *name;
        double value;
    } unlabelled[] = {
        {"gpuframe_loop_idle_seconds_total", 0.987654321},
        {"gpuframe_loop_polling_seconds_total", 0.02048},
        {"gpuframe_submissions_total", 3},
        {"gpuframe_zero_copy_submissions_total", 2},
        {"gpuframe_priority_submissions_total", 6},
        {"gpuframe_gathered_submissions_total", 1},
        {"gpuframe_host_gathered_submissions_total", 3},
        {"gpuframe_frames_timed_total", 4},
        {"gpuframe_results_evicted_total", 0},
        {"gpuframe_payloads_parked_total", 7},
        {"gpuframe_connections_refused_total", 5},
        {"gpuframe_connections_moved_total", 6},
        {"gpuframe_shm_regions_open", 1},
        {"gpuframe_shm_region_bytes", 1048576},
        {"gpuframe_shm_regions_added_total", 3},
        {"gpuframe_shm_regions_removed_total", 2},
        {"gpuframe_shm_frames_total", 2},
        {"gpuframe_shm_input_bytes_total", 8192},
        {"gpuframe_shm_output_bytes_total", 8192},
        {"gpuframe_device_regions_open", 2},
        {"gpuframe_device_region_bytes", 4194304},
        {"gpuframe_device_regions_added_total", 4},
        {"gpuframe_device_regions_removed_total", 2},
        {"gpuframe_device_frames_total", 5},
        {"gpuframe_device_input_bytes_total", 20480},
        {"gpuframe_device_output_bytes_total", 10240},
    };
    for (size_t i = 0; i < sizeof unlabelled / sizeof unlabelled[0]; i++)
        ck_assert_msg(prom_get(&prom, unlabelled[i].name, NULL) == unlabelled[i].value, "%s",
                      unlabelled[i].name);
    static const struct {
        const char *reason;
        double count;
    } closed[] = {{"request_timeout", 2}, {"receive_stall", 0}, {"write_timeout", 1}, {"idle", 3}};
    for (size_t i = 0; i < sizeof closed / sizeof closed[0]; i++)
        ck_assert_double_eq(
            prom_get(&prom, "gpuframe_connections_closed_total", "reason", closed[i].reason, NULL),
            closed[i].count);
    /* The daemon's own windows are not exported: rate() makes any window
     * from the counters. */
    ck_assert(!prom_has_prefix(&prom, "gpuframe_frames_per_second"));
    ck_assert(!prom_has_prefix(&prom, "gpuframe_input_bytes_per_second"));
    ck_assert(!prom_has_prefix(&prom, "gpuframe_output_bytes_per_second"));
    ck_assert(!prom_has_prefix(&prom, "gpuframe_loop_utilisation"));
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

/* stats_json with `key` replaced by `value` (NULL: deleted), as Prometheus
 * text that parses into `prom` and keeps the house's conventions; the
 * caller frees the text. */
static char *prom_with(const char *key, cJSON *value) {
    cJSON *doc = parse_or_fail(stats_json);
    char err[ERR_BYTES];

    if (value != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(doc, key, value);
    else
        cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    struct rendered r = render(R_PROM, doc, NULL);
    cJSON_Delete(doc);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s", err);
    assert_prom_conventions(&prom);
    return r.text;
}

START_TEST(prometheus_null_gpu_cpu_engine_and_missing_keys) {
    struct rendered r;
    cJSON *doc;

    /* No GPU metric, nor its HELP line, when "gpu" is null or the engine
     * is the CPU one (whose "gpu" object describes no GPU). */
    char *text = prom_with("gpu", cJSON_CreateNull());
    ck_assert_ptr_null(strstr(text, "gpuframe_gpu_"));
    free(text);
    text = prom_with("engine", cJSON_CreateString("cpu"));
    ck_assert_ptr_null(strstr(text, "gpuframe_gpu_"));
    ck_assert_double_eq(prom_get(&prom, "gpuframe_info", "version", "0.1.0", "engine", "cpu",
                                 "device", "NVIDIA H200", NULL),
                        1);
    free(text);
    /* A missing section leaves the rest. */
    text = prom_with("shm", NULL);
    ck_assert(!prom_has_prefix(&prom, "gpuframe_shm_"));
    ck_assert_double_eq(prom_get(&prom, "gpuframe_latency_seconds_count", NULL), 4);
    free(text);

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

/* Two shards on two GPUs: every series of a daemon before sharding, byte
 * for byte, then the shard count and the per-shard and per-device series,
 * exactly. */
START_TEST(prometheus_of_a_sharded_daemon) {
    static const char shards_part[] =
        "# HELP gpuframe_shards Shards: event loops, each on its own thread with its own slots.\n"
        "# TYPE gpuframe_shards gauge\n"
        "gpuframe_shards 2\n"
        "# HELP gpuframe_shard_connections Client connections open now, by shard.\n"
        "# TYPE gpuframe_shard_connections gauge\n"
        "gpuframe_shard_connections{shard=\"0\",device=\"0\"} 1\n"
        "gpuframe_shard_connections{shard=\"1\",device=\"1\"} 0\n"
        "# HELP gpuframe_shard_slots_busy Frame slots holding a frame now, by shard.\n"
        "# TYPE gpuframe_shard_slots_busy gauge\n"
        "gpuframe_shard_slots_busy{shard=\"0\",device=\"0\"} 1\n"
        "gpuframe_shard_slots_busy{shard=\"1\",device=\"1\"} 0\n"
        "# HELP gpuframe_shard_in_flight Frame slots whose frame is on the engine now, by shard.\n"
        "# TYPE gpuframe_shard_in_flight gauge\n"
        "gpuframe_shard_in_flight{shard=\"0\",device=\"0\"} 1\n"
        "gpuframe_shard_in_flight{shard=\"1\",device=\"1\"} 0\n"
        "# HELP gpuframe_shard_frames_answered_total Frames answered with a RESULT, by shard.\n"
        "# TYPE gpuframe_shard_frames_answered_total counter\n"
        "gpuframe_shard_frames_answered_total{shard=\"0\",device=\"0\"} 3\n"
        "gpuframe_shard_frames_answered_total{shard=\"1\",device=\"1\"} 1\n"
        "# HELP gpuframe_shard_frames_failed_total Frames answered with an ERROR, by shard.\n"
        "# TYPE gpuframe_shard_frames_failed_total counter\n"
        "gpuframe_shard_frames_failed_total{shard=\"0\",device=\"0\"} 1\n"
        "gpuframe_shard_frames_failed_total{shard=\"1\",device=\"1\"} 0\n"
        "# HELP gpuframe_shard_submissions_total Batches handed to the engine, by shard.\n"
        "# TYPE gpuframe_shard_submissions_total counter\n"
        "gpuframe_shard_submissions_total{shard=\"0\",device=\"0\"} 2\n"
        "gpuframe_shard_submissions_total{shard=\"1\",device=\"1\"} 1\n"
        "# HELP gpuframe_shard_loop_utilisation_ratio Busy fraction of the shard's event loop "
        "over the daemon's last second.\n"
        "# TYPE gpuframe_shard_loop_utilisation_ratio gauge\n"
        "gpuframe_shard_loop_utilisation_ratio{shard=\"0\",device=\"0\"} 0.15\n"
        "gpuframe_shard_loop_utilisation_ratio{shard=\"1\",device=\"1\"} 0.09\n"
        "# HELP gpuframe_device_info Name and PCI bus id of each device the shards run on.\n"
        "# TYPE gpuframe_device_info gauge\n"
        "gpuframe_device_info{device=\"0\",name=\"NVIDIA H200\",pci_bus_id=\"0000:06:00.0\"} 1\n"
        "gpuframe_device_info{device=\"1\",name=\"NVIDIA H200\",pci_bus_id=\"0000:07:00.0\"} 1\n"
        "# HELP gpuframe_device_in_flight Frame slots whose frame is on the device now, over its "
        "shards.\n"
        "# TYPE gpuframe_device_in_flight gauge\n"
        "gpuframe_device_in_flight{device=\"0\"} 1\n"
        "gpuframe_device_in_flight{device=\"1\"} 0\n"
        "# HELP gpuframe_device_frames_answered_total Frames answered with a RESULT by the "
        "device's shards.\n"
        "# TYPE gpuframe_device_frames_answered_total counter\n"
        "gpuframe_device_frames_answered_total{device=\"0\"} 3\n"
        "gpuframe_device_frames_answered_total{device=\"1\"} 1\n"
        "# HELP gpuframe_device_pinned_bytes Pinned host memory the device's shards hold.\n"
        "# TYPE gpuframe_device_pinned_bytes gauge\n"
        "gpuframe_device_pinned_bytes{device=\"0\"} 33554432\n"
        "gpuframe_device_pinned_bytes{device=\"1\"} 33554432\n";
    cJSON *plain = parse_or_fail(stats_json), *doc = sharded_stats(1);
    struct rendered before = render(R_PROM, plain, NULL), r = render(R_PROM, doc, NULL);
    char err[ERR_BYTES];

    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    ck_assert_int_eq(before.rc, 0);
    /* No series of a daemon before sharding changes, nor is there a new one. */
    ck_assert_ptr_null(strstr(before.text, "gpuframe_shard"));
    ck_assert_ptr_null(strstr(before.text, "{device="));
    ck_assert_uint_eq(r.len, before.len + strlen(shards_part));
    ck_assert_int_eq(memcmp(r.text, before.text, before.len), 0);
    ck_assert_str_eq(r.text + before.len, shards_part);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    assert_prom_conventions(&prom);
    assert_prom_histograms(&prom);
    /* The shards' rates are not exported: rate() of their counters. */
    ck_assert(!prom_has_prefix(&prom, "gpuframe_shard_frames_per"));
    ck_assert(!prom_has_prefix(&prom, "gpuframe_shard_bytes"));
    free(r.text);
    free(before.text);
    cJSON_Delete(plain);
    cJSON_Delete(doc);

    /* A shard or device named twice, or with a malformed number, is left
     * out rather than written twice; the CPU engine's device is "cpu". */
    doc = parse_or_fail(
        "{\"shards\":[{\"shard\":0,\"device\":null,\"connections\":2},"
        "  {\"shard\":0,\"device\":null,\"connections\":5},{\"shard\":-1,\"connections\":1},"
        "  {\"shard\":1,\"device\":\"x\",\"connections\":1}],"
        " \"devices\":[{\"index\":null,\"name\":\"cpu\",\"in_flight\":3},"
        "  {\"index\":null,\"name\":\"cpu\",\"in_flight\":4},{\"index\":1.5,\"in_flight\":1}]}");
    r = render(R_PROM, doc, NULL);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(prom_parse(r.text, &prom, err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    ck_assert_double_eq(
        prom_get(&prom, "gpuframe_shard_connections", "shard", "0", "device", "cpu", NULL), 2);
    ck_assert_int_eq(count_of(r.text, "gpuframe_shard_connections{"), 1);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_device_in_flight", "device", "cpu", NULL), 3);
    ck_assert_int_eq(count_of(r.text, "gpuframe_device_in_flight{"), 1);
    ck_assert_double_eq(prom_get(&prom, "gpuframe_device_info", "device", "cpu", "name", "cpu",
                                 "pci_bus_id", "", NULL),
                        1);
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
    ck_assert_uint_eq(info.events, 4); /* receive, kernel, completion_delay, reply_write */
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

/* The Chrome trace of trace_two_shards_json, without a LIST document: lanes
 * named "shard K slot J", each slot of each shard with its own tids (shard 1
 * slot 0 is lane group 1 * 2 + 0, tids 9 to 12), a "shard" argument. */
static const char two_shards_chrome[] =
    "{\"displayTimeUnit\":\"ns\",\n"
    "\"otherData\":{\"source\":\"gpuframed TRACE\",\"clock\":\"monotonic\",\"t0_ns\":5123456789,"
    "\"engine\":\"cuda\",\"shards\":2,\"frames\":2},\n"
    "\"traceEvents\":[\n"
    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"gpuframed"
    " (cuda engine)\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"shard 0"
    " slot 0 H2D\"}},\n"
    "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
    "\"args\":{\"sort_index\":1}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"shard 0"
    " slot 0 kernel\"}},\n"
    "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":2,"
    "\"args\":{\"sort_index\":2}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":3,\"args\":{\"name\":\"shard 0"
    " slot 0 D2H\"}},\n"
    "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":3,"
    "\"args\":{\"sort_index\":3}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":4,\"args\":{\"name\":\"shard 0"
    " slot 0 host\"}},\n"
    "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":4,"
    "\"args\":{\"sort_index\":4}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":12,\"args\":{\"name\":\"shard 1"
    " slot 0 host\"}},\n"
    "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":12,"
    "\"args\":{\"sort_index\":12}},\n"
    "{\"name\":\"receive\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":4,\"ts\":1.000,"
    "\"dur\":4.000,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,\"conn\":3,"
    "\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"H2D\",\"cat\":\"gpu\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":5.000,"
    "\"dur\":4.000,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,\"conn\":3,"
    "\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"kernel\",\"cat\":\"gpu\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":9.000,"
    "\"dur\":1.500,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,\"conn\":3,"
    "\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"D2H\",\"cat\":\"gpu\",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":10.500,"
    "\"dur\":3.500,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,\"conn\":3,"
    "\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"completion_delay\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":4,"
    "\"ts\":14.000,\"dur\":3.000,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,"
    "\"conn\":3,\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"reply_write\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":4,\"ts\":17.000,"
    "\"dur\":3.000,\"args\":{\"frame_id\":7,\"pipeline\":0,\"shard\":0,\"slot\":0,\"conn\":3,"
    "\"status\":0,\"bytes\":4096,\"slot_wait_ns\":0,\"end_to_end_ns\":19000}},\n"
    "{\"name\":\"receive\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":12,\"ts\":2.000,"
    "\"dur\":4.000,\"args\":{\"frame_id\":8,\"pipeline\":0,\"shard\":1,\"slot\":0,\"conn\":5,"
    "\"status\":0,\"bytes\":100,\"slot_wait_ns\":0,\"end_to_end_ns\":10000}},\n"
    "{\"name\":\"completion_delay\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":12,"
    "\"ts\":8.000,\"dur\":1.000,\"args\":{\"frame_id\":8,\"pipeline\":0,\"shard\":1,\"slot\":0,"
    "\"conn\":5,\"status\":0,\"bytes\":100,\"slot_wait_ns\":0,\"end_to_end_ns\":10000}},\n"
    "{\"name\":\"reply_write\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":12,\"ts\":9.000,"
    "\"dur\":3.000,\"args\":{\"frame_id\":8,\"pipeline\":0,\"shard\":1,\"slot\":0,\"conn\":5,"
    "\"status\":0,\"bytes\":100,\"slot_wait_ns\":0,\"end_to_end_ns\":10000}}\n"
    "]}\n";

START_TEST(chrome_trace_of_two_shards_is_exact) {
    cJSON *trace = parse_or_fail(trace_two_shards_json);
    struct rendered r = render(R_CHROME, trace, NULL);
    gf_report_trace_info info;
    char err[ERR_BYTES];

    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_str_eq(r.text, two_shards_chrome);
    free(r.text);
    ck_assert_int_eq(gf_report_trace_summary(trace, &info, err, sizeof err), 0);
    ck_assert_uint_eq(info.frames, 2);
    ck_assert_uint_eq(info.events, 9);
    ck_assert_uint_eq(info.lanes, 5); /* shard 0 slot 0: four; shard 1 slot 0: host */

    /* Without "slots" or "shards" (the frames say so): the highest slot + 1,
     * here 1, slots a shard, so shard 1 slot 0 is lane group 1, tids 5 to 8. */
    cJSON_DeleteItemFromObjectCaseSensitive(trace, "slots");
    cJSON_DeleteItemFromObjectCaseSensitive(trace, "shards");
    r = render(R_CHROME, trace, NULL);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.text, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                                         "\"tid\":8,\"args\":{\"name\":\"shard 1 slot 0 host\"}}"));
    ck_assert_ptr_nonnull(strstr(r.text, "\"shards\":2,\"frames\":2}"));
    ck_assert_uint_eq(count_of(r.text, "\"thread_name\""), 5);
    free(r.text);
    cJSON_Delete(trace);
}
END_TEST

/* trace_json with "shards": 1 and each frame's "shard": 0, as a sharded
 * daemon of one shard sends it, renders byte for byte as without them. */
START_TEST(trace_of_one_shard_is_unchanged) {
    cJSON *plain = parse_or_fail(trace_json), *list = parse_or_fail(list_json);
    cJSON *sharded = parse_or_fail(trace_json), *f;

    cJSON_AddNumberToObject(sharded, "shards", 1);
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(sharded, "frames"))
        cJSON_AddNumberToObject(f, "shard", 0);
    for (enum renderer k = R_CHROME; k <= R_SVG; k++) {
        struct rendered a = render(k, plain, list), b = render(k, sharded, list);
        ck_assert_msg(a.rc == 0 && b.rc == 0, "%s %s", a.err, b.err);
        ck_assert_str_eq(b.text, a.text);
        ck_assert_ptr_null(strstr(a.text, "shard"));
        free(a.text);
        free(b.text);
    }
    cJSON_Delete(sharded);
    cJSON_Delete(list);
    cJSON_Delete(plain);
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
    {"{\"frames\":[{\"slot\":0,\"shard\":5000,\"claimed\":1,\"submitted\":2,\"done\":3,"
     "\"drained\":4,\"written\":5}]}",
     "shard 5000"},
    /* Lane group 1 * 600 + 500 is beyond GF_REPORT_SLOTS_MAX. */
    {"{\"slots\":600,\"shards\":2,\"frames\":[{\"slot\":500,\"shard\":1,\"claimed\":1,"
     "\"submitted\":2,\"done\":3,\"drained\":4,\"written\":5}]}",
     "shard 1 slot 500"},
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

/* The SVG of trace_two_shards_json, without a LIST document: wider labels,
 * "shard K slot J" in labels and tooltips, shard 1 slot 0's row apart from
 * and shaded unlike shard 0 slot 0's, and frame 8's events in it. */
static const char two_shards_svg[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"1200\" height=\"210\""
    " viewBox=\"0 0 1200 210\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""
    " font-size=\"11\">\n"
    "<rect x=\"0\" y=\"0\" width=\"1200\" height=\"210\" fill=\"#ffffff\"/>\n"
    "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">gpuframed trace: 2 frames"
    " over 19.0 \xC2\xB5s, cuda engine, 2 shards of 2 slots</text>\n"
    "<rect class=\"key\" x=\"207\" y=\"36\" width=\"12\" height=\"12\" fill=\"#9c9c9c\"/><text"
    " x=\"224\" y=\"46\">receive (host)</text>\n"
    "<rect class=\"key\" x=\"342\" y=\"36\" width=\"12\" height=\"12\" fill=\"#4e79a7\"/><text"
    " x=\"359\" y=\"46\">H2D</text>\n"
    "<rect class=\"key\" x=\"400\" y=\"36\" width=\"12\" height=\"12\" fill=\"#59a14f\"/><text"
    " x=\"417\" y=\"46\">kernel</text>\n"
    "<rect class=\"key\" x=\"479\" y=\"36\" width=\"12\" height=\"12\" fill=\"#f28e2b\"/><text"
    " x=\"496\" y=\"46\">D2H</text>\n"
    "<rect class=\"key\" x=\"537\" y=\"36\" width=\"12\" height=\"12\" fill=\"#e15759\"/><text"
    " x=\"554\" y=\"46\">completion_delay (host)</text>\n"
    "<rect class=\"key\" x=\"735\" y=\"36\" width=\"12\" height=\"12\" fill=\"#b07aa1\"/><text"
    " x=\"752\" y=\"46\">reply_write (host)</text>\n"
    "<g id=\"lanes\">\n"
    "<rect class=\"lane\" x=\"0\" y=\"62\" width=\"1200\" height=\"20\" fill=\"#fbfbfb\"/><text"
    " x=\"199\" y=\"76\" text-anchor=\"end\">shard 0 slot 0 H2D</text>\n"
    "<rect class=\"lane\" x=\"0\" y=\"82\" width=\"1200\" height=\"20\" fill=\"#fbfbfb\"/><text"
    " x=\"199\" y=\"96\" text-anchor=\"end\">shard 0 slot 0 kernel</text>\n"
    "<rect class=\"lane\" x=\"0\" y=\"102\" width=\"1200\" height=\"20\" fill=\"#fbfbfb\"/><text"
    " x=\"199\" y=\"116\" text-anchor=\"end\">shard 0 slot 0 D2H</text>\n"
    "<rect class=\"lane\" x=\"0\" y=\"122\" width=\"1200\" height=\"20\" fill=\"#fbfbfb\"/><text"
    " x=\"199\" y=\"136\" text-anchor=\"end\">shard 0 slot 0 host</text>\n"
    "<rect class=\"lane\" x=\"0\" y=\"142\" width=\"1200\" height=\"20\" fill=\"#f3f3f3\"/><text"
    " x=\"199\" y=\"156\" text-anchor=\"end\">shard 1 slot 0 host</text>\n"
    "</g>\n"
    "<g id=\"axis\" stroke=\"#c8c8c8\" stroke-width=\"1\">\n"
    "<line x1=\"207.00\" y1=\"62\" x2=\"207.00\" y2=\"166\"/>\n"
    "<line x1=\"460.42\" y1=\"62\" x2=\"460.42\" y2=\"166\"/>\n"
    "<line x1=\"713.84\" y1=\"62\" x2=\"713.84\" y2=\"166\"/>\n"
    "<line x1=\"967.26\" y1=\"62\" x2=\"967.26\" y2=\"166\"/>\n"
    "</g>\n"
    "<g id=\"ticks\" text-anchor=\"middle\" fill=\"#333333\">\n"
    "<text x=\"207.00\" y=\"179\">0 \xC2\xB5s</text>\n"
    "<text x=\"460.42\" y=\"179\">5 \xC2\xB5s</text>\n"
    "<text x=\"713.84\" y=\"179\">10 \xC2\xB5s</text>\n"
    "<text x=\"967.26\" y=\"179\">15 \xC2\xB5s</text>\n"
    "</g>\n"
    "<text x=\"207\" y=\"200\" fill=\"#555555\">time from the first event, 0.000001 s after the"
    " daemon started; hover a bar for its frame</text>\n"
    "<g id=\"events\">\n"
    "<rect class=\"ev\" x=\"207.00\" y=\"125\" width=\"202.74\" height=\"14\" fill=\"#9c9c9c\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): receive 4.0 \xC2\xB5s, 4096 bytes</title>"
    "</rect>\n"
    "<rect class=\"ev\" x=\"409.74\" y=\"65\" width=\"202.74\" height=\"14\" fill=\"#4e79a7\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): H2D 4.0 \xC2\xB5s, 4096 bytes</title></rect>\n"
    "<rect class=\"ev\" x=\"612.47\" y=\"85\" width=\"76.03\" height=\"14\" fill=\"#59a14f\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): kernel 1.5 \xC2\xB5s, 4096 bytes</title>"
    "</rect>\n"
    "<rect class=\"ev\" x=\"688.50\" y=\"105\" width=\"177.39\" height=\"14\" fill=\"#f28e2b\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): D2H 3.5 \xC2\xB5s, 4096 bytes</title></rect>\n"
    "<rect class=\"ev\" x=\"865.89\" y=\"125\" width=\"152.05\" height=\"14\" fill=\"#e15759\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): completion_delay 3.0 \xC2\xB5s, 4096"
    " bytes</title></rect>\n"
    "<rect class=\"ev\" x=\"1017.95\" y=\"125\" width=\"152.05\" height=\"14\" fill=\"#b07aa1\">"
    "<title>frame 7 (pipeline 0, shard 0 slot 0): reply_write 3.0 \xC2\xB5s, 4096 bytes</title>"
    "</rect>\n"
    "<rect class=\"ev\" x=\"257.68\" y=\"145\" width=\"202.74\" height=\"14\" fill=\"#9c9c9c\">"
    "<title>frame 8 (pipeline 0, shard 1 slot 0): receive 4.0 \xC2\xB5s, 100 bytes</title>"
    "</rect>\n"
    "<rect class=\"ev\" x=\"561.79\" y=\"145\" width=\"50.68\" height=\"14\" fill=\"#e15759\">"
    "<title>frame 8 (pipeline 0, shard 1 slot 0): completion_delay 1.0 \xC2\xB5s, 100"
    " bytes</title></rect>\n"
    "<rect class=\"ev\" x=\"612.47\" y=\"145\" width=\"152.05\" height=\"14\" fill=\"#b07aa1\">"
    "<title>frame 8 (pipeline 0, shard 1 slot 0): reply_write 3.0 \xC2\xB5s, 100 bytes</title>"
    "</rect>\n"
    "</g>\n"
    "</svg>\n";

START_TEST(svg_of_two_shards_is_exact) {
    cJSON *trace = parse_or_fail(trace_two_shards_json);
    struct rendered r = render(R_SVG, trace, NULL);
    char err[ERR_BYTES];

    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_msg(xml_check(r.text, "svg", err, sizeof err) == 0, "%s in:\n%s", err, r.text);
    ck_assert_str_eq(r.text, two_shards_svg);
    free(r.text);
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
    tcase_add_test(tc, table_without_shards_is_unchanged);
    tcase_add_test(tc, table_of_a_sharded_daemon);
    tcase_add_test(tc, durations_for_people);
    suite_add_tcase(s, tc);

    tc = tcase_create("prometheus");
    tcase_add_test(tc, prometheus_parser_is_strict);
    tcase_add_test(tc, prometheus_parses_and_holds_the_values);
    tcase_add_test(tc, prometheus_label_escaping_round_trips);
    tcase_add_test(tc, prometheus_null_gpu_cpu_engine_and_missing_keys);
    tcase_add_test(tc, prometheus_of_a_sharded_daemon);
    tcase_add_test(tc, prometheus_refuses_a_malformed_histogram);
    suite_add_tcase(s, tc);

    tc = tcase_create("trace");
    tcase_add_test(tc, chrome_trace_has_every_event_in_its_lane);
    tcase_add_test(tc, chrome_trace_of_no_frames_and_cpu_frames);
    tcase_add_test(tc, chrome_trace_of_two_shards_is_exact);
    tcase_add_test(tc, trace_of_one_shard_is_unchanged);
    tcase_add_loop_test(tc, trace_renderers_refuse_malformed_documents, 0,
                        (int)(sizeof bad_traces / sizeof bad_traces[0]));
    tcase_add_test(tc, svg_is_well_formed_with_one_rect_per_event);
    tcase_add_test(tc, svg_of_two_shards_is_exact);
    tcase_add_test(tc, svg_of_no_frames_is_well_formed);
    tcase_add_test(tc, xml_checker_catches_what_it_must);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(report_suite());
}

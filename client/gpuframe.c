/*
 * gpuframe: the command-line client of gpuframed.
 *
 *   gpuframe list    the daemon's pipelines, as a table or the raw LIST JSON
 *   gpuframe stats   the daemon's statistics: a summary table, the raw STATS
 *                    JSON or Prometheus text, once or refreshed (--watch)
 *   gpuframe trace   the stage timestamps of the last frames as a Chrome
 *                    trace (Perfetto) and/or an SVG timeline
 *   gpuframe stream  frames through a pipeline with a window in flight,
 *                    optionally verified against the pipeline's C reference,
 *                    summarised as throughput and latency
 *
 * Exit status: 0 success, 1 failure (a frame without a correct result, the
 * daemon unreachable or gone), 2 usage error (bad argument, unknown pipeline,
 * a frame size the pipeline cannot take).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "listing.h"
#include "libgpuframe.h"
#include "pipeline.h"
#include "plugin.h"
#include "report.h"
#include "util.h"

#ifndef GF_VERSION
#define GF_VERSION "unknown"
#endif

#define EXIT_OK    0
#define EXIT_FAIL  1
#define EXIT_USAGE 2

/* Where the daemon listens unless --socket or the environment says otherwise. */
#define SOCKET_ENV     "GPUFRAMED_SOCKET"
#define SOCKET_DEFAULT "/run/gpuframed.sock"
/* A daemon that sends nothing back for this long is considered hung. */
#define TIMEOUT_MS_DEFAULT 30000
/* stream defaults: a 1 MiB frame is large enough to measure bandwidth and
 * small enough for any max_frame_bytes the daemon is likely configured with. */
#define STREAM_SIZE_DEFAULT   (1ull << 20)
#define STREAM_COUNT_DEFAULT  1000
#define STREAM_WINDOW_DEFAULT 8
#define STREAM_SEED_DEFAULT   1
/* More frames in flight than this cannot help: the daemon has at most
 * GF_SLOTS_MAX slots, and socket buffers hold the rest. */
#define STREAM_WINDOW_MAX 65536
/* Distinct synthetic frames: enough that a pipeline returning a stale buffer
 * is caught by --verify, few enough that references are cheap. */
#define SYNTH_POOL_MAX 4
/* Synthetic float32 inputs lie in [-SYNTH_FLOAT_LIMIT, SYNTH_FLOAT_LIMIT]. */
#define SYNTH_FLOAT_LIMIT 4.0
/* Frame buffers are aligned like the daemon's pinned buffers. */
#define FRAME_ALIGN_BYTES 64
/* Room for a mismatch or length-check reason. */
#define WHY_BYTES 256

/* A macro's value as a string literal, for the help texts. */
#define STR_(x) #x
#define STR(x)  STR_(x)

/* Options every command takes. */
struct common_opts {
    const char *socket_path; /* --socket, $GPUFRAMED_SOCKET or the default */
    int timeout_ms;          /* per reply; -1 waits for ever              */
};

/* ---- small helpers --------------------------------------------------------- */

static void die_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "gpuframe CMD: <message>" and a pointer to --help; exits 2. */
static void die_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "gpuframe%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'gpuframe%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    exit(EXIT_USAGE);
}

/* Parses the decimal digits at the start of `s` into *out and points *end
 * just past them.  Returns 0, or -1 when `s` does not start with a digit or
 * the value does not fit. */
static int parse_digits(const char *s, unsigned long long *out, char **end) {
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, end, 10);
    return errno != 0 ? -1 : 0;
}

/* Parses a whole decimal unsigned integer; returns 0 or -1. */
static int parse_u64(const char *s, uint64_t *out) {
    unsigned long long v;
    char *end;

    if (parse_digits(s, &v, &end) < 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Parses BYTES with an optional binary suffix K, M or G (either case). */
static int parse_size(const char *s, uint64_t *out) {
    unsigned long long v;
    char *end;

    if (parse_digits(s, &v, &end) < 0)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    default: return -1;
    }
    if (shift > 0 && end[1] != '\0')
        return -1;
    if (v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Allocates `bytes` (0 allowed) aligned to FRAME_ALIGN_BYTES; exits on
 * failure, since the command cannot run without its frames. */
static unsigned char *alloc_frame(size_t bytes) {
    size_t rounded = (bytes + FRAME_ALIGN_BYTES - 1) / FRAME_ALIGN_BYTES * FRAME_ALIGN_BYTES;
    if (rounded == 0)
        rounded = FRAME_ALIGN_BYTES;
    unsigned char *p = rounded >= bytes ? aligned_alloc(FRAME_ALIGN_BYTES, rounded) : NULL;
    if (p == NULL) {
        fprintf(stderr, "gpuframe: out of memory allocating %zu bytes\n", bytes);
        exit(EXIT_FAIL);
    }
    return p;
}

/* Prints `len` bytes of untrusted text with control characters as '?'. */
static void print_text(FILE *f, const void *text, size_t len) {
    const unsigned char *s = text;

    for (size_t i = 0; i < len; i++)
        fputc(s[i] < 0x20 || s[i] == 0x7F ? '?' : s[i], f);
}

/* Prints an ERROR reply's status, by name, or by number when this client
 * does not know the code (a newer daemon's). */
static void print_status(FILE *f, uint32_t status) {
    if (status < GF_STATUS_COUNT_)
        fputs(gf_status_name(status), f);
    else
        fprintf(f, "status %" PRIu32, status);
}

/* Prints an ERROR reply to `f` as "STATUS: TEXT" and a newline, after
 * whatever prefix the caller printed. */
static void print_error_reply(FILE *f, const gf_reply *rep) {
    print_status(f, rep->header.status);
    fputs(": ", f);
    print_text(f, rep->payload, rep->payload_bytes);
    fputc('\n', f);
}

/* Reports a failed libgpuframe call: its own message when it has one. */
static void print_client_error(const gf_client *c, const char *what, int err) {
    const char *msg = c != NULL ? gf_client_error(c) : "";

    if (err == -ETIMEDOUT)
        fprintf(stderr, "gpuframe: %s: no reply from the daemon in time (see --timeout)\n", what);
    else if (msg[0] != '\0' &&
             (err == -EPROTO || err == -EMSGSIZE || err == -EREMOTEIO || err == -ECONNRESET))
        fprintf(stderr, "gpuframe: %s: %s\n", what, msg);
    else
        fprintf(stderr, "gpuframe: %s: %s\n", what, strerror(-err));
}

/* Connects to the daemon or exits 1 saying why. */
static gf_client *connect_or_die(const struct common_opts *o) {
    gf_client *c;
    int err = gf_client_connect(o->socket_path, &c);

    if (err < 0) {
        fprintf(stderr, "gpuframe: cannot connect to %s: %s\n", o->socket_path, strerror(-err));
        exit(EXIT_FAIL);
    }
    return c;
}

/* Sends LIST or STATS and returns the malloc'd JSON reply, or exits 1. */
static char *request_json_or_die(gf_client *c, uint8_t type, const struct common_opts *o) {
    char *json = NULL;
    int err = gf_client_request_json(c, type, &json, o->timeout_ms);

    if (err < 0) {
        print_client_error(c, gf_msg_type_name(type), err);
        gf_client_close(c);
        exit(EXIT_FAIL);
    }
    return json;
}

/* Fetches and decodes the daemon's pipelines, or exits 1. */
static gf_pipeline *fetch_pipelines(gf_client *c, const struct common_opts *o, size_t *count) {
    char why[WHY_BYTES];
    gf_pipeline *pipelines;
    char *json = request_json_or_die(c, GF_MSG_LIST, o);

    if (gf_pipelines_from_json(json, &pipelines, count, why, sizeof why) < 0) {
        fprintf(stderr, "gpuframe: daemon's pipeline list is invalid: %s\n", why);
        free(json);
        gf_client_close(c);
        exit(EXIT_FAIL);
    }
    free(json);
    return pipelines;
}

/* ---- option parsing shared by the commands --------------------------------- */

enum {
    OPT_SOCKET = 's',
    OPT_TIMEOUT = 't',
    OPT_HELP = 'h',
    OPT_FIRST_LONG = 256, /* long-only options are numbered from here */
    OPT_JSON = OPT_FIRST_LONG,
    OPT_SIZE,
    OPT_VERIFY,
    OPT_SEED,
    OPT_NO_CHECK,
    OPT_SHM,
    OPT_PROMETHEUS,
    OPT_WATCH,
    OPT_SVG,
};

#define COMMON_LONG_OPTIONS                                                                        \
    {"socket", required_argument, NULL, OPT_SOCKET},                                               \
        {"timeout", required_argument, NULL, OPT_TIMEOUT}, {                                       \
        "help", no_argument, NULL, OPT_HELP                                                        \
    }
#define COMMON_SHORT_OPTIONS "s:t:h"

#define COMMON_HELP                                                                                \
    "  -s, --socket PATH       the daemon's socket (default: $" SOCKET_ENV ", else\n"              \
    "                          " SOCKET_DEFAULT ")\n"                                              \
    "  -t, --timeout MS        wait at most MS milliseconds for each reply (default " STR(         \
        TIMEOUT_MS_DEFAULT) ";\n"                                                                  \
                            "                          0: for ever)\n"                             \
                            "  -h, --help              print this help\n"

static void common_defaults(struct common_opts *o) {
    const char *env = getenv(SOCKET_ENV);

    o->socket_path = env != NULL && env[0] != '\0' ? env : SOCKET_DEFAULT;
    o->timeout_ms = TIMEOUT_MS_DEFAULT;
}

/*
 * Handles an option every command shares, and getopt's errors.  Returns 1
 * when `opt` was handled, 0 when it is the command's own; exits on errors and
 * after --help (printing `help`).
 */
static int common_option(const char *cmd, int opt, struct common_opts *o, char *const argv[],
                         const char *help) {
    uint64_t v;

    switch (opt) {
    case OPT_SOCKET: o->socket_path = optarg; return 1;
    case OPT_TIMEOUT:
        if (parse_u64(optarg, &v) < 0 || v > INT32_MAX)
            die_usage(cmd, "--timeout: expected milliseconds (0 waits for ever), got '%s'", optarg);
        o->timeout_ms = v == 0 ? -1 : (int)v;
        return 1;
    case OPT_HELP: fputs(help, stdout); exit(EXIT_OK);
    case ':': die_usage(cmd, "option '%s' needs an argument", argv[optind - 1]); return 1;
    case '?':
        /* optopt is the character of a bad short option, else 0 (unknown
         * long option) or the value of a long one given an argument. */
        if (optopt > 0 && optopt < OPT_FIRST_LONG)
            die_usage(cmd, "unknown option '-%c'", optopt);
        die_usage(cmd, "unknown or malformed option '%s'", argv[optind - 1]);
        return 1;
    }
    return 0;
}

/* Rejects positional arguments left after the options. */
static void no_operands(const char *cmd, int argc, char *const argv[]) {
    if (optind < argc)
        die_usage(cmd, "unexpected argument '%s'", argv[optind]);
}

/* ---- gpuframe list ----------------------------------------------------------- */

static const char list_help[] =
    "Usage: gpuframe list [OPTIONS]\n"
    "\n"
    "Prints the daemon's pipelines: id, name, kind and parameters.\n"
    "\n"
    "      --json              print the daemon's LIST document as it is\n" COMMON_HELP;

/* Appends one parameter's value as "key=value" to buf[len] at *pos. */
static void format_param(const gf_param_desc *d, const gf_params *p, char *buf, size_t len,
                         size_t *pos) {
    const unsigned char *field = (const unsigned char *)p + d->offset;
    float f[3];
    uint32_t u;
    int n = 0;

    if (*pos >= len)
        return;
    switch (d->type) {
    case GF_PARAM_F32:
        memcpy(&f[0], field, sizeof f[0]);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%g", *pos ? " " : "", d->key, (double)f[0]);
        break;
    case GF_PARAM_U32:
        memcpy(&u, field, sizeof u);
        n = snprintf(buf + *pos, len - *pos, "%s%s=%" PRIu32, *pos ? " " : "", d->key, u);
        break;
    case GF_PARAM_F32x3:
        memcpy(f, field, sizeof f);
        n = snprintf(buf + *pos, len - *pos, "%s%s=[%g,%g,%g]", *pos ? " " : "", d->key,
                     (double)f[0], (double)f[1], (double)f[2]);
        break;
    }
    if (n > 0)
        *pos += (size_t)n;
}

/* Appends a stage's parameters to buf[len] at *pos: a built-in kind's as
 * "key=value", a plugin's as its JSON object; "kind:" before them when the
 * pipeline has several stages. */
static void format_stage_params(const gf_stage *st, int name_it, char *buf, size_t len,
                                size_t *pos) {
    if (*pos < len && name_it)
        *pos += (size_t)snprintf(buf + *pos, len - *pos, "%s%s:", *pos ? " | " : "",
                                 st->kind->name);
    if (!gf_kind_is_plugin(st->kind)) {
        for (size_t k = 0; k < st->kind->param_count; k++)
            format_param(&st->kind->params[k], &st->params, buf, len, pos);
        return;
    }
    cJSON *obj = gf_stage_params_to_json(st);
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (*pos < len)
        *pos += (size_t)snprintf(buf + *pos, len - *pos, "%s%s %s", *pos ? " " : "",
                                 gf_plugin_stage_path(st->params.plugin), text ? text : "?");
    cJSON_free(text);
    cJSON_Delete(obj);
}

static int cmd_list(int argc, char *argv[]) {
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON}, COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    struct common_opts o;
    int raw_json = 0, opt;

    common_defaults(&o);
    while ((opt = getopt_long(argc, argv, ":" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (common_option("list", opt, &o, argv, list_help))
            continue;
        if (opt == OPT_JSON)
            raw_json = 1;
    }
    no_operands("list", argc, argv);

    gf_client *c = connect_or_die(&o);
    if (raw_json) {
        char *json = request_json_or_die(c, GF_MSG_LIST, &o);
        printf("%s\n", json);
        free(json);
        gf_client_close(c);
        return EXIT_OK;
    }

    size_t count;
    gf_pipeline *pipelines = fetch_pipelines(c, &o, &count);
    gf_client_close(c);

    char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
    int name_w = (int)strlen("NAME"), kind_w = (int)strlen("KIND");
    for (size_t i = 0; i < count; i++) {
        int nw = (int)strlen(pipelines[i].name);
        int kw = (int)strlen(gf_pipeline_kinds_text(&pipelines[i], kinds, sizeof kinds));
        name_w = nw > name_w ? nw : name_w;
        kind_w = kw > kind_w ? kw : kind_w;
    }
    printf("%-4s  %-*s  %-*s  %s\n", "ID", name_w, "NAME", kind_w, "KIND", "PARAMS");
    for (size_t i = 0; i < count; i++) {
        const gf_pipeline *p = &pipelines[i];
        char params[1024] = "";
        size_t pos = 0;

        for (uint32_t k = 0; k < p->stage_count; k++)
            format_stage_params(&p->stages[k], p->stage_count > 1, params, sizeof params, &pos);
        gf_pipeline_kinds_text(p, kinds, sizeof kinds);
        if (params[0] == '\0')
            printf("%-4" PRIu32 "  %-*s  %s\n", p->id, name_w, p->name, kinds);
        else
            printf("%-4" PRIu32 "  %-*s  %-*s  %s\n", p->id, name_w, p->name, kind_w, kinds,
                   params);
    }
    gf_pipelines_free(pipelines, count);
    return EXIT_OK;
}

/* ---- gpuframe stats ---------------------------------------------------------- */

/* --watch: the shortest and longest refresh interval accepted, in seconds. */
#define WATCH_MIN_S 0.1
#define WATCH_MAX_S 86400.0
/* ANSI: cursor home, then erase the screen; a refresh draws over the last. */
#define ANSI_CLEAR "\033[H\033[2J"

static const char stats_help[] =
    "Usage: gpuframe stats [OPTIONS]\n"
    "\n"
    "Prints the daemon's statistics (daemon/STATS.md): by default a summary table of\n"
    "identity, counters, rates, latency percentiles, each pipeline's mean time per\n"
    "phase in microseconds, GPU busy and overlap fractions and event-loop load.\n"
    "\n"
    "      --json              print the STATS document as JSON (pretty-printed)\n"
    "      --prometheus        print the Prometheus text exposition format (0.0.4), for\n"
    "                          node_exporter's textfile collector (with --output; the\n"
    "                          gpuframe-prometheus.timer unit runs it every 15 s)\n"
    "  -o, --output FILE       write to FILE instead of standard output, atomically: a\n"
    "                          temporary file beside it, mode 0644, renamed over FILE\n"
    "                          once complete; on failure FILE is left as it was\n"
    "  -w, --watch SECONDS     print again every SECONDS (decimals allowed) until\n"
    "                          interrupted: in place on a terminal, else as snapshots\n"
    "                          separated by a blank line; keeps retrying while the\n"
    "                          daemon is unreachable\n" COMMON_HELP;

/* Output formats of `gpuframe stats`; a new one is a printer plus an entry. */
enum stats_format { STATS_FORMAT_TABLE, STATS_FORMAT_JSON, STATS_FORMAT_PROMETHEUS };

/* Set by SIGINT and SIGTERM during --watch: stop after this refresh. */
static volatile sig_atomic_t watch_interrupted;

static void on_watch_signal(int sig) {
    (void)sig;
    watch_interrupted = 1;
}

/*
 * Renders STATS document `doc` in `format` into a malloc'd buffer (*text,
 * *len; the caller frees), so that a refresh or a textfile is written in one
 * piece and nothing half-made reaches stdout.  Returns 0, or -1 with the
 * reason in why[why_len].
 */
static int render_stats(const cJSON *doc, enum stats_format format, char **text, size_t *len,
                        char *why, size_t why_len) {
    FILE *m = open_memstream(text, len);
    int rc = 0;

    if (m == NULL) {
        snprintf(why, why_len, "%s", strerror(errno));
        return -1;
    }
    switch (format) {
    case STATS_FORMAT_TABLE: rc = gf_report_stats_table(doc, m); break;
    case STATS_FORMAT_PROMETHEUS: rc = gf_report_stats_prometheus(doc, m, why, why_len); break;
    case STATS_FORMAT_JSON: {
        char *pretty = cJSON_Print(doc);
        if (pretty == NULL)
            rc = -ENOMEM;
        else
            fprintf(m, "%s\n", pretty);
        cJSON_free(pretty);
        break;
    }
    }
    if (fclose(m) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0) {
        if (rc != -EINVAL || format != STATS_FORMAT_PROMETHEUS)
            snprintf(why, why_len, "%s", strerror(-rc));
        free(*text);
        *text = NULL;
        return -1;
    }
    return 0;
}

/*
 * Fetches and parses one STATS document through *c, connecting first when *c
 * is NULL.  On failure closes and clears *c (the next call reconnects) and
 * returns -1 with the reason in why[why_len]; else 0 and *doc (caller frees).
 */
static int fetch_stats(const struct common_opts *o, gf_client **c, cJSON **doc, char *why,
                       size_t why_len) {
    char *json = NULL;
    int err;

    if (*c == NULL) {
        err = gf_client_connect(o->socket_path, c);
        if (err < 0) {
            *c = NULL;
            snprintf(why, why_len, "cannot connect to %s: %s", o->socket_path, strerror(-err));
            return -1;
        }
    }
    err = gf_client_request_json(*c, GF_MSG_STATS, &json, o->timeout_ms);
    if (err < 0) {
        const char *msg = gf_client_error(*c);
        if (err == -ETIMEDOUT)
            snprintf(why, why_len, "stats: no reply from the daemon in time (see --timeout)");
        else
            snprintf(why, why_len, "stats: %s", msg[0] != '\0' ? msg : strerror(-err));
        gf_client_close(*c);
        *c = NULL;
        return -1;
    }
    *doc = cJSON_Parse(json);
    free(json);
    if (*doc == NULL) {
        snprintf(why, why_len, "stats: the daemon's STATS reply is not valid JSON");
        return -1;
    }
    return 0;
}

/* Sleeps `seconds` unless a signal ends --watch first. */
static void watch_sleep(double seconds) {
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - floor(seconds)) * 1e9)};

    while (!watch_interrupted && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* `gpuframe stats --watch`: one refresh per interval until SIGINT/SIGTERM.
 * A failed fetch is shown in place of the statistics and retried. */
static int stats_watch(const struct common_opts *o, enum stats_format format, double interval_s) {
    struct sigaction sa;
    gf_client *c = NULL;
    int tty = isatty(STDOUT_FILENO);
    char why[WHY_BYTES];

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watch_signal; /* no SA_RESTART: the sleep must end */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    for (unsigned long n = 0; !watch_interrupted; n++) {
        cJSON *doc = NULL;
        char *text = NULL;
        size_t len = 0;
        int ok = fetch_stats(o, &c, &doc, why, sizeof why) == 0 &&
                 render_stats(doc, format, &text, &len, why, sizeof why) == 0;
        cJSON_Delete(doc);

        fputs(tty ? ANSI_CLEAR : n > 0 ? "\n" : "", stdout);
        if (format == STATS_FORMAT_TABLE || !ok) {
            char stamp[32];
            time_t now = time(NULL);
            struct tm tm;
            strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
            printf("every %gs: gpuframe stats --socket %s   %s\n\n", interval_s, o->socket_path,
                   stamp);
        }
        if (ok)
            fwrite(text, 1, len, stdout);
        else
            printf("gpuframe: %s (retrying every %gs)\n", why, interval_s);
        fflush(stdout);
        free(text);
        watch_sleep(interval_s);
    }
    gf_client_close(c);
    return EXIT_OK;
}

/* The mode of a --output file: node_exporter reads it as another user. */
#define OUTPUT_FILE_MODE 0644

/*
 * Writes text[len] to `path` so that a reader sees either the old file or
 * the whole new one: into a temporary file "PATH.XXXXXX" in the same
 * directory (node_exporter's textfile collector reads only *.prom), which is
 * then renamed over `path`.  Returns 0, or -1 with the reason in
 * why[why_len] and `path` untouched, the temporary file removed.
 */
static int write_atomically(const char *path, const char *text, size_t len, char *why,
                            size_t why_len) {
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".XXXXXX");
    FILE *f = NULL;
    int fd = -1;

    if (tmp == NULL) {
        snprintf(why, why_len, "--output %s: out of memory", path);
        return -1;
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".XXXXXX", sizeof ".XXXXXX");
    fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, why_len, "--output %s: cannot create %s: %s", path, tmp, strerror(errno));
        goto fail_tmp;
    }
    if (fchmod(fd, OUTPUT_FILE_MODE) < 0 || (f = fdopen(fd, "wb")) == NULL) {
        snprintf(why, why_len, "--output %s: %s: %s", path, tmp, strerror(errno));
        close(fd);
        goto fail_file;
    }
    if (fwrite(text, 1, len, f) != len || fflush(f) != 0) {
        snprintf(why, why_len, "--output %s: writing %s: %s", path, tmp, strerror(errno));
        fclose(f);
        goto fail_file;
    }
    if (fclose(f) != 0) {
        snprintf(why, why_len, "--output %s: writing %s: %s", path, tmp, strerror(errno));
        goto fail_file;
    }
    if (rename(tmp, path) < 0) {
        snprintf(why, why_len, "--output %s: renaming %s: %s", path, tmp, strerror(errno));
        goto fail_file;
    }
    free(tmp);
    return 0;

fail_file:
    unlink(tmp);
fail_tmp:
    free(tmp);
    return -1;
}

static int cmd_stats(int argc, char *argv[]) {
    static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"prometheus", no_argument, NULL, OPT_PROMETHEUS},
                                             {"watch", required_argument, NULL, 'w'},
                                             {"output", required_argument, NULL, 'o'},
                                             COMMON_LONG_OPTIONS,
                                             {NULL, 0, NULL, 0}};
    enum stats_format format = STATS_FORMAT_TABLE;
    struct common_opts o;
    const char *output_path = NULL;
    double watch_s = 0;
    int opt, formats = 0;

    common_defaults(&o);
    while ((opt = getopt_long(argc, argv, ":w:o:" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (common_option("stats", opt, &o, argv, stats_help))
            continue;
        switch (opt) {
        case OPT_JSON:
            format = STATS_FORMAT_JSON;
            formats++;
            break;
        case OPT_PROMETHEUS:
            format = STATS_FORMAT_PROMETHEUS;
            formats++;
            break;
        case 'o': output_path = optarg; break;
        case 'w': {
            char *end;
            errno = 0;
            watch_s = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(watch_s >= WATCH_MIN_S) ||
                watch_s > WATCH_MAX_S)
                die_usage("stats", "--watch: expected seconds in [%g, %g], got '%s'", WATCH_MIN_S,
                          WATCH_MAX_S, optarg);
            break;
        }
        }
    }
    no_operands("stats", argc, argv);
    if (formats > 1)
        die_usage("stats", "--json and --prometheus exclude each other");
    if (output_path != NULL && watch_s > 0)
        die_usage("stats", "--output writes one snapshot; run it from a timer rather than with "
                           "--watch");
    if (watch_s > 0)
        return stats_watch(&o, format, watch_s);

    gf_client *c = NULL;
    cJSON *doc = NULL;
    char *text = NULL;
    size_t len = 0;
    char why[WHY_BYTES];
    int ok = fetch_stats(&o, &c, &doc, why, sizeof why) == 0 &&
             render_stats(doc, format, &text, &len, why, sizeof why) == 0;
    gf_client_close(c);
    cJSON_Delete(doc);
    if (ok && output_path != NULL)
        ok = write_atomically(output_path, text, len, why, sizeof why) == 0;
    if (!ok) {
        fprintf(stderr, "gpuframe: %s\n", why);
        free(text);
        return EXIT_FAIL;
    }
    if (output_path == NULL)
        fwrite(text, 1, len, stdout);
    free(text);
    return fflush(stdout) == 0 && !ferror(stdout) ? EXIT_OK : EXIT_FAIL;
}

/* ---- gpuframe trace ---------------------------------------------------------- */

static const char trace_help[] =
    "Usage: gpuframe trace [--frames N] [--out FILE.json] [--svg FILE.svg] [OPTIONS]\n"
    "\n"
    "Fetches the stage timestamps of the last frames the daemon answered (its trace\n"
    "ring, `trace_frames` in its config) and draws them with one lane per slot and\n"
    "stage: slot S H2D, slot S kernel, slot S D2H, and slot S host (receive into the\n"
    "pinned buffer, completion_delay, reply_write), so overlap across slots shows.\n"
    "Prints the number of frames and the time they span.  At least one of:\n"
    "\n"
    "  -o, --out FILE          write a Chrome trace-event JSON file; open it in\n"
    "                          https://ui.perfetto.dev or chrome://tracing\n"
    "      --svg FILE          write a self-contained SVG timeline (hover a bar for its\n"
    "                          frame); a few dozen frames make a readable picture\n"
    "                          ('-' for either writes to standard output)\n"
    "  -n, --frames N          the last N frames (default 0: every frame kept)\n" COMMON_HELP;

/* Writes len bytes of `text` to `path` ("-": stdout).  Returns 0 or -1
 * having said why. */
static int write_output(const char *path, const char *text, size_t len) {
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");

    if (f == NULL) {
        fprintf(stderr, "gpuframe: trace: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t w = fwrite(text, 1, len, f);
    int rc = to_stdout ? fflush(f) : fclose(f);
    if (w != len || rc != 0) {
        fprintf(stderr, "gpuframe: trace: writing %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Renders the trace with `render` into a buffer and writes it to `path`. */
static int write_trace(const char *path, const char *what,
                       int (*render)(const cJSON *, const cJSON *, FILE *, char *, size_t),
                       const cJSON *trace, const cJSON *list) {
    char *text = NULL;
    size_t len = 0;
    char why[WHY_BYTES] = "";
    FILE *m = open_memstream(&text, &len);

    if (m == NULL) {
        fprintf(stderr, "gpuframe: trace: %s\n", strerror(errno));
        return -1;
    }
    int rc = render(trace, list, m, why, sizeof why);
    if (fclose(m) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0) {
        fprintf(stderr, "gpuframe: trace: cannot make the %s: %s\n", what,
                why[0] != '\0' ? why : strerror(-rc));
        free(text);
        return -1;
    }
    rc = write_output(path, text, len);
    free(text);
    return rc;
}

static int cmd_trace(int argc, char *argv[]) {
    static const struct option longopts[] = {{"frames", required_argument, NULL, 'n'},
                                             {"out", required_argument, NULL, 'o'},
                                             {"svg", required_argument, NULL, OPT_SVG},
                                             COMMON_LONG_OPTIONS,
                                             {NULL, 0, NULL, 0}};
    struct common_opts o;
    const char *out_path = NULL, *svg_path = NULL;
    uint64_t frames = 0;
    int opt;

    common_defaults(&o);
    while ((opt = getopt_long(argc, argv, ":n:o:" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (common_option("trace", opt, &o, argv, trace_help))
            continue;
        switch (opt) {
        case 'n':
            if (parse_u64(optarg, &frames) < 0 || frames > UINT32_MAX)
                die_usage("trace", "--frames: expected an integer in [0, %" PRIu32 "], got '%s'",
                          UINT32_MAX, optarg);
            break;
        case 'o': out_path = optarg; break;
        case OPT_SVG: svg_path = optarg; break;
        }
    }
    no_operands("trace", argc, argv);
    if (out_path == NULL && svg_path == NULL)
        die_usage("trace", "say where to write: --out FILE.json and/or --svg FILE.svg");
    if (out_path != NULL && svg_path != NULL && strcmp(out_path, "-") == 0 &&
        strcmp(svg_path, "-") == 0)
        die_usage("trace", "--out and --svg cannot both write to standard output");

    gf_client *c = connect_or_die(&o);
    /* LIST first, so the pictures can name pipelines. */
    char *list_json = request_json_or_die(c, GF_MSG_LIST, &o);
    char *trace_json = NULL;
    int err = gf_client_request_trace(c, (uint32_t)frames, &trace_json, o.timeout_ms);
    if (err < 0) {
        print_client_error(c, "trace", err);
        gf_client_close(c);
        free(list_json);
        return EXIT_FAIL;
    }
    gf_client_close(c);

    int status = EXIT_FAIL;
    cJSON *list = cJSON_Parse(list_json);
    cJSON *trace = cJSON_Parse(trace_json);
    gf_report_trace_info info;
    char why[WHY_BYTES];
    if (trace == NULL) {
        fprintf(stderr, "gpuframe: trace: the daemon's TRACE reply is not valid JSON\n");
        goto done;
    }
    if (gf_report_trace_summary(trace, &info, why, sizeof why) < 0) {
        fprintf(stderr, "gpuframe: trace: the daemon's TRACE reply is malformed: %s\n", why);
        goto done;
    }
    if (out_path != NULL &&
        write_trace(out_path, "Chrome trace", gf_report_trace_chrome, trace, list) < 0)
        goto done;
    if (svg_path != NULL &&
        write_trace(svg_path, "SVG timeline", gf_report_trace_svg, trace, list) < 0)
        goto done;

    /* The summary goes where the files do not. */
    FILE *say = (out_path != NULL && strcmp(out_path, "-") == 0) ||
                        (svg_path != NULL && strcmp(svg_path, "-") == 0)
                    ? stderr
                    : stdout;
    char span[48];
    if (info.frames == 0 || info.events == 0)
        fprintf(say,
                "trace: %zu frames: the daemon has answered none yet, or keeps none "
                "(trace_frames 0)\n",
                info.frames);
    else
        fprintf(say,
                "trace: %zu frames, %zu events in %zu lanes, spanning %s (from %.6f s after the "
                "daemon started)\n",
                info.frames, info.events, info.lanes,
                gf_report_format_ns(info.end_ns - info.begin_ns, "us", span, sizeof span),
                (double)info.begin_ns / 1e9);
    if (out_path != NULL && strcmp(out_path, "-") != 0)
        fprintf(say, "wrote %s (open in https://ui.perfetto.dev or chrome://tracing)\n", out_path);
    if (svg_path != NULL && strcmp(svg_path, "-") != 0)
        fprintf(say, "wrote %s\n", svg_path);
    status = EXIT_OK;
done:
    cJSON_Delete(trace);
    cJSON_Delete(list);
    free(trace_json);
    free(list_json);
    return status;
}

/* ---- gpuframe stream --------------------------------------------------------- */

static const char stream_help[] =
    "Usage: gpuframe stream --pipeline NAME|ID [OPTIONS]\n"
    "\n"
    "Streams frames through a pipeline, keeping a window of frames in flight, and\n"
    "prints one summary line:\n"
    "  frames=N errors=N seconds=S frames_per_s=R in_GBps=R out_GBps=R p50_us=L p99_us=L "
    "max_us=L\n"
    "(GB/s: bytes of frames answered with a result, 1e9 bytes per GB; latency: from\n"
    "queueing a frame to receiving its reply), or, when no frame got a correct result,\n"
    "what failed: frames=N errors=N every frame failed: N STATUS, N wrong results, ...\n"
    "\n"
    "  -p, --pipeline NAME|ID  the pipeline, by name or numeric id (see 'gpuframe list')\n"
    "      --size BYTES        frame size, suffixes K, M, G (binary); default: width*height*3\n"
    "                          for normalize_u8, else 1M\n"
    "  -n, --count N           frames to send (default 1000; with --input: the whole file)\n"
    "  -w, --window W          frames in flight (default 8, at most 65536)\n"
    "      --verify            check every result against the pipeline's C reference\n"
    "  -i, --input FILE        send consecutive --size chunks of FILE (a shorter last chunk\n"
    "                          only if the pipeline takes it) instead of synthetic frames\n"
    "  -o, --output FILE       write every result, in order, to FILE (frames answered with\n"
    "                          an error write nothing)\n"
    "      --seed S            seed of the synthetic frames (default 1; not with --input)\n"
    "      --no-check          send frames the pipeline cannot take (tests the daemon's errors)\n"
    "      --shm               send frames by reference: inputs and results live in one\n"
    "                          shared-memory region (W entries), the socket carries only\n"
    "                          descriptors; the daemon's GPU copies use the pages directly\n"
    "  -q, --quiet             print only the summary line\n" COMMON_HELP "\n"
    "Exit status 0 only if every frame got a correct result.\n";

struct stream_opts {
    struct common_opts common;
    const char *pipeline; /* --pipeline: a name or an id            */
    uint64_t size_bytes;  /* --size; 0 with have_size == 0: default */
    int have_size;
    uint64_t count;          /* --count; 0: default depends on --input */
    uint32_t window;         /* --window                               */
    int verify;              /* --verify                               */
    int no_check;            /* --no-check                             */
    int quiet;               /* --quiet                                */
    const char *input_path;  /* --input, or NULL: synthetic frames     */
    const char *output_path; /* --output, or NULL                      */
    uint64_t seed;           /* --seed                                 */
    int have_seed;           /* --seed was given                       */
    int shm;                 /* --shm                                  */
};

/* One frame in flight: what was sent and what its reply must be. */
struct frame_slot {
    const unsigned char *data; /* the input, alive until the reply      */
    size_t bytes;              /* its length                            */
    int64_t expect_bytes;      /* result length, or -1 (--no-check)     */
    const unsigned char *ref;  /* precomputed reference, or NULL        */
    uint64_t queued_ns;        /* when it was queued                    */
};

/* The whole state of one `gpuframe stream` run. */
struct stream_run {
    const struct stream_opts *o;
    gf_pipeline *pipelines;      /* the daemon's LIST, decoded     */
    size_t pipeline_count;
    const gf_pipeline *pipeline; /* --pipeline, one of `pipelines` */
    void *stage_scratch[2];      /* a chain's intermediate results */
    int lengths_unknown;         /* plugins not loaded: the daemon's rule */
    gf_client *client;
    struct frame_slot *slots; /* window entries, frame i in slots[i % window] */

    /* Synthetic frames: frame i sends pool[i % pool_count]. */
    unsigned char *pool[SYNTH_POOL_MAX];
    unsigned char *pool_refs[SYNTH_POOL_MAX]; /* with --verify and a valid size */
    size_t pool_count;

    /* --input: the file and one buffer per window entry (allocated lazily). */
    FILE *in;
    unsigned char **in_bufs;
    int input_done;      /* no more frames to queue                */
    int input_error;     /* the input could not be sent completely */
    uint64_t planned;    /* frames to send; UINT64_MAX: until EOF  */
    int64_t full_expect; /* output bytes of a frame of --size      */

    /* --shm: one region; window entry i's input at i * in_stride, its
     * output at window * in_stride + i * out_stride. */
    gf_client_region region;
    uint64_t in_stride, out_stride;

    FILE *out;              /* --output, or NULL                    */
    unsigned char *scratch; /* references of --input frames         */
    size_t scratch_bytes;

    uint64_t *latency_ns; /* one per reply, sorted at the end */
    size_t latency_count, latency_cap;

    uint64_t queued;     /* frames queued                               */
    uint64_t answered;   /* frames whose reply arrived                  */
    uint64_t failed;     /* answered frames without a correct result    */
    uint64_t mismatches; /* of those, wrong results (printed: the first) */
    uint64_t in_bytes;   /* input bytes of the frames answered by RESULT */
    uint64_t out_bytes;  /* result bytes received                        */
    /* Of the failed, the ERROR replies by status (the last: statuses this
     * client does not know), for the summary of a run where all failed. */
    uint64_t errors_by_status[GF_STATUS_COUNT_ + 1];
};

/* xorshift64*: a fast, seeded, reproducible generator for synthetic frames. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* splitmix64 of the seed: a nonzero, well-mixed xorshift state per frame. */
static uint64_t rng_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z != 0 ? z : 1;
}

/* Fills a synthetic frame: float32 in [-4, 4] or random bytes. */
static void fill_synthetic(int input_f32, uint64_t seed, unsigned char *buf, size_t bytes) {
    uint64_t state = rng_seed(seed);
    size_t i = 0;

    if (input_f32) {
        for (; i + sizeof(float) <= bytes; i += sizeof(float)) {
            /* 24 random bits: every value is exact in float32. */
            double u = (double)(rng_next(&state) >> 40) / (double)(1u << 24);
            float f = (float)(-SYNTH_FLOAT_LIMIT + 2.0 * SYNTH_FLOAT_LIMIT * u);
            memcpy(buf + i, &f, sizeof f);
        }
    }
    for (; i < bytes; i++)
        buf[i] = (unsigned char)(rng_next(&state) >> 56);
}

/* The pipeline named `arg`, else the one whose id `arg` is; NULL if none. */
static const gf_pipeline *find_pipeline(const gf_pipeline *pipelines, size_t count,
                                        const char *arg) {
    uint64_t id;

    for (size_t i = 0; i < count; i++)
        if (strcmp(pipelines[i].name, arg) == 0)
            return &pipelines[i];
    if (parse_u64(arg, &id) == 0)
        for (size_t i = 0; i < count; i++)
            if (pipelines[i].id == id)
                return &pipelines[i];
    return NULL;
}

static void parse_stream_opts(int argc, char *argv[], struct stream_opts *o) {
    static const struct option longopts[] = {{"pipeline", required_argument, NULL, 'p'},
                                             {"size", required_argument, NULL, OPT_SIZE},
                                             {"count", required_argument, NULL, 'n'},
                                             {"window", required_argument, NULL, 'w'},
                                             {"verify", no_argument, NULL, OPT_VERIFY},
                                             {"input", required_argument, NULL, 'i'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"seed", required_argument, NULL, OPT_SEED},
                                             {"no-check", no_argument, NULL, OPT_NO_CHECK},
                                             {"shm", no_argument, NULL, OPT_SHM},
                                             {"quiet", no_argument, NULL, 'q'},
                                             COMMON_LONG_OPTIONS,
                                             {NULL, 0, NULL, 0}};
    uint64_t v;
    int opt;

    memset(o, 0, sizeof *o);
    common_defaults(&o->common);
    o->window = STREAM_WINDOW_DEFAULT;
    o->seed = STREAM_SEED_DEFAULT;
    while ((opt = getopt_long(argc, argv, ":p:n:w:i:o:q" COMMON_SHORT_OPTIONS, longopts, NULL)) !=
           -1) {
        if (common_option("stream", opt, &o->common, argv, stream_help))
            continue;
        switch (opt) {
        case 'p': o->pipeline = optarg; break;
        case OPT_SIZE:
            if (parse_size(optarg, &o->size_bytes) < 0 || o->size_bytes > SIZE_MAX)
                die_usage("stream", "--size: expected bytes with an optional K, M or G, got '%s'",
                          optarg);
            o->have_size = 1;
            break;
        case 'n':
            if (parse_u64(optarg, &o->count) < 0 || o->count == 0)
                die_usage("stream", "--count: expected a positive integer, got '%s'", optarg);
            break;
        case 'w':
            if (parse_u64(optarg, &v) < 0 || v == 0 || v > STREAM_WINDOW_MAX)
                die_usage("stream", "--window: expected an integer in [1, %d], got '%s'",
                          STREAM_WINDOW_MAX, optarg);
            o->window = (uint32_t)v;
            break;
        case OPT_VERIFY: o->verify = 1; break;
        case 'i': o->input_path = optarg; break;
        case 'o': o->output_path = optarg; break;
        case OPT_SEED:
            if (parse_u64(optarg, &o->seed) < 0)
                die_usage("stream", "--seed: expected an unsigned integer, got '%s'", optarg);
            o->have_seed = 1;
            break;
        case OPT_NO_CHECK: o->no_check = 1; break;
        case OPT_SHM: o->shm = 1; break;
        case 'q': o->quiet = 1; break;
        }
    }
    no_operands("stream", argc, argv);
    if (o->pipeline == NULL)
        die_usage("stream", "--pipeline is required");
    if (o->have_seed && o->input_path != NULL)
        die_usage("stream", "--seed chooses synthetic frames; with --input the frames are the "
                            "file's, so drop one of them");
}

/* The output size of an input of `bytes` for the run's pipeline, or -1 with
 * the reason in why[why_len]. */
static int64_t expect_output(const gf_pipeline *p, uint64_t bytes, char *why, size_t why_len) {
    return gf_pipeline_output_bytes(p, bytes, why, why_len);
}

/* The run's pipeline's C reference of `n` bytes at `in` into `out`, whose
 * length the pipeline accepted. */
static void reference(struct stream_run *r, const void *in, size_t n, void *out) {
    uint64_t lengths[GF_STAGES_MAX];
    char why[WHY_BYTES];
    if (gf_pipeline_stage_lengths(r->pipeline, n, lengths, why, sizeof why) >= 0)
        gf_pipeline_reference(r->pipeline, in, n, lengths, out, r->stage_scratch, NULL);
}

/* Opens --input, checks its length against --size and sets `planned`. */
static void open_input(struct stream_run *r, const char *pname) {
    const struct stream_opts *o = r->o;
    struct stat st;
    char why[WHY_BYTES];

    r->in = fopen(o->input_path, "rb");
    if (r->in == NULL) {
        fprintf(stderr, "gpuframe: --input %s: %s\n", o->input_path, strerror(errno));
        exit(EXIT_USAGE);
    }
    if (o->size_bytes == 0) {
        fprintf(stderr, "gpuframe: --input needs a --size above 0\n");
        exit(EXIT_USAGE);
    }
    r->planned = o->count != 0 ? o->count : UINT64_MAX;
    if (fstat(fileno(r->in), &st) < 0 || !S_ISREG(st.st_mode))
        return; /* a pipe: the last chunk is checked when it arrives */

    uint64_t file_bytes = (uint64_t)st.st_size;
    uint64_t full = file_bytes / o->size_bytes;
    uint64_t tail = file_bytes % o->size_bytes;
    if (file_bytes == 0) {
        fprintf(stderr, "gpuframe: --input %s is empty\n", o->input_path);
        exit(EXIT_USAGE);
    }
    uint64_t frames = full + (tail > 0);
    if (tail > 0 && frames <= r->planned && !o->no_check &&
        expect_output(r->pipeline, tail, why, sizeof why) < 0) {
        fprintf(stderr,
                "gpuframe: --input %s: its last chunk of %" PRIu64
                " bytes cannot be a frame of pipeline '%s': %s\n",
                o->input_path, tail, pname, why);
        exit(EXIT_USAGE);
    }
    if (frames < r->planned)
        r->planned = frames;
}

/* Makes the synthetic pool and, with --verify, its references. */
static void make_pool(struct stream_run *r) {
    const struct stream_opts *o = r->o;
    const gf_pipeline *p = r->pipeline;
    size_t bytes = (size_t)o->size_bytes;

    r->pool_count = r->planned < SYNTH_POOL_MAX ? (size_t)r->planned : SYNTH_POOL_MAX;
    for (size_t k = 0; k < r->pool_count; k++) {
        r->pool[k] = alloc_frame(bytes);
        fill_synthetic(gf_pipeline_input_f32(p), o->seed * SYNTH_POOL_MAX + k, r->pool[k], bytes);
        if (o->verify && r->full_expect >= 0) {
            r->pool_refs[k] = alloc_frame((size_t)r->full_expect);
            reference(r, r->pool[k], bytes, r->pool_refs[k]);
        }
    }
}

/*
 * Queues frame number r->queued, reading it from --input if there is one.
 * Returns 1 when a frame was queued, 0 when the input has ended, -1 on a
 * failure already reported (the run stops queueing).
 */
static int queue_next(struct stream_run *r) {
    const struct stream_opts *o = r->o;
    struct frame_slot *s = &r->slots[r->queued % o->window];
    char why[WHY_BYTES];

    unsigned char *entry = NULL; /* --shm: this window entry's input */
    if (o->shm)
        entry = (unsigned char *)r->region.base + (r->queued % o->window) * r->in_stride;
    if (r->in == NULL && o->shm) {
        /* The region's inputs were filled once (stream_prepare): no copy. */
        size_t k = (size_t)(r->queued % o->window % r->pool_count);
        s->data = entry;
        s->bytes = (size_t)o->size_bytes;
        s->expect_bytes = r->full_expect;
        s->ref = r->pool_refs[k];
    } else if (r->in == NULL) {
        size_t k = (size_t)(r->queued % r->pool_count);
        s->data = r->pool[k];
        s->bytes = (size_t)o->size_bytes;
        s->expect_bytes = r->full_expect;
        s->ref = r->pool_refs[k];
    } else {
        unsigned char **buf = &r->in_bufs[r->queued % o->window];
        if (entry != NULL)
            *buf = entry; /* read straight into the region */
        else if (*buf == NULL)
            *buf = alloc_frame((size_t)o->size_bytes);
        size_t n = fread(*buf, 1, (size_t)o->size_bytes, r->in);
        if (n < o->size_bytes && ferror(r->in)) {
            fprintf(stderr, "gpuframe: --input %s: %s\n", o->input_path, strerror(errno));
            r->input_error = 1;
            return -1;
        }
        if (n == 0)
            return 0;
        s->data = *buf;
        s->bytes = n;
        s->ref = NULL;
        s->expect_bytes =
            n == o->size_bytes ? r->full_expect : expect_output(r->pipeline, n, why, sizeof why);
        if (s->expect_bytes < 0 && !o->no_check) {
            fprintf(stderr,
                    "gpuframe: --input %s: its last chunk of %zu bytes cannot be a frame of "
                    "pipeline '%s': %s\n",
                    o->input_path, n, r->pipeline->name, why);
            r->input_error = 1;
            return -1;
        }
        if (n < o->size_bytes)
            r->input_done = 1; /* a short chunk is the last */
    }

    s->queued_ns = gf_now_ns();
    int err;
    if (o->shm) {
        uint64_t i = r->queued % o->window;
        gf_shm_frame d = {.region_id = r->region.id,
                          .in_offset = i * r->in_stride,
                          .in_bytes = s->bytes,
                          .out_offset = o->window * r->in_stride + i * r->out_stride,
                          .out_capacity = r->out_stride};
        err = gf_client_send_frame_shm(r->client, r->pipeline->id, r->queued, &d);
    } else {
        err = gf_client_send_frame(r->client, r->pipeline->id, r->queued, s->data, s->bytes);
    }
    if (err < 0) {
        if (err != -EPIPE) /* a close: the next receive reports it */
            print_client_error(r->client, "send", err);
        return -1;
    }
    r->queued++;
    return 1;
}

/* Records a wrong result: printed when it is the first. */
static void mismatch(struct stream_run *r, uint64_t frame_id, const char *why) {
    if (r->mismatches++ == 0 && !r->o->quiet)
        fprintf(stderr, "frame %" PRIu64 ": wrong result: %s\n", frame_id, why);
}

/* Checks a RESULT of frame number `seq` (in slot `s`); returns 0 if correct. */
static int check_result(struct stream_run *r, uint64_t seq, const struct frame_slot *s,
                        const gf_reply *rep) {
    const gf_pipeline *p = r->pipeline;
    char why[WHY_BYTES];

    if (rep->header.frame_id != seq || rep->header.pipeline_id != p->id) {
        snprintf(why, sizeof why,
                 "reply echoes frame %" PRIu64 " pipeline %" PRIu32 ", sent frame %" PRIu64
                 " pipeline %" PRIu32,
                 rep->header.frame_id, rep->header.pipeline_id, seq, p->id);
        mismatch(r, seq, why);
        return -1;
    }
    if (s->expect_bytes >= 0 && rep->payload_bytes != (uint64_t)s->expect_bytes) {
        snprintf(why, sizeof why, "result has %zu bytes, expected %" PRId64, rep->payload_bytes,
                 s->expect_bytes);
        mismatch(r, seq, why);
        return -1;
    }
    if (!r->o->verify || s->expect_bytes < 0)
        return 0;

    const unsigned char *ref = s->ref;
    if (ref == NULL) {
        if (r->scratch_bytes < rep->payload_bytes) {
            free(r->scratch);
            r->scratch = alloc_frame(rep->payload_bytes);
            r->scratch_bytes = rep->payload_bytes;
        }
        reference(r, s->data, s->bytes, r->scratch);
        ref = r->scratch;
    }
    if (gf_pipeline_compare_result(p, rep->payload, ref, rep->payload_bytes, why, sizeof why) < 0) {
        mismatch(r, seq, why);
        return -1;
    }
    return 0;
}

/*
 * A shm RESULT as the reply it stands for: its payload is where the
 * descriptor says, in our region, after checking that it is where frame
 * `seq` asked for it.  Returns 0, or -1 with the problem recorded.
 */
static int shm_view(struct stream_run *r, uint64_t seq, const gf_reply *rep, gf_reply *view) {
    const gf_shm_result *d = &rep->shm_result;
    uint64_t want_off = r->o->window * r->in_stride + (seq % r->o->window) * r->out_stride;
    *view = *rep;
    if (!rep->shm || d->region_id != r->region.id || d->out_offset != want_off ||
        d->out_bytes > r->out_stride) {
        char why[WHY_BYTES];
        snprintf(why, sizeof why,
                 "shm result says region %" PRIu32 " offset %" PRIu64 " bytes %" PRIu64
                 "; asked region %" PRIu32 " offset %" PRIu64 " capacity %" PRIu64,
                 d->region_id, d->out_offset, d->out_bytes, r->region.id, want_off, r->out_stride);
        mismatch(r, seq, why);
        return -1;
    }
    view->payload = (const unsigned char *)r->region.base + d->out_offset;
    view->payload_bytes = (size_t)d->out_bytes;
    return 0;
}

/* Handles the reply to frame number r->answered. */
static void handle_reply(struct stream_run *r, const gf_reply *raw) {
    uint64_t seq = r->answered;
    const struct frame_slot *s = &r->slots[seq % r->o->window];
    gf_reply view;
    const gf_reply *rep = raw;
    if (r->o->shm && raw->header.type == GF_MSG_RESULT) {
        if (shm_view(r, seq, raw, &view) < 0) {
            r->failed++;
            r->answered++;
            return;
        }
        rep = &view;
    }

    if (r->latency_count == r->latency_cap) {
        size_t cap = r->latency_cap ? 2 * r->latency_cap : 1024;
        uint64_t *l = realloc(r->latency_ns, cap * sizeof *l);
        if (l == NULL) {
            fprintf(stderr, "gpuframe: out of memory\n");
            exit(EXIT_FAIL);
        }
        r->latency_ns = l;
        r->latency_cap = cap;
    }
    r->latency_ns[r->latency_count++] = gf_now_ns() - s->queued_ns;

    if (rep->header.type == GF_MSG_ERROR) {
        if (!r->o->quiet) {
            fprintf(stderr, "frame %" PRIu64 ": ", rep->header.frame_id);
            print_error_reply(stderr, rep);
        }
        r->errors_by_status[rep->header.status < GF_STATUS_COUNT_ ? rep->header.status
                                                                  : GF_STATUS_COUNT_]++;
        r->failed++;
    } else {
        r->in_bytes += s->bytes;
        r->out_bytes += rep->payload_bytes;
        if (check_result(r, seq, s, rep) < 0)
            r->failed++;
        /* Wrong results are written too: the file shows what the daemon sent. */
        if (r->out != NULL && rep->payload_bytes > 0 &&
            fwrite(rep->payload, 1, rep->payload_bytes, r->out) != rep->payload_bytes) {
            fprintf(stderr, "gpuframe: --output %s: %s\n", r->o->output_path, strerror(errno));
            exit(EXIT_FAIL);
        }
    }
    r->answered++;
}

/*
 * The summary of a run in which no frame got a correct result: rates and
 * latencies of failures mean nothing, so it says what failed instead, e.g.
 * "frames=4 errors=4 every frame failed: 3 bad_length, 1 no reply".
 */
static void print_all_failed(const struct stream_run *r, uint64_t failed) {
    const char *sep = "";

    printf("frames=%" PRIu64 " errors=%" PRIu64 " every frame failed:", r->queued, failed);
    for (uint32_t st = 0; st <= GF_STATUS_COUNT_; st++) {
        if (r->errors_by_status[st] == 0)
            continue;
        printf("%s %" PRIu64 " %s", sep, r->errors_by_status[st], gf_status_name(st));
        sep = ",";
    }
    if (r->mismatches > 0) {
        printf("%s %" PRIu64 " wrong result%s", sep, r->mismatches, r->mismatches > 1 ? "s" : "");
        sep = ",";
    }
    if (r->queued > r->answered)
        printf("%s %" PRIu64 " no reply", sep, r->queued - r->answered);
    putchar('\n');
    fflush(stdout);
}

static void print_summary(struct stream_run *r, uint64_t elapsed_ns, uint64_t failed) {
    double s = (double)elapsed_ns / 1e9;
    double per_s = s > 0 ? 1.0 / s : 0.0;

    if (failed > 0 && failed == r->queued) {
        print_all_failed(r, failed);
        return;
    }
    gf_sort_ns(r->latency_ns, r->latency_count);
    printf("frames=%" PRIu64 " errors=%" PRIu64 " seconds=%.3f frames_per_s=%.1f in_GBps=%.3f "
           "out_GBps=%.3f p50_us=%.1f p99_us=%.1f max_us=%.1f\n",
           r->queued, failed, s, (double)r->answered * per_s, (double)r->in_bytes * per_s / 1e9,
           (double)r->out_bytes * per_s / 1e9,
           gf_percentile_us(r->latency_ns, r->latency_count, 50),
           gf_percentile_us(r->latency_ns, r->latency_count, 99),
           gf_percentile_us(r->latency_ns, r->latency_count, 100));
    fflush(stdout);
}

/* The default --size: one image for normalize_u8, else STREAM_SIZE_DEFAULT. */
static uint64_t default_size(const gf_pipeline *p) {
    const gf_stage *first = &p->stages[0];
    if (strcmp(first->kind->name, "normalize_u8") == 0)
        return (uint64_t)first->params.width * first->params.height * 3u;
    return STREAM_SIZE_DEFAULT;
}

/* Frees and closes everything a run holds; safe on a partly set-up run. */
static void stream_free(struct stream_run *r) {
    if (r->out != NULL)
        fclose(r->out);
    if (r->in != NULL)
        fclose(r->in);
    if (r->region.base != NULL)
        gf_client_region_destroy(NULL, &r->region, 0);
    gf_client_close(r->client);
    for (size_t k = 0; k < SYNTH_POOL_MAX; k++) {
        free(r->pool[k]);
        free(r->pool_refs[k]);
    }
    if (r->in_bufs != NULL && !r->o->shm)
        for (size_t i = 0; i < r->o->window; i++)
            free(r->in_bufs[i]);
    free(r->in_bufs);
    free(r->scratch);
    free(r->stage_scratch[0]);
    free(r->stage_scratch[1]);
    free(r->slots);
    free(r->latency_ns);
    gf_pipelines_free(r->pipelines, r->pipeline_count);
    memset(r, 0, sizeof *r);
}

/* Connects, fetches the daemon's pipelines and picks --pipeline among them;
 * exits 2, naming the pipelines there are, when it is none of them. */
static void stream_connect(struct stream_run *r) {
    const struct stream_opts *o = r->o;
    size_t count;

    r->client = connect_or_die(&o->common);
    r->pipelines = fetch_pipelines(r->client, &o->common, &count);
    r->pipeline_count = count;
    r->pipeline = find_pipeline(r->pipelines, count, o->pipeline);
    if (r->pipeline != NULL)
        return;
    fprintf(stderr, "gpuframe stream: --pipeline: the daemon has no pipeline '%s'", o->pipeline);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, "%s%s", i == 0 ? " (it has: " : ", ", r->pipelines[i].name);
    fprintf(stderr, "%s\n", count > 0 ? ")" : "");
    exit(EXIT_USAGE);
}

/*
 * With --verify or --shm, loads the run's plugin stages here too, for what
 * the client computes itself: the output length of a frame (the region's
 * layout) and the reference.  The daemon is on this host (a Unix socket), so
 * the plugin's shared object and files are at the paths LIST gives; loading
 * one runs its code in this process, so verify only against a daemon you
 * trust.  A client that cannot read them exits 2 saying so.  Also sizes the
 * scratch a chain's references need.
 */
static void open_plugins(struct stream_run *r, uint64_t size_bytes) {
    gf_pipeline *p = &r->pipelines[r->pipeline - r->pipelines];
    char why[WHY_BYTES];
    int plugins = 0;
    for (uint32_t k = 0; k < p->stage_count; k++)
        plugins |= gf_kind_is_plugin(p->stages[k].kind);
    /* Only to verify, or to lay out --shm outputs: a client that just sends
     * frames runs no code of the daemon's choosing, and leaves the lengths
     * to the daemon (as --no-check does). */
    if (plugins && !r->o->verify && !r->o->shm) {
        r->lengths_unknown = 1;
        return;
    }
    gf_problems pr;
    gf_problems_init(&pr, why, sizeof why, 0, NULL);
    if (gf_pipeline_open_plugins(p, size_bytes, p->name, &pr) < 0) {
        fprintf(stderr, "gpuframe stream: pipeline '%s': cannot load its plugin here: %s\n",
                p->name, why);
        exit(EXIT_USAGE);
    }
    if (r->o->verify && !gf_pipeline_has_reference(p)) {
        fprintf(stderr, "gpuframe stream: --verify: pipeline '%s' has a plugin stage without a C "
                        "reference\n", p->name);
        exit(EXIT_USAGE);
    }
    uint64_t scratch = gf_pipeline_max_scratch_bytes(p, size_bytes);
    if (scratch > 0) {
        r->stage_scratch[0] = alloc_frame((size_t)scratch);
        r->stage_scratch[1] = alloc_frame((size_t)scratch);
    }
}

/* Settles --size (the pipeline's default when not given) and the output size
 * of such a frame; exits 2 when the pipeline cannot take it, unless
 * --no-check.  Raises the client's reply cap to fit that output. */
static void plan_frame_size(struct stream_run *r, struct stream_opts *o) {
    const gf_pipeline *p = r->pipeline;
    char why[WHY_BYTES];

    if (!o->have_size)
        o->size_bytes = default_size(p);
    open_plugins(r, o->size_bytes);
    if (r->lengths_unknown)
        o->no_check = 1;
    r->full_expect = expect_output(p, o->size_bytes, why, sizeof why);
    if (r->full_expect < 0 && !o->no_check) {
        char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
        fprintf(stderr,
                "gpuframe stream: --size %" PRIu64 ": pipeline '%s' (%s) cannot take it: %s\n",
                o->size_bytes, p->name, gf_pipeline_kinds_text(p, kinds, sizeof kinds), why);
        exit(EXIT_USAGE);
    }
    if (r->full_expect < 0 && o->verify && !o->quiet)
        fprintf(stderr, "gpuframe stream: --no-check: results of refused sizes are not verified\n");
    if (r->full_expect > 0 && (uint64_t)r->full_expect > GF_CLIENT_DEFAULT_MAX_REPLY_BYTES)
        (void)gf_client_set_max_reply_bytes(r->client, (uint64_t)r->full_expect);
}

/* Bytes rounded up to whole pages, so every entry starts page-aligned. */
static uint64_t page_round(uint64_t bytes) {
    const uint64_t page = 4096;
    return bytes == 0 ? page : (bytes + page - 1) / page * page;
}

/* --shm: creates the region and fills its window entries' inputs with the
 * synthetic pool once (frames then cost the client no copy). */
static int prepare_region(struct stream_run *r) {
    const struct stream_opts *o = r->o;
    r->in_stride = page_round(o->size_bytes);
    r->out_stride = page_round(r->full_expect > 0 ? (uint64_t)r->full_expect : 0);
    uint64_t bytes = o->window * (r->in_stride + r->out_stride);
    int err = gf_client_region_create(r->client, bytes, &r->region, o->common.timeout_ms);
    if (err < 0) {
        print_client_error(r->client, "--shm", err);
        return EXIT_FAIL;
    }
    if (!o->quiet)
        printf("shared-memory region %" PRIu32 " of %" PRIu64 " bytes%s\n", r->region.id, bytes,
               r->region.pinned ? ", pinned by the daemon" : "");
    if (r->in == NULL)
        for (uint64_t i = 0; i < o->window; i++)
            memcpy((unsigned char *)r->region.base + i * r->in_stride, r->pool[i % r->pool_count],
                   (size_t)o->size_bytes);
    return EXIT_OK;
}

/* Prepares the frames (--input, or the synthetic pool), opens --output and
 * allocates the window.  Returns EXIT_OK, or the command's exit status after
 * saying what failed; stream_free() releases what was prepared either way. */
static int stream_prepare(struct stream_run *r) {
    const struct stream_opts *o = r->o;

    if (o->input_path != NULL) {
        open_input(r, r->pipeline->name);
        r->in_bufs = calloc(o->window, sizeof *r->in_bufs);
        if (r->in_bufs == NULL) {
            fprintf(stderr, "gpuframe: out of memory\n");
            return EXIT_FAIL;
        }
    } else {
        r->planned = o->count != 0 ? o->count : STREAM_COUNT_DEFAULT;
        make_pool(r);
    }
    if (o->output_path != NULL) {
        r->out = fopen(o->output_path, "wb");
        if (r->out == NULL) {
            fprintf(stderr, "gpuframe: --output %s: %s\n", o->output_path, strerror(errno));
            return EXIT_USAGE;
        }
    }
    r->slots = calloc(o->window, sizeof *r->slots);
    if (r->slots == NULL) {
        fprintf(stderr, "gpuframe: out of memory\n");
        return EXIT_FAIL;
    }
    return o->shm ? prepare_region(r) : EXIT_OK;
}

/* Says what is about to be streamed, unless --quiet. */
static void print_banner(const struct stream_run *r) {
    const struct stream_opts *o = r->o;
    const gf_pipeline *p = r->pipeline;

    if (o->quiet)
        return;
    char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
    printf("streaming ");
    if (r->planned != UINT64_MAX)
        printf("%" PRIu64 " ", r->planned);
    printf("frames of %" PRIu64 " bytes%s%s to pipeline '%s' (id %" PRIu32 ", %s), window %" PRIu32
           "%s\n",
           o->size_bytes, o->input_path ? " from " : "", o->input_path ? o->input_path : "",
           p->name, p->id, gf_pipeline_kinds_text(p, kinds, sizeof kinds), o->window,
           o->verify ? ", verified" : "");
    fflush(stdout);
}

/*
 * Streams: keeps up to --window frames in flight and handles every reply,
 * until every queued frame is answered.  Returns 0, or -1 when the connection
 * failed first (already reported).
 */
static int stream_frames(struct stream_run *r) {
    const struct stream_opts *o = r->o;

    for (;;) {
        while (!r->input_done && r->queued < r->planned && r->queued - r->answered < o->window) {
            int q = queue_next(r);
            if (q <= 0) {
                r->input_done = 1;
                if (q < 0)
                    r->input_error = 1;
            }
        }
        if (r->queued == r->answered)
            return 0;

        size_t before = gf_client_in_flight(r->client);
        gf_reply rep;
        int err = gf_client_recv(r->client, &rep, o->common.timeout_ms);
        if (err < 0) {
            print_client_error(r->client, "stream", err);
            return -1;
        }
        if (gf_client_in_flight(r->client) == before) {
            /* A fatal ERROR about no frame of ours, sent before a close. */
            if (!o->quiet) {
                fputs("gpuframe: daemon: ", stderr);
                print_error_reply(stderr, &rep);
            }
            continue;
        }
        handle_reply(r, &rep);
    }
}

/* Prints the summary of a run that took `elapsed_ns` and closes --output.
 * Returns the command's exit status: 0 only when every frame got a correct
 * result and nothing failed. */
static int stream_finish(struct stream_run *r, uint64_t elapsed_ns, int connection_failed) {
    const struct stream_opts *o = r->o;

    if (r->in != NULL && r->queued == 0 && !r->input_error) {
        fprintf(stderr, "gpuframe: --input %s is empty\n", o->input_path);
        return EXIT_USAGE;
    }
    uint64_t failed = r->failed + (r->queued - r->answered);
    print_summary(r, elapsed_ns, failed);

    int status = failed == 0 && !connection_failed && !r->input_error ? EXIT_OK : EXIT_FAIL;
    if (r->out != NULL && fclose(r->out) != 0) {
        fprintf(stderr, "gpuframe: --output %s: %s\n", o->output_path, strerror(errno));
        status = EXIT_FAIL;
    }
    r->out = NULL;
    return status;
}

static int cmd_stream(int argc, char *argv[]) {
    struct stream_opts o;
    struct stream_run r;

    parse_stream_opts(argc, argv, &o);
    memset(&r, 0, sizeof r);
    r.o = &o;
    stream_connect(&r);
    plan_frame_size(&r, &o);
    int status = stream_prepare(&r);
    if (status == EXIT_OK) {
        print_banner(&r);
        uint64_t start_ns = gf_now_ns();
        int connection_failed = stream_frames(&r) < 0;
        status = stream_finish(&r, gf_now_ns() - start_ns, connection_failed);
    }
    stream_free(&r);
    return status;
}

/* ---- main -------------------------------------------------------------------- */

static const char main_help[] =
    "Usage: gpuframe COMMAND [OPTIONS]\n"
    "\n"
    "The client of gpuframed, the GPU frame-processing daemon.\n"
    "\n"
    "Commands:\n"
    "  list      print the daemon's pipelines\n"
    "  stats     print the daemon's statistics: a table, --json, --prometheus; --watch\n"
    "  stream    stream frames through a pipeline; report throughput and latency\n"
    "  trace     draw the last frames' stages per slot: Chrome trace (--out), SVG (--svg)\n"
    "\n"
    "Every command takes:\n" COMMON_HELP "\n"
    "'gpuframe COMMAND --help' describes a command; 'gpuframe --version' prints the version.\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n"
    "Environment: " SOCKET_ENV ", the daemon's socket unless --socket names one.\n"
    "See also: gpuframed(8), gpuframed.json(5); README.md in the documentation.\n";

int main(int argc, char *argv[]) {
    static const struct {
        const char *name;
        int (*run)(int argc, char *argv[]);
    } commands[] = {
        {"list", cmd_list}, {"stats", cmd_stats}, {"stream", cmd_stream}, {"trace", cmd_trace}};

    if (argc < 2)
        die_usage(NULL, "missing command (list, stats, stream or trace)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(main_help, stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("gpuframe %s (protocol %u)\n", GF_VERSION, GF_PROTOCOL_VERSION);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (cmd[0] == '-')
        die_usage(NULL, "unknown option '%s' (options follow the command)", cmd);
    die_usage(NULL, "unknown command '%s' (list, stats, stream or trace)", cmd);
    return EXIT_USAGE;
}

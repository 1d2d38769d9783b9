/* SPDX-License-Identifier: MIT */
/*
 * gpuframe stats: the daemon's STATS document as a summary table, JSON or
 * Prometheus text (the renderers are report.h's), once or refreshed
 * (--watch), to standard output or atomically to a file (--output).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_options.h"
#include "libgpuframe.h"
#include "report.h"

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
    "  -o, --output FILE       write to FILE instead of standard output ('-'), atomically:\n"
    "                          a temporary file beside it, mode 0644, renamed over FILE\n"
    "                          once complete; on failure FILE is left as it was\n"
    "      --watch SECONDS     print again every SECONDS (decimals allowed) until\n"
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
static int fetch_stats(const gf_common_opts *o, gf_client **c, cJSON **doc, char *why,
                       size_t why_len) {
    char *json = NULL;
    int err;

    if (*c == NULL) {
        err = gf_client_connect(o->socket_path, c);
        if (err < 0) {
            *c = NULL;
            gf_client_connect_error(o->socket_path, err, SOCKET_HOW_TO_POINT, why, why_len);
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
static int stats_watch(const gf_common_opts *o, enum stats_format format, double interval_s) {
    struct sigaction sa;
    gf_client *c = NULL;
    int tty = isatty(STDOUT_FILENO);
    char why[GF_CONNECT_WHY_BYTES];

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

/* What `gpuframe stats` was asked for. */
struct stats_opts {
    gf_common_opts common;
    enum stats_format format;
    const char *output_path; /* --output, or NULL: standard output */
    double watch_s;          /* --watch, or 0: once                */
};

/* Parses the command line into *so; exits on a usage error or --help. */
static void parse_stats_opts(int argc, char *argv[], struct stats_opts *so) {
    static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"prometheus", no_argument, NULL, OPT_PROMETHEUS},
                                             {"watch", required_argument, NULL, OPT_WATCH},
                                             {"output", required_argument, NULL, OPT_OUTPUT},
                                             COMMON_LONG_OPTIONS,
                                             {NULL, 0, NULL, 0}};
    int opt, formats = 0;

    memset(so, 0, sizeof *so);
    so->format = STATS_FORMAT_TABLE;
    gf_common_defaults(&so->common);
    while ((opt = getopt_long(argc, argv, ":o:" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (gf_common_option("stats", opt, &so->common, argv, stats_help))
            continue;
        switch (opt) {
        case OPT_JSON:
            so->format = STATS_FORMAT_JSON;
            formats++;
            break;
        case OPT_PROMETHEUS:
            so->format = STATS_FORMAT_PROMETHEUS;
            formats++;
            break;
        case OPT_OUTPUT: so->output_path = IS_STDIO(optarg) ? NULL : optarg; break;
        case OPT_WATCH: {
            char *end;
            errno = 0;
            so->watch_s = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(so->watch_s >= WATCH_MIN_S) ||
                so->watch_s > WATCH_MAX_S)
                gf_die_usage("stats", "--watch: expected seconds in [%g, %g], got '%s'",
                             WATCH_MIN_S, WATCH_MAX_S, optarg);
            break;
        }
        }
    }
    gf_no_operands("stats", argc, argv);
    if (formats > 1)
        gf_die_usage("stats", "--json and --prometheus exclude each other");
    if (so->output_path != NULL && so->watch_s > 0)
        gf_die_usage("stats", "--output writes one snapshot; run it from a timer rather than "
                              "with --watch");
}

/* One snapshot, to standard output or --output.  Returns the exit status. */
static int stats_once(const struct stats_opts *so) {
    gf_client *c = NULL;
    cJSON *doc = NULL;
    char *text = NULL;
    size_t len = 0;
    char why[GF_CONNECT_WHY_BYTES];
    int ok = fetch_stats(&so->common, &c, &doc, why, sizeof why) == 0 &&
             render_stats(doc, so->format, &text, &len, why, sizeof why) == 0;
    gf_client_close(c);
    cJSON_Delete(doc);
    if (ok && so->output_path != NULL)
        ok = write_atomically(so->output_path, text, len, why, sizeof why) == 0;
    if (!ok) {
        fprintf(stderr, "gpuframe: %s\n", why);
        free(text);
        return EXIT_FAIL;
    }
    if (so->output_path == NULL)
        fwrite(text, 1, len, stdout);
    free(text);
    return fflush(stdout) == 0 && !ferror(stdout) ? EXIT_OK : EXIT_FAIL;
}

int gf_cmd_stats(int argc, char *argv[]) {
    struct stats_opts so;

    parse_stats_opts(argc, argv, &so);
    if (so.watch_s > 0)
        return stats_watch(&so.common, so.format, so.watch_s);
    return stats_once(&so);
}

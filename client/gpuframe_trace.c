/* SPDX-License-Identifier: MIT */
/*
 * gpuframe trace: the stage timestamps of the daemon's last frames, drawn by
 * report.h's renderers as a Chrome trace (--output) and/or an SVG timeline
 * (--svg), with a line saying how many frames they span.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_options.h"
#include "libgpuframe.h"
#include "report.h"

static const char trace_help[] =
    "Usage: gpuframe trace [--count N] [--output FILE.json] [--svg FILE.svg] [OPTIONS]\n"
    "\n"
    "Fetches the stage timestamps of the last frames the daemon answered (its trace\n"
    "ring, `trace_frames` in its config) and draws them with one lane per slot and\n"
    "stage: slot S H2D, slot S kernel, slot S D2H, and slot S host (receive into the\n"
    "pinned buffer, completion_delay, reply_write), so overlap across slots shows.\n"
    "Prints the number of frames and the time they span.  At least one of:\n"
    "\n"
    "  -o, --output FILE       write a Chrome trace-event JSON file; open it in\n"
    "                          https://ui.perfetto.dev or chrome://tracing\n"
    "      --svg FILE          write a self-contained SVG timeline (hover a bar for its\n"
    "                          frame); a few dozen frames make a readable picture\n"
    "                          ('-' for either writes to standard output)\n"
    "  -n, --count N           the last N frames (default 0: every frame kept)\n" COMMON_HELP;

/* Writes len bytes of `text` to `path` ("-": stdout).  Returns 0 or -1
 * having said why. */
static int write_output(const char *path, const char *text, size_t len) {
    int to_stdout = IS_STDIO(path);
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

/* What `gpuframe trace` was asked for. */
struct trace_opts {
    gf_common_opts common;
    const char *out_path; /* --output, or NULL; "-": standard output */
    const char *svg_path; /* --svg, or NULL; "-": standard output    */
    uint64_t frames;      /* --count; 0: every frame kept            */
};

/* Parses the command line into *to; exits on a usage error or --help. */
static void parse_trace_opts(int argc, char *argv[], struct trace_opts *to) {
    /* --frames and --out: the names of --count and --output before every
     * command named them alike; kept, not listed. */
    static const struct option longopts[] = {{"count", required_argument, NULL, OPT_COUNT},
                                             {"frames", required_argument, NULL, OPT_COUNT},
                                             {"output", required_argument, NULL, OPT_OUTPUT},
                                             {"out", required_argument, NULL, OPT_OUTPUT},
                                             {"svg", required_argument, NULL, OPT_SVG},
                                             COMMON_LONG_OPTIONS,
                                             {NULL, 0, NULL, 0}};
    int opt;

    memset(to, 0, sizeof *to);
    gf_common_defaults(&to->common);
    while ((opt = getopt_long(argc, argv, ":n:o:" COMMON_SHORT_OPTIONS, longopts, NULL)) != -1) {
        if (gf_common_option("trace", opt, &to->common, argv, trace_help))
            continue;
        switch (opt) {
        case OPT_COUNT:
            if (gf_parse_u64(optarg, &to->frames) < 0 || to->frames > UINT32_MAX)
                gf_die_usage("trace", "--count: expected an integer in [0, %" PRIu32 "], got '%s'",
                             UINT32_MAX, optarg);
            break;
        case OPT_OUTPUT: to->out_path = optarg; break;
        case OPT_SVG: to->svg_path = optarg; break;
        }
    }
    gf_no_operands("trace", argc, argv);
    if (to->out_path == NULL && to->svg_path == NULL)
        gf_die_usage("trace", "say where to write: --output FILE.json and/or --svg FILE.svg");
    if (to->out_path != NULL && to->svg_path != NULL && IS_STDIO(to->out_path) &&
        IS_STDIO(to->svg_path))
        gf_die_usage("trace", "--output and --svg cannot both write to standard output");
}

/* Fetches the daemon's LIST (first, so the pictures can name pipelines) and
 * TRACE documents into *list_json and *trace_json, which the caller frees.
 * Returns 0, or -1 having said why (and exits when LIST fails). */
static int fetch_trace(const struct trace_opts *to, char **list_json, char **trace_json) {
    gf_client *c = gf_connect_or_die(&to->common);

    *list_json = gf_request_json_or_die(c, GF_MSG_LIST, &to->common);
    *trace_json = NULL;
    int err = gf_client_request_trace(c, (uint32_t)to->frames, trace_json, to->common.timeout_ms);
    if (err < 0) {
        gf_print_client_error(c, "trace", err);
        gf_client_close(c);
        free(*list_json);
        *list_json = NULL;
        return -1;
    }
    gf_client_close(c);
    return 0;
}

/* Says how many frames were drawn, over what time, and which files were
 * written: on standard output, or on stderr when a picture went there. */
static void say_summary(const struct trace_opts *to, const gf_report_trace_info *info) {
    int out_stdout = to->out_path != NULL && IS_STDIO(to->out_path);
    int svg_stdout = to->svg_path != NULL && IS_STDIO(to->svg_path);
    FILE *say = out_stdout || svg_stdout ? stderr : stdout;
    char span[48];

    if (info->frames == 0 || info->events == 0)
        fprintf(say,
                "trace: %zu frames: the daemon has answered none yet, or keeps none "
                "(trace_frames 0)\n",
                info->frames);
    else
        fprintf(say,
                "trace: %zu frames, %zu events in %zu lanes, spanning %s (from %.6f s after the "
                "daemon started)\n",
                info->frames, info->events, info->lanes,
                gf_report_format_ns(info->end_ns - info->begin_ns, "us", span, sizeof span),
                (double)info->begin_ns / 1e9);
    if (to->out_path != NULL && !out_stdout)
        fprintf(say, "wrote %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                to->out_path);
    if (to->svg_path != NULL && !svg_stdout)
        fprintf(say, "wrote %s\n", to->svg_path);
}

int gf_cmd_trace(int argc, char *argv[]) {
    struct trace_opts to;
    char *list_json, *trace_json;

    parse_trace_opts(argc, argv, &to);
    if (fetch_trace(&to, &list_json, &trace_json) < 0)
        return EXIT_FAIL;

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
    if (to.out_path != NULL &&
        write_trace(to.out_path, "Chrome trace", gf_report_trace_chrome, trace, list) < 0)
        goto done;
    if (to.svg_path != NULL &&
        write_trace(to.svg_path, "SVG timeline", gf_report_trace_svg, trace, list) < 0)
        goto done;
    say_summary(&to, &info);
    status = EXIT_OK;
done:
    cJSON_Delete(trace);
    cJSON_Delete(list);
    free(trace_json);
    free(list_json);
    return status;
}

/*
 * gpuframed: options, configuration, signals, and the event loop.
 * Start-up ends in gf_server_open (server.c); everything else is there too.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
#include "engine.h"
#include "log.h"
#include "server.h"

/* Exit statuses, as systemd and scripts see them. */
#define GF_EXIT_OK      0
#define GF_EXIT_FAILURE 1 /* a fatal engine failure while serving    */
#define GF_EXIT_USAGE   2 /* bad command line or configuration       */
#define GF_EXIT_STARTUP 3 /* could not start: engine, memory, socket */

static const char usage[] =
    "Usage: gpuframed [OPTIONS]\n"
    "Serve frame-processing pipelines on a local GPU over a Unix socket.\n"
    "\n"
    "  -c, --config FILE          read the configuration from FILE (default: the\n"
    "                             built-in one, identical to config/gpuframed.json)\n"
    "  -s, --socket PATH          listen on PATH (overrides \"socket\")\n"
    "  -e, --engine auto|cuda|cpu compute engine (overrides \"engine\")\n"
    "  -n, --slots N              frames in flight at once (overrides \"slots\")\n"
    "  -m, --max-frame-bytes N    largest frame payload (overrides \"max_frame_bytes\")\n"
    "  -l, --log-level LEVEL      error, warn, info or debug (overrides \"log_level\")\n"
    "  -V, --version              print the version and the engines built in\n"
    "  -h, --help                 print this help\n"
    "\n"
    "SIGINT or SIGTERM stops gracefully: every frame already received is answered\n"
    "first. A second signal exits at once.\n";

/* Parses a whole decimal number in [min, max]; returns -1 if it is not one. */
static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static uv_signal_t sigint_handle, sigterm_handle;
static int signals_seen;

/* First SIGINT/SIGTERM: drain.  Second: exit at once, abandoning frames. */
static void on_signal(uv_signal_t *h, int signum) {
    gf_server *srv = h->data;
    if (++signals_seen > 1) {
        GF_LOG_WRN("second signal (%s): exiting at once", strsignal(signum));
        _exit(GF_EXIT_FAILURE);
    }
    GF_LOG_INF("%s: draining", strsignal(signum));
    gf_server_shutdown(srv);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"socket", required_argument, NULL, 's'},
                                             {"engine", required_argument, NULL, 'e'},
                                             {"slots", required_argument, NULL, 'n'},
                                             {"max-frame-bytes", required_argument, NULL, 'm'},
                                             {"log-level", required_argument, NULL, 'l'},
                                             {"version", no_argument, NULL, 'V'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *config_path = NULL, *socket_path = NULL, *engine = NULL, *level = NULL;
    const char *slots = NULL, *max_frame = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:s:e:n:m:l:Vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': config_path = optarg; break;
        case 's': socket_path = optarg; break;
        case 'e': engine = optarg; break;
        case 'n': slots = optarg; break;
        case 'm': max_frame = optarg; break;
        case 'l': level = optarg; break;
        case 'V':
            printf("gpuframed %s (engines: %s; protocol %u)\n", GF_VERSION,
                   gf_engine_builtin_names(), GF_PROTOCOL_VERSION);
            return GF_EXIT_OK;
        case 'h': fputs(usage, stdout); return GF_EXIT_OK;
        default: fputs(usage, stderr); return GF_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuframed: unexpected argument '%s'\n%s", argv[optind], usage);
        return GF_EXIT_USAGE;
    }

    gf_config cfg = {0};
    char err[512];
    int rc = config_path ? gf_config_load_file(config_path, &cfg, err, sizeof err)
                         : gf_config_parse(gf_default_config_json, &cfg, err, sizeof err);
    if (rc != 0) {
        /* A file's errors already start with its path. */
        fprintf(stderr, "gpuframed: %s%s\n", config_path ? "" : "built-in configuration: ", err);
        return GF_EXIT_USAGE;
    }
    /* Command-line flags override the file, with the same checks. */
    uint64_t v;
    const char *bad = NULL;
    if (socket_path) {
        if (strlen(socket_path) == 0 || strlen(socket_path) >= sizeof cfg.socket_path)
            bad = "--socket: expected a path of 1 to 107 bytes";
        else
            snprintf(cfg.socket_path, sizeof cfg.socket_path, "%s", socket_path);
    }
    if (!bad && engine && gf_engine_choice_parse(engine, &cfg.engine) != 0)
        bad = "--engine: expected auto, cuda or cpu";
    if (!bad && level && gf_log_level_parse(level, &cfg.log_level) != 0)
        bad = "--log-level: expected error, warn, info or debug";
    if (!bad && slots) {
        if (parse_u64(slots, GF_SLOTS_MIN, GF_SLOTS_MAX, &v) != 0)
            bad = "--slots: expected an integer in [1, 64]";
        else
            cfg.slot_count = (uint32_t)v;
    }
    if (!bad && max_frame) {
        if (parse_u64(max_frame, 1, GF_MAX_FRAME_BYTES_LIMIT, &v) != 0)
            bad = "--max-frame-bytes: expected an integer in [1, 4294967296]";
        else
            cfg.max_frame_bytes = v;
        for (size_t i = 0; !bad && i < cfg.pipeline_count; i++) {
            const gf_pipeline *p = &cfg.pipelines[i];
            char why[256];
            if (p->kind->check_params(&p->params, cfg.max_frame_bytes, why, sizeof why) != 0) {
                snprintf(err, sizeof err, "--max-frame-bytes: pipeline %s: %s", p->name, why);
                bad = err;
            }
        }
    }
    if (bad) {
        fprintf(stderr, "gpuframed: %s\n", bad);
        gf_config_free(&cfg);
        return GF_EXIT_USAGE;
    }
    gf_log_set_level(cfg.log_level);
    signal(SIGPIPE, SIG_IGN);

    GF_LOG_INF("gpuframed %s starting (engines built in: %s; config %s)", GF_VERSION,
               gf_engine_builtin_names(), config_path ? config_path : "built-in");
    uv_loop_t loop;
    uv_loop_init(&loop);
    gf_server *srv = NULL;
    rc = gf_server_open(&loop, &cfg, -1, &srv);
    if (rc < 0) {
        GF_LOG_ERR("start-up failed: %s", rc > -4096 ? uv_strerror(rc) : "error");
        uv_loop_close(&loop);
        gf_config_free(&cfg);
        return GF_EXIT_STARTUP;
    }
    uv_signal_init(&loop, &sigint_handle);
    uv_signal_init(&loop, &sigterm_handle);
    sigint_handle.data = sigterm_handle.data = srv;
    uv_signal_start(&sigint_handle, on_signal, SIGINT);
    uv_signal_start(&sigterm_handle, on_signal, SIGTERM);
    /* Signals alone must not keep the loop running once the server is done. */
    uv_unref((uv_handle_t *)&sigint_handle);
    uv_unref((uv_handle_t *)&sigterm_handle);

    uv_run(&loop, UV_RUN_DEFAULT);

    if (gf_server_failed(srv)) {
        /* The engine is stuck or poisoned: waiting for it could hang forever. */
        GF_LOG_ERR("exiting with status %d so that the supervisor restarts gpuframed",
                   GF_EXIT_FAILURE);
        _exit(GF_EXIT_FAILURE);
    }
    uv_close((uv_handle_t *)&sigint_handle, NULL);
    uv_close((uv_handle_t *)&sigterm_handle, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    int status = gf_server_close(srv);
    int lc = uv_loop_close(&loop);
    if (lc != 0)
        GF_LOG_WRN("event loop closed with handles still open: %s", uv_strerror(lc));
    gf_config_free(&cfg);
    GF_LOG_INF("stopped");
    return status == 0 ? GF_EXIT_OK : GF_EXIT_FAILURE;
}

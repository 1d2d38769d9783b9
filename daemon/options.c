/* SPDX-License-Identifier: MIT */
/*
 * gpuframed's command line (options.h is the contract): the --help text, the
 * options that set a configuration key, getopt_long over argv, and
 * --check-config.  What it parses goes into gf_config_overrides, which
 * config.c applies to every configuration read, at start-up and on reload.
 */
#include "options.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* Where `cmake --install` puts the configuration for the configured prefix
 * (cmake/install_paths.cmake); CMake defines it for the gpuframed
 * executable.  Only --help, and so gpuframed(8), prints it. */
#ifndef GF_INSTALL_CONFIG_PATH
#define GF_INSTALL_CONFIG_PATH "/etc/gpuframed/gpuframed.json"
#endif

/* Room for why an option's value is wrong, as gf_config_override says it. */
#define GF_OPTION_WHY_BYTES 1024

/* --help, man-style; one string per section (ISO C bounds a literal's length). */
static const char *const help_sections[] = {
    "NAME\n"
    "    gpuframed - serve GPU frame-processing pipelines over a Unix socket\n"
    "\n",
    "SYNOPSIS\n"
    "    gpuframed [--config FILE] [--socket PATH] [--engine auto|cuda|cpu] [--slots N]\n"
    "              [--shards N] [--devices all|LIST] [--socket-group GROUP]\n"
    "              [--user USER]\n"
    "              [--max-frame-bytes N] [--log-level LEVEL]\n"
    "    gpuframed --check-config FILE [OPTIONS]\n"
    "    gpuframed --version | --help\n"
    "\n",
    "DESCRIPTION\n"
    "    gpuframed turns a local NVIDIA GPU into a frame-processing service. Local\n"
    "    programs connect to its Unix domain socket, stream frames of bytes and get\n"
    "    each frame back processed by a named pipeline (a CUDA kernel with its\n"
    "    parameters, set in the configuration). Copies and kernels of consecutive\n"
    "    frames overlap on a ring of slots; when every slot is busy the daemon stops\n"
    "    reading and clients block (backpressure), no frame is dropped. Without a\n"
    "    GPU, the cpu engine runs the same pipelines' C reference code.\n"
    "\n"
    "    It is meant to run under systemd (gpuframed.service, gpuframed.socket):\n"
    "    it serves the socket systemd passes, reports readiness, status and\n"
    "    liveness with sd_notify, logs to the journal with priorities, drains on\n"
    "    stop and reloads its configuration on SIGHUP. Without systemd (a\n"
    "    container, an init script), start it as root with --socket-group and\n"
    "    --user: it binds the socket, gives it that group, then runs as that user.\n"
    "\n",
    "OPTIONS\n"
    "    -c, --config FILE\n"
    "        Read the configuration from FILE instead of the built-in one (which is\n"
    "        the packaged gpuframed.json's). SIGHUP reads FILE again.\n"
    "    -s, --socket PATH\n"
    "        Listen on PATH (overrides \"socket\"). Ignored under socket activation.\n"
    "    -g, --socket-group GROUP\n"
    "        Give the socket group GROUP, a name or gid (overrides \"socket_group\");\n"
    "        with the default socket_mode 0660 its members may connect. Ignored\n"
    "        under socket activation (the unit's SocketGroup= decides).\n"
    "    -u, --user USER\n"
    "        Started as root: once the socket is bound, become USER, a name or uid,\n"
    "        with its groups, for good (overrides \"user\"); the pipelines, their\n"
    "        plugins and the GPU are then opened, and every reload read, as USER.\n"
    "    -e, --engine auto|cuda|cpu\n"
    "        The compute engine (overrides \"engine\"). auto picks cuda when a device\n"
    "        answers, else cpu, and logs which and why.\n"
    "    -n, --slots N\n"
    "        Frames in flight at once per shard, 1 to 64 (overrides \"slots\").\n"
    "    -j, --shards N\n"
    "        Event loops, each on its own thread with its own connections and slots,\n"
    "        0 to 64; 0 chooses at start (overrides \"shards\").\n"
    "    -d, --devices all|LIST\n"
    "        The CUDA devices the shards run on, by ordinal: \"0,1\" (overrides\n"
    "        \"devices\").\n"
    "    -m, --max-frame-bytes N\n"
    "        Largest frame payload in bytes; a suffix K, M or G multiplies by 2^10,\n"
    "        2^20 or 2^30 (overrides \"max_frame_bytes\").\n"
    "    -l, --log-level error|warn|info|debug\n"
    "        Least severe message logged (overrides \"log_level\").\n"
    "    --check-config FILE\n"
    "        Validate FILE, with the other options applied, without starting: print\n"
    "        \"FILE: ok\" and exit 0, or print every problem, each naming its key, and\n"
    "        exit 2. Unknown keys are problems; so are slots that would pin more\n"
    "        host memory than max_pinned_bytes allows. Without FILE, the file of\n"
    "        --config (gpuframed --check-config --config FILE).\n"
    "    -V, --version\n"
    "        Print the version, the engines built in and the protocol versions spoken.\n"
    "    -h, --help\n"
    "        Print this text.\n"
    "\n"
    "    Options override the configuration file, also after a reload.\n"
    "\n",
    "FILES\n"
    "    " GF_INSTALL_CONFIG_PATH "\n"
    "        The configuration the systemd unit passes with --config;\n"
    "        gpuframed.json(5) describes every key.\n"
    "    /run/gpuframed.sock\n"
    "        The socket gpuframed.socket listens on (mode 0660, group gpuframed).\n"
    "    PREFIX/share/doc/gpuframed/\n"
    "        README.md, SERVICE.md (systemd, without it, containers), DESIGN.md,\n"
    "        CONFIG.md (every configuration key), PROTOCOL.md, STATS.md (every STATS\n"
    "        field), PLUGINS.md, gzipped in the Debian package, and examples/\n"
    "        (example configurations); PREFIX is the install prefix, /usr for the\n"
    "        Debian package.\n"
    "\n",
    "SIGNALS\n"
    "    SIGTERM, SIGINT\n"
    "        Drain: stop accepting connections and reading new frames, finish every\n"
    "        frame already received, write its reply, close, exit 0. If that takes\n"
    "        longer than drain_timeout_ms, the unanswered frames are abandoned (the\n"
    "        log says how many) and the exit status is 1. A second signal exits at\n"
    "        once with status 1.\n"
    "    SIGHUP\n"
    "        Reload the configuration (--config FILE, else the built-in one), read\n"
    "        on a thread of its own while the daemon goes on serving. The pipelines\n"
    "        (added, removed, renamed or changed), the log level, max_frame_bytes (up\n"
    "        to the slots' size), the timeouts and the limits change at once; socket,\n"
    "        engine, slots, timing_events, completion, zero_copy_max_bytes,\n"
    "        cuda_graphs, trace_frames, and pipelines beyond the slots' buffers need a\n"
    "        restart, and the log says which.\n"
    "        A configuration with problems is rejected, every problem logged, and the\n"
    "        running one kept.\n"
    "\n",
    "ENVIRONMENT\n"
    "    LISTEN_FDS, LISTEN_PID\n"
    "        Socket activation: when LISTEN_PID is this process and LISTEN_FDS is 1,\n"
    "        gpuframed serves the listening socket on fd 3 and never creates or\n"
    "        removes a socket file. More than one socket is an error.\n"
    "    NOTIFY_SOCKET\n"
    "        Where READY=1, STATUS=, WATCHDOG=1, STOPPING=1 and RELOADING=1 go (a\n"
    "        path, or @name for an abstract socket).\n"
    "    WATCHDOG_USEC, WATCHDOG_PID\n"
    "        WATCHDOG=1 is sent every WATCHDOG_USEC/2 while frames complete or none\n"
    "        is in flight; an engine that stops completing frames stops the pings, so\n"
    "        systemd restarts the daemon (WatchdogSec=).\n"
    "    JOURNAL_STREAM\n"
    "        When it names stderr, log lines carry syslog priorities (<3> error,\n"
    "        <4> warn, <6> info, <7> debug) and no time stamp, for journald.\n"
    "    CUDA_VISIBLE_DEVICES\n"
    "        Which GPUs the CUDA runtime shows, numbered from 0 in that order; the\n"
    "        shards run on every one of them unless \"devices\" (--devices) names some.\n"
    "    CUDA_CACHE_PATH\n"
    "        Where the CUDA driver caches JIT-compiled kernels (the unit points it at\n"
    "        the service's cache directory).\n"
    "\n",
    "EXIT STATUS\n"
    "    0   stopped after a complete drain; --check-config: the file is valid\n"
    "    1   a fatal engine failure, a drain that ran out of time, or a second signal\n"
    "    2   a bad command line or configuration\n"
    "    3   could not start: engine, memory or socket\n"
    "\n",
    /* Parenthesised: clang takes two literals in the last element for a
     * missing comma (-Wstring-concatenation). */
    ("SEE ALSO\n"
     "    gpuframe(1), gpuframed.json(5), systemd.socket(5), systemd-sysusers(8)\n"),
};

static const char usage_hint[] = "Try 'gpuframed --help' for more information.\n";

/* The options that set a configuration key, as gf_config_override does. */
static const struct key_option {
    const char *name; /* the long option, without "--" */
    int letter;       /* the short one                 */
    const char *key;  /* the gf_config_key it sets     */
} key_options[] = {
    {"socket", 's', "socket"},       {"engine", 'e', "engine"},
    {"slots", 'n', "slots"},         {"max-frame-bytes", 'm', "max_frame_bytes"},
    {"log-level", 'l', "log_level"}, {"shards", 'j', "shards"},
    {"devices", 'd', "devices"},     {"socket-group", 'g', "socket_group"},
    {"user", 'u', "user"},
};

/* Sets the key option `letter` sets from `text`.  Returns -1 (go on), or
 * GF_EXIT_USAGE after saying why; GF_EXIT_USAGE too for an unknown letter. */
static int set_key_option(int letter, const char *text, gf_config_overrides *flags) {
    char why[GF_OPTION_WHY_BYTES];

    for (size_t i = 0; i < sizeof key_options / sizeof key_options[0]; i++) {
        if (key_options[i].letter != letter)
            continue;
        if (gf_config_override(flags, key_options[i].key, text, why, sizeof why) == 0)
            return -1;
        fprintf(stderr, "gpuframed: --%s: %s\n", key_options[i].name, why);
        return GF_EXIT_USAGE;
    }
    fputs(usage_hint, stderr);
    return GF_EXIT_USAGE;
}

/* The file --check-config validates, into *check_path unless its own
 * argument (--check-config=FILE) set it: the first argument left after the
 * options (--check-config FILE: getopt_long takes an optional argument only
 * after '='), else the --config FILE, the older spelling (gpuframed
 * --check-config --config FILE).  Returns -1 (go on), or GF_EXIT_USAGE
 * after saying that there is none. */
static int check_config_file(int argc, char **argv, const char *config_path,
                             const char **check_path) {
    if (*check_path == NULL && optind < argc)
        *check_path = argv[optind++];
    if (*check_path == NULL)
        *check_path = config_path;
    if (*check_path != NULL)
        return -1;
    fprintf(stderr,
            "gpuframed: --check-config: which file? --check-config FILE, or --config FILE "
            "--check-config\n%s",
            usage_hint);
    return GF_EXIT_USAGE;
}

int gf_options_parse(int argc, char **argv, gf_config_overrides *flags, const char **config_path,
                     const char **check_path) {
    enum { OPT_CHECK_CONFIG = 256 };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket", required_argument, NULL, 's'},
        {"engine", required_argument, NULL, 'e'},
        {"slots", required_argument, NULL, 'n'},
        {"max-frame-bytes", required_argument, NULL, 'm'},
        {"log-level", required_argument, NULL, 'l'},
        {"shards", required_argument, NULL, 'j'},
        {"devices", required_argument, NULL, 'd'},
        {"socket-group", required_argument, NULL, 'g'},
        {"user", required_argument, NULL, 'u'},
        {"check-config", optional_argument, NULL, OPT_CHECK_CONFIG},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int opt, rc, checking = 0;

    memset(flags, 0, sizeof *flags);
    while ((opt = getopt_long(argc, argv, "c:s:e:n:m:l:j:d:g:u:Vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': *config_path = optarg; break;
        case OPT_CHECK_CONFIG:
            checking = 1;
            *check_path = optarg;
            break;
        case 'V':
            printf("gpuframed %s (engines: %s; protocol", GF_VERSION, gf_engine_builtin_names());
            for (unsigned v = GF_PROTOCOL_VERSION; v <= GF_PROTOCOL_VERSION_MAX; v++)
                printf("%s %u", v > GF_PROTOCOL_VERSION ? "," : "", v);
            printf(")\n");
            return GF_EXIT_OK;
        case 'h':
            for (size_t i = 0; i < sizeof help_sections / sizeof help_sections[0]; i++)
                fputs(help_sections[i], stdout);
            return GF_EXIT_OK;
        default:
            rc = set_key_option(opt, optarg, flags);
            if (rc >= 0)
                return rc;
            break;
        }
    }
    if (checking && (rc = check_config_file(argc, argv, *config_path, check_path)) >= 0)
        return rc;
    if (optind < argc) {
        fprintf(stderr, "gpuframed: unexpected argument '%s'\n%s", argv[optind], usage_hint);
        return GF_EXIT_USAGE;
    }
    return -1;
}

int gf_options_check_config(const char *path, const gf_config_overrides *flags) {
    char errs[GF_PROBLEMS_BYTES];
    size_t count = 0, shown = 0;
    gf_config cfg;

    if (gf_config_load(path, flags, &cfg, errs, sizeof errs, &count) == 0) {
        gf_config_free(&cfg);
        printf("%s: ok\n", path);
        return GF_EXIT_OK;
    }
    fputs(errs, stderr);
    for (const char *c = errs; *c != '\0'; c++)
        shown += *c == '\n';
    if (shown < count)
        fprintf(stderr, "%s: ... and %zu more problem(s)\n", path, count - shown);
    fprintf(stderr, "%s: %zu problem(s)\n", path, count);
    return GF_EXIT_USAGE;
}

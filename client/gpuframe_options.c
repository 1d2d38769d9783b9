/* SPDX-License-Identifier: MIT */
/*
 * The options every gpuframe subcommand shares, and parsers of option values;
 * gpuframe_options.h is the contract.
 */
#include "gpuframe_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpuframe_commands.h"

void gf_die_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "gpuframe%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'gpuframe%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    exit(EXIT_USAGE);
}

void gf_common_defaults(gf_common_opts *o) {
    const char *env = getenv(SOCKET_ENV);

    o->socket_path = env != NULL && env[0] != '\0' ? env : SOCKET_DEFAULT;
    o->timeout_ms = TIMEOUT_MS_DEFAULT;
}

int gf_common_option(const char *cmd, int opt, gf_common_opts *o, char *const argv[],
                     const char *help) {
    uint64_t v;

    switch (opt) {
    case OPT_SOCKET: o->socket_path = optarg; return 1;
    case OPT_TIMEOUT:
        if (gf_parse_u64(optarg, &v) < 0 || v > INT32_MAX)
            gf_die_usage(cmd, "--timeout: expected milliseconds (0 waits for ever), got '%s'",
                         optarg);
        o->timeout_ms = v == 0 ? -1 : (int)v;
        return 1;
    case OPT_HELP: fputs(help, stdout); exit(EXIT_OK);
    case ':': gf_die_usage(cmd, "option '%s' needs an argument", argv[optind - 1]); return 1;
    case '?':
        /* optopt is the character of a bad short option, else 0 (unknown
         * long option) or the value of a long one given an argument. */
        if (optopt > 0 && optopt < OPT_FIRST_LONG)
            gf_die_usage(cmd, "unknown option '-%c'", optopt);
        gf_die_usage(cmd, "unknown or malformed option '%s'", argv[optind - 1]);
        return 1;
    }
    return 0;
}

void gf_no_operands(const char *cmd, int argc, char *const argv[]) {
    if (optind < argc)
        gf_die_usage(cmd, "unexpected argument '%s'", argv[optind]);
}

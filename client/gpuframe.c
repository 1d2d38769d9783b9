/* SPDX-License-Identifier: MIT */
/*
 * gpuframe: the command-line client of gpuframed.  This file is its entry:
 * it picks the subcommand, each in its own file (gpuframe_commands.h lists
 * them), and answers --help and --version ("gpuframe 0.1.0 (protocol 1, 2)":
 * its version and every protocol version it speaks).
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
 * a frame size the pipeline cannot take), 130 a stream cut short by Ctrl-C.
 */
#include <stdio.h>
#include <string.h>

#include "gpuframe_commands.h"
#include "gpuframe_options.h"
#include "protocol.h"

#ifndef GF_VERSION
#define GF_VERSION "unknown"
#endif

static const char main_help[] =
    "Usage: gpuframe COMMAND [OPTIONS]\n"
    "\n"
    "The client of gpuframed, the GPU frame-processing daemon.\n"
    "\n"
    "Commands:\n"
    "  list      print the daemon's pipelines\n"
    "  stats     print the daemon's statistics: a table, --json, --prometheus; --watch\n"
    "  stream    stream frames through a pipeline; report throughput and latency\n"
    "  trace     draw the last frames' stages per slot: Chrome trace (--output), SVG (--svg)\n"
    "\n"
    "Every command takes:\n" COMMON_HELP "\n"
    "A short option means the same in every command that has it: -s --socket,\n"
    "-t --timeout, -h --help, -o --output, -i --input, -n --count, -p --pipeline,\n"
    "-w --window, -q --quiet.  A FILE of '-' is standard input or output.\n"
    "\n"
    "'gpuframe COMMAND --help' describes a command; 'gpuframe --version' prints the version.\n"
    "Exit status: 0 success, 1 failure, 2 usage error, 130 a stream cut short by Ctrl-C.\n"
    "Environment: " SOCKET_ENV ", the daemon's socket unless --socket names one.\n"
    "See also: gpuframed(8), gpuframed.json(5); README.md in the documentation.\n";

int main(int argc, char *argv[]) {
    static const struct {
        const char *name;
        int (*run)(int argc, char *argv[]);
    } commands[] = {{"list", gf_cmd_list},
                    {"stats", gf_cmd_stats},
                    {"stream", gf_cmd_stream},
                    {"trace", gf_cmd_trace}};

    if (argc < 2)
        gf_die_usage(NULL, "missing command (list, stats, stream or trace)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(main_help, stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        /* The protocol versions it speaks, all of them: a client of version
         * 2 also speaks 1 (PROTOCOL.md, "Versioning"). */
        printf("gpuframe %s (protocol", GF_VERSION);
        for (unsigned v = GF_PROTOCOL_VERSION; v <= GF_PROTOCOL_VERSION_MAX; v++)
            if (gf_version_known(v))
                printf("%s %u", v > GF_PROTOCOL_VERSION ? "," : "", v);
        printf(")\n");
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (cmd[0] == '-')
        gf_die_usage(NULL, "unknown option '%s' (options follow the command)", cmd);
    gf_die_usage(NULL, "unknown command '%s' (list, stats, stream or trace)", cmd);
    return EXIT_USAGE;
}

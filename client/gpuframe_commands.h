/* SPDX-License-Identifier: MIT */
/*
 * The gpuframe command's subcommands: their entry points, the exit statuses
 * they return, and the map of the command's files.  Only client/gpuframe*.c
 * include this header.
 *
 *   gpuframe.c                 main: picks the subcommand, --help, --version
 *   gpuframe_options.c         the options every subcommand takes, and
 *                              parsing option values
 *   gpuframe_connect.c         connecting to the daemon, asking for its
 *                              documents, saying what failed
 *   gpuframe_list.c            gpuframe list
 *   gpuframe_stats.c           gpuframe stats (table, JSON, Prometheus;
 *                              --watch, --output)
 *   gpuframe_trace.c           gpuframe trace (Chrome trace, SVG)
 *   gpuframe_stream*.c         gpuframe stream (gpuframe_stream_run.h says
 *                              which file does what)
 *
 * main calls the subcommands; they call gpuframe_options.c,
 * gpuframe_connect.c and the report renderers (report.h); nothing calls back
 * up.
 */
#ifndef GF_GPUFRAME_COMMANDS_H
#define GF_GPUFRAME_COMMANDS_H

/* Exit statuses of every subcommand: success; failure (a frame without a
 * correct result, the daemon unreachable or gone); usage error (a bad
 * argument, an unknown pipeline, a frame size the pipeline cannot take);
 * interrupted (stream). */
#define EXIT_OK    0
#define EXIT_FAIL  1
#define EXIT_USAGE 2
/* A stream that Ctrl-C cut short, after its summary: as a shell reports a
 * command killed by SIGINT (128 + 2). */
#define EXIT_INTERRUPTED 130

/* Room for a reason: a mismatch, a length check, a failed request. */
#define WHY_BYTES 256

/* The subcommands: each takes its own argv (argv[0] is its name), returns
 * the command's exit status and may exit with it instead. */
int gf_cmd_list(int argc, char *argv[]);
int gf_cmd_stats(int argc, char *argv[]);
int gf_cmd_stream(int argc, char *argv[]);
int gf_cmd_trace(int argc, char *argv[]);

#endif

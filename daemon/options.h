/* SPDX-License-Identifier: MIT */
/*
 * gpuframed's command line: the options, --help, --version and
 * --check-config.  main.c calls gf_options_parse first and starts the daemon
 * only when it says to go on; nothing here touches the event loop, systemd
 * or the engine.  Part of the gpuframed executable, not of gfcore.
 */
#ifndef GF_OPTIONS_H
#define GF_OPTIONS_H

#include "config.h"

/* Exit statuses, as systemd and scripts see them; --help lists them. */
#define GF_EXIT_OK      0
#define GF_EXIT_FAILURE 1 /* a fatal engine failure, a drain out of time, a 2nd signal */
#define GF_EXIT_USAGE   2 /* bad command line or configuration                        */
#define GF_EXIT_STARTUP 3 /* could not start: engine, memory, socket                  */

/* Room for every problem of one configuration, one line each. */
#define GF_PROBLEMS_BYTES 8192

/*
 * Parses argv[argc] with getopt_long.  Zeroes *flags, then sets in it every
 * key an option gives (--socket, --engine, --slots, --max-frame-bytes,
 * --log-level), checked as gf_config_override checks them.  *config_path gets
 * --config's FILE and *check_path --check-config's; both point into argv and
 * are left as they were when the option is absent (callers start them NULL).
 * Returns -1 to go on, or the exit status the process should end with:
 * GF_EXIT_OK after printing --help or --version to stdout, GF_EXIT_USAGE
 * after saying on stderr what is wrong with the command line.  Call it once:
 * it uses getopt's global state.
 */
int gf_options_parse(int argc, char **argv, gf_config_overrides *flags, const char **config_path,
                     const char **check_path);

/*
 * --check-config FILE: loads `path` with `flags` applied and starts nothing.
 * Prints "FILE: ok" to stdout and returns GF_EXIT_OK, or prints every problem
 * and their count to stderr and returns GF_EXIT_USAGE.
 */
int gf_options_check_config(const char *path, const gf_config_overrides *flags);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What every gpuframe subcommand's command line shares: --socket, --timeout
 * and --help, getopt's errors, the ids of long-only options, and parsers of
 * option values.  Usage errors print "gpuframe CMD: ..." with a pointer to
 * --help and exit with EXIT_USAGE (gpuframe_commands.h).
 */
#ifndef GF_GPUFRAME_OPTIONS_H
#define GF_GPUFRAME_OPTIONS_H

#include <getopt.h>
#include <stdint.h>

#include "util.h"

/* Where the daemon listens unless --socket or the environment says otherwise. */
#define SOCKET_ENV     "GPUFRAMED_SOCKET"
#define SOCKET_DEFAULT "/run/gpuframed.sock"
/* How a gpuframe command is pointed at another socket, in connect errors. */
#define SOCKET_HOW_TO_POINT "pass --socket PATH / set " SOCKET_ENV
/* A daemon that sends nothing back for this long is considered hung. */
#define TIMEOUT_MS_DEFAULT 30000

/* A macro's value as a string literal, for the help texts. */
#define STR_(x) #x
#define STR(x)  STR_(x)

/* Options every command takes. */
typedef struct gf_common_opts {
    const char *socket_path; /* --socket, $GPUFRAMED_SOCKET or the default */
    int timeout_ms;          /* per reply; -1 waits for ever              */
} gf_common_opts;

/*
 * getopt_long's values of the options: a short option's character, or one
 * of the long-only ids, distinct across every subcommand.  A short option
 * means one thing in every command (gpuframe --help lists them): its letter
 * is the value of that one option here, so no command can give it to
 * another.  (--watch has none: -w is --window.)
 */
enum {
    OPT_SOCKET = 's',
    OPT_TIMEOUT = 't',
    OPT_HELP = 'h',
    OPT_OUTPUT = 'o',     /* where a command writes: a file, "-" for stdout        */
    OPT_INPUT = 'i',      /* what it reads: a file, "-" for stdin                  */
    OPT_COUNT = 'n',      /* how many frames                                       */
    OPT_PIPELINE = 'p',   /* which pipeline                                        */
    OPT_WINDOW = 'w',     /* frames in flight                                      */
    OPT_QUIET = 'q',      /* only the result                                       */
    OPT_FIRST_LONG = 256, /* long-only options are numbered from here */
    OPT_JSON = OPT_FIRST_LONG,
    OPT_SIZE,
    OPT_VERIFY,
    OPT_SEED,
    OPT_NO_CHECK,
    OPT_SHM,
    OPT_NO_SHM,
    OPT_PROMETHEUS,
    OPT_WATCH,
    OPT_SVG,
    OPT_DEADLINE_MS,
    OPT_LATEST_ONLY,
    OPT_RATE,
    OPT_PRIORITY,
    OPT_START_AT,
    OPT_DEVICE_FRAMES,
};

/* The common options, for a subcommand's getopt_long tables and its help. */
#define COMMON_LONG_OPTIONS                                                                        \
    {"socket", required_argument, NULL, OPT_SOCKET},                                               \
        {"timeout", required_argument, NULL, OPT_TIMEOUT}, {                                       \
        "help", no_argument, NULL, OPT_HELP                                                        \
    }
#define COMMON_SHORT_OPTIONS "s:t:h"

/* Whether a --input or --output argument names standard input or output. */
#define IS_STDIO(path) ((path)[0] == '-' && (path)[1] == '\0')

#define COMMON_HELP                                                                                \
    "  -s, --socket PATH       the daemon's socket (default: $" SOCKET_ENV ", else\n"              \
    "                          " SOCKET_DEFAULT ")\n"                                              \
    "  -t, --timeout MS        wait at most MS milliseconds for each reply (default " STR(         \
        TIMEOUT_MS_DEFAULT) ";\n"                                                                  \
                            "                          0: for ever)\n"                             \
                            "  -h, --help              print this help\n"

/* Prints "gpuframe CMD: <message>" (just "gpuframe" when `cmd` is NULL) and
 * a pointer to --help; exits with EXIT_USAGE. */
void gf_die_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the common options' defaults: the socket from $GPUFRAMED_SOCKET,
 * else SOCKET_DEFAULT; TIMEOUT_MS_DEFAULT. */
void gf_common_defaults(gf_common_opts *o);

/*
 * Handles an option every command shares, and getopt's errors.  Returns 1
 * when `opt` was handled, 0 when it is the command's own; exits on errors and
 * after --help (printing `help`).
 */
int gf_common_option(const char *cmd, int opt, gf_common_opts *o, char *const argv[],
                     const char *help);

/* Rejects positional arguments left after the options. */
void gf_no_operands(const char *cmd, int argc, char *const argv[]);

#endif

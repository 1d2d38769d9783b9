/* SPDX-License-Identifier: MIT */
/*
 * Reading JSON with key-path problems, for the LIST reply (listing.c), the
 * pipelines' stages and parameters in it (stages_json.c, params_json.c) and
 * the daemon's configuration file (daemon/config.c).
 *
 * Every value read is validated: types, ranges, unknown and duplicate keys.
 * Each problem is one line that starts with the key path it concerns
 * ("pipelines[1].kind") and says what was expected and what was got.  Strings
 * quoted in problems are escaped and truncated, so a hostile file or peer
 * cannot put a newline or a megabyte into a log line.
 */
#ifndef GF_JSON_READ_H
#define GF_JSON_READ_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "pipeline.h"

/* Room for one key path ("pipelines[255] (<63 chars>).params.<quoted key>")
 * and for one quoted or described value. */
#define GF_PATH_BYTES       256
#define GF_VALUE_TEXT_BYTES 128
/* Room for one "(known: ...)" list of kinds or keys. */
#define GF_KNOWN_LIST_BYTES 768

/*
 * Where a parse reports its problems.  In "first" mode buf gets the first
 * problem alone, without a newline (gf_config_parse's one-line err); in
 * "all" mode every problem is appended as one line ending in '\n', as long
 * as whole lines fit.  Either way every problem is counted.
 */
typedef struct gf_problems {
    char *buf;          /* NULL or buf[cap]: the text, NUL-terminated       */
    size_t cap;         /* its size                                          */
    size_t used;        /* "all" mode: bytes of lines in buf                 */
    size_t count;       /* problems found, whether kept in buf or not        */
    size_t kept_count;  /* of them, those whose line is in buf               */
    int all;            /* 0: keep the first only                            */
    const char *prefix; /* put with ": " in front of each line, or NULL      */
} gf_problems;

/* Starts an empty report into buf[cap] (buf may be NULL: count only). */
void gf_problems_init(gf_problems *pr, char *buf, size_t cap, int all, const char *prefix);

/* Reports one problem: a line that starts with the key path it concerns. */
void gf_problem(gf_problems *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Describes a JSON value (NULL: "nothing") for the "got ..." half of a
 * problem: numbers as written, strings quoted, other types named. */
void gf_json_describe(const cJSON *v, char *buf, size_t len);

/* The index of `name` among names[count], or -1. */
int gf_json_name_index(const char *const *names, size_t count, const char *name);

/* Parses `json` as one JSON document with nothing after it.  Returns the
 * tree (the caller cJSON_Deletes it) or NULL with a problem reported, which
 * starts with `what` and gives the line and column of a syntax error. */
cJSON *gf_json_parse_document(const char *what, const char *json, gf_problems *pr);

/*
 * Files each member of the object `obj` under its index in names[count] into
 * items[] (which the caller zeroed).  An unknown key is a problem unless
 * `allow_unknown`; a repeated known key always is (its first value is the one
 * filed).  Reports every such key and returns -1 if there was one, else 0.
 */
int gf_json_collect_keys(const cJSON *obj, const char *prefix, const char *const *names,
                         size_t count, int allow_unknown, const cJSON **items, gf_problems *pr);

/* Reads an integer in [min, max] (both within 2^53) from `v` into *out.
 * Returns 0, or -1 with "<path>: expected an integer in [min, max], got ..."
 * reported. */
int gf_json_read_integer(const cJSON *v, const char *path, double min, double max, double *out,
                         gf_problems *pr);

/*
 * Reads a number into a float32 and checks the value stored, not the text,
 * against [min, max]: what is stored lies in the range (as the kind's own
 * check_params sees it) and reads back unchanged from the LIST reply.
 * Returns 0, or -1 with "<path>: expected a number in [min, max], got ..."
 * reported.
 */
int gf_json_read_f32(const cJSON *v, const char *path, double min, double max, float *out,
                     gf_problems *pr);

/* Reads one of the strings names[count] from `v`.  Returns its index, or -1
 * with "<path>: expected one of \"a\", \"b\", got ..." reported. */
int gf_json_read_choice(const cJSON *v, const char *path, const char *const *names, size_t count,
                        gf_problems *pr);

/* Reads a pipeline name (1 to GF_PIPELINE_NAME_MAX-1 characters of
 * [A-Za-z0-9_.-]) into dst[GF_PIPELINE_NAME_MAX] and checks that none of the
 * `count` pipelines before[] has it.  Returns 0 or -1 with a problem. */
int gf_json_read_pipeline_name(const cJSON *v, const char *path, const gf_pipeline *before,
                               size_t count, char *dst, gf_problems *pr);

/* The kind named by `v`, or NULL with a problem that lists the known kinds. */
const gf_pipeline_kind *gf_json_read_kind(const cJSON *v, const char *path, gf_problems *pr);

/* ---- for the other readers of protocol/ ------------------------------------ */

/* Writes "<prefix>.<key>" (or just "<key>" for an empty prefix) into
 * buf[len], quoting a key that is not a plain identifier. */
void gf_json_key_path(const char *prefix, const char *key, char *buf, size_t len);

/* Joins `names[count]` with ", " into buf[len]; "..." marks a cut. */
void gf_json_join_names(const char *const *names, size_t count, char *buf, size_t len);

#endif

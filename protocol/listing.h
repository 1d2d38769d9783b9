/*
 * The LIST reply's codec, shared by daemon and client: configured pipelines to
 * JSON and back, and the JSON readers behind it, which also read the daemon's
 * configuration file (daemon/config.c).
 *
 * Every value read is validated: types, ranges, unknown and duplicate keys.
 * Each problem is one line that starts with the key path it concerns
 * ("pipelines[1].kind") and says what was expected and what was got.  Strings
 * quoted in problems are escaped and truncated, so a hostile file or peer
 * cannot put a newline or a megabyte into a log line.
 *
 * The gflisting library: gfprotocol, the pipeline registry and cJSON; no
 * libuv and no daemon code, so the client links it alone.
 */
#ifndef GF_LISTING_H
#define GF_LISTING_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "pipeline.h"

#define GF_MAX_PIPELINES 256
/* Room for one key path ("pipelines[255] (<63 chars>).params.<quoted key>")
 * and for one quoted or described value. */
#define GF_PATH_BYTES       256
#define GF_VALUE_TEXT_BYTES 128
/* Room for one "(known: ...)" list of kinds or keys. */
#define GF_KNOWN_LIST_BYTES 512

/* ---- the LIST reply --------------------------------------------------------- */

/*
 * Reads `kind`'s parameters from the JSON object `obj` (NULL: all defaults)
 * into `*out`.  Absent keys take their defaults; unknown keys, wrong types and
 * out-of-range values are errors named as "<prefix>.<key>: ...".  Returns 0
 * or -1 with the reason in err[err_len].
 */
int gf_params_from_json(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                        gf_params *out, char *err, size_t err_len);

/*
 * {"<key>": value, ...} with every parameter of `kind`, floats in the
 * shortest text that reads back bit for bit.  Returns a new cJSON tree the
 * caller frees with cJSON_Delete, or NULL when out of memory.
 */
cJSON *gf_params_to_json(const gf_pipeline_kind *kind, const gf_params *p);

/* A stage's parameters as JSON: a built-in kind's (gf_params_to_json), or
 * a plugin stage's "params" object as configured.  NULL when out of memory. */
cJSON *gf_stage_params_to_json(const gf_stage *s);

/*
 * The LIST reply: {"pipelines":[{"id":0,"name":"echo","kind":"echo",
 * "params":{...},"doc":"..."}, ...]}; a plugin stage adds "plugin" (its
 * name), "path" and "config_dir"; a pipeline of several stages has
 * "stages": [{"kind":...,"params":...}, ...] in place of kind and params
 * (protocol/PROTOCOL.md, "LIST").  Returns a new cJSON tree the caller
 * frees with cJSON_Delete, or NULL when out of memory.
 */
cJSON *gf_pipelines_to_json(const gf_pipeline *pipelines, size_t count);

/*
 * Parses a LIST reply back into a malloc'd array the caller frees with
 * gf_pipelines_free().  Plugin stages are left unloaded: see
 * gf_pipeline_open_plugins.  Returns 0, or -1 with the reason in
 * err[err_len].
 */
int gf_pipelines_from_json(const char *json, gf_pipeline **out, size_t *count, char *err,
                           size_t err_len);

/* ---- reading JSON with key-path problems (for daemon/config.c) -------------- */

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

/* The members of a pipeline (or stage) object that say what it runs. */
typedef struct gf_stage_json {
    const cJSON *kind, *params, *path; /* one stage                              */
    const cJSON *config_dir, *plugin; /* a LIST reply's plugin stage             */
    const cJSON *stages;              /* or an array of stage objects            */
    int listed;                       /* from a LIST reply: extra keys allowed   */
} gf_stage_json;

/*
 * Reads what a pipeline runs, either one stage (kind, params and, for kind
 * "plugin", path) or "stages" (1..GF_STAGES_MAX objects of those keys), into
 * p->stages and p->stage_count.  Relative plugin paths are resolved against
 * `config_dir`.  Plugin stages are made unloaded, holding one reference.
 * Returns 0, or -1 with every problem reported as "<prefix>...".
 */
int gf_json_read_stages(const gf_stage_json *j, const char *config_dir, const char *prefix,
                        gf_pipeline *p, gf_problems *pr);

/*
 * Loads every plugin stage of `p` (dlopen, ABI check, parameters read with the
 * plugin's own table, create()), telling each the longest input it can get:
 * max_frame_bytes through the stages before it.  Returns 0, or -1 with one
 * problem naming the stage ("<prefix>.path: cannot load: ...",
 * "<prefix>.params.weights: missing (required: ...)").
 */
int gf_pipeline_open_plugins(gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr);

/*
 * Checks each stage's parameters against the longest input it can get, that
 * every stage but the last can produce an output, and that stage 0's smallest
 * input goes through every stage's length rule.  Returns 0 or -1 with a
 * problem.
 */
int gf_pipeline_check_stages(const gf_pipeline *p, uint64_t max_frame_bytes, const char *prefix,
                             gf_problems *pr);

/* gf_params_from_json, reporting every bad parameter of `obj` to `pr`. */
int gf_params_read(const gf_pipeline_kind *kind, const cJSON *obj, const char *prefix,
                   gf_params *out, gf_problems *pr);

#endif

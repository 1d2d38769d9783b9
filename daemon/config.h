/*
 * Configuration: the daemon's settings and its configured pipelines, read
 * from JSON (config/gpuframed.json documents every key) with cJSON.
 *
 * The LIST reply's codec (gf_pipelines_to_json and back) is protocol/listing.h,
 * included here for the daemon's modules.
 */
#ifndef GF_CONFIG_H
#define GF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "listing.h"
#include "log.h" /* enum gf_log_level */
#include "pipeline.h"

/* sun_path's size on Linux: the longest socket path, NUL included. */
#define GF_SOCKET_PATH_MAX 108
/* Bounds on the slot ring: at least ping-pong, at most what one loop serves. */
#define GF_SLOTS_MIN     1
#define GF_SLOTS_MAX     64
#define GF_SLOTS_DEFAULT 2
/* Bounds on one frame's payload. */
#define GF_MAX_FRAME_BYTES_LIMIT (1ull << 32)

enum gf_engine_choice { GF_ENGINE_AUTO, GF_ENGINE_CUDA, GF_ENGINE_CPU };

typedef struct gf_config {
    char socket_path[GF_SOCKET_PATH_MAX]; /* where the daemon listens          */
    enum gf_engine_choice engine;         /* auto | cuda | cpu                 */
    uint32_t slot_count;                  /* frames in flight at once          */
    uint64_t max_frame_bytes;             /* largest FRAME payload accepted    */
    uint32_t frame_timeout_ms;            /* deadline of a frame on the engine */
    enum gf_log_level log_level;
    uint32_t drain_timeout_ms; /* graceful stop's limit             */
    uint64_t max_pinned_bytes; /* cap on pinned memory; 0: RAM / 4  */
    int timing_events;         /* record CUDA events per stage      */
    uint32_t trace_frames;     /* frames kept for TRACE; 0: none    */
    gf_pipeline *pipelines;    /* owned; ids are their indices      */
    size_t pipeline_count;
} gf_config;

/*
 * Command-line settings that replace the file's (gpuframed's flags).  They
 * are applied before anything that depends on them is checked, so a flag can
 * make a file valid (a larger --max-frame-bytes for a big image) or not.
 */
typedef struct gf_config_overrides {
    const char *socket_path; /* --socket, or NULL */
    int has_engine;          /* --engine given    */
    enum gf_engine_choice engine;
    int has_log_level; /* --log-level given */
    enum gf_log_level log_level;
    int has_slots; /* --slots given */
    uint32_t slot_count;
    int has_max_frame_bytes; /* --max-frame-bytes given */
    uint64_t max_frame_bytes;
} gf_config_overrides;

/* The configuration compiled into the daemon: config/gpuframed.json. */
extern const char gf_default_config_json[];

/*
 * Parses `json` into `*out`, replacing whatever it held.  Returns 0, or -1
 * with one line in err[err_len] that names the offending key and what was
 * expected ("slots: expected an integer in [1, 64], got 0").  Unknown keys
 * are errors.  On failure `*out` is left empty (safe to gf_config_free).
 */
int gf_config_parse(const char *json, gf_config *out, char *err, size_t err_len);

/* Reads the file at `path` and parses it as gf_config_parse does; errors
 * start with the path. */
int gf_config_load_file(const char *path, gf_config *out, char *err, size_t err_len);

/*
 * As gf_config_parse, but every problem is reported, not only the first:
 * errs[errs_len] gets one line per problem, each ending in '\n' and naming
 * its key, as many whole lines as fit; `*problem_count` (may be NULL) gets how
 * many problems there were, also those that did not fit.  Returns 0 (errs "",
 * count 0) or -1.  On failure `*out` is left empty.
 */
int gf_config_parse_all(const char *json, gf_config *out, char *errs, size_t errs_len,
                        size_t *problem_count);

/*
 * What the daemon runs on: the file at `path` (NULL: the built-in
 * configuration) with `flags` (may be NULL) applied, every problem reported
 * as gf_config_parse_all does, each line prefixed with the path (or "built-in
 * configuration").
 */
int gf_config_load(const char *path, const gf_config_overrides *flags, gf_config *out, char *errs,
                   size_t errs_len, size_t *problem_count);

/*
 * Names, in buf[len], every setting that differs from `from` to `to`, with
 * both values: "log_level info -> debug, pipelines[1] (affine).params
 * {\"a\":2,\"b\":0.5} -> {\"a\":3,\"b\":-1}".  "" when they are the same;
 * "..." ends a list that does not fit.
 */
void gf_config_describe_changes(const gf_config *from, const gf_config *to, char *buf, size_t len);

/* The largest result any configured pipeline makes from a frame of at most
 * max_frame_bytes: the size of every slot's output buffer. */
uint64_t gf_config_max_output_bytes(const gf_config *cfg);

/* Pinned host memory the slots need: slots * (max_frame_bytes + output). */
uint64_t gf_config_pinned_bytes(const gf_config *cfg);

/* Frees what `cfg` owns and empties it.  Safe on an empty config. */
void gf_config_free(gf_config *cfg);

/* "auto", "cuda", "cpu" <-> enum; parse returns -1 for anything else. */
int gf_engine_choice_parse(const char *s, enum gf_engine_choice *out);
const char *gf_engine_choice_name(enum gf_engine_choice e);
int gf_log_level_parse(const char *s, enum gf_log_level *out);

#endif

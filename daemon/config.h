/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the daemon's settings and its configured pipelines, read
 * from JSON (config/gpuframed.json documents every key) with cJSON.
 *
 * The LIST reply's codec (gf_pipelines_to_json and back) is protocol/listing.h,
 * included here for the daemon's modules.
 *
 * Any thread: each function works on the configurations it is given (a
 * reload loads one on a thread of its own and checks it on the control
 * loop's thread pool, reload.h; the shards only read theirs).
 */
#ifndef GF_CONFIG_H
#define GF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "listing.h"
#include "log.h" /* enum gf_log_level */
#include "pipeline.h"
#include "protocol.h" /* enum gf_priority_class */

/* sun_path's size on Linux: the longest socket path, NUL included. */
#define GF_SOCKET_PATH_MAX 108
/* Bounds on the slot ring: at least ping-pong, at most what one loop serves. */
#define GF_SLOTS_MIN     1
#define GF_SLOTS_MAX     64
#define GF_SLOTS_DEFAULT 2
/* Shards: loops, each on its own thread with its own slots (shards.h).
 * 0 in the configuration: chosen at start (config/README.md, "shards"). */
#define GF_SHARDS_MAX 64
/* A device's shards run one pipeline's batches together in groups of
 * pool_shards (pool.h); 0 or 1: each shard alone. */
#define GF_POOL_SHARDS_MAX     GF_SHARDS_MAX
#define GF_POOL_SHARDS_DEFAULT 0
/* CUDA devices a daemon can drive; "devices" names them by ordinal. */
#define GF_DEVICES_MAX      16
#define GF_DEVICES_TEXT_MAX 64
/* "shard_cpus": "auto", "none" or a CPU list (numa.h). */
#define GF_SHARD_CPUS_TEXT_MAX 256
/* "socket_group" and "user": a name of up to 32 bytes (useradd's limit) or
 * an id in digits, and the NUL. */
#define GF_ACCOUNT_TEXT_MAX 33
/* Bounds on one frame's payload. */
#define GF_MAX_FRAME_BYTES_LIMIT (1ull << 32)

enum gf_engine_choice { GF_ENGINE_AUTO, GF_ENGINE_CUDA, GF_ENGINE_CPU };

/* How the loop learns that the GPU finished a frame (config/README.md). */
enum gf_completion_mode {
    GF_COMPLETION_HOST_FUNC, /* cudaLaunchHostFunc wakes the loop: no CPU while waiting */
    GF_COMPLETION_POLL,      /* the loop polls each frame's event: lowest latency, one
                                core busy while frames are in flight                 */
    GF_COMPLETION_HYBRID,    /* polls each submission's event for a window after its
                                launches, then leaves the rest to a host function    */
};
/* completion = hybrid: how long the loop polls a submission before it hands
 * it to a host function and may sleep, at least.  A batch of small frames
 * takes 10-25 µs on an H200, so this window catches it, and bounds what a
 * long frame costs in spinning (docs/design.md, "Small frames"). */
#define GF_COMPLETION_SPIN_NS 50000ull
/* completion = hybrid: the longest window.  A shard whose submissions have
 * lately taken the GPU longer than GF_COMPLETION_SPIN_NS, but at most this
 * (less a quarter), polls each for as long as they took and a quarter more:
 * under load a batch's tail is the other streams' work ahead of it, and a
 * host function for every submission is what limits the shards then (the
 * driver may run those of all streams one at a time, and measurably did:
 * config/README.md, "completion").
 * Longer work goes to a host function after GF_COMPLETION_SPIN_NS. */
#define GF_COMPLETION_SPIN_MAX_NS 500000ull

/* Ids that "allow" lets connect, resolved from names at load; a connection
 * is allowed when its uid or one of its groups is listed (config_allow.c). */
#define GF_ALLOW_MAX 32
typedef struct gf_allow {
    int set; /* 0: everyone the socket's mode lets in */
    uint32_t uid_count, gid_count;
    uint32_t uids[GF_ALLOW_MAX], gids[GF_ALLOW_MAX];
} gf_allow;

/* Nonzero when `a` lets in a peer of `uid` in the groups gids[gid_count]. */
int gf_allow_permits(const gf_allow *a, uint32_t uid, const uint32_t *gids, size_t gid_count);

/* "uid 1000, gid 44", or "everyone", for logs. */
void gf_allow_describe(const gf_allow *a, char *buf, size_t len);

/* "priorities": who is in each class (config_priorities.c), by uid or any
 * of its groups; a connection in none has `default_class`.  That class is
 * also the highest its frames may name (GF_FLAG_CLASS_MASK). */
typedef struct gf_priorities {
    gf_allow members[GF_CLASS_COUNT_]; /* by class; [GF_CLASS_DEFAULT] unused */
    int default_class;                 /* GF_CLASS_REALTIME .. GF_CLASS_BATCH */
} gf_priorities;

/* The class of a frame that names `asked` (GF_CLASS_DEFAULT: none) from a
 * peer of `uid` and primary group `gid`: the class its credentials give,
 * or the one it asks for when that is lower.  Never GF_CLASS_DEFAULT. */
unsigned gf_priority_of(const gf_priorities *p, uint32_t uid, uint32_t gid, unsigned asked);

/* "realtime: uid 1000; batch: gid 44; default normal", for logs. */
void gf_priorities_describe(const gf_priorities *p, char *buf, size_t len);

typedef struct gf_config {
    char socket_path[GF_SOCKET_PATH_MAX];    /* where the daemon listens          */
    uint32_t socket_mode;                    /* its permission bits, e.g. 0660    */
    char socket_group[GF_ACCOUNT_TEXT_MAX];  /* its group; "": the daemon's own   */
    char user[GF_ACCOUNT_TEXT_MAX];          /* who the daemon runs as once the
                                                socket is bound; "": as started   */
    gf_allow allow;                          /* who may connect                   */
    gf_priorities priorities;                /* whose frames go first             */
    enum gf_engine_choice engine;            /* auto | cuda | cpu                 */
    uint32_t slot_count;                     /* frames in flight at once, per shard */
    uint32_t shards;                         /* loops on their own threads; 0: auto */
    char devices[GF_DEVICES_TEXT_MAX];       /* "all", or CUDA ordinals "0,2"     */
    char shard_cpus[GF_SHARD_CPUS_TEXT_MAX]; /* where shard threads run: "auto"
                                                (their device's CPUs), "none", or
                                                a CPU list (numa.h)             */
    uint64_t max_frame_bytes;                /* largest FRAME payload accepted    */
    uint32_t frame_timeout_ms;               /* deadline of a frame on the engine */
    uint32_t request_timeout_ms;             /* a begun request must be in by then  */
    uint32_t receive_stall_ms;               /* a payload read in place must not pause
                                                this long while others wait          */
    uint32_t write_timeout_ms;               /* a reply must make progress by then  */
    uint32_t idle_timeout_ms;                /* idle connections close; 0: never    */
    enum gf_log_level log_level;
    uint32_t drain_timeout_ms;          /* graceful stop's limit             */
    uint64_t max_pinned_bytes;          /* cap on pinned memory; 0: RAM / 4  */
    int timing_events;                  /* record CUDA events per stage      */
    uint32_t timing_sample_every;       /* of those, time one frame in N  */
    enum gf_completion_mode completion; /* host_func | poll         */
    uint64_t zero_copy_max_bytes;       /* batches this small skip the copies */
    int cuda_graphs;                    /* replay batches from CUDA graphs   */
    uint32_t pool_shards;               /* a device's shards, in groups of this
                                           many, run one pipeline's batches
                                           together (pool.h); 0, 1: alone     */
    uint32_t trace_frames;              /* frames kept for TRACE; 0: none    */
    uint32_t max_connections;           /* more are refused at accept        */
    uint64_t max_output_bytes;          /* unwritten LIST/STATS/TRACE/ERROR reply
                                           bytes one connection may have       */
    uint64_t max_output_bytes_total;    /* the same, all connections together */
    uint64_t max_input_bytes_total;     /* payloads arriving slowly, held in
                                           memory rather than in slots, all
                                           connections together; 0: never   */
    uint32_t max_regions;               /* shm regions one connection holds  */
    uint64_t max_shm_bytes;             /* all regions' bytes; 0: RAM / 4    */
    uint64_t max_device_region_bytes;   /* all device regions' bytes; 0: a quarter
                                           of the region's device's memory   */
    gf_pipeline *pipelines;             /* owned; ids are their indices      */
    size_t pipeline_count;
} gf_config;

/* How a top-level key is written in the file and stored in gf_config. */
enum gf_config_type {
    GF_CONFIG_INTEGER,    /* a whole number in [min, max]; a uint32_t or uint64_t field */
    GF_CONFIG_BOOL,       /* true or false; an int field, 0 or 1                         */
    GF_CONFIG_PATH,       /* a string of min to max bytes; a char[size] field            */
    GF_CONFIG_ACCOUNT,    /* a user or group: a name, or an id in digits, of at most max
                             bytes; a char[size] field, "" when not set              */
    GF_CONFIG_CHOICE,     /* one of choices[]; an enum field holding the index           */
    GF_CONFIG_MODE,       /* file permission bits as an octal string ("0660"), at most
                             max; a uint32_t field                                     */
    GF_CONFIG_ALLOW,      /* the "allow" object of users, groups, uids, gids; a gf_allow */
    GF_CONFIG_PRIORITIES, /* the "priorities" object: classes of such; a gf_priorities  */
    GF_CONFIG_PIPELINES,  /* the pipelines array, read by its own code                   */
};

/* What a SIGHUP reload does with a changed key. */
enum gf_config_reload {
    GF_RELOAD_APPLIES,       /* the new value applies at once                    */
    GF_RELOAD_NEEDS_RESTART, /* the running value stays; the log says so        */
    GF_RELOAD_PARAMS,        /* pipelines: the new ones apply (added, removed,
                                changed) unless they need larger slot buffers
                                than the daemon started with                    */
};

/*
 * One top-level key of the configuration file: the one place that says how it
 * is parsed, defaulted, overridden on the command line, described on reload
 * and whether a reload can change it (as gf_param_desc does for a kind's
 * parameters).  config/README.md documents every key; a test checks both
 * name the same keys.
 */
typedef struct gf_config_key {
    const char *key; /* "slots"                                       */
    enum gf_config_type type;
    size_t offset, size;        /* offsetof(gf_config, field), its size           */
    double min, max;            /* integer range; a path's length range in bytes  */
    double default_value;       /* integer, bool (0/1) or the choice's index      */
    const char *default_text;   /* a path's default                               */
    const char *const *choices; /* a choice's names (a bool's: "false", "true")   */
    size_t choice_count;
    enum gf_config_reload reload;
    const char *doc; /* one line                                                   */
} gf_config_key;

/* Every top-level key, in a static array of *count entries, in the file's
 * documented order. */
const gf_config_key *gf_config_keys(size_t *count);

/* The key called `key`, or NULL. */
const gf_config_key *gf_config_key_find(const char *key);

/*
 * Command-line settings that replace the file's (gpuframed's flags).  They
 * are applied before anything that depends on them is checked, so a flag can
 * make a file valid (a larger --max-frame-bytes for a big image) or not.
 * Zero it, then set keys with gf_config_override.
 */
typedef struct gf_config_overrides {
    gf_config values; /* each given key's value, in its own field (no pipelines) */
    uint64_t given;   /* bit i: gf_config_keys()[i] was given                    */
} gf_config_overrides;

/*
 * Sets `key` in `flags` from the text `text` ("4", "cpu", "true", a path),
 * with the range checks the file gets.  Returns 0, or -1 with the reason,
 * without the key's name, in err[err_len] ("expected an integer in [1, 64],
 * got '0'"; "expected auto, cuda or cpu, got 'gpu'").  The pipelines cannot
 * be set this way.
 */
int gf_config_override(gf_config_overrides *flags, const char *key, const char *text, char *err,
                       size_t err_len);

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
 * gf_config_load without the pipelines, which it neither reads nor checks
 * (no plugin is loaded, `out` has none): what start-up needs before it binds
 * the socket and becomes "user" (main.c), so that the pipelines' plugins are
 * loaded by the user that will reload them.
 */
int gf_config_load_keys(const char *path, const gf_config_overrides *flags, gf_config *out,
                        char *errs, size_t errs_len, size_t *problem_count);

/*
 * Names, in buf[len], every setting that differs from `from` to `to`, with
 * both values: "log_level info -> debug, pipelines[1] (affine).params
 * {\"a\":2,\"b\":0.5} -> {\"a\":3,\"b\":-1}".  "" when they are the same;
 * "..." ends a list that does not fit.
 */
void gf_config_describe_changes(const gf_config *from, const gf_config *to, char *buf, size_t len);

/*
 * For SIGHUP: for every key the table marks GF_RELOAD_NEEDS_RESTART whose
 * value differs, puts `running`'s value back into `next` and appends
 * "<key> <running> -> <next>" to the note.  Pipelines may be added, removed,
 * renamed and changed by a reload; the checks against the slots' allocated
 * sizes are the shards'.  note[note_len] must hold a string ("" to start);
 * items are appended with gf_config_note_restart, e.g. "needs a restart:
 * slots 2 -> 4, trace_frames 4096 -> 16".  Returns 0.
 */
int gf_config_keep_restart_keys(const gf_config *running, gf_config *next, char *note,
                                size_t note_len);

/* For a reload whose own pipelines cannot run (reload_check.h): frees
 * `next`'s pipelines and gives it a copy of `running`'s, each plugin stage
 * gaining a reference (atomic: frames on the shards hold them too).  Any
 * thread.  Returns 0, or -ENOMEM with `next` left without pipelines. */
int gf_config_keep_pipelines(const gf_config *running, gf_config *next);

/* Appends one item to a reload's note in note[len], which holds a string:
 * "needs a restart: " before the first, ", " before the others; "..." ends
 * a note that is full. */
void gf_config_note_restart(char *note, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A slot's batch (slots.h): at most GF_BATCH_FRAMES_MAX frames, whole
 * ones: payloads of at most GF_BATCH_FRAME_BYTES are taken whole into a
 * connection's buffer first (conn.h), larger ones of a pipeline that
 * batches into memory of the connection's own while its batches run
 * (admit.h), up to GF_BATCH_JOIN_BYTES. */
#define GF_BATCH_FRAMES_MAX  64u
#define GF_BATCH_FRAME_BYTES 16384u
/* The largest payload read through the socket that joins a batch; a
 * larger one is read into a slot of its own: its copy out of the
 * connection's memory (tens of us a MiB) would cost more than a shared
 * submission saves it. */
#define GF_BATCH_JOIN_BYTES (1024u * 1024)
/* The most a pipeline's max_batch_delay_us may be: a batch that waits
 * longer is a queue, not a batch. */
#define GF_BATCH_DELAY_US_MAX 100000u
/* A pipeline's max_batch_delay_us when the file says "auto": the wait
 * follows from measured cost and arrivals (batch_delay.h). */
#define GF_BATCH_DELAY_AUTO UINT32_MAX

/*
 * The size of every slot's output buffer: the largest result any configured
 * pipeline makes from a frame of at most max_frame_bytes, or what a full
 * batch needs, whichever is more: of frames of the one length a pipeline's
 * input takes (an image, a model's tensors), as many as the input buffer
 * holds, else of small frames (GF_BATCH_FRAME_BYTES).  A batch's frames lie at
 * one offset in every buffer of the slot, each as far from the last as its
 * largest length (input, result or intermediate), so a pipeline whose
 * result is much smaller than its input (a classifier) needs an output
 * buffer as long as the inputs for its batch to fill a slot: sized for the
 * largest frame alone, the MLP's batches stopped at 4 frames, and a chain
 * whose intermediate is larger than its input (normalize_u8 -> mlp) at 1.
 */
uint64_t gf_config_max_output_bytes(const gf_config *cfg);

/* The same for each of a slot's two scratch buffers, which hold the
 * intermediate results of pipelines of several stages (0: none). */
uint64_t gf_config_max_scratch_bytes(const gf_config *cfg);

/* The id that pipeline `name`, id `id` when a frame was admitted, has in
 * `cfg`: `id` while it names it still, else found by name (a reload
 * renumbered the pipelines); cfg->pipeline_count when none has that name. */
uint32_t gf_config_pipeline_id(const gf_config *cfg, uint32_t id, const char *name);

/* Pinned host memory the slots of `shards` shards need: shards * slots *
 * (max_frame_bytes + output).  gf_config_pinned_bytes counts the configured
 * shards (auto as 1: the daemon checks again once it has chosen). */
uint64_t gf_config_pinned_bytes_for(const gf_config *cfg, uint32_t shards);
uint64_t gf_config_pinned_bytes(const gf_config *cfg);

/* 0 when the slots of `shards` shards fit max_pinned_bytes; else -1 with the
 * problem, naming the keys to change, in why[why_len]. */
int gf_config_check_pinned(const gf_config *cfg, uint32_t shards, char *why, size_t why_len);

/*
 * The CUDA devices "devices" names, in out[GF_DEVICES_MAX]: returns how many
 * (0: "all", every visible device), or -1 with the problem in why[why_len]
 * (not "all" nor comma-separated ordinals below GF_DEVICES_MAX, or one named
 * twice).
 */
int gf_config_devices(const gf_config *cfg, int out[GF_DEVICES_MAX], char *why, size_t why_len);

/* The same for any such text, a pipeline's "devices" too; `key` names it in
 * the problem. */
int gf_devices_parse(const char *text, const char *key, int out[GF_DEVICES_MAX], char *why,
                     size_t why_len);

/* A mask of devices (gf_pipeline.devices) as "0,2", into buf[len]. */
void gf_devices_format(uint32_t mask, char *buf, size_t len);

/* max_shm_bytes, or a quarter of physical memory when it is 0. */
uint64_t gf_config_shm_cap(const gf_config *cfg);

/* max_device_region_bytes, or a quarter of `device_memory_bytes` (the
 * memory of the device that serves the region) when it is 0. */
uint64_t gf_config_device_region_cap(const gf_config *cfg, uint64_t device_memory_bytes);

/* Frees what `cfg` owns and empties it.  Safe on an empty config. */
void gf_config_free(gf_config *cfg);

/* "auto", "cuda", "cpu" <-> enum; parse returns -1 for anything else. */
int gf_engine_choice_parse(const char *s, enum gf_engine_choice *out);
const char *gf_engine_choice_name(enum gf_engine_choice e);
int gf_log_level_parse(const char *s, enum gf_log_level *out);

#endif

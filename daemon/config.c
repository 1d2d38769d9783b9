/* SPDX-License-Identifier: MIT */
/*
 * Configuration (config.h is the contract, config/README.md documents every
 * key): the table of top-level keys and its field accessors, reading values
 * from the file and the command line, loading, parsing and freeing a
 * configuration, and the cap on its pinned memory.  Values are read with the
 * JSON readers of protocol/json_read.c, which name the key path of every
 * problem.  The "pipelines" array is config_pipelines.c's, what differs
 * between two configurations config_reload.c's; config_internal.h holds what
 * the three files share.
 */
#include "config_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "account.h"
#include "cpulist.h"
#include "util.h"

/* Defaults of the keys a config file may leave out (config/README.md). */
#define GF_SOCKET_PATH_DEFAULT      "/run/gpuframed.sock"
#define GF_MAX_FRAME_BYTES_DEFAULT  (16ull << 20)
#define GF_FRAME_TIMEOUT_MS_DEFAULT 10000u
/* A frame stuck on the engine for an hour is a hung daemon, not a slow one. */
#define GF_FRAME_TIMEOUT_MS_MAX 3600000u
/* A client has this long to send a request it has begun, and a reply this
 * long to make progress, before the daemon gives up on the connection:
 * long enough for any client on the same host, short enough that a stalled
 * one cannot hold a slot for long (docs/design.md, "What a client gets whatever others do"). */
#define GF_REQUEST_TIMEOUT_MS_DEFAULT 10000u
#define GF_WRITE_TIMEOUT_MS_DEFAULT   10000u
/* A payload that pauses this long while others wait for a slot to receive
 * into is ended (deadline.h): far above the gaps of a client that writes a
 * frame in one go, even on a loaded machine (100 ms, and once 500 ms, cut
 * well-behaved clients of the soak under ASan on 2 busy cores), far below
 * request_timeout_ms. */
#define GF_RECEIVE_STALL_MS_DEFAULT 1000u
#define GF_IDLE_TIMEOUT_MS_MAX      86400000u
#define GF_DRAIN_TIMEOUT_MS_DEFAULT 30000u
#define GF_DRAIN_TIMEOUT_MS_MAX     3600000u
/* One frame in this many is timed: each timed 4 KiB frame costs about as
 * much as two untimed ones (config/README.md), so 1 in 64 keeps the cost of
 * stage timing under 2 %. */
#define GF_TIMING_SAMPLE_EVERY_DEFAULT 64u
#define GF_TIMING_SAMPLE_EVERY_MAX     (1u << 20)
/* Batches whose kernels read and write pinned host memory across the bus
 * rather than copy it to the device and back: up to 64 KiB that saves two
 * copies' fixed costs, beyond it the copy engines are faster (docs/design.md,
 * "Small frames").  The limit only keeps the number sane. */
#define GF_ZERO_COPY_MAX_BYTES_DEFAULT (64u << 10)
#define GF_ZERO_COPY_MAX_BYTES_LIMIT   (1u << 30)
#define GF_TRACE_FRAMES_DEFAULT        4096u
#define GF_TRACE_FRAMES_MAX            (1u << 20)
/* The default cap on pinned memory: this fraction of physical RAM.  Pinned
 * pages cannot be swapped, and RLIMIT_MEMLOCK does not bound CUDA's. */
#define GF_PINNED_RAM_DIVISOR     4u
#define GF_MAX_PINNED_BYTES_LIMIT (1ull << 50)
/* A config file is a few KiB; anything near this is a wrong path. */
#define GF_CONFIG_FILE_MAX_BYTES (1u << 20)
/* Each connection costs an fd and a few KiB; the unit's LimitNOFILE is above. */
#define GF_MAX_CONNECTIONS_DEFAULT 1024u
#define GF_MAX_CONNECTIONS_MAX     (1u << 20)
/* A client needs one region per buffer pool; 16 is plenty, 4096 a typo. */
/* Unwritten replies a connection may have: a few TRACE documents of the
 * default 4096 frames (1.2 MB each); all connections: what a daemon may
 * spend on clients that ask and do not read. */
#define GF_MAX_OUTPUT_BYTES_DEFAULT       (8ull << 20)
#define GF_MAX_OUTPUT_BYTES_TOTAL_DEFAULT (128ull << 20)
#define GF_MAX_OUTPUT_BYTES_LIMIT         (1ull << 40)
/* Payloads that arrive slower than a slot may wait for them move into
 * memory (admit.h): what a daemon may spend on clients that send slowly,
 * 16 frames of the largest default size. */
#define GF_MAX_INPUT_BYTES_TOTAL_DEFAULT (256ull << 20)
#define GF_MAX_REGIONS_DEFAULT           16u
#define GF_MAX_REGIONS_MAX               4096u

/* ---- the table of top-level keys ---------------------------------------------- */

enum top_key {
    K_SOCKET,
    K_SOCKET_MODE,
    K_SOCKET_GROUP,
    K_USER,
    K_ALLOW,
    K_PRIORITIES,
    K_ENGINE,
    K_SLOTS,
    K_SHARDS,
    K_DEVICES,
    K_SHARD_CPUS,
    K_MAX_FRAME_BYTES,
    K_FRAME_TIMEOUT_MS,
    K_REQUEST_TIMEOUT_MS,
    K_RECEIVE_STALL_MS,
    K_WRITE_TIMEOUT_MS,
    K_IDLE_TIMEOUT_MS,
    K_LOG_LEVEL,
    K_DRAIN_TIMEOUT_MS,
    K_MAX_PINNED_BYTES,
    K_TIMING_EVENTS,
    K_TIMING_SAMPLE_EVERY,
    K_COMPLETION,
    K_ZERO_COPY_MAX_BYTES,
    K_CUDA_GRAPHS,
    K_POOL_SHARDS,
    K_TRACE_FRAMES,
    K_MAX_CONNECTIONS,
    K_MAX_OUTPUT_BYTES,
    K_MAX_OUTPUT_BYTES_TOTAL,
    K_MAX_INPUT_BYTES_TOTAL,
    K_MAX_REGIONS,
    K_MAX_SHM_BYTES,
    K_MAX_DEVICE_REGION_BYTES,
    K_PIPELINES,
    K_COUNT_
};
/* gf_config_overrides.given and the masks of bad keys have a bit per key. */
_Static_assert(K_COUNT_ <= 64, "a key mask is a uint64_t");

static const char *const engine_names[] = {"auto", "cuda", "cpu"};
static const char *const log_level_names[] = {"error", "warn", "info", "debug"};
static const char *const completion_names[] = {"host_func", "poll", "hybrid"};
/* A boolean's values are its index in these, as for a choice. */
static const char *const bool_names[] = {"false", "true"};
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define FIELD(f)       offsetof(gf_config, f), sizeof(((gf_config *)0)->f)
#define CHOICES(names) names, ARRAY_LEN(names)

/* In the file's documented order, which "unknown key" problems list; the
 * pipelines come last as they are checked against the values before them. */
static const gf_config_key config_keys[K_COUNT_] = {
    [K_SOCKET] = {"socket", GF_CONFIG_PATH, FIELD(socket_path), 1, GF_SOCKET_PATH_MAX - 1, 0,
                  GF_SOCKET_PATH_DEFAULT, NULL, 0, GF_RELOAD_NEEDS_RESTART,
                  "Path of the Unix socket the daemon listens on."},
    [K_SOCKET_MODE] = {"socket_mode", GF_CONFIG_MODE, FIELD(socket_mode), 0, 0777, 0660, NULL, NULL,
                       0, GF_RELOAD_NEEDS_RESTART,
                       "Permission bits of the socket the daemon binds (octal string)."},
    [K_SOCKET_GROUP] = {"socket_group", GF_CONFIG_ACCOUNT, FIELD(socket_group), 0,
                        GF_ACCOUNT_TEXT_MAX - 1, 0, "", NULL, 0, GF_RELOAD_NEEDS_RESTART,
                        "Group of the socket the daemon binds (a name or gid); \"\": its own."},
    [K_USER] = {"user", GF_CONFIG_ACCOUNT, FIELD(user), 0, GF_ACCOUNT_TEXT_MAX - 1, 0, "", NULL, 0,
                GF_RELOAD_NEEDS_RESTART,
                "Started as root, become this user (a name or uid) once the socket is bound."},
    [K_ALLOW] = {"allow", GF_CONFIG_ALLOW, FIELD(allow), 0, 0, 0, NULL, NULL, 0, GF_RELOAD_APPLIES,
                 "Users, groups, uids and gids that may connect; absent: all."},
    [K_PRIORITIES] = {"priorities", GF_CONFIG_PRIORITIES, FIELD(priorities), 0, 0, 0, NULL, NULL, 0,
                      GF_RELOAD_APPLIES,
                      "Whose frames go first: realtime, normal and batch by user or group."},
    [K_ENGINE] = {"engine", GF_CONFIG_CHOICE, FIELD(engine), 0, 0, GF_ENGINE_AUTO, NULL,
                  CHOICES(engine_names), GF_RELOAD_NEEDS_RESTART,
                  "Which engine runs the pipelines; auto prefers cuda."},
    [K_SLOTS] = {"slots", GF_CONFIG_INTEGER, FIELD(slot_count), GF_SLOTS_MIN, GF_SLOTS_MAX,
                 GF_SLOTS_DEFAULT, NULL, NULL, 0, GF_RELOAD_NEEDS_RESTART,
                 "Frames in flight at once per shard, each with its own buffers and stream."},
    [K_SHARDS] = {"shards", GF_CONFIG_INTEGER, FIELD(shards), 0, GF_SHARDS_MAX, 0, NULL, NULL, 0,
                  GF_RELOAD_NEEDS_RESTART,
                  "Event loops, each on its own thread with its own slots; 0: chosen at start."},
    [K_DEVICES] = {"devices", GF_CONFIG_PATH, FIELD(devices), 1, GF_DEVICES_TEXT_MAX - 1, 0, "all",
                   NULL, 0, GF_RELOAD_NEEDS_RESTART,
                   "CUDA devices the shards run on: \"all\", or ordinals such as \"0,1\"."},
    [K_SHARD_CPUS] = {"shard_cpus", GF_CONFIG_PATH, FIELD(shard_cpus), 1,
                      GF_SHARD_CPUS_TEXT_MAX - 1, 0, "auto", NULL, 0, GF_RELOAD_NEEDS_RESTART,
                      "CPUs of the shards' threads: \"auto\" (their device's), \"none\", or "
                      "a list."},
    [K_MAX_FRAME_BYTES] = {"max_frame_bytes", GF_CONFIG_INTEGER, FIELD(max_frame_bytes), 1,
                           (double)GF_MAX_FRAME_BYTES_LIMIT, (double)GF_MAX_FRAME_BYTES_DEFAULT,
                           NULL, NULL, 0, GF_RELOAD_APPLIES,
                           "Largest FRAME payload accepted (up to the slots' size on reload)."},
    [K_FRAME_TIMEOUT_MS] = {"frame_timeout_ms", GF_CONFIG_INTEGER, FIELD(frame_timeout_ms), 1,
                            GF_FRAME_TIMEOUT_MS_MAX, GF_FRAME_TIMEOUT_MS_DEFAULT, NULL, NULL, 0,
                            GF_RELOAD_APPLIES, "Deadline of one frame on the engine."},
    [K_REQUEST_TIMEOUT_MS] = {"request_timeout_ms", GF_CONFIG_INTEGER, FIELD(request_timeout_ms), 1,
                              GF_FRAME_TIMEOUT_MS_MAX, GF_REQUEST_TIMEOUT_MS_DEFAULT, NULL, NULL, 0,
                              GF_RELOAD_APPLIES,
                              "A request begun must be received within this; else closed."},
    [K_RECEIVE_STALL_MS] = {"receive_stall_ms", GF_CONFIG_INTEGER, FIELD(receive_stall_ms), 1,
                            GF_FRAME_TIMEOUT_MS_MAX, GF_RECEIVE_STALL_MS_DEFAULT, NULL, NULL, 0,
                            GF_RELOAD_APPLIES,
                            "A payload received in place must not pause this long while others "
                            "wait."},
    [K_WRITE_TIMEOUT_MS] = {"write_timeout_ms", GF_CONFIG_INTEGER, FIELD(write_timeout_ms), 1,
                            GF_FRAME_TIMEOUT_MS_MAX, GF_WRITE_TIMEOUT_MS_DEFAULT, NULL, NULL, 0,
                            GF_RELOAD_APPLIES,
                            "A client that reads nothing of its replies for this long is closed."},
    [K_IDLE_TIMEOUT_MS] = {"idle_timeout_ms", GF_CONFIG_INTEGER, FIELD(idle_timeout_ms), 0,
                           GF_IDLE_TIMEOUT_MS_MAX, 0, NULL, NULL, 0, GF_RELOAD_APPLIES,
                           "Close connections idle this long; 0: never."},
    [K_LOG_LEVEL] = {"log_level", GF_CONFIG_CHOICE, FIELD(log_level), 0, 0, GF_LOG_INFO, NULL,
                     CHOICES(log_level_names), GF_RELOAD_APPLIES,
                     "Least severe message written to the log."},
    [K_DRAIN_TIMEOUT_MS] = {"drain_timeout_ms", GF_CONFIG_INTEGER, FIELD(drain_timeout_ms), 1,
                            GF_DRAIN_TIMEOUT_MS_MAX, GF_DRAIN_TIMEOUT_MS_DEFAULT, NULL, NULL, 0,
                            GF_RELOAD_APPLIES, "How long a graceful stop may take."},
    [K_MAX_PINNED_BYTES] = {"max_pinned_bytes", GF_CONFIG_INTEGER, FIELD(max_pinned_bytes), 0,
                            (double)GF_MAX_PINNED_BYTES_LIMIT, 0, NULL, NULL, 0, GF_RELOAD_APPLIES,
                            "Cap on the slots' pinned host memory; 0: a quarter of RAM."},
    [K_TIMING_EVENTS] = {"timing_events", GF_CONFIG_BOOL, FIELD(timing_events), 0, 1, 1, NULL,
                         CHOICES(bool_names), GF_RELOAD_NEEDS_RESTART,
                         "Record CUDA events around each stage of a frame."},
    [K_TIMING_SAMPLE_EVERY] = {"timing_sample_every", GF_CONFIG_INTEGER, FIELD(timing_sample_every),
                               1, GF_TIMING_SAMPLE_EVERY_MAX, GF_TIMING_SAMPLE_EVERY_DEFAULT, NULL,
                               NULL, 0, GF_RELOAD_APPLIES,
                               "With timing_events, time one frame in this many."},
    [K_COMPLETION] = {"completion", GF_CONFIG_CHOICE, FIELD(completion), 0, 0, GF_COMPLETION_HYBRID,
                      NULL, CHOICES(completion_names), GF_RELOAD_NEEDS_RESTART,
                      "How the loop learns a frame is done: hybrid, host_func or poll."},
    [K_ZERO_COPY_MAX_BYTES] = {"zero_copy_max_bytes", GF_CONFIG_INTEGER, FIELD(zero_copy_max_bytes),
                               0, (double)GF_ZERO_COPY_MAX_BYTES_LIMIT,
                               (double)GF_ZERO_COPY_MAX_BYTES_DEFAULT, NULL, NULL, 0,
                               GF_RELOAD_NEEDS_RESTART,
                               "Batches up to this size run their kernels on pinned host memory."},
    [K_CUDA_GRAPHS] = {"cuda_graphs", GF_CONFIG_BOOL, FIELD(cuda_graphs), 0, 1, 1, NULL,
                       CHOICES(bool_names), GF_RELOAD_NEEDS_RESTART,
                       "Replay batches of plugin and multi-stage pipelines from CUDA graphs."},
    [K_POOL_SHARDS] = {"pool_shards", GF_CONFIG_INTEGER, FIELD(pool_shards), 0, GF_POOL_SHARDS_MAX,
                       GF_POOL_SHARDS_DEFAULT, NULL, NULL, 0, GF_RELOAD_APPLIES,
                       "A device's shards, in groups of this many, run a model's batches "
                       "together; 0: each alone."},
    [K_TRACE_FRAMES] = {"trace_frames", GF_CONFIG_INTEGER, FIELD(trace_frames), 0,
                        GF_TRACE_FRAMES_MAX, GF_TRACE_FRAMES_DEFAULT, NULL, NULL, 0,
                        GF_RELOAD_NEEDS_RESTART, "Recent frames whose stage times TRACE keeps."},
    [K_MAX_CONNECTIONS] = {"max_connections", GF_CONFIG_INTEGER, FIELD(max_connections), 1,
                           GF_MAX_CONNECTIONS_MAX, GF_MAX_CONNECTIONS_DEFAULT, NULL, NULL, 0,
                           GF_RELOAD_APPLIES,
                           "Connections served at once; more get too_many_connections."},
    [K_MAX_OUTPUT_BYTES] = {"max_output_bytes", GF_CONFIG_INTEGER, FIELD(max_output_bytes), 1,
                            (double)GF_MAX_OUTPUT_BYTES_LIMIT, (double)GF_MAX_OUTPUT_BYTES_DEFAULT,
                            NULL, NULL, 0, GF_RELOAD_APPLIES,
                            "Unwritten reply bytes a connection may have before it is not read."},
    [K_MAX_OUTPUT_BYTES_TOTAL] = {"max_output_bytes_total", GF_CONFIG_INTEGER,
                                  FIELD(max_output_bytes_total), 1,
                                  (double)GF_MAX_OUTPUT_BYTES_LIMIT,
                                  (double)GF_MAX_OUTPUT_BYTES_TOTAL_DEFAULT, NULL, NULL, 0,
                                  GF_RELOAD_APPLIES, "The same for all connections together."},
    [K_MAX_INPUT_BYTES_TOTAL] =
        {"max_input_bytes_total", GF_CONFIG_INTEGER, FIELD(max_input_bytes_total), 0,
         (double)GF_MAX_OUTPUT_BYTES_LIMIT, (double)GF_MAX_INPUT_BYTES_TOTAL_DEFAULT, NULL, NULL, 0,
         GF_RELOAD_APPLIES, "Memory for payloads that arrive slowly, all connections; 0: none."},
    [K_MAX_REGIONS] = {"max_regions", GF_CONFIG_INTEGER, FIELD(max_regions), 0, GF_MAX_REGIONS_MAX,
                       GF_MAX_REGIONS_DEFAULT, NULL, NULL, 0, GF_RELOAD_APPLIES,
                       "Shared-memory regions one connection may hold; 0: none."},
    [K_MAX_SHM_BYTES] = {"max_shm_bytes", GF_CONFIG_INTEGER, FIELD(max_shm_bytes), 0,
                         (double)GF_MAX_PINNED_BYTES_LIMIT, 0, NULL, NULL, 0, GF_RELOAD_APPLIES,
                         "Cap on all shared-memory regions' bytes; 0: a quarter of RAM."},
    [K_MAX_DEVICE_REGION_BYTES] = {"max_device_region_bytes", GF_CONFIG_INTEGER,
                                   FIELD(max_device_region_bytes), 0,
                                   (double)GF_MAX_PINNED_BYTES_LIMIT, 0, NULL, NULL, 0,
                                   GF_RELOAD_APPLIES,
                                   "Cap on all device regions' bytes; 0: a quarter of the "
                                   "device's memory."},
    [K_PIPELINES] = {"pipelines", GF_CONFIG_PIPELINES, FIELD(pipelines), 1, GF_MAX_PIPELINES, 0,
                     NULL, NULL, 0, GF_RELOAD_PARAMS,
                     "The pipelines clients address by id (array position) or name."},
};

const gf_config_key *gf_config_keys(size_t *count) {
    *count = K_COUNT_;
    return config_keys;
}

const gf_config_key *gf_config_key_find(const char *key) {
    for (size_t i = 0; i < K_COUNT_; i++)
        if (key != NULL && strcmp(config_keys[i].key, key) == 0)
            return &config_keys[i];
    return NULL;
}

uint64_t gf__config_field_get(const gf_config *cfg, const gf_config_key *k) {
    const char *field = (const char *)cfg + k->offset;
    uint64_t u64;
    uint32_t u32;
    int i;

    if (k->type == GF_CONFIG_BOOL || k->type == GF_CONFIG_CHOICE) {
        assert(k->size == sizeof i);
        memcpy(&i, field, sizeof i);
        return (uint64_t)i;
    }
    assert((k->type == GF_CONFIG_INTEGER || k->type == GF_CONFIG_MODE) &&
           (k->size == sizeof u32 || k->size == sizeof u64));
    if (k->size == sizeof u32) {
        memcpy(&u32, field, sizeof u32);
        return u32;
    }
    memcpy(&u64, field, sizeof u64);
    return u64;
}

/* Stores `v` (within the key's range) into an integer, bool or choice key. */
static void field_set(gf_config *cfg, const gf_config_key *k, uint64_t v) {
    char *field = (char *)cfg + k->offset;
    uint32_t u32 = (uint32_t)v;
    int i = (int)v;

    if (k->type == GF_CONFIG_BOOL || k->type == GF_CONFIG_CHOICE)
        memcpy(field, &i, sizeof i);
    else if (k->size == sizeof u32)
        memcpy(field, &u32, sizeof u32);
    else
        memcpy(field, &v, sizeof v);
}

void gf__config_field_copy(gf_config *to, const gf_config *from, const gf_config_key *k) {
    assert(k->type != GF_CONFIG_PIPELINES);
    memcpy((char *)to + k->offset, (const char *)from + k->offset, k->size);
}

/* Every key's default (the pipelines: none). */
static void set_defaults(gf_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < K_COUNT_; i++) {
        const gf_config_key *k = &config_keys[i];
        if (k->type == GF_CONFIG_PATH || k->type == GF_CONFIG_ACCOUNT)
            gf_errorf((char *)cfg + k->offset, k->size, "%s", k->default_text);
        else if (k->type != GF_CONFIG_PIPELINES && k->type != GF_CONFIG_ALLOW &&
                 k->type != GF_CONFIG_PRIORITIES)
            field_set(cfg, k, (uint64_t)k->default_value);
        cfg->priorities.default_class = GF_CLASS_NORMAL;
    }
}

int gf_engine_choice_parse(const char *s, enum gf_engine_choice *out) {
    int i = s != NULL ? gf_json_name_index(engine_names, ARRAY_LEN(engine_names), s) : -1;

    if (i < 0)
        return -1;
    *out = (enum gf_engine_choice)i;
    return 0;
}

const char *gf_engine_choice_name(enum gf_engine_choice e) {
    if ((unsigned)e >= ARRAY_LEN(engine_names))
        return "unknown";
    return engine_names[e];
}

int gf_log_level_parse(const char *s, enum gf_log_level *out) {
    int i = s != NULL ? gf_json_name_index(log_level_names, ARRAY_LEN(log_level_names), s) : -1;

    if (i < 0)
        return -1;
    *out = (enum gf_log_level)i;
    return 0;
}

/* ---- reading values: from the file and from the command line ------------------ */

/* Parses octal permission bits ("0660", "660") of at most `max`. */
static int parse_mode(const char *s, double max, uint64_t *out) {
    uint64_t v = 0;
    size_t n = strlen(s);
    if (n == 0 || n > 4)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -1;
        v = v * 8 + (uint64_t)(s[i] - '0');
    }
    if ((double)v > max)
        return -1;
    *out = v;
    return 0;
}

/* What an account key names: "user" a user, "socket_group" a group. */
static const char *account_kind(const gf_config_key *k) {
    return strcmp(k->key, "user") == 0 ? "user" : "group";
}

static const char *account_id(const gf_config_key *k) {
    return strcmp(k->key, "user") == 0 ? "uid" : "gid";
}

/* Reads key `k` (not the pipelines) from the JSON value `v` into `cfg`.
 * Returns 0, or -1 with "<key>: expected ..., got ..." reported. */
static int read_key(const gf_config_key *k, const cJSON *v, gf_config *cfg, gf_problems *pr) {
    char got[GF_VALUE_TEXT_BYTES];
    double n;
    int i;

    switch (k->type) {
    case GF_CONFIG_INTEGER:
        if (gf_json_read_integer(v, k->key, k->min, k->max, &n, pr) < 0)
            return -1;
        field_set(cfg, k, (uint64_t)n);
        return 0;
    case GF_CONFIG_CHOICE:
        i = gf_json_read_choice(v, k->key, k->choices, k->choice_count, pr);
        if (i < 0)
            return -1;
        field_set(cfg, k, (uint64_t)i);
        return 0;
    case GF_CONFIG_BOOL:
        if (cJSON_IsBool(v)) {
            field_set(cfg, k, cJSON_IsTrue(v) != 0);
            return 0;
        }
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected true or false, got %s", k->key, got);
        return -1;
    case GF_CONFIG_PATH: {
        size_t len = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
        if (len >= k->min && len <= k->max) {
            memcpy((char *)cfg + k->offset, v->valuestring, len + 1);
            return 0;
        }
        if (cJSON_IsString(v))
            gf_errorf(got, sizeof got, "a string of %zu bytes", len);
        else
            gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a path of %.0f to %.0f bytes, got %s", k->key, k->min, k->max,
                   got);
        return -1;
    }
    case GF_CONFIG_MODE: {
        uint64_t mode;
        if (cJSON_IsString(v) && parse_mode(v->valuestring, k->max, &mode) == 0) {
            field_set(cfg, k, mode);
            return 0;
        }
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr,
                   "%s: expected permission bits as an octal string up to \"%04o\", such as "
                   "\"0660\", got %s",
                   k->key, (unsigned)k->max, got);
        return -1;
    }
    case GF_CONFIG_ACCOUNT:
        if (cJSON_IsString(v) && strlen(v->valuestring) <= k->max) {
            memcpy((char *)cfg + k->offset, v->valuestring, strlen(v->valuestring) + 1);
            return 0;
        }
        gf_json_describe(v, got, sizeof got);
        gf_problem(pr, "%s: expected a %s name or %s of at most %.0f bytes, got %s", k->key,
                   account_kind(k), account_id(k), k->max, got);
        return -1;
    case GF_CONFIG_ALLOW: return gf__config_read_allow(v, "allow", &cfg->allow, pr);
    case GF_CONFIG_PRIORITIES: return gf__config_read_priorities(v, &cfg->priorities, pr);
    case GF_CONFIG_PIPELINES: break;
    }
    assert(0 && "the pipelines are read by gf__config_parse_pipelines");
    return -1;
}

/* Whether key `k` counts bytes (max_frame_bytes, ...): its value on the
 * command line may then carry a binary suffix, as the client's sizes do. */
static int counts_bytes(const gf_config_key *k) {
    size_t n = strlen(k->key);
    return n > 6 && strcmp(k->key + n - 6, "_bytes") == 0;
}

/* Parses the command line's text `s` for integer key `k` into a whole
 * number in [min, max]: decimal, with a suffix K, M or G where the key
 * counts bytes. */
static int parse_whole(const gf_config_key *k, const char *s, uint64_t *out) {
    uint64_t v;

    if ((counts_bytes(k) ? gf_parse_size(s, &v) : gf_parse_u64(s, &v)) < 0 || (double)v < k->min ||
        (double)v > k->max)
        return -1;
    *out = v;
    return 0;
}

/* Writes names[count] as "a, b or c" into buf[len]. */
static void or_list(const char *const *names, size_t count, char *buf, size_t len) {
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < count && used < len; i++)
        used += gf_errorf(buf + used, len - used, "%s%s",
                          i == 0           ? ""
                          : i + 1 == count ? " or "
                                           : ", ",
                          names[i]);
}

int gf_config_override(gf_config_overrides *flags, const char *key, const char *text, char *err,
                       size_t err_len) {
    const gf_config_key *k = gf_config_key_find(key);
    char list[GF_KNOWN_LIST_BYTES];
    uint64_t v = 0;
    int i;

    if (k == NULL || k->type == GF_CONFIG_PIPELINES || k->type == GF_CONFIG_ALLOW ||
        k->type == GF_CONFIG_PRIORITIES) {
        gf_errorf(err, err_len, "%s cannot be set from the command line", key);
        return -1;
    }
    switch (k->type) {
    case GF_CONFIG_INTEGER:
        if (parse_whole(k, text, &v) < 0) {
            gf_errorf(err, err_len, "expected an integer in [%.0f, %.0f]%s, got '%s'", k->min,
                      k->max, counts_bytes(k) ? " (bytes; suffixes K, M, G)" : "", text);
            return -1;
        }
        break;
    case GF_CONFIG_BOOL:
    case GF_CONFIG_CHOICE:
        i = gf_json_name_index(k->choices, k->choice_count, text);
        if (i < 0) {
            or_list(k->choices, k->choice_count, list, sizeof list);
            gf_errorf(err, err_len, "expected %s, got '%s'", list, text);
            return -1;
        }
        v = (uint64_t)i;
        break;
    case GF_CONFIG_PATH:
        if (strlen(text) < k->min || strlen(text) > k->max) {
            gf_errorf(err, err_len, "expected a path of %.0f to %.0f bytes", k->min, k->max);
            return -1;
        }
        gf_errorf((char *)&flags->values + k->offset, k->size, "%s", text);
        break;
    case GF_CONFIG_ACCOUNT:
        if (strlen(text) > k->max) {
            gf_errorf(err, err_len, "expected a %s name or %s of at most %.0f bytes",
                      account_kind(k), account_id(k), k->max);
            return -1;
        }
        gf_errorf((char *)&flags->values + k->offset, k->size, "%s", text);
        break;
    case GF_CONFIG_MODE:
        if (parse_mode(text, k->max, &v) < 0) {
            gf_errorf(err, err_len, "expected octal permission bits up to %04o, got '%s'",
                      (unsigned)k->max, text);
            return -1;
        }
        break;
    case GF_CONFIG_ALLOW:
    case GF_CONFIG_PRIORITIES:
    case GF_CONFIG_PIPELINES: return -1;
    }
    if (k->type != GF_CONFIG_PATH && k->type != GF_CONFIG_ACCOUNT)
        field_set(&flags->values, k, v);
    flags->given |= 1ull << (k - config_keys);
    return 0;
}

/* Replaces the file's values with the command line's (already checked). */
static void apply_overrides(gf_config *cfg, const gf_config_overrides *flags) {
    for (size_t i = 0; i < K_COUNT_; i++)
        if (flags->given & (1ull << i))
            gf__config_field_copy(cfg, &flags->values, &config_keys[i]);
}

/* ---- pinned memory ------------------------------------------------------------ */

uint64_t gf_config_pinned_bytes_for(const gf_config *cfg, uint32_t shards) {
    return (uint64_t)(shards ? shards : 1) * cfg->slot_count *
           (cfg->max_frame_bytes + gf_config_max_output_bytes(cfg));
}

uint64_t gf_config_pinned_bytes(const gf_config *cfg) {
    return gf_config_pinned_bytes_for(cfg, cfg->shards);
}

int gf_config_devices(const gf_config *cfg, int out[GF_DEVICES_MAX], char *why, size_t why_len) {
    return gf_devices_parse(cfg->devices, "devices", out, why, why_len);
}

/* A quarter of physical memory: the default cap of pinned memory. */
static uint64_t ram_quarter(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return GF_MAX_PINNED_BYTES_LIMIT;
    return (uint64_t)pages * (uint64_t)page / GF_PINNED_RAM_DIVISOR;
}

/* max_pinned_bytes, or a quarter of physical memory when it is 0. */
static uint64_t pinned_cap(const gf_config *cfg) {
    return cfg->max_pinned_bytes ? cfg->max_pinned_bytes : ram_quarter();
}

uint64_t gf_config_shm_cap(const gf_config *cfg) {
    return cfg->max_shm_bytes ? cfg->max_shm_bytes : ram_quarter();
}

uint64_t gf_config_device_region_cap(const gf_config *cfg, uint64_t device_memory_bytes) {
    return cfg->max_device_region_bytes ? cfg->max_device_region_bytes
                                        : device_memory_bytes / GF_PINNED_RAM_DIVISOR;
}

int gf_config_check_pinned(const gf_config *cfg, uint32_t shards, char *why, size_t why_len) {
    uint64_t want = gf_config_pinned_bytes_for(cfg, shards), cap = pinned_cap(cfg);
    if (want <= cap)
        return 0;
    gf_errorf(why, why_len,
              "max_pinned_bytes: %u shard(s) of %u slots of %llu bytes in and %llu bytes out need "
              "%llu bytes of pinned memory, over the cap of %llu%s; lower shards, slots or "
              "max_frame_bytes, or raise max_pinned_bytes",
              shards ? shards : 1, cfg->slot_count, (unsigned long long)cfg->max_frame_bytes,
              (unsigned long long)gf_config_max_output_bytes(cfg), (unsigned long long)want,
              (unsigned long long)cap, cfg->max_pinned_bytes ? "" : " (1/4 of physical memory)");
    return -1;
}

/* The cross-key checks: pinned memory, the devices' list; and that the
 * socket's group and the user exist here. */
static int check_values(const gf_config *cfg, gf_problems *pr) {
    char why[512];
    int devices[GF_DEVICES_MAX], rc = 0;
    gf_account user;
    uint32_t gid;
    if (cfg->socket_group[0] != '\0' &&
        gf_account_group(cfg->socket_group, &gid, why, sizeof why) < 0) {
        gf_problem(pr, "socket_group: %s", why);
        rc = -1;
    }
    if (cfg->user[0] != '\0' && gf_account_user(cfg->user, &user, why, sizeof why) < 0) {
        gf_problem(pr, "user: %s", why);
        rc = -1;
    }
    if (gf_config_check_pinned(cfg, cfg->shards, why, sizeof why) < 0) {
        gf_problem(pr, "%s", why);
        rc = -1;
    }
    if (gf_config_devices(cfg, devices, why, sizeof why) < 0) {
        gf_problem(pr, "%s", why);
        rc = -1;
    }
    enum gf_cpus_kind cpus_kind;
    gf_cpus cpus;
    if (gf_cpus_setting_parse(cfg->shard_cpus, &cpus_kind, &cpus, why, sizeof why) < 0) {
        gf_problem(pr, "%s", why);
        rc = -1;
    }
    return rc;
}

/* Reads every key of items[] but the pipelines into *cfg, which holds the
 * defaults, reporting every problem.  Returns a mask of the keys whose value
 * was bad (bit i: config_keys[i]). */
static uint64_t read_keys(const cJSON *const *items, gf_config *cfg, gf_problems *pr) {
    uint64_t bad = 0;

    for (size_t i = 0; i < K_COUNT_; i++)
        if (items[i] != NULL && config_keys[i].type != GF_CONFIG_PIPELINES &&
            read_key(&config_keys[i], items[i], cfg, pr) < 0)
            bad |= 1ull << i;
    return bad;
}

/* gf_config_parse with `flags` (may be NULL), reporting every problem to
 * `pr`: a value that is wrong does not hide the next one.  With `keys_only`
 * the pipelines are left out (gf_config_load_keys). */
static int config_parse(const char *json, const gf_config_overrides *flags, const char *config_dir,
                        int keys_only, gf_config *out, gf_problems *pr) {
    const cJSON *items[K_COUNT_] = {0};
    const char *names[K_COUNT_];
    char got[GF_VALUE_TEXT_BYTES];
    size_t first_problem = pr->count;
    uint64_t bad;
    gf_config cfg;
    cJSON *root;

    memset(out, 0, sizeof *out);
    set_defaults(&cfg);
    root = gf_json_parse_document("config", json, pr);
    if (root == NULL)
        goto fail;
    if (!cJSON_IsObject(root)) {
        gf_json_describe(root, got, sizeof got);
        gf_problem(pr, "config: expected a JSON object, got %s", got);
        goto fail_root;
    }
    /* Unknown and duplicate keys are reported; the known ones are still
     * read, in the table's order whatever the file's, so that one run names
     * every problem of the file. */
    for (size_t i = 0; i < K_COUNT_; i++)
        names[i] = config_keys[i].key;
    gf_json_collect_keys(root, "", names, K_COUNT_, 0, items, pr);
    bad = read_keys(items, &cfg, pr);
    if (flags != NULL) {
        apply_overrides(&cfg, flags);
        bad &= ~flags->given;
    }
    if (items[K_PIPELINES] == NULL && !keys_only) {
        gf_problem(pr, "pipelines: missing (required: a non-empty array of pipelines)");
        goto fail_root;
    }
    /* Without a valid max_frame_bytes the kinds' size checks would only
     * repeat that problem. */
    if (!keys_only &&
        gf__config_parse_pipelines(items[K_PIPELINES],
                                   bad & (1ull << K_MAX_FRAME_BYTES) ? 0 : cfg.max_frame_bytes,
                                   config_dir, &cfg.pipelines, &cfg.pipeline_count, pr) < 0)
        goto fail_root;
    /* The cap is checked on values that are all valid, or not at all. */
    if (pr->count > first_problem || check_values(&cfg, pr) < 0) {
        gf_config_free(&cfg);
        goto fail_root;
    }

    cJSON_Delete(root);
    *out = cfg;
    return 0;

fail_root:
    cJSON_Delete(root);
fail:
    return -1;
}

int gf_config_parse(const char *json, gf_config *out, char *err, size_t err_len) {
    gf_problems pr;

    gf_problems_init(&pr, err, err_len, 0, NULL);
    return config_parse(json, NULL, NULL, 0, out, &pr);
}

int gf_config_parse_all(const char *json, gf_config *out, char *errs, size_t errs_len,
                        size_t *problem_count) {
    gf_problems pr;
    int rc;

    gf_problems_init(&pr, errs, errs_len, 1, NULL);
    rc = config_parse(json, NULL, NULL, 0, out, &pr);
    if (problem_count != NULL)
        *problem_count = pr.count;
    return rc;
}

/* gf_config_load (gf_config_load_keys with `keys_only`), reporting every
 * problem to `pr`, each line prefixed with the path. */
static int config_load(const char *path, const gf_config_overrides *flags, int keys_only,
                       gf_config *out, gf_problems *pr) {
    const char *saved_prefix = pr->prefix;
    char *buf = NULL;
    size_t len;
    FILE *f;
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (path == NULL) {
        pr->prefix = "built-in configuration";
        rc = config_parse(gf_default_config_json, flags, NULL, keys_only, out, pr);
        goto out;
    }
    pr->prefix = path;
    /* Only a regular file is opened: a FIFO would wait for a writer. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        gf_problem(pr, "not a regular file; not opened");
        goto out;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        gf_problem(pr, "%s", strerror(errno));
        goto out;
    }
    /* One byte past the limit tells "too large" from "exactly the limit". */
    buf = malloc(GF_CONFIG_FILE_MAX_BYTES + 2);
    if (buf == NULL) {
        gf_problem(pr, "out of memory");
        goto out_file;
    }
    len = fread(buf, 1, GF_CONFIG_FILE_MAX_BYTES + 1, f);
    if (ferror(f)) {
        gf_problem(pr, "read failed: %s", strerror(errno));
        goto out_buf;
    }
    if (len > GF_CONFIG_FILE_MAX_BYTES) {
        gf_problem(pr, "larger than the limit of %u bytes (1 MiB) for a config file",
                   GF_CONFIG_FILE_MAX_BYTES);
        goto out_buf;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        gf_problem(pr, "contains a NUL byte at offset %zu", strlen(buf));
        goto out_buf;
    }
    /* Plugins and the files their parameters name are found relative to
     * the configuration file, whatever the daemon's current directory. */
    char dir[PATH_MAX];
    if (realpath(path, dir) == NULL)
        snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    rc = config_parse(buf, flags, dir, keys_only, out, pr);

out_buf:
    free(buf);
out_file:
    fclose(f);
out:
    pr->prefix = saved_prefix;
    return rc;
}

int gf_config_load_file(const char *path, gf_config *out, char *err, size_t err_len) {
    gf_problems pr;

    gf_problems_init(&pr, err, err_len, 0, NULL);
    return config_load(path, NULL, 0, out, &pr);
}

static int load_reporting_all(const char *path, const gf_config_overrides *flags, int keys_only,
                              gf_config *out, char *errs, size_t errs_len, size_t *problem_count) {
    gf_problems pr;
    int rc;

    gf_problems_init(&pr, errs, errs_len, 1, NULL);
    rc = config_load(path, flags, keys_only, out, &pr);
    if (problem_count != NULL)
        *problem_count = pr.count;
    return rc;
}

int gf_config_load(const char *path, const gf_config_overrides *flags, gf_config *out, char *errs,
                   size_t errs_len, size_t *problem_count) {
    return load_reporting_all(path, flags, 0, out, errs, errs_len, problem_count);
}

int gf_config_load_keys(const char *path, const gf_config_overrides *flags, gf_config *out,
                        char *errs, size_t errs_len, size_t *problem_count) {
    return load_reporting_all(path, flags, 1, out, errs, errs_len, problem_count);
}

void gf_config_free(gf_config *cfg) {
    if (cfg == NULL)
        return;
    gf_pipelines_free(cfg->pipelines, cfg->pipeline_count);
    memset(cfg, 0, sizeof *cfg);
}

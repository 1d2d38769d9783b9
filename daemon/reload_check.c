/* SPDX-License-Identifier: MIT */
/*
 * What a reload may change of the running shards (reload_check.h).
 */
#include "reload_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

void gf_reload_limits_init(gf_reload_limits *lim, const gf_config *cfg,
                           const gf_shard_place *places, uint32_t count) {
    lim->in_capacity_bytes = cfg->max_frame_bytes;
    lim->out_capacity_bytes = gf_config_max_output_bytes(cfg);
    lim->scratch_capacity_bytes = gf_config_max_scratch_bytes(cfg);
    lim->shard_count = count < GF_SHARDS_MAX ? count : GF_SHARDS_MAX;
    memcpy(lim->places, places, lim->shard_count * sizeof *places);
}

/* A reload's engine side on the device of `place`: the new pipelines made
 * runnable there.  Returns 0, or -EINVAL with why not in note[note_len]
 * (a package or plugin that cannot load there: the reload is refused, as a
 * restart with it would be). */
static int prepare_device(const gf_shard_place *place, gf_config *next, char *note,
                          size_t note_len) {
    char why[GF_ENGINE_WHY_BYTES];
    if (gf_engine_prepare(place->engine, place->device, place->device_streams, next->pipelines,
                          next->pipeline_count, why, sizeof why) == 0)
        return 0;
    snprintf(note, note_len, "%s", why);
    return -EINVAL;
}

int gf_reload_check(const gf_reload_limits *lim, const gf_config *cur, gf_config *next, char *note,
                    size_t note_len) {
    int keep_running = 0;
    note[0] = '\0';
    int rc = gf_config_keep_restart_keys(cur, next, note, note_len);
    if (rc < 0)
        return rc;
    /* What the slots were allocated for bounds what a reload may ask. */
    if (next->max_frame_bytes > lim->in_capacity_bytes) {
        gf_config_note_restart(note, note_len, "max_frame_bytes %llu above the slots' %llu",
                               (unsigned long long)next->max_frame_bytes,
                               (unsigned long long)lim->in_capacity_bytes);
        next->max_frame_bytes = cur->max_frame_bytes;
    }
    /* Named with both sizes: an output buffer a restart makes smaller is no
     * surprise when the scratch buffers were what was short. */
    uint64_t out = gf_config_max_output_bytes(next), scratch = gf_config_max_scratch_bytes(next);
    if (out > lim->out_capacity_bytes || scratch > lim->scratch_capacity_bytes) {
        gf_config_note_restart(note, note_len,
                               "the new pipelines need slot buffers of %llu bytes out and %llu "
                               "of scratch, the daemon started with %llu and %llu: restart to "
                               "run them; the running pipelines stay",
                               (unsigned long long)out, (unsigned long long)scratch,
                               (unsigned long long)lim->out_capacity_bytes,
                               (unsigned long long)lim->scratch_capacity_bytes);
        keep_running = 1;
    }
    /* A pipeline limited to devices that no shard runs on cannot run. */
    for (size_t i = 0; i < next->pipeline_count && !keep_running; i++)
        if (!gf_shard_plan_runs(lim->places, lim->shard_count, next->pipelines[i].devices)) {
            char want[64];
            gf_devices_format(next->pipelines[i].devices, want, sizeof want);
            gf_config_note_restart(note, note_len,
                                   "pipeline %s: devices \"%s\": no shard runs on them: the "
                                   "running pipelines stay",
                                   next->pipelines[i].name, want);
            keep_running = 1;
        }
    /* Each device gets the plugins' device side, once (the shards on it
     * share that side). */
    for (uint32_t k = 0; k < lim->shard_count; k++) {
        uint32_t first = 0;
        while (lim->places[first].device != lim->places[k].device)
            first++;
        if (first == k && !keep_running &&
            prepare_device(&lim->places[k], next, note, note_len) < 0)
            return -EINVAL;
    }
    /* The running pipelines stay: next's own go, here, off the loop
     * (closing their device side may wait), and next gets the running ones. */
    if (keep_running && gf_config_keep_pipelines(cur, next) < 0)
        return -ENOMEM;
    /* Kept pipelines' plugins were created for the running frame size:
     * no frame may outgrow what they were promised. */
    if (keep_running && next->max_frame_bytes > cur->max_frame_bytes) {
        gf_config_note_restart(
            note, note_len, "max_frame_bytes %llu above the kept pipelines' %llu",
            (unsigned long long)next->max_frame_bytes, (unsigned long long)cur->max_frame_bytes);
        next->max_frame_bytes = cur->max_frame_bytes;
    }
    return 0;
}

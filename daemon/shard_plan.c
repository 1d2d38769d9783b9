/* SPDX-License-Identifier: MIT */
/*
 * Device planning (shard_plan.h).
 */
#include "shard_plan.h"

#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "log.h"

int gf_shard_plan_runs(const gf_shard_place *places, uint32_t count, uint32_t mask) {
    for (uint32_t k = 0; k < count; k++)
        if (gf_device_runs(places[k].device, mask))
            return 1;
    return 0;
}

int gf_shard_plan(const gf_config *cfg, enum gf_engine_choice engine, int visible, long cores,
                  gf_shard_place **out) {
    char why[512];
    int list[GF_DEVICES_MAX];
    int nd = gf_config_devices(cfg, list, why, sizeof why);
    if (nd < 0) {
        GF_LOG_ERR("start-up failed: %s", why);
        return -1;
    }
    if (engine == GF_ENGINE_CPU && nd == 0) {
        nd = 1;
        list[0] = -1;
    } else if (engine == GF_ENGINE_CPU) {
        /* The cpu engine has no devices: a list numbers its shards as if it
         * had, so that pipelines limited to devices place as they would on
         * GPUs (config/README.md, "Shards"). */
        GF_LOG_INF("devices \"%s\": the cpu engine's shards are numbered as these devices",
                   cfg->devices);
    } else if (nd == 0) {
        nd = visible < GF_DEVICES_MAX ? visible : GF_DEVICES_MAX;
        for (int i = 0; i < nd; i++)
            list[i] = i;
    } else {
        for (int i = 0; i < nd; i++)
            if (list[i] >= visible) {
                GF_LOG_ERR("start-up failed: devices \"%s\": device %d is not visible (%d CUDA "
                           "device(s) here; CUDA_VISIBLE_DEVICES renumbers them)",
                           cfg->devices, list[i], visible);
                return -1;
            }
    }
    uint32_t count = cfg->shards;
    const char *how = "as \"shards\" says";
    if (count == 0 && engine == GF_ENGINE_CPU) {
        count = 1;
        how = "chosen: the cpu engine's worker threads use the cores already";
    } else if (count == 0) {
        uint32_t per = cores > nd ? (uint32_t)cores / (uint32_t)nd : 1;
        if (per > GF_SHARDS_PER_DEVICE_AUTO)
            per = GF_SHARDS_PER_DEVICE_AUTO;
        /* Fewer where the slots of that many would pass max_pinned_bytes. */
        while (per > 1 && gf_config_check_pinned(cfg, per * (uint32_t)nd, why, sizeof why) < 0)
            per--;
        count = per * (uint32_t)nd;
        how = "chosen: one per core, at most 8 per device, within max_pinned_bytes";
    }
    if (count < (uint32_t)nd)
        GF_LOG_INF("shards %u < %d devices: only the first %u device(s) get a shard", count, nd,
                   count);
    if (gf_config_check_pinned(cfg, count, why, sizeof why) < 0) {
        GF_LOG_ERR("start-up failed: %s", why);
        return -1;
    }
    gf_shard_place *places = calloc(count, sizeof *places);
    if (!places) {
        GF_LOG_ERR("start-up failed: out of memory");
        return -1;
    }
    uint32_t used = count < (uint32_t)nd ? count : (uint32_t)nd;
    for (uint32_t k = 0; k < count; k++)
        places[k] = (gf_shard_place){.index = k,
                                     .engine = engine,
                                     .device = list[k % used],
                                     .stream_base = (k / used) * cfg->slot_count,
                                     /* every shard on its device: k mod used alike */
                                     .device_streams =
                                         ((count - 1 - k % used) / used + 1) * cfg->slot_count};
    for (size_t i = 0; i < cfg->pipeline_count; i++)
        if (!gf_shard_plan_runs(places, count, cfg->pipelines[i].devices)) {
            char want[64];
            gf_devices_format(cfg->pipelines[i].devices, want, sizeof want);
            GF_LOG_ERR("start-up failed: pipeline %s: devices \"%s\": no shard runs on %s "
                       "(devices \"%s\", %u shard(s))",
                       cfg->pipelines[i].name, want, strchr(want, ',') ? "them" : "it",
                       cfg->devices, count);
            free(places);
            return -1;
        }
    GF_LOG_INF("%u shard(s) (%s), %u slots each, on %s%s", count, how, cfg->slot_count,
               engine == GF_ENGINE_CPU ? "the cpu engine" : "device(s) ",
               engine == GF_ENGINE_CPU ? "" : cfg->devices);
    *out = places;
    return (int)count;
}

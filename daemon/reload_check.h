/* SPDX-License-Identifier: MIT */
/*
 * A reload's first step, so that nothing slow runs on a loop that serves
 * frames (reload.c runs it on a thread of its own): what of a new
 * configuration the running shards can take.
 */
#ifndef GF_RELOAD_CHECK_H
#define GF_RELOAD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "shard.h"

/*
 * On any thread while the loops run, with `cur` the running configuration
 * (unchanged meanwhile) and every shard: what cannot change while running
 * (the keys config.c's table marks as needing a restart, a frame or output
 * size beyond the slots' buffers, pipelines an engine cannot run) keeps its
 * running value in `*next`, and is named in note[note_len] ("needs a
 * restart: slots 2 -> 4"; "" when everything applies); the new pipelines
 * are made runnable on every shard's engine (plugins' device_open, once per
 * device), or *keep_running says the running ones stay.  It touches nothing
 * of the running shards.  Returns 0 or -ENOMEM.
 */
int gf_reload_check(gf_shard *const *all, uint32_t count, const gf_config *cur, gf_config *next,
                    int *keep_running, char *note, size_t note_len);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A plugin whose create() does what its "how" parameter says: "segv"
 * (writes to an address nobody maps), "exit" (_exit(7)), "abort", "refuse"
 * (returns NULL with its reason), anything else succeeds.  The daemon must
 * refuse the first three with one line each, at start-up and at a reload,
 * and keep serving (tests/test_hostile.c, "crash").  Its frames are echoed
 * (a reference, so the CPU engine runs it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "same_length.h"

/* The status "exit" ends the process with. */
#define CRASH_EXIT_STATUS 7
/* An address in the first page, which no process maps: a store there is a
 * SIGSEGV (not NULL itself, which UBSan's null check would catch first). */
#define CRASH_ADDRESS ((uintptr_t)16)

static const gf_plugin_param params[] = {
    {.key = "how",
     .type = GF_PLUGIN_STRING,
     .required = 1,
     .min = 1,
     .max = 16,
     .doc = "segv, exit, abort or refuse: how create() fails; anything else: it succeeds"},
};

__attribute__((no_sanitize("address", "undefined"))) static void segv(void) {
    volatile uintptr_t where = CRASH_ADDRESS; /* not a constant the compiler sees */
    *(volatile int *)where = 1;
}

static void *create(const gf_plugin_value *values, const gf_plugin_env *env, char *why,
                    size_t why_len) {
    (void)env;
    const char *how = values[0].string;
    if (strcmp(how, "segv") == 0)
        segv();
    else if (strcmp(how, "exit") == 0)
        _exit(CRASH_EXIT_STATUS);
    else if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "refuse") == 0) {
        snprintf(why, why_len, "how: \"refuse\" asks create() to refuse");
        return NULL;
    }
    return malloc(1);
}

static const gf_plugin plugin = {.abi_version = GF_PLUGIN_ABI_VERSION,
                                 .name = "crash_create",
                                 .doc = "Echoes its frames; create() crashes as asked.",
                                 .params = params,
                                 .param_count = 1,
                                 .exact = 1,
                                 .create = create,
                                 .destroy = free,
                                 .output_bytes = same_length_output_bytes,
                                 .max_output_bytes = same_length_max_output_bytes,
                                 .reference = copy_reference};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

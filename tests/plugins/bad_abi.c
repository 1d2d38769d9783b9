/* SPDX-License-Identifier: MIT */
/*
 * A plugin built for an ABI version this gpuframed does not speak: the
 * loader must refuse it at load, reading nothing but the version
 * (tests/test_plugins.c).
 */
#include "gpuframe_plugin.h"

static const gf_plugin plugin = {.abi_version = 99, .name = "from_the_future"};

const gf_plugin *gf_plugin_entry(void) {
    return &plugin;
}

/* SPDX-License-Identifier: MIT */
/*
 * A shared object that is no plugin: it does not export gf_plugin_entry
 * (tests/test_plugins.c).
 */
int gf_not_a_plugin(void);

int gf_not_a_plugin(void) {
    return 0;
}

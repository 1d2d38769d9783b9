/* SPDX-License-Identifier: MIT */
/*
 * A plugin tried in a process of its own before the daemon loads it.
 *
 * Loading a plugin runs its code in the daemon: its constructors, its
 * gf_plugin_entry() and its create().  One that crashes there (a NULL
 * dereference, abort(), exit()) would take every client down with it, at a
 * reload as at start-up.  So before a plugin stage is loaded into the
 * daemon (protocol/stages_json.h, gf_set_plugin_prober), the same stage is
 * loaded and created once in a short-lived process: gpuframed itself,
 * started afresh with posix_spawn in a hidden mode (never fork(): the
 * daemon may hold a CUDA context, DESIGN.md), given the stage's path,
 * directory, parameters and longest input, needing no CUDA.  It reports
 * the plugin's own refusal ("weights: no such file") or success on a pipe.
 * A probe that dies by a signal, exits on its own, or takes longer than
 * GF_PLUGIN_PROBE_TIMEOUT_MS refuses the stage with one problem naming the
 * plugin and what happened: at start-up a configuration problem (exit
 * status 2), at a reload a rejected reload (the running configuration
 * stays, no client notices).
 *
 * What this isolates is load and create() only.  device_open, launches,
 * reference() and destroy run in the daemon, as they must (plugins/README.md,
 * "What is isolated").
 *
 * The prober runs on whichever thread loads a configuration (main, the
 * reload thread); it blocks that thread for the probe's time.
 */
#ifndef GF_PLUGIN_PROBE_H
#define GF_PLUGIN_PROBE_H

/* The hidden first argument that makes gpuframed a probe. */
#define GF_PLUGIN_PROBE_FLAG "--plugin-probe"
/* How long a probe's load and create() may take: create() reads files, it
 * does not compute; a probe past this is killed and the plugin refused. */
#define GF_PLUGIN_PROBE_TIMEOUT_MS 30000

/* Makes gf_pipeline_open_plugins probe every plugin stage before loading it
 * (stages_json.h).  Main thread, before any other thread starts. */
void gf_plugin_probe_install(void);

/* The probe process: `argv` as the prober passes it (GF_PLUGIN_PROBE_FLAG
 * first).  Loads and creates the stage, writes the result to the report
 * descriptor and returns the exit status: 0 created, 1 refused, 2 a bad
 * command line. */
int gf_plugin_probe_main(int argc, char **argv);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The one main() body of every Check suite: run the suite, print Check's
 * report, and turn the result into the process's exit status for ctest.
 * Every suite executable links it (tests/CMakeLists.txt gf_add_test); it
 * depends on Check alone, so unit suites link nothing of the daemon
 * helpers in testutil.c.
 */
#ifndef GF_TEST_RUNNER_H
#define GF_TEST_RUNNER_H

#include <check.h>

/* The exit status by which a suite says "skipped" (no GPU, say); ctest
 * reports it as skipped, never as passed.  gf_add_test defines it. */
#ifndef GF_SKIP_CODE
#define GF_SKIP_CODE 77
#endif

/*
 * Runs every test of `s`, each in a forked child (Check's default; the
 * CK_FORK environment variable still decides when set), printing every
 * test's result on stdout as it ends, then the summary (CK_LOG_FILE_NAME
 * and CK_VERBOSITY, when set, choose other reports).  Frees `s`.  Returns what main()
 * returns: EXIT_SUCCESS when no test failed and nothing called
 * gf_test_fail_outside_checks, else EXIT_FAILURE.  Call once per process.
 */
int gf_test_run(Suite *s);

/* gf_test_run with every test in this process: for suites that must never
 * fork, such as after CUDA is initialised. */
int gf_test_run_in_process(Suite *s);

/*
 * Tests failed so far in the gf_test_run in progress; 0 outside one.  For
 * unchecked fixtures, which run in the runner's process, to see whether the
 * tests of their TCase failed.
 */
int gf_test_failed_so_far(void);

/*
 * Counts a failure that no check reports: an unchecked teardown, where Check
 * allows no assertion, found a problem (and printed it).  gf_test_run then
 * fails the suite and prints the count.
 */
void gf_test_fail_outside_checks(void);

#endif

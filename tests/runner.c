/* SPDX-License-Identifier: MIT */
/*
 * The suites' runner; see runner.h for the contract.
 */
#include "runner.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static SRunner *g_runner;             /* the gf_test_run in progress, or NULL   */
static int g_failures_outside_checks; /* gf_test_fail_outside_checks calls */

/* Runs `s` with `fork_status` (CK_FORK_GETENV or CK_NOFORK). */
static int run(Suite *s, enum fork_status fork_status) {
    SRunner *sr = srunner_create(s);

    if (fork_status != CK_FORK_GETENV)
        srunner_set_fork_status(sr, fork_status);
    g_runner = sr;
    /* Each test's result as it ends, on stdout (Check's log "-"), a line
     * at a time even into ctest's pipe: a suite that ctest stops at its
     * timeout shows which tests had passed, and so which one it was in.
     * The log ends with the summary; CK_LOG_FILE_NAME or CK_VERBOSITY set
     * choose otherwise. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("CK_LOG_FILE_NAME") == NULL)
        srunner_set_log(sr, "-");
    srunner_run_all(sr, getenv("CK_VERBOSITY") != NULL ? CK_ENV : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    g_runner = NULL;
    srunner_free(sr);
    if (g_failures_outside_checks > 0)
        fprintf(stderr, "%d failure(s) outside the checks (see above)\n",
                g_failures_outside_checks);
    return failed == 0 && g_failures_outside_checks == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int gf_test_run(Suite *s) {
    return run(s, CK_FORK_GETENV);
}

int gf_test_run_in_process(Suite *s) {
    return run(s, CK_NOFORK);
}

int gf_test_failed_so_far(void) {
    return g_runner != NULL ? srunner_ntests_failed(g_runner) : 0;
}

void gf_test_fail_outside_checks(void) {
    g_failures_outside_checks++;
}

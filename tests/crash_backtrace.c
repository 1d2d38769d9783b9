/* SPDX-License-Identifier: MIT */
/*
 * gf_crash_backtrace.so, for runs whose crashes must explain themselves
 * (scripts/gpu-torch.sh): LD_PRELOAD it, and a fatal signal (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT) prints the process's native backtrace on
 * stderr, then kills the process as the signal would have.  glibc no longer
 * ships catchsegv.  A program's own handler is left alone: this one is
 * installed only where the signal's action is the default.  Python's
 * faulthandler, enabled after this library is loaded, prints every thread's
 * Python traceback first, then calls this handler, which it found in place.
 *
 * Runs in the faulting thread, in a signal handler: only write(2),
 * backtrace(3) (its library loaded beforehand) and backtrace_symbols_fd(3).
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* The main thread's alternate stack: a stack overflow still reports. */
static char alt_stack[64 * 1024];

static void say(const char *s) {
    if (write(STDERR_FILENO, s, strlen(s)) < 0) {
        /* stderr is gone: nothing to say it on */
    }
}

/* `v` in decimal or hexadecimal into buf[32]; returns buf. */
static const char *number(uintptr_t v, int hex, char *buf) {
    char *p = buf + 31;
    *p = '\0';
    do {
        *--p = "0123456789abcdef"[v % (hex ? 16 : 10)];
        v /= hex ? 16 : 10;
    } while (v);
    if (hex) {
        *--p = 'x';
        *--p = '0';
    }
    return p;
}

static void on_fatal(int sig, siginfo_t *info, void *context) {
    (void)context;
    char a[32], b[32], c[32];
    say("gf_crash_backtrace: pid ");
    say(number((uintptr_t)getpid(), 0, a));
    say(" got signal ");
    say(number((uintptr_t)sig, 0, b));
    say(" (");
    say(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    say(")");
    if (info->si_code > 0) { /* a fault: where */
        say(" at address ");
        say(number((uintptr_t)info->si_addr, 1, c));
    } else {
        say(", raised");
    }
    say("; its native backtrace (addr2line -e OBJECT +OFFSET names a line):\n");
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    /* SA_RESETHAND made the action the default again: a fault re-faults
     * when this returns, a raised signal is raised again. */
    if (info->si_code <= 0)
        raise(sig);
}

__attribute__((constructor)) static void install(void) {
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc_s now, not in the handler */
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(fatal_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * gpuframed: configuration, signals, systemd supervision and the control
 * loop; the command line is options.c.  Start-up ends in gf_shards_open
 * (shards.c), whose shards serve everything else; this file tells systemd about it
 * (notify.c): READY=1 once the shards are open, STATUS= every few seconds,
 * WATCHDOG=1 while frames complete, STOPPING=1 on SIGTERM/SIGINT,
 * RELOADING=1 ... READY=1 around a SIGHUP reload.
 *
 * Started as root with "user" naming another account, it reads the keys,
 * binds the socket, becomes that user for good (account.c), and only then
 * reads the pipelines and loads their plugins, touches no GPU before: what a
 * reload will read, the user is seen to read at start-up.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "account.h"
#include "config.h"
#include "engine.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "plugin_probe.h"
#include "reload.h"
#include "shards.h"

/* How often STATUS= is refreshed: "every few seconds", cheap for systemd. */
#define GF_STATUS_PERIOD_MS 2000u
/* Room for one STATUS= line, a reload's list of changes and its note. */
#define GF_STATUS_BYTES  256
#define GF_CHANGES_BYTES 2048
#define GF_NOTE_BYTES    1024
/* Microseconds per millisecond, for WATCHDOG_USEC. */
#define GF_USEC_PER_MS 1000u

/* Everything the loop's callbacks share: one daemon per process. */
typedef struct daemon_state {
    uv_loop_t loop; /* the control loop                                   */
    gf_shards *shards;
    gf_config *cfg;      /* the running configuration (owned; the shards use it) */
    gf_config *applying; /* a reload's, while the shards switch to it            */
    char applying_line[GF_CHANGES_BYTES + GF_NOTE_BYTES + 256]; /* logged once every shard
                                                                   has (its level below) */
    int applying_warns;        /* something of it needs a restart: logged as a warning */
    const char *config_path;   /* --config FILE, or NULL for the built-in one          */
    gf_config_overrides flags; /* the options that set a key: they override every
                                  configuration read, at start-up and on reload */
    gf_notifier notify;
    gf_mailbox control; /* the control loop's: shards and reloads answer here;
                           static, so a load abandoned at exit may still
                           post to it (mailbox.h)                          */
    gf_reload *reload;  /* loads a configuration off the loop (reload.h)  */
    int reload_again;   /* a SIGHUP came while a load ran: load once more */
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t status_timer;   /* STATUS= every GF_STATUS_PERIOD_MS            */
    uv_timer_t watchdog_timer; /* WATCHDOG=1 at half of WATCHDOG_USEC         */
    uint64_t watchdog_usec;    /* 0: systemd asked for no watchdog            */
    uint64_t last_completed;   /* frames completed at the previous watchdog tick */
    int watchdog_withheld;     /* the previous tick saw no progress           */
    int signals_seen;          /* SIGINT/SIGTERM so far                       */
} daemon_state;

/* Logs every line of errs[] at error level, prefixed with `what`. */
static void log_problems(const char *what, const char *errs, size_t count) {
    size_t shown = 0;

    for (const char *line = errs; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        int n = nl != NULL ? (int)(nl - line) : (int)strlen(line);
        GF_LOG_ERR("%s%.*s", what, n, line);
        shown++;
        line += n + (nl != NULL);
    }
    if (shown < count)
        GF_LOG_ERR("%s... and %zu more problem(s)", what, count - shown);
}

/* ---- systemd supervision ----------------------------------------------------- */

/* Runs only under systemd: the timer starts when notifying is on. */
static void on_status_timer(uv_timer_t *t) {
    daemon_state *d = t->data;
    char status[GF_STATUS_BYTES];

    gf_shards_status(d->shards, status, sizeof status);
    gf_notify_status(&d->notify, status);
}

/* WATCHDOG=1, but only while the engine makes progress or has nothing to do:
 * frames in flight and none completed since the last tick means a stuck
 * device, and systemd should restart the daemon if that lasts. */
static void on_watchdog_timer(uv_timer_t *t) {
    daemon_state *d = t->data;
    uint64_t completed = 0;
    uint32_t in_flight = 0;

    gf_shards_progress(d->shards, &completed, &in_flight);
    if (in_flight == 0 || completed != d->last_completed) {
        if (d->watchdog_withheld)
            GF_LOG_INF("watchdog: frames complete again; WATCHDOG=1 resumed");
        d->watchdog_withheld = 0;
        if (gf_notify_watchdog(&d->notify) < 0)
            GF_LOG_DBG("watchdog: WATCHDOG=1 not sent: %s", strerror(errno));
    } else if (!d->watchdog_withheld) {
        d->watchdog_withheld = 1;
        GF_LOG_WRN("watchdog: %" PRIu32 " frame(s) in flight and none completed in %" PRIu64
                   " ms: withholding WATCHDOG=1; systemd restarts gpuframed if this lasts "
                   "%" PRIu64 " ms",
                   in_flight, d->watchdog_usec / 2 / GF_USEC_PER_MS,
                   d->watchdog_usec / GF_USEC_PER_MS);
    }
    d->last_completed = completed;
}

/* ---- signals ------------------------------------------------------------------- */

/* First SIGINT/SIGTERM: drain.  Second: exit at once, abandoning frames. */
static void on_stop_signal(uv_signal_t *h, int signum) {
    daemon_state *d = h->data;
    char status[GF_STATUS_BYTES];
    uint64_t completed = 0;
    uint32_t in_flight = 0;

    if (++d->signals_seen > 1) {
        GF_LOG_WRN("second signal (%s): exiting at once with status %d, abandoning every frame "
                   "not yet answered",
                   strsignal(signum), GF_EXIT_FAILURE);
        _exit(GF_EXIT_FAILURE);
    }
    gf_shards_progress(d->shards, &completed, &in_flight);
    snprintf(status, sizeof status, "stopping: draining %" PRIu32 " frame(s) in flight", in_flight);
    gf_notify_stopping(&d->notify, status);
    GF_LOG_INF("%s: draining (at most %" PRIu32 " ms)", strsignal(signum),
               d->cfg->drain_timeout_ms);
    gf_shards_shutdown(d->shards);
}

/* SIGHUP: read the configuration again and apply what can change while
 * running.  The reading runs off the loop (reload.h), which goes on serving
 * frames; systemd hears RELOADING=1 first and READY=1 when it is over,
 * whether the new configuration was taken or not. */
static void start_reload(daemon_state *d) {
    const char *what = d->config_path ? d->config_path : "the built-in configuration";
    int rc = d->applying ? -EBUSY : gf_reload_start(d->reload, d->config_path, &d->flags, d->cfg);
    if (rc == -EBUSY) {
        GF_LOG_INF("SIGHUP: a reload is under way; %s is read again when it ends", what);
        d->reload_again = 1;
        return;
    }
    gf_notify_reloading(&d->notify);
    if (rc < 0) {
        GF_LOG_ERR("reload rejected: cannot start loading %s: %s; keeping the running "
                   "configuration",
                   what, strerror(-rc));
        gf_notify_ready(&d->notify, "reload rejected: cannot start loading");
        return;
    }
    GF_LOG_INF("SIGHUP: reloading %s", what);
}

static void on_reload_signal(uv_signal_t *h, int signum) {
    daemon_state *d = h->data;
    (void)signum;
    if (d->signals_seen > 0) {
        GF_LOG_WRN("SIGHUP ignored: stopping");
        return;
    }
    start_reload(d);
}

static void reload_again(daemon_state *d) {
    if (d->reload_again && d->signals_seen == 0) {
        d->reload_again = 0;
        start_reload(d);
    }
}

/* Every shard switched to the reload's configuration: the old one goes. */
static void on_applied(void *arg) {
    daemon_state *d = arg;
    char status[GF_STATUS_BYTES];
    if (d->applying_warns)
        GF_LOG_WRN("%s", d->applying_line);
    else
        GF_LOG_INF("%s", d->applying_line);
    gf_config_free(d->cfg);
    free(d->cfg);
    d->cfg = d->applying;
    d->applying = NULL;
    gf_shards_status(d->shards, status, sizeof status);
    gf_notify_ready(&d->notify, status);
    reload_again(d);
}

/* The line a reload that was taken logs: "reloaded FILE in T s: applied
 * CHANGES", "...: no change applied", and with `note` (what needs a
 * restart, reload_check.h) "...: applied CHANGES; not applied, NOTE" or
 * "...: nothing applied, NOTE". */
static void describe_reload(char *buf, size_t len, const char *what, double seconds,
                            const char *changes, const char *note) {
    int n = snprintf(buf, len, "reloaded %s in %.3f s: ", what, seconds);
    if (n < 0 || (size_t)n >= len)
        return;
    if (note[0] == '\0')
        snprintf(buf + n, len - (size_t)n, "%s%s", changes[0] ? "applied " : "no change applied",
                 changes);
    else if (changes[0])
        snprintf(buf + n, len - (size_t)n, "applied %s; not applied, %s", changes, note);
    else
        snprintf(buf + n, len - (size_t)n, "nothing applied, %s", note);
}

/* A reload ended (reload.h): the new configuration goes to the shards. */
static void on_reloaded(gf_reload_result *res, void *arg) {
    daemon_state *d = arg;
    const char *what = d->config_path ? d->config_path : "the built-in configuration";
    char status[GF_STATUS_BYTES], changes[GF_CHANGES_BYTES];
    gf_config *next = res->next;

    if (next == NULL && res->problem_count == 1) {
        /* One line: the problem names the file and the key. */
        GF_LOG_ERR("reload rejected: %.*s; keeping the running configuration",
                   (int)strcspn(res->problems, "\n"), res->problems);
        snprintf(status, sizeof status, "reload rejected: 1 problem in %s", what);
    } else if (next == NULL) {
        GF_LOG_ERR("reload rejected: %zu problem(s) in %s; keeping the running configuration",
                   res->problem_count, what);
        log_problems("reload rejected: ", res->problems, res->problem_count);
        snprintf(status, sizeof status,
                 "reload rejected: %zu problem(s) in %s; running the previous configuration",
                 res->problem_count, what);
    } else {
        /* One line, and READY=1, once every shard has switched
         * (on_applied), which may come at once: what it reads is set
         * first.  What needs a restart is in the same line: a reload whose
         * pipelines cannot run keeps the running ones, which is no change. */
        gf_config_describe_changes(d->cfg, next, changes, sizeof changes);
        describe_reload(d->applying_line, sizeof d->applying_line, what, res->seconds, changes,
                        res->note);
        d->applying_warns = res->note[0] != '\0';
        d->applying = next;
        if (d->signals_seen == 0 && gf_shards_reload_apply(d->shards, next, on_applied, d) == 0) {
            gf_log_set_level(next->log_level);
            return;
        }
        d->applying = NULL;
        GF_LOG_ERR("reload rejected: %s; keeping the running configuration",
                   d->signals_seen > 0 ? "the daemon is stopping" : "out of memory");
        gf_config_free(next);
        free(next);
        snprintf(status, sizeof status, "reload rejected");
    }
    gf_notify_ready(&d->notify, status);
    reload_again(d);
}

/* ---- start-up ---------------------------------------------------------------------- */

/*
 * Under socket activation the socket's path is the .socket unit's
 * ListenStream=, whatever "socket" says: it is what logs, STATUS= and
 * reloads must name.  It becomes an override like --socket, so a reload
 * does not report the configuration's path as a change that needs a
 * restart.  An abstract or unnamed socket keeps the configured text.
 */
static void adopt_socket_path(daemon_state *d, int fd) {
    char path[GF_SOCKET_PATH_MAX], why[GF_NOTE_BYTES];
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;

    memset(&sa, 0, sizeof sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_path[0] == '\0' ||
        len <= offsetof(struct sockaddr_un, sun_path))
        return;
    snprintf(path, sizeof path, "%.*s", (int)(len - offsetof(struct sockaddr_un, sun_path)),
             sa.sun_path);
    if (strcmp(path, d->cfg->socket_path) != 0)
        GF_LOG_INF("socket activation: serving %s, which systemd passed; \"socket\" (%s) is not "
                   "used",
                   path, d->cfg->socket_path);
    snprintf(d->cfg->socket_path, sizeof d->cfg->socket_path, "%s", path);
    if (gf_config_override(&d->flags, "socket", path, why, sizeof why) < 0)
        GF_LOG_WRN("socket activation: %s: %s", path, why);
}

/* Reads the configuration the daemon runs on into d->cfg, replacing what it
 * held, and sets the log level from it: every key but the pipelines with
 * `keys_only` (gf_config_load_keys).  Returns -1 to go on, or the exit
 * status. */
static int load_config(daemon_state *d, int keys_only) {
    char errs[GF_PROBLEMS_BYTES];
    size_t count = 0;
    gf_config *cfg = calloc(1, sizeof *cfg);

    if (cfg == NULL) {
        GF_LOG_ERR("out of memory");
        return GF_EXIT_STARTUP;
    }
    if ((keys_only ? gf_config_load_keys : gf_config_load)(d->config_path, &d->flags, cfg, errs,
                                                           sizeof errs, &count) < 0) {
        log_problems("", errs, count);
        GF_LOG_ERR("not starting: %zu problem(s) in the configuration", count);
        free(cfg);
        return GF_EXIT_USAGE;
    }
    if (d->cfg != NULL) {
        gf_config_free(d->cfg);
        free(d->cfg);
    }
    d->cfg = cfg;
    gf_log_set_level(d->cfg->log_level);
    return -1;
}

/* Whom the daemon becomes once its socket is bound: "user", when it names
 * another account than the one running.  Returns 1 with the account in
 * *to, 0 to stay as it is, or -1 (logged) when it cannot. */
static int account_to_become(const gf_config *cfg, gf_account *to) {
    char why[GF_NOTE_BYTES];

    if (cfg->user[0] == '\0')
        return 0;
    if (gf_account_user(cfg->user, to, why, sizeof why) < 0) {
        GF_LOG_ERR("user: %s", why);
        return -1;
    }
    if (to->uid == (uint32_t)geteuid())
        return 0;
    if (geteuid() != 0) {
        GF_LOG_ERR("user: gpuframed runs as uid %u, and only root may become user %s (uid %u): "
                   "start it as root, or leave \"user\" out",
                   (unsigned)geteuid(), to->name, to->uid);
        return -1;
    }
    return 1;
}

/* Removes the socket file this daemon bound, after a failed start.  A
 * daemon that became "user" may not be allowed to (its directory is
 * root's): the next start replaces a socket nobody listens on. */
static void remove_socket(const char *path) {
    if (unlink(path) < 0 && errno != ENOENT)
        GF_LOG_WRN("socket %s: cannot remove it: %s (the next start replaces it)", path,
                   strerror(errno));
}

/* systemd's side: the socket it may pass (into *listen_fd, or -1), where to
 * notify, the watchdog.  Returns 0, or -1 when the passed sockets are
 * unusable. */
static int join_systemd(daemon_state *d, int *listen_fd) {
    char why[GF_NOTE_BYTES];

    *listen_fd = -1;
    if (gf_notify_listen_fd(listen_fd, why, sizeof why) < 0) {
        GF_LOG_ERR("socket activation: %s", why);
        return -1;
    }
    if (*listen_fd >= 0)
        adopt_socket_path(d, *listen_fd);
    if (*listen_fd >= 0 && d->cfg->socket_group[0] != '\0')
        GF_LOG_INF("socket activation: the socket unit's SocketGroup= decides the socket's group; "
                   "socket_group (%s) is not used",
                   d->cfg->socket_group);
    if (gf_notify_open(&d->notify, why, sizeof why) < 0)
        GF_LOG_WRN("%s", why);
    if (gf_notify_watchdog_usec(&d->watchdog_usec, why, sizeof why) < 0)
        GF_LOG_WRN("%s", why);
    return 0;
}

/* Starts the signal handles and creates the supervision timers, all unref'd:
 * alone they must not keep the loop running once the shards are done. */
static void start_signals(daemon_state *d) {
    uv_signal_init(&d->loop, &d->sigint);
    uv_signal_init(&d->loop, &d->sigterm);
    uv_signal_init(&d->loop, &d->sighup);
    d->sigint.data = d->sigterm.data = d->sighup.data = d;
    uv_signal_start(&d->sigint, on_stop_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&d->sighup, on_reload_signal, SIGHUP);
    uv_unref((uv_handle_t *)&d->sigint);
    uv_unref((uv_handle_t *)&d->sigterm);
    uv_unref((uv_handle_t *)&d->sighup);
    uv_timer_init(&d->loop, &d->status_timer);
    uv_timer_init(&d->loop, &d->watchdog_timer);
    d->status_timer.data = d->watchdog_timer.data = d;
    uv_unref((uv_handle_t *)&d->status_timer);
    uv_unref((uv_handle_t *)&d->watchdog_timer);
}

/* Closes what start_signals opened. */
static void close_supervision(daemon_state *d) {
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sighup, NULL);
    uv_close((uv_handle_t *)&d->status_timer, NULL);
    uv_close((uv_handle_t *)&d->watchdog_timer, NULL);
}

/* Every slot is allocated and every pipeline warmed up: tells systemd READY=1
 * and starts STATUS= and WATCHDOG=1 when it listens. */
static void report_ready(daemon_state *d) {
    char status[GF_STATUS_BYTES];

    gf_shards_status(d->shards, status, sizeof status);
    gf_notify_ready(&d->notify, status);
    if (gf_notify_enabled(&d->notify))
        uv_timer_start(&d->status_timer, on_status_timer, GF_STATUS_PERIOD_MS, GF_STATUS_PERIOD_MS);
    if (d->watchdog_usec > 0 && gf_notify_enabled(&d->notify)) {
        uint64_t period_ms = d->watchdog_usec / 2 / GF_USEC_PER_MS;
        if (period_ms == 0)
            period_ms = 1;
        gf_shards_progress(d->shards, &d->last_completed, &(uint32_t){0});
        gf_notify_watchdog(&d->notify);
        uv_timer_start(&d->watchdog_timer, on_watchdog_timer, period_ms, period_ms);
        GF_LOG_INF("watchdog: WATCHDOG=1 every %" PRIu64 " ms while frames complete", period_ms);
    }
}

/* Runs the loop until the shards are done, then closes everything.  Returns
 * the exit status; a failed shard exits at once. */
static int serve_until_stopped(daemon_state *d) {
    /* A shard that fails makes the process exit from within (shards.c). */
    uv_run(&d->loop, UV_RUN_DEFAULT);
    gf_reload_close(d->reload);
    close_supervision(d);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    int status_code = gf_shards_close(d->shards);
    int lc = uv_loop_close(&d->loop);
    if (lc != 0)
        GF_LOG_WRN("event loop closed with handles still open: %s", uv_strerror(lc));
    gf_notify_close(&d->notify);
    gf_config_free(d->cfg);
    free(d->cfg);
    GF_LOG_INF("stopped");
    return status_code == 0 ? GF_EXIT_OK : GF_EXIT_FAILURE;
}

int main(int argc, char **argv) {
    static daemon_state d; /* handles live here until the process ends */
    const char *check_path = NULL;
    char status[GF_STATUS_BYTES], why[GF_NOTE_BYTES];
    int listen_fd = -1, rc, exit_code = GF_EXIT_STARTUP;
    gf_account account;

    /* A probe of a plugin (plugin_probe.h) is this binary started afresh. */
    if (argc > 1 && strcmp(argv[1], GF_PLUGIN_PROBE_FLAG) == 0)
        return gf_plugin_probe_main(argc, argv);
    gf_plugin_probe_install();
    rc = gf_options_parse(argc, argv, &d.flags, &d.config_path, &check_path);
    if (rc >= 0)
        return rc;
    if (check_path != NULL)
        return gf_options_check_config(check_path, &d.flags);
    /* The keys first: whether the pipelines are read now, or as "user". */
    rc = load_config(&d, 1);
    if (rc >= 0)
        return rc;
    int become = account_to_become(d.cfg, &account);
    if (become < 0)
        goto fail_config; /* GF_EXIT_STARTUP: the file is right, the process is not */
    if (!become && (rc = load_config(&d, 0)) >= 0) {
        exit_code = rc;
        goto fail_config;
    }
    signal(SIGPIPE, SIG_IGN);
    if (join_systemd(&d, &listen_fd) < 0)
        goto fail_config;

    uv_loop_init(&d.loop);
    /* Before the socket exists: a SIGTERM from then on is a graceful stop,
     * handled once the loop runs. */
    start_signals(&d);
    int owned = listen_fd < 0;
    if (owned && (listen_fd = gf_shards_bind(d.cfg)) < 0) {
        gf_notify_status(&d.notify, "start-up failed: cannot bind the socket");
        goto fail_loop;
    }
    if (become) {
        if (gf_account_become(&account, why, sizeof why) < 0) {
            GF_LOG_ERR("user: %s", why);
            goto fail_socket;
        }
        gf_account_describe_self(why, sizeof why);
        GF_LOG_INF("user: became %s: %s; the configuration's pipelines and plugins are read as "
                   "this user from now on",
                   account.name, why);
        if ((rc = load_config(&d, 0)) >= 0) {
            exit_code = rc;
            goto fail_socket;
        }
    }
    GF_LOG_INF("gpuframed %s starting (engines built in: %s; config %s; socket %s%s%s)", GF_VERSION,
               gf_engine_builtin_names(), d.config_path ? d.config_path : "built-in",
               owned ? d.cfg->socket_path : "passed by systemd",
               gf_notify_enabled(&d.notify) ? "; notifying systemd" : "",
               gf_log_to_journal() ? "; logging to the journal" : "");
    rc = gf_mailbox_init(&d.control, &d.loop, &d);
    if (rc < 0) {
        GF_LOG_ERR("start-up failed: the control loop's mailbox: %s", uv_strerror(rc));
        gf_notify_status(&d.notify, "start-up failed: the control loop's mailbox");
        goto fail_socket;
    }
    rc = gf_shards_open(&d.loop, d.cfg, listen_fd, owned, &d.control, &d.shards);
    if (rc < 0) {
        /* gf_shards_open logged why; systemd's STATUS= says it too. */
        snprintf(status, sizeof status, "start-up failed: %s",
                 rc > -4096 ? uv_strerror(rc) : "error");
        gf_notify_status(&d.notify, status);
        gf_mailbox_close(&d.control, NULL);
        goto fail_socket;
    }
    rc =
        gf_reload_open(&d.loop, &d.control, gf_shards_limits(d.shards), on_reloaded, &d, &d.reload);
    if (rc < 0) {
        GF_LOG_ERR("start-up failed: cannot set up reloads: %s", uv_strerror(rc));
        return GF_EXIT_STARTUP; /* nothing is served yet; the OS takes the rest back */
    }
    report_ready(&d);
    return serve_until_stopped(&d);

fail_socket:
    if (owned)
        remove_socket(d.cfg->socket_path);
fail_loop:
    close_supervision(&d);
    uv_run(&d.loop, UV_RUN_NOWAIT);
    uv_loop_close(&d.loop);
    gf_notify_close(&d.notify);
    if (listen_fd >= 0)
        close(listen_fd);
fail_config:
    gf_config_free(d.cfg);
    free(d.cfg);
    return exit_code;
}

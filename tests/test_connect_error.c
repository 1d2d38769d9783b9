/* SPDX-License-Identifier: MIT */
/*
 * Check suite of client/connect_error.c: the words gf_client_connect_error
 * gives for each way a connect fails (no socket, a stale one, a file that
 * is no socket, a permission problem of each kind, a path too long), exact,
 * from facts made up here so that no privilege is needed; then the whole
 * call on real paths.  (test_gpuframe runs the permission cases for real
 * when it may change user.)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "connect_error.h"
#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"

#define TEXT_BYTES 768
#define HOW        "pass --socket PATH / set GPUFRAMED_SOCKET"

/* One made-up failure: a socket /run/gf.sock owned by root:gpuframed, mode
 * 0660, that this user may not use, but for what the case changes. */
static const struct wording_case {
    const char *what;
    int err;           /* connect()'s negative errno                       */
    int point_null;    /* no how_to_point: the general phrase              */
    int stat_err;      /* stat()'s negative errno, or 0                    */
    int not_socket;    /* the path is a file, not a socket                 */
    unsigned mode;     /* 0: 0660                                          */
    int names_unknown; /* no owner or group name: uid 1234 and gid 998     */
    int listed;        /* the user database lists the user in the group    */
    int session;       /* this process has the group                       */
    const char *text;  /* the explanation, exactly                         */
} wording_cases[] = {
    {"no socket", -ENOENT, 0, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: no such socket: is gpuframed running? start it (systemctl "
     "start gpuframed), or " HOW},
    {"no directory, no hint", -ENOTDIR, 1, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: no such socket: is gpuframed running? start it (systemctl "
     "start gpuframed), or point this program at the socket it listens on"},
    {"stale socket", -ECONNREFUSED, 0, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: a socket file is there but no daemon listens: gpuframed "
     "stopped without removing it, or crashed; start it (systemctl start gpuframed), or " HOW},
    {"a file", -ECONNREFUSED, 0, 0, 1, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: that is not a socket: " HOW},
    {"not in the group", -EACCES, 0, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: permission denied: the socket admits user root and group "
     "gpuframed (mode 0660): join group gpuframed (sudo usermod -aG gpuframed $USER, then log in "
     "again)"},
    {"names unknown", -EACCES, 0, 0, 0, 0, 1, 0, 0,
     "cannot connect to /run/gf.sock: permission denied: the socket admits user uid 1234 and "
     "group gid 998 (mode 0660): join group gid 998 (sudo usermod -aG gid 998 $USER, then log in "
     "again)"},
    {"joined since the login", -EACCES, 0, 0, 0, 0, 0, 1, 0,
     "cannot connect to /run/gf.sock: permission denied: you are in group gpuframed, which may "
     "connect, but this login session began before you joined it: log in again (or run 'newgrp "
     "gpuframed')"},
    {"in the group", -EACCES, 0, 0, 0, 0, 0, 1, 1,
     "cannot connect to /run/gf.sock: permission denied, though you are in its group gpuframed "
     "(mode 0660): a directory on its path or a security module refuses"},
    {"owner only", -EACCES, 0, 0, 0, 0600, 0, 0, 0,
     "cannot connect to /run/gf.sock: permission denied: the socket's mode 0600 lets only its "
     "owner root connect (the daemon's socket_mode, or its socket unit's SocketMode=, decides; "
     "0660 admits group gpuframed)"},
    {"a directory", -EACCES, 0, -EACCES, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: permission denied on a directory on its path: ask its owner "
     "for access, or " HOW},
    {"a security module", -EPERM, 0, -EACCES, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: permission denied on a directory on its path: ask its owner "
     "for access, or " HOW},
    {"path too long", -ENAMETOOLONG, 0, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: the path has 12 bytes; a socket's has at most 107"},
    {"anything else", -EMFILE, 0, 0, 0, 0, 0, 0, 0,
     "cannot connect to /run/gf.sock: Too many open files"},
};

START_TEST(each_failure_in_words) {
    const struct wording_case *c = &wording_cases[_i];
    gf__connect_facts f;
    char buf[TEXT_BYTES];

    memset(&f, 0, sizeof f);
    f.path = "/run/gf.sock";
    f.err = c->err;
    f.how_to_point = c->point_null ? NULL : HOW;
    f.stat_err = c->stat_err;
    f.is_socket = !c->not_socket;
    f.mode = c->mode != 0 ? c->mode : 0660;
    f.uid = c->names_unknown ? 1234 : 0;
    f.gid = 998;
    if (!c->names_unknown) {
        snprintf(f.owner, sizeof f.owner, "root");
        snprintf(f.group, sizeof f.group, "gpuframed");
    }
    f.listed_in_group = c->listed;
    f.session_has_group = c->session;
    gf__connect_explain(&f, buf, sizeof buf);
    ck_assert_msg(strcmp(buf, c->text) == 0, "%s:\n got  %s\n want %s", c->what, buf, c->text);
}
END_TEST

/* A group that grants far more than the socket (root: what a root daemon
 * without socket_group gives it) is never the remedy, named or not. */
static const struct privileged_case {
    const char *group; /* its name, "" when the database has none */
    unsigned long gid;
} privileged_cases[] = {{"root", 0}, {"docker", 999}, {"", 0}};

START_TEST(privileged_group_is_never_the_remedy) {
    const struct privileged_case *c = &privileged_cases[_i];
    gf__connect_facts f = {.path = "/run/gf.sock",
                           .err = -EACCES,
                           .how_to_point = HOW,
                           .is_socket = 1,
                           .mode = 0660,
                           .gid = c->gid,
                           .group_privileged = 1};
    char buf[TEXT_BYTES], want[TEXT_BYTES], group[32];

    snprintf(f.owner, sizeof f.owner, "root");
    snprintf(f.group, sizeof f.group, "%s", c->group);
    if (c->group[0] != '\0')
        snprintf(group, sizeof group, "%s", c->group);
    else
        snprintf(group, sizeof group, "gid %lu", c->gid);
    snprintf(want, sizeof want,
             "cannot connect to /run/gf.sock: permission denied: the socket admits user root and "
             "group %s (mode 0660), and group %s grants far more than this socket: do not join "
             "it; have the daemon give its socket a group of its own (socket_group or "
             "--socket-group, or the socket unit's SocketGroup=; gpuframed by default), then join "
             "that group",
             group, group);
    gf__connect_explain(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
    /* Listed in it since: logging in again is still the answer. */
    f.listed_in_group = 1;
    gf__connect_explain(&f, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "this login session began before you joined it"), "%s", buf);
}
END_TEST

/* A buffer too small for the words: cut, NUL-terminated. */
START_TEST(truncated_to_the_buffer) {
    gf__connect_facts f = {.path = "/run/gf.sock", .err = -EMFILE};
    char small[16];

    memset(small, 'x', sizeof small);
    gf__connect_explain(&f, small, sizeof small);
    ck_assert_str_eq(small, "cannot connect ");
}
END_TEST

/* The whole call on real paths: a missing socket, a stale one (bound, never
 * listened on, closed), a regular file. */
START_TEST(real_paths) {
    char dir[GF_TEST_DIR_MAX], path[GF_TEST_PATH_MAX], buf[TEXT_BYTES], want[TEXT_BYTES];
    gf_client *c = NULL;

    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/s.sock", dir);
    int err = gf_client_connect(path, &c);
    ck_assert_int_eq(err, -ENOENT);
    snprintf(want, sizeof want,
             "cannot connect to %s: no such socket: is gpuframed running? start it (systemctl "
             "start gpuframed), or " HOW,
             path);
    ck_assert_str_eq(gf_client_connect_error(path, err, HOW, buf, sizeof buf), want);

    close(gf_test_ck_unix_socket(path, 0)); /* the file stays; nobody listens */
    err = gf_client_connect(path, &c);
    ck_assert_int_eq(err, -ECONNREFUSED);
    snprintf(
        want, sizeof want,
        "cannot connect to %s: a socket file is there but no daemon listens: gpuframed "
        "stopped without removing it, or crashed; start it (systemctl start gpuframed), or " HOW,
        path);
    ck_assert_str_eq(gf_client_connect_error(path, err, HOW, buf, sizeof buf), want);
    unlink(path);

    ck_assert_int_eq(gf_test_write_file(path, "not a socket\n"), 0);
    err = gf_client_connect(path, &c);
    ck_assert_int_eq(err, -ECONNREFUSED);
    snprintf(want, sizeof want, "cannot connect to %s: that is not a socket: " HOW, path);
    ck_assert_str_eq(gf_client_connect_error(path, err, HOW, buf, sizeof buf), want);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* Which groups gathering calls privileged: gid 0 whatever its name (the
 * root directory's), never a group such as nogroup. */
START_TEST(privileged_groups_gathered) {
    char dir[GF_TEST_DIR_MAX], path[GF_TEST_PATH_MAX];
    gf__connect_facts f = {.path = "/", .err = -EACCES};

    gf__connect_facts_gather(&f);
    ck_assert_int_eq(f.stat_err, 0);
    ck_assert_uint_eq(f.gid, 0);
    ck_assert_int_eq(f.group_privileged, 1);
    if (geteuid() != 0)
        return; /* only root gives a file another group */
    ck_assert_int_eq(gf_test_make_temp_dir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/f", dir);
    ck_assert_int_eq(gf_test_write_file(path, "x\n"), 0);
    ck_assert_int_eq(chown(path, (uid_t)-1, 65534), 0);
    memset(&f, 0, sizeof f);
    f.path = path;
    f.err = -EACCES;
    gf__connect_facts_gather(&f);
    ck_assert_uint_eq(f.gid, 65534);
    ck_assert_int_eq(f.group_privileged, 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

static Suite *connect_error_suite(void) {
    Suite *s = suite_create("connect_error");
    TCase *tc = tcase_create("connect_error");
    tcase_add_loop_test(tc, each_failure_in_words, 0,
                        (int)(sizeof wording_cases / sizeof wording_cases[0]));
    tcase_add_loop_test(tc, privileged_group_is_never_the_remedy, 0,
                        (int)(sizeof privileged_cases / sizeof privileged_cases[0]));
    tcase_add_test(tc, truncated_to_the_buffer);
    tcase_add_test(tc, real_paths);
    tcase_add_test(tc, privileged_groups_gathered);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(connect_error_suite());
}

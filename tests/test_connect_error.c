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
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "connect_error.h"
#include "libgpuframe.h"
#include "runner.h"
#include "testutil.h"

#define TEXT_BYTES 768
#define HOW        "pass --socket PATH / set GPUFRAMED_SOCKET"

/* The facts of a socket /run/gf.sock owned by root:gpuframed, mode 0660,
 * that this user may not use; a case changes what it needs. */
static gf__connect_facts base(int err) {
    gf__connect_facts f;

    memset(&f, 0, sizeof f);
    f.path = "/run/gf.sock";
    f.err = err;
    f.how_to_point = HOW;
    f.is_socket = 1;
    f.mode = 0660;
    f.uid = 0;
    f.gid = 998;
    snprintf(f.owner, sizeof f.owner, "root");
    snprintf(f.group, sizeof f.group, "gpuframed");
    return f;
}

static const char *explain(const gf__connect_facts *f, char *buf) {
    gf__connect_explain(f, buf, TEXT_BYTES);
    return buf;
}

START_TEST(no_socket_says_start_it_or_point_elsewhere) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-ENOENT);

    ck_assert_str_eq(
        explain(&f, buf),
        "cannot connect to /run/gf.sock: no such socket: is gpuframed running? start "
        "it (systemctl start gpuframed), or pass --socket PATH / set GPUFRAMED_SOCKET");
    f.err = -ENOTDIR;
    f.how_to_point = NULL;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: no such socket: is gpuframed running? start "
                     "it (systemctl start gpuframed), or point this program at the socket it "
                     "listens on");
}
END_TEST

START_TEST(refused_tells_a_stale_socket_from_a_file) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-ECONNREFUSED);

    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: a socket file is there but no daemon "
                     "listens: gpuframed stopped without removing it, or crashed; start it "
                     "(systemctl start gpuframed), or pass --socket PATH / set GPUFRAMED_SOCKET");
    f.is_socket = 0;
    ck_assert_str_eq(explain(&f, buf), "cannot connect to /run/gf.sock: that is not a socket: pass "
                                       "--socket PATH / set GPUFRAMED_SOCKET");
}
END_TEST

START_TEST(permission_names_the_group_to_join) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-EACCES);

    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied: the socket admits user "
                     "root and group gpuframed (mode 0660): join group gpuframed (sudo usermod "
                     "-aG gpuframed $USER, then log in again)");
    /* Names the databases do not know are given as numbers. */
    f.owner[0] = f.group[0] = '\0';
    f.uid = 1234;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied: the socket admits user "
                     "uid 1234 and group gid 998 (mode 0660): join group gid 998 (sudo usermod "
                     "-aG gid 998 $USER, then log in again)");
}
END_TEST

START_TEST(permission_after_joining_says_log_in_again) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-EACCES);

    f.listed_in_group = 1;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied: you are in group "
                     "gpuframed, which may connect, but this login session began before you "
                     "joined it: log in again (or run 'newgrp gpuframed')");
    f.session_has_group = 1;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied, though you are in its "
                     "group gpuframed (mode 0660): a directory on its path or a security module "
                     "refuses");
}
END_TEST

START_TEST(permission_by_mode_or_directory) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-EACCES);

    f.mode = 0600;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied: the socket's mode 0600 "
                     "lets only its owner root connect (the daemon's socket_mode, or its socket "
                     "unit's SocketMode=, decides; 0660 admits group gpuframed)");
    f.stat_err = -EACCES;
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied on a directory on its "
                     "path: ask its owner for access, or pass --socket PATH / set "
                     "GPUFRAMED_SOCKET");
    f.err = -EPERM; /* what a security module may answer */
    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: permission denied on a directory on its "
                     "path: ask its owner for access, or pass --socket PATH / set "
                     "GPUFRAMED_SOCKET");
}
END_TEST

START_TEST(other_errors_and_truncation) {
    char buf[TEXT_BYTES];
    gf__connect_facts f = base(-ENAMETOOLONG);

    ck_assert_str_eq(explain(&f, buf),
                     "cannot connect to /run/gf.sock: the path has 12 bytes; a socket's has at "
                     "most 107");
    f.err = -EMFILE;
    ck_assert_str_eq(explain(&f, buf), "cannot connect to /run/gf.sock: Too many open files");
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

    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
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

static Suite *connect_error_suite(void) {
    Suite *s = suite_create("connect_error");
    TCase *tc = tcase_create("connect_error");
    tcase_add_test(tc, no_socket_says_start_it_or_point_elsewhere);
    tcase_add_test(tc, refused_tells_a_stale_socket_from_a_file);
    tcase_add_test(tc, permission_names_the_group_to_join);
    tcase_add_test(tc, permission_after_joining_says_log_in_again);
    tcase_add_test(tc, permission_by_mode_or_directory);
    tcase_add_test(tc, other_errors_and_truncation);
    tcase_add_test(tc, real_paths);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(connect_error_suite());
}

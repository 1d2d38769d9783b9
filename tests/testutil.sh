# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Helpers of the shell tests that run an installed or packaged gpuframed
# (example_installed.sh, plugin_build_installed.sh, man_pages.sh,
# deb_package.sh), the shell counterpart of testutil.h.  Sourced, never run;
# the sourcing script has `set -euo pipefail` on.  Defines:
#
#   fail TEXT...     prints "FAIL: TEXT" and exits 1.
#   gf_scratch NAME  makes a fresh directory $TMPDIR/NAME.XXXXXX (/tmp when
#                    TMPDIR is unset), sets $tmp to it and installs an EXIT
#                    trap that kills a daemon gf_daemon_start left running
#                    and removes $tmp.  Call once, before anything that
#                    writes.
#   gf_need TOOL...  exits 77 (ctest's skip) saying which TOOL is not on
#                    PATH, unless all are.
#   gf_scratch_install BUILD NAME
#                    skips (77) when BUILD was configured with GF_CONFIG_DIR
#                    (a scratch install would write there); else
#                    gf_scratch NAME, sets $p to $tmp/prefix and installs
#                    BUILD there with `cmake --install --prefix`, its output
#                    in $tmp/install.log (shown when it fails).
#   gf_daemon_start BINDIR CONFIG SOCKET WHAT
#                    starts BINDIR/gpuframed --config CONFIG --engine cpu
#                    --socket SOCKET, its output into $tmp/daemon.log, and
#                    waits until BINDIR/gpuframe lists its pipelines;
#                    fails, with the log, if it exits first; after 30 s
#                    returns anyway (the next step then fails).
#                    WHAT names the daemon in messages ("the installed
#                    gpuframed").
#   gf_daemon_stop WHAT
#                    SIGTERM to that daemon; fails, with the log, unless it
#                    exits 0.

fail() { echo "FAIL: $*"; exit 1; }

gf_daemon_pid=
gf_scratch() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap gf_scratch_cleanup EXIT
}
gf_scratch_cleanup() {
  [ -z "$gf_daemon_pid" ] || kill -KILL "$gf_daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}

gf_need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
  done
}

gf_scratch_install() {
  local build=$1 config_dir
  config_dir=$(sed -n 's/^GF_CONFIG_DIR:PATH=//p' "$build/CMakeCache.txt")
  [ -z "$config_dir" ] || { echo "SKIP: GF_CONFIG_DIR=$config_dir: a scratch install would write there"; exit 77; }
  gf_scratch "$2"
  p=$tmp/prefix
  cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
}

gf_daemon_start() {
  local bindir=$1 config=$2 sock=$3 what=$4
  "$bindir/gpuframed" --config "$config" --engine cpu --socket "$sock" >"$tmp/daemon.log" 2>&1 &
  gf_daemon_pid=$!
  for _ in $(seq 300); do
    "$bindir/gpuframe" list --socket "$sock" >/dev/null 2>&1 && return 0
    kill -0 "$gf_daemon_pid" 2>/dev/null || { cat "$tmp/daemon.log"; fail "$what exited"; }
    sleep 0.1
  done
}

gf_daemon_stop() {
  local status=0
  kill -TERM "$gf_daemon_pid"
  wait "$gf_daemon_pid" || status=$?
  gf_daemon_pid=
  [ "$status" -eq 0 ] || { cat "$tmp/daemon.log"; fail "$1 exited $status after SIGTERM"; }
}

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: set up, build, start gpuframed on its built-in configuration
# (the CUDA engine when a GPU answers, the CPU engine otherwise: its log says
# which and why), stream verified frames of every pipeline through the
# gpuframe client, print the figures, and stop the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${GF_BUILD_DIR:-build}
configured=$(cmake -S . -B "$build" ${GF_CMAKE_ARGS:-}) || { echo "$configured"; exit 1; }
# Say what the wait is for: a first build compiles the daemon, the client, the
# plugins and every test, and with nvcc the CUDA kernels, which take most of
# it (a minute or more on two cores); a later build only what changed.
if grep -q "CUDA engine ON" <<<"$configured"; then
  what="the CUDA engine (nvcc found: its kernels are most of the wait)"
else
  what="the CPU engine alone (no nvcc found, none needed)"
fi
echo "demo: building gpuframed, gpuframe, the plugins and the tests in $build/, with $what"
echo "demo: a first build takes a minute or more; a later one rebuilds only what changed"
# The build's own lines go to a log; its progress shows as a percentage (in
# place on a terminal), errors and warnings as they come: Make writes its
# progress as "[ 42%]" and the compilers' messages to stderr; Ninja (in a
# tree scripts/test.sh made) writes "[105/250]", and everything else it
# writes to stdout is theirs.
progress() {
  awk -v tty="$([ -t 1 ] && echo 1)" '
    match($0, /^\[ *[0-9]+%\]/) { p = substr($0, RSTART + 1, RLENGTH - 3) + 0 }
    match($0, /^\[[0-9]+\/[0-9]+\]/) { split(substr($0, 2, RLENGTH - 2), n, "/"); p = int(100 * n[1] / n[2]); ninja = 1 }
    p == "" && ninja { print (tty ? "\n" : "") $0; fflush() }
    p == "" { next }
    tty { printf "\rdemo: %d%% built", p; fflush() }
    !tty && p >= next_p { printf "demo: %d%% built\n", p; fflush(); next_p = p - p % 25 + 25 }
    { p = "" }
    END { if (tty) printf "\n" }'
}
cmake --build "$build" -j"$(nproc)" | tee "$build/demo-build.log" | progress
"$build"/gpuframed --version

run=$(mktemp -d)
sock="$run/gpuframed.sock"
"$build"/gpuframed --socket "$sock" 2>"$run/daemon.log" &
daemon=$!
stop() {
  kill -TERM "$daemon" 2>/dev/null && wait "$daemon" || true
  echo "--- daemon log ---"; cat "$run/daemon.log"; rm -rf "$run"
}
trap stop EXIT
for _ in $(seq 300); do
  [ -S "$sock" ] && break
  kill -0 "$daemon" 2>/dev/null || { echo "gpuframed exited during start-up"; exit 1; }
  sleep 0.1
done
grep -E "engine (auto|cuda|cpu)" "$run/daemon.log" || true

gf() { "$build"/gpuframe "$1" --socket "$sock" "${@:2}"; }
gf list
for spec in "echo 4K 2000" "echo 4M 100" "affine 1M 200" "sincos 1M 50" "normalize_u8 - 30"; do
  set -- $spec
  size=(); [ "$2" = - ] || size=(--size "$2")
  echo "== stream $1 ${2/-/default size} x $3, verified against the C reference"
  gf stream --pipeline "$1" "${size[@]}" --count "$3" --window 8 --verify
done
gf stats

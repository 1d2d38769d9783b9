#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the GPU machine (no network, none of our libraries): unpack the Debian
# packages carried in .deps/ (made by scripts/gpu-deps.sh), build for sm_90, run every test (the gpu ones
# included), stream verified frames of every pipeline at 4 KiB, 1 MiB and
# 16 MiB with 2 and 4 slots on the CUDA engine, run the benchmark, and take
# a STATS snapshot and a trace of 4 MiB echo frames from three clients.
# Everything lands in $OUT (or ./gpu-out), in at most 8 files:
#   summary.txt ctest.log build.log daemons.log stats.prom trace.json trace.svg
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}; mkdir -p "$out"
logs=$(mktemp -d)
for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
L=/opt/deps/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$L
export CPATH=/opt/deps/usr/include
# systemd's tools for the socket-activation and unit tests (scripts/gpu-deps.sh).
[ -d .deps/systemd-tools/bin ] && export PATH=$PWD/.deps/systemd-tools/bin:$PATH
build=build-gpu
exec > >(tee "$out/summary.txt") 2>&1
nvidia-smi -L

{ cmake -S . -B $build -DGF_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build $build -j16; } \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "== build ok"
# example_installed and deb_package check an install on a Debian machine like CI's; here the
# libraries come from .deps unpacked under /opt/deps (PKG_CONFIG_SYSROOT_DIR), which they
# cannot see through.  CI runs both.
(cd $build && ctest --output-on-failure --timeout 300 -E '^(example_installed|deb_package)$') \
  > "$out/ctest.log" 2>&1
echo "== ctest (all labels, gpu included): $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
grep -E "Passed|Failed|Skipped|\*\*\*" "$out/ctest.log" | sed 's/^/   /'
echo "== overlap of the two slots (test_stats_live, cuda engine)"
GF_TEST_ENGINE=cuda $build/tests/test_stats_live 2>&1 | grep -E "gpu over|trace:|Checks"

start_daemon() { # NAME SOCKET ARGS...: starts gpuframed, waits for its socket
  local name=$1 sock=$2; shift 2
  $build/gpuframed --socket "$sock" "$@" 2>"$logs/$name.log" &
  daemon=$!
  for _ in $(seq 600); do [ -S "$sock" ] && return 0; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
  echo "gpuframed ($name) did not start"; cat "$logs/$name.log"; return 1
}

verify() { # slots
  local sock=/tmp/gfv$1.sock fail=0
  start_daemon "verify-$1" $sock --config bench/verify-sizes.json --engine cuda --slots "$1" || return 1
  for p in echo affine sincos; do
    for s in 4K 1M 16M; do
      r=$($build/gpuframe stream --socket $sock --pipeline $p --size $s --count 64 --window 8 --verify --quiet --no-shm 2>&1) || fail=1
      echo "slots=$1 $p $s --no-shm: $r"
      r=$($build/gpuframe stream --socket $sock --pipeline $p --size $s --count 64 --window 8 --verify --quiet --shm 2>&1) || fail=1
      echo "slots=$1 $p $s --shm: $r"
    done
  done
  for p in normalize_4k normalize_1m normalize_16m; do
    r=$($build/gpuframe stream --socket $sock --pipeline $p --count 64 --window 8 --verify --quiet --no-shm 2>&1) || fail=1
    echo "slots=$1 $p --no-shm: $r"
    r=$($build/gpuframe stream --socket $sock --pipeline $p --count 64 --window 8 --verify --quiet --shm 2>&1) || fail=1
    echo "slots=$1 $p --shm: $r"
  done
  # The media kinds: their one frame size; few camera frames, whose C
  # reference takes a fifth of a second each.
  for run in "camera 8" "melspec 64"; do
    read -r p n <<<"$run"
    for t in --no-shm --shm; do
      r=$($build/gpuframe stream --socket $sock --pipeline $p --count $n --window 8 --verify --quiet $t 2>&1) || fail=1
      echo "slots=$1 $p $t: $r"
    done
  done
  kill -TERM $daemon; wait $daemon; echo "slots=$1 daemon exit status $? (0 = drained cleanly)"
  return $fail
}
echo "== verified streams, CUDA engine"
verify 2; verify 4

echo "== benchmark: limits and daemon in one run, 1/2/4 slots (bench/run.sh)"
bench/run.sh $build
echo "== the same, timing events off, short"
GF_BENCH_DAEMON_ARGS="--config bench/echo-untimed.json" bench/run.sh $build --short
echo "== plugins: clamp, the MLP, normalize_u8 -> mlp (bench/plugins.sh)"
bench/plugins.sh $build
echo "== what timing events cost, in-process (bench/event_cost.cu)"
nvcc -O2 -arch=sm_90 -std=c++17 bench/event_cost.cu -o $build/event_cost && $build/event_cost
echo "== a small frame's round trip: copies or zero-copy, host function or polling (bench/zero_copy_cost.cu)"
nvcc -O2 -arch=sm_90 -std=c++17 -Ikernels -Iprotocol bench/zero_copy_cost.cu kernels/echo.cu \
  -o $build/zero_copy_cost && $build/zero_copy_cost

echo "== stats and trace: CUDA engine, 2 slots, 4 MiB echo frames from 3 clients"
sock=/tmp/gft.sock
if start_daemon trace $sock --config bench/echo.json --engine cuda; then
  pids=()
  for i in 1 2 3; do
    $build/gpuframe stream --socket $sock --pipeline echo --size 4M --count 150 --window 8 --quiet &
    pids+=($!)
  done
  wait "${pids[@]}"
  $build/gpuframe stats --socket $sock
  $build/gpuframe stats --socket $sock --prometheus > "$out/stats.prom"
  $build/gpuframe trace --socket $sock --count 24 --output "$out/trace.json" --svg "$out/trace.svg"
  kill -TERM $daemon; wait $daemon
fi
for f in "$logs"/*.log; do echo "===== $(basename "$f")"; cat "$f"; done > "$out/daemons.log"

#!/usr/bin/env bash
# On the GPU machine (no network, none of our libraries): unpack the Debian
# packages carried in .deps/, build for sm_90, run every test (the gpu ones
# included), stream verified frames of every pipeline at 4 KiB, 1 MiB and
# 16 MiB with 2 and 4 slots on the CUDA engine, then run the benchmark.
# Logs go to $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}; mkdir -p "$out"
for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
L=/opt/deps/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$L
export CPATH=/opt/deps/usr/include
nvidia-smi -L | tee "$out/device.txt"
build=build-gpu
{ cmake -S . -B $build -DGF_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build $build -j16; } \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "== build ok"
(cd $build && ctest --output-on-failure --timeout 300) > "$out/ctest.log" 2>&1
echo "== ctest (all labels, gpu included): $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
grep -E "Passed|Failed|Skipped|\*\*\*" "$out/ctest.log" | sed 's/^/   /'

verify() { # slots
  local sock=/tmp/gfv$1.sock fail=0
  $build/gpuframed --config bench/verify-sizes.json --engine cuda --slots "$1" --socket $sock 2>"$out/verify-$1.log" &
  local pid=$!
  for _ in $(seq 600); do [ -S $sock ] && break; sleep 0.1; done
  for p in echo affine sincos; do
    for s in 4K 1M 16M; do
      r=$($build/gpuframe stream --socket $sock --pipeline $p --size $s --count 64 --window 8 --verify --quiet 2>&1) || fail=1
      echo "slots=$1 $p $s: $r"
    done
  done
  for p in normalize_4k normalize_1m normalize_16m; do
    r=$($build/gpuframe stream --socket $sock --pipeline $p --count 64 --window 8 --verify --quiet 2>&1) || fail=1
    echo "slots=$1 $p: $r"
  done
  kill -TERM $pid; wait $pid; echo "slots=$1 daemon exit status $? (0 = drained cleanly)"
  return $fail
}
echo "== verified streams, CUDA engine"
{ verify 2; verify 4; } 2>&1 | tee "$out/verify.txt"
echo "== benchmark"
bench/bench.sh $build cuda cuda-untimed cpu 2>&1 | tee "$out/bench.txt"
GF_BENCH_SLOTS=4 bench/bench.sh $build cuda 2>&1 | tail -3 | tee -a "$out/bench.txt"

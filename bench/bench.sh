#!/usr/bin/env bash
# Benchmark: the same echo streams through gpuframed on each engine, measured
# in one run so the figures and ratios are comparable.  Prints one table.
#
#   bench/bench.sh BUILD_DIR [RUNS...]     (default runs: cuda cuda-untimed cpu)
#
# A run is an engine name, optionally with "-untimed": the same engine with
# timing_events off (no CUDA events around the stages), to show what
# measuring costs.
# For each engine and frame size: a latency run (window 1: one frame in flight,
# so p50/p99 are the service time) and a throughput run (window 16: the slots
# stay busy).  2 slots (ping-pong), the daemon's default.
set -euo pipefail
build=${1:?usage: bench.sh BUILD_DIR [ENGINES...]}; shift
engines=("$@"); [ $# -gt 0 ] || engines=(cuda cuda-untimed cpu)
slots=${GF_BENCH_SLOTS:-2}
run=$(mktemp -d); trap 'rm -rf "$run"' EXIT
declare -A res

for engine in "${engines[@]}"; do
  sock="$run/$engine.sock"
  config=bench/echo.json; [[ $engine == *-untimed ]] && config=bench/echo-untimed.json
  "$build"/gpuframed --config "$config" --engine "${engine%-untimed}" --slots "$slots" \
    --socket "$sock" 2>"$run/$engine.log" &
  pid=$!
  for _ in $(seq 600); do [ -S "$sock" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if ! [ -S "$sock" ]; then echo "bench: $engine engine did not start:"; cat "$run/$engine.log"; continue; fi
  for spec in "4K 20000 4000" "4M 400 200"; do
    set -- $spec
    size=$1; n_thr=$2; n_lat=$3
    "$build"/gpuframe stream --socket "$sock" --pipeline echo --size "$size" --count "$n_lat" --window 1 --quiet > "$run/lat"
    "$build"/gpuframe stream --socket "$sock" --pipeline echo --size "$size" --count "$n_thr" --window 16 --quiet > "$run/thr"
    res[$engine,$size,fps]=$(sed -n 's/.*frames_per_s=\([0-9.]*\).*/\1/p' "$run/thr")
    res[$engine,$size,gbps]=$(sed -n 's/.*in_GBps=\([0-9.]*\).*/\1/p' "$run/thr")
    res[$engine,$size,p50]=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' "$run/lat")
    res[$engine,$size,p99]=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' "$run/lat")
    res[$engine,$size,tp50]=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' "$run/thr")
    res[$engine,$size,tp99]=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' "$run/thr")
  done
  kill -TERM $pid; wait $pid || echo "bench: $engine daemon exited with $?"
  grep -E "engine (auto|cuda|cpu):" "$run/$engine.log" | head -2
done

printf '\necho frames, %s slots; latency = window 1, throughput = window 16 (p50/p99 at window 16 include queueing)\n' "$slots"
printf '%-13s %-5s %12s %9s %12s %12s %14s %14s\n' engine size frames/s GB/s p50_us p99_us w16_p50_us w16_p99_us
for engine in "${engines[@]}"; do
  for size in 4K 4M; do
    printf '%-13s %-5s %12s %9s %12s %12s %14s %14s\n' "$engine" "$size" "${res[$engine,$size,fps]:-?}" \
      "${res[$engine,$size,gbps]:-?}" "${res[$engine,$size,p50]:-?}" "${res[$engine,$size,p99]:-?}" \
      "${res[$engine,$size,tp50]:-?}" "${res[$engine,$size,tp99]:-?}"
  done
done
ratio() { # A B: frames/s of run A over run B, per size
  for size in 4K 4M; do
    awk -v a="${res[$1,$size,fps]:-0}" -v b="${res[$2,$size,fps]:-0}" -v s=$size -v an=$1 -v bn=$2 \
      'BEGIN { if (a > 0 && b > 0) printf "ratio %s/%s frames/s at %s: %.3f\n", an, bn, s, a / b }'
  done
}
has() { local e; for e in "${engines[@]}"; do [ "$e" = "$1" ] && return 0; done; return 1; }
has cuda && has cpu && ratio cuda cpu
has cuda && has cuda-untimed && ratio cuda cuda-untimed

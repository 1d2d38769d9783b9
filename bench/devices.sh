#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 35's figures for a host of several GPUs, in one run: one daemon on
# every GPU against one daemon on GPU 0 (`--devices 0`), both with their
# default shards, under three loads; and one client's latency on the
# every-GPU daemon against the same daemon with `--shards 1`.
#
#   bench/devices.sh BUILD_DIR [--short] [--repeats R]
#
# Loads (bench/shards.json; every group's clients send their first frame
# together, --start-at):
#   sincos  16 clients, sincos_1000 on 1 MiB frames, window 16 (compute-bound)
#   shm     8 clients, echo of 16 MiB by shared memory, window 16
#   small   128 clients, echo of 4 KiB through the socket, window 16
#   lat     1 client, echo of 4 KiB, window 1: p50 and p99
# A group's frames/s is all its frames over the span from the first client's
# start to the last one's end (wall clock); `spread` is the slowest and the
# fastest client's own rate over the mean of them.  The limit beside the shm
# figure is gf_devices_copy's: 16 MiB both ways on every GPU at once, in
# this run.  Targets (N GPUs): sincos >= 0.9 N, shm >= 0.75 N or >= 0.8 of
# the copy limit, small >= 0.75 N, every client within 10 % of the mean,
# one client's p50 and p99 within 5 % of --shards 1.
#
# stdout: each run's line, then the table and one `verdict NAME ok|FAIL` per
# target.  Exit status 1 when a run failed, 2 on a bad command line or a
# host of fewer than two GPUs.
set -uo pipefail
usage="usage: bench/devices.sh BUILD_DIR [--short] [--repeats R]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
short=0 repeats=2
while [ $# -gt 0 ]; do
  case $1 in
    --short) short=1; shift ;;
    --repeats) repeats=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[[ $repeats =~ ^[1-9]$ ]] || { echo "bench: devices: --repeats: 1 to 9, got '$repeats'" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
for f in gpuframed gpuframe bench/gf_devices_copy; do
  [ -x "$build/$f" ] || { echo "bench: devices: $build/$f not built" >&2; exit 2; }
done
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -lt 2 ]; then
  echo "bench: devices: $gpus GPU(s) (nvidia-smi -L): needs two or more" >&2; exit 2
fi
all=$(seq -s, 0 $((gpus - 1)))
if [ $short = 1 ]; then n_sincos=40 n_shm=20 n_small=400 n_lat=500
else n_sincos=600 n_shm=1500 n_small=20000 n_lat=20000; fi
run=$(mktemp -d)
daemon=''
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; rm -rf "$run"' EXIT
status=0

nvidia-smi -L
"$build/bench/gf_devices_copy" --size 16M --seconds 1 > "$run/limits" || status=1
cat "$run/limits"

start_daemon() { # NAME ARGS...
  local name=$1; shift
  sock=$run/$name.sock
  "$build/gpuframed" --socket "$sock" --config bench/shards.json --engine cuda "$@" \
    2> "$run/daemon-$name.log" &
  daemon=$!
  # Ready, not only bound: the socket exists before the shards are open
  # (32 of them on four H200s took over 1.5 s, and the first load's clients
  # all started late), and a connection waits in its backlog meanwhile.
  for _ in $(seq 600); do
    grep -q "ready: listening" "$run/daemon-$name.log" && {
      grep -m1 -o "[0-9]* shard(s)[^,]*" "$run/daemon-$name.log" | sed "s/^/bench: devices: $name: /"
      return 0
    }
    kill -0 $daemon 2>/dev/null || break; sleep 0.1
  done
  echo "bench: devices: gpuframed ($name $*) did not start" >&2; cat "$run/daemon-$name.log" >&2
  daemon=''; status=1; return 1
}
stop_daemon() { kill -INT $daemon 2>/dev/null; wait $daemon 2>/dev/null; daemon=''; }

# N clients of `gpuframe stream ARGS...` starting together, their first
# frames sent LEAD seconds from now; prints "fps=F GBps=G spread_lo=L
# spread_hi=H p50_us=P p99_us=Q late=K" (p50 the mean of the clients', p99
# the worst; K clients whose set-up outlasted the lead, which started late
# and stretch the span) or "failed".
clients() { # N LEAD ARGS...
  local n=$1 lead=$2 pids=() i at; shift 2
  at=$(awk -v now="$(date +%s.%N)" -v lead="$lead" 'BEGIN { printf "%.3f\n", now + lead }')
  for ((i = 0; i < n; i++)); do
    "$build/gpuframe" stream --socket "$sock" --quiet --start-at "$at" "$@" > "$run/c$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  cat "$run"/c* | awk -v n="$n" -v at="$at" '
    /^frames=/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      start = f["started"]; end = start + f["seconds"]; late += start > at + 0.01
      if (!ok || start < first) first = start; if (!ok || end > last) last = end
      ok++; frames += f["frames"]; bytes += f["in_GBps"] * f["seconds"]
      rate[ok] = f["frames"] / f["seconds"]; sum += rate[ok]
      p50 += f["p50_us"]; if (f["p99_us"] > p99) p99 = f["p99_us"] }
    END {
      if (ok != n || last <= first) { print "failed"; exit }
      lo = hi = rate[1]
      for (i = 2; i <= ok; i++) { if (rate[i] < lo) lo = rate[i]; if (rate[i] > hi) hi = rate[i] }
      printf "fps=%.0f GBps=%.2f spread_lo=%.3f spread_hi=%.3f p50_us=%.1f p99_us=%.1f late=%d\n",
             frames / (last - first), bytes / (last - first), lo / (sum / ok), hi / (sum / ok),
             p50 / ok, p99, late }'
  grep -h -v "^frames=" "$run"/c* | head -3 | sed 's/^/bench: devices: client: /' >&2
  rm -f "$run"/c*
}
# The 16 MiB clients' regions (512 MiB each, window 16) take the daemon
# seconds to pin, one after another: their lead is longer.
loads() { # VARIANT
  echo "run rep=$rep variant=$1 load=sincos $(clients 16 1.5 --pipeline sincos_1000 --size 1M \
    --count $n_sincos --window 16)"
  echo "run rep=$rep variant=$1 load=shm $(clients 8 4 --pipeline echo --size 16M --shm \
    --count $n_shm --window 16)"
  echo "run rep=$rep variant=$1 load=small $(clients 128 3 --pipeline echo --size 4096 --no-shm \
    --count $n_small --window 16)"
}
latency() { # VARIANT
  echo "run rep=$rep variant=$1 load=lat $(clients 1 1 --pipeline echo --size 4096 --no-shm \
    --count $n_lat --window 1)"
}

for ((rep = 1; rep <= repeats; rep++)); do
  start_daemon all --devices "$all" && { loads all; latency all; stop_daemon; }
  start_daemon one --devices 0 && { loads one; stop_daemon; }
  start_daemon all_shard1 --devices "$all" --shards 1 && { latency all_shard1; stop_daemon; }
done | tee "$run/points"
grep -q "failed" "$run/points" && status=1
if grep -qE "^run .* late=[1-9]" "$run/points"; then
  echo "bench: devices: some clients started late (their set-up outlasted the lead: 'late=' above);" \
    "those groups' spans are stretched and their figures low"
fi

# Medians over the repeats; a ratio is the median of the repeats' own ratios.
awk -v gpus="$gpus" -v repeats="$repeats" -v limits="$run/limits" '
  function med(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function get(v, l, f, r) { return (v SUBSEP l SUBSEP f SUBSEP r) in x ? x[v, l, f, r] : "" }
  function fig(v, l, f,   r, a, n) {
    n = 0; for (r = 1; r <= repeats; r++) { if (get(v, l, f, r) == "") return -1; a[++n] = get(v, l, f, r) + 0 }
    return med(a, n)
  }
  function ratio(va, vb, l, f,   r, a, n, p, q) {
    n = 0
    for (r = 1; r <= repeats; r++) {
      p = get(va, l, f, r); q = get(vb, l, f, r)
      if (p == "" || q == "" || q + 0 == 0) return -1
      a[++n] = p / q
    }
    return med(a, n)
  }
  function verdict(name, ok, what) { printf "verdict %s %s %s\n", name, ok ? "ok" : "FAIL", what }
  BEGIN {
    while ((getline line < limits) > 0)
      if (line ~ /^limit name=echo_copies/) {
        split(line, w, " "); d = ""; g = ""
        for (i in w) { split(w[i], kv, "="); if (kv[1] == "devices") d = kv[2]; if (kv[1] == "GBps") g = kv[2] }
        copies[d] = g
      }
  }
  /^run / {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
    for (i = 5; i <= NF; i++) { split($i, kv, "="); x[t["variant"], t["load"], kv[1], t["rep"]] = kv[2] }
  }
  END {
    printf "\n%-34s %12s %12s %8s %s\n", "figure (median of " repeats ")", "all " gpus " GPUs", "GPU 0", "ratio", "target"
    n = split("sincos shm small", L, " ")
    want["sincos"] = 0.9 * gpus; want["shm"] = 0.75 * gpus; want["small"] = 0.75 * gpus
    for (i = 1; i <= n; i++) {
      l = L[i]; a = fig("all", l, "fps"); b = fig("one", l, "fps"); q = ratio("all", "one", l, "fps")
      printf "%-34s %12.0f %12.0f %8.3f >= %.2f\n", l " frames/s", a, b, q, want[l]
      r[l] = q
    }
    shm_gbps = fig("all", "shm", "GBps"); lim = copies[gpus] + 0
    printf "%-34s %12.2f %12s %8.3f >= 0.80 (copies both ways on %d GPUs: %.2f GB/s)\n",
           "shm GB/s of the copy limit", shm_gbps, "-", (lim > 0 ? shm_gbps / lim : -1), gpus, lim
    for (i = 1; i <= n; i++) {
      l = L[i]
      printf "%-34s %12.3f %12.3f\n", l " slowest client / mean", fig("all", l, "spread_lo"), fig("one", l, "spread_lo")
      printf "%-34s %12.3f %12.3f\n", l " fastest client / mean", fig("all", l, "spread_hi"), fig("one", l, "spread_hi")
    }
    p50 = ratio("all", "all_shard1", "lat", "p50_us"); p99 = ratio("all", "all_shard1", "lat", "p99_us")
    printf "%-34s %12.1f %12.1f %8.3f <= 1.05 (against --shards 1 on all GPUs)\n", "one client p50 us",
           fig("all", "lat", "p50_us"), fig("all_shard1", "lat", "p50_us"), p50
    printf "%-34s %12.1f %12.1f %8.3f <= 1.05\n", "one client p99 us",
           fig("all", "lat", "p99_us"), fig("all_shard1", "lat", "p99_us"), p99
    print ""
    for (i = 1; i <= n; i++)
      verdict(L[i] "_scaling", r[L[i]] >= want[L[i]] || (L[i] == "shm" && lim > 0 && shm_gbps / lim >= 0.8),
              sprintf("%.3f x one GPU", r[L[i]]))
    for (i = 1; i <= n; i++) {
      lo = fig("all", L[i], "spread_lo"); hi = fig("all", L[i], "spread_hi")
      verdict(L[i] "_balance", lo >= 0.9 && hi <= 1.1 && lo > 0, sprintf("clients %.3f..%.3f of the mean", lo, hi))
    }
    verdict("latency_p50", p50 > 0 && p50 <= 1.05, sprintf("%.3f", p50))
    verdict("latency_p99", p99 > 0 && p99 <= 1.05, sprintf("%.3f", p99))
  }' "$run/points"
exit $status

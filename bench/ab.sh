#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two builds of the daemon against each other in one run: whether a change
# made anything slower beyond the run-to-run spread (issue 32's before and
# after).  Each round starts a fresh daemon of each build in turn (the order
# alternates between rounds), with the built-in default configuration, and
# measures with the NEW build's client (gpuframe stream, echo):
#
#   one 4 KiB       one client, window 16: frames/s
#   one 4 KiB w1    one client, window 1: p50 round trip, µs (lower is better)
#   64 x 4 KiB      64 clients at once, window 16: frames/s (all frames over
#                   the longest client's time)
#   one shm 16 MiB  one client by shared memory, window 16: GB/s in
#   64 x shm 16 MiB 64 clients by shared memory, window 2: GB/s in
#
#   bench/ab.sh OLD_BUILD NEW_BUILD [--engine cuda|cpu] [--short]
#   bench/ab.sh --build SOURCE_DIR BUILD_DIR
#
# --build: builds gpuframed and gpuframe of SOURCE_DIR (this tree, or an old
# commit's sources beside it: `git archive --prefix=old/ COMMIT | tar -x`)
# into BUILD_DIR for sm_90, on a GPU machine with the libraries carried in
# .deps/ (scripts/gpu-deps.sh), unpacked as scripts/gpu-check.sh does.
#
# The table gives each figure's median over the rounds for OLD and NEW,
# NEW's ratio to OLD (above 1: better, latency inverted), the spread (the
# larger of the two builds' max/min over the rounds) and "ok", or "SLOWER"
# when the ratio is below 1/spread.  GF_BENCH_ROUNDS: rounds (5; 1 with
# --short, which only checks the mechanics).  About 2-3 minutes on an H200
# host with 5 rounds.  Exit status 1 when a daemon or a client failed (its
# figure is '?'), 2 on a bad command line.
set -uo pipefail
usage="usage: bench/ab.sh OLD_BUILD NEW_BUILD [--engine cuda|cpu] [--short] | --build SOURCE_DIR BUILD_DIR"
# Our libraries on a GPU machine: .deps/ unpacked under /opt/deps (scripts/gpu-check.sh).
if [ -d "$(dirname "$0")/../.deps" ] && ls "$(dirname "$0")"/../.deps/*.deb > /dev/null 2>&1; then
  [ -d /opt/deps/usr/lib ] || for f in "$(dirname "$0")"/../.deps/*.deb; do dpkg -x "$f" /opt/deps; done
  L=/opt/deps/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$L
  export CPATH=/opt/deps/usr/include
fi
if [ "${1:-}" = --build ]; then
  [ $# = 3 ] && [ -f "$2/CMakeLists.txt" ] || { echo "$usage" >&2; exit 2; }
  { cmake -S "$2" -B "$3" -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF &&
    cmake --build "$3" -j"$(nproc)" --target gpuframed gpuframe; } > "$3.log" 2>&1 ||
    { tail -20 "$3.log"; exit 1; }
  echo "bench: ab: built $2 into $3"
  exit 0
fi
[ $# -ge 2 ] && [ -d "$1" ] && [ -d "$2" ] || { echo "$usage" >&2; exit 2; }
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd); shift 2
engine=cuda short=0
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --short) short=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[[ $engine == cuda || $engine == cpu ]] || { echo "$usage" >&2; exit 2; }
for b in "$old" "$new"; do
  [ -x "$b/gpuframed" ] || { echo "bench: ab: $b/gpuframed not built" >&2; exit 2; }
done
[ -x "$new/gpuframe" ] || { echo "bench: ab: $new/gpuframe not built" >&2; exit 2; }
client=$new/gpuframe
if [ $short = 1 ]; then
  rounds=${GF_BENCH_ROUNDS:-1} n_w16=2000 n_w1=300 n_each=50 n_shm=8 n_shm_each=2
else
  rounds=${GF_BENCH_ROUNDS:-5} n_w16=100000 n_w1=20000 n_each=3000 n_shm=600 n_shm_each=20
fi
run=$(mktemp -d); trap 'rm -rf "$run"' EXIT
status=0
: > "$run/points"

# One client's summary line (frames=... errors=0 ...), or "failed: why".
stream() { # SOCKET SIZE COUNT WINDOW --shm|--no-shm
  local out
  if out=$(timeout 120 "$client" stream --socket "$1" --pipeline echo --size "$2" --count "$3" \
             --window "$4" --quiet "$5" 2>&1) && [[ $out == frames=*" errors=0 "* ]]; then
    echo "$out"
  else
    echo "failed: $(echo "$out" | tail -1)"
  fi
}
# Field KEY of a summary line, or '?'.
field() { # LINE KEY
  [[ $1 == frames=* ]] || { echo '?'; return; }
  echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'
}
# C clients at once: all frames (or bytes) over the longest client's time.
group() { # SOCKET C SIZE COUNT_EACH WINDOW --shm|--no-shm KEY(frames_per_s|in_GBps)
  local pids=() i
  for ((i = 0; i < $2; i++)); do
    stream "$1" "$3" "$4" "$5" "$6" > "$run/client$i" & pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  for ((i = 0; i < $2; i++)); do cat "$run/client$i"; done | awk -v n="$2" -v key="$7" '
    /^frames=/ { ok++
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      total += (key == "in_GBps" ? f["in_GBps"] * f["seconds"] : f["frames"])
      if (f["seconds"] > hi) hi = f["seconds"] }
    END { if (ok == n && hi > 0) printf "%.3f\n", total / hi; else print "?" }'
  rm -f "$run"/client*
}
point() { # BUILD FIGURE VALUE
  echo "$1|$2|$3" >> "$run/points"
  echo "round $round: $1 $2 $3"
  [ "$3" = '?' ] && status=1
}
measure() { # BUILD(old|new) DIR
  local sock=$run/$1.sock log=$run/daemon-$1.log pid ok=0
  "$2"/gpuframed --engine "$engine" --socket "$sock" 2> "$log" &
  pid=$!
  for _ in $(seq 600); do
    [ -S "$sock" ] && { ok=1; break; }
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  if [ $ok = 0 ]; then
    echo "bench: ab: $1's gpuframed did not start:"; tail -5 "$log"; status=1
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; return
  fi
  group "$sock" 8 4096 200 16 --no-shm frames_per_s > /dev/null # warm every shard up
  point "$1" "one 4 KiB frames/s" "$(field "$(stream "$sock" 4096 $n_w16 16 --no-shm)" frames_per_s)"
  point "$1" "one 4 KiB w1 p50 us" "$(field "$(stream "$sock" 4096 $n_w1 1 --no-shm)" p50_us)"
  point "$1" "64 x 4 KiB frames/s" "$(group "$sock" 64 4096 $n_each 16 --no-shm frames_per_s)"
  point "$1" "one shm 16 MiB GB/s" "$(field "$(stream "$sock" 16M $n_shm 16 --shm)" in_GBps)"
  point "$1" "64 x shm 16 MiB GB/s" "$(group "$sock" 64 16M $n_shm_each 2 --shm in_GBps)"
  kill -TERM $pid; wait $pid || { echo "bench: ab: $1's gpuframed exited with $?"; status=1; }
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2)); then measure old "$old"; measure new "$new"
  else measure new "$new"; measure old "$old"; fi
done

echo
echo "old: $old"
echo "new: $new (its client for both); engine $engine, $rounds round(s), $((SECONDS - start)) s"
awk -F'|' '
  { v[$1, $2] = v[$1, $2] " " $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
  function stats(list, out,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 1; i <= k; i++) if (a[i] == "?") return 0
    for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j] + 0 < a[j - 1] + 0; j--) {
      t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    out["med"] = k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    out["spread"] = a[1] > 0 ? a[k] / a[1] : 0
    return k
  }
  END {
    printf "%-22s %12s %12s %7s %7s  %s\n", "figure", "old median", "new median", "new/old", "spread", "verdict"
    for (i = 1; i <= n; i++) {
      f = order[i]; delete o; delete w
      if (!stats(v["old", f], o) || !stats(v["new", f], w) || o["med"] <= 0 || w["med"] <= 0) {
        printf "%-22s %12s %12s %7s %7s  %s\n", f, "?", "?", "?", "?", "failed"; continue }
      r = f ~ / us$/ ? o["med"] / w["med"] : w["med"] / o["med"]
      s = o["spread"] > w["spread"] ? o["spread"] : w["spread"]
      printf "%-22s %12.5g %12.5g %7.3f %7.3f  %s\n", f, o["med"], w["med"], r, s,
             (r >= 1 / s ? "ok" : "SLOWER")
    }
  }' "$run/points"
exit $status

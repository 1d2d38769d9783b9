#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The plugin benchmark (issue 13): gpuframed serving the repository's MLP
# plugin (plugins/mlp) alone and behind normalize_u8, and the example plugin
# clamp.  Each pipeline is first streamed with --verify (results against the
# plugin's C reference, within its tolerance), then without, for frames/s;
# then the daemon's TRACE gives the mean time of each stage's kernels over
# the timed frames, and the H2D/D2H counts show one copy each way per frame.
#
# Then many clients (issue 24), on a daemon of the default configuration
# otherwise (default shards, one frame in timing_sample_every timed): the
# one-vector mlp and classify verified at windows 1, 7 and 64 (submissions of
# 1 to 64 frames), then --clients clients at once, window 16, each frame
# through the socket; and the frames per submission STATS counted for them.
#
#   bench/plugins.sh BUILD_DIR [--engine cuda|cpu] [--frames N] [--clients C]
#                    [--client-frames N] [--clients-only] [--shards S] [--completion MODE]
#                    [--no-graphs] [--batch-delay US|auto] [--pool-shards N]
#
# --frames: each single-pipeline run's frames (4000).  --client-frames: each
# of the many clients' frames (30000: about 0.8 s for 16 on an H200; a
# shorter run is weighed by its clients' start and end, bench/README.md,
# "Plugins").
#
# --client DIR: stream with DIR's gpuframe (default BUILD_DIR's; it needs
# --start-at, from 4aff3ce on: give an old build the new client, as
# bench/ab.sh does).  --clients-only: the many-clients runs alone.  --shards, --completion,
# --no-graphs (cuda_graphs false): the many-clients daemon's (default: the
# daemon's own choice).  --batch-delay: its
# pipelines' max_batch_delay_us, microseconds or auto (default: the key left
# out, so that builds from before it exist can be measured the same way).
# --pool-shards N: the many-clients daemon's pool_shards (0: each shard
# submits only its own clients' frames), to compare with the default.
#
# stdout: one line per pipeline,
#   plugin PIPELINE frames_per_s=F p50_us=P h2d_us=A kernel_us=K [stage k=US ...] d2h_us=D
# then for each of the one-vector mlp and classify, one client at window 1 and
# many clients,
#   single PIPELINE window=1 p50_us=P p99_us=Q
#   clients PIPELINE clients=C window=16 frames_per_s=F worst_p99_us=P frames_per_submission=B
# (the clients start together, --start-at; frames_per_s: all clients' frames over their
# span, from the first one's started= to the last one's end; B: '-' from a daemon
# without STATS' pipelines[].batches).
# Exit status 1 when a stream failed or verification found a difference.
set -uo pipefail
usage="usage: bench/plugins.sh BUILD_DIR [--engine cuda|cpu] [--frames N] [--clients C] [--client-frames N] [--client DIR] [--clients-only] [--shards S] [--completion MODE] [--no-graphs] [--batch-delay US|auto] [--pool-shards N]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine=cuda frames=4000 client_frames=30000 clients=16 clients_only=0 daemon_keys="" delay="" client=$build/gpuframe
while [ $# -gt 0 ]; do
  case $1 in
    --clients) clients=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --client-frames) client_frames=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --client) client=$(cd "${2:-.}" && pwd)/gpuframe; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --clients-only) clients_only=1; shift ;;
    --shards) daemon_keys+='"shards": '${2:-}', '; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --completion) daemon_keys+='"completion": "'${2:-}'", '; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --no-graphs) daemon_keys+='"cuda_graphs": false, '; shift ;;
    --pool-shards) daemon_keys+='"pool_shards": '${2:-}', '; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --batch-delay) d=${2:-}; [ "$d" = auto ] && d='"auto"'
                   delay=', "max_batch_delay_us": '$d; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --frames) frames=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 2
plugins=$build/plugins
# gf_mlp.so loads its CUDA side, gf_mlp_cuda.so, on the cuda engine only.
needs="gpuframed gpuframe plugins/gf_mlp.so plugins/gf_example.so plugins/mlp-demo.gfw"
[ "$engine" = cpu ] || needs="$needs plugins/gf_mlp_cuda.so"
for f in $needs; do
  [ -e "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done
"$client" stream --help 2>&1 | grep -q -- --start-at ||
  { echo "bench: $client has no --start-at (4aff3ce): give --client a newer build" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/s.sock
# The MLP alone and behind normalize_u8, in both daemons below.
mlp_pipelines='{"name": "mlp", "kind": "plugin", "path": "'$plugins'/gf_mlp.so",
   "params": {"weights": "'$plugins'/mlp-demo.gfw"}'$delay'},
  {"name": "classify", "stages": [
    {"kind": "normalize_u8", "params": {"width": 32, "height": 32}},
    {"kind": "plugin", "path": "'$plugins'/gf_mlp.so", "params": {"weights": "'$plugins'/mlp-demo.gfw"}}]'$delay'}'
# gpuframed on the configuration file $1, serving $sock; $daemon its PID.
start_daemon() {
  rm -f "$sock"
  "$build/gpuframed" --config "$1" --socket "$sock" --engine "$engine" >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { echo "bench: gpuframed did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }
}
rc=0
if [ $clients_only = 0 ]; then
# Every frame timed: the stage means come from all of them.
cat >"$tmp/plugins.json" <<EOF
{"slots": 2, "timing_sample_every": 1, "pipelines": [
  {"name": "clamp", "kind": "plugin", "path": "$plugins/gf_example.so",
   "params": {"lo": -1, "hi": 1}},
  $mlp_pipelines]}
EOF
start_daemon "$tmp/plugins.json"

# name, frame size: clamp 1 MiB of float32; mlp batches of 1 and 64 vectors
# of 3072 float32; classify one 32x32 RGB image.
for run in "clamp 1048576" "mlp 12288" "mlp 786432" "classify 3072"; do
  set -- $run
  name=$1 size=$2
  if ! "$client" stream --socket "$sock" --pipeline "$name" --size "$size" \
      --count 200 --window 8 --verify --quiet >"$tmp/verify.out" 2>&1; then
    echo "bench: $name --size $size failed verification:" >&2; cat "$tmp/verify.out" >&2; rc=1
    continue
  fi
  out=$("$client" stream --socket "$sock" --pipeline "$name" --size "$size" \
          --count "$frames" --window 16 2>&1) || { echo "bench: $out" >&2; rc=1; continue; }
  fps=$(sed -n 's/.*frames_per_s=\([0-9.]*\).*/\1/p' <<<"$out")
  p50=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$out")
  # The last frames' stages, from TRACE, through the Python client.
  stages=$(PYTHONPATH=python python3 - "$sock" "$frames" <<'PY'
import sys
from gpuframe import Client
with Client(sys.argv[1]) as c:
    frames = [f for f in c.trace(min(int(sys.argv[2]), 4096))["frames"] if f["kernel"]]
n = len(frames) or 1
us = lambda key: sum(f[key][1] - f[key][0] for f in frames) / n / 1000
line = "h2d_us=%.1f kernel_us=%.1f" % (us("h2d"), us("kernel"))
k = [f["kernel_stages"] for f in frames if "kernel_stages" in f]
if k:
    line += " " + " ".join("stage%d_us=%.1f" % (i, sum(s[i] for s in k) / len(k) / 1000)
                           for i in range(len(k[0])))
print(line + " d2h_us=%.1f timed_frames=%d" % (us("d2h"), len(frames)))
PY
)
  echo "plugin $name size=$size frames_per_s=$fps p50_us=$p50 $stages"
done
kill -TERM "$daemon"; wait "$daemon" || rc=1
fi

# ---- many clients ---------------------------------------------------------------
echo "{$daemon_keys\"pipelines\": [$mlp_pipelines]}" >"$tmp/clients.json"
start_daemon "$tmp/clients.json"
# A pipeline's STATS batches: "submissions frames", or "- -" without them.
batches() { # PIPELINE
  "$build/gpuframe" stats --socket "$sock" --json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["pipelines"]:
    if p["name"] == sys.argv[1]:
        b = p.get("batches")
        print("%d %d" % (b["submissions"], b["frames"]) if b else "- -")' "$1"
}
each=$client_frames # per client
for run in "mlp 12288" "classify 3072"; do
  set -- $run
  name=$1 size=$2
  for window in 1 7 64; do
    "$client" stream --socket "$sock" --pipeline "$name" --size "$size" --count 640 \
      --window $window --verify --quiet >"$tmp/verify.out" 2>&1 ||
      { echo "bench: $name window $window failed verification:" >&2; cat "$tmp/verify.out" >&2; rc=1; }
  done
  # One client at window 1: what batching must not cost it.
  out=$("$client" stream --socket "$sock" --pipeline "$name" --size "$size" \
          --count 2000 --window 1 --no-shm 2>&1) || { echo "bench: $out" >&2; rc=1; }
  echo "single $name window=1 p50_us=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$out")" \
    "p99_us=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' <<<"$out")"
  read -r subs0 frames0 <<<"$(batches "$name")"
  pids=()
  at=$(awk -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", now + 1 }')
  for ((i = 0; i < clients; i++)); do
    "$client" stream --socket "$sock" --pipeline "$name" --size "$size" --count $each \
      --window 16 --quiet --no-shm --start-at "$at" >"$tmp/client$i" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  read -r subs1 frames1 <<<"$(batches "$name")"
  per=-
  [ "$subs0" != - ] && [ $((subs1 - subs0)) -gt 0 ] &&
    per=$(awk -v f=$((frames1 - frames0)) -v s=$((subs1 - subs0)) 'BEGIN { printf "%.1f", f / s }')
  cat "$tmp"/client* | awk -v n="$clients" -v name="$name" -v per="$per" '
    /^frames=/ {
      ok++
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      frames += f["frames"]
      start = f["started"]; end = start + f["seconds"]
      if (ok == 1 || start < first) first = start; if (ok == 1 || end > last) last = end
      if (f["p99_us"] > p99) p99 = f["p99_us"]
    }
    END {
      if (ok == n && last > first)
        printf "clients %s clients=%d window=16 frames_per_s=%.0f worst_p99_us=%.0f frames_per_submission=%s\n",
               name, n, frames / (last - first), p99, per
      else { printf "bench: clients %s: %d of %d clients failed\n", name, n - ok, n; exit 1 } }' || rc=1
  rm -f "$tmp"/client*
done
kill -TERM "$daemon"; wait "$daemon" || rc=1
exit $rc

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The plugin benchmark (issue 13): gpuframed serving the repository's MLP
# plugin (plugins/mlp) alone and behind normalize_u8, and the example plugin
# clamp.  Each pipeline is first streamed with --verify (results against the
# plugin's C reference, within its tolerance), then without, for frames/s;
# then the daemon's TRACE gives the mean time of each stage's kernels over
# the timed frames, and the H2D/D2H counts show one copy each way per frame.
#
#   bench/plugins.sh BUILD_DIR [--engine cuda|cpu] [--frames N]
#
# stdout: one line per pipeline,
#   plugin PIPELINE frames_per_s=F p50_us=P h2d_us=A kernel_us=K [stage k=US ...] d2h_us=D
# Exit status 1 when a stream failed or verification found a difference.
set -uo pipefail
usage="usage: bench/plugins.sh BUILD_DIR [--engine cuda|cpu] [--frames N]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine=cuda frames=4000
while [ $# -gt 0 ]; do
  case $1 in
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

tmp=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/s.sock
# Every frame timed: the stage means come from all of them.
cat >"$tmp/plugins.json" <<EOF
{"slots": 2, "timing_sample_every": 1, "pipelines": [
  {"name": "clamp", "kind": "plugin", "path": "$plugins/gf_example.so",
   "params": {"lo": -1, "hi": 1}},
  {"name": "mlp", "kind": "plugin", "path": "$plugins/gf_mlp.so",
   "params": {"weights": "$plugins/mlp-demo.gfw"}},
  {"name": "classify", "stages": [
    {"kind": "normalize_u8", "params": {"width": 32, "height": 32}},
    {"kind": "plugin", "path": "$plugins/gf_mlp.so", "params": {"weights": "$plugins/mlp-demo.gfw"}}]}]}
EOF
"$build/gpuframed" --config "$tmp/plugins.json" --socket "$sock" --engine "$engine" \
  >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "bench: gpuframed did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

rc=0
# name, frame size: clamp 1 MiB of float32; mlp batches of 1 and 64 vectors
# of 3072 float32; classify one 32x32 RGB image.
for run in "clamp 1048576" "mlp 12288" "mlp 786432" "classify 3072"; do
  set -- $run
  name=$1 size=$2
  if ! "$build/gpuframe" stream --socket "$sock" --pipeline "$name" --size "$size" \
      --count 200 --window 8 --verify --quiet >"$tmp/verify.out" 2>&1; then
    echo "bench: $name --size $size failed verification:" >&2; cat "$tmp/verify.out" >&2; rc=1
    continue
  fi
  out=$("$build/gpuframe" stream --socket "$sock" --pipeline "$name" --size "$size" \
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
exit $rc

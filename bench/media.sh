#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The media kinds' figures (issue 34), in one run, each with its ratio to a
# limit measured in the same run:
#
#   image: 1920x1080 NV12 -> 3x224x224 float32 (BT.709, cover + centre crop,
#     ImageNet normalisation)
#     - the stage's kernel in-process (bench/gf_media) at batch 1 and 16, and
#       on RGB8 at batch 16, against torchvision.transforms.v2 on the GPU
#       in-process on RGB8 at batch 16 (bench/media_torch.py); target: the
#       kernel at least as fast (ratio >= 1)
#     - gpuframed, 1 client (window 16) and 16 clients (window 8 each),
#       frames by reference in shared memory (the client's default at this
#       size), against the lower of the copy bound (pinned H2D of the NV12
#       frames and D2H of the results, in-process, 4 streams) and the kernel
#       bound (batch 16); target for 16 clients: >= 0.8
#   spectrogram: 1 s of 16 kHz int16 -> 64 log-mels
#     - the stage's kernel at batch 16 and 64 against torchaudio's
#       MelSpectrogram + log on the GPU at the same batches; target >= 1
#     - gpuframed, 16 clients (shared memory: such frames join a shard's
#       batches) at window 64 and at window 16, against the lower of the
#       copy bound and the kernel bound, both at batch 64; frames per
#       submission from STATS; target >= 0.8 at window 64, where the clients
#       keep enough frames in flight for batches near the bounds' (at window
#       16 a shard's two clients fill batches of about 11 frames)
#
# Every pipeline is streamed with --verify first (results against the C
# references), gf_media checks its kernels against them, and media_torch.py
# checks torch's results against gpuframed's before either times anything.
#
#   bench/media.sh BUILD_DIR [--engine cuda|cpu] [--short]
#
# Without --engine: cuda when nvidia-smi lists a GPU and BUILD_DIR has
# bench/gf_media, else cpu.  cpu (and --short) is the dry run: few frames, no
# in-process part, '-' for what needs the GPU.  About 2 minutes on an H200.
# stdout: the in-process lines, then the summary (bench/README.md, "Media").
# Exit status 1 when a stream, a verification or a check failed.
set -uo pipefail
usage="usage: bench/media.sh BUILD_DIR [--engine cuda|cpu] [--short]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine="" short=0
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --short) short=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 2
if [ -z "$engine" ]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU' && [ -x "$build/bench/gf_media" ]; then
    engine=cuda
  else
    engine=cpu
  fi
fi
case $engine in cuda | cpu) ;; *) echo "$usage" >&2; exit 2 ;; esac
for f in gpuframed gpuframe; do
  [ -x "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done
[ "$engine" = cpu ] || [ -x "$build/bench/gf_media" ] || { echo "bench: $build/bench/gf_media not built" >&2; exit 2; }

# Frames: 1 client, each of 16 image clients, each of 16 audio clients.
if [ $short = 1 ] || [ "$engine" = cpu ]; then
  one=4 many=2 audio=8 verify_image=2 verify_audio=8 short_arg=--short
else
  one=3000 many=600 audio=20000 verify_image=16 verify_audio=256 short_arg=
fi

tmp=$(mktemp -d)
daemon=""
trap '[ -z "$daemon" ] || { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; }; rm -rf "$tmp"' EXIT
sock=$tmp/s.sock
rc=0

# ---- in-process limits ------------------------------------------------------------
: >"$tmp/limits"
if [ "$engine" = cuda ]; then
  "$build/bench/gf_media" $short_arg >"$tmp/limits" || { cat "$tmp/limits"; echo "bench: gf_media failed" >&2; exit 1; }
  cat "$tmp/limits"
fi

# ---- the daemon ---------------------------------------------------------------------
image='"format": "%s", "width": 1920, "height": 1080, "matrix": "bt709", "out_width": 224,
  "out_height": 224, "fit": "crop", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]'
cat >"$tmp/media.json" <<EOF
{"pipelines": [
  {"name": "camera", "kind": "image", "params": {$(printf "$image" nv12)}},
  {"name": "camera_rgb", "kind": "image", "params": {$(printf "$image" rgb8)}},
  {"name": "melspec", "kind": "spectrogram", "params": {"samples": 16000, "n_fft": 400,
    "hop": 160, "n_mels": 64, "log": "ln", "eps": 1e-6}}]}
EOF
"$build/gpuframed" --config "$tmp/media.json" --socket "$sock" --engine "$engine" >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "bench: gpuframed did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

verify() { # PIPELINE COUNT
  "$build/gpuframe" stream --socket "$sock" --pipeline "$1" --count "$2" --window 8 --verify \
    --quiet >"$tmp/verify.out" 2>&1 ||
    { echo "bench: $1 failed verification:" >&2; cat "$tmp/verify.out" >&2; rc=1; }
}
verify camera "$verify_image"
verify camera_rgb 2
verify melspec "$verify_audio"

# ---- the in-process peers, checked against the daemon first -------------------------
: >"$tmp/torch"
if [ "$engine" = cuda ]; then
  PYTHONPATH=python python3 bench/media_torch.py --socket "$sock" $short_arg >"$tmp/torch" ||
    { cat "$tmp/torch"; echo "bench: media_torch.py failed" >&2; rc=1; }
  cat "$tmp/torch"
fi

# A pipeline's STATS batches: "submissions frames".
batches() {
  "$build/gpuframe" stats --socket "$sock" --json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["pipelines"]:
    if p["name"] == sys.argv[1]:
        print("%d %d" % (p["batches"]["submissions"], p["batches"]["frames"]))' "$1"
}
# CLIENTS clients of PIPELINE, COUNT frames each at WINDOW, extra options
# after, their first frames sent together a second from now (--start-at):
# all frames over the span from the first one's start (its summary's
# started=) to the last one's end (started= plus its seconds), and frames
# per submission.
clients() { # PIPELINE CLIENTS COUNT WINDOW [OPTIONS...]
  local name=$1 n=$2 count=$3 window=$4 at
  shift 4
  read -r s0 f0 <<<"$(batches "$name")"
  at=$(awk -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", now + 1 }')
  local pids=()
  for ((i = 0; i < n; i++)); do
    "$build/gpuframe" stream --socket "$sock" --pipeline "$name" --count "$count" \
      --window "$window" --quiet --start-at "$at" "$@" >"$tmp/client$i" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  read -r s1 f1 <<<"$(batches "$name")"
  cat "$tmp"/client* | awk -v n="$n" -v f=$((f1 - f0)) -v s=$((s1 - s0)) '
    /^frames=/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      start = v["started"]; end = start + v["seconds"]
      if (!ok || start < first) first = start; if (!ok || end > last) last = end
      ok++; frames += v["frames"] }
    END { if (ok != n || last <= first) { printf "- -\n"; exit 1 }
          printf "%.0f %.1f\n", frames / (last - first), s ? f / s : 0 }' || rc=1
  rm -f "$tmp"/client*
}
read -r img1 _ <<<"$(clients camera 1 "$one" 16)"
read -r img16 img16_batch <<<"$(clients camera 16 "$many" 8)"
read -r aud16 aud16_batch <<<"$(clients melspec 16 "$audio" 16 --shm)"
read -r aud64 aud64_batch <<<"$(clients melspec 16 "$audio" 64 --shm)"
kill -TERM "$daemon"; wait "$daemon" || { echo "bench: gpuframed did not exit 0" >&2; rc=1; }
daemon=""

# ---- the summary ----------------------------------------------------------------------
get() { # FILE PREFIX KEY: KEY's value on the first line of FILE starting with PREFIX, or -
  awk -v p="$2" -v k="$3" 'index($0, p) == 1 { for (i = 1; i <= NF; i++) {
    split($i, kv, "="); if (kv[1] == k) { print kv[2]; exit } } }' "$1" | grep . || echo -
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
lower() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-") print "-"; else print (a < b ? a : b) }'; }
L=$tmp/limits T=$tmp/torch
k1=$(get "$L" "kernel case=image_nv12 batch=1 " us_per_batch)
k16=$(get "$L" "kernel case=image_nv12 batch=16 " us_per_batch)
k16fps=$(get "$L" "kernel case=image_nv12 batch=16 " frames_per_s)
rgb16=$(get "$L" "kernel case=image_rgb8 batch=16 " us_per_batch)
tv16=$(get "$T" "torch case=image_rgb8 batch=16 " us_per_batch)
copy_img=$(get "$L" "limit name=copy case=image_nv12 " frames_per_s)
bound_img=$(lower "$copy_img" "$k16fps")
s16=$(get "$L" "kernel case=spectrogram batch=16 " us_per_batch)
s64=$(get "$L" "kernel case=spectrogram batch=64 " us_per_batch)
s64fps=$(get "$L" "kernel case=spectrogram batch=64 " frames_per_s)
ta16=$(get "$T" "torch case=spectrogram batch=16 " us_per_batch)
ta64=$(get "$T" "torch case=spectrogram batch=64 " us_per_batch)
copy_aud=$(get "$L" "limit name=copy case=spectrogram " frames_per_s)
bound_aud=$(lower "$copy_aud" "$s64fps")
echo "media engine=$engine $(sed -n 's/^# device /device=/p' "$L" | tr ' ' '_')"
echo "image kernel_us batch1=$k1 batch16=$k16 rgb8_batch16=$rgb16 torchvision_rgb8_batch16=$tv16" \
  "torchvision_over_kernel nv12=$(ratio "$tv16" "$k16") rgb8=$(ratio "$tv16" "$rgb16") (target >= 1)"
echo "image frames_per_s copy_bound=$copy_img kernel_bound=$k16fps clients1=$img1" \
  "clients16=$img16 frames_per_submission=$img16_batch" \
  "ratio_to_bound clients1=$(ratio "$img1" "$bound_img") clients16=$(ratio "$img16" "$bound_img") (target >= 0.8)"
echo "spectrogram kernel_us batch16=$s16 batch64=$s64 torchaudio batch16=$ta16 batch64=$ta64" \
  "torchaudio_over_kernel batch16=$(ratio "$ta16" "$s16") batch64=$(ratio "$ta64" "$s64") (target >= 1)"
echo "spectrogram frames_per_s copy_bound=$copy_aud kernel_bound=$s64fps" \
  "clients16_window64=$aud64 frames_per_submission=$aud64_batch" \
  "ratio_to_bound window64=$(ratio "$aud64" "$bound_aud") (target >= 0.8)"
echo "spectrogram frames_per_s clients16_window16=$aud16 frames_per_submission=$aud16_batch" \
  "ratio_to_bound window16=$(ratio "$aud16" "$bound_aud")"
exit $rc

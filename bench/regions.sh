#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Frames already on the GPU (issue 36), one run, each figure beside the limit
# it is judged against, measured in the same run on the same daemon:
#
#  big      16 MiB echo and affine from one client, window 4: device frames
#           (gpuframe stream --device-frames) against the same client's
#           shared memory (--shm), GB/s of input.  Verdict: device >= 10x shm.
#  small    4 KiB echo at window 1: p50 of device frames against --shm.
#           Verdict: device p50 no worse than shm's (ratio <= 1).
#  crowd    64 clients of 4 KiB echo at window 16 at once: frames/s (all
#           frames over the span from the first client's start of streaming
#           to the last one's end), device against --shm.
#           Verdict: device >= shm.
#  torch    PyTorch's own CUDA IPC (bench/regions_torch.py: a tensor shared
#           with torch.multiprocessing to a worker that runs the same kernel
#           and signals back, one frame in flight): 16 MiB echo and affine
#           GB/s and 4 KiB p50, beside device frames at window 1.  Figures
#           and ratios, no verdict (the issue asks for the comparison).
#
#   bench/regions.sh BUILD_DIR [--engine cuda|cpu] [--dry]
#
# --dry: few frames (the CPU engine here: device frames are refused there,
# which the run reports as "unavailable" and skips their verdicts; it
# checks the mechanics, not the figures).
# On an H200 the whole run takes about 2 minutes (45 s of it the device
# crowd's lead).  stdout: one line per figure, `section key=value ...`,
# then `verdict NAME ok|FAIL|skipped ...`.  Exit status 1 when a stream
# failed that had to work (a verdict that fails does not change it).
set -uo pipefail
usage="usage: bench/regions.sh BUILD_DIR [--engine cuda|cpu] [--dry]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine=cuda dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --dry) dry=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 2
for f in gpuframed gpuframe; do
  [ -x "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done
big=$((16 << 20))
if [ $dry = 1 ]; then
  big_shm=8 big_dev=8 small=50 crowd=64 crowd_each=20 shm_lead=1 crowd_lead=1 torch_big=5 torch_small=20
else
  # the crowds' leads (clients()): 64 shm clients start in well under a
  # second; 64 device clients' set-ups took about 33 s on an H200
  big_shm=1500 big_dev=15000 small=5000 crowd=64 crowd_each=60000 shm_lead=3 crowd_lead=45 torch_big=3000 torch_small=5000
fi

tmp=$(mktemp -d)
daemon=
trap 'kill $(jobs -p) 2>/dev/null; [ -n "$daemon" ] && wait "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/s.sock
rc=0

cat >"$tmp/d.json" <<EOF
{"max_frame_bytes": $big, "pipelines": [
  {"name": "echo", "kind": "echo"},
  {"name": "affine", "kind": "affine", "params": {"a": 2.0, "b": 0.5}}]}
EOF
"$build/gpuframed" --config "$tmp/d.json" --socket "$sock" --engine "$engine" \
  >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "bench: gpuframed did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

# The value of KEY in a summary line.
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p; s/^$1=\([0-9.]*\).*/\1/p" <<<"$2" | head -1; }
# A / B to 2 decimals, or "n/a" when either is missing or B is 0.
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f\n", a / b }'; }
# Whether A >= B (both numbers).
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# Device frames are refused by the CPU engine and need libcuda here: where
# they fail, $tmp/device_why says why and their verdicts are skipped (a
# failure only on the GPU machine, --engine cuda without --dry).  The
# helpers run in $(...): what they find goes to files, not variables.
device_ok_to_fail() { [[ " $* " == *" --device-frames "* ]] && { [ $dry = 1 ] || [ "$engine" = cpu ]; }; }
# gpuframe stream ARGS...: its summary line; a failure counted.
stream() {
  local out
  out=$("$build/gpuframe" stream --socket "$sock" --quiet "$@" 2>&1) || {
    if device_ok_to_fail "$@"; then
      echo "${out%%$'\n'*}" >"$tmp/device_why"
    else
      echo "bench: gpuframe stream $*: $out" >&2; touch "$tmp/failed"
    fi
    echo ""; return; }
  echo "$out" | tail -1
}
# N clients of `gpuframe stream ARGS...` at once, each sending its first
# frame LEAD_S seconds from now (--start-at: their set-ups, 64 CUDA contexts
# made one after another for device frames, do not stagger the streams);
# prints "frames_per_s p50_us spread_s":
# all frames over the span from the first client's start of streaming to the
# last one's end (each one's start its summary's started=, which is later
# than the lead for a client whose set-up outlasted it; its end that plus
# its summary's seconds: not its exit, which for device frames waits for
# its CUDA context to be torn down), the clients' mean p50, and the seconds
# between the first and the last start.
clients() { # N LEAD_S ARGS...
  local n=$1 pids=() i failed=0 at
  at=$(awk -v now="$(date +%s.%N)" -v lead="$2" 'BEGIN { printf "%.3f\n", now + lead }')
  shift 2
  for ((i = 0; i < n; i++)); do
    "$build/gpuframe" stream --socket "$sock" --quiet --start-at "$at" "$@" >"$tmp/c$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  if [ $failed = 1 ]; then
    if device_ok_to_fail "$@"; then
      grep -hv '^frames=' "$tmp"/c* | head -1 >"$tmp/device_why"
    else
      echo "bench: $n clients of gpuframe stream $*:" >&2; grep -hv '^frames=' "$tmp"/c* | head -3 >&2
      touch "$tmp/failed"
    fi
  fi
  for ((i = 0; i < n; i++)); do grep -h '^frames=' "$tmp/c$i"; done | awk '{
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      start = f["started"]; end = start + f["seconds"]
      if (n == 0 || start < first) first = start; if (n == 0 || end > last) last = end
      if (n == 0 || start > late) late = start
      n++; frames += f["frames"]; p50 += f["p50_us"] }
    END { if (n == '"$n"' && last > first) printf "%.0f %.1f %.2f\n", frames / (last - first), p50 / n, late - first; else print "" }'
  rm -f "$tmp"/c*
}
# Says verdict NAME: ok for STATUS 0, else FAIL; skipped when device frames
# were unavailable.
verdict() { # NAME STATUS DETAILS
  if [ -s "$tmp/device_why" ]; then echo "verdict $1 skipped (device frames unavailable) $3"
  elif [ "$2" = 0 ]; then echo "verdict $1 ok $3"
  else echo "verdict $1 FAIL $3"; fi
}

# ---- big: 16 MiB, window 4 ---------------------------------------------------------
declare -A gbps dev_w1
for p in echo affine; do
  s=$(stream --pipeline $p --size $big --count $big_shm --window 4 --shm)
  d=$(stream --pipeline $p --size $big --count $big_dev --window 4 --device-frames)
  gbps[$p]=$(field in_GBps "$d")
  r=$(ratio "$(field in_GBps "$d")" "$(field in_GBps "$s")")
  echo "big pipeline=$p bytes=$big window=4 shm_GBps=$(field in_GBps "$s") device_GBps=$(field in_GBps "$d") device_over_shm=$r"
  ok=1; [ "$r" != n/a ] && at_least "$r" 10 && ok=0
  verdict "big_$p" $ok "device_over_shm=$r (>= 10)"
  w1=$(stream --pipeline $p --size $big --count $((big_dev / 4)) --window 1 --device-frames)
  dev_w1[$p]=$(field in_GBps "$w1")
done

# ---- small: 4 KiB, window 1 ----------------------------------------------------------
s=$(stream --pipeline echo --size 4096 --count $small --window 1 --shm)
d=$(stream --pipeline echo --size 4096 --count $small --window 1 --device-frames)
small_dev_p50=$(field p50_us "$d")
r=$(ratio "$small_dev_p50" "$(field p50_us "$s")")
echo "small bytes=4096 window=1 shm_p50_us=$(field p50_us "$s") device_p50_us=$small_dev_p50 device_over_shm=$r"
ok=1; [ "$r" != n/a ] && at_least 1 "$r" && ok=0
verdict small_p50 $ok "device_over_shm=$r (<= 1)"

# ---- crowd: 64 clients, 4 KiB, window 16 -------------------------------------------
read -r sf sp ss <<<"$(clients $crowd $shm_lead --pipeline echo --size 4096 --count $crowd_each --window 16 --shm)"
read -r df dp ds <<<"$(clients $crowd $crowd_lead --pipeline echo --size 4096 --count $crowd_each --window 16 --device-frames)"
r=$(ratio "${df:-}" "${sf:-}")
echo "crowd clients=$crowd bytes=4096 window=16 shm_frames_per_s=${sf:-} device_frames_per_s=${df:-} shm_p50_us=${sp:-} device_p50_us=${dp:-} shm_start_spread_s=${ss:-} device_start_spread_s=${ds:-} device_over_shm=$r"
ok=1; [ "$r" != n/a ] && at_least "$r" 1 && ok=0
verdict crowd $ok "device_over_shm=$r (>= 1)"

# ---- torch: PyTorch's CUDA IPC, one frame in flight -------------------------------
for p in echo affine; do
  t=$(python3 bench/regions_torch.py --op $p --bytes $big --count $torch_big 2>&1); trc=$?
  if [ $trc = 3 ]; then echo "torch pipeline=$p ${t##*$'\n'}"; continue; fi
  [ $trc = 0 ] || { echo "bench: regions_torch.py --op $p: $t" >&2; rc=1; continue; }
  echo "torch pipeline=$p bytes=$big window=1 torch_ipc_GBps=$(field in_GBps "$t") device_GBps=${dev_w1[$p]:-} device_over_torch=$(ratio "${dev_w1[$p]:-}" "$(field in_GBps "$t")")"
done
t=$(python3 bench/regions_torch.py --op echo --bytes 4096 --count $torch_small 2>&1); trc=$?
if [ $trc = 0 ]; then
  echo "torch pipeline=echo bytes=4096 window=1 torch_ipc_p50_us=$(field p50_us "$t") device_p50_us=$small_dev_p50 device_over_torch=$(ratio "$small_dev_p50" "$(field p50_us "$t")")"
elif [ $trc = 3 ]; then
  echo "torch bytes=4096 ${t##*$'\n'}"
else
  echo "bench: regions_torch.py 4 KiB: $t" >&2; rc=1
fi

[ -s "$tmp/device_why" ] && echo "device frames unavailable: $(cat "$tmp/device_why")"
[ -e "$tmp/failed" ] && rc=1
kill -TERM "$daemon"; wait "$daemon" || rc=1; daemon=
exit $rc

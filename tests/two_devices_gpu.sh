#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ctest two_devices_gpu: one gpuframed on two CUDA devices ("devices"
# "0,1", 4 shards: two on each).  Eight clients stream verified frames of
# every elementwise pipeline through the socket and by shared memory; every
# result must match the C reference; STATS must show both devices, each
# with its two shards and its share of the frames, and totals that add up;
# a drain answers everything and the daemon exits 0.  Exits 77 (ctest:
# skipped) on a machine with fewer than two GPUs.
#
#   tests/two_devices_gpu.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: two_devices_gpu.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -lt 2 ]; then
  echo "two_devices_gpu: skipped: nvidia-smi -L lists $gpus GPU(s), this needs 2"
  exit 77
fi
dir=$(mktemp -d); trap 'kill $daemon 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "two_devices_gpu: FAIL: $*"; echo "--- daemon log"; cat "$dir/daemon.log"; exit 1; }
sock=$dir/s.sock
"$build/gpuframed" --socket "$sock" --engine cuda --devices 0,1 --shards 4 \
  --config "$src/bench/verify-sizes.json" 2> "$dir/daemon.log" &
daemon=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
[ -S "$sock" ] || fail "the daemon did not start"

# Eight clients at once: the placement gives each shard two.
pids=()
i=0
for p in echo affine sincos echo affine sincos echo sincos; do
  i=$((i + 1))
  transport=--no-shm size=4K
  [ $((i % 2)) = 0 ] && transport=--shm size=1M
  "$build/gpuframe" stream --socket "$sock" --pipeline $p --size $size --count 300 --window 8 \
    --verify --quiet $transport > "$dir/client$i.out" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || fail "client $((i + 1)): $(cat "$dir/client$((i + 1)).out")"
  grep -q "frames=300 errors=0 " "$dir/client$((i + 1)).out" ||
    fail "client $((i + 1)): $(cat "$dir/client$((i + 1)).out")"
done

"$build/gpuframe" stats --socket "$sock" --json > "$dir/stats.json" || fail "gpuframe stats"
python3 - "$dir/stats.json" <<'PY' || fail "STATS: $(cat "$dir/stats.json" | head -c 3000)"
import json, sys
st = json.load(open(sys.argv[1]))
devices = {d["index"]: d for d in st["devices"]}
assert sorted(devices) == [0, 1], f"devices {sorted(devices)}"
for k, d in devices.items():
    assert len(d["shards"]) == 2, f"device {k}: shards {d['shards']}"
    assert d["frames_answered"] > 0, f"device {k} answered no frame"
shards = st["shards"]
assert [s["shard"] for s in shards] == [0, 1, 2, 3], shards
assert [s["device"] for s in shards] == [0, 1, 0, 1], [s["device"] for s in shards]
assert sum(s["frames_answered"] for s in shards) == st["frames"]["answered"] == 2400, st["frames"]
assert sum(d["frames_answered"] for d in devices.values()) == 2400
f = st["frames"]
assert f["received"] == f["answered"] and f["failed"] == 0 and f["in_progress"] == 0, f
assert st["shard_count"] == 4 and st["slots"]["count"] == 4 * st["slots"]["per_shard"], st["slots"]
print("two_devices_gpu: STATS ok:", {k: (d["name"], d["frames_answered"]) for k, d in devices.items()})
PY
kill -TERM $daemon
wait $daemon; rc=$?
[ $rc = 0 ] || fail "exit status $rc after SIGTERM"
grep -q "drained: every frame received was answered" "$dir/daemon.log" || fail "no drain line"
echo "two_devices_gpu: ok"

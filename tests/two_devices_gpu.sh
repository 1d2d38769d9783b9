#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ctest two_devices_gpu: one gpuframed on two CUDA devices ("devices"
# "0,1", 4 shards: two on each).  Eight clients stream verified frames of
# every elementwise pipeline through the socket and by shared memory; every
# result must match the C reference; STATS must show both devices, each
# with its two shards and its share of the frames, and totals that add up;
# a drain answers everything and the daemon exits 0.  Then pipelines
# limited to one device each: every frame runs on its device, connections
# move there (regions with them), and the log holds no error or warning.
# Exits 77 (ctest: skipped) on a machine with fewer than two GPUs.
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
stop_daemon() {
  kill -TERM $daemon
  wait $daemon; local rc=$?
  [ $rc = 0 ] || fail "exit status $rc after SIGTERM"
  grep -q "drained: every frame received was answered" "$dir/daemon.log" || fail "no drain line"
  ! grep -E "error:|warn:" "$dir/daemon.log" || fail "an error or warning in the log"
}
stop_daemon

# Pipelines limited to one device each: a connection whose frame names one
# moves to that device's shards.  Eight clients (through the socket and by
# shared memory) on sincos1 and affine0; two Python connections alternate
# echo1 and echo0 frames, moving at each, a region pinned on one device
# going along to the other and unpinned there.
cat > "$dir/limited.json" <<'JSON'
{"slots": 2, "max_frame_bytes": 16777216, "log_level": "info",
 "pipelines": [{"name": "echo", "kind": "echo"},
               {"name": "sincos1", "kind": "sincos", "params": {"iters": 16}, "devices": "1"},
               {"name": "affine0", "kind": "affine", "params": {"a": 2.0, "b": 0.5}, "devices": "0"},
               {"name": "echo1", "kind": "echo", "devices": "1"},
               {"name": "echo0", "kind": "echo", "devices": "0"}]}
JSON
"$build/gpuframed" --socket "$sock" --engine cuda --devices 0,1 --shards 4 \
  --config "$dir/limited.json" 2> "$dir/daemon.log" &
daemon=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
[ -S "$sock" ] || fail "the daemon (limited pipelines) did not start"
pids=()
i=0
for p in sincos1 affine0 sincos1 affine0 sincos1 affine0 sincos1 affine0; do
  i=$((i + 1))
  transport=--no-shm size=4K
  [ $(((i + 1) / 2 % 2)) = 0 ] && transport=--shm size=1M
  "$build/gpuframe" stream --socket "$sock" --pipeline $p --size $size --count 300 --window 8 \
    --verify --quiet $transport > "$dir/client$i.out" 2>&1 &
  pids+=($!)
done
PYTHONPATH="$src/python" python3 - "$sock" > "$dir/python.out" 2>&1 <<'PY' & pids+=($!)
import sys
import numpy as np
from gpuframe import Client
rng = np.random.default_rng(5)
for last in ("echo1", "echo0"):
    with Client(sys.argv[1]) as c:
        region = c.region(1 << 20)
        order = ["echo0", "echo1"] if last == "echo1" else ["echo1", "echo0"]
        for k in range(20):
            x = rng.integers(0, 256, 65536 + k, dtype=np.uint8)
            got = c.process(order[k % 2], x.tobytes())
            assert bytes(got) == x.tobytes(), (last, k)
            # A frame by reference in the region, wherever the connection is now.
            v = region.array(np.uint8, 0, 4096)
            v[:] = rng.integers(0, 256, 4096, dtype=np.uint8)
            out = region.array(np.uint8, 1 << 19, 4096)
            got = c.process(order[k % 2], region.frame(v, out))
            assert np.array_equal(got, v), (last, k, "shm")
        region.close()
print("python: 80 frames, alternating devices, ok")
PY
for i in "${!pids[@]}"; do
  n=$((i + 1)); out=$dir/client$n.out; [ $n = 9 ] && out=$dir/python.out
  wait "${pids[$i]}" || fail "client $n: $(cat "$out")"
  [ $n = 9 ] || grep -q "frames=300 errors=0 " "$out" || fail "client $n: $(cat "$out")"
done
cat "$dir/python.out"
"$build/gpuframe" stats --socket "$sock" --json > "$dir/stats.json" || fail "gpuframe stats"
python3 - "$dir/stats.json" <<'PY' || fail "STATS (limited): $(head -c 3000 "$dir/stats.json")"
import json, sys
st = json.load(open(sys.argv[1]))
devices = {d["index"]: d for d in st["devices"]}
# sincos1 and echo1 on device 1 only, affine0 and echo0 on device 0 only.
want = {1: 4 * 300 + 2 * 20, 0: 4 * 300 + 2 * 20}
got = {k: d["frames_answered"] for k, d in devices.items()}
assert got == want, f"frames per device {got}, expected {want}"
c = st["connections"]
assert c["moved"] >= 2 * 19, f"moved {c['moved']}: a Python connection moves at each switch"
assert st["frames"]["failed"] == 0 and st["frames"]["in_progress"] == 0, st["frames"]
assert st["shm"]["regions_open"] == 0 and st["shm"]["region_bytes"] == 0, st["shm"]
print("two_devices_gpu: limited pipelines ok: frames per device", got, "moves", c["moved"])
PY
stop_daemon
echo "two_devices_gpu: ok"

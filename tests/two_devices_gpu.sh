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
# gpuframed on both devices, 4 shards (two on each), on the config file $1.
start_daemon() {
  rm -f "$sock"
  "$build/gpuframed" --socket "$sock" --engine cuda --devices 0,1 --shards 4 \
    --config "$1" 2> "$dir/daemon.log" &
  daemon=$!
  for _ in $(seq 300); do [ -S "$sock" ] && break; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
  [ -S "$sock" ] || fail "the daemon did not start on $1"
}
# SIGTERM: a drain that answers everything, exit 0, and a clean log.
stop_daemon() {
  kill -TERM $daemon
  wait $daemon; local rc=$?
  [ $rc = 0 ] || fail "exit status $rc after SIGTERM"
  grep -q "drained: every frame received was answered" "$dir/daemon.log" || fail "no drain line"
  ! grep -E "error:|warn:" "$dir/daemon.log" || fail "an error or warning in the log"
}
# One client per pipeline named, all at once, 300 verified frames each:
# odd ones 4 KiB through the socket, even ones 1 MiB by shared memory.
# Their PIDs go in pids; client i's output in client$i.out.
start_clients() {
  local i=0 p transport size
  pids=()
  for p in "$@"; do
    i=$((i + 1))
    transport=--no-shm size=4K
    [ $((i % 2)) = 0 ] && transport=--shm size=1M
    "$build/gpuframe" stream --socket "$sock" --pipeline $p --size $size --count 300 --window 8 \
      --verify --quiet $transport > "$dir/client$i.out" 2>&1 &
    pids+=($!)
  done
}
# Each client started by start_clients exited 0 with every frame verified.
wait_clients() {
  local i out
  for i in "${!pids[@]}"; do
    out=$dir/client$((i + 1)).out
    wait "${pids[$i]}" && grep -q "frames=300 errors=0 " "$out" || fail "client $((i + 1)): $(cat "$out")"
  done
}

start_daemon "$src/bench/verify-sizes.json"
# Eight clients at once: the placement gives each shard two.
start_clients echo affine sincos echo affine sincos echo sincos
wait_clients

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
start_daemon "$dir/limited.json"
start_clients sincos1 sincos1 affine0 affine0 sincos1 sincos1 affine0 affine0
PYTHONPATH="$src/python" python3 - "$sock" > "$dir/python.out" 2>&1 <<'PY' & python=$!
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
wait_clients
wait $python || fail "the Python connections: $(cat "$dir/python.out")"
cat "$dir/python.out"
# The Python connections' regions are unpinned on their shards' thread
# pools after the connections closed: the counters once they are (a region
# was still open when they were read at once, on two H200s).
for _ in $(seq 100); do
  "$build/gpuframe" stats --socket "$sock" --json > "$dir/stats.json" || fail "gpuframe stats"
  python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["shm"]["regions_open"] != 0)' \
    "$dir/stats.json" && break
  sleep 0.1
done
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

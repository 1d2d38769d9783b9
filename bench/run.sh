#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The benchmark: the data path's limits measured in-process (gf_limits: the GPU
# pipeline, latency floor, host function, pinned copies; gf_sockbench: a Unix
# socketpair alone), then gpuframed itself on echo frames through
# `gpuframe stream`, and one table of the daemon's figures with their ratios
# to the limits of this same run.  bench/README.md says what each figure is.
#
#   bench/run.sh BUILD_DIR [--engine cuda|cpu] [--short] [--clients | --clients-only]
#
# --engine: which engine the daemon runs on.  Not given, the one this machine
#   has: cuda when `nvidia-smi -L` lists a GPU and BUILD_DIR has gf_limits
#   (a CUDA build), else cpu; the first line of the output says which and why.
# --engine cpu: no GPU limits ('-' in their columns); the socket limits stay.
# --short: sizes 4 KiB and 1 MiB and few frames (CI: well under a minute).
# --clients: then many clients, each figure for the default shard count and
#   for --shards 1, and on two GPUs one daemon against two (bench/shards.sh,
#   with this run's limits).  --clients-only: the limits and that, no slots.
# GF_BENCH_DAEMON_ARGS: extra gpuframed options, appended after the script's
#   own, so they win: "--config bench/echo-untimed.json" (timing events off).
#
# stdout: the raw `limit ...` and `daemon ...` lines, then the table.  Exit
# status 1 when a program failed or a figure is missing ('?' in the table),
# 2 on a bad command line; the "monotonic in slots" lines never fail.
set -uo pipefail
usage="usage: bench/run.sh BUILD_DIR [--engine cuda|cpu] [--short] [--clients | --clients-only]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine= short=0 many_clients=0 only_clients=0
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --short) short=1; shift ;;
    --clients) many_clients=1; shift ;;
    --clients-only) many_clients=1 only_clients=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 2
for f in gpuframed gpuframe bench/gf_sockbench; do
  [ -x "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done
# Not told, the engine the machine has: a benchmark of the CPU engine on a GPU
# host, or one that fails for want of a GPU, is not what anyone asked for.
if [ -z "$engine" ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [ "$gpus" -gt 0 ] && [ -x "$build/bench/gf_limits" ]; then
    engine=cuda why="nvidia-smi -L lists $gpus GPU(s) and $build has gf_limits"
  elif [ "$gpus" -gt 0 ]; then
    engine=cpu why="$build has no gf_limits (built without CUDA), though nvidia-smi -L lists $gpus GPU(s)"
  elif command -v nvidia-smi >/dev/null; then
    engine=cpu why="nvidia-smi -L lists no GPU"
  else
    engine=cpu why="no nvidia-smi: no NVIDIA driver on this machine"
  fi
  echo "bench: engine $engine, because $why (--engine cuda|cpu chooses)"
else
  [[ $engine == cuda || $engine == cpu ]] || { echo "$usage" >&2; exit 2; }
  echo "bench: engine $engine, as --engine says"
fi
[ "$engine" = cpu ] || [ -x "$build/bench/gf_limits" ] ||
  { echo "bench: $build/bench/gf_limits not built (no CUDA in this build?)" >&2; exit 2; }

# Frame sizes and frames per `gpuframe stream` run: about 0.5-1 s each at the
# figures bench/README.md quotes for an H200, 33 points of 3 runs each
# (GF_BENCH_REPEATS), so the default run takes about 4 minutes.
slot_counts=(1 2 4)
clients=4   # the concurrent clients of the last row, 4 KiB at window 16
if [ $short = 1 ]; then
  repeats=${GF_BENCH_REPEATS:-1}
  sizes=(4K 1M)
  declare -A n16=([4K]=4000 [1M]=200) n1=([4K]=1000 [1M]=100)
  n_multi=1000
  limit_args=(--sizes "4K,1M" --short)
  # bench/shards.sh's --shm row is 16 MiB: its limits too.
  [ $many_clients = 1 ] && limit_args=(--sizes "4K,1M,16M" --short)
else
  repeats=${GF_BENCH_REPEATS:-3}
  sizes=(4K 64K 1M 4M 16M)
  declare -A n16=([4K]=20000 [64K]=10000 [1M]=4000 [4M]=1000 [16M]=250)
  declare -A n1=([4K]=8000 [64K]=5000 [1M]=2000 [4M]=500 [16M]=120)
  n_multi=10000
  limit_args=()
fi
declare -A bytes=([4K]=4096 [64K]=65536 [1M]=1048576 [4M]=4194304 [16M]=16777216)
size_bytes=$(for s in "${sizes[@]}"; do printf '%s ' "${bytes[$s]}"; done) # the tables' sizes, in bytes
stream_timeout_s=60 # one stream run; a stuck daemon costs this, not the whole run
run=$(mktemp -d); trap 'rm -rf "$run"' EXIT
raw=$run/raw; : > "$raw"
status=0
started=$SECONDS

# ---- limits ---------------------------------------------------------------------
if [ "$engine" = cuda ]; then
  timeout 120 "$build"/bench/gf_limits "${limit_args[@]}" > "$run/limits" 2> "$run/limits.err" ||
    { echo "bench: gf_limits failed:"; cat "$run/limits.err"; status=1; }
  tee -a "$raw" < "$run/limits"
fi
timeout 120 "$build"/bench/gf_sockbench "${limit_args[@]}" > "$run/sock" 2> "$run/sock.err" ||
  { echo "bench: gf_sockbench failed:"; cat "$run/sock.err"; status=1; }
tee -a "$raw" < "$run/sock"

# Many clients and shards (bench/shards.sh), against the limits above.
clients_section() {
  echo
  local short_arg=()
  [ $short = 1 ] && short_arg=(--short)
  bench/shards.sh "$build" --engine "$engine" "${short_arg[@]}" --limits "$raw" || status=1
}
if [ $only_clients = 1 ]; then
  clients_section
  echo "bench: done in $((SECONDS - started)) s"
  exit $status
fi

# ---- the daemon -----------------------------------------------------------------
stream() { # SOCKET SIZE COUNT WINDOW [--shm]: one gpuframe stream run's summary
            # line, or "failed: why" (a frame answered with an error fails the run);
            # without --shm the frames' bytes go through the socket (--no-shm), which
            # is what the socket rows measure
  local out
  if out=$(timeout $stream_timeout_s "$build"/gpuframe stream --socket "$1" --pipeline echo \
             --size "$2" --count "$3" --window "$4" --quiet ${5:---no-shm} 2>&1) &&
     [[ $out == frames=*" errors=0 "* ]]; then echo "$out"
  else echo "failed: $(echo "$out" | tail -1)"; echo "bench: stream $2 bytes window $4: $out" >&2; fi
}
# Each point is the median of $repeats runs, each against a daemon started
# afresh, the slot counts and completion modes taking turns: on the H200 one
# daemon gave 4 KiB window-16 rates of 56.7k, 54.1k and 26.4k frames/s back
# to back, and two daemons of one build 206k and 173k (.gpu experiments,
# 2026-11-23), as where the kernel places a daemon's threads moves all its
# figures; repeats inside one daemon would call the order of slots what is
# noise.  point() records one repeat (and shows it), medians() picks each
# point's median repeat by frames/s; a point with a failed repeat fails.
point() { # KEY LINE
  echo "$1|$2|$rep" >> "$run/points"
  echo "rep $rep: $1 $2"
}
medians() {
  awk -F'|' -v m=$((repeats / 2 + 1)) '
    { if (!($1 in n)) order[++keys] = $1
      k = $1; n[k]++; line[k, n[k]] = $2
      fps = $2; if (!sub(/.*frames_per_s=/, "", fps)) fps = ""; sub(/ .*/, "", fps)
      v[k, n[k]] = fps
      if (fps == "") bad[k] = ($2 == "" ? "failed" : $2) }
    END {
      for (o = 1; o <= keys; o++) {
        k = order[o]
        if (k in bad) { print k, bad[k]; continue }
        for (i = 1; i <= n[k]; i++) idx[i] = i
        for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++)
          if (v[k, idx[j]] + 0 < v[k, idx[i]] + 0) { t = idx[i]; idx[i] = idx[j]; idx[j] = t }
        print k, line[k, idx[m <= n[k] ? m : n[k]]]
      }
    }' "$run/points"
}
start_daemon() { # NAME CONFIG SLOTS: starts gpuframed on $sock (pid $pid, log $log)
  sock=$run/$1.sock log=$run/daemon-$1.log
  # shellcheck disable=SC2086  # GF_BENCH_DAEMON_ARGS is a list of options
  "$build"/gpuframed --config "$2" --engine $engine --slots "$3" --socket "$sock" \
    ${GF_BENCH_DAEMON_ARGS:-} 2> "$log" &
  pid=$!
  for _ in $(seq 600); do
    # The first frames of a daemon pay for lazy set-up: a warm-up stream.
    [ -S "$sock" ] && { stream "$sock" 4096 1000 16 > /dev/null; return 0; }
    kill -0 $pid 2>/dev/null || break; sleep 0.1
  done
  echo "bench: gpuframed ($1) did not start:"; cat "$log"; status=1
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; return 1
}
stop_daemon() { # NAME
  kill -TERM $pid; wait $pid; local rc=$?
  [ $rc = 0 ] || { echo "bench: gpuframed ($1) exited with $rc:"; tail -5 "$log"; status=1; }
}
clients_line() { # SIZE COUNT: $clients concurrent clients at window 16; their sum, or nothing
  local pids=() i
  for i in $(seq $clients); do
    stream "$sock" "$1" "$2" 16 > "$run/multi$i" & pids+=($!)
  done
  wait "${pids[@]}"
  # The clients' sum; nothing (so '?') unless every one of them succeeded.
  cat "$run"/multi* | awk -v n=$clients '
    /^frames=/ { ok++; for (i = 1; i <= NF; i++) { split($i, kv, "="); sum[kv[1]] += kv[2] } }
    END { if (ok == n) printf "frames_per_s=%.1f in_GBps=%.3f", sum["frames_per_s"], sum["in_GBps"] }'
  rm -f "$run"/multi*
}
# The completion modes on the default 2 slots, 4 KiB: one frame in flight
# (latency, and the daemon's CPU time per frame over all its threads, the
# CUDA driver's included: what polling costs), window 16 and $clients
# clients.  hybrid is bench/echo.json, the default.
cpu_ns() { # PID: CPU time of all its threads, ns (schedstat's first field)
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'
}
: > "$run/points"
for ((rep = 1; rep <= repeats; rep++)); do
  for slots in "${slot_counts[@]}"; do
    start_daemon "slots$slots" bench/echo.json $slots || continue
    for size in "${sizes[@]}"; do
      for w in 1 16; do
        if [ $w = 1 ]; then n=${n1[$size]}; else n=${n16[$size]}; fi
        point "daemon slots=$slots size=${bytes[$size]} window=$w clients=1" \
          "$(stream "$sock" "${bytes[$size]}" "$n" $w)"
      done
    done
    if [ "$slots" = 2 ]; then
      # Frames by reference (issue 11): the same sizes through a shared-memory
      # region on the default 2 slots, window 8 and (to compare with the
      # socket rows) window 16.
      for size in "${sizes[@]}"; do
        for w in 8 16; do
          point "daemon mode=shm slots=2 size=${bytes[$size]} window=$w clients=1" \
            "$(stream "$sock" "${bytes[$size]}" "${n16[$size]}" $w --shm)"
        done
      done
    fi
    point "daemon slots=$slots size=4096 window=16 clients=$clients" "$(clients_line 4096 $n_multi)"
    [ $rep = 1 ] && grep -hE "engine (auto|cuda|cpu):" "$log" | head -1 | sed "s/^/bench: slots=$slots: /"
    stop_daemon "slots$slots"
  done
  for mode in host_func hybrid poll; do
    cfg=bench/echo.json
    [ $mode = hybrid ] || cfg=bench/echo-${mode/_/-}.json
    start_daemon "$mode" $cfg 2 || continue
    c0=$(cpu_ns $pid)
    line=$(stream "$sock" 4096 "${n1[4K]}" 1)
    cpu=$(awk -v a="$c0" -v b="$(cpu_ns $pid)" -v n="${n1[4K]}" \
      'BEGIN { if (a > 0 && b > a) printf "%.1f", (b - a) / n / 1000; else print "?" }')
    point "daemon completion=$mode slots=2 size=4096 window=1 clients=1" "$line cpu_us_per_frame=$cpu"
    point "daemon completion=$mode slots=2 size=4096 window=16 clients=1" \
      "$(stream "$sock" 4096 "${n16[4K]}" 16)"
    point "daemon completion=$mode slots=2 size=4096 window=16 clients=$clients" \
      "$(clients_line 4096 $n_multi)"
    stop_daemon "$mode"
  done
done
echo "medians of $repeats repeats:"
medians | tee -a "$raw"

# ---- the table ------------------------------------------------------------------
# What the three tables' awk programs share: get(line key, field), the field of
# the first line of $raw holding every k=v of key ("?" if none), and ratio(a, b).
table_lib='
  function get(key, field,   want, n, i, j, ok, f) {
    n = split(key, want, " ")
    for (i = 1; i <= nlines; i++) {
      ok = 1
      for (j = 1; j <= n && ok; j++) if (!index(" " lines[i] " ", " " want[j] " ")) ok = 0
      if (!ok) continue
      if (match(" " lines[i], " " field "=[^ ]*")) {
        f = substr(" " lines[i], RSTART + length(field) + 2, RLENGTH - length(field) - 2)
        return f ~ /^[0-9.]+$/ ? f : "?"
      }
    }
    return "?"
  }
  function ratio(a, b) {
    if (b == "-") return "-"
    if (a == "?" || b == "?" || b + 0 == 0) return "?"
    return sprintf("%.2f", a / b)
  }
  { lines[++nlines] = $0 }'
# Every figure comes from $raw; a missing one is '?', one with no limit '-'.
echo
grep -h '^# device' "$raw" || true
echo "gpuframed echo, engine $engine, daemon args: ${GF_BENCH_DAEMON_ARGS:-(none)}; $(
  [ $short = 1 ] && echo "short run, ")window 16 = throughput, window 1 = latency"
echo "ratios: daemon figure / limit measured above (/gpu /sock /sockbw /copy: 1.00 = at the"
echo "limit; /floor /rtt: times the in-process latency)"
awk -v engine="$engine" -v sizes="${sizes[*]}" -v slot_list="${slot_counts[*]}" \
    -v clients=$clients -v bytes_list="$size_bytes" \
    "$table_lib"'
  function max2(a, b) { return a == "?" ? b : b == "?" ? a : (a + 0 > b + 0 ? a : b) }
  END {
    ns = split(sizes, label, " "); split(bytes_list, nbytes, " "); nsl = split(slot_list, sl, " ")
    sockbw = max2(get("name=sockpair write=65536", "GBps"), get("name=sockpair write=1048576", "GBps"))
    fmt = "%-5s %5s %7s %10s %6s %6s %8s %7s %6s %10s %7s %6s %10s\n"
    printf fmt, "size", "slots", "clients", "w16_fps", "/gpu", "/sock", "w16_GBps", "/sockbw",
      "/copy", "w1_p50_us", "/floor", "/rtt", "w1_p99_us"
    bad = 0
    for (s = 1; s <= ns; s++) {
      b = nbytes[s]
      sock_fps = get("name=sock_echo size=" b, "fps"); rtt = get("name=sock_rtt size=" b, "p50_us")
      copy = engine == "cuda" ? get("name=h2d size=" b, "GBps") : "-"
      floor = engine == "cuda" ? get("name=latency size=" b, "p50_us") : "-"
      for (k = 1; k <= nsl; k++) {
        d = "daemon slots=" sl[k] " size=" b
        pipe = engine == "cuda" ? get("name=pipeline streams=" sl[k] " size=" b, "fps") : "-"
        fps = get(d " window=16 clients=1", "frames_per_s"); gbps = get(d " window=16 clients=1", "in_GBps")
        p50 = get(d " window=1 clients=1", "p50_us"); p99 = get(d " window=1 clients=1", "p99_us")
        row = sprintf(fmt, label[s], sl[k], 1, fps, ratio(fps, pipe), ratio(fps, sock_fps), gbps,
          ratio(gbps, sockbw), ratio(gbps, copy), p50, ratio(p50, floor), ratio(p50, rtt), p99)
        printf "%s", row; bad += (row ~ /\?/)
      }
    }
    for (k = 1; k <= nsl; k++) {  # the concurrent clients: throughput only
      d = "daemon slots=" sl[k] " size=4096 window=16 clients=" clients
      pipe = engine == "cuda" ? get("name=pipeline streams=" sl[k] " size=4096", "fps") : "-"
      fps = get(d, "frames_per_s"); gbps = get(d, "in_GBps")
      copy = engine == "cuda" ? get("name=h2d size=4096", "GBps") : "-"
      row = sprintf(fmt, "4K", sl[k], clients, fps, ratio(fps, pipe),
        ratio(fps, get("name=sock_echo size=4096", "fps")), gbps, ratio(gbps, sockbw),
        ratio(gbps, copy), "-", "-", "-", "-")
      printf "%s", row; bad += (row ~ /\?/)
    }
    exit (bad > 0 ? 1 : 0)
  }' "$raw" || { echo "bench: figures missing ('?' above)"; status=1; }

# Whether more slots are ever slower, per size, from every repeat rather than
# the medians: the daemons of one repeat run back to back, so the ratio of
# their window-16 frames/s (4 slots over 2, 2 over 1) is paired, free of the
# drift between repeats, which is as large as the differences sought (on an
# H100, 2026-11-25: 4 MiB frames at 2.40 to 3.18 GB/s on 2 slots over 4
# repeats, every slot count and variant moving together).  Per pair: "yes"
# when the median ratio is at least 1; "tie" when it is under 1 but some
# repeat had more slots at least as fast, so the difference is within what
# the repeats resolve (the range printed); "no" when every repeat had more
# slots slower, and at least 3 repeats said so (with fewer, "tie": one repeat
# resolves nothing).  One daemon serves every size of a repeat, so the sizes'
# verdicts are not independent: a daemon placed badly moves them all.
# Information only, never the exit status.
awk -F'|' -v sizes="${sizes[*]}" -v slot_list="${slot_counts[*]}" -v repeats=$repeats \
    -v bytes_list="$size_bytes" '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $2 ~ /frames_per_s=/ {
    fps = $2; sub(/.*frames_per_s=/, "", fps); sub(/ .*/, "", fps)
    v[$1, $3] = fps + 0  # a failed repeat has no figure, and no pair
  }
  END {
    min_pairs = 3
    rank["yes"] = 0; rank["tie"] = 1; rank["no"] = 2; rank["?"] = 3
    ns = split(sizes, label, " "); split(bytes_list, nbytes, " "); nsl = split(slot_list, sl, " ")
    for (s = 1; s <= ns; s++) {
      text = ""; worst = "yes"  # the worst verdict of the size
      for (k = nsl; k >= 2; k--) {
        hi = "daemon slots=" sl[k] " size=" nbytes[s] " window=16 clients=1"
        lo = "daemon slots=" sl[k - 1] " size=" nbytes[s] " window=16 clients=1"
        m = 0; delete r
        for (i = 1; i <= repeats; i++) if (v[lo, i] > 0 && v[hi, i] > 0) r[++m] = v[hi, i] / v[lo, i]
        sep = text == "" ? " " : "; "
        if (m == 0) { text = text sprintf("%s%s/%s slots ?", sep, sl[k], sl[k - 1]); worst = "?"; continue }
        med = median(r, m)   # sorts r
        verdict = med >= 1 ? "yes" : r[m] >= 1 || m < min_pairs ? "tie" : "no"
        if (rank[verdict] > rank[worst]) worst = verdict
        text = text sprintf("%s%s/%s slots %.3f (repeats %.3f-%.3f: %s)", sep, sl[k], sl[k - 1], med, r[1], r[m], verdict)
      }
      printf "monotonic in slots %s w16 frames/s%s: %s\n", label[s], text, worst
    }
  }' "$run/points" || { echo "bench: the slot-order lines failed"; status=1; }

# The completion modes: latency against the in-process floor and the
# socket's round trip, the CPU it costs, and throughput against the
# 2-stream pipeline.
echo
echo "gpuframed echo 4 KiB, 2 slots, by completion mode (config/README.md, \"completion\")"
awk -v engine="$engine" -v clients=$clients "$table_lib"'
  END {
    fmt = "%-10s %10s %7s %6s %10s %12s %10s %6s %12s %6s\n"
    printf fmt, "completion", "w1_p50_us", "/floor", "/rtt", "w1_p99_us", "w1_cpu_us/f",
      "w16_fps", "/gpu", "w16x" clients "_fps", "/gpu"
    floor = engine == "cuda" ? get("name=latency size=4096", "p50_us") : "-"
    pipe = engine == "cuda" ? get("name=pipeline streams=2 size=4096", "fps") : "-"
    rtt = get("name=sock_rtt size=4096", "p50_us")
    bad = 0
    split("host_func hybrid poll", modes, " ")
    for (m = 1; m <= 3; m++) {
      d = "daemon completion=" modes[m] " slots=2 size=4096"
      p50 = get(d " window=1 clients=1", "p50_us"); p99 = get(d " window=1 clients=1", "p99_us")
      fps = get(d " window=16 clients=1", "frames_per_s")
      multi = get(d " window=16 clients=" clients, "frames_per_s")
      row = sprintf(fmt, modes[m], p50, ratio(p50, floor), ratio(p50, rtt), p99,
        get(d " window=1 clients=1", "cpu_us_per_frame"), fps, ratio(fps, pipe), multi,
        ratio(multi, pipe))
      printf "%s", row; bad += (row ~ /\?/)
    }
    exit (bad > 0 ? 1 : 0)
  }' "$raw" || { echo "bench: completion figures missing ('?' above)"; status=1; }

# Frames by reference against the same run's limits: /pipe is the in-process
# pipeline on 2 streams (the figure shm can reach: the socket is out of the
# data path), /h2d the pinned copy; x_sock compares window 16 with the
# socket path's window-16 row of the table above.
echo
echo "gpuframed echo --shm (shared-memory region, 2 slots) against this run's limits"
awk -v engine="$engine" -v sizes="${sizes[*]}" \
    -v bytes_list="$size_bytes" "$table_lib"'
  END {
    ns = split(sizes, label, " "); split(bytes_list, nbytes, " ")
    fmt = "%-5s %10s %9s %6s %6s %10s %9s %6s %13s %7s\n"
    printf fmt, "size", "w8_fps", "w8_GBps", "/pipe", "/h2d", "w16_fps", "w16_GBps", "/pipe",
      "sock_w16_GBps", "x_sock"
    bad = 0
    for (s = 1; s <= ns; s++) {
      b = nbytes[s]
      d = "daemon mode=shm slots=2 size=" b " window=8 clients=1"
      fps = get(d, "frames_per_s"); gbps = get(d, "in_GBps")
      d16 = "daemon mode=shm slots=2 size=" b " window=16 clients=1"
      fps16 = get(d16, "frames_per_s"); gbps16 = get(d16, "in_GBps")
      pipe = engine == "cuda" ? get("name=pipeline streams=2 size=" b, "GBps") : "-"
      copy = engine == "cuda" ? get("name=h2d size=" b, "GBps") : "-"
      sock = get("daemon slots=2 size=" b " window=16 clients=1", "in_GBps")
      row = sprintf(fmt, label[s], fps, gbps, ratio(gbps, pipe), ratio(gbps, copy), fps16,
        gbps16, ratio(gbps16, pipe), sock, ratio(gbps16, sock))
      printf "%s", row; bad += (row ~ /\?/)
    }
    exit (bad > 0 ? 1 : 0)
  }' "$raw" || { echo "bench: shm figures missing ('?' above)"; status=1; }
[ $many_clients = 1 ] && clients_section
echo "bench: done in $((SECONDS - started)) s"
exit $status

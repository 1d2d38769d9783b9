#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many clients against one daemon, each figure for the daemon's default
# shard count and for `--shards 1` in the same run (issue 23), and, on a host
# with two GPUs, one daemon on both against a daemon per GPU.  bench/run.sh
# --clients runs it after its own tables, passing its limits; bench/README.md,
# "Many clients and shards", says what each figure is.
#
#   bench/shards.sh BUILD_DIR --engine cuda|cpu [--short] [--limits FILE]
#
# --limits FILE: `limit ...` lines of this run (gf_limits, gf_sockbench) for
#   the ratios to the in-process pipeline and the socketpair; without it
#   those columns are '-'.
# GF_BENCH_DAEMON_ARGS: extra gpuframed options for every daemon, after the
#   script's own, so they win.
# GF_BENCH_ONE_SHARD_ARGS: what makes the comparison daemon ("--shards 1").
#   If it names --shards and `gpuframed --help` does not, the comparison is
#   skipped (one line says so) and the default daemon's figures are still
#   measured.  Another value compares something else the same way
#   ("--slots 1": how CI checks the mechanics on a daemon without shards).
# GF_BENCH_GPUS: the GPU count (default: what `nvidia-smi -L` lists); the
#   two-GPU section runs at 2 or more.  GF_BENCH_DEVICES_BOTH ("--devices
#   0,1"), GF_BENCH_DEVICES_A ("--devices 0"), GF_BENCH_DEVICES_B ("--devices
#   1"): the options of its daemons.
# GF_BENCH_REPEATS: fresh daemons per figure (3; 1 with --short).
#
# stdout: every repeat's `rep N: ...` line, then the tables.  Exit status 1
# when a program failed or a figure is missing ('?'), 2 on a bad command line.
set -uo pipefail
usage="usage: bench/shards.sh BUILD_DIR --engine cuda|cpu [--short] [--limits FILE]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
engine='' short=0 limits=/dev/null
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --short) short=1; shift ;;
    --limits) limits=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[[ $engine == cuda || $engine == cpu ]] || { echo "$usage" >&2; exit 2; }
[ -r "$limits" ] || { echo "bench: clients: cannot read --limits $limits" >&2; exit 2; }
limits=$(cd "$(dirname "$limits")" && pwd)/$(basename "$limits")
cd "$(dirname "$0")/.." || exit 2
for f in gpuframed gpuframe; do
  [ -x "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done

config=bench/shards.json # echo.json's slots and sizes, plus sincos_1000 for two GPUs
one_args=${GF_BENCH_ONE_SHARD_ARGS---shards 1}
gpus=${GF_BENCH_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
devices_both=${GF_BENCH_DEVICES_BOTH---devices 0,1}
devices_a=${GF_BENCH_DEVICES_A---devices 0}
devices_b=${GF_BENCH_DEVICES_B---devices 1}
client_counts=(1 4 16 64)
# Frames per client: each group runs about a second at the rates an H200
# gave one daemon (160-240k 4 KiB frames/s, 3-4 GB/s through the socket,
# 40 GB/s by shared memory); --short only checks the mechanics.
if [ $short = 1 ]; then
  repeats=${GF_BENCH_REPEATS:-1}
  small_total=2000    # 4 KiB window-16 frames of all clients together,
  small_min=200       # but at least these per client
  n_1m=20 n_w1=400 n_beside=100 n_w16=2000 n_shm=40 warm_s=0.2
  sincos_size=4096 n_sincos=4 n_gpu_shm=20 n_gpu_small=500
else
  repeats=${GF_BENCH_REPEATS:-3}
  small_total=200000 small_min=2000
  n_1m=400 n_w1=20000 n_beside=2000 n_w16=100000 n_shm=1000 warm_s=0.5
  sincos_size=1048576 n_sincos=1500 n_gpu_shm=600 n_gpu_small=50000
fi
bulk_count=1000000     # the 16 MiB streamer's frames: more than it gets to send
stream_timeout_s=120   # one client run; a stuck daemon costs this, not the whole run
run=$(mktemp -d); trap 'rm -rf "$run"' EXIT
: > "$run/points"
status=0
started=$SECONDS

# Whether the comparison daemon can start: a daemon before shards rejects
# --shards, and every figure would be '?'.
compare=1
if [[ " $one_args " == *" --shards "* ]] && ! "$build"/gpuframed --help 2>&1 | grep -q -- --shards; then
  compare=0
  echo "bench: clients: skipped the one-shard daemon: gpuframed --help names no --shards" \
    "(a daemon before shards); the default daemon's figures only, '-' for one shard"
fi

# One client run's summary line, or "failed: why" (a frame answered with an
# error fails it).  Without --shm the bytes go through the socket.
stream() { # SOCKET PIPELINE SIZE COUNT WINDOW [--shm]
  local out
  if out=$(timeout $stream_timeout_s "$build"/gpuframe stream --socket "$1" --pipeline "$2" \
             --size "$3" --count "$4" --window "$5" --quiet ${6:---no-shm} 2>&1) &&
     [[ $out == frames=*" errors=0 "* ]]; then echo "$out"
  else echo "failed: $(echo "$out" | tail -1)"; echo "bench: clients: stream $2 $3 bytes: $out" >&2; fi
}
# C clients at once, client i on socket i mod (number of sockets), or
# "failed: ..." unless every one succeeded.  frames_per_s and in_GBps are all
# the clients' frames and bytes over the longest client's time: a sum of the
# clients' own rates would count a client that ran while others had not
# started or had finished as if all ran together.  sum_fps is that sum,
# span_x the longest client's time over the shortest's (near 1: they ran
# side by side, and the two figures agree), wall_fps all frames over the
# group's wall time, process starts included.  Each client is waited for by
# its PID: the daemons are this shell's children too.
group() { # "SOCKET..." C PIPELINE SIZE COUNT_EACH WINDOW [--shm]
  local socks c=$2 pids=() i t0 t1
  read -ra socks <<< "$1"
  t0=$(date +%s%N)
  for ((i = 0; i < c; i++)); do
    stream "${socks[i % ${#socks[@]}]}" "$3" "$4" "$5" "$6" ${7:-} > "$run/client$i" & pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  t1=$(date +%s%N)
  for ((i = 0; i < c; i++)); do cat "$run/client$i"; done | awk -v n="$c" -v ns=$((t1 - t0)) '
    /^frames=/ {
      ok++
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      frames += f["frames"]; bytes += f["in_GBps"] * f["seconds"]; sum += f["frames_per_s"]
      if (f["seconds"] > hi) hi = f["seconds"]
      if (lo == "" || f["seconds"] < lo) lo = f["seconds"]
    }
    END {
      if (ok == n && hi > 0)
        printf "clients=%d frames=%d frames_per_s=%.1f in_GBps=%.3f sum_fps=%.1f span_x=%s wall_fps=%.1f\n",
               n, frames, frames / hi, bytes / hi, sum, (lo > 0 ? sprintf("%.2f", hi / lo) : "?"),
               frames / (ns / 1e9)
      else printf "failed: %d of %d clients failed\n", n - ok, n }'
  rm -f "$run"/client*
}

# Daemons: started on $run/NAME.sock with the script's options, then
# GF_BENCH_DAEMON_ARGS, and warmed up by 8 clients at once (the first frames
# of each shard pay for lazy set-up).  daemon_pid[NAME] is its PID.
declare -A daemon_pid
start_daemon() { # NAME EXTRA_ARGS
  local sock=$run/$1.sock log=$run/daemon-$1.log pid
  # shellcheck disable=SC2086  # both are lists of options
  "$build"/gpuframed --config $config --engine $engine --socket "$sock" $2 \
    ${GF_BENCH_DAEMON_ARGS:-} 2> "$log" &
  pid=$!
  daemon_pid[$1]=$pid
  for _ in $(seq 600); do
    [ -S "$sock" ] && { group "$sock" 8 echo 4096 200 16 > /dev/null; return 0; }
    kill -0 $pid 2>/dev/null || break; sleep 0.1
  done
  echo "bench: clients: gpuframed ($1: $2) did not start:"; cat "$log"; status=1
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; return 1
}
stop_daemon() { # NAME
  local pid=${daemon_pid[$1]} rc
  kill -TERM "$pid"; wait "$pid"; rc=$?
  [ $rc = 0 ] || { echo "bench: clients: gpuframed ($1) exited with $rc:"; tail -5 "$run/daemon-$1.log"; status=1; }
}
point() { # VARIANT KEY LINE: one repeat's figure, recorded and shown
  echo "$1|$2|$rep|$3" >> "$run/points"
  echo "rep $rep: $1 $2 $3"
}

# A 4 KiB window-1 client alone, then beside a 16 MiB window-4 streamer
# through the socket that runs from before its first frame to after its
# last; the streamer stops at SIGINT (gpuframe stream then collects what
# is in flight and prints its summary).  Nothing here depends on timing:
# the small client starts once the streamer's banner came through a FIFO
# (read blocks until then), and gpuframe stream takes SIGINT before it
# prints the banner, so the signal cannot come too early to count.
beside() { # SOCKET VARIANT
  local spid cpid small banner fd fifo=$run/bulk.fifo
  point "$2" "small=alone" "$(stream "$1" echo 4096 $n_beside 1)"
  mkfifo "$fifo"
  "$build"/gpuframe stream --socket "$1" --pipeline echo --size 16M --count $bulk_count \
    --window 4 --no-shm > "$fifo" 2> "$run/bulk.err" &
  spid=$!
  exec {fd}< "$fifo"
  if read -r -t $stream_timeout_s banner <&"$fd" && [[ $banner == streaming* ]]; then
    cat <&"$fd" > "$run/bulk" &
    cpid=$!
    sleep $warm_s
    small=$(stream "$1" echo 4096 $n_beside 1)
    kill -INT $spid 2>/dev/null ||
      small="failed: the 16 MiB streamer ended before the small client (beside nothing)"
  else
    small="failed: the 16 MiB streamer did not start: ${banner:-no output}"
    cat <&"$fd" > "$run/bulk" &
    cpid=$!
    kill -TERM $spid 2>/dev/null
  fi
  exec {fd}<&-
  wait $spid
  wait $cpid
  rm -f "$fifo"
  [[ $small == failed:* ]] &&
    echo "bench: clients: 16 MiB streamer: $banner $(cat "$run/bulk" "$run/bulk.err")" >&2
  point "$2" "small=beside" "$small"
  point "$2" "bulk=beside" \
    "$(grep '^frames=' "$run/bulk" || echo "failed: $(cat "$run/bulk" "$run/bulk.err" | tail -1)")"
}

# ---- shards: the default against --shards 1 ----------------------------------
for ((rep = 1; rep <= repeats; rep++)); do
  for variant in default one; do
    [ $variant = one ] && [ $compare = 0 ] && continue
    args=; [ $variant = one ] && args=$one_args
    start_daemon $variant "$args" || continue
    sock=$run/$variant.sock
    for c in "${client_counts[@]}"; do
      point $variant "group=$c size=4096 window=16" \
        "$(group "$sock" "$c" echo 4096 $((small_total / c > small_min ? small_total / c : small_min)) 16)"
    done
    point $variant "group=16 size=1048576 window=16" "$(group "$sock" 16 echo 1048576 $n_1m 16)"
    beside "$sock" $variant
    point $variant "one size=4096 window=1" "$(stream "$sock" echo 4096 $n_w1 1)"
    point $variant "one size=4096 window=16" "$(stream "$sock" echo 4096 $n_w16 16)"
    point $variant "one shm size=16777216 window=16" "$(stream "$sock" echo 16M $n_shm 16 --shm)"
    [ $rep = 1 ] && grep -hE "engine (auto|cuda|cpu):|shard" "$run/daemon-$variant.log" | head -3 |
      sed "s/^/bench: clients: $variant: /"
    stop_daemon $variant
  done
done

# ---- two GPUs: one daemon on both against one per GPU, and one on one --------
two_gpu=0
if [ "$gpus" -ge 2 ]; then
  if [[ "$devices_both $devices_a $devices_b" == *--devices* ]] &&
     ! "$build"/gpuframed --help 2>&1 | grep -q -- --devices; then
    echo "bench: two GPUs: skipped: gpuframed --help names no --devices (a daemon before shards)"
  else
    two_gpu=1
  fi
else
  echo "bench: two GPUs: skipped: $gpus GPU(s) (nvidia-smi -L, or GF_BENCH_GPUS)"
fi
gpu_loads() { # VARIANT "SOCKET...": the three loads of the two-GPU table
  point "$1" "gpu sincos size=$sincos_size window=16" \
    "$(group "$2" 4 sincos_1000 $sincos_size $n_sincos 16)"
  point "$1" "gpu shm size=16777216 window=16" "$(group "$2" 2 echo 16M $n_gpu_shm 16 --shm)"
  point "$1" "gpu size=4096 window=16" "$(group "$2" 4 echo 4096 $n_gpu_small 16)"
}
if [ $two_gpu = 1 ]; then
  for ((rep = 1; rep <= repeats; rep++)); do
    if start_daemon both "$devices_both"; then
      gpu_loads both "$run/both.sock"; stop_daemon both
    fi
    # Two daemons at once, half the clients on each.
    if start_daemon gpu_a "$devices_a"; then
      if start_daemon gpu_b "$devices_b"; then
        gpu_loads pair "$run/gpu_a.sock $run/gpu_b.sock"; stop_daemon gpu_b
      fi
      stop_daemon gpu_a
    fi
    if start_daemon single "$devices_a"; then
      gpu_loads single "$run/single.sock"; stop_daemon single
    fi
  done
fi

# ---- the tables -------------------------------------------------------------
# Every figure is the median over the repeats of one variant; a ratio of two
# variants is the median of the repeats' own ratios (the daemons of one repeat
# run back to back, free of the drift between repeats), its range beside it.
tables='
  function num(s) { return s ~ /^[0-9.]+$/ }
  function field(line, f,   x) {
    if (!match(" " line, " " f "=[^ ]*")) return "?"
    x = substr(" " line, RSTART + length(f) + 2, RLENGTH - length(f) - 2)
    return num(x) ? x : "?"
  }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  # The value of field f of key k for variant v in repeat r ("?" if none);
  # with f "p99ratio", beside over alone.
  function val(v, k, f, r,   a, b) {
    if (f == "p99ratio") {
      a = val(v, "small=beside", "p99_us", r); b = val(v, "small=alone", "p99_us", r)
      return a == "?" || b == "?" || b + 0 == 0 ? "?" : a / b
    }
    return (v SUBSEP k SUBSEP r) in line ? field(line[v, k, r], f) : "?"
  }
  function fig(v, k, f,   r, n, a, x) {
    if (!(v in variants)) return "-"
    n = 0
    for (r = 1; r <= repeats; r++) { x = val(v, k, f, r); if (x == "?") return "?"; a[++n] = x }
    return n ? median(a, n) : "?"
  }
  # Sets rlo, rhi; returns the median of per-repeat ratios of va over vb.
  function pratio(va, vb, k, f,   r, n, a, x, y) {
    rlo = rhi = ""
    if (!(va in variants) || !(vb in variants)) return "-"
    n = 0
    for (r = 1; r <= repeats; r++) {
      x = val(va, k, f, r); y = val(vb, k, f, r)
      if (x == "?" || y == "?" || y + 0 == 0) return "?"
      a[++n] = x / y
    }
    if (!n) return "?"
    x = median(a, n); rlo = a[1]; rhi = a[n]
    return x
  }
  function fmt(x) { return num(x) ? (x + 0 >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x)) : x }
  function ratio(a, b) { return b == "-" || a == "-" ? "-" : !num(a) || !num(b) || b + 0 == 0 ? "?" : sprintf("%.2f", a / b) }
  function range() { return rlo == "" ? "-" : sprintf("%.2f-%.2f", rlo, rhi) }
  # The limit lines: lim[name, size, field], the best over the lines of one
  # name and size (the pipeline over its stream counts; sockpair, which has
  # no size, over its write sizes, as size "?").
  FILENAME == limits && /^limit / {
    sz = field($0, "size"); nm = "?"
    if (match($0, / name=[^ ]*/)) nm = substr($0, RSTART + 6, RLENGTH - 6)
    for (i = 3; i <= NF; i++) {
      split($i, kv, "=")
      if (num(kv[2]) && (!((nm, sz, kv[1]) in lim) || kv[2] + 0 > lim[nm, sz, kv[1]] + 0)) lim[nm, sz, kv[1]] = kv[2]
    }
    next
  }
  FILENAME != limits {
    split($0, p, "|"); variants[p[1]] = 1; line[p[1], p[2], p[3]] = p[4]
  }
  function limit(nm, sz, f) { return (nm, sz, f) in lim ? lim[nm, sz, f] : "-" }
  function row(label, k, f, va, vb, lname, lsize, lf, sname, ssize, sf,   a, b, rr, l, s) {
    a = fig(va, k, f); b = fig(vb, k, f); rr = pratio(va, vb, k, f)
    l = lname == "" ? "-" : limit(lname, lsize, lf); s = sname == "" ? "-" : limit(sname, ssize, sf)
    printf rowfmt, label, fmt(a), fmt(b), rr == "-" || rr == "?" ? rr : sprintf("%.2f", rr), range(),
      ratio(a, l), ratio(b, l), ratio(a, s), ratio(b, s)
    if (a == "?" || b == "?" || rr == "?") bad++
  }
'
echo
echo "gpuframed, many clients: the default shard count against ${one_args} (engine $engine, $config," \
  "daemon args: ${GF_BENCH_DAEMON_ARGS:-(none)}); medians of $repeats fresh daemons each"
echo "x: default / one shard, the median of each repeat's own pair (range over repeats);"
echo "/gpu: over the best in-process pipeline of this run (any stream count); /sock: over one socketpair"
awk -v limits="$limits" -v repeats=$repeats -v clist="${client_counts[*]}" "$tables"'
  END {
    rowfmt = "%-30s %10s %10s %6s %11s %7s %7s %7s %7s\n"
    printf rowfmt, "figure", "default", "one", "x", "range", "/gpu", "/gpu1", "/sock", "/sock1"
    nc = split(clist, cl, " ")
    for (i = 1; i <= nc; i++)
      row(sprintf("4K w16 x%d clients frames/s", cl[i]), "group=" cl[i] " size=4096 window=16",
        "frames_per_s", "default", "one", "pipeline", 4096, "fps", "sock_echo", 4096, "fps")
    row("1M w16 x16 clients GB/s", "group=16 size=1048576 window=16", "in_GBps", "default", "one",
      "pipeline", 1048576, "GBps", "sockpair", "?", "GBps")
    row("4K w1 p99 us, alone", "small=alone", "p99_us", "default", "one")
    row("4K w1 p99 us, beside 16M w4", "small=beside", "p99_us", "default", "one")
    row("4K w1 p99 beside / alone", "", "p99ratio", "default", "one")
    row("16M w4 streamer beside, GB/s", "bulk=beside", "in_GBps", "default", "one",
      "", "", "", "sockpair", "?", "GBps")
    row("4K w1 x1 client p50 us", "one size=4096 window=1", "p50_us", "default", "one",
      "latency", 4096, "p50_us", "sock_rtt", 4096, "p50_us")
    row("4K w1 x1 client p99 us", "one size=4096 window=1", "p99_us", "default", "one")
    row("4K w16 x1 client frames/s", "one size=4096 window=16", "frames_per_s", "default", "one",
      "pipeline", 4096, "fps", "sock_echo", 4096, "fps")
    row("16M --shm w16 x1 client GB/s", "one shm size=16777216 window=16", "in_GBps", "default", "one",
      "pipeline", 16777216, "GBps")
    exit (bad > 0)
  }' "$limits" "$run/points" || { echo "bench: clients: figures missing ('?' above)"; status=1; }

if [ $two_gpu = 1 ]; then
  echo
  echo "gpuframed on two GPUs: one daemon ($devices_both) against two ($devices_a, $devices_b; half the"
  echo "clients each) and against one on one GPU ($devices_a); medians of $repeats; x: per-repeat ratios"
  awk -v limits="$limits" -v repeats=$repeats -v sincos_size=$sincos_size "$tables"'
    END {
      rowfmt = "%-30s %10s %10s %6s %11s\n"
      printf rowfmt, "figure", "one_daemon", "two", "x", "range"
      for (pass = 1; pass <= 2; pass++) {
        vb = pass == 1 ? "pair" : "single"
        if (pass == 2) { print ""; printf rowfmt, "figure", "two_gpus", "one_gpu", "x", "range" }
        r2("sincos_1000 x4 frames/s", "gpu sincos size=" sincos_size " window=16", "frames_per_s", vb)
        r2("16M --shm x2 GB/s", "gpu shm size=16777216 window=16", "in_GBps", vb)
        r2("4K w16 x4 frames/s", "gpu size=4096 window=16", "frames_per_s", vb)
      }
      exit (bad > 0)
    }
    function r2(label, k, f, vb,   a, b, rr) {
      a = fig("both", k, f); b = fig(vb, k, f); rr = pratio("both", vb, k, f)
      printf rowfmt, label, fmt(a), fmt(b), num(rr) ? sprintf("%.2f", rr) : rr, range()
      if (a == "?" || b == "?" || rr == "?") bad++
    }' "$limits" "$run/points" || { echo "bench: two GPUs: figures missing ('?' above)"; status=1; }
fi
echo "bench: clients: done in $((SECONDS - started)) s"
exit $status

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ctest bench_short_cpu: runs `bench/run.sh BUILD --engine cpu --short
# --clients` and checks the table's structure: every expected row, a number in
# every column that has a figure on the CPU engine, '-' in the GPU limit
# columns, one "monotonic in slots" line per size; and the many-clients table
# of bench/shards.sh: its 13 rows, each with a number for the default daemon
# and, unless the one-shard daemon was skipped (a daemon without --shards),
# for one shard and their ratio.  It asserts no speed.
#
#   bench/check_short.sh BUILD_DIR
#
# ctest runs it in the plain build only (bench/CMakeLists.txt).
set -uo pipefail
build=${1:?usage: check_short.sh BUILD_DIR}
# The output shows as it comes (a test cut short by its timeout shows how
# far it got) and is kept in BUILD_DIR/bench_short.log for the checks.
log=$build/bench_short.log
"$(dirname "$0")"/run.sh "$build" --engine cpu --short --clients 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
out=$(cat "$log")
[ $rc = 0 ] || { echo "check_short: bench/run.sh exited with $rc"; exit 1; }

echo "$out" | awk '
  BEGIN {
    num = "^[0-9]+(\\.[0-9]+)?$"
    # size slots clients w16_fps /gpu /sock w16_GBps /sockbw /copy w1_p50_us /floor /rtt w1_p99_us
    #  1     2     3       4      5    6       7       8       9      10       11    12     13
    split("4 6 7 8 10 12 13", one_client, " ")  # numeric with one client; 5 9 11 are "-"
    split("4 6 7 8", many_clients, " ")          # numeric with 4 clients; the rest "-"
    split("5 9 11", gpu_cols, " "); split("5 9 10 11 12 13", dash_many, " ")
    split("4K 1M", sizes, " "); split("1 2 4", slots, " ")
    for (s in sizes) for (k in slots) want[sizes[s] " " slots[k] " 1"] = 1
    for (k in slots) want["4K " slots[k] " 4"] = 1
  }
  $1 == "size" && $2 == "slots" { header = 1; next }
  header && NF == 13 && ($1 " " $2 " " $3) in want {
    key = $1 " " $2 " " $3; seen[key]++
    if ($3 == 1) { for (i in one_client) if ($one_client[i] !~ num) err = err "\n  " key ": column " one_client[i] " is " $one_client[i]
                   for (i in gpu_cols) if ($gpu_cols[i] != "-") err = err "\n  " key ": column " gpu_cols[i] " should be -" }
    else { for (i in many_clients) if ($many_clients[i] !~ num) err = err "\n  " key ": column " many_clients[i] " is " $many_clients[i]
           for (i in dash_many) if ($dash_many[i] != "-") err = err "\n  " key ": column " dash_many[i] " should be -" }
    next
  }
  /^monotonic in slots / && $NF ~ /^(yes|tie|no)$/ { mono[$4]++ }
  END {
    for (k in want) if (seen[k] != 1) err = err "\n  row \"" k "\" appears " seen[k] + 0 " times"
    for (s in sizes) if (mono[sizes[s]] != 1) err = err "\n  no monotonic line for " sizes[s]
    if (err != "") { print "check_short: the table is not as expected:" err; exit 1 }
    print "check_short: table complete"
  }' || exit 1
echo "$out" | awk '
  BEGIN { num = "^[0-9]+(\\.[0-9]+)?$"; rows_expected = 13 }
  /^bench: clients: skipped the one-shard daemon/ { skipped = 1 }
  $1 == "figure" && $2 == "default" && $3 == "one" { table = 1; next }
  table && (NF == 0 || /^bench: clients: /) { table = 0 }
  table && NF >= 9 {
    rows++; label = $1; for (i = 2; i <= NF - 8; i++) label = label " " $i
    if ($(NF - 7) !~ num) err = err "\n  " label ": default is " $(NF - 7)
    for (i = NF - 6; i <= NF - 5; i++)
      if (skipped ? $i != "-" : $i !~ num) err = err "\n  " label ": column " i " is " $i
  }
  END {
    if (rows != rows_expected) err = err "\n  " rows + 0 " rows, not " rows_expected
    if (err != "") { print "check_short: the many-clients table is not as expected:" err; exit 1 }
    print "check_short: many-clients table complete" (skipped ? " (no --shards: default daemon only)" : "")
  }'

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan in
# build-fuzz/ and runs each for SECONDS (default 20) on its own copy of the
# checked-in seed corpus.  Fails if any harness finds a crash, a leak, a
# sanitizer report or a broken invariant; the input that did it is kept as
# build-fuzz/artifacts/<harness>-crash-*, and the line to replay it is printed.
#
#   scripts/fuzz.sh            # 20 s each
#   scripts/fuzz.sh 3600       # an hour each; the corpus grows in build-fuzz/corpus
#   scripts/fuzz.sh --setup    # install what it needs only
#   scripts/fuzz.sh --build    # that, and build only (.ci/run, beside the tests)
#
# Environment: GF_FUZZ_BUILD_DIR (default build-fuzz), GF_FUZZ_ARGS (more
# libFuzzer flags, e.g. -fork=8 for eight processes), GF_FUZZ_JOBS (harnesses
# at once; default one per core).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20} only=
case $seconds in --setup | --build) only=$seconds seconds=0 ;; esac
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS | --setup | --build]" >&2; exit 2; }
build=${GF_FUZZ_BUILD_DIR:-build-fuzz}
harnesses=(fuzz_header fuzz_request fuzz_config fuzz_listing fuzz_shm)

# clang and its fuzzer runtime (Debian 12: clang-14, libclang-rt-14-dev),
# besides what scripts/setup.sh installs.
scripts/setup.sh
if ! command -v clang >/dev/null ||
   ! find "$(clang -print-resource-dir)/lib" -name 'libclang_rt.fuzzer-*.a' 2>/dev/null | grep -q .; then
  echo "fuzz: installing clang and its fuzzer runtime"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang
  major=$(clang -dumpversion | cut -d. -f1)
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "libclang-rt-$major-dev"
fi

if [ "$only" = --setup ]; then exit 0; fi

# No GF_WERROR: clang warns where gcc does not (-Wformat-nonliteral), and CI's -Werror
# build is gcc's.
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DGF_WITH_CUDA=OFF -DGF_FUZZ=ON \
  -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${harnesses[@]}"
if [ "$only" = --build ]; then exit 0; fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/artifacts"
# fuzz_one HARNESS: runs it for SECONDS on its corpus, its log in
# build-fuzz/HARNESS.log; exit status 0 without a finding.
fuzz_one() {
  local h=$1 corpus="$build/corpus/$1"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$h"/* "$corpus"/
  # shellcheck disable=SC2086
  "$build/tests/fuzz/$h" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$h-" ${GF_FUZZ_ARGS:-} "$corpus" >"$build/$h.log" 2>&1
}
# As many harnesses at once as there are cores (GF_FUZZ_JOBS): each runs
# its SECONDS on one core all the same.
jobs=${GF_FUZZ_JOBS:-$(nproc)}
declare -A pid_of
for h in "${harnesses[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "fuzz: $h for ${seconds}s on $build/corpus/$h"
  fuzz_one "$h" &
  pid_of[$h]=$!
done
failed=()
for h in "${harnesses[@]}"; do
  if ! wait "${pid_of[$h]}"; then
    tail -n 60 "$build/$h.log"
    echo "fuzz: $h FAILED; full log $build/$h.log; replay: $build/tests/fuzz/$h $build/artifacts/$h-*"
    failed+=("$h")
  else
    echo "fuzz: $h: $(grep -E '^(Done|stat::number_of_executed_units)' "$build/$h.log" | tail -n 1)"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#harnesses[@]} harnesses ran ${seconds}s without a finding"

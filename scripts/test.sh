#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: set up, build (warnings as errors with GF_WERROR=ON), and
# run every test that needs no GPU, several at a time (most of them wait far
# more than they compute: tests/CMakeLists.txt, "how a test is registered").
# Tests labelled `gpu` run with `ctest -L gpu` on a machine that has one
# (scripts/gpu-check.sh).
#
#   scripts/test.sh                  everything but gpu (about 4 minutes on 2 cores)
#   scripts/test.sh --quick          without the labels package, bench and soak
#   scripts/test.sh [--quick] ARGS   ARGS go to ctest: -R test_shm, -L unit, ...
#   scripts/test.sh --sanitizers     the same, and the suites again built with
#                                    ASan and UBSan (build-asan) and with TSan
#                                    (build-tsan), all three in one ctest run
#                                    (what .ci/run does; -L tsan picks a tree)
#
# Environment: GF_BUILD_DIR (default build), GF_CMAKE_ARGS (more cmake
# options, every tree), GF_WERROR=ON, GF_TEST_JOBS (tests at once; default
# twice the cores).
# Fails, too, when a test left anything in its temporary directory
# (BUILD/test-tmp, every test's TMPDIR), and when a sanitized tree's
# daemons or clients wrote a sanitizer report (BUILD/sanitizer-reports),
# whatever the tests said.
#
# The sanitized trees are built without CUDA: nothing there needs it (the
# .cu files take no sanitizer, there is no GPU to run the CUDA engine on
# where CI runs, and the plain tree builds and runs every CUDA-dependent
# line that can run there), and nvcc is most of a build's time.  One ctest
# over the three trees keeps both cores busy from the first test to the
# last: most tests wait far more than they compute, and a tree's longest
# tests run beside the others' rather than after them; ctest's slots and
# locks (tests/CMakeLists.txt, "how a test is registered") hold across the
# trees, so the soak and the benchmarks still run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
skip=gpu sanitizers=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) skip='gpu|package|bench|soak'; shift ;;
    --sanitizers) sanitizers=1; shift ;;
    *) break ;;
  esac
done
scripts/setup.sh
build=${GF_BUILD_DIR:-build}
trees=("$build")
# tree DIR CMAKE_OPTIONS...: configures and builds DIR.
tree() {
  local dir=$1
  shift
  # shellcheck disable=SC2086  # GF_CMAKE_ARGS is a list of options
  cmake -S . -B "$dir" -DGF_WERROR="${GF_WERROR:-OFF}" "$@" ${GF_CMAKE_ARGS:-}
  cmake --build "$dir" -j"$(nproc)"
}
tree "$build"
run=$build
if [ "$sanitizers" = 1 ]; then
  tree build-asan -DGF_SANITIZE=address,undefined -DGF_WITH_CUDA=OFF
  tree build-tsan -DGF_SANITIZE=thread -DGF_WITH_CUDA=OFF
  trees+=(build-asan build-tsan)
  # ctest runs a directory whose CTestTestfile.cmake names others: every
  # test of the three trees, each with its own properties.
  run=build-all
  mkdir -p "$run"
  printf 'subdirs(%s)\n' "$(printf '"%s" ' "${trees[@]/#/$PWD/}")" >"$run/CTestTestfile.cmake"
fi
for t in "${trees[@]}"; do
  rm -rf "$t/test-tmp" && mkdir "$t/test-tmp"
  if [ -d "$t/sanitizer-reports" ]; then find "$t/sanitizer-reports" -mindepth 1 -delete; fi
done
rc=0
(cd "$run" && ctest -LE "^($skip)\$" -j"${GF_TEST_JOBS:-$((2 * $(nproc)))}" --output-on-failure "$@") ||
  rc=$?
# Which tree each failed test was of: the combined run numbers the trees'
# tests one after another.
failed=$run/Testing/Temporary/LastTestsFailed.log
if [ "$rc" != 0 ] && [ "${#trees[@]}" -gt 1 ] && [ -s "$failed" ]; then
  first=1
  for t in "${trees[@]}"; do
    n=$(cd "$t" && ctest -N | sed -n 's/^Total Tests: //p')
    awk -F: -v a="$first" -v b=$((first + n)) -v t="$t" \
      '$1 >= a && $1 < b { print "test.sh: failed in " t ": " $2 }' "$failed"
    first=$((first + n))
  done
fi
for t in "${trees[@]}"; do
  if [ -n "$(ls -A "$t/test-tmp")" ]; then
    echo "test.sh: the tests left these behind in $PWD/$t/test-tmp (each test's TMPDIR):"
    ls -lA "$t/test-tmp"
    rc=1
  fi
  if [ -d "$t/sanitizer-reports" ] && [ -n "$(ls -A "$t/sanitizer-reports")" ]; then
    for f in "$t"/sanitizer-reports/*; do
      echo "==== sanitizer report $f"
      cat "$f"
    done
    rc=1
  fi
done
exit $rc

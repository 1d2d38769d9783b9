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
# three times the cores: tests/CMakeLists.txt, "how a test is registered").
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
# trees, so the soaks, the benchmarks and the package build still run one
# at a time.
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
# Ninja, which scripts/setup.sh installs, for a new build tree (a tree
# keeps the generator it was made with): CMake's Makefiles spend more on
# the same build (the plain tree on two cores: 89 CPU-s and 45.7 s, with
# Ninja 81 and 40.9).
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
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
# combine DIR TREE...: DIR's tests are every TREE's, each with its own
# properties, the first tree's under their names and the others' as
# asan:NAME, tsan:NAME (TREE without build-).  ctest runs a directory whose
# CTestTestfile.cmake names others (subdirs), but set_tests_properties
# there goes by name, so two trees' tests of one name would share the last
# one's properties: DIR holds copies of the trees' files with the names
# prefixed, each test run in its tree's directory as before; DIR's own
# Testing/ (ctest's times of the last run, which order the next) stays.
combine() {
  local dir=$1 first=$2 t f prefix
  shift
  for t in "$@"; do
    rm -rf "${dir:?}/$t"
    prefix=${t#build-}:
    [ "$t" = "$first" ] && prefix=
    (cd "$t" && find . -name CTestTestfile.cmake) | while read -r f; do
      f=${f#./} sub=${f%CTestTestfile.cmake}
      mkdir -p "$dir/$t/$sub"
      awk -v p="$prefix" -v wd="$PWD/$t/${sub%/}" '
        /^(add_test|set_tests_properties)\(\[=\[/ { sub(/\[=\[/, "[=[" p) }
        { print }
        /^add_test\(\[=\[/ {
          match($0, /\[=\[[^]]*\]=\]/)
          print "set_tests_properties(" substr($0, RSTART, RLENGTH) \
            " PROPERTIES WORKING_DIRECTORY \"" wd "\")"
        }' "$t/$f" >"$dir/$t/$f"
    done
  done
  printf 'subdirs(%s)\n' "$(printf '"%s" ' "$@")" >"$dir/CTestTestfile.cmake"
}
# trees_at_once DIR:OPTIONS...: configures and builds every tree at once,
# each one's output in DIR.log, shown if it failed.  One after another,
# each left a core idle in its single-threaded configure and final links:
# 111 to 117 s for the three on two cores, 105 s at once.
trees_at_once() {
  local specs=("$@") pids=() rc=0 i dir
  for i in "${!specs[@]}"; do
    dir=${specs[$i]%%:*}
    # shellcheck disable=SC2086  # the options are a list
    tree "$dir" ${specs[$i]#*:} >"$dir.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" && continue
    rc=1 dir=${specs[$i]%%:*}
    echo "test.sh: building $dir failed; its last lines ($PWD/$dir.log):"
    tail -n 40 "$dir.log"
  done
  return $rc
}
run=$build
if [ "$sanitizers" = 1 ]; then
  trees_at_once "$build:" "build-asan:-DGF_SANITIZE=address,undefined -DGF_WITH_CUDA=OFF" \
    "build-tsan:-DGF_SANITIZE=thread -DGF_WITH_CUDA=OFF"
  trees+=(build-asan build-tsan)
  run="build-all"
  combine "$run" "${trees[@]}"
else
  tree "$build"
fi
for t in "${trees[@]}"; do
  rm -rf "$t/test-tmp" && mkdir "$t/test-tmp"
  if [ -d "$t/sanitizer-reports" ]; then find "$t/sanitizer-reports" -mindepth 1 -delete; fi
done
rc=0
(cd "$run" && ctest -LE "^($skip)\$" -j"${GF_TEST_JOBS:-$((3 * $(nproc)))}" --output-on-failure "$@") ||
  rc=$?
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

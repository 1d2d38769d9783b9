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
#
# Environment: GF_BUILD_DIR (default build), GF_CMAKE_ARGS (more cmake
# options), GF_WERROR=ON, GF_TEST_JOBS (tests at once; default twice the cores).
# Fails, too, when a test left anything in its temporary directory
# (BUILD/test-tmp, every test's TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/.."
skip=gpu
if [ "${1:-}" = --quick ]; then
  skip='gpu|package|bench|soak'
  shift
fi
scripts/setup.sh
build=${GF_BUILD_DIR:-build}
# shellcheck disable=SC2086  # GF_CMAKE_ARGS is a list of options
cmake -S . -B "$build" -DGF_WERROR="${GF_WERROR:-OFF}" ${GF_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
# ctest starts the longest tests first by the times of its last run; a tree
# without one (a sanitizer tree) borrows the plain tree's, whose order is
# much the same.
costs=Testing/Temporary/CTestCostData.txt
if [ ! -e "$build/$costs" ] && [ -e "build/$costs" ]; then
  mkdir -p "$build/Testing/Temporary" && cp "build/$costs" "$build/$costs"
fi
cd "$build"
rm -rf test-tmp && mkdir test-tmp
rc=0
ctest -LE "^($skip)\$" -j"${GF_TEST_JOBS:-$((2 * $(nproc)))}" --output-on-failure "$@" || rc=$?
if [ -n "$(ls -A test-tmp)" ]; then
  echo "test.sh: the tests left these behind in $PWD/test-tmp (each test's TMPDIR):"
  ls -lA test-tmp
  rc=1
fi
exit $rc

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: set up, build (warnings as errors with GF_WERROR=ON), and
# run every test that needs no GPU.  Tests labelled `gpu` run with
# `ctest -L gpu` on a machine that has one (scripts/gpu-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${GF_BUILD_DIR:-build}
cmake -S . -B "$build" -DGF_WERROR="${GF_WERROR:-OFF}" ${GF_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest -LE gpu --output-on-failure --timeout 300

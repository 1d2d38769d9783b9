#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The PyTorch benchmark (issue 33): ResNet-18 (random weights, 3x224x224) in
# float32 and bfloat16, served by gpuframed behind normalize_u8 (uint8
# 224x224x3 frames; the plugin's CUDA graphs, and the same package without
# them), against the same package in-process (called, and replayed from
# CUDA graphs), eager PyTorch replayed from CUDA graphs, and a Python
# server (uvloop) in the same run;
# every result verified before timing; then the issue's three targets with
# their ratios.  bench/torch_bench.py says what each line means.
#
#   bench/torch.sh BUILD_DIR [--seconds S] [--quick] [--prepare] [--dry-run]
#                  [--pool-shards N]
#
# --pool-shards N: the daemon's pool_shards (config/README.md); default: the
# daemon's own.
#
# BUILD_DIR was configured with -DTorch_DIR (scripts/gpu-torch.sh does), so
# that it holds plugins/gf_torch.so and gf_torch_aoti.so; python3 has
# PyTorch, torchvision and uvloop ($PYTHON names another).  Packages are compiled into
# BUILD_DIR/bench-torch/ once per PyTorch version (about a minute each) and
# checked again on later runs.  About 7 minutes on an H200, 4.5 when the
# packages are there.  --quick: float32 only, batches 1, 8, 64, 0.5 s a
# measurement (about 1 minute once its package is made, which takes about
# another); --prepare only makes the packages.  --dry-run needs neither
# PyTorch nor a GPU: it checks the daemon's configuration and prints the
# rows, empty.
#
# stdout: lines "inproc|pkggraph|graphs PRECISION batch=B frames_per_s=F
# p50_us=P", "daemon|eager PRECISION clients=C window=W ...", "python
# PRECISION ...", and
# "target PRECISION ... RATIO (>= LIMIT) ok|MISSED".  Exit status 1 when a
# result failed verification or a step failed; a missed target is reported,
# not an error.
set -uo pipefail
usage="usage: bench/torch.sh BUILD_DIR [--seconds S] [--quick] [--prepare] [--dry-run] [--pool-shards N]"
if [ $# -lt 1 ] || ! [ -d "$1" ]; then echo "$usage" >&2; exit 2; fi
build=$(cd "$1" && pwd); shift
cd "$(dirname "$0")/.." || exit 2
for f in gpuframed gpuframe plugins/gf_torch.so; do
  [ -e "$build/$f" ] || { echo "bench: $build/$f not built" >&2; exit 2; }
done
dry=0
for a in "$@"; do [ "$a" = --dry-run ] && dry=1; done
if [ $dry = 0 ] && ! [ -e "$build/plugins/gf_torch_aoti.so" ]; then
  echo "bench: $build/plugins/gf_torch_aoti.so not built: configure with" \
    "-DTorch_DIR=\$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch" >&2
  exit 2
fi
exec "${PYTHON:-python3}" bench/torch_bench.py "$build" "$@"

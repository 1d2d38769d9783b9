#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the GPU machine, after scripts/gpu-check.sh (which unpacked .deps and
# built build-gpu/): plugin "torch" (issue 33).  Configures the same tree with
# the PyTorch of python3, builds the plugin's two objects, runs its tests
# (test_plugin_torch, python_export, python_torch_gpu: models exported at test
# time, batches, reload, refusals) and then bench/torch.sh.  Prints what a
# failure needs to be understood without the machine: PyTorch's versions, the
# configure lines about Torch, the build log's tail, each failing test's whole
# output, the objects' libraries.  Everything also lands in $OUT (or
# ./gpu-out): torch.txt (this output), torch-build.log, torch-ctest.log.
#
#   scripts/gpu-torch.sh [--no-bench] [--bench-only]
#
# About 6 minutes on an H200: the build 1-2, the tests 2-3 (five small
# models compiled by AOTInductor), the benchmark 2-3 (two ResNet-18
# packages compiled, once; BUILD/bench-torch keeps them for a second run).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}; mkdir -p "$out"
bench=1 tests=1
for a in "$@"; do
  case $a in
    --no-bench) bench=0 ;;
    --bench-only) tests=0 ;;
    *) echo "usage: scripts/gpu-torch.sh [--no-bench] [--bench-only]" >&2; exit 2 ;;
  esac
done
L=/opt/deps/usr/lib/x86_64-linux-gnu
if ! [ -d "$L" ]; then for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done; fi
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$L
export CPATH=/opt/deps/usr/include
[ -d .deps/systemd-tools/bin ] && export PATH=$PWD/.deps/systemd-tools/bin:$PATH
build=build-gpu
exec > >(tee "$out/torch.txt") 2>&1
status=0

echo "== PyTorch"
python3 - <<'PY' || { echo "python3 has no usable PyTorch: nothing to test"; exit 1; }
import sys, torch
print("python %s; torch %s (CUDA %s, cxx11 ABI %s); %s" % (
    sys.version.split()[0], torch.__version__, torch.version.cuda,
    torch.compiled_with_cxx11_abi(),
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"))
for m in ("torchvision", "uvloop", "numpy"):
    try:
        print("%s %s" % (m, __import__(m).__version__))
    except Exception as e:
        print("%s: %s" % (m, e))
PY
torch_dir=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch
echo "Torch_DIR=$torch_dir"

echo "== build with Torch"
if ! { cmake -S . -B $build -DGF_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTorch_DIR="$torch_dir" &&
       cmake --build $build -j16; } >"$out/torch-build.log" 2>&1; then
  echo "BUILD FAILED; the configure lines about Torch and the log's tail:"
  grep -n -i -E "torch|caffe2|error" "$out/torch-build.log" | head -40
  tail -60 "$out/torch-build.log"
  exit 1
fi
grep -E "plugin torch|PyTorch" "$out/torch-build.log"
for so in gf_torch.so gf_torch_aoti.so; do
  f=$build/plugins/$so
  if [ -e "$f" ]; then
    echo "$so needs: $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | tr '\n' ' ')"
    ldd "$f" | grep -E "not found" && status=1
  else
    echo "$so: NOT BUILT"; status=1
  fi
done
[ $status = 0 ] || { echo "the plugin is not complete: stopping"; exit 1; }

if [ $tests = 1 ]; then
  echo "== tests: test_plugin_torch python_export python_torch_gpu (and the LIST ones)"
  (cd $build && ctest -V --timeout 1500 \
     -R '^(test_plugin_torch|python_export|python_torch_gpu|test_plugins|python_client)$') \
    >"$out/torch-ctest.log" 2>&1
  grep -E "^[0-9]+/[0-9]+ Test|tests passed|tests failed" "$out/torch-ctest.log"
  # What the GPU suite printed of itself: exports, batches, reload, refusals.
  grep -E "^[0-9]+: (exported|refused|16 clients|frames answered|test_|gpuframe-export|FAIL|ERROR|SKIP|Ran |OK|FAILED)" \
    "$out/torch-ctest.log" | sed 's/^[0-9]*: /   /'
  if grep -q -E "tests failed|\*\*\*Failed|\*\*\*Timeout" "$out/torch-ctest.log"; then
    status=1
    echo "== the failing tests' output"
    for t in $(sed -n 's/^.*Test *#[0-9]*: \([a-z_]*\) .*\*\*\*.*$/\1/p' "$out/torch-ctest.log"); do
      echo "---- $t"
      n=$(sed -n "s/^ *Start *\([0-9]*\): $t\$/\1/p" "$out/torch-ctest.log" | head -1)
      grep -E "^$n: " "$out/torch-ctest.log" | sed "s/^$n: //" | tail -250
    done
  fi
fi

if [ $bench = 1 ]; then
  echo "== bench/torch.sh"
  bench/torch.sh $build || status=1
fi
echo "== gpu-torch.sh: $([ $status = 0 ] && echo ok || echo FAILED)"
exit $status

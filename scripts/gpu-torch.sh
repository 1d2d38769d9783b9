#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the GPU machine (after scripts/gpu-deps.sh prepared .deps here): plugin
# "torch" (issue 33) and the plugin suites beside it.  Configures build-gpu
# with the PyTorch of python3 and builds it, runs
# scripts/torch_link_check.py (one small model compiled five ways, each
# loaded in python3 and in gpuframed: the C++ runtime the package's model
# object links, plugins/README.md "One C++ runtime"; about 90 s), exports
# the first way that loads for the rest of the run, runs test_plugin_torch,
# python_export, test_plugins, python_client, test_plugin_builtin_gpu,
# test_plugins_gpu and python_torch_gpu (models exported at test time,
# batches, device memory after start-up, reload, refusals), and then
# bench/torch.sh only if they all passed and enough of the time budget is
# left.  Prints what a failure needs to be understood without the machine:
# PyTorch's versions, the configure lines about Torch, the build log's tail,
# each step of the GPU suite as it went, each failing test's whole output.
# A crash explains itself: the tests run with PYTHONFAULTHANDLER=1 (every
# thread's Python traceback) and LD_PRELOAD=gf_crash_backtrace.so (the
# native backtrace, of the python3 or of a daemon, whose log the failed
# test prints), and the GPU suite runs each step in a process of its own,
# so the next one still runs.  Everything also lands in $OUT (or ./gpu-out):
# torch.txt (this output), torch-build.log, link-check/ (each way's logs),
# torch-ctest.log, bench.txt.
#
#   scripts/gpu-torch.sh [--no-bench] [--bench-only] [--link-check-only]
#                        [--no-link-check] [--budget SECONDS]
#
# On an H200: the build 1-2 minutes, the link check 1.5, the tests 3-4
# (python_torch_gpu compiles five small models, at once, then its four
# classes), the benchmark 3-4 (two ResNet-18 packages compiled and checked,
# then 1 s per measurement).  The budget (default 560 s, for a 600 s
# limit) is the whole run's: the benchmark runs only with 220 s of it left,
# under a timeout of what is left.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}; mkdir -p "$out"
bench=1 tests=1 link_check=1 budget=560
while [ $# -gt 0 ]; do
  case $1 in
    --no-bench) bench=0 ;;
    --bench-only) tests=0 ;;
    --link-check-only) tests=0 bench=0 ;;
    --no-link-check) link_check=0 ;;
    --budget) budget=$2; shift ;;
    *) echo "usage: scripts/gpu-torch.sh [--no-bench] [--bench-only] [--link-check-only]" \
         "[--no-link-check] [--budget SECONDS]" >&2
       exit 2 ;;
  esac
  shift
done
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
L=/opt/deps/usr/lib/x86_64-linux-gnu
if ! [ -d "$L" ]; then for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done; fi
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$L
export CPATH=/opt/deps/usr/include
[ -d .deps/systemd-tools/bin ] && export PATH=$PWD/.deps/systemd-tools/bin:$PATH
build=build-gpu
exec > >(tee "$out/torch.txt") 2>&1
status=0

stamp "PyTorch"
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

stamp "build with Torch"
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

if [ $link_check = 1 ]; then
  stamp "link check: scripts/torch_link_check.py (logs in $out/link-check)"
  timeout 170 python3 scripts/torch_link_check.py $build "$out/link-check" --seconds 150 ||
    { echo "scripts/torch_link_check.py failed"; status=1; }
  if [ -s "$out/link-check/torch-link.env" ]; then
    set -a; . "$out/link-check/torch-link.env"; set +a
  else
    status=1
  fi
fi

if [ $tests = 1 ]; then
  tests='test_plugin_torch|python_export|test_plugins|python_client|test_plugin_builtin_gpu'
  tests+='|test_plugins_gpu|python_torch_gpu'
  stamp "tests: ${tests//|/ } (python_torch_gpu and test_plugin_builtin_gpu alone: RUN_SERIAL)"
  [ -e $build/tests/gf_crash_backtrace.so ] || { echo "gf_crash_backtrace.so not built"; exit 1; }
  (cd $build && PYTHONFAULTHANDLER=1 LD_PRELOAD=$PWD/tests/gf_crash_backtrace.so \
     ctest -V -j4 --timeout 600 -R "^($tests)\$") >"$out/torch-ctest.log" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed" "$out/torch-ctest.log"
  # What the GPU suites printed of themselves: each export's steps, each
  # class's tests, memory figures, crashes, the summary.
  grep -E "^[0-9]+: (==|\[[a-z0-9_]+\] |exported|FAILED|gpuframe-export|Fatal Python|"\
"gf_crash_backtrace|Current thread|Thread 0x|  File |refused|16 clients|frames answered|"\
"launches|the first|the next|the device|test_|FAIL|ERROR|SKIP|Ran |OK|mlp|[A-Za-z]+Test: )" \
    "$out/torch-ctest.log" | sed 's/^[0-9]*: /   /' | cut -c1-400
  # A skip counts: on this machine every one of them must run.
  if grep -q -E "\*\*\*(Failed|Timeout|Exception|Skipped)|Not Run" "$out/torch-ctest.log"; then
    status=1
    echo "== the failing (or skipped) tests' output"
    for t in $(sed -n 's/^.*Test *#[0-9]*: \([a-z_]*\) .*\*\*\*.*$/\1/p' "$out/torch-ctest.log"); do
      echo "---- $t"
      n=$(sed -n "s/^ *Start *\([0-9]*\): $t\$/\1/p" "$out/torch-ctest.log" | head -1)
      grep -E "^$n: " "$out/torch-ctest.log" | sed "s/^$n: //" | tail -400
    done
  fi
fi

left=$((budget - (SECONDS - start)))
if [ $bench = 1 ] && [ $status != 0 ]; then
  stamp "bench/torch.sh not run: the tests failed"
elif [ $bench = 1 ] && [ $left -lt 220 ]; then
  stamp "bench/torch.sh not run: ${left} s of the ${budget} s budget left (it needs about" \
    "210): scripts/gpu-torch.sh --bench-only runs it"
elif [ $bench = 1 ]; then
  stamp "bench/torch.sh $build --seconds 1 (timeout $((left - 10)) s)"
  PYTHONFAULTHANDLER=1 timeout $((left - 10)) bench/torch.sh $build --seconds 1 2>&1 |
    tee "$out/bench.txt"
  rc=${PIPESTATUS[0]}
  [ $rc = 124 ] && echo "bench/torch.sh TIMED OUT"
  [ $rc = 0 ] || status=1
fi
stamp "gpu-torch.sh: $([ $status = 0 ] && echo ok || echo FAILED)"
exit $status

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
#   scripts/gpu-torch.sh [--quick] [--no-bench] [--bench-only] [--link-check-only]
#                        [--no-link-check] [--budget SECONDS]
#
# --quick, for a small device budget: no link check (the packages link
# libstdc++.so.6 where the compiler would link the archive: gpuframe-export
# --libstdcxx auto, its default); test_plugin_torch and python_export (no
# GPU, seconds); then at once the GPU suite's packages (test_torch_gpu.py
# --quick --make: a CNN, an MLP three ways, a model of two inputs, one
# through the host's memory) and the benchmark's (ResNet-18 float32,
# bench/torch.sh --quick --prepare); then the suite's DirectTest and
# DaemonTest (every result against eager PyTorch within gpuframe-export's
# tolerances, batches of 1, 7, 64 and mixed through the plugin's CUDA
# graphs, a package from batch 2 padded, no device memory taken by
# launches, LIST, 16 clients, the daemon's pipelines with and without
# graphs) and bench/torch.sh --quick (float32, batches 1, 8, 64, 0.5 s a
# measurement, the three targets).  About 5 minutes on an H200 (the
# packages 2.5 of them), each step under a timeout within the budget
# (default 360 s for --quick); logs torch-quick-make.log,
# torch-quick-tests.log, bench.txt.
# On an H200: the build 1-2 minutes, the link check 1.5, the tests 5-6
# (python_torch_gpu compiles six small models, at once, then its five
# classes), the benchmark 4.5 when its two ResNet-18 packages are in
# build-gpu/bench-torch already, 7 when it compiles and checks them first
# (1 s per measurement).  The budget (default 560 s, for a 600 s limit) is
# the whole run's: the benchmark runs only with what it needs of it left
# (270 s, 420 s without its packages), under a timeout of what is left; a
# second call with --bench-only runs it otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}; mkdir -p "$out"
bench=1 tests=1 link_check=1 budget= quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 link_check=0 ;;
    --no-bench) bench=0 ;;
    --bench-only) tests=0 ;;
    --link-check-only) tests=0 bench=0 ;;
    --no-link-check) link_check=0 ;;
    --budget) budget=$2; shift ;;
    *) echo "usage: scripts/gpu-torch.sh [--quick] [--no-bench] [--bench-only]" \
         "[--link-check-only] [--no-link-check] [--budget SECONDS]" >&2
       exit 2 ;;
  esac
  shift
done
# The whole run's budget: each step's timeout is what is left of it.
[ -n "$budget" ] || budget=$([ $quick = 1 ] && echo 360 || echo 560)
start=$SECONDS
cap() { # SECONDS: the timeout of a step that needs at most SECONDS, within the budget
  local left=$((budget - (SECONDS - start) - 5))
  echo $(( left < $1 ? (left > 10 ? left : 10) : $1 ))
}
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

# The quick run: the host tests, then the packages of the GPU suite and of
# the benchmark made at once, then the suite's two classes and the short
# benchmark; each step under a timeout, what it printed kept and its lines
# that matter shown.
if [ $quick = 1 ]; then
  [ -e $build/tests/gf_crash_backtrace.so ] || { echo "gf_crash_backtrace.so not built"; exit 1; }
  stamp "quick: test_plugin_torch, python_export (no GPU)"
  (cd $build && ctest --output-on-failure --timeout 120 -R '^(test_plugin_torch|python_export)$') \
    >"$out/torch-ctest.log" 2>&1 || { cat "$out/torch-ctest.log" | tail -60; status=1; }
  grep -E "tests passed|tests failed" "$out/torch-ctest.log"
  pkgs=$(mktemp -d /tmp/gftorchq.XXXXXX)
  # test_torch_gpu.py as ctest runs it (python/CMakeLists.txt), crashes explained.
  suite=(env PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1 PYTHONFAULTHANDLER=1
         GF_TEST_DAEMON="$PWD/$build/gpuframed" GF_TEST_ENGINE=cuda
         GF_TEST_PLUGIN_DIR="$PWD/$build/plugins"
         LD_PRELOAD="$PWD/$build/tests/gf_crash_backtrace.so"
         python3 python/tests/test_torch_gpu.py --quick)
  shown='^(==|\[[a-z0-9_]+\] |exported|FAILED|gpuframe-export|Fatal Python|gf_crash_backtrace|'\
'Current thread|Thread 0x|  File |launches|the first|the next|the device|16 clients|test_|FAIL|'\
'ERROR|SKIP|Ran |OK|----|gpuframed still|[A-Za-z]+Test: |[a-z_]+ \(__main__|[A-Za-z]+: (ok|FAILED))'
  stamp "quick: the suite's packages and the benchmark's, at once (torch-quick-make.log, bench.txt)"
  timeout $(cap 170) "${suite[@]}" --make "$pkgs" >"$out/torch-quick-make.log" 2>&1 &
  make_pid=$!
  if [ $bench = 1 ]; then
    PYTHONFAULTHANDLER=1 timeout $(cap 170) bench/torch.sh $build --quick --prepare \
      >"$out/bench.txt" 2>&1 &
    prep_pid=$!
  fi
  wait $make_pid; rc=$?
  # Each export's steps but the check's per-batch lines (its figures are the lines with "diff").
  grep -E "$shown" "$out/torch-quick-make.log" |
    grep -v -E "gpuframe-export: (batch of [0-9]+: running|loading|loaded in|checking in)" | cut -c1-300
  if [ $rc != 0 ]; then
    status=1
    echo "the suite's packages: FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out')); the log's tail:"
    tail -40 "$out/torch-quick-make.log"
  fi
  if [ $bench = 1 ]; then
    wait $prep_pid; prc=$?
    grep -E "^package|^packages|bench:|gpuframe-export: (exported|compiled|the model)" "$out/bench.txt" |
      cut -c1-300
    if [ $prc != 0 ]; then
      echo "the benchmark's package: FAILED (exit $prc); bench.txt's tail:"
      tail -40 "$out/bench.txt"
      status=1 bench=0
    fi
  fi
  if [ $rc = 0 ]; then
    stamp "quick: DirectTest, DaemonTest (torch-quick-tests.log)"
    timeout $(cap 170) "${suite[@]}" --run "$pkgs" >"$out/torch-quick-tests.log" 2>&1
    rc=$?
    grep -E "$shown" "$out/torch-quick-tests.log" | cut -c1-300
    if [ $rc != 0 ]; then
      status=1
      echo "== the suite FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out')): each failure whole"
      awk '/^(FAIL|ERROR): /{p=1} /^Ran [0-9]+ test/{p=0} p' "$out/torch-quick-tests.log" |
        head -300
      grep -A80 "^---- .* failed; the daemon's log" "$out/torch-quick-tests.log" | head -200
    fi
  fi
  rm -rf "$pkgs"
  if [ $bench = 1 ] && [ $status = 0 ]; then
    stamp "quick: bench/torch.sh $build --quick"
    PYTHONFAULTHANDLER=1 timeout $(cap 150) bench/torch.sh $build --quick 2>&1 |
      tee -a "$out/bench.txt"
    rc=${PIPESTATUS[0]}
    [ $rc = 124 ] && echo "bench/torch.sh TIMED OUT"
    [ $rc = 0 ] || status=1
  elif [ $bench = 1 ]; then
    stamp "bench/torch.sh --quick not run: the tests failed"
  fi
  stamp "gpu-torch.sh --quick: $([ $status = 0 ] && echo ok || echo FAILED)"
  exit $status
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
# The benchmark's need: its measurements, and its packages' compiles and
# checks where build-gpu/bench-torch has not both of this PyTorch's.
made=$(ls $build/bench-torch/*.pt2.made-by-gpuframe-export-* 2>/dev/null |
       grep -c -F -- "-torch-$(python3 -c 'import torch; print(torch.__version__)')")
need=$([ "$made" -ge 2 ] && echo 270 || echo 420)
if [ $bench = 1 ] && [ $status != 0 ]; then
  stamp "bench/torch.sh not run: the tests failed"
elif [ $bench = 1 ] && [ $left -lt $need ]; then
  stamp "bench/torch.sh not run: ${left} s of the ${budget} s budget left (it needs about" \
    "$need): scripts/gpu-torch.sh --bench-only runs it"
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

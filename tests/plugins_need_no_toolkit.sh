#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A plugin's host part needs no library of the CUDA toolkit (plugins/README.md,
# "The toolkit stays out of the host part"): gpuframed's CPU engine and
# `gpuframe stream --verify` load gf_example.so and gf_mlp.so on hosts without
# it, and only gf_mlp_cuda.so, which gf_mlp.so loads at device_open, needs
# cuBLAS.  Fails when
#   1. gf_example.so or gf_mlp.so has a NEEDED entry for the CUDA runtime,
#      cuBLAS or the driver (readelf -d);
#   2. gf_mlp_cuda.so (built with CUDA) does not need libcublas, or needs
#      libcudart (its runtime is linked statically: plugins/CMakeLists.txt);
#   3. test_plugin_builtin fails with the directory that holds cuBLAS hidden
#      under an empty one and LD_LIBRARY_PATH unset, in a mount namespace of
#      its own: the plugins load, check their tables, create and compute
#      their references there.  The hiding is checked first (ldd must find no
#      libcublas for gf_mlp_cuda.so); where no mount namespace can be made
#      (neither root nor unprivileged user namespaces) or cuBLAS is found
#      elsewhere too, this part is left out, saying so.
# Usage: plugins_need_no_toolkit.sh TEST_PLUGIN_BUILTIN GF_EXAMPLE_SO GF_MLP_SO [GF_MLP_CUDA_SO]
# (GF_MLP_CUDA_SO is absent in a build without CUDA.)
set -uo pipefail
usage="usage: plugins_need_no_toolkit.sh TEST_PLUGIN_BUILTIN GF_EXAMPLE_SO GF_MLP_SO [GF_MLP_CUDA_SO]"
suite=${1:?$usage} example=${2:?$usage} mlp=${3:?$usage} mlp_cuda=${4:-}
for tool in readelf ldd; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
for file in "$suite" "$example" "$mlp" ${mlp_cuda:+"$mlp_cuda"}; do
  [ -f "$file" ] || { echo "FAIL: $file does not exist (build everything first)"; exit 1; }
done

# The sonames an object names in its dynamic section, one a line.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }
# The toolkit's libraries a host part must not need, and the driver's.
toolkit='^lib(cuda|cudart|cublas|cublasLt)\.so'
status=0

for so in "$example" "$mlp"; do
  if bad=$(needed "$so" | grep -E "$toolkit"); then
    echo "FAIL: $so needs a library of the CUDA toolkit: $(echo "$bad" | tr '\n' ' ')"
    status=1
  else
    echo "ok: $so needs $(needed "$so" | tr '\n' ' ')"
  fi
done
if [ -n "$mlp_cuda" ]; then
  if ! needed "$mlp_cuda" | grep -q '^libcublas\.so'; then
    echo "FAIL: $mlp_cuda does not need libcublas: where is mlp's cuBLAS code?"
    status=1
  fi
  if needed "$mlp_cuda" | grep -q '^libcudart\.so'; then
    echo "FAIL: $mlp_cuda needs libcudart: its runtime is meant to be static"
    status=1
  fi
  [ "$status" -ne 0 ] || echo "ok: $mlp_cuda needs $(needed "$mlp_cuda" | tr '\n' ' ')"
fi
[ "$status" -eq 0 ] || exit 1

# ---- 3: the unit suite with the toolkit's libraries hidden ------------------
if [ -z "$mlp_cuda" ]; then
  echo "ok: no CUDA in this build, so no toolkit to hide"
  exit 0
fi
cublas=$(ldd "$mlp_cuda" | awk '$1 ~ /^libcublas\.so/ && $3 ~ /^\// { print $3 }')
if [ -z "$cublas" ]; then
  echo "NOTE: ldd finds no libcublas for $mlp_cuda; the run without the toolkit is left out"
  exit 0
fi
hide=$(dirname "$(readlink -f "$cublas")")
if [ "$(id -u)" = 0 ]; then
  ns=(unshare --mount)
else
  ns=(unshare --user --map-root-user --mount)
fi
if ! command -v unshare >/dev/null || ! "${ns[@]}" true 2>/dev/null; then
  echo "NOTE: no mount namespace to be had (${ns[*]}); the run without the toolkit is left out"
  exit 0
fi
empty=$(mktemp -d)
trap 'rmdir "$empty"' EXIT
# Exit codes of the namespace's own steps, apart from the suite's 0 and 1.
mount_failed=90 still_found=91
# shellcheck disable=SC2016 # the inner bash expands its own arguments
"${ns[@]}" env -u LD_LIBRARY_PATH bash -c '
  mount --bind "$1" "$2" || exit "$5"
  ldd "$3" | grep -q "^[[:space:]]*libcublas\.so.* => not found" || exit "$6"
  exec "$4"' hide "$empty" "$hide" "$mlp_cuda" "$suite" "$mount_failed" "$still_found"
rc=$?
case $rc in
  0) echo "ok: $(basename "$suite") passes with $hide hidden and LD_LIBRARY_PATH unset" ;;
  "$mount_failed")
    echo "NOTE: cannot bind-mount over $hide; the run without the toolkit is left out" ;;
  "$still_found")
    echo "NOTE: libcublas is found elsewhere than $hide too; the run without the toolkit is left out" ;;
  *) echo "FAIL: $(basename "$suite") fails with $hide hidden (exit $rc)"; exit 1 ;;
esac
exit 0

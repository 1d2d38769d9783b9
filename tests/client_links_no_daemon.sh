#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The client must not carry the daemon (CONTRIBUTING.md, "Where things are"): gpuframe
# links gpuframe_client, gfreport, gfpipelines, gfprotocol and cJSON, so that
# `gpuframe list` neither loads the CUDA runtime nor holds the kernels.  Fails
# when the built gpuframe
#   1. lists libcudart (or libcuda) among its libraries (ldd);
#   2. holds a CUDA fat binary, i.e. the kernels' cubins (.nv_fatbin);
#   3. defines any symbol that a daemon module (gfcore) or a CUDA launcher
#      (gfkernels) defines, or any gf_shard_, gf_engine_, gf_config_ or
#      gf_kernel_launcher symbol or *_launch launcher, whatever library it
#      came from.
# Usage: client_links_no_daemon.sh GPUFRAME LIBGFCORE [LIBGFKERNELS]
# (LIBGFKERNELS is absent in a build without CUDA.)
set -euo pipefail
client=${1:?usage: client_links_no_daemon.sh GPUFRAME LIBGFCORE [LIBGFKERNELS]}
shift
for tool in ldd nm readelf; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
for file in "$client" "$@"; do
  [ -f "$file" ] || { echo "FAIL: $file does not exist (build everything first)"; exit 1; }
done
status=0

if libs=$(ldd "$client" | grep -E 'libcudart|libcuda\.so'); then
  echo "FAIL: $client loads the CUDA runtime:"
  echo "$libs"
  status=1
fi

if readelf -S -W "$client" | grep -q '\.nv_fatbin'; then
  echo "FAIL: $client carries CUDA kernels (a .nv_fatbin section)"
  status=1
fi

# Global symbols the client defines, and those the daemon's libraries define.
defined_by() { nm --defined-only -g "$@" | awk 'NF == 3 { print $3 }' | sort -u; }
client_syms=$(defined_by "$client")
daemon_syms=$(defined_by "$@")
if shared=$(comm -12 <(echo "$client_syms") <(echo "$daemon_syms") | grep .); then
  echo "FAIL: $client defines $(echo "$shared" | wc -l) symbol(s) of the daemon's libraries:"
  echo "$shared" | head -20
  status=1
fi
if named=$(echo "$client_syms" |
             grep -E '^(gf_(shard|engine|config)_|gf__|gf_kernel_launcher$|gf_.*_launch$)'); then
  echo "FAIL: $client defines daemon or launcher symbols:"
  echo "$named" | head -20
  status=1
fi

[ "$status" -eq 0 ] && echo "ok: $client links no CUDA runtime, no kernels, no daemon module"
exit "$status"

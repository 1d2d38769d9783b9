#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prepares .deps/ (git-ignored) for runs on the GPU machine, which has CUDA
# but none of our libraries, no systemd tools and no network: the Debian
# packages we build against, and the systemd tools the tests run
# (systemd-socket-activate, systemd-analyze, systemd-sysusers) with the
# shared libraries they load, copied from this Debian 12 machine.
# scripts/gpu-check.sh uses both.  Run once here, then carry .deps.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
(cd .deps && apt-get download libuv1 libuv1-dev libcjson1 libcjson-dev check libsubunit-dev \
  libsubunit0 >/dev/null)
tools=.deps/systemd-tools
rm -rf "$tools"; mkdir -p "$tools/bin" "$tools/real" "$tools/lib"
for t in systemd-socket-activate systemd-analyze systemd-sysusers; do
  cp "$(command -v $t)" "$tools/real/$t"
  ldd "$(command -v $t)" | awk '/=> \//{print $3}' | while read -r lib; do
    case $(basename "$lib") in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
      *) cp -L "$lib" "$tools/lib/" ;; esac
  done
  printf '#!/bin/sh\n# Debian 12 %s with its own libraries.\nd=$(dirname "$(readlink -f "$0")")/..\nLD_LIBRARY_PATH=$d/lib exec "$d/real/%s" "$@"\n' "$t" "$t" > "$tools/bin/$t"
  chmod +x "$tools/bin/$t"
done
du -sh .deps

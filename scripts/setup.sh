#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what a fresh Debian 12 machine lacks to build gpuframed: a C
# compiler, CMake and Ninja (scripts/test.sh builds with it), pkg-config, libuv, cJSON, Check, systemd for the tests'
# systemd-socket-activate, systemd-analyze and systemd-sysusers, for the
# Python package's tests NumPy plus pip, setuptools and wheel (test_install
# pip-installs it offline), groff-base to render the man pages
# (tests/man_pages.sh), PyYAML to read the Kubernetes manifest
# (tests/container_start.sh), mypy for the Python package's annotations,
# clang-format for the house format (scripts/format.sh), and for the
# Debian packages (debian/, tests/deb_package.sh) dpkg-dev, debhelper,
# dh-python with its PEP 517 plugin, python3-all and lintian.  The CUDA
# toolkit is expected at /usr/local/cuda (without it, only the CPU engine is
# built).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libuv1-dev libcjson-dev check systemd
      python3-numpy python3-pip python3-setuptools python3-wheel python3-yaml groff-base mypy
      clang-format
      dpkg-dev debhelper dh-python pybuild-plugin-pyproject python3-all lintian)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The house format (.clang-format) on every C, header and CUDA file git
# tracks.
#
#   scripts/format.sh           rewrites the files in place
#   scripts/format.sh --check   changes nothing; lists each file that is not
#                               formatted and exits 1 if any (CI runs this)
#
# clang-format comes from Debian's clang-format package (version 14 on
# Debian 12, which CI uses: another version may format a few lines
# differently).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null ||
  { echo "format: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cpp')
if [ "${1:-}" = --check ]; then
  # A clang-format per file, as many at once as there are cores.
  bad=$(printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 16 sh -c \
    'for f; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "not formatted: $f"; done' sh)
  [ -z "$bad" ] && exit 0
  echo "$bad" | sort
  echo "format: run scripts/format.sh (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))"
  exit 1
fi
clang-format -i "${files[@]}"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The documentation's links lead somewhere:
#   1. in the source tree, every relative link of every Markdown file names
#      a file of the tree;
#   2. in an install (`cmake --install --prefix`), every relative link of
#      every installed Markdown file names an installed file (the installed
#      copies are cmake/doc_links.cmake's), and README.md still links to the
#      documents installed beside it.
# Usage: docs_installed.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: docs_installed.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: docs_installed.sh BUILD_DIR SOURCE_DIR}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_need cmake

# Prints "FILE: TARGET" for each relative link of FILE whose target (less
# its #anchor) does not exist, resolved from FILE's directory; sets $links
# to how many relative links there were.
broken_links() { # FILE
  local f=$1 dir target
  dir=$(dirname "$f")
  links=0
  while read -r target; do
    [ -n "$target" ] || continue
    links=$((links + 1))
    target=${target%%#*}
    [ -z "$target" ] || [ -e "$dir/$target" ] || echo "$f: $target"
  done < <(grep -oE '\[[^]]*\]\([^) ]+\)' "$f" | sed -E 's/^\[[^]]*\]\(([^)]*)\)$/\1/' |
    grep -vE '^([a-z]+:|#)' || true)
}

gf_scratch_install "$build" gfdocs
: >"$tmp/bad"
checked=0
while read -r f; do
  broken_links "$f" >>"$tmp/bad"
  checked=$((checked + 1))
done < <(find "$src" \( -name .git -o -name 'build*' -o -name .deps -o -name node_modules \) -prune -o \
  -name '*.md' -print)
[ "$checked" -ge 10 ] || fail "only $checked Markdown files in $src"
[ ! -s "$tmp/bad" ] || fail "links in the source tree that name no file:"$'\n'"$(cat "$tmp/bad")"

doc=$p/share/doc/gpuframed
[ -f "$doc/README.md" ] || fail "no README.md in $doc"
total=0
while read -r f; do
  broken_links "$f" >>"$tmp/bad"
  total=$((total + links))
done < <(find "$p/share/doc" -name '*.md')
[ ! -s "$tmp/bad" ] || fail "installed documents link to files the install lacks:"$'\n'"$(cat "$tmp/bad")"
# Not vacuous: the installed README links to the documents beside it.
for name in SERVICE.md DESIGN.md CONFIG.md PROTOCOL.md STATS.md PLUGINS.md examples/README.md; do
  [ -f "$doc/$name" ] || fail "the install lacks $doc/$name"
  grep -qF "]($name)" "$doc/README.md" || fail "the installed README.md does not link to $name"
done
grep -qF '](README.md)' "$doc/DESIGN.md" || fail "the installed DESIGN.md does not link back to README.md"
echo "ok: $checked Markdown files of the tree and $total links of the installed documents lead somewhere"

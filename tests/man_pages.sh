#!/usr/bin/env bash
# The man pages as `cmake --install` lays them out, checked against the texts
# they are made from, so that they cannot drift:
#   1. the install has exactly gpuframe.1, gpuframed.json.5 and gpuframed.8,
#      compressed, under share/man;
#   2. groff renders each without a single warning (-ww);
#   3. rendered, gpuframed(8) holds exactly the words of the installed
#      `gpuframed --help`, in order;
#   4. gpuframe(1) holds every word of `gpuframe --help` and of each command's
#      --help, in order (the page adds section titles);
#   5. gpuframed.json(5) holds every word of config/README.md, in order (the
#      page adds each table's column names to its rows);
#   6. the documentation names the configuration file where it is installed.
# Words compare case-insensitively, as runs of letters and digits: the
# page's typography (minus signs, quotes, bold) does not count.
# Usage: man_pages.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: man_pages.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: man_pages.sh BUILD_DIR SOURCE_DIR}
for tool in cmake groff gzip; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (scripts/setup.sh installs groff-base)"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gfman.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

DESTDIR=$tmp/dest cmake --install "$build" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
pages=$(cd "$tmp/dest" && find . -path '*/share/man/*' -type f | sort)
bindir=$(dirname "$(find "$tmp/dest" -path '*/bin/gpuframed' -print -quit)")
mandir=$(dirname "$(dirname "$(find "$tmp/dest" -path '*/man8/gpuframed.8.gz' -print -quit)")")
[ "$(echo "$pages" | sed 's|.*/share/man/||' | tr '\n' ' ')" = \
  "man1/gpuframe.1.gz man5/gpuframed.json.5.gz man8/gpuframed.8.gz " ] ||
  fail "installed man pages: $pages"

# The words of standard input, one a line.
words() { LC_ALL=C tr -c '[:alnum:]' ' ' | tr '[:upper:]' '[:lower:]' | tr -s ' ' '\n' | sed '/^$/d'; }
# A page as text, one paragraph a line (no line breaks to split words), less
# its header and footer lines.
render() {
  gzip -dc "$1" | groff -man -Tutf8 -rLL=100000n -P-cbou 2>/dev/null |
    awk 'NF { line[++n] = $0 } END { for (i = 2; i < n; i++) print line[i] }'
}
# Fails unless every word of file $2 appears in file $1, in order.
in_order() { # PAGE_WORDS SOURCE_WORDS WHAT
  awk -v what="$3" 'NR == FNR { page[++n] = $0; next }
    { while (++i <= n && page[i] != $0) ; if (i > n) { printf "FAIL: %s: word %d, \"%s\", is not on the page (in order)\n", what, FNR, $0; exit 1 } }' "$1" "$2"
}

for page in $pages; do
  gzip -dc "$tmp/dest/$page" | groff -man -ww -z 2>"$tmp/warnings" || fail "groff $page"
  [ ! -s "$tmp/warnings" ] || { cat "$tmp/warnings"; fail "groff warns about $page"; }
done

render "$mandir/man8/gpuframed.8.gz" | words >"$tmp/page8"
"$bindir/gpuframed" --help | words >"$tmp/help8"
[ -s "$tmp/help8" ] || fail "gpuframed --help printed nothing"
diff "$tmp/help8" "$tmp/page8" >"$tmp/diff" || { head -20 "$tmp/diff"; fail "gpuframed(8) and gpuframed --help differ (< help, > page)"; }

render "$mandir/man1/gpuframe.1.gz" | words >"$tmp/page1"
{
  "$bindir/gpuframe" --help
  for cmd in $("$bindir/gpuframe" --help | sed -n '/^Commands:$/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p'); do
    "$bindir/gpuframe" "$cmd" --help
  done
} | sed 's/^Usage: //' | words >"$tmp/help1"
[ "$(wc -l <"$tmp/help1")" -gt 300 ] || fail "gpuframe's help texts have only $(wc -l <"$tmp/help1") words"
in_order "$tmp/page1" "$tmp/help1" "gpuframe(1) against gpuframe's --help texts"

render "$mandir/man5/gpuframed.json.5.gz" | words >"$tmp/page5"
# config/README.md's words, less Markdown: no code fences, no table header
# rows (a row followed by | --- |) and no separator rows.
awk '/^```/ { next }
     /^\|[ |-]+$/ && /-/ { held = ""; next }
     { if (held != "") print held; held = $0 }
     END { if (held != "") print held }' "$src/config/README.md" | words >"$tmp/readme5"
in_order "$tmp/page5" "$tmp/readme5" "gpuframed.json(5) against config/README.md"

# The configuration's path, as the unit and --help name it.
if grep -n '/etc/gpuframed\.json' "$src/README.md" "$src/config/README.md"; then
  fail "the documentation names /etc/gpuframed.json; the file is /etc/gpuframed/gpuframed.json"
fi
echo "ok: $(echo "$pages" | wc -l) man pages render without warnings and hold every word of --help and config/README.md"

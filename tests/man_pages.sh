#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The man pages as `cmake --install` lays them out, held to the programs they
# document (they are written by hand in man/, so this is what keeps them
# from drifting):
#   1. the install has exactly gpuframe.1, gpuframed.json.5 and gpuframed.8,
#      compressed, under share/man;
#   2. each renders without a single warning: groff -ww, and `man --warnings`
#      as lintian runs it (where man is installed);
#   3. each has the sections of its kind: NAME, SYNOPSIS, DESCRIPTION, FILES,
#      EXAMPLES, SEE ALSO, and for the two commands OPTIONS, ENVIRONMENT and
#      EXIT STATUS too;
#   4. none names a repository path or a source file, or leaves an
#      @GF_MAN_...@ name unfilled;
#   5. gpuframed(8) holds, in the right section, every option (long and
#      short) of the installed `gpuframed --help`, and every environment
#      variable and exit status it lists;
#   6. gpuframe(1) has a subsection per command of `gpuframe --help`, holding
#      every option of that command's --help (the options every command
#      takes: in "Common options"), and every environment variable and exit
#      status the help names;
#   7. gpuframed.json(5) has a term for every key the installed gpuframed
#      knows (it lists them for a file of unknown keys: top level, `allow`, a
#      pipeline), every kind and every parameter of each;
#   8. the documentation names the configuration file where it is installed.
# Usage: man_pages.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: man_pages.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: man_pages.sh BUILD_DIR SOURCE_DIR}
for tool in cmake groff gzip; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (scripts/setup.sh installs groff-base)"; exit 77; }
done
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_scratch gfman

DESTDIR=$tmp/dest cmake --install "$build" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
pages=$(cd "$tmp/dest" && find . -path '*/share/man/*' -type f | sort)
bindir=$(dirname "$(find "$tmp/dest" -path '*/bin/gpuframed' -print -quit)")
mandir=$(dirname "$(dirname "$(find "$tmp/dest" -path '*/man8/gpuframed.8.gz' -print -quit)")")
[ "$(echo "$pages" | sed 's|.*/share/man/||' | tr '\n' ' ')" = \
  "man1/gpuframe.1.gz man5/gpuframed.json.5.gz man8/gpuframed.8.gz " ] ||
  fail "installed man pages: $pages"
gzip -dc "$mandir/man8/gpuframed.8.gz" >"$tmp/gpuframed.8"
gzip -dc "$mandir/man1/gpuframe.1.gz" >"$tmp/gpuframe.1"
gzip -dc "$mandir/man5/gpuframed.json.5.gz" >"$tmp/gpuframed.json.5"

# 2. Rendering.
for page in gpuframed.8 gpuframe.1 gpuframed.json.5; do
  groff -man -ww -z "$tmp/$page" 2>"$tmp/warnings" || fail "groff $page"
  [ ! -s "$tmp/warnings" ] || { cat "$tmp/warnings"; fail "groff warns about $page"; }
  if command -v man >/dev/null; then
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$tmp/$page" \
      >/dev/null 2>"$tmp/warnings" || fail "man -l $page"
    [ ! -s "$tmp/warnings" ] || { cat "$tmp/warnings"; fail "man --warnings warns about $page"; }
  fi
done

# The page's source with roff's escapes for the characters the checks look
# for undone (\- is -, font changes go), so that "--config" is found as such.
plain() { sed 's/\\-/-/g; s/\\f[BIRP]//g; s/\\(dq/"/g' "$tmp/$1"; }
# The lines of section $2 (".SH $2") of page $1, or of subsection ".SS $2".
section() {
  plain "$1" | awk -v want="$2" '
    /^\.SH / { in_sh = substr($0, 5) == want || substr($0, 5) == "\"" want "\"" }
    /^\.S[HS] / { in_ss = substr($0, 5) == want; next }
    in_sh || in_ss'
}

# 3. Sections.
for page in gpuframed.8 gpuframe.1 gpuframed.json.5; do
  want="NAME SYNOPSIS DESCRIPTION FILES EXAMPLES SEE_ALSO"
  [ "$page" = gpuframed.json.5 ] || want="NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES EXIT_STATUS EXAMPLES SEE_ALSO"
  for sh in $want; do
    grep -qx "\.SH ${sh//_/ }" "$tmp/$page" || fail "$page has no section ${sh//_/ }"
  done
done

# 4. Written for an installed system.
for page in gpuframed.8 gpuframe.1 gpuframed.json.5; do
  ! grep -n '@GF_MAN_[A-Z_]*@' "$tmp/$page" || fail "$page: names left unfilled"
  # The installed headers are the only file names of the sources a user has.
  text=$(plain "$page" | grep -v '^\.\\"' | sed 's|gpuframe/libgpuframe\.h||g; s|gpuframe/plugin\.h||g')
  if grep -nE '(^|[^/[:alnum:]_.-])(bench|client|cmake|completion|config|daemon|debian|kernels|man|plugins|protocol|python|scripts|systemd|tests|util)/' <<<"$text"; then
    fail "$page names a repository path"
  fi
  if grep -nE '[[:alnum:]_]\.(c|cu|h|awk|in)([^[:alnum:]]|$)' <<<"$text"; then
    fail "$page names a source file"
  fi
done

# 5. gpuframed(8) against gpuframed --help.
help=$("$bindir/gpuframed" --help)
help_section() { awk -v want="$1" '/^[A-Z][A-Z ]*$/ { on = $0 == want; next } on' <<<"$help"; }
options=$(section gpuframed.8 OPTIONS)
count=0
while read -r opt; do
  count=$((count + 1))
  grep -qE -- "(^|[^[:alnum:]-])$opt([^[:alnum:]-]|$)" <<<"$options" || fail "gpuframed(8): OPTIONS lacks $opt"
done < <(help_section OPTIONS | grep -oE -- '^    (-[[:alpha:]], )?--[a-z-]+' | grep -oE -- '--?[[:alnum:]-]+')
[ "$count" -ge 10 ] || fail "gpuframed --help lists only $count options"
environment=$(section gpuframed.8 ENVIRONMENT)
for var in $(help_section ENVIRONMENT | grep -oE '^    [A-Z_, ]+$' | tr ',' ' '); do
  grep -qw "$var" <<<"$environment" || fail "gpuframed(8): ENVIRONMENT lacks $var"
done
exits=$(section gpuframed.8 "EXIT STATUS")
for code in $(help_section "EXIT STATUS" | awk '{ print $1 }'); do
  grep -qx "\.B $code" <<<"$exits" || fail "gpuframed(8): EXIT STATUS lacks $code"
done

# 6. gpuframe(1) against gpuframe --help and each command's.
help=$("$bindir/gpuframe" --help)
common=$(sed -n '/^Every command takes:$/,/^$/p' <<<"$help" | grep -oE -- '--[a-z-]+' | tr '\n' ' ')
[ -n "$common" ] || fail "gpuframe --help lists no options every command takes"
common_section=$(section gpuframe.1 "Common options")
commands=$(sed -n '/^Commands:$/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p' <<<"$help")
[ "$(wc -w <<<"$commands")" -ge 4 ] || fail "gpuframe --help lists the commands '$commands'"
for cmd in $commands; do
  grep -qx "\.SS gpuframe $cmd" "$tmp/gpuframe.1" || fail "gpuframe(1) has no subsection for gpuframe $cmd"
  own=$(section gpuframe.1 "gpuframe $cmd")
  while read -r long short; do
    where=$own what="gpuframe $cmd"
    [[ " $common " != *" $long "* ]] || where=$common_section what="Common options"
    for opt in $long $short; do
      grep -qE -- "(^|[^[:alnum:]-])$opt([^[:alnum:]-]|$)" <<<"$where" || fail "gpuframe(1): $what lacks $opt"
    done
  done < <("$bindir/gpuframe" "$cmd" --help | grep -oE -- '^(  -[[:alpha:]], |      )--[a-z-]+' |
    awk '{ if (NF == 2) { sub(/,$/, "", $1); print $2, $1 } else print $1 }')
done
environment=$(section gpuframe.1 ENVIRONMENT)
for var in $(sed -n 's/^Environment: //p' <<<"$help" | grep -oE '\b[A-Z][A-Z_]+\b'); do
  grep -qw "$var" <<<"$environment" || fail "gpuframe(1): ENVIRONMENT lacks $var"
done
exits=$(section gpuframe.1 "EXIT STATUS")
codes=$(sed -n 's/^Exit status: //p' <<<"$help" | grep -oE '(^|, )[0-9]+' | grep -oE '[0-9]+')
[ "$(wc -w <<<"$codes")" -ge 4 ] || fail "gpuframe --help names the exit statuses '$codes'"
for code in $codes; do
  grep -qx "\.B $code" <<<"$exits" || fail "gpuframe(1): EXIT STATUS lacks $code"
done

# 7. gpuframed.json(5) against what the installed gpuframed knows.
known() { # the names a --check-config message lists after "(known keys: " or "(known: "
  sed -nE "s/.*$1.*\(known( keys)?: ([^)]*)\).*/\2/p" "$tmp/probe.out" | tr -d ',' | tr ' ' '\n' | sed '/^$/d'
}
probe() { "$bindir/gpuframed" --check-config "$tmp/probe.json" >"$tmp/probe.out" 2>&1 || true; }
echo '{"zz": 1, "allow": {"zz": 1}, "pipelines": [{"name": "p", "kind": "zz", "zz": 1}]}' >"$tmp/probe.json"
probe
names=$(known '^[^ ]*: zz:'; known 'allow\.zz'; known 'pipelines\[0\]\.zz')
kinds=$(known 'unknown kind')
[ "$(wc -w <<<"$names")" -ge 30 ] || fail "gpuframed names only these keys: $names ($(cat "$tmp/probe.out"))"
[ "$(wc -w <<<"$kinds")" -ge 5 ] || fail "gpuframed names only these kinds: $kinds"
{
  echo '{"pipelines": ['
  sep=
  for kind in $kinds; do
    [ "$kind" != plugin ] || continue
    printf '%s{"name": "%s", "kind": "%s", "params": {"zz": 1}}\n' "$sep" "$kind" "$kind"
    sep=,
  done
  echo ']}'
} >"$tmp/probe.json"
probe
for kind in $kinds; do
  [ "$kind" != plugin ] || continue
  names+=" $kind $(known "\($kind\)\.params\.zz")"
done
source5=$(plain gpuframed.json.5)
for name in $names; do
  grep -qx "\.B $name" <<<"$source5" || fail "gpuframed.json(5) has no term for $name"
done
grep -qF '.B "kind": "plugin"' <<<"$source5" || fail "gpuframed.json(5) does not describe \"kind\": \"plugin\""

# 8. The configuration's path, as the unit and --help name it.
if grep -n '/etc/gpuframed\.json' "$src/README.md" "$src/config/README.md" "$tmp"/gpuframe*; then
  fail "the documentation names /etc/gpuframed.json; the file is /etc/gpuframed/gpuframed.json"
fi
echo "ok: 3 man pages render without warnings, have their sections, name no repository path, and" \
  "hold every option, command, environment variable and exit status of the programs and" \
  "$(wc -w <<<"$names") configuration keys, kinds and parameters"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gpuframe command's options as a user meets them, from its --help texts:
#   1. a short option means one thing in every command that has it (the
#      same -X, --long pair wherever -X appears), and --help of gpuframe
#      itself lists each of those pairs;
#   2. completion/gpuframe.bash completes the commands, each command's long
#      options (those its --help lists, the hidden aliases --out and --frames
#      not among them), files and '-' for --input and --output, and the
#      pipelines of the daemon that --socket names.
# Usage: completion.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: completion.sh BUILD_DIR SOURCE_DIR}
src=${2:?}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_scratch gfcompletion
gpuframe=$build/gpuframe
commands=$("$gpuframe" --help | sed -n '/^Commands:$/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ "$(echo "$commands" | tr '\n' ' ')" = "list stats stream trace " ] || fail "commands: $commands"

# ---- 1. one meaning per short option ----------------------------------------------
pairs=$(for c in $commands; do "$gpuframe" "$c" --help; done |
  sed -n 's/^ \{2,\}\(-[a-zA-Z]\), \(--[a-z][a-z-]*\).*/\1 \2/p' | sort -u)
dups=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] > 1) print k }' <<<"$pairs")
[ -z "$dups" ] || fail "short options with several meanings: $(grep -E "^($(echo "$dups" | paste -sd'|')) " <<<"$pairs" | tr '\n' ';')"
main_help=$("$gpuframe" --help | tr '\n' ' ')
while read -r short long; do
  [[ $main_help == *"$short $long"* ]] || fail "gpuframe --help does not list '$short $long'"
done <<<"$pairs"

# ---- 2. completion ------------------------------------------------------------------
# shellcheck source=../completion/gpuframe.bash
. "$src/completion/gpuframe.bash"
complete_line() { # WORD...: what completing the last word offers, one line
  COMP_WORDS=("$gpuframe" "$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  _gpuframe
  ((${#COMPREPLY[@]} == 0)) || printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
[ "$(complete_line "")" = "--help --version list stats stream trace " ] || fail "commands: $(complete_line "")"
[ "$(complete_line st)" = "stats stream " ] || fail "st: $(complete_line st)"
for c in $commands; do
  want=$("$gpuframe" "$c" --help | sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p' | sort | tr '\n' ' ')
  got=$(complete_line "$c" --)
  [ "$got" = "$want" ] || fail "gpuframe $c --: '$got', expected '$want'"
done
[[ " $(complete_line stream --) " == *" --no-shm "*" --window "* ]] || fail "stream: no --no-shm or --window"
[[ " $(complete_line trace --) " != *" --out "* && " $(complete_line trace --) " != *" --frames "* ]] ||
  fail "trace offers a hidden alias: $(complete_line trace --)"
[ "$(complete_line stats --w)" = "--watch " ] || fail "stats --w: $(complete_line stats --w)"
[ "$(complete_line stream --window "")" = "" ] || fail "a number was completed"
touch "$tmp/frames.bin"
[ "$(cd "$tmp" && complete_line stream --input "")" = "- frames.bin " ] ||
  fail "--input: $(cd "$tmp" && complete_line stream --input "")"
[ "$(cd "$tmp" && complete_line stream -o fr)" = "frames.bin " ] || fail "-o fr: $(cd "$tmp" && complete_line stream -o fr)"

printf '{"pipelines": [{"name": "echo", "kind": "echo"}, {"name": "scale.2x", "kind": "affine"}, {"name": "sc_rgb", "kind": "normalize_u8"}]}\n' >"$tmp/gf.json"
sock=$tmp/s.sock
gf_daemon_start "$build" "$tmp/gf.json" "$sock" gpuframed
[ "$(complete_line stream --socket "$sock" --pipeline "")" = "echo sc_rgb scale.2x " ] ||
  fail "--pipeline: '$(complete_line stream --socket "$sock" --pipeline "")'"
[ "$(complete_line stream --socket="$sock" -p sc)" = "sc_rgb scale.2x " ] ||
  fail "-p sc: '$(complete_line stream --socket="$sock" -p sc)'"
[ "$(GPUFRAMED_SOCKET=$sock complete_line stream -p e)" = "echo " ] ||
  fail "-p e with GPUFRAMED_SOCKET: '$(GPUFRAMED_SOCKET=$sock complete_line stream -p e)'"
[ "$(complete_line stream --socket "$tmp/none.sock" --pipeline "")" = "" ] || fail "pipelines of no daemon"
gf_daemon_stop gpuframed
echo "ok: $(wc -l <<<"$pairs") short options, one meaning each; completion of $(echo "$commands" | wc -w) commands, options, files and pipelines"

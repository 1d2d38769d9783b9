#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A plugin built outside the tree exactly as the documentation says, against
# an install of this tree, and run:
#   1. `cmake --install --prefix` into a scratch prefix; PKG_CONFIG_PATH at
#      its gpuframe.pc, as the documentation says for a prefix of one's own;
#   2. the build lines of plugins/README.md ("Building one outside this
#      tree"): the CPU-only `cc` line, and the `nvcc` line where nvcc is found (on PATH, else
#      /usr/local/cuda/bin, put on PATH as the documentation says), each run
#      as it stands in a copy of the installed example (plugins/example/ as
#      `cmake --install` puts it in share/doc/gpuframed/examples/plugin, the
#      same files as the tree's);
#   3. each object exports gf_plugin_entry alone and needs no libcudart; the
#      nvcc one has the GPU side (clamp_device_open, which only
#      -DGF_HAVE_CUDA=1 compiles), the cc one has not;
#   4. the installed gpuframed, on the CPU engine, loads both from a
#      configuration that names their paths; `gpuframe list` shows them, and
#      `gpuframe stream --verify` runs each (results against the plugin's own
#      reference), then known float32 values through each, compared byte for
#      byte with the expected clamped values.
# Usage: plugin_build_installed.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: plugin_build_installed.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: plugin_build_installed.sh BUILD_DIR SOURCE_DIR}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_need cmake cc pkg-config nm readelf od cmp

# The documented lines: in plugins/README.md's section, a line that starts
# with the compiler and runs to the end of its command (a trailing backslash
# continues it).
doc_line() { # FILE COMPILER: the one line of FILE that builds gf_example.so with COMPILER
  awk -v cc="$2" '
    cont { line = line " " $0; if (!sub(/ *\\$/, "", line)) { print line; cont = 0 }; next }
    index($0, cc " ") == 1 && /gf_example\.so/ { line = $0; if (sub(/ *\\$/, "", line)) cont = 1; else print line }' "$1"
}
readme=$src/plugins/README.md
cc_line=$(doc_line "$readme" cc)
nvcc_line=$(doc_line "$readme" nvcc)
[ "$(grep -c . <<<"$cc_line")" = 1 ] || fail "plugins/README.md has $(grep -c . <<<"$cc_line") cc lines building gf_example.so: $cc_line"
[ "$(grep -c . <<<"$nvcc_line")" = 1 ] || fail "plugins/README.md has $(grep -c . <<<"$nvcc_line") nvcc lines building gf_example.so: $nvcc_line"
for line in "$cc_line" "$nvcc_line"; do
  [[ $line == *'$(pkg-config --cflags gpuframe)'* ]] || fail "the documented line does not take its flags from pkg-config: $line"
done
[[ $nvcc_line == *-DGF_HAVE_CUDA=1* && $nvcc_line == *clamp.cu* ]] || fail "the nvcc line does not build the GPU side: $nvcc_line"

gf_scratch_install "$build" gfpluginbuild
for f in clamp.c clamp.cu clamp.h; do
  cmp "$src/plugins/example/$f" "$p/share/doc/gpuframed/examples/plugin/$f" ||
    fail "the installed example plugin's $f is not the tree's"
done
pc=$(find "$p" -name gpuframe.pc -print -quit)
[ -n "$pc" ] || fail "no gpuframe.pc under $p"
[ -f "$p/include/gpuframe/plugin.h" ] || fail "no include/gpuframe/plugin.h under $p"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
# The install is no sysroot's (scripts/gpu-check.sh sets one for its
# libraries): pkg-config must name the prefix as it is.
unset PKG_CONFIG_SYSROOT_DIR

nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
variants=(cc)
[ -z "$nvcc" ] || variants+=(nvcc)
for v in "${variants[@]}"; do
  mkdir "$tmp/$v"
  # The installed example, as a user copies it.
  cp "$p"/share/doc/gpuframed/examples/plugin/clamp.{c,cu,h} "$tmp/$v/"
  line=$cc_line
  [ "$v" = cc ] || line=$nvcc_line
  # The line as the documentation gives it, in the plugin's directory.
  (cd "$tmp/$v" && PATH=${nvcc:+$(dirname "$nvcc"):}$PATH bash -c "$line") >"$tmp/$v.log" 2>&1 ||
    { cat "$tmp/$v.log"; fail "the documented $v line failed: $line"; }
  so=$tmp/$v/gf_example.so
  [ -f "$so" ] || fail "the documented $v line made no gf_example.so"
  exports=$(nm -D --defined-only "$so" | awk '{ print $NF }' | tr '\n' ' ')
  [ "$exports" = "gf_plugin_entry " ] || fail "$v: gf_example.so exports '$exports', not gf_plugin_entry alone"
  needed=$(readelf -d "$so")
  ! grep -q 'libcudart' <<<"$needed" || fail "$v: gf_example.so needs the shared CUDA runtime: $needed"
  symbols=$(nm "$so")
  if [ "$v" = nvcc ]; then
    grep -qw clamp_device_open <<<"$symbols" || fail "nvcc: gf_example.so has no GPU side (clamp_device_open)"
  else
    ! grep -qw clamp_device_open <<<"$symbols" || fail "cc: gf_example.so has a GPU side without CUDA"
  fi
done

conf=$tmp/plugins.json
{
  echo '{"pipelines": ['
  sep=
  for v in "${variants[@]}"; do
    printf '%s  {"name": "clamp_%s", "kind": "plugin", "path": "%s", "params": {"lo": -0.5, "hi": 0.5}}\n' \
      "$sep" "$v" "$tmp/$v/gf_example.so"
    sep=,
  done
  echo ']}'
} >"$conf"
out=$("$p/bin/gpuframed" --check-config "$conf" 2>&1) || fail "--check-config: $out"
sock=$tmp/s.sock
gf_daemon_start "$p/bin" "$conf" "$sock" "the installed gpuframed with the plugins built from the documentation"

gf=$p/bin/gpuframe
listing=$("$gf" list --socket "$sock")
# -2.0 -0.25 0.25 3.0 as float32, 256 times; clamped to [-0.5, 0.5]: -0.5 -0.25 0.25 0.5.
for _ in $(seq 256); do printf '\000\000\000\300\000\000\200\276\000\000\200\076\000\000\100\100'; done >"$tmp/in.f32"
for v in "${variants[@]}"; do
  awk -v name="clamp_$v" -v so="$tmp/$v/gf_example.so" '$2 == name && $3 == "clamp" &&
    $4 == "float32[n]->float32[n]" && $5 == so &&
    $6 == "{\"lo\":-0.5,\"hi\":0.5}" { found = 1 } END { exit !found }' <<<"$listing" ||
    fail "gpuframe list does not show clamp_$v from $tmp/$v/gf_example.so: $listing"
  out=$("$gf" stream --socket "$sock" --pipeline "clamp_$v" --size 64K --count 200 --window 8 --verify --quiet 2>&1) ||
    fail "$v: gpuframe stream --verify: $out"
  [[ $out == "frames=200 errors=0 "* ]] || fail "$v: gpuframe stream --verify printed '$out'"
  # Without --verify the client loads no plugin, so it cannot lay out the
  # results in shared memory: the socket, and it says why.
  out=$("$gf" stream --socket "$sock" --pipeline "clamp_$v" --size 64K --count 20 2>&1) ||
    fail "$v: gpuframe stream without --verify: $out"
  grep -qxF "gpuframe stream: frames go through the socket: pipeline 'clamp_$v' has a plugin stage, whose results' length LIST does not fix, so this client knows it only with --verify or --shm (which load the plugin here)" <<<"$out" &&
    [[ $out == *" transport=socket" ]] || fail "$v: gpuframe stream without --verify printed '$out'"
  out=$("$gf" stream --socket "$sock" --pipeline "clamp_$v" --size 4096 --input "$tmp/in.f32" --output "$tmp/out.f32" \
    --verify --quiet 2>&1) || fail "$v: gpuframe stream --input: $out"
  [ "$(od -An -v -tx1 "$tmp/out.f32" | tr -d ' \n' | fold -w32 | sort | uniq -c | tr -s ' ')" = \
    " 256 000000bf000080be0000803e0000003f" ] || fail "$v: clamped values: $(od -An -tx1 "$tmp/out.f32" | head -2)"
done
gf_daemon_stop "the installed gpuframed with the plugins built from the documentation"
echo "ok: the documented plugin build (${variants[*]}) against $p loads in gpuframed and streams verified"
[ -n "$nvcc" ] || echo "note: no nvcc found: the nvcc line was not run"

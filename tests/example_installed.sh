#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libgpuframe as a program outside the repository sees it:
#   1. `cmake --install --prefix` into a scratch prefix: every file that names
#      a path names that prefix (the units, the configuration under it), and
#      the install warns that --help names another configuration path;
#   2. gpuframe.pc there names that prefix: exact --modversion, --cflags, --libs
#      (with a run path: the loader does not search a scratch prefix);
#   3. the shared library's soname, and the exact list of symbols it exports;
#   4. the example, as installed in the doc dir, compiled as README.md says,
#      with nothing but `pkg-config --cflags --libs gpuframe` (no cJSON: the
#      library looks pipelines up by name): once against the shared library
#      (ldd must find it in the prefix, with no LD_LIBRARY_PATH), once against
#      the static one;
#      and a C++ program that calls functions of both installed headers;
#   5. the example again with CMake, through find_package(gpuframe) and the
#      CMakeLists.txt installed beside it: shared and static;
#   6. all four run against the installed gpuframed on the CPU engine: known
#      float32 values through affine (exact result bytes), a file of random
#      bytes with a short last chunk through echo (the result is the file);
#   7. every installed example configuration passes --check-config, and those
#      that name plugins name the ones this install put under the prefix.
# Usage: example_installed.sh BUILD_DIR VERSION CC [CFLAG...]
# (CFLAGs: the build's sanitizer flags, which a program linking the library must share.)
set -euo pipefail
build=${1:?usage: example_installed.sh BUILD_DIR VERSION CC [CFLAG...]}
version=${2:?}
cc=${3:?}
shift 3
extra_cflags=("$@")
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_need cmake pkg-config ldd nm readelf od cmp "$cc"
gf_scratch_install "$build" gfexample
unit=$p/lib/systemd/system
grep -qx "ExecStart=$p/bin/gpuframed --config $p/etc/gpuframed/gpuframed.json" "$unit/gpuframed.service" ||
  fail "gpuframed.service under --prefix: $(grep '^ExecStart=' "$unit/gpuframed.service")"
grep -qx "Documentation=man:gpuframed(8) file://$p/share/doc/gpuframed/README.md" "$unit/gpuframed.service" ||
  fail "gpuframed.service under --prefix: $(grep '^Documentation=' "$unit/gpuframed.service")"
grep -q "^ExecStart=$p/bin/gpuframe stats --prometheus " "$unit/gpuframe-prometheus.service" ||
  fail "gpuframe-prometheus.service under --prefix: $(grep '^ExecStart=' "$unit/gpuframe-prometheus.service")"
[ -f "$p/etc/gpuframed/gpuframed.json" ] || fail "the configuration is not under the prefix"
[ -f "$p/share/bash-completion/completions/gpuframe" ] || fail "no bash completion under the prefix"
grep -q "gpuframed: this install's configuration is" "$tmp/install.log" ||
  fail "the install did not warn that --help names another configuration: $(cat "$tmp/install.log")"
pc=$(find "$p" -name gpuframe.pc -print -quit)
[ -n "$pc" ] || fail "no gpuframe.pc under $p"
libdir=$(dirname "$(dirname "$pc")")
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
# pkg-config's answer without the trailing blank it prints.
pc() { pkg-config "$@" | sed 's/[[:space:]]*$//'; }
[ "$(pc --modversion gpuframe)" = "$version" ] || fail "--modversion: '$(pc --modversion gpuframe)', expected $version"
[ "$(pc --cflags gpuframe)" = "-I$p/include" ] || fail "--cflags: '$(pc --cflags gpuframe)'"
[ "$(pc --libs gpuframe)" = "-L$libdir -Wl,-rpath,$libdir -lgpuframe" ] || fail "--libs: '$(pc --libs gpuframe)'"

so=$libdir/libgpuframe.so.0
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libgpuframe.so.0 ] || fail "soname '$soname', expected libgpuframe.so.0"
[ "$(readlink "$libdir/libgpuframe.so")" = libgpuframe.so.0 ] || fail "libgpuframe.so does not link to libgpuframe.so.0"
exports=$(nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ')
expected="gf_client_close gf_client_connect gf_client_connect_error gf_client_device_copy_from \
gf_client_device_copy_to gf_client_device_region_add_fd gf_client_device_region_create \
gf_client_device_region_destroy gf_client_error gf_client_fd gf_client_flush gf_client_in_flight \
gf_client_pipeline_id gf_client_recv gf_client_region_add_fd gf_client_region_create \
gf_client_region_destroy gf_client_region_remove gf_client_request_json gf_client_request_trace \
gf_client_send_frame gf_client_send_frame_device gf_client_send_frame_shm \
gf_client_send_request gf_client_send_shm gf_client_set_frame_options \
gf_client_set_max_reply_bytes gf_client_set_priority gf_client_shm_close \
gf_client_shm_frame_buffer gf_client_shm_open gf_client_shm_region gf_client_shm_result \
gf_client_version gf_deadline_decode gf_deadline_encode gf_device_frame_check \
gf_device_region_decode gf_device_region_encode \
gf_header_encode gf_header_parse gf_msg_type_name gf_priority_class_name gf_priority_class_parse \
gf_region_info_decode gf_region_info_encode \
gf_shm_frame_check gf_shm_frame_decode gf_shm_frame_encode gf_shm_result_decode \
gf_shm_result_encode gf_status_is_fatal gf_status_name gf_version_known "
[ "$exports" = "$expected" ] || fail "libgpuframe.so exports
  $exports
expected
  $expected"

src=$p/share/doc/gpuframed/examples/stream_file.c
[ -f "$src" ] || fail "the example is not installed at $src"
# shellcheck disable=SC2046 # pkg-config's words are meant to split
unset LD_LIBRARY_PATH
"$cc" "${extra_cflags[@]}" -std=c11 -Wall -Werror -o "$tmp/ex_shared" "$src" \
  $(pkg-config --cflags --libs gpuframe) || fail "compiling against the shared library"
# shellcheck disable=SC2046
"$cc" "${extra_cflags[@]}" -std=c11 -Wall -Werror -o "$tmp/ex_static" "$src" \
  $(pkg-config --cflags gpuframe) "$libdir/libgpuframe.a" || fail "compiling against the static library"
# (ldd's output is kept first: `ldd | grep -q` can kill ldd with SIGPIPE, which pipefail reports.)
libs=$(ldd "$tmp/ex_shared")
grep -qx "[[:space:]]*libgpuframe.so.0 => $so (0x[0-9a-f]*)" <<<"$libs" ||
  fail "ex_shared does not load $so: $libs"
libs=$(ldd "$tmp/ex_static")
! grep -q libgpuframe <<<"$libs" || fail "ex_static loads a libgpuframe.so: $libs"
# A C++ program links the same functions: both installed headers declare
# them extern "C" (a call through either must not look for a C++ symbol).
if command -v c++ >/dev/null; then
  # shellcheck disable=SC2046
  c++ "${extra_cflags[@]}" -std=c++11 -Wall -Werror -x c++ -o "$tmp/ex_cxx" - \
    $(pkg-config --cflags --libs gpuframe) <<'CXX' || fail "a C++ program cannot link the installed library"
#include <gpuframe/libgpuframe.h>
#include <cstdio>
int main() {
    gf_client_region r = {};
    r.fd = -1;
    std::printf("%s %s %d\n", gf_client_version(), gf_status_name(GF_ERR_BAD_VERSION),
                gf_client_region_destroy(nullptr, &r, 0));
}
CXX
  [ "$("$tmp/ex_cxx")" = "$version bad_version 0" ] || fail "the C++ program printed '$("$tmp/ex_cxx")'"
fi
# The same through find_package(gpuframe): gpuframe::gpuframe and
# gpuframe::gpuframe_static, found from the prefix alone.
for kind in shared static; do
  static=OFF
  [ "$kind" = shared ] || static=ON
  { cmake -S "$(dirname "$src")" -B "$tmp/cmake-$kind" -DCMAKE_PREFIX_PATH="$p" -DSTREAM_FILE_STATIC=$static \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${extra_cflags[*]} -Wall -Werror" &&
    cmake --build "$tmp/cmake-$kind"; } >"$tmp/cmake-$kind.log" 2>&1 ||
    { cat "$tmp/cmake-$kind.log"; fail "building the example with find_package(gpuframe), $kind"; }
  cp "$tmp/cmake-$kind/stream_file" "$tmp/ex_cmake_$kind"
done
grep -q "^find_package(gpuframe " "$(dirname "$src")/CMakeLists.txt" || fail "the installed CMakeLists.txt does not use find_package(gpuframe)"
libs=$(ldd "$tmp/ex_cmake_shared")
grep -qx "[[:space:]]*libgpuframe.so.0 => $so (0x[0-9a-f]*)" <<<"$libs" ||
  fail "ex_cmake_shared does not load $so: $libs"
libs=$(ldd "$tmp/ex_cmake_static")
! grep -q libgpuframe <<<"$libs" || fail "ex_cmake_static loads a libgpuframe.so: $libs"

sock=$tmp/s.sock
gf_daemon_start "$p/bin" "$p/etc/gpuframed/gpuframed.json" "$sock" "the installed gpuframed"

# 1.0 -2.0 0.5 3.0 as float32, 1024 times; affine (a 2, b 0.5) makes 2.5 -3.5 1.5 6.5.
for _ in $(seq 1024); do printf '\000\000\200\077\000\000\000\300\000\000\000\077\000\000\100\100'; done >"$tmp/in.f32"
head -c 1000003 /dev/urandom >"$tmp/in.bin"
for ex in ex_shared ex_static ex_cmake_shared ex_cmake_static; do
  out=$("$tmp/$ex" "$sock" affine 4096 "$tmp/in.f32" "$tmp/out.f32") || fail "$ex affine: $out"
  [ "$out" = "4 frames, 0 failed" ] || fail "$ex affine printed '$out'"
  [ "$(stat -c %s "$tmp/out.f32")" = 16384 ] || fail "$ex affine wrote $(stat -c %s "$tmp/out.f32") bytes"
  [ "$(od -An -v -tx1 "$tmp/out.f32" | tr -d ' \n' | fold -w32 | sort -u)" = \
    "00002040000060c00000c03f0000d040" ] || fail "$ex affine results: $(od -An -tx1 "$tmp/out.f32" | head -2)"
  out=$("$tmp/$ex" "$sock" echo 65536 "$tmp/in.bin" "$tmp/out.bin") || fail "$ex echo: $out"
  [ "$out" = "16 frames, 0 failed" ] || fail "$ex echo printed '$out'"
  cmp "$tmp/in.bin" "$tmp/out.bin" || fail "$ex echo: the results differ from the input"
  status=0
  out=$("$tmp/$ex" "$sock" nosuch 4096 "$tmp/in.f32" "$tmp/out.f32" 2>&1) || status=$?
  [ "$status" -eq 2 ] || fail "$ex with an unknown pipeline exited $status, expected 2: $out"
  [ "$out" = "stream_file: the daemon has no pipeline 'nosuch' (it has: echo, affine, sincos, normalize_u8)" ] ||
    fail "$ex unknown pipeline: '$out'"
done

gf_daemon_stop "the installed gpuframed"

# The example configurations as installed: every one checks, and a plugin
# path names the plugin this install wrote.
examples=$(find "$p/share/doc/gpuframed/examples" -name '*.json' | sort)
[ "$(echo "$examples" | wc -l)" = 6 ] || fail "installed example configurations: $examples"
for conf in $examples; do
  out=$("$p/bin/gpuframed" --check-config "$conf" 2>&1) || true
  [ "$out" = "$conf: ok" ] || fail "--check-config of the installed $(basename "$conf"): $out"
  for path in $(sed -n 's/.*"path": "\([^"]*\)".*/\1/p; s/.*"weights": "\([^"]*\)".*/\1/p' "$conf"); do
    [[ "$path" == "$libdir/gpuframed/"* && -f "$path" ]] || fail "$(basename "$conf") names $path, not a file this install put in $libdir/gpuframed"
  done
done
grep -q '"path": ' "$p/share/doc/gpuframed/examples/classify.json" || fail "classify.json names no plugin"
# What examples/README.md says to do after copying each over the default
# configuration, "reload" or "restart", is what a daemon running the default
# configuration does with it on SIGHUP: applies it with no note, or logs
# "needs a restart" and keeps what it runs.
readme=$p/share/doc/gpuframed/examples/README.md
for conf in $examples; do
  name=$(basename "$conf")
  want=$(awk -F' *[|] *' -v f="\`$name\`" '$2 == f { print $3 }' "$readme")
  [ "$want" = reload ] || [ "$want" = restart ] || fail "examples/README.md says '$want' for $name, not reload or restart"
  cp "$p/share/doc/gpuframed/gpuframed.json.example" "$tmp/running.json"
  gf_daemon_start "$p/bin" "$tmp/running.json" "$sock" "the installed gpuframed on the default configuration"
  cp "$conf" "$tmp/running.json"
  kill -HUP "$gf_daemon_pid"
  for _ in $(seq 300); do
    grep -qE '(info|warn): reloaded |error: reload rejected' "$tmp/daemon.log" && break
    sleep 0.1
  done
  # One line either way: info when everything applied, warn when something needs a restart.
  grep -qE '(info|warn): reloaded ' "$tmp/daemon.log" || { cat "$tmp/daemon.log"; fail "no reload of $name"; }
  got=reload
  ! grep -q 'needs a restart' "$tmp/daemon.log" || got=restart
  [ "$got" = "$want" ] || { cat "$tmp/daemon.log"; fail "examples/README.md says '$want' for $name; the daemon needs a $got"; }
  if [ "$got" = restart ] && grep -q 'slot buffers' "$tmp/daemon.log"; then
    grep -qE 'needs a restart: the new pipelines need slot buffers of [0-9]+ bytes out and [0-9]+ of scratch, the daemon started with [0-9]+ and [0-9]+: restart to run them; the running pipelines stay' \
      "$tmp/daemon.log" || { cat "$tmp/daemon.log"; fail "the restart note of $name does not give both sizes"; }
  fi
  gf_daemon_stop "the installed gpuframed after reloading $name"
done
echo "ok: gpuframe.pc, soname, $(echo "$expected" | wc -w) exports; the example built shared and static from $p," \
  "with pkg-config and with find_package(gpuframe), and verified; $(echo "$examples" | wc -l) example configurations check"

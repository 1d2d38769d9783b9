#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages (debian/), built as a packager builds them and
# installed into a scratch root, as an administrator would get them:
#   1. a copy of the source tree (never the tree itself) with the modes a
#      `git archive` tree has (group-writable), built with `dpkg-buildpackage
#      -us -uc -b` under umask 077: the packages must not depend on either
#      (nocheck: every test runs on the tree itself);
#   2. the packages made: exactly gpuframed, gpuframed-plugins, libgpuframe0,
#      libgpuframe-dev, python3-gpuframe and the dbgsym ones;
#   3. control data: versions, Depends (libuv1, libcjson1, sysusers; no CUDA
#      library), the conffile, the library's symbols file against the
#      symbols the library exports, its ldconfig trigger, the sysusers call;
#   4. dpkg-deb --contents: exactly the expected files, with modes, owned by
#      root (gf_mlp_cuda.so where the build found nvcc);
#   5. dpkg -x of them all, then from that tree: the units and gpuframe.pc
#      naming the package's paths, gpuframed --check-config of the packaged
#      configuration and of every example configuration (with the plugin
#      paths moved into the scratch root), a daemon on the CPU engine serving
#      verified streams through the packaged plugins (clamp, the classify
#      chain normalize_u8 -> mlp), the example program built against the
#      -dev package through pkg-config and through find_package(gpuframe),
#      and the packaged Python module against the daemon;
#   6. lintian on the .changes (every package): no E: and no W: line.
# Exit 77 (skipped) where dpkg-buildpackage or debhelper is missing: not a
# Debian system, or scripts/setup.sh not run.  Any other missing tool fails.
# Usage: deb_package.sh SOURCE_DIR VERSION CC
set -euo pipefail
src=${1:?usage: deb_package.sh SOURCE_DIR VERSION CC}
version=${2:?}
cc=${3:?}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
for tool in dpkg-buildpackage dh; do
  command -v "$tool" >/dev/null ||
    { echo "SKIP: $tool not found (not a Debian system, or scripts/setup.sh not run: it installs dpkg-dev and debhelper)"; exit 77; }
done
for tool in dpkg-deb dpkg-architecture lintian pkg-config cmake nm python3 "$cc"; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/setup.sh installs it)"
done
gf_scratch gfdeb
# Everything the build, lintian and the tools write goes under $tmp.
mkdir -p "$tmp/t" "$tmp/home"
export TMPDIR=$tmp/t HOME=$tmp/home
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# ---- 1. build from a copy -------------------------------------------------------
pkgsrc=$tmp/src/gpuframed-$version
mkdir -p "$pkgsrc"
# The files a checkout holds (tracked, and new ones not ignored), else every
# file but build trees and what a package build leaves.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf -) |
    tar -xf - -C "$pkgsrc"
else
  tar -C "$src" --exclude-vcs --exclude='./build*' --exclude='./obj-*' --exclude=./.pybuild \
    --exclude=./debian/tmp --exclude=./debian/.debhelper -cf - . | tar -xf - -C "$pkgsrc"
fi
[ -f "$pkgsrc/debian/control" ] || fail "no debian/control in the copy of $src"
chmod -R a+rX,ug+w "$pkgsrc"
(cd "$pkgsrc" && umask 077 &&
  DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" DEB_BUILD_PROFILES=nocheck \
    dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 ||
  { tail -60 "$tmp/build.log"; fail "dpkg-buildpackage -us -uc -b"; }
if grep -q '^-- gpuframed: CUDA engine ON' "$tmp/build.log"; then cuda=1; else cuda=0; fi
outdir=$tmp/src
debs=$(cd "$outdir" && ls ./*.deb | sed 's|^\./||' | tr '\n' ' ')
want_debs="gpuframed-dbgsym_${version}_$arch.deb gpuframed-plugins-dbgsym_${version}_$arch.deb \
gpuframed-plugins_${version}_$arch.deb gpuframed_${version}_$arch.deb \
libgpuframe-dev_${version}_$arch.deb libgpuframe0-dbgsym_${version}_$arch.deb \
libgpuframe0_${version}_$arch.deb python3-gpuframe_${version}_all.deb "
[ "$debs" = "$want_debs" ] || fail "dpkg-buildpackage made: $debs
expected: $want_debs"
daemon=$outdir/gpuframed_${version}_$arch.deb
plugins=$outdir/gpuframed-plugins_${version}_$arch.deb
lib=$outdir/libgpuframe0_${version}_$arch.deb
dev=$outdir/libgpuframe-dev_${version}_$arch.deb
py=$outdir/python3-gpuframe_${version}_all.deb

# ---- 3. control data --------------------------------------------------------------
field() { dpkg-deb --field "$1" "$2"; }
for deb in "$daemon" "$plugins" "$lib" "$dev" "$py"; do
  [ "$(field "$deb" Version)" = "$version" ] || fail "$deb: Version $(field "$deb" Version)"
done
[ "$(field "$py" Architecture)" = all ] || fail "python3-gpuframe: Architecture $(field "$py" Architecture)"
depends=$(field "$daemon" Depends)
for need in 'libc6 (>= ' 'libuv1 (>= ' 'libcjson1 (>= ' 'systemd | systemd-standalone-sysusers | systemd-sysusers'; do
  [[ ", $depends" == *", $need"* ]] || fail "gpuframed Depends lacks $need: $depends"
done
for deb in "$daemon" "$plugins"; do
  [[ "$(field "$deb" Depends)" != *cuda* && "$(field "$deb" Depends)" != *cublas* ]] ||
    fail "$deb depends on a CUDA library: $(field "$deb" Depends)"
done
[ "$(field "$daemon" Recommends)" = gpuframed-plugins ] || fail "gpuframed Recommends: $(field "$daemon" Recommends)"
[ "$(field "$daemon" Suggests)" = "libcuda1, prometheus-node-exporter" ] || fail "Suggests: $(field "$daemon" Suggests)"
[ "$(field "$dev" Depends)" = "libgpuframe0 (= $version)" ] || fail "libgpuframe-dev Depends: $(field "$dev" Depends)"
[[ ", $(field "$py" Depends)" == *", python3-numpy"* ]] || fail "python3-gpuframe Depends: $(field "$py" Depends)"
[ "$(dpkg-deb --info "$daemon" conffiles)" = /etc/gpuframed/gpuframed.json ] ||
  fail "conffiles: $(dpkg-deb --info "$daemon" conffiles)"
grep -qx 'activate-noawait ldconfig' <(dpkg-deb --info "$lib" triggers) ||
  fail "triggers: $(dpkg-deb --info "$lib" triggers)"
grep -q '^ *systemd-sysusers .*gpuframed\.conf' <(dpkg-deb --info "$daemon" postinst) ||
  fail "gpuframed's postinst does not create the user with systemd-sysusers"
# The symbols file names exactly what the library exports.
dpkg-deb --info "$lib" symbols >"$tmp/symbols"
head -n1 "$tmp/symbols" | grep -qx 'libgpuframe.so.0 libgpuframe0 #MINVER#' || fail "symbols: $(head -n1 "$tmp/symbols")"
mkdir "$tmp/libx"
dpkg -x "$lib" "$tmp/libx"
sed -n 's/^ \([a-z_0-9]*\)@Base .*/\1/p' "$tmp/symbols" | sort >"$tmp/symbols.listed"
nm -D --defined-only "$tmp/libx/usr/lib/$ma/libgpuframe.so.$version" | awk '$2 == "T" { print $3 }' | sort >"$tmp/symbols.exported"
[ -s "$tmp/symbols.exported" ] || fail "libgpuframe.so.$version exports nothing"
diff "$tmp/symbols.listed" "$tmp/symbols.exported" ||
  fail "the package's symbols file and the library's exports differ (< file, > library)"
# dpkg-gensymbols adds a symbol the source's file lacks (with a warning), so
# that file is checked on its own: a new function must be listed there.
sed -n 's/^ \([a-z_0-9]*\)@Base .*/\1/p' "$pkgsrc/debian/libgpuframe0.symbols" | sort >"$tmp/symbols.source"
diff "$tmp/symbols.source" "$tmp/symbols.exported" ||
  fail "debian/libgpuframe0.symbols and the library's exports differ (< file, > library)"

# ---- 4. contents: every file and link, with its mode and owner ---------------------
contents() {
  dpkg-deb --contents "$1" |
    awk '$1 !~ /^d/ { s = $1 " " $2 " " $6; if ($7 != "") s = s " " $7 " " $8; print s }' | sort -k3
}
f='-rw-r--r-- root/root .'
x='-rwxr-xr-x root/root .'
doc=/usr/share/doc
expect_daemon="$f/etc/gpuframed/gpuframed.json
$f/lib/systemd/system/gpuframe-prometheus.service
$f/lib/systemd/system/gpuframe-prometheus.timer
$f/lib/systemd/system/gpuframed.service
$f/lib/systemd/system/gpuframed.socket
$x/usr/bin/gpuframe
$x/usr/bin/gpuframed
$f/usr/lib/sysusers.d/gpuframed.conf
$f/usr/share/bash-completion/completions/gpuframe
$f$doc/gpuframed/CONFIG.md.gz
$f$doc/gpuframed/DESIGN.md.gz
$f$doc/gpuframed/PLUGINS.md.gz
$f$doc/gpuframed/PROTOCOL.md.gz
$f$doc/gpuframed/README.md.gz
$f$doc/gpuframed/SERVICE.md.gz
$f$doc/gpuframed/STAGES.md.gz
$f$doc/gpuframed/STATS.md.gz
$f$doc/gpuframed/changelog.gz
$f$doc/gpuframed/copyright
$f$doc/gpuframed/examples/README.md
$f$doc/gpuframed/examples/allow.json
$f$doc/gpuframed/examples/audio.json
$f$doc/gpuframed/examples/camera.json
$f$doc/gpuframed/examples/classify.json
$f$doc/gpuframed/examples/plugin.json
$f$doc/gpuframed/examples/shm-limits.json
$f$doc/gpuframed/gpuframed.json.example
$f/usr/share/man/man1/gpuframe.1.gz
$f/usr/share/man/man5/gpuframed.json.5.gz
$f/usr/share/man/man8/gpuframed.8.gz"
pdir=/usr/lib/$ma/gpuframed
expect_plugins="$f$pdir/gf_example.so
$f$pdir/gf_mlp.so
$x$pdir/gf_mlp_make_weights
$f$pdir/mlp-audio.gfw
$f$pdir/mlp-demo.gfw
$f$doc/gpuframed-plugins/changelog.gz
$f$doc/gpuframed-plugins/copyright"
((cuda == 0)) || expect_plugins+="
$f$pdir/gf_mlp_cuda.so"
expect_lib="lrwxrwxrwx root/root ./usr/lib/$ma/libgpuframe.so.0 -> libgpuframe.so.$version
$f/usr/lib/$ma/libgpuframe.so.$version
$f$doc/libgpuframe0/changelog.gz
$f$doc/libgpuframe0/copyright"
expect_dev="$f/usr/include/gpuframe/libgpuframe.h
$f/usr/include/gpuframe/plugin.h
$f/usr/include/gpuframe/protocol.h
$f/usr/lib/$ma/cmake/gpuframe/gpuframeConfig.cmake
$f/usr/lib/$ma/cmake/gpuframe/gpuframeConfigVersion.cmake
$f/usr/lib/$ma/cmake/gpuframe/gpuframeTargets-none.cmake
$f/usr/lib/$ma/cmake/gpuframe/gpuframeTargets.cmake
$f/usr/lib/$ma/libgpuframe.a
lrwxrwxrwx root/root ./usr/lib/$ma/libgpuframe.so -> libgpuframe.so.0
$f/usr/lib/$ma/pkgconfig/gpuframe.pc
$f$doc/libgpuframe-dev/changelog.gz
$f$doc/libgpuframe-dev/copyright
$f$doc/libgpuframe-dev/examples/CMakeLists.txt
$f$doc/libgpuframe-dev/examples/plugin/clamp.c
$f$doc/libgpuframe-dev/examples/plugin/clamp.cu
$f$doc/libgpuframe-dev/examples/plugin/clamp.h
$f$doc/libgpuframe-dev/examples/stream_file.c"
site=/usr/lib/python3/dist-packages
expect_py="$x/usr/bin/gpuframe-export
$f$site/gpuframe-$version.dist-info/METADATA
$f$site/gpuframe-$version.dist-info/RECORD
$f$site/gpuframe-$version.dist-info/entry_points.txt
$f$site/gpuframe-$version.dist-info/WHEEL
$f$site/gpuframe-$version.dist-info/top_level.txt
$f$site/gpuframe/__init__.py
$f$site/gpuframe/client.py
$f$site/gpuframe/connection.py
$f$site/gpuframe/device.py
$f$site/gpuframe/errors.py
$f$site/gpuframe/export.py
$f$site/gpuframe/pipelines.py
$f$site/gpuframe/protocol.py
$f$site/gpuframe/py.typed
$f$site/gpuframe/shm.py
$f/usr/share/man/man1/gpuframe-export.1.gz
$f$doc/python3-gpuframe/changelog.gz
$f$doc/python3-gpuframe/copyright"
for pair in "daemon:$daemon" "plugins:$plugins" "lib:$lib" "dev:$dev" "py:$py"; do
  name=${pair%%:*}
  want_var="expect_$name"
  got=$(contents "${pair#*:}")
  want=$(sort -k3 <<<"${!want_var}")
  [ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") || true; fail "$(basename "${pair#*:}") contents (< expected, > packaged)"; }
done

# ---- 5. unpacked: the files name the package's paths, everything runs -------------
root=$tmp/root
for deb in "$daemon" "$plugins" "$lib" "$dev" "$py"; do dpkg -x "$deb" "$root"; done
unit=$root/lib/systemd/system
grep -qx 'ExecStart=/usr/bin/gpuframed --config /etc/gpuframed/gpuframed.json' "$unit/gpuframed.service" ||
  fail "gpuframed.service: $(grep '^ExecStart=' "$unit/gpuframed.service")"
grep -qx 'Documentation=man:gpuframed(8) file:///usr/share/doc/gpuframed/README.md.gz' "$unit/gpuframed.service" ||
  fail "gpuframed.service: $(grep '^Documentation=' "$unit/gpuframed.service")"
grep -qx 'ExecStart=/usr/bin/gpuframe stats --prometheus --socket /run/gpuframed.sock --output ${GF_TEXTFILE_DIR}/gpuframe.prom' \
  "$unit/gpuframe-prometheus.service" || fail "gpuframe-prometheus.service: $(grep '^ExecStart=' "$unit/gpuframe-prometheus.service")"
pc=$root/usr/lib/$ma/pkgconfig/gpuframe.pc
for line in prefix=/usr "libdir=/usr/lib/$ma" includedir=/usr/include "Version: $version"; do
  grep -qx "$line" "$pc" || fail "gpuframe.pc lacks '$line'"
done

bin=$root/usr/bin
engines="cpu"
((cuda == 0)) || engines="cuda cpu"
got=$("$bin/gpuframed" --version)
[ "$got" = "gpuframed $version (engines: $engines; protocol 1, 2, 3, 4)" ] || fail "packaged gpuframed --version: '$got'"
[ "$("$bin/gpuframe" --help | head -n1)" = "Usage: gpuframe COMMAND [OPTIONS]" ] || fail "gpuframe --help"
conf=$root/etc/gpuframed/gpuframed.json
[ "$("$bin/gpuframed" --check-config "$conf")" = "$conf: ok" ] || fail "--check-config of the packaged configuration"

# The example configurations, with the package's plugin directory moved into
# the scratch root; every path they name must then exist there.
mkdir "$tmp/examples"
n=0
for example in "$root$doc/gpuframed/examples/"*.json; do
  copy=$tmp/examples/$(basename "$example")
  sed "s|\"$pdir/|\"$root$pdir/|g" "$example" >"$copy"
  for p in $(sed -n 's/.*"\(\/[^"]*\)".*/\1/p' "$copy" | grep -v '^/run/'); do
    [ -e "$p" ] || fail "$(basename "$example") names $p, which no package installs"
  done
  [ "$("$bin/gpuframed" --check-config "$copy")" = "$copy: ok" ] ||
    fail "--check-config of the packaged $(basename "$example"): $("$bin/gpuframed" --check-config "$copy" 2>&1)"
  n=$((n + 1))
done
[ "$n" = 6 ] || fail "$n example configurations, expected 6"

sock=$tmp/s.sock
start_daemon() { gf_daemon_start "$bin" "$1" "$sock" "the packaged gpuframed"; }
stop_daemon() { gf_daemon_stop "the packaged gpuframed"; }
stream() { # PIPELINE SIZE [COUNT]: COUNT (32) frames verified
  local n=${3:-32}
  out=$("$bin/gpuframe" stream --socket "$sock" --pipeline "$1" --size "$2" --count "$n" --window 4 --verify --quiet) ||
    fail "packaged gpuframe stream $1: $out"
  [[ "$out" == "frames=$n errors=0 seconds="* ]] || fail "packaged gpuframe stream $1 printed: $out"
}

start_daemon "$tmp/examples/classify.json"
stream classify 3072
stop_daemon

start_daemon "$tmp/examples/camera.json"
# 1080p NV12 frames, each resized by the CPU engine and again by the
# client's check: eight (32 took 4.8 s of this test's 62 alone).
stream camera_classify 3110400 8
stop_daemon

start_daemon "$tmp/examples/audio.json"
stream audio_classify 32000
stream melspec 32000
stop_daemon

start_daemon "$tmp/examples/plugin.json"
stream clamp01 64K
stream affine_clamped 64K
# The example program against the unpacked -dev package: through pkg-config
# with the scratch root as its sysroot, and through find_package(gpuframe).
export PKG_CONFIG_PATH=$root/usr/lib/$ma/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs gpuframe | sed 's/[[:space:]]*$//')
[ "$flags" = "-I$root/usr/include -L$root/usr/lib/$ma -lgpuframe" ] || fail "pkg-config of the package: '$flags'"
examples=$root$doc/libgpuframe-dev/examples
# shellcheck disable=SC2086 # pkg-config's words are meant to split
"$cc" -std=c11 -Wall -Werror -o "$tmp/stream_file" "$examples/stream_file.c" $flags ||
  fail "compiling the packaged example through pkg-config"
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
cmake -S "$examples" -B "$tmp/cmake-example" -DCMAKE_PREFIX_PATH="$root/usr" >"$tmp/cmake.log" 2>&1 &&
  cmake --build "$tmp/cmake-example" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "building the packaged example with find_package(gpuframe)"; }
head -c 300000 /dev/urandom >"$tmp/in.bin"
for ex in "$tmp/stream_file" "$tmp/cmake-example/stream_file"; do
  libs=$(LD_LIBRARY_PATH=$root/usr/lib/$ma ldd "$ex")
  grep -q "libgpuframe.so.0 => $root/usr/lib/$ma/libgpuframe.so.0 " <<<"$libs" ||
    fail "$ex does not load the packaged library: $libs"
  rm -f "$tmp/out.bin"
  out=$(LD_LIBRARY_PATH=$root/usr/lib/$ma "$ex" "$sock" echo 65536 "$tmp/in.bin" "$tmp/out.bin") ||
    fail "$ex: $out"
  [ "$out" = "5 frames, 0 failed" ] || fail "$ex printed '$out'"
  cmp "$tmp/in.bin" "$tmp/out.bin" || fail "$ex: the results differ from the input"
done
# The packaged example plugin, built with the cc line of the packaged
# PLUGINS.md against the packaged header, loads.
cp -r "$examples/plugin" "$tmp/plugin"
cc_line=$(zcat "$root$doc/gpuframed/PLUGINS.md.gz" | grep -E '^cc .*gf_example\.so')
[ "$(grep -c . <<<"$cc_line")" = 1 ] || fail "the packaged PLUGINS.md has no one cc line: $cc_line"
(cd "$tmp/plugin" && PKG_CONFIG_PATH=$root/usr/lib/$ma/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root \
  bash -c "$cc_line") >"$tmp/plugin.log" 2>&1 || { cat "$tmp/plugin.log"; fail "building the packaged example plugin: $cc_line"; }
printf '{"pipelines": [{"name": "c", "kind": "plugin", "path": "%s", "params": {"lo": 0, "hi": 1}}]}\n' \
  "$tmp/plugin/gf_example.so" >"$tmp/plugin.json"
[ "$("$bin/gpuframed" --check-config "$tmp/plugin.json" 2>&1)" = "$tmp/plugin.json: ok" ] ||
  fail "the packaged example plugin does not load: $("$bin/gpuframed" --check-config "$tmp/plugin.json" 2>&1)"
# The packaged documents link only to packaged files (compressed or not:
# dh_compress compresses what is over 4 KiB).
links=0
for md in $(find "$root$doc" -name '*.md' -o -name '*.md.gz'); do
  dir=$(dirname "$md")
  for target in $(zcat -f "$md" | grep -oE '\[[^]]*\]\([^) ]+\)' | sed -E 's/^\[[^]]*\]\(([^)#]*).*$/\1/' |
    grep -vE '^([a-z]+:|$)'); do
    links=$((links + 1))
    [ -e "$dir/$target" ] || [ -e "$dir/$target.gz" ] || fail "$md links to $target, which no package installs"
  done
done
[ "$links" -ge 10 ] || fail "only $links links in the packaged documents"
# The packaged Python module, and no other, against the daemon.
out=$(cd "$tmp" && env -u PYTHONPATH PYTHONPATH="$root$site" PYTHONDONTWRITEBYTECODE=1 GPUFRAMED_SOCKET="$sock" \
  /usr/bin/python3 -c '
import importlib.metadata, os, gpuframe, numpy
print(gpuframe.__file__)
print(importlib.metadata.version("gpuframe"))
print(os.path.exists(os.path.join(os.path.dirname(gpuframe.__file__), "py.typed")))
with gpuframe.Client() as c:
    r = c.process("clamp01", numpy.float32([-2, 0.25, 7]))  # a plugin kind: raw bytes
    print(numpy.frombuffer(bytes(r), numpy.float32).tolist())
') || fail "the packaged Python module: $out"
[ "$out" = "$root$site/gpuframe/__init__.py
$version
True
[0.0, 0.25, 1.0]" ] || fail "the packaged Python module printed: $out"
stop_daemon

# ---- 6. lintian ----------------------------------------------------------------------
changes=$outdir/gpuframed_${version}_$arch.changes
lintian --pedantic --display-info "$changes" 2>&1 | grep -v '^running with root privileges' >"$tmp/lintian.log" || true
cat "$tmp/lintian.log"
if grep -E '^[EW]: ' "$tmp/lintian.log" >/dev/null; then
  fail "lintian reports errors or warnings (above)"
fi
echo "ok: $(echo "$debs" | wc -w) packages built from a copy (CUDA: $cuda), their control data and contents as expected;" \
  "from the unpacked tree the configurations check, the plugins, the example (pkg-config, CMake) and the" \
  "Python module run; lintian: no error or warning, $(grep -c . "$tmp/lintian.log" || true) other finding(s)"

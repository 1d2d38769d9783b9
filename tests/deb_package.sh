#!/usr/bin/env bash
# The Debian packages (cmake/packaging.cmake), built and installed into a
# scratch root, as an administrator would get them:
#   1. cpack builds gpuframed, libgpuframe0 and libgpuframe-dev;
#   2. dpkg-deb --info: names, version, Depends (libuv1, libcjson1 from
#      dpkg-shlibdeps; the -dev package on the exact library version), the
#      conffile, the library's shlibs and ldconfig trigger;
#   3. dpkg-deb --contents: exactly the expected files, owned by root;
#   4. dpkg -x of all three, then from that tree: gpuframed --version as the
#      build's, gpuframe --help, --check-config of the packaged configuration,
#      the unit and gpuframe.pc naming /usr and /etc paths, a daemon on the CPU
#      engine serving a verified stream, and the example compiled against the
#      unpacked -dev package through pkg-config and run against it;
#   5. lintian, where installed: no error or warning but the ones listed
#      below, each with its reason.
# Exit 77 (skipped) where dpkg-deb or cpack is missing: not a Debian system.
# Usage: deb_package.sh BUILD_DIR VERSION LIBDIR CC [CFLAG...]
set -euo pipefail
build=${1:?usage: deb_package.sh BUILD_DIR VERSION LIBDIR CC [CFLAG...]}
version=${2:?}
libdir=${3:?}
cc=${4:?}
shift 4
extra_cflags=("$@")
for tool in dpkg-deb dpkg cpack dpkg-shlibdeps pkg-config "$cc"; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (not a Debian system, or scripts/setup.sh not run)"; exit 77; }
done
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_scratch gfdeb
arch=$(dpkg --print-architecture)
full="$version-1"

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
debs=$(cd "$tmp/out" && ls ./*.deb | sed 's|^\./||' | tr '\n' ' ')
[ "$debs" = "gpuframed_${full}_$arch.deb libgpuframe-dev_${full}_$arch.deb libgpuframe0_${full}_$arch.deb " ] ||
  fail "cpack made: $debs"
daemon=$tmp/out/gpuframed_${full}_$arch.deb
lib=$tmp/out/libgpuframe0_${full}_$arch.deb
dev=$tmp/out/libgpuframe-dev_${full}_$arch.deb

# ---- control data ------------------------------------------------------------
field() { dpkg-deb --field "$1" "$2"; }
for deb in "$daemon" "$lib" "$dev"; do
  [ "$(field "$deb" Version)" = "$full" ] || fail "$deb: Version $(field "$deb" Version)"
  [ "$(field "$deb" Architecture)" = "$arch" ] || fail "$deb: Architecture"
done
[ "$(field "$daemon" Package)" = gpuframed ] || fail "Package $(field "$daemon" Package)"
depends=$(field "$daemon" Depends)
for need in 'libc6 (>= ' 'libuv1 (>= ' 'libcjson1 (>= '; do
  [[ ", $depends" == *", $need"* ]] || fail "gpuframed Depends lacks $need: $depends"
done
[[ "$depends" != *cuda* ]] || fail "gpuframed depends on a CUDA library: $depends"
[ "$(field "$daemon" Suggests)" = "libcuda1, prometheus-node-exporter" ] || fail "Suggests: $(field "$daemon" Suggests)"
[[ "$(field "$daemon" Description)" == *"needs the NVIDIA driver"* ]] || fail "the description does not name the driver it needs"
[ "$(field "$dev" Depends)" = "libgpuframe0 (= $full)" ] || fail "libgpuframe-dev Depends: $(field "$dev" Depends)"
[[ ", $(field "$lib" Depends)" == *", libc6 (>= "* ]] || fail "libgpuframe0 Depends: $(field "$lib" Depends)"
[ "$(dpkg-deb --info "$daemon" conffiles)" = /etc/gpuframed/gpuframed.json ] || fail "conffiles: $(dpkg-deb --info "$daemon" conffiles)"
[ "$(dpkg-deb --info "$lib" shlibs)" = "libgpuframe 0 libgpuframe0 (>= $full)" ] || fail "shlibs: $(dpkg-deb --info "$lib" shlibs)"
[ "$(dpkg-deb --info "$lib" triggers)" = "activate-noawait ldconfig" ] || fail "triggers: $(dpkg-deb --info "$lib" triggers)"

# ---- contents: every file and link, with its mode and owner -------------------
contents() {
  dpkg-deb --contents "$1" |
    awk '$1 !~ /^d/ { s = $1 " " $2 " " $6; if ($7 != "") s = s " " $7 " " $8; print s }' | sort -k3
}
expect_daemon="-rw-r--r-- root/root ./etc/gpuframed/gpuframed.json
-rwxr-xr-x root/root ./usr/bin/gpuframe
-rwxr-xr-x root/root ./usr/bin/gpuframed
-rw-r--r-- root/root ./usr/lib/systemd/system/gpuframe-prometheus.service
-rw-r--r-- root/root ./usr/lib/systemd/system/gpuframe-prometheus.timer
-rw-r--r-- root/root ./usr/lib/systemd/system/gpuframed.service
-rw-r--r-- root/root ./usr/lib/systemd/system/gpuframed.socket
-rw-r--r-- root/root ./usr/lib/sysusers.d/gpuframed.conf
-rw-r--r-- root/root ./usr/share/doc/gpuframed/CONFIG.md
-rw-r--r-- root/root ./usr/share/doc/gpuframed/PROTOCOL.md
-rw-r--r-- root/root ./usr/share/doc/gpuframed/README.md
-rw-r--r-- root/root ./usr/share/doc/gpuframed/changelog.Debian.gz
-rw-r--r-- root/root ./usr/share/doc/gpuframed/copyright
-rw-r--r-- root/root ./usr/share/doc/gpuframed/gpuframed.json.example
-rw-r--r-- root/root ./usr/share/lintian/overrides/gpuframed
-rw-r--r-- root/root ./usr/share/man/man1/gpuframe.1.gz
-rw-r--r-- root/root ./usr/share/man/man5/gpuframed.json.5.gz
-rw-r--r-- root/root ./usr/share/man/man8/gpuframed.8.gz"
expect_lib="lrwxrwxrwx root/root ./usr/$libdir/libgpuframe.so.0 -> libgpuframe.so.$version
-rw-r--r-- root/root ./usr/$libdir/libgpuframe.so.$version
-rw-r--r-- root/root ./usr/share/doc/libgpuframe0/changelog.Debian.gz
-rw-r--r-- root/root ./usr/share/doc/libgpuframe0/copyright
-rw-r--r-- root/root ./usr/share/lintian/overrides/libgpuframe0"
expect_dev="-rw-r--r-- root/root ./usr/include/gpuframe/libgpuframe.h
-rw-r--r-- root/root ./usr/include/gpuframe/plugin.h
-rw-r--r-- root/root ./usr/include/gpuframe/protocol.h
-rw-r--r-- root/root ./usr/$libdir/libgpuframe.a
lrwxrwxrwx root/root ./usr/$libdir/libgpuframe.so -> libgpuframe.so.0
-rw-r--r-- root/root ./usr/$libdir/pkgconfig/gpuframe.pc
-rw-r--r-- root/root ./usr/share/doc/gpuframed/examples/stream_file.c
-rw-r--r-- root/root ./usr/share/doc/libgpuframe-dev/changelog.Debian.gz
-rw-r--r-- root/root ./usr/share/doc/libgpuframe-dev/copyright
-rw-r--r-- root/root ./usr/share/lintian/overrides/libgpuframe-dev"
for pair in "daemon:$daemon" "lib:$lib" "dev:$dev"; do
  name=${pair%%:*}
  want_var="expect_$name"
  got=$(contents "${pair#*:}")
  want=$(sort -k3 <<<"${!want_var}")
  [ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") || true; fail "$(basename "${pair#*:}") contents (< expected, > packaged)"; }
done

# ---- unpacked: the files name the package's paths, the binaries run ------------
root=$tmp/root
for deb in "$daemon" "$lib" "$dev"; do dpkg -x "$deb" "$root"; done
unit=$root/usr/lib/systemd/system
grep -qx 'ExecStart=/usr/bin/gpuframed --config /etc/gpuframed/gpuframed.json' "$unit/gpuframed.service" ||
  fail "gpuframed.service: $(grep '^ExecStart=' "$unit/gpuframed.service")"
grep -qx 'Documentation=man:gpuframed(8) file:///usr/share/doc/gpuframed/README.md' "$unit/gpuframed.service" ||
  fail "gpuframed.service: $(grep '^Documentation=' "$unit/gpuframed.service")"
grep -qx 'ExecStart=/usr/bin/gpuframe stats --prometheus --socket /run/gpuframed.sock --output ${GF_TEXTFILE_DIR}/gpuframe.prom' \
  "$unit/gpuframe-prometheus.service" || fail "gpuframe-prometheus.service: $(grep '^ExecStart=' "$unit/gpuframe-prometheus.service")"
pc=$root/usr/$libdir/pkgconfig/gpuframe.pc
for line in prefix=/usr "libdir=/usr/$libdir" includedir=/usr/include "Version: $version"; do
  grep -qx "$line" "$pc" || fail "gpuframe.pc lacks '$line'"
done

want=$("$build/gpuframed" --version)
got=$("$root/usr/bin/gpuframed" --version)
[ "$got" = "$want" ] || fail "packaged gpuframed --version: '$got', the build's: '$want'"
[ "$("$root/usr/bin/gpuframe" --help | head -n1)" = "Usage: gpuframe COMMAND [OPTIONS]" ] || fail "gpuframe --help"
conf=$root/etc/gpuframed/gpuframed.json
[ "$("$root/usr/bin/gpuframed" --check-config "$conf")" = "$conf: ok" ] || fail "--check-config of the packaged configuration"

sock=$tmp/s.sock
gf_daemon_start "$root/usr/bin" "$conf" "$sock" "the packaged gpuframed"
out=$("$root/usr/bin/gpuframe" stream --socket "$sock" --pipeline sincos --size 64K --count 64 \
  --window 4 --verify --quiet) || fail "packaged gpuframe stream: $out"
[[ "$out" == "frames=64 errors=0 seconds="* ]] || fail "packaged gpuframe stream printed: $out"

# The example against the unpacked -dev package, through pkg-config with the
# scratch root as its sysroot.
export PKG_CONFIG_PATH=$root/usr/$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs gpuframe | sed 's/[[:space:]]*$//')
[ "$flags" = "-I$root/usr/include -L$root/usr/$libdir -lgpuframe" ] || fail "pkg-config of the package: '$flags'"
# shellcheck disable=SC2086 # pkg-config's words are meant to split
"$cc" "${extra_cflags[@]}" -std=c11 -Wall -Werror -o "$tmp/stream_file" \
  "$root/usr/share/doc/gpuframed/examples/stream_file.c" $flags $(pkg-config --cflags --libs libcjson) ||
  fail "compiling the packaged example against the -dev package"
head -c 300000 /dev/urandom >"$tmp/in.bin"
out=$(LD_LIBRARY_PATH=$root/usr/$libdir "$tmp/stream_file" "$sock" echo 65536 "$tmp/in.bin" "$tmp/out.bin") ||
  fail "the example: $out"
[ "$out" = "5 frames, 0 failed" ] || fail "the example printed '$out'"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "the example's results differ from its input"
libs=$(LD_LIBRARY_PATH=$root/usr/$libdir ldd "$tmp/stream_file")
grep -q "libgpuframe.so.0 => $root/usr/$libdir/libgpuframe.so.0 " <<<"$libs" || fail "the example did not load the packaged library: $libs"

gf_daemon_stop "the packaged gpuframed"

# ---- lintian -----------------------------------------------------------------
# Accepted, with the reason; anything else at warning or error level fails:
#   bogus-mail-host*: the Maintainer is GF_DEB_MAINTAINER, a placeholder at
#     localhost until the project names a contact (-DGF_DEB_MAINTAINER=...);
#   copyright-without-copyright-notice: the repository states no copyright
#     holder or license yet (packaging/debian/copyright says so).
if command -v lintian >/dev/null; then
  lintian --pedantic "$daemon" "$lib" "$dev" 2>&1 | grep -v '^running with root privileges' >"$tmp/lintian.log" || true
  cat "$tmp/lintian.log"
  if unexpected=$(grep -E '^[EW]: ' "$tmp/lintian.log" |
       grep -Ev ': (bogus-mail-host|bogus-mail-host-in-debian-changelog|copyright-without-copyright-notice)( |$)'); then
    echo "$unexpected"
    fail "lintian reports the above"
  fi
  lint="; lintian: $(grep -c . "$tmp/lintian.log" || true) accepted finding(s)"
else
  lint="; lintian not installed (scripts/setup.sh installs it)"
fi
echo "ok: 3 packages built, their control data and contents as expected, binaries and example run from the unpacked tree$lint"

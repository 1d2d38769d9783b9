#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# socket_group and user (config/README.md; SERVICE.md, "Without systemd"),
# with the daemon of the build tree (the root parts on $GF_TEST_ENGINE):
#   1. --check-config names a group and a user this system lacks;
#   2. --socket-group: the socket gets the group and socket_mode, before
#      anyone can connect (a group the running user is in, so as any user);
#   3. as another user than root, --user naming someone else refuses to
#      start, with why;
# and, run as root (else the test ends skipped after the above):
#   4. started as root with --user nobody --socket-group GID, the socket is
#      root:GID 0660, every uid, gid and group of the process is nobody's,
#      and a client of nobody with that group lists the pipelines and
#      streams verified frames (on $GF_TEST_ENGINE: with cuda, the GPU opened
#      as nobody), while one without it is told why;
#   5. the configuration is read as nobody: one nobody cannot read stops the
#      start with the reason, and a SIGHUP after the file became unreadable
#      is rejected while the running pipelines keep serving;
#   6. at exit, the socket nobody may not remove is left with a warning, and
#      the next start replaces it.
# Usage: accounts.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: accounts.sh BUILD_DIR}
engine=${GF_TEST_ENGINE:-cpu}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_scratch gfaccounts
chmod 755 "$tmp"
d=$build/gpuframed
c=$build/gpuframe
cat >"$tmp/config.json" <<'EOF'
{"pipelines": [{"name": "echo", "kind": "echo"}, {"name": "affine", "kind": "affine"}]}
EOF
chmod 644 "$tmp/config.json"

# Waits until $sock answers LIST (as `as`, a command prefix), else fails
# with the daemon's log.
wait_ready() { # PID SOCKET PREFIX...
  local pid=$1 sock=$2
  shift 2
  for _ in $(seq 300); do
    "$@" "$c" list --socket "$sock" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log"; fail "the daemon exited"; }
    sleep 0.1
  done
  cat "$tmp/daemon.log"
  fail "the daemon did not answer on $sock"
}

# 1. Names this system lacks, each named.
status=0
out=$("$d" --check-config "$tmp/config.json" --socket-group no-such-group-gf --user no-such-user-gf 2>&1) || status=$?
[ "$status" = 2 ] || fail "--check-config with a missing user and group exited $status: $out"
grep -qF 'socket_group: no group named "no-such-group-gf" on this system' <<<"$out" || fail "$out"
grep -qF 'user: no user named "no-such-user-gf" on this system' <<<"$out" || fail "$out"

# 2. A group the running user is in (any user may give its socket one).
gid=$(id -g)
if [ "$(id -u)" != 0 ]; then gid=$(id -G | tr ' ' '\n' | tail -n1); fi
sock=$tmp/group.sock
"$d" --engine cpu --socket "$sock" --socket-group "$gid" >"$tmp/daemon.log" 2>&1 &
gf_daemon_pid=$!
wait_ready "$gf_daemon_pid" "$sock"
[ "$(stat -c '%g %a' "$sock")" = "$gid 660" ] || fail "socket: $(stat -c '%U:%G (%g) %a' "$sock"), want group $gid mode 660"
gf_daemon_stop "the daemon with --socket-group"
[ ! -e "$sock" ] || fail "the daemon left $sock behind"

# 3. Another user than root cannot become someone else.
if [ "$(id -u)" = 0 ]; then
  as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
  gf_need setpriv
  status=0
  out=$("${as_nobody[@]}" "$d" --engine cpu --socket "$tmp/no.sock" --user root 2>&1) || status=$?
else
  status=0
  out=$("$d" --engine cpu --socket "$tmp/no.sock" --user root 2>&1) || status=$?
fi
[ "$status" = 3 ] || fail "--user root as uid $(id -u) exited $status: $out"
grep -q 'user: gpuframed runs as uid [0-9]*, and only root may become user root (uid 0): start it as root, or leave "user" out' <<<"$out" ||
  fail "$out"
[ ! -e "$tmp/no.sock" ] || fail "a daemon that refused to start left its socket"

[ "$(id -u)" = 0 ] || { echo "SKIP: 4 to 6 need root (1 to 3 passed)"; exit 77; }
if [ "$engine" = cuda ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" = 0 ]; then
  echo "SKIP: GF_TEST_ENGINE=cuda and nvidia-smi -L lists no GPU (1 to 3 passed)"
  exit 77
fi

# 4. Root becomes nobody, after binding the socket with a gid of its own.
nobody_uid=$(id -u nobody)
nobody_gid=$(id -g nobody)
sgid=4242
[ -z "$(getent group "$sgid")" ] || sgid=$((60000 + RANDOM % 5000))
"${as_nobody[@]}" test -x "$tmp" || { echo "SKIP: nobody cannot reach $tmp (TMPDIR)"; exit 77; }
sock=$tmp/gf.sock
"$d" --config "$tmp/config.json" --engine "$engine" --socket "$sock" --socket-group "$sgid" --user nobody \
  >"$tmp/daemon.log" 2>&1 &
gf_daemon_pid=$!
member=(setpriv --reuid="$nobody_uid" --regid="$nobody_gid" --groups="$sgid")
wait_ready "$gf_daemon_pid" "$sock" "${member[@]}"
[ "$(stat -c '%u %g %a' "$sock")" = "0 $sgid 660" ] ||
  fail "socket: $(stat -c '%u:%g %a' "$sock"), want 0:$sgid 660"
for f in Uid Gid; do
  ids=$(awk -v f="$f:" '$1 == f { print $2, $3, $4, $5 }' "/proc/$gf_daemon_pid/status")
  want=$nobody_uid; [ "$f" = Gid ] && want=$nobody_gid
  [ "$ids" = "$want $want $want $want" ] || fail "$f of the daemon: $ids, want $want (real, effective, saved, fs)"
done
groups=$(awk '$1 == "Groups:" { $1 = ""; print }' "/proc/$gf_daemon_pid/status" | xargs)
want_groups=$(id -G nobody | tr ' ' '\n' | sort -n | xargs)
[ "$(tr ' ' '\n' <<<"$groups" | sort -n | xargs)" = "$want_groups" ] ||
  fail "groups of the daemon: $groups, want nobody's: $want_groups"
grep -qE "info: user: became nobody: uid $nobody_uid \(nobody\), gid $nobody_gid" "$tmp/daemon.log" ||
  { cat "$tmp/daemon.log"; fail "no log line of the switch"; }
list=$("${member[@]}" "$c" list --socket "$sock")
grep -qE '^1 +affine' <<<"$list" || fail "a member of group $sgid listed: $list"
out=$("${member[@]}" "$c" stream --socket "$sock" --pipeline affine --size 1M --count 20 --verify --quiet 2>&1) ||
  { cat "$tmp/daemon.log"; fail "a member of group $sgid streaming on the $engine engine: $out"; }
[[ $out == "frames=20 errors=0 "* ]] || fail "a member of group $sgid streamed: $out"
grep -q "engine $engine: " "$tmp/daemon.log" || { cat "$tmp/daemon.log"; fail "not on the $engine engine"; }
status=0
out=$("${as_nobody[@]}" "$c" list --socket "$sock" 2>&1) || status=$?
[ "$status" != 0 ] || fail "a client without group $sgid connected"
grep -qF "cannot connect to $sock: permission denied: the socket admits user root and group gid $sgid (mode 0660): join group gid $sgid" <<<"$out" ||
  fail "the refusal: $out"

# 5. Reloads read as nobody: unreadable now, the reload is rejected and the
#    running pipelines stay.
chmod 600 "$tmp/config.json"
kill -HUP "$gf_daemon_pid"
for _ in $(seq 300); do
  grep -q 'reload rejected' "$tmp/daemon.log" && break
  sleep 0.1
done
grep -qF "error: reload rejected: $tmp/config.json: Permission denied; keeping the running configuration" \
  "$tmp/daemon.log" ||
  { cat "$tmp/daemon.log"; fail "a reload of a file nobody cannot read was not rejected with the reason"; }
list=$("${member[@]}" "$c" list --socket "$sock")
grep -qE '^1 +affine' <<<"$list" || fail "after the rejected reload: $list"

# 6. The socket stays (its directory is root's), said so; the next start
#    replaces it, and a configuration nobody cannot read stops that start.
gf_daemon_stop "the daemon that became nobody"
grep -qF "warn: socket $sock: cannot remove it: Permission denied (the next start replaces it)" "$tmp/daemon.log" ||
  { cat "$tmp/daemon.log"; fail "no warning about the socket left behind"; }
[ -S "$sock" ] || fail "the socket is gone, though nobody may not remove it"
status=0
"$d" --config "$tmp/config.json" --engine "$engine" --socket "$sock" --socket-group "$sgid" --user nobody \
  >"$tmp/daemon.log" 2>&1 || status=$?
[ "$status" = 2 ] || { cat "$tmp/daemon.log"; fail "a start on a file nobody cannot read exited $status"; }
grep -qF "socket $sock: replacing a stale socket file nobody listens on" "$tmp/daemon.log" &&
  grep -qF "$tmp/config.json: Permission denied" "$tmp/daemon.log" ||
  { cat "$tmp/daemon.log"; fail "the second start did not replace the socket, then stop on the unreadable file"; }
echo "ok: socket_group and user: the socket root:$sgid 0660, the daemon nobody's in every id, verified" \
  "frames on the $engine engine, reloads read as nobody"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The container files (container/, SERVICE.md "In a container"), as far as a
# machine without a container engine or a cluster can check them:
#   1. the Containerfile's ENTRYPOINT and CMD, the DaemonSet's container and
#      the producer Pod agree: the socket's directory is the volume both
#      mount from the same hostPath, the producers' supplementalGroups hold
#      the --socket-group the DaemonSet gives, the image's user exists in
#      the packages (systemd/gpuframed.sysusers), the probe asks that socket;
#   2. the daemon of this build started exactly as the DaemonSet's container
#      starts it: ENTRYPOINT + args, as root with only the capabilities the
#      DaemonSet adds and no_new_privs, with the paths of the image moved
#      into a scratch directory (the hostPath) and the build's binaries for
#      the packaged ones; the socket is root:GID 0660 and the daemon runs as
#      the image's user (gpuframed where this system has it, else nobody);
#   3. the readiness probe's command succeeds; the producer Pod's command,
#      run as its uid, gid and supplementalGroups, streams verified frames,
#      and the same without the group is refused in words;
#   4. SIGTERM (kubelet's stop) drains and exits 0.
# Needs root (the switch) and python3 with PyYAML; else skipped.
# Usage: container_start.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: container_start.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: container_start.sh BUILD_DIR SOURCE_DIR}
# shellcheck source-path=SCRIPTDIR source=testutil.sh
. "$(dirname "$0")/testutil.sh"
gf_need python3 setpriv
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3 has no yaml module (python3-yaml)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: starting the daemon as the container does needs root"; exit 77; }
gf_scratch gfcontainer
chmod 755 "$tmp"

# ---- 1. the files agree; what to run, one shell word per line -----------------
python3 - "$src/container/Containerfile" "$src/container/gpuframed-daemonset.yaml" \
  "$src/systemd/gpuframed.sysusers" "$tmp" <<'EOF'
import json, os, sys, yaml

containerfile, manifest, sysusers, out = sys.argv[1:]

def fail(what):
    sys.exit("FAIL: " + what)

# The Containerfile's exec-form ENTRYPOINT and CMD (a line each).
image = {}
for line in open(containerfile):
    for key in ("ENTRYPOINT", "CMD"):
        if line.startswith(key + " "):
            image[key] = json.loads(line[len(key) + 1:])
if set(image) != {"ENTRYPOINT", "CMD"}:
    fail("the Containerfile has no exec-form ENTRYPOINT and CMD: %s" % image)
entry, cmd = image["ENTRYPOINT"], image["CMD"]
if entry[0] != "/usr/bin/gpuframed":
    fail("ENTRYPOINT runs %s, not the packaged /usr/bin/gpuframed" % entry[0])

def option(argv, name):
    if argv.count(name) != 1:
        fail("%s is given %d times in %s" % (name, argv.count(name), argv))
    return argv[argv.index(name) + 1]

docs = list(yaml.safe_load_all(open(manifest)))
kinds = [d["kind"] for d in docs]
if kinds != ["Namespace", "DaemonSet", "Pod"]:
    fail("the manifest holds %s" % kinds)
ns, ds, pod = docs
if ds["apiVersion"] != "apps/v1" or pod["apiVersion"] != "v1":
    fail("apiVersions %s, %s" % (ds["apiVersion"], pod["apiVersion"]))
name = ns["metadata"]["name"]
if ds["metadata"]["namespace"] != name or pod["metadata"]["namespace"] != name:
    fail("the DaemonSet and the Pod are not in namespace %s" % name)
spec = ds["spec"]["template"]["spec"]
if spec_labels := ds["spec"]["selector"]["matchLabels"]:
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in spec_labels.items()):
        fail("the selector %s does not match the template's labels %s" % (spec_labels, labels))
(c,) = spec["containers"]
if "command" in c:
    fail("the DaemonSet's container replaces the image's ENTRYPOINT")
argv = entry + c.get("args", cmd)
socket = option(argv, "--socket")
group = option(argv, "--socket-group")
user = option(argv, "--user")
if not group.isdigit():
    fail("the DaemonSet's socket group %r is no gid: the host knows no container's group names" % group)
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
volumes = {v["name"]: v for v in spec["volumes"]}
sock_dir = os.path.dirname(socket)
vol = [n for n, p in mounts.items() if p == sock_dir]
if len(vol) != 1 or "hostPath" not in volumes[vol[0]]:
    fail("no hostPath volume is mounted at the socket's directory %s: %s" % (sock_dir, mounts))
host_dir = volumes[vol[0]]["hostPath"]["path"]
if c["resources"]["limits"].get("nvidia.com/gpu", 0) < 1:
    fail("the daemon asks the device plugin for no GPU: %s" % c["resources"])
sc = c["securityContext"]
caps = sorted(sc["capabilities"]["add"])
if sc["capabilities"]["drop"] != ["ALL"] or sc.get("allowPrivilegeEscalation") is not False:
    fail("the container's securityContext: %s" % sc)
probe = c["readinessProbe"]["exec"]["command"]
if option(probe, "--socket") != socket:
    fail("the readiness probe asks %s, not %s" % (probe, socket))
if spec["terminationGracePeriodSeconds"] < 35:
    fail("terminationGracePeriodSeconds %s: the drain may take 30 s" % spec["terminationGracePeriodSeconds"])
# The producer: the same host directory, the socket's group.
psc = pod["spec"]["securityContext"]
(p,) = pod["spec"]["containers"]
if int(group) not in psc.get("supplementalGroups", []):
    fail("the producer's supplementalGroups %s lack the socket's group %s" % (psc, group))
pvol = {v["name"]: v for v in pod["spec"]["volumes"]}
pmount = [m for m in p["volumeMounts"] if pvol[m["name"]].get("hostPath", {}).get("path") == host_dir]
if len(pmount) != 1:
    fail("the producer mounts no %s" % host_dir)
producer = [a.replace(pmount[0]["mountPath"], sock_dir) if a.startswith(pmount[0]["mountPath"]) else a
            for a in p["command"]]
if option(producer, "--socket") != socket:
    fail("the producer streams to %s, not %s" % (option(producer, "--socket"), socket))
# The image's user is one the package makes.
if not any(l.split()[:2] == ["u", user] for l in open(sysusers)):
    fail("the packages make no user %s (systemd/gpuframed.sysusers)" % user)

def write(name, words):
    with open(os.path.join(out, name), "w") as f:
        f.write("".join(w + "\n" for w in words))

write("daemon.argv", argv)
write("probe.argv", probe)
write("producer.argv", producer)
write("caps", caps)
write("ids", [str(psc["runAsUser"]), str(psc["runAsGroup"]), group, user, sock_dir])
EOF

mapfile -t ids <"$tmp/ids"
uid=${ids[0]} gid=${ids[1]} sgid=${ids[2]} user=${ids[3]} sock_dir=${ids[4]}
getent passwd "$user" >/dev/null || { echo "note: no user $user here; the daemon becomes nobody"; user=nobody; }
# The image's paths, moved: its binaries are the build's, its configuration
# the tree's (the package's conffile), its socket directory the hostPath.
host=$tmp/host$sock_dir
mkdir -p "$host"
map() { # WORD: the word as this machine runs it
  case $1 in
    /usr/bin/gpuframed) echo "$build/gpuframed" ;;
    /usr/bin/gpuframe) echo "$build/gpuframe" ;;
    /etc/gpuframed/gpuframed.json) echo "$src/config/gpuframed.json" ;;
    "$sock_dir"/*) echo "$host/${1#"$sock_dir"/}" ;;
    *) echo "$1" ;;
  esac
}
load() { # FILE: into the array $words, each word mapped
  words=()
  local w
  while IFS= read -r w; do words+=("$(map "$w")"); done <"$1"
}
load "$tmp/daemon.argv"
argv=("${words[@]}")
for i in "${!argv[@]}"; do
  if [ "${argv[$i]}" = --user ]; then argv[$((i + 1))]=$user; fi
done
sock=$(map "$(grep -A1 -x -- --socket "$tmp/daemon.argv" | tail -n1)")
caps=$(sed 's/.*/+\L&/' "$tmp/caps" | paste -sd, -)

# ---- 2. started as the DaemonSet's container starts -------------------------
setpriv --no-new-privs --inh-caps=-all --bounding-set="-all,$caps" -- "${argv[@]}" >"$tmp/daemon.log" 2>&1 &
gf_daemon_pid=$!
load "$tmp/probe.argv"
probe=("${words[@]}")
ready=0
for _ in $(seq 300); do
  if "${probe[@]}" >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$gf_daemon_pid" 2>/dev/null || { cat "$tmp/daemon.log"; fail "the daemon exited: ${argv[*]}"; }
  sleep 0.1
done
[ "$ready" = 1 ] || { cat "$tmp/daemon.log"; fail "the readiness probe never succeeded: ${probe[*]}"; }
[ "$(stat -c '%u %g %a' "$sock")" = "0 $sgid 660" ] ||
  fail "the socket is $(stat -c '%u:%g %a' "$sock"), want 0:$sgid 660"
want_uid=$(id -u "$user")
want_gid=$(id -g "$user")
for f in Uid Gid; do
  ids=$(awk -v f="$f:" '$1 == f { print $2, $3, $4, $5 }' "/proc/$gf_daemon_pid/status")
  want=$want_uid; [ "$f" = Gid ] && want=$want_gid
  [ "$ids" = "$want $want $want $want" ] || fail "$f of the daemon: $ids, want $user's $want"
done
capeff=$(awk '$1 == "CapEff:" { print $2 }' "/proc/$gf_daemon_pid/status")
[ "$capeff" = 0000000000000000 ] || fail "the daemon kept capabilities $capeff after becoming $user"

# ---- 3. the producer, with and without the group ------------------------------
load "$tmp/producer.argv"
producer=("${words[@]}")
out=$(setpriv --reuid="$uid" --regid="$gid" --groups="$sgid" -- "${producer[@]}" --quiet 2>&1) ||
  { cat "$tmp/daemon.log"; fail "the producer Pod's command: $out"; }
[[ $out == "frames=200 errors=0 "* ]] || fail "the producer printed: $out"
status=0
out=$(setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "${producer[@]}" --quiet 2>&1) || status=$?
[ "$status" != 0 ] || fail "a producer without group $sgid streamed"
grep -qF "cannot connect to $sock: permission denied: the socket admits user root and group gid $sgid (mode 0660): join group gid $sgid" <<<"$out" ||
  grep -qF "cannot connect to $sock: permission denied: the socket admits user root and group $(getent group "$sgid" | cut -d: -f1) (mode 0660)" <<<"$out" ||
  fail "the refusal: $out"

# ---- 4. kubelet's SIGTERM -------------------------------------------------------
gf_daemon_stop "the daemon started as the container starts it"
grep -q 'info: drained: every frame received was answered' "$tmp/daemon.log" ||
  { cat "$tmp/daemon.log"; fail "no complete drain"; }
echo "ok: the container's command line as root with $caps: socket root:$sgid 0660, the daemon" \
  "$user with no capability left, the probe and the producer (uid $uid, group $sgid) served"

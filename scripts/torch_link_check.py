#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which way of compiling an AOTInductor package loads on this machine: the
first phase of scripts/gpu-torch.sh, on the GPU machine (about 90 s).

One small model (tiny_mlp below: 16 -> 32 -> 4 floats, batches of 1 to 64)
is compiled five ways at once, each in a process of its own with its own
inductor cache:

  compiler  gpuframe-export --libstdcxx compiler: the model object linked as
            the C++ compiler links by default (gpuframe-export before
            --libstdcxx), in this shell's environment
  auto      gpuframe-export --libstdcxx auto, its default
  shared    gpuframe-export --libstdcxx shared (-l:libstdc++.so.6)
  clean     a plain aoti_compile_and_package of the same program, no
            options, in an empty environment (env -i) but for HOME, this
            PATH, PYTHONPATH, the cache directory and 4 compile threads
  syspath   the same with the default PATH, where its g++ is another one

For each it prints the compiler AOTInductor used and the link command it
ran, the model object's NEEDED libraries and how many of the C++ runtime's
own symbols it defines (std::locale::..., std::codecvt<char16_t...>: a
copy of libstdc++ linked into it), and whether the package loads and gives
eager PyTorch's results in a fresh python3 (gpuframe-export --check-only:
aoti_load_package, batches of 1, 7 and 64) and in a fresh gpuframed
(gf_torch.so, PyTorch's C++ loader: 9 frames): each load a process of its
own, under faulthandler and gf_crash_backtrace.so, so that a crash is told
and the rest still runs.  Before them: the toolchain (g++ on PATH and on
the default PATH, where its libstdc++ is, the libstdc++.so.6 this process
maps, gf_torch_aoti.so's NEEDED and runtime symbols).

The first of auto, shared, syspath, clean and compiler that loads both ways
is the one the tests and the benchmark export with: LOGS/torch-link.env
holds its variables (GPUFRAME_EXPORT_LIBSTDCXX, and CXX for syspath) for
gpu-torch.sh to export; there is no such file when none loads.  Each
process's whole output is in LOGS/VARIANT.*.log.

  scripts/torch_link_check.py BUILD LOGS [--seconds 150]
"""

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "torch_link_check:tiny_mlp"
SEED = 5
FRAMES = 9
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# name: (gpuframe-export's --libstdcxx, or "plain"; environment; what it is)
VARIANTS = {
    "compiler": ("compiler", "this", "gpuframe-export --libstdcxx compiler, this environment"),
    "auto": ("auto", "this", "gpuframe-export --libstdcxx auto (its default), this environment"),
    "shared": ("shared", "this", "gpuframe-export --libstdcxx shared, this environment"),
    "clean": ("plain", "clean", "aoti_compile_and_package, no options, env -i with this PATH"),
    "syspath": ("plain", "syspath", "aoti_compile_and_package, no options, env -i with PATH=" +
                DEFAULT_PATH),
}
PREFERENCE = ("auto", "shared", "syspath", "clean", "compiler")
# A libstdc++ linked into an object defines these; one linked to
# libstdc++.so.6 defines none (its template instantiations only name them).
RUNTIME_SYMBOL = re.compile(r" (std::locale::|std::codecvt<char16_t)")


def tiny_mlp():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def export_argv(variant, work, build):
    return [MODEL, "--frame", "16", "--seed", str(SEED), "-o", os.path.join(work, variant + ".pt2"),
            "--plugin", os.path.join(build, "plugins", "gf_torch.so"), "--name", variant]


def pythonpath(inherit=True):
    """This tree's Python package, its tests' support and this script, and
    with ``inherit`` $PYTHONPATH after them."""
    dirs = [os.path.join(REPO, d) for d in ("python", "python/tests", "scripts")]
    return os.pathsep.join(dirs + ([os.environ["PYTHONPATH"]] if inherit and
                                   os.environ.get("PYTHONPATH") else []))


def run(cmd, **kw):
    """cmd's output (stdout and stderr), or the reason it did not run."""
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=60, **kw).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return "(%s: %s)" % (cmd[0], e)


def first_line(text):
    return (text.strip().splitlines() or [""])[0]


def which(name, path):
    return shutil.which(name, path=path)


def elf_facts(path):
    """'NEEDED a b c; N runtime symbols defined' of a shared object."""
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", run(["readelf", "-d", path]))
    syms = run(["sh", "-c", 'nm -D --defined-only "$1" | c++filt', "sh", path])
    count = sum(1 for line in syms.splitlines() if RUNTIME_SYMBOL.search(line))
    return "NEEDED %s; libstdc++ runtime symbols defined: %d%s" % (
        " ".join(needed) or "(none read)", count, " (a copy of libstdc++ inside)" if count else "")


def short_command(cmd):
    """A compile or link command without its -I and -D options, files by
    their base names."""
    out, skip = [], False
    for i, t in enumerate(shlex.split(cmd)):
        if skip:
            skip = False
        elif t == "-D":
            skip = True
        elif not t.startswith(("-I", "-D")):
            out.append(os.path.basename(t) if i and t.startswith("/") and
                       t.endswith((".o", ".so", ".cpp", ".h")) else t)
    return " ".join(out)


def inspect_package(pkg, dest, link_command):
    """Prints each shared object's elf_facts, and with ``link_command`` the
    link command AOTInductor noted at the end of its C++ source."""
    with zipfile.ZipFile(pkg) as z:
        for name in z.namelist():
            cmds = z.read(name).decode(errors="replace").split("// Link cmd\n// ")[1:] \
                if name.endswith(".cpp") and link_command else []
            if cmds:
                print("   link (%s): %s" % (os.path.basename(name),
                                            short_command(cmds[0].splitlines()[0])[:1500]))
                link_command = False
            if name.endswith(".so"):
                so = z.extract(name, dest)
                print("   %s: %s" % (os.path.basename(name), elf_facts(so)))


def start(cmd, env, log):
    f = open(log, "w")
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=f,
                            stderr=subprocess.STDOUT, start_new_session=True), f


def wait(procs, deadline):
    """{key: returncode, or None where it ran past the deadline (killed)}."""
    rcs = {}
    for key, (proc, f) in procs.items():
        try:
            rcs[key] = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rcs[key] = None
        f.close()
    return rcs


def outcome(rc):
    if rc == 0:
        return "OK"
    if rc is None:
        return "TIMED OUT"
    if rc < 0:
        try:
            return "CRASH (%s)" % signal.Signals(-rc).name
        except ValueError:
            return "CRASH (signal %d)" % -rc
    return "FAILED (exit %d)" % rc


def why_lines(log, limit=14):
    """The lines of a failed process's log that say why: a crash's first
    native frames (gf_crash_backtrace.so's), else the last lines that name
    an error."""
    keep = re.compile(r"Fatal Python|gf_crash_backtrace|\.so\(|Error|error|gpuframe-export: |"
                      r"gpuframed |terminate|what\(\)|DO NOT MATCH")
    try:
        lines = [l for l in open(log, errors="replace").read().splitlines() if keep.search(l)]
    except OSError:
        return []
    crash = next((i for i, l in enumerate(lines) if "gf_crash_backtrace: pid" in l), None)
    if crash is not None:  # its header, the handler's frames, then where it crashed
        lines = lines[max(0, crash - 2):crash + 1] + \
            [l for l in lines[crash + 1:] if not re.search(r"gf_crash_backtrace\.so|libc\.so", l)]
        return [l[:300] for l in lines[:limit]]
    return [l[:300] for l in lines[-limit:]]


# ---- the processes this script starts of itself ----------------------------------------


def compile_child(variant, work, build):
    """Compiles the package of `variant`; prints the compiler, every compile
    and link command AOTInductor runs, and writes WORK/VARIANT.json (the
    pipeline entry)."""
    mode = VARIANTS[variant][0]
    import torch
    from torch._inductor import cpp_builder
    from gpuframe import export
    cxx = cpp_builder.get_cpp_compiler()
    print("compiler: %s = %s (%s); links libstdc++.a into a shared object: %s"
          % (cxx, which(cxx, os.environ.get("PATH")) or "?", first_line(run([cxx, "--version"])),
             "yes" if export.links_libstdcxx_statically(cxx) else "no"), flush=True)
    real_build = cpp_builder.CppBuilder.build

    def build_and_say(self):
        kind = "link" if self.get_target_file_path().endswith(".so") else "compile"
        print("%s: %s" % (kind, self.get_command_line()), flush=True)
        return real_build(self)

    cpp_builder.CppBuilder.build = build_and_say
    if mode == "plain":
        real_compile = torch._inductor.aoti_compile_and_package

        def plain(program, package_path=None, inductor_configs=None):
            return real_compile(program, package_path=package_path)

        torch._inductor.aoti_compile_and_package = plain
        mode = "compiler"
    args = export.arguments(export_argv(variant, work, build) + ["--no-check", "--libstdcxx", mode])
    entry = export.export(args)
    with open(os.path.join(work, variant + ".json"), "w") as f:
        json.dump(entry, f)
    return 0


def serve_child(variant, work, build, seconds):
    """Starts a gpuframed serving `variant`'s package and checks FRAMES
    frames against eager PyTorch; 0 when they match.  The daemon must
    listen with 10 s of `seconds` left, else this says so with its log;
    its log is also in the daemon's directory under $TMPDIR, which the
    parent reads when this process is killed."""
    import numpy as np
    import support
    os.environ["GF_TEST_DAEMON"] = os.path.join(build, "gpuframed")
    support.START_TIMEOUT_S = max(5.0, seconds - 10)
    with open(os.path.join(work, variant + ".json")) as f:
        entry = json.load(f)
    daemon = support.Daemon({"shards": 1, "slots": 2, "log_level": "info", "pipelines": [entry]},
                            engine_name="cuda")
    try:
        daemon.start()
    except RuntimeError as e:
        print("gpuframed did not start: %s; its log:\n%s" % (str(e).split("; log:")[0],
                                                               daemon.log()), flush=True)
        daemon.cleanup()
        return 1
    print("gpuframed listening; its log so far:\n%s" % daemon.log(), flush=True)
    ok = False
    try:
        import gpuframe
        import torch
        from gpuframe import export
        x = np.random.default_rng(SEED).standard_normal((FRAMES, 16)).astype(np.float32)
        with gpuframe.Client(daemon.socket_path, timeout=60) as c:
            got = np.stack(list(c.map(variant, list(x), window=4)))
        serve = export.serving_module(export.arguments(export_argv(variant, work, build)))
        with torch.no_grad():
            ref = serve(torch.as_tensor(x).cuda())[0].float().cpu().numpy()
        err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max())) \
            if got.shape == ref.shape else float("inf")
        ok = err <= export.TOLERANCES["float32"]
        print("%d frames %s: results %s, eager %s, max |diff| %.3g of the scale (tolerance %.3g)"
              % (FRAMES, "match" if ok else "DO NOT MATCH", got.shape, ref.shape, err,
                 export.TOLERANCES["float32"]))
    except Exception as e:  # noqa: BLE001 - whatever it was, the daemon's log says more
        print("the frames through gpuframed failed: %s: %s" % (type(e).__name__, e))
    finally:
        status = daemon.stop()
        log = daemon.log()
        daemon.cleanup()
    if status != 0 or not ok:
        print("gpuframed exited with %s; its log:\n%s" % (status, log[-6000:]))
        return 1
    return 0


# ---- the check -------------------------------------------------------------------------


def daemon_log(variant, work, logs):
    """Prints the log of `variant`'s gpuframed, whose serving process the
    deadline killed (its daemon's directory is left under WORK/d-VARIANT),
    and keeps it as LOGS/VARIANT.gpuframed.log."""
    found = [os.path.join(d, "daemon.log") for d in
             sorted(glob.glob(os.path.join(work, "d-" + variant, "gfpytest.*")))
             if os.path.exists(os.path.join(d, "daemon.log"))]
    if not found:
        print("     (no log of gpuframed: it was not started)")
        return
    kept = os.path.join(logs, variant + ".gpuframed.log")
    shutil.copyfile(found[-1], kept)
    lines = open(kept, errors="replace").read().splitlines()
    print("     gpuframed's log when the deadline came (%s), its last %d of %d lines:"
          % (kept, min(len(lines), 25), len(lines)))
    for line in lines[-25:]:
        print("       " + line[:400])


def toolchain(build):
    """Prints what decides how the model object is linked."""
    print("== link-check: the toolchain")
    for label, path in (("PATH", os.environ.get("PATH", "")), ("the default PATH", DEFAULT_PATH)):
        gxx = which("g++", path)
        if gxx is None:
            print("   g++ on %s: none" % label)
            continue
        print("   g++ on %s: %s -> %s (%s)" % (label, gxx, os.path.realpath(gxx),
                                              first_line(run([gxx, "--version"]))))
        print("     -print-file-name: libstdc++.so %s, libstdc++.a %s" % tuple(
            first_line(run([gxx, "-print-file-name=" + n])) for n in ("libstdc++.so",
                                                                      "libstdc++.a")))
    print("   CXX=%s" % os.environ.get("CXX", "(unset)"))
    aoti = os.path.join(build, "plugins", "gf_torch_aoti.so")
    print("   gf_torch_aoti.so: %s" % (elf_facts(aoti) if os.path.exists(aoti) else "NOT BUILT"))
    try:
        import torch
        from torch._inductor import cpp_builder
        from gpuframe import export
        cxx = cpp_builder.get_cpp_compiler()
        print("   AOTInductor's compiler: %s; links libstdc++.a into a shared object: %s"
              % (cxx, "yes" if export.links_libstdcxx_statically(cxx) else "no"))
        with open("/proc/self/maps") as f:
            mapped = sorted({l.split()[-1] for l in f if "libstdc++" in l})
        print("   this python3 (torch %s) maps %s" % (torch.__version__, " ".join(mapped)))
    except Exception as e:  # the facts before still count
        print("   PyTorch: %s" % e)
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", help="the build tree (gpuframed, plugins/gf_torch.so)")
    p.add_argument("logs", help="where the logs and torch-link.env go")
    p.add_argument("--seconds", type=float, default=150, help="the whole check's limit")
    p.add_argument("--compile", metavar="VARIANT", help=argparse.SUPPRESS)
    p.add_argument("--serve", metavar="VARIANT", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--left", type=float, default=60, help=argparse.SUPPRESS)
    a = p.parse_args()
    sys.path[:0] = pythonpath(False).split(os.pathsep)
    build = os.path.abspath(a.build)
    if a.compile:
        return compile_child(a.compile, a.work, build)
    if a.serve:
        return serve_child(a.serve, a.work, build, a.left)

    t0 = time.monotonic()
    end = t0 + a.seconds
    logs = os.path.abspath(a.logs)
    os.makedirs(logs, exist_ok=True)
    env_file = os.path.join(logs, "torch-link.env")
    if os.path.exists(env_file):
        os.remove(env_file)
    work = tempfile.mkdtemp(prefix="gf-link-check.")
    me = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), build, logs]

    # Compiles, all at once.
    variants = list(VARIANTS)
    this_gxx, sys_gxx = which("g++", os.environ.get("PATH", "")), which("g++", DEFAULT_PATH)
    if sys_gxx is None or (this_gxx and os.path.realpath(sys_gxx) == os.path.realpath(this_gxx)):
        print("== link-check: variant syspath skipped: the default PATH has %s"
              % ("no g++" if sys_gxx is None else "the same g++ (%s)" % sys_gxx))
        variants.remove("syspath")
    procs = {}
    for v in variants:
        kind = VARIANTS[v][1]
        if kind == "this":
            env = dict(os.environ)
        else:
            path = os.environ.get("PATH", DEFAULT_PATH) if kind == "clean" else DEFAULT_PATH
            env = {"HOME": os.environ.get("HOME", "/root"), "PATH": path}
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "4")  # as the tests export
        env["PYTHONPATH"] = pythonpath(kind == "this")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "cache-" + v)
        procs[v] = start(me + ["--compile", v, "--work", work], env,
                         os.path.join(logs, v + ".compile.log"))
    print("== link-check: compiling %s (%s); their logs in %s"
          % (MODEL, ", ".join(variants), logs), flush=True)
    toolchain(build)
    compiled = wait(procs, end - 40)

    # Loads: in python3 and in gpuframed, every package at once.
    load_env = dict(os.environ, PYTHONPATH=pythonpath())
    crash_lib = os.path.join(build, "tests", "gf_crash_backtrace.so")
    if os.path.exists(crash_lib):
        load_env["LD_PRELOAD"] = crash_lib
    procs = {}
    left = end - 3 - time.monotonic()
    print("== link-check: loading each package in python3 and in gpuframed, %.0f s left"
          % left, flush=True)
    for v in variants:
        if compiled[v] != 0:
            continue
        procs[(v, "python")] = start(
            [sys.executable, "-X", "faulthandler", "-m", "gpuframe.export"] +
            export_argv(v, work, build) + ["--check-only"], load_env,
            os.path.join(logs, v + ".python.log"))
        # The daemon's directory (its log) under a $TMPDIR of its own, found
        # there when the deadline kills it before it could say why.
        tmpdir = os.path.join(work, "d-" + v)
        os.makedirs(tmpdir, exist_ok=True)
        procs[(v, "daemon")] = start(me + ["--serve", v, "--work", work, "--left", str(left)],
                                     dict(load_env, TMPDIR=tmpdir),
                                     os.path.join(logs, v + ".daemon.log"))
    loaded = wait(procs, end - 3)

    results = {}
    for v in variants:
        print("== link-check: %s: %s" % (v, VARIANTS[v][2]))
        log = os.path.join(logs, v + ".compile.log")
        text = open(log, errors="replace").read()
        for line in text.splitlines():
            if line.startswith(("compiler: ", "link: ")) or "--libstdcxx" in line:
                print("   " + (short_command(line) if line.startswith("link: ") else line)[:1500])
        if compiled[v] != 0:
            print("   compile: %s" % outcome(compiled[v]))
            for line in (why_lines(log) or text.splitlines()[-8:]):
                print("     " + line)
            results[v] = (outcome(compiled[v]), "-")
            continue
        try:
            inspect_package(os.path.join(work, v + ".pt2"), os.path.join(work, v),
                            "\nlink: " not in text)
        except (OSError, zipfile.BadZipFile) as e:
            print("   the package: %s" % e)
        for way, label in (("python", "python3, aoti_load_package, batches of 1, 7, 64"),
                           ("daemon", "gpuframed, gf_torch.so, %d frames" % FRAMES)):
            print("   %s: %s" % (label, outcome(loaded[(v, way)])))
            if loaded[(v, way)] != 0:
                for line in why_lines(os.path.join(logs, "%s.%s.log" % (v, way))):
                    print("     " + line)
            if way == "daemon" and loaded[(v, way)] is not None:
                for line in open(os.path.join(logs, v + ".daemon.log"), errors="replace"):
                    if "plugin torch:" in line:  # what loading took, step by step
                        print("     " + line.strip()[:400])
            if way == "daemon" and loaded[(v, way)] is None:
                daemon_log(v, work, logs)
        results[v] = (outcome(loaded[(v, "python")]), outcome(loaded[(v, "daemon")]))

    print("== link-check: summary (python3 / gpuframed), %.0f s" % (time.monotonic() - t0))
    for v in variants:
        print("   %-9s %s / %s" % ((v,) + results[v]))
    chosen = next((v for v in PREFERENCE if results.get(v) == ("OK", "OK")), None)
    if chosen is None:
        print("== link-check: NO VARIANT LOADS both ways: the tests export as gpuframe-export "
              "does by default (auto), and will fail the same way")
    else:
        setting = {"GPUFRAME_EXPORT_LIBSTDCXX": "compiler" if VARIANTS[chosen][0] == "plain"
                   else VARIANTS[chosen][0]}
        if chosen == "syspath":
            setting = {"CXX": sys_gxx, "GPUFRAME_EXPORT_LIBSTDCXX": "auto"}
        with open(env_file, "w") as f:
            f.writelines("%s=%s\n" % kv for kv in setting.items())
        print("== link-check: the tests and the benchmark export with %s (variant %s)"
              % (" ".join("%s=%s" % kv for kv in setting.items()), chosen))
        if chosen == "clean":
            print("   (a variable of this environment breaks the package: only env -i loads)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

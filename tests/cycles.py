#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No circle in the code: of includes, of calls, of Python imports.

    tests/cycles.py [--includes FOLDER...] [--calls OBJECTS_FILE] [--python PACKAGE_DIR...]

--includes: among a folder's modules.  A module is a .c file with the .h of
  the same name (a b_internal.h is b's own); module A depends on B when a
  file of A includes a header of B.
--calls: among the C files behind the object files listed in OBJECTS_FILE
  (one path a line; CMake writes it, tests/CMakeLists.txt).  File A calls
  file B when A's object leaves undefined a symbol that B's object defines
  (`nm`): what the compiler saw, whatever header declared it, so a circle
  through a shared internal header (config.c and config_pipelines.c both
  include config_internal.h, which the include check counts as config's
  own) shows here.  Objects of one source compiled twice count as one file.
--python: among a package's modules; module A depends on B when A imports
  B, at the top or anywhere else, type-only imports (if TYPE_CHECKING)
  included: mypy reads them, and a circle of them is a circle of design.

A circle means two files call each other, which the layout forbids: calls
go one way (daemon/shard_state.h, CONTRIBUTING.md "Rules a change keeps").
Prints each circle as "a -> b -> a", with the symbols of each call, and
exits 1 if there is one; prints each graph's nodes in dependency order
(lowest first) otherwise.
"""
import ast
import os
import re
import subprocess
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(filename):
    base = os.path.splitext(filename)[0]
    return base[: -len("_internal")] if base.endswith("_internal") else base


def include_graph(folder):
    """module name -> the set of module names it includes, within folder."""
    files = [f for f in os.listdir(folder) if f.endswith((".c", ".h"))]
    deps = {module_of(f): set() for f in files}
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            for inc in INCLUDE.findall(fh.read()):
                if inc != os.path.basename(inc) or not os.path.exists(os.path.join(folder, inc)):
                    continue
                other = module_of(inc)
                if other != module_of(f):
                    deps[module_of(f)].add(other)
    return deps


def source_of(obj):
    """The source an object of CMake's was compiled from, as CMake names
    the object: CMakeFiles/TARGET.dir/daemon/conn.c.o -> daemon/conn.c."""
    m = re.search(r"CMakeFiles/[^/]+\.dir/(.+)\.o$", obj)
    return m.group(1) if m else obj


def nm_symbols(obj):
    """(defined global symbols, undefined symbols) of an object file."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        if f[1] == "U":
            undefined.add(f[0])
        elif f[1] in "TDBRGVW":  # global code and data; lower case is file-local
            defined.add(f[0])
    return defined, undefined


def call_graph(objects_file):
    """source -> {source it calls: the symbols}; the edges' symbols in `why`."""
    with open(objects_file, encoding="utf-8") as fh:
        objects = [line.strip() for line in fh if line.strip()]
    defined, undefined = defaultdict(set), defaultdict(set)
    for obj in objects:
        d, u = nm_symbols(obj)
        src = source_of(obj)
        defined[src] |= d
        undefined[src] |= u
    owner = defaultdict(set)
    for src, names in defined.items():
        for n in names:
            owner[n].add(src)
    deps = {src: set() for src in set(defined) | set(undefined)}
    why = defaultdict(set)
    for src, names in undefined.items():
        for n in names:
            for other in owner.get(n, ()):
                if other != src:
                    deps[src].add(other)
                    why[src, other].add(n)
    return deps, why


def python_graph(package):
    """module -> the set of the package's modules it imports."""
    mods = {os.path.splitext(f)[0] for f in os.listdir(package) if f.endswith(".py")}
    name = os.path.basename(os.path.normpath(package))
    deps = {m: set() for m in mods}
    for m in mods:
        with open(os.path.join(package, m + ".py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), m + ".py")
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:
                    targets = [node.module.split(".")[0]]
                elif node.level == 1:
                    targets = [a.name for a in node.names]
                elif node.level == 0 and (node.module or "").split(".")[0] == name:
                    rest = (node.module or "").split(".")[1:]
                    targets = rest[:1] if rest else [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names
                           if a.name.startswith(name + ".")]
            deps[m] |= {t for t in targets if t in mods and t != m}
    return deps


def circles(deps):
    """Every elementary circle found by depth-first search, once each."""
    found, seen, done = [], set(), set()

    def walk(node, path, on_path):
        for nxt in sorted(deps.get(node, ())):
            if nxt in on_path:
                loop = path[path.index(nxt):] + [nxt]
                key = frozenset(loop)
                if key not in seen:
                    seen.add(key)
                    found.append(loop)
            elif nxt not in done:
                walk(nxt, path + [nxt], on_path | {nxt})
        done.add(node)

    for n in sorted(deps):
        if n not in done:
            walk(n, [n], {n})
    return found


def order(deps):
    """The nodes, each after everything it depends on."""
    out, placed = [], set()
    while len(placed) < len(deps):
        ready = sorted(n for n in deps if n not in placed and deps[n] <= placed)
        out.extend(ready)
        placed.update(ready)
    return out


def report(what, deps, why=None):
    """Prints the circles of one graph, or its order; True when it has one."""
    loops = circles(deps)
    for loop in loops:
        text = loop[0]
        for a, b in zip(loop, loop[1:]):
            calls = sorted(why[a, b]) if why else []
            text += " -> " + b + (" (" + ", ".join(calls[:3]) +
                                  (", ..." if len(calls) > 3 else "") + ")" if calls else "")
        print(f"{what}: circle: {text}")
    if not loops:
        print(f"{what}: no circle; lowest first: {' '.join(order(deps))}")
    return bool(loops)


def main(argv):
    mode, bad, args = None, False, {"--includes": [], "--calls": [], "--python": []}
    for a in argv:
        if a in args:
            mode = a
        elif mode is None:
            print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
            return 2
        else:
            args[mode].append(a)
    for folder in args["--includes"]:
        bad |= report(f"{folder} (includes)", include_graph(folder))
    for objects_file in args["--calls"]:
        deps, why = call_graph(objects_file)
        bad |= report("calls", deps, why)
    for package in args["--python"]:
        bad |= report(f"{package} (imports)", python_graph(package))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

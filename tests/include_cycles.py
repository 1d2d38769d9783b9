#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No include circle among a folder's modules.

A module is a .c file with the .h of the same name (and a b_internal.h is
b's own); module A depends on B when a file of A includes a header of B.  Every header of a module
that includes another module's header must stand below it: a circle means
two files call each other, which the daemon's layout forbids
(daemon/shard_state.h, README.md "A frame's trip").

    tests/include_cycles.py FOLDER...

Prints each circle as "a -> b -> a" and exits 1 if there is one; prints the
modules in dependency order (lowest first) otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(filename):
    base = os.path.splitext(filename)[0]
    return base[: -len("_internal")] if base.endswith("_internal") else base


def modules(folder):
    """module name -> the set of module names it includes, within folder."""
    files = [f for f in os.listdir(folder) if f.endswith((".c", ".h"))]
    names = {module_of(f) for f in files}
    deps = {n: set() for n in names}
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            for inc in INCLUDE.findall(fh.read()):
                if inc != os.path.basename(inc) or not os.path.exists(os.path.join(folder, inc)):
                    continue
                other = module_of(inc)
                if other != module_of(f):
                    deps[module_of(f)].add(other)
    return deps


def circles(deps):
    """Every elementary circle found by depth-first search, once each."""
    found, seen = [], set()

    def walk(node, path, on_path):
        for nxt in sorted(deps[node]):
            if nxt in on_path:
                loop = path[path.index(nxt):] + [nxt]
                key = frozenset(loop)
                if key not in seen:
                    seen.add(key)
                    found.append(loop)
            elif nxt not in done:
                walk(nxt, path + [nxt], on_path | {nxt})
        done.add(node)

    done = set()
    for n in sorted(deps):
        if n not in done:
            walk(n, [n], {n})
    return found


def order(deps):
    """The modules, each after everything it includes."""
    out, placed = [], set()
    while len(placed) < len(deps):
        ready = sorted(n for n in deps if n not in placed and deps[n] <= placed)
        out.extend(ready)
        placed.update(ready)
    return out


def main(folders):
    bad = False
    for folder in folders:
        deps = modules(folder)
        loops = circles(deps)
        for loop in loops:
            print(f"{folder}: circle: {' -> '.join(loop)}")
            bad = True
        if not loops:
            print(f"{folder}: no circle; lowest first: {' '.join(order(deps))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

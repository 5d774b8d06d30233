#!/usr/bin/env python3
"""check-include-cycles.py: fails when the files of src/ (or its folders) depend on each other
in a circle, so that the layers of docs/architecture.md stay pointing one way.

A module is a source file and its header (connection.c with connection.h); module A depends
on module B when A's .c or .h has `#include "B.h"`. Headers are found by file name anywhere
under src/ (a folder prefix in the include is allowed). Every strongly connected component of
more than one module is a cycle. When src/ has sub-folders, the folders are checked the same
way (folder X depends on folder Y when a module in X depends on a module in Y).

Cycles that existed when this check was written are listed in ALLOWED below, to be removed
one by one as the knot is untied (issue 16); a cycle that is not within one of them, or a
module that joins one, fails the check. With --strict nothing is allowed.

Usage: scripts/check-include-cycles.py [--strict] [SRC_DIR]   (exit 0: no new cycle)
"""

import os
import re
import sys

# Each entry: modules that may still form a cycle among themselves (shrinks over time).
ALLOWED = [
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(src):
    """{module name: [paths]} and {module name: folder relative to src ('' at the top)}."""
    mods, folder = {}, {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            name = f[:-2]
            mods.setdefault(name, []).append(os.path.join(dirpath, f))
            rel = os.path.relpath(dirpath, src)
            folder[name] = "" if rel == "." else rel
    return mods, folder


def dependencies(mods):
    deps = {}
    for name, paths in mods.items():
        for path in paths:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                target = os.path.basename(inc)[:-2] if inc.endswith(".h") else None
                if target and target != name and target in mods:
                    deps.setdefault(name, set()).add(target)
    return deps


def cycles(nodes, deps):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(deps.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(deps.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def explain(component, deps):
    """The edges inside a component, for the message."""
    members = set(component)
    return ["  %s -> %s" % (a, ", ".join(sorted(deps.get(a, set()) & members)))
            for a in component]


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    src = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "src")
    mods, folder = modules(src)
    deps = dependencies(mods)
    allowed = [] if strict else [set(a) for a in ALLOWED]
    failed = False
    for component in cycles(mods.keys(), deps):
        if any(set(component) <= a for a in allowed):
            continue
        failed = True
        print("include cycle among %d files of src/: %s" % (len(component), " ".join(component)))
        print("\n".join(explain(component, deps)))
    folder_deps = {}
    for a, targets in deps.items():
        for b in targets:
            if folder[a] != folder[b]:
                folder_deps.setdefault(folder[a] or ".", set()).add(folder[b] or ".")
    for component in cycles(set(folder_deps) | {f for s in folder_deps.values() for f in s},
                            folder_deps):
        failed = True
        print("include cycle among the folders of src/: %s" % " ".join(component))
        for a in component:
            for b in sorted(folder_deps.get(a, set()) & set(component)):
                why = sorted("%s -> %s" % (m, t) for m in mods if (folder[m] or ".") == a
                             for t in deps.get(m, ()) if (folder[t] or ".") == b)
                print("  %s -> %s: %s" % (a, b, ", ".join(why[:6])))
    if failed:
        print("Dependencies in src/ must point one way (docs/architecture.md, Layers).")
        return 1
    print("include-cycle check: no cycle among %d modules of src/%s" %
          (len(mods), "" if strict or not ALLOWED else
           " beyond the %d listed as still to untie" % len(ALLOWED)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

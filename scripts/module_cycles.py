#!/usr/bin/env python3
"""Finds module cycles inside each crate: edges are the `crate::`, `super::` and `self::` paths
(and, in a file with child modules, paths starting with a child's name) that one source file
uses to reach another; comments are ignored. Prints each strongly connected component of more
than one file. Usage: scripts/module_cycles.py CRATE_DIR...; exit status 1 when a cycle is found."""
import os
import re
import sys


def modules(src):
    """Maps module paths (tuples) to files, for the files under `src`."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(root, f)
            rel = os.path.relpath(full, src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                key = ()
            elif rel[-1] == "mod":
                key = tuple(rel[:-1])
            else:
                key = tuple(rel)
            if key == () and rel == ["main"] and () in mods:
                continue
            mods[key] = full
    return mods


PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\}", re.S)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def resolve(mods, base, segs):
    """Longest prefix of base+segs that is a file module."""
    full = tuple(base) + tuple(segs)
    for n in range(len(full), -1, -1):
        if full[:n] in mods:
            return full[:n]
    return None


def edges(mods):
    out = {k: set() for k in mods}
    for key, path in mods.items():
        text = strip_comments(open(path, encoding="utf-8").read())
        is_dir_mod = path.endswith(("mod.rs", "lib.rs", "main.rs"))
        here = list(key) if is_dir_mod else list(key[:-1])  # the module `self::` names in a non-mod file is key itself
        targets = []
        for kind, rest in PATH.findall(text):
            segs = [s for s in rest.split("::") if s and s != "{"]
            if kind == "crate":
                targets.append(resolve(mods, (), segs))
            elif kind == "super":
                parent = list(key[:-1])
                while segs and segs[0] == "super":
                    parent = parent[:-1]
                    segs = segs[1:]
                targets.append(resolve(mods, parent, segs))
            else:
                targets.append(resolve(mods, key, segs))
        for kind, group in USE_GROUP.findall(text):
            base = () if kind == "crate" else (tuple(key[:-1]) if kind == "super" else key)
            for item in re.split(r",", group):
                segs = [s for s in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", item.split(" as ")[0])]
                if segs:
                    targets.append(resolve(mods, base, segs))
        # Paths through a child module, from the file that declares it.
        children = {k[-1] for k in mods if len(k) == len(key) + 1 and k[: len(key)] == key}
        for child in children:
            if re.search(r"(?<![:\w])" + child + r"::", text):
                targets.append(resolve(mods, key, [child]))
        for t in targets:
            if t is not None and t != key and t != ():
                out[key].add(t)
        del here
    return out


def sccs(graph):
    index, low, stack, on, res, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            res.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return [c for c in res if len(c) > 1]


def main():
    found = False
    for crate in sys.argv[1:]:
        mods = modules(os.path.join(crate, "src"))
        graph = edges(mods)
        comps = sccs(graph)
        name = os.path.basename(os.path.normpath(crate))
        if not comps:
            print(f"{name}: no module cycles ({len(mods)} files)")
        for comp in comps:
            found = True
            files = sorted(os.path.relpath(mods[k], crate) for k in comp)
            print(f"{name}: cycle of {len(files)} files: {', '.join(files)}")
            members = set(comp)
            for k in sorted(comp):
                for t in sorted(graph[k] & members):
                    print(f"    {os.path.relpath(mods[k], crate)} -> {os.path.relpath(mods[t], crate)}")
    sys.exit(1 if found else 0)


main()

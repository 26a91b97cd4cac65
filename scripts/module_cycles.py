#!/usr/bin/env python3
"""Finds module cycles inside each crate: edges are the `crate::`, `super::` and `self::` paths
(and, in a file with child modules, paths starting with a child's name) that one source file
uses to reach another; comments are ignored. Prints each strongly connected component of more
than one file.

The crate root (lib.rs) takes part: a path to a name the root re-exports (`pub use m::Name`)
is an edge to the module that defines it, a path to a name the root defines itself is an edge
to the root, and the root's own code (not its `pub use` lines and `mod` declarations) has
edges like any file. So a front page of re-exports is never in a cycle, and a root that holds
code its modules use back is.

Usage: scripts/module_cycles.py [--root-required NAME,...] CRATE_DIR...
A cycle by the older rule (paths to the root dropped) fails (exit 1) in every crate; one that
only the root or a re-export closes fails in the crates named by --root-required, and is
reported for the others.
scripts/module_cycles.py --self-test checks the rules on small made-up crates."""
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


def resolve(mods, base, segs, root=None):
    """Longest prefix of base+segs that is a file module; a path that stops at the crate root
    goes on to the module that defines the name it names (`root`: the root's re-exports and own
    items), or nowhere when the name is neither (an external crate's, a macro)."""
    full = tuple(base) + tuple(segs)
    for n in range(len(full), -1, -1):
        if full[:n] in mods:
            if n == 0 and root is not None:
                rest = full[0] if full else None
                if rest in root["reexports"]:
                    return root["reexports"][rest]
                if rest in root["items"]:
                    return ()
                return None
            return full[:n]
    return None


USE_STMT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", re.S)
ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*"
    r"(?:struct|enum|fn|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)


def flatten_use(tree):
    """`a::{b::C, D as E}` -> [(['a','b','C'], 'C'), (['a','D'], 'E')]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, inner = part.split("{", 1)
                walk(prefix + [h for h in head.split("::") if h], inner[:-1])
                continue
            path, _, alias = part.partition("as")
            segs = prefix + [p for p in path.split("::") if p]
            if segs and segs[-1] not in ("*", "self"):
                out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


def root_names(mods):
    """The crate root's re-exports (name -> defining module) and its own items."""
    if () not in mods:
        return {"reexports": {}, "items": set()}
    text = strip_comments(open(mods[()], encoding="utf-8").read())
    reexports = {}
    for tree in USE_STMT.findall(text):
        for segs, name in flatten_use(tree):
            if segs[0] in ("crate", "self"):
                segs = segs[1:]
            target = resolve(mods, (), segs[:-1]) if segs[:-1] else None
            if target:
                reexports[name] = target
            elif tuple(segs) in mods:
                reexports[name] = tuple(segs)
    # Items at the top level of the root (not inside a `mod tests { … }` block: a rough cut
    # at the first inline module).
    top = text.split("mod tests", 1)[0]
    items = set(ITEM.findall(top))
    return {"reexports": reexports, "items": items}


def edges(mods, through_root=True):
    """The graph; `through_root=False` is the older rule: paths to the root are dropped, and
    the root's own code has no edges."""
    out = {k: set() for k in mods}
    root = root_names(mods) if through_root else None
    for key, path in mods.items():
        text = strip_comments(open(path, encoding="utf-8").read())
        if key == () and not through_root:
            continue
        if key == ():
            # The root's re-exports and module declarations are its front page, not its code.
            text = USE_STMT.sub("", text)
            text = re.sub(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;", "", text, flags=re.M)
        is_dir_mod = path.endswith(("mod.rs", "lib.rs", "main.rs"))
        here = list(key) if is_dir_mod else list(key[:-1])  # the module `self::` names in a non-mod file is key itself
        targets = []
        for kind, rest in PATH.findall(text):
            segs = [s for s in rest.split("::") if s and s != "{"]
            if kind == "crate":
                targets.append(resolve(mods, (), segs, root))
            elif kind == "super":
                parent = list(key[:-1])
                while segs and segs[0] == "super":
                    parent = parent[:-1]
                    segs = segs[1:]
                targets.append(resolve(mods, parent, segs, root))
            else:
                targets.append(resolve(mods, key, segs, root))
        for kind, group in USE_GROUP.findall(text):
            base = () if kind == "crate" else (tuple(key[:-1]) if kind == "super" else key)
            for segs, _ in flatten_use(group):
                targets.append(resolve(mods, base, segs, root))
        # Paths through a child module, from the file that declares it.
        children = {k[-1] for k in mods if len(k) == len(key) + 1 and k[: len(key)] == key}
        for child in children:
            if re.search(r"(?<![:\w])" + child + r"::", text):
                targets.append(resolve(mods, key, [child]))
        for t in targets:
            if t is not None and t != key and (through_root or t != ()):
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


def check(crate, root_required):
    """Prints the crate's cycles; whether one of them fails the check. Every crate fails on a
    cycle by the older rule (root dropped); a crate in `root_required` also on one found with
    the root and the re-exports resolved, which is reported for the others."""
    mods = modules(os.path.join(crate, "src"))
    name = os.path.basename(os.path.normpath(crate))
    required = name in root_required
    old = {frozenset(c) for c in sccs(edges(mods, through_root=False))}
    graph = edges(mods)
    comps = sccs(graph)
    failed = bool(old)
    if not comps and not old:
        print(f"{name}: no module cycles ({len(mods)} files)")
    for comp in comps:
        fails = required or any(set(c) <= set(comp) for c in old)
        failed |= fails
        files = sorted(os.path.relpath(mods[k], crate) for k in comp)
        what = "cycle through the crate root" if () in comp else "cycle"
        verdict = "" if fails else " (through re-exports or the root: reported, not failed)"
        print(f"{name}: {what} of {len(files)} files{verdict}: {', '.join(files)}")
        members = set(comp)
        for k in sorted(comp):
            for t in sorted(graph[k] & members):
                print(f"    {os.path.relpath(mods[k], crate)} -> {os.path.relpath(mods[t], crate)}")
    return failed


def self_test():
    """The rules on made-up crates: a front page of re-exports is no cycle; a root whose code a
    module uses back, through a re-export or its own item, is."""
    import tempfile

    def crate(files):
        d = tempfile.mkdtemp()
        for rel, text in files.items():
            full = os.path.join(d, "src", rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").write(text)
        return d

    front = crate({
        "lib.rs": "mod a;\nmod b;\npub use a::Alpha;\npub use b::{Beta, helper as h};\n",
        "a.rs": "use crate::Beta;\npub struct Alpha(Beta);\n",
        "b.rs": "pub struct Beta;\npub fn helper() {}\n",
    })
    hub = crate({
        "lib.rs": "mod a;\npub use a::Alpha;\npub struct Config;\npub fn run() { a::go(); }\n",
        "a.rs": "use crate::Config;\npub struct Alpha;\npub fn go() { let _ = Config; }\n",
    })
    twins = crate({
        "lib.rs": "mod a;\nmod b;\npub use a::Alpha;\n",
        "a.rs": "use crate::b::Beta;\npub struct Alpha;\n",
        "b.rs": "use crate::Alpha;\npub struct Beta;\n",
    })
    direct = crate({
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::b::Beta;\npub struct Alpha;\n",
        "b.rs": "use crate::a::Alpha;\npub struct Beta;\n",
    })
    assert not check(front, set()), "a front page of re-exports is no cycle"
    assert not check(front, {os.path.basename(front)}), "not even where required"
    assert check(hub, {os.path.basename(hub)}), "root code used back is a cycle"
    assert not check(hub, set()), "a root cycle is only reported unless required"
    assert check(twins, {os.path.basename(twins)}), "a cycle through a re-export is one"
    assert not check(twins, set()), "reported only, unless required"
    assert check(direct, set()), "a direct cycle fails in every crate"
    print("module_cycles self-test: ok")


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        self_test()
        return
    root_required = set()
    if args and args[0] == "--root-required":
        root_required = set(args[1].split(","))
        args = args[2:]
    found = False
    for crate in args:
        found |= check(crate, root_required)
    sys.exit(1 if found else 0)


main()

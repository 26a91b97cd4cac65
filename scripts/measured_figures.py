#!/usr/bin/env python3
"""Checks that every measured figure of the documentation names the commit that recorded it, and
is marked `(script changed since)` exactly when the script that measured it changed after that.

    scripts/measured_figures.py [ROOT]      check the clone at ROOT (default: this one)
    scripts/measured_figures.py --self-test  run the checks on a throw-away repository

Measured sections: each `## ` section of docs/guide/*.md and docs/kernelbench/*.md whose
heading starts with "Measured" or "Results", and every section of docs/kernelbench/README.md
(a file of measurements). In them, outside code blocks:

* every table has a `commit` column; each row's cell there is `abc1234` (7 to 40 hex digits in
  backticks), followed by ` (script changed since)` when it is marked;
* a figure paragraph (one that gives a date YYYY-MM-DD, the first paragraph under a heading that
  gives one, or one that already names a commit as below) names its commit as
  commit `abc1234`, followed by ` (script changed since)` when it is marked;
* each commit must be in HEAD's history, so a shallow clone fails (CI clones are full);
* a figure's scripts are those its text names: the paths `scripts/…`, `…/examples/*.rs`,
  `…/benches/*.rs` and any tracked `*.sh`; `cargo run|bench [-p CRATE] --example|--bench NAME`
  and a bare `NAME` in backticks, resolved through `cargo metadata` (or, without cargo, the
  usual folders); one level deeper, the scripts a shell or Python script names outside its
  comments (scripts/lib.sh, the Kernel Tuner helpers). A table row also takes the scripts of
  the figure paragraph directly above its table, and a row that says "the same" and names no
  script those of the row above;
* when `git diff COMMIT HEAD -- SCRIPTS` is not empty the figure must carry the mark; when it is
  empty (or the figure names no script) it must not, so a mark is always true.

Exits 1 with one message per problem, 0 with a one-line summary.
"""
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

DOCS = ("docs/guide/*.md", "docs/kernelbench/*.md")
WHOLE_FILE = {"docs/kernelbench/README.md"}  # every section of it is a measurement
MEASURED = re.compile(r"^## +(Measured|Results)\b")
HEADING = re.compile(r"^(#{1,6}) +(.*)")
FENCE = re.compile(r"^\s*(```|~~~)")
ITEM = re.compile(r"^\s*(?:[*+-]|\d+\.) ")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
LINK_TARGET = re.compile(r"\]\([^)]*\)")  # a date in a link's #anchor is not the paragraph's date
MARK = "(script changed since)"
CELL = re.compile(r"^`([0-9a-f]{7,40})`( \(script changed since\))?$")
PROSE = re.compile(r"\bcommit `([0-9a-f]{7,40})`( \(script changed since\))?")
INLINE = re.compile(r"`([^`]+)`")
PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:sh|py|rs))\b")
CARGO = re.compile(r"\bcargo +(?:run|bench)\b(.*)")
SCRIPT_NAME = re.compile(r"(?<![\w.-])([\w-]+\.(?:sh|py))\b")


@dataclass
class Figure:
    path: str
    line: int
    kind: str  # "row" or "paragraph"
    text: str
    commit: str | None = None
    marked: bool = False
    scripts: set = field(default_factory=set)


def git(root, *args, check=True):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=check)


def cells(row):
    """A table row's cells; `\\|` is a pipe inside a cell, as on GitHub."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def blocks(path, text):
    """(kind, first line, lines) of each heading, paragraph, table and code block of the file's
    measured sections, in order; kind is "heading", "paragraph", "table" or "code". A list item
    starts a paragraph of its own."""
    measured, fence, current, out = path in WHOLE_FILE, None, None, []
    for n, line in enumerate(text.splitlines(), 1):
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
            continue
        heading = HEADING.match(line)
        if heading and len(heading.group(1)) == 2:
            measured = path in WHOLE_FILE or bool(MEASURED.match(line))
        if FENCE.match(line):
            fence = FENCE.match(line).group(1)
            kind = "code"
        else:
            kind = "heading" if heading else "table" if line.lstrip().startswith("|") else "paragraph"
        if not line.strip():
            current = None
        elif (current is None or current[0] != kind or kind in ("heading", "code")
              or (kind == "paragraph" and ITEM.match(line))):
            current = (kind, n, [line])
            if measured:
                out.append(current)
        else:
            current[2].append(line)
    return out


class Resolver:
    """Maps a figure's text to the tracked scripts, examples and benches it names."""

    def __init__(self, root):
        self.root = root
        self.tracked = set(git(root, "ls-files").stdout.splitlines())
        self.targets = {}  # (kind, name) -> [(package, path, is the root package)]
        try:  # read once; `--no-deps` needs no network and builds nothing
            meta = json.loads(subprocess.run(
                ["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=root,
                capture_output=True, text=True, check=True).stdout)
            top = Path(meta["workspace_root"]) / "Cargo.toml"
            for package in meta["packages"]:
                for t in package["targets"]:
                    for kind in set(t["kind"]) & {"example", "bench"}:
                        rel = Path(t["src_path"]).relative_to(meta["workspace_root"]).as_posix()
                        entry = (package["name"], rel, Path(package["manifest_path"]) == top)
                        self.targets.setdefault((kind, t["name"]), []).append(entry)
        except (OSError, subprocess.CalledProcessError, ValueError):  # no cargo: the usual folders
            for rel in sorted(self.tracked):
                m = re.match(r"^(?:([\w.-]+)/)?(examples|benches)/([\w-]+)\.rs$", rel)
                if m:
                    kind = "example" if m.group(2) == "examples" else "bench"
                    self.targets.setdefault((kind, m.group(3)), []).append((m.group(1), rel, not m.group(1)))

    def target(self, kind, name, package=None):
        found = [t for t in self.targets.get((kind, name), []) if package in (None, t[0])]
        if package is None and len(found) > 1:
            found = [t for t in found if t[2]] or found  # `cargo run --example` at the root
        return {t[1] for t in found}

    def scripts(self, text):
        found = set()
        for m in PATH.finditer(text):
            p = m.group(1)
            if p in self.tracked and (p.startswith("scripts/") or p.endswith(".sh")
                                      or re.search(r"(^|/)(examples|benches)/[^/]+\.rs$", p)):
                found.add(p)
        for span in INLINE.findall(text):
            cargo = CARGO.search(span)
            if cargo:
                args = cargo.group(1)
                package = re.search(r"(?:-p|--package)[ =]([\w-]+)", args)
                for kind, name in re.findall(r"--(example|bench)[ =]([\w-]+)", args):
                    found |= self.target(kind, name, package and package.group(1))
            elif re.fullmatch(r"[\w-]+", span):  # `qd_bench`: an example or bench by name
                named = self.target("example", span) | self.target("bench", span)
                found |= named if len(named) == 1 else set()
            elif re.fullmatch(r"[\w.-]+\.(?:sh|py)", span):  # `redo.sh`: a script by its file name
                named = {p for p in self.tracked if Path(p).name == span}
                found |= named if len(named) == 1 else set()
        for script in [p for p in found if p.endswith((".sh", ".py"))]:
            found |= self.called(script)
        return found

    def called(self, script):
        """The tracked scripts a script names outside its comments (sourced or run)."""
        body = "\n".join(l for l in (self.root / script).read_text(encoding="utf-8").splitlines()
                         if not l.lstrip().startswith("#"))
        here = str(Path(script).parent)
        return {f"{d}/{n}" for n in SCRIPT_NAME.findall(body) for d in {here, "scripts"}
                if f"{d}/{n}" in self.tracked and f"{d}/{n}" != script}


def figures(path, text, resolver, errors):
    """The figures (rows and figure paragraphs) of one file's measured sections; the tables."""
    found, tables, dated_heading, above = [], [], False, None
    for kind, n, lines in blocks(path, text):
        joined = " ".join(l.strip() for l in lines)
        dated = bool(DATE.search(LINK_TARGET.sub("]", joined)))
        caption, above = above, None  # a table's caption: the figure paragraph right above it
        if kind == "heading":
            dated_heading = dated
            continue
        if kind == "paragraph" and (dated or dated_heading or PROSE.search(joined)):
            m = PROSE.search(joined)
            above = Figure(path, n, "paragraph", joined, m and m.group(1), bool(m and m.group(2)),
                           resolver.scripts(joined))
            found.append(above)
            if not m:
                errors.append(f"{path}:{n}: a dated figure paragraph names no commit; add "
                              f"commit `abc1234` (the commit that records the figure)")
        elif kind == "table":  # (header line, header cells, rows below the separator, caption)
            tables.append((n, [c.lower() for c in cells(lines[0])], list(enumerate(lines, n))[2:], caption))
        dated_heading = False
    for line, header, rows, caption in tables:
        if "commit" not in header:
            errors.append(f"{path}:{line}: a table of measured figures has no `commit` column")
            continue
        column, previous = header.index("commit"), set()
        for n, row in rows:
            row_cells = cells(row)
            cell = row_cells[column] if column < len(row_cells) else ""
            m = CELL.match(cell)
            if not m:
                errors.append(f"{path}:{n}: the commit cell must read `abc1234` or `abc1234` "
                              f"{MARK}, not {cell!r}")
            own = resolver.scripts(row)
            if not own and any(c.startswith("the same") for c in row_cells):
                own = previous  # "the same with `--median-ms 5`": the row above's command
            previous = own
            found.append(Figure(path, n, "row", row, m and m.group(1), bool(m and m.group(2)),
                                own | (caption.scripts if caption else set())))
    return found, tables


def check(root):
    """Problems found in the clone at root, and the summary line."""
    root, errors = Path(root), []
    if git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        return [f"{root}: a shallow clone: the commits the figures name are not all in it; "
                f"check in a full clone (git fetch --unshallow)"], ""
    resolver, docs = Resolver(root), []
    for pattern in DOCS:
        docs += sorted(root.glob(pattern))
    all_figures, all_tables = [], []
    for doc in docs:
        rel = doc.relative_to(root).as_posix()
        found, tables = figures(rel, doc.read_text(encoding="utf-8"), resolver, errors)
        all_figures, all_tables = all_figures + found, all_tables + tables
    known, changed = {}, {}
    for fig in all_figures:
        where = f"{fig.path}:{fig.line}"
        if not fig.commit:
            continue
        if fig.commit not in known:  # an object of the clone, and in HEAD's history
            known[fig.commit] = all(git(root, *args, check=False).returncode == 0 for args in (
                ("cat-file", "-e", f"{fig.commit}^{{commit}}"),
                ("merge-base", "--is-ancestor", fig.commit, "HEAD")))
        if not known[fig.commit]:
            errors.append(f"{where}: commit {fig.commit} is not in HEAD's history (a typo, an "
                          f"unpushed or rewritten commit, or a clone without it)")
            continue
        key = (fig.commit, tuple(sorted(fig.scripts)))
        if key not in changed:  # `--name-only` is `--quiet` with the names of what changed
            changed[key] = git(root, "diff", "--name-only", fig.commit, "HEAD", "--",
                               *key[1]).stdout.split() if fig.scripts else []
        files = changed[key]
        if files and not fig.marked:
            errors.append(f"{where}: its script changed since {fig.commit}: {', '.join(files)}\n"
                          f"    see: git diff {fig.commit} HEAD -- {' '.join(files)}\n"
                          f"    fix: re-measure, or mark the figure {MARK} after its commit")
        elif fig.marked and not files:
            what = ", ".join(sorted(fig.scripts)) or "it names no script"
            errors.append(f"{where}: marked {MARK}, but nothing changed since {fig.commit} "
                          f"({what}): remove the mark")
    rows = [f for f in all_figures if f.kind == "row"]
    paragraphs = [f for f in all_figures if f.kind == "paragraph"]
    counts = [f"{len(fs)} {name} ({sum(bool(f.scripts) for f in fs)} with scripts, "
              f"{sum(f.marked for f in fs)} marked)" for name, fs in (("rows", rows), ("figure paragraphs", paragraphs))]
    summary = (f"measured figures: {len(all_tables)} tables, {counts[0]}, {counts[1]} in {len(docs)} "
               f"files; each names its commit, and a mark {MARK} is on each figure whose script changed")
    return errors, summary


def self_test():
    """Builds a repository with a script changed after a figure was recorded, and checks the
    four cases that matter: stale unmarked, stale marked, fresh marked, no commit column."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def commit(message):
            git(root, "add", "-A")
            git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                "-c", "commit.gpgsign=false", "commit", "-qm", message)
            return git(root, "rev-parse", "--short=7", "HEAD").stdout.strip()

        git(root, "init", "-q")
        (root / "scripts").mkdir()
        (root / "docs/guide").mkdir(parents=True)
        (root / "scripts/lib.sh").write_text("x=1\n")
        (root / "scripts/bench.sh").write_text('. "$(dirname "$0")/lib.sh"\necho 1\n')
        (root / "scripts/other.sh").write_text("echo 2\n")
        old = commit("bench")
        (root / "scripts/lib.sh").write_text("x=2\n")  # bench.sh sources it: bench.sh's figures go stale
        new = commit("lib changed")

        def run(body):
            (root / "docs/guide/01-a.md").write_text(f"# A\n\n## Measured\n\n{body}\n")
            return check(root)[0]

        table = "| figure | command | date | commit |\n|---|---|---|---|\n"
        row = "| 1.5 s | `scripts/{}.sh` | 2026-12-01 | `{}`{} |"
        cases = {  # name: (the Measured section, what the one problem says, or None for none)
            "unmarked stale row fails": (table + row.format("bench", old, ""), "its script changed"),
            "marked stale row passes": (table + row.format("bench", old, " " + MARK), None),
            "marked fresh row fails": (table + row.format("other", old, " " + MARK), "nothing changed"),
            "fresh row passes": (table + row.format("bench", new, ""), None),
            "missing commit column fails": ("| figure | date |\n|---|---|\n| 1.5 s | 2026-12-01 |", "no `commit` column"),
            "unknown commit fails": (table + row.format("other", "abcdef0", ""), "not in HEAD's history"),
            "dated paragraph without commit fails": ("`scripts/other.sh`: 1.5 s (2026-12-01).", "names no commit"),
            "marked stale paragraph passes": (f"`scripts/bench.sh`: 1.5 s (2026-12-01, commit `{old}` {MARK}).", None),
            "a caption's script reaches its table": (
                f"`scripts/bench.sh` (2026-12-01, commit `{new}`):\n\n{table}| 1.5 s | `--x` | 2026-12-01 | `{old}` |",
                "its script changed"),
        }
        results = {}
        for name, (body, expected) in cases.items():
            errors = run(body)
            results[name] = not errors if expected is None else len(errors) == 1 and expected in errors[0]
        git(root, "clone", "-q", "--depth", "1", f"file://{root}", str(root / "shallow"))
        results["a shallow clone fails"] = "shallow clone" in " ".join(check(root / "shallow")[0])
        for name, ok in results.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
        return all(results.values())


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return 0 if self_test() else 1
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    errors, summary = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} problem(s) with the measured figures (docs/guide/11-tests-and-ci.md)")
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

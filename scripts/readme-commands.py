#!/usr/bin/env python3
"""Runs the command blocks of the README and of the guide (docs/guide/*.md) as printed, at small
sizes, so that a renamed flag, a moved file or a lost executable bit in them fails CI.

    scripts/readme-commands.py [--list] [NAME ...]

Every fenced `sh` block (also `bash`, `shell`, `console`) of those files carries a marker on
the line before it (blank lines may stand between them):

    <!-- ci: NAME -->        CI runs the block (NAME is unique across the files)
    <!-- ci-same: NAME -->   the block's text equals block NAME's, which CI runs
    <!-- ci-skip: REASON --> not run (it needs a GPU, an API key, several machines, or many
                              minutes); the reason is printed

A block without a marker, a marker without a block, a duplicate NAME or a `ci-same` block
that differs from its original fails here. The README's `quickstart` and `tests` blocks are
run verbatim by .ci/run's own steps (scripts/readme-block.py), not here: nothing runs twice.

The other `ci:` blocks run in file order (README.md, then the chapters by name) with bash
(-euo pipefail) from the repository's root, where `kf` stands for `cargo run --release --bin
kf --`, after a few exact rewrites that only shrink the work (problem sizes, budgets) or keep
the run's output out of the way: every rewrite must match its block exactly once, so a
documentation edit that changes one of these commands fails here until REWRITES is updated.
Everything else runs as printed. Needs the runtimes of scripts/setup.sh, the LLM test server
(scripts/llm-server.sh) and the quick start's run directory (runs/gemm); the cluster block
starts the servers of scripts/dist-servers.sh.

`--list` prints every block and what CI does with it, and checks the markers, running nothing;
NAMEs run only those blocks.
"""
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND_LANGUAGES = {"sh", "bash", "shell", "console"}
# Run verbatim by .ci/run's own steps.
RUN_ELSEWHERE = {"quickstart", "tests"}
MARKER = re.compile(r"^<!--\s*ci(-same|-skip)?:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)")

# `kf` as the guide defines it (`cargo install --path .` puts the same program on PATH).
PRELUDE = 'kf() { cargo run --quiet --release --bin kf -- "$@"; }\n'

# (old, new): exact text of a block, and what CI runs instead.
REWRITES = {
    "tune": [
        # kf tune at 128³ with 4 configurations instead of 1024³ with 30.
        ("--size M=1024,N=1024,K=1024", "--size M=128,N=128,K=128"),
        ("--budget 30", "--budget 4"),
    ],
    "task-file": [
        ("scaled_swish_fast.toml --budget 8", "scaled_swish_fast.toml --budget 4"),
        (
            "--evaluations 12 \\\n    --tune-budget 8 --size ROWS=512,COLS=256",
            "--evaluations 4 \\\n    --tune-budget 2 --size ROWS=128,COLS=64 --no-progress",
        ),
    ],
    "kernelbench": [
        ("--evaluations 4 --time 100 --tasks 19,23,51,1", "--evaluations 2 --time 100 --tasks 19"),
    ],
    "llm-local": [
        ("--evaluations 6 \\\n  --tune-budget 1", "--evaluations 3 --no-progress \\\n  --tune-budget 1"),
    ],
    "cluster": [
        # A short distributed search, written beside the other CI outputs.
        (
            "--size M=512,N=512,K=512 --distributed",
            "--size M=128,N=128,K=128 --distributed --evaluations 8 --tune-budget 1 "
            "--no-progress --out {tmp}/cluster-search",
        ),
    ],
}

# What the blocks write under runs/ (removed first, so that a search starts afresh instead of
# resuming an earlier run of this script). runs/gemm is the quick start's, which they read.
OUTPUTS = ["runs/swish", "runs/swish-llm", "runs/kernelbench", "runs/my-kernels", "runs/tune"]


class Block:
    def __init__(self, path: Path, line: int, language: str, text: str, kind: str, value: str):
        self.path, self.line, self.language, self.text = path, line, language, text
        self.kind, self.value = kind, value  # kind: run | same | skip | None (no marker)

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs/guide").glob("*.md"))


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, each with the marker before it (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i, pending = [], 0, None
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line.strip())
        if m:
            if pending:
                raise SystemExit(f"{path.relative_to(ROOT)}:{pending[0]}: a marker not followed by a fenced block")
            kind = {None: "run", "-same": "same", "-skip": "skip"}[m.group(1)]
            if not m.group(2):
                raise SystemExit(f"{path.relative_to(ROOT)}:{i + 1}: an empty marker")
            pending = (i + 1, kind, m.group(2))
            i += 1
            continue
        f = FENCE.match(line)
        # A backtick fence's info string has no backtick (CommonMark): "```` ```toml ````" at
        # the start of a wrapped line is inline code, not a fence.
        if f and f.group(1)[0] == "`" and "`" in line[len(f.group(1)) :]:
            f = None
        if f:
            fence, language = f.group(1), f.group(2).split(",")[0].lower()
            start, body, i = i + 1, [], i + 1
            while i < len(lines) and not (
                lines[i].startswith(fence[0] * len(fence)) and not lines[i].strip(fence[0]).strip()
            ):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise SystemExit(f"{path.relative_to(ROOT)}:{start}: a fenced block that is not closed")
            kind, value = (pending[1], pending[2]) if pending else (None, "")
            found.append(Block(path, start, language, "\n".join(body) + "\n", kind, value))
            pending = None
        elif line.strip() and pending:
            raise SystemExit(f"{path.relative_to(ROOT)}:{pending[0]}: a marker not followed by a fenced block")
        i += 1
    if pending:
        raise SystemExit(f"{path.relative_to(ROOT)}:{pending[0]}: a marker not followed by a fenced block")
    return found


def checked_blocks() -> list[Block]:
    """Every command block, after checking the markers."""
    all_blocks = [b for path in documents() for b in blocks(path)]
    errors, names = [], {}
    for b in all_blocks:
        if b.kind is None:
            if b.language in COMMAND_LANGUAGES:
                errors.append(
                    f"{b.where()}: a `{b.language}` block without a marker "
                    "(`<!-- ci: NAME -->`, `<!-- ci-same: NAME -->` or `<!-- ci-skip: REASON -->`)"
                )
            continue
        if b.kind == "run":
            if b.value in names:
                errors.append(f"{b.where()}: block name `{b.value}` is also used at {names[b.value].where()}")
            names[b.value] = b
    for b in all_blocks:
        if b.kind == "same":
            original = names.get(b.value)
            if original is None:
                errors.append(f"{b.where()}: `ci-same: {b.value}` names no `ci:` block")
            elif original.text != b.text:
                errors.append(f"{b.where()}: differs from block `{b.value}` ({original.where()}); keep them identical")
    for name in REWRITES:
        if name not in names:
            errors.append(f"scripts/readme-commands.py: REWRITES names `{name}`, which no block is called")
    if errors:
        raise SystemExit("\n".join(errors))
    return [b for b in all_blocks if b.kind is not None]


def commands(block: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    out, current = [], ""
    for line in block.splitlines():
        current += line
        if line.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip():
            out.append(current)
        current = ""
    return out


def rewrite(name: str, block: str, tmp: str) -> str:
    for old, new in REWRITES.get(name, []):
        n = block.count(old)
        if n != 1:
            raise SystemExit(
                f"block `{name}`: `{old}` occurs {n} times (expected once); "
                "update scripts/readme-commands.py together with the documentation"
            )
        block = block.replace(old, new.format(tmp=tmp))
    return block


def run(b: Block, tmp: str) -> None:
    block = rewrite(b.value, b.text, tmp)
    # Background jobs of the block (the cluster's `kf worker &`) end with it.
    script = PRELUDE + "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(commands(block)) + "\n"
    print(f"== block `{b.value}` ({b.where()}{', at small sizes' if b.value in REWRITES else ''}):\n{block}", flush=True)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        raise SystemExit(f"block `{b.value}` ({b.where()}) failed with exit status {result.returncode}")
    check(b.value, result.stdout, tmp)


def check(name: str, stdout: str, tmp: str) -> None:
    """What a block must have produced, beyond its exit status."""
    if name == "one-kernel":
        if '"status": "correct"' not in stdout and '"status":"correct"' not in stdout:
            raise SystemExit("`kf eval` of block `one-kernel` did not print a correct evaluation")
    if name == "task-file" and "wrong_shape" not in stdout:
        raise SystemExit("block `task-file`: the half-work kernel was not rejected as wrong_shape")
    if name == "cluster":
        report = Path(tmp) / "cluster-search/report.json"
        if not report.is_file():
            raise SystemExit(f"the distributed search wrote no {report}")
        r = json.loads(report.read_text())
        if not r.get("best_gflops"):
            raise SystemExit("the distributed search of block `cluster` found no correct kernel")
        print(f"distributed search: best {r['best_gflops']:.1f} GFLOP/s, {r['evaluations']} evaluations")
    if name == "export" and not (ROOT / "runs/my-kernels/Cargo.toml").is_file():
        raise SystemExit("block `export` wrote no runs/my-kernels/Cargo.toml")


def main() -> None:
    args = sys.argv[1:]
    listing = "--list" in args
    wanted = [a for a in args if a != "--list"]
    command_blocks = checked_blocks()
    known = {b.value for b in command_blocks if b.kind == "run"}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"no block named {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    to_run = []
    for b in command_blocks:
        if b.kind == "skip":
            print(f"SKIPPED: block at {b.where()}: {b.value}")
        elif b.kind == "same":
            print(f"same as `{b.value}`: block at {b.where()}")
        elif b.value in RUN_ELSEWHERE:
            print(f"run by .ci/run's own step: `{b.value}` ({b.where()})")
        elif not wanted or b.value in wanted:
            print(f"{'runs' if not listing else 'would run'}: `{b.value}` ({b.where()})")
            to_run.append(b)
    if listing:
        return
    for out in OUTPUTS:
        shutil.rmtree(ROOT / out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kf-doc-commands-") as tmp:
        for b in to_run:
            run(b, tmp)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs the README's command blocks (`<!-- ci: commands -->`, `<!-- ci: cluster -->`) at small
sizes, so that a renamed flag, a moved file or a lost executable bit in them fails CI.

    scripts/readme-commands.py [commands] [cluster]

Each block is taken from README.md (scripts/readme-block.py) and run with bash, after a few
exact rewrites that only shrink the work (problem sizes, budgets) or keep the run's output out
of the way: every rewrite must match the block exactly once, so a README edit that changes one
of these commands fails here until this list is updated. Everything else runs as printed.

`kf tune replay` reads `../shared/tuning-spaces` (the project's shared folder beside the
checkout; KF_TUNING_SPACES names another folder, as for kf-tune's tests): without it that
command is skipped, unless KF_REQUIRE_TUNING_SPACES=1. Needs the
runtimes of scripts/setup.sh; the cluster block starts the servers of scripts/dist-servers.sh.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = "../shared/tuning-spaces"
SHARED_CACHE = SHARED_DIR + "/gemm_RTX_3090.json.gz"

# (old, new): exact text of the README block, and what CI runs instead.
REWRITES = {
    "commands": [
        # kf tune at 128³ with 4 configurations instead of 1024³ with 30.
        ("--size M=1024,N=1024,K=1024", "--size M=128,N=128,K=128"),
        ("--budget 30", "--budget 4"),
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


def readme_block(name: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/readme-block.py"), name],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


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
                f"README block `{name}`: `{old}` occurs {n} times (expected once); "
                "update scripts/readme-commands.py together with the README"
            )
        block = block.replace(old, new.format(tmp=tmp))
    return block


def run(name: str, tmp: str) -> None:
    block = rewrite(name, readme_block(name), tmp)
    spaces = os.environ.get("KF_TUNING_SPACES")
    if spaces and SHARED_CACHE in block:
        block = block.replace(SHARED_DIR, spaces)
    cache = Path(spaces) / Path(SHARED_CACHE).name if spaces else ROOT / SHARED_CACHE
    lines = commands(block)
    if name == "commands" and spaces is None and SHARED_CACHE in block and not cache.exists():
        if os.environ.get("KF_REQUIRE_TUNING_SPACES") == "1":
            raise SystemExit(f"KF_REQUIRE_TUNING_SPACES=1 but {ROOT / SHARED_CACHE} is missing")
        reason = f"no {SHARED_CACHE} beside the checkout"
        print(f"SKIPPED: `kf tune replay` ({reason})", flush=True)
        # Recorded as the tests record theirs (kf_core::testing::skip), for .ci/run's list.
        if os.environ.get("KF_SKIP_LOG"):
            with open(os.environ["KF_SKIP_LOG"], "a", encoding="utf-8") as log:
                log.write(f"TUNING_SPACES\treadme-commands.py::kf tune replay\t{reason}\n")
        lines = [c for c in lines if SHARED_CACHE not in c]
    # Background jobs of the block (the cluster's `kf worker &`) end with it.
    script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(lines) + "\n"
    print(f"== README block `{name}` (at small sizes):\n{block}", flush=True)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        raise SystemExit(f"README block `{name}` failed with exit status {result.returncode}")
    check(name, result.stdout, tmp)


def check(name: str, stdout: str, tmp: str) -> None:
    """What the block must have produced."""
    if name == "commands":
        if '"status": "correct"' not in stdout and '"status":"correct"' not in stdout:
            raise SystemExit("`kf eval` of the README did not print a correct evaluation")
    if name == "cluster":
        report = Path(tmp) / "cluster-search/report.json"
        if not report.is_file():
            raise SystemExit(f"the distributed search wrote no {report}")
        import json

        r = json.loads(report.read_text())
        if not r.get("best_gflops"):
            raise SystemExit("the distributed search of the README found no correct kernel")
        print(f"distributed search: best {r['best_gflops']:.1f} GFLOP/s, {r['evaluations']} evaluations")


def main() -> None:
    names = sys.argv[1:] or ["commands", "cluster"]
    with tempfile.TemporaryDirectory(prefix="kf-readme-") as tmp:
        for name in names:
            run(name, tmp)


if __name__ == "__main__":
    main()

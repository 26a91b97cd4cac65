#!/usr/bin/env python3
"""Prints a command block of README.md, so that CI runs what the README says, verbatim.

    scripts/readme-block.py NAME [README]

The block is the fenced code block right after the line `<!-- ci: NAME -->` (blank lines may
stand between them). Exits with an error when the marker is missing, appears twice, or is not
followed by a fenced block: a README edit that drops a block CI runs fails CI.
"""
import sys
from pathlib import Path


def block(text: str, name: str) -> str:
    marker = f"<!-- ci: {name} -->"
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(at) != 1:
        raise SystemExit(f"README: {len(at)} lines `{marker}`, expected exactly one")
    i = at[0] + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not lines[i].startswith("```"):
        raise SystemExit(f"README: `{marker}` is not followed by a fenced code block")
    body = []
    for line in lines[i + 1 :]:
        if line.startswith("```"):
            if not "".join(body).strip():
                raise SystemExit(f"README: the block after `{marker}` is empty")
            return "\n".join(body) + "\n"
        body.append(line)
    raise SystemExit(f"README: the block after `{marker}` is not closed")


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    readme = Path(sys.argv[2] if len(sys.argv) == 3 else Path(__file__).parent.parent / "README.md")
    sys.stdout.write(block(readme.read_text(encoding="utf-8"), sys.argv[1]))


if __name__ == "__main__":
    main()

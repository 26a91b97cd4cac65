#!/usr/bin/env python3
"""Checks that no link in the repository's Markdown points outside the repository.

    scripts/doc_links.py [ROOT]

Every Markdown file git tracks (README.md, docs/, each crate's README, …) is read, code blocks
and inline code aside, and:

* a link or image (`[text](target)`, `![alt](target)`, `[label]: target`, `<a href>`,
  `<img src>`) must be a relative path that stays inside the repository (no absolute path, no
  `../` out of the clone) and names a file or folder git tracks; a `#fragment` on a Markdown
  target (or alone, for the same file) must name one of its headings (GitHub's anchors);
* no web link: `http://`, `https://`, `ftp://`, `mailto:` and `www.` targets are refused in
  links, images, autolinks (`<https://…>`) and bare URLs in the text (which GitHub and
  crates.io turn into links). A URL may appear in code (a command's argument, such as an LLM
  endpoint), which is not a link;
* a path that leaves the clone is refused in inline code too (`../shared/…`): a reader is
  never told to open a file the repository does not have.

Exits 1 with one line per problem. Runs in well under a second.
"""
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

WEB = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|www\.|//)", re.I)
BARE_URL = re.compile(r"(?:https?|ftp)://[^\s)>\]]+|\bwww\.[a-z0-9-]+\.[a-z0-9.-]+", re.I)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
AUTOLINK = re.compile(r"<((?:[a-z][a-z0-9+.-]*:|www\.)[^>\s]*)>", re.I)
HTML_ATTR = re.compile(r"<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.I)
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
OUT_OF_TREE = re.compile(r"(?:^|[\s=:'\"(])(\.\./[^\s`'\")]*)")


def tracked(root: Path) -> set[str]:
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
    files = {f for f in out.decode("utf-8").split("\0") if f}
    folders = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    return files | folders


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        if m and not (m.group(1)[0] == "`" and "`" in line.strip()[len(m.group(1)) :]):
            fence = m.group(1)
            continue
        yield n, line


def anchors(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        seen: dict[str, int] = {}
        found = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                a = anchor(m.group(1))
                k = seen.get(a, 0)
                found.add(a if k == 0 else f"{a}-{k}")
                seen[a] = k + 1
        cache[path] = found
    return cache[path]


def check_target(root: Path, md: Path, target: str, files: set[str], cache: dict) -> str | None:
    if not target:
        return "an empty link target"
    if WEB.match(target):
        return f"`{target}` is a web link (the documentation links only to files of the repository)"
    path_part, _, fragment = target.partition("#")
    if path_part.startswith("/"):
        return f"`{target}` is an absolute path"
    dest = (md.parent / path_part).resolve() if path_part else md.resolve()
    try:
        rel = dest.relative_to(root.resolve()).as_posix()
    except ValueError:
        return f"`{target}` points outside the repository"
    if path_part and rel not in files and rel != ".":
        return f"`{target}` names `{rel}`, which git does not track"
    if fragment and dest.suffix == ".md" and dest.is_file():
        if fragment not in anchors(dest, cache):
            return f"`{target}`: `{rel}` has no heading with the anchor `#{fragment}`"
    return None


def check_file(root: Path, md: Path, files: set[str], cache: dict) -> list[str]:
    problems = []
    rel = md.relative_to(root).as_posix()
    for n, line in prose_lines(md.read_text(encoding="utf-8")):
        codes = [m.group(2) for m in INLINE_CODE.finditer(line)]
        prose = INLINE_CODE.sub(" ", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(prose)]
        targets += [m.group(1) for m in HTML_ATTR.finditer(prose)]
        d = REFERENCE_DEF.match(prose)
        if d:
            targets.append(d.group(1))
        for m in AUTOLINK.finditer(prose):
            problems.append(f"{rel}:{n}: `{m.group(1)}` is a web link")
        for t in targets:
            why = check_target(root, md, t, files, cache)
            if why:
                problems.append(f"{rel}:{n}: {why}")
        bare = INLINE_LINK.sub(" ", AUTOLINK.sub(" ", prose))
        for m in BARE_URL.finditer(bare):
            problems.append(f"{rel}:{n}: `{m.group(0)}` is a web address in the text (put it in code if it is a command's argument)")
        for code in codes:
            for m in OUT_OF_TREE.finditer(code):
                p = (md.parent / m.group(1)).resolve()
                # Paths in commands run from the repository's root; either reading must stay inside.
                q = (root / m.group(1)).resolve()
                if not (p.is_relative_to(root.resolve()) and q.is_relative_to(root.resolve())):
                    problems.append(f"{rel}:{n}: `{m.group(1)}` points outside the repository")
    # Commands in code blocks run from the repository's root: no argument may leave it.
    fence, start = None, 0
    for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in line.strip()[len(m.group(1)) :]):
                fence = m.group(1)
            continue
        if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
            fence = None
            continue
        for o in OUT_OF_TREE.finditer(line):
            if not (root / o.group(1)).resolve().is_relative_to(root.resolve()):
                problems.append(f"{rel}:{n}: `{o.group(1)}` (in a code block) points outside the repository")
    return problems


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    files = tracked(root)
    cache: dict = {}
    problems = []
    markdown = sorted(f for f in files if f.endswith(".md") and (root / f).is_file())
    for f in markdown:
        problems += check_file(root, root / f, files, cache)
    if problems:
        print("\n".join(problems), flush=True)
        sys.exit(f"{len(problems)} link(s) in Markdown point outside the repository or nowhere")
    print(f"{len(markdown)} Markdown files: every link stays inside the repository")


if __name__ == "__main__":
    main()

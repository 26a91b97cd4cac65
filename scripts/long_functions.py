#!/usr/bin/env python3
"""Rust functions longer than a limit (issue 63: none over 100 lines but named data tables).

Reads every tracked `.rs` file under the given folders (default: the repository), finds each
`fn` item and counts the lines from its signature to its closing brace (comments and string
literals are skipped when matching braces, so a `{` in a string does not count). Prints the
functions over `--limit` lines, longest first, each with its file, line and length; the
functions of `--tables` (a file of `path::name` lines: data tables written as code, named on
purpose) are listed apart and do not count.

    python3 scripts/long_functions.py                  # the list and the count
    python3 scripts/long_functions.py --library        # library and binary code only
    python3 scripts/long_functions.py --library --at-most 40   # exit 1 over 40 (a ratchet)
    python3 scripts/long_functions.py --self-test
"""

import argparse
import os
import re
import subprocess
import sys

FN = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+\"[^\"]*\")?)\s+)*fn\s+([A-Za-z_][A-Za-z0-9_]*)"
)


def code_only(text):
    """`text` with comments, strings and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 258]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = len(re.match(r"r(#*)\"", text[i:]).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            j = n if end < 0 else end + 1 + hashes
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if nxt == "\\":
                j = text.find("'", i + 2)
                j = n if j < 0 else j + 1
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:
                j = i + 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]) if j > i + 1 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_ATTRIBUTE = re.compile(r"^\s*#\[(?:[a-z_]+::)?test\b")


def functions(text, skip_tests=False):
    """(name, first line, length in lines) of each `fn` with a body in `text` (without the
    `#[test]` functions when `skip_tests`)."""
    code = code_only(text)
    lines = code.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    found = []
    for number, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        if skip_tests and any(TEST_ATTRIBUTE.match(l) for l in lines[max(0, number - 3):number]):
            continue
        start = offsets[number] + m.end()
        # The body's `{`, unless a `;` ends the item first (a trait method without a body).
        depth_paren, j = 0, start
        while j < len(code):
            ch = code[j]
            if ch in "([<":
                depth_paren += 1
            elif ch in ")]>":
                depth_paren = max(0, depth_paren - 1)
            elif ch == ";" and depth_paren == 0:
                j = -1
                break
            elif ch == "{" and depth_paren == 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        end_line = code.count("\n", 0, k) + 1
        found.append((m.group(1), number + 1, end_line - number))
    return found


def tracked_rust_files(root, folders, library):
    listed = subprocess.run(
        ["git", "-C", root, "ls-files", "--", *folders],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    rust = [f for f in listed if f.endswith(".rs")]
    if library:
        # Library and binary code: not tests, examples, benchmarks or fuzz targets.
        def is_library(f):
            parts = f.split("/")
            return not (
                {"tests", "examples", "benches", "fuzz"} & set(parts[:-1])
                or parts[-1] in ("tests.rs", "build.rs")
                or parts[-1].endswith("_tests.rs")
            )
        rust = [f for f in rust if is_library(f)]
    return rust


def self_test():
    sample = '''
pub fn short() -> u32 {
    let s = "}}}{";
    let c = '{';
    // }
    1
}

fn long<'a>(x: &'a str) -> &'a str {
''' + "    let _ = 1;\n" * 120 + '''    x
}

trait T {
    fn no_body(&self);
}
'''
    found = {name: length for name, _, length in functions(sample)}
    assert found["short"] == 6, found
    assert found["long"] == 123, found
    assert "no_body" not in found, found
    print("long_functions self-test: ok")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", default=["."])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--tables", default="scripts/long_functions_tables.txt")
    parser.add_argument("--at-most", type=int)
    parser.add_argument("--library", action="store_true",
                        help="library and binary code only: no tests, examples or benchmarks")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()
    tables = set()
    tables_path = os.path.join(root, args.tables)
    if os.path.exists(tables_path):
        with open(tables_path) as f:
            tables = {line.split("#")[0].strip() for line in f if line.split("#")[0].strip()}
    long, named = [], []
    for path in tracked_rust_files(root, args.folders, args.library):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name, line, length in functions(text, skip_tests=args.library):
            if length > args.limit:
                (named if f"{path}::{name}" in tables else long).append((length, path, line, name))
    long.sort(reverse=True)
    for length, path, line, name in long:
        print(f"{length:5} {path}:{line} {name}")
    for length, path, line, name in sorted(named, reverse=True):
        print(f"{length:5} {path}:{line} {name} (a data table, named in {args.tables})")
    print(f"{len(long)} functions over {args.limit} lines ({len(named)} named data tables apart)")
    if args.at_most is not None and len(long) > args.at_most:
        print(f"more than {args.at_most}: shorten one, or name a data table in {args.tables}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

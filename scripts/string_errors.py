#!/usr/bin/env python3
"""Finds string errors in the library crates' APIs (issue 46: one typed error enum per crate).

Reports every item of non-test library code whose type mentions `Result<…, String>`: function
signatures (return types, and closure types among the parameters, over as many lines as they
take), type aliases (`type R<T> = Result<T, String>`, and then every signature that uses such an
alias), struct fields and statics (`Box<dyn Fn(..) -> Result<_, String>>`), and associated error
types set to `String` (`type Err = String;`, `type Error = String;`). Function bodies are not
items: a local `Result<_, String>` is not reported.

Skipped as tests: items after `#[cfg(test)]` (the whole module, function or impl, tracked by
brace depth), files of a `#[cfg(test)] mod NAME;`, and the folders `tests/`, `benches/`,
`examples/`, `src/bin/` and `fuzz/`. Comments and string literals are ignored.

Usage: scripts/string_errors.py [ROOT] (default: the repository root); scans ROOT/src and
ROOT/kf-*/src. Prints `file:line: signature` per finding and exits 1 if there is any that is not
in ALLOWED below.
"""
import os
import re
import sys

# Files still allowed to have string errors, each with the reason. Keep it empty: a finding in
# a file listed here is printed but does not fail the check.
ALLOWED = {
}

SKIP_DIRS = {"tests", "benches", "examples", "bin", "fuzz", "target"}
STRING_TYPES = {"String", "std::string::String", "alloc::string::String", "::std::string::String"}
CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


TOKEN = re.compile(r"//|/\*|(?<![A-Za-z0-9_])b?r#*\"|\"|'")
STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
BLOCK_COMMENT = re.compile(r"/\*|\*/")


def keep_lines(s):
    return re.sub(r"[^\n]", " ", s)


def blank(text):
    """The text with comments, string and char literals replaced by spaces (newlines and
    offsets kept)."""
    out = []
    i, n = 0, len(text)
    while True:
        m = TOKEN.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        i, tok = m.start(), m.group()
        if tok == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif tok == "/*":
            depth, j = 1, i + 2
            while depth:
                c = BLOCK_COMMENT.search(text, j)
                if not c:
                    j = n
                    break
                depth += 1 if c.group() == "/*" else -1
                j = c.end()
        elif tok.endswith('"') and "r" in tok:
            end = '"' + tok[tok.index("r") + 1:-1]
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
        elif tok == '"':
            rest = STRING_REST.match(text, i + 1)
            j = rest.end() if rest else n
        elif text.startswith("\\", i + 1):
            # A char literal with an escape: '\n', '\'', '\u{1F600}'.
            j = text.find("'", i + 3)
            j = n if j < 0 else j + 1
        elif text.startswith("'", i + 2):
            j = i + 3  # 'x'
        else:
            out.append("'")  # a lifetime
            i += 1
            continue
        out.append(keep_lines(text[i:j]))
        i = j


def skip_item(code, i):
    """The index just past the item starting at `i`: its first `;` or its braced block."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth <= 0:
            return i + 1
        elif c == "{" and depth <= 0:
            return match_brace(code, i)
        i += 1
    return n


BRACE = re.compile(r"[{}]")


def match_brace(code, i):
    """The index just past the `}` that closes the `{` at `i`."""
    depth = 0
    for m in BRACE.finditer(code, i):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return m.end()
    return len(code)


def string_results(code, start, end, aliases):
    """Offsets of `Result<…, String>` (and uses of string-error aliases) in code[start:end]."""
    found = []
    for m in re.finditer(r"(?<![A-Za-z0-9_])Result\s*<", code[start:end]):
        args = generic_args(code, start + m.end())
        if len(args) == 2 and args[1] in STRING_TYPES:
            found.append(start + m.start())
    if aliases:
        pat = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, aliases)) + r")\b")
        for m in pat.finditer(code[start:end]):
            found.append(start + m.start())
    return found


def generic_args(code, i):
    """The top-level arguments of the generic list opening just before `i`, whitespace-collapsed."""
    depth, args, cur = 0, [], []
    n = len(code)
    while i < n:
        c = code[i]
        if code.startswith("->", i):
            cur.append("->")
            i += 2
            continue
        if c in "<([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ">":
            if depth == 0:
                args.append("".join(cur))
                break
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur))
            cur = []
            i += 1
            continue
        elif c in ";{}":
            break
        cur.append(c)
        i += 1
    return [re.sub(r"\s+", "", a) for a in args if a.strip()]


class FileScan:
    def __init__(self, path, text):
        self.path = path
        self.code = blank(text)
        self.test_mods = []  # (name, path attribute or None) of `#[cfg(test)] mod NAME;`
        self.items = []  # (start, end) of non-test item-level text, fn bodies excluded

    def line(self, offset):
        return self.code.count("\n", 0, offset) + 1

    def scan(self):
        self.items = []
        self._walk(0, len(self.code))

    def _walk(self, i, end):
        """Collects item-level spans of code[i:end], skipping test items and fn bodies."""
        code = self.code
        span_start = i
        while i < end:
            if code[i] == "#" and CFG_TEST.match(code, i):
                self.items.append((span_start, i))
                item_end = skip_item(code, code.index("]", i) + 1)
                m = re.search(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;\s*$", code[i:item_end])
                if m:
                    p = re.search(r"#\s*\[\s*path\s*=", code[i:item_end])
                    self.test_mods.append((m.group(1), p is not None))
                i = span_start = item_end
                continue
            m = re.compile(r"(?<![A-Za-z0-9_])fn\b").match(code, i) if code[i] == "f" else None
            if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
                # A function (or a fn-pointer type): its signature is item-level, its body not.
                j, depth = i + 2, 0
                while j < end:
                    c = code[j]
                    if c in "([<" and not code.startswith("->", j - 1):
                        depth += 1
                    elif c in ")]" or (c == ">" and code[j - 1] != "-"):
                        depth -= 1
                    elif depth <= 0 and c in ";{,":
                        break
                    elif depth < 0:
                        break
                    j += 1
                if j < end and code[j] == "{":
                    self.items.append((span_start, j))
                    i = span_start = match_brace(code, j)
                    continue
                i = j
                continue
            i += 1
        self.items.append((span_start, end))


def module_dir(path):
    base = os.path.basename(path)
    if base in ("lib.rs", "main.rs", "mod.rs"):
        return os.path.dirname(path)
    return path[:-3]


def rust_files(root):
    roots = [os.path.join(root, "src")] + sorted(
        os.path.join(root, d, "src") for d in os.listdir(root) if d.startswith("kf-"))
    for src in roots:
        for dirpath, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield os.path.join(dirpath, f)


def header(code, start):
    """The item's text from `start` to its `{`, `;` or `}` (for a field, to its `,`), on one
    line."""
    field = not ITEM.match(code, start)
    end = start
    depth = 0
    while end < len(code):
        c = code[end]
        if c in "([" or c == "<":
            depth += 1
        elif c in ")]" or (c == ">" and code[end - 1] != "-"):
            depth -= 1
        elif depth <= 0 and (c in "{;}" or (field and c == ",")):
            break
        end += 1
    text = re.sub(r"\s+", " ", code[start:end]).strip()
    return text if len(text) <= 200 else text[:197] + "..."


ITEM = re.compile(
    r"(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:async|const|unsafe|extern(?:\s*\"\")?|default)\s+)*"
    r"(?:fn|static|type|impl|struct|enum|trait|let|const|mod|use)\b")


def item_start(code, offset, lo):
    """The start of the item around `offset`: after the previous `;`, `{` or `}` outside
    brackets (attributes skipped); for a field (no item keyword there), after the previous
    comma instead."""
    i = offset
    depth = 0
    while i > lo:
        c = code[i - 1]
        if c in ")]" or (c == ">" and code[i - 2] != "-"):
            depth += 1
        elif c in "([<":
            depth = max(depth - 1, 0)
        elif c in ";{}" and depth == 0:
            break
        i -= 1

    def skip_blank_and_attributes(i):
        while True:
            while i < offset and code[i].isspace():
                i += 1
            if not code.startswith("#", i):
                return i
            i = code.find("]", i) + 1

    i = skip_blank_and_attributes(i)
    if ITEM.match(code, i):
        return i
    # A field: the text after the last comma outside brackets.
    depth, last = 0, i
    for j in range(i, offset):
        c = code[j]
        if c in "([" or (c == "<"):
            depth += 1
        elif c in ")]" or (c == ">" and code[j - 1] != "-"):
            depth -= 1
        elif c == "," and depth == 0:
            last = j + 1
    return skip_blank_and_attributes(last)


def return_spans(code, a, b):
    """The spans of the types after each `->` in code[a:b] (return types of functions and of
    closure types): up to `{`, `;`, `where`, `,` or `=` outside brackets, or the bracket that
    closes around the arrow."""
    for m in re.finditer(r"->", code[a:b]):
        i = a + m.end()
        depth = 0
        while i < b:
            c = code[i]
            if code.startswith("->", i):
                i += 2
                continue
            if c in "([<":
                depth += 1
            elif c in ")]>":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (c in "{;,=" or re.match(r"where\b", code[i:i + 6])
                                 and not (code[i - 1].isalnum() or code[i - 1] == "_")):
                break
            i += 1
        yield a + m.end(), i


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.normpath(root)
    scans = {}
    for path in rust_files(root):
        with open(path, encoding="utf-8") as f:
            scans[path] = FileScan(path, f.read())
        scans[path].scan()

    # Files (and folders) of test modules declared with `#[cfg(test)] mod NAME;`.
    test_prefixes = []
    for path, s in scans.items():
        for name, has_path in s.test_mods:
            if has_path:
                continue  # rare; such files are named explicitly below when they occur
            d = module_dir(path)
            test_prefixes.append(os.path.join(d, name + ".rs"))
            test_prefixes.append(os.path.join(d, name) + os.sep)

    def is_test(path):
        return any(path == p or path.startswith(p) for p in test_prefixes)

    live = {p: s for p, s in scans.items() if not is_test(p)}

    # Aliases of string-error results, per crate.
    def crate_of(path):
        rel = os.path.relpath(path, root)
        return rel.split(os.sep)[0]

    aliases = {}
    alias_def = re.compile(r"(?<![A-Za-z0-9_])type\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:<[^=;]*>)?\s*=([^;]*);")
    for path, s in live.items():
        for a, b in s.items:
            for m in alias_def.finditer(s.code, a, b):
                if string_results(s.code, m.start(2), m.end(2), ()):
                    aliases.setdefault(crate_of(path), set()).add(m.group(1))

    findings = []
    assoc = re.compile(r"(?<![A-Za-z0-9_])type\s+(Err|Error)\s*=\s*(?:std::string::)?String\s*;")
    for path, s in sorted(live.items()):
        crate_aliases = aliases.get(crate_of(path), ())
        seen = set()
        for a, b in s.items:
            hits = []
            for ra, rb in return_spans(s.code, a, b):
                hits += string_results(s.code, ra, rb, crate_aliases)
            for m in alias_def.finditer(s.code, a, b):
                hits += string_results(s.code, m.start(2), m.end(2), crate_aliases)
            hits += [m.start() for m in assoc.finditer(s.code, a, b)]
            for off in sorted(hits):
                start = item_start(s.code, off, a)
                line = s.line(start)
                if line in seen:
                    continue
                seen.add(line)
                findings.append((os.path.relpath(path, root), line, header(s.code, start)))

    failed = False
    for rel, line, sig in findings:
        allowed = rel in ALLOWED
        failed |= not allowed
        note = "  (allowed: " + ALLOWED[rel] + ")" if allowed else ""
        print(f"{rel}:{line}: {sig}{note}")
    if failed:
        print(f"{sum(1 for f in findings if f[0] not in ALLOWED)} string error(s) in library APIs: "
              "use the crate's error enum (issue 46)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

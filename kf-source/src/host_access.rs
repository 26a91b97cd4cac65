//! What kernel text may ask a compiler to read from the machine it runs on.
//!
//! A compiler resolves `#include` (and `#import`, `#include_next`, `#embed`, `__has_include`,
//! `.incbin` in inline assembly) against the host's file system, and quotes what it read in its
//! diagnostics. Kernels in a search are untrusted (an LLM writes them), and diagnostics travel
//! on: into reports, run directories, the database of a cluster and the next prompt. So before
//! any compiler sees a kernel, [`check_host_access`] refuses every construct that names a host
//! file, except the runtime's own headers named in a [`HeaderPolicy`].
//!
//! Rules, chosen so that every doubt refuses the kernel rather than lets it through:
//!
//! * only the angle form of an allowed header name passes (`#include <sycl/sycl.hpp>`); the
//!   quoted form searches the directory of the including file first, so it is refused;
//! * **computed includes are refused outright** (`#define P "…"` then `#include P`). Expanding
//!   them would need a preprocessor that agrees with each compiler's on every macro (function
//!   -like macros, `#`, `##`, `__VA_OPT__`, predefined names); any disagreement is an escape,
//!   and kernels have no need for them;
//! * a directive name outside a short list of harmless ones is refused (`#import`,
//!   `#include_next`, `#embed`, `#__include_macros`, `#ident`, …), and so is a `#line` or a GNU
//!   line marker (`# 1 "…"`) whose operand is anything but digits (a file name, or a macro that
//!   may expand to one: GCC quotes lines of the file a line marker names in its diagnostics);
//! * an identifier holding `has_include` or `has_embed` is refused wherever it appears (a
//!   `#define` body included), except `__has_include(<allowed>)` and
//!   `__has_include_next(<allowed>)`;
//! * the words of the file-reading pragmas (`dependency`, `include_alias`) are refused in any
//!   identifier or literal, not only after `#pragma`: `_Pragma` takes a macro that expands to
//!   its string, so where the pragma's text comes from cannot be told without expanding;
//! * `incbin` anywhere, strings included, is refused (the assembler's file inclusion), and in
//!   languages whose inline assembly reaches the system's assembler (OpenCL C, SYCL; not CUDA,
//!   whose `asm` is PTX, which includes nothing) `asm`, `__asm` and `__asm__` are refused
//!   too: the assembler's `.include` and `.incbin` take strings the kernel may build with
//!   escapes, concatenation or `#`;
//! * when the text pastes tokens (`##`), an identifier above that the kernel's identifiers
//!   could form by pasting (`CAT(__has_, include)`) is refused: the pasted name is what the
//!   compiler sees, and which pieces a macro pastes cannot be told without expanding;
//! * a `#include` that is not the first token of its line (after a multi-line comment, or in a
//!   macro body) is refused too;
//! * **every branch is checked, taken or not**: a disallowed directive in an `#if 0` branch
//!   refuses the kernel as one in live text does. Skipping the branches the compiler skips
//!   needs the `#if` evaluated exactly as each compiler evaluates it (`-1 > 0u` is true in the
//!   unsigned arithmetic of C, `(1ULL << 63) > 0` too, character constants are signed or not
//!   by target, macros expand as that compiler expands them), and an evaluator that differs in
//!   one corner lets a file through; that cannot be proven, while refusing in every branch
//!   needs no evaluation at all. A kernel that wants a debugging include deletes it instead;
//! * text whose reading is ambiguous between compilers is refused: trigraphs (`??=`, `??/`), a
//!   backslash separated from its newline by spaces, NUL bytes.
//!
//! ```
//! use kf_source::host_access::{check_host_access, HeaderPolicy};
//!
//! let ok = "#include <sycl/sycl.hpp>\n#if 0\n#include <limits>\n#endif\n";
//! assert!(check_host_access(ok, &HeaderPolicy::SYCL).is_ok());
//!
//! // A disabled branch is checked as a taken one: the check does not evaluate `#if`.
//! let disabled = "#if -1 > 0u\n#include \"/etc/passwd\"\n#endif\n";
//! assert!(check_host_access(disabled, &HeaderPolicy::OPENCL_C).is_err());
//!
//! let refused = check_host_access("#include \"/home/me/.ssh/id_rsa\"\n", &HeaderPolicy::OPENCL_C)
//!     .unwrap_err();
//! assert_eq!(refused.line, 1);
//! assert_eq!(refused.directive, "#include");
//! ```

use std::collections::HashSet;

use crate::ident::is_ident_char;

/// Which headers a language's kernels may include: the runtime's own, by exact name or under
/// a folder prefix, always in the angle form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPolicy {
    /// The language's name, for messages.
    pub language: &'static str,
    /// Header names allowed as they are (`cuda_fp16.h`).
    pub exact: &'static [&'static str],
    /// Folder prefixes whose headers are allowed (`sycl/`).
    pub prefixes: &'static [&'static str],
    /// Whether the language has C++11 raw string literals (`R"x(…)x"`), which the scanner
    /// must read as such to know where comments are.
    pub raw_strings: bool,
    /// Whether inline assembly (`asm`, `__asm__`) may appear: only where it cannot reach an
    /// assembler that reads files (CUDA's `asm` is PTX, which has no file inclusion; the
    /// system assembler behind an OpenCL C or SYCL host compilation has `.include` and
    /// `.incbin`).
    pub inline_asm: bool,
}

/// The C and C++ standard headers: files of the system's compiler installation, which a SYCL
/// or CUDA kernel may use for `std::numeric_limits`, `<cmath>` and the like.
const STANDARD_HEADERS: &[&str] = &[
    "algorithm",
    "array",
    "atomic",
    "bit",
    "bitset",
    "cassert",
    "cfloat",
    "climits",
    "cmath",
    "complex",
    "concepts",
    "cstddef",
    "cstdint",
    "cstdio",
    "cstdlib",
    "cstring",
    "functional",
    "initializer_list",
    "iterator",
    "limits",
    "memory",
    "numeric",
    "numbers",
    "optional",
    "span",
    "tuple",
    "type_traits",
    "utility",
    "variant",
    "assert.h",
    "float.h",
    "limits.h",
    "math.h",
    "stddef.h",
    "stdint.h",
    "stdio.h",
    "stdlib.h",
    "string.h",
];

/// Headers that NVRTC ships with the CUDA runtime's include folder (and the standard ones).
const CUDA_HEADERS: &[&str] = &[
    "cuda_fp16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.h",
    "cuda_bf16.hpp",
    "cuda_fp8.h",
    "cuda_fp8.hpp",
    "cuda_fp6.h",
    "cuda_fp4.h",
    "cooperative_groups.h",
    "mma.h",
    "cuda_pipeline.h",
    "cuda_pipeline_primitives.h",
    "cuda_awbarrier.h",
    "cuda_awbarrier_primitives.h",
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "device_launch_parameters.h",
    "vector_types.h",
    "vector_functions.h",
    "math_constants.h",
    "sm_20_intrinsics.h",
    "sm_30_intrinsics.h",
    "sm_32_intrinsics.h",
    "sm_35_intrinsics.h",
    "sm_60_atomic_functions.h",
    "sm_61_intrinsics.h",
    "crt/host_defines.h",
];

impl HeaderPolicy {
    /// OpenCL C: no header at all (the built-in functions need none).
    pub const OPENCL_C: HeaderPolicy = HeaderPolicy {
        language: "OpenCL C",
        exact: &[],
        prefixes: &[],
        raw_strings: false,
        inline_asm: false,
    };

    /// SYCL: the SYCL headers (`<sycl/sycl.hpp>`, `<sycl/…>`, `<CL/sycl.hpp>`) and the
    /// standard headers.
    pub const SYCL: HeaderPolicy = HeaderPolicy {
        language: "SYCL",
        exact: STANDARD_HEADERS,
        prefixes: &["sycl/", "CL/sycl"],
        raw_strings: true,
        inline_asm: false,
    };

    /// CUDA: the headers NVRTC ships (`<cuda_fp16.h>`, `<cooperative_groups.h>`, `<mma.h>`,
    /// `<cuda/…>`, `<cub/…>`, …) and the standard headers.
    pub const CUDA: HeaderPolicy = HeaderPolicy {
        language: "CUDA",
        exact: CUDA_HEADERS,
        prefixes: &["cuda/", "cooperative_groups/", "cub/"],
        raw_strings: true,
        inline_asm: true,
    };

    /// Whether `<name>` may be included.
    ///
    /// ```
    /// use kf_source::host_access::HeaderPolicy;
    /// assert!(HeaderPolicy::SYCL.allows("sycl/sycl.hpp"));
    /// assert!(HeaderPolicy::CUDA.allows("cuda/std/cmath"));
    /// assert!(!HeaderPolicy::CUDA.allows("cuda/../../etc/passwd"));
    /// assert!(!HeaderPolicy::OPENCL_C.allows("stdio.h"));
    /// ```
    pub fn allows(&self, name: &str) -> bool {
        let plain = !name.is_empty()
            && name.split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+'))
            });
        if !plain {
            return false;
        }
        let standard = self.raw_strings && STANDARD_HEADERS.contains(&name);
        standard || self.exact.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }

    /// What the policy allows, for messages.
    fn describe(&self) -> String {
        if self.exact.is_empty() && self.prefixes.is_empty() {
            return format!("{} kernels include no headers", self.language);
        }
        let mut names: Vec<String> = self.prefixes.iter().map(|p| format!("<{p}…>")).collect();
        names.extend(
            self.exact
                .iter()
                .filter(|h| !STANDARD_HEADERS.contains(h))
                .take(4)
                .map(|h| format!("<{h}>")),
        );
        format!(
            "{} kernels may include only the runtime's own headers in the angle form ({}, …) \
             and the standard headers",
            self.language,
            names.join(", ")
        )
    }
}

/// A construct through which a kernel would make the compiler read a host file: where it is
/// and why it is refused. The message names the directive and the kernel's own text; it never
/// quotes any file (nothing is read).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: `{directive}` is refused before compilation: {reason}")]
pub struct HostAccess {
    /// The kernel's line (1-based, physical lines of the text given).
    pub line: usize,
    /// The directive or operator (`#include`, `#embed`, `__has_include`, `incbin`, …).
    pub directive: String,
    /// Why, and what is allowed instead.
    pub reason: String,
}

/// Checks `text` for constructs that read host files (see the [module docs](self)), in every
/// branch of every `#if`, taken or not.
///
/// It takes no definitions (a kernel's `-D` parameters): it does not evaluate `#if`
/// conditions, because skipping a branch is sound only if the evaluation agrees with every
/// compiler's, which cannot be proven.
pub fn check_host_access(text: &str, policy: &HeaderPolicy) -> Result<(), HostAccess> {
    ambiguous_text(text)?;
    let chars = splice(text);
    let tokens = Scanner::new(&chars, policy.raw_strings).run()?;
    let walk = Walk {
        tokens: &tokens,
        policy,
    };
    walk.pasting()?;
    walk.run()
}

/// Refuses text that compilers may read differently.
fn ambiguous_text(text: &str) -> Result<(), HostAccess> {
    let refuse = |at: usize, directive: &str, reason: &str| HostAccess {
        line: text[..at].matches('\n').count() + 1,
        directive: directive.to_owned(),
        reason: reason.to_owned(),
    };
    if let Some(at) = text.find('\0') {
        return Err(refuse(at, "NUL", "kernel text may not hold NUL bytes"));
    }
    for trigraph in ["??=", "??/"] {
        if let Some(at) = text.find(trigraph) {
            return Err(refuse(
                at,
                trigraph,
                "trigraphs are not allowed (compilers disagree on whether they are read)",
            ));
        }
    }
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices('\\') {
        let rest = &bytes[at + 1..];
        let blanks = rest
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | 0x0b | 0x0c))
            .count();
        if blanks > 0 && matches!(rest.get(blanks), Some(b'\n' | b'\r')) {
            return Err(refuse(
                at,
                "\\",
                "a backslash followed by spaces before the end of its line is not allowed \
                 (compilers disagree on whether it continues the line)",
            ));
        }
    }
    Ok(())
}

/// A character of the text after line splicing, with its physical line.
#[derive(Debug, Clone, Copy)]
struct Ch {
    c: char,
    line: usize,
}

/// Removes backslash-newline pairs (`\n`, `\r\n` or `\r`), keeping each character's line.
fn splice(text: &str) -> Vec<Ch> {
    let mut out = Vec::with_capacity(text.len());
    let mut line = 1;
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' && matches!(it.peek(), Some('\n' | '\r')) {
            if it.next() == Some('\r') && it.peek() == Some(&'\n') {
                it.next();
            }
            line += 1;
            continue;
        }
        out.push(Ch { c, line });
        if c == '\n' || (c == '\r' && it.peek() != Some(&'\n')) {
            line += 1;
        }
    }
    out
}

/// A preprocessing token, as far as the check needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Ident(String),
    /// `#` or `%:`.
    Hash,
    /// A string or character literal, raw strings included, verbatim.
    Literal(String),
    /// Any other character (numbers and punctuation, one character each).
    Other(char),
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    line: usize,
    /// First token of a logical line (newlines inside block comments do not start one).
    bol: bool,
    /// Where the token starts in its logical line's text.
    rest: usize,
    /// Which logical line.
    logical: usize,
}

/// Splits spliced text into tokens, dropping comments and whitespace.
struct Scanner<'a> {
    s: &'a [Ch],
    i: usize,
    raw_strings: bool,
    tokens: Vec<Token>,
    /// The text of each logical line with comments replaced by one space, and where each
    /// token starts in it.
    lines: Vec<String>,
}

impl<'a> Scanner<'a> {
    fn new(s: &'a [Ch], raw_strings: bool) -> Self {
        Scanner {
            s,
            i: 0,
            raw_strings,
            tokens: Vec::new(),
            lines: vec![String::new()],
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).map(|ch| ch.c)
    }

    fn line_text(&mut self) -> &mut String {
        // `lines` starts non-empty and only grows.
        let last = self.lines.len() - 1;
        &mut self.lines[last]
    }

    fn push(&mut self, kind: Kind, line: usize, bol: bool, text: &str) {
        let offset = self.line_text().len();
        let logical = self.lines.len() - 1;
        self.tokens.push(Token {
            kind,
            line,
            bol,
            rest: offset,
            logical,
        });
        self.line_text().push_str(text);
    }

    fn run(mut self) -> Result<Vec<TokenLine>, HostAccess> {
        let mut bol = true;
        while let Some(c) = self.peek(0) {
            let line = self.s[self.i].line;
            match c {
                '\n' | '\r' => {
                    self.i += 1;
                    bol = true;
                    self.lines.push(String::new());
                }
                '/' if self.peek(1) == Some('/') => {
                    while !matches!(self.peek(0), None | Some('\n' | '\r')) {
                        self.i += 1;
                    }
                    self.line_text().push(' ');
                }
                '/' if self.peek(1) == Some('*') => {
                    self.skip_block_comment(line)?;
                    self.line_text().push(' ');
                }
                c if c.is_whitespace() => {
                    self.i += 1;
                    self.line_text().push(c);
                }
                '#' => {
                    self.i += 1;
                    self.push(Kind::Hash, line, bol, "#");
                    bol = false;
                }
                '%' if self.peek(1) == Some(':') => {
                    self.i += 2;
                    self.push(Kind::Hash, line, bol, "#");
                    bol = false;
                }
                '"' | '\'' => {
                    let text = self.literal(c);
                    self.push(Kind::Literal(text.clone()), line, bol, &text);
                    bol = false;
                }
                c if is_ident_char(c) && !c.is_ascii_digit() => {
                    self.identifier(line, bol)?;
                    bol = false;
                }
                c => {
                    self.i += 1;
                    let mut buf = [0u8; 4];
                    self.push(Kind::Other(c), line, bol, c.encode_utf8(&mut buf));
                    bol = false;
                }
            }
        }
        Ok(self.into_token_lines())
    }

    /// Skips a `/* … */` comment from its opening on; `line` is where it opened, for the
    /// error when it never closes.
    fn skip_block_comment(&mut self, line: usize) -> Result<(), HostAccess> {
        self.i += 2;
        loop {
            match self.peek(0) {
                None => {
                    return Err(HostAccess {
                        line,
                        directive: "/*".to_owned(),
                        reason: "an unterminated comment".to_owned(),
                    })
                }
                Some('*') if self.peek(1) == Some('/') => {
                    self.i += 2;
                    return Ok(());
                }
                _ => self.i += 1,
            }
        }
    }

    /// Scans an identifier, or a string literal with a prefix (`R"(…)"`, `u8"…"`, `L'…'`):
    /// the prefix is an identifier until the quote after it shows otherwise.
    fn identifier(&mut self, line: usize, bol: bool) -> Result<(), HostAccess> {
        let start = self.i;
        while self.peek(0).is_some_and(is_ident_char) {
            self.i += 1;
        }
        let name: String = self.s[start..self.i].iter().map(|ch| ch.c).collect();
        let raw_prefix = matches!(name.as_str(), "R" | "u8R" | "uR" | "UR" | "LR");
        if self.raw_strings && raw_prefix && self.peek(0) == Some('"') {
            let text = format!("{name}{}", self.raw_literal(line)?);
            self.push(Kind::Literal(text.clone()), line, bol, &text);
        } else if self.peek(0).is_some_and(|q| q == '"' || q == '\'')
            && matches!(name.as_str(), "u8" | "u" | "U" | "L")
        {
            // An encoding prefix: the literal follows.
            let quote = self.peek(0).unwrap_or('"');
            let text = format!("{name}{}", self.literal(quote));
            self.push(Kind::Literal(text.clone()), line, bol, &text);
        } else {
            self.push(Kind::Ident(name.clone()), line, bol, &name);
        }
        Ok(())
    }

    /// The scanned tokens, each with the rest of its logical line (comments blanked) from
    /// the token on.
    fn into_token_lines(self) -> Vec<TokenLine> {
        let Scanner { tokens, lines, .. } = self;
        tokens
            .into_iter()
            .map(|t| TokenLine {
                rest: lines
                    .get(t.logical)
                    .and_then(|l| l.get(t.rest..))
                    .unwrap_or_default()
                    .to_owned(),
                kind: t.kind,
                line: t.line,
                bol: t.bol,
                logical: t.logical,
            })
            .collect()
    }

    /// A `"…"` or `'…'` literal from the quote on; it ends at the closing quote or, unclosed,
    /// before the end of its line (as compilers end it, with an error).
    fn literal(&mut self, quote: char) -> String {
        let mut text = String::new();
        text.push(quote);
        self.i += 1;
        while let Some(c) = self.peek(0) {
            if c == '\n' || c == '\r' {
                break;
            }
            self.i += 1;
            text.push(c);
            if c == '\\' {
                if let Some(next) = self.peek(0).filter(|n| *n != '\n' && *n != '\r') {
                    self.i += 1;
                    text.push(next);
                }
            } else if c == quote {
                break;
            }
        }
        text
    }

    /// A raw string literal from its opening quote: `"delim(…)delim"`.
    fn raw_literal(&mut self, line: usize) -> Result<String, HostAccess> {
        let start = self.i;
        self.i += 1;
        let mut delim = String::new();
        loop {
            match self.peek(0) {
                Some('(') => break,
                Some(c) if delim.len() < 16 && !c.is_whitespace() && !matches!(c, ')' | '\\') => {
                    delim.push(c);
                    self.i += 1;
                }
                _ => {
                    return Err(HostAccess {
                        line,
                        directive: "R\"".to_owned(),
                        reason: "a malformed raw string literal".to_owned(),
                    })
                }
            }
        }
        let close: Vec<char> = format!("){delim}\"").chars().collect();
        self.i += 1;
        loop {
            if self.i + close.len() > self.s.len() {
                return Err(HostAccess {
                    line,
                    directive: "R\"".to_owned(),
                    reason: "an unterminated raw string literal".to_owned(),
                });
            }
            if self.s[self.i..self.i + close.len()]
                .iter()
                .map(|ch| ch.c)
                .eq(close.iter().copied())
            {
                self.i += close.len();
                break;
            }
            self.i += 1;
        }
        Ok(self.s[start..self.i].iter().map(|ch| ch.c).collect())
    }
}

/// A token with the rest of its logical line.
#[derive(Debug, Clone)]
struct TokenLine {
    kind: Kind,
    line: usize,
    bol: bool,
    /// The logical line's text from this token on, comments as spaces.
    rest: String,
    /// Which logical line.
    logical: usize,
}

/// Directives that read no file.
const HARMLESS_DIRECTIVES: [&str; 14] = [
    "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif", "define", "undef",
    "line", "error", "warning", "pragma",
];

/// Directive names that read a file, refused wherever a `#` precedes them.
const FILE_DIRECTIVES: [&str; 5] = [
    "include",
    "include_next",
    "import",
    "embed",
    "__include_macros",
];

/// Identifiers that make the compiler read or probe a host file (or name a pragma that does),
/// refused when the kernel's identifiers could form them by pasting.
const PASTED_NAMES: [&str; 8] = [
    "__has_include",
    "__has_include_next",
    "__has_include__",
    "__has_include_next__",
    "__has_embed",
    "incbin",
    "dependency",
    "include_alias",
];

/// The names of inline assembly, refused where [`HeaderPolicy::inline_asm`] is false.
const ASM_NAMES: [&str; 3] = ["asm", "__asm", "__asm__"];

/// Words of the pragmas that read or probe a file (`#pragma GCC dependency "f"`, MSVC's
/// `#pragma include_alias`), refused in any identifier or literal.
const PRAGMA_WORDS: [&str; 2] = ["dependency", "include_alias"];

/// The walk over every token of the text: no branch is skipped.
struct Walk<'a> {
    tokens: &'a [TokenLine],
    policy: &'a HeaderPolicy,
}

impl Walk<'_> {
    fn run(&self) -> Result<(), HostAccess> {
        // Only the nesting is tracked (an `#else` without `#if` is refused as before); no
        // condition is evaluated and no branch is skipped.
        let mut depth = 0usize;
        let mut i = 0;
        while i < self.tokens.len() {
            let t = &self.tokens[i];
            let end = self.line_end(i);
            if !(t.bol && t.kind == Kind::Hash) {
                self.check_operators(i, end)?;
                i = end;
                continue;
            }
            let name = match self.tokens.get(i + 1) {
                Some(n) if n.logical == t.logical => match &n.kind {
                    Kind::Ident(name) => Some(name.as_str()),
                    _ => None,
                },
                _ => None,
            };
            let operand = self.tokens.get(i + 1).map_or("", |n| {
                if n.logical == t.logical {
                    n.rest.as_str()
                } else {
                    ""
                }
            });
            // The operand after the directive name.
            let after_name = name.map_or(operand, |n| operand.get(n.len()..).unwrap_or(""));
            match name {
                Some("if" | "ifdef" | "ifndef") => {
                    depth += 1;
                    self.check_operators(i + 2, end)?;
                }
                Some(d @ ("elif" | "elifdef" | "elifndef" | "else" | "endif")) => {
                    if depth == 0 {
                        return Err(self.refuse(t.line, &format!("#{d}"), "without #if"));
                    }
                    if d == "endif" {
                        depth -= 1;
                    }
                    self.check_operators(i + 2, end)?;
                }
                None => {
                    // The null directive `#` alone, or a GNU line marker `# 12 "file"`: GCC
                    // quotes lines of the file a marker names, so only digits may follow.
                    if !digits_only(after_name) {
                        return Err(self.refuse(
                            t.line,
                            "#",
                            "a line marker may hold only a line number (a file name makes \
                             the compiler quote that file)",
                        ));
                    }
                }
                Some("include") => self.include(t.line, after_name)?,
                Some(d) if !HARMLESS_DIRECTIVES.contains(&d) => {
                    return Err(self.refuse(
                        t.line,
                        &format!("#{d}"),
                        "this directive is not allowed in kernels (only #include of the \
                         runtime's headers, #define, #undef, #if and its kin, #line, \
                         #error, #warning and #pragma are)",
                    ));
                }
                Some("line") => {
                    // A macro may expand to a file name, so only digits pass.
                    if !digits_only(after_name) {
                        return Err(self.refuse(
                            t.line,
                            "#line",
                            "a #line directive may hold only a line number (not a file name, \
                             nor a macro that may expand to one)",
                        ));
                    }
                }
                Some("pragma") => {
                    self.pragma(t.line, "#pragma", after_name)?;
                    self.check_operators(i + 2, end)?;
                }
                Some(_) => self.check_operators(i + 2, end)?,
            }
            i = end;
        }
        Ok(())
    }

    /// Refuses text that pastes tokens (`##`) when its identifiers could be pasted into one of
    /// the names the check refuses ([`PASTED_NAMES`], and the names of inline assembly where
    /// it is not allowed). Which pieces a macro pastes depends on its arguments, so every
    /// identifier of the text counts as a piece.
    fn pasting(&self) -> Result<(), HostAccess> {
        let paste = self.tokens.windows(2).find(|w| {
            w[0].kind == Kind::Hash && w[1].kind == Kind::Hash && w[0].logical == w[1].logical
        });
        let Some(paste) = paste else {
            return Ok(());
        };
        let pieces: HashSet<&str> = self
            .tokens
            .iter()
            .filter_map(|t| match &t.kind {
                Kind::Ident(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        let asm: &[&str] = if self.policy.inline_asm {
            &[]
        } else {
            &ASM_NAMES
        };
        for name in PASTED_NAMES.iter().chain(asm) {
            if pastable(name, &pieces) {
                return Err(self.refuse(
                    paste[0].line,
                    "##",
                    &format!(
                        "token pasting could form `{name}` from the kernel's identifiers \
                         (pasted names are checked as written ones)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The index of the first token after the logical line of token `i`.
    fn line_end(&self, i: usize) -> usize {
        let logical = self.tokens[i].logical;
        (i..self.tokens.len())
            .find(|&j| self.tokens[j].logical != logical)
            .unwrap_or(self.tokens.len())
    }

    fn refuse(&self, line: usize, directive: &str, reason: &str) -> HostAccess {
        HostAccess {
            line,
            directive: directive.to_owned(),
            reason: reason.to_owned(),
        }
    }

    /// `#include OPERAND`: only `<allowed>`.
    fn include(&self, line: usize, operand: &str) -> Result<(), HostAccess> {
        let operand = operand.trim();
        let name = operand
            .strip_prefix('<')
            .and_then(|rest| rest.strip_suffix('>'));
        match name {
            Some(name) if self.policy.allows(name) => Ok(()),
            Some(_) => Err(self.refuse(
                line,
                "#include",
                &format!("that header is not allowed; {}", self.policy.describe()),
            )),
            None if operand.starts_with('"') => Err(self.refuse(
                line,
                "#include",
                &format!(
                    "quoted includes are not allowed (they search the host's folders); {}",
                    self.policy.describe()
                ),
            )),
            None => Err(self.refuse(
                line,
                "#include",
                &format!(
                    "computed includes (a macro naming the file) are not allowed; {}",
                    self.policy.describe()
                ),
            )),
        }
    }

    /// `#pragma` text, or any identifier or literal (which `_Pragma` may take through a
    /// macro), that names a pragma making the compiler look at a file; `what` names the
    /// directive, empty for a token outside one (the word is named then).
    fn pragma(&self, line: usize, what: &str, text: &str) -> Result<(), HostAccess> {
        let lower = text.to_ascii_lowercase();
        for word in PRAGMA_WORDS {
            if lower.contains(word) {
                return Err(self.refuse(
                    line,
                    if what.is_empty() { word } else { what },
                    &format!(
                        "`{word}` is refused anywhere in a kernel: a pragma naming it (written \
                         or through `_Pragma`) makes the compiler look at host files"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks tokens `from..to` (of any branch) for file-reading operators.
    fn check_operators(&self, from: usize, to: usize) -> Result<(), HostAccess> {
        let tokens = &self.tokens[from.min(to)..to];
        for (k, t) in tokens.iter().enumerate() {
            match &t.kind {
                Kind::Hash => {
                    if let Some(Kind::Ident(name)) = tokens.get(k + 1).map(|n| &n.kind) {
                        if FILE_DIRECTIVES.contains(&name.as_str()) {
                            return Err(self.refuse(
                                t.line,
                                &format!("#{name}"),
                                "a file directive that does not start its line (after a \
                                 comment spanning lines, or in a macro) is not allowed",
                            ));
                        }
                    }
                }
                Kind::Ident(name)
                    if !self.policy.inline_asm && ASM_NAMES.contains(&name.as_str()) =>
                {
                    return Err(self.refuse(
                        t.line,
                        name,
                        &format!(
                            "inline assembly is not allowed in {} kernels (the assembler's \
                             `.include` and `.incbin` read host files)",
                            self.policy.language
                        ),
                    ));
                }
                Kind::Ident(name) if name.contains("has_include") || name.contains("has_embed") => {
                    // Only the exact operators, of an allowed header in the angle form.
                    let operator = name == "__has_include" || name == "__has_include_next";
                    let angle = header_in_parens(&tokens[k + 1..]);
                    if !(operator && angle.is_some_and(|h| self.policy.allows(&h))) {
                        let reason = if name.contains("has_embed") {
                            "#embed is not allowed".to_owned()
                        } else {
                            format!(
                                "only `{name}(<header>)` of an allowed header is allowed; {}",
                                self.policy.describe()
                            )
                        };
                        return Err(self.refuse(t.line, name, &reason));
                    }
                }
                Kind::Ident(text) | Kind::Literal(text) => {
                    if text.to_ascii_lowercase().contains("incbin") {
                        return Err(self.refuse(t.line, "incbin", "assembler file inclusion"));
                    }
                    // `_Pragma(S)` expands `S`, so a pragma's words are refused wherever
                    // they are written.
                    self.pragma(t.line, "", text)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether `text` (a directive's operand, comments as spaces) holds only digits and blanks.
fn digits_only(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_digit() || c.is_whitespace())
}

/// Whether `name` is the concatenation of two or more of `pieces` (a name written whole is
/// checked where it is written).
fn pastable(name: &str, pieces: &HashSet<&str>) -> bool {
    // `covered[p]`: `name[..p]` is a concatenation of pieces.
    let n = name.len();
    let mut covered = vec![false; n + 1];
    covered[0] = true;
    for p in 0..n {
        if !covered[p] {
            continue;
        }
        for piece in pieces {
            if !piece.is_empty() && name[p..].starts_with(piece) {
                covered[p + piece.len()] = true;
            }
        }
    }
    // Two or more pieces: some split of `name` whose both sides are covered. A suffix
    // `name[q..]` is covered when, read back from the end, it splits into pieces too.
    let mut from_end = vec![false; n + 1];
    from_end[n] = true;
    for q in (0..n).rev() {
        from_end[q] = pieces.iter().any(|piece| {
            !piece.is_empty() && name[q..].starts_with(piece) && from_end[q + piece.len()]
        });
    }
    (1..n).any(|q| covered[q] && from_end[q])
}

/// The header name of `(<a/b.h>)` at the start of `tokens` (spaces allowed around the
/// angle brackets, none inside them), when they start with exactly that.
fn header_in_parens(tokens: &[TokenLine]) -> Option<String> {
    let first = tokens.first()?;
    if first.kind != Kind::Other('(') {
        return None;
    }
    let inner = first
        .rest
        .strip_prefix('(')?
        .trim_start()
        .strip_prefix('<')?;
    let end = inner.find('>')?;
    let name = &inner[..end];
    let closed = inner[end + 1..].trim_start().starts_with(')');
    (closed && !name.contains(char::is_whitespace)).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, policy: &HeaderPolicy) -> Result<(), HostAccess> {
        check_host_access(text, policy)
    }

    fn refused(text: &str, policy: &HeaderPolicy) -> HostAccess {
        match check(text, policy) {
            Err(e) => e,
            Ok(()) => panic!("not refused:\n{text}"),
        }
    }

    const K: &str = "__kernel void k(__global float* a) { a[0] = 1.0f; }\n";

    #[test]
    fn every_include_form_of_a_host_file_is_refused() {
        let probes = [
            "#include \"/tmp/creds.txt\"",
            "#include \"../creds.txt\"",
            "#include </etc/passwd>",
            "#include <../../etc/passwd>",
            "#import \"/tmp/creds.txt\"",
            "#include_next \"/tmp/creds.txt\"",
            "#embed \"/tmp/creds.txt\"",
            "#define P \"/tmp/creds.txt\"\n#include P",
            "#define Q(x) #x\n#include Q(/tmp/creds.txt)",
            "  #  include \"/tmp/x\"",
            "#/* c */include \"/tmp/x\"",
            "#inc\\\nlude \"/tmp/x\"",
            "%:include \"/tmp/x\"",
            "/*\n*/ #include \"/tmp/x\"",
            "int a; /*\n*/ #include \"/tmp/x\"",
            "#include /*\n*/ \"/tmp/x\"",
            "#if __has_include(\"/tmp/x\")\n#endif",
            "#define H __has_include(\"/tmp/x\")\n#if H\n#endif",
            "#if __has_embed(\"/tmp/x\")\n#endif",
            "#line 1 \"/tmp/x\"",
            "#pragma GCC dependency \"/tmp/x\"",
            "_Pragma(\"GCC dependency \\\"/tmp/x\\\"\")",
            "__asm__(\".incbin \\\"/tmp/x\\\"\");",
            "#__include_macros \"/tmp/x\"",
            "#ident \"x\"",
            "??=include \"/tmp/x\"",
            "#include \\ \n\"/tmp/x\"",
            "#ifdef SOMETHING_UNKNOWN\n#include \"/tmp/x\"\n#endif",
            "#if 0\n#elif 1\n#include \"/tmp/x\"\n#endif",
            "#if 1\n#else\n#endif\n#include \"/tmp/x\"",
            "#define TS 128\n#if TS > 64\n#include \"/tmp/x\"\n#endif",
            "#include <sycl/sycl.hpp> ",
        ];
        for probe in probes.iter().take(probes.len() - 1) {
            let text = format!("{probe}\n{K}");
            let e = refused(&text, &HeaderPolicy::OPENCL_C);
            assert!(!e.to_string().is_empty());
        }
        // An allowed SYCL header is not allowed in OpenCL C.
        refused("#include <sycl/sycl.hpp>\n", &HeaderPolicy::OPENCL_C);
    }

    #[test]
    fn disabled_branches_are_checked_like_taken_ones() {
        // Issue 61: `#if` is not evaluated, so no reading of a condition (signed or
        // unsigned, known or unknown) can hide an include from the check.
        let probes = [
            "#if 0\n#include \"/tmp/x\"\n#endif",
            "#if TS > 64\n#include \"/tmp/x\"\n#endif",
            "#ifndef TS\n#include \"/tmp/x\"\n#endif",
            "#if 1\n#else\n#include \"/tmp/x\"\n#endif",
            "#if 0\n#if 1\n#include \"/tmp/x\"\n#endif\n#else\n#endif",
            "#if -1 > 0u\n#include \"/tmp/x\"\n#endif",
            "#if (1ULL << 63) > 0\n#include \"/tmp/x\"\n#endif",
            "#if 0xFFFFFFFFFFFFFFFF > 0\n#include \"/tmp/x\"\n#endif",
            "#if '\\xff' < 0\n#include \"/tmp/x\"\n#endif",
            "#if 0\n#include_next \"/tmp/x\"\n#endif",
            "#if 0\n#import \"/tmp/x\"\n#endif",
            "#if 0\n#embed \"/tmp/x\"\n#endif",
            "#if 0\n#line 1 \"/tmp/x\"\n#endif",
            "#if 0\n#pragma GCC dependency \"/tmp/x\"\n#endif",
            "#if 0\n__asm__(\".incbin \\\"/tmp/x\\\"\");\n#endif",
            "#if 0 && __has_include(\"/tmp/x\")\n#endif",
            "#if 0\n#elif __has_include(\"/tmp/x\")\n#endif",
            "#ifdef TS\n#else\n#include \"debug.h\"\n#endif",
        ];
        for probe in probes {
            refused(&format!("{probe}\n{K}"), &HeaderPolicy::OPENCL_C);
        }
        // The same in the languages with headers: a disabled quoted include is refused…
        refused(
            "#include <sycl/sycl.hpp>\n#if 0\n#include \"debug.h\"\n#endif\n",
            &HeaderPolicy::SYCL,
        );
        refused(
            "#include <cuda_fp16.h>\n#if 0\n#include \"debug.h\"\n#endif\n",
            &HeaderPolicy::CUDA,
        );
        // …while a disabled include of an allowed header passes, as a live one does.
        check(
            "#include <sycl/sycl.hpp>\n#if 0\n#include <limits>\n#endif\n",
            &HeaderPolicy::SYCL,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn escapes_through_macros_and_line_markers_are_refused() {
        let probes = [
            // Pasting forms the operator clang evaluates (`CAT(__has_, include)` is
            // `__has_include`).
            "#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"/tmp/x\")\n#endif",
            "#define CAT(a, b) a%:%:b\n#if CAT(__has_, embed)(\"/tmp/x\")\n#endif",
            "#define CAT(a, b) a##b\n#define S(x) #x\n_Pragma(S(GCC CAT(depend, ency) \"/tmp/x\"))",
            "#define CAT(a, b) a##b\nCAT(as, m)(\".incbin \\\"/tmp/x\\\"\");",
            // `_Pragma` expands a macro to its string.
            "#define S \"GCC dependency \\\"/tmp/x\\\"\"\n_Pragma(S)",
            // GCC's own name of the operator (GCC 5 to 9).
            "#if __has_include__(\"/tmp/x\")\n#endif",
            "#if __has_include_next(\"/tmp/x\")\n#endif",
            // A GNU line marker, and a #line whose file name comes from a macro.
            "# 1 \"/tmp/x\"",
            "#define F \"/tmp/x\"\n#line 1 F",
            // Inline assembly reaches the system assembler in OpenCL C and SYCL.
            "__asm__(\".inc\" \"bin \\\"/tmp/x\\\"\");",
            "asm(\".include \\\"/tmp/x\\\"\");",
        ];
        for probe in probes {
            refused(&format!("{probe}\n{K}"), &HeaderPolicy::OPENCL_C);
            refused(&format!("{probe}\n"), &HeaderPolicy::SYCL);
        }
        // CUDA's inline assembly is PTX (no file inclusion), and pasting alone is fine.
        check(
            "#define CAT(a, b) a##b\n__global__ void k(float* x) { CAT(x, [0]) = 1.0f; \
             asm volatile(\"membar.gl;\"); }\n",
            &HeaderPolicy::CUDA,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn comments_strings_and_allowed_headers_pass() {
        let fine = [
            "// #include \"/tmp/x\"",
            "/* #include \"/tmp/x\" */",
            "#if 0\n// #include \"/tmp/x\"\n#endif",
            "const char* s = \"#include \\\"/tmp/x\\\"\";",
            "#line 12",
            "#",
            "# 12",
            "#pragma unroll 4",
            "#define UNROLL _Pragma(\"unroll\")",
            "#define CAT(a, b) a##b\n#define VEC(t, n) CAT(t, n)\nVEC(float, 4) v;",
            "#if defined(TS) && TS > 64 || -1 > 0u\n#define WIDE 1\n#else\n#define WIDE 0\n#endif",
        ];
        for text in fine {
            check(&format!("{text}\n{K}"), &HeaderPolicy::OPENCL_C)
                .unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let sycl = [
            "#include <sycl/sycl.hpp>",
            "#include<sycl/sycl.hpp>",
            "#include <limits>",
            "#if __has_include(<sycl/sycl.hpp>)\n#endif",
            "#if 0\n#include <limits>\n#endif",
            "auto s = R\"(/* not a comment)\";\nint x;",
        ];
        for text in sycl {
            check(&format!("{text}\n"), &HeaderPolicy::SYCL)
                .unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        check(
            "#include <cuda_fp16.h>\n#include <cooperative_groups/reduce.h>\n",
            &HeaderPolicy::CUDA,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn pasting_is_refused_only_when_it_could_form_a_refused_name() {
        let pieces = |names: &[&'static str]| names.iter().copied().collect::<HashSet<_>>();
        assert!(pastable("__has_include", &pieces(&["__has_", "include"])));
        assert!(pastable("__has_include", &pieces(&["_", "has", "include"])));
        assert!(pastable("asm", &pieces(&["a", "s", "m"])));
        // One piece is the name written whole, checked where it is written.
        assert!(!pastable("asm", &pieces(&["asm"])));
        assert!(!pastable(
            "__has_include",
            &pieces(&["__has_", "includes", "x"])
        ));
        assert!(!pastable("incbin", &pieces(&["inc", "bi"])));
    }

    #[test]
    fn raw_strings_cannot_hide_or_invent_comments() {
        // A raw string holding `*/` does not end a comment that is not there…
        let hidden = "auto s = R\"x(/*)x\";\n#include \"/tmp/x\"\n// */\n";
        refused(hidden, &HeaderPolicy::SYCL);
        // …and an unterminated raw string refuses.
        refused("auto s = R\"x(\n#include \"/tmp/x\"\n", &HeaderPolicy::SYCL);
        // OpenCL C has no raw strings: `R"(` is an identifier and a string there.
        refused(
            "int R; char* s = R\"(\";\n#include \"/tmp/x\"\n\")\";",
            &HeaderPolicy::OPENCL_C,
        );
    }

    #[test]
    fn messages_name_the_line_and_never_the_file_contents() {
        let e = refused(
            &format!("{K}#include \"/tmp/creds.txt\"\n"),
            &HeaderPolicy::OPENCL_C,
        );
        assert_eq!(e.line, 2);
        assert_eq!(e.directive, "#include");
        assert!(
            e.to_string().contains("quoted includes are not allowed"),
            "{e}"
        );
        let e = refused("#define P \"x\"\n#include P\n", &HeaderPolicy::CUDA);
        assert!(e.to_string().contains("computed includes"), "{e}");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn policies_refuse_paths_that_leave_the_runtime() {
        for name in [
            "sycl/../../../etc/passwd",
            "/etc/passwd",
            "sycl//x",
            "sycl/ x",
            "",
        ] {
            assert!(!HeaderPolicy::SYCL.allows(name), "{name}");
        }
        assert!(HeaderPolicy::SYCL.allows("sycl/ext/oneapi/experimental/bfloat16.hpp"));
        assert!(!HeaderPolicy::OPENCL_C.allows("math.h"));
    }
}

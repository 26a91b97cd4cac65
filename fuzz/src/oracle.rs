//! Differential targets: a check of this project against a real tool as the oracle.
//!
//! Target `host_access_oracle` (issue 61): the evaluator's host-file check
//! ([`kf_eval::host_file_check`], `kf_source::host_access`) against clang's preprocessor. An
//! input's bytes are decoded by a grammar ([`decode`]) into a small preprocessor program:
//! `#if`/`#elif`/`#else`/`#endif` and `#ifdef`/`#ifndef` nesting, object- and function-like
//! `#define`s (with `#` and `##`), `#undef`, conditions over `defined`, integer literals of
//! every base and suffix (signed and unsigned mixed, shifts that overflow, unary minus,
//! `?:`), character constants, comments that span lines, line splices, string and raw string
//! literals, and include-like constructs naming a sentinel file (`#include`, `#include_next`,
//! `#import`, `#embed`, `__has_include`, `#pragma GCC dependency`, `_Pragma`, a computed
//! include, a pasted `__has_include`), some disguised (`%:`, a comment inside the directive,
//! a splice inside its name, a comment spanning lines before it).
//!
//! The property: **when the check passes the program, clang neither reads nor probes the
//! sentinel.** Clang runs only on programs the check passes (a refusal needs no oracle), with
//! the sentinel present (holding a marker; `-H` lists every file clang opens) and then absent;
//! a marker or a `-H` line in the first run, or a different output or exit status between the
//! two, means clang looked at the file, and the harness panics with the program.
//!
//! Spawning clang is slow (two runs, about 20 ms each), so inputs are bounded to
//! [`MAX_ORACLE_INPUT`] bytes and the program to [`MAX_STATEMENTS`] statements. Without
//! clang the harness cannot decide anything: the target's `init` stops the fuzzer with a
//! message, and the crate's tests skip (kind `CLANG`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kf_core::{KernelSource, Language};

/// The largest input (bytes) the oracle target decodes; longer inputs are ignored.
pub const MAX_ORACLE_INPUT: usize = 1024;

/// The most statements a decoded program holds.
pub const MAX_STATEMENTS: usize = 40;

/// Stands for the sentinel's absolute path in a decoded program.
const SENTINEL: &str = "@SENTINEL@";

/// The sentinel's file name (also written relative: clang searches the working folder).
const SENTINEL_NAME: &str = "oracle_sentinel.h";

/// What the sentinel holds: a token that appears in clang's output when it is included.
const READ_MARKER: &str = "ORACLE_SENTINEL_WAS_READ";

/// How long one clang run may take before the input counts as undecided (a macro that
/// expands exponentially is no finding of the check).
const CLANG_TIMEOUT: Duration = Duration::from_secs(5);

/// clang's output beyond this is dropped (both runs are cut alike, so they still compare).
const OUTPUT_CAP: usize = 1 << 20;

/// The language a program is preprocessed as, and the policy it is checked under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `clang -x cl` (OpenCL C), checked as an OpenCL kernel.
    OpenCl,
    /// `clang -x c`, checked as an OpenCL kernel (the same C preprocessor, no OpenCL header).
    C,
    /// `clang -x c++ -std=c++17` (raw strings), checked as a SYCL kernel.
    Sycl,
    /// `clang -x c++ -std=c++17`, checked as a CUDA kernel (NVRTC's preprocessor is
    /// clang-like; its policy allows inline assembly).
    Cuda,
}

impl Dialect {
    /// clang's arguments that select the language.
    fn clang_args(self) -> &'static [&'static str] {
        match self {
            Dialect::OpenCl => &["-x", "cl"],
            Dialect::C => &["-x", "c"],
            Dialect::Sycl | Dialect::Cuda => &["-x", "c++", "-std=c++17"],
        }
    }

    /// The kernel language the check applies its policy for.
    fn language(self) -> Language {
        match self {
            Dialect::OpenCl | Dialect::C => Language::OpenCl,
            Dialect::Sycl => Language::Sycl,
            Dialect::Cuda => Language::Cuda,
        }
    }

    fn raw_strings(self) -> bool {
        matches!(self, Dialect::Sycl | Dialect::Cuda)
    }
}

/// The input's bytes, read one at a time; past the end every byte reads as 0 (so any input
/// decodes, and a short one to a short program).
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// Names the programs define, test and call.
const NAMES: [&str; 6] = ["A", "B", "C", "D", "P", "Q"];
/// Function-like macros' names.
const FUNCS: [&str; 3] = ["CAT", "STR", "F"];
/// Integer values, the interesting corners of 64-bit signed and unsigned arithmetic.
const VALUES: [u64; 14] = [
    0,
    1,
    2,
    7,
    63,
    64,
    255,
    0x7fff_ffff,
    0xffff_ffff,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_ffff,
    1 << 32,
    10,
];
const SUFFIXES: [&str; 14] = [
    "", "", "u", "U", "l", "L", "ul", "UL", "lu", "ll", "LL", "ull", "ULL", "llu",
];
const CHARS: [&str; 9] = [
    "'a'", "'\\n'", "'\\x7f'", "'\\xff'", "'\\0'", "'\\377'", "'\\''", "'\"'", "'#'",
];
const BINARY: [&str; 18] = [
    "+", "-", "*", "/", "%", "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "&", "|", "^", "&&",
    "||",
];

/// The program generator: the text so far and the open conditionals.
struct Gen<'a, 'b> {
    input: &'a mut Bytes<'b>,
    dialect: Dialect,
    out: String,
    /// Per open `#if`: whether its `#else` has been written.
    open: Vec<bool>,
    in_comment: bool,
}

impl Gen<'_, '_> {
    fn line(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn name(&mut self) -> &'static str {
        self.input.pick(&NAMES)
    }

    fn int(&mut self) -> String {
        let v = self.input.pick(&VALUES);
        let suffix = self.input.pick(&SUFFIXES);
        match self.input.below(4) {
            0 | 1 => format!("{v}{suffix}"),
            2 => format!("0x{v:x}{suffix}"),
            _ => format!("0{v:o}{suffix}"),
        }
    }

    fn atom(&mut self) -> String {
        match self.input.below(10) {
            0..=2 => self.int(),
            3 => self.input.pick(&CHARS).to_owned(),
            4 | 5 => self.name().to_owned(),
            6 => format!("defined({})", self.name()),
            7 => format!("defined {}", self.name()),
            8 => {
                let f = self.input.pick(&FUNCS);
                format!("{f}({}, {})", self.name(), self.name())
            }
            _ => format!(
                "__has_include(<{}>)",
                self.input.pick(&["stdint.h", "limits"])
            ),
        }
    }

    fn expr(&mut self, depth: u8) -> String {
        if depth == 0 {
            return self.atom();
        }
        match self.input.below(8) {
            0 => {
                let op = self.input.pick(&["-", "!", "~", "+"]);
                format!("{op}{}", self.expr(depth - 1))
            }
            1..=3 => {
                let op = self.input.pick(&BINARY);
                format!("{} {op} {}", self.expr(depth - 1), self.expr(depth - 1))
            }
            4 => format!(
                "{} ? {} : {}",
                self.expr(depth - 1),
                self.expr(depth - 1),
                self.expr(depth - 1)
            ),
            5 => format!("({})", self.expr(depth - 1)),
            _ => self.atom(),
        }
    }

    /// A macro body: an expression, pieces to paste, or a payload's pieces.
    fn body(&mut self) -> String {
        match self.input.below(8) {
            0..=3 => self.expr(2),
            4 => format!("\"{SENTINEL}\""),
            5 => format!("<{SENTINEL}>"),
            6 => self
                .input
                .pick(&[
                    "__has_",
                    "include",
                    "__has_include",
                    "_Pragma",
                    "GCC dependency",
                ])
                .to_owned(),
            _ => String::new(),
        }
    }

    /// A directive with a disguise around its `#` and name.
    fn directive(&mut self, name: &str, operand: &str) {
        let text = match self.input.below(10) {
            0 => format!("  #  {name} {operand}"),
            1 => format!("%:{name} {operand}"),
            2 => format!("#/* c */{name} {operand}"),
            3 => {
                let (head, tail) = name.split_at(name.len() / 2);
                format!("#{head}\\\n{tail} {operand}")
            }
            4 => format!("/*\n*/ #{name} {operand}"),
            5 => format!("#{name} /*\n*/ {operand}"),
            _ => format!("#{name} {operand}"),
        };
        self.line(&text);
    }

    /// An include-like construct naming the sentinel.
    fn payload(&mut self) {
        let path = if self.input.below(4) == 0 {
            SENTINEL_NAME.to_owned()
        } else {
            SENTINEL.to_owned()
        };
        match self.input.below(14) {
            0 | 1 => self.directive("include", &format!("\"{path}\"")),
            2 => self.directive("include", &format!("<{path}>")),
            3 => self.directive("include_next", &format!("\"{path}\"")),
            4 => self.directive("import", &format!("\"{path}\"")),
            5 => self.directive("embed", &format!("\"{path}\"")),
            6 => {
                self.line(&format!("#define P \"{path}\""));
                self.directive("include", "P");
            }
            7 => {
                self.directive("if", &format!("__has_include(\"{path}\")"));
                self.line("int found_it;");
                self.line("#endif");
            }
            8 => self.directive("pragma", &format!("GCC dependency \"{path}\"")),
            9 => self.line(&format!("_Pragma(\"GCC dependency \\\"{path}\\\"\")")),
            10 => {
                self.line(&format!("#define Q \"GCC dependency \\\"{path}\\\"\""));
                self.line("_Pragma(Q)");
            }
            11 => {
                self.line("#define CAT(a, b) a##b");
                self.directive("if", &format!("CAT(__has_, include)(\"{path}\")"));
                self.line("int found_it;");
                self.line("#endif");
            }
            12 => self.directive("if", &format!("__has_include_next(\"{path}\")\n#endif")),
            _ => self.directive("line", &format!("1 \"{path}\"")),
        }
    }

    /// Text that is not a directive (or only looks like one).
    fn text(&mut self) {
        let expr = self.expr(2);
        match self.input.below(9) {
            0 => self.line(&format!("int v = {expr};")),
            1 => self.line(&format!("const char* s = \"#include \\\"{SENTINEL}\\\"\";")),
            2 => self.line("char q = '\"';"),
            3 => self.line("int don't;"),
            4 if self.dialect.raw_strings() => {
                self.line(&format!("auto r = R\"x(\n#include \"{SENTINEL}\"\n)x\";"))
            }
            4 => self.line(&format!(
                "const char* r = R\"x(\n#include \"{SENTINEL}\"\n)x\";"
            )),
            5 => self.line(&format!("int w = {expr}; \\")),
            6 => {
                let f = self.input.pick(&FUNCS);
                let (a, b) = (self.name(), self.name());
                self.line(&format!("int x = {f}({a}, {b});"))
            }
            7 => self.line("// a comment \\"),
            _ => self.line("found_it"),
        }
    }

    fn statement(&mut self) {
        match self.input.below(16) {
            0 | 1 => {
                let cond = self.expr(3);
                self.directive("if", &cond);
                self.open.push(false);
            }
            2 => {
                let d = self.input.pick(&["ifdef", "ifndef"]);
                let name = self.name();
                self.directive(d, name);
                self.open.push(false);
            }
            3 if self.open.last() == Some(&false) => {
                let cond = self.expr(3);
                self.directive("elif", &cond);
            }
            4 if self.open.last() == Some(&false) => {
                self.line("#else");
                if let Some(seen) = self.open.last_mut() {
                    *seen = true;
                }
            }
            5 if !self.open.is_empty() => {
                self.line("#endif");
                self.open.pop();
            }
            6 => {
                let name = self.name();
                let body = self.body();
                self.line(&format!("#define {name} {body}"));
            }
            7 => {
                let f = self.input.pick(&FUNCS);
                let body = self.input.pick(&[
                    "a##b",
                    "#a",
                    "a b",
                    "STR(a)",
                    "a(b)",
                    "__has_##a",
                    "a %:%: b",
                    "CAT(a, b)",
                ]);
                self.line(&format!("#define {f}(a, b) {body}"));
            }
            8 => {
                let name = self.name();
                self.line(&format!("#undef {name}"));
            }
            9..=11 => self.payload(),
            12 => {
                if self.in_comment {
                    self.line("*/");
                } else {
                    self.line("/*");
                }
                self.in_comment = !self.in_comment;
            }
            _ => self.text(),
        }
    }
}

/// Decodes an input into a program: its dialect and its text, where the placeholder
/// `@SENTINEL@` stands for the sentinel's absolute path.
pub fn decode(data: &[u8]) -> (Dialect, String) {
    let mut input = Bytes { data, pos: 0 };
    let dialect = input.pick(&[Dialect::OpenCl, Dialect::C, Dialect::Sycl, Dialect::Cuda]);
    let mut gen = Gen {
        input: &mut input,
        dialect,
        out: String::new(),
        open: Vec::new(),
        in_comment: false,
    };
    for _ in 0..MAX_STATEMENTS {
        if gen.input.done() {
            break;
        }
        gen.statement();
    }
    if gen.in_comment {
        gen.line("*/");
    }
    for _ in 0..gen.open.len() {
        gen.line("#endif");
    }
    (dialect, gen.out)
}

/// The clang to run: `KF_ORACLE_CLANG`, or `clang` on the `PATH`; `None` when it does not
/// run.
pub fn clang() -> Option<&'static str> {
    static CLANG: OnceLock<Option<String>> = OnceLock::new();
    CLANG
        .get_or_init(|| {
            let clang = std::env::var("KF_ORACLE_CLANG").unwrap_or_else(|_| "clang".to_owned());
            let runs = Command::new(&clang)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            runs.then_some(clang)
        })
        .as_deref()
}

/// The folder the sentinel lives in (created once per process); the lock serialises the runs
/// that create and remove it.
fn scratch() -> &'static Mutex<PathBuf> {
    static SCRATCH: OnceLock<Mutex<PathBuf>> = OnceLock::new();
    SCRATCH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("kf-oracle-{}", std::process::id()));
        // A failure shows as an undecided verdict (the sentinel cannot be written).
        let _ = std::fs::create_dir_all(&dir);
        Mutex::new(dir)
    })
}

/// One clang run's result.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Reads a pipe to its end, keeping at most [`OUTPUT_CAP`] bytes.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let room = OUTPUT_CAP.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
        kept
    })
}

/// `clang -E` of `text` in `dir`; `None` when clang could not run or took too long.
fn preprocess(clang: &str, dialect: Dialect, text: &str, dir: &Path) -> Option<Run> {
    let mut child = Command::new(clang)
        .args(["-E", "-P", "-H", "-w", "-ferror-limit=0"])
        .args(dialect.clang_args())
        .args(["-", "-o", "-"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let stdout = drain(child.stdout.take()?);
    let stderr = drain(child.stderr.take()?);
    if let Some(mut stdin) = child.stdin.take() {
        // clang may stop reading early (a fatal error); the exit status tells.
        let _ = stdin.write_all(text.as_bytes());
    }
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < CLANG_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(1))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some(Run {
        status: status.code(),
        stdout: stdout.join().ok()?,
        stderr: stderr.join().ok()?,
    })
}

/// What clang did with the sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It opened the file (its marker is in the output, or `-H` lists it).
    Read,
    /// Its output or exit status depends on whether the file exists.
    Probed,
    /// Neither.
    Untouched,
    /// clang did not finish (timed out, or could not run).
    Undecided,
}

/// Runs clang on `text` (with the placeholder replaced by the sentinel's path) with the
/// sentinel present, then absent.
pub fn clang_verdict(clang: &str, dialect: Dialect, text: &str) -> Verdict {
    let dir = match scratch().lock() {
        Ok(dir) => dir,
        // A panic while a run held the lock leaves the folder as good as before.
        Err(poisoned) => poisoned.into_inner(),
    };
    let sentinel = dir.join(SENTINEL_NAME);
    let text = text.replace(SENTINEL, &sentinel.to_string_lossy());
    if std::fs::write(&sentinel, format!("{READ_MARKER}\n")).is_err() {
        return Verdict::Undecided;
    }
    let present = preprocess(clang, dialect, &text, &dir);
    let _ = std::fs::remove_file(&sentinel);
    let Some(present) = present else {
        return Verdict::Undecided;
    };
    let listed = String::from_utf8_lossy(&present.stderr).lines().any(|l| {
        l.starts_with('.')
            && l.trim_start_matches('.')
                .trim_start()
                .ends_with(SENTINEL_NAME)
    });
    let marked = String::from_utf8_lossy(&present.stdout).contains(READ_MARKER);
    if listed || marked {
        return Verdict::Read;
    }
    let Some(absent) = preprocess(clang, dialect, &text, &dir) else {
        return Verdict::Undecided;
    };
    if absent.status != present.status || absent.stdout != present.stdout {
        Verdict::Probed
    } else {
        Verdict::Untouched
    }
}

/// The evaluator's check of `text` as a kernel of `dialect`'s language.
fn check_passes(dialect: Dialect, text: &str) -> bool {
    let source = KernelSource::new(dialect.language(), "oracle", text.to_owned());
    kf_eval::host_file_check(&source).is_ok()
}

/// The target `host_access_oracle`: one input.
///
/// # Panics
///
/// When the check passes a program clang reads or probes the sentinel for (the finding), or
/// when the check passes a program and clang is not installed (see [`clang`]; the tests skip
/// before calling this, the target's `init` stops first).
pub fn host_access_oracle(data: &[u8]) {
    if data.len() > MAX_ORACLE_INPUT {
        return;
    }
    let (dialect, text) = decode(data);
    // The check sees a path of the shape clang will see; only the folder differs.
    let checked = text.replace(SENTINEL, &format!("/tmp/kf-oracle/{SENTINEL_NAME}"));
    if !check_passes(dialect, &checked) {
        return;
    }
    let Some(clang) = clang() else {
        panic!("host_access_oracle needs clang (apt-get install clang, or KF_ORACLE_CLANG)");
    };
    let verdict = clang_verdict(clang, dialect, &text);
    assert!(
        !matches!(verdict, Verdict::Read | Verdict::Probed),
        "the host-file check passed a {dialect:?} program clang's preprocessor {verdict:?} \
         the sentinel for:\n{text}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_decodes_to_balanced_conditionals() {
        for seed in 0u32..2000 {
            let data: Vec<u8> = (0..64u32)
                .map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 40503) >> 7) as u8)
                .collect();
            let (_, text) = decode(&data);
            assert!(!text.is_empty());
        }
        assert_eq!(decode(b"").1, "");
    }

    /// The oracle itself: clang's verdict on programs whose answer is known, and the check's
    /// refusal of each that clang looks at the file for.
    #[test]
    fn the_oracle_sees_what_clang_reads() {
        let Some(clang) = clang() else {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Clang,
                "no clang: the host_access_oracle target needs clang's preprocessor as its \
                 oracle (apt-get install clang, or KF_ORACLE_CLANG=/path/to/clang)",
            );
            return;
        };
        let cases = [
            ("#include \"@SENTINEL@\"\n", Verdict::Read),
            ("#include \"oracle_sentinel.h\"\n", Verdict::Read),
            (
                "#if 0\n#include \"@SENTINEL@\"\n#endif\n",
                Verdict::Untouched,
            ),
            (
                "#if -1 > 0u\n#include \"@SENTINEL@\"\n#endif\n",
                Verdict::Read,
            ),
            (
                "#if (1ULL << 63) > 0\n#include \"@SENTINEL@\"\n#endif\n",
                Verdict::Read,
            ),
            (
                "#if __has_include(\"@SENTINEL@\")\nyes\n#endif\n",
                Verdict::Probed,
            ),
            (
                "#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"@SENTINEL@\")\nyes\n#endif\n",
                Verdict::Probed,
            ),
            ("int x = 1;\n", Verdict::Untouched),
        ];
        for (text, expected) in cases {
            assert_eq!(clang_verdict(clang, Dialect::C, text), expected, "{text}");
            if expected != Verdict::Untouched {
                let checked = text.replace(SENTINEL, "/tmp/kf-oracle/oracle_sentinel.h");
                assert!(!check_passes(Dialect::C, &checked), "{text}");
            }
        }
    }
}

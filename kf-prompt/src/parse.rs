//! Reading a model's reply: fenced code blocks for the kernel and its manifest, or
//! SEARCH/REPLACE edits of the parent applied with whitespace-tolerant matching.

use serde::{Deserialize, Serialize};

/// A fenced code block of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The info string's first word, lower case (`opencl`, `toml`, `toml:gemm.toml`, or empty).
    pub lang: String,
    /// The last line of text above the opening fence, lower case and without markdown
    /// decoration (`manifest`, `gemm.toml`, `kernel`), or empty: the file label a model often
    /// writes above a block.
    pub label: String,
    /// The text between the fences.
    pub text: String,
    /// False when the reply ended before the closing fence.
    pub closed: bool,
}

impl CodeBlock {
    /// The block of the `lines` read between its fences (`closed`: the closing one was found).
    fn of_lines(lang: String, label: &str, lines: &[&str], closed: bool) -> Self {
        CodeBlock {
            lang,
            label: label.to_owned(),
            text: lines.join("\n"),
            closed,
        }
    }
}

/// Every fenced block (```` ``` ```` or `~~~`, three or more) in order. A closing fence glued to
/// the end of a code line (`}```) also closes the block.
pub fn code_blocks(reply: &str) -> Vec<CodeBlock> {
    let mut out = Vec::new();
    let mut open: Option<(char, usize, String, Vec<&str>)> = None;
    let mut label = String::new();
    let mut block_label = String::new();
    for line in reply.lines() {
        let trimmed = line.trim();
        match open.take() {
            None => {
                if fence(trimmed).is_none() && !trimmed.is_empty() {
                    label = label_of(trimmed);
                }
                if let Some((ch, n)) = fence(trimmed) {
                    block_label = std::mem::take(&mut label);
                    let info = trimmed[n * ch.len_utf8()..].trim();
                    let lang = info
                        .split(|c: char| c.is_whitespace() || c == '{' || c == ',')
                        .next()
                        .unwrap_or("")
                        .to_ascii_lowercase();
                    open = Some((ch, n, lang, Vec::new()));
                }
            }
            Some((ch, n, lang, mut lines)) => {
                let closing = fence(trimmed)
                    .filter(|(c, m)| *c == ch && *m >= n && trimmed.chars().all(|x| x == ch));
                if closing.is_some() {
                    out.push(CodeBlock::of_lines(lang, &block_label, &lines, true));
                    continue;
                }
                let glued: String = std::iter::repeat_n(ch, n).collect();
                if let Some(code) = line.trim_end().strip_suffix(glued.as_str()) {
                    if !code.trim().is_empty() {
                        lines.push(code);
                        out.push(CodeBlock::of_lines(lang, &block_label, &lines, true));
                        continue;
                    }
                }
                lines.push(line);
                open = Some((ch, n, lang, lines));
            }
        }
    }
    if let Some((_, _, lang, lines)) = open {
        out.push(CodeBlock::of_lines(lang, &block_label, &lines, false));
    }
    out
}

/// A line of text as a file label: lower case, without markdown decoration (`**`, `#`, a
/// trailing colon, backticks).
fn label_of(line: &str) -> String {
    line.trim_matches(|c: char| "`*#:_ ".contains(c))
        .to_ascii_lowercase()
}

/// Which file a label names, if it names one: `manifest`, `toml`, `ini`, a `.toml` file, or
/// a fence info such as `toml:gemm.toml` name the manifest; `kernel`, a kernel language or a
/// kernel file name (`gemm.cl`, `k.cu`) name the kernel.
fn named_target(label: &str) -> Option<EditTarget> {
    let label = label.trim();
    if label.is_empty() {
        return None;
    }
    let words: Vec<&str> = label
        .split(|c: char| c.is_whitespace() || c == ':' || c == '(' || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let manifest = |w: &str| {
        let w = w.trim_matches(|c: char| "`*#_.'\"".contains(c));
        matches!(w, "manifest" | "toml" | "ini" | "cfg") || w.ends_with(".toml")
    };
    if words.iter().any(|w| manifest(w)) {
        return Some(EditTarget::Manifest);
    }
    let kernel = |w: &str| {
        let w = w.trim_matches(|c: char| "`*#_'\"".contains(c));
        w == "kernel"
            || KERNEL_LANGS.contains(&w)
            || [".cl", ".cu", ".cpp", ".c", ".hpp", ".h"]
                .iter()
                .any(|ext| w.len() > ext.len() && w.ends_with(ext))
    };
    words
        .iter()
        .any(|w| kernel(w))
        .then_some(EditTarget::Kernel)
}

/// `(fence char, length)` when `line` starts with a fence.
fn fence(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|c| *c == ch).count();
    (n >= 3).then_some((ch, n))
}

/// What an edit changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditTarget {
    /// The kernel source.
    Kernel,
    /// The manifest.
    Manifest,
}

impl EditTarget {
    /// `kernel` or `manifest`.
    pub fn as_str(self) -> &'static str {
        match self {
            EditTarget::Kernel => "kernel",
            EditTarget::Manifest => "manifest",
        }
    }
}

/// One SEARCH/REPLACE edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    /// Which file it edits.
    pub target: EditTarget,
    /// Lines to find.
    pub search: String,
    /// Lines to put in their place.
    pub replace: String,
}

fn marker(line: &str, ch: char, word: Option<&str>) -> bool {
    let t = line.trim();
    let n = t.chars().take_while(|c| *c == ch).count();
    if n < 5 {
        return false;
    }
    let rest = t[n..].trim();
    match word {
        Some(w) => rest.eq_ignore_ascii_case(w),
        None => rest.is_empty(),
    }
}

/// The SEARCH/REPLACE edits of a reply, in order; `Ok(empty)` when it has none, `Err` when an
/// edit block is malformed. The target is named on a line before `<<<<<<< SEARCH` (`kernel`,
/// `manifest`, a `.toml` file name) or by the fence around the edit (```` ```toml ````,
/// ```` ```ini ````); a file label written right above a fence wins over the fence's own
/// label (`manifest` above ```` ```diff ```` edits the manifest). The default is the kernel.
pub fn parse_edits(reply: &str) -> Result<Vec<Edit>, EditError> {
    enum State {
        Outside,
        Search(Vec<String>),
        Replace(Vec<String>, Vec<String>),
    }
    let mut edits = Vec::new();
    let mut state = State::Outside;
    // The file the next edit changes, and whether the last line of text named a file.
    let mut target = EditTarget::Kernel;
    let mut label_named = false;
    for line in reply.lines() {
        state = match state {
            State::Outside => {
                if marker(line, '<', Some("SEARCH")) {
                    State::Search(Vec::new())
                } else {
                    let t = line.trim();
                    if let Some((ch, n)) = fence(t) {
                        // A fence's own label (```toml, ```diff) counts only when no file
                        // label was written right above it: `manifest` then ```diff edits the
                        // manifest.
                        let info = label_of(&t[n * ch.len_utf8()..]);
                        if !label_named {
                            if let Some(named) = named_target(&info) {
                                target = named;
                            }
                        }
                    } else if !t.is_empty() {
                        let label = label_of(t);
                        // A short line naming a file is a label; prose is not.
                        label_named =
                            label.split_whitespace().count() <= 4 && named_target(&label).is_some();
                        target = if label.contains("manifest")
                            || named_target(&label) == Some(EditTarget::Manifest)
                        {
                            EditTarget::Manifest
                        } else {
                            EditTarget::Kernel
                        };
                    }
                    State::Outside
                }
            }
            State::Search(mut s) => {
                if marker(line, '=', None) {
                    State::Replace(s, Vec::new())
                } else if marker(line, '<', Some("SEARCH")) || marker(line, '>', Some("REPLACE")) {
                    return Err(EditError::NoDivider);
                } else {
                    s.push(line.to_owned());
                    State::Search(s)
                }
            }
            State::Replace(s, mut r) => {
                if marker(line, '>', Some("REPLACE")) {
                    edits.push(Edit {
                        target,
                        search: s.join("\n"),
                        replace: r.join("\n"),
                    });
                    State::Outside
                } else if marker(line, '<', Some("SEARCH")) {
                    return Err(EditError::NoEndMarker);
                } else {
                    r.push(line.to_owned());
                    State::Replace(s, r)
                }
            }
        };
    }
    match state {
        State::Outside => Ok(edits),
        State::Search(_) => Err(EditError::EndedInSearch),
        State::Replace(..) => Err(EditError::EndedInReplace),
    }
}

fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Applies one edit to `text`: an exact match first, then a line-by-line match that ignores
/// differences in whitespace (indentation, trailing spaces, blank lines around the SEARCH part).
pub fn apply_edit(text: &str, search: &str, replace: &str) -> Result<String, EditError> {
    if search.trim().is_empty() {
        return Err(EditError::EmptySearch);
    }
    if let Some(at) = text.find(search) {
        let mut out = String::with_capacity(text.len() + replace.len());
        out.push_str(&text[..at]);
        out.push_str(replace);
        out.push_str(&text[at + search.len()..]);
        return Ok(out);
    }
    let lines: Vec<&str> = text.lines().collect();
    let wanted: Vec<String> = {
        let all: Vec<&str> = search.lines().collect();
        let first = all.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
        let last = all.iter().rposition(|l| !l.trim().is_empty()).unwrap_or(0);
        all[first..=last].iter().map(|l| normalise(l)).collect()
    };
    let normal: Vec<String> = lines.iter().map(|l| normalise(l)).collect();
    let found = (0..lines.len().saturating_sub(wanted.len() - 1))
        .find(|&i| normal[i..i + wanted.len()] == wanted[..]);
    let Some(i) = found else {
        let first = search
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Err(EditError::NoMatch {
            start: first.chars().take(80).collect(),
        });
    };
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    out.extend_from_slice(&lines[..i]);
    out.extend(replace.lines());
    out.extend_from_slice(&lines[i + wanted.len()..]);
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    Ok(joined)
}

/// Applies the edits of one target in order.
pub fn apply_edits(text: &str, edits: &[Edit], target: EditTarget) -> Result<String, EditError> {
    let mut out = text.to_owned();
    for (i, e) in edits.iter().filter(|e| e.target == target).enumerate() {
        out = apply_edit(&out, &e.search, &e.replace).map_err(|why| EditError::Edit {
            target,
            number: i + 1,
            source: Box::new(why),
        })?;
    }
    Ok(out)
}

/// Why a reply's SEARCH/REPLACE edits could not be read or applied; the message is what the
/// next prompt tells the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// A SEARCH part without its divider.
    #[error("an edit has `<<<<<<< SEARCH` but no `=======` divider")]
    NoDivider,
    /// A REPLACE part without its end marker.
    #[error("an edit is missing its `>>>>>>> REPLACE` end marker")]
    NoEndMarker,
    /// The reply ended inside a SEARCH part.
    #[error("the reply ended inside the SEARCH part of an edit")]
    EndedInSearch,
    /// The reply ended inside a REPLACE part.
    #[error("the reply ended before an edit's `>>>>>>> REPLACE` marker")]
    EndedInReplace,
    /// A SEARCH part with nothing in it.
    #[error("an edit has an empty SEARCH part")]
    EmptySearch,
    /// A SEARCH part that is not in the text, even ignoring whitespace.
    #[error(
        "the SEARCH part starting `{start}` does not match the current text, even ignoring whitespace"
    )]
    NoMatch {
        /// The SEARCH part's first line, up to 80 characters.
        start: String,
    },
    /// Edit `number` (from 1) of `target` did not apply.
    #[error("{} edit {number}: {source}", target.as_str())]
    Edit {
        /// The file it edits.
        target: EditTarget,
        /// Its number among that file's edits, from 1.
        number: usize,
        /// Why it did not apply.
        source: Box<EditError>,
    },
}

/// Why a model's manifest is no manifest at all ([`lenient_manifest`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LenientManifestError {
    /// Not TOML.
    #[error("the manifest is not valid TOML: {message}")]
    NotToml {
        /// The TOML parser's message.
        message: String,
    },
    /// The repaired table could not be written back as TOML.
    #[error("the manifest cannot be written back: {message}")]
    Unwritable {
        /// The TOML writer's message.
        message: String,
    },
}

/// A kernel drawn from a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDraft {
    /// The kernel source.
    pub text: String,
    /// Its manifest (`None`: keep the parent's).
    pub manifest: Option<String>,
    /// How it was obtained (`full rewrite`, `2 edits`, …).
    pub how: String,
    /// What the model should hear about how its reply was read (a manifest found in an
    /// ```` ```ini ```` fence, a key ignored, a default taken from the parent).
    pub notes: Vec<String>,
}

/// Why a reply yielded no kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    /// A reason the next prompt can show the model.
    pub reason: String,
    /// True when the reply held edits that did not apply (worth asking for a full rewrite).
    pub edits_failed: bool,
}

impl Unusable {
    fn new(reason: impl Into<String>) -> Self {
        Unusable {
            reason: reason.into(),
            edits_failed: false,
        }
    }
}

const KERNEL_LANGS: [&str; 13] = [
    "c", "cl", "opencl", "opencl-c", "cpp", "c++", "cxx", "cuda", "cu", "sycl", "hip", "glsl",
    "metal",
];

/// Whether a block holds a manifest: its fence or the label above it names one (`toml`,
/// `manifest`, `ini`, `toml:gemm.toml`, `gemm.toml`), or its text parses as TOML with a
/// manifest's keys (`[launch]`, `[params]` or `entry`), whatever the fence says.
fn looks_like_manifest(b: &CodeBlock) -> bool {
    if b.text.contains("<<<<<<<") {
        return false;
    }
    if named_target(&b.lang) == Some(EditTarget::Manifest) {
        return true;
    }
    if named_target(&b.lang) == Some(EditTarget::Kernel) {
        return false;
    }
    if named_target(&b.label) == Some(EditTarget::Manifest)
        && b.label.split_whitespace().count() <= 4
    {
        return true;
    }
    parses_as_manifest(&b.text)
}

/// TOML with at least one of a manifest's own keys.
fn parses_as_manifest(text: &str) -> bool {
    match text.parse::<toml::Table>() {
        Ok(t) => {
            t.get("launch").is_some_and(toml::Value::is_table)
                || t.get("params").is_some_and(toml::Value::is_table)
                || t.get("entry").is_some_and(toml::Value::is_str)
        }
        Err(_) => false,
    }
}

fn looks_like_kernel(b: &CodeBlock) -> bool {
    if looks_like_manifest(b) || b.text.contains("<<<<<<<") {
        return false;
    }
    KERNEL_LANGS.contains(&b.lang.as_str())
        || [
            "__kernel",
            "kernel void",
            "__global__",
            "void ",
            "#define",
            "#pragma",
        ]
        .iter()
        .any(|p| b.text.contains(p))
}

/// Draws a kernel from a reply: SEARCH/REPLACE edits of the parent's source and manifest if
/// the reply has any, otherwise the last kernel block (preferring one that defines `entry`)
/// and the last manifest block. `cut_off` says the reply stopped at the token limit.
pub fn draft_from_reply(
    reply: &str,
    entry: &str,
    parent_text: &str,
    parent_manifest: Option<&str>,
    cut_off: bool,
) -> Result<KernelDraft, Unusable> {
    if reply.trim().is_empty() {
        return Err(Unusable::new("the reply was empty"));
    }
    let edits = match parse_edits(reply) {
        Ok(e) => e,
        Err(why) => {
            return Err(Unusable {
                reason: if cut_off {
                    format!("{why} (the reply was cut off at the token limit)")
                } else {
                    why.to_string()
                },
                edits_failed: true,
            })
        }
    };
    if !edits.is_empty() {
        return draft_from_edits(&edits, parent_text, parent_manifest);
    }
    draft_from_blocks(reply, entry, parent_text, cut_off)
}

/// The draft a reply's SEARCH/REPLACE edits make of the parent's source and manifest; an
/// error marked `edits_failed` (so a full rewrite may be asked for) when they do not apply or
/// change nothing.
fn draft_from_edits(
    edits: &[Edit],
    parent_text: &str,
    parent_manifest: Option<&str>,
) -> Result<KernelDraft, Unusable> {
    let failed = |reason: String| Unusable {
        reason,
        edits_failed: true,
    };
    let text =
        apply_edits(parent_text, edits, EditTarget::Kernel).map_err(|e| failed(e.to_string()))?;
    let manifest_edits = edits
        .iter()
        .filter(|e| e.target == EditTarget::Manifest)
        .count();
    let manifest = if manifest_edits > 0 {
        let Some(m) = parent_manifest else {
            return Err(failed(
                "manifest edits were given but the parent has no manifest".into(),
            ));
        };
        Some(apply_edits(m, edits, EditTarget::Manifest).map_err(|e| failed(e.to_string()))?)
    } else {
        None
    };
    if text == parent_text
        && manifest
            .as_deref()
            .is_none_or(|m| Some(m) == parent_manifest)
    {
        return Err(failed("the edits change nothing".into()));
    }
    Ok(KernelDraft {
        text,
        manifest,
        how: format!(
            "{} edit{}",
            edits.len(),
            if edits.len() == 1 { "" } else { "s" }
        ),
        notes: Vec::new(),
    })
}

/// The draft a reply's fenced blocks make: the last kernel block (preferring one that defines
/// `entry`) and the last manifest block; the parent's text when only a manifest came back.
fn draft_from_blocks(
    reply: &str,
    entry: &str,
    parent_text: &str,
    cut_off: bool,
) -> Result<KernelDraft, Unusable> {
    let blocks = code_blocks(reply);
    if blocks.is_empty() {
        return Err(Unusable::new(if cut_off {
            "the reply has no fenced code block and no SEARCH/REPLACE edit (it was cut off at the token limit)"
        } else {
            "the reply has no fenced code block and no SEARCH/REPLACE edit"
        }));
    }
    let manifest = blocks.iter().rev().find(|b| looks_like_manifest(b));
    let kernels: Vec<&CodeBlock> = blocks.iter().filter(|b| looks_like_kernel(b)).collect();
    let kernel = kernels
        .iter()
        .rev()
        .find(|b| b.text.contains(entry))
        .or_else(|| kernels.last())
        .copied();
    for b in [kernel, manifest].into_iter().flatten() {
        if !b.closed && cut_off {
            return Err(Unusable::new(
                "the reply was cut off at the token limit inside a code block",
            ));
        }
    }
    let notes: Vec<String> = manifest.and_then(manifest_fence_note).into_iter().collect();
    match (kernel, manifest) {
        (Some(k), m) => {
            if k.text.trim().is_empty() {
                return Err(Unusable::new("the kernel code block is empty"));
            }
            Ok(KernelDraft {
                text: format!("{}\n", k.text.trim_end()),
                manifest: m.map(|m| format!("{}\n", m.text.trim())),
                how: if m.is_some() {
                    "full rewrite".into()
                } else {
                    "full rewrite (no manifest in the reply: the parent's is kept)".into()
                },
                notes,
            })
        }
        (None, Some(m)) => Ok(KernelDraft {
            text: parent_text.to_owned(),
            manifest: Some(format!("{}\n", m.text.trim())),
            how: "manifest rewrite".into(),
            notes,
        }),
        (None, None) => Err(Unusable::new(format!(
            "none of the reply's {} code block(s) holds a kernel or a manifest",
            blocks.len()
        ))),
    }
}

/// A note that the manifest came from a fence not labelled `toml` (the reply is still used,
/// but the model is told how it was read).
fn manifest_fence_note(m: &CodeBlock) -> Option<String> {
    if m.lang == "toml" {
        return None;
    }
    let fence = if m.lang.is_empty() {
        "an unlabelled fence".to_owned()
    } else {
        format!("a ```{} fence", m.lang)
    };
    Some(format!("the manifest was read from {fence}"))
}

/// Removes the keys of `table` not in `known`, with a note each (`prefix` names the section).
fn drop_unknown_keys(
    table: &mut toml::Table,
    known: &[&str],
    prefix: &str,
    notes: &mut Vec<String>,
) {
    let unknown: Vec<String> = table
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in unknown {
        table.remove(&k);
        notes.push(format!(
            "the unknown manifest key `{prefix}{k}` was ignored"
        ));
    }
}

/// A manifest from a reply, made loadable by the strict manifest parser, and what was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenientManifest {
    /// The manifest text (the reply's own text when nothing had to change).
    pub text: String,
    /// One line per change: a default taken from the parent, an unknown key ignored.
    pub notes: Vec<String>,
}

/// The lenient reading of a manifest a model wrote (files users write keep the strict
/// loading of `kf_manifest::Manifest::parse`): `entry` and `language` default to the
/// parent's, unknown keys are dropped with a note each, and the result is TOML the strict
/// parser accepts as far as keys go. `Err` says why the text is no manifest at all.
///
/// ```
/// let reply = "speedup = \"2x\"\n[params]\nTS = [8, 16]\n[launch]\nglobal = [\"N\"]\nwhy = 1\n";
/// let m = kf_prompt::parse::lenient_manifest(reply, "gemm", "opencl").unwrap();
/// assert!(m.text.contains("entry = \"gemm\"") && m.text.contains("language = \"opencl\""));
/// assert!(!m.text.contains("speedup") && !m.text.contains("why"));
/// assert_eq!(m.notes.len(), 4);
/// ```
pub fn lenient_manifest(
    text: &str,
    parent_entry: &str,
    parent_language: &str,
) -> Result<LenientManifest, LenientManifestError> {
    // `scratch` and `kernels`: a candidate of several kernels (kf-manifest's sequences).
    const TOP: [&str; 10] = [
        "source",
        "entry",
        "language",
        "description",
        "params",
        "constraints",
        "launch",
        "flags",
        "scratch",
        "kernels",
    ];
    let mut table: toml::Table =
        text.parse()
            .map_err(|e: toml::de::Error| LenientManifestError::NotToml {
                message: e.message().to_owned(),
            })?;
    let mut notes = Vec::new();
    drop_unknown_keys(&mut table, &TOP, "", &mut notes);
    for (section, known) in [
        ("constraints", &["rules"][..]),
        ("launch", &["global", "local"][..]),
    ] {
        if let Some(toml::Value::Table(t)) = table.get_mut(section) {
            drop_unknown_keys(t, known, &format!("{section}."), &mut notes);
        }
    }
    for (key, value) in [("entry", parent_entry), ("language", parent_language)] {
        if !table.contains_key(key) {
            notes.push(format!(
                "`{key}` was missing: the parent's `{value}` is used"
            ));
            table.insert(key.to_owned(), toml::Value::String(value.to_owned()));
        }
    }
    if notes.is_empty() {
        return Ok(LenientManifest {
            text: text.to_owned(),
            notes,
        });
    }
    // `entry` and `language` first, as people write them.
    let mut ordered = toml::Table::new();
    for key in TOP {
        if let Some(v) = table.remove(key) {
            ordered.insert(key.to_owned(), v);
        }
    }
    let text = toml::to_string(&ordered).map_err(|e| LenientManifestError::Unwritable {
        message: e.to_string(),
    })?;
    Ok(LenientManifest { text, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str =
        "__kernel void gemm(int M) {\n    int i = get_global_id(0);\n    C[i] = 0.0f;\n}\n";

    #[test]
    fn blocks_with_langs_and_glued_fences() {
        let b = code_blocks("text\n```opencl\n__kernel void k() {}\n```\nmore\n~~~toml {x}\nentry = \"k\"\n~~~\n```c\nint x;}```\n```\nopen");
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].lang, "opencl");
        assert_eq!(b[1].lang, "toml");
        assert_eq!(b[1].text, "entry = \"k\"");
        assert_eq!(b[2].text, "int x;}");
        assert!(b[2].closed);
        assert!(!b[3].closed);
    }

    #[test]
    fn a_sequence_manifest_keeps_its_kernels_and_scratch() {
        let text = "entry = \"normalise\"\nlanguage = \"opencl\"\nnote = \"dropped\"\n\
                    [[scratch]]\nname = \"S\"\ndtype = \"f32\"\nelements = \"ROWS\"\n\
                    [[kernels]]\nentry = \"stats\"\nwrites = [\"S\"]\nlaunch = { global = [\"ROWS\"] }\n\
                    [[kernels]]\nentry = \"normalise\"\nwrites = [\"Y\"]\nlaunch = { global = [\"ROWS\"] }\n";
        let lenient = lenient_manifest(text, "normalise", "opencl").unwrap();
        assert_eq!(lenient.notes.len(), 1, "{:?}", lenient.notes);
        let m = kf_manifest::Manifest::parse(&lenient.text, "reply.toml", None).unwrap();
        assert_eq!(m.sequence.len(), 2);
        assert_eq!(m.scratch[0].name, "S");
    }

    #[test]
    fn full_rewrite_prefers_the_entry() {
        let reply = "Old:\n```c\nvoid helper() {}\n```\nNew:\n```opencl\n__kernel void gemm(int M) { }\n```\n```toml\nentry = \"gemm\"\n[launch]\nglobal = [\"M\"]\n```\n";
        let d = draft_from_reply(reply, "gemm", PARENT, Some("m"), false).unwrap();
        assert!(d.text.contains("__kernel void gemm"));
        assert!(d.manifest.unwrap().contains("[launch]"));
        assert_eq!(d.how, "full rewrite");
    }

    #[test]
    fn edits_apply_with_whitespace_tolerance() {
        let reply = "kernel\n<<<<<<< SEARCH\n  int i = get_global_id(0);   \n\tC[i] = 0.0f;\n=======\n    int i = get_global_id(0);\n    C[i] = 1.0f;\n>>>>>>> REPLACE\n";
        let d = draft_from_reply(reply, "gemm", PARENT, None, false).unwrap();
        assert!(d.text.contains("C[i] = 1.0f;"));
        assert!(d.text.starts_with("__kernel void gemm"));
        assert_eq!(d.how, "1 edit");
        assert!(d.manifest.is_none());
    }

    #[test]
    fn manifest_edits() {
        let manifest = "entry = \"gemm\"\n[params]\nTS = [8]\n";
        let reply =
            "```toml\n<<<<<<< SEARCH\nTS = [8]\n=======\nTS = [8, 16]\n>>>>>>> REPLACE\n```";
        let d = draft_from_reply(reply, "gemm", PARENT, Some(manifest), false).unwrap();
        assert_eq!(d.text, PARENT);
        assert!(d.manifest.unwrap().contains("TS = [8, 16]"));
    }

    #[test]
    fn unusable_replies_have_reasons() {
        let cases = [
            ("", "empty"),
            ("I would tile the loops.", "no fenced code block"),
            ("```toml\n[x]\n", "cut off"),
            (
                "<<<<<<< SEARCH\nnot in parent\n=======\nx\n>>>>>>> REPLACE",
                "does not match",
            ),
            ("<<<<<<< SEARCH\nx\n", "ended inside the SEARCH"),
            (
                "<<<<<<< SEARCH\n\n=======\nx\n>>>>>>> REPLACE",
                "empty SEARCH",
            ),
            ("```text\nhello\n```", "holds a kernel"),
        ];
        for (reply, want) in cases {
            let e = draft_from_reply(reply, "gemm", PARENT, None, true).unwrap_err();
            assert!(e.reason.contains(want), "{reply:?}: {}", e.reason);
        }
        let e = draft_from_reply(
            "<<<<<<< SEARCH\nnope\n=======\nx\n>>>>>>> REPLACE",
            "gemm",
            PARENT,
            None,
            false,
        )
        .unwrap_err();
        assert!(e.edits_failed);
        let same = "<<<<<<< SEARCH\nC[i] = 0.0f;\n=======\nC[i] = 0.0f;\n>>>>>>> REPLACE";
        assert!(draft_from_reply(same, "gemm", PARENT, None, false)
            .unwrap_err()
            .reason
            .contains("nothing"));
    }

    #[test]
    fn manifests_in_any_fence_are_found() {
        let kernel = "```opencl\n__kernel void gemm(int M) { }\n```\n";
        let manifest = "entry = \"gemm\"\n[params]\nTS = [8]\n[launch]\nglobal = [\"M\"]";
        for (fence, note) in [
            ("```ini", Some("```ini")),
            ("```toml:gemm.toml", Some("```toml:gemm.toml")),
            ("```manifest", Some("```manifest")),
            ("```", Some("an unlabelled fence")),
            ("```text", Some("```text")),
            ("```toml", None),
        ] {
            let reply = format!("Tiles.\n{kernel}\n{fence}\n{manifest}\n```\n");
            let d = draft_from_reply(&reply, "gemm", PARENT, Some("m"), false).unwrap();
            assert!(
                d.manifest.as_deref().unwrap().contains("TS = [8]"),
                "{fence}"
            );
            assert_eq!(d.how, "full rewrite", "{fence}");
            match note {
                Some(n) => assert!(
                    d.notes.iter().any(|x| x.contains(n)),
                    "{fence}: {:?}",
                    d.notes
                ),
                None => assert!(d.notes.is_empty(), "{fence}: {:?}", d.notes),
            }
        }
        // A label above a block of another language names it a manifest.
        let reply = format!("{kernel}\n**gemm.toml**\n```yaml\nwhatever: 1\n```\n");
        let d = draft_from_reply(&reply, "gemm", PARENT, Some("m"), false).unwrap();
        assert!(d.manifest.unwrap().contains("whatever"));
        // No manifest: said so.
        let d = draft_from_reply(kernel, "gemm", PARENT, Some("m"), false).unwrap();
        assert!(
            d.manifest.is_none() && d.how.contains("the parent's is kept"),
            "{}",
            d.how
        );
    }

    #[test]
    fn a_label_above_a_fenced_diff_wins() {
        let manifest = "entry = \"gemm\"\n[params]\nTM = [4, 1, 2, 8]\n";
        let reply = "Reorder.\n\nmanifest\n```diff\n<<<<<<< SEARCH\nTM = [4, 1, 2, 8]\n=======\nTM = [8, 4]\n>>>>>>> REPLACE\n```\n";
        let d = draft_from_reply(reply, "gemm", PARENT, Some(manifest), false).unwrap();
        assert_eq!(d.text, PARENT);
        assert!(d.manifest.unwrap().contains("TM = [8, 4]"));
        // The fence's own label counts when nothing is written above it; a kernel label
        // above a ```toml fence wins over it.
        let edits = parse_edits("```toml\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n`kernel`:\n```toml\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n```").unwrap();
        assert_eq!(edits[0].target, EditTarget::Manifest);
        assert_eq!(edits[1].target, EditTarget::Kernel);
        // Prose that mentions a manifest is no file label for the fence below it.
        let edits = parse_edits("I change the kernel, then the manifest a bit more:\n```opencl\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```").unwrap();
        assert_eq!(edits[0].target, EditTarget::Kernel);
    }

    #[test]
    fn lenient_manifests() {
        let m = lenient_manifest(
            "entry = \"gemm\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"M\"]\n",
            "x",
            "cuda",
        )
        .unwrap();
        assert!(m.notes.is_empty());
        assert!(
            m.text.starts_with("entry = \"gemm\""),
            "unchanged text kept"
        );
        let m = lenient_manifest("[params]\nTS = [8]\n[launch]\nglobal = [\"M\"]\nlocal = [\"TS\"]\nwave = 32\n[constraints]\nrules = []\nnote = \"x\"\n", "gemm", "opencl").unwrap();
        let parsed = kf_manifest::Manifest::parse(&m.text, "reply", None).unwrap();
        assert_eq!(parsed.entry, "gemm");
        assert_eq!(parsed.language, kf_core::Language::OpenCl);
        for want in [
            "`launch.wave`",
            "`constraints.note`",
            "`entry` was missing",
            "`language` was missing",
        ] {
            assert!(
                m.notes.iter().any(|n| n.contains(want)),
                "{want}: {:?}",
                m.notes
            );
        }
        assert!(lenient_manifest("this is = not [toml", "k", "opencl")
            .unwrap_err()
            .to_string()
            .contains("not valid TOML"));
    }

    #[test]
    fn apply_edit_keeps_trailing_newline() {
        let out = apply_edit("a\n  b\nc\n", "b", "B").unwrap();
        assert_eq!(out, "a\n  B\nc\n");
        let out = apply_edit("a\n  b  c\nd\n", "b c", "x").unwrap();
        assert_eq!(out, "a\nx\nd\n");
    }
}

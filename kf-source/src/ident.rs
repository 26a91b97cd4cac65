//! Identifiers in kernel text.

use crate::comments::strip_comments;

/// Whether `c` may appear in a C identifier (after the first character).
pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `name` is a C identifier (`[A-Za-z_][A-Za-z0-9_]*`).
///
/// ```
/// assert!(kf_source::is_identifier("_tile2"));
/// assert!(!kf_source::is_identifier("2x") && !kf_source::is_identifier(""));
/// ```
pub fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(is_ident_char)
}

/// Whether `name` occurs as a whole identifier in `text` outside comments.
///
/// ```
/// use kf_source::uses_identifier;
/// assert!(uses_identifier("x = VW * 2;", "VW"));
/// assert!(!uses_identifier("x = VWX * 2; // VW", "VW"));
/// ```
pub fn uses_identifier(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let code = strip_comments(text);
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(off) = code[from..].find(name) {
        let start = from + off;
        let end = start + name.len();
        let before = start == 0 || !is_ident(bytes[start - 1]);
        let after = end >= bytes.len() || !is_ident(bytes[end]);
        if before && after {
            return true;
        }
        from = end;
    }
    false
}

/// Rewrites the identifiers of `text` for which `f` returns a replacement; numbers (`0x1F`,
/// `2u`) are copied through.
///
/// ```
/// let s = kf_source::replace_identifiers("TS*2 + 0xTS", |id| (id == "TS").then(|| "16".to_owned()));
/// assert_eq!(s, "16*2 + 0xTS");
/// ```
pub fn replace_identifiers(text: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut ident = String::new();
    let mut prev_ident_char = false;
    for c in text.chars() {
        if is_ident_char(c) {
            if ident.is_empty() && prev_ident_char {
                // Part of a number such as `0x1F`: copy through.
                out.push(c);
                continue;
            }
            if ident.is_empty() && c.is_ascii_digit() {
                out.push(c);
                prev_ident_char = true;
                continue;
            }
            ident.push(c);
        } else {
            if !ident.is_empty() {
                out.push_str(&f(&ident).unwrap_or_else(|| ident.clone()));
                ident.clear();
            }
            out.push(c);
            prev_ident_char = false;
            continue;
        }
        prev_ident_char = true;
    }
    if !ident.is_empty() {
        out.push_str(&f(&ident).unwrap_or(ident));
    }
    out
}

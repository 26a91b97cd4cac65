//! Preprocessor directive lines and line continuations.

use crate::ident::is_ident_char;

/// A directive line split into its name and argument: `#  if  A > 1 // note` is
/// `("if", "A > 1")` (a trailing comment is cut); `None` when the line is not a directive.
///
/// ```
/// use kf_source::directive;
/// assert_eq!(directive("  #  elif  A > 1 /* x */"), Some(("elif", "A > 1")));
/// assert_eq!(directive("#endif"), Some(("endif", "")));
/// assert_eq!(directive("x = 1; # not"), None);
/// ```
pub fn directive(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
    let (name, arg) = rest.split_at(end);
    Some((name, cut_comment(arg).trim()))
}

/// `text` up to its first `//` or `/*`.
fn cut_comment(text: &str) -> &str {
    let cut = [text.find("//"), text.find("/*")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(text.len());
    &text[..cut]
}

/// Joins the physical line `lines[i]` with the lines its trailing backslashes continue onto:
/// the logical line (each backslash-newline becomes a space) and how many physical lines it
/// used.
///
/// ```
/// let lines = ["#if A && \\", "    B", "x"];
/// assert_eq!(kf_source::logical_line(&lines, 0), ("#if A &&      B".to_owned(), 2));
/// assert_eq!(kf_source::logical_line(&lines, 2), ("x".to_owned(), 1));
/// ```
pub fn logical_line(lines: &[&str], i: usize) -> (String, usize) {
    let mut logical = lines.get(i).copied().unwrap_or_default().to_owned();
    let mut consumed = 1;
    while logical.trim_end().ends_with('\\') && i + consumed < lines.len() {
        let trimmed = logical.trim_end();
        logical = format!("{} {}", &trimmed[..trimmed.len() - 1], lines[i + consumed]);
        consumed += 1;
    }
    (logical, consumed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuations_chain() {
        let lines = ["#define X \\", "  1 + \\", "  2", "y"];
        let (logical, used) = logical_line(&lines, 0);
        assert_eq!(used, 3);
        assert_eq!(directive(&logical), Some(("define", "X    1 +    2")));
        // A backslash on the last line has nothing to continue onto.
        assert_eq!(logical_line(&["a \\"], 0), ("a \\".to_owned(), 1));
    }

    #[test]
    fn directive_names() {
        assert_eq!(directive("#ifdef TS"), Some(("ifdef", "TS")));
        assert_eq!(directive("#elifndef TS // x"), Some(("elifndef", "TS")));
        assert_eq!(directive("#"), Some(("", "")));
        assert_eq!(directive("#if(A)"), Some(("if", "(A)")));
    }
}

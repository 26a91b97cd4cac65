//! Comments and string literals: one lexer for `//` and `/* */` comments and `"…"` / `'…'`
//! literals, with two outputs ([`strip_comments`], [`strip_comments_and_strings`]).
//!
//! Rules (those of C, made robust for text that is not compiled, such as disabled branches):
//!
//! * a comment becomes one space followed by the newlines it spanned, so that lines stay
//!   where they were; a backslash-newline continues a `//` comment onto the next line;
//! * a literal ends at its closing quote (a backslash escapes the next character) or at the
//!   end of its line (a literal cannot span lines in C, so a stray apostrophe in `#if 0 …
//!   don't … #endif` cannot swallow the rest of the file);
//! * an apostrophe between a digit and an alphanumeric character (`1'000`, a C++14 digit
//!   separator) is not a literal;
//! * comment markers inside literals are not comments.

/// What happens to the contents of string and character literals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Literals {
    /// Kept as they are.
    Keep,
    /// Emptied: `"abc"` becomes `""`.
    Empty,
}

/// `text` with each comment replaced by a space (and the newlines it spanned); string and
/// character literals are kept, comment markers inside them included.
///
/// ```
/// use kf_source::strip_comments;
/// let s = strip_comments("a // x\nb /* y\n */ c \"// not a comment\"");
/// assert_eq!(s, "a  \nb  \n c \"// not a comment\"");
/// ```
pub fn strip_comments(text: &str) -> String {
    scan(text, Literals::Keep)
}

/// Replaces comments by a space (and the newlines they spanned) and the contents of string
/// and character literals by nothing (`"abc"` becomes `""`), keeping every newline.
///
/// ```
/// use kf_source::strip_comments_and_strings;
/// let s = strip_comments_and_strings("a /* __local */ b // barrier(\n\"__shared__\" c");
/// assert_eq!(s, "a   b  \n\"\" c");
/// ```
pub fn strip_comments_and_strings(text: &str) -> String {
    scan(text, Literals::Empty)
}

fn scan(text: &str, literals: Literals) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '/' if next == Some('/') => {
                out.push(' ');
                i += 2;
                while i < chars.len() && chars[i] != '\n' {
                    // A backslash-newline continues a line comment.
                    if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                        out.push('\n');
                        i += 1;
                    }
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                out.push(' ');
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                i += 2;
            }
            '"' | '\'' => {
                let digit_before = i > 0 && chars[i - 1].is_ascii_digit();
                let alnum_after = next.is_some_and(|n| n.is_ascii_alphanumeric());
                if c == '\'' && digit_before && alnum_after {
                    // Digit separator.
                    out.push(c);
                    i += 1;
                    continue;
                }
                out.push(c);
                i += 1;
                while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                    // A backslash escapes the next character (a backslash-newline splices
                    // the line).
                    let len = if chars[i] == '\\' { 2 } else { 1 };
                    let end = (i + len).min(chars.len());
                    match literals {
                        Literals::Keep => out.extend(&chars[i..end]),
                        Literals::Empty => out.extend(chars[i..end].iter().filter(|c| **c == '\n')),
                    }
                    i = end;
                }
                if i < chars.len() && chars[i] == c {
                    out.push(c);
                    i += 1;
                } else if literals == Literals::Empty {
                    // Unterminated: still closed, so that the output stays balanced.
                    out.push(c);
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_markers_in_strings_are_not_comments() {
        let src = "s = \"/* not */ // either\"; /* real \"quote\" */ t = '\\'';";
        assert_eq!(
            strip_comments(src),
            "s = \"/* not */ // either\";   t = '\\'';"
        );
        assert_eq!(strip_comments_and_strings(src), "s = \"\";   t = '';");
    }

    #[test]
    fn nested_looking_comments_end_at_the_first_close() {
        assert_eq!(strip_comments("a /* x /* y */ b */ c"), "a   b */ c");
        assert_eq!(strip_comments("a /* \"*/\" b"), "a  \" b");
    }

    #[test]
    fn lines_are_preserved() {
        let src = "a /* 1\n2\n*/ b // c \\\n continued\nd";
        let out = strip_comments(src);
        assert_eq!(out.lines().count(), src.lines().count());
        assert_eq!(out, "a  \n\n b  \n\nd");
    }

    #[test]
    fn literals_end_at_the_line_and_digit_separators_are_not_literals() {
        let src = "#if 0\ndon't\n#endif\nint x = 1'000;\n";
        assert_eq!(
            strip_comments_and_strings(src),
            "#if 0\ndon''\n#endif\nint x = 1'000;\n"
        );
        assert_eq!(strip_comments("x = 'a"), "x = 'a");
        assert_eq!(strip_comments("/* open"), " ");
    }
}

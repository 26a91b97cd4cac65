//! Tokens of kernel text, for comparisons that must not see layout: whitespace folding (the
//! LLM mutator's fingerprint) and the novelty filter's normalised form.

/// What kind of token a [`Token`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// An identifier or keyword.
    Ident,
    /// A number (`16`, `0x1F`, `1.5e-3f`, `2u`).
    Number,
    /// A string or character literal, quotes included.
    Literal,
    /// One punctuation character (`<<` is two tokens).
    Punct,
}

/// One token: its kind and its text (a slice of the input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token<'a> {
    /// The kind.
    pub kind: TokenKind,
    /// The text.
    pub text: &'a str,
}

/// The tokens of `text`, which should have its comments stripped
/// ([`strip_comments`](crate::strip_comments)); whitespace separates tokens and is dropped.
/// An unterminated literal ends at the end of its line.
///
/// ```
/// use kf_source::{tokens, TokenKind};
/// let t: Vec<&str> = tokens("a[i] += 0x1Fu * \"s\";").iter().map(|t| t.text).collect();
/// assert_eq!(t, ["a", "[", "i", "]", "+", "=", "0x1Fu", "*", "\"s\"", ";"]);
/// assert_eq!(tokens("1.5e-3f")[0].kind, TokenKind::Number);
/// ```
pub fn tokens(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        let kind = if b.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80)
            {
                i += 1;
            }
            TokenKind::Ident
        } else if b.is_ascii_digit()
            || (b == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i += 1;
            while i < bytes.len() {
                let c = bytes[i];
                let prev = bytes[i - 1];
                let hex = matches!(bytes.get(start..start + 2), Some(b"0x" | b"0X"));
                let exponent_sign = (c == b'+' || c == b'-')
                    && (matches!(prev, b'p' | b'P') || (!hex && matches!(prev, b'e' | b'E')));
                if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            TokenKind::Number
        } else if b == b'"' || b == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b && bytes[i] != b'\n' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            if bytes.get(i) == Some(&b) {
                i += 1; // the closing quote
            }
            TokenKind::Literal
        } else {
            // One character (which may be several bytes).
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            TokenKind::Punct
        };
        // A backslash escape at the very end may step past it.
        let end = i.min(bytes.len());
        i = end;
        if let Some(t) = text.get(start..end) {
            out.push(Token { kind, text: t });
        }
    }
    out
}

/// `text` with whitespace folded: runs of whitespace become one space between two word
/// characters and vanish elsewhere (`a + b` and `a+b` fold alike).
///
/// ```
/// assert_eq!(kf_source::fold_whitespace("int  x =\n a + b ;"), "int x=a+b;");
/// ```
pub fn fold_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space {
            let prev_word = out.chars().last().is_some_and(is_word);
            if prev_word && is_word(c) {
                out.push(' ');
            }
            pending_space = false;
        }
        out.push(c);
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_text_but_its_whitespace() {
        for text in [
            "__kernel void k(__global float* a) { a[get_global_id(0)] = 1.0f; }",
            "x = 'a' + \"b\\\"c\" + .5 + 1e+3 + 0x1p-2;",
            "unterminated \"string\nnext",
            "trailing backslash \"\\",
            "ünïcode → ok",
        ] {
            let joined: String = tokens(text).iter().map(|t| t.text).collect();
            let expected: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            assert_eq!(joined, expected, "{text}");
        }
        let t: Vec<&str> = tokens("1e+3 + 0x1p-2 - 2").iter().map(|t| t.text).collect();
        assert_eq!(t, ["1e+3", "+", "0x1p-2", "-", "2"]);
    }
}

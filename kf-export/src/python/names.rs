//! Python names for a task's sizes, scalars and buffers: identifiers clear of keywords, of the
//! generated functions' own parameters and of each other.

use crate::signature::Signature;

pub(super) const PY_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A Python parameter name for a task's size (`M` → `m`), clear of keywords and the
/// generated functions' own parameters.
pub(super) fn py_ident(name: &str) -> String {
    let mut s = crate::group::lower_ident(name);
    if PY_KEYWORDS.contains(&s.as_str()) || ["kernels", "index", "np", "cl"].contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Python parameter names of a task: sizes, then scalars, then buffers, distinct.
pub(super) fn py_params(sig: &Signature) -> (Vec<String>, Vec<String>, Vec<String>) {
    let names = crate::group::Params::named(sig, py_ident);
    (names.sizes, names.scalars, names.buffers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_python() {
        assert_eq!(py_ident("M"), "m");
        assert_eq!(py_ident("IN"), "in_");
        assert_eq!(py_ident("KERNELS"), "kernels_");
        assert_eq!(py_ident("2D"), "_2d");
    }
}

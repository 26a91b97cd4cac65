//! [`CompileInputError`]: why a kernel's parameters or compiler flags cannot be handed to a
//! backend's compiler (every backend passes parameters as definitions and flags verbatim, and
//! refuses what its compiler cannot carry).

use std::fmt;

use kf_core::{KernelSource, Language, ParamValues};

/// A parameter or compiler flag a backend's compiler cannot carry.
///
/// ```
/// use kf_backend_common::CompileInputError;
/// let e = CompileInputError::NotAnIdentifier { name: "1X".into() };
/// assert_eq!(e.to_string(), "parameter name \"1X\" is not a C identifier");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileInputError {
    /// A parameter name that is not a C identifier.
    NotAnIdentifier {
        /// The name.
        name: String,
    },
    /// A parameter value the backend cannot pass (empty, whitespace, a line break, a NUL
    /// byte: `rule` says which the backend refuses).
    BadValue {
        /// The parameter.
        name: String,
        /// Its value as text.
        value: String,
        /// What the backend cannot carry (`definitions cannot be empty or hold line breaks or
        /// NUL bytes`).
        rule: &'static str,
    },
    /// A compiler flag holding a NUL byte.
    NulInFlag {
        /// The flag.
        flag: String,
    },
}

impl fmt::Display for CompileInputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileInputError::NotAnIdentifier { name } => {
                write!(f, "parameter name {name:?} is not a C identifier")
            }
            CompileInputError::BadValue { name, value, rule } => {
                write!(f, "parameter {name} has value {value:?}; {rule}")
            }
            CompileInputError::NulInFlag { flag } => {
                write!(f, "compiler flag {flag:?} contains a NUL byte")
            }
        }
    }
}

impl std::error::Error for CompileInputError {}

/// `Ok` when no flag holds a NUL byte.
///
/// ```
/// use kf_backend_common::compile_input::check_flags;
/// assert!(check_flags(&["-O3".to_owned()]).is_ok());
/// assert!(check_flags(&["-O3\0".to_owned()]).is_err());
/// ```
pub fn check_flags(flags: &[String]) -> Result<(), CompileInputError> {
    match flags.iter().find(|flag| flag.contains('\0')) {
        Some(flag) => Err(CompileInputError::NulInFlag { flag: flag.clone() }),
        None => Ok(()),
    }
}

/// Whether `name` is a C identifier (`[A-Za-z_][A-Za-z0-9_]*`): what a parameter's name must
/// be to become a definition.
///
/// ```
/// use kf_backend_common::compile_input::is_c_identifier;
/// assert!(is_c_identifier("_TS2") && !is_c_identifier("2TS") && !is_c_identifier(""));
/// ```
pub fn is_c_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a definition's value fits on its `#define` line: not blank, no line break, no NUL
/// byte.
pub fn fits_a_define_line(value: &str) -> bool {
    !value.trim().is_empty() && !value.contains(['\n', '\r', '\0'])
}

/// Each parameter as its name and value text, in order, checked: the name a C identifier, the
/// value one `value_ok` accepts (else `rule` says what the backend cannot carry).
///
/// ```
/// use kf_backend_common::compile_input::{checked_definitions, fits_a_define_line};
/// use kf_core::ParamValues;
/// let params = ParamValues::new().with("TS", 16i64);
/// let defs = checked_definitions(&params, fits_a_define_line, "no line breaks").unwrap();
/// assert_eq!(defs, vec![("TS", "16".to_owned())]);
/// let bad = ParamValues::new().with("X", "a\nb");
/// assert!(checked_definitions(&bad, fits_a_define_line, "no line breaks").is_err());
/// ```
pub fn checked_definitions<'a>(
    params: &'a ParamValues,
    value_ok: impl Fn(&str) -> bool,
    rule: &'static str,
) -> Result<Vec<(&'a str, String)>, CompileInputError> {
    params
        .iter()
        .map(|(name, value)| {
            if !is_c_identifier(name) {
                return Err(CompileInputError::NotAnIdentifier {
                    name: name.to_owned(),
                });
            }
            let value = value.to_string();
            if !value_ok(&value) {
                return Err(CompileInputError::BadValue {
                    name: name.to_owned(),
                    value,
                    rule,
                });
            }
            Ok((name, value))
        })
        .collect()
}

/// `#define NAME value` lines, one per parameter, checked as [`checked_definitions`] does
/// with [`fits_a_define_line`] (`rule` says so in the backend's words).
///
/// ```
/// use kf_core::ParamValues;
/// let params = ParamValues::new().with("TS", 16i64).with("T", "float");
/// let lines = kf_backend_common::compile_input::define_lines(&params, "rule").unwrap();
/// assert_eq!(lines, "#define TS 16\n#define T float\n");
/// ```
pub fn define_lines(params: &ParamValues, rule: &'static str) -> Result<String, CompileInputError> {
    let mut lines = String::new();
    for (name, value) in checked_definitions(params, fits_a_define_line, rule)? {
        lines.push_str(&format!("#define {name} {value}\n"));
    }
    Ok(lines)
}

/// Whether an entry point is a plain name: letters, digits and underscores (what the OpenCL
/// and CUDA backends look a kernel up by).
pub fn is_plain_entry_name(entry: &str) -> bool {
    !entry.is_empty() && entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a kernel's source is not for a backend ([`SourceRules::check`]); its text is the
/// backend's compile error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceRejected {
    /// The source is in another language.
    #[error("the {backend} backend compiles {compiles}, not {given}")]
    Language {
        /// The backend's name.
        backend: &'static str,
        /// What it compiles.
        compiles: &'static str,
        /// The source's language.
        given: Language,
    },
    /// The entry point is not one the backend can look up.
    #[error("entry point {entry:?} is not {entry_is}")]
    Entry {
        /// The entry point.
        entry: String,
        /// What an entry point must be.
        entry_is: &'static str,
    },
    /// The source holds a NUL byte (no compiler takes it whole).
    #[error("the source contains a NUL byte")]
    NulByte,
}

/// What a backend compiles, for refusing any other source before its compiler sees it.
#[derive(Debug, Clone, Copy)]
pub struct SourceRules {
    /// The one language it compiles.
    pub language: Language,
    /// What it says it compiles (`CUDA C++`), after `the <backend> backend compiles`.
    pub compiles: &'static str,
    /// The backend's name in that sentence (`CUDA`).
    pub backend: &'static str,
    /// Whether an entry point is one it can look up.
    pub entry_ok: fn(&str) -> bool,
    /// What such an entry point is (`a C identifier`), for the refusal.
    pub entry_is: &'static str,
}

impl SourceRules {
    /// Why `source` is not for this backend (another language, an entry point it cannot look
    /// up, a NUL byte), in the words of its compile error; `Ok` when it is.
    ///
    /// ```
    /// use kf_backend_common::compile_input::{is_plain_entry_name, SourceRules};
    /// use kf_core::{KernelSource, Language};
    /// let rules = SourceRules {
    ///     language: Language::OpenCl,
    ///     compiles: "OpenCL C",
    ///     backend: "OpenCL",
    ///     entry_ok: is_plain_entry_name,
    ///     entry_is: "a C identifier",
    /// };
    /// assert!(rules.check(&KernelSource::new(Language::OpenCl, "k", "")).is_ok());
    /// let why = rules.check(&KernelSource::new(Language::OpenCl, "k<int>", "")).unwrap_err();
    /// assert_eq!(why.to_string(), "entry point \"k<int>\" is not a C identifier");
    /// ```
    pub fn check(&self, source: &KernelSource) -> Result<(), SourceRejected> {
        if source.language != self.language {
            return Err(SourceRejected::Language {
                backend: self.backend,
                compiles: self.compiles,
                given: source.language,
            });
        }
        if !(self.entry_ok)(&source.entry) {
            return Err(SourceRejected::Entry {
                entry: source.entry.clone(),
                entry_is: self.entry_is,
            });
        }
        if source.text.contains('\0') {
            return Err(SourceRejected::NulByte);
        }
        Ok(())
    }
}

//! [`CompileInputError`]: why a kernel's parameters or compiler flags cannot be handed to a
//! backend's compiler (every backend passes parameters as definitions and flags verbatim, and
//! refuses what its compiler cannot carry).

use std::fmt;

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

//! The run time's error type: what can go wrong in a call of the generated crate.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong in a call of the generated crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No OpenCL runtime, no platform or no device (matching `KF_OPENCL_DEVICE`).
    Unavailable {
        /// What was tried, and how to get a runtime.
        message: String,
    },
    /// The call's arguments do not fit the task's signature.
    BadCall {
        /// The task.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// There is no configuration with this index.
    NoSuchConfiguration {
        /// The task.
        task: String,
        /// The index asked for.
        index: usize,
        /// Configurations in the table.
        len: usize,
    },
    /// A manifest constraint does not hold at these sizes on this device.
    ConstraintViolated {
        /// The configuration.
        configuration: String,
        /// The rule, as the manifest writes it.
        rule: String,
    },
    /// A manifest expression (constraint or launch size) failed to evaluate, or gave a value
    /// of the wrong kind.
    Expression {
        /// The configuration (or `signature of TASK`).
        configuration: String,
        /// The manifest field (`launch.global[0]`).
        field: String,
        /// The expression.
        expr: String,
        /// Why.
        message: String,
    },
    /// The launch geometry evaluated but is not valid (a local size not dividing the global).
    Geometry {
        /// The configuration.
        configuration: String,
        /// Why.
        message: String,
    },
    /// No configuration can run at these sizes on this device.
    NoConfiguration {
        /// The task.
        task: String,
        /// The sizes (`M=64,N=64,K=64`).
        sizes: String,
        /// The device.
        device: String,
        /// Each configuration's failing rule.
        reasons: String,
    },
    /// The OpenCL compiler rejected the kernel.
    Compile {
        /// The configuration.
        configuration: String,
        /// The build log.
        log: String,
    },
    /// An OpenCL call failed.
    OpenCl {
        /// What was being done.
        what: String,
        /// The OpenCL error code.
        code: i32,
    },
    /// A stored reference case cannot be read, or a result does not match it.
    Reference {
        /// The case (`case 0 (ROWS=32,COLS=32)`).
        case: String,
        /// What is wrong.
        message: String,
    },
    /// A file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable { message } => write!(f, "no OpenCL device: {message}"),
            Error::BadCall { task, message } => write!(f, "{task}: {message}"),
            Error::NoSuchConfiguration { task, index, len } => write!(
                f,
                "{task}: there is no configuration {index} (the table has {len})"
            ),
            Error::ConstraintViolated {
                configuration,
                rule,
            } => write!(f, "{configuration}: constraint `{rule}` does not hold"),
            Error::Expression {
                configuration,
                field,
                expr,
                message,
            } => write!(f, "{configuration}: {field} = `{expr}`: {message}"),
            Error::Geometry {
                configuration,
                message,
            } => write!(f, "{configuration}: launch: {message}"),
            Error::NoConfiguration {
                task,
                sizes,
                device,
                reasons,
            } => write!(
                f,
                "{task}: no exported configuration can run at {sizes} on {device}: {reasons}"
            ),
            Error::Compile { configuration, log } => {
                write!(f, "{configuration}: the kernel does not build: {log}")
            }
            Error::OpenCl { what, code } => write!(f, "{what} failed with OpenCL error {code}"),
            Error::Reference { case, message } => write!(f, "reference {case}: {message}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(super) fn cl_error(
    what: impl Into<String>,
) -> impl FnOnce(opencl3::error_codes::ClError) -> Error {
    let what = what.into();
    move |e| Error::OpenCl { what, code: e.0 }
}

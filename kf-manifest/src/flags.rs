//! Compiler flags a manifest asks for: floating-point modes only, from a fixed list per language.
//!
//! A kernel may be faster with the compiler's relaxed floating-point modes (on the Intel CPU
//! OpenCL runtime, `-cl-fast-relaxed-math` made the best softmax structure 7–22% faster), so a
//! manifest can ask for them, always or for some parameter values:
//!
//! ```toml
//! [params]
//! FAST_MATH = [0, 1]
//! [[flags]]
//! when = "FAST_MATH == 1"
//! add = ["-cl-fast-relaxed-math"]
//! ```
//!
//! Why a fixed list and not any flag: flags reach the compiler after the evaluator has read the
//! source, so `-D` could redefine what its checks read, `-I` or `--include` could pull in a file
//! of the host, and `-cl-opt-disable` or `-O0` only make timings worse. The floating-point modes
//! change nothing but rounding, which the evaluator's verification judges like any other error.
//! Conditions are over the parameters only: one compiled kernel is launched at several sizes.

use kf_core::{Language, ParamValues};

use crate::error::ManifestError;
use crate::expr::{Expr, ExprSite, Symbols};

/// The flags a manifest may ask for in `language`: the compiler's floating-point modes.
pub fn allowed_flags(language: Language) -> &'static [&'static str] {
    match language {
        Language::OpenCl => &[
            "-cl-fast-relaxed-math",
            "-cl-mad-enable",
            "-cl-no-signed-zeros",
            "-cl-unsafe-math-optimizations",
            "-cl-finite-math-only",
            "-cl-denorms-are-zero",
        ],
        Language::Cuda => &[
            "--use_fast_math",
            "--ftz=true",
            "--prec-div=false",
            "--prec-sqrt=false",
        ],
        // The SYCL runtime's kernel compiler has not been checked with any of its flags on
        // these machines, so none is offered rather than one that may fail at build time.
        _ => &[],
    }
}

/// One `[[flags]]` entry: flags added when a condition over the parameters holds.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagRule {
    /// The condition; `None` adds the flags to every configuration.
    pub when: Option<Expr>,
    /// The flags, each one of [`allowed_flags`] for the manifest's language.
    pub add: Vec<String>,
}

impl FlagRule {
    /// Checks every flag against the language's list; `index` names the entry in errors.
    pub(crate) fn parse(
        when: Option<&str>,
        add: Vec<String>,
        language: Language,
        index: usize,
        file: &str,
    ) -> Result<FlagRule, ManifestError> {
        let field = format!("flags[{index}]");
        let invalid = |message: String| ManifestError::Invalid {
            file: file.to_owned(),
            field: field.clone(),
            message,
        };
        if add.is_empty() {
            return Err(invalid("adds no flags (`add` is empty)".to_owned()));
        }
        let allowed = allowed_flags(language);
        for flag in &add {
            if !allowed.contains(&flag.as_str()) {
                let offered = if allowed.is_empty() {
                    format!("{language} kernels may not set compiler flags")
                } else {
                    format!("{language} kernels may set only {}", allowed.join(", "))
                };
                return Err(invalid(format!(
                    "`{flag}` is not a floating-point mode flag: {offered}"
                )));
            }
        }
        let when = when
            .map(|w| {
                Expr::parse(
                    w,
                    &ExprSite {
                        file: file.to_owned(),
                        field: format!("{field}.when"),
                    },
                )
            })
            .transpose()?;
        Ok(FlagRule { when, add })
    }
}

/// The flags of `rules` that apply to `params`, in order, each once.
pub(crate) fn flags_for(
    rules: &[FlagRule],
    params: &ParamValues,
    file: &str,
) -> Result<Vec<String>, ManifestError> {
    let symbols = Symbols::new().with_params(params);
    let mut out: Vec<String> = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let applies = match &rule.when {
            None => true,
            Some(cond) => cond.eval_bool(
                &symbols,
                &ExprSite {
                    file: file.to_owned(),
                    field: format!("flags[{i}].when"),
                },
            )?,
        };
        if applies {
            for flag in &rule.add {
                if !out.contains(flag) {
                    out.push(flag.clone());
                }
            }
        }
    }
    Ok(out)
}

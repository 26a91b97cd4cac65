//! The manifest's TOML forms before parsing, shared by the single-kernel `[launch]` and a
//! sequence's `[[kernels]]` and `[[scratch]]`: launch tables and sizes written either as
//! numbers or as expressions.

use serde::Deserialize;

use crate::error::ManifestError;
use crate::expr::{Expr, ExprSite};

/// A launch table as written: global and optional local sizes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLaunch {
    global: Vec<RawExpr>,
    #[serde(default)]
    local: Option<Vec<RawExpr>>,
}

/// A launch's global and optional local sizes, parsed.
type Launch = (Vec<Expr>, Option<Vec<Expr>>);

impl RawLaunch {
    /// The sizes as expressions; `field` (`launch`, `kernels[1].launch`) names them in errors.
    pub(crate) fn parse(&self, file: &str, field: &str) -> Result<Launch, ManifestError> {
        let invalid = |sub: &str, message: String| ManifestError::Invalid {
            file: file.to_owned(),
            field: format!("{field}.{sub}"),
            message,
        };
        let site = |sub: String| ExprSite {
            file: file.to_owned(),
            field: format!("{field}.{sub}"),
        };
        if self.global.is_empty() || self.global.len() > 3 {
            return Err(invalid(
                "global",
                format!(
                    "has {} entries; a launch has 1 to 3 dimensions",
                    self.global.len()
                ),
            ));
        }
        let parse_all = |exprs: &[RawExpr], name: &str| {
            exprs
                .iter()
                .enumerate()
                .map(|(i, e)| Expr::parse(&e.text(), &site(format!("{name}[{i}]"))))
                .collect::<Result<Vec<_>, _>>()
        };
        let global = parse_all(&self.global, "global")?;
        let local = match &self.local {
            None => None,
            Some(local) if local.len() != global.len() => {
                return Err(invalid(
                    "local",
                    format!(
                        "has {} entries but {field}.global has {}",
                        local.len(),
                        global.len()
                    ),
                ))
            }
            Some(local) => Some(parse_all(local, "local")?),
        };
        Ok((global, local))
    }
}

/// A launch size written either as a number or as an expression.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawExpr {
    Int(i64),
    Text(String),
}

impl RawExpr {
    pub(crate) fn text(&self) -> String {
        match self {
            RawExpr::Int(i) => i.to_string(),
            RawExpr::Text(s) => s.clone(),
        }
    }
}

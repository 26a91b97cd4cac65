//! Prompt components as data: named, bounded sections (optimisation philosophy, strategy
//! library, common pitfalls, analysis guidance) and the fixed templates around them. The
//! defaults are TOML files shipped in the crate (`components/default.toml`,
//! `components/templates.toml`), seeded from the seed document; users replace them with their
//! own files.

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::error::PromptError;

/// The default components (TOML).
pub const DEFAULT_COMPONENTS_TOML: &str = include_str!("../components/default.toml");
/// The default templates (TOML).
pub const DEFAULT_TEMPLATES_TOML: &str = include_str!("../components/templates.toml");

/// One named section of the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// Identifier (`philosophy`, `strategies`, …).
    pub name: String,
    /// Heading shown to the model.
    pub title: String,
    /// The section's text.
    pub text: String,
    /// Whether meta-prompt evolution may rewrite it.
    #[serde(default = "yes")]
    pub evolvable: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, Serialize)]
struct ComponentsFile {
    #[serde(default)]
    component: Vec<Component>,
}

/// An ordered set of prompt components with unique names.
///
/// ```
/// use kf_prompt::PromptComponents;
///
/// let c = PromptComponents::builtin();
/// assert_eq!(c.names(), ["philosophy", "strategies", "pitfalls", "analysis"]);
/// assert!(c.get("strategies").unwrap().text.contains("TS+1"));
/// let mine = PromptComponents::from_toml_str(
///     "[[component]]\nname = \"rules\"\ntitle = \"House rules\"\ntext = \"Use float4.\"\n",
///     "inline",
/// )?;
/// assert!(mine.render().contains("## House rules"));
/// # Ok::<(), kf_prompt::PromptError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptComponents {
    components: Vec<Component>,
}

impl PromptComponents {
    /// The components shipped with the crate.
    pub fn builtin() -> Self {
        match Self::from_toml_str(DEFAULT_COMPONENTS_TOML, "components/default.toml") {
            Ok(c) => c,
            Err(e) => {
                // Unreachable: a unit test parses the shipped file.
                tracing::error!("the built-in prompt components do not parse: {e}");
                PromptComponents::default()
            }
        }
    }

    /// Parses components from TOML (`[[component]]` tables with `name`, `title`, `text` and
    /// optionally `evolvable`); `origin` names the text in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, PromptError> {
        let file: ComponentsFile = toml::from_str(text).map_err(|e| bad_source(origin, e))?;
        Self::from_components(file.component).map_err(|e| bad_source(origin, e))
    }

    /// Reads components from a TOML file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PromptError> {
        let (text, origin) = read_source(path.as_ref())?;
        Self::from_toml_str(&text, &origin)
    }

    fn from_components(components: Vec<Component>) -> Result<Self, BadComponents> {
        if components.is_empty() {
            return Err(BadComponents::None);
        }
        let mut seen = std::collections::HashSet::new();
        for c in &components {
            if c.name.trim().is_empty() {
                return Err(BadComponents::EmptyName);
            }
            if !seen.insert(c.name.as_str()) {
                return Err(BadComponents::Twice(c.name.clone()));
            }
        }
        Ok(PromptComponents {
            components: components
                .into_iter()
                .map(|c| Component {
                    text: c.text.trim().to_owned(),
                    ..c
                })
                .collect(),
        })
    }

    /// The components as TOML, in the format [`PromptComponents::from_toml_str`] reads.
    pub fn to_toml(&self) -> String {
        toml::to_string(&ComponentsFile {
            component: self.components.clone(),
        })
        .unwrap_or_default()
    }

    /// Component names in order.
    pub fn names(&self) -> Vec<&str> {
        self.components.iter().map(|c| c.name.as_str()).collect()
    }

    /// The components in order.
    pub fn iter(&self) -> impl Iterator<Item = &Component> {
        self.components.iter()
    }

    /// One component.
    pub fn get(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Names of the components meta-prompt evolution may rewrite.
    pub fn evolvable(&self) -> Vec<&str> {
        self.components
            .iter()
            .filter(|c| c.evolvable)
            .map(|c| c.name.as_str())
            .collect()
    }

    /// A copy with one component's text replaced; `None` if there is no such component.
    pub fn with_text(&self, name: &str, text: impl Into<String>) -> Option<Self> {
        let mut out = self.clone();
        let c = out.components.iter_mut().find(|c| c.name == name)?;
        c.text = text.into().trim().to_owned();
        Some(out)
    }

    /// The sections as Markdown, `## Title` then the text, in order.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.components {
            if c.text.is_empty() {
                continue;
            }
            out.push_str("## ");
            out.push_str(&c.title);
            out.push('\n');
            out.push_str(&c.text);
            out.push_str("\n\n");
        }
        out.trim_end().to_owned()
    }
}

/// The fixed texts around the components: the system preamble, the reply-format instructions,
/// the repair request and the meta-prompt. Placeholders in braces are filled with [`fill`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTemplates {
    /// System preamble (`{language}`).
    pub system: String,
    /// What a manifest is.
    pub manifest_help: String,
    /// Asks for a full rewrite (`{language}`, `{entry}`).
    pub format_full: String,
    /// Asks for SEARCH/REPLACE edits (`{entry}`).
    pub format_edits: String,
    /// Asks for either (`{language}`, `{entry}`).
    pub format_either: String,
    /// Asks for a full rewrite after edits failed (`{reason}`, `{language}`).
    pub repair_full_rewrite: String,
    /// Tells the model its reply repeated a kernel already evaluated, and asks for another
    /// (`{candidate}`, `{result}`, `{language}`).
    #[serde(default = "default_repeated_reply")]
    pub repeated_reply: String,
    /// System text of meta-calls.
    pub meta_system: String,
    /// User text of meta-calls (`{task}`, `{title}`, `{component}`, `{stats}`, `{strategy}`,
    /// `{instruction}`, `{max_chars}`).
    pub meta_user: String,
    /// One instruction per meta strategy (`improve`, `specialise`, `generalise`, `simplify`).
    pub strategies: IndexMap<String, String>,
}

/// The follow-up after a repeated kernel, for template files written before it existed.
fn default_repeated_reply() -> String {
    "Your reply repeats candidate {candidate}, which was already evaluated: {result}. It was not evaluated again. Reply with a different kernel ({language}) that changes what the diagnostics or the timing call for.".into()
}

impl PromptTemplates {
    /// The templates shipped with the crate.
    pub fn builtin() -> Self {
        match Self::from_toml_str(DEFAULT_TEMPLATES_TOML, "components/templates.toml") {
            Ok(t) => t,
            Err(e) => {
                // Unreachable: a unit test parses the shipped file.
                tracing::error!("the built-in prompt templates do not parse: {e}");
                PromptTemplates {
                    system: String::new(),
                    manifest_help: String::new(),
                    format_full: String::new(),
                    format_edits: String::new(),
                    format_either: String::new(),
                    repair_full_rewrite: String::new(),
                    repeated_reply: default_repeated_reply(),
                    meta_system: String::new(),
                    meta_user: String::new(),
                    strategies: IndexMap::new(),
                }
            }
        }
    }

    /// Parses templates from TOML; `origin` names the text in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, PromptError> {
        let t: PromptTemplates = toml::from_str(text).map_err(|e| bad_source(origin, e))?;
        if t.strategies.is_empty() {
            return Err(bad_source(origin, "[strategies] lists no meta strategy"));
        }
        Ok(t)
    }

    /// Reads templates from a TOML file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PromptError> {
        let (text, origin) = read_source(path.as_ref())?;
        Self::from_toml_str(&text, &origin)
    }
}

impl Default for PromptTemplates {
    fn default() -> Self {
        Self::builtin()
    }
}

/// The error of a components or templates text that cannot be used; `origin` names the text.
fn bad_source(origin: &str, message: impl ToString) -> PromptError {
    PromptError::Components {
        origin: origin.to_owned(),
        message: message.to_string(),
    }
}

/// The text of a components or templates file, and its name for errors.
fn read_source(path: &Path) -> Result<(String, String), PromptError> {
    let origin = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((text, origin)),
        Err(e) => Err(bad_source(&origin, e)),
    }
}

/// Replaces each `{name}` in `template` by its value; unknown placeholders stay as they are.
///
/// ```
/// assert_eq!(kf_prompt::fill("a {x} b {y}", &[("x", "1")]), "a 1 b {y}");
/// ```
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let value = after.find('}').and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v, end))
        });
        match value {
            Some((v, end)) => {
                out.push_str(v);
                rest = &after[end + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// Why a list of components cannot be used (the message of a [`PromptError::Components`]).
#[derive(Debug, thiserror::Error)]
enum BadComponents {
    #[error("no [[component]] given")]
    None,
    #[error("a component has an empty name")]
    EmptyName,
    #[error("component `{0}` is defined twice")]
    Twice(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        let c = PromptComponents::from_toml_str(DEFAULT_COMPONENTS_TOML, "default").unwrap();
        assert_eq!(c.evolvable().len(), 4);
        for comp in c.iter() {
            assert!(!comp.text.is_empty(), "{}", comp.name);
            assert!(comp.text.len() < 2000, "{} is bounded", comp.name);
        }
        let t = PromptTemplates::from_toml_str(DEFAULT_TEMPLATES_TOML, "templates").unwrap();
        assert_eq!(
            t.strategies.keys().collect::<Vec<_>>(),
            ["improve", "specialise", "generalise", "simplify"]
        );
        assert!(t.format_either.contains("<<<<<<< SEARCH"));
        // Round trip.
        let again = PromptComponents::from_toml_str(&c.to_toml(), "round trip").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn rejects_bad_components() {
        assert!(PromptComponents::from_toml_str("", "empty").is_err());
        assert!(PromptComponents::from_toml_str("[[component]]\nname='a'\n", "no text").is_err());
        let twice = "[[component]]\nname='a'\ntitle='A'\ntext='x'\n[[component]]\nname='a'\ntitle='B'\ntext='y'\n";
        assert!(PromptComponents::from_toml_str(twice, "twice").is_err());
        let c = PromptComponents::builtin();
        assert!(c.with_text("nope", "x").is_none());
        assert_eq!(
            c.with_text("pitfalls", " new ")
                .unwrap()
                .get("pitfalls")
                .unwrap()
                .text,
            "new"
        );
    }

    #[test]
    fn fill_handles_braces() {
        assert_eq!(fill("{a}{b}", &[("a", "1"), ("b", "2")]), "12");
        assert_eq!(fill("x { y } {", &[("y", "no")]), "x { y } {");
        assert_eq!(fill("{a}", &[("a", "{b}"), ("b", "no")]), "{b}");
    }
}

//! The child of a transformation: the rewritten source and its manifest, with the
//! transformation's tunables added to `[params]` and the launch geometry it needs.

use kf_core::{KernelSource, ParamValue, ParamValues};
use kf_manifest::Manifest;

use crate::error::TransformError;

/// The first line of a transformed kernel's manifest: which transformations made it.
pub(crate) const MARKER: &str = "# kf-transform: applied = ";

/// A tunable parameter a transformation adds.
#[derive(Debug, Clone, PartialEq)]
pub struct NewParam {
    /// Its name (a `-D` define in the source).
    pub name: String,
    /// Its allowed values, the manifest's order.
    pub values: Vec<i64>,
    /// The value the child is proposed with.
    pub start: i64,
}

/// What a transformation does to a kernel's text and manifest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rewrite {
    /// The new source text.
    pub(crate) text: String,
    /// Tunables added to `[params]`.
    pub(crate) params: Vec<NewParam>,
    /// New launch global sizes, where the work per work-item changed.
    pub(crate) global: Option<Vec<String>>,
    /// New launch local sizes, where the work-group's shape changed.
    pub(crate) local: Option<Vec<String>>,
    /// What was done, for the child's origin note.
    pub(crate) note: String,
}

/// A transformed kernel: its source (with its manifest) and the parameter values to evaluate
/// it with.
#[derive(Debug, Clone, PartialEq)]
pub struct Transformed {
    /// The child kernel, carrying its manifest.
    pub source: KernelSource,
    /// The parent's values with the added tunables at their start values.
    pub params: ParamValues,
    /// The tunables the transformation added.
    pub added: Vec<NewParam>,
    /// What was done.
    pub note: String,
}

/// The transformations recorded in a kernel's manifest (none for a kernel no transformation
/// made).
pub fn applied(kernel: &KernelSource) -> Vec<String> {
    let Some(text) = kernel.manifest.as_deref() else {
        return Vec::new();
    };
    text.lines()
        .find_map(|l| l.strip_prefix(MARKER))
        .map(|rest| {
            rest.trim()
                .trim_matches('"')
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The child of `parent` (measured at `params`) after `rewrite`, made by the transformation
/// `name`.
pub(crate) fn child(
    parent: &KernelSource,
    manifest: &Manifest,
    params: &ParamValues,
    name: &str,
    rewrite: Rewrite,
) -> Result<Transformed, TransformError> {
    let mut table: toml::Table = manifest.text.parse()?;
    table.remove("source");
    let description = format!(
        "{} Transformed by kf-transform: {}.",
        manifest.description, rewrite.note
    );
    table.insert(
        "description".into(),
        toml::Value::String(description.trim().to_owned()),
    );
    let declared = table
        .entry("params")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(declared) = declared {
        for p in &rewrite.params {
            declared.insert(
                p.name.clone(),
                toml::Value::Array(p.values.iter().map(|v| toml::Value::Integer(*v)).collect()),
            );
        }
    }
    if let Some(global) = &rewrite.global {
        if let Some(toml::Value::Table(launch)) = table.get_mut("launch") {
            launch.insert(
                "global".into(),
                toml::Value::Array(global.iter().cloned().map(toml::Value::String).collect()),
            );
        }
    }
    if let Some(local) = &rewrite.local {
        if let Some(toml::Value::Table(launch)) = table.get_mut("launch") {
            launch.insert(
                "local".into(),
                toml::Value::Array(local.iter().cloned().map(toml::Value::String).collect()),
            );
        }
    }
    let mut history = applied(parent);
    history.push(name.to_owned());
    let text = format!(
        "{MARKER}\"{}\"\n{}",
        history.join(","),
        toml::to_string(&table)?
    );
    let child_manifest = Manifest::parse(&text, &format!("<{name} of `{}`>", parent.entry), None)?;
    let source = child_manifest.kernel_source(rewrite.text);
    let mut child_params: ParamValues = params
        .iter()
        .filter(|(k, _)| child_manifest.params.contains_key(*k))
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect();
    for p in &rewrite.params {
        child_params.set(p.name.clone(), ParamValue::Int(p.start));
    }
    Ok(Transformed {
        source,
        params: child_params,
        added: rewrite.params,
        note: rewrite.note,
    })
}

/// `#ifndef NAME / #define NAME value / #endif`: the default of a tunable the backend passes
/// as a define, so the text also compiles on its own.
pub(crate) fn default_block(name: &str, value: i64) -> String {
    format!("#ifndef {name}\n#define {name} {value}\n#endif\n")
}

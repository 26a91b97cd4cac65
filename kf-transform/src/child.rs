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
        set_launch(&mut table, &manifest.entry, "global", global);
    }
    if let Some(local) = &rewrite.local {
        set_launch(&mut table, &manifest.entry, "local", local);
    }
    let mut history = applied(parent);
    // Once per transformation, also where it rewrote several kernels of a sequence.
    if history.last().map(String::as_str) != Some(name) {
        history.push(name.to_owned());
    }
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

/// Sets `key` (`global` or `local`) of the launch of the rewritten kernel `entry`: the
/// manifest's `[launch]`, or in a sequence (`[[kernels]]`) the launch of every place the
/// sequence runs `entry` (the other kernels of the sequence are not rewritten).
fn set_launch(table: &mut toml::Table, entry: &str, key: &str, sizes: &[String]) {
    let value = toml::Value::Array(sizes.iter().cloned().map(toml::Value::String).collect());
    if let Some(toml::Value::Table(launch)) = table.get_mut("launch") {
        launch.insert(key.into(), value.clone());
    }
    let Some(toml::Value::Array(kernels)) = table.get_mut("kernels") else {
        return;
    };
    for kernel in kernels.iter_mut() {
        let toml::Value::Table(kernel) = kernel else {
            continue;
        };
        if kernel.get("entry").and_then(toml::Value::as_str) != Some(entry) {
            continue;
        }
        if let Some(toml::Value::Table(launch)) = kernel.get_mut("launch") {
            launch.insert(key.into(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEQUENCE: &str = r#"
entry = "normalise"
language = "opencl"
[params]
WG = [16, 64]
[[scratch]]
name = "STATS"
dtype = "f32"
elements = "2 * ROWS"
[[kernels]]
entry = "row_stats"
writes = ["STATS"]
launch = { global = ["ROWS"], local = ["WG"] }
[[kernels]]
entry = "normalise"
writes = ["Y"]
launch = { global = ["COLS", "ROWS"] }
"#;

    #[test]
    fn a_rewritten_sequence_kernel_gets_its_new_launch_and_the_others_keep_theirs() {
        let manifest = Manifest::parse(SEQUENCE, "seq.toml", None).unwrap();
        let parent = manifest.kernel_source("__kernel void normalise() {}");
        let rewrite = Rewrite {
            text: "__kernel void normalise() { /* coarsened */ }".into(),
            params: vec![NewParam {
                name: "CF".into(),
                values: vec![1, 2, 4],
                start: 2,
            }],
            global: Some(vec!["COLS / CF".into(), "ROWS".into()]),
            local: None,
            note: "coarsened".into(),
        };
        let child = child(
            &parent,
            &manifest,
            &ParamValues::new(),
            "coarsen-blocked",
            rewrite,
        )
        .unwrap();
        let m = Manifest::from_kernel(&child.source).unwrap();
        assert!(m.is_sequence());
        assert_eq!(m.sequence[1].global[0].text(), "COLS / CF");
        assert_eq!(m.sequence[0].global[0].text(), "ROWS");
        assert_eq!(m.global[0].text(), "COLS / CF");
        assert_eq!(m.scratch.len(), 1);
        assert_eq!(child.params.get("CF"), Some(&ParamValue::Int(2)));
    }
}

//! A manifest that stands on its own beside a kernel file: the best kernel a search writes is
//! meant to be given straight to `kf eval` or `kf tune`.

use kf_core::ParamValues;

use crate::error::ManifestError;
use crate::manifest::Manifest;

/// Rewrites manifest `text` so that it names `source_file` (relative to the manifest) as its
/// kernel source and makes `measured` the default parameter values (each measured value moves
/// to the front of its parameter's list, where [`Manifest::default_params`] takes it from; a
/// value the list lacks is put in front of it). Everything else — entry, language,
/// constraints, launch geometry, the other values of each parameter — is kept; comments are
/// not. The result parses as a manifest whose defaults are `measured`.
///
/// ```
/// use kf_core::{ParamValue, ParamValues};
/// use kf_manifest::{standalone_manifest, Manifest};
///
/// let text = "entry = \"k\"\nlanguage = \"opencl\"\n[params]\nTS = [8, 16, 32]\n\
///             [launch]\nglobal = [\"N\"]\n";
/// let measured: ParamValues = [("TS".to_owned(), ParamValue::Int(16))].into_iter().collect();
/// let out = standalone_manifest(text, "best_kernel.cl", &measured)?;
/// let manifest = Manifest::parse(&out, "best_kernel.toml", None)?;
/// assert_eq!(manifest.source.as_deref(), Some(std::path::Path::new("best_kernel.cl")));
/// assert_eq!(manifest.default_params(), measured);
/// # Ok::<(), kf_manifest::ManifestError>(())
/// ```
///
/// # Errors
///
/// [`ManifestError::Toml`] when `text` is not TOML, and whatever [`Manifest::parse`] finds
/// wrong with the result (so a manifest that did not parse before is refused, not rewritten).
pub fn standalone_manifest(
    text: &str,
    source_file: &str,
    measured: &ParamValues,
) -> Result<String, ManifestError> {
    let file = || format!("<manifest beside {source_file}>");
    let toml_error = |message: String| ManifestError::Toml {
        file: file(),
        message,
    };
    let mut doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| toml_error(e.to_string()))?;
    doc.insert("source".into(), toml::Value::String(source_file.into()));
    if !measured.is_empty() {
        let params = doc
            .entry("params")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(params) = params {
            for (name, value) in measured.iter() {
                let value = toml::Value::try_from(value).map_err(|e| toml_error(e.to_string()))?;
                let entry = params
                    .entry(name)
                    .or_insert_with(|| toml::Value::Array(Vec::new()));
                if let toml::Value::Array(values) = entry {
                    values.retain(|v| v != &value);
                    values.insert(0, value);
                }
            }
        }
    }
    let out = toml::to_string(&doc).map_err(|e| toml_error(e.to_string()))?;
    Manifest::parse(&out, &file(), None)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use kf_core::{ParamValue, ParamValues};

    use super::*;

    const TEXT: &str = "# a comment\nsource = \"old.cl\"\nentry = \"k\"\nlanguage = \"opencl\"\n\
                        [params]\nWG = [16, 64]\nTS = [8, 16, 32]\n\
                        [constraints]\nrules = [\"TS <= WG\"]\n\
                        [launch]\nglobal = [\"N\"]\nlocal = [\"WG\"]\n";

    fn values(pairs: &[(&str, i64)]) -> ParamValues {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ParamValue::Int(*v)))
            .collect()
    }

    #[test]
    fn keeps_the_space_and_order_and_moves_the_measured_values_first() {
        let out = standalone_manifest(TEXT, "best.cl", &values(&[("TS", 32), ("WG", 64)])).unwrap();
        let m = Manifest::parse(&out, "out", None).unwrap();
        assert_eq!(m.source.as_deref(), Some(std::path::Path::new("best.cl")));
        assert_eq!(m.default_params(), values(&[("WG", 64), ("TS", 32)]));
        // Every declared value is still there, in the author's parameter order.
        let names: Vec<_> = m.params.keys().cloned().collect();
        assert_eq!(names, ["WG", "TS"]);
        assert_eq!(m.params["TS"].len(), 3);
        assert_eq!(m.constraints.len(), 1);
    }

    #[test]
    fn a_value_outside_the_list_is_put_in_front_of_it() {
        let out = standalone_manifest(TEXT, "best.cl", &values(&[("TS", 4)])).unwrap();
        let m = Manifest::parse(&out, "out", None).unwrap();
        assert_eq!(m.params["TS"].len(), 4);
        assert_eq!(m.default_params().get("TS"), Some(&ParamValue::Int(4)));
    }

    #[test]
    fn what_is_not_a_manifest_is_refused_not_rewritten() {
        assert!(matches!(
            standalone_manifest("not = [toml", "x.cl", &ParamValues::default()),
            Err(ManifestError::Toml { .. })
        ));
        assert!(
            standalone_manifest("[kernel]\nname = 1\n", "x.cl", &ParamValues::default()).is_err()
        );
    }
}

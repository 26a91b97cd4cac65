//! The identity of a kernel for duplicate detection: its source with comments dropped and
//! whitespace folded (kf-source's toolkit), and its manifest read as TOML, so that a reply
//! that only reformats or re-comments an evaluated kernel is recognised as a repeat.

use kf_core::KernelSource;

/// A fingerprint of a kernel text and manifest: equal for texts that differ only in comments
/// and whitespace, and manifests that differ only in comments, layout or key order.
///
/// ```
/// let a = kf_prompt::fingerprint("__kernel void k() { x = 1; } // one", Some("entry = \"k\"\n"));
/// let b = kf_prompt::fingerprint("/* two */ __kernel void k()\n{\n  x = 1;\n}", Some("# c\nentry=\"k\""));
/// assert_eq!(a, b);
/// assert_ne!(a, kf_prompt::fingerprint("__kernel void k() { x = 2; }", Some("entry = \"k\"\n")));
/// ```
pub fn fingerprint(text: &str, manifest: Option<&str>) -> String {
    let code = kf_source::strip_comments(text);
    let mut h = blake3::Hasher::new();
    h.update(kf_source::fold_whitespace(&code).as_bytes());
    h.update(b"\0manifest\0");
    if let Some(m) = manifest {
        let canonical = match m.parse::<toml::Table>() {
            Ok(t) => canonical_toml(&toml::Value::Table(t)),
            Err(_) => kf_source::fold_whitespace(m),
        };
        h.update(canonical.as_bytes());
    }
    h.finalize().to_hex()[..32].to_owned()
}

/// [`fingerprint`] of a kernel source.
pub(crate) fn of_source(source: &KernelSource) -> String {
    fingerprint(&source.text, source.manifest.as_deref())
}

/// TOML values in a canonical text: tables with sorted keys.
fn canonical_toml(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let mut keys: Vec<&String> = t.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k:?}={}", canonical_toml(&t[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        toml::Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(canonical_toml).collect();
            format!("[{}]", parts.join(","))
        }
        toml::Value::String(s) => format!("{:?}", kf_source::fold_whitespace(s)),
        other => other.to_string(),
    }
}

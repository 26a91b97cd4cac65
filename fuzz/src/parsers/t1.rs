//! FAIR "T1" tuning-space files (`kf_tune::t1::T1Space::from_json_str`): parameters written as
//! Python list literals, Python conditions translated into kf-manifest expressions
//! (`translate_python`, also fed the raw input), and the space they build. Bounded to 16 KiB.

use kf_manifest::{Expr, ExprSite};
use kf_tune::t1::{translate_python, T1Space};

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > 16 * 1024 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The translator alone, on any text: its output must be an expression kf-manifest reads
    // or an error, never a panic.
    if text.len() <= 4096 {
        if let Ok(translated) = translate_python(text) {
            let site = ExprSite {
                file: "t1".into(),
                field: "Conditions".into(),
            };
            let _ = Expr::parse(&translated, &site);
        }
    }
    let Ok(t1) = T1Space::from_json_str(text, "fuzz.T1.json") else {
        return;
    };
    assert_eq!(t1.conditions.len(), t1.translated.len());
    let _ = t1.space();
}

//! The kernel manifest parser (`kf_manifest::Manifest::parse`) and everything done with a
//! parsed manifest before a kernel runs: defaults, parameter resolution, constraints and the
//! launch geometry (every kernel's, for a sequence of kernels, and its scratch sizes), for
//! the default configuration and for single-parameter changes (at most 16 parameters x 8
//! values, so the work per input stays bounded by its size).

use crate::{device, sizes, MAX_INPUT};
use kf_core::{ParamValue, ParamValues};
use kf_manifest::Manifest;

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(manifest) = Manifest::parse(text, "fuzz.toml", None) else {
        return;
    };
    let device = device();
    let sizes = sizes();
    let mut configs = vec![ParamValues::new()];
    for (name, values) in manifest.params.iter().take(16) {
        for value in values.iter().take(8) {
            configs.push(ParamValues::new().with(name.clone(), value.clone()));
        }
    }
    for overrides in &configs {
        // Every declared value is allowed, so resolution must succeed.
        let params = manifest
            .resolve_params(overrides)
            .expect("a declared value was refused");
        let symbols = manifest.symbols(&params, &sizes, &device);
        let _ = manifest.check_constraints(&params, &symbols);
        let main = manifest.launch_range(&symbols);
        let ranges = manifest.launch_ranges(&symbols);
        if let Ok(ranges) = &ranges {
            // One range per kernel, in order; the main kernel's is among them.
            assert_eq!(ranges.len(), manifest.sequence.len().max(1));
            if let Ok(main) = &main {
                assert!(ranges
                    .iter()
                    .any(|(e, r)| *e == manifest.entry && r == main));
            }
        }
        for scratch in &manifest.scratch {
            let _ = scratch.elements_at(&symbols, &manifest.file);
        }
    }
    // A sequence names its main kernel among its kernels, and every scratch buffer is
    // written by one of them.
    if manifest.is_sequence() {
        assert!(manifest.sequence.iter().any(|k| k.entry == manifest.entry));
        for s in &manifest.scratch {
            assert!(manifest.sequence.iter().any(|k| k.writes.contains(&s.name)));
        }
    } else {
        assert!(manifest.scratch.is_empty());
    }
    // A parameter that is not declared must be refused.
    let bogus = ParamValues::new().with("__not_declared__", ParamValue::Int(1));
    assert!(manifest.resolve_params(&bogus).is_err());
    let _ = manifest.kernel_source(crate::PARENT_KERNEL);
}

//! Tasks: what is computed, at which sizes, what counts as correct, and how much work it is.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// How closely a kernel's output must match the reference. Both rules must hold: the per-element
/// one of KernelBench (`|out - ref| <= atol + rtol * |ref|` everywhere) and KernelFoundry's
/// aggregate one (more than `min_fraction_within` of elements within `relative_threshold`
/// relative error, and cosine similarity at least `min_cosine`). NaN or Inf is never accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Absolute tolerance per element.
    pub atol: f64,
    /// Relative tolerance per element.
    pub rtol: f64,
    /// Relative error under which an element counts as "within" for the aggregate rule.
    pub relative_threshold: f64,
    /// Fraction of elements that must be within `relative_threshold` (strictly more than this).
    pub min_fraction_within: f64,
    /// Minimum cosine similarity between output and reference.
    pub min_cosine: f64,
}

impl Tolerance {
    /// The fp32 defaults: atol = rtol = 1e-4, > 99% within 1%, cosine ≥ 0.99985.
    pub fn fp32() -> Self {
        Tolerance {
            atol: 1e-4,
            rtol: 1e-4,
            relative_threshold: 0.01,
            min_fraction_within: 0.99,
            min_cosine: 0.99985,
        }
    }
}

impl Default for Tolerance {
    fn default() -> Self {
        Self::fp32()
    }
}

/// The amount of work of one task instance, for throughput figures and the roofline check that
/// rejects physically impossible speedups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Floating-point operations (a multiply-add counts as two).
    pub flops: f64,
    /// Minimum bytes that must move between memory and the device (each input read once, each
    /// output written once).
    pub bytes: f64,
}

impl Work {
    /// The shortest time, in seconds, any kernel could take on a device with the given peak
    /// compute (GFLOP/s) and bandwidth (GB/s): the roofline bound.
    pub fn roofline_seconds(&self, peak_gflops: f64, peak_gbs: f64) -> f64 {
        let compute = if peak_gflops > 0.0 {
            self.flops / (peak_gflops * 1e9)
        } else {
            0.0
        };
        let memory = if peak_gbs > 0.0 {
            self.bytes / (peak_gbs * 1e9)
        } else {
            0.0
        };
        compute.max(memory)
    }
}

/// A problem to optimise a kernel for: a name, its sizes, the correctness rule and its work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Short name, such as `gemm`.
    pub name: String,
    /// Problem sizes by name (`M`, `N`, `K`, …), in declaration order.
    pub sizes: IndexMap<String, i64>,
    /// What correct means.
    pub tolerance: Tolerance,
    /// Work of one launch at these sizes.
    pub work: Work,
    /// One paragraph that tells a model what the kernel must compute, including its signature.
    #[serde(default)]
    pub description: String,
}

impl Task {
    /// A task with fp32 tolerances and no work figures.
    pub fn new(name: impl Into<String>) -> Self {
        Task {
            name: name.into(),
            sizes: IndexMap::new(),
            tolerance: Tolerance::fp32(),
            work: Work::default(),
            description: String::new(),
        }
    }

    /// Adds a problem size.
    pub fn with_size(mut self, name: impl Into<String>, value: i64) -> Self {
        self.sizes.insert(name.into(), value);
        self
    }

    /// Sets the work figures.
    pub fn with_work(mut self, flops: f64, bytes: f64) -> Self {
        self.work = Work { flops, bytes };
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

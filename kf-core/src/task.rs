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
    /// The kernel's declared interface (argument order, buffers, scalars), when the task
    /// declares one: task files do. Prompts render it as a section of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<KernelInterface>,
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
            interface: None,
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

    /// Sets the kernel interface.
    pub fn with_interface(mut self, interface: KernelInterface) -> Self {
        self.interface = Some(interface);
        self
    }
}

/// What a kernel of a task must look like from outside: its arguments in order, and what each
/// buffer and scalar is. Task files declare it; a prompt shows it to the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelInterface {
    /// The parameter list in the kernel language, such as
    /// `(const int N, __global const float* x, __global float* y)`.
    pub signature: String,
    /// Argument names in kernel argument order (sizes, scalars and buffers).
    pub args: Vec<String>,
    /// The buffers, in declaration order.
    pub buffers: Vec<BufferInterface>,
    /// The scalar arguments, in declaration order.
    #[serde(default)]
    pub scalars: Vec<ScalarInterface>,
}

/// How a kernel may use a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferAccess {
    /// Read only; must not be modified.
    Input,
    /// Written; every element must be written.
    Output,
    /// Read, then overwritten with the result (in place).
    Inout,
}

impl std::fmt::Display for BufferAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BufferAccess::Input => "input",
            BufferAccess::Output => "output",
            BufferAccess::Inout => "inout",
        })
    }
}

/// One buffer argument of a kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferInterface {
    /// Argument name.
    pub name: String,
    /// Element type as the task file names it (`f32`, `f16`, `i32`).
    pub dtype: String,
    /// Shape as expressions over the sizes (`["ROWS", "COLS"]`), row-major.
    pub shape: Vec<String>,
    /// The shape at the task's current sizes.
    pub dims: Vec<i64>,
    /// How the kernel may use it.
    pub access: BufferAccess,
}

/// One scalar argument of a kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalarInterface {
    /// Argument name.
    pub name: String,
    /// Type as the task file names it.
    pub dtype: String,
    /// The value every launch passes.
    pub value: f64,
}

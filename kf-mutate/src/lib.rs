//! # kf-mutate
//!
//! Offline mutators for KernelFoundry: they make real, different kernels without an LLM.
//!
//! * [`ParamMutator`] moves a kernel's parameters within its manifest's space (one or two
//!   parameters to adjacent values), respecting the constraints at the task's sizes on the
//!   device. It works for any task whose kernels carry a manifest.
//! * [`StructuralMutator`] changes a kernel's structure. It works on [`Template`]s — kernel
//!   source whose structure is switched by preprocessor sections, with a manifest — and a
//!   [`StrategyLibrary`] of named transformations with preconditions (local-memory tiling with
//!   padding, register blocking, vector loads, unrolling, work-group shapes, double buffering,
//!   prefetching, sub-group broadcasts, K splitting). Each child is a concrete variant: the
//!   sections resolved into plain source text, so a static classifier sees `__local` only where
//!   local memory is used, and a manifest with only the parameters that variant has.
//! * [`MixMutator`] draws one of several mutators by weight.
//!
//! All of them are deterministic: their random choices come from `ctx.seed` through ChaCha8.
//!
//! The shipped templates ([`TemplateLibrary::builtin`]) are SGEMM kernels for the `gemm` task;
//! `templates/README.md` records what they achieve on the Intel CPU OpenCL runtime. Every
//! shipped template is rendered in OpenCL C and in SYCL (`templates/sycl/`) with the same
//! switches and tunables, so one strategy library moves both ([`TemplateLibrary::builtin_for`],
//! [`StructuralMutator::builtin_for`]); SYCL's renderings add sub-group switches of their own
//! ([`StrategyLibrary::sycl_sub_groups`]).
//!
//! ```
//! use kf_mutate::{MixMutator, ParamMutator, StructuralMutator, Structure, TemplateLibrary};
//!
//! let library = TemplateLibrary::builtin().unwrap();
//! let template = library.get("gemm_blocked").unwrap();
//! let variant = template
//!     .instantiate(&Structure::new().with("LOCAL_B", 1).with("VW", 16))
//!     .unwrap();
//! assert!(variant.source.text.contains("__local float Bs"));
//! assert!(variant.source.text.contains("vload16"));
//! assert!(!variant.source.text.contains("sub_group_broadcast"));
//!
//! // What an engine would be given.
//! let mutator = MixMutator::new()
//!     .with(ParamMutator::new(), 1.0)
//!     .with(StructuralMutator::builtin().unwrap(), 1.0);
//! # let _ = mutator;
//! ```

mod binding;
mod cuda;
mod error;
mod families;
mod languages;
mod matmul_families;
mod mix;
mod param;
pub mod preprocess;
mod softmax;
mod space;
mod strategy;
mod structural;
mod sub_groups;
mod template;

pub use binding::{Macro, TaskBinding};
pub use cuda::{
    CUDA_GEMM_BLOCKED_CU, CUDA_GEMM_BLOCKED_TOML, CUDA_SOFTMAX_GROUP_CU, CUDA_SOFTMAX_GROUP_TOML,
};
pub use error::MutateError;
pub use languages::{
    template_languages, GEMM_BLOCKED_CL, GEMM_BLOCKED_TOML, GEMM_KSPLIT_CL, GEMM_KSPLIT_TOML,
    SOFTMAX_GROUP_CL, SOFTMAX_GROUP_TOML, SOFTMAX_ROW_CL, SOFTMAX_ROW_TOML, SYCL_GEMM_BLOCKED_CPP,
    SYCL_GEMM_BLOCKED_TOML, SYCL_GEMM_KSPLIT_CPP, SYCL_GEMM_KSPLIT_TOML, SYCL_SOFTMAX_GROUP_CPP,
    SYCL_SOFTMAX_GROUP_TOML, SYCL_SOFTMAX_ROW_CPP, SYCL_SOFTMAX_ROW_TOML,
};
pub use mix::MixMutator;
pub use param::{ParamMutator, ParamMutatorConfig};
pub use space::Feasibility;
pub use strategy::{Change, Move, MutationStrategy, StrategyLibrary, Target};
pub use structural::{CellPredictor, StructuralConfig, StructuralMutator};
pub use template::{variant_marker, Start, Structure, Template, TemplateLibrary, Variant};

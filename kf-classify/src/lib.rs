//! # kf-classify
//!
//! Behaviour classifiers for KernelFoundry: they place an evaluated kernel in a cell of the
//! descriptor space, so that MAP-Elites keeps kernels that optimise in different ways.
//!
//! * [`StaticClassifier`]: weighted source patterns for OpenCL C, SYCL and CUDA over the
//!   default space (memory access × algorithm structure × parallel coordination, four levels
//!   each). Comments and literals are stripped and `#if` branches are evaluated with the
//!   candidate's parameter values before matching ([`source`]); the highest level whose
//!   evidence passes wins. Every level's patterns are listed in [`RuleSet::kernel_default`];
//!   [`StaticClassifier::explain`] shows the scores.
//! * [`CompilerFactsClassifier`]: refines any classifier's descriptor with the compiler's
//!   report (local memory bytes, registers, spills). It is also the worked example of writing
//!   a classifier by hand.
//! * [`Refine`] / [`ClassifierExt`]: adjust any classifier's descriptors with a closure.
//!
//! ```
//! use kf_classify::{ClassifierExt, StaticClassifier};
//! use kf_core::prelude::*;
//!
//! let src = r#"
//! #if USE_LOCAL
//! #define TILE __local float tile[TS][TS]
//! #endif
//! __kernel void k(__global const float* x, __global float* y, const int n) {
//! #if USE_LOCAL
//!     TILE;
//!     barrier(CLK_LOCAL_MEM_FENCE);
//! #endif
//!     y[get_global_id(0)] = x[get_global_id(0)];
//! }"#;
//! let kernel = KernelSource::new(Language::OpenCl, "k", src).with_param("USE_LOCAL", [0i64, 1]);
//! let classifier = StaticClassifier::new().with_compiler_facts();
//! let eval = Evaluation::failed(Status::Correct, "");
//! let off = Candidate::seed(kernel.clone(), ParamValues::new().with("USE_LOCAL", 0i64).with("TS", 16i64));
//! let on = Candidate::seed(kernel, ParamValues::new().with("USE_LOCAL", 1i64).with("TS", 16i64));
//! assert_eq!(classifier.classify(&off, &eval).unwrap().coords, vec![0, 1, 0]);
//! assert_eq!(classifier.classify(&on, &eval).unwrap().coords, vec![2, 1, 1]);
//! ```

mod analysis;
mod classifier;
mod error;
mod facts;
mod refine;
mod rules;
pub mod source;

pub use classifier::{DimensionScore, Explanation, LevelScore, StaticClassifier, STATIC_SOURCE};
pub use error::ClassifyError;
pub use facts::{CompilerFactsClassifier, FACTS_SOURCE};
pub use refine::{ClassifierExt, Refine};
pub use rules::{DimensionRules, Feature, Languages, LevelRule, Matcher, Pattern, RuleSet};

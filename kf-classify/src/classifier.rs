//! [`StaticClassifier`]: classification by weighted source patterns.

use std::sync::{Arc, LazyLock};

use kf_core::{
    BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Evaluation, KernelSource,
    ParamValues,
};

use crate::analysis::{analyse, Facts};
use crate::error::ClassifyError;
use crate::rules::{Feature, Languages, Matcher, RuleSet};
use crate::source::{preprocess_with, Macros};

/// The `source` of descriptors made by [`StaticClassifier`].
pub const STATIC_SOURCE: &str = "static-patterns";

static DEFAULT_RULES: LazyLock<Result<Arc<RuleSet>, String>> = LazyLock::new(|| {
    RuleSet::kernel_default()
        .map(Arc::new)
        .map_err(|e| e.to_string())
});

/// Classifies OpenCL C, SYCL and CUDA kernels by weighted patterns over their source, in the
/// default space of the design (memory access × algorithm structure × parallel
/// coordination, four levels each; see [`RuleSet::kernel_default`] for every level's
/// patterns).
///
/// Before matching, the source is prepared by [`crate::source`]: comments and string
/// literals are removed, and conditional compilation (`#if`, `#ifdef`, `#elif`, `#else`) is
/// evaluated with the candidate's parameter values, so that a template compiled with
/// `USE_LOCAL=0` is not counted as local-memory tiled and `float acc[WPT]` with `WPT=1` is not
/// register blocking. The parameter values are the candidate's, overridden by the
/// evaluation's where it reports the values it was measured with (a tuner may have changed
/// them); parameters the kernel declares without a value are *unknown* and keep both
/// branches.
///
/// Per dimension, levels are scored lowest first: a level's score is the sum of the weights
/// of its patterns that fire (each once) for the kernel's language, and it passes when the
/// score reaches its threshold. The highest passing level wins; level 0 always passes.
/// The descriptor's `source` is `"static-patterns"` and its `evidence` has one entry per
/// dimension naming the patterns that fired, for example
/// `memory_access=3 (multi_level): L2 opencl_local; L3 local_memory, double_buffer_decl`.
///
/// ```
/// use kf_classify::StaticClassifier;
/// use kf_core::prelude::*;
///
/// let src = r#"
/// __kernel void gemm(const int K, __global const float* A, __global const float* B, __global float* C) {
///     __local float Asub[16][16];   // tiles in local memory
///     /* barrier( in a comment does not count */
///     for (int t = 0; t < K / 16; t++) { Asub[0][0] = A[t]; barrier(CLK_LOCAL_MEM_FENCE); }
/// }"#;
/// let kernel = KernelSource::new(Language::OpenCl, "gemm", src);
/// let d = StaticClassifier::new()
///     .classify(&Candidate::seed(kernel, ParamValues::new()), &Evaluation::failed(Status::Correct, ""))
///     .unwrap();
/// assert_eq!(d.coords, vec![2, 1, 1]);
/// assert_eq!(d.source, "static-patterns");
/// ```
#[derive(Debug, Clone)]
pub struct StaticClassifier {
    space: DescriptorSpace,
    rules: Result<Arc<RuleSet>, String>,
}

impl Default for StaticClassifier {
    fn default() -> Self {
        StaticClassifier::new()
    }
}

impl StaticClassifier {
    /// The classifier with the default rules over
    /// [`DescriptorSpace::kernel_default`]. Cheap: the rules are compiled once per process.
    pub fn new() -> Self {
        StaticClassifier {
            space: DescriptorSpace::kernel_default(),
            rules: DEFAULT_RULES.clone(),
        }
    }

    /// A classifier with custom rules (for example the defaults with extra patterns, see
    /// [`RuleSet::add_pattern`]) over the default space; an error if the rules do not have the
    /// space's dimensions and levels, in order.
    pub fn with_rules(rules: RuleSet) -> Result<Self, ClassifyError> {
        Self::with_space_and_rules(DescriptorSpace::kernel_default(), rules)
    }

    /// A classifier over a custom space with rules for exactly its dimensions and levels.
    pub fn with_space_and_rules(
        space: DescriptorSpace,
        rules: RuleSet,
    ) -> Result<Self, ClassifyError> {
        if space.ndim() != rules.dimensions.len() {
            return Err(ClassifyError::SpaceMismatch(format!(
                "{} dimensions in the space, {} in the rules",
                space.ndim(),
                rules.dimensions.len()
            )));
        }
        for (d, r) in space.dimensions.iter().zip(&rules.dimensions) {
            if d.name != r.name || d.levels.len() != r.levels.len() {
                return Err(ClassifyError::SpaceMismatch(format!(
                    "dimension `{}` with {} levels has rules `{}` with {} levels",
                    d.name,
                    d.levels.len(),
                    r.name,
                    r.levels.len()
                )));
            }
        }
        Ok(StaticClassifier {
            space,
            rules: Ok(Arc::new(rules)),
        })
    }

    /// The rules in use.
    pub fn rules(&self) -> Result<&RuleSet, ClassifyError> {
        self.rules
            .as_deref()
            .map_err(|e| ClassifyError::Rules(e.clone()))
    }

    /// Scores every level of every dimension for one kernel built with `params`, and says
    /// which patterns fired.
    pub fn explain(
        &self,
        kernel: &KernelSource,
        params: &ParamValues,
    ) -> Result<Explanation, ClassifyError> {
        let rules = self.rules()?;
        let language = Languages::of(kernel.language)
            .map(|_| kernel.language)
            .ok_or(ClassifyError::UnsupportedLanguage(kernel.language))?;
        let macros = Macros::from_params(params, kernel.params.keys().map(String::as_str));
        let pre = preprocess_with(&kernel.text, macros);
        let facts = analyse(&pre.text, &pre.macros).map_err(|source| ClassifyError::Pattern {
            name: "internal analysis".into(),
            source,
        })?;

        let mut dimensions = Vec::with_capacity(rules.dimensions.len());
        for (d, dim) in rules.dimensions.iter().enumerate() {
            let level_names = self
                .space
                .dimensions
                .get(d)
                .map(|s| s.levels.clone())
                .unwrap_or_default();
            let mut levels: Vec<LevelScore> = Vec::with_capacity(dim.levels.len());
            for (l, rule) in dim.levels.iter().enumerate() {
                let mut score = 0.0;
                let mut fired = Vec::new();
                for p in rule
                    .patterns
                    .iter()
                    .filter(|p| p.languages().contains(language))
                {
                    let hit = match p.matcher() {
                        Matcher::Regex(r) => r.is_match(&pre.text),
                        Matcher::Feature(f) => feature(*f, &facts, &levels),
                    };
                    if hit {
                        score += p.weight();
                        fired.push(p.name().to_owned());
                    }
                }
                levels.push(LevelScore {
                    level: l,
                    name: level_names.get(l).cloned().unwrap_or_else(|| l.to_string()),
                    score,
                    threshold: rule.threshold,
                    passed: score >= rule.threshold,
                    fired,
                });
            }
            let level = levels.iter().rposition(|s| s.passed).unwrap_or(0);
            dimensions.push(DimensionScore {
                name: dim.name.clone(),
                level,
                levels,
            });
        }
        Ok(Explanation { dimensions })
    }
}

/// Whether a structural feature holds.
fn feature(f: Feature, facts: &Facts, lower: &[LevelScore]) -> bool {
    match f {
        Feature::Always => true,
        Feature::LevelPasses(l) => lower.get(l).is_some_and(|s| s.passed),
        Feature::MultipleKernels => facts.kernels >= 2,
        Feature::RepeatedSweeps => facts.repeated_sweeps.is_some(),
        Feature::AccumulatorArray => !facts.accumulator_arrays.is_empty(),
        Feature::RegistersFromLocal => !facts.registers_from_local.is_empty(),
        Feature::RegisterPrefetch => !facts.register_prefetch.is_empty(),
        Feature::SingleSweepMoments => facts.single_sweep_moments,
        Feature::OnlineRescale => facts.online_rescale,
        Feature::GlobalAtomic => !facts.global_atomics.is_empty(),
        Feature::WorkGroupCollective => facts.work_group_collectives,
        Feature::SubGroupCollective => facts.sub_group_collectives,
    }
}

/// How one level of one dimension scored.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelScore {
    /// Level index.
    pub level: usize,
    /// Level name from the descriptor space.
    pub name: String,
    /// Sum of the weights of the patterns that fired.
    pub score: f64,
    /// The level's threshold.
    pub threshold: f64,
    /// Whether `score >= threshold`.
    pub passed: bool,
    /// Names of the patterns that fired.
    pub fired: Vec<String>,
}

/// How one dimension scored: the winning level and every level's score.
#[derive(Debug, Clone, PartialEq)]
pub struct DimensionScore {
    /// Dimension name.
    pub name: String,
    /// The winning level: the highest that passed.
    pub level: usize,
    /// Every level, lowest first.
    pub levels: Vec<LevelScore>,
}

impl DimensionScore {
    /// One line of evidence: `name=level (level name): L1 a, b; L3 c`, or `…: no evidence`.
    pub fn evidence(&self) -> String {
        let name = self
            .levels
            .get(self.level)
            .map(|l| l.name.as_str())
            .unwrap_or("");
        let fired: Vec<String> = self
            .levels
            .iter()
            .filter(|l| !l.fired.is_empty())
            .map(|l| format!("L{} {}", l.level, l.fired.join(", ")))
            .collect();
        let fired = if fired.is_empty() {
            "no evidence".to_owned()
        } else {
            fired.join("; ")
        };
        format!("{}={} ({}): {}", self.name, self.level, name, fired)
    }
}

/// The full scoring of one kernel by a [`StaticClassifier`].
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// One entry per dimension, in descriptor order.
    pub dimensions: Vec<DimensionScore>,
}

impl Explanation {
    /// The winning level per dimension.
    pub fn coords(&self) -> Vec<usize> {
        self.dimensions.iter().map(|d| d.level).collect()
    }

    /// The descriptor: coordinates, source `"static-patterns"`, one evidence line per
    /// dimension.
    pub fn to_descriptor(&self) -> Descriptor {
        let mut d = Descriptor::new(self.coords(), STATIC_SOURCE);
        d.evidence = self
            .dimensions
            .iter()
            .map(DimensionScore::evidence)
            .collect();
        d
    }
}

impl BehaviorClassifier for StaticClassifier {
    type Error = ClassifyError;

    fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    fn name(&self) -> &str {
        "static"
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error> {
        let params = evaluation.effective_params(candidate);
        Ok(self.explain(&candidate.source, &params)?.to_descriptor())
    }
}

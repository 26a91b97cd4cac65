//! [`CompilerFactsClassifier`]: refines another classifier's descriptor with what the compiler
//! reported. Written as the worked example of a hand-made classifier.

use kf_core::{BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Evaluation};

use crate::classifier::StaticClassifier;
use crate::error::ClassifyError;
use crate::refine::classify_refined;

/// The suffix added to a descriptor's `source` when compiler facts were used.
pub const FACTS_SOURCE: &str = "compiler-facts";

/// Wraps a classifier (by default a [`StaticClassifier`]) and refines its descriptor with the
/// [`CompilerFacts`](kf_core::CompilerFacts) of the evaluation, when the backend reports them.
/// Dimensions are looked up by name in the inner classifier's space (`memory_access`,
/// `algorithm_structure`); a space without them passes through untouched.
///
/// The rules, in order:
///
/// 1. **Local memory raises.** `local_mem_bytes > 0` with `memory_access < 2`: the kernel
///    does use local memory (perhaps behind a macro the patterns cannot see), so
///    `memory_access` becomes 2. With `memory_access >= 2` the fact is noted as confirmation.
///    A reported 0 does not lower anything: local memory passed as a kernel argument is
///    allocated at launch and is not in the static figure.
/// 2. **Register pressure confirms blocking.** `registers >= high_registers` (default 64)
///    with `algorithm_structure == 3` is noted as confirmation of register blocking.
/// 3. **Spilled register tiles are not a register level.** `spill_bytes > 0` with
///    `memory_access == 3`: the private tiles live in (slow) private memory, so the kernel
///    keeps only its local-memory level, 2; with `algorithm_structure == 3` the spill is
///    noted.
///
/// When a rule fires, its note is appended to `evidence` and `+compiler-facts` to `source`.
///
/// # Writing your own classifier
///
/// This type is the pattern to copy: hold the inner classifier, delegate
/// [`space`](BehaviorClassifier::space), call the inner
/// [`classify`](BehaviorClassifier::classify) (boxing its error into
/// [`ClassifyError::Inner`]), adjust the descriptor from whatever you know, say so in
/// `source` and `evidence`, and check the result is still in the space. A smaller example
/// that reads a profiler counter from the compiler facts' `extra` map:
///
/// ```
/// use kf_classify::{ClassifyError, StaticClassifier};
/// use kf_core::prelude::*;
///
/// /// Moves kernels the profiler reports as bandwidth-bound to memory level 1 at least.
/// struct BandwidthBound<C>(C);
///
/// impl<C: BehaviorClassifier> BehaviorClassifier for BandwidthBound<C> {
///     type Error = ClassifyError;
///     fn space(&self) -> &DescriptorSpace {
///         self.0.space()
///     }
///     fn classify(&self, c: &Candidate, e: &Evaluation) -> Result<Descriptor, ClassifyError> {
///         let mut d = self.0.classify(c, e).map_err(|err| ClassifyError::Inner(Box::new(err)))?;
///         let dram: f64 = e.compiler.extra.get("dram_util").and_then(|v| v.parse().ok()).unwrap_or(0.0);
///         if dram > 0.8 && d.coords[0] == 0 {
///             d.coords[0] = 1;
///             d.source.push_str("+profiler");
///             d.evidence.push(format!("profiler: dram utilisation {dram}"));
///         }
///         self.space().check(&d.coords)?;
///         Ok(d)
///     }
/// }
///
/// let kernel = KernelSource::new(Language::Cuda, "k", "__global__ void k(float* x) { x[0] = 1.0f; }");
/// let mut eval = Evaluation::failed(Status::Correct, "");
/// eval.compiler.extra.insert("dram_util".into(), "0.93".into());
/// let d = BandwidthBound(StaticClassifier::new())
///     .classify(&Candidate::seed(kernel, ParamValues::new()), &eval)
///     .unwrap();
/// assert_eq!(d.coords, vec![1, 1, 0]);
/// assert_eq!(d.source, "static-patterns+profiler");
/// ```
#[derive(Debug, Clone)]
pub struct CompilerFactsClassifier<C = StaticClassifier> {
    inner: C,
    high_registers: u32,
}

impl CompilerFactsClassifier<StaticClassifier> {
    /// Compiler facts over the default [`StaticClassifier`].
    ///
    /// ```
    /// use kf_classify::CompilerFactsClassifier;
    /// use kf_core::prelude::*;
    ///
    /// // Local memory hidden behind a macro the patterns do not know.
    /// let src = "#define SMEM __attribute__((address_space(3)))\n__kernel void k(__global float* x) { SMEM float t[64]; }";
    /// let kernel = KernelSource::new(Language::OpenCl, "k", src);
    /// let mut eval = Evaluation::failed(Status::Correct, "");
    /// eval.compiler.local_mem_bytes = Some(256);
    /// let d = CompilerFactsClassifier::new()
    ///     .classify(&Candidate::seed(kernel, ParamValues::new()), &eval)
    ///     .unwrap();
    /// assert_eq!(d.coords[0], 2);
    /// assert_eq!(d.source, "static-patterns+compiler-facts");
    /// ```
    pub fn new() -> Self {
        CompilerFactsClassifier::wrap(StaticClassifier::new())
    }
}

impl Default for CompilerFactsClassifier<StaticClassifier> {
    fn default() -> Self {
        CompilerFactsClassifier::new()
    }
}

impl<C> CompilerFactsClassifier<C> {
    /// Compiler facts over any classifier.
    pub fn wrap(inner: C) -> Self {
        CompilerFactsClassifier {
            inner,
            high_registers: 64,
        }
    }

    /// The register count from which register blocking counts as confirmed (default 64).
    pub fn high_registers(mut self, registers: u32) -> Self {
        self.high_registers = registers;
        self
    }

    /// The wrapped classifier.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: BehaviorClassifier> BehaviorClassifier for CompilerFactsClassifier<C> {
    type Error = ClassifyError;

    fn space(&self) -> &DescriptorSpace {
        self.inner.space()
    }

    /// `static+compiler-facts` over the shipped static classifier, else `compiler-facts`.
    fn name(&self) -> &str {
        if self.inner.name() == "static" {
            "static+compiler-facts"
        } else {
            "compiler-facts"
        }
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error> {
        classify_refined(&self.inner, candidate, evaluation, |d| {
            self.apply_facts(d, evaluation)
        })
    }
}

impl<C: BehaviorClassifier> CompilerFactsClassifier<C> {
    /// Adjusts `d` by the compiler facts of `evaluation`, with a note for each fact used.
    fn apply_facts(&self, d: &mut Descriptor, evaluation: &Evaluation) {
        let space = self.inner.space();
        let index = |name: &str| space.dimensions.iter().position(|dim| dim.name == name);
        let facts = &evaluation.compiler;
        let mut notes = Vec::new();

        if let Some(m) = index("memory_access").filter(|&m| m < d.coords.len()) {
            if let Some(bytes) = facts.local_mem_bytes.filter(|&b| b > 0) {
                if d.coords[m] < 2 {
                    d.coords[m] = 2;
                    notes.push(format!(
                        "compiler: {bytes} bytes of local memory, memory_access raised to 2"
                    ));
                } else {
                    notes.push(format!(
                        "compiler: {bytes} bytes of local memory confirm it"
                    ));
                }
            }
            if let Some(spill) = facts.spill_bytes.filter(|&s| s > 0) {
                if d.coords[m] == 3 {
                    d.coords[m] = 2;
                    notes.push(format!(
                        "compiler: {spill} bytes spilled, register tiles do not hold, memory_access lowered to 2"
                    ));
                }
            }
        }
        if let Some(a) = index("algorithm_structure").filter(|&a| a < d.coords.len()) {
            if d.coords[a] == 3 {
                if let Some(regs) = facts.registers.filter(|&r| r >= self.high_registers) {
                    notes.push(format!(
                        "compiler: {regs} registers confirm register blocking"
                    ));
                }
                if let Some(spill) = facts.spill_bytes.filter(|&s| s > 0) {
                    notes.push(format!("compiler: accumulators spill {spill} bytes"));
                }
            }
        }

        if !notes.is_empty() {
            d.source.push('+');
            d.source.push_str(FACTS_SOURCE);
            d.evidence.extend(notes);
        }
    }
}

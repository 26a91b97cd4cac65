//! The embedder's own behaviour descriptor: does the kernel stage data in local memory, and how
//! many outputs does a work-item compute.

use kernelfoundry::core::prelude::*;

/// Names of the parameters whose product is the outputs each work-item computes, in the
/// shipped gemm kernels and templates.
pub const OUTPUT_FACTORS: [&str; 4] = ["WPT", "TM", "TN", "VW"];

/// The embedder's own descriptor: does the kernel stage data in local memory (2 levels), and
/// how many outputs does a work-item compute (1, 2–8, more: 3 levels). 6 cells.
pub struct LocalAndOutputs {
    space: DescriptorSpace,
}

impl LocalAndOutputs {
    /// The classifier and its 6-cell space.
    pub fn new() -> anyhow::Result<Self> {
        let space = DescriptorSpace::new(vec![
            Dimension::new("local memory", ["no", "yes"]),
            Dimension::new("outputs per work-item", ["1", "2-8", ">8"]),
        ])?;
        Ok(LocalAndOutputs { space })
    }
}

impl BehaviorClassifier for LocalAndOutputs {
    type Error = std::convert::Infallible;

    fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    fn name(&self) -> &str {
        "local-and-outputs"
    }

    fn classify(&self, c: &Candidate, e: &Evaluation) -> Result<Descriptor, Self::Error> {
        // The values the kernel was measured with, not only the ones it was proposed with.
        let params = e.effective_params(c);
        let int = |name: &str| params.get(name).and_then(ParamValue::as_i64);
        // Templates switch local memory with parameters; other kernels show it in their text.
        let switches = [int("LOCAL_A"), int("LOCAL_B")];
        let local = if switches.iter().any(Option::is_some) {
            switches.contains(&Some(1))
        } else {
            c.source.text.contains("__local")
        };
        let outputs: i64 = OUTPUT_FACTORS.iter().filter_map(|n| int(n)).product();
        let level = match outputs {
            ..=1 => 0,
            2..=8 => 1,
            _ => 2,
        };
        let mut d = Descriptor::new([usize::from(local), level], "local-and-outputs");
        d.evidence = vec![
            format!("local memory: {local}"),
            format!("outputs per work-item: {outputs}"),
        ];
        Ok(d)
    }
}

//! Test problems shipped with the crate (as argmin ships its test functions): a synthetic kernel
//! search whose optimum per cell is known, a uniform random-search mutator to compare against,
//! and a small reference archive. No GPU needed; everything is deterministic given its seeds.
//!
//! A synthetic "kernel" is a point `x` in `[0, 1]^d`, carried as parameters `X0 … X{d-1}`. Its
//! cell is given by `X0, X1, X2` (`levels` levels each). Its speedup is
//! `(1 + Σ cell coordinates) · g(x)` where `g` is a Gaussian bump peaking at the centre of the
//! cell in the first three coordinates and at `0.3`/`0.7` (alternating) in the others, so the
//! optimum of each cell is known exactly ([`SyntheticEvaluator::optimum`]) and local search
//! pays. Points outside `[0, 1]^d` fail to "compile".
//!
//! [`skip`]: the one rule for a test that cannot run here (skip and record it, or fail when
//! `KF_REQUIRE_<KIND>=1`), used by every crate's tests.

pub mod conformance;
pub mod skip;

use std::convert::Infallible;

use async_trait::async_trait;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::candidate::{Candidate, Offspring, Origin};
use crate::descriptor::{Descriptor, DescriptorSpace, Dimension};
use crate::evaluation::{Evaluation, Status, TimingStats};
use crate::kernel::{KernelSource, Language, ParamValue, ParamValues};
use crate::traits::archive::{Archive, ArchiveHints, ArchiveMetrics, Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutation, MutationContext, Mutator};

const SIGMA_CELL: f64 = 0.08;
const SIGMA_REST: f64 = 0.12;

fn source() -> KernelSource {
    KernelSource::new(Language::OpenCl, "synthetic", "// synthetic kernel")
}

fn coordinates(params: &ParamValues) -> Vec<f64> {
    params.iter().filter_map(|(_, v)| v.as_f64()).collect()
}

fn point(x: &[f64]) -> ParamValues {
    x.iter()
        .enumerate()
        .map(|(i, v)| (format!("X{i}"), ParamValue::Float(*v)))
        .collect()
}

/// The seed of the synthetic problem: the point `(0.5, …)` in `d` dimensions (`d >= 3`).
pub fn synthetic_seed(d: usize) -> Candidate {
    Candidate::seed(source(), point(&vec![0.5; d.max(3)]))
}

/// Classifies a synthetic point by its first three coordinates.
#[derive(Debug, Clone)]
pub struct SyntheticClassifier {
    space: DescriptorSpace,
    levels: usize,
    features: bool,
}

impl SyntheticClassifier {
    /// Three dimensions with `levels` levels each (at least 1).
    pub fn new(levels: usize) -> Self {
        let levels = levels.max(1);
        let space = DescriptorSpace {
            dimensions: (0..3)
                .map(|i| Dimension::numbered(format!("x{i}"), levels))
                .collect(),
        };
        SyntheticClassifier {
            space,
            levels,
            features: false,
        }
    }

    /// Also gives each descriptor continuous [`features`](Descriptor::features): the point's
    /// first three coordinates, clamped to `[0, 1]` (for archives over a continuous space,
    /// such as kf-archive's CVT archive).
    ///
    /// ```
    /// use kf_core::prelude::*;
    /// use kf_core::testing::{synthetic_seed, SyntheticClassifier};
    ///
    /// let c = SyntheticClassifier::new(4).with_features();
    /// let d = c.classify(&synthetic_seed(5), &Evaluation::failed(Status::Correct, "")).unwrap();
    /// assert_eq!(d.features, vec![0.5, 0.5, 0.5]);
    /// ```
    pub fn with_features(mut self) -> Self {
        self.features = true;
        self
    }

    fn cell_of(&self, x: &[f64]) -> Vec<usize> {
        x.iter()
            .take(3)
            .map(|v| ((v.clamp(0.0, 1.0) * self.levels as f64) as usize).min(self.levels - 1))
            .collect()
    }
}

/// The synthetic classifier's error: a point with fewer than three coordinates.
#[derive(Debug, thiserror::Error)]
#[error("a synthetic point needs at least three coordinates, got {0}")]
pub struct TooFewCoordinates(pub usize);

impl BehaviorClassifier for SyntheticClassifier {
    type Error = TooFewCoordinates;
    fn space(&self) -> &DescriptorSpace {
        &self.space
    }
    fn classify(&self, c: &Candidate, _e: &Evaluation) -> Result<Descriptor, Self::Error> {
        let x = coordinates(&c.params);
        if x.len() < 3 {
            return Err(TooFewCoordinates(x.len()));
        }
        let d = Descriptor::new(self.cell_of(&x), "synthetic");
        if self.features {
            let f: Vec<f64> = x.iter().take(3).map(|v| v.clamp(0.0, 1.0)).collect();
            return Ok(d.with_features(f));
        }
        Ok(d)
    }
}

/// Evaluates synthetic points with a known optimum per cell.
#[derive(Debug, Clone)]
pub struct SyntheticEvaluator {
    levels: usize,
}

impl SyntheticEvaluator {
    /// An evaluator for 4 levels per dimension.
    pub fn new() -> Self {
        Self::with_levels(4)
    }

    /// An evaluator for `levels` levels per dimension (match the classifier).
    pub fn with_levels(levels: usize) -> Self {
        SyntheticEvaluator {
            levels: levels.max(1),
        }
    }

    /// The speedup of a point (0 outside the unit cube).
    pub fn speedup(&self, x: &[f64]) -> f64 {
        if x.len() < 3 || x.iter().any(|v| !(0.0..=1.0).contains(v)) {
            return 0.0;
        }
        let l = self.levels as f64;
        let mut base = 1.0;
        let mut exponent = 0.0;
        for (i, v) in x.iter().enumerate() {
            if i < 3 {
                let cell = (v * l).floor().min(l - 1.0);
                base += cell;
                let centre = (cell + 0.5) / l;
                exponent += ((v - centre) * l).powi(2) / (2.0 * SIGMA_CELL * SIGMA_CELL * l);
            } else {
                let target = if i % 2 == 1 { 0.3 } else { 0.7 };
                exponent += (v - target).powi(2) / (2.0 * SIGMA_REST * SIGMA_REST);
            }
        }
        base * (-exponent).exp()
    }

    /// The best speedup reachable in `cell`.
    pub fn optimum(&self, cell: &[usize]) -> f64 {
        1.0 + cell.iter().sum::<usize>() as f64
    }
}

impl Default for SyntheticEvaluator {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Evaluator for SyntheticEvaluator {
    type Error = Infallible;
    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Infallible> {
        let x = coordinates(&c.params);
        if x.len() < 3 || x.iter().any(|v| !(0.0..=1.0).contains(v)) {
            return Ok(Evaluation::failed(
                Status::CompileError,
                "a coordinate is outside [0, 1]",
            ));
        }
        let speedup = self.speedup(&x).max(1e-9);
        let (Some(timing), Some(baseline)) = (
            TimingStats::from_samples(&[1e-3 / speedup]),
            TimingStats::from_samples(&[1e-3]),
        ) else {
            return Ok(Evaluation::failed(Status::RuntimeError, "no timing"));
        };
        let mut e = Evaluation::correct(timing, Some(baseline));
        e.params = c.params.clone();
        Ok(e)
    }
}

/// Moves every coordinate of the parent by a small random step (approximately Gaussian).
#[derive(Debug, Clone)]
pub struct SyntheticMutator {
    sigma: f64,
}

impl SyntheticMutator {
    /// Steps with standard deviation `sigma`.
    pub fn new(sigma: f64) -> Self {
        SyntheticMutator { sigma }
    }
}

#[async_trait]
impl Mutator for SyntheticMutator {
    type Error = Infallible;
    fn name(&self) -> &str {
        "synthetic-gaussian"
    }
    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Infallible> {
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let x: Vec<f64> = coordinates(&parent.candidate.params)
            .into_iter()
            .map(|v| {
                // Irwin–Hall with 3 terms: mean 0, variance 1 after scaling by 2.
                let n: f64 = (0..3).map(|_| rng.random::<f64>()).sum::<f64>() - 1.5;
                (v + 2.0 * n * self.sigma).clamp(0.0, 1.0)
            })
            .collect();
        Ok(one_child(self.name(), &x))
    }
}

/// A free mutation with one child at point `x`, credited to `mutator`.
fn one_child(mutator: &str, x: &[f64]) -> Mutation {
    let child = Offspring::new(source(), point(x), Origin::mutator(mutator));
    Mutation::free(vec![child])
}

/// Three emitters over [`SyntheticMutator`]s, for tests and examples of a
/// [`Scheduler`](crate::emitter::Scheduler): the archive's choice with steps of 0.1, the
/// frontier with steps of 0.2, and the 4 fittest elites with steps of 0.05.
pub fn synthetic_emitters() -> Vec<Box<dyn crate::emitter::Emitter>> {
    use crate::emitter::SelectionEmitter;
    use crate::BoxMutator;
    vec![
        Box::new(SelectionEmitter::archive(BoxMutator::new(
            SyntheticMutator::new(0.1),
        ))),
        Box::new(SelectionEmitter::frontier(BoxMutator::new(
            SyntheticMutator::new(0.2),
        ))),
        Box::new(SelectionEmitter::elite(
            BoxMutator::new(SyntheticMutator::new(0.05)),
            4,
        )),
    ]
}

/// Ignores the parent and proposes a uniformly random point: random search, the baseline
/// MAP-Elites must beat.
#[derive(Debug, Clone)]
pub struct UniformMutator {
    dims: usize,
}

impl UniformMutator {
    /// Points in `[0, 1]^dims`.
    pub fn new(dims: usize) -> Self {
        UniformMutator { dims }
    }
}

#[async_trait]
impl Mutator for UniformMutator {
    type Error = Infallible;
    fn name(&self) -> &str {
        "uniform-random"
    }
    async fn mutate(&self, _parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Infallible> {
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let x: Vec<f64> = (0..self.dims).map(|_| rng.random::<f64>()).collect();
        Ok(one_child(self.name(), &x))
    }
}

/// A plain reference archive: one optional elite per cell, uniform parent selection. Simple on
/// purpose, for documentation and as an oracle for faster archives.
#[derive(Debug, Clone)]
pub struct VecArchive {
    space: DescriptorSpace,
    shape: Vec<usize>,
    cells: Vec<Option<Elite>>,
    additions: u64,
}

/// Error of [`VecArchive`]: a descriptor outside the space.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutOfSpace(#[from] crate::CoreError);

impl VecArchive {
    /// An empty archive over `space`.
    pub fn new(space: DescriptorSpace) -> Self {
        VecArchive {
            shape: space.shape(),
            cells: vec![None; space.cells()],
            space,
            additions: 0,
        }
    }

    fn index(&self, coords: &[usize]) -> usize {
        coords
            .iter()
            .zip(&self.shape)
            .fold(0, |acc, (c, n)| acc * n + c)
    }

    fn coords(&self, mut index: usize) -> Vec<usize> {
        let mut out = vec![0; self.shape.len()];
        for (slot, n) in out.iter_mut().zip(&self.shape).rev() {
            *slot = index % n;
            index /= n;
        }
        out
    }
}

impl Archive for VecArchive {
    type Error = OutOfSpace;
    fn space(&self) -> &DescriptorSpace {
        &self.space
    }
    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, OutOfSpace> {
        self.space.check(&elite.descriptor.coords)?;
        let i = self.index(&elite.descriptor.coords);
        let outcome = match &self.cells[i] {
            None => InsertOutcome::NewCell,
            Some(old) if elite.fitness > old.fitness => InsertOutcome::Improved {
                previous: old.fitness,
                gain: elite.fitness.value() - old.fitness.value(),
            },
            Some(old) => {
                return Ok(InsertOutcome::NotAdded {
                    incumbent: old.fitness,
                })
            }
        };
        self.cells[i] = Some(elite);
        self.additions += 1;
        Ok(outcome)
    }
    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        let filled: Vec<&Elite> = self.cells.iter().flatten().collect();
        if filled.is_empty() {
            return None;
        }
        let i = rng.random_range(0..filled.len());
        Some(filled[i])
    }
    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        let others: Vec<&Elite> = self
            .cells
            .iter()
            .flatten()
            .filter(|e| e.descriptor.coords != cell)
            .collect();
        (0..n.min(others.len()))
            .map(|_| others[rng.random_range(0..others.len())])
            .collect()
    }
    fn hints(&self, _near: Option<&[usize]>) -> ArchiveHints {
        let empty_frontier = (0..self.cells.len())
            .filter(|i| self.cells[*i].is_none())
            .map(|i| self.coords(i))
            .collect();
        ArchiveHints {
            space: Some(self.space.clone()),
            empty_frontier,
            recently_improved: Vec::new(),
            filled: (0..self.cells.len())
                .filter(|i| self.cells[*i].is_some())
                .map(|i| self.coords(i))
                .collect(),
            metrics: self.metrics(),
        }
    }
    fn metrics(&self) -> ArchiveMetrics {
        let fitness: Vec<f64> = self
            .cells
            .iter()
            .flatten()
            .map(|e| e.fitness.value())
            .collect();
        let filled = fitness.len();
        ArchiveMetrics {
            cells: self.cells.len(),
            filled,
            coverage: filled as f64 / self.cells.len() as f64,
            qd_score: fitness.iter().sum(),
            best: self.cells.iter().flatten().map(|e| e.fitness).max(),
            mean: (filled > 0).then(|| fitness.iter().sum::<f64>() / filled as f64),
            additions: self.additions,
        }
    }
    fn elites(&self) -> Vec<&Elite> {
        self.cells.iter().flatten().collect()
    }
}

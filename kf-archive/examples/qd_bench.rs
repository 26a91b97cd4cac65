//! Does diversity pay? Quality-diversity configurations side by side on the synthetic problem
//! of `kf_core::testing` (a known optimum per cell), each after the same number of
//! evaluations, over several seeds; prints a markdown table of mean ± standard deviation.
//!
//! ```text
//! cargo run --release -p kf-archive --example qd_bench -- [EVALUATIONS] [SEEDS]
//! KF_QD_BENCH_LOCAL=1 cargo run --release -p kf-archive --example qd_bench   # local moves only
//! ```
//!
//! (defaults: 2000 evaluations, 10 seeds)
//!
//! Configurations (the same three mutators in all: a small Gaussian step, a large one, and a
//! uniform random point, or a long Gaussian jump under `KF_QD_BENCH_LOCAL`):
//! * `grid, fixed weights`: today's search: the 4×4×4 grid's own 70/20/10 parent selection,
//!   mutators drawn with fixed weights 3:2:1;
//! * `grid, bandit over the mutators`: the grid's own selection, the mutator picked by the
//!   discounted-UCB scheduler instead of fixed weights;
//! * `grid, emitters + bandit`: archive, frontier and elite emitters over those mutators,
//!   picked by the scheduler;
//! * `CVT`: a CVT archive of 64 centroids (as many as the grid's cells) over the point's first
//!   three coordinates as continuous features, today's fixed mix;
//! * `4 islands`: four grids evolving separately (migration of 2 elites to the next island
//!   every 100 insertions, reseeding after 150 insertions without an improvement), with the
//!   fixed mix or with emitters + bandit;
//! * `keep-best only`: one population of one (a hill climber that keeps its best), the same
//!   fixed mutator weights: no archive diversity.
//!
//! Coverage and QD-score are those of every kernel a run evaluated, placed in the 4×4×4 grid
//! after the fact, so the configurations compare on one measure (for a grid, or islands'
//! union, that is the archive itself); "own archive's coverage" is that of the run's archive
//! (centroids for the CVT, one cell for keep-best).
//!
//! "QD / optimum" is the QD-score as a fraction of the known optimum's (every cell at its
//! best); "best" is the best speedup found (the optimum is 10, in cell (3,3,3)).

use std::error::Error;
use std::sync::{Arc, Mutex};

use kf_archive::{
    CvtArchive, CvtConfig, EliteArchive, FeatureSpace, GridConfig, IslandArchive, IslandConfig,
};
use kf_core::emitter::{Emitter, Scheduler, SchedulerPolicy, SelectionEmitter};
use kf_core::prelude::*;
use kf_core::testing::{
    synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, UniformMutator,
    VecArchive,
};
use kf_core::{BoxMutator, CoreError};
use rand::RngCore;

const LEVELS: usize = 4;
/// Coordinates of a synthetic point: three that place it in the grid, three more to tune.
const DIMS: usize = 5;

fn small() -> BoxMutator {
    BoxMutator::new(SyntheticMutator::new(0.03))
}
fn large() -> BoxMutator {
    BoxMutator::new(SyntheticMutator::new(0.12))
}
/// The third mutator: a uniform random point (random restarts) or, with `KF_QD_BENCH_LOCAL`
/// set, a long Gaussian jump, so that every move is local as the kernel mutators' are.
fn uniform() -> BoxMutator {
    if std::env::var_os("KF_QD_BENCH_LOCAL").is_some() {
        BoxMutator::new(SyntheticMutator::new(0.3))
    } else {
        BoxMutator::new(UniformMutator::new(DIMS))
    }
}

/// Today's fixed mix, as a scheduler with fixed weights over the archive's own selection.
fn fixed_mix() -> Result<Scheduler, CoreError> {
    let emitters: Vec<Box<dyn Emitter>> = vec![
        Box::new(SelectionEmitter::archive(small()).named("archive/small")),
        Box::new(SelectionEmitter::archive(large()).named("archive/large")),
        Box::new(SelectionEmitter::archive(uniform()).named("archive/third")),
    ];
    Scheduler::new(
        emitters,
        SchedulerPolicy::Fixed {
            weights: vec![3.0, 2.0, 1.0],
        },
    )
}

/// The fixed mix's emitters under the bandit: the mutator is learned, the parent selection is
/// today's.
fn archive_bandit() -> Result<Scheduler, CoreError> {
    let emitters: Vec<Box<dyn Emitter>> = vec![
        Box::new(SelectionEmitter::archive(small()).named("archive/small")),
        Box::new(SelectionEmitter::archive(large()).named("archive/large")),
        Box::new(SelectionEmitter::archive(uniform()).named("archive/third")),
    ];
    Scheduler::bandit(emitters)
}

fn bandit() -> Result<Scheduler, CoreError> {
    let emitters: Vec<Box<dyn Emitter>> = vec![
        Box::new(SelectionEmitter::archive(small()).named("archive/small")),
        Box::new(SelectionEmitter::archive(large()).named("archive/large")),
        Box::new(SelectionEmitter::frontier(large()).named("frontier/large")),
        Box::new(SelectionEmitter::frontier(uniform()).named("frontier/third")),
        Box::new(SelectionEmitter::elite(small(), 4).named("elite/small")),
    ];
    Scheduler::bandit(emitters)
}

/// Keeps the single best kernel: a population of one (a one-cell archive: every descriptor
/// is folded onto its only cell).
struct KeepBest(VecArchive);

impl KeepBest {
    fn new() -> Self {
        KeepBest(VecArchive::new(SyntheticClassifier::new(1).space().clone()))
    }
}

impl Archive for KeepBest {
    type Error = <VecArchive as Archive>::Error;
    fn space(&self) -> &DescriptorSpace {
        self.0.space()
    }
    fn insert(&mut self, mut elite: Elite) -> Result<InsertOutcome, Self::Error> {
        elite.descriptor.coords = vec![0; elite.descriptor.coords.len()];
        self.0.insert(elite)
    }
    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        self.0.select_parent(rng)
    }
    fn inspirations(&self, _rng: &mut dyn RngCore, _cell: &[usize], _n: usize) -> Vec<&Elite> {
        Vec::new()
    }
    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        self.0.hints(near)
    }
    fn metrics(&self) -> ArchiveMetrics {
        self.0.metrics()
    }
    fn elites(&self) -> Vec<&Elite> {
        self.0.elites()
    }
}

/// What one run reached.
#[derive(Debug, Clone, Copy)]
struct Reached {
    /// Coverage of the 4×4×4 grid by every kernel evaluated.
    coverage: f64,
    /// QD-score of that grid over the optimum's.
    qd_fraction: f64,
    /// Best speedup found.
    best: f64,
    /// Coverage of the run's own archive (its cells: grid cells, centroids, a single cell).
    own_coverage: f64,
}

fn grid() -> Result<EliteArchive, Box<dyn Error>> {
    let space = SyntheticClassifier::new(LEVELS).space().clone();
    let config = GridConfig::default().with_qd_offset(Fitness::CORRECT_BASE);
    Ok(EliteArchive::with_config(space, config)?)
}

/// The CVT archive: 64 centroids (as many as the grid's cells) over the point's first three
/// coordinates.
fn cvt(seed: u64) -> Result<CvtArchive, Box<dyn Error>> {
    let config = CvtConfig::default()
        .with_centroids(LEVELS * LEVELS * LEVELS)
        .with_seed(seed)
        .with_grid(GridConfig::default().with_qd_offset(Fitness::CORRECT_BASE));
    Ok(CvtArchive::new(FeatureSpace::unit(3)?, config)?)
}

/// Four islands of grids with the default migration (every 100 insertions, 2 elites to the
/// next island) and reseeding (after 150 insertions without an improvement).
fn islands() -> Result<IslandArchive<EliteArchive>, Box<dyn Error>> {
    Ok(IslandArchive::new(
        grid()?,
        IslandConfig::default().with_islands(4),
    )?)
}

/// The known optimum's QD-score: every cell at its best speedup.
fn optimum_qd() -> f64 {
    let e = SyntheticEvaluator::with_levels(LEVELS);
    let mut total = 0.0;
    for a in 0..LEVELS {
        for b in 0..LEVELS {
            for c in 0..LEVELS {
                total += e.optimum(&[a, b, c]);
            }
        }
    }
    total
}

/// Runs `scheduler` over `archive` and measures it: every kernel it evaluated is placed in a
/// grid after the fact (for a grid archive, or islands' union, that grid is the archive
/// itself; for the CVT and keep-best archives it is what they found, kept or not).
fn run<A: Archive + 'static>(
    scheduler: Scheduler,
    archive: A,
    seed: u64,
    evaluations: u64,
) -> Result<Reached, Box<dyn Error>> {
    let classifier = SyntheticClassifier::new(LEVELS).with_features();
    let shadow = Arc::new(Mutex::new(grid()?));
    let seen = Arc::clone(&shadow);
    let placer = move |r: &EvaluationReport<'_>| -> Result<(), BoxError> {
        if let (Some(evaluation), Some(descriptor), Some(fitness)) =
            (r.evaluation, r.descriptor, r.fitness)
        {
            let elite = Elite {
                candidate: r.candidate.clone(),
                evaluation: evaluation.clone(),
                descriptor: descriptor.clone(),
                fitness,
            };
            let mut grid = seen.lock().unwrap_or_else(|p| p.into_inner());
            Archive::insert(&mut *grid, elite)?;
        }
        Ok(())
    };
    let result = Engine::new(
        scheduler,
        SyntheticEvaluator::with_levels(LEVELS),
        classifier,
        archive,
    )
    .seeds(vec![synthetic_seed(DIMS)])
    .seed(seed)
    .budget(Budget::evaluations(evaluations))
    .add_observer(placer, ObserverMode::Always)
    .run_blocking()?;
    let grid = shadow.lock().unwrap_or_else(|p| p.into_inner());
    let m = grid.metrics();
    let best = Archive::elites(&*grid)
        .iter()
        .filter_map(|e| e.evaluation.speedup)
        .fold(0.0, f64::max);
    Ok(Reached {
        coverage: m.coverage,
        qd_fraction: m.qd_score / optimum_qd(),
        best,
        own_coverage: result.archive.metrics().coverage,
    })
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let evaluations: u64 = args.next().map_or(Ok(2000), |a| a.parse())?;
    let seeds: u64 = args.next().map_or(Ok(10), |a| a.parse())?;
    if seeds < 2 || evaluations < 2 {
        return Err("give at least 2 evaluations and 2 seeds".into());
    }
    type Runner = fn(u64, u64) -> Result<Reached, Box<dyn Error>>;
    let configurations: [(&str, Runner); 7] = [
        ("grid, fixed weights (today)", |s, n| {
            run(fixed_mix()?, grid()?, s, n)
        }),
        ("grid, bandit over the mutators", |s, n| {
            run(archive_bandit()?, grid()?, s, n)
        }),
        ("grid, emitters + bandit scheduler", |s, n| {
            run(bandit()?, grid()?, s, n)
        }),
        ("CVT (64 centroids), fixed weights", |s, n| {
            run(fixed_mix()?, cvt(s)?, s, n)
        }),
        ("4 islands of grids, fixed weights", |s, n| {
            run(fixed_mix()?, islands()?, s, n)
        }),
        ("4 islands, emitters + bandit", |s, n| {
            run(bandit()?, islands()?, s, n)
        }),
        ("keep-best only (no diversity)", |s, n| {
            run(fixed_mix()?, KeepBest::new(), s, n)
        }),
    ];
    let third = if std::env::var_os("KF_QD_BENCH_LOCAL").is_some() {
        "long Gaussian jump"
    } else {
        "uniform random point"
    };
    println!(
        "Synthetic problem: {LEVELS}x{LEVELS}x{LEVELS} cells, {DIMS} coordinates, third mutator: \
         {third}; {evaluations} evaluations, seeds 0..{seeds}; mean ± sd\n"
    );
    println!(
        "| configuration | coverage | QD / optimum | best speedup (optimum 10) | own archive's coverage |"
    );
    println!("|---|---|---|---|---|");
    for (name, runner) in configurations {
        let runs: Vec<Reached> = (0..seeds)
            .map(|s| runner(s, evaluations))
            .collect::<Result<_, _>>()?;
        let col = |f: fn(&Reached) -> f64| {
            let (m, sd) = mean_sd(&runs.iter().map(f).collect::<Vec<_>>());
            format!("{m:.3} ± {sd:.3}")
        };
        println!(
            "| {name} | {} | {} | {} | {} |",
            col(|r| r.coverage),
            col(|r| r.qd_fraction),
            col(|r| r.best),
            col(|r| r.own_coverage)
        );
    }
    Ok(())
}

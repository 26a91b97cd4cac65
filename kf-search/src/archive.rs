//! The search's archive, made by an [`ArchiveFactory`]: the shipped one ([`ShippedArchive`])
//! makes the default grid, a CVT archive over continuous descriptors, or islands of either
//! (`--archive grid|cvt`, `--islands N`: [`ShippedArchive::named`],
//! [`ShippedArchive::with_islands`]); an embedder's makes any [`Archive`]
//! ([`crate::SearchBuilder::archive_factory`]).

use std::path::Path;

use kf_archive::{
    ArchiveError, CvtArchive, CvtConfig, EliteArchive, Feature, FeatureSpace, GridConfig,
    IslandArchive, IslandConfig,
};
use kf_core::{
    Archive, ArchiveHints, ArchiveMetrics, BehaviorClassifier, Candidate, Descriptor,
    DescriptorSpace, Elite, Evaluation, InsertOutcome,
};
use rand::RngCore;

/// Whether the shipped archive is a grid or a CVT archive (private: a user names the
/// archive by [`ShippedArchive`]'s constructors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Layout {
    /// The grid over the classifier's descriptor space.
    #[default]
    Grid,
    /// A CVT archive over continuous descriptors ([`cvt_features`]).
    Cvt,
}

impl Layout {
    /// The name on the command line and in run directories.
    fn name(self) -> &'static str {
        match self {
            Layout::Grid => "grid",
            Layout::Cvt => "cvt",
        }
    }
}

/// An archive name that is neither `grid` nor `cvt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown archive `{0}`; the archives are: grid, cvt")]
pub struct UnknownArchive(pub String);

/// Upper end of the local-memory feature: log2 of 1 + 64 KiB.
const LOCAL_MEM_LOG2_MAX: f64 = 16.000_022;
/// Upper end of the register feature.
const REGISTERS_MAX: f64 = 255.0;

/// The continuous descriptors of the shipped CVT search, for a classifier over `space`: each
/// of its dimensions as a coordinate in `[0, 1]` (level / (levels − 1); for the default
/// classifier the three static labels, refined by compiler facts), then the local memory the
/// compiler reports per work-group (`log2(1 + bytes)`, 0 to 16, 0 when not reported), then,
/// with `registers` (backends that report them: CUDA), the registers per thread (0 to 255).
pub fn cvt_features(
    space: &DescriptorSpace,
    registers: bool,
) -> Result<FeatureSpace, ArchiveError> {
    let mut features: Vec<Feature> = space
        .dimensions
        .iter()
        .map(|d| Feature::new(d.name.clone(), 0.0, 1.0))
        .collect();
    features.push(Feature::new(
        "local_mem_log2_bytes",
        0.0,
        LOCAL_MEM_LOG2_MAX,
    ));
    if registers {
        features.push(Feature::new("registers", 0.0, REGISTERS_MAX));
    }
    FeatureSpace::new(features)
}

/// A classifier that adds the shipped CVT search's continuous descriptors ([`cvt_features`])
/// to its inner classifier's descriptors, unless they already have features (a classifier of
/// one's own that gives them). With `enabled` false it is the inner classifier unchanged.
#[derive(Debug, Clone)]
pub struct WithFacts<C> {
    inner: C,
    enabled: bool,
    registers: bool,
}

impl<C: BehaviorClassifier> WithFacts<C> {
    /// Wraps `inner`; `registers` adds the register feature.
    pub fn new(inner: C, enabled: bool, registers: bool) -> Self {
        WithFacts {
            inner,
            enabled,
            registers,
        }
    }

    /// The continuous descriptor of a descriptor of the inner space and an evaluation.
    pub fn features(&self, d: &Descriptor, evaluation: &Evaluation) -> Vec<f64> {
        let mut f: Vec<f64> = d
            .coords
            .iter()
            .zip(&self.inner.space().dimensions)
            .map(|(&level, dim)| {
                let top = dim.levels.len().saturating_sub(1);
                if top == 0 {
                    0.0
                } else {
                    level.min(top) as f64 / top as f64
                }
            })
            .collect();
        let local = evaluation.compiler.local_mem_bytes.unwrap_or(0);
        f.push((1.0 + local as f64).log2());
        if self.registers {
            f.push(f64::from(evaluation.compiler.registers.unwrap_or(0)));
        }
        f
    }
}

impl<C: BehaviorClassifier> BehaviorClassifier for WithFacts<C> {
    type Error = C::Error;

    fn space(&self) -> &DescriptorSpace {
        self.inner.space()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn classify(&self, c: &Candidate, e: &Evaluation) -> Result<Descriptor, C::Error> {
        let mut d = self.inner.classify(c, e)?;
        if self.enabled && d.features.is_empty() {
            d.features = self.features(&d, e);
        }
        Ok(d)
    }
}

/// The archive of a search: what `--archive` and `--islands` chose. Serialised as the archive
/// it holds (a grid search's snapshot is the grid's, as before).
///
/// # Example
///
/// A tiny softmax search over two islands of CVT archives, its centroids kept in the run
/// directory; run again, it replays every step to the same archive, and the run directory
/// refuses to continue as a grid search:
///
/// ```
/// use kf_core::Archive;
/// use kf_search::{Search, SearchArchive, SearchError};
///
/// kf_search::init(); // evaluation workers re-execute this program: first call
/// # if !kf_search::doctest_backend_available() { return Ok(()); }
/// let out = tempfile::tempdir()?;
/// let search = || {
///     Search::builder()
///         .task("softmax")
///         .size("ROWS=64,COLS=256")
///         .map(|b| b.evaluations(8).tune_budget(1).reference(false).out(out.path()).progress(false))
/// };
/// let first = search()?.cvt(kf_search::defaults::cvt()).islands(2).build()?.run()?;
/// let SearchArchive::CvtIslands(islands) = &first.archive else { panic!("{:?}", first.archive) };
/// assert_eq!(islands.islands().len(), 2);
/// assert_eq!(first.archive.metrics().cells, 64);
/// assert!(out.path().join("run").join(kf_archive::CENTROIDS_FILE).exists());
/// // The static labels, then local memory (OpenCL reports no registers).
/// assert!(first.archive.elites().iter().all(|e| e.descriptor.features.len() == 4));
///
/// let again = search()?.cvt(kf_search::defaults::cvt()).islands(2).build()?.run()?;
/// assert_eq!(again.summary.replayed_steps, again.summary.steps);
/// assert_eq!(again.archive, first.archive);
///
/// let grid = search()?.build()?.run();
/// assert!(matches!(grid, Err(SearchError::Archive(kf_archive::ArchiveError::MetaMismatch { .. }))), "{grid:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum SearchArchive {
    /// One grid.
    Grid(EliteArchive),
    /// One CVT archive.
    Cvt(CvtArchive),
    /// Islands of grids.
    GridIslands(IslandArchive<EliteArchive>),
    /// Islands of CVT archives.
    CvtIslands(IslandArchive<CvtArchive>),
}

impl SearchArchive {
    /// A fresh archive as `spec` says, over the classifier's `space`; a CVT archive over
    /// `features`, its centroids kept in `run_dir` (so that a resumed run uses the same ones).
    pub fn build(
        spec: &ShippedArchive,
        space: DescriptorSpace,
        features: FeatureSpace,
        run_dir: &Path,
    ) -> Result<Self, ArchiveError> {
        spec.check()?;
        let island = IslandConfig {
            islands: spec.islands,
            ..spec.island
        };
        let cvt = || {
            CvtArchive::in_run_dir(
                run_dir,
                features.clone(),
                CvtConfig {
                    grid: spec.grid,
                    ..spec.cvt
                },
            )
        };
        Ok(match (spec.layout, spec.islands) {
            (Layout::Grid, 1) => SearchArchive::Grid(EliteArchive::with_config(space, spec.grid)?),
            (Layout::Cvt, 1) => SearchArchive::Cvt(cvt()?),
            (Layout::Grid, _) => SearchArchive::GridIslands(IslandArchive::new(
                EliteArchive::with_config(space, spec.grid)?,
                island,
            )?),
            (Layout::Cvt, _) => SearchArchive::CvtIslands(IslandArchive::new(cvt()?, island)?),
        })
    }

    /// The grid, when the search kept one grid.
    pub fn as_grid(&self) -> Option<&EliteArchive> {
        match self {
            SearchArchive::Grid(g) => Some(g),
            _ => None,
        }
    }

    /// The fittest elite (the first to reach the best fitness).
    pub fn best(&self) -> Option<&Elite> {
        match self {
            SearchArchive::Grid(g) => g.best().map(|o| o.payload),
            SearchArchive::Cvt(c) => c.best(),
            SearchArchive::GridIslands(i) => i.union().best().map(|o| o.payload),
            SearchArchive::CvtIslands(i) => i.union().best(),
        }
    }
}

/// What the search tells an [`ArchiveFactory`] when it makes a run's archive.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ArchiveInput<'a> {
    /// The classifier's descriptor space.
    pub space: &'a DescriptorSpace,
    /// The run directory (an archive may keep files there that a resumed run must find again,
    /// as the CVT archive keeps its centroids).
    pub run_dir: &'a Path,
    /// Whether the backend reports registers per thread.
    pub registers: bool,
}

/// Makes the archive a search keeps its elites in: grid, CVT and islands are the shipped
/// factory's ([`ShippedArchive`]); any [`Archive`] that serialises (the run directory keeps
/// snapshots of it) can be made by one's own.
///
/// Its [`name`](Self::name) and [`record`](Self::record) go into the run directory: a resumed
/// or extended run refuses another archive.
///
/// # Example
///
/// The shipped grid under a name of one's own:
///
/// ```
/// use kf_archive::{ArchiveError, EliteArchive};
/// use kf_search::{ArchiveFactory, ArchiveInput};
///
/// struct MyGrid;
///
/// impl ArchiveFactory for MyGrid {
///     type Archive = EliteArchive;
///     fn name(&self) -> String {
///         "my-grid".into()
///     }
///     fn build(self, input: &ArchiveInput<'_>) -> Result<EliteArchive, ArchiveError> {
///         EliteArchive::with_config(input.space.clone(), kf_search::defaults::grid())
///     }
/// }
/// assert_eq!(MyGrid.record()["name"], "my-grid");
/// ```
pub trait ArchiveFactory {
    /// The archive it makes.
    type Archive: Archive + serde::Serialize + Send + 'static;

    /// The stable name, recorded in the run directory and the report.
    fn name(&self) -> String;

    /// What the run directory records of the archive, which a resumed run may not change
    /// (default: the name). `null`: nothing (the shipped single grid, so run directories from
    /// before other archives resume).
    fn record(&self) -> serde_json::Value {
        serde_json::json!({ "name": self.name() })
    }

    /// Checks the settings when the search is built, before anything runs (default: nothing
    /// to check).
    fn check(&self) -> Result<(), ArchiveError> {
        Ok(())
    }

    /// Whether the search adds the shipped continuous descriptors ([`cvt_features`]) to every
    /// descriptor (default: no).
    fn continuous_descriptors(&self) -> bool {
        false
    }

    /// A fresh archive.
    fn build(self, input: &ArchiveInput<'_>) -> Result<Self::Archive, ArchiveError>;
}

/// The shipped archive: one grid (the default), a CVT archive
/// ([`with_cvt`](Self::with_cvt)), or islands of either ([`with_islands`](Self::with_islands));
/// [`named`](Self::named) reads `--archive`. The builder's
/// [`archive`](crate::SearchBuilder::archive), [`cvt`](crate::SearchBuilder::cvt),
/// [`islands`](crate::SearchBuilder::islands),
/// [`island_config`](crate::SearchBuilder::island_config) and
/// [`cvt_features`](crate::SearchBuilder::cvt_features) change the builder's own.
///
/// ```
/// use kf_archive::ArchiveError;
/// use kf_search::{defaults, ArchiveFactory, ShippedArchive};
///
/// let cvt = ShippedArchive::named("cvt").unwrap().with_islands(4);
/// assert_eq!(cvt.name(), "cvt-islands");
/// assert_eq!(ShippedArchive::default().name(), "grid");
/// assert_eq!(ShippedArchive::default().with_cvt(defaults::cvt()).name(), "cvt");
/// assert!(ShippedArchive::named("hex").unwrap_err().to_string().contains("grid, cvt"));
/// assert!(matches!(ShippedArchive::default().with_islands(0).check(), Err(ArchiveError::InvalidConfig(_))));
/// ```
#[derive(Debug, Clone)]
pub struct ShippedArchive {
    /// Grid or CVT.
    pub(crate) layout: Layout,
    /// Islands (1: a single archive).
    pub islands: usize,
    /// The grid's settings (also the CVT's selection, QD offset and hints).
    pub grid: GridConfig,
    /// The CVT's centroids and their seed.
    pub cvt: CvtConfig,
    /// Migration and reseeding, when there are several islands.
    pub island: IslandConfig,
    /// The continuous descriptors of a CVT search when the classifier gives its own; `None`:
    /// the shipped [`cvt_features`], which the search adds to every descriptor.
    pub features: Option<FeatureSpace>,
}

impl ShippedArchive {
    /// The archive a command line names: `grid` (the default) or `cvt` (with
    /// [`defaults::cvt`](crate::defaults::cvt)'s centroids).
    pub fn named(name: &str) -> Result<Self, UnknownArchive> {
        match name {
            "grid" => Ok(Self::default()),
            "cvt" => {
                // The default archive holds the shipped CVT settings, unused by its grid.
                let shipped = Self::default();
                let cvt = shipped.cvt;
                Ok(shipped.with_cvt(cvt))
            }
            other => Err(UnknownArchive(other.to_owned())),
        }
    }

    /// A CVT archive with these centroids (its `grid` field is replaced by the grid settings'
    /// selection, QD offset and hints).
    pub fn with_cvt(mut self, cvt: CvtConfig) -> Self {
        self.layout = Layout::Cvt;
        self.cvt = cvt;
        self
    }

    /// `n` archives evolving as islands, with migration (1: one archive; at most
    /// [`kf_archive::MAX_ISLANDS`], checked when the search is built).
    pub fn with_islands(mut self, n: usize) -> Self {
        self.islands = n;
        self
    }

    /// Whether it is a CVT archive.
    pub fn is_cvt(&self) -> bool {
        self.layout == Layout::Cvt
    }
}

impl ArchiveFactory for ShippedArchive {
    type Archive = SearchArchive;

    /// `grid`, `cvt`, `grid-islands` or `cvt-islands`.
    fn name(&self) -> String {
        if self.islands > 1 {
            format!("{}-islands", self.layout.name())
        } else {
            self.layout.name().to_owned()
        }
    }

    /// Nothing for the single grid (so run directories from before CVT and islands resume
    /// unchanged), else the kind, the islands and their settings.
    fn record(&self) -> serde_json::Value {
        if self.layout == Layout::Grid && self.islands == 1 {
            return serde_json::Value::Null;
        }
        let mut meta = serde_json::json!({ "kind": self.layout.name(), "islands": self.islands });
        if let Some(map) = meta.as_object_mut() {
            if self.is_cvt() {
                map.insert("centroids".into(), self.cvt.centroids.into());
                map.insert("cvt_seed".into(), self.cvt.seed.into());
            }
            if self.islands > 1 {
                let i = self.island;
                map.insert(
                    "migration".into(),
                    serde_json::json!([
                        i.migration_interval,
                        i.migrants,
                        i.stagnation,
                        i.reseed_elites
                    ]),
                );
            }
        }
        meta
    }

    fn check(&self) -> Result<(), ArchiveError> {
        if self.islands == 0 || self.islands > kf_archive::MAX_ISLANDS {
            return Err(ArchiveError::InvalidConfig(format!(
                "islands (--islands) must be 1 to {}, got {}",
                kf_archive::MAX_ISLANDS,
                self.islands
            )));
        }
        Ok(())
    }

    fn continuous_descriptors(&self) -> bool {
        self.is_cvt() && self.features.is_none()
    }

    fn build(self, input: &ArchiveInput<'_>) -> Result<SearchArchive, ArchiveError> {
        let features = match &self.features {
            Some(f) => f.clone(),
            None => cvt_features(input.space, input.registers)?,
        };
        SearchArchive::build(&self, input.space.clone(), features, input.run_dir)
    }
}

macro_rules! each {
    ($self:expr, $a:ident => $body:expr) => {
        match $self {
            SearchArchive::Grid($a) => $body,
            SearchArchive::Cvt($a) => $body,
            SearchArchive::GridIslands($a) => $body,
            SearchArchive::CvtIslands($a) => $body,
        }
    };
}

impl Archive for SearchArchive {
    type Error = ArchiveError;

    fn space(&self) -> &DescriptorSpace {
        each!(self, a => Archive::space(a))
    }

    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, ArchiveError> {
        each!(self, a => Archive::insert(a, elite))
    }

    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        each!(self, a => a.select_parent(rng))
    }

    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        each!(self, a => a.inspirations(rng, cell, n))
    }

    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        each!(self, a => Archive::hints(a, near))
    }

    fn metrics(&self) -> ArchiveMetrics {
        each!(self, a => Archive::metrics(a))
    }

    fn elites(&self) -> Vec<&Elite> {
        each!(self, a => Archive::elites(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::testing::{synthetic_seed, SyntheticClassifier};
    use kf_core::Status;

    #[test]
    fn facts_become_features_only_for_a_cvt_search() {
        let mut e = Evaluation::failed(Status::Correct, "");
        e.compiler.local_mem_bytes = Some(4096);
        e.compiler.registers = Some(51);
        let c = synthetic_seed(5);
        let plain = WithFacts::new(SyntheticClassifier::new(4), false, true);
        assert!(plain.classify(&c, &e).unwrap().features.is_empty());
        let cvt = WithFacts::new(SyntheticClassifier::new(4), true, true);
        let d = cvt.classify(&c, &e).unwrap();
        // (0.5, 0.5, 0.5) is level 2 of 4 on each dimension.
        let f = d.features;
        assert_eq!(f.len(), 5);
        assert!(
            f[..3].iter().all(|&x| (x - 2.0 / 3.0).abs() < 1e-12),
            "{f:?}"
        );
        assert!((f[3] - 4097f64.log2()).abs() < 1e-12);
        assert_eq!(f[4], 51.0);
        let space = cvt_features(SyntheticClassifier::new(4).space(), true).unwrap();
        assert_eq!(space.len(), 5);
        for (x, feature) in f.iter().zip(&space.features) {
            assert!((feature.low..=feature.high).contains(x), "{x} {feature:?}");
        }
        // A classifier's own features are kept.
        let own = WithFacts::new(SyntheticClassifier::new(4).with_features(), true, false);
        assert_eq!(own.classify(&c, &e).unwrap().features, vec![0.5; 3]);
    }

    #[test]
    fn the_spec_picks_the_archive() {
        let dir = tempfile::tempdir().unwrap();
        let space = SyntheticClassifier::new(4).space().clone();
        let features = cvt_features(&space, false).unwrap();
        let mut spec = ShippedArchive::default();
        let build = |spec: &ShippedArchive| {
            SearchArchive::build(spec, space.clone(), features.clone(), dir.path()).unwrap()
        };
        assert!(matches!(build(&spec), SearchArchive::Grid(_)));
        spec.islands = 3;
        let SearchArchive::GridIslands(i) = build(&spec) else {
            panic!("islands of grids")
        };
        assert_eq!(i.islands().len(), 3);
        let cvt = spec.cvt;
        spec = spec.with_cvt(cvt);
        assert!(matches!(build(&spec), SearchArchive::CvtIslands(_)));
        spec.islands = 1;
        let a = build(&spec);
        assert!(matches!(a, SearchArchive::Cvt(_)));
        assert_eq!(a.metrics().cells, spec.cvt.centroids);
        assert!(dir.path().join(kf_archive::CENTROIDS_FILE).exists());
        spec.islands = 0;
        assert!(SearchArchive::build(&spec, space.clone(), features.clone(), dir.path()).is_err());
    }
}

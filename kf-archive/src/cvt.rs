//! The CVT archive: MAP-Elites over a continuous descriptor space, its cells the Voronoi
//! regions of centroids placed by k-means on a seeded sample of the space (Vassiliades et al.,
//! "Using Centroidal Voronoi Tessellations to Scale Up the MAP-Elites Algorithm", 2018).

use std::path::Path;

use kf_core::{
    Archive, ArchiveHints, ArchiveMetrics, DescriptorSpace, Dimension, Elite, InsertOutcome,
};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::ArchiveError;
use crate::grid::{GridArchive, GridConfig};

/// The most centroids a CVT archive has.
pub const MAX_CENTROIDS: usize = 1 << 16;

/// The most sample coordinates k-means works on (samples × features).
const MAX_SAMPLE_VALUES: usize = 1 << 24;

/// The file a run directory keeps its centroids in ([`CvtArchive::in_run_dir`]).
pub const CENTROIDS_FILE: &str = "centroids.json";

const FORMAT: u32 = 1;

/// One continuous behaviour coordinate: a name and the range the centroids cover. Values
/// outside the range are placed as if at its nearest end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feature {
    /// Name, such as `registers`.
    pub name: String,
    /// Lower end of the range.
    pub low: f64,
    /// Upper end of the range (above `low`).
    pub high: f64,
}

impl Feature {
    /// A feature over `[low, high]`.
    pub fn new(name: impl Into<String>, low: f64, high: f64) -> Self {
        Feature {
            name: name.into(),
            low,
            high,
        }
    }

    fn unit(&self, v: f64) -> f64 {
        ((v - self.low) / (self.high - self.low)).clamp(0.0, 1.0)
    }
}

/// The continuous descriptor space of a CVT archive: the features, in the order of
/// [`kf_core::Descriptor::features`]. Distances are measured after scaling each feature's
/// range to `[0, 1]`, so features in different units weigh the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureSpace {
    /// The features.
    pub features: Vec<Feature>,
}

impl FeatureSpace {
    /// A space from its features; an error if there are none or a range is empty or not finite.
    pub fn new(features: Vec<Feature>) -> Result<Self, ArchiveError> {
        if features.is_empty() {
            return Err(ArchiveError::InvalidConfig(
                "a feature space needs at least one feature".into(),
            ));
        }
        if let Some(f) = features
            .iter()
            .find(|f| !(f.low.is_finite() && f.high.is_finite() && f.low < f.high))
        {
            return Err(ArchiveError::InvalidConfig(format!(
                "feature `{}` needs a finite range with low < high, got [{}, {}]",
                f.name, f.low, f.high
            )));
        }
        Ok(FeatureSpace { features })
    }

    /// The unit cube `[0, 1]^n` with features named `f0`, `f1`, ….
    pub fn unit(n: usize) -> Result<Self, ArchiveError> {
        Self::new(
            (0..n)
                .map(|i| Feature::new(format!("f{i}"), 0.0, 1.0))
                .collect(),
        )
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// True when there are no features (never, for a validated space).
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }

    /// Scales a point to the unit cube, or says why it does not fit.
    fn to_unit(&self, x: &[f64]) -> Result<Vec<f64>, ArchiveError> {
        if x.len() != self.len() {
            return Err(ArchiveError::BadFeatures {
                features: x.to_vec(),
                reason: format!("expected {} features", self.len()),
            });
        }
        if x.iter().any(|v| v.is_nan()) {
            return Err(ArchiveError::BadFeatures {
                features: x.to_vec(),
                reason: "a feature is NaN".into(),
            });
        }
        Ok(self
            .features
            .iter()
            .zip(x)
            .map(|(f, &v)| f.unit(v))
            .collect())
    }
}

/// How a [`CvtArchive`] places its centroids and runs its grid of centroids.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CvtConfig {
    /// Number of centroids (cells).
    pub centroids: usize,
    /// Points sampled per centroid for k-means.
    pub samples_per_centroid: usize,
    /// Lloyd iterations of k-means (it stops earlier when no point changes cluster).
    pub iterations: usize,
    /// Seed of the sampling and of k-means' starting centroids.
    pub seed: u64,
    /// Selection, QD offset and hints of the archive, as for a grid (the cells are the
    /// centroids, numbered along a nearest-neighbour chain so that neighbouring numbers are
    /// neighbouring regions).
    pub grid: GridConfig,
}

impl Default for CvtConfig {
    fn default() -> Self {
        CvtConfig {
            centroids: 64,
            samples_per_centroid: 50,
            iterations: 50,
            seed: 0,
            grid: GridConfig::default(),
        }
    }
}

impl CvtConfig {
    /// Sets the number of centroids.
    pub fn with_centroids(mut self, n: usize) -> Self {
        self.centroids = n;
        self
    }

    /// Sets the seed of the centroids.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the grid settings (selection, QD offset, hints).
    pub fn with_grid(mut self, grid: GridConfig) -> Self {
        self.grid = grid;
        self
    }

    fn validate(&self, dims: usize) -> Result<usize, ArchiveError> {
        if self.centroids == 0 || self.centroids > MAX_CENTROIDS {
            return Err(ArchiveError::InvalidConfig(format!(
                "a CVT archive needs 1 to {MAX_CENTROIDS} centroids, got {}",
                self.centroids
            )));
        }
        let samples = self
            .centroids
            .saturating_mul(self.samples_per_centroid.max(1));
        if samples.saturating_mul(dims) > MAX_SAMPLE_VALUES {
            return Err(ArchiveError::InvalidConfig(format!(
                "{samples} samples of {dims} features exceed k-means' limit of {MAX_SAMPLE_VALUES} values"
            )));
        }
        Ok(samples)
    }
}

/// A MAP-Elites archive over a continuous [`FeatureSpace`]: one elite per centroid, an elite
/// placed at the centroid nearest its descriptor's [`features`](kf_core::Descriptor::features).
///
/// The centroids come from k-means over points sampled uniformly with the configured seed, so
/// the same features and configuration give the same centroids; [`CvtArchive::in_run_dir`]
/// also stores them with the run, so a resumed run keeps its centroids even if this code's
/// k-means changes. Storage, selection (exploit / explore / random) and QD metrics are those
/// of a [`GridArchive`] over one dimension, `centroid`, with one level per centroid: the
/// [`space`](Archive::space) the archive reports.
///
/// # Example
///
/// A custom continuous descriptor (the first two coordinates of the synthetic problem's
/// points) driving the engine through the public traits:
///
/// ```
/// use kf_archive::{CvtArchive, CvtConfig, Feature, FeatureSpace};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticEvaluator, SyntheticMutator};
///
/// /// Places a point by its coordinates `X0` and `X1`, as continuous features.
/// struct FirstTwo(DescriptorSpace);
///
/// impl BehaviorClassifier for FirstTwo {
///     type Error = std::convert::Infallible;
///     fn space(&self) -> &DescriptorSpace {
///         &self.0
///     }
///     fn classify(&self, c: &Candidate, _e: &Evaluation) -> Result<Descriptor, Self::Error> {
///         let x = |k: &str| c.params.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
///         Ok(Descriptor::new([0], "first-two").with_features([x("X0"), x("X1")]))
///     }
/// }
///
/// let features = FeatureSpace::new(vec![Feature::new("x0", 0.0, 1.0), Feature::new("x1", 0.0, 1.0)])?;
/// let archive = CvtArchive::new(features, CvtConfig::default().with_centroids(32).with_seed(7))?;
/// let classifier = FirstTwo(DescriptorSpace::new(vec![Dimension::numbered("one", 1)])?);
/// let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(4)])
///     .seed(1)
///     .budget(Budget::evaluations(300))
///     .run_blocking()?;
/// let metrics = result.archive.metrics();
/// assert_eq!(metrics.cells, 32);
/// assert!(metrics.filled > 4, "{metrics:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CvtArchive {
    features: FeatureSpace,
    config: CvtConfig,
    /// Centroids in unit-cube coordinates, `centroids × features` values row by row.
    centroids: Vec<f64>,
    grid: GridArchive<Elite>,
}

/// The one-dimension space of a CVT archive's cells.
fn centroid_space(k: usize) -> DescriptorSpace {
    DescriptorSpace {
        dimensions: vec![Dimension::numbered("centroid", k)],
    }
}

fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// The index of the row of `rows` (each `d` long) nearest `x`; the first on ties.
fn nearest_row(rows: &[f64], d: usize, x: &[f64]) -> usize {
    let mut best = (f64::INFINITY, 0);
    for (i, row) in rows.chunks_exact(d).enumerate() {
        let dist = distance2(row, x);
        if dist < best.0 {
            best = (dist, i);
        }
    }
    best.1
}

/// k-means (Lloyd) over `samples` points drawn uniformly from the unit cube with `seed`,
/// starting from the first `k` of them; centroids renumbered along a greedy nearest-neighbour
/// chain from the one nearest the origin.
fn kmeans(k: usize, d: usize, samples: usize, iterations: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let samples = samples.max(k);
    let points: Vec<f64> = (0..samples * d).map(|_| rng.random::<f64>()).collect();
    let mut centroids = points[..k * d].to_vec();
    let mut assignment = vec![usize::MAX; samples];
    for _ in 0..iterations {
        let mut changed = false;
        for (p, a) in points.chunks_exact(d).zip(assignment.iter_mut()) {
            let n = nearest_row(&centroids, d, p);
            if *a != n {
                *a = n;
                changed = true;
            }
        }
        if !changed {
            break;
        }
        let mut sums = vec![0.0; k * d];
        let mut counts = vec![0usize; k];
        for (p, &a) in points.chunks_exact(d).zip(&assignment) {
            counts[a] += 1;
            for (s, v) in sums[a * d..(a + 1) * d].iter_mut().zip(p) {
                *s += v;
            }
        }
        for (c, (sum, &n)) in centroids
            .chunks_exact_mut(d)
            .zip(sums.chunks_exact(d).zip(&counts))
        {
            // An empty cluster keeps its centroid.
            if n > 0 {
                for (x, s) in c.iter_mut().zip(sum) {
                    *x = s / n as f64;
                }
            }
        }
    }
    chain_order(&centroids, d)
}

/// Renumbers centroids along a greedy nearest-neighbour chain.
fn chain_order(centroids: &[f64], d: usize) -> Vec<f64> {
    let k = centroids.len() / d;
    let origin = vec![0.0; d];
    let mut left: Vec<usize> = (0..k).collect();
    let mut out = Vec::with_capacity(centroids.len());
    let mut at = origin;
    while !left.is_empty() {
        let (pos, _) = left
            .iter()
            .enumerate()
            .map(|(pos, &i)| (pos, distance2(&centroids[i * d..(i + 1) * d], &at)))
            .fold((0, f64::INFINITY), |best, (pos, dist)| {
                if dist < best.1 {
                    (pos, dist)
                } else {
                    best
                }
            });
        let i = left.remove(pos);
        at = centroids[i * d..(i + 1) * d].to_vec();
        out.extend_from_slice(&at);
    }
    out
}

impl CvtArchive {
    /// An empty archive over `features`, its centroids computed from `config`.
    pub fn new(features: FeatureSpace, config: CvtConfig) -> Result<Self, ArchiveError> {
        let features = FeatureSpace::new(features.features)?;
        let samples = config.validate(features.len())?;
        let centroids = kmeans(
            config.centroids,
            features.len(),
            samples,
            config.iterations,
            config.seed,
        );
        Self::from_unit_centroids(features, config, centroids)
    }

    /// An empty archive with the given centroids, in feature units (one row per centroid; as
    /// many rows as `config.centroids`).
    pub fn with_centroids(
        features: FeatureSpace,
        config: CvtConfig,
        centroids: &[Vec<f64>],
    ) -> Result<Self, ArchiveError> {
        let features = FeatureSpace::new(features.features)?;
        let mut unit = Vec::with_capacity(centroids.len() * features.len());
        for c in centroids {
            unit.extend(features.to_unit(c)?);
        }
        Self::from_unit_centroids(features, config, unit)
    }

    fn from_unit_centroids(
        features: FeatureSpace,
        config: CvtConfig,
        centroids: Vec<f64>,
    ) -> Result<Self, ArchiveError> {
        let d = features.len();
        config.validate(d)?;
        if centroids.len() != config.centroids * d {
            return Err(ArchiveError::InvalidConfig(format!(
                "{} centroid values for {} centroids of {d} features",
                centroids.len(),
                config.centroids
            )));
        }
        if centroids.iter().any(|v| !(0.0..=1.0).contains(v)) {
            return Err(ArchiveError::InvalidConfig(
                "centroids must lie within the features' ranges".into(),
            ));
        }
        let grid = GridArchive::with_config(centroid_space(config.centroids), config.grid)?;
        Ok(CvtArchive {
            features,
            config,
            centroids,
            grid,
        })
    }

    /// An empty archive whose centroids are kept in the run directory at `dir` (the file
    /// [`CENTROIDS_FILE`]): read from it when it exists (and refused, with
    /// [`ArchiveError::CentroidMismatch`], if it was made for other features or another
    /// configuration), otherwise computed and written there atomically. A resumed run thus
    /// places its kernels at the same centroids as the run it continues.
    pub fn in_run_dir(
        dir: &Path,
        features: FeatureSpace,
        config: CvtConfig,
    ) -> Result<Self, ArchiveError> {
        let path = dir.join(CENTROIDS_FILE);
        if let Some(bytes) = crate::rundir::read_optional(&path)? {
            let stored: CentroidFile =
                serde_json::from_slice(&bytes).map_err(|e| ArchiveError::json(&path, e))?;
            let mismatch = |what: &str| ArchiveError::CentroidMismatch {
                path: path.clone(),
                what: what.to_owned(),
            };
            if stored.format != FORMAT {
                return Err(mismatch("unknown format"));
            }
            if stored.features != features {
                return Err(mismatch("they were made for other features"));
            }
            let same = stored.centroids.len() == config.centroids
                && stored.samples_per_centroid == config.samples_per_centroid
                && stored.iterations == config.iterations
                && stored.seed == config.seed;
            if !same {
                return Err(mismatch(
                    "they were made with another number of centroids, sampling or seed",
                ));
            }
            let unit: Vec<f64> = stored.centroids.concat();
            return Self::from_unit_centroids(features, config, unit);
        }
        std::fs::create_dir_all(dir).map_err(|e| ArchiveError::io("creating", dir, e))?;
        let archive = Self::new(features, config)?;
        let file = CentroidFile {
            format: FORMAT,
            features: archive.features.clone(),
            samples_per_centroid: config.samples_per_centroid,
            iterations: config.iterations,
            seed: config.seed,
            centroids: archive.unit_rows(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| ArchiveError::json(&path, e))?;
        crate::rundir::write_atomic(dir, &path, &bytes)?;
        Ok(archive)
    }

    fn unit_rows(&self) -> Vec<Vec<f64>> {
        self.centroids
            .chunks_exact(self.features.len())
            .map(<[f64]>::to_vec)
            .collect()
    }

    /// The feature space.
    pub fn features(&self) -> &FeatureSpace {
        &self.features
    }

    /// The configuration.
    pub fn config(&self) -> &CvtConfig {
        &self.config
    }

    /// Number of centroids.
    pub fn num_centroids(&self) -> usize {
        self.config.centroids
    }

    /// Centroid `i` in feature units (`None` beyond the centroids).
    pub fn centroid(&self, i: usize) -> Option<Vec<f64>> {
        let d = self.features.len();
        let row = self.centroids.get(i * d..(i + 1) * d)?;
        Some(
            self.features
                .features
                .iter()
                .zip(row)
                .map(|(f, u)| f.low + u * (f.high - f.low))
                .collect(),
        )
    }

    /// The centroid nearest `features` (clamped to their ranges), or why they do not fit.
    pub fn nearest(&self, features: &[f64]) -> Result<usize, ArchiveError> {
        let x = self.features.to_unit(features)?;
        Ok(nearest_row(&self.centroids, self.features.len(), &x))
    }

    /// The storage: a grid with one cell per centroid.
    pub fn grid(&self) -> &GridArchive<Elite> {
        &self.grid
    }

    /// The elite at centroid `i`, if any.
    pub fn get(&self, i: usize) -> Option<&Elite> {
        self.grid.get_index(i).map(|o| o.payload)
    }

    /// The fittest elite.
    pub fn best(&self) -> Option<&Elite> {
        self.grid.best().map(|o| o.payload)
    }
}

impl Archive for CvtArchive {
    type Error = ArchiveError;

    fn space(&self) -> &DescriptorSpace {
        self.grid.space()
    }

    /// Places the elite at the centroid nearest its features, where it fills an empty cell or
    /// replaces a worse elite (by the same rule as the grid archive's).
    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, ArchiveError> {
        let index = self.nearest(&elite.descriptor.features)?;
        crate::elite::insert_elite_at(&mut self.grid, index, elite)
    }

    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        self.grid.select(rng).map(|s| s.occupant.payload)
    }

    /// Up to `n` elites other than those whose descriptor's `coords` are `cell` (the engine
    /// passes the parent's).
    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        let mut out: Vec<&Elite> = self
            .grid
            .inspiration_indices(rng, None, n.saturating_add(1))
            .into_iter()
            .filter_map(|i| self.get(i))
            .filter(|e| e.descriptor.coords != cell)
            .collect();
        out.truncate(n);
        out
    }

    /// The grid's hints over the centroids: empty centroids next (in the chain's numbering) to
    /// filled ones, recently improved centroids. `near` counts only as a centroid number.
    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        self.grid.hints(near)
    }

    fn metrics(&self) -> ArchiveMetrics {
        self.grid.metrics()
    }

    fn elites(&self) -> Vec<&Elite> {
        self.grid.iter().map(|o| o.payload).collect()
    }
}

/// What [`CvtArchive::in_run_dir`] keeps in the run directory.
#[derive(Serialize, Deserialize)]
struct CentroidFile {
    format: u32,
    features: FeatureSpace,
    samples_per_centroid: usize,
    iterations: usize,
    seed: u64,
    /// Unit-cube coordinates, one row per centroid.
    centroids: Vec<Vec<f64>>,
}

#[derive(Serialize)]
struct ReprOut<'a> {
    format: u32,
    /// The cells' space, which a run directory checks before it reads the rest.
    space: &'a DescriptorSpace,
    features: &'a FeatureSpace,
    config: &'a CvtConfig,
    centroids: Vec<Vec<f64>>,
    grid: &'a GridArchive<Elite>,
}

#[derive(Deserialize)]
struct ReprIn {
    format: u32,
    space: DescriptorSpace,
    features: FeatureSpace,
    config: CvtConfig,
    centroids: Vec<Vec<f64>>,
    grid: GridArchive<Elite>,
}

impl Serialize for CvtArchive {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ReprOut {
            format: FORMAT,
            space: self.grid.space(),
            features: &self.features,
            config: &self.config,
            centroids: self.unit_rows(),
            grid: &self.grid,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CvtArchive {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let repr = ReprIn::deserialize(d)?;
        CvtArchive::from_repr(repr).map_err(serde::de::Error::custom)
    }
}

impl CvtArchive {
    fn from_repr(repr: ReprIn) -> Result<Self, ArchiveError> {
        let bad = |m: &str| ArchiveError::InvalidSnapshot(m.to_owned());
        if repr.format != FORMAT {
            return Err(bad("unknown CVT archive format"));
        }
        let d = repr.features.len();
        if repr.centroids.iter().any(|c| c.len() != d) {
            return Err(bad("a centroid has the wrong number of features"));
        }
        let mut archive = Self::from_unit_centroids(
            FeatureSpace::new(repr.features.features)?,
            repr.config,
            repr.centroids.concat(),
        )?;
        if &repr.space != archive.grid.space() || repr.grid.space() != archive.grid.space() {
            return Err(bad("the cells do not match the centroids"));
        }
        if repr.grid.config() != &repr.config.grid {
            return Err(bad("the grid's configuration is not the archive's"));
        }
        for o in repr.grid.iter() {
            if archive.nearest(&o.payload.descriptor.features)? != o.index {
                return Err(bad("an elite is not at the centroid nearest its features"));
            }
        }
        archive.grid = repr.grid;
        Ok(archive)
    }
}

//! The grid archive: one elite per cell of a [`DescriptorSpace`], with O(1) insertion,
//! incrementally maintained QD metrics and mixed exploit / explore / random parent selection.

use kf_core::{ArchiveHints, ArchiveMetrics, DescriptorSpace, Fitness, InsertOutcome};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::ArchiveError;

/// The most cells a grid archive stores (a guard against absurd spaces and hostile snapshots).
pub const MAX_CELLS: usize = 1 << 26;

/// The largest `recent_capacity` a configuration may ask for.
pub const MAX_RECENT: usize = 4096;

/// Attempts of the rejection samplers before they fall back to an exact scan.
const REJECTION_TRIES: usize = 32;

/// Weight floor of fitness-proportional selection, so that elites at or below the QD offset
/// stay selectable.
const WEIGHT_FLOOR: f64 = 1e-9;

/// Probability that an explore draw takes a recently improved cell (when there is one) rather
/// than a cell with a sparse neighbourhood.
const EXPLORE_RECENT: f64 = 0.5;

/// How parent selection mixes its three modes. The ratios need not sum to one; they are
/// normalised. The default is 70 % exploit, 20 % explore, 10 % random, as in KernelFoundry and
/// OpenEvolve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelectionRatios {
    /// Weight of fitness-proportional selection among the elites.
    pub exploit: f64,
    /// Weight of exploration: recently improved cells, or cells with empty neighbours.
    pub explore: f64,
    /// Weight of uniform selection among the filled cells.
    pub random: f64,
}

impl Default for SelectionRatios {
    fn default() -> Self {
        SelectionRatios {
            exploit: 0.7,
            explore: 0.2,
            random: 0.1,
        }
    }
}

impl SelectionRatios {
    /// Ratios from three weights (normalised when the archive is built).
    pub fn new(exploit: f64, explore: f64, random: f64) -> Self {
        SelectionRatios {
            exploit,
            explore,
            random,
        }
    }

    /// The cumulative thresholds of exploit and exploit + explore, or why the ratios are
    /// unusable.
    fn thresholds(&self) -> Result<[f64; 2], ArchiveError> {
        let all = [self.exploit, self.explore, self.random];
        if all.iter().any(|r| !r.is_finite() || *r < 0.0) {
            return Err(ArchiveError::InvalidConfig(format!(
                "selection ratios must be finite and non-negative, got {self:?}"
            )));
        }
        let sum: f64 = all.iter().sum();
        if sum <= 0.0 || !sum.is_finite() {
            return Err(ArchiveError::InvalidConfig(
                "at least one selection ratio must be positive".into(),
            ));
        }
        Ok([self.exploit / sum, (self.exploit + self.explore) / sum])
    }
}

/// Configuration of a [`GridArchive`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridConfig {
    /// How parent selection mixes exploit, explore and random draws.
    pub selection: SelectionRatios,
    /// The QD-score sums `max(0, fitness - qd_offset)` over the elites. The default 0 counts
    /// every elite; `Fitness::CORRECT_BASE` (5) counts only the speed of correct kernels.
    /// Exploitation weighs elites by the same quantity.
    pub qd_offset: f64,
    /// How many recent improvements the archive remembers (for exploration and hints).
    pub recent_capacity: usize,
    /// At most this many cells in each list of [`ArchiveHints`].
    pub hint_cap: usize,
}

impl Default for GridConfig {
    fn default() -> Self {
        GridConfig {
            selection: SelectionRatios::default(),
            qd_offset: 0.0,
            recent_capacity: 16,
            hint_cap: 8,
        }
    }
}

impl GridConfig {
    /// Sets the selection ratios.
    pub fn with_selection(mut self, selection: SelectionRatios) -> Self {
        self.selection = selection;
        self
    }

    /// Sets the QD offset.
    pub fn with_qd_offset(mut self, offset: f64) -> Self {
        self.qd_offset = offset;
        self
    }

    /// Sets how many recent improvements are remembered.
    pub fn with_recent_capacity(mut self, n: usize) -> Self {
        self.recent_capacity = n;
        self
    }

    /// Sets the length cap of the hint lists.
    pub fn with_hint_cap(mut self, n: usize) -> Self {
        self.hint_cap = n;
        self
    }

    fn validate(&self) -> Result<[f64; 2], ArchiveError> {
        if !self.qd_offset.is_finite() {
            return Err(ArchiveError::InvalidConfig(format!(
                "the QD offset must be finite, got {}",
                self.qd_offset
            )));
        }
        if self.recent_capacity > MAX_RECENT {
            return Err(ArchiveError::InvalidConfig(format!(
                "recent_capacity {} exceeds {MAX_RECENT}",
                self.recent_capacity
            )));
        }
        self.selection.thresholds()
    }
}

/// Which mode of parent selection produced a [`Selected`] cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectionMode {
    /// Fitness-proportional among the elites.
    Exploit,
    /// A recently improved cell, or one with empty neighbours.
    Explore,
    /// Uniform among the filled cells.
    Random,
}

/// A filled cell: its flat index, its elite's fitness and payload.
#[derive(Debug, PartialEq)]
pub struct Occupant<'a, T> {
    /// Flat (row-major) cell index.
    pub index: usize,
    /// Fitness of the elite.
    pub fitness: Fitness,
    /// The stored payload.
    pub payload: &'a T,
}

/// A parent picked by [`GridArchive::select`].
#[derive(Debug, PartialEq)]
pub struct Selected<'a, T> {
    /// The chosen cell.
    pub occupant: Occupant<'a, T>,
    /// Which selection mode chose it.
    pub mode: SelectionMode,
}

// Copyable whatever `T` is: they only borrow the payload.
impl<T> Clone for Occupant<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Occupant<'_, T> {}
impl<T> Clone for Selected<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Selected<'_, T> {}

/// A MAP-Elites grid over a [`DescriptorSpace`]: one payload per cell with its [`Fitness`].
///
/// Cells are addressed by coordinates (one level per dimension) or by their flat row-major
/// index. Insertion is O(1) and allocation-free (beyond dropping a replaced payload):
/// coordinates are folded with precomputed strides into a flat index of parallel arrays, and
/// coverage, QD-score, best and mean fitness are updated incrementally. A candidate replaces an
/// elite only when it is strictly fitter, so an elite is never replaced by a worse one and the
/// QD-score never decreases.
///
/// With `T = Elite` this is the archive the engine drives ([`crate::EliteArchive`]).
///
/// # Example
///
/// ```
/// use kf_archive::{GridArchive, SelectionMode};
/// use kf_core::{DescriptorSpace, Fitness, InsertOutcome};
/// use rand::SeedableRng;
///
/// let mut archive: GridArchive<&str> = GridArchive::new(DescriptorSpace::kernel_default())?;
/// let f = |v| Fitness::new(v).unwrap();
/// assert_eq!(archive.insert_at(&[0, 1, 2], f(6.0), "tiled")?, InsertOutcome::NewCell);
/// assert!(matches!(archive.insert_at(&[0, 1, 2], f(7.5), "tiled+unrolled")?, InsertOutcome::Improved { .. }));
/// assert!(!archive.insert_at(&[0, 1, 2], f(7.0), "worse")?.is_added());
/// // Bad coordinates are an error, never a panic.
/// assert!(archive.insert_at(&[0, 9, 2], f(1.0), "nowhere").is_err());
///
/// let metrics = archive.metrics();
/// assert_eq!((metrics.filled, metrics.cells), (1, 64));
/// assert_eq!(metrics.qd_score, 7.5);
///
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// let parent = archive.select(&mut rng).unwrap();
/// assert_eq!(*parent.occupant.payload, "tiled+unrolled");
/// # Ok::<(), kf_archive::ArchiveError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GridArchive<T> {
    space: DescriptorSpace,
    config: GridConfig,
    /// Cumulative selection thresholds derived from `config.selection`.
    thresholds: [f64; 2],
    shape: Vec<usize>,
    strides: Vec<usize>,
    /// Fitness per cell (meaningless where `payload` is `None`).
    fitness: Vec<Fitness>,
    payload: Vec<Option<T>>,
    /// Filled cells in the order they were first filled.
    filled: Vec<usize>,
    /// Ring of recently added-or-improved cells; `recent_head` is the next slot to write.
    recent: Vec<usize>,
    recent_head: usize,
    qd_score: f64,
    fitness_sum: f64,
    best: Option<usize>,
    additions: u64,
}

impl<T> GridArchive<T> {
    /// An empty archive over `space` with the default configuration.
    pub fn new(space: DescriptorSpace) -> Result<Self, ArchiveError> {
        Self::with_config(space, GridConfig::default())
    }

    /// An empty archive over `space` with `config`.
    pub fn with_config(space: DescriptorSpace, config: GridConfig) -> Result<Self, ArchiveError> {
        let thresholds = config.validate()?;
        let space = DescriptorSpace::new(space.dimensions).map_err(ArchiveError::InvalidSpace)?;
        let cells = space.cells();
        if cells > MAX_CELLS {
            return Err(ArchiveError::TooManyCells {
                cells,
                max: MAX_CELLS,
            });
        }
        let shape = space.shape();
        let mut strides = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        Ok(GridArchive {
            space,
            config,
            thresholds,
            shape,
            strides,
            fitness: vec![Fitness::MIN; cells],
            payload: std::iter::repeat_with(|| None).take(cells).collect(),
            filled: Vec::with_capacity(cells),
            recent: Vec::with_capacity(config.recent_capacity),
            recent_head: 0,
            qd_score: 0.0,
            fitness_sum: 0.0,
            best: None,
            additions: 0,
        })
    }

    /// The descriptor space.
    pub fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    /// The configuration.
    pub fn config(&self) -> &GridConfig {
        &self.config
    }

    /// Number of cells in the space.
    pub fn num_cells(&self) -> usize {
        self.payload.len()
    }

    /// Number of filled cells.
    pub fn len(&self) -> usize {
        self.filled.len()
    }

    /// True when no cell is filled.
    pub fn is_empty(&self) -> bool {
        self.filled.is_empty()
    }

    /// The flat (row-major) index of a cell, or why the coordinates name none.
    #[inline]
    pub fn index_of(&self, coords: &[usize]) -> Result<usize, ArchiveError> {
        if coords.len() != self.shape.len() {
            return Err(ArchiveError::DimensionMismatch {
                coords: coords.to_vec(),
                expected: self.shape.len(),
            });
        }
        let mut index = 0;
        for (dimension, ((&level, &levels), &stride)) in coords
            .iter()
            .zip(&self.shape)
            .zip(&self.strides)
            .enumerate()
        {
            if level >= levels {
                return Err(ArchiveError::OutOfRange {
                    coords: coords.to_vec(),
                    dimension,
                    level,
                    levels,
                });
            }
            index += level * stride;
        }
        Ok(index)
    }

    /// The coordinates of a flat index, or an error if it is beyond the cells.
    pub fn coords_of(&self, index: usize) -> Result<Vec<usize>, ArchiveError> {
        self.check_index(index)?;
        Ok(self.coords_unchecked(index))
    }

    fn coords_unchecked(&self, index: usize) -> Vec<usize> {
        self.shape
            .iter()
            .zip(&self.strides)
            .map(|(&levels, &stride)| (index / stride) % levels)
            .collect()
    }

    fn check_index(&self, index: usize) -> Result<(), ArchiveError> {
        if index >= self.payload.len() {
            return Err(ArchiveError::IndexOutOfRange {
                index,
                cells: self.payload.len(),
            });
        }
        Ok(())
    }

    /// Offers `payload` with `fitness` to the cell at `coords`: it fills an empty cell, replaces
    /// a strictly worse elite, or is dropped.
    #[inline]
    pub fn insert_at(
        &mut self,
        coords: &[usize],
        fitness: Fitness,
        payload: T,
    ) -> Result<InsertOutcome, ArchiveError> {
        let index = self.index_of(coords)?;
        Ok(self.insert_unchecked(index, fitness, payload))
    }

    /// [`GridArchive::insert_at`] by flat cell index.
    #[inline]
    pub fn insert_index(
        &mut self,
        index: usize,
        fitness: Fitness,
        payload: T,
    ) -> Result<InsertOutcome, ArchiveError> {
        self.check_index(index)?;
        Ok(self.insert_unchecked(index, fitness, payload))
    }

    #[inline]
    fn qd_term(&self, fitness: Fitness) -> f64 {
        (fitness.value() - self.config.qd_offset).max(0.0)
    }

    /// Inserts at a valid index.
    #[inline]
    fn insert_unchecked(&mut self, index: usize, fitness: Fitness, payload: T) -> InsertOutcome {
        let outcome = if self.payload[index].is_none() {
            self.payload[index] = Some(payload);
            self.filled.push(index);
            self.fitness_sum += fitness.value();
            self.qd_score += self.qd_term(fitness);
            InsertOutcome::NewCell
        } else {
            let previous = self.fitness[index];
            if fitness <= previous {
                return InsertOutcome::NotAdded {
                    incumbent: previous,
                };
            }
            self.payload[index] = Some(payload);
            self.fitness_sum += fitness.value() - previous.value();
            // The difference of the terms is >= 0, so the sum never decreases under rounding.
            self.qd_score += self.qd_term(fitness) - self.qd_term(previous);
            InsertOutcome::Improved {
                previous,
                gain: fitness.value() - previous.value(),
            }
        };
        if self.best.is_none_or(|b| fitness > self.fitness[b]) {
            self.best = Some(index);
        }
        self.fitness[index] = fitness;
        self.additions += 1;
        self.remember(index);
        outcome
    }

    /// Pushes a cell on the ring of recent improvements (skipping a repeat of the newest).
    #[inline]
    fn remember(&mut self, index: usize) {
        let cap = self.config.recent_capacity;
        if cap == 0 || self.newest_recent() == Some(index) {
            return;
        }
        if self.recent.len() < cap {
            self.recent.push(index);
            self.recent_head = self.recent.len() % cap;
        } else {
            self.recent[self.recent_head] = index;
            self.recent_head = (self.recent_head + 1) % cap;
        }
    }

    fn newest_recent(&self) -> Option<usize> {
        let n = self.recent.len();
        (n > 0).then(|| self.recent[(self.recent_head + n - 1) % n])
    }

    /// Recently added or improved cells (flat indices), newest first, without repeats.
    pub fn recent_indices(&self) -> Vec<usize> {
        let n = self.recent.len();
        let mut out: Vec<usize> = Vec::with_capacity(n);
        for k in 0..n {
            let i = self.recent[(self.recent_head + 2 * n - 1 - k) % n];
            if !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }

    /// The elite of a cell, if any.
    pub fn get(&self, coords: &[usize]) -> Result<Option<Occupant<'_, T>>, ArchiveError> {
        let index = self.index_of(coords)?;
        Ok(self.occupant(index))
    }

    /// The elite of a cell by flat index (`None` when empty or out of range).
    pub fn get_index(&self, index: usize) -> Option<Occupant<'_, T>> {
        self.payload.get(index)?.as_ref()?;
        self.occupant(index)
    }

    #[inline]
    fn occupant(&self, index: usize) -> Option<Occupant<'_, T>> {
        self.payload[index].as_ref().map(|payload| Occupant {
            index,
            fitness: self.fitness[index],
            payload,
        })
    }

    /// The fittest elite (the first to reach the best fitness).
    pub fn best(&self) -> Option<Occupant<'_, T>> {
        self.best.and_then(|b| self.occupant(b))
    }

    /// Filled cells in cell (row-major) order.
    pub fn iter(&self) -> impl Iterator<Item = Occupant<'_, T>> + '_ {
        self.payload.iter().enumerate().filter_map(|(index, p)| {
            p.as_ref().map(|payload| Occupant {
                index,
                fitness: self.fitness[index],
                payload,
            })
        })
    }

    /// Filled cells (flat indices) in the order they were first filled.
    pub fn filled_indices(&self) -> &[usize] {
        &self.filled
    }

    /// Current metrics, in O(1).
    pub fn metrics(&self) -> ArchiveMetrics {
        let filled = self.filled.len();
        let cells = self.payload.len();
        ArchiveMetrics {
            cells,
            filled,
            coverage: filled as f64 / cells as f64,
            qd_score: self.qd_score,
            best: self.best.map(|b| self.fitness[b]),
            mean: (filled > 0).then(|| self.fitness_sum / filled as f64),
            additions: self.additions,
        }
    }

    /// Picks a parent: with the configured ratios, fitness-proportional among the elites
    /// (exploit), a recently improved cell or a cell with empty neighbours (explore), or a
    /// uniformly random filled cell. `None` only when the archive is empty; never an empty cell.
    pub fn select<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<Selected<'_, T>> {
        if self.filled.is_empty() {
            return None;
        }
        let r: f64 = rng.random();
        let (mode, index) = if r < self.thresholds[0] {
            (SelectionMode::Exploit, self.pick_weighted(rng))
        } else if r < self.thresholds[1] {
            (SelectionMode::Explore, self.pick_explore(rng))
        } else {
            (SelectionMode::Random, self.pick_uniform(rng))
        };
        self.occupant(index)
            .map(|occupant| Selected { occupant, mode })
    }

    #[inline]
    fn pick_uniform<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        self.filled[rng.random_range(0..self.filled.len())]
    }

    #[inline]
    fn weight(&self, index: usize) -> f64 {
        self.qd_term(self.fitness[index]) + WEIGHT_FLOOR
    }

    /// Fitness-proportional choice: rejection sampling against the best weight, with an exact
    /// scan when it keeps rejecting (the mixture is still exactly proportional).
    fn pick_weighted<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let max = self.best.map_or(WEIGHT_FLOOR, |b| self.weight(b));
        for _ in 0..REJECTION_TRIES {
            let i = self.pick_uniform(rng);
            if rng.random::<f64>() * max < self.weight(i) {
                return i;
            }
        }
        let total: f64 = self.filled.iter().map(|&i| self.weight(i)).sum();
        let mut target = rng.random::<f64>() * total;
        for &i in &self.filled {
            target -= self.weight(i);
            if target < 0.0 {
                return i;
            }
        }
        self.filled[self.filled.len() - 1]
    }

    /// Exploration: a recently improved cell half the time, otherwise a filled cell drawn with
    /// probability growing with its number of empty neighbours.
    fn pick_explore<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        if !self.recent.is_empty() && rng.random_bool(EXPLORE_RECENT) {
            return self.recent[rng.random_range(0..self.recent.len())];
        }
        let most = 2 * self.shape.len();
        let mut i = self.pick_uniform(rng);
        for _ in 0..REJECTION_TRIES {
            if rng.random_range(0..=most) <= self.empty_neighbours(i) {
                break;
            }
            i = self.pick_uniform(rng);
        }
        i
    }

    /// Empty cells one level away from `index` on one dimension.
    fn empty_neighbours(&self, index: usize) -> usize {
        self.neighbours(index)
            .filter(|&n| self.payload[n].is_none())
            .count()
    }

    /// Cells one level away from `index` on one dimension.
    fn neighbours(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        self.shape
            .iter()
            .zip(&self.strides)
            .flat_map(move |(&levels, &stride)| {
                let level = (index / stride) % levels;
                let down = (level > 0).then(|| index - stride);
                let up = (level + 1 < levels).then(|| index + stride);
                down.into_iter().chain(up)
            })
    }

    /// Up to `n` distinct filled cells other than `exclude`, drawn uniformly (flat indices).
    pub fn inspiration_indices<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        exclude: Option<usize>,
        n: usize,
    ) -> Vec<usize> {
        let mut pool: Vec<usize> = self
            .filled
            .iter()
            .copied()
            .filter(|&i| Some(i) != exclude)
            .collect();
        let take = n.min(pool.len());
        for k in 0..take {
            let j = rng.random_range(k..pool.len());
            pool.swap(k, j);
        }
        pool.truncate(take);
        pool
    }

    /// Empty cells next to filled ones (one level away on one dimension), nearest to `near`
    /// (Manhattan distance in levels) first, then in cell order; at most `cap`.
    pub fn empty_frontier(&self, near: Option<&[usize]>, cap: usize) -> Vec<Vec<usize>> {
        let near = near.filter(|c| c.len() == self.shape.len());
        let mut frontier: Vec<(usize, usize)> = (0..self.payload.len())
            .filter(|&i| {
                self.payload[i].is_none() && self.neighbours(i).any(|n| self.payload[n].is_some())
            })
            .map(|i| {
                let distance = near.map_or(0, |c| {
                    self.shape
                        .iter()
                        .zip(&self.strides)
                        .zip(c)
                        .map(|((&levels, &stride), &at)| ((i / stride) % levels).abs_diff(at))
                        .sum()
                });
                (distance, i)
            })
            .collect();
        frontier.sort_unstable();
        frontier
            .into_iter()
            .take(cap)
            .map(|(_, i)| self.coords_unchecked(i))
            .collect()
    }

    /// Hints for mutators: the empty frontier ordered by distance to `near`, the recently
    /// improved cells (newest first), each capped at `hint_cap`, every filled cell, and the
    /// metrics.
    pub fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        ArchiveHints {
            space: Some(self.space.clone()),
            empty_frontier: self.empty_frontier(near, self.config.hint_cap),
            recently_improved: self
                .recent_indices()
                .into_iter()
                .take(self.config.hint_cap)
                .map(|i| self.coords_unchecked(i))
                .collect(),
            filled: self
                .filled
                .iter()
                .map(|&i| self.coords_unchecked(i))
                .collect(),
            metrics: self.metrics(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Serde: a self-describing, validated representation. Filled cells are listed in the order
// they were first filled (which uniform selection depends on), each with its coordinates.

const FORMAT: u32 = 1;

#[derive(Serialize)]
struct CellOut<'a, T> {
    coords: Vec<usize>,
    fitness: Fitness,
    payload: &'a T,
}

struct CellsOut<'a, T>(&'a GridArchive<T>);

impl<T: Serialize> Serialize for CellsOut<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        s.collect_seq(a.filled.iter().filter_map(|&i| {
            a.payload[i].as_ref().map(|payload| CellOut {
                coords: a.coords_unchecked(i),
                fitness: a.fitness[i],
                payload,
            })
        }))
    }
}

#[derive(Serialize)]
struct ReprOut<'a, T> {
    format: u32,
    space: &'a DescriptorSpace,
    config: &'a GridConfig,
    cells: CellsOut<'a, T>,
    recent: &'a [usize],
    recent_head: usize,
    qd_score: f64,
    fitness_sum: f64,
    best: Option<usize>,
    additions: u64,
}

#[derive(Deserialize)]
struct CellIn<T> {
    coords: Vec<usize>,
    fitness: Fitness,
    payload: T,
}

#[derive(Deserialize)]
struct ReprIn<T> {
    format: u32,
    space: DescriptorSpace,
    config: GridConfig,
    cells: Vec<CellIn<T>>,
    recent: Vec<usize>,
    recent_head: usize,
    qd_score: f64,
    fitness_sum: f64,
    best: Option<usize>,
    additions: u64,
}

impl<T: Serialize> Serialize for GridArchive<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ReprOut {
            format: FORMAT,
            space: &self.space,
            config: &self.config,
            cells: CellsOut(self),
            recent: &self.recent,
            recent_head: self.recent_head,
            qd_score: self.qd_score,
            fitness_sum: self.fitness_sum,
            best: self.best,
            additions: self.additions,
        }
        .serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for GridArchive<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let repr = ReprIn::<T>::deserialize(d)?;
        GridArchive::from_repr(repr).map_err(serde::de::Error::custom)
    }
}

impl<T> GridArchive<T> {
    fn from_repr(repr: ReprIn<T>) -> Result<Self, ArchiveError> {
        let bad = |m: String| ArchiveError::InvalidSnapshot(m);
        if repr.format != FORMAT {
            return Err(bad(format!("unknown format {}", repr.format)));
        }
        let mut a = GridArchive::with_config(repr.space, repr.config)?;
        let mut recomputed = 0.0;
        for cell in repr.cells {
            let index = a.index_of(&cell.coords)?;
            if a.payload[index].is_some() {
                return Err(bad(format!("cell {:?} is listed twice", cell.coords)));
            }
            if Fitness::new(cell.fitness.value()).is_none() {
                return Err(bad(format!("cell {:?} has invalid fitness", cell.coords)));
            }
            a.payload[index] = Some(cell.payload);
            a.fitness[index] = cell.fitness;
            a.filled.push(index);
            recomputed += cell.fitness.value();
        }
        let cap = a.config.recent_capacity;
        let n = repr.recent.len();
        let head_ok = n <= cap
            && if n < cap {
                repr.recent_head == n
            } else {
                repr.recent_head < cap || (cap == 0 && repr.recent_head == 0)
            };
        if !head_ok {
            return Err(bad("the ring of recent improvements is inconsistent".into()));
        }
        if let Some(&i) = repr.recent.iter().find(|&&i| a.get_index(i).is_none()) {
            return Err(bad(format!("recent cell {i} is not filled")));
        }
        a.recent.extend_from_slice(&repr.recent);
        a.recent_head = repr.recent_head;
        let max = a.filled.iter().map(|&i| a.fitness[i]).max();
        match repr.best {
            None if a.filled.is_empty() => {}
            Some(b) if a.get_index(b).is_some() && Some(a.fitness[b]) == max => {}
            _ => return Err(bad("the best cell is inconsistent with the cells".into())),
        }
        a.best = repr.best;
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs()));
        if !(repr.fitness_sum.is_finite() && close(repr.fitness_sum, recomputed)) {
            return Err(bad("the fitness sum is inconsistent with the cells".into()));
        }
        let qd: f64 = a.filled.iter().map(|&i| a.qd_term(a.fitness[i])).sum();
        if !(repr.qd_score.is_finite() && close(repr.qd_score, qd)) {
            return Err(bad("the QD-score is inconsistent with the cells".into()));
        }
        if repr.additions < a.filled.len() as u64 {
            return Err(bad("fewer additions than filled cells".into()));
        }
        // The running sums are kept as recorded, so a restored archive equals the live one.
        a.fitness_sum = repr.fitness_sum;
        a.qd_score = repr.qd_score;
        a.additions = repr.additions;
        Ok(a)
    }
}

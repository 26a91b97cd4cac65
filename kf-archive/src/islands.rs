//! Islands: several archives evolving separately, with periodic migration of elites and the
//! reseeding of islands that stagnate, behind one [`Archive`] for the engine.

use std::collections::BTreeMap;

use kf_core::{
    Archive, ArchiveHints, ArchiveMetrics, CandidateId, DescriptorSpace, Elite, InsertOutcome,
};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use crate::error::ArchiveError;

/// The most islands an [`IslandArchive`] has.
pub const MAX_ISLANDS: usize = 256;

const FORMAT: u32 = 1;

/// How an [`IslandArchive`] runs its islands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IslandConfig {
    /// Number of islands (at least 1).
    pub islands: usize,
    /// Insertions (over all islands) between migrations; 0: never migrate.
    pub migration_interval: u64,
    /// Elites each island sends to the next one (a ring) at a migration: its fittest.
    pub migrants: usize,
    /// Insertions routed to an island without adding or improving a cell after which it is
    /// reseeded; 0: never.
    pub stagnation: u64,
    /// Elites of the whole run a reseeded island restarts from (spread over the run's cells).
    pub reseed_elites: usize,
}

impl Default for IslandConfig {
    fn default() -> Self {
        IslandConfig {
            islands: 4,
            migration_interval: 100,
            migrants: 2,
            stagnation: 150,
            reseed_elites: 4,
        }
    }
}

impl IslandConfig {
    /// The default configuration with `n` islands.
    pub fn with_islands(mut self, n: usize) -> Self {
        self.islands = n;
        self
    }

    fn validate(&self) -> Result<(), ArchiveError> {
        if self.islands == 0 || self.islands > MAX_ISLANDS {
            return Err(ArchiveError::InvalidConfig(format!(
                "an island archive needs 1 to {MAX_ISLANDS} islands, got {}",
                self.islands
            )));
        }
        Ok(())
    }
}

/// Islands of one archive type `A` (a [`crate::EliteArchive`] or a [`crate::CvtArchive`]),
/// evolving separately, as one [`Archive`] for the engine.
///
/// * **Parents** come from an island drawn uniformly among the non-empty ones, by that
///   island's own selection.
/// * **Children** go to their parent's island (the first of
///   [`Candidate::parents`](kf_core::Candidate::parents)); a parent that lives on several
///   islands (a migrant) sends its children to one of them, chosen by the child's id. Seeds
///   (no parent) go to every island. The outcome of an insertion is its island's.
/// * **Migration**: every `migration_interval` insertions, each island's `migrants` fittest
///   elites are offered to the next island of the ring.
/// * **Reseeding**: an island that `stagnation` insertions in a row did not improve restarts
///   empty, from `reseed_elites` elites of the whole run spread over its cells.
/// * **The run's result** ([`metrics`](Archive::metrics), [`elites`](Archive::elites),
///   [`hints`](Archive::hints), inspirations) is a union archive that every insertion also
///   goes to: the best found per cell on any island, so the QD-score never decreases even
///   when an island is reseeded.
///
/// Its whole state is a function of the insertions, so a run replayed from its step log
/// (the engine's resume, [`crate::RunDir::restore`]) rebuilds it exactly, and its
/// serialization (the run directory's snapshot) holds every island.
///
/// # Example
///
/// ```
/// use kf_archive::{EliteArchive, IslandArchive, IslandConfig};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
///
/// let classifier = SyntheticClassifier::new(4);
/// let empty = EliteArchive::new(classifier.space().clone())?;
/// let config = IslandConfig { migration_interval: 40, ..IslandConfig::default() };
/// let archive = IslandArchive::new(empty, config)?;
/// let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(6)])
///     .seed(2)
///     .budget(Budget::evaluations(300))
///     .run_blocking()?;
/// let islands = &result.archive;
/// assert_eq!(islands.islands().len(), 4);
/// assert!(islands.migrations() >= 7);
/// // The run's metrics are the union's: at least as good as any island's.
/// let best_island = islands.islands().iter().map(|i| i.metrics().qd_score).fold(0.0, f64::max);
/// assert!(islands.metrics().qd_score >= best_island);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct IslandArchive<A> {
    config: IslandConfig,
    /// An empty archive, cloned to reseed an island.
    template: A,
    islands: Vec<A>,
    union: A,
    /// The islands each candidate was added to, by id.
    homes: BTreeMap<CandidateId, Vec<usize>>,
    insertions: u64,
    /// Insertions routed to each island since it last added or improved a cell.
    since_added: Vec<u64>,
    migrations: u64,
    reseeds: u64,
}

fn rank(o: &InsertOutcome) -> u8 {
    match o {
        InsertOutcome::NewCell => 2,
        InsertOutcome::Improved { .. } => 1,
        InsertOutcome::NotAdded { .. } => 0,
    }
}

impl<A> IslandArchive<A>
where
    A: Archive + Clone,
{
    /// Islands that all start as clones of `empty` (which must hold no elite).
    pub fn new(empty: A, config: IslandConfig) -> Result<Self, ArchiveError> {
        config.validate()?;
        if empty.metrics().filled > 0 {
            return Err(ArchiveError::InvalidConfig(
                "islands start from an empty archive".into(),
            ));
        }
        Ok(IslandArchive {
            config,
            islands: vec![empty.clone(); config.islands],
            union: empty.clone(),
            template: empty,
            homes: BTreeMap::new(),
            insertions: 0,
            since_added: vec![0; config.islands],
            migrations: 0,
            reseeds: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &IslandConfig {
        &self.config
    }

    /// The islands.
    pub fn islands(&self) -> &[A] {
        &self.islands
    }

    /// The union of the islands: every elite offered to any island, the best per cell.
    pub fn union(&self) -> &A {
        &self.union
    }

    /// Migrations so far.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// Islands reseeded so far.
    pub fn reseeds(&self) -> u64 {
        self.reseeds
    }

    /// The island a child of `parent` goes to.
    fn route(&self, child: CandidateId, parent: CandidateId) -> usize {
        let n = self.islands.len() as u64;
        match self.homes.get(&parent) {
            Some(homes) if !homes.is_empty() => homes[(child.0 % homes.len() as u64) as usize],
            _ => (child.0 % n) as usize,
        }
    }

    fn remember(&mut self, id: CandidateId, island: usize) {
        let homes = self.homes.entry(id).or_default();
        if !homes.contains(&island) {
            homes.push(island);
        }
    }

    /// Offers `elite` to one island, noting where it was added.
    fn offer(&mut self, island: usize, elite: Elite) -> Result<InsertOutcome, A::Error> {
        let id = elite.candidate.id;
        let outcome = self.islands[island].insert(elite)?;
        if outcome.is_added() {
            self.remember(id, island);
        }
        Ok(outcome)
    }

    /// The fittest `n` elites of an island (ties: the lower candidate id first).
    fn fittest(archive: &A, n: usize) -> Vec<Elite> {
        let mut elites: Vec<&Elite> = archive.elites();
        elites.sort_by(|a, b| {
            b.fitness
                .cmp(&a.fitness)
                .then(a.candidate.id.cmp(&b.candidate.id))
        });
        elites.into_iter().take(n).cloned().collect()
    }

    /// Each island offers its fittest elites to the next one (chosen before any moves).
    fn migrate(&mut self) -> Result<(), A::Error> {
        let n = self.islands.len();
        if n < 2 || self.config.migrants == 0 {
            return Ok(());
        }
        let outgoing: Vec<Vec<Elite>> = self
            .islands
            .iter()
            .map(|a| Self::fittest(a, self.config.migrants))
            .collect();
        for (i, migrants) in outgoing.into_iter().enumerate() {
            for elite in migrants {
                self.offer((i + 1) % n, elite)?;
            }
        }
        self.migrations += 1;
        Ok(())
    }

    /// Restarts an island from elites of the union spread over its cells.
    fn reseed(&mut self, island: usize) -> Result<(), A::Error> {
        self.islands[island] = self.template.clone();
        self.since_added[island] = 0;
        let all: Vec<Elite> = self.union.elites().into_iter().cloned().collect();
        let take = self.config.reseed_elites.min(all.len());
        if let Some(stride) = all.len().checked_div(take) {
            let offset = (self.reseeds as usize) % all.len();
            for k in 0..take {
                let elite = all[(offset + k * stride) % all.len()].clone();
                self.offer(island, elite)?;
            }
        }
        self.reseeds += 1;
        Ok(())
    }
}

impl<A> Archive for IslandArchive<A>
where
    A: Archive + Clone,
{
    type Error = A::Error;

    fn space(&self) -> &DescriptorSpace {
        self.union.space()
    }

    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, A::Error> {
        let id = elite.candidate.id;
        let outcome = match elite.candidate.parents.first() {
            None => {
                // A seed goes to every island.
                let mut best: Option<InsertOutcome> = None;
                for island in 0..self.islands.len() {
                    let o = self.offer(island, elite.clone())?;
                    self.note(island, &o);
                    if best.is_none_or(|b| rank(&o) > rank(&b)) {
                        best = Some(o);
                    }
                }
                self.union.insert(elite)?;
                best.unwrap_or(InsertOutcome::NewCell)
            }
            Some(&parent) => {
                let island = self.route(id, parent);
                let o = self.offer(island, elite.clone())?;
                self.union.insert(elite)?;
                self.note(island, &o);
                if self.config.stagnation > 0 && self.since_added[island] >= self.config.stagnation
                {
                    self.reseed(island)?;
                }
                o
            }
        };
        self.insertions += 1;
        let every = self.config.migration_interval;
        if every > 0 && self.insertions.is_multiple_of(every) {
            self.migrate()?;
        }
        Ok(outcome)
    }

    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        let filled: Vec<usize> = (0..self.islands.len())
            .filter(|&i| self.islands[i].metrics().filled > 0)
            .collect();
        if filled.is_empty() {
            return self.union.select_parent(rng);
        }
        let island = filled[rng.random_range(0..filled.len())];
        self.islands[island].select_parent(rng)
    }

    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        self.union.inspirations(rng, cell, n)
    }

    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        self.union.hints(near)
    }

    fn metrics(&self) -> ArchiveMetrics {
        self.union.metrics()
    }

    fn elites(&self) -> Vec<&Elite> {
        self.union.elites()
    }
}

impl<A> IslandArchive<A> {
    fn note(&mut self, island: usize, outcome: &InsertOutcome) {
        if outcome.is_added() {
            self.since_added[island] = 0;
        } else {
            self.since_added[island] += 1;
        }
    }
}

#[derive(Serialize)]
struct ReprOut<'a, A> {
    format: u32,
    /// The cells' space, which a run directory checks before it reads the rest.
    space: &'a DescriptorSpace,
    config: &'a IslandConfig,
    template: &'a A,
    islands: &'a [A],
    union: &'a A,
    homes: Vec<(CandidateId, &'a [usize])>,
    insertions: u64,
    since_added: &'a [u64],
    migrations: u64,
    reseeds: u64,
}

#[derive(Deserialize)]
struct ReprIn<A> {
    format: u32,
    space: DescriptorSpace,
    config: IslandConfig,
    template: A,
    islands: Vec<A>,
    union: A,
    homes: Vec<(CandidateId, Vec<usize>)>,
    insertions: u64,
    since_added: Vec<u64>,
    migrations: u64,
    reseeds: u64,
}

impl<A: Archive + Serialize> Serialize for IslandArchive<A> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ReprOut {
            format: FORMAT,
            space: self.union.space(),
            config: &self.config,
            template: &self.template,
            islands: &self.islands,
            union: &self.union,
            homes: self
                .homes
                .iter()
                .map(|(id, h)| (*id, h.as_slice()))
                .collect(),
            insertions: self.insertions,
            since_added: &self.since_added,
            migrations: self.migrations,
            reseeds: self.reseeds,
        }
        .serialize(s)
    }
}

impl<'de, A: Archive + Deserialize<'de>> Deserialize<'de> for IslandArchive<A> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = ReprIn::<A>::deserialize(d)?;
        let bad = |m: &str| serde::de::Error::custom(ArchiveError::InvalidSnapshot(m.to_owned()));
        if r.format != FORMAT {
            return Err(bad("unknown island archive format"));
        }
        r.config.validate().map_err(serde::de::Error::custom)?;
        let n = r.config.islands;
        if r.islands.len() != n || r.since_added.len() != n {
            return Err(bad("the number of islands is not the configuration's"));
        }
        let space = r.union.space();
        if &r.space != space
            || r.template.space() != space
            || r.islands.iter().any(|i| i.space() != space)
        {
            return Err(bad("the islands' spaces differ"));
        }
        if r.template.metrics().filled > 0 {
            return Err(bad("the template archive is not empty"));
        }
        if r.homes.iter().any(|(_, h)| h.iter().any(|&i| i >= n)) {
            return Err(bad("a candidate's island is beyond the islands"));
        }
        Ok(IslandArchive {
            config: r.config,
            template: r.template,
            islands: r.islands,
            union: r.union,
            homes: r.homes.into_iter().collect(),
            insertions: r.insertions,
            since_added: r.since_added,
            migrations: r.migrations,
            reseeds: r.reseeds,
        })
    }
}

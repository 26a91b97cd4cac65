//! Behaviour descriptors: the space of cells and a candidate's coordinates in it.

use serde::{Deserialize, Serialize};

use crate::error::CoreError;

/// One behaviour dimension: a name and its ordered levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dimension {
    /// Name, such as `memory_access`.
    pub name: String,
    /// Level names, lowest first.
    pub levels: Vec<String>,
}

impl Dimension {
    /// A dimension with named levels.
    pub fn new(
        name: impl Into<String>,
        levels: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Dimension {
            name: name.into(),
            levels: levels.into_iter().map(Into::into).collect(),
        }
    }

    /// A dimension with `n` levels named `0`, `1`, ….
    pub fn numbered(name: impl Into<String>, n: usize) -> Self {
        Dimension::new(name, (0..n).map(|i| i.to_string()))
    }
}

/// The descriptor space of a classifier: its dimensions. The number of cells is the product of
/// the level counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescriptorSpace {
    /// Dimensions in coordinate order.
    pub dimensions: Vec<Dimension>,
}

impl DescriptorSpace {
    /// A space from its dimensions; an error if there are none or one has no levels.
    pub fn new(dimensions: Vec<Dimension>) -> Result<Self, CoreError> {
        if dimensions.is_empty() {
            return Err(CoreError::InvalidDescriptorSpace(
                "a descriptor space needs at least one dimension".into(),
            ));
        }
        if let Some(d) = dimensions.iter().find(|d| d.levels.is_empty()) {
            return Err(CoreError::InvalidDescriptorSpace(format!(
                "dimension `{}` has no levels",
                d.name
            )));
        }
        let cells = dimensions
            .iter()
            .try_fold(1usize, |acc, d| acc.checked_mul(d.levels.len()));
        if cells.is_none() {
            return Err(CoreError::InvalidDescriptorSpace(
                "the number of cells overflows".into(),
            ));
        }
        Ok(DescriptorSpace { dimensions })
    }

    /// The default kernel space of the design: memory access × algorithm structure × parallel
    /// coordination, four levels each (64 cells).
    pub fn kernel_default() -> Self {
        DescriptorSpace {
            dimensions: vec![
                Dimension::new(
                    "memory_access",
                    [
                        "global",
                        "coalesced_vectorised",
                        "local_tiled",
                        "multi_level",
                    ],
                ),
                Dimension::new(
                    "algorithm_structure",
                    [
                        "multi_pass",
                        "fused",
                        "single_pass",
                        "tiled_register_blocked",
                    ],
                ),
                Dimension::new(
                    "parallel_coordination",
                    [
                        "independent",
                        "work_group_barriers",
                        "sub_group",
                        "hierarchical",
                    ],
                ),
            ],
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.dimensions.len()
    }

    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.dimensions.iter().map(|d| d.levels.len()).product()
    }

    /// Levels per dimension.
    pub fn shape(&self) -> Vec<usize> {
        self.dimensions.iter().map(|d| d.levels.len()).collect()
    }

    /// Checks that `coords` name a cell of this space.
    pub fn check(&self, coords: &[usize]) -> Result<(), CoreError> {
        if coords.len() != self.ndim() {
            return Err(CoreError::DescriptorOutOfSpace {
                coords: coords.to_vec(),
                reason: format!("expected {} coordinates", self.ndim()),
            });
        }
        for (c, d) in coords.iter().zip(&self.dimensions) {
            if *c >= d.levels.len() {
                return Err(CoreError::DescriptorOutOfSpace {
                    coords: coords.to_vec(),
                    reason: format!(
                        "level {c} of `{}` is beyond its {} levels",
                        d.name,
                        d.levels.len()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// A candidate's cell: one level index per dimension, and what produced the classification
/// (`"static-patterns"`, `"compiler-facts"`, `"llm-judge"`, …) with its evidence.
///
/// A classifier may also give continuous coordinates ([`Descriptor::features`]): archives over
/// a continuous space (kf-archive's CVT archive) place the candidate by them, grids ignore them.
/// Two descriptors are equal when their features have the same bits (so a NaN equals itself and
/// `Eq` and `Hash` hold).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Descriptor {
    /// Level index per dimension.
    pub coords: Vec<usize>,
    /// Name of the classifier that produced it.
    pub source: String,
    /// Short human-readable evidence, one entry per dimension where the classifier has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// Continuous behaviour coordinates, for archives over a continuous space; empty when the
    /// classifier gives only levels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<f64>,
}

impl Descriptor {
    /// A descriptor with coordinates and a source.
    pub fn new(coords: impl Into<Vec<usize>>, source: impl Into<String>) -> Self {
        Descriptor {
            coords: coords.into(),
            source: source.into(),
            evidence: Vec::new(),
            features: Vec::new(),
        }
    }

    /// Adds continuous coordinates (see [`Descriptor::features`]).
    ///
    /// ```
    /// use kf_core::Descriptor;
    ///
    /// let d = Descriptor::new([1, 2], "mine").with_features([0.25, 0.75]);
    /// assert_eq!(d.features, vec![0.25, 0.75]);
    /// ```
    pub fn with_features(mut self, features: impl Into<Vec<f64>>) -> Self {
        self.features = features.into();
        self
    }
}

impl PartialEq for Descriptor {
    fn eq(&self, other: &Self) -> bool {
        self.coords == other.coords
            && self.source == other.source
            && self.evidence == other.evidence
            && self.features.len() == other.features.len()
            && self
                .features
                .iter()
                .zip(&other.features)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl Eq for Descriptor {}

impl std::hash::Hash for Descriptor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.coords.hash(state);
        self.source.hash(state);
        self.evidence.hash(state);
        self.features.len().hash(state);
        for f in &self.features {
            f.to_bits().hash(state);
        }
    }
}

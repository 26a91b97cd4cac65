//! Seeded synthetic tuning landscapes with known structure, as Kernel Tuner caches: several
//! peaks, one narrow peak, many failing configurations, strong parameter interactions, and
//! plateaus with measurement noise.
//!
//! They test how a strategy holds up on landscapes unlike the measured ones, without held-out
//! data: each [`LandscapeKind`] stands for one way real tuning spaces are hard, and every
//! instance is drawn from a seed, so a benchmark can average over many instances of a kind
//! rather than tune itself to one. The result is an ordinary [`KtCache`], so it replays through
//! [`crate::Replay`] like a measured cache, and Kernel Tuner's simulation mode reads it when
//! written with [`KtCache::write`].
//!
//! The space is a full grid of six parameters (4 608 configurations): three powers of two
//! (`TILE` 1…128, `WG` 1…32, `VEC` 1…8), `UNROLL` 1…4, `STAGES` 1…2 and a three-way switch
//! `ALGO`. Times are in milliseconds and depend on the value indices scaled to `[0, 1]`.
//!
//! ```
//! use kf_tune::synthetic::LandscapeKind;
//! use kf_tune::{strategy, Replay};
//!
//! let cache = LandscapeKind::NarrowPeak.build(7);
//! let replay = Replay::from_cache(cache).unwrap();
//! assert_eq!(replay.total(), 4608);
//! let mut s = strategy::by_name("random").unwrap();
//! let result = replay.run(s.as_mut(), 46, 1).unwrap();
//! assert!(replay.score(&result) > 0.0 && replay.score(&result) <= 1.0);
//! ```

use std::fmt;
use std::str::FromStr;

use kf_core::{ParamValue, ParamValues};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::kt::KtCache;
use crate::objective::{Failure, Outcome};

/// One family of synthetic landscapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LandscapeKind {
    /// Six smooth basins of random depth and width; the global one is not the widest.
    MultiPeak,
    /// A broad basin holding a good local optimum, and elsewhere one isolated configuration
    /// (with a faint halo of its direct neighbours) that is 30% faster.
    NarrowPeak,
    /// About 60% of the configurations fail: a structured region (`TILE` and `VEC` too large
    /// together, like running out of registers) plus scattered compile failures; the optimum
    /// lies on the edge of the failing region.
    Failing,
    /// Strong interactions: the best `WG` depends on `TILE` (a diagonal ridge), the best `VEC`
    /// depends on `ALGO`, and `UNROLL` only helps with more than one `STAGES`; no parameter can
    /// be tuned on its own.
    Interactions,
    /// Coarse plateaus (times rounded to a few levels, so many configurations tie) with 3%
    /// multiplicative noise on top, as repeated timings on a busy machine.
    PlateauNoise,
}

impl LandscapeKind {
    /// Every kind, in a fixed order.
    pub const ALL: [LandscapeKind; 5] = [
        LandscapeKind::MultiPeak,
        LandscapeKind::NarrowPeak,
        LandscapeKind::Failing,
        LandscapeKind::Interactions,
        LandscapeKind::PlateauNoise,
    ];

    /// The kind's name (`multi_peak`, `narrow_peak`, `failing`, `interactions`,
    /// `plateau_noise`).
    pub fn as_str(self) -> &'static str {
        match self {
            LandscapeKind::MultiPeak => "multi_peak",
            LandscapeKind::NarrowPeak => "narrow_peak",
            LandscapeKind::Failing => "failing",
            LandscapeKind::Interactions => "interactions",
            LandscapeKind::PlateauNoise => "plateau_noise",
        }
    }

    /// The instance of this kind drawn from `seed`: a Kernel Tuner cache holding every
    /// configuration of the grid (failures as `CompilationFailedConfig` or
    /// `RuntimeFailedConfig`).
    pub fn build(self, seed: u64) -> KtCache {
        // Each kind draws from its own stream, so kinds with the same seed are unrelated.
        let mut rng = ChaCha8Rng::seed_from_u64(
            seed ^ 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(self as u64 + 1),
        );
        let model = Model::draw(self, &mut rng);
        let params = grid();
        let mut cache = KtCache::new(
            "synthetic",
            format!("{}_{seed}", self.as_str()),
            json!([seed]),
            params
                .iter()
                .map(|(n, v)| {
                    (
                        n.to_string(),
                        v.iter().map(|&x| ParamValue::Int(x)).collect(),
                    )
                })
                .collect(),
        );
        let dims: Vec<usize> = params.iter().map(|(_, v)| v.len()).collect();
        let total: usize = dims.iter().product();
        for flat in 0..total {
            let mut idx = [0usize; 6];
            let mut rest = flat;
            for d in (0..6).rev() {
                idx[d] = rest % dims[d];
                rest /= dims[d];
            }
            let x: [f64; 6] = std::array::from_fn(|d| idx[d] as f64 / (dims[d] - 1) as f64);
            let outcome = model.outcome(&x, &idx, &mut rng);
            let mut values = ParamValues::new();
            for (d, (name, v)) in params.iter().enumerate() {
                values.set(*name, ParamValue::Int(v[idx[d]]));
            }
            cache.insert(values, outcome);
        }
        cache
    }
}

impl fmt::Display for LandscapeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`LandscapeKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown landscape `{0}` (known: multi_peak, narrow_peak, failing, interactions, plateau_noise)")]
pub struct UnknownLandscape(pub String);

impl FromStr for LandscapeKind {
    type Err = UnknownLandscape;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LandscapeKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownLandscape(s.to_owned()))
    }
}

/// The grid: names and values, in key order.
fn grid() -> [(&'static str, Vec<i64>); 6] {
    [
        ("TILE", vec![1, 2, 4, 8, 16, 32, 64, 128]),
        ("WG", vec![1, 2, 4, 8, 16, 32]),
        ("VEC", vec![1, 2, 4, 8]),
        ("UNROLL", vec![1, 2, 3, 4]),
        ("STAGES", vec![1, 2]),
        ("ALGO", vec![0, 1, 2]),
    ]
}

/// A smooth basin: depth, centre and width in the scaled coordinates.
#[derive(Debug, Clone)]
struct Basin {
    depth: f64,
    centre: [f64; 6],
    width: f64,
}

impl Basin {
    fn draw(rng: &mut ChaCha8Rng, depth: f64, width: f64) -> Basin {
        Basin {
            depth,
            centre: std::array::from_fn(|_| rng.random::<f64>()),
            width,
        }
    }

    fn at(&self, x: &[f64; 6]) -> f64 {
        let d2: f64 = x
            .iter()
            .zip(&self.centre)
            .map(|(a, b)| (a - b).powi(2))
            .sum();
        self.depth * (-d2 / (2.0 * self.width * self.width)).exp()
    }
}

/// The drawn parameters of one instance.
#[derive(Debug, Clone)]
struct Model {
    kind: LandscapeKind,
    basins: Vec<Basin>,
    /// Per-kind numbers (ridge slopes, thresholds, the narrow peak's index).
    knobs: Vec<f64>,
    narrow: [usize; 6],
}

impl Model {
    fn draw(kind: LandscapeKind, rng: &mut ChaCha8Rng) -> Model {
        let mut basins = Vec::new();
        let mut knobs = Vec::new();
        let mut narrow = [0usize; 6];
        match kind {
            LandscapeKind::MultiPeak => {
                // The global basin is narrow-ish; wider, shallower ones attract greedy search.
                basins.push(Basin::draw(rng, 1.0, 0.18));
                for _ in 0..5 {
                    let depth = rng.random_range(0.45..0.85);
                    let width = rng.random_range(0.2..0.4);
                    basins.push(Basin::draw(rng, depth, width));
                }
            }
            LandscapeKind::NarrowPeak => {
                basins.push(Basin::draw(rng, 0.8, 0.35));
                let dims = grid().map(|(_, v)| v.len());
                narrow = std::array::from_fn(|d| rng.random_range(0..dims[d]));
            }
            LandscapeKind::Failing => {
                basins.push(Basin::draw(rng, 1.0, 0.3));
                basins.push(Basin::draw(rng, 0.7, 0.3));
                // Fail when TILE + VEC exceed this (in scaled units), plus 20% scattered.
                knobs.push(rng.random_range(0.7..1.0));
                // Put the global basin's centre on the failing edge.
                let edge = knobs[0];
                let t = rng.random_range(0.3..0.7) * edge;
                basins[0].centre[0] = t;
                basins[0].centre[2] = edge - t;
            }
            LandscapeKind::Interactions => {
                // Ridge WG ≈ a - TILE; VEC's best per ALGO; UNROLL's sign flips with STAGES.
                knobs.push(rng.random_range(0.8..1.2));
                for _ in 0..3 {
                    knobs.push(rng.random::<f64>());
                }
            }
            LandscapeKind::PlateauNoise => {
                basins.push(Basin::draw(rng, 1.0, 0.35));
                basins.push(Basin::draw(rng, 0.8, 0.3));
            }
        }
        Model {
            kind,
            basins,
            knobs,
            narrow,
        }
    }

    fn outcome(&self, x: &[f64; 6], idx: &[usize; 6], rng: &mut ChaCha8Rng) -> Outcome {
        let depth = |x: &[f64; 6]| self.basins.iter().map(|b| b.at(x)).fold(0.0, f64::max);
        // A gentle slope everywhere so that every configuration has a distinct time.
        let slope = 0.02
            * x.iter()
                .enumerate()
                .map(|(d, v)| v * (d + 1) as f64)
                .sum::<f64>();
        let t = match self.kind {
            LandscapeKind::MultiPeak => 10.0 * (-1.2 * depth(x)).exp() + slope,
            LandscapeKind::NarrowPeak => {
                let base = 10.0 * (-1.2 * depth(x)).exp() + slope;
                let dist: usize = idx
                    .iter()
                    .zip(&self.narrow)
                    .map(|(a, b)| a.abs_diff(*b))
                    .sum();
                // The best of the broad basin is about 10 · e^-0.96 ≈ 3.8 ms; the peak 30% less.
                match dist {
                    0 => 2.7,
                    1 => base.min(3.9 + 0.01 * slope),
                    _ => base,
                }
            }
            LandscapeKind::Failing => {
                if x[0] + x[2] > self.knobs[0] + 1e-9 {
                    return Outcome::Failed(Failure::Runtime);
                }
                // Scattered failures are drawn for every configuration so the stream stays aligned.
                let scattered = rng.random::<f64>() < 0.2;
                if scattered {
                    return Outcome::Failed(Failure::Compilation);
                }
                10.0 * (-1.2 * depth(x)).exp() + slope
            }
            LandscapeKind::Interactions => {
                let ridge = (x[1] - (self.knobs[0] - x[0])).powi(2);
                let algo = idx[5];
                let best_vec = (self.knobs[1 + algo] + 0.35 * algo as f64).fract();
                let vec = (x[2] - best_vec).powi(2);
                let unroll = if idx[4] == 0 { x[3] } else { 1.0 - x[3] } * (1.0 + x[4]);
                let algo_cost = [0.0, 0.15, 0.3][algo];
                1.0 + 6.0 * ridge + 4.0 * vec + 0.4 * unroll + algo_cost + slope
            }
            LandscapeKind::PlateauNoise => {
                let smooth = 10.0 * (-1.2 * depth(x)).exp();
                // Five levels per millisecond: wide ties near the optimum.
                let level = (smooth * 5.0).ceil() / 5.0;
                let noise = 1.0 + 0.03 * (rng.random::<f64>() * 2.0 - 1.0);
                level * noise
            }
        };
        Outcome::Time(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_seeded_and_structured() {
        for kind in LandscapeKind::ALL {
            let a = kind.build(3);
            assert_eq!(a, kind.build(3), "{kind}: same seed, same landscape");
            assert_ne!(a.entries, kind.build(4).entries, "{kind}: seeds differ");
            assert_eq!(a.entries.len(), 4608);
            assert_eq!(kind.as_str().parse::<LandscapeKind>(), Ok(kind));
        }
        let failing = LandscapeKind::Failing.build(1);
        let failed = failing
            .entries
            .values()
            .filter(|e| e.outcome.time().is_none())
            .count();
        assert!(
            (0.4..0.8).contains(&(failed as f64 / 4608.0)),
            "{failed} failures"
        );
    }

    #[test]
    fn the_narrow_peak_is_one_isolated_configuration() {
        let cache = LandscapeKind::NarrowPeak.build(5);
        let mut times: Vec<f64> = cache
            .entries
            .values()
            .filter_map(|e| e.outcome.time())
            .collect();
        times.sort_by(f64::total_cmp);
        assert_eq!(times[0], 2.7);
        assert!(times[1] > 2.7 * 1.3, "second best {}", times[1]);
    }
}

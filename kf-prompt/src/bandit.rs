//! Bandits that pick a prompt variant (or a model) per request from the credit its children
//! earned. Rewards lie in `[0, 1]`. Every random choice comes from the caller's seeded RNG.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// How an arm is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BanditPolicy {
    /// UCB1: arms never tried first, then the highest `mean + c·sqrt(ln N / n)`.
    Ucb1 {
        /// The exploration constant `c`.
        exploration: f64,
    },
    /// Thompson sampling from a Beta(1 + reward, 1 + pulls − reward) posterior per arm.
    Thompson,
}

impl Default for BanditPolicy {
    fn default() -> Self {
        BanditPolicy::Ucb1 { exploration: 0.5 }
    }
}

/// What one arm earned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ArmStats {
    /// Times it was credited.
    pub pulls: u64,
    /// Summed rewards (each in `[0, 1]`).
    pub reward: f64,
}

impl ArmStats {
    /// Adds one reward (clamped to `[0, 1]`).
    pub fn add(&mut self, reward: f64) {
        self.pulls += 1;
        self.reward += if reward.is_finite() {
            reward.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// Posterior mean with a uniform prior: `(1 + reward) / (2 + pulls)`.
    pub fn mean(&self) -> f64 {
        (1.0 + self.reward) / (2.0 + self.pulls as f64)
    }
}

/// Picks an arm; `None` when there are none.
///
/// ```
/// use kf_prompt::{choose_arm, ArmStats, BanditPolicy};
/// use rand::SeedableRng;
///
/// let arms = [ArmStats { pulls: 10, reward: 1.0 }, ArmStats { pulls: 10, reward: 9.0 }];
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// assert_eq!(choose_arm(BanditPolicy::Ucb1 { exploration: 0.1 }, &arms, &mut rng), Some(1));
/// ```
pub fn choose_arm<R: Rng + ?Sized>(
    policy: BanditPolicy,
    arms: &[ArmStats],
    rng: &mut R,
) -> Option<usize> {
    if arms.is_empty() {
        return None;
    }
    let scores: Vec<f64> = match policy {
        BanditPolicy::Ucb1 { exploration } => {
            let untried: Vec<usize> = (0..arms.len()).filter(|&i| arms[i].pulls == 0).collect();
            if !untried.is_empty() {
                return Some(untried[rng.random_range(0..untried.len())]);
            }
            let total: u64 = arms.iter().map(|a| a.pulls).sum();
            let ln = (total.max(1) as f64).ln();
            arms.iter()
                .map(|a| a.reward / a.pulls as f64 + exploration * (ln / a.pulls as f64).sqrt())
                .collect()
        }
        BanditPolicy::Thompson => arms
            .iter()
            .map(|a| {
                let alpha = 1.0 + a.reward;
                let beta = 1.0 + (a.pulls as f64 - a.reward).max(0.0);
                sample_beta(rng, alpha, beta)
            })
            .collect(),
    };
    let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ties: Vec<usize> = (0..arms.len())
        .filter(|&i| scores[i] >= best - 1e-12)
        .collect();
    Some(ties[rng.random_range(0..ties.len())])
}

/// Picks an index in proportion to `weights` (non-positive weights never win); `None` when
/// no weight is positive.
pub fn weighted_index<R: Rng + ?Sized>(weights: &[f64], rng: &mut R) -> Option<usize> {
    let total: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mut x = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if !(w.is_finite() && *w > 0.0) {
            continue;
        }
        if x < *w {
            return Some(i);
        }
        x -= w;
    }
    weights.iter().rposition(|w| w.is_finite() && *w > 0.0)
}

fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    // Box–Muller.
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Gamma(shape, 1) by Marsaglia and Tsang.
fn sample_gamma<R: Rng + ?Sized>(rng: &mut R, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
        return sample_gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = standard_normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

fn sample_beta<R: Rng + ?Sized>(rng: &mut R, alpha: f64, beta: f64) -> f64 {
    let x = sample_gamma(rng, alpha);
    let y = sample_gamma(rng, beta);
    if x + y > 0.0 {
        x / (x + y)
    } else {
        0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn ucb_tries_every_arm_then_exploits() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let p = BanditPolicy::Ucb1 { exploration: 0.3 };
        let truth = [0.2, 0.8, 0.5];
        let mut arms = [ArmStats::default(); 3];
        let mut pulls = [0u32; 3];
        for _ in 0..300 {
            let i = choose_arm(p, &arms, &mut rng).unwrap();
            pulls[i] += 1;
            let r = if rng.random::<f64>() < truth[i] {
                1.0
            } else {
                0.0
            };
            arms[i].add(r);
        }
        assert!(pulls.iter().all(|&n| n > 0));
        assert!(pulls[1] > pulls[0] && pulls[1] > pulls[2], "{pulls:?}");
    }

    #[test]
    fn thompson_prefers_the_better_arm_and_is_seeded() {
        let arms = [
            ArmStats {
                pulls: 20,
                reward: 2.0,
            },
            ArmStats {
                pulls: 20,
                reward: 15.0,
            },
        ];
        let run = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..200)
                .filter(|_| choose_arm(BanditPolicy::Thompson, &arms, &mut rng) == Some(1))
                .count()
        };
        assert!(run(1) > 180);
        assert_eq!(run(7), run(7));
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for shape in [0.3, 1.0, 4.5] {
            let mean: f64 = (0..4000)
                .map(|_| sample_gamma(&mut rng, shape))
                .sum::<f64>()
                / 4000.0;
            assert!(
                (mean - shape).abs() < 0.15 * shape.max(1.0),
                "shape {shape}: mean {mean}"
            );
        }
    }

    #[test]
    fn weights() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        assert_eq!(weighted_index(&[0.0, -1.0], &mut rng), None);
        assert_eq!(weighted_index(&[0.0, 2.0], &mut rng), Some(1));
        let n = (0..1000)
            .filter(|_| weighted_index(&[3.0, 1.0], &mut rng) == Some(0))
            .count();
        assert!((650..850).contains(&n), "{n}");
        assert_eq!(choose_arm(BanditPolicy::Thompson, &[], &mut rng), None);
    }
}

//! A small random-forest regressor over value indices (the surrogate of SMAC-style model-based
//! search): bootstrap samples, axis-aligned splits `index ≤ threshold` chosen by squared-error
//! reduction over a random subset of the parameters, and a prediction whose spread across the
//! trees serves as the model's uncertainty.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Forest settings.
#[derive(Debug, Clone)]
pub(crate) struct ForestParams {
    pub(crate) trees: usize,
    /// Fraction of the features tried at each split.
    pub(crate) max_features: f64,
    /// Nodes with fewer samples are leaves.
    pub(crate) min_split: usize,
    pub(crate) max_depth: usize,
}

impl Default for ForestParams {
    fn default() -> Self {
        ForestParams {
            trees: 24,
            max_features: 0.5,
            min_split: 3,
            max_depth: 20,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Node {
    /// Feature tested, or `u16::MAX` for a leaf.
    feature: u16,
    /// Samples with `x[feature] <= threshold` go left.
    threshold: u16,
    left: u32,
    right: u32,
    value: f64,
}

#[derive(Debug, Clone, Default)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, x: &[u16]) -> f64 {
        let mut i = 0usize;
        loop {
            let n = &self.nodes[i];
            if n.feature == u16::MAX {
                return n.value;
            }
            i = if x[usize::from(n.feature)] <= n.threshold {
                n.left as usize
            } else {
                n.right as usize
            };
        }
    }
}

/// A fitted forest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Forest {
    trees: Vec<Tree>,
}

struct Builder<'a> {
    xs: &'a [Vec<u16>],
    y: &'a [f64],
    /// Number of values of each feature.
    sizes: &'a [usize],
    params: &'a ForestParams,
    sums: Vec<f64>,
    counts: Vec<usize>,
    features: Vec<usize>,
}

impl Builder<'_> {
    fn build(&mut self, tree: &mut Tree, idx: &mut [usize], depth: usize, rng: &mut ChaCha8Rng) {
        let n = idx.len();
        let mean = idx.iter().map(|&i| self.y[i]).sum::<f64>() / n.max(1) as f64;
        let at = tree.nodes.len();
        tree.nodes.push(Node {
            feature: u16::MAX,
            threshold: 0,
            left: 0,
            right: 0,
            value: mean,
        });
        if n < self.params.min_split || depth >= self.params.max_depth {
            return;
        }
        let d = self.sizes.len();
        self.features.clear();
        self.features.extend(0..d);
        self.features.shuffle(rng);
        let tries = ((d as f64 * self.params.max_features).ceil() as usize).clamp(1, d);
        let total: f64 = idx.iter().map(|&i| self.y[i]).sum();
        // Best split: largest gain in sum of squares, Σ²/n of the two sides.
        let base = total * total / n as f64;
        let mut best: Option<(usize, u16, f64)> = None;
        for t in 0..tries {
            let f = self.features[t];
            let m = self.sizes[f];
            if m < 2 {
                continue;
            }
            self.sums[..m].iter_mut().for_each(|s| *s = 0.0);
            self.counts[..m].iter_mut().for_each(|c| *c = 0);
            for &i in idx.iter() {
                let v = usize::from(self.xs[i][f]);
                self.sums[v] += self.y[i];
                self.counts[v] += 1;
            }
            let (mut sl, mut cl) = (0.0, 0usize);
            for v in 0..m - 1 {
                sl += self.sums[v];
                cl += self.counts[v];
                if cl == 0 || self.counts[v] == 0 {
                    continue;
                }
                if cl == n {
                    break;
                }
                let sr = total - sl;
                let cr = n - cl;
                let gain = sl * sl / cl as f64 + sr * sr / cr as f64 - base;
                // Ties broken at random so that equal splits do not all favour one feature.
                let gain = gain * (1.0 + 1e-9 * rng.random::<f64>());
                if gain > 1e-12 && best.is_none_or(|(_, _, g)| gain > g) {
                    best = Some((f, v as u16, gain));
                }
            }
        }
        let Some((f, thr, _)) = best else { return };
        // Partition in place.
        let mut lo = 0;
        for k in 0..n {
            if self.xs[idx[k]][f] <= thr {
                idx.swap(lo, k);
                lo += 1;
            }
        }
        let (left, right) = idx.split_at_mut(lo);
        let l_at = tree.nodes.len() as u32;
        self.build(tree, left, depth + 1, rng);
        let r_at = tree.nodes.len() as u32;
        self.build(tree, right, depth + 1, rng);
        let node = &mut tree.nodes[at];
        node.feature = f as u16;
        node.threshold = thr;
        node.left = l_at;
        node.right = r_at;
    }
}

impl Forest {
    /// Fits a forest to `xs` (value indices, one row per sample; feature `f` takes values below
    /// `sizes[f]`) and targets `y`.
    pub(crate) fn fit(
        xs: &[Vec<u16>],
        y: &[f64],
        sizes: &[usize],
        params: &ForestParams,
        rng: &mut ChaCha8Rng,
    ) -> Forest {
        let n = xs.len();
        if n == 0 {
            return Forest::default();
        }
        let vmax = sizes.iter().copied().max().unwrap_or(1).max(1);
        let mut b = Builder {
            xs,
            y,
            sizes,
            params,
            sums: vec![0.0; vmax],
            counts: vec![0; vmax],
            features: Vec::with_capacity(sizes.len()),
        };
        let mut trees = Vec::with_capacity(params.trees);
        let mut idx = vec![0usize; n];
        for _ in 0..params.trees {
            for v in idx.iter_mut() {
                *v = rng.random_range(0..n);
            }
            let mut tree = Tree {
                nodes: Vec::with_capacity(2 * n),
            };
            b.build(&mut tree, &mut idx, 0, rng);
            trees.push(tree);
        }
        Forest { trees }
    }

    /// Mean and standard deviation across the trees at `x`.
    pub(crate) fn predict(&self, x: &[u16]) -> (f64, f64) {
        let t = self.trees.len().max(1) as f64;
        let (mut s, mut s2) = (0.0, 0.0);
        for tree in &self.trees {
            let v = tree.predict(x);
            s += v;
            s2 += v * v;
        }
        let mean = s / t;
        let var = (s2 / t - mean * mean).max(0.0);
        (mean, var.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn forest_learns_a_step() {
        let xs: Vec<Vec<u16>> = (0..40)
            .map(|i| vec![(i % 8) as u16, (i / 8) as u16])
            .collect();
        let y: Vec<f64> = xs
            .iter()
            .map(|x| if x[0] >= 4 { 1.0 } else { 0.0 } + 0.1 * f64::from(x[1]))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let f = Forest::fit(&xs, &y, &[8, 5], &ForestParams::default(), &mut rng);
        let (lo, _) = f.predict(&[1, 0]);
        let (hi, _) = f.predict(&[6, 0]);
        assert!(lo < 0.2 && hi > 0.8, "{lo} {hi}");
    }
}

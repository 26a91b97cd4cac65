//! A small Gaussian-process regressor: Matérn-5/2 kernel with one length scale per feature
//! (ARD), hyperparameters fitted by maximising the log marginal likelihood (Adam in log space),
//! and incremental prediction over a fixed candidate set (each new observation adds one row to
//! the Cholesky factor and to the cached `L⁻¹ K(X, C)` in O(n·C)).

// Dense linear algebra reads best with explicit indices.
#![allow(clippy::needless_range_loop)]

const SQRT5: f64 = 2.236_067_977_499_79;

/// Hyperparameters, all in log space.
#[derive(Debug, Clone)]
pub(crate) struct Hyper {
    pub(crate) log_ls: Vec<f64>,
    pub(crate) log_sf2: f64,
    pub(crate) log_sn2: f64,
}

impl Hyper {
    pub(crate) fn initial(dims: usize) -> Self {
        Hyper {
            log_ls: vec![(0.5f64).ln(); dims],
            log_sf2: 0.0,
            log_sn2: (1e-2f64).ln(),
        }
    }

    fn clamp(&mut self) {
        for l in &mut self.log_ls {
            *l = l.clamp((0.04f64).ln(), (30.0f64).ln());
        }
        self.log_sf2 = self.log_sf2.clamp((0.05f64).ln(), (20.0f64).ln());
        self.log_sn2 = self.log_sn2.clamp((1e-5f64).ln(), (0.3f64).ln());
    }
}

/// Matérn-5/2 kernel value and, optionally, the per-dimension scaled squared distances.
#[inline]
fn matern(a: &[f64], b: &[f64], inv_ls: &[f64], sf2: f64) -> f64 {
    let mut r2 = 0.0;
    for k in 0..a.len() {
        let t = (a[k] - b[k]) * inv_ls[k];
        r2 += t * t;
    }
    let r = r2.sqrt();
    sf2 * (1.0 + SQRT5 * r + 5.0 / 3.0 * r2) * (-SQRT5 * r).exp()
}

/// In-place Cholesky of a symmetric positive-definite n×n row-major matrix (lower triangle).
/// Returns false when it is not positive definite.
fn cholesky(a: &mut [f64], n: usize) -> bool {
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= a[j * n + k] * a[j * n + k];
        }
        if s.is_nan() || s <= 0.0 {
            return false;
        }
        let d = s.sqrt();
        a[j * n + j] = d;
        for i in (j + 1)..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
        for k in (j + 1)..n {
            a[j * n + k] = 0.0;
        }
    }
    true
}

/// Solves L x = b (forward substitution), L lower-triangular row-major.
fn forward(l: &[f64], n: usize, b: &mut [f64]) {
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * n + k] * b[k];
        }
        b[i] = s / l[i * n + i];
    }
}

/// Solves Lᵀ x = b (back substitution).
fn backward(l: &[f64], n: usize, b: &mut [f64]) {
    for i in (0..n).rev() {
        let mut s = b[i];
        for k in (i + 1)..n {
            s -= l[k * n + i] * b[k];
        }
        b[i] = s / l[i * n + i];
    }
}

/// Kernel matrix with noise on the diagonal and jitter.
fn gram(x: &[Vec<f64>], h: &Hyper) -> Vec<f64> {
    let n = x.len();
    let inv: Vec<f64> = h.log_ls.iter().map(|l| (-l).exp()).collect();
    let sf2 = h.log_sf2.exp();
    let sn2 = h.log_sn2.exp();
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = matern(&x[i], &x[j], &inv, sf2);
            k[i * n + j] = v;
            k[j * n + i] = v;
        }
        k[i * n + i] += sn2 + 1e-8;
    }
    k
}

/// Negative log marginal likelihood (plus weak log-normal priors on the length scales) and its
/// gradient in the log hyperparameters.
fn nlml_grad(x: &[Vec<f64>], y: &[f64], h: &Hyper) -> Option<(f64, Hyper)> {
    let n = x.len();
    let d = h.log_ls.len();
    let mut l = gram(x, h);
    if !cholesky(&mut l, n) {
        return None;
    }
    let mut alpha = y.to_vec();
    forward(&l, n, &mut alpha);
    let logdet: f64 = (0..n).map(|i| l[i * n + i].ln()).sum::<f64>() * 2.0;
    let fit: f64 = alpha.iter().map(|a| a * a).sum();
    backward(&l, n, &mut alpha);
    // K⁻¹ column by column.
    let mut kinv = vec![0.0; n * n];
    let mut e = vec![0.0; n];
    for j in 0..n {
        e.iter_mut().for_each(|v| *v = 0.0);
        e[j] = 1.0;
        forward(&l, n, &mut e);
        backward(&l, n, &mut e);
        for i in 0..n {
            kinv[i * n + j] = e[i];
        }
    }
    // W = α αᵀ − K⁻¹; gradient of −log p is −½ tr(W dK).
    let inv: Vec<f64> = h.log_ls.iter().map(|l| (-l).exp()).collect();
    let sf2 = h.log_sf2.exp();
    let sn2 = h.log_sn2.exp();
    let mut g_ls = vec![0.0; d];
    let mut g_sf = 0.0;
    let mut g_sn = 0.0;
    for i in 0..n {
        for j in 0..n {
            let w = alpha[i] * alpha[j] - kinv[i * n + j];
            let mut r2 = 0.0;
            for k in 0..d {
                let t = (x[i][k] - x[j][k]) * inv[k];
                r2 += t * t;
            }
            let r = r2.sqrt();
            let ex = (-SQRT5 * r).exp();
            let kf = sf2 * (1.0 + SQRT5 * r + 5.0 / 3.0 * r2) * ex;
            g_sf += w * kf;
            if i == j {
                g_sn += w * sn2;
            } else {
                let common = sf2 * 5.0 / 3.0 * (1.0 + SQRT5 * r) * ex;
                for k in 0..d {
                    let t = (x[i][k] - x[j][k]) * inv[k];
                    g_ls[k] += w * common * t * t;
                }
            }
        }
    }
    // Priors: log ls ~ N(ln 0.5, 1.5²) and log sn2 ~ N(ln 1e-2, 2²), to keep small samples sane.
    let (mu_ls, s_ls) = ((0.5f64).ln(), 1.5f64);
    let (mu_sn, s_sn) = ((1e-2f64).ln(), 2.0f64);
    let mut value = 0.5 * fit + 0.5 * logdet;
    let mut grad = Hyper {
        log_ls: g_ls.iter().map(|g| -0.5 * g).collect(),
        log_sf2: -0.5 * g_sf,
        log_sn2: -0.5 * g_sn,
    };
    for k in 0..d {
        let z = (h.log_ls[k] - mu_ls) / s_ls;
        value += 0.5 * z * z;
        grad.log_ls[k] += z / s_ls;
    }
    let z = (h.log_sn2 - mu_sn) / s_sn;
    value += 0.5 * z * z;
    grad.log_sn2 += z / s_sn;
    Some((value, grad))
}

/// Fits hyperparameters by Adam on the negative log marginal likelihood, from `start`.
pub(crate) fn fit(x: &[Vec<f64>], y: &[f64], start: &Hyper, steps: usize) -> Hyper {
    let mut h = start.clone();
    h.clamp();
    let d = h.log_ls.len();
    let p = d + 2;
    let (mut m, mut v) = (vec![0.0; p], vec![0.0; p]);
    let (b1, b2, lr) = (0.9f64, 0.999f64, 0.08f64);
    let mut best = h.clone();
    let mut best_val = f64::INFINITY;
    for t in 1..=steps {
        let Some((val, g)) = nlml_grad(x, y, &h) else {
            // Not positive definite: more noise.
            h.log_sn2 += 1.0;
            h.clamp();
            continue;
        };
        if val < best_val {
            best_val = val;
            best = h.clone();
        }
        let grads: Vec<f64> = g
            .log_ls
            .iter()
            .copied()
            .chain([g.log_sf2, g.log_sn2])
            .collect();
        let mut params: Vec<f64> = h
            .log_ls
            .iter()
            .copied()
            .chain([h.log_sf2, h.log_sn2])
            .collect();
        for i in 0..p {
            let gi = if grads[i].is_finite() { grads[i] } else { 0.0 };
            m[i] = b1 * m[i] + (1.0 - b1) * gi;
            v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
            let mh = m[i] / (1.0 - b1.powi(t as i32));
            let vh = v[i] / (1.0 - b2.powi(t as i32));
            params[i] -= lr * mh / (vh.sqrt() + 1e-8);
        }
        h.log_ls.copy_from_slice(&params[..d]);
        h.log_sf2 = params[d];
        h.log_sn2 = params[d + 1];
        h.clamp();
    }
    if let Some((val, _)) = nlml_grad(x, y, &h) {
        if val < best_val {
            best = h;
        }
    }
    best
}

/// A GP conditioned on observations, with cached predictions over a fixed candidate set.
#[derive(Debug)]
pub(crate) struct CandidateGp {
    hyper: Hyper,
    inv_ls: Vec<f64>,
    sf2: f64,
    sn2: f64,
    /// Training inputs.
    x: Vec<Vec<f64>>,
    /// Lower Cholesky factor, row-major with capacity `cap`.
    l: Vec<f64>,
    cap: usize,
    /// `L⁻¹ K(X, C)`: row i holds C values (single precision: this is the large, streamed
    /// matrix; predictions accumulate in double precision).
    v: Vec<Vec<f32>>,
    /// Per candidate, Σᵢ V[i][c]².
    vsq: Vec<f64>,
    /// Candidate features.
    cands: Vec<Vec<f64>>,
}

impl CandidateGp {
    /// A GP with `hyper`, no observations, over `cands`.
    pub(crate) fn new(hyper: Hyper, cands: Vec<Vec<f64>>, cap: usize) -> Self {
        let inv_ls = hyper.log_ls.iter().map(|l| (-l).exp()).collect();
        let sf2 = hyper.log_sf2.exp();
        let sn2 = hyper.log_sn2.exp();
        let n_c = cands.len();
        CandidateGp {
            hyper,
            inv_ls,
            sf2,
            sn2,
            x: Vec::new(),
            l: vec![0.0; cap * cap],
            cap,
            v: Vec::new(),
            vsq: vec![0.0; n_c],
            cands,
        }
    }

    pub(crate) fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    pub(crate) fn len(&self) -> usize {
        self.x.len()
    }

    /// Adds one training input (targets are supplied at prediction time). Returns false when
    /// the capacity is reached or the factor would not be positive definite.
    pub(crate) fn add(&mut self, x: Vec<f64>) -> bool {
        let n = self.x.len();
        if n >= self.cap {
            return false;
        }
        let cap = self.cap;
        // l = L⁻¹ k(X, x)
        let mut kvec: Vec<f64> = self
            .x
            .iter()
            .map(|xi| matern(xi, &x, &self.inv_ls, self.sf2))
            .collect();
        for i in 0..n {
            let mut s = kvec[i];
            for k in 0..i {
                s -= self.l[i * cap + k] * kvec[k];
            }
            kvec[i] = s / self.l[i * cap + i];
        }
        let kxx = self.sf2 + self.sn2 + 1e-8;
        let d2 = kxx - kvec.iter().map(|v| v * v).sum::<f64>();
        let d = d2.max(1e-10).sqrt();
        for (k, val) in kvec.iter().enumerate() {
            self.l[n * cap + k] = *val;
        }
        self.l[n * cap + n] = d;
        // New row of V: (k(x, C) − lᵀ V) / d.
        let mut row: Vec<f64> = self
            .cands
            .iter()
            .map(|c| matern(c, &x, &self.inv_ls, self.sf2))
            .collect();
        for (k, lk) in kvec.iter().enumerate() {
            if *lk != 0.0 {
                let vk = &self.v[k];
                for (r, vv) in row.iter_mut().zip(vk) {
                    *r -= lk * f64::from(*vv);
                }
            }
        }
        for (r, s) in row.iter_mut().zip(self.vsq.iter_mut()) {
            *r /= d;
            *s += *r * *r;
        }
        self.v.push(row.iter().map(|r| *r as f32).collect());
        self.x.push(x);
        true
    }

    /// Posterior mean and standard deviation at every candidate for targets `y` (aligned with
    /// the added inputs, already centred and scaled).
    pub(crate) fn predict(&self, y: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let n = self.x.len().min(y.len());
        let cap = self.cap;
        let mut z = y[..n].to_vec();
        for i in 0..n {
            let mut s = z[i];
            for k in 0..i {
                s -= self.l[i * cap + k] * z[k];
            }
            z[i] = s / self.l[i * cap + i];
        }
        let mut mean = vec![0.0; self.cands.len()];
        for (i, zi) in z.iter().enumerate() {
            let vi = &self.v[i];
            for (m, vv) in mean.iter_mut().zip(vi) {
                *m += zi * f64::from(*vv);
            }
        }
        let sd = self
            .vsq
            .iter()
            .map(|s| (self.sf2 - s).max(1e-12).sqrt())
            .collect();
        (mean, sd)
    }
}

/// Standard normal density.
pub(crate) fn npdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Standard normal distribution function (erfc approximation, relative error < 1.2e-7).
pub(crate) fn ncdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Expected improvement below `best` for a normal posterior.
pub(crate) fn expected_improvement(mean: f64, sd: f64, best: f64, xi: f64) -> f64 {
    if sd <= 1e-12 {
        return (best - mean - xi).max(0.0);
    }
    let z = (best - mean - xi) / sd;
    (best - mean - xi) * ncdf(z) + sd * npdf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_accurate() {
        assert!((ncdf(0.0) - 0.5).abs() < 1e-7);
        assert!((ncdf(1.96) - 0.975).abs() < 1e-4);
        assert!((ncdf(-1.96) - 0.025).abs() < 1e-4);
    }

    #[test]
    fn gp_interpolates() {
        let xs: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64 / 7.0]).collect();
        let ys: Vec<f64> = xs.iter().map(|x| (x[0] * 6.0).sin()).collect();
        let h = fit(&xs, &ys, &Hyper::initial(1), 60);
        let mut gp = CandidateGp::new(h, xs.clone(), 16);
        for x in &xs {
            assert!(gp.add(x.clone()));
        }
        let (m, s) = gp.predict(&ys);
        for i in 0..8 {
            assert!((m[i] - ys[i]).abs() < 0.1, "{} vs {}", m[i], ys[i]);
            assert!(s[i] < 0.3);
        }
    }
}

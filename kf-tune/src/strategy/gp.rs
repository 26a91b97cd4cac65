//! A small Gaussian-process regressor: Matérn-5/2 kernel with one length scale per feature
//! (ARD), hyperparameters fitted by maximising the log marginal likelihood (Adam in log space),
//! and incremental prediction over a fixed candidate set (each new observation adds one row to
//! the Cholesky factor and to the cached `L⁻¹ K(X, C)` in O(n·C)).

// Dense linear algebra reads best with explicit indices.
#![allow(clippy::needless_range_loop)]

use kf_core::noise::erfc;

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

/// Negative log marginal likelihood (plus weak log-normal priors on the length scales) and its
/// gradient in the log hyperparameters.
fn nlml_grad(x: &[Vec<f64>], y: &[f64], h: &Hyper) -> Option<(f64, Hyper)> {
    let n = x.len();
    let d = h.log_ls.len();
    let inv: Vec<f64> = h.log_ls.iter().map(|l| (-l).exp()).collect();
    let sf2 = h.log_sf2.exp();
    let sn2 = h.log_sn2.exp();
    // Kernel matrix (lower triangle), keeping r and exp(−√5 r) of each pair for the gradient.
    let mut l = vec![0.0; n * n];
    let mut rs = vec![0.0; n * n];
    let mut exs = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..i {
            let mut r2 = 0.0;
            for k in 0..d {
                let t = (x[i][k] - x[j][k]) * inv[k];
                r2 += t * t;
            }
            let r = r2.sqrt();
            let ex = (-SQRT5 * r).exp();
            rs[i * n + j] = r;
            exs[i * n + j] = ex;
            l[i * n + j] = sf2 * (1.0 + SQRT5 * r + 5.0 / 3.0 * r2) * ex;
        }
        l[i * n + i] = sf2 + sn2 + 1e-8;
    }
    if !cholesky(&mut l, n) {
        return None;
    }
    let mut alpha = y.to_vec();
    forward(&l, n, &mut alpha);
    let logdet: f64 = (0..n).map(|i| l[i * n + i].ln()).sum::<f64>() * 2.0;
    let fit: f64 = alpha.iter().map(|a| a * a).sum();
    backward(&l, n, &mut alpha);
    // L⁻¹ (lower triangular, row-major), then K⁻¹ = L⁻ᵀ L⁻¹ (lower triangle).
    let mut li = vec![0.0; n * n];
    for i in 0..n {
        let inv_d = 1.0 / l[i * n + i];
        li[i * n + i] = inv_d;
        for j in 0..i {
            let mut s = 0.0;
            for k in j..i {
                s += l[i * n + k] * li[k * n + j];
            }
            li[i * n + j] = -s * inv_d;
        }
    }
    let mut kinv = vec![0.0; n * n];
    for k in 0..n {
        let row = &li[k * n..k * n + k + 1];
        for i in 0..=k {
            let ri = row[i];
            if ri == 0.0 {
                continue;
            }
            let out = &mut kinv[i * n..i * n + i + 1];
            for (o, rj) in out.iter_mut().zip(&row[..=i]) {
                *o += ri * rj;
            }
        }
    }
    // W = α αᵀ − K⁻¹; gradient of −log p is −½ tr(W dK) (pairs counted twice by symmetry).
    let mut g_ls = vec![0.0; d];
    let mut g_sf = 0.0;
    let mut g_sn = 0.0;
    for i in 0..n {
        let w = alpha[i] * alpha[i] - kinv[i * n + i];
        g_sf += w * sf2;
        g_sn += w * sn2;
        for j in 0..i {
            let w = 2.0 * (alpha[i] * alpha[j] - kinv[i * n + j]);
            let r = rs[i * n + j];
            let ex = exs[i * n + j];
            g_sf += w * sf2 * (1.0 + SQRT5 * r + 5.0 / 3.0 * r * r) * ex;
            let common = w * sf2 * 5.0 / 3.0 * (1.0 + SQRT5 * r) * ex;
            for k in 0..d {
                let t = (x[i][k] - x[j][k]) * inv[k];
                g_ls[k] += common * t * t;
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
///
/// Targets enter as raw values (or failures) and are standardised at prediction time: because the
/// posterior mean is linear in the targets, the tuner keeps `Σᵢ zᵢ V[i]` for three basis target
/// vectors (the raw values with 0 for failures, the failure indicator, and ones), so a prediction
/// with any standardisation and any imputed failure value costs O(candidates).
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
    /// Basis target vectors (raw value or 0, failure indicator, 1) per observation.
    basis: [Vec<f64>; 3],
    /// `L⁻¹` applied to each basis vector.
    z: [Vec<f64>; 3],
    /// Per candidate, `Σᵢ z[b][i] V[i][c]` for each basis vector b.
    acc: [Vec<f64>; 3],
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
            basis: Default::default(),
            z: Default::default(),
            acc: [vec![0.0; n_c], vec![0.0; n_c], vec![0.0; n_c]],
        }
    }

    pub(crate) fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    /// The prior correlation (0 to 1) between candidate `i` and a point with features `x`.
    pub(crate) fn correlation(&self, i: usize, x: &[f64]) -> f64 {
        matern(&self.cands[i], x, &self.inv_ls, 1.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.x.len()
    }

    /// Adds one observation: its input and raw target (`None`: a failure, whose value is
    /// supplied at prediction time). Returns false when the capacity is reached.
    pub(crate) fn add(&mut self, x: Vec<f64>, target: Option<f64>) -> bool {
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
        // New entries of z = L⁻¹ y for each basis target vector (earlier entries are unchanged).
        let values = [
            target.unwrap_or(0.0),
            f64::from(u8::from(target.is_none())),
            1.0,
        ];
        let mut zn = [0.0; 3];
        for b in 0..3 {
            self.basis[b].push(values[b]);
            let s: f64 = kvec.iter().zip(&self.z[b]).map(|(l, z)| l * z).sum();
            zn[b] = (values[b] - s) / d;
            self.z[b].push(zn[b]);
        }
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
        let [a0, a1, a2] = &mut self.acc;
        for (c, (r, s)) in row.iter_mut().zip(self.vsq.iter_mut()).enumerate() {
            *r /= d;
            *s += *r * *r;
            a0[c] += zn[0] * *r;
            a1[c] += zn[1] * *r;
            a2[c] += zn[2] * *r;
        }
        self.v.push(row.iter().map(|r| *r as f32).collect());
        self.x.push(x);
        true
    }

    /// Posterior mean at every candidate for the standardised targets
    /// `(raw − shift) / scale`, failures counting as `fail` (raw units).
    pub(crate) fn mean(&self, shift: f64, scale: f64, fail: f64) -> Vec<f64> {
        let inv = 1.0 / scale;
        self.acc[0]
            .iter()
            .zip(&self.acc[1])
            .zip(&self.acc[2])
            .map(|((r, f), o)| (r + fail * f - shift * o) * inv)
            .collect()
    }

    /// Posterior mean and standard deviation at candidate `i` (standardised units, as
    /// [`CandidateGp::mean`] and [`CandidateGp::sd`]).
    pub(crate) fn at(&self, i: usize, shift: f64, scale: f64, fail: f64) -> (f64, f64) {
        let m = (self.acc[0][i] + fail * self.acc[1][i] - shift * self.acc[2][i]) / scale;
        (m, (self.sf2 - self.vsq[i]).max(1e-12).sqrt())
    }

    /// Posterior standard deviation at every candidate (standardised units).
    pub(crate) fn sd(&self) -> Vec<f64> {
        self.vsq
            .iter()
            .map(|s| (self.sf2 - s).max(1e-12).sqrt())
            .collect()
    }

    /// Posterior mean and standard deviation at every candidate for targets `y` (aligned with
    /// the added inputs, already centred and scaled).
    #[cfg(test)]
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
        (mean, self.sd())
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
        for (x, y) in xs.iter().zip(&ys) {
            assert!(gp.add(x.clone(), Some(*y)));
        }
        let (m, s) = gp.predict(&ys);
        let fast = gp.mean(0.0, 1.0, 0.0);
        for i in 0..8 {
            assert!((m[i] - ys[i]).abs() < 0.1, "{} vs {}", m[i], ys[i]);
            assert!((fast[i] - m[i]).abs() < 1e-4);
            assert!(s[i] < 0.3);
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let xs: Vec<Vec<f64>> = (0..12)
            .map(|i| vec![(i % 4) as f64 / 3.0, (i / 4) as f64 / 2.0])
            .collect();
        let ys: Vec<f64> = xs.iter().map(|x| (x[0] * 3.0).sin() + x[1]).collect();
        let h = Hyper {
            log_ls: vec![-0.4, 0.3],
            log_sf2: 0.2,
            log_sn2: -3.0,
        };
        let (_, g) = nlml_grad(&xs, &ys, &h).unwrap();
        let eps = 1e-5;
        let at = |f: &dyn Fn(&mut Hyper)| {
            let mut p = h.clone();
            f(&mut p);
            nlml_grad(&xs, &ys, &p).unwrap().0
        };
        for k in 0..2 {
            let num = (at(&|p| p.log_ls[k] += eps) - at(&|p| p.log_ls[k] -= eps)) / (2.0 * eps);
            assert!(
                (num - g.log_ls[k]).abs() < 1e-4,
                "ls {k}: {num} vs {}",
                g.log_ls[k]
            );
        }
        let num = (at(&|p| p.log_sf2 += eps) - at(&|p| p.log_sf2 -= eps)) / (2.0 * eps);
        assert!((num - g.log_sf2).abs() < 1e-4);
        let num = (at(&|p| p.log_sn2 += eps) - at(&|p| p.log_sn2 -= eps)) / (2.0 * eps);
        assert!((num - g.log_sn2).abs() < 1e-4);
    }
}

//! The dispatch rule: which tuned configuration serves a caller (the caller's device first,
//! then the nearest tuned sizes by `Σ |ln(caller / tuned)|`, ties to the larger sizes).

/// One tuned configuration as the dispatch rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Device name the configuration was tuned on.
    pub device: &'a str,
    /// Driver version it was tuned with, when the run recorded it.
    pub driver: Option<&'a str>,
    /// Sizes it was tuned at, by name.
    pub sizes: &'a [(&'a str, i64)],
    /// Whether its manifest constraints hold at the caller's sizes on the caller's device.
    pub valid: bool,
}

/// The call: the caller's device and sizes.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The caller's device name.
    pub device: &'a str,
    /// The caller's driver version.
    pub driver: &'a str,
    /// The caller's sizes, by name.
    pub sizes: &'a [(&'a str, i64)],
}

/// How well a configuration's device matches the caller's: 0 same name and driver (or a driver
/// the run did not record), 1 same name and another driver, 2 another device.
pub fn device_tier(candidate: &Candidate<'_>, caller: &Caller<'_>) -> u8 {
    if candidate.device.trim() != caller.device.trim() {
        return 2;
    }
    match candidate.driver {
        Some(d) if d.trim() != caller.driver.trim() => 1,
        _ => 0,
    }
}

/// The distance between the caller's sizes and tuned sizes: the sum over the caller's size
/// names of `|ln(caller / tuned)|` (a name the configuration did not record adds nothing; a
/// size that is not positive makes the distance infinite).
pub fn distance(caller: &[(&str, i64)], tuned: &[(&str, i64)]) -> f64 {
    let mut total = 0.0;
    for (name, value) in caller {
        let Some((_, t)) = tuned.iter().find(|(n, _)| n == name) else {
            continue;
        };
        if *value <= 0 || *t <= 0 {
            return f64::INFINITY;
        }
        total += (*value as f64 / *t as f64).ln().abs();
    }
    total
}

/// The sum of the logarithms of tuned sizes: the tie-break prefers the larger.
fn log_volume(sizes: &[(&str, i64)]) -> f64 {
    sizes.iter().map(|(_, v)| (*v.max(&1) as f64).ln()).sum()
}

/// The index of the configuration that serves `caller`, or `None` when no candidate is valid:
/// among the valid candidates, the best [`device_tier`], then the smallest [`distance`]
/// (distances within rounding of each other tie), then the larger tuned sizes, then the
/// earlier candidate.
pub fn choose(candidates: &[Candidate<'_>], caller: &Caller<'_>) -> Option<usize> {
    let mut best: Option<(usize, u8, f64, f64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        if !c.valid {
            continue;
        }
        let tier = device_tier(c, caller);
        let dist = distance(caller.sizes, c.sizes);
        let volume = log_volume(c.sizes);
        let better = match best {
            None => true,
            Some((_, bt, bd, bv)) => {
                let tol = 1e-9 * (1.0 + bd.abs());
                tier < bt
                    || (tier == bt
                        && (dist < bd - tol || ((dist - bd).abs() <= tol && volume > bv)))
            }
        };
        if better {
            best = Some((i, tier, dist, volume));
        }
    }
    best.map(|(i, ..)| i)
}

//! The dispatch rule: which tuned configuration serves a call.
//!
//! Among the configurations whose manifest constraints hold at the caller's sizes (`valid`),
//! the call takes one from the caller's device if there is one (same device name, and same
//! driver where the run recorded it; then same name with another driver; else any device),
//! and among those the one tuned at the nearest sizes: the distance is the sum over the size
//! names of `|ln(caller / tuned)|`, ties go to the larger tuned sizes, then to the earlier
//! configuration. The rule is [`crate::runtime::choose`], the code every exported crate runs;
//! this module names it for the export and adds what the generated docs print.

pub use crate::kf_runtime::{device_tier, Caller, Candidate};

/// The distance between the caller's sizes and tuned sizes ([`crate::runtime::distance`]).
///
/// ```
/// use kf_export::dispatch::distance;
/// let d = distance(&[("M", 128), ("N", 64)], &[("M", 64), ("N", 64)]);
/// assert!((d - 2f64.ln()).abs() < 1e-12);
/// ```
pub fn distance(caller: &[(&str, i64)], tuned: &[(&str, i64)]) -> f64 {
    crate::kf_runtime::distance(caller, tuned)
}

/// The index of the configuration that serves `caller`, or `None` when no candidate is valid
/// ([`crate::runtime::choose`], which exported crates run).
///
/// ```
/// use kf_export::dispatch::{choose, Caller, Candidate};
/// let small = [("N", 64)];
/// let large = [("N", 256)];
/// let table = [
///     Candidate { device: "gpu", driver: None, sizes: &small, valid: true },
///     Candidate { device: "gpu", driver: None, sizes: &large, valid: true },
/// ];
/// let at = |n| choose(&table, &Caller { device: "gpu", driver: "1.0", sizes: &[("N", n)] });
/// assert_eq!(at(64), Some(0));
/// assert_eq!(at(100), Some(0)); // ln(100/64) < ln(256/100)
/// assert_eq!(at(128), Some(1)); // equally far: the larger tuned size
/// assert_eq!(at(4096), Some(1));
/// ```
pub fn choose(candidates: &[Candidate<'_>], caller: &Caller<'_>) -> Option<usize> {
    crate::kf_runtime::choose(candidates, caller)
}

/// Where each configuration serves along the diagonal (every size name set to `n`), for
/// `n` in `1..=limit`, when every configuration is valid: `(index, first n, last n)` runs in
/// increasing `n`. The generated docs print these for each device of the table.
pub fn diagonal_regions(
    candidates: &[Candidate<'_>],
    device: &str,
    driver: &str,
    names: &[&str],
    limit: i64,
) -> Vec<(usize, i64, i64)> {
    let mut out: Vec<(usize, i64, i64)> = Vec::new();
    let all_valid: Vec<Candidate<'_>> = candidates
        .iter()
        .map(|c| Candidate { valid: true, ..*c })
        .collect();
    let mut sizes: Vec<(&str, i64)> = names.iter().map(|n| (*n, 1)).collect();
    for n in 1..=limit {
        for s in &mut sizes {
            s.1 = n;
        }
        let caller = Caller {
            device,
            driver,
            sizes: &sizes,
        };
        let Some(i) = choose(&all_valid, &caller) else {
            continue;
        };
        match out.last_mut() {
            Some(last) if last.0 == i && last.2 == n - 1 => last.2 = n,
            _ => out.push((i, n, n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand<'a>(device: &'a str, sizes: &'a [(&'a str, i64)], valid: bool) -> Candidate<'a> {
        Candidate {
            device,
            driver: None,
            sizes,
            valid,
        }
    }

    const S64: [(&str, i64); 3] = [("M", 64), ("N", 64), ("K", 64)];
    const S256: [(&str, i64); 3] = [("M", 256), ("N", 256), ("K", 256)];

    fn cube(n: i64) -> [(&'static str, i64); 3] {
        [("M", n), ("N", n), ("K", n)]
    }

    fn pick(table: &[Candidate<'_>], device: &str, n: i64) -> Option<usize> {
        choose(
            table,
            &Caller {
                device,
                driver: "d1",
                sizes: &cube(n),
            },
        )
    }

    #[test]
    fn each_tuned_size_gets_its_own_configuration_and_between_them_the_nearer() {
        let table = [cand("cpu", &S64, true), cand("cpu", &S256, true)];
        assert_eq!(pick(&table, "cpu", 64), Some(0));
        assert_eq!(pick(&table, "cpu", 256), Some(1));
        assert_eq!(pick(&table, "cpu", 100), Some(0));
        assert_eq!(pick(&table, "cpu", 192), Some(1));
        // The geometric mean is equally far from both: the larger tuned size wins.
        assert_eq!(pick(&table, "cpu", 128), Some(1));
        assert_eq!(pick(&table, "cpu", 1), Some(0));
    }

    #[test]
    fn an_invalid_configuration_is_passed_over_and_none_valid_is_none() {
        let table = [cand("cpu", &S64, true), cand("cpu", &S256, false)];
        assert_eq!(pick(&table, "cpu", 256), Some(0));
        let none = [cand("cpu", &S64, false)];
        assert_eq!(pick(&none, "cpu", 64), None);
        assert_eq!(pick(&[], "cpu", 64), None);
    }

    #[test]
    fn the_callers_device_wins_over_nearer_sizes_elsewhere() {
        let table = [cand("gpu", &S64, true), cand("cpu", &S256, true)];
        assert_eq!(pick(&table, "cpu", 64), Some(1));
        assert_eq!(pick(&table, "gpu", 256), Some(0));
        // An unknown device: nearest sizes over every device.
        assert_eq!(pick(&table, "npu", 64), Some(0));
        assert_eq!(pick(&table, "npu", 256), Some(1));
        // The caller's device but invalid: any valid device.
        let table = [cand("gpu", &S64, true), cand("cpu", &S256, false)];
        assert_eq!(pick(&table, "cpu", 256), Some(0));
    }

    #[test]
    fn a_recorded_driver_that_differs_ranks_below_a_matching_one() {
        let old = Candidate {
            driver: Some("d0"),
            ..cand("cpu", &S64, true)
        };
        let same = Candidate {
            driver: Some("d1"),
            ..cand("cpu", &S256, true)
        };
        assert_eq!(pick(&[old, same], "cpu", 64), Some(1));
        assert_eq!(pick(&[old, cand("gpu", &S64, true)], "cpu", 64), Some(0));
    }

    #[test]
    fn distance_is_symmetric_in_log_and_ignores_unrecorded_names() {
        let d1 = distance(&cube(128), &S64);
        let d2 = distance(&cube(128), &S256);
        assert!((d1 - d2).abs() < 1e-12);
        assert_eq!(distance(&[("X", 5)], &S64), 0.0);
        assert!(distance(&cube(0), &S64).is_infinite());
    }

    #[test]
    fn regions_along_the_diagonal_switch_at_the_geometric_mean() {
        let table = [cand("cpu", &S64, true), cand("cpu", &S256, true)];
        let r = diagonal_regions(&table, "cpu", "", &["M", "N", "K"], 1000);
        assert_eq!(r, vec![(0, 1, 127), (1, 128, 1000)]);
    }
}

//! Output checks: poison, guard regions, unchanged inputs, and closeness to the reference.

use kf_core::{CorrectnessReport, Tolerance};

use crate::element::Dtype;
use crate::task::host::HostBuffer;
pub use crate::task::Accumulation;

pub use crate::element::POISON_BITS;

/// The byte pattern of guard regions around every buffer.
pub const GUARD_BYTE: u8 = 0xA5;

/// The poison value as a float.
pub fn poison() -> f32 {
    f32::from_bits(POISON_BITS)
}

/// Floats as native-endian bytes.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Native-endian bytes as floats (a trailing partial float is ignored).
pub fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Why an output is not acceptable.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Within tolerance.
    Close(CorrectnessReport),
    /// Some elements were never written.
    Unwritten {
        /// How many elements still hold the poison.
        count: usize,
        /// The first of them.
        first: usize,
        /// Total elements.
        total: usize,
    },
    /// NaN or Inf produced by the kernel.
    NonFinite {
        /// How many.
        count: usize,
        /// The first.
        first: usize,
    },
    /// Finite but wrong.
    Mismatch(CorrectnessReport),
}

/// The tolerance for a buffer of `dtype`, from the task's (f32) tolerance:
///
/// * f32: unchanged.
/// * f16: the reference is rounded to f16 before comparing (so it carries the same final
///   rounding as any correct kernel), and the element-wise rule is floored at `atol = 2^-10`
///   (one f16 ulp at 1.0) and `rtol = 2^-8` (four ulps relative: a kernel that computes in
///   half accumulates a few roundings, which fp32's 1e-4 would reject). The aggregate rule
///   (fraction within `relative_threshold`, cosine) stays as given.
/// * i32: exact (`atol = rtol = 0`).
pub fn tolerance_for(dtype: Dtype, base: &Tolerance) -> Tolerance {
    match dtype {
        Dtype::F32 => base.clone(),
        Dtype::F16 => Tolerance {
            atol: base.atol.max(F16_ATOL),
            rtol: base.rtol.max(F16_RTOL),
            ..base.clone()
        },
        Dtype::I32 => Tolerance {
            atol: 0.0,
            rtol: 0.0,
            relative_threshold: 0.0,
            ..base.clone()
        },
    }
}

/// The floor of `atol` for f16 buffers: 2^-10.
pub const F16_ATOL: f64 = 1.0 / 1024.0;
/// The floor of `rtol` for f16 buffers: 2^-8.
pub const F16_RTOL: f64 = 1.0 / 256.0;

/// The unit roundoff of f32 arithmetic, `u = 2^-24`.
pub const F32_UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;
/// The unit roundoff of f16 arithmetic, `u = 2^-11`.
pub const F16_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;

/// Higham's `γ_k = k·u / (1 − k·u)` for `k` floating-point operations of unit roundoff `u`;
/// infinite once `k·u ≥ 1` (no bound is possible there).
pub fn gamma(k: u64, unit_roundoff: f64) -> f64 {
    let ku = k as f64 * unit_roundoff;
    if ku >= 1.0 {
        f64::INFINITY
    } else {
        ku / (1.0 - ku)
    }
}

/// The accumulation rule: the extra absolute error allowed, per element, in an output that
/// sums `n = acc.length` terms.
///
/// A sum of `n` floating-point terms computed in **any** order (sequentially, pairwise, in a
/// tree of work-group partial sums, with or without fused multiply-adds) satisfies
/// `|ŝ − s| ≤ γ_{n−1} · Σ|x_i|` (Higham, *Accuracy and Stability of Numerical Algorithms*,
/// §4.2; a dot product of length `n`, products included, within `γ_n · Σ|a_i b_i|`, §3.1), `u`
/// being the unit roundoff of the accumulation: 2^-24 for f32 outputs, 2^-11 for f16 ones (a
/// kernel may accumulate in half). So an element may differ from the reference by
/// `atol + rtol·|ref|` (the task's element-wise rule) **plus** `γ_n · Σ|x_i|` (`γ_n`, which
/// covers sums and dot products alike), with `Σ|x_i|` from [`Accumulation`]. The
/// bound is the worst case, so an honest kernel is never rejected whatever its summation
/// order; it grows with the length and with the terms' magnitudes, not with the result's, so
/// it stays tight where the result is not small by cancellation (a scan's first elements) and
/// allows what rounding can really do where it is (a prefix crossing zero). A kernel that
/// drops or adds a term is still caught wherever that term exceeds the allowance: an exclusive
/// scan where the inclusive one is asked fails at each row's first element, whose allowance is
/// `γ_n·|x_0|`. i32 outputs get no allowance (they are exact).
pub fn accumulation_allowance(dtype: Dtype, acc: &Accumulation) -> Vec<f64> {
    let u = match dtype {
        Dtype::F32 => F32_UNIT_ROUNDOFF,
        Dtype::F16 => F16_UNIT_ROUNDOFF,
        Dtype::I32 => return vec![0.0; acc.magnitude.len()],
    };
    let g = gamma(acc.length.max(1), u);
    acc.magnitude.iter().map(|m| g * m.abs()).collect()
}

/// Compares an f32 output with its reference under both rules of [`Tolerance`].
pub fn compare(out: &[f32], reference: &[f32], tol: &Tolerance) -> Verdict {
    compare_buffers(
        &HostBuffer::F32(out.to_vec()),
        &HostBuffer::F32(reference.to_vec()),
        tol,
    )
}

/// Compares an output of any dtype with its reference, in f64 after conversion, under both
/// rules of `tol` (pass [`tolerance_for`] the buffer's dtype first).
pub fn compare_buffers(out: &HostBuffer, reference: &HostBuffer, tol: &Tolerance) -> Verdict {
    compare_buffers_with(out, reference, tol, None)
}

/// [`compare_buffers`] with an extra absolute allowance per element (the accumulation rule,
/// [`accumulation_allowance`]) added to the element-wise rule and to the aggregate rule's
/// "within" test; `None` or a short slice adds nothing where it has no entry.
pub fn compare_buffers_with(
    out: &HostBuffer,
    reference: &HostBuffer,
    tol: &Tolerance,
    allowance: Option<&[f64]>,
) -> Verdict {
    debug_assert_eq!(out.len(), reference.len());
    let extra = |i: usize| allowance.and_then(|a| a.get(i)).copied().unwrap_or(0.0);
    let poisoned = out.poisoned(Some(reference));
    let out = out.to_f64();
    let reference = reference.to_f64();
    let n = out.len().min(reference.len());
    let mut unwritten = 0usize;
    let mut first_unwritten = None;
    let mut non_finite = 0usize;
    let mut first_non_finite = None;
    for (i, v) in out.iter().take(n).enumerate() {
        if poisoned[i] {
            unwritten += 1;
            first_unwritten.get_or_insert(i);
        } else if !v.is_finite() {
            non_finite += 1;
            first_non_finite.get_or_insert(i);
        }
    }
    if let Some(first) = first_unwritten {
        return Verdict::Unwritten {
            count: unwritten,
            first,
            total: n,
        };
    }
    if let Some(first) = first_non_finite {
        return Verdict::NonFinite {
            count: non_finite,
            first,
        };
    }
    let mut within = 0usize;
    let mut max_abs = 0.0f64;
    let mut max_rel = 0.0f64;
    let mut first_mismatch = None;
    let (mut dot, mut no, mut nr) = (0.0f64, 0.0f64, 0.0f64);
    for (i, (o, r)) in out.iter().zip(&reference).take(n).enumerate() {
        let (o, r) = (*o, *r);
        let abs = (o - r).abs();
        let rel = abs / r.abs().max(1e-30);
        max_abs = max_abs.max(abs);
        if r != 0.0 || o != 0.0 {
            max_rel = max_rel.max(rel);
        }
        let allowed = extra(i);
        if abs > tol.atol + tol.rtol * r.abs() + allowed {
            first_mismatch.get_or_insert(i as u64);
        }
        if abs <= tol.relative_threshold * r.abs() || abs <= tol.atol + allowed {
            within += 1;
        }
        dot += o * r;
        no += o * o;
        nr += r * r;
    }
    let cosine = if no == 0.0 && nr == 0.0 {
        1.0
    } else if no == 0.0 || nr == 0.0 {
        0.0
    } else {
        dot / (no.sqrt() * nr.sqrt())
    };
    let fraction_within = if n == 0 {
        1.0
    } else {
        within as f64 / n as f64
    };
    let report = CorrectnessReport {
        fraction_within,
        max_abs_error: max_abs,
        max_rel_error: max_rel,
        cosine,
        first_mismatch,
        input_sets: 1,
    };
    let aggregate_ok = fraction_within > tol.min_fraction_within && cosine >= tol.min_cosine;
    if first_mismatch.is_none() && aggregate_ok {
        Verdict::Close(report)
    } else {
        Verdict::Mismatch(report)
    }
}

/// The first byte of `guard` that is not the guard pattern.
pub fn guard_violation(guard: &[u8]) -> Option<usize> {
    guard.iter().position(|b| *b != GUARD_BYTE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_output_is_close() {
        let r = vec![1.0, 2.0, 3.0];
        assert!(matches!(
            compare(&r, &r, &Tolerance::fp32()),
            Verdict::Close(_)
        ));
    }

    #[test]
    fn poison_is_unwritten_and_nan_is_non_finite() {
        let r = vec![1.0, 2.0, 3.0];
        let o = vec![1.0, poison(), 3.0];
        assert!(matches!(
            compare(&o, &r, &Tolerance::fp32()),
            Verdict::Unwritten {
                count: 1,
                first: 1,
                total: 3
            }
        ));
        let o = vec![1.0, f32::NAN, 3.0];
        assert!(matches!(
            compare(&o, &r, &Tolerance::fp32()),
            Verdict::NonFinite { count: 1, first: 1 }
        ));
        let o = vec![1.0, f32::INFINITY, 3.0];
        assert!(matches!(
            compare(&o, &r, &Tolerance::fp32()),
            Verdict::NonFinite { .. }
        ));
    }

    #[test]
    fn one_wrong_element_is_a_mismatch_with_its_index() {
        let r: Vec<f32> = (0..1000).map(|i| i as f32 + 1.0).collect();
        let mut o = r.clone();
        o[417] += 1.0;
        match compare(&o, &r, &Tolerance::fp32()) {
            Verdict::Mismatch(rep) => {
                assert_eq!(rep.first_mismatch, Some(417));
                assert!(rep.fraction_within > 0.99);
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn scaled_output_fails_the_aggregate_rule() {
        let r: Vec<f32> = (0..1000).map(|i| i as f32 + 1.0).collect();
        let o: Vec<f32> = r.iter().map(|v| v * 1.02).collect();
        assert!(matches!(
            compare(&o, &r, &Tolerance::fp32()),
            Verdict::Mismatch(_)
        ));
    }

    #[test]
    fn f16_uses_the_floored_rule_and_i32_is_exact() {
        use half::f16;
        let r = HostBuffer::F16((1..200).map(|i| f16::from_f32(i as f32 / 64.0)).collect());
        // One ulp off everywhere: accepted under the f16 rule, not under fp32's.
        let o = match &r {
            HostBuffer::F16(v) => {
                HostBuffer::F16(v.iter().map(|x| f16::from_bits(x.to_bits() + 1)).collect())
            }
            _ => unreachable!(),
        };
        let t16 = tolerance_for(Dtype::F16, &Tolerance::fp32());
        assert!(matches!(compare_buffers(&o, &r, &t16), Verdict::Close(_)));
        assert!(matches!(
            compare_buffers(&o, &r, &Tolerance::fp32()),
            Verdict::Mismatch(_)
        ));
        let ri = HostBuffer::I32(vec![1, 2, 3]);
        let ti = tolerance_for(Dtype::I32, &Tolerance::fp32());
        assert!(matches!(compare_buffers(&ri, &ri, &ti), Verdict::Close(_)));
        let oi = HostBuffer::I32(vec![1, 2, 4]);
        assert!(matches!(
            compare_buffers(&oi, &ri, &ti),
            Verdict::Mismatch(r) if r.first_mismatch == Some(2)
        ));
        let pi = HostBuffer::poison(Dtype::I32, 3);
        assert!(matches!(
            compare_buffers(&pi, &ri, &ti),
            Verdict::Unwritten { count: 3, .. }
        ));
    }

    #[test]
    fn the_accumulation_rule_allows_rounding_of_long_sums_but_not_a_missing_term() {
        // An f32 running sum over 16,384 terms of both signs: its prefix crosses zero, where
        // the plain rule (relative to the tiny result) rejects honest rounding.
        let n = 16_384usize;
        let x: Vec<f64> = (0..n)
            .map(|i| ((i as f64 * 0.618_033_988_75).fract() - 0.5) * 6.0)
            .collect();
        let (mut acc32, mut exact, mut magnitude) = (0.0f32, 0.0f64, 0.0f64);
        let (mut honest, mut reference, mut mags) = (vec![], vec![], vec![]);
        for v in &x {
            acc32 += *v as f32;
            exact += v;
            magnitude += v.abs();
            honest.push(acc32);
            reference.push(exact as f32);
            mags.push(magnitude);
        }
        let strict = Tolerance {
            atol: 1e-6,
            rtol: 1e-6,
            ..Tolerance::fp32()
        };
        let (o, r) = (HostBuffer::F32(honest), HostBuffer::F32(reference.clone()));
        assert!(matches!(
            compare_buffers(&o, &r, &strict),
            Verdict::Mismatch(_)
        ));
        let acc = Accumulation {
            length: n as u64,
            magnitude: mags,
        };
        let allowance = accumulation_allowance(Dtype::F32, &acc);
        assert!(matches!(
            compare_buffers_with(&o, &r, &strict, Some(&allowance)),
            Verdict::Close(_)
        ));
        // The exclusive scan (every element one term short) is still a mismatch, first at 0.
        let mut exclusive = vec![0.0f32];
        exclusive.extend_from_slice(&reference[..n - 1]);
        match compare_buffers_with(&HostBuffer::F32(exclusive), &r, &strict, Some(&allowance)) {
            Verdict::Mismatch(rep) => assert_eq!(rep.first_mismatch, Some(0)),
            v => panic!("{v:?}"),
        }
        assert_eq!(gamma(0, F32_UNIT_ROUNDOFF), 0.0);
        assert!(gamma(1 << 24, F32_UNIT_ROUNDOFF).is_infinite());
        let g = gamma(1024, F32_UNIT_ROUNDOFF);
        assert!(
            g > 1024.0 / 16_777_216.0 && g < 1.001 * 1024.0 / 16_777_216.0,
            "{g}"
        );
    }

    #[test]
    fn guard_check_finds_the_first_changed_byte() {
        let mut g = vec![GUARD_BYTE; 64];
        assert_eq!(guard_violation(&g), None);
        g[10] = 0;
        assert_eq!(guard_violation(&g), Some(10));
    }
}

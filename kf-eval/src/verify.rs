//! Output checks: poison, guard regions, unchanged inputs, and closeness to the reference.

use kf_core::{CorrectnessReport, Tolerance};

use crate::element::Dtype;
use crate::tasks::host::HostBuffer;

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
    debug_assert_eq!(out.len(), reference.len());
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
        if abs > tol.atol + tol.rtol * r.abs() {
            first_mismatch.get_or_insert(i as u64);
        }
        if abs <= tol.relative_threshold * r.abs() || abs <= tol.atol {
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
    fn guard_check_finds_the_first_changed_byte() {
        let mut g = vec![GUARD_BYTE; 64];
        assert_eq!(guard_violation(&g), None);
        g[10] = 0;
        assert_eq!(guard_violation(&g), Some(10));
    }
}

//! Structured input buffers (`structure = "symmetric"`): a problem that draws a symmetric or
//! triangular matrix (`A = torch.rand(N, N); A = (A + A.T) / 2`, `torch.tril`, `torch.triu`)
//! or probability rows (`torch.randn(B, N).softmax(dim=-1)`) says so in its task file, and the
//! evaluator draws the buffer the same way, so that a kernel may exploit the structure as the
//! problem allows. Parsed once at load.

use std::fmt;
use std::str::FromStr;

/// The structure of a drawn buffer, given to its values after their `init` draw, before
/// conversion to the dtype. The matrix structures (symmetric, lower, upper) act on each
/// trailing square matrix: a buffer of shape `[..., n, n]` is a batch of `n × n` row-major
/// matrices (every leading dimension a batch dimension). Softmax acts on each row along the
/// last dimension: a buffer of shape `[..., n]` is a batch of rows of `n` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    /// `A = (A + Aᵀ) / 2`, element by element (`symmetric`).
    Symmetric,
    /// Lower triangular: zero above the diagonal, `A[i][j] = 0` for `j > i` (`lower`,
    /// `torch.tril`).
    Lower,
    /// Upper triangular: zero below the diagonal, `A[i][j] = 0` for `j < i` (`upper`,
    /// `torch.triu`).
    Upper,
    /// Each row along the last dimension becomes `softmax(row)`: `exp(x - max) / Σ exp(x -
    /// max)`, positive values that sum to 1 (`softmax`, `x.softmax(dim=-1)`: probability
    /// rows).
    Softmax,
}

impl Structure {
    /// Every structure, in the order the names are documented.
    pub const ALL: [Structure; 4] = [
        Structure::Symmetric,
        Structure::Lower,
        Structure::Upper,
        Structure::Softmax,
    ];

    /// The name as written in task files.
    pub fn name(self) -> &'static str {
        match self {
            Structure::Symmetric => "symmetric",
            Structure::Lower => "lower",
            Structure::Upper => "upper",
            Structure::Softmax => "softmax",
        }
    }

    /// Parses `symmetric`, `lower`, `upper` or `softmax` (surrounding spaces ignored); the
    /// error says what is accepted.
    pub fn parse(text: &str) -> Result<Structure, StructureError> {
        let t = text.trim();
        Structure::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .ok_or_else(|| StructureError::Unknown { text: t.to_owned() })
    }

    /// Whether the structure acts on trailing square matrices (symmetric, lower, upper)
    /// rather than on rows (softmax).
    pub fn is_matrix(self) -> bool {
        !matches!(self, Structure::Softmax)
    }

    /// The fewest dimensions a buffer with the structure has: two for the matrix structures,
    /// one (the rows' dimension) for softmax.
    pub fn min_rank(self) -> usize {
        if self.is_matrix() {
            2
        } else {
            1
        }
    }

    /// Checks that a buffer of `rank` dimensions has at least [`Structure::min_rank`]:
    /// [`StructureError::RankBelowTwo`] for a matrix structure,
    /// [`StructureError::NoDimensions`] for softmax otherwise.
    pub fn check_rank(self, rank: usize) -> Result<(), StructureError> {
        if rank >= self.min_rank() {
            Ok(())
        } else if self.is_matrix() {
            Err(StructureError::RankBelowTwo {
                structure: self,
                rank,
            })
        } else {
            Err(StructureError::NoDimensions { structure: self })
        }
    }

    /// Checks that `shape` suits the structure and gives the length of the trailing unit it
    /// acts on: for a matrix structure the side `n` of the trailing square matrices of
    /// `shape` (`[..., n, n]`: at least two dimensions, the last two equal), for softmax the
    /// length `n` of its rows (`[..., n]`: at least one dimension). `sizes` names the sizes
    /// in the error.
    pub fn check_shape(self, shape: &[usize], sizes: &str) -> Result<usize, StructureError> {
        self.check_rank(shape.len())?;
        match (self.is_matrix(), shape) {
            (true, [.., rows, cols]) if rows != cols => Err(StructureError::NotSquare {
                structure: self,
                shape: shape.to_vec(),
                sizes: sizes.to_owned(),
            }),
            (_, [.., last]) => Ok(*last),
            // `check_rank` refused an empty shape.
            (_, []) => Err(StructureError::NoDimensions { structure: self }),
        }
    }

    /// Gives `values` (row-major, of `shape`) the structure: each trailing `n × n` matrix of
    /// a `[..., n, n]` shape for a matrix structure, each row of a `[..., n]` shape for
    /// softmax. A shape the structure does not suit ([`Structure::check_shape`]) is left as
    /// drawn (a task file refuses such a shape with its structure at load and at every size
    /// it is used).
    pub fn apply(self, values: &mut [f64], shape: &[usize]) {
        let Ok(n) = self.check_shape(shape, "") else {
            return;
        };
        if n == 0 {
            return;
        }
        if self == Structure::Softmax {
            values.chunks_exact_mut(n).for_each(softmax_in_place);
            return;
        }
        for matrix in values.chunks_exact_mut(n * n) {
            for i in 0..n {
                for j in 0..n {
                    match self {
                        Structure::Symmetric if j > i => {
                            let mean = (matrix[i * n + j] + matrix[j * n + i]) / 2.0;
                            matrix[i * n + j] = mean;
                            matrix[j * n + i] = mean;
                        }
                        Structure::Lower if j > i => matrix[i * n + j] = 0.0,
                        Structure::Upper if j < i => matrix[i * n + j] = 0.0,
                        _ => {}
                    }
                }
            }
        }
    }
}

/// `row` becomes `softmax(row)`, computed stably in f64: `exp(x - max) / Σ exp(x - max)`, so
/// that no exponent overflows and the largest term is 1 (the sum at least 1).
fn softmax_in_place(row: &mut [f64]) {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in row.iter_mut() {
        *x /= sum;
    }
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Structure {
    type Err = StructureError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Structure::parse(s)
    }
}

/// Why a buffer's `structure` cannot be used
/// ([`Structure::parse`](Structure::parse) and the checks of its buffer's role and
/// shape).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StructureError {
    /// Not a structure this crate knows.
    #[error("`{text}` is not a structure (use symmetric, lower, upper or softmax)")]
    Unknown {
        /// The text as written.
        text: String,
    },
    /// A structure on an output buffer, whose contents are not drawn.
    #[error(
        "`{structure}` is on an output buffer: only drawn buffers (role input or inout) have \
         a structure"
    )]
    OnOutput {
        /// The structure.
        structure: Structure,
    },
    /// A matrix structure (symmetric, lower, upper) on a buffer of fewer than two
    /// dimensions.
    #[error(
        "`{structure}` needs a matrix or a batch of them (at least 2 dimensions), the shape \
         has {rank}"
    )]
    RankBelowTwo {
        /// The structure.
        structure: Structure,
        /// The buffer's number of dimensions.
        rank: usize,
    },
    /// A row structure (softmax) on a buffer with no dimension, so no rows.
    #[error("`{structure}` needs rows along a last dimension (at least 1 dimension), the shape has none")]
    NoDimensions {
        /// The structure.
        structure: Structure,
    },
    /// A structure on a buffer whose last two dimensions differ.
    #[error(
        "`{structure}` needs the last two dimensions equal, the shape is {shape:?} at {sizes}"
    )]
    NotSquare {
        /// The structure.
        structure: Structure,
        /// The buffer's shape at `sizes`.
        shape: Vec<usize>,
        /// The sizes, as text (`M=64, N=32`).
        sizes: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// `n` values uniform in [-1, 1) from a generator seeded with 11.
    fn uniform(n: usize) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
    }

    /// A batch of `batch` `n × n` matrices drawn by [`uniform`], with the structure applied.
    fn drawn(structure: Structure, batch: usize, n: usize) -> Vec<f64> {
        let mut values = uniform(batch * n * n);
        structure.apply(&mut values, &[batch, n, n]);
        values
    }

    #[test]
    fn names_parse_and_print_and_others_are_refused() {
        for s in Structure::ALL {
            assert_eq!(Structure::parse(s.name()), Ok(s));
            assert_eq!(s.to_string().parse::<Structure>(), Ok(s));
        }
        assert_eq!(Structure::parse(" lower "), Ok(Structure::Lower));
        let err = Structure::parse("triangular").unwrap_err();
        assert_eq!(
            err,
            StructureError::Unknown {
                text: "triangular".into()
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("symmetric, lower, upper or softmax"),
            "{message}"
        );
        assert_eq!(Structure::parse("softmax"), Ok(Structure::Softmax));
        assert_eq!(Structure::Softmax.to_string(), "softmax");
        assert_eq!(" softmax ".parse::<Structure>(), Ok(Structure::Softmax));
        assert!(Structure::ALL.contains(&Structure::Softmax));
    }

    #[test]
    fn a_matrix_structure_needs_two_equal_trailing_dimensions() {
        assert_eq!(Structure::Lower.check_shape(&[3, 5, 5], "B=3,N=5"), Ok(5));
        assert_eq!(Structure::Lower.check_shape(&[5, 5], ""), Ok(5));
        assert_eq!(
            Structure::Upper.check_shape(&[5], "N=5"),
            Err(StructureError::RankBelowTwo {
                structure: Structure::Upper,
                rank: 1
            })
        );
        let err = Structure::Symmetric
            .check_shape(&[4, 8], "M=4,N=8")
            .unwrap_err();
        assert_eq!(
            err,
            StructureError::NotSquare {
                structure: Structure::Symmetric,
                shape: vec![4, 8],
                sizes: "M=4,N=8".into()
            }
        );
        assert!(err.to_string().contains("[4, 8] at M=4,N=8"), "{err}");
    }

    #[test]
    fn softmax_needs_one_dimension_of_any_length() {
        assert_eq!(Structure::Softmax.min_rank(), 1);
        assert!(Structure::ALL
            .into_iter()
            .filter(|s| *s != Structure::Softmax)
            .all(|s| s.is_matrix() && s.min_rank() == 2));
        assert_eq!(Structure::Softmax.check_shape(&[4, 6], "M=4,N=6"), Ok(6));
        assert_eq!(Structure::Softmax.check_shape(&[3, 5, 7], ""), Ok(7));
        assert_eq!(Structure::Softmax.check_shape(&[9], "N=9"), Ok(9));
        let err = Structure::Softmax.check_shape(&[], "").unwrap_err();
        assert_eq!(
            err,
            StructureError::NoDimensions {
                structure: Structure::Softmax
            }
        );
        assert!(err.to_string().contains("at least 1 dimension"), "{err}");
        assert_eq!(Structure::Softmax.check_rank(1), Ok(()));
        assert_eq!(
            Structure::Lower.check_rank(1),
            Err(StructureError::RankBelowTwo {
                structure: Structure::Lower,
                rank: 1
            })
        );
    }

    #[test]
    fn softmax_rows_are_positive_and_sum_to_one_in_every_batch() {
        let shape = [3, 5, 7];
        let drawn = uniform(3 * 5 * 7);
        let mut v = drawn.clone();
        Structure::Softmax.apply(&mut v, &shape);
        for (r, (row, x)) in v.chunks_exact(7).zip(drawn.chunks_exact(7)).enumerate() {
            let sum: f64 = row.iter().sum();
            assert!((sum - 1.0).abs() <= 1e-12, "row {r} sums to {sum}");
            assert!(row.iter().all(|p| *p > 0.0 && *p < 1.0), "row {r}: {row:?}");
            // softmax keeps the order of the drawn values: the ratio of two terms is
            // exp of their difference.
            let ratio = row[1] / row[0];
            assert!((ratio - (x[1] - x[0]).exp()).abs() <= 1e-12, "row {r}");
        }
        assert_eq!(v.chunks_exact(7).count(), 15);
    }

    #[test]
    fn softmax_is_stable_for_large_values() {
        // Without subtracting the maximum, exp(1000) overflows to infinity.
        let mut v = vec![1000.0, 1000.0, 999.0, -1000.0];
        Structure::Softmax.apply(&mut v, &[1, 4]);
        assert!(v.iter().all(|p| p.is_finite()), "{v:?}");
        let e = (-1.0f64).exp();
        let sum = 2.0 + e;
        assert!((v[0] - 1.0 / sum).abs() <= 1e-15, "{v:?}");
        assert_eq!(v[0], v[1]);
        assert!((v[2] - e / sum).abs() <= 1e-15, "{v:?}");
        assert!(v[3] >= 0.0 && v[3] < 1e-300, "{v:?}");
    }

    #[test]
    fn symmetric_matrices_equal_their_transposes_in_every_batch() {
        let (batch, n) = (3, 7);
        let v = drawn(Structure::Symmetric, batch, n);
        for b in 0..batch {
            let m = &v[b * n * n..(b + 1) * n * n];
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(m[i * n + j], m[j * n + i], "matrix {b} at ({i}, {j})");
                }
            }
            // Not a constant: the off-diagonal values still differ.
            assert_ne!(m[1], m[2], "matrix {b}");
        }
        // (A + Aᵀ) / 2 of the same draw.
        let a = uniform(n * n);
        let s = drawn(Structure::Symmetric, 1, n);
        assert_eq!(s[n + 2], (a[n + 2] + a[2 * n + 1]) / 2.0);
        assert_eq!(s[3 * n + 3], a[3 * n + 3]);
    }

    #[test]
    fn triangular_matrices_are_zero_on_one_side_only_in_every_batch() {
        let (batch, n) = (3, 6);
        for (structure, zero) in [
            (Structure::Lower, (|i, j| j > i) as fn(usize, usize) -> bool),
            (Structure::Upper, |i, j| j < i),
        ] {
            let v = drawn(structure, batch, n);
            for b in 0..batch {
                let m = &v[b * n * n..(b + 1) * n * n];
                for i in 0..n {
                    for j in 0..n {
                        if zero(i, j) {
                            assert_eq!(m[i * n + j], 0.0, "{structure} {b} ({i}, {j})");
                        } else {
                            // A normal draw is never exactly zero.
                            assert_ne!(m[i * n + j], 0.0, "{structure} {b} ({i}, {j})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_shape_that_is_not_square_is_left_as_drawn() {
        let mut v = vec![1.0; 6];
        Structure::Lower.apply(&mut v, &[2, 3]);
        Structure::Upper.apply(&mut v, &[6]);
        Structure::Softmax.apply(&mut v, &[]);
        assert_eq!(v, vec![1.0; 6]);
    }
}

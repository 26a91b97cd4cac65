//! Structured input buffers (`structure = "symmetric"`): a problem that draws a symmetric or
//! triangular matrix (`A = torch.rand(N, N); A = (A + A.T) / 2`, `torch.tril`, `torch.triu`)
//! says so in its task file, and the evaluator draws the buffer the same way, so that a kernel
//! may exploit the structure as the problem allows. Parsed once at load.

use std::fmt;
use std::str::FromStr;

/// The structure of each trailing square matrix of a drawn buffer: a buffer of shape
/// `[..., n, n]` is a batch of `n × n` row-major matrices (every leading dimension a batch
/// dimension), and each is made so after its `init` draw, before conversion to the dtype.
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
}

impl Structure {
    /// Every structure, in the order the names are documented.
    pub const ALL: [Structure; 3] = [Structure::Symmetric, Structure::Lower, Structure::Upper];

    /// The name as written in task files.
    pub fn name(self) -> &'static str {
        match self {
            Structure::Symmetric => "symmetric",
            Structure::Lower => "lower",
            Structure::Upper => "upper",
        }
    }

    /// Parses `symmetric`, `lower` or `upper` (surrounding spaces ignored); the error says
    /// what is accepted.
    pub fn parse(text: &str) -> Result<Structure, StructureError> {
        let t = text.trim();
        Structure::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .ok_or_else(|| StructureError::Unknown { text: t.to_owned() })
    }

    /// The side `n` of the trailing square matrices of `shape` (`[..., n, n]`), checked:
    /// at least two dimensions, the last two equal. `sizes` names the sizes in the error.
    pub fn side(self, shape: &[usize], sizes: &str) -> Result<usize, StructureError> {
        let [.., rows, cols] = shape else {
            return Err(StructureError::RankBelowTwo {
                structure: self,
                rank: shape.len(),
            });
        };
        if rows != cols {
            return Err(StructureError::NotSquare {
                structure: self,
                shape: shape.to_vec(),
                sizes: sizes.to_owned(),
            });
        }
        Ok(*rows)
    }

    /// Gives each trailing `n × n` matrix of `values` (row-major, of shape `[..., n, n]`) the
    /// structure. A shape that is not a batch of square matrices is left as drawn (a task
    /// file refuses such a shape with its structure at load and at every size it is used).
    pub fn apply(self, values: &mut [f64], shape: &[usize]) {
        let Ok(n) = self.side(shape, "") else {
            return;
        };
        if n == 0 {
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
    #[error("`{text}` is not a structure (use symmetric, lower or upper)")]
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
    /// A structure on a buffer of fewer than two dimensions.
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
            message.contains("symmetric") && message.contains("lower") && message.contains("upper"),
            "{message}"
        );
    }

    #[test]
    fn the_side_needs_two_equal_trailing_dimensions() {
        assert_eq!(Structure::Lower.side(&[3, 5, 5], "B=3,N=5"), Ok(5));
        assert_eq!(Structure::Lower.side(&[5, 5], ""), Ok(5));
        assert_eq!(
            Structure::Upper.side(&[5], "N=5"),
            Err(StructureError::RankBelowTwo {
                structure: Structure::Upper,
                rank: 1
            })
        );
        let err = Structure::Symmetric.side(&[4, 8], "M=4,N=8").unwrap_err();
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
        assert_eq!(v, vec![1.0; 6]);
    }
}

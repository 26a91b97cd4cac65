//! # kf-transform
//!
//! Source-level transformations of kernels nobody templated: a user's own OpenCL C kernel,
//! with its manifest, is rewritten into children that a search evaluates (the evaluator
//! checks every child's outputs against the reference anyway). Each transformation exposes
//! its choices as tunables in the child's manifest `[params]`, so the tuner and the parameter
//! moves follow, and writes the launch geometry where the work per work-item changes.
//!
//! * [`Transformation::GroupReduce`]: a kernel in which one work-item handles one row (an
//!   output with a loop over what it reduces, or a row it normalises) becomes one in which a
//!   work-group of `REDUCE_WG` work-items does: recognisable reduction loops (`acc += f(…)`,
//!   `acc = fmax(acc, …)`, …) are split among them and combined in local memory, loops with
//!   independent iterations are split, the rest runs in every work-item (stores in the first
//!   only); the launch gets one group per former work-item.
//! * [`Transformation::CoarsenBlocked`] / [`Transformation::CoarsenStrided`]: each work-item
//!   runs the kernel body for `COARSEN` indices of dimension 0 (consecutive, or one global
//!   size apart), the global size divided by `COARSEN` (rounded up to the work-group size)
//!   and a guard for the tail past the original global size. Applied only where provably the
//!   same computation: no barrier, local memory or group/local/global-size query, no `return`
//!   inside a loop (a top-level `return` becomes `continue`), and an original global size that
//!   can be written in C from the manifest's parameters and the kernel's scalar arguments.
//! * [`Transformation::Vectorize`]: an elementwise kernel (`i = get_global_id(0)`, a guard
//!   `if (i >= E) return;`, accesses at `p[i]`) handles `VEC` consecutive indices per
//!   work-item, its buffers read and written with `vloadN`/`vstoreN` where all of them pass
//!   the guard, index by index at the tail; the global size divided by `VEC`.
//! * [`Transformation::Stage`]: a counted loop whose reads `p[e]` are the same in every
//!   work-item of a group (`e` depends only on the loop variable and on values the group
//!   shares: its index, a global index in a dimension whose work-group size is 1, scalar
//!   arguments, constants; `p` a buffer the kernel only reads), read on no branch, copies them
//!   into `__local` memory `STAGE_TILE` iterations at a time, the group's work-items sharing
//!   the copy between barriers, and reads the copy. Work-items that leave early (a guard
//!   `if (i >= n) return;` that differs within the group) stay for the barriers under a flag,
//!   computing nothing; the copy runs only when some work-item of the group is active. A 2-D
//!   kernel that never asks for its group's shape, none of whose reads the group shares as
//!   launched, gets work-groups one high in a dimension above 0 (`launch.local` there `1`) when
//!   that makes a read shared (a row of `A` in a matrix product).
//! * [`Transformation::Hoist`]: loads from buffers the kernel only reads, at indices a loop
//!   does not change and on no branch of its body, read once before the loop (when it runs),
//!   behind the tunable `HOIST`.
//! * [`Transformation::Unroll`]: `#pragma unroll UNROLL` on the innermost counted loops.
//! * [`Transformation::Qualify`]: `const` on the pointees the kernel provably only reads,
//!   `restrict` (tunable `RESTRICT`) on its `__global` pointers.
//!
//! [`TransformMutator`] offers them to a search (`kf search` on a task file uses it beside the
//! parameter moves).
//!
//! `cargo run -p kf-transform --example transform -- KERNEL.toml OUT_DIR` writes a kernel's
//! children, for `kf eval`.
//!
//! Not (yet) done of issue 48's list: sub-group reductions, vector accesses at indices other
//! than the work-item's own, local-memory staging of regions that differ between the
//! work-items of a group (a convolution's overlapping input windows, 2-D tiles of a matrix
//! product);
//! CUDA and SYCL kernels are left alone (children only for OpenCL C).
//!
//! ## The parser
//!
//! [tree-sitter](https://tree-sitter.github.io) with its maintained C grammar
//! (`tree-sitter-c`). It was chosen over `lang-c` because it is error-tolerant and needs no
//! preprocessed input (a kernel's `#define`s, `#pragma`s and `-D` tunables stay as they are),
//! and because every node carries its byte range, so a rewrite edits the user's own text
//! surgically instead of printing a tree back. OpenCL C's qualifiers the C grammar does not
//! know (`__kernel`, `__global`, `__local`, `__constant`, …) are blanked out before parsing,
//! replaced by as many spaces, so byte ranges stay those of the original; vector types such as
//! `float4` parse as type names and work-item functions as calls. A kernel whose definition
//! still has a parse error is left alone.

mod child;
mod coarsen;
mod error;
mod group;
mod hoist;
mod mutator;
mod parse;
mod qualify;
mod stage;
mod transformation;
mod unroll;
mod vectorize;

pub use child::{applied, NewParam, Transformed};
pub use error::TransformError;
pub use mutator::TransformMutator;
pub use transformation::Transformation;

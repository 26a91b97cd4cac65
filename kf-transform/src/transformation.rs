//! [`Transformation`]: the rewrites this crate offers, in order of value.

use std::fmt;

use kf_core::{KernelSource, Language, ParamValues};
use kf_manifest::Manifest;

use crate::child::{applied, child, Transformed};
use crate::error::TransformError;

/// A source-level transformation of an OpenCL C kernel with a manifest.
///
/// ```
/// use kf_core::{KernelSource, Language, ParamValues};
/// use kf_transform::Transformation;
///
/// let manifest = "entry = \"scale\"\nlanguage = \"opencl\"\n[params]\nWG = [64]\n[launch]\nglobal = [\"((n + WG - 1) / WG) * WG\"]\nlocal = [\"WG\"]\n";
/// let source = KernelSource::new(
///     Language::OpenCl,
///     "scale",
///     "__kernel void scale(__global const float* x, __global float* y, const int n) {\n    const int i = get_global_id(0);\n    if (i >= n) return;\n    y[i] = 2.0f * x[i];\n}\n",
/// )
/// .with_manifest(manifest);
/// let params = ParamValues::new().with("WG", 64i64);
/// let child = Transformation::CoarsenBlocked
///     .apply(&source, &params)
///     .unwrap()
///     .expect("an elementwise kernel coarsens");
/// assert!(child.source.text.contains("kft_c < COARSEN"));
/// assert_eq!(child.params.get("COARSEN").and_then(|v| v.as_i64()), Some(4));
/// assert!(child.source.manifest.unwrap().contains("/ COARSEN"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transformation {
    /// One work-group of `REDUCE_WG` work-items per former work-item (a row): the row's
    /// reduction loops and independent loops split among them, reductions combined in local
    /// memory; the global size multiplied by `REDUCE_WG`.
    GroupReduce,
    /// Each work-item handles `COARSEN` consecutive indices of dimension 0; the global size
    /// is divided by `COARSEN`.
    CoarsenBlocked,
    /// Each work-item handles `COARSEN` indices of dimension 0 one global size apart; the
    /// global size is divided by `COARSEN`.
    CoarsenStrided,
    /// `VEC` consecutive indices per work-item of an elementwise kernel, the buffers it
    /// accesses at the index read and written with `vloadN`/`vstoreN`; the global size is
    /// divided by `VEC`.
    Vectorize,
    /// Reads that every work-item of a group makes alike (a loop's `p[e]` with `e` depending
    /// only on the loop variable and group-uniform values) copied into `__local` memory by the
    /// group, `STAGE_TILE` iterations at a time, between barriers, and read from there.
    Stage,
    /// Loads from read-only buffers at loop-invariant indices read once before their loop
    /// (tunable `HOIST`, 1 or 0).
    Hoist,
    /// `#pragma unroll UNROLL` on the innermost counted loops.
    Unroll,
    /// `const` on the pointees the kernel only reads, `restrict` (tunable `RESTRICT`) on its
    /// global pointers.
    Qualify,
}

impl Transformation {
    /// Every transformation, in order of value.
    pub const ALL: [Transformation; 8] = [
        Transformation::GroupReduce,
        Transformation::CoarsenBlocked,
        Transformation::CoarsenStrided,
        Transformation::Vectorize,
        Transformation::Stage,
        Transformation::Hoist,
        Transformation::Unroll,
        Transformation::Qualify,
    ];

    /// The name recorded in a child's manifest and origin note.
    pub fn name(self) -> &'static str {
        match self {
            Transformation::GroupReduce => "group-reduce",
            Transformation::CoarsenBlocked => "coarsen-blocked",
            Transformation::CoarsenStrided => "coarsen-strided",
            Transformation::Vectorize => "vectorize",
            Transformation::Stage => "stage",
            Transformation::Hoist => "hoist",
            Transformation::Unroll => "unroll",
            Transformation::Qualify => "qualify",
        }
    }

    /// Whether a kernel made by `other` already has what this one adds (one change of the
    /// work per work-item per kernel: a coarsening, vectorisation or row per work-group).
    fn excluded_by(self, other: &str) -> bool {
        let reshapes = |name: &str| {
            name.starts_with("coarsen-") || name == "vectorize" || name == "group-reduce"
        };
        other == self.name() || (reshapes(self.name()) && reshapes(other))
    }

    /// The child of `kernel` (an OpenCL C kernel carrying its manifest, measured at
    /// `params`), or `None` where this transformation does not apply: another language, no
    /// manifest, a kernel it cannot prove the rewrite correct for, or one it was applied to.
    ///
    /// In a sequence of kernels (kf-manifest's `[[kernels]]`) the transformation rewrites
    /// every kernel of the sequence it applies to, each with its own launch (a row-statistics
    /// kernel becomes a work-group per row, the element-wise kernel after it is vectorised);
    /// `None` where it applies to none.
    pub fn apply(
        self,
        kernel: &KernelSource,
        params: &ParamValues,
    ) -> Result<Option<Transformed>, TransformError> {
        if kernel.language != Language::OpenCl || kernel.manifest.is_none() {
            return Ok(None);
        }
        if applied(kernel).iter().any(|a| self.excluded_by(a)) {
            return Ok(None);
        }
        let manifest = Manifest::from_kernel(kernel)?;
        if !manifest.is_sequence() {
            return self.apply_to(kernel, &manifest, params);
        }
        let mut entries: Vec<String> = Vec::new();
        for k in &manifest.sequence {
            if !entries.contains(&k.entry) {
                entries.push(k.entry.clone());
            }
        }
        let mut done: Option<Transformed> = None;
        let mut notes = Vec::new();
        for entry in entries {
            let (source, at) = match &done {
                Some(child) => (&child.source, &child.params),
                None => (kernel, params),
            };
            let current = Manifest::from_kernel(source)?;
            let Some(view) = kernel_view(&current, &entry) else {
                continue;
            };
            if let Some(mut child) = self.apply_to(source, &view, at)? {
                notes.push(format!("`{entry}`: {}", child.note));
                if let Some(before) = done.take() {
                    let mut added = before.added;
                    added.append(&mut child.added);
                    child.added = added;
                }
                done = Some(child);
            }
        }
        Ok(done.map(|mut child| {
            child.note = notes.join("; ");
            child
        }))
    }

    /// The rewrite of the kernel `manifest.entry` names in `kernel`'s text, with that
    /// kernel's launch in `manifest` (for a sequence, a view of one of its kernels).
    fn apply_to(
        self,
        kernel: &KernelSource,
        manifest: &Manifest,
        params: &ParamValues,
    ) -> Result<Option<Transformed>, TransformError> {
        let text = &kernel.text;
        let rewrite = match self {
            Transformation::GroupReduce => crate::group::group_reduce(text, manifest),
            Transformation::CoarsenBlocked => crate::coarsen::coarsen(text, manifest, false),
            Transformation::CoarsenStrided => crate::coarsen::coarsen(text, manifest, true),
            Transformation::Vectorize => crate::vectorize::vectorize(text, manifest),
            Transformation::Stage => crate::stage::stage(text, manifest),
            Transformation::Hoist => crate::hoist::hoist(text, manifest),
            Transformation::Unroll => crate::unroll::unroll(text, manifest),
            Transformation::Qualify => crate::qualify::qualify(text, manifest),
        };
        match rewrite {
            Some(r) => Ok(Some(child(kernel, manifest, params, self.name(), r)?)),
            None => Ok(None),
        }
    }
}

/// `manifest` as if `entry`, one of its sequence's kernels, were its one kernel: that
/// kernel's name and launch (its first in the sequence), the rest unchanged; the rewrite's
/// launch changes then go to every place the sequence runs it (`child`).
fn kernel_view(manifest: &Manifest, entry: &str) -> Option<Manifest> {
    let kernel = manifest.sequence.iter().find(|k| k.entry == entry)?;
    let mut view = manifest.clone();
    view.entry = entry.to_owned();
    view.global = kernel.global.clone();
    view.local = kernel.local.clone();
    Some(view)
}

impl fmt::Display for Transformation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

//! Candidates of several kernels (a manifest's `[[kernels]]` and `[[scratch]]`, see
//! `kf_manifest::sequence`): the launch plan at one set of sizes ([`Plan`]), and the checks
//! between the kernels of a verified launch.
//!
//! A sequence is verified kernel by kernel: after each kernel every buffer is read back, its
//! guard regions checked, every buffer the kernel does not list in `writes` must be byte for
//! byte what it was before the kernel ran (so no kernel writes the output in another's
//! place, and no input changes), and every scratch buffer it lists must be written whole
//! (scratch is poisoned before every launch of the sequence, so a later kernel never reads
//! a value a kernel left there in an earlier launch). The task's outputs are then checked as
//! for one kernel. Timed launches poison the scratch again before each sequence and check
//! afterwards that it was written whole and within its guards.

use kf_core::{Backend, NdRange, Status};
use kf_manifest::{Manifest, ManifestError, ScratchElement, Symbols};

use crate::element::{Dtype, Role};
use crate::error::EvalError;
use crate::guarded::{alloc_guarded, fill, read, Failure, Guarded};
use crate::task::{BufferSpec, HostBuffer};
use crate::verify::guard_violation;

/// The least scratch a candidate may ask for in all, bytes; beyond it, four times the task's
/// own buffers (split-K partial products need several copies of the output). 1 GiB: a naive
/// baseline's materialised intermediate (a 3-D transposed convolution's output before the
/// pools that shrink it, 675 MB for a task of a few MiB) is what PyTorch's eager mode
/// allocates too.
const SCRATCH_FLOOR_BYTES: usize = 1 << 30;

/// One kernel launch of a plan.
#[derive(Debug, Clone)]
pub(crate) struct Stage {
    /// The kernel function.
    pub(crate) entry: String,
    /// Index of its compiled kernel in [`Plan::entries`].
    pub(crate) kernel: usize,
    /// Its launch geometry.
    pub(crate) range: NdRange,
    /// The buffers it writes: indices into the task's buffers followed by the scratch.
    pub(crate) writes: Vec<usize>,
}

/// One scratch buffer of a plan.
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    pub(crate) name: String,
    pub(crate) dtype: Dtype,
    pub(crate) elements: usize,
}

impl Scratch {
    fn bytes(&self) -> usize {
        self.elements.saturating_mul(self.dtype.size())
    }
}

/// What one evaluation launches at one set of sizes.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The launches, in order (one for a manifest with `[launch]`).
    pub(crate) stages: Vec<Stage>,
    /// The candidate's scratch buffers, in declaration order.
    pub(crate) scratch: Vec<Scratch>,
    /// The distinct kernel functions, in order of first launch: what is compiled.
    pub(crate) entries: Vec<String>,
    /// Whether the manifest declares a sequence (`[[kernels]]`): then the launch is checked
    /// kernel by kernel.
    pub(crate) sequence: bool,
}

fn dtype_of(element: ScratchElement) -> Dtype {
    match element {
        ScratchElement::F32 => Dtype::F32,
        ScratchElement::F16 => Dtype::F16,
        ScratchElement::I32 => Dtype::I32,
    }
}

impl Plan {
    /// The plan of `manifest` at `symbols` for a task with buffers `specs`: every launch's
    /// geometry, the scratch sizes, and the `writes` lists resolved against the task's
    /// buffers (a listed input, an unknown name, an output no kernel writes, a scratch name
    /// that is also a task buffer's, or scratch beyond the limit is an error).
    pub(crate) fn new(
        manifest: &Manifest,
        symbols: &Symbols,
        specs: &[BufferSpec],
    ) -> Result<Plan, ManifestError> {
        let invalid = |field: String, message: String| ManifestError::Invalid {
            file: manifest.file.clone(),
            field,
            message,
        };
        let mut scratch = Vec::with_capacity(manifest.scratch.len());
        for s in &manifest.scratch {
            if specs.iter().any(|b| b.name == s.name) {
                return Err(invalid(
                    format!("scratch `{}`", s.name),
                    "has the name of one of the task's buffers".into(),
                ));
            }
            scratch.push(Scratch {
                name: s.name.clone(),
                dtype: dtype_of(s.element),
                elements: s.elements_at(symbols, &manifest.file)?,
            });
        }
        let task_bytes: usize = specs.iter().map(BufferSpec::bytes).sum();
        let limit = SCRATCH_FLOOR_BYTES.max(task_bytes.saturating_mul(4));
        let asked: usize = scratch.iter().map(Scratch::bytes).sum();
        if asked > limit {
            return Err(invalid(
                "scratch".into(),
                format!("asks for {asked} bytes in all; at most {limit} at these sizes"),
            ));
        }
        let mut entries: Vec<String> = Vec::new();
        let mut stages = Vec::new();
        for (i, (entry, range)) in manifest.launch_ranges(symbols)?.into_iter().enumerate() {
            let kernel = match entries.iter().position(|e| *e == entry) {
                Some(k) => k,
                None => {
                    entries.push(entry.clone());
                    entries.len() - 1
                }
            };
            let writes = match manifest.sequence.get(i) {
                None => Vec::new(),
                Some(k) => resolve_writes(&k.writes, specs, &scratch, |m| {
                    invalid(format!("kernels[{i}].writes"), m)
                })?,
            };
            stages.push(Stage {
                entry,
                kernel,
                range,
                writes,
            });
        }
        let sequence = manifest.is_sequence();
        if sequence {
            if let Some((_, spec)) = specs.iter().enumerate().find(|(j, b)| {
                b.role == Role::Output && !stages.iter().any(|s| s.writes.contains(j))
            }) {
                return Err(invalid(
                    "kernels".into(),
                    format!(
                        "no kernel lists the task's output `{}` in `writes`",
                        spec.name
                    ),
                ));
            }
        }
        Ok(Plan {
            stages,
            scratch,
            entries,
            sequence,
        })
    }

    /// The launch of a plan of one kernel without scratch (a trusted reference kernel's);
    /// `None` for a sequence.
    pub(crate) fn single(&self) -> Option<&NdRange> {
        match (&self.stages[..], self.sequence) {
            ([one], false) => Some(&one.range),
            _ => None,
        }
    }
}

/// The buffer indices `names` stand for: task buffers (outputs and in-place ones) by their
/// index, scratch buffers after them; `invalid` makes the error of a name that stands for
/// none, or for an input.
fn resolve_writes(
    names: &[String],
    specs: &[BufferSpec],
    scratch: &[Scratch],
    invalid: impl Fn(String) -> ManifestError,
) -> Result<Vec<usize>, ManifestError> {
    names
        .iter()
        .map(|name| {
            if let Some(j) = specs.iter().position(|b| b.name == *name) {
                return match specs[j].role {
                    Role::Input => Err(invalid(format!(
                        "`{name}` is one of the task's inputs, which no kernel may write"
                    ))),
                    Role::Output | Role::InOut => Ok(j),
                };
            }
            match scratch.iter().position(|s| s.name == *name) {
                Some(k) => Ok(specs.len() + k),
                None => Err(invalid(format!(
                    "`{name}` is neither a buffer of the task ({}) nor a scratch buffer",
                    specs
                        .iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        })
        .collect()
}

/// Guarded device buffers for the plan's scratch.
pub(crate) fn alloc_scratch<B: Backend>(
    backend: &B,
    plan: &Plan,
) -> Result<Vec<Guarded<B::Buffer>>, EvalError> {
    plan.scratch
        .iter()
        .map(|s| alloc_guarded(backend, s.bytes()))
        .collect()
}

/// Fills every scratch buffer with its dtype's poison (and the guards with theirs).
pub(crate) fn poison_scratch<B: Backend>(
    backend: &B,
    plan: &Plan,
    scratch: &mut [Guarded<B::Buffer>],
) -> Result<(), EvalError> {
    for (s, g) in plan.scratch.iter().zip(scratch.iter_mut()) {
        fill(
            backend,
            g,
            &HostBuffer::poison(s.dtype, s.elements).to_bytes(),
        )?;
    }
    Ok(())
}

/// A buffer's name and dtype, task buffers first, then scratch.
fn name_and_dtype<'a>(specs: &'a [BufferSpec], plan: &'a Plan, j: usize) -> (&'a str, Dtype) {
    match specs.get(j) {
        Some(b) => (&b.name, b.dtype),
        None => {
            let s = &plan.scratch[j - specs.len()];
            (&s.name, s.dtype)
        }
    }
}

/// Reads every buffer back (task buffers, then scratch) and checks their guard regions;
/// `after` names the launch for a message.
pub(crate) fn read_all<B: Backend>(
    backend: &B,
    specs: &[BufferSpec],
    plan: &Plan,
    buffers: &[Guarded<B::Buffer>],
    after: &str,
) -> Result<Vec<Vec<u8>>, Failure> {
    buffers
        .iter()
        .enumerate()
        .map(|(j, g)| {
            let bytes = read(backend, g)?;
            let (name, _) = name_and_dtype(specs, plan, j);
            let before =
                guard_violation(&bytes[..g.guard]).map(|at| (g.guard - at, "before the start"));
            let past =
                guard_violation(&bytes[g.guard + g.bytes..]).map(|at| (at + 1, "past the end"));
            if let Some((n, side)) = before.or(past) {
                return Err(Failure::new(
                    Status::RuntimeError,
                    format!("{after} wrote out of bounds: {n} bytes {side} of buffer {name}"),
                ));
            }
            Ok(bytes[g.guard..g.guard + g.bytes].to_vec())
        })
        .collect()
}

/// The checks after stage `k` of a sequence: it changed only the buffers it lists in
/// `writes`, and wrote every scratch buffer it lists whole.
pub(crate) fn check_stage(
    specs: &[BufferSpec],
    plan: &Plan,
    k: usize,
    before: &[Vec<u8>],
    after: &[Vec<u8>],
) -> Result<(), Failure> {
    let stage = &plan.stages[k];
    let which = format!(
        "kernel {} of {} (`{}`)",
        k + 1,
        plan.stages.len(),
        stage.entry
    );
    for (j, (b, a)) in before.iter().zip(after).enumerate() {
        let (name, dtype) = name_and_dtype(specs, plan, j);
        if !stage.writes.contains(&j) {
            if b != a {
                let first = a
                    .chunks_exact(dtype.size())
                    .zip(b.chunks_exact(dtype.size()))
                    .position(|(x, y)| x != y)
                    .unwrap_or(0);
                return Err(Failure::new(
                    Status::RuntimeError,
                    format!(
                        "{which} wrote {name} (first changed element {first}), which its manifest \
                         does not list in `writes`: each kernel of a sequence writes only what it declares"
                    ),
                ));
            }
            continue;
        }
        if j >= specs.len() {
            unwritten_scratch(name, dtype, a, &which)?;
        }
    }
    Ok(())
}

/// A failure when scratch buffer `name` still holds poison after `which` wrote it.
fn unwritten_scratch(name: &str, dtype: Dtype, body: &[u8], which: &str) -> Result<(), Failure> {
    let poisoned = HostBuffer::from_bytes(dtype, body).poisoned(None);
    let count = poisoned.iter().filter(|p| **p).count();
    match poisoned.iter().position(|p| *p) {
        None => Ok(()),
        Some(first) => Err(Failure::new(
            Status::WrongShape,
            format!(
                "{which} left {count} of {} elements of scratch buffer {name} unwritten (first \
                 unwritten index {first}): a kernel writes every scratch buffer it lists whole",
                poisoned.len()
            ),
        )),
    }
}

/// After timed launches: every scratch buffer within its guards and written whole by the
/// last sequence (each was poisoned before it).
pub(crate) fn check_scratch_after<B: Backend>(
    backend: &B,
    specs: &[BufferSpec],
    plan: &Plan,
    scratch: &[Guarded<B::Buffer>],
) -> Result<(), Failure> {
    for (k, (s, g)) in plan.scratch.iter().zip(scratch).enumerate() {
        let bytes = read(backend, g)?;
        if guard_violation(&bytes[..g.guard]).is_some()
            || guard_violation(&bytes[g.guard + g.bytes..]).is_some()
        {
            return Err(Failure::new(
                Status::RuntimeError,
                format!(
                    "a timed launch wrote out of bounds of scratch buffer {}",
                    s.name
                ),
            ));
        }
        let (name, dtype) = name_and_dtype(specs, plan, specs.len() + k);
        unwritten_scratch(
            name,
            dtype,
            &bytes[g.guard..g.guard + g.bytes],
            "a timed launch",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-kernel manifest whose one f32 scratch buffer holds `elements` (an expression).
    fn manifest(elements: &str) -> Manifest {
        let text = format!(
            "source = \"k.cl\"\nentry = \"second\"\nlanguage = \"opencl\"\n\n\
             [[scratch]]\nname = \"T\"\ndtype = \"f32\"\nelements = \"{elements}\"\n\n\
             [[kernels]]\nentry = \"first\"\nwrites = [\"T\"]\nlaunch = {{ global = [\"N\"] }}\n\n\
             [[kernels]]\nentry = \"second\"\nwrites = [\"Y\"]\nlaunch = {{ global = [\"N\"] }}\n"
        );
        Manifest::parse(&text, "scratch.toml", None).expect("the test manifest parses")
    }

    /// Scratch up to the floor (1 GiB) is granted whatever the task's size: a naive baseline's
    /// materialised intermediate (a 3-D transposed convolution's output before its pools)
    /// needs several hundred MiB for a task of a few MiB. Beyond the floor and four times the
    /// task's buffers it is refused, naming both figures.
    #[test]
    fn scratch_is_granted_up_to_the_floor_and_refused_beyond_it() {
        let specs = [
            BufferSpec::f32("X", 1024, Role::Input),
            BufferSpec::f32("Y", 1024, Role::Output),
        ];
        let sizes = [("N".to_owned(), 1024_i64)];
        let symbols = Symbols::new().with_sizes(sizes.iter().map(|(k, v)| (k, v)));
        // 675 MB of f32, as 72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool's naive kernel asks.
        let granted = Plan::new(&manifest("N * 164860"), &symbols, &specs);
        assert!(granted.is_ok(), "{:?}", granted.err());
        let refused = Plan::new(&manifest("N * 262145"), &symbols, &specs)
            .expect_err("more than 1 GiB of scratch for an 8 KiB task");
        let message = refused.to_string();
        assert!(message.contains("at most 1073741824"), "{message}");
    }
}

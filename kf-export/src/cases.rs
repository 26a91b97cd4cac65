//! Drawing a task file's reference cases at export time: the sizes (small ones derived from the
//! tuned sizes, the task's alternative shapes at those, and the tuned sizes themselves where
//! they are small), the inputs (the evaluator's generator over the task's `init` distributions,
//! one input set per case in turn, a fixed seed per case) and the expected outputs (the task's
//! reference through `kf_eval::task::file::FileTask::run_reference`, the code path the evaluator
//! uses, with its cache), written as [`crate::reference::ReferenceCases`] reads them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use kf_eval::task::file::{BufferRole, FileTask, TaskFile, TaskFileError};
use kf_eval::task::{builtin_references, HostBuffer, KernelTask, Sizes};
use kf_eval::verify::{accumulation_allowance, tolerance_for};

use crate::error::ExportError;
use crate::group::write;
use crate::reference::{CaseBuffer, CaseEntry, CaseIndex, INDEX_FILE};

/// The largest buffer of the smallest case, in elements: the smallest tuned sizes are halved
/// (every size at once) until their largest buffer is at most this.
const SMALL_ELEMENTS: usize = 1024;
/// Tuned sizes whose largest buffer is at most this many elements are cases too (there the
/// configuration tuned at them is known to run on the device it was tuned on).
const TUNED_ELEMENTS: usize = 1 << 16;
/// The most bytes all cases' files may take together; the largest cases go first.
const MAX_CASE_BYTES: usize = 16 << 20;
/// The seed of case `i` is this plus `i` (the evaluator's ChaCha8 input generator).
const CASE_SEED: u64 = 0x6b66_6578;

fn task_error(e: TaskFileError) -> ExportError {
    ExportError::TaskFile(Box::new(e))
}

/// The sizes' buffers' elements: the largest one and the sum.
fn footprint(file: &TaskFile, sizes: &Sizes) -> Option<(usize, usize)> {
    let elements = file.buffer_elements(sizes).ok()?;
    let bytes = elements
        .iter()
        .zip(&file.spec.buffers)
        .map(|(n, b)| n * b.dtype.size())
        .sum();
    Some((elements.into_iter().max().unwrap_or(0), bytes))
}

/// The case sizes for a task tuned at `tuned`, smallest first (see the module docs).
fn case_sizes(file: &TaskFile, tuned: &[Sizes]) -> Result<Vec<Sizes>, ExportError> {
    let mut tuned: Vec<Sizes> = tuned
        .iter()
        .map(|s| file.complete_sizes(s))
        .collect::<Result<_, _>>()
        .map_err(task_error)?;
    tuned.sort_by_key(|s| footprint(file, s).map_or(usize::MAX, |f| f.1));
    let Some(base) = tuned.first() else {
        return Ok(Vec::new());
    };
    let mut small = base.clone();
    while footprint(file, &small).is_some_and(|(largest, _)| largest > SMALL_ELEMENTS) {
        let halved: Sizes = small
            .iter()
            .map(|(k, v)| (k.clone(), (v / 2).max(1)))
            .collect();
        if halved == small || footprint(file, &halved).is_none() {
            break;
        }
        small = halved;
    }
    let task = file_task(file, &small)?;
    let mut out = vec![small];
    out.extend(task.alternative_sizes());
    out.extend(
        tuned
            .iter()
            .filter(|s| footprint(file, s).is_some_and(|(largest, _)| largest <= TUNED_ELEMENTS))
            .cloned(),
    );
    let mut unique: Vec<Sizes> = Vec::new();
    for s in out {
        if !unique.contains(&s) && footprint(file, &s).is_some() {
            unique.push(s);
        }
    }
    unique.sort_by_key(|s| footprint(file, s).map_or(usize::MAX, |f| f.1));
    let mut total = 0;
    unique.retain(|s| {
        // Inputs and expected outputs: at most twice the buffers' bytes.
        total += 2 * footprint(file, s).map_or(0, |f| f.1);
        total <= MAX_CASE_BYTES
    });
    Ok(unique)
}

fn file_task(file: &TaskFile, sizes: &Sizes) -> Result<FileTask, ExportError> {
    FileTask::with_references(
        Arc::new(file.clone()),
        sizes,
        Arc::new(builtin_references()),
    )
    .map_err(task_error)
}

/// Little-endian bytes of host data.
fn le_bytes(data: &HostBuffer) -> Vec<u8> {
    match data {
        HostBuffer::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostBuffer::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostBuffer::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// What the task's reference is, for the index (`python scaled_swish_ref.py`); a trusted
/// kernel is refused (it runs on an evaluator's backend, not at export time).
fn reference_name(file: &TaskFile) -> Result<String, ExportError> {
    let r = &file.spec.reference;
    if let Some(p) = &r.python {
        return Ok(format!("python {p}"));
    }
    if let Some(name) = &r.rust {
        return Ok(format!("rust {name}"));
    }
    Err(ExportError::Unsupported {
        run: file.file.clone(),
        what: format!(
            "task `{}` with a kernel reference ({})",
            file.spec.name,
            r.kernel.as_deref().unwrap_or("?")
        ),
        why: "the generated tests compare with outputs a Python or Rust reference computes at \
              export time; a trusted reference kernel runs only inside an evaluator. Give the \
              task file a `[reference] python = …` script"
            .to_owned(),
    })
}

/// Draws the reference cases of `file` for configurations tuned at `tuned` and writes them
/// into `dir` (`index.json` and the `.bin` files); returns the files written.
pub(crate) fn write_cases(
    file: &TaskFile,
    tuned: &[Sizes],
    dir: &Path,
) -> Result<Vec<PathBuf>, ExportError> {
    let reference = reference_name(file)?;
    let spec = &file.spec;
    let mut files = Vec::new();
    let mut put = |rel: &str, bytes: &[u8]| -> Result<(), ExportError> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ExportError::io(parent, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| ExportError::io(&path, e))?;
        files.push(path);
        Ok(())
    };
    let mut cases = Vec::new();
    for (i, sizes) in case_sizes(file, tuned)?.into_iter().enumerate() {
        let task = file_task(file, &sizes)?;
        let seed = CASE_SEED + i as u64;
        let input_set = u32::try_from(i).unwrap_or(0);
        let data = task.inputs(seed, input_set);
        let (expected, _) = task.run_reference(&data).map_err(task_error)?;
        let accumulations = task
            .accumulations(&data)
            .map_err(|e| ExportError::Eval(Box::new(e)))?;
        let base = task.describe().tolerance;
        let mut buffers = Vec::new();
        for (b, ((input, output), n)) in spec.buffers.iter().zip(
            data.iter()
                .zip(&expected)
                .zip(task.shapes().iter().map(|s| s.iter().product::<usize>())),
        ) {
            let mut entry = CaseBuffer {
                name: b.name.clone(),
                dtype: b.dtype.name().to_owned(),
                elements: n,
                input: None,
                expected: None,
                allowance: None,
                tolerance: None,
            };
            if b.role != BufferRole::Output {
                let rel = format!("{i}/{}.bin", b.name);
                put(&rel, &le_bytes(input))?;
                entry.input = Some(rel);
            }
            if b.role != BufferRole::Input {
                let rel = format!("{i}/{}.expected.bin", b.name);
                put(&rel, &le_bytes(output))?;
                entry.expected = Some(rel);
                entry.tolerance = Some(tolerance_for(b.dtype, &base));
                let position = spec.buffers.iter().position(|x| x.name == b.name);
                if let Some(Some(acc)) = position.and_then(|p| accumulations.get(p)) {
                    let allowance: Vec<u8> = accumulation_allowance(b.dtype, acc)
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect();
                    let rel = format!("{i}/{}.allowance.bin", b.name);
                    put(&rel, &allowance)?;
                    entry.allowance = Some(rel);
                }
            }
            buffers.push(entry);
        }
        cases.push(CaseEntry {
            sizes: sizes.clone(),
            scalars: spec
                .scalars
                .iter()
                .map(|s| (s.name.clone(), s.value.as_f64()))
                .collect::<IndexMap<_, _>>(),
            input_set,
            seed,
            buffers,
        });
    }
    let index = CaseIndex {
        task: spec.name.clone(),
        reference,
        cases,
    };
    let text = serde_json::to_string_pretty(&index).map_err(|e| ExportError::BadRun {
        path: dir.join(INDEX_FILE),
        message: format!("the index of reference cases as JSON: {e}"),
    })?;
    let index_path = dir.join(INDEX_FILE);
    write(&index_path, &text)?;
    files.push(index_path);
    Ok(files)
}

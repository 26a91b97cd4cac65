//! Operator families: a task file that declares its family (`[family] kind = "matmul"`, a row
//! softmax) is searched with the family's templates bound to its kernel interface
//! ([`kf_mutate::TaskBinding`]): the GEMM templates for a matrix product, the softmax templates
//! for a row softmax. OpenCL C only (the bound templates are OpenCL C); other languages and
//! other families keep the parameter moves over the task's own kernels.

use kf_core::Language;
use kf_eval::taskfile::{Dtype, FamilySpec, MatmulFamily, RowFamily};
use kf_eval::tasks::{ArgSpec, KernelTask, Role};
use kf_mutate::{StructuralMutator, TaskBinding, TemplateLibrary};

use crate::SearchError;

/// The family's templates bound to `task` and a structural mutator over them with the
/// family's strategies, or `None` where the task declares no family this search has templates
/// for (in `language`, at its transposes, its op).
pub(super) fn family_templates(
    task: &dyn KernelTask,
    language: Language,
) -> Result<Option<(TemplateLibrary, StructuralMutator)>, SearchError> {
    if language != Language::OpenCl {
        return Ok(None);
    }
    let Some(family) = task.family() else {
        return Ok(None);
    };
    let Some(signature) = signature(task) else {
        return Ok(None);
    };
    let (structural, binding) = match &family {
        FamilySpec::Matmul(m) if m.transpose_a || m.transpose_b => {
            let gemm = StructuralMutator::builtin_for(language)?;
            let strided =
                StructuralMutator::new(TemplateLibrary::strided_gemm()?, gemm.strategies().clone());
            (strided, strided_binding(task.name(), signature, m))
        }
        FamilySpec::Matmul(m) => (
            StructuralMutator::builtin_for(language)?,
            matmul_binding(task.name(), signature, m),
        ),
        FamilySpec::RowNorm(r) if r.op.as_deref() == Some("softmax") => (
            StructuralMutator::softmax_for(language)?,
            softmax_binding(task.name(), signature, r),
        ),
        _ => return Ok(None),
    };
    let binding = binding.tag(family.kind());
    let library = structural.templates().bound_to(&binding)?;
    let mutator = StructuralMutator::new(library.clone(), structural.strategies().clone());
    Ok(Some((library, mutator)))
}

/// The task's kernel parameters in order as OpenCL C declarations, or `None` where one is not
/// an f32 buffer, an `int` size or a scalar.
fn signature(task: &dyn KernelTask) -> Option<TaskBinding> {
    let interface = task.describe().interface?;
    let buffers = task.buffers();
    let args = task.args();
    if args.len() != interface.args.len() {
        return None;
    }
    let mut binding = TaskBinding::new(task.name(), "");
    for (arg, name) in args.iter().zip(&interface.args) {
        let decl = match arg {
            ArgSpec::Size(_) | ArgSpec::I32(_) => "const int",
            ArgSpec::F32(_) => "const float",
            ArgSpec::Buffer(i) => {
                let buffer = buffers.get(*i)?;
                if buffer.dtype != Dtype::F32 {
                    return None;
                }
                match buffer.role {
                    Role::Input => "__global const float*",
                    _ => "__global float*",
                }
            }
        };
        binding = binding.param(decl, name.clone());
    }
    Some(binding)
}

/// The GEMM templates' parameters (`M N K A B C`) bound to a matrix product with row-major
/// factors.
fn matmul_binding(task: &str, signature: TaskBinding, m: &MatmulFamily) -> TaskBinding {
    let mut binding = signature
        .bind("M", m.m.text())
        .bind("N", m.n.text())
        .bind("K", m.k.text())
        .bind("A", m.a.clone())
        .bind("B", m.b.clone())
        .bind("C", m.c.clone());
    binding.entry = format!("{}_gemm", entry_stem(task));
    binding
}

/// The strided GEMM template's parameters bound to a matrix product with a transposed factor:
/// A stored `K × M` is read with strides (1, M), B stored `N × K` with (1, K).
fn strided_binding(task: &str, signature: TaskBinding, m: &MatmulFamily) -> TaskBinding {
    let (mm, n, k) = (m.m.text(), m.n.text(), m.k.text());
    let (sam, sak) = if m.transpose_a {
        ("1".to_owned(), format!("({mm})"))
    } else {
        (format!("({k})"), "1".to_owned())
    };
    let (sbk, sbn) = if m.transpose_b {
        ("1".to_owned(), format!("({k})"))
    } else {
        (format!("({n})"), "1".to_owned())
    };
    let mut binding = signature
        .bind("M", mm)
        .bind("N", n)
        .bind("K", k)
        .bind("SAM", sam)
        .bind("SAK", sak)
        .bind("SBK", sbk)
        .bind("SBN", sbn)
        .bind("A", m.a.clone())
        .bind("B", m.b.clone())
        .bind("C", m.c.clone());
    binding.entry = format!("{}_gemm", entry_stem(task));
    binding
}

/// The softmax templates' parameters (`ROWS COLS X Y`) bound to a row softmax.
fn softmax_binding(task: &str, signature: TaskBinding, r: &RowFamily) -> TaskBinding {
    let mut binding = signature
        .bind("ROWS", r.rows.text())
        .bind("COLS", r.length.text())
        .bind("X", r.input.clone())
        .bind("Y", r.output.clone());
    binding.entry = format!("{}_softmax", entry_stem(task));
    binding
}

/// A C identifier from the task's name (`kb_1_Square…` stays, `my-task` becomes `my_task`).
fn entry_stem(task: &str) -> String {
    task.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

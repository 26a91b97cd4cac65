//! Operator families: a task file that declares its family (`[family] kind = "matmul"`, a row
//! softmax) is searched with the family's templates bound to its kernel interface
//! ([`kf_mutate::TaskBinding`]): the GEMM templates for a matrix product (the one that reads
//! both factors along K for a transposed B, the strided ones for a transposed factor, the
//! matrix-vector template for one column; with the family's `epilogue` fused into their
//! stores, and then without the split-K template), the softmax templates
//! for a row softmax, the element-wise map template for a map with an `expr`, the row
//! normalisation template for a layer, RMS, L1 or L2 norm, the strided row reduction template
//! for a sum, mean, maximum or minimum along a dimension that is not the last, the direct
//! convolution template for a 1-D convolution. OpenCL C only (the bound templates
//! are OpenCL C); other languages and other families keep the parameter moves over the task's
//! own kernels.

use kf_core::Language;
use kf_eval::task::file::{Conv1dFamily, Dtype, FamilySpec, MapFamily, MatmulFamily, RowFamily};
use kf_eval::task::{ArgSpec, KernelTask, Role};
use kf_mutate::{StructuralMutator, TaskBinding, TemplateLibrary};

use crate::SearchError;

/// The family's templates bound to `task` (the task file's `[family]`: each template's
/// entry, parameters and sizes rewritten to the task's kernel interface) and a structural
/// mutator over them with the family's strategies, or `None` where the task declares no
/// family this search has templates for (in `language`, at its transposes, its op). The
/// offline search seeds a family task with these; use them directly to evaluate or tune one
/// template of the family on the task.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use kf_core::Language;
/// use kf_eval::task::file::{FileTask, TaskFile};
///
/// let file = TaskFile::load(std::path::Path::new("tasks/kernelbench/23_Softmax/task.toml"))?;
/// let task = FileTask::new(file, &kf_eval::task::parse_sizes("")?)?;
/// if let Some((library, _mutator)) = kf_search::family_templates(&task, Language::OpenCl)? {
///     for template in library.templates() {
///         println!("{}", template.name());
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub fn family_templates(
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
    if let FamilySpec::Matmul(m) = &family {
        return matmul_templates(task.name(), signature, m, language).map(Some);
    }
    let (structural, binding) = match &family {
        FamilySpec::RowNorm(r) if r.op.as_deref() == Some("softmax") && r.inner.is_none() => (
            StructuralMutator::softmax_for(language)?,
            softmax_binding(task.name(), signature, r),
        ),
        FamilySpec::RowNorm(r) => match norm_binding(task.name(), signature, r) {
            Some(binding) if r.inner.is_some() => (StructuralMutator::row_norm_strided()?, binding),
            Some(binding) => (StructuralMutator::row_norm()?, binding),
            None => return Ok(None),
        },
        FamilySpec::RowReduce(r) => match reduce_binding(task.name(), signature, r) {
            Some(binding) => (StructuralMutator::row_reduce_strided()?, binding),
            None => return Ok(None),
        },
        FamilySpec::Conv1d(c) => (
            StructuralMutator::conv1d()?,
            conv1d_binding(task.name(), signature, c),
        ),
        FamilySpec::Map(m) => match map_binding(task, signature, m) {
            Some(binding) => (StructuralMutator::map()?, binding),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let binding = binding.tag(family.kind());
    let library = structural.templates().bound_to(&binding)?;
    let mutator = StructuralMutator::new(library.clone(), structural.strategies().clone());
    Ok(Some((library, mutator)))
}

/// The GEMM templates for a matrix product, each bound to the task with the binding its kernel
/// interface needs, and the GEMM strategies over them: the matrix-vector template for one
/// column; for a transposed B and a row-major A (a linear layer) the template that reads both
/// factors along K, then the strided one; for another transpose the strided templates; else
/// the builtin GEMM templates. With an `epilogue` only the templates that apply one at their
/// store are offered (not the split-K template, whose partial sums are added by the store).
fn matmul_templates(
    task: &str,
    signature: TaskBinding,
    m: &MatmulFamily,
    language: Language,
) -> Result<(TemplateLibrary, StructuralMutator), SearchError> {
    let gemm = StructuralMutator::builtin_for(language)?;
    let mut parts: Vec<(TemplateLibrary, TaskBinding)> = Vec::new();
    if is_matvec(m) {
        let matvec = StructuralMutator::matvec()?;
        let binding = matvec_binding(task, signature, m);
        let library = with_epilogue(matvec.templates(), binding, m)?;
        let strategies = matvec.strategies().clone();
        return Ok((library.clone(), StructuralMutator::new(library, strategies)));
    }
    if m.transpose_a || m.transpose_b {
        if m.transpose_b && !m.transpose_a {
            parts.push((
                TemplateLibrary::nt_gemm()?,
                matmul_binding(task, signature.clone(), m),
            ));
        }
        // A transposed A with a row-major B: the vector template over B's rows first.
        if !m.transpose_b {
            parts.push((
                TemplateLibrary::strided_a_gemm()?,
                strided_binding(task, signature.clone(), m),
            ));
        }
        parts.push((
            TemplateLibrary::strided_gemm()?,
            strided_binding(task, signature, m),
        ));
    } else {
        parts.push((gemm.templates().clone(), matmul_binding(task, signature, m)));
    }
    let mut library = TemplateLibrary::new();
    for (templates, binding) in parts {
        for template in with_epilogue(&templates, binding, m)?.templates() {
            library = library.with(template.clone());
        }
    }
    Ok((
        library.clone(),
        StructuralMutator::new(library, gemm.strategies().clone()),
    ))
}

/// `templates` bound to the task: with the family's epilogue defined as `EPILOGUE(acc, row,
/// col)` and fixed on (`HAS_EPILOGUE`), leaving out the templates that cannot apply one;
/// without, fixed off.
fn with_epilogue(
    templates: &TemplateLibrary,
    binding: TaskBinding,
    m: &MatmulFamily,
) -> Result<TemplateLibrary, SearchError> {
    let binding = binding.tag("matmul");
    let (binding, offered) = match &m.epilogue {
        Some(epilogue) => {
            let binding = binding
                .define("EPILOGUE", ["acc", "row", "col"], with_accessors(epilogue))
                .fix("HAS_EPILOGUE", 1);
            let mut offered = TemplateLibrary::new();
            for template in templates
                .templates()
                .iter()
                .filter(|t| t.text().contains("EPILOGUE("))
            {
                offered = offered.with(template.clone());
            }
            (binding, offered)
        }
        None => (binding.fix("HAS_EPILOGUE", 0), templates.clone()),
    };
    Ok(offered.bound_to(&binding)?)
}

/// An epilogue's accessors as the templates' macros, which take the element's indices
/// explicitly (so that no name at the template's store is captured) and load vectors where a
/// template stores vectors: `col_of(b)` → `KF_COL_OF(col, b)`, `row_of(b)` → `KF_ROW_OF(row,
/// b)`, `at(b)` → `KF_AT(row, col, b)`.
fn with_accessors(epilogue: &str) -> String {
    let mut out = String::with_capacity(epilogue.len() + 32);
    let mut rest = epilogue;
    'scan: while !rest.is_empty() {
        let at_boundary = out
            .chars()
            .last()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        if at_boundary {
            for (accessor, macro_head) in [
                ("col_of(", "KF_COL_OF(col, "),
                ("row_of(", "KF_ROW_OF(row, "),
                ("at(", "KF_AT(row, col, "),
            ] {
                if let Some(after) = rest.strip_prefix(accessor) {
                    out.push_str(macro_head);
                    rest = after;
                    continue 'scan;
                }
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// The task's kernel parameters in order as OpenCL C declarations, or `None` where one is not
/// an f32 or i32 buffer, an `int` size or a scalar.
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
                match (buffer.dtype, buffer.role) {
                    (Dtype::F32, Role::Input) => "__global const float*",
                    (Dtype::F32, _) => "__global float*",
                    // An argmax's indices.
                    (Dtype::I32, Role::Input) => "__global const int*",
                    (Dtype::I32, _) => "__global int*",
                    _ => return None,
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

/// A matrix-vector product: one column (`n = 1`) and A stored row-major (B's layout is the
/// same either way).
fn is_matvec(m: &MatmulFamily) -> bool {
    m.n.text().trim() == "1" && !m.transpose_a
}

/// The matrix-vector template's parameters (`M K A X Y`) bound to a product with `n = 1`.
fn matvec_binding(task: &str, signature: TaskBinding, m: &MatmulFamily) -> TaskBinding {
    let mut binding = signature
        .bind("M", m.m.text())
        .bind("K", m.k.text())
        .bind("A", m.a.clone())
        .bind("X", m.b.clone())
        .bind("Y", m.c.clone());
    binding.entry = format!("{}_matvec", entry_stem(task));
    binding
}

/// The strided GEMM templates' parameters bound to a matrix product with a transposed factor:
/// A stored `K × M` is read with strides (1, M), B stored `N × K` with (1, K) (the strided-A
/// template, offered only for a row-major B, reads B's rows with vector loads).
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

/// The element-wise map template's parameters (`N X Y`, the macro `MAP`) bound to a map with
/// an expression: `N` is the output's element count, `MAP(input)` the family's `expr`. `None`
/// without an expression (the template has nothing to compute).
fn map_binding(
    task: &dyn KernelTask,
    signature: TaskBinding,
    m: &MapFamily,
) -> Option<TaskBinding> {
    let expr = m.expr.as_ref()?;
    let interface = task.describe().interface?;
    let output = interface.buffers.iter().find(|b| b.name == m.output)?;
    let elements = output
        .shape
        .iter()
        .map(|d| format!("({d})"))
        .collect::<Vec<_>>()
        .join(" * ");
    let mut binding = signature
        .bind(
            "N",
            if elements.is_empty() {
                "1".into()
            } else {
                elements
            },
        )
        .bind("X", m.input.clone())
        .bind("Y", m.output.clone())
        .define("MAP", [m.input.clone()], expr.clone());
    binding.entry = format!("{}_map", entry_stem(task.name()));
    Some(binding)
}

/// The row normalisation template's parameters (`ROWS LEN EPS X Y W B`) bound to a layer,
/// RMS, L1 or L2 norm over contiguous rows, or the strided template's (`OUTER LEN INNER EPS X
/// Y W B`) where the rows run along a dimension that is not the last (`inner`); the operation
/// and the affine terms fixed (`NORM_OP`, `HAS_W`, `HAS_B`); `None` for another operation.
fn norm_binding(task: &str, signature: TaskBinding, r: &RowFamily) -> Option<TaskBinding> {
    let op = match r.op.as_deref()? {
        "layer_norm" => 1,
        "rms_norm" => 2,
        "l1_norm" => 3,
        "l2_norm" => 4,
        _ => return None,
    };
    // Written as a decimal float literal: no identifier for the binding to rename.
    let eps = format!("{:?}f", r.eps.unwrap_or(1e-5) as f32);
    // Rows along a dimension that is not the last: blocks of `length × inner` floats.
    let mut binding = match &r.inner {
        Some(inner) => signature
            .bind("OUTER", format!("({}) / ({})", r.rows.text(), inner.text()))
            .bind("INNER", inner.text()),
        None => signature.bind("ROWS", r.rows.text()),
    };
    binding = binding
        .bind("LEN", r.length.text())
        .bind("EPS", eps)
        .bind("X", r.input.clone())
        .bind("Y", r.output.clone())
        .bind("W", r.weight.clone().unwrap_or_else(|| "0".into()))
        .bind("B", r.bias.clone().unwrap_or_else(|| "0".into()))
        .fix("NORM_OP", op)
        .fix("HAS_W", i64::from(r.weight.is_some()))
        .fix("HAS_B", i64::from(r.bias.is_some()));
    binding.entry = format!("{}_{}", entry_stem(task), r.op.as_deref()?);
    Some(binding)
}

/// The strided row reduction template's parameters (`OUTER LEN INNER X Y`) bound to a sum,
/// mean, maximum, minimum, argmax or argmin of rows along a dimension that is not the last (`inner`), the
/// operation fixed (`REDUCE_OP`); `None` for contiguous rows or another operation.
fn reduce_binding(task: &str, signature: TaskBinding, r: &RowFamily) -> Option<TaskBinding> {
    let op = match r.op.as_deref()? {
        "sum" => 1,
        "mean" => 2,
        "max" | "amax" => 3,
        "min" | "amin" => 4,
        "argmax" => 5,
        "argmin" => 6,
        _ => return None,
    };
    let inner = r.inner.as_ref()?;
    let mut binding = signature
        .bind("OUTER", format!("({}) / ({})", r.rows.text(), inner.text()))
        .bind("LEN", r.length.text())
        .bind("INNER", inner.text())
        .bind("X", r.input.clone())
        .bind("Y", r.output.clone())
        .fix("REDUCE_OP", op);
    binding.entry = format!("{}_{}", entry_stem(task), r.op.as_deref()?);
    Some(binding)
}

/// The 1-D convolution template's parameters (`B CI CO L K S D P LOUT X W Y BIAS`) bound to a
/// convolution; the output length is PyTorch's formula over the bound sizes, and `HAS_BIAS`
/// and `PADDED` are fixed (a literal zero padding needs no bounds checks).
fn conv1d_binding(task: &str, signature: TaskBinding, c: &Conv1dFamily) -> TaskBinding {
    let text = |e: &Option<kf_eval::task::file::ExprText>, default: &str| {
        e.as_ref().map_or_else(|| default.to_owned(), |e| e.text())
    };
    let (stride, dilation, padding) = (
        text(&c.stride, "1"),
        text(&c.dilation, "1"),
        text(&c.padding, "0"),
    );
    let (length, kernel) = (c.length.text(), c.kernel_size.text());
    let length_out = format!(
        "(({length}) + 2 * ({padding}) - ({dilation}) * (({kernel}) - 1) - 1) / ({stride}) + 1"
    );
    let padded = padding.trim() != "0";
    let mut binding = signature
        .bind("B", c.batch.text())
        .bind("CI", c.in_channels.text())
        .bind("CO", c.out_channels.text())
        .bind("L", length)
        .bind("K", kernel)
        .bind("S", stride)
        .bind("D", dilation)
        .bind("P", padding)
        .bind("LOUT", length_out)
        .bind("X", c.input.clone())
        .bind("W", c.weight.clone())
        .bind("Y", c.output.clone())
        .bind("BIAS", c.bias.clone().unwrap_or_else(|| "0".into()))
        .fix("HAS_BIAS", i64::from(c.bias.is_some()))
        .fix("PADDED", i64::from(padded));
    binding.entry = format!("{}_conv1d", entry_stem(task));
    binding
}

/// A C identifier from the task's name (`kb_1_Square…` stays, `my-task` becomes `my_task`).
fn entry_stem(task: &str) -> String {
    task.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accessors become the templates' macros with explicit indices; a name that merely
    /// ends like one (`flat(`, `my_col_of(`) is left alone.
    #[test]
    fn accessors_become_template_macros() {
        assert_eq!(
            with_accessors("fmax(acc + col_of(bias), 0.0f) * row_of(s) + at(res) + flat(x)"),
            "fmax(acc + KF_COL_OF(col, bias), 0.0f) * KF_ROW_OF(row, s) + KF_AT(row, col, res) \
             + flat(x)"
        );
        assert_eq!(with_accessors("my_col_of(b)[0]"), "my_col_of(b)[0]");
    }
}

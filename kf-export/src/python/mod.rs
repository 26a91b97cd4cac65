//! `kf export --python`: the best kernels of one or more runs as a Python module over
//! `pyopencl`, NumPy arrays in and NumPy arrays out, with a pytest test beside it.
//!
//! The module is one file, `<name>.py`: a small runtime (device facts by the names manifests
//! use, the dispatch rule of [`crate::dispatch`], constraint checks naming the failing rule,
//! a `Kernels` object that keeps built programs per command queue), then the tables. Each
//! configuration's manifest expressions are translated to Python once, at export time, with
//! the configuration's parameters as constants ([`expr`]), and its `clBuildProgram` options
//! are the ones the search compiled it with ([`kf_backend_opencl::OpenClBackend::build_options`]).
//! So the module needs neither KernelFoundry nor a TOML or expression parser at run time: only
//! NumPy and pyopencl.
//!
//! `test_<name>.py` checks every configuration against a NumPy reference at a small size
//! where its constraints hold on the test machine's device, and the dispatched call.

mod expr;
mod names;
mod pytest;

use std::fmt::Write as _;
use std::path::PathBuf;

use kf_backend_opencl::OpenClBackend;
use kf_core::CompileOptions;
use kf_manifest::Manifest;

use crate::error::ExportError;
use crate::group::{group, group_doc_lines, write, TaskGroup};
use crate::run::TunedKernel;
use crate::signature::{Access, ArgSig, Dtype, Signature};
use crate::Exported;
use expr::{string_literal, to_python};
use names::{py_params, PY_KEYWORDS};
use pytest::test_py;

/// The runtime part of every generated module (kept as a Python file so that it reads, and
/// lints, as Python).
const RUNTIME: &str = include_str!("runtime.py");

/// What [`export_python`] writes and where.
#[derive(Debug, Clone)]
pub struct PythonExport {
    /// The run directories whose best kernels are exported, in table order (a folder of runs
    /// by size stands for its runs).
    pub runs: Vec<PathBuf>,
    /// The folder the module and its test are written into (created; files overwritten).
    pub out: PathBuf,
    /// The module's name: `<module>.py` and `test_<module>.py`.
    pub module: String,
}

impl PythonExport {
    /// An export of `runs` into `out` as the module `kf_kernels`.
    pub fn new(runs: Vec<PathBuf>, out: impl Into<PathBuf>) -> Self {
        PythonExport {
            runs,
            out: out.into(),
            module: "kf_kernels".to_owned(),
        }
    }
}

/// Writes the module of [`PythonExport`] and its pytest test: reads every run, checks that
/// each can be exported, translates the manifests' expressions.
///
/// # Errors
///
/// [`ExportError::NoRuns`], [`ExportError::BadModuleName`] for a name that is not a Python
/// identifier, the errors of [`TunedKernel::load`], [`ExportError::Unsupported`] for a run of
/// another backend, language or task or an expression with no Python translation, and
/// [`ExportError::Io`] when writing fails.
pub fn export_python(export: &PythonExport) -> Result<Exported, ExportError> {
    if export.runs.is_empty() {
        return Err(ExportError::NoRuns);
    }
    let name = &export.module;
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&name.as_str());
    if !valid {
        return Err(ExportError::BadModuleName { name: name.clone() });
    }
    let kernels = TunedKernel::load_runs(&export.runs)?;
    let groups = group(&kernels)?;
    let module = module_py(&groups)?;
    let test = test_py(name, &groups);
    let mut files = Vec::new();
    for (file, text) in [
        (format!("{name}.py"), module),
        (format!("test_{name}.py"), test),
    ] {
        let path = export.out.join(file);
        write(&path, &text)?;
        files.push(path);
    }
    for g in &groups {
        if let Some(file) = g.task_file {
            let dir = export.out.join("reference").join(g.function());
            files.extend(crate::cases::write_cases(file, &g.tuned_sizes(), &dir)?);
        }
    }
    Ok(Exported { kernels, files })
}

fn numpy_dtype(d: Dtype) -> &'static str {
    match d {
        Dtype::F32 => "np.float32",
        Dtype::F16 => "np.float16",
        Dtype::I32 => "np.int32",
    }
}

/// `"<text>", lambda s: <expr>` for a manifest or signature expression.
fn text_and_lambda(
    text: &str,
    params: &kf_core::ParamValues,
    run: &TunedKernel,
) -> Result<String, ExportError> {
    let py = to_python(text, params).map_err(|e| ExportError::Unsupported {
        run: run.run.display().to_string(),
        what: format!("the expression `{}`", e.expr),
        why: format!(
            "{} has no Python translation in kf export (the module evaluates manifest expressions itself)",
            e.what
        ),
    })?;
    Ok(format!("{}, lambda s: {py}", string_literal(text)))
}

fn configuration_py(out: &mut String, name: &str, k: &TunedKernel) -> Result<(), ExportError> {
    let manifest = Manifest::parse(&k.manifest, "best_kernel.toml", None)?;
    let params = manifest.resolve_params(&k.params)?;
    let options = OpenClBackend::build_options(
        &params,
        &CompileOptions {
            flags: manifest.compile_flags(&params)?,
            arch: None,
        },
    )
    .map_err(|e| ExportError::Unsupported {
        run: k.run.display().to_string(),
        what: "its build options".to_owned(),
        why: e.to_string(),
    })?;
    let list = |exprs: &[kf_manifest::Expr]| -> Result<String, ExportError> {
        let items = exprs
            .iter()
            .map(|e| text_and_lambda(e.text(), &params, k).map(|t| format!("({t})")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(format!("[{}]", items.join(", ")))
    };
    let tuned: Vec<String> = k
        .sizes
        .iter()
        .map(|(n, v)| format!("{}: {v}", string_literal(n)))
        .collect();
    let param_items: Vec<String> = params
        .iter()
        .map(|(n, v)| format!("{}: {}", string_literal(n), expr::param_literal(v)))
        .collect();
    let local = match &manifest.local {
        Some(l) => list(l)?,
        None => "None".to_owned(),
    };
    let _ = write!(
        out,
        "        _Configuration(\n\
         \x20           name={name},\n\
         \x20           run={run},\n\
         \x20           device={device},\n\
         \x20           driver={driver},\n\
         \x20           tuned_sizes={{{tuned}}},\n\
         \x20           params={{{params}}},\n\
         \x20           source={source},\n\
         \x20           entry={entry},\n\
         \x20           options={options},\n\
         \x20           gflops={gflops},\n\
         \x20           constraints={constraints},\n\
         \x20           global_size={global},\n\
         \x20           local_size={local},\n\
         \x20       ),\n",
        name = string_literal(name),
        run = string_literal(&k.run.display().to_string()),
        device = string_literal(&k.device),
        driver = k
            .driver
            .as_deref()
            .map_or("None".to_owned(), string_literal),
        tuned = tuned.join(", "),
        params = param_items.join(", "),
        source = string_literal(&k.source),
        entry = string_literal(&manifest.entry),
        options = string_literal(&options),
        gflops = k.gflops.map_or("None".to_owned(), |g| format!("{g:?}")),
        constraints = list(&manifest.constraints)?,
        global = list(&manifest.global)?,
    );
    Ok(())
}

fn module_py(groups: &[TaskGroup<'_>]) -> Result<String, ExportError> {
    let mut out = format!(
        "# Written by `kf export --python` (kf-export {version}); regenerate it rather than edit it.\n\
         \"\"\"Tuned kernels exported by `kf export` from KernelFoundry search runs.\n\
         \n\
         Each task has a function that takes NumPy arrays (converted to the kernel's element\n\
         type and flattened; the sizes are given explicitly) and returns its outputs as new\n\
         flat NumPy arrays. It picks one of the task's tuned configurations for the caller's\n\
         device and sizes: among those whose manifest constraints hold at the caller's sizes,\n\
         one tuned on the caller's device (by name and driver; else any device), tuned at the\n\
         nearest sizes (the sum over size names of |ln(caller / tuned)|; ties to the larger\n\
         tuned sizes). `<task>_with` runs a given configuration, `<task>_choice` says which one\n\
         a call would take. Calls go through a `Kernels` object (default: one made on first\n\
         use from `pyopencl.create_some_context`, which honours PYOPENCL_CTX) that keeps the\n\
         built programs; pass `kernels=Kernels(queue)` to use your own command queue.\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    for g in groups {
        let _ = writeln!(out, "\n## `{}`\n", g.signature.task);
        for line in group_doc_lines(g) {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push_str("\"\"\"\n\n");
    out.push_str(RUNTIME);
    for g in groups {
        task_py(&mut out, g)?;
    }
    Ok(out)
}

fn task_py(out: &mut String, g: &TaskGroup<'_>) -> Result<(), ExportError> {
    let task = g.function();
    let table = format!("_{}", task.to_ascii_uppercase());
    task_table_py(out, g, &table)?;
    let upper = task.to_ascii_uppercase();
    let (size_params, scalar_params, buffer_params) = py_params(g.signature);
    scalar_constants_py(out, g.signature, &scalar_params, &upper);
    let calls = PyCalls {
        task: &task,
        upper: &upper,
        table: &table,
        size_params,
        scalar_params,
        buffer_params,
    };
    calls.write(out, g);
    Ok(())
}

/// Writes the task's `_Task` table: its sizes, scalars, buffers (lengths as functions of the
/// sizes), the kernel's argument order, and its configurations.
fn task_table_py(out: &mut String, g: &TaskGroup<'_>, table: &str) -> Result<(), ExportError> {
    let sig = g.signature;
    let buffers = buffer_entries_py(g)?;
    let scalars: Vec<String> = sig
        .scalars
        .iter()
        .map(|s| format!("({}, {})", string_literal(&s.name), numpy_dtype(s.dtype)))
        .collect();
    let args: Vec<String> = sig
        .args
        .iter()
        .map(|a| match a {
            ArgSig::Size(n) => format!("(\"size\", {})", string_literal(n)),
            ArgSig::Scalar(i) => format!("(\"scalar\", {i})"),
            ArgSig::Buffer(i) => format!("(\"buffer\", {i})"),
        })
        .collect();
    let sizes: Vec<String> = sig.sizes.iter().map(|s| string_literal(s)).collect();
    let _ = write!(
        out,
        "\n\n{table} = _Task(\n\
         \x20   {name},\n\
         \x20   [{sizes}],\n\
         \x20   [{scalars}],\n\
         \x20   [{buffers}],\n\
         \x20   [{args}],\n\
         \x20   [\n",
        name = string_literal(&sig.task),
        sizes = sizes.join(", "),
        scalars = scalars.join(", "),
        buffers = buffers.join(", "),
        args = args.join(", "),
    );
    for (name, k) in &g.kernels {
        configuration_py(out, name, k)?;
    }
    out.push_str("    ],\n)\n");
    Ok(())
}

/// The table's buffer entries: name, NumPy type, length (text and function of the sizes,
/// through the first configuration's manifest) and access. None without a configuration.
fn buffer_entries_py(g: &TaskGroup<'_>) -> Result<Vec<String>, ExportError> {
    let no_params = kf_core::ParamValues::default();
    let Some(first) = g.kernels.first().map(|(_, k)| *k) else {
        return Ok(Vec::new());
    };
    let mut buffers = Vec::new();
    for b in g.signature.buffers.iter() {
        let len = text_and_lambda(&b.len, &no_params, first)?;
        buffers.push(format!(
            "({}, {}, {len}, {})",
            string_literal(&b.name),
            numpy_dtype(b.dtype),
            string_literal(match b.access {
                Access::Input => "in",
                Access::Output => "out",
                Access::InOut => "inout",
            })
        ));
    }
    Ok(buffers)
}

/// Writes a constant per scalar with the task file's value (the one the search measured
/// with).
fn scalar_constants_py(out: &mut String, sig: &Signature, scalar_params: &[String], upper: &str) {
    for (s, n) in sig.scalars.iter().zip(scalar_params) {
        let value = if s.dtype == Dtype::I32 {
            format!("{}", s.value as i64)
        } else {
            format!("{:?}", s.value)
        };
        let _ = write!(
            out,
            "\n{upper}_{} = {value}\n\"\"\"The task file's value of the scalar `{}` (the search measured with it).\"\"\"\n",
            n.to_ascii_uppercase(),
            s.name
        );
    }
}

/// The names a task's Python functions are written with.
struct PyCalls<'a> {
    /// The functions' name (`rowsoft`).
    task: &'a str,
    /// The prefix of the task's constants (`ROWSOFT`).
    upper: &'a str,
    /// The task's table (`_ROWSOFT`).
    table: &'a str,
    size_params: Vec<String>,
    scalar_params: Vec<String>,
    buffer_params: Vec<String>,
}

impl PyCalls<'_> {
    /// Writes the configurations' names and the task's functions: the dispatched call,
    /// `_with` (a given configuration), `_choice` and `_check`.
    fn write(self, out: &mut String, g: &TaskGroup<'_>) {
        let PyCalls {
            task,
            upper,
            table,
            size_params,
            scalar_params,
            buffer_params,
        } = self;
        let sig = g.signature;
        let read: Vec<String> = sig
            .buffers
            .iter()
            .zip(&buffer_params)
            .filter(|(b, _)| b.access.reads())
            .map(|(_, n)| n.clone())
            .collect();
        let written: Vec<&str> = sig
            .buffers
            .iter()
            .filter(|b| b.access.writes())
            .map(|b| b.name.as_ref())
            .collect();
        let sizes_list = format!("[{}]", size_params.join(", "));
        let scalars_list = format!("[{}]", scalar_params.join(", "));
        let arrays_list = format!("[{}]", read.join(", "));
        let params = [size_params.clone(), scalar_params, read]
            .concat()
            .join(", ");
        let sizes_only = size_params.join(", ");
        let names: Vec<&str> = g.kernels.iter().map(|(n, _)| n.as_str()).collect();
        let _ = write!(
            out,
            "\n{upper}_CONFIGURATIONS = [c.name for c in {table}.configurations]\n\
             \"\"\"The names of `{task}`'s configurations, in table order: {names}.\"\"\"\n\
             \n\n\
             def {task}({params}, *, kernels=None):\n\
             \x20   \"\"\"Runs `{task}` with the configuration the dispatch rule picks; returns {ret}.\"\"\"\n\
             \x20   return _kernels(kernels).call({table}, None, {sizes_list}, {scalars_list}, {arrays_list})[0]\n\
             \n\n\
             def {task}_with(index, {params}, *, kernels=None):\n\
             \x20   \"\"\"Runs configuration `index` of `{upper}_CONFIGURATIONS`; raises ConstraintFailed\n\
             \x20   naming the rule when it cannot run at these sizes.\"\"\"\n\
             \x20   return _kernels(kernels).call({table}, index, {sizes_list}, {scalars_list}, {arrays_list})[0]\n\
             \n\n\
             def {task}_choice({sizes_only}, *, kernels=None):\n\
             \x20   \"\"\"The index of the configuration a call at these sizes takes on this device.\"\"\"\n\
             \x20   return _kernels(kernels).choose({table}, {sizes_list})\n\
             \n\n\
             def {task}_check(index, {sizes_only}, *, kernels=None):\n\
             \x20   \"\"\"Raises ConstraintFailed when configuration `index` cannot run at these sizes.\"\"\"\n\
             \x20   _kernels(kernels).check({table}, index, {sizes_list})\n",
            names = names.join(", "),
            ret = if written.len() == 1 {
                format!("{} as a flat NumPy array", written[0])
            } else {
                format!("({}) as flat NumPy arrays", written.join(", "))
            },
        );
    }
}

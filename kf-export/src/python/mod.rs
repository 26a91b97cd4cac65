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

use std::fmt::Write as _;
use std::path::PathBuf;

use kf_backend_opencl::OpenClBackend;
use kf_core::CompileOptions;
use kf_manifest::Manifest;

use crate::error::ExportError;
use crate::generate::{group, group_doc_lines, write, TaskGroup};
use crate::run::TunedKernel;
use crate::signature::{ArgSig, Dtype};
use crate::Exported;
use expr::{string_literal, to_python};

/// The runtime part of every generated module (kept as a Python file so that it reads, and
/// lints, as Python).
const RUNTIME: &str = include_str!("runtime.py");

/// What [`export_python`] writes and where.
#[derive(Debug, Clone)]
pub struct PythonExport {
    /// The run directories whose best kernels are exported, in table order.
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
    let kernels = export
        .runs
        .iter()
        .map(|r| TunedKernel::load(r))
        .collect::<Result<Vec<_>, _>>()?;
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
    Ok(Exported { kernels, files })
}

const PY_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A Python parameter name for a task's size (`M` → `m`), clear of keywords and the
/// generated functions' own parameters.
fn py_ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if PY_KEYWORDS.contains(&s.as_str()) || ["kernels", "index", "np", "cl"].contains(&s.as_str()) {
        s.push('_');
    }
    s
}

fn numpy_dtype(d: Dtype) -> &'static str {
    match d {
        Dtype::F32 => "np.float32",
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
    let sig = g.signature;
    let task = sig.task;
    let table = format!("_{}", task.to_ascii_uppercase());
    let no_params = kf_core::ParamValues::default();
    let first = g.kernels.first().map(|(_, k)| *k);
    let mut buffers = Vec::new();
    for b in sig.buffers {
        let len = match first {
            Some(k) => text_and_lambda(b.len, &no_params, k)?,
            None => continue,
        };
        buffers.push(format!(
            "({}, {}, {len}, {})",
            string_literal(b.name),
            numpy_dtype(b.dtype),
            if b.output { "True" } else { "False" }
        ));
    }
    let args: Vec<String> = sig
        .args
        .iter()
        .map(|a| match a {
            ArgSig::Size(n) => format!("(\"size\", {})", string_literal(n)),
            ArgSig::Buffer(i) => format!("(\"buffer\", {i})"),
        })
        .collect();
    let sizes: Vec<String> = sig.sizes.iter().map(|s| string_literal(s)).collect();
    let _ = write!(
        out,
        "\n\n{table} = _Task(\n\
         \x20   {name},\n\
         \x20   [{sizes}],\n\
         \x20   [{buffers}],\n\
         \x20   [{args}],\n\
         \x20   [\n",
        name = string_literal(task),
        sizes = sizes.join(", "),
        buffers = buffers.join(", "),
        args = args.join(", "),
    );
    for (name, k) in &g.kernels {
        configuration_py(out, name, k)?;
    }
    out.push_str("    ],\n)\n");

    let size_params: Vec<String> = sig.sizes.iter().map(|s| py_ident(s)).collect();
    let inputs: Vec<String> = sig
        .buffers
        .iter()
        .filter(|b| !b.output)
        .map(|b| py_ident(b.name))
        .collect();
    let outputs: Vec<&str> = sig
        .buffers
        .iter()
        .filter(|b| b.output)
        .map(|b| b.name)
        .collect();
    let sizes_list = format!("[{}]", size_params.join(", "));
    let inputs_list = format!("[{}]", inputs.join(", "));
    let params = [size_params.clone(), inputs].concat().join(", ");
    let sizes_only = size_params.join(", ");
    let names: Vec<&str> = g.kernels.iter().map(|(n, _)| n.as_str()).collect();
    let _ = write!(
        out,
        "\n{upper}_CONFIGURATIONS = [c.name for c in {table}.configurations]\n\
         \"\"\"The names of `{task}`'s configurations, in table order: {names}.\"\"\"\n\
         \n\n\
         def {task}({params}, *, kernels=None):\n\
         \x20   \"\"\"Runs `{task}` with the configuration the dispatch rule picks; returns {ret}.\"\"\"\n\
         \x20   return _kernels(kernels).call({table}, None, {sizes_list}, {inputs_list})[0]\n\
         \n\n\
         def {task}_with(index, {params}, *, kernels=None):\n\
         \x20   \"\"\"Runs configuration `index` of `{upper}_CONFIGURATIONS`; raises ConstraintFailed\n\
         \x20   naming the rule when it cannot run at these sizes.\"\"\"\n\
         \x20   return _kernels(kernels).call({table}, index, {sizes_list}, {inputs_list})[0]\n\
         \n\n\
         def {task}_choice({sizes_only}, *, kernels=None):\n\
         \x20   \"\"\"The index of the configuration a call at these sizes takes on this device.\"\"\"\n\
         \x20   return _kernels(kernels).choose({table}, {sizes_list})\n\
         \n\n\
         def {task}_check(index, {sizes_only}, *, kernels=None):\n\
         \x20   \"\"\"Raises ConstraintFailed when configuration `index` cannot run at these sizes.\"\"\"\n\
         \x20   _kernels(kernels).check({table}, index, {sizes_list})\n",
        upper = task.to_ascii_uppercase(),
        names = names.join(", "),
        ret = if outputs.len() == 1 {
            format!("{} as a flat NumPy array", outputs[0])
        } else {
            format!("({}) as flat NumPy arrays", outputs.join(", "))
        },
    );
    Ok(())
}

/// The NumPy reference and one call of a built-in task at `n` (every size `n`), as pytest code.
fn reference_py(task: &str) -> &'static str {
    match task {
        "gemm" => {
            "def gemm_reference(n, a, b):\n\
             \x20   a64, b64 = a.reshape(n, n).astype(np.float64), b.reshape(n, n).astype(np.float64)\n\
             \x20   return (a64 @ b64).astype(np.float32).reshape(-1)\n\
             \n\n\
             def gemm_case(index, n):\n\
             \x20   a, b = data(n * n, 1), data(n * n, 2)\n\
             \x20   if index is None:\n\
             \x20       got = m.gemm(n, n, n, a, b, kernels=KERNELS)\n\
             \x20   else:\n\
             \x20       got = m.gemm_with(index, n, n, n, a, b, kernels=KERNELS)\n\
             \x20   return got, gemm_reference(n, a, b)\n\
             \n\n\
             def gemm_fits(index, n):\n\
             \x20   try:\n\
             \x20       m.gemm_check(index, n, n, n, kernels=KERNELS)\n\
             \x20       return True\n\
             \x20   except m.ConstraintFailed:\n\
             \x20       return False\n\
             \n\n\
             def gemm_served(n):\n\
             \x20   try:\n\
             \x20       return m.gemm_choice(n, n, n, kernels=KERNELS)\n\
             \x20   except m.NoConfiguration:\n\
             \x20       return None\n"
        }
        _ => {
            "def softmax_reference(n, x):\n\
             \x20   x64 = x.reshape(n, n).astype(np.float64)\n\
             \x20   e = np.exp(x64 - x64.max(axis=1, keepdims=True))\n\
             \x20   return (e / e.sum(axis=1, keepdims=True)).astype(np.float32).reshape(-1)\n\
             \n\n\
             def softmax_case(index, n):\n\
             \x20   x = data(n * n, 3)\n\
             \x20   if index is None:\n\
             \x20       got = m.softmax(n, n, x, kernels=KERNELS)\n\
             \x20   else:\n\
             \x20       got = m.softmax_with(index, n, n, x, kernels=KERNELS)\n\
             \x20   return got, softmax_reference(n, x)\n\
             \n\n\
             def softmax_fits(index, n):\n\
             \x20   try:\n\
             \x20       m.softmax_check(index, n, n, kernels=KERNELS)\n\
             \x20       return True\n\
             \x20   except m.ConstraintFailed:\n\
             \x20       return False\n\
             \n\n\
             def softmax_served(n):\n\
             \x20   try:\n\
             \x20       return m.softmax_choice(n, n, kernels=KERNELS)\n\
             \x20   except m.NoConfiguration:\n\
             \x20       return None\n"
        }
    }
}

fn test_py(module: &str, groups: &[TaskGroup<'_>]) -> String {
    let mut out = format!(
        "# Written by `kf export --python`: every configuration against a NumPy reference at a\n\
         # small size where its constraints hold on this device, and the dispatched call.\n\
         import numpy as np\n\
         import pytest\n\
         \n\
         import {module} as m\n\
         \n\
         KERNELS = m.Kernels()\n\
         SMALL = [16, 32, 64, 96, 128, 256]\n\
         \n\n\
         def data(length, seed):\n\
         \x20   \"\"\"Deterministic values in [0.5, 1.5).\"\"\"\n\
         \x20   return np.random.default_rng(seed).uniform(0.5, 1.5, length).astype(np.float32)\n\
         \n\n\
         def close(got, want):\n\
         \x20   bad = np.abs(got - want) > 1e-3 * np.maximum(np.abs(want), 1e-3)\n\
         \x20   assert not bad.any(), f\"element {{int(np.argmax(bad))}}: {{got[bad][0]}} against the reference's {{want[bad][0]}}\"\n"
    );
    for g in groups {
        let task = g.signature.task;
        let upper = task.to_ascii_uppercase();
        out.push_str("\n\n");
        out.push_str(reference_py(task));
        let wrong = match task {
            "gemm" => "m.gemm(16, 16, 16, data(15, 1), data(256, 2), kernels=KERNELS)",
            _ => "m.softmax(16, 16, data(15, 1), kernels=KERNELS)",
        };
        let _ = write!(
            out,
            "\n\n@pytest.mark.parametrize(\"index\", range(len(m.{upper}_CONFIGURATIONS)))\n\
             def test_{task}_each_configuration_matches_the_reference_at_a_small_size(index):\n\
             \x20   n = next((n for n in SMALL if {task}_fits(index, n)), None)\n\
             \x20   if n is None:\n\
             \x20       pytest.skip(f\"{{m.{upper}_CONFIGURATIONS[index]}}: no small size where its constraints hold here\")\n\
             \x20   got, want = {task}_case(index, n)\n\
             \x20   close(got, want)\n\
             \n\n\
             def test_{task}_the_dispatched_call_matches_the_reference():\n\
             \x20   n = next((n for n in SMALL if {task}_served(n) is not None), None)\n\
             \x20   assert n is not None, \"no small size some configuration serves\"\n\
             \x20   got, want = {task}_case(None, n)\n\
             \x20   close(got, want)\n\
             \x20   again, _ = {task}_case(None, n)\n\
             \x20   np.testing.assert_array_equal(got, again)\n\
             \n\n\
             def test_{task}_a_wrong_length_is_refused():\n\
             \x20   with pytest.raises(m.BadCall):\n\
             \x20       {wrong}\n"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_python() {
        assert_eq!(py_ident("M"), "m");
        assert_eq!(py_ident("IN"), "in_");
        assert_eq!(py_ident("KERNELS"), "kernels_");
        assert_eq!(py_ident("2D"), "_2d");
    }
}

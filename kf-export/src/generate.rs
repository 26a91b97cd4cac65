//! Writing the generated crate: `Cargo.toml`, `src/lib.rs` (the tables, one typed function per
//! task, docs that say which configuration serves which region), the run time
//! ([`crate::standalone`]: `src/kf_runtime/`, `src/kf_check.rs`, `src/kf_f16.rs`), `kernels/`
//! (the sources and manifests, embedded with `include_str!`), `tests/reference.rs`
//! ([`crate::test_code`]) and, for task-file tasks, `reference/<task>/` (the reference cases,
//! [`crate::cases`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use kf_backend_opencl::OpenClBackend;
use kf_core::{CompileOptions, ParamValue};
use kf_manifest::Manifest;

use crate::error::ExportError;
use crate::group::{group, group_doc_lines, write, Params, TaskGroup};
use crate::run::TunedKernel;
use crate::signature::{Access, Dtype, Signature};
use crate::standalone::{F16_FILE, RUN_TIME_FILES};
use crate::RustExport;

/// Whether any task of the crate has an f16 buffer (the crate then depends on `half`).
fn has_f16(groups: &[TaskGroup<'_>]) -> bool {
    groups
        .iter()
        .any(|g| g.signature.buffers.iter().any(|b| b.dtype == Dtype::F16))
}

/// The crate's manifest: `opencl3` (OpenCL, loaded at run time), `evalexpr` (the manifests'
/// expression language), `libc` (`dlopen` of an installed runtime's support libraries) and,
/// for f16 buffers, `half`; the same major versions as the workspace builds with.
fn cargo_toml(export: &RustExport, f16: bool) -> String {
    format!(
        "# Written by `kf export` (kf-export {version}); regenerate it rather than edit it.\n\
         [package]\n\
         name = {name:?}\n\
         version = \"0.1.0\"\n\
         edition = \"2021\"\n\
         rust-version = \"1.83\"\n\
         publish = false\n\
         \n\
         # A crate of its own, not a member of any workspace around it.\n\
         [workspace]\n\
         \n\
         [dependencies]\n\
         # OpenCL; its cl3 loads the OpenCL library at run time, so nothing links at build time.\n\
         opencl3 = \"0.12\"\n\
         # The manifests' expression language (constraints, launch sizes), as KernelFoundry's.\n\
         evalexpr = \"13\"\n\
         # dlopen of the support libraries an installed OpenCL runtime lists (`preload`).\n\
         libc = \"0.2\"\n\
         # `opencl.json` (the OpenCL runtime's location) and the reference cases' `index.json`;\n\
         # preserve_order keeps a case's sizes in the task's order.\n\
         serde = {{ version = \"1\", features = [\"derive\"] }}\n\
         serde_json = {{ version = \"1\", features = [\"preserve_order\"] }}\n\
         {half}",
        version = env!("CARGO_PKG_VERSION"),
        name = export.crate_name,
        half = if f16 {
            "# f16 buffers.\nhalf = \"2\"\n"
        } else {
            ""
        },
    )
}

/// A parameter value as a `kf_runtime::Param` literal.
fn param_code(v: &ParamValue) -> String {
    match v {
        ParamValue::Int(i) => format!("Param::Int({i})"),
        ParamValue::Float(f) => format!("Param::Float({f:?})"),
        ParamValue::Bool(b) => format!("Param::Bool({b})"),
        ParamValue::Text(t) => format!("Param::Text({t:?})"),
    }
}

/// One `Configuration { … }` of a table: the parameters and build options resolved here, the
/// constraints and launch geometry as the manifest's expressions (evaluated at each call).
fn configuration_code(name: &str, k: &TunedKernel) -> Result<String, ExportError> {
    let manifest = Manifest::parse(&k.manifest, &format!("{name}.toml"), None)?;
    let params = manifest.resolve_params(&k.params)?;
    let options = CompileOptions {
        flags: manifest.compile_flags(&params)?,
        arch: None,
    };
    let build_options =
        OpenClBackend::build_options(&params, &options).map_err(|e| ExportError::Unsupported {
            run: k.run.display().to_string(),
            what: "the kernel's parameters".to_owned(),
            why: e.to_string(),
        })?;
    let list = |exprs: &[kf_manifest::Expr]| {
        let items: Vec<String> = exprs.iter().map(|e| format!("{:?}", e.text())).collect();
        format!("&[{}]", items.join(", "))
    };
    let sizes: Vec<String> = k
        .sizes
        .iter()
        .map(|(n, v)| format!("({n:?}, {v})"))
        .collect();
    let params: Vec<String> = params
        .iter()
        .map(|(n, v)| format!("({n:?}, {})", param_code(v)))
        .collect();
    Ok(format!(
        "    Configuration {{\n        name: {name:?},\n        run: {:?},\n        device: {:?},\n        driver: {:?},\n        tuned_sizes: &[{}],\n        params: &[{}],\n        build_options: {build_options:?},\n        entry: {:?},\n        constraints: {},\n        global: {},\n        local: {},\n        source: include_str!(\"../kernels/{name}.cl\"),\n        gflops: {:?},\n    }},",
        k.run.display().to_string(),
        k.device,
        k.driver,
        sizes.join(", "),
        params.join(", "),
        manifest.entry,
        list(&manifest.constraints),
        list(&manifest.global),
        manifest.local.as_deref().map_or("None".to_owned(), |l| format!("Some({})", list(l))),
        k.gflops,
    ))
}

fn lib_rs(groups: &[TaskGroup<'_>]) -> Result<String, ExportError> {
    let mut out = String::new();
    out.push_str(
        "//! Tuned kernels exported by `kf export` from KernelFoundry search runs.\n\
         //!\n\
         //! Open the OpenCL device once ([`Device::open`]: it finds the OpenCL runtime that\n\
         //! `kf setup` installed, or the system's, and a device; `KF_OPENCL_DEVICE` picks one).\n\
         //! Each task has a typed function that picks one of its tuned configurations for the\n\
         //! device and the caller's sizes and launches it: among the configurations whose\n\
         //! manifest constraints hold at the caller's sizes, one tuned on the caller's device (by\n\
         //! name and driver; else any device), tuned at the nearest sizes (the sum over size\n\
         //! names of |ln(caller / tuned)|; ties to the larger tuned sizes). `*_with` runs a given\n\
         //! configuration, `*_choice` says which one a call would take; [`Kernels`] keeps the\n\
         //! kernels it runs compiled. The crate depends on no KernelFoundry crate: its run time\n\
         //! is [`kf_runtime`] (and [`kf_check`], the comparison of its tests).\n",
    );
    for g in groups {
        let task = &g.signature.task;
        let _ = writeln!(out, "//!\n//! ## `{task}`\n//!");
        for line in group_doc_lines(g) {
            let _ = writeln!(out, "//!{}{line}", if line.is_empty() { "" } else { " " });
        }
    }
    out.push_str(
        "\n#![allow(clippy::too_many_arguments)]\n\npub mod kf_check;\npub mod kf_runtime;\n",
    );
    if has_f16(groups) {
        out.push_str("mod kf_f16;\n/// The f16 type of f16 buffers.\npub use kf_f16::f16;\n");
    }
    out.push_str(
        "\npub use kf_runtime::{Device, DeviceFacts, Error};\n\
         #[allow(unused_imports)]\n\
         use kf_runtime::{Configuration, HostData, Param, ScalarArg, Table};\n\
         \n\
         /// Calls on one device that keep every kernel they run compiled (the free functions\n\
         /// build the kernel on every call).\n\
         pub struct Kernels<'d> {\n\
         \x20   device: &'d Device,\n\
         \x20   cache: kf_runtime::KernelCache,\n\
         }\n\
         \n\
         impl<'d> Kernels<'d> {\n\
         \x20   /// Nothing compiled yet.\n\
         \x20   pub fn new(device: &'d Device) -> Self {\n\
         \x20       Kernels { device, cache: kf_runtime::KernelCache::new() }\n\
         \x20   }\n\
         \n\
         \x20   /// The device the calls run on.\n\
         \x20   pub fn device(&self) -> &'d Device {\n\
         \x20       self.device\n\
         \x20   }\n\
         }\n\
         \n\
         impl std::fmt::Debug for Kernels<'_> {\n\
         \x20   fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {\n\
         \x20       f.debug_struct(\"Kernels\").field(\"compiled\", &self.cache.len()).finish()\n\
         \x20   }\n\
         }\n",
    );
    for g in groups {
        task_code(&mut out, g)?;
    }
    Ok(out)
}

fn task_code(out: &mut String, g: &TaskGroup<'_>) -> Result<(), ExportError> {
    let sig = g.signature;
    let upper = g.function().to_ascii_uppercase();
    task_tables(out, g, &upper)?;
    let names = Params::of(sig);
    scalar_constants(out, sig, &names, &upper);
    let api = TaskApi::new(g, &names);
    api.free_functions(out, &scalars_doc(sig, &names, &upper));
    api.kernels_methods(out);
    Ok(())
}

/// Writes the task's tables: its configurations, its kernel signature, and the `Table` of
/// both.
fn task_tables(out: &mut String, g: &TaskGroup<'_>, upper: &str) -> Result<(), ExportError> {
    let sig = g.signature;
    let _ = writeln!(
        out,
        "\n/// The tuned configurations of `{}`, in the order of the runs exported.",
        sig.task
    );
    let _ = writeln!(
        out,
        "pub static {upper}_CONFIGURATIONS: [Configuration; {}] = [",
        g.kernels.len()
    );
    for (name, k) in &g.kernels {
        let _ = writeln!(out, "{}", configuration_code(name, k)?);
    }
    out.push_str("];\n");
    let _ = writeln!(
        out,
        "\n/// `{}`'s kernel signature.\n\
         pub static {upper}_SIGNATURE: kf_runtime::Signature = {{\n\
         \x20   #[allow(unused_imports)]\n\
         \x20   use kf_runtime::{{Access, ArgSig, BufferSig, Dtype, ScalarSig, Signature}};\n\
         \x20   use std::borrow::Cow;\n\
         \x20   {}\n\
         }};",
        sig.task,
        sig.to_rust().replace('\n', "\n    ")
    );
    let _ = writeln!(
        out,
        "\n/// `{}`'s signature and configurations.\npub static {upper}: Table = Table {{\n    signature: &{upper}_SIGNATURE,\n    configurations: &{upper}_CONFIGURATIONS,\n}};",
        sig.task
    );
    Ok(())
}

/// Writes a constant per scalar with the task file's value (the one the search measured
/// with).
fn scalar_constants(out: &mut String, sig: &Signature, names: &Params, upper: &str) {
    for (s, n) in sig.scalars.iter().zip(&names.scalars) {
        let value = if s.dtype.rust() == "i32" {
            format!("{}", s.value as i64)
        } else {
            format!("{:?}", s.value as f32)
        };
        let _ = writeln!(
            out,
            "\n/// The task file's value of the scalar `{}` (the search measured with it).\npub const {upper}_{}: {} = {value};",
            s.name,
            n.to_ascii_uppercase(),
            s.dtype.rust()
        );
    }
}

/// The sentence of a function's docs that names the scalars and their constants (empty
/// without scalars).
fn scalars_doc(sig: &Signature, names: &Params, upper: &str) -> String {
    if sig.scalars.is_empty() {
        return String::new();
    }
    let list: Vec<String> = sig
        .scalars
        .iter()
        .zip(&names.scalars)
        .map(|(s, n)| {
            format!(
                "`{}` (the task's value: [`{upper}_{}`])",
                s.name,
                n.to_ascii_uppercase()
            )
        })
        .collect();
    format!(" Scalars: {}.", list.join(", "))
}

/// The pieces of a task's generated functions: their parameters, and the statements that
/// turn the caller's slices into the launch's host data and back.
struct TaskApi<'a> {
    sig: &'a Signature,
    /// The functions' name (`gemm`).
    task: String,
    /// The prefix of the task's tables (`GEMM`).
    upper: String,
    /// The typed parameters: sizes, scalars, buffers (`m: i64, …, c: &mut [f32]`).
    params: String,
    /// The arguments passing them on (`m, n, k, a, b, c`).
    all_args: String,
    /// The sizes' parameters alone.
    sizes_params: String,
    /// The sizes' names, comma-separated.
    sizes_list: String,
    /// The scalars as launch arguments (`ScalarArg::F32(scale)`).
    scalar_args: String,
    /// Statements copying each buffer into bytes.
    prep: String,
    /// The buffers' bytes as launch data (`HostData::In(&a_bytes)`).
    data: String,
    /// Statements copying each written buffer's bytes back.
    back: String,
}

impl<'a> TaskApi<'a> {
    /// The pieces for task `g`, whose Rust names are `names`.
    fn new(g: &'a TaskGroup<'a>, names: &Params) -> Self {
        let sig = g.signature;
        let task = g.function();
        let mut params: Vec<String> = names.sizes.iter().map(|s| format!("{s}: i64")).collect();
        for (s, n) in sig.scalars.iter().zip(&names.scalars) {
            params.push(format!("{n}: {}", s.dtype.rust()));
        }
        let mut prep = String::new();
        let mut data = Vec::new();
        let mut back = String::new();
        for (b, name) in sig.buffers.iter().zip(&names.buffers) {
            let ty = b.dtype.rust();
            if b.access.writes() {
                params.push(format!("{name}: &mut [{ty}]"));
                let _ = writeln!(
                    prep,
                    "        let mut {name}_bytes = kf_runtime::to_bytes({name});"
                );
                data.push(format!("HostData::Out(&mut {name}_bytes)"));
                let _ = writeln!(
                    back,
                    "        kf_runtime::from_bytes(&{name}_bytes, {name});"
                );
            } else {
                params.push(format!("{name}: &[{ty}]"));
                let _ = writeln!(
                    prep,
                    "        let {name}_bytes = kf_runtime::to_bytes({name});"
                );
                data.push(format!("HostData::In(&{name}_bytes)"));
            }
        }
        let scalar_args: Vec<String> = sig
            .scalars
            .iter()
            .zip(&names.scalars)
            .map(|(s, n)| {
                if s.dtype.rust() == "i32" {
                    format!("ScalarArg::I32({n})")
                } else {
                    format!("ScalarArg::F32({n})")
                }
            })
            .collect();
        TaskApi {
            sig,
            upper: task.to_ascii_uppercase(),
            task,
            params: params.join(", "),
            all_args: names.list(),
            sizes_params: names
                .sizes
                .iter()
                .map(|s| format!("{s}: i64"))
                .collect::<Vec<_>>()
                .join(", "),
            sizes_list: names.sizes.join(", "),
            scalar_args: scalar_args.join(", "),
            prep,
            data: data.join(", "),
            back,
        }
    }

    /// What each buffer is, for the docs: its length, element type and access.
    fn buffers_doc(&self) -> String {
        let docs: Vec<String> = self
            .sig
            .buffers
            .iter()
            .map(|b| {
                format!(
                    "`{}`: {} elements of `{}`{}",
                    b.name,
                    b.len,
                    b.dtype.rust(),
                    match b.access {
                        Access::Input => "",
                        Access::Output => ", written",
                        Access::InOut => ", read and written in place",
                    }
                )
            })
            .collect();
        docs.join("; ")
    }

    /// Writes the free functions: the dispatched call, `_choice` and `_with`, each building
    /// its kernel on every call.
    fn free_functions(&self, out: &mut String, scalars_doc: &str) {
        let TaskApi {
            sig,
            task,
            upper,
            params,
            all_args,
            sizes_params,
            sizes_list,
            ..
        } = self;
        let _ = writeln!(
            out,
            "\n/// Runs `{}` at the sizes {} on `device` with the configuration the dispatch\n\
             /// rule picks (see the crate docs), and returns its index in [`{upper}_CONFIGURATIONS`].\n\
             /// Buffers: {}.{scalars_doc} Builds the kernel on every call; [`Kernels`] keeps the\n\
             /// kernels compiled.\n\
             ///\n\
             /// # Errors\n\
             ///\n\
             /// No configuration's constraints hold at these sizes (the error names each one's failing\n\
             /// rule), a buffer of the wrong length, or a compile or launch failure.\n\
             pub fn {task}(device: &Device, {params}) -> Result<usize, Error> {{\n\
             \x20   Kernels::new(device).{task}({all_args})\n\
             }}",
            sig.task,
            sig.size_names().join(", "),
            self.buffers_doc(),
        );
        let _ = writeln!(
            out,
            "\n/// The index of the configuration a call of [`{task}`] takes at these sizes on `device`.\n\
             ///\n\
             /// # Errors\n\
             ///\n\
             /// As [`{task}`]'s, when no configuration's constraints hold.\n\
             pub fn {task}_choice(device: &DeviceFacts, {sizes_params}) -> Result<usize, Error> {{\n\
             \x20   {upper}.choose(device, &[{sizes_list}])\n\
             }}",
        );
        let _ = writeln!(
            out,
            "\n/// Runs `{}` with configuration `index` of [`{upper}_CONFIGURATIONS`].\n\
             ///\n\
             /// # Errors\n\
             ///\n\
             /// Its constraints failing at these sizes (the error names the rule), a buffer of the\n\
             /// wrong length, or a compile or launch failure.\n\
             pub fn {task}_with(device: &Device, index: usize, {params}) -> Result<(), Error> {{\n\
             \x20   Kernels::new(device).{task}_with(index, {all_args})\n\
             }}",
            sig.task,
        );
    }

    /// Writes the `Kernels` methods, which keep the kernel they run compiled.
    fn kernels_methods(&self, out: &mut String) {
        let TaskApi {
            task,
            upper,
            params,
            all_args,
            sizes_list,
            scalar_args,
            prep,
            data,
            back,
            ..
        } = self;
        let _ = writeln!(
            out,
            "\nimpl Kernels<'_> {{\n\
             \x20   /// [`{task}`](fn@{task}), keeping the kernel it runs compiled.\n\
             \x20   ///\n\
             \x20   /// # Errors\n\
             \x20   ///\n\
             \x20   /// As [`{task}`](fn@{task})'s.\n\
             \x20   pub fn {task}(&self, {params}) -> Result<usize, Error> {{\n\
             \x20       let index = {task}_choice(self.device.facts(), {sizes_list})?;\n\
             \x20       self.{task}_with(index, {all_args})?;\n\
             \x20       Ok(index)\n\
             \x20   }}\n\
             \n\
             \x20   /// [`{task}_with`](fn@{task}_with), keeping the kernel it runs compiled.\n\
             \x20   ///\n\
             \x20   /// # Errors\n\
             \x20   ///\n\
             \x20   /// As [`{task}_with`](fn@{task}_with)'s.\n\
             \x20   pub fn {task}_with(&self, index: usize, {params}) -> Result<(), Error> {{\n\
             {prep}\
             \x20       {upper}.launch(self.device, &self.cache, index, &[{sizes_list}], &[{scalar_args}], &mut [{data}])?;\n\
             {back}\
             \x20       Ok(())\n\
             \x20   }}\n\
             }}",
        );
    }
}

/// Writes the crate; returns the files written.
pub(crate) fn write_crate(
    export: &RustExport,
    kernels: &[TunedKernel],
) -> Result<Vec<PathBuf>, ExportError> {
    let groups = group(kernels)?;
    let out = &export.out;
    let mut files = Vec::new();
    let mut put = |rel: &str, text: &str| -> Result<(), ExportError> {
        let path = out.join(rel);
        write(&path, text)?;
        files.push(path);
        Ok(())
    };
    let f16 = has_f16(&groups);
    put("Cargo.toml", &cargo_toml(export, f16))?;
    for (rel, text) in RUN_TIME_FILES.iter().chain(f16.then_some(&F16_FILE)) {
        put(rel, text)?;
    }
    for g in &groups {
        for (name, k) in &g.kernels {
            put(&format!("kernels/{name}.cl"), &k.source)?;
            put(&format!("kernels/{name}.toml"), &k.manifest)?;
        }
    }
    put("src/lib.rs", &lib_rs(&groups)?)?;
    let crate_ident = export.crate_name.replace('-', "_");
    put(
        "tests/reference.rs",
        &crate::test_code::test_rs(&crate_ident, &groups),
    )?;
    for g in &groups {
        if let Some(file) = g.task_file {
            let dir = out.join("reference").join(g.function());
            files.extend(crate::cases::write_cases(file, &g.tuned_sizes(), &dir)?);
        }
    }
    Ok(files)
}

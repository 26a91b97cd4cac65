//! Writing the generated crate: `Cargo.toml`, `src/lib.rs` (the tables, one typed function per
//! task, docs that say which configuration serves which region), `kernels/` (the sources and
//! manifests, embedded with `include_str!`), `tests/reference.rs` ([`crate::test_code`]) and,
//! for task-file tasks, `reference/<task>/` (the reference cases, [`crate::cases`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::error::ExportError;
use crate::group::{group, group_doc_lines, write, Params, TaskGroup};
use crate::run::TunedKernel;
use crate::signature::Access;
use crate::RustExport;

fn cargo_toml(export: &RustExport) -> String {
    let dep = match &export.workspace {
        Some(ws) => format!(
            "kf-export = {{ path = {:?} }}",
            ws.join("kf-export").display().to_string()
        ),
        None => format!("kf-export = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    format!(
        "# Written by `kf export` (kf-export {version}); regenerate it rather than edit it.\n\
         [package]\n\
         name = {name:?}\n\
         version = \"0.1.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\
         \n\
         # A crate of its own, not a member of any workspace around it.\n\
         [workspace]\n\
         \n\
         [dependencies]\n\
         {dep}\n",
        version = env!("CARGO_PKG_VERSION"),
        name = export.crate_name,
    )
}

fn lib_rs(groups: &[TaskGroup<'_>]) -> String {
    let mut out = String::new();
    out.push_str(
        "//! Tuned kernels exported by `kf export` from KernelFoundry search runs.\n\
         //!\n\
         //! Each task has a typed function that picks one of its tuned configurations for the\n\
         //! caller's device and sizes and launches it through the OpenCL backend\n\
         //! (`kf_export::kf_backend_opencl::OpenClBackend`, which finds the OpenCL runtime and\n\
         //! keeps a compile cache on disk): among the configurations whose manifest constraints\n\
         //! hold at the caller's sizes, one tuned on the caller's device (by name and driver; else\n\
         //! any device), tuned at the nearest sizes (the sum over size names of\n\
         //! |ln(caller / tuned)|; ties to the larger tuned sizes). `*_with` runs a given\n\
         //! configuration, `*_choice` says which one a call would take.\n",
    );
    for g in groups {
        let task = &g.signature.task;
        let _ = writeln!(out, "//!\n//! ## `{task}`\n//!");
        for line in group_doc_lines(g) {
            let _ = writeln!(out, "//!{}{line}", if line.is_empty() { "" } else { " " });
        }
    }
    out.push_str(
        "\n#![allow(clippy::too_many_arguments)]\n\n\
         pub use kf_export::kf_backend_opencl::OpenClBackend;\n\
         pub use kf_export::kf_core::DeviceFacts;\n\
         pub use kf_export::ExportError as Error;\n\
         use kf_export::kf_core::Backend as _;\n\
         #[allow(unused_imports)]\n\
         pub use kf_export::half::f16;\n\
         #[allow(unused_imports)]\n\
         use kf_export::runtime::{self, Configuration, HostData, ScalarArg, Table};\n\
         \n\
         /// Calls through one backend that keep every kernel they run compiled (the free\n\
         /// functions compile, or load from the backend's binary cache, on every call).\n\
         pub struct Kernels<'b> {\n\
         \x20   backend: &'b OpenClBackend,\n\
         \x20   cache: runtime::KernelCache,\n\
         }\n\
         \n\
         impl<'b> Kernels<'b> {\n\
         \x20   /// Nothing compiled yet.\n\
         \x20   pub fn new(backend: &'b OpenClBackend) -> Self {\n\
         \x20       Kernels { backend, cache: runtime::KernelCache::new() }\n\
         \x20   }\n\
         \n\
         \x20   /// The backend the calls go through.\n\
         \x20   pub fn backend(&self) -> &'b OpenClBackend {\n\
         \x20       self.backend\n\
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
        task_code(&mut out, g);
    }
    out
}

fn task_code(out: &mut String, g: &TaskGroup<'_>) {
    let sig = g.signature;
    let task = g.function();
    let upper = task.to_ascii_uppercase();
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
        let sizes: Vec<String> = k
            .sizes
            .iter()
            .map(|(n, v)| format!("({n:?}, {v})"))
            .collect();
        let params = serde_json::to_string(&k.params).unwrap_or_else(|_| "{}".to_owned());
        let _ = writeln!(
            out,
            "    Configuration {{\n        name: {name:?},\n        run: {:?},\n        device: {:?},\n        driver: {:?},\n        tuned_sizes: &[{}],\n        params_json: {params:?},\n        manifest: include_str!(\"../kernels/{name}.toml\"),\n        source: include_str!(\"../kernels/{name}.cl\"),\n        gflops: {:?},\n    }},",
            k.run.display().to_string(),
            k.device,
            k.driver,
            sizes.join(", "),
            k.gflops,
        );
    }
    out.push_str("];\n");
    let signature = if g.task_file.is_some() {
        let _ = writeln!(
            out,
            "\n/// `{}`'s kernel signature, from its task file.\n\
             pub static {upper}_SIGNATURE: kf_export::signature::Signature = {{\n\
             \x20   use kf_export::signature::{{Access, ArgSig, BufferSig, Dtype, ScalarSig, Signature}};\n\
             \x20   use std::borrow::Cow;\n\
             \x20   {}\n\
             }};",
            sig.task,
            sig.to_rust().replace('\n', "\n    ")
        );
        format!("&{upper}_SIGNATURE")
    } else {
        format!("&kf_export::signature::{upper}")
    };
    let _ = writeln!(
        out,
        "\n/// `{}`'s signature and configurations.\npub static {upper}: Table = Table {{\n    signature: {signature},\n    configurations: &{upper}_CONFIGURATIONS,\n}};",
        sig.task
    );
    let names = Params::of(sig);
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
                "        let mut {name}_bytes = runtime::to_bytes({name});"
            );
            data.push(format!("HostData::Out(&mut {name}_bytes)"));
            let _ = writeln!(back, "        runtime::from_bytes(&{name}_bytes, {name});");
        } else {
            params.push(format!("{name}: &[{ty}]"));
            let _ = writeln!(
                prep,
                "        let {name}_bytes = runtime::to_bytes({name});"
            );
            data.push(format!("HostData::In(&{name}_bytes)"));
        }
    }
    let buffers_doc: Vec<String> = sig
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
    let scalars_doc = if sig.scalars.is_empty() {
        String::new()
    } else {
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
    };
    let sizes_list = names.sizes.join(", ");
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
    let scalar_args = scalar_args.join(", ");
    let all_args = names.list();
    let params = params.join(", ");
    let data = data.join(", ");
    let sizes_params: String = names
        .sizes
        .iter()
        .map(|s| format!("{s}: i64"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "\n/// Runs `{}` at the sizes {} on `backend`'s device with the configuration the dispatch\n\
         /// rule picks (see the crate docs), and returns its index in [`{upper}_CONFIGURATIONS`].\n\
         /// Buffers: {}.{scalars_doc} Compiles (or loads from the backend's binary cache) on every\n\
         /// call; [`Kernels`] keeps the kernels compiled.\n\
         ///\n\
         /// # Errors\n\
         ///\n\
         /// No configuration's constraints hold at these sizes (the error names each one's failing\n\
         /// rule), a buffer of the wrong length, or a compile or launch failure.\n\
         pub fn {task}(backend: &OpenClBackend, {params}) -> Result<usize, Error> {{\n\
         \x20   Kernels::new(backend).{task}({all_args})\n\
         }}",
        sig.task,
        sig.size_names().join(", "),
        buffers_doc.join("; "),
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
         pub fn {task}_with(backend: &OpenClBackend, index: usize, {params}) -> Result<(), Error> {{\n\
         \x20   Kernels::new(backend).{task}_with(index, {all_args})\n\
         }}",
        sig.task,
    );
    let _ = writeln!(
        out,
        "\nimpl Kernels<'_> {{\n\
         \x20   /// [`{task}`](fn@{task}), keeping the kernel it runs compiled.\n\
         \x20   ///\n\
         \x20   /// # Errors\n\
         \x20   ///\n\
         \x20   /// As [`{task}`](fn@{task})'s.\n\
         \x20   pub fn {task}(&self, {params}) -> Result<usize, Error> {{\n\
         \x20       let index = {task}_choice(self.backend.device(), {sizes_list})?;\n\
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
         \x20       {upper}.launch(self.backend, &self.cache, index, &[{sizes_list}], &[{scalar_args}], &mut [{data}])?;\n\
         {back}\
         \x20       Ok(())\n\
         \x20   }}\n\
         }}",
    );
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
    put("Cargo.toml", &cargo_toml(export))?;
    for g in &groups {
        for (name, k) in &g.kernels {
            put(&format!("kernels/{name}.cl"), &k.source)?;
            put(&format!("kernels/{name}.toml"), &k.manifest)?;
        }
    }
    put("src/lib.rs", &lib_rs(&groups))?;
    let crate_ident = export.crate_name.replace('-', "_");
    put(
        "tests/reference.rs",
        &crate::test_code::test_rs(&crate_ident, &groups),
    )?;

    if let Some(lock) = &export.lockfile {
        let text = std::fs::read_to_string(lock).map_err(|e| ExportError::io(lock, e))?;
        put("Cargo.lock", &text)?;
    }
    for g in &groups {
        if let Some(file) = g.task_file {
            let dir = out.join("reference").join(g.function());
            files.extend(crate::cases::write_cases(file, &g.tuned_sizes(), &dir)?);
        }
    }
    Ok(files)
}

//! Writing the generated crate: `Cargo.toml`, `src/lib.rs` (the tables, one typed function per
//! task, docs that say which configuration serves which region), `kernels/` (the sources and
//! manifests, embedded with `include_str!`) and `tests/reference.rs` (every configuration
//! against the task's reference at a small size).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kf_manifest::Manifest;

use crate::dispatch::{diagonal_regions, Candidate};
use crate::error::ExportError;
use crate::run::TunedKernel;
use crate::signature::{builtin, Signature};
use crate::RustExport;

/// A Rust identifier for a task's name of a size or buffer (`M` → `m`).
fn ident(name: &str) -> String {
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
    const KEYWORDS: [&str; 12] = [
        "as", "fn", "if", "in", "let", "mod", "ref", "type", "use", "where", "self", "crate",
    ];
    if KEYWORDS.contains(&s.as_str()) || s == "backend" || s == "index" {
        s.push('_');
    }
    s
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), ExportError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ExportError::io(parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| ExportError::io(path, e))
}

/// One task's configurations, in the order of the runs given.
pub(crate) struct TaskGroup<'a> {
    pub(crate) signature: &'static Signature,
    pub(crate) kernels: Vec<(String, &'a TunedKernel)>,
}

pub(crate) fn group(kernels: &[TunedKernel]) -> Result<Vec<TaskGroup<'_>>, ExportError> {
    let mut groups: BTreeMap<String, TaskGroup<'_>> = BTreeMap::new();
    for k in kernels {
        let unsupported = |what: String, why: &str| ExportError::Unsupported {
            run: k.run.display().to_string(),
            what,
            why: why.to_owned(),
        };
        if k.backend != "opencl" {
            return Err(unsupported(
                format!("a {} run", k.backend),
                "the generated crate launches through kf-backend-opencl; SYCL and CUDA exports need a host API of their own (a SYCL queue through the SYCL backend's shim, a CUDA context through cudarc) that kf-export does not generate yet. Run the search with --backend opencl to export it",
            ));
        }
        let manifest = Manifest::parse(&k.manifest, "best_kernel.toml", None)?;
        if manifest.language != kf_core::Language::OpenCl {
            return Err(unsupported(
                format!("a {} kernel", manifest.language),
                "only OpenCL C kernels are exported for now",
            ));
        }
        let Some(signature) = builtin(&k.task) else {
            return Err(unsupported(
                format!("task `{}`", k.task),
                "kf export knows the kernel signatures of the built-in gemm and softmax; task files are not exported yet",
            ));
        };
        let g = groups.entry(k.task.clone()).or_insert_with(|| TaskGroup {
            signature,
            kernels: Vec::new(),
        });
        let name = format!("{}_{}", k.task, g.kernels.len());
        g.kernels.push((name, k));
    }
    Ok(groups.into_values().collect())
}

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

/// Documentation lines of a task group (no comment markers): the table of configurations and
/// which configuration serves which region along the diagonal. The Rust crate's front page
/// and the Python module's docstring print them.
pub(crate) fn group_doc_lines(g: &TaskGroup<'_>) -> Vec<String> {
    let mut lines = vec![
        "| configuration | tuned at | device | GFLOP/s there | parameters | constraints | run |"
            .to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (name, k) in &g.kernels {
        let rules = Manifest::parse(&k.manifest, "m.toml", None)
            .map(|m| {
                m.constraints
                    .iter()
                    .map(|c| format!("`{}`", c.text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        lines.push(format!(
            "| `{name}` | {} | {} | {} | {} | {} | `{}` |",
            k.sizes_text(),
            k.device,
            k.gflops.map_or("-".to_owned(), |g| format!("{g:.1}")),
            k.params,
            if rules.is_empty() {
                "none".to_owned()
            } else {
                rules
            },
            k.run.display()
        ));
    }
    lines.extend(region_lines(g));
    lines
}

fn region_lines(g: &TaskGroup<'_>) -> Vec<String> {
    let sizes: Vec<Vec<(&str, i64)>> = g
        .kernels
        .iter()
        .map(|(_, k)| k.sizes.iter().map(|(n, v)| (n.as_str(), *v)).collect())
        .collect();
    let candidates: Vec<Candidate<'_>> = g
        .kernels
        .iter()
        .zip(&sizes)
        .map(|((_, k), s)| Candidate {
            device: &k.device,
            driver: k.driver.as_deref(),
            sizes: s,
            valid: true,
        })
        .collect();
    let largest = sizes.iter().flatten().map(|(_, v)| *v).max().unwrap_or(1);
    let limit = (largest.saturating_mul(4)).clamp(16, 1 << 16);
    let mut devices: Vec<&str> = g.kernels.iter().map(|(_, k)| k.device.as_str()).collect();
    devices.sort_unstable();
    devices.dedup();
    let axis = g.signature.sizes.join(" = ");
    let mut lines = vec![
        String::new(),
        format!(
            "Which configuration serves which region, along the diagonal {axis} = n (where every \
             configuration's constraints hold; one whose constraints fail at the caller's sizes is \
             passed over for the next by the same rule, and a call no configuration can serve is an \
             error naming each one's failing rule):"
        ),
        String::new(),
    ];
    let mut describe = |label: &str, device: &str| {
        let regions = diagonal_regions(&candidates, device, "", g.signature.sizes, limit);
        let parts: Vec<String> = regions
            .iter()
            .map(|(i, lo, hi)| {
                let name = &g.kernels[*i].0;
                if *hi == limit {
                    format!("n ≥ {lo}: `{name}`")
                } else {
                    format!("{lo} ≤ n ≤ {hi}: `{name}`")
                }
            })
            .collect();
        lines.push(format!("- {label}: {}", parts.join("; ")));
    };
    for d in &devices {
        describe(&format!("on {d}"), d);
    }
    describe("on any other device", "\u{0}no such device");
    lines
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
        let task = g.signature.task;
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
         use kf_export::runtime::{self, Configuration, HostData, Table};\n\
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
    let task = sig.task;
    let upper = task.to_ascii_uppercase();
    let _ = writeln!(
        out,
        "\n/// The tuned configurations of `{task}`, in the order of the runs exported."
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
    let _ = writeln!(
        out,
        "\n/// `{task}`'s signature and configurations.\npub static {upper}: Table = Table {{\n    signature: &kf_export::signature::{upper},\n    configurations: &{upper}_CONFIGURATIONS,\n}};"
    );
    let size_params: Vec<String> = sig
        .sizes
        .iter()
        .map(|s| format!("{}: i64", ident(s)))
        .collect();
    let size_args: Vec<String> = sig.sizes.iter().map(|s| ident(s)).collect();
    let buf_ident = |name: &str| {
        let n = ident(name);
        if size_args.contains(&n) {
            format!("{n}_buf")
        } else {
            n
        }
    };
    let mut buf_params = Vec::new();
    let mut prep = String::new();
    let mut data = Vec::new();
    let mut back = String::new();
    for b in sig.buffers {
        let name = buf_ident(b.name);
        let ty = b.dtype.rust();
        if b.output {
            buf_params.push(format!("{name}: &mut [{ty}]"));
            let _ = writeln!(
                prep,
                "        let mut {name}_bytes = runtime::{ty}_bytes({name});"
            );
            data.push(format!("HostData::Out(&mut {name}_bytes)"));
            let _ = writeln!(
                back,
                "        runtime::{ty}_from_bytes(&{name}_bytes, {name});"
            );
        } else {
            buf_params.push(format!("{name}: &[{ty}]"));
            let _ = writeln!(
                prep,
                "        let {name}_bytes = runtime::{ty}_bytes({name});"
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
                if b.output { ", written" } else { "" }
            )
        })
        .collect();
    let sizes_list = size_args.join(", ");
    let buf_list = sig
        .buffers
        .iter()
        .map(|b| buf_ident(b.name))
        .collect::<Vec<_>>()
        .join(", ");
    let sizes_params = size_params.join(", ");
    let bufs_params = buf_params.join(", ");
    let data = data.join(", ");
    let _ = writeln!(
        out,
        "\n/// Runs `{task}` at the sizes {} on `backend`'s device with the configuration the dispatch\n\
         /// rule picks (see the crate docs), and returns its index in [`{upper}_CONFIGURATIONS`].\n\
         /// Buffers: {}. Compiles (or loads from the backend's binary cache) on every call;\n\
         /// [`Kernels`] keeps the kernels compiled.\n\
         ///\n\
         /// # Errors\n\
         ///\n\
         /// No configuration's constraints hold at these sizes (the error names each one's failing\n\
         /// rule), a buffer of the wrong length, or a compile or launch failure.\n\
         pub fn {task}(backend: &OpenClBackend, {sizes_params}, {bufs_params}) -> Result<usize, Error> {{\n\
         \x20   Kernels::new(backend).{task}({sizes_list}, {buf_list})\n\
         }}",
        sig.sizes.join(", "),
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
        "\n/// Runs `{task}` with configuration `index` of [`{upper}_CONFIGURATIONS`].\n\
         ///\n\
         /// # Errors\n\
         ///\n\
         /// Its constraints failing at these sizes (the error names the rule), a buffer of the\n\
         /// wrong length, or a compile or launch failure.\n\
         pub fn {task}_with(backend: &OpenClBackend, index: usize, {sizes_params}, {bufs_params}) -> Result<(), Error> {{\n\
         \x20   Kernels::new(backend).{task}_with(index, {sizes_list}, {buf_list})\n\
         }}",
    );
    let _ = writeln!(
        out,
        "\nimpl Kernels<'_> {{\n\
         \x20   /// [`{task}`](fn@{task}), keeping the kernel it runs compiled.\n\
         \x20   ///\n\
         \x20   /// # Errors\n\
         \x20   ///\n\
         \x20   /// As [`{task}`](fn@{task})'s.\n\
         \x20   pub fn {task}(&self, {sizes_params}, {bufs_params}) -> Result<usize, Error> {{\n\
         \x20       let index = {task}_choice(self.backend.device(), {sizes_list})?;\n\
         \x20       self.{task}_with(index, {sizes_list}, {buf_list})?;\n\
         \x20       Ok(index)\n\
         \x20   }}\n\
         \n\
         \x20   /// [`{task}_with`](fn@{task}_with), keeping the kernel it runs compiled.\n\
         \x20   ///\n\
         \x20   /// # Errors\n\
         \x20   ///\n\
         \x20   /// As [`{task}_with`](fn@{task}_with)'s.\n\
         \x20   pub fn {task}_with(&self, index: usize, {sizes_params}, {bufs_params}) -> Result<(), Error> {{\n\
         {prep}\
         \x20       {upper}.run_cached(self.backend, &self.cache, index, &[{sizes_list}], &mut [{data}])?;\n\
         {back}\
         \x20       Ok(())\n\
         \x20   }}\n\
         }}",
    );
}

/// The reference of a built-in task, as Rust source for the generated test.
fn reference_fn(task: &str) -> &'static str {
    match task {
        "gemm" => {
            "fn reference(m: i64, n: i64, k: i64, a: &[f32], b: &[f32]) -> Vec<f32> {\n\
             \x20   let (m, n, k) = (m as usize, n as usize, k as usize);\n\
             \x20   let mut c = vec![0.0f32; m * n];\n\
             \x20   for i in 0..m {\n\
             \x20       for j in 0..n {\n\
             \x20           let mut s = 0.0f64;\n\
             \x20           for p in 0..k {\n\
             \x20               s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);\n\
             \x20           }\n\
             \x20           c[i * n + j] = s as f32;\n\
             \x20       }\n\
             \x20   }\n\
             \x20   c\n\
             }\n\
             \n\
             fn case(kernels: &Kernels<'_>, index: Option<usize>, n: i64) -> (Vec<f32>, Vec<f32>, usize) {\n\
             \x20   let (a, b) = (data((n * n) as usize, 1), data((n * n) as usize, 2));\n\
             \x20   let mut c = vec![f32::NAN; (n * n) as usize];\n\
             \x20   let chosen = match index {\n\
             \x20       Some(i) => {\n\
             \x20           kernels.gemm_with(i, n, n, n, &a, &b, &mut c).expect(\"the configuration runs\");\n\
             \x20           i\n\
             \x20       }\n\
             \x20       None => kernels.gemm(n, n, n, &a, &b, &mut c).expect(\"the dispatched call runs\"),\n\
             \x20   };\n\
             \x20   (c, reference(n, n, n, &a, &b), chosen)\n\
             }\n"
        }
        _ => {
            "fn reference(rows: i64, cols: i64, x: &[f32]) -> Vec<f32> {\n\
             \x20   let cols = cols as usize;\n\
             \x20   let mut y = vec![0.0f32; rows as usize * cols];\n\
             \x20   for (xr, yr) in x.chunks(cols).zip(y.chunks_mut(cols)) {\n\
             \x20       let m = xr.iter().fold(f64::NEG_INFINITY, |a, v| a.max(f64::from(*v)));\n\
             \x20       let s: f64 = xr.iter().map(|v| (f64::from(*v) - m).exp()).sum();\n\
             \x20       for (o, v) in yr.iter_mut().zip(xr) {\n\
             \x20           *o = ((f64::from(*v) - m).exp() / s) as f32;\n\
             \x20       }\n\
             \x20   }\n\
             \x20   y\n\
             }\n\
             \n\
             fn case(kernels: &Kernels<'_>, index: Option<usize>, n: i64) -> (Vec<f32>, Vec<f32>, usize) {\n\
             \x20   let x = data((n * n) as usize, 3);\n\
             \x20   let mut y = vec![f32::NAN; (n * n) as usize];\n\
             \x20   let chosen = match index {\n\
             \x20       Some(i) => {\n\
             \x20           kernels.softmax_with(i, n, n, &x, &mut y).expect(\"the configuration runs\");\n\
             \x20           i\n\
             \x20       }\n\
             \x20       None => kernels.softmax(n, n, &x, &mut y).expect(\"the dispatched call runs\"),\n\
             \x20   };\n\
             \x20   (y, reference(n, n, &x), chosen)\n\
             }\n"
        }
    }
}

fn test_rs(crate_ident: &str, groups: &[TaskGroup<'_>]) -> String {
    let mut out = format!(
        "//! Written by `kf export`: every configuration against the task's reference at a small\n\
         //! size where its constraints hold on this device, and the dispatched call.\n\n\
         #![allow(clippy::needless_range_loop)]\n\n\
         use {crate_ident}::*;\n\
         use kf_export::kf_core::Backend as _;\n\n\
         /// Deterministic values in [0.5, 1.5).\n\
         fn data(len: usize, seed: u64) -> Vec<f32> {{\n\
         \x20   let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);\n\
         \x20   (0..len)\n\
         \x20       .map(|_| {{\n\
         \x20           s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);\n\
         \x20           0.5 + (s >> 40) as f32 / (1u64 << 24) as f32\n\
         \x20       }})\n\
         \x20       .collect()\n\
         }}\n\n\
         fn close(got: &[f32], want: &[f32]) -> Result<(), String> {{\n\
         \x20   for (i, (g, w)) in got.iter().zip(want).enumerate() {{\n\
         \x20       if (g - w).abs() > 1e-3 * w.abs().max(1e-3) {{\n\
         \x20           return Err(format!(\"element {{i}}: {{g}} against the reference's {{w}}\"));\n\
         \x20       }}\n\
         \x20   }}\n\
         \x20   Ok(())\n\
         }}\n"
    );
    for g in groups {
        let task = g.signature.task;
        let upper = task.to_ascii_uppercase();
        let _ = writeln!(out, "\nmod {task} {{\n    use super::*;\n");
        for line in reference_fn(task).lines() {
            let _ = writeln!(out, "    {line}");
        }
        let sizes_of = if task == "gemm" {
            "[n, n, n]"
        } else {
            "[n, n]"
        };
        let _ = writeln!(
            out,
            "    const SMALL: [i64; 6] = [16, 32, 64, 96, 128, 256];\n\n\
             \x20   #[test]\n\
             \x20   fn every_configuration_matches_the_reference_at_a_small_size() {{\n\
             \x20       let Some(backend) = kf_export::kf_backend_opencl::testing::backend_or_skip() else {{\n\
             \x20           return;\n\
             \x20       }};\n\
             \x20       let mut ran = 0;\n\
             \x20       for index in 0..{upper}_CONFIGURATIONS.len() {{\n\
             \x20           let Some(n) = SMALL.into_iter().find(|&n| {upper}.check(index, backend.device(), &{sizes_of}).is_ok()) else {{\n\
             \x20               eprintln!(\"{{}}: no small size where its constraints hold here\", {upper}_CONFIGURATIONS[index].name);\n\
             \x20               continue;\n\
             \x20           }};\n\
             \x20           let (got, want, _) = case(&Kernels::new(&backend), Some(index), n);\n\
             \x20           close(&got, &want).unwrap_or_else(|e| panic!(\"{{}} at n = {{n}}: {{e}}\", {upper}_CONFIGURATIONS[index].name));\n\
             \x20           ran += 1;\n\
             \x20       }}\n\
             \x20       assert!(ran > 0, \"no configuration could run at a small size\");\n\
             \x20   }}\n\n\
             \x20   #[test]\n\
             \x20   fn the_dispatched_call_matches_the_reference() {{\n\
             \x20       let Some(backend) = kf_export::kf_backend_opencl::testing::backend_or_skip() else {{\n\
             \x20           return;\n\
             \x20       }};\n\
             \x20       let n = SMALL.into_iter().find(|&n| {upper}.choose(backend.device(), &{sizes_of}).is_ok()).expect(\"a small size some configuration serves\");\n\
             \x20       let kernels = Kernels::new(&backend);\n\
             \x20       let (got, want, first) = case(&kernels, None, n);\n\
             \x20       close(&got, &want).unwrap();\n\
             \x20       // Again through the same Kernels: the compiled kernel is reused.\n\
             \x20       let (again, want, second) = case(&kernels, None, n);\n\
             \x20       close(&again, &want).unwrap();\n\
             \x20       assert_eq!(first, second);\n\
             \x20       assert_eq!(format!(\"{{kernels:?}}\"), \"Kernels {{ compiled: 1 }}\");\n\
             \x20   }}\n\
             }}"
        );
    }
    out
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
    put("tests/reference.rs", &test_rs(&crate_ident, &groups))?;
    if let Some(lock) = &export.lockfile {
        let text = std::fs::read_to_string(lock).map_err(|e| ExportError::io(lock, e))?;
        put("Cargo.lock", &text)?;
    }
    Ok(files)
}

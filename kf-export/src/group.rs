//! Grouping the exported configurations by task (one typed function and one table per task)
//! and what the Rust crate and the Python module both print about a group: the table of
//! configurations and which configuration serves which region.

use std::collections::BTreeMap;
use std::path::Path;

use kf_eval::task::file::TaskFile;
use kf_manifest::Manifest;

use crate::dispatch::{diagonal_regions, Candidate};
use crate::error::ExportError;
use crate::run::TunedKernel;
use crate::signature::Signature;

/// `name` lower-cased with every character but ASCII letters and digits made `_`, and `_` in
/// front when it would start with a digit or be empty: an identifier in Rust and Python
/// alike, before keywords are cleared.
pub(crate) fn lower_ident(name: &str) -> String {
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
    s
}

/// A Rust identifier for a task's name of a task, size or buffer (`M` → `m`).
pub(crate) fn ident(name: &str) -> String {
    let mut s = lower_ident(name);
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
    pub(crate) signature: &'a Signature,
    /// The task file, for a task-file task (its reference cases are stored beside the code).
    pub(crate) task_file: Option<&'a TaskFile>,
    pub(crate) kernels: Vec<(String, &'a TunedKernel)>,
}

impl TaskGroup<'_> {
    /// The task's functions' name (`scaled_swish`).
    pub(crate) fn function(&self) -> String {
        ident(&self.signature.task)
    }

    /// The tuned sizes of every configuration.
    pub(crate) fn tuned_sizes(&self) -> Vec<kf_eval::task::Sizes> {
        self.kernels
            .iter()
            .map(|(_, k)| k.sizes.iter().cloned().collect())
            .collect()
    }
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
        let g = groups.entry(k.task.clone()).or_insert_with(|| TaskGroup {
            signature: &k.signature,
            task_file: k.task_file.as_ref(),
            kernels: Vec::new(),
        });
        if *g.signature != k.signature {
            return Err(unsupported(
                format!("task `{}` with another signature", k.task),
                "every run of a task in one export must have the same sizes, scalars, buffers and \
                 arguments (two task files of the same name differ): export them separately",
            ));
        }
        let name = format!("{}_{}", ident(&k.task), g.kernels.len());
        g.kernels.push((name, k));
    }
    Ok(groups.into_values().collect())
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
    let names = g.signature.size_names();
    let axis = names.join(" = ");
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
        let regions = diagonal_regions(&candidates, device, "", &names, limit);
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

/// The Rust names of a task's parameters: sizes, then scalars, then buffers (a buffer or a
/// scalar whose identifier a size already has gets a suffix).
pub(crate) struct Params {
    pub(crate) sizes: Vec<String>,
    pub(crate) scalars: Vec<String>,
    pub(crate) buffers: Vec<String>,
}

impl Params {
    /// The Rust names ([`ident`]).
    pub(crate) fn of(sig: &Signature) -> Self {
        Self::named(sig, ident)
    }

    /// The names `ident` makes of the task's, the sizes first; a scalar or buffer whose name
    /// is taken already gets `_value` or `_buf` until it is not.
    pub(crate) fn named(sig: &Signature, ident: impl Fn(&str) -> String) -> Self {
        let sizes: Vec<String> = sig.sizes.iter().map(|s| ident(s)).collect();
        let mut taken = sizes.clone();
        let mut fresh = |name: &str, suffix: &str| {
            let mut n = ident(name);
            while taken.contains(&n) {
                n.push_str(suffix);
            }
            taken.push(n.clone());
            n
        };
        let scalars = sig
            .scalars
            .iter()
            .map(|s| fresh(&s.name, "_value"))
            .collect();
        let buffers = sig.buffers.iter().map(|b| fresh(&b.name, "_buf")).collect();
        Params {
            sizes,
            scalars,
            buffers,
        }
    }

    /// Every argument name in order, comma-separated.
    pub(crate) fn list(&self) -> String {
        [&self.sizes[..], &self.scalars[..], &self.buffers[..]]
            .concat()
            .join(", ")
    }
}

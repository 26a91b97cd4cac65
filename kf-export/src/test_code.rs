//! The generated crate's `tests/reference.rs`: every configuration against the task's
//! reference at a small size where its constraints hold on the test machine's device, and the
//! dispatched call. Built-in tasks compare with a reference written in Rust here; task-file
//! tasks with the reference cases `kf export` stored beside the crate ([`crate::reference`]),
//! read and compared by the crate's `kf_check` ([`crate::standalone::check`]).

use std::fmt::Write as _;

use crate::group::{Params, TaskGroup};
use crate::signature::{Dtype, Signature};

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

pub(crate) fn test_rs(crate_ident: &str, groups: &[TaskGroup<'_>]) -> String {
    let builtin = groups.iter().any(|g| g.task_file.is_none());
    let mut out = format!(
        "//! Written by `kf export`: every configuration against the task's reference at a small\n\
         //! size where its constraints hold on this device, and the dispatched call.\n\n\
         #![allow(clippy::needless_range_loop)]\n\n\
         use {crate_ident}::*;\n"
    );
    if builtin {
        out.push_str(HELPERS);
    }
    for g in groups {
        if g.task_file.is_some() {
            task_file_module(&mut out, g);
            continue;
        }
        let task = g.function();
        let task = task.as_str();
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
             \x20       let Some(device) = kf_check::device_or_skip() else {{\n\
             \x20           return;\n\
             \x20       }};\n\
             \x20       let mut ran = 0;\n\
             \x20       for index in 0..{upper}_CONFIGURATIONS.len() {{\n\
             \x20           let Some(n) = SMALL.into_iter().find(|&n| {upper}.check(index, device.facts(), &{sizes_of}).is_ok()) else {{\n\
             \x20               eprintln!(\"{{}}: no small size where its constraints hold here\", {upper}_CONFIGURATIONS[index].name);\n\
             \x20               continue;\n\
             \x20           }};\n\
             \x20           let (got, want, _) = case(&Kernels::new(&device), Some(index), n);\n\
             \x20           close(&got, &want).unwrap_or_else(|e| panic!(\"{{}} at n = {{n}}: {{e}}\", {upper}_CONFIGURATIONS[index].name));\n\
             \x20           ran += 1;\n\
             \x20       }}\n\
             \x20       assert!(ran > 0, \"no configuration could run at a small size\");\n\
             \x20   }}\n\n\
             \x20   #[test]\n\
             \x20   fn the_dispatched_call_matches_the_reference() {{\n\
             \x20       let Some(device) = kf_check::device_or_skip() else {{\n\
             \x20           return;\n\
             \x20       }};\n\
             \x20       let n = SMALL.into_iter().find(|&n| {upper}.choose(device.facts(), &{sizes_of}).is_ok()).expect(\"a small size some configuration serves\");\n\
             \x20       let kernels = Kernels::new(&device);\n\
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

/// The data and the comparison the built-in tasks' test modules use.
const HELPERS: &str = "\n\
/// Deterministic values in [0.5, 1.5).\n\
fn data(len: usize, seed: u64) -> Vec<f32> {\n\
\x20   let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);\n\
\x20   (0..len)\n\
\x20       .map(|_| {\n\
\x20           s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);\n\
\x20           0.5 + (s >> 40) as f32 / (1u64 << 24) as f32\n\
\x20       })\n\
\x20       .collect()\n\
}\n\n\
fn close(got: &[f32], want: &[f32]) -> Result<(), String> {\n\
\x20   for (i, (g, w)) in got.iter().zip(want).enumerate() {\n\
\x20       if (g - w).abs() > 1e-3 * w.abs().max(1e-3) {\n\
\x20           return Err(format!(\"element {i}: {g} against the reference's {w}\"));\n\
\x20       }\n\
\x20   }\n\
\x20   Ok(())\n\
}\n";

/// The test module of a task-file task: every stored reference case
/// (`reference/<task>/`, [`crate::standalone::check::ReferenceCases`]) through every configuration
/// whose constraints hold there on this device, and through the dispatched call.
fn task_file_module(out: &mut String, g: &TaskGroup<'_>) {
    let task = g.function();
    let upper = task.to_ascii_uppercase();
    let case = CaseRun::of(g.signature);
    module_head(out, &task, &case);
    module_tests(out, &upper);
}

/// The statements of a test module's `run` that call the task on one reference case.
struct CaseRun {
    /// Reads the case's sizes, scalars and buffers into locals.
    body: String,
    /// Checks each written buffer against the case's expected output.
    checks: String,
    /// The call's arguments.
    call: String,
}

impl CaseRun {
    /// The statements for a task of signature `sig`.
    fn of(sig: &Signature) -> Self {
        let names = Params::of(sig);
        let mut body = String::new();
        for (s, n) in sig.sizes.iter().zip(&names.sizes) {
            let _ = writeln!(body, "        let {n} = case.size({s:?})?;");
        }
        for (s, n) in sig.scalars.iter().zip(&names.scalars) {
            let ty = if s.dtype == Dtype::I32 { "i32" } else { "f32" };
            let _ = writeln!(
                body,
                "        let {n} = case.scalar({:?})? as {ty};",
                s.name.as_ref()
            );
        }
        let mut args = Vec::new();
        let mut checks = String::new();
        for (b, n) in sig.buffers.iter().zip(&names.buffers) {
            let ty = b.dtype.rust();
            if b.access.writes() {
                let _ = writeln!(
                    body,
                    "        let mut {n}: Vec<{ty}> = case.output({:?})?;",
                    b.name.as_ref()
                );
                args.push(format!("&mut {n}"));
                let _ = writeln!(checks, "        case.check({:?}, &{n})?;", b.name.as_ref());
            } else {
                let _ = writeln!(
                    body,
                    "        let {n}: Vec<{ty}> = case.input({:?})?;",
                    b.name.as_ref()
                );
                args.push(format!("&{n}"));
            }
        }
        let mut call = [names.sizes, names.scalars].concat();
        call.extend(args);
        CaseRun {
            body,
            checks,
            call: call.join(", "),
        }
    }
}

/// Opens the test module of `task`: its reference cases, and `run`, which runs one case
/// through a configuration (or the dispatched call) and checks it.
fn module_head(out: &mut String, task: &str, case: &CaseRun) {
    let CaseRun { body, checks, call } = case;
    let _ = write!(
        out,
        "\nmod {task} {{\n\
         \x20   use super::*;\n\
         \x20   use kf_check::{{Case, ReferenceCases}};\n\n\
         \x20   /// The cases `kf export` stored: inputs drawn from the task's `init` distributions and\n\
         \x20   /// what its reference computed for them.\n\
         \x20   fn cases() -> ReferenceCases {{\n\
         \x20       ReferenceCases::read(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/reference/{task}\"))\n\
         \x20           .expect(\"the reference cases kf export stored\")\n\
         \x20   }}\n\n\
         \x20   /// Runs configuration `index` (or the one the dispatch picks) on `case`, checks every\n\
         \x20   /// buffer the kernel writes against the reference, and returns the configuration.\n\
         \x20   fn run(kernels: &Kernels<'_>, index: Option<usize>, case: &Case<'_>) -> Result<usize, Error> {{\n\
         {body}\
         \x20       let chosen = match index {{\n\
         \x20           Some(i) => {{\n\
         \x20               kernels.{task}_with(i, {call})?;\n\
         \x20               i\n\
         \x20           }}\n\
         \x20           None => kernels.{task}({call})?,\n\
         \x20       }};\n\
         {checks}\
         \x20       Ok(chosen)\n\
         \x20   }}\n\n"
    );
}

/// The test module's tests (every configuration, the dispatched call, over the stored
/// cases), and its end; `upper` is the prefix of the task's tables.
fn module_tests(out: &mut String, upper: &str) {
    let _ = writeln!(
        out,
        "\x20   #[test]\n\
         \x20   fn every_configuration_matches_the_reference_at_a_small_size() {{\n\
         {DEVICE_AND_KERNELS}\
         \x20       let mut ran = 0;\n\
         \x20       for index in 0..{upper}_CONFIGURATIONS.len() {{\n\
         \x20           let name = {upper}_CONFIGURATIONS[index].name;\n\
         \x20           let mut checked = Vec::new();\n\
         \x20           for case in cases.cases() {{\n\
         \x20               if {upper}.check(index, device.facts(), &case.sizes()).is_err() {{\n\
         \x20                   continue;\n\
         \x20               }}\n\
         \x20               run(&kernels, Some(index), &case).unwrap_or_else(|e| panic!(\"{{name}}: {{e}}\"));\n\
         \x20               checked.push(case.describe());\n\
         \x20           }}\n\
         \x20           if checked.is_empty() {{\n\
         \x20               eprintln!(\"{{name}}: no stored case where its constraints hold here\");\n\
         \x20           }} else {{\n\
         \x20               println!(\"{{name}} matches the reference at {{}}\", checked.join(\", \"));\n\
         \x20               ran += 1;\n\
         \x20           }}\n\
         \x20       }}\n\
         \x20       assert!(ran > 0, \"no configuration could run at a stored case\");\n\
         \x20   }}\n\n\
         \x20   #[test]\n\
         \x20   fn the_dispatched_call_matches_the_reference() {{\n\
         {DEVICE_AND_KERNELS}\
         \x20       let mut served = 0;\n\
         \x20       for case in cases.cases() {{\n\
         \x20           if {upper}.choose(device.facts(), &case.sizes()).is_err() {{\n\
         \x20               continue;\n\
         \x20           }}\n\
         \x20           let index = run(&kernels, None, &case).unwrap_or_else(|e| panic!(\"{{e}}\"));\n\
         \x20           println!(\"{{}}: {{}} (matches the reference)\", case.describe(), {upper}_CONFIGURATIONS[index].name);\n\
         \x20           served += 1;\n\
         \x20       }}\n\
         \x20       assert!(served > 0, \"no stored case some configuration serves\");\n\
         \x20   }}\n\
         }}"
    );
}

/// The start of each generated reference test: the device (or a skip without one), the stored
/// cases, and the kernels.
const DEVICE_AND_KERNELS: &str = "        let Some(device) = kf_check::device_or_skip() else {\n\
\x20           return;\n\
\x20       };\n\
\x20       let cases = cases();\n\
\x20       let kernels = Kernels::new(&device);\n";

//! Compiles the C++ shim (`shim/kf_sycl_shim.cpp`) into a shared library when a SYCL runtime
//! is found at build time, and tells the crate where it is. Without a runtime (or without a C++
//! compiler) the crate still builds: every use then returns `SyclError::Unavailable` with the
//! reason recorded here.
//!
//! Where the runtime is looked for, in order:
//! 1. `KF_SYCL_NO_SHIM` set (not `0`): no shim (to test the "not available" path);
//! 2. `KF_SYCL_RUNTIME`: a `sycl.json` written by `scripts/setup.sh --sycl`, a directory holding
//!    one (or `.runtime/sycl.json`), or an installation prefix with `include/sycl/sycl.hpp` and
//!    `lib/libsycl.so` (a oneAPI compiler directory, a wheel's virtual environment);
//! 3. `.runtime/sycl.json`, walking up from this crate (the KernelFoundry-rs checkout);
//! 4. the per-user folder's `sycl.json` (`$XDG_DATA_HOME/kernelfoundry/sycl.json`, written by
//!    `kf setup --sycl`): SYCL needs its runtime when this crate is *built*, so a `kf`
//!    installed with `cargo install` gets the SYCL backend by `kf setup --sycl` followed by
//!    `cargo install` again (a fresh build runs this script; a later `kf setup --sycl` that
//!    rewrites the file also makes cargo run it again);
//! 5. `$CMPLR_ROOT` (set by oneAPI's `setvars.sh`).
//!
//! The shim is a shared library in `OUT_DIR`, linked with `-lsycl` and an rpath to the
//! runtime's `lib` directory, and `dlopen`ed by the crate at run time (see `src/ffi.rs` for why
//! it is not linked into the Rust binaries).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The part of a `sycl.json` (written by `scripts/setup.sh --sycl`) the build needs; other
/// keys are ignored.
#[derive(serde::Deserialize)]
struct SyclJson {
    include_dir: PathBuf,
    lib_dir: PathBuf,
}

/// A SYCL runtime to build against.
struct Runtime {
    include: PathBuf,
    lib_dir: PathBuf,
    /// The `sycl.json` it was described by, if any.
    config: Option<PathBuf>,
    /// How it was found, for messages.
    found_by: String,
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=shim/kf_sycl_shim.cpp");
    println!("cargo:rerun-if-changed=shim/kf_sycl_shim.h");
    for var in ["KF_SYCL_RUNTIME", "KF_SYCL_NO_SHIM", "CMPLR_ROOT"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if let Err(note) = build() {
        println!("cargo:rustc-env=KF_SYCL_BUILD_NOTE={}", one_line(&note));
    }
}

fn build() -> Result<(), String> {
    if env::var("KF_SYCL_NO_SHIM").is_ok_and(|v| !v.is_empty() && v != "0") {
        return Err("KF_SYCL_NO_SHIM was set when kf-backend-sycl was built".into());
    }
    let target = env::var("TARGET").unwrap_or_default();
    let host = env::var("HOST").unwrap_or_default();
    if target != host || !target.contains("linux") {
        return Err(format!(
            "kf-backend-sycl builds its SYCL shim only for native Linux builds (target {target}, \
             host {host})"
        ));
    }
    let runtime = find_runtime()?;
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?)
        .join("libkf_sycl_shim.so");
    compile_shim(&runtime, &out)?;
    println!("cargo:rustc-env=KF_SYCL_SHIM_BUILT={}", out.display());
    println!(
        "cargo:rustc-env=KF_SYCL_BUILD_LIB_DIR={}",
        runtime.lib_dir.display()
    );
    println!(
        "cargo:rustc-env=KF_SYCL_BUILD_CONFIG={}",
        runtime
            .config
            .as_ref()
            .map(|c| c.display().to_string())
            .unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=KF_SYCL_BUILD_FOUND_BY={}",
        one_line(&runtime.found_by)
    );
    Ok(())
}

fn find_runtime() -> Result<Runtime, String> {
    if let Some(v) = env::var_os("KF_SYCL_RUNTIME").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(v);
        return runtime_at(&path, &format!("KF_SYCL_RUNTIME={}", path.display())).ok_or_else(
            || {
                format!(
                    "KF_SYCL_RUNTIME={} names neither a sycl.json nor a prefix with \
                     include/sycl/sycl.hpp and lib/libsycl.so",
                    path.display()
                )
            },
        );
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut watched = false;
    for dir in manifest_dir.ancestors() {
        let runtime_dir = dir.join(".runtime");
        let config = runtime_dir.join("sycl.json");
        if config.is_file() {
            // Rewritten by every `scripts/setup.sh --sycl`.
            println!("cargo:rerun-if-changed={}", config.display());
            return runtime_at(&config, &config.display().to_string()).ok_or_else(|| {
                format!(
                    "{} names a SYCL runtime that is gone or incomplete; run scripts/setup.sh \
                     --sycl again",
                    config.display()
                )
            });
        }
        let env_sh = runtime_dir.join("env.sh");
        if !watched && env_sh.is_file() {
            // scripts/setup.sh rewrites env.sh on every run: installing the SYCL runtime
            // later makes this script run again and find it.
            println!("cargo:rerun-if-changed={}", env_sh.display());
            watched = true;
        }
    }
    if let Some(config) = user_runtime_dir()
        .map(|dir| dir.join("sycl.json"))
        .filter(|c| c.is_file())
    {
        // Watched only when present: a missing watched file would make cargo run this script
        // on every build.
        println!("cargo:rerun-if-changed={}", config.display());
        return runtime_at(&config, &config.display().to_string()).ok_or_else(|| {
            format!(
                "{} names a SYCL runtime that is gone or incomplete; run kf setup --sycl again",
                config.display()
            )
        });
    }
    if let Some(root) = env::var_os("CMPLR_ROOT").filter(|v| !v.is_empty()) {
        let root = PathBuf::from(root);
        if let Some(rt) = runtime_at(&root, &format!("CMPLR_ROOT={}", root.display())) {
            return Ok(rt);
        }
    }
    Err(
        "no SYCL runtime was found when kf-backend-sycl was built (looked for \
         .runtime/sycl.json above the crate, the per-user folder's sycl.json of kf setup \
         --sycl, KF_SYCL_RUNTIME and CMPLR_ROOT)"
            .into(),
    )
}

/// The per-user folder `kf setup` installs into: `kf_backend_common::runtime::user_runtime_dir`
/// (a build script cannot call the crate's dependencies; the rule is the XDG one).
fn user_runtime_dir() -> Option<PathBuf> {
    env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })
        .map(|base| base.join("kernelfoundry"))
}

/// A runtime described by `path`: a `sycl.json`, a directory holding one, or a prefix.
fn runtime_at(path: &Path, found_by: &str) -> Option<Runtime> {
    if path.is_file() {
        let text = std::fs::read_to_string(path).ok()?;
        let json: SyclJson = serde_json::from_str(&text).ok()?;
        let runtime = Runtime {
            include: json.include_dir,
            lib_dir: json.lib_dir,
            config: Some(path.to_path_buf()),
            found_by: found_by.to_owned(),
        };
        return complete(&runtime).then_some(runtime);
    }
    if !path.is_dir() {
        return None;
    }
    for config in [
        path.join("sycl.json"),
        path.join(".runtime").join("sycl.json"),
    ] {
        if config.is_file() {
            return runtime_at(&config, found_by);
        }
    }
    let runtime = Runtime {
        include: path.join("include"),
        lib_dir: path.join("lib"),
        config: None,
        found_by: found_by.to_owned(),
    };
    complete(&runtime).then_some(runtime)
}

fn complete(runtime: &Runtime) -> bool {
    runtime.include.join("sycl").join("sycl.hpp").is_file()
        && runtime.lib_dir.join("libsycl.so").exists()
}

fn compile_shim(runtime: &Runtime, out: &Path) -> Result<(), String> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shim_dir = manifest_dir.join("shim");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .pic(true)
        .debug(false)
        .warnings(false)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .include(&shim_dir)
        .include(&runtime.include);
    let tool = build
        .try_get_compiler()
        .map_err(|e| format!("no C++ compiler for the SYCL shim: {e}"))?;
    let lib = runtime.lib_dir.display().to_string();
    let mut cmd: Command = tool.to_command();
    cmd.arg("-shared")
        .arg("-o")
        .arg(out)
        .arg(shim_dir.join("kf_sycl_shim.cpp"))
        .arg(format!("-L{lib}"))
        .arg("-lsycl")
        .arg(format!("-Wl,-rpath,{lib}"))
        .arg("-Wl,--no-undefined");
    let output = cmd
        .output()
        .map_err(|e| format!("running the C++ compiler {:?}: {e}", tool.path()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
    for line in tail.iter().rev() {
        println!("cargo:warning=kf-backend-sycl shim: {line}");
    }
    Err(format!(
        "the SYCL shim did not compile with {:?} against {} ({}): {}",
        tool.path(),
        runtime.include.display(),
        runtime.found_by,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// A value `cargo:rustc-env` can carry: one line, bounded.
fn one_line(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.len() > 2000 {
        let mut cut = 2000;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

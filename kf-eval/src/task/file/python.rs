//! Python references: the script runs in its own process (the virtual environment that
//! `scripts/setup.sh` prepares, or `KF_PYTHON`, or `python3`), with a timeout, exchanging
//! arrays as `.npy` files in a temporary folder.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indexmap::IndexMap;

use super::error::TaskFileError;
use super::npy;
use crate::task::host::HostBuffer;
use crate::task::spec::Sizes;

/// The driver that loads the user's script and calls `reference`.
const DRIVER: &str = include_str!("driver.py");

/// Environment variable naming the Python interpreter for references.
pub const PYTHON_ENV: &str = "KF_PYTHON";

/// The interpreter: `KF_PYTHON`, else `venv/bin/python` of the [`runtime_dir`] (a checkout's
/// `.runtime`, or the per-user folder of `kf setup --numpy`), else `python3` on the `PATH`.
pub fn python_interpreter() -> PathBuf {
    if let Some(p) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    runtime_dir()
        .map(|r| r.join("venv").join("bin").join("python"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// The variable that turns a missing Python with NumPy from a test skip into a test failure.
pub const KF_REQUIRE_PYTHON: &str = "KF_REQUIRE_PYTHON";

/// For tests of task files with Python references: whether [`python_interpreter`] can import
/// NumPy. When it cannot, prints `SKIPPED: …`, records the skip (kind `PYTHON`, see
/// [`kf_core::testing::skip`]) and returns `false`, so the test returns early;
/// under `KF_REQUIRE_PYTHON=1` (which CI sets) it fails the test instead, so that a broken
/// setup cannot turn the Python tests into passes.
///
/// ```no_run
/// if !kf_eval::task::file::python::numpy_or_skip() {
///     return; // printed `SKIPPED: …`
/// }
/// ```
///
/// # Panics
///
/// When NumPy cannot be imported and `KF_REQUIRE_PYTHON=1`: a test calling this is meant to
/// fail then.
#[track_caller]
pub fn numpy_or_skip() -> bool {
    let interpreter = python_interpreter();
    let ok = Command::new(&interpreter)
        .args(["-c", "import numpy"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        // Kind `PYTHON`: KF_REQUIRE_PYTHON=1 makes this a failure.
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Python,
            format_args!(
                "no Python with NumPy at {} (run scripts/setup.sh)",
                interpreter.display()
            ),
        );
    }
    ok
}

/// The runtime folder holding the `venv`, in the order every backend finds its runtime
/// (`kf_backend_common::runtime::discover_config`): a checkout's `.runtime` above the current
/// directory or the executable (`scripts/setup.sh`), the per-user folder (`kf setup
/// --numpy`), then the `.runtime` above this crate.
pub fn runtime_dir() -> Option<PathBuf> {
    let mut starts: Vec<PathBuf> = Vec::new();
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    let clone = |s: &PathBuf| {
        s.ancestors()
            .map(|d| d.join(".runtime"))
            .find(|d| d.join("venv").is_dir())
    };
    starts
        .iter()
        .find_map(clone)
        .or_else(|| {
            kf_backend_common::runtime::user_runtime_dir().filter(|d| d.join("venv").is_dir())
        })
        .or_else(|| clone(&PathBuf::from(env!("CARGO_MANIFEST_DIR"))))
}

/// The folders of the Python installation references run with (what a confined process
/// needs to start it): the interpreter's prefix (for a virtual
/// environment, also the installation it was made from, `home` in `pyvenv.cfg`).
pub fn installation_dirs() -> Vec<PathBuf> {
    let interpreter = python_interpreter();
    let mut out = Vec::new();
    let resolved = if interpreter.is_absolute() {
        Some(interpreter.clone())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(&interpreter))
                .find(|p| p.is_file())
        })
    };
    let Some(resolved) = resolved else {
        return out;
    };
    // <prefix>/bin/python
    if let Some(prefix) = resolved.parent().and_then(Path::parent) {
        out.push(prefix.to_path_buf());
        if let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) {
            for line in cfg.lines() {
                if let Some(home) = line
                    .split_once('=')
                    .filter(|(k, _)| k.trim() == "home")
                    .map(|(_, v)| PathBuf::from(v.trim()))
                {
                    out.extend(home.parent().map(Path::to_path_buf));
                }
            }
        }
    }
    if let Ok(real) = std::fs::canonicalize(&resolved) {
        out.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
    }
    out
}

/// One call of a Python reference.
pub(crate) struct PythonCall<'a> {
    /// The script.
    pub script: &'a Path,
    /// The task file, for errors.
    pub file: &'a str,
    /// Inputs (and in-place buffers) by name, with shapes.
    pub inputs: Vec<(&'a str, &'a HostBuffer, Vec<usize>)>,
    /// Names of the outputs expected back.
    pub outputs: Vec<&'a str>,
    /// Sizes.
    pub sizes: &'a Sizes,
    /// Scalars.
    pub scalars: IndexMap<String, serde_json::Value>,
    /// Time limit.
    pub timeout: Duration,
}

/// Runs the reference; returns each output it gave (name → data, shape). Missing outputs are
/// left out (the caller reports them with the expected shape).
pub(crate) fn run(
    call: &PythonCall<'_>,
) -> Result<IndexMap<String, (HostBuffer, Vec<usize>)>, TaskFileError> {
    let fail = |message: String| TaskFileError::Reference {
        file: call.file.to_owned(),
        reference: call.script.display().to_string(),
        message,
    };
    let io = |what: &str, e: std::io::Error| fail(format!("{what}: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("kf-reference-")
        .tempdir()
        .map_err(|e| io("creating a temporary folder", e))?;
    let work = dir.path();
    std::fs::write(work.join("driver.py"), DRIVER).map_err(|e| io("writing the driver", e))?;
    for (name, data, shape) in &call.inputs {
        npy::write(&work.join(format!("in_{name}.npy")), data, shape)
            .map_err(|e| io("writing inputs", e))?;
    }
    let meta = serde_json::json!({
        "sizes": call.sizes,
        "scalars": call.scalars,
        "inputs": call.inputs.iter().map(|(n, _, _)| *n).collect::<Vec<_>>(),
        "outputs": call.outputs,
    });
    std::fs::write(work.join("meta.json"), meta.to_string())
        .map_err(|e| io("writing meta.json", e))?;
    run_confined("driver.py", call.script, call.file, work, call.timeout)?;
    let mut out = IndexMap::new();
    for name in &call.outputs {
        let path = work.join(format!("out_{name}.npy"));
        if !path.is_file() {
            continue;
        }
        let (data, shape) = npy::read(&path).map_err(|m| fail(format!("output `{name}`: {m}")))?;
        out.insert((*name).to_owned(), (data, shape));
    }
    Ok(out)
}

/// What [`trace`] needs: the script, its task file (for errors), each f32 input's dimensions
/// as size expressions with its shape, the sizes and the scalars.
pub(crate) struct TraceCall<'a> {
    /// The reference script.
    pub script: &'a Path,
    /// The task file, for errors.
    pub file: &'a str,
    /// Each input: name, dimensions as size expressions, shape at `sizes`, dtype name.
    pub inputs: Vec<(&'a str, Vec<String>, Vec<usize>, &'static str)>,
    /// Sizes.
    pub sizes: &'a Sizes,
    /// Scalars.
    pub scalars: IndexMap<String, serde_json::Value>,
    /// Time limit.
    pub timeout: Duration,
}

/// Traces the reference into an operator graph with [`kf_graph::NUMPY_TRACER`], confined as the
/// reference is; returns the tracer's JSON answer (a graph, or the construct it does not know).
pub(crate) fn trace(call: &TraceCall<'_>) -> Result<String, TaskFileError> {
    let io = |what: &str, e: std::io::Error| TaskFileError::Reference {
        file: call.file.to_owned(),
        reference: call.script.display().to_string(),
        message: format!("{what}: {e}"),
    };
    let dir = tempfile::Builder::new()
        .prefix("kf-trace-")
        .tempdir()
        .map_err(|e| io("creating a temporary folder", e))?;
    let work = dir.path();
    std::fs::write(work.join("numpy_tracer.py"), kf_graph::NUMPY_TRACER)
        .map_err(|e| io("writing the tracer", e))?;
    let inputs: serde_json::Map<String, serde_json::Value> = call
        .inputs
        .iter()
        .map(|(name, dims, shape, dtype)| {
            (
                (*name).to_owned(),
                serde_json::json!({ "dims": dims, "shape": shape, "dtype": dtype }),
            )
        })
        .collect();
    let meta =
        serde_json::json!({ "sizes": call.sizes, "scalars": call.scalars, "inputs": inputs });
    std::fs::write(work.join("meta.json"), meta.to_string())
        .map_err(|e| io("writing meta.json", e))?;
    run_confined(
        "numpy_tracer.py",
        call.script,
        call.file,
        work,
        call.timeout,
    )?;
    std::fs::read_to_string(work.join("graph.json")).map_err(|e| io("reading graph.json", e))
}

/// Runs `program` (a Python file in `work`) on the user's `script` with `work` as its exchange
/// folder: confined to the task's folder, the Python installation and `work`, with no
/// secrets in its environment, ended with everything it started after `timeout`.
fn run_confined(
    program: &str,
    script: &Path,
    file: &str,
    work: &Path,
    timeout: Duration,
) -> Result<(), TaskFileError> {
    let fail = |message: String| TaskFileError::Reference {
        file: file.to_owned(),
        reference: script.display().to_string(),
        message,
    };
    let io = |what: &str, e: std::io::Error| fail(format!("{what}: {e}"));
    let python = python_interpreter();
    let stdout = std::fs::File::create(work.join("stdout.txt")).map_err(|e| io("stdout", e))?;
    let stderr = std::fs::File::create(work.join("stderr.txt")).map_err(|e| io("stderr", e))?;
    let script = std::path::absolute(script).unwrap_or_else(|_| script.to_path_buf());
    let mut command = Command::new(&python);
    // A reference may be third-party code (a KernelBench problem): no secrets, and confined
    // to its task's folder, the Python installation and its exchange folder (in a worker this
    // adds to the worker's own confinement; elsewhere, `kf task check` say, it is the only one).
    command
        .env_clear()
        .envs(crate::scrubbed_env())
        .arg(work.join(program))
        .arg(&script)
        .arg(work)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // A group of its own, so that a timeout ends whatever it started.
        .process_group(0);
    let mut allowed = crate::confine::AllowedPaths::for_reference();
    allowed.read.extend(installation_dirs());
    allowed.read.extend(script.parent().map(Path::to_path_buf));
    allowed.write.push(work.to_path_buf());
    // A temporary folder: in a confined worker, the worker's private one (kept while the
    // worker lives); elsewhere the exchange folder, never the shared /tmp.
    match std::env::var_os("TMPDIR")
        .filter(|_| std::env::var_os(crate::confine::CONFINED_ENV).is_some())
    {
        Some(private) => allowed.write.push(PathBuf::from(private)),
        None => {
            command.env("TMPDIR", work);
        }
    }
    // Kept until the reference has exited: it holds the reference's cgroup.
    let _confined =
        crate::confine::confine_command(&mut command, &allowed, "a task's Python reference")?;
    let mut child = command.spawn().map_err(|e| {
        TaskFileError::Python(format!(
            "cannot start `{}` ({e}); run scripts/setup.sh (it prepares .runtime/venv with \
                 NumPy) or set {PYTHON_ENV}",
            python.display()
        ))
    })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| io("waiting for python", e))? {
            Some(status) => break status,
            None if started.elapsed() >= timeout => {
                kill_tree(&mut child);
                let _ = child.wait();
                return Err(fail(format!(
                    "did not finish within {:.0} s (reference.timeout_s)",
                    timeout.as_secs_f64()
                )));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let stderr_text = std::fs::read_to_string(work.join("stderr.txt")).unwrap_or_default();
    let tail = crate::bounded(stderr_text.trim(), 3000);
    match status.code() {
        Some(0) => {}
        Some(4) => {
            return Err(TaskFileError::Python(format!(
                "{tail}\nrun scripts/setup.sh (it installs NumPy into .runtime/venv) or set \
                 {PYTHON_ENV} to a Python with NumPy"
            )))
        }
        Some(code) => return Err(fail(format!("python exited with {code}: {tail}"))),
        None => return Err(fail(format!("python was killed by a signal: {tail}"))),
    }
    Ok(())
}

/// Kills `child` and the process group it leads (what it started too).
pub(crate) fn kill_tree(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects; a negative pid names the process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

//! Running the importer's Python helper: the interpreter `scripts/setup.sh` prepared, a JSON
//! request on stdin, one JSON answer on stdout, a hard timeout.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::KernelBenchError;

/// The Python interpreter for references, the one task files' Python references use:
/// `KF_PYTHON`, else the runtime virtual environment `scripts/setup.sh` made
/// (`.runtime/venv/bin/python`, found upwards), else `python3` on the `PATH`.
pub fn default_python() -> PathBuf {
    kf_eval::task::file::python::python_interpreter()
}

/// Runs `code` (passed with `-c`) with `stdin_text` on its standard input; returns its standard
/// output. A non-zero exit, a timeout or a failure to start is a [`KernelBenchError::Python`].
///
/// The code runs a problem file, which is third-party code: without this process's secrets,
/// and confined (Linux Landlock, as evaluation workers are: [`kf_eval::confine`]) to the
/// Python installation, the runtimes and the folders in `reads`.
pub(crate) fn run_python(
    python: &Path,
    code: &str,
    stdin_text: &str,
    timeout: Duration,
    reads: &[&Path],
) -> Result<String, KernelBenchError> {
    let fail = |message: String| KernelBenchError::Python {
        python: python.display().to_string(),
        message,
    };
    let mut command = Command::new(python);
    command
        .env_clear()
        .envs(kf_eval::scrubbed_env())
        .arg("-c")
        .arg(code)
        // No __pycache__ folders beside problem files and references.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut allowed = kf_eval::confine::AllowedPaths::for_reference();
    allowed
        .read
        .extend(kf_eval::task::file::python::installation_dirs());
    allowed.read.extend(reads.iter().map(|p| p.to_path_buf()));
    // A private temporary folder: the shared /tmp may hold other programs' files.
    let tmp = tempfile::Builder::new()
        .prefix("kf-import-")
        .tempdir()
        .map_err(|e| fail(format!("cannot make a temporary folder: {e}")))?;
    allowed.write.push(tmp.path().to_path_buf());
    command.env("TMPDIR", tmp.path()).process_group(0);
    // Kept until the process has exited: it holds its cgroup.
    let _confined = kf_eval::confine::confine_command(
        &mut command,
        &allowed,
        "a KernelBench problem file (the importer's Python)",
    )?;
    let mut child = command
        .spawn()
        .map_err(|e| fail(format!("cannot start: {e}")))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
    let input = stdin_text.to_owned();
    // Written and read on their own threads so that a chatty child never blocks on a full pipe.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = read_all(stdout.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = read_all(stderr.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                // SAFETY: kill(2) has no memory effects; a negative pid names the group.
                if let Ok(pid) = i32::try_from(child.id()) {
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!("timed out after {} s", timeout.as_secs())));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(fail(format!("waiting: {e}"))),
        }
    };
    let _ = writer.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        let tail: String = stderr
            .lines()
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        return Err(fail(format!("exited with {status}: {tail}")));
    }
    Ok(stdout)
}

/// Whether `import torch` works in `python` (a slow import: up to a minute is allowed).
pub fn torch_available(python: &Path) -> bool {
    run_python(python, "import torch", "", Duration::from_secs(120), &[]).is_ok()
}

/// Whether `import numpy` works in `python`.
pub fn numpy_available(python: &Path) -> bool {
    run_python(python, "import numpy", "", Duration::from_secs(60), &[]).is_ok()
}

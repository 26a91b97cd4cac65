//! Reading a run directory's best kernel: `report.json` (the best kernel's files and
//! parameters), `run/run.json` (task, sizes, device, backend), the source and manifest.

use std::path::{Path, PathBuf};

use kf_core::ParamValues;
use kf_eval::task::file::TaskFile;
use kf_manifest::Manifest;
use serde_json::Value;

use crate::error::ExportError;
use crate::signature::{builtin, Signature};

/// Where `kf search --task-file` keeps its copy of the task file in the output folder
/// (`kf_search::task::TASK_COPY_DIR` / `TASK_COPY_FILE`), with the files it names beside it.
pub const TASK_COPY: &str = "task/task.toml";

/// The best kernel of one run, with what the export needs to call it.
#[derive(Debug, Clone)]
pub struct TunedKernel {
    /// The run directory it came from.
    pub run: PathBuf,
    /// The task (`gemm`).
    pub task: String,
    /// The task's kernel signature.
    pub signature: Signature,
    /// The task file, for a run of one (read from the run's copy, [`TASK_COPY`]).
    pub task_file: Option<TaskFile>,
    /// The backend it was measured on (`opencl`).
    pub backend: String,
    /// The device name as the backend reported it.
    pub device: String,
    /// The driver version, when the run recorded it.
    pub driver: Option<String>,
    /// The sizes it was tuned at, in the task's order.
    pub sizes: Vec<(String, i64)>,
    /// The parameter values it was measured with.
    pub params: ParamValues,
    /// The manifest text.
    pub manifest: String,
    /// The kernel source text.
    pub source: String,
    /// Its throughput in the run, GFLOP/s.
    pub gflops: Option<f64>,
}

fn read_json(path: &Path) -> Result<Value, ExportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ExportError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| ExportError::BadRun {
        path: path.to_path_buf(),
        message: format!("not JSON: {e}"),
    })
}

fn read_text(path: &Path) -> Result<String, ExportError> {
    std::fs::read_to_string(path).map_err(|e| ExportError::io(path, e))
}

/// The error for a run file that is there but not as the export needs it.
fn bad_run(path: &Path, message: &str) -> ExportError {
    ExportError::BadRun {
        path: path.to_path_buf(),
        message: message.to_owned(),
    }
}

/// What `report.json` says of the best kernel: its files (relative to the run directory),
/// its parameter values (read from their file) and its throughput.
struct BestFiles {
    source_file: String,
    manifest_file: String,
    params: ParamValues,
    gflops: Option<f64>,
}

impl BestFiles {
    /// Reads the best kernel's entry of `report` (the run in `dir`'s) and its parameters file.
    fn read(dir: &Path, report: &Value) -> Result<Self, ExportError> {
        let report_path = dir.join("report.json");
        let best = match report.get("best_kernel") {
            Some(Value::Object(b)) => b,
            _ => {
                return Err(ExportError::NoBestKernel {
                    run: dir.to_path_buf(),
                })
            }
        };
        let text = |key: &str| best.get(key).and_then(Value::as_str).map(str::to_owned);
        let source_file =
            text("path").ok_or_else(|| bad_run(&report_path, "best_kernel.path is missing"))?;
        let manifest_file = text("manifest_path").ok_or_else(|| {
            bad_run(
                &report_path,
                "the best kernel has no manifest (best_kernel.manifest_path): its launch geometry is unknown",
            )
        })?;
        // From the parameters file's text, so that they keep the manifest's order.
        let params_file = text("params_path").unwrap_or_else(|| "best_params.json".to_owned());
        let params_path = dir.join(&params_file);
        let params: ParamValues = serde_json::from_str(&read_text(&params_path)?)
            .map_err(|e| bad_run(&params_path, &format!("not parameter values: {e}")))?;
        Ok(BestFiles {
            source_file,
            manifest_file,
            params,
            gflops: best.get("gflops").and_then(Value::as_f64),
        })
    }
}

/// What `run/run.json` says of the run: the task, where it ran and at which sizes.
struct RunConfig {
    task: String,
    device: String,
    driver: Option<String>,
    backend: String,
    /// As `run.json` lists them (sorted by name).
    sizes: Vec<(String, i64)>,
}

impl RunConfig {
    /// Reads the run in `dir`'s configuration; the device falls back on the one `report`
    /// names.
    fn read(dir: &Path, report: &Value) -> Result<Self, ExportError> {
        let run_json_path = dir.join("run").join("run.json");
        let run_json = read_json(&run_json_path)?;
        let config = run_json
            .get("config")
            .ok_or_else(|| bad_run(&run_json_path, "`config` is missing"))?;
        let field = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
        let task =
            field("task").ok_or_else(|| bad_run(&run_json_path, "config.task is missing"))?;
        let device = field("device")
            .or_else(|| {
                report
                    .pointer("/extra/device")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .ok_or_else(|| bad_run(&run_json_path, "config.device is missing"))?;
        let backend = config
            .pointer("/backend/kind")
            .and_then(Value::as_str)
            .unwrap_or("opencl")
            .to_owned();
        let sizes = match config.get("sizes") {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    v.as_i64().map(|v| (k.clone(), v)).ok_or_else(|| {
                        bad_run(
                            &run_json_path,
                            &format!("config.sizes.{k} is not an integer"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(bad_run(&run_json_path, "config.sizes is missing")),
        };
        Ok(RunConfig {
            task,
            device,
            driver: field("driver"),
            backend,
            sizes,
        })
    }
}

/// The signature of the run in `dir`'s task: a run of a task file holds a copy of it;
/// otherwise the task is a built-in one.
fn task_signature(dir: &Path, task: &str) -> Result<(Signature, Option<TaskFile>), ExportError> {
    let copy = dir.join(TASK_COPY);
    if copy.is_file() {
        let file = TaskFile::load(&copy).map_err(|e| ExportError::TaskFile(Box::new(e)))?;
        Ok((Signature::from_task_file(&file)?, Some(file)))
    } else if let Some(sig) = builtin(task) {
        Ok((sig.clone(), None))
    } else {
        Err(ExportError::Unsupported {
            run: dir.display().to_string(),
            what: format!("task `{task}`"),
            why: format!(
                "it is not a built-in task (gemm, softmax) and the run holds no copy of its \
                 task file ({TASK_COPY}, which `kf search --task-file` writes beside its \
                 report; runs from before that have none): search the task file again"
            ),
        })
    }
}

/// The best kernel's source and manifest texts; the manifest must parse, describe one
/// kernel and allow the best parameter values.
fn read_kernel(dir: &Path, best: &BestFiles) -> Result<(String, String), ExportError> {
    let source = read_text(&dir.join(&best.source_file))?;
    let manifest_path = dir.join(&best.manifest_file);
    let manifest = read_text(&manifest_path)?;
    let parsed = Manifest::parse(&manifest, &manifest_path.display().to_string(), None)?;
    if parsed.is_sequence() {
        return Err(ExportError::Unsupported {
            run: dir.display().to_string(),
            what: format!("a sequence of {} kernels", parsed.sequence.len()),
            why: "the generated calls launch one kernel; a candidate of several kernels \
                  with scratch buffers (`[[kernels]]`) is not exported yet: export a run \
                  whose best kernel is one kernel"
                .into(),
        });
    }
    parsed.resolve_params(&best.params)?;
    Ok((source, manifest))
}

impl TunedKernel {
    /// Reads the best kernel of the run in `dir` (a folder `kf search` or an example wrote).
    ///
    /// # Errors
    ///
    /// [`ExportError::Io`] or [`ExportError::BadRun`] for missing or malformed files,
    /// [`ExportError::NoBestKernel`] when the run found no correct kernel, and
    /// [`ExportError::Manifest`] when the best kernel's manifest does not parse or its
    /// parameters are not among its allowed values.
    pub fn load(dir: &Path) -> Result<Self, ExportError> {
        let report = read_json(&dir.join("report.json"))?;
        let best = BestFiles::read(dir, &report)?;
        let run = RunConfig::read(dir, &report)?;
        let (signature, task_file) = task_signature(dir, &run.task)?;
        // The task's order (run.json keeps sizes sorted by name).
        let mut sizes = run.sizes;
        sizes.sort_by_key(|(n, _)| {
            signature
                .sizes
                .iter()
                .position(|s| s == n)
                .unwrap_or(usize::MAX)
        });
        let (source, manifest) = read_kernel(dir, &best)?;
        Ok(TunedKernel {
            run: dir.to_path_buf(),
            task: run.task,
            signature,
            task_file,
            backend: run.backend,
            device: run.device,
            driver: run.driver,
            sizes,
            params: best.params,
            manifest,
            source,
            gflops: best.gflops,
        })
    }

    /// The best kernels of every run in `runs`, in order ([`TunedKernel::load_all`] each).
    pub(crate) fn load_runs(runs: &[PathBuf]) -> Result<Vec<Self>, ExportError> {
        Ok(runs
            .iter()
            .map(|r| TunedKernel::load_all(r))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect())
    }

    /// The best kernels of the run in `dir`: its own, or, for a folder of runs at several
    /// sizes (`kf search --size A --size B`, listed in its `sizes.json`), each size's.
    ///
    /// # Errors
    ///
    /// [`ExportError::BadRun`] for a folder with neither `report.json` nor `sizes.json`, or an
    /// unreadable `sizes.json`, and the errors of [`TunedKernel::load`] for each run.
    pub fn load_all(dir: &Path) -> Result<Vec<Self>, ExportError> {
        if dir.join("report.json").is_file() {
            return Self::load(dir).map(|k| vec![k]);
        }
        let index = kf_archive::SizeRuns::read(dir).map_err(|e| ExportError::BadRun {
            path: dir.join(kf_archive::SIZE_RUNS_FILE),
            message: e.to_string(),
        })?;
        match index {
            Some(runs) if !runs.runs().is_empty() => runs
                .runs()
                .iter()
                .map(|r| Self::load(&dir.join(&r.dir)))
                .collect(),
            _ => Err(ExportError::BadRun {
                path: dir.to_path_buf(),
                message: "neither a run (report.json) nor a folder of runs by size (sizes.json): \
                          give the folder a search wrote (its --out)"
                    .to_owned(),
            }),
        }
    }

    /// The tuned sizes as `M=64,N=64,K=64`.
    pub fn sizes_text(&self) -> String {
        crate::sizes_text(self.sizes.iter().map(|(k, v)| (k.as_str(), *v)))
    }
}

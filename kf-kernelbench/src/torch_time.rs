//! PyTorch eager on the CPU as a timing reference for `kf bench kernelbench`: the unchanged
//! problem file's `Model.forward` at the task's sizes, on inputs shaped like the task's.

use std::path::Path;
use std::time::Duration;

use indexmap::IndexMap;
use kf_eval::task::file::{BufferRole, TaskFile};

use crate::error::KernelBenchError;
use crate::import::{ask_helper, problem_in_task, torch_adapter, write_atomic};
use crate::python::run_python;

/// Loads the adapter, draws inputs of the given shapes and prints the median forward time.
const TIMER: &str = r#"
import importlib.util, json, sys
import numpy as np
req = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("kf_torch_timing", req["adapter"])
adapter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(adapter)
rng = np.random.default_rng(0)
inputs = {}
for b in req["buffers"]:
    if b["dtype"] == "i32":
        inputs[b["name"]] = rng.integers(b["lo"], b["hi"] + 1, size=b["shape"]).astype(np.int32)
    else:
        dtype = np.float16 if b["dtype"] == "f16" else np.float32
        inputs[b["name"]] = rng.random(b["shape"]).astype(dtype)
print(json.dumps({"seconds": adapter.time_forward(inputs, req["sizes"])}))
"#;

/// Integer bounds of an `int(lo, hi)` distribution.
fn int_bounds(init: Option<&str>) -> (i64, i64) {
    init.and_then(|t| t.trim().strip_prefix("int("))
        .and_then(|t| t.strip_suffix(')'))
        .and_then(|t| t.split_once(','))
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
        .unwrap_or((0, 1))
}

/// Median seconds of the problem's forward() with PyTorch on the CPU at `sizes`; the problem
/// file is `<task folder>/vendor/<stem>.py` where the task is named `kb_<stem>`.
pub fn torch_cpu_seconds(
    python: &Path,
    task: &TaskFile,
    sizes: &IndexMap<String, i64>,
) -> Result<f64, KernelBenchError> {
    let dir = task
        .base
        .dir()
        .ok_or_else(|| KernelBenchError::NoTaskFolder {
            task: task.spec.name.clone(),
        })?;
    let stem = task
        .spec
        .name
        .strip_prefix("kb_")
        .unwrap_or(&task.spec.name);
    let problem = dir.join(problem_in_task(stem));
    let analysis = ask_helper(python, &problem, None, sizes)?;
    let absolute =
        std::fs::canonicalize(&problem).map_err(|e| KernelBenchError::io(&problem, e))?;
    let adapter_text = torch_adapter(&analysis, &absolute.display().to_string());
    // A folder of its own: the confined timer may read it, not the whole of /tmp.
    let scratch =
        std::env::temp_dir().join(format!("kf-torch-timing-{}-{stem}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| KernelBenchError::io(&scratch, e))?;
    let adapter = scratch.join("adapter.py");
    write_atomic(&adapter, &adapter_text)?;
    let sizes_all = task.complete_sizes(sizes)?;
    let shapes = task.buffer_shapes(&sizes_all)?;
    let buffers: Vec<serde_json::Value> = task
        .spec
        .buffers
        .iter()
        .zip(&shapes)
        .filter(|(b, _)| b.role == BufferRole::Input)
        .map(|(b, shape)| {
            let first = b.init.as_ref().and_then(|i| i.to_vec().into_iter().next());
            let (lo, hi) = int_bounds(first.as_deref());
            serde_json::json!({
                "name": b.name, "dtype": b.dtype.name(), "shape": shape, "lo": lo, "hi": hi,
            })
        })
        .collect();
    let request = serde_json::json!({
        "adapter": adapter,
        "buffers": buffers,
        "sizes": sizes_all,
    });
    let folders: Vec<&Path> = [Some(scratch.as_path()), absolute.parent()]
        .into_iter()
        .flatten()
        .collect();
    let result = run_python(
        python,
        TIMER,
        &request.to_string(),
        Duration::from_secs(300),
        &folders,
    );
    let _ = std::fs::remove_dir_all(&scratch);
    let stdout = result?;
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(last)
        .ok()
        .and_then(|v| v["seconds"].as_f64())
        .ok_or_else(|| KernelBenchError::Python {
            python: python.display().to_string(),
            message: format!("unreadable torch timing: {last}"),
        })
}

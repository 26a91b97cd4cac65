//! The shipped search proposes the same candidates, fills the same cells and gives the same
//! statuses as before the kf-search redesign (issue 63): each search below runs under a
//! deterministic evaluator of this file (no device: the device facts are fixed too) and its
//! run directory's steps are compared with `tests/data/behaviour/<name>.json`.
//!
//! The expected files were written by this test at commit 36b0422, the last before the
//! redesign's first slice (with that commit's builder calls for the scheduler and the CVT
//! archive: `.scheduler(SchedulerKind::Mix)`, `.archive_kind(ArchiveKind::Cvt).islands(2)`).
//! `KF_BLESS=1` writes them anew: only for a change that is meant to alter what the search
//! proposes (templates, mutators, the scheduler's policy), never for a change of structure.

use std::path::{Path, PathBuf};

use kf_core::{Candidate, DeviceFacts, DeviceKind, Evaluation, Status, TimingStats};
use kf_search::{
    defaults, EvaluatorFactory, EvaluatorInput, Search, SearchError, ShippedScheduler,
};
use serde_json::{json, Value};

/// FNV-1a, 64 bits: a digest that stays the same across Rust versions and machines.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A deterministic judge of a kernel: from a digest of its source and parameters, one kernel
/// in five computes wrong values, one in eleven does not compile, and the others take 1 to 1000 µs.
#[derive(Clone, Copy, Default)]
struct Digest;

#[kf_core::async_trait]
impl kf_core::Evaluator for Digest {
    type Error = std::convert::Infallible;
    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
        let params = serde_json::to_string(&c.params).unwrap_or_default();
        let h = fnv(format!("{}\n{params}", c.source.text).as_bytes());
        let mut e = if h.is_multiple_of(11) {
            Evaluation::failed(Status::CompileError, "digest says so")
        } else if h.is_multiple_of(5) {
            Evaluation::failed(Status::WrongValues, "digest says so")
        } else {
            let seconds = (1 + h % 1000) as f64 * 1e-6;
            let timing = TimingStats::from_samples(&[seconds]).expect("one sample");
            let mut e = Evaluation::correct(timing, None);
            e.gflops = Some(1e-3 / seconds);
            e
        };
        e.params = c.params.clone();
        Ok(e)
    }
}

/// Fixed facts of a two-core CPU device, so that the mutators see the same device everywhere.
fn facts() -> DeviceFacts {
    let mut d = DeviceFacts::unknown("behaviour-test CPU");
    d.kind = DeviceKind::Cpu;
    d.compute_units = 2;
    d.max_work_group_size = 8192;
    d.max_work_item_sizes = vec![8192, 8192, 8192];
    d.local_mem_bytes = 32768;
    d.global_mem_bytes = 8 << 30;
    d.preferred_vector_width_float = 8;
    d.global_mem_cache_bytes = 2 << 20;
    d.l1_cache_bytes = 48 << 10;
    d.l2_cache_bytes = 2 << 20;
    d.peak_gflops = Some(400.0);
    d.peak_bandwidth_gbs = Some(30.0);
    d
}

impl EvaluatorFactory for Digest {
    type Evaluator = Digest;
    fn name(&self) -> String {
        "digest".into()
    }
    fn make(self, _: &EvaluatorInput<'_>) -> Result<(Digest, DeviceFacts), SearchError> {
        Ok((self, facts()))
    }
}

/// What a run's steps did: per step, its parent and emitter, and per child the candidate (id,
/// parents, origin, a digest of its source, parameters), its status, cell and outcome.
fn steps(run: &Path) -> Value {
    let text = std::fs::read_to_string(run.join("run").join("steps.jsonl")).expect("steps");
    let steps: Vec<Value> = text
        .lines()
        .map(|line| {
            let record = &serde_json::from_str::<Value>(line).expect("a JSON line")["record"];
            let children: Vec<Value> = record["children"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|child| {
                    let elite = &child["elite"];
                    let candidate = &elite["candidate"];
                    let source = candidate["source"]["text"].as_str().unwrap_or_default();
                    json!({
                        "result": child["result"],
                        "id": candidate["id"],
                        "parents": candidate["parents"],
                        "origin": candidate["origin"],
                        "source": format!("{:016x}", fnv(source.as_bytes())),
                        "params": candidate["params"],
                        "status": elite["evaluation"]["status"],
                        "cell": elite["descriptor"]["coords"],
                        "outcome": child["outcome"],
                    })
                })
                .collect();
            json!({
                "step": record["step"],
                "parent": record["parent"],
                "emitter": record["emitter"],
                "error": record["error"],
                "children": children,
            })
        })
        .collect();
    Value::Array(steps)
}

/// Compares a run's steps with the expected file `name` (writes it under `KF_BLESS=1`).
fn same_as_before(name: &str, run: &Path) {
    let expected_path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/behaviour")
        .join(format!("{name}.json"));
    let got = steps(run);
    if std::env::var_os("KF_BLESS").is_some() {
        std::fs::create_dir_all(expected_path.parent().expect("a folder")).expect("folder");
        let text = serde_json::to_string_pretty(&got).expect("json") + "\n";
        std::fs::write(&expected_path, text).expect("written");
        return;
    }
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("the expected steps"))
            .expect("json");
    let (got, expected) = (got.as_array().unwrap(), expected.as_array().unwrap());
    for (g, e) in got.iter().zip(expected) {
        assert_eq!(g, e, "{name}: step {} differs", e["step"]);
    }
    assert_eq!(got.len(), expected.len(), "{name}: steps");
}

/// The builder of the searches below, with the digest judge.
type Builder = kf_search::SearchBuilder<
    kf_mutate::MixMutator,
    kf_search::DefaultClassifier,
    kf_search::NoLayer,
    kf_search::ShippedArchive,
    Digest,
>;

/// Runs a search of `task` at `size` under the digest judge (24 candidates, seed 7) with the
/// parts `parts` sets, and compares its steps with the expected file `name`.
fn runs_as_before(name: &str, task: &str, size: &str, parts: impl FnOnce(Builder) -> Builder) {
    let out = tempfile::tempdir().expect("a temporary folder");
    let builder = Search::builder()
        .task(task)
        .size(size)
        .expect("sizes")
        .evaluator(Digest)
        .evaluations(24)
        .seed(7)
        .reference(false)
        .out(out.path())
        .progress(false);
    parts(builder).build().expect("builds").run().expect("runs");
    same_as_before(name, out.path());
}

#[test]
fn the_shipped_search_proposes_what_it_proposed_before_the_redesign() {
    let (softmax, gemm) = ("ROWS=64,COLS=256", "M=64,N=64,K=64");
    runs_as_before("softmax_bandit_grid", "softmax", softmax, |b| b);
    runs_as_before("gemm_bandit_grid", "gemm", gemm, |b| b);
    runs_as_before("softmax_mix_grid", "softmax", softmax, |b| {
        b.scheduler(ShippedScheduler::mix())
    });
    runs_as_before("gemm_bandit_cvt_islands", "gemm", gemm, |b| {
        b.cvt(defaults::cvt()).islands(2)
    });
}

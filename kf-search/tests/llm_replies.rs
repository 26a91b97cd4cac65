//! The whole LLM loop with replies a capable model would write: the shipped search
//! (`kf_search::Search`) on gemm with the real OpenCL backend, its LLM mutator talking to a
//! real OpenAI-compatible HTTP server on 127.0.0.1 (`kf_prompt::testing::ChatServer`) that
//! reads the parent kernel out of each prompt and answers, like a model, with kernels built
//! from it: one with an indexing bug, one that does not compile, a register-blocked kernel with
//! `[params]` whose manifest sits in an ```` ```ini ```` fence, a 2-D register-blocked kernel
//! whose manifest has no `language` (and a key of the model's own), a SEARCH/REPLACE diff of
//! the manifest inside a ```` ```diff ```` fence under a `manifest` label, and the
//! register-blocked kernel again (re-commented and re-indented).
//!
//! It checks what issue 24 asks: each failure's diagnostics reach a later prompt within
//! `lag + 1` steps, the ini-fenced and language-less manifests are used, the fenced manifest
//! diff edits the manifest, the repeated kernel is not evaluated again (the model is told it
//! repeated itself), no slower kernel displaces an elite, meta-calls see judged children, and
//! a good LLM child is compiled, verified, tuned over its `[params]`, enters the archive and
//! becomes the best kernel.
//!
//! Skips (printing `SKIPPED: …`) without an OpenCL runtime unless `KF_REQUIRE_OPENCL=1`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kf_archive::{RunDir, RunMeta};
use kf_core::{ChildRecord, InsertOutcome, Language, Status, StepRecord};
use kf_eval::task::{builtin_task, parse_sizes};
use kf_eval::WorkerCommand;
use kf_prompt::testing::{ChatServer, SeenRequest};
use kf_prompt::{fingerprint, parse::code_blocks, LlmMutator, OpenAiClient, OpenAiConfig};
use kf_search::{seeds_for, Search, SearchConfig};

kf_eval::worker_test_entry!(|spec: &kf_eval::BackendSpec| {
    kf_eval::BackendFactory::open(&kf_search::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

/// Steps after which credit (and so a lesson) is visible to prompts.
const LAG: u64 = 1;

/// The parent kernel and manifest a prompt shows (`# Current kernel …`).
fn parent_of(prompt: &str) -> (String, String) {
    let at = prompt
        .find("# Current kernel")
        .expect("the prompt shows the current kernel");
    let end = prompt[at..]
        .find("# Its evaluation")
        .map_or(prompt.len(), |e| at + e);
    let blocks = code_blocks(&prompt[at..end]);
    let kernel = blocks.first().map(|b| b.text.clone()).unwrap_or_default();
    let manifest = blocks
        .iter()
        .skip(1)
        .find(|b| b.lang == "toml")
        .map(|b| b.text.clone())
        .unwrap_or_default();
    (kernel, manifest)
}

/// The parent's parameter list, `(…)` after `gemm`, copied as a model keeps the signature.
fn signature(kernel: &str) -> String {
    let start = kernel.find("void gemm").expect("the parent defines gemm");
    let open = start + kernel[start..].find('(').expect("a parameter list");
    let close = open + kernel[open..].find(')').expect("a closed parameter list");
    kernel[open..=close].to_owned()
}

/// Register blocking: each work-item computes RM rows of one column of C, so each element of
/// B it loads serves RM multiply-adds. `skip_last_k` is the indexing bug.
fn row_blocked(sig: &str, skip_last_k: bool, undeclared: bool) -> String {
    let k_end = if skip_last_k { "K - 1" } else { "K" };
    let b = if undeclared {
        "Btile[k]"
    } else {
        "B[k * N + col]"
    };
    format!(
        "__kernel void gemm{sig} {{
    const int col = get_global_id(0);
    const int row0 = get_global_id(1) * RM;
    if (col >= N || row0 >= M) {{
        return;
    }}
    float acc[RM];
    for (int r = 0; r < RM; ++r) {{
        acc[r] = 0.0f;
    }}
    for (int k = 0; k < {k_end}; ++k) {{
        const float b = {b};
        for (int r = 0; r < RM; ++r) {{
            acc[r] += A[(row0 + r) * K + k] * b;
        }}
    }}
    for (int r = 0; r < RM; ++r) {{
        C[(row0 + r) * N + col] = acc[r];
    }}
}}"
    )
}

const ROW_BLOCKED_MANIFEST: &str = "entry = \"gemm\"
language = \"opencl\"

[params]
RM = [1, 4, 8]
WG = [16]

[constraints]
rules = [\"M % RM == 0\"]

[launch]
global = [\"((N + WG - 1) / WG) * WG\", \"((M / RM + WG - 1) / WG) * WG\"]
local = [\"WG\", \"WG\"]";

/// 2-D register blocking: RM rows times CN columns per work-item, the columns N / CN apart so
/// that neighbouring work-items still read neighbouring elements of B.
fn tile_blocked(sig: &str) -> String {
    format!(
        "__kernel void gemm{sig} {{
    const int col0 = get_global_id(0);
    const int row0 = get_global_id(1) * RM;
    const int stride = N / CN;
    if (col0 >= stride || row0 >= M) {{
        return;
    }}
    float acc[RM][CN];
    for (int r = 0; r < RM; ++r) {{
        for (int c = 0; c < CN; ++c) {{
            acc[r][c] = 0.0f;
        }}
    }}
    for (int k = 0; k < K; ++k) {{
        float b[CN];
        for (int c = 0; c < CN; ++c) {{
            b[c] = B[k * N + col0 + c * stride];
        }}
        for (int r = 0; r < RM; ++r) {{
            const float a = A[(row0 + r) * K + k];
            for (int c = 0; c < CN; ++c) {{
                acc[r][c] += a * b[c];
            }}
        }}
    }}
    for (int r = 0; r < RM; ++r) {{
        for (int c = 0; c < CN; ++c) {{
            C[(row0 + r) * N + col0 + c * stride] = acc[r][c];
        }}
    }}
}}"
    )
}

/// The 2-D kernel's manifest as a model might write it: no `language`, a key of its own.
const TILE_MANIFEST_WITHOUT_LANGUAGE: &str = "entry = \"gemm\"
notes = \"RM x CN outputs per work-item\"

[params]
RM = [4, 2]
CN = [2, 4]
WG = [8, 16]

[constraints]
rules = [\"M % RM == 0\", \"N % CN == 0\", \"(N / CN) % WG == 0\"]

[launch]
global = [\"N / CN\", \"((M / RM + WG - 1) / WG) * WG\"]
local = [\"WG\", \"WG\"]";

/// A full rewrite reply: a sentence, the kernel, the manifest in a fence labelled `fence`.
fn rewrite(why: &str, kernel: &str, fence: &str, manifest: &str) -> String {
    format!("{why}\n\n```opencl\n{kernel}\n```\n\n```{fence}\n{manifest}\n```\n")
}

/// A SEARCH/REPLACE edit of the parent's manifest, inside a ```diff fence under a `manifest`
/// label: the first parameter's values reversed, so its default changes.
fn manifest_diff(manifest: &str) -> String {
    let line = manifest
        .lines()
        .skip_while(|l| l.trim() != "[params]")
        .skip(1)
        .find(|l| l.contains("= ["))
        .expect("the parent's manifest has a parameter");
    let (name, values) = line.split_once('=').unwrap();
    let values: Vec<&str> = values
        .trim()
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(str::trim)
        .collect();
    let mut reversed = values.clone();
    reversed.reverse();
    format!(
        "Try the other work-group size first.\n\nmanifest\n```diff\n<<<<<<< SEARCH\n{line}\n=======\n{} = [{}]\n>>>>>>> REPLACE\n```\n",
        name.trim(),
        reversed.join(", ")
    )
}

/// What the "model" answers to request number `n` of the mutator (follow-ups and meta-calls
/// aside), built from the parent the prompt shows.
fn answer(n: usize, req: &SeenRequest) -> String {
    let prompt = req.messages[1].1.as_str();
    let (kernel, manifest) = parent_of(prompt);
    let sig = signature(&kernel);
    match n {
        0 => rewrite(
            "Register blocking over rows.",
            &row_blocked(&sig, true, false),
            "toml",
            ROW_BLOCKED_MANIFEST,
        ),
        1 => rewrite(
            "Keep a tile of B in registers.",
            &row_blocked(&sig, false, true),
            "toml",
            ROW_BLOCKED_MANIFEST,
        ),
        2 => rewrite(
            "Register blocking: RM rows of C per work-item reuse each load of B.",
            &row_blocked(&sig, false, false),
            "ini",
            ROW_BLOCKED_MANIFEST,
        ),
        3 => rewrite(
            "Block RM rows and CN columns per work-item.",
            &tile_blocked(&sig),
            "toml",
            TILE_MANIFEST_WITHOUT_LANGUAGE,
        ),
        4 => manifest_diff(&manifest),
        // The kernel of reply 2 again, re-commented and re-indented.
        5 => rewrite(
            "Register blocking (again).",
            &format!(
                "// RM rows per work-item.\n{}",
                row_blocked(&sig, false, false).replace("    ", "  ")
            ),
            "ini",
            &format!("# register blocking\n{ROW_BLOCKED_MANIFEST}"),
        ),
        // Further ideas: the register-blocked kernel with other parameter lists.
        n => {
            let lists = ["[8, 4]", "[4, 8]", "[8, 2]", "[2, 8]", "[4, 1]", "[8, 1]"];
            let list = lists[(n - 6) % lists.len()];
            rewrite(
                "Register blocking with other block heights.",
                &row_blocked(&sig, false, false),
                "toml",
                &ROW_BLOCKED_MANIFEST.replace("RM = [1, 4, 8]", &format!("RM = {list}")),
            )
        }
    }
}

/// The server's whole behaviour: meta-calls get a rewritten section, follow-ups (a repeat, or
/// edits that did not apply) a different kernel, first requests the scripted reply.
fn respond(next: &AtomicUsize, req: &SeenRequest) -> String {
    let system = req.messages.first().map_or("", |(_, c)| c.as_str());
    if system.contains("You maintain the instructions") {
        return "```text\n- Compute several outputs per work-item so every load is reused.\n- Keep neighbouring work-items on neighbouring addresses.\n```".into();
    }
    if req.messages.len() > 2 {
        let first = ChatServerScript::first_user(req);
        let (kernel, _) = parent_of(first);
        return rewrite(
            "A different blocking: two rows per work-item first.",
            &row_blocked(&signature(&kernel), false, false),
            "toml",
            &ROW_BLOCKED_MANIFEST.replace("RM = [1, 4, 8]", "RM = [2, 4]"),
        );
    }
    let n = next.fetch_add(1, Ordering::SeqCst);
    answer(n, req)
}

struct ChatServerScript;

impl ChatServerScript {
    fn first_user(req: &SeenRequest) -> &str {
        req.messages
            .iter()
            .find(|(r, _)| r == "user")
            .map_or("", |(_, c)| c.as_str())
    }
}

#[test]
fn llm_replies_a_capable_model_would_write_land_in_the_search() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    // The log at default verbosity: one `llm step …` line per LLM child.
    #[cfg(feature = "logging")]
    kf_search::logging::init(0);
    let next = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&next);
    let server = ChatServer::start(move |req| respond(&counter, req)).expect("the test server");

    let client = OpenAiClient::new(OpenAiConfig::new(server.base_url())).unwrap();
    let llm = LlmMutator::builder(client)
        .configure(|c| {
            c.meta.every_steps = 3;
            c.meta.lag_steps = LAG;
            c.max_reply_tokens = 1500;
        })
        .build()
        .unwrap();

    let sizes = parse_sizes("M=128,N=128,K=128").unwrap();
    let task = builtin_task("gemm", &sizes).unwrap();
    let seeds = seeds_for(task.as_ref(), Language::OpenCl, Vec::new());
    let out = tempfile::tempdir().unwrap();
    let mut config = SearchConfig::new("gemm", task.sizes());
    config.evaluations = 9;
    config.tune_budget = 3;
    config.wall = Some(Duration::from_secs(600));
    config.out = out.path().join("search");
    config.progress = false;
    config.in_flight = 1;
    config.worker = Some(WorkerCommand::test_harness().unwrap());
    config.eval.timing.min_trials = 5;
    config.eval.timing.min_seconds = 0.005;
    config.eval.timing.max_seconds = 0.2;

    let outcome = Search::builder()
        .config(config)
        .mutator(llm.clone())
        .seeds(seeds)
        .build()
        .unwrap()
        .run()
        .unwrap();

    let requests = server.requests();
    let is_meta = |r: &SeenRequest| {
        r.messages
            .first()
            .is_some_and(|(_, c)| c.contains("You maintain the instructions"))
    };
    // First requests of the mutator, in step order: request i belongs to step i + 1 (step 0
    // evaluated the seed).
    let firsts: Vec<&SeenRequest> = requests
        .iter()
        .filter(|r| !is_meta(r) && r.messages.len() == 2)
        .collect();
    let credits = llm.credits();
    for c in &credits {
        eprintln!(
            "credit: step {} {} of {:?}: {} -> {} ({}) {}",
            c.step,
            c.child,
            c.parent,
            c.how,
            c.status,
            c.outcome,
            c.diagnostics.lines().next().unwrap_or("")
        );
    }
    let by_step: HashMap<u64, _> = credits.iter().map(|c| (c.step, c)).collect();

    // Every failure's diagnostics reach a prompt within LAG + 1 steps, whatever the parent.
    let failures: Vec<_> = credits
        .iter()
        .filter(|c| c.status != Status::Correct)
        .collect();
    assert!(
        failures.iter().any(|c| c.status == Status::WrongValues)
            && failures.iter().any(|c| c.status == Status::CompileError),
        "the buggy and the non-compiling kernels were judged as such: {credits:#?}"
    );
    for f in &failures {
        let first_line = f.diagnostics.lines().next().unwrap_or("").trim();
        let needle: String = first_line.chars().take(50).collect();
        let window = (f.step + 1)..=(f.step + LAG + 1);
        let reached = window.clone().any(|s| {
            firsts
                .get((s - 1) as usize)
                .is_some_and(|r| r.messages[1].1.contains(&needle))
        });
        let later = firsts.len() as u64 > f.step;
        assert!(
            reached || !later,
            "the lesson of step {} ({}: {needle:?}) reached no prompt of steps {window:?}",
            f.step,
            f.status
        );
    }
    let compile = failures
        .iter()
        .find(|c| c.status == Status::CompileError)
        .unwrap();
    assert!(compile.diagnostics.contains("Btile"), "{compile:?}");

    // The ini-fenced manifest was used: the child has its parameters and was tuned over them.
    let ini = by_step.get(&3).expect("step 3 was judged");
    assert!(ini.how.contains("```ini"), "{ini:?}");
    assert_eq!(ini.status, Status::Correct, "{ini:?}");
    // The manifest without `language` was used, its extra key ignored, both said.
    let no_lang = by_step.get(&4).expect("step 4 was judged");
    assert!(
        no_lang.how.contains("`language` was missing"),
        "{no_lang:?}"
    );
    assert!(no_lang.how.contains("`notes` was ignored"), "{no_lang:?}");
    assert_eq!(no_lang.status, Status::Correct, "{no_lang:?}");
    // The diff under `manifest` in a ```diff fence edited the manifest, not the kernel.
    let diff = by_step.get(&5).expect("step 5 was judged");
    assert_eq!(diff.how, "1 edit", "{diff:?}");

    // The repeat of step 3's kernel: told, not evaluated again, and a new kernel instead.
    let told = requests.iter().any(|r| {
        r.messages.len() > 2
            && r.last("user")
                .is_some_and(|u| u.contains(&format!("repeats candidate {}", ini.child)))
    });
    assert!(
        told,
        "the model was told it repeated candidate {}",
        ini.child
    );

    // Every child the run evaluated, from the run directory.
    let run = out.path().join("search/run");
    let meta: RunMeta =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    let records: Vec<StepRecord> = RunDir::open(&run, meta).unwrap().read_records().unwrap();
    let mut seen_keys: HashMap<String, u64> = HashMap::new();
    let mut cells: HashMap<Vec<usize>, (f64, u64)> = HashMap::new();
    for record in &records {
        for child in &record.children {
            let ChildRecord::Judged { elite, outcome } = child else {
                panic!("a child was not judged: {child:?}");
            };
            let c = &elite.candidate;
            if c.extraction_failure_reason().is_none() {
                let key = fingerprint(&c.source.text, c.source.manifest.as_deref());
                if let Some(earlier) = seen_keys.insert(key, c.id.0) {
                    panic!("{} repeats #{earlier} and was evaluated again", c.id);
                }
            }
            if c.origin.llm_step == Some(3) {
                // Tuned over its [params]: the first value (RM = 1, no blocking) lost.
                assert_eq!(
                    c.params.get("RM").map(ToString::to_string).as_deref(),
                    Some("1")
                );
                let tuned = elite.evaluation.params.get("RM").map(ToString::to_string);
                assert_ne!(
                    tuned.as_deref(),
                    Some("1"),
                    "tuning chose a blocked RM: {}",
                    elite.evaluation.params
                );
            }
            if c.origin.llm_step == Some(5) {
                let m = c.source.manifest.as_deref().unwrap_or("");
                let parent = records
                    .iter()
                    .flat_map(|r| &r.children)
                    .map(ChildRecord::candidate)
                    .find(|p| Some(p.id) == c.parents.first().copied())
                    .unwrap();
                assert_eq!(c.source.text, parent.source.text, "the kernel is unchanged");
                assert_ne!(
                    Some(m),
                    parent.source.manifest.as_deref(),
                    "the manifest was edited"
                );
            }
            // No kernel slower in seconds displaces a correct elite.
            let median = elite.evaluation.timing.map(|t| t.median_s);
            let coords = elite.descriptor.coords.clone();
            match outcome {
                InsertOutcome::NewCell => {
                    if let Some(m) = median.filter(|_| elite.evaluation.status.is_correct()) {
                        cells.insert(coords, (m, c.id.0));
                    }
                }
                InsertOutcome::Improved { .. } => {
                    if let (Some(m), Some((old, who))) = (median, cells.get(&coords).copied()) {
                        assert!(
                            m <= old,
                            "{} ({m:.3e} s) displaced #{who} ({old:.3e} s)",
                            c.id
                        );
                    }
                    if let Some(m) = median.filter(|_| elite.evaluation.status.is_correct()) {
                        cells.insert(coords, (m, c.id.0));
                    }
                }
                InsertOutcome::NotAdded { .. } => {}
            }
        }
    }

    // Meta-calls started only once there were judged children to learn from.
    let metas: Vec<&SeenRequest> = requests.iter().filter(|r| is_meta(r)).collect();
    assert!(!metas.is_empty(), "an epoch made a meta-call");
    for m in &metas {
        let user = m.last("user").unwrap_or("");
        assert!(!user.contains("has been judged yet"), "{user}");
    }

    // A good LLM child, tuned over its [params], is the best kernel.
    let best = outcome.archive.best().expect("a best kernel");
    eprintln!(
        "best: {} ({}) {:?} GFLOP/s, params {}",
        best.candidate.id,
        best.candidate.origin.note,
        best.evaluation.gflops,
        best.evaluation.params
    );
    assert_eq!(
        best.candidate.origin.mutator, "llm",
        "{:?}",
        best.candidate.origin
    );
    assert_eq!(best.evaluation.status, Status::Correct);
    assert!(
        best.evaluation.params.get("RM").is_some(),
        "the best kernel has the LLM's parameters: {}",
        best.evaluation.params
    );
    let baseline = outcome.baseline_gflops.expect("the seed's throughput");
    assert!(
        best.evaluation.gflops.unwrap_or(0.0) > baseline,
        "the best LLM kernel beats the naive seed ({baseline:.2} GFLOP/s)"
    );
}

//! Host-file probes through the LLM path of the shipped search (issue 47): a real
//! OpenAI-compatible server on 127.0.0.1 (`kf_prompt::testing::ChatServer`) answers every
//! kernel request with the task's naive kernel behind an include of a planted secret file,
//! one include form after another. The search (real OpenCL workers, isolated and confined)
//! records the exchanges, then the same search replays them. In both runs every LLM child is
//! refused before compilation with a diagnostic naming the directive, and neither the planted
//! file's contents, nor a secret-looking environment variable, nor a URL password appears in
//! any file of the run directory (records, log, report) or in any prompt the server received.
//!
//! Skips (printing `SKIPPED: …`) without an OpenCL runtime unless `KF_REQUIRE_OPENCL=1`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kf_core::{Language, Status};
use kf_eval::task::{builtin_task, parse_sizes};
use kf_prompt::testing::{ChatServer, SeenRequest};
use kf_prompt::{LlmMutator, LlmMutatorBuilder, OpenAiClient, OpenAiConfig};
use kf_search::{seeds_for, Search};

mod common;
use common::{run_folder_or_skip, short_search};

kf_eval::worker_test_entry!(|spec: &kf_eval::BackendSpec| {
    kf_eval::BackendFactory::open(&kf_search::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

/// The include forms the model tries, in turn (`{}`: the secret's path).
const FORMS: [&str; 5] = [
    "#include \"{}\"",
    "#define P \"{}\"\n#include P",
    "#include <{}>",
    "#import \"{}\"",
    "#if __has_include(\"{}\")\n#endif",
];

fn reply(secret: &Path, n: usize) -> String {
    let naive = kf_eval::kernels::shipped("gemm_naive", Language::OpenCl)
        .unwrap()
        .kernel_source()
        .unwrap();
    let form = FORMS[n % FORMS.len()].replace("{}", secret.to_str().unwrap());
    format!(
        "Here is a faster kernel.\n\n```c\n{form}\n{}\n```\n",
        naive.text
    )
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Runs a short search whose only mutator is `llm`; returns the run folder.
fn search(out: &Path, llm: LlmMutator) -> PathBuf {
    let sizes = parse_sizes("M=64,N=64,K=64").unwrap();
    let task = builtin_task("gemm", &sizes).unwrap();
    let seeds = seeds_for(task.as_ref(), Language::OpenCl, Vec::new());
    let mut config = short_search("gemm", task.sizes(), out, 6);
    config.progress = false;
    config.in_flight = 1;
    config.seed = 7;
    Search::builder()
        .config(config)
        .mutator(llm)
        .seeds(seeds)
        .build()
        .unwrap()
        .run()
        .unwrap();
    out.to_path_buf()
}

/// Every LLM child was refused before compilation, and no secret is in the run's files.
fn check(run: &Path, llm: &LlmMutator, secrets: &[&str]) {
    let credits = llm.credits();
    assert!(!credits.is_empty(), "the LLM proposed no child");
    for c in &credits {
        assert_eq!(c.status, Status::CompileError, "{c:?}");
        assert!(
            c.diagnostics.contains("refused before compilation"),
            "{}",
            c.diagnostics
        );
    }
    let mut files = Vec::new();
    files_under(run, &mut files);
    assert!(files.len() > 3, "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(!text.contains(s), "{} holds a planted secret", f.display());
        }
    }
}

/// Runs the search in `out` with an LLM mutator asking `server`, set up by `records` to record
/// its exchanges or to replay them, and checks the run ([`check`]).
fn search_and_check(
    out: &Path,
    server: &ChatServer,
    secrets: &[&str],
    records: impl FnOnce(LlmMutatorBuilder) -> LlmMutatorBuilder,
) {
    let client = OpenAiClient::new(OpenAiConfig::new(server.base_url())).unwrap();
    let llm = records(LlmMutator::builder(client)).build().unwrap();
    let run = search(out, llm.clone());
    check(&run, &llm, secrets);
}

#[test]
fn llm_probes_are_refused_and_no_secret_reaches_the_run_or_a_prompt() {
    let Some((tmp, vault)) = run_folder_or_skip("vault") else {
        return;
    };
    let file_secret = ["PLANTED", "SEARCH", "FILE"].join("_");
    let secret = vault.join("creds.h");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(&secret, format!("#error {file_secret}\n")).unwrap();
    // Secrets of this (the search's) process: a secret-looking variable and a URL password.
    let env_secret = ["planted", "env", "token", "4711"].join("-");
    let url_secret = ["planted", "url", "pw", "0815"].join("");
    std::env::set_var("KF_PLANTED_SEARCH_TOKEN", &env_secret);
    std::env::set_var(
        "KF_DATABASE_URL",
        format!("postgres://kf:{url_secret}@127.0.0.1:1/kf"),
    );
    let secrets = [
        file_secret.as_str(),
        env_secret.as_str(),
        url_secret.as_str(),
    ];

    let next = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&next);
    let path = secret.clone();
    let server =
        ChatServer::start(move |_req| reply(&path, counter.fetch_add(1, Ordering::SeqCst)))
            .expect("the test server");

    let recorded = tmp.path().join("recorded");
    search_and_check(&recorded, &server, &secrets, |llm| {
        llm.record_in(recorded.join("llm"))
    });
    let requests: Vec<SeenRequest> = server.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let prompt = r.text();
        for s in secrets {
            assert!(!prompt.contains(s), "a prompt carried a planted secret");
        }
    }
    // A later prompt shows the refusal (compile errors are fed back), not the file.
    assert!(
        requests
            .iter()
            .any(|r| r.text().contains("refused before compilation")),
        "no prompt showed the refusal"
    );

    // The same search replayed from the records: nothing is sent, the same refusals.
    let asked = server.requests().len();
    let replayed = tmp.path().join("replayed");
    std::fs::create_dir_all(&replayed).unwrap();
    search_and_check(&replayed, &server, &secrets, |llm| {
        llm.replay_from(recorded.join("llm"))
    });
    assert_eq!(server.requests().len(), asked, "a replay asked the server");
}

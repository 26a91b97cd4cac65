//! LLM calls through the queue, with real servers: two searches ask one endpoint through
//! NATS JetStream and PostgreSQL (`QueuedLlm` over an `Asker`), and one `kf worker --role
//! answer` next to the model server (the llama.cpp server of `scripts/llm-server.sh`) answers
//! both through its one gateway, whose budget (3 requests) both share: three questions get the
//! model's replies, the fourth a spent budget, whichever search asked it. Skips with a message
//! without the distribution servers (unless `KF_REQUIRE_DIST=1`) or the LLM server (unless
//! `KF_REQUIRE_LLM=1`).

#[path = "common/cluster.rs"]
mod cluster;
#[path = "../kf-dist/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kernelfoundry::dist::{Asker, DistConfig, QueuedLlm, Role, SecurityFiles};
use kernelfoundry::prompt::{ChatMessage, ChatRequest, FailureKind, LlmClient};

#[test]
fn two_searches_share_an_llm_answer_worker_and_its_budget() {
    let Some(servers) = common::servers("two_searches_share_an_llm_answer_worker_and_its_budget")
    else {
        return;
    };
    let Some(llm) =
        kernelfoundry::prompt::testing::server_or_skip(Path::new(env!("CARGO_MANIFEST_DIR")))
    else {
        return;
    };
    let nats = common::Nats::start(&servers);
    let db = common::TestDb::create(&servers.database_url, "facade_llm_queue");
    let out = tempfile::tempdir().unwrap();
    let args = cluster::server_args(&servers, &nats, &db);
    let log = out.path().join("answerer.log");
    let mut worker = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["worker", "--role", "answer", "--endpoint", "local-llm"])
        .args(["--name", "answerer", "--llm-base-url", &llm.base_url])
        .args(
            llm.model
                .iter()
                .flat_map(|m| ["--llm-model".to_string(), m.clone()]),
        )
        .args(&args)
        .env("KF_LLM_BUDGET_REQUESTS", "3")
        .env("KF_LLM_MAX_TOKENS", "24")
        .env("KF_LLM_CONCURRENCY", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut dist =
        DistConfig::new(nats.url(), db.url.clone()).result_timeout(Some(Duration::from_secs(240)));
    dist = match &servers.secrets {
        Some(dir) => dist.security_files(SecurityFiles::in_dir(dir, Role::Search)),
        None => dist.security(kernelfoundry::dist::Security::insecure()),
    };
    let client = |run: &str| {
        QueuedLlm::new(
            Asker::connect(dist.clone(), run, "local-llm").unwrap(),
            "local-llm",
        )
    };
    let (a, b) = (client("llm-search-a"), client("llm-search-b"));
    let model = llm.model.clone().unwrap_or_else(|| "default".into());
    let ask = |c: &QueuedLlm, n: u32| {
        let (c, model) = (c.clone(), model.clone());
        std::thread::spawn(move || {
            let request = ChatRequest::new(
                model,
                vec![ChatMessage::user(format!("Count from {n} to {}.", n + 3))],
            )
            .with_max_tokens(24)
            .with_temperature(0.0);
            futures::executor::block_on(c.complete(&request))
        })
    };
    let replies: Vec<_> = [ask(&a, 1), ask(&b, 2), ask(&a, 3), ask(&b, 4)]
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let _ = worker.kill();
    let _ = worker.wait();
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let answered: Vec<_> = replies.iter().filter_map(|r| r.as_ref().ok()).collect();
    let refused: Vec<_> = replies.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(answered.len(), 3, "{replies:?}\n{said}");
    for r in &answered {
        assert!(r.usage.completion_tokens > 0, "{r:?}");
    }
    assert_eq!(refused.len(), 1, "{replies:?}");
    assert_eq!(refused[0].kind, FailureKind::BudgetExhausted, "{refused:?}");
    assert_eq!(db.count("SELECT count(*) FROM kf_answers"), 4);
    assert_eq!(
        db.count("SELECT count(DISTINCT run_id) FROM kf_answers"),
        2,
        "both searches asked"
    );
}

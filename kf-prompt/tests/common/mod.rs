//! What several LLM test files share: the seed kernel their searches start from, and the
//! client a replay is built with.

// Each test file uses only part of it.
#![allow(dead_code)]

use kf_core::Candidate;
use kf_prompt::{async_trait, ChatRequest, ChatResponse, FailureKind, LlmClient, LlmFailure};

/// The naive OpenCL GEMM of `kf-eval` with its manifest's default parameters.
pub(crate) fn naive_gemm() -> Candidate {
    let naive = kf_eval::kernels::OPENCL_GEMM_NAIVE;
    let manifest = naive.manifest().unwrap();
    Candidate::seed(
        manifest.kernel_source(naive.source),
        manifest.default_params(),
    )
}

/// The client of a replayed run, where no server may be reached: every request fails as a
/// transport failure saying so.
pub(crate) struct NoServer(pub(crate) &'static str);

#[async_trait]
impl LlmClient for NoServer {
    async fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        Err(LlmFailure::new(FailureKind::Transport, self.0))
    }
}

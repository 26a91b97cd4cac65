//! The messages of `kf-dist`'s queue, decoded as the workers and searches decode what NATS
//! (and the database) hands them ([`kf_dist::decode_message`]): jobs, with their signature
//! ([`kf_dist::TrustedKeys::verify`]) and the worker's check of their content
//! ([`kf_dist::check_job`]); results and refusals on a run's results subject, with the
//! search's check of a stored result's signature ([`kf_dist::StoredResult::trusted_by`]);
//! questions and their answers, down to an LLM answer ([`kf_dist::decode_llm_answer`]).
//!
//! Signatures are made with a fixed key over the input's exact bytes, so every decoded
//! message is also checked signed, unsigned, signed by another key and altered.

use kf_core::{KernelSource, Language};
use kf_dist::{
    check_job, decode_llm_answer, decode_message, job_id, kernel_hash, AnswerMessage, AskMessage,
    JobMessage, Profile, Refusal, RefusalMessage, ResultMessage, SigningKey, StoredResult,
    TrustedKeys, MESSAGE_VERSION, REFUSAL_KIND,
};
use kf_prompt::ChatRequest;
use serde::{de::DeserializeOwned, Serialize};

use crate::{split_parts, MAX_INPUT, PARENT_KERNEL};

/// The key the search (jobs, questions) and the worker (results, answers) sign with.
pub fn signing_key() -> SigningKey {
    SigningKey::from_seed([7; 32])
}

/// A key nobody trusts.
fn stranger() -> SigningKey {
    SigningKey::from_seed([9; 32])
}

/// The kernel a job's kernel hash is checked against (what the worker fetched by hash).
pub fn kernel() -> KernelSource {
    KernelSource::new(Language::OpenCl, "gemm_tiled", PARENT_KERNEL)
}

/// The profile a job's profile hash is checked against.
pub fn profile() -> Profile {
    Profile::from_value(serde_json::json!({"task": "gemm", "M": 256, "N": 128, "K": 64}))
}

/// The subject a job arrives on when the input names none.
pub const SUBJECT: &str = "kf.eval.gpu.p1";

/// Checks the signature of `payload` with the deployment's trusted keys: a signature of its
/// exact bytes by the trusted key passes; none, a stranger's, or the bytes altered, fail.
/// `headers` are the input's own signer and signature, which must not panic either.
fn check_signatures(payload: &[u8], headers: Option<(&str, &str)>) {
    let key = signing_key();
    let trusted = key.public();
    let signature = key.sign(payload);
    assert_eq!(trusted.verify(key.id(), payload, &signature), Ok(()));
    assert_eq!(trusted.verify("", payload, ""), Err(Refusal::Unsigned));
    let other = stranger();
    assert!(matches!(
        trusted.verify(other.id(), payload, &other.sign(payload)),
        Err(Refusal::UntrustedSigner(_))
    ));
    let mut altered = payload.to_vec();
    match altered.first_mut() {
        Some(b) => *b ^= 1,
        None => altered.push(b' '),
    }
    assert_eq!(
        trusted.verify(key.id(), &altered, &signature),
        Err(Refusal::BadSignature)
    );
    if let Some((signer, signature)) = headers {
        let _ = trusted.verify(signer, payload, signature);
        let _ = TrustedKeys::default().verify(signer, payload, signature);
    }
}

/// A decoded message, encoded again, decodes to itself: nothing is lost on its way through
/// the queue (the workspace reads floats back exactly: serde_json's `float_roundtrip`).
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(what: &str, m: &T) {
    let bytes = serde_json::to_vec(m).expect("a decoded message encodes");
    let again: T = decode_message(what, &bytes).expect("an encoded message decodes");
    assert_eq!(&again, m, "{what} changed on a round trip");
}

fn text(part: Option<&[u8]>) -> String {
    String::from_utf8_lossy(part.unwrap_or_default()).into_owned()
}

/// Target `dist_job`: `PAYLOAD [NUL SIGNER NUL SIGNATURE [NUL SUBJECT]]`, a job as a worker
/// takes it off the queue: the payload decoded, its version and signature checked (the
/// headers as given, and signed properly), then its content against the kernel and profile
/// it names (the subject gives the device kind), as given and with its hashes made right.
pub fn dist_job(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let parts = split_parts(data, 4);
    let payload = parts[0].unwrap_or_default();
    let headers = parts[1].map(|signer| (text(Some(signer)), text(parts[2])));
    check_signatures(
        payload,
        headers.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
    );
    let subject = match parts[3] {
        Some(s) => text(Some(s)),
        None => SUBJECT.to_owned(),
    };
    let Ok(job) = decode_message::<JobMessage>("job", payload) else {
        return;
    };
    round_trip("job", &job);
    if job.v != MESSAGE_VERSION {
        return;
    }
    let (source, profile) = (kernel(), profile());
    let _ = check_job(&job, &source, &profile, &subject);
    let candidate = job.candidate(source.clone());
    assert_eq!(candidate.params, job.params);
    // The same job with its hashes right passes the worker's check.
    let kind = subject.rsplit('.').nth(1).unwrap_or("");
    let mut fixed = job.clone();
    fixed.kernel = kernel_hash(&source).expect("the kernel hashes");
    fixed.profile = profile.hash.clone();
    let Ok(id) = job_id(&fixed.kernel, &fixed.params, &fixed.profile, kind) else {
        return;
    };
    fixed.job = id;
    fixed.request = fixed.job.0.clone();
    assert_eq!(check_job(&fixed, &source, &profile, &subject), Ok(()));
    let mut rerun = fixed.clone();
    rerun.request = format!("{}-{}", fixed.job, fixed.run);
    assert_eq!(check_job(&rerun, &source, &profile, &subject), Ok(()));
    let mut other = fixed;
    other.request.push('x');
    assert!(check_job(&other, &source, &profile, &subject).is_err());
}

/// Target `dist_result`: `[KIND NUL] PAYLOAD`, a message on a run's results subject with the
/// `Kf-Kind` header `KIND` (none without a NUL), decoded as the search does: a refusal, or a
/// result of this message version. A result is then stored signed and read back: the
/// search's signature check accepts it exactly when the trusted worker key signed it and the
/// row's columns are the message's.
pub fn dist_result(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let parts = split_parts(data, 2);
    let (kind, payload) = match parts[1] {
        Some(payload) => (Some(text(parts[0])), payload),
        None => (None, parts[0].unwrap_or_default()),
    };
    check_signatures(payload, None);
    if kind.as_deref() == Some(REFUSAL_KIND) {
        if let Ok(refusal) = decode_message::<RefusalMessage>("refusal", payload) {
            round_trip("refusal", &refusal);
        }
        return;
    }
    let Ok(result) = decode_message::<ResultMessage>("result", payload) else {
        return;
    };
    round_trip("result", &result);
    if result.v != MESSAGE_VERSION {
        return;
    }
    // Stored as the worker stores it: the message byte for byte, and columns from it.
    let Ok(signed) = std::str::from_utf8(payload) else {
        return;
    };
    let key = signing_key();
    let trusted = key.public();
    let stored = StoredResult {
        request: result.request.clone(),
        job: result.job.clone(),
        evaluation: result.evaluation.clone(),
        worker: result.worker.clone(),
        worker_key: result.worker_key.clone(),
        environment: result.environment.clone(),
        signed: signed.to_owned(),
        signature: key.sign(payload),
    };
    assert_eq!(stored.trusted_by(None), Ok(()));
    let verdict = stored.trusted_by(Some(&trusted));
    assert_eq!(
        verdict.is_ok(),
        result.worker_key == key.id(),
        "{verdict:?}"
    );
    let mut moved = stored.clone();
    moved.request.push('x');
    assert!(moved.trusted_by(Some(&trusted)).is_err());
    let _ = result.evaluation.fitness();
}

/// Target `dist_question`: `QUESTION [NUL ANSWER]`, a question as an answer worker takes it off
/// the queue (decoded, signed, its question read as the chat request of an LLM answer
/// worker) and an answer as the asker reads it from the database (decoded, its signature
/// checked, its answer read as an LLM reply or failure).
pub fn dist_question(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let parts = split_parts(data, 2);
    let question = parts[0].unwrap_or_default();
    check_signatures(question, None);
    if let Ok(ask) = decode_message::<AskMessage>("question", question) {
        round_trip("question", &ask);
        if let Ok(request) = serde_json::from_value::<ChatRequest>(ask.question.clone()) {
            let _ = request.estimated_prompt_tokens();
            let _ = request.content_hash();
        }
    }
    let Some(answer) = parts[1] else {
        return;
    };
    check_signatures(answer, None);
    let Ok(message) = decode_message::<AnswerMessage>("answer", answer) else {
        return;
    };
    round_trip("answer", &message);
    let key = signing_key();
    let verdict = key
        .public()
        .verify(&message.worker_key, answer, &key.sign(answer));
    assert_eq!(verdict.is_ok(), message.worker_key == key.id());
    match decode_llm_answer(message.answer.clone()) {
        Ok(reply) => {
            let _ = reply.hit_token_limit();
            let _ = reply.usage.total();
        }
        Err(failure) => {
            if message.answer.is_ok() {
                assert_eq!(failure.kind, kf_prompt::FailureKind::Malformed);
            }
        }
    }
}

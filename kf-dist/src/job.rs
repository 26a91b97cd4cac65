//! What travels on the queue: small job and result messages that name kernels and profiles by
//! hash (their text lives in PostgreSQL), and the content-derived ids that make a redelivered or
//! duplicated job unable to produce a second result.

use std::collections::BTreeMap;
use std::fmt;

use kf_core::{Candidate, CandidateId, Evaluation, KernelSource, Origin, ParamValues};
use serde::{Deserialize, Serialize};

use crate::error::{DistError, Result};

/// Version of the message format; a worker refuses messages of another version.
pub const MESSAGE_VERSION: u32 = 2;

/// NATS header naming the key that signed a job (its id, see [`crate::SigningKey::id`]).
pub const SIGNER_HEADER: &str = "Kf-Signer";
/// NATS header holding the Ed25519 signature (hex) of the job message's exact bytes.
pub const SIGNATURE_HEADER: &str = "Kf-Signature";

/// NATS header of a message on a run's results subject that is not a result: `refusal` (a
/// [`RefusalMessage`]). A result carries none.
pub const KIND_HEADER: &str = "Kf-Kind";

/// NATS header on a job a compile worker passed on to the execute workers: the compile
/// worker's name, for logs. The execute worker finds the build in the database (where the
/// binary's hash is recorded); the job's own signature is the search's, unchanged.
pub const COMPILED_BY_HEADER: &str = "Kf-Compiled-By";

/// [`KIND_HEADER`]'s value on a [`RefusalMessage`].
pub const REFUSAL_KIND: &str = "refusal";

/// A content hash (128 bits of BLAKE3, hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Hash(pub String);

impl Hash {
    fn of(domain: &str, parts: &[&[u8]]) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(domain.as_bytes());
        for p in parts {
            // Length-prefixed, so that no two different part lists hash alike.
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        Hash(h.finalize().to_hex()[..32].to_string())
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The hash of a kernel: its language, entry point, text, declared parameters and manifest.
pub fn kernel_hash(source: &KernelSource) -> Result<Hash> {
    let json = serde_json::to_vec(source).map_err(|e| DistError::decode("kernel", e))?;
    Ok(Hash::of("kf-kernel-v1", &[&json]))
}

/// The content hash of a compiled binary a compile worker stores for execute workers: they
/// check the bytes they fetch against it before using them.
pub fn binary_hash(bytes: &[u8]) -> Hash {
    Hash::of("kf-binary-v1", &[bytes])
}

/// The request id of a run's `number`-th question, whose JSON text is `question`.
pub(crate) fn question_id(run: &str, number: u64, question: &[u8]) -> Hash {
    Hash::of(
        "kf-question-v1",
        &[run.as_bytes(), &number.to_le_bytes(), question],
    )
}

/// What a worker needs besides the kernel to evaluate a job (task, sizes, backend, protocol,
/// tuning budget…), as JSON the worker's handler understands, and its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile.
    pub value: serde_json::Value,
    /// Its canonical text (object keys sorted).
    pub text: String,
    /// Hash of the text.
    pub hash: Hash,
}

impl Profile {
    /// A profile from any serialisable value.
    pub fn new(value: &impl Serialize) -> Result<Self> {
        let value = serde_json::to_value(value).map_err(|e| DistError::decode("profile", e))?;
        Ok(Self::from_value(value))
    }

    /// A profile from JSON.
    pub fn from_value(value: serde_json::Value) -> Self {
        let text = canonical(&value);
        let hash = Hash::of("kf-profile-v1", &[text.as_bytes()]);
        Profile { value, text, hash }
    }
}

/// JSON text with object keys sorted at every level, whatever map the value was built with.
fn canonical(value: &serde_json::Value) -> String {
    fn sort(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let sorted: BTreeMap<&String, serde_json::Value> =
                    m.iter().map(|(k, v)| (k, sort(v))).collect();
                serde_json::Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

/// The id of a job: the hash of (kernel, parameter values, profile, device kind). Two
/// evaluations with the same id would measure the same thing, so the second is answered from
/// the first's stored result.
pub fn job_id(
    kernel: &Hash,
    params: &ParamValues,
    profile: &Hash,
    device_kind: &str,
) -> Result<Hash> {
    // Parameters in name order: the same values always hash alike.
    let sorted: BTreeMap<&str, _> = params.iter().collect();
    let params = serde_json::to_vec(&sorted).map_err(|e| DistError::decode("parameters", e))?;
    Ok(Hash::of(
        "kf-job-v1",
        &[
            kernel.0.as_bytes(),
            &params,
            profile.0.as_bytes(),
            device_kind.as_bytes(),
        ],
    ))
}

/// A job on the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMessage {
    /// Message format version ([`MESSAGE_VERSION`]).
    pub v: u32,
    /// The job id.
    pub job: Hash,
    /// The request: the JetStream message id and the stored result's key. The job id for a
    /// job's first evaluation (so that every later run reuses it); `<job>-<run>` for a
    /// re-evaluation this run asked for.
    pub request: String,
    /// The run whose results subject receives the result.
    pub run: String,
    /// The kernel, by hash.
    pub kernel: Hash,
    /// The profile, by hash.
    pub profile: Hash,
    /// The candidate's id in its run (for logs and lineage).
    pub candidate: CandidateId,
    /// Its parents.
    #[serde(default)]
    pub parents: Vec<CandidateId>,
    /// Parameter values to evaluate with.
    pub params: ParamValues,
    /// Which mutator made it.
    #[serde(default)]
    pub origin: Origin,
}

impl JobMessage {
    /// Rebuilds the candidate from the message and its kernel.
    pub fn candidate(&self, source: KernelSource) -> Candidate {
        Candidate {
            id: self.candidate,
            parents: self.parents.clone(),
            // The kernel text carries an extraction failure across the queue.
            extraction_failure: kf_core::extraction_failure_in(&source).map(str::to_owned),
            source,
            params: self.params.clone(),
            origin: self.origin.clone(),
        }
    }
}

/// A result on the queue, on its way to the database and the waiting search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultMessage {
    /// Message format version.
    pub v: u32,
    /// The job id.
    pub job: Hash,
    /// The request it answers.
    pub request: String,
    /// The run that asked.
    pub run: String,
    /// The evaluation.
    pub evaluation: Evaluation,
    /// Name of the worker that produced it.
    pub worker: String,
    /// Id of the key the worker signed it with (empty: unsigned).
    pub worker_key: String,
    /// Hash of the worker's environment (driver and evaluator versions).
    pub environment: String,
    /// Which delivery of the job produced it (1 = the first).
    pub delivery: u32,
    /// Wall time the worker spent, seconds.
    pub seconds: f64,
}

/// A worker's notice, on the run's results subject, that it refused a job unevaluated (see
/// [`crate::Refusal`]): the search fails the job at once instead of waiting for a result that
/// will never come. Like a result message it only says where to look: the search fails the job
/// when the database holds the refusal (`kf_refusals`) for the job and run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusalMessage {
    /// Message format version.
    pub v: u32,
    /// The job id the refused message named.
    pub job: Hash,
    /// The request it named.
    pub request: String,
    /// The run it named.
    pub run: String,
    /// Name of the worker that refused it.
    pub worker: String,
}

pub(crate) fn encode<T: Serialize>(what: &str, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| DistError::decode(what, e))
}

/// Decodes a message as the workers and searches do: a payload off the queue (a
/// [`JobMessage`], [`ResultMessage`], [`RefusalMessage`], [`crate::AskMessage`]) or a signed
/// message the database holds (a result, a [`crate::AnswerMessage`], a
/// [`crate::BuildRecord`]), from its JSON. Bytes that are not one are a [`DistError::Decode`]
/// naming `what`. The message version ([`MESSAGE_VERSION`]) and the signature
/// ([`crate::TrustedKeys::verify`], over these exact bytes) are the caller's to check.
pub fn decode<'a, T: Deserialize<'a>>(what: &str, bytes: &'a [u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| DistError::decode(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::{Language, ParamValue};

    fn params(pairs: &[(&str, i64)]) -> ParamValues {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ParamValue::Int(*v)))
            .collect()
    }

    #[test]
    fn job_ids_depend_on_content_not_on_parameter_order() {
        let k = kernel_hash(&KernelSource::new(
            Language::OpenCl,
            "k",
            "__kernel void k(){}",
        ))
        .unwrap();
        let p = Profile::from_value(serde_json::json!({"task": "gemm", "M": 64}));
        let a = job_id(&k, &params(&[("TS", 16), ("WPT", 4)]), &p.hash, "cpu").unwrap();
        let b = job_id(&k, &params(&[("WPT", 4), ("TS", 16)]), &p.hash, "cpu").unwrap();
        assert_eq!(a, b);
        assert_ne!(
            a,
            job_id(&k, &params(&[("TS", 32), ("WPT", 4)]), &p.hash, "cpu").unwrap()
        );
        assert_ne!(
            a,
            job_id(&k, &params(&[("TS", 16), ("WPT", 4)]), &p.hash, "gpu").unwrap()
        );
        let k2 = kernel_hash(&KernelSource::new(
            Language::OpenCl,
            "k",
            "__kernel void k(){ }",
        ))
        .unwrap();
        assert_ne!(
            a,
            job_id(&k2, &params(&[("TS", 16), ("WPT", 4)]), &p.hash, "cpu").unwrap()
        );
    }

    #[test]
    fn profiles_hash_canonically() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": 3}}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a": {"x": 3, "y": 2}, "b": 1}"#).unwrap();
        assert_eq!(Profile::from_value(a).hash, Profile::from_value(b).hash);
        let c = serde_json::json!({"a": {"x": 3, "y": 2}, "b": 2});
        let d = serde_json::json!({"a": {"x": 3, "y": 2}, "b": 1});
        assert_ne!(Profile::from_value(c).hash, Profile::from_value(d).hash);
    }
}

//! [`Security`]: who may connect and whose jobs and results count.
//!
//! - **Transport**: TLS to both servers, verified against the deployment's CA
//!   ([`Security::ca`]), with a role's user and password ([`Credentials`]). A plain-text
//!   connection to anything but loopback or a Unix socket is refused unless
//!   [`Security::insecure`] is set; the refusal happens before any traffic.
//! - **Signatures**: a search signs every job and a worker every result with an Ed25519 key
//!   ([`SigningKey`]); each side accepts only what a key it trusts signed ([`TrustedKeys`]).
//! - **Secrets** stay in their files: credential and key files must be owner-only (mode 0600
//!   or stricter), and no type here prints a secret (`Debug` shows `***`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, Verifier};
use serde::Deserialize;

use crate::error::{DistError, Result};

/// Text that must never be printed: `Debug` shows `***`, and every secret made is registered
/// with [`kf_core::redact`], so that no log leaving the process (a compiler's, a worker's)
/// carries it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub struct Secret(String);

impl From<String> for Secret {
    fn from(value: String) -> Self {
        kf_core::redact::register_secret(&value);
        Secret(value)
    }
}

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret::from(value.into())
    }

    /// The secret itself, for the client that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// One role's user names and passwords on both servers, from a credentials file
/// (`search.cred`, `worker.cred`): `{"nats_user", "nats_password", "database_user",
/// "database_password"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Credentials {
    /// NATS user.
    pub nats_user: String,
    /// NATS password.
    pub nats_password: Secret,
    /// PostgreSQL role.
    pub database_user: String,
    /// PostgreSQL password.
    pub database_password: Secret,
}

impl Credentials {
    /// Reads a credentials file, refusing one that others may read.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = read_private(path)?;
        serde_json::from_str(&text).map_err(|e| DistError::decode(path.display().to_string(), e))
    }
}

/// Reads a file that holds a secret: refused unless only its owner may read or write it.
pub fn read_private(path: &Path) -> Result<String> {
    let bad = |why: String| DistError::Security(format!("{}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(bad(format!(
                "mode {mode:o} lets others read it; a credential or key file must be owner-only \
                 (chmod 600)"
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    // Its contents (a key, a credentials file) must reach no log of this process.
    kf_core::redact::register_secret(&text);
    Ok(text)
}

/// An Ed25519 key that signs jobs (a search's) or results (a worker's).
#[derive(Clone)]
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    id: String,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

/// The short public name of a key: 32 hex digits of the BLAKE3 hash of the public key.
fn key_id(key: &ed25519_dalek::VerifyingKey) -> String {
    blake3::hash(key.as_bytes()).to_hex()[..32].to_string()
}

impl SigningKey {
    /// A key from its 32-byte seed (tests, and programs that keep keys elsewhere).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        let id = key_id(&key.verifying_key());
        SigningKey { key, id }
    }

    /// A key from a PKCS#8 PEM file (`openssl genpkey -algorithm ed25519`), refused unless
    /// owner-only.
    pub fn from_file(path: &Path) -> Result<Self> {
        let pem = read_private(path)?;
        let key = ed25519_dalek::SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
            DistError::Security(format!(
                "{}: not an Ed25519 private key ({e})",
                path.display()
            ))
        })?;
        let id = key_id(&key.verifying_key());
        Ok(SigningKey { key, id })
    }

    /// The public name of the key (what messages and the database record).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key that verifies this key's signatures.
    pub fn public(&self) -> TrustedKeys {
        let mut keys = BTreeMap::new();
        keys.insert(self.id.clone(), self.key.verifying_key());
        TrustedKeys { keys }
    }

    /// The signature of `message`, as hex.
    pub fn sign(&self, message: &[u8]) -> String {
        hex(&self.key.sign(message).to_bytes())
    }
}

/// Public keys whose signatures are accepted, by key id.
#[derive(Clone, PartialEq, Default)]
pub struct TrustedKeys {
    keys: BTreeMap<String, ed25519_dalek::VerifyingKey>,
}

impl fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.keys.keys()).finish()
    }
}

impl TrustedKeys {
    /// Every `PUBLIC KEY` PEM block of a file (`openssl pkey -pubout`, concatenated).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| DistError::Security(format!("{}: {e}", path.display())))?;
        Self::from_pem(&text).map_err(|e| DistError::Security(format!("{}: {e}", path.display())))
    }

    /// Every `PUBLIC KEY` PEM block of a text.
    pub fn from_pem(text: &str) -> std::result::Result<Self, PemError> {
        const END: &str = "-----END PUBLIC KEY-----";
        let mut keys = BTreeMap::new();
        for block in text.split_inclusive(END).filter(|b| b.contains(END)) {
            let key =
                ed25519_dalek::VerifyingKey::from_public_key_pem(block.trim()).map_err(|e| {
                    PemError::NotEd25519 {
                        reason: e.to_string(),
                    }
                })?;
            keys.insert(key_id(&key), key);
        }
        if keys.is_empty() {
            return Err(PemError::NoPublicKey);
        }
        Ok(TrustedKeys { keys })
    }

    /// The ids of the keys.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Whether the key `signer` is trusted and signed `message` with `signature` (hex).
    pub fn verify(&self, signer: &str, message: &[u8], signature: &str) -> Result<(), Refusal> {
        if signer.is_empty() || signature.is_empty() {
            return Err(Refusal::Unsigned);
        }
        let key = self
            .keys
            .get(signer)
            .ok_or_else(|| Refusal::UntrustedSigner(signer.to_string()))?;
        let bytes: [u8; 64] = unhex(signature)
            .and_then(|b| b.try_into().ok())
            .ok_or(Refusal::BadSignature)?;
        let signature = ed25519_dalek::Signature::from_bytes(&bytes);
        key.verify(message, &signature)
            .map_err(|_| Refusal::BadSignature)
    }
}

/// Why a text holds no trusted keys ([`TrustedKeys::from_pem`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PemError {
    /// A `PUBLIC KEY` block that is not an Ed25519 key.
    #[error("not an Ed25519 public key ({reason})")]
    NotEd25519 {
        /// What the PEM decoder said.
        reason: String,
    },
    /// No `PUBLIC KEY` block at all.
    #[error("holds no PUBLIC KEY block")]
    NoPublicKey,
}

/// Why a signed message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// It carries no signature.
    #[error("unsigned")]
    Unsigned,
    /// A key not among the trusted ones signed it.
    #[error("signed by untrusted key {0}")]
    UntrustedSigner(String),
    /// The signature does not match the content (altered after signing, or forged).
    #[error("the signature does not match the content (altered after signing)")]
    BadSignature,
    /// The content contradicts itself (a job id that is not the hash of its content, a
    /// kernel whose text does not hash to the job's kernel hash).
    #[error("inconsistent content: {0}")]
    Inconsistent(String),
}

/// A deployment's security settings for one process (a search or a worker).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Security {
    /// The role's user names and passwords; `None`: connect without (loopback test servers).
    pub credentials: Option<Credentials>,
    /// The CA that signed the servers' certificates; given, both connections use TLS and
    /// verify the servers against it.
    pub ca: Option<PathBuf>,
    /// Allow plain-text connections to addresses other than loopback and unsigned messages.
    pub insecure: bool,
    /// This process's key: a search signs its jobs with it, a worker its results.
    pub signing_key: Option<SigningKey>,
    /// The keys this process accepts signatures of: a worker's, the searches' keys (a job
    /// signed by another key is refused before anything is compiled); a search's, the
    /// workers' keys (a stored result another key signed is not reused).
    pub trusted_keys: Option<TrustedKeys>,
}

impl Security {
    /// No TLS, no credentials, no signatures, plain text allowed: servers on loopback only.
    pub fn insecure() -> Self {
        Security {
            insecure: true,
            ..Default::default()
        }
    }

    /// Whether connections use TLS.
    pub fn tls(&self) -> bool {
        self.ca.is_some()
    }

    /// Refuses a plain-text connection to a host that is not loopback (or a Unix socket)
    /// unless insecure.
    pub(crate) fn check_plain_text(&self, what: &str, hosts: &[String]) -> Result<()> {
        if self.tls() || self.insecure {
            return Ok(());
        }
        match hosts.iter().find(|h| !is_local(h)) {
            Some(h) => Err(DistError::Security(format!(
                "refusing a plain-text {what} connection to {h}: give the deployment's CA \
                 (--ca, KF_DIST_CA) for TLS, or --insecure"
            ))),
            None => Ok(()),
        }
    }

    /// Refuses to run without signatures unless insecure: a search needs a signing key, a
    /// worker trusted keys.
    pub(crate) fn check_signatures(&self, role: Role) -> Result<()> {
        if self.insecure {
            return Ok(());
        }
        let (missing, what) = match role {
            Role::Search => (self.signing_key.is_none(), "a signing key (--signing-key)"),
            Role::Worker => (
                self.trusted_keys.is_none(),
                "the searches' public keys (--trusted-keys)",
            ),
        };
        if missing {
            return Err(DistError::Security(format!(
                "a {} needs {what}, or --insecure",
                role.name()
            )));
        }
        Ok(())
    }
}

/// Which side of a deployment a process is: its credentials, its key and whom it trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A search: publishes signed jobs, trusts workers' keys.
    Search,
    /// A worker: evaluates jobs signed by trusted searches, signs its results.
    Worker,
}

impl Role {
    /// `search` or `worker`: the stem of the role's files.
    pub fn name(self) -> &'static str {
        match self {
            Role::Search => "search",
            Role::Worker => "worker",
        }
    }

    /// The file of the public keys this role trusts (the other role's).
    pub fn trusted_file(self) -> &'static str {
        match self {
            Role::Search => "trusted-workers.pem",
            Role::Worker => "trusted-searches.pem",
        }
    }
}

/// The files a process's [`Security`] comes from; any may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityFiles {
    /// The role's credentials (`search.cred`, `worker.cred`).
    pub credentials: Option<PathBuf>,
    /// The deployment's CA certificate (`ca.crt`).
    pub ca: Option<PathBuf>,
    /// The process's signing key (`search.key`, `worker.key`).
    pub signing_key: Option<PathBuf>,
    /// The public keys it trusts (`trusted-workers.pem`, `trusted-searches.pem`).
    pub trusted_keys: Option<PathBuf>,
    /// Allow plain text beyond loopback and unsigned messages.
    pub insecure: bool,
}

impl SecurityFiles {
    /// The files `scripts/dist-servers.sh` writes into a secrets folder for `role`, those
    /// that exist.
    pub fn in_dir(dir: &Path, role: Role) -> Self {
        let file = |name: String| Some(dir.join(name)).filter(|p| p.exists());
        SecurityFiles {
            credentials: file(format!("{}.cred", role.name())),
            ca: file("ca.crt".into()),
            signing_key: file(format!("{}.key", role.name())),
            trusted_keys: file(role.trusted_file().into()),
            insecure: false,
        }
    }

    /// Reads the files (credentials and keys refused unless owner-only).
    pub fn load(&self) -> Result<Security> {
        Ok(Security {
            credentials: self
                .credentials
                .as_deref()
                .map(Credentials::from_file)
                .transpose()?,
            ca: self.ca.clone(),
            insecure: self.insecure,
            signing_key: self
                .signing_key
                .as_deref()
                .map(SigningKey::from_file)
                .transpose()?,
            trusted_keys: self
                .trusted_keys
                .as_deref()
                .map(TrustedKeys::from_file)
                .transpose()?,
        })
    }
}

/// Whether a host name is this machine: loopback addresses, `localhost`, a Unix socket path.
fn is_local(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.starts_with('/') || h.eq_ignore_ascii_case("localhost") {
        return true;
    }
    h.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The hosts of a comma-separated list of NATS URLs (`nats://u@host:4222`, `tls://host`, `host`).
pub(crate) fn nats_hosts(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(|u| {
            let u = u.trim();
            let rest = u.split_once("://").map_or(u, |(_, r)| r);
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            let rest = rest.split('/').next().unwrap_or(rest);
            if let Some(v6) = rest.strip_prefix('[') {
                v6.split(']').next().unwrap_or(v6).to_string()
            } else {
                rest.rsplit_once(':').map_or(rest, |(h, _)| h).to_string()
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_only_for_trusted_keys_and_unaltered_content() {
        let key = SigningKey::from_seed([7; 32]);
        let other = SigningKey::from_seed([8; 32]);
        let trusted = key.public();
        let sig = key.sign(b"job");
        assert_eq!(trusted.verify(key.id(), b"job", &sig), Ok(()));
        assert_eq!(
            trusted.verify(key.id(), b"jab", &sig),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            trusted.verify(other.id(), b"job", &other.sign(b"job")),
            Err(Refusal::UntrustedSigner(other.id().into()))
        );
        assert_eq!(trusted.verify("", b"job", ""), Err(Refusal::Unsigned));
        assert_eq!(
            trusted.verify(key.id(), b"job", "zz"),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn plain_text_is_refused_beyond_loopback() {
        let s = Security::default();
        let hosts = |u: &str| nats_hosts(u);
        assert_eq!(hosts("nats://u:p@10.0.0.5:4222"), vec!["10.0.0.5"]);
        assert_eq!(
            hosts("tls://[::1]:4222,127.0.0.1"),
            vec!["::1", "127.0.0.1"]
        );
        assert!(s
            .check_plain_text("NATS", &hosts("nats://127.0.0.1:4222"))
            .is_ok());
        assert!(s.check_plain_text("NATS", &hosts("localhost:4222")).is_ok());
        assert!(s
            .check_plain_text("NATS", &hosts("nats://192.0.2.1:4222"))
            .is_err());
        assert!(Security::insecure()
            .check_plain_text("NATS", &hosts("nats://192.0.2.1"))
            .is_ok());
        assert!(s
            .check_plain_text("PostgreSQL", &["/tmp/socket".into()])
            .is_ok());
    }

    #[test]
    fn secrets_do_not_print() {
        let c: Credentials = serde_json::from_str(
            r#"{"nats_user":"u","nats_password":"hunter2","database_user":"d","database_password":"swordfish"}"#,
        )
        .unwrap();
        let shown = format!("{c:?} {:?}", SigningKey::from_seed([1; 32]));
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn readable_credential_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.cred");
        std::fs::write(
            &path,
            r#"{"nats_user":"u","nats_password":"p","database_user":"d","database_password":"q"}"#,
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            Credentials::from_file(&path),
            Err(DistError::Security(_))
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Credentials::from_file(&path).unwrap().nats_user, "u");
    }
}

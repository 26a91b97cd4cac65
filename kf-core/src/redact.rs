//! Known secret values kept out of text that leaves the process: compiler logs and other
//! diagnostics reach reports, run directories, recorded LLM exchanges, the next prompt to a
//! hosted model and a cluster's database, so every such text passes through [`redact`] first.
//!
//! A process knows its secrets: the values of its secret-looking environment variables
//! ([`is_secret_name`]: API keys, tokens, passwords, the servers' URLs, proxies) and the
//! passwords inside any URL in its environment are registered at the first call; the crates
//! that read more (kf-dist its credential and key files and the database URL of its
//! configuration, kf-prompt its API key) [`register_secret`] them as they read them.
//!
//! ```
//! use kf_core::redact::{redact, register_secret, redact_url};
//!
//! register_secret("hunter2-correct-horse");
//! assert_eq!(redact("log: token hunter2-correct-horse rejected"), "log: token [redacted] rejected");
//! assert_eq!(redact_url("postgres://kf:pw-12345@db/kf"), "postgres://kf:[redacted]@db/kf");
//! ```

use std::borrow::Cow;
use std::sync::{Once, RwLock};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are not registered: a four-letter password would redact every occurrence of
/// a common word, and values that short protect nothing worth leaking a log for.
pub const MIN_SECRET_LEN: usize = 6;

/// Name fragments of environment variables that hold secrets.
const SECRET_MARKERS: [&str; 7] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// Variables that hold credentials without saying so in their names: server URLs with a
/// `user:password@` part.
const SECRET_NAMES: [&str; 3] = ["KF_DATABASE_URL", "KF_NATS_URL", "DATABASE_URL"];

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());
static FROM_ENV: Once = Once::new();

/// Whether an environment variable's name says it holds a secret: a name holding `KEY`,
/// `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL` or `AUTH`, any `KF_LLM_*`, the
/// servers' URLs (`KF_DATABASE_URL`, `KF_NATS_URL`, `DATABASE_URL`) and proxy settings
/// (`*_PROXY`, whose URLs carry credentials too).
///
/// ```
/// use kf_core::redact::is_secret_name;
/// assert!(is_secret_name("KF_LLM_API_KEY") && is_secret_name("KF_DATABASE_URL"));
/// assert!(is_secret_name("https_proxy") && !is_secret_name("PATH"));
/// ```
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
        || upper.starts_with("KF_LLM_")
        || SECRET_NAMES.contains(&upper.as_str())
        || upper.ends_with("_PROXY")
}

/// Registers `value` as a secret of this process (values shorter than [`MIN_SECRET_LEN`]
/// are ignored). Multi-line values (a credentials file) are registered whole and line by line.
pub fn register_secret(value: impl AsRef<str>) {
    let value = value.as_ref();
    let mut candidates: Vec<&str> = vec![value.trim()];
    if value.contains('\n') {
        candidates.extend(value.lines().map(str::trim));
    }
    let Ok(mut secrets) = SECRETS.write() else {
        return;
    };
    for c in candidates {
        if c.chars().count() >= MIN_SECRET_LEN && !secrets.iter().any(|s| s == c) {
            secrets.push(c.to_owned());
        }
    }
    // Longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Registers the values of this process's secret-looking variables and the passwords of URLs
/// in any variable. Done once, at the first [`redact`]; call it again after changing the
/// environment.
pub fn register_secrets_from_env() {
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        if is_secret_name(name) {
            register_secret(value);
        }
        for word in value.split([',', ' ', ';']) {
            if let Some(pw) = url_password(word) {
                register_secret(pw);
            }
        }
    }
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    FROM_ENV.call_once(register_secrets_from_env);
    let Ok(secrets) = SECRETS.read() else {
        return Cow::Owned(REDACTED.to_owned());
    };
    let mut out = Cow::Borrowed(text);
    for s in secrets.iter() {
        if out.contains(s.as_str()) {
            out = Cow::Owned(out.replace(s.as_str(), REDACTED));
        }
    }
    out
}

/// The password of a `scheme://user:password@host…` URL.
///
/// ```
/// use kf_core::redact::url_password;
/// assert_eq!(url_password("nats://a:b-secret@h:4222"), Some("b-secret"));
/// assert_eq!(url_password("http://127.0.0.1:8080/v1"), None);
/// ```
pub fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

/// `url` with its password (if any) replaced by [`REDACTED`], for printing.
pub fn redact_url(url: &str) -> String {
    match url_password(url) {
        Some(pw) => {
            let at = url.find("://").map_or(0, |i| i + 3);
            let (head, tail) = url.split_at(at);
            format!("{head}{}", tail.replacen(pw, REDACTED, 1))
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_and_their_lines_are_replaced_and_short_ones_ignored() {
        register_secret("line-one-secret\nline-two-secret\n");
        register_secret("abc");
        let text = "a line-two-secret b abc";
        assert_eq!(redact(text), format!("a {REDACTED} b abc"));
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn url_passwords_are_found_in_every_form() {
        assert_eq!(url_password("postgres://u:p%40ss-x@h/db"), Some("p%40ss-x"));
        assert_eq!(url_password("postgres://u@h/db"), None);
        assert_eq!(url_password("not a url"), None);
        assert_eq!(
            redact_url("https://user:pw-123456@example.org/v1"),
            format!("https://user:{REDACTED}@example.org/v1")
        );
        assert_eq!(redact_url("http://h/x"), "http://h/x");
    }
}

//! The environment of an untrusted process, built from an allowlist: what the runtimes,
//! Python and the program need, nothing else. A secret's name is not always recognisable
//! (`REDIS_URL` with a password, `SENTRY_DSN`, `GITHUB_PAT`), so names are let in, not
//! filtered out; secret-looking names among those let in are still dropped
//! ([`kf_core::redact::is_secret_name`]).

use std::ffi::OsString;

/// Variables let in by name.
const NAMES: [&str; 27] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "TMPDIR",
    "PWD",
    "XDG_CACHE_HOME",
    "LD_LIBRARY_PATH",
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
    "RUST_LOG",
    "RUST_MIN_STACK",
    "NO_COLOR",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VIRTUAL_ENV",
    "LLVM_PROFILE_FILE",
    "CARGO_MANIFEST_DIR",
];

/// Variables let in by prefix: the locale, this program's own settings, and the OpenCL,
/// CUDA, SYCL (DPC++, Unified Runtime, Level Zero) and TBB runtimes' settings.
const PREFIXES: [&str; 14] = [
    "LC_", "KF_", "OCL_", "CL_", "CUDA_", "NVIDIA_", "SYCL_", "ONEAPI_", "ZE_", "UR_", "PI_",
    "TBB_", "DPCPP_", "INTEL_",
];

/// Compiler search paths: a kernel build would read headers from them.
const COMPILER_SEARCH_PATHS: [&str; 5] = [
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "OBJCPLUS_INCLUDE_PATH",
];

/// Whether the variable `name` may reach an untrusted process.
///
/// ```
/// use kf_eval::confine::env_allowed;
/// assert!(env_allowed("PATH") && env_allowed("OCL_ICD_VENDORS") && env_allowed("KF_PYTHON"));
/// assert!(!env_allowed("REDIS_URL") && !env_allowed("SENTRY_DSN") && !env_allowed("GITHUB_PAT"));
/// assert!(!env_allowed("KF_LLM_API_KEY") && !env_allowed("CPATH"));
/// ```
pub fn env_allowed(name: &str) -> bool {
    let listed = NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p));
    listed && !kf_core::redact::is_secret_name(name) && !COMPILER_SEARCH_PATHS.contains(&name)
}

/// This process's variables that may reach an untrusted process ([`env_allowed`]).
pub fn untrusted_env() -> impl Iterator<Item = (OsString, OsString)> {
    std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(env_allowed))
}

//! [`TaskBundle`]: a task file as it travels with a distributed search's jobs, and how a
//! worker turns it back into a folder it evaluates against.
//!
//! A bundle holds the task file's spec and the text of every file the task needs: the files it
//! names (the Python reference script or the trusted reference kernel, the baseline and seed kernels,
//! each kernel manifest with its source) and, for a Python reference, every `*.py` file in the
//! script's folder and below it (the modules it may import: the driver puts that folder on
//! Python's path). Each file carries its BLAKE3 hash and the bundle a hash of the spec and of
//! every (path, file hash) pair.
//!
//! The bundle travels inside the job's profile ([`super::TaskProfile::task_file`]), which the
//! database holds by hash and every signed job names by hash: the search's signature covers the
//! bundle's content exactly as it covers a kernel's. A worker checks the bundle
//! ([`TaskBundle::verify`]) before it evaluates anything with it, and refuses a job whose
//! files do not hash to what was signed ([`TaskBundleError::Mismatch`], recorded as a refusal
//! naming the file). It then writes the files into a private folder named by the bundle hash
//! ([`TaskBundle::materialise`]), where later jobs and runs of the same task find them (the
//! folder is checked again, byte for byte, every time an evaluator is made for it).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use kf_eval::task::file::TaskSpec;
use kf_eval::TaskFileJob;
use serde::{Deserialize, Serialize};

/// Most bytes of file text one bundle carries (the profile that holds it lives in the
/// database and in every worker's memory).
pub const MAX_BUNDLE_BYTES: usize = 8 << 20;

/// Most files one bundle carries.
pub const MAX_BUNDLE_FILES: usize = 256;

/// How deep below the reference script's folder Python modules are collected.
const MAX_DEPTH: usize = 6;

/// Why a task file cannot be shipped, or why a shipped one is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskBundleError {
    /// A file of the task could not be read (on the search's machine) or written (on the
    /// worker's).
    #[error("task `{task}`: {path}: {source}")]
    Io {
        /// The task's name.
        task: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file the task names lies outside its folder, or has a name a worker cannot write.
    #[error("task `{task}`: `{path}` {problem}")]
    BadPath {
        /// The task's name.
        task: String,
        /// The path as named.
        path: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The task's files are too large (or too many) to travel with its jobs.
    #[error(
        "task `{task}`: its files are too large to ship with distributed jobs ({files} files, \
         {bytes} bytes; at most {MAX_BUNDLE_FILES} files and {MAX_BUNDLE_BYTES} bytes)"
    )]
    TooLarge {
        /// The task's name.
        task: String,
        /// Files collected.
        files: usize,
        /// Their bytes.
        bytes: usize,
    },
    /// A kernel manifest the task names does not parse.
    #[error("task `{task}`: {source}")]
    Manifest {
        /// The task's name.
        task: String,
        /// The manifest's error.
        #[source]
        source: Box<kf_manifest::ManifestError>,
    },
    /// The spec could not be written or read as JSON.
    #[error("task `{task}`: the spec as JSON: {source}")]
    Json {
        /// The task's name.
        task: String,
        /// The codec's error.
        #[source]
        source: serde_json::Error,
    },
    /// A shipped file, or the bundle as a whole, does not hash to what the search signed:
    /// nothing is evaluated with it.
    #[error(
        "task `{task}`: {what} does not match its signed hash (signed {signed}, received \
         {received})"
    )]
    Mismatch {
        /// The task's name.
        task: String,
        /// Which part: `file `x_ref.py`` or `the bundle`.
        what: String,
        /// The hash the signed profile names.
        signed: String,
        /// The hash of what arrived.
        received: String,
    },
}

/// One shipped file: its text and the BLAKE3 hash of the text (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundledFile {
    /// BLAKE3 of the text, hex.
    pub hash: String,
    /// The text.
    pub text: String,
}

/// A task file and every file it needs, content-hashed, as it travels with distributed jobs.
///
/// ```
/// use kf_search::distributed::TaskBundle;
///
/// let dir = std::env::temp_dir().join(format!("kf-bundle-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("ref.py"), "def reference(i, s, c):\n    return {'y': i['x']}\n").unwrap();
/// std::fs::write(dir.join("t.toml"), r#"
/// name = "copy"
/// args = ["N", "x", "y"]
/// [sizes]
/// N = 64
/// [[buffer]]
/// name = "x"
/// dtype = "f32"
/// shape = ["N"]
/// role = "input"
/// [[buffer]]
/// name = "y"
/// dtype = "f32"
/// shape = ["N"]
/// role = "output"
/// [reference]
/// python = "ref.py"
/// "#).unwrap();
/// let task = kf_eval::task::file::TaskFile::load(&dir.join("t.toml")).unwrap();
/// let bundle = TaskBundle::from_job(&kf_eval::TaskFileJob::from_task_file(&task).unwrap()).unwrap();
/// assert!(bundle.files.contains_key("ref.py"));
/// bundle.verify().unwrap();
/// let mut altered = bundle.clone();
/// altered.files.get_mut("ref.py").unwrap().text.push_str("# altered\n");
/// assert!(altered.verify().is_err());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskBundle {
    /// The task file's name in errors (as on the search's machine).
    pub file: String,
    /// The spec as JSON text (text, so that its key order survives the database).
    pub spec: String,
    /// The files by path relative to the task file's folder (`/`-separated).
    pub files: BTreeMap<String, BundledFile>,
    /// Hash of the file name, the spec and every (path, file hash) pair.
    pub hash: String,
}

fn hash_text(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

impl TaskBundle {
    /// Collects the files of the task file `job` (read from its folder).
    pub fn from_job(job: &TaskFileJob) -> Result<Self, TaskBundleError> {
        let task = job.spec.name.clone();
        let mut collector = Collector {
            task: task.clone(),
            base: job.base_dir.clone(),
            files: BTreeMap::new(),
            bytes: 0,
        };
        let reference = &job.spec.reference;
        if let Some(script) = &reference.python {
            let key = collector.add(script)?;
            // The modules the script may import: the `*.py` files beside it and below.
            let folder = match key.rsplit_once('/') {
                Some((dir, _)) => dir.to_owned(),
                None => String::new(),
            };
            collector.add_python_tree(&folder, 0)?;
        }
        if let Some(kernel) = &reference.kernel {
            collector.add_kernel(kernel)?;
        }
        if let Some(baseline) = &job.spec.baseline {
            for kernel in baseline.kernel.to_vec() {
                collector.add_kernel(&kernel)?;
            }
        }
        // The kernels generated beside the baseline: the task file names them, so a worker's
        // copy cannot load without them.
        for kernel in &job.spec.seeds {
            collector.add_kernel(kernel)?;
        }
        let spec = serde_json::to_string(&job.spec).map_err(|source| TaskBundleError::Json {
            task: task.clone(),
            source,
        })?;
        let mut bundle = TaskBundle {
            file: job.file.clone(),
            spec,
            files: collector.files,
            hash: String::new(),
        };
        bundle.hash = bundle.computed_hash();
        Ok(bundle)
    }

    /// The task's name, from the spec (for errors; `?` when the spec does not parse).
    fn task_name(&self) -> String {
        serde_json::from_str::<TaskSpec>(&self.spec)
            .map(|s| s.name)
            .unwrap_or_else(|_| "?".into())
    }

    /// The hash of the file name, the spec and the files' paths and declared hashes.
    fn computed_hash(&self) -> String {
        let mut h = blake3::Hasher::new();
        let mut part = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(b"kf-task-bundle-v1");
        part(self.file.as_bytes());
        part(self.spec.as_bytes());
        for (path, file) in &self.files {
            part(path.as_bytes());
            part(file.hash.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// Checks every file against its hash, the bundle against its hash, and every path (plain
    /// relative names only): what a worker does before it uses a bundle.
    pub fn verify(&self) -> Result<(), TaskBundleError> {
        let task = self.task_name();
        for (path, file) in &self.files {
            check_relative(&task, path)?;
            let received = hash_text(&file.text);
            if received != file.hash {
                return Err(TaskBundleError::Mismatch {
                    task,
                    what: format!("file `{path}`"),
                    signed: file.hash.clone(),
                    received,
                });
            }
        }
        let received = self.computed_hash();
        if received != self.hash {
            return Err(TaskBundleError::Mismatch {
                task,
                what: "the bundle (its spec or its list of files)".into(),
                signed: self.hash.clone(),
                received,
            });
        }
        Ok(())
    }

    /// Verifies the bundle and writes its files into `root/<bundle hash>/` (a folder only this
    /// user may open), unless a folder of that name already holds exactly these files; returns
    /// the task file as evaluators take it. A folder that differs from the bundle (altered,
    /// or left half-written) is replaced.
    pub fn materialise(&self, root: &Path) -> Result<TaskFileJob, TaskBundleError> {
        self.verify()?;
        let task = self.task_name();
        let io = |path: &Path, source: std::io::Error| TaskBundleError::Io {
            task: task.clone(),
            path: path.to_path_buf(),
            source,
        };
        create_private_dir(root).map_err(|e| io(root, e))?;
        let dir = root.join(&self.hash);
        if !self.matches_folder(&dir) {
            if dir.exists() {
                tracing::warn!(folder = %dir.display(), "a shipped task's folder differs from its signed files; writing it again");
                std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
            }
            self.write_folder(root, &dir).map_err(|(p, e)| io(&p, e))?;
            if !self.matches_folder(&dir) {
                return Err(TaskBundleError::Io {
                    task,
                    path: dir,
                    source: std::io::Error::other(
                        "the folder does not hold the bundle's files after writing them",
                    ),
                });
            }
        }
        let spec: TaskSpec =
            serde_json::from_str(&self.spec).map_err(|source| TaskBundleError::Json {
                task: task.clone(),
                source,
            })?;
        Ok(TaskFileJob {
            spec,
            file: self.file.clone(),
            base_dir: dir,
        })
    }

    /// Writes the files into a fresh temporary folder beside `dir`, then renames it into
    /// place (another worker on this machine may be doing the same: the first rename wins).
    fn write_folder(&self, root: &Path, dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = root.join(format!(".{}.{}.{n}.tmp", self.hash, std::process::id()));
        let write = || -> Result<(), (PathBuf, std::io::Error)> {
            create_private_dir(&tmp).map_err(|e| (tmp.clone(), e))?;
            for (path, file) in &self.files {
                let target = tmp.join(path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| (parent.to_path_buf(), e))?;
                }
                std::fs::write(&target, &file.text).map_err(|e| (target.clone(), e))?;
            }
            Ok(())
        };
        let written = write().and_then(|()| match std::fs::rename(&tmp, dir) {
            Ok(()) => Ok(()),
            // Another process renamed its copy first.
            Err(_) if dir.is_dir() => Ok(()),
            Err(e) => Err((dir.to_path_buf(), e)),
        });
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        written
    }

    /// Whether `dir` holds exactly the bundle's files (Python's `__pycache__` folders aside),
    /// each with the signed content.
    fn matches_folder(&self, dir: &Path) -> bool {
        let mut found = Vec::new();
        if list_files(dir, dir, 0, &mut found).is_err() {
            return false;
        }
        found.len() == self.files.len()
            && found.iter().all(|rel| {
                self.files.get(rel).is_some_and(|file| {
                    std::fs::read_to_string(dir.join(rel)).is_ok_and(|t| hash_text(&t) == file.hash)
                })
            })
    }
}

/// Every regular file below `dir` (relative, `/`-separated), `__pycache__` folders left out;
/// anything else (a link, a device) is an error.
fn list_files(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) -> std::io::Result<()> {
    if depth > MAX_DEPTH + 2 {
        return Err(std::io::Error::other("too deep"));
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            if entry.file_name() != "__pycache__" {
                list_files(root, &path, depth + 1, out)?;
            }
        } else if kind.is_file() {
            let rel = path.strip_prefix(root).map_err(std::io::Error::other)?;
            out.push(slash_path(rel).ok_or_else(|| std::io::Error::other("not UTF-8"))?);
        } else {
            return Err(std::io::Error::other("not a regular file"));
        }
    }
    Ok(())
}

/// A relative path as `/`-separated text.
fn slash_path(path: &Path) -> Option<String> {
    let parts: Option<Vec<&str>> = path.components().map(|c| c.as_os_str().to_str()).collect();
    parts.map(|p| p.join("/"))
}

/// Refuses a path that is not a plain relative name (no `..`, no root, no hidden part).
fn check_relative(task: &str, path: &str) -> Result<(), TaskBundleError> {
    let bad = |problem| {
        Err(TaskBundleError::BadPath {
            task: task.to_owned(),
            path: path.to_owned(),
            problem,
        })
    };
    if path.is_empty() || path.contains('\\') {
        return bad("is not a plain relative file name");
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(part) if !part.to_string_lossy().starts_with('.') => {}
            Component::Normal(_) => return bad("has a hidden part (a name starting with `.`)"),
            Component::ParentDir => {
                return bad("lies outside the task file's folder (`..`): move it into the folder")
            }
            _ => return bad("is not a plain relative file name"),
        }
    }
    Ok(())
}

/// Creates `dir` (and its parents) so that only this user may open it.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Gathers a task's files.
struct Collector {
    task: String,
    base: PathBuf,
    files: BTreeMap<String, BundledFile>,
    bytes: usize,
}

impl Collector {
    /// Adds the file `rel` (relative to the task's folder); returns its normalised path.
    fn add(&mut self, rel: &str) -> Result<String, TaskBundleError> {
        let key = normalise(rel).ok_or_else(|| TaskBundleError::BadPath {
            task: self.task.clone(),
            path: rel.to_owned(),
            problem: "lies outside the task file's folder (`..`) or is not a relative file name",
        })?;
        check_relative(&self.task, &key)?;
        if self.files.contains_key(&key) {
            return Ok(key);
        }
        let path = self.base.join(&key);
        let text = std::fs::read_to_string(&path).map_err(|source| TaskBundleError::Io {
            task: self.task.clone(),
            path: path.clone(),
            source,
        })?;
        self.bytes += text.len();
        if self.files.len() + 1 > MAX_BUNDLE_FILES || self.bytes > MAX_BUNDLE_BYTES {
            return Err(TaskBundleError::TooLarge {
                task: self.task.clone(),
                files: self.files.len() + 1,
                bytes: self.bytes,
            });
        }
        self.files.insert(
            key.clone(),
            BundledFile {
                hash: hash_text(&text),
                text,
            },
        );
        Ok(key)
    }

    /// Adds a kernel manifest and the source file it names.
    fn add_kernel(&mut self, manifest: &str) -> Result<(), TaskBundleError> {
        let key = self.add(manifest)?;
        let text = self.files[&key].text.clone();
        let parsed = kf_manifest::Manifest::parse(&text, &key, None).map_err(|source| {
            TaskBundleError::Manifest {
                task: self.task.clone(),
                source: Box::new(source),
            }
        })?;
        if let Some(source) = &parsed.source {
            let folder = Path::new(&key).parent().unwrap_or_else(|| Path::new(""));
            let rel = folder.join(source);
            let rel = slash_path(&rel).ok_or_else(|| TaskBundleError::BadPath {
                task: self.task.clone(),
                path: rel.display().to_string(),
                problem: "is not UTF-8",
            })?;
            self.add(&rel)?;
        }
        Ok(())
    }

    /// Adds every `*.py` file in `folder` (relative) and below it, hidden entries, links and
    /// `__pycache__` left out.
    fn add_python_tree(&mut self, folder: &str, depth: usize) -> Result<(), TaskBundleError> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        let dir = self.base.join(folder);
        let io = |source| TaskBundleError::Io {
            task: self.task.clone(),
            path: dir.clone(),
            source,
        };
        let mut entries: Vec<(String, std::fs::FileType)> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with('.') || name == "__pycache__" {
                continue;
            }
            entries.push((name, entry.file_type().map_err(io)?));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            let rel = if folder.is_empty() {
                name.clone()
            } else {
                format!("{folder}/{name}")
            };
            if kind.is_dir() {
                self.add_python_tree(&rel, depth + 1)?;
            } else if kind.is_file() && name.ends_with(".py") {
                self.add(&rel)?;
            }
        }
        Ok(())
    }
}

/// `rel` with `.` parts dropped and `a/../` folded, `/`-separated; `None` when it is absolute
/// or climbs out of its folder.
fn normalise(rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("vendor")).unwrap();
        std::fs::create_dir_all(p.join(".hidden")).unwrap();
        std::fs::write(
            p.join("ref.py"),
            "import helper\ndef reference(i, s, c):\n    return helper.f(i)\n",
        )
        .unwrap();
        std::fs::write(p.join("helper.py"), "def f(i):\n    return {'y': i['x']}\n").unwrap();
        std::fs::write(p.join("vendor/problem.py"), "# vendored\n").unwrap();
        std::fs::write(p.join(".hidden/secret.py"), "KEY = 1\n").unwrap();
        std::fs::write(p.join("notes.txt"), "not shipped\n").unwrap();
        std::fs::write(
            p.join("naive.toml"),
            "source = \"k/naive.cl\"\nentry = \"naive\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"N\"]\n",
        )
        .unwrap();
        std::fs::create_dir_all(p.join("k")).unwrap();
        std::fs::write(
            p.join("k/naive.cl"),
            "__kernel void naive(int N, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < N) y[i] = x[i]; }\n",
        )
        .unwrap();
        std::fs::write(
            p.join("t.toml"),
            r#"
name = "copy"
args = ["N", "x", "y"]
[sizes]
N = 64
[[buffer]]
name = "x"
dtype = "f32"
shape = ["N"]
role = "input"
[[buffer]]
name = "y"
dtype = "f32"
shape = ["N"]
role = "output"
[reference]
python = "ref.py"
[baseline]
kernel = "naive.toml"
"#,
        )
        .unwrap();
        dir
    }

    fn bundle(dir: &Path) -> TaskBundle {
        let task = kf_eval::task::file::TaskFile::load(&dir.join("t.toml")).unwrap();
        TaskBundle::from_job(&TaskFileJob::from_task_file(&task).unwrap()).unwrap()
    }

    #[test]
    fn a_bundle_holds_the_named_files_and_the_reference_s_modules_only() {
        let dir = task_dir();
        let b = bundle(dir.path());
        let names: Vec<&str> = b.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "helper.py",
                "k/naive.cl",
                "naive.toml",
                "ref.py",
                "vendor/problem.py"
            ]
        );
        b.verify().unwrap();
        // The same files give the same hash.
        assert_eq!(bundle(dir.path()).hash, b.hash);
    }

    /// The kernels a task file names as seeds travel too: a worker's copy of the task names
    /// them and could not load without them.
    #[test]
    fn a_bundle_carries_the_seed_kernels() {
        let dir = task_dir();
        let p = dir.path();
        std::fs::write(
            p.join("fast.toml"),
            "source = \"k/fast.cl\"\nentry = \"naive\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"N\"]\n",
        )
        .unwrap();
        std::fs::copy(p.join("k/naive.cl"), p.join("k/fast.cl")).unwrap();
        let text = std::fs::read_to_string(p.join("t.toml")).unwrap().replacen(
            "[sizes]",
            "seeds = [\"fast.toml\"]\n[sizes]",
            1,
        );
        std::fs::write(p.join("t.toml"), text).unwrap();
        let b = bundle(p);
        assert!(
            b.files.contains_key("fast.toml") && b.files.contains_key("k/fast.cl"),
            "{:?}",
            b.files.keys()
        );
        b.verify().unwrap();
    }

    #[test]
    fn an_altered_file_or_spec_is_a_mismatch_naming_it() {
        let dir = task_dir();
        let b = bundle(dir.path());
        let mut altered = b.clone();
        altered.files.get_mut("helper.py").unwrap().text = "import os\n".into();
        let e = altered.verify().unwrap_err();
        assert!(
            matches!(&e, TaskBundleError::Mismatch { what, .. } if what == "file `helper.py`"),
            "{e}"
        );
        let mut respec = b.clone();
        respec.spec = respec.spec.replace("\"copy\"", "\"kopy\"");
        assert!(matches!(
            respec.verify(),
            Err(TaskBundleError::Mismatch { .. })
        ));
        let mut escaping = b;
        let file = escaping.files.remove("helper.py").unwrap();
        escaping.files.insert("../helper.py".into(), file);
        escaping.hash = escaping.computed_hash();
        assert!(matches!(
            escaping.verify(),
            Err(TaskBundleError::BadPath { .. })
        ));
    }

    #[test]
    fn materialising_writes_a_content_addressed_folder_and_repairs_it() {
        let dir = task_dir();
        let b = bundle(dir.path());
        let root = tempfile::tempdir().unwrap();
        let job = b.materialise(root.path()).unwrap();
        assert_eq!(job.base_dir, root.path().join(&b.hash));
        assert_eq!(
            std::fs::read_to_string(job.base_dir.join("vendor/problem.py")).unwrap(),
            "# vendored\n"
        );
        // The task builds from the folder.
        let task = job
            .build(
                &job.spec.sizes.clone().into_iter().collect(),
                &kf_eval::task::builtin_references(),
            )
            .unwrap();
        drop(task);
        // Altered or added files are replaced by the signed ones.
        std::fs::write(job.base_dir.join("ref.py"), "altered").unwrap();
        std::fs::write(job.base_dir.join("numpy.py"), "planted").unwrap();
        let again = b.materialise(root.path()).unwrap();
        assert_eq!(again.base_dir, job.base_dir);
        assert!(!again.base_dir.join("numpy.py").exists());
        assert!(std::fs::read_to_string(again.base_dir.join("ref.py"))
            .unwrap()
            .starts_with("import helper"));
        // Nothing but the folder is left behind.
        let entries: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn files_outside_the_folder_are_refused() {
        assert_eq!(normalise("a/./b/../c.py").as_deref(), Some("a/c.py"));
        assert_eq!(normalise("../c.py"), None);
        assert_eq!(normalise("/etc/passwd"), None);
        assert!(check_relative("t", ".env").is_err());
        assert!(check_relative("t", "vendor/x.py").is_ok());
    }
}

//! Loading and validating task files: every error names the file and the field, and nothing
//! is accepted that would make the evaluator panic or allocate absurd amounts later.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kf_manifest::{Expr, ExprSite, Symbols};

use super::error::TaskFileError;
use super::init::Init;
use super::schema::{BufferRole, Dtype, TaskSpec};
use crate::tasks::spec::Sizes;

/// Largest number of elements of one buffer.
pub const MAX_ELEMENTS: usize = 1 << 28;
/// Largest bytes of one buffer (1 GiB).
pub const MAX_BUFFER_BYTES: usize = 1 << 30;

/// Where the files a task file names (reference, baseline) are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskBase {
    /// A folder on disk (the task file's own).
    Dir(PathBuf),
    /// Files compiled into a binary, by relative path (the built-in tasks).
    Embedded(&'static [(&'static str, &'static str)]),
}

impl TaskBase {
    /// The folder, for on-disk bases.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            TaskBase::Dir(d) => Some(d),
            TaskBase::Embedded(_) => None,
        }
    }
}

/// A validated task file: the spec, where it came from, and its parsed expressions.
#[derive(Debug, Clone)]
pub struct TaskFile {
    /// The spec as written.
    pub spec: TaskSpec,
    /// The file name used in errors.
    pub file: String,
    /// Where relative file names are resolved.
    pub base: TaskBase,
    pub(crate) shapes: Vec<Vec<Expr>>,
    pub(crate) inits: Vec<Vec<Init>>,
    /// Per buffer, its `accumulates` expression.
    pub(crate) accumulates: Vec<Option<Expr>>,
    pub(crate) flops: Option<Expr>,
    pub(crate) bytes: Option<Expr>,
    pub(crate) alternatives: Vec<Vec<(String, Expr)>>,
    /// Hash of the task file and every file it names, for reference caches.
    pub(crate) content_hash: String,
}

/// What an argument name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A size (passed as `int`).
    Size,
    /// The scalar with this index.
    Scalar(usize),
    /// The buffer with this index.
    Buffer(usize),
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl TaskFile {
    /// Reads and validates a task file; relative names in it are resolved against its folder.
    pub fn load(path: &Path) -> Result<TaskFile, TaskFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TaskFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        Self::parse(
            &text,
            &path.display().to_string(),
            TaskBase::Dir(base.into()),
        )
    }

    /// Parses and validates TOML text named `file`, resolving names against `base`.
    pub fn parse(text: &str, file: &str, base: TaskBase) -> Result<TaskFile, TaskFileError> {
        let spec = TaskSpec::from_toml(text).map_err(|e| TaskFileError::Toml {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        Self::from_spec(spec, file, base)
    }

    /// Validates a spec built in code (or parsed), named `file` in errors.
    pub fn from_spec(
        spec: TaskSpec,
        file: impl Into<String>,
        base: TaskBase,
    ) -> Result<TaskFile, TaskFileError> {
        let file = file.into();
        let bad = |field: &str, message: String| TaskFileError::invalid(&file, field, message);
        if !is_identifier(&spec.name.replace('-', "_")) {
            return Err(bad(
                "name",
                format!(
                    "`{}` must be a non-empty name of letters, digits, `_`, `-`",
                    spec.name
                ),
            ));
        }
        // Names: sizes, scalars and buffers share one namespace (they all appear in `args`).
        let mut seen: IndexMap<String, String> = IndexMap::new();
        let mut declare = |name: &str, field: String| -> Result<(), TaskFileError> {
            if !is_identifier(name) {
                return Err(bad(&field, format!("`{name}` is not an identifier")));
            }
            if let Some(other) = seen.get(name) {
                return Err(bad(
                    &field,
                    format!("`{name}` is already declared by {other}"),
                ));
            }
            seen.insert(name.to_owned(), field);
            Ok(())
        };
        for (k, v) in &spec.sizes {
            declare(k, format!("sizes.{k}"))?;
            check_size_value(*v).map_err(|e| bad(&format!("sizes.{k}"), e.to_string()))?;
        }
        for (i, s) in spec.scalars.iter().enumerate() {
            declare(&s.name, format!("scalar[{i}].name"))?;
            if s.dtype == Dtype::F16 {
                return Err(bad(
                    &format!("scalar[{i}].dtype"),
                    "scalars are f32 or i32 (pass half values as f32)".into(),
                ));
            }
            let v = s.value.as_f64();
            let ok = match s.dtype {
                Dtype::I32 => {
                    v.fract() == 0.0 && v >= f64::from(i32::MIN) && v <= f64::from(i32::MAX)
                }
                _ => v.is_finite() && v.abs() <= f64::from(f32::MAX),
            };
            if !ok {
                return Err(bad(
                    &format!("scalar[{i}].value"),
                    format!("{v} is not a valid {}", s.dtype),
                ));
            }
        }
        if spec.buffers.is_empty() {
            return Err(bad("buffer", "a task needs at least one [[buffer]]".into()));
        }
        let mut shapes = Vec::new();
        let mut inits = Vec::new();
        let mut accumulates = Vec::new();
        for (i, b) in spec.buffers.iter().enumerate() {
            declare(&b.name, format!("buffer[{i}].name"))?;
            if b.shape.is_empty() {
                return Err(bad(
                    &format!("buffer[{i}].shape"),
                    "needs at least one dimension".into(),
                ));
            }
            let mut dims = Vec::new();
            for (d, e) in b.shape.iter().enumerate() {
                let site = ExprSite {
                    file: file.clone(),
                    field: format!("buffer[{i}].shape[{d}] (buffer `{}`)", b.name),
                };
                let expr = Expr::parse(&e.text(), &site)?;
                if let Some(v) = expr.variables().find(|v| !spec.sizes.contains_key(*v)) {
                    return Err(bad(
                        &site.field,
                        format!(
                            "`{}` uses `{v}`, which is not a size (sizes: {})",
                            expr.text(),
                            names(spec.sizes.keys())
                        ),
                    ));
                }
                dims.push(expr);
            }
            shapes.push(dims);
            accumulates.push(match &b.accumulates {
                None => None,
                Some(text) => {
                    let field = format!("buffer[{i}].accumulates (buffer `{}`)", b.name);
                    if b.role == BufferRole::Input || b.dtype == Dtype::I32 {
                        return Err(bad(
                            &field,
                            "only float outputs accumulate (the rule widens their tolerance)"
                                .into(),
                        ));
                    }
                    if spec.reference.python.is_none() && spec.reference.rust.is_none() {
                        return Err(bad(
                            &field,
                            "needs a Python or Rust reference (run on the inputs' absolute \
                             values for the terms' magnitudes)"
                                .into(),
                        ));
                    }
                    let site = ExprSite {
                        file: file.clone(),
                        field: field.clone(),
                    };
                    let expr = Expr::parse(&text.text(), &site)?;
                    if let Some(v) = expr.variables().find(|v| !spec.sizes.contains_key(*v)) {
                        return Err(bad(
                            &field,
                            format!("`{}` uses `{v}`, which is not a size", expr.text()),
                        ));
                    }
                    Some(expr)
                }
            });
            let texts = b.init.as_ref().map(|i| i.to_vec()).unwrap_or_default();
            if texts.is_empty() && b.init.is_some() {
                return Err(bad(&format!("buffer[{i}].init"), "is an empty list".into()));
            }
            let parsed = texts
                .iter()
                .map(|t| Init::parse(t, b.dtype))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(&format!("buffer[{i}].init"), e.to_string()))?;
            inits.push(if parsed.is_empty() {
                vec![Init::default_for(b.dtype)]
            } else {
                parsed
            });
        }
        if !spec
            .buffers
            .iter()
            .any(|b| matches!(b.role, BufferRole::Output | BufferRole::Inout))
        {
            return Err(bad(
                "buffer",
                "no buffer has role `output` or `inout`: there would be nothing to check".into(),
            ));
        }
        // Arguments: every name known, no repeats, every buffer passed.
        let mut passed = vec![false; spec.buffers.len()];
        for (i, a) in spec.args.iter().enumerate() {
            if spec.args[..i].contains(a) {
                return Err(bad(&format!("args[{i}]"), format!("`{a}` is listed twice")));
            }
            match seen.get(a.as_str()) {
                Some(_) => {
                    if let Some(b) = spec.buffers.iter().position(|b| &b.name == a) {
                        passed[b] = true;
                    }
                }
                None => {
                    return Err(bad(
                        &format!("args[{i}]"),
                        format!(
                            "`{a}` is neither a buffer, a scalar nor a size (declared: {})",
                            names(seen.keys())
                        ),
                    ))
                }
            }
        }
        if let Some(b) = passed.iter().position(|p| !p) {
            return Err(bad(
                "args",
                format!(
                    "buffer `{}` is not passed to the kernel: add it to args",
                    spec.buffers[b].name
                ),
            ));
        }
        // Tolerance.
        if let Some(t) = &spec.tolerance {
            for (field, v) in [
                ("atol", t.atol),
                ("rtol", t.rtol),
                ("relative_threshold", t.relative_threshold),
                ("min_fraction_within", t.min_fraction_within),
                ("min_cosine", t.min_cosine),
            ] {
                if let Some(v) = v {
                    if !v.is_finite() || v < 0.0 {
                        return Err(bad(
                            &format!("tolerance.{field}"),
                            format!("{v} must be a finite number >= 0"),
                        ));
                    }
                }
            }
        }
        // Work.
        let work_expr = |field: &str, e: Option<&super::schema::ExprText>| {
            e.map(|e| {
                let site = ExprSite {
                    file: file.clone(),
                    field: format!("work.{field}"),
                };
                let expr = Expr::parse(&e.text(), &site)?;
                if let Some(v) = expr.variables().find(|v| !spec.sizes.contains_key(*v)) {
                    return Err(bad(
                        &site.field,
                        format!("`{}` uses `{v}`, which is not a size", expr.text()),
                    ));
                }
                Ok(expr)
            })
            .transpose()
        };
        let flops = work_expr("flops", spec.work.as_ref().and_then(|w| w.flops.as_ref()))?;
        let bytes = work_expr("bytes", spec.work.as_ref().and_then(|w| w.bytes.as_ref()))?;
        // Alternative sizes: expressions over the sizes.
        let mut alternatives = Vec::new();
        for (i, alt) in spec.alternative_sizes.iter().enumerate() {
            let mut table = Vec::new();
            for (k, v) in alt {
                let field = format!("alternative_sizes[{i}].{k}");
                if !spec.sizes.contains_key(k) {
                    return Err(bad(&field, format!("`{k}` is not a size")));
                }
                let site = ExprSite {
                    file: file.clone(),
                    field: field.clone(),
                };
                let expr = Expr::parse(&v.text(), &site)?;
                if let Some(v) = expr.variables().find(|v| !spec.sizes.contains_key(*v)) {
                    return Err(bad(
                        &field,
                        format!("`{}` uses `{v}`, which is not a size", expr.text()),
                    ));
                }
                table.push((k.clone(), expr));
            }
            alternatives.push(table);
        }
        if let Some(family) = &spec.family {
            family.validate(&spec, &file)?;
        }
        // Reference and baseline files.
        let r = &spec.reference;
        let given = [&r.python, &r.kernel, &r.rust]
            .iter()
            .filter(|v| v.is_some())
            .count();
        if given != 1 {
            return Err(bad(
                "reference",
                "give exactly one of python = \"ref.py\", kernel = \"trusted.toml\" or rust = \"name\""
                    .into(),
            ));
        }
        if let Some(t) = r.timeout_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(bad("reference.timeout_s", format!("{t} must be positive")));
            }
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(serde_json::to_string(&spec).unwrap_or_default().as_bytes());
        let task = TaskFile {
            spec,
            file,
            base,
            shapes,
            inits,
            accumulates,
            flops,
            bytes,
            alternatives,
            content_hash: String::new(),
        };
        let mut named = Vec::new();
        if let Some(p) = &task.spec.reference.python {
            named.push(("reference.python", p.clone()));
        }
        if let Some(k) = &task.spec.reference.kernel {
            named.push(("reference.kernel", k.clone()));
        }
        if let Some(b) = &task.spec.baseline {
            for k in b.kernel.to_vec() {
                named.push(("baseline.kernel", k));
            }
        }
        for (field, rel) in &named {
            let text = task.read_relative(rel, field)?;
            if field.ends_with("kernel") {
                task.kernel_manifest(rel, field)?;
            }
            hasher.update(rel.as_bytes());
            hasher.update(text.as_bytes());
        }
        // Every shape must be valid at the default sizes and at the alternatives.
        task.buffer_elements(&task.spec.sizes)?;
        for i in 0..task.alternatives.len() {
            let s = task.alternative(i, &task.spec.sizes)?;
            task.buffer_elements(&s)?;
        }
        Ok(TaskFile {
            content_hash: hasher.finalize().to_hex().to_string(),
            ..task
        })
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Hash of the task file and every file it names (reference script, kernels).
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// Reads a file named in the task file (`field` names the field in errors).
    pub fn read_relative(&self, rel: &str, field: &str) -> Result<String, TaskFileError> {
        match &self.base {
            TaskBase::Dir(dir) => {
                let path = dir.join(rel);
                std::fs::read_to_string(&path).map_err(|e| {
                    TaskFileError::invalid(
                        &self.file,
                        field,
                        format!("cannot read `{}`: {e}", path.display()),
                    )
                })
            }
            TaskBase::Embedded(files) => files
                .iter()
                .find(|(p, _)| *p == rel)
                .map(|(_, t)| (*t).to_owned())
                .ok_or_else(|| {
                    TaskFileError::invalid(&self.file, field, format!("no built-in file `{rel}`"))
                }),
        }
    }

    /// A kernel manifest named in the task file, with its source.
    pub fn kernel_manifest(
        &self,
        rel: &str,
        field: &str,
    ) -> Result<kf_core::KernelSource, TaskFileError> {
        let text = self.read_relative(rel, field)?;
        let wrap = |e: kf_manifest::ManifestError| {
            TaskFileError::invalid(&self.file, field, format!("`{rel}`: {e}"))
        };
        let manifest = kf_manifest::Manifest::parse(&text, rel, None).map_err(wrap)?;
        let Some(src) = &manifest.source else {
            return Err(TaskFileError::invalid(
                &self.file,
                field,
                format!("`{rel}` names no `source` file"),
            ));
        };
        let src_rel = Path::new(rel)
            .parent()
            .unwrap_or_else(|| Path::new(""))
            .join(src);
        let source = self.read_relative(&src_rel.to_string_lossy(), field)?;
        Ok(manifest.kernel_source(source))
    }

    /// Sizes completed with the defaults, checked (names known, values positive `int`s).
    pub fn complete_sizes(&self, overrides: &Sizes) -> Result<Sizes, TaskFileError> {
        let mut sizes = self.spec.sizes.clone();
        for (k, v) in overrides {
            if !sizes.contains_key(k) {
                return Err(TaskFileError::invalid(
                    &self.file,
                    "sizes",
                    format!(
                        "task `{}` has no size `{k}` (it has {})",
                        self.spec.name,
                        names(self.spec.sizes.keys())
                    ),
                ));
            }
            check_size_value(*v).map_err(|e| {
                TaskFileError::invalid(&self.file, format!("sizes.{k}"), e.to_string())
            })?;
            sizes.insert(k.clone(), *v);
        }
        Ok(sizes)
    }

    /// Each buffer's shape at `sizes`, checked: every dimension positive, every buffer within
    /// [`MAX_ELEMENTS`] and [`MAX_BUFFER_BYTES`].
    pub fn buffer_shapes(&self, sizes: &Sizes) -> Result<Vec<Vec<usize>>, TaskFileError> {
        let symbols = Symbols::new().with_sizes(sizes);
        let mut out = Vec::new();
        for (i, (b, dims)) in self.spec.buffers.iter().zip(&self.shapes).enumerate() {
            let mut shape = Vec::new();
            for (d, e) in dims.iter().enumerate() {
                let site = ExprSite {
                    file: self.file.clone(),
                    field: format!("buffer[{i}].shape[{d}] (buffer `{}`)", b.name),
                };
                let v = e.eval_i64(&symbols, &site)?;
                if v <= 0 {
                    return Err(TaskFileError::invalid(
                        &self.file,
                        &site.field,
                        format!(
                            "`{}` = {v} at {}: a buffer needs a positive number of elements",
                            e.text(),
                            crate::tasks::spec::sizes_text(sizes)
                        ),
                    ));
                }
                shape.push(usize::try_from(v).unwrap_or(usize::MAX));
            }
            let elements = shape
                .iter()
                .try_fold(1usize, |a, d| a.checked_mul(*d))
                .filter(|n| *n <= MAX_ELEMENTS && n * b.dtype.size() <= MAX_BUFFER_BYTES);
            if elements.is_none() {
                return Err(TaskFileError::invalid(
                    &self.file,
                    format!("buffer[{i}].shape (buffer `{}`)", b.name),
                    format!(
                        "{shape:?} at {} is larger than the limit of 2^28 elements / 1 GiB",
                        crate::tasks::spec::sizes_text(sizes)
                    ),
                ));
            }
            out.push(shape);
        }
        Ok(out)
    }

    /// Each buffer's element count at `sizes`.
    pub fn buffer_elements(&self, sizes: &Sizes) -> Result<Vec<usize>, TaskFileError> {
        Ok(self
            .buffer_shapes(sizes)?
            .iter()
            .map(|s| s.iter().product())
            .collect())
    }

    /// Work figures at `sizes` (zero where the file gives none).
    pub fn work(&self, sizes: &Sizes) -> Result<kf_core::Work, TaskFileError> {
        let symbols = Symbols::new().with_sizes(sizes);
        let eval = |e: &Option<Expr>, field: &str| -> Result<f64, TaskFileError> {
            let Some(e) = e else { return Ok(0.0) };
            let site = ExprSite {
                file: self.file.clone(),
                field: format!("work.{field}"),
            };
            Ok(e.eval_i64(&symbols, &site)? as f64)
        };
        Ok(kf_core::Work {
            flops: eval(&self.flops, "flops")?,
            bytes: eval(&self.bytes, "bytes")?,
        })
    }

    /// The `i`-th `[[alternative_sizes]]` table evaluated at `sizes`, checked.
    pub fn alternative(&self, i: usize, sizes: &Sizes) -> Result<Sizes, TaskFileError> {
        let symbols = Symbols::new().with_sizes(sizes);
        let mut out = sizes.clone();
        for (k, e) in self.alternatives.get(i).map(Vec::as_slice).unwrap_or(&[]) {
            let field = format!("alternative_sizes[{i}].{k}");
            let site = ExprSite {
                file: self.file.clone(),
                field: field.clone(),
            };
            let v = e.eval_i64(&symbols, &site)?;
            check_size_value(v).map_err(|m| {
                TaskFileError::invalid(
                    &self.file,
                    &field,
                    format!(
                        "`{}` at {}: {m}",
                        e.text(),
                        crate::tasks::spec::sizes_text(sizes)
                    ),
                )
            })?;
            out.insert(k.clone(), v);
        }
        Ok(out)
    }

    /// Number of `[[alternative_sizes]]` tables.
    pub fn alternative_count(&self) -> usize {
        self.alternatives.len()
    }

    /// What a name in `args` refers to.
    pub fn arg_kind(&self, name: &str) -> Option<ArgKind> {
        if self.spec.sizes.contains_key(name) {
            Some(ArgKind::Size)
        } else if let Some(i) = self.spec.scalars.iter().position(|s| s.name == name) {
            Some(ArgKind::Scalar(i))
        } else {
            self.spec
                .buffers
                .iter()
                .position(|b| b.name == name)
                .map(ArgKind::Buffer)
        }
    }

    /// Per buffer, the number of terms each element accumulates at `sizes` (its
    /// `accumulates` field; `None` where absent).
    pub fn accumulation_lengths(&self, sizes: &Sizes) -> Result<Vec<Option<u64>>, TaskFileError> {
        let symbols = Symbols::new().with_sizes(sizes);
        self.accumulates
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let Some(e) = e else { return Ok(None) };
                let site = ExprSite {
                    file: self.file.clone(),
                    field: format!("buffer[{i}].accumulates"),
                };
                Ok(Some(
                    u64::try_from(e.eval_i64(&symbols, &site)?.max(1)).unwrap_or(1),
                ))
            })
            .collect()
    }

    /// The input distributions of buffer `i`.
    pub fn inits(&self, i: usize) -> &[Init] {
        self.inits.get(i).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// A size that is not a positive 32-bit integer.
#[derive(Debug, thiserror::Error)]
#[error("{0} must be a positive 32-bit integer")]
struct SizeOutOfRange(i64);

fn check_size_value(v: i64) -> Result<(), SizeOutOfRange> {
    if v <= 0 || v > i64::from(i32::MAX) {
        return Err(SizeOutOfRange(v));
    }
    Ok(())
}

fn names<'a>(it: impl Iterator<Item = &'a (impl AsRef<str> + 'a + ?Sized)>) -> String {
    let v: Vec<&str> = it.map(AsRef::as_ref).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

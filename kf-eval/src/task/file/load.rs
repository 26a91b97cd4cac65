//! Loading and validating task files: every error names the file and the field, and nothing
//! is accepted that would make the evaluator panic or allocate absurd amounts later.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kf_manifest::{Expr, ExprSite, Symbols};

use super::error::TaskFileError;
use super::init::{Init, InitRule};
use super::schema::{BufferDecl, BufferRole, Dtype, TaskSpec};
use super::structure::{Structure, StructureError};
use crate::task::spec::Sizes;

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
    pub(crate) inits: Vec<Vec<InitRule>>,
    /// Per buffer, its `structure`.
    pub(crate) structures: Vec<Option<Structure>>,
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
        // Every check runs in the file's order of fields, so that the first error reported is
        // the first one a reader meets.
        let mut check = SpecCheck::new(&spec, &file);
        check.name()?;
        check.sizes()?;
        check.scalars()?;
        let buffers = check.buffers()?;
        check.args()?;
        check.tolerance()?;
        let flops = check.work_expr("flops", spec.work.as_ref().and_then(|w| w.flops.as_ref()))?;
        let bytes = check.work_expr("bytes", spec.work.as_ref().and_then(|w| w.bytes.as_ref()))?;
        let alternatives = check.alternatives()?;
        if let Some(family) = &spec.family {
            family.validate(&spec, &file)?;
        }
        check.reference()?;
        let task = TaskFile {
            spec,
            file,
            base,
            shapes: buffers.shapes,
            inits: buffers.inits,
            structures: buffers.structures,
            accumulates: buffers.accumulates,
            flops,
            bytes,
            alternatives,
            content_hash: String::new(),
        };
        let content_hash = task.hash_with_named_files()?;
        // Every shape must be valid (and suit its buffer's structure: square matrices) at the
        // default sizes and at the alternatives the file writes.
        task.buffer_elements(&task.spec.sizes)?;
        for i in 0..task.alternatives.len() {
            let s = task.alternative(i, &task.spec.sizes)?;
            task.buffer_elements(&s)?;
        }
        Ok(TaskFile {
            content_hash,
            ..task
        })
    }

    /// The files the task file names (reference script or kernel, baseline and seed kernels),
    /// each with the field that names it and whether it is a kernel manifest.
    fn named_files(&self) -> Vec<(String, String, bool)> {
        let mut named = Vec::new();
        if let Some(p) = &self.spec.reference.python {
            named.push(("reference.python".to_owned(), p.clone(), false));
        }
        if let Some(k) = &self.spec.reference.kernel {
            named.push(("reference.kernel".to_owned(), k.clone(), true));
        }
        if let Some(b) = &self.spec.baseline {
            for k in b.kernel.to_vec() {
                named.push(("baseline.kernel".to_owned(), k, true));
            }
        }
        for (i, k) in self.spec.seeds.iter().enumerate() {
            named.push((format!("seeds[{i}]"), k.clone(), true));
        }
        named
    }

    /// Hash of the spec and of every file it names, for reference caches; reading them
    /// checks that each exists, and that each kernel's manifest is valid.
    fn hash_with_named_files(&self) -> Result<String, TaskFileError> {
        let mut hasher = blake3::Hasher::new();
        hasher.update(
            serde_json::to_string(&self.spec)
                .unwrap_or_default()
                .as_bytes(),
        );
        for (field, rel, kernel) in &self.named_files() {
            let text = self.read_relative(rel, field)?;
            if *kernel {
                self.kernel_manifest(rel, field)?;
            }
            hasher.update(rel.as_bytes());
            hasher.update(text.as_bytes());
        }
        Ok(hasher.finalize().to_hex().to_string())
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
    /// [`MAX_ELEMENTS`] and [`MAX_BUFFER_BYTES`], every buffer with a matrix `structure` a
    /// batch of square matrices (a [`TaskFileError::Structure`] otherwise: such sizes are
    /// another problem, and the evaluator leaves out alternative sizes that give one; softmax
    /// rows suit any shape).
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
                            crate::task::spec::sizes_text(sizes)
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
                        crate::task::spec::sizes_text(sizes)
                    ),
                ));
            }
            self.check_structure(i, &b.name, &shape, sizes)?;
            out.push(shape);
        }
        self.check_inits(sizes)?;
        Ok(out)
    }

    /// Buffer `i`'s (named `name`) structure, if any, holds for its `shape` at `sizes`
    /// ([`Structure::check_shape`]): for a matrix structure the last two dimensions are
    /// equal.
    fn check_structure(
        &self,
        i: usize,
        name: &str,
        shape: &[usize],
        sizes: &Sizes,
    ) -> Result<(), TaskFileError> {
        let Some(structure) = self.structure(i) else {
            return Ok(());
        };
        structure
            .check_shape(shape, &crate::task::spec::sizes_text(sizes))
            .map(|_| ())
            .map_err(|source| structure_error(&self.file, i, name, source))
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
                        crate::task::spec::sizes_text(sizes)
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

    /// The input distributions of buffer `i`, as the file gives them (see [`Self::init_at`]).
    pub fn inits(&self, i: usize) -> &[InitRule] {
        self.inits.get(i).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Buffer `i`'s distribution for input set `variant` (the list in turn) at `sizes`:
    /// `int(lo, hi)` bounds that are expressions evaluated there. `None` for a buffer
    /// without distributions (an output).
    pub fn init_at(
        &self,
        i: usize,
        variant: usize,
        sizes: &Sizes,
    ) -> Result<Option<Init>, TaskFileError> {
        let rules = self.inits(i);
        let Some(rule) = rules.get(variant % rules.len().max(1)) else {
            return Ok(None);
        };
        let (lo, hi) = match rule {
            InitRule::Fixed(init) => return Ok(Some(*init)),
            InitRule::IntAtSizes { lo, hi } => (lo, hi),
        };
        let symbols = Symbols::new().with_sizes(sizes);
        let name = self.spec.buffers.get(i).map_or("", |b| b.name.as_str());
        let site = ExprSite {
            file: self.file.clone(),
            field: format!("buffer[{i}].init (buffer `{name}`)"),
        };
        let (lo_v, hi_v) = (lo.eval_i64(&symbols, &site)?, hi.eval_i64(&symbols, &site)?);
        if lo_v > hi_v || lo_v.abs() > i64::from(i32::MAX) || hi_v.abs() > i64::from(i32::MAX) {
            return Err(TaskFileError::invalid(
                &self.file,
                &site.field,
                format!(
                    "int({}, {}) is int({lo_v}, {hi_v}) at {}: the bounds must be i32 values, \
                     the lower not above the upper",
                    lo.text(),
                    hi.text(),
                    crate::task::spec::sizes_text(sizes)
                ),
            ));
        }
        Ok(Some(Init::Int { lo: lo_v, hi: hi_v }))
    }

    /// Every buffer's distributions can be drawn at `sizes` (expression bounds in order).
    fn check_inits(&self, sizes: &Sizes) -> Result<(), TaskFileError> {
        for (i, rules) in self.inits.iter().enumerate() {
            for variant in 0..rules.len() {
                self.init_at(i, variant, sizes)?;
            }
        }
        Ok(())
    }

    /// The structure of buffer `i`'s drawn values (its `structure`), if any.
    pub fn structure(&self, i: usize) -> Option<Structure> {
        self.structures.get(i).copied().flatten()
    }
}

/// The [`TaskFileError::Structure`] of buffer `i`, named `name`, in `file`.
fn structure_error(file: &str, i: usize, name: &str, source: StructureError) -> TaskFileError {
    TaskFileError::Structure {
        file: file.to_owned(),
        field: format!("buffer[{i}].structure (buffer `{name}`)"),
        source,
    }
}

/// The parsed per-buffer parts of a spec, in its buffers' order.
struct BufferParts {
    shapes: Vec<Vec<Expr>>,
    inits: Vec<Vec<InitRule>>,
    structures: Vec<Option<Structure>>,
    accumulates: Vec<Option<Expr>>,
}

/// The validation of one spec: every error names the file and the field.
struct SpecCheck<'a> {
    spec: &'a TaskSpec,
    file: &'a str,
    /// Sizes, scalars and buffers share one namespace (they all appear in `args`): every name
    /// declared so far, with the field that declared it.
    seen: IndexMap<String, String>,
}

impl<'a> SpecCheck<'a> {
    fn new(spec: &'a TaskSpec, file: &'a str) -> Self {
        SpecCheck {
            spec,
            file,
            seen: IndexMap::new(),
        }
    }

    /// The error of `field`.
    fn bad(&self, field: &str, message: String) -> TaskFileError {
        TaskFileError::invalid(self.file, field, message)
    }

    /// Declares `name` in the shared namespace: it must be an identifier used by no other
    /// size, scalar or buffer.
    fn declare(&mut self, name: &str, field: String) -> Result<(), TaskFileError> {
        if !is_identifier(name) {
            return Err(self.bad(&field, format!("`{name}` is not an identifier")));
        }
        if let Some(other) = self.seen.get(name) {
            return Err(self.bad(&field, format!("`{name}` is already declared by {other}")));
        }
        self.seen.insert(name.to_owned(), field);
        Ok(())
    }

    /// Parses `text` (at `field`) as an expression over the task's sizes only; `list_sizes`
    /// adds the declared sizes to the error (for shapes, where a typo is the likely cause).
    fn size_expr(
        &self,
        text: &str,
        field: String,
        list_sizes: bool,
    ) -> Result<Expr, TaskFileError> {
        let site = ExprSite {
            file: self.file.to_owned(),
            field,
        };
        let expr = Expr::parse(text, &site)?;
        if let Some(v) = expr.variables().find(|v| !self.spec.sizes.contains_key(*v)) {
            let mut message = format!("`{}` uses `{v}`, which is not a size", expr.text());
            if list_sizes {
                message.push_str(&format!(" (sizes: {})", names(self.spec.sizes.keys())));
            }
            return Err(self.bad(&site.field, message));
        }
        Ok(expr)
    }

    /// The task's name: letters, digits, `_` and `-`.
    fn name(&self) -> Result<(), TaskFileError> {
        if !is_identifier(&self.spec.name.replace('-', "_")) {
            return Err(self.bad(
                "name",
                format!(
                    "`{}` must be a non-empty name of letters, digits, `_`, `-`",
                    self.spec.name
                ),
            ));
        }
        Ok(())
    }

    /// Every size declared once, each a positive 32-bit integer.
    fn sizes(&mut self) -> Result<(), TaskFileError> {
        for (k, v) in &self.spec.sizes {
            self.declare(k, format!("sizes.{k}"))?;
            check_size_value(*v).map_err(|e| self.bad(&format!("sizes.{k}"), e.to_string()))?;
        }
        Ok(())
    }

    /// Every scalar declared once, `f32` or `i32`, with a value its type holds.
    fn scalars(&mut self) -> Result<(), TaskFileError> {
        for (i, s) in self.spec.scalars.iter().enumerate() {
            self.declare(&s.name, format!("scalar[{i}].name"))?;
            if s.dtype == Dtype::F16 {
                return Err(self.bad(
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
                return Err(self.bad(
                    &format!("scalar[{i}].value"),
                    format!("{v} is not a valid {}", s.dtype),
                ));
            }
        }
        Ok(())
    }

    /// Every buffer declared once, with its shape, accumulation rule and inputs parsed; at
    /// least one buffer, and at least one that is checked.
    fn buffers(&mut self) -> Result<BufferParts, TaskFileError> {
        if self.spec.buffers.is_empty() {
            return Err(self.bad("buffer", "a task needs at least one [[buffer]]".into()));
        }
        let mut parts = BufferParts {
            shapes: Vec::new(),
            inits: Vec::new(),
            structures: Vec::new(),
            accumulates: Vec::new(),
        };
        for (i, b) in self.spec.buffers.iter().enumerate() {
            self.declare(&b.name, format!("buffer[{i}].name"))?;
            parts.shapes.push(self.shape(i, b)?);
            parts.accumulates.push(self.accumulates(i, b)?);
            parts.inits.push(self.inits(i, b)?);
            parts.structures.push(self.structure(i, b)?);
        }
        if !self
            .spec
            .buffers
            .iter()
            .any(|b| matches!(b.role, BufferRole::Output | BufferRole::Inout))
        {
            return Err(self.bad(
                "buffer",
                "no buffer has role `output` or `inout`: there would be nothing to check".into(),
            ));
        }
        Ok(parts)
    }

    /// Buffer `i`'s shape: at least one dimension, each an expression over the sizes.
    fn shape(&self, i: usize, b: &BufferDecl) -> Result<Vec<Expr>, TaskFileError> {
        if b.shape.is_empty() {
            return Err(self.bad(
                &format!("buffer[{i}].shape"),
                "needs at least one dimension".into(),
            ));
        }
        b.shape
            .iter()
            .enumerate()
            .map(|(d, e)| {
                let field = format!("buffer[{i}].shape[{d}] (buffer `{}`)", b.name);
                self.size_expr(&e.text(), field, true)
            })
            .collect()
    }

    /// Buffer `i`'s `accumulates` rule: only on float outputs, only with a reference that
    /// can be run on the inputs' absolute values, an expression over the sizes.
    fn accumulates(&self, i: usize, b: &BufferDecl) -> Result<Option<Expr>, TaskFileError> {
        let Some(text) = &b.accumulates else {
            return Ok(None);
        };
        let field = format!("buffer[{i}].accumulates (buffer `{}`)", b.name);
        if b.role == BufferRole::Input || b.dtype == Dtype::I32 {
            return Err(self.bad(
                &field,
                "only float outputs accumulate (the rule widens their tolerance)".into(),
            ));
        }
        if self.spec.reference.python.is_none() && self.spec.reference.rust.is_none() {
            return Err(self.bad(
                &field,
                "needs a Python or Rust reference (run on the inputs' absolute \
                 values for the terms' magnitudes)"
                    .into(),
            ));
        }
        self.size_expr(&text.text(), field, false).map(Some)
    }

    /// Buffer `i`'s input distributions (the dtype's default when none is given);
    /// `int(lo, hi)` bounds may be expressions over the sizes.
    fn inits(&self, i: usize, b: &BufferDecl) -> Result<Vec<InitRule>, TaskFileError> {
        let texts = b.init.as_ref().map(|i| i.to_vec()).unwrap_or_default();
        if texts.is_empty() && b.init.is_some() {
            return Err(self.bad(&format!("buffer[{i}].init"), "is an empty list".into()));
        }
        let field = format!("buffer[{i}].init");
        let parsed = texts
            .iter()
            .map(|t| match InitRule::int_bound_texts(t) {
                Some((lo, hi)) => Ok(InitRule::IntAtSizes {
                    lo: self.size_expr(lo, field.clone(), true)?,
                    hi: self.size_expr(hi, field.clone(), true)?,
                }),
                None => Init::parse(t, b.dtype)
                    .map(InitRule::Fixed)
                    .map_err(|e| self.bad(&field, e.to_string())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if parsed.is_empty() {
            vec![InitRule::Fixed(Init::default_for(b.dtype))]
        } else {
            parsed
        })
    }

    /// Buffer `i`'s `structure`: a known name, on a drawn buffer (input or inout) of at least
    /// [`Structure::min_rank`] dimensions: two for a matrix structure (whether the last two are
    /// equal depends on the sizes: checked with the shapes), one for softmax.
    fn structure(&self, i: usize, b: &BufferDecl) -> Result<Option<Structure>, TaskFileError> {
        let Some(text) = &b.structure else {
            return Ok(None);
        };
        let error = |source| structure_error(self.file, i, &b.name, source);
        let structure = Structure::parse(text).map_err(error)?;
        if b.role == BufferRole::Output {
            return Err(error(StructureError::OnOutput { structure }));
        }
        structure.check_rank(b.shape.len()).map_err(error)?;
        Ok(Some(structure))
    }

    /// Arguments: every name known, no repeats, every buffer passed.
    fn args(&self) -> Result<(), TaskFileError> {
        let spec = self.spec;
        let mut passed = vec![false; spec.buffers.len()];
        for (i, a) in spec.args.iter().enumerate() {
            if spec.args[..i].contains(a) {
                return Err(self.bad(&format!("args[{i}]"), format!("`{a}` is listed twice")));
            }
            if !self.seen.contains_key(a.as_str()) {
                return Err(self.bad(
                    &format!("args[{i}]"),
                    format!(
                        "`{a}` is neither a buffer, a scalar nor a size (declared: {})",
                        names(self.seen.keys())
                    ),
                ));
            }
            if let Some(b) = spec.buffers.iter().position(|b| &b.name == a) {
                passed[b] = true;
            }
        }
        if let Some(b) = passed.iter().position(|p| !p) {
            return Err(self.bad(
                "args",
                format!(
                    "buffer `{}` is not passed to the kernel: add it to args",
                    spec.buffers[b].name
                ),
            ));
        }
        Ok(())
    }

    /// Every tolerance given is a finite number >= 0.
    fn tolerance(&self) -> Result<(), TaskFileError> {
        let Some(t) = &self.spec.tolerance else {
            return Ok(());
        };
        for (field, v) in [
            ("atol", t.atol),
            ("rtol", t.rtol),
            ("relative_threshold", t.relative_threshold),
            ("min_fraction_within", t.min_fraction_within),
            ("min_cosine", t.min_cosine),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return Err(self.bad(
                        &format!("tolerance.{field}"),
                        format!("{v} must be a finite number >= 0"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `work.{field}` expression, over the sizes.
    fn work_expr(
        &self,
        field: &str,
        e: Option<&super::schema::ExprText>,
    ) -> Result<Option<Expr>, TaskFileError> {
        e.map(|e| self.size_expr(&e.text(), format!("work.{field}"), false))
            .transpose()
    }

    /// Alternative sizes: each names declared sizes, as expressions over the sizes.
    fn alternatives(&self) -> Result<Vec<Vec<(String, Expr)>>, TaskFileError> {
        let mut alternatives = Vec::new();
        for (i, alt) in self.spec.alternative_sizes.iter().enumerate() {
            let mut table = Vec::new();
            for (k, v) in alt {
                let field = format!("alternative_sizes[{i}].{k}");
                if !self.spec.sizes.contains_key(k) {
                    return Err(self.bad(&field, format!("`{k}` is not a size")));
                }
                table.push((k.clone(), self.size_expr(&v.text(), field, false)?));
            }
            alternatives.push(table);
        }
        Ok(alternatives)
    }

    /// Exactly one kind of reference, and a positive timeout where one is given.
    fn reference(&self) -> Result<(), TaskFileError> {
        let r = &self.spec.reference;
        let given = [&r.python, &r.kernel, &r.rust]
            .iter()
            .filter(|v| v.is_some())
            .count();
        if given != 1 {
            return Err(self.bad(
                "reference",
                "give exactly one of python = \"ref.py\", kernel = \"trusted.toml\" or rust = \"name\""
                    .into(),
            ));
        }
        if let Some(t) = r.timeout_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(self.bad("reference.timeout_s", format!("{t} must be positive")));
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A task with buffer `A` of `shape` and `role` carrying `structure`, and an output.
    fn text(shape: &str, role: &str, structure: &str) -> String {
        format!(
            r#"
name = "structured"
args = ["M", "N", "A", "C"]
[sizes]
M = 8
N = 8
[[buffer]]
name = "A"
dtype = "f32"
shape = {shape}
role = "{role}"
{structure}
[[buffer]]
name = "C"
dtype = "f32"
shape = ["M", "N"]
role = "output"
[reference]
rust = "r"
"#
        )
    }

    fn parse(text: &str) -> Result<TaskFile, TaskFileError> {
        TaskFile::parse(text, "structured.toml", TaskBase::Embedded(&[]))
    }

    /// The structure error of a task file that must have one, with its field.
    fn structure_error(text: &str) -> (String, StructureError) {
        match parse(text) {
            Err(TaskFileError::Structure { field, source, .. }) => (field, source),
            other => panic!("expected a structure error, got {other:?}"),
        }
    }

    #[test]
    fn a_structure_is_parsed_at_load_and_round_trips() {
        let task = parse(&text(r#"["M", "N"]"#, "input", r#"structure = "lower""#)).unwrap();
        assert_eq!(task.structure(0), Some(Structure::Lower));
        assert_eq!(task.structure(1), None);
        assert_eq!(task.structure(2), None);
        let toml = task.spec.to_toml().unwrap();
        assert!(toml.contains(r#"structure = "lower""#), "{toml}");
        assert_eq!(TaskSpec::from_toml(&toml).unwrap(), task.spec);
        // An in-out buffer is drawn too.
        let task = parse(&text(r#"["M", "N"]"#, "inout", r#"structure = "upper""#)).unwrap();
        assert_eq!(task.structure(0), Some(Structure::Upper));
        // None is not written.
        let task = parse(&text(r#"["M", "N"]"#, "input", "")).unwrap();
        assert_eq!(task.structure(0), None);
        assert!(!task.spec.to_toml().unwrap().contains("structure ="));
    }

    #[test]
    fn an_unknown_structure_says_what_is_accepted() {
        let (field, err) =
            structure_error(&text(r#"["M", "N"]"#, "input", r#"structure = "banded""#));
        assert_eq!(field, "buffer[0].structure (buffer `A`)");
        assert_eq!(
            err,
            StructureError::Unknown {
                text: "banded".into()
            }
        );
        assert!(
            err.to_string()
                .contains("symmetric, lower, upper or softmax"),
            "{err}"
        );
    }

    #[test]
    fn a_structure_on_an_output_is_refused() {
        let (_, err) = structure_error(&text(
            r#"["M", "N"]"#,
            "output",
            r#"structure = "symmetric""#,
        ));
        assert_eq!(
            err,
            StructureError::OnOutput {
                structure: Structure::Symmetric
            }
        );
    }

    #[test]
    fn a_structure_on_fewer_than_two_dimensions_is_refused() {
        let (_, err) = structure_error(&text(r#"["M"]"#, "input", r#"structure = "lower""#));
        assert_eq!(
            err,
            StructureError::RankBelowTwo {
                structure: Structure::Lower,
                rank: 1
            }
        );
    }

    #[test]
    fn softmax_rows_load_on_any_shape_but_not_on_an_output() {
        // Not square is fine: rows along the last dimension.
        let rect =
            text(r#"["M", "N"]"#, "input", r#"structure = "softmax""#).replace("N = 8", "N = 6");
        let rect = rect.replace("M = 8", "M = 4");
        let task = parse(&rect).unwrap();
        assert_eq!(task.structure(0), Some(Structure::Softmax));
        assert_eq!(task.buffer_shapes(&task.spec.sizes).unwrap()[0], [4, 6]);
        let toml = task.spec.to_toml().unwrap();
        assert!(toml.contains(r#"structure = "softmax""#), "{toml}");
        assert_eq!(TaskSpec::from_toml(&toml).unwrap(), task.spec);
        // Any sizes suit it, as does a vector: one row.
        let sizes: Sizes = [("M".to_owned(), 3), ("N".to_owned(), 17)]
            .into_iter()
            .collect();
        assert_eq!(task.buffer_shapes(&sizes).unwrap()[0], [3, 17]);
        let task = parse(&text(r#"["N"]"#, "inout", r#"structure = "softmax""#)).unwrap();
        assert_eq!(task.structure(0), Some(Structure::Softmax));
        let (_, err) =
            structure_error(&text(r#"["M", "N"]"#, "output", r#"structure = "softmax""#));
        assert_eq!(
            err,
            StructureError::OnOutput {
                structure: Structure::Softmax
            }
        );
    }

    #[test]
    fn a_structure_on_a_matrix_that_is_not_square_at_the_sizes_is_refused() {
        let rect =
            text(r#"["M", "N"]"#, "input", r#"structure = "symmetric""#).replace("N = 8", "N = 6");
        let (field, err) = structure_error(&rect);
        assert_eq!(field, "buffer[0].structure (buffer `A`)");
        assert_eq!(
            err,
            StructureError::NotSquare {
                structure: Structure::Symmetric,
                shape: vec![8, 6],
                sizes: "M=8,N=6".into()
            }
        );
        // A batch whose matrices are square passes, whatever the batch dimension.
        let batch = text(r#"["N", "M", "N"]"#, "input", r#"structure = "symmetric""#);
        let task = parse(&batch).unwrap();
        assert_eq!(task.buffer_shapes(&task.spec.sizes).unwrap()[0], [8, 8, 8]);
        // Sizes written in the file are checked like the default sizes, other sizes where
        // they are used.
        let alternative = format!(
            "{}[[alternative_sizes]]\nM = 4\n",
            text(r#"["M", "N"]"#, "input", r#"structure = "upper""#)
        );
        let (_, err) = structure_error(&alternative);
        assert!(
            matches!(err, StructureError::NotSquare { ref shape, .. } if shape == &[4, 8]),
            "{err}"
        );
        let task = parse(&text(r#"["M", "N"]"#, "input", r#"structure = "upper""#)).unwrap();
        let sizes: Sizes = [("M".to_owned(), 4), ("N".to_owned(), 8)]
            .into_iter()
            .collect();
        assert!(matches!(
            task.buffer_shapes(&sizes),
            Err(TaskFileError::Structure { .. })
        ));
    }
}

//! The kernel manifest: a TOML file beside a kernel's source.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use kf_core::{DeviceFacts, KernelSource, Language, NdRange, ParamValue, ParamValues};
use serde::Deserialize;

use crate::error::ManifestError;
use crate::expr::{Expr, ExprSite, Symbols};
use crate::flags::{flags_for, FlagRule};
use crate::raw::RawLaunch;
use crate::sequence::{
    is_identifier, parse_kernels, parse_scratch, RawKernel, RawScratch, ScratchBuffer,
    SequenceKernel,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    source: Option<String>,
    entry: String,
    language: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    params: IndexMap<String, Vec<ParamValue>>,
    #[serde(default)]
    constraints: RawConstraints,
    #[serde(default)]
    launch: Option<RawLaunch>,
    #[serde(default)]
    flags: Vec<RawFlagRule>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    kernels: Vec<RawKernel>,
    #[serde(default)]
    scratch: Vec<RawScratch>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlagRule {
    #[serde(default)]
    when: Option<String>,
    add: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstraints {
    #[serde(default)]
    rules: Vec<String>,
}

/// A parsed kernel manifest.
///
/// ```toml
/// source = "gemm_tiled.cl"
/// entry = "gemm"
/// language = "opencl"
/// [params]
/// TS  = [8, 16, 32]
/// WPT = [1, 2, 4]
/// [constraints]
/// rules = ["TS % WPT == 0", "TS * TS / WPT <= max_work_group_size"]
/// [launch]
/// global = ["M", "N / WPT"]
/// local  = ["TS", "TS / WPT"]
/// # Optional: compiler floating-point modes, always or for some parameter values
/// # (see `allowed_flags`).
/// [[flags]]
/// when = "WPT == 4"
/// add = ["-cl-fast-relaxed-math"]
/// ```
///
/// # Example
///
/// ```
/// use kf_manifest::{Manifest, Symbols};
/// use kf_core::ParamValues;
///
/// let manifest = Manifest::parse(
///     r#"
///     entry = "gemm"
///     language = "opencl"
///     [params]
///     TS = [8, 16]
///     [launch]
///     global = ["M", "N"]
///     local = ["TS", "TS"]
///     "#,
///     "inline.toml",
///     None,
/// )
/// .unwrap();
/// let params = manifest.resolve_params(&ParamValues::new().with("TS", 16i64)).unwrap();
/// let symbols = Symbols::new().with_params(&params).with_sizes([(&"M".to_string(), &64), (&"N".to_string(), &32)]);
/// let range = manifest.launch_range(&symbols).unwrap();
/// assert_eq!(range.global, vec![64, 32]);
/// assert_eq!(range.local, Some(vec![16, 16]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The manifest's file name (or another name for inline text), used in errors.
    pub file: String,
    /// Folder that `source` is relative to.
    pub base_dir: Option<PathBuf>,
    /// Path of the source file, relative to `base_dir`.
    pub source: Option<PathBuf>,
    /// Kernel function name.
    pub entry: String,
    /// Source language.
    pub language: Language,
    /// Free text for humans and models.
    pub description: String,
    /// Tunable parameters and their allowed values, in declaration order.
    pub params: IndexMap<String, Vec<ParamValue>>,
    /// Conditions every configuration must satisfy.
    pub constraints: Vec<Expr>,
    /// Global size per dimension.
    pub global: Vec<Expr>,
    /// Work-group size per dimension (`None`: the runtime chooses).
    pub local: Option<Vec<Expr>>,
    /// Compiler flags asked for, each a floating-point mode of
    /// [`allowed_flags`](crate::allowed_flags); see [`Manifest::compile_flags`].
    pub flags: Vec<FlagRule>,
    /// What the kernel is (`tags = ["matmul"]`): tuning rule priors select by them
    /// (`kf_tune::RulePrior`).
    pub tags: Vec<String>,
    /// The kernels of a candidate of several kernels (`[[kernels]]`), in launch order; empty
    /// for one kernel (`[launch]`). For a sequence, [`Manifest::global`] and
    /// [`Manifest::local`] are those of the kernel named by [`Manifest::entry`]; see
    /// [`crate::sequence`].
    pub sequence: Vec<SequenceKernel>,
    /// The candidate's scratch buffers (`[[scratch]]`; only with a sequence).
    pub scratch: Vec<ScratchBuffer>,
    /// The manifest text as written.
    pub text: Arc<str>,
}

impl Manifest {
    /// Parses manifest text. `file` names it in errors; `base_dir` is where `source` is
    /// resolved from (`None` for manifests that travel with their source, such as a mutator's).
    pub fn parse(text: &str, file: &str, base_dir: Option<&Path>) -> Result<Self, ManifestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| ManifestError::Toml {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        let language: Language = raw
            .language
            .parse()
            .map_err(|e: kf_core::CoreError| invalid_field(file, "language", e.to_string()))?;
        check_names(&raw, file)?;
        let constraints = parse_constraints(&raw.constraints.rules, file)?;
        let scratch = parse_scratch(raw.scratch, file)?;
        let sequence = parse_kernels(raw.kernels, &scratch, file)?;
        let (global, local) = launch_of(raw.launch.as_ref(), &raw.entry, &sequence, file)?;
        if sequence.is_empty() && !scratch.is_empty() {
            return Err(invalid_field(
                file,
                "scratch",
                "needs [[kernels]]: scratch buffers belong to a sequence, which says who writes them"
                    .into(),
            ));
        }
        let flags = raw
            .flags
            .into_iter()
            .enumerate()
            .map(|(i, rule)| FlagRule::parse(rule.when.as_deref(), rule.add, language, i, file))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Manifest {
            file: file.to_owned(),
            base_dir: base_dir.map(Path::to_path_buf),
            source: raw.source.map(PathBuf::from),
            entry: raw.entry,
            language,
            description: raw.description.unwrap_or_default(),
            params: raw.params,
            constraints,
            global,
            local,
            flags,
            tags: raw.tags,
            sequence,
            scratch,
            text: Arc::from(text),
        })
    }

    /// Reads a manifest file and the source file it names, and returns both; the kernel
    /// source carries the manifest text so that it travels with the candidate.
    pub fn load(path: &Path) -> Result<(Manifest, KernelSource), ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let manifest = Manifest::parse(&text, &path.display().to_string(), Some(base))?;
        let Some(rel) = &manifest.source else {
            return Err(ManifestError::Invalid {
                file: manifest.file.clone(),
                field: "source".into(),
                message: "is missing: name the kernel source file, relative to the manifest".into(),
            });
        };
        let source_path = base.join(rel);
        let source_text =
            std::fs::read_to_string(&source_path).map_err(|source| ManifestError::Io {
                path: source_path.clone(),
                source,
            })?;
        let kernel = manifest.kernel_source(source_text);
        Ok((manifest, kernel))
    }

    /// The manifest a kernel source carries.
    pub fn from_kernel(kernel: &KernelSource) -> Result<Manifest, ManifestError> {
        let Some(text) = &kernel.manifest else {
            return Err(ManifestError::Invalid {
                file: format!("<manifest of `{}`>", kernel.entry),
                field: "manifest".into(),
                message: "the kernel carries no manifest".into(),
            });
        };
        let manifest = Manifest::parse(text, &format!("<manifest of `{}`>", kernel.entry), None)?;
        if manifest.language != kernel.language || manifest.entry != kernel.entry {
            return Err(ManifestError::Invalid {
                file: manifest.file.clone(),
                field: "entry".into(),
                message: format!(
                    "says {} `{}`, but the kernel is {} `{}`",
                    manifest.language, manifest.entry, kernel.language, kernel.entry
                ),
            });
        }
        Ok(manifest)
    }

    /// A kernel source with this manifest's language, entry, parameters and text.
    pub fn kernel_source(&self, text: impl Into<Arc<str>>) -> KernelSource {
        let mut k = KernelSource::new(self.language, self.entry.clone(), text)
            .with_manifest(Arc::clone(&self.text));
        k.params = self.params.clone();
        k
    }

    /// The first allowed value of every parameter.
    pub fn default_params(&self) -> ParamValues {
        self.params
            .iter()
            .filter_map(|(k, v)| v.first().map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// Fills in `overrides` with defaults for the missing parameters and checks that every
    /// value is declared and allowed.
    pub fn resolve_params(&self, overrides: &ParamValues) -> Result<ParamValues, ManifestError> {
        for (name, value) in overrides.iter() {
            let Some(allowed) = self.params.get(name) else {
                return Err(ManifestError::Invalid {
                    file: self.file.clone(),
                    field: format!("params.{name}"),
                    message: format!(
                        "is not declared (declared: {})",
                        self.params.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            };
            if !allowed.iter().any(|a| same_value(a, value)) {
                return Err(ManifestError::Invalid {
                    file: self.file.clone(),
                    field: format!("params.{name}"),
                    message: format!(
                        "{value} is not one of the allowed values [{}]",
                        allowed
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        let mut out = ParamValues::new();
        for (name, allowed) in &self.params {
            match overrides.get(name) {
                Some(v) => out.set(name.clone(), v.clone()),
                None => {
                    if let Some(first) = allowed.first() {
                        out.set(name.clone(), first.clone());
                    }
                }
            }
        }
        Ok(out)
    }

    /// The compiler flags `params` (resolved, as from [`Manifest::resolve_params`]) are built
    /// with: those of every `[[flags]]` entry whose condition holds, in order, each once.
    ///
    /// ```
    /// use kf_core::{ParamValue, ParamValues};
    /// use kf_manifest::Manifest;
    ///
    /// let manifest = Manifest::parse(
    ///     "entry = \"k\"\nlanguage = \"opencl\"\n[params]\nFAST = [0, 1]\n\
    ///      [launch]\nglobal = [\"N\"]\n\
    ///      [[flags]]\nwhen = \"FAST == 1\"\nadd = [\"-cl-fast-relaxed-math\"]\n",
    ///     "inline.toml",
    ///     None,
    /// )?;
    /// let fast: ParamValues = [("FAST".to_owned(), ParamValue::Int(1))].into_iter().collect();
    /// assert_eq!(manifest.compile_flags(&fast)?, vec!["-cl-fast-relaxed-math"]);
    /// assert!(manifest.compile_flags(&manifest.default_params())?.is_empty());
    /// # Ok::<(), kf_manifest::ManifestError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// An error when a condition names something other than a parameter or does not evaluate.
    pub fn compile_flags(&self, params: &ParamValues) -> Result<Vec<String>, ManifestError> {
        flags_for(&self.flags, params, &self.file)
    }

    /// Symbols for this manifest's expressions.
    pub fn symbols(
        &self,
        params: &ParamValues,
        sizes: &IndexMap<String, i64>,
        device: &DeviceFacts,
    ) -> Symbols {
        Symbols::new()
            .with_device(device)
            .with_sizes(sizes)
            .with_params(params)
    }

    fn site(&self, field: String) -> ExprSite {
        ExprSite {
            file: self.file.clone(),
            field,
        }
    }

    /// The first constraint that does not hold, if any.
    pub fn violated_constraint(&self, symbols: &Symbols) -> Result<Option<&Expr>, ManifestError> {
        for (i, rule) in self.constraints.iter().enumerate() {
            if !rule.eval_bool(symbols, &self.site(format!("constraints.rules[{i}]")))? {
                return Ok(Some(rule));
            }
        }
        Ok(None)
    }

    /// Checks the constraints for a configuration: an error names the rule that fails.
    pub fn check_constraints(
        &self,
        params: &ParamValues,
        symbols: &Symbols,
    ) -> Result<(), ManifestError> {
        match self.violated_constraint(symbols)? {
            None => Ok(()),
            Some(rule) => Err(ManifestError::ConstraintViolated {
                file: self.file.clone(),
                rule: rule.text().to_owned(),
                params: params.to_string(),
            }),
        }
    }

    /// The launch geometry: every size a positive integer, local dividing global. For a
    /// sequence, that of the kernel named by [`Manifest::entry`] ([`Manifest::launch_ranges`]
    /// gives every kernel's).
    pub fn launch_range(&self, symbols: &Symbols) -> Result<NdRange, ManifestError> {
        self.range_of(&self.global, self.local.as_deref(), "launch", symbols)
    }

    /// Whether the manifest describes a sequence of kernels (`[[kernels]]`).
    pub fn is_sequence(&self) -> bool {
        !self.sequence.is_empty()
    }

    /// Every kernel's entry and launch geometry, in launch order: the one kernel's for a
    /// manifest with `[launch]`.
    ///
    /// ```
    /// use kf_manifest::{Manifest, Symbols};
    ///
    /// let manifest = Manifest::parse(
    ///     r#"
    ///     entry = "partial_sums"
    ///     language = "opencl"
    ///     [[scratch]]
    ///     name = "partial"
    ///     dtype = "f32"
    ///     elements = "N / 256"
    ///     [[kernels]]
    ///     entry = "partial_sums"
    ///     writes = ["partial"]
    ///     launch = { global = ["N / 4"], local = [64] }
    ///     [[kernels]]
    ///     entry = "finish"
    ///     writes = ["total"]
    ///     launch = { global = [64], local = [64] }
    ///     "#,
    ///     "sum.toml",
    ///     None,
    /// )?;
    /// let symbols = Symbols::new().with_sizes([(&"N".to_string(), &65536)]);
    /// let ranges = manifest.launch_ranges(&symbols)?;
    /// assert_eq!(ranges[0].0, "partial_sums");
    /// assert_eq!(ranges[0].1.global, vec![16384]);
    /// assert_eq!(ranges[1].1.global, vec![64]);
    /// assert_eq!(manifest.scratch[0].elements_at(&symbols, &manifest.file)?, 256);
    /// # Ok::<(), kf_manifest::ManifestError>(())
    /// ```
    pub fn launch_ranges(
        &self,
        symbols: &Symbols,
    ) -> Result<Vec<(String, NdRange)>, ManifestError> {
        if self.sequence.is_empty() {
            return Ok(vec![(self.entry.clone(), self.launch_range(symbols)?)]);
        }
        self.sequence
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let field = format!("kernels[{i}].launch");
                let range = self.range_of(&k.global, k.local.as_deref(), &field, symbols)?;
                Ok((k.entry.clone(), range))
            })
            .collect()
    }

    fn range_of(
        &self,
        global: &[Expr],
        local: Option<&[Expr]>,
        field: &str,
        symbols: &Symbols,
    ) -> Result<NdRange, ManifestError> {
        let sizes = |exprs: &[Expr], name: &str| {
            exprs
                .iter()
                .enumerate()
                .map(|(i, e)| e.eval_positive(symbols, &self.site(format!("{field}.{name}[{i}]"))))
                .collect::<Result<Vec<_>, _>>()
        };
        let global = sizes(global, "global")?;
        let local = local.map(|l| sizes(l, "local")).transpose()?;
        let range = NdRange { global, local };
        range.check().map_err(|e| ManifestError::Invalid {
            file: self.file.clone(),
            field: field.to_owned(),
            message: e.to_string(),
        })?;
        Ok(range)
    }
}

/// The error for a manifest field (`field`) that is present but wrong.
fn invalid_field(file: &str, field: &str, message: String) -> ManifestError {
    ManifestError::Invalid {
        file: file.to_owned(),
        field: field.to_owned(),
        message,
    }
}

/// Checks the names a manifest declares: the entry is a function name, and each parameter
/// is an identifier with at least one value.
fn check_names(raw: &RawManifest, file: &str) -> Result<(), ManifestError> {
    if !is_identifier(&raw.entry) {
        return Err(invalid_field(
            file,
            "entry",
            format!("`{}` is not a function name", raw.entry),
        ));
    }
    for (name, values) in &raw.params {
        if !is_identifier(name) {
            return Err(invalid_field(
                file,
                "params",
                format!("`{name}` is not a valid parameter name"),
            ));
        }
        if values.is_empty() {
            return Err(invalid_field(
                file,
                &format!("params.{name}"),
                "lists no values".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Parses the constraint rules, each located as `constraints.rules[i]` in errors.
fn parse_constraints(rules: &[String], file: &str) -> Result<Vec<Expr>, ManifestError> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let site = ExprSite {
                file: file.to_owned(),
                field: format!("constraints.rules[{i}]"),
            };
            Expr::parse(r, &site)
        })
        .collect()
}

/// The launch sizes (global, local) of the manifest's entry: its `[launch]` for one kernel,
/// or the entry's own kernel in a sequence. Exactly one of the two must be given, and a
/// sequence must contain the entry.
fn launch_of(
    launch: Option<&RawLaunch>,
    entry: &str,
    sequence: &[SequenceKernel],
    file: &str,
) -> Result<(Vec<Expr>, Option<Vec<Expr>>), ManifestError> {
    match (launch, sequence.iter().find(|k| k.entry == entry)) {
        (Some(_), _) if !sequence.is_empty() => Err(invalid_field(
            file,
            "launch",
            "is given beside [[kernels]]: a sequence's kernels each have their launch".into(),
        )),
        (Some(launch), _) => launch.parse(file, "launch"),
        (None, Some(main)) => Ok((main.global.clone(), main.local.clone())),
        (None, None) if sequence.is_empty() => Err(invalid_field(
            file,
            "launch",
            "is missing: give [launch] (one kernel) or [[kernels]] (a sequence)".into(),
        )),
        (None, None) => Err(invalid_field(
            file,
            "entry",
            format!(
                "`{}` is not one of the sequence's kernels ({})",
                entry,
                sequence
                    .iter()
                    .map(|k| k.entry.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Equality of parameter values across representations (`16` and `16.0` are the same value).
fn same_value(a: &ParamValue, b: &ParamValue) -> bool {
    match (a, b) {
        (ParamValue::Text(x), ParamValue::Text(y)) => x == y,
        (ParamValue::Text(_), _) | (_, ParamValue::Text(_)) => false,
        _ => a.as_f64() == b.as_f64(),
    }
}

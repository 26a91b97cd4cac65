//! Kernel templates: source text whose structure is switched by preprocessor sections, a
//! manifest, and the names of the structural switches. Instantiating a template for one
//! assignment of the switches (a [`Structure`]) gives a concrete kernel: the sections are
//! resolved, so the text shows only what that variant does, and the manifest keeps only the
//! parameters the text still uses.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use indexmap::IndexMap;
use kf_core::{KernelSource, ParamValue};
use kf_manifest::{Manifest, Symbols};
use serde::Serialize;

use crate::error::MutateError;
use crate::preprocess::{replace_identifiers, resolve_conditionals, uses_identifier, Defines};

/// Values of a template's structural switches, in the template's declaration order, written
/// `VW=16,LOCAL_B=0`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Structure(pub IndexMap<String, i64>);

impl Structure {
    /// No switches set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder-style assignment.
    pub fn with(mut self, name: impl Into<String>, value: i64) -> Self {
        self.0.insert(name.into(), value);
        self
    }

    /// The value of a switch.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.get(name).copied()
    }

    /// Sets a switch.
    pub fn set(&mut self, name: impl Into<String>, value: i64) {
        self.0.insert(name.into(), value);
    }

    /// Iterates in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for Structure {
    type Err = MutateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = Structure::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let parsed = part
                .split_once('=')
                .and_then(|(k, v)| Some((k.trim(), v.trim().parse::<i64>().ok()?)));
            let Some((k, v)) = parsed else {
                return Err(MutateError::Template {
                    template: String::new(),
                    message: format!("`{part}` is not NAME=integer in structure `{s}`"),
                });
            };
            out.set(k, v);
        }
        Ok(out)
    }
}

/// The comment line a variant's manifest starts with, naming its template and structure, so
/// that a mutator handed the variant later knows where it came from.
const MARKER: &str = "# kf-mutate:";

/// A kernel template.
///
/// The template's manifest declares every parameter, structural switches included (so the
/// template itself can be evaluated with `kf eval --param LOCAL_B=1 …`); the switches are the
/// parameters whose values change the kernel's structure and are resolved into the text by
/// [`Template::instantiate`]. Switches take integer values; `#if` sections of the source test
/// them. Source lines starting with `//!` document the template and are left out of variants.
///
/// # Example
///
/// ```
/// use kf_mutate::{Structure, Template};
///
/// let template = Template::new(
///     "scale",
///     "scale",
///     "__kernel void scale(__global float* x) {\n#if LOCAL\n    __local float t[WG];\n    t[get_local_id(0)] = x[get_global_id(0)];\n    barrier(CLK_LOCAL_MEM_FENCE);\n    x[get_global_id(0)] = 2.0f * t[get_local_id(0)];\n#else\n    x[get_global_id(0)] *= 2.0f;\n#endif\n}\n",
///     r#"
///     entry = "scale"
///     language = "opencl"
///     [params]
///     LOCAL = [0, 1]
///     WG = [64, 128]
///     [launch]
///     global = ["N"]
///     local = ["WG"]
///     "#,
///     ["LOCAL"],
/// )
/// .unwrap();
/// let plain = template.instantiate(&Structure::new().with("LOCAL", 0)).unwrap();
/// assert!(!plain.source.text.contains("__local"));
/// let tiled = template.instantiate(&Structure::new().with("LOCAL", 1)).unwrap();
/// assert!(tiled.source.text.contains("barrier("));
/// assert!(tiled.manifest.params.contains_key("WG"));
/// assert!(!tiled.manifest.params.contains_key("LOCAL"));
/// ```
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    task: String,
    text: Arc<str>,
    manifest: Manifest,
    switches: IndexMap<String, Vec<i64>>,
    base: Structure,
    base_params: kf_core::ParamValues,
    starts: Vec<Start>,
}

/// Configurations [`Template::seeds_at`] tries when fitting a seed to the problem sizes.
const SEED_REPAIR_BUDGET: usize = 3000;

/// A starting point a search begins from beside a template's base variant (see
/// [`Template::with_start`]): a structure in a language's own idiom and the parameter values
/// it starts with, where the base variant, shared by every rendering, is far from what that
/// language's runtime does well.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// The switch values (completed with the base structure's).
    pub structure: Structure,
    /// Parameter values that replace the variant manifest's first values.
    pub params: kf_core::ParamValues,
    /// Why this start is there.
    pub why: String,
}

/// A concrete kernel generated from a template.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The template's name.
    pub template: String,
    /// The switch values it was generated for.
    pub structure: Structure,
    /// The kernel: resolved source text with the generated manifest attached.
    pub source: KernelSource,
    /// The generated manifest, parsed.
    pub manifest: Manifest,
}

#[derive(Serialize)]
struct OutManifest<'a> {
    entry: &'a str,
    language: &'a str,
    description: String,
    params: IndexMap<String, Vec<ParamValue>>,
    constraints: OutConstraints,
    launch: OutLaunch,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flags: Vec<OutFlagRule>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    tags: &'a [String],
}

#[derive(Serialize)]
struct OutFlagRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<String>,
    add: Vec<String>,
}

#[derive(Serialize)]
struct OutConstraints {
    rules: Vec<String>,
}

#[derive(Serialize)]
struct OutLaunch {
    global: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    local: Option<Vec<String>>,
}

impl Template {
    /// A template named `name` for the task `task` (its manifest's `source` field, if any, is
    /// ignored: the text is given). Every switch must be a parameter of the manifest with
    /// integer values. The base structure (what a kernel that is not a variant of this template
    /// is rewritten to first) sets every switch to its smallest value; the base parameters are
    /// the manifest's first values.
    pub fn new<S: AsRef<str>>(
        name: impl Into<String>,
        task: impl Into<String>,
        text: impl Into<Arc<str>>,
        manifest: &str,
        switches: impl IntoIterator<Item = S>,
    ) -> Result<Self, MutateError> {
        let name = name.into();
        let manifest = Manifest::parse(manifest, &format!("<template {name}>"), None)?;
        let mut map = IndexMap::new();
        for switch in switches {
            let switch = switch.as_ref();
            let Some(values) = manifest.params.get(switch) else {
                return Err(MutateError::Template {
                    template: name,
                    message: format!("switch `{switch}` is not a parameter of the manifest"),
                });
            };
            let ints: Option<Vec<i64>> = values.iter().map(ParamValue::as_i64).collect();
            let Some(mut ints) = ints else {
                return Err(MutateError::Template {
                    template: name,
                    message: format!("switch `{switch}` has non-integer values"),
                });
            };
            ints.sort_unstable();
            ints.dedup();
            map.insert(switch.to_owned(), ints);
        }
        let base = Structure(
            map.iter()
                .map(|(k, v)| (k.clone(), v.first().copied().unwrap_or(0)))
                .collect(),
        );
        let base_params = manifest
            .default_params()
            .iter()
            .filter(|(k, _)| !map.contains_key(*k))
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect();
        Ok(Template {
            name,
            task: task.into(),
            text: text.into(),
            manifest,
            switches: map,
            base,
            base_params,
            starts: Vec::new(),
        })
    }

    /// Sets the base structure and the base values of the other parameters (unnamed switches
    /// and parameters keep theirs).
    pub fn with_base(
        mut self,
        structure: Structure,
        params: kf_core::ParamValues,
    ) -> Result<Self, MutateError> {
        for (k, v) in structure.iter() {
            self.check_switch(k, v)?;
            self.base.set(k, v);
        }
        for (k, v) in params.iter() {
            if !self.manifest.params.contains_key(k) || self.switches.contains_key(k) {
                return Err(MutateError::Template {
                    template: self.name.clone(),
                    message: format!("base parameter `{k}` is not a tunable parameter"),
                });
            }
            self.base_params.set(k, v.clone());
        }
        Ok(self)
    }

    /// Adds a starting point: `structure` (completed with the base structure) with `params`
    /// in place of its variant manifest's first values. A search seeds it beside the base
    /// variant ([`Template::seeds`]).
    ///
    /// # Errors
    /// An unknown switch or disallowed switch value, a structure that does not instantiate,
    /// or a parameter the variant does not have or a value its manifest does not allow.
    ///
    /// ```
    /// use kf_core::ParamValues;
    /// use kf_mutate::{Structure, Template};
    ///
    /// let scale = Template::new(
    ///     "scale",
    ///     "scale",
    ///     "__kernel void scale(__global float* x) {\n#if LOCAL\n    __local float t[WG];\n    t[get_local_id(0)] = x[get_global_id(0)];\n    barrier(CLK_LOCAL_MEM_FENCE);\n    x[get_global_id(0)] = 2.0f * t[get_local_id(0)];\n#else\n    x[get_global_id(0)] *= 2.0f;\n#endif\n}\n",
    ///     "entry = \"scale\"\nlanguage = \"opencl\"\n[params]\nLOCAL = [0, 1]\nWG = [64, 128]\n[launch]\nglobal = [\"N\"]\nlocal = [\"WG\"]\n",
    ///     ["LOCAL"],
    /// )
    /// .unwrap();
    /// let local = Structure::new().with("LOCAL", 1);
    /// let wide: ParamValues = [("WG", 128i64)].into_iter().collect();
    /// let too_wide: ParamValues = [("WG", 256i64)].into_iter().collect();
    /// assert!(scale.clone().with_start(local.clone(), too_wide, "not allowed").is_err());
    /// let scale = scale.with_start(local, wide.clone(), "local tiles, wide groups").unwrap();
    /// let seeds = scale.seeds().unwrap();
    /// assert_eq!(seeds.len(), 2);
    /// assert!(!seeds[0].0.text.contains("__local"));
    /// assert!(seeds[1].0.text.contains("__local"));
    /// assert_eq!(seeds[1].1, wide);
    /// ```
    pub fn with_start(
        mut self,
        structure: Structure,
        params: kf_core::ParamValues,
        why: impl Into<String>,
    ) -> Result<Self, MutateError> {
        let structure = self.complete(&structure)?;
        let variant = self.instantiate(&structure)?;
        for (name, value) in params.iter() {
            let allowed =
                variant
                    .manifest
                    .params
                    .get(name)
                    .ok_or_else(|| MutateError::Template {
                        template: self.name.clone(),
                        message: format!(
                            "start {structure}: `{name}` is not a parameter of the variant"
                        ),
                    })?;
            if !allowed.contains(value) {
                return Err(MutateError::Template {
                    template: self.name.clone(),
                    message: format!("start {structure}: {name} = {value} is not an allowed value"),
                });
            }
        }
        self.starts.push(Start {
            structure,
            params,
            why: why.into(),
        });
        Ok(self)
    }

    /// The starting points added with [`with_start`](Self::with_start).
    pub fn starts(&self) -> &[Start] {
        &self.starts
    }

    /// The kernels a search starts from for this template: the base variant with its
    /// manifest's first values, then each [start](Self::starts) with its parameter values.
    pub fn seeds(&self) -> Result<Vec<(KernelSource, kf_core::ParamValues)>, MutateError> {
        Ok(self
            .seed_variants()?
            .into_iter()
            .map(|(variant, params)| (variant.source, params))
            .collect())
    }

    /// [`seeds`](Self::seeds) fitted to the problem sizes `sizes`: a seed whose parameter
    /// values break a constraint at these sizes (a tile deeper than K, say) gets the nearest
    /// feasible values ([`Feasibility::repair`](crate::Feasibility::repair), deterministic;
    /// device limits are left to the evaluator), and is kept as it is when none is found.
    pub fn seeds_at(
        &self,
        sizes: &IndexMap<String, i64>,
    ) -> Result<Vec<(KernelSource, kf_core::ParamValues)>, MutateError> {
        let mut seeds = Vec::new();
        for (variant, params) in self.seed_variants()? {
            let space = crate::Feasibility::new(&variant.manifest, sizes, None);
            let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
            let params = space
                .repair(&params, &[], &mut rng, SEED_REPAIR_BUDGET)
                .unwrap_or(params);
            seeds.push((variant.source, params));
        }
        Ok(seeds)
    }

    /// The seed variants (base, then starts) with their parameter values; the variants keep
    /// their parsed manifests, so fitting them needs no second parse.
    fn seed_variants(&self) -> Result<Vec<(Variant, kf_core::ParamValues)>, MutateError> {
        let base = self.instantiate(&self.base)?;
        let base_params = base.manifest.default_params();
        let mut seeds = vec![(base, base_params)];
        for start in &self.starts {
            let variant = self.instantiate(&start.structure)?;
            let mut params = variant.manifest.default_params();
            for (name, value) in start.params.iter() {
                params.set(name, value.clone());
            }
            seeds.push((variant, params));
        }
        Ok(seeds)
    }

    fn check_switch(&self, name: &str, value: i64) -> Result<(), MutateError> {
        match self.switches.get(name) {
            None => Err(MutateError::Template {
                template: self.name.clone(),
                message: format!("`{name}` is not a switch"),
            }),
            Some(values) if !values.contains(&value) => Err(MutateError::Template {
                template: self.name.clone(),
                message: format!("switch `{name}` does not allow {value} (allowed: {values:?})"),
            }),
            Some(_) => Ok(()),
        }
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The task it computes.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The template source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The template's manifest (switches included).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The switches and their allowed values, ascending.
    pub fn switches(&self) -> &IndexMap<String, Vec<i64>> {
        &self.switches
    }

    /// Every combination of switch values (the cartesian product of
    /// [`switches`](Self::switches)), in switch order; a template without
    /// switches yields the one empty structure. Not every combination need
    /// instantiate: [`instantiate`](Self::instantiate) rejects infeasible ones.
    pub fn all_structures(&self) -> Vec<Structure> {
        let mut structures = vec![Structure::new()];
        for (name, values) in &self.switches {
            structures = structures
                .into_iter()
                .flat_map(|s| values.iter().map(move |v| s.clone().with(name.clone(), *v)))
                .collect();
        }
        structures
    }

    /// The base structure.
    pub fn base(&self) -> &Structure {
        &self.base
    }

    /// The base values of the tunable parameters.
    pub fn base_params(&self) -> &kf_core::ParamValues {
        &self.base_params
    }

    /// The template itself as a kernel (switches left as parameters).
    pub fn kernel_source(&self) -> KernelSource {
        self.manifest.kernel_source(Arc::clone(&self.text))
    }

    /// `structure` completed with the base values of unnamed switches, or an error for an
    /// unknown switch or a disallowed value.
    pub fn complete(&self, structure: &Structure) -> Result<Structure, MutateError> {
        for (k, v) in structure.iter() {
            self.check_switch(k, v)?;
        }
        Ok(Structure(
            self.switches
                .keys()
                .map(|k| {
                    let v = structure.get(k).or_else(|| self.base.get(k)).unwrap_or(0);
                    (k.clone(), v)
                })
                .collect(),
        ))
    }

    /// Generates the variant for `structure`: the source with the sections that depend on the
    /// switches resolved and `#define`s for the switches the text still uses; a manifest
    /// without the switches and without parameters the text no longer uses, constraints with
    /// the switch values substituted (rules that became always true dropped), and a first
    /// comment line naming the template and structure.
    pub fn instantiate(&self, structure: &Structure) -> Result<Variant, MutateError> {
        let structure = self.complete(structure)?;
        let defines: Defines = structure.0.clone();
        let resolved = resolve_conditionals(&self.text, &defines)?;
        let (text, dropped) = self.without_unused_params(resolved);
        let header: String = structure
            .iter()
            .filter(|(k, _)| uses_identifier(&text, k))
            .map(|(k, v)| format!("#define {k} {v}\n"))
            .collect();
        let text = format!(
            "// Generated by kf-mutate from the template `{}`.\n{}",
            self.name,
            with_switch_header(&text, &header, self.manifest.language)
        );
        let manifest = self.variant_manifest(&structure, &dropped)?;
        let source = manifest.kernel_source(text);
        Ok(Variant {
            template: self.name.clone(),
            structure,
            source,
            manifest,
        })
    }

    /// `text` without the tunable parameters that neither it nor the launch geometry uses
    /// (their default blocks go too), and the names of those parameters. A parameter that
    /// chooses compiler flags stays even when the text does not use it.
    fn without_unused_params(&self, mut text: String) -> (String, Vec<String>) {
        let launch_text: String = self
            .manifest
            .global
            .iter()
            .chain(self.manifest.local.iter().flatten())
            .map(|e| format!("{} ", e.text()))
            .collect();
        let flag_text: String = self
            .manifest
            .flags
            .iter()
            .filter_map(|rule| rule.when.as_ref().map(|w| format!("{} ", w.text())))
            .collect();
        let mut dropped: Vec<String> = Vec::new();
        for name in self.manifest.params.keys() {
            if self.switches.contains_key(name)
                || uses_identifier(&launch_text, name)
                || uses_identifier(&flag_text, name)
            {
                continue;
            }
            let without = remove_default_block(&text, name);
            if !uses_identifier(&without, name) {
                text = without;
                dropped.push(name.clone());
            }
        }
        (text, dropped)
    }

    /// The variant's manifest (with its marker line naming the template and structure): the
    /// parameters that are neither switches nor `dropped`, the constraints and flag rules with
    /// the switches' values, and the launch sizes with the switches as values (launch sizes
    /// keep their parameters: those are never dropped).
    fn variant_manifest(
        &self,
        structure: &Structure,
        dropped: &[String],
    ) -> Result<Manifest, MutateError> {
        let launch = |exprs: &[kf_manifest::Expr]| -> Vec<String> {
            exprs
                .iter()
                .map(|e| with_switch_values(e.text(), structure))
                .collect()
        };
        let params: IndexMap<String, Vec<ParamValue>> = self
            .manifest
            .params
            .iter()
            .filter(|(k, _)| !self.switches.contains_key(*k) && !dropped.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let out = OutManifest {
            entry: &self.manifest.entry,
            language: self.manifest.language.as_str(),
            description: if self.manifest.description.is_empty() {
                format!("Variant {structure} of the template {}.", self.name)
            } else {
                format!(
                    "{} Variant {structure} of the template {}.",
                    self.manifest.description, self.name
                )
            },
            params,
            constraints: OutConstraints {
                rules: self.variant_rules(structure, dropped)?,
            },
            launch: OutLaunch {
                global: launch(&self.manifest.global),
                local: self.manifest.local.as_deref().map(launch),
            },
            flags: self.variant_flags(structure)?,
            tags: &self.manifest.tags,
        };
        let body = toml::to_string(&out).map_err(|e| MutateError::Serialize(e.to_string()))?;
        let manifest_text = format!(
            "{MARKER} template = \"{}\"; structure = \"{structure}\"\n{body}",
            self.name
        );
        Ok(Manifest::parse(
            &manifest_text,
            &format!("<variant {structure} of {}>", self.name),
            None,
        )?)
    }

    /// The constraints of the variant: each rule with the switches' values, without the rules
    /// that name a `dropped` parameter or that the switches alone make always true; an error
    /// when the switches make one never hold.
    fn variant_rules(
        &self,
        structure: &Structure,
        dropped: &[String],
    ) -> Result<Vec<String>, MutateError> {
        let refers_dropped = |e: &str| dropped.iter().any(|d| uses_identifier(e, d));
        let mut rules = Vec::new();
        for rule in &self.manifest.constraints {
            let r = with_switch_values(rule.text(), structure);
            if refers_dropped(&r) {
                continue;
            }
            let site = kf_manifest::ExprSite {
                file: self.manifest.file.clone(),
                field: "constraints".into(),
            };
            let expr = kf_manifest::Expr::parse(&r, &site)?;
            let constant = if expr.variables().next().is_none() {
                Some(expr.eval_bool(&Symbols::new(), &site)?)
            } else if r.contains('^') {
                // `^` is a power in manifest expressions but XOR in C: do not simplify.
                None
            } else {
                // Decided by the switches alone (`0 == 0 || …`), with C's logic.
                crate::preprocess::eval_condition(&r, &Defines::new())
                    .ok()
                    .flatten()
            };
            match constant {
                Some(true) => continue,
                Some(false) => {
                    return Err(MutateError::Template {
                        template: self.name.clone(),
                        message: format!(
                            "variant {structure}: constraint `{}` never holds",
                            rule.text()
                        ),
                    })
                }
                None => rules.push(r),
            }
        }
        Ok(rules)
    }

    /// The variant's flag rules: a condition the switches decide becomes unconditional (true)
    /// or drops its rule (false); the others keep their condition with the switches' values.
    fn variant_flags(&self, structure: &Structure) -> Result<Vec<OutFlagRule>, MutateError> {
        let mut flags = Vec::new();
        for (i, rule) in self.manifest.flags.iter().enumerate() {
            let when = match &rule.when {
                None => None,
                Some(cond) => {
                    let site = kf_manifest::ExprSite {
                        file: self.manifest.file.clone(),
                        field: format!("flags[{i}].when"),
                    };
                    let w = with_switch_values(cond.text(), structure);
                    let expr = kf_manifest::Expr::parse(&w, &site)?;
                    if expr.variables().next().is_some() {
                        Some(w)
                    } else if expr.eval_bool(&Symbols::new(), &site)? {
                        None
                    } else {
                        continue;
                    }
                }
            };
            flags.push(OutFlagRule {
                when,
                add: rule.add.clone(),
            });
        }
        Ok(flags)
    }
}

/// `expr` with each switch of `structure` replaced by its value.
fn with_switch_values(expr: &str, structure: &Structure) -> String {
    replace_identifiers(expr, |id| structure.get(id).map(|v| v.to_string()))
}

/// `text` with the switches' `#define`s added: first for OpenCL C and CUDA; for SYCL after
/// its `#include <sycl/sycl.hpp>` line, so that the SYCL headers never see them (a macro named
/// like one of their identifiers would break them; the SYCL backend places parameters the same
/// way).
fn with_switch_header(text: &str, header: &str, language: kf_core::Language) -> String {
    let is_sycl_include = |line: &str| {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        compact.starts_with("#include<sycl/sycl.hpp>")
    };
    if language == kf_core::Language::Sycl && !header.is_empty() {
        if let Some(start) = text
            .split_inclusive('\n')
            .scan(0, |offset, line| {
                let start = *offset;
                *offset += line.len();
                Some((start, line))
            })
            .find(|(_, line)| is_sycl_include(line))
            .map(|(start, line)| start + line.len())
        {
            let (before, after) = text.split_at(start);
            let newline = if before.ends_with('\n') { "" } else { "\n" };
            return format!("{before}{newline}{header}{after}");
        }
    }
    format!("{header}{text}")
}

/// Removes `#ifndef NAME` / `#define NAME …` / `#endif` blocks (a parameter's default value).
fn remove_default_block(text: &str, name: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let is = |line: &str, words: &[&str]| {
        let t: Vec<&str> = line
            .trim()
            .trim_start_matches('#')
            .split_whitespace()
            .collect();
        line.trim_start().starts_with('#') && t.len() >= words.len() && t[..words.len()] == *words
    };
    while i < lines.len() {
        if i + 2 < lines.len()
            && is(lines[i], &["ifndef", name])
            && is(lines[i + 1], &["define", name])
            && is(lines[i + 2], &["endif"])
        {
            i += 3;
            continue;
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// The template name and structure recorded in a variant's manifest, if `kernel` is one.
pub fn variant_marker(kernel: &KernelSource) -> Option<(String, Structure)> {
    let text = kernel.manifest.as_deref()?;
    let line = text.lines().find(|l| l.starts_with(MARKER))?;
    let rest = &line[MARKER.len()..];
    let field = |key: &str| -> Option<String> {
        let start = rest.find(&format!("{key} = \""))? + key.len() + 4;
        let end = rest[start..].find('"')? + start;
        Some(rest[start..end].to_owned())
    };
    let name = field("template")?;
    let structure = field("structure")?.parse().ok()?;
    Some((name, structure))
}

/// The templates a structural mutator works on.
#[derive(Debug, Clone, Default)]
pub struct TemplateLibrary {
    templates: Vec<Template>,
}

impl TemplateLibrary {
    /// No templates.
    pub fn new() -> Self {
        Self::default()
    }

    /// The templates shipped with this crate: `gemm_blocked` (register blocking, vector
    /// loads, optional local-memory tiles with padding, double buffering, prefetching,
    /// sub-group broadcasts) and `gemm_ksplit` (the K loop split across the work-items of a
    /// group, partial sums reduced through local memory), both for the `gemm` task, in OpenCL
    /// C ([`TemplateLibrary::builtin_for`] gives other languages).
    pub fn builtin() -> Result<Self, MutateError> {
        Self::builtin_for(kf_core::Language::OpenCl)
    }

    /// The GEMM templates of [`TemplateLibrary::builtin`] rendered in `language` (OpenCL C
    /// or SYCL): the same names, switches, tunables and base structures, so the same
    /// strategies apply; a language's own switches (SYCL: `SHUFFLE`, `REQD_SG`) start at 0.
    /// For CUDA, the GPU rendering of `gemm_blocked` ([`TemplateLibrary::cuda_gemm`]), which
    /// has the switches it renders (`VW`, `LOCAL_B`, `LOCAL_A`, `SUBGROUP`) and GPU-sized
    /// tunables.
    pub fn builtin_for(language: kf_core::Language) -> Result<Self, MutateError> {
        if language == kf_core::Language::Cuda {
            return Self::cuda_gemm();
        }
        let blocked = crate::languages::rendering("gemm_blocked", language)?.template(
            "gemm",
            &[
                "VW",
                "LOCAL_B",
                "LOCAL_A",
                "DOUBLE_BUFFER",
                "PREFETCH",
                "SUBGROUP",
                "PACK_B",
            ],
            Structure::new(),
            [
                ("TM", 1i64),
                ("TN", 1),
                ("WG0", 16),
                ("WG1", 1),
                ("TK", 32),
                ("PAD", 0),
                ("UNROLL", 1),
            ]
            .into_iter()
            .collect(),
        )?;
        // The K split keeps the defaults: every switch at its smallest value, the manifest's
        // first values.
        let ksplit = crate::languages::rendering("gemm_ksplit", language)?.template(
            "gemm",
            &["VW"],
            Structure::new(),
            kf_core::ParamValues::new(),
        )?;
        Ok(TemplateLibrary {
            templates: vec![blocked, ksplit],
        })
    }

    /// Adds a template (replacing one of the same name).
    pub fn with(mut self, template: Template) -> Self {
        self.templates.retain(|t| t.name != template.name);
        self.templates.push(template);
        self
    }

    /// All templates.
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// The template of that name.
    pub fn get(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// The templates for a task.
    pub fn for_task<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a Template> + 'a {
        self.templates.iter().filter(move |t| t.task == task)
    }

    /// The template and structure of a variant generated by one of these templates.
    pub fn identify(&self, kernel: &KernelSource) -> Option<(&Template, Structure)> {
        let (name, structure) = variant_marker(kernel)?;
        let template = self.get(&name)?;
        let structure = template.complete(&structure).ok()?;
        Some((template, structure))
    }
}

//! Templates bound to another task's kernel interface: the GEMM templates for a task file whose
//! operator is a matrix product (`[family] kind = "matmul"`), the softmax templates for a row
//! softmax, with the task's kernel name, argument order and buffer and size names.
//!
//! A bound template's kernel takes the task's arguments (renamed `kf_<name>` so that they
//! cannot collide with the template's own identifiers) and opens with one declaration per
//! parameter of the template's kernel, bound to an expression over the task's arguments
//! (`const int K = (kf_N);`, `__global const float* C = kf_out;`): the template's body runs
//! unchanged. Its manifest gets the task's entry name, and the template's parameter names in
//! constraints, launch sizes and flag conditions become the bound expressions over the task's
//! sizes (`M % (WG1 * TM) == 0` → `(N) % (WG1 * TM) == 0`). Switches, tunables, the base
//! structure and the starting points stay, so the template's structural strategies apply.
//!
//! Two more things a family needs: macros the template's body uses, defined for the task
//! ([`TaskBinding::define`]: an element-wise map's per-element expression), and macros its
//! `#if` sections test, fixed for the task and resolved into the bound text
//! ([`TaskBinding::fix`]: which normalisation a row template computes, whether the task has a
//! weight).

use indexmap::IndexMap;
use kf_core::Language;

use crate::error::MutateError;
use crate::preprocess::{replace_identifiers, resolve_conditionals, Defines};
use crate::template::{Template, TemplateLibrary};

/// Prefix of the task's argument names inside a bound kernel.
const ARG_PREFIX: &str = "kf_";

/// How a template's kernel parameters map onto a task's kernel interface.
///
/// ```
/// use kf_mutate::{TaskBinding, TemplateLibrary};
///
/// // A square matrix product `matmul(A, B, out, N)`.
/// let binding = TaskBinding::new("kb_matmul", "matmul")
///     .param("__global const float*", "A")
///     .param("__global const float*", "B")
///     .param("__global float*", "out")
///     .param("const int", "N")
///     .bind("A", "A").bind("B", "B").bind("C", "out")
///     .bind("M", "N").bind("N", "N").bind("K", "N");
/// let library = TemplateLibrary::builtin().unwrap().bound_to(&binding).unwrap();
/// let blocked = library.for_task("kb_matmul").next().unwrap();
/// let (kernel, _) = &blocked.seeds().unwrap()[0];
/// assert!(kernel.text.contains("void matmul(__global const float* kf_A"));
/// assert!(kernel.text.contains("const int K = (kf_N);"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskBinding {
    /// The task the bound templates are for ([`TemplateLibrary::for_task`]).
    pub task: String,
    /// The kernel's name (the manifest's `entry`).
    pub entry: String,
    /// The task's kernel parameters in order: the declared type (OpenCL C) and the name.
    pub params: Vec<(String, String)>,
    /// Per template kernel parameter, its value: an expression over the task's argument names
    /// (sizes, scalars, buffers).
    pub bind: IndexMap<String, String>,
    /// Tags the bound manifests carry (the family, `matmul`), for tuning rule priors.
    pub tags: Vec<String>,
    /// Function-like macros the bound kernel defines for the template's body, in order: the
    /// macro's name, its parameters and its body, an expression over the parameters and the
    /// task's arguments (see [`TaskBinding::define`]).
    pub macros: Vec<Macro>,
    /// Macros the template's `#if` sections test, with their values for this task: resolved
    /// into the bound text (see [`TaskBinding::fix`]).
    pub fixed: Defines,
}

/// A function-like macro a binding defines for a template's body (`MAP(x)` of the element-wise
/// map template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Macro {
    /// The macro's name.
    pub name: String,
    /// Its parameters (may be empty: `NAME()`).
    pub params: Vec<String>,
    /// The expansion: an expression over the parameters and the task's argument names.
    pub body: String,
}

impl TaskBinding {
    /// A binding for the task `task` whose kernel is named `entry`, with no parameters yet.
    pub fn new(task: impl Into<String>, entry: impl Into<String>) -> Self {
        TaskBinding {
            task: task.into(),
            entry: entry.into(),
            params: Vec::new(),
            bind: IndexMap::new(),
            tags: Vec::new(),
            macros: Vec::new(),
            fixed: Defines::new(),
        }
    }

    /// Defines the macro `name(params…)` for the template's body as `(body)`, an expression
    /// over `params` and the task's arguments (a task argument a parameter shadows is the
    /// parameter). The element-wise map template applies `MAP(v)` to every element:
    ///
    /// ```
    /// use kf_mutate::{TaskBinding, TemplateLibrary};
    ///
    /// // LeakyReLU with the task's scalar `slope`: the input buffer's name stands for one
    /// // element.
    /// let binding = TaskBinding::new("kb_leaky", "leaky")
    ///     .param("__global const float*", "x")
    ///     .param("__global float*", "out")
    ///     .param("const int", "n")
    ///     .param("const float", "slope")
    ///     .bind("X", "x").bind("Y", "out").bind("N", "n")
    ///     .define("MAP", ["x"], "x > 0.0f ? x : slope * x");
    /// let library = TemplateLibrary::map().unwrap().bound_to(&binding).unwrap();
    /// let (kernel, _) = &library.for_task("kb_leaky").next().unwrap().seeds().unwrap()[0];
    /// assert!(kernel.text.contains("#define MAP(x) (x > 0.0f ? x : kf_slope * x)"));
    /// ```
    pub fn define<S: Into<String>>(
        mut self,
        name: impl Into<String>,
        params: impl IntoIterator<Item = S>,
        body: impl Into<String>,
    ) -> Self {
        self.macros.push(Macro {
            name: name.into(),
            params: params.into_iter().map(Into::into).collect(),
            body: body.into(),
        });
        self
    }

    /// Fixes the macro `name` to `value` for this task: the template's `#if` sections that
    /// test it are resolved into the bound text (and its `#ifndef` default goes), so each
    /// variant shows only what this task computes.
    pub fn fix(mut self, name: impl Into<String>, value: i64) -> Self {
        self.fixed.insert(name.into(), value);
        self
    }

    /// Adds a tag to the bound manifests (`matmul`: tuning rule priors select by it).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Appends a parameter of the task's kernel.
    pub fn param(mut self, decl: impl Into<String>, name: impl Into<String>) -> Self {
        self.params.push((decl.into(), name.into()));
        self
    }

    /// Binds the template parameter `template_param` to `expr` over the task's arguments.
    pub fn bind(mut self, template_param: impl Into<String>, expr: impl Into<String>) -> Self {
        self.bind.insert(template_param.into(), expr.into());
        self
    }

    /// `expr` (over the task's argument names) as the bound kernel spells it.
    fn in_kernel(&self, expr: &str) -> String {
        self.in_kernel_shadowed(expr, &[])
    }

    /// [`in_kernel`](Self::in_kernel) where the names in `shadowed` (a macro's parameters)
    /// stay as they are.
    fn in_kernel_shadowed(&self, expr: &str, shadowed: &[String]) -> String {
        replace_identifiers(expr, |id| {
            (!shadowed.iter().any(|s| s == id) && self.params.iter().any(|(_, name)| name == id))
                .then(|| format!("{ARG_PREFIX}{id}"))
        })
    }

    /// The prologue lines that define the binding's macros.
    fn macro_lines(&self) -> String {
        self.macros
            .iter()
            .map(|m| {
                format!(
                    "#undef {name}\n#define {name}({params}) ({body})\n",
                    name = m.name,
                    params = m.params.join(", "),
                    body = self.in_kernel_shadowed(&m.body, &m.params)
                )
            })
            .collect()
    }

    /// A manifest expression over the template's parameters as one over the task's sizes.
    fn in_manifest(&self, expr: &str) -> String {
        replace_identifiers(expr, |id| self.bind.get(id).map(|e| format!("({e})")))
    }
}

impl Template {
    /// This template bound to another task's kernel interface (see [`TaskBinding`]): the
    /// kernel takes the task's arguments, and every parameter of the template's kernel must be
    /// bound. OpenCL C templates only.
    pub fn bound_to(&self, binding: &TaskBinding) -> Result<Template, MutateError> {
        let fail = |message: String| MutateError::Template {
            template: self.name().to_owned(),
            message,
        };
        if self.manifest().language != Language::OpenCl {
            return Err(fail(format!(
                "binding to a task's interface is done for OpenCL C templates, not {}",
                self.manifest().language
            )));
        }
        let text = bind_kernel_text(self.name(), self.text(), &self.manifest().entry, binding)?;
        let manifest = bind_manifest(self.manifest(), binding)?;
        let mut bound = Template::new(
            self.name(),
            binding.task.clone(),
            text,
            &manifest,
            self.switches().keys(),
        )?
        .with_base(self.base().clone(), self.base_params().clone())?;
        for start in self.starts() {
            bound = bound.with_start(
                start.structure.clone(),
                start.params.clone(),
                start.why.clone(),
            )?;
        }
        Ok(bound)
    }
}

/// The strided GEMM template's source (`templates/family/gemm_strided.cl`).
const GEMM_STRIDED_CL: &str = include_str!("../templates/family/gemm_strided.cl");
/// Its manifest.
const GEMM_STRIDED_TOML: &str = include_str!("../templates/family/gemm_strided.toml");

impl TemplateLibrary {
    /// `gemm_strided` (OpenCL C), for the task `gemm_strided`: a register-blocked SGEMM whose
    /// factors are read through strides (`SAM`, `SAK`, `SBK`, `SBN` kernel parameters), so
    /// that a binding serves matrix products with a transposed factor; switch `LOCAL_A`
    /// (a local-memory tile of A). Bind it with [`TemplateLibrary::bound_to`].
    pub fn strided_gemm() -> Result<TemplateLibrary, MutateError> {
        let template = Template::new(
            "gemm_strided",
            "gemm_strided",
            GEMM_STRIDED_CL,
            GEMM_STRIDED_TOML,
            ["LOCAL_A"],
        )?;
        Ok(TemplateLibrary::new().with(template))
    }

    /// Every template of this library bound to the task of `binding` ([`Template::bound_to`]);
    /// the bound templates keep their names, so variants are identified as before.
    pub fn bound_to(&self, binding: &TaskBinding) -> Result<TemplateLibrary, MutateError> {
        let mut library = TemplateLibrary::new();
        for template in self.templates() {
            library = library.with(template.bound_to(binding)?);
        }
        Ok(library)
    }
}

/// The template text with its kernel's parameter list replaced by the task's and a prologue
/// that declares each template parameter bound to its expression.
fn bind_kernel_text(
    template: &str,
    text: &str,
    entry: &str,
    binding: &TaskBinding,
) -> Result<String, MutateError> {
    let fail = |message: String| MutateError::Template {
        template: template.to_owned(),
        message,
    };
    for m in &binding.macros {
        if m.body.contains(['\n', '\\', '#', ';', '{', '}']) {
            return Err(fail(format!(
                "the body of the macro `{}` is not one expression: `{}`",
                m.name, m.body
            )));
        }
    }
    let resolved;
    let text = if binding.fixed.is_empty() {
        text
    } else {
        resolved = resolve_conditionals(text, &binding.fixed)?;
        resolved.as_str()
    };
    let opening = format!("void {entry}(");
    let starts: Vec<usize> = text.match_indices(&opening).map(|(i, _)| i).collect();
    let [start] = starts[..] else {
        return Err(fail(format!(
            "expected one `{opening}` in the template text, found {}",
            starts.len()
        )));
    };
    let params_start = start + opening.len();
    let params_len = text[params_start..]
        .find(')')
        .ok_or_else(|| fail(format!("`{opening}` has no closing parenthesis")))?;
    let params_end = params_start + params_len;
    let body_open = text[params_end..]
        .find('{')
        .map(|i| params_end + i)
        .ok_or_else(|| fail(format!("`{opening}…)` has no body")))?;
    let mut prologue = binding.macro_lines();
    let mut bound = 0;
    for param in text[params_start..params_end].split(',') {
        let param = param.trim();
        let name_at = param
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let (decl, name) = (param[..name_at].trim(), &param[name_at..]);
        let expr = binding
            .bind
            .get(name)
            .ok_or_else(|| fail(format!("the kernel parameter `{name}` is not bound")))?;
        prologue.push_str(&format!(
            "    {decl} {name} = ({});\n",
            binding.in_kernel(expr)
        ));
        bound += 1;
    }
    if bound != binding.bind.len() {
        return Err(fail(format!(
            "{} bindings for the kernel's {bound} parameters",
            binding.bind.len()
        )));
    }
    let params = binding
        .params
        .iter()
        .map(|(decl, name)| format!("{decl} {ARG_PREFIX}{name}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "{}void {}({params}) {{\n    // Bound to the task `{}` by kf-mutate.\n{prologue}{}",
        &text[..start],
        binding.entry,
        binding.task,
        &text[body_open + 1..]
    ))
}

/// The template's manifest text with the task's entry and the bound expressions in place of
/// the template's parameters.
fn bind_manifest(
    manifest: &kf_manifest::Manifest,
    binding: &TaskBinding,
) -> Result<String, MutateError> {
    let serialize = |e: toml::de::Error| MutateError::Serialize(e.to_string());
    let mut table: toml::Table = manifest.text.parse().map_err(serialize)?;
    table.insert("entry".into(), binding.entry.clone().into());
    table.remove("source");
    if !binding.tags.is_empty() {
        let mut tags: Vec<String> = manifest.tags.clone();
        tags.extend(
            binding
                .tags
                .iter()
                .filter(|t| !manifest.tags.contains(t))
                .cloned(),
        );
        table.insert("tags".into(), tags.into());
    }
    let rewrite = |value: &mut toml::Value| {
        if let toml::Value::String(s) = value {
            *s = binding.in_manifest(s);
        }
    };
    let rewrite_list = |value: Option<&mut toml::Value>| {
        if let Some(toml::Value::Array(items)) = value {
            items.iter_mut().for_each(rewrite);
        }
    };
    if let Some(toml::Value::Table(constraints)) = table.get_mut("constraints") {
        rewrite_list(constraints.get_mut("rules"));
    }
    if let Some(toml::Value::Table(launch)) = table.get_mut("launch") {
        rewrite_list(launch.get_mut("global"));
        rewrite_list(launch.get_mut("local"));
    }
    if let Some(toml::Value::Array(flags)) = table.get_mut("flags") {
        for flag in flags {
            if let toml::Value::Table(flag) = flag {
                if let Some(when) = flag.get_mut("when") {
                    rewrite(when);
                }
            }
        }
    }
    toml::to_string(&table).map_err(|e| MutateError::Serialize(e.to_string()))
}

/// For the family templates' tests: every structure of every template of `library`
/// instantiates, alone and bound to `binding` (the bound variant named by the binding's entry),
/// and the bound templates keep every seed.
#[cfg(test)]
pub(crate) fn assert_every_structure_binds(library: &TemplateLibrary, binding: &TaskBinding) {
    let bound = library.bound_to(binding).unwrap();
    for (template, bound) in library.templates().iter().zip(bound.templates()) {
        for structure in template.all_structures() {
            template.instantiate(&structure).unwrap();
            let variant = bound.instantiate(&structure).unwrap();
            assert_eq!(variant.manifest.entry, binding.entry);
        }
        assert_eq!(
            bound.seeds().unwrap().len(),
            template.seeds().unwrap().len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square() -> TaskBinding {
        TaskBinding::new("kb_mm", "matmul")
            .param("__global const float*", "A")
            .param("__global const float*", "B")
            .param("__global float*", "out")
            .param("const int", "N")
            .bind("A", "A")
            .bind("B", "B")
            .bind("C", "out")
            .bind("M", "N")
            .bind("N", "N")
            .bind("K", "N")
            .tag("matmul")
    }

    /// The bound GEMM templates keep their switches, base and starts; their manifests use the
    /// task's entry and its size names.
    #[test]
    fn bound_gemm_templates_keep_their_structure() {
        let builtin = TemplateLibrary::builtin().unwrap();
        let bound = builtin.bound_to(&square()).unwrap();
        assert_eq!(bound.templates().len(), builtin.templates().len());
        for (original, template) in builtin.templates().iter().zip(bound.templates()) {
            assert_eq!(template.task(), "kb_mm");
            assert_eq!(template.switches(), original.switches());
            assert_eq!(template.starts().len(), original.starts().len());
            assert_eq!(template.manifest().entry, "matmul");
            let launch: Vec<String> = template
                .manifest()
                .global
                .iter()
                .map(|e| e.text().to_owned())
                .collect();
            assert!(
                launch
                    .iter()
                    .all(|e| !crate::preprocess::uses_identifier(e, "M")),
                "{launch:?}"
            );
            let seeds = template.seeds().unwrap();
            assert!(seeds[0].0.text.contains("__global float* kf_out"));
            // The family's tag travels into every variant's manifest.
            let variant = kf_manifest::Manifest::from_kernel(&seeds[0].0).unwrap();
            assert_eq!(variant.tags, ["matmul"]);
        }
    }

    /// A template parameter left unbound is an error naming it.
    #[test]
    fn an_unbound_parameter_is_an_error() {
        let mut binding = square();
        binding.bind.shift_remove("K");
        let err = TemplateLibrary::builtin()
            .unwrap()
            .bound_to(&binding)
            .unwrap_err();
        assert!(err.to_string().contains("`K` is not bound"), "{err}");
    }
}

//! Rendering a prompt: the components, the task, the device, the parent kernel with its
//! manifest and evaluation feedback, the run's recent lessons, earlier attempts from the same
//! parent, inspirations from other cells (with their manifests) and a hint of where the
//! archive is empty, all within a size bound.

use kf_core::{
    ArchiveHints, BufferAccess, Descriptor, DescriptorSpace, DeviceFacts, Elite, Evaluation,
    KernelInterface, KernelSource, Status, Task,
};
use serde::{Deserialize, Serialize};

use crate::client::ChatMessage;
use crate::components::{fill, PromptComponents, PromptTemplates};

/// Size bounds of a rendered prompt (characters). Long texts are summarised (head, error lines,
/// tail), never appended without limit; when the whole prompt is still too long, inspirations,
/// then earlier attempts, then hints, then all but the newest lesson are dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderLimits {
    /// The whole prompt (system plus user text).
    pub max_prompt_chars: usize,
    /// The parent's source.
    pub max_source_chars: usize,
    /// The parent's diagnostics.
    pub max_diagnostics_chars: usize,
    /// Inspirations shown.
    pub max_inspirations: usize,
    /// Each inspiration's source.
    pub max_inspiration_chars: usize,
    /// Earlier attempts from the same parent shown.
    pub max_attempts: usize,
    /// Each attempt's diagnostics.
    pub max_attempt_chars: usize,
    /// Archive hints shown.
    pub max_hints: usize,
    /// Recent lessons of the whole run shown (failures and successes, of any parent).
    #[serde(default = "default_max_lessons")]
    pub max_lessons: usize,
}

fn default_max_lessons() -> usize {
    RenderLimits::default().max_lessons
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            max_prompt_chars: 24_000,
            max_source_chars: 9_000,
            max_diagnostics_chars: 1_500,
            max_inspirations: 2,
            max_inspiration_chars: 2_500,
            max_attempts: 3,
            max_attempt_chars: 400,
            max_hints: 2,
            max_lessons: 5,
        }
    }
}

impl RenderLimits {
    /// Tight bounds for small local models with short contexts.
    pub fn compact() -> Self {
        RenderLimits {
            max_prompt_chars: 7_000,
            max_source_chars: 2_500,
            max_diagnostics_chars: 400,
            max_inspirations: 1,
            max_inspiration_chars: 800,
            max_attempts: 2,
            max_attempt_chars: 200,
            max_hints: 1,
            max_lessons: 3,
        }
    }
}

/// What the model is asked to reply with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFormat {
    /// A full rewrite or SEARCH/REPLACE edits, as the model prefers.
    #[default]
    Either,
    /// A full rewrite.
    FullRewrite,
    /// SEARCH/REPLACE edits of the parent.
    Edits,
}

/// An earlier child of the same parent, shown so the model does not repeat a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// How it was made (`full rewrite`, `2 edits`, `extraction error`).
    pub how: String,
    /// Where it landed on the ladder.
    pub status: Status,
    /// What it did for the archive (`new cell`, `improved by 0.4`, `not added`).
    pub outcome: String,
    /// Its diagnostics, summarised.
    pub diagnostics: String,
}

/// Everything a prompt is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// The task.
    pub task: &'a Task,
    /// The device, when known.
    pub device: Option<&'a DeviceFacts>,
    /// The parent to improve.
    pub parent: &'a Elite,
    /// Elites of other cells.
    pub inspirations: &'a [Elite],
    /// Where the archive is empty or improving.
    pub hints: &'a ArchiveHints,
    /// Earlier children of this parent.
    pub attempts: &'a [Attempt],
    /// Recent lessons of the whole run, newest first, one line each (see the mutator's
    /// `recent lessons` section): shown whatever the parent is.
    pub lessons: &'a [String],
}

/// Summarises a long text to at most `max` characters: the first line, then the lines that
/// mention errors or warnings (repeated lines once), then the tail, with a note of what was
/// left out.
///
/// ```
/// let log = format!("build failed\n{}error: `x` undeclared\n{}1 error generated.", "noise\n".repeat(200), "more\n".repeat(200));
/// let s = kf_prompt::summarize(&log, 200);
/// assert!(s.len() <= 200);
/// assert!(s.contains("error: `x` undeclared"));
/// assert!(s.starts_with("build failed"));
/// ```
pub fn summarize(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    let important = |l: &str| {
        let l = l.to_ascii_lowercase();
        [
            "error",
            "warning",
            "mismatch",
            "differs",
            "expected",
            "exceeds",
            "undeclared",
            "failed",
        ]
        .iter()
        .any(|k| l.contains(k))
    };
    let mut picked: Vec<usize> = Vec::new();
    let mut used = 0usize;
    let budget = max.saturating_mul(3) / 4;
    let mut seen = std::collections::HashSet::new();
    let mut take = |i: usize, picked: &mut Vec<usize>, used: &mut usize| {
        let l = lines[i].trim_end();
        if l.trim().is_empty() || !seen.insert(l.trim()) {
            return true;
        }
        if *used + l.len() + 1 > budget {
            return false;
        }
        picked.push(i);
        *used += l.len() + 1;
        true
    };
    take(0, &mut picked, &mut used);
    for (i, line) in lines.iter().enumerate().skip(1) {
        if important(line) && !take(i, &mut picked, &mut used) {
            break;
        }
    }
    // The tail, newest first, while it fits.
    let mut tail = Vec::new();
    for i in (1..lines.len()).rev() {
        if picked.contains(&i) {
            continue;
        }
        let l = lines[i].trim_end();
        if used + l.len() + 1 > max.saturating_sub(40) {
            break;
        }
        used += l.len() + 1;
        tail.push(i);
        if tail.len() >= 3 {
            break;
        }
    }
    picked.extend(tail);
    picked.sort_unstable();
    picked.dedup();
    let mut out = String::new();
    let mut last = None;
    for &i in &picked {
        if let Some(prev) = last {
            if i > prev + 1 {
                out.push_str(&format!("[… {} lines …]\n", i - prev - 1));
            }
        }
        out.push_str(lines[i].trim_end());
        out.push('\n');
        last = Some(i);
    }
    if let Some(prev) = last {
        if prev + 1 < lines.len() {
            out.push_str(&format!("[… {} lines …]\n", lines.len() - prev - 1));
        }
    }
    clip(out.trim_end(), max)
}

/// Cuts `text` to at most `max` bytes at a character boundary, keeping head and tail.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    const NOTE: &str = "\n[…]\n";
    let keep = max.saturating_sub(NOTE.len());
    let mut head = keep * 2 / 3;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (keep - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}{NOTE}{}", &text[..head], &text[tail..])
}

fn fence_lang(source: &KernelSource) -> &'static str {
    match source.language {
        kf_core::Language::OpenCl => "opencl",
        kf_core::Language::Cuda => "cuda",
        _ => "cpp",
    }
}

/// `memory_access=local_tiled, …` for a descriptor, or its coordinates.
pub fn describe_cell(space: Option<&DescriptorSpace>, descriptor: &Descriptor) -> String {
    describe_coords(space, &descriptor.coords)
}

fn describe_coords(space: Option<&DescriptorSpace>, coords: &[usize]) -> String {
    match space {
        Some(s) if s.ndim() == coords.len() => s
            .dimensions
            .iter()
            .zip(coords)
            .map(|(d, c)| {
                format!(
                    "{}={}",
                    d.name,
                    d.levels.get(*c).map_or("?", String::as_str)
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => format!("{coords:?}"),
    }
}

/// One line of figures for an evaluation.
pub fn describe_evaluation(e: &Evaluation) -> String {
    let mut parts = vec![format!("status: {}", e.status)];
    if let Some(t) = e.timing {
        parts.push(format!(
            "median {:.4} ms over {} trials",
            t.median_s * 1e3,
            t.trials
        ));
    }
    if let Some(s) = e.speedup {
        parts.push(format!("{s:.2}x the baseline"));
    }
    if let Some(g) = e.gflops {
        parts.push(format!("{g:.1} GFLOP/s"));
    }
    if let Some(c) = e.correctness {
        if e.status != Status::Correct {
            parts.push(format!(
                "{:.1}% of elements within tolerance, max rel error {:.2e}",
                c.fraction_within * 100.0,
                c.max_rel_error
            ));
        }
    }
    let f = &e.compiler;
    let mut facts = Vec::new();
    if let Some(r) = f.registers {
        facts.push(format!("{r} registers"));
    }
    if let Some(l) = f.local_mem_bytes {
        facts.push(format!("{l} B local memory"));
    }
    if let Some(p) = f.private_mem_bytes {
        facts.push(format!("{p} B private memory"));
    }
    if let Some(s) = f.spill_bytes {
        facts.push(format!("{s} B spilled"));
    }
    if let Some(w) = f.max_work_group_size {
        facts.push(format!("max work-group {w}"));
    }
    if !facts.is_empty() {
        parts.push(format!("compiler: {}", facts.join(", ")));
    }
    if !e.params.is_empty() {
        parts.push(format!("parameters {}", e.params));
    }
    parts.join("; ")
}

fn describe_device(d: &DeviceFacts) -> String {
    let platform = if d.platform.is_empty() {
        String::new()
    } else {
        format!(", {}", d.platform)
    };
    let mut s = format!(
        "{} ({:?}{platform}), {} compute units, max work-group {}, local memory {} KiB, preferred float vector width {}",
        d.name,
        d.kind,
        d.compute_units,
        d.max_work_group_size,
        d.local_mem_bytes / 1024,
        d.preferred_vector_width_float
    );
    if !d.sub_group_sizes.is_empty() {
        s.push_str(&format!(", sub-group sizes {:?}", d.sub_group_sizes));
    }
    if let Some(g) = d.peak_gflops {
        s.push_str(&format!(", peak {g:.0} GFLOP/s"));
    }
    if let Some(b) = d.peak_bandwidth_gbs {
        s.push_str(&format!(", {b:.0} GB/s"));
    }
    s
}

/// "Increase memory_access from global to coalesced_vectorised": the empty frontier cells
/// nearest the parent, as moves along one dimension where possible.
pub fn hint_lines(hints: &ArchiveHints, parent: &[usize], max: usize) -> Vec<String> {
    let space = hints.space.as_ref();
    let mut out = Vec::new();
    // Moves up one level along one dimension first (the design's "increase memory-access
    // level"), then the rest in the archive's order (nearest the parent first).
    let is_increase = |cell: &Vec<usize>| {
        cell.len() == parent.len()
            && (0..cell.len()).filter(|&d| cell[d] != parent[d]).count() == 1
            && (0..cell.len()).all(|d| cell[d] >= parent[d])
    };
    let ordered = hints
        .empty_frontier
        .iter()
        .filter(|c| is_increase(c))
        .chain(hints.empty_frontier.iter().filter(|c| !is_increase(c)));
    for cell in ordered {
        if out.len() >= max {
            break;
        }
        if cell.len() != parent.len() {
            continue;
        }
        let diffs: Vec<usize> = (0..cell.len()).filter(|&d| cell[d] != parent[d]).collect();
        let line = match (diffs.as_slice(), space) {
            ([d], Some(s)) if s.ndim() == cell.len() => {
                let dim = &s.dimensions[*d];
                let level = |i: usize| dim.levels.get(i).map_or("?", String::as_str);
                let verb = if cell[*d] > parent[*d] {
                    "Increase"
                } else {
                    "Decrease"
                };
                format!(
                    "{verb} {} from {} to {}: that cell of the archive is still empty.",
                    dim.name,
                    level(parent[*d]),
                    level(cell[*d])
                )
            }
            _ => format!("The cell {} is still empty.", describe_coords(space, cell)),
        };
        out.push(line);
    }
    if hints.recently_improved.first().map(Vec::as_slice) == Some(parent) {
        out.push("This kernel's cell improved recently: refining it further may pay.".into());
    }
    out
}

fn code(lang: &str, text: &str) -> String {
    format!("```{lang}\n{}\n```\n", text.trim_end())
}

/// The system message: the preamble and the components.
pub fn render_system(
    components: &PromptComponents,
    templates: &PromptTemplates,
    language: &str,
) -> String {
    let preamble = fill(&templates.system, &[("language", language)]);
    let body = components.render();
    if body.is_empty() {
        preamble
    } else {
        format!("{preamble}\n\n{body}")
    }
}

/// The `# Kernel interface` section of a prompt: the signature, the argument order, and each
/// buffer (type, shape, access) and scalar, as the task declares them.
///
/// ```
/// use kf_core::{BufferAccess, BufferInterface, KernelInterface};
///
/// let interface = KernelInterface {
///     signature: "(const int N, __global const float* x, __global float* y)".into(),
///     args: vec!["N".into(), "x".into(), "y".into()],
///     buffers: vec![BufferInterface {
///         name: "y".into(), dtype: "f32".into(), shape: vec!["N".into()], dims: vec![1024],
///         access: BufferAccess::Output,
///     }],
///     scalars: vec![],
/// };
/// let text = kf_prompt::describe_interface(&interface);
/// assert!(text.contains("Argument order: N, x, y"));
/// assert!(text.contains("f32 y[N] (currently [1024]): output"));
/// ```
pub fn describe_interface(interface: &KernelInterface) -> String {
    let mut s = String::from("# Kernel interface\n");
    s.push_str(&format!(
        "Keep this parameter list exactly: {}\n",
        interface.signature.trim()
    ));
    s.push_str(&format!("Argument order: {}\n", interface.args.join(", ")));
    if !interface.buffers.is_empty() {
        s.push_str("Buffers (row-major):\n");
        for b in &interface.buffers {
            let dims: Vec<String> = b.dims.iter().map(i64::to_string).collect();
            let access = match b.access {
                BufferAccess::Input => "input, must not be modified",
                BufferAccess::Output => "output, every element must be written",
                BufferAccess::Inout => "inout: read, then overwritten in place with the result",
            };
            s.push_str(&format!(
                "- {} {}[{}] (currently [{}]): {access}\n",
                b.dtype,
                b.name,
                b.shape.join("]["),
                dims.join(", ")
            ));
        }
    }
    if !interface.scalars.is_empty() {
        let scalars: Vec<String> = interface
            .scalars
            .iter()
            .map(|sc| format!("{} {} = {}", sc.dtype, sc.name, sc.value))
            .collect();
        s.push_str(&format!("Scalars: {}\n", scalars.join(", ")));
    }
    s
}

/// Renders the chat messages asking for a child of `input.parent`.
pub fn render_prompt(
    components: &PromptComponents,
    templates: &PromptTemplates,
    limits: &RenderLimits,
    format: ReplyFormat,
    input: &PromptInput<'_>,
) -> Vec<ChatMessage> {
    let parent = input.parent;
    let source = &parent.candidate.source;
    let lang = fence_lang(source);
    let language = source.language.to_string();
    let system = render_system(components, templates, &language);
    let space = input.hints.space.as_ref();
    let metrics = &input.hints.metrics;
    let sections = PromptSections {
        head: prompt_head(input, limits, lang),
        lessons: lesson_lines(input.lessons, limits),
        attempts: attempt_lines(input.attempts, limits),
        inspirations: inspiration_blocks(input.inspirations, space, limits),
        hints: hint_lines(input.hints, &parent.descriptor.coords, limits.max_hints),
        archive_fill: (metrics.cells > 0).then(|| {
            format!(
                "The archive has {} of {} cells filled.\n",
                metrics.filled, metrics.cells
            )
        }),
        tail: reply_instructions(templates, format, lang, &source.entry),
    };
    let user = sections.fit(system.len(), limits.max_prompt_chars);
    vec![ChatMessage::system(system), ChatMessage::user(user)]
}

/// The parts of a prompt's user message: a fixed head and tail around sections of lines,
/// which are shortened from their ends when the prompt is too long.
struct PromptSections {
    /// Task, device, the parent kernel and its evaluation.
    head: String,
    lessons: Vec<String>,
    attempts: Vec<String>,
    inspirations: Vec<String>,
    hints: Vec<String>,
    /// How full the archive is, shown with the hints.
    archive_fill: Option<String>,
    /// How to reply.
    tail: String,
}

/// How many entries of each section a user message shows.
#[derive(Debug, Clone, Copy)]
struct SectionCounts {
    attempts: usize,
    inspirations: usize,
    hints: usize,
    lessons: usize,
}

impl SectionCounts {
    fn total(&self) -> usize {
        self.attempts + self.inspirations + self.hints + self.lessons
    }

    /// Shows one entry fewer: inspirations go first, then attempts, then hints, lessons last.
    fn drop_one(&mut self) {
        if self.inspirations > 0 {
            self.inspirations -= 1;
        } else if self.attempts > 0 {
            self.attempts -= 1;
        } else if self.hints > 0 {
            self.hints -= 1;
        } else {
            self.lessons -= 1;
        }
    }
}

impl PromptSections {
    /// The user message with every entry, shortened to fit `max_chars` together with a system
    /// message of `system_len` characters.
    fn fit(&self, system_len: usize, max_chars: usize) -> String {
        let mut n = SectionCounts {
            attempts: self.attempts.len(),
            inspirations: self.inspirations.len(),
            hints: self.hints.len(),
            lessons: self.lessons.len(),
        };
        let mut user = self.assemble(n);
        // Lessons go last, and the newest one stays: it is how a failure reaches the model.
        while system_len + user.len() > max_chars && n.total() > 1 {
            n.drop_one();
            user = self.assemble(n);
        }
        if system_len + user.len() > max_chars {
            user = clip(&user, max_chars.saturating_sub(system_len).max(1000));
        }
        user
    }

    /// The user message with the first `n` entries of each section.
    fn assemble(&self, n: SectionCounts) -> String {
        let mut user = self.head.clone();
        if n.lessons > 0 {
            user.push_str(
                "\n# Recent lessons from this run (other kernels too; learn from them)\n",
            );
            for l in self.lessons.iter().take(n.lessons) {
                user.push_str(l);
                user.push('\n');
            }
        }
        if n.attempts > 0 {
            user.push_str("\n# Earlier attempts from this kernel (do not repeat their mistakes)\n");
            for a in self.attempts.iter().take(n.attempts) {
                user.push_str(a);
                user.push('\n');
            }
        }
        if n.inspirations > 0 {
            user.push_str("\n# Kernels from other cells of the archive, for ideas\n");
            for i in self.inspirations.iter().take(n.inspirations) {
                user.push_str(i);
            }
        }
        if n.hints > 0 {
            user.push_str("\n# Where the search should go\n");
            for h in self.hints.iter().take(n.hints) {
                user.push_str(h);
                user.push('\n');
            }
            if let Some(line) = &self.archive_fill {
                user.push_str(line);
            }
        }
        user.push_str(&self.tail);
        user
    }
}

/// The head of a prompt: the task, the device, and the kernel to improve with its evaluation.
fn prompt_head(input: &PromptInput<'_>, limits: &RenderLimits, lang: &str) -> String {
    let mut head = task_section(input.task);
    if let Some(d) = input.device {
        head.push_str(&format!("# Device\n{}\n\n", describe_device(d)));
    }
    head.push_str(&parent_section(
        input.parent,
        input.hints.space.as_ref(),
        limits,
        lang,
    ));
    head
}

/// The `# Task` section: description, problem sizes, and the kernel interface if declared.
fn task_section(task: &Task) -> String {
    let mut head = String::new();
    head.push_str("# Task\n");
    head.push_str(task.description.trim());
    if !task.sizes.is_empty() {
        let sizes: Vec<String> = task.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        head.push_str(&format!("\nProblem sizes: {}.", sizes.join(", ")));
    }
    head.push_str("\n\n");
    if let Some(interface) = &task.interface {
        head.push_str(&describe_interface(interface));
        head.push('\n');
    }
    head
}

/// The `# Current kernel` section: the parent's source and manifest, its evaluation, and for
/// a kernel that is not correct yet, its diagnostics and the instruction to fix them first.
fn parent_section(
    parent: &Elite,
    space: Option<&DescriptorSpace>,
    limits: &RenderLimits,
    lang: &str,
) -> String {
    let source = &parent.candidate.source;
    let mut head = format!(
        "# Current kernel (candidate {}, cell {})\n",
        parent.candidate.id,
        describe_cell(space, &parent.descriptor)
    );
    head.push_str(&code(lang, &clip(&source.text, limits.max_source_chars)));
    if let Some(m) = &source.manifest {
        head.push_str(&code("toml", &clip(m, limits.max_source_chars / 2)));
    }
    head.push_str(&format!(
        "\n# Its evaluation\n{}\n",
        describe_evaluation(&parent.evaluation)
    ));
    // A correct kernel's diagnostics repeat its figures; a failed one's say what went wrong.
    if parent.evaluation.status != Status::Correct
        && !parent.evaluation.diagnostics.trim().is_empty()
    {
        head.push_str(&format!(
            "Diagnostics:\n{}\n",
            summarize(&parent.evaluation.diagnostics, limits.max_diagnostics_chars)
        ));
    }
    if parent.evaluation.status != Status::Correct {
        head.push_str("This kernel is not correct yet: fix what the diagnostics describe first.\n");
    }
    head
}

/// The earlier attempts from the parent, newest first, one line each with their diagnostics.
fn attempt_lines(attempts: &[Attempt], limits: &RenderLimits) -> Vec<String> {
    attempts
        .iter()
        .rev()
        .take(limits.max_attempts)
        .map(|a| {
            let mut s = format!("- {} -> {} ({})", a.how, a.status, a.outcome);
            if !a.diagnostics.trim().is_empty() {
                s.push_str(&format!(
                    ": {}",
                    summarize(&a.diagnostics, limits.max_attempt_chars).replace('\n', " ")
                ));
            }
            s
        })
        .collect()
}

/// One block per inspiration: its cell and evaluation, its source and manifest.
fn inspiration_blocks(
    inspirations: &[Elite],
    space: Option<&DescriptorSpace>,
    limits: &RenderLimits,
) -> Vec<String> {
    inspirations
        .iter()
        .take(limits.max_inspirations)
        .map(|e| {
            let mut s = format!(
                "## Candidate {} (cell {}; {})\n",
                e.candidate.id,
                describe_cell(space, &e.descriptor),
                describe_evaluation(&e.evaluation)
            );
            s.push_str(&code(
                fence_lang(&e.candidate.source),
                &clip(&e.candidate.source.text, limits.max_inspiration_chars),
            ));
            if let Some(m) = &e.candidate.source.manifest {
                s.push_str(&code("toml", &clip(m, limits.max_inspiration_chars / 2)));
            }
            s
        })
        .collect()
}

/// The run's recent lessons, one line each.
fn lesson_lines(lessons: &[String], limits: &RenderLimits) -> Vec<String> {
    lessons
        .iter()
        .take(limits.max_lessons)
        .map(|l| format!("- {}", l.replace('\n', " ")))
        .collect()
}

/// The `# How to reply` section: the manifest help and the reply format asked for.
fn reply_instructions(
    templates: &PromptTemplates,
    format: ReplyFormat,
    lang: &str,
    entry: &str,
) -> String {
    let mut tail = String::new();
    tail.push_str("\n# How to reply\n");
    tail.push_str(&fill(&templates.manifest_help, &[]));
    tail.push('\n');
    let format_text = match format {
        ReplyFormat::Either => &templates.format_either,
        ReplyFormat::FullRewrite => &templates.format_full,
        ReplyFormat::Edits => &templates.format_edits,
    };
    tail.push_str(&fill(format_text, &[("language", lang), ("entry", entry)]));
    tail.push('\n');
    tail
}

/// The follow-up asking for a full rewrite after edits failed to apply.
pub fn render_repair(
    templates: &PromptTemplates,
    messages: &[ChatMessage],
    reply: &str,
    reason: &str,
    language: &str,
    max_reply_chars: usize,
) -> Vec<ChatMessage> {
    let mut out = messages.to_vec();
    out.push(ChatMessage::assistant(clip(reply, max_reply_chars)));
    out.push(ChatMessage::user(fill(
        &templates.repair_full_rewrite,
        &[("reason", reason), ("language", language)],
    )));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::{Candidate, CandidateId, Fitness, Language, ParamValues};

    fn elite(id: u64, text: &str, status: Status, diagnostics: &str, coords: Vec<usize>) -> Elite {
        let mut c = Candidate::seed(
            KernelSource::new(Language::OpenCl, "gemm", text).with_manifest("entry = \"gemm\"\n"),
            ParamValues::new(),
        );
        c.id = CandidateId(id);
        let evaluation = Evaluation::failed(status, diagnostics);
        Elite {
            fitness: Fitness::of(&evaluation),
            candidate: c,
            evaluation,
            descriptor: Descriptor::new(coords, "test"),
        }
    }

    #[test]
    fn renders_everything_and_hints() {
        let parent = elite(
            3,
            "__kernel void gemm() {}",
            Status::CompileError,
            "error: boom",
            vec![0, 0, 0],
        );
        let insp = [elite(
            5,
            "__kernel void gemm() { /* tiled */ }",
            Status::WrongValues,
            "",
            vec![2, 0, 0],
        )];
        let hints = ArchiveHints {
            space: Some(DescriptorSpace::kernel_default()),
            empty_frontier: vec![vec![1, 1, 0], vec![1, 0, 0]],
            recently_improved: vec![vec![0, 0, 0]],
            filled: vec![vec![0, 0, 0], vec![2, 0, 0]],
            metrics: kf_core::ArchiveMetrics {
                cells: 64,
                filled: 2,
                ..Default::default()
            },
        };
        let attempts = [Attempt {
            how: "full rewrite".into(),
            status: Status::ExtractionError,
            outcome: "not added".into(),
            diagnostics: "the reply has no fenced code block".into(),
        }];
        let task = Task::new("gemm")
            .with_description("C = A * B")
            .with_size("M", 64);
        let input = PromptInput {
            task: &task,
            device: Some(&DeviceFacts::unknown("cpu")),
            parent: &parent,
            inspirations: &insp,
            hints: &hints,
            attempts: &attempts,
            lessons: &["step 4: child #9 of #3 (full rewrite) -> compile_error (not added): error: use of undeclared identifier 'Btile'".into()],
        };
        let m = render_prompt(
            &PromptComponents::builtin(),
            &PromptTemplates::builtin(),
            &RenderLimits::default(),
            ReplyFormat::Either,
            &input,
        );
        assert_eq!(m.len(), 2);
        assert!(m[0].content.contains("## Optimisation philosophy"));
        let u = &m[1].content;
        for want in [
            "C = A * B",
            "M=64",
            "# Device",
            "```opencl\n__kernel void gemm() {}",
            "status: compile_error",
            "error: boom",
            "no fenced code block",
            "Candidate #5",
            "Increase memory_access from global to coalesced_vectorised",
            "2 of 64 cells",
            "<<<<<<< SEARCH",
            "`gemm`",
            "# Recent lessons from this run",
            "undeclared identifier 'Btile'",
            // Ideas come with their manifests.
            "## Candidate #5 (cell",
        ] {
            assert!(u.contains(want), "missing {want:?} in\n{u}");
        }
        // Tight limits drop inspirations first and keep the bound.
        let limits = RenderLimits {
            max_prompt_chars: m[0].content.len() + 1500,
            ..RenderLimits::default()
        };
        let small = render_prompt(
            &PromptComponents::builtin(),
            &PromptTemplates::builtin(),
            &limits,
            ReplyFormat::FullRewrite,
            &input,
        );
        assert!(small[0].content.len() + small[1].content.len() <= limits.max_prompt_chars);
        assert!(
            !small[1].content.contains("Candidate #5"),
            "{}",
            small[1].content
        );
        assert!(
            small[1].content.contains("Btile"),
            "the newest lesson stays"
        );
        let inspiration = u.split("## Candidate #5").nth(1).unwrap();
        assert!(
            inspiration.contains("```toml\nentry = \"gemm\""),
            "{inspiration}"
        );
    }

    #[test]
    fn hints_prefer_moving_up_one_level() {
        let hints = ArchiveHints {
            space: Some(DescriptorSpace::kernel_default()),
            empty_frontier: vec![vec![0, 0, 0], vec![1, 2, 0], vec![1, 1, 1]],
            ..ArchiveHints::default()
        };
        let lines = hint_lines(&hints, &[1, 1, 0], 1);
        assert_eq!(
            lines,
            ["Increase algorithm_structure from fused to single_pass: that cell of the archive is still empty."]
        );
        assert_eq!(hint_lines(&hints, &[1, 1, 0], 5).len(), 3);
    }

    #[test]
    fn summarize_keeps_errors_and_bounds() {
        let text: String = (0..500)
            .map(|i| {
                if i == 250 {
                    "x.cl:3: error: oops\n".to_owned()
                } else {
                    format!("line {i}\n")
                }
            })
            .collect();
        let s = summarize(&text, 300);
        assert!(s.len() <= 300, "{}", s.len());
        assert!(s.contains("error: oops"));
        assert!(s.contains("line 0"));
        assert!(s.contains("line 499"));
        assert!(s.contains("lines …]"));
        assert_eq!(summarize("short", 10), "short");
        let clipped = clip(&"é".repeat(100), 51);
        assert!(clipped.len() <= 51);
    }
}

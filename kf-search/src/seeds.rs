//! The offline search the examples and `kf search` run: which seeds and which mutator, per task
//! and kernel language.

use kf_core::emitter::{Emitter, Scheduler, SchedulerPolicy, SelectionEmitter};
use kf_core::{BoxMutator, Candidate, KernelSource, Language, Mutator, ParamValues};
use kf_eval::task::KernelTask;
use kf_mutate::{
    CellPredictor, MixMutator, ParamMutator, ParamMutatorConfig, StructuralMutator, TemplateLibrary,
};

use super::SearchError;
use crate::BASELINE_NOTE;
use kf_core::Origin;

mod families;

pub use families::family_templates;

/// Seeds and mutator for `task` in `language`, with no LLM:
///
/// - OpenCL C for a task without templates (a task file): the task's baseline and its own
///   further seeds (a task file's `seeds`, see [`seeds_for`]); parameter moves (add the
///   user's kernels as further seeds).
/// - OpenCL C: the task's naive baseline, the base variant of every template for the task and
///   OpenCL C's own starting points (gemm: the explicit-vector GEMM with a local A tile, see
///   [`kf_mutate::Template::starts`]); structural transformations of the templates (weight 3,
///   aimed at empty cells) and parameter moves (weight 1, two children each).
/// - SYCL: the same as OpenCL C, over the SYCL renderings of the templates (with SYCL's own
///   sub-group strategies), with SYCL's own starting points in place of OpenCL C's (gemm: the
///   sub-group GEMM).
/// - CUDA: the same over CUDA's GPU renderings of `gemm_blocked` and `softmax_group`, and for
///   GEMM also the shipped shared-memory tiled kernel.
///
/// Template seeds are fitted to the task's sizes ([`kf_mutate::Template::seeds_at`]). For
/// gemm, each start's neighbours along the cache blocking (K blocks on or off, N blocks) follow
/// the starts as seeds, so every start's blocking is measured on the processor at hand before
/// the search exploits one (see `start_neighbours`).
///
/// The first seed is the task baseline, whose throughput the report compares against; the
/// task's own further seeds ([`KernelTask::seed_kernels`]) follow it, before the templates'.
pub fn offline_search(
    task: &dyn KernelTask,
    language: Language,
) -> Result<(Vec<Candidate>, MixMutator), SearchError> {
    offline_search_with(task, language, None)
}

/// [`offline_search`] whose structural mutator aims at empty cells as `cells` predicts them
/// ([`StructuralMutator::predicting_cells`]); the shipped search passes its classifier's
/// prediction ([`crate::cell_predictor`]).
pub fn offline_search_with(
    task: &dyn KernelTask,
    language: Language,
    cells: Option<CellPredictor>,
) -> Result<(Vec<Candidate>, MixMutator), SearchError> {
    let parts = OfflineMutators::for_task(task, language, cells)?;
    let seeds = parts.seeds.clone();
    Ok((seeds, parts.mix()))
}

/// The offline search's parts before they are combined: its seeds, the structural mutator of
/// a task with kernel templates, the parameter moves, and any mutators added beside them (an
/// LLM's, say). [`OfflineMutators::mix`] combines them with fixed weights (`--scheduler
/// mix`); [`OfflineMutators::emitters`] gives each its emitters for a bandit scheduler
/// (`--scheduler bandit`, the default).
#[derive(Debug)]
pub struct OfflineMutators {
    /// The seeds: the task baseline first, then the task's own further seeds
    /// ([`KernelTask::seed_kernels`]), then each template's base variant (or the shipped tiled
    /// GEMM on CUDA).
    pub seeds: Vec<Candidate>,
    /// Structural transformations of the task's templates (none for a task without them).
    pub structural: Option<StructuralMutator>,
    /// Parameter moves.
    pub params: ParamMutator,
    /// Further mutators with their mix weight (an LLM mutator, say).
    pub extra: Vec<(BoxMutator, f64)>,
}

/// Mix weight of the structural mutator against the parameter moves' 1.
const STRUCTURAL_WEIGHT: f64 = 3.0;
/// The origin note of a seed the task names besides its baseline ([`KernelTask::seed_kernels`]).
const GENERATED_NOTE: &str = "generated";
/// How many of the fittest elites the parameter moves of an `elite/` emitter start from.
const ELITE_TOP: usize = 4;

impl OfflineMutators {
    /// The parts for `task` in `language` (see [`offline_search`]); the structural mutator
    /// aims at the cells `cells` predicts empty.
    pub fn for_task(
        task: &dyn KernelTask,
        language: Language,
        cells: Option<CellPredictor>,
    ) -> Result<Self, SearchError> {
        let name = task.name().to_string();
        // The built-in tasks have their templates; a task file that declares an operator
        // family gets the family's templates bound to its interface.
        let templates = match name.as_str() {
            "softmax" => Some((
                TemplateLibrary::softmax_for(language)?,
                StructuralMutator::softmax_for(language)?,
            )),
            "gemm" => Some((
                TemplateLibrary::builtin_for(language)?,
                StructuralMutator::builtin_for(language)?,
            )),
            _ => families::family_templates(task, language)?,
        };
        let templated = templates.is_some();
        // Every language has renderings of the templates (CUDA its own GPU ones: see
        // `TemplateLibrary::cuda`); a task file gets parameter moves over its seeds.
        let parts = if let Some((library, structural)) = templates {
            let structural = match cells {
                Some(cells) => structural.predicting_cells(cells),
                None => structural,
            };
            // Each template's seeds, fitted to the task's sizes (a start's K tile may be
            // deeper than a small problem's K).
            let sizes = task.describe().sizes;
            let mut extra = Vec::new();
            for template in library.for_task(&name) {
                extra.extend(template.seeds_at(&sizes)?);
            }
            // Every start is also measured one step along the axis that depends most on
            // the processor's caches (gemm: the cache blocking; softmax: streaming stores),
            // before the search exploits one.
            let neighbours = start_neighbours(&library, &name, &sizes)?;
            extra.extend(neighbours);
            if !matches!(name.as_str(), "gemm" | "softmax") {
                // A family's templates meet shapes they were not written for (a
                // matrix-vector product's one column): seeds no parameter values fit are left
                // out rather than spent on a launch that cannot happen.
                extra.retain(|(source, params)| {
                    kf_manifest::Manifest::from_kernel(source).is_ok_and(|manifest| {
                        kf_mutate::Feasibility::new(&manifest, &sizes, None).is_feasible(params)
                    })
                });
            }
            if language == Language::Cuda && name == "gemm" {
                // The shipped shared-memory tiled GEMM: a GPU starting point the scalar
                // template base is many moves away from.
                extra.push(tiled_gemm(language)?);
            }
            // Two children per parameter move, as per structural move: with four, parameter
            // moves (which stay in their parent's cell, and each child is tuned besides) took
            // 35 of 57 children in a default gemm run and the structural ones that reach new
            // cells 22.
            let params = ParamMutator::new().with_config(ParamMutatorConfig {
                children: 2,
                ..ParamMutatorConfig::default()
            });
            OfflineMutators {
                seeds: seeds_for(task, language, extra),
                structural: Some(structural),
                params,
                extra: Vec::new(),
            }
        } else {
            // A task file: parameter moves over the seeds' manifest params, and in OpenCL C
            // source-level transformations of its kernels (kf-transform) as structural moves.
            let transform = match cells {
                Some(cells) => kf_transform::TransformMutator::new().predicting_cells(cells),
                None => kf_transform::TransformMutator::new(),
            };
            let extra = match language {
                Language::OpenCl => vec![(BoxMutator::new(transform), STRUCTURAL_WEIGHT)],
                _ => Vec::new(),
            };
            OfflineMutators {
                seeds: seeds_for(task, language, Vec::new()),
                structural: None,
                params: ParamMutator::new(),
                extra,
            }
        };
        if parts.seeds.is_empty() && templated {
            return Err(SearchError::NoSeed {
                task: name,
                language,
            });
        }
        Ok(parts)
    }

    /// Adds a mutator beside the offline ones, with its weight in [`mix`](Self::mix); with
    /// [`emitters`](Self::emitters) it gets an emitter of its own.
    pub fn with<M: Mutator + 'static>(mut self, mutator: M, weight: f64) -> Self {
        self.extra.push((BoxMutator::new(mutator), weight));
        self
    }

    /// The fixed-weight mix: structural 3, parameter moves 1 (parameter moves alone without
    /// templates), the added mutators at their weights; parents from the archive's selection.
    pub fn mix(self) -> MixMutator {
        let mut mix = MixMutator::new();
        if let Some(structural) = self.structural {
            mix = mix.with(structural, STRUCTURAL_WEIGHT);
        }
        mix = mix.with(self.params, 1.0);
        for (mutator, weight) in self.extra {
            mix = mix.with(mutator, weight);
        }
        mix
    }

    /// Emitters for a bandit scheduler: the structural moves from the archive's frontier
    /// (elites with an empty neighbouring cell) and from the archive's own choice, the
    /// parameter moves from the fittest elites and from the archive's choice, and each added
    /// mutator from the archive's choice. The scheduler learns which of them pays (see
    /// [`kf_core::emitter::Scheduler`]).
    pub fn emitters(self, policy: SchedulerPolicy) -> Result<Scheduler, SearchError> {
        let mut emitters: Vec<Box<dyn Emitter>> = Vec::new();
        if let Some(structural) = self.structural {
            emitters.push(Box::new(SelectionEmitter::frontier(BoxMutator::new(
                structural.clone(),
            ))));
            emitters.push(Box::new(SelectionEmitter::archive(BoxMutator::new(
                structural,
            ))));
        }
        emitters.push(Box::new(SelectionEmitter::elite(
            BoxMutator::new(self.params.clone()),
            ELITE_TOP,
        )));
        emitters.push(Box::new(SelectionEmitter::archive(BoxMutator::new(
            self.params,
        ))));
        for (mutator, _) in self.extra {
            emitters.push(Box::new(SelectionEmitter::archive(mutator)));
        }
        Ok(Scheduler::new(emitters, policy)?)
    }
}

/// The cache-blocking settings a start's neighbours take (`KC`, `RB`, `CB` of `gemm_blocked`),
/// each one step from a start along the axis that depends most on the processor's caches:
/// a start blocked over K is also tried unblocked (a larger or better-prefetched L2 needs no
/// K blocks) and blocked over N as well (a smaller L2 or a larger problem), and a start
/// without K blocks is tried with the K blocks of the explicit-vector start.
const UNBLOCKED: &[(&str, i64)] = &[("KC", 0), ("RB", 1), ("CB", 1)];
const N_BLOCKED: &[(&str, i64)] = &[("CB", 2)];
const K_BLOCKED: &[(&str, i64)] = &[("KC", 256), ("RB", 2)];
/// The store settings a softmax start's neighbour takes (`STREAM`, `PREFETCH_ROW` of
/// `softmax_row`): non-temporal stores and prefetching pay when the rows do not stay in the
/// caches (4096 x 1024: 0.77 against 0.55–0.61 of the roofline with plain stores, see
/// kf-mutate's `softmax` module) and cost when they do (KernelBench's 128 x 4096, 2 MiB: the
/// float16 start at 65 us with them, 42 us without, under the evaluator), so a streaming start
/// is also tried with plain stores and no prefetch, and a plain one with streaming stores.
const CACHED_STORES: &[(&str, i64)] = &[("STREAM", 0), ("PREFETCH_ROW", 0)];
const STREAMED_STORES: &[(&str, i64)] = &[("STREAM", 1)];

/// Work-groups a start's launch should give the processor at the task's sizes. Below it a
/// start with `WG` work-items per group is also tried with one (see [`start_neighbours`]):
/// the float16 softmax start, 16 rows per work-item and 16 work-items per group, is one
/// work-group at KernelBench's 128 rows, which leaves every core but one idle. Sixteen keeps a
/// few groups per core on the CPUs this is measured on; the device is not known when the
/// seeds are made, so this does not scale with its compute units.
const MIN_START_GROUPS: usize = 16;

/// How many work-groups `params` launch at `sizes` (`None` when the launch cannot be
/// evaluated without a device, or leaves the work-group size to the runtime).
fn work_groups(
    manifest: &kf_manifest::Manifest,
    sizes: &indexmap::IndexMap<String, i64>,
    params: &ParamValues,
) -> Option<usize> {
    let symbols = kf_manifest::Symbols::new()
        .with_sizes(sizes)
        .with_params(params);
    let range = manifest.launch_range(&symbols).ok()?;
    let local = range.local?;
    Some(
        range
            .global
            .iter()
            .zip(local.iter())
            .map(|(g, l)| g / (*l).max(1))
            .product(),
    )
}

/// The moves to a start's neighbours along its template's cache-dependent axis, chosen by the
/// start's own values; empty for a template without such an axis.
fn cache_moves(
    params: &indexmap::IndexMap<String, Vec<kf_core::ParamValue>>,
    start: &ParamValues,
) -> Vec<&'static [(&'static str, i64)]> {
    let int = |name: &str| start.get(name).and_then(|v| v.as_i64()).unwrap_or(0);
    if ["KC", "RB", "CB"].iter().all(|p| params.contains_key(*p)) {
        if int("KC") > 0 {
            vec![UNBLOCKED, N_BLOCKED]
        } else {
            vec![K_BLOCKED]
        }
    } else if ["STREAM", "PREFETCH_ROW"]
        .iter()
        .all(|p| params.contains_key(*p))
    {
        if int("STREAM") == 1 {
            vec![CACHED_STORES]
        } else {
            vec![STREAMED_STORES]
        }
    } else {
        Vec::new()
    }
}

/// The neighbours of every template start ([`kf_mutate::Template::starts`], fitted to
/// `sizes`) for `task` along its template's cache-dependent axis (see [`cache_moves`]):
/// evaluated as seeds, after the starts, so the search has measured each start's cache
/// behaviour on this processor and at this size before it exploits one. A template without
/// such an axis has none. A start that leaves fewer than [`MIN_START_GROUPS`] work-groups at
/// `sizes` is first tried with one work-item per group (`WG=1`), and its cache neighbours are
/// taken from that form. A neighbour the sizes rule out, or one equal to a seed, is left out.
fn start_neighbours(
    library: &TemplateLibrary,
    task: &str,
    sizes: &indexmap::IndexMap<String, i64>,
) -> Result<Vec<(KernelSource, ParamValues)>, SearchError> {
    let mut neighbours: Vec<(KernelSource, ParamValues)> = Vec::new();
    for template in library.for_task(task) {
        let seeds = template.seeds_at(sizes)?;
        // The base variant (first) is the search's scalar origin, not a start.
        for (source, start) in seeds.iter().skip(1) {
            let Ok(manifest) = kf_manifest::Manifest::from_kernel(source) else {
                continue;
            };
            let space = kf_mutate::Feasibility::new(&manifest, sizes, None);
            let mut moved = Vec::new();
            // A start that leaves too few work-groups is tried with one work-item per group,
            // and its cache neighbours are taken from that form.
            let mut origin = start.clone();
            let starved =
                work_groups(&manifest, sizes, start).is_some_and(|g| g < MIN_START_GROUPS);
            if starved
                && start
                    .get("WG")
                    .and_then(|v| v.as_i64())
                    .is_some_and(|wg| wg > 1)
            {
                origin.set("WG", 1);
                if space.is_feasible(&origin) {
                    moved.push(origin.clone());
                } else {
                    origin = start.clone();
                }
            }
            for changes in cache_moves(&manifest.params, &origin) {
                let mut params = origin.clone();
                for (name, value) in changes {
                    params.set(*name, *value);
                }
                moved.push(params);
            }
            for params in moved {
                let known = seeds
                    .iter()
                    .chain(neighbours.iter())
                    .any(|(s, p)| s == source && p.canonical_key() == params.canonical_key());
                if !known && space.is_feasible(&params) {
                    neighbours.push((source.clone(), params));
                }
            }
        }
    }
    Ok(neighbours)
}

/// The shipped tiled GEMM in `language` (from kf-eval's kernels), with its manifest's first
/// parameter values.
fn tiled_gemm(language: Language) -> Result<(KernelSource, ParamValues), SearchError> {
    let shipped =
        kf_eval::kernels::shipped("gemm_tiled", language).ok_or(SearchError::NoShippedKernel {
            kernel: "gemm_tiled",
            language,
        })?;
    let manifest = shipped.manifest()?;
    Ok((
        manifest.kernel_source(shipped.source),
        manifest.default_params(),
    ))
}

/// The seeds of every template of `library` for `task` ([`kf_mutate::Template::seeds`]): its
/// base variant with its manifest's first parameter values, then its language's own starting
/// points; the structural mutator transforms them.
pub fn template_seeds(
    library: &TemplateLibrary,
    task: &str,
) -> Result<Vec<(KernelSource, ParamValues)>, SearchError> {
    let mut seeds = Vec::new();
    for template in library.for_task(task) {
        seeds.extend(template.seeds()?);
    }
    Ok(seeds)
}

/// The task's baseline as the first seed (note [`BASELINE_NOTE`]), then the task's own further
/// seeds ([`KernelTask::seed_kernels`]: a task file's `seeds`, the kernels the KernelBench
/// importer generates from the operator's graph; note `generated`), each with its manifest's
/// first parameter values; then the `extra` seeds with the values given (note `template`).
pub fn seeds_for(
    task: &dyn KernelTask,
    language: Language,
    extra: Vec<(KernelSource, ParamValues)>,
) -> Vec<Candidate> {
    let mut seeds = Vec::new();
    let with_defaults = |kernel: KernelSource, note: &str| {
        let params = kf_manifest::Manifest::from_kernel(&kernel)
            .map(|m| m.default_params())
            .unwrap_or_default();
        let mut c = Candidate::seed(kernel, params);
        c.origin = Origin::mutator("seed").with_note(note);
        c
    };
    if let Some(base) = task.baseline(language) {
        seeds.push(with_defaults(base, BASELINE_NOTE));
    }
    for kernel in task.seed_kernels(language) {
        seeds.push(with_defaults(kernel, GENERATED_NOTE));
    }
    for (source, params) in extra {
        let mut c = Candidate::seed(source, params);
        c.origin = Origin::mutator("seed").with_note("template");
        seeds.push(c);
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SYCL searches the templates as OpenCL does: the same seeds (the baseline, then each
    /// template's base variant, in SYCL), each language's own starting points (gemm: SYCL's
    /// sub-group GEMM; OpenCL C's explicit-vector GEMMs with and without a local A tile;
    /// softmax: OpenCL C's float16 row softmax), and a structural mutator beside the parameter
    /// moves.
    #[test]
    fn sycl_gets_the_templates_like_opencl() {
        for task in ["gemm", "softmax"] {
            let sizes = kf_eval::task::parse_sizes("").unwrap();
            let task = kf_eval::task::builtin_task(task, &sizes).unwrap();
            let (cl_seeds, cl_mix) = offline_search(task.as_ref(), Language::OpenCl).unwrap();
            let (seeds, mix) = offline_search(task.as_ref(), Language::Sycl).unwrap();
            assert_eq!(mix.names(), cl_mix.names());
            assert!(mix.names().contains(&"structural"));
            // OpenCL C has one start more for either task (SYCL has no such start measured):
            // for gemm its float16 register blocks without local memory (with the start's
            // two neighbours: unblocked and blocked over N), for softmax its float16 row
            // softmax (with its neighbour: plain stores, no prefetch).
            let cl_only = if task.name() == "gemm" { 3 } else { 2 };
            assert_eq!(seeds.len() + cl_only, cl_seeds.len(), "{}", task.name());
            assert!(seeds.iter().all(|s| s.source.language == Language::Sycl));
        }
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let gemm = kf_eval::task::builtin_task("gemm", &sizes).unwrap();
        // Each language's own start, found by what only its source has: (TM, TN, WG1).
        for (language, marker, block) in [
            (Language::Sycl, "group_broadcast", (8, 1, 32)),
            (Language::OpenCl, "__local float As", (16, 2, 4)),
        ] {
            let (seeds, _) = offline_search(gemm.as_ref(), language).unwrap();
            let start = seeds
                .iter()
                .find(|s| s.source.text.contains(marker))
                .unwrap_or_else(|| panic!("no {language} seed with {marker}"));
            let int = |name: &str| start.params.get(name).and_then(|v| v.as_i64());
            assert_eq!(
                (int("TM"), int("TN"), int("WG1")),
                (Some(block.0), Some(block.1), Some(block.2)),
                "{language}"
            );
        }
    }

    /// Each gemm start is followed by its neighbours along the cache blocking: the
    /// explicit-vector start (K blocked) unblocked and blocked over N, the local-A start (not
    /// blocked) with K blocks; at a size the blocks do not fit, the neighbour is left out.
    #[test]
    fn gemm_starts_come_with_their_cache_blocking_neighbours() {
        let blocking = |seeds: &[Candidate]| -> Vec<(bool, i64, i64, i64)> {
            seeds
                .iter()
                .filter(|s| s.params.get("KC").is_some())
                .map(|s| {
                    let int = |n: &str| s.params.get(n).and_then(|v| v.as_i64()).unwrap_or(-1);
                    (
                        s.source.text.contains("__local float As"),
                        int("KC"),
                        int("RB"),
                        int("CB"),
                    )
                })
                .collect()
        };
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let gemm = kf_eval::task::builtin_task("gemm", &sizes).unwrap();
        let (seeds, _) = offline_search(gemm.as_ref(), Language::OpenCl).unwrap();
        let seen = blocking(&seeds);
        for expected in [
            (true, 0, 1, 1),
            (true, 256, 2, 1),
            (false, 256, 2, 1),
            (false, 0, 1, 1),
            (false, 256, 2, 2),
        ] {
            assert!(seen.contains(&expected), "{expected:?} not in {seen:?}");
        }
        // The neighbours come after the starts: the first seeds are the ones before.
        let starts = seeds
            .iter()
            .position(|s| s.params.get("CB").and_then(|v| v.as_i64()) == Some(2))
            .unwrap();
        assert!(starts >= 4, "{starts}");
        // At 64 x 64 x 64 no K block of 256 fits: no neighbour is blocked.
        let small = kf_eval::task::parse_sizes("M=64,N=64,K=64").unwrap();
        let gemm = kf_eval::task::builtin_task("gemm", &small).unwrap();
        let (seeds, _) = offline_search(gemm.as_ref(), Language::OpenCl).unwrap();
        assert!(blocking(&seeds)
            .iter()
            .all(|(_, kc, _, cb)| *kc <= 64 && *cb == 1));
    }

    /// The float16 softmax start (streaming stores) is followed by its neighbour with plain
    /// stores and no prefetch, for the built-in task and for a task file of the softmax family
    /// alike, and the neighbour differs from its start in those two parameters only.
    #[test]
    fn softmax_start_comes_with_its_plain_store_neighbour() {
        // Each seed with store settings: its source, STREAM, PREFETCH_ROW and the rest of its
        // values (those two set to 0).
        let stores = |seeds: &[Candidate]| -> Vec<(String, i64, i64, String)> {
            seeds
                .iter()
                .filter(|s| s.params.get("STREAM").is_some() && s.params.get("RPI").is_some())
                .map(|s| {
                    let int = |n: &str| s.params.get(n).and_then(|v| v.as_i64()).unwrap_or(-1);
                    let mut rest = s.params.clone();
                    rest.set("STREAM", 0);
                    rest.set("PREFETCH_ROW", 0);
                    (
                        s.source.text.to_string(),
                        int("STREAM"),
                        int("PREFETCH_ROW"),
                        rest.canonical_key(),
                    )
                })
                .collect()
        };
        // Some streaming seed is followed by a seed of the same source and values but for
        // plain stores and no prefetch.
        let has_neighbour = |seen: &[(String, i64, i64, String)]| {
            seen.iter()
                .enumerate()
                .any(|(i, (source, stream, _, rest))| {
                    *stream == 1
                        && seen[i + 1..]
                            .iter()
                            .any(|(s, st, pf, r)| s == source && *st == 0 && *pf == 0 && r == rest)
                })
        };
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let softmax = kf_eval::task::builtin_task("softmax", &sizes).unwrap();
        let (seeds, _) = offline_search(softmax.as_ref(), Language::OpenCl).unwrap();
        let seen = stores(&seeds);
        assert!(
            has_neighbour(&seen),
            "{:?}",
            seen.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>()
        );
        // At the default 4096 rows the start has work-groups enough: no `WG=1` form.
        assert!(!seeds
            .iter()
            .any(|s| s.params.get("RPI").and_then(|v| v.as_i64()) == Some(16)
                && s.params.get("WG").and_then(|v| v.as_i64()) == Some(1)));
        // A task file of the softmax family (KernelBench's 23_Softmax, 128 x 4096) gets the
        // same neighbour for its bound start, taken from its one-work-item-per-group form: 16
        // rows per work-item in groups of 16 would be one work-group for its 128 rows.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tasks/kernelbench/23_Softmax/task.toml");
        let file = kf_eval::task::file::TaskFile::load(&path).unwrap();
        let task = kf_eval::task::file::FileTask::new(file, &sizes).unwrap();
        let (seeds, _) = offline_search(&task, Language::OpenCl).unwrap();
        let seen = stores(&seeds);
        assert!(
            has_neighbour(&seen),
            "{:?}",
            seen.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>()
        );
        let wide_rows = |wg: i64, stream: i64| {
            seeds.iter().any(|s| {
                let int = |n: &str| s.params.get(n).and_then(|v| v.as_i64());
                int("RPI") == Some(16) && int("WG") == Some(wg) && int("STREAM") == Some(stream)
            })
        };
        assert!(wide_rows(16, 1) && wide_rows(1, 1) && wide_rows(1, 0));
        assert!(
            !wide_rows(16, 0),
            "no cache neighbour of the starved start itself"
        );
    }

    /// CUDA searches its GPU renderings of the templates with a structural mutator; its gemm
    /// seeds add the shipped shared-memory tiled kernel.
    #[test]
    fn cuda_gets_its_gpu_templates() {
        for (task, seeds_at_least) in [("gemm", 3), ("softmax", 2)] {
            let sizes = kf_eval::task::parse_sizes("").unwrap();
            let task = kf_eval::task::builtin_task(task, &sizes).unwrap();
            let (seeds, mix) = offline_search(task.as_ref(), Language::Cuda).unwrap();
            assert!(mix.names().contains(&"structural"));
            assert!(seeds.len() >= seeds_at_least, "{} seeds", seeds.len());
            assert!(seeds.iter().all(|s| s.source.language == Language::Cuda));
            assert!(seeds
                .iter()
                .any(|s| kf_mutate::variant_marker(&s.source).is_some()));
        }
    }

    /// The bandit's emitters: structural moves from the frontier and from the archive's
    /// choice, parameter moves from the fittest and from the archive's choice, an added
    /// mutator on its own; CUDA as OpenCL, with its GPU renderings of the templates.
    #[test]
    fn emitters_cover_every_offline_mutator_and_the_added_ones() {
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let gemm = kf_eval::task::builtin_task("gemm", &sizes).unwrap();
        let names = |parts: OfflineMutators| -> Vec<String> {
            let scheduler = parts.emitters(SchedulerPolicy::default()).unwrap();
            scheduler
                .emitters()
                .iter()
                .map(|e| e.name().to_owned())
                .collect()
        };
        let parts = OfflineMutators::for_task(gemm.as_ref(), Language::OpenCl, None).unwrap();
        assert_eq!(
            names(parts),
            [
                "frontier/structural",
                "archive/structural",
                "elite/param",
                "archive/param"
            ]
        );
        let extra = ParamMutator::new().named("llm");
        let parts = OfflineMutators::for_task(gemm.as_ref(), Language::Cuda, None)
            .unwrap()
            .with(extra, 2.0);
        assert_eq!(
            names(parts),
            [
                "frontier/structural",
                "archive/structural",
                "elite/param",
                "archive/param",
                "archive/llm"
            ]
        );
    }

    /// The fixed mix is the search before emitters: structural 3 : parameter moves 1, the
    /// same seeds as `offline_search`.
    #[test]
    fn the_mix_keeps_the_offline_search() {
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let softmax = kf_eval::task::builtin_task("softmax", &sizes).unwrap();
        let parts = OfflineMutators::for_task(softmax.as_ref(), Language::OpenCl, None).unwrap();
        let seeds = parts.seeds.len();
        let mix = parts.mix();
        assert_eq!(mix.names(), ["structural", "param"]);
        let (offline_seeds, offline) = offline_search(softmax.as_ref(), Language::OpenCl).unwrap();
        assert_eq!((offline.names(), offline_seeds.len()), (mix.names(), seeds));
    }

    /// A task file's `seeds` follow its baseline: the baseline first, then each generated
    /// seed (note `generated`) at its manifest's first parameter values, then the extra
    /// (template) seeds; a language the seeds are not written in gets none of them.
    #[test]
    fn a_task_file_s_seeds_follow_its_baseline() {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples/scaled_swish");
        let dir = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(&example).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
        let path = dir.path().join("scaled_swish.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let args = text.find("args = ").unwrap();
        let (head, tail) = text.split_at(args);
        std::fs::write(
            &path,
            format!("{head}seeds = [\"scaled_swish_fast.toml\"]\n{tail}"),
        )
        .unwrap();
        let file = kf_eval::task::file::TaskFile::load(&path).unwrap();
        let sizes = kf_eval::task::parse_sizes("").unwrap();
        let task = kf_eval::task::file::FileTask::new(file, &sizes).unwrap();
        let template = task.baseline(Language::OpenCl).unwrap();
        let mut template_params = ParamValues::new();
        template_params.set("WG", 64);
        let seeds = seeds_for(
            &task,
            Language::OpenCl,
            vec![(template, template_params.clone())],
        );
        let notes: Vec<&str> = seeds.iter().map(|s| s.origin.note.as_str()).collect();
        assert_eq!(notes, [BASELINE_NOTE, "generated", "template"]);
        assert!(seeds.iter().all(|s| s.origin.mutator == "seed"));
        assert!(seeds[1].source.text.contains("TILE"), "the fast kernel");
        let int = |name: &str| seeds[1].params.get(name).and_then(|v| v.as_i64());
        assert_eq!((int("TILE"), int("WG")), (Some(1), Some(16)));
        assert_eq!(
            seeds[2].params.canonical_key(),
            template_params.canonical_key()
        );
        // No CUDA baseline and no CUDA seeds.
        assert!(seeds_for(&task, Language::Cuda, Vec::new()).is_empty());
    }
}

//! Compilation: builds on a big stack, the in-memory and on-disk bundle caches, kernel
//! facts, and compile errors.

use kf_backend_common::compile_cache::record_load_seconds;
use kf_backend_common::compile_input::SourceRules;
use kf_backend_common::CacheSlot;

use super::*;
use crate::cache::KernelBundle;

/// What this backend compiles: SYCL free-function kernels, looked up by a (namespace
/// qualified) name.
const SOURCE_RULES: SourceRules = SourceRules {
    language: Language::Sycl,
    compiles: "SYCL free-function kernels",
    backend: "SYCL",
    entry_ok: is_entry_name,
    entry_is: "a (namespace-qualified) C identifier",
};

/// This backend's place for one kernel in its on-disk compile cache.
type Slot<'a> = CacheSlot<'a, KernelBundle>;

/// Kernel facts from the shim (`kfs_program_info`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct KernelInfo {
    num_args: Option<u32>,
    work_group_size: Option<u64>,
    private_mem_size: Option<u64>,
    preferred_work_group_size_multiple: Option<u64>,
    max_sub_group_size: Option<u32>,
    compile_sub_group_size: Option<u32>,
}

impl SyclBackend {
    pub(super) fn programs(&self) -> MutexGuard<'_, HashMap<String, Arc<KernelInner>>> {
        self.programs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn remember(&self, key: &str, kernel: &Arc<KernelInner>) {
        let mut programs = self.programs();
        if programs.len() >= MAX_PROGRAMS_IN_MEMORY {
            programs.clear();
        }
        programs.insert(key.to_owned(), Arc::clone(kernel));
    }

    pub(super) fn kernel_info(&self, program: &ffi::Program) -> KernelInfo {
        self.queue
            .program_info(program)
            .ok()
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default()
    }

    /// Builds (no cache involved): extern "C" kernels plainly (serialisable), others and
    /// kernels not found that way through `registered_names`.
    pub(super) fn build_program(
        &self,
        source: &PreparedSource,
        options: &[String],
        entry: &str,
    ) -> Result<(ffi::Built, bool), SyclError> {
        let extern_c = mentions_extern_c(&source.text);
        let mut registered = !extern_c;
        let mut result = self.build_on_big_stack(source, options, entry, registered)?;
        if extern_c {
            if let Err(f) = &result {
                if f.code == KFS_COMPILE && f.message.starts_with("no kernel named") {
                    // Not an extern "C" kernel after all: look it up by its C++ name. (When it
                    // does not exist, the compiler then says so with a diagnostic.)
                    registered = true;
                    result = self.build_on_big_stack(source, options, entry, true)?;
                }
            }
        }
        match result {
            Ok(mut built) => {
                built.log = source.kernel_lines(&built.log);
                Ok((built, registered))
            }
            Err(mut f) if f.code == KFS_COMPILE => {
                f.message = source.kernel_lines(&f.message);
                Err(compile_failure(entry, f))
            }
            Err(f) => Err(f.into_error("building SYCL source")),
        }
    }

    /// Runs one build on a thread of its own with [`BUILD_STACK_BYTES`] of stack: the runtime
    /// compiles on the calling thread (clang, deep recursion over `sycl.hpp`), which overflows
    /// the 2 MiB stacks of Rust's spawned threads (test threads, thread pools).
    pub(super) fn build_on_big_stack(
        &self,
        source: &PreparedSource,
        options: &[String],
        entry: &str,
        register_name: bool,
    ) -> Result<Result<ffi::Built, Failure>, SyclError> {
        let spawn_error = |e: std::io::Error| SyclError::Runtime {
            operation: "starting the SYCL build thread",
            message: e.to_string(),
        };
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name("kf-sycl-build".into())
                .stack_size(BUILD_STACK_BYTES)
                .spawn_scoped(scope, || {
                    let include = source
                        .params_header
                        .as_deref()
                        .map(|header| (PARAMS_HEADER, header));
                    self.queue
                        .build(&source.text, include, options, entry, register_name)
                })
                .map_err(spawn_error)?;
            handle.join().map_err(|_| SyclError::Runtime {
                operation: "building SYCL source",
                message: "the build thread panicked".into(),
            })
        })
    }
}

/// A compile error from a failed build: the runtime's message is clang's diagnostics.
pub(super) fn compile_failure(entry: &str, failure: Failure) -> SyclError {
    let log = failure.message;
    let missing_entry = log.contains(&format!("undeclared identifier '{entry}'"))
        && log.contains(&format!("{{\"{entry}\","));
    let reason = if log.starts_with("no kernel named") {
        log.lines().next().unwrap_or("").to_owned()
    } else if missing_entry {
        format!(
            "no kernel named `{entry}`: the source declares no such free function (kernels are \
             found by name: declare the entry point extern \"C\" or give its C++ name)"
        )
    } else {
        let first_error = log
            .lines()
            .find(|l| l.contains("error:"))
            .map(|l| l.trim().to_owned());
        match first_error {
            Some(line) => format!("device compilation failed: {line}"),
            None => log
                .lines()
                .next()
                .unwrap_or("build failed")
                .trim()
                .to_owned(),
        }
    };
    SyclError::Compile {
        entry: entry.to_owned(),
        log: if log.trim().is_empty() {
            reason.clone()
        } else {
            log
        },
        reason,
    }
}

pub(super) fn compile_error(entry: &str, reason: impl Into<String>) -> SyclError {
    let reason = reason.into();
    SyclError::Compile {
        entry: entry.to_owned(),
        log: reason.clone(),
        reason,
    }
}

/// The variable that turns the precompiled preamble off (`KF_SYCL_NO_PCH=1`).
pub const NO_PCH_ENV: &str = "KF_SYCL_NO_PCH";

impl SyclBackend {
    /// The runtime compiler's option for a precompiled [`PREAMBLE`](super::rewrite::PREAMBLE):
    /// kept on disk in the compile cache's `pch/` folder (shared by every worker process and
    /// later runs), or in memory for this process without a cache; `None` when
    /// [`NO_PCH_ENV`] is set. Not part of the cache key: it changes how fast a kernel is
    /// built, not what is built.
    fn precompiled_preamble_option(&self) -> Option<String> {
        if std::env::var_os(NO_PCH_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
            return None;
        }
        let dir = self.cache.as_ref().map(|c| c.dir().join("pch"));
        Some(match dir {
            Some(dir) if std::fs::create_dir_all(&dir).is_ok() => {
                format!("--persistent-auto-pch={}", dir.display())
            }
            _ => "--auto-pch".to_owned(),
        })
    }

    pub(super) fn compile_kernel(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<SyclKernel>, SyclError> {
        let entry = source.entry.as_str();
        check_source(source)?;
        let prepared = Self::prepare_source(&source.text, params)
            .map_err(|reason| compile_error(entry, reason.to_string()))?;
        let build_options = Self::build_options(options)
            .map_err(|reason| compile_error(entry, reason.to_string()))?;
        let keyed_text = match &prepared.params_header {
            Some(header) => format!("{header}\0{}", prepared.text),
            None => prepared.text.clone(),
        };
        let key = BundleCache::key(&keyed_text, &build_options, entry, &self.facts);
        let started = Instant::now();
        if let Some(inner) = self.programs().get(&key).cloned() {
            return Ok(cache_hit(&inner, "memory", started));
        }
        let base_facts = base_facts(&key, &build_options, params);
        let slot = Slot::new(self.cache.as_deref(), &key);
        if let Some(inner) = self.load_from_disk(&slot, entry, &base_facts) {
            self.remember(&key, &inner);
            return Ok(cache_hit(&inner, "disk", started));
        }
        let (built, registered) = self.build_with_preamble(&prepared, &build_options, entry)?;
        let build_seconds = started.elapsed().as_secs_f64();
        let info = self.kernel_info(&built.program);
        let mut facts = base_facts;
        fill_facts(&mut facts, &info);
        facts.compile_seconds = Some(build_seconds);
        facts.extra.insert(
            "entry_lookup".into(),
            if registered {
                "registered C++ name"
            } else {
                "extern \"C\" name"
            }
            .into(),
        );
        self.store_bundle(&slot, &built, &info, build_seconds, registered, &mut facts);
        let inner = Arc::new(KernelInner {
            program: built.program,
            entry: entry.to_owned(),
            num_args: info.num_args,
            max_work_group_size: info.work_group_size,
            log: built.log,
            facts: facts.clone(),
        });
        self.remember(&key, &inner);
        Ok(Compiled {
            log: inner.log.clone(),
            kernel: SyclKernel { inner },
            facts,
        })
    }

    /// The kernel from the bundle cached on disk in `slot`, with `base_facts` and what the
    /// entry recorded; `None` when there is none, or the runtime cannot load it (the entry is
    /// then dropped).
    fn load_from_disk(
        &self,
        slot: &Slot<'_>,
        entry: &str,
        base_facts: &CompilerFacts,
    ) -> Option<Arc<KernelInner>> {
        let (bundle, meta) = slot.lookup()?;
        let Ok(program) = self.queue.load(&bundle, entry) else {
            slot.discard();
            return None;
        };
        let info = self.kernel_info(&program);
        let mut facts = base_facts.clone();
        fill_facts(&mut facts, &info);
        slot.record_hit(&mut facts);
        if let Some(s) = meta.build_seconds {
            facts
                .extra
                .insert("original_build_seconds".into(), format!("{s:.3}"));
        }
        Some(Arc::new(KernelInner {
            program,
            entry: entry.to_owned(),
            num_args: meta.num_args.or(info.num_args),
            max_work_group_size: info.work_group_size,
            log: meta.log,
            facts,
        }))
    }

    /// Builds with the precompiled preamble when there is one, and without it when the
    /// runtime's compiler lacks (or fails at) precompiled preambles; the build and whether
    /// the entry was found by its registered C++ name.
    fn build_with_preamble(
        &self,
        prepared: &PreparedSource,
        build_options: &[String],
        entry: &str,
    ) -> Result<(ffi::Built, bool), SyclError> {
        let Some(pch) = self.precompiled_preamble_option() else {
            return self.build_program(prepared, build_options, entry);
        };
        let with_pch: Vec<String> = build_options.iter().cloned().chain([pch]).collect();
        match self.build_program(prepared, &with_pch, entry) {
            Err(e) if e.to_string().to_ascii_lowercase().contains("pch") => {
                self.build_program(prepared, build_options, entry)
            }
            other => other,
        }
    }

    /// Stores the built bundle in the disk cache, when there is one and the runtime can
    /// serialise it (not for a kernel found by its registered name); `facts` get the file it
    /// went to (as the other backends say it: what a compile worker ships, and how `kf tune`'s
    /// compile-ahead knows a later load will hit), or why it did not.
    fn store_bundle(
        &self,
        slot: &Slot<'_>,
        built: &ffi::Built,
        info: &KernelInfo,
        build_seconds: f64,
        registered: bool,
        facts: &mut CompilerFacts,
    ) {
        if self.cache.is_none() {
            return;
        }
        if registered {
            facts.extra.insert(
                "cache_note".into(),
                "the kernel is not extern \"C\": this SYCL runtime cannot serialise bundles \
                 built with registered names, so it is cached in memory only"
                    .into(),
            );
            return;
        }
        let meta = EntryMeta {
            num_args: info.num_args,
            log: built.log.clone(),
            build_seconds: Some(build_seconds),
        };
        slot.store(
            || {
                let bundle = built.program.content().map_err(|f| f.message)?;
                Ok::<_, String>((bundle, meta))
            },
            facts,
        );
    }
}

/// Refuses what the runtime's compiler cannot take: another language, an entry point that is
/// not a (namespace-qualified) C identifier, a NUL byte, a construct known to crash it.
fn check_source(source: &KernelSource) -> Result<(), SyclError> {
    let entry = source.entry.as_str();
    SOURCE_RULES
        .check(source)
        .map_err(|rejected| compile_error(entry, rejected.to_string()))?;
    if let Some(why) = known_crasher(&source.text) {
        return Err(compile_error(entry, why));
    }
    Ok(())
}

/// A kernel kept built (in memory or on disk, `how`), as a cache hit with its load time.
fn cache_hit(inner: &Arc<KernelInner>, how: &str, started: Instant) -> Compiled<SyclKernel> {
    let mut facts = inner.facts.clone();
    facts.cache_hit = true;
    facts.compile_seconds = Some(0.0);
    facts.extra.insert("cache".into(), how.to_owned());
    record_load_seconds(&mut facts, started);
    Compiled {
        kernel: SyclKernel {
            inner: Arc::clone(inner),
        },
        log: inner.log.clone(),
        facts,
    }
}

/// The facts every compile of this kernel carries, whichever way it is made: its cache key,
/// build options, and where the definitions went.
fn base_facts(key: &str, build_options: &[String], params: &ParamValues) -> CompilerFacts {
    let mut facts = CompilerFacts::default();
    facts.extra.insert("cache_key".into(), key.to_owned());
    facts
        .extra
        .insert("build_options".into(), build_options.join(" "));
    if !params.is_empty() {
        facts.extra.insert(
            "definitions".into(),
            format!(
                "#define lines in the virtual header {PARAMS_HEADER}, included after \
                 <sycl/sycl.hpp> (see SyclBackend::prepare_source)"
            ),
        );
    }
    facts
}

pub(super) fn fill_facts(facts: &mut CompilerFacts, info: &KernelInfo) {
    facts.private_mem_bytes = info.private_mem_size;
    facts.max_work_group_size = info.work_group_size;
    let mut extra = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            facts.extra.insert(k.to_owned(), v);
        }
    };
    extra(
        "preferred_work_group_size_multiple",
        info.preferred_work_group_size_multiple
            .map(|v| v.to_string()),
    );
    extra(
        "max_sub_group_size",
        info.max_sub_group_size.map(|v| v.to_string()),
    );
    extra(
        "compile_sub_group_size",
        info.compile_sub_group_size
            .filter(|v| *v > 0)
            .map(|v| v.to_string()),
    );
    extra("runtime_num_args", info.num_args.map(|v| v.to_string()));
}

//! Compilation: NVRTC options and definitions, the compile cache, loading modules.

use kf_backend_common::compile_cache::record_load_seconds;
use kf_backend_common::compile_input::{
    check_flags, define_lines, is_plain_entry_name, SourceRules,
};
use kf_backend_common::{CacheSlot, CompileInputError};

use crate::cache::NvrtcOutput;

use super::*;

impl CudaBackend {
    /// The NVRTC options for `options` at `arch`: the architecture, `--ptxas-options=-v` (for
    /// real architectures, so that resource usage is reported), the runtime's include
    /// directories, then the flags verbatim. Fails on a flag with a NUL byte.
    pub fn nvrtc_options(
        &self,
        arch: &Arch,
        options: &CompileOptions,
    ) -> Result<Vec<String>, CompileInputError> {
        let mut out = vec![format!("--gpu-architecture={arch}")];
        if !arch.is_virtual {
            out.push("--ptxas-options=-v".into());
        }
        for dir in &self.runtime.include_dirs {
            out.push(format!("--include-path={}", dir.display()));
        }
        check_flags(&options.flags)?;
        out.extend(options.flags.iter().cloned());
        Ok(out)
    }

    /// The text NVRTC compiles: one `#define NAME value` per parameter, then
    /// `#line 1 "<file>"` so that diagnostics keep the kernel's own line numbers, then the
    /// source. Definitions go into the text rather than `-D` options because NVRTC applies
    /// `-D` to its implicitly included builtin header too, where a parameter named `T` or `N`
    /// breaks its templates; in the text they behave exactly as `nvcc -D` does for the kernel.
    /// Fails on a parameter name that is not a C identifier, or a value that is empty or holds
    /// a line break or NUL byte.
    pub fn with_definitions(
        file: &str,
        text: &str,
        params: &ParamValues,
    ) -> Result<String, CompileInputError> {
        let mut out = String::with_capacity(text.len() + 32 * params.len() + 32);
        out.push_str(&define_lines(
            params,
            "definitions cannot be empty or hold line breaks or NUL bytes",
        )?);
        out.push_str(&format!("#line 1 \"{file}\"\n"));
        out.push_str(text);
        Ok(out)
    }
}

/// What this backend compiles: CUDA C++, with a kernel looked up by its plain name.
const SOURCE_RULES: SourceRules = SourceRules {
    language: Language::Cuda,
    compiles: "CUDA C++",
    backend: "CUDA",
    entry_ok: is_plain_entry_name,
    entry_is: "a C identifier",
};

impl CudaBackend {
    pub(super) fn compile_inner(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<CudaKernel>, CudaError> {
        let input = self.compile_input(source, params, options)?;
        let entry = input.entry;
        let started = Instant::now();
        let mut facts = CompilerFacts::default();
        let build = self.cached_or_built(&input, &mut facts)?;
        let (symbol, params_bytes) = resolve_symbol(&build, entry)?;
        record_resources(&mut facts, &build.log, &symbol);
        self.record_build(&mut facts, &input, &build, &symbol, params);
        let loaded = match &self.gpu {
            Some(gpu) => {
                let loaded = self.load(gpu, &build, entry, &symbol, &input.arch)?;
                record_loaded(&mut facts, &loaded, started);
                Some(loaded)
            }
            None => None,
        };
        Ok(Compiled {
            kernel: CudaKernel {
                entry: entry.to_owned(),
                symbol,
                params: params_bytes,
                arch: input.arch,
                summary: summary(&facts),
                loaded,
                dynamic_shared: AtomicU64::new(DEFAULT_DYNAMIC_SHARED),
            },
            log: build.log,
            facts,
        })
    }

    /// Checks what to compile and turns it into NVRTC's input: the architecture, the text with
    /// its definitions, the options and the cache key. Each refusal is a compile error.
    fn compile_input<'a>(
        &self,
        source: &'a KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<CompileInput<'a>, CudaError> {
        let entry = source.entry.as_str();
        let refuse = |reason: String| CudaError::compile(entry, reason, "");
        SOURCE_RULES
            .check(source)
            .map_err(|rejected| refuse(rejected.to_string()))?;
        let arch = match &options.arch {
            Some(text) => text
                .parse::<Arch>()
                .map_err(|reason| refuse(reason.to_string()))?,
            None => self.arch.clone(),
        };
        check_arch(self.nvrtc, &arch).map_err(|reason| refuse(reason.to_string()))?;
        let file = format!("{entry}.cu");
        let text = Self::with_definitions(&file, &source.text, params)
            .map_err(|reason| refuse(reason.to_string()))?;
        let nvrtc_options = self
            .nvrtc_options(&arch, options)
            .map_err(|reason| refuse(reason.to_string()))?;
        let key = BinaryCache::key(&text, &nvrtc_options, &self.nvrtc.version());
        Ok(CompileInput {
            entry,
            arch,
            file,
            text,
            nvrtc_options,
            key,
        })
    }

    /// The cached build of `input` when the cache holds one, else NVRTC's, stored in the
    /// cache; `facts` say which (`cache_hit`, compile time, `cache_file` or `cache_error`).
    fn cached_or_built(
        &self,
        input: &CompileInput<'_>,
        facts: &mut CompilerFacts,
    ) -> Result<CachedBuild, CudaError> {
        // Where the build is cached: its `cache_file` is what a compile worker ships.
        let slot = CacheSlot::<NvrtcOutput>::new(self.cache.as_deref(), &input.key);
        if let Some(build) = slot.lookup() {
            slot.record_hit(facts);
            return Ok(build);
        }
        let out = nvrtc::compile(&input.text, &input.file, input.entry, &input.nvrtc_options)?;
        facts.compile_seconds = Some(out.seconds);
        let build = CachedBuild {
            log: out.log,
            ptx: out.ptx,
            cubin: out.cubin.unwrap_or_default(),
        };
        slot.store(|| Ok::<_, std::convert::Infallible>(&build), facts);
        Ok(build)
    }

    /// Facts of how it was built: architecture, NVRTC version and options, image kind, the
    /// lowered name when it differs, the cache key and the definitions.
    fn record_build(
        &self,
        facts: &mut CompilerFacts,
        input: &CompileInput<'_>,
        build: &CachedBuild,
        symbol: &str,
        params: &ParamValues,
    ) {
        facts.extra.insert("arch".into(), input.arch.to_string());
        facts
            .extra
            .insert("nvrtc_version".into(), self.nvrtc.version());
        let image = if build.cubin.is_empty() {
            "ptx"
        } else {
            "cubin"
        };
        facts.extra.insert("image".into(), image.into());
        if symbol != input.entry {
            facts.extra.insert("lowered_name".into(), symbol.to_owned());
        }
        facts.extra.insert("cache_key".into(), input.key.clone());
        facts
            .extra
            .insert("nvrtc_options".into(), input.nvrtc_options.join(" "));
        if !params.is_empty() {
            facts
                .extra
                .insert("definitions".into(), params.definitions().join(" "));
        }
    }

    /// Loads the cubin (or PTX) into the device's context and finds the function.
    pub(super) fn load(
        &self,
        gpu: &Gpu,
        build: &CachedBuild,
        entry: &str,
        symbol: &str,
        arch: &Arch,
    ) -> Result<Loaded, CudaError> {
        Self::bind(gpu)?;
        let image: Vec<u8> = if build.cubin.is_empty() {
            let mut ptx = build.ptx.clone().into_bytes();
            ptx.push(0);
            ptx
        } else {
            build.cubin.clone()
        };
        // SAFETY: a cubin or a NUL-terminated PTX text produced by NVRTC, alive for the call.
        let module = unsafe { result::module::load_data(image.as_ptr().cast::<c_void>()) }
            .map_err(|e| {
                use cudarc::driver::sys::cudaError_enum as E;
                match e.0 {
                    E::CUDA_ERROR_NO_BINARY_FOR_GPU | E::CUDA_ERROR_INVALID_IMAGE => {
                        CudaError::compile(
                            entry,
                            format!(
                                "the driver cannot load code compiled for {arch} on {} ({}): \
                                 {:?}",
                                gpu.info.name, gpu.info.arch, e.0
                            ),
                            build.log.clone(),
                        )
                    }
                    _ => CudaError::driver("cuModuleLoadData", e, format!("`{entry}`")),
                }
            })?;
        // Owned from here on, so that an error below unloads the module.
        let mut loaded = Loaded {
            module,
            function: std::ptr::null_mut(),
            ctx: gpu.ctx.clone(),
            max_threads: 0,
            registers: 0,
            static_shared: 0,
            local_bytes: 0,
        };
        let name = CString::new(symbol)
            .map_err(|_| CudaError::compile(entry, "entry name has a NUL byte", ""))?;
        // SAFETY: a module loaded above and not unloaded (it is owned by `loaded`).
        let function = unsafe { result::module::get_function(module, name) }.map_err(|e| {
            CudaError::compile(
                entry,
                format!("the module has no function `{symbol}`: {:?}", e.0),
                build.log.clone(),
            )
        })?;
        let attr = |a: FA| -> u64 {
            // SAFETY: a function of a live module.
            unsafe { result::function::get_function_attribute(function, a) }
                .map(|v| u64::try_from(v).unwrap_or(0))
                .unwrap_or(0)
        };
        loaded.function = function;
        loaded.max_threads = attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
        loaded.registers = u32::try_from(attr(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)).unwrap_or(0);
        loaded.static_shared = attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
        loaded.local_bytes = attr(FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
        Ok(loaded)
    }
}

/// What NVRTC is given for one kernel, and the cache key of the result.
struct CompileInput<'a> {
    entry: &'a str,
    arch: Arch,
    /// The file name diagnostics give (`<entry>.cu`).
    file: String,
    /// The source with its definitions (see [`CudaBackend::with_definitions`]).
    text: String,
    nvrtc_options: Vec<String>,
    key: String,
}

/// The symbol of `entry` in the build's PTX and its parameters' sizes; a compile error naming
/// the kernels the program defines when there is no such kernel.
fn resolve_symbol(build: &CachedBuild, entry: &str) -> Result<(String, Vec<usize>), CudaError> {
    let entries = parse_ptx_entries(&build.ptx);
    if let Some(found) = resolve_entry(&entries, entry) {
        return Ok((found.name.clone(), found.param_bytes.clone()));
    }
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let reason = format!(
        "no kernel named `{entry}`; the program defines {} (declare the kernel \
         `extern \"C\" __global__ void {entry}(…)`)",
        if names.is_empty() {
            "no __global__ function".to_owned()
        } else {
            names.join(", ")
        }
    );
    let log = if build.log.is_empty() {
        reason.clone()
    } else {
        format!("{reason}\n{}", build.log)
    };
    Err(CudaError::compile(entry, reason, log))
}

/// Registers, shared memory, stack and spills of `symbol` from ptxas' report in `log`.
fn record_resources(facts: &mut CompilerFacts, log: &str, symbol: &str) {
    let Some(r) = parse_ptxas_log(log).into_iter().find(|r| r.name == symbol) else {
        return;
    };
    facts.registers = r.registers;
    facts.local_mem_bytes = Some(r.shared_bytes);
    facts.private_mem_bytes = Some(r.stack_frame_bytes + r.local_bytes);
    facts.spill_bytes = Some(r.spill_store_bytes);
    let mut extra = vec![
        ("spill_load_bytes", r.spill_load_bytes.to_string()),
        ("stack_frame_bytes", r.stack_frame_bytes.to_string()),
    ];
    if let Some(b) = r.barriers {
        extra.push(("barriers", b.to_string()));
    }
    if let Some(c) = r.constant_bytes {
        extra.push(("constant_bytes", c.to_string()));
    }
    for (k, v) in extra {
        facts.extra.insert(k.into(), v);
    }
}

/// What the driver says of the loaded function: its thread limit, and registers, static
/// shared memory and local memory where ptxas did not report them; the time to here.
fn record_loaded(facts: &mut CompilerFacts, loaded: &Loaded, started: Instant) {
    facts.max_work_group_size = Some(loaded.max_threads);
    if facts.registers.is_none() {
        facts.registers = Some(loaded.registers);
    }
    if facts.local_mem_bytes.is_none() {
        facts.local_mem_bytes = Some(loaded.static_shared);
    }
    if facts.private_mem_bytes.is_none() {
        facts.private_mem_bytes = Some(loaded.local_bytes);
    }
    record_load_seconds(facts, started);
}

/// `40 registers, 8448 bytes shared memory, 0 bytes spilled`.
pub(super) fn summary(facts: &CompilerFacts) -> String {
    let or_unknown = |v: Option<u64>, unit: &str| match v {
        Some(v) => format!("{v} {unit}"),
        None => format!("unknown {unit}"),
    };
    format!(
        "{}, {}, {}",
        or_unknown(facts.registers.map(u64::from), "registers"),
        or_unknown(facts.local_mem_bytes, "bytes shared memory"),
        or_unknown(facts.spill_bytes, "bytes spilled"),
    )
}

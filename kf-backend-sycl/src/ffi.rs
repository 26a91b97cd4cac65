//! The C++ shim, loaded with `dlopen` at run time, and safe handles over it.
//!
//! Why `dlopen` rather than linking the shim into the crate: a build script's
//! `cargo:rustc-link-arg` (the only way to give an rpath) applies to this package's own
//! targets, not to the binaries of crates that depend on it (the `kf` binary, the examples,
//! other crates' tests), so `libsycl.so` would need `LD_LIBRARY_PATH` there; and a binary
//! linked with `libsycl.so` would fail to start at all (a loader error, not a typed error) once
//! the runtime is removed, and would load the SYCL runtime into every process, OpenCL-only ones
//! included. Loaded on first use, the shim (whose own `RUNPATH` names the runtime's `lib`
//! directory) costs nothing until a SYCL backend is created, and every failure to find or
//! load it is a [`SyclError::Unavailable`].

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use crate::error::SyclError;
use crate::runtime::{self, HOW_TO_GET_A_RUNTIME};

/// The shim ABI this crate speaks (`KFS_ABI_VERSION` in `shim/kf_sycl_shim.h`).
const ABI_VERSION: c_int = 1;

pub(crate) const KFS_OK: c_int = 0;
pub(crate) const KFS_UNAVAILABLE: c_int = 1;
pub(crate) const KFS_COMPILE: c_int = 2;
pub(crate) const KFS_LAUNCH: c_int = 3;
pub(crate) const KFS_RESOURCES: c_int = 4;
pub(crate) const KFS_INVALID: c_int = 5;

/// Kernel argument kinds (`KFS_ARG_*`).
#[derive(Debug, Clone, Copy)]
#[repr(i32)]
pub(crate) enum ArgKind {
    Ptr = 0,
    I32 = 1,
    U32 = 2,
    I64 = 3,
    F32 = 4,
    Local = 5,
}

/// `kfs_arg`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct RawArg {
    kind: i32,
    reserved: u32,
    value: u64,
}

impl RawArg {
    pub(crate) fn new(kind: ArgKind, value: u64) -> Self {
        RawArg {
            kind: kind as i32,
            reserved: 0,
            value,
        }
    }
}

#[repr(C)]
pub(crate) struct RawQueue {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct RawProgram {
    _private: [u8; 0],
}

type Err = *mut *mut c_char;

/// The shim's entry points.
pub(crate) struct Shim {
    free: unsafe extern "C" fn(*mut c_void),
    runtime_version: unsafe extern "C" fn(*mut *mut c_char, Err) -> c_int,
    list_devices: unsafe extern "C" fn(*mut *mut c_char, Err) -> c_int,
    open: unsafe extern "C" fn(usize, *mut *mut RawQueue, Err) -> c_int,
    close: unsafe extern "C" fn(*mut RawQueue),
    #[allow(clippy::type_complexity)]
    build: unsafe extern "C" fn(
        *mut RawQueue,
        *const c_char,
        usize,
        *const c_char,
        *const c_char,
        *const *const c_char,
        usize,
        *const c_char,
        c_int,
        *mut *mut RawProgram,
        *mut *mut c_char,
        Err,
    ) -> c_int,
    content: unsafe extern "C" fn(*mut RawProgram, *mut *mut c_void, *mut usize, Err) -> c_int,
    load: unsafe extern "C" fn(
        *mut RawQueue,
        *const c_void,
        usize,
        *const c_char,
        *mut *mut RawProgram,
        Err,
    ) -> c_int,
    info: unsafe extern "C" fn(*mut RawQueue, *mut RawProgram, *mut *mut c_char, Err) -> c_int,
    program_free: unsafe extern "C" fn(*mut RawProgram),
    malloc: unsafe extern "C" fn(*mut RawQueue, usize, *mut *mut c_void, Err) -> c_int,
    free_device: unsafe extern "C" fn(*mut RawQueue, *mut c_void),
    memcpy: unsafe extern "C" fn(*mut RawQueue, *mut c_void, *const c_void, usize, Err) -> c_int,
    fill_u32: unsafe extern "C" fn(*mut RawQueue, *mut c_void, u32, usize, Err) -> c_int,
    #[allow(clippy::type_complexity)]
    launch: unsafe extern "C" fn(
        *mut RawQueue,
        *mut RawProgram,
        *const RawArg,
        usize,
        u32,
        *const usize,
        *const usize,
        *mut u64,
        Err,
    ) -> c_int,
    // Keeps the library mapped for the life of the process (the struct lives in a static).
    _lib: libloading::Library,
}

/// The loaded shim, or why there is none as the message of the [`SyclError::Unavailable`]
/// every call returns.
static SHIM: OnceLock<Result<Shim, String>> = OnceLock::new();

/// The loaded shim, or why there is none.
pub(crate) fn shim() -> Result<&'static Shim, SyclError> {
    SHIM.get_or_init(|| load().map_err(|e| e.0))
        .as_ref()
        .map_err(|message| SyclError::Unavailable {
            message: message.clone(),
        })
}

/// Why the shim could not be loaded (what is missing, how to get a runtime).
#[derive(Debug)]
struct ShimUnavailable(String);

fn load() -> Result<Shim, ShimUnavailable> {
    let info = runtime::prepare();
    let Some(path) = &info.shim else {
        let why = info
            .build_note
            .clone()
            .unwrap_or_else(|| "kf-backend-sycl was built without its SYCL shim".to_owned());
        let later = match &info.config {
            Some(config) => format!(
                " A runtime is installed now ({}): rebuild kf-backend-sycl (`touch \
                 kf-backend-sycl/build.rs`, or `cargo clean -p kf-backend-sycl`, then \
                 build again).",
                config.display()
            ),
            None => String::new(),
        };
        return Err(ShimUnavailable(format!(
            "{why}.{later} {HOW_TO_GET_A_RUNTIME}"
        )));
    };
    if !path.is_file() {
        return Err(ShimUnavailable(format!(
            "the SYCL shim {} is missing (moved or cleaned build directory?); rebuild \
             kf-backend-sycl or point KF_SYCL_SHIM at a copy. {HOW_TO_GET_A_RUNTIME}",
            path.display()
        )));
    }
    // SAFETY: the shim's initialisers only set up C++ statics of the SYCL runtime.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
        ShimUnavailable(format!(
            "cannot load the SYCL shim {} ({e}): the SYCL runtime it was built against is \
             gone or incomplete. {HOW_TO_GET_A_RUNTIME}",
            path.display()
        ))
    })?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's type is the one declared in kf_sycl_shim.h for this ABI
            // version (checked below before any other call).
            *unsafe { lib.get($name) }.map_err(|e| {
                ShimUnavailable(format!(
                    "the SYCL shim {} lacks {}: {e}",
                    path.display(),
                    String::from_utf8_lossy(&$name[..$name.len() - 1])
                ))
            })?
        };
    }
    let abi: unsafe extern "C" fn() -> c_int = sym!(b"kfs_abi_version\0");
    // SAFETY: no arguments, returns a constant.
    let version = unsafe { abi() };
    if version != ABI_VERSION {
        return Err(ShimUnavailable(format!(
            "the SYCL shim {} speaks ABI {version}, this crate {ABI_VERSION}; rebuild it",
            path.display()
        )));
    }
    Ok(Shim {
        free: sym!(b"kfs_free\0"),
        runtime_version: sym!(b"kfs_runtime_version\0"),
        list_devices: sym!(b"kfs_list_devices\0"),
        open: sym!(b"kfs_open\0"),
        close: sym!(b"kfs_close\0"),
        build: sym!(b"kfs_build\0"),
        content: sym!(b"kfs_program_content\0"),
        load: sym!(b"kfs_load\0"),
        info: sym!(b"kfs_program_info\0"),
        program_free: sym!(b"kfs_program_free\0"),
        malloc: sym!(b"kfs_malloc\0"),
        free_device: sym!(b"kfs_free_device\0"),
        memcpy: sym!(b"kfs_memcpy\0"),
        fill_u32: sym!(b"kfs_fill_u32\0"),
        launch: sym!(b"kfs_launch\0"),
        _lib: lib,
    })
}

/// A failed shim call: its `KFS_*` code and message.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Failure {
    /// The usual mapping of a code to an error, for `operation`.
    pub(crate) fn into_error(self, operation: &'static str) -> SyclError {
        match self.code {
            KFS_UNAVAILABLE => SyclError::Unavailable {
                message: format!("{operation}: {}. {HOW_TO_GET_A_RUNTIME}", self.message),
            },
            KFS_LAUNCH => SyclError::Launch {
                message: self.message,
            },
            KFS_RESOURCES => SyclError::Resources {
                operation,
                message: self.message,
            },
            KFS_INVALID => SyclError::InvalidArgument(self.message),
            _ => SyclError::Runtime {
                operation,
                message: self.message,
            },
        }
    }
}

impl Shim {
    /// Takes ownership of a string the shim returned.
    fn take_string(&self, p: *mut c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: the shim returns NUL-terminated strings from malloc, freed here once.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: as above.
        unsafe { (self.free)(p.cast()) };
        s
    }

    /// Runs a shim call that reports failures through its last argument.
    fn call(&self, f: impl FnOnce(Err) -> c_int) -> Result<(), Failure> {
        let mut err: *mut c_char = ptr::null_mut();
        let code = f(&mut err);
        let message = self.take_string(err);
        if code == KFS_OK {
            Ok(())
        } else {
            Err(Failure {
                code,
                message: if message.is_empty() {
                    format!("error code {code} without a message")
                } else {
                    message
                },
            })
        }
    }

    /// The SYCL runtime's version text.
    pub(crate) fn runtime_version(&self) -> Result<String, Failure> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: out-pointers valid for the call.
        self.call(|err| unsafe { (self.runtime_version)(&mut out, err) })?;
        Ok(self.take_string(out))
    }

    /// The device list as JSON.
    pub(crate) fn list_devices(&self) -> Result<String, Failure> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: out-pointers valid for the call.
        self.call(|err| unsafe { (self.list_devices)(&mut out, err) })?;
        Ok(self.take_string(out))
    }

    /// Opens a profiling queue on device `index` of the flattened list.
    pub(crate) fn open(&'static self, index: usize) -> Result<Queue, Failure> {
        let mut q: *mut RawQueue = ptr::null_mut();
        // SAFETY: out-pointers valid for the call.
        self.call(|err| unsafe { (self.open)(index, &mut q, err) })?;
        Ok(Queue { shim: self, raw: q })
    }
}

/// A SYCL queue (with its device and context) owned by the shim.
pub(crate) struct Queue {
    shim: &'static Shim,
    raw: *mut RawQueue,
}

// SAFETY: SYCL queues, contexts and devices are thread-safe; the handle is only passed to the
// shim, which does not keep per-thread state.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: created by kfs_open, closed once.
        unsafe { (self.shim.close)(self.raw) }
    }
}

/// What a build returned.
pub(crate) struct Built {
    pub(crate) program: Program,
    pub(crate) log: String,
}

impl Queue {
    /// Builds `source` with `options` and finds `entry`. On failure, the code is
    /// `KFS_COMPILE` for diagnostics.
    pub(crate) fn build(
        &self,
        source: &str,
        include: Option<(&str, &str)>,
        options: &[String],
        entry: &str,
        register_name: bool,
    ) -> Result<Built, Failure> {
        let invalid = |what: &str| Failure {
            code: KFS_COMPILE,
            message: format!("{what} contains a NUL byte"),
        };
        let entry_c = CString::new(entry).map_err(|_| invalid("the entry point"))?;
        let include = include
            .map(|(name, text)| Ok((CString::new(name)?, CString::new(text)?)))
            .transpose()
            .map_err(|_: std::ffi::NulError| invalid("the definitions header"))?;
        let (include_name, include_text) = include
            .as_ref()
            .map_or((ptr::null(), ptr::null()), |(n, t)| {
                (n.as_ptr(), t.as_ptr())
            });
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| invalid("a build option"))?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut program: *mut RawProgram = ptr::null_mut();
        let mut log: *mut c_char = ptr::null_mut();
        let result = self.shim.call(|err| {
            // SAFETY: every pointer is valid for the call; the source is passed with its length.
            unsafe {
                (self.shim.build)(
                    self.raw,
                    source.as_ptr().cast(),
                    source.len(),
                    include_name,
                    include_text,
                    opt_ptrs.as_ptr(),
                    opt_ptrs.len(),
                    entry_c.as_ptr(),
                    c_int::from(register_name),
                    &mut program,
                    &mut log,
                    err,
                )
            }
        });
        let log = self.shim.take_string(log);
        result?;
        Ok(Built {
            program: Program {
                shim: self.shim,
                raw: program,
            },
            log,
        })
    }

    /// Loads a program serialised by [`Program::content`].
    pub(crate) fn load(&self, content: &[u8], entry: &str) -> Result<Program, Failure> {
        let entry_c = CString::new(entry).map_err(|_| Failure {
            code: KFS_INVALID,
            message: "the entry point contains a NUL byte".into(),
        })?;
        let mut program: *mut RawProgram = ptr::null_mut();
        // SAFETY: the bytes and the name are valid for the call.
        self.shim.call(|err| unsafe {
            (self.shim.load)(
                self.raw,
                content.as_ptr().cast(),
                content.len(),
                entry_c.as_ptr(),
                &mut program,
                err,
            )
        })?;
        Ok(Program {
            shim: self.shim,
            raw: program,
        })
    }

    /// Kernel facts as JSON.
    pub(crate) fn program_info(&self, program: &Program) -> Result<String, Failure> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: both handles are alive; out-pointer valid.
        self.shim
            .call(|err| unsafe { (self.shim.info)(self.raw, program.raw, &mut out, err) })?;
        Ok(self.shim.take_string(out))
    }

    /// Allocates `bytes` of USM device memory.
    pub(crate) fn malloc(&self, bytes: usize) -> Result<*mut c_void, Failure> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: out-pointer valid for the call.
        self.shim
            .call(|err| unsafe { (self.shim.malloc)(self.raw, bytes, &mut p, err) })?;
        Ok(p)
    }

    /// Frees USM memory from [`Queue::malloc`].
    ///
    /// # Safety
    /// `ptr` came from `malloc` on this queue and is freed once.
    pub(crate) unsafe fn free(&self, ptr: *mut c_void) {
        // SAFETY: see the function's contract.
        unsafe { (self.shim.free_device)(self.raw, ptr) }
    }

    /// Blocking copy of `bytes` bytes.
    ///
    /// # Safety
    /// `dst` and `src` are valid for `bytes` bytes (USM or host memory).
    pub(crate) unsafe fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
    ) -> Result<(), Failure> {
        // SAFETY: see the function's contract.
        self.shim
            .call(|err| unsafe { (self.shim.memcpy)(self.raw, dst, src, bytes, err) })
    }

    /// Blocking fill of `count` 32-bit words.
    ///
    /// # Safety
    /// `dst` is USM memory of at least `4 * count` bytes.
    pub(crate) unsafe fn fill_u32(
        &self,
        dst: *mut c_void,
        value: u32,
        count: usize,
    ) -> Result<(), Failure> {
        // SAFETY: see the function's contract.
        self.shim
            .call(|err| unsafe { (self.shim.fill_u32)(self.raw, dst, value, count, err) })
    }

    /// Launches, waits, and returns the device nanoseconds.
    ///
    /// # Safety
    /// Pointer arguments are USM allocations of this queue's context that stay alive until
    /// the call returns; `global` and `local` have the same length (1 to 3).
    pub(crate) unsafe fn launch(
        &self,
        program: &Program,
        args: &[RawArg],
        global: &[usize],
        local: &[usize],
    ) -> Result<u64, Failure> {
        let mut ns = 0u64;
        // SAFETY: see the function's contract; the arrays outlive the call.
        self.shim.call(|err| unsafe {
            (self.shim.launch)(
                self.raw,
                program.raw,
                args.as_ptr(),
                args.len(),
                global.len() as u32,
                global.as_ptr(),
                local.as_ptr(),
                &mut ns,
                err,
            )
        })?;
        Ok(ns)
    }
}

/// A built executable kernel bundle and its kernel.
pub(crate) struct Program {
    shim: &'static Shim,
    raw: *mut RawProgram,
}

// SAFETY: SYCL kernel bundles and kernels are thread-safe, immutable once built.
unsafe impl Send for Program {}
// SAFETY: as above.
unsafe impl Sync for Program {}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by kfs_build / kfs_load, freed once.
        unsafe { (self.shim.program_free)(self.raw) }
    }
}

impl Program {
    /// The serialised bundle (SYCLBIN).
    pub(crate) fn content(&self) -> Result<Vec<u8>, Failure> {
        let mut data: *mut c_void = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: out-pointers valid for the call.
        self.shim
            .call(|err| unsafe { (self.shim.content)(self.raw, &mut data, &mut len, err) })?;
        if data.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: the shim returned `len` bytes from malloc; copied, then freed once.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec();
        // SAFETY: as above.
        unsafe { (self.shim.free)(data) };
        Ok(bytes)
    }
}

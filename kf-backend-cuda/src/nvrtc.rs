//! NVRTC through cudarc's raw bindings: version and architectures, and one compilation to a
//! cubin (or PTX) with its log. Every call is guarded: cudarc panics when the library or a
//! symbol is missing, and this crate never does.

use std::ffi::{c_char, CStr, CString};
use std::ptr;
use std::sync::OnceLock;
use std::time::Instant;

use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};

use crate::device::Arch;
use crate::error::CudaError;
use crate::guarded;
use crate::runtime::{self, HOW_TO_GET_NVRTC};

/// The NVRTC this process loaded: its version and the real architectures it compiles for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// Major version (12).
    pub major: i32,
    /// Minor version (9).
    pub minor: i32,
    /// Architectures it can compile SASS for, as `major * 10 + minor` (`90` for `sm_90`).
    pub archs: Vec<u32>,
}

impl NvrtcInfo {
    /// `12.9`.
    pub fn version(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Whether NVRTC can compile for `arch` (real or virtual).
    pub fn supports(&self, arch: &Arch) -> bool {
        self.archs.contains(&arch.number())
    }

    /// The newest architecture it compiles for.
    pub fn newest(&self) -> Option<u32> {
        self.archs.iter().copied().max()
    }
}

/// The outcome of loading NVRTC, kept for the process: the error as its message, which every
/// later call returns again as a [`CudaError::Unavailable`].
static INFO: OnceLock<Result<NvrtcInfo, String>> = OnceLock::new();

/// Finds and loads NVRTC (see [`crate::runtime`]) once, and returns its version and
/// architectures; [`CudaError::Unavailable`] (saying how to install it) when there is none.
pub fn nvrtc_info() -> Result<&'static NvrtcInfo, CudaError> {
    INFO.get_or_init(|| load_info().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|message| CudaError::Unavailable {
            message: message.clone(),
        })
}

/// Why NVRTC could not be loaded or queried (what was tried, how to get it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NvrtcUnavailable(String);

fn load_info() -> Result<NvrtcInfo, NvrtcUnavailable> {
    let runtime = runtime::prepare();
    // SAFETY: only opens (and closes again) candidate libraries by name.
    let present = guarded("looking for NVRTC", || unsafe { sys::is_culib_present() })
        .map_err(|e| NvrtcUnavailable(e.to_string()))?;
    if !present {
        return Err(NvrtcUnavailable(format!(
            "NVRTC (libnvrtc.so.12) not found; tried {}. {HOW_TO_GET_NVRTC}",
            runtime.describe()
        )));
    }
    guarded("querying NVRTC", || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: out-pointers to live integers.
        let rc = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        if rc != nvrtcResult::NVRTC_SUCCESS {
            return Err(NvrtcUnavailable(format!("nvrtcVersion failed: {rc:?}")));
        }
        let mut n = 0;
        // SAFETY: as above.
        let rc = unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) };
        if rc != nvrtcResult::NVRTC_SUCCESS {
            return Err(NvrtcUnavailable(format!(
                "nvrtcGetNumSupportedArchs failed: {rc:?}"
            )));
        }
        let mut archs = vec![0; usize::try_from(n).unwrap_or(0)];
        if !archs.is_empty() {
            // SAFETY: the buffer holds the number of entries NVRTC said it would write.
            let rc = unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) };
            if rc != nvrtcResult::NVRTC_SUCCESS {
                return Err(NvrtcUnavailable(format!(
                    "nvrtcGetSupportedArchs failed: {rc:?}"
                )));
            }
        }
        Ok(NvrtcInfo {
            major,
            minor,
            archs: archs
                .into_iter()
                .filter_map(|a| u32::try_from(a).ok())
                .collect(),
        })
    })
    .map_err(|e| NvrtcUnavailable(format!("{e} ({})", runtime.describe())))?
}

/// What one compilation produced.
#[derive(Debug, Clone)]
pub(crate) struct NvrtcOutput {
    /// The cubin, when compiled for a real architecture.
    pub(crate) cubin: Option<Vec<u8>>,
    /// The PTX (always produced).
    pub(crate) ptx: String,
    /// NVRTC's log (warnings, and ptxas' resource report).
    pub(crate) log: String,
    /// Wall-clock seconds of `nvrtcCompileProgram`.
    pub(crate) seconds: f64,
}

/// Destroys the program on every path.
struct Program(nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created by nvrtcCreateProgram and destroyed only here.
            unsafe {
                let _ = sys::nvrtcDestroyProgram(&mut self.0);
            }
        }
    }
}

fn error_name(rc: nvrtcResult) -> String {
    // SAFETY: nvrtcGetErrorString returns a static string for any code.
    let text = unsafe { sys::nvrtcGetErrorString(rc) };
    if text.is_null() {
        format!("{rc:?}")
    } else {
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

fn text_of(mut bytes: Vec<c_char>) -> String {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    let bytes: Vec<u8> = bytes.into_iter().map(|c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` (named `name` in diagnostics) with `options`, each one NVRTC option.
/// A rejected kernel is [`CudaError::Compile`] with NVRTC's log; a missing NVRTC is
/// [`CudaError::Unavailable`].
pub(crate) fn compile(
    source: &str,
    name: &str,
    entry: &str,
    options: &[String],
) -> Result<NvrtcOutput, CudaError> {
    nvrtc_info()?;
    let c_source = CString::new(source)
        .map_err(|_| CudaError::compile(entry, "the source contains a NUL byte", ""))?;
    let c_name = CString::new(name).unwrap_or_else(|_| c"kernel.cu".to_owned());
    let c_options = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| CudaError::compile(entry, "a compiler option contains a NUL byte", ""))?;
    guarded("NVRTC compilation", || {
        compile_guarded(&c_source, &c_name, entry, &c_options, options)
    })?
}

fn compile_guarded(
    source: &CStr,
    name: &CStr,
    entry: &str,
    c_options: &[CString],
    options: &[String],
) -> Result<NvrtcOutput, CudaError> {
    let api = |operation: &'static str, rc: nvrtcResult| CudaError::Nvrtc {
        operation,
        message: error_name(rc),
    };
    let mut program = Program(ptr::null_mut());
    // SAFETY: the strings outlive the program (they are borrowed for this whole function).
    let rc = unsafe {
        sys::nvrtcCreateProgram(
            &mut program.0,
            source.as_ptr(),
            name.as_ptr(),
            0,
            ptr::null(),
            ptr::null(),
        )
    };
    if rc != nvrtcResult::NVRTC_SUCCESS {
        return Err(api("nvrtcCreateProgram", rc));
    }
    let pointers: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
    let started = Instant::now();
    // SAFETY: `pointers` holds `len` valid C strings that outlive the call.
    let rc = unsafe {
        sys::nvrtcCompileProgram(
            program.0,
            i32::try_from(pointers.len()).unwrap_or(i32::MAX),
            pointers.as_ptr(),
        )
    };
    let seconds = started.elapsed().as_secs_f64();
    let log = program_log(program.0).unwrap_or_default();
    match rc {
        nvrtcResult::NVRTC_SUCCESS => {}
        nvrtcResult::NVRTC_ERROR_COMPILATION => {
            return Err(CudaError::compile(entry, error_name(rc), log.trim()));
        }
        nvrtcResult::NVRTC_ERROR_INVALID_OPTION => {
            let log = format!("{}\nNVRTC options were: {}", log.trim(), options.join(" "));
            return Err(CudaError::compile(entry, error_name(rc), log.trim()));
        }
        other => return Err(api("nvrtcCompileProgram", other)),
    }
    let mut size = 0usize;
    // SAFETY: a compiled program and an out-pointer.
    let rc = unsafe { sys::nvrtcGetPTXSize(program.0, &mut size) };
    if rc != nvrtcResult::NVRTC_SUCCESS {
        return Err(api("nvrtcGetPTXSize", rc));
    }
    let mut ptx = vec![0 as c_char; size.max(1)];
    // SAFETY: the buffer has the size NVRTC reported.
    let rc = unsafe { sys::nvrtcGetPTX(program.0, ptx.as_mut_ptr()) };
    if rc != nvrtcResult::NVRTC_SUCCESS {
        return Err(api("nvrtcGetPTX", rc));
    }
    let mut cubin_size = 0usize;
    // SAFETY: as above; the size is 0 when compiled for a virtual architecture.
    let rc = unsafe { sys::nvrtcGetCUBINSize(program.0, &mut cubin_size) };
    let cubin = if rc == nvrtcResult::NVRTC_SUCCESS && cubin_size > 0 {
        let mut cubin = vec![0 as c_char; cubin_size];
        // SAFETY: the buffer has the size NVRTC reported.
        let rc = unsafe { sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr()) };
        if rc != nvrtcResult::NVRTC_SUCCESS {
            return Err(api("nvrtcGetCUBIN", rc));
        }
        Some(cubin.into_iter().map(|c| c as u8).collect())
    } else {
        None
    };
    Ok(NvrtcOutput {
        cubin,
        ptx: text_of(ptx),
        log: log.trim().to_owned(),
        seconds,
    })
}

fn program_log(program: nvrtcProgram) -> Option<String> {
    let mut size = 0usize;
    // SAFETY: a live program and an out-pointer.
    let rc = unsafe { sys::nvrtcGetProgramLogSize(program, &mut size) };
    if rc != nvrtcResult::NVRTC_SUCCESS {
        return None;
    }
    let mut log = vec![0 as c_char; size.max(1)];
    // SAFETY: the buffer has the size NVRTC reported.
    let rc = unsafe { sys::nvrtcGetProgramLog(program, log.as_mut_ptr()) };
    (rc == nvrtcResult::NVRTC_SUCCESS).then(|| text_of(log))
}

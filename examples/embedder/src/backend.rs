//! The embedder's own backend: the OpenCL backend wrapped so that it counts its kernel launches.
//!
//! Launches happen in the search's isolated evaluation workers (this program, re-executed), so
//! the count cannot live in this process's memory: each backend appends one byte per launch to
//! the file `LAUNCH_LOG_ENV` names, opened when the backend is opened (before the worker confines
//! its file access), and the program reads the file's length after the search.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use kernelfoundry::core::{
    Backend, CompileOptions, Compiled, DeviceFacts, KernelArg, KernelSource, Language,
    LaunchTiming, NdRange, ParamValues,
};
use kernelfoundry::eval::{BackendFactory, BackendSpec};
use kernelfoundry::opencl::{OpenClBackend, OpenClBuffer, OpenClError, OpenClKernel};
use kernelfoundry::search::backends::OpenClFactory;
use kernelfoundry::search::BackendError;

/// The variable naming the launch log; the evaluation workers inherit it.
pub const LAUNCH_LOG_ENV: &str = "KF_EMBEDDER_LAUNCH_LOG";

/// Opens [`CountingBackend`]s; registered with `kernelfoundry::init_with` so that the workers
/// open it by its name.
pub struct CountingOpenCl;

impl BackendFactory for CountingOpenCl {
    type Backend = CountingBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        "counting-opencl"
    }

    fn language(&self) -> Language {
        Language::OpenCl
    }

    fn open(&self, spec: &BackendSpec) -> Result<CountingBackend, BackendError> {
        let log = std::env::var_os(LAUNCH_LOG_ENV)
            .map(|path| File::options().create(true).append(true).open(path))
            .transpose()
            .map_err(|e| BackendError::Open(format!("the launch log: {e}")))?;
        Ok(CountingBackend {
            inner: OpenClFactory.open(spec)?,
            log,
        })
    }
}

/// Launches recorded in the log at `path` so far.
pub fn launches(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The OpenCL backend, every launch recorded.
pub struct CountingBackend {
    inner: OpenClBackend,
    log: Option<File>,
}

impl Backend for CountingBackend {
    type Error = OpenClError;
    type Kernel = OpenClKernel;
    type Buffer = OpenClBuffer;

    /// The OpenCL backend's name: its compile and characterisation caches are OpenCL's.
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn languages(&self) -> &[Language] {
        self.inner.languages()
    }

    fn device(&self) -> &DeviceFacts {
        self.inner.device()
    }

    fn compile(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<OpenClKernel>, OpenClError> {
        self.inner.compile(source, params, options)
    }

    fn alloc(&self, bytes: usize) -> Result<OpenClBuffer, OpenClError> {
        self.inner.alloc(bytes)
    }

    fn write(&self, buffer: &mut OpenClBuffer, data: &[u8]) -> Result<(), OpenClError> {
        self.inner.write(buffer, data)
    }

    fn read(&self, buffer: &OpenClBuffer, out: &mut [u8]) -> Result<(), OpenClError> {
        self.inner.read(buffer, out)
    }

    fn launch(
        &self,
        kernel: &OpenClKernel,
        args: &[KernelArg<'_, OpenClBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, OpenClError> {
        if let Some(mut log) = self.log.as_ref() {
            // One byte, appended: writes from several workers never interleave within it.
            let _ = log.write_all(b"L");
        }
        self.inner.launch(kernel, args, range)
    }

    fn buffer_alignment(&self) -> usize {
        self.inner.buffer_alignment()
    }

    fn flush_caches(&self) -> Result<(), OpenClError> {
        self.inner.flush_caches()
    }
}

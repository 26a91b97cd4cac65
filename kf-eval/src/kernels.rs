//! The kernels this crate ships (the `kernels/` folder of its package): each task's naive
//! baseline and a tiled GEMM, in OpenCL C, CUDA and SYCL, as manifest and source text.
//!
//! They are compiled into the crate so that other crates (the facade's search setup, tests of
//! the mutators) use the same files without reaching into this crate's folder, which a
//! published package of theirs would not contain.
//!
//! ```
//! use kf_core::Language;
//! use kf_eval::kernels;
//!
//! let tiled = kernels::shipped("gemm_tiled", Language::OpenCl).unwrap();
//! assert!(tiled.source.contains("__kernel"));
//! let source = tiled.kernel_source().unwrap();
//! assert_eq!(source.entry, "gemm");
//! ```

use kf_core::{KernelSource, Language};
use kf_manifest::{Manifest, ManifestError};

/// One shipped kernel: its manifest and its source, as the files hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedKernel {
    /// The file stem (`gemm_naive`, `gemm_tiled`, `softmax_naive`).
    pub name: &'static str,
    /// The kernel language.
    pub language: Language,
    /// The manifest file's name inside `kernels/` (`sycl/gemm_tiled.toml`).
    pub manifest_path: &'static str,
    /// The manifest (TOML).
    pub manifest: &'static str,
    /// The kernel source.
    pub source: &'static str,
}

impl ShippedKernel {
    /// The parsed manifest.
    pub fn manifest(&self) -> Result<Manifest, ManifestError> {
        Manifest::parse(self.manifest, self.manifest_path, None)
    }

    /// The kernel source with its manifest's parameters and launch geometry attached.
    pub fn kernel_source(&self) -> Result<KernelSource, ManifestError> {
        Ok(self.manifest()?.kernel_source(self.source))
    }
}

macro_rules! shipped {
    ($name:literal, $language:expr, $dir:literal, $ext:literal) => {
        ShippedKernel {
            name: $name,
            language: $language,
            manifest_path: concat!($dir, $name, ".toml"),
            manifest: include_str!(concat!("../kernels/", $dir, $name, ".toml")),
            source: include_str!(concat!("../kernels/", $dir, $name, $ext)),
        }
    };
}

/// `kernels/gemm_naive.cl`: the naive GEMM baseline in OpenCL C.
pub const OPENCL_GEMM_NAIVE: ShippedKernel = shipped!("gemm_naive", Language::OpenCl, "", ".cl");

/// `kernels/gemm_tiled.cl`: a tiled GEMM (local-memory tiles; parameters in its manifest) in OpenCL C.
pub const OPENCL_GEMM_TILED: ShippedKernel = shipped!("gemm_tiled", Language::OpenCl, "", ".cl");

/// `kernels/softmax_naive.cl`: the naive row-wise softmax baseline in OpenCL C.
pub const OPENCL_SOFTMAX_NAIVE: ShippedKernel =
    shipped!("softmax_naive", Language::OpenCl, "", ".cl");

/// `kernels/cuda/gemm_naive.cu`: the naive GEMM baseline in CUDA.
pub const CUDA_GEMM_NAIVE: ShippedKernel = shipped!("gemm_naive", Language::Cuda, "cuda/", ".cu");

/// `kernels/cuda/gemm_tiled.cu`: a tiled GEMM (local-memory tiles; parameters in its manifest) in CUDA.
pub const CUDA_GEMM_TILED: ShippedKernel = shipped!("gemm_tiled", Language::Cuda, "cuda/", ".cu");

/// `kernels/cuda/softmax_naive.cu`: the naive row-wise softmax baseline in CUDA.
pub const CUDA_SOFTMAX_NAIVE: ShippedKernel =
    shipped!("softmax_naive", Language::Cuda, "cuda/", ".cu");

/// `kernels/sycl/gemm_naive.cpp`: the naive GEMM baseline in SYCL.
pub const SYCL_GEMM_NAIVE: ShippedKernel = shipped!("gemm_naive", Language::Sycl, "sycl/", ".cpp");

/// `kernels/sycl/gemm_tiled.cpp`: a tiled GEMM (local-memory tiles; parameters in its manifest) in SYCL.
pub const SYCL_GEMM_TILED: ShippedKernel = shipped!("gemm_tiled", Language::Sycl, "sycl/", ".cpp");

/// `kernels/sycl/softmax_naive.cpp`: the naive row-wise softmax baseline in SYCL.
pub const SYCL_SOFTMAX_NAIVE: ShippedKernel =
    shipped!("softmax_naive", Language::Sycl, "sycl/", ".cpp");

/// Every shipped kernel.
pub const ALL: &[ShippedKernel] = &[
    OPENCL_GEMM_NAIVE,
    OPENCL_GEMM_TILED,
    OPENCL_SOFTMAX_NAIVE,
    CUDA_GEMM_NAIVE,
    CUDA_GEMM_TILED,
    CUDA_SOFTMAX_NAIVE,
    SYCL_GEMM_NAIVE,
    SYCL_GEMM_TILED,
    SYCL_SOFTMAX_NAIVE,
];

/// The shipped kernel `name` in `language`, if there is one.
pub fn shipped(name: &str, language: Language) -> Option<&'static ShippedKernel> {
    ALL.iter()
        .find(|k| k.name == name && k.language == language)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_kernel_has_a_valid_manifest_of_its_language() {
        for k in ALL {
            let source = k
                .kernel_source()
                .unwrap_or_else(|e| panic!("{}: {e}", k.manifest_path));
            assert_eq!(source.language, k.language, "{}", k.manifest_path);
            assert!(!k.source.trim().is_empty());
        }
        assert!(shipped("gemm_tiled", Language::Sycl).is_some());
        assert!(shipped("no_such_kernel", Language::OpenCl).is_none());
    }
}

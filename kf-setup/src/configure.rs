//! The configuration file each backend reads (`opencl.json`, `cuda.json`, `sycl.json`), with
//! the fields `scripts/setup.sh` writes, computed for an installation prefix. The files are
//! checked in the staging folder but name the paths the runtime will have once moved into
//! place.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{io_at, SetupError};
use crate::wheel::SITE_PACKAGES;

/// What a configuration is computed from.
pub(crate) struct Layout<'a> {
    /// The runtime's name.
    pub runtime: &'a str,
    /// Where the packages were unpacked (now).
    pub staged: &'a Path,
    /// Where they will be (the paths the configuration names).
    pub final_prefix: &'a Path,
    /// The per-user folder (for the OpenCL vendors folder SYCL shares).
    pub root: &'a Path,
    /// `name==version` of each package installed.
    pub packages: &'a [String],
    /// The description's requirements, to tell later whether this is still what it asks for.
    pub requirements: &'a [String],
}

impl Layout<'_> {
    /// `relative` under the prefix, if the staged file exists: its final path.
    fn find(&self, relative: &str, what: &str) -> Result<PathBuf, SetupError> {
        let staged = self.staged.join(relative);
        if staged.exists() {
            Ok(self.final_prefix.join(relative))
        } else {
            Err(SetupError::Incomplete {
                runtime: self.runtime.to_owned(),
                what: what.to_owned(),
                looked: staged,
            })
        }
    }

    fn optional(&self, relative: &str) -> Option<PathBuf> {
        self.staged
            .join(relative)
            .exists()
            .then(|| self.final_prefix.join(relative))
    }

    fn head(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("schema".into(), json!(1));
        m.insert(
            "written_by".into(),
            json!(format!("kf setup --{}", self.runtime)),
        );
        m.insert("requirements".into(), json!(self.requirements));
        m.insert("packages".into(), json!(self.packages));
        m
    }
}

/// The OpenCL vendors folder inside the OpenCL prefix (`OCL_ICD_VENDORS`).
pub(crate) const OPENCL_VENDORS: &str = "vendors";

/// `opencl.json` (and the vendors folder with `intel-cpu.icd` naming the driver's final path,
/// plus links to the system's `.icd` files present now, as `scripts/setup.sh` does).
pub(crate) fn opencl(layout: &Layout<'_>) -> Result<Value, SetupError> {
    let icd = layout.find("lib/libintelocl.so", "libintelocl.so")?;
    let loader = layout.optional("lib/libOpenCL.so.1");
    let lib_dir = layout.final_prefix.join("lib");
    // Order matters: each library's own dependencies come first.
    let preload: Vec<PathBuf> = ["libintlc.so.5", "libirng.so", "libimf.so", "libsvml.so"]
        .iter()
        .filter_map(|lib| layout.optional(&format!("lib/{lib}")))
        .collect();
    let vendors = layout.staged.join(OPENCL_VENDORS);
    fs::create_dir_all(&vendors).map_err(io_at(&vendors))?;
    let icd_file = vendors.join("intel-cpu.icd");
    fs::write(&icd_file, format!("{}\n", icd.display())).map_err(io_at(&icd_file))?;
    link_system_icds(&vendors);
    let mut m = layout.head();
    m.insert("runtime".into(), json!("intel-opencl-rt"));
    m.insert("loader".into(), json!(loader));
    m.insert("icd".into(), json!(icd));
    m.insert("lib_dir".into(), json!(lib_dir));
    m.insert(
        "vendors_dir".into(),
        json!(layout.final_prefix.join(OPENCL_VENDORS)),
    );
    m.insert("preload".into(), json!(preload));
    m.insert("platforms".into(), json!([]));
    Ok(Value::Object(m))
}

/// Links the system's OpenCL drivers (`/etc/OpenCL/vendors/*.icd`: PoCL, GPU drivers) into
/// our vendors folder, so that they stay visible when `OCL_ICD_VENDORS` points at it. Best
/// effort: a machine without them has nothing to link.
fn link_system_icds(vendors: &Path) {
    let Ok(entries) = fs::read_dir("/etc/OpenCL/vendors") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.ends_with(".icd") || name == "intel-cpu.icd" {
            continue;
        }
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink(entry.path(), vendors.join(format!("system-{name}")));
    }
}

/// `cuda.json`: NVRTC, its builtins library (preloaded), and the CUDA headers.
pub(crate) fn cuda(layout: &Layout<'_>, nvrtc_version: &str) -> Result<Value, SetupError> {
    let lib_rel = format!("{SITE_PACKAGES}/nvidia/cuda_nvrtc/lib");
    let nvrtc = layout.find(&format!("{lib_rel}/libnvrtc.so.12"), "libnvrtc.so.12")?;
    let mut builtins: Vec<String> = fs::read_dir(layout.staged.join(&lib_rel))
        .map_err(io_at(layout.staged.join(&lib_rel)))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("libnvrtc-builtins.so."))
        .collect();
    builtins.sort();
    let preload: Vec<PathBuf> = builtins
        .last()
        .map(|b| layout.final_prefix.join(&lib_rel).join(b))
        .into_iter()
        .collect();
    let include_rel = format!("{SITE_PACKAGES}/nvidia/cuda_runtime/include");
    let include: Vec<PathBuf> = layout
        .optional(&format!("{include_rel}/cuda_fp16.h"))
        .map(|_| layout.final_prefix.join(&include_rel))
        .into_iter()
        .collect();
    let mut m = layout.head();
    m.insert("runtime".into(), json!("nvidia-cuda-nvrtc-cu12"));
    m.insert("nvrtc".into(), json!(nvrtc));
    m.insert("lib_dir".into(), json!(layout.final_prefix.join(&lib_rel)));
    m.insert("preload".into(), json!(preload));
    m.insert("include_dirs".into(), json!(include));
    m.insert("nvrtc_version".into(), json!(nvrtc_version));
    m.insert("archs".into(), json!([]));
    Ok(Value::Object(m))
}

/// `sycl.json`: the headers and `libsycl.so` kf-backend-sycl's build script compiles its
/// shim against, and the OpenCL vendors folder (its CPU device).
pub(crate) fn sycl(layout: &Layout<'_>, version: &str) -> Result<Value, SetupError> {
    layout.find("include/sycl/sycl.hpp", "sycl/sycl.hpp")?;
    layout.find("lib/libsycl.so", "libsycl.so")?;
    let vendors = layout.root.join("opencl").join(OPENCL_VENDORS);
    // SYCL's OpenCL adapter (its CPU device) opens `libOpenCL.so.1` by name, found beside it
    // in pip's shared venv; here the ICD loader is the OpenCL runtime's, in its own prefix.
    let loader = layout.root.join("opencl/lib/libOpenCL.so.1");
    let link = layout.staged.join("lib/libOpenCL.so.1");
    #[cfg(unix)]
    if loader.is_file() && !link.exists() {
        std::os::unix::fs::symlink(&loader, &link).map_err(io_at(&link))?;
    }
    let mut m = layout.head();
    m.insert("runtime".into(), json!("intel-sycl-rt"));
    m.insert("version".into(), json!(version));
    m.insert(
        "include_dir".into(),
        json!(layout.final_prefix.join("include")),
    );
    m.insert("lib_dir".into(), json!(layout.final_prefix.join("lib")));
    m.insert(
        "opencl_vendors_dir".into(),
        json!(vendors.is_dir().then_some(vendors)),
    );
    Ok(Value::Object(m))
}

/// The file a configuration names that must exist for the runtime to count as installed.
pub(crate) fn key_file(config: &Value) -> Option<PathBuf> {
    ["icd", "nvrtc", "lib_dir"]
        .iter()
        .find_map(|k| config.get(*k).and_then(Value::as_str))
        .map(PathBuf::from)
}

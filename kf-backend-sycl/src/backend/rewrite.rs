//! Source rewriting: parameters as a virtual header instead of `-D`, build options, and the
//! source checks made before a build (entry names, `extern "C"`, known compiler crashes).

use super::*;

/// The name of the virtual header that carries a kernel's parameter definitions (see
/// [`SyclBackend::prepare_source`]).
pub const PARAMS_HEADER: &str = "kernelfoundry_params.h";

/// What [`SyclBackend::prepare_source`] hands to the runtime compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedSource {
    /// The source, with its `#include <sycl/sycl.hpp>` line replaced by
    /// `#include "kernelfoundry_params.h"` when there are parameters.
    pub text: String,
    /// The contents of [`PARAMS_HEADER`], when there are parameters.
    pub params_header: Option<String>,
}

impl SyclBackend {
    /// The source actually compiled for `source` with `params`.
    ///
    /// Parameters are definitions, as in the other backends, but not `-D` options: a `-D`
    /// reaches the SYCL headers too, where the names kernel parameters commonly take are
    /// identifiers (`T`, `N` and `WG` are template or function parameter names in `sycl.hpp`),
    /// so `-DT=float` or `-DWG=16` break the headers. Instead, a virtual header
    /// [`PARAMS_HEADER`] holds `#include <sycl/sycl.hpp>` followed by one `#define NAME value`
    /// per parameter, and the kernel's own `#include <sycl/sycl.hpp>` line is replaced by
    /// `#include "kernelfoundry_params.h"`: the headers never see the definitions, everything
    /// after that line does, and the line numbers of clang's diagnostics stay the kernel's own.
    /// A kernel without that include line gets the header included before its first line
    /// (diagnostics then count one line more). Without parameters the source is unchanged.
    ///
    /// Fails on a parameter name that is not a C identifier, or a value that is empty or holds
    /// a line break or NUL byte.
    pub fn prepare_source(source: &str, params: &ParamValues) -> Result<PreparedSource, String> {
        if params.is_empty() {
            return Ok(PreparedSource {
                text: source.to_owned(),
                params_header: None,
            });
        }
        let mut header = String::from("#include <sycl/sycl.hpp>\n");
        for (name, value) in params.iter() {
            if !is_identifier(name) {
                return Err(format!("parameter name {name:?} is not a C identifier"));
            }
            let value = value.to_string();
            if value.trim().is_empty() || value.contains(['\0', '\n', '\r']) {
                return Err(format!(
                    "parameter {name} has value {value:?}; a definition cannot be empty or hold \
                     a NUL byte or a line break"
                ));
            }
            header.push_str(&format!("#define {name} {value}\n"));
        }
        let include = format!("#include \"{PARAMS_HEADER}\"");
        let mut text = String::with_capacity(source.len() + include.len() + 1);
        let mut replaced = false;
        for line in source.split_inclusive('\n') {
            if !replaced && is_sycl_hpp_include(line) {
                text.push_str(&include);
                text.push_str(if line.ends_with("\r\n") {
                    "\r\n"
                } else if line.ends_with('\n') {
                    "\n"
                } else {
                    ""
                });
                replaced = true;
            } else {
                text.push_str(line);
            }
        }
        if !replaced {
            text = format!("{include}\n{source}");
        }
        Ok(PreparedSource {
            text,
            params_header: Some(header),
        })
    }

    /// The build options for `options`: its flags, verbatim, one option each. Fails on a NUL
    /// byte.
    pub fn build_options(options: &CompileOptions) -> Result<Vec<String>, String> {
        options
            .flags
            .iter()
            .map(|flag| {
                if flag.contains('\0') {
                    Err(format!("compiler flag {flag:?} contains a NUL byte"))
                } else {
                    Ok(flag.clone())
                }
            })
            .collect()
    }
}

/// An entry point: a C identifier, optionally namespace-qualified (`ns::kernel`).
pub(super) fn is_entry_name(name: &str) -> bool {
    name.split("::").all(is_identifier)
}

/// Whether `line` is `#include <sycl/sycl.hpp>` (spaces anywhere, a trailing comment allowed).
pub(super) fn is_sycl_hpp_include(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact
        .strip_prefix("#include<sycl/sycl.hpp>")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("//") || rest.starts_with("/*"))
}

/// Whether the source declares anything `extern "C"`.
pub(super) fn mentions_extern_c(source: &str) -> bool {
    let code = strip_comments(source);
    code.match_indices("extern")
        .any(|(i, _)| code[i + "extern".len()..].trim_start().starts_with("\"C\""))
}

/// Why a source cannot be built safely by this runtime, if it cannot.
pub(super) fn known_crasher(source: &str) -> Option<&'static str> {
    let code = strip_comments(source);
    code.contains("group_local_memory").then_some(
        "sycl::ext::oneapi::group_local_memory / group_local_memory_for_overwrite crash the \
         SYCL runtime's kernel compiler (a segmentation fault in \
         DeviceKernelInfo::setImplicitLocalArgPos, intel-sycl-rt 2026.2); declare static \
         local memory as `static sycl::ext::oneapi::experimental::work_group_static<float[N]> \
         name;` inside the kernel, or take a sycl::local_accessor argument",
    )
}

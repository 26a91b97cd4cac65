//! Source rewriting: parameters as a virtual header instead of `-D`, build options, and the
//! source checks made before a build (entry names, `extern "C"`, known compiler crashes).

use kf_backend_common::compile_input::{check_flags, define_lines};
use kf_backend_common::CompileInputError;

use super::*;

/// The name of the virtual header that carries a kernel's parameter definitions (see
/// [`SyclBackend::prepare_source`]).
pub const PARAMS_HEADER: &str = "kernelfoundry_params.h";

/// The lines every prepared source starts with: the SYCL headers, then a declaration that ends
/// clang's preamble (the leading run of preprocessor directives), so that the runtime
/// compiler's precompiled preamble (`--persistent-auto-pch`, see
/// [`SyclBackend::build_options`]) is the same for every kernel and every parameter value.
pub const PREAMBLE: &str = "#include <sycl/sycl.hpp>\nnamespace kernelfoundry_preamble_end {}\n";

/// What [`SyclBackend::prepare_source`] hands to the runtime compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedSource {
    /// [`PREAMBLE`], `#include "kernelfoundry_params.h"` when there are parameters,
    /// `#line 1`, then the kernel's source unchanged.
    pub text: String,
    /// The contents of [`PARAMS_HEADER`] (one `#define` per parameter), when there are
    /// parameters.
    pub params_header: Option<String>,
}

impl PreparedSource {
    /// Lines of [`text`](Self::text) before the kernel's first line.
    fn lines_before_kernel(&self) -> usize {
        let prefix = PREAMBLE.lines().count() + usize::from(self.params_header.is_some());
        // And the `#line 1` marker.
        prefix + 1
    }

    /// `log` with the compiler's `rtc_N.cpp:LINE:` locations counted in the kernel's own lines:
    /// this runtime's compiler prints the physical line of the prepared text there (the
    /// `#line 1` marker only reaches the source excerpts it prints), so the lines the
    /// preamble adds are taken off again.
    pub fn kernel_lines(&self, log: &str) -> String {
        let shift = self.lines_before_kernel();
        let mut out = String::with_capacity(log.len());
        let mut rest = log;
        while let Some(at) = rest.find("rtc_") {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            // rtc_<digits>.cpp:<line>:
            let file_digits = tail[4..].bytes().take_while(u8::is_ascii_digit).count();
            let after_file = &tail[4 + file_digits..];
            let line_at = 4 + file_digits + ".cpp:".len();
            let line_digits = if file_digits > 0 && after_file.starts_with(".cpp:") {
                tail[line_at..]
                    .bytes()
                    .take_while(u8::is_ascii_digit)
                    .count()
            } else {
                0
            };
            let line = tail[line_at.min(tail.len())..][..line_digits]
                .parse::<usize>()
                .ok()
                .filter(|l| *l > shift && tail[line_at + line_digits..].starts_with(':'));
            match line {
                Some(l) => {
                    out.push_str(&tail[..line_at]);
                    out.push_str(&(l - shift).to_string());
                    rest = &tail[line_at + line_digits..];
                }
                None => {
                    out.push_str("rtc_");
                    rest = &tail[4..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

impl SyclBackend {
    /// The source actually compiled for `source` with `params`.
    ///
    /// Parameters are definitions, as in the other backends, but not `-D` options: a `-D`
    /// reaches the SYCL headers too, where the names kernel parameters commonly take are
    /// identifiers (`T`, `N` and `WG` are template or function parameter names in `sycl.hpp`),
    /// so `-DT=float` or `-DWG=16` break the headers. Instead the prepared source includes
    /// `<sycl/sycl.hpp>` first ([`PREAMBLE`]), then a virtual header [`PARAMS_HEADER`] with one
    /// `#define NAME value` per parameter, then `#line 1` and the kernel's own text: the headers
    /// never see the definitions (the kernel's own `#include <sycl/sycl.hpp>` finds them
    /// included already), everything in the kernel does, and clang's diagnostics count the
    /// kernel's own lines. Because the headers come first and alone, their precompiled form is
    /// shared by every kernel: the runtime compiler parses `sycl.hpp` once per machine instead
    /// of once per kernel (about 2 s each on a 2-core CPU).
    ///
    /// Fails on a parameter name that is not a C identifier, or a value that is empty or holds
    /// a line break or NUL byte.
    pub fn prepare_source(
        source: &str,
        params: &ParamValues,
    ) -> Result<PreparedSource, CompileInputError> {
        let mut text = String::with_capacity(PREAMBLE.len() + source.len() + 64);
        text.push_str(PREAMBLE);
        let params_header = if params.is_empty() {
            None
        } else {
            let header = define_lines(
                params,
                "a definition cannot be empty or hold a NUL byte or a line break",
            )?;
            text.push_str(&format!("#include \"{PARAMS_HEADER}\"\n"));
            Some(header)
        };
        text.push_str("#line 1\n");
        text.push_str(source);
        Ok(PreparedSource {
            text,
            params_header,
        })
    }

    /// The build options for `options`: its flags, verbatim, one option each. Fails on a NUL
    /// byte.
    pub fn build_options(options: &CompileOptions) -> Result<Vec<String>, CompileInputError> {
        check_flags(&options.flags)?;
        Ok(options.flags.clone())
    }
}

/// An entry point: a C identifier, optionally namespace-qualified (`ns::kernel`).
pub(super) fn is_entry_name(name: &str) -> bool {
    name.split("::").all(is_identifier)
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

//! What the compiler says about a kernel: resource usage from `ptxas -v` (NVRTC's log with
//! `--ptxas-options=-v`) and the entry points with their parameter sizes from the PTX.
//!
//! ptxas prints, per entry function:
//!
//! ```text
//! ptxas info    : Compiling entry function 'gemm' for 'sm_90'
//! ptxas info    : Function properties for gemm
//! ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 40 registers, used 1 barriers, 8448 bytes smem, 384 bytes cmem[0]
//! ```
//!
//! (older versions omit `used N barriers`, newer ones omit `cmem`; both parse).

/// Resource usage of one entry function, as ptxas reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// The entry function's (possibly mangled) name.
    pub name: String,
    /// The architecture it was compiled for (`sm_90`).
    pub arch: String,
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Named barriers used.
    pub barriers: Option<u32>,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u64,
    /// Constant memory bank 0 (kernel parameters and constants), bytes, when reported.
    pub constant_bytes: Option<u64>,
    /// Local memory per thread (older ptxas: `lmem`), bytes.
    pub local_bytes: u64,
    /// Stack frame per thread, bytes.
    pub stack_frame_bytes: u64,
    /// Bytes spilled from registers to local memory (stores).
    pub spill_store_bytes: u64,
    /// Bytes reloaded from spills (loads).
    pub spill_load_bytes: u64,
}

/// The entry functions ptxas compiled, with their resource usage, in log order.
pub fn parse_ptxas_log(log: &str) -> Vec<KernelResources> {
    let mut entries: Vec<KernelResources> = Vec::new();
    // Index of the entry being compiled ("Used …" belongs to it) and of the function whose
    // properties are listed ("stack frame …" belongs to it; may be a device function).
    let mut compiling: Option<usize> = None;
    let mut properties: Option<usize> = None;
    for line in log.lines() {
        // `ptxas info    : Used …`, `ptxas         .     0 bytes stack frame, …`, or the
        // same without the `ptxas` prefix.
        let mut text = line.trim();
        if let Some(rest) = text.strip_prefix("ptxas") {
            text = rest.trim_start();
            if let Some((head, rest)) = text.split_once(':') {
                if head.trim().chars().all(|c| c.is_ascii_alphabetic()) {
                    text = rest;
                }
            }
        }
        let text = text.trim().trim_start_matches('.').trim();
        if let Some(rest) = text.strip_prefix("Compiling entry function") {
            let mut quoted = rest.split('\'').skip(1).step_by(2);
            let name = quoted.next().unwrap_or("").to_owned();
            let arch = quoted.next().unwrap_or("").to_owned();
            entries.push(KernelResources {
                name,
                arch,
                ..KernelResources::default()
            });
            compiling = Some(entries.len() - 1);
            properties = None;
        } else if let Some(rest) = text.strip_prefix("Function properties for") {
            let name = rest.trim();
            properties = compiling.filter(|i| entries[*i].name == name);
        } else if text.contains("bytes stack frame") {
            if let Some(i) = properties {
                let e = &mut entries[i];
                for part in text.split(',') {
                    let value = leading_number(part);
                    if part.contains("stack frame") {
                        e.stack_frame_bytes = value.unwrap_or(0);
                    } else if part.contains("spill stores") {
                        e.spill_store_bytes = value.unwrap_or(0);
                    } else if part.contains("spill loads") {
                        e.spill_load_bytes = value.unwrap_or(0);
                    }
                }
            }
        } else if let Some(rest) = text.strip_prefix("Used") {
            if let Some(i) = compiling {
                let e = &mut entries[i];
                for part in rest.split(',') {
                    let part = part.trim();
                    if let Some(n) = part.strip_prefix("used") {
                        if n.contains("barrier") {
                            e.barriers = leading_number(n).and_then(|v| u32::try_from(v).ok());
                        }
                    } else if part.ends_with("registers") || part.ends_with("register") {
                        e.registers = leading_number(part).and_then(|v| u32::try_from(v).ok());
                    } else if part.ends_with("smem") {
                        e.shared_bytes = leading_number(part).unwrap_or(0);
                    } else if part.ends_with("cmem[0]") {
                        e.constant_bytes = leading_number(part);
                    } else if part.ends_with("lmem") {
                        e.local_bytes = leading_number(part).unwrap_or(0);
                    }
                }
            }
        }
    }
    entries
}

fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// An entry point of a PTX module with the byte size of each parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// The (possibly mangled) name.
    pub name: String,
    /// Size of each parameter in bytes, in order (8 for pointers).
    pub param_bytes: Vec<usize>,
}

/// The `.entry` functions of a PTX module and their parameter sizes.
pub fn parse_ptx_entries(ptx: &str) -> Vec<PtxEntry> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        let after = &rest[at + ".entry".len()..];
        // `.entry` must be a whole directive (not `.entry_foo`).
        if !after.starts_with(char::is_whitespace) {
            rest = after;
            continue;
        }
        let Some(open) = after.find('(') else {
            break;
        };
        let name = after[..open].trim().to_owned();
        let Some(close) = after[open..].find(')') else {
            break;
        };
        let params = &after[open + 1..open + close];
        let param_bytes = params
            .split(',')
            .map(str::trim)
            .filter(|p| p.starts_with(".param"))
            .map(param_size)
            .collect();
        if !name.is_empty() && !name.contains(char::is_whitespace) {
            out.push(PtxEntry { name, param_bytes });
        }
        rest = &after[open + close..];
    }
    out
}

/// The size of one `.param` declaration: `.param .u64 x`, `.param .align 8 .b8 x[16]`,
/// `.param .u64 .ptr .global .align 4 x`.
fn param_size(decl: &str) -> usize {
    let mut elem = 0usize;
    for token in decl.split_whitespace() {
        if let Some(ty) = token.strip_prefix('.') {
            let bits = ty
                .strip_prefix(['u', 's', 'b', 'f'])
                .and_then(|b| b.parse::<usize>().ok());
            if let Some(bits @ (8 | 16 | 32 | 64)) = bits {
                elem = bits / 8;
            }
        }
    }
    let count = decl
        .rsplit_once('[')
        .and_then(|(_, n)| n.trim_end_matches(']').trim().parse::<usize>().ok())
        .unwrap_or(1);
    elem * count
}

/// The entry among `entries` that `wanted` names: the exact name, or else the only C++-mangled
/// name of a function called `wanted` (`_Z4gemmiiiPKfS0_Pf` for `gemm`).
pub fn resolve_entry<'a>(entries: &'a [PtxEntry], wanted: &str) -> Option<&'a PtxEntry> {
    if let Some(e) = entries.iter().find(|e| e.name == wanted) {
        return Some(e);
    }
    let prefix = format!("_Z{}{wanted}", wanted.len());
    let mut mangled = entries.iter().filter(|e| e.name.starts_with(&prefix));
    match (mangled.next(), mangled.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG_12_9: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z7mangledPf' for 'sm_90'
ptxas info    : Function properties for _Z7mangledPf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
ptxas info    : Compile time = 1.265 ms
ptxas info    : Compiling entry function 'gemm' for 'sm_90'
ptxas info    : Function properties for gemm
ptxas         .     16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8448 bytes smem
ptxas info    : Compile time = 6.499 ms
";

    const LOG_OLD: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 2048 bytes smem, 360 bytes cmem[0], 4 bytes lmem
";

    #[test]
    fn parses_ptxas_12_9() {
        let r = parse_ptxas_log(LOG_12_9);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "_Z7mangledPf");
        assert_eq!(r[0].registers, Some(4));
        let g = &r[1];
        assert_eq!(g.name, "gemm");
        assert_eq!(g.arch, "sm_90");
        assert_eq!(g.registers, Some(40));
        assert_eq!(g.barriers, Some(1));
        assert_eq!(g.shared_bytes, 8448);
        assert_eq!(g.stack_frame_bytes, 16);
        assert_eq!(g.spill_store_bytes, 24);
        assert_eq!(g.spill_load_bytes, 20);
        assert_eq!(g.constant_bytes, None);
    }

    #[test]
    fn parses_older_ptxas_and_ignores_device_functions() {
        let r = parse_ptxas_log(LOG_OLD);
        assert_eq!(r.len(), 1);
        let k = &r[0];
        assert_eq!(k.registers, Some(12));
        assert_eq!(k.shared_bytes, 2048);
        assert_eq!(k.constant_bytes, Some(360));
        assert_eq!(k.local_bytes, 4);
        // The helper's 8-byte stack frame is not the kernel's.
        assert_eq!(k.stack_frame_bytes, 0);
        assert_eq!(k.barriers, None);
    }

    #[test]
    fn parses_ptx_entries_and_parameter_sizes() {
        let ptx = "
.version 8.8
.target sm_90
.visible .entry vector_add(
	.param .u64 vector_add_param_0,
	.param .u32 vector_add_param_3,
	.param .u64 .ptr .global .align 4 vector_add_param_4,
	.param .f64 vector_add_param_5,
	.param .align 8 .b8 vector_add_param_6[24]
)
{ ret; }
.weak .entry _Z4gemmiiiPKfS0_Pf(
	.param .u32 p0
)
{ ret; }
.visible .entry empty()
{ ret; }
";
        let e = parse_ptx_entries(ptx);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "vector_add");
        assert_eq!(e[0].param_bytes, vec![8, 4, 8, 8, 24]);
        assert_eq!(e[2].name, "empty");
        assert!(e[2].param_bytes.is_empty());
        assert_eq!(
            resolve_entry(&e, "gemm").unwrap().name,
            "_Z4gemmiiiPKfS0_Pf"
        );
        assert_eq!(
            resolve_entry(&e, "vector_add").unwrap().param_bytes.len(),
            5
        );
        assert!(resolve_entry(&e, "gem").is_none());
    }
}

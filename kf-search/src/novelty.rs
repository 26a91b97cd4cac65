//! The shipped novelty signature ([`kf_core::novelty`]): a kernel's tokens (kf-source's
//! toolkit) with comments and layout gone and its own names renamed in order of appearance,
//! its parameter values in a canonical form, and its manifest's tokens.

use kf_core::novelty::{Novelty, NoveltyConfig, Signature};
use kf_core::{KernelSource, ParamValue, ParamValues};
use kf_source::{strip_comments, tokens, Token, TokenKind};

/// Tokens per shingle of the near-duplicate comparison.
const SHINGLE: usize = 4;

/// Names that keep their spelling: C keywords and types, and the address spaces, qualifiers,
/// vector types and launch words of OpenCL C ([`kf_source::OPENCL_QUALIFIERS`] too), CUDA
/// and SYCL. Renaming them would make a
/// `float` kernel and its `double` twin alike; any other name followed by `(` (a function or
/// built-in) and every declared parameter keep theirs too.
const KEPT: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "constexpr",
    "continue",
    "default",
    "define",
    "defined",
    "do",
    "double",
    "elif",
    "else",
    "endif",
    "enum",
    "error",
    "extern",
    "float",
    "for",
    "goto",
    "half",
    "if",
    "ifdef",
    "ifndef",
    "include",
    "inline",
    "int",
    "long",
    "pragma",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "template",
    "typedef",
    "typename",
    "uchar",
    "uint",
    "ulong",
    "undef",
    "union",
    "unroll",
    "unsigned",
    "ushort",
    "using",
    "void",
    "volatile",
    "while",
    "size_t",
    "ptrdiff_t",
    "__attribute__",
    "reqd_work_group_size",
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "__restrict__",
    "__forceinline__",
    "__launch_bounds__",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "x",
    "y",
    "z",
    "w",
    "sycl",
    "nd_item",
    "nd_range",
    "range",
    "id",
    "accessor",
    "local_accessor",
    "handler",
    "queue",
    "group",
    "sub_group",
    "true",
    "false",
    "nullptr",
    "NULL",
];

/// Vector widths that make a type name of a base type (`float4`, `int2`).
const WIDTHS: &[&str] = &["2", "3", "4", "8", "16"];

fn kept(name: &str) -> bool {
    if KEPT.contains(&name) || kf_source::OPENCL_QUALIFIERS.contains(&name) {
        return true;
    }
    [
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double",
        "half",
    ]
    .iter()
    .any(|base| {
        name.strip_prefix(base)
            .is_some_and(|width| WIDTHS.contains(&width))
    })
}

/// The shipped [`Novelty`]: exact repeats are kernels equal after dropping comments and
/// layout, renaming the kernel's own identifiers (variables, macros, the entry point) in order
/// of appearance, and writing parameter values canonically (`16` and `16.0` alike, in name
/// order); near-duplicates are compared within the same parameter values and manifest by the
/// Jaccard similarity of token 4-grams.
///
/// ```
/// use kf_core::novelty::Novelty;
/// use kf_core::{KernelSource, Language, ParamValues};
/// use kf_search::SourceNovelty;
///
/// let a = KernelSource::new(Language::OpenCl, "k", "__kernel void k(__global float* a) { a[0] = 1; } // v1");
/// let b = KernelSource::new(Language::OpenCl, "scale", "__kernel void scale(__global float *out)\n{\n    out[0] = 1; /* v2 */\n}");
/// let c = KernelSource::new(Language::OpenCl, "k", "__kernel void k(__global double* a) { a[0] = 1; }");
/// let p = ParamValues::new();
/// let sig = |s: &KernelSource| SourceNovelty.signature(s, &p).exact;
/// assert_eq!(sig(&a), sig(&b), "comments, layout and names do not count");
/// assert_ne!(sig(&a), sig(&c), "types do");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SourceNovelty;

impl SourceNovelty {
    /// The normalised tokens of a source with these parameters.
    fn normalised(source: &KernelSource, params: &ParamValues) -> Vec<String> {
        let code = strip_comments(&source.text);
        let toks: Vec<Token<'_>> = tokens(&code);
        let mut names: Vec<&str> = Vec::new();
        toks.iter()
            .enumerate()
            .map(|(i, t)| {
                let called = toks.get(i + 1).is_some_and(|n| n.text == "(");
                let renamed = t.kind == TokenKind::Ident
                    && !kept(t.text)
                    && !(called && t.text != source.entry)
                    && params.get(t.text).is_none()
                    && !source.params.contains_key(t.text);
                if !renamed {
                    return t.text.to_owned();
                }
                let n = names.iter().position(|n| *n == t.text).unwrap_or_else(|| {
                    names.push(t.text);
                    names.len() - 1
                });
                format!("${n}")
            })
            .collect()
    }
}

/// Parameter values in a canonical text: by name, integral floats as integers, flags as 0/1.
fn canonical_params(params: &ParamValues) -> String {
    let mut pairs: Vec<(String, String)> = params
        .iter()
        .map(|(name, value)| {
            let v = match value {
                ParamValue::Bool(b) => u8::from(*b).to_string(),
                ParamValue::Int(i) => i.to_string(),
                ParamValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    (*f as i64).to_string()
                }
                ParamValue::Float(f) => format!("{f:?}"),
                ParamValue::Text(t) => format!("{t:?}"),
            };
            (name.to_string(), v)
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The manifest's tokens, TOML comments dropped.
fn manifest_text(source: &KernelSource) -> String {
    let Some(m) = source.manifest.as_deref() else {
        return String::new();
    };
    m.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| tokens(l).into_iter().map(|t| t.text.to_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn hash(parts: &[&str]) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(b"\x1f");
    }
    h.finalize()
}

impl Novelty for SourceNovelty {
    fn signature(&self, source: &KernelSource, params: &ParamValues) -> Signature {
        let toks = Self::normalised(source, params);
        let params_text = canonical_params(params);
        let manifest = manifest_text(source);
        let language = format!("{:?}", source.language);
        let group = hash(&[&language, &params_text, &manifest]);
        let joined = toks.join(" ");
        let exact = hash(&[group.to_hex().as_str(), &joined]);
        let mut shingles: Vec<u64> = toks
            .windows(SHINGLE.min(toks.len()).max(1))
            .map(|w| {
                let bytes = *hash(&w.iter().map(String::as_str).collect::<Vec<_>>()).as_bytes();
                u64::from_le_bytes([
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                ])
            })
            .collect();
        shingles.sort_unstable();
        shingles.dedup();
        Signature {
            exact: exact.to_hex()[..32].to_owned(),
            group: group.to_hex()[..32].to_owned(),
            shingles,
        }
    }
}

/// The shipped search's novelty settings: exact repeats are dropped; near-duplicates (at
/// least 95 % of their token 4-grams shared with a kernel of the same parameter values) are
/// counted in the report but still evaluated, because a one-token change of a GPU kernel (a
/// type, a bound) can matter.
pub fn shipped_config() -> NoveltyConfig {
    NoveltyConfig {
        near_threshold: 0.95,
        reject_near: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::Language;
    use proptest::prelude::*;

    fn src(text: &str) -> KernelSource {
        KernelSource::new(Language::OpenCl, "k", text)
    }

    const GEMM: &str = "__kernel void k(__global const float* A, __global float* C, int n) {
        int row = get_global_id(0);
        float acc = 0.0f;
        for (int i = 0; i < TS; i++) { acc += A[row * n + i]; }
        C[row] = acc;
    }";

    #[test]
    fn parameters_are_part_of_the_identity_in_canonical_form() {
        let s = src(GEMM);
        let p16: ParamValues = [("TS".to_owned(), ParamValue::Int(16))]
            .into_iter()
            .collect();
        let p16f: ParamValues = [("TS".to_owned(), ParamValue::Float(16.0))]
            .into_iter()
            .collect();
        let p32: ParamValues = [("TS".to_owned(), ParamValue::Int(32))]
            .into_iter()
            .collect();
        let sig = |p: &ParamValues| SourceNovelty.signature(&s, p);
        assert_eq!(sig(&p16).exact, sig(&p16f).exact);
        assert_ne!(sig(&p16).exact, sig(&p32).exact);
        assert_ne!(
            sig(&p16).group,
            sig(&p32).group,
            "a parameter move is never a near-duplicate"
        );
        // The parameter's name is kept: renaming it would change the kernel.
        let renamed = src(&GEMM.replace("TS", "TILE"));
        assert_ne!(
            SourceNovelty.signature(&renamed, &p16).exact,
            sig(&p16).exact
        );
    }

    #[test]
    fn a_one_token_edit_is_a_near_duplicate_and_a_rewrite_is_not() {
        let p = ParamValues::new();
        let a = SourceNovelty.signature(&src(GEMM), &p);
        let edited = SourceNovelty.signature(&src(&GEMM.replace("i < TS", "i <= TS")), &p);
        let rewrite = SourceNovelty.signature(
            &src(
                "__kernel void k(__global const float* A, __global float* C, int n) {
                int row = get_global_id(0);
                C[row] = A[row * n] + A[row * n + 1];
            }",
            ),
            &p,
        );
        assert_ne!(a.exact, edited.exact);
        let near = kf_core::novelty::jaccard(&a.shingles, &edited.shingles);
        let far = kf_core::novelty::jaccard(&a.shingles, &rewrite.shingles);
        assert!(near >= 0.8 && far < 0.6, "near {near}, far {far}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Renaming the kernel's own variables consistently, and changing its layout and
        /// comments, never changes its exact signature.
        #[test]
        fn renaming_and_layout_never_change_the_signature(
            names in proptest::collection::btree_set("[a-z][a-z0-9]{2,6}", 3),
            spaces in proptest::collection::vec("[ \t\n]{1,3}", 4),
            comment in "[a-zA-Z0-9 ]{0,20}",
        ) {
            let names: Vec<String> = names.into_iter().filter(|n| !kept(n)).collect();
            prop_assume!(names.len() == 3);
            let text = format!(
                "__kernel void k(__global float* {a}){s0}{{ int {b} = get_global_id(0);{s1}float {c} = {a}[{b}];{s2}/* {comment} */ {a}[{b}] = {c} * 2.0f;{s3}}}",
                a = names[0], b = names[1], c = names[2],
                s0 = spaces[0], s1 = spaces[1], s2 = spaces[2], s3 = spaces[3],
            );
            let reference = "__kernel void k(__global float* out) { int i = get_global_id(0); float v = out[i]; out[i] = v * 2.0f; }";
            let p = ParamValues::new();
            prop_assert_eq!(
                SourceNovelty.signature(&src(&text), &p).exact,
                SourceNovelty.signature(&src(reference), &p).exact
            );
        }
    }
}

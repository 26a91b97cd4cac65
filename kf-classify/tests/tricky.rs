//! Tricky cases: keywords where they do not count, templates switched by parameters, custom
//! rules, compiler facts and combinators.

use kf_classify::{
    ClassifierExt, ClassifyError, CompilerFactsClassifier, Languages, Pattern, RuleSet,
    StaticClassifier,
};
use kf_core::prelude::*;
use proptest::prelude::*;

fn eval() -> Evaluation {
    Evaluation::failed(Status::Correct, "")
}

fn classify_with(lang: Language, src: &str, params: ParamValues) -> Vec<usize> {
    let mut kernel = KernelSource::new(lang, "k", src);
    for (name, _) in params.iter() {
        kernel = kernel.with_param(name, Vec::<ParamValue>::new());
    }
    StaticClassifier::new()
        .classify(&Candidate::seed(kernel, params), &eval())
        .unwrap()
        .coords
}

fn cl(src: &str) -> Vec<usize> {
    classify_with(Language::OpenCl, src, ParamValues::new())
}

const NAIVE: &str = "__kernel void k(__global const float* x, __global float* y, const int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = 2.0f * x[i];
}";

#[test]
fn the_naive_kernel_is_the_origin() {
    assert_eq!(cl(NAIVE), vec![0, 1, 0]);
}

#[test]
fn keywords_in_comments_do_not_count() {
    let src = format!(
        "// __local float tile[16][16]; barrier(CLK_LOCAL_MEM_FENCE);\n\
         /* sub_group_reduce_add(x); atomic_add(p, 1); vload4(0, x);\n   __local */\n{NAIVE}"
    );
    assert_eq!(cl(&src), vec![0, 1, 0]);
    let cuda = "// __shared__ float s[32]; __syncthreads(); __shfl_down_sync(m, v, 1);\n\
                __global__ void k(float* x) { x[threadIdx.x] = 1.0f; /* float4 */ }";
    assert_eq!(
        classify_with(Language::Cuda, cuda, ParamValues::new()),
        vec![0, 1, 0]
    );
}

#[test]
fn keywords_in_strings_do_not_count() {
    let src = "__kernel void k(__global float* y) {\n\
               printf(\"__local barrier(CLK_LOCAL_MEM_FENCE) float4 %d\\n\", 1);\n\
               printf(\"sub_group_reduce_add( \\\" __local \");\n\
               y[0] = 1.0f;\n}";
    assert_eq!(cl(src), vec![0, 1, 0]);
}

#[test]
fn keywords_in_disabled_branches_do_not_count() {
    let src = "#if 0\n__local float dead[64];\nbarrier(CLK_LOCAL_MEM_FENCE);\n#endif\n\
               #ifdef NEVER_DEFINED\nfloat acc[8]; acc[0] += 1.0f;\n#endif\n"
        .to_owned()
        + NAIVE;
    assert_eq!(cl(&src), vec![0, 1, 0]);
}

#[test]
fn identifiers_that_merely_contain_keywords_do_not_count() {
    let src = "__kernel void k(__global const float* x, __global float* y) {
        const int local_size = get_local_size(0);
        const int my_local_id = get_local_id(0);
        float my_local_sum = x[get_global_id(0)];
        float shared_value = my_local_sum * local_size + my_local_id;
        int barrier_count = 0;
        float float4_like = shared_value;
        y[get_global_id(0)] = float4_like + barrier_count;
    }";
    assert_eq!(cl(src), vec![0, 1, 0]);
}

const TEMPLATE: &str = "#ifndef WPT\n#define WPT 1\n#endif
__kernel void gemm(const int K, __global const float* A, __global const float* B, __global float* C) {
#if USE_LOCAL
    __local float Asub[TS][TS];
#endif
    float acc[WPT];
    for (int w = 0; w < WPT; w++) acc[w] = 0.0f;
    for (int k = 0; k < K; k++) {
#if USE_LOCAL
        Asub[0][k % TS] = A[k];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = 0; w < WPT; w++) acc[w] += Asub[0][k % TS] * B[k * WPT + w];
#else
        for (int w = 0; w < WPT; w++) acc[w] += A[k] * B[k * WPT + w];
#endif
    }
    for (int w = 0; w < WPT; w++) C[w] = acc[w];
}";

fn template(use_local: i64, wpt: i64) -> Vec<usize> {
    let params = ParamValues::new()
        .with("USE_LOCAL", use_local)
        .with("WPT", wpt)
        .with("TS", 16i64);
    classify_with(Language::OpenCl, TEMPLATE, params)
}

#[test]
fn templates_are_classified_as_built() {
    assert_eq!(template(0, 1), vec![0, 1, 0]);
    assert_eq!(template(1, 1), vec![2, 1, 1]);
    assert_eq!(template(0, 4), vec![0, 3, 0]);
    assert_eq!(template(1, 8), vec![2, 3, 1]);
    // Booleans work as well as integers.
    let params = ParamValues::new()
        .with("USE_LOCAL", true)
        .with("WPT", 1i64)
        .with("TS", 16i64);
    assert_eq!(
        classify_with(Language::OpenCl, TEMPLATE, params),
        vec![2, 1, 1]
    );
}

#[test]
fn a_declared_parameter_without_a_value_keeps_both_branches() {
    let kernel = KernelSource::new(Language::OpenCl, "gemm", TEMPLATE)
        .with_param("USE_LOCAL", [0i64, 1])
        .with_param("WPT", [1i64, 4]);
    let d = StaticClassifier::new()
        .classify(&Candidate::seed(kernel, ParamValues::new()), &eval())
        .unwrap();
    // Unknown USE_LOCAL keeps the local branch; unknown WPT cannot rule out blocking.
    assert_eq!(d.coords, vec![2, 3, 1]);
}

#[test]
fn the_evaluated_parameter_values_win_over_the_candidates() {
    let kernel = KernelSource::new(Language::OpenCl, "gemm", TEMPLATE);
    let cand = Candidate::seed(
        kernel,
        ParamValues::new()
            .with("USE_LOCAL", 0i64)
            .with("WPT", 1i64)
            .with("TS", 16i64),
    );
    let mut e = eval();
    e.params = ParamValues::new().with("USE_LOCAL", 1i64);
    let d = StaticClassifier::new().classify(&cand, &e).unwrap();
    assert_eq!(d.coords, vec![2, 1, 1]);
}

#[test]
fn barriers_and_sub_groups_are_told_apart_in_sycl() {
    let head = "SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))\n\
                void k(float* x, int n) {\n auto it = syclexp::this_work_item::get_nd_item<1>();\n";
    let sub = format!(
        "{head} auto sg = it.get_sub_group();\n sycl::group_barrier(sg);\n x[0] = 1.0f;\n}}"
    );
    assert_eq!(
        classify_with(Language::Sycl, &sub, ParamValues::new()),
        vec![0, 1, 2]
    );
    let wg = format!("{head} sycl::group_barrier(it.get_group());\n x[0] = 1.0f;\n}}");
    assert_eq!(
        classify_with(Language::Sycl, &wg, ParamValues::new()),
        vec![0, 1, 1]
    );
    let both = format!(
        "{head} auto sg = it.get_sub_group();\n float v = sycl::reduce_over_group(sg, x[0], sycl::plus<>());\n\
         sycl::group_barrier(it.get_group());\n x[0] = v;\n}}"
    );
    assert_eq!(
        classify_with(Language::Sycl, &both, ParamValues::new()),
        vec![0, 1, 3]
    );
    let commented =
        format!("{head} // sycl::local_accessor<float, 1> t; group_barrier(g);\n x[0] = 1.0f;\n}}");
    assert_eq!(
        classify_with(Language::Sycl, &commented, ParamValues::new()),
        vec![0, 1, 0]
    );
}

#[test]
fn patterns_are_language_specific() {
    // `local float` is OpenCL's qualifier, but just a word pair in CUDA.
    let src = "__global__ void k(float* x) { typedef float local; local t = x[0]; x[1] = t; }";
    assert_eq!(
        classify_with(Language::Cuda, src, ParamValues::new()),
        vec![0, 1, 0]
    );
    // `__shared__` means nothing to OpenCL.
    let src = "#define __shared__\n__kernel void k(__global float* x) { x[0] = 1.0f; }";
    assert_eq!(cl(src), vec![0, 1, 0]);
}

#[test]
fn local_atomics_are_not_cross_group() {
    let src = "__kernel void h(__global const uchar* d, __global uint* out) {
        __local uint bins[256];
        atomic_inc(&bins[d[get_global_id(0)]]);
        barrier(CLK_LOCAL_MEM_FENCE);
        out[get_local_id(0)] = bins[get_local_id(0)];
    }";
    assert_eq!(cl(src), vec![2, 1, 1]);
    let global = src.replace(
        "out[get_local_id(0)] = bins[get_local_id(0)];",
        "atomic_add(&out[get_local_id(0)], bins[get_local_id(0)]);",
    );
    assert_eq!(cl(&global), vec![2, 1, 3]);
}

#[test]
fn evidence_names_the_patterns_that_fired() {
    let src = "__kernel void k(__global float* x) {
        __local float t[2][16][16];
        const int cur = get_group_id(0) & 1;
        t[cur][0][0] = x[0];
        barrier(CLK_LOCAL_MEM_FENCE);
        x[1] = t[cur][0][0];
    }";
    let kernel = KernelSource::new(Language::OpenCl, "k", src);
    let d = StaticClassifier::new()
        .classify(
            &Candidate::seed(kernel.clone(), ParamValues::new()),
            &eval(),
        )
        .unwrap();
    assert_eq!(d.source, "static-patterns");
    assert_eq!(d.coords, vec![3, 1, 1]);
    assert_eq!(d.evidence.len(), 3);
    assert!(d.evidence[0].starts_with("memory_access=3 (multi_level): L2 opencl_local; L3 "));
    assert!(d.evidence[0].contains("double_buffer_decl"));
    assert!(d.evidence[2].contains("opencl_barrier"));
    let explanation = StaticClassifier::new()
        .explain(&kernel, &ParamValues::new())
        .unwrap();
    assert_eq!(explanation.coords(), d.coords);
    let mem = &explanation.dimensions[0];
    assert!(mem.levels[3].passed && mem.levels[3].score >= mem.levels[3].threshold);
    assert!(!mem.levels[1].passed);
    assert_eq!(cl(NAIVE), vec![0, 1, 0]);
    let naive = StaticClassifier::new()
        .classify(
            &Candidate::seed(
                KernelSource::new(Language::OpenCl, "k", NAIVE),
                ParamValues::new(),
            ),
            &eval(),
        )
        .unwrap();
    assert_eq!(naive.evidence[0], "memory_access=0 (global): no evidence");
}

#[test]
fn custom_patterns_extend_the_rules() {
    let mut rules = RuleSet::kernel_default().unwrap();
    rules
        .add_pattern(
            "memory_access",
            2,
            Pattern::regex("slm_macro", Languages::OPENCL, r"\bSLM\b", 1.0).unwrap(),
        )
        .unwrap();
    let src = "#define SLM __local\n__kernel void k(__global float* x) { x[0] = 1.0f; }";
    let plain = "__kernel void k(__global float* x) { SLM float t[4]; t[0] = x[0]; }";
    let custom = StaticClassifier::with_rules(rules.clone()).unwrap();
    let cand = Candidate::seed(
        KernelSource::new(Language::OpenCl, "k", plain),
        ParamValues::new(),
    );
    assert_eq!(
        StaticClassifier::new()
            .classify(&cand, &eval())
            .unwrap()
            .coords[0],
        0
    );
    assert_eq!(custom.classify(&cand, &eval()).unwrap().coords[0], 2);
    // A macro body is matched too: the define line stays in the text.
    assert_eq!(cl(src)[0], 2);

    assert!(matches!(
        Pattern::regex("broken", Languages::ALL, "(", 1.0),
        Err(ClassifyError::Pattern { .. })
    ));
    assert!(matches!(
        rules.set_threshold("memory_access", 9, 1.0),
        Err(ClassifyError::UnknownLevel { levels: 4, .. })
    ));
    let mut short = rules.clone();
    short.dimensions.pop();
    assert!(matches!(
        StaticClassifier::with_rules(short),
        Err(ClassifyError::SpaceMismatch(_))
    ));
}

#[test]
fn compiler_facts_refine_the_static_descriptor() {
    let classifier = CompilerFactsClassifier::new().high_registers(32);
    let cand = |src: &str| {
        Candidate::seed(
            KernelSource::new(Language::OpenCl, "k", src.to_owned()),
            ParamValues::new(),
        )
    };

    // No facts: the static descriptor passes through untouched.
    let d = classifier.classify(&cand(NAIVE), &eval()).unwrap();
    assert_eq!(
        (d.coords.clone(), d.source.as_str()),
        (vec![0, 1, 0], "static-patterns")
    );

    // Local memory the patterns cannot see raises memory access to 2.
    let mut e = eval();
    e.compiler.local_mem_bytes = Some(4096);
    let d = classifier.classify(&cand(NAIVE), &e).unwrap();
    assert_eq!(d.coords, vec![2, 1, 0]);
    assert_eq!(d.source, "static-patterns+compiler-facts");
    assert!(d.evidence.last().unwrap().contains("4096 bytes"));

    // Register blocking confirmed; spilled register tiles lose the register level.
    let blocked = "__kernel void k(__global float* x, const int n) {
        __local float t[2][64];
        float r[8];
        float acc[8];
        for (int i = 0; i < 8; i++) r[i] = t[0][i];
        for (int k = 0; k < n; k++) for (int i = 0; i < 8; i++) acc[i] += r[i] * x[k];
        barrier(CLK_LOCAL_MEM_FENCE);
        x[0] = acc[0];
    }";
    let mut e = eval();
    e.compiler.registers = Some(96);
    let d = classifier.classify(&cand(blocked), &e).unwrap();
    assert_eq!(d.coords, vec![3, 3, 1]);
    assert!(d
        .evidence
        .iter()
        .any(|l| l.contains("96 registers confirm")));
    e.compiler.spill_bytes = Some(128);
    let d = classifier.classify(&cand(blocked), &e).unwrap();
    assert_eq!(d.coords, vec![2, 3, 1]);
    assert!(d.evidence.iter().any(|l| l.contains("spill")));

    // The extension trait builds the same thing over any classifier.
    let via_ext = StaticClassifier::new().with_compiler_facts();
    assert_eq!(
        via_ext.classify(&cand(blocked), &e).unwrap().coords,
        vec![2, 3, 1]
    );
}

#[test]
fn refine_checks_the_space_and_wraps_inner_errors() {
    let out_of_space =
        StaticClassifier::new().refine(|d: &mut Descriptor, _: &Candidate, _: &Evaluation| {
            d.coords[0] = 7;
        });
    let cand = Candidate::seed(
        KernelSource::new(Language::OpenCl, "k", NAIVE),
        ParamValues::new(),
    );
    assert!(matches!(
        out_of_space.classify(&cand, &eval()),
        Err(ClassifyError::OutOfSpace(_))
    ));

    /// A classifier that always fails.
    struct Failing(DescriptorSpace);
    impl BehaviorClassifier for Failing {
        type Error = std::io::Error;
        fn space(&self) -> &DescriptorSpace {
            &self.0
        }
        fn classify(&self, _: &Candidate, _: &Evaluation) -> Result<Descriptor, Self::Error> {
            Err(std::io::Error::other("judge unreachable"))
        }
    }
    let wrapped = CompilerFactsClassifier::wrap(Failing(DescriptorSpace::kernel_default()));
    let err = wrapped.classify(&cand, &eval()).unwrap_err();
    assert!(matches!(err, ClassifyError::Inner(_)));
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn unbalanced_and_empty_sources_do_not_fail() {
    for src in [
        "",
        "{{{{",
        "}}}} ))) ]]]",
        "for (",
        "for (;;",
        "__kernel void k(",
        "#if\n#elif\n#else\n#endif\n#endif",
        "#if (1\nx\n#endif",
        "float a[; a[0] += ",
        "/* unterminated comment",
        "\"unterminated string",
        "x = 1 << 99999999999999999999;",
    ] {
        for lang in [Language::OpenCl, Language::Sycl, Language::Cuda] {
            let coords = classify_with(lang, src, ParamValues::new());
            assert_eq!(coords.len(), 3, "{src:?}");
        }
    }
}

/// Fragments the property test below strings together.
const TOKENS: &[&str] = &[
    "__kernel void k(",
    "__global__ void k(",
    "for (",
    "; ",
    ")",
    "{",
    "}",
    "[",
    "]",
    "#if ",
    "#else\n",
    "#endif\n",
    "\n",
    "__local float t[2][N];",
    "acc[i] += ",
    "barrier(",
    "i < n",
    "= ",
    "\"",
    "'",
    "/*",
    "*/",
    "//",
    "sub_group_reduce_add(",
    "atomic_add(&",
    "exp(m - m_new)",
    "*",
    "float r[4]; r[i] = t[0][i];",
    "\\\n",
    "é",
    "defined(",
    "SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((",
    "VLOAD(&t[",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Arbitrary soups of C-ish tokens never panic and always land in the space.
    #[test]
    fn classification_never_panics(
        tokens in proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(TOKENS).prop_map(String::from),
                "[a-z_]{1,6}",
                "[0-9]{1,3}",
            ],
            0..60,
        ),
        lang in prop_oneof![Just(Language::OpenCl), Just(Language::Sycl), Just(Language::Cuda)],
        n in 0i64..4,
    ) {
        let src: String = tokens.concat();
        let params = ParamValues::new().with("N", n);
        let kernel = KernelSource::new(lang, "k", src);
        let d = StaticClassifier::new().classify(&Candidate::seed(kernel, params), &eval()).unwrap();
        prop_assert!(DescriptorSpace::kernel_default().check(&d.coords).is_ok());
    }
}

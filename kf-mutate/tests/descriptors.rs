//! The SYCL renderings span the same behaviour cells as the OpenCL templates: every structure
//! that instantiates in both languages is placed in the same cell of the default descriptor
//! space by kf-classify's static classifier, and SYCL's own switches (sub-group shuffles, a
//! required sub-group size) are classified as sub-group coordination.

use kf_classify::StaticClassifier;
use kf_core::prelude::*;
use kf_mutate::{Structure, TemplateLibrary};

fn cell(classifier: &StaticClassifier, source: KernelSource, params: ParamValues) -> Vec<usize> {
    let eval = Evaluation::failed(Status::Correct, "");
    classifier
        .classify(&Candidate::seed(source, params), &eval)
        .unwrap()
        .coords
}

fn libraries(language: Language) -> TemplateLibrary {
    TemplateLibrary::builtin_for(language)
        .unwrap()
        .with_softmax_for(language)
        .unwrap()
}

#[test]
fn sycl_variants_land_in_the_cells_of_their_opencl_twins() {
    let classifier = StaticClassifier::new();
    let opencl = libraries(Language::OpenCl);
    let sycl = libraries(Language::Sycl);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for t in opencl.templates() {
        let r = sycl.get(t.name()).unwrap();
        for structure in t.all_structures() {
            let (Ok(a), Ok(b)) = (t.instantiate(&structure), r.instantiate(&structure)) else {
                continue;
            };
            let pa = a.manifest.default_params();
            let pb = b.manifest.default_params();
            let ca = cell(&classifier, a.source, pa);
            let cb = cell(&classifier, b.source, pb);
            compared += 1;
            if ca != cb {
                mismatches.push(format!(
                    "{} {structure}: OpenCL {ca:?}, SYCL {cb:?}",
                    t.name()
                ));
            }
        }
    }
    assert!(compared > 60, "only {compared} structures compared");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn sycl_sub_group_switches_are_sub_group_coordination() {
    let classifier = StaticClassifier::new();
    let sycl = libraries(Language::Sycl);
    let coordination = |template: &str, structure: Structure| {
        let v = sycl.get(template).unwrap().instantiate(&structure).unwrap();
        let params = v.manifest.default_params();
        cell(&classifier, v.source, params)[2]
    };
    for shuffle in [0, 1, 2] {
        let s = Structure::new().with("REDUCE", 1).with("SHUFFLE", shuffle);
        assert_eq!(coordination("softmax_group", s), 2, "SHUFFLE={shuffle}");
    }
    let s = Structure::new().with("SUBGROUP", 1).with("SHUFFLE", 1);
    assert_eq!(coordination("gemm_blocked", s), 2);
}

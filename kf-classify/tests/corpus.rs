//! The labelled corpus: `tests/corpus/labels.toml` gives the expected cell of every kernel
//! under `tests/corpus/`. Agreement must reach 90% on every dimension and per kernel.

use std::path::Path;

use kf_classify::StaticClassifier;
use kf_core::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Labels {
    kernel: Vec<Label>,
}

#[derive(Deserialize)]
struct Label {
    file: String,
    expect: Vec<usize>,
    #[serde(default)]
    params: toml::Table,
    #[serde(default)]
    holdout: bool,
}

fn language(file: &str) -> Language {
    match Path::new(file).extension().and_then(|e| e.to_str()) {
        Some("cl") => Language::OpenCl,
        Some("cu") => Language::Cuda,
        _ => Language::Sycl,
    }
}

fn params(table: &toml::Table) -> ParamValues {
    table
        .iter()
        .map(|(k, v)| {
            let v = match v {
                toml::Value::Integer(i) => ParamValue::Int(*i),
                toml::Value::Boolean(b) => ParamValue::Bool(*b),
                toml::Value::Float(f) => ParamValue::Float(*f),
                other => ParamValue::Text(other.to_string()),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Agreement counts over a set of kernels.
#[derive(Default)]
struct Tally {
    kernels: usize,
    per_dim: [usize; 3],
    exact: usize,
}

impl Tally {
    fn add(&mut self, got: &[usize], want: &[usize]) -> bool {
        self.kernels += 1;
        let mut all = true;
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if g == w {
                self.per_dim[i] += 1;
            } else {
                all = false;
            }
        }
        self.exact += usize::from(all);
        all
    }

    fn print(&self, title: &str, names: &[String]) {
        let n = self.kernels;
        let pct = |k: usize, n: usize| 100.0 * k as f64 / n.max(1) as f64;
        println!("{title}: {n} kernels");
        for (name, ok) in names.iter().zip(&self.per_dim) {
            println!("  {name:<22} {ok:>3}/{n} = {:5.1}%", pct(*ok, n));
        }
        let total: usize = self.per_dim.iter().sum();
        println!(
            "  {:<22} {total:>3}/{} = {:5.1}%",
            "all dimensions",
            3 * n,
            pct(total, 3 * n)
        );
        println!(
            "  {:<22} {:>3}/{n} = {:5.1}%",
            "exact (all three)",
            self.exact,
            pct(self.exact, n)
        );
    }

    fn assert_at_least_90(&self, title: &str, names: &[String], report: &str) {
        let n = self.kernels;
        for (name, ok) in names.iter().zip(&self.per_dim) {
            assert!(
                *ok * 10 >= n * 9,
                "{title} {name}: {ok}/{n} below 90%\n{report}"
            );
        }
        assert!(
            self.exact * 10 >= n * 9,
            "{title} exact agreement {}/{n} below 90%\n{report}",
            self.exact
        );
    }
}

#[test]
fn labelled_corpus_agreement() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let text = std::fs::read_to_string(dir.join("labels.toml")).unwrap();
    let labels: Labels = toml::from_str(&text).unwrap();
    let classifier = StaticClassifier::new();
    let eval = Evaluation::failed(Status::Correct, "");
    let names: Vec<String> = classifier
        .space()
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names.len(), 3);

    let (mut dev, mut held, mut all) = (Tally::default(), Tally::default(), Tally::default());
    let mut files = std::collections::BTreeSet::new();
    let mut languages = std::collections::BTreeSet::new();
    let mut report = String::new();
    for label in &labels.kernel {
        files.insert(label.file.clone());
        let lang = language(&label.file);
        languages.insert(lang.as_str());
        let src = std::fs::read_to_string(dir.join(&label.file)).unwrap();
        let mut kernel = KernelSource::new(lang, "kernel", src);
        for name in label.params.keys() {
            kernel = kernel.with_param(name.clone(), Vec::<ParamValue>::new());
        }
        let cand = Candidate::seed(kernel, params(&label.params));
        let d = classifier.classify(&cand, &eval).unwrap();
        assert_eq!(d.source, "static-patterns");
        assert_eq!(d.evidence.len(), 3);
        all.add(&d.coords, &label.expect);
        let ok = if label.holdout { &mut held } else { &mut dev }.add(&d.coords, &label.expect);
        if !ok {
            report.push_str(&format!(
                "MISMATCH {}{} {:?}: expected {:?}, got {:?}\n    {}\n",
                if label.holdout { "(held out) " } else { "" },
                label.file,
                label.params,
                label.expect,
                d.coords,
                d.evidence.join("\n    ")
            ));
        }
    }
    println!("{report}");
    println!("{} files, languages {languages:?}", files.len());
    dev.print("development corpus", &names);
    held.print("held-out corpus", &names);
    all.print("whole corpus", &names);

    assert!(files.len() >= 30, "the corpus needs at least 30 kernels");
    assert_eq!(languages.len(), 3);
    // Every level of every dimension is represented.
    for (d, name) in names.iter().enumerate() {
        for level in 0..4 {
            assert!(
                labels.kernel.iter().any(|l| l.expect[d] == level),
                "no kernel labelled {name} = {level}"
            );
        }
    }
    dev.assert_at_least_90("development corpus", &names, &report);
    // The held-out kernels were labelled without tuning the classifier on them: their
    // agreement (measured 16/16 on every dimension) must stay at 90% too, i.e. at most one
    // miss per dimension among 16.
    assert!(
        held.kernels >= 10,
        "the held-out corpus needs at least 10 kernels"
    );
    held.assert_at_least_90("held-out corpus", &names, &report);
    all.assert_at_least_90("whole corpus", &names, &report);
}

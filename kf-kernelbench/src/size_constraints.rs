//! What a problem's forward() needs of its sizes, and the other input sets that keep it.
//!
//! The evaluator checks a kernel at other sizes too: without `[[alternative_sizes]]` it halves
//! each size in turn, then all of them, leaving out a halving that breaks a divisibility the
//! sizes have ([`keeps_divisibility`]). Some problems need more: a depthwise convolution's
//! output channels stay a multiple of its groups, which are its input channels (equal at the
//! problem's sizes, so not a divisibility the rule sees), and `predictions * targets` of a
//! (batch, n) and a (batch,) tensor works only while n equals batch. The NumPy stand-in records
//! such needs as it runs forward(); where the evaluator's own rule would break one, the task
//! file names its alternatives: the same halvings, sizes that must stay equal halved together,
//! and the ones that still break a need left out.

use indexmap::IndexMap;
use kf_eval::task::file::{keeps_divisibility, ExprText};
use kf_eval::task::Sizes;
use kf_manifest::{Expr, ExprSite, Symbols};
use serde::{Deserialize, Serialize};

/// Pairs of size expressions forward() needs divisible (`[multiple, divisor]`) or equal, as
/// the stand-in recorded them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(crate) struct SizeConstraints {
    #[serde(default)]
    divisible: Vec<(String, String)>,
    #[serde(default)]
    equal: Vec<(String, String)>,
}

impl SizeConstraints {
    /// Whether every need holds at `sizes` (an expression that does not evaluate is a need
    /// that does not hold).
    fn hold(&self, sizes: &Sizes) -> bool {
        let symbols = Symbols::new().with_sizes(sizes);
        let value = |text: &str| {
            let site = ExprSite {
                file: "forward()".into(),
                field: "size constraint".into(),
            };
            Expr::parse(text, &site)
                .and_then(|e| e.eval_i64(&symbols, &site))
                .ok()
        };
        let divisible = self
            .divisible
            .iter()
            .all(|(m, d)| match (value(m), value(d)) {
                (Some(m), Some(d)) => d > 0 && m % d == 0,
                _ => false,
            });
        let equal = self.equal.iter().all(|(a, b)| match (value(a), value(b)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        });
        divisible && equal
    }

    /// The sizes that must change with `name`: itself and every size an equality ties to it
    /// (through others: a ~ b, b ~ c), where both sides are size names.
    fn tied(&self, name: &str, sizes: &Sizes) -> Vec<String> {
        let mut class = vec![name.to_owned()];
        let mut grown = true;
        while grown {
            grown = false;
            for (a, b) in &self.equal {
                if !(sizes.contains_key(a) && sizes.contains_key(b)) {
                    continue;
                }
                for (x, y) in [(a, b), (b, a)] {
                    if class.contains(x) && !class.contains(y) {
                        class.push(y.clone());
                        grown = true;
                    }
                }
            }
        }
        class
    }

    /// The task file's `[[alternative_sizes]]` for `sizes`, or none where the evaluator's own
    /// halvings already keep every need (the task file then names none and the evaluator's
    /// rule applies). Each size halved in turn with the sizes tied to it, then all of them,
    /// written as expressions (`n = "n / 2"`) so that they follow sizes a user gives; a set
    /// that breaks a need or a divisibility, or repeats another, is left out.
    pub(crate) fn alternatives(&self, sizes: &Sizes) -> Vec<IndexMap<String, ExprText>> {
        if self.divisible.is_empty() && self.equal.is_empty() {
            return Vec::new();
        }
        let halve = |names: &[String]| -> Option<Sizes> {
            let mut s = sizes.clone();
            for n in names {
                let v = s.get_mut(n)?;
                *v /= 2;
            }
            s.values().all(|v| *v > 0).then_some(s)
        };
        let keeps = |s: &Sizes| s != sizes && keeps_divisibility(sizes, s);
        let evaluators_own: Vec<Sizes> = sizes
            .keys()
            .filter_map(|k| halve(std::slice::from_ref(k)))
            .filter(|s| keeps(s))
            .collect();
        if evaluators_own.iter().all(|s| self.hold(s)) {
            return Vec::new();
        }
        let mut chosen: Vec<Vec<String>> = Vec::new();
        let mut seen: Vec<Sizes> = Vec::new();
        let every: Vec<String> = sizes.keys().cloned().collect();
        let groups = sizes
            .keys()
            .map(|k| self.tied(k, sizes))
            .chain(std::iter::once(every));
        for names in groups {
            let Some(s) = halve(&names) else { continue };
            if keeps(&s) && self.hold(&s) && !seen.contains(&s) {
                seen.push(s);
                chosen.push(names);
            }
        }
        chosen
            .into_iter()
            .map(|names| {
                names
                    .into_iter()
                    .map(|n| {
                        let half = ExprText::Text(format!("{n} / 2"));
                        (n, half)
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(pairs: &[(&str, i64)]) -> Sizes {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn names(alternatives: &[IndexMap<String, ExprText>]) -> Vec<Vec<String>> {
        alternatives
            .iter()
            .map(|a| a.keys().cloned().collect())
            .collect()
    }

    /// A depthwise convolution: groups are the input channels, equal to the output
    /// channels. Halving the output channels alone breaks "output channels a multiple of
    /// the groups", so the task names the halvings that keep it.
    #[test]
    fn a_depthwise_convolution_never_halves_its_output_channels_alone() {
        let s = sizes(&[("batch", 8), ("in_channels", 32), ("out_channels", 32)]);
        let c = SizeConstraints {
            divisible: vec![
                ("in_channels".into(), "in_channels".into()),
                ("out_channels".into(), "in_channels".into()),
            ],
            equal: Vec::new(),
        };
        let alternatives = c.alternatives(&s);
        assert_eq!(
            names(&alternatives),
            [
                vec!["batch"],
                vec!["in_channels"],
                vec!["batch", "in_channels", "out_channels"]
            ]
        );
        assert_eq!(alternatives[0]["batch"], ExprText::Text("batch / 2".into()));
    }

    /// `predictions * targets` of (batch, n) and (batch,): n and batch halve together.
    #[test]
    fn sizes_a_broadcast_needs_equal_halve_together() {
        let s = sizes(&[("batch_size", 64), ("n", 64), ("dim", 1)]);
        let c = SizeConstraints {
            divisible: Vec::new(),
            equal: vec![("n".into(), "batch_size".into())],
        };
        // `dim` = 1 halves to 0, so neither it alone nor all of them: one alternative.
        assert_eq!(names(&c.alternatives(&s)), [vec!["batch_size", "n"]]);
    }

    /// Needs the evaluator's own halvings keep: the task file names no alternatives.
    #[test]
    fn needs_the_evaluators_rule_keeps_add_nothing() {
        let s = sizes(&[("channels", 24), ("groups", 8)]);
        let c = SizeConstraints {
            divisible: vec![("channels".into(), "groups".into())],
            equal: Vec::new(),
        };
        assert!(c.alternatives(&s).is_empty());
        assert!(SizeConstraints::default().alternatives(&s).is_empty());
    }
}

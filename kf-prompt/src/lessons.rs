//! The "recent lessons" of a run: what became of the LLM's children across the whole run
//! (failures with the diagnostics that matter, successes), deduplicated and bounded, for the
//! prompt section every request shows whatever its parent.
//!
//! Lessons are made from credit events only: a resumed run gets those back from its run
//! directory (the engine credits replayed children again), so its prompts, and the recorded
//! answers they are keyed by, are the same as the uninterrupted run's. (A reply that repeats
//! a kernel is told so within its own step, see the mutator.)
//!
//! A lesson of step `s` is built from credit that settled by step `s + lag` (see
//! [`crate::population`]), so it reaches every prompt from then on until newer lessons push it
//! out: within `lag` steps, whatever the selection does.

use kf_core::Status;

use crate::population::CreditEvent;
use crate::render::summarize;

/// The newest `max` distinct lessons, newest first, each at most `max_chars` characters:
/// failures and successes of `credits`. Lessons with the same status and diagnostics are
/// shown once, with how often they happened.
pub(crate) fn recent_lessons(credits: &[CreditEvent], max: usize, max_chars: usize) -> Vec<String> {
    if max == 0 {
        return Vec::new();
    }
    // (step, dedup key, text)
    let mut all: Vec<(u64, String, String)> = Vec::new();
    for c in credits {
        let mut text = format!("step {}: child {}", c.step, c.child);
        if let Some(p) = c.parent {
            text.push_str(&format!(" of {p}"));
        }
        if !c.how.is_empty() {
            text.push_str(&format!(" ({})", c.how));
        }
        text.push_str(&format!(" -> {} ({})", c.status, c.outcome));
        let key = if c.status == Status::Correct {
            format!("{}|{}", c.status, c.outcome)
        } else {
            format!("{}|{}", c.status, c.diagnostics)
        };
        if c.status != Status::Correct && !c.diagnostics.trim().is_empty() {
            text.push_str(&format!(
                ": {}",
                summarize(&c.diagnostics, max_chars).replace('\n', " ")
            ));
        }
        all.push((c.step, key, text));
    }
    all.sort_by_key(|a| std::cmp::Reverse(a.0));
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for (_, key, text) in all {
        if let Some((_, _, n)) = out.iter_mut().find(|(k, _, _)| *k == key) {
            *n += 1;
        } else if out.len() < max {
            out.push((key, text, 1));
        }
    }
    out.into_iter()
        .map(|(_, text, n)| {
            let text = if n > 1 {
                format!("{text} [{n} times]")
            } else {
                text
            };
            crate::render::clip(&text, max_chars.max(80) + 120)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::CandidateId;

    fn event(step: u64, status: Status, diagnostics: &str) -> CreditEvent {
        CreditEvent {
            step,
            child: CandidateId(step + 10),
            parent: Some(CandidateId(1)),
            variant: "v0".into(),
            model: "m".into(),
            reward: 0.0,
            cost_usd: 0.0,
            status,
            how: "full rewrite".into(),
            outcome: "not added".into(),
            diagnostics: diagnostics.into(),
            key: None,
        }
    }

    #[test]
    fn newest_first_deduplicated_and_bounded() {
        let credits = [
            event(
                3,
                Status::CompileError,
                "error: use of undeclared identifier 'Btile'",
            ),
            event(4, Status::WrongValues, "14.00% of elements within 1%"),
            event(
                5,
                Status::CompileError,
                "error: use of undeclared identifier 'Btile'",
            ),
            event(6, Status::Correct, "12 GFLOP/s"),
        ];
        let l = recent_lessons(&credits, 2, 200);
        assert_eq!(l.len(), 2);
        assert!(l[0].contains("correct (not added)"), "{l:?}");
        assert!(
            l[1].contains("Btile") && l[1].contains("[2 times]"),
            "{l:?}"
        );
        let l = recent_lessons(&credits, 5, 200);
        assert!(l.iter().any(|x| x.contains("14.00%")));
        assert!(recent_lessons(&credits, 0, 200).is_empty());
    }
}

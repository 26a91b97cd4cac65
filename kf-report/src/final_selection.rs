//! The final selection: which elite the report names as the best kernel.
//!
//! During the search each kernel is timed once (a median over its trials), and the fastest of
//! many such single measurements is biased: on a shared machine the elite that measured
//! fastest is often the one that got a quiet moment, not the fastest kernel (a winner's curse).
//! So after the search the few fastest correct elites are re-timed by the run's own evaluator
//! (the full protocol: fresh inputs verified, then timed), in alternating order over several
//! rounds, and the one with the smallest median over its rounds is named the best. A contender
//! that is not correct on a re-check is out. The best kernel's figures beside the reference
//! library ([`crate::reference::measure_side_by_side`]) are measured afterwards, anew, so the
//! ratio the report gives is not the maximum of the measurements it chose by.

use kf_core::{CandidateId, Elite, Work};
use serde::{Deserialize, Serialize};

use crate::reference::rates;

/// Elites re-timed at most.
pub const CONTENDERS: usize = 4;

/// Only elites measured at least this fraction of the fastest elite's GFLOP/s in the search
/// are re-timed: measurements on these machines vary by about 25% between moments, so a
/// kernel further behind cannot be the fastest.
pub const CONTENDER_FLOOR: f64 = 0.7;

/// One re-timed elite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contender {
    /// The elite's candidate.
    pub candidate: CandidateId,
    /// Its GFLOP/s as measured in the search.
    pub search_gflops: Option<f64>,
    /// Its median time in each round it was re-timed, seconds.
    pub retimed_s: Vec<f64>,
    /// The median of `retimed_s`, by which the contenders are ranked.
    pub median_s: Option<f64>,
    /// Throughput at `median_s`, GFLOP/s.
    pub gflops: Option<f64>,
    /// Bandwidth at `median_s`, GB/s.
    pub gbs: Option<f64>,
    /// Why it is out of the selection (not correct on a re-check, or could not be evaluated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
}

/// The outcome of the final selection, as `report.json` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalSelection {
    /// Rounds in which every contender still in was re-timed once.
    pub rounds: u32,
    /// The re-timed elites, in the order of their search GFLOP/s, fastest first.
    pub contenders: Vec<Contender>,
    /// The chosen elite: the smallest median over its rounds; `None` when no contender was
    /// re-timed correctly (the report then names the fastest by its search measurement).
    pub chosen: Option<CandidateId>,
}

impl FinalSelection {
    /// Device evaluations the selection spent.
    pub fn device_evaluations(&self) -> u64 {
        self.contenders
            .iter()
            .map(|c| c.retimed_s.len() as u64 + u64::from(c.out.is_some()))
            .sum()
    }

    /// One line for the report: what was re-timed and what was chosen.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .contenders
            .iter()
            .map(|c| {
                let now = match (&c.out, c.gflops) {
                    (Some(why), _) => format!("out: {why}"),
                    (None, Some(g)) => format!("{g:.2} re-timed"),
                    (None, None) => "not timed".into(),
                };
                let then = c
                    .search_gflops
                    .map(|g| format!("{g:.2} in the search, "))
                    .unwrap_or_default();
                format!("{} {then}{now}", c.candidate)
            })
            .collect();
        let chosen = match self.chosen {
            Some(id) => format!("chose {id}"),
            None => "none was re-timed correctly; kept the search's fastest".into(),
        };
        format!(
            "Final selection: the {} fastest elites re-timed {} rounds each, alternating \
             (GFLOP/s, median of the rounds): {}; {chosen}",
            self.contenders.len(),
            self.rounds,
            each.join(", ")
        )
    }
}

/// The elites worth re-timing: the correct ones with a search GFLOP/s of at least
/// [`CONTENDER_FLOOR`] of the fastest's, fastest first, at most `n`.
pub fn contenders<'a>(elites: impl IntoIterator<Item = &'a Elite>, n: usize) -> Vec<&'a Elite> {
    let mut timed: Vec<(&Elite, f64)> = elites
        .into_iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| {
            e.evaluation
                .gflops
                .filter(|g| g.is_finite() && *g > 0.0)
                .map(|g| (e, g))
        })
        .collect();
    timed.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(a.0.candidate.id.cmp(&b.0.candidate.id))
    });
    let Some(&(_, fastest)) = timed.first() else {
        return Vec::new();
    };
    timed
        .into_iter()
        .take_while(|(_, g)| *g >= CONTENDER_FLOOR * fastest)
        .take(n)
        .map(|(e, _)| e)
        .collect()
}

/// Re-times `contenders` for `rounds` rounds (at least one), each round in another order
/// (rotated by one, so that no kernel always runs first after the previous one's memory
/// traffic), and chooses the smallest median. `retime` evaluates one elite from scratch and
/// gives its median time in seconds, or why it is not a correct, timed kernel (its message is
/// kept as the contender's [`Contender::out`]); a contender is out after its first failure.
/// `work` turns times into GFLOP/s and GB/s.
pub fn select(
    contenders: &[&Elite],
    rounds: u32,
    work: &Work,
    mut retime: impl FnMut(&Elite) -> Result<f64, RetimeError>,
) -> FinalSelection {
    let rounds = rounds.max(1);
    let mut out: Vec<Contender> = contenders
        .iter()
        .map(|e| Contender {
            candidate: e.candidate.id,
            search_gflops: e.evaluation.gflops.filter(|g| g.is_finite()),
            retimed_s: Vec::new(),
            median_s: None,
            gflops: None,
            gbs: None,
            out: None,
        })
        .collect();
    let n = contenders.len();
    for round in 0..rounds as usize {
        for k in 0..n {
            let i = (k + round) % n;
            if out[i].out.is_some() {
                continue;
            }
            match retime(contenders[i]) {
                Ok(s) if s.is_finite() && s > 0.0 => out[i].retimed_s.push(s),
                Ok(s) => out[i].out = Some(format!("timed at {s} s")),
                Err(why) => out[i].out = Some(why.to_string()),
            }
        }
    }
    for c in out.iter_mut().filter(|c| c.out.is_none()) {
        let mut sorted = c.retimed_s.clone();
        sorted.sort_by(f64::total_cmp);
        c.median_s = median(&sorted);
        if let Some(s) = c.median_s {
            (c.gflops, c.gbs) = rates(work, s);
        }
    }
    let chosen = out
        .iter()
        .filter(|c| c.out.is_none())
        .filter_map(|c| c.median_s.map(|s| (c.candidate, s)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(id, _)| id);
    FinalSelection {
        rounds,
        contenders: out,
        chosen,
    }
}

/// Why an elite is not a correct, timed kernel when evaluated again: what a `retime` of
/// [`select`] returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetimeError {
    /// The evaluation did not run.
    #[error(transparent)]
    Evaluation(#[from] kf_eval::EvalError),
    /// Not correct now.
    #[error("{status} ({diagnostics})")]
    NotCorrect {
        /// Its status now.
        status: kf_core::Status,
        /// The evaluator's diagnostics.
        diagnostics: String,
    },
    /// Correct, but the evaluation has no timing.
    #[error("correct but not timed")]
    NotTimed,
    /// Another reason, from a `retime` of the embedder's (`Err("timeout".into())` makes one).
    #[error(transparent)]
    Failed(kf_core::BoxError),
}

impl From<String> for RetimeError {
    fn from(why: String) -> Self {
        RetimeError::Failed(why.into())
    }
}

impl From<&str> for RetimeError {
    fn from(why: &str) -> Self {
        RetimeError::Failed(why.into())
    }
}

/// The median of sorted values; `None` for none.
fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(0.5 * (sorted[n / 2 - 1] + sorted[n / 2])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::{
        Candidate, Descriptor, Evaluation, KernelSource, Language, ParamValues, Status, TimingStats,
    };
    use std::collections::HashMap;

    fn elite(id: u64, gflops: f64, status: Status) -> Elite {
        let source = KernelSource::new(Language::OpenCl, "k", format!("// kernel {id}\n"));
        let mut candidate = Candidate::seed(source, ParamValues::new());
        candidate.id = CandidateId(id);
        let evaluation = if status == Status::Correct {
            let timing = TimingStats::from_samples(&[2.0 / gflops]).expect("positive");
            let mut e = Evaluation::correct(timing, None);
            e.gflops = Some(gflops);
            e
        } else {
            let mut e = Evaluation::failed(status, "mismatch");
            e.gflops = Some(gflops);
            e
        };
        Elite {
            fitness: evaluation.fitness(),
            candidate,
            evaluation,
            descriptor: Descriptor::new(vec![id as usize], "test"),
        }
    }

    fn work() -> Work {
        Work {
            flops: 2e9,
            bytes: 1e9,
        }
    }

    #[test]
    fn contenders_are_correct_close_to_the_fastest_and_at_most_n() {
        let elites = [
            elite(1, 100.0, Status::Correct),
            elite(2, 400.0, Status::Correct),
            elite(3, 500.0, Status::WrongValues),
            elite(4, 300.0, Status::Correct),
            elite(5, 290.0, Status::Correct),
            elite(6, 350.0, Status::Correct),
        ];
        let ids: Vec<u64> = contenders(elites.iter(), 3)
            .iter()
            .map(|e| e.candidate.id.0)
            .collect();
        // 500 is wrong; 290 is under 0.7 × 400; only three.
        assert_eq!(ids, vec![2, 6, 4]);
        assert!(contenders([elite(7, 9.0, Status::WrongValues)].iter(), 4).is_empty());
    }

    #[test]
    fn the_lucky_measurement_loses_to_the_steadily_faster_kernel() {
        let elites = [
            elite(1, 374.0, Status::Correct),
            elite(2, 368.0, Status::Correct),
        ];
        let refs: Vec<&Elite> = elites.iter().collect();
        // Candidate 1 measured fast once in the search; re-timed it is slower every round.
        let times: HashMap<u64, f64> = [(1, 7.2e-3), (2, 5.6e-3)].into();
        let mut calls = Vec::new();
        let selection = select(&refs, 3, &work(), |e| {
            calls.push(e.candidate.id.0);
            Ok(times[&e.candidate.id.0])
        });
        assert_eq!(selection.chosen, Some(CandidateId(2)));
        // Alternating order: each round starts with another contender.
        assert_eq!(calls, vec![1, 2, 2, 1, 1, 2]);
        let second = &selection.contenders[1];
        assert_eq!(second.retimed_s.len(), 3);
        let gflops = second.gflops.expect("timed");
        assert!((gflops - 2e9 / 5.6e-3 / 1e9).abs() < 1e-9);
        assert_eq!(selection.device_evaluations(), 6);
        assert!(selection.describe().contains("chose #2"));
    }

    #[test]
    fn a_contender_wrong_on_a_recheck_is_out_and_never_chosen() {
        let elites = [
            elite(1, 400.0, Status::Correct),
            elite(2, 380.0, Status::Correct),
        ];
        let refs: Vec<&Elite> = elites.iter().collect();
        let mut seen_1 = 0;
        let selection = select(&refs, 3, &work(), |e| {
            if e.candidate.id.0 == 1 {
                seen_1 += 1;
                Err("wrong output".into())
            } else {
                Ok(9e-3)
            }
        });
        assert_eq!(seen_1, 1, "out after its first failure");
        assert_eq!(selection.chosen, Some(CandidateId(2)));
        assert_eq!(selection.contenders[0].out.as_deref(), Some("wrong output"));
        assert_eq!(selection.contenders[0].gflops, None);
        assert_eq!(selection.device_evaluations(), 4);
    }

    #[test]
    fn nothing_chosen_when_every_contender_fails() {
        let elites = [elite(1, 400.0, Status::Correct)];
        let refs: Vec<&Elite> = elites.iter().collect();
        let selection = select(&refs, 2, &work(), |_| Err("timeout".into()));
        assert_eq!(selection.chosen, None);
        assert!(selection.describe().contains("kept the search's fastest"));
    }

    #[test]
    fn the_median_of_the_rounds_ranks_not_the_fastest_round() {
        let elites = [
            elite(1, 400.0, Status::Correct),
            elite(2, 390.0, Status::Correct),
        ];
        let refs: Vec<&Elite> = elites.iter().collect();
        // Candidate 1 has one very fast round and two slow ones; candidate 2 is steady.
        let mut rounds_1 = [4.0e-3, 8.0e-3, 8.0e-3].into_iter();
        let selection = select(&refs, 3, &work(), |e| match e.candidate.id.0 {
            1 => Ok(rounds_1.next().unwrap_or(8.0e-3)),
            _ => Ok(6.0e-3),
        });
        assert_eq!(selection.chosen, Some(CandidateId(2)));
        assert_eq!(selection.contenders[0].median_s, Some(8.0e-3));
    }
}

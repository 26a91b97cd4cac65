//! The spend tracker behind [`crate::LlmBudget`]: committed spend plus reservations of the
//! requests in flight, checked before anything is sent; and [`CostUnit`], how LLM spend
//! becomes the opaque cost the engine's budget counts.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use kf_core::Usage;

use crate::config::LlmBudget;

/// How an LLM mutation's spend becomes the opaque cost it reports to the engine
/// ([`Usage::cost`]), which [`kf_core::Budget::with_cost`] limits: the engine knows nothing of
/// tokens or dollars, the LLM mutator converts ([`LlmMutatorConfig::cost_unit`](crate::LlmMutatorConfig::cost_unit)).
///
/// ```
/// use kf_core::{Budget, Usage};
/// use kf_prompt::{CostUnit, LlmBudget};
///
/// let usage = Usage { requests: 2, prompt_tokens: 300, completion_tokens: 100, cost_usd: 0.02, ..Usage::default() };
/// assert_eq!(CostUnit::Dollars.cost(&usage), 0.02);
/// assert_eq!(CostUnit::Tokens.cost(&usage), 400.0);
/// // Stop the search after 50,000 LLM tokens (the mutator reporting tokens):
/// let llm = LlmBudget::unlimited().with_tokens(50_000);
/// let budget = CostUnit::Tokens.limit(Budget::evaluations(1_000), &llm);
/// assert_eq!(budget.max_cost, Some(50_000.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CostUnit {
    /// US dollars at the models' prices.
    #[default]
    Dollars,
    /// Prompt plus completion tokens.
    Tokens,
    /// Requests.
    Requests,
}

impl CostUnit {
    /// The cost of `usage` in this unit.
    pub fn cost(self, usage: &Usage) -> f64 {
        match self {
            CostUnit::Dollars => usage.cost_usd,
            CostUnit::Tokens => usage.tokens() as f64,
            CostUnit::Requests => usage.requests as f64,
        }
    }

    /// `budget` with the limit of `llm` in this unit as its cost limit (unchanged when `llm`
    /// has no limit in this unit): how a search stops once the LLM spent that much.
    pub fn limit(self, budget: kf_core::Budget, llm: &LlmBudget) -> kf_core::Budget {
        let limit = match self {
            CostUnit::Dollars => llm.max_cost_usd,
            CostUnit::Tokens => llm.max_tokens.map(|t| t as f64),
            CostUnit::Requests => llm.max_requests.map(|r| r as f64),
        };
        match limit {
            Some(limit) => budget.with_cost(limit),
            None => budget,
        }
    }
}

/// Requests, tokens and dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Requests.
    pub requests: u64,
    /// Tokens (prompt plus completion).
    pub tokens: u64,
    /// US dollars.
    pub cost_usd: f64,
}

impl Spend {
    pub(crate) fn add(&mut self, other: &Spend) {
        // Saturating: token counts come from the server.
        self.requests = self.requests.saturating_add(other.requests);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.cost_usd += other.cost_usd;
    }

    fn sub(&mut self, other: &Spend) {
        self.requests = self.requests.saturating_sub(other.requests);
        self.tokens = self.tokens.saturating_sub(other.tokens);
        self.cost_usd = (self.cost_usd - other.cost_usd).max(0.0);
    }
}

#[derive(Debug, Default)]
struct State {
    committed: Spend,
    reserved: Spend,
}

/// Tracks spend against a budget. Shared (cheap to clone); thread-safe.
#[derive(Debug, Clone)]
pub struct BudgetTracker {
    limit: LlmBudget,
    state: Arc<Mutex<State>>,
}

impl BudgetTracker {
    /// A tracker for `limit` with nothing spent.
    pub fn new(limit: LlmBudget) -> Self {
        BudgetTracker {
            limit,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The limits.
    pub fn limit(&self) -> &LlmBudget {
        &self.limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts spend that happened before (answers recorded by an earlier run of the same
    /// search), so that a resumed run keeps to the same budget.
    pub fn preload(&self, spent: Spend) {
        self.lock().committed.add(&spent);
    }

    /// Spent so far (without reservations).
    pub fn spent(&self) -> Spend {
        self.lock().committed
    }

    /// Reserved by requests in flight.
    pub fn reserved(&self) -> Spend {
        self.lock().reserved
    }

    /// Reserves `estimate` for a request, or says which limit it would break. The reservation
    /// is released when the returned guard is dropped, or replaced by the actual spend with
    /// [`Reservation::commit`].
    pub fn reserve(&self, estimate: Spend) -> Result<Reservation, BudgetExceeded> {
        let mut state = self.lock();
        let mut total = state.committed;
        total.add(&state.reserved);
        total.add(&estimate);
        if let Some(max) = self.limit.max_requests {
            if total.requests > max {
                return Err(BudgetExceeded::Requests {
                    max,
                    sent: state.committed.requests,
                    in_flight: state.reserved.requests,
                });
            }
        }
        if let Some(max) = self.limit.max_tokens {
            if total.tokens > max {
                return Err(BudgetExceeded::Tokens {
                    max,
                    spent: state.committed.tokens,
                    reserved: state.reserved.tokens,
                    needed: estimate.tokens,
                });
            }
        }
        if let Some(max) = self.limit.max_cost_usd {
            if total.cost_usd > max {
                return Err(BudgetExceeded::Cost {
                    max_usd: max,
                    spent_usd: state.committed.cost_usd,
                    reserved_usd: state.reserved.cost_usd,
                    needed_usd: estimate.cost_usd,
                });
            }
        }
        state.reserved.add(&estimate);
        Ok(Reservation {
            tracker: self.clone(),
            estimate,
            done: false,
        })
    }
}

/// Which limit of the budget a request would break ([`BudgetTracker::reserve`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetExceeded {
    /// The request budget is spent.
    #[error("the request budget of {max} is spent ({sent} sent, {in_flight} in flight)")]
    Requests {
        /// The limit.
        max: u64,
        /// Requests sent.
        sent: u64,
        /// Requests in flight.
        in_flight: u64,
    },
    /// The token budget cannot cover the request.
    #[error(
        "the token budget of {max} cannot cover this request: {spent} spent, {reserved} reserved \
         by requests in flight, {needed} needed"
    )]
    Tokens {
        /// The limit.
        max: u64,
        /// Tokens spent.
        spent: u64,
        /// Tokens reserved by requests in flight.
        reserved: u64,
        /// Tokens this request may take.
        needed: u64,
    },
    /// The cost budget cannot cover the request.
    #[error(
        "the cost budget of ${max_usd:.4} cannot cover this request: ${spent_usd:.4} spent, \
         ${reserved_usd:.4} reserved, ${needed_usd:.4} needed"
    )]
    Cost {
        /// The limit in US dollars.
        max_usd: f64,
        /// Spent.
        spent_usd: f64,
        /// Reserved by requests in flight.
        reserved_usd: f64,
        /// What this request may cost.
        needed_usd: f64,
    },
}

/// Budget held for one request in flight.
#[derive(Debug)]
pub struct Reservation {
    tracker: BudgetTracker,
    estimate: Spend,
    done: bool,
}

impl Reservation {
    /// Replaces the reservation by what the request actually cost.
    pub fn commit(mut self, actual: Spend) {
        let mut state = self.tracker.lock();
        state.reserved.sub(&self.estimate);
        state.committed.add(&actual);
        self.done = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.done {
            self.tracker.lock().reserved.sub(&self.estimate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(requests: u64, tokens: u64, cost_usd: f64) -> Spend {
        Spend {
            requests,
            tokens,
            cost_usd,
        }
    }

    #[test]
    fn reservations_count_until_released() {
        let t = BudgetTracker::new(LlmBudget::unlimited().with_tokens(100));
        let a = t.reserve(spend(1, 60, 0.0)).unwrap();
        assert!(
            t.reserve(spend(1, 60, 0.0)).is_err(),
            "in-flight reservations count"
        );
        drop(a);
        let b = t.reserve(spend(1, 60, 0.0)).unwrap();
        b.commit(spend(1, 30, 0.0));
        assert_eq!(t.spent().tokens, 30);
        assert_eq!(t.reserved().tokens, 0);
        assert!(t.reserve(spend(1, 70, 0.0)).is_ok());
        assert!(t.reserve(spend(1, 71, 0.0)).is_err());
    }

    /// A server that reported `u64::MAX` tokens spent the token budget; nothing overflows.
    #[test]
    fn huge_spend_saturates() {
        let t = BudgetTracker::new(LlmBudget::unlimited().with_tokens(100));
        t.reserve(spend(1, 10, 0.0))
            .unwrap()
            .commit(spend(1, u64::MAX, 0.0));
        assert_eq!(t.spent().tokens, u64::MAX);
        assert!(t.reserve(spend(1, u64::MAX, 0.0)).is_err());
        let unlimited = BudgetTracker::new(LlmBudget::unlimited());
        unlimited.preload(spend(u64::MAX, u64::MAX, 0.0));
        assert!(unlimited.reserve(spend(1, 1, 0.0)).is_ok());
    }

    #[test]
    fn cost_units_convert_spend_and_limits() {
        let usage = Usage {
            requests: 3,
            prompt_tokens: 10,
            completion_tokens: 5,
            cost_usd: 0.25,
            ..Usage::default()
        };
        assert_eq!(CostUnit::default(), CostUnit::Dollars);
        assert_eq!(CostUnit::Dollars.cost(&usage), 0.25);
        assert_eq!(CostUnit::Tokens.cost(&usage), 15.0);
        assert_eq!(CostUnit::Requests.cost(&usage), 3.0);
        let llm = LlmBudget::requests(7).with_cost_usd(1.5);
        let base = kf_core::Budget::evaluations(10);
        assert_eq!(CostUnit::Dollars.limit(base, &llm).max_cost, Some(1.5));
        assert_eq!(CostUnit::Requests.limit(base, &llm).max_cost, Some(7.0));
        assert_eq!(CostUnit::Tokens.limit(base, &llm), base, "no token limit");
    }

    #[test]
    fn requests_cost_and_preload() {
        let t = BudgetTracker::new(LlmBudget::requests(2).with_cost_usd(1.0));
        t.preload(spend(1, 10, 0.5));
        assert!(t.reserve(spend(1, 0, 0.6)).is_err());
        let r = t.reserve(spend(1, 0, 0.4)).unwrap();
        assert!(t.reserve(spend(1, 0, 0.0)).is_err(), "two requests at most");
        r.commit(spend(1, 5, 0.1));
        assert_eq!(t.spent().requests, 2);
    }
}

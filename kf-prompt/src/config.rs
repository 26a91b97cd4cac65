//! Configuration: models with prices and weights, the budget, and [`LlmSettings`], which gathers
//! everything an LLM run needs from a struct or from `KF_LLM_*` environment variables.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::TokenUsage;
use crate::error::PromptError;
use crate::openai::{ApiKey, OpenAiConfig, RetryPolicy};

/// A model to ask, with its price and its weight in the mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Name as the server knows it.
    pub name: String,
    /// Relative weight under [`ModelPolicy::Weighted`] (and the prior under the bandit).
    pub weight: f64,
    /// US dollars per million prompt tokens.
    pub input_usd_per_mtok: f64,
    /// US dollars per million completion tokens.
    pub output_usd_per_mtok: f64,
}

impl ModelSpec {
    /// A free model of weight 1.
    pub fn new(name: impl Into<String>) -> Self {
        ModelSpec {
            name: name.into(),
            weight: 1.0,
            input_usd_per_mtok: 0.0,
            output_usd_per_mtok: 0.0,
        }
    }

    /// Sets the weight.
    pub fn with_weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the prices, US dollars per million prompt and completion tokens.
    pub fn with_prices(mut self, input_usd_per_mtok: f64, output_usd_per_mtok: f64) -> Self {
        self.input_usd_per_mtok = input_usd_per_mtok;
        self.output_usd_per_mtok = output_usd_per_mtok;
        self
    }

    /// What `usage` costs with this model.
    pub fn cost_usd(&self, usage: &TokenUsage) -> f64 {
        (usage.prompt_tokens as f64 * self.input_usd_per_mtok
            + usage.completion_tokens as f64 * self.output_usd_per_mtok)
            / 1e6
    }
}

/// How the model of each request is chosen when there are several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelPolicy {
    /// At random in proportion to the weights.
    #[default]
    Weighted,
    /// A UCB bandit on archive gain per cost: each child's credit is divided by
    /// `1 + cost / cost_scale_usd`, so a cheap model that does as well wins.
    Bandit {
        /// UCB exploration constant.
        exploration: f64,
        /// Cost that halves a reward, US dollars.
        cost_scale_usd: f64,
    },
}

/// A hard limit on what the LLM may cost. Requests in flight count with their reservation
/// (estimated prompt tokens plus the full reply limit), so concurrent requests can never
/// overshoot together; a request the rest of the budget cannot cover is not sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmBudget {
    /// Requests sent at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    /// Prompt plus completion tokens at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl LlmBudget {
    /// No limit.
    pub fn unlimited() -> Self {
        LlmBudget::default()
    }

    /// At most `n` requests.
    pub fn requests(n: u64) -> Self {
        LlmBudget {
            max_requests: Some(n),
            ..LlmBudget::default()
        }
    }

    /// Adds a token limit.
    pub fn with_tokens(mut self, tokens: u64) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// Adds a cost limit.
    pub fn with_cost_usd(mut self, usd: f64) -> Self {
        self.max_cost_usd = Some(usd);
        self
    }

    /// Adds a request limit.
    pub fn with_requests(mut self, n: u64) -> Self {
        self.max_requests = Some(n);
        self
    }
}

/// Everything an LLM run needs: where the server is, which models to ask at what price, how
/// long replies may be, and the budget. Build it in code or with [`LlmSettings::from_env`].
/// Its `Debug` output never shows the API key.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    /// The server connection.
    pub openai: OpenAiConfig,
    /// Models to ask (at least one).
    pub models: Vec<ModelSpec>,
    /// How a model is chosen per request.
    pub model_policy: ModelPolicy,
    /// Reply token limit per request.
    pub max_reply_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Requests in flight at most.
    pub max_concurrency: usize,
    /// The hard budget.
    pub budget: LlmBudget,
}

impl LlmSettings {
    /// Settings for one free model at `base_url`, 2048 reply tokens, temperature 0.7, two
    /// requests at a time, no budget.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        LlmSettings {
            openai: OpenAiConfig::new(base_url),
            models: vec![ModelSpec::new(model)],
            model_policy: ModelPolicy::Weighted,
            max_reply_tokens: 2048,
            temperature: 0.7,
            max_concurrency: 2,
            budget: LlmBudget::unlimited(),
        }
    }

    /// Reads the settings from the process environment; see [`LlmSettings::from_vars`].
    pub fn from_env() -> Result<Self, PromptError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the settings from variables (`get` returns a variable's value):
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `KF_LLM_BASE_URL` | API base URL | `https://api.openai.com/v1` |
    /// | `KF_LLM_API_KEY` (or `OPENAI_API_KEY`) | the key | none |
    /// | `KF_LLM_MODEL` | `name`, or `a*3,b*1` for several with weights | `gpt-4o-mini` |
    /// | `KF_LLM_MODEL_POLICY` | `weighted` or `bandit` | `weighted` |
    /// | `KF_LLM_PRICE_IN`, `KF_LLM_PRICE_OUT` | USD per million prompt / completion tokens, every model | 0 |
    /// | `KF_LLM_PRICES` | per model: `a=0.15/0.6,b=2.5/10` (USD per million prompt/completion tokens) | the above |
    /// | `KF_LLM_MAX_TOKENS` | reply token limit | 2048 |
    /// | `KF_LLM_TEMPERATURE` | temperature | 0.7 |
    /// | `KF_LLM_TIMEOUT_S` | per attempt: to the whole reply, or to its first chunk when streaming, seconds | 300 |
    /// | `KF_LLM_IDLE_TIMEOUT_S` | longest silence between streamed chunks, seconds | 60 |
    /// | `KF_LLM_TOTAL_TIMEOUT_S` | whole request, retries and waits included, seconds | none |
    /// | `KF_LLM_STREAM` | `1`: streamed replies (SSE), `0`: one JSON body | 1 |
    /// | `KF_LLM_MAX_REPLY_BYTES` | cap on a reply's text | 1048576 |
    /// | `KF_LLM_MAX_RETRIES` | retries of transient failures | 3 |
    /// | `KF_LLM_CONCURRENCY` | requests in flight (per gateway and at the endpoint) | 2 |
    /// | `KF_LLM_BUDGET_TOKENS`, `KF_LLM_BUDGET_USD`, `KF_LLM_BUDGET_REQUESTS` | hard budget | none |
    ///
    /// ```
    /// use kf_prompt::LlmSettings;
    ///
    /// let vars = [("KF_LLM_BASE_URL", "http://127.0.0.1:8080/v1"), ("KF_LLM_MODEL", "a*3,b"), ("KF_LLM_API_KEY", "sk-x")];
    /// let s = LlmSettings::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))?;
    /// assert_eq!(s.models.len(), 2);
    /// assert_eq!(s.models[0].weight, 3.0);
    /// assert!(!format!("{s:?}").contains("sk-x"));
    /// # Ok::<(), kf_prompt::PromptError>(())
    /// ```
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, PromptError> {
        let vars = Vars(get);
        let openai = openai_from_vars(&vars)?;
        let models = models_from_vars(&vars)?;
        let model_policy = match vars.text("KF_LLM_MODEL_POLICY").as_deref() {
            None | Some("weighted") => ModelPolicy::Weighted,
            Some("bandit") => ModelPolicy::Bandit {
                exploration: 0.5,
                cost_scale_usd: 0.01,
            },
            Some(other) => {
                return Err(PromptError::Config(format!(
                    "KF_LLM_MODEL_POLICY=`{other}`: expected weighted or bandit"
                )))
            }
        };
        let defaults = LlmSettings::new("http://unused", "unused");
        let settings = LlmSettings {
            openai,
            models,
            model_policy,
            max_reply_tokens: vars
                .num("KF_LLM_MAX_TOKENS")?
                .unwrap_or(defaults.max_reply_tokens),
            temperature: vars
                .num("KF_LLM_TEMPERATURE")?
                .unwrap_or(defaults.temperature),
            max_concurrency: vars
                .num("KF_LLM_CONCURRENCY")?
                .unwrap_or(defaults.max_concurrency),
            budget: LlmBudget {
                max_requests: vars.num("KF_LLM_BUDGET_REQUESTS")?,
                max_tokens: vars.num("KF_LLM_BUDGET_TOKENS")?,
                max_cost_usd: vars.num("KF_LLM_BUDGET_USD")?,
            },
        };
        settings.validate()?;
        let mut settings = settings;
        // The same limit on the endpoint itself, shared by every clone of its client.
        settings.openai.max_concurrency = Some(settings.max_concurrency);
        Ok(settings)
    }

    /// Checks that the settings can run.
    pub fn validate(&self) -> Result<(), PromptError> {
        if self.models.is_empty() {
            return Err(PromptError::Config("no model configured".into()));
        }
        if self
            .models
            .iter()
            .any(|m| !(m.weight.is_finite() && m.weight > 0.0))
        {
            return Err(PromptError::Config(
                "every model weight must be positive".into(),
            ));
        }
        if self.max_reply_tokens == 0 {
            return Err(PromptError::Config(
                "the reply token limit must be positive".into(),
            ));
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(PromptError::Config(
                "the temperature must be a non-negative number".into(),
            ));
        }
        if self.max_concurrency == 0 {
            return Err(PromptError::Config(
                "the concurrency limit must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// `gpt-4o-mini=0.15/0.6,gpt-4o=2.5/10`: US dollars per million prompt / completion tokens of
/// each named model (which must be one of `models`).
fn apply_price_table(models: &mut [ModelSpec], table: &str) -> Result<(), PromptError> {
    for entry in table.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why: &str| {
            PromptError::Config(format!(
                "KF_LLM_PRICES: `{entry}` {why}; expected MODEL=IN/OUT (USD per million tokens)"
            ))
        };
        let (name, prices) = entry.rsplit_once('=').ok_or_else(|| bad("has no `=`"))?;
        let (price_in, price_out) = prices.split_once('/').ok_or_else(|| bad("has no `/`"))?;
        let price = |p: &str| -> Result<f64, PromptError> {
            match p.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(bad("has a price that is not a non-negative number")),
            }
        };
        let (price_in, price_out) = (price(price_in)?, price(price_out)?);
        let model = models
            .iter_mut()
            .find(|m| m.name == name.trim())
            .ok_or_else(|| bad("names a model that KF_LLM_MODEL does not"))?;
        model.input_usd_per_mtok = price_in;
        model.output_usd_per_mtok = price_out;
    }
    Ok(())
}

/// The variables [`LlmSettings::from_vars`] reads: trimmed, an empty one as unset, numbers
/// parsed with an error that names the variable.
struct Vars<F>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    /// The variable's text, if set and not blank.
    fn text(&self, name: &str) -> Option<String> {
        (self.0)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The variable as a number, if set.
    fn num<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, PromptError> {
        match self.text(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| PromptError::Config(format!("{name}=`{v}` is not a valid number"))),
        }
    }

    /// The variable as a positive number of seconds, if set.
    fn seconds(&self, name: &str) -> Result<Option<Duration>, PromptError> {
        match self.num::<f64>(name)? {
            None => Ok(None),
            Some(t) if t.is_finite() && t > 0.0 => Ok(Some(Duration::from_secs_f64(t))),
            Some(t) => Err(PromptError::Config(format!("{name}={t} must be positive"))),
        }
    }
}

/// The connection settings of [`LlmSettings::from_vars`]: endpoint, key, timeouts, streaming,
/// reply cap and retries.
fn openai_from_vars<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
) -> Result<OpenAiConfig, PromptError> {
    let base_url = vars
        .text("KF_LLM_BASE_URL")
        .unwrap_or_else(|| OpenAiConfig::OPENAI_BASE_URL.to_owned());
    let mut openai = OpenAiConfig::new(base_url);
    openai.api_key = vars
        .text("KF_LLM_API_KEY")
        .or_else(|| vars.text("OPENAI_API_KEY"))
        .map(ApiKey::new);
    if let Some(t) = vars.seconds("KF_LLM_TIMEOUT_S")? {
        openai.timeout = t;
    }
    if let Some(t) = vars.seconds("KF_LLM_IDLE_TIMEOUT_S")? {
        openai.idle_timeout = t;
    }
    openai.total_timeout = vars.seconds("KF_LLM_TOTAL_TIMEOUT_S")?;
    if let Some(bytes) = vars.num::<usize>("KF_LLM_MAX_REPLY_BYTES")? {
        if bytes == 0 {
            return Err(PromptError::Config(
                "KF_LLM_MAX_REPLY_BYTES must be positive".into(),
            ));
        }
        openai.max_reply_bytes = bytes;
    }
    match vars.text("KF_LLM_STREAM").as_deref() {
        None => {}
        Some("1" | "true" | "yes" | "on") => openai.stream = true,
        Some("0" | "false" | "no" | "off") => openai.stream = false,
        Some(other) => {
            return Err(PromptError::Config(format!(
                "KF_LLM_STREAM=`{other}`: expected 1 or 0"
            )))
        }
    }
    if let Some(r) = vars.num::<u32>("KF_LLM_MAX_RETRIES")? {
        openai.retry = RetryPolicy {
            max_attempts: r.saturating_add(1),
            ..RetryPolicy::default()
        };
    }
    Ok(openai)
}

/// The models of [`LlmSettings::from_vars`] with their weights and prices (the prices of
/// every model, then each model's own).
fn models_from_vars<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
) -> Result<Vec<ModelSpec>, PromptError> {
    let price_in = vars.num::<f64>("KF_LLM_PRICE_IN")?.unwrap_or(0.0);
    let price_out = vars.num::<f64>("KF_LLM_PRICE_OUT")?.unwrap_or(0.0);
    if !(price_in >= 0.0 && price_out >= 0.0) {
        return Err(PromptError::Config(
            "KF_LLM_PRICE_IN/OUT must not be negative".into(),
        ));
    }
    let mut models: Vec<ModelSpec> = parse_models(
        &vars
            .text("KF_LLM_MODEL")
            .unwrap_or_else(|| "gpt-4o-mini".into()),
    )?
    .into_iter()
    .map(|m| m.with_prices(price_in, price_out))
    .collect();
    if let Some(table) = vars.text("KF_LLM_PRICES") {
        apply_price_table(&mut models, &table)?;
    }
    Ok(models)
}

/// `a*3,b` → models `a` (weight 3) and `b` (weight 1).
fn parse_models(text: &str) -> Result<Vec<ModelSpec>, PromptError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = match part.rsplit_once('*') {
            Some((n, w)) => {
                let w: f64 = w.trim().parse().map_err(|_| {
                    PromptError::Config(format!(
                        "KF_LLM_MODEL: weight `{w}` of `{n}` is not a number"
                    ))
                })?;
                (n.trim(), w)
            }
            None => (part, 1.0),
        };
        if name.is_empty() {
            return Err(PromptError::Config(format!(
                "KF_LLM_MODEL: `{part}` names no model"
            )));
        }
        out.push(ModelSpec::new(name).with_weight(weight));
    }
    if out.is_empty() {
        return Err(PromptError::Config("KF_LLM_MODEL names no model".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let s = LlmSettings::from_vars(vars(&[])).unwrap();
        assert_eq!(s.openai.base_url, OpenAiConfig::OPENAI_BASE_URL);
        assert_eq!(s.models[0].name, "gpt-4o-mini");
        assert!(s.openai.api_key.is_none());
        let s = LlmSettings::from_vars(vars(&[
            ("OPENAI_API_KEY", "sk-fallback"),
            ("KF_LLM_TIMEOUT_S", "2.5"),
            ("KF_LLM_MAX_RETRIES", "0"),
            ("KF_LLM_BUDGET_TOKENS", "1000"),
            ("KF_LLM_BUDGET_USD", "0.5"),
            ("KF_LLM_PRICE_IN", "1"),
            ("KF_LLM_PRICE_OUT", "2"),
            ("KF_LLM_MODEL_POLICY", "bandit"),
        ]))
        .unwrap();
        assert_eq!(
            s.openai.api_key.as_ref().map(ApiKey::expose),
            Some("sk-fallback")
        );
        assert_eq!(s.openai.timeout, Duration::from_millis(2500));
        assert_eq!(s.openai.retry.max_attempts, 1);
        assert_eq!(s.budget.max_tokens, Some(1000));
        assert_eq!(s.budget.max_cost_usd, Some(0.5));
        assert!(matches!(s.model_policy, ModelPolicy::Bandit { .. }));
        let usage = TokenUsage {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
            estimated: false,
        };
        assert!((s.models[0].cost_usd(&usage) - 2.0).abs() < 1e-12);
        assert!(!format!("{s:?}").contains("sk-fallback"));
        assert!(s.openai.stream, "streaming is the default");
        assert_eq!(s.openai.max_concurrency, Some(s.max_concurrency));
    }

    #[test]
    fn streaming_timeouts_cap_and_a_price_table() {
        let s = LlmSettings::from_vars(vars(&[
            ("KF_LLM_MODEL", "cheap*3,dear"),
            ("KF_LLM_PRICE_IN", "1"),
            ("KF_LLM_PRICES", "dear=2.5/10"),
            ("KF_LLM_STREAM", "0"),
            ("KF_LLM_IDLE_TIMEOUT_S", "7"),
            ("KF_LLM_TOTAL_TIMEOUT_S", "90"),
            ("KF_LLM_MAX_REPLY_BYTES", "4096"),
            ("KF_LLM_CONCURRENCY", "3"),
        ]))
        .unwrap();
        assert!(!s.openai.stream);
        assert_eq!(s.openai.idle_timeout, Duration::from_secs(7));
        assert_eq!(s.openai.total_timeout, Some(Duration::from_secs(90)));
        assert_eq!(s.openai.max_reply_bytes, 4096);
        assert_eq!(s.openai.max_concurrency, Some(3));
        let usage = TokenUsage {
            prompt_tokens: 1_000_000,
            completion_tokens: 1_000_000,
            estimated: false,
        };
        assert!(
            (s.models[0].cost_usd(&usage) - 1.0).abs() < 1e-12,
            "the flat price"
        );
        assert!(
            (s.models[1].cost_usd(&usage) - 12.5).abs() < 1e-12,
            "the table's price"
        );
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            ("KF_LLM_TIMEOUT_S", "soon"),
            ("KF_LLM_TIMEOUT_S", "0"),
            ("KF_LLM_MODEL", "a*x"),
            ("KF_LLM_MODEL", "a*0"),
            ("KF_LLM_MODEL", "*2"),
            ("KF_LLM_CONCURRENCY", "0"),
            ("KF_LLM_MODEL_POLICY", "greedy"),
            ("KF_LLM_PRICE_IN", "-1"),
            ("KF_LLM_PRICES", "gpt-4o-mini=1"),
            ("KF_LLM_PRICES", "gpt-4o-mini=1/x"),
            ("KF_LLM_PRICES", "gpt-4o-mini=-1/2"),
            ("KF_LLM_PRICES", "other=1/2"),
            ("KF_LLM_STREAM", "maybe"),
            ("KF_LLM_IDLE_TIMEOUT_S", "0"),
            ("KF_LLM_TOTAL_TIMEOUT_S", "-3"),
            ("KF_LLM_MAX_REPLY_BYTES", "0"),
        ] {
            assert!(
                matches!(
                    LlmSettings::from_vars(vars(&[bad])),
                    Err(PromptError::Config(_))
                ),
                "{bad:?}"
            );
        }
    }
}

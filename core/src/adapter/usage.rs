//! Mapping provider-shaped usage onto the closed five-component
//! [`UsageSplit`]: `cache_read`, `cache_write`, `fresh_input`,
//! `output`, `thinking`.
//!
//! The rule is: **never lose, never double count.** Each provider reports some counts
//! *inside* others; the mapping subtracts the inner count from its container exactly once,
//! so the split's total equals the provider's own total.
//!
//! # Anthropic-shaped usage ([`usage_from_anthropic`])
//!
//! Keys: `input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`,
//! `output_tokens`, and optionally a separately reported thinking count `thinking_tokens`
//! (or `reasoning_tokens`).
//!
//! Anthropic's three input counts are **disjoint**: `input_tokens` counts only the prompt
//! tokens that were neither read from nor written to the cache; the prompt's total is
//! `cache_read_input_tokens + cache_creation_input_tokens + input_tokens` (Anthropic,
//! "Prompt caching — Tracking cache performance",
//! <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>). Extended-thinking
//! tokens are billed as output tokens and are counted **inside** `output_tokens`
//! (Anthropic, "Context windows" / "Extended thinking",
//! <https://docs.anthropic.com/en/docs/build-with-claude/context-windows>).
//!
//! ```text
//! cache_read  = cache_read_input_tokens
//! cache_write = cache_creation_input_tokens
//! fresh_input = input_tokens
//! thinking    = thinking_tokens            (must be ≤ output_tokens)
//! output      = output_tokens − thinking
//! ```
//!
//! # OpenAI/Codex-shaped usage ([`usage_from_openai`])
//!
//! Keys: `input_tokens`, `cached_input_tokens` (Codex CLI) or
//! `input_tokens_details.cached_tokens` (OpenAI Responses API), `output_tokens`,
//! `reasoning_output_tokens` (Codex CLI) or `output_tokens_details.reasoning_tokens`
//! (Responses API).
//!
//! OpenAI's counts are **nested**: `input_tokens` includes the cached tokens and
//! `output_tokens` includes the reasoning tokens; `total_tokens = input_tokens +
//! output_tokens` (OpenAI API reference, Responses object `usage`,
//! <https://platform.openai.com/docs/api-reference/responses/object>; prompt caching guide,
//! <https://platform.openai.com/docs/guides/prompt-caching>; reasoning guide,
//! <https://platform.openai.com/docs/guides/reasoning>). Codex CLI reports the same
//! quantities flat, from the same Responses usage: `cached_input_tokens` is part of
//! `input_tokens` and `reasoning_output_tokens` part of `output_tokens` — its own
//! `total_tokens` is `input_tokens + output_tokens` (openai/codex `codex-rs/protocol`
//! `TokenUsage`, whose `non_cached_input()` is `input_tokens − cached_input_tokens`; see also
//! <https://github.com/openai/codex/issues/5276> for the `exec --json` shape, whose
//! numbers satisfy `total_tokens = input_tokens + output_tokens` with
//! `reasoning_output_tokens < output_tokens`). OpenAI caching is automatic and reports no
//! cache writes.
//!
//! These definitions were checked against the stored copies available to us (the OpenAI
//! pages themselves were not reachable): SDK documentation generated from OpenAI's
//! OpenAPI description ("cached tokens … are counted as a subset of input tokens, meaning
//! input tokens will include cached and uncached tokens", `openai-client-base` on
//! docs.rs), Microsoft's Azure AI Projects reference for the same usage object
//! ("input tokens served from the model's cache. Included in input_tokens and not
//! additive"), and the Codex CLI numbers above. For Anthropic, the prompt-caching page
//! and a published usage example (`input_tokens: 1` beside `cache_read_input_tokens:
//! 30433`) agree that `input_tokens` excludes cache reads and writes.
//!
//! ```text
//! cache_read  = cached                     (must be ≤ input_tokens)
//! cache_write = 0
//! fresh_input = input_tokens − cache_read
//! thinking    = reasoning                  (must be ≤ output_tokens)
//! output      = output_tokens − thinking
//! ```
//!
//! # Inconsistent numbers
//!
//! An inner count larger than its container (cached > `input_tokens`, thinking or
//! reasoning > `output_tokens`) contradicts the provider's own definition above — the
//! inner count is *part of* the container — so the report is corrupt and the mapping
//! returns `invalid_usage`. Clamping it would silently drop the excess tokens from the
//! thinking (or cache) column, and treating the counts as disjoint would count them
//! twice; neither is "never lose, never double count". A flat and a nested spelling of
//! the same quantity (`cached_input_tokens` and `input_tokens_details.cached_tokens`)
//! must agree, else `invalid_usage`.
//!
//! # Values
//!
//! Each listed key is a non-negative integer ≤ 2^53 − 1 — or its decimal text (`"10"`,
//! digits only), as some SDK objects and proxies report counts — or `null`/absent (= 0;
//! providers omit zero counts). Anything else is `invalid_usage` (a count that cannot be
//! read is refused, never taken as 0). A usage split itself (`usage_from_partial_split`)
//! takes integers only: it is this protocol's own closed shape. Keys not listed (`service_tier`,
//! `server_tool_use`, the per-TTL `cache_creation` breakdown that
//! `cache_creation_input_tokens` already totals, `total_tokens`, …) are ignored.

use serde_json::{Map, Value};

use super::error::AdapterError;
use crate::fields;
use crate::wire::{UsageSplit, MAX_SAFE_INTEGER, USAGE_COMPONENTS};

fn invalid(reason: impl Into<String>) -> AdapterError {
    AdapterError::InvalidUsage {
        line_number: None,
        reason: reason.into(),
    }
}

fn object(usage: &Value) -> Result<&Map<String, Value>, AdapterError> {
    fields::object(usage).map_err(|_| invalid("usage must be a JSON object"))
}

/// A count given as the decimal text of an integer (`"10"`: ASCII digits only, no
/// sign, no blanks, at most 2^53 − 1), as some SDK objects and proxies report them and
/// stapel-runner-protocol 0.1.1 read them. Any other string is no count.
fn count_text(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n <= MAX_SAFE_INTEGER)
}

/// A count at `path` (`a` or `a/b`), `None` when absent or null; an integer, or its
/// decimal text ([`count_text`]).
fn count(obj: &Map<String, Value>, path: &str) -> Result<Option<u64>, AdapterError> {
    let bad = |e: fields::FieldError<'_>| match e.problem {
        fields::Problem::WrongType(fields::Expected::Object) => {
            invalid(format!("{} must be an object", e.path))
        }
        _ => invalid(format!(
            "{path} must be an integer in 0..=2^53-1, found {}",
            e.found.unwrap_or(&Value::Null)
        )),
    };
    fields::descend(obj, path)
        .and_then(|v| {
            v.map(|v| match count_text(v) {
                Some(n) => Ok(n),
                None => fields::uint(v, path, MAX_SAFE_INTEGER),
            })
            .transpose()
        })
        .map_err(bad)
}

/// An inner count that must not exceed its container.
fn nested(
    inner: u64,
    inner_name: &str,
    container: u64,
    container_name: &str,
) -> Result<u64, AdapterError> {
    if inner > container {
        return Err(invalid(format!(
            "{inner_name} ({inner}) exceeds {container_name} ({container}), which contains it"
        )));
    }
    Ok(inner)
}

/// One quantity spelled two ways; both present must agree.
fn either(obj: &Map<String, Value>, a: &str, b: &str) -> Result<u64, AdapterError> {
    match (count(obj, a)?, count(obj, b)?) {
        (Some(x), Some(y)) if x != y => Err(invalid(format!("{a} ({x}) and {b} ({y}) disagree"))),
        (x, y) => Ok(x.or(y).unwrap_or(0)),
    }
}

/// Map Anthropic-shaped usage (see the [module docs](self)).
///
/// # Errors
/// `invalid_usage` for a non-object, a bad count, two disagreeing thinking counts, or a
/// thinking count above `output_tokens`.
pub fn usage_from_anthropic(usage: &Value) -> Result<UsageSplit, AdapterError> {
    let obj = object(usage)?;
    let input = count(obj, "input_tokens")?.unwrap_or(0);
    let cache_read = count(obj, "cache_read_input_tokens")?.unwrap_or(0);
    let cache_write = count(obj, "cache_creation_input_tokens")?.unwrap_or(0);
    let output = count(obj, "output_tokens")?.unwrap_or(0);
    let thinking = nested(
        either(obj, "thinking_tokens", "reasoning_tokens")?,
        "thinking_tokens",
        output,
        "output_tokens",
    )?;
    Ok(UsageSplit {
        cache_read,
        cache_write,
        fresh_input: input,
        output: output.saturating_sub(thinking),
        thinking,
    })
}

/// Map OpenAI Responses / Codex CLI-shaped usage (see the [module docs](self)).
///
/// # Errors
/// `invalid_usage` for a non-object, a bad count, disagreeing spellings, or an inner
/// count above its container (cached > input, reasoning > output).
pub fn usage_from_openai(usage: &Value) -> Result<UsageSplit, AdapterError> {
    let obj = object(usage)?;
    let input = count(obj, "input_tokens")?.unwrap_or(0);
    let output = count(obj, "output_tokens")?.unwrap_or(0);
    let cached = either(
        obj,
        "cached_input_tokens",
        "input_tokens_details/cached_tokens",
    )?;
    let reasoning = either(
        obj,
        "reasoning_output_tokens",
        "output_tokens_details/reasoning_tokens",
    )?;
    let cache_read = nested(cached, "cached_tokens", input, "input_tokens")?;
    let thinking = nested(reasoning, "reasoning_tokens", output, "output_tokens")?;
    Ok(UsageSplit {
        cache_read,
        cache_write: 0,
        fresh_input: input.saturating_sub(cache_read),
        output: output.saturating_sub(thinking),
        thinking,
    })
}

/// The keys [`usage_from_anthropic`] reads, in order. A host reading usage from an object
/// that is not a JSON mapping (an SDK usage model) reads these attributes.
pub const ANTHROPIC_USAGE_KEYS: [&str; 6] = [
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
    "thinking_tokens",
    "reasoning_tokens",
];

/// The keys [`usage_from_openai`] reads, in order (see [`ANTHROPIC_USAGE_KEYS`]); the
/// `*_details` ones hold objects whose keys [`usage_detail_keys`] names.
pub const OPENAI_USAGE_KEYS: [&str; 6] = [
    "input_tokens",
    "cached_input_tokens",
    "input_tokens_details",
    "output_tokens",
    "reasoning_output_tokens",
    "output_tokens_details",
];

/// The keys read inside a nested usage object: `cached_tokens` in
/// `input_tokens_details`, `reasoning_tokens` in `output_tokens_details`; `None` for a
/// key that is not a nested object.
pub fn usage_detail_keys(key: &str) -> Option<&'static [&'static str]> {
    match key {
        "input_tokens_details" => Some(&["cached_tokens"]),
        "output_tokens_details" => Some(&["reasoning_tokens"]),
        _ => None,
    }
}

/// Map Anthropic-shaped usage with a separately reported thinking count: when `thinking`
/// is positive it replaces the usage's own thinking count (`thinking_tokens` is set to it
/// and `reasoning_tokens` is dropped); 0 means "none reported" and leaves the usage as it
/// is. Then [`usage_from_anthropic`].
///
/// # Errors
/// As [`usage_from_anthropic`] (the override, too, must not exceed `output_tokens`).
pub fn usage_from_anthropic_with_thinking(
    usage: &Value,
    thinking: u64,
) -> Result<UsageSplit, AdapterError> {
    match usage {
        Value::Object(m) if thinking > 0 => {
            let mut m = m.clone();
            m.remove("reasoning_tokens");
            m.insert("thinking_tokens".into(), Value::from(thinking));
            usage_from_anthropic(&Value::Object(m))
        }
        _ => usage_from_anthropic(usage),
    }
}

const ANTHROPIC_ONLY: &[&str] = &["cache_read_input_tokens", "cache_creation_input_tokens"];
const OPENAI_ONLY: &[&str] = &[
    "cached_input_tokens",
    "reasoning_output_tokens",
    "input_tokens_details",
    "output_tokens_details",
];

/// A [`UsageSplit`] from a mapping of some of its five component names (`cache_read`,
/// `cache_write`, `fresh_input`, `output`, `thinking`): an absent component is 0 (a
/// harness that reports only `output` reported no other tokens), so `{}` is zero usage.
/// The split stays closed: every present key must be one of the five names and hold a
/// non-negative integer ≤ 2^53 − 1 (`null` included in "anything else").
///
/// # Errors
/// `invalid_usage` for a non-object, a key that is not a component name, or a value
/// that is not such an integer.
pub fn usage_from_partial_split(usage: &Value) -> Result<UsageSplit, AdapterError> {
    let obj = object(usage)?;
    let mut parts = [0u64; 5];
    for (key, value) in obj {
        let Some(slot) = USAGE_COMPONENTS
            .iter()
            .position(|c| c == key)
            .and_then(|i| parts.get_mut(i))
        else {
            return Err(invalid(format!(
                "{key:?} is not a usage component (cache_read, cache_write, fresh_input, output, thinking)"
            )));
        };
        *slot = fields::uint(value, key, MAX_SAFE_INTEGER).map_err(|_| {
            invalid(format!(
                "{key} must be an integer in 0..=2^53-1, found {value}"
            ))
        })?;
    }
    let [cache_read, cache_write, fresh_input, output, thinking] = parts;
    Ok(UsageSplit {
        cache_read,
        cache_write,
        fresh_input,
        output,
        thinking,
    })
}

/// Map usage of any supported shape, chosen by its keys:
///
/// 1. any of the five split keys (`cache_read`, `cache_write`, `fresh_input`, `output`,
///    `thinking`), or no key at all — a [`UsageSplit`] already, possibly partial
///    ([`usage_from_partial_split`]: absent components are 0, other keys are refused);
///    `null` (no usage reported) is zero usage too;
/// 2. `cache_read_input_tokens` or `cache_creation_input_tokens` — Anthropic;
/// 3. `cached_input_tokens`, `reasoning_output_tokens`, `input_tokens_details` or
///    `output_tokens_details` — OpenAI/Codex;
/// 4. only `input_tokens` / `output_tokens` (and thinking) — both conventions agree when
///    nothing is cached; mapped as Anthropic.
///
/// # Errors
/// `invalid_usage` for a non-object, keys of both providers (ambiguous), only keys that
/// name no count (`{"total_tokens": 9}`), or any error of the chosen mapping.
pub fn usage_from_mapping(usage: &Value) -> Result<UsageSplit, AdapterError> {
    if usage.is_null() {
        return Ok(UsageSplit::default());
    }
    let obj = object(usage)?;
    let has = |keys: &[&str]| keys.iter().any(|k| obj.contains_key(*k));
    if obj.is_empty() || has(&USAGE_COMPONENTS) {
        return usage_from_partial_split(usage);
    }
    match (has(ANTHROPIC_ONLY), has(OPENAI_ONLY)) {
        (true, true) => Err(invalid(
            "usage mixes Anthropic and OpenAI keys; the shape is ambiguous",
        )),
        (true, false) => usage_from_anthropic(usage),
        (false, true) => usage_from_openai(usage),
        (false, false)
            if has(&[
                "input_tokens",
                "output_tokens",
                "thinking_tokens",
                "reasoning_tokens",
            ]) =>
        {
            usage_from_anthropic(usage)
        }
        (false, false) => Err(invalid("usage has no recognised token count")),
    }
}

/// The provider shapes a binding can name when it maps usage
/// ([`usage_from_shape`]): one function per shape, chosen by the caller rather than by
/// the usage's keys (that is [`UsageShape::Mapping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UsageShape {
    /// [`usage_from_anthropic`] (with a separately reported thinking count:
    /// [`usage_from_anthropic_with_thinking`]).
    Anthropic,
    /// [`usage_from_openai`].
    Openai,
    /// [`usage_from_mapping`]: the shape is chosen by the usage's keys.
    Mapping,
}

impl UsageShape {
    /// The three shapes, in this order.
    pub const ALL: [UsageShape; 3] = [
        UsageShape::Anthropic,
        UsageShape::Openai,
        UsageShape::Mapping,
    ];

    /// `anthropic`, `openai` or `mapping`.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageShape::Anthropic => "anthropic",
            UsageShape::Openai => "openai",
            UsageShape::Mapping => "mapping",
        }
    }

    /// The shape named by [`as_str`](Self::as_str), or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The keys a host reads from a usage object that is not a JSON mapping (an SDK
    /// usage model with attributes) before handing it over: [`ANTHROPIC_USAGE_KEYS`],
    /// [`OPENAI_USAGE_KEYS`]; `None` for [`UsageShape::Mapping`], which is chosen by
    /// the keys of a mapping and so has no fixed attribute list.
    pub fn attribute_keys(self) -> Option<&'static [&'static str]> {
        match self {
            UsageShape::Anthropic => Some(&ANTHROPIC_USAGE_KEYS),
            UsageShape::Openai => Some(&OPENAI_USAGE_KEYS),
            UsageShape::Mapping => None,
        }
    }
}

/// Map usage of a named shape. `thinking` is a separately reported thinking count
/// ([`usage_from_anthropic_with_thinking`]); only Anthropic-shaped usage reports one
/// apart (OpenAI nests reasoning inside its usage, and a mapping carries its own
/// `thinking`), so a `thinking` for any other shape is refused rather than ignored.
///
/// # Errors
/// `invalid_usage`: a `thinking` count for a shape other than Anthropic, or any error of
/// the shape's mapping.
pub fn usage_from_shape(
    shape: UsageShape,
    usage: &Value,
    thinking: Option<u64>,
) -> Result<UsageSplit, AdapterError> {
    match (shape, thinking) {
        (UsageShape::Anthropic, Some(t)) => usage_from_anthropic_with_thinking(usage, t),
        (UsageShape::Anthropic, None) => usage_from_anthropic(usage),
        (UsageShape::Openai, None) => usage_from_openai(usage),
        (UsageShape::Mapping, None) => usage_from_mapping(usage),
        (other, Some(_)) => Err(invalid(format!(
            "a separately reported thinking count applies to anthropic usage only, not {}",
            other.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_is_disjoint() {
        let u = usage_from_anthropic(&json!({
            "input_tokens": 1, "cache_read_input_tokens": 30433,
            "cache_creation_input_tokens": 287, "output_tokens": 67
        }))
        .unwrap();
        assert_eq!(u.total_tokens(), 1 + 30433 + 287 + 67);
        assert_eq!(
            (u.fresh_input, u.cache_read, u.cache_write),
            (1, 30433, 287)
        );
    }

    #[test]
    fn codex_is_nested() {
        // Numbers from openai/codex#5276: total_tokens 28139 = 26549 + 1590.
        let u = usage_from_openai(&json!({
            "input_tokens": 26549, "cached_input_tokens": 22272,
            "output_tokens": 1590, "reasoning_output_tokens": 1152, "total_tokens": 28139
        }))
        .unwrap();
        assert_eq!(u.total_tokens(), 28139);
        assert_eq!(
            (u.cache_read, u.fresh_input, u.output, u.thinking),
            (22272, 4277, 438, 1152)
        );
    }

    #[test]
    fn rejects_inner_counts_above_their_container() {
        for bad in [
            json!({"input_tokens": 5, "cached_input_tokens": 9, "output_tokens": 2}),
            json!({"input_tokens": 5, "output_tokens": 2, "reasoning_output_tokens": 7}),
            json!({"input_tokens": 5, "output_tokens": 2,
                   "output_tokens_details": {"reasoning_tokens": 3}}),
        ] {
            assert_eq!(usage_from_openai(&bad).unwrap_err().code(), "invalid_usage");
        }
        let bad = json!({"input_tokens": 1, "cache_read_input_tokens": 1,
                         "output_tokens": 2, "thinking_tokens": 3});
        assert_eq!(
            usage_from_anthropic(&bad).unwrap_err().code(),
            "invalid_usage"
        );
        // Equal is fine: every output token was thinking.
        let u = usage_from_anthropic(&json!({"output_tokens": 3, "thinking_tokens": 3})).unwrap();
        assert_eq!((u.output, u.thinking), (0, 3));
    }

    #[test]
    fn partial_split_fills_zeros_and_stays_closed() {
        let u = usage_from_mapping(&json!({"cache_read": 1, "output": 2})).unwrap();
        assert_eq!(
            (
                u.cache_read,
                u.cache_write,
                u.fresh_input,
                u.output,
                u.thinking
            ),
            (1, 0, 0, 2, 0)
        );
        assert_eq!(
            usage_from_mapping(&json!({})).unwrap(),
            UsageSplit::default()
        );
        assert_eq!(
            usage_from_mapping(&Value::Null).unwrap(),
            UsageSplit::default()
        );
        for bad in [
            json!({"output": 2, "total": 2}),
            json!({"output": -1}),
            json!({"output": null}),
            json!({"output": 1.5}),
        ] {
            assert_eq!(
                usage_from_mapping(&bad).unwrap_err().code(),
                "invalid_usage"
            );
        }
    }

    #[test]
    fn rejects_bad_counts() {
        for bad in [
            json!({"input_tokens": -1}),
            json!({"input_tokens": 1.5}),
            json!({"input_tokens": "3x"}),
            json!({"input_tokens": "-3"}),
            json!({"input_tokens": " 3"}),
            json!({"input_tokens": "9007199254740992"}),
            json!({"input_tokens": 9007199254740992u64}),
            json!([1]),
        ] {
            assert_eq!(
                usage_from_mapping(&bad).unwrap_err().code(),
                "invalid_usage"
            );
        }
    }

    #[test]
    fn usage_from_shape_refuses_a_thinking_count_it_cannot_apply() {
        let u = json!({"input_tokens": 3, "output_tokens": 5});
        assert_eq!(
            usage_from_shape(UsageShape::Anthropic, &u, Some(2)).unwrap(),
            usage_from_anthropic_with_thinking(&u, 2).unwrap()
        );
        for shape in [UsageShape::Openai, UsageShape::Mapping] {
            assert_eq!(
                usage_from_shape(shape, &u, Some(2)).unwrap_err().code(),
                "invalid_usage"
            );
            assert!(usage_from_shape(shape, &u, None).is_ok());
        }
        assert_eq!(UsageShape::Mapping.attribute_keys(), None);
        assert_eq!(UsageShape::from_name("openai"), Some(UsageShape::Openai));
    }
}

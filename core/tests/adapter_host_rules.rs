//! The adapter rules a binding used to decide itself: host-fault errors built by code,
//! the agent-SDK turn fold, and the inline system prompt's precedence.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use stapel_runner_protocol::adapter::{
    usage_from_anthropic, AdapterError, AgentOptions, AgentTurn, RoleSpec,
};
use stapel_runner_protocol::wire::UsageSplit;

#[test]
fn every_host_code_builds_its_error_and_nothing_else_does() {
    for code in AdapterError::HOST_CODES {
        let e = AdapterError::host_fault(code, "why").expect("a host code");
        assert_eq!(e.code(), code);
        assert!(!e.is_local(), "{code} is a fault, not misuse");
        assert_eq!(
            e.to_value(),
            json!({"code": code, "line_number": null, "message": "why"})
        );
        assert!(e.to_string().contains("why"));
    }
    for code in [
        "harness_error",
        "session_closed",
        "not_json",
        "",
        "TURN_FAILED",
    ] {
        assert!(AdapterError::host_fault(code, "x").is_none(), "{code}");
    }
}

#[test]
fn only_the_first_result_counts() {
    let mut turn = AgentTurn::new();
    turn.text_block("t");
    turn.result(Some(json!({"input_tokens": 1})));
    turn.result(Some(json!({"input_tokens": 99})));
    let r = turn.finish().expect("valid");
    assert_eq!(r.usage.fresh_input, 1);
}

#[test]
fn explicit_prompt_takes_precedence() {
    let mut inv = Map::new();
    inv.insert("system_prompt".into(), json!("extra"));
    inv.insert("x".into(), json!(1));
    let mut spec = RoleSpec::from_invocation(&inv, None).expect("valid");
    assert_eq!(spec.system_prompt(), Some("extra"));
    spec.set_system_prompt(Some("explicit".into()));
    assert_eq!(spec.system_prompt(), Some("explicit"));
    // Replaced in place: the JSON form keeps the arrival order.
    let keys: Vec<_> = spec.extra.keys().cloned().collect();
    assert_eq!(keys, ["system_prompt", "x"]);
    assert_eq!(
        AgentOptions::from_role(&spec).system_prompt.as_deref(),
        Some("explicit")
    );
    spec.set_system_prompt(None);
    assert_eq!(spec.system_prompt(), None);
    assert_eq!(AgentOptions::from_role(&spec).system_prompt, None);
}

proptest! {
    /// Oracle: the fold's text is the blocks concatenated, and its usage is the direct
    /// Anthropic mapping of the result's usage (zero without one).
    #[test]
    fn fold_is_concatenation_and_mapping(
        blocks in proptest::collection::vec("[a-z \n✓]{0,6}", 0..8),
        usage in proptest::option::of((0u64..10_000, 0u64..10_000, 0u64..10_000)),
    ) {
        let mut turn = AgentTurn::new();
        for b in &blocks {
            turn.text_block(b);
        }
        let value: Option<Value> = usage.map(|(i, o, c)| {
            json!({"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": c})
        });
        turn.result(value.clone());
        let r = turn.finish().expect("valid usage");
        prop_assert_eq!(r.text, blocks.concat());
        let want = match &value {
            Some(v) => usage_from_anthropic(v).expect("valid"),
            None => UsageSplit::default(),
        };
        prop_assert_eq!(r.usage, want);
    }
}

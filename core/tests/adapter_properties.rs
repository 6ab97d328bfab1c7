//! Properties of the adapter seam: the subprocess turn machine is independent of how
//! stdout is chunked, and usage mapping never loses or double counts tokens.

use proptest::prelude::*;
use serde_json::{json, Value};
use stapel_runner_protocol::adapter::{
    usage_from_anthropic, usage_from_anthropic_with_thinking, usage_from_mapping,
    usage_from_openai, AdapterError, RoleSpec, SubprocessConfig, SubprocessInput,
    SubprocessSession, TurnResult,
};
use stapel_runner_protocol::wire::{UsageSplit, MAX_SAFE_INTEGER};

/// One harness stdout line that does not end a turn.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,12}".prop_map(|s| json!({"type": "state", "state": s}).to_string()),
        1 => Just(String::new()),
        1 => Just("not json".to_owned()),
        1 => "[a-z]{80,120}".prop_map(|s| json!({"type": "blob", "b": s}).to_string()),
    ]
}

/// The line that ends the turn, if any.
fn last_line() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        ("[a-zé✓ ]{0,20}", 0u64..1000, 0u64..1000).prop_map(|(t, i, o)| {
            json!({"type": "result", "text": t, "usage": {"input_tokens": i, "output_tokens": o}})
                .to_string()
        }),
        "[a-z]{1,8}".prop_map(|m| json!({"type": "error", "message": m}).to_string()),
    ])
}

fn run(stream: &[u8], chunks: &[usize], max_line_bytes: usize) -> Vec<Value> {
    let mut s = SubprocessSession::new(SubprocessConfig::with_max_line_bytes(max_line_bytes));
    let mut out = Vec::new();
    let drain = |s: &mut SubprocessSession, out: &mut Vec<Value>| {
        while let Some(o) = s.poll_output() {
            out.push(o.to_value());
        }
    };
    s.handle_input(
        0,
        SubprocessInput::Spawned {
            pid: None,
            process_group: false,
        },
    )
    .unwrap();
    s.handle_input(
        0,
        SubprocessInput::StartTurn {
            prompt: "go".into(),
        },
    )
    .unwrap();
    drain(&mut s, &mut out);
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        let n = chunks[i % chunks.len()].clamp(1, rest.len());
        let (head, tail) = rest.split_at(n);
        s.handle_input(0, SubprocessInput::Stdout(head.to_vec()))
            .unwrap();
        drain(&mut s, &mut out);
        rest = tail;
        i += 1;
    }
    s.handle_input(0, SubprocessInput::Eof).unwrap();
    drain(&mut s, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// One turn's stream gives the same outputs however stdout is chunked.
    #[test]
    fn chunking_does_not_matter(
        mut lines in prop::collection::vec(line(), 0..8),
        last in last_line(),
        crlf in any::<bool>(),
        chunks in prop::collection::vec(1usize..17, 1..6),
    ) {
        lines.extend(last);
        let sep = if crlf { "\r\n" } else { "\n" };
        let stream: String = lines.iter().map(|l| format!("{l}{sep}")).collect();
        let whole = run(stream.as_bytes(), &[usize::MAX], 100);
        let chunked = run(stream.as_bytes(), &chunks, 100);
        prop_assert_eq!(&whole, &chunked);
        prop_assert_eq!(&whole[0]["type"], "write_stdin");
        // Exactly one thing ends the turn: a result, an error, or end of file.
        let ends = whole.iter().filter(|o| o["type"] == "turn_result" || o["type"] == "error").count();
        prop_assert_eq!(ends, 1, "{:?}", whole);
        // Every error names a line within the stream (or is end-of-file).
        for o in &whole {
            if o["type"] == "error" {
                match o["line_number"].as_u64() {
                    Some(n) => prop_assert!(n >= 1 && n as usize <= lines.len()),
                    None => prop_assert_eq!(&o["code"], "unexpected_eof"),
                }
            }
        }
    }

    #[test]
    fn anthropic_mapping_preserves_the_total(
        input in 0u64..1 << 40, read in 0u64..1 << 40, write in 0u64..1 << 40,
        output in 0u64..1 << 40, thinking in proptest::option::of(0u64..1 << 41),
    ) {
        let mut u = json!({"input_tokens": input, "cache_read_input_tokens": read,
                           "cache_creation_input_tokens": write, "output_tokens": output});
        if let Some(t) = thinking { u["thinking_tokens"] = json!(t); }
        match usage_from_anthropic(&u) {
            Ok(s) => {
                prop_assert!(thinking.unwrap_or(0) <= output);
                prop_assert_eq!(s.total_tokens(), input + read + write + output);
                prop_assert_eq!(s.thinking, thinking.unwrap_or(0));
                prop_assert_eq!(usage_from_mapping(&u).unwrap(), s);
            }
            Err(e) => {
                // Thinking is inside output_tokens: more thinking than output is corrupt,
                // never silently clamped (that would lose tokens).
                prop_assert!(thinking.unwrap_or(0) > output);
                prop_assert_eq!(e.code(), "invalid_usage");
                prop_assert_eq!(usage_from_mapping(&u).unwrap_err().code(), "invalid_usage");
            }
        }
    }

    /// The thinking override keeps the total and the other columns; it only moves
    /// tokens between `output` and `thinking`, and 0 changes nothing.
    #[test]
    fn thinking_override_preserves_the_total(
        input in 0u64..1 << 40, read in 0u64..1 << 40, output in 0u64..1 << 40,
        own in proptest::option::of(0u64..1 << 40), spelled_as_reasoning in any::<bool>(),
        thinking in prop_oneof![Just(0u64), 0u64..1 << 41],
    ) {
        let mut u = json!({"input_tokens": input, "cache_read_input_tokens": read,
                           "output_tokens": output});
        if let Some(t) = own {
            let key = if spelled_as_reasoning { "reasoning_tokens" } else { "thinking_tokens" };
            u[key] = json!(t);
        }
        let got = usage_from_anthropic_with_thinking(&u, thinking);
        if thinking == 0 {
            prop_assert_eq!(got, usage_from_anthropic(&u));
            return Ok(());
        }
        match got {
            Ok(s) => {
                prop_assert!(thinking <= output);
                prop_assert_eq!(s.thinking, thinking);
                prop_assert_eq!(s.output + s.thinking, output);
                prop_assert_eq!((s.fresh_input, s.cache_read, s.cache_write), (input, read, 0));
                prop_assert_eq!(s.total_tokens(), input + read + output);
            }
            Err(e) => {
                prop_assert!(thinking > output);
                prop_assert_eq!(e.code(), "invalid_usage");
            }
        }
    }

    #[test]
    fn openai_mapping_preserves_the_total(
        input in 0u64..1 << 40, cached in 0u64..1 << 40,
        output in 0u64..1 << 40, reasoning in 0u64..1 << 40, nested in any::<bool>(),
    ) {
        let u = if nested {
            json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                   "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning}})
        } else {
            json!({"input_tokens": input, "cached_input_tokens": cached,
                   "output_tokens": output, "reasoning_output_tokens": reasoning})
        };
        let s = match usage_from_openai(&u) {
            Ok(s) => s,
            Err(e) => {
                prop_assert!(cached > input || reasoning > output);
                prop_assert_eq!(e.code(), "invalid_usage");
                return Ok(());
            }
        };
        prop_assert!(cached <= input && reasoning <= output);
        prop_assert_eq!(s.total_tokens(), input + output);
        prop_assert_eq!((s.cache_read, s.thinking), (cached, reasoning));
        prop_assert_eq!(s.cache_write, 0);
        prop_assert_eq!(s.cache_read + s.fresh_input, input);
        prop_assert_eq!(s.output + s.thinking, output);
        prop_assert!(s.to_value().as_object().unwrap().values().all(|v| v.as_u64().unwrap() <= MAX_SAFE_INTEGER));
        prop_assert_eq!(usage_from_mapping(&u).unwrap(), s);
    }
}

#[test]
fn oversized_line_is_reported_once_and_closes() {
    let mut stream = vec![b'{'; 10_000];
    stream.extend_from_slice(b"\n{\"type\":\"result\",\"text\":\"x\",\"usage\":{}}\n");
    let out = run(&stream, &[333], 64);
    let errors: Vec<&Value> = out.iter().filter(|o| o["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{out:?}");
    assert_eq!(errors[0]["code"], "line_too_long");
    assert_eq!(errors[0]["line_number"], 1);
    assert!(!out.iter().any(|o| o["type"] == "turn_result"));
}

#[test]
fn turn_result_try_new_checks_the_schema_bound() {
    let ok = UsageSplit {
        cache_read: MAX_SAFE_INTEGER,
        ..UsageSplit::default()
    };
    assert_eq!(TurnResult::try_new("t", ok).unwrap().usage, ok);
    for i in 0..5 {
        let mut c = [0u64; 5];
        c[i] = MAX_SAFE_INTEGER + 1;
        let bad = UsageSplit {
            cache_read: c[0],
            cache_write: c[1],
            fresh_input: c[2],
            output: c[3],
            thinking: c[4],
        };
        let e = TurnResult::try_new("t", bad).unwrap_err();
        assert_eq!(e.code(), "invalid_usage");
        // And the same value is refused by the JSON form.
        let v = serde_json::json!({"text": "t", "usage": bad.to_value()});
        assert_eq!(
            TurnResult::from_value(&v).unwrap_err().code(),
            "invalid_usage"
        );
    }
}

#[test]
fn invalid_invocation_names_its_field_in_json() {
    let inv = serde_json::json!({"allowed_tools": ["a", 1]});
    let e = RoleSpec::from_invocation(inv.as_object().unwrap(), None).unwrap_err();
    assert!(matches!(e, AdapterError::InvalidInvocation { .. }));
    assert_eq!(
        e.to_value(),
        serde_json::json!({"code": "invalid_invocation", "line_number": null, "field": "allowed_tools/1"})
    );
}

#[test]
fn role_spec_round_trips_without_loss() {
    // Every key of the invocation comes back from to_value (role only once).
    let inv = serde_json::json!({"role": "planner", "model": "m", "zeta": [1], "alpha": {"b": 2}});
    let spec = RoleSpec::from_invocation(inv.as_object().unwrap(), Some("planner")).unwrap();
    let v = spec.to_value();
    for (k, x) in inv.as_object().unwrap() {
        assert_eq!(&v[k.as_str()], x, "{k}");
    }
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["role", "model", "session", "allowed_tools", "zeta", "alpha"]
    );
}

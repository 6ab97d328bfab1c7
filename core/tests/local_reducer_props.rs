//! Reducer properties over the events of real simulated runs: retransmissions never
//! change the snapshot (live == replay), and arbitrary reorderings never panic, never
//! apply an event twice and keep the cursor monotonic.

#[path = "local_sim.rs"]
mod local_sim;

use local_sim::{command, Sim};
use proptest::prelude::*;
use serde_json::{json, Value};
use stapel_runner_protocol::local::LocalConfig;
use stapel_runner_protocol::reducer::{replay, Outcome, ReducerConfig, SessionReducer};

fn run_events(script: &str) -> Vec<Value> {
    let mut sim = Sim::new(script, LocalConfig::default());
    sim.start_turn("turn_1");
    sim.settle();
    if script == "interrupted" {
        sim.send(&command("cmd_int", 4, "turn.interrupt", json!({})));
        sim.settle();
    }
    sim.events()
}

fn script_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("happy-path"),
        Just("error"),
        Just("duplicate-terminal"),
        Just("interrupted")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn retransmissions_do_not_change_the_snapshot(script in script_name(), repeats in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..3), 0..30)) {
        let events = run_events(script);
        // Delivery: the clean order, with earlier events re-sent after later ones.
        let mut delivery: Vec<Value> = Vec::new();
        let mut plan: Vec<Vec<usize>> = vec![Vec::new(); events.len()];
        for (idx, extra) in &repeats {
            let at = idx.index(events.len());
            for k in 0..*extra {
                plan[(at + k).min(events.len() - 1)].push(at.saturating_sub(k));
            }
        }
        for (i, e) in events.iter().enumerate() {
            delivery.push(e.clone());
            for j in &plan[i] {
                delivery.push(events[*j].clone());
            }
        }
        let mut live = SessionReducer::new(ReducerConfig::for_run("run_local"));
        for e in &delivery {
            let outcome = live.apply(e).unwrap();
            prop_assert!(matches!(outcome, Outcome::Applied | Outcome::Duplicate));
        }
        prop_assert_eq!(live.snapshot(), replay(ReducerConfig::for_run("run_local"), &events));
        prop_assert_eq!(live.delivery()["duplicates"].as_u64().unwrap() as usize, delivery.len() - events.len());
    }

    #[test]
    fn any_order_applies_each_event_at_most_once(script in script_name(), order in Just(()).prop_perturb(|_, mut rng| {
        let mut v: Vec<usize> = (0..64).collect();
        for i in (1..v.len()).rev() {
            let j = (rng.next_u32() as usize) % (i + 1);
            v.swap(i, j);
        }
        v
    })) {
        let events = run_events(script);
        let mut r = SessionReducer::new(ReducerConfig::for_run("run_local"));
        let mut last_seq = 0u64;
        let mut applied = 0u64;
        for i in order.iter().filter(|i| **i < events.len()) {
            match r.apply(&events[*i]).unwrap() {
                Outcome::Applied | Outcome::AppliedAfterGap { .. } => {
                    let seq = events[*i]["sourceSeq"].as_u64().unwrap();
                    prop_assert!(seq > last_seq);
                    last_seq = seq;
                    applied += 1;
                }
                Outcome::OutOfOrder { cursor } => prop_assert_eq!(cursor, last_seq),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(r.snapshot()["appliedEvents"].as_u64().unwrap(), applied);
        prop_assert_eq!(r.snapshot()["gaps"].as_array().unwrap().len() as u64 <= applied, true);
    }

    #[test]
    fn mutated_events_never_panic(script in script_name(), pick in any::<prop::sample::Index>(), key in "[a-zA-Z]{1,12}", value in prop_oneof![Just(json!(null)), Just(json!(7)), Just(json!("x")), Just(json!([])), Just(json!({}))]) {
        let events = run_events(script);
        let mut e = events[pick.index(events.len())].clone();
        let keys: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
        let k = keys.iter().find(|k| k.to_lowercase().starts_with(&key[..1].to_lowercase())).cloned().unwrap_or(key);
        e[k.as_str()] = value;
        let mut r = SessionReducer::new(ReducerConfig::for_run("run_local"));
        let before = r.snapshot();
        if r.apply(&e).is_err() {
            prop_assert_eq!(r.snapshot(), before);
        }
    }
}

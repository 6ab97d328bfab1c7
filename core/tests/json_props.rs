//! Properties of `json::Value` / `json::Object` against `serde_json` (with
//! `preserve_order`) as the reference model: parsing, member order, re-encoding,
//! conversions, duplicate-key rejection, and the map operations.

use proptest::prelude::*;
use stapel_runner_protocol::json::{Object, Value};

/// Arbitrary JSON values with small key alphabets (so objects built from generated
/// member lists often repeat keys) and every number shape.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<u64>().prop_map(Into::into),
        any::<i64>().prop_map(Into::into),
        (-1.0e300f64..1.0e300).prop_map(Into::into),
        "[a-z\u{e9}\"\\\\/\n\u{1f600}]{0,30}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::vec(("[a-e~/]{0,3}|[a-z]{20,30}", inner), 0..24)
                .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_and_encode_match_serde_json(v in json()) {
        let text = serde_json::to_string(&v).unwrap();
        let ours: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&ours, &v);
        prop_assert_eq!(serde_json::to_string(&ours).unwrap(), text.clone());
        prop_assert_eq!(ours.to_string(), text);
        prop_assert_eq!(serde_json::Value::from(ours.clone()), v.clone());
        prop_assert_eq!(Value::from(v.clone()), ours.clone());
        prop_assert_eq!(Value::from(&v), ours);
    }

    #[test]
    fn map_operations_match_an_ordered_reference(
        ops in prop::collection::vec((0u8..3, "[a-f]{1,2}", any::<u32>()), 0..80)
    ) {
        let mut ours = Object::new();
        let mut reference = serde_json::Map::new();
        for (op, key, n) in ops {
            match op {
                0 => {
                    let old = ours.insert(key.as_str(), n);
                    let want = reference.insert(key.clone(), n.into());
                    prop_assert_eq!(old.map(serde_json::Value::from), want);
                }
                1 => {
                    let old = ours.remove(&key);
                    let want = reference.shift_remove(&key);
                    prop_assert_eq!(old.map(serde_json::Value::from), want);
                }
                _ => prop_assert_eq!(
                    ours.get(&key).cloned().map(serde_json::Value::from),
                    reference.get(&key).cloned()
                ),
            }
            prop_assert_eq!(ours.keys().collect::<Vec<_>>(), reference.keys().map(String::as_str).collect::<Vec<_>>());
        }
        prop_assert_eq!(serde_json::Map::from(ours), reference);
    }

    #[test]
    fn a_repeated_key_is_rejected_wherever_it_is(
        n in 1usize..60, dup in any::<prop::sample::Index>(), depth in 0usize..3
    ) {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        let mut members: Vec<String> = keys.iter().map(|k| format!("\"{k}\":1")).collect();
        let repeated = &keys[dup.index(n)];
        members.push(format!("\"{repeated}\":2"));
        let mut text = format!("{{{}}}", members.join(","));
        for _ in 0..depth {
            text = format!("{{\"wrap\":[{text}]}}");
        }
        let err = serde_json::from_str::<Value>(&text).unwrap_err().to_string();
        let expected = format!("duplicate key \"{repeated}\"");
        prop_assert!(err.contains(&expected), "{}", err);
    }
}

//! Typed access to the fields of one JSON object, shared by every area that reads
//! hand-written JSON models (`contract`, `local`, `adapter`).
//!
//! The readers report a small neutral [`FieldError`] — what is wrong ([`Problem`]), where
//! (a `/`-separated path, keys escaped as in a JSON Pointer) and the offending value — and
//! each area maps it into its own error enum with one `From` impl or closure, so every
//! area keeps its own error codes and wording.
//!
//! Two conventions for `null` exist among the models: [`get`] returns a present `null`
//! like any other value (the local-runner models, where `null` is a wrong type), while
//! [`get_set`] treats it as absent (the contract models).

use serde_json::{Map, Value};

pub(crate) use crate::wire::type_name;

/// The JSON type a reader expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expected {
    /// A string.
    String,
    /// An integer (a JSON number without fraction).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// An object.
    Object,
    /// An array.
    Array,
}

impl Expected {
    /// The type with its article, as error messages spell it (`a string`, `an object`).
    pub(crate) fn with_article(self) -> &'static str {
        match self {
            Expected::String => "a string",
            Expected::Integer => "an integer",
            Expected::Boolean => "a boolean",
            Expected::Object => "an object",
            Expected::Array => "an array",
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A required field is absent.
    Missing,
    /// The value has another JSON type than the one expected.
    WrongType(Expected),
    /// An integer was expected and a number was found, but not an integer in range.
    OutOfRange,
    /// A string that must not be empty is empty.
    Empty,
    /// The object has a field the model does not declare.
    UnknownField,
}

/// One field could not be read. `found` is the offending value, when there is one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError<'v> {
    /// `/`-separated path of the field, relative to the object read.
    pub(crate) path: String,
    /// What is wrong.
    pub(crate) problem: Problem,
    /// The value found (`None` for [`Problem::Missing`]).
    pub(crate) found: Option<&'v Value>,
}

impl<'v> FieldError<'v> {
    fn new(path: &str, problem: Problem, found: Option<&'v Value>) -> Self {
        Self {
            path: path.to_owned(),
            problem,
            found,
        }
    }

    /// The JSON type name of the value found (`absent` when there is none).
    pub(crate) fn found_type(&self) -> &'static str {
        self.found.map_or("absent", type_name)
    }

    /// `expected <type>, found <type>` — the wording of a wrong type.
    pub(crate) fn expected_found(&self, expected: Expected) -> String {
        format!(
            "expected {}, found {}",
            expected.with_article(),
            self.found_type()
        )
    }
}

/// `prefix/key`, with `~` and `/` in `key` escaped (`~0`, `~1`) as in a JSON Pointer.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    concat(prefix, &key.replace('~', "~0").replace('/', "~1"))
}

/// Append an already-escaped relative path to a path.
pub(crate) fn concat(prefix: &str, rel: &str) -> String {
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}/{rel}"),
    }
}

/// `value` as an object; [`Problem::WrongType`] at the path `""` otherwise.
pub(crate) fn object(value: &Value) -> Result<&Map<String, Value>, FieldError<'_>> {
    value
        .as_object()
        .ok_or_else(|| FieldError::new("", Problem::WrongType(Expected::Object), Some(value)))
}

/// The first field of `map`, in arrival order, that `declared` does not name, as a
/// [`Problem::UnknownField`].
pub(crate) fn reject_unknown<'v>(
    map: &'v Map<String, Value>,
    declared: &[&str],
) -> Result<(), FieldError<'v>> {
    match map.iter().find(|(k, _)| !declared.contains(&k.as_str())) {
        Some((k, v)) => Err(FieldError {
            path: join("", k),
            problem: Problem::UnknownField,
            found: Some(v),
        }),
        None => Ok(()),
    }
}

/// The fields of `map` that `declared` does not name, in arrival order.
pub(crate) fn extra(map: &Map<String, Value>, declared: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !declared.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The value of `key`, a present `null` included.
pub(crate) fn get<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key)
}

/// The value of `key`; `None` when absent or `null`.
pub(crate) fn get_set<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// `found` for a required field at `path`: [`Problem::Missing`] when `None`.
pub(crate) fn required<'v>(
    found: Option<&'v Value>,
    path: &str,
) -> Result<&'v Value, FieldError<'v>> {
    found.ok_or_else(|| FieldError::new(path, Problem::Missing, None))
}

/// `v` (at `path`) as a string, possibly empty.
pub(crate) fn string<'v>(v: &'v Value, path: &str) -> Result<&'v str, FieldError<'v>> {
    v.as_str()
        .ok_or_else(|| FieldError::new(path, Problem::WrongType(Expected::String), Some(v)))
}

/// `v` (at `path`) as a non-empty string.
pub(crate) fn nonempty_string<'v>(v: &'v Value, path: &str) -> Result<&'v str, FieldError<'v>> {
    match string(v, path)? {
        "" => Err(FieldError::new(path, Problem::Empty, Some(v))),
        s => Ok(s),
    }
}

/// `v` (at `path`) as an integer in `0..=max`: [`Problem::WrongType`] for a non-number,
/// [`Problem::OutOfRange`] for a number that is not such an integer.
pub(crate) fn uint<'v>(v: &'v Value, path: &str, max: u64) -> Result<u64, FieldError<'v>> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .filter(|u| *u <= max)
            .ok_or_else(|| FieldError::new(path, Problem::OutOfRange, Some(v))),
        other => Err(FieldError::new(
            path,
            Problem::WrongType(Expected::Integer),
            Some(other),
        )),
    }
}

/// `v` (at `path`) as a boolean.
pub(crate) fn boolean<'v>(v: &'v Value, path: &str) -> Result<bool, FieldError<'v>> {
    v.as_bool()
        .ok_or_else(|| FieldError::new(path, Problem::WrongType(Expected::Boolean), Some(v)))
}

/// `v` (at `path`) as an object.
pub(crate) fn object_at<'v>(
    v: &'v Value,
    path: &str,
) -> Result<&'v Map<String, Value>, FieldError<'v>> {
    v.as_object()
        .ok_or_else(|| FieldError::new(path, Problem::WrongType(Expected::Object), Some(v)))
}

/// `v` (at `path`) as an array.
pub(crate) fn array<'v>(v: &'v Value, path: &str) -> Result<&'v [Value], FieldError<'v>> {
    v.as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| FieldError::new(path, Problem::WrongType(Expected::Array), Some(v)))
}

/// A required field of `map` (a present `null` included) read by `read`.
pub(crate) fn req_with<'v, T>(
    map: &'v Map<String, Value>,
    key: &str,
    read: impl FnOnce(&'v Value, &str) -> Result<T, FieldError<'v>>,
) -> Result<T, FieldError<'v>> {
    read(required(get(map, key), key)?, key)
}

/// An optional field of `map` read by `read`; a present `null` is handed to `read`.
pub(crate) fn opt_with<'v, T>(
    map: &'v Map<String, Value>,
    key: &str,
    read: impl FnOnce(&'v Value, &str) -> Result<T, FieldError<'v>>,
) -> Result<Option<T>, FieldError<'v>> {
    get(map, key).map(|v| read(v, key)).transpose()
}

/// A required field (a present `null` included).
pub(crate) fn req<'v>(map: &'v Map<String, Value>, key: &str) -> Result<&'v Value, FieldError<'v>> {
    required(get(map, key), key)
}

/// Define named shortcuts `name(map, key)` for [`req_with`] / [`opt_with`] with one reader.
macro_rules! shortcuts {
    ($($(#[$doc:meta])* $name:ident: $with:ident($read:expr) -> $t:ty;)+) => {$(
        $(#[$doc])*
        pub(crate) fn $name<'v>(
            map: &'v Map<String, Value>,
            key: &str,
        ) -> Result<$t, FieldError<'v>> {
            $with(map, key, $read)
        }
    )+};
}

shortcuts! {
    /// A required string, possibly empty.
    req_str: req_with(string) -> &'v str;
    /// A required non-empty string.
    req_nonempty_str: req_with(nonempty_string) -> &'v str;
    /// An optional string, possibly empty; a present `null` is a wrong type.
    opt_str: opt_with(string) -> Option<&'v str>;
    /// A required integer in `0..=u64::MAX`.
    req_u64: req_with(|v, path| uint(v, path, u64::MAX)) -> u64;
    /// A required object.
    req_object: req_with(object_at) -> &'v Map<String, Value>;
    /// An optional object; a present `null` is a wrong type.
    opt_object: opt_with(object_at) -> Option<&'v Map<String, Value>>;
    /// A required array.
    req_array: req_with(array) -> &'v [Value];
}

/// Parse each item of `items` with `parse(item, path)`, where `path` is `prefix/<index>`.
pub(crate) fn each<'v, T, E>(
    items: &'v [Value],
    prefix: &str,
    mut parse: impl FnMut(&'v Value, &str) -> Result<T, E>,
) -> Result<Vec<T>, E> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse(item, &join(prefix, &i.to_string())))
        .collect()
}

/// The value at the unescaped `/`-separated `path` below `map` (`a` or `a/b`); `None`
/// when any step is absent or `null`. A step that is not an object is a
/// [`Problem::WrongType`] at the path up to it.
pub(crate) fn descend<'v>(
    map: &'v Map<String, Value>,
    path: &str,
) -> Result<Option<&'v Value>, FieldError<'v>> {
    let mut steps = path.split('/');
    let first = steps.next().unwrap_or_default();
    let Some(mut v) = get_set(map, first) else {
        return Ok(None);
    };
    let mut at = first.len();
    for step in steps {
        let Value::Object(m) = v else {
            let walked = path.get(..at).unwrap_or(path);
            return Err(FieldError::new(
                walked,
                Problem::WrongType(Expected::Object),
                Some(v),
            ));
        };
        let Some(next) = get_set(m, step) else {
            return Ok(None);
        };
        v = next;
        at = at.saturating_add(1).saturating_add(step.len());
    }
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: &Value) -> &Map<String, Value> {
        object(v).unwrap()
    }

    #[test]
    fn null_is_a_value_for_get_and_absent_for_get_set() {
        let v = json!({"a": null});
        let m = map(&v);
        assert_eq!(get(m, "a"), Some(&Value::Null));
        assert_eq!(get_set(m, "a"), None);
        let e = required(get_set(m, "a"), "a").unwrap_err();
        assert_eq!((e.path.as_str(), e.problem), ("a", Problem::Missing));
        let e = string(get(m, "a").unwrap(), "a").unwrap_err();
        assert_eq!(
            e.expected_found(Expected::String),
            "expected a string, found null"
        );
    }

    #[test]
    fn typed_readers_report_problem_path_and_value() {
        let v = json!({"s": "", "n": -1, "f": 1.5, "big": 9_007_199_254_740_992u64, "b": true});
        let m = map(&v);
        assert_eq!(string(&m["s"], "s").unwrap(), "");
        assert_eq!(
            nonempty_string(&m["s"], "s").unwrap_err().problem,
            Problem::Empty
        );
        for k in ["n", "f", "big"] {
            let e = uint(&m[k], k, crate::wire::MAX_SAFE_INTEGER).unwrap_err();
            assert_eq!((e.problem, e.found), (Problem::OutOfRange, Some(&m[k])));
        }
        assert_eq!(
            uint(&m["big"], "big", u64::MAX).unwrap(),
            9_007_199_254_740_992
        );
        assert_eq!(
            uint(&m["s"], "s", u64::MAX).unwrap_err().problem,
            Problem::WrongType(Expected::Integer)
        );
        assert!(boolean(&m["b"], "b").unwrap());
        assert_eq!(
            array(&m["b"], "b")
                .unwrap_err()
                .expected_found(Expected::Array),
            "expected an array, found boolean"
        );
        assert_eq!(
            object(&json!([1])).unwrap_err().problem,
            Problem::WrongType(Expected::Object)
        );
    }

    #[test]
    fn unknown_fields_and_extra_keep_arrival_order() {
        let v = json!({"a": 1, "x/y": 2, "z": 3});
        let m = map(&v);
        let e = reject_unknown(m, &["a"]).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.problem),
            ("x~1y", Problem::UnknownField)
        );
        assert!(reject_unknown(m, &["a", "x/y", "z"]).is_ok());
        let keys: Vec<_> = extra(m, &["a"]).keys().cloned().collect();
        assert_eq!(keys, ["x/y", "z"]);
    }

    #[test]
    fn paths_join_escape_and_descend() {
        assert_eq!(join("", "a~b"), "a~0b");
        assert_eq!(join("p", "a"), "p/a");
        assert_eq!(concat("p", ""), "p");
        let out: Result<Vec<String>, ()> =
            each(&[json!(1), json!(2)], "list", |_, p| Ok(p.to_owned()));
        assert_eq!(out.unwrap(), ["list/0", "list/1"]);
        let v = json!({"a": {"b": 7, "n": null}, "s": 3});
        let m = map(&v);
        assert_eq!(descend(m, "a/b").unwrap(), Some(&json!(7)));
        assert_eq!(descend(m, "a/n").unwrap(), None);
        assert_eq!(descend(m, "q/b").unwrap(), None);
        let e = descend(m, "s/b").unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.problem),
            ("s", Problem::WrongType(Expected::Object))
        );
    }
}

//! Small helpers that check JSON values against schema rules and collect violations.

use super::error::{Rule, Violation};
use super::MAX_SAFE_INTEGER;
use crate::json::{Object, Value};

/// `prefix/key`, with `~` and `/` in `key` escaped as in JSON Pointer.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len().saturating_add(key.len()).saturating_add(1));
    if !prefix.is_empty() {
        out.push_str(prefix);
        out.push('/');
    }
    if key.contains(['~', '/']) {
        out.push_str(&key.replace('~', "~0").replace('/', "~1"));
    } else {
        out.push_str(key);
    }
    out
}

/// Sort violations by location (stable, so the first-found rule at a location stays
/// first) and keep one per location; drop violations nested under a location that already
/// has one. A value that is missing or of the wrong type is thereby not also reported for
/// the constraints its default would break.
pub(crate) fn finish(mut v: Vec<Violation>) -> Vec<Violation> {
    v.sort_by(|a, b| a.location.cmp(&b.location));
    v.dedup_by(|b, a| a.location == b.location);
    let locations: std::collections::HashSet<String> =
        v.iter().map(|x| x.location.clone()).collect();
    v.retain(|x| {
        !x.location
            .match_indices('/')
            .any(|(i, _)| locations.contains(&x.location[..i]))
    });
    v
}

/// A location in a frame, built on the stack and rendered to a string only when a
/// violation is reported (the valid path allocates nothing for locations).
#[derive(Clone, Copy)]
pub(crate) enum Loc<'a> {
    /// A complete location (`""` is the root).
    Path(&'a str),
    /// `parent/key`.
    Key(&'a Loc<'a>, &'a str),
    /// `parent/index`.
    Index(&'a Loc<'a>, usize),
}

impl Loc<'_> {
    pub(crate) fn render(&self) -> String {
        match self {
            Loc::Path(p) => (*p).to_owned(),
            Loc::Key(parent, key) => join(&parent.render(), key),
            Loc::Index(parent, i) => join(&parent.render(), &i.to_string()),
        }
    }
}

/// Collects violations.
pub(crate) struct Checker<'a> {
    pub(crate) out: &'a mut Vec<Violation>,
}

impl Checker<'_> {
    pub(crate) fn push(&mut self, loc: Loc<'_>, rule: Rule, message: impl Into<String>) {
        self.out.push(Violation::new(loc.render(), rule, message));
    }

    pub(crate) fn type_error(&mut self, loc: Loc<'_>, expected: &str, found: &Value) {
        let msg = format!("expected {expected}, found {}", found.type_name());
        self.push(loc, Rule::Type, msg);
    }

    /// A non-negative integer within the safe range.
    pub(crate) fn uint(&mut self, loc: Loc<'_>, v: &Value) -> Option<u64> {
        match v {
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    if u > MAX_SAFE_INTEGER {
                        self.push(loc, Rule::Range, format!("{u} is above 2^53 - 1"));
                        None
                    } else {
                        Some(u)
                    }
                } else if let Some(i) = n.as_i64() {
                    self.push(loc, Rule::Minimum, format!("{i} is below the minimum 0"));
                    None
                } else {
                    self.push(loc, Rule::Type, format!("expected integer, found {n}"));
                    None
                }
            }
            other => {
                self.type_error(loc, "integer", other);
                None
            }
        }
    }

    /// A signed integer within the safe range.
    pub(crate) fn int(&mut self, loc: Loc<'_>, v: &Value) -> Option<i64> {
        match v {
            Value::Number(n) => match n.as_i64() {
                Some(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER => Some(i),
                Some(i) => {
                    self.push(loc, Rule::Range, format!("{i} is outside ±(2^53 - 1)"));
                    None
                }
                None if n.is_u64() => {
                    self.push(loc, Rule::Range, format!("{n} is outside ±(2^53 - 1)"));
                    None
                }
                None => {
                    self.push(loc, Rule::Type, format!("expected integer, found {n}"));
                    None
                }
            },
            other => {
                self.type_error(loc, "integer", other);
                None
            }
        }
    }

    pub(crate) fn string<'v>(
        &mut self,
        loc: Loc<'_>,
        v: &'v Value,
        min_len: usize,
    ) -> Option<&'v str> {
        match v {
            Value::String(s) => {
                if min_len > 0 && s.chars().take(min_len).count() < min_len {
                    self.push(
                        loc,
                        Rule::MinLength,
                        format!("must have at least {min_len} character(s)"),
                    );
                }
                Some(s)
            }
            other => {
                self.type_error(loc, "string", other);
                None
            }
        }
    }

    pub(crate) fn string_array(&mut self, loc: Loc<'_>, v: &Value, item_min_len: usize) {
        match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.string(Loc::Index(&loc, i), item, item_min_len);
                }
            }
            other => self.type_error(loc, "array", other),
        }
    }

    pub(crate) fn object<'v>(&mut self, loc: Loc<'_>, v: &'v Value) -> Option<&'v Object> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.type_error(loc, "object", other);
                None
            }
        }
    }

    /// `schema_version` of an embedded artifact: required, `const: 1`.
    pub(crate) fn schema_version_const(&mut self, obj: &Object, prefix: Loc<'_>) {
        let loc = Loc::Key(&prefix, "schema_version");
        match obj.get("schema_version") {
            None => self.push(loc, Rule::Required, "required field is missing"),
            Some(v) if v.as_u64() == Some(1) => {}
            Some(v) => self.push(loc, Rule::Const, format!("must be 1, found {v}")),
        }
    }

    /// Required field `key` of `obj`: the value, or a `required` violation at
    /// `prefix/key`.
    pub(crate) fn required<'v>(
        &mut self,
        obj: &'v Object,
        prefix: Loc<'_>,
        key: &str,
    ) -> Option<&'v Value> {
        let v = obj.get(key);
        if v.is_none() {
            self.push(
                Loc::Key(&prefix, key),
                Rule::Required,
                "required field is missing",
            );
        }
        v
    }
}

//! Scenario files (`conformance/scenarios/{runner,hub}/*.json`, schema
//! `conformance/scenario.schema.json`): loading, filtering, and the JSON matcher every
//! expectation uses.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How much a case counts (Autobahn's strict / non-strict split).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// A failure fails the run (exit status 1).
    Required,
    /// A failure is reported as `non-strict`.
    Recommended,
    /// A protocol extension of this project: a failure is reported as `non-strict`.
    Extension,
}

impl Strictness {
    /// The word used in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Strictness::Required => "required",
            Strictness::Recommended => "recommended",
            Strictness::Extension => "extension",
        }
    }
}

/// One scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// `runner/…` or `hub/…`: the mode folder and the file stem.
    pub id: String,
    /// What the case proves.
    pub description: String,
    /// Where the rule comes from (seed section, docs/protocol.md section, core module).
    pub source: String,
    /// How much the case counts.
    pub strictness: Strictness,
    /// Session configuration keys for the kit's own core session machine.
    pub kit_session: Value,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// One step: an input the kit performs, and what must then be observed.
#[derive(Debug, Clone)]
pub struct Step {
    /// The action (one key).
    pub input: Value,
    /// The expectations (see the scenario schema).
    pub expect: Value,
    /// When this step's expectations are not met: `fail` (default) or
    /// `not_applicable` (the peer lacks a precondition, e.g. a hub without an assigned
    /// task).
    pub otherwise: String,
}

/// A scenario file that could not be read.
#[derive(Debug)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

/// The scenario folder: `$STAPEL_CONFORMANCE_SCENARIOS`, else `conformance/scenarios`
/// of this source tree (the kit is run from the repository or its release archive).
pub fn default_dir() -> PathBuf {
    if let Ok(d) = std::env::var("STAPEL_CONFORMANCE_SCENARIOS") {
        return PathBuf::from(d);
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/scenarios");
    if here.is_dir() {
        return here;
    }
    PathBuf::from("conformance/scenarios")
}

/// Every scenario of `mode` (`runner` or `hub`) under `dir`, sorted by id, whose id
/// matches `glob` (`*` and `?`; matched against the id and against the file stem).
///
/// # Errors
/// A missing folder or a file that is not a valid scenario.
pub fn load(dir: &Path, mode: &str, glob: Option<&str>) -> Result<Vec<Scenario>, ScenarioError> {
    let folder = dir.join(mode);
    let entries = std::fs::read_dir(&folder)
        .map_err(|e| ScenarioError(format!("{}: {e}", folder.display())))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let id = format!("{mode}/{stem}");
        if let Some(g) = glob {
            if !glob_match(g, &id) && !glob_match(g, &stem) {
                continue;
            }
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?;
        out.push(parse(&id, &v).map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?);
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn parse(id: &str, v: &Value) -> Result<Scenario, String> {
    let o = v.as_object().ok_or("not an object")?;
    let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(file_id) = s("id") {
        if file_id != id {
            return Err(format!("id {file_id:?} is not the file's id {id:?}"));
        }
    }
    let strictness = match s("strictness").as_deref() {
        Some("required") => Strictness::Required,
        Some("recommended") => Strictness::Recommended,
        Some("extension") => Strictness::Extension,
        other => return Err(format!("strictness {other:?}")),
    };
    let steps = o
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("steps missing")?
        .iter()
        .map(|st| {
            let input = st.get("input").cloned().ok_or("a step without input")?;
            let expect = st.get("expect").cloned().unwrap_or(Value::Null);
            if expect.as_object().is_none_or(|e| e.is_empty()) {
                return Err("a step without expectations");
            }
            let otherwise = st
                .get("otherwise")
                .and_then(Value::as_str)
                .unwrap_or("fail")
                .to_string();
            Ok(Step {
                input,
                expect,
                otherwise,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scenario {
        id: id.to_string(),
        description: s("description").ok_or("description missing")?,
        source: s("source").unwrap_or_default(),
        strictness,
        kit_session: o.get("kit_session").cloned().unwrap_or(Value::Null),
        steps,
    })
}

/// `sc` with every task id given `prefix`: the values of `task_id` members, the keys of
/// `resume` maps and `assign_many` prefixes (their tasks are `<prefix>-<n>`).
pub fn renamed(sc: &Scenario, prefix: &str) -> Scenario {
    let mut ids = std::collections::BTreeSet::new();
    for step in &sc.steps {
        collect_ids(&step.input, &mut ids);
        collect_ids(&step.expect, &mut ids);
    }
    let mut out = sc.clone();
    for step in &mut out.steps {
        rename(&mut step.input, &ids, prefix);
        rename(&mut step.expect, &ids, prefix);
    }
    out
}

fn collect_ids(v: &Value, ids: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("task_id", Value::String(t)) => {
                        ids.insert(t.clone());
                    }
                    ("resume", Value::Object(r)) => ids.extend(r.keys().cloned()),
                    _ => collect_ids(x, ids),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_ids(x, ids)),
        _ => {}
    }
}

fn rename(v: &mut Value, ids: &std::collections::BTreeSet<String>, prefix: &str) {
    match v {
        Value::Object(o) => {
            let entries = std::mem::take(o);
            for (k, mut x) in entries {
                match (k.as_str(), &mut x) {
                    ("task_id", Value::String(t)) if ids.contains(t.as_str()) => {
                        *t = format!("{prefix}{t}");
                    }
                    ("prefix", Value::String(p)) => *p = format!("{prefix}{p}"),
                    _ => rename(&mut x, ids, prefix),
                }
                let k = if ids.contains(&k) {
                    format!("{prefix}{k}")
                } else {
                    k
                };
                o.insert(k, x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename(x, ids, prefix)),
        _ => {}
    }
}

/// `*` (any run) and `?` (one character) glob over the whole string.
pub fn glob_match(glob: &str, s: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let t: Vec<char> = s.chars().collect();
    let (mut gi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ti;
            gi += 1;
        } else if let Some(sp) = star {
            gi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while gi < g.len() && g[gi] == '*' {
        gi += 1;
    }
    gi == g.len()
}

/// Does `actual` match the pattern `expected`? Objects: every expected key matches (an
/// expected `{}` or `[]` also matches an absent key: the encoding omits empty optional
/// fields); arrays: every expected element matches a distinct actual element, in any
/// order; scalars: equal as JSON values (numbers by value).
pub fn matches(expected: &Value, actual: Option<&Value>) -> bool {
    match expected {
        Value::Object(e) => {
            let Some(a) = actual else {
                return e.is_empty();
            };
            let Some(a) = a.as_object() else {
                return false;
            };
            e.iter().all(|(k, ev)| match a.get(k) {
                Some(av) => matches(ev, Some(av)),
                None => is_empty(ev),
            })
        }
        Value::Array(e) => {
            let Some(a) = actual else {
                return e.is_empty();
            };
            let Some(a) = a.as_array() else {
                return false;
            };
            let mut used = vec![false; a.len()];
            e.iter().all(|ev| {
                for (i, av) in a.iter().enumerate() {
                    if !used[i] && matches(ev, Some(av)) {
                        used[i] = true;
                        return true;
                    }
                }
                false
            })
        }
        Value::Number(n) => actual
            .and_then(Value::as_number)
            .is_some_and(|a| a.as_f64() == n.as_f64()),
        other => actual == Some(other),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_ids_are_renamed_everywhere_and_nothing_else() {
        let sc = parse(
            "runner/999_x",
            &json!({"description": "d", "strictness": "required", "steps": [
                {"input": {"assign": {"task_id": "K-1", "goal": "K-1 stays"}},
                 "expect": {"received": [{"task_id": "K-1"}], "hello": {"resume": {"K-1": 1}}}},
                {"input": {"assign_many": {"count": 2, "prefix": "B"}},
                 "expect": {"not_received": [{"task_id": "B-2", "type": "task.report"}]}}
            ]}),
        )
        .unwrap();
        let r = renamed(&sc, "p.");
        assert_eq!(r.steps[0].input["assign"]["task_id"], "p.K-1");
        assert_eq!(r.steps[0].input["assign"]["goal"], "K-1 stays");
        assert_eq!(r.steps[0].expect["received"][0]["task_id"], "p.K-1");
        assert_eq!(r.steps[0].expect["hello"]["resume"]["p.K-1"], 1);
        assert_eq!(r.steps[1].input["assign_many"]["prefix"], "p.B");
        assert_eq!(r.steps[1].expect["not_received"][0]["task_id"], "p.B-2");
        assert_eq!(r.steps[1].expect["not_received"][0]["type"], "task.report");
    }

    #[test]
    fn globs() {
        assert!(glob_match("runner/*", "runner/010_hello"));
        assert!(glob_match("*hello*", "runner/010_hello"));
        assert!(glob_match("0?0_hello", "010_hello"));
        assert!(!glob_match("hub/*", "runner/010_hello"));
        assert!(!glob_match("*x", "runner/010_hello"));
    }

    #[test]
    fn matching() {
        let a = json!({"type": "pong", "nonce": 7, "ack": [{"task_id": "T", "seq": 3}]});
        assert!(matches(&json!({"type": "pong"}), Some(&a)));
        assert!(matches(&json!({"nonce": 7.0}), Some(&a)));
        assert!(matches(&json!({"ack": [{"seq": 3}]}), Some(&a)));
        assert!(!matches(&json!({"ack": [{"seq": 4}]}), Some(&a)));
        assert!(matches(&json!({"resume": {}}), Some(&a)));
        assert!(!matches(&json!({"resume": {"T": 1}}), Some(&a)));
        assert!(!matches(
            &json!({"ack": [{"seq": 3}, {"seq": 3}]}),
            Some(&a)
        ));
    }
}

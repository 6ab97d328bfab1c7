//! Reports: `report.json` and `index.html` per run, and an index comparing runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::steps::CaseResult;

/// HTML-escape `s`.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#111}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
.pass{background:#d7f5d7}.fail{background:#f8c9c9}.non-strict{background:#fbe7b5}.not-applicable{background:#e4e4e4}
pre{margin:0;white-space:pre-wrap;word-break:break-all;font-size:.85em}details{margin:.5em 0}
.k-in,.k-in_binary{color:#064}.k-out,.k-out_binary{color:#036}.k-peer_error,.k-close{color:#a00;font-weight:bold}";

fn mark(outcome: &str) -> &'static str {
    match outcome {
        "pass" => "✓ pass",
        "fail" => "✗ fail",
        "non-strict" => "! non-strict",
        "not-applicable" => "– not applicable",
        _ => "?",
    }
}

/// Counts of outcomes per strictness.
pub fn summary(results: &[CaseResult]) -> Value {
    let mut m: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for r in results {
        *m.entry(r.strictness.as_str().to_string())
            .or_default()
            .entry(r.outcome.to_string())
            .or_default() += 1;
    }
    json!(m)
}

/// Write `dir/report.json` and `dir/index.html`.
///
/// # Errors
/// The files could not be written.
pub fn write(
    dir: &Path,
    implementation: &str,
    mode: &str,
    target: &str,
    results: &[CaseResult],
    duration_ms: u64,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let report = json!({
        "format": "stapel-conformance-report/1",
        "kit_version": env!("CARGO_PKG_VERSION"),
        "implementation": implementation,
        "mode": mode,
        "target": target,
        "duration_ms": duration_ms,
        "summary": summary(results),
        "cases": results.iter().map(CaseResult::to_json).collect::<Vec<_>>(),
    });
    let path = dir.join("report.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&report).unwrap_or_default(),
    )?;
    let mut h = format!(
        "<!doctype html><meta charset=utf-8><title>{0} — stapel-conformance</title><style>{STYLE}</style>\
         <h1>{0}</h1><p>Mode <b>{1}</b> (the kit is the {2}), target <code>{3}</code>, kit {4}, {5} ms.</p>\
         <table><tr><th>case</th><th>strictness</th><th>outcome</th><th>ms</th><th>description / reason</th></tr>",
        esc(implementation),
        esc(mode),
        if mode == "runner" { "hub" } else { "runner" },
        esc(target),
        env!("CARGO_PKG_VERSION"),
        duration_ms
    );
    for r in results {
        h.push_str(&format!(
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td class=\"{2}\">{3}</td><td>{4}</td><td>{5}{6}</td></tr>",
            esc(&r.id),
            r.strictness.as_str(),
            r.outcome,
            mark(r.outcome),
            r.duration_ms,
            esc(&r.description),
            if r.reason.is_empty() { String::new() } else { format!("<br><b>{}</b>", esc(&r.reason)) }
        ));
    }
    h.push_str("</table><h2>Frames per case</h2>");
    for r in results {
        h.push_str(&format!(
            "<details id=\"{0}\"{1}><summary><b>{0}</b> — <span class=\"{2}\">{3}</span> — {4}</summary><p>Source: {5}</p><table><tr><th>ms</th><th>what</th><th>frame / text</th></tr>",
            esc(&r.id),
            if r.outcome == "pass" { "" } else { " open" },
            r.outcome,
            mark(r.outcome),
            esc(&r.description),
            esc(&r.source),
        ));
        for e in &r.transcript {
            let kind = e["kind"].as_str().unwrap_or("");
            h.push_str(&format!(
                "<tr class=\"k-{0}\"><td>{1}</td><td>{2}</td><td><pre>{3}</pre></td></tr>",
                esc(kind),
                e["t_ms"],
                esc(&label(kind)),
                esc(e["text"].as_str().unwrap_or(""))
            ));
        }
        h.push_str("</table></details>");
    }
    std::fs::write(dir.join("index.html"), h)?;
    Ok(path)
}

fn label(kind: &str) -> String {
    match kind {
        "in" => "← peer".into(),
        "in_binary" => "← peer (binary, hex)".into(),
        "out" => "→ kit".into(),
        "out_binary" => "→ kit (binary, hex)".into(),
        "peer_error" => "violation".into(),
        "close" => "kit closes".into(),
        other => other.into(),
    }
}

/// Write `out/index.html` comparing the `report.json` of each directory in `reports`.
///
/// # Errors
/// A report could not be read or the page written.
pub fn index(out: &Path, reports: &[PathBuf]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for dir in reports {
        let p = dir.join("report.json");
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        let rel = relative(out, dir);
        runs.push((rel, v));
    }
    // Cases in first-seen order, with their strictness.
    let mut cases: Vec<(String, String, String)> = Vec::new();
    for (_, v) in &runs {
        for c in v["cases"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or("").to_string();
            if !cases.iter().any(|(i, _, _)| i == &id) {
                cases.push((
                    id,
                    c["strictness"].as_str().unwrap_or("").into(),
                    c["description"].as_str().unwrap_or("").into(),
                ));
            }
        }
    }
    cases.sort();
    let mut h = format!(
        "<!doctype html><meta charset=utf-8><title>stapel-conformance: implementations compared</title><style>{STYLE}</style>\
         <h1>Implementations compared</h1><table><tr><th>case</th><th>strictness</th>"
    );
    for (rel, v) in &runs {
        h.push_str(&format!(
            "<th><a href=\"{}/index.html\">{}</a><br><small>{} mode</small></th>",
            esc(rel),
            esc(v["implementation"].as_str().unwrap_or("?")),
            esc(v["mode"].as_str().unwrap_or("?"))
        ));
    }
    h.push_str("</tr>");
    for (id, strictness, description) in &cases {
        h.push_str(&format!(
            "<tr><td title=\"{}\">{}</td><td>{}</td>",
            esc(description),
            esc(id),
            esc(strictness)
        ));
        for (rel, v) in &runs {
            let c = v["cases"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["id"] == id.as_str()));
            match c {
                Some(c) => {
                    let o = c["outcome"].as_str().unwrap_or("");
                    h.push_str(&format!(
                        "<td class=\"{o}\" title=\"{}\"><a href=\"{}/index.html#{}\">{}</a></td>",
                        esc(c["reason"].as_str().unwrap_or("")),
                        esc(rel),
                        esc(id),
                        mark(o)
                    ));
                }
                None => h.push_str("<td></td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    let path = out.join("index.html");
    std::fs::write(&path, h).map_err(|e| e.to_string())?;
    Ok(path)
}

fn relative(from: &Path, to: &Path) -> String {
    let a = std::fs::canonicalize(from).unwrap_or_else(|_| from.to_path_buf());
    let b = std::fs::canonicalize(to).unwrap_or_else(|_| to.to_path_buf());
    let ac: Vec<_> = a.components().collect();
    let bc: Vec<_> = b.components().collect();
    let common = ac.iter().zip(&bc).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); ac.len() - common];
    parts.extend(
        bc[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

//! Runs every conformance vector in `conformance/vectors/` through the core's public API
//! and prints `conformance[rust]: N vectors passed`. A vector that cannot be run (unknown
//! area, malformed step, a step whose `expect` is missing or empty) counts as a failure,
//! never as a skip.
//!
//! Usage: `cargo test -p stapel-runner-protocol --test conformance` (optionally followed by
//! `-- FILTER` to run only vectors whose path contains FILTER).

mod adapter;
mod admission;
mod common;
mod contract;
mod errors;
mod framing;
mod host;
mod link;
mod local;
mod reducer;
mod runner_task;
mod sequencing;
mod session;
mod store;
mod wire;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn run_vector(area: &str, vector: &Value) -> Result<(), String> {
    match area {
        "wire" => wire::run(vector),
        "framing" => framing::run(vector),
        "sequencing" => sequencing::run(vector),
        "session" | "store" => session::run(vector),
        "lease" => store::run_lease(vector),
        "contract" => contract::run(vector),
        "errors" => errors::run(vector),
        "adapter" => adapter::run(vector),
        "admission" => admission::run(vector),
        "local" => local::run(vector),
        "reducer" => reducer::run(vector),
        "host" => host::run(vector),
        "link" => link::run(vector),
        "runner_task" => runner_task::run(vector),
        other => Err(format!("no runner for area {other:?}")),
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("json") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/vectors");
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut files = Vec::new();
    collect(&root, &mut files);
    let mut passed = 0usize;
    let mut failures = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        if let Some(f) = &filter {
            if !rel.contains(f.as_str()) {
                continue;
            }
        }
        let result = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<Value>(&text).map_err(|e| format!("vector is not JSON: {e}"))
            })
            .and_then(|v| {
                let area = v["area"]
                    .as_str()
                    .ok_or("vector has no \"area\"")?
                    .to_owned();
                let folder = rel.split('/').next().unwrap_or_default();
                if folder != area {
                    return Err(format!("area {area:?} does not match folder {folder:?}"));
                }
                if v["steps"].as_array().is_none_or(Vec::is_empty) {
                    return Err("vector has no steps".into());
                }
                // Every step checks something (conformance/README.md, "Vector format").
                if let Some(i) = v["steps"].as_array().into_iter().flatten().position(|s| {
                    s.get("expect")
                        .and_then(Value::as_object)
                        .is_none_or(serde_json::Map::is_empty)
                }) {
                    return Err(format!("step {i}: `expect` is missing or empty"));
                }
                // Every expectation is one the area's runner checks: an unknown key
                // (a new one, or a typo) fails instead of passing unchecked.
                common::check_expect_keys(&area, &v)?;
                run_vector(&area, &v)
            });
        match result {
            Ok(()) => passed += 1,
            Err(e) => failures.push(format!("{rel}: {e}")),
        }
    }
    for f in &failures {
        eprintln!("FAILED {f}");
    }
    println!("conformance[rust]: {passed} vectors passed");
    if !failures.is_empty() {
        println!("conformance[rust]: {} vectors FAILED", failures.len());
        std::process::exit(1);
    }
    if passed == 0 {
        println!("conformance[rust]: no vectors ran");
        std::process::exit(1);
    }
}

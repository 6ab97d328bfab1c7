//! The kit against the Rust runner (`stapel-runner connect`): every required case passes,
//! and the kit fails a runner that breaks the protocol (one that exits without ever
//! connecting: failed at once, not after the step's `within_ms`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The runner binary of this workspace (built by `cargo build -p stapel-runner`, which
/// this test runs first so that it tests the current source).
fn runner_bin() -> PathBuf {
    let mut build = Command::new(env!("CARGO"));
    build
        .args([
            "build",
            "-q",
            "-p",
            "stapel-runner",
            "--bin",
            "stapel-runner",
        ])
        .current_dir(root());
    // The variables cargo sets for this test are not the build's: a build script that
    // tracks one (ring's tracks CARGO_MANIFEST_DIR) would rebuild the runner's
    // dependencies here, and again in the next plain `cargo build`.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k == "CARGO_MANIFEST_DIR"
            || k == "CARGO_MANIFEST_PATH"
            || k == "CARGO_CRATE_NAME"
            || k == "CARGO_PRIMARY_PACKAGE"
            || k == "CARGO_TARGET_TMPDIR"
            || k == "OUT_DIR"
            || k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_")
        {
            build.env_remove(k.as_ref());
        }
    }
    let status = build.status().expect("cargo build");
    assert!(status.success(), "building stapel-runner failed");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_stapel-conformance"));
    exe.parent().expect("target dir").join("stapel-runner")
}

fn report_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "stapel-conformance-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn the_rust_runner_passes_every_required_case() {
    let runner = runner_bin();
    let report = report_dir("rust");
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .arg("runner")
        .arg("--report")
        .arg(&report)
        .arg("--name")
        .arg("stapel-runner")
        // Three cases at once, each on its own listener, token and state directory.
        .args(["--jobs", "3"])
        .arg("--")
        .arg(root().join("conformance/scenarios/targets/rust-runner.sh"))
        .arg(&runner)
        .output()
        .expect("run the kit");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    let cases = v["cases"].as_array().unwrap();
    let scenarios = std::fs::read_dir(root().join("conformance/scenarios/runner"))
        .unwrap()
        .count();
    assert_eq!(cases.len(), scenarios, "every scenario ran");
    for c in cases {
        if c["strictness"] == "required" {
            assert_eq!(c["outcome"], "pass", "{c}");
        }
        assert!(!c["transcript"].as_array().unwrap().is_empty(), "{c}");
    }
    assert!(report.join("index.html").exists());
    println!("{stdout}");
}

#[test]
fn a_runner_that_never_connects_fails_the_required_cases() {
    let report = report_dir("silent");
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .arg("runner")
        .arg("--report")
        .arg(&report)
        .args([
            "--case",
            "runner/01*",
            "--",
            "sh",
            "-c",
            "sleep 0.3; exit 3",
        ])
        .output()
        .expect("run the kit");
    // The hello step waits up to 15 s for a live runner; one that exited fails at once.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    let hello = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "runner/010_hello_fields")
        .unwrap();
    assert_eq!(hello["outcome"], "fail");
    let reason = hello["reason"].as_str().unwrap();
    assert!(
        reason.contains("expected a valid hello") && reason.contains("exited on its own"),
        "{reason}"
    );
    // The index page compares the two kinds of report side by side.
    let idx = report_dir("index");
    let st = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .arg("index")
        .arg("--out")
        .arg(&idx)
        .arg(&report)
        .status()
        .unwrap();
    assert!(st.success());
    let html = std::fs::read_to_string(idx.join("index.html")).unwrap();
    assert!(html.contains("runner/010_hello_fields") && html.contains("✗ fail"));
}

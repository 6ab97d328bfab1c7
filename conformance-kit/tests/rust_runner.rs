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

/// `runner --url … --token-file …`: the kit is the hub of a runner it did not start.
/// The Rust runner, started here once, plays every case in turn: each required case
/// passes except the restart case, which is not applicable; each case's tasks have ids
/// of their own.
#[test]
fn a_runner_started_outside_the_kit_plays_every_case() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let runner = runner_bin();
    let dir = report_dir("external");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("t-{:x}\n", std::process::id())).unwrap();
    let report = dir.join("report");
    let mut kit = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .arg("runner")
        .args(["--url", "ws://127.0.0.1:0/", "--token-file"])
        .arg(&token_file)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the kit");
    let mut err = BufReader::new(kit.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the kit said no URL");
        if let Some(u) = line.split_whitespace().find(|w| w.starts_with("ws://")) {
            break u.to_string();
        }
    };
    assert!(!url.ends_with(":0/"), "{url}");
    let mut target = Command::new(root().join("conformance/scenarios/targets/rust-runner.sh"))
        .arg(&runner)
        .env("STAPEL_HUB_URL", &url)
        .env("STAPEL_TOKEN_FILE", &token_file)
        .env("STAPEL_STATE_DIR", dir.join("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the runner");
    let out = kit.wait_with_output().expect("the kit ends");
    let _ = target.kill();
    let _ = target.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    for c in v["cases"].as_array().unwrap() {
        if c["id"] == "runner/130_restart_from_state" {
            assert_eq!(c["outcome"], "not-applicable", "{c}");
        } else if c["strictness"] == "required" {
            assert_eq!(c["outcome"], "pass", "{c}");
        }
        if c["id"] == "runner/030_resume_after_cut" {
            let t = c["transcript"].to_string();
            assert!(t.contains(".030.K-1"), "{t}");
        }
    }
    println!("{stdout}");
}

#[test]
fn runner_mode_refuses_a_url_it_cannot_listen_on() {
    let dir = report_dir("bad-url");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), "t").unwrap();
    for url in ["http://127.0.0.1:0/", "ws:///"] {
        let out = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
            .args(["runner", "--url", url, "--token-file"])
            .arg(dir.join("token"))
            .arg("--report")
            .arg(dir.join("r"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--url"));
    }
    // --url needs --token-file, and excludes a command.
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .args(["runner", "--url", "ws://127.0.0.1:0/", "--report"])
        .arg(dir.join("r"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-conformance"))
        .args(["runner", "--url", "ws://127.0.0.1:0/", "--token-file"])
        .arg(dir.join("token"))
        .arg("--report")
        .arg(dir.join("r"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

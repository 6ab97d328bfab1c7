//! Read hub-protocol frames as JSONL on stdin, validate each one, and print either the
//! re-encoded (canonical) frame or its errors.
//!
//! ```text
//! cargo run -q -p stapel-runner-protocol --example validate_frames < core/examples/frames.jsonl
//! ```
//!
//! Valid frames are printed to stdout exactly as `encode` emits them. An invalid line is
//! reported on stdout as `line N: <code>: <message>`, followed by one indented line per
//! schema violation (`location  rule  message`). The exit status is 0 when every frame was
//! valid, 1 otherwise. Lines are bounded by the framer (64 KiB).

use stapel_runner_protocol::framing::{FramerConfig, LineFramer};
use stapel_runner_protocol::wire::{decode, encode};
use std::io::{Read, Write};

fn main() {
    let mut framer = LineFramer::new(FramerConfig::default());
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    let mut line_no = 0u64;
    let mut failures = 0u64;
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => {
                framer.finish();
                0
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("stdin: {e}");
                std::process::exit(2);
            }
        };
        if n > 0 && framer.push(&buf[..n]).is_err() {
            break;
        }
        while let Some(item) = framer.poll_line() {
            line_no += 1;
            let out = match item {
                Ok(line) => match decode(line.as_bytes(), true) {
                    Ok(msg) => writeln!(stdout, "{}", encode(&msg)),
                    Err(e) => {
                        failures += 1;
                        let mut text = if e.violations().is_empty() {
                            format!("line {line_no}: {}: {e}", e.code())
                        } else {
                            format!(
                                "line {line_no}: {} ({} violations)",
                                e.code(),
                                e.violations().len()
                            )
                        };
                        for v in e.violations() {
                            let loc = if v.location.is_empty() {
                                "<root>"
                            } else {
                                &v.location
                            };
                            text.push_str(&format!(
                                "\n    {loc}  {}  {}",
                                v.rule.code(),
                                v.message
                            ));
                        }
                        writeln!(stdout, "{text}")
                    }
                },
                Err(e) => {
                    failures += 1;
                    writeln!(stdout, "line {line_no}: {}: {e}", e.code())
                }
            };
            if out.is_err() {
                std::process::exit(2); // stdout closed
            }
        }
        if framer.is_finished() {
            break;
        }
    }
    let _ = stdout.flush();
    std::process::exit(if failures == 0 { 0 } else { 1 });
}

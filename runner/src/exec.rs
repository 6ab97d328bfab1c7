//! `stapel-runner harness-exec`: the wrapper a connected runner starts every harness
//! through, so that the harness dies with the runner.
//!
//! It asks the kernel to SIGKILL it when its parent (the runner's main thread) dies
//! (`PR_SET_PDEATHSIG`), checks that the parent did not die before that took effect, and
//! then `exec`s the harness in place: same pid, same process group (the runner made it a
//! group leader), same pipes, same cleared environment. The death signal survives
//! `exec`, so the harness *leader* is killed by the kernel the moment a SIGKILLed runner
//! is gone. Its own children are not (see the runner README, "What remains").

use std::ffi::CString;

use nix::sys::signal::Signal;
use nix::unistd::{execvp, getppid, Pid};

/// Become `command` with a parent-death signal of SIGKILL; `parent` is the pid the
/// runner passed (the wrapper exits 125 when its parent is already another process).
/// Returns only on failure, with the exit code to use.
pub fn exec_with_pdeathsig(parent: i32, command: &[String]) -> i32 {
    let Some(program) = command.first() else {
        eprintln!("harness-exec: no command after --");
        return 125;
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        eprintln!("harness-exec: PR_SET_PDEATHSIG failed: {e}");
        return 125;
    }
    if getppid() != Pid::from_raw(parent) {
        // The runner died between fork and prctl: nobody would ever stop us.
        return 125;
    }
    let args: Result<Vec<CString>, _> =
        command.iter().map(|a| CString::new(a.as_bytes())).collect();
    let (Ok(args), Ok(file)) = (args, CString::new(program.as_bytes())) else {
        eprintln!("harness-exec: an argument contains a NUL byte");
        return 125;
    };
    match execvp(&file, &args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("harness-exec: {program}: {e}");
            127
        }
    }
}

/// The wrapper prefix for a harness of this runner: `[this executable, "harness-exec",
/// "--parent", <this pid>]` (the harness command follows after `--`).
pub fn wrapper() -> std::io::Result<Vec<String>> {
    let me = std::env::current_exe()?;
    Ok(vec![
        me.display().to_string(),
        "harness-exec".into(),
        "--parent".into(),
        std::process::id().to_string(),
    ])
}

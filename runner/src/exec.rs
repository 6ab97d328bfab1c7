//! `stapel-runner harness-exec`: the wrapper every harness of `stapel-runner` (`run`,
//! `serve` and `connect`) is started through, so that the harness — and everything it
//! starts — dies with its run or task and with the runner, also a runner killed with
//! SIGKILL.
//!
//! The wrapper (pid *W*, the leader of the task's process group, the runner's child):
//!
//! 1. tries to enter a new user and PID namespace (`unshare(CLONE_NEWUSER |
//!    CLONE_NEWPID)`, mapping its own uid and gid); the next process it starts is the
//!    *init* of that PID namespace;
//! 2. asks the kernel to SIGKILL it when the runner dies (`PR_SET_PDEATHSIG`) and checks
//!    that the runner did not die before that took effect;
//! 3. blocks SIGTERM, SIGINT and SIGHUP (the runner signals the whole group: the harness
//!    gets them, the wrapper waits for it);
//! 4. **with the namespace**: starts `harness-init` (pid 1 inside), which starts the
//!    harness (same process group, pipes, working directory and cleared environment),
//!    reaps every orphan, and exits when the harness exits — the kernel then kills every
//!    process left in the namespace, also those that left the group with `setsid` (a
//!    double fork cannot leave a PID namespace). `harness-init` dies with the wrapper
//!    (its own death signal), so a SIGKILLed runner takes the whole namespace along;
//! 5. **without it** (the kernel or a sandbox refuses unprivileged user namespaces):
//!    makes itself a child subreaper, starts the harness through `harness-exec --leaf`
//!    (which sets its own death signal and `exec`s the harness), and when the harness
//!    exits kills and reaps every process it adopted — the task's escapees, scoped to the
//!    task. A SIGKILLed runner then still kills the wrapper and the harness (their death
//!    signals), but an escapee that called `setsid` survives it (see the runner README,
//!    "What remains");
//! 6. exits as the harness did: its exit code, or the same signal.
//!
//! `harness-exec --probe` says whether the namespace is available here.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Command;

use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{raise, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{wait, waitpid, WaitStatus};
use nix::unistd::{execvp, getppid, Pid};

/// The exit code of a wrapper that could not start the harness.
pub const EXEC_FAILED: i32 = 125;

/// How the harness's end is passed from `harness-init` to the wrapper.
fn encode_status(s: WaitStatus) -> String {
    match s {
        WaitStatus::Signaled(_, sig, _) => format!("signal {}\n", sig as i32),
        WaitStatus::Exited(_, code) => format!("exit {code}\n"),
        _ => "exit 125\n".into(),
    }
}

/// The wrapper's options (`harness-exec`).
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// The runner's pid.
    pub parent: i32,
    /// Do not try the PID namespace.
    pub no_pid_namespace: bool,
    /// Be the leaf (`--leaf`): set the death signal and `exec` the command in place.
    pub leaf: bool,
    /// The harness command.
    pub command: Vec<String>,
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("harness-exec: {msg}");
}

/// Enter a new user + PID namespace, mapping the current uid and gid onto themselves.
///
/// # Errors
/// The `unshare` errno (e.g. `EPERM`, `EINVAL`, `ENOSPC`).
pub fn enter_pid_namespace() -> Result<(), nix::errno::Errno> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID)?;
    // Best effort: an unmapped identity still works (it reads as the overflow id inside).
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
    Ok(())
}

/// `harness-exec --probe`: `pid-namespace: yes` or `pid-namespace: no (ERRNO)` on stdout;
/// exit 0 either way.
pub fn probe() -> i32 {
    match enter_pid_namespace() {
        Ok(()) => println!("pid-namespace: yes"),
        Err(e) => println!("pid-namespace: no ({e})"),
    }
    0
}

/// The parent pid of this process as the host's `/proc` shows it (a PID namespace's
/// init sees `getppid() == 0`).
fn host_ppid() -> Option<i32> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn set_death_signal(parent: i32) -> Result<(), i32> {
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        log(format!("PR_SET_PDEATHSIG failed: {e}"));
        return Err(EXEC_FAILED);
    }
    // The parent died between our fork and the prctl: nobody would ever stop us.
    let alive = getppid() == Pid::from_raw(parent) || host_ppid() == Some(parent);
    if !alive {
        return Err(EXEC_FAILED);
    }
    Ok(())
}

/// The wrapper (see the module docs). Returns only on failure or, in the end, with the
/// exit code to use (after re-raising a signal that killed the harness).
pub fn run(opts: &ExecOptions) -> i32 {
    if opts.command.is_empty() {
        log("no command after --");
        return EXEC_FAILED;
    }
    if opts.leaf {
        return exec_with_pdeathsig(opts.parent, &opts.command);
    }
    let namespace = if opts.no_pid_namespace {
        false
    } else {
        enter_pid_namespace().is_ok()
    };
    if let Err(code) = set_death_signal(opts.parent) {
        return code;
    }
    let mut stop = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        stop.add(s);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&stop), None);
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            log(format!("cannot locate this executable: {e}"));
            return EXEC_FAILED;
        }
    };
    let status = if namespace {
        through_init(&me, &opts.command)
    } else {
        through_leaf(&me, &opts.command)
    };
    match status {
        Some(Ended::Exit(code)) => code,
        Some(Ended::Signal(sig)) => {
            // Die of the same signal: raise it, then let it through.
            let _ = raise(sig);
            let mut one = SigSet::empty();
            one.add(sig);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None);
            128 + sig as i32
        }
        None => EXEC_FAILED,
    }
}

enum Ended {
    Exit(i32),
    Signal(Signal),
}

fn ended(s: WaitStatus) -> Option<Ended> {
    match s {
        WaitStatus::Exited(_, code) => Some(Ended::Exit(code)),
        WaitStatus::Signaled(_, sig, _) => Some(Ended::Signal(sig)),
        _ => None,
    }
}

/// Namespace mode: `harness-init` is pid 1 of the new namespace; it reports the harness's
/// end on a pipe.
fn through_init(me: &std::path::Path, command: &[String]) -> Option<Ended> {
    let (r, w) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => {
            log(format!("pipe: {e}"));
            return None;
        }
    };
    // A close-on-exec copy of the read end; the raw one must not reach the child.
    let mut status_in = std::fs::File::open(format!("/proc/self/fd/{}", r.as_raw_fd())).ok()?;
    drop(r);
    let child = Command::new(me)
        .arg("harness-init")
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--status-fd")
        .arg(w.as_raw_fd().to_string())
        .arg("--")
        .args(command)
        .spawn();
    drop(w);
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            log(format!("cannot start harness-init: {e}"));
            return None;
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    let init_status = loop {
        match waitpid(pid, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.ok(),
        }
    };
    let mut text = String::new();
    let _ = status_in.read_to_string(&mut text);
    let mut words = text.split_whitespace();
    match (
        words.next(),
        words.next().and_then(|n| n.parse::<i32>().ok()),
    ) {
        (Some("exit"), Some(code)) => Some(Ended::Exit(code)),
        (Some("signal"), Some(n)) => Signal::try_from(n).ok().map(Ended::Signal),
        // harness-init itself was killed (it dies with the wrapper, or by a KILL to
        // the group before the harness ended): report how it ended.
        _ => init_status.and_then(ended),
    }
}

/// Fallback mode: a child subreaper; the harness starts through `--leaf`.
fn through_leaf(me: &std::path::Path, command: &[String]) -> Option<Ended> {
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let child = Command::new(me)
        .arg("harness-exec")
        .arg("--leaf")
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--")
        .args(command)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            log(format!("cannot start the harness: {e}"));
            return None;
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    let status = loop {
        match waitpid(pid, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.ok(),
        }
    };
    // The task's escapees were re-parented to this subreaper: they end with the task.
    crate::supervisor::kill_adopted(&[], 16);
    status.and_then(ended)
}

/// `harness-init` (pid 1 of the task's PID namespace): start the harness, reap every
/// orphan until the harness ended, write its end to the status descriptor, exit (the
/// kernel then kills whatever is left in the namespace).
pub fn init(parent: i32, status_fd: i32, command: &[String]) -> i32 {
    // A close-on-exec handle of the status pipe; the inherited descriptor is closed so
    // the harness never holds it.
    let mut status_out = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{status_fd}"))
        .ok();
    let _ = nix::unistd::close(status_fd);
    if let Err(code) = set_death_signal(parent) {
        return code;
    }
    let Some((program, args)) = command.split_first() else {
        return EXEC_FAILED;
    };
    let child = match Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            log(format!("{program}: {e}"));
            if let Some(f) = status_out.as_mut() {
                let _ = f.write_all(b"exit 127\n");
            }
            return 127;
        }
    };
    let harness = Pid::from_raw(child.id() as i32);
    let status = loop {
        match wait() {
            Ok(s) if s.pid() == Some(harness) && ended(s).is_some() => break Some(s),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break None,
        }
    };
    if let (Some(f), Some(s)) = (status_out.as_mut(), status) {
        let _ = f.write_all(encode_status(s).as_bytes());
    }
    0
}

/// `--leaf`: become `command` with a parent-death signal of SIGKILL; `parent` is the pid
/// of the process that started us (exit 125 when it is already gone). Returns only on
/// failure, with the exit code to use.
pub fn exec_with_pdeathsig(parent: i32, command: &[String]) -> i32 {
    let Some(program) = command.first() else {
        log("no command after --");
        return EXEC_FAILED;
    };
    if let Err(code) = set_death_signal(parent) {
        return code;
    }
    let args: Result<Vec<CString>, _> =
        command.iter().map(|a| CString::new(a.as_bytes())).collect();
    let (Ok(args), Ok(file)) = (args, CString::new(program.as_bytes())) else {
        log("an argument contains a NUL byte");
        return EXEC_FAILED;
    };
    match execvp(&file, &args) {
        Ok(never) => match never {},
        Err(e) => {
            log(format!("{program}: {e}"));
            127
        }
    }
}

/// The wrapper prefix for a harness of this runner: `[this executable, "harness-exec",
/// "--parent", <this pid>]`, plus `--no-pid-namespace` when asked (the harness command
/// follows after `--`).
pub fn wrapper(no_pid_namespace: bool) -> std::io::Result<Vec<String>> {
    let me = std::env::current_exe()?;
    let mut w = vec![
        me.display().to_string(),
        "harness-exec".into(),
        "--parent".into(),
        std::process::id().to_string(),
    ];
    if no_pid_namespace {
        w.push("--no-pid-namespace".into());
    }
    Ok(w)
}

/// Whether a harness of this runner gets its own PID namespace (runs `harness-exec
/// --probe`): `Ok(())` or the reason why not.
pub fn probe_pid_namespace() -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(me)
        .args(["harness-exec", "--probe", "--parent", "0", "--", "true"])
        .env_clear()
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim() {
        "pid-namespace: yes" => Ok(()),
        other => Err(other
            .strip_prefix("pid-namespace: no ")
            .unwrap_or(other)
            .trim_matches(|c| c == '(' || c == ')')
            .to_string()),
    }
}

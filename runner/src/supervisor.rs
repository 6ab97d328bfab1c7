//! Harness process supervision: spawn with a cleared environment in a new process group,
//! signal the whole group, and find processes that escaped the group.
//!
//! The runner makes itself a *child subreaper* (Linux `PR_SET_CHILD_SUBREAPER`): when the
//! harness or one of its workers dies, their orphaned descendants are re-parented to the
//! runner instead of to init. A grandchild that left the harness's process group with
//! `setsid` is therefore still the runner's to find ([`adopted_children`]) and to kill
//! ([`kill_adopted`]) at teardown.

use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::io;
use std::process::Stdio;

/// What to start: the core's `Spawn` action, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnSpec {
    /// Program path or name (looked up in the allow-listed `PATH`).
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// The complete environment of the child; nothing is inherited.
    pub env: Vec<(String, String)>,
    /// Start the child as the leader of a new process group.
    pub new_process_group: bool,
    /// Working directory (`None`: this process's).
    pub cwd: Option<String>,
}

/// A started harness and its pipes.
#[derive(Debug)]
pub struct Spawned {
    /// The child; dropping it kills the child (not its group — see [`GroupGuard`]).
    pub child: tokio::process::Child,
    /// Process id (and process-group id when [`SpawnSpec::new_process_group`]).
    pub pid: i32,
}

/// Start `spec` with piped stdin/stdout/stderr and an environment that holds exactly
/// `spec.env`.
///
/// # Errors
/// The OS error of the spawn.
pub fn spawn(spec: &SpawnSpec) -> io::Result<Spawned> {
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if spec.new_process_group {
        cmd.process_group(0);
    }
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    let child = cmd.spawn()?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| io::Error::other("spawned child has no pid"))?;
    Ok(Spawned { child, pid })
}

/// Send `signal` to every process of process group `pgid`. A group that no longer exists
/// is not an error.
///
/// # Errors
/// Any other OS error.
pub fn signal_group(pgid: i32, signal: Signal) -> io::Result<()> {
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Make this process a child subreaper (Linux). Orphaned descendants are re-parented to it.
///
/// # Errors
/// The OS error of `prctl`.
pub fn become_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// The direct children of this process other than `except`, read from `/proc`. After
/// [`become_subreaper`], these include orphaned descendants of the harness.
pub fn adopted_children(except: &[i32]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !except.contains(pid))
        .filter(|pid| parent_of(*pid) == Some(me))
        .collect()
}

/// Parent pid of `pid` from `/proc/<pid>/stat` (the field after the parenthesised name).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// Kill (SIGKILL) every adopted child other than `except`, together with the process group
/// each leads, and reap them. Repeats until none is left or `max_rounds` is reached, since
/// killing one can orphan more. Returns the pids killed.
pub fn kill_adopted(except: &[i32], max_rounds: usize) -> Vec<i32> {
    let mut killed = Vec::new();
    for _ in 0..max_rounds {
        let children = adopted_children(except);
        if children.is_empty() {
            break;
        }
        for pid in children {
            let p = Pid::from_raw(pid);
            // A setsid'd escapee leads its own group: take its whole group down with it.
            let _ = killpg(p, Signal::SIGKILL);
            let _ = kill(p, Signal::SIGKILL);
            let _ = waitpid(p, None);
            killed.push(pid);
        }
    }
    killed
}

/// Reap adopted children that have already exited (never blocks). Returns their pids.
pub fn reap_adopted(except: &[i32]) -> Vec<i32> {
    adopted_children(except)
        .into_iter()
        .filter(|pid| {
            matches!(
                waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG)),
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..))
            )
        })
        .collect()
}

/// `true` while a process with this pid exists (zombies included).
pub fn alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
}

/// Kills a process group when dropped, unless disarmed: the last guard against a harness
/// outliving the runner on an early return or a panic.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    /// Guard process group `pgid`.
    pub fn new(pgid: i32) -> Self {
        Self { pgid: Some(pgid) }
    }

    /// The group ended normally: do nothing on drop.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = signal_group(pgid, Signal::SIGKILL);
        }
    }
}

/// Exit code and signal of a finished process, as the core's `HarnessExited` input wants.
pub fn exit_facts(status: std::process::ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    (status.code(), status.signal())
}

//! The connected runner's state directory: one file, replaced atomically.
//!
//! `runner-state.json` holds `{"version": 1, "snapshot": <the RunnerSession's sequencing
//! snapshot, as text>, "tasks": {task_id: {"attempt": n}}}` — the tasks that were started
//! and not yet reported. It is written to a temporary file, fsynced, renamed over the old
//! one, and the directory is fsynced: a reader sees the old file or the new one, never a
//! mix, and a frame is transmitted only after the state that produced it is on disk.
//!
//! The directory is locked while a runner uses it (an exclusive `flock` of `lock`): a
//! second runner on the same directory refuses to start instead of corrupting the first
//! one's state.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The file name under the state directory.
pub const STATE_FILE: &str = "runner-state.json";
/// The lock file under the state directory.
pub const LOCK_FILE: &str = "lock";

/// What a restart reads back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Saved {
    /// The sequencing snapshot (`ConnectionState::snapshot`), if any.
    pub snapshot: Option<Vec<u8>>,
    /// Tasks started and not reported: task id → attempt.
    pub tasks: BTreeMap<String, u64>,
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    last: Option<Vec<u8>>,
    _lock: std::sync::Arc<nix::fcntl::Flock<File>>,
}

impl Store {
    /// Open (and create) `dir` and lock it for this process (released when the last
    /// clone of the store is dropped, or by the kernel when the process dies).
    ///
    /// # Errors
    /// The directory cannot be created; `WouldBlock` ("another runner uses the state
    /// directory …") when another process holds the lock.
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| match e {
                nix::errno::Errno::EWOULDBLOCK => io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another runner uses the state directory {} (it holds {LOCK_FILE})",
                        dir.display()
                    ),
                ),
                other => io::Error::from(other),
            })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            last: None,
            _lock: std::sync::Arc::new(lock),
        })
    }

    /// Read the saved state; an absent file is an empty state.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(&self) -> io::Result<Saved> {
        let path = self.dir.join(STATE_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Saved::default()),
            Err(e) => return Err(e),
        };
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        let snapshot = v["snapshot"].as_str().map(|s| s.as_bytes().to_vec());
        let tasks = v["tasks"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, t)| (k.clone(), t["attempt"].as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Saved { snapshot, tasks })
    }

    /// Persist `snapshot` and `tasks` atomically (write, fsync, rename, fsync the
    /// directory). Nothing is written when the content equals the last one saved.
    ///
    /// # Errors
    /// Any I/O error; the previous file is then still intact.
    pub fn save(&mut self, snapshot: &[u8], tasks: &BTreeMap<String, u64>) -> io::Result<()> {
        let tasks: serde_json::Map<String, Value> = tasks
            .iter()
            .map(|(k, a)| (k.clone(), json!({"attempt": a})))
            .collect();
        let body = json!({
            "version": 1,
            "snapshot": String::from_utf8_lossy(snapshot),
            "tasks": tasks,
        });
        let bytes = serde_json::to_vec(&body).map_err(io::Error::other)?;
        if self.last.as_deref() == Some(bytes.as_slice()) {
            return Ok(());
        }
        let tmp = self.dir.join(format!("{STATE_FILE}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.dir.join(STATE_FILE))?;
        File::open(&self.dir)?.sync_all()?;
        self.last = Some(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_then_load_round_trips_and_replaces_atomically() {
        let dir = std::env::temp_dir().join(format!("stapel-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut s = Store::open(&dir).unwrap();
        assert_eq!(s.load().unwrap(), Saved::default());
        let mut tasks = BTreeMap::new();
        tasks.insert("T-1".to_string(), 2);
        s.save(b"stapel-seq-snapshot/1\n{}", &tasks).unwrap();
        let back = s.load().unwrap();
        assert_eq!(
            back.snapshot.as_deref(),
            Some(&b"stapel-seq-snapshot/1\n{}"[..])
        );
        assert_eq!(back.tasks, tasks);
        assert!(!dir.join(format!("{STATE_FILE}.tmp")).exists());
        tasks.clear();
        s.save(b"x", &tasks).unwrap();
        assert!(s.load().unwrap().tasks.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_store_on_the_same_directory_is_refused_until_the_first_is_gone() {
        let dir = std::env::temp_dir().join(format!("stapel-store-lock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let first = Store::open(&dir).unwrap();
        let copy = first.clone();
        let e = Store::open(&dir).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(e
            .to_string()
            .contains("another runner uses the state directory"));
        drop(first);
        // A clone still holds the lock.
        assert!(Store::open(&dir).is_err());
        drop(copy);
        assert!(Store::open(&dir).is_ok());
        let _ = fs::remove_dir_all(&dir);
    }
}

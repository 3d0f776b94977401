//! One `stm local` per endpoint and queue on this machine.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// One `stm local` per endpoint and queue on this machine: a file in the temp dir named
/// after both, holding the pid of the process that serves it, under an OS lock (released
/// by the kernel however that process ends, so a crash never leaves a stale lock). The
/// file is removed at exit.
pub(super) struct QueueLock {
    path: PathBuf,
    _file: File,
}

/// What a lock file holds, a line each: the pid of the `stm local` holding it, its
/// endpoint, then (once it has started) its export line.
struct Held<'a> {
    pid: &'a str,
    endpoint: Option<&'a str>,
    export: Option<&'a str>,
}

impl<'a> Held<'a> {
    fn read(text: &'a str) -> Held<'a> {
        let mut lines = text.lines().map(str::trim);
        Held {
            pid: lines.next().unwrap_or_default(),
            endpoint: lines.next(),
            export: lines.next(),
        }
    }
}

impl QueueLock {
    fn path(endpoint: &str, queue_name: &str) -> PathBuf {
        let endpoint = endpoint
            .trim_end_matches('/')
            .to_ascii_lowercase()
            .replace("://localhost", "://127.0.0.1");
        let key: String = format!("{endpoint}-{queue_name}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        std::env::temp_dir().join(format!("stm-local-{key}.lock"))
    }

    pub(super) fn acquire(endpoint: &str, queue_name: &str) -> Result<QueueLock> {
        use std::os::unix::fs::MetadataExt;
        let path = Self::path(endpoint, queue_name);
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("open the lock file {}", path.display()))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let held = std::fs::read_to_string(&path).unwrap_or_default();
                    let who = match Held::read(&held).pid {
                        "" => "another `stm local`".to_string(),
                        pid => format!("another `stm local` (pid {pid})"),
                    };
                    bail!(
                        "{who} is serving the queue {queue_name} at {endpoint}: stop it first, or \
                         give this one its own --queue (and --prefix)"
                    );
                }
                Err(std::fs::TryLockError::Error(err)) => {
                    return Err(err).with_context(|| format!("lock {}", path.display()))
                }
            }
            // the holder before us may have removed the file between our open and our
            // lock: then we hold a lock on a file nobody else will see; open again
            let same = match (std::fs::metadata(&path), file.metadata()) {
                (Ok(on_disk), Ok(ours)) => on_disk.ino() == ours.ino() && on_disk.dev() == ours.dev(),
                _ => false,
            };
            if !same {
                continue;
            }
            // the pid, then the endpoint (what `running_stack` tells a command)
            file.set_len(0)
                .and_then(|()| write!(file, "{}\n{endpoint}\n", std::process::id()))
                .and_then(|()| file.flush())
                .with_context(|| format!("write {}", path.display()))?;
            return Ok(QueueLock { path, _file: file });
        }
    }

    /// The pid of the `stm local` serving `queue_name` at `endpoint`, if one does.
    pub(super) fn holder(endpoint: &str, queue_name: &str) -> Option<String> {
        let path = Self::path(endpoint, queue_name);
        let file = File::open(&path).ok()?;
        match file.try_lock_shared() {
            Err(std::fs::TryLockError::WouldBlock) => {
                let held = std::fs::read_to_string(&path).ok()?;
                Some(Held::read(&held).pid.to_string()).filter(|p| !p.is_empty())
            }
            _ => None,
        }
    }

    /// Record the stack's export line in the lock file, after its pid and endpoint, for
    /// [`running_stack`](Self::running_stack). Best effort: the lock holds without it.
    pub(super) fn announce(&self, export: &str) {
        let Ok(held) = std::fs::read_to_string(&self.path) else {
            return;
        };
        let held = Held::read(&held);
        let endpoint = held.endpoint.unwrap_or_default();
        let _ = std::fs::write(&self.path, format!("{}\n{endpoint}\n{export}\n", held.pid));
    }

    /// The endpoint and export line of a `stm local` running on this machine, if any: a
    /// lock file still held, naming them.
    pub(super) fn running_stack() -> Option<(String, String)> {
        let entries = std::fs::read_dir(std::env::temp_dir()).ok()?;
        entries.flatten().find_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            if !name.starts_with("stm-local-") || !name.ends_with(".lock") {
                return None;
            }
            let file = File::open(entry.path()).ok()?;
            match file.try_lock_shared() {
                Err(std::fs::TryLockError::WouldBlock) => {
                    let held = std::fs::read_to_string(entry.path()).ok()?;
                    let held = Held::read(&held);
                    let endpoint = held.endpoint.filter(|e| !e.is_empty())?;
                    let export = held.export.filter(|e| e.starts_with("export "))?;
                    Some((endpoint.to_string(), export.to_string()))
                }
                _ => None,
            }
        })
    }
}

impl Drop for QueueLock {
    fn drop(&mut self) {
        // removed while still locked; the lock goes with the file handle right after
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_queue_is_refused_with_the_pid() {
        let endpoint = format!("http://test-{}:1", std::process::id());
        let first = QueueLock::acquire(&endpoint, "q.fifo").expect("first");
        assert_eq!(
            QueueLock::holder(&endpoint, "q.fifo"),
            Some(std::process::id().to_string())
        );
        // an OS file lock is per open file: a second open in this process is refused too
        let err = QueueLock::acquire(&endpoint, "q.fifo").err().expect("refused");
        assert!(
            err.to_string().contains(&format!(
                "(pid {}) is serving the queue q.fifo",
                std::process::id()
            )),
            "{err}"
        );
        drop(first);
        assert_eq!(QueueLock::holder(&endpoint, "q.fifo"), None);
        drop(QueueLock::acquire(&endpoint, "q.fifo").expect("free again"));
    }
}

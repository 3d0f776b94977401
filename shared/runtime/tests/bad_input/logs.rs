//! What a test logged: one process-wide subscriber whose writer keeps the lines of each
//! capturing thread apart.

use std::io::Write;
use std::sync::Mutex;

/// What the log lines of a test say: the lines written from the test's own thread.
///
/// One process-wide subscriber, not a `set_default` per test: tracing caches each
/// callsite's interest across threads, so with two tests' scoped subscribers alive at once
/// one of them could miss an event (seen in CI as an empty capture). The writer tags each
/// line with the thread that logged it; the worker runs on the test's thread (the tests
/// await `handle_batch` directly), so a test reads exactly its own lines.
#[derive(Clone)]
pub(crate) struct Logs {
    thread: std::thread::ThreadId,
}

/// The threads that capture, and what each logged.
type Lines = Mutex<Vec<(std::thread::ThreadId, Vec<u8>)>>;

fn captured() -> &'static Lines {
    static LINES: std::sync::OnceLock<Lines> = std::sync::OnceLock::new();
    LINES.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(ThreadTagged)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("bad_input installs the only global subscriber");
        Mutex::default()
    })
}

impl Logs {
    pub(crate) fn capture() -> Logs {
        let thread = std::thread::current().id();
        captured()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((thread, Vec::new()));
        Logs { thread }
    }

    /// Everything this thread logged since the last call.
    pub(crate) fn take(&self) -> String {
        let mut lines = captured().lock().unwrap_or_else(|e| e.into_inner());
        let mine = lines
            .iter_mut()
            .find(|(thread, _)| *thread == self.thread)
            .map(|(_, text)| std::mem::take(text))
            .unwrap_or_default();
        String::from_utf8_lossy(&mine).into_owned()
    }
}

/// The writer of the global subscriber: a write is kept for its thread if that thread
/// captures (the other tests' lines are dropped).
struct ThreadTagged;

impl Write for ThreadTagged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let here = std::thread::current().id();
        let mut lines = captured().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, text)) = lines.iter_mut().find(|(thread, _)| *thread == here) {
            text.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ThreadTagged {
    type Writer = ThreadTagged;
    fn make_writer(&'a self) -> ThreadTagged {
        ThreadTagged
    }
}

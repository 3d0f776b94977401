//! Purge: permanently delete finished execution trees, optionally archived first (harel
//! 0.9.0's `purge` and `purge_finished`, `engine/control.py`, and its `JsonlArchive`).
//!
//! - Only whole finished trees go: a root whose every member (regions, invokes, fan-out
//!   instances, recursively) is DONE or CANCELLED. A FAILED member is a dead letter
//!   awaiting redrive: terminate it first to abandon it.
//! - A tree's members come from two sources, neither complete alone: the ids that extend the
//!   root's with `:` (a parent drops a child from `children` once done with it, while its
//!   record stays) and each member's `children`.
//! - The archive line (`{root_id, executions, traces}`) is written and fsynced before
//!   anything is deleted; an archive that cannot be written stops the run.
//! - Children are deleted first and the root last, each only if its version is unchanged
//!   since it was read ([`ExecutionStore::purge`]). A member that moved on stops that tree
//!   with a conflict; since the root is still there, a re-run resumes it and sweeps the
//!   rows of the children already deleted. So a purge that dies at any point is finished
//!   by running it again.
//! - [`purge_finished`] pages through the finished roots and purges each page before
//!   asking for the next, so its memory is bounded by one page of trees, whatever the
//!   table holds. The stores' cursors resume after a deleted item, so nothing is skipped.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures_util::stream::{self, StreamExt as _};

use stm_core::{Execution, Status};
use stm_store::{ExecutionStore, ListQuery, StoreError};

/// The statuses a purged tree's members may have: finished for good.
pub const PURGEABLE: [Status; 2] = [Status::Done, Status::Cancelled];

/// Roots examined per listing page (and trees whose members one prefix scan finds).
const PAGE: usize = 250;

/// Trees purged at once within a page: their calls overlap, which is what bounds a purge's
/// speed (about 30 calls per tree of three), while memory stays one page.
const TREES_AT_ONCE: usize = 8;

/// Attempts at one tree when the store reports a transient fault.
const TREE_ATTEMPTS: u32 = 4;

/// Why a purge did not happen or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PurgeError {
    /// The tree cannot be purged as it is; nothing was deleted. The message is harel's.
    #[error("{0}")]
    Refused(String),
    /// A member changed since it was read (a `Reset` revived it, say): the purge stopped
    /// before it. The root is still there, so running the purge again resumes it.
    #[error("purge of {root} stopped: {id} changed since it was read (expected version {expected}); run the purge again")]
    Changed { root: String, id: String, expected: i64 },
    /// The archive could not be written: nothing of this tree was deleted.
    #[error("cannot write the archive {}: {source}", path.display())]
    Archive {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a tree goes before it is deleted.
pub trait Archive {
    /// Keep `bundle` durably, or fail (which stops the purge before any delete). A retried
    /// purge may hand over the same root again: a consumer keys on [`Bundle::root_id`].
    fn keep(&mut self, bundle: &Bundle) -> Result<(), PurgeError>;
}

/// One purged tree: the root first, then its descendants, parents before children, and
/// each member's trace steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub root_id: String,
    pub executions: Vec<Execution>,
    pub traces: Vec<(String, Vec<stm_core::Map>)>,
}

impl Bundle {
    /// The bundle as one JSON line, harel's shape: `{"root_id": ..., "executions": [...],
    /// "traces": {id: [...]}}`, each execution as harel stores it (its `data`), so harel's
    /// `Execution.model_validate` reads it back.
    pub(crate) fn to_json_line(&self) -> String {
        let mut line = String::with_capacity(256);
        line.push_str("{\"root_id\":");
        line.push_str(&stm_core::pyjson::to_pydantic_json(&self.root_id));
        line.push_str(",\"executions\":[");
        for (i, exe) in self.executions.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&exe.to_json());
        }
        line.push_str("],\"traces\":{");
        for (i, (id, steps)) in self.traces.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&stm_core::pyjson::to_pydantic_json(id));
            line.push(':');
            line.push_str(&stm_core::pyjson::to_pydantic_json(steps));
        }
        line.push_str("}}");
        line
    }
}

/// Appends each tree as one JSON line to a file (created if absent), flushed and fsynced
/// before [`Archive::keep`] returns: the line is on disk before anything is deleted.
#[derive(Debug)]
pub struct JsonlArchive {
    path: PathBuf,
    file: File,
}

impl JsonlArchive {
    /// Open `path` for appending (created if absent).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("stm-doc-archive-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// use stm_runtime::purge::JsonlArchive;
    /// let archive = JsonlArchive::open(dir.join("purged.jsonl")).expect("a writable folder");
    /// # drop(archive); std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PurgeError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| PurgeError::Archive {
                path: path.clone(),
                source,
            })?;
        Ok(JsonlArchive { path, file })
    }
}

impl Archive for JsonlArchive {
    fn keep(&mut self, bundle: &Bundle) -> Result<(), PurgeError> {
        let mut line = bundle.to_json_line();
        line.push('\n');
        let fail = |source| PurgeError::Archive {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(line.as_bytes()).map_err(fail)?;
        self.file.flush().map_err(fail)?;
        self.file.sync_all().map_err(fail)
    }
}

/// The members of the tree rooted at `root`: the root first, then parents before children.
/// `by_prefix` are the ids found by the root's prefix (already looked up); the rest come
/// from the members' `children`. Also the ids a member lists that are no longer stored (a
/// purge that died after deleting them left their rows, which are swept again).
async fn collect_tree(
    store: &dyn ExecutionStore,
    root: Execution,
    by_prefix: &[String],
) -> Result<(Vec<Execution>, Vec<String>), StoreError> {
    let mut found: Vec<Execution> = Vec::new();
    for id in by_prefix {
        if let Some(exe) = store.load(id).await? {
            found.push(exe);
        }
    }
    let mut frontier: Vec<usize> = (0..found.len()).collect();
    let mut missing = Vec::new();
    let mut listed: Vec<String> = root.child_ids().collect();
    loop {
        for child_id in listed.drain(..) {
            if child_id == root.id || found.iter().any(|e| e.id == child_id) || missing.contains(&child_id) {
                continue;
            }
            match store.load(&child_id).await? {
                Some(child) => {
                    found.push(child);
                    frontier.push(found.len() - 1);
                }
                None => missing.push(child_id),
            }
        }
        match frontier.pop() {
            Some(i) => listed.extend(found[i].child_ids()),
            None => break,
        }
    }
    // a member is one whose parent chain reaches the root: an unrelated root whose id
    // merely extends this one's is never taken in
    let mut tree = vec![root];
    let mut added = true;
    while added {
        added = false;
        let mut i = 0;
        while i < found.len() {
            let parent_in_tree = found[i]
                .parent_id
                .as_ref()
                .is_some_and(|p| tree.iter().any(|m| &m.id == p));
            if parent_in_tree {
                tree.push(found.swap_remove(i));
                added = true;
            } else {
                i += 1;
            }
        }
    }
    // a listed child that is a stored member is not missing
    missing.retain(|id| !tree.iter().any(|m| &m.id == id));
    Ok((tree, missing))
}

/// Why `tree` (rooted at its first member) cannot be purged, in harel's words.
fn refusal(tree: &[Execution]) -> Option<String> {
    let root = &tree[0];
    if let Some(parent) = &root.parent_id {
        return Some(format!(
            "purge refused: {} is a child of {} — purge its root, which removes the whole tree",
            repr(&root.id),
            repr(parent)
        ));
    }
    let live: Vec<&Execution> = tree.iter().filter(|e| !PURGEABLE.contains(&e.status)).collect();
    if live.is_empty() {
        return None;
    }
    let listed: Vec<String> = live
        .iter()
        .map(|e| format!("{} ({})", e.id, e.status.as_str()))
        .collect();
    let hint = if live.iter().any(|e| e.status == Status::Failed) {
        " — terminate a dead letter to abandon it"
    } else {
        ""
    };
    Some(format!(
        "purge refused: not finished: {}{hint}",
        listed.join(", ")
    ))
}

fn repr(text: &str) -> String {
    stm_core::pyvalue::repr(&stm_core::Value::from(text))
}

/// The archive, shared by the trees a page purges at once; locked only while a bundle is
/// written (no `.await` inside), so one line is never interleaved with another.
type ArchiveSlot<'a> = Mutex<Option<&'a mut (dyn Archive + 'a)>>;

/// Check, archive and delete the tree rooted at `root`, whose prefix matches are
/// `by_prefix`. `dry_run`: check only.
async fn purge_tree(
    store: &dyn ExecutionStore,
    root: Execution,
    by_prefix: &[String],
    archive: &ArchiveSlot<'_>,
    dry_run: bool,
) -> Result<(), PurgeError> {
    let (tree, missing) = collect_tree(store, root, by_prefix).await?;
    if let Some(reason) = refusal(&tree) {
        return Err(PurgeError::Refused(reason));
    }
    if dry_run {
        return Ok(());
    }
    let archiving = archive.lock().unwrap_or_else(|e| e.into_inner()).is_some();
    if archiving {
        let mut traces = Vec::with_capacity(tree.len());
        for exe in &tree {
            traces.push((exe.id.clone(), store.read_trace(&exe.id).await?));
        }
        let bundle = Bundle {
            root_id: tree[0].id.clone(),
            executions: tree.clone(),
            traces,
        };
        if let Some(archive) = archive.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            archive.keep(&bundle)?;
        }
    }
    let root_id = tree[0].id.clone();
    let changed = |exe: &Execution| PurgeError::Changed {
        root: root_id.clone(),
        id: exe.id.clone(),
        expected: exe.version,
    };
    for exe in tree[1..].iter().rev() {
        if !store.purge(&exe.id, exe.version).await? {
            return Err(changed(exe));
        }
    }
    for id in &missing {
        // sweep what an interrupted purge left behind (the version is unused when absent)
        store.purge(id, 0).await?;
    }
    if !store.purge(&tree[0].id, tree[0].version).await? {
        return Err(changed(&tree[0]));
    }
    Ok(())
}

/// Purge the finished tree rooted at `root_id` (see the module docs): `Ok(false)` if there
/// is no such execution (already purged).
pub async fn purge(
    store: &dyn ExecutionStore,
    root_id: &str,
    archive: Option<&mut dyn Archive>,
) -> Result<bool, PurgeError> {
    let Some(root) = store.load(root_id).await? else {
        return Ok(false);
    };
    let by_prefix = store.ids_with_prefix(&format!("{root_id}:")).await?;
    purge_tree(store, root, &by_prefix, &Mutex::new(archive), false).await?;
    Ok(true)
}

/// What [`purge_finished`] is to do.
#[derive(Debug, Clone, PartialEq)]
pub struct PurgeOptions {
    /// Finished at least this many seconds before `now`.
    pub older_than: f64,
    /// Only roots in these statuses (a subset of [`PURGEABLE`]).
    pub statuses: Vec<Status>,
    /// Also roots with no `finished_at` (written before it was recorded).
    pub include_undated: bool,
    /// Consider at most this many roots.
    pub limit: Option<usize>,
    /// Report what would be purged, delete nothing.
    pub dry_run: bool,
    /// The clock's reading, epoch seconds.
    pub now: f64,
}

/// What [`purge_finished`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PurgeReport {
    /// Trees purged (or, on a dry run, that would be).
    pub purged: usize,
    /// Finished roots skipped for having no `finished_at`.
    pub skipped_undated: usize,
    /// Roots refused or stopped, with the reason; the run went on.
    pub refused: Vec<(String, String)>,
}

/// One step of a [`purge_finished`] run, for a progress line or a log.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// This root's tree was purged (on a dry run: would be).
    Purged(&'a str),
    /// This root's tree was refused; the reason goes to the report.
    Refused(&'a str),
    /// A listing page is done: roots examined so far, trees purged so far.
    Page { examined: usize, purged: usize },
}

/// Purge every root tree in `options.statuses` that finished more than
/// `options.older_than` seconds ago (harel's `purge_finished`). A root refused or changed
/// concurrently is reported and the run goes on; an archive or store failure stops it (what
/// was purged stays purged; running it again goes on from there).
pub async fn purge_finished(
    store: &dyn ExecutionStore,
    options: &PurgeOptions,
    archive: Option<&mut dyn Archive>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<PurgeReport, PurgeError> {
    let archive: ArchiveSlot<'_> = Mutex::new(archive);
    if let Some(status) = options.statuses.iter().find(|s| !PURGEABLE.contains(s)) {
        return Err(PurgeError::Refused(format!(
            "only DONE and CANCELLED executions can be purged, not {}",
            status.as_str()
        )));
    }
    let cutoff = options.now - options.older_than;
    let mut report = PurgeReport::default();
    let mut considered = 0usize;
    let mut examined = 0usize;
    let mut cursor = None;
    loop {
        let query = ListQuery {
            status: Some(options.statuses.clone()),
            roots_only: true,
            limit: PAGE,
            cursor: cursor.take(),
            ..ListQuery::default()
        };
        let page = store.list_executions(&query).await?;
        examined += page.items.len();
        let mut candidates = Vec::new();
        for summary in &page.items {
            if options.limit.is_some_and(|limit| considered >= limit) {
                break;
            }
            match summary.finished_at {
                None if !options.include_undated => {
                    report.skipped_undated += 1;
                    continue;
                }
                Some(at) if at >= cutoff => continue,
                _ => {}
            }
            considered += 1;
            candidates.push(summary.id.clone());
        }
        let prefixes: Vec<String> = candidates.iter().map(|id| format!("{id}:")).collect();
        let descendants = store.ids_with_any_prefix(&prefixes).await?;
        let one_tree = |root_id: String| {
            let descendants = &descendants;
            let archive = &archive;
            async move {
                let prefix = format!("{root_id}:");
                let by_prefix: Vec<String> = descendants
                    .iter()
                    .filter(|d| d.starts_with(&prefix))
                    .cloned()
                    .collect();
                // a transient fault (throttling, a timeout) is retried here: a tree's purge
                // is safe to run again from the start at any point
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let outcome = match store.load(&root_id).await {
                        // purged meanwhile by someone else
                        Ok(None) => return Ok((root_id, None)),
                        Ok(Some(root)) => purge_tree(store, root, &by_prefix, archive, options.dry_run).await,
                        Err(e) => Err(e.into()),
                    };
                    match outcome {
                        Err(PurgeError::Store(StoreError::Retryable { .. })) if attempt < TREE_ATTEMPTS => {
                            tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
                        }
                        outcome => return Ok::<_, PurgeError>((root_id, Some(outcome))),
                    }
                }
            }
        };
        // several trees at once (their calls overlap), reported in listing order
        let mut outcomes = stream::iter(candidates).map(one_tree).buffered(TREES_AT_ONCE);
        while let Some(next) = outcomes.next().await {
            match next? {
                (_, None) => {}
                (root_id, Some(Ok(()))) => {
                    report.purged += 1;
                    progress(Progress::Purged(&root_id));
                }
                (root_id, Some(Err(e @ (PurgeError::Refused(_) | PurgeError::Changed { .. })))) => {
                    progress(Progress::Refused(&root_id));
                    report.refused.push((root_id, e.to_string()));
                }
                (_, Some(Err(e))) => return Err(e),
            }
        }
        progress(Progress::Page {
            examined,
            purged: report.purged,
        });
        let limit_reached = options.limit.is_some_and(|limit| considered >= limit);
        match page.next_cursor {
            Some(next) if !limit_reached => cursor = Some(next),
            _ => return Ok(report),
        }
    }
}

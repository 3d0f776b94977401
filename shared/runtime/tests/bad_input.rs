//! A catalogue of bad input (issue #6 §4): each case asserts the exact outcome (a record
//! reported failed, or acknowledged as a no-op), that the error text (and the log line)
//! names what was wrong, and that nothing else was touched or lost.
//!
//! - SQS bodies, one table: not JSON, JSON of the wrong shape, a wrong `MessageGroupId`
//!   or `stm_kind`, malformed spawn intents, ids DynamoDB cannot take as keys (empty, or
//!   an event id over 1,024 bytes, an execution or spawn id over 2,048), unknown
//!   executions and definitions, event kinds the machine does not know, a 250 KB body.
//!   Each bad record sits between two good records of other executions, so the FIFO
//!   batch rule (the record after it, of another group, is processed) and the untouched
//!   rest of the store are checked every time.
//! - Event data that does not fit its declaration: refused by `Control::send`; taken by
//!   the worker (harel's behaviour), where a mistyped `set` fails the execution.
//! - A batch mixing good and bad records across groups, driven to quiescence through
//!   the queue-driven stack (MemoryStore + MemoryQueue): the poison messages end in the
//!   dead-letter queue, everything else is processed. The FIFO batch rule holds back only
//!   the failed record's group (Powertools' `skip_group_on_error`): good records of other
//!   groups behind failures are processed on their first receive and never age into the
//!   dead-letter queue; a later record of the failed group is skipped while the other
//!   groups' records around it are processed; the failed groups of one batch do not
//!   carry over to the next. The limit that remains is pinned down next to it: an event
//!   behind a poison message in its own group is dead-lettered with it (documented).
//! - A context over DynamoDB's 400 KB item limit (over moto): the store refuses the
//!   commit before the call, the record fails with that message, the stored execution is
//!   unchanged, and the message is dead-lettered without blocking its group for good.
//!   With the trace on, a trace step over the limit fails the same way.
//! - Broken definitions directories and bad function configuration: the cold start fails
//!   naming the file:line:col, the machine, the action or the variable.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{event, object, Stack, START};
use serde_json::{json, Value};
use stm_core::{Execution, Status};
use stm_runtime::config::{self, FunctionConfig};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::queue::SPAWN_KIND;
use stm_runtime::worker::{BatchOutcome, Failed, Handled, Record};
use stm_runtime::{
    ActionRegistry, Control, Definitions, Driver, DriverError, ManualClock, MemoryQueue, OutgoingMessage,
    Queue, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

// --- fixtures ----------------------------------------------------------------------

fn machines(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/machines")
        .join(name)
}

/// The scenario machines plus `Blob` (a context that grows from event data).
fn definitions() -> Definitions {
    let mut defs = common::definitions();
    for defn in config::load_file(&machines("limits.stm")).expect("limits.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

/// What the log lines of a test say: the lines written from the test's own thread.
///
/// One process-wide subscriber, not a `set_default` per test: tracing caches each
/// callsite's interest across threads, so with two tests' scoped subscribers alive at once
/// one of them could miss an event (seen in CI as an empty capture). The writer tags each
/// line with the thread that logged it; the worker runs on the test's thread (the tests
/// await `handle_batch` directly), so a test reads exactly its own lines.
#[derive(Clone)]
struct Logs {
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
    fn capture() -> Logs {
        let thread = std::thread::current().id();
        captured()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((thread, Vec::new()));
        Logs { thread }
    }

    /// Everything this thread logged since the last call.
    fn take(&self) -> String {
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

/// A started in-memory deployment: `a`, `b`, `c` (Flat, Idle), `f` (Fork, Prepare), `blob`
/// (Blob, Idle), and `gone`, a RUNNING execution of a definition this worker lacks.
struct Fixture {
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueue>,
    worker: Worker,
    control: Control,
}

async fn fixture() -> Fixture {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(3));
    let clock = Arc::new(ManualClock::new(START));
    let driver =
        Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_clock(clock.clone());
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    for (defn, id) in [
        ("Flat", "a"),
        ("Flat", "b"),
        ("Flat", "c"),
        ("Fork", "f"),
        ("Blob", "blob"),
    ] {
        control.create(defn, None, Some(id)).await.expect("create");
    }
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let mut gone = Execution::new("gone", "Gone");
    gone.status = Status::Running;
    gone.active_path = Some("Somewhere".into());
    store.save(&mut gone).await.expect("save gone");
    for exe in store.all_executions() {
        if exe.id != "gone" {
            assert_eq!(exe.status, Status::Running, "{} started", exe.id);
        }
    }
    assert!(queue.is_empty());
    Fixture {
        store,
        queue,
        worker,
        control,
    }
}

fn record(message_id: &str, body: &str, group: Option<&str>, kind: Option<&str>) -> Record {
    Record {
        message_id: message_id.into(),
        receipt_handle: None,
        body: body.into(),
        group_id: group.map(Into::into),
        kind: kind.map(Into::into),
        receive_count: 1,
    }
}

/// A well-formed event record for `target`.
fn good(message_id: &str, target: &str, kind: &str) -> Record {
    let body = json!({"id": format!("ev-{message_id}"), "kind": kind}).to_string();
    record(message_id, &body, Some(target), None)
}

fn failure_text(result: &Result<Handled, Failed>) -> Option<&str> {
    match result {
        Err(Failed::Poison(t) | Failed::Conflict(t) | Failed::Retryable(t) | Failed::Error(t)) => Some(t),
        _ => None,
    }
}

fn processed(id: &str) -> Result<Handled, Failed> {
    Ok(Handled::Processed {
        execution_id: id.into(),
        status: Status::Running,
    })
}

// --- the SQS body table ------------------------------------------------------------

#[derive(Debug)]
enum Expect {
    /// Reported failed as poison; the text holds every needle.
    Poison(Vec<&'static str>),
    /// Reported failed as an error (redelivered, then dead-lettered); the text holds every
    /// needle.
    Error(Vec<&'static str>),
    /// Acknowledged with exactly this outcome.
    Handled(Handled),
}

struct Case {
    name: &'static str,
    record: Record,
    expect: Expect,
    /// The one execution this record may legitimately change.
    touches: Option<&'static str>,
    /// What the log must say about it.
    logged: &'static [&'static str],
}

fn case(name: &'static str, body: &str, group: Option<&str>, kind: Option<&str>, expect: Expect) -> Case {
    let logged: &'static [&'static str] = match &expect {
        Expect::Poison(_) => &["poison message: reported failed until SQS dead-letters it"],
        Expect::Error(_) => &["record failed; redelivered"],
        Expect::Handled(_) => &[],
    };
    Case {
        name,
        record: record("bad", body, group, kind),
        expect,
        touches: None,
        logged,
    }
}

fn spawn_body(fields: Value) -> String {
    let mut body = json!({
        "seq": 41,
        "parent_id": "f",
        "child_id": "f:Work.Billing:9",
        "root_path": "Work.Billing",
        "context": {},
    });
    for (k, v) in object(fields) {
        match v {
            Value::Null => {
                body.as_object_mut().expect("object").shift_remove(&k);
            }
            v => {
                body[k] = v;
            }
        }
    }
    body.to_string()
}

/// A bad event body for execution `a`.
fn bad_event(name: &'static str, body: &str, needle: &'static str) -> Case {
    case(name, body, Some("a"), None, Expect::Poison(vec![needle]))
}

/// A bad spawn intent body (group `f:Work.Billing:9`).
fn bad_spawn(name: &'static str, fields: Value, needle: &'static str) -> Case {
    let body = match fields {
        Value::String(text) => text,
        fields => spawn_body(fields),
    };
    case(
        name,
        &body,
        Some("f:Work.Billing:9"),
        Some(SPAWN_KIND),
        Expect::Poison(vec![needle]),
    )
}

fn cases() -> Vec<Case> {
    use Expect::{Error, Handled as Acked, Poison};
    let huge = json!({"id": "huge-1", "kind": "Go", "data": {"pad": "x".repeat(250 * 1024)}}).to_string();
    assert!(huge.len() > 250 * 1024);
    let not_an_event = "the body is not an Event: its";
    vec![
        // not JSON
        bad_event(
            "not JSON",
            "{not json",
            "the body is not JSON (expecting a property name in double quotes",
        ),
        bad_event(
            "empty body",
            "",
            "the body is not JSON (expecting a value, found the end of the text",
        ),
        bad_event(
            "truncated",
            r#"{"kind": "Go""#,
            "the body is not JSON (expecting ',' or '}' in an object",
        ),
        // JSON of the wrong shape
        bad_event("an array", "[1, 2]", "the body is not a JSON object"),
        bad_event("a number", "42", "the body is not a JSON object"),
        bad_event("a string", r#""Go""#, "the body is not a JSON object"),
        bad_event("null", "null", "the body is not a JSON object"),
        bad_event(
            "no kind",
            r#"{"id": "e1", "data": {}}"#,
            "the body is not an Event (missing field `kind`)",
        ),
        bad_event("kind empty", r#"{"kind": ""}"#, "the event kind is empty"),
        Case {
            expect: Poison(vec![not_an_event, "\"kind\" is a number (5), not a string"]),
            ..bad_event("kind a number", r#"{"kind": 5}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![not_an_event, "\"kind\" is null, not a string"]),
            ..bad_event("kind null", r#"{"kind": null}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![not_an_event, "\"data\" is an array, not an object"]),
            ..bad_event("data an array", r#"{"kind": "Go", "data": [1]}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![not_an_event, "\"data\" is a string, not an object"]),
            ..bad_event("data a string", r#"{"kind": "Go", "data": "x"}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![not_an_event, "\"data\" is null, not an object"]),
            ..bad_event("data null", r#"{"kind": "Go", "data": null}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![not_an_event, "\"id\" is a number (7), not a string"]),
            ..bad_event("id a number", r#"{"kind": "Go", "id": 7}"#, not_an_event)
        },
        Case {
            expect: Poison(vec![
                not_an_event,
                "\"created_time\" is a number (1), not a string or null",
            ]),
            ..bad_event(
                "created_time a number",
                r#"{"kind": "Go", "created_time": 1}"#,
                not_an_event,
            )
        },
        // where it goes
        Case {
            record: record("bad", r#"{"kind": "Go"}"#, None, None),
            ..bad_event(
                "no MessageGroupId",
                "",
                "an event message without a MessageGroupId",
            )
        },
        Case {
            record: record("bad", r#"{"kind": "Go"}"#, Some(""), None),
            ..bad_event(
                "empty MessageGroupId",
                "",
                "an event message without a MessageGroupId",
            )
        },
        Case {
            record: record("bad", r#"{"kind": "Go"}"#, Some("a"), Some("weird")),
            ..bad_event("unknown stm_kind", "", "unknown stm_kind \"weird\"")
        },
        // malformed spawn intents
        bad_spawn(
            "spawn: not an object",
            json!("[]"),
            "the body is not a JSON object",
        ),
        bad_spawn("spawn: not JSON", json!("spawn!"), "the body is not JSON"),
        bad_spawn(
            "spawn: no child_id",
            json!({"child_id": null}),
            "a spawn intent without a string \"child_id\"",
        ),
        bad_spawn(
            "spawn: parent_id a number",
            json!({"parent_id": 3}),
            "a spawn intent without a string \"parent_id\"",
        ),
        bad_spawn(
            "spawn: no root_path",
            json!({"root_path": null}),
            "a spawn intent without a string \"root_path\"",
        ),
        bad_spawn(
            "spawn: seq a string",
            json!({"seq": "41"}),
            "a spawn intent without an integer \"seq\"",
        ),
        bad_spawn(
            "spawn: context a list",
            json!({"context": [1]}),
            "a spawn intent whose \"context\" is not an object",
        ),
        // well-formed, but pointing nowhere
        case(
            "spawn: an unknown parent",
            &spawn_body(json!({"parent_id": "ghost", "child_id": "ghost:Work.Billing:1"})),
            Some("ghost:Work.Billing:1"),
            Some(SPAWN_KIND),
            Error(vec!["execution \"ghost\" does not exist"]),
        ),
        Case {
            touches: Some("f:Nowhere:1"),
            ..case(
                "spawn: a path not in the machine",
                &spawn_body(json!({"child_id": "f:Nowhere:1", "root_path": "Nowhere"})),
                Some("f:Nowhere:1"),
                Some(SPAWN_KIND),
                Error(vec!["Nowhere"]),
            )
        },
        Case {
            logged: &[
                "no such execution; acknowledged as a no-op",
                "execution_id=nobody",
            ],
            ..case(
                "an unknown execution",
                r#"{"id": "e-nobody", "kind": "Go"}"#,
                Some("nobody"),
                None,
                Acked(Handled::UnknownExecution),
            )
        },
        case(
            "an execution of an unknown definition",
            r#"{"kind": "Go"}"#,
            Some("gone"),
            None,
            Error(vec!["unknown definition \"Gone\""]),
        ),
        // what the machine does not know: processed as a step that changes nothing but
        // its counters (harel's engine does the same), and logged as processed
        Case {
            touches: Some("c"),
            logged: &[
                "event processed",
                "event_id=e-bogus kind=Bogus",
                "from=\"Idle\" to=\"Idle\" status=RUNNING",
            ],
            ..case(
                "an event kind the machine does not declare",
                r#"{"id": "e-bogus", "kind": "Bogus"}"#,
                Some("c"),
                None,
                Acked(Handled::Processed {
                    execution_id: "c".into(),
                    status: Status::Running,
                }),
            )
        },
        // ids that become DynamoDB keys (bug 4): DynamoDB refuses an empty key, an event
        // id (the processed table's sort key) over 1,024 bytes and an execution id (the
        // partition key of executions and processed) over 2,048 bytes with a
        // ValidationException on every attempt; poison at once instead of hours of retries
        bad_event(
            "event id empty",
            r#"{"id": "", "kind": "Go"}"#,
            "the event id is empty; DynamoDB sort keys cannot be empty",
        ),
        bad_event(
            "event id of 1,300 bytes (650 characters)",
            &json!({"id": "é".repeat(650), "kind": "Go"}).to_string(),
            "the event id is 1,300 bytes; DynamoDB sort keys take at most 1,024 bytes",
        ),
        bad_event(
            "event id one byte over",
            &json!({"id": "x".repeat(1025), "kind": "Go"}).to_string(),
            "the event id is 1,025 bytes; DynamoDB sort keys take at most 1,024 bytes",
        ),
        Case {
            touches: Some("c"),
            logged: &["event processed", "kind=Go", "from=\"Idle\" to=\"Working\""],
            ..case(
                "event id of exactly 1,024 bytes",
                &json!({"id": "k".repeat(1024), "kind": "Go"}).to_string(),
                Some("c"),
                None,
                Acked(Handled::Processed {
                    execution_id: "c".into(),
                    status: Status::Running,
                }),
            )
        },
        Case {
            record: record("bad", r#"{"kind": "Go"}"#, Some("g".repeat(2049).as_str()), None),
            ..bad_event(
                "MessageGroupId of 2,049 bytes",
                "",
                "the MessageGroupId (the target execution id) is 2,049 bytes; DynamoDB partition \
                 keys take at most 2,048 bytes",
            )
        },
        Case {
            record: record("bad", r#"{"kind": "Go"}"#, Some("ü".repeat(1100).as_str()), None),
            ..bad_event(
                "MessageGroupId of 2,200 bytes (1,100 characters)",
                "",
                "the MessageGroupId (the target execution id) is 2,200 bytes; DynamoDB partition \
                 keys take at most 2,048 bytes",
            )
        },
        Case {
            record: record(
                "bad",
                r#"{"id": "e-long", "kind": "Go"}"#,
                Some("n".repeat(2048).as_str()),
                None,
            ),
            ..case(
                "MessageGroupId of exactly 2,048 bytes",
                "",
                None,
                None,
                Acked(Handled::UnknownExecution),
            )
        },
        bad_spawn(
            "spawn: child_id empty",
            json!({"child_id": ""}),
            "the spawn intent's \"child_id\" is empty; DynamoDB partition keys cannot be empty",
        ),
        bad_spawn(
            "spawn: child_id of 2,100 bytes",
            json!({"child_id": "c".repeat(2100)}),
            "the spawn intent's \"child_id\" is 2,100 bytes; DynamoDB partition keys take at most \
             2,048 bytes",
        ),
        bad_spawn(
            "spawn: parent_id empty",
            json!({"parent_id": ""}),
            "the spawn intent's \"parent_id\" is empty; DynamoDB partition keys cannot be empty",
        ),
        bad_spawn(
            "spawn: parent_id of 3,000 bytes",
            json!({"parent_id": "p".repeat(3000)}),
            "the spawn intent's \"parent_id\" is 3,000 bytes; DynamoDB partition keys take at \
             most 2,048 bytes",
        ),
        // 250 KB: SQS takes it (its limit is 1 MiB now); the machine ignores the data
        Case {
            touches: Some("c"),
            logged: &[
                "event processed",
                "event_id=huge-1 kind=Go",
                "from=\"Idle\" to=\"Working\"",
            ],
            ..case(
                "a 250 KB body",
                &huge,
                Some("c"),
                None,
                Acked(Handled::Processed {
                    execution_id: "c".into(),
                    status: Status::Running,
                }),
            )
        },
    ]
}

/// Every bad body between two good records of other executions: the first good record
/// commits; the bad one gets exactly its outcome, with a message (and a log line) naming
/// the problem; the good record after it, of another group, commits whatever the bad one
/// did (the FIFO batch rule holds back only the failed group); nothing else in the store
/// changes.
#[tokio::test]
async fn every_bad_body_gets_its_outcome_and_a_clear_error() {
    let logs = Logs::capture();
    let started = Instant::now();
    let table = cases();
    // messages that do not name the problem, all reported at the end
    let mut unclear: Vec<String> = Vec::new();
    for case in &table {
        let fx = fixture().await;
        let before: Vec<Execution> = fx.store.all_executions();
        let _ = logs.take();
        let batch = [
            good("good-a", "a", "Go"),
            case.record.clone(),
            good("good-b", "b", "Go"),
        ];
        let outcome: BatchOutcome = fx.worker.handle_batch(&batch).await;
        let log = logs.take();
        let name = case.name;
        let results: Vec<&Result<Handled, Failed>> = outcome.records.iter().map(|(_, r)| r).collect();
        assert_eq!(
            outcome
                .records
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>(),
            ["good-a", "bad", "good-b"],
            "{name}"
        );
        assert_eq!(
            results[0],
            &processed("a"),
            "{name}: the record before it commits"
        );

        let failed = match &case.expect {
            Expect::Poison(needles) | Expect::Error(needles) => {
                let text = failure_text(results[1]).unwrap_or_else(|| panic!("{name}: {:?}", results[1]));
                match (&case.expect, results[1]) {
                    (Expect::Poison(_), Err(Failed::Poison(_)))
                    | (Expect::Error(_), Err(Failed::Error(_))) => {}
                    (want, got) => panic!("{name}: expected {want:?}, got {got:?}"),
                }
                for needle in needles {
                    if !text.contains(needle) {
                        unclear.push(format!("{name}: {needle:?} not in {text:?}"));
                    }
                }
                // words for people: never the name of the exception harel raises
                for python in [
                    "KeyError",
                    "AssertionError",
                    "ValueError",
                    "StoreError",
                    "MessageTooLarge:",
                ] {
                    if text.contains(python) {
                        unclear.push(format!("{name}: a Python exception name ({python}) in {text:?}"));
                    }
                }
                assert!(log.contains(text), "{name}: the reason is logged: {log}");
                true
            }
            Expect::Handled(want) => {
                assert_eq!(results[1], &Ok(want.clone()), "{name}");
                false
            }
        };
        // one log line says all of it
        assert!(
            case.logged.is_empty()
                || log
                    .lines()
                    .any(|line| case.logged.iter().all(|n| line.contains(n))),
            "{name}: no line with all of {:?}:\n{log}",
            case.logged
        );
        // the FIFO batch rule holds back only the failed record's group: good-b, of
        // another group, is processed behind it, and only the bad record is reported
        assert_eq!(results[2], &processed("b"), "{name}: another group goes on");
        let reported: &[&str] = if failed { &["bad"] } else { &[] };
        assert_eq!(outcome.failed_ids(), reported, "{name}");

        // nothing else changed, nothing is left pending, nothing was queued
        for exe in &before {
            let now = fx.store.load(&exe.id).await.expect("load").expect("still there");
            match exe.id.as_str() {
                "a" | "b" => {
                    assert_eq!(now.active_path.as_deref(), Some("Working"), "{name}: {}", exe.id);
                    assert_eq!(now.version, exe.version + 1, "{name}: {} committed once", exe.id);
                    assert_eq!(now.processed_events, exe.processed_events + 1, "{name}");
                }
                id if Some(id) == case.touches => {}
                _ => assert_eq!(&now, exe, "{name}: {} untouched", exe.id),
            }
        }
        let after = fx.store.all_executions();
        let new: Vec<&str> = after
            .iter()
            .filter(|e| !before.iter().any(|b| b.id == e.id))
            .map(|e| e.id.as_str())
            .collect();
        assert!(
            new.is_empty() || new == [case.touches.unwrap_or("-")],
            "{name}: created {new:?}"
        );
        assert!(
            fx.store.pending_outbox().await.expect("outbox").is_empty(),
            "{name}"
        );
        assert!(
            fx.store.pending_spawns().await.expect("spawns").is_empty(),
            "{name}"
        );
        assert_eq!(fx.store.timer_count(), 0, "{name}");
        assert!(fx.queue.is_empty(), "{name}: nothing queued");
    }
    assert!(unclear.is_empty(), "unclear errors:\n{}", unclear.join("\n"));
    println!("{} bad bodies checked in {:.2?}", table.len(), started.elapsed());
}

/// The cases above whose outcome needs a closer look.
#[tokio::test]
async fn what_the_no_op_and_unknown_cases_leave_behind() {
    let fx = fixture().await;
    // an unknown execution: no record is created, no processed mark written
    let out = fx.worker.handle_batch(&[good("m1", "nobody", "Go")]).await;
    assert_eq!(out.records[0].1, Ok(Handled::UnknownExecution));
    assert!(fx.store.load("nobody").await.expect("load").is_none());
    assert!(!fx.store.is_processed("nobody", "ev-m1").await.expect("processed"));

    // an undeclared kind is a committed step: the dedupe mark makes its redelivery a
    // duplicate, and the machine is where it was
    let c = fx.store.load("c").await.expect("load").expect("c");
    let bogus = good("m2", "c", "Bogus");
    let out = fx.worker.handle_batch(std::slice::from_ref(&bogus)).await;
    assert_eq!(out.records[0].1, processed("c"));
    let after = fx.store.load("c").await.expect("load").expect("c");
    assert_eq!(after.active_path, c.active_path);
    assert_eq!(after.context, c.context);
    assert_eq!(after.version, c.version + 1);
    assert_eq!(after.processed_events, c.processed_events + 1);
    let out = fx.worker.handle_batch(&[bogus]).await;
    assert_eq!(out.records[0].1, Ok(Handled::Duplicate));
    assert_eq!(
        fx.store.load("c").await.expect("load").expect("c").version,
        after.version
    );

    // an unknown definition fails on every delivery (never a silent ack): it backs off
    // and SQS dead-letters it; the execution is untouched
    let gone = fx.store.load("gone").await.expect("load").expect("gone");
    for receive_count in 1..=3 {
        let mut r = good("m3", "gone", "Go");
        r.receive_count = receive_count;
        let out = fx.worker.handle_batch(&[r]).await;
        assert_eq!(
            out.records[0].1,
            Err(Failed::Error("unknown definition \"Gone\"".into()))
        );
    }
    assert_eq!(fx.store.load("gone").await.expect("load").expect("gone"), gone);
    assert!(!fx.store.is_processed("gone", "ev-m3").await.expect("processed"));
}

/// An event whose data does not fit its declaration: `Control::send` refuses it before it
/// is queued, naming the event and the field. The worker does not check it (as harel's
/// worker does not: `check_event` runs where an event is sent), so one sent around the
/// control plane runs, and here its `set` of a mistyped value fails the execution
/// terminally (FAILED, with the error), a committed step rather than a failed record.
#[tokio::test]
async fn event_data_that_does_not_fit_its_declaration_is_refused_at_send() {
    let fx = fixture().await;
    let wrong = event("Fill", json!({"blob": 5}));
    let err = fx.control.send("blob", &wrong).await.expect_err("refused");
    assert!(matches!(err, DriverError::Event { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("'Fill'") && text.contains("blob"), "{text}");
    assert!(fx.queue.is_empty(), "nothing queued");

    // sent around the control plane (a foreign sender), the worker takes it
    let body = serde_json::to_string(&wrong).expect("json");
    let out = fx
        .worker
        .handle_batch(&[record("m1", &body, Some("blob"), None)])
        .await;
    assert_eq!(
        out.records[0].1,
        Ok(Handled::Processed {
            execution_id: "blob".into(),
            status: Status::Failed
        })
    );
    let blob = fx.store.load("blob").await.expect("load").expect("blob");
    assert_eq!(
        blob.error.as_deref(),
        Some("ExpressionError: context.more is declared string, `set` gave int 5")
    );
    assert_eq!(
        blob.active_path.as_deref(),
        Some("Idle"),
        "the step's effects are dropped"
    );
    assert_eq!(blob.context["more"], json!(""));
    // a committed (terminal) step, not a failed record: its redelivery is a duplicate
    let again = fx
        .worker
        .handle_batch(&[record("m1", &body, Some("blob"), None)])
        .await;
    assert_eq!(again.records[0].1, Ok(Handled::Duplicate));
}

// --- a mixed batch through the queue-driven stack -----------------------------------

fn raw(group: &str, dedup: &str, body: &str, spawn: bool) -> OutgoingMessage {
    OutgoingMessage {
        group_id: group.into(),
        deduplication_id: dedup.into(),
        body: body.into(),
        spawn,
    }
}

async fn drain_until_empty(stack: &Stack, queue: &MemoryQueue, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        stack.drain().await;
        if queue.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue never emptied: {:?}",
            queue.snapshot()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Good and bad records across groups in one batch, each bad record alone in its group:
/// every good record is processed on its first receive (a failure holds back only its own
/// group), every bad one is reported; then, polled to quiescence, every poison message
/// (and the event of an unknown definition) is dead-lettered after maxReceiveCount and
/// every good event is processed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_loses_nothing_and_dead_letters_only_the_poison() {
    let started = Instant::now();
    let (store, queue, stack, gone) = mixed_stack(4).await;
    let batch = mixed_batch();
    assert!(queue.publish_batch(&batch).await.is_empty());
    let received = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(received.len(), 10, "one batch");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let outcome = stack.worker.handle_batch(&records).await;
    let results: Vec<&Result<Handled, Failed>> = outcome.records.iter().map(|(_, r)| r).collect();
    assert!(
        matches!(results[1], Err(Failed::Poison(t)) if t.contains("not JSON")),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(results[4], Err(Failed::Poison(t)) if t.contains("not a JSON object")),
        "{:?}",
        results[4]
    );
    assert!(
        matches!(results[8], Err(Failed::Poison(t)) if t.contains("spawn intent")),
        "{:?}",
        results[8]
    );
    assert_eq!(
        results[9],
        &Err(Failed::Error("unknown definition \"Gone\"".into()))
    );
    // a, b, c: Go then Finish each, processed behind the failures of other groups
    for i in [0, 2, 3, 5, 6, 7] {
        assert!(
            matches!(results[i], Ok(Handled::Processed { .. })),
            "record {i} ({}): {:?}",
            batch[i].group_id,
            results[i]
        );
    }
    let reported: Vec<String> = [1, 4, 8, 9]
        .iter()
        .map(|&i| received[i].message_id.clone())
        .collect();
    assert_eq!(outcome.failed_ids(), reported, "only the bad records");
    for id in ["a", "b", "c"] {
        assert_eq!(
            stack.load(id).await.status,
            Status::Done,
            "{id}: in the first batch"
        );
    }
    for (message, (_, result)) in received.iter().zip(&outcome.records) {
        if result.is_ok() {
            // the event source deletes what succeeded
            queue.delete(&message.receipt_handle).await.expect("delete");
        }
    }

    // the event source keeps polling: each bad record comes back after its retry period,
    // until SQS's redrive takes it
    drain_until_empty(&stack, &queue, Duration::from_secs(60)).await;
    assert_eq!(dead_bodies(&queue), mixed_bad_bodies(), "only the bad records");
    for id in ["a", "b", "c"] {
        let exe = stack.load(id).await;
        assert_eq!(exe.status, Status::Done, "{id}");
        assert_eq!(exe.processed_events, 2, "{id}: Go and Finish, once each");
    }
    assert_eq!(stack.load("gone").await, gone, "untouched");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    println!("mixed batch to quiescence: {:.2?}", started.elapsed());
}

/// Regression: the old batch rule reported every record after the first
/// failure, whatever its group, and each report is a receive, so a good event of group `c`
/// that kept landing behind failures of *other* groups (here four bad records, at
/// maxReceiveCount 3) was dead-lettered without ever being attempted. FIFO order only
/// binds a group: now a failure holds back only the later records of its own group
/// (Powertools' `skip_group_on_error`), and the good records, last in the batch behind
/// every bad one, are processed on their first receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_records_of_other_groups_never_age_behind_failures() {
    let (_store, queue, stack, _gone) = mixed_stack(3).await;
    // the good records last: behind every bad one
    let (good, mut batch): (Vec<_>, Vec<_>) = mixed_batch()
        .into_iter()
        .partition(|m| ["a", "b", "c"].contains(&m.group_id.as_str()));
    batch.extend(good);
    assert!(queue.publish_batch(&batch).await.is_empty());
    let first = eventsource::poll_once(queue.as_ref(), &stack.worker, &stack.settings)
        .await
        .expect("poll");
    assert_eq!(first.received, 10);
    assert_eq!(first.deleted, 6, "every good record on its first receive");
    assert_eq!(first.failed.len(), 4, "only the bad records are reported");
    for id in ["a", "b", "c"] {
        assert_eq!(stack.load(id).await.status, Status::Done, "{id}");
    }
    drain_until_empty(&stack, &queue, Duration::from_secs(60)).await;
    assert_eq!(dead_bodies(&queue), mixed_bad_bodies(), "only the bad records");
    for id in ["a", "b", "c"] {
        let exe = stack.load(id).await;
        assert_eq!(exe.status, Status::Done, "{id}");
        assert_eq!(exe.processed_events, 2, "{id}: once each");
    }
}

/// Records seen by the event source, with the visibility the worker gave each reported
/// one (the release): a recording queue over the in-memory one.
#[derive(Default)]
struct Releases {
    inner: MemoryQueue,
    set: Mutex<Vec<(String, i32)>>,
}

impl Releases {
    fn of(&self, receipt: &str) -> Option<i32> {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        set.iter().find(|(r, _)| r == receipt).map(|(_, s)| *s)
    }
}

#[async_trait::async_trait]
impl Queue for Releases {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<stm_runtime::queue::PublishFailure> {
        self.inner.publish_batch(messages).await
    }
    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<stm_runtime::queue::ReceivedMessage>, DriverError> {
        self.inner.receive(max, visibility_seconds, wait_seconds).await
    }
    async fn delete(&self, receipt_handle: &str) -> Result<(), DriverError> {
        self.inner.delete(receipt_handle).await
    }
    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError> {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((receipt_handle.to_string(), seconds));
        self.inner.change_visibility(receipt_handle, seconds).await
    }
}

/// The batch rule per group: after group `a`'s poison record, `a`'s later event is
/// skipped (never attempted, so `a` stays where it was and its order holds), while the
/// records of `b` and `c` before, between and after them are processed; the skipped
/// record is hidden as long as its group's failed record (it cannot be received before
/// it), and `a`'s event goes through once the poison is gone.
#[tokio::test]
async fn a_later_record_of_the_failed_group_is_skipped_while_other_groups_go_on() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(Releases::default());
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins())
        .with_clock(Arc::new(ManualClock::new(START)));
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    for id in ["a", "b", "c"] {
        control.create("Flat", None, Some(id)).await.expect("create");
    }
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    assert!(queue.inner.is_empty());
    assert!(queue
        .publish_batch(&[
            mixed_event("b", "Go"),
            raw("a", "poison-a", "{not json", false),
            mixed_event("c", "Go"),
            mixed_event("a", "Go"),
            mixed_event("b", "Finish"),
            mixed_event("c", "Finish"),
        ])
        .await
        .is_empty());
    let received = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(received.len(), 6, "one batch");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let outcome = worker.handle_batch(&records).await;
    let results: Vec<&Result<Handled, Failed>> = outcome.records.iter().map(|(_, r)| r).collect();
    assert_eq!(results[0], &processed("b"));
    assert!(matches!(results[1], Err(Failed::Poison(_))), "{:?}", results[1]);
    assert_eq!(results[2], &processed("c"), "between the failure and the skip");
    assert_eq!(results[3], &Err(Failed::Skipped), "a's later record");
    let done = |id: &str| {
        Ok(Handled::Processed {
            execution_id: id.into(),
            status: Status::Done,
        })
    };
    assert_eq!(results[4], &done("b"), "after the skip");
    assert_eq!(results[5], &done("c"));
    assert_eq!(
        outcome.failed_ids(),
        [received[1].message_id.clone(), received[3].message_id.clone()]
    );
    let a = store.load("a").await.expect("load").expect("a");
    assert_eq!(a.active_path.as_deref(), Some("Idle"), "a's Go not attempted");
    assert!(!store.is_processed("a", "go-a").await.expect("processed"));
    // the poison is hidden for its retry period, the skipped record just as long; the
    // processed ones are left to the event source to delete
    let poison_wait = WorkerSettings::default().poison_retry_seconds;
    assert_eq!(queue.of(&received[1].receipt_handle), Some(poison_wait));
    assert_eq!(queue.of(&received[3].receipt_handle), Some(poison_wait));
    for i in [0, 2, 4, 5] {
        assert_eq!(
            queue.of(&received[i].receipt_handle),
            None,
            "record {i} not released"
        );
    }

    // once the poison is gone, a's Go is next in its group and goes through
    for i in [0, 1, 2, 4, 5] {
        queue
            .inner
            .delete(&received[i].receipt_handle)
            .await
            .expect("delete");
    }
    queue
        .inner
        .change_visibility(&received[3].receipt_handle, 0)
        .await
        .expect("release");
    let again = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(again.len(), 1);
    let outcome = worker.handle_batch(&[Record::from_received(&again[0])]).await;
    assert_eq!(
        outcome.records[0].1,
        Ok(Handled::Processed {
            execution_id: "a".into(),
            status: Status::Running
        })
    );
}

/// The failed groups live for one batch only (Powertools TypeScript issue 3673 kept them
/// in the processor, across invocations): after a batch in which group `a` failed, the
/// same worker processes `a`'s next batch normally.
#[tokio::test]
async fn the_failed_groups_do_not_leak_into_the_next_batch() {
    let fx = fixture().await;
    let first = fx
        .worker
        .handle_batch(&[
            record("m1", "{not json", Some("a"), None),
            good("m2", "a", "Go"),
            good("m3", "b", "Go"),
        ])
        .await;
    assert!(matches!(first.records[0].1, Err(Failed::Poison(_))));
    assert_eq!(first.records[1].1, Err(Failed::Skipped));
    assert_eq!(first.records[2].1, processed("b"));
    // the next invocation, on the same worker: a's records are attempted again
    let second = fx
        .worker
        .handle_batch(&[good("m2", "a", "Go"), good("m4", "c", "Go")])
        .await;
    assert_eq!(second.records[0].1, processed("a"), "not skipped");
    assert_eq!(second.records[1].1, processed("c"));
    assert!(second.failed_ids().is_empty());
    // and a failure there holds back only that batch's later records of its group
    let third = fx
        .worker
        .handle_batch(&[
            record("m5", "[1]", Some("b"), None),
            good("m6", "a", "Finish"),
            good("m7", "b", "Finish"),
        ])
        .await;
    assert_eq!(
        third.records[1].1,
        Ok(Handled::Processed {
            execution_id: "a".into(),
            status: Status::Done
        })
    );
    assert_eq!(third.records[2].1, Err(Failed::Skipped));
}

async fn mixed_stack(max_receive_count: u32) -> (Arc<MemoryStore>, Arc<MemoryQueue>, Stack, Execution) {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(max_receive_count));
    let stack = Stack::new(store.clone(), queue.clone());
    for id in ["a", "b", "c"] {
        stack
            .control
            .create("Flat", None, Some(id))
            .await
            .expect("create");
    }
    stack.drain().await;
    let mut gone = Execution::new("gone", "Gone");
    gone.status = Status::Running;
    store.save(&mut gone).await.expect("save");
    let gone = store.load("gone").await.expect("load").expect("gone");
    (store, queue, stack, gone)
}

fn mixed_event(target: &str, kind: &str) -> OutgoingMessage {
    let id = format!("{}-{target}", kind.to_ascii_lowercase());
    OutgoingMessage::event(target, &event(kind, json!({})).with_id(id))
}

/// Good events of `a`, `b`, `c` (Go, then Finish) among four bad records of their own
/// groups: two poison bodies, a malformed spawn intent, an event of an unknown definition.
fn mixed_batch() -> Vec<OutgoingMessage> {
    vec![
        mixed_event("a", "Go"),
        raw("p", "poison-1", "{not json", false),
        mixed_event("b", "Go"),
        mixed_event("a", "Finish"),
        raw("q", "poison-2", "[1, 2]", false),
        mixed_event("c", "Go"),
        mixed_event("b", "Finish"),
        mixed_event("c", "Finish"),
        raw("s", "poison-3", "{}", true),
        mixed_event("gone", "Go"),
    ]
}

fn mixed_bad_bodies() -> Vec<String> {
    let mut bad = vec![
        "{not json".to_string(),
        "[1, 2]".to_string(),
        "{}".to_string(),
        mixed_event("gone", "Go").body,
    ];
    bad.sort();
    bad
}

fn dead_bodies(queue: &MemoryQueue) -> Vec<String> {
    let mut dead: Vec<String> = queue.dead_letters().iter().map(|m| m.body.clone()).collect();
    dead.sort();
    dead
}

/// KNOWN LIMITATION, documented: an event queued right behind a poison message *in the
/// same group* is received with it on every delivery (FIFO), is reported with it (the
/// batch rule), so its receive count grows with the poison's, and SQS's redrive moves it
/// to the dead-letter queue together with the poison. It is not lost (it can be redriven
/// from the DLQ) but it is not processed. The same holds for the events behind a record
/// failing for a lasting reason (an unknown definition, a context over the item limit)
/// or parked (SUSPENDED) for longer than the receive budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_behind_a_poison_message_in_its_group_is_dead_lettered_with_it() {
    let (_store, queue, stack, _gone) = mixed_stack(3).await;
    let finish = mixed_event("a", "Finish");
    assert!(queue
        .publish_batch(&[
            mixed_event("a", "Go"),
            raw("a", "poison", "{not json", false),
            finish.clone()
        ])
        .await
        .is_empty());
    drain_until_empty(&stack, &queue, Duration::from_secs(30)).await;
    let dead: Vec<String> = queue.dead_letters().iter().map(|m| m.body.clone()).collect();
    assert_eq!(dead, ["{not json".to_string(), finish.body]);
    let a = stack.load("a").await;
    assert_eq!(
        a.active_path.as_deref(),
        Some("Working"),
        "Go went through; Finish went to the DLQ with the poison"
    );
}

// --- the DynamoDB item limit (moto) ------------------------------------------------

/// A step whose commit DynamoDB would refuse whatever the retry (here an execution item
/// over 400 KB; a fan-out over 100 transaction items below) is never retried: the store
/// says so before calling DynamoDB, the step is undone and the execution fails where it
/// was with the store's reason, the event is marked processed, and the record is
/// acknowledged, so its group moves on at once (no back-off, no dead-letter queue).
/// Nothing of the step leaks: no outbox entry, spawn intent or timer. Also over moto: a
/// 250 KB event that the machine does not keep is fine, and with the execution trace on,
/// a step whose trace entry (event data + context) passes the limit even undone is
/// poison, dead-lettered after its poison retries: nothing can be written for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_over_dynamodbs_limits_fails_the_execution_at_once() {
    let started = Instant::now();
    let parts = common::moto_parts("limits", 5, 3).await;
    let store = parts.store.clone();
    let queue = Arc::new(MemoryQueue::new(3));
    let clock = Arc::new(ManualClock::new(START));
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_clock(clock);
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver.clone(), queue.clone());
    let blob = "b".repeat(250 * 1024);
    control
        .create("Blob", Some(object(json!({"blob": blob}))), Some("big"))
        .await
        .expect("a 250 KB context fits");
    control.create("Flat", None, Some("flat")).await.expect("create");
    let settings = EventSourceSettings {
        wait_seconds: 0,
        visibility_seconds: 5,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let big = store.load("big").await.expect("load").expect("big");
    assert_eq!(big.active_path.as_deref(), Some("Idle"));
    let item = store.execution_item_size(&big);
    assert!(item > 250 * 1024 && item < 400 * 1024, "{item}");

    // 200 KB more would make it ~450 KB
    let fill = event("Fill", json!({"blob": "m".repeat(200 * 1024)})).with_id("fill-1");
    let body = serde_json::to_string(&fill).expect("json");
    assert!(body.len() < 256 * 1024, "within SQS's classic message limit");
    let out = worker
        .handle_batch(&[record("m1", &body, Some("big"), None), good("m2", "flat", "Go")])
        .await;
    assert_eq!(
        out.records[0].1,
        Ok(Handled::Processed {
            execution_id: "big".into(),
            status: Status::Failed,
        }),
        "acknowledged: the execution failed"
    );
    assert_eq!(out.records[1].1, processed("flat"), "another group goes on");
    let failed = store.load("big").await.expect("load").expect("big");
    let text = failed.error.clone().unwrap_or_default();
    assert!(
        text.starts_with("StoreError: execution big item is ")
            && text.contains(
                "bytes, over DynamoDB's limit of 409600 bytes (shrink the context or the event data)"
            ),
        "{text}"
    );
    assert_eq!(failed.status, Status::Failed);
    // undone: the state and context it started from
    assert_eq!(
        (failed.active_path.as_deref(), &failed.context),
        (Some("Idle"), &big.context)
    );
    assert_eq!(failed.version, big.version + 1, "one commit: the failure");
    assert!(store.is_processed("big", "fill-1").await.expect("processed"));
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.due_timers(START + 1e9).await.expect("timers").is_empty());

    // the same step coalesced behind another event of its execution (one batch, one
    // group): the burst's commit is refused, so its records are stepped one at a time; the
    // first commits as it would alone, the over-limit one fails the execution
    control
        .create(
            "Blob",
            Some(object(json!({"blob": "c".repeat(250 * 1024)}))),
            Some("big2"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let big2 = store.load("big2").await.expect("load").expect("big2");
    let nudge = event("Nudge", json!({})).with_id("nudge-2");
    let fill = event("Fill", json!({"blob": "m".repeat(200 * 1024)})).with_id("fill-2");
    let out = worker
        .handle_batch(&[
            record(
                "m5",
                &serde_json::to_string(&nudge).expect("json"),
                Some("big2"),
                None,
            ),
            record(
                "m6",
                &serde_json::to_string(&fill).expect("json"),
                Some("big2"),
                None,
            ),
        ])
        .await;
    assert_eq!(
        out.records.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
        vec![
            Ok(Handled::Processed {
                execution_id: "big2".into(),
                status: Status::Running,
            }),
            Ok(Handled::Processed {
                execution_id: "big2".into(),
                status: Status::Failed,
            }),
        ],
        "both acknowledged: nothing retried to the dead-letter queue"
    );
    let failed = store.load("big2").await.expect("load").expect("big2");
    assert_eq!(failed.status, Status::Failed);
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or_default()
            .starts_with("StoreError: execution big2 item is "),
        "{:?}",
        failed.error
    );
    assert_eq!(
        failed.version,
        big2.version + 2,
        "the nudge's commit, then the failure's"
    );
    assert!(store.is_processed("big2", "nudge-2").await.expect("processed"));
    assert!(store.is_processed("big2", "fill-2").await.expect("processed"));

    // a fan-out of 1,000 children, ten times a transaction's 100 items: its spawn intents
    // are packed into a few rows of the one commit; every child starts and the parent joins
    let started_wide = Instant::now();
    let width = 1_000;
    let recipients: Vec<String> = (0..width).map(|n| format!("r{n}")).collect();
    control
        .create(
            "FanOut",
            Some(object(json!({ "recipients": recipients }))),
            Some("wide"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 5_000)
        .await
        .expect("drain");
    let wide = store.load("wide").await.expect("load").expect("wide");
    assert_eq!(
        (wide.status, wide.active_path.as_deref(), wide.error.as_deref()),
        (Status::Done, Some("AllSent"), None),
        "the parent joined all {width} children"
    );
    assert_eq!(wide.children.len(), width);
    assert!(wide
        .children
        .values()
        .all(|c| c.finished && c.outcome.as_deref() == Some("success")));
    let children = store.ids_with_prefix("wide:").await.expect("children");
    assert_eq!(children.len(), width, "each child created once");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(
        queue.is_empty() && queue.dead_letters().is_empty(),
        "nothing retried or dead-lettered"
    );
    println!(
        "a fan-out of {width} children started and joined on moto in {:.2?}",
        started_wide.elapsed()
    );

    // past what the parent's item holds (each child is an entry of its `children`): the
    // parent fails at its start with the reason, at once, nothing spawned
    let recipients: Vec<String> = (0..4_000).map(|n| format!("recipient-{n}")).collect();
    control
        .create(
            "FanOut",
            Some(object(json!({ "recipients": recipients }))),
            Some("widest"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let widest = store.load("widest").await.expect("load").expect("widest");
    let reason = widest.error.clone().unwrap_or_default();
    assert_eq!(widest.status, Status::Failed, "{reason}");
    assert!(
        reason.starts_with("StoreError: execution widest item is ")
            && reason.contains("over DynamoDB's limit of 409600 bytes"),
        "the reason names DynamoDB's item limit: {reason}"
    );
    assert!(widest.children.is_empty(), "undone: no child");
    assert!(store.ids_with_prefix("widest:").await.expect("ids").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(
        queue.is_empty() && queue.dead_letters().is_empty(),
        "nothing retried or dead-lettered"
    );

    // a 250 KB event the machine does not keep is no problem for the store
    let huge = event("Go", json!({"pad": "x".repeat(250 * 1024)})).with_id("huge-1");
    let body = serde_json::to_string(&huge).expect("json");
    control.create("Flat", None, Some("flat2")).await.expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let out = worker
        .handle_batch(&[record("m3", &body, Some("flat2"), None)])
        .await;
    assert_eq!(out.records[0].1, processed("flat2"));

    // with the trace on, the trace entry carries the event data and the context out:
    // 150 KB of context + 260 KB of event data fit neither
    let traced = Worker::new(
        driver.clone().with_trace(true),
        queue.clone(),
        WorkerSettings::default(),
    );
    control
        .create(
            "Blob",
            Some(object(json!({"blob": "t".repeat(150 * 1024)}))),
            Some("traced"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &traced, &settings, || START, 50)
        .await
        .expect("drain");
    let before = store.load("traced").await.expect("load").expect("traced");
    let wide = event("Go", json!({"pad": "w".repeat(260 * 1024)})).with_id("wide-1");
    let out = traced
        .handle_batch(&[record(
            "m4",
            &serde_json::to_string(&wide).expect("json"),
            Some("traced"),
            None,
        )])
        .await;
    match &out.records[0].1 {
        Err(Failed::Poison(t)) => assert!(
            t.starts_with("the trace step item is ") && t.contains("over DynamoDB's limit"),
            "{t}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.load("traced").await.expect("load").expect("traced"), before);
    println!("item-limit cases over moto: {:.2?}", started.elapsed());
}

// --- broken definitions directories ------------------------------------------------

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("stm-bad-input-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
    fn write(&self, name: &str, text: &[u8]) -> &Self {
        std::fs::write(self.0.join(name), text).expect("write");
        self
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config_error(result: Result<Definitions, DriverError>) -> String {
    match result {
        Err(err @ DriverError::Config(_)) => {
            assert_eq!(err.python_type(), "ValueError");
            err.to_string()
        }
        Err(other) => panic!("not a configuration error: {other:?}"),
        Ok(defs) => panic!("loaded {} definitions", defs.len()),
    }
}

const GOOD: &str =
    "event Go {}\nmachine Good {\n  initial A\n  state A {}\n  final B success\n  from A to B on Go\n}\n";

#[test]
fn a_broken_definitions_directory_fails_the_cold_start_naming_the_place() {
    // (a) a syntax error: file:line:col, after a good file (one bad file fails it all)
    let dir = TempDir::new("syntax");
    dir.write("a_good.stm", GOOD.as_bytes()).write(
        "b_broken.stm",
        b"machine M {\n  initial A\n  state A {}\n  from A to A on\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("b_broken.stm").display().to_string();
    assert!(
        text.contains(&format!("invalid definition file {file}")),
        "{text}"
    );
    assert!(text.contains(&format!("--> {file}:5:1")), "file:line:col: {text}");

    // (a') not UTF-8
    let dir = TempDir::new("binary");
    dir.write("bin.stm", &[0xff, 0xfe, 0x00, 0x41]);
    let text = config_error(config::load_definitions_dir(dir.path()));
    assert!(text.contains("bin.stm"), "{text}");

    // (a'') a transition to a state that does not exist: resolved while loading
    let dir = TempDir::new("unresolved");
    dir.write(
        "lost.stm",
        b"machine Lost {\n  initial A\n  state A {}\n  from A to Nowhere on Go\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("lost.stm").display().to_string();
    assert!(
        text.contains("cannot resolve transition target 'Nowhere'"),
        "{text}"
    );
    assert!(text.contains(&format!("--> {file}:4:13")), "{text}");

    // (b) a validation error: the file, the machine, the finding and where
    let dir = TempDir::new("invalid");
    dir.write(
        "broken.stm",
        b"event Go {}\nmachine Broken {\n  initial A\n  state A {}\n  state B {}\n  from A to B on Go\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("broken.stm").display().to_string();
    assert!(
        text.contains(&format!("{file}: machine Broken is not valid")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}:5:3: [error] terminal_missing_outcome at B")),
        "{text}"
    );

    // (c) an action nothing binds: loads, and check_actions names machine and action
    let dir = TempDir::new("unbound");
    dir.write(
        "unbound.stm",
        b"event Go {}\nmachine Hooks {\n  initial A\n  state A { on enter billing.charge(amount: 1) }\n  \
          final B success\n  from A to B on Go\n}\n",
    );
    let defs = config::load_definitions_dir(dir.path()).expect("it parses and validates");
    let err = config::check_actions(&defs, &ActionRegistry::with_builtins()).expect_err("unbound");
    assert_eq!(
        err.to_string(),
        "configuration error: machine Hooks: unbound actions: billing.charge \
         (register them, or bind them to a remote function)"
    );
    let mut registry = ActionRegistry::with_builtins();
    registry.register("billing.charge", |_| Ok(Value::Null));
    config::check_actions(&defs, &registry).expect("bound");

    // (d) an empty directory (or one without *.stm), and a missing one
    let dir = TempDir::new("empty");
    dir.write("README.md", b"# not a machine\n")
        .write("order.stm.bak", GOOD.as_bytes());
    let text = config_error(config::load_definitions_dir(dir.path()));
    assert_eq!(
        text,
        format!(
            "configuration error: no machine found in {}/*.stm",
            dir.path().display()
        )
    );
    let missing = dir.path().join("nope");
    let text = config_error(config::load_definitions_dir(&missing));
    assert!(
        text.starts_with(&format!(
            "configuration error: cannot read the definitions directory {}: ",
            missing.display()
        )),
        "{text}"
    );
    // a file where the directory should be
    let text = config_error(config::load_definitions_dir(&dir.path().join("README.md")));
    assert!(text.contains("cannot read the definitions directory"), "{text}");
}

// --- the functions' configuration --------------------------------------------------

fn from_env(vars: &[(&str, &str)]) -> Result<FunctionConfig, DriverError> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    FunctionConfig::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

#[test]
fn each_bad_variable_is_named_in_the_error() {
    const QUEUE: (&str, &str) = ("STM_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q.fifo");
    let ok = from_env(&[QUEUE]).expect("the minimum");
    assert!(!ok.trace);
    assert_eq!(ok.processed_ttl_days, None);
    for days in ["1", "30", "36500"] {
        let ok = from_env(&[QUEUE, ("STM_PROCESSED_TTL_DAYS", days)]).expect(days);
        assert_eq!(ok.processed_ttl_days, days.parse().ok());
        let ok = from_env(&[QUEUE, ("STM_FINISHED_TTL_DAYS", days)]).expect(days);
        assert_eq!(ok.finished_ttl_days, days.parse().ok());
    }

    // (variable, value, why): the error names the variable and the value, and says why
    let days = "expected a whole number of days from 1 to 36500 (unset keeps the marks)";
    let finished_days =
        "expected a whole number of days from 1 to 36500 (unset keeps finished executions until a purge)";
    let cases: &[(&str, &str, &str)] = &[
        ("STM_TRACE", "maybe", "expected true or false"),
        ("STM_TRACE_MAX", "-1", "expected a whole number"),
        ("STM_TRACE_MAX", "lots", "expected a whole number"),
        ("STM_PROCESSED_TTL_DAYS", "x", days),
        ("STM_PROCESSED_TTL_DAYS", "-3", days),
        ("STM_PROCESSED_TTL_DAYS", "1.5", days),
        // 0 would write marks that are already expired (the template leaves it unset for
        // "keep forever"); a huge count overflowed `days * 86_400` in `store()`
        ("STM_PROCESSED_TTL_DAYS", "0", days),
        ("STM_PROCESSED_TTL_DAYS", "300000000000000", days),
        ("STM_FINISHED_TTL_DAYS", "0", finished_days),
        ("STM_FINISHED_TTL_DAYS", "ninety", finished_days),
        ("STM_FINISHED_TTL_DAYS", "36501", finished_days),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "0",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "1000",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "NaN",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_MAX_RESPONSE_BYTES",
            "0",
            "expected a positive whole number",
        ),
        // STM_ACTIONS names the entry
        (
            "STM_ACTIONS",
            "charge",
            "expected name=lambda:<function> or name=https://<url>",
        ),
        (
            "STM_ACTIONS",
            "charge=ftp://x",
            "the target must start with lambda:, https://",
        ),
        ("STM_ACTIONS", "charge=lambda:", "no function name after lambda:"),
        (
            "STM_ACTIONS",
            "c=http://example.com/x",
            "plain http:// is only allowed to a loopback host",
        ),
        ("STM_ACTIONS", "a=lambda:f,a=lambda:g", "a is bound twice"),
    ];
    for (name, value, why) in cases {
        let err = from_env(&[QUEUE, (name, value)]).expect_err(&format!("{name}={value}"));
        assert!(matches!(err, DriverError::Config(_)), "{err:?}");
        let text = err.to_string();
        let named = if *name == "STM_ACTIONS" {
            let entry = value.rsplit(',').next().unwrap_or(value);
            format!("STM_ACTIONS entry {entry:?}: {why}")
        } else {
            format!("{name}={value:?}: {why}")
        };
        assert!(
            text.starts_with("configuration error: ") && text.contains(&named),
            "{name}={value}: {text:?}"
        );
        assert_eq!(config::error_parts(&err).0, "stm.ValueError");
    }

    // a missing or blank queue URL
    for vars in [vec![], vec![("STM_QUEUE_URL", "  ")]] {
        let err = from_env(&vars).expect_err("no queue");
        assert_eq!(
            err.to_string(),
            "configuration error: STM_QUEUE_URL is required (the FIFO event queue's URL)"
        );
    }
    // flags take the usual spellings; blank means unset
    for (value, want) in [
        ("TRUE", true),
        ("on", true),
        ("0", false),
        ("no", false),
        (" ", false),
    ] {
        assert_eq!(
            from_env(&[QUEUE, ("STM_TRACE", value)]).expect("flag").trace,
            want,
            "{value:?}"
        );
    }
}

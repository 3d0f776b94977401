//! The catalogue run: every bad body between two good records of other groups gets its
//! outcome and a clear error, and nothing else changes; then a closer look at what the
//! no-op and unknown cases leave behind.

use std::time::Instant;

use stm_core::Execution;
use stm_runtime::worker::{BatchOutcome, Cause, Failed, Handled};
use stm_runtime::DriverError;
use stm_store::ExecutionStore;

use crate::body_table::{cases, Expect};
use crate::logs::Logs;
use crate::support::{failure_text, fixture, good, processed};

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
                assert!(log.contains(&text), "{name}: the reason is logged: {log}");
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
            Err(Failed::Error(Cause::new(DriverError::UnknownDefinition(
                "Gone".into()
            ))))
        );
    }
    assert_eq!(fx.store.load("gone").await.expect("load").expect("gone"), gone);
    assert!(!fx.store.is_processed("gone", "ev-m3").await.expect("processed"));
}

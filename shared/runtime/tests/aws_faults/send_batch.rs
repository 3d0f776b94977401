//! A producer's batch, over moto: `Control::send_batch` sends drawn events (1 to 40, to 1
//! to 6 executions and one that does not exist, with events its checks refuse among them)
//! while the strict layer fails drawn entries of its `SendMessageBatch`es in half the
//! rounds. Each event gets its own answer: an event whose data does not fit its declaration, a
//! `Start` or one too large for SQS is refused with its reason and holds back nothing; an
//! event SQS refused holds back every later event of its execution (`HeldBack`); every
//! event answered `Ok` comes off the FIFO queue once, in its execution's order, and no
//! other does. Fault-free, the events take as many requests as ten to a batch allows, one
//! per execution per request.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use stm_core::Event;
use stm_runtime::queue::{HookedQueue, PublishFailure, QueueHook};
use stm_runtime::{ActionRegistry, Control, ControlError, Driver, OutgoingMessage, Queue, SqsQueue};
use stm_testkit::strict::entry_faults::SQS_FAILED_ENTRY;

use crate::common::queue_view::{consume_by_group, event_id};
use crate::common::scenarios::{env_u64, Rng, SeedOnFailure};

/// What each `publish_batch` call sent: its messages' execution ids.
#[derive(Default)]
struct Calls(Mutex<Vec<Vec<String>>>);

#[async_trait]
impl QueueHook for Calls {
    async fn publish_batch(&self, inner: &dyn Queue, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let groups = messages.iter().map(|m| m.group_id.clone()).collect();
        self.0.lock().expect("calls").push(groups);
        inner.publish_batch(messages).await
    }
}

/// What a drawn event is: sendable, or refused by a check before any request (data that
/// does not fit its declaration, a `Start`, a message too large for SQS).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Drawn {
    Go,
    Misfit,
    Start,
    TooLarge,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_batch_answers_each_event_and_keeps_each_executions_order() {
    let seed = env_u64("STM_SEND_BATCH_SEED", 0x5E4D_BA7C);
    let _report = SeedOnFailure::new("send_batch", "STM_SEND_BATCH_SEED", seed);
    let moto = stm_testkit::moto().await;
    let strict = moto.strict();
    let mut faults_seen = 0;
    let mut injected = 0;
    for round in 0..6u64 {
        let mut rng = Rng::new(seed).fork(round);
        let parts = crate::common::moto_parts("sendbatch", 30, 50).await;
        let queue_name = format!("{}-events", parts.prefix);
        let sqs = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
        let hooked = Arc::new(HookedQueue::new(sqs.clone(), Calls::default()));
        let driver = Driver::new(
            parts.store.clone(),
            crate::common::definitions(),
            ActionRegistry::with_builtins(),
        );
        let control = Control::new(driver, hooked.clone());

        let executions: Vec<String> = (0..rng.between(1, 6)).map(|i| format!("x{i}")).collect();
        for id in &executions {
            control.create("Flat", None, Some(id)).await.expect("create");
        }
        hooked.hook.0.lock().expect("calls").clear(); // the Starts' publishes
        let mut targets = executions.clone();
        targets.push("nobody".to_string()); // send does not need the execution to exist
        let mut drawn = Vec::new();
        let mut events = Vec::new();
        for i in 0..rng.between(1, 40) {
            let target = rng.pick(&targets).clone();
            let what = match rng.below(10) {
                0 => Drawn::Misfit,
                1 => Drawn::Start,
                2 => Drawn::TooLarge,
                _ => Drawn::Go,
            };
            let mut event = match what {
                Drawn::Go => Event::new("Go"),
                Drawn::Misfit => {
                    let mut data = stm_core::Map::new();
                    data.insert("receipt".into(), json!(5));
                    Event::with_data("PaymentOk", data)
                }
                Drawn::Start => Event::new("Start"),
                Drawn::TooLarge => {
                    let mut data = stm_core::Map::new();
                    data.insert("blob".into(), json!("x".repeat(1100 * 1024)));
                    Event::with_data("Go", data)
                }
            };
            event.id = format!("e{i}");
            // an execution that does not exist has no machine to check the data against:
            // its event goes out as it is
            let what = if what == Drawn::Misfit && target == "nobody" {
                Drawn::Go
            } else {
                what
            };
            drawn.push(what);
            events.push((target, event));
        }
        let faulted = round % 2 == 1;
        if faulted {
            strict.fault_entries(&queue_name, 100.0, seed ^ round);
        }
        let answers = control.send_batch(&events).await;
        strict.fault_entries(&queue_name, 0.0, seed);
        injected += strict.entry_faults(&queue_name).injected(SQS_FAILED_ENTRY);
        assert_eq!(answers.len(), events.len(), "one answer per event");

        // each answer against what was drawn, and the order rule per execution
        let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut stopped: BTreeMap<&str, bool> = BTreeMap::new();
        for (i, answer) in answers.iter().enumerate() {
            let (target, event) = &events[i];
            let held = stopped.get(target.as_str()).copied().unwrap_or(false);
            match (drawn[i], answer) {
                (Drawn::Misfit, Err(e)) => {
                    assert!(
                        e.to_string().contains("'receipt' must be string"),
                        "event {i}: {e}"
                    )
                }
                (Drawn::Start, Err(e @ ControlError::StartRefused)) => {
                    assert!(e.to_string().contains("create"), "{e}")
                }
                (Drawn::TooLarge, Err(e)) => {
                    assert!(e.to_string().contains("SQS takes at most"), "event {i}: {e}")
                }
                (Drawn::Go, Ok(())) => {
                    assert!(
                        !held,
                        "event {i} to {target} sent after an earlier one of it was not"
                    );
                    expected.entry(target.clone()).or_default().push(event.id.clone());
                }
                (Drawn::Go, Err(ControlError::Refused { .. })) => {
                    assert!(faulted, "event {i} refused without a fault: {answer:?}");
                    assert!(!held, "event {i}: sent after its execution was held back");
                    stopped.insert(target, true);
                }
                (Drawn::Go, Err(e @ ControlError::HeldBack { .. })) => {
                    assert!(held, "event {i} held back with nothing refused before it");
                    assert!(e.to_string().contains(target.as_str()), "{e}");
                }
                (what, answer) => panic!("event {i} ({what:?} to {target}): {answer:?}"),
            }
        }
        let refused = answers
            .iter()
            .filter(|a| matches!(a, Err(ControlError::Refused { .. })))
            .count();
        faults_seen += refused;

        // fault-free, the requests are as few as ten to a batch and one per execution per
        // request allow
        if !faulted {
            let sent = hooked.hook.0.lock().expect("calls").clone();
            let mut per_execution: BTreeMap<&str, usize> = BTreeMap::new();
            for (i, answer) in answers.iter().enumerate() {
                if answer.is_ok() {
                    *per_execution.entry(events[i].0.as_str()).or_default() += 1;
                }
            }
            let waves = per_execution.values().copied().max().unwrap_or(0);
            let calls_with_messages = sent.iter().filter(|c| !c.is_empty()).count();
            assert_eq!(calls_with_messages, waves, "one publish per wave: {sent:?}");
            for call in &sent {
                let mut seen = call.clone();
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), call.len(), "an execution twice in one call: {call:?}");
            }
        }

        // what a consumer receives, execution by execution (the Starts aside)
        let got: BTreeMap<String, Vec<String>> = consume_by_group(sqs.as_ref())
            .await
            .into_iter()
            .map(|(group, bodies)| {
                let ids: Vec<String> = bodies
                    .iter()
                    .filter(|b| b["kind"] != "Start")
                    .map(event_id)
                    .collect();
                (group, ids)
            })
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        assert_eq!(
            got, expected,
            "round {round}: each event answered Ok once, in its execution's order, and no other"
        );
    }
    assert!(
        faults_seen > 0 && injected > 0,
        "no entry was ever refused ({injected} injected): the hold-back was not walked"
    );
    stm_testkit::assert_no_access_denied();
}

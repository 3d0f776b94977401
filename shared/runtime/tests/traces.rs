//! One trace across the functions, exported as OTLP/JSON to a collector of the test's own
//! (`stm_testkit::otlp`, an HTTP listener that keeps what it is posted), over DynamoDB and SQS FIFO (moto, the
//! strict layer): the client's send is the root; each record's handling is a span whose
//! parent is the span that sent its message, with its load, step, commit and publish
//! under it; the children a fan-out spawned are handled under the parent's span that
//! published their spawn intents, and the join's records under each child's. A record
//! redelivered after the worker died between its commit and its flush is in the same
//! trace, under the same send.
//!
//! The same holds when the relay publishes the rows instead of the inline flush (each row
//! carries its commit's trace context; the relay's span of the row sits beside the record
//! it causes, under the same commit), and for a timer's `Timeout`, which the sweeper sends
//! in the trace of the commit that armed the timer, its `fire` span beside the record.
//!
//! The same spans reach X-Ray's daemon (a UDP listener of the test's own,
//! `stm_testkit::xray`) as segment documents: one per span, with the same ids and parents,
//! in X-Ray's form of the same trace id.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::hooked_store::{HookedStore, StoreHook};
use common::Stack;
use serde_json::{json, Value};
use stm_runtime::queue::SqsQueue;
use stm_runtime::telemetry::export::ExportHandle;
use stm_runtime::telemetry::otlp::{self, Endpoint};
use stm_runtime::telemetry::xray;
use stm_store::{StoreError, Written};
use stm_testkit::otlp::{attribute, Collector};
use tracing_subscriber::layer::SubscriberExt;

/// Dies once, armed: after the next commit made durable, before its flush (the worker
/// never learns its write landed, and the record is redelivered).
#[derive(Default)]
struct DiesAfterCommit(AtomicBool);

#[async_trait::async_trait]
impl StoreHook for DiesAfterCommit {
    fn committed(&self, _written: &Written) -> Result<(), StoreError> {
        if self.0.swap(false, Ordering::SeqCst) {
            return Err(StoreError::retryable("the worker died after its commit"));
        }
        Ok(())
    }
}

/// A stack over moto whose spans go to a collector of its own while it lives (on this
/// thread), and whose store dies once after a commit when its hook is armed.
struct Traced {
    collector: Collector,
    exporter: ExportHandle,
    /// The X-Ray daemon the same spans go to, every trace sent (a ratio of 1).
    daemon: stm_testkit::xray::Daemon,
    xray: ExportHandle,
    hook: Arc<DiesAfterCommit>,
    stack: Stack,
    _subscriber: tracing::subscriber::DefaultGuard,
}

async fn traced(tag: &str) -> Traced {
    let collector = Collector::start();
    let (layer, exporter) = otlp::layer(Endpoint::base(&collector.url).expect("an http URL"), "stm-test");
    let daemon = stm_testkit::xray::Daemon::start();
    let settings = xray::Daemon {
        address: daemon.address.parse().expect("host:port"),
        ratio: 1.0,
    };
    let (segments, xray) = xray::layer(&settings, "stm-test").expect("a UDP socket");
    let subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(layer.and(segments)));
    let parts = common::moto_parts(tag, 1, 50).await;
    let hook = Arc::new(DiesAfterCommit::default());
    let store = Arc::new(HookedStore::new(parts.store.clone(), ArcHook(hook.clone())));
    let queue = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    Traced {
        collector,
        exporter,
        daemon,
        xray,
        hook,
        stack: Stack::new(store, queue),
        _subscriber: subscriber,
    }
}

#[tokio::test]
async fn a_fan_out_is_one_trace_from_the_send_to_the_join() {
    fan_out_in_one_trace("traces", true).await;
}

/// The relay publishes every row (no inline flush): each message still continues the
/// trace of the commit that wrote its row, which the row carries.
#[tokio::test]
async fn rows_the_relay_publishes_continue_their_commit_s_trace() {
    fan_out_in_one_trace("traces_relay", false).await;
}

/// The fan-out of three, its spans checked; with `inline_flush`, the worker dies once
/// between the root's first commit and its flush, so that record is redelivered.
async fn fan_out_in_one_trace(tag: &str, inline_flush: bool) {
    let Traced {
        collector,
        exporter: handle,
        hook,
        mut stack,
        _subscriber,
        ..
    } = traced(tag).await;
    stack.worker.settings.inline_flush = inline_flush;
    let root = "fan-1";
    stack
        .control
        .create(
            "FanOut",
            Some(common::object(json!({"recipients": ["a", "b", "c"]}))),
            Some(root),
        )
        .await
        .expect("created");
    // the root's Start commits its three spawn intents, and the worker dies before it
    // publishes them: its record comes back
    hook.0.store(inline_flush, Ordering::SeqCst);
    stack.drain().await;
    assert_eq!(stack.load(root).await.active_path.as_deref(), Some("AllSent"));

    handle.flush(Duration::from_secs(5));
    let spans = collector.spans_when(Duration::from_secs(10), |spans| {
        let joined = spans
            .values()
            .filter(|s| s["name"] == "record" && attribute(s, "execution_id") == Some(root))
            .count();
        joined >= 4 + usize::from(inline_flush)
    });
    assert_eq!(handle.dropped(), 0);
    assert_eq!(handle.failed_requests(), 0);
    assert_eq!(collector.refused(), Vec::<String>::new());

    // one trace, rooted at the client's send
    let sends: Vec<&Value> = spans.values().filter(|s| s["name"] == "send").collect();
    assert_eq!(sends.len(), 1, "{sends:#?}");
    let send = sends[0];
    assert!(send.get("parentSpanId").is_none(), "the send is the root: {send}");
    let trace = send["traceId"].as_str().expect("traceId");
    let outside: Vec<&Value> = spans.values().filter(|s| s["traceId"] != trace).collect();
    assert!(outside.is_empty(), "spans outside the send's trace: {outside:#?}");
    let parent_of = |s: &Value| s["parentSpanId"].as_str().map(str::to_string);
    // who sent a record's message: its parent, the commit's record, whether the inline
    // flush or the relay published it
    let relays: BTreeMap<&str, &Value> = spans
        .values()
        .filter(|s| s["name"] == "relay")
        .map(|s| (s["spanId"].as_str().expect("id"), s))
        .collect();
    let sender_of = parent_of;
    // the relay publishes only what the inline flush did not (with it on, nothing here)
    assert_eq!(relays.is_empty(), inline_flush, "{relays:#?}");
    let records_of = |id: &str| -> Vec<&Value> {
        spans
            .values()
            .filter(|s| s["name"] == "record" && attribute(s, "execution_id") == Some(id))
            .collect()
    };

    // the root's Start, twice: its first delivery (died after the commit) and its
    // redelivery, both under the send
    let root_records = records_of(root);
    let starts: Vec<&&Value> = root_records
        .iter()
        .filter(|s| parent_of(s).as_deref() == send["spanId"].as_str())
        .collect();
    let mut counts: Vec<&str> = starts
        .iter()
        .filter_map(|s| attribute(s, "receive_count"))
        .collect();
    counts.sort_unstable();
    let deliveries: &[&str] = if inline_flush { &["1", "2"] } else { &["1"] };
    assert_eq!(counts, deliveries, "the Start's deliveries: {root_records:#?}");

    // each child under the root record whose commit wrote its spawn intent (or, after the
    // crash, that published it), and each child's end reported to the root under that
    // child's span: the join
    let children: Vec<String> = stack.load(root).await.children.keys().cloned().collect();
    assert_eq!(children.len(), 3);
    let start_ids: Vec<String> = starts
        .iter()
        .map(|s| s["spanId"].as_str().expect("id").to_string())
        .collect();
    for child in &children {
        let records = records_of(child);
        assert!(!records.is_empty(), "no span for child {child}");
        for record in &records {
            assert!(
                sender_of(record).is_some_and(|p| start_ids.contains(&p)),
                "child {child}'s record is not under the root's Start: {record}"
            );
        }
        let child_ids: Vec<String> = records
            .iter()
            .map(|s| s["spanId"].as_str().expect("id").to_string())
            .collect();
        let reported = root_records
            .iter()
            .filter(|s| sender_of(s).is_some_and(|p| child_ids.contains(&p)))
            .count();
        assert_eq!(
            reported, 1,
            "child {child}'s end reaches the root once, under its span"
        );
    }

    // each record that stepped has its load, step, commit (and publish when it sent
    // anything) under it
    let by_parent: HashMap<String, Vec<&Value>> = spans.values().fold(HashMap::new(), |mut acc, s| {
        if let Some(p) = parent_of(s) {
            acc.entry(p).or_default().push(s);
        }
        acc
    });
    let names = |id: &str| -> Vec<String> {
        let mut names: Vec<String> = by_parent
            .get(id)
            .into_iter()
            .flatten()
            .filter(|s| s["name"] != "record")
            .map(|s| s["name"].as_str().unwrap_or_default().to_string())
            .collect();
        names.sort();
        names
    };
    let known = ["burst", "commit", "load", "publish", "relay", "step"];
    for record in spans.values().filter(|s| s["name"] == "record") {
        let inner = names(record["spanId"].as_str().expect("id"));
        assert!(inner.iter().all(|n| known.contains(&n.as_str())), "{inner:?}");
    }
    // a child's record creates it (no load), steps its start to its end, and publishes
    // the end to its parent (or the relay does, in a span of its own under the record)
    let child_work: &[&str] = if inline_flush {
        &["commit", "publish", "step"]
    } else {
        &["commit", "relay", "step"]
    };
    for child in &children {
        for record in records_of(child) {
            assert_eq!(names(record["spanId"].as_str().expect("id")), child_work);
        }
    }
    let first = starts
        .iter()
        .find(|s| attribute(s, "receive_count") == Some("1"))
        .expect("the first delivery");
    let first_work: &[&str] = if inline_flush {
        &["commit", "load", "step"]
    } else {
        // and the relay's three spans, one per spawn row it published
        &["commit", "load", "relay", "relay", "relay", "step"]
    };
    assert_eq!(names(first["spanId"].as_str().expect("id")), first_work);
    let commit = by_parent[first["spanId"].as_str().expect("id")]
        .iter()
        .find(|s| s["name"] == "commit")
        .expect("its commit");
    assert_eq!(attribute(commit, "spawns"), Some("3"), "{commit}");
}

/// The hook behind an `Arc`, so the test can arm it after the stack is built.
struct ArcHook(Arc<DiesAfterCommit>);

#[async_trait::async_trait]
impl StoreHook for ArcHook {
    fn committed(&self, written: &Written) -> Result<(), StoreError> {
        self.0.committed(written)
    }
}

/// A timer's `Timeout`, sent by the sweeper, continues the trace of the commit that armed
/// the timer: the timer item carries its context, read with the sweeper's check of it.
#[tokio::test]
async fn a_timeout_continues_the_trace_that_armed_its_timer() {
    let Traced {
        collector,
        exporter: handle,
        stack,
        _subscriber,
        ..
    } = traced("traces_timer").await;
    let id = "timed-1";
    stack
        .control
        .create("Timed", None, Some(id))
        .await
        .expect("created");
    stack.drain().await;
    assert_eq!(stack.load(id).await.active_path.as_deref(), Some("Waiting"));
    // `timeout 2`: due once the clock passes it; the drain's sweep fires it
    stack.clock.advance(3.0);
    stack.drain().await;
    assert_eq!(stack.load(id).await.active_path.as_deref(), Some("Expired"));

    handle.flush(Duration::from_secs(5));
    let spans = collector.spans_when(Duration::from_secs(10), |spans| {
        spans.values().filter(|s| s["name"] == "record").count() >= 2
    });
    let send = spans.values().find(|s| s["name"] == "send").expect("the send");
    let trace = send["traceId"].as_str().expect("traceId");
    let outside: Vec<&Value> = spans.values().filter(|s| s["traceId"] != trace).collect();
    assert!(outside.is_empty(), "spans outside the send's trace: {outside:#?}");
    let records: Vec<&Value> = spans.values().filter(|s| s["name"] == "record").collect();
    assert_eq!(records.len(), 2, "the Start and the Timeout: {records:#?}");
    let start = records
        .iter()
        .find(|s| s["parentSpanId"] == send["spanId"])
        .expect("the Start's record under the send");
    let timeout = records
        .iter()
        .find(|s| s["spanId"] != start["spanId"])
        .expect("the Timeout's record");
    // the sweeper's span under the record whose commit armed the timer, and the
    // Timeout's record beside it, under the same record
    let fire = spans
        .values()
        .find(|s| s["name"] == "fire")
        .expect("the sweeper's span");
    assert_eq!(fire["parentSpanId"], start["spanId"], "{fire}");
    assert_eq!(attribute(fire, "path"), Some("Waiting"), "{fire}");
    assert_eq!(
        timeout["parentSpanId"], start["spanId"],
        "the Timeout under the record that armed its timer"
    );
    // its step span says the transition it took
    let step = spans
        .values()
        .find(|s| s["name"] == "step" && s["parentSpanId"] == timeout["spanId"])
        .expect("the Timeout's step");
    assert_eq!(
        ["event_kind", "from", "to"].map(|k| attribute(step, k)),
        [Some("Timeout"), Some("Waiting"), Some("Expired")],
        "{step}"
    );
}

/// Each child waits on a timer: its `Timeout` comes from the sweeper.
const WAITING_FAN: &str = r#"
machine Waiter {
  carry item
  initial Waiting
  state Waiting { timeout 1 }
  final Done success
  from Waiting to Done on Timeout
}
machine Fan {
  context { items: any = [] }
  initial Going
  state Going {
    invoke Waiter for item in items
    with { item: item }
  }
  final AllDone success
  final SomeFailed failed
  from Going join all to AllDone else to SomeFailed
}
"#;

/// The issue's acceptance in one trace: a fan-out of three children, each on a timer the
/// sweeper fires, the root's first record redelivered after the worker died between its
/// commit and its flush, the rows published by the relay (no inline flush), and the join.
#[tokio::test]
async fn a_fan_out_on_timers_with_a_redelivery_is_one_trace() {
    let Traced {
        collector,
        exporter: handle,
        daemon,
        xray,
        hook,
        stack,
        _subscriber,
    } = traced("traces_all").await;
    let mut stack = stack.redeploy(common::definitions_from(WAITING_FAN));
    // the relay publishes what the commits wrote: its spans in the trace too
    stack.worker.settings.inline_flush = false;
    let root = "fan-t";
    stack
        .control
        .create(
            "Fan",
            Some(common::object(json!({"items": ["a", "b", "c"]}))),
            Some(root),
        )
        .await
        .expect("created");
    hook.0.store(true, Ordering::SeqCst);
    stack.drain().await;
    stack.clock.advance(2.0);
    stack.drain().await;
    assert_eq!(stack.load(root).await.active_path.as_deref(), Some("AllDone"));

    handle.flush(Duration::from_secs(5));
    let spans = collector.spans_when(Duration::from_secs(10), |spans| {
        spans.values().filter(|s| s["name"] == "record").count() >= 11
    });
    assert_eq!(collector.refused(), Vec::<String>::new());
    let send = spans.values().find(|s| s["name"] == "send").expect("the send");
    assert!(send.get("parentSpanId").is_none(), "the send is the root: {send}");
    let outside: Vec<&Value> = spans
        .values()
        .filter(|s| s["traceId"] != send["traceId"])
        .collect();
    assert!(outside.is_empty(), "spans outside the send's trace: {outside:#?}");
    let named = |name: &str| -> Vec<&Value> { spans.values().filter(|s| s["name"] == name).collect() };
    let of = |id: &str| -> Vec<&Value> {
        named("record")
            .into_iter()
            .filter(|s| attribute(s, "execution_id") == Some(id))
            .collect()
    };
    let under = |parent: &Value| -> Vec<&Value> {
        spans
            .values()
            .filter(|s| s["parentSpanId"] == parent["spanId"])
            .collect()
    };
    // the root's Start: delivered, died after its commit, redelivered; both under the send
    let starts: Vec<&Value> = of(root)
        .into_iter()
        .filter(|s| s["parentSpanId"] == send["spanId"])
        .collect();
    let mut counts: Vec<&str> = starts
        .iter()
        .filter_map(|s| attribute(s, "receive_count"))
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, ["1", "2"], "{starts:#?}");
    let children: Vec<String> = stack.load(root).await.children.keys().cloned().collect();
    assert_eq!(children.len(), 3);
    for child in &children {
        // created under one of the Start's records; its step armed the timer
        let records = of(child);
        assert_eq!(
            records.len(),
            2,
            "child {child}: its spawn and its Timeout: {records:#?}"
        );
        let spawned = records
            .iter()
            .find(|r| starts.iter().any(|s| s["spanId"] == r["parentSpanId"]))
            .unwrap_or_else(|| panic!("child {child} is not under the root's Start: {records:#?}"));
        // the sweeper's fire span under the record that armed the timer, and the Timeout's
        // record beside it, under the same record
        let fires: Vec<&Value> = under(spawned)
            .into_iter()
            .filter(|s| s["name"] == "fire")
            .collect();
        assert_eq!(fires.len(), 1, "child {child}: {:#?}", under(spawned));
        assert_eq!(attribute(fires[0], "execution_id"), Some(child.as_str()));
        let timeout = records
            .iter()
            .find(|r| r["parentSpanId"] == spawned["spanId"])
            .unwrap_or_else(|| panic!("child {child}'s Timeout is not under the record that armed it"));
        // the join: the child's end reaches the root under the Timeout's record
        let joined: Vec<&Value> = under(timeout)
            .into_iter()
            .filter(|s| s["name"] == "record" && attribute(s, "execution_id") == Some(root))
            .collect();
        assert_eq!(
            joined.len(),
            1,
            "child {child}'s end under its Timeout: {:#?}",
            under(timeout)
        );
    }
    // the relay's spans: each under the record whose commit wrote the row it published
    // (the children's ends, and the spawn rows the redelivery did not publish itself)
    let relays = named("relay");
    assert!(
        relays.len() >= 3,
        "the relay published the children's ends: {relays:#?}"
    );
    let records: Vec<&Value> = named("record");
    for relay in &relays {
        assert!(
            records.iter().any(|r| r["spanId"] == relay["parentSpanId"]),
            "a relay span not under a record's commit: {relay}"
        );
    }
    same_in_xray(&spans, &daemon, &xray);
}

/// X-Ray's daemon received each span of `spans` as a segment document: the same id and
/// parent, X-Ray's form of the same trace id; a segment named after the function when its
/// parent is another process's (the client's send, a record, the relay's and the
/// sweeper's spans), an independent subsegment of its own name when it is inside one.
fn same_in_xray(spans: &BTreeMap<String, Value>, daemon: &stm_testkit::xray::Daemon, xray: &ExportHandle) {
    xray.flush(Duration::from_secs(5));
    let documents = daemon.documents_when(Duration::from_secs(10), |docs| docs.len() >= spans.len());
    assert_eq!(daemon.refused(), Vec::<String>::new());
    assert_eq!((xray.dropped(), xray.failed_requests()), (0, 0));
    let inside = ["load", "step", "commit", "publish", "burst"];
    for (id, span) in spans {
        let doc = documents
            .get(id)
            .unwrap_or_else(|| panic!("no segment for {span}"));
        let trace = span["traceId"].as_str().expect("traceId");
        assert_eq!(doc["trace_id"], format!("1-{}-{}", &trace[..8], &trace[8..]));
        assert_eq!(doc.get("parent_id"), span.get("parentSpanId"), "{doc} for {span}");
        let name = span["name"].as_str().expect("name");
        if inside.contains(&name) {
            assert_eq!((&doc["type"], &doc["name"]), (&json!("subsegment"), &json!(name)));
        } else {
            assert_eq!(doc.get("type"), None, "{doc}");
            assert_eq!(
                (&doc["name"], &doc["annotations"]["span"]),
                (&json!("stm-test"), &json!(name))
            );
        }
        let (start, end) = (doc["start_time"].as_f64(), doc["end_time"].as_f64());
        assert!(start.zip(end).is_some_and(|(s, e)| s > 1.7e9 && s <= e), "{doc}");
    }
}

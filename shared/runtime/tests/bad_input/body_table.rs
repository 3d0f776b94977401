//! The catalogue of bad SQS bodies: per case the record, the exact outcome, the one
//! execution it may change and what the log must say about it.

use serde_json::{json, Value};
use stm_core::Status;
use stm_runtime::queue::SPAWN_KIND;
use stm_runtime::worker::{Handled, Record};

use crate::common::object;
use crate::support::record;

#[derive(Debug)]
pub(crate) enum Expect {
    /// Reported failed as poison; the text holds every needle.
    Poison(Vec<&'static str>),
    /// Reported failed as an error (redelivered, then dead-lettered); the text holds every
    /// needle.
    Error(Vec<&'static str>),
    /// Acknowledged with exactly this outcome.
    Handled(Handled),
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) record: Record,
    pub(crate) expect: Expect,
    /// The one execution this record may legitimately change.
    pub(crate) touches: Option<&'static str>,
    /// What the log must say about it.
    pub(crate) logged: &'static [&'static str],
}

pub(crate) fn case(
    name: &'static str,
    body: &str,
    group: Option<&str>,
    kind: Option<&str>,
    expect: Expect,
) -> Case {
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

pub(crate) fn cases() -> Vec<Case> {
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

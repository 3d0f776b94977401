//! Unit tests of the validator on hand-built definitions: rules the `.stm` language
//! can't reach, the `Finding` API and its `Display`.

use indexmap::IndexMap;
use stm_core::definition::CmpOp;
use stm_core::definition::{
    ActionRef, EventFilter, EventType, FieldSpec, FieldType, Pos, Predicate, Selector, Source, Timeout,
    Transition,
};
use stm_core::validate::{has_errors, validate, Finding, Severity};
use stm_core::{Definition, Node, NodeId, NodeKind, Value};

fn leaf(defn: &mut Definition, parent: NodeId, name: &str) -> NodeId {
    let path = match defn.path(parent) {
        "" => name.to_string(),
        p => format!("{p}.{name}"),
    };
    defn.add_node(parent, Node::new(name, path, NodeKind::Leaf))
}

fn on(kind: &str) -> Option<EventFilter> {
    Some(EventFilter {
        kinds: vec![kind.to_string()],
        predicate: None,
    })
}

fn to(source: NodeId, target: NodeId, event_filter: Option<EventFilter>) -> Transition {
    Transition {
        source,
        target: Some(target),
        event_filter,
        selector: None,
        choice: None,
        assignments: Vec::new(),
        pos: None,
        event_pos: Vec::new(),
    }
}

/// `A --Go--> Done(success)`, events declared.
fn simple() -> (Definition, NodeId, NodeId) {
    let mut d = Definition::new("M");
    let root = d.root;
    let a = leaf(&mut d, root, "A");
    let done = leaf(&mut d, root, "Done");
    d.node_mut(done).outcome = Some("success".into());
    d.node_mut(root).start_state = Some("A".into());
    d.events.insert(
        "Go".into(),
        EventType {
            name: "Go".into(),
            fields: IndexMap::new(),
        },
    );
    d.node_mut(root).transitions.push(to(a, done, on("Go")));
    (d, a, done)
}

fn codes(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.code.as_str()).collect()
}

#[test]
fn a_clean_machine_has_no_findings() {
    let (d, _, _) = simple();
    let findings = validate(&d);
    assert!(findings.is_empty(), "{findings:?}");
    assert!(!has_errors(&findings));
}

#[test]
fn display_is_harels_text_with_a_location_prefix() {
    let (mut d, a, _) = simple();
    d.source_file = Some("m.stm".into());
    d.node_mut(a).pos = Some(Pos { line: 4, column: 3 });
    let root = d.root;
    d.node_mut(root).transitions[0].event_filter = on("Gone");
    d.node_mut(root).transitions[0].pos = Some(Pos { line: 9, column: 3 });
    d.node_mut(a).timeout = Some(Timeout::Seconds(5.0));
    let findings = validate(&d);
    assert_eq!(codes(&findings), ["timeout_unhandled", "unknown_event"]);
    let timeout = &findings[0];
    assert_eq!(timeout.severity, Severity::Warning);
    assert_eq!((timeout.line, timeout.column), (Some(4), Some(3)));
    assert_eq!(
        timeout.to_string(),
        "m.stm:4:3: [warning] timeout_unhandled at A: timeout is armed but no `on: Timeout` transition handles \
         it (guaranteed no-op on fire)"
    );
    // a transition finding is located at the transition, the path is its scope (the root)
    let unknown = &findings[1];
    assert_eq!(unknown.path.as_deref(), Some(""));
    assert_eq!(
        unknown.to_string(),
        "m.stm:9:3: [error] unknown_event at <root>: transition references undeclared event 'Gone'"
    );
    assert_eq!(
        unknown.harel_text(),
        "[error] unknown_event at <root>: transition references undeclared event 'Gone'"
    );
    assert!(has_errors(&findings));
    // no location known: the bare harel text
    d.source_file = None;
    d.node_mut(root).transitions[0].pos = None;
    assert_eq!(validate(&d)[1].to_string(), unknown.harel_text());
}

#[test]
fn findings_serialize_for_json_output() {
    let (mut d, _, done) = simple();
    d.node_mut(done).outcome = None;
    let f = &validate(&d)[0];
    let json = serde_json::to_value(f).expect("serialize");
    assert_eq!(json["severity"], "error");
    assert_eq!(json["code"], "terminal_missing_outcome");
    assert_eq!(json["path"], "Done");
}

#[test]
fn a_selector_with_an_empty_mapper_is_malformed() {
    let (mut d, a, _) = simple();
    let root = d.root;
    d.node_mut(root).transitions.push(Transition {
        source: a,
        target: None,
        event_filter: None,
        selector: Some(Selector {
            action: ActionRef {
                function: "pkg.pick".into(),
                inputs: Default::default(),
            },
            mapper: IndexMap::new(),
            default: Some("Done".into()),
            enum_values: None,
        }),
        choice: None,
        assignments: Vec::new(),
        pos: None,
        event_pos: Vec::new(),
    });
    let findings = validate(&d);
    assert_eq!(codes(&findings), ["selector_malformed"]);
    assert_eq!(
        findings[0].message,
        "selector needs an action and a non-empty mapper"
    );
}

#[test]
fn selector_enum_values_compare_as_python_str() {
    // harel keeps `returns { 1, true }` as ["1", "True"]
    let (mut d, a, _) = simple();
    let root = d.root;
    let mut mapper = IndexMap::new();
    mapper.insert("1".to_string(), "Done".to_string());
    mapper.insert("2".to_string(), "Done".to_string());
    d.node_mut(root).transitions.push(Transition {
        source: a,
        target: None,
        event_filter: on("Go"),
        selector: Some(Selector {
            action: ActionRef {
                function: "pick".into(),
                inputs: Default::default(),
            },
            mapper,
            default: None,
            enum_values: Some(vec![Value::from(1), Value::Bool(true)]),
        }),
        choice: None,
        assignments: Vec::new(),
        pos: None,
        event_pos: Vec::new(),
    });
    let messages: Vec<String> = validate(&d).into_iter().map(|f| f.message).collect();
    assert_eq!(
        messages,
        [
            "selector branches ['2'] are not in the declared result set ['1', 'True']",
            "selector does not cover ['True'] and has no `else`",
        ]
    );
}

#[test]
fn timeout_shapes() {
    let (mut d, a, _) = simple();
    let root = d.root;
    d.node_mut(root).transitions.push(to(a, a, on("Timeout")));
    for (timeout, expected) in [
        (
            Timeout::Seconds(0.0),
            Some("timeout must be a positive int, got 0"),
        ),
        (
            Timeout::Seconds(-3.0),
            Some("timeout must be a positive int, got -3"),
        ),
        (
            Timeout::Seconds(1.5),
            Some("timeout must be a positive int, got 1.5"),
        ),
        (Timeout::Seconds(10.0), None),
        (
            Timeout::ContextKey(String::new()),
            Some("dynamic timeout must be {context: <key>}"),
        ),
        (Timeout::ContextKey("wait".into()), None),
    ] {
        d.node_mut(a).timeout = Some(timeout.clone());
        let messages: Vec<String> = validate(&d).into_iter().map(|f| f.message).collect();
        assert_eq!(messages, expected.into_iter().collect::<Vec<_>>(), "{timeout:?}");
    }
}

#[test]
fn ttl_zero_is_an_error() {
    let (mut d, _, _) = simple();
    d.ttl = Some(0);
    let findings = validate(&d);
    assert_eq!(codes(&findings), ["ttl_not_positive"]);
    assert_eq!(
        findings[0].harel_text(),
        "[error] ttl_not_positive at <root>: `ttl` must be positive, got 0"
    );
    d.ttl = Some(30);
    assert!(validate(&d).is_empty());
}

#[test]
fn unknown_event_fields_come_in_first_appearance_order() {
    // harel iterates a Python set here (order varies per run); ours is deterministic
    let (mut d, _, _) = simple();
    let mut fields = IndexMap::new();
    fields.insert(
        "n".to_string(),
        FieldSpec {
            ty: FieldType::Int,
            required: true,
            default: None,
        },
    );
    d.events.insert(
        "Go".into(),
        EventType {
            name: "Go".into(),
            fields,
        },
    );
    let leaf = |field: &str| Predicate::Leaf {
        source: Source::Event,
        field: field.into(),
        op: CmpOp::Eq,
        value: Value::from(1),
        value_ref: None,
    };
    let root = d.root;
    d.node_mut(root).transitions[0].event_filter = Some(EventFilter {
        kinds: vec!["Go".into()],
        predicate: Some(Predicate::All(vec![
            leaf("zeta"),
            leaf("n"),
            leaf("alpha"),
            leaf("zeta"),
        ])),
    });
    let messages: Vec<String> = validate(&d).into_iter().map(|f| f.message).collect();
    assert_eq!(
        messages,
        [
            "event 'Go' has no field 'zeta'",
            "event 'Go' has no field 'alpha'"
        ]
    );
}

#[test]
fn composites_need_a_resolvable_initial() {
    let (mut d, a, _) = simple();
    d.node_mut(a).kind = NodeKind::Composite;
    let inner = leaf(&mut d, a, "Inner");
    d.node_mut(inner).outcome = Some("ok".into());
    let findings = validate(&d);
    assert_eq!(codes(&findings), ["missing_initial", "unreachable"]);
    assert_eq!(findings[1].path.as_deref(), Some("A.Inner"));
    d.node_mut(a).start_state = Some("Nope".into());
    assert_eq!(codes(&validate(&d)), ["initial_unresolved", "unreachable"]);
    d.node_mut(a).start_state = Some("Inner".into());
    assert!(validate(&d).is_empty());
}

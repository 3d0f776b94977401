//! Unit tests of the Mermaid renderer on hand-built definitions.

use indexmap::IndexMap;
use stm_core::definition::{ActionRef, Selector, Timeout, Transition};
use stm_core::render::mermaid;
use stm_core::{Definition, Node, NodeKind};

#[test]
fn a_minimal_machine() {
    let mut d = Definition::new("M");
    let root = d.root;
    let a = d.add_node(root, Node::new("A", "A", NodeKind::Leaf));
    let b = d.add_node(root, Node::new("B b", "B b", NodeKind::Leaf));
    d.node_mut(root).start_state = Some("A".into());
    d.node_mut(a).timeout = Some(Timeout::Seconds(2.5));
    d.node_mut(b).outcome = Some("success".into());
    d.node_mut(root).transitions.push(Transition {
        source: a,
        target: Some(b),
        event_filter: None,
        selector: None,
        choice: None,
        assignments: Vec::new(),
        pos: None,
        event_pos: Vec::new(),
    });
    assert_eq!(
        mermaid(&d),
        "stateDiagram-v2\n[*] --> A\nA : timeout#58; 2.5\nstate \"B b\" as B_b\nB_b : outcome#58; success\nA --> B_b\n\
         B_b --> [*]"
    );
}

#[test]
fn unresolved_references_are_left_out_instead_of_failing() {
    // harel asserts on these; we draw what resolves
    let mut d = Definition::new("M");
    let root = d.root;
    let a = d.add_node(root, Node::new("A", "A", NodeKind::Leaf));
    d.node_mut(root).start_state = Some("Nope".into());
    let mut mapper = IndexMap::new();
    mapper.insert("x".to_string(), "Ghost".to_string());
    mapper.insert("y".to_string(), "A".to_string());
    d.node_mut(root).transitions.push(Transition {
        source: a,
        target: None,
        event_filter: None,
        selector: Some(Selector {
            action: ActionRef {
                function: "pkg.mod.pick".into(),
                inputs: Default::default(),
            },
            mapper,
            default: Some("Ghost".into()),
            enum_values: None,
        }),
        choice: None,
        assignments: Vec::new(),
        pos: None,
        event_pos: Vec::new(),
    });
    assert_eq!(
        mermaid(&d),
        "stateDiagram-v2\nstate A__pick <<choice>>\nA --> A__pick\nA__pick --> A : pick=y"
    );
}

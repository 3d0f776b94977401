//! The transitions as a list of arrows (from, to, event, guard), in the words the diagrams
//! use: what the web console draws beside a machine's states.

use super::label::{guard_text, kind_text, predicate_label};
use super::walk::{Edge, Scope};
use crate::definition::{Definition, NodeId};

/// One transition, or one branch of a `choose`, as the console draws it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Arrow {
    /// The source state's path.
    pub from: String,
    /// The target state's path.
    pub to: String,
    /// The event kinds it takes (`PaymentOk`, `A|B`); `None`: automatic.
    pub event: Option<String>,
    /// The guard as the diagrams write it; `else` for a `choose`'s default branch.
    pub guard: Option<String>,
}

/// Every transition of `defn` with a known target, in declaration order: a `choose`
/// gives one arrow per branch (its guard joined to the event's); a selector, whose
/// target is decided at run time, gives none.
///
/// ```
/// let defn = stm_core::dsl::load_definition_str(
///     "event Go { n: int }\nmachine M {\n  initial A\n  state A {}\n  state B {}\n  final C success\n  \
///      from A to B on Go where n > 1\n  from B choose on Go {\n    when n > 5 to C\n    else to A\n  }\n}\n",
///     None,
///     None,
/// )
/// .expect("parses");
/// let arrows = stm_core::render::arrows(&defn);
/// let text: Vec<String> = arrows
///     .iter()
///     .map(|a| format!("{} -> {} {:?} {:?}", a.from, a.to, a.event, a.guard))
///     .collect();
/// assert_eq!(
///     text,
///     [
///         r#"A -> B Some("Go") Some("n > 1")"#,
///         r#"B -> C Some("Go") Some("n > 5")"#,
///         r#"B -> A Some("Go") Some("else")"#,
///     ]
/// );
/// ```
pub fn arrows(defn: &Definition) -> Vec<Arrow> {
    let mut out = Vec::new();
    for id in (0..defn.nodes.len()).map(NodeId) {
        for (source, edge) in Scope::at(defn, id).edges() {
            let from = source.full_path.clone();
            match edge {
                Edge::To { target, filter, .. } => out.push(Arrow {
                    from,
                    to: target.full_path.clone(),
                    event: filter.map(kind_text),
                    guard: filter.and_then(guard_text),
                }),
                Edge::Choose {
                    filter,
                    branches,
                    default,
                    ..
                } => {
                    let event = filter.map(kind_text);
                    let event_guard = filter.and_then(guard_text);
                    let both = |branch: String| match &event_guard {
                        Some(g) => format!("{g} and {branch}"),
                        None => branch,
                    };
                    let guarded = branches
                        .iter()
                        .map(|b| (b.target, predicate_label(b.guard)))
                        .chain(default.map(|(target, _)| (target, "else".to_string())));
                    for (target, guard) in guarded {
                        out.push(Arrow {
                            from: from.clone(),
                            to: target.full_path.clone(),
                            event: event.clone(),
                            guard: Some(both(guard)),
                        });
                    }
                }
                // decided at run time: no arrow to draw
                Edge::Select { .. } => {}
            }
        }
    }
    out
}

//! The transitions as a list of arrows (from, to, event, guard), in the words the diagrams
//! use: what the web console draws beside a machine's states.

use super::label::{guard_text, kind_text, predicate_label};
use crate::Definition;

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
    for node in &defn.nodes {
        for t in &node.transitions {
            let from = defn.path(t.source).to_string();
            let event = t.event_filter.as_ref().map(kind_text);
            let event_guard = t.event_filter.as_ref().and_then(guard_text);
            if let Some(target) = t.target {
                out.push(Arrow {
                    from,
                    to: defn.path(target).to_string(),
                    event,
                    guard: event_guard,
                });
                continue;
            }
            let Some(choice) = &t.choice else { continue };
            let both = |branch: String| match &event_guard {
                Some(g) => format!("{g} and {branch}"),
                None => branch,
            };
            for (guard, target) in &choice.branches {
                out.push(Arrow {
                    from: from.clone(),
                    to: defn.path(*target).to_string(),
                    event: event.clone(),
                    guard: Some(both(predicate_label(guard))),
                });
            }
            if let Some(target) = choice.default {
                out.push(Arrow {
                    from: from.clone(),
                    to: defn.path(target).to_string(),
                    event: event.clone(),
                    guard: Some(both("else".to_string())),
                });
            }
        }
    }
    out
}

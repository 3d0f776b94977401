//! `stm trace ID --spans`: the span tree of an execution and its children, drawn from
//! their trace steps alone, without a collector. Each step the worker records carries the
//! span that handled its record (`span`, a W3C `traceparent`) and the span that sent the
//! record's message (`parent_span`), which is another step's span: the inline flush, the
//! relay and the sweeper all send a row's or a timer's message as the commit that wrote
//! it. A parent that is no recorded step is the client's send (or a commit that records no
//! step, a broadcast to regions, as harel records none); its steps are drawn under it as
//! a root of the trace.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use stm_core::Map;
use stm_runtime::driver::{PARENT_SPAN_KEY, SPAN_KEY};
use stm_runtime::telemetry::TraceContext;

/// One recorded step with its place in a trace.
struct Node<'a> {
    execution_id: &'a str,
    step: &'a Map,
    trace_id: u128,
    span_id: String,
    parent: Option<String>,
    timestamp: f64,
}

/// The lines of the span trees of `steps` (each an execution's id and one of its trace
/// steps), a tree per trace, its roots in time order; and how many steps had no span
/// (recorded by a worker before spans were, or by harel).
pub(crate) fn span_tree(steps: &[(String, Map)]) -> (Vec<String>, usize) {
    let mut unplaced = 0;
    let mut nodes: Vec<Node<'_>> = Vec::new();
    for (execution_id, step) in steps {
        let ctx = step
            .get(SPAN_KEY)
            .and_then(Value::as_str)
            .and_then(TraceContext::from_traceparent);
        let Some(ctx) = ctx else {
            unplaced += 1;
            continue;
        };
        nodes.push(Node {
            execution_id,
            step,
            trace_id: ctx.trace_id,
            span_id: format!("{:016x}", ctx.span_id),
            parent: step
                .get(PARENT_SPAN_KEY)
                .and_then(Value::as_str)
                .map(str::to_string),
            timestamp: step.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0),
        });
    }
    nodes.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    let mut traces: BTreeMap<u128, Vec<&Node<'_>>> = BTreeMap::new();
    for node in &nodes {
        traces.entry(node.trace_id).or_default().push(node);
    }
    // traces in the order they started
    let mut order: Vec<(&u128, &Vec<&Node<'_>>)> = traces.iter().collect();
    order.sort_by(|a, b| a.1[0].timestamp.total_cmp(&b.1[0].timestamp));
    let mut lines = Vec::new();
    for (trace_id, members) in order {
        let first = members[0].timestamp;
        lines.push(format!("trace {trace_id:032x}"));
        let recorded: HashMap<&str, &Node<'_>> = members.iter().map(|n| (n.span_id.as_str(), *n)).collect();
        let mut children: HashMap<&str, Vec<&Node<'_>>> = HashMap::new();
        // roots grouped by their unrecorded parent (the send), in order of first step
        let mut roots: Vec<(Option<&str>, Vec<&Node<'_>>)> = Vec::new();
        for node in members {
            match node.parent.as_deref() {
                Some(parent) if recorded.contains_key(parent) && parent != node.span_id => {
                    children.entry(parent).or_default().push(node);
                }
                parent => match roots.iter_mut().find(|(p, _)| *p == parent) {
                    Some((_, group)) => group.push(node),
                    None => roots.push((parent, vec![node])),
                },
            }
        }
        for (parent, group) in roots {
            let head = match parent {
                Some(id) => format!(
                    "  {id}  sent by a span with no step here (the client's send, or a commit that \
                     records none: a broadcast to regions)"
                ),
                None => "  (no sender: the message carried no trace context)".to_string(),
            };
            lines.push(head);
            let mut frontier: Vec<(&Node<'_>, usize)> = group.iter().rev().map(|n| (*n, 2)).collect();
            while let Some((node, depth)) = frontier.pop() {
                lines.push(node_line(node, depth, first));
                if let Some(under) = children.get(node.span_id.as_str()) {
                    frontier.extend(under.iter().rev().map(|n| (*n, depth + 1)));
                }
            }
        }
    }
    (lines, unplaced)
}

/// `{indent}{span id}  {execution}  {event}  {from} -> {to}  +{seconds}s`
fn node_line(node: &Node<'_>, depth: usize, first: f64) -> String {
    let text = |key: &str| match node.step.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ => "-".to_string(),
    };
    format!(
        "{}{}  {}  {}  {} -> {}  +{:.3}s",
        "  ".repeat(depth),
        node.span_id,
        node.execution_id,
        text("event_kind"),
        text("from_path"),
        text("to_path"),
        node.timestamp - first
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(kind: &str, span: &str, parent: Option<&str>, at: f64) -> Map {
        let mut step = crate::inspect::map(json!({
            "event_kind": kind, "from_path": "A", "to_path": "B", "timestamp": at,
            "span": format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01"),
        }));
        if let Some(parent) = parent {
            step.insert("parent_span".into(), json!(parent));
        }
        step
    }

    #[test]
    fn steps_nest_under_the_steps_that_sent_them() {
        let (send, start, child, timeout, join) = (
            "1111111111111111",
            "2222222222222222",
            "3333333333333333",
            "4444444444444444",
            "5555555555555555",
        );
        let steps = vec![
            ("p".to_string(), step("Start", start, Some(send), 1.0)),
            ("p".to_string(), step("ChildDone", join, Some(timeout), 4.0)),
            ("p.c".to_string(), step("Start", child, Some(start), 2.0)),
            ("p.c".to_string(), step("Timeout", timeout, Some(child), 3.0)),
            (
                "p".to_string(),
                crate::inspect::map(json!({"event_kind": "Old", "timestamp": 0.5})),
            ),
        ];
        let (lines, unplaced) = span_tree(&steps);
        assert_eq!(unplaced, 1);
        assert_eq!(
            lines,
            [
                "trace 4bf92f3577b34da6a3ce929d0e0e4736".to_string(),
                format!(
                    "  {send}  sent by a span with no step here (the client's send, or a commit \
                     that records none: a broadcast to regions)"
                ),
                format!("    {start}  p  Start  A -> B  +0.000s"),
                format!("      {child}  p.c  Start  A -> B  +1.000s"),
                format!("        {timeout}  p.c  Timeout  A -> B  +2.000s"),
                format!("          {join}  p  ChildDone  A -> B  +3.000s"),
            ]
        );
    }

    #[test]
    fn a_step_without_a_sender_roots_its_own_trace_line() {
        let steps = vec![("x".to_string(), step("Go", "2222222222222222", None, 1.0))];
        let (lines, _) = span_tree(&steps);
        assert_eq!(lines[1], "  (no sender: the message carried no trace context)");
        assert_eq!(lines[2], "    2222222222222222  x  Go  A -> B  +0.000s");
    }
}

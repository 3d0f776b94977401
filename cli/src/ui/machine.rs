//! A machine's pages in the console: its statechart with how many executions are in each
//! state now (a heat map, from the store's state index) and its transitions as arrows
//! with their event and guard; and, from a state's count, the executions in that state.

use std::collections::BTreeMap;
use std::fmt::Write;

use stm_core::render::Arrow;
use stm_core::{Definition, Execution};
use stm_store::InState;

use super::diagram::{draw_heat, Heat};
use super::markup::{esc, execution_href, in_state_href, machine_href, page};
use crate::inspect::state_tree;

/// Machine `defn`: its chart with each state's count in `found`, and its arrows.
pub(crate) fn machine_page(defn: &Definition, found: &[InState], arrows: &[Arrow]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for entry in found {
        *counts.entry(entry.path.clone()).or_default() += 1;
    }
    let mut body = format!(
        r#"<h1>{} <span class="muted">{} execution{} in its states now</span></h1>"#,
        esc(&defn.id),
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    let href = |path: &str| in_state_href(&defn.id, path);
    // nothing is active on a machine's page: it shows where all its executions are
    match state_tree(defn, "", &std::collections::BTreeSet::new()) {
        Some(tree) => body.push_str(&draw_heat(
            &tree,
            &Heat {
                counts: &counts,
                href: &href,
            },
        )),
        None => body.push_str(r#"<p class="error">This machine has no root state to draw.</p>"#),
    }
    body.push_str(r#"<h2>Transitions</h2><table class="arrows"><thead><tr><th>From</th><th></th><th>To</th><th>On</th><th>Guard</th></tr></thead><tbody>"#);
    for arrow in arrows {
        let _ = write!(
            body,
            r#"<tr data-from="{}" data-to="{}" data-label="{}"><td>{}</td><td class="arrow">&#10230;</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&arrow.from),
            esc(&arrow.to),
            esc(&edge_label(arrow)),
            esc(&arrow.from),
            esc(&arrow.to),
            arrow
                .event
                .as_deref()
                .map_or_else(|| r#"<span class="muted">(automatic)</span>"#.to_string(), esc),
            arrow.guard.as_deref().map_or_else(
                || r#"<span class="muted">-</span>"#.to_string(),
                |g| format!("<code>{}</code>", esc(g))
            ),
        );
    }
    body.push_str("</tbody></table>");
    page(&defn.id, &body)
}

/// What the chart writes on an arrow: its event (none: automatic) and its guard.
fn edge_label(arrow: &Arrow) -> String {
    let event = arrow.event.as_deref().unwrap_or("(automatic)");
    match &arrow.guard {
        Some(guard) => format!("{event} [{guard}]"),
        None => event.to_string(),
    }
}

/// The executions of machine `name` in state `path`, oldest in it first.
pub(crate) fn in_state_page(name: &str, path: &str, rows: &[(InState, Execution)], now: f64) -> String {
    let mut body = format!(
        r#"<h1>{} in <code>{}</code> <span class="muted">{} now</span></h1><p><a href="{}">back to {}</a></p>"#,
        esc(name),
        esc(path),
        rows.len(),
        esc(&machine_href(name)),
        esc(name)
    );
    if rows.is_empty() {
        body.push_str(r#"<p class="muted" id="empty">No execution is in this state.</p>"#);
    } else {
        body.push_str(r#"<table class="executions"><thead><tr><th>Id</th><th>Status</th><th>In the state for</th></tr></thead><tbody>"#);
        for (entry, exe) in rows {
            let _ = write!(
                body,
                r#"<tr><td><a class="execution" href="{}">{}</a></td><td>{}</td><td>{}</td></tr>"#,
                esc(&execution_href(&exe.id)),
                esc(&exe.id),
                esc(exe.status.as_str()),
                esc(&crate::ops::duration_text(now - entry.since))
            );
        }
        body.push_str("</tbody></table>");
    }
    page(&format!("{name} in {path}"), &body)
}

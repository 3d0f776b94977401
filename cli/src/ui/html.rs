//! The console's list and execution pages as HTML strings, built from `ui/markup.rs`:
//! everything that comes from the store or the request goes through [`esc`] (text and
//! attributes) or [`url_part`] (links), so an execution's id, context or event data is
//! never markup.

use std::fmt::Write;

use serde_json::Value;
use stm_core::Status;
use stm_store::ExecutionPage;

use super::diagram::draw;
use super::markup::{esc, execution_href, machine_href, page, url_part};
use crate::inspect::{ChildNode, ContextChange, ExecutionView, TraceStep};

/// The list page's filters, as the query string carries them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListFilter {
    pub status: Option<Status>,
    pub definition: Option<String>,
    pub roots: bool,
    pub cursor: Option<String>,
}

impl ListFilter {
    /// The query string of these filters with `cursor` (empty: the first page).
    fn query(&self, cursor: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some(status) = self.status {
            parts.push(format!("status={}", status.as_str()));
        }
        if let Some(definition) = &self.definition {
            parts.push(format!("definition={}", url_part(definition)));
        }
        if self.roots {
            parts.push("roots=on".to_string());
        }
        if let Some(cursor) = cursor {
            parts.push(format!("cursor={}", url_part(cursor)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        }
    }
}

fn opt(value: Option<&str>) -> String {
    value.map_or_else(|| "-".to_string(), esc)
}

fn status_badge(status: Status) -> String {
    format!(
        r#"<span class="badge {}">{}</span>"#,
        status.as_str().to_ascii_lowercase(),
        status.as_str()
    )
}

/// The executions list: where new executions go (each routed machine's alias, when there
/// is one), the filter form, one page of the table, the next page's link.
pub(crate) fn list_page(filter: &ListFilter, page_of: &ExecutionPage, routing: &[String]) -> String {
    let mut body = String::new();
    if !routing.is_empty() {
        body.push_str(r#"<section class="routing"><h2>Routing</h2><pre>"#);
        body.push_str(&esc(&routing.join("\n")));
        body.push_str("</pre></section>");
    }
    body.push_str(r#"<h1>Executions</h1><form class="filters" method="get" action="/">"#);
    body.push_str(r#"<label>Status <select name="status"><option value="">any</option>"#);
    for status in Status::ALL {
        let selected = if filter.status == Some(status) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, r#"<option{selected}>{}</option>"#, status.as_str());
    }
    let _ = write!(
        body,
        r#"</select></label> <label>Definition <input name="definition" value="{}" placeholder="any machine"></label>
<label><input type="checkbox" name="roots"{}> roots only</label>
<button type="submit">Filter</button> <button type="button" data-refresh>Refresh</button></form>"#,
        esc(filter.definition.as_deref().unwrap_or_default()),
        if filter.roots { " checked" } else { "" }
    );
    body.push_str(r#"<div id="live" data-auto-refresh="5">"#);
    if page_of.items.is_empty() {
        body.push_str(r#"<p class="muted" id="empty">No executions match.</p>"#);
    } else {
        body.push_str(
            r#"<table class="executions"><thead><tr><th>Id</th><th>Definition</th><th>Status</th><th>Active</th><th>Outcome</th><th>Version</th><th>Parent</th></tr></thead><tbody>"#,
        );
        for item in &page_of.items {
            let _ = write!(
                body,
                r#"<tr><td><a class="execution" href="{}">{}</a></td><td><a class="machine" href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>v{}{}</td><td>{}</td></tr>"#,
                esc(&execution_href(&item.id)),
                esc(&item.id),
                esc(&machine_href(&item.definition_id)),
                esc(&item.definition_id),
                status_badge(item.status),
                opt(item.active_path.as_deref()),
                opt(item.outcome.as_deref()),
                item.version,
                item.definition_version
                    .map(|v| format!(r#" <span class="muted">@{}</span>"#, esc(&v.to_string())))
                    .unwrap_or_default(),
                item.parent_id
                    .as_deref()
                    .map(|p| format!(r#"<a href="{}">{}</a>"#, esc(&execution_href(p)), esc(p)))
                    .unwrap_or_else(|| "-".to_string()),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str(r#"<p class="pager">"#);
    if filter.cursor.is_some() {
        let _ = write!(body, r#"<a href="/{}">First page</a> "#, esc(&filter.query(None)));
    }
    if let Some(next) = &page_of.next_cursor {
        let _ = write!(
            body,
            r#"<a id="next-page" href="/{}">Next page</a>"#,
            esc(&filter.query(Some(next)))
        );
    }
    body.push_str("</p></div>");
    page("Executions", &body)
}

/// A control's result, shown once above the execution after the redirect.
#[derive(Debug, Clone)]
pub(crate) enum Flash {
    Done(String),
    Refused(String),
}

/// One execution: its header, controls, statechart, context, trace and children.
pub(crate) fn execution_page(view: &ExecutionView, flash: Option<&Flash>) -> String {
    let exe = &view.execution;
    let mut body = String::new();
    match flash {
        Some(Flash::Done(text)) => {
            let _ = write!(body, r#"<p class="flash done" id="flash">{}</p>"#, esc(text));
        }
        Some(Flash::Refused(text)) => {
            let _ = write!(body, r#"<p class="flash error" id="flash">{}</p>"#, esc(text));
        }
        None => {}
    }
    let _ = write!(
        body,
        r#"<h1>{} <span class="muted">{}</span></h1>"#,
        esc(&exe.id),
        esc(&exe.definition_id)
    );
    body.push_str(&controls(view));
    body.push_str(r#"<div id="live" data-auto-refresh="3">"#);
    let _ = write!(
        body,
        r#"<dl class="facts">
<dt>Status</dt><dd><span id="status" class="badge {}">{}</span></dd>
<dt>Active</dt><dd id="active-path">{}</dd>
<dt>Outcome</dt><dd id="outcome">{}</dd>
<dt>Record version</dt><dd id="version">v{} <span class="muted">(the item's compare-and-set version)</span></dd>
<dt>Definition version</dt><dd id="definition-version">{}</dd>
<dt>Parent</dt><dd>{}</dd>
<dt>Created</dt><dd>{}</dd><dt>Updated</dt><dd>{}</dd>
</dl>"#,
        exe.status.as_str().to_ascii_lowercase(),
        exe.status.as_str(),
        opt(exe.active_path.as_deref()),
        opt(exe.outcome.as_deref()),
        exe.version,
        exe.definition_version
            .map(|v| esc(&v.to_string()))
            .unwrap_or_else(
                || "unpinned <span class=\"muted\">(the current one steps it)</span>".to_string()
            ),
        exe.parent_id
            .as_deref()
            .map(|p| format!(r#"<a href="{}">{}</a>"#, esc(&execution_href(p)), esc(p)))
            .unwrap_or_else(|| "- <span class=\"muted\">(a root)</span>".to_string()),
        time(exe.created_at),
        time(exe.updated_at),
    );
    if let Some(error) = &exe.error {
        let _ = write!(
            body,
            r#"<p class="error" id="execution-error">{}</p>"#,
            esc(error)
        );
    }
    if !view.parked.is_empty() {
        let until = if exe.status == Status::Suspended {
            "it is resumed"
        } else {
            "its version is deployed"
        };
        let _ = write!(
            body,
            r#"<p class="warning">Parked until {until}: {}</p>"#,
            esc(&view.parked.join(", "))
        );
    }
    body.push_str("<h2>Statechart</h2>");
    match &view.diagram {
        Ok(tree) => body.push_str(&draw(tree)),
        Err(why) => {
            let _ = write!(
                body,
                r#"<p class="muted" id="no-diagram">Not drawn: {}</p>"#,
                esc(why)
            );
        }
    }
    body.push_str("<h2>Context</h2>");
    let _ = write!(
        body,
        r#"<pre class="context" id="context">{}</pre>"#,
        esc(&stm_core::pyjson::to_string_pretty(&Value::Object(
            exe.context.clone()
        )))
    );
    if !exe.deferred.is_empty() {
        let kinds: Vec<&str> = exe.deferred.iter().map(|e| e.kind.as_str()).collect();
        let _ = write!(body, r#"<p>Deferred events: {}</p>"#, esc(&kinds.join(", ")));
    }
    body.push_str("<h2>Children</h2>");
    if view.children.is_empty() {
        body.push_str(r#"<p class="muted">None.</p>"#);
    } else {
        body.push_str(r#"<ul class="tree" id="children">"#);
        children_tree(&view.children, &mut body);
        body.push_str("</ul>");
        if view.children_truncated {
            let _ = write!(
                body,
                r#"<p class="muted">The tree stops after {} descendants.</p>"#,
                crate::inspect::MAX_TREE_NODES
            );
        }
    }
    body.push_str("<h2>Trace</h2>");
    trace_table(&view.steps, &mut body);
    body.push_str("</div>");
    page(&exe.id, &body)
}

/// The forms of the commands that apply to the execution's status, each behind a
/// confirmation (`data-confirm`, asked by the built-in script).
fn controls(view: &ExecutionView) -> String {
    let exe = &view.execution;
    let action = esc(&format!("{}/control", execution_href(&exe.id)));
    let id = esc(&exe.id);
    let form = |command: &str, label: &str, question: &str, extra: &str| {
        format!(
            r#"<form method="post" action="{action}" data-confirm="{}"><input type="hidden" name="command" value="{command}">{extra}<button type="submit" id="{command}">{label}</button></form>"#,
            esc(question)
        )
    };
    let mut out = String::from(r#"<section class="controls" aria-label="controls">"#);
    if exe.status.is_finished() {
        let _ = write!(
            out,
            r#"<span class="muted">{} is {}: no control applies.</span>"#,
            id,
            exe.status.as_str()
        );
    }
    if exe.status == Status::Running {
        out.push_str(&form(
            "suspend",
            "Suspend",
            &format!("Suspend {}? Its events wait in the queue.", exe.id),
            "",
        ));
    }
    if exe.status == Status::Suspended {
        out.push_str(&form("resume", "Resume", &format!("Resume {}?", exe.id), ""));
    }
    if !exe.status.is_finished() && exe.status != Status::Cancelling {
        out.push_str(&form(
            "cancel",
            "Cancel",
            &format!(
                "Cancel {}? Cooperative where the active state models `on Cancel`, else forceful.",
                exe.id
            ),
            r#"<input name="reason" placeholder='reason, a JSON object: {"why": "..."}' size="28">"#,
        ));
    }
    if !exe.status.is_finished() {
        out.push_str(&form(
            "terminate",
            "Terminate",
            &format!("Terminate {}? It is CANCELLED now, no hooks run.", exe.id),
            "",
        ));
    }
    if exe.status == Status::Failed {
        let choice = if view.leaves.is_empty() {
            r#"<input name="at" placeholder="leaf path: Payment.Charging" required>"#.to_string()
        } else {
            let options: String = view
                .leaves
                .iter()
                .map(|leaf| format!("<option>{}</option>", esc(leaf)))
                .collect();
            format!(r#"<select name="at" aria-label="the leaf to resume at">{options}</select>"#)
        };
        out.push_str(&form(
            "redrive",
            "Redrive",
            &format!(
                "Redrive {} at the chosen leaf? Its context is kept, its error and history cleared.",
                exe.id
            ),
            &choice,
        ));
    }
    out.push_str("</section>");
    out
}

fn children_tree(children: &[ChildNode], out: &mut String) {
    for child in children {
        let kind = if child.submachine { "invoked" } else { "region" };
        let _ = write!(
            out,
            r#"<li><a href="{}">{}</a> <span class="muted">{kind} at {}</span> "#,
            esc(&execution_href(&child.id)),
            esc(&child.id),
            esc(&child.root_path)
        );
        match &child.record {
            Some(record) => {
                let _ = write!(
                    out,
                    r#"[{}] {} at {}"#,
                    esc(&record.definition_id),
                    status_badge(record.status),
                    opt(record.active_path.as_deref())
                );
            }
            None => out.push_str(r#"<span class="muted">(not loaded or not created yet)</span>"#),
        }
        if child.finished {
            let _ = write!(out, " finished, outcome {}", opt(child.outcome.as_deref()));
        }
        if !child.children.is_empty() {
            out.push_str("<ul>");
            children_tree(&child.children, out);
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
}

fn trace_table(steps: &[TraceStep], out: &mut String) {
    if steps.is_empty() {
        out.push_str(
            r#"<p class="muted" id="no-trace">No trace steps: the worker records them when it runs with STM_TRACE=true (<code>stm local</code> does by default).</p>"#,
        );
        return;
    }
    let first = steps.iter().find_map(|s| s.timestamp).unwrap_or(0.0);
    out.push_str(
        r#"<table class="trace" id="trace"><thead><tr><th>#</th><th>Time</th><th>Event</th><th>From &#8594; to</th><th>Actions</th><th>Context changes</th></tr></thead><tbody>"#,
    );
    for (at, step) in steps.iter().enumerate() {
        let data = if step.event_data.is_empty() {
            String::new()
        } else {
            format!(
                r#" <code>{}</code>"#,
                esc(&json(&Value::Object(step.event_data.clone())))
            )
        };
        let _ = write!(
            out,
            r#"<tr class="step{}" data-step="{at}"{}><td>{}</td><td title="{}">+{:.3} s</td><td><b>{}</b>{data}</td><td>{} &#8594; {}</td><td>{}</td><td>{}</td></tr>"#,
            if step.control { " control-step" } else { "" },
            if step.explained.is_some() {
                r#" title="Click: why this step did what it did""#
            } else {
                ""
            },
            step.index.map_or_else(|| "-".to_string(), |i| i.to_string()),
            time(step.timestamp),
            step.timestamp.map_or(0.0, |t| t - first),
            esc(&step.event),
            opt(step.from.as_deref()),
            opt(step.to.as_deref()),
            if step.actions.is_empty() {
                "-".to_string()
            } else {
                esc(&step.actions.join(", "))
            },
            changes(&step.changes),
        );
        // hidden until its step is clicked (console.js)
        if let Some(why) = &step.explained {
            let _ = write!(
                out,
                r#"<tr class="explain" data-explains="{at}" hidden><td colspan="6"><pre>{}</pre></td></tr>"#,
                esc(why)
            );
        }
    }
    out.push_str("</tbody></table>");
}

fn changes(changes: &[ContextChange]) -> String {
    if changes.is_empty() {
        return "-".to_string();
    }
    let lines: Vec<String> = changes
        .iter()
        .map(|change| match (&change.before, &change.after) {
            (None, Some(after)) => format!(
                r#"<span class="added">+ {} = {}</span>"#,
                esc(&change.key),
                esc(&json(after))
            ),
            (Some(before), None) => {
                format!(
                    r#"<span class="removed">- {} (was {})</span>"#,
                    esc(&change.key),
                    esc(&json(before))
                )
            }
            (Some(before), Some(after)) => format!(
                r#"<span class="changed">{}: {} &#8594; {}</span>"#,
                esc(&change.key),
                esc(&json(before)),
                esc(&json(after))
            ),
            (None, None) => String::new(),
        })
        .collect();
    lines.join("<br>")
}

fn json(value: &Value) -> String {
    stm_core::pyjson::dumps(value)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`, or `-`.
pub(crate) fn time(seconds: Option<f64>) -> String {
    let Some(seconds) = seconds.filter(|s| s.is_finite() && *s >= 0.0) else {
        return "-".to_string();
    };
    let millis = (seconds * 1000.0).round() as i64;
    let (days, in_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc() {
        assert_eq!(time(Some(0.0)), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(time(Some(1_796_183_999.5)), "2026-12-02 03:59:59.500 UTC");
        assert_eq!(time(None), "-");
        assert_eq!(time(Some(f64::NAN)), "-");
    }

    #[test]
    fn the_filters_survive_paging() {
        let filter = ListFilter {
            status: Some(Status::Running),
            definition: Some("Order & co".into()),
            roots: true,
            cursor: None,
        };
        assert_eq!(
            filter.query(Some("k=1")),
            "?status=RUNNING&definition=Order%20%26%20co&roots=on&cursor=k%3D1"
        );
        assert_eq!(ListFilter::default().query(None), "");
    }
}

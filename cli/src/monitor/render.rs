//! Drawing the monitor's state: the list, one execution (its header, statechart outline,
//! children tree and trace timeline), the confirmation and the status bar. Pure: it reads
//! an [`App`] and writes a frame.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;
use serde_json::Value;
use stm_core::Status;

use super::app::{App, Screen};
use crate::inspect::{BoxKind, ChildNode, ExecutionView, SourceView, StateBox, TraceStep};

/// The mark of an active state in the outline (and of nothing else).
pub(crate) const ACTIVE_MARK: &str = "●";

impl App {
    /// Draw the whole screen.
    pub(crate) fn render(&self, frame: &mut Frame) {
        let [body, bar] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(frame.area());
        match self.screen {
            Screen::List => self.render_list(frame, body),
            Screen::Detail => self.render_detail(frame, body),
        }
        self.render_bar(frame, bar);
        if let Some(action) = self.confirming {
            let id = self.target().unwrap_or_default();
            render_confirm(frame, &format!("{} {id}?", action.verb()));
        }
    }

    fn render_list(&self, frame: &mut Frame, area: Rect) {
        // where new executions go, above the list, when a machine is routed
        let area = if self.routing.is_empty() {
            area
        } else {
            let height = u16::try_from(self.routing.len() + 2).unwrap_or(u16::MAX);
            let [routing, rest] =
                Layout::vertical([Constraint::Length(height), Constraint::Min(1)]).areas(area);
            let lines: Vec<Line> = self.routing.iter().map(|l| Line::raw(l.clone())).collect();
            frame.render_widget(
                Paragraph::new(lines).block(Block::bordered().title(" routing ")),
                routing,
            );
            rest
        };
        let filter = self.filter.describe();
        let mut title = format!(" stm monitor: executions, page {}", self.previous_pages.len() + 1);
        if !filter.is_empty() {
            title.push_str(&format!(" [{filter}]"));
        }
        title.push(' ');
        let header = Row::new(["ID", "DEFINITION", "STATUS", "ACTIVE", "OUTCOME", "VER"])
            .style(Style::new().add_modifier(Modifier::BOLD));
        let rows = self.rows.iter().map(|row| {
            Row::new(vec![
                Span::raw(row.id.clone()),
                Span::raw(row.definition_id.clone()),
                Span::styled(row.status.as_str(), status_style(row.status)),
                Span::raw(row.active_path.clone().unwrap_or_else(|| "-".into())),
                Span::raw(row.outcome.clone().unwrap_or_else(|| "-".into())),
                Span::raw(row.version.to_string()),
            ])
        });
        let widths = [
            Constraint::Percentage(30),
            Constraint::Percentage(15),
            Constraint::Length(10),
            Constraint::Percentage(30),
            Constraint::Percentage(10),
            Constraint::Length(5),
        ];
        let table = Table::new(rows, widths)
            .header(header)
            .block(Block::bordered().title(title))
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .highlight_symbol("> ");
        let mut state = TableState::default().with_selected((!self.rows.is_empty()).then_some(self.selected));
        frame.render_stateful_widget(table, area, &mut state);
        if self.rows.is_empty() {
            let inner = Rect {
                y: area.y.saturating_add(2),
                height: 1.min(area.height.saturating_sub(3)),
                x: area.x.saturating_add(2),
                width: area.width.saturating_sub(4),
            };
            frame.render_widget(Paragraph::new("(no executions)"), inner);
        }
    }

    fn render_detail(&self, frame: &mut Frame, area: Rect) {
        let id = self.open_id.clone().unwrap_or_default();
        let Some(view) = &self.detail else {
            frame.render_widget(
                Paragraph::new("loading...").block(Block::bordered().title(format!(" {id} "))),
                area,
            );
            return;
        };
        let header = header_lines(view);
        let [top, rest] =
            Layout::vertical([Constraint::Length(header.len() as u16 + 2), Constraint::Min(3)]).areas(area);
        frame.render_widget(
            Paragraph::new(header).block(Block::bordered().title(format!(" {id} "))),
            top,
        );
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(rest);
        let [chart, children] =
            Layout::vertical([Constraint::Percentage(65), Constraint::Percentage(35)]).areas(left);
        let pane = match (&view.source, self.show_source) {
            (Some(source), true) => Paragraph::new(source_lines(source))
                .block(Block::bordered().title(format!(" {} (v: outline) ", source.file))),
            (None, true) => Paragraph::new("(the machine's .stm file is not readable here)")
                .block(Block::bordered().title(" source (v: outline) ")),
            (_, false) => {
                Paragraph::new(outline_lines(view)).block(Block::bordered().title(" statechart (v: source) "))
            }
        };
        frame.render_widget(pane, chart);
        frame.render_widget(
            Paragraph::new(children_lines(view)).block(Block::bordered().title(" children ")),
            children,
        );
        let trace = trace_lines(&view.steps, self.trace_scroll);
        frame.render_widget(
            Paragraph::new(trace)
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" trace ")),
            right,
        );
    }

    fn render_bar(&self, frame: &mut Frame, area: Rect) {
        let line = if let Some(text) = &self.typing {
            Line::from(vec![
                Span::styled("filter> ", Style::new().add_modifier(Modifier::BOLD)),
                Span::raw(text.clone()),
                Span::styled(
                    "   (status, machine, roots; Enter applies, Esc drops)",
                    Style::new().fg(Color::DarkGray),
                ),
            ])
        } else if let Some(message) = &self.message {
            Line::from(Span::styled(message.clone(), Style::new().fg(Color::Yellow)))
        } else {
            let keys = match self.screen {
                Screen::List => "Enter open  / filter  n/p page  r refresh  s suspend  R resume  c cancel  t terminate  q quit",
                Screen::Detail => "Esc back  j/k trace  v source  r refresh  s suspend  R resume  c cancel  t terminate  q quit",
            };
            Line::from(Span::styled(keys, Style::new().fg(Color::DarkGray)))
        };
        frame.render_widget(Paragraph::new(line), area);
    }
}

fn render_confirm(frame: &mut Frame, question: &str) {
    let full = frame.area();
    let width = (question.chars().count() as u16 + 8).clamp(30, full.width.max(1));
    let area = Rect {
        x: full.x + full.width.saturating_sub(width) / 2,
        y: full.y + full.height.saturating_sub(5) / 2,
        width,
        height: 5.min(full.height),
    };
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(question.to_string()),
            Line::from(""),
            Line::from("y: yes    n: no"),
        ])
        .centered()
        .block(Block::bordered().title(" confirm ")),
        area,
    );
}

fn status_style(status: Status) -> Style {
    let color = match status {
        Status::Running | Status::Pending => Color::Green,
        Status::Suspended => Color::Yellow,
        Status::Cancelling | Status::Cancelled => Color::Magenta,
        Status::Failed => Color::Red,
        Status::Done => Color::Blue,
    };
    Style::new().fg(color)
}

fn or_dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_string()
}

/// The execution's own fields.
fn header_lines(view: &ExecutionView) -> Vec<Line<'static>> {
    let exe = &view.execution;
    let mut machine = exe.definition_id.clone();
    if let Some(version) = exe.definition_version {
        machine.push_str(&format!(" @ {version}"));
    }
    let mut lines = vec![
        Line::from(vec![
            Span::raw("status "),
            Span::styled(
                exe.status.as_str(),
                status_style(exe.status).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "   at {}   outcome {}   v{}",
                or_dash(exe.active_path.as_deref()),
                or_dash(exe.outcome.as_deref()),
                exe.version
            )),
        ]),
        Line::from(format!(
            "machine {machine}   parent {}",
            or_dash(exe.parent_id.as_deref())
        )),
    ];
    if let Some(error) = &exe.error {
        lines.push(Line::styled(
            format!("error: {error}"),
            Style::new().fg(Color::Red),
        ));
    }
    if !exe.context.is_empty() {
        lines.push(Line::from(format!(
            "context {}",
            Value::Object(exe.context.clone())
        )));
    }
    lines
}

/// The source, from a few lines before the first active declaration, those lines marked.
pub(crate) fn source_lines(source: &SourceView) -> Vec<Line<'static>> {
    let first = source.lines.iter().position(|(_, marked)| *marked).unwrap_or(0);
    source
        .lines
        .iter()
        .skip(first.saturating_sub(3))
        .map(|(text, marked)| {
            if *marked {
                Line::from(Span::styled(
                    format!("{ACTIVE_MARK} {text}"),
                    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                ))
            } else {
                Line::from(format!("  {text}"))
            }
        })
        .collect()
}

/// The statechart as an indented outline, the active states marked.
pub(crate) fn outline_lines(view: &ExecutionView) -> Vec<Line<'static>> {
    match &view.diagram {
        Ok(root) => {
            let mut lines = Vec::new();
            outline(root, 0, &mut lines);
            lines
        }
        Err(why) => vec![Line::styled(why.clone(), Style::new().fg(Color::DarkGray))],
    }
}

fn outline(state: &StateBox, depth: usize, out: &mut Vec<Line<'static>>) {
    let mark = if state.active { ACTIVE_MARK } else { " " };
    let mut text = format!("{}{mark} {}", "  ".repeat(depth), state.name);
    if state.initial {
        text.push_str(" (initial)");
    }
    match state.kind {
        BoxKind::Leaf | BoxKind::Composite | BoxKind::Machine => {}
        kind => text.push_str(&format!("  [{}]", kind.as_str())),
    }
    if let Some(outcome) = &state.outcome {
        text.push_str(&format!(" -> {outcome}"));
    }
    if let Some(machine) = &state.invokes {
        text.push_str(&format!("  invokes {machine}"));
    }
    let style = if state.active {
        Style::new().fg(Color::Green).add_modifier(Modifier::BOLD)
    } else {
        Style::new()
    };
    out.push(Line::styled(text, style));
    for child in &state.children {
        outline(child, depth + 1, out);
    }
}

/// The children as a tree.
fn children_lines(view: &ExecutionView) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if view.children.is_empty() {
        lines.push(Line::styled("(none)", Style::new().fg(Color::DarkGray)));
    }
    for child in &view.children {
        child_tree(child, 0, &mut lines);
    }
    if view.children_truncated {
        lines.push(Line::from(format!(
            "... (the first {} shown)",
            crate::inspect::MAX_TREE_NODES
        )));
    }
    lines
}

fn child_tree(node: &ChildNode, depth: usize, out: &mut Vec<Line<'static>>) {
    let indent = "  ".repeat(depth);
    let how = if node.submachine { "invoked" } else { "region" };
    let line = match &node.record {
        Some(record) => Line::from(vec![
            Span::raw(format!("{indent}{} [{}] ", node.id, record.definition_id)),
            Span::styled(record.status.as_str(), status_style(record.status)),
            Span::raw(format!(" at {}  ({how})", or_dash(record.active_path.as_deref()))),
        ]),
        None => Line::from(format!(
            "{indent}{}  ({how}, no record yet)  finished {}  outcome {}",
            node.id,
            node.finished,
            or_dash(node.outcome.as_deref())
        )),
    };
    out.push(line);
    for child in &node.children {
        child_tree(child, depth + 1, out);
    }
}

/// The trace from step `skip` on: one line a step, then what it changed.
fn trace_lines(steps: &[TraceStep], skip: usize) -> Vec<Line<'static>> {
    if steps.is_empty() {
        return vec![Line::styled(
            "(no trace: the worker records one with STM_TRACE=true)",
            Style::new().fg(Color::DarkGray),
        )];
    }
    let first = steps.first().and_then(|s| s.timestamp).unwrap_or(0.0);
    let mut lines = Vec::new();
    for step in steps.iter().skip(skip) {
        let at = step.timestamp.unwrap_or(first) - first;
        let index = step.index.map_or_else(|| "-".to_string(), |i| i.to_string());
        let mut event = step.event.clone();
        if step.control {
            event = format!("[{event}]");
        }
        if !step.event_data.is_empty() {
            event.push_str(&format!(" {}", Value::Object(step.event_data.clone())));
        }
        lines.push(Line::from(vec![
            Span::styled(
                format!("#{index:<3} +{at:>7.3}s "),
                Style::new().fg(Color::DarkGray),
            ),
            Span::styled(event, Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "  {} → {}",
                or_dash(step.from.as_deref()),
                or_dash(step.to.as_deref())
            )),
        ]));
        if !step.actions.is_empty() {
            lines.push(Line::from(format!("      actions: {}", step.actions.join(", "))));
        }
        for change in &step.changes {
            let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "∅".to_string(), Value::to_string);
            lines.push(Line::styled(
                format!(
                    "      {}: {} → {}",
                    change.key,
                    show(&change.before),
                    show(&change.after)
                ),
                Style::new().fg(Color::Cyan),
            ));
        }
    }
    lines
}

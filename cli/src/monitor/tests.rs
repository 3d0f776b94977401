//! The monitor's state machine and drawing, driven by keys and fixture data and drawn on
//! ratatui's test backend.

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;
use stm_core::{Execution, Status};
use stm_store::{ExecutionPage, ExecutionSummary};

use super::app::{Action, App, Command, Filter, Key, Screen};
use crate::inspect::{self, ChildNode, ChildRecord, ExecutionView};

const ORDER: &str = r#"
event Submit { amount: float }
machine Order {
  initial Draft
  state Draft {}
  state Payment {
    initial Charging
    state Charging {}
  }
  final Shipped success
  from Draft to Payment on Submit
  from Payment to Shipped on Submit
}
"#;

fn summary(id: &str, status: Status, active: &str) -> ExecutionSummary {
    let mut exe = Execution::new(id, "Order");
    exe.status = status;
    exe.active_path = Some(active.to_string());
    ExecutionSummary::of(&exe)
}

fn listed() -> App {
    let mut app = App::new();
    app.list_loaded(ExecutionPage {
        items: vec![
            summary("o-1", Status::Running, "Payment.Charging"),
            summary("o-2", Status::Suspended, "Draft"),
        ],
        next_cursor: Some("page-2".into()),
    });
    app
}

/// o-1 in Payment.Charging, with a two-step trace and one region child.
fn view() -> ExecutionView {
    let defn =
        stm_core::dsl::load_definition_str(ORDER, Some("Order"), None).expect("the test machine compiles");
    let mut exe = Execution::new("o-1", "Order");
    exe.status = Status::Running;
    exe.active_path = Some("Payment.Charging".into());
    let active = inspect::active_set(["Payment.Charging"]);
    let raw = [
        json!({"index": 0, "event_kind": "Start", "to_path": "Draft", "context_out": {}, "timestamp": 1.0}),
        json!({"index": 1, "event_kind": "Submit", "event_data": {"amount": 42.5}, "from_path": "Draft",
               "to_path": "Payment.Charging", "context_out": {"amount": 42.5}, "timestamp": 2.5}),
    ];
    let raw: Vec<stm_core::Map> = raw.into_iter().filter_map(|v| v.as_object().cloned()).collect();
    ExecutionView {
        execution: exe,
        steps: inspect::trace_steps(&raw),
        children: vec![ChildNode {
            id: "o-1:Payment".into(),
            root_path: "Payment".into(),
            submachine: false,
            finished: false,
            outcome: None,
            record: Some(ChildRecord {
                definition_id: "Order".into(),
                status: Status::Running,
                active_path: Some("Payment.Charging".into()),
            }),
            children: Vec::new(),
        }],
        children_truncated: false,
        diagram: inspect::state_tree(&defn, "", &active).ok_or_else(|| "no root".to_string()),
        leaves: Vec::new(),
        // the declarations of Payment (line 6) and Charging (line 8) of ORDER
        source: Some(inspect::SourceView::new(
            "order.stm".into(),
            ORDER,
            &[6, 8].into_iter().collect(),
        )),
        parked: Vec::new(),
    }
}

fn opened() -> App {
    let mut app = listed();
    assert_eq!(app.on_key(Key::Enter), Some(Command::Open("o-1".into())));
    app.detail_loaded("o-1", Some(view()));
    app
}

/// The screen as text, one line a row.
fn draw(app: &App) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).expect("a test terminal");
    terminal.draw(|frame| app.render(frame)).expect("drawn");
    let buffer = terminal.backend().buffer();
    let width = usize::from(buffer.area.width);
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|cell| cell.symbol()).collect::<String>())
        .collect()
}

fn line_with<'a>(screen: &'a [String], needle: &str) -> &'a str {
    screen
        .iter()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no line has {needle:?}:\n{}", screen.join("\n")))
}

#[test]
fn the_list_shows_where_new_executions_go_above_it_when_a_machine_is_routed() {
    let mut app = listed();
    assert!(
        !draw(&app).iter().any(|l| l.contains(" routing ")),
        "no routing box without routes"
    );
    app.routing_loaded(vec![
        "Order (alias live): 2f25f4c713d54788 90%, 337c95559abed70b 10%".into(),
        "  canary 337c95559abed70b: 12 finished, 1 FAILED (8.3%) in the last 600 s".into(),
    ]);
    let screen = draw(&app);
    let title = screen
        .iter()
        .position(|l| l.contains(" routing "))
        .expect("the routing box");
    let route = screen
        .iter()
        .position(|l| l.contains("337c95559abed70b 10%"))
        .expect("the route");
    let tally = screen
        .iter()
        .position(|l| l.contains("1 FAILED (8.3%)"))
        .expect("the tally");
    let list = screen
        .iter()
        .position(|l| l.contains("stm monitor: executions"))
        .expect("the list");
    assert!(
        title < route && route < tally && tally < list,
        "{}",
        screen.join("\n")
    );
    assert!(
        line_with(&screen, "o-1").contains("RUNNING"),
        "the list is still drawn"
    );
}

#[test]
fn the_list_shows_each_execution_with_its_status() {
    let screen = draw(&listed());
    let first = line_with(&screen, "o-1");
    assert!(
        first.contains("RUNNING") && first.contains("Payment.Charging"),
        "{first}"
    );
    assert!(
        first.contains("> "),
        "the cursor starts on the first row: {first}"
    );
    assert!(line_with(&screen, "o-2").contains("SUSPENDED"));
    assert!(line_with(&screen, "ID").contains("STATUS"));
}

#[test]
fn the_detail_marks_the_active_states_and_shows_children_and_trace() {
    let app = opened();
    assert_eq!(app.screen, Screen::Detail);
    let screen = draw(&app);
    assert!(line_with(&screen, "status ").contains("RUNNING"));
    assert!(
        !line_with(&screen, "Draft (initial)").contains('●'),
        "Draft is not active"
    );
    assert!(line_with(&screen, "● Payment").contains("● Payment"));
    assert!(line_with(&screen, "● Charging").contains("(initial)"));
    assert!(!line_with(&screen, "Shipped").contains('●'));
    assert!(line_with(&screen, "o-1:Payment [Order]").contains("RUNNING"));
    assert!(line_with(&screen, "Submit").contains("Draft → Payment.Charging"));
    assert!(line_with(&screen, "amount: ∅ → 42.5").contains("amount"));
}

#[test]
fn a_control_key_asks_first_and_no_sends_nothing() {
    let mut app = opened();
    assert_eq!(app.on_key(Key::Char('s')), None);
    assert_eq!(app.confirming, Some(Action::Suspend));
    assert!(line_with(&draw(&app), "Suspend o-1?").contains("Suspend"));
    assert_eq!(app.on_key(Key::Char('n')), None);
    assert_eq!(app.confirming, None);
    assert_eq!(app.message.as_deref(), Some("Suspend not sent"));

    assert_eq!(app.on_key(Key::Char('s')), None);
    assert_eq!(
        app.on_key(Key::Char('y')),
        Some(Command::Control {
            id: "o-1".into(),
            action: Action::Suspend
        })
    );
    for (key, action) in [
        ('R', Action::Resume),
        ('c', Action::Cancel),
        ('t', Action::Terminate),
    ] {
        assert_eq!(app.on_key(Key::Char(key)), None);
        assert_eq!(
            app.on_key(Key::Char('y')),
            Some(Command::Control {
                id: "o-1".into(),
                action
            })
        );
    }
}

#[test]
fn a_control_key_in_the_list_acts_on_the_selected_row() {
    let mut app = listed();
    assert_eq!(app.on_key(Key::Down), None);
    assert_eq!(app.on_key(Key::Char('R')), None);
    assert_eq!(
        app.on_key(Key::Char('y')),
        Some(Command::Control {
            id: "o-2".into(),
            action: Action::Resume
        })
    );
}

#[test]
fn esc_goes_back_and_q_quits() {
    let mut app = opened();
    assert!(matches!(app.on_key(Key::Esc), Some(Command::List(_))));
    assert_eq!(app.screen, Screen::List);
    assert_eq!(app.on_key(Key::Char('q')), Some(Command::Quit));
    assert_eq!(app.on_key(Key::Interrupt), Some(Command::Quit));
}

#[test]
fn the_typed_filter_narrows_the_query_and_pages_follow_the_cursor() {
    let mut app = listed();
    assert_eq!(app.on_key(Key::Char('/')), None);
    for c in "suspended Order roots".chars() {
        assert_eq!(app.on_key(Key::Char(c)), None, "typing is not a command");
    }
    let Some(Command::List(query)) = app.on_key(Key::Enter) else {
        panic!("Enter applies the filter");
    };
    assert_eq!(query.status, Some(vec![Status::Suspended]));
    assert_eq!(query.definition_id.as_deref(), Some("Order"));
    assert!(query.roots_only && query.cursor.is_none());
    assert!(line_with(&draw(&app), "executions").contains("[SUSPENDED Order roots]"));

    app.list_loaded(ExecutionPage {
        items: vec![summary("o-2", Status::Suspended, "Draft")],
        next_cursor: Some("page-2".into()),
    });
    let Some(Command::List(next)) = app.on_key(Key::Char('n')) else {
        panic!("n loads the next page");
    };
    assert_eq!(next.cursor.as_deref(), Some("page-2"));
    let Some(Command::List(back)) = app.on_key(Key::Char('p')) else {
        panic!("p loads the previous page");
    };
    assert_eq!(back.cursor, None);
    assert_eq!(app.on_key(Key::Char('p')), None, "no page before the first");
}

#[test]
fn a_bad_filter_and_a_failed_call_show_one_line() {
    assert!(Filter::parse("Order Invoice").is_err());
    assert_eq!(Filter::parse("").map(|f| f.describe()), Ok(String::new()));
    let mut app = listed();
    app.failed(&anyhow::anyhow!("connection refused\nat 127.0.0.1:9").context("DynamoDB"));
    let screen = draw(&app);
    assert!(line_with(&screen, "DynamoDB: connection refused at 127.0.0.1:9").starts_with("DynamoDB"));
    // a refusal stays through a refresh; a failed load goes once a load works
    app.list_loaded(ExecutionPage::default());
    assert!(app.message.is_some(), "a refused control is still shown");
    app.load_failed(&anyhow::anyhow!("throttled"));
    assert_eq!(app.message.as_deref(), Some("throttled"));
    app.list_loaded(ExecutionPage::default());
    assert_eq!(app.message, None);
    assert!(line_with(&draw(&app), "(no executions)").contains("no executions"));
}

#[test]
fn v_shows_the_source_with_the_active_declarations_marked() {
    let mut app = opened();
    assert!(line_with(&draw(&app), "statechart (v: source)").contains("statechart"));
    assert_eq!(app.on_key(Key::Char('v')), None);
    let screen = draw(&app);
    assert!(line_with(&screen, "order.stm (v: outline)").contains("order.stm"));
    assert!(line_with(&screen, "state Payment {").contains("●   state Payment {"));
    assert!(line_with(&screen, "state Charging {}").contains("●"));
    assert!(!line_with(&screen, "state Draft {}").contains('●'));
    app.on_key(Key::Char('v'));
    assert!(
        line_with(&draw(&app), "● Charging").contains("(initial)"),
        "back to the outline"
    );
}

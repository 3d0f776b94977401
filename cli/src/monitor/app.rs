//! The monitor's state machine: what it shows and what a key does, with no IO. The loop
//! ([`super::run`]) feeds it keys and the store's answers and carries out the
//! [`Command`]s it returns; the tests drive it the same way.

use stm_core::Status;
use stm_store::{ExecutionPage, ExecutionSummary, ListQuery};

use crate::inspect::ExecutionView;

/// Executions per list page.
pub(crate) const PAGE_SIZE: usize = 100;

/// A key press, as the app understands it (the loop maps the terminal's events to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    /// Ctrl-C: quits from anywhere, even while typing a filter.
    Interrupt,
}

/// A control command the operator confirmed (what [`crate::ops::ControlCommand`] runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Suspend,
    Resume,
    Cancel,
    Terminate,
}

impl Action {
    /// The key that asks for it.
    fn of_key(c: char) -> Option<Action> {
        match c {
            's' => Some(Action::Suspend),
            'R' => Some(Action::Resume),
            'c' => Some(Action::Cancel),
            't' => Some(Action::Terminate),
            _ => None,
        }
    }

    /// Its name in the confirmation and the status bar.
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Action::Suspend => "Suspend",
            Action::Resume => "Resume",
            Action::Cancel => "Cancel",
            Action::Terminate => "Terminate",
        }
    }

    /// The control plane's command for it (a cancel from here carries no reason).
    pub(crate) fn command(self) -> crate::ops::ControlCommand {
        match self {
            Action::Suspend => crate::ops::ControlCommand::Suspend,
            Action::Resume => crate::ops::ControlCommand::Resume,
            Action::Cancel => crate::ops::ControlCommand::Cancel(None),
            Action::Terminate => crate::ops::ControlCommand::Terminate,
        }
    }
}

/// What the loop is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    Quit,
    /// Load a page of the list.
    List(ListQuery),
    /// Load one execution's view.
    Open(String),
    /// Run a confirmed control command, then reload the execution.
    Control {
        id: String,
        action: Action,
    },
}

/// Which screen is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Screen {
    #[default]
    List,
    Detail,
}

/// What the list is narrowed to (the store's own filters, as `stm list` has them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Filter {
    pub status: Option<Status>,
    pub definition: Option<String>,
    pub roots: bool,
}

impl Filter {
    /// Parse the typed filter: words separated by spaces, each `roots`, a status name
    /// (any case), or a machine's name; empty clears it.
    pub(crate) fn parse(text: &str) -> Result<Filter, String> {
        let mut filter = Filter::default();
        for word in text.split_whitespace() {
            if word.eq_ignore_ascii_case("roots") {
                filter.roots = true;
            } else if let Ok(status) = word.to_ascii_uppercase().parse::<Status>() {
                filter.status = Some(status);
            } else if let Some(name) = filter.definition.replace(word.to_string()) {
                return Err(format!(
                    "one machine at a time: {name:?} and {word:?} (a status is one of {})",
                    Status::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(filter)
    }

    /// The filter as it would be typed (shown in the list's title).
    pub(crate) fn describe(&self) -> String {
        let mut words = Vec::new();
        if let Some(status) = self.status {
            words.push(status.as_str().to_string());
        }
        if let Some(definition) = &self.definition {
            words.push(definition.clone());
        }
        if self.roots {
            words.push("roots".to_string());
        }
        words.join(" ")
    }
}

/// The monitor's whole state.
#[derive(Debug, Default)]
pub(crate) struct App {
    pub screen: Screen,
    pub filter: Filter,
    /// The filter being typed after `/` (None: not typing).
    pub typing: Option<String>,
    /// The list's current page.
    pub rows: Vec<ExecutionSummary>,
    pub selected: usize,
    /// The cursors of the pages before this one (the first page's is `None`).
    pub previous_pages: Vec<Option<String>>,
    /// This page's cursor.
    pub cursor: Option<String>,
    pub next_cursor: Option<String>,
    /// The execution open in the detail screen, and its latest view.
    pub open_id: Option<String>,
    pub detail: Option<ExecutionView>,
    /// How far the trace is scrolled (steps from the top).
    pub trace_scroll: usize,
    /// The statechart pane shows the `.stm` source instead of the outline (`v`).
    pub show_source: bool,
    /// The control command awaiting y/n.
    pub confirming: Option<Action>,
    /// The status bar: the last outcome or failure, one line.
    pub message: Option<String>,
    /// The message is a failed load: the next load that works clears it (an outcome or a
    /// refusal stays until the screen changes).
    pub load_failed: bool,
    /// Where new executions go: each routed machine's alias, as `crate::routing` words it
    /// (refreshed with the list; empty without routes).
    pub routing: Vec<String>,
}

impl App {
    /// A monitor on the list, with nothing loaded yet.
    pub(crate) fn new() -> App {
        App::default()
    }

    /// The query for the list's current page.
    pub(crate) fn list_query(&self) -> ListQuery {
        ListQuery {
            status: self.filter.status.map(|s| vec![s]),
            definition_id: self.filter.definition.clone(),
            roots_only: self.filter.roots,
            limit: PAGE_SIZE,
            cursor: self.cursor.clone(),
        }
    }

    /// What to load to refresh the screen that is up.
    pub(crate) fn refresh(&self) -> Command {
        match (self.screen, &self.open_id) {
            (Screen::Detail, Some(id)) => Command::Open(id.clone()),
            _ => Command::List(self.list_query()),
        }
    }

    /// A page of the list arrived.
    pub(crate) fn list_loaded(&mut self, page: ExecutionPage) {
        // keep the cursor on the same execution across refreshes when it is still there
        let kept = self.rows.get(self.selected).map(|row| row.id.clone());
        self.loaded();
        self.rows = page.items;
        self.next_cursor = page.next_cursor;
        self.selected = kept
            .and_then(|id| self.rows.iter().position(|row| row.id == id))
            .unwrap_or(self.selected)
            .min(self.rows.len().saturating_sub(1));
    }

    /// The routes arrived with the list.
    pub(crate) fn routing_loaded(&mut self, lines: Vec<String>) {
        self.routing = lines;
    }

    /// The open execution's view arrived (`None`: it is gone).
    pub(crate) fn detail_loaded(&mut self, id: &str, view: Option<ExecutionView>) {
        if self.open_id.as_deref() != Some(id) {
            return; // an answer for a screen already left
        }
        self.loaded();
        if view.is_none() {
            self.message = Some(format!("there is no execution {id:?}"));
        }
        self.detail = view;
    }

    /// A control command failed or was refused: one line in the status bar.
    pub(crate) fn failed(&mut self, error: &anyhow::Error) {
        let text = format!("{error:#}");
        self.message = Some(text.lines().collect::<Vec<_>>().join(" "));
        self.load_failed = false;
    }

    /// Loading the list or an execution failed: one line in the status bar, until a load
    /// works again.
    pub(crate) fn load_failed(&mut self, error: &anyhow::Error) {
        self.failed(error);
        self.load_failed = true;
    }

    fn loaded(&mut self) {
        if std::mem::take(&mut self.load_failed) {
            self.message = None;
        }
    }

    /// What a key does.
    pub(crate) fn on_key(&mut self, key: Key) -> Option<Command> {
        if key == Key::Interrupt {
            return Some(Command::Quit);
        }
        if let Some(text) = self.typing.as_mut() {
            return match key {
                Key::Char(c) => {
                    text.push(c);
                    None
                }
                Key::Backspace => {
                    text.pop();
                    None
                }
                Key::Esc => {
                    self.typing = None;
                    None
                }
                Key::Enter => {
                    let typed = self.typing.take().unwrap_or_default();
                    match Filter::parse(&typed) {
                        Ok(filter) => {
                            self.filter = filter;
                            self.cursor = None;
                            self.previous_pages.clear();
                            self.selected = 0;
                            self.message = None;
                            Some(Command::List(self.list_query()))
                        }
                        Err(why) => {
                            self.message = Some(why);
                            None
                        }
                    }
                }
                _ => None,
            };
        }
        if let Some(action) = self.confirming {
            return match key {
                Key::Char('y') | Key::Char('Y') => {
                    self.confirming = None;
                    let id = self.target()?;
                    Some(Command::Control { id, action })
                }
                // anything else is a no
                _ => {
                    self.confirming = None;
                    self.message = Some(format!("{} not sent", action.verb()));
                    None
                }
            };
        }
        match key {
            Key::Char('q') => return Some(Command::Quit),
            Key::Char('r') => return Some(self.refresh()),
            Key::Char(c) => {
                if let Some(action) = Action::of_key(c) {
                    if self.target().is_some() {
                        self.confirming = Some(action);
                    }
                    return None;
                }
            }
            _ => {}
        }
        match self.screen {
            Screen::List => self.on_list_key(key),
            Screen::Detail => self.on_detail_key(key),
        }
    }

    fn on_list_key(&mut self, key: Key) -> Option<Command> {
        match key {
            Key::Up | Key::Char('k') => self.selected = self.selected.saturating_sub(1),
            Key::Down | Key::Char('j') => {
                self.selected = (self.selected + 1).min(self.rows.len().saturating_sub(1));
            }
            Key::Char('/') => self.typing = Some(self.filter.describe()),
            Key::Esc if self.filter != Filter::default() => {
                self.filter = Filter::default();
                self.cursor = None;
                self.previous_pages.clear();
                return Some(Command::List(self.list_query()));
            }
            Key::PageDown | Key::Char('n') => {
                let next = self.next_cursor.clone()?;
                self.previous_pages.push(self.cursor.replace(next));
                self.selected = 0;
                return Some(Command::List(self.list_query()));
            }
            Key::PageUp | Key::Char('p') => {
                self.cursor = self.previous_pages.pop()?;
                self.selected = 0;
                return Some(Command::List(self.list_query()));
            }
            Key::Enter => {
                let id = self.rows.get(self.selected)?.id.clone();
                self.screen = Screen::Detail;
                self.open_id = Some(id.clone());
                self.detail = None;
                self.trace_scroll = 0;
                self.message = None;
                return Some(Command::Open(id));
            }
            _ => {}
        }
        None
    }

    fn on_detail_key(&mut self, key: Key) -> Option<Command> {
        match key {
            Key::Esc => {
                self.screen = Screen::List;
                self.open_id = None;
                self.detail = None;
                // the status bar spoke of the execution left
                self.message = None;
                return Some(Command::List(self.list_query()));
            }
            Key::Char('v') => self.show_source = !self.show_source,
            Key::Up | Key::Char('k') => self.trace_scroll = self.trace_scroll.saturating_sub(1),
            Key::Down | Key::Char('j') => {
                let steps = self.detail.as_ref().map_or(0, |view| view.steps.len());
                self.trace_scroll = (self.trace_scroll + 1).min(steps.saturating_sub(1));
            }
            _ => {}
        }
        None
    }

    /// The execution a control key acts on: the open one, or the list's selected row.
    pub(crate) fn target(&self) -> Option<String> {
        match self.screen {
            Screen::Detail => self.open_id.clone(),
            Screen::List => self.rows.get(self.selected).map(|row| row.id.clone()),
        }
    }
}

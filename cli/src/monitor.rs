//! `stm monitor`: a terminal console over the deployment the operator commands reach, the
//! terminal sibling of `stm ui` in the way of harel's `monitor`. It lists executions
//! (filtered, paged, refreshed), opens one with its children, statechart outline and trace
//! (gathered by [`crate::inspect`]), and runs the control commands, each confirmed,
//! through [`crate::ops::apply_control`].
//!
//! The state and drawing are a pure [`app::App`]; this file is the loop around it: keys
//! in, store calls out, the terminal restored however it ends.

mod app;
mod render;
#[cfg(test)]
mod tests;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use stm_store::ExecutionStore;

use self::app::{App, Command, Key};
use crate::ops::{Connected, Deployment};

/// A terminal console over the deployment (harel's `monitor`): the executions,
/// filtered and refreshed; one with its children, statechart and trace; and the
/// control commands (s suspend, R resume, c cancel, t terminate), each confirmed.
#[derive(Args, Debug, Clone)]
pub(crate) struct MonitorCommand {
    #[command(flatten)]
    args: MonitorArgs,
    #[command(flatten)]
    deployment: Deployment,
}

/// `stm monitor`'s own flags (the deployment's are [`Deployment`]'s).
#[derive(Args, Debug, Clone)]
pub(crate) struct MonitorArgs {
    /// Seconds between refreshes of the screen that is up.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub interval: f64,
}

/// The shortest refresh interval: faster only loads the store.
const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// `stm monitor`, as the operator, until `q` (or Ctrl-C).
pub(crate) fn start(command: MonitorCommand) -> Result<ExitCode> {
    crate::role::run_as("operator", async move {
        run(&command.deployment, &command.args)
            .await
            .map(|()| ExitCode::SUCCESS)
    })
}

/// Connect, take over the terminal, run until `q` (or Ctrl-C).
async fn run(dep: &Deployment, args: &MonitorArgs) -> Result<()> {
    let interval = Duration::try_from_secs_f64(args.interval)
        .map_err(|_| crate::errors::usage(format!("--interval {}: not a number of seconds", args.interval)))?
        .max(MIN_INTERVAL);
    // connect first: a deployment that is not there is said on a normal terminal
    let connected = dep.connect(None).await?;
    let mut terminal = TerminalGuard::take()?;
    event_loop(&mut terminal.0, &connected, interval).await
}

/// The terminal in raw mode on the alternate screen, given back when dropped: on `q`,
/// on an error and on a panic (ratatui's hook restores it too).
struct TerminalGuard(ratatui::DefaultTerminal);

impl TerminalGuard {
    fn take() -> Result<TerminalGuard> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(TerminalGuard(terminal)),
            Err(err) => {
                // it may have got half way (raw mode on, no alternate screen): undo that
                ratatui::restore();
                Err(anyhow::Error::new(err).context("cannot take over the terminal (is stdout a terminal?)"))
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

async fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    connected: &Connected,
    interval: Duration,
) -> Result<()> {
    let mut app = App::new();
    let mut pending = vec![app.refresh()];
    let mut next_refresh = Instant::now() + interval;
    loop {
        while let Some(command) = pending.pop() {
            if command == Command::Quit {
                return Ok(());
            }
            if let Some(then) = execute(&mut app, connected, command).await {
                pending.push(then);
            }
        }
        terminal
            .draw(|frame| app.render(frame))
            .context("drawing the monitor")?;
        // wake for a key, or for the next refresh; short polls keep Ctrl-C responsive
        let wait = next_refresh
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        if event::poll(wait).context("reading the terminal")? {
            if let Event::Key(key) = event::read().context("reading the terminal")? {
                if let Some(command) = key_of(key).and_then(|key| app.on_key(key)) {
                    pending.push(command);
                }
            }
        }
        if Instant::now() >= next_refresh {
            // not while a question or a filter is up: the answer applies to what was shown
            if app.confirming.is_none() && app.typing.is_none() {
                pending.push(app.refresh());
            }
            next_refresh = Instant::now() + interval;
        }
    }
}

/// Carry out one command, its answer put into `app`; what to do after it, if anything.
async fn execute(app: &mut App, connected: &Connected, command: Command) -> Option<Command> {
    match command {
        Command::Quit => None,
        Command::List(query) => {
            let definitions = &connected.control.driver.definitions;
            match crate::routing::lines(connected.store.as_ref(), definitions).await {
                Ok(lines) => app.routing_loaded(lines),
                Err(err) => app.load_failed(&err),
            }
            match connected.store.list_executions(&query).await {
                Ok(page) => app.list_loaded(page),
                Err(err) => app.load_failed(&err.into()),
            }
            None
        }
        Command::Open(id) => {
            match crate::inspect::gather(connected, &id).await {
                Ok(view) => app.detail_loaded(&id, view),
                Err(err) => app.load_failed(&err),
            }
            None
        }
        Command::Control { id, action } => {
            match crate::ops::apply_control(connected, &id, action.command()).await {
                Ok(outcome) => app.message = Some(format!("{id}: {outcome}")),
                Err(err) => app.failed(&err),
            }
            Some(app.refresh())
        }
    }
}

/// The app's key for a terminal key press (releases and repeats are not presses).
fn key_of(event: KeyEvent) -> Option<Key> {
    if event.kind != KeyEventKind::Press {
        return None;
    }
    if event.modifiers.contains(KeyModifiers::CONTROL) {
        return (event.code == KeyCode::Char('c')).then_some(Key::Interrupt);
    }
    Some(match event.code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        _ => return None,
    })
}

//! `stm monitor` in a real pseudo-terminal: tmux runs it over `stm local` on moto, the
//! test types into the pane with `send-keys` and reads it with `capture-pane`. It finds
//! the execution in the list, opens it, declines and then confirms a suspend, sees the
//! status change on screen and in `stm show`, and quits back to the shell.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Local;

const TMUX: &str = "/usr/bin/tmux";

#[test]
fn the_monitor_opens_an_execution_and_suspends_it_in_a_terminal() {
    // before anything starts: a missing tmux is a setup fault, said as such
    assert!(
        std::path::Path::new(TMUX).exists(),
        "the monitor's test needs tmux at {TMUX} (apt-get install tmux)"
    );
    let local = Local::start("monitor");
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-1"]);
    local.wait_show("o-1", &["[Order] RUNNING", "at Draft"]);

    let pane = Pane::start(&local);
    let list = pane.wait_for(&["o-1", "RUNNING", "Draft"]);
    assert!(list.contains("stm monitor: executions"), "{list}");

    pane.keys(&["Enter"]);
    let detail = pane.wait_for(&["status RUNNING", "statechart", "trace"]);
    assert!(
        detail.contains("● Draft"),
        "the active state is marked:\n{detail}"
    );
    assert!(detail.contains("Start"), "the trace shows the start:\n{detail}");
    // the source of examples/order.stm, the active state's declaration marked
    pane.keys(&["v"]);
    let source = pane.wait_for(&["order.stm (v: outline)"]);
    assert!(
        source
            .lines()
            .any(|l| l.contains("● ") && l.contains("state Draft")),
        "the declaration of Draft is marked:\n{source}"
    );
    pane.keys(&["v"]);
    pane.wait_for(&["statechart (v: source)"]);

    // declined: nothing is sent
    pane.keys(&["s"]);
    pane.wait_for(&["Suspend o-1?"]);
    pane.keys(&["n"]);
    pane.wait_for(&["Suspend not sent"]);
    assert!(local.ok(&["show", "o-1"]).contains("RUNNING"));

    // confirmed: suspended through the control plane, the screen follows
    pane.keys(&["s"]);
    pane.wait_for(&["Suspend o-1?"]);
    pane.keys(&["y"]);
    let after = pane.wait_for(&["status SUSPENDED", "o-1: RUNNING -> SUSPENDED"]);
    assert!(!after.contains("Suspend o-1?"), "{after}");
    let shown = local.ok(&["show", "o-1"]);
    assert!(
        shown.lines().next().is_some_and(|l| l.contains("SUSPENDED")),
        "{shown}"
    );

    // a command with nothing to do is refused, in the status bar
    pane.keys(&["s"]);
    pane.wait_for(&["Suspend o-1?"]);
    pane.keys(&["y"]);
    pane.wait_for(&["o-1 is already SUSPENDED: nothing to suspend"]);

    // back to the list, which shows the new status; q gives the terminal back
    pane.keys(&["Escape"]);
    pane.wait_for(&["o-1", "SUSPENDED", "Enter open"]);
    pane.keys(&["q"]);
    let exited = pane.wait_for(&["monitor exited 0"]);
    assert!(
        !exited.contains("stm monitor: executions"),
        "the alternate screen is left, the shell's screen back:\n{exited}"
    );
}

/// A tmux server of its own running `stm monitor` in a 160x45 pane; killed when dropped,
/// whether the test passed or not.
struct Pane {
    /// The server's own socket (`-S`): no other tmux is reached, and the file goes with it.
    socket: std::path::PathBuf,
}

impl Pane {
    fn start(local: &Local) -> Pane {
        let pane = Pane {
            socket: std::env::temp_dir().join(format!("stm-monitor-test-{}.sock", std::process::id())),
        };
        let mut args: Vec<String> = ["new-session", "-d", "-x", "160", "-y", "45", "-s", "monitor"]
            .map(String::from)
            .to_vec();
        args.push("-c".into());
        args.push(common::repo().display().to_string());
        for (key, value) in &local.env {
            args.push("-e".into());
            args.push(format!("{key}={value}"));
        }
        // after it exits, the shell says how, and the pane stays to be read
        args.push(format!(
            "{} monitor --interval 0.5; echo \"monitor exited $?\"; sleep 120",
            env!("CARGO_BIN_EXE_stm")
        ));
        let out = pane.tmux(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            common::stderr(&out)
        );
        pane
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new(TMUX)
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "monitor"];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "send-keys: {}", common::stderr(&out));
    }

    fn screen(&self) -> String {
        common::stdout(&self.tmux(&["capture-pane", "-p", "-t", "monitor"]))
    }

    /// Poll the pane until it shows every needle; the screen then.
    fn wait_for(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if needles.iter().all(|n| screen.contains(n)) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the pane never showed {needles:?}; last:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let _ = std::fs::remove_file(&self.socket);
    }
}

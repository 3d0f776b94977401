//! `stm ui` in a real browser: headless Chromium (Debian's `chromium`, installed by
//! `.ci/setup.sh`) drives the console served over `stm local` on moto. It opens the list,
//! opens an execution, finds its active states highlighted in the statechart, suspends
//! it through the confirmation and sees the status change, saves a screenshot, and opens
//! a trace step's explanation by clicking the step.
//!
//! Chromium is driven over the DevTools protocol on its pipe transport
//! (`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and 4, wired to two FIFOs by
//! a shell), so the test needs no websocket or browser-driver crate.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::Local;
use serde_json::{json, Value};

#[test]
fn the_console_shows_an_execution_and_suspends_it_in_a_browser() {
    // before anything starts: a missing browser is a setup fault, said as such
    let chromium = chromium_path();
    let local = Local::start("ui");

    // an orthogonal checkout with both regions running, and an order with a trace
    local.ok(&["create", "examples/checkout.stm", "Checkout", "--id", "c-1"]);
    local.wait_show("c-1", &["at Cart"]);
    local.ok(&["send", "c-1", "Checkout"]);
    wait_for_regions(&local, "c-1");
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-1"]);
    local.wait_show("o-1", &["at Draft"]);
    local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    local.wait_show("o-1", &["at Payment.Charging"]);

    // Order's alias pinned to its current version: the list shows where new executions go
    let listing = local.ok(&["list", "examples/order.stm"]);
    let order = listing
        .lines()
        .find_map(|l| l.strip_prefix("versions:  "))
        .and_then(|v| v.split(", ").find_map(|m| m.strip_prefix("Order ")))
        .unwrap_or_else(|| panic!("no version of Order in:\n{listing}"))
        .to_string();
    local.ok(&["versions", "route", "Order", "--to", &order, "--weight", "100"]);

    let console = Console::start(&local);
    let origin = console.origin();

    // the token guards every page: none or a wrong one is a 403 with one line
    let refused = http_get(&origin, "/");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(refused.contains("403: this console needs the token"), "{refused}");
    assert!(http_get(&origin, "/?token=0000").starts_with("HTTP/1.1 403"));

    let mut browser = Browser::launch(&chromium);

    // 1. the list (the token URL sets the cookie and redirects to the bare page)
    browser.navigate(&console.url);
    browser.wait_for("document.querySelector('h1')?.textContent === 'Executions'");
    assert_eq!(
        browser.eval("location.search"),
        json!(""),
        "the token is dropped from the address"
    );
    let ids = browser.eval("[...document.querySelectorAll('a.execution')].map(a => a.textContent)");
    for id in ["c-1", "o-1", "c-1:Fulfil.Payment"] {
        assert!(
            ids.as_array()
                .is_some_and(|ids| ids.iter().any(|i| i.as_str().is_some_and(|i| i.starts_with(id)))),
            "the list lacks {id}: {ids}"
        );
    }
    assert_eq!(
        browser.eval("document.querySelector('section.routing pre')?.textContent"),
        json!(format!("Order (alias live): {order} 100%")),
        "the routing above the list"
    );
    // filtered to roots of one machine
    browser.navigate(&format!("{origin}/?definition=Order&roots=on"));
    browser.wait_for("document.querySelector('h1')?.textContent === 'Executions'");
    assert_eq!(
        browser.eval("[...document.querySelectorAll('a.execution')].map(a => a.textContent)"),
        json!(["o-1"])
    );

    // 1b. a machine's heat map, reached from the list: each state's count of executions,
    // its transitions as arrows with event and guard, a count leading to the executions
    browser.eval("document.querySelector('a.machine[href=\"/machines/Order\"]').click()");
    browser.wait_for("document.querySelector('h1')?.textContent.startsWith('Order')");
    assert_eq!(
        browser.eval(
            "['Draft', 'Payment.Charging', 'Shipping'].map(p => { const s = document.querySelector(`.state[data-path=\"${p}\"]`); return p + '=' + s.querySelector('a.count').textContent + ' ' + [...s.classList].filter(c => c.startsWith('heat-')); })"
        ),
        json!(["Draft=0 heat-0", "Payment.Charging=1 heat-4", "Shipping=0 heat-0"])
    );
    let arrows = browser.eval(
        "[...document.querySelectorAll('table.arrows tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' '))",
    );
    for row in [
        "Draft ⟶ Payment Submit -",
        "Payment.Charging ⟶ GaveUp PaymentFailed context.attempts >= context.max_attempts",
        "Payment.Charging ⟶ Payment.Backoff PaymentFailed else",
    ] {
        assert!(
            arrows
                .as_array()
                .is_some_and(|rows| rows.iter().any(|r| r.as_str() == Some(row))),
            "no arrow {row:?} in {arrows}"
        );
    }
    // the same transitions drawn on the chart: one arrow each, leaving its source's box
    // and reaching its target's, labelled with the event and the guard
    browser.wait_for(
        "document.querySelectorAll('svg.edges path.edge').length > 0 && document.querySelectorAll('svg.edges path.edge').length === document.querySelectorAll('table.arrows tr[data-from]').length",
    );
    assert_eq!(
        browser.eval(
            "(() => { const o = document.querySelector('svg.edges').getBoundingClientRect(); const near = (pt, el) => { const b = el.getBoundingClientRect(); const x = o.left + pt.x, y = o.top + pt.y; return x >= b.left - 2 && x <= b.right + 2 && y >= b.top - 2 && y <= b.bottom + 2; }; const box = p => document.querySelector(`.state[data-path=\"${p}\"]`); return [...document.querySelectorAll('svg.edges path.edge')].filter(e => !(near(e.getPointAtLength(0), box(e.dataset.from)) && near(e.getPointAtLength(e.getTotalLength()), box(e.dataset.to)))).map(e => e.dataset.from + '->' + e.dataset.to); })()"
        ),
        json!([]),
        "every arrow starts at its source box and ends at its target box"
    );
    let labels =
        browser.eval("[...document.querySelectorAll('svg.edges text.edge-label')].map(t => t.textContent)");
    for label in [
        "Submit",
        "PaymentFailed [context.attempts >= context.max_attempts]",
        "PaymentFailed [else]",
    ] {
        assert!(
            labels
                .as_array()
                .is_some_and(|l| l.iter().any(|t| t.as_str() == Some(label))),
            "no arrow labelled {label:?} in {labels}"
        );
    }
    // kept for a look at the drawing (the execution page's is step 5's)
    let machine_shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-machine.png");
    std::fs::write(&machine_shot, browser.screenshot()).expect("write the machine page's screenshot");
    browser.eval("document.querySelector('.state[data-path=\"Payment.Charging\"] a.count').click()");
    browser.wait_for("document.querySelector('h1')?.textContent.startsWith('Order in')");
    assert_eq!(
        browser.eval("[...document.querySelectorAll('a.execution')].map(a => a.textContent)"),
        json!(["o-1"])
    );

    // 2. one execution, reached by its link
    browser.navigate(&format!("{origin}/"));
    browser.wait_for("!!document.querySelector('a.execution[href=\"/executions/c-1\"]')");
    browser.eval("document.querySelector('a.execution[href=\"/executions/c-1\"]').click()");
    browser.wait_for("document.querySelector('h1')?.textContent.startsWith('c-1')");
    assert_eq!(text(&mut browser, "#status"), "RUNNING");
    assert_eq!(text(&mut browser, "#active-path"), "Fulfil");

    // 3. its active states highlighted: the orthogonal state and a leaf in each region
    assert_eq!(
        browser.eval(
            "[...document.querySelectorAll('.state.leaf.active')].map(s => s.dataset.path + '=' + s.querySelector('.state-name').textContent.trim())"
        ),
        json!(["Fulfil.Payment.Charging=●→ Charging", "Fulfil.Stock.Reserving=●→ Reserving"])
    );
    assert_eq!(
        browser.eval("[...document.querySelectorAll('.state.orthogonal.active > .substates > .state.region.active')].length"),
        json!(2),
        "both regions are drawn, active, inside Fulfil"
    );
    assert_eq!(
        browser.eval("document.querySelector('.state[data-path=\"Cart\"]').classList.contains('active')"),
        json!(false)
    );
    let children = text(&mut browser, "#children");
    assert!(
        children.contains("c-1:Fulfil.Payment") && children.contains("c-1:Fulfil.Stock"),
        "{children}"
    );
    let trace = text(&mut browser, "#trace");
    assert!(
        trace.contains("Checkout") && trace.contains("Cart → Fulfil"),
        "{trace}"
    );

    // 4. suspend: a dismissed confirmation posts nothing; an accepted one suspends
    browser.accept_dialogs = false;
    browser.eval("document.getElementById('suspend').click()");
    let asked = browser.take_dialog();
    assert!(asked.starts_with("Suspend c-1?"), "{asked}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(text(&mut browser, "#status"), "RUNNING", "nothing posted");
    browser.accept_dialogs = true;
    browser.eval("document.getElementById('suspend').click()");
    assert!(browser.take_dialog().starts_with("Suspend c-1?"));
    browser.wait_for("document.getElementById('status')?.textContent === 'SUSPENDED'");
    assert_eq!(text(&mut browser, "#flash"), "c-1: RUNNING -> SUSPENDED");
    assert!(
        browser
            .eval("!!document.getElementById('resume') && !document.getElementById('suspend')")
            .as_bool()
            .unwrap_or(false),
        "the controls follow the status"
    );
    local.wait_show("c-1", &["SUSPENDED"]);

    // 5. the screenshot
    let shot = browser.screenshot();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console.png");
    std::fs::write(&path, &shot).expect("write the screenshot");
    eprintln!("screenshot: {}", path.display());
    if let Ok(copy) = std::env::var("STM_UI_SCREENSHOT") {
        std::fs::write(&copy, &shot).expect("write the screenshot's copy");
    }

    // the live part follows the store without a reload: an event sent from another shell
    // shows up on the open page, whose script state survives
    browser.navigate(&format!("{origin}/executions/o-1"));
    browser.wait_for("document.getElementById('active-path')?.textContent === 'Payment.Charging'");
    assert!(
        text(&mut browser, "#trace").contains("amount: 0.0 → 42.5"),
        "the trace shows Submit's context change"
    );
    // a trace step clicked shows why its event did what it did (`--explain`'s lines)
    let submit_why = "#trace tr.explain[data-explains=\"1\"]";
    browser.eval("document.querySelector('#trace tr.step[data-step=\"1\"]').click()");
    browser.wait_for(&format!(
        "document.querySelector('{submit_why}')?.hidden === false"
    ));
    assert_eq!(
        text(&mut browser, submit_why),
        "1. Draft -> Payment on Submit [no guard]: taken"
    );
    browser.eval("window.notReloaded = true");
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    browser.wait_for("document.getElementById('active-path')?.textContent === 'Shipping'");
    assert_eq!(browser.eval("window.notReloaded === true"), json!(true));
    assert_eq!(
        browser.eval(&format!("document.querySelector('{submit_why}').hidden")),
        json!(false),
        "the live refresh keeps an opened explanation open"
    );

    // a control the status refuses says why; an unknown id is a 404 naming it
    let refused = browser.eval(
        "fetch('/executions/o-1/control', {method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded'}, body: 'command=resume'}).then(r => r.text())",
    );
    assert!(
        refused
            .as_str()
            .is_some_and(|page| page.contains("o-1 is RUNNING, not SUSPENDED: nothing to resume")),
        "{refused}"
    );
    browser.navigate(&format!("{origin}/executions/no-such%3Cid%3E"));
    browser.wait_for("!!document.getElementById('error')");
    assert_eq!(
        text(&mut browser, "#error"),
        r#"There is no execution "no-such<id>" in this deployment."#
    );
    assert_eq!(
        browser.eval("document.title"),
        json!("No such execution · stm ui")
    );
}

/// The system's Chromium, or a failure saying how to install it.
fn chromium_path() -> PathBuf {
    let candidates = std::env::var_os("STM_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from));
    for candidate in candidates {
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "no Chromium found (/usr/bin/chromium, or STM_CHROMIUM): run .ci/setup.sh, which installs Debian's chromium"
    );
}

/// Wait until `id`'s two regions run (as `stm show` draws them under it).
fn wait_for_regions(local: &Local, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tree = local.ok(&["show", id]);
        let running = tree
            .lines()
            .filter(|l| l.starts_with("    ") && l.contains("RUNNING"))
            .count();
        if tree.contains("at Fulfil") && running >= 2 {
            return;
        }
        assert!(Instant::now() < deadline, "the regions never showed:\n{tree}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn text(browser: &mut Browser, selector: &str) -> String {
    let value = browser.eval(&format!(
        "document.querySelector({})?.textContent.trim() ?? null",
        json!(selector)
    ));
    match value {
        Value::String(text) => text,
        other => panic!(
            "no {selector} on the page (got {other}); the page:\n{}",
            browser.body_text()
        ),
    }
}

/// A plain HTTP GET from outside the browser: the raw response.
fn http_get(origin: &str, path: &str) -> String {
    let address = origin.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the console");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

/// A running `stm ui` on a free port; stopped when dropped.
struct Console {
    child: Child,
    /// The URL it printed, with its token.
    url: String,
}

impl Console {
    fn start(local: &Local) -> Console {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stm"))
            .args(["ui", "--port", "0"])
            .current_dir(common::repo())
            .envs(local.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start stm ui");
        let mut stdout = BufReader::new(child.stdout.take().expect("its stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("its first line");
        // keep its stdout open (and drained) while it runs
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = first
            .split_whitespace()
            .find(|word| word.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("stm ui printed no URL: {first:?}"))
            .to_string();
        assert!(url.contains("/?token="), "{url}");
        Console { child, url }
    }

    /// `http://127.0.0.1:PORT`.
    fn origin(&self) -> String {
        self.url.split("/?").next().unwrap_or_default().to_string()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Headless Chromium, one page, driven over the DevTools protocol's pipe transport.
struct Browser {
    child: Child,
    to_browser: std::fs::File,
    from_browser: Receiver<Value>,
    session: String,
    next_id: u64,
    /// How a `confirm()` is answered.
    accept_dialogs: bool,
    /// The messages of the dialogs shown, oldest first.
    dialogs: Vec<String>,
    _profile: TempDir,
}

impl Browser {
    fn launch(chromium: &Path) -> Browser {
        let profile = TempDir::new("stm-ui-chromium");
        let (to_fifo, from_fifo) = (profile.0.join("to-browser"), profile.0.join("from-browser"));
        for fifo in [&to_fifo, &from_fifo] {
            let made = Command::new("mkfifo").arg(fifo).status().expect("run mkfifo");
            assert!(made.success(), "mkfifo {}", fifo.display());
        }
        let log = std::fs::File::create(profile.0.join("chromium.log")).expect("chromium's log");
        // the shell gives Chromium the FIFOs as fds 3 (commands) and 4 (replies)
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<"$TO_BROWSER" 4>"$FROM_BROWSER""#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.0.join("profile").display()))
            .arg("about:blank")
            .env("TO_BROWSER", &to_fifo)
            .env("FROM_BROWSER", &from_fifo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start chromium");
        // the same order as the shell's redirections: neither side waits for the other
        let to_browser = std::fs::OpenOptions::new()
            .write(true)
            .open(&to_fifo)
            .expect("open chromium's command pipe");
        let replies = std::fs::File::open(&from_fifo).expect("open chromium's reply pipe");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(replies);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|b| *b == 0);
                if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                    if tx.send(value).is_err() {
                        return;
                    }
                }
                message.clear();
            }
        });
        let mut browser = Browser {
            child,
            to_browser,
            from_browser: rx,
            session: String::new(),
            next_id: 0,
            accept_dialogs: true,
            dialogs: Vec::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target id").to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().expect("a session id").to_string();
        browser.call("Page.enable", json!({}));
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    /// Send `method` (to the page once attached) and wait for its result, answering the
    /// dialogs that open meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params) {
            Ok(result) => result,
            Err(error) => panic!("{method} failed: {error}"),
        }
    }

    /// [`call`](Self::call), the protocol's error returned rather than a failure.
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(id, method, params);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.from_browser.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => panic!("chromium did not answer {method} in 30 s"),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "chromium went away during {method}: {}",
                    std::fs::read_to_string(self._profile.0.join("chromium.log")).unwrap_or_default()
                ),
            };
            if message["method"] == "Page.javascriptDialogOpening" {
                self.dialogs.push(
                    message["params"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                self.next_id += 1;
                let answer = json!({"accept": self.accept_dialogs});
                self.send(self.next_id, "Page.handleJavaScriptDialog", answer);
                continue;
            }
            if message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    return Err(error.clone());
                }
                return Ok(message["result"].clone());
            }
        }
    }

    fn send(&mut self, id: u64, method: &str, params: Value) {
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("a JSON message");
        bytes.push(0);
        self.to_browser.write_all(&bytes).expect("write to chromium");
    }

    fn navigate(&mut self, url: &str) {
        let result = self.call("Page.navigate", json!({"url": url}));
        if let Some(error) = result.get("errorText") {
            panic!("navigating to {url}: {error}");
        }
        self.wait_for("document.readyState === 'complete'");
    }

    /// The value of the JavaScript `expression` (awaited if a promise).
    fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(details) = result.get("exceptionDetails") {
            panic!("{expression} threw: {details}");
        }
        result["result"]["value"].clone()
    }

    /// Poll `condition` until it is true (30 s at most: a machine's page reads all 512
    /// shards of a state index on moto, which takes seconds on a loaded 2-core machine).
    fn wait_for(&mut self, condition: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // a navigation may destroy the context mid-evaluation: then try again
            let result = self.try_call(
                "Runtime.evaluate",
                json!({"expression": condition, "returnByValue": true}),
            );
            if result.is_ok_and(|r| r["result"]["value"] == json!(true)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never true: {condition}; the page:\n{}",
                self.body_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last dialog shown (the test's clicks open one each).
    fn take_dialog(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.dialogs.is_empty() {
            assert!(Instant::now() < deadline, "no confirmation was asked");
            // a round trip lets the dialog's event arrive
            self.call("Runtime.evaluate", json!({"expression": "1"}));
        }
        self.dialogs.remove(0)
    }

    fn body_text(&mut self) -> String {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": "document.body?.innerText ?? ''", "returnByValue": true}),
        );
        result["result"]["value"].as_str().unwrap_or_default().to_string()
    }

    fn screenshot(&mut self) -> Vec<u8> {
        // the whole page, however long
        let height = self.eval("document.documentElement.scrollHeight");
        let clip = json!({"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1});
        let result = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        );
        base64_decode(result["data"].as_str().expect("the screenshot's data"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Standard base64 (the protocol's binary data).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        other => panic!("not base64: {other}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut acc = 0u32;
        for (i, digit) in chunk.iter().enumerate() {
            acc |= u32::from(*digit) << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

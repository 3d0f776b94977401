//! `stm lsp` over its real protocol: the built binary on stdio, driven with framed
//! JSON-RPC messages as an editor sends them, over a two-file project (a machine and a
//! library it imports).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

const LIBRARY: &str = r#"# shared declarations
event Pay {
  amount: float
  note: string?
}
guard big = amount > 100

fragment Retry(again: state) {
  initial Trying
  state Trying {}
  from Trying to again on Pay
}
"#;

const MACHINE: &str = r#"import "lib/common.stm" as lib

event Ship {}

bind { charge = shop.charge }

machine Order {
  initial Draft
  state Draft {}
  state Payment {
    initial Charging
    state Charging {
      on enter charge
    }
    final Paid success
    from Charging to Paid on Pay where big
  }
  use lib.Retry(again = Draft) as Again
  final Done success
  from Draft to Payment on Pay
  from Payment to Done on Ship
  from Draft to Again on Ship
}
"#;

/// A fresh project directory with the machine and its library.
fn project(tag: &str) -> PathBuf {
    let dir = stm_testkit::scratch_dir(&format!("lsp-{tag}"));
    std::fs::create_dir_all(dir.join("lib")).expect("project dir");
    std::fs::write(dir.join("lib/common.stm"), LIBRARY).expect("library");
    std::fs::write(dir.join("order.stm"), MACHINE).expect("machine");
    std::fs::canonicalize(&dir).expect("canonical dir")
}

fn uri_of(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The 0-based (line, character) of the `nth` (0-based) occurrence of `needle` in `text`.
fn position_of(text: &str, needle: &str, nth: usize) -> (u32, u32) {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("{needle:?} #{nth} in the text"))
        .0;
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32;
    let character = (offset - before.rfind('\n').map_or(0, |i| i + 1)) as u32;
    (line, character)
}

fn range(start: (u32, u32), length: u32) -> Value {
    json!({
        "start": {"line": start.0, "character": start.1},
        "end": {"line": start.0, "character": start.1 + length},
    })
}

/// A running `stm lsp` and the messages it has sent.
struct Server {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for a response.
    notifications: Vec<Value>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stm"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("stm lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 {
                        return;
                    }
                    let header = header.trim_end();
                    if header.is_empty() {
                        break;
                    }
                    if let Some(value) = header.strip_prefix("Content-Length: ") {
                        length = value.parse::<usize>().ok();
                    }
                }
                let mut body = vec![0; length.expect("a Content-Length header")];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let message: Value = serde_json::from_slice(&body).expect("the server sends JSON");
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Server {
            child,
            stdin,
            messages,
            next_id: 0,
            notifications: Vec::new(),
        }
    }

    fn write_raw(&mut self, body: &str) {
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.write_raw(&body);
    }

    fn receive(&mut self) -> Value {
        self.messages
            .recv_timeout(Duration::from_secs(30))
            .expect("a message from the server within 30 s")
    }

    /// The whole response (`result` or `error`) to a new request.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        self.write_raw(&body);
        self.response(json!(id))
    }

    fn response(&mut self, id: Value) -> Value {
        loop {
            let message = self.receive();
            if message.get("method").is_some() {
                self.notifications.push(message);
            } else if message["id"] == id {
                return message;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params);
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    /// The next `textDocument/publishDiagnostics` for `uri`.
    fn diagnostics_for(&mut self, uri: &str) -> Vec<Value> {
        loop {
            let pending = self
                .notifications
                .iter()
                .position(|n| n["method"] == "textDocument/publishDiagnostics" && n["params"]["uri"] == uri);
            if let Some(i) = pending {
                let notification = self.notifications.remove(i);
                return notification["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
            let message = self.receive();
            self.notifications.push(message);
        }
    }

    fn at(&mut self, method: &str, uri: &str, (line, character): (u32, u32), extra: Value) -> Value {
        let mut params = json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
        });
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        self.request(method, params)
    }

    fn initialize(&mut self, root: &Path) -> Value {
        let result = self.request(
            "initialize",
            json!({"processId": null, "rootUri": uri_of(root), "capabilities": {}}),
        );
        self.notify("initialized", json!({}));
        result
    }
}

fn hover_text(hover: &Value) -> String {
    hover["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn labels(completion: &Value) -> Vec<String> {
    completion["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn completion_offers_every_keyword_of_the_parser() {
    // the parser's list, not a copy that drifts from it (`no`, `cancel_on_failure`)
    let dir = project("keywords");
    let order = uri_of(&dir.join("order.stm"));
    let mut server = Server::start();
    server.initialize(&dir);
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": order, "languageId": "stm", "version": 1, "text": MACHINE}}),
    );
    // the start of an item: no name is expected there, so every keyword is offered
    let (line, _) = position_of(MACHINE, "  final Done success", 0);
    let offered = labels(&server.at("textDocument/completion", &order, (line, 0), json!({})));
    let missing: Vec<&str> = stm_core::dsl::KEYWORDS
        .iter()
        .copied()
        .filter(|k| !offered.iter().any(|o| o == k))
        .collect();
    assert!(missing.is_empty(), "never offered: {missing:?}");
    let unknown: Vec<&String> = offered
        .iter()
        .filter(|o| !stm_core::dsl::KEYWORDS.contains(&o.as_str()))
        .collect();
    assert!(unknown.is_empty(), "offered but no keyword: {unknown:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_language_server_answers_every_feature_over_stdio() {
    let dir = project("features");
    let order = uri_of(&dir.join("order.stm"));
    let library = uri_of(&dir.join("lib/common.stm"));
    let mut server = Server::start();

    let capabilities = server.initialize(&dir)["capabilities"].clone();
    assert_eq!(capabilities["hoverProvider"], true);
    assert_eq!(capabilities["renameProvider"], true);

    // a broken document: the syntax error at its token
    let broken = MACHINE.replace("from Payment to Done on Ship", "from Payment to } on Ship");
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": order, "languageId": "stm", "version": 1, "text": broken}}),
    );
    let diagnostics = server.diagnostics_for(&order);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let brace = position_of(&broken, "} on Ship", 0);
    assert_eq!(diagnostics[0]["range"], range(brace, 1));
    assert_eq!(diagnostics[0]["severity"], 1);

    // a validation finding, at the state it is about
    let unreachable = MACHINE.replace(
        "  from Draft to Again on Ship\n",
        "  state Lost {}\n  from Draft to Again on Ship\n",
    );
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": order, "version": 2}, "contentChanges": [{"text": unreachable}]}),
    );
    let diagnostics = server.diagnostics_for(&order);
    let lost = diagnostics
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("unreachable"))
        })
        .unwrap_or_else(|| panic!("an unreachable finding in {diagnostics:?}"));
    assert_eq!(
        lost["range"]["start"]["line"],
        position_of(&unreachable, "state Lost", 0).0
    );

    // fixed: no diagnostics left
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": order, "version": 3}, "contentChanges": [{"text": MACHINE}]}),
    );
    assert_eq!(server.diagnostics_for(&order), Vec::<Value>::new());
    server.notify("textDocument/didSave", json!({"textDocument": {"uri": order}}));
    assert_eq!(server.diagnostics_for(&order), Vec::<Value>::new());

    // hover: a state's path, kind and transitions; an event's fields; a guard's
    // predicate; a fragment's parameters
    let charging = position_of(MACHINE, "Charging to Paid", 0);
    let hover = server.at("textDocument/hover", &order, charging, json!({}));
    let text = hover_text(&hover);
    assert!(text.contains("**state Order.Payment.Charging** (leaf)"), "{text}");
    assert!(text.contains("on Pay (guarded) → `Payment.Paid`"), "{text}");
    assert_eq!(hover["range"], range(charging, 8));
    let text = hover_text(&server.at(
        "textDocument/hover",
        &order,
        position_of(MACHINE, "Pay where", 0),
        json!({}),
    ));
    assert_eq!(text, "**event Pay**\n- `amount`: float\n- `note`: string?");
    let text = hover_text(&server.at(
        "textDocument/hover",
        &order,
        position_of(MACHINE, "big", 0),
        json!({}),
    ));
    assert_eq!(text, "**guard big**\n\n`amount > 100`");
    let text = hover_text(&server.at(
        "textDocument/hover",
        &order,
        position_of(MACHINE, "lib.Retry", 0),
        json!({}),
    ));
    assert_eq!(text, "**fragment lib.Retry**(again: state)");

    // go-to-definition: scope-aware states, and across the import
    let definition = server.at("textDocument/definition", &order, charging, json!({}));
    assert_eq!(definition["uri"], order);
    assert_eq!(
        definition["range"],
        range(position_of(MACHINE, "Charging {", 0), 8)
    );
    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "Pay where", 0),
        json!({}),
    );
    assert_eq!(definition["uri"], library);
    assert_eq!(definition["range"], range(position_of(LIBRARY, "Pay {", 0), 3));
    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "big", 0),
        json!({}),
    );
    assert_eq!(definition["range"], range(position_of(LIBRARY, "big", 0), 3));
    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "lib.Retry", 0),
        json!({}),
    );
    assert_eq!(definition["uri"], library);
    assert_eq!(definition["range"], range(position_of(LIBRARY, "Retry", 0), 5));
    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "lib/common", 0),
        json!({}),
    );
    assert_eq!(definition["uri"], library);
    assert_eq!(definition["range"], range((0, 0), 0));
    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "charge\n", 0),
        json!({}),
    );
    assert_eq!(definition["range"], range(position_of(MACHINE, "charge =", 0), 6));

    let definition = server.at(
        "textDocument/definition",
        &order,
        position_of(MACHINE, "Again on", 0),
        json!({}),
    );
    assert_eq!(definition["range"], range(position_of(MACHINE, "Again\n", 0), 5));

    // completion by context
    let after_to = position_of(MACHINE, "Paid on Pay", 0);
    let items = labels(&server.at("textDocument/completion", &order, after_to, json!({})));
    assert!(
        items.contains(&"Paid".to_string()) && items.contains(&"Charging".to_string()),
        "{items:?}"
    );
    assert!(items.contains(&"Draft".to_string()), "{items:?}");
    let top_level = position_of(MACHINE, "Payment on Pay", 0);
    let items = labels(&server.at("textDocument/completion", &order, top_level, json!({})));
    assert!(items.contains(&"Payment.Charging".to_string()), "{items:?}");
    let after_on = position_of(MACHINE, "Pay where", 0);
    let items = labels(&server.at("textDocument/completion", &order, after_on, json!({})));
    assert!(
        items.contains(&"Pay".to_string()) && items.contains(&"Ship".to_string()),
        "{items:?}"
    );
    assert!(!items.contains(&"Charging".to_string()), "{items:?}");
    let in_where = position_of(MACHINE, "big", 0);
    let items = labels(&server.at("textDocument/completion", &order, in_where, json!({})));
    assert!(
        items.contains(&"amount".to_string()) && items.contains(&"note".to_string()),
        "{items:?}"
    );
    assert!(items.contains(&"big".to_string()), "{items:?}");
    let after_enter = position_of(MACHINE, "charge\n", 0);
    let items = labels(&server.at("textDocument/completion", &order, after_enter, json!({})));
    assert_eq!(items, ["charge"]);

    // harel's preview request
    let rendered = server.request("harel/render", json!({"uri": order}));
    assert!(
        rendered["mermaid"]
            .as_str()
            .is_some_and(|m| m.starts_with("stateDiagram-v2")),
        "{rendered}"
    );
    assert_eq!(rendered["machine"], "Order");
    assert_eq!(rendered["isFragment"], false);
    assert_eq!(rendered["error"], Value::Null);
    assert!(rendered["targets"]
        .as_array()
        .is_some_and(|t| t.contains(&json!({"name": "Order", "kind": "machine"}))));

    // references: the event in both files; the state within its machine
    let references = server.at(
        "textDocument/references",
        &order,
        after_on,
        json!({"context": {"includeDeclaration": true}}),
    );
    let mut found: Vec<(String, Value)> = references
        .as_array()
        .map(|r| {
            r.iter()
                .map(|l| (l["uri"].as_str().unwrap_or("").to_string(), l["range"].clone()))
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|(u, r)| (u.clone(), r.to_string()));
    let mut expected = vec![
        (library.clone(), range(position_of(LIBRARY, "Pay {", 0), 3)),
        (library.clone(), range(position_of(LIBRARY, "Pay\n", 0), 3)),
        (order.clone(), range(position_of(MACHINE, "Pay where", 0), 3)),
        (order.clone(), range(position_of(MACHINE, "Pay\n", 0), 3)),
    ];
    expected.sort_by_key(|(u, r)| (u.clone(), r.to_string()));
    assert_eq!(found, expected);

    // rename a state: its declaration and every reference resolving to it
    let edit = server.at(
        "textDocument/rename",
        &order,
        charging,
        json!({"newName": "Billing"}),
    );
    let mut edits: Vec<Value> = edit["changes"][&order].as_array().cloned().unwrap_or_default();
    edits.sort_by_key(|e| e["range"]["start"]["line"].as_u64());
    let expected: Vec<Value> = [
        position_of(MACHINE, "Charging\n", 0),
        position_of(MACHINE, "Charging {", 0),
        charging,
    ]
    .into_iter()
    .map(|at| json!({"range": range(at, 8), "newText": "Billing"}))
    .collect();
    assert_eq!(edits, expected);
    let refused = server.call(
        "textDocument/rename",
        json!({"textDocument": {"uri": order}, "position": {"line": charging.0, "character": charging.1}, "newName": "not a name"}),
    );
    assert_eq!(refused["error"]["code"], -32602);

    // no death by bad input: garbage, an unknown method, a document that does not parse
    server.write_raw("{this is not json");
    let parse_error = server.response(Value::Null);
    assert_eq!(parse_error["error"]["code"], -32700);
    let unknown = server.call("stm/nothing", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": order, "version": 4}, "contentChanges": [{"text": "machine {{{ \"\n to"}]}),
    );
    assert_eq!(server.diagnostics_for(&order).len(), 1);
    let _ = server.at("textDocument/hover", &order, (1, 2), json!({}));
    let _ = server.at("textDocument/completion", &order, (1, 3), json!({}));
    let rendered = server.request("harel/render", json!({"uri": order}));
    assert!(rendered["error"].is_string(), "{rendered}");

    assert_eq!(server.request("shutdown", Value::Null), Value::Null);
    server.notify("exit", Value::Null);
    let status = server.child.wait().expect("the server exits");
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

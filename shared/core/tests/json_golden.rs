//! Execution and Event JSON against harel 0.9.0, in both directions:
//! - harel's bytes (`tests/data/json/*.json`, from `gen.py`) -> ours -> identical bytes;
//! - ours -> `Execution.model_validate_json` / `Event.model_validate_json` in harel ->
//!   `model_dump_json` -> identical bytes (run through the venv's python).

use std::path::{Path, PathBuf};
use std::process::Command;

use stm_core::{Event, Execution};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/json")
}

fn golden_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("golden dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "golden files missing");
    files
}

fn reserialize(path: &Path, text: &str) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.starts_with("event") {
        let ev: Event = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        ev.to_json()
    } else {
        let exe: Execution = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        exe.to_json()
    }
}

#[test]
fn harel_json_round_trips_byte_for_byte() {
    for path in golden_files() {
        let text = std::fs::read_to_string(&path).expect("read");
        let text = text.trim_end();
        assert_eq!(
            reserialize(&path, text),
            text,
            "{} changed on a round trip",
            path.display()
        );
    }
}

#[test]
fn unknown_fields_survive_a_round_trip() {
    let text =
        r#"{"id":"x","definition_id":"d","status":"RUNNING","future_field":{"a":[1,2.5]},"context":{"k":1}}"#;
    let mut exe: Execution = serde_json::from_str(text).expect("parse");
    exe.version += 1;
    let out = exe.to_json();
    assert!(out.contains(r#""future_field":{"a":[1,2.5]}"#), "{out}");
    let child = r#"{"root_path":"A","finished":true,"extra_flag":true}"#;
    let cs: stm_core::ChildState = serde_json::from_str(child).expect("child");
    assert!(serde_json::to_string(&cs)
        .expect("json")
        .contains(r#""extra_flag":true"#));
}

/// serde_json's typed parse reads every record (timestamps, big ints, unknown fields,
/// a repeated key), so `Execution::from_json` never needs its slower fallback for what
/// we or harel write; only a `NaN` or an `Infinity` does.
#[test]
fn records_parse_typed_without_a_value_in_between() {
    let text = r#"{"id":"x","definition_id":"d","status":"RUNNING","created_at":1764638000.125,
        "updated_at":1e3,"version":7,"context":{"big":123456789012345678901234567890,"f":0.1},
        "deferred":[{"id":"e","kind":"K","data":{"n":2.5},"later":1.5}],
        "children":{"c":{"root_path":"A","finished":false,"note":0.5}},
        "future_field":[1.5],"version":8}"#;
    let exe: Execution = serde_json::from_str(text).expect("a typed parse");
    assert_eq!(
        (exe.created_at, exe.updated_at, exe.version),
        (Some(1764638000.125), Some(1000.0), 8)
    );
    assert_eq!(exe.context["big"].to_string(), "123456789012345678901234567890");
    assert_eq!(exe.deferred[0].extra["later"].to_string(), "1.5");
    assert_eq!(exe.children["c"].extra["note"].to_string(), "0.5");
    assert_eq!(exe.extra["future_field"].to_string(), "[1.5]");
    let missing: Result<Execution, _> = serde_json::from_str(r#"{"id":"x"}"#);
    let why = missing.expect_err("definition_id is required").to_string();
    assert!(why.contains("missing field `definition_id`"), "{why}");
    let nan =
        Execution::from_json(r#"{"definition_id":"d","context":{"x":NaN}}"#).expect("the fallback reads NaN");
    assert_eq!(stm_core::pyjson::dumps(&nan.context["x"]), "NaN");
}

use stm_testkit::python;

#[test]
fn harel_reads_what_we_write() {
    // our own writes: every golden re-serialized by us, plus an execution built by us
    let mut ours: Vec<(String, String, String)> = golden_files()
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("read");
            let kind = if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("event"))
            {
                "Event"
            } else {
                "Execution"
            };
            let text = reserialize(p, text.trim_end());
            (kind.to_string(), text.clone(), text)
        })
        .collect();
    let mut built = Execution::new("built", "Order");
    built.status = stm_core::Status::Cancelling;
    built.context.insert("amount".into(), serde_json::json!(1e16));
    built.deferred.push(Event::new("Late").with_id("late-1"));
    built.stamp(1764410400.25);
    ours.push(("Execution".into(), built.to_json(), built.to_json()));
    // a pinned execution with parked events (on the item, as before parked rows, and in
    // rows): harel reads it, and drops our fields
    let mut pinned = built.clone();
    pinned.definition_version = Some("2f25f4c713d54788".parse().expect("a version"));
    pinned
        .parked_events
        .push(Event::new("Parked").with_id("parked-1"));
    pinned.parked_after = Some(3);
    assert!(pinned
        .to_json()
        .contains(r#""definition_version":"2f25f4c713d54788""#));
    ours.push(("Execution".into(), pinned.to_json(), built.to_json()));

    let script = r#"
import json, sys
from harel.engine.execution import Execution
from harel.spec.states import Event
bad = 0
for line in sys.stdin:
    kind, text, expected = json.loads(line)
    model = Execution if kind == "Execution" else Event
    again = model.model_validate_json(text).model_dump_json()
    if again != expected:
        bad += 1
        print("MISMATCH", text, again, sep="\n")
print("checked")
sys.exit(1 if bad else 0)
"#;
    let input: String = ours
        .iter()
        .map(|pair| serde_json::to_string(pair).expect("encode") + "\n")
        .collect();
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); run .ci/setup.sh first", python().display()));
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("checked"),
        "harel rejected or changed our JSON:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

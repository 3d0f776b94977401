//! The test venv's Python (the one harel runs on), for the tests that compare with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub fn python() -> PathBuf {
    std::env::var("STM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

/// Run `script` with `input` on stdin; its stdout as JSON (Python's: NaN, big ints).
pub fn run_python(script: &str, input: &str) -> Value {
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (run .ci/setup.sh)", python().display()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("input sent");
    let out = child.wait_with_output().expect("python ran");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    stm_core::pyjson::loads(&String::from_utf8_lossy(&out.stdout)).expect("JSON from python")
}

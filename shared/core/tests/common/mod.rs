//! The test venv's Python (the one harel runs on), for the tests that compare with it, and
//! the tests' seeded generator (both the kit's).

#![allow(dead_code)] // each test file uses its own part of it

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Every `.stm` file under `dir`, recursively, skipping hidden folders and `target`.
pub fn stm_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && !name.starts_with('.') && name != "target" {
            stm_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "stm") {
            out.push(path);
        }
    }
}

/// Every `.stm` file of the repository, sorted (at least the hundred it has).
pub fn repo_stm_files() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    stm_files(&repo, &mut files);
    files.sort();
    assert!(
        files.len() >= 100,
        "expected the repository's .stm files, found {}",
        files.len()
    );
    files
}

pub use stm_testkit::python;

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

/// The seeded generator of the randomized tests (the kit's, shared by every crate's tests).
#[allow(unused_imports)] // a test binary that draws nothing leaves it unused
pub use stm_testkit::Rng;

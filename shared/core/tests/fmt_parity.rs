//! `stm fmt` against `harel fmt`, differentially: every `.stm` file of the repository and
//! generated variants of each (indentation in spaces, tabs and Unicode spaces, trailing
//! whitespace, blank runs, CRLF and Python's other line boundaries, brackets inside
//! strings and comments) go through harel 0.9.0's `format_text` in the venv and through
//! ours; the outputs must be equal, and formatting ours again must change nothing.

use std::process::{Command, Stdio};

mod common;
use common::{python, repo_stm_files, Rng};

/// `text` with its layout scrambled: what a formatter has to undo.
fn scramble(text: &str, rng: &mut Rng) -> String {
    let indents = [
        "", " ", "   ", "\t", "\t  ", "\u{a0}", "\u{3000}", "        ", "\u{1f}",
    ];
    let trailers = ["", " ", "\t", "  \t ", "\u{2003}"];
    let endings = [
        "\n", "\n", "\n", "\r\n", "\r", "\n\n\n", "\u{0b}", "\u{0c}", "\u{1c}", "\u{85}", "\u{2028}", "\n \n",
    ];
    let mut out = String::new();
    if rng.next().is_multiple_of(3) {
        out.push_str("\n\n  \n");
    }
    for line in text.lines() {
        let indent: &&str = rng.pick(&indents);
        out.push_str(indent);
        out.push_str(line.trim());
        let trailer: &&str = rng.pick(&trailers);
        out.push_str(trailer);
        let ending: &&str = rng.pick(&endings);
        out.push_str(ending);
    }
    out
}

/// Lines whose brackets the formatter must read right: inside strings, after comments,
/// escaped quotes, leading closers.
const TRICKY: &str = "machine T {\n  # a comment with { braces }\n  // and one with ( parens\n  state A { on enter f(msg: \"a { b\") }\n  state B { on enter f(msg: \"q \\\" { \") }\n  state C {\n  }} ]) x {\n  initial A\n  \"unterminated { string\n  }\n}\n}\n";

#[test]
fn stm_fmt_formats_as_harel_fmt_does() {
    let files = repo_stm_files();
    let mut inputs: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    let mut rng = Rng::new(0x5eed_f0f0_1234_5678);
    let originals = inputs.clone();
    for text in originals.iter().chain(std::iter::once(&TRICKY.to_string())) {
        for _ in 0..2 {
            inputs.push(scramble(text, &mut rng));
        }
    }
    inputs.push(TRICKY.to_string());
    inputs.extend([
        "".to_string(),
        "\n\n\n".to_string(),
        "}}}\n{\n".to_string(),
        "a\u{2029}b\u{1e}c".to_string(),
    ]);

    let script = "import json, sys\nfrom harel.fmt import format_text\nfor line in sys.stdin:\n    print(json.dumps(format_text(json.loads(line))))\n";
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); run .ci/setup.sh first", python().display()));
    let input: String = inputs
        .iter()
        .map(|t| serde_json::to_string(t).expect("encode") + "\n")
        .collect();
    // written from its own thread: harel answers line by line, and a full output pipe
    // would otherwise stop it while we are still writing
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, input.as_bytes()));
    let out = child.wait_with_output().expect("harel");
    writer.join().expect("the writer thread").expect("write to harel");
    assert!(out.status.success(), "harel's format_text failed");
    let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("harel's output"))
        .collect();
    assert_eq!(theirs.len(), inputs.len());
    let mut differ = Vec::new();
    for (text, expected) in inputs.iter().zip(&theirs) {
        let ours = stm_core::fmt::format_text(text);
        if &ours != expected {
            differ.push(format!(
                "input {text:?}\n  harel: {expected:?}\n  ours:  {ours:?}"
            ));
        }
        assert_eq!(
            stm_core::fmt::format_text(&ours),
            ours,
            "not idempotent on {text:?}"
        );
    }
    assert!(
        differ.is_empty(),
        "{} of {} inputs differ from harel fmt:\n{}",
        differ.len(),
        inputs.len(),
        differ.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!(
        "fmt parity: {} inputs ({} files, the rest generated) agree with harel",
        inputs.len(),
        files.len()
    );
}

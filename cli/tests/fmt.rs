//! `stm fmt` through the binary, beside `harel fmt` on the same files: the same rewrite,
//! the same `--diff`, the same `--check` exit code (2) and message; a file that differs
//! only in its line endings is left alone, as harel leaves it; a file that is not UTF-8
//! gets one clear error. (The formatting itself is compared with harel's on 637 inputs in
//! shared/core/tests/fmt_parity.rs.)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::harel_in as harel;

fn stm(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stm"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run stm")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-fmt-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make the folder");
    dir
}

const MESSY: &str = "\n\n# an order\nmachine M {\ninitial A   \n      state A {\n on enter f(msg: \"{\")\n}\n\n\n\n  state B {}\n    from A to B on Go\n}\n\n";

#[test]
fn stm_fmt_does_what_harel_fmt_does() {
    let ours = scratch("ours");
    let theirs = scratch("theirs");
    for dir in [&ours, &theirs] {
        std::fs::write(dir.join("messy.stm"), MESSY).expect("write");
        std::fs::write(dir.join("tidy.stm"), stm_core::fmt::format_text(MESSY)).expect("write");
        // formatted, but with CRLF endings: harel reads it with universal newlines
        std::fs::write(
            dir.join("crlf.stm"),
            stm_core::fmt::format_text(MESSY).replace('\n', "\r\n"),
        )
        .expect("write");
    }
    let files = ["messy.stm", "tidy.stm", "crlf.stm"];

    // --check: exit 2, the files that would change, nothing written
    let check = |run: fn(&Path, &[&str]) -> Output, dir: &Path| {
        let mut args = vec!["fmt", "--check"];
        args.extend(files);
        run(dir, &args)
    };
    let (a, b) = (check(stm, &ours), check(harel, &theirs));
    assert_eq!((a.status.code(), b.status.code()), (Some(2), Some(2)));
    assert_eq!(text(&a.stderr), "would reformat: messy.stm\n");
    assert_eq!(text(&a.stderr), text(&b.stderr));
    assert_eq!(
        std::fs::read_to_string(ours.join("messy.stm")).expect("read"),
        MESSY,
        "--check writes nothing"
    );

    // --diff: the same unified diff
    let (a, b) = (
        stm(&ours, &["fmt", "--diff", "messy.stm"]),
        harel(&theirs, &["fmt", "--diff", "messy.stm"]),
    );
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(text(&a.stdout), text(&b.stdout));

    // the rewrite: the same bytes, the same report
    let mut args = vec!["fmt"];
    args.extend(files);
    let (a, b) = (stm(&ours, &args), harel(&theirs, &args));
    assert_eq!((a.status.code(), b.status.code()), (Some(0), Some(0)));
    assert_eq!(text(&a.stdout), "formatted messy.stm\n");
    assert_eq!(text(&a.stdout), text(&b.stdout));
    for file in files {
        assert_eq!(
            std::fs::read(ours.join(file)).expect("read"),
            std::fs::read(theirs.join(file)).expect("read"),
            "{file}"
        );
    }
    // and again: nothing to do
    let again = stm(&ours, &["fmt", "--check", "messy.stm"]);
    assert_eq!(again.status.code(), Some(0));

    // not UTF-8, or missing: one error line, exit 2
    std::fs::write(ours.join("latin1.stm"), b"machine M { # caf\xe9\n}\n").expect("write");
    let bad = stm(&ours, &["fmt", "latin1.stm"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        text(&bad.stderr),
        "error: latin1.stm is not UTF-8 text: a .stm file is UTF-8\n"
    );
    let missing = stm(&ours, &["fmt", "nope.stm"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).starts_with("error: cannot read nope.stm: "),
        "{}",
        text(&missing.stderr)
    );
    for dir in [ours, theirs] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

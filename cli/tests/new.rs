//! `stm new FILE [NAME] [--force]`, harel's `new`, through the binary: the starter it
//! writes is the very file `harel new` writes for the same arguments, `stm validate` says
//! ok and `stm run` prints what `harel run` prints for it; an existing file (without
//! `--force`), a NAME that is no identifier and a missing directory are refused with one
//! `error:` line and exit 2, and nothing is written.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{harel_in as harel, without_versions};

/// A fresh directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("stm-new-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make the temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `stm ARGS` in `dir`, with no `STM_*` variable in its environment.
fn stm(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.args(args).current_dir(dir);
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("STM_") {
            cmd.env_remove(var);
        }
    }
    cmd.output().expect("run stm")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Run and require exit 0; stdout.
fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{}{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// A usage error: exit 2, nothing on stdout, one `error:` line on stderr (returned).
fn refused(out: Output) -> String {
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr:\n{err}");
    assert_eq!(stdout(&out), "", "stdout of a refusal");
    assert_eq!(err.lines().count(), 1, "one line:\n{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn writes_a_starter_that_validates_and_runs() {
    let dir = TempDir::new("starter");
    let said = ok(stm(dir.path(), &["new", "door.stm"]), "stm new");
    assert_eq!(
        said,
        "created door.stm  (machine door)\n\
         next:\n  \
           stm validate door.stm\n  \
           stm run      door.stm -e Submit -e Approve\n"
    );
    let text = read(dir.path().join("door.stm"));
    assert!(text.contains("\nmachine door {\n"), "{text}");

    assert_eq!(
        without_versions(&ok(stm(dir.path(), &["validate", "door.stm"]), "stm validate")),
        "door: ok\n"
    );
    // and what it says to run, it runs: to the final state
    let ran = ok(
        stm(dir.path(), &["run", "door.stm", "-e", "Submit", "-e", "Approve"]),
        "stm run",
    );
    assert!(ran.ends_with("status: DONE  outcome: success\n"), "{ran}");
}

#[test]
fn the_same_file_as_harel_new_and_the_same_runs() {
    let ours = TempDir::new("ours");
    let theirs = TempDir::new("harel");
    std::fs::create_dir(ours.path().join("sub")).expect("mkdir");
    std::fs::create_dir(theirs.path().join("sub")).expect("mkdir");
    // (arguments, the file written, its machine)
    let cases: &[(&[&str], &str, &str)] = &[
        (&["new", "door.stm"], "door.stm", "door"),
        (&["new", "gate.stm", "Gate"], "gate.stm", "Gate"),
        (&["new", "my-door_2.stm"], "my-door_2.stm", "my_door_2"),
        (&["new", "2door.stm"], "2door.stm", "m_2door"),
        (&["new", "./sub//a.b.stm"], "sub/a.b.stm", "a_b"),
        (&["new", "noext"], "noext", "noext"),
        (&["new", "kw.stm", "state"], "kw.stm", "state"),
    ];
    for (args, file, machine) in cases {
        let said = ok(stm(ours.path(), args), "stm new");
        let harel_said = ok(harel(theirs.path(), args), "harel new");
        // the same message, with `stm` for `harel`
        assert_eq!(
            said,
            harel_said
                .replace("harel validate", "stm validate")
                .replace("harel run", "stm run")
        );
        assert_eq!(
            read(ours.path().join(file)),
            read(theirs.path().join(file)),
            "{args:?}: not the file harel writes"
        );

        let validated = without_versions(&ok(stm(ours.path(), &["validate", file]), "stm validate"));
        assert_eq!(validated, format!("{machine}: ok\n"));
        assert_eq!(
            validated,
            ok(harel(ours.path(), &["validate", file]), "harel validate")
        );

        for events in [
            &["Submit", "Approve"][..],
            &["Submit", "Reject"],
            &["Submit", "RequestChanges", "Submit", "Approve", "Submit"],
            &["Approve", "Submit"],
            &[],
        ] {
            let mut run = vec!["run", file];
            for kind in events {
                run.extend(["-e", kind]);
            }
            let transcript = ok(stm(ours.path(), &run), "stm run");
            assert_eq!(
                transcript,
                ok(harel(ours.path(), &run), "harel run"),
                "{args:?} {events:?}: stm run and harel run differ"
            );
        }
    }
}

#[test]
fn an_existing_file_is_refused_unless_forced() {
    let dir = TempDir::new("force");
    let file = dir.path().join("door.stm");
    std::fs::write(&file, "# mine\n").expect("write");

    let err = refused(stm(dir.path(), &["new", "door.stm"]));
    assert!(
        err.contains("door.stm already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(read(&file), "# mine\n", "overwritten without --force");

    ok(
        stm(dir.path(), &["new", "door.stm", "Gate", "--force"]),
        "stm new --force",
    );
    let text = read(&file);
    assert!(text.contains("\nmachine Gate {\n"), "{text}");

    // a directory is never overwritten
    let err = refused(stm(dir.path(), &["new", ".", "--force"]));
    assert!(err.contains("is a directory"), "{err}");
}

#[test]
fn a_bad_name_or_a_missing_directory_is_refused() {
    let dir = TempDir::new("bad");
    for name in ["my machine", "9x", "x-y", "a.b", "café"] {
        let err = refused(stm(dir.path(), &["new", "m.stm", name]));
        assert!(
            err.contains("not a machine name") && err.contains("letters, digits and _"),
            "{name:?}: {err}"
        );
    }
    let err = refused(stm(dir.path(), &["new", "rel/sub/x.stm"]));
    assert!(err.contains("no directory rel/sub"), "{err}");
    // nothing written, no directory made
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read_dir").collect();
    assert!(left.is_empty(), "{left:?}");
}

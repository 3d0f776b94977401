//! `stm new FILE [NAME] [--force]`: harel's `new`, a commented starter machine that
//! validates and runs as it is (no actions, so nothing to bind).
//!
//! The file is byte for byte what `harel new` writes for the same FILE and NAME: FILE as
//! Python's `pathlib` spells it (`./a//b.stm` is `a/b.stm`) and, without NAME, the machine
//! named after the file (`my-door_2.stm` is `my_door_2`, `2door.stm` is `m_2door`). Where
//! harel would write a file that does not parse (a NAME that is no identifier, a path with
//! a line break) or fail with a Python error, `stm new` says what is wrong and writes
//! nothing.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::errors::usage;
use crate::shell::shell_word;

/// The starter machine for `file` (as harel prints it) and machine `name`: harel 0.9.0's
/// template, so that `harel new` and `stm new` write the same bytes.
fn starter(file: &str, name: &str) -> String {
    format!(
        "\
# A starter harel machine. Next steps:
#   harel validate {file}
#   harel render   {file}            # PlantUML (add --mermaid for Mermaid)
#   harel run      {file} -e Submit -e Approve
#
# The DSL in a nutshell: declare the events, the initial state, the states, and the
# transitions (which live INSIDE the machine: `from <state> to <state> on <Event>`). A
# `final <Name> <outcome>` state is a terminal that carries a verdict.

# events are declared up front, so `validate` catches a typo'd event reference:
event Submit {{}}
event Approve {{}}
event Reject {{}}
event RequestChanges {{}}

machine {name} {{
  initial Draft

  state Draft {{}}
  state Review {{}}
  final Approved success
  final Rejected rejected

  from Draft  to Review    on Submit
  from Review to Approved  on Approve
  from Review to Rejected  on Reject
  from Review to Draft     on RequestChanges
}}
"
    )
}

/// Write a starter machine that validates and runs as it is (harel's `new`).
#[derive(Args)]
pub struct NewArgs {
    /// The .stm file to create (its directory must exist).
    file: PathBuf,
    /// The machine's name; default: from the file's name (`my-door.stm` is `my_door`).
    name: Option<String>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    force: bool,
}

/// `stm new`: write the starter machine to FILE (refused if it exists, unless `--force`)
/// and say how to validate and run it.
pub fn new_machine(args: NewArgs) -> Result<ExitCode> {
    let (file, name, force) = (args.file.as_path(), args.name.as_deref(), args.force);
    let shown = python_path(&file.to_string_lossy());
    if shown.contains('\n') {
        return Err(usage(format!(
            "{shown:?} has a line break: the starter names its file in comments, so name it without one"
        )));
    }
    let path = PathBuf::from(&shown);
    // harel takes an empty NAME as no NAME
    let name = match name.filter(|n| !n.is_empty()) {
        Some(name) => {
            check_name(name)?;
            name.to_string()
        }
        None => sanitize(python_stem(&shown)),
    };
    if path.is_dir() {
        return Err(usage(format!("{shown} is a directory: name a .stm file")));
    }
    if path.exists() && !force {
        return Err(usage(format!(
            "{shown} already exists (pass --force to overwrite it)"
        )));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent.filter(|p| !p.is_dir()) {
        return Err(usage(if parent.exists() {
            format!(
                "{} is not a directory, so {shown} cannot be created",
                parent.display()
            )
        } else {
            format!(
                "no directory {} for {shown} (create it first: mkdir -p {})",
                parent.display(),
                shell_word(&parent.to_string_lossy())
            )
        }));
    }
    let text = starter(&shown, &name);
    if force {
        std::fs::write(&path, text).with_context(|| format!("cannot write {shown}"))?;
    } else {
        // not over a file made since the check above
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    usage(format!("{shown} already exists (pass --force to overwrite it)"))
                }
                _ => anyhow::Error::new(e).context(format!("cannot write {shown}")),
            })?;
        out.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {shown}"))?;
    }
    let arg = shell_word(&shown);
    println!("created {shown}  (machine {name})");
    println!("next:");
    println!("  stm validate {arg}");
    println!("  stm run      {arg} -e Submit -e Approve");
    Ok(ExitCode::SUCCESS)
}

/// A machine name the `.stm` language takes: `[A-Za-z_][A-Za-z0-9_]*` (keywords included:
/// the parser reads them by context, as harel's does).
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let start_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if start_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(());
    }
    let suggestion = sanitize(name);
    let hint = if suggestion.chars().any(|c| c.is_ascii_alphanumeric()) {
        format!(" (say {suggestion})")
    } else {
        String::new()
    };
    Err(usage(format!(
        "{name:?} is not a machine name: use ASCII letters, digits and _, not starting with a digit{hint}"
    )))
}

/// harel's machine name for a file stem: every character but an ASCII letter, digit or `_`
/// becomes `_`, an empty stem is `machine`, and a leading digit gets `m_`. For every stem
/// where harel's name is an identifier this is harel's name; harel keeps non-ASCII letters,
/// which no `.stm` parser takes.
fn sanitize(stem: &str) -> String {
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.chars().next() {
        None => "machine".to_string(),
        Some(c) if c.is_ascii_digit() => format!("m_{name}"),
        Some(_) => name,
    }
}

/// `str(pathlib.Path(raw))` on POSIX: empty and `.` components dropped, slashes collapsed
/// (a leading `//`, exactly two, kept), no trailing slash, and `.` for nothing.
fn python_path(raw: &str) -> String {
    let root = if raw.starts_with("//") && !raw.starts_with("///") {
        "//"
    } else if raw.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = raw.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let joined = format!("{root}{}", parts.join("/"));
    if joined.is_empty() {
        ".".to_string()
    } else {
        joined
    }
}

/// `pathlib.Path(path).stem` (Python 3.11) for a path [`python_path`] spelled: the last
/// component without its suffix, where a suffix is a last `.` that neither starts nor ends
/// the name.
fn python_stem(path: &str) -> &str {
    let name = match path.rsplit_once('/') {
        Some((_, name)) => name,
        None if path == "." => "",
        None => path,
    };
    match name.rfind('.') {
        Some(i) if i > 0 && i < name.len() - 1 => &name[..i],
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_stems_as_pathlib_spells_them() {
        // (raw, str(Path(raw)), Path(raw).stem) as Python 3.11 prints them
        for (raw, path, stem) in [
            ("./a/./b.stm", "a/b.stm", "b"),
            ("a//b.stm", "a/b.stm", "b"),
            ("//a.stm", "//a.stm", "a"),
            ("///a.stm", "/a.stm", "a"),
            ("x.", "x.", "x."),
            (".stm", ".stm", ".stm"),
            ("a.b.stm", "a.b.stm", "a.b"),
            ("foo.stm/", "foo.stm", "foo"),
            ("..stm", "..stm", "."),
            ("a..stm", "a..stm", "a."),
            (".", ".", ""),
            ("a/.", "a", "a"),
            ("/", "/", ""),
            ("", ".", ""),
        ] {
            assert_eq!(python_path(raw), path, "{raw:?}");
            assert_eq!(python_stem(path), stem, "{raw:?}");
        }
    }

    #[test]
    fn names_from_stems_as_harel_makes_them() {
        for (stem, name) in [
            ("door", "door"),
            ("my-door_2", "my_door_2"),
            ("2door", "m_2door"),
            ("a.b", "a_b"),
            ("", "machine"),
            (".", "_"),
            ("café", "caf_"),
        ] {
            assert_eq!(sanitize(stem), name, "{stem:?}");
            assert!(check_name(&sanitize(stem)).is_ok(), "{stem:?}");
        }
        for bad in ["my machine", "9x", "ä", "x-y", "a.b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}

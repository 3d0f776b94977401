//! A fast path for `stm run`'s events on the command line. clap spends thousands of
//! instructions per value, so 20,000 `-e` flags cost more than running the 20,000 steps;
//! here the `-e KIND` / `--event KIND` / `-eKIND` / `--event=KIND` pairs are taken out of
//! the arguments before clap sees the rest, in order.
//!
//! All or nothing: if any event flag is not plainly one of those shapes (its value missing
//! or starting with `-`, which clap refuses or reads otherwise), nothing is taken out and
//! clap parses everything as before, errors and all. Arguments after `--` are never touched.

use std::ffi::OsString;

/// An argument as read here: its text, or the argument itself when it is not UTF-8. Each
/// argument's UTF-8 is checked once, when it is read, not again by every pass over it.
type Read = Result<String, OsString>;

/// `args` (the program name first) without `run`'s event flags, and those events, in
/// order. Only when the subcommand is `run`; otherwise `args` as they are and no events.
pub fn split_run_events(args: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    let args: Vec<Read> = args.into_iter().map(OsString::into_string).collect();
    let Some(command_at) = args
        .iter()
        .skip(1)
        .position(|a| !is_global_flag(a))
        .map(|i| i + 1)
    else {
        return (unread(args), Vec::new());
    };
    if text(&args[command_at]) != Some("run") || !all_plain(&args[command_at + 1..]) {
        return (unread(args), Vec::new());
    }
    // checked: now move the arguments rather than copy them (a separate `-e`'s value
    // becomes the event's text without a copy)
    let mut kept = Vec::with_capacity(command_at + 1);
    // at most one event per two arguments: no reallocation while 20,000 are taken out
    let mut events = Vec::with_capacity(args.len() / 2);
    let mut rest = args.into_iter();
    kept.extend(rest.by_ref().take(command_at + 1).map(os_string));
    while let Some(arg) = rest.next() {
        let Ok(text) = arg else {
            kept.push(os_string(arg));
            continue;
        };
        match classify(&text) {
            Arg::EndOfFlags => {
                kept.push(text.into());
                kept.extend(rest.map(os_string));
                break;
            }
            // `all_plain` saw a UTF-8 value here
            Arg::Flag => events.extend(rest.next().and_then(Result::ok)),
            Arg::Value(v) => events.push(v.to_string()),
            Arg::Other | Arg::Refused => kept.push(text.into()),
        }
    }
    (kept, events)
}

/// The argument's text, if it is UTF-8.
fn text(arg: &Read) -> Option<&str> {
    arg.as_deref().ok()
}

/// The argument back as the command line gave it (no copy).
fn os_string(arg: Read) -> OsString {
    arg.map_or_else(|raw| raw, OsString::from)
}

fn unread(args: Vec<Read>) -> Vec<OsString> {
    args.into_iter().map(os_string).collect()
}

/// What one argument after `run` is, to this fast path.
enum Arg<'a> {
    /// `-e` or `--event`: the value is the next argument.
    Flag,
    /// `-eKIND` or `--event=KIND`.
    Value(&'a str),
    /// `--`: what follows is not flags.
    EndOfFlags,
    /// `-e=KIND`: clap's own reading (the value `=KIND`), left to it.
    Refused,
    Other,
}

fn classify(text: &str) -> Arg<'_> {
    if text == "--" {
        Arg::EndOfFlags
    } else if text == "-e" || text == "--event" {
        Arg::Flag
    } else if let Some(v) = text.strip_prefix("--event=") {
        Arg::Value(v)
    } else if let Some(v) = text.strip_prefix("-e").filter(|_| !text.starts_with("--")) {
        if v.is_empty() || v.starts_with('=') {
            Arg::Refused
        } else {
            Arg::Value(v)
        }
    } else {
        Arg::Other
    }
}

/// Whether every event flag in `rest` (the arguments after `run`) is plainly one of the
/// shapes taken here: a separate value that is UTF-8 and does not start with `-` (clap
/// refuses or reads otherwise), and no `-e=KIND`.
fn all_plain(rest: &[Read]) -> bool {
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        let Some(arg) = text(arg) else {
            continue;
        };
        match classify(arg) {
            Arg::EndOfFlags => return true,
            Arg::Refused => return false,
            Arg::Flag => match rest.next().and_then(text) {
                Some(v) if !v.starts_with('-') => {}
                _ => return false,
            },
            Arg::Value(_) | Arg::Other => {}
        }
    }
    true
}

/// The flags `stm` takes before its subcommand.
fn is_global_flag(arg: &Read) -> bool {
    matches!(text(arg), Some("-v" | "--verbose"))
}

#[cfg(test)]
mod tests {
    use super::split_run_events;
    use std::ffi::OsString;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn run_events_are_taken_out_in_order() {
        let (kept, events) = split_run_events(args(&[
            "stm",
            "run",
            "m.stm",
            "-e",
            "Go",
            "--event",
            "Back",
            "-eA:{}",
            "--seed",
            "{}",
            "--event=B",
            "M",
        ]));
        assert_eq!(kept, args(&["stm", "run", "m.stm", "--seed", "{}", "M"]));
        assert_eq!(events, ["Go", "Back", "A:{}", "B"]);
        let (kept, events) = split_run_events(args(&["stm", "-v", "run", "m.stm", "-e", "Go"]));
        assert_eq!(
            (kept, events),
            (args(&["stm", "-v", "run", "m.stm"]), vec!["Go".to_string()])
        );
    }

    #[test]
    fn anything_unusual_is_left_to_clap() {
        for list in [
            &["stm", "run", "m.stm", "-e"][..],
            &["stm", "run", "m.stm", "-e", "Go", "-e", "--json"],
            &["stm", "run", "m.stm", "-e=Go"],
            &["stm", "validate", "m.stm", "-e", "Go"],
            &["stm"],
        ] {
            let (kept, events) = split_run_events(args(list));
            assert_eq!(kept, args(list), "{list:?}");
            assert!(events.is_empty(), "{list:?}");
        }
        let (kept, events) = split_run_events(args(&["stm", "run", "m.stm", "-e", "Go", "--", "-e", "X"]));
        assert_eq!(kept, args(&["stm", "run", "m.stm", "--", "-e", "X"]));
        assert_eq!(events, ["Go"]);
    }
}

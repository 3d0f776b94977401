//! `stm versions check`'s verdicts. Each folder of `tests/version_check/` holds two
//! versions of a machine (`old.stm`, `new.stm`) and two records of the report from one to
//! the other:
//!
//! - `verdict`, hand-written and never written by the test: the compatibility class
//!   (unchanged, safe, at risk) and every change as its severity, subject, at-risk path and
//!   kind, checked against the report's fields (not its text);
//! - `expected.txt`, the report as text (its wording), golden.
//!
//! `STM_BLESS=1` rewrites the `expected.txt` files, printing each rewrite for review, and
//! only when every verdict holds: a bless can reword the report, it cannot change what the
//! report decides (that takes editing a `verdict` by hand).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stm_core::version::diff::{diff, Report, Severity};

fn load(path: &Path) -> stm_core::Definition {
    stm_core::dsl::load_definition_file(path, None).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn case_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/version_check");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("the cases folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 15,
        "expected at least 15 pairs, found {}",
        cases.len()
    );
    cases
}

/// The kind of a change, from the start of its text: a vocabulary of its own, so that a
/// rewording the verdicts do not know is an `unknown` kind (a failure), not a pass.
fn kind_of(what: &str) -> String {
    const KINDS: &[(&str, &str)] = &[
        ("removed", "removed"),
        ("no longer declared", "removed"),
        ("added", "added"),
        ("declared", "added"),
        ("was ", "kind-changed"),
        ("regions ", "regions-changed"),
        // before "transition ": the same prefix
        ("transitions on ", "transitions-reordered"),
        ("timeout ", "timeout-changed"),
        ("invoke ", "invoke-changed"),
        ("on enter ", "on-enter-changed"),
        ("on exit ", "on-exit-changed"),
        ("on activity ", "on-activity-changed"),
        ("outcome ", "outcome-changed"),
        ("initial ", "initial-changed"),
        ("defers ", "defers-changed"),
        ("what a region carries", "carry-changed"),
        ("an entry recorded for", "history-entry-lost"),
        ("type ", "type-changed"),
        ("now required", "now-required"),
        ("default changed", "default-changed"),
        ("fields changed", "fields-changed"),
        ("ttl ", "ttl-changed"),
        ("no longer invoked", "no-longer-invoked"),
        ("compiled differently", "recompiled"),
    ];
    if let Some(rest) = what.strip_prefix("transition ") {
        if rest.contains(" removed or changed") {
            return "transition-removed".into();
        }
        if rest.ends_with(" added") {
            return "transition-added".into();
        }
    }
    KINDS
        .iter()
        .find(|(prefix, _)| what.starts_with(prefix))
        .map_or_else(|| format!("unknown ({what})"), |(_, kind)| kind.to_string())
}

/// One change as a verdict line: `severity | subject | path | kind`.
fn line(severity: &str, subject: &str, path: &str, kind: &str) -> String {
    format!("{severity} | {subject} | {path} | {kind}")
}

fn report_lines(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report
        .changes
        .iter()
        .map(|c| {
            let severity = if c.severity == Severity::AtRisk {
                "at risk"
            } else if c.severity == Severity::Safe {
                "safe"
            } else {
                "unknown severity"
            };
            let path = match c.path.as_deref() {
                None => "-",
                Some("") => "*",
                Some(p) => p,
            };
            line(severity, &c.subject, path, &kind_of(&c.what))
        })
        .collect();
    // which order the report lists them in is the text's business (expected.txt)
    lines.sort();
    lines
}

/// The class the report gives the pair.
fn report_class(report: &Report) -> &'static str {
    match (report.changes.is_empty(), report.at_risk()) {
        (true, _) => "unchanged",
        (false, true) => "at-risk",
        (false, false) => "safe",
    }
}

/// A case's hand-written `verdict`.
struct Verdict {
    class: String,
    /// Sorted, as [`report_lines`].
    lines: Vec<String>,
}

fn read_verdict(case: &Path) -> Result<Verdict, String> {
    let path = case.join("verdict");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (every case needs a hand-written verdict)",
            path.display()
        )
    })?;
    let mut class = None;
    let mut lines = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{}:{}: {why}: {raw}", path.display(), n + 1);
        if let Some(c) = raw.strip_prefix("class:") {
            class = Some(c.trim().to_string());
            continue;
        }
        let fields: Vec<&str> = raw.split('|').map(str::trim).collect();
        let [severity, subject, at, kind] = fields[..] else {
            return Err(bad("not `severity | subject | path | kind`"));
        };
        if !["at risk", "safe"].contains(&severity) {
            return Err(bad("the severity is `at risk` or `safe`"));
        }
        lines.push(line(severity, subject, at, kind));
    }
    lines.sort();
    let class = class.ok_or_else(|| format!("{}: no `class:` line", path.display()))?;
    // the class is the headline; the lines must agree with it, or the verdict is a typo
    let implied = if lines.is_empty() {
        "unchanged"
    } else if lines.iter().any(|l| l.starts_with("at risk |")) {
        "at-risk"
    } else {
        "safe"
    };
    if class != implied {
        return Err(format!(
            "{}: class {class}, but its change lines make it {implied}",
            path.display()
        ));
    }
    Ok(Verdict { class, lines })
}

/// Where the report disagrees with the verdict, if anywhere.
fn disagreements(report: &Report, verdict: &Verdict) -> Vec<String> {
    let mut out = Vec::new();
    let class = report_class(report);
    if class != verdict.class {
        out.push(format!("class: verdict {}, report {class}", verdict.class));
    }
    // a real change must move the version (pins and migrations go by it), and only a real
    // change may
    let same_version = report.old_version == report.new_version;
    if same_version != (verdict.class == "unchanged") {
        out.push(format!(
            "versions {} -> {} for a verdict of {}",
            report.old_version, report.new_version, verdict.class
        ));
    }
    let got = report_lines(report);
    if got != verdict.lines {
        let before = out.len();
        for missing in verdict.lines.iter().filter(|l| !got.contains(l)) {
            out.push(format!("verdict has, report lacks: {missing}"));
        }
        for extra in got.iter().filter(|l| !verdict.lines.contains(l)) {
            out.push(format!("report has, verdict lacks: {extra}"));
        }
        if out.len() == before {
            out.push(format!(
                "{} changes in the verdict, {} in the report (a line repeated)",
                verdict.lines.len(),
                got.len()
            ));
        }
    }
    // what a deploy acts on: whether an execution sitting at a path is at risk (the path
    // itself or an ancestor of it at risk, `*` every path)
    let at_risk_paths: Vec<&str> = verdict
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("at risk | "))
        .filter_map(|l| l.split(" | ").nth(1))
        .collect();
    let paths: BTreeSet<&str> = verdict
        .lines
        .iter()
        .filter_map(|l| l.split(" | ").nth(2))
        .filter(|p| *p != "-" && *p != "*")
        .collect();
    for path in paths {
        let expected = at_risk_paths
            .iter()
            .any(|p| *p == "*" || *p == path || path.starts_with(&format!("{p}.")));
        if report.is_at_risk_path(path) != expected {
            out.push(format!(
                "is_at_risk_path({path}): verdict {expected}, report {}",
                !expected
            ));
        }
    }
    out
}

#[test]
fn every_pair_reports_what_its_verdict_and_golden_file_say() {
    let bless = std::env::var_os("STM_BLESS").is_some();
    let mut wrong = Vec::new();
    let mut differ = Vec::new();
    let mut rewrites = Vec::new();
    for case in &case_dirs() {
        let report = diff(&load(&case.join("old.stm")), &load(&case.join("new.stm")));
        // the versions are hashes: the wording is what is golden, not the digits
        let text = report
            .to_string()
            .replace(&report.old_version.to_string(), "OLD")
            .replace(&report.new_version.to_string(), "NEW");
        match read_verdict(case) {
            Err(e) => wrong.push(e),
            Ok(verdict) => {
                let off = disagreements(&report, &verdict);
                if !off.is_empty() {
                    wrong.push(format!(
                        "--- {}\n  {}\nthe report:\n{text}",
                        case.display(),
                        off.join("\n  ")
                    ));
                }
            }
        }
        let expected_file = case.join("expected.txt");
        let expected = std::fs::read_to_string(&expected_file).unwrap_or_default();
        if text != expected {
            differ.push(format!(
                "--- {}\nexpected:\n{expected}\ngot:\n{text}",
                case.display()
            ));
            rewrites.push((expected_file, expected, text));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}the report disagrees with the hand-written verdict (fix the code, or the verdict by hand):\n{}",
        if bless { "nothing blessed: " } else { "" },
        wrong.join("\n")
    );
    if bless {
        for (file, was, now) in &rewrites {
            std::fs::write(file, now).expect("write the expected report");
            eprintln!("blessed {}\n--- was\n{was}+++ now\n{now}", file.display());
        }
        return;
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn comments_and_layout_keep_the_version_and_any_real_change_moves_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/version_check");
    let old = load(&root.join("01-reformatted/old.stm"));
    let same = load(&root.join("01-reformatted/new.stm"));
    assert_eq!(
        stm_core::version::version_of(&old),
        stm_core::version::version_of(&same)
    );
    for case in [
        "02-leaf-renamed",
        "07-assignment-changed",
        "12-hooks-changed",
        "16-machine-ttl",
    ] {
        let new = load(&root.join(case).join("new.stm"));
        assert_ne!(
            stm_core::version::version_of(&old),
            stm_core::version::version_of(&new),
            "{case}"
        );
    }
}

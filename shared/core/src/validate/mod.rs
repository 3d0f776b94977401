//! Static checks on a [`Definition`], the rules of harel 0.9.0's
//! `definition/validate.py`.
//!
//! A pure pass over the immutable graph that catches the structural defects the builder
//! does not: unresolved selector targets, missing composite initials, non-deterministic
//! automatic transitions, unreachable states, references to undeclared events, event
//! fields and context fields, terminals without a verdict, teardown (`Cancel` /
//! `Expired`) transitions that don't end the execution, and the rest.
//!
//! Findings come in harel's order (per node in declaration order, then the
//! machine-wide passes) with harel's codes and message text; [`Finding`]'s `Display`
//! prints what `harel validate` prints, prefixed by `file:line:col: ` where known.
//! [`Finding::harel_text`] gives the bare harel line.
//!
//! Deliberate differences from harel:
//! - harel collects the event fields a transition reads in a Python `set`, so the order of
//!   several `unknown_event_field` findings for one transition varies from run to run
//!   there; here it is the order of first appearance.
//! - A literal timeout above [`MAX_TIMEOUT_SECONDS`] is an error (`timeout_too_large`).
//!   harel 0.9.0 accepts any positive int, and a timer's `fire_at` (now plus the timeout)
//!   is stored as a DynamoDB number: past 1E+126 every commit entering the state fails in
//!   DynamoDB (`ValidationException`) and is retried until the dead-letter queue. That is
//!   a harel bug, so the extra finding is on purpose.

mod context;
mod endings;
mod events;
mod graph;
mod nodes;
mod reads;
mod structure;

use std::fmt;

use serde::Serialize;

use crate::definition::{Definition, Node, NodeId, Pos};
use reads::preorder;

/// The longest literal `timeout`, in seconds: 2^53 - 1 (about 285 million years).
///
/// A timer fires at `now + timeout`, both seconds as a float (a Python `float` in harel,
/// an `f64` here), and the store writes that `fire_at` as a DynamoDB number, spelled as
/// Python's `repr` of the float. 2^53 - 1 is the largest integer a float holds exactly, so
/// a longer literal would not even be the number of seconds written (`2^53 + 1` reads as
/// `2^53`); below it `fire_at` stays under 2^54, whose `repr` has at most 17 significant
/// digits and a magnitude far inside what DynamoDB holds (38 significant digits,
/// 1E-130 to below 1E+126), so every timer this accepts can be stored.
pub const MAX_TIMEOUT_SECONDS: u64 = (1 << 53) - 1;

/// How bad a [`Finding`] is: an error blocks running the machine, a warning does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation finding (harel's `Issue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// harel's rule id (`unreachable`, `unknown_event`, ...).
    pub code: String,
    pub message: String,
    /// The `full_path` of the node the finding is about (`""` is the machine root).
    pub path: Option<String>,
    /// 1-based source position of the node or transition, when the definition has one.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The source file (the definition's `source_file`), when known.
    pub file: Option<String>,
    /// What to do about it beyond harel's message ("did you mean `Go`?"), when there is
    /// something to say; not part of [`harel_text`](Self::harel_text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Exactly what harel's `str(issue)` prints: `[error] code at Path: message`.
    pub fn harel_text(&self) -> String {
        let at = match self.path.as_deref() {
            Some(p) if !p.is_empty() => p,
            _ => "<root>",
        };
        format!("[{}] {} at {}: {}", self.severity, self.code, at, self.message)
    }

    /// `file:line:col` (or the parts of it that are known), `None` if nothing is.
    pub fn location(&self) -> Option<String> {
        let pos = self.line.map(|l| match self.column {
            Some(c) => format!("{l}:{c}"),
            None => l.to_string(),
        });
        match (&self.file, pos) {
            (Some(f), Some(p)) => Some(format!("{f}:{p}")),
            (Some(f), None) => Some(f.clone()),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        }
    }
}

impl Finding {
    /// The finding in the shape `stm` reports a parse error in (one shape for all that is
    /// wrong with a file): `error[code]: message`, where (`--> file:line:col`), the line
    /// of `source` (the file's text) with a caret, and the hint (did you mean ...).
    ///
    /// ```
    /// let source = "event Go {}\nmachine M {\n  initial A\n  state A {}\n  final B success\n  from A to B on Gox\n}\n";
    /// let defn = stm_core::dsl::load_definition_str(source, None, None).expect("it parses");
    /// let findings = stm_core::validate::validate(&defn);
    /// assert_eq!(
    ///     findings[0].rendered(Some(source)),
    ///     "error[unknown_event]: transition references undeclared event 'Gox'\n \
    ///      --> 6:18\n  |\n6 |   from A to B on Gox\n  |                  ^\n  = hint: did you mean `Go`?"
    /// );
    /// ```
    pub fn rendered(&self, source: Option<&str>) -> String {
        let mut head = format!("{}[{}]: {}", self.severity, self.code, self.message);
        if let Some(path) = self.path.as_deref().filter(|p| !p.is_empty()) {
            head.push_str(&format!(" (in {path})"));
        }
        let at = crate::dsl::Position {
            line: self.line,
            column: self.column,
            snippet: source
                .zip(self.line)
                .and_then(|(s, l)| crate::dsl::source_line(s, l)),
        };
        let mut out = String::new();
        let _ = crate::dsl::write_diagnostic(&mut out, &head, self.location(), at, self.hint.as_deref());
        out
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = self.location() {
            write!(f, "{loc}: ")?;
        }
        f.write_str(&self.harel_text())?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Each finding of `defn` [`rendered`](Finding::rendered) with the line it is about,
/// read from its file (the machine's own, or the imported one it names), each file read
/// once: how every `stm` surface shows what a machine gets wrong (`stm validate`, `stm run
/// --validate`, a definitions folder that does not load).
pub fn rendered_all<'a>(defn: &Definition, findings: impl IntoIterator<Item = &'a Finding>) -> Vec<String> {
    let mut sources: std::collections::HashMap<String, Option<String>> = std::collections::HashMap::new();
    findings
        .into_iter()
        .map(|finding| {
            let source = finding
                .file
                .as_ref()
                .or(defn.source_file.as_ref())
                .and_then(|file| {
                    sources
                        .entry(file.clone())
                        .or_insert_with(|| std::fs::read_to_string(file).ok())
                        .clone()
                });
            finding.rendered(source.as_deref())
        })
        .collect()
}

/// Whether any finding is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_error)
}

/// Every finding on `defn` (errors and warnings), in harel's order; empty when the
/// machine is well-formed. Inline submachines are not descended into (as in harel):
/// validate each of `defn.submachines` on its own if wanted.
pub fn validate(defn: &Definition) -> Vec<Finding> {
    let mut v = Validator {
        defn,
        order: preorder(defn),
        out: Vec::new(),
    };
    v.run();
    v.out
}

// --- the validator ---------------------------------------------------------------

// The checks are split by concern over the child modules: `nodes` (per node), `graph`,
// `events`, `context` and `endings` (machine-wide), on the queries of `structure` and
// the readers of `reads`.
struct Validator<'a> {
    defn: &'a Definition,
    order: Vec<NodeId>,
    out: Vec<Finding>,
}

impl<'a> Validator<'a> {
    fn node(&self, id: NodeId) -> &'a Node {
        self.defn.node(id)
    }

    fn push(&mut self, code: &str, severity: Severity, at: NodeId, pos_of: Option<&Pos>, message: String) {
        let node = self.defn.node(at);
        let pos = pos_of.or(node.pos.as_ref());
        self.out.push(Finding {
            severity,
            code: code.to_string(),
            message,
            path: Some(node.full_path.clone()),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            file: self.defn.source_file.clone(),
            hint: None,
        });
    }

    fn error(&mut self, code: &str, at: NodeId, pos: Option<&Pos>, message: String) {
        self.push(code, Severity::Error, at, pos, message);
    }

    fn warning(&mut self, code: &str, at: NodeId, pos: Option<&Pos>, message: String) {
        self.push(code, Severity::Warning, at, pos, message);
    }

    fn run(&mut self) {
        let order = self.order.clone();
        for &id in &order {
            self.check_selectors(id);
            self.check_initial(id);
            self.check_timeout(id);
            self.check_outcome(id);
            self.check_invoke(id);
            self.check_with(id);
        }
        self.check_nondeterminism();
        self.check_reachability();
        self.check_events();
        self.check_context_refs();
        self.check_context_defaults();
        self.check_cancel_targets();
        self.check_choose_can_hang();
        self.check_ttl();
        self.check_terminal_outcomes();
    }
}
